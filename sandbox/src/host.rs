//! What every layer may need of the running process: who it runs as, where this user's sandbox
//! state lives, and how a signal handler is installed. Layer 0 of `ARCHITECTURE.md`: the standard library and `libc`.

use std::path::{Path, PathBuf};

/// The effective uid and gid (0, 0 where there are none).
#[must_use]
pub fn effective_ids() -> (u32, u32) {
    #[cfg(unix)]
    // SAFETY: geteuid and getegid cannot fail.
    return unsafe { (libc::geteuid(), libc::getegid()) };
    #[cfg(not(unix))]
    (0, 0)
}

/// The sandbox's own state for this user: the pending changes, the denied paths' record and the
/// nested walks' records (`$XDG_STATE_HOME/localgpt/sandbox`; on Windows
/// `%LOCALAPPDATA%\localgpt\sandbox`, else the user's own temporary directory). Written by the
/// runner, trusted by later runs: no sandboxed command may write it (the policy denies it to the
/// command where a writable path holds it).
#[must_use]
pub fn state_dir() -> PathBuf {
    #[cfg(windows)]
    return std::env::var_os("LOCALAPPDATA")
        .filter(|v| !v.is_empty())
        .map_or_else(|| std::env::temp_dir().join("localgpt-sandbox"), |d| PathBuf::from(d).join("localgpt").join("sandbox"));
    #[cfg(unix)]
    {
        let state = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()).map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| Path::new(&h).join(".local/state"))
        });
        match state {
            Some(s) if s.is_absolute() => s.join("localgpt/sandbox"),
            // SAFETY: geteuid cannot fail.
            _ => PathBuf::from(format!("/var/tmp/localgpt-sandbox-u{}", unsafe { libc::geteuid() })),
        }
    }
}

/// Where the sandbox keeps the tool caches that persist across runs (Linux), for a user whose
/// home is `home`: `$XDG_CACHE_HOME/localgpt/sandbox-caches` when `home` is this process's
/// `$HOME` and that variable is set, else `<home>/.cache/localgpt/sandbox-caches`; one directory
/// per workspace below it. Never a host tool's own cache (no tool reads this place unless the
/// sandbox points it here). `None` without an absolute home or cache directory.
#[must_use]
pub fn tool_cache_root(home: Option<&Path>) -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = home.map(Path::to_path_buf).or_else(|| var("HOME"))?;
    let cache = match var("XDG_CACHE_HOME") {
        Some(x) if var("HOME").as_deref() == Some(home.as_path()) => x,
        _ => home.join(".cache"),
    };
    cache.is_absolute().then(|| cache.join("localgpt").join("sandbox-caches"))
}

#[cfg(unix)]
/// Installs `handler` for `signals` without `SA_RESTART`, so that a blocking `waitpid` or `poll`
/// returns `EINTR`. The handler must be async-signal-safe (these only store to an atomic).
pub fn set_signal_handlers(signals: &[libc::c_int], handler: extern "C" fn(libc::c_int)) {
    for &sig in signals {
        // SAFETY: installing a handler with an empty mask and no flags.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Opens (creating it, mode 0600, never through a symbolic link) the lock file `path` and takes
/// an exclusive `flock` on it, held until the file is dropped: waiting for it (`wait`), or
/// failing at once when another process holds it.
///
/// # Errors
/// The open's or the lock's error (`EWOULDBLOCK`: held elsewhere).
#[cfg(target_os = "linux")]
pub(crate) fn lock_file(path: &Path, wait: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)?;
    let how = if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB };
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), how) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f)
}

/// Reads a small (proc or sys) file. `std::fs::read_to_string` sizes its buffer from the file's
/// size, which procfs reports as 0, and then grows it from 32 bytes: ten reads for
/// /proc/self/mountinfo instead of two. Run start-up reads several of these.
pub(crate) fn read_small(path: &str) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = Vec::with_capacity(16 * 1024);
    f.read_to_end(&mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// A mount point as a mount table writes it (`/proc/self/mountinfo`'s fifth field): the kernel's
/// `\ooo` escapes (of spaces, tabs, newlines and backslashes) decoded; any other byte kept.
#[must_use]
pub fn mount_point(b: &[u8]) -> PathBuf {
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
    #[cfg(unix)]
    return PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out));
    #[cfg(not(unix))]
    return PathBuf::from(String::from_utf8_lossy(&out).into_owned());
}

#[cfg(test)]
mod tests {
    use super::mount_point;
    use std::path::Path;

    #[test]
    fn mount_table_escapes_are_decoded() {
        assert_eq!(mount_point(br"/a\040b\134c\011d\012"), Path::new("/a b\\c\td\n"));
        assert_eq!(mount_point(br"/a\04"), Path::new(r"/a\04"));
        assert_eq!(mount_point(br"/a\9999"), Path::new(r"/a\9999"));
    }
}
