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
//! * a fresh `/proc` shows only the sandbox's processes; the network namespace has only `lo`;
//! * last, the command's `/` becomes a fresh root holding only the granted paths ([`FreshRoot`]):
//!   reads are confined by what exists, and Landlock at Full handles no read right (see
//!   `linux::compile`), so that an `open` is not checked against its rules.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::resolve::{FileKind, PathResolver};
use crate::policy::{SandboxMode, SandboxPolicy};


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

/// A file the command sees in place of another (a toolchain config without its credentials):
/// written into the private `/dev` and bound read-only over `target`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ConfigOverlay {
    /// The original (canonical path).
    pub target: PathBuf,
    /// What the command reads there.
    pub content: String,
}

/// The private `$HOME` of a Full-level run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HomeView {
    /// `$HOME` (canonical), covered by an empty tmpfs, read-only once populated.
    pub home: PathBuf,
    /// Canonical paths under it bound back from the host (outermost only), with their
    /// submounts: read-only grants stay read-only, the workspace and writable grants writable.
    pub keep: Vec<PathBuf>,
    /// Symbolic links under `$HOME` on the way to a grant (`~/.cargo -> /opt/cargo`), recreated
    /// in the view: (link, target as stored).
    pub symlinks: Vec<(PathBuf, PathBuf)>,
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
    /// Protected workspace paths made private for the run (see [`crate::guard::protected`]).
    #[serde(default)]
    pub protected: Vec<crate::guard::protected::ProtectedPath>,
    /// The per-run staging directory of the private copies (upper layers), set by the runner:
    /// `<staging>/<i>/upper`, `<staging>/<i>/work`, `<staging>/<i>/file`.
    #[serde(default)]
    pub staging: Option<PathBuf>,
    /// Private tmpfs mounts (`/tmp`, `/dev/shm` in workspace-write; `/tmp` read-only-empty is not
    /// used in read-only mode, where `/tmp` stays the host's, read-only).
    pub tmpfs: Vec<PathBuf>,
    /// Size of each private tmpfs (`size=`), bytes; `None` only in plans from older versions.
    #[serde(default)]
    pub tmpfs_size_bytes: Option<u64>,
    /// Inode bound of each private tmpfs (`nr_inodes=`): without it, empty files pin kernel
    /// memory that `size=` does not count.
    #[serde(default)]
    pub tmpfs_inodes: Option<u64>,
    /// Read-only grants under a private tmpfs, bound back into it read-only.
    #[serde(default)]
    pub tmpfs_ro_binds: Vec<PathBuf>,
    /// Writable grants under a private tmpfs (a workspace in /tmp), bound back into it.
    #[serde(default)]
    pub tmpfs_rw_binds: Vec<PathBuf>,
    /// Masked credential paths.
    pub masks: Vec<Mask>,
    /// `$HOME` replaced by an empty read-only tmpfs that holds only the granted paths under it
    /// (toolchains, the workspace, extra grants): a watch or a `stat` on `$HOME` sees nothing
    /// of the user's other files (red-team finding: inotify works where Landlock refuses to list).
    #[serde(default)]
    pub home_view: Option<HomeView>,
    /// Scrubbed toolchain configs bound over the originals.
    #[serde(default)]
    pub config_overlays: Vec<ConfigOverlay>,
    /// Hostname set in the UTS namespace; `None` keeps the host's (the namespace still stops
    /// the command from renaming the host). Tools resolve the hostname through `/etc/hosts`
    /// (`hostname -f`, Java's `InetAddress.getLocalHost`, `getent hosts $(hostname)`), which
    /// lists the host's name, not a made-up one; and `/etc/hostname` is readable anyway.
    #[serde(default)]
    pub hostname: Option<String>,
    /// A private `/dev`: a tmpfs holding only `dev_nodes` (bound from the host), a private devpts
    /// instance (the user's own terminals are not reachable), `/dev/shm` and the `fd`/`std*`
    /// links. Without it uid 0 could write raw block devices, which read-only mounts do not stop.
    pub private_dev: bool,
    /// Device nodes bound into the private `/dev`.
    pub dev_nodes: Vec<PathBuf>,
    /// `network = "full"`: no network namespace of its own (the host's network, open).
    #[serde(default)]
    pub host_network: bool,
    /// The command's `/`: a fresh read-only tmpfs holding only what the plan grants, bound from
    /// the tree the mounts above made (see [`FreshRoot`]); `None` keeps the host's tree
    /// (read-only), where Landlock alone confines reads.
    #[serde(default)]
    pub fresh_root: Option<FreshRoot>,
    /// Denied paths no mount can hide: absent at launch, inside a writable grant (the command
    /// could create one and read it). Landlock denies them where there is Landlock; without it
    /// the protection table reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmaskable: Vec<PathBuf>,
    /// Read-only toolchain directories given a private writable layer for the run, kept across
    /// runs of this workspace ([`Layer`]): the cargo home, so that crates a run downloads stay
    /// for the next one while the host's registry is never written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Layer>,
}

/// A directory the command sees writable through an overlay: the lower layer is the directory
/// itself (the host's, unchanged), the upper and work directories are `store/upper` and
/// `store/work` in the workspace's persistent tool caches (`SandboxPolicy::tool_caches`),
/// made by PID 1 without following links. The runner mounts it only while it holds the store's
/// lock (one run of the workspace at a time: overlayfs leaves two mounts sharing an upper
/// directory undefined); otherwise, or where the overlay cannot be mounted, the directory stays
/// read-only and a warning says so.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// The directory (canonical): the lower layer and the mount point.
    pub path: PathBuf,
    /// The directory that holds its `upper` and `work` directories.
    pub store: PathBuf,
}

/// Where a workspace's tool caches (`cache`) keep the cargo home's layer.
#[must_use]
pub fn cargo_layer_store(cache: &Path) -> PathBuf {
    cache.join("cargo-home")
}

/// The layers of `policy` (see [`Layer`]): its cargo home (`$CARGO_HOME` of this process when
/// absolute, else `~/.cargo`) when the workspace has persistent tool caches and the cargo home
/// is a directory granted read-only, neither written by a grant nor holding the caches or the
/// workspace; and when the run can download (a network other than `deny`) or an earlier one
/// did (the layer holds something): the overlay mount adds ~0.7 ms p50 to a run on a disk file
/// system (150 interleaved runs), which a run that can fetch nothing and has nothing kept would
/// pay for nothing.
pub fn layers(resolver: &mut PathResolver, policy: &SandboxPolicy) -> Vec<Layer> {
    let Some(cache) = policy.tool_caches.as_ref().filter(|c| policy.writable_paths.contains(c)) else { return Vec::new() };
    let store = cargo_layer_store(cache);
    let kept = || std::fs::read_dir(store.join("upper")).is_ok_and(|mut d| d.next().is_some());
    if policy.network_access == crate::policy::NetworkPolicy::Deny && !kept() {
        return Vec::new();
    }
    let given = std::env::var_os("CARGO_HOME").map(PathBuf::from).filter(|p| p.is_absolute()).or_else(|| policy.home.as_ref().map(|h| h.join(".cargo")));
    let Some(home) = given.and_then(|g| resolver.canonicalize(&g).ok()).filter(|c| c.kind == FileKind::Dir).map(|c| c.path) else { return Vec::new() };
    let mut canon = |p: &PathBuf| resolver.canonicalize_lenient(p).path;
    let read: Vec<PathBuf> = policy.read_only_paths.iter().map(&mut canon).collect();
    let written: Vec<PathBuf> = policy.writable_paths.iter().chain(std::iter::once(&policy.workspace_path)).map(&mut canon).collect();
    let overlaps = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    if !read.iter().any(|r| home.starts_with(r)) || written.iter().any(|w| overlaps(&home, w)) || home == Path::new("/") {
        return Vec::new();
    }
    vec![Layer { path: home, store }]
}

/// The most binds a fresh root is built with. Each costs PID 1 ~20 µs per run (a `mkdir` and a
/// recursive bind; a Landlock rule costs ~2.5 µs): a policy with more separate grants (100
/// `--allow-read` directories added ~2.9 ms per run in the quick latency run of `.ci/run` on
/// 20a6ac1) keeps the host's tree, read-only, and Landlock's read rights, as Full did before.
pub const MAX_FRESH_ROOT_BINDS: usize = 32;

/// Where PID 1 mounts the fresh root while it builds it: a directory of the private `/dev`, made
/// before that is read-only (the copy of it that the new root's `/dev` shows is unmounted after
/// the switch).
pub const FRESH_ROOT_DIR: &str = "/dev/.localgpt-root";

/// Full's fresh root, as bubblewrap builds one: after every other mount of the plan (read-only
/// host tree, private `/tmp`, `/dev`, `$HOME` view, masks, `/proc`, `/sys`), PID 1 binds each of
/// `binds` (with the mounts under it) into an empty tmpfs at the same path, recreates `symlinks`,
/// switches root to it (`pivot_root`) and detaches the old one. Nothing else of the host exists
/// for the command: not a sibling of the workspace, not a file created during the run next to a
/// grant. Reads are then confined by the mount namespace, and Landlock handles no read right at
/// Full (an open that asks only for rights a ruleset does not handle is not checked against it:
/// a directory walk no longer pays Landlock's per-open path walk).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct FreshRoot {
    /// Canonical paths bound at the same path in the new root, outermost only, in path order.
    pub binds: Vec<PathBuf>,
    /// Symbolic links recreated on the way to them (`/bin -> usr/bin`, `~/.cargo -> /opt/cargo`):
    /// (link, target as stored).
    pub symlinks: Vec<(PathBuf, PathBuf)>,
}

/// The fresh root that shows `kept` (canonical paths; missing ones are skipped) and the links met
/// on the way to each of `named` (paths as the policy names them) and directly under `/`.
/// `None` when `/` itself is kept (nothing to hide), or when it would take more than
/// [`MAX_FRESH_ROOT_BINDS`] binds (before any link is read).
#[must_use]
pub fn fresh_root(resolver: &mut PathResolver, kept: impl IntoIterator<Item = PathBuf>, named: &[PathBuf]) -> Option<FreshRoot> {
    let mut all: Vec<PathBuf> = kept.into_iter().filter(|p| p.is_absolute() && resolver.lexists(p)).collect();
    if all.iter().any(|p| p == Path::new("/")) {
        return None;
    }
    all.sort();
    all.dedup();
    let mut binds: Vec<PathBuf> = Vec::new();
    for p in all {
        // Sorted component by component: an ancestor comes right before what it contains.
        if !binds.last().is_some_and(|b| p.starts_with(b)) {
            binds.push(p);
        }
    }
    if binds.len() > MAX_FRESH_ROOT_BINDS {
        return None;
    }
    let mut symlinks: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut add = |link: PathBuf, target: PathBuf| {
        if !binds.iter().any(|b| link.starts_with(b)) && !symlinks.iter().any(|(l, _)| *l == link) {
            symlinks.push((link, target));
        }
    };
    if let Ok(entries) = std::fs::read_dir("/") {
        for e in entries.filter_map(Result::ok) {
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                if let Some(t) = resolver.link_at(&e.path()) {
                    add(e.path(), t);
                }
            }
        }
    }
    for n in named.iter().filter(|n| n.is_absolute()) {
        for (l, t) in resolver.links_on_the_way(n) {
            add(l, t);
        }
    }
    symlinks.sort();
    Some(FreshRoot { binds, symlinks })
}

/// Inodes allowed in a private tmpfs of `bytes`: one per 8 KiB, at least 65536.
#[must_use]
pub fn tmpfs_inodes_for(bytes: u64) -> u64 {
    (bytes / 8192).max(65_536)
}

/// Builds the namespace plan for `policy`, mapping `uid`/`gid` to themselves; each private
/// tmpfs gets `tmp_bytes`.
#[must_use]
pub fn namespace_plan(policy: &SandboxPolicy, uid: u32, gid: u32, tmp_bytes: u64) -> NamespacePlan {
    namespace_plan_with(&mut PathResolver::new(), policy, uid, gid, tmp_bytes)
}

/// [`namespace_plan`] with a caller's resolver (shared with the rest of a plan).
#[must_use]
pub fn namespace_plan_with(resolver: &mut PathResolver, policy: &SandboxPolicy, uid: u32, gid: u32, tmp_bytes: u64) -> NamespacePlan {
    let workspace_writable = policy.mode == SandboxMode::WorkspaceWrite;
    let workspace = policy.workspace_path.as_path();
    let writable = &policy.writable_paths;
    let private_tmp: Vec<PathBuf> = if workspace_writable {
        crate::defaults::SCRATCH_WRITE_DIRS.iter().map(PathBuf::from).collect()
    } else {
        Vec::new()
    };
    let deny_paths = &policy.deny_paths;
    let mut canon = |p: &Path| resolver.canonicalize(p).ok();
    let mut rw_binds = Vec::new();
    if workspace_writable {
        rw_binds.push(workspace.to_path_buf());
    }
    for w in writable {
        if private_tmp.iter().any(|t| t == w) {
            continue;
        }
        if let Some(c) = canon(w) {
            if !rw_binds.contains(&c.path) {
                rw_binds.push(c.path);
            }
        }
    }
    // A scratch dir that is itself granted writable (a workspace that is /tmp) stays the host's.
    // Otherwise it is a fresh tmpfs, and the writable grants under it (a workspace in /tmp,
    // --allow-write /tmp/x) are bound back into it: only they are the host's, the rest of the
    // host's /tmp stays out of reach.
    let mut tmpfs = Vec::new();
    let mut tmpfs_rw_binds = Vec::new();
    for t in &private_tmp {
        let (canon_t, is_dir) = match canon(t) {
            Some(c) => (c.path, c.kind == FileKind::Dir),
            None => (t.clone(), t.is_dir()),
        };
        if rw_binds.iter().any(|b| canon_t.starts_with(b)) {
            continue;
        }
        if is_dir {
            tmpfs_rw_binds.extend(rw_binds.iter().filter(|b| b.starts_with(&canon_t)).cloned());
            tmpfs.push(canon_t);
        }
    }
    // Read-only grants that a fresh tmpfs would hide (a binary or a HOME under /tmp): bound back,
    // read-only, inside the private tmpfs, so /tmp stays private and the grant stays visible.
    let tmpfs_ro_binds: Vec<PathBuf> = policy
        .read_only_paths
        .iter()
        .filter_map(|p| canon(p))
        .map(|c| c.path)
        .filter(|p| tmpfs.iter().any(|t| p.starts_with(t) && p != t))
        .collect();
    let mut masks: Vec<Mask> = Vec::new();
    for d in deny_paths {
        let Some(c) = canon(d) else { continue };
        let kind = if c.kind == FileKind::Dir { MaskKind::EmptyDir } else { MaskKind::EmptyFile };
        let c = c.path;
        if !masks.iter().any(|m| c.starts_with(&m.path)) {
            masks.retain(|m| !m.path.starts_with(&c));
            masks.push(Mask { path: c, kind });
        }
    }
    let home_view = home_view(resolver, policy, &tmpfs);
    if let Some(h) = &home_view {
        // A credential path under $HOME is invisible unless a kept path contains it.
        masks.retain(|m| !m.path.starts_with(&h.home) || h.keep.iter().any(|k| m.path.starts_with(k)));
    }
    NamespacePlan {
        uid,
        gid,
        rw_binds,
        protected: Vec::new(),
        staging: None,
        tmpfs,
        tmpfs_size_bytes: Some(tmp_bytes),
        tmpfs_inodes: Some(tmpfs_inodes_for(tmp_bytes)),
        tmpfs_ro_binds,
        tmpfs_rw_binds,
        masks,
        home_view,
        config_overlays: Vec::new(),
        hostname: None,
        private_dev: Path::new("/dev").is_dir(),
        // One `stat` each: exists and is not a directory.
        dev_nodes: crate::defaults::DEVICE_PATHS
            .iter()
            .map(PathBuf::from)
            .filter(|p| p != Path::new("/dev/ptmx") && resolver.canonicalize(p).is_ok_and(|r| r.kind != FileKind::Dir))
            .collect(),
        host_network: policy.network_access == crate::policy::NetworkPolicy::Full,
        fresh_root: None,
        unmaskable: Vec::new(),
        layers: Vec::new(),
    }
}

/// The private `$HOME` for `policy`, or `None` when there is nothing to hide it from: no
/// `$HOME`, `$HOME` is `/`, the workspace itself (or one above it), or a private tmpfs already
/// covers it.
fn home_view(resolver: &mut PathResolver, policy: &SandboxPolicy, tmpfs: &[PathBuf]) -> Option<HomeView> {
    let given = policy.home.as_deref()?;
    let home = resolver.canonicalize(given).ok().filter(|c| c.kind == FileKind::Dir)?.path;
    let ws = &policy.workspace_path;
    if home == Path::new("/") || home.starts_with(ws) || tmpfs.iter().any(|t| home.starts_with(t)) {
        return None;
    }
    let mut keep: Vec<PathBuf> = Vec::new();
    let mut symlinks: Vec<(PathBuf, PathBuf)> = Vec::new();
    let grants = || policy.read_only_paths.iter().chain(&policy.writable_paths).chain(std::iter::once(ws));
    // `$HOME` itself granted (or made writable through a directory above it): the real one is
    // the view, read-only or writable as granted, credentials masked like anywhere else. (A
    // system directory above it, `/opt` for a `$HOME` in `/opt`, keeps the private view.)
    let granted_whole = grants().any(|g| resolver.canonicalize(g).is_ok_and(|c| c.path == home))
        || policy.writable_paths.iter().any(|g| resolver.canonicalize(g).is_ok_and(|c| home.starts_with(&c.path)));
    if granted_whole {
        return None;
    }
    for g in grants() {
        // Links on the way, as given (a grant is usually `$HOME/...` with $HOME as the user has it).
        if let Ok(rest) = g.strip_prefix(given) {
            let mut at = home.clone();
            let mut plain = true;
            for c in rest.components() {
                at.push(c);
                // Up to the first link, a plain component keeps `at` canonical (the resolver's
                // memory answers); past a `.` or `..` the kernel's reading of it decides.
                plain &= matches!(c, std::path::Component::Normal(_));
                let link = if plain { resolver.link_at(&at) } else { std::fs::read_link(&at).ok() };
                if let Some(t) = link {
                    if !symlinks.iter().any(|(l, _)| *l == at) {
                        symlinks.push((at.clone(), t));
                    }
                    break; // the rest resolves through the link's target
                }
            }
        }
        let Ok(c) = resolver.canonicalize(g) else { continue };
        if c.path.starts_with(&home) && c.path != home && !keep.iter().any(|k| c.path.starts_with(k)) {
            keep.retain(|k| !k.starts_with(&c.path));
            keep.push(c.path);
        }
    }
    // A link whose own path lies inside a kept path is bound back with it.
    symlinks.retain(|(l, _)| !keep.iter().any(|k| l.starts_with(k)));
    Some(HomeView { home, keep, symlinks })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::config::{build_sandbox_policy, SandboxSettings};

    #[test]
    fn fresh_root_binds_outermost_grants_and_recreates_links_on_the_way() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        for p in ["real/tools/bin", "real/data", "other"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        std::fs::write(root.join("real/file"), "x").unwrap();
        // link -> real (absolute), real/tools/up -> ../data (relative, through a parent).
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        std::os::unix::fs::symlink("../data", root.join("real/tools/up")).unwrap();
        let kept = [root.join("real/tools"), root.join("real/tools/bin"), root.join("real/file"), root.join("missing")];
        let named = [root.join("link/tools/bin"), root.join("link/tools/up")];
        // With a resolver that has already walked the paths (as the plan's has), and a fresh one.
        let mut warm = PathResolver::new();
        for n in &named {
            let _ = warm.canonicalize(n);
        }
        let r = fresh_root(&mut warm, kept.clone(), &named).expect("a fresh root");
        assert_eq!(Some(&r), fresh_root(&mut PathResolver::new(), kept, &named).as_ref());
        assert_eq!(r.binds, vec![root.join("real/file"), root.join("real/tools")]);
        assert!(r.symlinks.contains(&(root.join("link"), root.join("real"))), "{:?}", r.symlinks);
        // A link inside a bind comes with it.
        assert!(!r.symlinks.iter().any(|(l, _)| l.starts_with(root.join("real/tools"))), "{:?}", r.symlinks);
        // The links directly under / are recreated (the merged-/usr ones: /bin -> usr/bin).
        for e in std::fs::read_dir("/").unwrap().filter_map(Result::ok).filter(|e| e.file_type().is_ok_and(|t| t.is_symlink())) {
            assert!(r.symlinks.iter().any(|(l, _)| *l == e.path()), "{} not recreated", e.path().display());
        }
        // Nothing to hide when / itself is granted.
        assert!(fresh_root(&mut PathResolver::new(), [PathBuf::from("/"), root.join("real")], &[]).is_none());
        // A chain of links is followed the way the kernel follows it.
        std::os::unix::fs::symlink(root.join("link/tools"), root.join("chain")).unwrap();
        let links = PathResolver::new().links_on_the_way(&root.join("chain/up/x"));
        assert_eq!(links, vec![
            (root.join("chain"), root.join("link/tools")),
            (root.join("link"), root.join("real")),
            (root.join("real/tools/up"), PathBuf::from("../data")),
        ]);
    }

    #[test]
    fn home_view_keeps_only_granted_paths() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let home = root.join("home");
        let ws = home.join("proj");
        for p in [".ssh", ".cargo/bin", ".rustup", ".config/git", "Documents", "proj/.git", "data"] {
            std::fs::create_dir_all(home.join(p)).unwrap();
        }
        std::fs::create_dir_all(root.join("opt-go")).unwrap();
        std::os::unix::fs::symlink(root.join("opt-go"), home.join("go")).unwrap();
        std::fs::write(home.join(".cargo/credentials.toml"), "t").unwrap();
        std::fs::write(home.join(".gitconfig"), "").unwrap();
        let settings = SandboxSettings { home: Some(home.clone()), extra_read: vec![home.join("data")], ..Default::default() };
        let policy = build_sandbox_policy(&ws, &settings).unwrap();
        let p = namespace_plan(&policy, 1000, 1000, 1 << 30);
        let h = p.home_view.as_ref().expect("a home view");
        assert_eq!(h.home, home);
        for k in [".cargo", ".rustup", ".config/git", ".gitconfig", "proj", "data"] {
            assert!(h.keep.contains(&home.join(k)), "{k} not kept: {:?}", h.keep);
        }
        assert!(!h.keep.iter().any(|k| k.ends_with("Documents") || k.ends_with(".ssh")), "{:?}", h.keep);
        assert_eq!(h.symlinks, vec![(home.join("go"), root.join("opt-go"))]);
        // ~/.ssh is simply absent; ~/.cargo/credentials.toml, inside a kept path, is still masked.
        assert!(!p.masks.iter().any(|m| m.path == home.join(".ssh")));
        assert!(p.masks.iter().any(|m| m.path == home.join(".cargo/credentials.toml")));
        // No view when the workspace is $HOME (forced) or $HOME is missing.
        let forced = SandboxSettings { home: Some(home.clone()), force_workspace: true, ..Default::default() };
        assert!(namespace_plan(&build_sandbox_policy(&home, &forced).unwrap(), 0, 0, 1 << 30).home_view.is_none());
        let none = SandboxSettings { home: Some(root.join("nope")), ..Default::default() };
        assert!(namespace_plan(&build_sandbox_policy(&ws, &none).unwrap(), 0, 0, 1 << 30).home_view.is_none());
        // `--allow-write $HOME` / `--allow-read $HOME`: the real $HOME, credentials masked.
        for (read, write) in [(vec![], vec![home.clone()]), (vec![home.clone()], vec![])] {
            let whole = SandboxSettings { home: Some(home.clone()), extra_read: read, extra_write: write, ..Default::default() };
            let p = namespace_plan(&build_sandbox_policy(&ws, &whole).unwrap(), 0, 0, 1 << 30);
            assert!(p.home_view.is_none());
            assert!(p.masks.iter().any(|m| m.path == home.join(".ssh")), "{:?}", p.masks);
        }
    }

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
        let secrets = std::fs::canonicalize(d.path()).unwrap().join("secrets");
        std::fs::create_dir_all(secrets.join("sub")).unwrap();
        std::fs::write(secrets.join("key"), "k").unwrap();
        let settings = SandboxSettings {
            home: Some(home.clone()),
            extra_deny: vec![home.join(".ssh/id_rsa"), secrets.join("sub"), secrets.clone(), secrets.join("key")],
            ..Default::default()
        };
        let policy = build_sandbox_policy(&ws, &settings).unwrap();
        let p = namespace_plan(&policy, 1000, 1000, 1 << 30);
        // The workspace, and its persistent tool caches (in the private home view).
        assert_eq!(p.rw_binds, [vec![ws.clone()], policy.tool_caches.clone().into_iter().collect()].concat());
        assert!(policy.tool_caches.as_ref().is_some_and(|c| c.starts_with(&home)));
        // Credentials under $HOME are not in the private home view at all: no mask needed.
        assert!(p.home_view.as_ref().is_some_and(|h| h.home == home && !h.keep.iter().any(|k| k.ends_with(".ssh"))));
        assert!(!p.masks.iter().any(|m| m.path.starts_with(&home)), "{:?}", p.masks);
        // Elsewhere, denied paths are masked, nested ones folded into their parent.
        assert_eq!(p.masks, vec![Mask { path: secrets.clone(), kind: MaskKind::EmptyDir }]);
        let no_home = SandboxSettings { home: None, extra_deny: vec![secrets.join("key")], ..Default::default() };
        let p2 = namespace_plan(&build_sandbox_policy(&ws, &no_home).unwrap(), 1000, 1000, 1 << 30);
        assert_eq!(p2.masks, vec![Mask { path: secrets.join("key"), kind: MaskKind::EmptyFile }]);
        assert!(p.tmpfs.contains(&PathBuf::from("/tmp")));
        assert!(p.private_dev && p.dev_nodes.contains(&PathBuf::from("/dev/null")));
        assert!(!p.dev_nodes.iter().any(|d| d.ends_with("ptmx") || d.ends_with("pts")));

        let ro = build_sandbox_policy(&ws, &SandboxSettings { mode: SandboxMode::ReadOnly, home: Some(home), ..Default::default() }).unwrap();
        let p = namespace_plan(&ro, 0, 0, 1 << 30);
        assert!(p.rw_binds.is_empty() && p.protected.is_empty() && p.tmpfs.is_empty());
    }

    /// The implementation before the shared resolver, kept as the reference.
    fn reference_plan(policy: &SandboxPolicy, uid: u32, gid: u32) -> NamespacePlan {
        let workspace_writable = policy.mode == SandboxMode::WorkspaceWrite;
        let workspace = policy.workspace_path.as_path();
        let writable = &policy.writable_paths;
        let private_tmp: Vec<PathBuf> = if workspace_writable {
            crate::defaults::SCRATCH_WRITE_DIRS.iter().map(PathBuf::from).collect()
        } else {
            Vec::new()
        };
        let deny_paths = &policy.deny_paths;
        let protected = &policy.protected_workspace_paths;
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
        let mut tmpfs = Vec::new();
        let mut tmpfs_rw_binds = Vec::new();
        for t in &private_tmp {
            let canon_t = canon(t).unwrap_or_else(|| t.clone());
            if rw_binds.iter().any(|b| canon_t.starts_with(b)) {
                continue;
            }
            if canon_t.is_dir() {
                tmpfs_rw_binds.extend(rw_binds.iter().filter(|b| b.starts_with(&canon_t)).cloned());
                tmpfs.push(canon_t);
            }
        }
        // Read-only grants that a fresh tmpfs would hide (a binary or a HOME under /tmp): bound back,
        // read-only, inside the private tmpfs, so /tmp stays private and the grant stays visible.
        let tmpfs_ro_binds: Vec<PathBuf> = policy
            .read_only_paths
            .iter()
            .filter_map(|p| canon(p))
            .filter(|p| tmpfs.iter().any(|t| p.starts_with(t) && p != t))
            .collect();
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
        let unprotected = if workspace_writable {
            protected.iter().map(|rel| workspace.join(rel)).filter(|p| canon(p).is_none()).collect()
        } else {
            Vec::new()
        };
        let _ = (ro_binds, unprotected);
        NamespacePlan {
            uid,
            gid,
            rw_binds,
            protected: Vec::new(),
            staging: None,
            tmpfs,
            tmpfs_size_bytes: Some(1 << 30),
            tmpfs_inodes: Some(tmpfs_inodes_for(1 << 30)),
            tmpfs_ro_binds,
            tmpfs_rw_binds,
            masks,
            home_view: None,
            config_overlays: Vec::new(),
            hostname: None,
            private_dev: Path::new("/dev").is_dir(),
            dev_nodes: crate::defaults::DEVICE_PATHS
                .iter()
                .map(PathBuf::from)
                .filter(|p| p != Path::new("/dev/ptmx") && p.exists() && !p.is_dir())
                .collect(),
            host_network: policy.network_access == crate::policy::NetworkPolicy::Full,
            fresh_root: None,
            unmaskable: Vec::new(),
            layers: Vec::new(),
        }
    }

    /// Same plan as the reference, with a fresh and with a shared (already used) resolver, on a
    /// world of symlinked denies, writable paths and protected workspace paths.
    #[test]
    fn same_plan_as_the_reference() {
        use std::os::unix::fs::symlink;
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (home, ws) = (root.join("home"), root.join("ws"));
        for p in [".ssh", ".config/gh", "real-aws", "extra/w", "outside"] {
            std::fs::create_dir_all(home.join(p)).unwrap();
        }
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(home.join("real-netrc"), "x").unwrap();
        symlink(home.join("real-aws"), home.join(".aws")).unwrap();
        symlink("real-netrc", home.join(".netrc")).unwrap();
        symlink("nowhere", home.join(".npmrc")).unwrap();
        symlink(home.join("outside"), ws.join(".vscode")).unwrap();
        symlink("hooks", ws.join(".git/config")).unwrap();
        symlink(home.join("extra/w"), root.join("w-link")).unwrap();
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
            let settings = SandboxSettings {
                mode,
                home: Some(home.clone()),
                extra_write: if mode == SandboxMode::WorkspaceWrite { vec![root.join("w-link"), home.join("extra/w/")] } else { Vec::new() },
                extra_read: vec![root.join("w-link"), PathBuf::from("/usr/bin/../lib")],
                extra_deny: vec![home.join(".ssh/id_rsa"), home.join(".ssh/../.config/gh")],
                ..Default::default()
            };
            let policy = build_sandbox_policy(&ws, &settings).unwrap();
            let mut want = reference_plan(&policy, 1000, 1000);
            // The reference predates the private $HOME: it is compared on everything else, with
            // the masks the view leaves (masks under $HOME but outside kept paths are dropped).
            let without_view = |mut p: NamespacePlan| {
                p.home_view = None;
                p.protected.clear();
                p
            };
            let got = namespace_plan(&policy, 1000, 1000, 1 << 30);
            if let Some(h) = &got.home_view {
                want.masks.retain(|m| !m.path.starts_with(&h.home) || h.keep.iter().any(|k| m.path.starts_with(k)));
            }
            assert_eq!(without_view(got.clone()), want);
            let mut shared = PathResolver::new();
            for p in policy.read_only_paths.iter().chain(&policy.deny_paths) {
                let _ = shared.canonicalize_lenient(p);
            }
            assert_eq!(namespace_plan_with(&mut shared, &policy, 1000, 1000, 1 << 30), got);
            assert_eq!(namespace_plan_with(&mut shared, &policy, 1000, 1000, 1 << 30), got);
        }
    }

    #[test]
    fn workspace_under_tmp_is_bound_into_a_private_tmp() {
        let d = tempfile::tempdir_in("/tmp").unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        let policy = build_sandbox_policy(&ws, &SandboxSettings { home: None, ..Default::default() }).unwrap();
        let p = namespace_plan(&policy, 0, 0, 1 << 30);
        // /tmp stays private; only the workspace in it is the host's.
        assert!(p.tmpfs.contains(&PathBuf::from("/tmp")));
        assert!(!p.rw_binds.contains(&PathBuf::from("/tmp")));
        assert_eq!(p.tmpfs_rw_binds, vec![ws.clone()]);
        // A read-only grant under /tmp (e.g. the binary of a checkout in /tmp) is bound back.
        let ws2 = crate::test_dir();
        let policy = build_sandbox_policy(
            ws2.path(),
            &SandboxSettings { home: None, extra_read: vec![ws.clone()], ..Default::default() },
        )
        .unwrap();
        let p = namespace_plan(&policy, 0, 0, 1 << 30);
        assert!(p.tmpfs.contains(&PathBuf::from("/tmp")));
        assert_eq!(p.tmpfs_ro_binds, vec![ws.clone()]);
    }
}
