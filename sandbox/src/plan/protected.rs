//! Protected workspace paths (pure planning): the workspace entries that make programs run
//! later, outside the sandbox — git's directory (hooks, config, redirection files), the
//! directory `core.hooksPath` points to, editor and IDE settings (`.vscode`, `.idea`) and the
//! agent's own config (`.localgpt`).
//!
//! At Full level each one that exists becomes a private copy for the run (an overlay mount whose
//! upper layer is a per-run staging directory; a bound copy for a file): nothing the command
//! writes there reaches the real files during the run, and the path cannot be renamed or
//! removed. After the run the runner reviews what changed (the `review` module): harmless changes
//! are applied to the real files, the rest is kept as pending changes for the user.
//!
//! One that is absent at launch (and every one at Standard level, which has no mount namespace)
//! is reviewed in place after the run instead: what the command created or changed that could
//! run code is taken back out of the real path (restored from a snapshot taken at launch) and
//! kept as a pending change. Until the run ends such a change is live for host processes that
//! read it. Placeholders would close that window but show up in every workspace (`ls -a`,
//! `git clean`, `find -empty`): the compatibility corpus measured it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{gitconfig, gitindex};
use super::resolve::{FileKind, PathResolver};
use crate::policy::SandboxPolicy;

/// What kind of protected path, and so how it is made private.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProtectedKind {
    /// The workspace's `.git` directory: git's own state is applied after the run, config keys
    /// by key, hooks and redirection files are pending.
    GitDir,
    /// A directory whose every change is pending (`.vscode`, `.idea`, the hooks directory).
    Dir,
    /// A file (a `.git` file of a worktree or submodule checkout): a change is pending.
    File,
}

/// One protected path of a run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProtectedPath {
    /// Its path (the workspace joined with the configured name; the workspace is canonical).
    pub path: PathBuf,
    /// How it is made private.
    pub kind: ProtectedKind,
    /// Absent at launch.
    pub absent: bool,
    /// Made private for the run (Full level, present at launch, overlay mounts available);
    /// otherwise the real path is reviewed in place after the run.
    #[serde(default)]
    pub private: bool,
    /// Why it is protected (`configured`, `core.hooksPath = …`).
    pub reason: String,
}

/// A protected name that cannot be protected, and why (reported as a degradation).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Unprotectable {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub why: String,
}

/// The git configuration files every repository of the user reads before its own: system,
/// XDG and global (`~/.gitconfig`).
#[must_use]
pub fn global_git_config_files(home: Option<&Path>) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(h) = home {
        files.push(std::env::var_os("XDG_CONFIG_HOME").map_or_else(|| h.join(".config"), PathBuf::from).join("git/config"));
        files.push(h.join(".gitconfig"));
    }
    files
}

/// The configuration files of the repository whose `.git` entry is `dotgit` (a directory, or a
/// `.git` file naming one): its `config` and `config.worktree`, and the shared repository's
/// `config` when its git directory names one in `commondir` (a linked worktree).
#[must_use]
pub fn repo_git_config_files(dotgit: &Path) -> Vec<PathBuf> {
    let Some(gd) = gitindex::git_dir(dotgit) else { return Vec::new() };
    let mut files = vec![gd.join("config")];
    if let Some(common) = super::read_config_file(&gd.join("commondir"), 4096) {
        let common = common.trim();
        if !common.is_empty() {
            files.push(gd.join(common).join("config"));
        }
    }
    files.push(gd.join("config.worktree"));
    files
}

/// What git's configuration files name that makes git read or run code ([`read_git_configs`]).
#[derive(Clone, Debug, Default)]
pub struct GitConfigRefs {
    /// The files `include.path` and `includeIf.<condition>.path` name, `init.templateDir`, and
    /// the target of a configuration file that is a symbolic link; each with why it counts.
    pub targets: Vec<(PathBuf, String)>,
    /// Every value `core.hooksPath` is given (`~/` expanded, relative values as written), with
    /// the file that gives it. Every one counts, not only the one git would use: protecting a
    /// directory an overridden value names costs nothing.
    pub hooks: Vec<(PathBuf, PathBuf)>,
}

impl GitConfigRefs {
    /// The hooks directories of a repository whose worktree is `worktree` (a relative
    /// `core.hooksPath` is relative to it), each with why it counts.
    #[must_use]
    pub fn hooks_dirs(&self, worktree: &Path) -> Vec<(PathBuf, String)> {
        self.hooks.iter().map(|(v, f)| (crate::plan::resolve::normalize(&worktree.join(v)), format!("core.hooksPath = {} in {}", v.display(), f.display()))).collect()
    }

    fn extend(&mut self, other: &GitConfigRefs) {
        for t in &other.targets {
            if !self.targets.iter().any(|(q, _)| *q == t.0) {
                self.targets.push(t.clone());
            }
        }
        self.hooks.extend(other.hooks.iter().cloned());
    }
}

/// How many configuration files [`read_git_configs`] reads at most (git stops including at a
/// depth of 10).
const CONFIG_FILES: usize = 64;

/// Reads the git configuration `files` (non-blocking, each at most 1 MiB) and every file they
/// include, followed through includes with every condition taken as met: what they name that
/// makes git read or run code. A command that can write one of the named files inside a
/// writable root plants `core.fsmonitor` (or a hook) for the user's next git command — a
/// dotfiles workspace whose `git/config` the global `~/.gitconfig` includes, a repository that
/// includes its committed `.gitconfig-shared`, a nested repository whose hooks are a directory
/// of its worktree.
#[must_use]
pub fn read_git_configs(files: Vec<PathBuf>, home: Option<&Path>) -> GitConfigRefs {
    let expand = |v: &str| match (v.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => PathBuf::from(v),
    };
    let mut queue = files;
    queue.reverse();
    let mut read: Vec<PathBuf> = Vec::new();
    let mut out = GitConfigRefs::default();
    while let Some(f) = queue.pop() {
        if read.contains(&f) || read.len() == CONFIG_FILES {
            continue;
        }
        read.push(f.clone());
        let Some(c) = super::read_config_file(&f, 1 << 20).and_then(|t| gitconfig::parse(&t).ok()) else { continue };
        // A config file that is a symbolic link (`~/.gitconfig -> ~/dotfiles/gitconfig`): git
        // reads its target.
        if let Ok(real) = std::fs::canonicalize(&f) {
            if real != f && !out.targets.iter().any(|(q, _)| *q == real) {
                out.targets.push((real, format!("{} is a symbolic link to it: git reads its settings", f.display())));
            }
        }
        for e in &c.entries {
            let Some(v) = e.value.as_deref().filter(|v| !v.is_empty()) else { continue };
            if e.section == "core" && e.subsection.is_none() && e.key == "hookspath" {
                out.hooks.push((expand(v), f.clone()));
                continue;
            }
            let include = e.key == "path" && (e.section == "include" || (e.section == "includeif" && e.subsection.is_some()));
            let template = e.section == "init" && e.subsection.is_none() && e.key == "templatedir";
            if !(include || template) {
                continue;
            }
            let p = expand(v);
            // Relative to the including file's directory (git's rule for includes).
            let p = crate::plan::resolve::normalize(&if p.is_absolute() { p } else { f.parent().unwrap_or(Path::new("/")).join(p) });
            let key = if include { e.subsection.as_ref().map_or_else(|| "include.path".to_string(), |s| format!("includeIf.{s}.path")) } else { "init.templateDir".to_string() };
            let why = format!("{key} in {}: git reads settings that run programs from it", f.display());
            if include {
                queue.insert(0, p.clone());
            }
            if !out.targets.iter().any(|(q, _)| *q == p) {
                out.targets.push((p, why));
            }
        }
    }
    out
}

/// The `.git` git finds from `dir`: `dir/.git`, or the nearest one above it (`dir` is a
/// subdirectory of a repository's worktree).
#[must_use]
pub fn enclosing_dotgit(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().map(|a| a.join(".git")).find(|g| std::fs::symlink_metadata(g).is_ok())
}

/// What [`protected_paths`] found.
#[derive(Debug, Default)]
pub struct ProtectedSet {
    /// The protected paths.
    pub paths: Vec<ProtectedPath>,
    /// The configured or found ones that cannot be protected, and why.
    pub unprotectable: Vec<Unprotectable>,
    /// Every directory the nested walk read, with its depth (for the walk after the run).
    pub nested_dirs: Vec<(PathBuf, usize)>,
    /// The files git's configuration includes that lie inside a protected git directory: the
    /// review reads them key by key, as the repository's `config`.
    pub git_config_files: Vec<PathBuf>,
}

/// The protected paths of `policy`'s workspace and of every other writable root (workspace-write
/// mode only), and the configured ones that cannot be protected.
///
/// `.git` and any `.git/…` entry of the configured list stand for the whole git directory. A
/// writable root other than the workspace (`--allow-write DIR`, not the scratch directories)
/// gets the same names: `--allow-write $T -- "echo x > $T/.git/config"` is a change to a
/// repository's config like any other. Each repository's configuration (system, global, its
/// own, followed through includes; read once each) adds what it names in the workspace: the
/// `core.hooksPath` directory and the included files, for the workspace's repository, the other
/// writable roots' and every nested repository and submodule found.
#[must_use]
pub fn protected_paths(resolver: &mut PathResolver, policy: &SandboxPolicy) -> ProtectedSet {
    let home = policy.home.as_deref();
    let global = read_git_configs(global_git_config_files(home), home);
    let mut refs = global.clone();
    // The repository git finds from a root: its own `.git`, or the nearest one above it (a
    // workspace that is a subdirectory of a monorepo, whose `core.hooksPath` may name a
    // directory of the workspace: husky's `cd .. && husky frontend/.husky`); and its worktree.
    let repo_refs = |root: &Path| {
        let dotgit = enclosing_dotgit(root);
        let worktree = dotgit.as_deref().and_then(Path::parent).unwrap_or(root).to_path_buf();
        (worktree, dotgit.map(|g| read_git_configs(repo_git_config_files(&g), home)).unwrap_or_default())
    };
    let (ws_tree, ws_refs) = repo_refs(&policy.workspace_path);
    refs.extend(&ws_refs);
    let mut included: Vec<PathBuf> = refs.targets.iter().map(|(p, _)| p.clone()).collect();
    let (mut out, mut bad) = protected_in(resolver, policy, &policy.workspace_path, &ws_tree, &refs);
    let scratch = crate::defaults::tables(policy.platform).scratch_write;
    let mut roots: Vec<PathBuf> = Vec::new();
    for w in &policy.writable_paths {
        if scratch.iter().any(|s| Path::new(s) == w) {
            continue;
        }
        let Ok(c) = resolver.canonicalize(w) else { continue };
        if c.kind != FileKind::Dir || c.path.starts_with(&policy.workspace_path) || roots.contains(&c.path) {
            continue;
        }
        roots.push(c.path);
    }
    for root in &roots {
        // The workspace's includes may name a file in this root; its own repository's
        // `core.hooksPath` is relative to it.
        let mut r = GitConfigRefs { targets: refs.targets.clone(), hooks: global.hooks.clone() };
        let (tree, own) = repo_refs(root);
        r.extend(&own);
        included.extend(r.targets.iter().map(|(p, _)| p.clone()));
        let (o, b) = protected_in(resolver, policy, root, &tree, &r);
        let taken: Vec<PathBuf> = out.iter().map(|p| p.path.clone()).collect();
        out.extend(o.into_iter().filter(|p| !taken.iter().any(|q| p.path.starts_with(q) || q.starts_with(&p.path))));
        bad.extend(b);
    }
    // Nested copies in the workspace (a repository in a subdirectory, `sub/.vscode`), present at
    // launch, found by a bounded walk.
    let (nested, nbad, dirs) = nested_protected(policy);
    let taken: Vec<PathBuf> = out.iter().map(|p| p.path.clone()).collect();
    let nested: Vec<ProtectedPath> = nested.into_iter().filter(|p| !taken.iter().any(|q| p.path.starts_with(q))).collect();
    bad.extend(nbad);
    // Each nested repository and submodule checked out at launch: what its own configuration
    // names in its worktree (`core.hooksPath = .githooks`, `include.path = ../shared.gitconfig`)
    // runs at the user's next git command in it; a relative `core.hooksPath` of the global
    // configuration is relative to each repository's worktree.
    // The global configuration's targets are the workspace's already (protected above): only
    // its hooks paths are resolved again, against each repository's worktree.
    let mut names: Vec<(PathBuf, String)> = Vec::new();
    for g in nested.iter().filter(|p| !p.absent && p.path.file_name().is_some_and(|n| n == ".git")) {
        let Some(worktree) = g.path.parent() else { continue };
        let own = read_git_configs(repo_git_config_files(&g.path), home);
        included.extend(own.targets.iter().map(|(p, _)| p.clone()));
        for n in global.hooks_dirs(worktree).into_iter().chain(own.hooks_dirs(worktree)).chain(own.targets) {
            if !names.iter().any(|(p, _)| *p == n.0) {
                names.push(n);
            }
        }
    }
    out.extend(nested);
    let gits: Vec<PathBuf> = out.iter().filter(|p| p.path.file_name().is_some_and(|n| n == ".git")).map(|p| p.path.clone()).collect();
    // Each under the writable root it lies in (an include may name a file of another one).
    for root in std::iter::once(&policy.workspace_path).chain(&roots) {
        let mine: Vec<(PathBuf, String)> = names
            .iter()
            .filter(|(p, _)| !gits.iter().any(|g| p.starts_with(g)))
            .filter_map(|(p, why)| Some((p.strip_prefix(root).ok()?.to_path_buf(), why.clone())))
            .filter(|(rel, _)| !rel.as_os_str().is_empty())
            .collect();
        for p in protect_names(resolver, root, mine, &mut bad) {
            if !out.iter().any(|q| p.path.starts_with(&q.path) || q.path.starts_with(&p.path)) {
                out.push(p);
            }
        }
    }
    included.sort();
    included.dedup();
    let git_config_files = included.into_iter().filter(|f| out.iter().any(|p| p.kind == ProtectedKind::GitDir && f.starts_with(&p.path))).collect();
    ProtectedSet { paths: out, unprotectable: bad, nested_dirs: dirs, git_config_files }
}

/// How deep below the workspace nested protected names are looked for (`a/b/c/.git` is depth 3).
pub const NESTED_DEPTH: usize = 4;

/// How many directory entries the nested walk reads at most (its cost is one `read_dir` per
/// directory, names only: no `stat`).
pub const NESTED_ENTRIES: usize = 50_000;

/// Directories the nested walk does not enter: dependency and build trees (their own `.git` or
/// `.vscode` are not the user's).
pub const NESTED_SKIP: &[&str] = &["node_modules", "target", "vendor", ".venv", "venv", "__pycache__", "dist", "build", ".cache", ".tox", ".mypy_cache", ".gradle", ".next"];

/// What [`NESTED_STOPPED`] starts with: the nested walk ran out of its budget.
pub const NESTED_STOPPED: &str = "the nested walk stopped after";

/// What [`walk_nested`] found.
#[derive(Default)]
pub struct NestedWalk {
    /// The entries named as a protected name, with their types.
    pub found: Vec<(PathBuf, std::fs::FileType)>,
    /// The directory where the walk ran out of its budget, if it did.
    pub stopped: Option<PathBuf>,
    /// Every directory it read, with its depth (the workspace itself at 0).
    pub dirs: Vec<(PathBuf, usize)>,
}

/// The entries named as one of `names` in `ws`'s subdirectories (depth 1 to [`NESTED_DEPTH`];
/// not inside such an entry, nor in [`NESTED_SKIP`] directories), reading at most `budget`
/// entries. With `known` (the directories an earlier walk read, and when it started), only the
/// directories changed since then are read — a new or renamed entry changes its directory's
/// ctime, which no command can set back — and the directories they hold that the earlier walk
/// did not read (new, or moved in), whole.
#[must_use]
pub fn walk_nested(ws: &Path, names: &[&str], budget: usize, known: Option<(&[(PathBuf, usize)], std::time::SystemTime)>) -> NestedWalk {
    let mut out = NestedWalk::default();
    let mut budget = budget;
    // (directory, depth, read whole below it)
    let mut queue: Vec<(PathBuf, usize, bool)> = Vec::new();
    let mut seen: std::collections::HashSet<&Path> = std::collections::HashSet::new();
    match known {
        None => queue.push((ws.to_path_buf(), 0, true)),
        Some((dirs, since)) => {
            // File times come from a coarse clock that may lag the one `since` was read from by a
            // tick or more: a margin, so that a change right after `since` is never missed.
            let since = since.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()).saturating_sub(2_000_000_000);
            for (d, depth) in dirs {
                seen.insert(d.as_path());
                let changed = std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir() && change_time_ns(&m).is_none_or(|t| t >= since));
                if changed {
                    queue.push((d.clone(), *depth, false));
                }
            }
        }
    }
    while let Some((dir, depth, whole)) = queue.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        out.dirs.push((dir.clone(), depth));
        for e in rd.flatten() {
            if budget == 0 {
                out.stopped = Some(dir);
                return out;
            }
            budget -= 1;
            let name = e.file_name();
            let n = name.to_string_lossy();
            let Ok(ft) = e.file_type() else { continue };
            if names.contains(&n.as_ref()) {
                // Top-level names are the roots' own entries (handled elsewhere).
                if depth > 0 {
                    out.found.push((e.path(), ft));
                }
                continue;
            }
            if ft.is_dir() && depth < NESTED_DEPTH && !NESTED_SKIP.contains(&n.as_ref()) {
                let p = e.path();
                // A directory the earlier walk read is looked at through its own ctime.
                if whole || !seen.contains(p.as_path()) {
                    queue.push((p, depth + 1, true));
                }
            }
        }
    }
    out.found.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// When the inode last changed (ctime, ns since the epoch); `None` where there is no ctime (a
/// walk then reads the directory again).
fn change_time_ns(m: &std::fs::Metadata) -> Option<u128> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        u128::try_from(i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec())).ok()
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        None
    }
}

/// The protected kind of a nested entry named `name` that is a directory (`.git`: git's).
#[must_use]
pub fn nested_kind(name: &str, ft: std::fs::FileType) -> ProtectedKind {
    if ft.is_dir() {
        if name == ".git" { ProtectedKind::GitDir } else { ProtectedKind::Dir }
    } else if name == ".git" {
        ProtectedKind::GitDir
    } else {
        crate::defaults::protected_table().iter().find(|e| e.name == name).map_or(ProtectedKind::Dir, |e| e.kind)
    }
}

/// The table's names present in the workspace's subdirectories (depth 1 to [`NESTED_DEPTH`]),
/// each protected as what it is. A walk that runs out of its budget is reported (the rest of
/// the workspace is not looked at).
fn nested_protected(policy: &SandboxPolicy) -> (Vec<ProtectedPath>, Vec<Unprotectable>, Vec<(PathBuf, usize)>) {
    let names: Vec<&str> = policy.protected_workspace_paths.iter().map(String::as_str).filter(|n| !n.contains('/')).collect();
    let NestedWalk { found, stopped, dirs } = walk_nested(&policy.workspace_path, &names, NESTED_ENTRIES, None);
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (path, ft) in found {
        let n = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let reason = format!("nested copy: {}", table_why(Path::new(&n)));
        protect_present(path, ft, reason, &mut out, &mut bad);
    }
    if let Some(dir) = stopped {
        bad.push(Unprotectable { path: dir, why: format!("{NESTED_STOPPED} {NESTED_ENTRIES} entries: protected names deeper in the workspace were not looked for") });
    }
    // The submodules git would enter, wherever they are (`vendor/lib`, deeper than the walk
    // goes): those `.gitmodules` registers and every gitlink of the repositories' indexes. git
    // runs in each of them for the superproject's `git status`, through its `.git`, which could
    // otherwise be pointed at a git directory the command made under another name, with its own
    // `core.fsmonitor`.
    if names.contains(&".git") {
        // The repository git finds from the workspace (its own, or the one it is a subdirectory
        // of: the submodules of a monorepo inside the package the workspace is), and the nested
        // ones; only the submodules inside the workspace count (nothing else is writable).
        let mut roots: Vec<PathBuf> = enclosing_dotgit(&policy.workspace_path).into_iter().collect();
        roots.extend(out.iter().filter(|p| p.path.file_name().is_some_and(|n| n == ".git")).map(|p| p.path.clone()));
        let mut subs = submodule_gits(&policy.workspace_path, &roots);
        subs.plain.retain(|(g, _)| g.starts_with(&policy.workspace_path));
        subs.linked.retain(|(l, _)| l.starts_with(&policy.workspace_path));
        for (_, path) in subs.linked {
            bad.push(Unprotectable { path, why: format!("a submodule under a symbolic link: {SYMLINK_WHY}") });
        }
        for (index, e) in subs.unreadable {
            bad.push(Unprotectable { path: index, why: format!("{INDEX_UNREAD}: {e}") });
        }
        let mut count = 0usize;
        for (path, reason) in subs.plain {
            if out.iter().any(|p: &ProtectedPath| p.path == path) {
                continue;
            }
            // Each one is a private copy at Full (a mount): bounded. The review after the run
            // takes the `.git` of every one beyond as made during the run.
            if count == SUBMODULE_REPOS {
                let why = format!("more than {SUBMODULE_REPOS} submodules: from {} on they are not protected during the run, and their .git is taken out after it", path.display());
                bad.push(Unprotectable { path: policy.workspace_path.clone(), why });
                break;
            }
            count += 1;
            let reason = format!("{reason}: {}", table_why(Path::new(".git")));
            match std::fs::symlink_metadata(&path) {
                Ok(m) => protect_present(path, m.file_type(), reason, &mut out, &mut bad),
                // Not checked out (or its directory not there): made during the run, it is
                // taken out.
                Err(_) => out.push(ProtectedPath { path, kind: ProtectedKind::GitDir, absent: true, private: false, reason }),
            }
        }
    }
    (out, bad, dirs)
}

/// A protected name present in the workspace, protected as what it is (a directory as
/// [`nested_kind`] says, a file as a file); a symbolic link cannot be, and is reported.
fn protect_present(path: PathBuf, ft: std::fs::FileType, reason: String, out: &mut Vec<ProtectedPath>, bad: &mut Vec<Unprotectable>) {
    let n = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if ft.is_symlink() {
        bad.push(Unprotectable { path, why: SYMLINK_WHY.into() });
    } else if ft.is_dir() {
        out.push(ProtectedPath { path, kind: nested_kind(&n, ft), absent: false, private: false, reason });
    } else if ft.is_file() {
        out.push(ProtectedPath { path, kind: ProtectedKind::File, absent: false, private: false, reason });
    }
}

/// What [`INDEX_UNREAD`] starts with: a repository's index could not be read, so the submodules
/// it registers are not known.
pub const INDEX_UNREAD: &str = "a git index that could not be read (the submodules it registers are not protected)";

/// How many repositories [`submodule_gits`] reads the index of at most.
pub const SUBMODULE_REPOS: usize = 1000;

/// Where git would enter a submodule (what [`submodule_gits`] found).
#[derive(Default, Debug)]
pub struct SubmoduleGits {
    /// The `.git` of each submodule with no symbolic link on the way, and what registers it.
    pub plain: Vec<(PathBuf, String)>,
    /// Each submodule whose directory is reached through a symbolic link: the first link on the
    /// way, and the `.git` behind it.
    pub linked: Vec<(PathBuf, PathBuf)>,
    /// Each index that could not be read (or the repository where the count ran out), and why.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// The submodules git would enter in the repositories whose `.git` entries are `dotgits`: each
/// gitlink of their indexes ([`gitindex::gitlinks`]), and of the submodules' own indexes in
/// turn, plus the `path`s of the workspace's `.gitmodules`. Paths that are absolute or climb with
/// `..` are left out (git refuses them too). Reads at most [`SUBMODULE_REPOS`] indexes.
#[must_use]
pub fn submodule_gits(ws: &Path, dotgits: &[PathBuf]) -> SubmoduleGits {
    let mut out = SubmoduleGits::default();
    let mut queue: Vec<PathBuf> = Vec::new();
    let add = |root: &Path, rel: &Path, why: String, out: &mut SubmoduleGits, queue: &mut Vec<PathBuf>| {
        let mut at = root.to_path_buf();
        let mut link = None;
        for c in rel.components() {
            at.push(c);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                link = Some(at.clone());
                break;
            }
        }
        let git = root.join(rel).join(".git");
        match link {
            Some(l) => {
                if !out.linked.iter().any(|(_, g)| *g == git) {
                    out.linked.push((l, git));
                }
            }
            None => {
                if !out.plain.iter().any(|(g, _)| *g == git) {
                    queue.push(git.clone());
                    out.plain.push((git, why));
                }
            }
        }
    };
    for rel in gitmodules_paths(ws) {
        let why = format!("a submodule's git link (.gitmodules: path = {})", rel.display());
        add(ws, &rel, why, &mut out, &mut queue);
    }
    queue.extend(dotgits.iter().rev().cloned());
    let mut read: Vec<PathBuf> = Vec::new();
    while let Some(dotgit) = queue.pop() {
        let (Some(root), Some(gitdir)) = (dotgit.parent(), gitindex::git_dir(&dotgit)) else { continue };
        if read.contains(&gitdir) {
            continue;
        }
        if read.len() == SUBMODULE_REPOS {
            out.unreadable.push((gitdir.join("index"), format!("more than {SUBMODULE_REPOS} repositories: the rest were not read")));
            break;
        }
        read.push(gitdir.clone());
        match gitindex::gitlinks(&gitdir) {
            Ok(rels) => {
                for rel in rels {
                    let why = format!("a submodule's git link (a gitlink in {}: {})", gitdir.join("index").display(), rel.display());
                    add(root, &rel, why, &mut out, &mut queue);
                }
            }
            Err(e) => out.unreadable.push((gitdir.join("index"), e)),
        }
    }
    out
}

/// The `path` of every submodule in the workspace's `.gitmodules` (relative, normalised; a path
/// that is absolute or climbs with `..` is left out, git refuses it too).
fn gitmodules_paths(ws: &Path) -> Vec<PathBuf> {
    let f = ws.join(".gitmodules");
    if !std::fs::symlink_metadata(&f).is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    // Parsed as git parses it (comments, quotes, escapes, continuation lines); a file git
    // refuses registers no submodule for git either.
    let Some(c) = super::read_config_file(&f, 1 << 20).and_then(|t| gitconfig::parse(&t).ok()) else { return Vec::new() };
    let mut out: Vec<PathBuf> = Vec::new();
    for e in c.entries.iter().filter(|e| e.section == "submodule" && e.subsection.is_some() && e.key == "path") {
        let v = e.value.as_deref().unwrap_or("");
        let rel = Path::new(v);
        if v.is_empty() || !rel.components().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir)) {
            continue;
        }
        let rel: PathBuf = rel.components().filter(|c| matches!(c, std::path::Component::Normal(_))).collect();
        if !out.contains(&rel) {
            out.push(rel);
        }
    }
    out
}

/// Why a protected path that is a symbolic link cannot be protected.
const SYMLINK_WHY: &str = "a symbolic link: a mount would land on its target, and the link itself can be replaced";

/// The table's reason for a protected name (relative), or `configured` for a name the user added.
fn table_why(rel: &Path) -> String {
    crate::defaults::protected_table().iter().find(|e| Path::new(&e.name) == rel).map_or_else(|| "configured".to_string(), |e| e.why.clone())
}

/// The protected names of one writable root `ws`, with what the configuration of the repository
/// git finds from it names there (`refs`; a relative `core.hooksPath` is relative to that
/// repository's `worktree`).
fn protected_in(resolver: &mut PathResolver, policy: &SandboxPolicy, ws: &Path, worktree: &Path, refs: &GitConfigRefs) -> (Vec<ProtectedPath>, Vec<Unprotectable>) {
    let mut names: Vec<(PathBuf, String)> = Vec::new();
    let add = |rel: PathBuf, reason: String, names: &mut Vec<(PathBuf, String)>| {
        if !names.iter().any(|(r, _)| *r == rel) {
            names.push((rel, reason));
        }
    };
    for rel in &policy.protected_workspace_paths {
        let p = Path::new(rel);
        let rel = if p.starts_with(".git") { PathBuf::from(".git") } else { p.to_path_buf() };
        let why = table_why(&rel);
        add(rel, why, &mut names);
    }
    // A protected name in the home directory that is a symbolic link into this root (a dotfiles
    // repository: `~/.bashrc -> ~/dotfiles/bashrc`): what the link's target holds runs in the
    // user's next shell (or git, or agent session) as if it were the dotfile itself.
    if let Some(home) = policy.home.as_deref() {
        for name in policy.protected_workspace_paths.iter().filter(|n| !n.contains('/')) {
            let link = home.join(name);
            if !std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                continue;
            }
            // Its target resolved as far as it exists (a dangling link's target is where the
            // command would create the file).
            let Ok(to) = std::fs::read_link(&link) else { continue };
            let target = resolver.canonicalize_lenient(&home.join(to)).path;
            if let Ok(rel) = target.strip_prefix(ws) {
                if !rel.as_os_str().is_empty() {
                    add(rel.to_path_buf(), format!("{} is a symbolic link to it: {}", link.display(), table_why(Path::new(name))), &mut names);
                }
            }
        }
    }
    // The hooks directory and the files git's configuration includes (inside `.git`: part of it).
    for (p, why) in refs.hooks_dirs(worktree).into_iter().chain(refs.targets.iter().cloned()) {
        if let Ok(rel) = p.strip_prefix(ws) {
            if !rel.as_os_str().is_empty() && !rel.starts_with(".git") {
                add(rel.to_path_buf(), why, &mut names);
            }
        }
    }
    let mut bad = Vec::new();
    let mut out = protect_names(resolver, ws, names, &mut bad);
    // A path inside another protected one is covered by it: `p` is dropped when some `q` other
    // than it is its ancestor (`p.starts_with(q) && p != q`, compared on components split once:
    // `Path::starts_with` splits both paths again at each of the n² comparisons).
    let all: Vec<Vec<std::path::Component<'_>>> = out.iter().map(|p| p.path.components().collect()).collect();
    let covered: Vec<bool> = all.iter().map(|p| all.iter().any(|q| q.len() < p.len() && p.starts_with(q))).collect();
    let mut covered = covered.into_iter();
    out.retain(|_| !covered.next().unwrap_or(false));
    (out, bad)
}

/// Each of `names` (relative to `ws`, with why) as a protected path: present, as what it is; a
/// symbolic link, reported; absent, reviewed in place when its nearest existing ancestor is a
/// real directory of `ws` (a `.git` as a git directory, a name of the table as its kind, else a
/// directory).
fn protect_names(resolver: &mut PathResolver, ws: &Path, names: Vec<(PathBuf, String)>, bad: &mut Vec<Unprotectable>) -> Vec<ProtectedPath> {
    let table = crate::defaults::protected_table();
    let entry = |rel: &Path| table.iter().find(|e| Path::new(&e.name) == rel);
    let mut out = Vec::new();
    for (rel, reason) in names {
        let path = ws.join(&rel);
        let git = rel == Path::new(".git");
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => bad.push(Unprotectable {
                path,
                why: SYMLINK_WHY.into(),
            }),
            Ok(m) if m.is_dir() => out.push(ProtectedPath { path, kind: if git { ProtectedKind::GitDir } else { ProtectedKind::Dir }, absent: false, private: false, reason }),
            Ok(m) if m.is_file() => out.push(ProtectedPath { path, kind: ProtectedKind::File, absent: false, private: false, reason }),
            // Absent: what the table says it would be (a directory for a configured name).
            Ok(_) => bad.push(Unprotectable { path, why: "neither a file nor a directory".into() }),
            Err(_) => {
                // Absent: reviewed in place after the run, if its parent is a real directory
                // inside the workspace (resolved, so a symlinked parent cannot lead the review
                // elsewhere).
                // A parent that does not exist yet (a link's target in a directory still to be
                // made) counts by its nearest existing ancestor: the review after the run takes
                // out a link the command puts on the way.
                let existing = path.ancestors().skip(1).find(|a| std::fs::symlink_metadata(a).is_ok());
                let parent_ok = existing.and_then(|p| resolver.canonicalize(p).ok().map(|c| (p, c))).is_some_and(|(p, c)| c.kind == FileKind::Dir && c.path.starts_with(ws) && c.path == p);
                if parent_ok {
                    let kind = if git { ProtectedKind::GitDir } else { entry(&rel).map_or(ProtectedKind::Dir, |e| e.kind) };
                    out.push(ProtectedPath { path, kind, absent: true, private: false, reason });
                } else {
                    bad.push(Unprotectable { path, why: "absent, and its parent is not a directory of the workspace".into() });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{build_sandbox_policy, SandboxSettings};

    #[test]
    fn submodules_from_gitmodules_wherever_they_are() {
        let d = crate::test_dir();
        let ws = d.path();
        for dir in ["vendor/lib", "a/b/c/d/e/deep", "real/x"] {
            std::fs::create_dir_all(ws.join(dir)).unwrap();
        }
        std::os::unix::fs::symlink(ws.join("real"), ws.join("linked")).unwrap();
        std::fs::write(
            ws.join(".gitmodules"),
            "[submodule \"lib\"]\n\tpath = vendor/lib ; checked out by make\n\turl = ../lib\n[submodule \"deep\"]\n\tPath = \"a/b/c/d/e/deep\"\n\
             [submodule \"up\"]\n\tpath = ../up\n[submodule \"abs\"]\n\tpath = /etc\n[submodule \"l\"]\n\tpath = linked/x\n\
             [submodule \"gone\"]\n\tpath = removed/lib\n",
        )
        .unwrap();
        let subs = submodule_gits(ws, &[ws.join(".git")]);
        let plain: Vec<PathBuf> = subs.plain.iter().map(|(g, _)| g.clone()).collect();
        assert_eq!(plain, ["vendor/lib/.git", "a/b/c/d/e/deep/.git", "removed/lib/.git"].map(|r| ws.join(r)));
        assert_eq!(subs.linked, vec![(ws.join("linked"), ws.join("linked/x/.git"))]);
        assert!(subs.unreadable.is_empty());
        // Checked out (a .git file) and not (no .git yet): both protected.
        std::fs::write(ws.join("vendor/lib/.git"), "gitdir: ../../.git/modules/lib\n").unwrap();
        let policy = build_sandbox_policy(ws, &SandboxSettings::default()).unwrap();
        let (found, bad, _) = nested_protected(&policy);
        assert!(bad.iter().any(|b| b.path == ws.join("linked/x/.git") && b.why.contains("symbolic link")), "{bad:?}");
        let got = |rel: &str| found.iter().find(|p| p.path == ws.join(rel)).map(|p| (p.kind, p.absent));
        assert_eq!(got("vendor/lib/.git"), Some((ProtectedKind::File, false)));
        assert_eq!(got("a/b/c/d/e/deep/.git"), Some((ProtectedKind::GitDir, true)));
        assert_eq!(got("removed/lib/.git"), Some((ProtectedKind::GitDir, true)));
        assert_eq!(got("linked/x/.git"), None);
    }

    #[test]
    fn files_git_configuration_includes() {
        let d = crate::test_dir();
        let (ws, home) = (d.path().join("ws"), d.path().join("home"));
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(home.join("dotfiles/git")).unwrap();
        std::fs::write(home.join(".gitconfig"), "[include]\n\tpath = ~/dotfiles/git/config\n[init]\n\ttemplateDir = ~/dotfiles/templates\n").unwrap();
        // Relative to the including file; followed through includes; conditions taken as met.
        std::fs::write(home.join("dotfiles/git/config"), "[includeIf \"gitdir:~/work/\"]\n\tpath = work.conf\n").unwrap();
        std::fs::write(ws.join(".git/config"), "[include]\n\tpath = ../shared.gitconfig\n\tpath = extra.conf\n").unwrap();
        let refs = |ws: &Path| {
            let mut r = read_git_configs(global_git_config_files(Some(&home)), Some(&home));
            r.extend(&read_git_configs(repo_git_config_files(&ws.join(".git")), Some(&home)));
            r
        };
        let got: Vec<PathBuf> = refs(&ws).targets.into_iter().map(|(p, _)| p).collect();
        for want in [home.join("dotfiles/git/config"), home.join("dotfiles/templates"), home.join("dotfiles/git/work.conf"), ws.join("shared.gitconfig"), ws.join(".git/extra.conf")] {
            assert!(got.contains(&want), "{want:?} not in {got:?}");
        }
        // A workspace file one of them names is protected (a file: any change is pending).
        std::fs::write(ws.join("shared.gitconfig"), "[user]\n").unwrap();
        let mut policy = build_sandbox_policy(&ws, &SandboxSettings::default()).unwrap();
        policy.home = Some(home.clone());
        let (out, _) = protected_in(&mut PathResolver::new(), &policy, &ws, &ws, &refs(&ws));
        let shared = out.iter().find(|p| p.path == ws.join("shared.gitconfig")).expect("protected");
        assert_eq!(shared.kind, ProtectedKind::File);
        assert!(shared.reason.starts_with("include.path in "), "{}", shared.reason);
        // A home dotfile that links into the workspace protects the link's target, present or
        // not yet; a global config that is a link, its target.
        std::os::unix::fs::symlink(ws.join("bashrc"), home.join(".bashrc")).unwrap();
        std::fs::write(ws.join("gitconfig"), "[user]\n").unwrap();
        std::fs::rename(home.join(".gitconfig"), home.join("real-gitconfig")).unwrap();
        std::os::unix::fs::symlink(ws.join("gitconfig"), home.join(".gitconfig")).unwrap();
        let (out, _) = protected_in(&mut PathResolver::new(), &policy, &ws, &ws, &refs(&ws));
        let got = |rel: &str| out.iter().find(|p| p.path == ws.join(rel)).map(|p| (p.absent, p.reason.contains("is a symbolic link to it")));
        assert_eq!(got("bashrc"), Some((true, true)));
        assert_eq!(got("gitconfig"), Some((false, true)));
    }

    #[test]
    fn gitlinks_of_the_index_wherever_they_are() {
        if std::process::Command::new("git").arg("--version").output().is_err() {
            eprintln!("skipped: no git");
            return;
        }
        let d = crate::test_dir();
        let ws = d.path();
        let git = |dir: &Path, args: &[&str]| {
            let ok = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().is_ok_and(|o| o.status.success());
            assert!(ok, "git {args:?}");
        };
        git(ws, &["init", "-q", "."]);
        let head = "0123456789abcdef0123456789abcdef01234567";
        // Registered in the index only (no .gitmodules), in a tree the nested walk skips, deeper
        // than it goes, under a link; one checked out as a repository of its own, whose index
        // registers one more.
        for rel in ["build/x", "a/b/c/d/e/f", "lnk/y", "node_modules/m"] {
            git(ws, &["update-index", "--add", "--cacheinfo", &format!("160000,{head},{rel}")]);
        }
        std::fs::create_dir_all(ws.join("build/x")).unwrap();
        std::fs::write(ws.join("build/x/.git"), "gitdir: ../../gd\n").unwrap();
        std::fs::create_dir_all(ws.join("real")).unwrap();
        std::os::unix::fs::symlink(ws.join("real"), ws.join("lnk")).unwrap();
        std::fs::create_dir_all(ws.join("node_modules/m")).unwrap();
        git(&ws.join("node_modules/m"), &["init", "-q", "."]);
        git(&ws.join("node_modules/m"), &["update-index", "--add", "--cacheinfo", &format!("160000,{head},inner")]);
        let policy = build_sandbox_policy(ws, &SandboxSettings::default()).unwrap();
        let (found, bad, _) = nested_protected(&policy);
        let got = |rel: &str| found.iter().find(|p| p.path == ws.join(rel)).map(|p| (p.kind, p.absent));
        assert_eq!(got("build/x/.git"), Some((ProtectedKind::File, false)));
        assert_eq!(got("a/b/c/d/e/f/.git"), Some((ProtectedKind::GitDir, true)));
        assert_eq!(got("node_modules/m/.git"), Some((ProtectedKind::GitDir, false)));
        assert_eq!(got("node_modules/m/inner/.git"), Some((ProtectedKind::GitDir, true)));
        assert!(bad.iter().any(|b| b.path == ws.join("lnk/y/.git") && b.why.contains("symbolic link")), "{bad:?}");
        // An index that does not parse is reported, not passed over.
        std::fs::write(ws.join("node_modules/m/.git/index"), "DIRC junk").unwrap();
        let (_, bad, _) = nested_protected(&policy);
        assert!(bad.iter().any(|b| b.path == ws.join("node_modules/m/.git/index") && b.why.starts_with(INDEX_UNREAD)), "{bad:?}");
    }

    #[test]
    fn protected_paths_present_absent_and_hooks_path() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (home, ws) = (root.join("home"), root.join("ws"));
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\thooksPath = .husky/_\n").unwrap();
        std::os::unix::fs::symlink("/tmp", ws.join(".idea")).unwrap();
        let s = SandboxSettings { home: Some(home), ..Default::default() };
        let policy = build_sandbox_policy(&ws, &s).unwrap();
        let ProtectedSet { paths: p, unprotectable: bad, .. } = protected_paths(&mut PathResolver::new(), &policy);
        let got: Vec<(String, ProtectedKind, bool)> =
            p.iter().map(|x| (x.path.strip_prefix(&ws).unwrap().display().to_string(), x.kind, x.absent)).collect();
        assert_eq!(got[..3], [
            (".git".into(), ProtectedKind::GitDir, false),
            (".vscode".into(), ProtectedKind::Dir, false),
            (".localgpt".into(), ProtectedKind::Dir, true),
        ]);
        // Every other name of the table, absent, as the table's kind (a file is reviewed as one),
        // and .husky/_.
        assert_eq!(got.len(), crate::defaults::protected_table().len(), "all but the linked .idea, and .husky/_");
        assert!(got.contains(&(".bashrc".into(), ProtectedKind::File, true)) && got.contains(&(".claude".into(), ProtectedKind::Dir, true)));
        assert!(p.iter().find(|x| x.path.ends_with(".mcp.json")).unwrap().reason.contains("MCP"), "the table's why is the reason");
        // .idea is a link: reported. .husky/_ has no parent directory yet: protected as absent
        // all the same (its nearest existing ancestor, the workspace, is a real directory; the
        // review after the run takes out what appears there, and a link put on the way).
        let bad: Vec<String> = bad.iter().map(|b| b.path.strip_prefix(&ws).unwrap().display().to_string()).collect();
        assert_eq!(bad, vec![".idea"]);
        assert!(p.iter().any(|x| x.path == ws.join(".husky/_") && x.absent && x.reason.contains("hooksPath")));
        // Below a link, it is not: reported.
        std::os::unix::fs::symlink("/tmp", ws.join(".husky")).unwrap();
        let bad = protected_paths(&mut PathResolver::new(), &policy).unprotectable;
        assert!(bad.iter().any(|b| b.path == ws.join(".husky/_")), "{bad:?}");
    }

    #[test]
    fn a_protected_path_inside_another_is_covered_by_it() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (home, ws) = (root.join("home"), root.join("ws"));
        std::fs::create_dir_all(ws.join(".vscode/sub")).unwrap();
        std::fs::create_dir_all(ws.join(".vscode-x")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let names = [".vscode/sub", ".vscode", ".vscode-x", "./.vscode", ".git/hooks"];
        let s = SandboxSettings { home: Some(home), protected_workspace_paths: names.map(String::from).to_vec(), ..Default::default() };
        let policy = build_sandbox_policy(&ws, &s).unwrap();
        let p = protected_paths(&mut PathResolver::new(), &policy).paths;
        let got: Vec<String> = p.iter().map(|x| x.path.strip_prefix(&ws).unwrap().display().to_string()).collect();
        // `.vscode/sub` lies in `.vscode`; `.vscode-x` only shares its bytes; `./.vscode` is
        // the same path as `.vscode` (equal paths do not cover each other); `.git/hooks` is `.git`.
        assert_eq!(got, [".vscode", ".vscode-x", ".vscode", ".git"]);
    }

    #[test]
    fn nested_repositories_and_copies_are_protected() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(ws.join("sub/repo/.git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("a/.vscode")).unwrap();
        std::fs::write(ws.join("a/.bashrc"), "x\n").unwrap();
        std::fs::create_dir_all(ws.join("node_modules/pkg/.git")).unwrap();
        std::fs::create_dir_all(ws.join("d1/d2/d3/d4/d5/.git")).unwrap();
        let policy = build_sandbox_policy(&ws, &SandboxSettings { home: None, ..Default::default() }).unwrap();
        let p = protected_paths(&mut PathResolver::new(), &policy).paths;
        let got = |rel: &str| p.iter().find(|x| x.path == ws.join(rel)).map(|x| (x.kind, x.absent));
        assert_eq!(got("sub/repo/.git"), Some((ProtectedKind::GitDir, false)));
        assert_eq!(got("a/.vscode"), Some((ProtectedKind::Dir, false)));
        assert_eq!(got("a/.bashrc"), Some((ProtectedKind::File, false)));
        assert_eq!(got("node_modules/pkg/.git"), None, "dependency trees are not walked");
        assert_eq!(got("d1/d2/d3/d4/d5/.git"), None, "deeper than NESTED_DEPTH");
        assert!(p.iter().find(|x| x.path == ws.join("sub/repo/.git")).unwrap().reason.starts_with("nested copy"));
    }

    #[test]
    fn what_nested_repositories_configs_name_in_their_worktrees_is_protected() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        // A nested repository with a hooks directory of its worktree and an include; a
        // submodule whose git directory is in the superproject's .git/modules, with a relative
        // hooks path; an include inside the nested .git (reviewed as config); a hooks path
        // outside the workspace (nothing to protect here).
        std::fs::create_dir_all(ws.join("tools/.git")).unwrap();
        std::fs::create_dir_all(ws.join("tools/.githooks")).unwrap();
        std::fs::write(
            ws.join("tools/.git/config"),
            "[core]\n\thooksPath = .githooks\n[include]\n\tpath = ../shared.gitconfig\n\tpath = local.conf\n[core]\n\thooksPath = /usr/share/hooks\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.join(".git/modules/lib")).unwrap();
        std::fs::write(ws.join(".git/modules/lib/config"), "[core]\n\thooksPath = hooks-of-lib\n").unwrap();
        std::fs::create_dir_all(ws.join("lib")).unwrap();
        std::fs::write(ws.join("lib/.git"), "gitdir: ../.git/modules/lib\n").unwrap();
        std::fs::write(ws.join(".gitmodules"), "[submodule \"lib\"]\n\tpath = lib\n").unwrap();
        let policy = build_sandbox_policy(&ws, &SandboxSettings { home: None, ..Default::default() }).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let got = |rel: &str| set.paths.iter().find(|x| x.path == ws.join(rel)).map(|x| (x.kind, x.absent, x.reason.clone()));
        let (kind, absent, why) = got("tools/.githooks").expect("the nested repository's hooks directory");
        assert_eq!((kind, absent), (ProtectedKind::Dir, false));
        assert!(why.starts_with("core.hooksPath = .githooks in "), "{why}");
        let (kind, absent, why) = got("tools/shared.gitconfig").expect("its included file, absent");
        assert_eq!((kind, absent), (ProtectedKind::Dir, true));
        assert!(why.starts_with("include.path in "), "{why}");
        let (_, absent, _) = got("lib/hooks-of-lib").expect("the submodule's hooks directory, absent");
        assert!(absent);
        assert!(set.git_config_files.contains(&ws.join("tools/.git/local.conf")), "{:?}", set.git_config_files);
        assert!(got("tools/.git/local.conf").is_none(), "part of the nested .git");
        assert!(!set.paths.iter().any(|x| x.path.starts_with("/usr/share")));
        // A workspace that is a subdirectory of a repository (husky set up from the parent:
        // `core.hooksPath = frontend/.husky/_`): the enclosing repository's hooks directory.
        std::fs::create_dir_all(ws.join("mono/.git")).unwrap();
        std::fs::create_dir_all(ws.join("mono/frontend/.husky/_")).unwrap();
        std::fs::write(ws.join("mono/.git/config"), "[core]\n\thooksPath = frontend/.husky/_\n").unwrap();
        let sub = ws.join("mono/frontend");
        let policy = build_sandbox_policy(&sub, &SandboxSettings { home: None, ..Default::default() }).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let husky = set.paths.iter().find(|x| x.path == sub.join(".husky/_")).expect("the enclosing repository's hooks directory");
        assert_eq!((husky.kind, husky.absent), (ProtectedKind::Dir, false));
        assert_eq!(enclosing_dotgit(&sub.join(".husky")), Some(ws.join("mono/.git")));
        assert_eq!(enclosing_dotgit(&ws.join("tools")), Some(ws.join("tools/.git")), "its own first");
    }

    #[test]
    fn the_walk_after_the_run_reads_only_what_changed_and_finds_what_is_new() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        for p in ["a/b/c", "x/y", "quiet/q1/q2"] {
            std::fs::create_dir_all(ws.join(p)).unwrap();
        }
        let names = [".git", ".vscode", ".bashrc"];
        let launch = walk_nested(&ws, &names, NESTED_ENTRIES, None);
        assert!(launch.found.is_empty() && launch.stopped.is_none());
        assert!(launch.dirs.iter().any(|(p, depth)| *p == ws && *depth == 0) && launch.dirs.iter().any(|(p, depth)| *p == ws.join("a/b/c") && *depth == 3));
        // The run: a repository deep in a known directory whose mtime is then set back (its
        // ctime cannot be), a new subtree holding a .vscode, and x moved under a.
        let since = std::time::SystemTime::now();
        std::fs::create_dir_all(ws.join("a/b/c/.git/hooks")).unwrap();
        let c = std::ffi::CString::new(ws.join("a/b/c").as_os_str().as_encoded_bytes()).unwrap();
        let old = [libc::timespec { tv_sec: 1_000_000, tv_nsec: 0 }, libc::timespec { tv_sec: 1_000_000, tv_nsec: 0 }];
        // SAFETY: a valid C string and two timespecs.
        assert_eq!(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), old.as_ptr(), 0) }, 0);
        std::fs::create_dir_all(ws.join("new/n1/.vscode")).unwrap();
        std::fs::rename(ws.join("x"), ws.join("a/x")).unwrap();
        std::fs::write(ws.join("a/x/y/.bashrc"), "id\n").unwrap();
        let after = walk_nested(&ws, &names, NESTED_ENTRIES, Some((&launch.dirs, since)));
        let found: Vec<PathBuf> = after.found.iter().map(|(p, _)| p.strip_prefix(&ws).unwrap().to_path_buf()).collect();
        assert_eq!(found, vec![PathBuf::from("a/b/c/.git"), PathBuf::from("a/x/y/.bashrc"), PathBuf::from("new/n1/.vscode")]);
    }

    #[test]
    fn a_git_file_and_no_git() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        std::fs::write(ws.join(".git"), "gitdir: /elsewhere/.git/worktrees/w\n").unwrap();
        let policy = build_sandbox_policy(&ws, &SandboxSettings { home: None, ..Default::default() }).unwrap();
        let p = protected_paths(&mut PathResolver::new(), &policy).paths;
        assert_eq!((p[0].kind, p[0].absent), (ProtectedKind::File, false));
        std::fs::remove_file(ws.join(".git")).unwrap();
        let p = protected_paths(&mut PathResolver::new(), &policy).paths;
        assert_eq!((p[0].kind, p[0].absent), (ProtectedKind::GitDir, true));
    }
}
