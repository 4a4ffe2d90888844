//! The per-run cgroups: one directory per hierarchy with the plan's limits (`pids.max`, the
//! memory limit), joined by the helper, killed and removed after the run.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use super::RUN_SEQ;
use crate::error::SandboxError;

/// The per-run cgroups (one directory per hierarchy: cgroup v1 has one per controller), killed
/// and removed on drop.
pub(crate) struct RunCgroup {
    /// The directories; the first one is used to list and kill the sandbox's processes (each
    /// holds all of them).
    dirs: Vec<PathBuf>,
    /// Whether [`RunCgroup::kill_all`] kills (false only where the ablation build cut
    /// `timeout-kill-tree`, [`crate::plan::Plan::ablated`]).
    kill_tree: bool,
}

impl RunCgroup {
    /// Creates the directories of `settings` and writes their limits.
    pub(crate) fn create(settings: &[crate::plan::CgroupSetting], kill_tree: bool) -> Result<Option<Self>, SandboxError> {
        if settings.is_empty() {
            return Ok(None);
        }
        let mut cg = RunCgroup { dirs: Vec::new(), kill_tree };
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
        if !self.kill_tree {
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
        let bases: Vec<PathBuf> = self.dirs.iter().filter_map(|d| d.parent().map(Path::to_path_buf)).collect();
        for _ in 0..200 {
            self.dirs.retain(|d| std::fs::remove_dir(d).is_err() && d.exists());
            if self.dirs.is_empty() {
                break;
            }
            self.kill_all();
            std::thread::sleep(Duration::from_millis(5));
        }
        // One run in SWEEP_ONE_IN also removes what runners killed before this point left.
        let mut b = [0u8; 2];
        if crate::rand::fill(&mut b) && u16::from_le_bytes(b) % SWEEP_ONE_IN == 0 {
            let now = SystemTime::now();
            for base in &bases {
                sweep(base, now);
            }
        }
    }
}

/// How many runs sweep, on average, for one that does ([`sweep`] reads the base directory).
const SWEEP_ONE_IN: u16 = 16;

/// How old a per-run cgroup must be before a later run takes it as left behind.
const STALE_AFTER: Duration = Duration::from_secs(600);

/// The runner's pid in a per-run cgroup's name (`localgpt-sandbox-PID-N`, see
/// [`RunCgroup::create_dir`]); `None` for any other name.
fn owner_pid(name: &std::ffi::OsStr) -> Option<i32> {
    let (pid, n) = name.to_str()?.strip_prefix("localgpt-sandbox-")?.split_once('-')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    (digits(pid) && digits(n)).then(|| pid.parse::<i32>().ok()).flatten().filter(|&p| p > 0)
}

/// Removes the per-run cgroups under `base` that runners killed before their drop left behind
/// (a `kill -9` of the CLI, the ablation build's runs): named as ours are, by a runner pid that
/// is not a live process (nor this one), made more than [`STALE_AFTER`] ago, and empty — the
/// kernel refuses to remove a cgroup that still has a process or a child cgroup, so a live
/// run's cgroup, which holds its supervisor for the whole run, is never taken, whichever pid
/// namespace its runner is in.
fn sweep(base: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    for e in entries.flatten() {
        let Some(pid) = owner_pid(&e.file_name()) else { continue };
        // SAFETY: signal 0 only asks whether the process exists (EPERM: it does).
        if pid == me || unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH) {
            continue;
        }
        let made = e.metadata().and_then(|m| m.modified());
        if made.is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age >= STALE_AFTER)) {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_pid_is_read_from_our_names_only() {
        let pid = |s: &str| owner_pid(std::ffi::OsStr::new(s));
        assert_eq!(pid("localgpt-sandbox-1234-0"), Some(1234));
        assert_eq!(pid("localgpt-sandbox-77-15"), Some(77));
        for other in ["localgpt-sandbox-1234", "localgpt-sandbox--1", "localgpt-sandbox-0-1", "localgpt-sandbox-+5-1", "localgpt-sandbox-5-x", "localgpt-sandbox-5-1-2", "system.slice", "localgpt-sandbox-99999999999-1"] {
            assert_eq!(pid(other), None, "{other}");
        }
    }

    #[test]
    fn only_old_empty_cgroups_of_dead_runners_are_swept() {
        let d = crate::test_dir();
        let base = d.path();
        // A pid that is not alive: a child of ours, reaped.
        let child = std::process::Command::new("/bin/true").spawn().unwrap();
        let dead = i32::try_from(child.id()).unwrap();
        let mut child = child;
        child.wait().unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        let made = |name: String, old: bool| {
            let p = base.join(name);
            std::fs::create_dir(&p).unwrap();
            if old {
                std::fs::File::open(&p).unwrap().set_modified(SystemTime::now() - STALE_AFTER - Duration::from_secs(5)).unwrap();
            }
            p
        };
        let swept = made(format!("localgpt-sandbox-{dead}-0"), true);
        let young = made(format!("localgpt-sandbox-{dead}-1"), false);
        let busy = made(format!("localgpt-sandbox-{dead}-2"), true);
        std::fs::write(busy.join("tasks"), "1").unwrap(); // not empty: the kernel's EBUSY, here ENOTEMPTY
        std::fs::File::open(&busy).unwrap().set_modified(SystemTime::now() - STALE_AFTER - Duration::from_secs(5)).unwrap();
        let live = made("localgpt-sandbox-1-0".into(), true); // pid 1 is alive
        let mine = made(format!("localgpt-sandbox-{me}-0"), true);
        let other = made("user.slice".into(), true);
        sweep(base, SystemTime::now());
        assert!(!swept.exists());
        for kept in [&young, &busy, &live, &mine, &other] {
            assert!(kept.exists(), "{}", kept.display());
        }
    }
}
