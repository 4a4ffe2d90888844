//! Path checks for the non-shell tools of spec 7.2 (`read_file`, `write_file`, `edit_file`):
//! the same policy as the shell sandbox, with symlinks and `..` resolved first.

use std::path::{Path, PathBuf};

use crate::error::SandboxError;
use crate::plan::resolve::PathResolver;
use crate::policy::{SandboxMode, SandboxPolicy};

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

impl SandboxPolicy {
    /// Checks that a tool may read `path` (relative paths are relative to the workspace).
    /// Returns the resolved path to open.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] naming the path when it is denied or outside every readable root.
    pub fn check_read(&self, path: &Path) -> Result<PathBuf, SandboxError> {
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        if self.mode == SandboxMode::FullAccess {
            return Ok(p);
        }
        if let Some(d) = denied(r, self, &p) {
            return Err(SandboxError::Policy(format!("read {}: denied (credential path {})", p.display(), d.display())));
        }
        let mut roots = vec![self.workspace_path.clone()];
        roots.extend(self.read_only_paths.iter().cloned());
        roots.extend(self.writable_paths.iter().cloned());
        if under_any(r, &p, &roots) {
            Ok(p)
        } else {
            Err(SandboxError::Policy(format!("read {}: outside the sandbox's readable paths", p.display())))
        }
    }

    /// Checks that a tool may write `path`. Returns the resolved path to open.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] naming the path when it is denied or outside every writable root.
    pub fn check_write(&self, path: &Path) -> Result<PathBuf, SandboxError> {
        let r = &mut PathResolver::new();
        let p = resolve(r, self, path);
        if self.mode == SandboxMode::FullAccess {
            return Ok(p);
        }
        if let Some(d) = denied(r, self, &p) {
            return Err(SandboxError::Policy(format!("write {}: denied (credential path {})", p.display(), d.display())));
        }
        let mut roots = self.writable_paths.clone();
        if self.mode == SandboxMode::WorkspaceWrite {
            roots.push(self.workspace_path.clone());
        }
        if under_any(r, &p, &roots) {
            Ok(p)
        } else {
            Err(SandboxError::Policy(format!("write {}: outside the sandbox's writable paths", p.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{build_sandbox_policy, SandboxSettings};
    use crate::policy::SandboxMode;

    #[test]
    fn read_write_checks_resolve_symlinks_and_dotdot() {
        let d = crate::test_dir();
        let home = d.path().join("home");
        let ws = d.path().join("ws");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "k").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), ws.join("link")).unwrap();
        let s = SandboxSettings { home: Some(home.clone()), ..Default::default() };
        let p = build_sandbox_policy(&ws, &s).unwrap();
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
}
