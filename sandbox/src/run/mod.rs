//! The parent side (spec 7.1): spawn the helper, stream stdout/stderr with a cap, enforce the
//! timeout, clean up (cgroup, scratch dir), and report what ran at which level.
//!
//! The parent is never restricted. The helper starts with default signal dispositions and exactly
//! four fds: stdin, the stdout and stderr pipes, and the report pipe as fd 3 ([`HelperStart`]):
//! a single-threaded parent forks it (cloned into new user and PID namespaces at Full level),
//! and it runs with the plan's environment from then on; a multithreaded parent `posix_spawn`s
//! `/proc/self/exe` with `argv[0] = localgpt-sandbox` and the scrubbed environment, so that no
//! code runs in a forked copy of it.
//!
//! Rooms: [`output`] (sinks, caps, stdin relay), [`spawn`] (starting the helper), [`supervise`]
//! (the poll loop, timeout, result), [`report`] (the helper's typed messages), [`cgroup`] and
//! [`scratch`] (per-run resources); this module ties them together and holds the public API.

pub mod cgroup;
pub(crate) mod fds;
pub mod output;
pub mod report;
pub mod scratch;
pub mod spawn;
pub mod supervise;
#[cfg(target_os = "linux")]
pub(crate) mod terminal;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::detect::Capabilities;
use crate::error::SandboxError;
use crate::plan::{Plan, Protection, RunContext};
use crate::policy::{SandboxLevel, SandboxMode, SandboxPolicy};
use cgroup::RunCgroup;
use fds::{close, cstr, pipe};
pub use output::{CaptureSink, OutputSink, Stream};
pub use report::AppliedReport;
use scratch::{count_uid_tasks, Scratch};
#[cfg(target_os = "linux")]
use crate::linux::zygote::single_threaded;
#[cfg(target_os = "linux")]
use spawn::fork_helper;
use spawn::{spawn_helper, HelperFds};
use output::StdinRelay;
use supervise::Supervisor;
#[cfg(target_os = "linux")]
use terminal::Pty;
/// No pseudo-terminals elsewhere ([`StdinMode::Terminal`] is refused there).
#[cfg(not(target_os = "linux"))]
pub(crate) enum Pty {}

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
    /// The caller's stdin itself (the CLI's explicit `--stdin inherit` when its stdout is not a
    /// terminal: a terminal is handed over read-write; the CLI restores its settings after the
    /// run).
    Inherit,
    /// A terminal of the command's own (Linux; the CLI's `--stdin inherit` when its stdin and
    /// stdout are terminals): a pseudo-terminal is the command's stdin, stdout and stderr and
    /// its controlling terminal, in a session of its own. The runner switches this descriptor of
    /// the caller's, a terminal, to raw mode and relays what is typed there into it (Ctrl-C
    /// interrupts the program in the foreground, not the run), copies its window size, and
    /// delivers the terminal's output as [`Stream::Stdout`] (for a screen: see
    /// `text::ScreenFilter`); the caller's settings are restored after the run and
    /// its unread input discarded. The command never holds the caller's terminal.
    Terminal(i32),
}

/// How the runner starts the helper (see the `linux::helper` module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HelperStart {
    /// `fork` when the calling process has a single thread (the CLI, a single-threaded host):
    /// the forked copy runs the helper code directly, one `execve` (~0.7 ms on a small VM) less
    /// per run. Otherwise (Linux) a *zygote* forks it: the helper binary, exec'd once per process
    /// as a small single-threaded factory that clones helpers as this process's children on
    /// request; where the zygote cannot serve, as [`HelperStart::Exec`]. The default.
    #[default]
    Auto,
    /// Always `posix_spawn` the helper binary ([`RunOptions::helper_exe`]) for the run: no code
    /// of the caller runs in a forked copy of it, and no zygote is started.
    Exec,
    /// Linux: always through the zygote, even from a single-threaded process (as
    /// [`HelperStart::Exec`] where it does not serve). What a multithreaded host gets under
    /// `Auto`; for tests that run the escape corpus through that start (the CLI takes it from
    /// `LOCALGPT_SANDBOX_HELPER_START=zygote`) and for benchmarks.
    Zygote,
}

/// The variable through which the CLI takes a [`HelperStart`] other than `Auto` (`zygote` or
/// `exec`), for tests and benchmarks of those starts.
pub const HELPER_START_ENV: &str = "LOCALGPT_SANDBOX_HELPER_START";

impl HelperStart {
    /// The start named by `name` (`auto`, `exec` or `zygote`).
    ///
    /// # Errors
    /// [`SandboxError::Policy`] for any other name.
    pub fn parse(name: &str) -> Result<HelperStart, SandboxError> {
        match name {
            "auto" | "" => Ok(HelperStart::Auto),
            "exec" => Ok(HelperStart::Exec),
            "zygote" => Ok(HelperStart::Zygote),
            other => Err(SandboxError::Policy(format!("{HELPER_START_ENV}={other:?}: expected auto, exec or zygote"))),
        }
    }
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
    /// Set to true to stop the command (e.g. Ctrl-C in the CLI); polled every 100 ms.
    pub cancel: Option<&'static AtomicBool>,
    /// Stops the command the moment it is cancelled (it wakes the runner; no polling); see
    /// [`CancelToken`].
    pub cancel_token: Option<CancelToken>,
    /// Receives the helper's pid once it is started (what [`crate::handle::SandboxedChild::id`]
    /// reports).
    pub pid_slot: Option<std::sync::Arc<std::sync::atomic::AtomicI32>>,
    /// macOS: read what Seatbelt denied from the system log after the run
    /// ([`RunResult::denials`]; it takes a second or more).
    pub collect_denials: bool,
}

/// A cloneable handle that stops a run from any thread: [`CancelToken::cancel`] asks the tree
/// to stop (`SIGTERM`, then `SIGKILL` 2 s later, like a timeout); [`CancelToken::kill`] kills it
/// at once. Either wakes the runner through a pipe, so it acts immediately.
#[derive(Clone, Debug)]
pub struct CancelToken {
    inner: std::sync::Arc<CancelInner>,
}

#[derive(Debug)]
struct CancelInner {
    cancelled: AtomicBool,
    killed: AtomicBool,
    /// (read, write), both non-blocking and close-on-exec.
    wake: (i32, i32),
}

impl Drop for CancelInner {
    fn drop(&mut self) {
        close(self.wake.0);
        close(self.wake.1);
    }
}

impl CancelToken {
    /// A token nobody has cancelled yet.
    ///
    /// # Errors
    /// [`SandboxError::Io`] when its pipe cannot be made.
    pub fn new() -> Result<CancelToken, SandboxError> {
        let p = pipe()?;
        for fd in [p.read, p.write] {
            // SAFETY: making our own pipe ends non-blocking.
            unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
        }
        Ok(CancelToken { inner: std::sync::Arc::new(CancelInner { cancelled: AtomicBool::new(false), killed: AtomicBool::new(false), wake: (p.read, p.write) }) })
    }

    /// Stops the run: `SIGTERM` to the whole tree now, `SIGKILL` 2 s later. The result says
    /// `cancelled` (exit code 130).
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
        self.wake();
    }

    /// Kills the whole tree now: `SIGKILL` where that takes every process with it (a PID
    /// namespace or a cgroup), else the supervisor's immediate `SIGKILL` of every descendant. The
    /// result says `cancelled`.
    pub fn kill(&self) {
        self.inner.killed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cancel();
    }

    /// Whether [`CancelToken::cancel`] or [`CancelToken::kill`] was called.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn is_killed(&self) -> bool {
        self.inner.killed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The descriptor that becomes readable once cancelled (for `poll`).
    pub(crate) fn wake_fd(&self) -> i32 {
        self.inner.wake.0
    }

    fn wake(&self) {
        // SAFETY: one byte into our own non-blocking pipe (a full pipe already wakes).
        unsafe { libc::write(self.inner.wake.1, [1u8].as_ptr().cast(), 1) };
    }
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
    /// Bytes the command's processes caused to be written to storage (Linux: `write_bytes` of
    /// `/proc/<pid>/io` for the whole tree, which the helper reaped: files on disk-backed
    /// filesystems, counted when their pages are dirtied; tmpfs, pipes and sockets are not
    /// counted). `None` where it could not be read.
    #[serde(default)]
    pub bytes_written: Option<u64>,
    /// Protections in force.
    pub protections: Vec<Protection>,
    /// Warnings (degraded level, unconfined run).
    pub warnings: Vec<String>,
    /// Runs in this workspace killed before their review (`kill -9` of the CLI), reviewed by this
    /// one: what became of their changes (also among the warnings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recovered: Vec<String>,
    /// What the helper reported it applied.
    pub applied: Option<AppliedReport>,
    /// What the command changed in the protected workspace paths, and what became of it
    /// (Full level): applied, or kept as pending changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected_review: Option<crate::guard::pending::ProtectedReview>,
    /// macOS, when asked ([`RunOptions::collect_denials`]): the operations Seatbelt denied under
    /// the profile's tagged rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<crate::macos::denials::Denial>,
    /// `--network allowlist`: every decision of the runner's proxy (host, port, address, rule,
    /// bytes each way).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetEvent>,
    /// File accesses the plan refuses that the command's stderr names, with the flag that
    /// allows each ([`crate::why::refusals_in`], filled by the caller that saw the output).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<crate::why::Refusal>,
    /// Hints for failures the command printed that the policy explains (a name lookup under a
    /// denied network: [`crate::why::resolution_hint`]), filled by the caller that saw the output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
}

pub use crate::network::NetEvent;

pub(crate) static RUN_SEQ: AtomicU64 = AtomicU64::new(0);

/// Runs of this process with Landlock and without namespaces whose helper it forked itself
/// (single-threaded, [`HelperStart::Auto`]).
#[cfg(target_os = "linux")]
static FORKED_RUNS: AtomicU64 = AtomicU64::new(0);

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
    prepare_with(policy, None)
}

/// [`prepare`] with capabilities detected earlier in this process ([`crate::handle::Sandbox`]
/// keeps them), brought up to date by [`crate::detect::refresh`]; `None` detects them now.
///
/// # Errors
/// As [`prepare`].
pub(crate) fn prepare_with(policy: &SandboxPolicy, detected: Option<&Capabilities>) -> Result<PreparedRun, SandboxError> {
    // Validated once and the level chosen once, for the scratch decision and the plan alike.
    policy.validate()?;
    // A denied file moved since a previous run is denied where it is now.
    let mut followed = policy.clone();
    crate::guard::denied::follow(&mut followed);
    let policy = &followed;
    let caps = detected.map_or_else(crate::detect::detect_quick, crate::detect::refresh);
    crate::timing::stamp("detected");
    let level = crate::plan::choose_level(policy, &caps)?;
    // The per-run scratch dir holds the redirected caches; with a private /tmp (namespaces) they
    // go there instead, so the dir would only cost a mkdtemp and an rmdir.
    // At level none the caller's environment passes unchanged, so no dir either.
    let confined_without_namespaces = level > SandboxLevel::None && !crate::plan::uses_namespaces(policy, &caps, level);
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
    let mut id = [0u8; 6];
    crate::rand::fill(&mut id);
    let run_id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    // The allowlist in the host's network namespace: the proxy's port on the host's loopback,
    // bound now and held until the run takes it.
    #[cfg(target_os = "linux")]
    let proxy_port = if policy.network_access == crate::policy::NetworkPolicy::Allowlist && confined_without_namespaces { Some(hold_proxy_listener()?) } else { None };
    #[cfg(not(target_os = "linux"))]
    let proxy_port = None;
    let ctx = RunContext { caller_env: caller_env(), scratch: scratch.as_ref().map(|s| s.0.clone()), uid_tasks, run_id: Some(run_id), helper_exe: None, proxy_port, ablate: crate::ablation::requested() };
    #[cfg(not(feature = "ablation"))]
    let mut plan = crate::plan::make_plan_at(policy, &caps, &ctx, level)?;
    #[cfg(feature = "ablation")]
    let mut plan = ablated_plan(policy, &caps, &ctx, level)?;
    if let Err(e) = crate::guard::denied::record(policy) {
        plan.warnings.push(format!("the denied paths' inodes could not be recorded ({e}): if a command moves one, the next run's rule matches only its name"));
    }
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
            Err(SandboxError::NamespacesUnavailable(msg))
                if self.plan.namespaces().is_some()
                    && self.policy.level == crate::policy::LevelSetting::Auto
                    && self.policy.require_level.is_none_or(|r| r < SandboxLevel::Full) =>
            {
                crate::detect::record_userns_failure(&msg);
                let mut r = prepare(&self.policy)?.run(argv, opts, sink)?;
                r.warnings.insert(0, format!("Full level unavailable ({msg}); ran at {}", r.level));
                Ok(r)
            }
            // The per-run cgroup was refused (a sandbox inside a sandbox): nothing ran. Plan
            // again without cgroups (process count by RLIMIT_NPROC, memory unbounded: the new
            // plan's protection table says so) and say why.
            Err(SandboxError::CgroupUnavailable(msg)) => {
                crate::detect::record_cgroup_failure(&msg);
                let mut r = prepare(&self.policy)?.run(argv, opts, sink)?;
                r.warnings.insert(0, format!("no per-run cgroup here ({msg}): ran at {} with the limits that need none (see the protection table)", r.level));
                Ok(r)
            }
            other => other,
        }
    }
}

/// The ablation build's plan: the mechanisms of the protections `ctx.ablate` names removed
/// (it carries them as [`Plan::ablated`]), the protection table of the plan made without them
/// (see [`crate::ablation`]).
#[cfg(feature = "ablation")]
fn ablated_plan(policy: &SandboxPolicy, caps: &Capabilities, ctx: &RunContext, level: SandboxLevel) -> Result<Plan, SandboxError> {
    use crate::plan::ProtectionId;
    if ctx.ablate.is_empty() {
        return crate::plan::make_plan_at(policy, caps, ctx, level);
    }
    let reference = crate::plan::make_plan_at(policy, caps, &RunContext { ablate: Vec::new(), ..ctx.clone() }, level)?;
    let mut cut_policy = policy.clone();
    if crate::ablation::is(&ctx.ablate, ProtectionId::FsReadCredentials) {
        cut_policy.deny_paths.clear();
    }
    let mut plan = crate::plan::make_plan_at(&cut_policy, caps, ctx, level)?;
    for line in crate::plan::ablate::cut(&mut plan, &ctx.caller_env)? {
        eprintln!("localgpt (ablation build, never shipped): {line}");
    }
    plan.protections = reference.protections;
    Ok(plan)
}

/// Proxy sockets bound on the host's loopback for prepared runs of this process (the allowlist
/// without a network namespace), by port, until the run takes its own.
#[cfg(target_os = "linux")]
static PROXY_LISTENERS: std::sync::Mutex<Vec<(u16, std::net::TcpListener)>> = std::sync::Mutex::new(Vec::new());

/// Binds a proxy socket on `127.0.0.1` (a free port) and holds it for the run; its port.
#[cfg(target_os = "linux")]
fn hold_proxy_listener() -> Result<u16, SandboxError> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| SandboxError::io("bind the allowlist proxy on 127.0.0.1", e))?;
    let port = l.local_addr().map_err(|e| SandboxError::io("the allowlist proxy's address", e))?.port();
    if let Ok(mut v) = PROXY_LISTENERS.lock() {
        v.push((port, l));
    }
    Ok(port)
}

/// The proxy socket held for `port`, or one bound now (a plan made elsewhere); an error when the
/// port is taken — the command's proxy variables name that port, so nothing runs.
#[cfg(target_os = "linux")]
fn take_proxy_listener(port: u16) -> Result<std::net::TcpListener, SandboxError> {
    let held = PROXY_LISTENERS.lock().ok().and_then(|mut v| v.iter().position(|(p, _)| *p == port).map(|i| v.swap_remove(i).1));
    match held {
        Some(l) => Ok(l),
        None => std::net::TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| SandboxError::Setup(format!("the allowlist proxy's port 127.0.0.1:{port} cannot be bound ({e}): nothing ran"))),
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

pub use crate::plan::caller_env;

/// Runs `argv` under an already built plan.
///
/// # Errors
/// As [`run_argv`].
pub fn run_plan<S: AsRef<std::ffi::OsStr>>(plan: &Plan, argv: &[S], opts: &RunOptions, sink: &mut dyn OutputSink) -> Result<RunResult, SandboxError> {
    if argv.is_empty() {
        return Err(SandboxError::Policy("no command given".into()));
    }
    let start = Instant::now();
    // What runs in this workspace killed before their review (`kill -9` of the CLI) left in
    // their private copies is reviewed now, as they would have (said in this run's warnings;
    // `localgpt sandbox pending` reviews those of every workspace).
    #[cfg(target_os = "linux")]
    let recovered = crate::linux::protect::recover_killed_runs(Some(&plan.workspace));
    // The audit log: opened before anything starts (a run the user asked to record does not
    // run unrecorded).
    let (audit, run_end) = open_audit(plan, argv)?;
    let cgroup = RunCgroup::create(&plan.cgroup_settings(), !crate::ablation::is(&plan.ablated, crate::plan::ProtectionId::TimeoutKillTree))?;
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    #[allow(unused_mut)]
    let mut helper_plan = plan.helper_plan(me, cgroup.as_ref().map(RunCgroup::join_files).unwrap_or_default());
    if matches!(opts.stdin, StdinMode::Terminal(_)) {
        helper_plan.with_terminal();
    }
    // The private layers this run mounts, while it holds their locks.
    #[cfg(target_os = "linux")]
    let (_layer_locks, layer_warning) = lock_layers(&mut helper_plan);
    // Protected workspace paths (Linux): the private copies' staging, and a snapshot of the
    // others to review them in place after the run. (On macOS the profile denies writes to them.)
    #[cfg(target_os = "linux")]
    let protected = plan.namespaces().map(|n| n.protected.clone()).unwrap_or_default();
    #[cfg(target_os = "linux")]
    let staging = crate::linux::protect::Staging::create(plan)?;
    #[cfg(target_os = "linux")]
    let snapshot = crate::linux::protect::Snapshot::take(plan);
    #[cfg(target_os = "linux")]
    crate::timing::stamp("snapshot");
    #[cfg(target_os = "linux")]
    if let (Some(ns), Some(st)) = (helper_plan.namespaces.as_mut(), staging.as_ref()) {
        ns.staging = Some(st.dir.clone());
    }
    #[cfg(target_os = "linux")]
    let started = std::time::SystemTime::now();
    // The journal a later run reviews this one's private copies by, should this runner be
    // killed before its own review.
    // Where the user's state cannot be written (a sandbox started inside a sandbox, whose state
    // directory the outer one keeps read-only), the run goes on without one, and says so.
    #[cfg(target_os = "linux")]
    let (journal, journal_warning) = match crate::linux::protect::write_journal(&plan.workspace, &protected, staging.as_ref(), &snapshot, started) {
        Ok(j) => (j, None),
        Err(e) => (None, Some(format!("this run's journal could not be written ({e}): were this runner killed before its review, its changes to protected paths would not be reviewed by a later run"))),
    };
    let env: Vec<CString> = plan
        .env
        .vars
        .iter()
        .map(|(k, v)| cstr(format!("{k}={v}").as_bytes(), "environment variable"))
        .collect::<Result<_, _>>()?;
    #[cfg(target_os = "macos")]
    let started_wall = std::time::SystemTime::now();
    let launch = launch_command(plan, argv, opts)?;
    // A helper that is not a forked copy of this process gets its plan as JSON: from the zygote
    // (Linux, a multithreaded host under `Auto`) in its request, when exec'd in its environment.
    let plan_json = if launch.fork { Vec::new() } else { serde_json::to_vec(&helper_plan).map_err(|e| SandboxError::Plan(e.to_string()))? };
    let (exe, args, fork) = (launch.exe, launch.args, launch.fork);
    // The helper's stdin (None: inherit ours), the relay that fills it, the command's terminal.
    let (stdin_fd, relay, pty) = helper_stdin(opts)?;
    let (out, err) = (pipe()?, pipe()?);
    // With a terminal of its own, that is the command's stdin, stdout and stderr.
    let (stdin_fd, out, err) = match &pty {
        #[cfg(target_os = "linux")]
        Some(p) => p.streams(out, err).map(|(i, o, e)| (Some(i), o, e))?,
        _ => (stdin_fd, out, err),
    };
    // Granted host sockets: held open from now on, and the report channel also carries the
    // seccomp listener.
    #[cfg(target_os = "linux")]
    let host_proxy = match (plan.proxy_port, plan.namespaces()) {
        (Some(port), None) => Some(take_proxy_listener(port)?),
        _ => None,
    };
    #[cfg(target_os = "linux")]
    let granted = if helper_plan.seccomp_listener { Some(Granted::open(&plan.unix_sockets, plan.namespaces().is_some_and(|n| !n.host_network), plan.network == crate::policy::NetworkPolicy::Full, plan.network_allowlist.is_some(), host_proxy)?) } else { None };
    #[cfg(not(target_os = "linux"))]
    let granted: Option<Granted> = None;
    #[cfg(target_os = "linux")]
    let rep_socket = granted.is_some() || helper_plan.proxy_port.is_some();
    #[cfg(target_os = "linux")]
    let rep = if rep_socket { fds::socket_channel()? } else { pipe()? };
    #[cfg(not(target_os = "linux"))]
    let (rep, rep_socket) = (pipe()?, false);
    crate::timing::stamp("spawn_helper");
    let fds = HelperFds { stdin: stdin_fd, out: out.write, err: err.write, report: rep.write };
    let spawned = start_helper(&helper_plan, Spawn { exe: &exe, args: &args, env, plan_json: &plan_json, fork }, &fds, opts);
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
    let outcome = Supervisor { pid, plan, out: &out, err: &err, rep: &rep, granted: granted.as_ref(), rep_socket, audit: audit.clone(), relay, terminal: pty.as_ref(), cgroup: cgroup.as_ref(), opts, start }.run(sink);
    crate::timing::stamp("helper_reaped");
    for fd in [out.read, err.read, rep.read] {
        close(fd);
    }
    drop(audit);
    let (mut r, reported) = match outcome {
        Ok(o) => o,
        Err(e) => {
            if let Some(end) = run_end {
                end.end(serde_json::json!({ "error": e.to_string() }));
            }
            return Err(e);
        }
    };
    if let Some(end) = run_end {
        end_audit(end, &r);
    }
    r.command = argv.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect();
    #[cfg(target_os = "linux")]
    {
        r.recovered = recovered.iter().map(crate::linux::protect::Recovered::summary).collect();
        r.warnings.extend(r.recovered.iter().cloned());
        r.warnings.extend(journal_warning);
        r.warnings.extend(layer_warning);
    }
    #[cfg(target_os = "linux")]
    if staging.is_some() || !snapshot.is_empty() {
        review_protected(plan, &protected, staging.as_ref(), &snapshot, &reported, started, &mut r);
    }
    #[cfg(target_os = "linux")]
    drop(staging);
    #[cfg(target_os = "linux")]
    drop(journal);
    #[cfg(target_os = "macos")]
    if let (Some(m), true) = (&plan.macos, opts.collect_denials) {
        r.denials = crate::macos::denials::read(&m.marker, started_wall);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = reported;
    drop(cgroup);
    crate::timing::stamp("cgroup_removed");
    crate::timing::flush("cli");
    Ok(r)
}

/// Takes the lock of each of the plan's private layers (`NamespacePlan::layers`; one run of a
/// workspace mounts its layer at a time, overlayfs leaves two mounts sharing an upper
/// directory undefined), kept until the run is over: a layer whose lock another run holds, or
/// that cannot be locked, is left out of this run (its directory stays read-only), with a
/// warning. The lock file lies beside the workspace's tool caches, where no run writes.
#[cfg(target_os = "linux")]
fn lock_layers(helper_plan: &mut crate::plan::HelperPlan) -> (Vec<std::fs::File>, Option<String>) {
    let Some(ns) = helper_plan.namespaces.as_mut() else { return (Vec::new(), None) };
    let (mut held, mut left) = (Vec::new(), Vec::new());
    ns.layers.retain(|l| {
        let lock = l.store.parent().and_then(|cache| crate::host::lock_file(&crate::config::layer_lock(cache), false).ok());
        match lock {
            Some(f) => {
                held.push(f);
                true
            }
            None => {
                left.push(l.path.display().to_string());
                false
            }
        }
    });
    let warning = (!left.is_empty()).then(|| format!("{} read-only for this run: another run of this workspace has its private layer (or its lock could not be taken)", left.join(", ")));
    (held, warning)
}

/// Opens the plan's audit log, if any, and writes the run's `start` line; the [`RunEnd`] owes
/// its `end` line.
///
/// [`RunEnd`]: crate::audit::RunEnd
fn open_audit<S: AsRef<std::ffi::OsStr>>(plan: &Plan, argv: &[S]) -> Result<(Option<std::sync::Arc<crate::audit::Audit>>, Option<crate::audit::RunEnd>), SandboxError> {
    let Some(p) = &plan.audit_log else { return Ok((None, None)) };
    let run = format!("{}-{}", std::process::id(), RUN_SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
    let a = std::sync::Arc::new(crate::audit::Audit::open(p, &run)?);
    let degraded: Vec<String> = plan.protections.iter().filter(|p| p.state != crate::plan::ProtectionState::Enforced).map(|p| p.id.to_string()).collect();
    a.event("start", serde_json::json!({
        "policy_digest": plan.policy_digest(),
        "command": argv.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>(),
        "workspace": plan.workspace,
        "level": plan.level,
        "network": plan.network,
        "not_enforced": degraded,
    }));
    let end = crate::audit::RunEnd::new(std::sync::Arc::clone(&a));
    Ok((Some(a), Some(end)))
}

/// What [`helper_stdin`] makes: the helper's stdin, the relay, the command's terminal.
type HelperStdin = (Option<i32>, Option<StdinRelay>, Option<Pty>);

/// The helper's stdin (None: inherit ours), when relaying the relay whose pipe end the runner
/// fills, and the command's own terminal ([`StdinMode::Terminal`]).
fn helper_stdin(opts: &RunOptions) -> Result<HelperStdin, SandboxError> {
    let relay = |src: i32, write: i32| StdinRelay { src, write, buf: Vec::new(), src_open: true };
    Ok(match opts.stdin {
        StdinMode::Null => {
            // SAFETY: open with a static C string.
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(SandboxError::io("open /dev/null", std::io::Error::last_os_error()));
            }
            (Some(fd), None, None)
        }
        StdinMode::Relay(src) => {
            let p = pipe()?;
            // SAFETY: making our own pipe end non-blocking.
            unsafe { libc::fcntl(p.write, libc::F_SETFL, libc::O_NONBLOCK) };
            (Some(p.read), Some(relay(src, p.write)), None)
        }
        StdinMode::Inherit => (None, None, None),
        #[cfg(target_os = "linux")]
        StdinMode::Terminal(src) => {
            // The helper's stdin comes with its stdout and stderr (`Pty::streams`).
            let pty = Pty::open(src)?;
            let input = pty.input()?;
            (None, Some(relay(src, input)), Some(pty))
        }
        #[cfg(not(target_os = "linux"))]
        StdinMode::Terminal(_) => return Err(SandboxError::Policy("a terminal of the command's own (--stdin inherit on a terminal) is built on Linux only".into())),
    })
}

/// How the helper is started: its binary and arguments, environment and (exec'd) plan, and
/// whether it is a forked copy of this process.
struct Spawn<'a> {
    exe: &'a std::path::Path,
    args: &'a [CString],
    env: Vec<CString>,
    plan_json: &'a [u8],
    fork: bool,
}

/// Starts the helper: forked, through the zygote, or exec'd; returns its pid.
#[cfg(target_os = "linux")]
fn start_helper(helper_plan: &crate::plan::HelperPlan, how: Spawn<'_>, fds: &HelperFds, opts: &RunOptions) -> Result<i32, SandboxError> {
    let Spawn { exe, args, env, plan_json, fork } = how;
    if fork {
        // A single-threaded host that ran such a command before from this process (an agent
        // calling `run_*` in a loop) gets kept rulesets as the zygote's helpers do: the forked
        // helper inherits the offer and keeps the descriptor at fd 4. A process's first run with
        // Landlock and no namespaces (the CLI's only one) builds its ruleset in the command's
        // process as before: keeping it would cost a `statx` per rule that no later run pays back.
        let offered = helper_plan
            .landlock
            .as_ref()
            .filter(|_| helper_plan.namespaces.is_none() && FORKED_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 0)
            .and_then(|ll| crate::linux::rulesets::for_plan(ll).map(|(fd, applied)| crate::linux::apply::offer_prebuilt(ll.clone(), crate::linux::apply::BuiltRuleset { fd, applied })))
            .is_some();
        let spawned = fork_helper(helper_plan, &args[1..], &env, fds);
        // The helper has its copy (or none was made): ours is closed.
        if offered {
            crate::linux::apply::withdraw_prebuilt();
        }
        spawned
    } else {
        // The zygote only makes the start faster: where it does not serve, the helper is exec'd.
        // Its helpers get a Landlock ruleset kept from an earlier run of this process when every
        // rule still leads where it did (crate::linux::rulesets), so that the command's process
        // does not build it again.
        let zygote = || {
            let ruleset = helper_plan.landlock.as_ref().filter(|_| helper_plan.namespaces.is_none()).and_then(crate::linux::rulesets::for_plan);
            let passed = ruleset.as_ref().and_then(|(fd, n)| u32::try_from(*n).ok().map(|n| (std::os::fd::AsRawFd::as_raw_fd(fd), n)));
            crate::linux::zygote::spawn_helper(exe, plan_json, &args[1..], &env, fds, helper_plan.namespaces.is_some(), passed)
        };
        match (opts.helper_start != HelperStart::Exec).then(zygote).flatten() {
            Some(started) => started,
            None => exec_helper(exe, args, env, plan_json, fds),
        }
    }
}

/// Starts the helper: exec'd; returns its pid.
#[cfg(not(target_os = "linux"))]
fn start_helper(_helper_plan: &crate::plan::HelperPlan, how: Spawn<'_>, fds: &HelperFds, _opts: &RunOptions) -> Result<i32, SandboxError> {
    let _ = how.fork; // never a forked copy here
    exec_helper(how.exe, how.args, how.env, how.plan_json, fds)
}

/// Writes the run's `end` line to the audit log.
fn end_audit(end: crate::audit::RunEnd, r: &RunResult) {
    let signal = match r.status {
        ExitKind::Signaled { signal } => Some(signal),
        ExitKind::Exited { .. } => None,
    };
    end.end(serde_json::json!({
        "exit_code": r.exit_code,
        "signal": signal,
        "timed_out": r.timed_out,
        "cancelled": r.cancelled,
        "stdout_truncated": r.stdout_truncated,
        "stderr_truncated": r.stderr_truncated,
        "duration_ms": r.duration_ms,
        "network_decisions": r.network.len(),
    }));
}

/// After the run (the command and everything it started are gone): reviews the protected
/// workspace paths (private copies and those left in place, new nested repositories and
/// submodules) into `r.protected_review`.
#[cfg(target_os = "linux")]
fn review_protected(plan: &Plan, protected: &[crate::model::guard::ProtectedPath], staging: Option<&crate::linux::protect::Staging>, snapshot: &crate::linux::protect::Snapshot, reported: &report::Reported, started: std::time::SystemTime, r: &mut RunResult) {
    // The command and everything it started are gone (PID 1 exited, or the supervisor
    // killed the tree): the private copies and the real paths are quiet. Paths that were
    // bound read-only instead have nothing to review.
    let read_only: Vec<usize> = reported
        .warnings
        .iter()
        .filter_map(|w| match w {
            report::SetupWarning::ProtectedReadOnly { index, .. } => Some(*index),
            report::SetupWarning::LayerReadOnly { .. } | report::SetupWarning::TerminalUnnamed { .. } => None,
        })
        .collect();
    let mut review = match staging {
        Some(st) => crate::linux::protect::review_run(&plan.workspace, protected, st, snapshot, &read_only, started),
        None => crate::linux::protect::ProtectedReview::default(),
    };
    crate::linux::protect::review_in_place(&plan.workspace, snapshot, started, &mut review);
    crate::timing::stamp("review_in_place");
    crate::linux::protect::review_new_nested(plan, started, &mut review);
    crate::timing::stamp("review_nested");
    crate::linux::protect::review_new_submodules(plan, started, &mut review);
    crate::timing::stamp("review_submodules");
    if !read_only.is_empty() {
        // Read-only instead of a private copy: stricter (git commits inside fail), so the
        // row stays as it was and says so.
        for p in r.protections.iter_mut().filter(|p| p.id == crate::plan::ProtectionId::WorkspacePersistence) {
            p.detail = format!("{} (this run: {} read-only, no private copy)", p.detail, review.read_only.join(", "));
        }
    }
    r.protected_review = Some(review);
}

/// `posix_spawn`s the helper binary with its plan in `$LOCALGPT_SANDBOX_PLAN`; returns its pid.
fn exec_helper(exe: &std::path::Path, args: &[CString], mut env: Vec<CString>, plan_json: &[u8], fds: &HelperFds) -> Result<i32, SandboxError> {
    let mut plan_var = format!("{}=", report::PLAN_ENV).into_bytes();
    plan_var.extend_from_slice(plan_json);
    env.push(cstr(&plan_var, "plan")?);
    spawn_helper(exe, args, &env, fds)
}

/// The granted host sockets of a run, held open by the runner (Linux; nothing elsewhere).
#[cfg(target_os = "linux")]
pub(crate) use crate::linux::unixgrant::Granted;
/// The granted host sockets of a run (Linux only; never made elsewhere).
#[cfg(not(target_os = "linux"))]
pub(crate) struct Granted;

/// How the runner starts the helper for a plan.
struct Launch {
    /// The program.
    exe: PathBuf,
    /// Its argv (`argv[0]` first).
    args: Vec<CString>,
    /// Fork a copy of this process instead (Linux, single-threaded runner).
    fork: bool,
}

/// Linux: the helper is this binary as `localgpt-sandbox` (forked, or spawned from
/// `/proc/self/exe`).
#[cfg(target_os = "linux")]
fn launch_command<S: AsRef<std::ffi::OsStr>>(_plan: &Plan, argv: &[S], opts: &RunOptions) -> Result<Launch, SandboxError> {
    let mut args = vec![cstr(report::HELPER_ARGV0.as_bytes(), "argv0")?];
    for a in argv {
        args.push(cstr(a.as_ref().as_bytes(), "command argument")?);
    }
    Ok(Launch {
        exe: opts.helper_exe.clone().unwrap_or_else(|| PathBuf::from("/proc/self/exe")),
        args,
        fork: opts.helper_start == HelperStart::Auto && single_threaded(),
    })
}

/// macOS: `sandbox-exec -p PROFILE -D… -- HELPER --localgpt-sandbox-helper CMD…`, the helper
/// being the binary the profile lets run (its `HELPER` parameter); without a profile (full
/// access) the helper directly.
#[cfg(not(target_os = "linux"))]
fn launch_command<S: AsRef<std::ffi::OsStr>>(plan: &Plan, argv: &[S], opts: &RunOptions) -> Result<Launch, SandboxError> {
    let helper = plan
        .macos
        .as_ref()
        .and_then(|m| m.params.iter().find(|(k, _)| k.starts_with("HELPER")).map(|(_, v)| v.clone()))
        .or_else(|| opts.helper_exe.clone())
        .or_else(|| std::env::current_exe().ok())
        .ok_or_else(|| SandboxError::Setup("cannot find this executable to start the helper".into()))?;
    let mut args = Vec::new();
    let exe = match &plan.macos {
        Some(m) => {
            args.push(cstr(b"sandbox-exec", "argv0")?);
            for a in m.sandbox_exec_args() {
                args.push(cstr(a.as_bytes(), "sandbox-exec argument")?);
            }
            args.push(cstr(helper.as_os_str().as_bytes(), "helper path")?);
            PathBuf::from(crate::detect::SANDBOX_EXEC)
        }
        None => {
            args.push(cstr(helper.as_os_str().as_bytes(), "helper path")?);
            helper.clone()
        }
    };
    args.push(cstr(report::HELPER_FLAG.as_bytes(), "helper flag")?);
    for a in argv {
        args.push(cstr(a.as_ref().as_bytes(), "command argument")?);
    }
    Ok(Launch { exe, args, fork: false })
}

pub use crate::host::set_signal_handlers;

