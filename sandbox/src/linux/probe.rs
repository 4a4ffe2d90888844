//! What the runner's seccomp-notify broker needs of this kernel and host, probed once when the
//! capabilities are detected (read-only: a pidfd of our own process, a descriptor of our own
//! stderr, `/` opened with `openat2`, Yama's setting). Layer 3 of `ARCHITECTURE.md`, beside
//! `detect`, which asks it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What the kernel and the host must allow for the runner to answer (checked when the
/// capabilities are detected, so that a plan never sends calls to a runner that cannot answer
/// them): `pidfd_getfd` and `openat2` (Linux 5.6) and ptrace access to the command (Yama's
/// `ptrace_scope` below 3, below 2 without root).
///
/// # Errors
/// What is missing.
pub(crate) fn check_support(is_root: bool) -> Result<(), String> {
    // SAFETY: pidfd_open of our own pid; the descriptor is owned below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
    if pidfd < 0 {
        return Err(format!("needs pidfd_open (Linux 5.3): {}", std::io::Error::last_os_error()));
    }
    // SAFETY: just opened, owned here.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // SAFETY: duplicating our own stderr through our own pidfd.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), 2, 0) } as i32;
    if dup < 0 {
        return Err(format!("needs pidfd_getfd (Linux 5.6): {}", std::io::Error::last_os_error()));
    }
    // SAFETY: just created, owned and closed here.
    drop(unsafe { OwnedFd::from_raw_fd(dup) });
    match open_beneath(libc::AT_FDCWD, b"/", false) {
        Ok(fd) => drop(fd),
        Err(e) => return Err(format!("needs openat2 (Linux 5.6): {}", std::io::Error::from_raw_os_error(e))),
    }
    let scope = crate::host::read_small("/proc/sys/kernel/yama/ptrace_scope").and_then(|s| s.trim().parse::<u32>().ok()).unwrap_or(0);
    if scope >= 3 || (scope == 2 && !is_root) {
        return Err(format!(
            "needs to read the command's connect() address, which kernel.yama.ptrace_scope = {scope} forbids{}",
            if scope == 2 { " without root" } else { "" }));
    }
    Ok(())
}

/// `openat2(dirfd, path, O_PATH)` without magic links; `in_root`: `dirfd` is the root the path
/// is resolved in (absolute paths and symlinks stay beneath it).
pub(crate) fn open_beneath(dirfd: i32, path: &[u8], in_root: bool) -> Result<OwnedFd, i32> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
    const RESOLVE_IN_ROOT: u64 = 0x10;
    let c = std::ffi::CString::new(path).map_err(|_| libc::EINVAL)?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_MAGICLINKS | if in_root { RESOLVE_IN_ROOT } else { 0 },
    };
    // SAFETY: a valid C string and open_how of the size passed; the descriptor is owned below.
    let fd = unsafe { libc::syscall(libc::SYS_openat2, dirfd, c.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>()) } as i32;
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM));
    }
    // SAFETY: just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
