//! File descriptor helpers of the parent side.

use std::ffi::CString;

use crate::error::SandboxError;

pub(crate) struct Pipe {
    pub(crate) read: i32,
    pub(crate) write: i32,
}

pub(crate) fn pipe() -> Result<Pipe, SandboxError> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two fds.
    #[cfg(target_os = "linux")]
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    // SAFETY: pipe writes two fds, which are then marked close-on-exec (the runner spawns only
    // with posix_spawn, after this returns, so no exec can come in between in this thread).
    #[cfg(not(target_os = "linux"))]
    let r = unsafe {
        let r = libc::pipe(fds.as_mut_ptr());
        if r == 0 {
            libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(fds[1], libc::F_SETFD, libc::FD_CLOEXEC);
        }
        r
    };
    if r != 0 {
        return Err(SandboxError::io("pipe", std::io::Error::last_os_error()));
    }
    Ok(Pipe { read: fds[0], write: fds[1] })
}

/// A unix stream socketpair in [`Pipe`]'s shape (the helper's end as `write`), for a report
/// channel that also carries a descriptor (`SCM_RIGHTS`).
#[cfg(target_os = "linux")]
pub(crate) fn socket_channel() -> Result<Pipe, SandboxError> {
    let mut fds = [0i32; 2];
    // SAFETY: socketpair writes two fds.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    if r != 0 {
        return Err(SandboxError::io("socketpair", std::io::Error::last_os_error()));
    }
    Ok(Pipe { read: fds[0], write: fds[1] })
}

/// Reads from `fd` into `buf` like `read`; on a socket, the descriptors passed with the bytes
/// (`SCM_RIGHTS`, received close-on-exec) go to `passed`.
#[cfg(target_os = "linux")]
pub(crate) fn read_with_fd(fd: i32, buf: &mut [u8], passed: &mut Vec<std::os::fd::OwnedFd>) -> isize {
    use std::os::fd::FromRawFd;
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut cbuf = [0u64; 8];
    // SAFETY: a zeroed msghdr pointing at live locals; the kernel fills at most
    // `msg_controllen` bytes of control data, which are walked with the CMSG macros.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        let got = libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC);
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<i32>();
                let n = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<i32>();
                for i in 0..n {
                    let f = std::ptr::read_unaligned(data.add(i));
                    passed.push(std::os::fd::OwnedFd::from_raw_fd(f));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        got
    }
}

/// Writes all of `buf` to the socket `fd`, the first write with `fds` attached (`SCM_RIGHTS`);
/// `EINTR` is retried.
#[cfg(target_os = "linux")]
pub(crate) fn send_with_fds(fd: i32, buf: &[u8], fds: &[i32]) -> std::io::Result<()> {
    let mut off = 0;
    let space = if fds.is_empty() {
        0
    } else {
        // SAFETY: CMSG_SPACE is a pure computation.
        unsafe { libc::CMSG_SPACE(std::mem::size_of_val(fds) as u32) as usize }
    };
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    while off < buf.len() {
        let mut iov = libc::iovec { iov_base: buf[off..].as_ptr() as *mut _, iov_len: buf.len() - off };
        // SAFETY: a zeroed msghdr pointing at live locals; the control buffer is CMSG_SPACE bytes
        // (u64-aligned) holding one SCM_RIGHTS header with `fds`, sent with the first bytes only.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            if off == 0 && space > 0 {
                msg.msg_control = cbuf.as_mut_ptr().cast();
                msg.msg_controllen = space as _;
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
                std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<i32>(), fds.len());
            }
            libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL)
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        off += n as usize;
    }
    Ok(())
}

pub(crate) fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: closing an fd we own.
        unsafe { libc::close(fd) };
    }
}

pub(crate) fn cstr(s: &[u8], what: &str) -> Result<CString, SandboxError> {
    CString::new(s).map_err(|_| SandboxError::Policy(format!("{what} contains a NUL byte")))
}
