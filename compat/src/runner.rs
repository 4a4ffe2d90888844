//! Runs the corpus: every selected command bare and then sandboxed at each level, each run in a
//! fresh copy of the same fixture at the same path, in parallel across commands.
//!
//! Work root layout (default `/var/tmp/lgcompat-<user>`; deliberately outside `/tmp`, which the
//! default policy makes writable):
//!
//! ```text
//! <root>/xdg-empty/            XDG_CONFIG_HOME of every run (no localgpt config, no git config)
//! <root>/templates/<fixture>/  each fixture built once (tree copied, setup.sh run)
//! <root>/runs/<n>/ws/          the workspace: a fresh copy of the template for every run
//! <root>/runs/<n>/outside/     a directory outside the workspace, fresh per run
//! <root>/runs/<n>/scratch/     the bare run's cache directories (the sandbox has its own)
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::io::{IsTerminal, Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command as Proc, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use regex::Regex;

use crate::compare::{judge_denied, judge_succeed, judge_workspace, EffectSeen, Outcome, RunOutput, Verdict};
use crate::tree;
use crate::load::FIXTURES_DIR;
use crate::normalise::PathContext;
use crate::results::{user_kind, CaseRecord, UserResults};
use crate::schema::{Command, Corpus, Expect};

/// Cache variables the sandbox redirects; the bare run gets the same ones pointed at its own
/// scratch directory so both runs start from empty caches.
const CACHE_VARS: &[(&str, &str)] = &[
    ("XDG_CACHE_HOME", "xdg-cache"),
    ("npm_config_cache", "npm-cache"),
    ("PIP_CACHE_DIR", "pip-cache"),
    ("YARN_CACHE_FOLDER", "yarn-cache"),
    ("PNPM_HOME", "pnpm"),
];

/// Toolchain variables passed through from the runner's environment when set.
const PASS_THROUGH: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "PYENV_ROOT", "PYENV_VERSION",
    "NVM_DIR", "GOPATH", "GOROOT", "JAVA_HOME",
];

/// Fixed dates for building fixtures, so that every copy (and every user's) is identical.
const FIXTURE_DATE: &str = "2024-01-15T10:00:00+00:00";

/// Content of `{{OUTSIDE}}/canary.txt`, created (mode 644) in every fresh outside directory.
pub const OUTSIDE_CANARY: &str = "canary\n";

/// Per-stream cap on captured output (the sandbox's default cap).
const OUTPUT_CAP: usize = 1 << 20;

/// How the runner is configured.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// `compat-commands/`.
    pub corpus_dir: PathBuf,
    /// The `localgpt` binary.
    pub localgpt: PathBuf,
    /// Work root.
    pub work_root: PathBuf,
    /// Levels to run; empty = every available level.
    pub levels: Vec<String>,
    /// Parallel commands.
    pub jobs: usize,
    /// Only commands whose `group/name` matches.
    pub filter: Option<Regex>,
    /// Keep the run directories of failed commands.
    pub keep_failed: bool,
    /// Wait before each sandboxed run (`--clock-gap-ms`; zero in CI): exposes commands whose
    /// results depend on the clock.
    pub clock_gap: std::time::Duration,
    /// Draw a progress bar (default: when stderr is a terminal).
    pub progress: Option<bool>,
    /// The command line, recorded in the results.
    pub command_line: String,
}

/// Runner errors (problems with the setup, never with a command).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// I/O on the work root.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// The environment is unusable.
    #[error("{0}")]
    Setup(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RunError {
    let w = what.into();
    move |e| RunError::Io(w, e)
}

/// Result of one process.
struct Raw {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    timed_out: bool,
    ms: u64,
    spawn_error: Option<String>,
}

fn reader<R: Read + Send + 'static>(mut r: R) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if buf.len() < OUTPUT_CAP {
                        let take = n.min(OUTPUT_CAP - buf.len());
                        buf.extend_from_slice(&chunk[..take]);
                    }
                }
            }
        }
        let _ = tx.send(buf);
    });
    rx
}

/// Runs a process in a new session with stdin from /dev/null; kills its whole process group on
/// timeout and, when `reap_group`, after it exits (so no background job outlives the run, as
/// in the sandbox).
fn run_process(mut cmd: Proc, timeout: Duration, reap_group: bool) -> Raw {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Raw { code: None, stdout: vec![], stderr: vec![], timed_out: false, ms: 0, spawn_error: Some(e.to_string()) }
        }
    };
    let pgid = child.id() as i32;
    let out_rx = child.stdout.take().map(reader);
    let err_rx = child.stderr.take().map(reader);
    let deadline = start + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: signalling our own child's process group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let ms = start.elapsed().as_millis() as u64;
    if reap_group {
        // SAFETY: as above; ESRCH when the group is already gone.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    let collect = |rx: Option<mpsc::Receiver<Vec<u8>>>| rx.and_then(|r| r.recv_timeout(Duration::from_secs(5)).ok()).unwrap_or_default();
    let stdout = collect(out_rx);
    let stderr = collect(err_rx);
    let code = status.and_then(|s| s.code().or_else(|| s.signal().map(|n| 128 + n)));
    Raw { code, stdout, stderr, timed_out, ms, spawn_error: None }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Recorded tokens received by the runner's TCP and UDP listeners.
#[derive(Clone)]
struct Listeners {
    tcp_port: u16,
    udp_port: u16,
    unix_path: PathBuf,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Listeners {
    fn start(unix_dir: &Path) -> Result<Self, RunError> {
        let tcp = TcpListener::bind("127.0.0.1:0").map_err(io("bind tcp 127.0.0.1:0"))?;
        let udp = UdpSocket::bind("127.0.0.1:0").map_err(io("bind udp 127.0.0.1:0"))?;
        let tcp_port = tcp.local_addr().map_err(io("tcp addr"))?.port();
        let udp_port = udp.local_addr().map_err(io("udp addr"))?.port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for conn in tcp.incoming().flatten() {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(3)));
                let s = s.clone();
                std::thread::spawn(move || record_and_answer(conn, "tcp", &s));
            }
        });
        let s = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok((n, _)) = udp.recv_from(&mut buf) {
                if let Ok(mut v) = s.lock() {
                    v.push(format!("udp:{}", text(&buf[..n])));
                }
            }
        });
        let unix_path = unix_dir.join("listener.sock");
        let _ = std::fs::remove_file(&unix_path);
        let unix = UnixListener::bind(&unix_path).map_err(io(format!("bind {}", unix_path.display())))?;
        let s = seen.clone();
        std::thread::spawn(move || {
            for conn in unix.incoming().flatten() {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(3)));
                let s = s.clone();
                std::thread::spawn(move || record_and_answer(conn, "unix", &s));
            }
        });
        Ok(Listeners { tcp_port, udp_port, unix_path, seen })
    }

    fn saw(&self, token: &str) -> bool {
        self.seen.lock().map(|v| v.iter().any(|s| s.contains(token))).unwrap_or(false)
    }

    /// Waits up to `max` for the token (the listener threads may lag the client's exit).
    fn wait_for(&self, token: &str, max: Duration) -> bool {
        let end = Instant::now() + max;
        loop {
            if self.saw(token) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Records what a client sent (first read, up to 4 KiB) and answers with a minimal HTTP
/// response, so that HTTP clients (curl, wget, git, pip, npm) finish instead of waiting.
fn record_and_answer<S: Read + Write>(mut conn: S, kind: &str, seen: &Mutex<Vec<String>>) {
    let mut buf = [0u8; 4096];
    let n = conn.read(&mut buf).unwrap_or(0);
    if let Ok(mut v) = seen.lock() {
        v.push(format!("{kind}:{}", text(&buf[..n])));
    }
    let _ = conn.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// The user the runner runs as.
#[derive(Debug, Clone)]
struct Who {
    name: String,
    uid: u32,
}

/// The name of the current user (from the password database, else `$USER`, else `uid<N>`).
#[must_use]
pub fn user_name() -> String {
    // SAFETY: getuid cannot fail; getpwuid returns NULL or a pointer to static storage, read
    // immediately (the runner calls this before starting any thread).
    unsafe {
        let uid = libc::getuid();
        let pw = libc::getpwuid(uid);
        if !pw.is_null() && !(*pw).pw_name.is_null() {
            if let Ok(n) = std::ffi::CStr::from_ptr((*pw).pw_name).to_str() {
                return n.to_string();
            }
        }
        std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| format!("uid{uid}"))
    }
}

fn whoami() -> Who {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    Who { name: user_name(), uid }
}

/// Levels the binary reports as available (minimal included: it runs the corpus too, its
/// documented gaps pinned per command in `degraded_levels`).
///
/// # Errors
/// [`RunError::Setup`] when `localgpt sandbox status --json` fails or is unreadable.
pub fn available_levels(localgpt: &Path) -> Result<Vec<String>, RunError> {
    let out = Proc::new(localgpt)
        .args(["sandbox", "status", "--json"])
        .env_remove("LOCALGPT_CONFIG")
        .env_remove("LOCALGPT_REQUIRE_SANDBOX")
        .output()
        .map_err(io(format!("{} sandbox status --json", localgpt.display())))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| RunError::Setup(format!("sandbox status --json: {e}: {}", text(&out.stderr))))?;
    let levels = v["available_levels"]
        .as_array()
        .ok_or_else(|| RunError::Setup("sandbox status --json has no available_levels".into()))?
        .iter()
        .filter_map(|l| l.as_str())
        .map(str::to_string)
        .collect();
    Ok(levels)
}

fn rm_rf(p: &Path) {
    if std::fs::remove_dir_all(p).is_err() && p.exists() {
        // read-only directories (a module cache, a test's chmod 500): make them writable first
        let _ = Proc::new("chmod").arg("-R").arg("u+rwx").arg(p).status();
        let _ = std::fs::remove_dir_all(p);
    }
}

fn copy_tree(src: &Path, dst: &Path) -> Result<(), RunError> {
    std::fs::create_dir_all(dst).map_err(io(dst.display().to_string()))?;
    if !src.exists() {
        return Ok(());
    }
    let st = Proc::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(dst)
        .status()
        .map_err(io("cp -a"))?;
    if !st.success() {
        return Err(RunError::Setup(format!("cp -a {} {} failed", src.display(), dst.display())));
    }
    Ok(())
}

struct Env {
    base: Vec<(String, String)>,
    home: Option<String>,
}

fn base_env(xdg: &Path) -> Env {
    let mut base: Vec<(String, String)> = PASS_THROUGH
        .iter()
        .filter_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()).map(|v| ((*k).to_string(), v)))
        .collect();
    if !base.iter().any(|(k, _)| k == "PATH") {
        base.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    // npm's update notice needs the network, which only the bare run has: both runs go without
    // it (a notice is not the command's output). (Not pip's variable: `pip config list` prints
    // the PIP_* variables it sees, and the sandbox does not pass them.)
    for (k, v) in [("LANG", "C.UTF-8"), ("TERM", "dumb"), ("SHELL", "/bin/bash"), ("TMPDIR", "/tmp"),
        ("npm_config_update_notifier", "false"), ("NO_UPDATE_NOTIFIER", "1")] {
        base.push((k.into(), v.into()));
    }
    base.push(("XDG_CONFIG_HOME".into(), xdg.display().to_string()));
    let home = std::env::var("HOME").ok().filter(|h| h.starts_with('/') && h.len() > 1);
    Env { base, home }
}

fn shell(env: &[(String, String)], cwd: &Path, script: &str) -> Proc {
    let mut p = Proc::new("bash");
    p.arg("-c").arg(script).current_dir(cwd).env_clear().envs(env.iter().map(|(a, b)| (a, b)));
    p
}

/// Builds every fixture once into `<root>/templates/<name>`.
fn build_fixtures(cfg: &RunConfig, corpus: &Corpus, env: &Env, root: &Path) -> BTreeMap<String, Result<PathBuf, String>> {
    let mut out = BTreeMap::new();
    for name in &corpus.fixtures {
        let src = cfg.corpus_dir.join(FIXTURES_DIR).join(name);
        let dst = root.join("templates").join(name);
        let r = (|| -> Result<PathBuf, String> {
            copy_tree(&src.join("tree"), &dst).map_err(|e| e.to_string())?;
            let setup = src.join("setup.sh");
            if setup.exists() {
                let mut vars = env.base.clone();
                for (k, v) in [
                    ("GIT_AUTHOR_DATE", FIXTURE_DATE),
                    ("GIT_COMMITTER_DATE", FIXTURE_DATE),
                    ("GIT_AUTHOR_NAME", "Compat Fixture"),
                    ("GIT_AUTHOR_EMAIL", "fixture@example.invalid"),
                    ("GIT_COMMITTER_NAME", "Compat Fixture"),
                    ("GIT_COMMITTER_EMAIL", "fixture@example.invalid"),
                ] {
                    vars.push((k.into(), v.into()));
                }
                let script = format!("set -euo pipefail; . '{}'", setup.display());
                let raw = run_process(shell(&vars, &dst, &script), Duration::from_secs(120), true);
                if raw.code != Some(0) {
                    return Err(format!("setup.sh exited {:?}: {}{}", raw.code, text(&raw.stdout), text(&raw.stderr)));
                }
            }
            // identical timestamps in every copy: fixed mtimes for the whole tree
            let _ = Proc::new("find")
                .arg(&dst)
                .args(["-exec", "touch", "-h", "-d", FIXTURE_DATE, "{}", "+"])
                .status();
            Ok(dst.clone())
        })();
        out.insert(name.clone(), r);
    }
    out
}

fn substitute(s: &str, outside: &Path, l: &Listeners, token: &str) -> String {
    s.replace("{{OUTSIDE}}", &outside.display().to_string())
        .replace("{{TCP_PORT}}", &l.tcp_port.to_string())
        .replace("{{UDP_PORT}}", &l.udp_port.to_string())
        .replace("{{UNIX_SOCK}}", &l.unix_path.display().to_string())
        .replace("{{TOKEN}}", token)
}

struct Shared {
    cfg: RunConfig,
    env: Env,
    root: PathBuf,
    templates: BTreeMap<String, Result<PathBuf, String>>,
    missing_tools: BTreeMap<String, String>,
    levels: Vec<String>,
    listeners: Listeners,
}

/// The paths of one run, for the `paths` normalisation.
fn path_ctx(sh: &Shared, run_dir: &Path, scratch: &Path) -> PathContext {
    let mut c = PathContext::default();
    c.add(&run_dir.join("ws").display().to_string(), "<WS>");
    c.add(&run_dir.join("outside").display().to_string(), "<OUTSIDE>");
    c.add(&scratch.display().to_string(), "<CACHE>");
    c.add(&sh.root.join("xdg-empty").display().to_string(), "<XDG>");
    if let Some(h) = &sh.env.home {
        c.add(h, "<HOME>");
    }
    c
}

/// The sandboxed run's paths: the bare run's, and the workspace's persistent tool caches (in
/// this case's own cache root, `cli-cache`) as the cache, where the bare run's scratch is.
fn sandbox_path_ctx(sh: &Shared, run_dir: &Path) -> PathContext {
    let mut c = path_ctx(sh, run_dir, &run_dir.join("scratch"));
    for e in std::fs::read_dir(run_dir.join("cli-cache/localgpt/sandbox-caches")).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            c.add(&e.path().display().to_string(), "<CACHE>");
        }
    }
    c
}

fn fresh_run_dir(template: &Path, run_dir: &Path) -> Result<(), RunError> {
    rm_rf(run_dir);
    copy_tree(template, &run_dir.join("ws"))?;
    for d in ["outside", "scratch"] {
        std::fs::create_dir_all(run_dir.join(d)).map_err(io(run_dir.join(d).display().to_string()))?;
    }
    // an existing file outside, for the probes that modify or delete one
    let canary = run_dir.join("outside").join("canary.txt");
    std::fs::write(&canary, OUTSIDE_CANARY).map_err(io(canary.display().to_string()))?;
    let _ = Proc::new("chmod").arg("644").arg(&canary).status();
    Ok(())
}

/// The workspace of a run: the fixture copy, or the command's subdirectory of it.
fn workspace_of(cmd: &Command, run_dir: &Path) -> PathBuf {
    let ws = run_dir.join("ws");
    match &cmd.workspace {
        Some(sub) => ws.join(sub),
        None => ws,
    }
}

fn bare_run(sh: &Shared, cmd: &Command, run_dir: &Path, script: &str) -> RunOutput {
    let ws = workspace_of(cmd, run_dir);
    let mut vars = sh.env.base.clone();
    vars.push(("PWD".into(), ws.display().to_string()));
    for (k, sub) in CACHE_VARS {
        vars.push(((*k).into(), run_dir.join("scratch").join(sub).display().to_string()));
    }
    // `bash -c` runs as a child of a session-leading `sh`, as in the sandbox (where it is a
    // child of the supervisor or init): not a process-group leader itself, which changes how
    // e.g. setsid(1) behaves.
    let mut p = Proc::new("sh");
    p.args(["-c", "bash -c \"$1\"; exit $?", "compat-bare", script])
        .current_dir(&ws)
        .env_clear()
        .envs(vars.iter().map(|(a, b)| (a, b)));
    let raw = run_process(p, Duration::from_secs(cmd.timeout), true);
    RunOutput {
        exit_code: raw.code,
        stdout: text(&raw.stdout),
        stderr: text(&raw.stderr),
        timed_out: raw.timed_out,
        duration_ms: raw.ms,
        level: None,
        error: raw.spawn_error,
        held: Vec::new(),
    }
}

fn sandboxed_run(sh: &Shared, cmd: &Command, run_dir: &Path, level: &str, script: &str) -> RunOutput {
    let ws = workspace_of(cmd, run_dir);
    let mut p = Proc::new(&sh.cfg.localgpt);
    p.args(["sandbox", "run", "--level", level, "--json", "--timeout", &cmd.timeout.to_string(), "--workspace"])
        .arg(&ws)
        .args(&cmd.flags)
        .arg("--")
        .arg(script)
        .current_dir(&ws)
        .env_clear()
        .envs(sh.env.base.iter().map(|(a, b)| (a, b)))
        // The sandbox's persistent tool caches in this case's run directory: every case starts
        // from empty caches, as the bare run does.
        .env("XDG_CACHE_HOME", run_dir.join("cli-cache"))
        .env("PWD", &ws);
    let raw = run_process(p, Duration::from_secs(cmd.timeout + 30), false);
    let mut out = RunOutput { duration_ms: raw.ms, ..RunOutput::default() };
    if let Some(e) = raw.spawn_error {
        out.error = Some(format!("could not start localgpt: {e}"));
        return out;
    }
    if raw.timed_out {
        out.timed_out = true;
        out.error = Some("localgpt itself did not return within the timeout + 30 s".into());
        return out;
    }
    let v: serde_json::Value = match serde_json::from_slice(&raw.stdout) {
        Ok(v) => v,
        Err(_) => {
            out.error = Some(format!("localgpt exited {:?} without a JSON report: {}", raw.code, text(&raw.stderr).trim()));
            return out;
        }
    };
    out.exit_code = v["exit_code"].as_i64().map(|c| c as i32);
    out.stdout = v["stdout"].as_str().unwrap_or_default().to_string();
    out.stderr = v["stderr"].as_str().unwrap_or_default().to_string();
    out.timed_out = v["timed_out"].as_bool().unwrap_or(false);
    out.level = v["level"].as_str().map(str::to_string);
    if out.level.as_deref() != Some(level) {
        out.error = Some(format!(
            "ran at level {} instead of {level}; warnings: {}",
            out.level.as_deref().unwrap_or("?"),
            v["warnings"]
        ));
    }
    for s in ["stdout_truncated", "stderr_truncated"] {
        if v[s].as_bool() == Some(true) {
            out.error = Some(format!("{s}: output above the sandbox's cap"));
        }
    }
    let fixture = run_dir.join("ws");
    out.held = v["protected_review"]["pending"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["target"].as_str())
                .filter_map(|t| Path::new(t).strip_prefix(&fixture).ok().map(|r| r.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    out
}

/// The fixture's copy after a run, as content and mode (see [`tree`]).
fn workspace_tree(run_dir: &Path, rules: &[tree::Rule]) -> Result<tree::Snapshot, String> {
    tree::snapshot(&run_dir.join("ws"), rules)
}


fn effect_seen(sh: &Shared, cmd: &Command, run_dir: &Path, token: &str, after_bare: bool) -> EffectSeen {
    let mut present = false;
    if let Some(check) = &cmd.check {
        let script = substitute(check, &run_dir.join("outside"), &sh.listeners, token);
        let raw = run_process(shell(&sh.env.base, run_dir, &script), Duration::from_secs(30), true);
        present |= raw.code != Some(0);
    }
    if cmd.run.contains("{{TOKEN}}") && (cmd.run.contains("_PORT}}") || cmd.run.contains("{{UNIX_SOCK}}")) {
        let wait = if after_bare { Duration::from_secs(3) } else { Duration::from_millis(300) };
        present |= sh.listeners.wait_for(token, wait);
    }
    EffectSeen { present }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &s[..end], s.len())
}

fn record(cmd: &Command, level: &str, v: Verdict, bare: Option<&RunOutput>, sbx: Option<&RunOutput>) -> CaseRecord {
    CaseRecord {
        name: cmd.name.clone(),
        group: cmd.group.clone(),
        fixture: cmd.fixture.clone(),
        expect: cmd.expect,
        level: level.to_string(),
        outcome: v.outcome,
        cause: v.cause,
        diff: v.diff,
        stderr: sbx.map(|s| truncate(&s.stderr, 2000)).unwrap_or_default(),
        bare_exit: bare.and_then(|b| b.exit_code),
        sandbox_exit: sbx.and_then(|s| s.exit_code),
        bare_ms: bare.map_or(0, |b| b.duration_ms),
        sandbox_ms: sbx.map_or(0, |s| s.duration_ms),
    }
}

/// Runs one command bare and at every level; one record per level.
fn run_command(sh: &Shared, idx: usize, cmd: &Command) -> Vec<CaseRecord> {
    let skip = |cause: String| -> Vec<CaseRecord> {
        sh.levels
            .iter()
            .map(|l| record(cmd, l, Verdict { outcome: Outcome::Skip, cause: cause.clone(), diff: String::new() }, None, None))
            .collect()
    };
    let fail_all = |cause: String| -> Vec<CaseRecord> {
        let outcome = if cmd.expect == Expect::Denied { Outcome::DeniedFail } else { Outcome::Fail };
        sh.levels.iter().map(|l| record(cmd, l, Verdict { outcome, cause: cause.clone(), diff: String::new() }, None, None)).collect()
    };
    let missing: Vec<&str> = cmd.requires.iter().filter(|r| sh.missing_tools.contains_key(*r)).map(String::as_str).collect();
    if !missing.is_empty() {
        let reasons: Vec<&str> = missing.iter().filter_map(|m| sh.missing_tools.get(*m).map(String::as_str)).collect();
        return skip(reasons.join("; "));
    }
    let template = match sh.templates.get(&cmd.fixture) {
        Some(Ok(t)) => t.clone(),
        Some(Err(e)) => return fail_all(format!("fixture {} could not be built: {e}", cmd.fixture)),
        None => return fail_all(format!("fixture {} unknown", cmd.fixture)),
    };
    let run_dir = sh.root.join("runs").join(idx.to_string());
    let outside = run_dir.join("outside");
    // bare
    if let Err(e) = fresh_run_dir(&template, &run_dir) {
        return fail_all(format!("could not prepare the run directory: {e}"));
    }
    let bare_token = format!("tok-{idx}-bare-{}", std::process::id());
    let bare = bare_run(sh, cmd, &run_dir, &substitute(&cmd.run, &outside, &sh.listeners, &bare_token));
    let bare_effect = (cmd.expect == Expect::Denied).then(|| effect_seen(sh, cmd, &run_dir, &bare_token, true));
    let bare_ctx = path_ctx(sh, &run_dir, &run_dir.join("scratch"));
    let rules = tree::command_rules(&cmd.unstable);
    let bare_tree = (cmd.expect == Expect::Succeed).then(|| workspace_tree(&run_dir, &rules));
    let mut records = Vec::new();
    let mut any_failed = false;
    for level in &sh.levels {
        if let Err(e) = fresh_run_dir(&template, &run_dir) {
            records.push(record(cmd, level, Verdict { outcome: Outcome::Fail, cause: format!("could not prepare the run directory: {e}"), diff: String::new() }, Some(&bare), None));
            continue;
        }
        if !sh.cfg.clock_gap.is_zero() {
            std::thread::sleep(sh.cfg.clock_gap);
        }
        let token = format!("tok-{idx}-{level}-{}", std::process::id());
        let sbx = sandboxed_run(sh, cmd, &run_dir, level, &substitute(&cmd.run, &outside, &sh.listeners, &token));
        let v = match cmd.expect {
            Expect::Succeed => {
                let v = judge_succeed(cmd, &bare, &bare_ctx, &sbx, &sandbox_path_ctx(sh, &run_dir));
                // The workspace is read only when everything else matched.
                match &bare_tree {
                    Some(bt) if v.outcome == Outcome::Pass => judge_workspace(v, &rules, bt, &workspace_tree(&run_dir, &rules), &sbx.held),
                    _ => v,
                }
            }
            Expect::Denied => {
                let effect = effect_seen(sh, cmd, &run_dir, &token, false);
                let degraded = cmd.degraded_levels.iter().any(|l| l == level).then(|| cmd.why.as_deref().unwrap_or("documented as degraded"));
                judge_denied(&bare, bare_effect.unwrap_or(EffectSeen { present: false }), &sbx, effect, degraded)
            }
        };
        any_failed |= matches!(v.outcome, Outcome::Fail | Outcome::DeniedFail);
        if any_failed && sh.cfg.keep_failed {
            let keep = sh.root.join("failed").join(format!("{}-{level}", cmd.name));
            rm_rf(&keep);
            let _ = std::fs::create_dir_all(sh.root.join("failed"));
            let _ = std::fs::rename(&run_dir, &keep);
        }
        records.push(record(cmd, level, v, Some(&bare), Some(&sbx)));
    }
    rm_rf(&run_dir);
    records
}

fn find_missing_tools(corpus: &Corpus, env: &Env, root: &Path, who: &Who, selected: &[&Command]) -> BTreeMap<String, String> {
    let mut tools: Vec<&str> = selected.iter().flat_map(|c| c.requires.iter().map(String::as_str)).collect();
    tools.sort_unstable();
    tools.dedup();
    let _ = corpus;
    let mut missing = BTreeMap::new();
    for t in tools {
        let raw = run_process(shell(&env.base, root, &format!("command -v -- '{t}'")), Duration::from_secs(10), true);
        if raw.code != Some(0) {
            missing.insert(t.to_string(), format!("{t}: not available to user {} (uid {}): not on its PATH", who.name, who.uid));
        }
    }
    missing
}

struct Progress {
    tty: bool,
    total: usize,
    done: AtomicUsize,
    counts: Mutex<[usize; 3]>,
    start: Instant,
    last_pct: AtomicUsize,
}

impl Progress {
    fn tick(&self, recs: &[CaseRecord]) {
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        let counts = {
            let Ok(mut c) = self.counts.lock() else { return };
            for r in recs {
                match r.outcome {
                    Outcome::Pass | Outcome::DeniedOk | Outcome::DeniedDegraded => c[0] += 1,
                    Outcome::Fail | Outcome::DeniedFail => c[1] += 1,
                    Outcome::Skip => c[2] += 1,
                }
            }
            *c
        };
        let secs = self.start.elapsed().as_secs();
        if self.tty {
            let width = 30;
            let filled = done * width / self.total.max(1);
            let bar: String = "#".repeat(filled) + &"-".repeat(width - filled);
            let name = recs.first().map_or("", |r| r.name.as_str());
            let mut e = std::io::stderr().lock();
            let _ = write!(
                e,
                "\r\x1b[2K[{bar}] {done}/{} commands  ok {}  fail {}  skip {}  {}:{:02}  {}",
                self.total, counts[0], counts[1], counts[2], secs / 60, secs % 60, name
            );
            if done == self.total {
                let _ = writeln!(e);
            }
        } else {
            let pct = done * 10 / self.total.max(1);
            if self.last_pct.fetch_max(pct, Ordering::SeqCst) < pct {
                eprintln!(
                    "compat: {done}/{} commands  ok {}  fail {}  skip {}  ({}:{:02})",
                    self.total, counts[0], counts[1], counts[2], secs / 60, secs % 60
                );
            }
        }
    }
}

/// Runs the selected commands; returns the user's results.
///
/// # Errors
/// [`RunError`] when the work root, the listeners or the level detection cannot be set up.
pub fn run(cfg: RunConfig, corpus: &Corpus) -> Result<UserResults, RunError> {
    let start = Instant::now();
    let who = whoami();
    let root = cfg.work_root.clone();
    rm_rf(&root);
    std::fs::create_dir_all(root.join("runs")).map_err(io(root.display().to_string()))?;
    std::fs::create_dir_all(root.join("xdg-empty")).map_err(io("xdg-empty"))?;
    let root = std::fs::canonicalize(&root).map_err(io(root.display().to_string()))?;
    let levels = if cfg.levels.is_empty() { available_levels(&cfg.localgpt)? } else { cfg.levels.clone() };
    if levels.is_empty() {
        return Err(RunError::Setup("no sandbox level is available".into()));
    }
    let env = base_env(&root.join("xdg-empty"));
    let selected: Vec<&Command> = corpus
        .commands()
        .filter(|c| cfg.filter.as_ref().is_none_or(|f| f.is_match(&format!("{}/{}", c.group, c.name))))
        .collect();
    let missing_tools = find_missing_tools(corpus, &env, &root, &who, &selected);
    let templates = build_fixtures(&cfg, corpus, &env, &root);
    let listeners = Listeners::start(&root)?;
    // slowest first, so the long builds overlap with the many short commands
    let mut order: Vec<(usize, &Command)> = selected.iter().copied().enumerate().collect();
    order.sort_by_key(|(i, c)| (std::cmp::Reverse(c.timeout), *i));
    let queue: Mutex<VecDeque<(usize, &Command)>> = Mutex::new(order.into_iter().collect());
    let progress = Progress {
        tty: cfg.progress.unwrap_or_else(|| std::io::stderr().is_terminal()),
        total: selected.len(),
        done: AtomicUsize::new(0),
        counts: Mutex::new([0; 3]),
        start: Instant::now(),
        last_pct: AtomicUsize::new(0),
    };
    let jobs = cfg.jobs.max(1);
    let sh = Shared { cfg: cfg.clone(), env, root: root.clone(), templates, missing_tools, levels: levels.clone(), listeners };
    let results: Mutex<Vec<(usize, Vec<CaseRecord>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some((idx, cmd)) = next else { break };
                let recs = run_command(&sh, idx, cmd);
                progress.tick(&recs);
                if let Ok(mut r) = results.lock() {
                    r.push((idx, recs));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, _)| *i);
    if !cfg.keep_failed {
        rm_rf(&root.join("runs"));
    }
    Ok(UserResults {
        user: who.name.clone(),
        uid: who.uid,
        user_kind: user_kind(who.uid).to_string(),
        levels,
        localgpt: cfg.localgpt.display().to_string(),
        jobs,
        corpus_commands: corpus.commands().count(),
        selected_commands: selected.len(),
        wall_seconds: (start.elapsed().as_millis() as f64) / 1000.0,
        command_line: cfg.command_line.clone(),
        cases: results.into_iter().flat_map(|(_, r)| r).collect(),
    })
}
