//! The re-executed helper (`argv[0] = "localgpt-sandbox"`).
//!
//! `argv[1]` is the [`HelperPlan`] as JSON, `argv[2..]` the command; fd 3 is the report pipe.
//! The environment was already scrubbed by the runner (the helper never sees the caller's
//! secrets). The helper:
//!
//! 1. starts a new session, becomes a child subreaper, asks for `SIGTERM` if the runner dies,
//!    and joins the per-run cgroup — this process stays as the *supervisor*;
//! 2. forks the command process, which sets `PR_SET_PDEATHSIG(SIGKILL)`, applies the plan
//!    ([`crate::linux::apply::apply_confinement`]), reports what it applied on fd 3 and execs;
//! 3. the supervisor waits, kills every leftover descendant, and exits with the command's status.
//!
//! Report lines on fd 3: `R<json AppliedReport>` after confinement, `E<message>` when setup
//! failed (nothing was executed), `X<errno>` when exec failed.

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;

use crate::linux::apply::{apply_confinement, REPORT_FD};
use crate::linux::supervise;
use crate::plan::HelperPlan;

/// The argv[0] that selects the helper.
pub const HELPER_ARGV0: &str = "localgpt-sandbox";

fn report(line: &str) {
    // SAFETY: fd 3 is the report pipe given by the runner; ManuallyDrop keeps it open.
    let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(REPORT_FD) });
    let _ = f.write_all(line.as_bytes());
}

fn fail(msg: &str) -> ! {
    report(&format!("E{}\n", msg.replace('\n', " ")));
    // SAFETY: terminate without running destructors.
    unsafe { libc::_exit(127) }
}

/// Entry point of the helper. Never returns.
pub fn helper_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.len() < 3 {
        eprintln!("localgpt-sandbox: internal helper; run `localgpt sandbox run` instead");
        // SAFETY: immediate exit.
        unsafe { libc::_exit(2) }
    }
    let plan: HelperPlan = match serde_json::from_slice(args[1].as_bytes()) {
        Ok(p) => p,
        Err(e) => fail(&format!("decode plan: {e}")),
    };
    let argv: Vec<CString> = match args[2..].iter().map(|a| CString::new(a.as_bytes())).collect() {
        Ok(v) => v,
        Err(e) => fail(&format!("command argument: {e}")),
    };
    // SAFETY: plain syscalls on our own process.
    unsafe {
        if plan.confine && libc::setsid() < 0 {
            fail(&format!("setsid: {}", std::io::Error::last_os_error()));
        }
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            fail(&format!("PR_SET_CHILD_SUBREAPER: {}", std::io::Error::last_os_error()));
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        if libc::getppid() != plan.parent_pid {
            fail("the runner exited before the sandbox started");
        }
    }
    if let Some(procs) = &plan.cgroup_procs {
        if let Err(e) = std::fs::write(procs, b"0") {
            fail(&format!("join cgroup {}: {e}", procs.display()));
        }
    }
    supervise::install_stop_handlers();
    // SAFETY: pid of the supervisor, read before fork.
    let supervisor = unsafe { libc::getpid() };
    // SAFETY: the helper is single-threaded (fresh exec), so fork is safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        fail(&format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        supervise::reset_stop_handlers();
        // SAFETY: plain syscalls on our own process.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != supervisor {
                libc::_exit(127);
            }
            libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let applied = match apply_confinement(&plan) {
            Ok(a) => a,
            Err(e) => fail(&e),
        };
        report(&format!("R{}\n", serde_json::to_string(&applied).unwrap_or_default()));
        let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        // SAFETY: NUL-terminated argv of valid C strings.
        unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        report(&format!("X{e}\n"));
        // SAFETY: exec failed; exit like a shell does.
        unsafe { libc::_exit(if e == libc::ENOENT { 127 } else { 126 }) }
    }
    // SAFETY: the supervisor keeps no copy of the report pipe, so EOF means "exec done".
    unsafe { libc::close(REPORT_FD) };
    supervise::supervise(pid)
}
