//! Full level: the namespace and mount part of the plan (pure).
//!
//! The helper unshares user + PID namespaces (mapping the caller's uid/gid to themselves), forks a
//! minimal init (PID 1) that unshares mount, network, IPC and UTS namespaces and sets up mounts,
//! then forks the command. What the mounts buy over Standard:
//!
//! * everything outside the workspace, the private `/tmp` and `/dev/shm`, and extra writable
//!   paths is read-only at the mount level (chmod/chown/utimensat/xattrs fail with EROFS);
//! * existing credential paths are masked (an empty read-only tmpfs over a directory, `/dev/null`
//!   over a file): they look empty and cannot be read nor their contents `stat`ed;
//! * workspace paths that run later outside the sandbox (`.git/hooks`, `.git/config`, `.vscode`,
//!   …) are bound read-only;
//! * a fresh `/proc` shows only the sandbox's processes; the network namespace has only `lo`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Workspace paths bound read-only at Full level by default (relative to the workspace).
pub const DEFAULT_PROTECTED_WORKSPACE_PATHS: &[&str] = &[".git/hooks", ".git/config", ".vscode", ".localgpt", ".idea"];

/// How a denied path is hidden.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MaskKind {
    /// An empty read-only tmpfs over a directory.
    EmptyDir,
    /// `/dev/null` bound read-only over a file.
    EmptyFile,
}

/// One masked path.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Mask {
    /// Canonical path.
    pub path: PathBuf,
    /// How.
    pub kind: MaskKind,
}

/// The namespace plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NamespacePlan {
    /// The caller's uid, mapped to itself.
    pub uid: u32,
    /// The caller's gid, mapped to itself.
    pub gid: u32,
    /// Read-write bind mounts (workspace in workspace-write mode, extra writable paths).
    pub rw_binds: Vec<PathBuf>,
    /// Read-only bind mounts inside writable areas (persistence paths).
    pub ro_binds: Vec<PathBuf>,
    /// Private tmpfs mounts (`/tmp`, `/dev/shm` in workspace-write; `/tmp` read-only-empty is not
    /// used in read-only mode, where `/tmp` stays the host's, read-only).
    pub tmpfs: Vec<PathBuf>,
    /// Masked credential paths.
    pub masks: Vec<Mask>,
    /// Hostname set in the UTS namespace; `None` keeps the host's (the namespace still stops
    /// the command from renaming the host). Tools resolve the hostname through `/etc/hosts`
    /// (`hostname -f`, Java's `InetAddress.getLocalHost`, `getent hosts $(hostname)`), which
    /// lists the host's name, not a made-up one; and `/etc/hostname` is readable anyway.
    #[serde(default)]
    pub hostname: Option<String>,
}

/// Builds the namespace plan.
#[must_use]
pub fn namespace_plan(
    uid: u32,
    gid: u32,
    writable: &[PathBuf],
    workspace_writable: bool,
    workspace: &Path,
    private_tmp: &[PathBuf],
    deny_paths: &[PathBuf],
    protected: &[String],
) -> NamespacePlan {
    let canon = |p: &Path| std::fs::canonicalize(p).ok();
    let mut rw_binds = Vec::new();
    if workspace_writable {
        rw_binds.push(workspace.to_path_buf());
    }
    for w in writable {
        if private_tmp.iter().any(|t| t == w) {
            continue;
        }
        if let Some(c) = canon(w) {
            if !rw_binds.contains(&c) {
                rw_binds.push(c);
            }
        }
    }
    // A fresh tmpfs would hide a writable path that lies under it (a workspace in /tmp): such a
    // scratch dir stays the host's, bound read-write, and the plan reports /tmp as shared.
    let mut tmpfs = Vec::new();
    for t in private_tmp {
        let canon_t = canon(t).unwrap_or_else(|| t.clone());
        if rw_binds.iter().any(|b| b.starts_with(&canon_t)) {
            rw_binds.insert(0, canon_t);
        } else if canon_t.is_dir() {
            tmpfs.push(canon_t);
        }
    }
    let mut masks: Vec<Mask> = Vec::new();
    for d in deny_paths {
        let Some(c) = canon(d) else { continue };
        let Ok(meta) = std::fs::metadata(&c) else { continue };
        let kind = if meta.is_dir() { MaskKind::EmptyDir } else { MaskKind::EmptyFile };
        if !masks.iter().any(|m| c.starts_with(&m.path)) {
            masks.retain(|m| !m.path.starts_with(&c));
            masks.push(Mask { path: c, kind });
        }
    }
    let ro_binds = if workspace_writable {
        protected.iter().filter_map(|rel| canon(&workspace.join(rel))).filter(|p| p.starts_with(workspace)).collect()
    } else {
        Vec::new()
    };
    NamespacePlan {
        uid,
        gid,
        rw_binds,
        ro_binds,
        tmpfs,
        masks,
        hostname: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_binds_and_protected_paths() {
        let d = crate::test_dir();
        let home = d.path().join("home");
        let ws = d.path().join("ws");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".netrc"), "x").unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".git/config"), "").unwrap();
        let ws = std::fs::canonicalize(ws).unwrap();
        let home = std::fs::canonicalize(home).unwrap();
        let protected: Vec<String> = DEFAULT_PROTECTED_WORKSPACE_PATHS.iter().map(|s| s.to_string()).collect();
        let p = namespace_plan(
            1000,
            1000,
            &["/tmp".into(), "/dev/shm".into()],
            true,
            &ws,
            &["/tmp".into(), "/dev/shm".into()],
            &[home.join(".ssh"), home.join(".ssh/id_rsa"), home.join(".netrc"), home.join(".aws")],
            &protected,
        );
        assert_eq!(p.rw_binds, vec![ws.clone()]);
        assert_eq!(p.masks.len(), 2, "{:?}", p.masks);
        assert!(p.masks.contains(&Mask { path: home.join(".ssh"), kind: MaskKind::EmptyDir }));
        assert!(p.masks.contains(&Mask { path: home.join(".netrc"), kind: MaskKind::EmptyFile }));
        assert_eq!(p.ro_binds, vec![ws.join(".git/hooks"), ws.join(".git/config")]);
        assert_eq!(p.tmpfs.len(), 2);
        let in_tmp = namespace_plan(0, 0, &[], true, Path::new("/tmp/ws"), &["/tmp".into(), "/dev/shm".into()], &[], &protected);
        assert_eq!(in_tmp.tmpfs, vec![PathBuf::from("/dev/shm")]);
        assert_eq!(in_tmp.rw_binds[0], PathBuf::from("/tmp"));
        let ro = namespace_plan(0, 0, &[], false, &ws, &[], &[], &protected);
        assert!(ro.rw_binds.is_empty() && ro.ro_binds.is_empty());
    }
}
