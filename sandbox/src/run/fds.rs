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

pub(crate) fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: closing an fd we own.
        unsafe { libc::close(fd) };
    }
}

pub(crate) fn cstr(s: &[u8], what: &str) -> Result<CString, SandboxError> {
    CString::new(s).map_err(|_| SandboxError::Policy(format!("{what} contains a NUL byte")))
}
