//! The walk service's git listings: what git lists in a worktree for a hook manager that reads
//! its configuration wherever git lists one (lint-staged, [`super::protected::GitListing`]),
//! kept by the service while nothing that could change it changed.
//!
//! git's answer (`git ls-files --cached --others` for the names, [`super::gitoracle::listed_files`])
//! is asked at launch and again after the run. Its cost follows the worktree: git reads every
//! directory it does not ignore, about 0.4 s per listing in a repository of 20 000 directories,
//! twice per run. The answer depends only on
//!
//! - which entries the worktree's directories hold (a file of one of the names made, removed or
//!   moved; a directory made, removed or moved, which may hold one; a `.gitignore` or `.git`
//!   made, removed or moved),
//! - what the `.gitignore` files say,
//! - the index and the repository's own configuration (git runs with no system or global
//!   configuration, no `GIT_*` variable), and the git binary.
//!
//! So the service keeps an answer while none of those changed: the kernel watches every
//! directory of the worktree but the `.git` ones (`inotify`, each watch placed before the
//! directory is read), and reports every entry made, removed or moved in them; the index, the
//! configuration files, every `.gitignore` and git itself are stamped (device, inode, size,
//! modification and change time: no command can set a change time back), a `.git` directory by
//! its device and inode only (what git writes in it at a fetch changes nothing listed; its
//! replacement is an entry named `.git` reported by its parent's watch). A kept answer is given
//! again while every stamp holds and the kernel reported nothing that could change it
//! ([`effect`]). A file of the names made, removed or moved, or a directory made or removed, is
//! listed again by itself (git asked about that path, or below that directory: what it lists
//! elsewhere cannot have changed; a directory made is watched first); anything else — a
//! directory moved, a `.gitignore` or `.git` made, removed, moved or changed, the index or the
//! configuration changed, a lost report, more than a few places at once — is the whole worktree
//! listed again, with everything watched and stamped again first. A stamp whose change time lies
//! within [`RACY_WINDOW_NS`] of when it was taken could miss a change in the same clock tick: the
//! answer is then given but not kept.
//!
//! Not kept at all (git is asked every time, as without a service): a worktree with a mount point
//! below it (the kernel's reports are per filesystem), more than [`MAX_LISTED_DIRS`]
//! directories or more `.gitignore` files than [`MAX_IGNORE_FILES`] (or more than the user's
//! watches allow: then it is not walked again either), a `.gitignore` that is not
//! a regular file, a repository configuration that includes other files (their changes are not
//! watched), or a filesystem whose change times are not kept. A lost report (the kernel's queue
//! overflowed) or a change of the mount table forgets the answer.
//!
//! Trust is the service's ([`super::walkd`]): the answer is what the host's git printed, read by
//! a process of the user that no sandboxed command can write to.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::records::{now_ns, time_ns, RACY_WINDOW_NS};

/// The most directories of one worktree the service watches for its listing.
pub const MAX_LISTED_DIRS: usize = 100_000;

/// The most `.gitignore` files of one worktree whose listing is kept.
pub const MAX_IGNORE_FILES: usize = 10_000;

/// What is watched in each directory: entries made, removed or moved, and the directory itself
/// removed or moved.
const MASK: u32 = libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_ONLYDIR | libc::IN_DONT_FOLLOW;

/// What a file's `lstat` says that any change to it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    id: (u64, u64),
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// The stamp of what `m` (a file's `lstat`) describes.
fn stamp_of(m: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    Stamp { id: (m.dev(), m.ino()), size: m.size(), mtime_ns: time_ns(m.mtime(), m.mtime_nsec()), ctime_ns: time_ns(m.ctime(), m.ctime_nsec()) }
}

/// The stamp a kept listing depends on for `p` (no link followed; `None` when there is no file
/// there): a directory named `.git` by its identity only
/// (what git writes in it, `FETCH_HEAD` at each fetch, changes nothing git lists: the index and
/// the configuration are stamped by themselves, and the directory's replacement is reported by
/// its parent's watch as an entry named `.git`); anything else by its whole stamp (a `.git`
/// file names the git directory: rewritten, it may name another).
fn kept_stamp(p: &Path) -> Option<Stamp> {
    let m = std::fs::symlink_metadata(p).ok()?;
    let s = stamp_of(&m);
    let dir = m.is_dir() && p.file_name().is_some_and(|n| n == ".git");
    Some(if dir { Stamp { id: s.id, size: 0, mtime_ns: 0, ctime_ns: 0 } } else { s })
}

/// Reads every report queued on the `inotify` descriptor `fd` (non-blocking) and gives each to
/// `each`: its watch, its mask and the name of the entry it concerns (empty for the directory
/// itself). The walk service's roots and listings read their queues with it.
pub(crate) fn read_events(fd: i32, mut each: impl FnMut(i32, u32, &[u8])) {
    let mut buf = vec![0u8; 64 << 10];
    let head = std::mem::size_of::<libc::inotify_event>();
    loop {
        // SAFETY: read into our buffer of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        let Ok(n) = usize::try_from(n) else { break };
        if n == 0 {
            break;
        }
        let mut off = 0usize;
        while off + head <= n {
            // SAFETY: the kernel wrote a whole event here; read unaligned.
            let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf.as_ptr().add(off).cast()) };
            let name = &buf[off + head..(off + head + ev.len as usize).min(n)];
            let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
            off += head + ev.len as usize;
            each(ev.wd, ev.mask, name);
        }
    }
}

/// What a report of the kernel about a watched directory calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Nothing git lists for the names can have changed.
    Nothing,
    /// Anything may have: git lists the whole worktree again (a lost report, a directory moved
    /// in, out or within the worktree — the paths of what lies below it changed —, a
    /// `.gitignore` or a `.git` made, removed or moved, the worktree itself removed).
    Whole,
    /// A directory made: watched, with everything below it, and listed there.
    Made(PathBuf),
    /// A directory removed: listed there again (the index may still list files below it).
    Removed(PathBuf),
    /// A file of one of the names made, removed or moved: listed at that path again.
    File(PathBuf),
    /// The watch is gone (its directory was removed: its parent's report says what changed).
    Unwatched,
}

/// What a report of the kernel about the watched directory `dir` (`root`: the worktree itself)
/// calls for: `mask`, and the name of the entry it concerns. A file of another name made,
/// removed or renamed changes nothing git lists for `names`.
#[must_use]
pub(crate) fn effect(mask: u32, name: &[u8], dir: &Path, root: bool, names: &[String]) -> Effect {
    let entry = || dir.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name));
    if mask & (libc::IN_Q_OVERFLOW | libc::IN_UNMOUNT | libc::IN_MOVE_SELF) != 0 {
        return Effect::Whole;
    }
    if mask & libc::IN_IGNORED != 0 {
        return Effect::Unwatched;
    }
    if mask & libc::IN_DELETE_SELF != 0 {
        return if root { Effect::Whole } else { Effect::Nothing };
    }
    if mask & (libc::IN_MOVED_FROM | libc::IN_MOVED_TO) != 0 && mask & libc::IN_ISDIR != 0 {
        return Effect::Whole;
    }
    if name.eq_ignore_ascii_case(b".gitignore") || name.eq_ignore_ascii_case(b".git") {
        return Effect::Whole;
    }
    if mask & libc::IN_ISDIR != 0 {
        return if mask & libc::IN_CREATE != 0 { Effect::Made(entry()) } else { Effect::Removed(entry()) };
    }
    if names.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(name)) {
        return Effect::File(entry());
    }
    Effect::Nothing
}

/// The most directories made or removed, and files of the names, that git lists again by
/// themselves (beyond: the whole worktree): each directory is one pathspec per name.
const MAX_AREAS: usize = 8;
const MAX_FILES: usize = 64;

/// The paths whose stamps a kept answer depends on besides the `.gitignore` files: the `.git`
/// entry (a file naming the git directory), the index, the repository's configuration files and
/// the file naming its common directory, and git itself. `None` when the worktree's git
/// directory cannot be found.
fn stamped_paths(worktree: &Path) -> Option<Vec<PathBuf>> {
    let dotgit = worktree.join(".git");
    let gd = super::gitindex::git_dir(&dotgit)?;
    let common = super::gitindex::common_dir(&gd);
    let mut out = vec![dotgit, gd.join("index"), gd.join("config"), gd.join("config.worktree"), gd.join("commondir"), common.join("config")];
    out.push(super::gitoracle::trusted_git()?.to_path_buf());
    Some(out)
}

/// Whether the repository's configuration files (`paths`' existing ones among them) include
/// other files, or cannot be read by git: then their changes would not be seen.
fn includes_others(paths: &[PathBuf]) -> bool {
    paths.iter().filter(|p| p.file_name().is_some_and(|n| n == "config" || n == "config.worktree")).filter_map(|p| std::fs::read(p).ok()).any(|content| {
        super::gitoracle::config_list(&content).map_or(true, |list| {
            list.iter().any(|(k, _)| {
                let k = k.to_ascii_lowercase();
                k.starts_with("include.") || k.starts_with("includeif.")
            })
        })
    })
}

/// A mount point lies strictly below `root` (`/proc/self/mountinfo`'s fifth field, its octal
/// escapes decoded); `true` when the table cannot be read.
fn mount_below(root: &Path) -> bool {
    let Ok(info) = std::fs::read("/proc/self/mountinfo") else { return true };
    info.split(|b| *b == b'\n').filter_map(|l| l.split(|b| *b == b' ').nth(4)).any(|field| {
        let p = crate::host::mount_point(field);
        p != root && p.starts_with(root)
    })
}

/// One worktree's listing, as the service keeps it.
pub(crate) struct Lister {
    /// The worktree (canonical).
    pub worktree: PathBuf,
    /// The names listed.
    pub names: Vec<String>,
    /// The worktree's device and inode when first asked about.
    id: Option<(u64, u64)>,
    /// The kernel's reports about the watched directories.
    ino: Option<OwnedFd>,
    /// Watch → the directory it watches.
    wds: std::collections::HashMap<i32, PathBuf>,
    /// What the reports read since the answer was kept call for.
    pending: Vec<Effect>,
    /// How many times the whole worktree was listed (the tests).
    wholes: u64,
    /// The worktree has more directories than may be watched (or the kernel refused a watch):
    /// git is asked every time, without watching anything (a walk that stops at the bound
    /// would cost as much again as git's listing, for nothing).
    too_large: bool,
    /// What the kept answer depends on.
    stamps: Vec<(PathBuf, Option<Stamp>)>,
    /// The kept answer.
    files: Option<Vec<PathBuf>>,
    /// When it was last asked about.
    pub used: Instant,
    /// How recent a stamp's change time may be for the answer to be kept ([`RACY_WINDOW_NS`];
    /// shorter in the tests).
    racy_ns: i128,
}

impl Lister {
    pub(crate) fn new(worktree: &Path, names: &[String]) -> Lister {
        Lister { worktree: worktree.to_path_buf(), names: names.to_vec(), id: None, ino: None, wds: std::collections::HashMap::new(), pending: Vec::new(), wholes: 0, too_large: false, stamps: Vec::new(), files: None, used: Instant::now(), racy_ns: RACY_WINDOW_NS }
    }

    /// Forgets the kept answer and every watch.
    pub(crate) fn forget(&mut self) {
        self.files = None;
        self.ino = None;
        self.wds.clear();
        self.pending.clear();
        self.stamps.clear();
    }

    /// How many directories are watched.
    pub(crate) fn watched(&self) -> usize {
        self.wds.len()
    }

    /// The descriptor the kernel reports on, while something is watched.
    pub(crate) fn fd(&self) -> Option<i32> {
        self.ino.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads the kernel's reports: what they call for is kept for the next request; on one
    /// that calls for a whole listing the answer is forgotten. Returns whether one calls for
    /// anything.
    pub(crate) fn drain(&mut self) -> bool {
        let Some(fd) = self.fd() else { return false };
        let mut any = false;
        read_events(fd, |wd, mask, name| {
            let e = match self.wds.get(&wd) {
                Some(dir) => effect(mask, name, dir, *dir == self.worktree, &self.names),
                // (An overflow has no watch; a report of a watch already gone is not ours.)
                None if mask & libc::IN_Q_OVERFLOW != 0 => Effect::Whole,
                None => Effect::Nothing,
            };
            match e {
                Effect::Nothing => {}
                Effect::Unwatched => {
                    self.wds.remove(&wd);
                }
                e => {
                    any = true;
                    if e == Effect::Whole {
                        self.files = None;
                    }
                    if self.files.is_some() {
                        self.pending.push(e);
                    }
                }
            }
        });
        any
    }

    /// Every stamp as it was taken.
    fn stamps_hold(&self) -> bool {
        self.stamps.iter().all(|(p, s)| kept_stamp(p) == *s)
    }

    /// What git lists now ([`super::gitoracle::listed_files`]): the kept answer while it holds,
    /// else git's, kept where it can be, with at most `max_watches` directories watched.
    ///
    /// # Errors
    /// git's ([`super::gitoracle::listed_files`]).
    pub(crate) fn list(&mut self, max_watches: usize) -> Result<Vec<PathBuf>, String> {
        self.used = Instant::now();
        let id = super::nested::dir_state(&self.worktree).map(|s| s.id);
        if id != self.id {
            self.forget();
            self.id = id;
        }
        self.drain();
        if self.files.is_some() && self.stamps_hold() {
            if let Some(files) = self.relist(max_watches.min(MAX_LISTED_DIRS)) {
                return Ok(files);
            }
        }
        self.forget();
        self.wholes += 1;
        // Everything watched, then stamped, then git asked: a change after its watch or stamp
        // is reported or shows in the stamp; one before is what git reads.
        let keepable = if self.too_large { None } else { self.watch_tree(max_watches.min(MAX_LISTED_DIRS)) };
        let taken = now_ns();
        let stamps: Option<Vec<(PathBuf, Option<Stamp>)>> = keepable.and_then(|ignores| {
            let mut paths = stamped_paths(&self.worktree)?;
            if includes_others(&paths) || mount_below(&self.worktree) || !super::records::change_time_kept_at(&self.worktree) {
                return None;
            }
            paths.extend(ignores);
            Some(paths.into_iter().map(|p| {
                let s = kept_stamp(&p);
                (p, s)
            }).collect())
        });
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let listed = super::gitoracle::listed_files(&self.worktree, &names);
        let files = match listed {
            Ok(f) => f,
            Err(e) => {
                self.forget();
                return Err(e);
            }
        };
        let racy_ns = self.racy_ns;
        let racy = |s: &Option<Stamp>| s.is_some_and(|s| s.ctime_ns >= taken - racy_ns);
        match stamps {
            Some(stamps) if !self.drain() && !stamps.iter().any(|(_, s)| racy(s)) => {
                self.stamps = stamps;
                self.files = Some(files.clone());
            }
            _ => self.forget(),
        }
        Ok(files)
    }

    /// The kept answer with what the reports since call for applied: the directories made
    /// watched, and git asked about those and the ones removed and about the files of the names
    /// made, removed or moved, by themselves. `None` when that cannot be done so (too many of
    /// them, a directory made that cannot be watched, git refusing): the whole worktree is then
    /// listed again.
    fn relist(&mut self, max: usize) -> Option<Vec<PathBuf>> {
        let pending = std::mem::take(&mut self.pending);
        if pending.is_empty() {
            return self.files.clone();
        }
        let (mut dirs, mut files): (Vec<PathBuf>, Vec<PathBuf>) = (Vec::new(), Vec::new());
        let mut made: Vec<PathBuf> = Vec::new();
        for e in pending {
            match e {
                Effect::Made(p) => {
                    made.push(p.clone());
                    dirs.push(p);
                }
                Effect::Removed(p) => dirs.push(p),
                Effect::File(p) => files.push(p),
                Effect::Whole | Effect::Nothing | Effect::Unwatched => return None,
            }
        }
        // A directory inside another one asked about is covered by it.
        dirs.sort();
        dirs.dedup_by(|b, a| b.starts_with(a));
        files.retain(|f| !dirs.iter().any(|d| f.starts_with(d)));
        files.sort();
        files.dedup();
        if dirs.len() > MAX_AREAS || files.len() > MAX_FILES {
            return None;
        }
        // Watched before git reads them (a change after the watch is reported).
        let raw = self.fd()?;
        let mut ignores = Vec::new();
        made.sort();
        made.dedup_by(|b, a| b.starts_with(a));
        for d in &made {
            ignores.extend(self.watch_below(raw, d, max, true)?);
        }
        let taken = now_ns();
        let new_stamps: Vec<(PathBuf, Option<Stamp>)> = ignores.into_iter().map(|p| {
            let s = kept_stamp(&p);
            (p, s)
        }).collect();
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let listed = super::gitoracle::listed_files_in(&self.worktree, &names, &dirs, &files).ok()?;
        // The index or a `.gitignore` changed while git read them: what it lists elsewhere may
        // have too (the whole worktree, then).
        if !self.stamps_hold() {
            return None;
        }
        let mut out: std::collections::BTreeSet<PathBuf> = self.files.take()?.into_iter().filter(|f| !dirs.iter().any(|d| f.starts_with(d)) && !files.contains(f)).collect();
        out.extend(listed);
        let out: Vec<PathBuf> = out.into_iter().collect();
        if new_stamps.iter().any(|(_, s)| s.is_some_and(|s| s.ctime_ns >= taken - self.racy_ns)) {
            // Answered, not kept: a `.gitignore` just made could change in its clock tick.
            self.forget();
            return Some(out);
        }
        self.stamps.extend(new_stamps);
        self.files = Some(out.clone());
        Some(out)
    }

    /// Watches every directory of the worktree but those named `.git` (each before it is read),
    /// with a fresh queue: the `.gitignore` files found, or `None` when the answer cannot be
    /// kept (more than `max` directories, one that cannot be watched or read, a `.gitignore`
    /// that is not a regular file, too many of them).
    fn watch_tree(&mut self, max: usize) -> Option<Vec<PathBuf>> {
        // SAFETY: inotify_init1 with valid flags; the descriptor is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        self.ino = Some(fd);
        let root = self.worktree.clone();
        self.watch_below(raw, &root, max, false)
    }

    /// Watches `top` and every directory below it but those named exactly `.git` (as git skips
    /// them; a `.GIT` is listed where the case matters), each before it is read: the `.gitignore`
    /// files found, or `None` (see [`Lister::watch_tree`]). `gone_ok`: a `top` removed since it
    /// was reported made is nothing to watch (its removal is reported too).
    fn watch_below(&mut self, raw: i32, top: &Path, max: usize, gone_ok: bool) -> Option<Vec<PathBuf>> {
        let mut ignores = Vec::new();
        let mut queue = vec![top.to_path_buf()];
        while let Some(dir) = queue.pop() {
            if self.wds.len() >= max || self.ignores_count() + ignores.len() > MAX_IGNORE_FILES {
                self.too_large = true;
                return None;
            }
            let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
            // SAFETY: inotify_add_watch on our descriptor with a NUL-terminated path.
            let wd = unsafe { libc::inotify_add_watch(raw, c.as_ptr(), MASK) };
            if wd < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                if gone_ok && dir == top && e == Some(libc::ENOENT) {
                    return Some(ignores);
                }
                // The user's watches are used up: as too large.
                self.too_large |= e == Some(libc::ENOSPC);
                return None;
            }
            self.wds.insert(wd, dir.clone());
            for e in std::fs::read_dir(&dir).ok()? {
                let e = e.ok()?;
                let name = e.file_name();
                let t = e.file_type().ok()?;
                if t.is_dir() {
                    if name != ".git" {
                        queue.push(e.path());
                    }
                } else if name.eq_ignore_ascii_case(".gitignore") {
                    if !t.is_file() {
                        return None;
                    }
                    ignores.push(e.path());
                }
            }
        }
        Some(ignores)
    }

    /// How many `.gitignore` files the kept answer depends on.
    fn ignores_count(&self) -> usize {
        self.stamps.iter().filter(|(p, _)| p.file_name().is_some_and(|n| n.eq_ignore_ascii_case(".gitignore"))).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["package.json".into(), ".lintstagedrc".into()]
    }

    #[test]
    fn each_report_calls_for_what_it_could_change() {
        let n = names();
        let d = Path::new("/w/a");
        let e = |p: &str| d.join(p);
        for (mask, name, root, want) in [
            (libc::IN_CREATE, "main.rs", false, Effect::Nothing),
            (libc::IN_MOVED_TO, "x.tmp", false, Effect::Nothing),
            (libc::IN_DELETE, "notes.txt", false, Effect::Nothing),
            (libc::IN_CREATE, "package.json", false, Effect::File(e("package.json"))),
            (libc::IN_MOVED_TO, "PACKAGE.JSON", false, Effect::File(e("PACKAGE.JSON"))),
            (libc::IN_MOVED_FROM, "package.json", false, Effect::File(e("package.json"))),
            (libc::IN_DELETE, ".lintstagedrc", false, Effect::File(e(".lintstagedrc"))),
            (libc::IN_CREATE, ".gitignore", false, Effect::Whole),
            (libc::IN_MOVED_FROM, ".GitIgnore", false, Effect::Whole),
            (libc::IN_CREATE, ".git", false, Effect::Whole),
            (libc::IN_CREATE | libc::IN_ISDIR, ".Git", false, Effect::Whole),
            (libc::IN_CREATE | libc::IN_ISDIR, "build", false, Effect::Made(e("build"))),
            (libc::IN_DELETE | libc::IN_ISDIR, "build", false, Effect::Removed(e("build"))),
            (libc::IN_MOVED_TO | libc::IN_ISDIR, "src", false, Effect::Whole),
            (libc::IN_MOVED_FROM | libc::IN_ISDIR, "src", false, Effect::Whole),
            (libc::IN_DELETE_SELF, "", false, Effect::Nothing),
            (libc::IN_DELETE_SELF, "", true, Effect::Whole),
            (libc::IN_MOVE_SELF, "", false, Effect::Whole),
            (libc::IN_IGNORED, "", false, Effect::Unwatched),
            (libc::IN_Q_OVERFLOW, "", false, Effect::Whole),
            (libc::IN_UNMOUNT, "", false, Effect::Whole),
        ] {
            assert_eq!(effect(mask, name.as_bytes(), d, root, &n), want, "{mask:#x} {name}");
        }
    }

    /// The kept answer is git's after every kind of change that changes git's (made between two
    /// requests, as a run or the host makes them), and is kept across requests when nothing did.
    #[test]
    fn a_kept_listing_is_what_git_lists_after_each_change() {
        if super::super::gitoracle::trusted_git().is_none() {
            eprintln!("skipped: no trusted git on PATH");
            return;
        }
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("a/b/c")).unwrap();
        let git = |args: &[&str]| assert!(std::process::Command::new("git").args(args).current_dir(&ws).env("GIT_CONFIG_GLOBAL", "/dev/null").env("GIT_CONFIG_NOSYSTEM", "1").status().unwrap().success());
        git(&["init", "-q"]);
        std::fs::write(ws.join(".gitignore"), "ignored/\n").unwrap();
        std::fs::write(ws.join("package.json"), "{}").unwrap();
        std::fs::create_dir_all(ws.join("ignored")).unwrap();
        std::fs::write(ws.join("ignored/package.json"), "{}").unwrap();
        let n = names();
        let nr: Vec<&str> = n.iter().map(String::as_str).collect();
        let mut l = Lister::new(&ws, &n);
        // A short racy window, waited out after each change: the second request of each step
        // is answered from what was kept.
        l.racy_ns = 30_000_000;
        let settle = || std::thread::sleep(std::time::Duration::from_millis(60));
        let same = |l: &mut Lister, why: &str| {
            let mut got = l.list(1000).expect("a listing");
            let mut want = super::super::gitoracle::listed_files(&ws, &nr).expect("git's listing");
            got.sort();
            want.sort();
            assert_eq!(got, want, "{why}");
        };
        settle();
        same(&mut l, "first");
        assert!(l.files.is_some(), "kept");
        // (why, change, whether git lists the whole worktree again: else only where it changed)
        let steps: &[(&str, &dyn Fn(&Path), bool)] = &[
            ("a config made deep", &|r| std::fs::write(r.join("a/b/c/.lintstagedrc"), "{}").unwrap(), false),
            ("a file of another name made", &|r| std::fs::write(r.join("a/b/notes.txt"), "x").unwrap(), false),
            (
                "a directory made holding one",
                &|r| {
                    std::fs::create_dir_all(r.join("new/x")).unwrap();
                    std::fs::write(r.join("new/x/package.json"), "{}").unwrap();
                },
                false,
            ),
            (
                "a directory named with glob characters made holding one",
                &|r| {
                    std::fs::create_dir_all(r.join("g*[1]?/y")).unwrap();
                    std::fs::write(r.join("g*[1]?/y/package.json"), "{}").unwrap();
                },
                false,
            ),
            ("a subtree moved", &|r| std::fs::rename(r.join("new"), r.join("moved")).unwrap(), true),
            ("the .gitignore rewritten in place", &|r| std::fs::write(r.join(".gitignore"), "moved/\n").unwrap(), true),
            ("the .gitignore removed", &|r| std::fs::remove_file(r.join(".gitignore")).unwrap(), true),
            ("a file added to the index", &|_| git(&["add", "-f", "ignored/package.json", "moved/x/package.json"]), true),
            ("a directory removed whose config the index lists", &|r| std::fs::remove_dir_all(r.join("moved")).unwrap(), false),
            ("a config removed", &|r| std::fs::remove_file(r.join("a/b/c/.lintstagedrc")).unwrap(), false),
            ("a config renamed to another name", &|r| std::fs::rename(r.join("package.json"), r.join("package.json.bak")).unwrap(), false),
            ("and back", &|r| std::fs::rename(r.join("package.json.bak"), r.join("package.json")).unwrap(), false),
            // git skips exactly `.git`: a `.GIT` is an ordinary directory to it, watched here (made,
            // it is listed whole again, as any name `.git` is whatever its case).
            ("a .GIT directory made", &|r| std::fs::create_dir_all(r.join(".GIT/x")).unwrap(), true),
            ("a config made inside it", &|r| std::fs::write(r.join(".GIT/x/package.json"), "{}").unwrap(), false),
            // What git writes in its directory at a fetch lists nothing again; the directory
            // replaced by another lists the whole worktree.
            ("a file git makes in .git", &|r| std::fs::write(r.join(".git/FETCH_HEAD"), "").unwrap(), false),
            (
                "the .git directory replaced by a copy",
                &|r| {
                    std::fs::rename(r.join(".git"), r.join(".git-old")).unwrap();
                    assert!(std::process::Command::new("cp").arg("-a").arg(r.join(".git-old")).arg(r.join(".git")).status().unwrap().success());
                    std::fs::remove_dir_all(r.join(".git-old")).unwrap();
                },
                true,
            ),
            (
                "a directory made and removed, another made deep",
                &|r| {
                    std::fs::create_dir_all(r.join("tmp1/z")).unwrap();
                    std::fs::remove_dir_all(r.join("tmp1")).unwrap();
                    std::fs::create_dir_all(r.join("a/b/c/d/e/f")).unwrap();
                    std::fs::write(r.join("a/b/c/d/e/f/.LINTSTAGEDRC"), "{}").unwrap();
                },
                false,
            ),
        ];
        for (why, change, whole) in steps {
            let before = l.wholes;
            change(&ws);
            settle();
            same(&mut l, why);
            assert!(l.files.is_some(), "{why}: kept");
            assert_eq!(l.wholes > before, *whole, "{why}: the whole worktree listed again");
            same(&mut l, &format!("{why}, asked again"));
        }
    }

    /// With every stamp older than the racy window, an answer is kept: a second request reads no
    /// directory and asks git nothing, and a change to one of the watched entries forgets it.
    #[test]
    fn an_answer_is_kept_until_the_kernel_reports_a_change() {
        if super::super::gitoracle::trusted_git().is_none() {
            eprintln!("skipped: no trusted git on PATH");
            return;
        }
        let d = crate::test_dir();
        let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        assert!(std::process::Command::new("git").args(["init", "-q"]).current_dir(&ws).env("GIT_CONFIG_GLOBAL", "/dev/null").status().unwrap().success());
        std::fs::write(ws.join("a/package.json"), "{}").unwrap();
        let mut l = Lister::new(&ws, &names());
        l.racy_ns = 30_000_000;
        std::thread::sleep(std::time::Duration::from_millis(60));
        let first = l.list(1000).unwrap();
        assert_eq!(first, vec![ws.join("a/package.json")]);
        assert!(l.files.is_some(), "kept: nothing racy, nothing changed");
        assert!(l.watched() >= 3, "{} directories watched", l.watched());
        std::fs::write(ws.join("a/b/notes.txt"), "x").unwrap();
        assert_eq!(l.list(1000).unwrap(), first);
        assert!(l.files.is_some(), "a file of another name changes nothing");
        std::fs::write(ws.join("a/b/package.json"), "{}").unwrap();
        let mut got = l.list(1000).unwrap();
        got.sort();
        assert_eq!(got, vec![ws.join("a/b/package.json"), ws.join("a/package.json")]);
        // Too many directories to watch: answered, not kept.
        let mut small = Lister::new(&ws, &names());
        assert_eq!(small.list(1).unwrap().len(), 2);
        assert!(small.files.is_none() && small.fd().is_none() && small.too_large);
        // ... and not walked again: git's answer, nothing watched.
        std::fs::write(ws.join("a/.lintstagedrc"), "{}").unwrap();
        assert_eq!(small.list(1000).unwrap().len(), 3);
        assert!(small.files.is_none() && small.fd().is_none() && small.watched() == 0);
    }
}
