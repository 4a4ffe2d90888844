//! Shared fixtures for the integration tests of the `localgpt` binary.
//!
//! A [`World`] is a throw-away directory tree that lives OUTSIDE `/tmp` (the sandbox lets
//! commands write `/tmp`, so a world there would prove nothing):
//!
//! ```text
//! <root>/ws/                      the workspace (cwd of every run)
//! <root>/outside/canary.txt       a file the sandbox must neither read nor write
//! <root>/home/                    fake $HOME: .ssh/id_rsa, .aws/credentials, .config/git/config, .bashrc
//! <root>/xdg/                     empty $XDG_CONFIG_HOME (so the host's config never leaks in)
//! ```
//!
//! `<root>` is a fresh directory inside `$LOCALGPT_TEST_DIR` if that is set, else inside `/var/tmp`.
//!
//! Escape tests are not written here: they are vectors of the escape corpus (`escapes/`), run by
//! the one engine in `harness/` (each vector sandboxed and bare, every effect checked from
//! outside). The tests that use this world check behaviour: what runs, what a command sees.
#![allow(dead_code)]

use std::ffi::OsString;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Content of `outside/canary.txt`.
pub const OUTSIDE_CANARY: &str = "outside-canary-7f3a9c2e\n";
/// Secret marker inside `home/.ssh/id_rsa`.
pub const SSH_SECRET: &str = "ssh-secret-b2e81d40c9";
/// Secret marker inside `home/.aws/credentials`.
pub const AWS_SECRET: &str = "aws-secret-5c1e0f77aa";
/// Marker inside `home/.bashrc` (an ordinary, non-credential home file).
pub const BASHRC_MARKER: &str = "bashrc-marker-19d3e6";
/// Printed first by every sandboxed probe, to prove the command really ran inside.
pub const STARTED: &str = "PROBE-STARTED-4b1c";

/// Upper bound on the wall time of any single process a test runs.
pub const RUN_DEADLINE: Duration = Duration::from_secs(25);
/// `--timeout` given to the sandbox unless a test passes its own.
pub const DEFAULT_SANDBOX_TIMEOUT: &str = "20";

// ---------------------------------------------------------------------------------------------
// The binary under test
// ---------------------------------------------------------------------------------------------

/// Path of the `localgpt` binary: `$LOCALGPT_BIN` if set, else the one cargo built.
pub fn localgpt_bin() -> PathBuf {
    match std::env::var_os("LOCALGPT_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_localgpt")),
    }
}

/// A bare `Command` for the binary under test (no env scrubbing: use [`World`] for that).
pub fn localgpt() -> Command {
    Command::new(localgpt_bin())
}

pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub fn is_root() -> bool {
    euid() == 0
}

/// Report a case that cannot run on this machine. The test still passes; the line is printed
/// on stdout and stderr and appended to `$LOCALGPT_SKIP_LOG` if set (ci/test counts them).
pub fn skip(test: &str, reason: &str) {
    let line = format!("SKIP: {test}: {reason}");
    println!("{line}");
    eprintln!("{line}");
    if let Some(log) = std::env::var_os("LOCALGPT_SKIP_LOG") {
        if let Ok(mut f) = fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Quote a string for bash (single quotes).
pub fn sh_quote(s: impl AsRef<std::ffi::OsStr>) -> String {
    let s = s.as_ref().to_string_lossy();
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A short unique token (pid + time), for names that must not collide across parallel tests.
pub fn unique_token() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}-{}-{}", std::process::id(), nanos, n)
}

/// PATH for the runs: the real PATH's absolute entries (deduplicated), plus the standard system
/// directories if they are missing.
pub fn clean_path() -> OsString {
    let mut entries: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("PATH") {
        for e in std::env::split_paths(&p) {
            if e.is_absolute() && !entries.contains(&e) {
                entries.push(e);
            }
        }
    }
    for d in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        let d = PathBuf::from(d);
        if !entries.contains(&d) {
            entries.push(d);
        }
    }
    std::env::join_paths(entries).expect("PATH entries contain no ':'")
}

fn executable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated string.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// First executable `name` on [`clean_path`].
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&clean_path())
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

/// A python3 that works with a scrubbed environment and lives in a system directory (so the
/// sandbox can execute it whatever $HOME is): /usr/bin/python3 from Debian first. A pyenv shim
/// under /root is no good: it needs /root/.pyenv, which the sandbox (rightly) hides.
pub fn python3() -> Option<&'static Path> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        for cand in ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"] {
            let p = PathBuf::from(cand);
            if !executable(&p) {
                continue;
            }
            let ok = Command::new(&p)
                .args([
                    "-c",
                    "import ctypes, asyncio, pty, socket, fcntl, termios, os",
                ])
                .env_clear()
                .env("PATH", clean_path())
                .env("HOME", "/nonexistent")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return Some(p);
            }
        }
        None
    })
    .as_deref()
}

/// [`python3`] or a printed SKIP.
pub fn python3_or_skip(test: &str) -> Option<&'static Path> {
    let p = python3();
    if p.is_none() {
        skip(
            test,
            "no usable python3 in a system directory (/usr/bin/python3); install Debian's python3",
        );
    }
    p
}

pub fn read_proc_int(path: &str) -> Option<i64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Running processes with a deadline
// ---------------------------------------------------------------------------------------------

/// Result of one process run.
#[derive(Debug, Clone)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout_raw: Vec<u8>,
    pub stderr_raw: Vec<u8>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// false if stdout/stderr were still held open by leftover processes 5 s after exit.
    pub pipes_closed: bool,
    pub what: String,
}

impl Out {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }
    pub fn success(&self) -> bool {
        self.status.success()
    }
    /// Human-readable dump for assertion messages (long streams are cut).
    pub fn describe(&self) -> String {
        fn cut(s: &str) -> String {
            const MAX: usize = 3000;
            if s.len() <= MAX {
                s.to_string()
            } else {
                let mut end = MAX;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}… [{} bytes total]", &s[..end], s.len())
            }
        }
        format!(
            "\n--- {} ---\nstatus: {:?} (code {:?}, signal {:?}), {:.2}s, pipes_closed={}\n--- stdout ---\n{}\n--- stderr ---\n{}\n------",
            self.what,
            self.status,
            self.code(),
            self.signal(),
            self.elapsed.as_secs_f64(),
            self.pipes_closed,
            cut(&self.stdout),
            cut(&self.stderr)
        )
    }
}

fn spawn_reader<R: Read + Send + 'static>(
    mut r: R,
) -> (Arc<Mutex<Vec<u8>>>, std::sync::mpsc::Receiver<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let b = Arc::clone(&buf);
    std::thread::spawn(move || {
        let mut chunk = [0u8; 65536];
        loop {
            match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => b
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&chunk[..n]),
            }
        }
        let _ = tx.send(());
    });
    (buf, rx)
}

/// Run `cmd` with stdout/stderr captured; panic if it runs longer than `deadline` (the child is
/// then killed). The caller sets stdin (the [`World`] builders default it to /dev/null).
pub fn run_with_deadline(mut cmd: Command, what: &str, deadline: Duration) -> Out {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {what}: {e} ({cmd:?})"));
    let (out_buf, out_done) = spawn_reader(child.stdout.take().expect("piped stdout"));
    let (err_buf, err_done) = spawn_reader(child.stderr.take().expect("piped stderr"));
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => panic!("wait for {what}: {e}"),
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(200));
            let so = String::from_utf8_lossy(&out_buf.lock().unwrap_or_else(|e| e.into_inner()))
                .into_owned();
            let se = String::from_utf8_lossy(&err_buf.lock().unwrap_or_else(|e| e.into_inner()))
                .into_owned();
            panic!(
                "{what} did not finish within {deadline:?}; killed it.\n--- stdout ---\n{}\n--- stderr ---\n{}",
                &so[..so.len().min(3000)],
                &se[..se.len().min(3000)]
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    let grace = Instant::now() + Duration::from_secs(5);
    let mut pipes_closed = true;
    for rx in [&out_done, &err_done] {
        let left = grace.saturating_duration_since(Instant::now());
        if rx.recv_timeout(left).is_err() {
            pipes_closed = false;
        }
    }
    let stdout_raw = out_buf.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let stderr_raw = err_buf.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Out {
        status,
        stdout: String::from_utf8_lossy(&stdout_raw).into_owned(),
        stderr: String::from_utf8_lossy(&stderr_raw).into_owned(),
        stdout_raw,
        stderr_raw,
        elapsed,
        pipes_closed,
        what: what.to_string(),
    }
}

pub fn run(cmd: Command, what: &str) -> Out {
    run_with_deadline(cmd, what, RUN_DEADLINE)
}

// ---------------------------------------------------------------------------------------------
// The world
// ---------------------------------------------------------------------------------------------

pub struct World {
    _dir: tempfile::TempDir,
    /// Canonical root of this world.
    pub root: PathBuf,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub canary: PathBuf,
    pub home: PathBuf,
    pub xdg: PathBuf,
}

impl World {
    pub fn new() -> World {
        let base = std::env::var_os("LOCALGPT_TEST_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        fs::create_dir_all(&base).unwrap_or_else(|e| panic!("create {}: {e}", base.display()));
        let dir = tempfile::Builder::new()
            .prefix("lgworld-")
            .tempdir_in(&base)
            .unwrap_or_else(|e| panic!("tempdir in {}: {e}", base.display()));
        let root = fs::canonicalize(dir.path()).expect("canonicalize world root");
        assert!(
            !root.starts_with("/tmp") && !root.starts_with("/dev/shm"),
            "the test world must not live under /tmp or /dev/shm (the sandbox may write there): {}",
            root.display()
        );
        let ws = root.join("ws");
        let outside = root.join("outside");
        let home = root.join("home");
        let xdg = root.join("xdg");
        for d in [&ws, &outside, &home, &xdg] {
            fs::create_dir_all(d).expect("mkdir");
        }
        // LOCALGPT_TEST_LEVEL=standard|full runs the whole suite at that level (ci/test runs it
        // at every level the machine reaches).
        if let Some(level) = std::env::var("LOCALGPT_TEST_LEVEL").ok().filter(|l| !l.is_empty()) {
            fs::create_dir_all(xdg.join("localgpt")).expect("xdg/localgpt");
            fs::write(xdg.join("localgpt/config.toml"), format!("[sandbox]\nlevel = \"{level}\"\n")).expect("level config");
        }
        let canary = outside.join("canary.txt");
        fs::write(&canary, OUTSIDE_CANARY).expect("write canary");

        let ssh = home.join(".ssh");
        fs::create_dir_all(&ssh).expect("mkdir .ssh");
        fs::set_permissions(&ssh, fs::Permissions::from_mode(0o700)).expect("chmod .ssh");
        let key = ssh.join("id_rsa");
        fs::write(
            &key,
            format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{SSH_SECRET}\n-----END OPENSSH PRIVATE KEY-----\n"),
        )
        .expect("write id_rsa");
        fs::set_permissions(&key, fs::Permissions::from_mode(0o600)).expect("chmod id_rsa");

        let aws = home.join(".aws");
        fs::create_dir_all(&aws).expect("mkdir .aws");
        fs::write(
            aws.join("credentials"),
            format!("[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {AWS_SECRET}\n"),
        )
        .expect("write aws credentials");

        let gitcfg = home.join(".config/git");
        fs::create_dir_all(&gitcfg).expect("mkdir .config/git");
        fs::write(
            gitcfg.join("config"),
            "[user]\n\tname = LocalGPT Test\n\temail = test@localgpt.invalid\n[init]\n\tdefaultBranch = main\n",
        )
        .expect("write git config");

        fs::write(
            home.join(".bashrc"),
            format!("# {BASHRC_MARKER}\nexport LG_TEST_BASHRC=1\n"),
        )
        .expect("write .bashrc");

        World {
            _dir: dir,
            root,
            ws,
            outside,
            canary,
            home,
            xdg,
        }
    }

    fn base_env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("PATH", clean_path())
            .env("LC_ALL", "C.UTF-8")
            .env_remove("LOCALGPT_CONFIG")
            .env_remove("LOCALGPT_REQUIRE_SANDBOX")
            .current_dir(&self.ws)
            .stdin(Stdio::null());
    }

    /// `localgpt <args...>` with the world's environment (no `sandbox run` added).
    pub fn localgpt_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = localgpt();
        self.base_env(&mut cmd);
        cmd.args(args);
        cmd
    }

    /// `localgpt sandbox run [--workspace ws] [--timeout 20] <opts> -- <argv>`.
    pub fn sandbox_cmd(&self, opts: &[&str], argv: &[&str]) -> Command {
        let mut cmd = localgpt();
        self.base_env(&mut cmd);
        cmd.args(["sandbox", "run"]);
        if !opts
            .iter()
            .any(|o| *o == "--workspace" || o.starts_with("--workspace="))
        {
            cmd.arg("--workspace").arg(&self.ws);
        }
        if !opts
            .iter()
            .any(|o| *o == "--timeout" || o.starts_with("--timeout="))
        {
            cmd.args(["--timeout", DEFAULT_SANDBOX_TIMEOUT]);
        }
        cmd.args(opts).arg("--").args(argv);
        cmd
    }

    /// `bash -c <snippet>` with the same environment and cwd as the sandboxed runs.
    pub fn bare_cmd(&self, snippet: &str) -> Command {
        let mut cmd = Command::new("bash");
        self.base_env(&mut cmd);
        cmd.arg("-c").arg(snippet);
        cmd
    }

    /// Run `snippet` (one argument → `bash -c`) in the sandbox with `opts`.
    pub fn sandboxed_with(&self, opts: &[&str], snippet: &str) -> Out {
        run(
            self.sandbox_cmd(opts, &[snippet]),
            &format!("sandboxed {opts:?}: {snippet}"),
        )
    }

    pub fn sandboxed(&self, snippet: &str) -> Out {
        self.sandboxed_with(&[], snippet)
    }

    pub fn bare(&self, snippet: &str) -> Out {
        run(self.bare_cmd(snippet), &format!("bare: {snippet}"))
    }

    /// Run with `--json`; parse stdout as exactly one JSON object.
    pub fn sandboxed_json(&self, opts: &[&str], snippet: &str) -> (Out, serde_json::Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(opts);
        let out = run(
            self.sandbox_cmd(&all, &[snippet]),
            &format!("sandboxed {all:?}: {snippet}"),
        );
        let v = parse_one_json(&out);
        (out, v)
    }

    /// Write a helper script (e.g. a python probe) into the workspace, where the sandbox can read it.
    pub fn ws_file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.ws.join(name);
        fs::write(&p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        p
    }

    pub fn canary_intact(&self) -> bool {
        fs::read_to_string(&self.canary)
            .map(|s| s == OUTSIDE_CANARY)
            .unwrap_or(false)
    }
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

/// The level the suite's sandboxed runs use: `$LOCALGPT_TEST_LEVEL`, else what `status` reports.
pub fn suite_level(w: &World) -> String {
    if let Some(l) = std::env::var("LOCALGPT_TEST_LEVEL").ok().filter(|l| !l.is_empty()) {
        return l;
    }
    let o = run(w.localgpt_cmd(&["sandbox", "status", "--json"]), "status");
    let v = parse_one_json(&o);
    v["level"].as_str().unwrap_or("").to_string()
}

/// The state (`enforced`, `degraded`, `off`) of protection `id` at the suite's level, from
/// `sandbox explain --json` (the run's own table).
pub fn protection_state(w: &World, id: &str) -> String {
    let level = suite_level(w);
    let o = run(w.localgpt_cmd(&["sandbox", "explain", "--json", "--level", &level, "--workspace", &w.ws.display().to_string()]), "explain");
    let v = parse_one_json(&o);
    v.pointer("/plan/protections")
        .and_then(|p| p.as_array())
        .and_then(|a| a.iter().find(|p| p["id"] == id))
        .and_then(|p| p["state"].as_str())
        .unwrap_or_else(|| panic!("the protection table at level {level} has no row {id}{}", o.describe()))
        .to_string()
}

/// Whether every protection in `ids` is enforced at the suite's level. If not, the test is
/// reported skipped with the reason (and counted by ci/test) and this returns false: an
/// assertion that a protection holds means nothing where the run says it does not (the escape
/// corpus pins which protections each level may leave unenforced).
pub fn needs_protections(w: &World, test: &str, ids: &[&str]) -> bool {
    for id in ids {
        let state = protection_state(w, id);
        if state != "enforced" {
            skip(test, &format!("protection {id} is {state} at level {} (its rows say so); the assertion that depends on it is not run", suite_level(w)));
            return false;
        }
    }
    true
}

/// Warning lines every run at the suite's level prints even with `--quiet`: at Minimal, the one
/// that says the filesystem is not confined (a visible degradation, never silenced).
pub fn level_warning_lines(w: &World) -> usize {
    usize::from(suite_level(w) == "minimal")
}

/// Parse stdout as exactly one JSON object (trailing whitespace allowed, nothing else).
pub fn parse_one_json(out: &Out) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_slice(out.stdout_raw.trim_ascii()).unwrap_or_else(|e| {
            panic!(
                "stdout is not exactly one JSON value: {e}{}",
                out.describe()
            )
        });
    assert!(
        v.is_object(),
        "JSON output is not an object{}",
        out.describe()
    );
    v
}

// ---------------------------------------------------------------------------------------------
// Listeners and canary processes (all observed from outside the sandbox)
// ---------------------------------------------------------------------------------------------

const OBSERVE_WINDOW: Duration = Duration::from_millis(300);

/// What a listener saw since the last observation.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub connections: usize,
    pub datagrams: usize,
    pub data: Vec<u8>,
}

impl Seen {
    pub fn anything(&self) -> bool {
        self.connections > 0 || self.datagrams > 0 || !self.data.is_empty()
    }
}

fn drain_stream<S: Read>(s: &mut S, into: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => into.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(_) => break,
        }
    }
}

/// TCP listener on 127.0.0.1:<ephemeral>.
pub struct TcpProbe {
    pub listener: TcpListener,
    pub port: u16,
    accepted: Vec<TcpStream>,
}

impl TcpProbe {
    pub fn new() -> TcpProbe {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind tcp probe");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        TcpProbe {
            listener,
            port,
            accepted: vec![],
        }
    }
    /// Accept and read whatever arrived (non-blocking, ~300 ms window); also reads new data on
    /// connections accepted earlier.
    pub fn observe(&mut self) -> Seen {
        let mut seen = Seen::default();
        for s in &mut self.accepted {
            drain_stream(s, &mut seen.data);
        }
        let until = Instant::now() + OBSERVE_WINDOW;
        while Instant::now() < until {
            match self.listener.accept() {
                Ok((mut s, _)) => {
                    seen.connections += 1;
                    let _ = s.set_nonblocking(true);
                    drain_stream(&mut s, &mut seen.data);
                    self.accepted.push(s);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        seen
    }
}

impl Default for TcpProbe {
    fn default() -> Self {
        Self::new()
    }
}

/// Unix stream listener, on a path or an abstract name.
pub struct UnixProbe {
    pub listener: UnixListener,
    /// The path (pathname socket) or the name without the leading NUL (abstract socket).
    pub name: String,
    accepted: Vec<UnixStream>,
}

impl UnixProbe {
    pub fn pathname(path: &Path) -> UnixProbe {
        let listener =
            UnixListener::bind(path).unwrap_or_else(|e| panic!("bind {}: {e}", path.display()));
        listener.set_nonblocking(true).expect("nonblocking");
        UnixProbe {
            listener,
            name: path.to_string_lossy().into_owned(),
            accepted: vec![],
        }
    }
    pub fn abstract_name() -> UnixProbe {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("localgpt-test-{}", unique_token());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .expect("abstract addr");
        let listener = UnixListener::bind_addr(&addr).expect("bind abstract socket");
        listener.set_nonblocking(true).expect("nonblocking");
        UnixProbe {
            listener,
            name,
            accepted: vec![],
        }
    }
    pub fn observe(&mut self) -> Seen {
        let mut seen = Seen::default();
        for s in &mut self.accepted {
            drain_stream(s, &mut seen.data);
        }
        let until = Instant::now() + OBSERVE_WINDOW;
        while Instant::now() < until {
            match self.listener.accept() {
                Ok((mut s, _)) => {
                    seen.connections += 1;
                    let _ = s.set_nonblocking(true);
                    drain_stream(&mut s, &mut seen.data);
                    self.accepted.push(s);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        seen
    }
}

/// A `sleep 1000` started by the test, outside any sandbox. Killed on drop.
pub struct CanaryProcess {
    child: Child,
}

impl CanaryProcess {
    pub fn spawn() -> CanaryProcess {
        Self::spawn_in(Path::new("/"), &[])
    }
    /// A canary with a given cwd and extra environment (e.g. a secret an agent host would hold).
    pub fn spawn_in(cwd: &Path, env: &[(&str, &str)]) -> CanaryProcess {
        let child = Command::new("sleep")
            .arg("1000")
            .current_dir(cwd)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn canary sleep");
        CanaryProcess { child }
    }
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    /// Still running (not exited, not killed)? Reaps it if it died.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for CanaryProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Process-table helpers (leftover detection)
// ---------------------------------------------------------------------------------------------

/// PIDs whose /proc/PID/cmdline is exactly `argv` (zombies have an empty cmdline and never match).
pub fn pids_with_cmdline(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| a.bytes().chain(std::iter::once(0)))
        .collect();
    let mut found = vec![];
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(c) = fs::read(e.path().join("cmdline")) {
                if c == want {
                    found.push(pid);
                }
            }
        }
    }
    found
}

/// Kills, on drop, every process whose cmdline is `argv` (cleanup after leftover tests).
pub struct KillOnDrop(pub Vec<String>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let argv: Vec<&str> = self.0.iter().map(String::as_str).collect();
        for pid in pids_with_cmdline(&argv) {
            // SAFETY: plain kill(2) on a pid we found by its unique cmdline.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}
