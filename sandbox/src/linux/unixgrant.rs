//! The runner's answers to the command's `connect` and `listen` calls (seccomp user
//! notification): the sandbox's own unix servers, and granted host sockets
//! (`--allow-unix-socket`).
//!
//! Where the runner can answer ([`super::probe::check_support`]), the command's seccomp filter sends every
//! `connect` and `listen` to it (the helper passes the filter's listener to the runner with its
//! report and keeps no copy). For each call the runner:
//!
//! 1. reads the address from the command's memory once (`process_vm_readv`) and checks that the
//!    notification is still pending (the pid was not reused);
//! 2. takes a duplicate of the command's socket (`pidfd_getfd`) and asks *it* what it is
//!    (`SO_DOMAIN`, `SO_TYPE`, `getsockname`): never the arguments, which another thread of the
//!    command may change after the check;
//! 3. `bind` (host's network namespace only: Standard, Minimal, `network = "full"`): an abstract
//!    unix name is bound
//!    by the runner itself, under the run's random prefix (`lgsbx-<id>/`), so that the command
//!    can never hold a well-known name a host client connects to (an X server's, a D-Bus bus's);
//!    `connect` to an abstract name gets the same prefix, which keeps the command's own servers
//!    working. Anything else is made by the kernel as asked (`CONTINUE`: a pathname under
//!    Landlock's rules), and checked again at `listen`.
//!    `listen`: makes the call itself and records the socket (its sockfs inode) as one of the
//!    sandbox's own listeners. In the host's network namespace it refuses a socket bound to an
//!    abstract name outside the run's prefix;
//! 4. `connect` on a unix socket: a granted path (compared byte for byte with the path as given or
//!    its canonical form) goes to the socket held open since before the run. Any other path is
//!    opened as the command sees it (`/proc/PID/root` or `/proc/PID/cwd`, `openat2`
//!    `RESOLVE_IN_ROOT`), and is connected to only when the socket file is bound to one of the
//!    recorded listeners that still listens (`sock_diag` `UNIX_DIAG_VFS`, asked in the
//!    listener's network namespace) — through that open descriptor, so that replacing the path
//!    after the check reaches nothing else. An abstract name is connected to as asked in the
//!    sandbox's own network namespace (Full), which scopes abstract names, and under the run's
//!    prefix in the host's. Under `--network allowlist` a TCP connect to any address but loopback
//!    is captured: the runner connects the socket to the proxy instead, recording the destination
//!    asked for ([`super::capture`]). A TCP, UDP or netlink socket in the sandbox's own namespace,
//!    or with `network = "full"`, is otherwise connected as asked; in the host's namespace
//!    otherwise only TCP reaches anything: the allowlist's proxy, or one of the sandbox's own
//!    loopback listeners (recorded at `listen`, still listening in `/proc/net/tcp`);
//! 5. answers with the result. Nothing is ever "continued" in the kernel: the call that runs is
//!    always the runner's own, with its own copy of the address, so swapping the memory or the
//!    descriptor after the check changes nothing.
//!
//! The listener stays in the runner; a process that outlives the run gets `ENOSYS` from
//! `connect` and `listen` once the runner closes it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use crate::error::SandboxError;
use crate::plan::UnixSocketGrant;

use super::probe::open_beneath;

/// The runner's side of one run: the granted sockets, the `sock_diag` socket of the host's
/// namespace and the run's abstract-name prefix. The granted sockets are each held open
/// (`O_PATH`) from before the command starts:
/// the runner connects to `/proc/self/fd/N`, the socket the user granted, even if the command
/// later replaces the path (a grant in a directory it may write: the workspace, the host's
/// `/tmp` at Standard) with a link to another socket.
pub(crate) struct Granted {
    grants: Vec<(UnixSocketGrant, OwnedFd)>,
    /// `sock_diag` in the host's network namespace (Standard, Minimal: the command's too); at
    /// Full PID 1 passes one made in the sandbox's namespace.
    host_diag: Option<OwnedFd>,
    /// The run's own abstract-name prefix (`lgsbx-<random>/`): in the host's network namespace
    /// every abstract name the command binds or connects to is put under it.
    prefix: Vec<u8>,
    /// `--network allowlist` in the host's network namespace: the address of the runner's proxy
    /// (the one TCP destination besides the sandbox's own listeners), and its listening socket
    /// until the supervisor takes it to serve it.
    host_proxy: Option<std::net::SocketAddr>,
    host_proxy_listener: std::sync::Mutex<Option<std::net::TcpListener>>,
    /// The command's TCP/UDP sockets live in its own network namespace (Full level): their
    /// `connect` is made as asked. In the host's namespace only loopback TCP between its own
    /// processes, unless `open_network`.
    own_netns: bool,
    /// `network = "full"`: the host's network namespace, open; TCP and UDP calls are made as
    /// asked (unix sockets are still the runner's to decide).
    open_network: bool,
    /// `--network allowlist`: a TCP connect to anything but loopback is captured to the proxy at
    /// this address ([`super::capture`]), recorded in the run's capture state.
    capture: Option<(Arc<super::capture::Capture>, std::net::SocketAddr)>,
}

impl Granted {
    /// Opens every granted socket.
    ///
    /// # Errors
    /// [`SandboxError::Setup`] when one is gone or is no longer a socket.
    /// `allowlist`: `--network allowlist` (TCP connects outside loopback are then captured to the
    /// proxy: the sandbox's own at Full, `host_proxy` in the host's network namespace).
    pub(crate) fn open(grants: &[UnixSocketGrant], own_netns: bool, open_network: bool, allowlist: bool, host_proxy: Option<std::net::TcpListener>) -> Result<Granted, SandboxError> {
        use std::os::unix::ffi::OsStrExt;
        let mut out = Vec::new();
        for g in grants {
            let c = std::ffi::CString::new(g.path.as_os_str().as_bytes()).map_err(|_| SandboxError::Setup(format!("granted socket {}: NUL in path", g.path.display())))?;
            // SAFETY: a valid C string; the descriptor is owned below.
            let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(SandboxError::Setup(format!("granted socket {}: {}", g.path.display(), std::io::Error::last_os_error())));
            }
            // SAFETY: just opened.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            if !fstat(&fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFSOCK) {
                return Err(SandboxError::Setup(format!("granted socket {}: not a unix socket any more", g.path.display())));
            }
            out.push((g.clone(), fd));
        }
        let host_diag = if own_netns { None } else { Some(diag_socket().map_err(|e| SandboxError::Setup(format!("sock_diag socket: {e}")))?) };
        let mut id = [0u8; 6];
        crate::rand::fill(&mut id);
        let prefix = format!("lgsbx-{}/", id.iter().map(|b| format!("{b:02x}")).collect::<String>()).into_bytes();
        let proxy_addr = match &host_proxy {
            Some(l) => Some(l.local_addr().map_err(|e| SandboxError::Setup(format!("proxy socket: {e}")))?),
            None => None,
        };
        let capture_to = if own_netns { Some(std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, crate::network::PROXY_PORT))) } else { proxy_addr };
        let capture = capture_to.filter(|_| allowlist && !open_network).map(|a| (Arc::default(), a));
        Ok(Granted { grants: out, host_diag, prefix, host_proxy: proxy_addr, host_proxy_listener: std::sync::Mutex::new(host_proxy), own_netns, open_network, capture })
    }

    /// The run's capture state, where connects are captured (the DNS stub and the proxy share it).
    pub(crate) fn capture(&self) -> Option<Arc<super::capture::Capture>> {
        self.capture.as_ref().map(|(c, _)| Arc::clone(c))
    }

    /// The proxy's listening socket on the host's loopback, once (the supervisor serves it).
    pub(crate) fn take_host_proxy(&self) -> Option<OwnedFd> {
        self.host_proxy_listener.lock().ok()?.take().map(OwnedFd::from)
    }
}

/// Answers the command's `connect` and `listen` calls until `stop` (a pipe's read end) reports
/// hang-up or the listener has no more processes. Runs on its own thread in the runner.
/// `ns_diag`: a `sock_diag` socket of the sandbox's own network namespace (Full), from PID 1.
/// `root`: the helper (at Standard and Minimal the supervisor): the calls on other processes
/// the filter sends here may proceed only on the sandbox's own tree (`linux::procguard`).
pub(crate) fn serve(listener: OwnedFd, granted: &Granted, ns_diag: Option<OwnedFd>, stop: i32, root: i32) {
    let listener = Arc::new(listener);
    let diag = if granted.own_netns { ns_diag.as_ref() } else { granted.host_diag.as_ref() };
    // The sandbox's own listening unix sockets (sockfs inode numbers), and in the host's network
    // namespace its TCP listeners (sockfs inode, loopback address, port).
    let mut own: Vec<u32> = Vec::new();
    let mut tcp: Vec<OwnTcp> = Vec::new();
    loop {
        match crate::linux::wait_or_stop(listener.as_raw_fd(), stop) {
            Some(r) if r & libc::POLLIN != 0 => {}
            _ => return, // the run ended, or POLLHUP: every process of the filter is gone
        }
        // SAFETY: an all-zero seccomp_notif is what SECCOMP_IOCTL_NOTIF_RECV requires.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl fills `req`.
        if unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) } != 0 {
            continue; // the caller went away (ENOENT) or was interrupted
        }
        // Calls on other processes (scheduling; signals below Landlock ABI 6).
        if crate::linux::procguard::answer(&listener, &req, root, |fd| take_fd(&listener, &req, fd), |r| respond(&listener, req.id, r)) {
            continue;
        }
        if req.data.nr == libc::SYS_listen as i32 {
            let r = listen_for(&listener, &req, granted, diag, &mut own, &mut tcp);
            respond(&listener, req.id, r);
            continue;
        }
        if req.data.nr == libc::SYS_bind as i32 {
            match bind_for(&listener, &req, granted) {
                Some(r) => respond(&listener, req.id, r),
                None => crate::linux::procguard::continue_call(&listener, req.id),
            }
            continue;
        }
        let target = take_socket(&listener, &req).and_then(|(sock, addr, kind)| {
            let t = match kind {
                Kind::Unix => match granted_path(&addr, &granted.grants) {
                    Some(p) => Target::Unix(p),
                    None => own_listener(&listener, &req, &addr, granted, diag, &mut own)?,
                },
                Kind::Tcp if let Some(t) = captured_target(granted, &req, &addr) => t,
                Kind::Tcp | Kind::Other if granted.own_netns || granted.open_network => Target::Raw(addr),
                Kind::Tcp => own_tcp_listener(&addr, granted.host_proxy, &tcp)?,
                Kind::Other => return Err(libc::EPERM),
            };
            Ok((sock, t))
        });
        let (sock, target) = match target {
            Ok(t) => t,
            Err(errno) => {
                respond(&listener, req.id, Err(errno));
                continue;
            }
        };
        // A connect may block (a full backlog): each runs on its own thread, at most
        // MAX_IN_FLIGHT at once; beyond that the command gets EAGAIN, as from a full backlog.
        let (l, id) = (Arc::clone(&listener), req.id);
        let started = crate::linux::spawn_bounded(&IN_FLIGHT, MAX_IN_FLIGHT, "lg-connect", 64 << 10, move || {
            let r = match &target {
                Target::Unix(p) => connect_unix(&sock, p),
                Target::Held(fd) => connect_unix(&sock, format!("/proc/self/fd/{}", fd.as_raw_fd()).as_bytes()),
                Target::Raw(a) => connect_raw(&sock, a),
                Target::Captured { capture, proxy, dest } => capture_connect(&sock, capture, *proxy, *dest),
            };
            respond(&l, id, r);
        });
        if !started {
            respond(&listener, req.id, Err(libc::EAGAIN));
        }
    }
}

/// `listen` (step 3 of the module docs): the runner's own call on the command's socket.
fn listen_for(listener: &OwnedFd, req: &libc::seccomp_notif, granted: &Granted, diag: Option<&OwnedFd>, own: &mut Vec<u32>, tcp: &mut Vec<OwnTcp>) -> Result<i64, i32> {
    let own_netns = granted.own_netns;
    let sock = take_fd(listener, req, req.data.args[0] as i32)?;
    let backlog = req.data.args[1] as i32;
    let unix = match kind(&sock)? {
        Kind::Unix => true,
        Kind::Tcp | Kind::Other if own_netns || granted.open_network => false,
        Kind::Tcp => return listen_tcp(&sock, backlog, tcp),
        Kind::Other => return Err(libc::EPERM),
    };
    if unix && !own_netns {
        // An abstract name lives in the host's network namespace: a host client connecting to a
        // well-known name (an X server's, a D-Bus bus's) would talk to the command. Only names
        // under the run's own prefix (bound by the runner, see `bind_for`) may listen.
        let name = sock_name(&sock).ok_or(libc::EPERM)?;
        if name.len() > 2 && name[2] == 0 && !name[3..].starts_with(&granted.prefix) {
            return Err(libc::EPERM);
        }
    }
    // SAFETY: listen on our duplicate of the caller's socket.
    if unsafe { libc::listen(sock.as_raw_fd(), backlog) } != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    if unix {
        let ino = fstat(&sock).map_err(|_| libc::EIO)?.st_ino as u32;
        remember(own, ino, |&l| l == ino, |&l| diag.is_none_or(|d| unix_diag_vfs(d, l) != Some(Diag::Gone)))?;
    }
    Ok(0)
}

/// Records a listener in a run's list, which stays bounded: once it grows, the ones that are
/// `alive` no more are forgotten, and past [`MAX_OWN`] the call fails (the runner's memory is not
/// the command's to fill).
fn remember<T>(list: &mut Vec<T>, item: T, same: impl Fn(&T) -> bool, alive: impl FnMut(&T) -> bool) -> Result<(), i32> {
    if list.len() >= MAX_OWN / 4 {
        list.retain(alive);
    }
    if !list.iter().any(same) {
        if list.len() >= MAX_OWN {
            return Err(libc::ENOBUFS);
        }
        list.push(item);
    }
    Ok(())
}

/// A unix `connect` to anything but a granted socket (step 4 of the module docs): the target
/// when it is one of the sandbox's own listeners; `Err(errno)` otherwise.
fn own_listener(listener: &OwnedFd, req: &libc::seccomp_notif, addr: &[u8], granted: &Granted, diag: Option<&OwnedFd>, own: &mut Vec<u32>) -> Result<Target, i32> {
    let Some(path) = unix_path(addr) else {
        // An abstract (or unnamed) address: the sandbox's own network namespace scopes abstract
        // names, so there any name is one of its own sockets; in the host's, the name is put
        // under the run's prefix, where only the command's own listeners are.
        return if granted.own_netns || addr.len() <= 2 { Ok(Target::Raw(addr.to_vec())) } else { Ok(Target::Raw(prefixed(addr, &granted.prefix)?)) };
    };
    let diag = diag.ok_or(libc::EPERM)?;
    let absolute = path.first() == Some(&b'/');
    let base = format!("/proc/{}/{}\0", req.pid, if absolute { "root" } else { "cwd" });
    // SAFETY: a NUL-terminated path; the descriptor is owned below.
    let dir = unsafe { libc::open(base.as_ptr().cast(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if dir < 0 {
        return Err(libc::EPERM);
    }
    // SAFETY: just opened.
    let dir = unsafe { OwnedFd::from_raw_fd(dir) };
    if !id_valid(listener, req.id) {
        return Err(libc::EPERM); // the pid was reused: that is not the caller's view
    }
    let target = open_beneath(dir.as_raw_fd(), path, absolute)?;
    let st = fstat(&target).map_err(|_| libc::EPERM)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(libc::ECONNREFUSED); // what the kernel answers for a file that is no socket
    }
    // sock_diag reports 32 bits of the file's inode number: a longer one cannot be compared.
    let Ok(ino) = u32::try_from(st.st_ino) else { return Err(libc::EPERM) };
    let (major, minor) = (libc::major(st.st_dev), libc::minor(st.st_dev));
    let mut found = false;
    own.retain(|&l| match unix_diag_vfs(diag, l) {
        Some(Diag::Gone) => false,
        Some(Diag::Found { vfs: Some((dev, vino)), listening: true }) => {
            found |= vino == ino && dev >> 20 == major && dev & 0xf_ffff == minor;
            true
        }
        _ => true,
    });
    if found { Ok(Target::Held(target)) } else { Err(libc::EPERM) }
}

/// `bind` in the host's network namespace: an abstract unix name is bound by the runner itself,
/// under the run's prefix (`Some(result)`); everything else is made by the kernel as asked
/// (`None`: continue) — a pathname under Landlock's rules, and whatever the command's memory
/// says by then is checked again at `listen`, the only way a stream socket becomes reachable.
fn bind_for(listener: &OwnedFd, req: &libc::seccomp_notif, granted: &Granted) -> Option<Result<i64, i32>> {
    let (sock, addr, kind) = match take_socket(listener, req) {
        Ok(t) => t,
        Err(e) => return Some(Err(e)),
    };
    if matches!(kind, Kind::Tcp) && !granted.own_netns && !granted.open_network {
        return Some(bind_tcp(&sock, &addr));
    }
    if !matches!(kind, Kind::Unix) || addr.len() <= 2 || addr[2] != 0 {
        return None;
    }
    Some(prefixed(&addr, &granted.prefix).and_then(|a| bind_raw(&sock, &a)))
}

/// `bind` of our duplicate of the caller's socket to a raw address.
fn bind_raw(sock: &OwnedFd, a: &[u8]) -> Result<i64, i32> {
    // SAFETY: binding our duplicate of the caller's socket to an address of `a.len()` bytes.
    let r = unsafe { libc::bind(sock.as_raw_fd(), a.as_ptr().cast(), a.len() as libc::socklen_t) };
    if r == 0 { Ok(0) } else { Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)) }
}

/// One of the sandbox's TCP listeners in the host's network namespace.
struct OwnTcp {
    ino: u64,
    /// Loopback, or the wildcard (with [`LOOPBACK_ONLY`] locked on the socket).
    ip: std::net::IpAddr,
    port: u16,
    /// An IPv6 wildcard listener takes no IPv4 connection (`IPV6_V6ONLY`).
    v6only: bool,
}

impl OwnTcp {
    /// A connection to `ip:port` reaches this listener: the same address, or loopback of a
    /// family the wildcard takes (an IPv6 wildcard takes IPv4 unless `IPV6_V6ONLY`).
    fn takes(&self, ip: std::net::IpAddr, port: u16) -> bool {
        use std::net::IpAddr::{V4, V6};
        self.port == port
            && (self.ip == ip
                || ip.is_loopback()
                    && match self.ip {
                        V4(w) => w.is_unspecified() && ip.is_ipv4(),
                        V6(w) => w.is_unspecified() && (ip.is_ipv6() || !self.v6only),
                    })
    }
}

/// `SKF_NET_OFF`: a classic BPF load relative to the packet's network header.
const NET: u32 = 0xfff0_0000;

/// A socket filter that keeps the packets whose source is loopback (`127.0.0.0/8` for IPv4,
/// `::1` for IPv6) and drops every other. Run by the kernel on a listening TCP socket for the
/// connection's first packets and inherited by every accepted one, it makes a wildcard listener
/// (`0.0.0.0`, `::`) reachable from this machine's loopback only: what a dual-stack server
/// needs, with nothing reachable from the network. The kernel itself drops a packet with a
/// loopback source that arrives on another interface (a martian source).
const LOOPBACK_ONLY: [libc::sock_filter; 17] = {
    const fn op(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
        libc::sock_filter { code: code as u16, jt, jf, k }
    }
    const LDB: u32 = libc::BPF_LD | libc::BPF_B | libc::BPF_ABS;
    const LDW: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    const RSH: u32 = libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K;
    const AND: u32 = libc::BPF_ALU | libc::BPF_AND | libc::BPF_K;
    const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    const RET: u32 = libc::BPF_RET | libc::BPF_K;
    [
        op(LDB, NET, 0, 0),             // 0: the IP version
        op(RSH, 4, 0, 0),               // 1
        op(JEQ, 4, 1, 0),               // 2: IPv4 → 4
        op(JEQ, 6, 3, 12),              // 3: IPv6 → 7, else drop
        op(LDW, NET + 12, 0, 0),        // 4: IPv4 source
        op(AND, 0xff00_0000, 0, 0),     // 5
        op(JEQ, 0x7f00_0000, 8, 9),     // 6: 127/8 → keep, else drop
        op(LDW, NET + 8, 0, 0),         // 7: IPv6 source, four words: ::1
        op(JEQ, 0, 0, 7),               // 8
        op(LDW, NET + 12, 0, 0),        // 9
        op(JEQ, 0, 0, 5),               // 10
        op(LDW, NET + 16, 0, 0),        // 11
        op(JEQ, 0, 0, 3),               // 12
        op(LDW, NET + 20, 0, 0),        // 13
        op(JEQ, 1, 0, 1),               // 14: ::1 → keep, else drop
        op(RET, u32::MAX, 0, 0),        // 15: keep (the whole packet)
        op(RET, 0, 0, 0),               // 16: drop
    ]
};

/// The IP address and port of a raw `sockaddr_in`/`sockaddr_in6` (IPv4-mapped IPv6 addresses as
/// IPv4); `None` when it is neither or too short.
fn inet_addr(a: &[u8]) -> Option<(std::net::IpAddr, u16)> {
    let family = i32::from(u16::from_ne_bytes([*a.first()?, *a.get(1)?]));
    let port = u16::from_be_bytes([*a.get(2)?, *a.get(3)?]);
    if family == libc::AF_INET {
        let o: [u8; 4] = a.get(4..8)?.try_into().ok()?;
        return Some((std::net::IpAddr::from(o), port));
    }
    if family == libc::AF_INET6 {
        let o: [u8; 16] = a.get(8..24)?.try_into().ok()?;
        let v6 = std::net::Ipv6Addr::from(o);
        return Some((v6.to_ipv4_mapped().map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4), port));
    }
    None
}

/// `bind` of a TCP socket in the host's network namespace: to a loopback address as asked; to
/// the wildcard (`0.0.0.0`, `::`, a dual-stack server's default) as asked once [`LOOPBACK_ONLY`]
/// is locked on the socket, so that it takes connections from this machine's loopback only; to
/// any other address never (`EPERM`): a listener there would take connections from the network.
///
/// Where the filter cannot be attached (a kernel or security module that refuses socket filters
/// on TCP sockets to this user, or a filter the command locked first), the wildcard becomes
/// loopback instead ([`loopback_for`]): a dual-stack socket then takes `127.0.0.1`, not `::1`.
fn bind_tcp(sock: &OwnedFd, a: &[u8]) -> Result<i64, i32> {
    let (ip, _) = inet_addr(a).ok_or(libc::EINVAL)?;
    if ip.is_unspecified() && lock_loopback_only(sock).is_err() {
        return bind_raw(sock, &loopback_for(sock, a));
    }
    if !ip.is_loopback() && !ip.is_unspecified() {
        return Err(libc::EPERM);
    }
    bind_raw(sock, a)
}

/// The loopback address a wildcard bind address `a` becomes without the filter: `127.0.0.1`
/// for IPv4 (and IPv4-mapped), `::ffff:127.0.0.1` for a dual-stack IPv6 socket (what clients
/// that name `127.0.0.1` or `localhost` reach), `::1` for an IPv6-only one.
fn loopback_for(sock: &OwnedFd, a: &[u8]) -> Vec<u8> {
    let mut out = a.to_vec();
    if i32::from(u16::from_ne_bytes([a[0], a[1]])) == libc::AF_INET {
        out[4..8].copy_from_slice(&[127, 0, 0, 1]);
    } else if a[8..24] == [0; 16] && crate::linux::sockopt_at(sock, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) != Some(0) {
        out[8..24].copy_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    } else {
        out[8..24].copy_from_slice(&std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped().octets());
    }
    out
}

/// Attaches [`LOOPBACK_ONLY`] to the socket and locks it (`SO_LOCK_FILTER`: the command can
/// neither detach nor replace it); `EPERM` when a filter the command locked is there already.
fn lock_loopback_only(sock: &OwnedFd) -> Result<(), i32> {
    let prog = libc::sock_fprog { len: LOOPBACK_ONLY.len() as u16, filter: LOOPBACK_ONLY.as_ptr().cast_mut() };
    // SAFETY: the program outlives the call; the kernel copies it.
    let r = unsafe { libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, (&prog as *const libc::sock_fprog).cast(), std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t) };
    if r != 0 || crate::linux::set_sockopt_int(sock, libc::SOL_SOCKET, SO_LOCK_FILTER, 1).is_err() {
        return Err(libc::EPERM);
    }
    Ok(())
}

/// `SO_LOCK_FILTER` (asm-generic; the same on x86_64 and aarch64).
const SO_LOCK_FILTER: i32 = 44;

/// The socket's filter is [`LOOPBACK_ONLY`], locked.
fn has_loopback_only(sock: &OwnedFd) -> bool {
    let mut got = [libc::sock_filter { code: 0, jt: 0, jf: 0, k: 0 }; 32];
    let mut len = got.len() as libc::socklen_t; // SO_GET_FILTER counts instructions
    // SAFETY: the kernel writes at most `len` instructions into `got`.
    let r = unsafe { libc::getsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, got.as_mut_ptr().cast(), &mut len) };
    let same = |a: &libc::sock_filter, b: &libc::sock_filter| (a.code, a.jt, a.jf, a.k) == (b.code, b.jt, b.jf, b.k);
    r == 0
        && len as usize == LOOPBACK_ONLY.len()
        && got.iter().zip(&LOOPBACK_ONLY).all(|(a, b)| same(a, b))
        && crate::linux::sockopt(sock, SO_LOCK_FILTER) == Some(1)
}

/// `listen` on a TCP socket in the host's network namespace: a socket bound to loopback, or to
/// the wildcard with [`LOOPBACK_ONLY`] locked on it; a socket never bound (which the kernel
/// would bind to the wildcard) gets the filter first; any other is refused. The listener is
/// recorded.
fn listen_tcp(sock: &OwnedFd, backlog: i32, tcp: &mut Vec<OwnTcp>) -> Result<i64, i32> {
    let name = sock_name(sock).ok_or(libc::EPERM)?;
    let (mut ip, mut port) = inet_addr(&name).ok_or(libc::EPERM)?;
    if port == 0 && ip.is_unspecified() {
        bind_tcp(sock, &name)?;
        (ip, port) = sock_name(sock).as_deref().and_then(inet_addr).ok_or(libc::EPERM)?;
    }
    if !(ip.is_loopback() || ip.is_unspecified() && has_loopback_only(sock)) {
        return Err(libc::EPERM);
    }
    // SAFETY: listen on our duplicate of the caller's socket.
    if unsafe { libc::listen(sock.as_raw_fd(), backlog) } != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    let ino = fstat(sock).map_err(|_| libc::EIO)?.st_ino;
    let v6only = ip.is_ipv6() && crate::linux::sockopt_at(sock, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) != Some(0);
    remember(tcp, OwnTcp { ino, ip, port, v6only }, |l| l.ino == ino, tcp_listening)?;
    Ok(0)
}

/// `connect` of a TCP socket in the host's network namespace: only to the allowlist's proxy
/// (`proxy`) or to one of the sandbox's own listeners that still listens (`/proc/net/tcp`, by
/// inode and port); loopback without one is `ECONNREFUSED` (the host's own services stay
/// invisible), anything else `EPERM`.
fn own_tcp_listener(addr: &[u8], proxy: Option<std::net::SocketAddr>, tcp: &[OwnTcp]) -> Result<Target, i32> {
    let (ip, port) = inet_addr(addr).ok_or(libc::EINVAL)?;
    if proxy.is_some_and(|p| p.ip() == ip && p.port() == port) {
        return Ok(Target::Raw(addr.to_vec()));
    }
    if !ip.is_loopback() {
        return Err(libc::EPERM);
    }
    if tcp.iter().any(|l| l.takes(ip, port) && tcp_listening(l)) {
        Ok(Target::Raw(addr.to_vec()))
    } else {
        Err(libc::ECONNREFUSED)
    }
}

/// The listener is still in `/proc/self/net/tcp{,6}` (the runner's network namespace is the
/// host's, the command's) in state LISTEN, with its inode and port.
fn tcp_listening(l: &OwnTcp) -> bool {
    // An IPv4 listener on an IPv6 socket (IPv4-mapped) is listed in tcp6.
    let files: &[&str] = if l.ip.is_ipv4() { &["/proc/self/net/tcp", "/proc/self/net/tcp6"] } else { &["/proc/self/net/tcp6"] };
    files.iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| t.lines().skip(1).any(|line| proc_tcp_line_is(line, l.ino, l.port)))
    })
}

/// A `/proc/net/tcp` line is a listening socket with inode `ino` on `port`.
fn proc_tcp_line_is(line: &str, ino: u64, port: u16) -> bool {
    let f: Vec<&str> = line.split_whitespace().collect();
    let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else { return false };
    let p = local.rsplit(':').next().and_then(|h| u16::from_str_radix(h, 16).ok());
    *state == "0A" && p == Some(port) && inode.parse::<u64>().ok() == Some(ino)
}

/// An abstract unix address (`family`, NUL, name) with its name under `prefix` (unchanged when
/// it already is).
fn prefixed(addr: &[u8], prefix: &[u8]) -> Result<Vec<u8>, i32> {
    let name = &addr[3..];
    if name.starts_with(prefix) {
        return Ok(addr.to_vec());
    }
    let out: Vec<u8> = addr[..3].iter().chain(prefix).chain(name).copied().collect();
    if out.len() > std::mem::size_of::<libc::sockaddr_un>() {
        return Err(libc::ENAMETOOLONG);
    }
    Ok(out)
}

/// The most listening unix (and, apart, TCP) sockets of one run the runner keeps track of.
const MAX_OWN: usize = 4096;

/// Connects the runner is making for commands (all runs of this process).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Bound on [`IN_FLIGHT`].
const MAX_IN_FLIGHT: usize = 64;

/// What to connect a command's socket to.
enum Target {
    /// A granted host socket (`/proc/self/fd/N` of the one held open).
    Unix(Vec<u8>),
    /// One of the sandbox's own listeners, held open (`O_PATH`) since it was checked.
    Held(OwnedFd),
    /// The address as read (a socket of the sandbox's own network namespace).
    Raw(Vec<u8>),
    /// A TCP destination outside loopback, under the allowlist: the proxy instead
    /// ([`super::capture`]).
    Captured { capture: Arc<super::capture::Capture>, proxy: std::net::SocketAddr, dest: std::net::SocketAddr },
}

/// The target of a TCP `connect` to `addr` when the run captures it (an allowlist, an address
/// outside loopback): the run's capture state, its proxy and the destination asked for.
fn captured_target(granted: &Granted, req: &libc::seccomp_notif, addr: &[u8]) -> Option<Target> {
    let (capture, proxy) = granted.capture.as_ref()?;
    let (ip, port) = inet_addr(addr).filter(|&(ip, port)| req.data.nr == libc::SYS_connect as i32 && super::capture::captured(ip, port))?;
    Some(Target::Captured { capture: Arc::clone(capture), proxy: *proxy, dest: std::net::SocketAddr::new(ip, port) })
}

/// A captured `connect` ([`super::capture`]): the command's socket, bound to a loopback port
/// if it has none yet (as the kernel would bind it at `connect`), is recorded with `dest` and
/// connected to the proxy at `proxy`. An IPv6 socket reaches it at `::ffff:127.0.0.1`; an
/// IPv6-only one cannot, and gets the error the kernel gives.
fn capture_connect(sock: &OwnedFd, capture: &super::capture::Capture, proxy: std::net::SocketAddr, dest: std::net::SocketAddr) -> Result<i64, i32> {
    let name = sock_name(sock).ok_or(libc::EBADF)?;
    let (_, mut port) = inet_addr(&name).ok_or(libc::EAFNOSUPPORT)?;
    if port == 0 {
        bind_raw(sock, &loopback_for(sock, &name))?;
        port = sock_name(sock).and_then(|n| inet_addr(&n)).map(|(_, p)| p).filter(|&p| p != 0).ok_or(libc::EADDRNOTAVAIL)?;
    }
    if !capture.expect(port, dest) {
        return Err(libc::EAGAIN);
    }
    let r = connect_raw(sock, &proxy_for(&name, proxy));
    if matches!(r, Err(e) if e != libc::EINPROGRESS) {
        capture.take(port);
    }
    r
}

/// `proxy` (an IPv4 address) as a `sockaddr` of the family of `like` (a socket's own address):
/// IPv4-mapped for an IPv6 socket.
fn proxy_for(like: &[u8], proxy: std::net::SocketAddr) -> Vec<u8> {
    let mut out = like.to_vec();
    out[2..4].copy_from_slice(&proxy.port().to_be_bytes());
    let v4 = match proxy.ip() {
        std::net::IpAddr::V4(v4) => v4,
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().unwrap_or(std::net::Ipv4Addr::LOCALHOST),
    };
    if i32::from(u16::from_ne_bytes([like[0], like[1]])) == libc::AF_INET {
        out[4..8].copy_from_slice(&v4.octets());
    } else {
        out[4..8].fill(0); // flow info
        out[8..24].copy_from_slice(&v4.to_ipv6_mapped().octets());
        out[24..28].fill(0); // scope
    }
    out
}

enum Kind {
    Unix,
    /// A TCP socket (IPv4 or IPv6).
    Tcp,
    Other,
}

/// The command's socket (a duplicate) and the address it passed to `connect` or `bind`, after the checks
/// of step 1 and 2 of the module docs; `Err(errno)` to answer with.
fn take_socket(listener: &OwnedFd, req: &libc::seccomp_notif) -> Result<(OwnedFd, Vec<u8>, Kind), i32> {
    if req.data.nr != libc::SYS_connect as i32 && req.data.nr != libc::SYS_bind as i32 {
        return Err(libc::EPERM);
    }
    let (fd, ptr, len) = (req.data.args[0] as i32, req.data.args[1], req.data.args[2] as usize);
    if len > std::mem::size_of::<libc::sockaddr_storage>() || len < 2 {
        return Err(libc::EINVAL);
    }
    let mut addr = vec![0u8; len];
    let local = libc::iovec { iov_base: addr.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: ptr as *mut _, iov_len: len };
    // SAFETY: reading `len` bytes of the caller's memory into our buffer of that size.
    let got = unsafe { libc::process_vm_readv(req.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if got != len as isize {
        return Err(libc::EFAULT);
    }
    if !id_valid(listener, req.id) {
        return Err(libc::EPERM); // the pid was reused: what we read is not the caller's
    }
    let sock = take_fd(listener, req, fd)?;
    let kind = kind(&sock)?;
    Ok((sock, addr, kind))
}

/// A duplicate of the caller's descriptor `fd` (`pidfd_getfd`), taken from the calling
/// *thread's* descriptor table and checked to be taken from the caller still waiting for this
/// answer.
///
/// The notification names a thread (`req.pid` is a tid), and a thread may have a table of its
/// own (`unshare(CLONE_FILES)`), so the descriptor is taken from that thread:
/// - through a pidfd of the thread itself (`PIDFD_THREAD`, Linux 6.9), whose `pidfd_getfd`
///   reads the thread's own table;
/// - on older kernels, a pidfd can only name a thread group: the descriptor is taken from the
///   group's leader, and used only when `kcmp(KCMP_FILE)` (or, without `kcmp`, the thread's own
///   `/proc/<tid>/fd/<fd>` for a socket) shows that it is the very file the thread's `fd` holds.
///
/// So a thread reaches exactly what the same call from the main thread reaches.
fn take_fd(listener: &OwnedFd, req: &libc::seccomp_notif, fd: i32) -> Result<OwnedFd, i32> {
    let sock = thread_fd(req.pid as libc::pid_t, fd, true)?;
    if !id_valid(listener, req.id) {
        return Err(libc::EPERM); // the tid was reused: what we took is not the caller's
    }
    Ok(sock)
}

/// Our duplicate of thread `tid`'s descriptor `fd` (see [`take_fd`]); `thread_pidfd: false`
/// takes the way of kernels before 6.9 on any kernel (tests).
fn thread_fd(tid: libc::pid_t, fd: i32, thread_pidfd: bool) -> Result<OwnedFd, i32> {
    match if thread_pidfd { pidfd_open(tid, PIDFD_THREAD) } else { Err(libc::EINVAL) } {
        Ok(pidfd) => getfd(&pidfd, fd),
        Err(libc::EINVAL) => {
            // Before 6.9 (an unknown flag): a pidfd of the thread group, checked below.
            let group = crate::linux::procguard::tgid(tid).ok_or(libc::EPERM)?;
            let sock = getfd(&pidfd_open(group, 0)?, fd)?;
            if group != tid && !same_file(tid, fd, &sock) {
                return Err(libc::EPERM);
            }
            Ok(sock)
        }
        Err(_) => Err(libc::EPERM),
    }
}

/// `pidfd_open`'s flag for a pidfd of one thread (`O_EXCL`; Linux 6.9).
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

/// `pidfd_open(pid, flags)`; `Err(errno)`.
fn pidfd_open(pid: libc::pid_t, flags: u32) -> Result<OwnedFd, i32> {
    // SAFETY: pidfd_open of a pid; the descriptor is owned below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) } as i32;
    if pidfd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM));
    }
    // SAFETY: just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(pidfd) })
}

/// `pidfd_getfd`: our duplicate of descriptor `fd` of the table `pidfd` leads to (`EBADF` as
/// the kernel said, anything else `EPERM`).
fn getfd(pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: duplicating the caller's descriptor into ours (ptrace access checked by the kernel).
    let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) } as i32;
    if sock < 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM);
        return Err(if e == libc::EBADF { libc::EBADF } else { libc::EPERM });
    }
    // SAFETY: just created, owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(sock) })
}

/// `kcmp`'s type for two descriptors.
const KCMP_FILE: i32 = 0;

/// Whether thread `tid`'s descriptor `fd` is the file `ours` is a duplicate of: `kcmp`, or where
/// the kernel has no `kcmp`, a socket's inode against the thread's own `/proc/<tid>/fd/<fd>`
/// (one inode per socket). Anything else is not shown to be the same.
fn same_file(tid: libc::pid_t, fd: i32, ours: &OwnedFd) -> bool {
    // SAFETY: kcmp compares two descriptors; no memory is passed.
    let r = unsafe { libc::syscall(libc::SYS_kcmp, tid, libc::getpid(), KCMP_FILE, fd as libc::c_ulong, ours.as_raw_fd() as libc::c_ulong) };
    if r == 0 {
        return true;
    }
    if r > 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
        return false;
    }
    let Ok(st) = fstat(ours) else { return false };
    st.st_mode & libc::S_IFMT == libc::S_IFSOCK
        && std::fs::read_link(format!("/proc/{tid}/fd/{fd}")).is_ok_and(|l| l.as_os_str().as_encoded_bytes() == format!("socket:[{}]", st.st_ino).as_bytes())
}

/// What the socket itself says it is.
fn kind(sock: &OwnedFd) -> Result<Kind, i32> {
    match (crate::linux::sockopt(sock, libc::SO_DOMAIN), crate::linux::sockopt(sock, libc::SO_TYPE)) {
        (Some(libc::AF_UNIX), Some(libc::SOCK_STREAM | libc::SOCK_SEQPACKET)) => Ok(Kind::Unix),
        (Some(libc::AF_INET | libc::AF_INET6), Some(libc::SOCK_STREAM)) => Ok(Kind::Tcp),
        // A unix datagram socket never reaches here (seccomp refuses to create one), and one
        // must not be connected to a host socket: refused like anything unknown.
        (Some(libc::AF_UNIX), _) | (None, _) | (_, None) => Err(libc::EPERM),
        (Some(_), Some(_)) => Ok(Kind::Other),
    }
}

/// The socket's own address (`getsockname`), as raw bytes.
fn sock_name(sock: &OwnedFd) -> Option<Vec<u8>> {
    // SAFETY: a zeroed sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getsockname into our buffer of `len` bytes.
    if unsafe { libc::getsockname(sock.as_raw_fd(), (&mut ss as *mut libc::sockaddr_storage).cast(), &mut len) } != 0 {
        return None;
    }
    let len = (len as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: `ss` holds at least `len` initialised bytes.
    Some(unsafe { std::slice::from_raw_parts((&ss as *const libc::sockaddr_storage).cast::<u8>(), len) }.to_vec())
}

fn fstat(fd: &impl AsRawFd) -> std::io::Result<libc::stat> {
    // SAFETY: fstat into a zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}


/// A `sock_diag` netlink socket of the calling thread's network namespace (with a receive
/// timeout: an answer never comes late).
///
/// # Errors
/// The failing call.
pub(crate) fn diag_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket call; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_diag_timeout(&fd);
    Ok(fd)
}

/// One second: `sock_diag` answers at once, or never.
pub(crate) fn set_diag_timeout(fd: &OwnedFd) {
    let tv = libc::timeval { tv_sec: 1, tv_usec: 0 };
    // SAFETY: setsockopt with a timeval of its size.
    unsafe { libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as libc::socklen_t) };
}

/// What `sock_diag` says about a unix socket.
#[derive(Debug, PartialEq, Eq)]
enum Diag {
    /// No such socket any more.
    Gone,
    /// It exists: the (kernel `dev_t`, inode) of the file it is bound to, and whether it listens.
    Found { vfs: Option<(u32, u32)>, listening: bool },
}

/// Asks `sock_diag` about the unix socket with sockfs inode `ino` (`None`: no answer).
fn unix_diag_vfs(diag: &OwnedFd, ino: u32) -> Option<Diag> {
    static SEQ: AtomicUsize = AtomicUsize::new(1);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as u32;
    let mut req = Vec::with_capacity(40);
    req.extend_from_slice(&40u32.to_ne_bytes()); // nlmsg_len
    req.extend_from_slice(&20u16.to_ne_bytes()); // SOCK_DIAG_BY_FAMILY
    req.extend_from_slice(&1u16.to_ne_bytes()); // NLM_F_REQUEST: one socket, not a dump
    req.extend_from_slice(&seq.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(&[libc::AF_UNIX as u8, 0, 0, 0]); // family, protocol, pad
    req.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    req.extend_from_slice(&ino.to_ne_bytes());
    req.extend_from_slice(&2u32.to_ne_bytes()); // UDIAG_SHOW_VFS
    req.extend_from_slice(&[0xff; 8]); // no cookie
    // SAFETY: sending our buffer to the kernel (an unconnected netlink socket's default peer).
    if unsafe { libc::send(diag.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } != req.len() as isize {
        return None;
    }
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: receiving into our buffer.
        let n = unsafe { libc::recv(diag.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 16 {
            return None;
        }
        if let Some(d) = parse_diag(&buf[..n as usize], seq) {
            return d;
        }
    }
}

/// One reply to request `seq`: `None` when it answers another request (skip it), `Some(None)`
/// when it cannot be read.
fn parse_diag(m: &[u8], seq: u32) -> Option<Option<Diag>> {
    let u32_at = |o: usize| m.get(o..o + 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    let u16_at = |o: usize| m.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let (Some(len), Some(ty), Some(s)) = (u32_at(0), u16_at(4), u32_at(8)) else { return Some(None) };
    if s != seq {
        return None;
    }
    let len = (len as usize).min(m.len());
    match ty {
        2 => Some(match u32_at(16).map(|e| e as i32) {
            Some(e) if e == -libc::ENOENT => Some(Diag::Gone),
            _ => None,
        }),
        20 if len >= 32 => {
            let listening = m[18] == 10; // TCP_LISTEN
            let mut vfs = None;
            let mut o = 32;
            while o + 4 <= len {
                let (Some(alen), Some(aty)) = (u16_at(o), u16_at(o + 2)) else { break };
                let alen = alen as usize;
                if alen < 4 || o + alen > len {
                    break;
                }
                if let (true, 1, Some(vino), Some(dev)) = (alen >= 12, aty, u32_at(o + 4), u32_at(o + 8)) {
                    // struct unix_diag_vfs { u32 ino; u32 dev; }
                    vfs = Some((dev, vino));
                }
                o += (alen + 3) & !3;
            }
            Some(Some(Diag::Found { vfs, listening }))
        }
        _ => Some(None),
    }
}

/// `SECCOMP_IOCTL_NOTIF_ID_VALID`: the caller is still waiting for this answer.
fn id_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads the u64 id.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) == 0 }
}

/// The pathname in a unix socket address (`None`: not `AF_UNIX`, unnamed or abstract).
fn unix_path(addr: &[u8]) -> Option<&[u8]> {
    let family = u16::from_ne_bytes([addr[0], addr[1]]);
    if i32::from(family) != libc::AF_UNIX {
        return None;
    }
    let path = &addr[2..];
    let path = &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())];
    (!path.is_empty()).then_some(path)
}

/// The path to connect to for the granted socket `addr` names: `/proc/self/fd/N` of the socket
/// held open since before the run (`None`: refused).
fn granted_path(addr: &[u8], grants: &[(UnixSocketGrant, OwnedFd)]) -> Option<Vec<u8>> {
    let (_, fd) = unix_path(addr).and_then(|p| grants.iter().find(|(g, _)| g.matches(p)))?;
    Some(format!("/proc/self/fd/{}", fd.as_raw_fd()).into_bytes())
}

/// Connects the command's unix socket to a granted socket (`path`: see [`granted_path`]).
fn connect_unix(sock: &OwnedFd, path: &[u8]) -> Result<i64, i32> {
    // SAFETY: a zeroed sockaddr_un.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if path.len() >= sa.sun_path.len() {
        return Err(libc::ENAMETOOLONG);
    }
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sa.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + path.len() + 1) as libc::socklen_t;
    // SAFETY: connecting our duplicate of the caller's socket to a local address.
    let r = unsafe { libc::connect(sock.as_raw_fd(), (&sa as *const libc::sockaddr_un).cast(), len) };
    if r == 0 { Ok(0) } else { Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)) }
}

/// Makes the call the command asked for on a socket of the sandbox's own network namespace
/// (Full level), with the address as read.
fn connect_raw(sock: &OwnedFd, addr: &[u8]) -> Result<i64, i32> {
    // SAFETY: connecting our duplicate of the caller's socket; `addr` holds `len` bytes.
    let r = unsafe { libc::connect(sock.as_raw_fd(), addr.as_ptr().cast(), addr.len() as libc::socklen_t) };
    if r == 0 { Ok(0) } else { Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)) }
}

fn respond(listener: &OwnedFd, id: u64, r: Result<i64, i32>) {
    let (val, error) = match r {
        Ok(v) => (v, 0),
        Err(e) => (0, -e),
    };
    let mut resp = libc::seccomp_notif_resp { id, val, error, flags: 0 };
    // SAFETY: the ioctl reads the response; ENOENT (the caller went away) needs nothing.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn addr(path: &[u8]) -> Vec<u8> {
        let mut a = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(path);
        a
    }

    /// A thread with a descriptor table of its own (`unshare(CLONE_FILES)`) whose `fd` is another
    /// socket than the main thread's: its descriptor is taken from its own table, or refused; a
    /// thread sharing the table gets the group's. Both ways (`PIDFD_THREAD` where the kernel has it,
    /// and the group's pidfd checked by `kcmp`).
    #[test]
    fn a_threads_descriptor_is_its_own_or_refused() {
        use std::os::unix::net::UnixDatagram;
        let (main_sock, _peer) = UnixDatagram::pair().unwrap();
        let fd = main_sock.as_raw_fd();
        let main_ino = fstat(&main_sock).unwrap().st_ino;
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            // SAFETY: gettid.
            let tid = unsafe { libc::gettid() };
            tx.send((tid, None)).unwrap();
            done_rx.recv().unwrap();
            // SAFETY: this thread's own table from here on.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_FILES) }, 0);
            let (other, _p) = UnixDatagram::pair().unwrap();
            // SAFETY: replacing `fd` in this thread's own table only.
            assert_eq!(unsafe { libc::dup2(other.as_raw_fd(), fd) }, fd);
            let ino = fstat(&other).unwrap().st_ino;
            tx.send((tid, Some(ino))).unwrap();
            done_rx.recv().unwrap();
            // SAFETY: our own copy of `fd` in this thread's own table.
            unsafe { libc::close(fd) };
        });
        let (tid, _) = rx.recv().unwrap();
        for thread_pidfd in [true, false] {
            let got = thread_fd(tid, fd, thread_pidfd).unwrap();
            assert_eq!(fstat(&got).unwrap().st_ino, main_ino, "shared table, thread pidfd {thread_pidfd}");
        }
        done_tx.send(()).unwrap();
        let (_, own_ino) = rx.recv().unwrap();
        let own_ino = own_ino.unwrap();
        match thread_fd(tid, fd, true) {
            Ok(got) => assert_eq!(fstat(&got).unwrap().st_ino, own_ino, "PIDFD_THREAD takes the thread's own"),
            Err(e) => assert_eq!(e, libc::EPERM, "refused (a kernel without PIDFD_THREAD)"),
        }
        assert_eq!(thread_fd(tid, fd, false).err(), Some(libc::EPERM), "the group's descriptor is not the thread's: refused");
        done_tx.send(()).unwrap();
        worker.join().unwrap();
    }

    #[test]
    fn only_a_granted_pathname_matches() {
        // SAFETY: opening /dev/null as a stand-in descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::open(c"/dev/null".as_ptr(), libc::O_PATH | libc::O_CLOEXEC)) };
        let g = [(UnixSocketGrant::new(Path::new("/tmp/ssh-x/agent.1"), Path::new("/tmp/ssh-x/agent.1")), fd)];
        let ok = |a: &[u8]| granted_path(a, &g).is_some();
        assert_eq!(granted_path(&addr(b"/tmp/ssh-x/agent.1"), &g), Some(format!("/proc/self/fd/{}", g[0].1.as_raw_fd()).into_bytes()));
        assert!(ok(&addr(b"/tmp/ssh-x/agent.1\0")));
        assert!(ok(&addr(b"/tmp/ssh-x/agent.1")));
        assert!(!ok(&addr(b"/tmp/ssh-x/agent.10\0")));
        assert!(!ok(&addr(b"agent.1\0")), "relative");
        assert!(!ok(&addr(b"\0/tmp/ssh-x/agent.1")), "abstract");
        assert!(!ok(&addr(b"")), "unnamed");
        assert!(!ok(&addr(b"/tmp/ssh-x/./agent.1\0")), "another spelling");
        let mut inet = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        inet.extend_from_slice(b"/tmp/ssh-x/agent.1");
        assert!(!ok(&inet), "not AF_UNIX");
    }

    #[test]
    fn abstract_names_go_under_the_run_prefix_once() {
        let p = b"lgsbx-0123456789ab/";
        let a = addr(b"\0listener-1");
        assert_eq!(prefixed(&a, p).unwrap(), addr(b"\0lgsbx-0123456789ab/listener-1"));
        assert_eq!(prefixed(&prefixed(&a, p).unwrap(), p).unwrap(), prefixed(&a, p).unwrap(), "already under it");
        let long = addr(&[b"\0".as_slice(), &[b'x'; 100]].concat());
        assert_eq!(prefixed(&long, p), Err(libc::ENAMETOOLONG));
    }

    #[test]
    fn sock_diag_replies_are_read_by_sequence() {
        let hdr = |len: u32, ty: u16, seq: u32| [len.to_ne_bytes().as_slice(), &ty.to_ne_bytes(), &0u16.to_ne_bytes(), &seq.to_ne_bytes(), &0u32.to_ne_bytes()].concat();
        // An error reply: ENOENT means gone; another error means no answer.
        let gone = [hdr(20, 2, 7), (-libc::ENOENT).to_ne_bytes().to_vec()].concat();
        assert_eq!(parse_diag(&gone, 7), Some(Some(Diag::Gone)));
        assert_eq!(parse_diag(&gone, 8), None, "another request's reply is skipped");
        let eperm = [hdr(20, 2, 7), (-libc::EPERM).to_ne_bytes().to_vec()].concat();
        assert_eq!(parse_diag(&eperm, 7), Some(None));
        // A socket: unix_diag_msg (state 10 = listening) then UNIX_DIAG_VFS { ino, dev }.
        let msg = [1u8, 1, 10, 0].iter().copied().chain(42u32.to_ne_bytes()).chain([0xff; 8]).collect::<Vec<u8>>();
        let vfs = [12u16.to_ne_bytes().as_slice(), &1u16.to_ne_bytes(), &99u32.to_ne_bytes(), &((8u32 << 20) | 3).to_ne_bytes()].concat();
        let found = [hdr(44, 20, 7), msg.clone(), vfs].concat();
        assert_eq!(parse_diag(&found, 7), Some(Some(Diag::Found { vfs: Some(((8 << 20) | 3, 99)), listening: true })));
        // Unbound (no VFS attribute), not listening; a truncated attribute is ignored.
        let mut m2 = msg;
        m2[2] = 1;
        assert_eq!(parse_diag(&[hdr(32, 20, 7), m2.clone()].concat(), 7), Some(Some(Diag::Found { vfs: None, listening: false })));
        let bad = [hdr(40, 20, 7), m2, vec![40, 0, 1, 0, 1, 2, 3, 4]].concat();
        assert_eq!(parse_diag(&bad, 7), Some(Some(Diag::Found { vfs: None, listening: false })));
    }

    #[test]
    fn a_granted_symlink_matches_as_given_and_as_resolved() {
        let g = UnixSocketGrant::new(Path::new("/var/run/docker.sock"), Path::new("/run/docker.sock"));
        assert!(g.matches(b"/var/run/docker.sock") && g.matches(b"/run/docker.sock"));
        assert!(g.root_equivalent);
        assert!(!UnixSocketGrant::new(Path::new("/tmp/a/agent.2"), Path::new("/tmp/a/agent.2")).root_equivalent);
    }
}
