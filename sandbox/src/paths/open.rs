//! Opening files for the file tools without following symbolic links (POSIX): see
//! [`super`].

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
#[cfg(not(target_os = "linux"))]
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use super::{resolve, WriteMode};
use crate::error::SandboxError;
use crate::plan::resolve::PathResolver;
use crate::policy::SandboxPolicy;

impl SandboxPolicy {
    /// Opens `path` for reading if the policy allows it (see the module docs).
    ///
    /// # Errors
    /// [`SandboxError::Policy`] when refused (including a path that changed into a symlink or
    /// moved out of the allowed area while it was opened); [`SandboxError::Io`] when the file
    /// cannot be opened.
    pub fn open_read(&self, path: &Path) -> Result<File, SandboxError> {
        // An invalid policy (relative deny paths, unacknowledged full access) is refused here
        // as it is where runs are planned.
        self.validate()?;
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        self.read_allowed(r, &p)?;
        let fd = open_no_symlinks(&p, libc::O_RDONLY, 0).map_err(|e| open_error("read", &p, e))?;
        self.verify_opened(&fd, &p, |me, r, q| me.read_allowed(r, q))?;
        Ok(File::from(fd))
    }

    /// Opens `path` for writing as `mode` says, if the policy allows it (see the module docs).
    /// A file that is created gets mode 0644 (before the umask).
    ///
    /// # Errors
    /// As [`SandboxPolicy::open_read`].
    pub fn open_write(&self, path: &Path, mode: WriteMode) -> Result<File, SandboxError> {
        // An invalid policy (relative deny paths, unacknowledged full access) is refused here
        // as it is where runs are planned.
        self.validate()?;
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        self.write_allowed(r, &p)?;
        let flags = libc::O_WRONLY
            | match mode {
                WriteMode::Truncate => libc::O_CREAT | libc::O_TRUNC,
                WriteMode::Append => libc::O_CREAT | libc::O_APPEND,
                WriteMode::CreateNew => libc::O_CREAT | libc::O_EXCL,
                WriteMode::Existing => 0,
            };
        // Truncation happens after the check of the opened file, not before.
        let fd = open_no_symlinks(&p, flags & !libc::O_TRUNC, 0o644).map_err(|e| open_error("write", &p, e))?;
        self.verify_opened(&fd, &p, |me, r, q| me.write_allowed(r, q))?;
        if flags & libc::O_TRUNC != 0 {
            // SAFETY: ftruncate on our own descriptor.
            if unsafe { libc::ftruncate(fd.as_raw_fd(), 0) } != 0 {
                return Err(SandboxError::io(format!("truncate {}", p.display()), std::io::Error::last_os_error()));
            }
        }
        Ok(File::from(fd))
    }

    /// The opened descriptor's own path must be the checked one and still pass the check.
    fn verify_opened(
        &self,
        fd: &OwnedFd,
        checked: &Path,
        allowed: impl Fn(&Self, &mut PathResolver, &Path) -> Result<(), SandboxError>,
    ) -> Result<(), SandboxError> {
        let actual = fd_path(fd).map_err(|e| SandboxError::io(format!("where {} was opened", checked.display()), e))?;
        if actual != checked {
            return Err(SandboxError::Policy(format!(
                "{}: refused (it changed while being opened: now {})",
                checked.display(),
                actual.display()
            )));
        }
        allowed(self, &mut PathResolver::new(), &actual)
    }
}

/// The path an open descriptor refers to now.
fn fd_path(fd: &OwnedFd) -> std::io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    return std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    #[cfg(not(target_os = "linux"))]
    {
        let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: F_GETPATH writes a NUL-terminated path of at most PATH_MAX bytes.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPATH, buf.as_mut_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        buf.truncate(end);
        Ok(PathBuf::from(std::ffi::OsString::from_vec(buf)))
    }
}

fn open_error(what: &str, p: &Path, e: std::io::Error) -> SandboxError {
    if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::EXDEV) {
        SandboxError::Policy(format!("{what} {}: refused (a symbolic link appeared on the way while it was opened)", p.display()))
    } else {
        SandboxError::io(format!("{what} {}", p.display()), e)
    }
}

/// `struct open_how` of openat2(2).
#[cfg(target_os = "linux")]
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

#[cfg(target_os = "linux")]
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
#[cfg(target_os = "linux")]
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
#[cfg(target_os = "linux")]
const SYS_OPENAT2: libc::c_long = 437;

/// Opens the absolute, canonical `p` without following any symbolic link on the way or at the
/// end: `openat2` with `RESOLVE_NO_SYMLINKS`, else a walk of `O_NOFOLLOW` opens.
///
/// # Errors
/// The OS error (`ELOOP` when a component is a symlink).
pub fn open_no_symlinks(p: &Path, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    #[cfg(not(target_os = "linux"))]
    return open_walk(p, flags, mode);
    #[cfg(target_os = "linux")]
    openat2_no_symlinks(p, flags, mode)
}

#[cfg(target_os = "linux")]
fn openat2_no_symlinks(p: &Path, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = OpenHow { flags: (flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64, mode: if flags & libc::O_CREAT != 0 { u64::from(mode) } else { 0 }, resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
    // SAFETY: a valid C string and open_how of the size passed.
    let fd = unsafe { libc::syscall(SYS_OPENAT2, libc::AT_FDCWD, c.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>()) };
    if fd >= 0 {
        // SAFETY: a descriptor we just opened.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
    }
    let e = std::io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
        return Err(e);
    }
    open_walk(p, flags, mode)
}

/// How the walk opens directories: a path descriptor where there is one (Linux), else for
/// reading.
#[cfg(target_os = "linux")]
const DIR_FLAGS: i32 = libc::O_PATH | libc::O_DIRECTORY;
#[cfg(not(target_os = "linux"))]
const DIR_FLAGS: i32 = libc::O_RDONLY | libc::O_DIRECTORY;

/// The fallback of [`open_no_symlinks`]: one `openat(O_NOFOLLOW)` per component.
pub(super) fn open_walk(p: &Path, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    let comps: Vec<Component<'_>> = p.components().collect();
    if comps.first() != Some(&Component::RootDir) {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: opening "/" as a directory descriptor.
    let root = unsafe { libc::open(c"/".as_ptr(), DIR_FLAGS | libc::O_CLOEXEC) };
    if root < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: we own it.
    let mut dir = unsafe { OwnedFd::from_raw_fd(root) };
    let names: Vec<&std::ffi::OsStr> = comps[1..]
        .iter()
        .map(|c| match c {
            Component::Normal(n) => Ok(*n),
            _ => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, parents)) = names.split_last() else {
        return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
    };
    for n in parents {
        let c = CString::new(n.as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: openat relative to a directory descriptor we own.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), DIR_FLAGS | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            // O_PATH|O_NOFOLLOW on a symlink opens the link itself: O_DIRECTORY makes it ENOTDIR.
            return Err(if e.raw_os_error() == Some(libc::ENOTDIR) { std::io::Error::from_raw_os_error(libc::ELOOP) } else { e });
        }
        // SAFETY: we own it.
        dir = unsafe { OwnedFd::from_raw_fd(fd) };
    }
    let c = CString::new(last.as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: openat relative to a directory descriptor we own.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: we own it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

