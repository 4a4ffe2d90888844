//! Memoising path resolution with `realpath(3)` semantics.
//!
//! A plan canonicalises dozens to thousands of paths that share most of their prefixes (`$HOME`,
//! `/usr`, a checkout). `std::fs::canonicalize` (glibc `realpath`) makes one `readlink` per
//! component on every call, and the callers then `stat` the result again to tell a directory from
//! a file. [`PathResolver`] walks a path component by component instead: each (canonical parent,
//! name) pair is `lstat`ed once, `readlink` is only called on symlinks, and every step is
//! remembered, so a shared prefix costs nothing after its first resolution. The final `lstat`
//! also gives the file type.
//!
//! The results are those of `realpath(3)`: symlinks are followed (relative targets against the
//! link's directory, absolute ones from `/`), `..` is applied to the already resolved (physical)
//! path, a component followed by `/`, `/.` or `/..` must be a directory, the whole path must exist,
//! and at most [`MAX_SYMLINKS`] links are followed in one resolution. Relative paths are resolved
//! against the current directory.
//!
//! A resolver assumes the filesystem does not change while it is used: make one per plan or per
//! check, never a long-lived one.

use std::collections::{HashMap, HashSet};
#[cfg(unix)]
use std::ffi::OsStr;
use std::ffi::OsString;
use std::io;
#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Symlinks followed in one resolution before it fails with `ELOOP` (glibc's `realpath` and the
/// kernel both use 40).
pub const MAX_SYMLINKS: u32 = 40;

/// The type of a resolved path (after following symlinks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// Anything else (device node, socket, FIFO).
    Other,
}

impl FileKind {
    /// The kind of a file type (as `lstat` or a directory listing gives it).
    #[must_use]
    pub fn of(ft: std::fs::FileType) -> Self {
        if ft.is_dir() {
            FileKind::Dir
        } else if ft.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        }
    }
}

/// A path resolved strictly: it exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical path (what `std::fs::canonicalize` returns).
    pub path: PathBuf,
    /// Its type.
    pub kind: FileKind,
}

/// A path resolved leniently (see [`PathResolver::canonicalize_lenient`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lenient {
    /// The resolved path; a missing tail is appended lexically.
    pub path: PathBuf,
    /// Its type when the whole path resolved strictly; `None` when it did not (missing,
    /// dangling link, loop, not a directory, …).
    pub kind: Option<FileKind>,
}

/// What one (canonical parent, name) pair leads to.
#[derive(Clone, Debug)]
#[cfg_attr(not(unix), allow(dead_code))]
struct Step {
    /// For a symlink, the canonical path it leads to; `None` when the pair is not a symlink
    /// (it is then canonical itself).
    target: Option<PathBuf>,
    /// Type of what it leads to.
    kind: FileKind,
    /// Symlinks followed to get there.
    links: u32,
}

type Errno = i32;

/// Filesystem calls a resolver made (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolverStats {
    /// `lstat` calls.
    pub lstat: u32,
    /// `readlink` calls.
    pub readlink: u32,
}

/// A memoising `realpath(3)`; see the module documentation.
#[derive(Debug, Default)]
#[cfg_attr(not(unix), allow(dead_code))]
pub struct PathResolver {
    /// (canonical parent)/(name) → where it leads, or the error resolving it. Every key's
    /// parent is therefore a canonical directory.
    steps: HashMap<OsString, Result<Step, Errno>>,
    cwd: Option<Result<PathBuf, Errno>>,
    /// Symlinks whose targets are being resolved (to recognise a cycle).
    active: HashSet<OsString>,
    /// Every symlink met (a key of `steps`) → its target as stored, dangling ones included.
    links: HashMap<OsString, PathBuf>,
    stats: ResolverStats,
}

/// Internal: a symlink cycle, which fails whatever the number of links left (remembered, unlike
/// running out of links, which depends on how many were followed before).
#[cfg(unix)]
const CYCLE: Errno = -1;

#[cfg(unix)]
fn errno(e: &io::Error) -> Errno {
    e.raw_os_error().unwrap_or(libc::EIO)
}

#[cfg(unix)]
fn io_error(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(if e == CYCLE { libc::ELOOP } else { e })
}

impl PathResolver {
    /// An empty resolver.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Filesystem calls made so far.
    #[must_use]
    pub fn stats(&self) -> ResolverStats {
        self.stats
    }

    /// Resolves `p` like `std::fs::canonicalize`, and returns its type too.
    ///
    /// # Errors
    /// The error `realpath(3)` would report, or at least an error whenever it would fail: a
    /// missing component, a non-directory followed by more components, too many symlinks, no
    /// permission to search a directory, an empty path.
    pub fn canonicalize(&mut self, p: &Path) -> io::Result<Resolved> {
        #[cfg(unix)]
        return self.resolve(p.as_os_str().as_bytes()).map_err(io_error);
        // Elsewhere (Windows): the OS's own resolution, uncached.
        #[cfg(not(unix))]
        {
            self.stats.lstat += 1;
            let path = std::fs::canonicalize(p)?;
            let kind = FileKind::of(std::fs::metadata(&path)?.file_type());
            Ok(Resolved { path, kind })
        }
    }

    /// Resolves `p` through symlinks as far as it exists, and appends the missing tail
    /// lexically (then removes `.` and applies `..` lexically): the nearest ancestor, by
    /// removing trailing components, that resolves strictly is the base. A path that ends in
    /// `..`, or of which no ancestor resolves, is only normalised.
    #[must_use]
    pub fn canonicalize_lenient(&mut self, p: &Path) -> Lenient {
        if let Ok(r) = self.canonicalize(p) {
            return Lenient { path: r.path, kind: Some(r.kind) };
        }
        let lexical = || Lenient { path: normalize(p), kind: None };
        let mut tail = Vec::new();
        let mut cur = p.to_path_buf();
        loop {
            match cur.file_name() {
                Some(name) => tail.push(name.to_os_string()),
                None => return lexical(),
            }
            if !cur.pop() {
                return lexical();
            }
            if let Ok(c) = self.canonicalize(&cur) {
                let mut out = c.path;
                for t in tail.iter().rev() {
                    out.push(t);
                }
                return Lenient { path: normalize(&out), kind: None };
            }
        }
    }

    /// `p` made canonical where it exists, and beyond its nearest existing ancestor (made
    /// canonical) by the names that do not exist yet — what a directory made there later will
    /// be; `None` when that cannot be told: a relative path, a `.` or `..`, an ancestor that is
    /// not a directory, or a symbolic link on the way that leads nowhere (what is made there
    /// goes where it leads). Stricter than [`PathResolver::canonicalize_lenient`], which
    /// appends the rest lexically whatever stands in the way.
    pub fn canonicalize_beyond(&mut self, p: &Path) -> Option<PathBuf> {
        if !p.is_absolute() || p.components().any(|c| matches!(c, std::path::Component::ParentDir | std::path::Component::CurDir)) {
            return None;
        }
        let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
        let mut at = p;
        loop {
            match self.canonicalize(at) {
                Ok(c) if c.kind == FileKind::Dir || rest.is_empty() => {
                    let mut out = c.path;
                    out.extend(rest.iter().rev());
                    return Some(out);
                }
                Ok(_) => return None,
                Err(_) if std::fs::symlink_metadata(at).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) => {
                    rest.push(at.file_name()?);
                    at = at.parent()?;
                }
                Err(_) => return None,
            }
        }
    }

    /// Whether `p` exists without following a final symlink (`lstat` succeeds; a dangling link
    /// exists), from the resolver's memory where it can.
    pub fn lexists(&mut self, p: &Path) -> bool {
        self.lstat_kind(p).is_some()
    }

    /// What `lstat(p)` finds, from the resolver's memory where it can: `None` when it fails (no
    /// such file, a file on the way, …), a symbolic link as [`FileKind::Other`] (as
    /// [`FileKind::of`] says of it). The parent is resolved (a link on the way is followed, as
    /// `lstat` follows it).
    pub fn lstat_kind(&mut self, p: &Path) -> Option<FileKind> {
        #[cfg(unix)]
        if let (Some(parent), Some(name)) = (p.parent().filter(|_| p.is_absolute()), p.file_name()) {
            // Only a plain path (no `.`, `..`, `//` or trailing `/`) is its parent plus a name.
            if p.as_os_str() == normalize(p).as_os_str() {
                if let Ok(parent) = self.canonicalize(parent) {
                    if parent.kind != FileKind::Dir {
                        return None;
                    }
                    let at = parent.path.join(name);
                    // It exists: a link, or what its remembered step says.
                    return match self.link_or_step(&at)? {
                        Some(_) => Some(FileKind::Other),
                        None => Some(self.steps.get(at.as_os_str()).and_then(|s| s.as_ref().ok()).map_or(FileKind::Other, |s| s.kind)),
                    };
                }
            }
        }
        std::fs::symlink_metadata(p).ok().map(|m| FileKind::of(m.file_type()))
    }

    /// The target, as stored, of the symlink at `p`, whose parent must be a canonical directory
    /// (a path without links on its way, e.g. one walked component by component from `/` up to
    /// its first link). `None` when `p` is not a symlink or does not exist.
    pub fn link_at(&mut self, p: &Path) -> Option<PathBuf> {
        #[cfg(unix)]
        return self.link_or_step(p).and_then(|l| l);
        #[cfg(not(unix))]
        std::fs::read_link(p).ok()
    }

    /// The symbolic links met resolving `path` component by component, each link's target
    /// followed the way the kernel follows it (`..` applied lexically), at most [`MAX_SYMLINKS`]:
    /// (link, target as stored).
    pub fn links_on_the_way(&mut self, path: &Path) -> Vec<(PathBuf, PathBuf)> {
        self.follow(path).0
    }

    /// The symbolic links met resolving `path` (as [`PathResolver::links_on_the_way`]) and where
    /// it leads: the path with every link on its way followed, a dangling one too (the path the
    /// kernel would create through it), `None` after [`MAX_SYMLINKS`] links (a loop).
    pub fn follow(&mut self, path: &Path) -> (Vec<(PathBuf, PathBuf)>, Option<PathBuf>) {
        let mut out = Vec::new();
        let mut cur = normalize(path);
        'outer: for _ in 0..MAX_SYMLINKS {
            let mut at = PathBuf::from("/");
            let comps: Vec<_> = cur.components().skip(1).collect();
            for (i, c) in comps.iter().enumerate() {
                at.push(c);
                if let Some(t) = self.link_at(&at) {
                    out.push((at.clone(), t.clone()));
                    // The rest resolves through the target (relative to the link's directory,
                    // which has no link on its way: this is the first one).
                    let mut next = if t.is_absolute() { t } else { at.parent().unwrap_or(Path::new("/")).join(t) };
                    for r in &comps[i + 1..] {
                        next.push(r);
                    }
                    cur = normalize(&next);
                    continue 'outer;
                }
            }
            return (out, Some(cur));
        }
        (out, None)
    }

}

#[cfg(unix)]
impl PathResolver {
    fn current_dir(&mut self) -> Result<PathBuf, Errno> {
        self.cwd.get_or_insert_with(|| std::env::current_dir().map_err(|e| errno(&e))).clone()
    }

    fn resolve(&mut self, bytes: &[u8]) -> Result<Resolved, Errno> {
        if let Some(r) = self.resolve_plain(bytes) {
            return r;
        }
        if bytes.is_empty() {
            return Err(libc::ENOENT);
        }
        if bytes.contains(&0) {
            return Err(libc::EINVAL);
        }
        let mut dest = if bytes[0] == b'/' { PathBuf::from("/") } else { self.current_dir()? };
        let mut kind = FileKind::Dir;
        let mut links = 0;
        self.walk(&mut dest, &mut kind, &mut links, bytes, MAX_SYMLINKS)?;
        Ok(Resolved { path: dest, kind })
    }

    /// The common case in one or two lookups: an absolute path without `.`, `..`, empty
    /// components or a trailing slash that is a key already (its parent is a canonical directory,
    /// reached without links), or whose parent is a canonical directory (then only its last
    /// component is new). `None`: walk it.
    fn resolve_plain(&mut self, bytes: &[u8]) -> Option<Result<Resolved, Errno>> {
        let plain = bytes.len() > 1
            && bytes[0] == b'/'
            && bytes[1..].split(|&b| b == b'/').all(|c| !c.is_empty() && c != b"." && c != b"..");
        if !plain || bytes.contains(&0) {
            return None;
        }
        let path = Path::new(OsStr::from_bytes(bytes));
        match self.steps.get(path.as_os_str()) {
            Some(Ok(s)) => {
                let canon = s.target.clone().unwrap_or_else(|| path.to_path_buf());
                return Some(Ok(Resolved { path: canon, kind: s.kind }));
            }
            Some(Err(e)) => return Some(Err(*e)),
            None => {}
        }
        let cut = bytes.iter().rposition(|&b| b == b'/')?;
        let parent_is_dir = cut == 0
            || matches!(
                self.steps.get(OsStr::from_bytes(&bytes[..cut])),
                Some(Ok(Step { target: None, kind: FileKind::Dir, .. }))
            );
        if !parent_is_dir {
            return None;
        }
        Some(self.fresh_step(path, MAX_SYMLINKS).map(|s| Resolved {
            path: s.target.unwrap_or_else(|| path.to_path_buf()),
            kind: s.kind,
        }))
    }

    /// Applies the components of `bytes` (a path or a link target) to `dest`, a canonical path
    /// of type `kind`. `links` counts the symlinks followed and may not exceed `limit`.
    fn walk(&mut self, dest: &mut PathBuf, kind: &mut FileKind, links: &mut u32, bytes: &[u8], limit: u32) -> Result<(), Errno> {
        // A trailing slash asks for a directory, like a trailing `/.`.
        let trailing = (bytes.last() == Some(&b'/')).then_some(&b"."[..]);
        for comp in bytes.split(|&b| b == b'/').filter(|c| !c.is_empty()).chain(trailing) {
            // Only a directory has entries, `.` or `..` (realpath's ENOTDIR / dir check).
            if *kind != FileKind::Dir {
                return Err(libc::ENOTDIR);
            }
            match comp {
                b"." => {}
                b".." => {
                    dest.pop();
                }
                name => self.step(dest, kind, links, OsStr::from_bytes(name), limit)?,
            }
        }
        Ok(())
    }

    fn step(&mut self, dest: &mut PathBuf, kind: &mut FileKind, links: &mut u32, name: &OsStr, limit: u32) -> Result<(), Errno> {
        dest.push(name);
        let fresh;
        let step = match self.steps.get(dest.as_os_str()) {
            Some(Ok(s)) => s,
            Some(Err(e)) => return Err(*e),
            None => {
                fresh = self.fresh_step(dest, limit.saturating_sub(*links))?;
                &fresh
            }
        };
        *links += step.links;
        if *links > limit {
            return Err(libc::ELOOP);
        }
        *kind = step.kind;
        if let Some(t) = &step.target {
            dest.clone_from(t);
        }
        Ok(())
    }

    /// `path` (a canonical parent joined with one name) as `lstat` sees it: `None` when it does
    /// not exist, `Some(Some(target as stored))` for a symlink (dangling or not), `Some(None)`
    /// otherwise. Memoised with the resolution steps.
    fn link_or_step(&mut self, path: &Path) -> Option<Option<PathBuf>> {
        if let Some(t) = self.links.get(path.as_os_str()) {
            return Some(Some(t.clone()));
        }
        let known = match self.steps.get(path.as_os_str()) {
            Some(r) => r.clone(),
            None => self.fresh_step(path, MAX_SYMLINKS),
        };
        if let Some(t) = self.links.get(path.as_os_str()) {
            return Some(Some(t.clone()));
        }
        // Not a link: it exists when its `lstat` succeeded.
        known.ok().map(|_| None)
    }

    /// `lstat`s `path` (a canonical parent joined with one name), follows it when it is a
    /// symlink (with at most `budget` links), and remembers the outcome.
    fn fresh_step(&mut self, path: &Path, budget: u32) -> Result<Step, Errno> {
        if self.active.contains(path.as_os_str()) {
            // Resolving this link needs this link: it never ends.
            return Err(CYCLE);
        }
        let key = path.as_os_str().to_os_string();
        self.stats.lstat += 1;
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) => {
                let e = errno(&e);
                self.steps.insert(key, Err(e));
                return Err(e);
            }
        };
        let ft = meta.file_type();
        let step = if ft.is_symlink() {
            if budget == 0 {
                // Depends on how many links led here: not remembered.
                return Err(libc::ELOOP);
            }
            self.stats.readlink += 1;
            let target = match std::fs::read_link(path) {
                Ok(t) => t,
                Err(e) => {
                    let e = errno(&e);
                    self.steps.insert(key, Err(e));
                    return Err(e);
                }
            };
            self.links.insert(key.clone(), target.clone());
            let target = target.as_os_str().as_bytes();
            let mut dest = if target.first() == Some(&b'/') {
                PathBuf::from("/")
            } else {
                let mut parent = path.to_path_buf();
                parent.pop();
                parent
            };
            let mut kind = FileKind::Dir;
            let mut links = 0;
            self.active.insert(key.clone());
            let walked = self.walk(&mut dest, &mut kind, &mut links, target, budget - 1);
            self.active.remove(&key);
            match walked {
                Ok(()) => {}
                // Ran out of links: with more left it might resolve.
                Err(libc::ELOOP) => return Err(libc::ELOOP),
                Err(e) => {
                    self.steps.insert(key, Err(e));
                    return Err(e);
                }
            }
            Step { target: Some(dest), kind, links: links + 1 }
        } else {
            Step { target: None, kind: FileKind::of(ft), links: 0 }
        };
        self.steps.insert(key, Ok(step.clone()));
        Ok(step)
    }
}

/// Removes `.` and resolves `..` lexically.
#[must_use]
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
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

#[cfg(all(test, unix))]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// The implementation this module replaces, kept as the reference.
    pub(crate) fn reference_lenient(p: &Path) -> PathBuf {
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

    /// `p` resolves as `std::fs::canonicalize` (and the old lenient function) does, with a fresh
    /// resolver and with `shared`, and the type matches `stat` of the result.
    fn same(shared: &mut PathResolver, p: &Path) {
        let want = std::fs::canonicalize(p).ok();
        for r in [&mut PathResolver::new(), shared] {
            let got = r.canonicalize(p);
            assert_eq!(got.as_ref().ok().map(|g| g.path.clone()), want, "strict {p:?}: {got:?}");
            if let Ok(g) = &got {
                let meta = std::fs::metadata(&g.path).unwrap();
                let kind = FileKind::of(meta.file_type());
                assert_eq!(g.kind, kind, "kind of {p:?}");
            }
            let l = r.canonicalize_lenient(p);
            assert_eq!(l.path, reference_lenient(p), "lenient {p:?}");
            assert_eq!(l.kind.is_some(), want.is_some(), "lenient existence {p:?}");
        }
    }

    /// Variants of `p` that exercise trailing slashes and dot components.
    fn variants(p: &Path) -> Vec<PathBuf> {
        let s = p.as_os_str().as_bytes();
        let mut v = vec![p.to_path_buf()];
        for suffix in ["/", "/.", "/..", "/./", "/../", "//", "/x", "/../x", "/./.."] {
            let mut b = s.to_vec();
            b.extend_from_slice(suffix.as_bytes());
            v.push(PathBuf::from(OsStr::from_bytes(&b)));
        }
        v
    }

    fn world() -> (tempfile::TempDir, PathBuf) {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::create_dir_all(root.join("x/y")).unwrap();
        std::fs::write(root.join("a/file"), "f").unwrap();
        std::fs::write(root.join("x/y/deep"), "d").unwrap();
        // Chains, relative and absolute targets, `..` in targets.
        symlink(root.join("a/b"), root.join("abs-b")).unwrap();
        symlink("abs-b", root.join("chain1")).unwrap();
        symlink("chain1/c", root.join("chain2")).unwrap();
        symlink("../x/y", root.join("a/up-y")).unwrap();
        symlink("./b/../b/c/", root.join("a/dotty")).unwrap();
        symlink("file", root.join("a/to-file")).unwrap();
        symlink("file/", root.join("a/to-file-slash")).unwrap();
        symlink("/", root.join("to-root")).unwrap();
        symlink("..", root.join("a/b/c/parent")).unwrap();
        // Dangling links and loops.
        symlink("nowhere", root.join("dangling")).unwrap();
        symlink("nowhere/deeper", root.join("a/dangling-deep")).unwrap();
        symlink("loop2", root.join("loop1")).unwrap();
        symlink("loop1", root.join("loop2")).unwrap();
        symlink("self", root.join("self")).unwrap();
        symlink("a/file/x", root.join("through-file")).unwrap();
        (d, root)
    }

    #[test]
    fn canonical_beyond_what_exists_only_where_it_can_be_told() {
        let (_d, root) = world();
        let mut r = PathResolver::new();
        // Existing, through a link, then names that do not exist yet.
        assert_eq!(r.canonicalize_beyond(&root.join("a/b")), Some(root.join("a/b")));
        assert_eq!(r.canonicalize_beyond(&root.join("to-root/new/x")), Some(PathBuf::from("/new/x")));
        assert_eq!(r.canonicalize_beyond(&root.join("a/b/new/deeper")), Some(root.join("a/b/new/deeper")));
        // A dangling link on the way, a file on the way, a relative path, `..`: not told.
        assert_eq!(r.canonicalize_beyond(&root.join("dangling/x")), None);
        assert_eq!(r.canonicalize_beyond(&root.join("a/file/x")), None);
        assert_eq!(r.canonicalize_beyond(Path::new("rel/x")), None);
        assert_eq!(r.canonicalize_beyond(&root.join("a/../a")), None);
    }

    #[test]
    fn matches_realpath_on_symlink_shapes() {
        let (_d, root) = world();
        let mut shared = PathResolver::new();
        let cases = [
            "", "a", "a/b/c", "a/file", "abs-b", "chain1", "chain2", "chain2/..", "chain1/../a",
            "a/up-y", "a/up-y/..", "a/up-y/deep", "a/up-y/deep/..", "a/dotty", "a/dotty/..",
            "a/to-file", "a/to-file/", "a/to-file/.", "a/to-file/..", "a/to-file-slash",
            "to-root", "to-root/..", "to-root/usr", "a/b/c/parent", "a/b/c/parent/parent/..",
            "dangling", "dangling/x", "a/dangling-deep", "a/dangling-deep/more", "loop1",
            "loop1/x", "self", "through-file", "missing", "missing/x/y", "a/missing/../b",
            "a/b/../../x", "a/./b/./c/.", "a//b///c", "a/file/../b", "x/y/deep/", "../..",
        ];
        for c in cases {
            for p in variants(&root.join(c)) {
                same(&mut shared, &p);
            }
        }
        for p in ["/", "//", "/..", "/../..", "/.", "///usr//bin/", "/nonexistent", "/nonexistent/x/.."] {
            same(&mut shared, Path::new(p));
        }
        // A fresh resolver agrees after the shared one has cached everything.
        assert!(shared.canonicalize(&root.join("chain2")).unwrap().kind == FileKind::Dir);
        assert_eq!(shared.canonicalize(&root.join("a/file")).unwrap().kind, FileKind::File);
        assert_eq!(shared.canonicalize(Path::new("/dev/null")).unwrap().kind, FileKind::Other);
        let l = shared.canonicalize_lenient(&root.join("a/missing/tail"));
        assert_eq!(l, Lenient { path: root.join("a/missing/tail"), kind: None });
        assert!(shared.canonicalize(&root.join("loop1")).unwrap_err().raw_os_error() == Some(libc::ELOOP));
    }

    #[test]
    fn symlink_limit_is_realpaths() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir(root.join("end")).unwrap();
        // l0 -> end, l1 -> l0, …: resolving l{n} follows n + 1 links.
        symlink("end", root.join("l0")).unwrap();
        for i in 1..45 {
            symlink(format!("l{}", i - 1), root.join(format!("l{i}"))).unwrap();
        }
        // Paths that reach the limit through several components in a row.
        symlink("l20/../l20", root.join("twice")).unwrap();
        let mut shared = PathResolver::new();
        for i in [0, 1, 20, 38, 39, 40, 41, 44] {
            same(&mut shared, &root.join(format!("l{i}")));
            same(&mut shared, &root.join(format!("l{i}/..")));
        }
        same(&mut shared, &root.join("twice"));
        same(&mut shared, &root.join("l19/../l19"));
        same(&mut shared, &root.join("l19/../l20"));
        same(&mut shared, &root.join("l20/../l20"));
        // Resolved in the other order (the long chain first).
        let mut r = PathResolver::new();
        assert!(r.canonicalize(&root.join("l44")).is_err());
        assert!(r.canonicalize(&root.join("l39")).is_ok());
        assert!(r.canonicalize(&root.join("l40")).is_err());
        assert!(r.canonicalize(&root.join("l19/../l19")).is_ok());
        assert!(r.canonicalize(&root.join("l19/../l20")).is_err());
    }

    /// Pseudo-random trees of links and paths, compared with realpath.
    #[test]
    fn matches_realpath_on_generated_paths() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let names = ["d0", "d1", "f", "l0", "l1", "l2", "l3", "..", ".", "zz"];
        for dir in ["", "d0", "d0/d1", "d1", "d1/d0", "d0/d1/d0"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join("f"), "").unwrap();
        }
        for dir in ["", "d0", "d0/d1", "d1", "d1/d0", "d0/d1/d0"] {
            for l in ["l0", "l1", "l2", "l3"] {
                let len = 1 + next(3);
                let mut t: Vec<&str> = (0..len).map(|_| names[next(names.len())]).collect();
                if next(4) == 0 {
                    t.insert(0, "");
                }
                let mut target = t.join("/");
                if target.is_empty() {
                    target.push('.');
                }
                if next(5) == 0 {
                    target.push('/');
                }
                if target.starts_with('/') {
                    target = format!("{}{}", root.display(), target);
                }
                symlink(&target, root.join(dir).join(l)).unwrap();
            }
        }
        let mut shared = PathResolver::new();
        let (mut ok, mut eloop) = (0, 0);
        for _ in 0..3000 {
            let len = 1 + next(6);
            let mut p = root.clone().into_os_string();
            for _ in 0..len {
                p.push("/");
                p.push(names[next(names.len())]);
            }
            if next(6) == 0 {
                p.push("/");
            }
            same(&mut shared, Path::new(&p));
            match std::fs::canonicalize(Path::new(&p)) {
                Ok(_) => ok += 1,
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => eloop += 1,
                Err(_) => {}
            }
        }
        // The generated set exercises both outcomes, and cycles are remembered.
        assert!(ok > 100 && eloop > 100, "{ok} resolved, {eloop} loops");
        assert!(shared.stats().readlink < 100, "{:?}", shared.stats());
    }

    #[test]
    fn matches_realpath_on_system_paths() {
        let mut shared = PathResolver::new();
        let mut paths: Vec<PathBuf> = [
            "/usr/bin", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/usr/lib64", "/etc",
            "/etc/alternatives", "/etc/localtime", "/etc/mtab", "/etc/os-release", "/proc/self",
            "/proc/self/exe", "/proc/self/cwd", "/proc/self/root", "/proc/self/fd", "/proc/thread-self",
            "/proc/mounts", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd", "/dev/fd/0",
            "/dev/null", "/dev/ptmx", "/dev/shm", "/var/run", "/var/lock", "/tmp", "/nix/store",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        for dir in ["/etc/alternatives", "/usr/bin", "/lib", "/usr/lib/x86_64-linux-gnu", "/etc", "/dev"] {
            if let Ok(rd) = std::fs::read_dir(dir) {
                paths.extend(rd.filter_map(Result::ok).map(|e| e.path()).take(400));
            }
        }
        for p in &paths {
            for v in variants(p) {
                same(&mut shared, &v);
            }
        }
        // Relative paths resolve against the current directory.
        for p in [".", "src", "src/../Cargo.toml", "./src/", "missing/x", ".."] {
            same(&mut shared, Path::new(p));
        }
    }

    #[test]
    fn shared_prefixes_are_resolved_once() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        for i in 0..20 {
            std::fs::create_dir_all(root.join(format!("home/p{i}"))).unwrap();
        }
        symlink("home", root.join("link")).unwrap();
        let mut r = PathResolver::new();
        r.canonicalize(&root).unwrap();
        let base = r.stats();
        for i in 0..20 {
            assert_eq!(r.canonicalize(&root.join(format!("link/p{i}"))).unwrap().path, root.join(format!("home/p{i}")));
        }
        // home, link (one readlink), then one lstat per p{i}.
        assert_eq!(r.stats().lstat - base.lstat, 22);
        assert_eq!(r.stats().readlink - base.readlink, 1);
        for i in 0..20 {
            r.canonicalize(&root.join(format!("home/p{i}/"))).unwrap();
            let _ = r.canonicalize_lenient(&root.join(format!("home/p{i}/missing")));
        }
        assert_eq!(r.stats().lstat - base.lstat, 42, "only the missing names are new");
        assert_eq!(r.stats().readlink - base.readlink, 1);
    }

    /// `lexists`, `link_at` and `links_on_the_way` agree with `lstat`, `readlink` and a walk by
    /// `readlink`, with a fresh resolver and with one that has resolved everything before.
    #[test]
    fn link_queries_match_lstat_and_readlink() {
        let (_d, root) = world();
        let names = [
            "a", "a/file", "abs-b", "chain1", "chain2", "a/up-y", "a/dotty", "a/to-file", "to-root", "dangling", "a/dangling-deep",
            "loop1", "self", "through-file", "missing", "a/missing", "chain2/parent", "a/b/c/parent", "chain1/c", "a/file/x",
        ];
        let mut warm = PathResolver::new();
        for n in names {
            let _ = warm.canonicalize_lenient(&root.join(n));
        }
        for r in [&mut PathResolver::new(), &mut warm] {
            for n in names {
                let p = root.join(n);
                assert_eq!(r.lexists(&p), std::fs::symlink_metadata(&p).is_ok(), "lexists {n}");
                let kind = std::fs::symlink_metadata(&p).ok().map(|m| FileKind::of(m.file_type()));
                assert_eq!(r.lstat_kind(&p), kind, "lstat_kind {n}");
            }
            for n in ["a", "abs-b", "chain1", "dangling", "loop1", "self", "missing", "a/to-file", "a/dangling-deep"] {
                let p = root.join(n);
                assert_eq!(r.link_at(&p), std::fs::read_link(&p).ok(), "link_at {n}");
            }
            let links = r.links_on_the_way(&root.join("chain2/parent/file"));
            assert_eq!(links, vec![
                (root.join("chain2"), PathBuf::from("chain1/c")),
                (root.join("chain1"), PathBuf::from("abs-b")),
                (root.join("abs-b"), root.join("a/b")),
                (root.join("a/b/c/parent"), PathBuf::from("..")),
            ]);
        }
    }
}
