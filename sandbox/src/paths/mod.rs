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

#[cfg(unix)]
mod open;
#[cfg(unix)]
pub use open::open_no_symlinks;
#[cfg(all(unix, test))]
use open::open_walk;

use std::path::{Path, PathBuf};

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

pub(crate) fn resolve(r: &mut PathResolver, policy: &SandboxPolicy, path: &Path) -> PathBuf {
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
        // An invalid policy (relative deny paths, unacknowledged full access) is refused here
        // as it is where runs are planned.
        self.validate()?;
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        self.read_allowed(r, &p)?;
        Ok(p)
    }

    pub(crate) fn read_allowed(&self, r: &mut PathResolver, p: &Path) -> Result<(), SandboxError> {
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
        // An invalid policy (relative deny paths, unacknowledged full access) is refused here
        // as it is where runs are planned.
        self.validate()?;
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        self.write_allowed(r, &p)?;
        Ok(p)
    }

    pub(crate) fn write_allowed(&self, r: &mut PathResolver, p: &Path) -> Result<(), SandboxError> {
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
}

#[cfg(not(unix))]
impl SandboxPolicy {
    /// Opens `path` for reading if the policy allows it (POSIX only in this build).
    ///
    /// # Errors
    /// [`SandboxError::Unsupported`]: this build opens files without following symbolic links
    /// only on POSIX systems, and refuses rather than open them unchecked.
    pub fn open_read(&self, path: &Path) -> Result<std::fs::File, SandboxError> {
        Err(SandboxError::Unsupported(format!("read {}: the file tools open files safely only on Linux and macOS in this build", path.display())))
    }

    /// Opens `path` for writing if the policy allows it (POSIX only in this build).
    ///
    /// # Errors
    /// As [`SandboxPolicy::open_read`].
    pub fn open_write(&self, path: &Path, _mode: WriteMode) -> Result<std::fs::File, SandboxError> {
        Err(SandboxError::Unsupported(format!("write {}: the file tools open files safely only on Linux and macOS in this build", path.display())))
    }
}

#[cfg(all(test, unix))]
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
    fn an_invalid_policy_is_refused_by_the_file_tools() {
        let (_d, _home, _ws, p) = world();
        let mut full = p.clone();
        full.mode = SandboxMode::FullAccess;
        assert!(full.check_read("/etc/passwd".as_ref()).is_err(), "full access without the acknowledgment");
        full.unconfined_acknowledged = true;
        assert!(full.check_read("/etc/passwd".as_ref()).is_ok());
        let mut relative = p.clone();
        relative.deny_paths.push("secrets".into());
        assert!(relative.check_read("src/main.rs".as_ref()).unwrap_err().to_string().contains("absolute"));
        assert!(relative.open_read("src/main.rs".as_ref()).is_err());
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
