//! The per-run cgroups: one directory per hierarchy with the plan's limits (`pids.max`, the
//! memory limit), joined by the helper, killed and removed after the run.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::RUN_SEQ;
use crate::error::SandboxError;

/// The per-run cgroups (one directory per hierarchy: cgroup v1 has one per controller), killed
/// and removed on drop.
pub(crate) struct RunCgroup {
    /// The directories; the first one is used to list and kill the sandbox's processes (each
    /// holds all of them).
    dirs: Vec<PathBuf>,
}

impl RunCgroup {
    /// Creates the directories of `settings` and writes their limits.
    pub(crate) fn create(settings: &[crate::plan::CgroupSetting]) -> Result<Option<Self>, SandboxError> {
        if settings.is_empty() {
            return Ok(None);
        }
        let mut cg = RunCgroup { dirs: Vec::new() };
        for s in settings {
            let dir = Self::create_dir(&s.base)?;
            cg.dirs.push(dir.clone());
            for (file, value) in &s.limits {
                std::fs::write(dir.join(file), value).map_err(|e| SandboxError::io(format!("write {}/{file}", dir.display()), e))?;
            }
        }
        Ok(Some(cg))
    }

    fn create_dir(base: &Path) -> Result<PathBuf, SandboxError> {
        // The name holds our pid, which is unique among live processes; a directory that already
        // has it was left by an earlier runner with the same (reused) pid that was killed before
        // its Drop ran. It is removed when empty (rmdir of a cgroup with live tasks fails with
        // EBUSY, so a live run's cgroup is never taken); otherwise the next sequence number is
        // tried.
        let mut attempt = 0;
        loop {
            let n = RUN_SEQ.fetch_add(1, Ordering::SeqCst);
            let dir = base.join(format!("localgpt-sandbox-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                    attempt += 1;
                    if std::fs::remove_dir(&dir).is_ok() && std::fs::create_dir(&dir).is_ok() {
                        return Ok(dir);
                    }
                }
                // Refused although it looked writable: inside another sandbox (Landlock, a
                // read-only mount). The runner falls back to limits without a cgroup.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM | libc::EROFS)) => {
                    return Err(SandboxError::CgroupUnavailable(format!("create {}: {e}", dir.display())));
                }
                Err(e) => return Err(SandboxError::io(format!("create cgroup {}", dir.display()), e)),
            }
        }
    }

    /// The files the helper writes `0` to, one per directory. On cgroup v1, `tasks` moves only
    /// the (single-threaded) helper's one thread, which skips the threadgroup lock and its RCU
    /// synchronisation (`cgroup.procs` costs ~10 ms per run here); v2 has only `cgroup.procs`.
    pub(crate) fn join_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|d| {
                let tasks = d.join("tasks");
                if tasks.exists() {
                    tasks
                } else {
                    d.join("cgroup.procs")
                }
            })
            .collect()
    }

    pub(crate) fn kill_all(&self) {
        if crate::ablation::is(crate::plan::ProtectionId::TimeoutKillTree) {
            return;
        }
        let Some(dir) = self.dirs.first() else { return };
        if std::fs::write(dir.join("cgroup.kill"), b"1").is_ok() {
            return;
        }
        for _ in 0..100 {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs.split_whitespace().filter_map(|p| p.parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for p in pids {
                // SAFETY: signalling a process in our own per-run cgroup.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        for _ in 0..200 {
            self.dirs.retain(|d| std::fs::remove_dir(d).is_err() && d.exists());
            if self.dirs.is_empty() {
                return;
            }
            self.kill_all();
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
