//! Secrets under `/etc` that the caller can read but the command must not: for root, every file
//! and directory there that is not world-readable (`/etc/shadow`, `/etc/gshadow`, SSH host keys,
//! `/etc/ssl/private`, apt and NetworkManager credentials, kubeconfigs, …); for anyone else, the
//! known secret locations the caller reaches through one of its groups and the world does not: a
//! file it can read, a directory it can list *or only traverse* (`/etc/ssl/private` is 0710
//! root:ssl-cert: a member opens the keys in it by name), host keys and `ssh_keys`.
//!
//! Root owns those files, so dropping capabilities does not stop it (the owner's read bit
//! applies), and a user namespace maps root to itself. Full level masks them; Standard denies them
//! through Landlock.
//!
//! Scanning `/etc` costs about 430 `stat`s (1.5 ms on a small VM), so root's scan is cached in
//! `/run/localgpt-sandbox/etc-secrets-v2` (root-only, 0600 in a 0700 directory) together
//! with the identity and times of every directory it walked: the cache is used only while none of
//! those directories changed (a file created, removed or renamed in any of them invalidates it)
//! and for at most [`CACHE_TTL_SECS`], which bounds the one case the directories do not show — an
//! existing file made private with `chmod` alone. The cache is a plain record format read
//! without a parser library (parsing JSON cost ~60 µs of every run as root); anything it does not
//! read exactly is a stale cache, and `/etc` is scanned again. A process that plans several
//! runs (a library host) also keeps the last scan in memory, checked the same way.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Known secret locations that may be group-readable (checked for non-root callers).
pub const GROUP_READABLE_SECRETS: &[&str] = &[
    "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssl/private", "/etc/pki/tls/private",
    "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_dsa_key",
    "/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd", "/etc/NetworkManager/system-connections",
    "/etc/apt/auth.conf", "/etc/apt/auth.conf.d", "/etc/kubernetes", "/etc/rancher", "/etc/wireguard",
    "/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets", "/etc/krb5.keytab", "/etc/ipsec.secrets", "/etc/letsencrypt/archive",
    "/etc/letsencrypt/keys", "/etc/mysql/debian.cnf", "/etc/libvirt/secrets", "/etc/docker/key.json", "/etc/cups/ssl",
];

/// How long a cached scan is trusted even when no directory changed.
pub const CACHE_TTL_SECS: u64 = 600;

/// A directory whose time is this close to the scan's start (or later) may change again without
/// its time changing: file times come from a clock that ticks every few milliseconds (and, on
/// filesystems that keep whole seconds, every second or two), so a file created in the same
/// tick as the directory's last change, after it was stamped, leaves the stamp as it was. A
/// scan with such a directory is used for the run that made it but never kept (see
/// [`Scan::racy`]).
const RACY_WINDOW_NS: i128 = 2_000_000_000;

/// Where root's scan is cached.
const CACHE_DIR: &str = "/run/localgpt-sandbox";
const CACHE_FILE: &str = "/run/localgpt-sandbox/etc-secrets-v2";
/// The cache of earlier versions (JSON), removed when the current one is written.
const OLD_CACHE_FILE: &str = "/run/localgpt-sandbox/etc-secrets-v1.json";
/// The first line of the cache file.
const CACHE_MAGIC: &[u8] = b"localgpt-etc-secrets 2 ";

/// A directory as it was when scanned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DirStamp {
    path: PathBuf,
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl DirStamp {
    fn of(path: &Path, m: &std::fs::Metadata) -> DirStamp {
        DirStamp {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            mtime_ns: crate::guard::records::time_ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: crate::guard::records::time_ns(m.ctime(), m.ctime_nsec()),
        }
    }

    fn unchanged(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.is_dir() && DirStamp::of(&self.path, &m) == *self)
    }
}

/// The result of one walk.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Scan {
    /// Entries that are not world-readable (a directory is not descended into).
    pub hidden: Vec<PathBuf>,
    /// Every directory walked.
    dirs: Vec<DirStamp>,
    /// When (seconds since the epoch).
    at: u64,
}

/// Walks `root` (no symlinks followed): every regular file or directory without the
/// world-read bit.
#[must_use]
pub fn scan(root: &Path) -> Scan {
    let mut s = Scan { at: now(), ..Scan::default() };
    if let Ok(m) = std::fs::symlink_metadata(root) {
        if m.is_dir() {
            if m.mode() & 0o004 == 0 {
                s.hidden.push(root.to_path_buf());
            } else {
                walk(root, &m, &mut s);
            }
        }
    }
    s.hidden.sort();
    s
}

fn walk(dir: &Path, meta: &std::fs::Metadata, s: &mut Scan) {
    s.dirs.push(DirStamp::of(dir, meta));
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        // The entry's type comes with the directory listing: symlinks, sockets and devices cost
        // no `stat`.
        let Ok(ft) = e.file_type() else { continue };
        if !(ft.is_dir() || ft.is_file()) {
            continue;
        }
        let Ok(m) = e.metadata() else { continue };
        let path = e.path();
        if m.mode() & 0o004 == 0 {
            s.hidden.push(path);
        } else if ft.is_dir() {
            walk(&path, &m, s);
        }
    }
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn now_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

impl Scan {
    /// Still describes the tree: young enough, and no walked directory changed.
    fn fresh(&self, ttl: u64) -> bool {
        now().saturating_sub(self.at) <= ttl && !self.dirs.is_empty() && self.dirs.iter().all(DirStamp::unchanged)
    }

    /// Whether a directory of the scan changed within [`RACY_WINDOW_NS`] of `started_ns` (when
    /// the scan began) or after it: its stamp cannot show a change made in the same clock tick,
    /// so the scan must not be kept for later runs (git's "racily clean" index entries, the same
    /// problem).
    fn racy(&self, started_ns: i128) -> bool {
        self.dirs.iter().any(|d| d.mtime_ns.max(d.ctime_ns) >= started_ns - RACY_WINDOW_NS)
    }

    /// The cache file's bytes: the header line (magic, time), then one record per directory
    /// (`D dev ino mtime_ns ctime_ns path`) and per hidden entry (`H path`), each ended by a NUL
    /// (a path holds any byte but NUL: spaces and newlines included).
    fn encode(&self) -> Vec<u8> {
        let mut b = CACHE_MAGIC.to_vec();
        b.extend_from_slice(format!("{}\n", self.at).as_bytes());
        for d in &self.dirs {
            b.extend_from_slice(format!("D {} {} {} {} ", d.dev, d.ino, d.mtime_ns, d.ctime_ns).as_bytes());
            b.extend_from_slice(d.path.as_os_str().as_bytes());
            b.push(0);
        }
        for h in &self.hidden {
            b.extend_from_slice(b"H ");
            b.extend_from_slice(h.as_os_str().as_bytes());
            b.push(0);
        }
        // The counts last: a file cut at a record's end must not read as fewer secrets.
        b.extend_from_slice(format!("E {} {}", self.dirs.len(), self.hidden.len()).as_bytes());
        b.push(0);
        b
    }

    /// Reads [`Scan::encode`]'s bytes; `None` for anything else (another version, a torn or
    /// edited file, a relative or empty path).
    fn decode(b: &[u8]) -> Option<Scan> {
        let rest = b.strip_prefix(CACHE_MAGIC)?;
        let nl = rest.iter().position(|&c| c == b'\n')?;
        let at = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
        // Every record ends with a NUL; the last one is the counts.
        let mut records = rest[nl + 1..].strip_suffix(&[0])?.rsplitn(2, |&c| c == 0);
        let end = records.next()?;
        let mut s = Scan { at, ..Scan::default() };
        let absolute = |p: &[u8]| (p.first() == Some(&b'/')).then(|| PathBuf::from(OsStr::from_bytes(p)));
        for r in records.next().into_iter().flat_map(|rs| rs.split(|&c| c == 0)) {
            if let Some(p) = r.strip_prefix(b"H ") {
                s.hidden.push(absolute(p)?);
            } else {
                let r = r.strip_prefix(b"D ")?;
                let mut f = r.splitn(5, |&c| c == b' ');
                let mut num = || std::str::from_utf8(f.next()?).ok();
                let (dev, ino, m, c) = (num()?.parse().ok()?, num()?.parse().ok()?, num()?.parse().ok()?, num()?.parse().ok()?);
                s.dirs.push(DirStamp { path: absolute(f.next()?)?, dev, ino, mtime_ns: m, ctime_ns: c });
            }
        }
        (!s.dirs.is_empty() && end == format!("E {} {}", s.dirs.len(), s.hidden.len()).as_bytes()).then_some(s)
    }
}

/// The last scan this process used (a library host plans many runs), checked like the file.
static LAST_SCAN: Mutex<Option<Scan>> = Mutex::new(None);

/// Root's scan of `/etc`, from this process's last scan or the cache when it is fresh (see the
/// module docs).
fn root_scan() -> Vec<PathBuf> {
    let mut last = LAST_SCAN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(s) = last.as_ref().filter(|s| s.fresh(CACHE_TTL_SECS)) {
        return s.hidden.clone();
    }
    let s = match std::fs::read(CACHE_FILE).ok().and_then(|b| Scan::decode(&b)).filter(|c| c.fresh(CACHE_TTL_SECS)) {
        Some(c) => c,
        None => {
            let started = now_ns();
            let s = scan(Path::new("/etc"));
            if s.racy(started) {
                // Good for this run; the next one scans again.
                *last = None;
                return s.hidden;
            }
            store(&s);
            s
        }
    };
    let hidden = s.hidden.clone();
    *last = Some(s);
    hidden
}

/// Writes the cache (best effort: a failure only costs the next run a new scan). The directory
/// must be root's and private; the file is written whole and renamed into place.
fn store(s: &Scan) {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let _ = std::fs::DirBuilder::new().mode(0o700).create(CACHE_DIR);
    let ok = std::fs::symlink_metadata(CACHE_DIR).is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.mode() & 0o077 == 0);
    if !ok {
        return;
    }
    let _ = std::fs::remove_file(OLD_CACHE_FILE);
    let bytes = s.encode();
    let tmp = format!("{CACHE_FILE}.{}", std::process::id());
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes));
    if written.is_ok() {
        let _ = std::fs::rename(&tmp, CACHE_FILE);
    } else {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The caller has `how` (`R_OK`, `X_OK`) on `p` (real uid/gid and groups, as the command will
/// run).
fn accessible(p: &Path, how: libc::c_int) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: access() with a valid C string.
    unsafe { libc::access(c.as_ptr(), how) == 0 }
}

/// Whether a known secret location is one the caller reaches and the world does not: a file
/// it can read that is not world-readable; a directory it can list *or traverse* that the
/// world cannot both list and traverse — `/etc/ssl/private` is 0710 root:ssl-cert, so a member
/// of `ssl-cert` cannot list it but opens the group-readable keys in it by name.
#[must_use]
pub fn reaches_secret(is_dir: bool, mode: u32, can_read: bool, can_traverse: bool) -> bool {
    if is_dir {
        mode & 0o005 != 0o005 && (can_read || can_traverse)
    } else {
        mode & 0o004 == 0 && can_read
    }
}

/// Secrets under `/etc` the command must not read (see the module docs).
#[must_use]
pub fn system_secrets(is_root: bool) -> Vec<PathBuf> {
    if is_root {
        return root_scan();
    }
    GROUP_READABLE_SECRETS
        .iter()
        .map(Path::new)
        .filter(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| {
                (m.is_file() || m.is_dir()) && reaches_secret(m.is_dir(), m.mode(), accessible(p, libc::R_OK), m.is_dir() && accessible(p, libc::X_OK))
            })
        })
        .map(Path::to_path_buf)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_directory_the_caller_only_traverses_is_a_secret_location() {
        // /etc/ssl/private 0710 root:ssl-cert, seen by a member of ssl-cert: keys by name.
        assert!(reaches_secret(true, 0o710, false, true));
        assert!(reaches_secret(true, 0o750, true, true));
        assert!(!reaches_secret(true, 0o710, false, false), "not reachable by this caller");
        assert!(!reaches_secret(true, 0o755, true, true), "the world lists and traverses it: nothing to hide from the command in particular");
        assert!(reaches_secret(false, 0o640, true, false));
        assert!(!reaches_secret(false, 0o644, true, false));
        assert!(!reaches_secret(false, 0o600, false, false));
    }

    #[test]
    fn scan_finds_what_is_not_world_readable_and_notices_changes() {
        let d = crate::test_dir();
        let etc = d.path().join("etc");
        for sub in ["ssl/private", "ssh", "apt/sources.list.d"] {
            std::fs::create_dir_all(etc.join(sub)).unwrap();
        }
        std::fs::write(etc.join("shadow"), "root:x").unwrap();
        std::fs::write(etc.join("passwd"), "root:x").unwrap();
        std::fs::write(etc.join("ssl/private/k.pem"), "k").unwrap();
        std::fs::write(etc.join("ssh/ssh_host_ed25519_key"), "k").unwrap();
        std::fs::write(etc.join("ssh/ssh_host_ed25519_key.pub"), "p").unwrap();
        std::os::unix::fs::symlink("shadow", etc.join("link-to-shadow")).unwrap();
        chmod(&etc.join("shadow"), 0o640);
        chmod(&etc.join("ssl/private"), 0o710);
        chmod(&etc.join("ssh/ssh_host_ed25519_key"), 0o600);
        let s = scan(&etc);
        assert_eq!(s.hidden, vec![etc.join("shadow"), etc.join("ssh/ssh_host_ed25519_key"), etc.join("ssl/private")]);
        assert!(s.fresh(60));
        // A new private file changes its directory: the scan is stale.
        std::fs::write(etc.join("apt/auth.conf"), "machine x login y password z").unwrap();
        assert!(!s.fresh(60));
        assert!(scan(&etc).fresh(60));
        // An old scan is stale whatever the directories say.
        let mut old = scan(&etc);
        old.at -= CACHE_TTL_SECS + 1;
        assert!(!old.fresh(CACHE_TTL_SECS));
    }

    #[test]
    fn a_scan_of_directories_changed_in_the_last_ticks_is_not_kept() {
        // Directories made just now: a file created in the same tick would not change them.
        let d = crate::test_dir();
        std::fs::create_dir_all(d.path().join("etc/ssl")).unwrap();
        let started = now_ns();
        assert!(scan(&d.path().join("etc")).racy(started));
        // Stamps from the scan's own times: older than the window is kept, anything within it
        // (or later: a clock set back) is not; mtime and ctime alike.
        let t = 1_700_000_000_000_000_000_i128;
        let stamp = |m: i128, c: i128| DirStamp { path: PathBuf::from("/etc"), dev: 1, ino: 2, mtime_ns: m, ctime_ns: c };
        let with = |dirs: Vec<DirStamp>| Scan { dirs, ..Scan::default() };
        let old = t - RACY_WINDOW_NS - 1;
        assert!(!with(vec![stamp(old, old), stamp(old - 5, old)]).racy(t));
        assert!(with(vec![stamp(old, old), stamp(t - RACY_WINDOW_NS, old)]).racy(t));
        assert!(with(vec![stamp(old, t - 1)]).racy(t));
        assert!(with(vec![stamp(t + 1_000_000_000, old)]).racy(t));
    }

    #[test]
    fn the_cache_records_read_back_exactly_and_nothing_else_reads() {
        let odd = |s: &[u8]| PathBuf::from(OsStr::from_bytes(s));
        let stamp = |p: PathBuf, n: i128| DirStamp { path: p, dev: 2049, ino: 77, mtime_ns: n, ctime_ns: -n };
        let s = Scan {
            hidden: vec![odd(b"/etc/shadow"), odd(b"/etc/with space/and\nnewline"), odd(b"/etc/\xff\xfe not utf-8")],
            dirs: vec![stamp(odd(b"/etc"), 1_700_000_000_123_456_789), stamp(odd(b"/etc/with space/D 1 2 3 4 /x"), 0)],
            at: 1_700_000_000,
        };
        let b = s.encode();
        assert_eq!(Scan::decode(&b), Some(s.clone()));
        // Torn anywhere, extended, another version, a relative path or an unknown record: stale.
        for cut in 0..b.len() {
            assert_eq!(Scan::decode(&b[..cut]), None, "cut at {cut}");
        }
        let mut longer = b.clone();
        longer.extend_from_slice(b"H /etc/x");
        assert_eq!(Scan::decode(&longer), None);
        let body = &b[..b.len() - b"E 2 3\0".len()];
        assert_eq!(Scan::decode(&[body, b"H /etc/x\0E 2 4\0"].concat()).map(|s| s.hidden.len()), Some(4), "the splice helper itself");
        assert_eq!(Scan::decode(&[body, b"H /etc/x\0E 2 3\0"].concat()), None, "counts disagree");
        assert_eq!(Scan::decode(&[body, b"X /etc/x\0E 2 4\0"].concat()), None);
        assert_eq!(Scan::decode(&[body, b"H etc/x\0E 2 4\0"].concat()), None);
        assert_eq!(Scan::decode(&[body, b"D 1 2 3 /etc/x\0E 3 3\0"].concat()), None);
        assert_eq!(Scan::decode(&[body, b"D 1 2 3 x /etc/x\0E 3 3\0"].concat()), None);
        let mut v3 = b.clone();
        v3[CACHE_MAGIC.len() - 2] = b'3';
        assert_eq!(Scan::decode(&v3), None);
        // An empty walk is never a cache.
        assert_eq!(Scan::decode(&Scan { at: 1, ..Scan::default() }.encode()), None);
    }

    #[test]
    fn this_machine_has_the_usual_secrets_for_root() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 || !Path::new("/etc/shadow").exists() {
            return;
        }
        let s = system_secrets(true);
        assert!(s.contains(&PathBuf::from("/etc/shadow")), "{s:?}");
        // The second call comes from the cache and says the same.
        assert_eq!(system_secrets(true), s);
    }
}
