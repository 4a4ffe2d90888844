//! Landlock rulesets kept across the runs of one process (a host's warm [`crate::Sandbox`], any
//! multithreaded host whose helpers the zygote starts, and from its second such run a
//! single-threaded host that forks them itself), so that a run whose plan has the same
//! Landlock part as an earlier one hands the helper a ruleset already built instead of having
//! its command's process open, add and close every rule again (~180 rules at Standard: an
//! `open(O_PATH)`, a `landlock_add_rule` and a `close` each).
//!
//! The plan is still made afresh for every run; only the ruleset built from it is reused, and
//! only when building it again would give the same one:
//!
//! - the key is the plan's whole Landlock part (handled rights, scopes, every path with its
//!   rights, in order): a name that appeared in a directory expanded around a denied path, or a
//!   grant that went away, is another key;
//! - a ruleset binds each rule to the inode its path led to when it was built. Every rule's path
//!   is looked up again (`statx`, following links as the `O_PATH` open does) and must lead to the
//!   same device, inode and mount (`STATX_MNT_ID_UNIQUE` where the kernel has it, the reusable
//!   `STATX_MNT_ID` otherwise) — the ruleset pins its inodes, so an equal inode number is the
//!   same inode, and the mount catches a filesystem mounted again with the same device number
//!   (a tmpfs's root is always inode 1); a rule skipped because its path had vanished must still
//!   find nothing there. Anything else — a directory moved away and another made in its place, a
//!   mount over a path, a lookup that fails — builds the ruleset again.
//!
//! A cached ruleset is never changed once built (rules are added before it is kept), and
//! `landlock_restrict_self` copies it into the new domain, so one ruleset confines any number of
//! commands. Plans with namespaces (Full) have no use for it: their rules are opened inside the
//! command's fresh root.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

use crate::linux::apply::{build_ruleset_seeing, BuiltRuleset};
use crate::plan::HelperLandlock;

/// What a rule's path led to: the device, the inode and the mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RuleId {
    dev: (u32, u32),
    ino: u64,
    mnt: u64,
    /// `mnt` is `STATX_MNT_ID_UNIQUE` (never reused) rather than `STATX_MNT_ID`.
    unique_mnt: bool,
}

fn statx_id(dirfd: i32, path: &std::ffi::CStr, flags: i32) -> Option<RuleId> {
    // SAFETY: an all-zero statx is a valid value to be overwritten.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_INO | libc::STATX_MNT_ID | libc::STATX_MNT_ID_UNIQUE;
    // SAFETY: a valid C string and a statx buffer we own.
    if unsafe { libc::statx(dirfd, path.as_ptr(), flags | libc::AT_STATX_SYNC_AS_STAT, mask, &mut st) } != 0 {
        return None;
    }
    if st.stx_mask & libc::STATX_INO == 0 || st.stx_mask & (libc::STATX_MNT_ID | libc::STATX_MNT_ID_UNIQUE) == 0 {
        return None;
    }
    Some(RuleId { dev: (st.stx_dev_major, st.stx_dev_minor), ino: st.stx_ino, mnt: st.stx_mnt_id, unique_mnt: st.stx_mask & libc::STATX_MNT_ID_UNIQUE != 0 })
}

/// What a rule's descriptor (from [`build_ruleset_seeing`]) is: `None` when it cannot be told,
/// and then the ruleset is not kept.
fn id_of_fd(fd: i32) -> Option<RuleId> {
    statx_id(fd, c"", libc::AT_EMPTY_PATH)
}

/// What each rule would be now: `Some(Some(id))` where its path leads, `Some(None)` where it
/// is absent (`lstat` finds nothing: the build skips it), `None` when it cannot be told.
fn look_again(path: &std::path::Path) -> Option<Option<RuleId>> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    match statx_id(libc::AT_FDCWD, &c, 0) {
        Some(id) => Some(Some(id)),
        None => matches!(std::fs::symlink_metadata(path), Err(ref e) if e.kind() == std::io::ErrorKind::NotFound).then_some(None),
    }
}

/// A ruleset kept for reuse, with what each of its rules was bound to.
struct Kept {
    landlock: HelperLandlock,
    ruleset: BuiltRuleset,
    /// One per rule of `landlock`, in order (`None`: skipped, its path was absent).
    ids: Vec<Option<RuleId>>,
}

impl Kept {
    /// Whether building `self.landlock` again now would bind every rule as this one does.
    fn holds(&self) -> bool {
        self.landlock.rules.iter().zip(&self.ids).all(|((path, _), id)| look_again(path) == Some(*id))
    }
}

/// At most this many rulesets per process (one per distinct plan in use: a host with a few
/// `Sandbox`es of different policies); the least recently used goes first.
const MAX_KEPT: usize = 4;

/// Kept rulesets, the most recently used last.
struct Cache {
    kept: Mutex<Vec<Kept>>,
    /// How many rulesets were built (tests).
    built: std::sync::atomic::AtomicUsize,
}

impl Cache {
    const fn new() -> Self {
        Cache { kept: Mutex::new(Vec::new()), built: std::sync::atomic::AtomicUsize::new(0) }
    }

    /// Builds `ll`'s ruleset with what each rule was bound to; `None` when it cannot be built or
    /// a rule's binding cannot be told (the helper then builds its own, and reports its error).
    fn build(&self, ll: &HelperLandlock) -> Option<Kept> {
        self.built.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut ids = Vec::with_capacity(ll.rules.len());
        let mut told = true;
        let ruleset = build_ruleset_seeing(ll, &mut |fd| match fd {
            Some(fd) => match id_of_fd(fd) {
                Some(id) => ids.push(Some(id)),
                None => told = false,
            },
            None => ids.push(None),
        })
        .ok()?;
        (told && ids.len() == ll.rules.len()).then(|| Kept { landlock: ll.clone(), ruleset, ids })
    }

    fn for_plan(&self, ll: &HelperLandlock) -> Option<(OwnedFd, usize)> {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = kept.iter().position(|k| k.landlock == *ll).map(|i| kept.remove(i));
        let current = match found {
            Some(k) if k.holds() => k,
            _ => self.build(ll)?,
        };
        let dup = current.ruleset.fd.try_clone().ok().map(|fd| (fd, current.ruleset.applied));
        kept.push(current);
        if kept.len() > MAX_KEPT {
            kept.remove(0);
        }
        dup
    }
}

static CACHE: Cache = Cache::new();

/// A descriptor of a ruleset for `ll` that binds every rule as building it now would, and its
/// rule count: the kept one when it still holds, else one built now (and kept). `None` when no
/// ruleset could be built here; the caller's helper then builds its own (and fails the same way
/// where it cannot, before anything runs).
pub(crate) fn for_plan(ll: &HelperLandlock) -> Option<(OwnedFd, usize)> {
    CACHE.for_plan(ll)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;

    /// uapi `LANDLOCK_ACCESS_FS_READ_FILE`: the right a rule on a file may have.
    const READ_FILE: u64 = 1 << 2;

    /// Read rules on `dirs`, and read-file rules on `files` (a directory right on a file is
    /// refused by the kernel).
    fn plan_with(abi: u32, dirs: &[&std::path::Path], files: &[&std::path::Path]) -> HelperLandlock {
        let ro = crate::linux::landlock::read_only(abi);
        let rules = dirs.iter().map(|p| (p.to_path_buf(), ro)).chain(files.iter().map(|p| (p.to_path_buf(), READ_FILE))).collect();
        HelperLandlock { fs: crate::linux::landlock::fs_rights_for_abi(abi), net: 0, scopes: 0, rules }
    }

    fn plan_for(abi: u32, dirs: &[&std::path::Path]) -> HelperLandlock {
        plan_with(abi, dirs, &[])
    }

    #[test]
    fn a_kept_ruleset_is_reused_only_while_every_rule_leads_where_it_did() {
        let abi = crate::detect::detect_quick().landlock.abi;
        if abi == 0 {
            eprintln!("skipped: no Landlock here");
            return;
        }
        let cache = Cache::new();
        let builds = || cache.built.load(Ordering::Relaxed);
        let t = tempfile::tempdir().unwrap();
        let (a, b, gone) = (t.path().join("a"), t.path().join("b"), t.path().join("gone"));
        std::fs::create_dir(&a).unwrap();
        std::fs::write(&b, "x").unwrap();
        let ll = plan_with(abi, &[&a], &[&b, &gone]);
        assert_eq!(cache.for_plan(&ll).expect("built").1, 2, "the absent path is skipped");
        assert_eq!(builds(), 1);
        // Nothing changed: the same ruleset again.
        assert_eq!(cache.for_plan(&ll).unwrap().1, 2);
        assert_eq!(builds(), 1);
        // A directory moved away and another made in its place: built again, then kept.
        std::fs::rename(&a, t.path().join("a.old")).unwrap();
        std::fs::create_dir(&a).unwrap();
        assert_eq!(cache.for_plan(&ll).unwrap().1, 2);
        assert_eq!(builds(), 2, "a path that leads to another inode rebuilds");
        let _ = cache.for_plan(&ll).unwrap();
        assert_eq!(builds(), 2);
        // A rule's path that was absent and now exists: built again, with its rule.
        std::fs::write(&gone, "now").unwrap();
        assert_eq!(cache.for_plan(&ll).unwrap().1, 3);
        assert_eq!(builds(), 3);
        // A path replaced by a link to where it led still leads there: kept.
        std::fs::rename(&b, t.path().join("b.real")).unwrap();
        std::os::unix::fs::symlink(t.path().join("b.real"), &b).unwrap();
        let _ = cache.for_plan(&ll).unwrap();
        assert_eq!(builds(), 3, "the rule is bound to the inode the link leads to, as a fresh open would bind it");
        // Removed (the link too): built again without it.
        std::fs::remove_file(&b).unwrap();
        assert_eq!(cache.for_plan(&ll).unwrap().1, 2);
        assert_eq!(builds(), 4);
        // Another plan is another key; the bound holds, the least recently used goes first.
        for i in 0..(MAX_KEPT + 2) {
            let p = t.path().join(format!("d{i}"));
            std::fs::create_dir(&p).unwrap();
            let _ = cache.for_plan(&plan_for(abi, &[&p])).unwrap();
        }
        assert_eq!(cache.kept.lock().unwrap().len(), MAX_KEPT);
        assert!(!cache.kept.lock().unwrap().iter().any(|k| k.landlock == ll));
        // A ruleset that cannot be built (a right it does not handle) is not kept, and says so.
        let mut bad = plan_for(abi, &[&a]);
        bad.fs = READ_FILE;
        assert!(cache.for_plan(&bad).is_none());
        assert!(!cache.kept.lock().unwrap().iter().any(|k| k.landlock == bad));
    }

    #[test]
    fn a_reused_ruleset_confines_as_a_fresh_one() {
        let abi = crate::detect::detect_quick().landlock.abi;
        if abi == 0 {
            eprintln!("skipped: no Landlock here");
            return;
        }
        let cache = Cache::new();
        let t = tempfile::tempdir().unwrap();
        let (inside, outside) = (t.path().join("in"), t.path().join("out"));
        for d in [&inside, &outside] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("f"), "secret").unwrap();
        }
        let ll = plan_for(abi, &[&inside]);
        let _ = cache.for_plan(&ll).unwrap();
        let (fd, _) = cache.for_plan(&ll).unwrap();
        assert_eq!(cache.built.load(Ordering::Relaxed), 1, "the second is the kept one");
        // In a child: enforce it, then read inside and outside; the parent checks the result.
        let (inside_f, outside_f) = (CString::new(inside.join("f").as_os_str().as_bytes()).unwrap(), CString::new(outside.join("f").as_os_str().as_bytes()).unwrap());
        // SAFETY: the child only makes async-signal-safe syscalls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: syscalls on our own process; exit codes carry the results.
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) != 0 {
                    libc::_exit(10);
                }
                let r_in = libc::open(inside_f.as_ptr(), libc::O_RDONLY);
                let r_out = libc::open(outside_f.as_ptr(), libc::O_RDONLY);
                libc::_exit(if r_in >= 0 && r_out < 0 { 0 } else { 11 });
            }
        }
        let mut st = 0;
        // SAFETY: waiting for our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "status {st:#x}");
        // And bare, the same child reads both (the probe can escape without the ruleset).
        assert!(std::fs::read(outside.join("f")).is_ok());
    }
}
