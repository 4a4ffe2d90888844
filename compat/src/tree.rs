//! The workspace after a run, as content and mode: what a command left behind is compared
//! between the bare and the sandboxed run, not only its exit code and output (a sandbox that
//! silently lost a write, changed a mode or left a stray file fails the command).
//!
//! A [`Snapshot`] maps each path below the workspace (relative, `/`-separated) to its kind and
//! permission bits, a file's content hash (64-bit FNV-1a) and a symlink's target; times, owners
//! and inode numbers are left out. [`differences`] compares two snapshots under [`Rules`],
//! applied alike to both: what the tools themselves make differ from one run to the next
//! (git's object names and index, a compiler's incremental caches) is skipped or compared
//! without its content, each rule with its reason. Paths the sandbox held back for the user's
//! review (the run's `protected_review.pending`) are left out of the sandboxed side and counted:
//! that difference is the protection working, and the report says so.

use std::borrow::Cow;
use std::collections::BTreeMap;
#[cfg(unix)]
use std::io::Read;
#[cfg(unix)]
use std::path::Path;

/// One entry of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: permission bits and content hash.
    File {
        /// `mode & 0o7777`.
        mode: u32,
        /// FNV-1a 64 of the content.
        hash: u64,
    },
    /// A directory: permission bits.
    Dir {
        /// `mode & 0o7777`.
        mode: u32,
    },
    /// A symbolic link: its target as written.
    Symlink {
        /// The link's text.
        target: String,
    },
    /// Anything else (fifo, socket, device).
    Other,
}

impl Entry {
    fn describe(&self, content: bool) -> String {
        match self {
            Entry::File { mode, hash } if content => format!("file {mode:o} {hash:016x}"),
            Entry::File { mode, .. } => format!("file {mode:o}"),
            Entry::Dir { mode } => format!("dir {mode:o}"),
            Entry::Symlink { target } => format!("symlink -> {target}"),
            Entry::Other => "special file".into(),
        }
    }
}

/// Relative path → entry.
pub type Snapshot = BTreeMap<String, Entry>;

/// How a path is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Treatment {
    /// Not compared at all (nor walked, for a directory).
    Skip,
    /// Existence, kind and mode compared; the content is not.
    NoContent,
}

/// One rule: a pattern (`**` any number of path components, `*` any run of characters within
/// one component), its treatment and why.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The pattern, relative to the workspace.
    pub pattern: Cow<'static, str>,
    /// What the rule does.
    pub treatment: Treatment,
    /// Why the difference is the tool's, not the sandbox's.
    pub why: &'static str,
}

/// The rules applied to every command (both sides alike); a command adds its own `unstable`
/// paths ([`command_rules`]).
pub const RULES: &[Rule] = &[
    Rule { pattern: Cow::Borrowed("**/.git/objects/**"), treatment: Treatment::Skip, why: "object names hash content that embeds commit times" },
    Rule { pattern: Cow::Borrowed("**/.git/logs/**"), treatment: Treatment::Skip, why: "reflogs record times" },
    Rule { pattern: Cow::Borrowed("**/.git/index"), treatment: Treatment::NoContent, why: "git's index caches inode numbers and times" },
    Rule { pattern: Cow::Borrowed("**/.git/refs/**"), treatment: Treatment::NoContent, why: "a ref holds a commit id, which hashes commit times" },
    Rule { pattern: Cow::Borrowed("**/.git/packed-refs"), treatment: Treatment::NoContent, why: "commit ids" },
    Rule { pattern: Cow::Borrowed("**/.git/ORIG_HEAD"), treatment: Treatment::NoContent, why: "a commit id" },
    Rule { pattern: Cow::Borrowed("**/.git/FETCH_HEAD"), treatment: Treatment::NoContent, why: "commit ids" },
    Rule { pattern: Cow::Borrowed("**/.git/AUTO_MERGE"), treatment: Treatment::NoContent, why: "a tree id of a merge's result, hashed with times" },
    Rule { pattern: Cow::Borrowed("**/.git/worktrees/*/index"), treatment: Treatment::NoContent, why: "a worktree's index caches inode numbers and times" },
    Rule { pattern: Cow::Borrowed("**/.git/worktrees/*/logs/**"), treatment: Treatment::Skip, why: "reflogs record times" },
    Rule { pattern: Cow::Borrowed("**/.rustc_info.json"), treatment: Treatment::NoContent, why: "cargo writes its cache of rustc's answers from a hash map, in no fixed order" },
    Rule { pattern: Cow::Borrowed("**/target/debug/**"), treatment: Treatment::Skip, why: "cargo's incremental sessions and fingerprints are named and stamped per build" },
    Rule { pattern: Cow::Borrowed("**/target/release/**"), treatment: Treatment::Skip, why: "cargo's incremental sessions and fingerprints are named and stamped per build" },
    Rule { pattern: Cow::Borrowed("**/__pycache__/*.pyc"), treatment: Treatment::NoContent, why: "a .pyc records its source's size and time" },
    Rule { pattern: Cow::Borrowed("**/node_modules/.cache/**"), treatment: Treatment::Skip, why: "tool caches" },
    Rule { pattern: Cow::Borrowed("**/node_modules/.vite/**"), treatment: Treatment::Skip, why: "vite's dependency cache, in directories with random names" },
];

/// [`RULES`] followed by a command's own `unstable` patterns (skipped).
#[must_use]
pub fn command_rules(unstable: &[String]) -> Vec<Rule> {
    let mut v = RULES.to_vec();
    for u in unstable {
        v.push(Rule { pattern: Cow::Owned(u.clone()), treatment: Treatment::Skip, why: "declared unstable by the command (its `why`)" });
    }
    v
}

/// Whether `path` (relative, `/`-separated) matches `pattern`.
#[must_use]
pub fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    fn go(p: &[&str], s: &[&str]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((&"**", rest)) => (0..=s.len()).any(|i| go(rest, &s[i..])),
            Some((seg, rest)) => s.split_first().is_some_and(|(c, srest)| component(seg, c) && go(rest, srest)),
        }
    }
    fn component(p: &str, c: &str) -> bool {
        match p.split_once('*') {
            None => p == c,
            Some((pre, post)) => {
                c.len() >= pre.len() + post.len() && c.starts_with(pre) && component_rest(post, &c[pre.len()..])
            }
        }
    }
    fn component_rest(p: &str, c: &str) -> bool {
        // `p` is what follows a `*`: it must match some suffix of `c`.
        (0..=c.len()).filter(|i| c.is_char_boundary(*i)).any(|i| component(p, &c[i..]))
    }
    go(&p, &s)
}

/// The treatment of `path` under `rules` (the first rule that matches), if any.
#[must_use]
pub fn treatment(rules: &[Rule], path: &str) -> Option<Treatment> {
    rules.iter().find(|r| matches(&r.pattern, path)).map(|r| r.treatment)
}

#[cfg(unix)]
fn fnv1a(r: &mut impl Read) -> std::io::Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buf = [0u8; 64 << 10];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(h);
        }
        for b in &buf[..n] {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Snapshots the tree below `root` (not following symlinks; skipped directories not walked).
///
/// # Errors
/// A directory or file that cannot be read (the message names it).
#[cfg(unix)]
pub fn snapshot(root: &Path, rules: &[Rule]) -> Result<Snapshot, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Snapshot::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() { root.to_path_buf() } else { root.join(&rel) };
        let rd = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for ent in rd {
            let ent = ent.map_err(|e| format!("{}: {e}", dir.display()))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let how = treatment(rules, &path);
            if how == Some(Treatment::Skip) {
                continue;
            }
            let full = ent.path();
            let md = std::fs::symlink_metadata(&full).map_err(|e| format!("{}: {e}", full.display()))?;
            let mode = md.permissions().mode() & 0o7777;
            let ft = md.file_type();
            let e = if ft.is_symlink() {
                Entry::Symlink { target: std::fs::read_link(&full).map(|t| t.to_string_lossy().into_owned()).unwrap_or_default() }
            } else if ft.is_dir() {
                stack.push(path.clone());
                Entry::Dir { mode }
            } else if ft.is_file() {
                let hash = if how == Some(Treatment::NoContent) {
                    0
                } else {
                    let mut f = std::fs::File::open(&full).map_err(|e| format!("{}: {e}", full.display()))?;
                    fnv1a(&mut f).map_err(|e| format!("{}: {e}", full.display()))?
                };
                Entry::File { mode, hash }
            } else {
                Entry::Other
            };
            out.insert(path, e);
        }
    }
    Ok(out)
}

/// The differences between the bare and the sandboxed snapshot, one line each (`-` only after
/// the bare run, `+` only after the sandboxed one, `~` both but different), leaving out the
/// sandboxed run's `held` paths (and what lies below them).
#[must_use]
pub fn differences(bare: &Snapshot, sbx: &Snapshot, rules: &[Rule], held: &[String]) -> Vec<String> {
    let is_held = |p: &str| held.iter().any(|h| p == h || p.starts_with(&format!("{h}/")));
    let content = |p: &str| treatment(rules, p) != Some(Treatment::NoContent);
    let mut out = Vec::new();
    for (p, b) in bare {
        if is_held(p) {
            continue;
        }
        match sbx.get(p) {
            None => out.push(format!("- {p} ({})", b.describe(content(p)))),
            Some(s) if s != b => out.push(format!("~ {p}: bare {}, sandboxed {}", b.describe(content(p)), s.describe(content(p)))),
            Some(_) => {}
        }
    }
    for (p, s) in sbx {
        if !bare.contains_key(p) && !is_held(p) {
            out.push(format!("+ {p} ({})", s.describe(content(p))));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_components() {
        assert!(matches("**/.git/objects/**", ".git/objects/ab/cdef"));
        assert!(matches("**/.git/objects/**", "sub/.git/objects/ab"));
        assert!(!matches("**/.git/objects/**", ".git/objectsx/ab"));
        assert!(matches("**/.git/index", ".git/index"));
        assert!(!matches("**/.git/index", ".git/index.lock"));
        assert!(matches("**/__pycache__/*.pyc", "pkg/__pycache__/m.cpython-311.pyc"));
        assert!(!matches("**/__pycache__/*.pyc", "pkg/__pycache__/m.py"));
        assert!(matches("**/target/debug/**", "target/debug/deps/x"));
        assert!(!matches("**/target/debug/**", "src/target.rs"));
    }

    #[test]
    fn differences_report_lost_changed_and_stray_entries_and_leave_held_paths_out() {
        let f = |hash| Entry::File { mode: 0o644, hash };
        let bare: Snapshot = [("a".to_string(), f(1)), ("b".into(), f(2)), ("d".into(), Entry::Dir { mode: 0o755 }), (".git/index".into(), f(0))].into();
        let mut sbx = bare.clone();
        sbx.remove("a");
        sbx.insert("b".into(), Entry::File { mode: 0o600, hash: 2 });
        sbx.insert("stray".into(), f(3));
        sbx.insert(".git/hooks/pre-commit".into(), f(4));
        let d = differences(&bare, &sbx, RULES, &[".git/hooks".into()]);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].starts_with("- a "), "{d:?}");
        assert!(d[1].starts_with("~ b: bare file 644") && d[1].contains("sandboxed file 600"), "{d:?}");
        assert!(d[2].starts_with("+ stray "), "{d:?}");
        assert!(differences(&bare, &bare, RULES, &[]).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn snapshot_hashes_content_and_mode_and_skips_by_rule() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".git/objects/ab")).unwrap();
        std::fs::write(d.path().join(".git/objects/ab/cd"), "x").unwrap();
        std::fs::write(d.path().join(".git/index"), "i1").unwrap();
        std::fs::write(d.path().join("f"), "hello").unwrap();
        std::fs::set_permissions(d.path().join("f"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("f", d.path().join("l")).unwrap();
        let s = snapshot(d.path(), RULES).unwrap();
        assert!(!s.keys().any(|k| k.starts_with(".git/objects/")), "{s:?}");
        assert!(!s.contains_key(".git/objects"), "a `dir/**` rule skips the directory itself too");
        assert_eq!(s[".git/index"], Entry::File { mode: s_mode(&d.path().join(".git/index")), hash: 0 });
        assert!(matches!(s["f"], Entry::File { mode: 0o640, hash } if hash != 0));
        assert_eq!(s["l"], Entry::Symlink { target: "f".into() });
        std::fs::write(d.path().join("f"), "hellO").unwrap();
        let t = snapshot(d.path(), RULES).unwrap();
        assert_eq!(differences(&s, &t, RULES, &[]).len(), 1);
    }

    #[cfg(unix)]
    fn s_mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }
}
