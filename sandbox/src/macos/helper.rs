//! The helper on macOS. `sandbox-exec` applies the profile and execs this binary with
//! [`HELPER_FLAG`] and the command; here it checks that it really runs under a Seatbelt profile
//! (`sandbox_check` on itself), starts a new session, sets the plan's rlimits, closes every fd
//! above 3, reports what it applied on fd 3 and execs the command. Anything that fails is
//! reported and nothing runs. It decides nothing: the plan comes from the runner.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

pub use crate::run::report::HELPER_FLAG;
use crate::run::report::{AppliedReport, Report, SetupStep, PLAN_ENV};
use crate::plan::HelperPlan;

use crate::run::report::REPORT_FD;

extern "C" {
    /// `int sandbox_check(pid_t pid, const char *operation, int type, ...)` from libsystem_sandbox
    /// (part of libSystem): with no operation, 1 when `pid` runs under a sandbox profile.
    fn sandbox_check(pid: libc::pid_t, operation: *const libc::c_char, filter_type: libc::c_int, ...) -> libc::c_int;
}

/// This process was started as the helper: `argv[1]` is [`HELPER_FLAG`] and the plan is in the
/// environment.
#[must_use]
pub fn is_helper() -> bool {
    std::env::args_os().nth(1).is_some_and(|a| a == HELPER_FLAG) && std::env::var_os(PLAN_ENV).is_some()
}

fn report(r: &Report) {
    let line = r.encode();
    // SAFETY: fd 3 is the report pipe the runner gave us; writing a local buffer.
    unsafe { libc::write(REPORT_FD, line.as_ptr().cast(), line.len()) };
}

fn fail(msg: &str) -> ! {
    report(&Report::SetupFailed { step: SetupStep::Other, message: msg.to_string() });
    // SAFETY: terminate without running destructors.
    unsafe { libc::_exit(127) }
}

/// Entry point of the helper. Never returns.
pub fn helper_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().collect();
    let Some(plan_json) = std::env::var_os(PLAN_ENV) else { fail("no plan") };
    // Single-threaded here: removing the variable cannot race.
    std::env::remove_var(PLAN_ENV);
    let plan: HelperPlan = match serde_json::from_slice(plan_json.as_bytes()) {
        Ok(p) => p,
        Err(e) => fail(&format!("decode plan: {e}")),
    };
    let argv: Vec<CString> = match args.iter().skip(2).map(|a| CString::new(a.as_bytes())).collect() {
        Ok(v) => v,
        Err(e) => fail(&format!("command argument: {e}")),
    };
    if argv.is_empty() {
        fail("no command");
    }
    if let Err(e) = std::env::set_current_dir(&plan.cwd) {
        fail(&format!("chdir {}: {e}", plan.cwd.display()));
    }
    // SAFETY (whole block): plain system calls on our own process.
    unsafe {
        if plan.seatbelt && sandbox_check(libc::getpid(), std::ptr::null(), 0) != 1 {
            fail("the helper is not running under a Seatbelt profile: refusing to run the command");
        }
        if plan.confine && libc::setsid() < 0 {
            fail(&format!("setsid: {}", std::io::Error::last_os_error()));
        }
        // Every descriptor above the report pipe is closed: up to the higher of the soft
        // limits before and after the plan's are set (a lowered limit leaves higher ones open).
        let mut before = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut before);
        for &(resource, soft, value) in &plan.rlimits {
            let mut cur = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::getrlimit(resource, &mut cur);
            let hard = if cur.rlim_max == libc::RLIM_INFINITY { value } else { value.min(cur.rlim_max) };
            let rl = libc::rlimit { rlim_cur: soft.min(hard), rlim_max: hard };
            if libc::setrlimit(resource, &rl) != 0 {
                fail(&format!("setrlimit({resource}, {soft}, {hard}): {}", std::io::Error::last_os_error()));
            }
        }
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        let top = i32::try_from(rl.rlim_cur.max(before.rlim_cur).min(1 << 16)).unwrap_or(1 << 16);
        for fd in 4..top {
            libc::close(fd);
        }
        libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    report(&Report::Applied(AppliedReport { seatbelt: plan.seatbelt, ..AppliedReport::default() }));
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: a NUL-terminated argv of C strings that live until exec.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    report(&Report::ExecFailed(e));
    // SAFETY: terminate without running destructors.
    unsafe { libc::_exit(127) }
}
