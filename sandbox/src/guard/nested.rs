//! The walk for nested protected names (a repository in a subdirectory, `sub/.vscode`, a new
//! repository's hooks), and what it remembers across runs.
//!
//! At launch every writable root is walked to [`NESTED_DEPTH`] for the protected names: what it
//! finds is protected like the root's own entries. After the run the same walk looks again, but
//! reads only the directories that changed and those new in them (its cost follows what the
//! command wrote), for the names created during the run. The launch walk is bounded
//! ([`NESTED_ENTRIES`] entries read), so that a huge tree does not make every start slow; one
//! that runs out is reported (the root's persistence protection is degraded), and its root is not
//! reviewed after the run.
//!
//! A budget alone can be exhausted on purpose: one run fills a directory with 60 000 files, and
//! the *next* run's launch walk stops in it, before the repository whose hooks that run then
//! plants. So the walk remembers what it read. Every directory a walk read is recorded — its
//! device and inode, its change time, when it was read, and the entries the walk uses (the
//! protected names in it and the subdirectories it descends into) — in one file per writable
//! root ([`WalkCache`]), written by the runner after the run from the launch walk's and the
//! after-run walk's reads. A later walk takes a directory's entries from its record instead of
//! reading it while the directory is the same inode with the same change time, recorded more
//! than [`RACY_WINDOW_NS`] before it was read ([`Listing::holds`]): a change always sets the
//! change time (no command can set it back), but file times come from a clock that ticks every
//! few milliseconds — whole seconds on some filesystems — so a change in the same tick as the
//! last one could leave it as it was (git's "racily clean" entries). A directory that does not
//! hold is read again.
//!
//! Only directories that no walk recorded count against the launch walk's budget. A directory a
//! command made was read by the walk after its run, which has no budget, and recorded: no run
//! can push a name out of the next run's reach. What the host made since (a checkout, an
//! unpacked archive) still counts; a walk that stops records what it read, so each later launch
//! goes further. The records are used only where no sandboxed command can write them: the
//! directory holding them must lie outside every writable root and scratch directory (checked by
//! the planner, [`crate::guard::protected::protected_paths`]), be a real directory of this user
//! with no group or other access, and every file in it is opened without following links. A file
//! that does not read back exactly (another version, cut, edited) is no record at all.
//!
//! The after-run walk uses the same test to find what changed since the launch read, and
//! compares the inode too: a directory replaced by another one at the same path is read.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use crate::model::guard::{NESTED_DEPTH, NESTED_ENTRIES, NESTED_SKIP};
#[cfg(target_os = "linux")]
pub use super::records::{records_dir, usable};
pub use super::records::RACY_WINDOW_NS;
#[cfg(target_os = "linux")]
use super::records::{change_time_kept, load_record, save_record};
pub(crate) use super::records::{decimal, fnv1a64, now_ns, signed_decimal};


/// The most directories one root's record holds; beyond, none is written (the next launch walk
/// reads what it did not record, within its budget, and reports where it stopped).
pub const MAX_RECORDED_DIRS: usize = 500_000;

/// One entry of a directory that the walk uses: a protected name, or a subdirectory it descends
/// into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: OsString,
    /// A directory (not a symbolic link to one).
    pub dir: bool,
}

/// One directory as a walk saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Its path.
    pub path: PathBuf,
    /// Its depth below the root (the root at 0).
    pub depth: usize,
    /// Device and inode (0, 0 where the platform has none: such a listing never holds).
    pub id: (u64, u64),
    /// Its change time when it was read (ns since the epoch; `None` where there is none).
    pub ctime_ns: Option<i128>,
    /// When the read began (ns since the epoch, the wall clock file times come from).
    pub read_ns: i128,
    /// The entries the walk uses ([`step`] is not [`Step::Skip`]).
    pub entries: Vec<Entry>,
}

/// What a directory's stat says, for [`Listing::holds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirState {
    /// Device and inode.
    pub id: (u64, u64),
    /// Change time (ns since the epoch).
    pub ctime_ns: Option<i128>,
}

impl Listing {
    /// The directory, as `now` shows it, still holds exactly these entries: the same inode, the
    /// same change time, and that change time older than the read by [`RACY_WINDOW_NS`].
    #[must_use]
    pub fn holds(&self, now: &DirState) -> bool {
        match (self.ctime_ns, now.ctime_ns) {
            (Some(c), Some(n)) => self.id != (0, 0) && now.id == self.id && n == c && c < self.read_ns - RACY_WINDOW_NS,
            _ => false,
        }
    }
}

/// What the walk does with an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A protected name (matched without regard to ASCII case below the root).
    Found,
    /// A subdirectory to look in.
    Descend,
    /// One of [`REPO_MARKS`] the walk does not descend into: kept, to tell a directory git
    /// discovers as a repository ([`Listing::is_repository`]).
    Mark,
    /// Nothing.
    Skip,
}

/// The entries that make a directory one git discovers as a repository without anything named
/// `.git` (git's `is_git_directory`: a `HEAD`, and `objects/` and `refs/` or a `commondir` that
/// names where they are): a bare repository, or a git directory under another name.
pub const REPO_MARKS: &[&str] = &["HEAD", "objects", "refs", "commondir"];

impl Listing {
    /// The directory holds what makes git discover it as a repository (below the root; see
    /// [`REPO_MARKS`]): a `HEAD` that is not a directory, with `objects/` and `refs/`, or with a
    /// `commondir`. Its content is not checked: a directory that only looks like one is
    /// reviewed as one.
    #[must_use]
    pub fn is_repository(&self) -> bool {
        // Without regard to ASCII case, as the protected names (a case-insensitive filesystem).
        let has = |n: &str, dir: bool| self.entries.iter().any(|e| e.name.eq_ignore_ascii_case(n) && e.dir == dir);
        self.depth > 0 && has("HEAD", false) && ((has("objects", true) && has("refs", true)) || has("commondir", false))
    }
}

/// What the walk does with the entry `name` (a directory or not) of a directory at `depth`.
#[must_use]
pub fn step(depth: usize, name: &OsStr, dir: bool, names: &[&str]) -> Step {
    // Matched without regard to ASCII case: on a case-insensitive filesystem (macOS by default,
    // vfat, exFAT, ext4 casefold) `sub/.GIT` is the repository git uses in `sub`; on another
    // one protecting it costs nothing. Top-level names are the roots' own entries (handled
    // elsewhere: looked up by name, so the filesystem's own rule applies), matched exactly.
    if depth > 0 && names.iter().any(|x| name.eq_ignore_ascii_case(x)) {
        return Step::Found;
    }
    let n = name.to_string_lossy();
    if depth == 0 && names.contains(&n.as_ref()) {
        return Step::Skip;
    }
    if dir && depth < NESTED_DEPTH && !NESTED_SKIP.contains(&n.as_ref()) {
        Step::Descend
    } else if depth > 0 && REPO_MARKS.iter().any(|m| name.eq_ignore_ascii_case(m)) {
        Step::Mark
    } else {
        Step::Skip
    }
}

/// What the walk knows before it starts.
pub enum Known<'a> {
    /// At launch: the records of earlier walks of this root, when they can be used (the walk
    /// takes out each record it looks at: a path is looked at once).
    Launch(Option<&'a mut WalkCache>),
    /// After the run: what the launch walk saw. Only the directories that no longer hold are
    /// read, and the directories they hold that the launch walk did not see, whole.
    AfterRun(&'a [Listing]),
    /// After the run, in the walk service: the directories changed since the launch (path and
    /// depth) are read, and the directories they hold that `seen` has no record of, whole.
    Changed(&'a [(PathBuf, usize)], &'a WalkCache),
}

/// What [`walk_nested`] found.
#[derive(Default, Debug)]
pub struct NestedWalk {
    /// The entries named as a protected name, and whether each is a directory.
    pub found: Vec<(PathBuf, bool)>,
    /// The directories git discovers as repositories without a `.git` ([`Listing::is_repository`]).
    pub repos: Vec<PathBuf>,
    /// The directory where the launch walk ran out of its budget, if it did.
    pub stopped: Option<PathBuf>,
    /// The directories it could not read for want of permission (and their depths): what they
    /// hold was not looked at. After a run, [`read_unreadable`] gives those the user owns their
    /// owner's reading back and reads them.
    pub unreadable: Vec<(PathBuf, usize)>,
    /// Every directory it looked at (read, or held by its record), with what it holds.
    pub listings: Vec<Listing>,
    /// How many of them came from the records of earlier walks.
    pub from_records: usize,
}

/// The entries named as one of `names` in `root`'s subdirectories (depth 1 to [`NESTED_DEPTH`];
/// not inside such an entry, nor in [`NESTED_SKIP`] directories). At launch, reading at most
/// `budget` entries of directories no record holds; after the run, only what changed (see
/// [`Known`]).
#[must_use]
pub fn walk_nested(root: &Path, names: &[&str], budget: usize, known: Known<'_>) -> NestedWalk {
    let mut out = NestedWalk::default();
    let mut budget = budget;
    // (directory, depth, read whole below it: after the run, a directory the launch walk did
    // not see)
    let mut queue: Vec<(PathBuf, usize, bool)> = Vec::new();
    let at_launch = matches!(known, Known::Launch(_));
    // After the run in the walk service: its records say what was seen.
    let mut seen_by: Option<&WalkCache> = None;
    let mut changed: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    // After the run: the launch's listings by path, made when a changed directory is first read
    // (a run that changed nothing needs none).
    let mut launch_listings: &[Listing] = &[];
    let mut launch: Option<std::collections::HashSet<&[u8]>> = None;
    let mut at = RootAt::new(root);
    let mut cache = match known {
        Known::Launch(cache) => {
            queue.push((root.to_path_buf(), 0, true));
            cache
        }
        Known::Changed(dirs, seen) => {
            seen_by = Some(seen);
            // Each one is read by its own turn (not whole, as new, through its parent).
            changed = dirs.iter().map(|(d, _)| d.as_os_str().as_encoded_bytes()).collect();
            queue.extend(dirs.iter().map(|(d, depth)| (d.clone(), *depth, false)));
            None
        }
        Known::AfterRun(listings) => {
            launch_listings = listings;
            for l in listings {
                if at.state(&l.path).is_some_and(|now| !at.holds(l, &now)) {
                    queue.push((l.path.clone(), l.depth, false));
                }
            }
            None
        }
    };
    while let Some((dir, depth, whole)) = queue.pop() {
        // Taken out of the records: the walk looks at each path once (a tree: every directory
        // is queued by its parent's listing alone).
        let record = cache.as_deref_mut().and_then(|c| c.dirs.take(dir.as_os_str().as_encoded_bytes())).map(|b| b.0);
        let recorded = record.is_some();
        let listing = match record.filter(|r| r.depth == depth && at.state(&dir).is_some_and(|now| at.holds(r, &now))) {
            Some(r) => {
                out.from_records += 1;
                r
            }
            None => {
                // A directory an earlier walk recorded is read whatever its size: the walk
                // after the run that made it read it already.
                let charged = at_launch && !recorded;
                let limit = if charged { budget } else { usize::MAX };
                match read_listing(&mut at, &dir, depth, names, limit) {
                    Ok(Some((l, n))) => {
                        if charged {
                            budget -= n;
                        }
                        l
                    }
                    Ok(None) => {
                        out.stopped = Some(dir);
                        break;
                    }
                    Err(e) => {
                        // Gone since (removed, replaced by a file or a link): nothing below it.
                        // Not readable: said, never taken for empty.
                        if e.kind() == std::io::ErrorKind::PermissionDenied {
                            out.unreadable.push((dir, depth));
                        }
                        continue;
                    }
                }
            }
        };
        // Found, and entered all the same: a `.git` inside its refs/ is a repository too (the
        // review of a git directory leaves refs/ to git).
        if listing.is_repository() {
            out.repos.push(dir.clone());
        }
        for e in &listing.entries {
            match step(depth, &e.name, e.dir, names) {
                Step::Found => out.found.push((dir.join(&e.name), e.dir)),
                Step::Descend => {
                    let p = dir.join(&e.name);
                    // After the run, a directory the launch walk saw is looked at through its
                    // own record (above).
                    let seen = !whole
                        && match seen_by {
                            Some(c) => c.get(&p).is_some() || changed.contains(p.as_os_str().as_encoded_bytes()),
                            None => launch.get_or_insert_with(|| launch_listings.iter().map(|l| l.path.as_os_str().as_encoded_bytes()).collect()).contains(p.as_os_str().as_encoded_bytes()),
                        };
                    if !seen {
                        queue.push((p, depth + 1, true));
                    }
                }
                Step::Skip | Step::Mark => {}
            }
        }
        out.listings.push(listing);
    }
    out.found.sort();
    out.repos.sort();
    out
}


/// After a run: the directories of `walk` it could not read ([`NestedWalk::unreadable`]) that
/// this user owns given their owner's reading back (`guard::fsmeta::let_owner_read`) and
/// read, with everything below them (whole: no record of them is trusted), what that finds
/// added to `walk`. The directories given back are returned; those left (another user's, or
/// refused for another reason) stay in `walk.unreadable`.
///
/// A command may take its own directory's read permission away (mode 0311) so that a walk run
/// as the user cannot see what it made there, while git, entering it by name, finds a `.git`
/// in it. As the directory's owner, the review may always give it back.
pub fn read_unreadable(root: &Path, names: &[&str], walk: &mut NestedWalk) -> Vec<PathBuf> {
    let mut given = Vec::new();
    let none = WalkCache::default();
    loop {
        // (Each turn gives at least one directory back, or ends: one given back that still
        // cannot be read is not given back again.)
        let (now, left): (Vec<(PathBuf, usize)>, Vec<(PathBuf, usize)>) = std::mem::take(&mut walk.unreadable).into_iter().partition(|(d, _)| super::fsmeta::let_owner_read(d).unwrap_or(false));
        walk.unreadable = left;
        if now.is_empty() {
            return given;
        }
        given.extend(now.iter().map(|(d, _)| d.clone()));
        let more = walk_nested(root, names, usize::MAX, Known::Changed(&now, &none));
        walk.found.extend(more.found);
        walk.found.sort();
        walk.found.dedup();
        walk.repos.extend(more.repos);
        walk.repos.sort();
        walk.repos.dedup();
        walk.listings.extend(more.listings);
        walk.unreadable.extend(more.unreadable);
    }
}

/// The directory at `path` (a real one, no link followed), or `None`.
#[must_use]
pub fn dir_state(path: &Path) -> Option<DirState> {
    let m = std::fs::symlink_metadata(path).ok().filter(std::fs::Metadata::is_dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(DirState { id: (m.dev(), m.ino()), ctime_ns: Some(super::records::time_ns(m.ctime(), m.ctime_nsec())) })
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        Some(DirState { id: (0, 0), ctime_ns: None })
    }
}

/// Where a walk looks up its directories: relative to a descriptor of its root, opened once,
/// so that the kernel walks only the names below the root at each directory (not the root's own
/// path again: most of a `stat`'s cost in a deep workspace). A directory outside the root, or a
/// root that cannot be opened, is looked up by its whole path. Links are treated as a lookup by
/// path treats them: followed on the way, never as the last name.
struct RootAt {
    #[cfg(unix)]
    fd: Option<std::os::fd::OwnedFd>,
    /// The root's device, where its filesystem keeps change times ([`change_time_kept`], Linux):
    /// records are trusted for directories on it alone (a filesystem mounted below the root is
    /// another device: read every time).
    trusted_dev: Option<u64>,
    #[cfg(unix)]
    root: Vec<u8>,
    /// The NUL-terminated name of the last lookup (reused: no allocation per directory).
    #[cfg(unix)]
    name: Vec<u8>,
}

impl RootAt {
    fn new(root: &Path) -> RootAt {
        #[cfg(unix)]
        let fd = std::ffi::CString::new(root.as_os_str().as_encoded_bytes()).ok().and_then(|c| {
            #[cfg(target_os = "linux")]
            let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            #[cfg(not(target_os = "linux"))]
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: open with a valid C string; the descriptor is owned below.
            let fd = unsafe { libc::open(c.as_ptr(), flags) };
            // SAFETY: a descriptor we just opened and own.
            (fd >= 0).then(|| unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
        });
        #[cfg(not(unix))]
        let _ = root;
        #[cfg(target_os = "linux")]
        let trusted_dev = fd.as_ref().and_then(|fd| {
            use std::os::fd::AsRawFd;
            // SAFETY: a zeroed stat buffer filled by fstat on our descriptor.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            #[allow(clippy::unnecessary_cast)]
            let dev = (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some(st.st_dev as u64);
            dev.filter(|_| change_time_kept(fd.as_raw_fd()))
        });
        #[cfg(not(target_os = "linux"))]
        let trusted_dev = None;
        RootAt {
            #[cfg(unix)]
            fd,
            trusted_dev,
            #[cfg(unix)]
            root: root.as_os_str().as_encoded_bytes().to_vec(),
            #[cfg(unix)]
            name: Vec::new(),
        }
    }

    /// The directory descriptor and NUL-terminated name to look `dir` up with.
    #[cfg(unix)]
    fn lookup(&mut self, dir: &Path) -> (libc::c_int, *const libc::c_char) {
        use std::os::fd::AsRawFd;
        let b = dir.as_os_str().as_encoded_bytes();
        self.name.clear();
        let below = self.fd.as_ref().and_then(|fd| {
            let rest = b.strip_prefix(self.root.as_slice())?;
            let rel = if rest.is_empty() {
                &b"."[..]
            } else if self.root.ends_with(b"/") {
                rest
            } else {
                rest.strip_prefix(b"/").filter(|r| !r.is_empty())?
            };
            Some((fd.as_raw_fd(), rel))
        });
        let (fd, name) = below.unwrap_or((libc::AT_FDCWD, b));
        self.name.extend_from_slice(name);
        self.name.push(0);
        (fd, self.name.as_ptr().cast())
    }

    /// `l` (what a walk recorded) still holds for its directory now `now`, on a filesystem whose
    /// change times can be trusted ([`Listing::holds`]).
    fn holds(&self, l: &Listing, now: &DirState) -> bool {
        self.trusted_dev == Some(now.id.0) && l.holds(now)
    }

    /// [`dir_state`] of `dir`.
    fn state(&mut self, dir: &Path) -> Option<DirState> {
        #[cfg(unix)]
        {
            if dir.as_os_str().as_encoded_bytes().contains(&0) {
                return None;
            }
            let (fd, name) = self.lookup(dir);
            // SAFETY: a zeroed stat buffer; fstatat relative to our descriptor (or the working
            // directory for an absolute path) with a NUL-terminated name.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { libc::fstatat(fd, name, &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return None;
            }
            #[allow(clippy::unnecessary_cast)]
            Some(DirState {
                id: (st.st_dev as u64, st.st_ino as u64),
                ctime_ns: Some(super::records::time_ns(st.st_ctime as i64, st.st_ctime_nsec as i64)),
            })
        }
        #[cfg(not(unix))]
        {
            dir_state(dir)
        }
    }

    /// `dir` opened for reading its entries (no link followed as its last name).
    #[cfg(unix)]
    fn open_dir(&mut self, dir: &Path) -> std::io::Result<libc::c_int> {
        if dir.as_os_str().as_encoded_bytes().contains(&0) {
            return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
        }
        let (at, name) = self.lookup(dir);
        // SAFETY: openat relative to our descriptor (or the working directory for an absolute
        // path) with a NUL-terminated name.
        let fd = unsafe { libc::openat(at, name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(fd)
        }
    }
}

/// `l`'s directory read again now: whether it holds the same entries as `l` (and is the same
/// directory). The walk service's check once the kernel watches a directory it read: a change
/// after the watch is reported, one before it shows here, whatever the clock's resolution.
#[must_use]
pub fn reads_the_same(l: &Listing, names: &[&str]) -> bool {
    let mut at = RootAt::new(&l.path);
    let Ok(Some((now, _))) = read_listing(&mut at, &l.path, l.depth, names, usize::MAX) else { return false };
    fn sorted(v: &[Entry]) -> Vec<(&OsStr, bool)> {
        let mut v: Vec<(&OsStr, bool)> = v.iter().map(|e| (e.name.as_os_str(), e.dir)).collect();
        v.sort();
        v
    }
    now.id == l.id && l.id != (0, 0) && sorted(&now.entries) == sorted(&l.entries)
}

/// Reads the directory `dir` at `depth`: its identity and change time from the descriptor it is
/// read through (so they are the listed directory's), and the entries the walk uses. `Ok(None)`
/// when it has more than `limit` entries.
fn read_listing(at: &mut RootAt, dir: &Path, depth: usize, names: &[&str], limit: usize) -> std::io::Result<Option<(Listing, usize)>> {
    let read_ns = now_ns();
    let mut l = Listing { path: dir.to_path_buf(), depth, id: (0, 0), ctime_ns: None, read_ns, entries: Vec::new() };
    let mut n = 0usize;
    let mut add = |name: OsString, is_dir: bool, l: &mut Listing| -> bool {
        n += 1;
        if n > limit {
            return false;
        }
        if step(depth, &name, is_dir, names) != Step::Skip {
            l.entries.push(Entry { name, dir: is_dir });
        }
        true
    };
    #[cfg(unix)]
    {
        let st = read_dir_fd(at.open_dir(dir)?, |name, is_dir, id, ctime| {
            if let Some((i, c)) = id.zip(ctime) {
                l.id = i;
                l.ctime_ns = Some(c);
                return true;
            }
            add(name.to_os_string(), is_dir, &mut l)
        })?;
        if !st {
            return Ok(None);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = at;
        for e in std::fs::read_dir(dir)?.flatten() {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if !add(e.file_name(), is_dir, &mut l) {
                return Ok(None);
            }
        }
    }
    Ok(Some((l, n)))
}

/// Reads the directory open at `fd` (taken: closed when done): reports its identity and change
/// time first (`f(_, _, Some, Some)`), then each entry but `.` and `..` with whether it is a
/// directory (`d_type`, or an `lstat` where the filesystem gives none), until `f` returns false.
/// `Ok(false)` when `f` stopped it.
#[cfg(unix)]
fn read_dir_fd(fd: libc::c_int, mut f: impl FnMut(&OsStr, bool, Option<(u64, u64)>, Option<i128>) -> bool) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: a zeroed stat buffer filled by fstat on our descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: closing our descriptor.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    #[allow(clippy::unnecessary_cast)]
    let ctime = super::records::time_ns(st.st_ctime as i64, st.st_ctime_nsec as i64);
    #[allow(clippy::unnecessary_cast)]
    let id = (st.st_dev as u64, st.st_ino as u64);
    // SAFETY: fdopendir takes ownership of fd (closed by closedir below).
    let d = unsafe { libc::fdopendir(fd) };
    if d.is_null() {
        let e = std::io::Error::last_os_error();
        // SAFETY: fdopendir failed: the descriptor is still ours.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let mut result = Ok(f(OsStr::new(""), false, Some(id), Some(ctime)));
    while matches!(result, Ok(true)) {
        // SAFETY: errno is thread-local; cleared so that the end and an error can be told apart.
        unsafe { *errno() = 0 };
        // SAFETY: readdir on our open stream.
        let ent = unsafe { libc::readdir(d) };
        if ent.is_null() {
            // SAFETY: reading our thread's errno.
            let err = unsafe { *errno() };
            if err != 0 {
                result = Err(std::io::Error::from_raw_os_error(err));
            }
            break;
        }
        // SAFETY: readdir returned a valid entry whose d_name is NUL-terminated.
        let (name, dtype) = unsafe { (std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()), (*ent).d_type) };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let is_dir = match dtype {
            libc::DT_DIR => true,
            libc::DT_UNKNOWN => {
                // SAFETY: a zeroed stat buffer; fstatat relative to the stream's descriptor.
                let mut est: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: as above, with the entry's NUL-terminated name.
                unsafe { libc::fstatat(libc::dirfd(d), name.as_ptr(), &mut est, libc::AT_SYMLINK_NOFOLLOW) == 0 && est.st_mode & libc::S_IFMT == libc::S_IFDIR }
            }
            _ => false,
        };
        result = Ok(f(OsStr::from_bytes(bytes), is_dir, None, None));
    }
    // SAFETY: closing the stream (and its descriptor).
    unsafe { libc::closedir(d) };
    result
}

#[cfg(all(unix, any(target_os = "linux", target_os = "android")))]
fn errno() -> *mut libc::c_int {
    // SAFETY: glibc's thread-local errno location.
    unsafe { libc::__errno_location() }
}

#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
fn errno() -> *mut libc::c_int {
    // SAFETY: the BSD/macOS thread-local errno location.
    unsafe { libc::__error() }
}

/// The records of earlier walks of one writable root (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct WalkCache {
    /// Each recorded directory, found by its path's bytes ([`ByPath`]).
    dirs: std::collections::HashSet<ByPath>,
}

#[cfg(all(test, target_os = "linux"))]
impl WalkCache {
    /// Every recorded directory (the fuzz targets).
    pub(crate) fn listings(&self) -> impl Iterator<Item = &Listing> {
        self.dirs.iter().map(|b| &b.0)
    }
}

/// A record in [`WalkCache`], hashed and compared by its path's bytes. The walk's paths are made
/// by `join` from the root and entry names, as the records' are, so the same path has the same
/// bytes; a path spelled otherwise is only a record not found (the directory is read). Hashing
/// the bytes costs a fraction of `Path`'s hash, which splits the path into components, and the
/// listing's own path is the key (no second copy of it).
#[derive(Clone, Debug)]
struct ByPath(Listing);

impl ByPath {
    fn key(&self) -> &[u8] {
        self.0.path.as_os_str().as_encoded_bytes()
    }
}

impl PartialEq for ByPath {
    /// The same path (what `Borrow` needs: equal keys, equal values).
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ByPath {}

impl std::hash::Hash for ByPath {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // As `[u8]` hashes, so that a lookup by the bytes alone finds it (`Borrow`).
        self.key().hash(h);
    }
}

impl std::borrow::Borrow<[u8]> for ByPath {
    fn borrow(&self) -> &[u8] {
        self.key()
    }
}

impl WalkCache {
    /// The record of the directory at `path`.
    #[must_use]
    pub fn get(&self, path: &Path) -> Option<&Listing> {
        self.dirs.get(path.as_os_str().as_encoded_bytes()).map(|b| &b.0)
    }

    /// Records `l` (in place of an earlier record of its path).
    pub fn insert(&mut self, l: Listing) {
        self.dirs.replace(ByPath(l));
    }

    /// Takes out the record of the directory at `path`.
    pub fn remove(&mut self, path: &[u8]) -> Option<Listing> {
        self.dirs.take(path).map(|b| b.0)
    }

    /// Every record.
    pub fn iter(&self) -> impl Iterator<Item = &Listing> {
        self.dirs.iter().map(|b| &b.0)
    }

    /// How many directories are recorded.
    #[must_use]
    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    /// No directory is recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

/// The first line of a record file.
const MAGIC: &[u8] = b"localgpt-nested-walk 1\n";

/// What a root's records are keyed by: the root, the names looked for and the walk's rules (a
/// change to any makes the records another walk's). Length-prefixed, so that two different
/// lists never give the same key.
fn key(root: &Path, names: &[&str]) -> Vec<u8> {
    let mut k = Vec::new();
    let mut part = |b: &[u8]| {
        k.extend_from_slice(format!("{}:", b.len()).as_bytes());
        k.extend_from_slice(b);
    };
    part(root.as_os_str().as_encoded_bytes());
    part(format!("{NESTED_DEPTH}").as_bytes());
    // Records made before the walk kept the repository marks hold none: not this walk's.
    part(b"marks");
    for n in REPO_MARKS {
        part(n.as_bytes());
    }
    for n in names {
        part(n.as_bytes());
    }
    part(b"skip");
    for n in NESTED_SKIP {
        part(n.as_bytes());
    }
    k
}

/// The walk's rules alone (what a walk service's socket is named by, with its wire's version).
#[must_use]
pub fn rules_key() -> Vec<u8> {
    key(Path::new(""), &[])
}

/// The file name of a root's records: a hash of its key (the key itself is checked inside).
#[must_use]
pub fn record_name(root: &Path, names: &[&str]) -> String {
    format!("walk-{:016x}", fnv1a64(&key(root, names)))
}


impl WalkCache {
    /// The record file's bytes for the directories of `listings` that a walk from `root` reaches
    /// through them (each one once; the last listing of a path wins): the magic line, the key,
    /// one record per directory (`D dev ino ctime_ns read_ns depth entries path-below-root`)
    /// followed by its entries (`d name`, a directory, or `o name`), then the counts — each
    /// record ended by a NUL. `None` beyond [`MAX_RECORDED_DIRS`].
    #[must_use]
    pub fn encode<'a>(root: &Path, names: &[&str], listings: impl IntoIterator<Item = &'a Listing>) -> Option<Vec<u8>> {
        use std::io::Write;
        let by_path: HashMap<&[u8], &Listing> =
            listings.into_iter().filter(|l| l.ctime_ns.is_some() && l.id != (0, 0)).map(|l| (l.path.as_os_str().as_encoded_bytes(), l)).collect();
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(b"K ");
        b.extend_from_slice(&key(root, names));
        b.push(0);
        let (mut dirs, mut entries) = (0usize, 0usize);
        let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
        let mut done: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        while let Some((p, depth)) = stack.pop() {
            let bytes = p.as_os_str().as_encoded_bytes();
            let Some(l) = by_path.get(bytes).filter(|l| l.depth == depth) else { continue };
            if !done.insert(bytes.to_vec()) {
                continue;
            }
            dirs += 1;
            if dirs > MAX_RECORDED_DIRS {
                return None;
            }
            let rel = p.strip_prefix(root).unwrap_or(Path::new(""));
            // (Writing to a Vec cannot fail.)
            let _ = write!(b, "D {} {} {} {} {} {} ", l.id.0, l.id.1, l.ctime_ns.unwrap_or(0), l.read_ns, l.depth, l.entries.len());
            b.extend_from_slice(rel.as_os_str().as_encoded_bytes());
            b.push(0);
            for e in &l.entries {
                entries += 1;
                b.extend_from_slice(if e.dir { b"d " } else { b"o " });
                b.extend_from_slice(e.name.as_encoded_bytes());
                b.push(0);
                if step(depth, &e.name, e.dir, names) == Step::Descend {
                    stack.push((p.join(&e.name), depth + 1));
                }
            }
        }
        // The counts last: a file cut at a record's end must not read as fewer directories.
        let _ = write!(b, "C {dirs} {entries}");
        b.push(0);
        Some(b)
    }

    /// Reads [`WalkCache::encode`]'s bytes for `root` and `names`; `None` for anything else
    /// (another version or key, a cut or edited file, a name with a `/`, a path that climbs).
    #[must_use]
    pub fn decode(root: &Path, names: &[&str], b: &[u8]) -> Option<WalkCache> {
        let rest = b.strip_prefix(MAGIC)?.strip_suffix(&[0])?;
        let mut records = rest.split(|&c| c == 0);
        let k = records.next()?.strip_prefix(b"K ")?;
        if k != key(root, names).as_slice() {
            return None;
        }
        let root_bytes = root.as_os_str().as_encoded_bytes();
        let mut c = WalkCache::default();
        let (mut dirs, mut entries) = (0usize, 0usize);
        let mut ended = false;
        while let Some(r) = records.next() {
            if ended {
                return None;
            }
            if let Some(counts) = r.strip_prefix(b"C ") {
                let mut f = counts.splitn(2, |&c| c == b' ');
                ended = decimal(f.next()?) == Some(dirs as u128) && decimal(f.next()?) == Some(entries as u128);
                if !ended {
                    return None;
                }
                continue;
            }
            let r = r.strip_prefix(b"D ")?;
            let mut f = r.splitn(7, |&c| c == b' ');
            let dev = u64::try_from(decimal(f.next()?)?).ok()?;
            let ino = u64::try_from(decimal(f.next()?)?).ok()?;
            let ctime = signed_decimal(f.next()?)?;
            let read = signed_decimal(f.next()?)?;
            let depth = usize::try_from(decimal(f.next()?)?).ok()?;
            let n = usize::try_from(decimal(f.next()?)?).ok()?;
            // Below the root: `depth` names, each one a plain name (no empty one, no `.` or `..`:
            // nothing climbs, and no path is spelled two ways).
            let rel = f.next()?;
            let parts = if rel.is_empty() { 0 } else { rel.split(|&c| c == b'/').try_fold(0usize, |n, part| plain_name(part).then_some(n + 1))? };
            if parts != depth {
                return None;
            }
            let mut path = Vec::with_capacity(root_bytes.len() + 1 + rel.len());
            path.extend_from_slice(root_bytes);
            if depth > 0 {
                if !path.ends_with(b"/") {
                    path.push(b'/');
                }
                path.extend_from_slice(rel);
            }
            let mut l = Listing { path: path_from_bytes(path)?, depth, id: (dev, ino), ctime_ns: Some(ctime), read_ns: read, entries: Vec::with_capacity(n.min(1024)) };
            for _ in 0..n {
                let e = records.next()?;
                let (dir, name) = match e.split_first()? {
                    (b'd', rest) => (true, rest.strip_prefix(b" ")?),
                    (b'o', rest) => (false, rest.strip_prefix(b" ")?),
                    _ => return None,
                };
                if !plain_name(name) {
                    return None;
                }
                l.entries.push(Entry { name: OsStr::from_encoded_bytes_checked(name)?.to_os_string(), dir });
                entries += 1;
            }
            dirs += 1;
            if !c.dirs.insert(ByPath(l)) {
                return None;
            }
        }
        ended.then_some(c)
    }
}

/// A directory entry's name as a record may hold it: not empty, not `.` or `..`, no `/`.
fn plain_name(b: &[u8]) -> bool {
    !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/')
}


/// A path from its bytes (as `as_encoded_bytes` gives them on this platform): on Unix without a
/// copy, elsewhere by [`FromEncoded`]'s rule.
fn path_from_bytes(b: Vec<u8>) -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(OsString::from_vec(b)))
    }
    #[cfg(not(unix))]
    {
        OsStr::from_encoded_bytes_checked(&b).map(PathBuf::from)
    }
}

/// `OsStr` from bytes that came from `as_encoded_bytes` of a path on this platform.
trait FromEncoded {
    fn from_encoded_bytes_checked(b: &[u8]) -> Option<&OsStr>;
}

impl FromEncoded for OsStr {
    fn from_encoded_bytes_checked(b: &[u8]) -> Option<&OsStr> {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            Some(OsStr::from_bytes(b))
        }
        #[cfg(not(unix))]
        {
            std::str::from_utf8(b).ok().map(OsStr::new)
        }
    }
}


/// The records of `root`'s earlier walks in `dir`, or `None` (none, unusable, or `dir` not a
/// private directory of this user).
#[cfg(target_os = "linux")]
#[must_use]
pub fn load(dir: &Path, root: &Path, names: &[&str]) -> Option<WalkCache> {
    WalkCache::decode(root, names, &load_record(dir, &record_name(root, names))?)
}

/// Writes `root`'s records into `dir` (made private to this user when missing): written whole
/// under a temporary name and renamed into place, nothing followed through a link.
///
/// # Errors
/// Why nothing was written (the next launch walk then reads what was not recorded before, within
/// its budget).
#[cfg(target_os = "linux")]
pub fn save<'a>(dir: &Path, root: &Path, names: &[&str], listings: impl IntoIterator<Item = &'a Listing>) -> Result<(), String> {
    let bytes = WalkCache::encode(root, names, listings).ok_or_else(|| format!("more than {MAX_RECORDED_DIRS} directories"))?;
    save_record(dir, &record_name(root, names), &bytes)
}


#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_os = "linux")]
    use crate::guard::records::{change_time_kept_at, keeps_change_times, KEPT_AFTER_PRUNE, MAX_RECORD_FILES};

    #[cfg(unix)]
    fn listing(root: &Path, rel: &str, entries: &[(&str, bool)]) -> Listing {
        // Joined name by name, as the walk makes its paths (a record is found by its path's bytes).
        let path = rel.split('/').filter(|c| !c.is_empty()).fold(root.to_path_buf(), |p, c| p.join(c));
        let depth = Path::new(rel).components().count();
        Listing { path, depth, id: (7, 100 + depth as u64), ctime_ns: Some(1_000), read_ns: 10_000_000_000, entries: entries.iter().map(|(n, d)| Entry { name: (*n).into(), dir: *d }).collect() }
    }

    // The walk's records are kept on Linux only (they hold by change times; `/w/ws` is no
    // absolute path on Windows).
    #[cfg(unix)]
    #[test]
    fn records_read_back_exactly_and_nothing_else_reads() {
        let root = Path::new("/w/ws");
        let names = [".git", ".vscode"];
        let ls = vec![
            listing(root, "", &[("a", true), ("b c\nd", true)]),
            listing(root, "a", &[(".git", true), ("x", true)]),
            listing(root, "a/x", &[(".vscode", false)]),
            listing(root, "b c\nd", &[]),
            // Not reachable from the root through the listings: not written.
            listing(root, "gone", &[("y", true)]),
        ];
        let b = WalkCache::encode(root, &names, &ls).unwrap();
        let c = WalkCache::decode(root, &names, &b).unwrap();
        assert_eq!(c.len(), 4);
        for l in &ls[..4] {
            assert_eq!(c.get(&l.path), Some(l));
        }
        assert!(c.get(&root.join("gone")).is_none());
        // Another root, other names: another walk's records.
        assert!(WalkCache::decode(Path::new("/w/other"), &names, &b).is_none());
        assert!(WalkCache::decode(root, &[".git"], &b).is_none());
        // Every cut, and every byte changed to another in a field, is refused or reads the same.
        for n in 0..b.len() {
            assert!(WalkCache::decode(root, &names, &b[..n]).is_none(), "cut at {n}");
        }
        let mut longer = b.clone();
        longer.extend_from_slice(b"D 1 2 3 4 1 0 z\0");
        assert!(WalkCache::decode(root, &names, &longer).is_none());
        // A directory recorded twice (counts made to match): refused, whichever comes first.
        let twice = String::from_utf8_lossy(&b).replacen("C 4 5", "D 7 101 1000 10000000000 1 0 a\0C 5 5", 1);
        assert_ne!(twice.as_bytes(), &b[..]);
        assert!(WalkCache::decode(root, &names, twice.as_bytes()).is_none());
        for bad in [&b"D 7 100 1000 10000000000 1 0 ../x\0"[..], b"D 7 100 1000 10000000000 0 0 /abs\0", b"D 7 100 1000 10000000000 2 0 a\0", b"D 7 100 1000 1 1 1 q\0o a/b\0"] {
            let mut edited = b.clone();
            let at = edited.windows(2).rposition(|w| w == b"C ").unwrap();
            edited.splice(at..at, bad.iter().copied());
            assert!(WalkCache::decode(root, &names, &edited).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_listing_holds_only_for_the_same_inode_and_change_time_recorded_long_enough_after_it() {
        let l = Listing { path: "/w".into(), depth: 0, id: (1, 2), ctime_ns: Some(5_000_000_000), read_ns: 8_000_000_000, entries: Vec::new() };
        assert!(l.holds(&DirState { id: (1, 2), ctime_ns: Some(5_000_000_000) }));
        assert!(!l.holds(&DirState { id: (1, 3), ctime_ns: Some(5_000_000_000) }), "another directory at the path");
        assert!(!l.holds(&DirState { id: (1, 2), ctime_ns: Some(5_000_000_001) }), "changed");
        assert!(!l.holds(&DirState { id: (1, 2), ctime_ns: Some(4_000_000_000) }), "changed, with a clock set back");
        let racy = Listing { read_ns: 6_500_000_000, ..l.clone() };
        assert!(!racy.holds(&DirState { id: (1, 2), ctime_ns: Some(5_000_000_000) }), "read within the racy window of its last change");
        let none = Listing { id: (0, 0), ..l };
        assert!(!none.holds(&DirState { id: (0, 0), ctime_ns: Some(5_000_000_000) }));
    }

    /// The listings of a walk as if it had read each directory long after its last change.
    fn aged(mut w: NestedWalk) -> Vec<Listing> {
        for l in &mut w.listings {
            // Windows has no change time: nothing holds there, every directory is read again.
            l.read_ns = l.ctime_ns.unwrap_or(0) + 3 * RACY_WINDOW_NS;
        }
        w.listings
    }

    #[cfg(unix)]
    fn cache_of<'a>(root: &Path, names: &[&str], ls: impl IntoIterator<Item = &'a Listing>) -> WalkCache {
        WalkCache::decode(root, names, &WalkCache::encode(root, names, ls).unwrap()).unwrap()
    }

    // A record holds by a directory's change time, which Windows does not have.
    #[cfg(unix)]
    #[test]
    fn a_recorded_directory_is_not_read_again_nor_charged_and_a_changed_one_is_read() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        for p in ["a/b/.git", "x/y"] {
            std::fs::create_dir_all(ws.join(p)).unwrap();
        }
        let names = [".git", ".vscode"];
        let first = walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(None));
        assert_eq!((first.from_records, first.found.len()), (0, 1));
        let cache = cache_of(&ws, &names, &aged(first));
        let again = walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(Some(&mut cache.clone())));
        assert_eq!(again.from_records, again.listings.len(), "every directory held by its record");
        assert_eq!(again.found, vec![(ws.join("a/b/.git"), true)]);
        // A flood in a recorded directory: read whatever its size (the budget is for what no
        // walk has seen), and what it holds is found.
        for i in 0..300 {
            std::fs::write(ws.join(format!("x/f{i}")), "").unwrap();
        }
        std::fs::create_dir_all(ws.join("x/repo/.git")).unwrap();
        let flooded = walk_nested(&ws, &names, 10, Known::Launch(Some(&mut cache.clone())));
        assert!(flooded.stopped.is_none());
        assert_eq!(flooded.found, vec![(ws.join("a/b/.git"), true), (ws.join("x/repo/.git"), true)]);
        // Without records the same budget stops in it.
        assert!(walk_nested(&ws, &names, 10, Known::Launch(None)).stopped.is_some());
        // A directory that is not the recorded one (same path, another inode) is read.
        std::fs::rename(ws.join("a"), ws.join("a-old")).unwrap();
        std::fs::create_dir_all(ws.join("a/b/.vscode")).unwrap();
        let replaced = walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(Some(&mut cache.clone())));
        assert!(replaced.found.contains(&(ws.join("a/b/.vscode"), true)) && !replaced.found.contains(&(ws.join("a/b/.git"), true)));
    }

    #[cfg(unix)]
    #[test]
    fn the_walk_after_the_run_reads_what_no_longer_holds_and_what_is_new() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        for p in ["a/b/c", "x/y", "quiet/q1/q2"] {
            std::fs::create_dir_all(ws.join(p)).unwrap();
        }
        let names = [".git", ".vscode", ".bashrc"];
        let launch = aged(walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(None)));
        assert!(launch.iter().any(|l| l.path == ws && l.depth == 0) && launch.iter().any(|l| l.path == ws.join("a/b/c") && l.depth == 3));
        // The run: a repository deep in a known directory whose mtime is then set back (its
        // ctime cannot be), a new subtree holding a .vscode, and x moved under a.
        std::fs::create_dir_all(ws.join("a/b/c/.git/hooks")).unwrap();
        let c = std::ffi::CString::new(ws.join("a/b/c").as_os_str().as_encoded_bytes()).unwrap();
        let old = [libc::timespec { tv_sec: 1_000_000, tv_nsec: 0 }, libc::timespec { tv_sec: 1_000_000, tv_nsec: 0 }];
        // SAFETY: a valid C string and two timespecs.
        assert_eq!(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), old.as_ptr(), 0) }, 0);
        std::fs::create_dir_all(ws.join("new/n1/.vscode")).unwrap();
        std::fs::rename(ws.join("x"), ws.join("a/x")).unwrap();
        std::fs::write(ws.join("a/x/y/.bashrc"), "id\n").unwrap();
        let after = walk_nested(&ws, &names, NESTED_ENTRIES, Known::AfterRun(&launch));
        let found: Vec<PathBuf> = after.found.iter().map(|(p, _)| p.strip_prefix(&ws).unwrap().to_path_buf()).collect();
        assert_eq!(found, vec![PathBuf::from("a/b/c/.git"), PathBuf::from("a/x/y/.bashrc"), PathBuf::from("new/n1/.vscode")]);
        // What did not change was not read again.
        assert!(!after.listings.iter().any(|l| l.path.starts_with(ws.join("quiet"))));
        // Recorded together, the launch's and the after-run walk's listings describe the tree as
        // it is now: a later launch finds what the run made without reading anything recorded.
        let after = aged(after);
        let recorded = cache_of(&ws, &names, launch.iter().chain(&after));
        let next = walk_nested(&ws, &names, 0, Known::Launch(Some(&mut recorded.clone())));
        assert!(next.stopped.is_none());
        let found: Vec<PathBuf> = next.found.iter().map(|(p, _)| p.strip_prefix(&ws).unwrap().to_path_buf()).collect();
        assert_eq!(found, vec![PathBuf::from("a/b/c/.git"), PathBuf::from("a/x/y/.bashrc"), PathBuf::from("new/n1/.vscode")]);
        assert!(recorded.get(&ws.join("x")).is_none(), "x moved away");
    }

    #[test]
    fn directories_git_discovers_as_repositories_are_found_and_not_entered() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        let names = [".git", ".vscode"];
        // A bare repository at depth 1, one at the walk's last depth (its objects/ and refs/ are
        // not descended into, only marked), a commondir one, and look-alikes that are not.
        for (dir, head) in [("store.git", true), ("a/b/c/pkg.git", true), ("nohead", false)] {
            std::fs::create_dir_all(ws.join(dir).join("objects/ab")).unwrap();
            std::fs::create_dir_all(ws.join(dir).join("refs/heads/.vscode")).unwrap();
            if head {
                std::fs::write(ws.join(dir).join("HEAD"), "ref: refs/heads/main\n").unwrap();
            }
        }
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("wt/commondir"), "../store.git\n").unwrap();
        std::fs::create_dir_all(ws.join("headdir/HEAD")).unwrap();
        std::fs::create_dir_all(ws.join("headdir/objects")).unwrap();
        std::fs::create_dir_all(ws.join("headdir/refs")).unwrap();
        let launch = walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(None));
        let rel = |v: &[PathBuf]| v.iter().map(|p| p.strip_prefix(&ws).unwrap().to_path_buf()).collect::<Vec<_>>();
        assert_eq!(rel(&launch.repos), vec![PathBuf::from("a/b/c/pkg.git"), PathBuf::from("store.git"), PathBuf::from("wt")]);
        // Entered all the same (a repository inside one's refs/ is one too; the review of a git
        // directory leaves refs/ to git).
        let found: Vec<PathBuf> = launch.found.iter().map(|(p, _)| p.strip_prefix(&ws).unwrap().to_path_buf()).collect();
        assert_eq!(found, vec![PathBuf::from("nohead/refs/heads/.vscode"), PathBuf::from("store.git/refs/heads/.vscode")]);
        // After a run that gives nohead a HEAD: found as a repository then.
        let launch = aged(launch);
        std::fs::write(ws.join("nohead/HEAD"), "ref: refs/heads/main\n").unwrap();
        let after = walk_nested(&ws, &names, NESTED_ENTRIES, Known::AfterRun(&launch));
        // Windows has no change times: no listing holds, every directory is read again and every
        // repository is found again, the new one among them.
        #[cfg(not(unix))]
        assert_eq!(rel(&after.repos), vec![PathBuf::from("a/b/c/pkg.git"), PathBuf::from("nohead"), PathBuf::from("store.git"), PathBuf::from("wt")]);
        #[cfg(unix)]
        {
            assert_eq!(rel(&after.repos), vec![PathBuf::from("nohead")]);
            // The records keep the marks: a later launch finds all four without reading them.
            let after = aged(after);
            let recorded = cache_of(&ws, &names, launch.iter().chain(&after));
            let next = walk_nested(&ws, &names, 0, Known::Launch(Some(&mut recorded.clone())));
            assert!(next.stopped.is_none());
            assert_eq!(rel(&next.repos), vec![PathBuf::from("a/b/c/pkg.git"), PathBuf::from("nohead"), PathBuf::from("store.git"), PathBuf::from("wt")]);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn records_are_trusted_only_where_the_kernel_keeps_change_times() {
        let with = |t: i64| {
            // SAFETY: a zeroed statfs is a valid value.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            #[allow(clippy::unnecessary_cast)]
            {
                st.f_type = t as _;
            }
            keeps_change_times(&st)
        };
        // ext4, xfs, btrfs, tmpfs, overlayfs.
        for t in [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x794c_7630] {
            assert!(with(t), "{t:#x}");
        }
        // FAT, exFAT, NTFS (ntfs3), FUSE, NFS, 9p, SMB: times from a format, a server or a process.
        for t in [0x4d44, 0x2011_BAB0, 0x7366_746e, 0x6573_5546, 0x6969, 0x0102_1997, 0xFE53_4D42] {
            assert!(!with(t), "{t:#x}");
        }
        // This test's own directory (the suite's filesystems are ones that keep them).
        let d = crate::test_dir();
        assert!(change_time_kept_at(d.path()), "{}", d.path().display());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_record_written_again_replaces_the_old_one_whole() {
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("a/.git")).unwrap();
        let names = [".git"];
        let dir = d.path().join("walks");
        let first = aged(walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(None)));
        save(&dir, &ws, &names, &first).unwrap();
        std::fs::create_dir_all(ws.join("b/c/.git")).unwrap();
        let second = aged(walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(None)));
        assert!(second.len() > first.len());
        // Swapped with the old record (which is removed), not renamed over it: the new one reads
        // back, and nothing else is left in the directory.
        save(&dir, &ws, &names, &second).unwrap();
        assert_eq!(load(&dir, &ws, &names).map(|c| c.len()), Some(second.len()));
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from(record_name(&ws, &names))]);
        // The record removed meanwhile: written as a new one.
        std::fs::remove_file(dir.join(record_name(&ws, &names))).unwrap();
        save(&dir, &ws, &names, &first).unwrap();
        assert_eq!(load(&dir, &ws, &names).map(|c| c.len()), Some(first.len()));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn records_are_kept_only_in_a_private_directory_of_this_user() {
        use std::os::unix::fs::PermissionsExt;
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("a/.git")).unwrap();
        let names = [".git"];
        let ls = aged(walk_nested(&ws, &names, NESTED_ENTRIES, Known::Launch(None)));
        let dir = d.path().join("state/walks");
        save(&dir, &ws, &names, &ls).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(load(&dir, &ws, &names).map(|c| c.len()), Some(ls.len()));
        // Open to others: not used, not written.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(load(&dir, &ws, &names).is_none() && save(&dir, &ws, &names, &ls).is_err());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // The record a link to another file: not followed.
        let file = dir.join(record_name(&ws, &names));
        std::fs::rename(&file, dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &file).unwrap();
        assert!(load(&dir, &ws, &names).is_none());
        // Too many records: the oldest go when a new root is recorded.
        for i in 0..=MAX_RECORD_FILES {
            std::fs::write(dir.join(format!("walk-old{i:04}")), "x").unwrap();
        }
        save(&dir, &ws.join("a"), &names, &[]).unwrap();
        let left = std::fs::read_dir(&dir).unwrap().count();
        assert!(left <= KEPT_AFTER_PRUNE + 3, "{left} left");
        assert!(dir.join(record_name(&ws.join("a"), &names)).exists());
        // The directory a link: not followed.
        let link = d.path().join("state/link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(load(&link, &ws, &names).is_none() && save(&link, &ws, &names, &ls).is_err());
    }
}
