//! The runner's side of the protected workspace paths (see [`crate::guard::protected`]): before
//! the run, a per-run staging directory (the private copies' upper layers) and empty
//! placeholders for absent paths; after it, the review of every change the command made to its
//! private copies ([`crate::guard::review`] decides), applying the harmless ones to the real files and
//! keeping the rest as pending changes ([`crate::guard::pending`]); then the staging directory and the
//! placeholders go.
//!
//! The staging directory lives on a tmpfs where the kernel lets an overlay use one as its upper
//! layer (user extended attributes on tmpfs: Linux 6.6): `$XDG_RUNTIME_DIR`, else `/dev/shm`;
//! elsewhere on disk under `/var/tmp`. Either way in a directory private to the user (0700, own
//! uid, checked), and outside everything the command sees (at Full level its `/dev/shm`, `/tmp`
//! and `$HOME` are private, and `/run` is not granted).

use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::SandboxError;
use crate::guard::pending::{self, PendingAction};
use crate::guard::protected::{ProtectedKind, ProtectedPath};
use crate::guard::review::{self, ConfigOutcome, GitPathClass, Verdict};

pub use crate::guard::pending::ProtectedReview;

/// The per-run staging directory of the private copies; removed on drop.
pub struct Staging {
    /// The run's staging directory.
    pub dir: PathBuf,
}

/// Whether `p` is a directory of this user that no one else may enter.
fn owned_private(p: &Path) -> bool {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0)
}

fn private_dir(p: &Path) -> bool {
    let _ = std::fs::DirBuilder::new().mode(0o700).create(p);
    owned_private(p)
}

/// Where this user's staging directories may be, in order of preference: the runtime directory
/// and `/dev/shm` (`tmpfs`: only where the kernel allows overlays on it, 6.6), then `/var/tmp`.
fn staging_candidates(tmpfs: bool) -> Vec<PathBuf> {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mut candidates = Vec::new();
    if tmpfs {
        if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()).map(PathBuf::from) {
            if run.is_absolute() && owned_private(&run) {
                candidates.push(run.join("localgpt-sandbox"));
            }
        }
        candidates.push(PathBuf::from(format!("/dev/shm/localgpt-sandbox-u{uid}")));
    }
    candidates.push(PathBuf::from(format!("/var/tmp/localgpt-sandbox-u{uid}")));
    candidates
}

/// The user's private staging root for this kernel (see the module docs): the first candidate
/// the command cannot reach (`visible` says which it could).
fn staging_root(kernel: &str, visible: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    staging_candidates(crate::plan::kernel_at_least(kernel, 6, 6)).into_iter().find(|c| !visible(c) && private_dir(c))
}

impl Staging {
    /// Creates the staging directory of the plan's private protected paths (upper and work
    /// directories, and a copy of each protected file); `None` when there is none.
    ///
    /// # Errors
    /// [`SandboxError::Io`] when a directory, copy or placeholder cannot be made (nothing ran).
    pub fn create(plan: &crate::plan::Plan) -> Result<Option<Staging>, SandboxError> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let Some(ns) = plan.namespaces().filter(|n| !n.protected.is_empty()) else { return Ok(None) };
        let protected = &ns.protected;
        // A candidate the command could reach (a granted path, a shared /dev/shm) would let it
        // write another run's private copies.
        let visible = |c: &Path| {
            if c.starts_with("/dev/shm") {
                // Granted, but the command's /dev/shm is its own unless it stays the host's.
                !ns.tmpfs.iter().any(|t| t == Path::new("/dev/shm"))
            } else {
                plan.landlock().is_some_and(|l| l.rules.iter().any(|r| c.starts_with(&r.path))) || ns.rw_binds.iter().any(|b| c.starts_with(b))
            }
        };
        let root = staging_root(&plan.kernel, visible).ok_or_else(|| SandboxError::Setup("no private directory for the protected paths' staging".into()))?;
        let mut random = [0u8; 6];
            crate::rand::fill(&mut random);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = root.join(format!("run-{}-{n}-{}", std::process::id(), random.iter().map(|b| format!("{b:02x}")).collect::<String>()));
        let mk = |p: &Path| std::fs::DirBuilder::new().mode(0o700).create(p).map_err(|e| SandboxError::io(format!("create {}", p.display()), e));
        mk(&dir)?;
        let s = Staging { dir };
        for (i, p) in protected.iter().enumerate() {
            let (upper, work, file) = crate::linux::namespaces::staging_of(&s.dir, i);
            mk(upper.parent().unwrap_or(&s.dir))?;
            match p.kind {
                ProtectedKind::File => {
                    std::fs::copy(&p.path, &file).map_err(|e| SandboxError::io(format!("copy {}", p.path.display()), e))?;
                }
                ProtectedKind::Dir | ProtectedKind::GitDir => {
                    mk(&upper)?;
                    mk(&work)?;
                    // The merged directory shows the upper one's mode and times: make them the
                    // real directory's (`find -newer`, `ls -l` see no difference).
                    let m = std::fs::metadata(&p.path).map_err(|e| SandboxError::io(format!("stat {}", p.path.display()), e))?;
                    std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(m.mode() & 0o7777))
                        .map_err(|e| SandboxError::io(format!("chmod {}", upper.display()), e))?;
                    let times = [
                        libc::timespec { tv_sec: m.atime(), tv_nsec: m.atime_nsec() },
                        libc::timespec { tv_sec: m.mtime(), tv_nsec: m.mtime_nsec() },
                    ];
                    let c = std::ffi::CString::new(upper.as_os_str().as_encoded_bytes()).map_err(|_| SandboxError::Setup("staging path".into()))?;
                    // SAFETY: a valid C string and two timespecs.
                    if unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) } != 0 {
                        return Err(SandboxError::io(format!("utimensat {}", upper.display()), std::io::Error::last_os_error()));
                    }
                }
            }
        }
        Ok(Some(s))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        remove_tree(&self.dir);
    }
}

/// What a run writes before the command starts, so that a runner killed before its review
/// (`kill -9` of the CLI) loses nothing and leaves nothing unreviewed: the next run in the
/// workspace, or `localgpt sandbox pending`, finds the journal of a runner that is gone and
/// reviews the run as it would have ([`recover_killed_runs`]): its private copies (Full) and the
/// paths it left in place (Standard, whose changes are live until reviewed). Kept in the user's
/// private state (`runs/`), which no sandboxed command can write.
#[derive(serde::Deserialize)]
struct Journal {
    workspace: PathBuf,
    protected: Vec<ProtectedPath>,
    staging: Option<PathBuf>,
    snapshot: Snapshot,
    /// The runner: its pid and its start time in clock ticks since boot (a reused pid is
    /// another process).
    pid: u32,
    pid_start: u64,
    /// When the command was started (seconds and nanoseconds since the epoch).
    started: (u64, u32),
}

/// [`Journal`] as it is written (borrowing the run's state).
#[derive(serde::Serialize)]
struct JournalOut<'a> {
    workspace: &'a Path,
    protected: &'a [ProtectedPath],
    staging: Option<&'a Path>,
    snapshot: &'a Snapshot,
    pid: u32,
    pid_start: u64,
    started: (u64, u32),
}

/// A run's journal on disk, removed when dropped (after the run's review).
#[derive(Debug)]
pub struct JournalFile(PathBuf);

/// The start time of process `pid` in clock ticks since boot (`/proc/<pid>/stat`, field 22);
/// `None` when there is no such process, or only its exit status is left (a zombie).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, which may hold spaces and parentheses: the last `)`.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    if matches!(fields.next(), Some("Z" | "X")) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// Where the journals are.
fn journals_dir() -> PathBuf {
    crate::host::state_dir().join("runs")
}

/// Writes the journal of a run that has something to review (`None` otherwise), before its
/// command starts.
///
/// # Errors
/// [`SandboxError::Io`] when it cannot be written (the caller says so: a kill could then lose
/// what the run commits, or leave a hook it wrote in place unreviewed).
pub fn write_journal(workspace: &Path, protected: &[ProtectedPath], staging: Option<&Staging>, snapshot: &Snapshot, started: SystemTime) -> Result<Option<JournalFile>, SandboxError> {
    if staging.is_none() && snapshot.is_empty() {
        return Ok(None);
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let since = started.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let pid = std::process::id();
    let dir = journals_dir();
    crate::guard::fsmeta::create_private_dir(&dir, true).map_err(|e| SandboxError::io(format!("create {}", dir.display()), e))?;
    let mut random = [0u8; 6];
    crate::rand::fill(&mut random);
    // Named by the workspace first: a run looks only at its own workspace's journals.
    let name = format!("{:016x}-{pid}-{}-{}", path_hash(workspace), SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst), random.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let j = JournalOut {
        workspace,
        protected,
        staging: staging.map(|s| s.dir.as_path()),
        snapshot,
        pid,
        pid_start: process_start(pid).unwrap_or(0),
        started: (since.as_secs(), since.subsec_nanos()),
    };
    let json = serde_json::to_vec(&j).map_err(|e| SandboxError::Plan(e.to_string()))?;
    // A new file, renamed into place whole (no sync: it must outlive the runner, not the
    // machine, whose reboot empties the staging too).
    let (tmp, file) = (dir.join(format!(".{name}.tmp")), dir.join(format!("{name}.json")));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &json))
        .and_then(|()| std::fs::rename(&tmp, &file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            SandboxError::io(format!("write {}", file.display()), e)
        })?;
    Ok(Some(JournalFile(file)))
}

impl Drop for JournalFile {
    /// The run was reviewed (or never started its command): its journal goes. (A runner killed
    /// with `kill -9` drops nothing: its journal stays for the next run.)
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A run whose runner was killed before its review, reviewed since.
#[derive(Debug)]
pub struct Recovered {
    /// The run's workspace.
    pub workspace: PathBuf,
    /// When its command started.
    pub started: SystemTime,
    /// What the review of its private copies did.
    pub review: ProtectedReview,
}

impl Recovered {
    /// One line for the user: which run, and what became of its changes.
    #[must_use]
    pub fn summary(&self) -> String {
        let ago = SystemTime::now().duration_since(self.started).map_or(0, |d| d.as_secs());
        let r = &self.review;
        format!(
            "a run in {} killed before its review ({ago} s ago) left changes to its protected paths, reviewed now: {} applied, {} pending{}{}",
            self.workspace.display(),
            r.applied.len(),
            r.pending.len(),
            if r.pending.is_empty() { String::new() } else { " (`localgpt sandbox pending`)".to_string() },
            if r.notes.is_empty() { String::new() } else { format!("; {}", r.notes.join("; ")) }
        )
    }
}

/// Reviews every run of this user (in workspace `only`, when given) whose runner is gone (killed
/// before its review) from its journal, as that run would have: its private copies, then the
/// paths it left in place; then removes its staging directory and journal. A run whose runner
/// is alive, or that another process is reviewing, is left alone. Without `only`, a staging
/// directory no journal names, of a runner that is gone (killed before its command started), is
/// removed too.
#[must_use]
pub fn recover_killed_runs(only: Option<&Path>) -> Vec<Recovered> {
    use std::os::fd::AsRawFd;
    // Alive: the pid runs, and is the runner (its start time, where it was recorded).
    let alive = |pid: u32, start: Option<u64>| process_start(pid).is_some_and(|s| start.is_none_or(|t| t == 0 || t == s));
    let mut out = Vec::new();
    let mut named: Vec<PathBuf> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(journals_dir()) {
        for e in rd.flatten() {
            let file = e.path();
            let ours = only.is_none_or(|w| e.file_name().to_string_lossy().starts_with(&format!("{:016x}-", path_hash(w))));
            if !file.extension().is_some_and(|x| x == "json") || !ours {
                continue;
            }
            let Some(mut j) = std::fs::read(&file).ok().and_then(|b| serde_json::from_slice::<Journal>(&b).ok()) else { continue };
            named.extend(j.staging.clone());
            if alive(j.pid, Some(j.pid_start)) || only.is_some_and(|w| w != j.workspace) {
                continue;
            }
            // One recovery at a time: another run starting now may be at it.
            let Ok(f) = std::fs::File::open(&file) else { continue };
            // SAFETY: flock on a descriptor this process owns.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 || !file.exists() {
                continue;
            }
            let started = std::time::UNIX_EPOCH + std::time::Duration::new(j.started.0, j.started.1);
            let staging = j.staging.take().filter(|d| d.is_dir()).map(|dir| Staging { dir });
            let mut review = match &staging {
                Some(st) => review_run(&j.workspace, &j.protected, st, &j.snapshot, &[], started),
                None => ProtectedReview::default(),
            };
            review_in_place(&j.workspace, &j.snapshot, started, &mut review);
            drop(staging);
            let _ = std::fs::remove_file(&file);
            out.push(Recovered { workspace: j.workspace, started, review });
        }
    }
    // Staging directories no journal names: swept where every journal was read (`sandbox
    // pending`), not at each run.
    if only.is_some() {
        return out;
    }
    // Every candidate, whatever this kernel: a staging root is per user, not per kernel.
    for root in staging_candidates(true) {
        // Only the user's own private directory is trusted (see `staging_root`).
        if !owned_private(&root) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&root) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix("run-").and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else { continue };
            // Made a minute ago or more (its journal is written right after it).
            let old = e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).is_some_and(|d| d.as_secs() > 60);
            if old && !alive(pid, None) && !named.contains(&e.path()) {
                remove_tree(&e.path());
            }
        }
    }
    out
}

/// Removes a tree the overlay may have left unreadable (its work directory is mode 000).
fn remove_tree(p: &Path) {
    if std::fs::remove_dir_all(p).is_ok() {
        return;
    }
    fn open_up(p: &Path) {
        if let Ok(m) = std::fs::symlink_metadata(p) {
            if m.is_dir() {
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700));
                if let Ok(rd) = std::fs::read_dir(p) {
                    for e in rd.flatten() {
                        open_up(&e.path());
                    }
                }
            }
        }
    }
    open_up(p);
    let _ = std::fs::remove_dir_all(p);
}

/// One entry of an overlay's upper layer.
enum Upper {
    /// A new or changed file (its path in the upper layer).
    File(PathBuf, u32),
    /// A new or changed symbolic link.
    Symlink(PathBuf),
    /// A whiteout: the name was deleted.
    Deleted,
    /// A directory that replaced the lower one (opaque): everything below it is the new content.
    Opaque,
    /// A directory (new, or merged with the lower one).
    Dir(u32),
    /// Something the review cannot handle (a redirect, a device): made pending whole.
    Unsupported(String),
}

fn xattr(p: &Path, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
    let mut buf = [0u8; 256];
    // SAFETY: valid C strings and buffer.
    let n = unsafe { libc::lgetxattr(c.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}

fn classify_upper(p: &Path) -> Upper {
    use std::os::unix::fs::FileTypeExt;
    let Ok(m) = std::fs::symlink_metadata(p) else { return Upper::Unsupported("vanished".into()) };
    let ft = m.file_type();
    if ft.is_char_device() && m.rdev() == 0 {
        return Upper::Deleted;
    }
    if xattr(p, c"user.overlay.redirect").is_some() {
        return Upper::Unsupported("a renamed directory (overlay redirect)".into());
    }
    if xattr(p, c"user.overlay.whiteout").is_some() {
        return Upper::Deleted;
    }
    if ft.is_dir() {
        return if xattr(p, c"user.overlay.opaque").is_some_and(|v| v.first() == Some(&b'y')) { Upper::Opaque } else { Upper::Dir(m.mode() & 0o7777) };
    }
    if ft.is_symlink() {
        return std::fs::read_link(p).map_or_else(|e| Upper::Unsupported(e.to_string()), Upper::Symlink);
    }
    if ft.is_file() {
        return Upper::File(p.to_path_buf(), m.mode() & 0o7777);
    }
    Upper::Unsupported("not a file, directory or link".into())
}

/// The changed entries of an upper layer: (path relative to it, what), parents before children.
/// A directory of it the command made unreadable is given its owner's reading back first
/// (counted in `unread`): what it holds is reviewed, never dropped unseen.
fn walk_upper(upper: &Path, unread: &mut Unread) -> Vec<(PathBuf, Upper)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(rd) = read_dir_reviewed(&upper.join(&rel), Some(&mut *unread)) else { continue };
        let mut names: Vec<_> = rd.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for n in names.into_iter().rev() {
            let r = rel.join(&n);
            let u = classify_upper(&upper.join(&r));
            if matches!(u, Upper::Dir(_) | Upper::Opaque) {
                stack.push(r.clone());
            }
            out.push((r, u));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// How far before the run's start a change time still counts as "during the run": file times
/// come from a coarse clock that lags the one `start` was read from by up to a tick (1 to 10 ms),
/// so a change made right after the start can carry a time just before it.
const CLOCK_TICK_MARGIN_NS: i128 = 20_000_000;

/// A real path changed by someone else after the run started (its inode changed state then):
/// a conflict with the command's private copy. A change within a clock tick of the start can be
/// missed; counting those too would also keep aside every change to files the host wrote just
/// before the run (a checkout copied, `git status` refreshing the index).
/// A name per path for files in the user's state (FNV-1a of its bytes: no path in a file name).
fn path_hash(p: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// An exclusive lock on the review of one real directory, held until dropped: a file in the
/// user's private state (`locks/<hash of the path>`), which no sandboxed command can write or
/// hold. Without it two runs ending at once could both find the index unchanged since their
/// start and the later write the earlier one's staged files away. A lock that cannot be taken
/// leaves only that window (the review still checks every file's change time).
struct ReviewLock {
    _held: Option<std::fs::File>,
}

impl ReviewLock {
    fn take(dir: &Path) -> ReviewLock {
        let locks = crate::host::state_dir().join("locks");
        if crate::guard::fsmeta::create_private_dir(&locks, true).is_err() {
            return ReviewLock { _held: None };
        }
        let hash = path_hash(dir);
        // It waits until the other review ends.
        ReviewLock { _held: crate::host::lock_file(&locks.join(format!("{hash:016x}.lock")), true).ok() }
    }
}

fn changed_since(p: &Path, start: SystemTime) -> bool {
    let since = start.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    std::fs::symlink_metadata(p).is_ok_and(|m| m.ctime() > since || (m.ctime() == since && m.ctime_nsec() > 0 && start.duration_since(std::time::UNIX_EPOCH).is_ok_and(|d| i64::from(d.subsec_nanos()) < m.ctime_nsec())))
}

/// A protected path reviewed in place (the command wrote the real file) may have been changed
/// by the command: in doubt, changed — a hook the command rewrote in its first milliseconds must
/// not pass for the one the snapshot saw.
fn maybe_changed_since(p: &Path, start: SystemTime) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| changed_after(m.ctime(), m.ctime_nsec(), start))
}

/// Whether an inode whose ctime is `secs`.`nsecs` may have changed after `start`: its ctime is
/// no earlier than a clock tick before it, or, on a filesystem that keeps whole seconds (no
/// nanoseconds), in the second `start` fell in or the one before.
fn changed_after(secs: i64, nsecs: i64, start: SystemTime) -> bool {
    let start = start.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    let ctime = crate::guard::records::time_ns(secs, nsecs);
    ctime >= start - CLOCK_TICK_MARGIN_NS || (nsecs == 0 && i128::from(secs) >= start / 1_000_000_000 - 1)
}

/// No component between `base` and `p` is a symbolic link (so a write lands where it says).
fn no_links_below(base: &Path, p: &Path) -> bool {
    let Ok(rel) = p.strip_prefix(base) else { return false };
    let mut at = base.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        at.push(c);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return false;
        }
    }
    true
}

use crate::guard::pending::safe_parent;

/// `p` is an existing directory whose canonical path is itself (no symbolic link on the way).
fn real_dir_path(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) && std::fs::canonicalize(p).is_ok_and(|c| c == p)
}

/// Removes what is at `p` (a directory with its content; a link itself, not its target).
fn remove_any(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(_) => Ok(()),
    }
}

/// Most directory entries [`find_inode`] reads.
const FIND_ENTRIES: usize = 200_000;

/// Where the directory with inode `ino` on device `dev` is now, looked for in `p`'s parent and
/// then in `ws`, its writable root (breadth first, no links followed, at most [`FIND_ENTRIES`]
/// entries).
fn find_inode(ws: &Path, p: &Path, dev: u64, ino: u64) -> Option<PathBuf> {
    use std::os::unix::fs::DirEntryExt;
    let mut budget = FIND_ENTRIES;
    let mut queue: std::collections::VecDeque<PathBuf> = p.parent().into_iter().map(Path::to_path_buf).collect();
    if p.parent() != Some(ws) {
        queue.push_back(ws.to_path_buf());
    }
    let mut seen_parent = false;
    while let Some(dir) = queue.pop_front() {
        let first = !seen_parent;
        seen_parent = true;
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            budget = budget.checked_sub(1)?;
            let Ok(ft) = e.file_type() else { continue };
            if !ft.is_dir() {
                continue;
            }
            let path = e.path();
            if e.ino() == ino && std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() == dev && m.ino() == ino) {
                return Some(path);
            }
            // The parent is searched first on its own; the breadth-first walk starts at the
            // workspace.
            if !first || dir == ws {
                queue.push_back(path);
            }
        }
    }
    None
}

/// The class of `rel` in the git directory `root` (and its private copy's upper layer `upper`):
/// a `modules/…` prefix is a submodule's git directory when it holds a `HEAD` in either.
fn git_class(root: &Path, upper: Option<&Path>, rel: &Path) -> GitPathClass {
    let head = |base: &Path, p: &Path| std::fs::symlink_metadata(base.join(p).join("HEAD")).is_ok();
    review::classify_git_path_in(rel, &|p| head(root, p) || upper.is_some_and(|u| head(u, p)))
}

struct Reviewer<'a> {
    ws: &'a Path,
    /// The writable roots (canonical; the workspace first): a protected path is looked for, and
    /// links on its way taken out, in its own.
    roots: &'a [PathBuf],
    start: SystemTime,
    out: ProtectedReview,
    /// Directories the in-place review re-created (a link or file stood there).
    recreated: Vec<PathBuf>,
    /// Files in a git directory that git's configuration includes: config files, whatever
    /// their names.
    includes: &'a [PathBuf],
    /// The directories of the git directory under review in place that held a `HEAD` when it
    /// was walked (relative to it): git directories for the classification whatever the review
    /// takes back meanwhile (a `HEAD` taken out first must not make its `config` data).
    gitdirs: Vec<PathBuf>,
}

impl Reviewer<'_> {
    /// The verdict on a change to `target` (`rel` in its git directory `root`, `upper` the private
    /// copy's upper layer when there is one): [`review::verdict_for`] its class (a submodule's git
    /// directory is any `modules/…` prefix holding a `HEAD` in either), except for a file git's
    /// configuration includes, which is a config file whatever its name (a link put in its place
    /// is pending: git would read the file it points to).
    #[allow(clippy::too_many_arguments)]
    fn verdict(&self, root: &Path, upper: Option<&Path>, rel: &Path, link: bool, deleted: bool, existed: bool, text: Option<&[u8]>) -> Verdict {
        let target = root.join(rel);
        let class = if upper.is_none() && !self.gitdirs.is_empty() {
            review::classify_git_path_in(rel, &|p| self.gitdirs.iter().any(|g| g == p) || std::fs::symlink_metadata(root.join(p).join("HEAD")).is_ok())
        } else {
            git_class(root, upper, rel)
        };
        match (self.includes.contains(&target), link, deleted) {
            (true, true, _) => Verdict::Pending("a symbolic link where a file git's configuration includes was: git would read the settings of the file it points to"),
            (true, false, false) => Verdict::Config,
            // A linked worktree's gitdir file that names a `.git` in a writable directory of the
            // run (`git worktree add wt`): git reads nothing through it.
            (false, false, false) if class == GitPathClass::WorktreeGitdir && text.and_then(review::worktree_gitdir_target).is_some_and(|t| self.roots.iter().any(|r| t.starts_with(r))) => Verdict::Accept,
            _ => review::verdict_for(class, link, deleted, existed, text),
        }
    }

    fn rel(&self, p: &Path) -> String {
        rel_to(self.ws, p)
    }

    /// Whether `path`, made during the run where a protected `.git` was absent, is the `.git`
    /// file of a linked worktree (`git worktree add wt`): a regular file, one line `gitdir: P`
    /// where `P` is `G/worktrees/<name>`, a directory with no symbolic link on the way, and `G` a
    /// `.git` this run reviewed whole. Everything in `P` was reviewed as a git directory's files
    /// are (its config key by key, hooks and redirection files pending, its `commondir` applied
    /// only when it names `G`): it stays. (Not any directory of `G`: `refs/` is git's data
    /// whatever it holds, and could hold a `config`.)
    fn links_into_reviewed_git(&self, path: &Path, m: &std::fs::Metadata) -> bool {
        if !m.is_file() || m.len() > 4096 || !path.file_name().is_some_and(crate::guard::protected::is_dotgit) {
            return false;
        }
        let Ok(text) = read_regular(path) else { return false };
        let Some(to) = std::str::from_utf8(&text).ok().and_then(|t| t.strip_prefix("gitdir: ")).map(|t| t.strip_suffix('\n').unwrap_or(t)) else { return false };
        let to = Path::new(to);
        // `real_dir_path`: a directory, and its canonical path is itself (no link, `.` or `..`).
        to.is_absolute()
            && real_dir_path(to)
            && self.out.reviewed.iter().any(|g| to.parent() == Some(g.join("worktrees").as_path()) && g.file_name().is_some_and(crate::guard::protected::is_dotgit))
    }

    fn keep(&mut self, target: &Path, action: PendingAction, why: &str, content: Option<&[u8]>) {
        match pending::keep(self.ws, target, action, why, content) {
            Ok(c) => self.out.pending.push(c),
            Err(e) => self.out.notes.push(format!("{}: could not keep the pending change ({e}); it was not applied", self.rel(target))),
        }
    }

    fn apply(&mut self, base: &Path, target: &Path, u: &Upper) {
        if !no_links_below(base, target) {
            self.out.notes.push(format!("{}: not applied (a symbolic link on the way)", self.rel(target)));
            return;
        }
        let r = match u {
            Upper::File(src, mode) => std::fs::read(src).map_err(|e| SandboxError::io(format!("read {}", src.display()), e)).and_then(|d| pending::write_atomic(target, &d, *mode)),
            Upper::Symlink(to) => {
                let _ = std::fs::remove_file(target);
                std::os::unix::fs::symlink(to, target).map_err(|e| SandboxError::io(format!("symlink {}", target.display()), e))
            }
            Upper::Deleted => match std::fs::symlink_metadata(target) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(target).map_err(|e| SandboxError::io(format!("remove {}", target.display()), e)),
                Ok(_) => std::fs::remove_file(target).map_err(|e| SandboxError::io(format!("remove {}", target.display()), e)),
                Err(_) => Ok(()),
            },
            Upper::Opaque => {
                // The directory was replaced: its old content goes, the new arrives entry by entry.
                let _ = std::fs::remove_dir_all(target);
                std::fs::DirBuilder::new().mode(0o755).create(target).map_err(|e| SandboxError::io(format!("create {}", target.display()), e))
            }
            Upper::Dir(mode) => match std::fs::symlink_metadata(target) {
                Ok(m) if m.is_dir() => Ok(()),
                _ => std::fs::DirBuilder::new().mode(*mode & 0o777).create(target).map_err(|e| SandboxError::io(format!("create {}", target.display()), e)),
            },
            Upper::Unsupported(_) => Ok(()),
        };
        match r {
            Ok(()) => {
                if !matches!(u, Upper::Dir(_)) {
                    self.out.applied.push(self.rel(target));
                }
            }
            Err(e) => self.out.notes.push(format!("{}: not applied: {e}", self.rel(target))),
        }
    }

    /// Keeps a change as pending: the content of a file, a link, or a deletion.
    fn keep_upper(&mut self, target: &Path, u: &Upper, why: &str) {
        match u {
            Upper::File(src, mode) => match std::fs::read(src) {
                Ok(d) => self.keep(target, PendingAction::Write { mode: *mode }, why, Some(&d)),
                Err(e) => self.out.notes.push(format!("{}: lost: {e}", self.rel(target))),
            },
            Upper::Symlink(to) => self.keep(target, PendingAction::Symlink { to: to.clone() }, why, None),
            Upper::Deleted => self.keep(target, PendingAction::Delete, why, None),
            Upper::Opaque | Upper::Dir(_) => {}
            Upper::Unsupported(what) => self.out.notes.push(format!("{}: {what}: not applied", self.rel(target))),
        }
    }

    fn config(&mut self, target: &Path, u: &Upper) {
        let Upper::File(src, mode) = u else {
            return self.keep_upper(target, u, "a git config file was replaced or removed");
        };
        let new = match read_regular(src) {
            Ok(n) => n,
            Err(e) => return self.keep_upper(target, u, &format!("a git config file that cannot be read ({e})")),
        };
        let old = match std::fs::symlink_metadata(target) {
            Err(_) => None,
            Ok(_) => match read_regular(target) {
                Ok(o) => Some(o),
                Err(e) => return self.keep_upper(target, u, &format!("a git config file whose version before the run cannot be read ({e})")),
            },
        };
        match review::review_config(old.as_deref(), &new, &crate::guard::gitoracle::config_list) {
            ConfigOutcome::Whole(why) => self.keep_upper(target, u, &format!("a git config file kept whole: {why}")),
            ConfigOutcome::Split { text, applied, pending } => {
                if !applied.is_empty() {
                    if let Err(e) = pending::write_atomic(target, text.as_bytes(), *mode) {
                        return self.keep_upper(target, u, &format!("could not apply the safe keys ({e})"));
                    }
                    self.out.applied.push(format!("{} ({})", self.rel(target), applied.iter().map(review::KeyChange::name).collect::<Vec<_>>().join(", ")));
                }
                self.keep_config_keys(target, pending);
            }
        }
    }

    /// Keeps the config key changes `pending` (none: nothing) as one pending change.
    fn keep_config_keys(&mut self, target: &Path, pending: Vec<review::KeyChange>) {
        if !pending.is_empty() {
            let why = pending.iter().map(|c| format!("{}: {}", c.name(), c.executable.clone().unwrap_or_default())).collect::<Vec<_>>().join("; ");
            self.keep(target, PendingAction::ConfigKeys { changes: pending }, &why, None);
        }
    }

    fn review(&mut self, protected: &ProtectedPath, root: &Path, upper: &Path) {
        let mut unread = Unread::default();
        let entries = walk_upper(upper, &mut unread);
        // (Said of the real directory the private copy stands for.)
        let notes = unread.notes(|d| self.rel(&root.join(d.strip_prefix(upper).unwrap_or(d))));
        self.out.notes.extend(notes);
        // Under an opaque (replaced) directory every entry is new: ancestors first, which the
        // sort gives.
        for (rel, u) in &entries {
            let target = root.join(rel);
            if protected.kind == ProtectedKind::Dir {
                // .vscode, .idea, the agent's config, the hooks directory: their files run code.
                if !matches!(u, Upper::Dir(_) | Upper::Opaque) {
                    self.keep_upper(&target, u, &format!("a file in {} (its files can run code later, outside the sandbox)", self.rel(&protected.path)));
                }
                continue;
            }
            let conflict = matches!(u, Upper::File(..) | Upper::Symlink(_) | Upper::Deleted) && changed_since(&target, self.start);
            let text = match u {
                Upper::File(src, _) if matches!(git_class(root, Some(upper), rel), GitPathClass::Todo | GitPathClass::WorktreeCommondir | GitPathClass::WorktreeGitdir) => read_regular(src).ok(),
                _ => None,
            };
            let existed = std::fs::symlink_metadata(&target).is_ok();
            match self.verdict(root, Some(upper), rel, matches!(u, Upper::Symlink(_)), matches!(u, Upper::Deleted), existed, text.as_deref()) {
                Verdict::Drop => {}
                _ if conflict => self.keep_upper(&target, u, "changed on the host during the run too: kept aside instead of overwriting it"),
                Verdict::Accept => self.apply(root, &target, u),
                Verdict::Config => self.config(&target, u),
                Verdict::Pending(why) => self.keep_upper(&target, u, why),
            }
        }
    }
}

/// Reviews the private copies of a finished run (see the module docs). `read_only` lists the
/// indexes of protected paths that were bound read-only instead (nothing to review).
#[must_use]
pub fn review_run(ws: &Path, protected: &[ProtectedPath], staging: &Staging, snapshot: &Snapshot, read_only: &[usize], start: SystemTime) -> ProtectedReview {
    let mut r = Reviewer { ws, roots: &snapshot.3, start, out: ProtectedReview::default(), recreated: Vec::new(), includes: &snapshot.2, gitdirs: Vec::new() };
    for (i, p) in protected.iter().enumerate() {
        // A path bound read-only instead of a private copy has no changes to review, but its
        // way is checked like a private one's.
        let bound_read_only = read_only.contains(&i);
        if bound_read_only {
            r.out.read_only.push(r.rel(&p.path));
        }
        let (upper, _, file) = crate::linux::namespaces::staging_of(&staging.dir, i);
        let id = snapshot.1.iter().find(|(q, ..)| *q == p.path).map(|(_, d, i)| (*d, *i));
        match p.kind {
            ProtectedKind::File => {
                if !r.bound_file_in_place(p, id) || bound_read_only {
                    continue;
                }
                let (Ok(new), Ok(old)) = (read_regular(&file), read_regular(&p.path)) else { continue };
                if new != old {
                    let mode = std::fs::metadata(&p.path).map_or(0o644, |m| m.mode() & 0o777);
                    let why = file_why(p);
                    r.keep(&p.path, PendingAction::Write { mode }, &why, Some(&new));
                }
            }
            ProtectedKind::Dir | ProtectedKind::GitDir => {
                // The directory cannot be renamed or replaced (a mount point), but a parent can
                // be moved, with a link, another directory or nothing left in its place: found
                // as one reviewed in place is, and its changes go where it is then, never
                // through a link.
                let at = r.locate(p, id);
                if bound_read_only {
                    continue;
                }
                match at {
                    Some(root) => {
                        r.out.reviewed.push(root.clone());
                        // One review of a directory at a time (runs in one repository end
                        // together): a later one sees the earlier one's writes as changed on the
                        // host during its run, and keeps its own version pending, said why.
                        let _lock = ReviewLock::take(&root);
                        r.review(p, &root, &upper);
                    }
                    None => r.out.notes.push(format!("{}: the command's changes to it were not applied", r.rel(&p.path))),
                }
            }
        }
    }
    r.out
}

// ---------------------------------------------------------------------------------------------
// Review in place: protected paths that were not private for the run (absent at launch, or at
// Standard level). A snapshot of what can run code is taken before the run; afterwards every
// such change is taken back out of the real path (restored from the snapshot, or removed) and
// kept as a pending change.
// ---------------------------------------------------------------------------------------------

/// What a path was (or is).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum State {
    /// A regular file: mode, content when kept (`None`: too large to keep), and whether it has
    /// other hard links (then it can be changed through another name, unreviewed: a link made
    /// during the run counts as a change).
    File(u32, Option<Vec<u8>>, bool),
    /// A symbolic link and its target.
    Link(PathBuf),
    /// A directory.
    Dir,
}

/// Most bytes of file content a snapshot keeps per protected path (beyond, a change can still
/// be seen, by mode and change time, but not undone: it is reported).
const SNAPSHOT_BYTES: usize = 8 << 20;

/// `p` as a note shows it: relative to the workspace `ws` when inside it.
fn rel_to(ws: &Path, p: &Path) -> String {
    p.strip_prefix(ws).unwrap_or(p).display().to_string()
}

/// The directories the review after a run could not read at first for want of permission:
/// each one whose read permission this user (its owner) gave back, and each one it could not.
#[derive(Default)]
pub(crate) struct Unread {
    /// Given their owner's reading back ([`crate::guard::fsmeta::let_owner_read`]), then read.
    pub given: Vec<PathBuf>,
    /// Still unreadable (another user's, or refused although its owner may read it): what they
    /// hold was not reviewed.
    pub left: Vec<PathBuf>,
}

impl Unread {
    /// What the report says of them, each path as `rel` shows it.
    pub(crate) fn notes(&self, rel: impl Fn(&Path) -> String) -> Vec<String> {
        // (One given back that still could not be read is said once, as not reviewed.)
        let given = self.given.iter().filter(|d| !self.left.contains(d)).map(|d| format!("{}: its read permission had been taken away (which hides what it holds from a review run as you, while git still finds a `.git` or a hook in it by name); given back to its owner (u+rx) and reviewed", rel(d)));
        let left = self.left.iter().map(|d| format!("{}: {}: what it holds was not reviewed", rel(d), why_unread(d)));
        given.chain(left).collect()
    }
}

/// Why the directory `d` stays unreadable to this user, for a note.
fn why_unread(d: &Path) -> &'static str {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(d) {
        // SAFETY: geteuid has no preconditions.
        Ok(m) if m.uid() == unsafe { libc::geteuid() } => "yours, yet reading it is refused although its mode lets you (an ACL or a security module)",
        Ok(_) => "another user's, not readable by you and not yours to make readable",
        Err(_) => "not readable by you",
    }
}

/// Reads the directory `dir` for the review; after the run (`unread`), one this user may not read
/// is given its owner's reading back first where it is the user's, and counted in `unread`
/// either way. At launch (`None`) nothing is changed.
fn read_dir_reviewed(dir: &Path, unread: Option<&mut Unread>) -> std::io::Result<std::fs::ReadDir> {
    match (std::fs::read_dir(dir), unread) {
        (Err(e), Some(u)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            if crate::guard::fsmeta::let_owner_read(dir).unwrap_or(false) {
                u.given.push(dir.to_path_buf());
                let again = std::fs::read_dir(dir);
                if again.is_err() {
                    u.left.push(dir.to_path_buf());
                }
                return again;
            }
            u.left.push(dir.to_path_buf());
            Err(e)
        }
        (r, _) => r,
    }
}

/// The entries of a `.git` directory that matter to the review: everything but git's data
/// directories (`objects/` except `objects/info`, `refs/`, `logs/`, `reftable/`, `lfs/`,
/// `rr-cache/`) of the git directory itself and of every directory in it that holds a `HEAD` (a
/// submodule's or worktree's git directory): the same names elsewhere (a submodule named `refs`)
/// are walked.
fn walk_review(root: &Path, git: bool, mut unread: Option<&mut Unread>) -> Vec<(PathBuf, std::fs::Metadata)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(rd) = read_dir_reviewed(&root.join(&rel), unread.as_deref_mut()) else { continue };
        let gitdir = git && (rel.as_os_str().is_empty() || std::fs::symlink_metadata(root.join(&rel).join("HEAD")).is_ok());
        for e in rd.flatten() {
            let r = rel.join(e.file_name());
            let Ok(m) = std::fs::symlink_metadata(root.join(&r)) else { continue };
            if m.is_dir() {
                let name = e.file_name();
                let skip = gitdir && matches!(name.to_str(), Some("refs" | "logs" | "objects" | "reftable" | "lfs" | "rr-cache"));
                if gitdir && name == "objects" {
                    stack.push(r.join("info"));
                } else if !skip {
                    stack.push(r.clone());
                }
                // git's data is not walked (refs and objects can be many), but a repository
                // planted in it is (git run there reads its config): the review holds it back.
                if skip {
                    stack.extend(repositories_below(root, &r, unread.as_deref_mut()));
                }
            }
            out.push((r, m));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The directories below `rel` (a data directory of the git directory `root`: `refs`, `objects`,
/// …) that git would discover as a repository: any that holds a `HEAD`, as the review's
/// classification counts them. Only directories are visited (the entries' types come with the
/// listing); a directory of loose objects (`objects/ab`) is listed only where its link count
/// says it has subdirectories (git makes none there; a file system that does not count them,
/// such as btrfs, has them all listed).
fn repositories_below(root: &Path, rel: &Path, mut unread: Option<&mut Unread>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![rel.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = read_dir_reviewed(&root.join(&d), unread.as_deref_mut()) else { continue };
        let objects = d.as_os_str() == "objects";
        for e in rd.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let r = d.join(e.file_name());
            let at = root.join(&r);
            if std::fs::symlink_metadata(at.join("HEAD")).is_ok() {
                found.push(r);
                continue;
            }
            let loose = objects && e.file_name().to_str().is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()));
            if loose && std::fs::symlink_metadata(&at).is_ok_and(|m| m.nlink() == 2) {
                continue;
            }
            stack.push(r);
        }
    }
    found
}

/// Reads a regular file without following a link and without blocking: a FIFO, socket or device
/// the command left where a protected file was is refused, not opened (opening a FIFO for reading
/// waits for a writer: the runner would hang after the run).
pub(crate) fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok(v)
}

fn state_of(path: &Path, m: &std::fs::Metadata, keep: bool, budget: &mut usize) -> State {
    if m.file_type().is_symlink() {
        return State::Link(std::fs::read_link(path).unwrap_or_default());
    }
    if m.is_dir() {
        return State::Dir;
    }
    // A FIFO, socket or device: its type is in the mode, so it never compares equal to a file.
    if !m.is_file() {
        return State::File(m.mode(), None, false);
    }
    let content = if keep && (m.len() as usize) <= *budget {
        read_regular(path).ok().inspect(|c| *budget -= c.len())
    } else {
        None
    };
    State::File(m.mode() & 0o7777, content, m.nlink() > 1)
}

/// Why a change to a protected file is pending.
fn file_why(p: &ProtectedPath) -> String {
    if p.path.file_name().is_some_and(|n| n == ".git") {
        "the .git file (it says where the repository is)".into()
    } else {
        format!("a protected file: {}", p.reason)
    }
}

/// For a file protected by its keys ([`ProtectedPath::keys`]): whether the change from `old` to
/// `new` leaves them as they were ([`crate::guard::jsonkeys`]); `None` for a file protected
/// whole. A version that is not a regular file read whole, or one with another hard link after
/// the run, is refused.
fn keys_review(p: &ProtectedPath, old: Option<&State>, new: Option<&State>) -> Option<Result<(), String>> {
    if p.keys.is_empty() {
        return None;
    }
    fn bytes(s: Option<&State>, after: bool) -> Result<Option<&[u8]>, String> {
        let when = if after { "after the run" } else { "before the run" };
        match s {
            None => Ok(None),
            Some(State::File(_, _, true)) if after => Err(format!("{when} it has another hard link")),
            Some(State::File(_, Some(c), _)) => Ok(Some(c.as_slice())),
            Some(_) => Err(format!("{when} it is not a regular file read whole")),
        }
    }
    Some(bytes(old, false).and_then(|o| bytes(new, true).and_then(|n| crate::guard::jsonkeys::keys_kept(o, n, &p.keys))))
}

/// Whether a file's content is worth keeping for the review (it can run code, or be compared).
fn worth_keeping(kind: ProtectedKind, rel: &Path) -> bool {
    match kind {
        // Everything but git's data: config files, hooks, to-do lists, and what the review does
        // not know (put back as it was when it is pending).
        ProtectedKind::GitDir => !matches!(review::classify_git_path(rel), GitPathClass::Plain | GitPathClass::Lock) || rel.starts_with("modules"),
        _ => true,
    }
}

/// The snapshot of one protected path.
#[derive(serde::Serialize, serde::Deserialize)]
struct Snap {
    p: ProtectedPath,
    /// (path relative to it, state); empty when absent.
    entries: Vec<(PathBuf, State)>,
    /// The file itself (`ProtectedKind::File`).
    file: Option<State>,
    /// A directory present at launch: its device and inode (what the command sees as the path
    /// can be renamed, or replaced by a link, a file or another directory).
    id: Option<(u64, u64)>,
    /// Mode and times of its directories (relative path, mode, atime, mtime), to put back on one
    /// the review has to re-create.
    dirs: Vec<(PathBuf, u32, (i64, i64), (i64, i64))>,
    /// The change time (seconds, nanoseconds) of each file whose content was not kept (beyond
    /// the snapshot's budget): any change moves it, whatever the clock of the filesystem's
    /// server (NFS, FUSE) says.
    ctimes: Vec<(PathBuf, i64, i64)>,
    /// The identity (device, inode) and change time of each regular file older than the
    /// snapshot by more than [`crate::guard::records::RACY_WINDOW_NS`], on a filesystem that
    /// keeps change times ([`crate::guard::records::keeps_change_times`]): one that is still that
    /// inode at that change time after the run is what it was (a write, chmod, link or rename
    /// since moves its change time to the run's, and no process can set it), so the review does
    /// not read it again. (Absent from a journal of an older version: every file is read.)
    #[serde(default)]
    settled: Vec<(PathBuf, u64, u64, i64, i64)>,
}

impl Snap {
    /// The snapshot of a path absent at launch (`path` made during the run, of `kind`): everything
    /// found there after the run is new.
    fn absent(path: PathBuf, kind: ProtectedKind, reason: String) -> Snap {
        Snap { p: ProtectedPath { path, kind, absent: true, private: false, reason, keys: Vec::new() }, entries: Vec::new(), file: None, id: None, dirs: Vec::new(), ctimes: Vec::new(), settled: Vec::new() }
    }
}

/// A directory's mode and access and modification times.
fn dir_meta(rel: PathBuf, m: &std::fs::Metadata) -> (PathBuf, u32, (i64, i64), (i64, i64)) {
    (rel, m.mode() & 0o7777, (m.atime(), m.atime_nsec()), (m.mtime(), m.mtime_nsec()))
}

/// The writable roots of `plan` (canonical; the workspace first): one launch walk each.
fn writable_roots(plan: &crate::plan::Plan) -> Vec<PathBuf> {
    plan.nested_walks.iter().map(|w| w.root.clone()).collect()
}

/// Snapshots of the protected paths reviewed in place, taken before the run, the device and
/// inode of each private path (to find it after the run if the command moved a parent),
/// the files git's configuration includes and the writable roots.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Snapshot(Vec<Snap>, Vec<(PathBuf, u64, u64)>, Vec<PathBuf>, Vec<PathBuf>);

impl Snapshot {
    /// Takes the snapshot of every protected path of `plan` that is not private for the run.
    #[must_use]
    pub fn take(plan: &crate::plan::Plan) -> Snapshot {
        let mut v = Vec::new();
        // (The run starts after this: a change time clearly before now is before the start.)
        let now = crate::guard::records::now_ns();
        let ids = plan.protected.iter().filter(|p| p.private).filter_map(|p| std::fs::symlink_metadata(&p.path).ok().map(|m| (p.path.clone(), m.dev(), m.ino()))).collect();
        for p in plan.protected.iter().filter(|p| !p.private) {
            let mut budget = SNAPSHOT_BYTES;
            let mut dirs = Vec::new();
            let mut ctimes = Vec::new();
            let mut settled = Vec::new();
            let mut id = None;
            let (entries, file) = if p.absent {
                (Vec::new(), None)
            } else if p.kind == ProtectedKind::File {
                let f = std::fs::symlink_metadata(&p.path).ok().map(|m| state_of(&p.path, &m, true, &mut budget));
                (Vec::new(), f)
            } else {
                let git = p.kind == ProtectedKind::GitDir;
                // (Change times stand for content only where the filesystem keeps them.)
                let kept_times = crate::guard::records::change_time_kept_at(&p.path);
                if let Ok(m) = std::fs::symlink_metadata(&p.path) {
                    id = Some((m.dev(), m.ino()));
                    dirs.push(dir_meta(PathBuf::new(), &m));
                }
                let e = walk_review(&p.path, git, None)
                    .into_iter()
                    .map(|(r, m)| {
                        if m.is_dir() {
                            dirs.push(dir_meta(r.clone(), &m));
                        }
                        let keep = worth_keeping(p.kind, &r) || plan.git_config_files.contains(&p.path.join(&r));
                        let st = state_of(&p.path.join(&r), &m, keep, &mut budget);
                        if m.is_file() && matches!(st, State::File(_, None, _)) {
                            ctimes.push((r.clone(), m.ctime(), m.ctime_nsec()));
                        }
                        if kept_times && m.is_file() && crate::guard::records::time_ns(m.ctime(), m.ctime_nsec()) < now - crate::guard::records::RACY_WINDOW_NS {
                            settled.push((r.clone(), m.dev(), m.ino(), m.ctime(), m.ctime_nsec()));
                        }
                        (r, st)
                    })
                    .collect();
                (e, None)
            };
            v.push(Snap { p: p.clone(), entries, file, id, dirs, ctimes, settled });
        }
        Snapshot(v, ids, plan.git_config_files.clone(), writable_roots(plan))
    }

    /// Nothing to review.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty() && self.1.is_empty()
    }
}

impl Reviewer<'_> {
    /// Puts `old` back at `target` (or removes what is there when it did not exist). Nothing is
    /// written through a symbolic link ([`safe_parent`]): the command may have left one on the
    /// way to lead the (unconfined) runner elsewhere.
    fn restore(&mut self, target: &Path, old: Option<&State>) {
        let mut unknown_before = false;
        let r = safe_parent(target).and_then(|()| match old {
            None => remove_any(target),
            Some(State::File(mode, Some(content), _)) => pending::write_atomic(target, content, *mode).map_err(|e| std::io::Error::other(e.to_string())),
            // Its content before the run was beyond the snapshot's budget: the command's version
            // (kept pending by the caller) does not stay live; the file is taken out.
            Some(State::File(_, None, _)) => remove_any(target).inspect(|()| unknown_before = true),
            Some(State::Link(to)) => remove_any(target).and_then(|()| std::os::unix::fs::symlink(to, target)),
            Some(State::Dir) => match std::fs::symlink_metadata(target) {
                Ok(m) if m.is_dir() => Ok(()),
                // A link, a file or nothing where a directory was: the directory comes back
                // (its mode and times are put back at the end of the review).
                _ => remove_any(target).and_then(|()| std::fs::create_dir(target)).inspect(|()| self.recreated.push(target.to_path_buf())),
            },
        });
        match r {
            Err(e) => self.out.notes.push(format!("{}: could not be restored ({e}): the command's version is live", self.rel(target))),
            Ok(()) if unknown_before => self.out.notes.push(format!("{}: its content before the run was too large to keep, so it could not be put back: removed (the command's version is pending)", self.rel(target))),
            Ok(()) => {}
        }
    }

    /// Keeps `new` (the command's version, or its removal) as pending and restores `old`.
    fn take_back(&mut self, target: &Path, old: Option<&State>, new: Option<&State>, why: &str) {
        if let Err(e) = safe_parent(target) {
            self.out.notes.push(format!("{}: not reviewed ({e})", self.rel(target)));
            return;
        }
        match new {
            Some(State::File(mode, ..)) => match read_regular(target) {
                Ok(d) => self.keep(target, PendingAction::Write { mode: *mode }, why, Some(&d)),
                Err(e) => self.out.notes.push(format!("{}: unreadable ({e})", self.rel(target))),
            },
            Some(State::Link(to)) => self.keep(target, PendingAction::Symlink { to: to.clone() }, why, None),
            Some(State::Dir) => {}
            None => self.keep(target, PendingAction::Delete, why, None),
        }
        self.restore(target, old);
    }

    /// Takes whatever stands at `target` (a link, a file, a directory) out of the workspace into
    /// a pending change.
    fn quarantine(&mut self, target: &Path, m: &std::fs::Metadata, why: &str) {
        if m.file_type().is_symlink() || m.is_file() {
            let new = state_of(target, m, true, &mut usize::MAX.clone());
            return self.take_back(target, None, Some(&new), why);
        }
        if m.is_dir() {
            match pending::keep_tree(self.ws, target, why) {
                Ok(c) => self.out.pending.push(c),
                Err(e) => self.out.notes.push(format!("{}: could not be kept aside ({e}): the command's version is live", self.rel(target))),
            }
            return;
        }
        if let Err(e) = remove_any(target) {
            self.out.notes.push(format!("{}: {e}: the command's version is live", self.rel(target)));
        } else {
            self.out.notes.push(format!("{}: removed (neither a file, a link nor a directory; it stood where a protected path was)", self.rel(target)));
        }
    }

    /// Where to review the protected directory `p` (`None`: nowhere); `id` is its device and
    /// inode at launch (`None`: absent). It is still the one of the launch at its path (or,
    /// absent at launch, a real directory or nothing) in the ordinary case. Otherwise:
    ///
    /// * a symbolic link on the way to it (none at launch: the planner follows each one) is the
    ///   command's, and is taken out first: what stands behind it would be read as the protected
    ///   path (`mv tools elsewhere; ln -s evil tools` leads `core.hooksPath = tools/hooks` to the
    ///   command's hooks);
    /// * found by its inode in its writable root, renamed or replaced in place (its parent is
    ///   still there): what stands at the path now (a link, a file, another directory) is kept
    ///   aside as a pending change and the original is moved back;
    /// * moved with an ancestor (`mv sub sub2`): reviewed where it is now, and nothing is
    ///   written at the old path.
    fn locate(&mut self, p: &ProtectedPath, id: Option<(u64, u64)>) -> Option<PathBuf> {
        let parent = p.path.parent()?;
        // Directly in its writable root there is no link on the way to take out (the root is
        // not on the way): absent at launch and now is then known without the root's
        // resolution, which every protected name of the table would pay.
        if id.is_none() && parent == self.root_of(&p.path) && std::fs::symlink_metadata(&p.path).is_err() {
            return None;
        }
        // Taking out a link on the way leaves no parent: whether it is a real directory is known
        // from here on.
        let parent_real = real_dir_path(parent);
        let link = !parent_real && self.link_on_the_way(p);
        let cur = std::fs::symlink_metadata(&p.path).ok();
        if cur.is_none() && id.is_none() {
            // Absent at launch and now: nothing to review (a link the command put on the way, to
            // a directory where it may appear later, was taken out above).
            return None;
        }
        let same = match (&cur, id) {
            (Some(m), Some((dev, ino))) => m.is_dir() && m.dev() == dev && m.ino() == ino,
            (Some(m), None) => m.is_dir(),
            (None, id) => id.is_none(),
        };
        if same && parent_real {
            return cur.map(|_| p.path.clone());
        }
        let what = self.rel(&p.path);
        let mut found = id.and_then(|(dev, ino)| find_inode(self.root_of(&p.path), &p.path, dev, ino)).filter(|at| at.parent().is_some_and(real_dir_path));
        let went = found.as_ref().map(|f| self.rel(f));
        if !parent_real {
            return match found {
                Some(at) => {
                    self.out.notes.push(format!("{what} was moved with a parent directory during the run: reviewed where it is now, {}", self.rel(&at)));
                    Some(at)
                }
                None if id.is_none() => {
                    if !link {
                        self.out.notes.push(format!("{what}: a parent directory was replaced during the run: not reviewed"));
                    }
                    None
                }
                None => {
                    self.out.notes.push(format!("{what}: a parent directory was moved or replaced during the run, and the directory is not in its writable root any more: not reviewed"));
                    None
                }
            };
        }
        // The original moved inside what replaced it (`mv .git x; mkdir .git; mv x .git/in`):
        // out of it first, beside it.
        if let Some(from) = found.take() {
            if from.starts_with(&p.path) {
                let aside = p.path.with_file_name(format!(".localgpt-putback-{}", std::process::id()));
                found = std::fs::rename(&from, &aside).ok().map(|()| aside);
                if found.is_none() {
                    self.out.notes.push(format!("{what} was moved into what replaced it ({}) and could not be moved out", self.rel(&from)));
                }
            } else {
                found = Some(from);
            }
        }
        if let Some(m) = cur.as_ref().filter(|m| !(id.is_none() && self.links_into_reviewed_git(&p.path, m))) {
            let why = if id.is_some() {
                format!("it stood where the protected {what} was (the command replaced or renamed {what} during the run)")
            } else {
                format!("made where the protected {what} (absent at launch: {}) would be: only a real directory is reviewed there", p.reason)
            };
            self.quarantine(&p.path, &m, &why);
        }
        id?;
        match found {
            Some(from) => match std::fs::rename(&from, &p.path) {
                Ok(()) => {
                    self.out.notes.push(format!("{what} was renamed to {} during the run: moved back", went.unwrap_or_default()));
                    Some(p.path.clone())
                }
                Err(e) => {
                    self.out.notes.push(format!("{what} was renamed to {} during the run and could not be moved back ({e})", went.unwrap_or_default()));
                    None
                }
            },
            None => {
                self.out.notes.push(format!("{what} was removed or moved out of the workspace during the run: not put back"));
                None
            }
        }
    }

    /// A protected file that was bound for the run (a private copy, or read-only) is still the
    /// file of the launch (`id`: its device and inode then) at its path, with no link on the
    /// way. The mount kept the file itself from being renamed or replaced, but not its
    /// directory from being moved: what the command left on the way (a link in the directory's
    /// place, a new file at the path: a `.git` file naming a repository of the command's) is
    /// taken out, and the command's changes to the file are not applied.
    fn bound_file_in_place(&mut self, p: &ProtectedPath, id: Option<(u64, u64)>) -> bool {
        let Some(parent) = p.path.parent() else { return false };
        let parent_real = real_dir_path(parent);
        if !parent_real {
            self.link_on_the_way(p);
        }
        let cur = std::fs::symlink_metadata(&p.path).ok();
        let same = match (&cur, id) {
            (Some(m), Some((dev, ino))) => m.dev() == dev && m.ino() == ino,
            (Some(m), None) => m.is_file(),
            (None, _) => false,
        };
        if same && parent_real {
            return true;
        }
        let what = self.rel(&p.path);
        if let Some(m) = cur {
            self.quarantine(&p.path, &m, &format!("it stood where the protected {what} was (the command moved its directory during the run)"));
        }
        self.out.notes.push(format!("{what} was moved with a parent directory during the run: the command's changes to it were not applied"));
        false
    }

    /// Takes out the first symbolic link on the way from `p`'s writable root to `p` (none at
    /// launch: a link there now is the command's), if there is one.
    fn link_on_the_way(&mut self, p: &ProtectedPath) -> bool {
        let root = self.root_of(&p.path);
        let link = p.path.ancestors().skip(1).take_while(|a| a.starts_with(root) && *a != root).filter(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink())).last().map(Path::to_path_buf);
        let Some((l, m)) = link.and_then(|l| std::fs::symlink_metadata(&l).ok().map(|m| (l, m))) else { return false };
        let why = format!("a symbolic link on the way to the protected {} ({}{})", self.rel(&p.path), if p.absent { "absent at launch: " } else { "" }, p.reason);
        self.quarantine(&l, &m, &why);
        true
    }

    /// The writable root `p` lies in (the innermost one; the workspace when none).
    fn root_of(&self, p: &Path) -> &Path {
        self.roots.iter().filter(|r| p.starts_with(r)).max_by_key(|r| r.as_os_str().len()).map_or(self.ws, PathBuf::as_path)
    }

    /// Puts the mode and times of the snapshot back on the directories the review re-created
    /// (deepest first, after everything inside them was restored).
    fn put_back_dir_meta(&mut self, snap: &Snap, root: &Path) {
        let mut recreated = std::mem::take(&mut self.recreated);
        recreated.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for target in recreated {
            let Some((_, mode, atime, mtime)) = snap.dirs.iter().find(|(r, ..)| root.join(r) == target) else { continue };
            let _ = std::fs::set_permissions(&target, std::fs::Permissions::from_mode(*mode));
            if let Ok(c) = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()) {
                // SAFETY: a valid C string and two timespecs; AT_SYMLINK_NOFOLLOW (it was just made a directory).
                let ts = |(tv_sec, tv_nsec): (i64, i64)| libc::timespec { tv_sec, tv_nsec };
                unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [ts(*atime), ts(*mtime)].as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
            }
        }
    }

    fn in_place(&mut self, snap: &Snap) {
        let p = &snap.p;
        if p.kind == ProtectedKind::File {
            // The way to every protected path had no symbolic link at launch (the planner
            // follows each one, protecting the link and where it leads): a link on the way now is
            // the command's (`ln -s elsewhere dir`, leading a link target or a nested file to a
            // file of its choosing). Taken out first; the file is then reviewed where it is.
            if p.path.parent().is_some_and(|d| d != self.root_of(&p.path) && !real_dir_path(d)) {
                self.link_on_the_way(p);
            }
            let mut now = std::fs::symlink_metadata(&p.path).ok();
            if let Some(m) = now.as_ref().filter(|m| m.is_dir()) {
                // A directory where the file was (or was to be): kept aside whole.
                let what = self.rel(&p.path);
                self.quarantine(&p.path, m, &format!("a directory made where the protected file {what} was (or could be)"));
                now = std::fs::symlink_metadata(&p.path).ok();
            }
            let new = now.map(|m| state_of(&p.path, &m, true, &mut usize::MAX.clone()));
            if new != snap.file {
                let why = match keys_review(p, snap.file.as_ref(), new.as_ref()) {
                    // Protected by its keys, which are as they were: applied.
                    Some(Ok(())) => return,
                    Some(Err(e)) => format!("{}: {e}", file_why(p)),
                    None => file_why(p),
                };
                self.take_back(&p.path, snap.file.as_ref(), new.as_ref(), &why);
            }
            return;
        }
        let Some(root) = self.locate(&snap.p, snap.id) else { return };
        self.out.reviewed.push(root.clone());
        self.in_place_dir(snap, &root);
        self.put_back_dir_meta(snap, &root);
    }

    fn in_place_dir(&mut self, snap: &Snap, root: &Path) {
        let p = &snap.p;
        let git = p.kind == ProtectedKind::GitDir;
        let mut budget = usize::MAX;
        let before: HashMap<&Path, &State> = snap.entries.iter().map(|(r, s)| (r.as_path(), s)).collect();
        let ctimes: HashMap<&Path, (i64, i64)> = snap.ctimes.iter().map(|(r, s, ns)| (r.as_path(), (*s, *ns))).collect();
        let settled: HashMap<&Path, (u64, u64, i64, i64)> = snap.settled.iter().map(|(r, d, i, s, ns)| (r.as_path(), (*d, *i, *s, *ns))).collect();
        let mut unread = Unread::default();
        let walked = walk_review(root, git, Some(&mut unread));
        let notes = unread.notes(|d| self.rel(d));
        self.out.notes.extend(notes);
        let now: Vec<(PathBuf, State)> = walked.into_iter().map(|(r, m)| {
            // The launch's inode at its launch change time, clearly before the start, is what it
            // was (any write, chmod, link or rename since moved it to the run's time): not read
            // again.
            let st = match (before.get(r.as_path()), settled.get(r.as_path())) {
                (Some(State::File(_, content, _)), Some(&(d, i, s, ns)))
                    if m.is_file() && (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()) == (d, i, s, ns) && !changed_after(s, ns, self.start) =>
                {
                    State::File(m.mode() & 0o7777, content.clone(), m.nlink() > 1)
                }
                _ => {
                    let keep = (worth_keeping(p.kind, &r) || self.includes.contains(&root.join(&r))) && !m.is_dir();
                    state_of(&root.join(&r), &m, keep, &mut budget)
                }
            };
            (r, st)
        }).collect();
        if git {
            self.gitdirs = now.iter().filter(|(r, _)| r.file_name().is_some_and(|n| n == "HEAD")).filter_map(|(r, _)| r.parent().map(Path::to_path_buf)).collect();
        }
        let after: HashMap<&Path, &State> = now.iter().map(|(r, s)| (r.as_path(), s)).collect();
        let mut rels: Vec<PathBuf> = snap.entries.iter().map(|(r, _)| r.clone()).chain(now.iter().map(|(r, _)| r.clone())).collect();
        rels.sort();
        rels.dedup();
        let mut taken_dirs: Vec<PathBuf> = Vec::new();
        for rel in rels {
            if taken_dirs.iter().any(|d| rel.starts_with(d)) {
                continue;
            }
            let (old, new) = (before.get(rel.as_path()).map(|s| (*s).clone()), after.get(rel.as_path()).map(|s| (*s).clone()));
            let same = match (&old, &new) {
                // The mode too (`chmod +x` on a hook git skipped arms it), and a new hard link
                // (the file could then be changed through its other name, unreviewed).
                (Some(State::File(m1, Some(a), l1)), Some(State::File(m2, Some(b), l2))) => m1 == m2 && a == b && l1 == l2,
                (Some(State::File(m1, None, l1)), Some(State::File(m2, _, l2))) => {
                    let at = root.join(&rel);
                    // (A FIFO or device has no entry: its type and mode are what counts.)
                    let ctime_kept = ctimes.get(rel.as_path()).is_none_or(|&(s, ns)| std::fs::symlink_metadata(&at).is_ok_and(|m| m.ctime() == s && m.ctime_nsec() == ns));
                    m1 == m2 && l1 == l2 && ctime_kept && !maybe_changed_since(&at, self.start)
                }
                (a, b) => a == b,
            };
            if same {
                continue;
            }
            let target = root.join(&rel);
            // Content and mode unchanged, only another name gained: said so (the change kept
            // pending is the file as it is, which has no other name once written back).
            let link_only = matches!((&old, &new), (Some(State::File(m1, Some(a), false)), Some(State::File(m2, Some(b), true))) if m1 == m2 && a == b);
            let said = |why: &str| if link_only { format!("{why}; it only gained another name (a hard link), through which it could be changed where no review looks") } else { why.to_string() };
            // A FIFO, socket or device the command left where a file is (or made): git and
            // editors would open it and hang (`.git/config` as a FIFO stops every git command
            // and the next run's planning) or read a device. Taken out, the file of the launch
            // put back.
            if matches!(new, Some(State::File(m, None, _)) if m & 0o170_000 != 0) {
                self.out.notes.push(format!("{}: a FIFO, socket or device made during the run: taken out", self.rel(&target)));
                self.restore(&target, old.as_ref());
                continue;
            }
            if !git {
                // A new directory of .vscode and the like goes whole (its files with it).
                if matches!(new, Some(State::Dir)) && old.is_none() {
                    for (r, st) in now.iter().filter(|(r, _)| r.starts_with(&rel) && *r != rel) {
                        if let State::File(mode, ..) = st {
                            if let Ok(d) = read_regular(&root.join(r)) {
                                self.keep(&root.join(r), PendingAction::Write { mode: *mode }, &format!("a file in {} (its files can run code later, outside the sandbox)", self.rel(&p.path)), Some(&d));
                            }
                        }
                    }
                    self.restore(&target, None);
                    taken_dirs.push(rel);
                    continue;
                }
                self.take_back(&target, old.as_ref(), new.as_ref(), &said(&format!("a file in {} (its files can run code later, outside the sandbox)", self.rel(&p.path))));
                continue;
            }
            // A new directory in git's: its files are reviewed one by one (a new `hooks` of a
            // `git init` keeps its samples; a hook in it is pending on its own).
            if matches!(new, Some(State::Dir)) && old.is_none() {
                continue;
            }
            let text = match &new {
                Some(State::File(_, Some(c), _)) => Some(c.as_slice()),
                _ => None,
            };
            match self.verdict(root, None, &rel, matches!(new, Some(State::Link(_))), new.is_none(), old.is_some(), text) {
                Verdict::Accept | Verdict::Drop => {}
                Verdict::Pending(why) => self.take_back(&target, old.as_ref(), new.as_ref(), &said(why)),
                Verdict::Config => self.config_in_place(&target, old.as_ref(), new.as_ref()),
            }
        }
    }

    /// The in-place review of a changed config file ([`review::review_config`]): what is not
    /// proven harmless is taken back (the file rewritten without it, or put back whole).
    fn config_in_place(&mut self, target: &Path, old: Option<&State>, new: Option<&State>) {
        let old_bytes = match old {
            None => None,
            Some(State::File(_, Some(c), _)) => Some(c.as_slice()),
            Some(_) => return self.take_back(target, old, new, "a git config file that was not a file of known content before the run: kept whole"),
        };
        let Some(State::File(mode, Some(new_bytes), _)) = new else {
            return self.take_back(target, old, new, "a git config file replaced by something that is not a readable file: kept whole");
        };
        match review::review_config(old_bytes, new_bytes, &crate::guard::gitoracle::config_list) {
            ConfigOutcome::Whole(why) => self.take_back(target, old, new, &format!("a git config file kept whole: {why}")),
            ConfigOutcome::Split { text, applied, pending } => {
                if !pending.is_empty() {
                    let written = safe_parent(target).map_err(|e| e.to_string()).and_then(|()| pending::write_atomic(target, text.as_bytes(), *mode).map_err(|e| e.to_string()));
                    if let Err(e) = written {
                        self.out.notes.push(format!("{}: keys not proven harmless could not be taken back ({e}): live", self.rel(target)));
                    }
                }
                self.keep_config_keys(target, pending);
                if !applied.is_empty() {
                    self.out.applied.push(format!("{} ({})", self.rel(target), applied.iter().map(review::KeyChange::name).collect::<Vec<_>>().join(", ")));
                }
            }
        }
    }
}

/// Reviews the protected paths of `snapshot` in place after the run (see above), adding to
/// `out`.
pub fn review_in_place(ws: &Path, snapshot: &Snapshot, start: SystemTime, out: &mut ProtectedReview) {
    let mut r = Reviewer { ws, roots: &snapshot.3, start, out: std::mem::take(out), recreated: Vec::new(), includes: &snapshot.2, gitdirs: Vec::new() };
    for s in &snapshot.0 {
        r.in_place(s);
        // An absent directory the command created, now emptied by the review, goes too (git's
        // directory is not taken back whole: `git init` in the workspace is ordinary work).
        if s.p.absent && s.p.kind == ProtectedKind::Dir {
            let _ = std::fs::remove_dir(&s.p.path);
        }
    }
    *out = r.out;
}

/// The walk after the run of a root whose launch walk the walk service made
/// ([`crate::guard::walkd`]): the service's, from the directories the kernel reported changed;
/// `None`, with a note, where it does not answer (the caller then reads the whole root: every name
/// there not protected at launch is reviewed as made during the run, kept aside, never lost; and
/// what it read is recorded, as a walk in the process records it).
fn after_walk_in_service(plan: &crate::plan::Plan, w: &crate::guard::protected::RootWalk, names: &[&str], token: u64, out: &mut ProtectedReview) -> Option<crate::guard::nested::NestedWalk> {
    use crate::guard::walkd::{ask, Request};
    let req = Request::After { root: w.root.clone(), names: names.iter().map(|n| (*n).to_string()).collect(), token };
    if let Some(Some(a)) = plan.walk_records.as_deref().and_then(|d| ask(d, &req)) {
        return Some(crate::guard::nested::NestedWalk { found: a.found, repos: a.repos, ..Default::default() });
    }
    out.notes.push(format!("the walk service did not answer after the run: {} was read whole for protected names made during the run", crate::guard::protected::root_name(&w.root, &plan.workspace)));
    None
}

/// After the run: the protected names the command created in the subdirectories of each
/// writable root (a `git init child` and its hook, `sub/.vscode/tasks.json`, a `sub/.git` link),
/// found by the launch's walk ([`crate::guard::protected::walk_nested`], the same depth and
/// skipped names), are reviewed as paths absent at launch: what could run code is taken back out
/// and kept as a pending change. A directory that was protected at launch and reviewed where it
/// moved to is not new. When a root's launch walk ran out of its budget nothing is taken back
/// there (a name it did not reach may be the user's), and that is noted. The walk after the run
/// has no budget: it reads only the directories changed since the launch read them (whole) and
/// those new in them, so its cost follows what the command wrote — with a budget, a command that
/// filled a directory with 50 000 empty files first hid a `git init b` with a hook from it. What
/// both walks read is then recorded for the next launch walk ([`crate::guard::nested`]), so that
/// nothing this run made counts against the next launch walk's budget either.
pub fn review_new_nested(plan: &crate::plan::Plan, start: SystemTime, out: &mut ProtectedReview) {
    use crate::guard::protected::{nested_protection, root_name, walk_nested, Known};
    let ws = &plan.workspace;
    // The names the launch walk looked for (the table's, or the configured ones): not the
    // workspace's other protected paths (a link's target, `core.hooksPath`'s directory), which
    // are protected where they are, not as names wherever they appear.
    let names: Vec<&str> = plan.nested_names.iter().map(String::as_str).collect();
    if names.is_empty() {
        return;
    }
    let mut found: Vec<(PathBuf, bool)> = Vec::new();
    let mut repos: Vec<PathBuf> = Vec::new();
    for w in &plan.nested_walks {
        // A root protected whole (a git directory granted writable) was reviewed whole.
        if plan.protected.iter().any(|p| p.path == w.root) {
            continue;
        }
        let (after, by_service) = if w.stopped {
            out.notes.push(format!("the launch walk for nested protected names in {} stopped after {} entries: names created in its subdirectories during the run were not reviewed", root_name(&w.root, ws), w.budget));
            (Vec::new(), false)
        } else {
            let walk = match w.service {
                Some(token) => after_walk_in_service(plan, w, &names, token, out),
                None => Some(walk_nested(&w.root, &names, usize::MAX, Known::AfterRun(&w.listings))),
            };
            // The service answered (it keeps its own records), or the root was read here.
            let (mut walk, by_service) = match walk {
                Some(walk) => (walk, w.service.is_some()),
                None => (walk_nested(&w.root, &names, usize::MAX, Known::Launch(None)), false),
            };
            // A directory the walk could not read is the user's to read again, or said.
            let given = crate::guard::nested::read_unreadable(&w.root, &names, &mut walk);
            let unread = Unread { given, left: walk.unreadable.iter().map(|(d, _)| d.clone()).collect() };
            out.notes.extend(unread.notes(|d| rel_to(ws, d)));
            for f in walk.found {
                if !found.iter().any(|(p, _)| *p == f.0) {
                    found.push(f);
                }
            }
            if names.contains(&".git") {
                for d in walk.repos {
                    if !repos.contains(&d) {
                        repos.push(d);
                    }
                }
            }
            (walk.listings, by_service)
        };
        // What both walks read, for the next launch walk: a directory made during the run is
        // read then without counting against its budget (what it then reads again is only what
        // changed since). A stopped walk's part, so that the next one goes further.
        // (Nothing new to record when every directory was held by its record and none changed.)
        // (The walk service keeps its own; a root read whole here, when it did not answer, is
        // recorded from that read.)
        // A launch walk the service made left no listings here: nothing to write unless this
        // process read the root itself (the service did not answer after the run); writing
        // nothing over the records would have wiped them (a stopped walk has no `after`).
        let unchanged = by_service || (after.is_empty() && (w.service.is_some() || w.from_records == w.listings.len()));
        if let Some(dir) = plan.walk_records.as_ref().filter(|_| !unchanged) {
            if let Err(e) = crate::guard::nested::save(dir, &w.root, &names, w.listings.iter().chain(&after)) {
                out.notes.push(format!("the nested walk's records of {} were not kept ({e}): the next launch walk reads its directories again, within its budget", root_name(&w.root, ws)));
            }
        }
    }
    // What git lists now where a hook manager reads its configuration anywhere (lint-staged),
    // beyond the walk's reach: each one that was not protected at launch (made during the run,
    // or shown to git by a change to a `.gitignore`) is reviewed as made during the run.
    let mut found: Vec<(PathBuf, bool, &[String])> = found.into_iter().map(|(p, d)| (p, d, plan.nested_hook_names.as_slice())).collect();
    // (A set beside the list: git may list as many files as the command made.)
    let mut seen: std::collections::HashSet<PathBuf> = found.iter().map(|(p, _, _)| p.clone()).collect();
    // One git could not list (made to fail, perhaps) has every file of those names in its root
    // reviewed so, whatever git would show.
    for l in &plan.git_listings {
        let files = crate::guard::protected::git_listed(l, plan.walk_records.as_deref()).unwrap_or_else(|e| {
            out.notes.push(format!(
                "{} after the run ({e}): every file of their names in {} that was not protected at launch was reviewed as made during the run",
                crate::guard::protected::LISTING_FAILED.replace("this worktree", &root_name(&l.worktree, ws)),
                root_name(&l.root, ws)
            ));
            crate::guard::protected::files_named_anywhere(&l.root, &l.names)
        });
        for f in files {
            if seen.insert(f.clone()) {
                found.push((f, false, l.names.as_slice()));
            }
        }
    }
    let roots = writable_roots(plan);
    let mut r = Reviewer { ws, roots: &roots, start, out: std::mem::take(out), recreated: Vec::new(), includes: &[], gitdirs: Vec::new() };
    for (path, is_dir, hook_names) in found {
        // Reviewed already: at its own path (or inside a directory protected whole), or where a
        // protected directory moved to.
        if plan.protected.iter().any(|p| path.starts_with(&p.path)) || plan.unprotectable.iter().any(|u| u.path == path) || r.out.reviewed.contains(&path) {
            continue;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (kind, keys, why) = nested_protection(&name, is_dir, hook_names);
        let mut snap = Snap::absent(path, kind, format!("created during the run: {why}"));
        snap.p.keys = keys;
        r.in_place(&snap);
        if kind == ProtectedKind::Dir {
            let _ = std::fs::remove_dir(&snap.p.path);
        }
    }
    // A directory git discovers as a repository without a `.git`, made (or made one) during the
    // run: reviewed as a git directory absent at launch.
    for path in repos {
        if plan.protected.iter().any(|p| p.path == path) || r.out.reviewed.contains(&path) {
            continue;
        }
        let reason = format!("created during the run: {}", crate::guard::protected::REPO_WHY);
        let snap = Snap::absent(path, ProtectedKind::GitDir, reason);
        r.in_place(&snap);
    }
    *out = r.out;
}

/// After the run: the submodules the command registered (a gitlink added to an index, a path
/// added to `.gitmodules`), wherever they are ([`crate::guard::protected::submodule_gits`]: the
/// nested walk skips `build/` and stops at depth 4; git enters every gitlink with a `.git` for the
/// superproject's `git status`). The `.git` of each one that was not protected at launch is
/// reviewed as created during the run: a `.git` file is taken out, a git directory's hooks and
/// executable config keys are. A symbolic link on the way to one is taken out (git would enter
/// the repository behind it). An index that cannot be read is noted.
pub fn review_new_submodules(plan: &crate::plan::Plan, start: SystemTime, out: &mut ProtectedReview) {
    use crate::guard::protected::submodule_gits;
    let ws = &plan.workspace;
    let is_git = |p: &&PathBuf| p.file_name().is_some_and(crate::guard::protected::is_dotgit);
    let gits: Vec<PathBuf> = plan.protected.iter().map(|p| &p.path).chain(out.reviewed.iter()).filter(is_git).cloned().collect();
    // Each writable root's (the workspace alone when none is known), as at launch.
    let mut subs = crate::guard::protected::SubmoduleGits::default();
    let mut roots = writable_roots(plan);
    if roots.is_empty() {
        roots.push(ws.clone());
    }
    // Roots can nest (the workspace inside an `--allow-write` directory): each find once.
    fn extend_new<T: PartialEq>(into: &mut Vec<T>, from: Vec<T>) {
        for x in from {
            if !into.contains(&x) {
                into.push(x);
            }
        }
    }
    for root in &roots {
        // A root protected whole (a git directory granted writable) was reviewed whole.
        if plan.protected.iter().any(|p| p.path == *root) {
            continue;
        }
        // The repository git finds from the root, as at launch: its own, or the one around it
        // (whose index the run could write: the repository around the workspace).
        let mut dotgits: Vec<PathBuf> = crate::guard::gitindex::enclosing_dotgit(root).into_iter().collect();
        dotgits.extend(gits.iter().filter(|g| g.starts_with(root)).cloned());
        let mut found = submodule_gits(root, &dotgits, plan.walk_records.as_deref());
        // Only the submodules inside the root are this root's (the repository around it
        // registers others, elsewhere in its worktree), as at launch.
        found.plain.retain(|(g, _)| g.starts_with(root));
        found.linked.retain(|(l, _)| l.starts_with(root));
        extend_new(&mut subs.unreadable, found.unreadable);
        extend_new(&mut subs.linked, found.linked);
        extend_new(&mut subs.plain, found.plain);
    }
    let mut r = Reviewer { ws, roots: &roots, start, out: std::mem::take(out), recreated: Vec::new(), includes: &[], gitdirs: Vec::new() };
    let known = |p: &Path, r: &Reviewer<'_>| plan.protected.iter().any(|q| q.path == p) || plan.unprotectable.iter().any(|u| u.path == p) || r.out.reviewed.iter().any(|q| q == p);
    for (index, e) in subs.unreadable {
        if !plan.unprotectable.iter().any(|u| u.path == index) {
            r.out.notes.push(format!("{}: {e}: submodules registered in it during the run were not reviewed", r.rel(&index)));
        }
    }
    for (link, git) in subs.linked {
        // A link present at launch is protected itself (the planner follows it: the link is
        // reviewed as a file, where it leads as what it is).
        if known(&git, &r) || known(&link, &r) {
            continue;
        }
        if let Ok(m) = std::fs::symlink_metadata(&link) {
            let why = format!("a symbolic link on the way to a submodule registered during the run ({}): git would enter the repository behind it", r.rel(&git));
            r.quarantine(&link, &m, &why);
        }
    }
    for (path, why) in subs.plain {
        if known(&path, &r) || std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let reason = format!("registered as a submodule during the run ({why}): git enters it for the superproject's git status");
        let snap = Snap::absent(path, ProtectedKind::GitDir, reason);
        r.in_place(&snap);
    }
    *out = r.out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_runner_is_alive_until_only_its_exit_status_is_left() {
        assert!(process_start(std::process::id()).is_some());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited, not yet waited for: a zombie, not a runner.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while process_start(pid).is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(process_start(pid), None);
        child.wait().unwrap();
        assert_eq!(process_start(pid), None);
    }

    #[test]
    fn an_unreadable_directory_is_said_once_with_why_it_stays_unread() {
        use std::os::unix::fs::PermissionsExt;
        let t = std::env::temp_dir().join(format!("lg-unread-{}", std::process::id()));
        let (mine, back, gone) = (t.join("mine"), t.join("back"), t.join("gone"));
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::create_dir_all(&back).unwrap();
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
        let u = Unread { given: vec![back.clone(), mine.clone()], left: vec![mine.clone(), gone.clone()] };
        let notes = u.notes(|d| rel_to(&t, d));
        assert_eq!(notes.len(), 3, "{notes:#?}");
        assert!(notes[0].starts_with("back: its read permission had been taken away") && notes[0].ends_with("and reviewed"), "{notes:#?}");
        // Given back yet refused (its owner may read it): not said reviewed, nor another user's.
        assert_eq!(notes[1], "mine: yours, yet reading it is refused although its mode lets you (an ACL or a security module): what it holds was not reviewed");
        assert_eq!(notes[2], "gone: not readable by you: what it holds was not reviewed");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = t.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::lchown(&theirs, Some(65534), Some(65534)).unwrap();
            let notes = Unread { given: vec![], left: vec![theirs] }.notes(|d| rel_to(&t, d));
            assert_eq!(notes, ["theirs: another user's, not readable by you and not yours to make readable: what it holds was not reviewed"]);
        }
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn a_change_a_clock_tick_before_the_start_counts_as_during_the_run() {
        let start = std::time::UNIX_EPOCH + Duration::new(1_700_000_000, 500_000_000);
        // After the start, or just before it (the coarse clock's lag): changed.
        assert!(changed_after(1_700_000_000, 500_000_001, start));
        assert!(changed_after(1_700_000_000, 500_000_000, start));
        assert!(changed_after(1_700_000_000, 490_000_000, start));
        assert!(changed_after(1_700_000_001, 1, start));
        // Well before: not (the old code's answer too).
        assert!(!changed_after(1_700_000_000, 400_000_000, start));
        assert!(!changed_after(1_699_999_999, 999_999_999, start));
        // Whole seconds only: the start's second and the one before are in doubt.
        assert!(changed_after(1_700_000_000, 0, start));
        assert!(changed_after(1_699_999_999, 0, start));
        assert!(!changed_after(1_699_999_998, 0, start));
        // A start just after a second boundary, the change in the previous second.
        let early = std::time::UNIX_EPOCH + Duration::new(1_700_000_000, 5_000_000);
        assert!(changed_after(1_699_999_999, 990_000_000, early));
        assert!(!changed_after(1_699_999_999, 900_000_000, early));
    }
}
