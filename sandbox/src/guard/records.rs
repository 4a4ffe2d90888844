//! The runner's private record store and the change-time rules its records rest on: the
//! nested walk's records ([`super::nested`]) and what git indexes register
//! ([`super::gitindex`]) are kept here, one file per root, in a directory private to this user
//! (`$XDG_STATE_HOME/localgpt/sandbox/walks`), written whole and put in place atomically, read
//! back only when this user alone could have written them. What a record says is each reader's
//! to check. Layer 1 of `ARCHITECTURE.md`: the standard library, `libc` and `host`.

#[cfg(target_os = "linux")]
use std::path::{Path, PathBuf};

/// A directory whose change time is this close to when it was read (or later) may change again
/// without its change time changing (see the module docs): its record is not trusted.
pub const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// A file time (`secs`, `nsecs` as `stat` gives them) in ns since the epoch.
#[cfg(unix)]
#[must_use]
pub(crate) fn time_ns(secs: i64, nsecs: i64) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nsecs)
}

/// The wall clock in ns since the epoch (the clock file times come from).
pub(crate) fn now_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// The filesystem `st` describes keeps change times itself: every change to a file or directory
/// sets its change time to the current time, and no process can set it (Linux: ext2–4, xfs,
/// btrfs, tmpfs, ramfs, overlayfs, f2fs, bcachefs, zfs). Records of what a directory or file held
/// are trusted only there: elsewhere (FAT, exFAT, NTFS, network and FUSE filesystems, whose times
/// come from an on-disk format, a server or a user-space process, or from a cache) what a record
/// would stand for is read again.
#[cfg(target_os = "linux")]
pub(crate) fn keeps_change_times(st: &libc::statfs) -> bool {
    const KEPT: &[i64] = &[0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x8584_58f6, 0x794c_7630, 0xF2F5_2010, 0xca45_1a4e, 0x2fc1_2fc1];
    #[allow(clippy::unnecessary_cast)]
    KEPT.contains(&(st.f_type as i64))
}

/// [`keeps_change_times`] for the filesystem of the open descriptor `fd`.
#[cfg(target_os = "linux")]
pub(crate) fn change_time_kept(fd: std::os::fd::RawFd) -> bool {
    // SAFETY: a zeroed statfs buffer filled by fstatfs on a descriptor the caller holds.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    (unsafe { libc::fstatfs(fd, &mut st) } == 0) && keeps_change_times(&st)
}

/// [`keeps_change_times`] for the filesystem of `path` (nothing opened: `statfs`; links followed).
#[cfg(target_os = "linux")]
pub(crate) fn change_time_kept_at(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: a zeroed statfs buffer; statfs with a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0) && keeps_change_times(&st)
}

/// FNV-1a (64 bit) of `b`: names of record files (what they stand for is checked inside them)
/// and the audit log's policy digest. Not a cryptographic hash.
#[must_use]
pub(crate) fn fnv1a64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ u64::from(*x)).wrapping_mul(0x0100_0000_01b3))
}

/// A record's decimal number as [`WalkCache::encode`] writes it: digits only, no sign, no
/// leading zero (but `0` itself); `None` for anything else or beyond `u128`.
pub(crate) fn decimal(b: &[u8]) -> Option<u128> {
    if b.is_empty() || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    b.iter().try_fold(0u128, |n, &d| if d.is_ascii_digit() { n.checked_mul(10)?.checked_add(u128::from(d - b'0')) } else { None })
}

/// [`decimal`] with an optional `-` (not before `0`), within `i128`.
pub(crate) fn signed_decimal(b: &[u8]) -> Option<i128> {
    match b.strip_prefix(b"-") {
        Some(digits) if digits != b"0" => i128::try_from(decimal(digits)?).ok().map(|v| -v),
        Some(_) => None,
        None => i128::try_from(decimal(b)?).ok(),
    }
}

/// Where the records are kept (Linux): `$XDG_STATE_HOME/localgpt/sandbox/walks`, beside the
/// pending changes. Whether a run may use it is the planner's decision (it must lie outside
/// everything the command can write).
#[cfg(target_os = "linux")]
#[must_use]
pub fn records_dir() -> PathBuf {
    crate::host::state_dir().join("walks")
}

/// The bytes of the record file `name` in `dir`, or `None` (no such regular file of this user,
/// writable by no one else, in a private directory of this user; nothing followed through a
/// link). What they say is the caller's to check.
#[cfg(target_os = "linux")]
#[must_use]
pub(crate) fn load_record(dir: &Path, name: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let d = private_dir(dir, false)?;
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: openat relative to our directory descriptor with a NUL-terminated name.
    let fd = unsafe { libc::openat(std::os::fd::AsRawFd::as_raw_fd(&d), name.as_ptr(), libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: we own fd.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let m = f.metadata().ok()?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.is_file() || m.uid() != me || m.mode() & 0o022 != 0 {
        return None;
    }
    let mut b = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0).min(64 << 20));
    f.by_ref().take(256 << 20).read_to_end(&mut b).ok()?;
    Some(b)
}

/// Writes the record file `name` (one of [`RECORD_PREFIXES`]) into `dir` (made private to this
/// user when missing): written whole under a temporary name and put in place atomically,
/// nothing followed through a link. A new record first makes room (see [`prune`]).
///
/// # Errors
/// Why nothing was written.
#[cfg(target_os = "linux")]
pub(crate) fn save_record(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let d = private_dir(dir, true).ok_or_else(|| format!("{} is not a private directory of this user", dir.display()))?;
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = format!(".{name}.{}-{}.tmp", std::process::id(), SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let (tmp_c, final_c) = (std::ffi::CString::new(tmp).map_err(|e| e.to_string())?, std::ffi::CString::new(name).map_err(|e| e.to_string())?);
    // A record made for the first time: the oldest records go when there are too many (every
    // temporary workspace leaves one).
    // SAFETY: a zeroed stat buffer; fstatat relative to our directory descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above, with a NUL-terminated name.
    if unsafe { libc::fstatat(d.as_raw_fd(), final_c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        prune(&d);
    }
    // SAFETY: openat relative to our directory descriptor with a NUL-terminated name.
    let fd = unsafe { libc::openat(d.as_raw_fd(), tmp_c.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(format!("create a record in {}: {}", dir.display(), std::io::Error::last_os_error()));
    }
    // SAFETY: we own fd.
    let mut f = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let written = std::io::Write::write_all(&mut f, bytes);
    drop(f);
    let placed = written.and_then(|()| replace_at(d.as_raw_fd(), &tmp_c, &final_c));
    if let Err(e) = placed {
        // SAFETY: unlinkat relative to our directory descriptor with a NUL-terminated name.
        unsafe { libc::unlinkat(d.as_raw_fd(), tmp_c.as_ptr(), 0) };
        return Err(format!("write a record in {}: {e}", dir.display()));
    }
    Ok(())
}

/// Puts the file `tmp` of the directory `dir` in place of its file `target`, atomically (a
/// reader opens the old record or the new one, never none). An existing record is swapped with
/// `tmp` (`renameat2(RENAME_EXCHANGE)`) and the old one, now at `tmp`, removed: a rename over an
/// existing file makes ext4 write the new file's data out before the rename returns (its
/// `auto_da_alloc`), ~0.1 ms of each run whose walk changed, where the swap costs ~20 µs. The
/// durability that buys is not needed: a record cut by a crash does not read back and is no
/// record at all. No record yet, or a filesystem that cannot swap: a plain rename.
///
/// # Errors
/// The rename's error; `tmp` is left for the caller to remove.
#[cfg(target_os = "linux")]
fn replace_at(dir: std::os::fd::RawFd, tmp: &std::ffi::CStr, target: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: renameat2 relative to our directory descriptor with NUL-terminated names.
    let swapped = unsafe { libc::syscall(libc::SYS_renameat2, dir, tmp.as_ptr(), dir, target.as_ptr(), libc::RENAME_EXCHANGE) } == 0;
    if swapped {
        // SAFETY: as above: `tmp` now names the old record.
        unsafe { libc::unlinkat(dir, tmp.as_ptr(), 0) };
        return Ok(());
    }
    // ENOENT: no record yet; EINVAL / ENOSYS: no swap here. Anything else is the rename's error.
    let e = std::io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINVAL | libc::ENOSYS)) {
        return Err(e);
    }
    // SAFETY: as above.
    if unsafe { libc::renameat(dir, tmp.as_ptr(), dir, target.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The names record files start with: a root's walk ([`record_name`]), and what a git index
/// registers ([`crate::guard::gitindex`]).
#[cfg(target_os = "linux")]
pub(crate) const RECORD_PREFIXES: &[&str] = &["walk-", "gitlinks-"];

/// The most record files kept: beyond, the least recently written go, down to
/// [`KEPT_AFTER_PRUNE`] (a root whose record went is walked again within the budget).
#[cfg(target_os = "linux")]
pub(crate) const MAX_RECORD_FILES: usize = 1000;
#[cfg(target_os = "linux")]
pub(crate) const KEPT_AFTER_PRUNE: usize = 800;

/// Removes the least recently written records of the directory `d` when it holds more than
/// [`MAX_RECORD_FILES`], and temporary files more than an hour old (a writer that died).
#[cfg(target_os = "linux")]
fn prune(d: &std::fs::File) {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: openat of "." relative to our directory descriptor: a second descriptor of it.
    let fd = unsafe { libc::openat(d.as_raw_fd(), c".".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return;
    }
    let Ok(list) = std::fs::read_dir(format!("/proc/self/fd/{fd}")) else {
        // SAFETY: closing our descriptor.
        unsafe { libc::close(fd) };
        return;
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |t| t.as_secs());
    let mut records: Vec<(i64, std::ffi::CString)> = Vec::new();
    for e in list.flatten() {
        let Ok(name) = std::ffi::CString::new(e.file_name().as_bytes()) else { continue };
        // SAFETY: a zeroed stat buffer; fstatat relative to our directory descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstatat(d.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
            continue;
        }
        let b = name.as_bytes();
        if RECORD_PREFIXES.iter().any(|p| b.starts_with(p.as_bytes())) {
            records.push((st.st_mtime, name));
        } else if b.first() == Some(&b'.') && RECORD_PREFIXES.iter().any(|p| b[1..].starts_with(p.as_bytes())) && b.ends_with(b".tmp") && u64::try_from(st.st_mtime).is_ok_and(|m| m + 3600 < now) {
            // SAFETY: unlinkat relative to our directory descriptor.
            unsafe { libc::unlinkat(d.as_raw_fd(), name.as_ptr(), 0) };
        }
    }
    // SAFETY: closing our descriptor.
    unsafe { libc::close(fd) };
    if records.len() > MAX_RECORD_FILES {
        records.sort();
        for (_, name) in &records[..records.len() - KEPT_AFTER_PRUNE] {
            // SAFETY: unlinkat relative to our directory descriptor.
            unsafe { libc::unlinkat(d.as_raw_fd(), name.as_ptr(), 0) };
        }
    }
}

/// Records can be kept in `dir`: it is missing (it will be made private to this user) or a
/// private directory of this user ([`super::nested::load`] and [`super::nested::save`] check it again as they open it).
#[cfg(target_os = "linux")]
#[must_use]
pub fn usable(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) || private_dir(dir, false).is_some()
}

/// `dir` opened as a real directory (no link followed) owned by this user with no group or other
/// access; made so first when `create` and it is missing.
#[cfg(target_os = "linux")]
fn private_dir(dir: &Path, create: bool) -> Option<std::fs::File> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    if create && std::fs::symlink_metadata(dir).is_err() {
        if let Some(parent) = dir.parent() {
            let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent);
        }
        let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
    }
    let d = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(dir).ok()?;
    let m = d.metadata().ok()?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    (m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0).then_some(d)
}
