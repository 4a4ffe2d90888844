//! The helper: the process that becomes the sandbox's *supervisor* and forks the command.
//!
//! It starts in one of two ways ([`crate::run::HelperStart`]):
//! - **exec** (from a multithreaded host, where only this is safe): the runner `posix_spawn`s
//!   its own binary with `argv[0] = "localgpt-sandbox"`; the [`HelperPlan`] arrives as JSON in
//!   `$LOCALGPT_SANDBOX_PLAN` (removed at once, and kept out of `ps`), `argv[1..]` is the command,
//!   and the environment is already the scrubbed one;
//! - **fork** (the default from a single-threaded process, the CLI's case): a forked copy of the
//!   runner calls [`run_helper`] with the plan in memory, which saves one `execve` per run. That
//!   copy still holds the runner's memory, the caller's environment included, until it exits;
//!   the command cannot read it (Landlock denies ptrace-mode access, `/proc/<pid>/environ` and
//!   `mem` included, to processes outside its domain, and at Full the supervisor is outside the
//!   command's PID namespace), and at Minimal level the runner's own memory is as reachable.
//!
//! Either way fd 3 is the report pipe, and the helper ([`run_helper`]):
//!
//! 1. starts a new session, becomes a child subreaper, asks for `SIGTERM` if the runner dies,
//!    and joins the per-run cgroup — this process stays as the *supervisor*;
//! 2. at Full level unshares user and PID namespaces and forks PID 1, which sets up the other
//!    namespaces and the mounts;
//! 3. forks the command process (from PID 1 at Full), which sets `PR_SET_PDEATHSIG(SIGKILL)`,
//!    applies the plan ([`crate::linux::apply::apply_confinement`]), reports what it applied on
//!    fd 3 and execs with the plan's environment;
//! 4. the supervisor waits, kills every leftover descendant, and exits with the command's status.
//!
//! A forking runner at Full level goes shorter ([`run_namespace_init`]): it clones the helper
//! straight into new user and PID namespaces, so the helper *is* PID 1 and there is no
//! supervisor: PID 1 dies with the runner, and the kernel kills everything left in the namespace
//! when PID 1 exits.
//!
//! Reports on fd 3 are typed messages ([`crate::run::report::Report`]): what was applied, a
//! setup failure and its step (nothing was executed), an `exec` failure, the wait status from a
//! cloned PID 1, degradations.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::linux::apply::{apply_confinement, REPORT_FD};
use crate::run::report::{Report, SetupStep};
use crate::linux::{namespaces, supervise};
use crate::plan::HelperPlan;

pub use crate::run::report::{HELPER_ARGV0, PLAN_ENV};

pub(crate) use crate::run::report::send as report;

/// Writes one report message on fd 3 with `fd` attached (`SCM_RIGHTS`; fd 3 must be a socket).
fn report_with_fd(r: &Report, fd: i32) -> std::io::Result<()> {
    crate::run::fds::send_with_fds(REPORT_FD, r.encode().as_bytes(), &[fd])
}

/// Reports a setup error on fd 3 (nothing was executed) and exits.
pub(crate) fn fail(msg: &str) -> ! {
    fail_at(SetupStep::Other, msg)
}

/// Reports a setup error at `step` on fd 3 (nothing was executed) and exits.
pub(crate) fn fail_at(step: SetupStep, msg: &str) -> ! {
    report(&Report::SetupFailed { step, message: msg.to_string() });
    // SAFETY: terminate without running destructors.
    unsafe { libc::_exit(127) }
}

/// Entry point of the helper. Never returns.
pub fn helper_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().collect();
    let plan_json = std::env::var_os(PLAN_ENV);
    let (Some(plan_json), true) = (plan_json, args.len() >= 2) else {
        eprintln!("localgpt-sandbox: internal helper; run `localgpt sandbox run` instead");
        // SAFETY: immediate exit.
        unsafe { libc::_exit(2) }
    };
    // The helper is single-threaded: removing the variable cannot race.
    std::env::remove_var(PLAN_ENV);
    let plan: HelperPlan = match serde_json::from_slice(plan_json.as_bytes()) {
        Ok(p) => p,
        Err(e) => fail(&format!("decode plan: {e}")),
    };
    crate::timing::stamp("plan_decoded");
    let argv: Vec<CString> = match args[1..].iter().map(|a| CString::new(a.as_bytes())).collect() {
        Ok(v) => v,
        Err(e) => fail(&format!("command argument: {e}")),
    };
    run_helper(&plan, &argv)
}

/// The helper's work once it has its plan and the command's argv: supervisor set-up, the
/// namespaces (Full), the fork of the command (through PID 1 at Full) and supervision. Runs in
/// the re-executed helper ([`helper_main`]) or in a forked copy of a single-threaded runner
/// ([`crate::run::HelperStart::Auto`]); either way fds 0–3 are in place and the process is
/// single-threaded. Never returns.
pub fn run_helper(plan: &HelperPlan, argv: &[CString]) -> ! {
    // SAFETY: plain syscalls on our own process.
    unsafe {
        if plan.confine && !crate::ablation::is(&plan.ablated, crate::plan::ProtectionId::TtyInjection) && libc::setsid() < 0 {
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
    join_cgroup(plan);
    if plan.namespaces.is_some() && crate::linux::apply::has_prebuilt() {
        // A ruleset is offered only for a plan without namespaces: its rules were opened in the
        // runner's mount namespace, not in the fresh root the command will see.
        fail("a prebuilt Landlock ruleset was offered for a plan with namespaces");
    }
    if let Some(ns) = &plan.namespaces {
        if let Err(e) = namespaces::enter_user_and_pid_namespaces(ns) {
            fail_at(SetupStep::UserNamespace, &e);
        }
        crate::timing::stamp("user_pid_ns");
    }
    supervise::install_stop_handlers();
    // At Full level init (PID 1) cannot die of its own signal, so it sends the command's raw
    // wait status to the supervisor through this pipe.
    let mut status_pipe = [-1i32; 2];
    // SAFETY: pipe2 writes two fds.
    if plan.namespaces.is_some() && unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        fail(&format!("pipe: {}", std::io::Error::last_os_error()));
    }
    crate::timing::stamp("fork");
    let pid = match &plan.namespaces {
        // Standard and minimal: the command's process. It enforces the ruleset the runner
        // built for it, if any (taken from the memory it shares with us until its exec); our
        // copy of the descriptor is closed once it has started.
        None => {
            let offered = crate::linux::apply::has_prebuilt();
            let pid = spawn_command(plan, argv);
            // Still offered: the command's process stopped before it took it; closed with it.
            if offered && !crate::linux::apply::withdraw_prebuilt() {
                // SAFETY: the offered ruleset's descriptor in this process, used by nothing else.
                unsafe { libc::close(crate::linux::apply::PREBUILT_FD) };
            }
            pid
        }
        // Full: PID 1 of the new PID namespace, which lives on as its init, so a real fork.
        Some(ns) => {
            let pid = fork_child();
            if pid == 0 {
                // SAFETY: closing our copy of the read end.
                unsafe { libc::close(status_pipe[0]) };
                let cmd = start_init(plan, ns, argv);
                // SAFETY: init keeps no copy of the report pipe.
                unsafe { libc::close(REPORT_FD) };
                let fd = status_pipe[1];
                // SAFETY: writing 4 bytes from a local to our own pipe.
                supervise::run_init(cmd, |st| unsafe {
                    libc::write(fd, st.to_ne_bytes().as_ptr().cast(), 4);
                })
            }
            pid
        }
    };
    // SAFETY: the supervisor keeps no copy of the report pipe, so EOF means "exec done"; nor of
    // the status pipe's write end.
    unsafe {
        libc::close(REPORT_FD);
        if status_pipe[1] >= 0 {
            libc::close(status_pipe[1]);
        }
    }
    supervise::supervise(pid, (status_pipe[0] >= 0).then_some(status_pipe[0]), !crate::ablation::is(&plan.ablated, crate::plan::ProtectionId::TimeoutKillTree))
}

fn join_cgroup(plan: &HelperPlan) {
    if plan.cgroup_procs.is_empty() {
        return;
    }
    crate::timing::stamp("cgroup_join");
    for procs in &plan.cgroup_procs {
        if let Err(e) = std::fs::write(procs, b"0") {
            fail(&format!("join cgroup {}: {e}", procs.display()));
        }
    }
    crate::timing::stamp("cgroup_joined");
}

/// Full level from a single-threaded runner, which cloned this process straight into new user
/// and PID namespaces: this process is PID 1, with no supervisor in between. It dies with the
/// runner (`PR_SET_PDEATHSIG(SIGKILL)`, and `lifeline`, a pidfd of the runner, catches a runner
/// that died before that was set), and the kernel then kills every process of the namespace.
/// It joins the per-run cgroup, maps its uid/gid, sets up the remaining namespaces and mounts,
/// forks the command, and reports the command's raw wait status on fd 3 (`S<status>`) before
/// exiting. Never returns.
pub fn run_namespace_init(plan: &HelperPlan, argv: &[CString]) -> ! {
    let Some(ns) = &plan.namespaces else { fail("no namespace plan") };
    // SAFETY: plain syscalls on our own process.
    unsafe {
        if !crate::ablation::is(&plan.ablated, crate::plan::ProtectionId::TtyInjection) && libc::setsid() < 0 {
            fail(&format!("setsid: {}", std::io::Error::last_os_error()));
        }
    }
    join_cgroup(plan);
    if let Err(e) = namespaces::write_id_maps(ns) {
        fail_at(SetupStep::UserNamespace, &e);
    }
    crate::timing::stamp("user_pid_ns");
    crate::timing::stamp("fork");
    let cmd = start_init(plan, ns, argv);
    supervise::run_init(cmd, |st| {
        crate::timing::forget();
        crate::timing::stamp("command_reaped");
        crate::timing::flush("supervisor");
        report(&Report::Status(st));
    })
}

/// PID 1's start, whichever way it was created: the mount, net, IPC and UTS namespaces and the
/// mounts, then the fork of the command (which never returns here). Returns the command's pid.
fn start_init(plan: &HelperPlan, ns: &crate::linux::mounts::NamespacePlan, argv: &[CString]) -> i32 {
    if let Err(e) = namespaces::setup_init_namespaces(ns, &plan.ablated, plan.terminal) {
        fail(&e);
    }
    crate::timing::stamp("init_namespaces");
    if let Some(port) = plan.proxy_port {
        // The allowlist proxy's socket, on the namespace's loopback: made here, before anything
        // of the command runs, and handed to the runner, which serves it. PID 1 keeps no copy.
        match namespaces::loopback_listener(port) {
            Ok(l) => {
                if let Err(e) = report_with_fd(&Report::ProxyListening(port), std::os::fd::AsRawFd::as_raw_fd(&l)) {
                    fail(&format!("pass the proxy's socket to the runner: {e}"));
                }
            }
            Err(e) => fail(&format!("proxy socket on 127.0.0.1:{port}: {e}")),
        }
        // The DNS stub's socket, the same way (the command's resolv.conf names 127.0.0.1).
        match namespaces::loopback_udp(53) {
            Ok(s) => {
                if let Err(e) = report_with_fd(&Report::DnsListening, std::os::fd::AsRawFd::as_raw_fd(&s)) {
                    fail(&format!("pass the DNS stub's socket to the runner: {e}"));
                }
            }
            Err(e) => fail(&format!("DNS stub socket on 127.0.0.1:53: {e}")),
        }
    }
    if plan.seccomp_listener && !ns.host_network {
        // The runner's broker asks sock_diag which unix sockets listen in this namespace: the
        // socket must be made in it, before the command runs (with the host's network the
        // runner's own serves). PID 1 keeps no copy.
        match crate::linux::unixgrant::diag_socket() {
            Ok(d) => {
                if let Err(e) = report_with_fd(&Report::SocketDiag, std::os::fd::AsRawFd::as_raw_fd(&d)) {
                    fail(&format!("pass the sock_diag socket to the runner: {e}"));
                }
            }
            Err(e) => fail(&format!("sock_diag socket: {e}")),
        }
    }
    spawn_command(plan, argv)
}

/// Starts the command's process, which confines itself and execs ([`exec_confined`]); returns
/// its pid. The child shares this process's memory until its `execve` (`CLONE_VM |
/// CLONE_VFORK`, as `posix_spawn` does), so the page tables are not copied and the child's
/// writes do not fault in private copies of this process's pages; this process waits in the
/// kernel until the child has exec'd or exited. That is sound here because the caller (the
/// supervisor, or PID 1) is single-threaded and suspended while the child runs: the child's
/// allocations and its writes to statics happen with nothing else running in the address
/// space, and what it leaves behind is a few leaked allocations of a process that exits with
/// the run. Every signal is blocked around the clone, so none of this process's handlers runs
/// in the child before it resets them; the child's mask is cleared just before `execve`
/// ([`supervise::reset_signals_for_exec`]), so a signal sent meanwhile acts then. The timing
/// stamps (`LOCALGPT_SANDBOX_TIMING`), which the child flushes as its own, are put back.
fn spawn_command(plan: &HelperPlan, argv: &[CString]) -> i32 {
    /// The child's stack until `execve`: confinement and the report need far less.
    const STACK: usize = 1 << 20;
    struct Start<'a> {
        plan: &'a HelperPlan,
        argv: &'a [CString],
        parent: i32,
    }
    extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `Start` on the parent's stack, which stays as it is while the
        // parent is suspended (until this child execs or exits).
        let start = unsafe { &*arg.cast::<Start<'_>>() };
        // A panic must not unwind out of the clone's entry point (release builds abort anyway).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            child_start(start.parent);
            exec_confined(start.plan, start.argv)
        }));
        // SAFETY: leave without running anything of the parent's.
        unsafe { libc::_exit(127) }
    }
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    let start = Start { plan, argv, parent };
    // SAFETY: a fresh private anonymous mapping; its lowest page becomes the guard.
    let stack = unsafe { libc::mmap(std::ptr::null_mut(), STACK, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK, -1, 0) };
    if stack == libc::MAP_FAILED {
        fail(&format!("mmap the command's start stack: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the first page of the mapping just made.
    if unsafe { libc::mprotect(stack, 4096, libc::PROT_NONE) } != 0 {
        fail(&format!("mprotect the command's start stack guard: {}", std::io::Error::last_os_error()));
    }
    let saved = crate::timing::save();
    // SAFETY: sigset_t is plain data, filled by sigfillset; the old mask is restored below.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: blocking signals of our own single-threaded process; `child` and `start` live
    // until clone returns, which (CLONE_VFORK) is after the child's execve or exit; the stack's
    // top is 16-byte aligned.
    let (pid, err) = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let top = stack.cast::<u8>().add(STACK).cast::<libc::c_void>();
        let pid = libc::clone(child, top, libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD, std::ptr::from_ref(&start).cast_mut().cast());
        let err = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::munmap(stack, STACK);
        (pid, err)
    };
    crate::timing::restore(saved);
    if pid < 0 {
        fail(&format!("clone the command's process: {err}"));
    }
    pid
}

/// In a new child (of [`fork_child`] or [`spawn_command`]): the stop handlers reset, death with
/// the parent, and an exit if the parent was already gone.
fn child_start(parent: i32) {
    supervise::reset_stop_handlers();
    // SAFETY: plain syscalls on our own process. In a new PID namespace getppid() of PID 1
    // is 0, so the check only applies when the parent is visible.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        let pp = libc::getppid();
        if pp != parent && pp != 0 && libc::getpid() != 1 {
            libc::_exit(127);
        }
    }
}

/// Forks; the child resets the stop handlers and dies with its parent.
fn fork_child() -> i32 {
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the helper is single-threaded (fresh exec), so fork is safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        fail(&format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        child_start(parent);
    }
    pid
}

/// The command's process, whose stdin is a pseudo-terminal of its own
/// ([`crate::run::StdinMode::Terminal`]): a session of its own with that terminal as its
/// controlling terminal, so that the terminal's signals (Ctrl-C, Ctrl-Z, a resize) reach the
/// program in its foreground and nothing else (not PID 1, not the supervisor). Before
/// confinement: seccomp and Landlock have no say in it.
fn take_terminal() {
    // SAFETY: plain syscalls on our own process; TIOCSCTTY with 0 never steals a terminal
    // that is another session's.
    unsafe {
        if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
            fail(&format!("make the pseudo-terminal the command's controlling terminal: {}", std::io::Error::last_os_error()));
        }
    }
}

/// Confines the calling process and execs the command; never returns.
fn exec_confined(plan: &HelperPlan, argv: &[CString]) -> ! {
    crate::timing::stamp("child");
    if plan.terminal {
        take_terminal();
    }
    // SAFETY: keep the report pipe across confinement but close it on exec.
    unsafe { libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
    let applied = match apply_confinement(plan) {
        Ok(a) => a,
        Err(e) => fail(&e),
    };
    match crate::linux::apply::take_seccomp_listener() {
        // The listener goes to the runner with the report (SCM_RIGHTS: the report channel is
        // then a socketpair) and is closed here: the command must never hold it.
        Some(l) => {
            if let Err(e) = report_with_fd(&Report::Applied(applied), std::os::fd::AsRawFd::as_raw_fd(&l)) {
                fail(&format!("pass the seccomp listener to the runner: {e}"));
            }
            drop(l);
        }
        None => report(&Report::Applied(applied)),
    }
    crate::timing::stamp("exec");
    crate::timing::flush("command");
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    supervise::reset_signals_for_exec();
    // SAFETY: NUL-terminated argv of valid C strings.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    report(&Report::ExecFailed(e));
    // SAFETY: exec failed; exit like a shell does.
    unsafe { libc::_exit(if e == libc::ENOENT { 127 } else { 126 }) }
}
