//! `lgmatrix`: the focused suite that `ci/kernel-matrix` runs in every kernel configuration
//! (inside a TCG guest, or directly on the host for the host kernel).
//!
//! ```text
//! lgmatrix suite --root DIR --config NAME --expect FILE --localgpt PATH [--corpus off|auto|full]
//! lgmatrix attack …      the escape vectors, run bare and inside the sandbox (argv only: the
//!                        sandbox scrubs the environment)
//! lgmatrix victim        a process outside the sandbox for the kill vector (sleeps)
//! lgmatrix exit-port N   qemu isa-debug-exit (guest only)
//! ```
//!
//! Per user (root, then uid 65534) the suite checks `localgpt sandbox status --json` against the
//! expectations file (ABI, Landlock state, level, available levels, exactly which protections are
//! not enforced), runs every vector bare (each must escape there, verified from outside, or the
//! check proves nothing), then at every available level runs a smoke command and the vectors
//! inside the sandbox and verifies every effect from outside: files, modes and sizes outside the
//! workspace, the canary's absence from the output and the workspace, the listeners' accept
//! queues, the victim's life. A vector that escapes is "not preventable" only when the run's own
//! protection table lists the protection it depends on as not enforced; otherwise it is an
//! escape and the configuration fails.
//!
//! The result is one JSON line after `LGMATRIX-RESULT ` and a final `LGMATRIX-END pass|fail`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod gaps;
use gaps::{expected_gaps, strings};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = match args.get(1).map(String::as_str) {
        Some("suite") => suite(&args[2..]),
        Some("attack") => attack(&args[2..]),
        Some("daemon") => daemon(),
        Some("victim") => loop {
            // SAFETY: pause has no arguments.
            unsafe { libc::pause() };
        },
        Some("exit-port") => exit_port(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1)),
        _ => {
            eprintln!("usage: lgmatrix suite|attack|victim|exit-port …");
            2
        }
    };
    std::process::exit(code);
}

// ------------------------------------------------------------------------------------------------
// small helpers

fn opt(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn need(args: &[String], name: &str) -> String {
    opt(args, name).unwrap_or_else(|| {
        eprintln!("lgmatrix: missing {name}");
        std::process::exit(2)
    })
}

fn chown(p: &Path, uid: u32, gid: u32) {
    let _ = std::os::unix::fs::chown(p, Some(uid), Some(gid));
}

fn nonce() -> String {
    let mut b = [0u8; 8];
    if let Ok(mut f) = fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut b);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// qemu `isa-debug-exit` at 0xf4: qemu exits with `(code << 1) | 1`.
#[cfg(target_arch = "x86_64")]
fn exit_port(code: u32) -> i32 {
    // SAFETY: ioperm on one port range, then a single `out` to it (guest only, as root).
    unsafe {
        if libc::ioperm(0xf4, 4, 1) != 0 {
            eprintln!("lgmatrix: ioperm: {}", std::io::Error::last_os_error());
            return 1;
        }
        std::arch::asm!("out dx, eax", in("dx") 0xf4u16, in("eax") code, options(nomem, nostack));
    }
    0
}

/// Other architectures' machines have no `isa-debug-exit`: the guest powers off and the host
/// judges by the `LGMATRIX-END` marker and the result line alone.
#[cfg(not(target_arch = "x86_64"))]
fn exit_port(code: u32) -> i32 {
    println!("LGMATRIX-EXIT {code} (no isa-debug-exit on {})", std::env::consts::ARCH);
    0
}

/// The escape attempt for the process-tree kill: fork, let the parent exit, setsid, and sleep,
/// with the tag in argv so the suite can find it from outside.
fn daemon() -> i32 {
    // SAFETY: fork in a single-threaded process; the child only calls setsid and sleeps.
    unsafe {
        match libc::fork() {
            0 => {
                libc::setsid();
                libc::sleep(600);
                libc::_exit(0);
            }
            _ => libc::_exit(0),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// attack: every vector, in one process (process creation costs 12–30× under TCG). What it prints
// is only a self-report: the suite decides from outside.

const KEEP: &[u8] = b"keep-me\n";

fn attack(args: &[String]) -> i32 {
    let outside = PathBuf::from(need(args, "--outside"));
    let home = PathBuf::from(need(args, "--home"));
    let tcp: u16 = need(args, "--tcp").parse().unwrap_or(0);
    let unix = PathBuf::from(need(args, "--unix"));
    let abstract_name = need(args, "--abstract");
    let udp: u16 = need(args, "--udp").parse().unwrap_or(0);
    let dgram = PathBuf::from(need(args, "--dgram"));
    let victim: i32 = need(args, "--victim").parse().unwrap_or(0);
    let tag = need(args, "--tag");
    let report = |name: &str, r: Result<String, String>| match r {
        Ok(s) => println!("VECTOR {name}: succeeded {s}"),
        Err(e) => println!("VECTOR {name}: failed {e}"),
    };
    let e2s = |e: std::io::Error| e.to_string();
    let errno = || std::io::Error::last_os_error().to_string();

    report("write-outside", fs::write(outside.join("dropped.txt"), b"escaped\n").map(|()| String::new()).map_err(e2s));
    report(
        "read-credential",
        fs::read_to_string(home.join(".ssh/id_canary")).map_err(e2s).map(|s| {
            let _ = fs::write("stolen.txt", &s);
            format!("STOLEN[{}]", s.trim())
        }),
    );
    report(
        "tcp-connect",
        std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], tcp).into(), Duration::from_secs(3))
            .map(|mut s| {
                let _ = s.write_all(b"exfil");
                String::new()
            })
            .map_err(e2s),
    );
    report("unix-connect", std::os::unix::net::UnixStream::connect(&unix).map(|_| String::new()).map_err(e2s));
    report(
        "abstract-connect",
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
            .and_then(|a| std::os::unix::net::UnixStream::connect_addr(&a))
            .map(|_| String::new())
            .map_err(e2s),
    );
    report(
        "udp-send",
        std::net::UdpSocket::bind("127.0.0.1:0").and_then(|s| s.send_to(b"exfil", ("127.0.0.1", udp))).map(|_| String::new()).map_err(e2s),
    );
    report(
        "unix-dgram-send",
        std::os::unix::net::UnixDatagram::unbound().and_then(|s| s.send_to(b"exfil", &dgram)).map(|_| String::new()).map_err(e2s),
    );
    report(
        "daemon-survives",
        std::env::current_exe()
            .and_then(|exe| Command::new(exe).args(["daemon", &format!("lgmatrix-daemon-{tag}")]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status())
            .map(|_| String::new())
            .map_err(e2s),
    );
    // SAFETY: kill with integer arguments.
    report("kill-outside", if victim > 0 && unsafe { libc::kill(victim, libc::SIGKILL) } == 0 { Ok(String::new()) } else { Err(errno()) });
    let cpath = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_default();
    let tp = cpath(&outside.join("trunc-path.txt"));
    // SAFETY: valid C string.
    report("truncate-path", if unsafe { libc::truncate(tp.as_ptr(), 0) } == 0 { Ok(String::new()) } else { Err(errno()) });
    // Files the sandbox may read but not write (a granted toolchain directory, like
    // ~/.cargo/config.toml): Landlock below ABI 3 checks neither truncate(2) nor O_TRUNC on a
    // read-only open.
    let tr = cpath(&home.join(".cargo/trunc-readable.txt"));
    // SAFETY: valid C string.
    report("truncate-readable", if unsafe { libc::truncate(tr.as_ptr(), 0) } == 0 { Ok(String::new()) } else { Err(errno()) });
    let to = cpath(&home.join(".cargo/trunc-open.txt"));
    // SAFETY: valid C string; the fd is closed right away.
    report("open-rdonly-trunc", {
        let fd = unsafe { libc::open(to.as_ptr(), libc::O_RDONLY | libc::O_TRUNC) };
        if fd >= 0 {
            unsafe { libc::close(fd) };
            Ok(String::new())
        } else {
            Err(errno())
        }
    });
    report(
        "chmod-outside",
        fs::set_permissions(outside.join("chmod.txt"), fs::Permissions::from_mode(0o777)).map(|()| String::new()).map_err(e2s),
    );
    report("git-hook", fs::write(".git/hooks/pre-commit", b"#!/bin/sh\necho pwned\n").map(|()| String::new()).map_err(e2s));
    // Smoke: ordinary work in the workspace must still succeed.
    let smoke = format!("smoke-{tag}\n");
    match fs::write("smoke.txt", &smoke).and_then(|()| fs::read_to_string("smoke.txt")) {
        Ok(s) if s == smoke => println!("SMOKE ok"),
        Ok(s) => println!("SMOKE mismatch {s:?}"),
        Err(e) => println!("SMOKE failed {e}"),
    }
    println!("ATTACK-DONE {tag}");
    3
}

// ------------------------------------------------------------------------------------------------
// the suite

#[derive(Clone, Copy)]
struct User {
    name: &'static str,
    uid: u32,
    gid: u32,
}

const USERS: [User; 2] = [User { name: "root", uid: 0, gid: 0 }, User { name: "uid65534", uid: 65534, gid: 65534 }];

/// Which protection each vector depends on (the first one listed in the run's table is used).
const VECTORS: &[(&str, &[&str])] = &[
    ("write-outside", &["fs-write-outside"]),
    ("read-credential", &["fs-read-credentials"]),
    ("tcp-connect", &["network"]),
    ("unix-connect", &["unix-sockets-outside"]),
    ("abstract-connect", &["abstract-sockets-outside"]),
    ("udp-send", &["network"]),
    ("unix-dgram-send", &["unix-sockets-outside"]),
    ("daemon-survives", &["timeout-kill-tree"]),
    ("kill-outside", &["signals-outside"]),
    ("truncate-path", &["fs-truncate-outside", "fs-write-outside"]),
    ("truncate-readable", &["fs-truncate-outside", "fs-write-outside"]),
    ("open-rdonly-trunc", &["fs-truncate-outside", "fs-write-outside"]),
    ("chmod-outside", &["fs-metadata-outside"]),
    ("git-hook", &["workspace-persistence"]),
];

/// A process's captured result.
struct Output {
    code: i32,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Runs `cmd` as `user` with a clean environment, capturing output, killed after `limit`.
fn run_as(user: User, home: &Path, cwd: &Path, argv: &[String], limit: Duration) -> Output {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("LANG", "C")
        .env("USER", user.name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if user.uid != 0 {
        c.uid(user.uid).gid(user.gid);
    }
    let mut child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) => return Output { code: -1, stdout: String::new(), stderr: format!("spawn {}: {e}", argv[0]), timed_out: false },
    };
    let mut so = child.stdout.take();
    let mut se = child.stderr.take();
    let t1 = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = so.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = se.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if start.elapsed() > limit => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let stdout = String::from_utf8_lossy(&t1.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&t2.join().unwrap_or_default()).into_owned();
    let code = status.and_then(|s| s.code().or_else(|| std::os::unix::process::ExitStatusExt::signal(&s).map(|n| 128 + n))).unwrap_or(-1);
    Output { code, stdout, stderr, timed_out }
}

/// Listeners outside the sandbox; connections stay in the accept queue until drained.
struct Listeners {
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
    dgram: std::os::unix::net::UnixDatagram,
    dgram_path: PathBuf,
    unix: std::os::unix::net::UnixListener,
    unix_path: PathBuf,
    abstract_: std::os::unix::net::UnixListener,
    abstract_name: String,
}

impl Listeners {
    fn open(root: &Path) -> Result<Self, String> {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("tcp listener: {e}"))?;
        let dir = root.join("sockets");
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        let unix_path = dir.join("outside.sock");
        let _ = fs::remove_file(&unix_path);
        let unix = std::os::unix::net::UnixListener::bind(&unix_path).map_err(|e| format!("unix listener: {e}"))?;
        fs::set_permissions(&unix_path, fs::Permissions::from_mode(0o777)).map_err(|e| e.to_string())?;
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("udp socket: {e}"))?;
        let dgram_path = dir.join("outside.dgram");
        let _ = fs::remove_file(&dgram_path);
        let dgram = std::os::unix::net::UnixDatagram::bind(&dgram_path).map_err(|e| format!("unix datagram socket: {e}"))?;
        fs::set_permissions(&dgram_path, fs::Permissions::from_mode(0o777)).map_err(|e| e.to_string())?;
        udp.set_nonblocking(true).map_err(|e| e.to_string())?;
        dgram.set_nonblocking(true).map_err(|e| e.to_string())?;
        let abstract_name = format!("lgmatrix-{}", nonce());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).map_err(|e| e.to_string())?;
        let abstract_ = std::os::unix::net::UnixListener::bind_addr(&addr).map_err(|e| format!("abstract listener: {e}"))?;
        for fd in [
            std::os::fd::AsRawFd::as_raw_fd(&tcp),
            std::os::fd::AsRawFd::as_raw_fd(&unix),
            std::os::fd::AsRawFd::as_raw_fd(&abstract_),
        ] {
            // SAFETY: fcntl on our own descriptors.
            unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
        }
        Ok(Listeners { tcp, udp, dgram, dgram_path, unix, unix_path, abstract_, abstract_name })
    }

    fn port(&self) -> u16 {
        self.tcp.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    fn udp_port(&self) -> u16 {
        self.udp.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// (udp, unix datagram) messages received since the last drain.
    fn drain_datagrams(&self) -> (u32, u32) {
        let mut buf = [0u8; 256];
        let mut n = (0, 0);
        while self.udp.recv_from(&mut buf).is_ok() {
            n.0 += 1;
        }
        while self.dgram.recv_from(&mut buf).is_ok() {
            n.1 += 1;
        }
        n
    }

    /// (tcp, unix, abstract) connections accepted since the last drain.
    fn drain(&self) -> (u32, u32, u32) {
        let mut n = (0, 0, 0);
        while self.tcp.accept().is_ok() {
            n.0 += 1;
        }
        while self.unix.accept().is_ok() {
            n.1 += 1;
        }
        while self.abstract_.accept().is_ok() {
            n.2 += 1;
        }
        n
    }
}

/// The world one attack run sees, reset before each run.
struct Stage {
    user: User,
    home: PathBuf,
    outside: PathBuf,
    canary: String,
}

impl Stage {
    fn reset_outside(&self) -> Result<(), String> {
        let _ = fs::remove_dir_all(&self.outside);
        fs::create_dir_all(&self.outside).map_err(|e| format!("{}: {e}", self.outside.display()))?;
        fs::set_permissions(&self.outside, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        chown(&self.outside, self.user.uid, self.user.gid);
        let cargo = self.home.join(".cargo");
        fs::create_dir_all(&cargo).map_err(|e| format!("{}: {e}", cargo.display()))?;
        chown(&cargo, self.user.uid, self.user.gid);
        for p in [self.outside.join("trunc-path.txt"), self.outside.join("chmod.txt"), cargo.join("trunc-readable.txt"), cargo.join("trunc-open.txt")] {
            let mode = 0o644;
            fs::write(&p, KEEP).map_err(|e| format!("{}: {e}", p.display()))?;
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())?;
            chown(&p, self.user.uid, self.user.gid);
        }
        Ok(())
    }

    fn workspace(&self, ws: &Path, probe_src: &Path) -> Result<PathBuf, String> {
        let _ = fs::remove_dir_all(ws);
        fs::create_dir_all(ws.join(".git/hooks")).map_err(|e| format!("{}: {e}", ws.display()))?;
        for p in [ws.to_path_buf(), ws.join(".git"), ws.join(".git/hooks")] {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
            chown(&p, self.user.uid, self.user.gid);
        }
        let probe = ws.join("lgmatrix-probe");
        if fs::hard_link(probe_src, &probe).is_err() {
            fs::copy(probe_src, &probe).map_err(|e| format!("copy probe: {e}"))?;
            fs::set_permissions(&probe, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
        }
        Ok(probe)
    }

    fn spawn_victim(&self, exe: &Path) -> Result<Child, String> {
        let mut c = Command::new(exe);
        c.arg("victim").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        if self.user.uid != 0 {
            c.uid(self.user.uid).gid(self.user.gid);
        }
        // Its own process group, so nothing aimed at the suite's group reaches it by accident.
        c.process_group(0);
        c.spawn().map_err(|e| format!("victim: {e}"))
    }
}

/// Which vectors had their effect, judged only from outside.
/// Processes whose argv is `… daemon lgmatrix-daemon-TAG`, found from outside through /proc.
fn find_daemons(tag: &str) -> Vec<i32> {
    let want = format!("\0daemon\0lgmatrix-daemon-{tag}\0");
    let mut v = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if let Ok(c) = fs::read(e.path().join("cmdline")) {
            let c = format!("\0{}", String::from_utf8_lossy(&c));
            if c.contains(&want) {
                v.push(pid);
            }
        }
    }
    v
}

fn observe(stage: &Stage, ws: &Path, out: &Output, lis: &Listeners, victim: &mut Child, tag: &str) -> BTreeMap<&'static str, (bool, String)> {
    let mut m = BTreeMap::new();
    let dropped = stage.outside.join("dropped.txt");
    m.insert("write-outside", (dropped.exists(), format!("{} exists: {}", dropped.display(), dropped.exists())));
    let stolen = fs::read_to_string(ws.join("stolen.txt")).unwrap_or_default();
    let leaked = out.stdout.contains(&stage.canary) || out.stderr.contains(&stage.canary) || stolen.contains(&stage.canary);
    m.insert("read-credential", (leaked, format!("canary in output or workspace: {leaked}")));
    let (t, u, a) = lis.drain();
    let (ud, dg) = lis.drain_datagrams();
    m.insert("udp-send", (ud > 0, format!("{ud} datagram(s) received on 127.0.0.1:{} (udp)", lis.udp_port())));
    m.insert("unix-dgram-send", (dg > 0, format!("{dg} datagram(s) received on {}", lis.dgram_path.display())));
    let mut daemons = find_daemons(tag);
    if !daemons.is_empty() {
        // A process being killed right now is not a survivor: look again a moment later.
        std::thread::sleep(Duration::from_millis(500));
        daemons = find_daemons(tag);
    }
    m.insert("daemon-survives", (!daemons.is_empty(), format!("setsid'd grandchild still running 0.5 s after the command ended: pids {daemons:?}")));
    for pid in daemons {
        // SAFETY: kill with integer arguments (cleanup of the escaped daemon).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    m.insert("tcp-connect", (t > 0, format!("{t} connection(s) accepted on 127.0.0.1:{}", lis.port())));
    m.insert("unix-connect", (u > 0, format!("{u} connection(s) accepted on {}", lis.unix_path.display())));
    m.insert("abstract-connect", (a > 0, format!("{a} connection(s) accepted on @{}", lis.abstract_name)));
    let dead = !matches!(victim.try_wait(), Ok(None));
    m.insert("kill-outside", (dead, format!("victim pid {} dead: {dead}", victim.id())));
    let _ = victim.kill();
    let _ = victim.wait();
    for (v, f) in [
        ("truncate-path", stage.outside.join("trunc-path.txt")),
        ("truncate-readable", stage.home.join(".cargo/trunc-readable.txt")),
        ("open-rdonly-trunc", stage.home.join(".cargo/trunc-open.txt")),
    ] {
        let len = fs::metadata(&f).map(|md| md.len()).unwrap_or(u64::MAX);
        m.insert(v, (len != KEEP.len() as u64, format!("{} size {len} (was {})", f.display(), KEEP.len())));
    }
    let mode = fs::metadata(stage.outside.join("chmod.txt")).map(|md| md.mode() & 0o7777).unwrap_or(0);
    m.insert("chmod-outside", (mode != 0o644, format!("chmod.txt mode {mode:o} (was 644)")));
    let hook = ws.join(".git/hooks/pre-commit");
    m.insert("git-hook", (hook.exists(), format!("{} exists: {}", hook.display(), hook.exists())));
    m
}

fn not_enforced(protections: &Value) -> BTreeSet<String> {
    protections
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|p| p["state"].as_str() != Some("enforced"))
                .filter_map(|p| p["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn fmt_set(s: &BTreeSet<String>) -> String {
    if s.is_empty() {
        "{}".into()
    } else {
        s.iter().cloned().collect::<Vec<_>>().join(",")
    }
}

fn suite(args: &[String]) -> i32 {
    let t0 = Instant::now();
    let root = PathBuf::from(need(args, "--root"));
    let config = need(args, "--config");
    let expect_path = need(args, "--expect");
    let localgpt_src = PathBuf::from(need(args, "--localgpt"));
    let corpus = opt(args, "--corpus").unwrap_or_else(|| "auto".into());
    let mut failures: Vec<String> = Vec::new();
    let result = |failures: &[String], body: Value| {
        let passed = failures.is_empty();
        let mut v = body;
        v["config"] = json!(config);
        v["passed"] = json!(passed);
        v["failures"] = json!(failures);
        v["duration_s"] = json!((t0.elapsed().as_secs_f64() * 10.0).round() / 10.0);
        println!("LGMATRIX-RESULT {v}");
        println!("LGMATRIX-END {}", if passed { "pass" } else { "fail" });
        i32::from(!passed)
    };
    let exp: Value = match fs::read_to_string(&expect_path).map_err(|e| e.to_string()).and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string())) {
        Ok(v) => v,
        Err(e) => return result(&[format!("expectations {expect_path}: {e}")], json!({})),
    };
    let Some(cfg) = exp["configurations"].as_array().and_then(|a| a.iter().find(|c| c["name"] == config.as_str())).cloned() else {
        return result(&[format!("configuration {config} not in {expect_path}")], json!({}));
    };
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    if let Some(prefix) = cfg["version_prefix"].as_str() {
        if !kernel.starts_with(prefix) {
            failures.push(format!("kernel {kernel} is not the {prefix}* kernel this configuration describes"));
        }
    }

    // Binaries in a world-readable place (the unprivileged user must exec them).
    let _ = fs::remove_dir_all(&root);
    let bin = root.join("bin");
    if let Err(e) = fs::create_dir_all(&bin) {
        return result(&[format!("{}: {e}", bin.display())], json!({}));
    }
    let _ = fs::set_permissions(&root, fs::Permissions::from_mode(0o755));
    let _ = fs::set_permissions(&bin, fs::Permissions::from_mode(0o755));
    let localgpt = bin.join("localgpt");
    let me = bin.join("lgmatrix");
    let copy = |from: &Path, to: &Path| -> Result<(), String> {
        fs::copy(from, to).map_err(|e| format!("copy {} → {}: {e}", from.display(), to.display()))?;
        fs::set_permissions(to, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())
    };
    let self_exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    if let Err(e) = copy(&localgpt_src, &localgpt).and_then(|()| copy(&self_exe, &me)) {
        return result(&[e], json!({}));
    }
    let lis = match Listeners::open(&root) {
        Ok(l) => l,
        Err(e) => return result(&[e], json!({})),
    };
    let limit = Duration::from_secs(180);
    let mut users_out = serde_json::Map::new();

    for user in USERS {
        let mut fail = |m: String| failures.push(format!("{}: {m}", user.name));
        let home = root.join(format!("home-{}", user.name));
        let outside = root.join(format!("outside-{}", user.name));
        let canary = format!("LGMATRIX-CANARY-{}", nonce());
        let stage = Stage { user, home: home.clone(), outside, canary: canary.clone() };
        let ssh = home.join(".ssh");
        if let Err(e) = fs::create_dir_all(&ssh).and_then(|()| fs::write(ssh.join("id_canary"), format!("{canary}\n"))) {
            fail(format!("home setup: {e}"));
            continue;
        }
        let _ = fs::set_permissions(&home, fs::Permissions::from_mode(0o700));
        let _ = fs::set_permissions(&ssh, fs::Permissions::from_mode(0o700));
        let _ = fs::set_permissions(ssh.join("id_canary"), fs::Permissions::from_mode(0o600));
        for p in [&home, &ssh, &ssh.join("id_canary")] {
            chown(p, user.uid, user.gid);
        }
        let mut uo = serde_json::Map::new();

        // --- status --------------------------------------------------------------------------
        let status_ws = root.join(format!("ws-{}-status", user.name));
        if let Err(e) = stage.workspace(&status_ws, &me) {
            fail(e);
            continue;
        }
        let st = run_as(user, &home, &status_ws, &[localgpt.display().to_string(), "sandbox".into(), "status".into(), "--json".into()], limit);
        let status: Value = serde_json::from_str(&st.stdout).unwrap_or(Value::Null);
        if st.code != 0 || status.is_null() {
            fail(format!("status --json failed (exit {}): {}", st.code, st.stderr.trim()));
            users_out.insert(user.name.into(), json!({"status_error": st.stderr}));
            continue;
        }
        let abi = status["landlock"]["abi"].as_u64().unwrap_or(999);
        let level = status["level"].as_str().unwrap_or("?").to_string();
        let levels: Vec<String> = status["available_levels"].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default();
        let want_levels: Vec<String> = cfg["levels"][user.name].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default();
        if Some(abi) != cfg["abi"].as_u64() {
            fail(format!("status: Landlock ABI {abi}, expected {}", cfg["abi"]));
        }
        if status["landlock"]["state"] != cfg["landlock_state"] {
            fail(format!("status: Landlock state {}, expected {}", status["landlock"]["state"], cfg["landlock_state"]));
        }
        if status["seccomp"]["available"] != json!(true) {
            fail("status: seccomp unavailable".into());
        }
        if levels != want_levels {
            fail(format!("status: available levels {levels:?}, expected {want_levels:?}"));
        }
        if want_levels.first() != Some(&level) {
            fail(format!("status: level {level}, expected {:?}", want_levels.first()));
        }
        let gaps = not_enforced(&status["protections"]);
        let cgroup = !status["cgroup_pids"].is_null();
        let memory_cgroup = !status["cgroup_memory"].is_null();
        // Minimal because Landlock is missing, with namespaces carrying what they can.
        let gap_key = if level == "minimal" && status["namespaces"] == json!(true) { "minimal+mounts".to_string() } else { level.clone() };
        let want_gaps = expected_gaps(&exp, &cfg, user.name, &gap_key, cgroup, memory_cgroup);
        if gaps != want_gaps {
            fail(format!("status at {level}: not enforced {{{}}}, expected {{{}}}", fmt_set(&gaps), fmt_set(&want_gaps)));
        }
        uo.insert(
            "status".into(),
            json!({"abi": abi, "landlock_state": status["landlock"]["state"], "level": level, "available_levels": levels,
                   "user_namespaces": status["user_namespaces"]["available"], "cgroup_pids": cgroup, "not_enforced": gaps, "kernel": status["kernel"]}),
        );

        let attack_argv = |probe: &Path, victim: u32, tag: &str| -> Vec<String> {
            vec![
                probe.display().to_string(),
                "attack".into(),
                "--outside".into(),
                stage.outside.display().to_string(),
                "--home".into(),
                home.display().to_string(),
                "--tcp".into(),
                lis.port().to_string(),
                "--unix".into(),
                lis.unix_path.display().to_string(),
                "--abstract".into(),
                lis.abstract_name.clone(),
                "--udp".into(),
                lis.udp_port().to_string(),
                "--dgram".into(),
                lis.dgram_path.display().to_string(),
                "--victim".into(),
                victim.to_string(),
                "--tag".into(),
                tag.into(),
            ]
        };

        // --- bare: every vector must escape, or its check proves nothing ---------------------
        let bare_ws = root.join(format!("ws-{}-bare", user.name));
        let bare = (|| -> Result<Value, String> {
            stage.reset_outside()?;
            let probe = stage.workspace(&bare_ws, &me)?;
            lis.drain();
            lis.drain_datagrams();
            let mut victim = stage.spawn_victim(&me)?;
            let tag = format!("bare-{}", user.name);
            let out = run_as(user, &home, &bare_ws, &attack_argv(&probe, victim.id(), &tag), limit);
            let seen = observe(&stage, &bare_ws, &out, &lis, &mut victim, &tag);
            let not_escaped: Vec<&str> = seen.iter().filter(|(_, (e, _))| !e).map(|(k, _)| *k).collect();
            let mut errs = Vec::new();
            if out.code != 3 {
                errs.push(format!("bare attack exited {} (expected 3): {}", out.code, out.stderr.trim()));
            }
            for v in &not_escaped {
                errs.push(format!("bare: vector {v} did not escape without the sandbox ({}), so its check proves nothing", seen[v].1));
            }
            Ok(json!({"escaped": seen.iter().filter(|(_, (e, _))| *e).map(|(k, _)| *k).collect::<Vec<_>>(),
                      "not_escaped": not_escaped, "errors": errs, "self_report": out.stdout}))
        })();
        match bare {
            Ok(b) => {
                for e in strings(&b["errors"]) {
                    fail(e);
                }
                uo.insert("bare".into(), b);
            }
            Err(e) => fail(format!("bare: {e}")),
        }

        // --- every available level -----------------------------------------------------------
        let mut lv_out = serde_json::Map::new();
        // `auto` too when it differs from every explicit level (minimal with namespaces).
        let mut run_levels = levels.clone();
        if gap_key == "minimal+mounts" {
            run_levels.insert(0, "auto".to_string());
        }
        for lvl in &run_levels {
            let ws = root.join(format!("ws-{}-{lvl}", user.name));
            let r = (|| -> Result<(Value, Vec<String>), String> {
                let mut errs = Vec::new();
                // Smoke: an ordinary shell command at this level.
                stage.workspace(&ws, &me)?;
                let msg = format!("hello-{lvl}-{}", user.name);
                let smoke = run_as(
                    user,
                    &home,
                    &ws,
                    &[localgpt.display().to_string(), "sandbox".into(), "run".into(), "--quiet".into(), "--level".into(), lvl.clone(),
                      "--workspace".into(), ws.display().to_string(), "--timeout".into(), "120".into(), "--".into(),
                      "/bin/sh".into(), "-c".into(), format!("echo {msg} > hello.txt && cat hello.txt && exit 5")],
                    limit,
                );
                let hello = fs::read_to_string(ws.join("hello.txt")).unwrap_or_default();
                let smoke_ok = smoke.code == 5 && smoke.stdout.contains(&msg) && hello.trim() == msg;
                if !smoke_ok {
                    errs.push(format!("smoke at {lvl}: exit {} (want 5), stdout {:?}, hello.txt {:?}, stderr {:?}", smoke.code, smoke.stdout.trim(), hello.trim(), smoke.stderr.trim()));
                }
                // The vectors inside the sandbox.
                stage.reset_outside()?;
                let probe = stage.workspace(&ws, &me)?;
                lis.drain();
                lis.drain_datagrams();
                let mut victim = stage.spawn_victim(&me)?;
                let tag = format!("{lvl}-{}", user.name);
                let mut argv = vec![localgpt.display().to_string(), "sandbox".into(), "run".into(), "--json".into(), "--quiet".into(),
                    "--level".into(), lvl.clone(), "--workspace".into(), ws.display().to_string(), "--timeout".into(), "120".into(), "--".into()];
                argv.extend(attack_argv(&probe, victim.id(), &tag));
                let out = run_as(user, &home, &ws, &argv, limit);
                let rj: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
                // Judge from outside; the run's own stdout (captured in the JSON) is searched too.
                let inner = Output {
                    code: rj["exit_code"].as_i64().unwrap_or(-1) as i32,
                    stdout: format!("{}{}", out.stdout, rj["stdout"].as_str().unwrap_or("")),
                    stderr: format!("{}{}", out.stderr, rj["stderr"].as_str().unwrap_or("")),
                    timed_out: out.timed_out,
                };
                let seen = observe(&stage, &ws, &inner, &lis, &mut victim, &tag);
                if rj.is_null() {
                    errs.push(format!("run --json at {lvl} gave no JSON (exit {}): {}", out.code, out.stderr.trim()));
                }
                if inner.timed_out || rj["timed_out"] == json!(true) {
                    errs.push(format!("attack at {lvl} timed out"));
                }
                // `auto` runs at the status level, with the namespaces of the minimal+mounts case.
                let (eff_level, eff_key) = if lvl == "auto" { (level.as_str(), gap_key.as_str()) } else { (lvl.as_str(), lvl.as_str()) };
                if rj["level"].as_str() != Some(eff_level) {
                    errs.push(format!("run at {lvl} reported level {}", rj["level"]));
                }
                let smoke_in = fs::read_to_string(ws.join("smoke.txt")).unwrap_or_default();
                let attack_done = rj["stdout"].as_str().unwrap_or("").contains(&format!("ATTACK-DONE {tag}"));
                if inner.code != 3 || !attack_done || smoke_in != format!("smoke-{tag}\n") {
                    errs.push(format!("attack at {lvl}: exit {} (want 3), finished {attack_done}, workspace smoke.txt {:?}; stderr {:?}",
                        inner.code, smoke_in, rj["stderr"].as_str().unwrap_or(&out.stderr).trim()));
                }
                let applied = &rj["applied"];
                let want_ll = if eff_level == "minimal" { "not_applied" } else { "fully_enforced" };
                let want_ns = eff_level == "full" || eff_key == "minimal+mounts";
                if applied["seccomp"] != json!(true) || applied["landlock"].as_str() != Some(want_ll) || applied["namespaces"] != json!(want_ns) {
                    errs.push(format!("applied at {lvl}: {applied} (want seccomp, landlock {want_ll}, namespaces {want_ns})"));
                }
                let gaps = not_enforced(&rj["protections"]);
                let want = expected_gaps(&exp, &cfg, user.name, eff_key, cgroup, memory_cgroup);
                if gaps != want {
                    errs.push(format!("run at {lvl}: not enforced {{{}}}, expected {{{}}}", fmt_set(&gaps), fmt_set(&want)));
                }
                let state_of = |ids: &[&str]| -> String {
                    ids.iter()
                        .find_map(|id| rj["protections"].as_array()?.iter().find(|p| p["id"] == *id).and_then(|p| p["state"].as_str().map(String::from)))
                        .unwrap_or_else(|| "absent".into())
                };
                let (mut blocked, mut not_prev, mut escaped) = (Vec::new(), Vec::new(), Vec::new());
                let mut evidence = serde_json::Map::new();
                for (v, prots) in VECTORS {
                    let (esc, ev) = seen.get(v).cloned().unwrap_or((true, "not observed".into()));
                    let state = state_of(prots);
                    evidence.insert((*v).into(), json!({"escaped": esc, "protection": prots[0], "state": state, "evidence": ev}));
                    if !esc {
                        blocked.push(*v);
                    } else if state != "enforced" {
                        not_prev.push(*v);
                    } else {
                        escaped.push(*v);
                        errs.push(format!("ESCAPE at {lvl}: {v} ({}) although {} is enforced", ev, prots[0]));
                    }
                }
                Ok((
                    json!({"blocked": blocked, "not_preventable": not_prev, "escaped": escaped, "smoke_ok": smoke_ok,
                           "not_enforced": gaps, "vectors": evidence, "self_report": rj["stdout"], "run_ms": rj["duration_ms"]}),
                    errs,
                ))
            })();
            match r {
                Ok((v, errs)) => {
                    for e in errs {
                        fail(e);
                    }
                    lv_out.insert(lvl.clone(), v);
                }
                Err(e) => fail(format!("level {lvl}: {e}")),
            }
        }
        uo.insert("levels".into(), Value::Object(lv_out));

        // --- hook: the escape corpus compiled into the binary, once it exists -----------------
        // `localgpt sandbox test [--full] --json` (branch `escapes`). Until that subcommand is in
        // the build under test, this is reported as skipped with the reason, never as passed.
        let corpus_v = if corpus == "off" {
            json!({"state": "skipped", "reason": "--corpus off"})
        } else {
            let probe = run_as(user, &home, &status_ws, &[localgpt.display().to_string(), "sandbox".into(), "test".into(), "--help".into()], limit);
            if probe.code != 0 && corpus == "full" {
                fail("--corpus full: `localgpt sandbox test` is not in this build, so the corpus cannot run".into());
                json!({"state": "failed", "reason": "`localgpt sandbox test` is not in this build (required by --corpus full)"})
            } else if probe.code != 0 {
                json!({"state": "skipped", "reason": "`localgpt sandbox test` is not in this build"})
            } else {
                let mut argv = vec![localgpt.display().to_string(), "sandbox".into(), "test".into(), "--json".into()];
                if corpus == "full" {
                    argv.push("--full".into());
                }
                let out = run_as(user, &home, &status_ws, &argv, Duration::from_secs(1800));
                if out.code != 0 {
                    let tail = |s: &str| s.chars().rev().take(1500).collect::<String>().chars().rev().collect::<String>();
                    fail(format!("`{}` failed (exit {}); stdout tail: {}; stderr tail: {}", argv[1..].join(" "), out.code, tail(&out.stdout), tail(&out.stderr)));
                }
                let summary: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
                json!({"state": if out.code == 0 { "passed" } else { "failed" }, "command": argv[1..].join(" "),
                       "exit": out.code, "summary": summary.get("summary").cloned().unwrap_or(Value::Null)})
            }
        };
        uo.insert("corpus".into(), corpus_v);
        users_out.insert(user.name.into(), Value::Object(uo));
    }
    let _ = fs::remove_file(&lis.unix_path);
    let _ = fs::remove_file(&lis.dgram_path);
    result(&failures, json!({"kernel": kernel, "users": users_out}))
}
