//! `localgpt-latency`: the p99 latency tool.
//!
//! Runs `/bin/true`, `bash -c true` and `python3 -c pass` N times each — bare, at every level
//! `localgpt sandbox status --json` reports as available, and under bubblewrap `--unshare-all`
//! when it is installed — interleaved (every iteration runs every variant once, in a shuffled
//! order), so that machine drift hits every variant alike. Writes the latency section of the
//! release report (`sections/latency.json`, `latency.json`, `latency.md`, `latency-cdf.svg`) and
//! exits 1 when the gate fails: p99 added < 50 ms, every level `status` lists measured, and —
//! with 1000+ samples per variant (full mode) — Full's p99 within 1.1× bubblewrap's. With
//! `--user NAME` (as root) `/bin/true` also runs as that unprivileged user — bare, at Standard
//! and Full, under bubblewrap and Sandlock — in the same interleaved run, each against that
//! user's bare run: what someone who is not root gets.
//!
//! ```text
//! localgpt-latency [--quick | --full] [-n N] [--warmup W] [--bin PATH] [--out DIR]
//!                  [--no-bwrap] [--sandlock PATH | --no-sandlock] [--phase-runs K] [--seed S]
//!                  [--user NAME]
//! ```

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use localgpt_bench::phases::{parse_stamps, phases_of_trace, spans, Span};
use localgpt_sandbox::timing::{now_ns, TIMING_ENV};
use localgpt_bench::host::{bwrap_prefix, python3, sandlock_prefix, sh, which, Scratch};
use localgpt_bench::stats::{median, r3, Rng, Summary};
use localgpt_bench::svg::{cdf_svg, Curve, Panel};
use serde_json::{json, Value};

const GATE_MS: f64 = 50.0;
/// Full level's p99 against bubblewrap's on the same command in the same run (issue 15's
/// sharper gate), gated only where both have at least [`RATIO_GATE_MIN_SAMPLES`] samples.
const FULL_VS_BWRAP_P99: f64 = 1.1;
/// Fewer samples than this behind a p99 make it too coarse to gate on (quick mode: reported).
const RATIO_GATE_MIN_SAMPLES: usize = 1000;
const GOAL_STANDARD_P50_MS: f64 = 1.0;
const GOAL_STANDARD_P99_MS: f64 = 2.0;
/// Issue 17's goals: Full's p99 and Standard's p50 and p99 at most this fraction of the peer's
/// (bubblewrap's, Sandlock `--no-supervisor`'s) in the same run.
const GOAL_PEER_FRACTION: f64 = 0.8;
/// Issue 17's goal through the library from a warm process: added p50 / p99 (ms).
const GOAL_LIBRARY_P50_MS: f64 = 0.8;
const GOAL_LIBRARY_P99_MS: f64 = 1.5;
const GOAL_GROWTH_MS: f64 = 0.2;

/// Issue 57: a repository of 20 000 directories and 200 000 files adds at most this over the
/// empty workspace (p50, each level).
const GOAL_REPO_MS: f64 = 1.5;

struct Opts {
    mode: &'static str,
    n: usize,
    warmup: usize,
    bin: PathBuf,
    out: PathBuf,
    bwrap: bool,
    /// Sandlock's CLI (`sandlock-cli` from crates.io, built by `ci/bench-quick`), the second peer.
    sandlock: Option<PathBuf>,
    phase_runs: usize,
    seed: u64,
    argv: Vec<String>,
    /// An unprivileged user the `@user` variants of `/bin/true` run as (`--user`, as root):
    /// what a user who is not root gets, beside the same peers run as that user.
    user: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: localgpt-latency [--quick | --full] [-n N] [--warmup W] [--bin PATH] [--out DIR] [--no-bwrap] [--sandlock PATH | --no-sandlock] [--phase-runs K] [--seed S] [--user NAME]"
    );
    std::process::exit(2)
}

fn parse_opts() -> Opts {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("localgpt-latency"));
    let exe_dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut o = Opts {
        mode: "full",
        n: 1000,
        warmup: 10,
        bin: exe_dir.join("localgpt"),
        out: exe_dir.parent().map_or_else(|| PathBuf::from("release-report"), |t| t.join("release-report")),
        bwrap: true,
        // ci/bench-quick installs it under target/peers; else whatever PATH has.
        sandlock: localgpt_bench::host::sandlock(&exe_dir),
        phase_runs: 200,
        seed: 0x5eed_1a7e,
        argv: std::env::args().collect(),
        user: None,
    };
    let mut n_set = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = |name: &str| it.next().unwrap_or_else(|| {
            eprintln!("localgpt-latency: {name} needs a value");
            usage()
        });
        let num = |s: String| s.parse::<u64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--quick" => {
                o.mode = "quick";
                if !n_set {
                    o.n = 200;
                }
                o.phase_runs = 50;
            }
            "--full" => o.mode = "full",
            "-n" | "--runs" => {
                o.n = num(val("-n")) as usize;
                n_set = true;
            }
            "--warmup" => o.warmup = num(val("--warmup")) as usize,
            "--bin" => o.bin = PathBuf::from(val("--bin")),
            "--out" => o.out = PathBuf::from(val("--out")),
            "--no-bwrap" => o.bwrap = false,
            "--sandlock" => o.sandlock = Some(PathBuf::from(val("--sandlock"))),
            "--no-sandlock" => o.sandlock = None,
            "--phase-runs" => o.phase_runs = num(val("--phase-runs")) as usize,
            "--seed" => o.seed = num(val("--seed")),
            "--user" => o.user = Some(val("--user")),
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("localgpt-latency: unknown argument {a}");
                usage()
            }
        }
    }
    if o.n == 0 {
        usage();
    }
    // The tool chdirs into its scratch workspace: make the output directory absolute first.
    if o.out.is_relative() {
        if let Ok(cwd) = std::env::current_dir() {
            o.out = cwd.join(&o.out);
        }
    }
    o
}

/// How a variant runs a command.
enum How {
    /// Spawn this argv (absolute path first).
    Spawn(Vec<String>),
    /// Spawn this argv as this user (`fork`, the user's groups, gid and uid, `execve`: every
    /// `@user` variant alike, the bare one included).
    SpawnAs(Vec<String>, User),
    /// Call the library in-process (`run_argv`), as an embedding agent does, starting the helper
    /// this way (`Auto` forks, since this tool is single-threaded; `Exec` always execs), on a
    /// thread of its own when the last field says so: then the host is multithreaded while the
    /// run lasts, and `Auto` has the zygote fork the helper (only the run is timed, not the
    /// thread's start).
    Library(Box<localgpt_sandbox::SandboxPolicy>, Vec<String>, localgpt_sandbox::run::HelperStart, bool),
    /// Spawn this argv through a warm `handle::Sandbox` (made once, before the first sample:
    /// capabilities detected once) and wait for it, as an agent host does (`spawn` starts a
    /// runner thread, so the host is multithreaded and the zygote forks the helper).
    Handle(Box<localgpt_sandbox::Sandbox>, Vec<String>),
}

struct Variant {
    cmd: usize,
    id: String,
    label: String,
    /// Runs the command under the sandbox (counts for the gate).
    sandboxed: bool,
    how: How,
    samples: Vec<f64>,
    failures: usize,
    failure_examples: Vec<String>,
    disabled: Option<String>,
}

/// An unprivileged user, as `getpwnam` and `getgrouplist` give it.
#[derive(Clone, Debug)]
struct User {
    name: String,
    uid: u32,
    gid: u32,
    groups: Vec<libc::gid_t>,
    home: PathBuf,
}

impl User {
    fn lookup(name: &str) -> Result<User, String> {
        let c = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: getpwnam with a valid C string; the record is copied out at once.
        let pw = unsafe { libc::getpwnam(c.as_ptr()) };
        if pw.is_null() {
            return Err(format!("--user {name}: no such user"));
        }
        // SAFETY: pw is a valid passwd record until the next getpw* call.
        let (uid, gid, home) = unsafe { ((*pw).pw_uid, (*pw).pw_gid, PathBuf::from(std::ffi::OsStr::from_bytes(std::ffi::CStr::from_ptr((*pw).pw_dir).to_bytes()))) };
        if uid == 0 {
            return Err(format!("--user {name}: uid 0 is not an unprivileged user"));
        }
        let mut n: libc::c_int = 64;
        let mut groups: Vec<libc::gid_t> = vec![0; 64];
        // SAFETY: the buffer holds n entries; n is updated to the count.
        if unsafe { libc::getgrouplist(c.as_ptr(), gid, groups.as_mut_ptr(), &mut n) } < 0 {
            groups = vec![0; usize::try_from(n).unwrap_or(0)];
            // SAFETY: as above, with the size asked for.
            unsafe { libc::getgrouplist(c.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        }
        groups.truncate(usize::try_from(n).unwrap_or(0));
        Ok(User { name: name.to_string(), uid, gid, groups, home })
    }
}

struct Cmd {
    id: &'static str,
    label: String,
    argv: Vec<String>,
}

struct Spawner {
    env: Vec<CString>,
    devnull: i32,
    /// stderr of the timed runs: a file, emptied before each run, read when a run fails.
    errlog: i32,
}

struct Discard;
impl localgpt_sandbox::run::OutputSink for Discard {
    fn output(&mut self, _: localgpt_sandbox::run::Stream, _: &[u8]) {}
}

impl Spawner {
    fn new() -> Spawner {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| {
                let mut b = k.as_bytes().to_vec();
                b.push(b'=');
                b.extend_from_slice(v.as_bytes());
                CString::new(b).ok()
            })
            .collect();
        // SAFETY: open with a static C string.
        let devnull = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if devnull < 0 {
            eprintln!("localgpt-latency: open /dev/null: {}", std::io::Error::last_os_error());
            std::process::exit(2);
        }
        let path = CString::new(format!("/var/tmp/localgpt-latency-{}.stderr", std::process::id())).unwrap_or_default();
        // SAFETY: open/unlink with a valid C string; the fd keeps the file alive.
        let errlog = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC, 0o600) };
        // SAFETY: as above.
        unsafe { libc::unlink(path.as_ptr()) };
        if errlog < 0 {
            eprintln!("localgpt-latency: stderr log: {}", std::io::Error::last_os_error());
            std::process::exit(2);
        }
        Spawner { env, devnull, errlog }
    }

    /// posix_spawn's `argv` with this spawner's environment plus `extra`, fd `stdio[i]` dup'ed
    /// onto fd `i` (-1: inherited). Returns the pid and the time just before the spawn call (the
    /// C strings and file actions are prepared before that instant, outside any timed interval).
    fn spawn_with(&self, argv: &[String], extra: Option<&CString>, stdio: [i32; 3]) -> Result<(i32, Instant, u64), String> {
        self.spawn_as(argv, extra, stdio, None)
    }

    /// [`Spawner::spawn_with`], as `user` when given: `fork`, then in the child the stdio
    /// `dup2`s, `setgroups`, `setresgid`, `setresuid` and `execve` (the user's `HOME`, `USER`
    /// and `LOGNAME` in place of the tool's); the child exits 127 when any of them fails.
    fn spawn_as(&self, argv: &[String], extra: Option<&CString>, stdio: [i32; 3], user: Option<&User>) -> Result<(i32, Instant, u64), String> {
        let cargs: Vec<CString> =
            argv.iter().map(|a| CString::new(a.as_bytes()).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
        let mut ptrs: Vec<*mut libc::c_char> = cargs.iter().map(|a| a.as_ptr() as *mut _).collect();
        ptrs.push(std::ptr::null_mut());
        let user_env: Vec<CString> = user
            .map(|u| {
                [format!("HOME={}", u.home.display()), format!("USER={}", u.name), format!("LOGNAME={}", u.name)].into_iter().filter_map(|s| CString::new(s).ok()).collect()
            })
            .unwrap_or_default();
        let replaced = |e: &CString| user.is_some() && [&b"HOME="[..], b"USER=", b"LOGNAME="].iter().any(|k| e.as_bytes().starts_with(k));
        let mut envp: Vec<*mut libc::c_char> = self.env.iter().filter(|e| !replaced(e)).map(|a| a.as_ptr() as *mut _).collect();
        envp.extend(user_env.iter().map(|e| e.as_ptr() as *mut libc::c_char));
        envp.extend(extra.map(|e| e.as_ptr() as *mut libc::c_char));
        envp.push(std::ptr::null_mut());
        if let Some(u) = user {
            let (t0, t0_ns) = (Instant::now(), now_ns());
            // SAFETY: this tool is single-threaded while it spawns (library variants join their
            // thread first), so the child may run anything; it only makes system calls on
            // memory prepared above and exits if one fails.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(format!("fork: {}", std::io::Error::last_os_error()));
            }
            if pid == 0 {
                // SAFETY: the child's own descriptors and credentials, then exec or exit.
                unsafe {
                    for (target, &fd) in stdio.iter().enumerate() {
                        if fd >= 0 && libc::dup2(fd, target as i32) < 0 {
                            libc::_exit(127);
                        }
                    }
                    if libc::setgroups(u.groups.len(), u.groups.as_ptr()) != 0 || libc::setresgid(u.gid, u.gid, u.gid) != 0 || libc::setresuid(u.uid, u.uid, u.uid) != 0 {
                        libc::_exit(127);
                    }
                    libc::execve(cargs[0].as_ptr(), ptrs.as_ptr().cast(), envp.as_ptr().cast());
                    libc::_exit(127);
                }
            }
            return Ok((pid, t0, t0_ns));
        }
        // SAFETY: the file actions are initialised and destroyed here; every pointer outlives the
        // posix_spawn call.
        unsafe {
            let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
            libc::posix_spawn_file_actions_init(&mut fa);
            for (target, &fd) in stdio.iter().enumerate() {
                if fd >= 0 {
                    libc::posix_spawn_file_actions_adddup2(&mut fa, fd, target as i32);
                }
            }
            let mut pid: libc::pid_t = 0;
            let (t0, t0_ns) = (Instant::now(), now_ns());
            let r = libc::posix_spawn(&mut pid, cargs[0].as_ptr(), &fa, std::ptr::null(), ptrs.as_ptr(), envp.as_ptr());
            libc::posix_spawn_file_actions_destroy(&mut fa);
            if r != 0 {
                return Err(format!("spawn {}: {}", argv[0], std::io::Error::from_raw_os_error(r)));
            }
            Ok((pid, t0, t0_ns))
        }
    }

    /// Spawns `argv` with stdin/stdout/stderr on /dev/null (or stderr inherited when
    /// `show_stderr`), waits for it; returns (wall ms from spawn to reap, wait status, ru_maxrss KB).
    fn run(&self, argv: &[String], show_stderr: bool, user: Option<&User>) -> Result<(f64, i32, i64), String> {
        let stderr = if show_stderr { -1 } else { self.errlog };
        let (pid, t0, _) = self.spawn_as(argv, None, [self.devnull, self.devnull, stderr], user)?;
        let mut st = 0;
        // SAFETY: wait4 gets valid out-pointers.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waiting for our own child.
            let w = unsafe { libc::wait4(pid, &mut st, 0, &mut ru) };
            if w == pid {
                break;
            }
            if w < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(format!("wait4: {}", std::io::Error::last_os_error()));
            }
        }
        Ok((t0.elapsed().as_secs_f64() * 1000.0, st, ru.ru_maxrss))
    }

    /// Spawns `argv` with `extra` added to the environment and stderr on a pipe; returns
    /// (CLOCK_MONOTONIC ns just before posix_spawn, ns just after wait4, wait status, stderr).
    fn run_capture_stderr(&self, argv: &[String], extra: &CString) -> Result<(u64, u64, i32, String), String> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two fds.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(format!("pipe: {}", std::io::Error::last_os_error()));
        }
        let spawned = self.spawn_with(argv, Some(extra), [self.devnull, self.devnull, fds[1]]);
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(fds[1]) };
        let (pid, _, t0) = match spawned {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: closing our own read end.
                unsafe { libc::close(fds[0]) };
                return Err(e);
            }
        };
        // SAFETY: we read our own pipe until EOF (the command's descendants are gone when the CLI
        // exits) and then wait for the child.
        unsafe {
            let mut out = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                let n = libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len());
                if n > 0 {
                    out.extend_from_slice(&buf[..n as usize]);
                } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break;
                }
            }
            let mut st = 0;
            while libc::waitpid(pid, &mut st, 0) < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {}
            let t1 = now_ns();
            libc::close(fds[0]);
            Ok((t0, t1, st, String::from_utf8_lossy(&out).into_owned()))
        }
    }

    /// Spawns `argv` (all stdio on /dev/null) and returns its pid without waiting.
    fn spawn(&self, argv: &[String]) -> Result<i32, String> {
        self.spawn_with(argv, None, [self.devnull; 3]).map(|(pid, _, _)| pid)
    }

    /// Runs one variant once; Ok((ms, maxrss KB or -1)) when the command exited 0.
    fn once(&self, how: &How, show_stderr: bool) -> Result<(f64, i64), String> {
        match how {
            How::Spawn(argv) | How::SpawnAs(argv, _) => {
                let user = if let How::SpawnAs(_, u) = how { Some(u) } else { None };
                // SAFETY: truncating our own log file (outside the timed interval).
                unsafe { libc::ftruncate(self.errlog, 0) };
                let (ms, st, rss) = self.run(argv, show_stderr, user)?;
                if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 {
                    Ok((ms, rss))
                } else {
                    let mut buf = vec![0u8; 2048];
                    // SAFETY: reading our own file into a local buffer.
                    let n = unsafe { libc::pread(self.errlog, buf.as_mut_ptr().cast(), buf.len(), 0) };
                    let err = String::from_utf8_lossy(&buf[..n.max(0) as usize]).trim().replace('\n', " | ");
                    let short: Vec<&str> = argv.iter().map(String::as_str).filter(|a| !a.starts_with('/') || a.len() < 40).take(12).collect();
                    Err(format!("`{} …` ended with wait status {st:#x}; stderr: {err}", short.join(" ")))
                }
            }
            How::Library(policy, argv, start, threaded) => {
                let opts = localgpt_sandbox::RunOptions { helper_start: *start, ..Default::default() };
                let timed = || {
                    let t0 = Instant::now();
                    let r = localgpt_sandbox::run_argv(argv, policy, &opts, &mut Discard);
                    (t0.elapsed().as_secs_f64() * 1000.0, r)
                };
                let (ms, r) = if *threaded { std::thread::scope(|s| s.spawn(timed).join()).map_err(|_| "the run's thread panicked".to_string())? } else { timed() };
                let r = r.map_err(|e| e.to_string())?;
                if r.exit_code == 0 {
                    Ok((ms, -1))
                } else {
                    Err(format!("library run of `{}` exited {}", argv.join(" "), r.exit_code))
                }
            }
            How::Handle(sandbox, argv) => {
                let cmd = localgpt_sandbox::Command::new(&argv[0]).args(&argv[1..]);
                let t0 = Instant::now();
                let r = sandbox.spawn(&cmd).and_then(|mut child| child.wait());
                let ms = t0.elapsed().as_secs_f64() * 1000.0;
                let r = r.map_err(|e| e.to_string())?;
                if r.exit_code == 0 {
                    Ok((ms, -1))
                } else {
                    Err(format!("Sandbox::spawn of `{}` exited {}", argv.join(" "), r.exit_code))
                }
            }
        }
    }
}

/// A `VmXxx:` value of /proc/PID/status, in KiB.
fn vm_kb(pid: i32, key: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn children_of(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// Peak RSS (VmHWM) of the spawned process (the sandbox's parent: the CLI, or bwrap) and of its
/// first child (the helper/supervisor), read from /proc while the command (`sleep 0.4`) still
/// runs; median over `runs` runs, MiB. `ru_maxrss` from `wait4` cannot be used: `posix_spawn`
/// (vfork) makes the child's high-water mark start at the spawning tool's own RSS.
fn memory_probe(sp: &Spawner, argv: &[String], runs: usize) -> Option<(f64, f64)> {
    let mut parent = Vec::new();
    let mut child = Vec::new();
    for _ in 0..runs {
        let Ok(pid) = sp.spawn(argv) else { continue };
        std::thread::sleep(std::time::Duration::from_millis(200));
        if let Some(k) = vm_kb(pid, "VmHWM:") {
            parent.push(k / 1024.0);
        }
        if let Some(c) = children_of(pid).first() {
            if let Some(k) = vm_kb(*c, "VmHWM:") {
                child.push(k / 1024.0);
            }
        }
        let mut st = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut st, 0) };
    }
    (!parent.is_empty()).then(|| (median(&parent), if child.is_empty() { f64::NAN } else { median(&child) }))
}

pub fn main() {
    // The library variant spawns /proc/self/exe as the helper: become it when asked.
    localgpt_sandbox::dispatch();
    let o = parse_opts();
    std::process::exit(match run(&o) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("localgpt-latency: {e}");
            2
        }
    })
}

/// The directories of the large repository ([`make_big_repo`]): 20 × 10 × 10 × 10 leaves and
/// the directories above them, and the root.
const BIG_DIRS: usize = 20 * 10 * 10 * 10 + 20 * 10 * 10 + 20 * 10 + 20 + 1;

/// A git repository of [`BIG_DIRS`] directories and 200 000 small files, all of them in its index
/// (made with `git update-index --index-info`: one blob, no hashing of each file), when git is
/// there; without git, the same tree with an empty `.git` skeleton.
fn make_big_repo(big: &Path) -> Result<(), String> {
    use std::io::Write;
    let mut index = String::new();
    for a in 0..20 {
        for b in 0..10 {
            for c in 0..10 {
                for d in 0..10 {
                    let rel = format!("m{a}/p{b}/s{c}/d{d}");
                    let dir = big.join(&rel);
                    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
                    for f in 0..10 {
                        std::fs::write(dir.join(format!("f{f}.txt")), "x\n").map_err(|e| format!("write in {}: {e}", dir.display()))?;
                        let _ = writeln!(index, "100644 587be6b4c3f93f93c489c0111bba5596147a26cb\t{rel}/f{f}.txt");
                    }
                }
            }
        }
    }
    let git = |args: &[&str]| std::process::Command::new("git").arg("-C").arg(big).args(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status().is_ok_and(|s| s.success());
    if !git(&["init", "-q"]) {
        for d in [".git/objects", ".git/refs", ".git/hooks"] {
            std::fs::create_dir_all(big.join(d)).map_err(|e| format!("create {d}: {e}"))?;
        }
        let _ = std::fs::write(big.join(".git/HEAD"), "ref: refs/heads/main\n");
        return Ok(());
    }
    // The blob "x\n" and the index naming it 200 000 times.
    let _ = git(&["hash-object", "-w", "m0/p0/s0/d0/f0.txt"]);
    let mut child = std::process::Command::new("git").arg("-C").arg(big).args(["update-index", "--add", "--index-info"]).stdin(std::process::Stdio::piped()).spawn().map_err(|e| format!("git update-index: {e}"))?;
    child.stdin.take().ok_or("git update-index: no stdin")?.write_all(index.as_bytes()).map_err(|e| format!("git update-index: {e}"))?;
    child.wait().map_err(|e| format!("git update-index: {e}"))?;
    Ok(())
}

/// The large repository ([`make_big_repo`]) as a JavaScript project whose hooks run lint-staged
/// (husky 9: `core.hooksPath = .husky/_`, `.husky/pre-commit` running `npx lint-staged`, a
/// `package.json` with a `lint-staged` key), made of hard links to its files (no copy of the
/// 200 000 files; nothing writes them). lint-staged reads its configuration wherever git lists
/// one, so every run asks git what it lists (launch and after the run), or the walk service
/// keeps git's answer (`guard::listing`). `Ok(false)` without git (no listing to measure).
fn make_lint_staged_repo(big: &Path, to: &Path) -> Result<bool, String> {
    let git = |args: &[&str]| std::process::Command::new("git").arg("-C").arg(to).args(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status().is_ok_and(|s| s.success());
    if !big.join(".git/index").exists() {
        return Ok(false);
    }
    let cp = std::process::Command::new("cp").arg("-al").arg(big).arg(to).status().map_err(|e| format!("cp -al: {e}"))?;
    if !cp.success() {
        return Err(format!("cp -al {} {} failed", big.display(), to.display()));
    }
    std::fs::create_dir_all(to.join(".husky/_")).map_err(|e| format!("create .husky/_: {e}"))?;
    std::fs::write(to.join(".husky/pre-commit"), "npx lint-staged\n").map_err(|e| format!("write .husky/pre-commit: {e}"))?;
    std::fs::write(to.join(".husky/_/pre-commit"), "#!/bin/sh\n. \"$(dirname \"$0\")/h\"\n").map_err(|e| format!("write .husky/_/pre-commit: {e}"))?;
    std::fs::set_permissions(to.join(".husky/_/pre-commit"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(|e| format!("chmod: {e}"))?;
    std::fs::write(to.join("package.json"), "{\"name\": \"big\", \"lint-staged\": {\"*.js\": \"eslint --fix\"}}\n").map_err(|e| format!("write package.json: {e}"))?;
    // (git config writes a new file: the hard link to the first repository's config is left.)
    Ok(git(&["config", "core.hooksPath", ".husky/_"]))
}

/// (variant id, label, (parent peak RSS MiB, child peak RSS MiB)) of the memory probe.
type MemProbe = (String, String, Option<(f64, f64)>);

#[allow(clippy::too_many_lines)]
fn run(o: &Opts) -> Result<bool, String> {
    let bin = std::fs::canonicalize(&o.bin).map_err(|e| format!("{}: {e} (build with cargo build --release, or pass --bin)", o.bin.display()))?;
    let bin_s = bin.to_string_lossy().into_owned();
    let status: Value = serde_json::from_str(&sh(&bin_s, &["sandbox", "status", "--json"]).ok_or("`localgpt sandbox status --json` failed")?)
        .map_err(|e| format!("status JSON: {e}"))?;
    let levels: Vec<String> = status["available_levels"]
        .as_array()
        .map(|a| a.iter().filter_map(|l| l.as_str().map(String::from)).collect())
        .unwrap_or_default();
    // Highest level first in the status output; order them low → high for the tables.
    let rank = |l: &str| ["none", "minimal", "standard", "full"].iter().position(|x| *x == l).unwrap_or(9);
    let mut levels = levels;
    levels.sort_by_key(|l| rank(l));
    let best = levels.last().cloned().ok_or("no sandbox level is available on this machine")?;

    // Scratch: workspace and the extra paths, outside /tmp (which the policy grants).
    let root = PathBuf::from(format!("/var/tmp/localgpt-latency-{}", std::process::id()));
    let _scratch = Scratch(root.clone());
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).map_err(|e| format!("create {}: {e}", ws.display()))?;
    let mut extra = Vec::new();
    for i in 0..1000 {
        let p = root.join("paths").join(format!("p{i:04}"));
        std::fs::create_dir_all(&p).map_err(|e| format!("create {}: {e}", p.display()))?;
        extra.push(p.to_string_lossy().into_owned());
    }
    // A monorepo-like workspace for the protected-name walk (issue 20: nested repositories are
    // looked for at launch and after the run): MONO_DIRS directories to depth 3, MONO_REPOS
    // nested repositories with a hooks directory, and a `.vscode` in every tenth one.
    let mono = root.join("mono");
    for i in 0..20 {
        for j in 0..10 {
            for k in 0..5 {
                let d = mono.join(format!("pkg{i:02}/mod{j}/src{k}"));
                std::fs::create_dir_all(&d).map_err(|e| format!("create {}: {e}", d.display()))?;
                let _ = std::fs::write(d.join("lib.rs"), "");
            }
        }
        let repo = mono.join(format!("pkg{i:02}/.git"));
        for d in ["hooks", "objects", "refs"] {
            std::fs::create_dir_all(repo.join(d)).map_err(|e| format!("create {}: {e}", repo.display()))?;
        }
        let _ = std::fs::write(repo.join("HEAD"), "ref: refs/heads/main\n");
        let _ = std::fs::write(repo.join("config"), "[core]\n\trepositoryformatversion = 0\n");
        if i % 10 == 0 {
            std::fs::create_dir_all(mono.join(format!("pkg{i:02}/.vscode"))).map_err(|e| format!("create .vscode: {e}"))?;
        }
    }
    let mono_s = mono.to_string_lossy().into_owned();
    let big = root.join("repo200k");
    make_big_repo(&big)?;
    let big_s = big.to_string_lossy().into_owned();
    let big_ls = root.join("repo200k-lint-staged");
    let big_ls_s = make_lint_staged_repo(&big, &big_ls)?.then(|| big_ls.to_string_lossy().into_owned());
    // The walk service (`guard::walkd`, on by default; set here so that a caller's
    // LOCALGPT_SANDBOX_WALK_SERVICE=0 does not change what is measured) for every run of the
    // bench: in the empty workspace it is not asked (a small root is walked in the process), in
    // the large ones it is. It leaves soon after the bench.
    // SAFETY: single-threaded here (no variant has run yet).
    unsafe {
        std::env::set_var("LOCALGPT_SANDBOX_WALK_SERVICE", "1");
        std::env::set_var("LOCALGPT_SANDBOX_WALK_SERVICE_IDLE", "60");
    }
    std::env::set_current_dir(&ws).map_err(|e| format!("chdir {}: {e}", ws.display()))?;
    let ws_s = ws.to_string_lossy().into_owned();
    // `--user`: a workspace of the user's own and copies of the binaries it can execute (this
    // tree may lie where the user cannot reach, /root say).
    // SAFETY: geteuid cannot fail.
    let root_user = unsafe { libc::geteuid() } == 0;
    let as_user: Option<(User, String, Option<String>, PathBuf)> = match &o.user {
        Some(name) if root_user => {
            let u = User::lookup(name)?;
            let ubin_dir = root.join("bin");
            std::fs::create_dir_all(&ubin_dir).map_err(|e| format!("create {}: {e}", ubin_dir.display()))?;
            let copy = |from: &Path, name: &str| -> Result<String, String> {
                let to = ubin_dir.join(name);
                std::fs::copy(from, &to).map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))?;
                std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(|e| format!("chmod {}: {e}", to.display()))?;
                Ok(to.to_string_lossy().into_owned())
            };
            let ubin = copy(&bin, "localgpt")?;
            let usl = o.sandlock.as_deref().map(|s| copy(s, "sandlock")).transpose()?;
            let uws = root.join("ws-user");
            std::fs::create_dir_all(&uws).map_err(|e| format!("create {}: {e}", uws.display()))?;
            std::os::unix::fs::chown(&uws, Some(u.uid), Some(u.gid)).map_err(|e| format!("chown {}: {e}", uws.display()))?;
            Some((u, ubin, usl, uws))
        }
        Some(_) => {
            eprintln!("localgpt-latency: --user needs root (to run as another user): left out");
            None
        }
        None => None,
    };

    let mut cmds = vec![Cmd { id: "true", label: "/bin/true".into(), argv: vec!["/bin/true".into(), "x".into()] }];
    if let Some(b) = which("bash") {
        let b = std::fs::canonicalize(&b).unwrap_or(b);
        cmds.push(Cmd { id: "bash", label: "bash -c true".into(), argv: vec![b.to_string_lossy().into(), "-c".into(), "true".into()] });
    }
    if let Some(p) = python3() {
        cmds.push(Cmd { id: "python", label: "python3 -c pass".into(), argv: vec![p.to_string_lossy().into(), "-c".into(), "pass".into()] });
    }
    let bwrap = if o.bwrap { which("bwrap") } else { None };
    let bwrap_version = bwrap.as_ref().and_then(|b| sh(&b.to_string_lossy(), &["--version"]));

    let sandbox = |level: &str, extra_paths: usize, cmd: &[String]| -> Vec<String> {
        let mut v = vec![bin_s.clone(), "sandbox".into(), "run".into(), "--quiet".into(), "--level".into(), level.into()];
        if level == "none" {
            v.push("--dangerously-allow-full-access".into());
        }
        v.extend(["--workspace".into(), ws_s.clone()]);
        for p in extra.iter().take(extra_paths) {
            v.extend(["--allow-read".into(), p.clone()]);
        }
        v.push("--".into());
        v.extend(cmd.iter().cloned());
        v
    };
    let mut variants: Vec<Variant> = Vec::new();
    let mut add = |cmd: usize, id: &str, label: String, sandboxed: bool, how: How| {
        variants.push(Variant {
            cmd,
            id: id.to_string(),
            label,
            sandboxed,
            how,
            samples: Vec::with_capacity(o.n),
            failures: 0,
            failure_examples: Vec::new(),
            disabled: None,
        });
    };
    for (ci, c) in cmds.iter().enumerate() {
        add(ci, "bare", "bare".into(), false, How::Spawn(c.argv.clone()));
        for l in &levels {
            add(ci, l, format!("localgpt {l}"), true, How::Spawn(sandbox(l, 0, &c.argv)));
        }
        if let Some(b) = &bwrap {
            let mut v = bwrap_prefix(b, &ws, &[]);
            v.extend(c.argv.iter().cloned());
            add(ci, "bwrap", "bwrap --unshare-all".into(), false, How::Spawn(v));
        }
        if let Some(sl) = &o.sandlock {
            // Sandlock's own CLI with the system read-only and the workspace writable, as its
            // README runs it; with and without its seccomp-notify supervisor.
            for (id, label, nosup) in [("sandlock-nosup", "sandlock run --no-supervisor", true), ("sandlock", "sandlock run (supervisor)", false)] {
                let mut v = sandlock_prefix(sl, &ws, nosup, &[], &[]);
                v.extend(c.argv.iter().cloned());
                add(ci, id, label.into(), false, How::Spawn(v));
            }
        }
        if c.id == "true" {
            // Diagnostics for the breakdown and the policy-growth cost (same interleaved run).
            add(ci, "cli-version", "localgpt --version (CLI exec only)".into(), false, How::Spawn(vec![bin_s.clone(), "--version".into()]));
            add(ci, "none", "localgpt none (no confinement)".into(), true, How::Spawn(sandbox("none", 0, &c.argv)));
            add(ci, &format!("{best}+100"), format!("localgpt {best} +100 paths"), true, How::Spawn(sandbox(&best, 100, &c.argv)));
            add(ci, &format!("{best}+1000"), format!("localgpt {best} +1000 paths"), true, How::Spawn(sandbox(&best, 1000, &c.argv)));
            let mut in_mono = sandbox(&best, 0, &c.argv);
            if let Some(i) = in_mono.iter().position(|a| a == "--workspace") {
                in_mono[i + 1] = mono_s.clone();
            }
            add(ci, &format!("{best}+monorepo"), format!("localgpt {best} in a monorepo workspace (1000 dirs, 20 nested repositories)"), true, How::Spawn(in_mono));
            for l in levels.iter().filter(|l| *l == "full" || *l == "standard") {
                let mut in_big = sandbox(l, 0, &c.argv);
                if let Some(i) = in_big.iter().position(|a| a == "--workspace") {
                    in_big[i + 1] = big_s.clone();
                }
                add(ci, &format!("{l}+repo200k"), format!("localgpt {l} in a repository of {BIG_DIRS} directories and 200 000 files"), true, How::Spawn(in_big.clone()));
                if let Some(ls) = &big_ls_s {
                    let mut in_ls = in_big;
                    if let Some(i) = in_ls.iter().position(|a| a == "--workspace") {
                        in_ls[i + 1] = ls.clone();
                    }
                    add(ci, &format!("{l}+repo200k-lint-staged"), format!("localgpt {l} in that repository with lint-staged in its hooks"), true, How::Spawn(in_ls));
                }
            }
            use localgpt_sandbox::run::HelperStart;
            let lib_policy = |level: &str| -> Result<Box<localgpt_sandbox::SandboxPolicy>, String> {
                let settings = localgpt_sandbox::SandboxSettings {
                    level: localgpt_sandbox::policy::LevelSetting::parse(level).map_err(|e| e.to_string())?,
                    ..Default::default()
                };
                Ok(Box::new(localgpt_sandbox::build_sandbox_policy(&ws, &settings).map_err(|e| e.to_string())?))
            };
            let lib_levels: Vec<&str> = if best == "standard" { vec!["standard"] } else { vec![best.as_str(), "standard"] };
            for l in lib_levels.into_iter().filter(|l| levels.iter().any(|x| x == l)) {
                let argv = vec!["/bin/true".to_string()];
                add(ci, &format!("lib-{l}"), format!("library run_argv {l} (fork: single-threaded host)"), true, How::Library(lib_policy(l)?, argv.clone(), HelperStart::Auto, false));
                add(ci, &format!("lib-{l}-zygote"), format!("library run_argv {l} (zygote: multithreaded host)"), true, How::Library(lib_policy(l)?, argv.clone(), HelperStart::Auto, true));
                add(ci, &format!("lib-{l}-exec"), format!("library run_argv {l} (exec: HelperStart::Exec)"), true, How::Library(lib_policy(l)?, argv.clone(), HelperStart::Exec, false));
                let warm = localgpt_sandbox::Sandbox::new(*lib_policy(l)?).map_err(|e| e.to_string())?;
                add(ci, &format!("lib-{l}-sandbox"), format!("library Sandbox::spawn + wait {l} (warm Sandbox)"), true, How::Handle(Box::new(warm), argv));
            }
            // What a user who is not root gets: bare, Standard and Full, and the peers, all run
            // as that user (`--user`), each measured against the bare run and bubblewrap of that
            // user. Root pays for things no peer does (a cgroup per run, `/etc` granted entry by
            // entry around its private files); an ordinary user does not.
            if let Some((u, ubin, usl, uws)) = &as_user {
                add(ci, "bare@user", format!("bare, as {}", u.name), false, How::SpawnAs(c.argv.clone(), u.clone()));
                for l in levels.iter().filter(|l| *l == "standard" || *l == "full") {
                    let mut v = vec![ubin.clone(), "sandbox".into(), "run".into(), "--quiet".into(), "--level".into(), l.clone(), "--workspace".into(), uws.to_string_lossy().into_owned(), "--".into()];
                    v.extend(c.argv.iter().cloned());
                    add(ci, &format!("{l}@user"), format!("localgpt {l}, as {}", u.name), true, How::SpawnAs(v, u.clone()));
                }
                if let Some(b) = &bwrap {
                    let mut v = bwrap_prefix(b, uws, &[]);
                    v.extend(c.argv.iter().cloned());
                    add(ci, "bwrap@user", format!("bwrap --unshare-all, as {}", u.name), false, How::SpawnAs(v, u.clone()));
                }
                if let Some(sl) = usl {
                    let mut v = sandlock_prefix(Path::new(sl), uws, true, &[], &[]);
                    v.extend(c.argv.iter().cloned());
                    add(ci, "sandlock-nosup@user", format!("sandlock run --no-supervisor, as {}", u.name), false, How::SpawnAs(v, u.clone()));
                }
            }
        }
    }

    let sp = Spawner::new();
    // Warm-up; the first run of each variant also checks that it works.
    for v in &mut variants {
        if let Err(e) = sp.once(&v.how, false) {
            let _ = sp.once(&v.how, true);
            if v.id == "bwrap" || v.id.starts_with("sandlock") || v.id.ends_with("@user") {
                eprintln!("localgpt-latency: {} does not work here, leaving it out: {e}", v.label);
                v.disabled = Some(e);
                continue;
            }
            return Err(format!("variant {} / {}: {e}", cmds[v.cmd].label, v.label));
        }
        for _ in 1..o.warmup {
            let _ = sp.once(&v.how, false);
        }
    }
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    let mut rng = Rng(o.seed | 1);
    eprintln!("localgpt-latency: {} mode, {} iterations × {} variants", o.mode, o.n, variants.iter().filter(|v| v.disabled.is_none()).count());
    let mut elapsed = measure(&sp, &mut variants, o.n, &mut rng);
    // A p99 over the gate while the machine itself was disturbed (an unsandboxed baseline's own
    // p99 at DISTURBED× its median or more: the whole machine slowed, not the sandbox) is measured
    // once more, every variant, from scratch; the second measurement decides and the report shows
    // both. A breach with quiet baselines, or any failed run, is not measured again: it fails.
    let mut remeasured: Option<String> = None;
    let breaches = p99_breaches(&cmds, &variants);
    if !breaches.is_empty() && !variants.iter().any(|v| v.sandboxed && v.failures > 0) {
        if let Some((d, which)) = disturbance(&cmds, &variants).filter(|(d, _)| *d >= DISTURBED) {
            let first = format!(
                "a first measurement ({} iterations) broke the {GATE_MS} ms gate ({}) while the machine was disturbed (the worst unsandboxed baseline, {which}, had a p99 {d:.1}× its median; the threshold is {DISTURBED}×): every variant was measured again from scratch, and the figures and the gate are the second measurement's",
                o.n,
                breaches.join(", ")
            );
            eprintln!("localgpt-latency: {first}");
            for v in &mut variants {
                v.samples.clear();
            }
            elapsed += measure(&sp, &mut variants, o.n, &mut rng);
            remeasured = Some(first);
        }
    }
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();

    // Phase breakdown: the sandbox's opt-in timestamps (LOCALGPT_SANDBOX_TIMING); `perf trace`
    // as a fallback for builds without them.
    let mut phase_report: Vec<(String, Vec<Vec<Span>>)> = Vec::new();
    let mut phase_method = "stamps";
    let mut phase_note = String::new();
    if o.phase_runs > 0 {
        let mut lv: Vec<String> = vec!["none".into()];
        lv.extend(levels.iter().cloned());
        let timing_env = CString::new(format!("{TIMING_ENV}=1")).map_err(|e| e.to_string())?;
        let mut by_level: BTreeMap<String, Vec<Vec<Span>>> = BTreeMap::new();
        let mut any = false;
        for k in 0..o.phase_runs {
            rng.shuffle(&mut lv);
            for l in &lv {
                let mut argv = sandbox(l, 0, &cmds[0].argv);
                let dash = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
                argv.splice(dash..dash, ["--keep-env".to_string(), TIMING_ENV.to_string()]);
                if let Ok((t0, t1, st, err)) = sp.run_capture_stderr(&argv, &timing_env) {
                    if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 {
                        if let Some(sp) = spans(&parse_stamps(&err, t0, t1)) {
                            any = true;
                            by_level.entry(l.clone()).or_default().push(sp);
                        }
                    }
                }
            }
            if k == 2 && !any {
                break; // this build has no timing hook
            }
        }
        if any {
            let mut order: Vec<String> = vec!["none".into()];
            order.extend(levels.iter().cloned());
            for l in order {
                if let Some(r) = by_level.remove(&l) {
                    phase_report.push((l, r));
                }
            }
        } else if let Some(perf) = which("perf") {
            phase_method = "perf";
            let trace_file = root.join("trace.txt");
            for l in &lv {
                let mut runs = Vec::new();
                for _ in 0..o.phase_runs.min(30) {
                    let mut argv = vec![
                        perf.to_string_lossy().into_owned(),
                        "trace".into(),
                        "-o".into(),
                        trace_file.to_string_lossy().into_owned(),
                        "-e".into(),
                        "execve,clone,clone3,vfork,write,landlock_create_ruleset,landlock_restrict_self,seccomp,setsid,exit_group".into(),
                        "--".into(),
                    ];
                    argv.extend(sandbox(l, 0, &cmds[0].argv));
                    if sp.run(&argv, false, None).is_ok_and(|(_, st, _)| libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
                        let text = std::fs::read_to_string(&trace_file).unwrap_or_default();
                        let ph = phases_of_trace(&text);
                        if ph.len() > 2 {
                            runs.push(ph.into_iter().map(|p| Span { from: String::new(), to: String::new(), what: p.name, ms: p.ms }).collect());
                        }
                    }
                }
                if !runs.is_empty() {
                    phase_report.push((l.clone(), runs));
                }
            }
            if phase_report.is_empty() {
                phase_note = "this build has no timing stamps and perf trace produced no usable trace".into();
            }
        } else {
            phase_note = "this build has no timing stamps (LOCALGPT_SANDBOX_TIMING) and perf is not installed: only the differential breakdown".into();
        }
    }

    // Memory of the sandbox's parent process, per variant, with a command that lasts long
    // enough to read /proc.
    let sleep = vec!["/bin/sleep".to_string(), "0.4".to_string()];
    let mut mem_probes: Vec<MemProbe> = Vec::new();
    let mut probe_set: Vec<(String, String, Vec<String>)> = vec![("none".into(), "localgpt none (no confinement)".into(), sandbox("none", 0, &sleep))];
    for l in &levels {
        probe_set.push((l.clone(), format!("localgpt {l}"), sandbox(l, 0, &sleep)));
    }
    probe_set.push((format!("{best}+100"), format!("localgpt {best} +100 paths"), sandbox(&best, 100, &sleep)));
    probe_set.push((format!("{best}+1000"), format!("localgpt {best} +1000 paths"), sandbox(&best, 1000, &sleep)));
    if let Some(b) = variants.iter().find(|v| v.id == "bwrap" && v.disabled.is_none()).and(bwrap.as_ref()) {
        let mut v = bwrap_prefix(b, &ws, &[]);
        v.extend(sleep.iter().cloned());
        probe_set.push(("bwrap".into(), "bwrap --unshare-all".into(), v));
    }
    for (id, label, argv) in probe_set {
        let r = memory_probe(&sp, &argv, 5);
        mem_probes.push((id, label, r));
    }

    let report = analyse(o, &cmds, &variants, &levels, &best, &status, bwrap.as_deref(), bwrap_version.as_deref(), &phase_report, phase_method, &phase_note, elapsed, &load_before, &load_after, &ws, &mem_probes, remeasured.as_deref());
    write_report(o, &report, &cmds, &variants)?;
    let passed = report["section"]["gate"]["passed"].as_bool().unwrap_or(false);
    println!("{}", report["summary_text"].as_str().unwrap_or(""));
    println!("report: {}", o.out.display());
    Ok(passed)
}

/// Runs `n` iterations, each every enabled variant once in a shuffled order, adding to each
/// variant's samples (or failures); returns the seconds it took.
fn measure(sp: &Spawner, variants: &mut [Variant], n: usize, rng: &mut Rng) -> f64 {
    let started = Instant::now();
    let mut order: Vec<usize> = (0..variants.len()).filter(|&i| variants[i].disabled.is_none()).collect();
    for it in 0..n {
        rng.shuffle(&mut order);
        for &i in &order {
            let v = &mut variants[i];
            match sp.once(&v.how, false) {
                Ok((ms, _)) => v.samples.push(ms),
                Err(e) => {
                    v.failures += 1;
                    if v.failure_examples.len() < 5 {
                        v.failure_examples.push(format!("iteration {it}: {e}"));
                    }
                }
            }
        }
        if (it + 1) % (n / 10).max(1) == 0 {
            eprintln!("  {}/{} iterations, {:.0} s", it + 1, n, started.elapsed().as_secs_f64());
        }
    }
    started.elapsed().as_secs_f64()
}

/// An unsandboxed baseline whose p99 is this many times its own median or more says the machine
/// was disturbed while it was measured (runs here that passed with a wide margin: 1.5–2.4× at worst; a run in which a
/// burst on the host slowed every variant, bare ones and peers included, 3–9× for some seconds:
/// 7.0×, and Full's p99 added on `bash -c true` 47.6 ms).
const DISTURBED: f64 = 2.5;

/// Whether the p99 gate covers this variant: sandboxed, with the default policy (the
/// policy-growth variants, `…+100` and the like, are reported, not gated).
fn gated(v: &Variant) -> bool {
    v.sandboxed && !v.id.contains('+')
}

/// The bare run a variant is measured against: the one of its own user.
fn bare_id(v: &Variant) -> &'static str {
    if v.id.ends_with("@user") {
        "bare@user"
    } else {
        "bare"
    }
}

/// The gated variants (an empty one included: it cannot pass by absence) whose added p99
/// (against the bare run of the same command and user) is not below the gate: "label on
/// `command` (p99 added X ms)". The gate's one rule: `analyse` and the decision to measure
/// again both ask it.
fn p99_breaches(cmds: &[Cmd], variants: &[Variant]) -> Vec<String> {
    let p99 = |cmd: usize, id: &str| variants.iter().find(|v| v.cmd == cmd && v.id == id && v.disabled.is_none()).and_then(|v| Summary::of(&v.samples)).map_or(f64::NAN, |s| s.p99);
    variants
        .iter()
        .filter(|v| gated(v) && v.disabled.is_none())
        .filter_map(|v| {
            let bare = p99(v.cmd, bare_id(v));
            let added = Summary::of(&v.samples).map_or(f64::NAN, |s| s.p99) - bare;
            (added.is_nan() || added >= GATE_MS).then(|| format!("{} on `{}` (p99 added {added:.1} ms)", v.label, cmds[v.cmd].label))
        })
        .collect()
}

/// The most disturbed unsandboxed baseline (bare and bubblewrap runs, every command and user):
/// its p99 ÷ its median, and which it was.
fn disturbance(cmds: &[Cmd], variants: &[Variant]) -> Option<(f64, String)> {
    variants
        .iter()
        .filter(|v| !v.sandboxed && v.disabled.is_none() && (v.id.starts_with("bare") || v.id.starts_with("bwrap")))
        .filter_map(|v| Summary::of(&v.samples).map(|s| (s.p99 / s.p50, format!("{} on `{}`", v.label, cmds[v.cmd].label))))
        .filter(|(r, _)| r.is_finite())
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

fn f(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "–".into()
    }
}

#[allow(clippy::too_many_arguments, clippy::too_many_lines)]
fn analyse(
    o: &Opts,
    cmds: &[Cmd],
    variants: &[Variant],
    levels: &[String],
    best: &str,
    status: &Value,
    bwrap: Option<&Path>,
    bwrap_version: Option<&str>,
    phase_report: &[(String, Vec<Vec<Span>>)],
    phase_method: &str,
    phase_note: &str,
    elapsed: f64,
    load_before: &str,
    load_after: &str,
    ws: &Path,
    mem_probes: &[MemProbe],
    remeasured: Option<&str>,
) -> Value {
    let summ = |ci: usize, id: &str| -> Option<Summary> {
        variants.iter().find(|v| v.cmd == ci && v.id == id && v.disabled.is_none()).and_then(|v| Summary::of(&v.samples))
    };
    let mut per_cmd = serde_json::Map::new();
    let mut gate_ok = true;
    // The p99 gate: every gated variant's p99 added below GATE_MS (`p99_breaches`).
    if !p99_breaches(cmds, variants).is_empty() {
        gate_ok = false;
    }
    let mut worst: (f64, String) = (f64::NEG_INFINITY, String::new());
    // Sharper gates: every level `status` lists was measured on every command, and (with enough
    // samples) Full's p99 is within FULL_VS_BWRAP_P99 of bubblewrap's.
    let mut unmeasured: Vec<String> = Vec::new();
    let mut ratio_fails: Vec<String> = Vec::new();
    let mut ratio_checked: Vec<String> = Vec::new();
    let mut md_tables = String::new();
    for (ci, c) in cmds.iter().enumerate() {
        let bare = summ(ci, "bare");
        let bw = summ(ci, "bwrap");
        for l in levels {
            if summ(ci, l).is_none() {
                unmeasured.push(format!("{l} on `{}`", c.label));
            }
        }
        if let (Some(full), Some(b)) = (summ(ci, "full"), &bw) {
            let r = full.p99 / b.p99;
            if full.n >= RATIO_GATE_MIN_SAMPLES && b.n >= RATIO_GATE_MIN_SAMPLES {
                ratio_checked.push(format!("`{}` {r:.2}×", c.label));
                if r.is_nan() || r > FULL_VS_BWRAP_P99 {
                    ratio_fails.push(format!("`{}`: Full p99 {:.3} ms is {r:.2}× bubblewrap's {:.3} ms", c.label, full.p99, b.p99));
                }
            }
        }
        let mut rows = serde_json::Map::new();
        let _ = writeln!(md_tables, "\n#### `{}`\n", c.label);
        let _ = writeln!(
            md_tables,
            "| variant | p50 | p90 | p99 | max | added p50 | added p99 | p99 ÷ bwrap p99 | added p99 ÷ bwrap added p99 | failures |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for v in variants.iter().filter(|v| v.cmd == ci) {
            if let Some(why) = &v.disabled {
                rows.insert(v.id.clone(), json!({"label": v.label, "disabled": why}));
                continue;
            }
            let Some(s) = Summary::of(&v.samples) else { continue };
            // A user's variants against that user's bare run and bubblewrap.
            let (bare, bw) = if v.id.ends_with("@user") { (summ(ci, bare_id(v)), summ(ci, "bwrap@user")) } else { (bare.clone(), bw.clone()) };
            let (a50, a90, a99) = bare.as_ref().map_or((f64::NAN, f64::NAN, f64::NAN), |b| (s.p50 - b.p50, s.p90 - b.p90, s.p99 - b.p99));
            let ratio = bw.as_ref().map_or(f64::NAN, |b| s.p99 / b.p99);
            let added_ratio = match (&bw, &bare) {
                (Some(b), Some(z)) => a99 / (b.p99 - z.p99),
                _ => f64::NAN,
            };
            // The gate covers every level (CLI and library) with the default policy; the
            // policy-growth variants (+100 / +1000 paths) are reported, not gated.
            if v.sandboxed && v.failures > 0 {
                gate_ok = false; // a sandboxed run that failed, policy-growth variants included
            }
            if gated(v) && a99 > worst.0 {
                worst = (a99, format!("{} on `{}`", v.label, c.label));
            }
            rows.insert(
                v.id.clone(),
                json!({
                    "label": v.label,
                    "sandboxed": v.sandboxed,
                    "n": s.n, "failures": v.failures, "failure_examples": v.failure_examples,
                    "min_ms": r3(s.min), "p50_ms": r3(s.p50), "p90_ms": r3(s.p90), "p99_ms": r3(s.p99), "max_ms": r3(s.max), "mean_ms": r3(s.mean),
                    "added_p50_ms": r3(a50), "added_p90_ms": r3(a90), "added_p99_ms": r3(a99),
                    "p99_ratio_to_bwrap": if ratio.is_finite() { json!(r3(ratio)) } else { Value::Null },
                    "added_p99_ratio_to_bwrap": if added_ratio.is_finite() { json!(r3(added_ratio)) } else { Value::Null },
                }),
            );
            let _ = writeln!(
                md_tables,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                v.label,
                f(s.p50),
                f(s.p90),
                f(s.p99),
                f(s.max),
                if v.id.starts_with("bare") { "—".into() } else { f(a50) },
                if v.id.starts_with("bare") { "—".into() } else { f(a99) },
                f(ratio),
                if v.id.starts_with("bare") || v.id.starts_with("bwrap") { "—".into() } else { f(added_ratio) },
                v.failures
            );
        }
        per_cmd.insert(c.id.to_string(), json!({"label": c.label, "argv": c.argv, "variants": rows}));
    }

    // Goals (on /bin/true, ci = 0).
    let t = |id: &str| summ(0, id);
    let bare = t("bare");
    let added = |s: &Option<Summary>| -> Option<(f64, f64)> { Some((s.as_ref()?.p50 - bare.as_ref()?.p50, s.as_ref()?.p99 - bare.as_ref()?.p99)) };
    let mut goals = serde_json::Map::new();
    let mut goal_lines = String::new();
    for (id, key, label, g50, g99) in [
        ("standard", "cli", "localgpt sandbox run (CLI)", GOAL_STANDARD_P50_MS, GOAL_STANDARD_P99_MS),
        ("lib-standard", "library", "library run_argv, single-threaded host (fork)", GOAL_LIBRARY_P50_MS, GOAL_LIBRARY_P99_MS),
        ("lib-standard-zygote", "library_zygote", "library run_argv, multithreaded host (zygote)", GOAL_LIBRARY_P50_MS, GOAL_LIBRARY_P99_MS),
        ("lib-standard-exec", "library_exec", "library run_argv, HelperStart::Exec", GOAL_LIBRARY_P50_MS, GOAL_LIBRARY_P99_MS),
        ("lib-standard-sandbox", "library_sandbox", "library Sandbox::spawn + wait, warm Sandbox", GOAL_LIBRARY_P50_MS, GOAL_LIBRARY_P99_MS),
    ] {
        if let Some((a50, a99)) = added(&t(id)) {
            let met = a50 <= g50 && a99 <= g99;
            goals.insert(
                format!("standard_{key}"),
                json!({"goal": format!("Standard: ≤ {g50} ms added at p50 and ≤ {g99} ms at p99 over bare, /bin/true"), "added_p50_ms": r3(a50), "added_p99_ms": r3(a99), "met": met}),
            );
            let _ = writeln!(
                goal_lines,
                "| Standard ≤ {g50} ms added p50, ≤ {g99} ms p99 — {label} | {} / {} ms | {} |",
                f(a50),
                f(a99),
                if met { "**met**" } else { "**not met**" }
            );
        }
    }
    // Against the peers, same run, /bin/true: Full vs bubblewrap at p99, Standard vs Sandlock
    // --no-supervisor at p50 and p99. A p99 behind fewer than RATIO_GATE_MIN_SAMPLES samples is
    // reported with that caveat.
    let frac = GOAL_PEER_FRACTION;
    let mut peer_goals = vec![("full", "bwrap", "full_vs_bwrap", "bwrap --unshare-all", false), ("standard", "sandlock-nosup", "standard_vs_sandlock", "Sandlock --no-supervisor", true)];
    // The same, as the unprivileged user (`--user`), when measured.
    if t("bare@user").is_some() {
        peer_goals.extend([
            ("full@user", "bwrap@user", "full_vs_bwrap_user", "bwrap --unshare-all (both as the unprivileged user)", false),
            ("standard@user", "sandlock-nosup@user", "standard_vs_sandlock_user", "Sandlock --no-supervisor (both as the unprivileged user)", true),
        ]);
    }
    for (ours, peer, key, peer_label, p50_too) in peer_goals {
        match (t(ours), t(peer)) {
            (Some(a), Some(b)) => {
                let r99 = a.p99 / b.p99;
                let r50 = a.p50 / b.p50;
                let met = r99 <= frac && (!p50_too || r50 <= frac);
                let coarse = a.n.min(b.n) < RATIO_GATE_MIN_SAMPLES;
                goals.insert(key.into(), json!({"goal": format!("{ours}: p99{} ≤ {frac}× {peer_label}'s, same run, /bin/true", if p50_too { " and p50" } else { "" }),
                    "p50_ratio": r3(r50), "p99_ratio": r3(r99), "ours_p50_ms": r3(a.p50), "ours_p99_ms": r3(a.p99), "peer_p50_ms": r3(b.p50), "peer_p99_ms": r3(b.p99),
                    "samples": a.n.min(b.n), "coarse_p99": coarse, "met": met}));
                let _ = writeln!(
                    goal_lines,
                    "| {ours} ≤ {frac}× {peer_label} (p99{}) | p50 {} vs {} ms (×{:.2}), p99 {} vs {} ms (×{:.2}){} | {} |",
                    if p50_too { " and p50" } else { "" },
                    f(a.p50), f(b.p50), r50, f(a.p99), f(b.p99), r99,
                    if coarse { format!(" — {} samples: p99 coarse", a.n.min(b.n)) } else { String::new() },
                    if met { "**met**" } else { "**not met**" }
                );
            }
            (None, _) => {
                goals.insert(key.into(), json!({"goal": format!("{ours} vs {peer_label}"), "met": Value::Null, "note": format!("{ours} is not in `sandbox status --json` available_levels")}));
                let _ = writeln!(goal_lines, "| {ours} ≤ {frac}× {peer_label} | — | not measured: `{ours}` is not available |");
            }
            (Some(_), None) => {
                goals.insert(key.into(), json!({"goal": format!("{ours} vs {peer_label}"), "met": Value::Null, "note": format!("{peer_label} not installed or not working")}));
                let _ = writeln!(goal_lines, "| {ours} ≤ {frac}× {peer_label} | — | not measured: no working {peer_label} |");
            }
        }
    }
    let base = t(best);
    let mut growth = serde_json::Map::new();
    for k in [100, 1000] {
        if let (Some(b), Some(g)) = (&base, t(&format!("{best}+{k}"))) {
            growth.insert(format!("paths_{k}"), json!({"level": best, "extra_allow_read_paths": k, "added_p50_ms": r3(g.p50 - b.p50), "added_p99_ms": r3(g.p99 - b.p99)}));
        }
    }
    if let (Some(b), Some(g)) = (&base, t(&format!("{best}+monorepo"))) {
        growth.insert("monorepo".into(), json!({"level": best, "workspace": "1000 directories to depth 3, 20 nested repositories (each a private copy at Full), 2 nested .vscode", "added_p50_ms": r3(g.p50 - b.p50), "added_p99_ms": r3(g.p99 - b.p99)}));
    }
    // The repository-size goal (issue 57): at each level, the large repository against the
    // empty workspace, same run (the walk service on: `guard::walkd`).
    for l in ["full", "standard"] {
        if let (Some(b), Some(g)) = (t(l), t(&format!("{l}+repo200k"))) {
            let (a50, a99) = (r3(g.p50 - b.p50), r3(g.p99 - b.p99));
            growth.insert(format!("repo200k_{l}"), json!({"level": l, "workspace": format!("a git repository of {BIG_DIRS} directories and 200 000 files (all in its index), the walk service on"), "added_p50_ms": a50, "added_p99_ms": a99}));
            let met = a50 <= GOAL_REPO_MS;
            goals.insert(format!("repo200k_{l}"), json!({"goal": format!("a repository of {BIG_DIRS} directories and 200 000 files adds ≤ {GOAL_REPO_MS} ms over the empty workspace ({l}, p50)"), "added_p50_ms": a50, "met": met}));
            let _ = writeln!(goal_lines, "| 200 000-file repository ≤ {GOAL_REPO_MS} ms over empty (p50, {l}, walk service on) | {} ms | {} |", f(a50), if met { "**met**" } else { "**not met**" });
        }
        // The same repository with lint-staged in its hooks: git's listing of its configurations
        // at launch and after the run (kept by the walk service while nothing changes it).
        if let (Some(b), Some(g)) = (t(l), t(&format!("{l}+repo200k-lint-staged"))) {
            let (a50, a99) = (r3(g.p50 - b.p50), r3(g.p99 - b.p99));
            growth.insert(format!("repo200k_lint_staged_{l}"), json!({"level": l, "workspace": format!("the {BIG_DIRS}-directory repository with lint-staged in its hooks (husky 9), the walk service on"), "added_p50_ms": a50, "added_p99_ms": a99}));
            let met = a50 <= GOAL_REPO_MS;
            goals.insert(format!("repo200k_lint_staged_{l}"), json!({"goal": format!("that repository with lint-staged in its hooks adds ≤ {GOAL_REPO_MS} ms over the empty workspace ({l}, p50)"), "added_p50_ms": a50, "met": met}));
            let _ = writeln!(goal_lines, "| the same with lint-staged in its hooks ≤ {GOAL_REPO_MS} ms over empty (p50, {l}, walk service on) | {} ms | {} |", f(a50), if met { "**met**" } else { "**not met**" });
        }
    }
    if let Some(g) = growth.get("paths_100") {
        let a = g["added_p50_ms"].as_f64().unwrap_or(f64::NAN);
        let met = a < GOAL_GROWTH_MS;
        goals.insert("policy_growth_100".into(), json!({"goal": "100 extra --allow-read paths add < 0.2 ms (p50)", "added_p50_ms": a, "met": met}));
        let _ = writeln!(goal_lines, "| 100 extra paths add < 0.2 ms (p50, {best}) | {} ms | {} |", f(a), if met { "**met**" } else { "**not met**" });
    }

    // Differential breakdown (untraced; p50 of /bin/true, same interleaved run).
    let p50 = |id: &str| t(id).map(|s| s.p50);
    let mut diff = Vec::new();
    let mut chain: Vec<(&str, String)> = vec![("bare", "bare /bin/true".into()), ("cli-version", "+ exec of the localgpt binary (`localgpt --version`)".into()), ("none", "+ run path without confinement: config, detection, plan, scratch dir, fork of the helper (the supervisor), fork of the command, teardown".into())];
    for l in levels {
        let what = match l.as_str() {
            "minimal" => "+ cgroup join (root), rlimits, no_new_privs, capability drop (root), seccomp".to_string(),
            "standard" => "+ Landlock (ruleset, path rules, restrict_self)".to_string(),
            "full" => "+ namespaces (user, PID, net, mount, IPC)".to_string(),
            other => format!("+ level {other}"),
        };
        chain.push((l.as_str(), what));
    }
    let mut prev: Option<f64> = None;
    let mut diff_md = String::from("| step | p50 of the step (ms) | marginal cost (ms) |\n|---|---:|---:|\n");
    for (id, what) in &chain {
        if let Some(v) = p50(id) {
            let m = prev.map_or(f64::NAN, |p| v - p);
            diff.push(json!({"variant": id, "what": what, "p50_ms": r3(v), "marginal_ms": if m.is_finite() { json!(r3(m)) } else { Value::Null }}));
            let _ = writeln!(diff_md, "| {what} | {} | {} |", f(v), if m.is_finite() { f(m) } else { "—".into() });
            prev = Some(v);
        }
    }

    // Per-phase breakdown: p50 / p90 / max per span over the timed runs.
    let mut traced = serde_json::Map::new();
    let mut traced_md = String::new();
    for (level, runs) in phase_report {
        let mut keys: Vec<(String, String, String)> = Vec::new();
        let mut by: BTreeMap<(String, String, String), Vec<f64>> = BTreeMap::new();
        let mut totals = Vec::new();
        for r in runs {
            totals.push(r.iter().map(|p| p.ms).sum::<f64>());
            for p in r {
                let k = (p.from.clone(), p.to.clone(), p.what.clone());
                if !keys.contains(&k) {
                    keys.push(k.clone());
                }
                by.entry(k).or_default().push(p.ms);
            }
        }
        let rows: Vec<Value> = keys
            .iter()
            .map(|k| {
                let v = localgpt_bench::stats::sorted(&by[k]);
                json!({"from": k.0, "to": k.1, "what": k.2, "p50_ms": r3(localgpt_bench::stats::percentile(&v, 0.5)),
                       "p90_ms": r3(localgpt_bench::stats::percentile(&v, 0.9)), "max_ms": r3(v[v.len() - 1]), "runs": v.len()})
            })
            .collect();
        let tot = Summary::of(&totals);
        traced.insert(level.clone(), json!({"runs": runs.len(), "total": tot, "phases": rows}));
        let (t50, t90) = tot.as_ref().map_or((f64::NAN, f64::NAN), |t| (t.p50, t.p90));
        let _ = writeln!(traced_md, "\n`localgpt sandbox run --level {level} -- /bin/true x`, {} runs (end to end p50 {} ms, p90 {} ms):\n", runs.len(), f(t50), f(t90));
        let _ = writeln!(traced_md, "| from → to | what happens | p50 (ms) | p90 (ms) | max (ms) |\n|---|---|---:|---:|---:|");
        for r in &rows {
            let g = |k: &str| f(r[k].as_f64().unwrap_or(f64::NAN));
            let span = if r["from"].as_str().unwrap_or("").is_empty() { "—".to_string() } else { format!("{} → {}", r["from"].as_str().unwrap_or(""), r["to"].as_str().unwrap_or("")) };
            let _ = writeln!(traced_md, "| {span} | {} | {} | {} | {} |", r["what"].as_str().unwrap_or(""), g("p50_ms"), g("p90_ms"), g("max_ms"));
        }
    }

    // Memory: VmHWM of the sandbox's parent process and of the helper/supervisor.
    let mut mem = serde_json::Map::new();
    let mut mem_md = String::from("| variant (`sleep 0.4`) | parent peak RSS, median (MiB) | helper/supervisor peak RSS (MiB) |\n|---|---:|---:|\n");
    for (id, label, r) in mem_probes {
        if let Some((p, c)) = r {
            mem.insert(id.clone(), json!({"label": label, "parent_peak_rss_mib": r3(*p), "child_peak_rss_mib": if c.is_finite() { json!(r3(*c)) } else { Value::Null }}));
            let _ = writeln!(mem_md, "| {label} | {} | {} |", f(*p), f(*c));
        }
    }
    let failed: Vec<String> = variants
        .iter()
        .filter(|v| v.failures > 0)
        .map(|v| format!("{} on `{}`: {} of {} runs failed; {}", v.label, cmds[v.cmd].label, v.failures, v.failures + v.samples.len(), v.failure_examples.join(" ; ")))
        .collect();
    let command_line = format!("target/release/localgpt-latency {}", o.argv.iter().skip(1).cloned().collect::<Vec<_>>().join(" "));
    let spec_ok = gate_ok;
    if !unmeasured.is_empty() || !ratio_fails.is_empty() {
        gate_ok = false;
    }
    let ratio_text = if !ratio_fails.is_empty() {
        format!("Full p99 ≤ {FULL_VS_BWRAP_P99}× bubblewrap's: FAILED ({})", ratio_fails.join("; "))
    } else if ratio_checked.is_empty() {
        format!("Full p99 ≤ {FULL_VS_BWRAP_P99}× bubblewrap's: not gated in this run (needs Full, bubblewrap and {RATIO_GATE_MIN_SAMPLES}+ samples per variant: the nightly's full mode)")
    } else {
        format!("Full p99 ≤ {FULL_VS_BWRAP_P99}× bubblewrap's: passed ({})", ratio_checked.join(", "))
    };
    let summary = format!(
        "p99 added < {GATE_MS} ms: {} (worst: {:.3} ms, {}); {}; every level `status` lists measured: {}; {} iterations interleaved, {} mode; machine disturbance (the worst unsandboxed baseline's p99 ÷ median): {}{}{}",
        if spec_ok { "passed" } else { "FAILED" },
        worst.0,
        worst.1,
        ratio_text,
        if unmeasured.is_empty() { "yes".to_string() } else { format!("NO ({})", unmeasured.join(", ")) },
        o.n,
        o.mode,
        disturbance(cmds, variants).map_or_else(|| "–".to_string(), |(d, which)| format!("{d:.1}× ({which})")),
        remeasured.map_or_else(String::new, |r| format!("; {r}")),
        if failed.is_empty() { String::new() } else { format!("; {} variant(s) had failed runs ({} sandboxed: a failed sandboxed run fails the gate): {}", failed.len(), variants.iter().filter(|v| v.sandboxed && v.failures > 0).count(), failed.join(" | ")) }
    );
    let uname = sh("uname", &["-srm"]).unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    let ncpu = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let cgroup = status["cgroup_pids"].clone();
    let bwrap_cmd = bwrap.map(|b| format!("{} /bin/true x", bwrap_prefix(b, ws, &[]).join(" ")));
    let machine = json!({"kernel": uname, "cpu": cpu, "cpus": ncpu, "uid": uid, "landlock_abi": status["landlock"]["abi"], "cgroup_pids": cgroup, "loadavg_before": load_before, "loadavg_after": load_after, "bwrap": bwrap_version,
        "sandlock": o.sandlock.as_ref().and_then(|p| sh(&p.to_string_lossy(), &["--version"])), "sandlock_path": o.sandlock.as_ref().map(|p| p.display().to_string())});

    let mut md = String::new();
    let _ = writeln!(md, "Produced by `{}` ({} mode: {} interleaved iterations, {} warm-up runs per variant, seed {:#x}; {:.0} s). Machine: {uname}, {ncpu} CPU ({cpu}), uid {uid}, Landlock ABI {}, load average {load_before} → {load_after}.\n", command_line.trim(), o.mode, o.n, o.warmup, o.seed, elapsed, status["landlock"]["abi"]);
    let _ = writeln!(md, "**Gate — p99 added < 50 ms, every level measured, Full p99 ≤ {FULL_VS_BWRAP_P99}× bubblewrap's ({RATIO_GATE_MIN_SAMPLES}+ samples): {}.** {summary}. Gated: the p99 added by every available level (and `none`) through the CLI for each command, and by the library path, all with the default policy; every level `status` lists must have been measured on every command; where Full and bubblewrap both have {RATIO_GATE_MIN_SAMPLES}+ samples (full mode), Full's p99 must be within {FULL_VS_BWRAP_P99}× bubblewrap's on each command (fewer samples make a p99 too coarse to gate on: reported only). The latency of the policy-growth variants is reported below but not gated. Any failed sandboxed run (policy-growth variants included) fails the gate.\n", if gate_ok { "passed" } else { "FAILED" });
    if !failed.is_empty() {
        let _ = writeln!(md, "**Failed runs** (exit status ≠ 0; a failed sandboxed run fails the gate):\n");
        for f in &failed {
            let _ = writeln!(md, "- {f}");
        }
        md.push('\n');
    }
    let _ = writeln!(md, "### Goals\n\n| goal | measured (added p50 / p99) | verdict |\n|---|---|---|\n{goal_lines}");
    let _ = writeln!(md, "### Latency per command (ms)\n\nWall clock from `posix_spawn` to `wait4` in the tool; stdin/stdout/stderr on /dev/null; every iteration runs every variant once in a shuffled order. *Added* = percentile of the variant − the same percentile of bare. `/bin/true` runs as `/bin/true x` so that the CLI execs it directly (one argument would mean `bash -c`).\n{md_tables}");
    let _ = writeln!(md, "![latency CDF](latency-cdf.svg)\n");
    if !growth.is_empty() {
        let _ = writeln!(md, "### Cost as the policy grows\n\n`--allow-read` directories added to `localgpt sandbox run --level {best} -- /bin/true x`, same interleaved run:\n\n| extra paths | added p50 (ms) | added p99 (ms) |\n|---:|---:|---:|");
        for (k, g) in &growth {
            if k.starts_with("paths_") {
                let _ = writeln!(md, "| {} | {} | {} |", g["extra_allow_read_paths"], f(g["added_p50_ms"].as_f64().unwrap_or(f64::NAN)), f(g["added_p99_ms"].as_f64().unwrap_or(f64::NAN)));
            }
        }
        md.push('\n');
        if let Some(g) = growth.get("monorepo") {
            let _ = writeln!(md, "In a monorepo-like workspace ({}), against the empty one, same run: **+{} ms** at p50, +{} ms at p99 (the protected names' walk at launch and after the run, and the nested repositories' private copies).\n",
                g["workspace"].as_str().unwrap_or(""), f(g["added_p50_ms"].as_f64().unwrap_or(f64::NAN)), f(g["added_p99_ms"].as_f64().unwrap_or(f64::NAN)));
        }
        for l in ["full", "standard"] {
            for k in [format!("repo200k_{l}"), format!("repo200k_lint_staged_{l}")] {
                if let Some(g) = growth.get(&k) {
                    let _ = writeln!(md, "In {} at {l}, against the empty workspace, same run: **+{} ms** at p50, +{} ms at p99.\n",
                        g["workspace"].as_str().unwrap_or(""), f(g["added_p50_ms"].as_f64().unwrap_or(f64::NAN)), f(g["added_p99_ms"].as_f64().unwrap_or(f64::NAN)));
                }
            }
        }
    }
    let _ = writeln!(md, "### Memory\n\nPeak RSS (`VmHWM` from /proc, read while `sleep 0.4` runs in the sandbox; median of 5 runs) of the sandbox's parent process — the `localgpt` CLI, which builds the plan and supervises the run (for bubblewrap: the outer `bwrap`) — and of its child (the helper, which stays as the supervisor).\n\n{mem_md}");
    let _ = writeln!(md, "### Where the time goes\n\nDifferential (untraced, p50 of `/bin/true` variants from the same run; each step adds one thing to the previous one):\n\n{diff_md}");
    if !traced_md.is_empty() {
        if phase_method == "stamps" {
            let _ = writeln!(md, "Per phase of the start-up, from the sandbox's own `CLOCK_MONOTONIC` stamps (`LOCALGPT_SANDBOX_TIMING=1` plus `--keep-env LOCALGPT_SANDBOX_TIMING`; off by default, and then one cached environment check per process), taken at each boundary by the CLI, the helper, the supervisor and the command process, plus the benchmark's own stamps around `posix_spawn` and `wait4`. The levels are interleaved run by run. Writing the stamps adds a little (two extra lines through the stderr pipe), so totals sit slightly above the untimed runs; per-phase p50s do not add up exactly to the p50 of the total:\n{traced_md}");
        } else {
            let _ = writeln!(md, "Per phase, from `perf trace` timestamps of the syscalls that bound each phase (this build has no timing stamps; tracing slows every traced syscall, `execve` and the cgroup join especially, so these values overstate the untraced ones):\n{traced_md}");
        }
    }
    if !phase_note.is_empty() {
        let _ = writeln!(md, "\nPhase tracing: {phase_note}\n");
    }
    if let Some(c) = &bwrap_cmd {
        let _ = writeln!(md, "bubblewrap command line: `{c}`\n");
    } else {
        let _ = writeln!(md, "bubblewrap: not installed or not working, so no comparison in this run.\n");
    }

    let figures = json!({
        "mode": o.mode, "iterations": o.n, "warmup": o.warmup, "seed": o.seed, "elapsed_s": r3(elapsed),
        "command": command_line.trim(), "machine": machine, "levels": levels,
        "commands": per_cmd, "goals": goals, "policy_growth": growth, "memory": mem,
        "breakdown_differential": diff, "breakdown_traced": traced, "bwrap_command": bwrap_cmd,
        "remeasured": remeasured,
    });
    let section = json!({
        "name": "latency",
        "title": "Latency",
        "gate": {"passed": gate_ok, "criterion": format!("p99 added < 50 ms (spec 11); every level status lists measured; Full p99 ≤ {FULL_VS_BWRAP_P99}× bubblewrap's where both have {RATIO_GATE_MIN_SAMPLES}+ samples"), "summary": summary},
        "figures": figures,
        "markdown": md,
    });
    json!({"section": section, "summary_text": format!("{summary}\n{}", goal_lines.trim_end())})
}

fn write_report(o: &Opts, report: &Value, cmds: &[Cmd], variants: &[Variant]) -> Result<(), String> {
    let sec_dir = o.out.join("sections");
    std::fs::create_dir_all(&sec_dir).map_err(|e| format!("create {}: {e}", sec_dir.display()))?;
    let section = &report["section"];
    let w = |p: PathBuf, s: String| std::fs::write(&p, s).map_err(|e| format!("write {}: {e}", p.display()));
    w(sec_dir.join("latency.json"), serde_json::to_string_pretty(section).unwrap_or_default())?;
    let raw: Vec<Value> = variants
        .iter()
        .map(|v| {
            json!({"command": cmds[v.cmd].id, "variant": v.id, "label": v.label, "disabled": v.disabled, "failures": v.failures,
                   "samples_ms": v.samples.iter().map(|x| (x * 10000.0).round() / 10000.0).collect::<Vec<_>>()})
        })
        .collect();
    w(o.out.join("latency.json"), serde_json::to_string(&json!({"figures": section["figures"], "raw": raw})).unwrap_or_default())?;
    let md = format!("## Latency\n\n{}", section["markdown"].as_str().unwrap_or(""));
    w(o.out.join("latency.md"), md)?;
    let panels: Vec<Panel> = cmds
        .iter()
        .enumerate()
        .map(|(ci, c)| Panel {
            title: format!("{} — CDF of {} runs per variant", c.label, o.n),
            curves: variants
                .iter()
                .filter(|v| v.cmd == ci && v.disabled.is_none() && !v.id.contains('+') && v.id != "cli-version")
                .map(|v| Curve { label: v.label.clone(), samples: v.samples.clone() })
                .collect(),
        })
        .collect();
    let caption = format!("Produced by {}", section["figures"]["command"].as_str().unwrap_or(""));
    w(o.out.join("latency-cdf.svg"), cdf_svg(&panels, &caption))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(cmd: usize, id: &str, sandboxed: bool, samples: Vec<f64>) -> Variant {
        Variant { cmd, id: id.into(), label: id.into(), sandboxed, how: How::Spawn(Vec::new()), samples, failures: 0, failure_examples: Vec::new(), disabled: None }
    }

    fn cmds() -> Vec<Cmd> {
        vec![Cmd { id: "true", label: "/bin/true".into(), argv: vec!["/bin/true".into()] }]
    }

    /// 100 samples: 97 at `base`, then the three given (the nearest-rank p99 is the 99th).
    fn tail(base: f64, last: [f64; 3]) -> Vec<f64> {
        let mut s = vec![base; 97];
        s.extend(last);
        s
    }

    #[test]
    fn only_gated_sandboxed_variants_over_the_gate_against_their_own_users_bare_run_are_breaches() {
        let c = cmds();
        let vs = vec![
            v(0, "bare", false, tail(2.0, [2.0, 2.0, 2.0])),
            v(0, "bare@user", false, tail(2.0, [2.0, 30.0, 30.0])),
            v(0, "bwrap", false, tail(7.0, [70.0, 70.0, 70.0])),
            v(0, "full", true, tail(10.0, [10.0, 52.0, 90.0])),
            v(0, "standard", true, tail(9.0, [9.0, 51.9, 90.0])),
            v(0, "full+1000", true, tail(20.0, [90.0, 90.0, 90.0])),
            v(0, "full@user", true, tail(10.0, [10.0, 79.0, 90.0])),
        ];
        let b = p99_breaches(&c, &vs);
        assert_eq!(b.len(), 1, "{b:?}");
        assert!(b[0].starts_with("full on `/bin/true` (p99 added 50.0 ms)"), "{b:?}");
        // A variant with no samples at all cannot pass by absence.
        let vs = vec![v(0, "bare", false, tail(2.0, [2.0, 2.0, 2.0])), v(0, "full", true, Vec::new())];
        assert_eq!(p99_breaches(&c, &vs).len(), 1);
    }

    #[test]
    fn the_disturbance_is_the_worst_unsandboxed_baselines_p99_over_its_median() {
        let c = cmds();
        let vs = vec![
            v(0, "bare", false, tail(2.0, [2.0, 3.0, 9.0])),
            v(0, "bwrap", false, tail(7.0, [7.0, 21.0, 21.0])),
            v(0, "full", true, tail(10.0, [10.0, 900.0, 900.0])),
            v(0, "sandlock", false, tail(10.0, [10.0, 900.0, 900.0])),
        ];
        let (d, which) = disturbance(&c, &vs).unwrap();
        assert!((d - 3.0).abs() < 1e-9 && which.starts_with("bwrap"), "{d} {which}");
        assert!(d >= DISTURBED);
        let quiet = vec![v(0, "bare", false, tail(2.0, [2.0, 3.0, 3.0])), v(0, "bwrap", false, tail(7.0, [7.0, 9.0, 9.0]))];
        assert!(disturbance(&c, &quiet).unwrap().0 < DISTURBED);
    }
}
