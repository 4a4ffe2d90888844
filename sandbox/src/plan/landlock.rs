//! Landlock part of the plan: which rights the ABI has, which are handled, and the path rules,
//! with deny-inside-allow resolved by granting siblings (snapshot semantics).
//!
//! Landlock grants access when *any* rule on a path's ancestry grants it, so a deny inside a
//! granted directory cannot be expressed directly. Instead the grant is replaced by grants on
//! every entry of that directory except the denied one (recursively), computed at launch: a file
//! created later directly inside such an expanded directory is not covered by any rule.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

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
#[must_use]
pub fn canonicalize_lenient(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let mut tail = Vec::new();
    let mut cur = p.to_path_buf();
    loop {
        match cur.file_name() {
            Some(name) => tail.push(name.to_os_string()),
            None => return normalize(p),
        }
        if !cur.pop() {
            return normalize(p);
        }
        if let Ok(c) = std::fs::canonicalize(&cur) {
            let mut out = c;
            for t in tail.iter().rev() {
                out.push(t);
            }
            return normalize(&out);
        }
    }
}

/// Removes `.` and resolves `..` lexically.
#[must_use]
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

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
    let deny_set: BTreeSet<PathBuf> = denies
        .iter()
        .flat_map(|d| [normalize(d), canonicalize_lenient(d)])
        .collect();
    let masked: BTreeSet<PathBuf> = masked.iter().flat_map(|d| [normalize(d), canonicalize_lenient(d)]).collect();
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
        resolve_one(&canon, g, &deny_set, &masked, 0, &mut budget, &mut out)?;
    }
    Ok(out)
}

fn resolve_one(
    canon: &Path,
    g: &Grant,
    denies: &BTreeSet<PathBuf>,
    masked: &BTreeSet<PathBuf>,
    depth: usize,
    budget: &mut usize,
    out: &mut ResolvedRules,
) -> Result<(), String> {
    if let Some(d) = denies.iter().find(|d| canon.starts_with(d)) {
        out.skipped.push(SkippedPath {
            path: canon.to_path_buf(),
            reason: format!("inside denied {}", d.display()),
        });
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
        // Follow symlinks: a link to a denied path must not re-open it.
        let Ok(child_canon) = std::fs::canonicalize(&child) else { continue };
        resolve_one(&child_canon, g, denies, masked, depth + 1, budget, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn lenient_canonicalization() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        let d = crate::test_dir();
        let c = canonicalize_lenient(&d.path().join("x/y"));
        assert!(c.ends_with("x/y"));
        assert!(c.is_absolute());
    }
}
