//! The supervisor half of the helper: a child subreaper that waits for the command, kills every
//! remaining descendant (setsid'd and double-forked ones included, since they are reparented to
//! it) when the command exits or when it is told to stop, and exits with the command's status.

use std::sync::atomic::{AtomicI32, Ordering};

static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

pub use crate::host::set_signal_handlers as set_handlers;

/// Installs handlers for the signals that mean "stop the sandbox".
pub fn install_stop_handlers() {
    set_handlers(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP], on_stop);
}

/// Restores default dispositions (in the command's process, before exec).
pub fn reset_stop_handlers() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: resetting a disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// Gives the command the signal state a shell expects: `SIGPIPE` back to its default action
/// (the Rust runtime ignores it in the helper, and an ignored disposition survives exec, so
/// `yes | head` printed "Broken pipe" errors instead of dying quietly) and an empty signal mask.
pub fn reset_signals_for_exec() {
    // SAFETY: resetting a disposition and the mask of our own (single-threaded) process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Direct children of `pid`, read from `/proc/<pid>/task/*/children`.
fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for t in tasks.filter_map(Result::ok) {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|x| x.parse::<i32>().ok()));
        }
    }
    out
}

/// Every descendant of `root` (breadth first).
#[must_use]
pub fn descendants(root: i32) -> Vec<i32> {
    let mut all = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for c in children_of(p) {
            if !all.contains(&c) && all.len() < 1_000_000 {
                all.push(c);
                frontier.push(c);
            }
        }
    }
    all
}

/// Reaps whatever has exited, without blocking. Returns `None` when there are no children.
fn reap_nonblocking() -> Option<usize> {
    let mut n = 0;
    loop {
        let mut st = 0;
        // SAFETY: waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if r > 0 {
            n += 1;
            continue;
        }
        if r == 0 {
            return Some(n);
        }
        return if n > 0 { Some(n) } else { None };
    }
}

/// Kills every descendant of the calling process and reaps them all.
pub fn kill_all_descendants() {
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    loop {
        if reap_nonblocking().is_none() {
            return; // no children at all: nothing can be left below us
        }
        let d = descendants(me);
        for pid in &d {
            // SAFETY: signalling a pid of our own subtree.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        if reap_nonblocking() == Some(0) {
            // Killed processes are dying; give the kernel a moment.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Waits for `child`, then cleans up the tree and exits with the child's status — or with the
/// raw wait status init reported on `status_fd` (Full level). `kill_tree` is false only where
/// the ablation build cut `timeout-kill-tree` ([`crate::plan::HelperPlan::ablated`]).
pub fn supervise(child: i32, status_fd: Option<i32>, kill_tree: bool) -> ! {
    let mut status: Option<i32> = None;
    let mut stopped = false;
    loop {
        let sig = STOP_SIGNAL.load(Ordering::SeqCst);
        if sig != 0 && !stopped {
            stopped = true;
            if kill_tree {
                kill_all_descendants();
            }
        }
        let mut st = 0;
        // SAFETY: waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r == child {
            status = Some(st);
            break;
        }
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            if e == Some(libc::EINTR) {
                continue;
            }
            break; // ECHILD
        }
    }
    crate::timing::stamp("command_reaped");
    if kill_tree {
        kill_all_descendants();
    }
    crate::timing::stamp("cleanup_done");
    crate::timing::flush("supervisor");
    if let (Some(fd), Some(_)) = (status_fd, status) {
        let mut raw = [0u8; 4];
        // SAFETY: reading 4 bytes into a local buffer from our own pipe.
        if unsafe { libc::read(fd, raw.as_mut_ptr().cast(), 4) } == 4 {
            status = Some(i32::from_ne_bytes(raw));
        }
    }
    let sig = STOP_SIGNAL.load(Ordering::SeqCst);
    match status {
        Some(st) if libc::WIFEXITED(st) => exit_now(libc::WEXITSTATUS(st)),
        Some(st) if libc::WIFSIGNALED(st) => die_by_signal(libc::WTERMSIG(st)),
        _ if sig != 0 => die_by_signal(sig),
        _ => exit_now(125),
    }
}

fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns; nothing needs flushing in the supervisor.
    unsafe { libc::_exit(code) }
}

fn die_by_signal(sig: i32) -> ! {
    // SAFETY: restoring the default action, no core file, then re-raising the command's signal.
    unsafe {
        let lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &lim);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig)
    }
}

static FORWARD_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_forward(sig: libc::c_int) {
    FORWARD_SIGNAL.store(sig, Ordering::SeqCst);
}

/// PID 1 of the sandbox's PID namespace: reaps every zombie, forwards termination signals to
/// the command, hands the command's raw wait status to `report` (PID 1 cannot die of its own
/// signal, so its parent learns it from there) and exits with the command's status (the kernel
/// then kills whatever is left in the namespace).
pub fn run_init(command: i32, report: impl Fn(i32)) -> ! {
    set_handlers(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2], on_forward);
    loop {
        let mut st = 0;
        // SAFETY: waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r == command {
            report(st);
            if libc::WIFEXITED(st) {
                exit_now(libc::WEXITSTATUS(st));
            }
            // PID 1 cannot kill itself with a default-action signal: the supervisor re-raises it.
            exit_now(128 + libc::WTERMSIG(st));
        }
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {
                    let sig = FORWARD_SIGNAL.swap(0, Ordering::SeqCst);
                    if sig != 0 {
                        // SAFETY: signalling our own child.
                        unsafe { libc::kill(command, sig) };
                    }
                }
                _ => exit_now(125),
            }
        }
    }
}
