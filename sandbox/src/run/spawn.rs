//! Starting the helper: on Linux a fork of a single-threaded runner (cloned straight into new
//! user and PID namespaces at Full level), or `posix_spawn` of the runner's own binary as
//! `localgpt-sandbox` from a multithreaded one; on macOS `posix_spawn` of `sandbox-exec`.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[cfg(target_os = "linux")]
use super::fds::close;
use super::fds::cstr;
use crate::error::SandboxError;

/// The helper's fds 0–3, as the runner's descriptors (`stdin: None` = inherit ours).
pub(crate) struct HelperFds {
    pub(crate) stdin: Option<i32>,
    pub(crate) out: i32,
    pub(crate) err: i32,
    pub(crate) report: i32,
}


#[cfg(target_os = "linux")]
extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// Forks a copy of this (single-threaded) process that becomes the helper: fds 0–3 as
/// [`HelperFds`] says and nothing above, default signal dispositions (`SIGPIPE` ignored, as in a
/// freshly started Rust helper) and an empty mask, the plan's environment as `environ` (so that
/// the command's `execvp` searches the plan's `PATH` and passes on only the plan's variables);
/// then [`crate::linux::helper::run_helper`]. Returns the child's pid.
#[cfg(target_os = "linux")]
pub(crate) fn fork_helper(plan: &crate::plan::HelperPlan, argv: &[CString], env: &[CString], fds: &HelperFds) -> Result<i32, SandboxError> {
    // Full level: clone the child straight into new user and PID namespaces, so that it is PID 1
    // itself (no supervisor process in between: one fork and one exit less). It needs a pidfd of
    // this process to notice a runner that died before it could ask for a parent-death signal;
    // without pidfds (< 5.3) the helper starts as a supervisor, as when exec'd.
    // SAFETY: pidfd_open of our own pid.
    let lifeline = if plan.namespaces.is_some() { unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as i32 } } else { -1 };
    if lifeline >= 0 {
        crate::linux::namespaces::record_host_pid_max();
    }
    // SAFETY: the caller checked that this process is single-threaded, so the child may run
    // ordinary code; it never returns into the caller (run_helper and fail never return). The
    // raw clone (fork semantics: no CLONE_VM, SIGCHLD to us) is what bubblewrap does too.
    let pid = unsafe {
        if lifeline >= 0 {
            libc::syscall(libc::SYS_clone, (libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::SIGCHLD) as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) as i32
        } else {
            libc::fork()
        }
    };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        close(lifeline);
        if lifeline >= 0 {
            return Err(SandboxError::NamespacesUnavailable(format!(
                "clone(CLONE_NEWUSER|CLONE_NEWPID) (unshare of the user and PID namespaces): {e}"
            )));
        }
        return Err(SandboxError::io("fork sandbox helper", e));
    }
    if pid > 0 {
        close(lifeline);
        return Ok(pid);
    }
    if lifeline >= 0 {
        // SAFETY: plain syscalls on our own process; a pollfd on a local.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            let mut p = libc::pollfd { fd: lifeline, events: libc::POLLIN, revents: 0 };
            if libc::poll(&mut p, 1, 0) != 0 {
                libc::_exit(127); // the runner is gone (or the pidfd is unusable): run nothing
            }
        }
    }
    become_helper(&[fds.stdin, Some(fds.out), Some(fds.err), Some(fds.report)], env, crate::ablation::is(&plan.ablated, crate::plan::ProtectionId::InheritedFds));
    if lifeline >= 0 {
        crate::linux::helper::run_namespace_init(plan, argv)
    }
    crate::linux::helper::run_helper(plan, argv)
}

/// In a freshly forked (single-threaded) child that is to become the helper: `srcs` (stdin —
/// `None` keeps fd 0 as it is —, stdout, stderr, report) become fds 0–3 and every descriptor
/// above is closed, the signal dispositions are the defaults (`SIGPIPE` ignored, as in a freshly
/// started Rust helper) with an empty mask, and `env` becomes `environ` (its strings must
/// outlive the helper, which never returns; `keep_fds`: the ablation build's cut of
/// `inherited-fds`, [`crate::plan::HelperPlan::ablated`], keeps the descriptors above), so that the command's `execvp` searches the plan's
/// `PATH` and passes on only the plan's variables; the timing stamps restart as `env` asks. From
/// here fd 3 is the report channel; a failure before it is in place exits with 127.
#[cfg(target_os = "linux")]
pub(crate) fn become_helper(srcs: &[Option<i32>; 4], env: &[CString], keep_fds: bool) {
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let name = crate::timing::TIMING_ENV.as_bytes();
    let timing = env.iter().any(|e| e.as_bytes().starts_with(name) && e.as_bytes().get(name.len()) == Some(&b'='));
    // SAFETY: (whole block) the child arranges its own fds.
    unsafe {
        // Move the sources out of 0..=3 first, so that no dup2 overwrites a source not yet moved.
        let mut high = [-1i32; 4];
        for (i, s) in srcs.iter().enumerate() {
            if let Some(fd) = *s {
                high[i] = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
                if high[i] < 0 {
                    libc::_exit(127);
                }
            }
        }
        // A Landlock ruleset the runner built for this helper's command goes to fd 4 (still
        // close-on-exec), the fds above are closed.
        let ruleset = match crate::linux::apply::prebuilt_fd() {
            Some(fd) => match libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) {
                r if r < 0 => libc::_exit(127),
                r => r,
            },
            None => -1,
        };
        for (target, &fd) in high.iter().enumerate() {
            if fd >= 0 && libc::dup2(fd, target as i32) < 0 {
                libc::_exit(127);
            }
        }
        if srcs[0].is_none() {
            libc::fcntl(0, libc::F_SETFD, 0);
        }
        if ruleset >= 0 {
            if libc::dup3(ruleset, crate::linux::apply::PREBUILT_FD, libc::O_CLOEXEC) < 0 {
                libc::_exit(127);
            }
            crate::linux::apply::keep_prebuilt_at_its_fd();
        }
    }
    let first = if crate::linux::apply::has_prebuilt() { crate::linux::apply::PREBUILT_FD as u32 + 1 } else { 4 };
    if let Err(e) = if keep_fds { Ok(()) } else { crate::linux::apply::close_fds_from(first) } {
        crate::linux::helper::fail(&format!("helper fds: {e}"));
    }
    // SAFETY: resetting dispositions and the mask of our own single-threaded process; setting
    // `environ` to a NUL-terminated array of C strings that live until exec (this process never
    // returns, so the strings and `envp` are never freed).
    unsafe {
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        environ = envp.as_ptr();
    }
    std::mem::forget(envp);
    crate::timing::restart(timing);
    crate::timing::stamp("start");
}

/// Spawns the helper; returns its pid.
pub(crate) fn spawn_helper(exe: &Path, args: &[CString], env: &[CString], fds: &HelperFds) -> Result<i32, SandboxError> {
    let (stdin_fd, out, err, rep) = (fds.stdin, fds.out, fds.err, fds.report);
    let exe_c = cstr(exe.as_os_str().as_bytes(), "helper path")?;
    let mut argv: Vec<*mut libc::c_char> = args.iter().map(|a| a.as_ptr() as *mut _).collect();
    argv.push(std::ptr::null_mut());
    let mut envp: Vec<*mut libc::c_char> = env.iter().map(|a| a.as_ptr() as *mut _).collect();
    envp.push(std::ptr::null_mut());
    // SAFETY: posix_spawn file actions and attributes are initialised, used and destroyed here;
    // every pointer stays valid for the duration of the call.
    unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        libc::posix_spawnattr_init(&mut attr);
        if let Some(fd) = stdin_fd {
            libc::posix_spawn_file_actions_adddup2(&mut fa, fd, 0);
        }
        libc::posix_spawn_file_actions_adddup2(&mut fa, out, 1);
        libc::posix_spawn_file_actions_adddup2(&mut fa, err, 2);
        libc::posix_spawn_file_actions_adddup2(&mut fa, rep, 3);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigdelset(&mut all, libc::SIGKILL);
        libc::sigdelset(&mut all, libc::SIGSTOP);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::posix_spawnattr_setsigdefault(&mut attr, &all);
        libc::posix_spawnattr_setsigmask(&mut attr, &none);
        libc::posix_spawnattr_setflags(&mut attr, (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as _);
        let mut pid: libc::pid_t = 0;
        let r = libc::posix_spawn(&mut pid, exe_c.as_ptr(), &fa, &attr, argv.as_ptr(), envp.as_ptr());
        libc::posix_spawn_file_actions_destroy(&mut fa);
        libc::posix_spawnattr_destroy(&mut attr);
        if r != 0 {
            return Err(SandboxError::io("spawn sandbox helper", std::io::Error::from_raw_os_error(r)));
        }
        Ok(pid)
    }
}
