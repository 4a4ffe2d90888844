//! The per-run scratch directory for redirected caches (Standard and Minimal), and the count of
//! a uid's tasks for a relative `RLIMIT_NPROC`.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::RUN_SEQ;
use crate::error::SandboxError;

/// Counts the tasks (threads) of a uid, for a relative `RLIMIT_NPROC`: one `fstatat` per
/// process, of `/proc/<pid>/task`, whose owner is the process's uid and whose link count is its
/// number of threads + 2.
pub(crate) fn count_uid_tasks(uid: u32) -> u64 {
    use std::os::fd::AsRawFd;
    let Ok(dir) = std::fs::File::open("/proc") else { return 0 };
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut n = 0;
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        if name.is_empty() || !name.as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let mut rel = name.into_vec();
        rel.extend_from_slice(b"/task\0");
        // SAFETY: a zeroed stat buffer and a NUL-terminated relative path under an open dir fd.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstatat(dir.as_raw_fd(), rel.as_ptr().cast(), &mut st, 0) } == 0 && st.st_uid == uid {
            n += (st.st_nlink as u64).saturating_sub(2).max(1);
        }
    }
    n
}

/// The per-run directory for redirected caches (Standard and Minimal; Full uses its private
/// `/tmp`), removed on drop.
///
/// It is `/tmp/localgpt-sandbox-u<uid>/run-<pid>-<n>-<random>`, inside a parent directory that is
/// created once, mode 0700, and used only while it is a real directory owned by this uid with no
/// group or other access. The run directory itself is not created: like the caches under Full
/// level's private `/tmp`, whatever writes a cache creates it (the tools create their cache
/// paths recursively), and most commands cache nothing, so a run costs no `mkdir` and no `rmdir`
/// (~0.3 ms on an ext4 `/tmp` mounted with `discard`). The name is unpredictable, so no other
/// process can prepare it in advance, and a name that already exists is never used. When the
/// parent is unusable, a fresh `mkdtemp` directory is made for the run instead.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn create() -> Result<Self, SandboxError> {
        if let Some(p) = Self::in_private_parent() {
            return Ok(Scratch(p));
        }
        let mut template = b"/tmp/localgpt-sandbox-XXXXXX\0".to_vec();
        // SAFETY: mkdtemp writes into the NUL-terminated template.
        let p = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(SandboxError::io("create scratch dir", std::io::Error::last_os_error()));
        }
        template.pop();
        Ok(Scratch(PathBuf::from(std::ffi::OsStr::from_bytes(&template))))
    }

    fn in_private_parent() -> Option<PathBuf> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let parent = PathBuf::from(format!("/tmp/localgpt-sandbox-u{uid}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&parent) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        let m = std::fs::symlink_metadata(&parent).ok()?;
        if !m.file_type().is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
            return None;
        }
        let mut random = [0u8; 8];
        if !crate::rand::fill(&mut random) {
            return None;
        }
        let n = RUN_SEQ.fetch_add(1, Ordering::SeqCst);
        let run = parent.join(format!("run-{}-{n}-{:016x}", std::process::id(), u64::from_ne_bytes(random)));
        // Never take over an existing entry.
        if std::fs::symlink_metadata(&run).is_ok() {
            return None;
        }
        Some(run)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Usually nothing was cached and the directory does not exist; an empty one takes one
        // rmdir; otherwise the whole tree goes (symlinks are removed, not followed).
        match std::fs::remove_dir(&self.0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => {
                let _ = crate::guard::fsmeta::remove_tree(&self.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use super::*;

    /// The scratch path sits in a private (0700, own) parent, is unique, is not created up front,
    /// and whatever was cached in it is gone after drop; a parent that is not private is refused.
    #[test]
    fn scratch_lives_in_a_private_parent_and_is_removed() {
        use std::os::unix::fs::MetadataExt;
        let a = Scratch::create().unwrap();
        let b = Scratch::create().unwrap();
        assert_ne!(a.0, b.0);
        let parent = a.0.parent().unwrap().to_path_buf();
        if parent == Path::new("/tmp") {
            return; // the private parent was unusable here: mkdtemp fallback (checked below)
        }
        let m = std::fs::symlink_metadata(&parent).unwrap();
        assert!(m.is_dir() && m.mode() & 0o077 == 0);
        // SAFETY: geteuid cannot fail.
        assert_eq!(m.uid(), unsafe { libc::geteuid() });
        assert!(!a.0.exists(), "not created up front");
        std::fs::create_dir_all(a.0.join("xdg-cache/sub")).unwrap();
        std::fs::write(a.0.join("xdg-cache/sub/f"), b"x").unwrap();
        let path = a.0.clone();
        drop(a);
        assert!(!path.exists());
        drop(b);
    }

    /// The one-stat-per-process count agrees with listing every `/proc/<pid>/task` directory
    /// (give or take processes that start or end in between).
    #[test]
    fn uid_task_count_matches_a_full_scan() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let fast = count_uid_tasks(uid);
        let mut slow = 0u64;
        for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
            if !e.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
                continue;
            }
            if e.metadata().is_ok_and(|m| m.uid() == uid) {
                slow += std::fs::read_dir(e.path().join("task")).map(|t| t.count() as u64).unwrap_or(1);
            }
        }
        assert!(fast >= 1, "this test's own threads count");
        assert!(fast.abs_diff(slow) <= 8, "fast {fast} vs full scan {slow}");
    }
}

