//! Landlock part of the plan: which rights the ABI has, which are handled, and the path rules,
//! with deny-inside-allow resolved by granting siblings (snapshot semantics).
//!
//! Landlock grants access when *any* rule on a path's ancestry grants it, so a deny inside a
//! granted directory cannot be expressed directly. Instead the grant is replaced by grants on
//! every entry of that directory except the denied one (recursively), computed at launch: a file
//! created later directly inside such an expanded directory is not covered by any rule.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::resolve::{FileKind, PathResolver};

/// Landlock filesystem access bits (uapi `LANDLOCK_ACCESS_FS_*`).
pub mod fs {
    /// Execute a file.
    pub const EXECUTE: u64 = 1 << 0;
    /// Open a file for writing.
    pub const WRITE_FILE: u64 = 1 << 1;
    /// Open a file for reading.
    pub const READ_FILE: u64 = 1 << 2;
    /// List a directory.
    pub const READ_DIR: u64 = 1 << 3;
    /// Remove a directory.
    pub const REMOVE_DIR: u64 = 1 << 4;
    /// Remove a file.
    pub const REMOVE_FILE: u64 = 1 << 5;
    /// Create a character device.
    pub const MAKE_CHAR: u64 = 1 << 6;
    /// Create a directory.
    pub const MAKE_DIR: u64 = 1 << 7;
    /// Create a regular file.
    pub const MAKE_REG: u64 = 1 << 8;
    /// Create a unix socket file.
    pub const MAKE_SOCK: u64 = 1 << 9;
    /// Create a FIFO.
    pub const MAKE_FIFO: u64 = 1 << 10;
    /// Create a block device.
    pub const MAKE_BLOCK: u64 = 1 << 11;
    /// Create a symlink.
    pub const MAKE_SYM: u64 = 1 << 12;
    /// Link or rename a file across directories (ABI 2).
    pub const REFER: u64 = 1 << 13;
    /// Truncate a file (ABI 3).
    pub const TRUNCATE: u64 = 1 << 14;
    /// ioctl on a device file (ABI 5).
    pub const IOCTL_DEV: u64 = 1 << 15;
    /// connect to a pathname unix socket (ABI 9).
    pub const RESOLVE_UNIX: u64 = 1 << 16;
    /// Rights that make sense on a non-directory.
    pub const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;

    /// Names of the bits, in bit order.
    pub const NAMES: &[(u64, &str)] = &[
        (EXECUTE, "execute"),
        (WRITE_FILE, "write_file"),
        (READ_FILE, "read_file"),
        (READ_DIR, "read_dir"),
        (REMOVE_DIR, "remove_dir"),
        (REMOVE_FILE, "remove_file"),
        (MAKE_CHAR, "make_char"),
        (MAKE_DIR, "make_dir"),
        (MAKE_REG, "make_reg"),
        (MAKE_SOCK, "make_sock"),
        (MAKE_FIFO, "make_fifo"),
        (MAKE_BLOCK, "make_block"),
        (MAKE_SYM, "make_sym"),
        (REFER, "refer"),
        (TRUNCATE, "truncate"),
        (IOCTL_DEV, "ioctl_dev"),
        (RESOLVE_UNIX, "resolve_unix"),
    ];
}

/// Landlock network access bits (ABI 4).
pub mod net {
    /// bind a TCP port.
    pub const BIND_TCP: u64 = 1 << 0;
    /// connect to a TCP port.
    pub const CONNECT_TCP: u64 = 1 << 1;
}

/// Landlock scope bits (ABI 6).
pub mod scope {
    /// connect to abstract unix sockets outside the domain.
    pub const ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
    /// send signals to processes outside the domain.
    pub const SIGNAL: u64 = 1 << 1;
}

/// The highest ABI whose rights this build knows (and the `landlock` crate supports).
pub const MAX_KNOWN_ABI: u32 = 9;

/// Filesystem rights a given ABI can handle.
#[must_use]
pub fn fs_rights_for_abi(abi: u32) -> u64 {
    if abi == 0 {
        return 0;
    }
    let mut r = (1 << 13) - 1; // EXECUTE..MAKE_SYM (ABI 1)
    if abi >= 2 {
        r |= fs::REFER;
    }
    if abi >= 3 {
        r |= fs::TRUNCATE;
    }
    if abi >= 5 {
        r |= fs::IOCTL_DEV;
    }
    if abi >= 9 {
        r |= fs::RESOLVE_UNIX;
    }
    r
}

/// Network rights a given ABI can handle.
#[must_use]
pub fn net_rights_for_abi(abi: u32) -> u64 {
    if abi >= 4 {
        net::BIND_TCP | net::CONNECT_TCP
    } else {
        0
    }
}

/// Scopes a given ABI can enforce.
#[must_use]
pub fn scopes_for_abi(abi: u32) -> u64 {
    if abi >= 6 {
        scope::ABSTRACT_UNIX_SOCKET | scope::SIGNAL
    } else {
        0
    }
}

/// Human names of a set of filesystem rights.
#[must_use]
pub fn fs_right_names(bits: u64) -> Vec<&'static str> {
    fs::NAMES.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| *n).collect()
}

/// Read, list and execute.
#[must_use]
pub fn read_exec(abi: u32) -> u64 {
    (fs::EXECUTE | fs::READ_FILE | fs::READ_DIR) & fs_rights_for_abi(abi)
}

/// Read and list, no execute (`/proc`, `/sys`).
#[must_use]
pub fn read_only(abi: u32) -> u64 {
    (fs::READ_FILE | fs::READ_DIR) & fs_rights_for_abi(abi)
}

/// Everything but creating device nodes.
#[must_use]
pub fn read_write(abi: u32) -> u64 {
    fs_rights_for_abi(abi) & !(fs::MAKE_CHAR | fs::MAKE_BLOCK)
}

/// Open a device read-write, truncate it (`> /dev/null` opens with `O_TRUNC`), ioctl on it.
#[must_use]
pub fn device(abi: u32) -> u64 {
    (fs::READ_FILE | fs::WRITE_FILE | fs::READ_DIR | fs::TRUNCATE | fs::IOCTL_DEV) & fs_rights_for_abi(abi)
}

/// One Landlock path rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PathRule {
    /// The (canonical) path the rule is attached to.
    pub path: PathBuf,
    /// Granted access bits.
    pub access: u64,
    /// Why this rule exists.
    pub reason: String,
}

/// A requested grant that produced no rule, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SkippedPath {
    /// The path as requested.
    pub path: PathBuf,
    /// Why no rule was made.
    pub reason: String,
}

/// A grant request before deny resolution.
#[derive(Clone, Debug)]
pub struct Grant {
    /// Requested path (may be a symlink, may not exist).
    pub path: PathBuf,
    /// Rights on it.
    pub access: u64,
    /// Why.
    pub reason: String,
    /// A missing path is an error (user-requested) rather than skipped (defaults).
    pub must_exist: bool,
}

/// The outcome of rule resolution.
#[derive(Debug, Default)]
pub struct ResolvedRules {
    /// Rules to add.
    pub rules: Vec<PathRule>,
    /// Grants that produced no rule.
    pub skipped: Vec<SkippedPath>,
    /// Grants that were expanded into siblings because a deny lies inside them.
    pub expanded: Vec<(PathBuf, PathBuf)>,
}

/// Resolves `p` through symlinks as far as it exists, and appends the missing tail lexically.
///
/// One-off form of [`PathResolver::canonicalize_lenient`]; use a shared [`PathResolver`] to
/// resolve many paths.
#[must_use]
pub fn canonicalize_lenient(p: &Path) -> PathBuf {
    PathResolver::new().canonicalize_lenient(p).path
}

pub use crate::plan::resolve::normalize;

const MAX_EXPAND_DEPTH: usize = 12;
const MAX_EXPAND_ENTRIES: usize = 20_000;

/// Turns grant requests into Landlock rules that never cover a denied path.
///
/// # Errors
/// A message when a grant marked `must_exist` does not exist, or when a directory that must be
/// expanded around a deny cannot be listed or is too large.
pub fn resolve_rules(grants: &[Grant], denies: &[PathBuf]) -> Result<ResolvedRules, String> {
    resolve_rules_with_masks(grants, denies, &[])
}

/// Like [`resolve_rules`], but denied paths in `masked` are hidden by mounts (Full level): grants
/// inside them are still dropped, but their parents are not expanded into siblings.
///
/// # Errors
/// As [`resolve_rules`].
pub fn resolve_rules_with_masks(grants: &[Grant], denies: &[PathBuf], masked: &[PathBuf]) -> Result<ResolvedRules, String> {
    resolve_rules_with(&mut PathResolver::new(), grants, denies, masked)
}

/// [`resolve_rules_with_masks`] with a caller's resolver (shared with the rest of a plan).
///
/// # Errors
/// As [`resolve_rules`].
pub fn resolve_rules_with(
    resolver: &mut PathResolver,
    grants: &[Grant],
    denies: &[PathBuf],
    masked: &[PathBuf],
) -> Result<ResolvedRules, String> {
    let mut both = |d: &PathBuf| [normalize(d), normalize(&resolver.canonicalize_lenient(d).path)];
    let deny_set = PathSet::new(denies.iter().flat_map(&mut both));
    let masked = PathSet::new(masked.iter().flat_map(&mut both));
    let mut out = ResolvedRules::default();
    let mut budget = MAX_EXPAND_ENTRIES;
    for g in grants {
        let Ok(canon) = resolver.canonicalize(&g.path) else {
            if g.must_exist {
                return Err(format!("{}: no such file or directory", g.path.display()));
            }
            out.skipped.push(SkippedPath { path: g.path.clone(), reason: "does not exist".into() });
            continue;
        };
        let mut ctx = Expand { resolver, denies: &deny_set, masked: &masked, budget: &mut budget, out: &mut out };
        ctx.resolve_one(&canon.path, canon.kind, g, 0)?;
    }
    Ok(out)
}

/// A set of normalised paths (as [`normalize`] returns them: no `.`, `..`, repeated or trailing
/// separators), for the two questions deny resolution asks without scanning the whole set. Such
/// paths are equal exactly when their bytes are, and their ancestors are byte prefixes.
#[derive(Debug, Default)]
pub struct PathSet {
    /// In `Path` order (component by component, see [`path_order`]), without repeats: the order
    /// results are reported in, and binary-searched for exact lookups ([`PathSet::get`]).
    sorted: Vec<PathBuf>,
    /// `lengths[n]`: some path of the set is `n` bytes long (most ancestors need no lookup).
    lengths: Vec<bool>,
    /// The paths and all their ancestors: a path not in here has nothing of the set inside it.
    ancestors: HashSet<OsString>,
}

/// The ends of the ancestors of a normalised path, as byte offsets, shortest first: `""`, then `/`
/// for an absolute path, then every component, the last being the path itself.
fn ancestor_ends(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
    std::iter::once(0)
        .chain((b.first() == Some(&b'/')).then_some(1))
        .chain((1..b.len()).filter(|&i| b[i] == b'/'))
        .chain((!b.is_empty() && b != b"/").then_some(b.len()))
}

/// `b[..end]` as an `OsStr`, where `b` is a path's encoded bytes and `end` one of its
/// [`ancestor_ends`] (before a `/`, or the end).
fn prefix_at(b: &[u8], end: usize) -> &OsStr {
    // SAFETY: `b` comes from `as_encoded_bytes`, and `end` is its length or the index of an ASCII
    // `/`: a split immediately before a valid UTF-8 substring, which the encoding allows.
    unsafe { OsStr::from_encoded_bytes_unchecked(&b[..end]) }
}

/// `Path`'s order (component by component) of two normalised paths, from their bytes: a
/// separator sorts before every other byte, which is where a component that is a prefix of
/// another ends. `Path::cmp` splits both paths into components at every comparison; sorting the
/// deny set with it cost ~0.1 ms of each plan.
fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let (x, y) = (a.as_os_str().as_encoded_bytes(), b.as_os_str().as_encoded_bytes());
    let same = x.iter().zip(y).take_while(|(p, q)| p == q).count();
    let key = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
    match (x.get(same), y.get(same)) {
        (Some(&p), Some(&q)) => key(p).cmp(&key(q)),
        (a, b) => a.is_some().cmp(&b.is_some()),
    }
}

impl PathSet {
    /// The set of `paths`, each normalised.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut sorted: Vec<PathBuf> = paths.into_iter().map(|p| normalize(&p)).collect();
        sorted.sort_unstable_by(|a, b| path_order(a, b));
        sorted.dedup_by(|a, b| a.as_os_str() == b.as_os_str());
        let mut lengths = Vec::new();
        for p in &sorted {
            let n = p.as_os_str().len();
            if lengths.len() <= n {
                lengths.resize(n + 1, false);
            }
            lengths[n] = true;
        }
        let ancestors = sorted
            .iter()
            .flat_map(|p| {
                let b = p.as_os_str().as_encoded_bytes();
                ancestor_ends(b).map(move |end| prefix_at(b, end).to_os_string())
            })
            .collect();
        PathSet { sorted, lengths, ancestors }
    }

    /// The path of the set equal to `p` (normalised).
    fn get(&self, p: &Path) -> Option<&PathBuf> {
        self.sorted.binary_search_by(|x| path_order(x, p)).ok().map(|i| &self.sorted[i])
    }

    /// The paths, in `Path` order.
    pub fn iter(&self) -> impl Iterator<Item = &PathBuf> {
        self.sorted.iter()
    }

    /// `p` (normalised) is in the set.
    #[must_use]
    pub fn contains(&self, p: &Path) -> bool {
        debug_assert_eq!(normalize(p).as_os_str(), p.as_os_str());
        self.get(p).is_some()
    }

    /// The first path of the set, in order, that `p` (normalised, e.g. canonical) lies inside or
    /// is, as `iter().find(|d| p.starts_with(d))` finds it: every such path is an ancestor of `p`,
    /// and a shorter ancestor sorts first, so the ancestors are looked up shortest first.
    #[must_use]
    pub fn first_containing(&self, p: &Path) -> Option<&PathBuf> {
        debug_assert_eq!(normalize(p).as_os_str(), p.as_os_str());
        let b = p.as_os_str().as_encoded_bytes();
        // `p.starts_with("")` holds for every path: "" is looked up too.
        for end in ancestor_ends(b).filter(|&end| self.lengths.get(end) == Some(&true)) {
            if let Some(d) = self.get(Path::new(prefix_at(b, end))) {
                return Some(d);
            }
        }
        None
    }

    /// The paths of the set inside `p` (or equal to it), in order, as
    /// `iter().filter(|d| d.starts_with(p))` yields them: paths are ordered component by
    /// component, so those starting with `p` follow `p` contiguously.
    pub fn inside<'a>(&'a self, p: &'a Path) -> impl Iterator<Item = &'a PathBuf> + 'a {
        debug_assert_eq!(normalize(p).as_os_str(), p.as_os_str());
        // Most paths are no ancestor of anything in the set: one lookup instead of a search.
        let any = self.ancestors.contains(p.as_os_str());
        any.then(|| self.sorted[self.sorted.partition_point(|x| path_order(x, p).is_lt())..].iter().take_while(move |d| d.starts_with(p)))
            .into_iter()
            .flatten()
    }
}

/// State of one grant's expansion around denied paths.
struct Expand<'a> {
    resolver: &'a mut PathResolver,
    denies: &'a PathSet,
    masked: &'a PathSet,
    budget: &'a mut usize,
    out: &'a mut ResolvedRules,
}

impl Expand<'_> {
    /// `canon` is canonical and of type `kind`.
    fn resolve_one(&mut self, canon: &Path, kind: FileKind, g: &Grant, depth: usize) -> Result<(), String> {
        if let Some(d) = self.denies.first_containing(canon) {
            self.out.skipped.push(SkippedPath {
                path: canon.to_path_buf(),
                reason: format!("inside denied {}", d.display()),
            });
            return Ok(());
        }
        let inner: Vec<&PathBuf> = self.denies.inside(canon).filter(|d| !self.masked.contains(d)).collect();
        let is_dir = kind == FileKind::Dir;
        if inner.is_empty() || !is_dir {
            let access = if is_dir { g.access } else { g.access & fs::FILE_RIGHTS };
            let reason = if depth == 0 {
                g.reason.clone()
            } else {
                format!("{} (sibling of a denied path under {})", g.reason, g.path.display())
            };
            self.out.rules.push(PathRule { path: canon.to_path_buf(), access, reason });
            return Ok(());
        }
        if depth >= MAX_EXPAND_DEPTH {
            return Err(format!("{}: too deep to expand around denied paths", canon.display()));
        }
        let entries = match std::fs::read_dir(canon) {
            Ok(e) => e,
            // A default grant (a toolchain dir) that cannot be listed here — inside another
            // sandbox, whose own expansion left it unlistable — is not granted at all: less
            // access, never more.
            Err(e) if !g.must_exist && e.kind() == std::io::ErrorKind::PermissionDenied => {
                self.out.skipped.push(SkippedPath { path: canon.to_path_buf(), reason: format!("cannot be listed to expand around a denied path ({e}): not granted") });
                return Ok(());
            }
            Err(e) => return Err(format!("{}: {e}", canon.display())),
        };
        for d in &inner {
            self.out.expanded.push((canon.to_path_buf(), (*d).clone()));
        }
        // The listing gives each entry's type (no `stat`, except on filesystems that do not
        // report it): an entry that is not a symlink is canonical as it is.
        let mut kids: Vec<_> = entries.filter_map(Result::ok).map(|e| (e.file_name(), e.file_type().ok())).collect();
        kids.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, ft) in kids {
            if *self.budget == 0 {
                return Err(format!("{}: too many entries to expand around denied paths", canon.display()));
            }
            *self.budget -= 1;
            let child = canon.join(&name);
            if self.denies.contains(&child) {
                continue;
            }
            match ft {
                Some(ft) if !ft.is_symlink() => self.resolve_one(&child, FileKind::of(ft), g, depth + 1)?,
                // Follow symlinks: a link to a denied path must not re-open it.
                _ => {
                    let Ok(child_canon) = self.resolver.canonicalize(&child) else { continue };
                    self.resolve_one(&child_canon.path, child_canon.kind, g, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn grant(p: &Path, access: u64) -> Grant {
        Grant { path: p.to_path_buf(), access, reason: "test".into(), must_exist: false }
    }

    #[test]
    fn rights_per_abi() {
        assert_eq!(fs_rights_for_abi(0), 0);
        assert_eq!(fs_rights_for_abi(1) & fs::REFER, 0);
        assert_ne!(fs_rights_for_abi(2) & fs::REFER, 0);
        assert_eq!(fs_rights_for_abi(2) & fs::TRUNCATE, 0);
        assert_ne!(fs_rights_for_abi(3) & fs::TRUNCATE, 0);
        assert_eq!(fs_rights_for_abi(4) & fs::IOCTL_DEV, 0);
        assert_ne!(fs_rights_for_abi(5) & fs::IOCTL_DEV, 0);
        assert_eq!(fs_rights_for_abi(8) & fs::RESOLVE_UNIX, 0);
        assert_ne!(fs_rights_for_abi(9) & fs::RESOLVE_UNIX, 0);
        assert_eq!(net_rights_for_abi(3), 0);
        assert_eq!(net_rights_for_abi(4), 3);
        assert_eq!(scopes_for_abi(5), 0);
        assert_eq!(scopes_for_abi(7), 3);
        assert_eq!(device(2) & fs::TRUNCATE, 0);
        assert_ne!(device(7) & fs::TRUNCATE, 0);
        assert_eq!(read_write(7) & (fs::MAKE_BLOCK | fs::MAKE_CHAR), 0);
    }

    #[test]
    fn deny_inside_allow_grants_siblings() {
        let d = crate::test_dir();
        let home = d.path().join("home");
        for sub in [".ssh", ".cargo/bin", "src", ".config/git", ".config/gh"] {
            std::fs::create_dir_all(home.join(sub)).unwrap();
        }
        std::fs::write(home.join(".ssh/id_rsa"), "secret").unwrap();
        std::fs::write(home.join("notes.txt"), "x").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), home.join("innocent-link")).unwrap();
        let denies = vec![home.join(".ssh"), home.join(".config/gh")];
        let r = resolve_rules(&[grant(&home, read_exec(7))], &denies).unwrap();
        let home = std::fs::canonicalize(&home).unwrap();
        let paths: Vec<_> = r.rules.iter().map(|r| r.path.clone()).collect();
        assert!(!paths.contains(&home), "the granted parent itself must not get a rule");
        assert!(paths.contains(&home.join(".cargo")));
        assert!(paths.contains(&home.join("src")));
        assert!(paths.contains(&home.join("notes.txt")));
        assert!(paths.contains(&home.join(".config/git")));
        assert!(!paths.iter().any(|p| p.starts_with(home.join(".ssh"))), "{paths:?}");
        assert!(!paths.iter().any(|p| p.starts_with(home.join(".config/gh"))));
        // The file rule only carries file rights.
        let notes = r.rules.iter().find(|r| r.path == home.join("notes.txt")).unwrap();
        assert_eq!(notes.access & fs::READ_DIR, 0);
        assert!(r.skipped.iter().any(|s| s.reason.contains("inside denied")), "symlink to .ssh skipped");
    }

    #[test]
    fn grant_inside_deny_is_dropped_and_missing_is_skipped() {
        let d = crate::test_dir();
        std::fs::create_dir_all(d.path().join("secret/sub")).unwrap();
        let r = resolve_rules(
            &[grant(&d.path().join("secret/sub"), read_exec(7)), grant(&d.path().join("nope"), read_exec(7))],
            &[d.path().join("secret")],
        )
        .unwrap();
        assert!(r.rules.is_empty());
        assert_eq!(r.skipped.len(), 2);
        let mut g = grant(&d.path().join("nope"), 1);
        g.must_exist = true;
        assert!(resolve_rules(&[g], &[]).is_err());
    }

    #[test]
    fn missing_deny_still_expands_its_parent() {
        let d = crate::test_dir();
        std::fs::create_dir_all(d.path().join("h/a")).unwrap();
        let r = resolve_rules(&[grant(&d.path().join("h"), read_exec(7))], &[d.path().join("h/.aws")]).unwrap();
        let h = std::fs::canonicalize(d.path().join("h")).unwrap();
        assert_eq!(r.rules.len(), 1);
        assert_eq!(r.rules[0].path, h.join("a"));
    }

    /// The implementation before the shared resolver and the ordered-set queries, kept as the
    /// reference: `std::fs::canonicalize`, linear scans of the deny set, `is_dir()`.
    fn reference_rules(grants: &[Grant], denies: &[PathBuf], masked: &[PathBuf]) -> Result<ResolvedRules, String> {
        use crate::plan::resolve::tests::reference_lenient;
        fn one(
            canon: &Path,
            g: &Grant,
            denies: &BTreeSet<PathBuf>,
            masked: &BTreeSet<PathBuf>,
            depth: usize,
            budget: &mut usize,
            out: &mut ResolvedRules,
        ) -> Result<(), String> {
            if let Some(d) = denies.iter().find(|d| canon.starts_with(d)) {
                out.skipped.push(SkippedPath { path: canon.to_path_buf(), reason: format!("inside denied {}", d.display()) });
                return Ok(());
            }
            let inner: Vec<&PathBuf> = denies.iter().filter(|d| d.starts_with(canon) && !masked.contains(*d)).collect();
            let is_dir = canon.is_dir();
            if inner.is_empty() || !is_dir {
                let access = if is_dir { g.access } else { g.access & fs::FILE_RIGHTS };
                let reason = if depth == 0 {
                    g.reason.clone()
                } else {
                    format!("{} (sibling of a denied path under {})", g.reason, g.path.display())
                };
                out.rules.push(PathRule { path: canon.to_path_buf(), access, reason });
                return Ok(());
            }
            if depth >= MAX_EXPAND_DEPTH {
                return Err(format!("{}: too deep to expand around denied paths", canon.display()));
            }
            for d in &inner {
                out.expanded.push((canon.to_path_buf(), (*d).clone()));
            }
            let entries = std::fs::read_dir(canon).map_err(|e| format!("{}: {e}", canon.display()))?;
            let mut names: Vec<_> = entries.filter_map(Result::ok).map(|e| e.file_name()).collect();
            names.sort();
            for name in names {
                if *budget == 0 {
                    return Err(format!("{}: too many entries to expand around denied paths", canon.display()));
                }
                *budget -= 1;
                let child = canon.join(&name);
                if denies.contains(&child) {
                    continue;
                }
                let Ok(child_canon) = std::fs::canonicalize(&child) else { continue };
                one(&child_canon, g, denies, masked, depth + 1, budget, out)?;
            }
            Ok(())
        }
        let deny_set: BTreeSet<PathBuf> = denies.iter().flat_map(|d| [normalize(d), reference_lenient(d)]).collect();
        let masked: BTreeSet<PathBuf> = masked.iter().flat_map(|d| [normalize(d), reference_lenient(d)]).collect();
        let mut out = ResolvedRules::default();
        let mut budget = MAX_EXPAND_ENTRIES;
        for g in grants {
            let Ok(canon) = std::fs::canonicalize(&g.path) else {
                if g.must_exist {
                    return Err(format!("{}: no such file or directory", g.path.display()));
                }
                out.skipped.push(SkippedPath { path: g.path.clone(), reason: "does not exist".into() });
                continue;
            };
            one(&canon, g, &deny_set, &masked, 0, &mut budget, &mut out)?;
        }
        Ok(out)
    }

    fn assert_same(grants: &[Grant], denies: &[PathBuf], masked: &[PathBuf]) {
        let want = reference_rules(grants, denies, masked);
        let got = resolve_rules_with_masks(grants, denies, masked);
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(w.rules, g.rules);
                assert_eq!(w.skipped, g.skipped);
                assert_eq!(w.expanded, g.expanded);
            }
            (Err(w), Err(g)) => assert_eq!(w, g),
            _ => panic!("reference {want:?} vs new {got:?}"),
        }
    }

    /// Rules, skips and expansions are those of the previous implementation: on a home full of
    /// symlinks into and around denied paths, and on this machine's system directories and
    /// `$HOME` with the default credential denies.
    #[test]
    fn same_decisions_as_the_reference() {
        use std::os::unix::fs::symlink;
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let h = root.join("home");
        for sub in [".ssh", ".cargo/bin", ".cargo/registry/x", ".config/gh", ".config/git", "src/deep/er", "real-secret", "ws"] {
            std::fs::create_dir_all(h.join(sub)).unwrap();
        }
        std::fs::write(h.join(".cargo/credentials.toml"), "t").unwrap();
        std::fs::write(h.join(".ssh/id_rsa"), "k").unwrap();
        std::fs::write(h.join("notes"), "n").unwrap();
        symlink(h.join(".ssh"), h.join("innocent-link")).unwrap();
        symlink("../.ssh/id_rsa", h.join("src/key")).unwrap();
        symlink("..", h.join("src/deep/up")).unwrap();
        symlink(".", h.join("self")).unwrap();
        symlink("nowhere", h.join("dangling")).unwrap();
        symlink("loop-b", h.join("loop-a")).unwrap();
        symlink("loop-a", h.join("loop-b")).unwrap();
        symlink("real-secret", h.join("linked-secret")).unwrap();
        symlink(&h, root.join("home-link")).unwrap();
        let g = |p: &Path, must: bool| Grant { path: p.to_path_buf(), access: read_exec(7), reason: "t".into(), must_exist: must };
        let denies = vec![
            h.join(".ssh"),
            h.join(".config/gh"),
            h.join(".cargo/credentials.toml"),
            h.join(".aws"),
            root.join("home-link/linked-secret"),
            h.join("src/deep/er/missing/x"),
            h.join("./notes/../.config/gh"),
        ];
        let grants = vec![
            g(&h, false),
            g(&root.join("home-link"), false),
            g(&h.join(".cargo"), false),
            g(&h.join("src"), true),
            g(&h.join("src/key"), false),
            g(&h.join("innocent-link"), false),
            g(&h.join("dangling"), false),
            g(&h.join("loop-a"), false),
            g(&h.join("notes"), false),
            g(&h.join("self/ws"), true),
            g(&h.join("src/deep/up/deep"), false),
        ];
        for masked in [&[][..], &denies[..2], &denies[..]] {
            assert_same(&grants, &denies, masked);
            for gr in &grants {
                assert_same(std::slice::from_ref(gr), &denies, masked);
            }
        }
        let mut must = grants.clone();
        must.push(g(&h.join("loop-b"), true));
        assert_same(&must, &denies, &[]);

        // This machine: system directories, the real $HOME's toolchains and credentials.
        let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()).unwrap_or_else(|| h.clone());
        let mut sys: Vec<Grant> = crate::defaults::SYSTEM_READ_DIRS
            .iter()
            .chain(crate::defaults::DEVICE_PATHS)
            .chain(crate::defaults::SCRATCH_WRITE_DIRS)
            .map(|p| g(Path::new(p), false))
            .collect();
        sys.extend(crate::defaults::HOME_TOOLCHAINS.iter().map(|t| g(&home.join(t), false)));
        sys.push(g(&home, false));
        let creds: Vec<PathBuf> = crate::defaults::HOME_CREDENTIALS.iter().map(|c| home.join(c)).collect();
        assert_same(&sys, &creds, &[]);
        assert_same(&sys, &creds, &creds);
    }

    /// The byte order of normalised paths is `Path`'s order.
    #[test]
    fn path_order_is_the_component_order() {
        let names = [
            "", "/", "/a", "/a/b", "/a/b/c", "/a-b", "/a-b/c", "/a.b", "/a/b-c", "/a/b.c", "/a/bc", "/a/b c", "/a/b\u{e9}", "/a0",
            "/ab", "/a/\u{ff}", "/b", "/b/a", "a", "a/b", "a-b", "a.b", "/.a", "/a/.b", "/a/b/..c", "/z", "/a/b!", "/a!/b", "/a/b/c/d",
        ];
        for a in names {
            for b in names {
                let (a, b) = (Path::new(a), Path::new(b));
                assert_eq!(normalize(a).as_os_str(), a.as_os_str());
                assert_eq!(path_order(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    /// The ordered-set queries agree with the linear scans they replace.
    #[test]
    fn set_queries_match_linear_scans() {
        let names = [
            "", "/", "/a", "/a/", "/a/b", "/a/b/c", "/a-b", "/a-b/c", "/a.b", "/a.b/c", "/a/b-c", "/a/b.c",
            "/a/b/c-d", "/a/bc", "/a/b c", "/a/b\u{e9}", "/a0", "/a/b/c/d/e", "/ab", "/a/\u{ff}", "/b", "/b/a",
            "/a//b", "/a/./b/", "a", "a/b", "a-b", "a.b", "/.a", "/a/.b", "/a/b/..c", "/z",
        ];
        let all: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
        // Every subset shape: all, each prefix and suffix of the list, and every other entry.
        let mut sets: Vec<Vec<PathBuf>> = vec![all.clone(), all.iter().step_by(2).cloned().collect()];
        for i in 0..all.len() {
            sets.push(all[..i].to_vec());
            sets.push(all[i..].iter().filter(|p| !p.as_os_str().is_empty()).cloned().collect());
        }
        let queries: Vec<PathBuf> = all
            .iter()
            .map(|p| normalize(p))
            .chain(["/a/b/c/x", "/a/b0", "/a-", "/a.", "/", "/b/a/c", "/a-b/c/d", "a/b/c"].iter().map(PathBuf::from))
            .collect();
        for paths in &sets {
            let set = PathSet::new(paths.iter().cloned());
            let linear: BTreeSet<PathBuf> = paths.iter().map(|p| normalize(p)).collect();
            assert!(set.iter().eq(linear.iter()));
            for q in &queries {
                assert_eq!(set.first_containing(q), linear.iter().find(|d| q.starts_with(d)), "{q:?} in {linear:?}");
                let want: Vec<&PathBuf> = linear.iter().filter(|d| d.starts_with(q)).collect();
                assert_eq!(set.inside(q).collect::<Vec<_>>(), want, "{q:?} in {linear:?}");
                assert_eq!(set.contains(q), linear.contains(q));
            }
        }
    }

    /// Grant resolution with a shared resolver gives the same rules as with fresh ones.
    #[test]
    fn shared_resolver_gives_the_same_rules() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        for sub in ["h/.ssh", "h/.config/gh", "h/.config/git", "h/src/a", "other"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::os::unix::fs::symlink(root.join("h/.ssh"), root.join("h/src/key-link")).unwrap();
        std::os::unix::fs::symlink("../other", root.join("h/src/other-link")).unwrap();
        std::os::unix::fs::symlink("h", root.join("h-link")).unwrap();
        let grants = [grant(&root.join("h-link"), read_exec(7)), grant(&root.join("other"), read_write(7)), grant(&root.join("h/src"), read_write(7)), grant(&root.join("h/src/key-link"), read_exec(7))];
        let denies = [root.join("h/.ssh"), root.join("h-link/.config/gh"), root.join("h/.aws/x")];
        let mut shared = PathResolver::new();
        for masked in [&[][..], &denies[..1]] {
            let a = resolve_rules_with_masks(&grants, &denies, masked).unwrap();
            let b = resolve_rules_with(&mut shared, &grants, &denies, masked).unwrap();
            assert_eq!(a.rules, b.rules);
            assert_eq!(a.skipped, b.skipped);
            assert_eq!(a.expanded, b.expanded);
            assert!(!a.rules.iter().any(|r| r.path.starts_with(root.join("h/.ssh"))));
            assert!(a.skipped.iter().any(|s| s.path == root.join("h/.ssh")), "{:?}", a.skipped);
        }
    }

    /// The helper's rule loop (raw `landlock_add_rule`): granted paths are usable, others are
    /// not, a vanished path is skipped, and a bad rule is an error naming its path. Each case
    /// runs in a forked child, which Landlock then confines.
    #[cfg(target_os = "linux")]
    #[test]
    fn helper_applies_rules_and_rejects_bad_ones() {
        use crate::plan::{HelperLandlock, HelperPlan};
        let abi = crate::detect::detect_quick().landlock.abi;
        if abi == 0 {
            eprintln!("landlock unavailable: skipped");
            return;
        }
        let abi = abi.min(MAX_KNOWN_ABI);
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("granted")).unwrap();
        std::fs::create_dir_all(root.join("other")).unwrap();
        std::fs::write(root.join("granted/a"), "a").unwrap();
        std::fs::write(root.join("other/b"), "b").unwrap();
        std::fs::write(root.join("file"), "f").unwrap();
        let plan = |rules: Vec<(PathBuf, u64)>| HelperPlan {
            parent_pid: 1,
            cwd: root.clone(),
            namespaces: None,
            landlock: Some(HelperLandlock { fs: fs_rights_for_abi(abi), net: 0, scopes: 0, rules }),
            seccomp: None,
            rlimits: Vec::new(),
            cgroup_procs: Vec::new(),
            drop_capabilities: false,
            confine: true,
            seatbelt: false,
            seccomp_listener: false,
            proxy_port: None,
            terminal: false,
            ablated: Vec::new(),
        };
        // Exit status of a child that applies `p` and then runs `check`.
        let in_child = |p: &HelperPlan, check: &dyn Fn(Result<crate::linux::apply::AppliedReport, String>) -> bool| {
            // SAFETY: the child runs the check and leaves with _exit.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0);
            if pid == 0 {
                let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(crate::linux::apply::apply_confinement(p))));
                // SAFETY: ends the forked child without running the parent's destructors.
                unsafe { libc::_exit(if matches!(ok, Ok(true)) { 0 } else { 1 }) };
            }
            let mut st = 0;
            // SAFETY: waits for the child forked above.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0
        };
        let good = plan(vec![
            (root.join("granted"), read_exec(abi)),
            (root.join("file"), read_exec(abi) & fs::FILE_RIGHTS),
            (root.join("vanished"), read_exec(abi)),
        ]);
        let (granted, other, file) = (root.join("granted/a"), root.join("other/b"), root.join("file"));
        assert!(in_child(&good, &|r| {
            r.is_ok_and(|rep| rep.landlock_rules == 2 && rep.landlock == "fully_enforced")
                && std::fs::read(&granted).is_ok()
                && std::fs::read(&file).is_ok()
                && std::fs::read(&other).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
        }));
        let dir_rights_on_file = plan(vec![(root.join("file"), read_exec(abi))]);
        let unhandled = plan(vec![(root.join("granted"), fs::RESOLVE_UNIX << 1)]);
        let empty = plan(vec![(root.join("granted"), 0)]);
        for bad in [&dir_rights_on_file, &unhandled, &empty] {
            let name = bad.landlock.as_ref().unwrap().rules[0].0.display().to_string();
            assert!(in_child(bad, &|r| r.is_err_and(|e| e.contains(&name) || e.contains("rights"))), "{bad:?}");
        }
    }

    #[test]
    fn lenient_canonicalization() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        let d = crate::test_dir();
        let c = canonicalize_lenient(&d.path().join("x/y"));
        assert!(c.ends_with("x/y"));
        assert!(c.is_absolute());
    }
}
