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
//! modification and change time: no command can set a change time back). A kept answer is given
//! again only when the kernel reported nothing that could change it ([`changes_listing`]) and
//! every stamp still holds; anything else is git asked again, with everything watched and
//! stamped again first. A stamp whose change time lies within [`RACY_WINDOW_NS`] of when it was
//! taken could miss a change in the same clock tick: the answer is then given but not kept.
//!
//! Not kept at all (git is asked every time, as without a service): a worktree with a mount point
//! below it (the kernel's reports are per filesystem), more than [`MAX_LISTED_DIRS`]
//! directories or more `.gitignore` files than [`MAX_IGNORE_FILES`], a `.gitignore` that is not
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

/// The stamp of the file at `p` (no link followed), `None` when there is none.
pub(crate) fn stamp(p: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).ok()?;
    Some(Stamp { id: (m.dev(), m.ino()), size: m.size(), mtime_ns: time_ns(m.mtime(), m.mtime_nsec()), ctime_ns: time_ns(m.ctime(), m.ctime_nsec()) })
}

/// Whether a report of the kernel about a watched directory of the worktree (`mask`, and the
/// name of the entry it concerns) could change what git lists for `names`: the watch or its
/// queue lost, the directory itself removed or moved, a directory made, removed or moved in it
/// (it may hold one of the names), or an entry named one of `names`, `.gitignore` or `.git` (any
/// case) made, removed or moved. Anything else (a file of another name made, removed or
/// renamed) changes nothing git lists for them.
#[must_use]
pub(crate) fn changes_listing(mask: u32, name: &[u8], names: &[String]) -> bool {
    if mask & (libc::IN_Q_OVERFLOW | libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_UNMOUNT | libc::IN_ISDIR) != 0 {
        return true;
    }
    names.iter().map(String::as_bytes).chain([b".gitignore".as_slice(), b".git"]).any(|n| n.eq_ignore_ascii_case(name))
}

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
        let p = PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(unescape_octal(field)));
        p != root && p.starts_with(root)
    })
}

/// `\ooo` escapes decoded (as the kernel writes spaces, tabs, newlines and backslashes in a
/// mount table).
fn unescape_octal(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push(b[i + 1..i + 4].iter().fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
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
    /// How many directories are watched.
    pub watched: usize,
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
        Lister { worktree: worktree.to_path_buf(), names: names.to_vec(), id: None, ino: None, watched: 0, stamps: Vec::new(), files: None, used: Instant::now(), racy_ns: RACY_WINDOW_NS }
    }

    /// Forgets the kept answer and every watch.
    pub(crate) fn forget(&mut self) {
        self.files = None;
        self.ino = None;
        self.watched = 0;
        self.stamps.clear();
    }

    /// The descriptor the kernel reports on, while something is watched.
    pub(crate) fn fd(&self) -> Option<i32> {
        self.ino.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads the kernel's reports; on one that could change the answer it is forgotten.
    /// Returns whether one was read.
    pub(crate) fn drain(&mut self) -> bool {
        let Some(fd) = self.fd() else { return false };
        let mut buf = vec![0u8; 64 << 10];
        let mut changed = false;
        loop {
            // SAFETY: read into our buffer of its length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            let head = std::mem::size_of::<libc::inotify_event>();
            let mut off = 0usize;
            while off + head <= n {
                // SAFETY: the kernel wrote a whole event here; read unaligned.
                let ev: libc::inotify_event = unsafe { std::ptr::read_unaligned(buf.as_ptr().add(off).cast()) };
                let name = &buf[off + head..(off + head + ev.len as usize).min(n)];
                let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                off += head + ev.len as usize;
                changed |= changes_listing(ev.mask, name, &self.names);
            }
        }
        if changed {
            self.files = None;
        }
        changed
    }

    /// Every stamp as it was taken.
    fn stamps_hold(&self) -> bool {
        self.stamps.iter().all(|(p, s)| stamp(p) == *s)
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
        if let Some(files) = &self.files {
            if self.stamps_hold() {
                return Ok(files.clone());
            }
        }
        self.forget();
        // Everything watched, then stamped, then git asked: a change after its watch or stamp
        // is reported or shows in the stamp; one before is what git reads.
        let keepable = self.watch_tree(max_watches.min(MAX_LISTED_DIRS));
        let taken = now_ns();
        let stamps: Option<Vec<(PathBuf, Option<Stamp>)>> = keepable.and_then(|ignores| {
            let mut paths = stamped_paths(&self.worktree)?;
            if includes_others(&paths) || mount_below(&self.worktree) || !super::records::change_time_kept_at(&self.worktree) {
                return None;
            }
            paths.extend(ignores);
            Some(paths.into_iter().map(|p| {
                let s = stamp(&p);
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
        let mut ignores = Vec::new();
        let mut queue = vec![self.worktree.clone()];
        while let Some(dir) = queue.pop() {
            if self.watched >= max {
                return None;
            }
            let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
            // SAFETY: inotify_add_watch on our descriptor with a NUL-terminated path.
            if unsafe { libc::inotify_add_watch(raw, c.as_ptr(), MASK) } < 0 {
                return None;
            }
            self.watched += 1;
            for e in std::fs::read_dir(&dir).ok()? {
                let e = e.ok()?;
                let name = e.file_name();
                let t = e.file_type().ok()?;
                if t.is_dir() {
                    // Exactly `.git`, as git skips it (a `.GIT` is listed into where the case
                    // matters, so it is watched).
                    if name != ".git" {
                        queue.push(e.path());
                    }
                } else if name.eq_ignore_ascii_case(".gitignore") {
                    if !t.is_file() || ignores.len() >= MAX_IGNORE_FILES {
                        return None;
                    }
                    ignores.push(e.path());
                }
            }
        }
        Some(ignores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["package.json".into(), ".lintstagedrc".into()]
    }

    #[test]
    fn only_what_could_change_the_listing_forgets_it() {
        let n = names();
        for (mask, name, changes) in [
            (libc::IN_CREATE, "main.rs", false),
            (libc::IN_MOVED_TO, "x.tmp", false),
            (libc::IN_DELETE, "notes.txt", false),
            (libc::IN_CREATE, "package.json", true),
            (libc::IN_MOVED_TO, "PACKAGE.JSON", true),
            (libc::IN_DELETE, ".lintstagedrc", true),
            (libc::IN_CREATE, ".gitignore", true),
            (libc::IN_MOVED_FROM, ".GitIgnore", true),
            (libc::IN_CREATE, ".git", true),
            (libc::IN_CREATE | libc::IN_ISDIR, "build", true),
            (libc::IN_MOVED_TO | libc::IN_ISDIR, "src", true),
            (libc::IN_DELETE_SELF, "", true),
            (libc::IN_MOVE_SELF, "", true),
            (libc::IN_IGNORED, "", true),
            (libc::IN_Q_OVERFLOW, "", true),
            (libc::IN_UNMOUNT, "", true),
        ] {
            assert_eq!(changes_listing(mask, name.as_bytes(), &n), changes, "{mask:#x} {name}");
        }
    }

    #[test]
    fn mount_table_escapes_are_decoded() {
        assert_eq!(unescape_octal(br"/a\040b\134c\011"), b"/a b\\c\t".to_vec());
        assert_eq!(unescape_octal(br"/a\04"), br"/a\04".to_vec());
        assert_eq!(unescape_octal(br"/a\9999"), br"/a\9999".to_vec());
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
        let steps: &[(&str, &dyn Fn(&Path))] = &[
            ("a config made deep", &|r| std::fs::write(r.join("a/b/c/.lintstagedrc"), "{}").unwrap()),
            ("a directory made holding one", &|r| {
                std::fs::create_dir_all(r.join("new/x")).unwrap();
                std::fs::write(r.join("new/x/package.json"), "{}").unwrap();
            }),
            ("a subtree moved", &|r| std::fs::rename(r.join("new"), r.join("moved")).unwrap()),
            ("the .gitignore rewritten in place", &|r| std::fs::write(r.join(".gitignore"), "moved/\n").unwrap()),
            ("the .gitignore removed", &|r| std::fs::remove_file(r.join(".gitignore")).unwrap()),
            ("a file added to the index", &|r| {
                let _ = r;
                git(&["add", "-f", "ignored/package.json"]);
            }),
            ("a config removed", &|r| std::fs::remove_file(r.join("a/b/c/.lintstagedrc")).unwrap()),
            // git skips exactly `.git`: a `.GIT` is an ordinary directory to it, watched here.
            ("a .GIT directory made", &|r| std::fs::create_dir_all(r.join(".GIT/x")).unwrap()),
            ("a config made inside it", &|r| std::fs::write(r.join(".GIT/x/package.json"), "{}").unwrap()),
        ];
        for (why, change) in steps {
            change(&ws);
            settle();
            same(&mut l, why);
            assert!(l.files.is_some(), "{why}: kept");
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
        assert!(l.watched >= 3, "{} directories watched", l.watched);
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
        assert!(small.files.is_none() && small.fd().is_none());
    }
}
