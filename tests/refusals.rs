//! What a refused call returns inside the sandbox: `EPERM`, so that a program sees "not
//! permitted" and falls back (Python raises `PermissionError`; `ENOSYS` would read as "not
//! implemented" and some tools then try another, riskier path).
//!
//! Whether anything escapes is the escape corpus's job (`escapes/`, run by the one engine in
//! `harness/` at every level, as root and as an unprivileged user, each vector also run bare):
//! these tests check only the error a command sees. They were the errno halves of the escape
//! tests that lived in `tests/security.rs` before it was folded into the corpus (issue 15).

mod support;

use support::*;

#[test]
fn creating_inet_netlink_sockets_fails_with_eperm() {
    let name = "creating_inet_netlink_sockets_fails_with_eperm";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    let script = w.ws_file(
        "sockets.py",
        r#"import socket
fams = [("inet", socket.AF_INET, socket.SOCK_STREAM, 0),
        ("inet_dgram", socket.AF_INET, socket.SOCK_DGRAM, 0),
        ("inet6", socket.AF_INET6, socket.SOCK_STREAM, 0),
        ("netlink", socket.AF_NETLINK, socket.SOCK_RAW, 0),
        ("netlink_audit", socket.AF_NETLINK, socket.SOCK_RAW, 9),
        ("netlink_uevent", socket.AF_NETLINK, socket.SOCK_DGRAM, 15)]
for name, fam, typ, proto in fams:
    try:
        s = socket.socket(fam, typ, proto)
        print("CREATED %s" % name)
        s.close()
    except OSError as e:
        print("FAILED %s errno=%d" % (name, e.errno))
"#,
    );
    let snippet = format!("echo {STARTED}; {} {}", sh_quote(py), sh_quote(&script));
    let bare = w.bare(&snippet);
    let sb = w.sandboxed(&snippet);
    let full = suite_level(&w) == "full";
    assert!(
        sb.stdout.contains(STARTED),
        "sandboxed command did not run{}",
        sb.describe()
    );
    for fam in ["inet", "inet_dgram", "inet6", "netlink", "netlink_audit", "netlink_uevent"] {
        if !bare.stdout.contains(&format!("CREATED {fam}\n")) {
            skip(
                name,
                &format!(
                    "bare run cannot create a {fam} socket here, not checked{}",
                    bare.describe()
                ),
            );
            continue;
        }
        // At Full the sandbox has its own network namespace (only lo): TCP and UDP sockets may be
        // created there (local servers), and what they reach is checked from outside by
        // `full_level_inet_reaches_nothing_outside`. Routing netlink sockets may be created at
        // every level (getifaddrs: at Full it sees only lo; at Standard what /sys/class/net and
        // /proc/net already show; without capabilities nothing can be changed, which the escape
        // corpus's netlink-route-add-address checks on the host's lo). Every other netlink
        // family stays refused everywhere.
        // TCP stream sockets may be created at Standard too where the runner answers bind,
        // listen and connect (loopback only, only to the sandbox's own listeners: the escape
        // corpus's tcp-* vectors check that from outside); UDP stays refused there.
        if (full && !fam.starts_with("netlink")) || fam == "netlink" || fam == "inet" || fam == "inet6" {
            continue;
        }
        assert!(
            sb.stdout.contains(&format!("FAILED {fam} errno=1\n")),
            "{fam} socket: expected EPERM (errno=1) inside the sandbox{}",
            sb.describe()
        );
    }
}

/// Calls the seccomp filter refuses answer EPERM inside: a raw socket, process_vm_readv and
/// ptrace of the parent, io_uring_setup, and (x86_64) a call through the x32 ABI. The corpus's
/// raw-socket-udp, process-vm-readv-ancestor-secret, ptrace-poke-ancestor, io-uring-* and
/// x32-abi-connect vectors check from outside that none of them has an effect.
#[test]
fn refused_calls_answer_eperm() {
    let name = "refused_calls_answer_eperm";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    let script = w.ws_file(
        "refused.py",
        r#"import ctypes, os, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.process_vm_readv.restype = ctypes.c_ssize_t
def report(name, r, e):
    print("%s r=%d errno=%d" % (name, r, e), flush=True)
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    report("raw_socket", 0, 0)
except OSError as e:
    report("raw_socket", -1, e.errno)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(16)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 16)
remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 16)
r = libc.process_vm_readv(os.getppid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
report("process_vm_readv", r, ctypes.get_errno())
r = libc.ptrace(16, os.getppid(), None, None)
e = ctypes.get_errno()
if r == 0:
    os.waitpid(os.getppid(), 0x40000000)
    libc.ptrace(17, os.getppid(), None, None)
report("ptrace_attach", r, e)
params = ctypes.create_string_buffer(120)
r = libc.syscall(425, 8, params)
report("io_uring_setup", r, ctypes.get_errno())
if platform.machine() == "x86_64":
    r = libc.syscall(0x40000000 + 39)
    report("x32_getpid", r, ctypes.get_errno())
"#,
    );
    // The trailing echo keeps bash from exec'ing python: its parent is then the shell.
    let snippet = format!("echo {STARTED}; {} {}; echo done", sh_quote(py), sh_quote(&script));
    let sb = w.sandboxed(&snippet);
    assert!(sb.stdout.contains(STARTED), "sandboxed command did not run{}", sb.describe());
    let mut calls = vec!["raw_socket", "process_vm_readv", "ptrace_attach", "io_uring_setup"];
    if cfg!(target_arch = "x86_64") {
        calls.push("x32_getpid");
    }
    for call in calls {
        assert!(sb.stdout.contains(&format!("{call} r=-1 errno=1\n")), "{call}: expected EPERM inside the sandbox{}", sb.describe());
    }
}

/// Issue 54 item 6: a refused write outside the workspace is reported after the run with the
/// protection and the flag that allows it — checked from outside (nothing was written), and the
/// flag it names, given, lets the same command write there. `sandbox explain --path` says the
/// same of that directory.
#[test]
fn a_refused_write_names_the_flag_that_allows_it() {
    let w = World::new();
    if protection_state(&w, "fs-write-outside") != "enforced" {
        eprintln!("SKIP a_refused_write_names_the_flag_that_allows_it: fs-write-outside is not enforced at {}", suite_level(&w));
        return;
    }
    let target = w.outside.join("made.txt");
    let cmd = format!("echo x > {}", sh_quote(&target));
    let (o, v) = w.sandboxed_json(&[], &cmd);
    assert!(!target.exists(), "the write was refused: checked from outside{}", o.describe());
    let refusals = v["refusals"].as_array().cloned().unwrap_or_default();
    let r = refusals.iter().find(|r| r["path"] == target.display().to_string()).unwrap_or_else(|| panic!("no refusal for {}: {v:#}", target.display()));
    let allow = r["allow"].as_str().unwrap_or_default();
    let flag = format!("--allow-write {}", w.outside.display());
    assert!(allow.contains(&flag), "{r}");
    assert!(["fs-write-outside", "fs-read-outside"].contains(&r["protection"].as_str().unwrap_or_default()), "{r}");
    // The human report says the same.
    let plain = w.sandboxed(&cmd);
    assert!(plain.stderr.contains(&flag) && plain.stderr.contains("refused"), "{}", plain.describe());
    // With the flag it names, the write lands.
    let granted = w.sandboxed_with(&["--allow-write", &w.outside.display().to_string()], &cmd);
    assert_eq!(std::fs::read_to_string(&target).ok().as_deref(), Some("x\n"), "{}", granted.describe());
    let e = run(w.localgpt_cmd(&["sandbox", "explain", "--json", "--workspace", &w.ws.display().to_string(), "--path", &w.outside.display().to_string()]), "explain --path");
    let ev = parse_one_json(&e);
    assert_eq!(ev["paths"][0]["write"], false, "{ev:#}");
    assert!(ev["paths"][0]["allow"].as_str().is_some_and(|a| a.contains(&flag)), "{ev:#}");
}

/// A name lookup that fails because of the network policy says how to allow it (issue 58): under
/// a denied network, the allowlist flag; at Standard under an allowlist (no DNS stub there),
/// which tools resolve through the proxy and what resolves names itself. The lookup also runs
/// bare, where it is not refused by the sandbox (its result there depends on the machine's
/// resolver; only the sandbox's hint is checked).
#[test]
fn a_failed_name_lookup_says_how_to_allow_it() {
    let name = "a_failed_name_lookup_says_how_to_allow_it";
    let Some(py) = python3_or_skip(name) else { return };
    let w = World::new();
    let lookup = format!("{} -c \"import socket; socket.getaddrinfo('example.com', 443)\"", sh_quote(py));
    let (o, v) = w.sandboxed_json(&[], &lookup);
    assert_ne!(o.code(), Some(0), "the lookup failed inside{}", o.describe());
    let hints = v["hints"].as_array().cloned().unwrap_or_default();
    assert!(hints.iter().any(|h| h.as_str().is_some_and(|h| h.contains("--network allowlist --allow-domain"))), "{v:#}");
    let plain = w.sandboxed(&lookup);
    assert!(plain.stderr.contains("a name lookup failed") && plain.stderr.contains("--allow-domain"), "{}", plain.describe());
    // Standard under an allowlist: the stub answers over TCP (`RES_OPTIONS=use-vc`, the connect
    // to the resolver captured): an allowed name resolves to the stub's address; one not allowed
    // fails, and the refusal is the run's network record (its own hint), not a generic one.
    let (o, v) = w.sandboxed_json(&["--level", "standard", "--network", "allowlist", "--allow-domain", "example.com"], &lookup);
    if v["level"] == "standard" {
        assert_eq!(o.code(), Some(0), "an allowed name resolves at Standard{}", o.describe());
        let denied = format!("{} -c \"import socket; socket.getaddrinfo('other.example.org', 443)\"", sh_quote(py));
        let (o, v) = w.sandboxed_json(&["--level", "standard", "--network", "allowlist", "--allow-domain", "example.com"], &denied);
        assert_ne!(o.code(), Some(0), "{}", o.describe());
        let refused = v["network"].as_array().cloned().unwrap_or_default();
        assert!(refused.iter().any(|e| e["via"] == "dns" && e["host"] == "other.example.org" && e["allowed"] == false), "{v:#}");
        let hints = v["hints"].as_array().cloned().unwrap_or_default();
        assert!(!hints.iter().any(|h| h.as_str().is_some_and(|h| h.contains("Full level"))), "{v:#}");
    } else {
        eprintln!("SKIP {name} (allowlist part): the run was not at Standard here: {}", v["level"]);
    }
}
