//! The file tools of spec 7.2 (`read_file`, `write_file`, `edit_file`): the same policy as the
//! shell sandbox, applied in the host process, which is not confined.
//!
//! * [`SandboxPolicy::open_read`] and [`SandboxPolicy::open_write`] return an **opened file**,
//!   never just a path: a path checked and then opened can be swapped in between by a command
//!   running in the same workspace (a directory renamed, a symlink planted). The path is
//!   resolved and checked, then opened from `/` without following any symbolic link
//!   (`openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, or an `O_NOFOLLOW` walk one
//!   component at a time where `openat2` is missing), and the descriptor's own path is checked
//!   again: whatever was swapped in is refused, not opened.
//! * `/proc` and `/sys` are refused except a few global files: `/proc/self/environ` of the host
//!   process holds every secret the shell sandbox scrubs, and `/proc/<pid>/mem` its memory.
//! * Writes into the protected workspace paths (`.git` and its config, hooks and redirection
//!   files, `.vscode`, `.idea`, the agent's config, and the configured list) are refused: they
//!   run code later, outside any sandbox.
//! * [`SandboxPolicy::check_read`] and [`SandboxPolicy::check_write`] apply the same checks and
//!   return the resolved path, for display; open through the `open_*` functions.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
#[cfg(not(target_os = "linux"))]
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use crate::error::SandboxError;
use crate::plan::resolve::PathResolver;
use crate::policy::{SandboxMode, SandboxPolicy};

/// Files under `/proc` and `/sys` a file tool may read: global, read-only information.
pub const PROC_SYS_ALLOWED: &[&str] = &[
    "/proc/cpuinfo", "/proc/meminfo", "/proc/version", "/proc/loadavg", "/proc/uptime", "/proc/stat",
    "/proc/filesystems", "/proc/sys/kernel/osrelease", "/proc/sys/kernel/ostype", "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible",
];

/// Workspace entries always protected from the file tools, whatever the policy lists: git's
/// directory (or `.git` file) as a whole.
pub const ALWAYS_PROTECTED: &[&str] = &[".git"];

/// How [`SandboxPolicy::open_write`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Create if missing, truncate if present.
    Truncate,
    /// Create if missing, append.
    Append,
    /// Create; fail if it exists.
    CreateNew,
    /// Open an existing file for writing in place (no truncation).
    Existing,
}

fn resolve(r: &mut PathResolver, policy: &SandboxPolicy, path: &Path) -> PathBuf {
    let abs = if path.is_absolute() { path.to_path_buf() } else { policy.workspace_path.join(path) };
    r.canonicalize_lenient(&abs).path
}

fn under_any(r: &mut PathResolver, p: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| p.starts_with(r.canonicalize_lenient(root).path))
}

fn denied(r: &mut PathResolver, policy: &SandboxPolicy, p: &Path) -> Option<PathBuf> {
    policy
        .deny_paths
        .iter()
        .find(|d| p.starts_with(d) || p.starts_with(r.canonicalize_lenient(d).path))
        .cloned()
}

/// The `/proc`/`/sys` rule: `Some(reason)` when `p` is there and not on the short list.
fn proc_sys_refused(p: &Path) -> Option<&'static str> {
    let in_proc_sys = p.starts_with("/proc") || p.starts_with("/sys");
    (in_proc_sys && !PROC_SYS_ALLOWED.iter().any(|a| p == Path::new(a)))
        .then_some("/proc and /sys hold the host process's environment, memory and every process's command line")
}

/// The protected workspace path `p` lies in, if any.
fn protected(policy: &SandboxPolicy, p: &Path) -> Option<PathBuf> {
    let ws = &policy.workspace_path;
    let rel = p.strip_prefix(ws).ok()?;
    ALWAYS_PROTECTED
        .iter()
        .copied()
        .chain(policy.protected_workspace_paths.iter().map(String::as_str))
        .map(Path::new)
        .find(|prot| rel.starts_with(prot))
        .map(|prot| ws.join(prot))
}

impl SandboxPolicy {
    /// Checks that a tool may read `path` (relative paths are relative to the workspace) and
    /// returns the resolved path, for display. Open with [`SandboxPolicy::open_read`].
    ///
    /// # Errors
    /// [`SandboxError::Policy`] naming the path when it is denied, in `/proc` or `/sys`, or
    /// outside every readable root.
    pub fn check_read(&self, path: &Path) -> Result<PathBuf, SandboxError> {
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        self.read_allowed(r, &p)?;
        Ok(p)
    }

    fn read_allowed(&self, r: &mut PathResolver, p: &Path) -> Result<(), SandboxError> {
        if self.mode == SandboxMode::FullAccess {
            return Ok(());
        }
        if let Some(why) = proc_sys_refused(p) {
            return Err(SandboxError::Policy(format!("read {}: refused ({why})", p.display())));
        }
        if let Some(d) = denied(r, self, p) {
            return Err(SandboxError::Policy(format!("read {}: denied (credential path {})", p.display(), d.display())));
        }
        let mut roots = vec![self.workspace_path.clone()];
        roots.extend(self.read_only_paths.iter().cloned());
        roots.extend(self.writable_paths.iter().cloned());
        if under_any(r, p, &roots) {
            Ok(())
        } else {
            Err(SandboxError::Policy(format!("read {}: outside the sandbox's readable paths", p.display())))
        }
    }

    /// Checks that a tool may write `path` and returns the resolved path, for display. Open
    /// with [`SandboxPolicy::open_write`].
    ///
    /// # Errors
    /// [`SandboxError::Policy`] naming the path when it is denied, protected, in `/proc` or
    /// `/sys`, or outside every writable root.
    pub fn check_write(&self, path: &Path) -> Result<PathBuf, SandboxError> {
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        self.write_allowed(r, &p)?;
        Ok(p)
    }

    fn write_allowed(&self, r: &mut PathResolver, p: &Path) -> Result<(), SandboxError> {
        if self.mode == SandboxMode::FullAccess {
            return Ok(());
        }
        if let Some(why) = proc_sys_refused(p) {
            return Err(SandboxError::Policy(format!("write {}: refused ({why})", p.display())));
        }
        if let Some(d) = denied(r, self, p) {
            return Err(SandboxError::Policy(format!("write {}: denied (credential path {})", p.display(), d.display())));
        }
        if let Some(prot) = protected(self, p) {
            return Err(SandboxError::Policy(format!(
                "write {}: refused (protected workspace path {}: it runs code later, outside the sandbox)",
                p.display(),
                prot.display()
            )));
        }
        let mut roots = self.writable_paths.clone();
        if self.mode == SandboxMode::WorkspaceWrite {
            roots.push(self.workspace_path.clone());
        }
        if under_any(r, p, &roots) {
            Ok(())
        } else {
            Err(SandboxError::Policy(format!("write {}: outside the sandbox's writable paths", p.display())))
        }
    }

    /// Opens `path` for reading if the policy allows it (see the module docs).
    ///
    /// # Errors
    /// [`SandboxError::Policy`] when refused (including a path that changed into a symlink or
    /// moved out of the allowed area while it was opened); [`SandboxError::Io`] when the file
    /// cannot be opened.
    pub fn open_read(&self, path: &Path) -> Result<File, SandboxError> {
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
fn open_walk(p: &Path, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{build_sandbox_policy, SandboxSettings};
    use crate::policy::SandboxMode;
    use std::io::{Read, Write};

    fn world() -> (tempfile::TempDir, PathBuf, PathBuf, SandboxPolicy) {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let home = root.join("home");
        let ws = root.join("ws");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "k").unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {}").unwrap();
        let s = SandboxSettings { home: Some(home.clone()), ..Default::default() };
        let p = build_sandbox_policy(&ws, &s).unwrap();
        (d, home, ws, p)
    }

    #[test]
    fn read_write_checks_resolve_symlinks_and_dotdot() {
        let (_d, home, ws, p) = world();
        std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), ws.join("link")).unwrap();
        assert!(p.check_read("src/main.rs".as_ref()).is_ok());
        assert!(p.check_write("new.txt".as_ref()).is_ok());
        assert!(p.check_read("link".as_ref()).is_err(), "symlink to a credential");
        assert!(p.check_read("../home/.ssh/id_rsa".as_ref()).is_err());
        assert!(p.check_write("../outside.txt".as_ref()).is_err());
        assert!(p.check_read("/usr/bin/env".as_ref()).is_ok());
        assert!(p.check_write("/usr/bin/env".as_ref()).is_err());
        assert!(p.check_write("/etc/passwd".as_ref()).is_err());
        let ro = build_sandbox_policy(&ws, &SandboxSettings { mode: SandboxMode::ReadOnly, home: Some(home), ..Default::default() }).unwrap();
        assert!(ro.check_write("new.txt".as_ref()).is_err());
        assert!(ro.check_read("new.txt".as_ref()).is_ok());
    }

    #[test]
    fn open_returns_the_checked_file() {
        let (_d, _home, ws, p) = world();
        let mut f = p.open_write("out.txt".as_ref(), WriteMode::Truncate).unwrap();
        f.write_all(b"hello").unwrap();
        drop(f);
        let mut s = String::new();
        p.open_read("out.txt".as_ref()).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");
        assert!(p.open_write("out.txt".as_ref(), WriteMode::CreateNew).is_err());
        p.open_write("out.txt".as_ref(), WriteMode::Append).unwrap().write_all(b" world").unwrap();
        assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "hello world");
        // A symlink inside the workspace that points inside it is resolved and opened.
        std::os::unix::fs::symlink("src/main.rs", ws.join("alias.rs")).unwrap();
        let mut s = String::new();
        p.open_read("alias.rs".as_ref()).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "fn main() {}");
    }

    /// The fallback walk refuses a symlink anywhere, as openat2 does.
    #[test]
    fn the_fallback_walk_refuses_symlinks_like_openat2() {
        let (_d, home, ws, _p) = world();
        std::fs::create_dir_all(ws.join("dir")).unwrap();
        std::fs::write(ws.join("dir/f"), "x").unwrap();
        assert!(open_walk(&ws.join("dir/f"), libc::O_RDONLY, 0).is_ok());
        std::os::unix::fs::symlink(home.join(".ssh"), ws.join("via")).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), ws.join("dir/link")).unwrap();
        for p in [ws.join("via/id_rsa"), ws.join("dir/link")] {
            assert_eq!(open_walk(&p, libc::O_RDONLY, 0).unwrap_err().raw_os_error(), Some(libc::ELOOP), "{}", p.display());
            assert_eq!(open_no_symlinks(&p, libc::O_RDONLY, 0).unwrap_err().raw_os_error(), Some(libc::ELOOP), "{}", p.display());
        }
    }

}
