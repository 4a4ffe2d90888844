//! The parent side (spec 7.1): spawn the helper, stream stdout/stderr with a cap, enforce the
//! timeout, clean up (cgroup, scratch dir), and report what ran at which level.
//!
//! The parent is never restricted. The helper starts with default signal dispositions and exactly
//! four fds: stdin, the stdout and stderr pipes, and the report pipe as fd 3 ([`HelperStart`]):
//! a single-threaded parent forks it (cloned into new user and PID namespaces at Full level),
//! and it runs with the plan's environment from then on; a multithreaded parent `posix_spawn`s
//! `/proc/self/exe` with `argv[0] = localgpt-sandbox` and the scrubbed environment, so that no
//! code runs in a forked copy of it.

use std::ffi::CString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::detect::Capabilities;
use crate::error::SandboxError;
use crate::linux::apply::AppliedReport;
use crate::plan::{make_plan, Plan, Protection, ProtectionState, RunContext};
use crate::policy::{SandboxLevel, SandboxMode, SandboxPolicy};

/// Which output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// stdout
    Stdout,
    /// stderr
    Stderr,
}

/// Receives the command's output as it arrives (already capped).
pub trait OutputSink {
    /// A chunk of output within the cap.
    fn output(&mut self, stream: Stream, data: &[u8]);
    /// Called once per stream that exceeded the cap, after its last chunk.
    fn truncated(&mut self, stream: Stream, dropped: u64) {
        let marker = format!("\n[localgpt-sandbox: output truncated: {dropped} more bytes dropped]\n");
        self.output(stream, marker.as_bytes());
    }
}

/// Collects output in memory.
#[derive(Default, Debug)]
pub struct CaptureSink {
    /// Captured stdout.
    pub stdout: Vec<u8>,
    /// Captured stderr.
    pub stderr: Vec<u8>,
}

impl OutputSink for CaptureSink {
    fn output(&mut self, stream: Stream, data: &[u8]) {
        match stream {
            Stream::Stdout => self.stdout.extend_from_slice(data),
            Stream::Stderr => self.stderr.extend_from_slice(data),
        }
    }
}

/// What the command's stdin is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StdinMode {
    /// `/dev/null` (agents, and the CLI when its stdin is a terminal).
    #[default]
    Null,
    /// A pipe that the runner fills with what it reads from this descriptor of the caller's
    /// (the CLI's stdin when it is not a terminal): the command gets the bytes, never the
    /// descriptor itself, so it cannot write to it, `ioctl` it or keep it after the run.
    Relay(i32),
    /// The caller's stdin itself (the CLI's explicit `--stdin inherit`: a terminal is handed
    /// over read-write; the CLI restores its settings after the run).
    Inherit,
}

/// How the runner starts the helper (see [`crate::helper`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HelperStart {
    /// `fork` when the calling process has a single thread (the CLI, a single-threaded host):
    /// the forked copy runs the helper code directly, one `execve` (~0.7 ms on a small VM) less
    /// per run; otherwise as [`HelperStart::Exec`]. The default.
    #[default]
    Auto,
    /// Always `posix_spawn` the helper binary ([`RunOptions::helper_exe`]): no code of the
    /// caller runs in a forked copy of it (what a multithreaded host gets under `Auto`).
    Exec,
}

/// Options of a run that are not policy.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// stdin handling.
    pub stdin: StdinMode,
    /// The binary that dispatches `localgpt-sandbox` (default `/proc/self/exe`), when the
    /// helper is exec'd.
    pub helper_exe: Option<PathBuf>,
    /// How the helper starts.
    pub helper_start: HelperStart,
    /// Set to true to stop the command (e.g. Ctrl-C in the CLI).
    pub cancel: Option<&'static AtomicBool>,
}

/// How the command ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ExitKind {
    /// Exited with a code.
    Exited {
        /// Exit code.
        code: i32,
    },
    /// Killed by a signal.
    Signaled {
        /// Signal number.
        signal: i32,
    },
}

/// The outcome of a sandboxed run.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RunResult {
    /// The argv that ran (non-UTF-8 bytes shown as U+FFFD).
    pub command: Vec<String>,
    /// Workspace.
    pub workspace: PathBuf,
    /// Level it ran at.
    pub level: SandboxLevel,
    /// Mode.
    pub mode: SandboxMode,
    /// How the sandbox's process ended.
    pub status: ExitKind,
    /// Shell-style exit code: the command's code, 128+signal, 124 on timeout, 130 on cancel.
    pub exit_code: i32,
    /// The timeout fired.
    pub timed_out: bool,
    /// The run was cancelled.
    pub cancelled: bool,
    /// Wall time.
    pub duration_ms: f64,
    /// Captured stdout (only with a capturing sink; lossy UTF-8).
    pub stdout: String,
    /// Captured stderr.
    pub stderr: String,
    /// Total stdout bytes produced.
    pub stdout_bytes: u64,
    /// Total stderr bytes produced.
    pub stderr_bytes: u64,
    /// stdout exceeded the cap.
    pub stdout_truncated: bool,
    /// stderr exceeded the cap.
    pub stderr_truncated: bool,
    /// Protections in force.
    pub protections: Vec<Protection>,
    /// Warnings (degraded level, unconfined run).
    pub warnings: Vec<String>,
    /// What the helper reported it applied.
    pub applied: Option<AppliedReport>,
    /// What the command changed in the protected workspace paths, and what became of it
    /// (Full level): applied, or kept as pending changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected_review: Option<crate::protect::ProtectedReview>,
}

static RUN_SEQ: AtomicU64 = AtomicU64::new(0);

/// Runs `command` with `bash -c` under `policy`, capturing the output.
///
/// # Errors
/// See [`run_argv`].
pub fn run_sandboxed(command: &str, policy: &SandboxPolicy) -> Result<RunResult, SandboxError> {
    let argv = vec!["bash".to_string(), "-c".to_string(), command.to_string()];
    let mut sink = CaptureSink::default();
    let mut r = run_argv(&argv, policy, &RunOptions::default(), &mut sink)?;
    r.stdout = String::from_utf8_lossy(&sink.stdout).into_owned();
    r.stderr = String::from_utf8_lossy(&sink.stderr).into_owned();
    Ok(r)
}

/// Counts the tasks (threads) of a uid, for a relative `RLIMIT_NPROC`: one `fstatat` per
/// process, of `/proc/<pid>/task`, whose owner is the process's uid and whose link count is its
/// number of threads + 2.
fn count_uid_tasks(uid: u32) -> u64 {
    use std::os::fd::AsRawFd;
    let Ok(dir) = std::fs::File::open("/proc") else { return 0 };
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut n = 0;
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        if name.is_empty() || !name.as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let mut rel = name.into_vec();
        rel.extend_from_slice(b"/task\0");
        // SAFETY: a zeroed stat buffer and a NUL-terminated relative path under an open dir fd.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatat(dir.as_raw_fd(), rel.as_ptr().cast(), &mut st, 0) } == 0 && st.st_uid == uid {
            n += (st.st_nlink as u64).saturating_sub(2).max(1);
        }
    }
    n
}

/// The per-run directory for redirected caches (Standard and Minimal; Full uses its private
/// `/tmp`), removed on drop.
///
/// It is `/tmp/localgpt-sandbox-u<uid>/run-<pid>-<n>-<random>`, inside a parent directory that is
/// created once, mode 0700, and used only while it is a real directory owned by this uid with no
/// group or other access. The run directory itself is not created: like the caches under Full
/// level's private `/tmp`, whatever writes a cache creates it (the tools create their cache
/// paths recursively), and most commands cache nothing, so a run costs no `mkdir` and no `rmdir`
/// (~0.3 ms on an ext4 `/tmp` mounted with `discard`). The name is unpredictable, so no other
/// process can prepare it in advance, and a name that already exists is never used. When the
/// parent is unusable, a fresh `mkdtemp` directory is made for the run instead.
struct Scratch(PathBuf);

impl Scratch {
    fn create() -> Result<Self, SandboxError> {
        if let Some(p) = Self::in_private_parent() {
            return Ok(Scratch(p));
        }
        let mut template = b"/tmp/localgpt-sandbox-XXXXXX\0".to_vec();
        // SAFETY: mkdtemp writes into the NUL-terminated template.
        let p = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(SandboxError::io("create scratch dir", std::io::Error::last_os_error()));
        }
        template.pop();
        Ok(Scratch(PathBuf::from(std::ffi::OsStr::from_bytes(&template))))
    }

    fn in_private_parent() -> Option<PathBuf> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let parent = PathBuf::from(format!("/tmp/localgpt-sandbox-u{uid}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&parent) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        let m = std::fs::symlink_metadata(&parent).ok()?;
        if !m.file_type().is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
            return None;
        }
        let mut random = [0u8; 8];
        // SAFETY: getrandom fills the local buffer.
        if unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) } != random.len() as isize {
            return None;
        }
        let n = RUN_SEQ.fetch_add(1, Ordering::SeqCst);
        let run = parent.join(format!("run-{}-{n}-{:016x}", std::process::id(), u64::from_ne_bytes(random)));
        // Never take over an existing entry.
        if std::fs::symlink_metadata(&run).is_ok() {
            return None;
        }
        Some(run)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Usually nothing was cached and the directory does not exist; an empty one takes one
        // rmdir; otherwise the whole tree goes (symlinks are removed, not followed).
        match std::fs::remove_dir(&self.0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}

/// The per-run cgroups (one directory per hierarchy: cgroup v1 has one per controller), killed
/// and removed on drop.
struct RunCgroup {
    /// The directories; the first one is used to list and kill the sandbox's processes (each
    /// holds all of them).
    dirs: Vec<PathBuf>,
}

impl RunCgroup {
    /// Creates the directories of `settings` and writes their limits.
    fn create(settings: &[crate::plan::CgroupSetting]) -> Result<Option<Self>, SandboxError> {
        if settings.is_empty() {
            return Ok(None);
        }
        let mut cg = RunCgroup { dirs: Vec::new() };
        for s in settings {
            let dir = Self::create_dir(&s.base)?;
            cg.dirs.push(dir.clone());
            for (file, value) in &s.limits {
                std::fs::write(dir.join(file), value).map_err(|e| SandboxError::io(format!("write {}/{file}", dir.display()), e))?;
            }
        }
        Ok(Some(cg))
    }

    fn create_dir(base: &Path) -> Result<PathBuf, SandboxError> {
        // The name holds our pid, which is unique among live processes; a directory that already
        // has it was left by an earlier runner with the same (reused) pid that was killed before
        // its Drop ran. It is removed when empty (rmdir of a cgroup with live tasks fails with
        // EBUSY, so a live run's cgroup is never taken); otherwise the next sequence number is
        // tried.
        let mut attempt = 0;
        loop {
            let n = RUN_SEQ.fetch_add(1, Ordering::SeqCst);
            let dir = base.join(format!("localgpt-sandbox-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                    attempt += 1;
                    if std::fs::remove_dir(&dir).is_ok() && std::fs::create_dir(&dir).is_ok() {
                        return Ok(dir);
                    }
                }
                Err(e) => return Err(SandboxError::io(format!("create cgroup {}", dir.display()), e)),
            }
        }
    }

    /// The files the helper writes `0` to, one per directory. On cgroup v1, `tasks` moves only
    /// the (single-threaded) helper's one thread, which skips the threadgroup lock and its RCU
    /// synchronisation (`cgroup.procs` costs ~10 ms per run here); v2 has only `cgroup.procs`.
    fn join_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|d| {
                let tasks = d.join("tasks");
                if tasks.exists() {
                    tasks
                } else {
                    d.join("cgroup.procs")
                }
            })
            .collect()
    }

    fn kill_all(&self) {
        let Some(dir) = self.dirs.first() else { return };
        if std::fs::write(dir.join("cgroup.kill"), b"1").is_ok() {
            return;
        }
        for _ in 0..100 {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs.split_whitespace().filter_map(|p| p.parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for p in pids {
                // SAFETY: signalling a process in our own per-run cgroup.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        for _ in 0..200 {
            self.dirs.retain(|d| std::fs::remove_dir(d).is_err() && d.exists());
            if self.dirs.is_empty() {
                return;
            }
            self.kill_all();
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A plan made for this machine, with its per-run scratch directory; run it once.
pub struct PreparedRun {
    /// The plan (print it, show a banner, then [`PreparedRun::run`]).
    pub plan: Plan,
    /// What was detected.
    pub caps: Capabilities,
    policy: SandboxPolicy,
    _scratch: Option<Scratch>,
}

/// Detects capabilities, creates the per-run scratch directory and builds the plan.
///
/// # Errors
/// [`SandboxError::Policy`] for an invalid policy, [`SandboxError::LevelUnavailable`] /
/// [`SandboxError::Plan`] when the plan cannot be made; nothing runs in either case.
pub fn prepare(policy: &SandboxPolicy) -> Result<PreparedRun, SandboxError> {
    policy.validate()?;
    let caps = crate::detect::detect_quick();
    crate::timing::stamp("detected");
    // The per-run scratch dir holds the redirected caches; with a private /tmp (namespaces) they
    // go there instead, so the dir would only cost a mkdtemp and an rmdir.
    // At level none the caller's environment passes unchanged, so no dir either.
    let confined_without_namespaces = crate::plan::choose_level(policy, &caps)
        .is_ok_and(|l| l > SandboxLevel::None && !crate::plan::uses_namespaces(policy, &caps, l));
    let scratch = if policy.mode == SandboxMode::WorkspaceWrite && policy.environment.redirect_caches && confined_without_namespaces {
        Some(Scratch::create()?)
    } else {
        None
    };
    crate::timing::stamp("scratch");
    // Only a run without namespaces and without a pids cgroup bounds processes with a
    // relative RLIMIT_NPROC (inside a user namespace the count starts from zero).
    let uid_tasks = if !caps.is_root && caps.cgroup_pids.is_none() && confined_without_namespaces { Some(count_uid_tasks(caps.uid)) } else { None };
    crate::timing::stamp("counted");
    let ctx = RunContext { caller_env: caller_env(), scratch: scratch.as_ref().map(|s| s.0.clone()), uid_tasks };
    let plan = make_plan(policy, &caps, &ctx)?;
    // Standard: the scrubbed toolchain configs the plan points the tools at.
    for (dest, content) in &plan.config_copies {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = dest.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| SandboxError::io(format!("create {}", dir.display()), e))?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dest)
            .and_then(|mut f| std::io::Write::write_all(&mut f, content.as_bytes()))
            .map_err(|e| SandboxError::io(format!("write {}", dest.display()), e))?;
    }
    crate::timing::stamp("planned");
    Ok(PreparedRun { plan, caps, policy: policy.clone(), _scratch: scratch })
}

impl PreparedRun {
    /// Runs `argv` under the plan, streaming capped output into `sink`.
    ///
    /// # Errors
    /// As [`run_argv`].
    pub fn run<S: AsRef<std::ffi::OsStr>>(self, argv: &[S], opts: &RunOptions, sink: &mut dyn OutputSink) -> Result<RunResult, SandboxError> {
        match run_plan(&self.plan, argv, opts, sink) {
            // The helper could not create a user namespace: nothing ran. Unless Full was asked
            // for explicitly, fall back to Standard, say why, and remember it for this process.
            Err(SandboxError::Setup(msg))
                if msg.starts_with(crate::linux::namespaces::USERNS_ERROR_PREFIX)
                    && self.plan.namespaces.is_some()
                    && self.policy.level == crate::policy::LevelSetting::Auto
                    && self.policy.require_level.is_none_or(|r| r < SandboxLevel::Full) =>
            {
                crate::detect::record_userns_failure(&msg);
                let mut r = prepare(&self.policy)?.run(argv, opts, sink)?;
                r.warnings.insert(0, format!("Full level unavailable ({msg}); ran at {}", r.level));
                Ok(r)
            }
            other => other,
        }
    }
}

/// Builds the plan for `policy` here and runs `argv` under it.
///
/// # Errors
/// [`SandboxError::LevelUnavailable`] / [`SandboxError::Plan`] before anything runs;
/// [`SandboxError::Setup`] when the helper could not apply the plan (nothing was executed);
/// [`SandboxError::Io`] for spawn/pipe failures in the parent.
pub fn run_argv<S: AsRef<std::ffi::OsStr>>(argv: &[S], policy: &SandboxPolicy, opts: &RunOptions, sink: &mut dyn OutputSink) -> Result<RunResult, SandboxError> {
    prepare(policy)?.run(argv, opts, sink)
}

/// The caller's environment as UTF-8 pairs (non-UTF-8 variables are dropped).
#[must_use]
pub fn caller_env() -> Vec<(String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
}

struct Pipe {
    read: i32,
    write: i32,
}

fn pipe() -> Result<Pipe, SandboxError> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two fds.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SandboxError::io("pipe", std::io::Error::last_os_error()));
    }
    Ok(Pipe { read: fds[0], write: fds[1] })
}

fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: closing an fd we own.
        unsafe { libc::close(fd) };
    }
}

fn cstr(s: &[u8], what: &str) -> Result<CString, SandboxError> {
    CString::new(s).map_err(|_| SandboxError::Policy(format!("{what} contains a NUL byte")))
}

/// The helper's fds 0–3, as the runner's descriptors (`stdin: None` = inherit ours).
struct HelperFds {
    stdin: Option<i32>,
    out: i32,
    err: i32,
    report: i32,
}

/// True when the calling process has exactly one thread (`/proc/self/status`).
fn single_threaded() -> bool {
    crate::detect::read_small("/proc/self/status")
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").map(|v| v.trim() == "1")))
        .unwrap_or(false)
}

extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// Forks a copy of this (single-threaded) process that becomes the helper: fds 0–3 as
/// [`HelperFds`] says and nothing above, default signal dispositions (`SIGPIPE` ignored, as in a
/// freshly started Rust helper) and an empty mask, the plan's environment as `environ` (so that
/// the command's `execvp` searches the plan's `PATH` and passes on only the plan's variables);
/// then [`crate::helper::run_helper`]. Returns the child's pid.
fn fork_helper(plan: &crate::plan::HelperPlan, argv: &[CString], env: &[CString], fds: &HelperFds) -> Result<i32, SandboxError> {
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let timing = env.iter().any(|e| e.as_bytes().starts_with(crate::timing::TIMING_ENV.as_bytes()) && e.as_bytes().get(crate::timing::TIMING_ENV.len()) == Some(&b'='));
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
            return Err(SandboxError::Setup(format!(
                "{} clone(CLONE_NEWUSER|CLONE_NEWPID) (unshare of the user and PID namespaces): {e}",
                crate::linux::namespaces::USERNS_ERROR_PREFIX
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
    // SAFETY (whole block): the child arranges its own fds, signals and environment.
    unsafe {
        // Move the sources out of 0..=3 first, so that no dup2 overwrites a source not yet moved.
        let srcs = [fds.stdin, Some(fds.out), Some(fds.err), Some(fds.report)];
        let mut high = [-1i32; 4];
        for (i, s) in srcs.iter().enumerate() {
            if let Some(fd) = *s {
                high[i] = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
                if high[i] < 0 {
                    libc::_exit(127);
                }
            }
        }
        for (target, &fd) in high.iter().enumerate() {
            if fd >= 0 && libc::dup2(fd, target as i32) < 0 {
                libc::_exit(127);
            }
        }
        if fds.stdin.is_none() {
            libc::fcntl(0, libc::F_SETFD, 0);
        }
    }
    // From here fd 3 is the report pipe: failures are reported there.
    if let Err(e) = crate::linux::apply::close_fds_from(4) {
        crate::helper::fail(&format!("helper fds: {e}"));
    }
    // SAFETY: resetting dispositions and the mask of our own single-threaded process; setting
    // `environ` to a NUL-terminated array of C strings that live until exec (this process never
    // returns, so `env` and `envp` are never freed).
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
    if lifeline >= 0 {
        crate::helper::run_namespace_init(plan, argv)
    }
    crate::helper::run_helper(plan, argv)
}

/// Spawns the helper; returns its pid.
fn spawn_helper(exe: &Path, args: &[CString], env: &[CString], fds: &HelperFds) -> Result<i32, SandboxError> {
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

/// Bytes on their way from the caller's descriptor to the command's stdin pipe.
struct StdinRelay {
    /// The caller's descriptor (not ours to close).
    src: i32,
    /// The pipe's write end (non-blocking), closed at the caller's EOF or the command's exit.
    write: i32,
    /// Read but not yet written.
    buf: Vec<u8>,
    /// `src` has not reached EOF.
    src_open: bool,
}

impl StdinRelay {
    /// At most this much is buffered (then `src` is not polled until the command reads).
    const MAX_BUF: usize = 64 * 1024;

    fn close_write(&mut self) {
        close(self.write);
        self.write = -1;
    }

    /// Moves bytes after poll reported `src` readable or the pipe writable.
    fn pump(&mut self, src_ready: bool, dst_ready: bool, scratch: &mut [u8]) {
        if src_ready && self.src_open && self.buf.len() < Self::MAX_BUF {
            let room = (Self::MAX_BUF - self.buf.len()).min(scratch.len());
            // SAFETY: reading into our buffer.
            let n = unsafe { libc::read(self.src, scratch.as_mut_ptr().cast(), room) };
            if n > 0 {
                self.buf.extend_from_slice(&scratch[..n as usize]);
            } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                self.src_open = false;
            }
        }
        if (dst_ready || !self.buf.is_empty()) && self.write >= 0 && !self.buf.is_empty() {
            // SAFETY: writing our buffer to our non-blocking pipe end.
            let n = unsafe { libc::write(self.write, self.buf.as_ptr().cast(), self.buf.len()) };
            if n > 0 {
                self.buf.drain(..n as usize);
            } else if n < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                if e != Some(libc::EAGAIN) && e != Some(libc::EINTR) {
                    // EPIPE: the command closed its stdin; what is left is dropped.
                    self.buf.clear();
                    self.src_open = false;
                }
            }
        }
        if !self.src_open && self.buf.is_empty() && self.write >= 0 {
            self.close_write();
        }
    }
}

struct StreamState {
    fd: i32,
    stream: Stream,
    total: u64,
    open: bool,
}

/// Runs `argv` under an already built plan.
///
/// # Errors
/// As [`run_argv`].
pub fn run_plan<S: AsRef<std::ffi::OsStr>>(plan: &Plan, argv: &[S], opts: &RunOptions, sink: &mut dyn OutputSink) -> Result<RunResult, SandboxError> {
    if argv.is_empty() {
        return Err(SandboxError::Policy("no command given".into()));
    }
    let start = Instant::now();
    let cgroup = RunCgroup::create(&plan.cgroup_settings())?;
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    let mut helper_plan = plan.helper_plan(me, cgroup.as_ref().map(RunCgroup::join_files).unwrap_or_default());
    // Protected workspace paths: the private copies' staging, and a snapshot of the others to
    // review them in place after the run.
    let protected = plan.namespaces.as_ref().map(|n| n.protected.clone()).unwrap_or_default();
    let staging = crate::protect::Staging::create(plan)?;
    let snapshot = crate::protect::Snapshot::take(plan);
    if let (Some(ns), Some(st)) = (helper_plan.namespaces.as_mut(), staging.as_ref()) {
        ns.staging = Some(st.dir.clone());
    }
    let started = std::time::SystemTime::now();
    let mut args = vec![cstr(crate::helper::HELPER_ARGV0.as_bytes(), "argv0")?];
    for a in argv {
        args.push(cstr(a.as_ref().as_bytes(), "command argument")?);
    }
    let mut env: Vec<CString> = plan
        .env
        .vars
        .iter()
        .map(|(k, v)| cstr(format!("{k}={v}").as_bytes(), "environment variable"))
        .collect::<Result<_, _>>()?;
    let fork = opts.helper_start == HelperStart::Auto && single_threaded();
    if !fork {
        let plan_json = serde_json::to_vec(&helper_plan).map_err(|e| SandboxError::Plan(e.to_string()))?;
        let mut plan_var = format!("{}=", crate::helper::PLAN_ENV).into_bytes();
        plan_var.extend_from_slice(&plan_json);
        env.push(cstr(&plan_var, "plan")?);
    }
    let exe = opts.helper_exe.clone().unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    let out = pipe()?;
    let err = pipe()?;
    let rep = pipe()?;
    // The helper's stdin (None: inherit ours), and the pipe end the runner fills when relaying.
    let (stdin_fd, relay_write) = match opts.stdin {
        StdinMode::Null => {
            // SAFETY: open with a static C string.
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(SandboxError::io("open /dev/null", std::io::Error::last_os_error()));
            }
            (Some(fd), None)
        }
        StdinMode::Relay(_) => {
            let p = pipe()?;
            // SAFETY: making our own pipe end non-blocking.
            unsafe { libc::fcntl(p.write, libc::F_SETFL, libc::O_NONBLOCK) };
            (Some(p.read), Some(p.write))
        }
        StdinMode::Inherit => (None, None),
    };
    let relay = match (opts.stdin, relay_write) {
        (StdinMode::Relay(src), Some(write)) => Some(StdinRelay { src, write, buf: Vec::new(), src_open: true }),
        _ => None,
    };
    crate::timing::stamp("spawn_helper");
    let fds = HelperFds { stdin: stdin_fd, out: out.write, err: err.write, report: rep.write };
    let spawned = if fork {
        fork_helper(&helper_plan, &args[1..], &env, &fds)
    } else {
        spawn_helper(&exe, &args, &env, &fds)
    };
    for fd in [out.write, err.write, rep.write, stdin_fd.unwrap_or(-1)] {
        close(fd);
    }
    let pid = match spawned {
        Ok(p) => p,
        Err(e) => {
            for fd in [out.read, err.read, rep.read, relay.as_ref().map_or(-1, |r| r.write)] {
                close(fd);
            }
            return Err(e);
        }
    };
    let outcome = supervise_run(pid, plan, &out, &err, &rep, relay, cgroup.as_ref(), opts, sink, start);
    crate::timing::stamp("helper_reaped");
    for fd in [out.read, err.read, rep.read] {
        close(fd);
    }
    let mut r = outcome?;
    r.command = argv.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect();
    if staging.is_some() || !snapshot.is_empty() {
        // The command and everything it started are gone (PID 1 exited, or the supervisor
        // killed the tree): the private copies and the real paths are quiet. Paths that were
        // bound read-only instead (a `W protected-ro I …` line) have nothing to review.
        let read_only: Vec<usize> = r
            .warnings
            .iter()
            .filter_map(|w| w.strip_prefix("protected-ro ").and_then(|x| x.split_whitespace().next()).and_then(|i| i.parse().ok()))
            .collect();
        let mut review = match &staging {
            Some(st) => crate::protect::review_run(&plan.workspace, &protected, st, &read_only, started),
            None => crate::protect::ProtectedReview::default(),
        };
        crate::protect::review_in_place(&plan.workspace, &snapshot, started, &mut review);
        for w in r.warnings.iter_mut() {
            if let Some(rest) = w.strip_prefix("protected-ro ") {
                *w = rest.split_once(' ').map_or(rest, |x| x.1).to_string();
            }
        }
        if !read_only.is_empty() {
            for p in r.protections.iter_mut().filter(|p| p.id == "workspace-persistence") {
                p.state = ProtectionState::Degraded;
                p.detail = format!("{} (this run: {} read-only, no private copy)", p.detail, review.read_only.join(", "));
            }
        }
        r.protected_review = Some(review);
    }
    drop(staging);
    drop(cgroup);
    crate::timing::stamp("cgroup_removed");
    crate::timing::flush("cli");
    Ok(r)
}

#[allow(clippy::too_many_arguments)]
fn supervise_run(
    pid: i32,
    plan: &Plan,
    out: &Pipe,
    err: &Pipe,
    rep: &Pipe,
    mut relay: Option<StdinRelay>,
    cgroup: Option<&RunCgroup>,
    opts: &RunOptions,
    sink: &mut dyn OutputSink,
    start: Instant,
) -> Result<RunResult, SandboxError> {
    let cap = plan.max_output_bytes;
    let mut streams = [
        StreamState { fd: out.read, stream: Stream::Stdout, total: 0, open: true },
        StreamState { fd: err.read, stream: Stream::Stderr, total: 0, open: true },
    ];
    let mut report = Vec::new();
    let mut report_open = true;
    // SAFETY: pidfd_open on our own child.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    let deadline = start + Duration::from_secs(plan.timeout_secs);
    let mut timed_out = false;
    let mut cancelled = false;
    let mut kill_deadline: Option<Instant> = None;
    let mut status: Option<i32> = None;
    let mut drain_deadline: Option<Instant> = None;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if status.is_some() && !streams.iter().any(|s| s.open) && !report_open {
            break;
        }
        let now = Instant::now();
        if status.is_none() {
            let cancel_now = opts.cancel.as_ref().is_some_and(|c| c.load(Ordering::SeqCst));
            if (now >= deadline || cancel_now) && kill_deadline.is_none() {
                timed_out = now >= deadline && !cancel_now;
                cancelled = cancel_now;
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                if let Some(cg) = cgroup {
                    cg.kill_all();
                }
                kill_deadline = Some(now + Duration::from_secs(2));
            }
            if let Some(k) = kill_deadline {
                if now >= k {
                    // SAFETY: signalling our own child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    if let Some(cg) = cgroup {
                        cg.kill_all();
                    }
                    kill_deadline = Some(now + Duration::from_secs(3600));
                }
            }
        } else if let Some(d) = drain_deadline {
            if now >= d {
                break; // something outside our tree holds the pipes; stop reading
            }
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(4);
        for s in streams.iter().filter(|s| s.open) {
            fds.push(libc::pollfd { fd: s.fd, events: libc::POLLIN, revents: 0 });
        }
        if report_open {
            fds.push(libc::pollfd { fd: rep.read, events: libc::POLLIN, revents: 0 });
        }
        if status.is_none() && pidfd >= 0 {
            fds.push(libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 });
        }
        // stdin relay: read the caller's side while there is room, write while there is data.
        let (mut relay_src, mut relay_dst) = (usize::MAX, usize::MAX);
        if let Some(r) = relay.as_ref().filter(|r| status.is_none() && r.write >= 0) {
            if r.src_open && r.buf.len() < StdinRelay::MAX_BUF {
                relay_src = fds.len();
                fds.push(libc::pollfd { fd: r.src, events: libc::POLLIN, revents: 0 });
            }
            if !r.buf.is_empty() {
                relay_dst = fds.len();
                fds.push(libc::pollfd { fd: r.write, events: libc::POLLOUT, revents: 0 });
            }
        }
        let wait_ms: i32 = if status.is_none() && pidfd < 0 {
            10
        } else if opts.cancel.is_some() && status.is_none() {
            100
        } else {
            let until = match (status, kill_deadline, drain_deadline) {
                (None, Some(k), _) => k,
                (None, None, _) => deadline,
                (Some(_), _, Some(d)) => d,
                (Some(_), _, None) => now + Duration::from_millis(100),
            };
            until.saturating_duration_since(now).as_millis().clamp(1, 1000) as i32
        };
        // SAFETY: fds is a valid array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(SandboxError::io("poll", e));
        }
        if let Some(r) = relay.as_mut() {
            let src = fds.get(relay_src).is_some_and(|p| p.revents != 0);
            let dst = fds.get(relay_dst).is_some_and(|p| p.revents != 0);
            if src || dst {
                r.pump(src, dst, &mut buf);
            }
        }
        for (i, p) in fds.iter().enumerate() {
            if p.revents == 0 || i == relay_src || i == relay_dst {
                continue;
            }
            if p.fd == pidfd {
                continue;
            }
            // SAFETY: reading into our buffer.
            let got = unsafe { libc::read(p.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if p.fd == rep.read {
                if got > 0 {
                    if report.len() < 65536 {
                        report.extend_from_slice(&buf[..got as usize]);
                    }
                } else {
                    report_open = false;
                }
                continue;
            }
            let Some(s) = streams.iter_mut().find(|s| s.fd == p.fd) else { continue };
            if got > 0 {
                let got = got as u64;
                let room = cap.saturating_sub(s.total);
                let keep = got.min(room) as usize;
                if keep > 0 {
                    sink.output(s.stream, &buf[..keep]);
                }
                s.total += got;
            } else {
                s.open = false;
            }
        }
        if status.is_none() {
            let mut st = 0;
            // SAFETY: non-blocking wait for our own child.
            let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
            if r == pid {
                status = Some(st);
                // The supervisor killed its whole tree before exiting. Something still holding
                // the output pipes can only be in the cgroup (if at all): kill it there. With
                // the pipes closed, the cgroup's removal (which kills anything left) is enough.
                if let (Some(cg), true) = (cgroup, streams.iter().any(|s| s.open)) {
                    cg.kill_all();
                }
                drain_deadline = Some(Instant::now() + Duration::from_millis(500));
            }
        }
    }
    if pidfd >= 0 {
        close(pidfd);
    }
    if let Some(r) = relay.as_mut() {
        r.close_write();
    }
    let st = match status {
        Some(s) => s,
        None => {
            let mut st = 0;
            // SAFETY: blocking wait for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            st
        }
    };
    for s in &streams {
        if s.total > cap {
            sink.truncated(s.stream, s.total - cap);
        }
    }
    let report = String::from_utf8_lossy(&report).into_owned();
    let mut applied = None;
    let mut exec_errno = None;
    let mut setup_warnings: Vec<String> = Vec::new();
    let mut st = st;
    for line in report.lines() {
        // PID 1 cloned by a forking runner reports the command's raw wait status (it cannot die
        // of the command's signal itself).
        if let Some(raw) = line.strip_prefix('S').and_then(|v| v.trim().parse::<i32>().ok()) {
            st = raw;
        }
        if let Some(msg) = line.strip_prefix('E') {
            return Err(SandboxError::Setup(msg.to_string()));
        }
        if let Some(j) = line.strip_prefix('R') {
            applied = serde_json::from_str::<AppliedReport>(j).ok();
        }
        if let Some(e) = line.strip_prefix('X') {
            exec_errno = e.trim().parse::<i32>().ok();
        }
        if let Some(w) = line.strip_prefix('W') {
            setup_warnings.push(w.to_string());
        }
    }
    if plan.level > SandboxLevel::None && applied.is_none() && exec_errno.is_none() && !timed_out && !cancelled {
        return Err(SandboxError::Setup(format!("the helper ended without reporting its confinement (status {st:#x})")));
    }
    let status = if libc::WIFSIGNALED(st) {
        ExitKind::Signaled { signal: libc::WTERMSIG(st) }
    } else {
        ExitKind::Exited { code: libc::WEXITSTATUS(st) }
    };
    if let Some(e) = exec_errno {
        let msg = format!("localgpt-sandbox: {}: {}\n", "exec", std::io::Error::from_raw_os_error(e));
        sink.output(Stream::Stderr, msg.as_bytes());
    }
    let exit_code = if timed_out {
        124
    } else if cancelled {
        130
    } else {
        match status {
            ExitKind::Exited { code } => code,
            ExitKind::Signaled { signal } => 128 + signal,
        }
    };
    let mut protections = plan.protections.clone();
    if let Some(a) = &applied {
        verify_applied(plan, a, &mut protections);
    }
    Ok(RunResult {
        command: Vec::new(),
        workspace: plan.workspace.clone(),
        level: plan.level,
        mode: plan.mode,
        status,
        exit_code,
        timed_out,
        cancelled,
        duration_ms: start.elapsed().as_secs_f64() * 1000.0,
        stdout: String::new(),
        stderr: String::new(),
        stdout_bytes: streams[0].total,
        stderr_bytes: streams[1].total,
        stdout_truncated: streams[0].total > cap,
        stderr_truncated: streams[1].total > cap,
        protections,
        warnings: plan.warnings.iter().cloned().chain(setup_warnings).collect(),
        applied,
        protected_review: None,
    })
}

/// Marks protections off when the helper reports that a mechanism the plan relied on was not
/// applied (defence in depth: the helper refuses to exec in that case anyway).
fn verify_applied(plan: &Plan, a: &AppliedReport, protections: &mut [Protection]) {
    let missing_landlock = plan.landlock.is_some() && a.landlock != "fully_enforced";
    let missing_seccomp = plan.seccomp.is_some() && !a.seccomp;
    for p in protections.iter_mut() {
        if (missing_landlock && p.mechanism.contains("landlock")) || (missing_seccomp && p.mechanism.contains("seccomp")) {
            p.state = ProtectionState::Off;
            p.detail = format!("the helper reported the mechanism was not applied ({})", p.detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scratch path sits in a private (0700, own) parent, is unique, is not created up front,
    /// and whatever was cached in it is gone after drop; a parent that is not private is refused.
    #[test]
    fn scratch_lives_in_a_private_parent_and_is_removed() {
        use std::os::unix::fs::MetadataExt;
        let a = Scratch::create().unwrap();
        let b = Scratch::create().unwrap();
        assert_ne!(a.0, b.0);
        let parent = a.0.parent().unwrap().to_path_buf();
        if parent == Path::new("/tmp") {
            return; // the private parent was unusable here: mkdtemp fallback (checked below)
        }
        let m = std::fs::symlink_metadata(&parent).unwrap();
        assert!(m.is_dir() && m.mode() & 0o077 == 0);
        // SAFETY: geteuid cannot fail.
        assert_eq!(m.uid(), unsafe { libc::geteuid() });
        assert!(!a.0.exists(), "not created up front");
        std::fs::create_dir_all(a.0.join("xdg-cache/sub")).unwrap();
        std::fs::write(a.0.join("xdg-cache/sub/f"), b"x").unwrap();
        let path = a.0.clone();
        drop(a);
        assert!(!path.exists());
        drop(b);
    }

    /// The one-stat-per-process count agrees with listing every `/proc/<pid>/task` directory
    /// (give or take processes that start or end in between).
    #[test]
    fn uid_task_count_matches_a_full_scan() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let fast = count_uid_tasks(uid);
        let mut slow = 0u64;
        for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
            if !e.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
                continue;
            }
            if e.metadata().is_ok_and(|m| m.uid() == uid) {
                slow += std::fs::read_dir(e.path().join("task")).map(|t| t.count() as u64).unwrap_or(1);
            }
        }
        assert!(fast >= 1, "this test's own threads count");
        assert!(fast.abs_diff(slow) <= 8, "fast {fast} vs full scan {slow}");
    }
}
