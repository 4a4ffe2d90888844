//! The file-system facts the guard's stores need, in one seam per platform: a directory private
//! to the user, a symbolic link, a move across file systems, permission bits, a canonical path
//! and a file's identity. The rest of the guard (the pending store, the denied records) is the
//! same code on Linux, macOS and Windows.
//!
//! On Windows, "private" is the ACL a new directory inherits from its parent: the stores live
//! under `%LOCALAPPDATA%`, which only the user (and the administrators and SYSTEM) may open.
//! Permission bits map to the read-only attribute (0o444 read-only, 0o644 otherwise); a file's
//! identity is the volume serial number and file index of `GetFileInformationByHandle`.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// Creates `dir` (and, with `recursive`, its missing parents) private to the user: mode 0700 on
/// Unix; on Windows the ACL it inherits.
///
/// # Errors
/// As [`std::fs::DirBuilder::create`].
pub fn create_private_dir(dir: &Path, recursive: bool) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(recursive);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Removes the tree at `dir` (links removed, not followed); where that fails, gives every
/// directory its owner's write and search bits first (Go's module cache makes its directories
/// read-only) and tries again.
///
/// # Errors
/// As [`std::fs::remove_dir_all`] on the second try.
pub fn remove_tree(dir: &Path) -> std::io::Result<()> {
    fn open_dirs(dir: &Path) {
        let Ok(m) = std::fs::symlink_metadata(dir) else { return };
        if !m.file_type().is_dir() {
            return;
        }
        #[cfg(unix)]
        let _ = set_mode(dir, (mode(&m) | 0o700) & 0o7777);
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            open_dirs(&e.path());
        }
    }
    if std::fs::remove_dir_all(dir).is_ok() {
        return Ok(());
    }
    open_dirs(dir);
    std::fs::remove_dir_all(dir)
}

/// Makes `link` a symbolic link to `to` (on Windows a directory link when `to`, resolved
/// beside `link`, is a directory).
///
/// # Errors
/// As the platform's call (on Windows, creating links needs the privilege or developer mode).
pub fn symlink(to: &Path, link: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::os::unix::fs::symlink(to, link);
    #[cfg(windows)]
    {
        let resolved = link.parent().map_or_else(|| to.to_path_buf(), |p| p.join(to));
        if resolved.is_dir() {
            std::os::windows::fs::symlink_dir(to, link)
        } else {
            std::os::windows::fs::symlink_file(to, link)
        }
    }
}

/// Whether `e` says a rename crossed file systems (`EXDEV`; `ERROR_NOT_SAME_DEVICE`).
#[must_use]
pub fn is_cross_device(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    return e.raw_os_error() == Some(libc::EXDEV);
    #[cfg(windows)]
    return e.raw_os_error() == Some(windows_sys::Win32::Foundation::ERROR_NOT_SAME_DEVICE as i32);
}

/// The permission bits of `m` (Windows: 0o444 when read-only, else 0o644).
#[must_use]
pub fn mode(m: &std::fs::Metadata) -> u32 {
    #[cfg(unix)]
    return std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777;
    #[cfg(windows)]
    return if m.permissions().readonly() { 0o444 } else { 0o644 };
}

/// Sets the permission bits of `path` (Windows: read-only when no write bit is set).
///
/// # Errors
/// As [`std::fs::set_permissions`].
pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode & 0o777));
    #[cfg(windows)]
    {
        let mut p = std::fs::metadata(path)?.permissions();
        p.set_readonly(mode & 0o222 == 0);
        std::fs::set_permissions(path, p)
    }
}

/// Gives the directory at `path` (its last name not followed) its owner's read and search
/// permission back, where this user owns it and it lacks either; `Ok(false)` when it had both
/// (what was refused lies elsewhere). The review after a run reads the workspace as the user,
/// and a command may take the read permission of a directory it owns away (mode 0311: git
/// still finds a `.git` or a hook in it by name, without listing it) to hide what it made there
/// from that review; as the directory's owner, the review may always give it back. Windows has
/// no such bits: `Ok(false)`.
///
/// # Errors
/// A path that is not a directory, or not this user's (`PermissionDenied`: only its owner may
/// change its mode); the `lstat` or `fchmodat`'s.
pub fn let_owner_read(path: &Path) -> std::io::Result<bool> {
    let m = std::fs::symlink_metadata(path)?;
    if !m.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a directory"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        if m.uid() != unsafe { libc::geteuid() } {
            return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "another user's directory"));
        }
        let mode = m.mode() & 0o7777;
        if mode & 0o500 == 0o500 {
            return Ok(false);
        }
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: a NUL-terminated path; a link as its last name is refused (EOPNOTSUPP), not
        // followed.
        if unsafe { libc::fchmodat(libc::AT_FDCWD, c.as_ptr(), (mode | 0o500) as libc::mode_t, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(true)
    }
    #[cfg(not(unix))]
    Ok(false)
}

/// Options that create a new file with permission bits `mode` (Unix; ignored on Windows, where
/// [`set_mode`] applies them after the write).
pub fn with_mode(o: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(o, mode & 0o777);
    #[cfg(windows)]
    let _ = mode;
    o
}

/// `path` with every symbolic link resolved, in the form the rest of the code writes paths
/// (on Windows without the `\\?\` prefix of a drive path).
///
/// # Errors
/// As [`std::fs::canonicalize`].
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    let c = std::fs::canonicalize(path)?;
    #[cfg(windows)]
    if let Some(rest) = c.to_str().and_then(|s| s.strip_prefix(r"\\?\")) {
        // `\\?\C:\x` → `C:\x`; a UNC path (`\\?\UNC\…`) keeps its prefix.
        if rest.as_bytes().get(1) == Some(&b':') {
            return Ok(PathBuf::from(rest));
        }
    }
    Ok(c)
}

/// The identity of the file at `path` itself (a link is not followed): device and inode on
/// Unix; volume serial number and file index on Windows. `None` when it cannot be read.
#[must_use]
pub fn file_id(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some((m.dev(), m.ino()))
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Storage::FileSystem::{GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION, FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT};
        // No access asked: the identity only; the flags open a directory and a link itself.
        let f = OpenOptions::new().access_mode(0).custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT).open(path).ok()?;
        // SAFETY: an open handle and a zeroed plain-data struct the call fills.
        let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
        if unsafe { GetFileInformationByHandle(f.as_raw_handle(), &mut info) } == 0 {
            return None;
        }
        Some((u64::from(info.dwVolumeSerialNumber), (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow)))
    }
}

/// The inode number of a directory entry without another system call where the platform has it
/// (Unix); `None` otherwise (the caller then asks [`file_id`]).
#[must_use]
pub fn entry_ino(e: &std::fs::DirEntry) -> Option<u64> {
    #[cfg(unix)]
    return Some(std::os::unix::fs::DirEntryExt::ino(e));
    #[cfg(windows)]
    {
        let _ = e;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of the user's without its owner's read or search bit gets both back, its
    /// other bits kept; one that has them is left alone; a link is refused, not followed; as
    /// root, another user's directory is refused (only its owner may give it back).
    #[cfg(unix)]
    #[test]
    fn the_owner_gets_its_directory_s_reading_back_and_nothing_else_changes() {
        use std::os::unix::fs::PermissionsExt;
        let d = crate::test_dir();
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;
        let hid = d.path().join("hid");
        std::fs::create_dir(&hid).unwrap();
        std::fs::set_permissions(&hid, std::fs::Permissions::from_mode(0o1311)).unwrap();
        assert!(let_owner_read(&hid).unwrap());
        assert_eq!(mode(&hid), 0o1711);
        assert!(!let_owner_read(&hid).unwrap(), "already readable");
        assert_eq!(mode(&hid), 0o1711);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&hid, &link).unwrap();
        std::fs::set_permissions(&hid, std::fs::Permissions::from_mode(0o311)).unwrap();
        assert!(let_owner_read(&link).is_err(), "a link is not followed");
        assert_eq!(mode(&hid), 0o311);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&hid, Some(65534), None).unwrap();
            assert_eq!(let_owner_read(&hid).unwrap_err().kind(), std::io::ErrorKind::PermissionDenied);
            assert_eq!(mode(&hid), 0o311);
        }
    }

    #[test]
    fn identity_follows_a_rename_and_tells_files_apart() {
        let d = crate::test_dir();
        let a = d.path().join("a");
        std::fs::write(&a, "A").unwrap();
        std::fs::write(d.path().join("b"), "B").unwrap();
        let id = file_id(&a).expect("an identity");
        std::fs::rename(&a, d.path().join("moved")).unwrap();
        assert_eq!(file_id(&d.path().join("moved")), Some(id));
        assert_ne!(file_id(&d.path().join("b")), Some(id));
        assert_eq!(file_id(&d.path().join("missing")), None);
    }

    #[test]
    fn modes_round_trip_through_the_seam() {
        let d = crate::test_dir();
        let f = d.path().join("f");
        std::fs::write(&f, "x").unwrap();
        set_mode(&f, 0o444).unwrap();
        assert_eq!(mode(&std::fs::metadata(&f).unwrap()) & 0o222, 0);
        set_mode(&f, 0o644).unwrap();
        assert_eq!(mode(&std::fs::metadata(&f).unwrap()) & 0o777, 0o644);
    }

    #[test]
    fn a_private_dir_is_created_with_its_parents() {
        let d = crate::test_dir();
        let p = d.path().join("x").join("y");
        create_private_dir(&p, true).unwrap();
        assert!(p.is_dir());
        #[cfg(unix)]
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&p).unwrap().permissions()) & 0o777, 0o700);
        assert!(create_private_dir(&p, false).is_err(), "an existing dir is an error without recursive");
        assert_eq!(canonical(&p).unwrap(), std::fs::canonicalize(d.path()).map(|c| canonical(&c).unwrap()).unwrap().join("x").join("y"));
    }
}
