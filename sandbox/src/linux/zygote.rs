//! The helper factory of a multithreaded host: one small single-threaded process per helper
//! binary that forks helpers on request, so that a host with threads (an async agent, every
//! [`crate::handle::Sandbox::spawn`]) no longer pays an `execve` and a fresh start of the
//! helper binary per run.
//!
//! After `fork` in a multithreaded process only async-signal-safe code may run, so such a host
//! could only `posix_spawn` its helper binary for every run (~0.7 ms on a small VM). Instead, the
//! first run that needs it starts the *zygote*: the helper binary exec'd once as
//! `localgpt-sandbox-zygote`, from a keeper thread of the host that lives as long as the process
//! (a parent-death signal follows the parent *thread*, so neither the zygote's nor the helpers'
//! may be a runner thread that ends with its run). The zygote holds nothing of the host — a fresh
//! exec, an empty environment, no descriptor but its end of a socketpair (and `/dev/null` on 0
//! and 1, the host's stderr on 2) — and dies with the host (`PR_SET_PDEATHSIG` and the
//! socketpair's end of file). Nothing else can reach it: the socketpair has no name, and the
//! host's end is close-on-exec.
//!
//! A request is one run's helper: its plan (JSON, as the exec'd helper gets it in
//! `$LOCALGPT_SANDBOX_PLAN`), argv, environment and the four descriptors that become its fds 0–3
//! (`SCM_RIGHTS`). The zygote clones with `CLONE_PARENT`, so the helper is the *host's* child
//! (the runner waits for it, takes its pidfd and its wait status exactly as for an exec'd one)
//! and answers with its pid; the clone becomes the helper as a forked runner's copy does
//! ([`crate::run::spawn::become_helper`], then [`crate::linux::helper::run_helper`]; at Full it
//! is cloned straight into new user and PID namespaces and is their PID 1, with no supervisor:
//! [`crate::linux::helper::run_namespace_init`]). When the
//! zygote cannot be started or answer, the runner `posix_spawn`s the helper as before: the
//! zygote changes how fast a helper starts, never what it enforces.
//!
//! An exec'd helper inherits what the plan does not set from the calling thread (umask, ids,
//! capabilities, no-new-privileges, seccomp filters, namespaces, Landlock domain); a zygote's
//! helper inherits it from the thread that started the zygote. So a zygote serves only threads in
//! the state it was started in (`/proc/thread-self/status` and `ns/*`, and for Landlock, which
//! does not show there, whether the thread may inspect the zygote): a host that confines one of
//! its threads after its first run gets a zygote of its own for that thread, whose helpers are as
//! confined as the thread. What neither shows — resource limits the plan does not set — comes
//! from the zygote's start.

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::SandboxError;
use crate::run::fds::{read_with_fd, send_with_fds};
use crate::run::spawn::HelperFds;

/// `argv[0]` of the zygote (dispatched by [`crate::dispatch`]).
pub const ZYGOTE_ARGV0: &str = "localgpt-sandbox-zygote";

/// The first word of every request.
const MAGIC: u32 = 0x4c47_5a31;
/// Request flag: a stdin descriptor is passed (fourth).
const FLAG_STDIN: u32 = 1;
/// Request flag: the plan has namespaces (Full): clone the helper straight into new user and PID
/// namespaces as their PID 1, as a forking runner does.
const FLAG_NS_INIT: u32 = 2;
/// Request flag: a Landlock ruleset built for the plan is passed (last), its rule count in the
/// payload ([`crate::linux::rulesets`]); the helper offers it to the command's process.
const FLAG_RULESET: u32 = 4;
/// The largest request accepted (a plan with thousands of paths is well below).
const MAX_PAYLOAD: usize = 64 << 20;
/// The zygote's end of the socketpair.
const ZYGOTE_FD: i32 = 3;
/// How long a new zygote has to say it is one.
const HELLO_WAIT_MS: i32 = 10_000;

/// A running zygote of one helper binary, as the host holds it.
struct Zygote {
    exe: PathBuf,
    sock: OwnedFd,
    pid: i32,
    /// The host process that started it: a forked copy of the host inherits the socket, but
    /// the zygote's helpers are the original host's children, so the copy starts its own.
    host: i32,
    /// [`inherited_state`] of the thread that started it.
    state: Vec<u8>,
}

/// At most this many zygotes per process (one per helper binary and confinement state of the
/// calling threads); past it, helpers are exec'd.
const MAX_ZYGOTES: usize = 8;

/// The lines of `/proc/thread-self/status` that a helper inherits from the thread that starts it
/// and its plan does not set.
const INHERITED: &[&str] = &["Umask:", "Uid:", "Gid:", "Groups:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"];

/// What an exec'd helper would inherit from the calling thread and a zygote's helper inherits
/// from the thread that started the zygote instead: the umask, ids and capabilities, the
/// no-new-privileges bit, the seccomp filters and the namespaces. A zygote serves only threads
/// in the state it was started in, so that a host that confines a thread of its own (seccomp,
/// `setns`, dropped capabilities) never gets helpers that escape it. Landlock domains do not show
/// here; [`same_domain`] checks those.
fn inherited_state() -> Vec<u8> {
    use std::io::Read;
    let mut f = Vec::new();
    // The calling thread's directory looked up once, each file then relative to it (nine path
    // walks through /proc/thread-self cost ~50 µs of every spawn).
    // SAFETY: open of a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe { libc::open(c"/proc/thread-self".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return f;
    }
    // SAFETY: just opened, ours.
    let dir = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: openat relative to our descriptor with a NUL-terminated name.
    let status = unsafe { libc::openat(dir.as_raw_fd(), c"status".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if status >= 0 {
        // SAFETY: just opened, ours.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(status) });
        let mut buf = Vec::with_capacity(4096);
        if file.read_to_end(&mut buf).is_ok() {
            for l in buf.split(|&b| b == b'\n').filter(|l| INHERITED.iter().any(|p| l.starts_with(p.as_bytes()))) {
                f.extend_from_slice(l);
                f.push(b'\n');
            }
        }
    }
    for ns in [c"ns/mnt", c"ns/user", c"ns/pid_for_children", c"ns/net", c"ns/ipc", c"ns/uts", c"ns/cgroup", c"ns/time_for_children"] {
        let mut link = [0u8; 128];
        // SAFETY: readlinkat relative to our descriptor into a local buffer of the given size.
        let n = unsafe { libc::readlinkat(dir.as_raw_fd(), ns.as_ptr(), link.as_mut_ptr().cast(), link.len()) };
        if let Ok(n) = usize::try_from(n) {
            f.extend_from_slice(&link[..n]);
            f.push(b'\n');
        }
    }
    f
}

/// Whether the calling thread may inspect process `pid` (`PTRACE_MODE_READ`: opening its
/// `environ`). A thread in a Landlock domain may not inspect a process outside it, so a zygote
/// started before the thread restricted itself fails this and is not used by it.
fn same_domain(pid: i32) -> bool {
    std::fs::File::open(format!("/proc/{pid}/environ")).is_ok()
}

/// The host's zygotes; the lock also serialises requests.
static ZYGOTES: Mutex<Zygotes> = Mutex::new(Zygotes { running: Vec::new(), refused: Vec::new() });

struct Zygotes {
    /// One per helper binary and state of the calling threads.
    running: Vec<Zygote>,
    /// Helper binaries that did not start as a zygote: exec'd from then on.
    refused: Vec<PathBuf>,
}

/// Keeper threads that are blocked in `waitpid` for their zygote and do nothing else.
static IDLE_KEEPERS: AtomicUsize = AtomicUsize::new(0);
/// The process whose threads [`IDLE_KEEPERS`] counts (a forked copy of the host has none).
static KEEPERS_OF: AtomicI32 = AtomicI32::new(0);

/// How many of this process's threads are zygote keepers blocked in `waitpid` (see
/// [`single_threaded`]).
pub(crate) fn idle_keepers() -> usize {
    // SAFETY: getpid cannot fail.
    if KEEPERS_OF.load(Ordering::SeqCst) == unsafe { libc::getpid() } {
        IDLE_KEEPERS.load(Ordering::SeqCst)
    } else {
        0
    }
}

/// True when the calling thread is the only one of this process that runs code
/// (`/proc/self/status`), the others being zygote keepers idle in `waitpid`
/// (this module's).
pub(crate) fn single_threaded() -> bool {
    let idle = idle_keepers();
    crate::detect::read_small("/proc/self/status")
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim().parse::<usize>().ok() == Some(1 + idle))))
        .unwrap_or(false)
}

/// A request as bytes: header (magic, payload length, flags) and
/// payload (lengths and the passed ruleset's rule count, then the plan, argv and environment,
/// each string NUL-terminated).
fn encode(plan_json: &[u8], argv: &[CString], env: &[CString], rules: u32, flags: u32) -> (Vec<u8>, Vec<u8>) {
    let mut payload = Vec::with_capacity(plan_json.len() + 64);
    for n in [plan_json.len(), argv.len(), env.len(), rules as usize] {
        payload.extend_from_slice(&(n as u32).to_le_bytes());
    }
    payload.extend_from_slice(plan_json);
    for s in argv.iter().chain(env) {
        payload.extend_from_slice(s.as_bytes_with_nul());
    }
    let mut header = Vec::with_capacity(12);
    for n in [MAGIC, payload.len() as u32, flags] {
        header.extend_from_slice(&n.to_le_bytes());
    }
    (header, payload)
}

/// A decoded request's payload.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    plan_json: Vec<u8>,
    argv: Vec<CString>,
    env: Vec<CString>,
    /// The passed ruleset's rule count (0 without one).
    rules: u32,
}

/// The `i`th little-endian `u32` of `b`.
fn word(b: &[u8], i: usize) -> Option<u32> {
    b.get(i * 4..i * 4 + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

fn decode(payload: &[u8]) -> Option<Request> {
    let word = |i: usize| word(payload, i).map(|n| n as usize);
    let (plan_len, argc, envc, rules) = (word(0)?, word(1)?, word(2)?, word(3)?);
    let rest = payload.get(16..)?;
    let plan_json = rest.get(..plan_len)?.to_vec();
    let mut strings = rest.get(plan_len..)?.split_inclusive(|&b| b == 0);
    let mut take = |n: usize| -> Option<Vec<CString>> {
        (0..n).map(|_| strings.next().and_then(|s| CString::from_vec_with_nul(s.to_vec()).ok())).collect()
    };
    let argv = take(argc)?;
    let env = take(envc)?;
    (strings.next().is_none() && !argv.is_empty()).then_some(Request { plan_json, argv, env, rules: rules as u32 })
}

/// Reads exactly `buf.len()` bytes from `fd`, collecting passed descriptors into `passed`.
/// `Ok(false)`: end of file before the first byte.
fn recv_exact(fd: i32, buf: &mut [u8], passed: &mut Vec<OwnedFd>) -> std::io::Result<bool> {
    let mut off = 0;
    while off < buf.len() {
        let n = read_with_fd(fd, &mut buf[off..], passed);
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return if off == 0 { Ok(false) } else { Err(std::io::ErrorKind::UnexpectedEof.into()) };
        }
        off += n as usize;
    }
    Ok(true)
}

/// Why a zygote gave no helper.
#[derive(Debug)]
enum Failure {
    /// The request could not be sent: the zygote is gone (it clones only once it has read the
    /// whole request, so no helper exists): start another.
    Transport,
    /// The request was sent but no answer came: the zygote ended while serving it, and whether
    /// it had cloned the helper first is unknown. The run fails, and is not retried, so that it
    /// can never start twice.
    Lost(std::io::Error),
    /// It is alive but could not clone: nothing was started.
    Clone,
}

/// One request on a zygote's socket; the helper's pid.
fn request(z: &Zygote, plan_json: &[u8], argv: &[CString], env: &[CString], fds: &HelperFds, ns_init: bool, ruleset: Option<(i32, u32)>) -> Result<i32, Failure> {
    // The runner's own stdin, when it is to be inherited and open.
    // SAFETY: F_GETFD only queries a descriptor number.
    let stdin = fds.stdin.or_else(|| (unsafe { libc::fcntl(0, libc::F_GETFD) } >= 0).then_some(0));
    let mut pass = vec![fds.out, fds.err, fds.report];
    pass.extend(stdin);
    pass.extend(ruleset.map(|(fd, _)| fd));
    let flags = if stdin.is_some() { FLAG_STDIN } else { 0 } | if ns_init { FLAG_NS_INIT } else { 0 } | if ruleset.is_some() { FLAG_RULESET } else { 0 };
    let (header, payload) = encode(plan_json, argv, env, ruleset.map_or(0, |(_, n)| n), flags);
    let fd = z.sock.as_raw_fd();
    send_with_fds(fd, &header, &pass).map_err(|_| Failure::Transport)?;
    send_with_fds(fd, &payload, &[]).map_err(|_| Failure::Transport)?;
    let mut reply = [0u8; 4];
    let mut stray = Vec::new();
    match recv_exact(fd, &mut reply, &mut stray) {
        Ok(true) => {}
        Ok(false) => return Err(Failure::Lost(std::io::ErrorKind::UnexpectedEof.into())),
        Err(e) => return Err(Failure::Lost(e)),
    }
    match i32::from_le_bytes(reply) {
        pid if pid > 0 => Ok(pid),
        _ => Err(Failure::Clone),
    }
}

/// Starts a zygote of `exe` from a keeper thread that then waits for it (and reaps it) for as
/// long as it lives.
fn start(exe: &Path, state: Vec<u8>) -> std::io::Result<Zygote> {
    let mut pair = [-1i32; 2];
    // SAFETY: socketpair writes two fds.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, pair.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both just created and owned here.
    let (host, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    let to_c = |b: &[u8]| CString::new(b).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput));
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    let args = [to_c(ZYGOTE_ARGV0.as_bytes())?, to_c(me.to_string().as_bytes())?];
    let (tx, rx) = std::sync::mpsc::channel();
    let exe_owned = exe.to_path_buf();
    std::thread::Builder::new()
        .name("localgpt-sandbox-zygote".into())
        .stack_size(64 << 10)
        .spawn(move || {
            let spawned = spawn_zygote(&exe_owned, &args, theirs.as_raw_fd());
            drop(theirs);
            let pid = spawned.as_ref().ok().copied();
            let _ = tx.send(spawned);
            if let Some(pid) = pid {
                // The zygote's parent thread: stays until it exits (with the host, or when its
                // socket is dropped), then reaps it. Meanwhile it holds no lock and runs no code
                // but `waitpid`, so it does not make a fork of this process unsafe: counted as
                // idle, a runner that is otherwise single-threaded still forks its helper.
                if KEEPERS_OF.swap(me, Ordering::SeqCst) != me {
                    IDLE_KEEPERS.store(0, Ordering::SeqCst);
                }
                IDLE_KEEPERS.fetch_add(1, Ordering::SeqCst);
                loop {
                    let mut st = 0;
                    // SAFETY: waiting for our own child with a valid status pointer.
                    let r = unsafe { libc::waitpid(pid, &mut st, 0) };
                    if r == pid || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                        break;
                    }
                }
                IDLE_KEEPERS.fetch_sub(1, Ordering::SeqCst);
            }
        })?;
    let pid = rx.recv().map_err(|_| std::io::Error::other("the zygote's keeper thread ended"))??;
    // The zygote says it is one. A binary that does not dispatch `localgpt-sandbox-zygote` (an
    // older helper) never does: it ends, or — a host built against an older library, running
    // its own main — runs on, and is killed after HELLO_WAIT_MS (its keeper reaps it).
    let mut hello = [0u8; 4];
    let mut p = libc::pollfd { fd: host.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: poll on one pollfd of ours.
    let ready = unsafe { libc::poll(&mut p, 1, HELLO_WAIT_MS) } > 0;
    if !ready || !matches!(recv_exact(host.as_raw_fd(), &mut hello, &mut Vec::new()), Ok(true)) || u32::from_le_bytes(hello) != MAGIC {
        // SAFETY: killing the child we just spawned (not reaped yet: its keeper waits for it).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} did not start as a zygote", exe.display())));
    }
    Ok(Zygote { exe: exe.to_path_buf(), sock: host, pid, host: me, state })
}

/// `posix_spawn`s the zygote: `/dev/null` on fds 0 and 1, `sock` on fd 3, no environment (fd 2
/// stays the host's, for a message if it is started by hand).
fn spawn_zygote(exe: &Path, args: &[CString; 2], sock: i32) -> std::io::Result<i32> {
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
    let null = null.as_raw_fd();
    let fds = HelperFds { stdin: Some(null), out: null, err: 2, report: sock };
    crate::run::spawn::spawn_helper(exe, args, &[], &fds).map_err(|e| std::io::Error::other(e.to_string()))
}

/// Starts a run's helper through the zygote of `exe` (started first if needed; replaced once if
/// it is gone): `plan_json` is the helper's plan, `argv` the command (without the helper's
/// `argv[0]`), `env` its environment, `fds` its fds 0–3; `ns_init` when the plan has namespaces
/// (the helper is then cloned into them as their PID 1, with no supervisor, as by a forking
/// runner: [`crate::linux::helper::run_namespace_init`]). Returns the helper's pid, a child of
/// this process.
///
/// `None` when no zygote serves (none could be started, the binary is not one, it could not
/// clone, or this process has [`MAX_ZYGOTES`]): nothing was started, and the caller
/// `posix_spawn`s the helper instead.
///
/// # Errors
/// [`SandboxError::Setup`] when a zygote ended while serving the request: whether the helper had
/// been started is unknown, so the run fails rather than start it a second time.
///
/// `ruleset` (a descriptor and its rule count) is a Landlock ruleset built for the plan's
/// Landlock part, passed along for the command's process to enforce (a plan without namespaces).
pub(crate) fn spawn_helper(exe: &Path, plan_json: &[u8], argv: &[CString], env: &[CString], fds: &HelperFds, ns_init: bool, ruleset: Option<(i32, u32)>) -> Option<Result<i32, SandboxError>> {
    let state = inherited_state();
    let mut zs = ZYGOTES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // A forked copy of the host drops its copies of the host's sockets (the host keeps its own).
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    zs.running.retain(|z| z.host == me);
    if zs.refused.iter().any(|r| r == exe) {
        return None;
    }
    for _ in 0..2 {
        let i = match zs.running.iter().position(|z| z.exe == exe && z.state == state && same_domain(z.pid)) {
            Some(i) => i,
            None if zs.running.len() < MAX_ZYGOTES => match start(exe, state.clone()) {
                Ok(z) => {
                    zs.running.push(z);
                    zs.running.len() - 1
                }
                // Not a zygote: this binary's helpers are exec'd from now on. (Any other failure
                // to start one, such as a full process table, is tried again next run.)
                Err(e) => {
                    if e.kind() == std::io::ErrorKind::InvalidData {
                        zs.refused.push(exe.to_path_buf());
                    }
                    return None;
                }
            },
            None => return None,
        };
        match request(&zs.running[i], plan_json, argv, env, fds, ns_init, ruleset) {
            Ok(pid) => return Some(Ok(pid)),
            Err(Failure::Clone) => return None,
            Err(Failure::Lost(e)) => {
                zs.running.remove(i);
                return Some(Err(SandboxError::Setup(format!("the helper zygote ended while starting this run's helper ({e}); the run is not retried, so that it cannot start twice"))));
            }
            // Gone before it read the request: dropping its socket ends it (end of file), and
            // its keeper thread reaps it; the next turn starts another.
            Err(Failure::Transport) => {
                zs.running.remove(i);
            }
        }
    }
    None
}

/// Entry point of the zygote (`argv[1]` is the host's pid). Never returns.
pub fn zygote_main() -> ! {
    let host: Option<i32> = std::env::args_os().nth(1).and_then(|a: OsString| a.to_str().and_then(|s| s.parse().ok()));
    // SAFETY: plain syscalls on our own process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if host.is_none() || Some(libc::getppid()) != host || libc::fcntl(ZYGOTE_FD, libc::F_GETFD) < 0 {
            eprintln!("localgpt-sandbox-zygote: internal helper; run `localgpt sandbox run` instead");
            libc::_exit(2);
        }
    }
    // Whatever the host left open without close-on-exec is not the zygote's.
    if crate::linux::apply::close_fds_from(ZYGOTE_FD as u32 + 1).is_err() || send_with_fds(ZYGOTE_FD, &MAGIC.to_le_bytes(), &[]).is_err() {
        // SAFETY: immediate exit.
        unsafe { libc::_exit(2) }
    }
    loop {
        let mut header = [0u8; 12];
        let mut fds = Vec::new();
        match recv_exact(ZYGOTE_FD, &mut header, &mut fds) {
            Ok(true) => {}
            // End of file (the host dropped us or exited) or a broken socket: done.
            // SAFETY: immediate exit.
            _ => unsafe { libc::_exit(0) },
        }
        let word = |i: usize| word(&header, i).unwrap_or(0);
        let (len, flags) = (word(1) as usize, word(2));
        let with_stdin = flags & FLAG_STDIN != 0;
        let with_ruleset = flags & FLAG_RULESET != 0;
        let expected = 3 + usize::from(with_stdin) + usize::from(with_ruleset);
        if word(0) != MAGIC || len > MAX_PAYLOAD || fds.len() != expected {
            // Not a request of ours: the host's end is broken; stop rather than guess.
            // SAFETY: immediate exit.
            unsafe { libc::_exit(3) }
        }
        let mut payload = vec![0u8; len];
        let mut more = Vec::new();
        if !matches!(recv_exact(ZYGOTE_FD, &mut payload, &mut more), Ok(true)) || !more.is_empty() {
            // Not a request of ours: the host's end is broken; stop rather than guess.
            // SAFETY: immediate exit.
            unsafe { libc::_exit(3) }
        }
        // Full: the helper is cloned into new user and PID namespaces as their PID 1; a pidfd of
        // the host lets it notice a host that died before it asked for a parent-death signal.
        let lifeline = match host {
            // SAFETY: pidfd_open of a pid.
            Some(h) if flags & FLAG_NS_INIT != 0 => unsafe { libc::syscall(libc::SYS_pidfd_open, h, 0) as i32 },
            _ => -1,
        };
        let mut clone_flags = libc::CLONE_PARENT | libc::SIGCHLD;
        if lifeline >= 0 {
            crate::linux::namespaces::record_host_pid_max();
            clone_flags |= libc::CLONE_NEWUSER | libc::CLONE_NEWPID;
        }
        // SAFETY: the zygote is single-threaded (a fresh exec that starts no thread), so the
        // clone may run ordinary code; CLONE_PARENT makes the host its parent.
        let pid = unsafe { libc::syscall(libc::SYS_clone, clone_flags as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) as i32 };
        if pid == 0 {
            serve_as_helper(&fds, with_stdin, with_ruleset, &payload, lifeline);
        }
        let reply = if pid > 0 { pid } else { -std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EAGAIN) };
        if lifeline >= 0 {
            // SAFETY: closing our own pidfd.
            unsafe { libc::close(lifeline) };
        }
        drop(fds);
        // Nothing of one run's request stays in the zygote for the next run's helper to inherit.
        for b in &mut payload {
            // SAFETY: a volatile store to a byte we own (not elided before the free).
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        if send_with_fds(ZYGOTE_FD, &reply.to_le_bytes(), &[]).is_err() {
            // SAFETY: immediate exit.
            unsafe { libc::_exit(0) }
        }
    }
}

/// In the zygote's clone: becomes the helper of the request — PID 1 of its namespaces when
/// `lifeline` (a pidfd of the host) is open. Never returns.
fn serve_as_helper(fds: &[OwnedFd], with_stdin: bool, with_ruleset: bool, payload: &[u8], lifeline: i32) -> ! {
    if lifeline >= 0 {
        // SAFETY: plain syscalls on our own process; a pollfd on a local.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            let mut p = libc::pollfd { fd: lifeline, events: libc::POLLIN, revents: 0 };
            if libc::poll(&mut p, 1, 0) != 0 {
                libc::_exit(127); // the host is gone (or the pidfd is unusable): run nothing
            }
        }
    }
    let raw: Vec<i32> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let stdin = if with_stdin { Some(raw[3]) } else { None };
    let req = decode(payload);
    let env = req.as_ref().map(|r| r.env.clone()).unwrap_or_default();
    let plan = req.as_ref().map(|r| serde_json::from_slice::<crate::plan::HelperPlan>(&r.plan_json));
    // A ruleset passed for this plan's Landlock part (never for one with namespaces): offered to
    // the command's process, which checks it is for its plan; become_helper keeps it at fd 4.
    if let (true, Some(Ok(p)), Some(r)) = (with_ruleset, &plan, &req) {
        if let (Some(ll), None, Some(Ok(fd))) = (&p.landlock, &p.namespaces, fds.last().map(OwnedFd::try_clone)) {
            crate::linux::apply::offer_prebuilt(ll.clone(), crate::linux::apply::BuiltRuleset { fd, applied: r.rules as usize });
        }
    }
    let keep_fds = matches!(&plan, Some(Ok(p)) if crate::ablation::is(&p.ablated, crate::plan::ProtectionId::InheritedFds));
    crate::run::spawn::become_helper(&[stdin, Some(raw[0]), Some(raw[1]), Some(raw[2])], &env, keep_fds);
    // The environment's strings stay for the helper's whole life.
    std::mem::forget(env);
    let Some(req) = req else { crate::linux::helper::fail("the zygote's request is malformed") };
    let plan: crate::plan::HelperPlan = match plan {
        Some(Ok(p)) => p,
        Some(Err(e)) => crate::linux::helper::fail(&format!("decode plan: {e}")),
        None => crate::linux::helper::fail("the zygote's request is malformed"),
    };
    crate::timing::stamp("plan_decoded");
    if lifeline >= 0 {
        crate::linux::helper::run_namespace_init(&plan, &req.argv)
    }
    crate::linux::helper::run_helper(&plan, &req.argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[test]
    fn inherited_state_is_the_threads_status_lines_and_namespaces() {
        // What the thread-relative reads give is what reading each path whole gives.
        let whole = || {
            let mut f = Vec::new();
            for l in std::fs::read_to_string("/proc/thread-self/status").unwrap().lines().filter(|l| INHERITED.iter().any(|p| l.starts_with(p))) {
                f.extend_from_slice(l.as_bytes());
                f.push(b'\n');
            }
            for ns in ["mnt", "user", "pid_for_children", "net", "ipc", "uts", "cgroup", "time_for_children"] {
                if let Ok(t) = std::fs::read_link(format!("/proc/thread-self/ns/{ns}")) {
                    f.extend_from_slice(t.as_os_str().as_encoded_bytes());
                    f.push(b'\n');
                }
            }
            f
        };
        let here = inherited_state();
        assert_eq!(here, whole());
        assert!(here.windows(4).any(|w| w == b"mnt:") && here.windows(7).any(|w| w == b"CapEff:"));
        // A thread that confined itself (no_new_privs is per thread) is in another state.
        let other = std::thread::spawn(move || {
            // SAFETY: sets this thread's no_new_privs bit; nothing else.
            assert_eq!(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }, 0);
            (inherited_state(), whole())
        })
        .join()
        .unwrap();
        assert_eq!(other.0, other.1);
        assert_ne!(other.0, here);
    }

    #[test]
    fn requests_round_trip_and_malformed_ones_are_refused() {
        let (argv, env) = (vec![c("bash"), c("-c"), c("true")], vec![c("PATH=/usr/bin"), c("HOME=/h")]);
        let (header, payload) = encode(b"{\"x\":1}", &argv, &env, 7, FLAG_STDIN);
        assert_eq!(header.len(), 12);
        assert_eq!(u32::from_le_bytes(header[4..8].try_into().unwrap()) as usize, payload.len());
        assert_eq!(decode(&payload), Some(Request { plan_json: b"{\"x\":1}".to_vec(), argv: argv.clone(), env: env.clone(), rules: 7 }));
        // Truncated anywhere, or with trailing bytes, or without a command: refused.
        for cut in 0..payload.len() {
            assert_eq!(decode(&payload[..cut]), None, "cut at {cut}");
        }
        let mut longer = payload.clone();
        longer.extend_from_slice(b"x\0");
        assert_eq!(decode(&longer), None);
        assert_eq!(decode(&encode(b"{}", &[], &env, 0, 0).1), None);
    }
}
