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

use super::{gitconfig, gitindex};
use crate::plan::resolve::{FileKind, PathResolver};
use crate::policy::SandboxPolicy;

pub use crate::model::guard::{ProtectedKind, ProtectedPath, Unprotectable};

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
    let common = gitindex::common_dir(&gd);
    if common != gd {
        files.push(common.join("config"));
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
    /// `core.hooksPath` is relative to it), each with why it counts. A hooks directory whose
    /// name starts with `_` inside the worktree is husky's (9: `core.hooksPath = .husky/_`, whose
    /// one script `h` runs `.husky/<hook>`): the directory above it, which holds what the hooks
    /// run, is protected whole instead, as hooks are.
    #[must_use]
    pub fn hooks_dirs(&self, worktree: &Path) -> Vec<(PathBuf, String)> {
        self.hooks
            .iter()
            .map(|(v, f)| {
                let dir = crate::plan::resolve::normalize(&worktree.join(v));
                let why = format!("core.hooksPath = {} in {}", v.display(), f.display());
                let husky = dir.file_name().is_some_and(|n| n.to_string_lossy().starts_with('_'));
                match dir.parent().filter(|p| husky && p.starts_with(worktree) && *p != worktree) {
                    Some(parent) => (parent.to_path_buf(), format!("{why}: its hooks run the scripts beside their directory (husky's .husky/_/h runs .husky/<hook>)")),
                    None => (dir, why),
                }
            })
            .collect()
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
    // `~/` is the home directory; `~user/` that user's (git expands both).
    let expand = |v: &str| match (v.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => v.strip_prefix('~').and_then(|r| r.split_once('/')).filter(|(u, _)| !u.is_empty()).and_then(|(u, rest)| Some(user_home(u)?.join(rest))).unwrap_or_else(|| PathBuf::from(v)),
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
        let Some(c) = crate::files::read_config_bytes(&f, 8 << 20).and_then(|t| gitconfig::parse_bytes(&t).ok()) else { continue };
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

/// The home directory of the user named `name` (`getpwnam_r`), for git's `~user/` paths.
#[cfg(unix)]
fn user_home(name: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: zeroed plain data, filled by getpwnam_r.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut res: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid C string, a buffer of the given length, and out-pointers.
    let rc = unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut res) };
    if rc != 0 || res.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into `buf`, NUL-terminated by getpwnam_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes())))
}

#[cfg(not(unix))]
fn user_home(_name: &str) -> Option<PathBuf> {
    None
}

pub use super::gitindex::enclosing_dotgit;

/// What [`protected_paths`] found.
#[derive(Debug, Default)]
pub struct ProtectedSet {
    /// The protected paths.
    pub paths: Vec<ProtectedPath>,
    /// The configured or found ones that cannot be protected, and why.
    pub unprotectable: Vec<Unprotectable>,
    /// Each writable root's nested walk (for the walk after the run), one per root in order:
    /// the workspace first.
    pub nested_walks: Vec<RootWalk>,
    /// The names the nested walk looked for (the walk after the run looks for the same).
    pub nested_names: Vec<String>,
    /// Those of them it looked for because a hook manager in force reads them in every
    /// directory ([`nested_protection`]).
    pub nested_hook_names: Vec<String>,
    /// What a protected path leads to in a scratch directory (`/tmp`, `/dev/shm`): private for
    /// the run at Full level, the host's (writable, not protected) at Standard.
    pub in_scratch: Vec<Unprotectable>,
    /// Where a repository made in a scratch directory above a writable root (`/tmp/x/.git` for
    /// the workspace `/tmp/x/ws`) would be found by the host's git run in that root: the host's
    /// at Standard level, where the command can make one (`Protector::where_git_looks`). Private for
    /// the run at Full: the planner protects them below Full only.
    pub scratch_ancestors: Vec<ProtectedPath>,
    /// The files git's configuration includes that lie inside a protected git directory: the
    /// review reads them key by key, as the repository's `config`.
    pub git_config_files: Vec<PathBuf>,
    /// Where the nested walks' records are kept ([`super::nested`]), when no command of the run
    /// can write there; `None`: the walks neither read nor keep any.
    pub walk_records: Option<PathBuf>,
    /// The worktrees whose hooks run a tool that reads its configuration in every directory
    /// git lists (lint-staged): git was asked for those files at launch, and is asked again
    /// after the run.
    pub git_listings: Vec<GitListing>,
}

/// A worktree (of the workspace's repository, or of a nested one) whose hooks in force run a
/// hook manager that reads its configuration wherever git lists one ([`HookManager::anywhere`]:
/// lint-staged): the host's git lists those files (`gitoracle::listed_files`), at any
/// depth and in the directories the nested walk skips. Each one inside `root` is protected at
/// launch; after the run, each one git lists that was not is reviewed as made during the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GitListing {
    /// The worktree git lists (where the repository's `.git` is).
    pub worktree: PathBuf,
    /// The writable root the files are protected in (the worktree, or the part of it that is
    /// writable: a workspace that is a subdirectory of the repository).
    pub root: PathBuf,
    /// The names the hook manager reads (the configured protected names, protected whole
    /// anyway, left out).
    pub names: Vec<String>,
}

/// What starts the reason a [`GitListing`]'s worktree is reported unprotectable: git could not
/// list the files.
pub const LISTING_FAILED: &str = "git could not list the lint-staged configurations in this worktree";

/// Every file under `root` named one of `names` (any case), at any depth, in every directory
/// but a `.git` (links are not followed): what the review takes when git could not list a
/// [`GitListing`] after the run, so that a listing made to fail (a tree too large to list in
/// time, a `.gitignore` git cannot read) leaves nothing unreviewed. Its cost follows the tree;
/// it runs only then.
#[must_use]
pub fn files_named_anywhere(root: &Path, names: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut queue = vec![root.to_path_buf()];
    while let Some(dir) = queue.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                if name != ".git" {
                    queue.push(e.path());
                }
            } else if names.iter().any(|n| name.to_string_lossy().eq_ignore_ascii_case(n)) {
                out.push(e.path());
            }
        }
    }
    out
}

/// The files of `l` that git lists inside its root: the walk service's answer where it is on and
/// answers (`records`: the directory its socket is in, when no command of the run can write
/// there; it keeps git's answer while nothing changed that could change it), else git's.
///
/// # Errors
/// `gitoracle::listed_files`'s.
pub fn git_listed(l: &GitListing, records: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    #[cfg(target_os = "linux")]
    if let Some(files) = records.filter(|_| super::walkd::enabled()).and_then(|d| super::walkd::listed(d, &l.worktree, &l.names)) {
        return Ok(files.into_iter().filter(|f| f.starts_with(&l.root)).collect());
    }
    #[cfg(not(target_os = "linux"))]
    let _ = records;
    let names: Vec<&str> = l.names.iter().map(String::as_str).collect();
    Ok(super::gitoracle::listed_files(&l.worktree, &names)?.into_iter().filter(|f| f.starts_with(&l.root)).collect())
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
    let ws = &policy.workspace_path;
    let global = read_git_configs(global_git_config_files(home), home);
    // The writable roots: the workspace, then every other one (`--allow-write DIR`, not the
    // scratch directories), canonical; and the writable files (`--allow-write FILE`).
    let scratch = crate::defaults::tables(policy.platform).scratch_write;
    let mut roots: Vec<PathBuf> = vec![ws.clone()];
    let mut files: Vec<PathBuf> = Vec::new();
    for w in &policy.writable_paths {
        // The scratch directories, and the workspace's persistent tool caches: the sandbox's
        // own places, which no host tool reads (a cache is not walked at every launch).
        if scratch.iter().any(|s| Path::new(s) == w) || policy.tool_caches.as_ref() == Some(w) {
            continue;
        }
        let Ok(c) = resolver.canonicalize(w) else { continue };
        if c.path.starts_with(ws) || roots.contains(&c.path) {
            continue;
        }
        match c.kind {
            FileKind::Dir => roots.push(c.path),
            FileKind::File => files.push(c.path),
            _ => {}
        }
    }
    let scratch_dirs: Vec<PathBuf> = scratch.iter().filter_map(|d| resolver.canonicalize(Path::new(d)).ok().map(|c| c.path)).collect();
    // The walks' records, unless the run could write them: outside every writable root, file
    // and scratch directory (where they are, canonical: through any link on the way).
    #[cfg(target_os = "linux")]
    let records = {
        let dir = super::nested::records_dir();
        resolver.canonicalize_beyond(&dir).filter(|c| !roots.iter().chain(&scratch_dirs).any(|r| c.starts_with(r)) && !files.iter().any(|f| f.starts_with(c)) && super::nested::usable(c))
    };
    #[cfg(not(target_os = "linux"))]
    let records = None;
    let mut p = Protector { resolver, roots: roots.clone(), files, scratch: scratch_dirs, records, out: Vec::new(), bad: Vec::new(), in_scratch: Vec::new() };
    // The protected names that stand alone (not `.git/hooks`): looked for in the home directory
    // and in the workspace's subdirectories.
    let single: Vec<&str> = policy.protected_workspace_paths.iter().map(String::as_str).filter(|n| !n.contains('/')).collect();
    let mut names: Vec<(PathBuf, String)> = Vec::new();
    // The names the nested walk looks for because a hook manager reads them anywhere.
    let mut hook_names: Vec<String> = Vec::new();
    // The worktrees in which git lists what a hook manager reads anywhere (lint-staged).
    let mut listings: Vec<GitListing> = Vec::new();
    // A writable root that is a git directory itself (the git directory of the repository around
    // the workspace, granted so that `git commit` works in a subdirectory or a linked worktree;
    // `--allow-write repo/.git`; a bare repository): protected whole, as a workspace's `.git`
    // is, where `.git` is a protected name. It is neither walked for nested names nor given them:
    // the review of a git directory covers all of it.
    let git_roots: Vec<PathBuf> = if policy.protected_workspace_paths.iter().any(|n| n.starts_with(".git")) { roots.iter().filter(|r| gitindex::is_git_directory(r)).cloned().collect() } else { Vec::new() };
    for root in &git_roots {
        p.out.push(ProtectedPath { path: root.clone(), kind: ProtectedKind::GitDir, absent: false, private: false, reason: GIT_ROOT_WHY.into(), keys: Vec::new() });
    }
    for root in &roots {
        if git_roots.contains(root) {
            continue;
        }
        for rel in &policy.protected_workspace_paths {
            let rel = Path::new(rel);
            let rel = if rel.starts_with(".git") { Path::new(".git") } else { rel };
            p.protect(&root.join(rel), hint_for(rel), &table_why(rel));
        }
        // The repository git finds from the root: its own `.git`, or the nearest one above it
        // (a workspace that is a subdirectory of a monorepo, whose `core.hooksPath` may name a
        // directory of the workspace: husky's `cd .. && husky frontend/.husky`); a relative
        // `core.hooksPath` (the global one's too) is relative to its worktree.
        let dotgit = enclosing_dotgit(root);
        let worktree = dotgit.as_deref().and_then(Path::parent).unwrap_or(root).to_path_buf();
        let own = dotgit.as_deref().map(|g| read_git_configs(repo_git_config_files(g), home)).unwrap_or_default();
        let hooks_dirs: Vec<(PathBuf, String)> = global.hooks_dirs(&worktree).into_iter().chain(own.hooks_dirs(&worktree)).collect();
        for (path, why) in &hooks_dirs {
            p.protect_hooks_dir(path, why);
        }
        // What a hook manager's hook runs, named in a file of the worktree: protected as the
        // hook is (the hooks in force: the configured directories, else the git directory's).
        let managers = hook_managers_in_force(&hooks_in_force(dotgit.as_deref(), &hooks_dirs));
        for f in hook_manager_files(&managers, &worktree) {
            p.protect_hook_file(f);
        }
        // What such a hook reads in every directory (lint-staged's configurations): looked for
        // by the nested walk below.
        for n in anywhere_names(&managers) {
            if !single.contains(&n) && !hook_names.iter().any(|h| h == n) {
                hook_names.push(n.to_string());
            }
        }
        // ... and git lists, wherever the walk does not go.
        listings.extend(dotgit.as_ref().and_then(|_| git_listing(&worktree, root, &managers, &single)));
        for t in global.targets.iter().chain(&own.targets) {
            if !names.iter().any(|(q, _)| *q == t.0) {
                names.push(t.clone());
            }
        }
    }
    // A protected name in the home directory that is a symbolic link into a writable root (a
    // dotfiles repository: `~/.bashrc -> ~/dotfiles/bashrc`): what the link's target holds runs
    // in the user's next shell (or git, or agent session) as if it were the dotfile itself.
    if let Some(home) = home {
        for name in &single {
            let link = home.join(name);
            if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                let why = format!("{} is a symbolic link to it: {}", link.display(), table_why(Path::new(name)));
                p.protect(&link, hint_for(Path::new(name)), &why);
            }
        }
    }
    // Nested copies in each writable root (a repository in a subdirectory, `sub/.vscode`),
    // present at launch, found by a bounded walk, and the submodules git would enter.
    let first_nested = p.out.len();
    let walk_names: Vec<&str> = single.iter().copied().chain(hook_names.iter().map(String::as_str)).collect();
    let budget = usize::try_from(policy.nested_walk_entries).unwrap_or(usize::MAX);
    let walks: Vec<RootWalk> = roots
        .iter()
        .map(|root| if git_roots.contains(root) { RootWalk { root: root.clone(), budget, ..RootWalk::default() } } else { nested_protected(&mut p, root, &walk_names, &hook_names, budget) })
        .collect();
    #[cfg(unix)]
    crate::timing::stamp("nested_walked");
    // Each nested repository and submodule checked out at launch: what its own configuration
    // names in its worktree (`core.hooksPath = .githooks`, `include.path = ../shared.gitconfig`)
    // runs at the user's next git command in it; a relative `core.hooksPath` of the global
    // configuration is relative to each repository's worktree. (The global configuration's
    // targets are the workspace's already.)
    let nested_gits: Vec<PathBuf> = p.out[first_nested..].iter().filter(|q| !q.absent && q.path.file_name().is_some_and(is_dotgit)).map(|q| q.path.clone()).collect();
    for g in &nested_gits {
        let Some(own) = p.protect_nested_repo(g, &global, home, &single, &mut listings) else { continue };
        for t in own.targets {
            if !names.iter().any(|(q, _)| *q == t.0) {
                names.push(t);
            }
        }
    }
    // What a hook manager reads wherever git lists it (lint-staged's configurations), beyond
    // the walk's reach: git is the oracle ([`Protector::protect_listed`]).
    for l in &listings {
        p.protect_listed(l);
    }
    // The files git's configuration includes, `init.templateDir`, a config file's link target.
    for (path, why) in &names {
        p.protect(path, ProtectedKind::Dir, why);
    }
    let mut included: Vec<PathBuf> = names.into_iter().map(|(q, _)| q).collect();
    included.sort();
    included.dedup();
    let scratch_ancestors = p.where_git_looks(&roots, &git_roots);
    let Protector { mut out, bad, in_scratch, records, .. } = p;
    drop_covered(&mut out);
    let git_config_files = included.into_iter().filter(|f| out.iter().any(|q| q.kind == ProtectedKind::GitDir && f.starts_with(&q.path))).collect();
    let nested_names = walk_names.iter().map(|n| (*n).to_string()).collect();
    ProtectedSet { paths: out, unprotectable: bad, nested_walks: walks, nested_names, nested_hook_names: hook_names, git_config_files, in_scratch, scratch_ancestors, walk_records: records, git_listings: listings }
}

/// Why a repository in a scratch directory above a writable root is reviewed (`Protector::where_git_looks`).
pub const SCRATCH_ANCESTOR_WHY: &str = "in a scratch directory above a writable root (the host's at Standard level): a repository made here is the one the host's git finds from that root (git status in the workspace would run its fsmonitor, its hooks); reviewed as a new repository after the run";

/// Why a writable root that is no repository has its `HEAD` protected (`Protector::where_git_looks`).
pub const ROOT_BARE_WHY: &str = "a writable root that is no repository: a HEAD made beside objects/ and refs/ makes the root itself a bare repository, whose config (core.pager, core.sshCommand) the user's next git log or git fetch in it runs; reviewed after the run";

/// In `dir`, which git would take for a repository if a run made one there: `HEAD` (a bare
/// repository is a directory holding `HEAD`, `objects/` and `refs/`), and where a `HEAD` stands
/// already git's other code-running files of a bare repository (`config`, `commondir`,
/// `hooks`), each as it is at launch (absent, or present).
fn bare_repository_names(resolver: &mut PathResolver, dir: &Path, reason: &str, out: &mut Vec<ProtectedPath>) {
    let head = resolver.lstat_kind(&dir.join("HEAD"));
    let mut names = vec![("HEAD", ProtectedKind::File)];
    if head.is_some() {
        names.extend([("config", ProtectedKind::File), ("commondir", ProtectedKind::File), ("hooks", ProtectedKind::Dir)]);
    }
    for (n, kind) in names {
        let path = dir.join(n);
        if out.iter().any(|q| q.path == path) {
            continue;
        }
        let present = resolver.lstat_kind(&path);
        // What stands there at launch, as it is (a project's own `config/` directory).
        let kind = match present {
            Some(FileKind::File) => ProtectedKind::File,
            Some(FileKind::Dir) => ProtectedKind::Dir,
            _ => kind,
        };
        out.push(ProtectedPath { path, kind, absent: present.is_none(), private: false, reason: reason.into(), keys: Vec::new() });
    }
}

impl Protector<'_> {
    /// Where the host's git, run in a writable root, would find a repository the run made. Git
    /// looks upward from where it runs and stops at the first one, checking in each directory
    /// for a `.git` and then whether the directory itself is a repository (a bare one: `HEAD`
    /// beside `objects/` and `refs/`). So:
    ///
    /// * a root that is no repository at launch (no `.git`, which the protected names cover)
    ///   could be made one itself: its `HEAD` is protected (and, where one stands already, its
    ///   `config`, `commondir` and `hooks`), at every level;
    /// * each directory above a root that lies in a scratch directory (`/tmp`, `/dev/shm`, which
    ///   every level below Full shares with the host) could get a `.git` or be made a bare
    ///   repository: `/tmp/x/.git` becomes the repository of the workspace `/tmp/x/ws`. Those are
    ///   returned, for the planner to protect below Full (private for the run at Full). A
    ///   directory holding a `.git` at launch is the repository around the root, which the
    ///   root's own protections cover.
    fn where_git_looks(&mut self, roots: &[PathBuf], git_roots: &[PathBuf]) -> Vec<ProtectedPath> {
        for root in roots.iter().filter(|r| !git_roots.contains(r)) {
            if !self.resolver.lexists(&root.join(".git")) {
                bare_repository_names(self.resolver, root, ROOT_BARE_WHY, &mut self.out);
            }
        }
        let mut out: Vec<ProtectedPath> = Vec::new();
        for root in roots {
            for a in root.ancestors().skip(1).filter(|a| self.scratch.iter().any(|s| a.starts_with(s))) {
                let dotgit = a.join(".git");
                if self.resolver.lexists(&dotgit) || out.iter().any(|q| q.path == dotgit) {
                    continue;
                }
                out.push(ProtectedPath { path: dotgit, kind: ProtectedKind::GitDir, absent: true, private: false, reason: SCRATCH_ANCESTOR_WHY.into(), keys: Vec::new() });
                bare_repository_names(self.resolver, a, SCRATCH_ANCESTOR_WHY, &mut out);
            }
        }
        out
    }
}

/// Why a writable root that is a git directory is protected whole.
pub const GIT_ROOT_WHY: &str = "a git directory granted writable (the repository around the workspace, so that git add and commit work there): its hooks, config and the files that redirect git run at the user's next git command; git's own data (objects, refs, the index, logs) is applied after the run, the rest kept pending";

/// The hooks directories in force for the repository of `dotgit`: the configured ones
/// (`core.hooksPath`), else the common git directory's `hooks` (a linked worktree's and a
/// submodule's `.git` file leads to it).
fn hooks_in_force(dotgit: Option<&Path>, configured: &[(PathBuf, String)]) -> Vec<PathBuf> {
    if configured.is_empty() {
        dotgit.and_then(gitindex::git_dir).map(|gd| crate::plan::resolve::normalize(&gitindex::common_dir(&gd).join("hooks"))).into_iter().collect()
    } else {
        configured.iter().map(|(d, _)| d.clone()).collect()
    }
}

/// Removes from `out` each path that lies inside another one (covered by it: the outer one is
/// reviewed whole) and each repeat of a path (the first one stays). Paths sorted component by
/// component put what lies inside a path right after it: one pass.
fn drop_covered(out: &mut Vec<ProtectedPath>) {
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| out[a].path.cmp(&out[b].path));
    let mut keep = vec![true; out.len()];
    let mut last: Option<usize> = None;
    for i in order {
        if last.is_some_and(|l| out[i].path.starts_with(&out[l].path)) {
            keep[i] = false;
        } else {
            last = Some(i);
        }
    }
    let mut keep = keep.into_iter();
    out.retain(|_| keep.next().unwrap_or(false));
}

/// The kind a protected name stands for when absent (`.git`: a git directory; a name of the
/// table: its kind; anything else: a directory).
fn hint_for(rel: &Path) -> ProtectedKind {
    if is_dotgit(rel.as_os_str()) {
        ProtectedKind::GitDir
    } else {
        table_entry(rel).map_or(ProtectedKind::Dir, |e| e.kind)
    }
}

/// A hook manager whose hooks run what a file of the worktree names (so that the file is code the
/// next `git commit` runs).
pub struct HookManager {
    /// Its name, for the reason shown.
    pub name: &'static str,
    /// Texts that mark one of its hooks (any one).
    pub markers: &'static [&'static str],
    /// Those files, relative to the worktree (a name ending in `/` is a directory of scripts).
    pub files: &'static [&'static str],
    /// The keys of the worktree's `package.json` that it reads too: only those keys are
    /// protected ([`crate::guard::jsonkeys`]), so that `npm install` still writes the file.
    pub package_keys: &'static [&'static str],
    /// It reads its files (and `package.json`'s keys) in every directory of the worktree, not
    /// only at its top (lint-staged 13 and later: the configuration nearest each staged file).
    pub anywhere: bool,
}

/// The hook managers ([`HookManager`]).
pub const HOOK_MANAGERS: &[HookManager] = &[
    HookManager { name: "the pre-commit framework", markers: &["pre-commit.com", "-m pre_commit"], files: &[".pre-commit-config.yaml", ".pre-commit-config.yml"], package_keys: &[], anywhere: false },
    HookManager {
        name: "lefthook",
        markers: &["lefthook"],
        files: &[
            "lefthook.yml", ".lefthook.yml", "lefthook.yaml", ".lefthook.yaml", "lefthook.toml", ".lefthook.toml", "lefthook.json",
            ".lefthook.json", "lefthook-local.yml", ".lefthook-local.yml", "lefthook-local.yaml", ".lefthook-local.yaml", ".lefthook/",
            ".lefthook-local/", ".config/lefthook.yml", ".config/lefthook.yaml",
        ],
        package_keys: &[],
        anywhere: false,
    },
    // husky 4's hooks (`husky.sh`, `husky-run`) run what its configuration names (cosmiconfig's
    // places for `husky`).
    HookManager {
        name: "husky 4",
        markers: &["husky.sh", "husky-run", "husky/run.js"],
        files: &[".huskyrc", ".huskyrc.json", ".huskyrc.yaml", ".huskyrc.yml", ".huskyrc.js", ".huskyrc.cjs", "husky.config.js", "husky.config.cjs"],
        package_keys: &["husky"],
        anywhere: false,
    },
    // A hook that runs lint-staged (husky's `.husky/pre-commit`: `npx lint-staged`) runs the
    // commands its configuration names, for every staged file.
    HookManager {
        name: "lint-staged",
        markers: &["lint-staged"],
        files: &[
            "package.yaml", ".lintstagedrc", ".lintstagedrc.json", ".lintstagedrc.yaml", ".lintstagedrc.yml", ".lintstagedrc.js", ".lintstagedrc.mjs",
            ".lintstagedrc.cjs", ".lintstagedrc.ts", ".lintstagedrc.mts", ".lintstagedrc.cts", "lint-staged.config.js", "lint-staged.config.mjs",
            "lint-staged.config.cjs", "lint-staged.config.ts", "lint-staged.config.mts", "lint-staged.config.cts",
        ],
        package_keys: &["lint-staged"],
        anywhere: true,
    },
];

/// A file of the worktree that a hook runs through a hook manager.
#[derive(Debug)]
struct HookFile {
    path: PathBuf,
    kind: ProtectedKind,
    why: String,
    /// For `package.json`: the keys protected (the whole file otherwise).
    keys: Vec<String>,
}

/// The hook managers whose hooks are in force in `dirs`, each with the first of its hooks found
/// ([`HOOK_MANAGERS`]). Only the hooks git runs are read (the names of [`GIT_HOOKS`], regular
/// files of at most 256 KiB, never a FIFO). A hooks directory named `_` is husky's (9:
/// `core.hooksPath = .husky/_`), whose hooks run the user's scripts of the same names in its
/// parent: those are read too.
fn hook_managers_in_force(dirs: &[PathBuf]) -> Vec<(&'static HookManager, PathBuf)> {
    let mut out: Vec<(&'static HookManager, PathBuf)> = Vec::new();
    let husky_scripts = dirs.iter().filter(|d| d.file_name().is_some_and(|n| n == "_")).filter_map(|d| d.parent().map(Path::to_path_buf));
    let dirs: Vec<PathBuf> = dirs.iter().cloned().chain(husky_scripts).collect();
    for dir in &dirs {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            if !GIT_HOOKS.iter().any(|h| name == **h) {
                continue;
            }
            let hook = e.path();
            let Some(text) = crate::files::read_config_bytes(&hook, 256 << 10) else { continue };
            for m in HOOK_MANAGERS {
                if m.markers.iter().any(|k| text.windows(k.len()).any(|w| w == k.as_bytes())) && !out.iter().any(|(q, _)| std::ptr::eq(*q, m)) {
                    out.push((m, hook.clone()));
                }
            }
        }
    }
    out
}

/// The files of `worktree` that the hooks of `managers` run ([`hook_managers_in_force`]).
fn hook_manager_files(managers: &[(&'static HookManager, PathBuf)], worktree: &Path) -> Vec<HookFile> {
    let mut out: Vec<HookFile> = Vec::new();
    for (m, hook) in managers {
        let manager = m.name;
        for f in m.files {
            let (rel, kind) = match f.strip_suffix('/') {
                Some(d) => (d, ProtectedKind::Dir),
                None => (*f, ProtectedKind::File),
            };
            let path = worktree.join(rel);
            if !out.iter().any(|q| q.path == path) {
                out.push(HookFile { path, kind, why: format!("the hook {} is {manager}'s: it runs what {rel} names", hook.display()), keys: Vec::new() });
            }
        }
        if m.package_keys.is_empty() {
            continue;
        }
        let path = worktree.join(PACKAGE_JSON);
        let at = match out.iter().position(|q| q.path == path) {
            Some(i) => i,
            None => {
                out.push(HookFile { path, kind: ProtectedKind::File, why: format!("the hook {} is {manager}'s", hook.display()), keys: Vec::new() });
                out.len() - 1
            }
        };
        for k in m.package_keys {
            if !out[at].keys.iter().any(|q| q == k) {
                out[at].keys.push((*k).to_string());
            }
        }
    }
    for q in out.iter_mut().filter(|q| !q.keys.is_empty()) {
        q.why = format!("{}: {}", q.why, keys_why(&q.keys));
    }
    out
}

/// The npm manifest whose keys a hook manager may read ([`HookManager::package_keys`]).
const PACKAGE_JSON: &str = "package.json";

/// Why a `package.json` is protected by `keys`.
fn keys_why(keys: &[String]) -> String {
    let keys = keys.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(" and ");
    format!("it runs what package.json's {keys} key names (only the keys a hook reads are protected: a change that leaves them as they were is applied)")
}

/// The [`GitListing`] of `worktree` (its writable part `root`) when a hook manager in force
/// there reads its configuration anywhere (the names configured as protected, `single`, are
/// protected whole by the walk and left out).
fn git_listing(worktree: &Path, root: &Path, managers: &[(&'static HookManager, PathBuf)], single: &[&str]) -> Option<GitListing> {
    let names: Vec<String> = anywhere_names(managers).into_iter().filter(|n| !single.contains(n)).map(str::to_string).collect();
    (!names.is_empty()).then(|| GitListing { worktree: worktree.to_path_buf(), root: root.to_path_buf(), names })
}

/// The names a hook manager in force reads in every directory of the worktree
/// ([`HookManager::anywhere`]): the nested walk looks for them as for the protected names.
fn anywhere_names(managers: &[(&'static HookManager, PathBuf)]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (m, _) in managers.iter().filter(|(m, _)| m.anywhere) {
        let names = m.files.iter().copied().filter(|f| !f.contains('/')).chain((!m.package_keys.is_empty()).then_some(PACKAGE_JSON));
        for n in names {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// How an entry named `name` that the nested walk found (or found made during the run) is
/// protected: its kind, the keys of a `package.json` protected by its keys, and why. `hook_names`
/// are the names the walk looks for because a hook manager reads them anywhere
/// (a name also configured as protected is not among them, and is protected
/// whole).
#[must_use]
pub fn nested_protection(name: &str, dir: bool, hook_names: &[String]) -> (ProtectedKind, Vec<String>, String) {
    if !dir && hook_names.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        let managers: Vec<&HookManager> = HOOK_MANAGERS.iter().filter(|m| m.anywhere).collect();
        let who = format!("a hook runs {}, which reads the configuration nearest each staged file", managers.iter().map(|m| m.name).collect::<Vec<_>>().join(" or "));
        if name.eq_ignore_ascii_case(PACKAGE_JSON) {
            let keys: Vec<String> = managers.iter().flat_map(|m| m.package_keys.iter().map(|k| (*k).to_string())).collect();
            return (ProtectedKind::File, keys.clone(), format!("{who}: {}", keys_why(&keys)));
        }
        return (ProtectedKind::File, Vec::new(), format!("{who}: it runs what this file names"));
    }
    (nested_kind(name, dir), Vec::new(), table_why(Path::new(name)))
}

/// The hooks git runs from a hooks directory (`githooks(5)`), for a `core.hooksPath` that names
/// a writable root itself: each is protected as a file there.
pub const GIT_HOOKS: &[&str] = &[
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit", "prepare-commit-msg", "commit-msg",
    "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push", "pre-receive", "update", "proc-receive",
    "post-receive", "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite",
    "sendemail-validate", "fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist", "p4-post-changelist",
    "p4-pre-submit", "post-index-change",
];

/// The protected paths of one plan as they are found: every one goes through
/// [`Protector::protect`], which follows symbolic links.
struct Protector<'r> {
    resolver: &'r mut PathResolver,
    /// The writable roots (canonical; the workspace first).
    roots: Vec<PathBuf>,
    /// The writable files outside them (canonical).
    files: Vec<PathBuf>,
    /// The scratch directories (canonical).
    scratch: Vec<PathBuf>,
    /// Where the nested walks' records are kept, when the run cannot write there.
    records: Option<PathBuf>,
    out: Vec<ProtectedPath>,
    bad: Vec<Unprotectable>,
    in_scratch: Vec<Unprotectable>,
}

impl Protector<'_> {
    /// Protects `path` (absolute) for `reason`; `hint` is its kind when absent (a `GitDir` hint
    /// makes a directory git's).
    ///
    /// A symbolic link cannot be made private (a mount lands on its target) and can be
    /// replaced: each link on the way to `path` (`path` itself included) that lies in a writable
    /// root is protected as a file (reviewed in place: a changed or replaced link is put back,
    /// the command's version pending), and where the links lead is protected as what it is, when
    /// it lies in a writable root (a dotfiles link `.githooks -> hooks-real`, `.vscode ->
    /// ../shared/vscode`). Outside every writable root it is read-only for the command.
    fn protect(&mut self, path: &Path, hint: ProtectedKind, reason: &str) {
        self.protect_as(path, hint, reason, false);
    }

    /// [`Protector::protect`] for a file a hook manager's hook runs: a `package.json` is protected
    /// by the keys the hook reads (unless something protects it whole already: the first
    /// protection of a path stays).
    fn protect_hook_file(&mut self, f: HookFile) {
        let first = self.out.len();
        self.protect(&f.path, f.kind, &f.why);
        if f.keys.is_empty() {
            return;
        }
        for q in &mut self.out[first..] {
            // The file itself (where it leads, when a link: the link is protected whole).
            if q.kind == ProtectedKind::File && !std::fs::symlink_metadata(&q.path).is_ok_and(|m| m.file_type().is_symlink()) {
                q.keys.clone_from(&f.keys);
            }
        }
    }

    /// A nested repository's (or submodule's) `.git` `g`: its hooks directories, what its hook
    /// managers' hooks run, as for the root's repository, and the [`GitListing`] of its
    /// worktree when one of them reads its configuration anywhere. Returns its configuration
    /// (whose targets the caller protects), `None` for a `.git` without a parent.
    fn protect_nested_repo(&mut self, g: &Path, global: &GitConfigRefs, home: Option<&Path>, single: &[&str], listings: &mut Vec<GitListing>) -> Option<GitConfigRefs> {
        let worktree = g.parent()?;
        let own = read_git_configs(repo_git_config_files(g), home);
        let hooks_dirs: Vec<(PathBuf, String)> = global.hooks_dirs(worktree).into_iter().chain(own.hooks_dirs(worktree)).collect();
        for (path, why) in &hooks_dirs {
            self.protect_hooks_dir(path, why);
        }
        let managers = hook_managers_in_force(&hooks_in_force(Some(g), &hooks_dirs));
        for f in hook_manager_files(&managers, worktree) {
            self.protect_hook_file(f);
        }
        let root = self.roots.iter().find(|r| worktree.starts_with(r)).cloned();
        listings.extend(root.and_then(|root| git_listing(worktree, &root, &managers, single)));
        Some(own)
    }

    /// What git lists for `l` ([`git_listed`]) that is not protected yet, protected as the
    /// nested walk's finds are; a worktree git cannot list is reported.
    fn protect_listed(&mut self, l: &GitListing) {
        match git_listed(l, self.records.as_deref()) {
            Ok(files) => {
                // Protected already (inside a directory protected whole, too): looked up by each
                // ancestor of a listed file, not by comparing every file with every protected
                // path (the names git lists are the repository's, any number of them).
                let mut protected: std::collections::HashSet<PathBuf> = self.out.iter().map(|q| q.path.clone()).collect();
                for f in files {
                    if f.ancestors().any(|a| protected.contains(a)) {
                        continue;
                    }
                    let n = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    let (kind, keys, why) = nested_protection(&n, false, &l.names);
                    let before = self.out.len();
                    self.protect_hook_file(HookFile { path: f, kind, why: format!("git lists it: {why}"), keys });
                    protected.extend(self.out[before..].iter().map(|q| q.path.clone()));
                }
            }
            Err(e) => self.bad.push(Unprotectable { path: l.worktree.clone(), why: format!("{LISTING_FAILED} ({e}): those deeper than the nested walk goes, or in the directories it skips, are not protected") }),
        }
    }

    /// [`Protector::protect`] for a `core.hooksPath` directory: one that is a writable root
    /// itself (`core.hooksPath = .`) cannot be protected whole, and each hook name in it is.
    fn protect_hooks_dir(&mut self, path: &Path, reason: &str) {
        self.protect_as(path, ProtectedKind::Dir, reason, true);
    }

    fn protect_as(&mut self, path: &Path, hint: ProtectedKind, reason: &str, hooks: bool) {
        let path = crate::plan::resolve::normalize(path);
        let (links, target) = self.resolver.follow(&path);
        for (link, _) in &links {
            if self.roots.iter().any(|r| link.starts_with(r) && link != r) && !self.out.iter().any(|q| q.path == *link) {
                let why = if *link == path { format!("{reason} ({LINK_WHY})") } else { format!("a symbolic link on the way to {}: {reason} ({LINK_WHY})", path.display()) };
                self.out.push(ProtectedPath { path: link.clone(), kind: ProtectedKind::File, absent: false, private: false, reason: why, keys: Vec::new() });
            }
        }
        let Some(target) = target else {
            self.bad.push(Unprotectable { path, why: "too many symbolic links on its way (a loop)".into() });
            return;
        };
        let reason = if links.is_empty() { reason.to_string() } else { format!("{} leads to it through a symbolic link: {reason}", path.display()) };
        if self.roots.contains(&target) {
            if hooks {
                for h in GIT_HOOKS {
                    self.protect_as(&target.join(h), ProtectedKind::File, &format!("a hook in {}: {reason}", target.display()), false);
                }
            } else {
                self.bad.push(Unprotectable { path, why: format!("it is the writable root {} itself, which cannot be protected whole", target.display()) });
            }
            return;
        }
        let Some(root) = self.roots.iter().find(|r| target.starts_with(r)).cloned() else {
            if self.files.contains(&target) {
                // A writable file a protected link leads to (`.mcp.json -> ~/shared/mcp.json`,
                // granted with `--allow-write`): a file of its own, reviewed in place.
                self.out.push(ProtectedPath { path: target, kind: ProtectedKind::File, absent: false, private: false, reason, keys: Vec::new() });
            } else if let Some(d) = self.scratch.iter().find(|d| target.starts_with(d)) {
                let why = format!("in {}, which is the host's at Standard level (a private one for the run at Full): {reason}", d.display());
                self.in_scratch.push(Unprotectable { path: target, why });
            }
            return;
        };
        // What stands there, from the resolver's memory: `follow` has just looked (the plan is
        // made before anything runs).
        match self.resolver.lstat_kind(&target) {
            Some(FileKind::Dir) => {
                let kind = if hint == ProtectedKind::GitDir { ProtectedKind::GitDir } else { ProtectedKind::Dir };
                self.out.push(ProtectedPath { path: target, kind, absent: false, private: false, reason, keys: Vec::new() });
            }
            Some(FileKind::File) => self.out.push(ProtectedPath { path: target, kind: ProtectedKind::File, absent: false, private: false, reason, keys: Vec::new() }),
            Some(FileKind::Other) => self.bad.push(Unprotectable { path: target, why: "neither a file nor a directory".into() }),
            None => {
                // Absent: reviewed in place after the run, if its nearest existing ancestor is a
                // real directory of the root (the review takes out a link the command puts on
                // the way). Under a `.git` file (a worktree's or submodule's), nothing: git
                // reads nothing there.
                let existing = target.ancestors().skip(1).find(|a| self.resolver.lexists(a));
                let real_dir = existing.and_then(|e| self.resolver.canonicalize(e).ok().map(|c| (e, c))).is_some_and(|(e, c)| c.kind == FileKind::Dir && c.path.starts_with(&root) && c.path == e);
                if real_dir {
                    self.out.push(ProtectedPath { path: target, kind: hint, absent: true, private: false, reason, keys: Vec::new() });
                } else if !existing.is_some_and(|e| e.file_name().is_some_and(is_dotgit) && self.resolver.lstat_kind(e) == Some(FileKind::File)) {
                    self.bad.push(Unprotectable { path: target, why: "absent, and its parent is not a directory of the workspace".into() });
                }
            }
        }
    }
}


pub use super::nested::{walk_nested, Known, Listing, NestedWalk, NESTED_DEPTH, NESTED_ENTRIES, NESTED_SKIP};

/// Why a directory the launch walk could not read is reported: a command could make a
/// repository in it that git, entering it by name, would find.
pub const NESTED_UNREADABLE: &str = "not readable by you: the protected names in it (a repository's `.git`, an editor's tasks) were not looked for; make it readable (chmod u+rx) to have them protected";

/// What [`NESTED_STOPPED`] starts with: the nested walk ran out of its budget.
pub const NESTED_STOPPED: &str = "the nested walk stopped after";

/// One writable root's launch walk for nested protected names ([`walk_nested`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootWalk {
    /// The writable root.
    pub root: PathBuf,
    /// Every directory the walk looked at, with its depth and what it holds.
    pub listings: Vec<Listing>,
    /// How many of them the records of earlier walks held ([`super::nested`]).
    pub from_records: usize,
    /// Its budget (entries of directories no earlier walk recorded).
    pub budget: usize,
    /// It ran out of its budget: names deeper in the root were not looked for.
    pub stopped: bool,
    /// The walk service made it ([`super::walkd`]): the token to give back after the run
    /// (`listings` is then empty: the service keeps them).
    pub service: Option<u64>,
}

/// How a writable root is named in a note: "the workspace" for `ws`, its path otherwise.
#[must_use]
pub fn root_name(root: &Path, ws: &Path) -> String {
    if root == ws {
        "the workspace".to_string()
    } else {
        root.display().to_string()
    }
}

/// The protected kind of a nested entry named `name` that is a directory (`.git`: git's).
#[must_use]
pub fn nested_kind(name: &str, dir: bool) -> ProtectedKind {
    if dir && !is_dotgit(name.as_ref()) {
        ProtectedKind::Dir
    } else {
        hint_for(Path::new(name))
    }
}

/// Why a directory git discovers as a repository without a `.git` is protected.
pub const REPO_WHY: &str = "git discovers it as a repository (HEAD, objects/ and refs/, or a commondir; a bare repository or a git directory under another name): its hooks and config run at the user's next git command in it";

/// `name` is `.git` (whatever its ASCII case: on a case-insensitive filesystem `.GIT` is git's).
#[must_use]
pub fn is_dotgit(name: &std::ffi::OsStr) -> bool {
    name.eq_ignore_ascii_case(".git")
}

/// The table's entry for the protected name `rel` (a single name matched without regard to
/// ASCII case, as [`walk_nested`] finds it).
fn table_entry(rel: &Path) -> Option<&'static crate::defaults::ProtectedEntry> {
    crate::defaults::protected_table().iter().find(|e| Path::new(&e.name) == rel || (!e.name.contains('/') && rel.as_os_str().eq_ignore_ascii_case(&e.name)))
}

/// The launch walk of `root`: the walk service's, where it is on and answers (with its token),
/// else the walk in this process from the records in `records`.
fn launch_walk(records: Option<&Path>, root: &Path, names: &[&str], budget: usize) -> (NestedWalk, Option<u64>) {
    #[cfg(target_os = "linux")]
    {
        // A small root is walked here: a look at each of its few directories costs less than
        // the service's round trip (its records say how many there are).
        let large = |dir: &Path| std::fs::symlink_metadata(dir.join(super::nested::record_name(root, names))).is_ok_and(|m| m.len() >= super::walkd::MIN_RECORD);
        if let Some(dir) = records.filter(|d| super::walkd::enabled() && large(d)) {
            let req = super::walkd::Request::Walk { root: root.to_path_buf(), names: names.iter().map(|n| (*n).to_string()).collect(), budget: budget as u64 };
            if let Some(Some(a)) = super::walkd::ask(dir, &req) {
                let from_records = usize::try_from(a.from_records).unwrap_or(usize::MAX);
                // (The service answers only for a root it could read whole.)
                return (NestedWalk { found: a.found, repos: a.repos, stopped: a.stopped, listings: Vec::new(), from_records, unreadable: Vec::new() }, Some(a.token));
            }
        }
        let mut cache = records.and_then(|d| super::nested::load(d, root, names));
        (walk_nested(root, names, budget, Known::Launch(cache.as_mut())), None)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = records;
        (walk_nested(root, names, budget, Known::Launch(None)), None)
    }
}

/// The table's names present in the subdirectories of `root`, a writable root (depth 1 to
/// [`NESTED_DEPTH`]), each protected as what it is, and the submodules git would enter. A walk
/// that runs out of its budget is reported (the rest of the root is not looked at).
fn nested_protected(p: &mut Protector<'_>, root: &Path, names: &[&str], hook_names: &[String], budget: usize) -> RootWalk {
    let (NestedWalk { found, repos, stopped, listings, from_records, unreadable }, service) = launch_walk(p.records.as_deref(), root, names, budget);
    let walk = RootWalk { root: root.to_path_buf(), listings, from_records, budget, stopped: stopped.is_some(), service };
    let first = p.out.len();
    // Said, never taken for empty (the user's tree is not changed before a run: after one, a
    // directory of the user's that changed is given its owner's reading back and read).
    for (dir, _) in unreadable {
        p.bad.push(Unprotectable { path: dir, why: NESTED_UNREADABLE.to_string() });
    }
    for (path, dir) in found {
        let n = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (kind, keys, why) = nested_protection(&n, dir, hook_names);
        p.protect_hook_file(HookFile { path, kind, why: format!("nested copy: {why}"), keys });
    }
    // Only where `.git` is a protected name (the repositories are what it protects).
    if names.contains(&".git") {
        for path in repos {
            p.protect(&path, ProtectedKind::GitDir, REPO_WHY);
        }
    }
    if let Some(dir) = stopped {
        let why = root_name(root, p.roots.first().map_or(root, PathBuf::as_path));
        let next = if p.records.is_some() { "what it read is recorded: the next launch walk goes on from there" } else { "no records of it are kept: where they would be, this run could write them, or that directory is not private to this user" };
        p.bad.push(Unprotectable { path: dir, why: format!("{NESTED_STOPPED} {budget} entries: protected names deeper in {why} were not looked for ({next}; `nested_walk_entries` raises the budget)") });
    }
    // The submodules git would enter, wherever they are (`vendor/lib`, deeper than the walk
    // goes): those `.gitmodules` registers and every gitlink of the repositories' indexes. git
    // runs in each of them for the superproject's `git status`, through its `.git`, which could
    // otherwise be pointed at a git directory the command made under another name, with its own
    // `core.fsmonitor`.
    if names.contains(&".git") {
        // The repository git finds from the root (its own, or the one it is a subdirectory of:
        // the submodules of a monorepo inside the package the workspace is), and the nested
        // ones; only the submodules inside the root count (this walk's part).
        let mut dotgits: Vec<PathBuf> = enclosing_dotgit(root).into_iter().collect();
        dotgits.extend(p.out[first..].iter().filter(|q| q.path.file_name().is_some_and(is_dotgit)).map(|q| q.path.clone()));
        let mut subs = submodule_gits(root, &dotgits, p.records.as_deref());
        subs.plain.retain(|(g, _)| g.starts_with(root));
        subs.linked.retain(|(l, _)| l.starts_with(root));
        for (index, e) in subs.unreadable {
            p.bad.push(Unprotectable { path: index, why: format!("{INDEX_UNREAD}: {e}") });
        }
        // One reached through a symbolic link: the link is protected, and where it leads.
        for (_, path) in subs.linked {
            p.protect(&path, ProtectedKind::GitDir, &format!("a submodule's git link: {}", table_why(Path::new(".git"))));
        }
        let mut count = 0usize;
        for (path, reason) in subs.plain {
            if p.out.iter().any(|q| q.path == path) {
                continue;
            }
            // Each one is a private copy at Full (a mount): bounded. The review after the run
            // takes the `.git` of every one beyond as made during the run.
            if count == SUBMODULE_REPOS {
                let why = format!("more than {SUBMODULE_REPOS} submodules: from {} on they are not protected during the run, and their .git is taken out after it", path.display());
                p.bad.push(Unprotectable { path: root.to_path_buf(), why });
                break;
            }
            count += 1;
            let reason = format!("{reason}: {}", table_why(Path::new(".git")));
            if std::fs::symlink_metadata(&path).is_ok() {
                p.protect(&path, ProtectedKind::GitDir, &reason);
            } else {
                // Not checked out (or its directory not there): made during the run, it is
                // taken out.
                p.out.push(ProtectedPath { path, kind: ProtectedKind::GitDir, absent: true, private: false, reason, keys: Vec::new() });
            }
        }
    }
    walk
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
/// `..` are left out (git refuses them too). Reads at most [`SUBMODULE_REPOS`] indexes, each
/// taken from an earlier read that still holds where there is one (in this process, or recorded
/// in `records`: [`gitindex::gitlinks_recorded`]).
#[must_use]
pub fn submodule_gits(ws: &Path, dotgits: &[PathBuf], records: Option<&Path>) -> SubmoduleGits {
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
        match gitindex::gitlinks_recorded(&gitdir, records) {
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
    let Some(c) = crate::files::read_config_bytes(&f, 8 << 20).and_then(|t| gitconfig::parse_bytes(&t).ok()) else { return Vec::new() };
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

/// Why a protected path that is a symbolic link is protected as a file.
const LINK_WHY: &str = "a symbolic link: it cannot be made private, and is put back if the command changes or replaces it";

/// The table's reason for a protected name (relative), or `configured` for a name the user added.
pub(crate) fn table_why(rel: &Path) -> String {
    table_entry(rel).map_or_else(|| "configured".to_string(), |e| e.why.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{build_sandbox_policy, SandboxSettings};

    /// A hook manager's hook makes its worktree files protected; a sample, a name git does not
    /// run and a FIFO (not opened: it would block) do not.
    #[cfg(unix)]
    #[test]
    fn hook_managers_hooks_protect_the_files_they_run() {
        let d = crate::test_dir();
        let (hooks, wt) = (d.path().join("hooks"), d.path().join("wt"));
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit.sample"), "# File generated by pre-commit: https://pre-commit.com\n").unwrap();
        std::fs::write(hooks.join("not-a-hook"), "lefthook run\n").unwrap();
        let fifo = std::ffi::CString::new(hooks.join("pre-push").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a path of our own test directory.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert!(hook_manager_files(&hook_managers_in_force(std::slice::from_ref(&hooks)), &wt).is_empty());
        std::fs::write(hooks.join("pre-commit"), "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n").unwrap();
        std::fs::write(hooks.join("commit-msg"), "#!/bin/sh\nlefthook run commit-msg \"$@\"\n").unwrap();
        let got = hook_manager_files(&hook_managers_in_force(std::slice::from_ref(&hooks)), &wt);
        let has = |rel: &str, kind: ProtectedKind| got.iter().any(|f| f.path == wt.join(rel) && f.kind == kind);
        assert!(has(".pre-commit-config.yaml", ProtectedKind::File) && has("lefthook.yml", ProtectedKind::File) && has(".lefthook", ProtectedKind::Dir), "{got:?}");
        assert!(!has(".lintstagedrc.json", ProtectedKind::File) && !has(".huskyrc", ProtectedKind::File), "{got:?}");
        // husky 9: `core.hooksPath = .husky/_`, whose hooks run `.husky/<hook>`, which runs
        // lint-staged; husky 4: its hook in the git directory.
        let husky = wt.join(".husky");
        std::fs::create_dir_all(husky.join("_")).unwrap();
        std::fs::write(husky.join("_/pre-commit"), "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n").unwrap();
        std::fs::write(husky.join("pre-commit"), "npx lint-staged\n").unwrap();
        let got = hook_manager_files(&hook_managers_in_force(&[husky.join("_")]), &wt);
        let has = |rel: &str| got.iter().any(|f| f.path == wt.join(rel) && f.kind == ProtectedKind::File);
        assert!(has(".lintstagedrc.json") && has("lint-staged.config.mjs") && has("package.yaml") && !has(".huskyrc"), "{got:?}");
        let keys = |got: &[HookFile]| got.iter().find(|f| f.path == wt.join("package.json")).map(|f| f.keys.clone());
        assert_eq!(keys(&got), Some(vec!["lint-staged".to_string()]), "package.json by its key");
        assert!(!has_keys(&got, ".lintstagedrc.json"));
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\n. \"$(dirname -- \"$0\")/husky.sh\"\n").unwrap();
        let got = hook_manager_files(&hook_managers_in_force(std::slice::from_ref(&hooks)), &wt);
        assert!(got.iter().any(|f| f.path == wt.join(".huskyrc.json")), "{got:?}");
        assert_eq!(keys(&got), Some(vec!["husky".to_string()]));
        // Both in force: both keys, one entry.
        let got = hook_manager_files(&hook_managers_in_force(&[hooks, husky.join("_")]), &wt);
        assert_eq!(keys(&got), Some(vec!["husky".to_string(), "lint-staged".to_string()]));
        assert_eq!(got.iter().filter(|f| f.path == wt.join("package.json")).count(), 1);
        assert!(got.iter().any(|f| f.why.contains("\"husky\" and \"lint-staged\" key")), "{got:?}");
    }

    #[cfg(unix)]
    fn has_keys(got: &[HookFile], rel: &str) -> bool {
        got.iter().any(|f| f.path.ends_with(rel) && !f.keys.is_empty())
    }

    /// The nested walk's and the submodule search's protected paths alone.
    #[cfg(unix)]
    fn nested(policy: &SandboxPolicy) -> (Vec<ProtectedPath>, Vec<Unprotectable>) {
        let mut resolver = PathResolver::new();
        let mut p = Protector { resolver: &mut resolver, roots: vec![policy.workspace_path.clone()], files: Vec::new(), scratch: Vec::new(), records: None, out: Vec::new(), bad: Vec::new(), in_scratch: Vec::new() };
        let names: Vec<&str> = policy.protected_workspace_paths.iter().map(String::as_str).filter(|n| !n.contains('/')).collect();
        nested_protected(&mut p, &policy.workspace_path, &names, &[], NESTED_ENTRIES);
        (p.out, p.bad)
    }

    #[cfg(unix)]
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
        let subs = submodule_gits(ws, &[ws.join(".git")], None);
        let plain: Vec<PathBuf> = subs.plain.iter().map(|(g, _)| g.clone()).collect();
        assert_eq!(plain, ["vendor/lib/.git", "a/b/c/d/e/deep/.git", "removed/lib/.git"].map(|r| ws.join(r)));
        assert_eq!(subs.linked, vec![(ws.join("linked"), ws.join("linked/x/.git"))]);
        assert!(subs.unreadable.is_empty());
        // Checked out (a .git file) and not (no .git yet): both protected.
        std::fs::write(ws.join("vendor/lib/.git"), "gitdir: ../../.git/modules/lib\n").unwrap();
        let policy = build_sandbox_policy(ws, &SandboxSettings::default()).unwrap();
        let (found, bad) = nested(&policy);
        assert!(bad.is_empty(), "{bad:?}");
        let got = |rel: &str| found.iter().find(|p| p.path == ws.join(rel)).map(|p| (p.kind, p.absent));
        assert_eq!(got("vendor/lib/.git"), Some((ProtectedKind::File, false)));
        assert_eq!(got("a/b/c/d/e/deep/.git"), Some((ProtectedKind::GitDir, true)));
        assert_eq!(got("removed/lib/.git"), Some((ProtectedKind::GitDir, true)));
        // Under a link: the link (put back if replaced), and where it leads.
        assert_eq!(got("linked/x/.git"), None);
        assert_eq!(got("linked"), Some((ProtectedKind::File, false)));
        assert_eq!(got("real/x/.git"), Some((ProtectedKind::GitDir, true)));
    }

    #[cfg(unix)]
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
        let got: Vec<PathBuf> = read_git_configs(global_git_config_files(Some(&home)), Some(&home))
            .targets
            .into_iter()
            .chain(read_git_configs(repo_git_config_files(&ws.join(".git")), Some(&home)).targets)
            .map(|(p, _)| p)
            .collect();
        for want in [home.join("dotfiles/git/config"), home.join("dotfiles/templates"), home.join("dotfiles/git/work.conf"), ws.join("shared.gitconfig"), ws.join(".git/extra.conf")] {
            assert!(got.contains(&want), "{want:?} not in {got:?}");
        }
        // A workspace file one of them names is protected (a file: any change is pending).
        std::fs::write(ws.join("shared.gitconfig"), "[user]\n").unwrap();
        let mut policy = build_sandbox_policy(&ws, &SandboxSettings::default()).unwrap();
        policy.home = Some(home.clone());
        let out = protected_paths(&mut PathResolver::new(), &policy).paths;
        let shared = out.iter().find(|p| p.path == ws.join("shared.gitconfig")).expect("protected");
        assert_eq!(shared.kind, ProtectedKind::File);
        assert!(shared.reason.starts_with("include.path in "), "{}", shared.reason);
        // A home dotfile that links into the workspace protects the link's target, present or
        // not yet; a global config that is a link, its target.
        std::os::unix::fs::symlink(ws.join("bashrc"), home.join(".bashrc")).unwrap();
        std::fs::write(ws.join("gitconfig"), "[user]\n").unwrap();
        std::fs::rename(home.join(".gitconfig"), home.join("real-gitconfig")).unwrap();
        std::os::unix::fs::symlink(ws.join("gitconfig"), home.join(".gitconfig")).unwrap();
        let out = protected_paths(&mut PathResolver::new(), &policy).paths;
        let got = |rel: &str| out.iter().find(|p| p.path == ws.join(rel)).map(|p| (p.absent, p.reason.contains("is a symbolic link to it")));
        assert_eq!(got("bashrc"), Some((true, true)));
        assert_eq!(got("gitconfig"), Some((false, true)));
    }

    // `~user/` is a Unix user's home (getpwnam).
    #[cfg(unix)]
    #[test]
    fn a_users_home_in_a_config_path() {
        let d = crate::test_dir();
        let f = d.path().join("config");
        std::fs::write(&f, "[include]\n\tpath = ~root/x.gitconfig\n\tpath = ~no-such-user-lg/y\n").unwrap();
        let got: Vec<PathBuf> = read_git_configs(vec![f], None).targets.into_iter().map(|(p, _)| p).collect();
        let root_home = user_home("root").expect("root has a home directory");
        assert_eq!(got[0], root_home.join("x.gitconfig"));
        // An unknown user: as written (relative to the including file, as git would fail it).
        assert_eq!(got[1], d.path().join("~no-such-user-lg/y"));
    }

    #[cfg(unix)]
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
        let (found, _) = nested(&policy);
        let got = |rel: &str| found.iter().find(|p| p.path == ws.join(rel)).map(|p| (p.kind, p.absent));
        assert_eq!(got("build/x/.git"), Some((ProtectedKind::File, false)));
        assert_eq!(got("a/b/c/d/e/f/.git"), Some((ProtectedKind::GitDir, true)));
        assert_eq!(got("node_modules/m/.git"), Some((ProtectedKind::GitDir, false)));
        assert_eq!(got("node_modules/m/inner/.git"), Some((ProtectedKind::GitDir, true)));
        assert_eq!(got("lnk"), Some((ProtectedKind::File, false)), "the link on the way");
        assert_eq!(got("real/y/.git"), Some((ProtectedKind::GitDir, true)), "where it leads");
        // An index that does not parse is reported, not passed over.
        std::fs::write(ws.join("node_modules/m/.git/index"), "DIRC junk").unwrap();
        let (_, bad) = nested(&policy);
        assert!(bad.iter().any(|b| b.path == ws.join("node_modules/m/.git/index") && b.why.starts_with(INDEX_UNREAD)), "{bad:?}");
    }

    #[test]
    fn the_fallback_finds_the_names_at_any_depth_but_not_in_a_git_directory() {
        let d = crate::test_dir();
        let r = d.path();
        for f in ["a/b/c/d/e/f/PACKAGE.json", "build/.lintstagedrc", ".git/package.json", "x/other.json"] {
            std::fs::create_dir_all(r.join(f).parent().unwrap()).unwrap();
            std::fs::write(r.join(f), "{}").unwrap();
        }
        let mut got = files_named_anywhere(r, &["package.json".into(), ".lintstagedrc".into()]);
        got.sort();
        assert_eq!(got, vec![r.join("a/b/c/d/e/f/PACKAGE.json"), r.join("build/.lintstagedrc")]);
    }

    /// lint-staged finds its configurations with `git ls-files`, at any depth and in `build/`:
    /// what git lists beyond the nested walk's reach is protected too (git itself lists it),
    /// not what `.gitignore` hides; the worktree is listed again after the run.
    #[cfg(unix)]
    #[test]
    fn lint_staged_configurations_git_lists_are_protected_beyond_the_walk() {
        if super::super::gitoracle::trusted_git().is_none() {
            eprintln!("skipped: no trusted git on PATH");
            return;
        }
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (home, ws) = (root.join("home"), root.join("ws"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        assert!(std::process::Command::new("git").args(["init", "-q"]).current_dir(&ws).env("GIT_CONFIG_GLOBAL", "/dev/null").status().unwrap().success());
        std::fs::create_dir_all(ws.join(".husky/_")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\trepositoryformatversion = 0\n\thooksPath = .husky/_\n").unwrap();
        std::fs::write(ws.join(".husky/_/pre-commit"), "#!/bin/sh\n. \"$(dirname \"$0\")/h\"\n").unwrap();
        std::fs::write(ws.join(".husky/pre-commit"), "npx lint-staged\n").unwrap();
        std::fs::write(ws.join(".gitignore"), "node_modules/\n").unwrap();
        for f in ["a/b/c/d/e/.lintstagedrc.json", "build/package.json", "node_modules/x/package.json"] {
            std::fs::create_dir_all(ws.join(f).parent().unwrap()).unwrap();
            std::fs::write(ws.join(f), "{}").unwrap();
        }
        let s = SandboxSettings { home: Some(home), ..Default::default() };
        let policy = build_sandbox_policy(&ws, &s).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let got = |rel: &str| set.paths.iter().find(|x| x.path == ws.join(rel)).map(|x| (x.kind, x.keys.clone()));
        assert_eq!(got("a/b/c/d/e/.lintstagedrc.json"), Some((ProtectedKind::File, Vec::new())));
        assert_eq!(got("build/package.json"), Some((ProtectedKind::File, vec!["lint-staged".to_string()])));
        assert_eq!(got("node_modules/x/package.json"), None, "hidden by .gitignore: lint-staged does not read it");
        assert!(set.unprotectable.is_empty(), "{:?}", set.unprotectable);
        assert_eq!(set.git_listings.len(), 1);
        assert_eq!((set.git_listings[0].worktree.as_path(), set.git_listings[0].root.as_path()), (ws.as_path(), ws.as_path()));
        assert!(set.git_listings[0].names.iter().any(|n| n == "package.json"));
        // A worktree git cannot list (here: not a repository git reads) is reported.
        std::fs::write(ws.join(".git/HEAD"), "garbage\n").unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        assert!(set.unprotectable.iter().any(|u| u.why.starts_with(LISTING_FAILED)), "{:?}", set.unprotectable);
    }

    /// lint-staged in force (husky 9's `.husky/pre-commit` runs it): the root's package.json by
    /// its key, its configuration files whole, and the same names in every subdirectory the
    /// nested walk reaches (a monorepo's packages); a `package.json` the user configured as
    /// protected stays protected whole.
    #[cfg(unix)]
    #[test]
    fn lint_staged_configurations_are_protected_in_every_directory() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (home, ws) = (root.join("home"), root.join("ws"));
        for dir in [".git/hooks", ".husky/_", "packages/a/src", "node_modules/x", "home"] {
            std::fs::create_dir_all(if dir == "home" { home.clone() } else { ws.join(dir) }).unwrap();
        }
        std::fs::write(ws.join(".git/config"), "[core]\n\thooksPath = .husky/_\n").unwrap();
        std::fs::write(ws.join(".husky/_/pre-commit"), "#!/bin/sh\n. \"$(dirname \"$0\")/h\"\n").unwrap();
        std::fs::write(ws.join(".husky/pre-commit"), "npx lint-staged\n").unwrap();
        for f in ["package.json", "packages/a/package.json", "packages/a/src/.lintstagedrc.json", "node_modules/x/package.json"] {
            std::fs::write(ws.join(f), "{}").unwrap();
        }
        let s = SandboxSettings { home: Some(home), ..Default::default() };
        let policy = build_sandbox_policy(&ws, &s).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let got = |rel: &str| set.paths.iter().find(|x| x.path == ws.join(rel)).map(|x| (x.kind, x.keys.clone()));
        let key = vec!["lint-staged".to_string()];
        assert_eq!(got("package.json"), Some((ProtectedKind::File, key.clone())));
        assert_eq!(got("packages/a/package.json"), Some((ProtectedKind::File, key.clone())));
        assert_eq!(got("packages/a/src/.lintstagedrc.json"), Some((ProtectedKind::File, Vec::new())));
        assert_eq!(got(".lintstagedrc.json").map(|g| g.1), Some(Vec::new()), "absent at the top: whole");
        assert_eq!(got("node_modules/x/package.json"), None, "the walk skips dependency trees");
        assert!(set.nested_hook_names.iter().any(|n| n == "package.json") && set.nested_names.iter().any(|n| n == ".lintstagedrc.json"));
        // After the run, one made during it is protected the same way.
        assert_eq!(nested_protection("package.json", false, &set.nested_hook_names).1, key);
        assert_eq!(nested_protection(".lintstagedrc.json", false, &set.nested_hook_names).0, ProtectedKind::File);
        assert_eq!(nested_protection("package.json", false, &[]).1, Vec::<String>::new(), "not a hook's name: whole");
        // Configured as protected: whole, at the top and nested (the walk's own name).
        let mut policy = policy;
        policy.protected_workspace_paths.push("package.json".into());
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let got = |rel: &str| set.paths.iter().find(|x| x.path == ws.join(rel)).map(|x| (x.kind, x.keys.clone()));
        assert_eq!(got("package.json"), Some((ProtectedKind::File, Vec::new())));
        assert_eq!(got("packages/a/package.json"), Some((ProtectedKind::File, Vec::new())));
        assert!(!set.nested_hook_names.iter().any(|n| n == "package.json"));
        // No hook runs lint-staged: none of it.
        std::fs::write(ws.join(".husky/pre-commit"), "npm test\n").unwrap();
        policy.protected_workspace_paths.pop();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        assert!(!set.paths.iter().any(|x| x.path.ends_with("package.json") || x.path.ends_with(".lintstagedrc.json")));
        assert!(set.nested_hook_names.is_empty());
    }

    /// A workspace in `/tmp` that is no repository: where git run in it would find one the
    /// command made (a `.git`, or a `HEAD` that makes the directory a bare repository) in each
    /// directory above it in the scratch directory, as absent paths, and the workspace's own
    /// `HEAD`; none elsewhere. A directory holding a `HEAD` already gets git's other
    /// code-running files too (as they stand), and one holding a `.git` (the repository around
    /// the workspace) none.
    #[cfg(target_os = "linux")]
    #[test]
    fn where_git_would_find_a_repository_a_run_made_is_where_the_review_looks() {
        let d = tempfile::tempdir_in("/tmp").unwrap();
        let top = std::fs::canonicalize(d.path()).unwrap();
        let (ws, home) = (top.join("a/ws"), top.join("home"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(top.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir(top.join("hooks")).unwrap();
        let s = SandboxSettings { home: Some(home), ..Default::default() };
        let policy = build_sandbox_policy(&ws, &s).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let got = |p: &Path| set.scratch_ancestors.iter().find(|x| x.path == p).map(|x| (x.kind, x.absent, x.reason == SCRATCH_ANCESTOR_WHY));
        assert_eq!(got(&top.join("a/.git")), Some((ProtectedKind::GitDir, true, true)));
        assert_eq!(got(&top.join("a/HEAD")), Some((ProtectedKind::File, true, true)));
        assert_eq!(got(&top.join("a/config")), None, "no HEAD in a/: a .git or a HEAD is what makes a repository there");
        assert_eq!(got(&top.join("HEAD")), Some((ProtectedKind::File, false, true)));
        for n in ["config", "commondir"] {
            assert_eq!(got(&top.join(n)), Some((ProtectedKind::File, true, true)), "{n}");
        }
        assert_eq!(got(&top.join("hooks")), Some((ProtectedKind::Dir, false, true)));
        assert!(set.scratch_ancestors.iter().all(|x| x.path.starts_with("/tmp") && !x.path.starts_with(&ws)), "{:?}", set.scratch_ancestors);
        assert!(!set.paths.iter().any(|x| x.reason == SCRATCH_ANCESTOR_WHY), "the planner adds them below Full only");
        // The workspace itself, no repository: its HEAD (a bare repository made of it), at every level.
        assert!(set.paths.iter().any(|x| x.path == ws.join("HEAD") && x.absent && x.kind == ProtectedKind::File && x.reason == ROOT_BARE_WHY), "{:?}", set.paths);
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        assert!(!protected_paths(&mut PathResolver::new(), &policy).paths.iter().any(|x| x.reason == ROOT_BARE_WHY), "a repository's own .git comes first");
        std::fs::remove_dir(ws.join(".git")).unwrap();
        // The repository around the workspace: its own protections, nothing here for it.
        std::fs::create_dir_all(top.join("a/.git")).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        assert!(!set.scratch_ancestors.iter().any(|x| x.path.starts_with(top.join("a"))), "{:?}", set.scratch_ancestors);
        // A workspace outside the scratch directories: nothing.
        let v = crate::test_dir();
        let ws = std::fs::canonicalize(v.path()).unwrap().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let policy = build_sandbox_policy(&ws, &SandboxSettings { home: Some(top.join("home")), ..Default::default() }).unwrap();
        assert!(protected_paths(&mut PathResolver::new(), &policy).scratch_ancestors.is_empty());
    }

    #[cfg(unix)]
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
        let ProtectedSet { paths: p, unprotectable: bad, in_scratch, .. } = protected_paths(&mut PathResolver::new(), &policy);
        // Where .idea leads, /tmp, is the host's at Standard: said so (the plan reports it below Full).
        let tmp = std::fs::canonicalize("/tmp").unwrap();
        assert!(in_scratch.iter().any(|u| u.path == tmp && u.why.contains("Standard")), "{in_scratch:?}");
        let got: Vec<(String, ProtectedKind, bool)> =
            p.iter().map(|x| (x.path.strip_prefix(&ws).unwrap().display().to_string(), x.kind, x.absent)).collect();
        assert_eq!(got[..3], [
            (".git".into(), ProtectedKind::GitDir, false),
            (".vscode".into(), ProtectedKind::Dir, false),
            (".idea".into(), ProtectedKind::File, false),
        ]);
        // Every other name of the table, absent, as the table's kind (a file is reviewed as one),
        // the linked .idea as a file, and .husky/_.
        assert_eq!(got.len(), crate::defaults::protected_table().len() + 1, "the table, and .husky (husky's .husky/_ runs the scripts in it)");
        assert!(got.contains(&(".bashrc".into(), ProtectedKind::File, true)) && got.contains(&(".claude".into(), ProtectedKind::Dir, true)));
        assert!(p.iter().find(|x| x.path.ends_with(".mcp.json")).unwrap().reason.contains("MCP"), "the table's why is the reason");
        // .idea is a link out of the workspace: the link is protected as a file (put back if
        // replaced; its target is not writable here). .husky/_ has no parent directory yet:
        // protected as absent all the same (its nearest existing ancestor, the workspace, is a
        // real directory; the review after the run takes out what appears there, and a link put
        // on the way).
        assert!(bad.is_empty(), "{bad:?}");
        assert!(p.iter().any(|x| x.path == ws.join(".husky") && x.absent && x.reason.contains("hooksPath") && x.reason.contains("husky")));
        // Below a link: the link.
        std::os::unix::fs::symlink("/tmp", ws.join(".husky")).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        assert!(set.unprotectable.is_empty(), "{:?}", set.unprotectable);
        assert!(set.paths.iter().any(|x| x.path == ws.join(".husky") && x.kind == ProtectedKind::File && x.reason.contains("core.hooksPath")));
    }

    #[test]
    fn every_writable_root_is_walked_for_nested_names() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (home, ws, other) = (root.join("home"), root.join("ws"), root.join("other"));
        for dir in [home.join("x"), ws.join("a/.vscode"), other.join("sub/repo/.git"), other.join("pkg/.vscode")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let s = SandboxSettings { home: Some(home), extra_write: vec![other.clone()], ..Default::default() };
        let policy = build_sandbox_policy(&ws, &s).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        // Nested copies in the other root as in the workspace, each as what it is.
        for (path, kind) in [(ws.join("a/.vscode"), ProtectedKind::Dir), (other.join("sub/repo/.git"), ProtectedKind::GitDir), (other.join("pkg/.vscode"), ProtectedKind::Dir)] {
            assert!(set.paths.iter().any(|p| p.path == path && p.kind == kind && !p.absent && p.reason.starts_with("nested copy")), "{path:?}: {:?}", set.paths);
        }
        // One walk per root, the workspace first, each with the directories it read (for the walk
        // after the run); none ran out of its budget.
        let walked: Vec<&Path> = set.nested_walks.iter().map(|w| w.root.as_path()).collect();
        assert_eq!(walked, [ws.as_path(), other.as_path()]);
        assert!(set.nested_walks[1].listings.iter().any(|l| l.path == other.join("sub") && l.depth == 1));
        assert!(set.nested_walks.iter().all(|w| !w.stopped));
    }

    // The survey's roots are canonical by the path resolver, whose Windows paths keep the
    // verbatim prefix: the survey is run by the Linux runner only (docs/platforms.md).
    #[cfg(unix)]
    #[test]
    fn a_writable_root_that_is_a_git_directory_is_protected_whole_and_not_walked() {
        let d = crate::test_dir();
        let root = crate::guard::fsmeta::canonical(d.path()).unwrap();
        let (home, repo) = (root.join("home"), root.join("repo"));
        // A repository's git directory (named .git) and a bare one (HEAD, objects/, refs/).
        for dir in [home.clone(), repo.join("sub"), repo.join(".git/hooks"), repo.join(".git/objects"), repo.join(".git/refs"), root.join("bare.git/objects"), root.join("bare.git/refs"), root.join("bare.git/x/.vscode")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("bare.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let s = SandboxSettings { home: Some(home), extra_write: vec![root.join("bare.git")], ..Default::default() };
        // The workspace a subdirectory of the repository: its git directory is granted.
        let policy = build_sandbox_policy(&repo.join("sub"), &s).unwrap();
        assert!(policy.writable_paths.contains(&repo.join(".git")), "{:?}", policy.writable_paths);
        let set = protected_paths(&mut PathResolver::new(), &policy);
        for g in [repo.join(".git"), root.join("bare.git")] {
            assert!(set.paths.iter().any(|p| p.path == g && p.kind == ProtectedKind::GitDir && !p.absent && p.reason == GIT_ROOT_WHY), "{g:?}: {:?}", set.paths);
            // Covered whole: nothing inside it is a path of its own, and it is not walked.
            assert!(!set.paths.iter().any(|p| p.path != g && p.path.starts_with(&g)), "{:?}", set.paths);
            let walk = set.nested_walks.iter().find(|w| w.root == g).expect("one walk entry per root");
            assert!(walk.listings.is_empty() && !walk.stopped);
        }
        assert!(!set.unprotectable.iter().any(|u| u.path.starts_with(&repo) || u.path.starts_with(root.join("bare.git"))), "{:?}", set.unprotectable);
    }

    #[cfg(unix)]
    #[test]
    fn a_protected_name_that_is_a_link_protects_the_link_and_where_it_leads() {
        use std::os::unix::fs::symlink;
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (home, ws) = (root.join("home"), root.join("ws"));
        std::fs::create_dir_all(ws.join("real.git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("hooks-real")).unwrap();
        std::fs::create_dir_all(ws.join("dot")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(ws.join("real.git/config"), "[core]\n\thooksPath = .githooks\n").unwrap();
        symlink("real.git", ws.join(".git")).unwrap();
        symlink("hooks-real", ws.join(".githooks")).unwrap();
        // Dangling: where the command would create it.
        symlink("vs-real", ws.join(".vscode")).unwrap();
        // A chain from the home directory through the workspace.
        std::fs::write(ws.join("dot/bashrc"), "x\n").unwrap();
        symlink("dot/bashrc", ws.join("l1")).unwrap();
        symlink(ws.join("l1"), home.join(".bashrc")).unwrap();
        // A loop.
        symlink(".claude2", ws.join(".claude")).unwrap();
        symlink(".claude", ws.join(".claude2")).unwrap();
        let policy = build_sandbox_policy(&ws, &SandboxSettings { home: Some(home), ..Default::default() }).unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let got = |rel: &str| set.paths.iter().find(|x| x.path == ws.join(rel)).map(|x| (x.kind, x.absent));
        assert_eq!(got(".git"), Some((ProtectedKind::File, false)), "the link itself");
        assert_eq!(got("real.git"), Some((ProtectedKind::GitDir, false)), "git's directory, as git's");
        assert_eq!(got(".githooks"), Some((ProtectedKind::File, false)));
        assert_eq!(got("hooks-real"), Some((ProtectedKind::Dir, false)), "the hooks directory the link leads to");
        assert_eq!(got(".vscode"), Some((ProtectedKind::File, false)));
        assert_eq!(got("vs-real"), Some((ProtectedKind::Dir, true)));
        assert_eq!(got("l1"), Some((ProtectedKind::File, false)), "a link on the way from the home directory");
        assert_eq!(got("dot/bashrc"), Some((ProtectedKind::File, false)));
        assert!(set.paths.iter().find(|x| x.path == ws.join("hooks-real")).unwrap().reason.contains("core.hooksPath"));
        assert!(set.unprotectable.iter().any(|b| b.path == ws.join(".claude") && b.why.contains("loop")), "{:?}", set.unprotectable);
        // `core.hooksPath = .`: the worktree is the hooks directory, each hook name in it a
        // protected file.
        std::fs::remove_file(ws.join(".git")).unwrap();
        std::fs::rename(ws.join("real.git"), ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\thooksPath = .\n").unwrap();
        std::fs::write(ws.join("pre-commit"), "#!/bin/sh\n").unwrap();
        let set = protected_paths(&mut PathResolver::new(), &policy);
        let got = |rel: &str| set.paths.iter().find(|x| x.path == ws.join(rel)).map(|x| (x.kind, x.absent));
        assert_eq!(got("pre-commit"), Some((ProtectedKind::File, false)));
        assert_eq!(got("post-checkout"), Some((ProtectedKind::File, true)));
        assert!(!set.unprotectable.iter().any(|b| b.path == ws), "{:?}", set.unprotectable);
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
        // the same path as `.vscode` (protected once); `.git/hooks` is `.git`. (`HEAD`: the
        // workspace is no repository, and a run could make it a bare one.)
        assert_eq!(got, [".vscode", ".vscode-x", ".git", "HEAD"]);
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
        let husky = set.paths.iter().find(|x| x.path == sub.join(".husky")).expect("the enclosing repository's hooks directory, and what its hooks run beside it");
        assert_eq!((husky.kind, husky.absent), (ProtectedKind::Dir, false));
        assert_eq!(enclosing_dotgit(&sub.join(".husky")), Some(ws.join("mono/.git")));
        assert_eq!(enclosing_dotgit(&ws.join("tools")), Some(ws.join("tools/.git")), "its own first");
    }

    #[test]
    fn nested_names_are_found_whatever_their_ascii_case() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        // On a case-insensitive filesystem these are git's and VS Code's; on this one,
        // protecting them costs nothing. A top-level `.GIT` is an ordinary directory here.
        std::fs::create_dir_all(ws.join("sub/.GIT/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("a/.VSCode")).unwrap();
        std::fs::create_dir_all(ws.join(".GIT/x/.git")).unwrap();
        let walk = walk_nested(&ws, &[".git", ".vscode"], NESTED_ENTRIES, Known::Launch(None));
        let found: Vec<PathBuf> = walk.found.iter().map(|(p, _)| p.strip_prefix(&ws).unwrap().to_path_buf()).collect();
        assert_eq!(found, [".GIT/x/.git", "a/.VSCode", "sub/.GIT"].map(PathBuf::from));
        assert_eq!(walk.found.iter().find(|(p, _)| p.ends_with("sub/.GIT")).map(|f| f.1), Some(true));
        assert_eq!(nested_kind(".GIT", true), ProtectedKind::GitDir);
        assert_eq!(nested_kind(".VSCode", true), ProtectedKind::Dir);
        let policy = build_sandbox_policy(&ws, &SandboxSettings { home: None, ..Default::default() }).unwrap();
        let p = protected_paths(&mut PathResolver::new(), &policy).paths;
        let got = |rel: &str| p.iter().find(|x| x.path == ws.join(rel)).map(|x| x.kind);
        assert_eq!(got("sub/.GIT"), Some(ProtectedKind::GitDir));
        assert_eq!(got("a/.VSCode"), Some(ProtectedKind::Dir));
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
