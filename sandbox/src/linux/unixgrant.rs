//! Granted host unix sockets (`--allow-unix-socket`): the runner's side.
//!
//! With a grant, the command's seccomp filter sends every `connect` to the runner (seccomp user
//! notification; the helper passes the filter's listener to the runner with its report and keeps
//! no copy). For each call the runner:
//!
//! 1. reads the address from the command's memory once (`process_vm_readv`) and checks that the
//!    notification is still pending (the pid was not reused);
//! 2. takes a duplicate of the command's socket (`pidfd_getfd`) and asks *it* what it is
//!    (`SO_DOMAIN`, `SO_TYPE`): never the arguments, which another thread of the command may
//!    change after the check;
//! 3. for a unix socket: refuses every address but a granted one (compared byte for byte with the
//!    path as given or its canonical form; abstract and relative addresses never match) and then
//!    connects the socket itself, to the granted path as the host resolves it. For a TCP, UDP or
//!    netlink socket (Full level only: the sandbox's own network namespace) it makes the call
//!    itself with the address it read, which is what the kernel would have done;
//! 4. answers with the result. Nothing is ever "continued" in the kernel: the call that runs is
//!    always the runner's own, with its own copy of the address, so swapping the memory or the
//!    descriptor after the check changes nothing.
//!
//! The listener stays in the runner; a process that outlives the run gets `ENOSYS` from
//! `connect` once the runner closes it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use crate::error::SandboxError;
use crate::plan::UnixSocketGrant;

/// What the kernel and the host must allow for the runner to answer (checked before the run, so
/// that a grant that cannot work is an error, not a hang): `pidfd_getfd` (Linux 5.6) and ptrace
/// access to the command (Yama's `ptrace_scope` below 3, below 2 without root).
///
/// # Errors
/// [`SandboxError::Unsupported`] naming what is missing.
pub fn check_support(is_root: bool) -> Result<(), SandboxError> {
    // SAFETY: pidfd_open of our own pid; the descriptor is owned below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
    if pidfd < 0 {
        return Err(SandboxError::Unsupported(format!(
            "--allow-unix-socket needs pidfd_open (Linux 5.3): {}", std::io::Error::last_os_error())));
    }
    // SAFETY: just opened, owned here.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // SAFETY: duplicating our own stderr through our own pidfd.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), 2, 0) } as i32;
    if dup < 0 {
        return Err(SandboxError::Unsupported(format!(
            "--allow-unix-socket needs pidfd_getfd (Linux 5.6): {}", std::io::Error::last_os_error())));
    }
    // SAFETY: just created, owned and closed here.
    drop(unsafe { OwnedFd::from_raw_fd(dup) });
    let scope = crate::detect::read_small("/proc/sys/kernel/yama/ptrace_scope").and_then(|s| s.trim().parse::<u32>().ok()).unwrap_or(0);
    if scope >= 3 || (scope == 2 && !is_root) {
        return Err(SandboxError::Unsupported(format!(
            "--allow-unix-socket needs to read the command's connect() address, which kernel.yama.ptrace_scope = {scope} forbids{}",
            if scope == 2 { " without root" } else { "" })));
    }
    Ok(())
}

/// The granted sockets of one run, each held open (`O_PATH`) from before the command starts:
/// the runner connects to `/proc/self/fd/N`, the socket the user granted, even if the command
/// later replaces the path (a grant in a directory it may write: the workspace, the host's
/// `/tmp` at Standard) with a link to another socket.
pub(crate) struct Granted {
    grants: Vec<(UnixSocketGrant, OwnedFd)>,
    /// The command's TCP/UDP sockets live in its own network namespace (Full level): their
    /// `connect` is made as asked. Elsewhere seccomp lets the command create none, and one that
    /// turned up anyway is refused rather than connected in the host's namespace.
    own_netns: bool,
}

impl Granted {
    /// Opens every granted socket.
    ///
    /// # Errors
    /// [`SandboxError::Setup`] when one is gone or is no longer a socket.
    pub(crate) fn open(grants: &[UnixSocketGrant], own_netns: bool) -> Result<Granted, SandboxError> {
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
            // SAFETY: fstat into a zeroed struct.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
                return Err(SandboxError::Setup(format!("granted socket {}: not a unix socket any more", g.path.display())));
            }
            out.push((g.clone(), fd));
        }
        Ok(Granted { grants: out, own_netns })
    }
}

/// Answers the command's `connect` calls until `stop` (a pipe's read end) reports hang-up or the
/// listener has no more processes. Runs on its own thread in the runner.
pub(crate) fn serve(listener: OwnedFd, granted: &Granted, stop: i32) {
    let listener = Arc::new(listener);
    loop {
        let mut p = [
            libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: a valid array of two pollfds.
        let n = unsafe { libc::poll(p.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if p[1].revents != 0 {
            return;
        }
        if p[0].revents & libc::POLLIN == 0 {
            return; // POLLHUP: every process of the filter is gone
        }
        // SAFETY: an all-zero seccomp_notif is what SECCOMP_IOCTL_NOTIF_RECV requires.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl fills `req`.
        if unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) } != 0 {
            continue; // the caller went away (ENOENT) or was interrupted
        }
        let (sock, addr, kind) = match take_socket(&listener, &req) {
            Err(errno) => {
                respond(&listener, req.id, Err(errno));
                continue;
            }
            Ok(t) => t,
        };
        let target = match kind {
            Kind::Unix => match granted_path(&addr, &granted.grants) {
                Some(p) => Target::Unix(p),
                None => {
                    respond(&listener, req.id, Err(libc::EPERM));
                    continue;
                }
            },
            Kind::Other if granted.own_netns => Target::Raw(addr),
            Kind::Other => {
                respond(&listener, req.id, Err(libc::EPERM));
                continue;
            }
        };
        // A connect may block (a full backlog): each runs on its own thread, at most
        // MAX_IN_FLIGHT at once; beyond that the command gets EAGAIN, as from a full backlog.
        let (l, id) = (Arc::clone(&listener), req.id);
        let started = crate::linux::spawn_bounded(&IN_FLIGHT, MAX_IN_FLIGHT, "lg-connect", 64 << 10, move || {
            let r = match &target {
                Target::Unix(p) => connect_unix(&sock, p),
                Target::Raw(a) => connect_raw(&sock, a),
            };
            respond(&l, id, r);
        });
        if !started {
            respond(&listener, req.id, Err(libc::EAGAIN));
        }
    }
}

/// Connects the runner is making for commands (all runs of this process).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Bound on [`IN_FLIGHT`].
const MAX_IN_FLIGHT: usize = 64;

/// What to connect a command's socket to.
enum Target {
    /// A granted host socket's canonical path.
    Unix(Vec<u8>),
    /// The address as read (a socket of the sandbox's own network namespace).
    Raw(Vec<u8>),
}

enum Kind {
    Unix,
    Other,
}

/// The command's socket (a duplicate) and the address it passed, after the checks of step 1
/// and 2 of the module docs; `Err(errno)` to answer with.
fn take_socket(listener: &OwnedFd, req: &libc::seccomp_notif) -> Result<(OwnedFd, Vec<u8>, Kind), i32> {
    if req.data.nr != libc::SYS_connect as i32 {
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
    // SAFETY: pidfd_open of the caller, owned below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, req.pid as libc::pid_t, 0) } as i32;
    if pidfd < 0 {
        return Err(libc::EPERM);
    }
    // SAFETY: just opened.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // SAFETY: duplicating the caller's descriptor into ours (ptrace access checked by the kernel).
    let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) } as i32;
    if sock < 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM);
        return Err(if e == libc::EBADF { libc::EBADF } else { libc::EPERM });
    }
    // SAFETY: just created, owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    if !id_valid(listener, req.id) {
        return Err(libc::EPERM);
    }
    let kind = match (crate::linux::sockopt(&sock, libc::SO_DOMAIN), crate::linux::sockopt(&sock, libc::SO_TYPE)) {
        (Some(libc::AF_UNIX), Some(libc::SOCK_STREAM | libc::SOCK_SEQPACKET)) => Kind::Unix,
        // A unix datagram socket never reaches here (seccomp refuses to create one), and one
        // must not be connected to a host socket: refused like anything unknown.
        (Some(libc::AF_UNIX), _) | (None, _) | (_, None) => return Err(libc::EPERM),
        (Some(_), Some(_)) => Kind::Other,
    };
    Ok((sock, addr, kind))
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
    fn a_granted_symlink_matches_as_given_and_as_resolved() {
        let g = UnixSocketGrant::new(Path::new("/var/run/docker.sock"), Path::new("/run/docker.sock"));
        assert!(g.matches(b"/var/run/docker.sock") && g.matches(b"/run/docker.sock"));
        assert!(g.root_equivalent);
        assert!(!UnixSocketGrant::new(Path::new("/tmp/a/agent.2"), Path::new("/tmp/a/agent.2")).root_equivalent);
    }
}
