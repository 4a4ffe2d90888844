//! The submodules a git index registers (pure reading; git is never run on the host for it: the
//! repository's config could make it run a program).
//!
//! git enters a submodule — a *gitlink*, an index entry of mode `160000` — for the superproject's
//! `git status` whenever its directory holds a `.git`, whether or not `.gitmodules` lists it. A
//! command can register one with `git update-index --cacheinfo 160000,…,build/x` (the index is
//! git's state, applied after the run) and point `build/x/.git` at a git directory it made, with
//! its own `core.fsmonitor`. So the protected paths include the `.git` of every gitlink the index
//! has at launch, and the review after the run looks at the index again.
//!
//! The format is git's `index` (gitformat-index(5)): versions 2, 3 (extended flags) and 4 (path
//! names prefix-compressed), SHA-1 or SHA-256 object names, and a split index (the `link`
//! extension names a `sharedindex.<hash>` file whose entries count too). Reading both files of a
//! split index without applying its replace and delete bitmaps can only find more gitlinks, never
//! fewer.

use std::path::{Path, PathBuf};

/// The largest index read (a repository of a million files has an index of about 100 MiB).
pub const INDEX_MAX_BYTES: u64 = 512 << 20;

/// The mode of a gitlink (object type 1110).
const GITLINK: u32 = 0o160_000;

/// The object type bits of a mode.
const TYPE_MASK: u32 = 0o170_000;

/// The path names (bytes, relative to the worktree) of the gitlink entries of an index file's
/// content, and the name of its shared index when it is split (the hex of the `link`
/// extension's object name).
///
/// # Errors
///
/// The content is not an index of version 2, 3 or 4 whose entries and extensions fit its size
/// with a SHA-1 or SHA-256 checksum after them.
pub fn parse(data: &[u8]) -> Result<(Vec<Vec<u8>>, Option<String>), String> {
    if data.len() < 12 || &data[..4] != b"DIRC" {
        return Err("not a git index (no DIRC signature)".into());
    }
    let version = be32(data, 4);
    if !(2..=4).contains(&version) {
        return Err(format!("index version {version} (git writes 2, 3 and 4)"));
    }
    // The object name's length is the repository's (extensions.objectFormat): whichever of the
    // two makes the entries and extensions end exactly at the checksum.
    let mut last = String::new();
    for hash in [20usize, 32] {
        match entries(data, version, hash) {
            Ok(r) => return Ok(r),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

fn entries(data: &[u8], version: u32, hash: usize) -> Result<(Vec<Vec<u8>>, Option<String>), String> {
    let count = be32(data, 8) as usize;
    let short = || format!("the index ends inside its entries (object names of {hash} bytes)");
    let mut at = 12usize;
    let mut name: Vec<u8> = Vec::new();
    let mut links = Vec::new();
    // Fixed part: ctime, mtime (8 bytes each), dev, ino, mode, uid, gid, size (4 each), the
    // object name, 16 bits of flags.
    let fixed = 40 + hash + 2;
    for _ in 0..count {
        let start = at;
        if at + fixed > data.len() {
            return Err(short());
        }
        let mode = be32(data, at + 24);
        let flags = u16::from_be_bytes([data[at + fixed - 2], data[at + fixed - 1]]);
        at += fixed;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return Err("an extended entry in a version 2 index".into());
            }
            at += 2;
        }
        if version == 4 {
            // How many bytes of the previous name to drop, then the rest, NUL-terminated.
            let (drop, used) = varint(data.get(at..).unwrap_or_default()).ok_or_else(short)?;
            at += used;
            let keep = name.len().checked_sub(usize::try_from(drop).map_err(|_| short())?).ok_or("a prefix-compressed name longer than the one before it")?;
            name.truncate(keep);
            let end = data[at..].iter().position(|&b| b == 0).ok_or_else(short)?;
            name.extend_from_slice(&data[at..at + end]);
            at += end + 1;
        } else {
            // The name's length is in the flags (as git reads it), up to 0xfff: then up to its
            // NUL. 1 to 8 NULs pad the entry to a multiple of 8 bytes.
            let len = match usize::from(flags & 0xfff) {
                0xfff => data[at..].iter().position(|&b| b == 0).ok_or_else(short)?,
                n => n,
            };
            let name_at = at;
            at = start + ((at - start + len + 8) & !7);
            if at > data.len() {
                return Err(short());
            }
            if mode & TYPE_MASK == GITLINK {
                links.push(data[name_at..name_at + len].to_vec());
            }
            continue;
        }
        if at > data.len() {
            return Err(short());
        }
        if mode & TYPE_MASK == GITLINK {
            links.push(name.clone());
        }
    }
    // Extensions: a 4-byte signature and a 32-bit size each, then the checksum.
    let mut shared = None;
    loop {
        let rest = data.len() - at;
        if rest == hash {
            return Ok((links, shared));
        }
        if rest < 8 + hash {
            return Err(format!("the index's extensions do not end at a checksum of {hash} bytes"));
        }
        let size = be32(data, at + 4) as usize;
        let body = at + 8;
        if body + size + hash > data.len() {
            return Err(format!("an index extension longer than the file (object names of {hash} bytes)"));
        }
        if &data[at..at + 4] == b"link" && size >= hash {
            let id = &data[body..body + hash];
            if id.iter().any(|&b| b != 0) {
                shared = Some(id.iter().map(|b| format!("{b:02x}")).collect());
            }
        }
        at = body + size;
    }
}

/// git's offset varint (each continuation adds one before shifting); the value and the bytes
/// it took.
fn varint(d: &[u8]) -> Option<(u64, usize)> {
    let mut i = 0;
    let mut c = *d.first()?;
    let mut v = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        i += 1;
        c = *d.get(i)?;
        v = v.checked_add(1)?;
        if v >> 57 != 0 {
            return None;
        }
        v = (v << 7) | u64::from(c & 0x7f);
    }
    Some((v, i + 1))
}

/// The git directory a `.git` entry stands for: itself when it is a directory; the `gitdir:` it
/// names when it is a file (relative to its own directory); `None` otherwise.
#[must_use]
pub fn git_dir(dotgit: &Path) -> Option<PathBuf> {
    // git follows a `.git` that is a symbolic link (`.git -> ../repo.git`), as `stat` does.
    let m = std::fs::metadata(dotgit).ok()?;
    if m.is_dir() {
        return Some(dotgit.to_path_buf());
    }
    if !m.is_file() || m.len() > 4096 {
        return None;
    }
    let real = if std::fs::symlink_metadata(dotgit).ok()?.file_type().is_symlink() { std::fs::canonicalize(dotgit).ok()? } else { dotgit.to_path_buf() };
    let text = String::from_utf8(read_file(&real, 4096).ok()?.0).ok()?;
    let to = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    if to.is_empty() {
        return None;
    }
    Some(dotgit.parent()?.join(to))
}

/// The `.git` git finds from `dir`: `dir/.git`, or the nearest one above it (`dir` is a
/// subdirectory of a repository's worktree).
#[must_use]
pub fn enclosing_dotgit(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().map(|a| a.join(".git")).find(|g| std::fs::symlink_metadata(g).is_ok())
}

/// The shared git directory of the repository whose git directory is `gd`: the one its
/// `commondir` names (a linked worktree's `.git/worktrees/<name>` names the main repository's
/// `.git`), else `gd` itself.
#[must_use]
pub fn common_dir(gd: &Path) -> PathBuf {
    match crate::files::read_config_file(&gd.join("commondir"), 4096) {
        Some(c) if !c.trim().is_empty() => gd.join(c.trim()),
        _ => gd.to_path_buf(),
    }
}

/// Whether `dir` is a git directory by git's own rule (`is_git_directory`: a `HEAD` that is not
/// a directory, with `objects/` and `refs/` or with a `commondir`), or a directory named `.git`.
#[must_use]
pub fn is_git_directory(dir: &Path) -> bool {
    let is = |n: &str, d: bool| std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_dir() == d);
    let named = dir.file_name().is_some_and(|n| n == ".git") && std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
    named || (is("HEAD", false) && ((is("objects", true) && is("refs", true)) || is("commondir", false)))
}

/// The worktree-relative paths of the gitlinks in the index of the git directory `gitdir` (and
/// in its shared index, for a split index); no index: none.
///
/// # Errors
///
/// The index (or its shared index) exists but is not a regular file, is larger than
/// [`INDEX_MAX_BYTES`], or does not parse.
pub fn gitlinks(gitdir: &Path) -> Result<Vec<PathBuf>, String> {
    gitlinks_recorded(gitdir, None)
}

/// [`gitlinks`], taken from what an earlier read of the same index found while that read still
/// holds: the index and its shared index the same files, unchanged, and changed last long enough
/// before that read (Unix). Earlier reads are kept in this process, and in `records` (the nested
/// walk's private directory, [`super::records::records_dir`], which the planner lets a run use
/// only where no command can write it) for the next process. Reading a large index costs ~1 ms
/// per 10 000 files here, at launch and again after every run.
///
/// # Errors
///
/// As [`gitlinks`].
pub fn gitlinks_recorded(gitdir: &Path, records: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    let index = gitdir.join("index");
    #[cfg(unix)]
    match std::fs::symlink_metadata(&index) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Ok(m) => {
            if let Some(links) = Some(memo::FileStamp::of(&m)).filter(|_| m.is_file()).and_then(|now| memo::remembered(&index, &now, records)) {
                return Ok(links);
            }
        }
        // (Not a regular file, or not readable: the read below says what.)
        Err(_) => {}
    }
    #[cfg(unix)]
    let read_ns = super::records::now_ns();
    let (data, meta) = match read_file(&index, INDEX_MAX_BYTES) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", index.display())),
    };
    let (mut names, shared) = parse(&data).map_err(|e| format!("{}: {e}", index.display()))?;
    drop(data);
    let mut shared_read = None;
    if let Some(hex) = shared {
        let s = gitdir.join(format!("sharedindex.{hex}"));
        let (d, m) = read_file(&s, INDEX_MAX_BYTES).map_err(|e| format!("{} (the shared part of a split index): {e}", s.display()))?;
        names.extend(parse(&d).map_err(|e| format!("{}: {e}", s.display()))?.0);
        shared_read = Some((s, m));
    }
    let mut out: Vec<PathBuf> = names.iter().filter_map(|n| rel_path(n)).collect();
    out.sort();
    out.dedup();
    #[cfg(unix)]
    {
        let shared = shared_read.map(|(p, m)| (p, memo::FileStamp::of(&m)));
        memo::remember(memo::IndexRead { index, stamp: memo::FileStamp::of(&meta), shared, read_ns, links: out.clone() }, records);
    }
    #[cfg(not(unix))]
    let _ = (meta, shared_read, records);
    Ok(out)
}

/// An index path name as a relative path; `None` for one git would refuse (empty, absolute,
/// `.`/`..` components).
pub(crate) fn rel_path(name: &[u8]) -> Option<PathBuf> {
    if name.is_empty() || name.starts_with(b"/") || name.split(|&b| b == b'/').any(|c| c.is_empty() || c == b"." || c == b"..") {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(name)))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(name).ok().map(PathBuf::from)
    }
}

/// Reads a regular file of at most `max` bytes without following a link and without blocking
/// (a FIFO left where a file is expected is refused, not opened: opening it would wait for a
/// writer); with the metadata of the file read.
fn read_file(path: &Path, max: u64) -> std::io::Result<(Vec<u8>, std::fs::Metadata)> {
    use std::io::Read;
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::other("a symbolic link"));
    }
    let f = o.open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if m.len() > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    let mut v = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0).saturating_add(1));
    f.take(max + 1).read_to_end(&mut v)?;
    Ok((v, m))
}

/// What earlier reads of an index found, and when they still hold (Unix: a file's identity and
/// change time are what tell; the records on disk are Linux's, beside the nested walk's).
#[cfg(unix)]
mod memo {
    use std::path::{Path, PathBuf};

    /// A regular file as `stat` shows it: its identity, size and both times. A write to it
    /// changes its change time (which no process can set back) to the current time, and
    /// replacing it changes its identity.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) struct FileStamp {
        pub(super) dev: u64,
        pub(super) ino: u64,
        pub(super) size: u64,
        pub(super) mtime_ns: i128,
        pub(super) ctime_ns: i128,
    }

    impl FileStamp {
        /// The stamp of `m`.
        pub(super) fn of(m: &std::fs::Metadata) -> FileStamp {
            use std::os::unix::fs::MetadataExt;
            let ns = crate::guard::records::time_ns;
            FileStamp { dev: m.dev(), ino: m.ino(), size: m.size(), mtime_ns: ns(m.mtime(), m.mtime_nsec()), ctime_ns: ns(m.ctime(), m.ctime_nsec()) }
        }

        /// The regular file at `path` now (no link followed), or `None`.
        pub(super) fn now(path: &Path) -> Option<FileStamp> {
            std::fs::symlink_metadata(path).ok().filter(std::fs::Metadata::is_file).as_ref().map(FileStamp::of)
        }
    }

    /// What one read of an index found: the index and its shared index (a split index's) as they
    /// were read, when the read began (ns since the epoch, the clock file times come from), and
    /// the gitlinks.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(super) struct IndexRead {
        pub(super) index: PathBuf,
        pub(super) stamp: FileStamp,
        pub(super) shared: Option<(PathBuf, FileStamp)>,
        pub(super) read_ns: i128,
        pub(super) links: Vec<PathBuf>,
    }

    impl IndexRead {
        /// Both files are still the ones read, unchanged, and each changed last more than
        /// [`crate::guard::records::RACY_WINDOW_NS`] before the read began: a change in the same
        /// tick of the file clock as the one before it could leave the times as they were (the
        /// nested walk's records follow the same rule).
        /// (`index` is the index's stamp now.)
        pub(super) fn holds(&self, index: &FileStamp) -> bool {
            self.holds_with(|p| if p == self.index { Some(*index) } else { FileStamp::now(p) })
        }

        pub(super) fn holds_with(&self, now: impl Fn(&Path) -> Option<FileStamp>) -> bool {
            let same = |p: &Path, s: &FileStamp| s.ctime_ns < self.read_ns - crate::guard::records::RACY_WINDOW_NS && now(p) == Some(*s);
            same(&self.index, &self.stamp) && self.shared.as_ref().is_none_or(|(p, s)| same(p, s))
        }

        /// The record file's bytes (Linux): the magic line, then NUL-ended fields — the index's path, its
        /// stamp, the shared index's stamp and path (when split), when the read began, each
        /// gitlink, and their count last.
        #[cfg(target_os = "linux")]
        pub(super) fn encode(&self) -> Vec<u8> {
            use std::io::Write;
            let mut b = MAGIC.to_vec();
            let stamp = |b: &mut Vec<u8>, s: &FileStamp| {
                let _ = write!(b, "{} {} {} {} {}", s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns);
            };
            b.extend_from_slice(b"P ");
            b.extend_from_slice(self.index.as_os_str().as_encoded_bytes());
            b.extend_from_slice(b"\0F ");
            stamp(&mut b, &self.stamp);
            b.push(0);
            if let Some((p, s)) = &self.shared {
                b.extend_from_slice(b"S ");
                stamp(&mut b, s);
                b.push(b' ');
                b.extend_from_slice(p.as_os_str().as_encoded_bytes());
                b.push(0);
            }
            let _ = write!(b, "R {}", self.read_ns);
            b.push(0);
            for l in &self.links {
                b.extend_from_slice(b"L ");
                b.extend_from_slice(l.as_os_str().as_encoded_bytes());
                b.push(0);
            }
            let _ = write!(b, "C {}", self.links.len());
            b.push(0);
            b
        }

        /// [`IndexRead::encode`]'s bytes for the index at `index`; `None` for anything else
        /// (another version or index, a cut or edited file, a gitlink git would refuse).
        #[cfg(target_os = "linux")]
        pub(super) fn decode(index: &Path, b: &[u8]) -> Option<IndexRead> {
            use crate::guard::records::{decimal, signed_decimal};
            let rest = b.strip_prefix(MAGIC)?.strip_suffix(&[0])?;
            let mut fields = rest.split(|&c| c == 0);
            if fields.next()?.strip_prefix(b"P ")? != index.as_os_str().as_encoded_bytes() {
                return None;
            }
            let stamp = |f: &mut dyn Iterator<Item = &[u8]>| -> Option<FileStamp> {
                Some(FileStamp {
                    dev: u64::try_from(decimal(f.next()?)?).ok()?,
                    ino: u64::try_from(decimal(f.next()?)?).ok()?,
                    size: u64::try_from(decimal(f.next()?)?).ok()?,
                    mtime_ns: signed_decimal(f.next()?)?,
                    ctime_ns: signed_decimal(f.next()?)?,
                })
            };
            let mut f = fields.next()?.strip_prefix(b"F ")?.split(|&c| c == b' ');
            let st = stamp(&mut f)?;
            if f.next().is_some() {
                return None;
            }
            let mut next = fields.next()?;
            let mut shared = None;
            if let Some(s) = next.strip_prefix(b"S ") {
                let mut f = s.splitn(6, |&c| c == b' ');
                let sst = stamp(&mut f)?;
                let path = f.next()?;
                // The shared index lies beside the index (`sharedindex.<hex>`).
                let name = path.strip_prefix(index.parent()?.as_os_str().as_encoded_bytes())?.strip_prefix(b"/")?;
                if !name.starts_with(b"sharedindex.") || name.contains(&b'/') {
                    return None;
                }
                shared = Some((PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path)), sst));
                next = fields.next()?;
            }
            let read_ns = signed_decimal(next.strip_prefix(b"R ")?)?;
            let mut links = Vec::new();
            for field in fields.by_ref() {
                if let Some(l) = field.strip_prefix(b"L ") {
                    links.push(crate::guard::gitindex::rel_path(l)?);
                    continue;
                }
                let n = usize::try_from(decimal(field.strip_prefix(b"C ")?)?).ok()?;
                return (n == links.len() && fields.next().is_none()).then_some(IndexRead { index: index.to_path_buf(), stamp: st, shared, read_ns, links });
            }
            None
        }
    }

    /// The first line of a record file.
    #[cfg(target_os = "linux")]
    const MAGIC: &[u8] = b"localgpt-gitlinks 1\n";

    /// The most reads this process keeps (a host's indexes: the workspace's and its nested
    /// repositories').
    const KEPT: usize = 64;

    static KEPT_READS: std::sync::Mutex<Vec<IndexRead>> = std::sync::Mutex::new(Vec::new());

    /// The record file's name for the index at `index`: a hash of its path (the path itself is
    /// checked inside).
    #[cfg(target_os = "linux")]
    fn record_name(index: &Path) -> String {
        format!("gitlinks-{:016x}", crate::guard::records::fnv1a64(index.as_os_str().as_encoded_bytes()))
    }

    /// The gitlinks of the index at `index`, whose stamp is `now`, as a read that still holds
    /// found them: one this process made, or one recorded in `records` (Linux).
    pub(super) fn remembered(index: &Path, now: &FileStamp, records: Option<&Path>) -> Option<Vec<PathBuf>> {
        let kept = KEPT_READS.lock().ok().and_then(|k| k.iter().find(|r| r.index == index).cloned());
        if let Some(r) = kept {
            return r.holds(now).then_some(r.links);
        }
        #[cfg(target_os = "linux")]
        if let Some(r) = records.and_then(|d| crate::guard::records::load_record(d, &record_name(index))).and_then(|b| IndexRead::decode(index, &b)) {
            if r.holds(now) {
                let links = r.links.clone();
                keep(r);
                return Some(links);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = records;
        None
    }

    /// Keeps what a read found, in this process and in `records` (Linux; a record that cannot be
    /// written is only a later read). Only where the index's filesystem keeps change times itself
    /// (Linux, [`crate::guard::records::change_time_kept_at`]): elsewhere nothing is kept, and
    /// every call reads the index.
    pub(super) fn remember(r: IndexRead, records: Option<&Path>) {
        #[cfg(target_os = "linux")]
        let kept_here = crate::guard::records::change_time_kept_at(&r.index);
        #[cfg(not(target_os = "linux"))]
        let kept_here = false;
        if !kept_here {
            return;
        }
        #[cfg(target_os = "linux")]
        if let Some(d) = records {
            let _ = crate::guard::records::save_record(d, &record_name(&r.index), &r.encode());
        }
        #[cfg(not(target_os = "linux"))]
        let _ = records;
        keep(r);
    }

    /// Forgets what this process kept of the index at `index` (tests: to see the record alone).
    #[cfg(all(test, target_os = "linux"))]
    pub(super) fn forget(index: &Path) {
        if let Ok(mut k) = KEPT_READS.lock() {
            k.retain(|x| x.index != index);
        }
    }

    fn keep(r: IndexRead) {
        if let Ok(mut k) = KEPT_READS.lock() {
            k.retain(|x| x.index != r.index);
            if k.len() >= KEPT {
                k.remove(0);
            }
            k.push(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry of a version 2/3 (`v4 = None`) or 4 (`Some(drop)`) index.
    fn entry(mode: u32, name: &str, hash: usize, ext: bool, v4: Option<u8>) -> Vec<u8> {
        let mut e = vec![0u8; 24];
        e.extend_from_slice(&mode.to_be_bytes());
        e.extend_from_slice(&[0u8; 12]);
        e.extend(std::iter::repeat_n(0xab, hash));
        let len = u16::try_from(name.len().min(0xfff)).unwrap();
        e.extend_from_slice(&(len | if ext { 0x4000 } else { 0 }).to_be_bytes());
        if ext {
            e.extend_from_slice(&0x4000u16.to_be_bytes());
        }
        match v4 {
            Some(drop) => {
                e.push(drop);
                e.extend_from_slice(name.as_bytes());
                e.push(0);
            }
            None => {
                let base = e.len();
                e.extend_from_slice(name.as_bytes());
                let total = (base + name.len() + 8) & !7;
                e.resize(total, 0);
            }
        }
        e
    }

    fn index(version: u32, entries: &[Vec<u8>], exts: &[(&[u8; 4], Vec<u8>)], hash: usize) -> Vec<u8> {
        let mut d = b"DIRC".to_vec();
        d.extend_from_slice(&version.to_be_bytes());
        d.extend_from_slice(&u32::try_from(entries.len()).unwrap().to_be_bytes());
        for e in entries {
            d.extend_from_slice(e);
        }
        for (sig, body) in exts {
            d.extend_from_slice(*sig);
            d.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
            d.extend_from_slice(body);
        }
        d.extend(std::iter::repeat_n(0x11, hash));
        d
    }

    #[test]
    fn gitlinks_of_every_version_and_hash() {
        for hash in [20, 32] {
            let v2 = index(2, &[entry(0o100_644, "a.txt", hash, false, None), entry(GITLINK, "build/x", hash, false, None), entry(0o120_000, "l", hash, false, None)], &[(b"TREE", vec![1, 2, 3])], hash);
            assert_eq!(parse(&v2).unwrap(), (vec![b"build/x".to_vec()], None));
            let v3 = index(3, &[entry(GITLINK, "a/sub", hash, true, None), entry(0o100_755, "bb", hash, false, None)], &[], hash);
            assert_eq!(parse(&v3).unwrap().0, vec![b"a/sub".to_vec()]);
            // v4: "node_modules/a/.x" then "node_modules/lib" (drop 4 bytes "a/.x", add "lib").
            let v4 = index(4, &[entry(0o100_644, "node_modules/a/.x", hash, false, Some(0)), entry(GITLINK, "lib", hash, false, Some(4))], &[], hash);
            assert_eq!(parse(&v4).unwrap().0, vec![b"node_modules/lib".to_vec()]);
            let mut link = vec![0x5a; hash];
            link.extend_from_slice(&[0, 0, 0, 0]);
            let split = index(2, &[], &[(b"link", link)], hash);
            assert_eq!(parse(&split).unwrap().1, Some("5a".repeat(hash)));
        }
        // An extended entry in version 2, a truncated file, a wrong version, a bad signature.
        assert!(parse(&index(2, &[entry(GITLINK, "x", 20, true, None)], &[], 20)).is_err());
        let good = index(2, &[entry(GITLINK, "x", 20, false, None)], &[], 20);
        assert!(parse(&good[..good.len() - 1]).is_err());
        let mut v5 = good.clone();
        v5[7] = 5;
        assert!(parse(&v5).unwrap_err().contains("version 5"));
        assert!(parse(b"DIRX\0\0\0\x02\0\0\0\0").is_err());
        // A prefix drop longer than the name before it.
        assert!(parse(&index(4, &[entry(GITLINK, "x", 20, false, Some(3))], &[], 20)).is_err());
    }

    #[test]
    fn what_real_git_writes() {
        let git = |dir: &Path, args: &[&str]| {
            let ok = std::process::Command::new("git").arg("-C").arg(dir).args(["-c", "user.email=t@e", "-c", "user.name=t"]).args(args).output().is_ok_and(|o| o.status.success());
            assert!(ok, "git {args:?}");
        };
        if std::process::Command::new("git").arg("--version").output().is_err() {
            eprintln!("skipped: no git");
            return;
        }
        let d = crate::test_dir();
        let ws = d.path();
        git(ws, &["init", "-q", "."]);
        std::fs::write(ws.join("f"), "x").unwrap();
        git(ws, &["add", "f"]);
        let head = "0123456789abcdef0123456789abcdef01234567";
        for (i, v) in ["2", "3", "4"].iter().enumerate() {
            git(ws, &["update-index", "--index-version", v]);
            git(ws, &["update-index", "--add", "--cacheinfo", &format!("160000,{head},deep/a/b/c/d/e/m{i}")]);
        }
        assert_eq!(gitlinks(&git_dir(&ws.join(".git")).unwrap()).unwrap(), ["deep/a/b/c/d/e/m0", "deep/a/b/c/d/e/m1", "deep/a/b/c/d/e/m2"].map(PathBuf::from));
        git(ws, &["update-index", "--split-index"]);
        git(ws, &["update-index", "--add", "--cacheinfo", &format!("160000,{head},build/x")]);
        let got = gitlinks(&ws.join(".git")).unwrap();
        assert!(got.contains(&PathBuf::from("build/x")) && got.contains(&PathBuf::from("deep/a/b/c/d/e/m0")), "{got:?}");
        // A worktree's `.git` file names its git directory.
        std::fs::create_dir(ws.join("w")).unwrap();
        std::fs::write(ws.join("w/.git"), "gitdir: ../.git\n").unwrap();
        assert_eq!(git_dir(&ws.join("w/.git")), Some(ws.join("w/../.git")));
        // No index: none; a FIFO where the index is: an error, not a hang.
        std::fs::create_dir_all(ws.join("empty")).unwrap();
        assert_eq!(gitlinks(&ws.join("empty")).unwrap(), Vec::<PathBuf>::new());
        #[cfg(unix)]
        {
            let fifo = std::ffi::CString::new(ws.join("empty/index").into_os_string().into_encoded_bytes()).unwrap();
            // SAFETY: a valid C string.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
            assert!(gitlinks(&ws.join("empty")).unwrap_err().contains("not a regular file"));
        }
    }

    #[cfg(unix)]
    fn stamp(ino: u64, ctime_ns: i128) -> memo::FileStamp {
        memo::FileStamp { dev: 7, ino, size: 100, mtime_ns: 5, ctime_ns }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_recorded_read_reads_back_exactly_and_nothing_else_reads() {
        let index = Path::new("/w/ws/.git/index");
        let r = memo::IndexRead {
            index: index.to_path_buf(),
            stamp: stamp(3, 1_000),
            shared: Some((PathBuf::from("/w/ws/.git/sharedindex.ab12"), stamp(4, -2))),
            read_ns: 10_000_000_000,
            links: ["build/x", "a b/c\nd"].map(PathBuf::from).to_vec(),
        };
        let b = r.encode();
        assert_eq!(memo::IndexRead::decode(index, &b), Some(r.clone()));
        let plain = memo::IndexRead { shared: None, links: Vec::new(), ..r.clone() };
        assert_eq!(memo::IndexRead::decode(index, &plain.encode()), Some(plain));
        // Another index's record; every cut.
        assert!(memo::IndexRead::decode(Path::new("/w/other/.git/index"), &b).is_none());
        for n in 0..b.len() {
            assert!(memo::IndexRead::decode(index, &b[..n]).is_none(), "cut at {n}");
        }
        // A changed digit reads as another number or not at all; a gitlink git would refuse, a
        // shared index elsewhere, a count that does not match, a trailing field: refused.
        let text = String::from_utf8_lossy(&b).into_owned();
        for (from, to) in [("L build/x", "L ../x"), ("L build/x", "L /x"), ("/w/ws/.git/sharedindex", "/w/elsewhere/sharedindex"), ("C 2", "C 1"), ("C 2", "C 02"), ("R 1", "R +1"), ("F 7 3", "F 7 03")] {
            let edited = text.replacen(from, to, 1);
            assert_ne!(edited, text, "{from}");
            assert!(memo::IndexRead::decode(index, edited.as_bytes()).is_none(), "{from} -> {to}");
        }
        let mut longer = b.clone();
        longer.extend_from_slice(b"L more\0");
        assert!(memo::IndexRead::decode(index, &longer).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_read_holds_only_while_every_file_is_the_one_read_unchanged_and_old_enough() {
        let window = super::super::records::RACY_WINDOW_NS;
        let r = memo::IndexRead { index: "/i".into(), stamp: stamp(3, 1_000), shared: None, read_ns: 1_000 + window + 1, links: Vec::new() };
        assert!(r.holds_with(|_| Some(stamp(3, 1_000))));
        assert!(!r.holds_with(|_| None), "gone");
        assert!(!r.holds_with(|_| Some(stamp(4, 1_000))), "another file at its path");
        assert!(!r.holds_with(|_| Some(stamp(3, 1_001))), "changed (its change time moved)");
        assert!(!r.holds_with(|_| Some(memo::FileStamp { size: 101, ..stamp(3, 1_000) })), "another size");
        assert!(!r.holds_with(|_| Some(memo::FileStamp { mtime_ns: 6, ..stamp(3, 1_000) })), "another modification time");
        let racy = memo::IndexRead { read_ns: 1_000 + window, ..r.clone() };
        assert!(!racy.holds_with(|_| Some(stamp(3, 1_000))), "read within the racy window of its last change");
        let split = memo::IndexRead { shared: Some(("/s".into(), stamp(9, 1_000))), ..r };
        assert!(split.holds_with(|p| Some(if p == Path::new("/s") { stamp(9, 1_000) } else { stamp(3, 1_000) })));
        assert!(!split.holds_with(|p| Some(if p == Path::new("/s") { stamp(9, 1_001) } else { stamp(3, 1_000) })), "the shared index changed");
    }

    /// A record of an old read is used; once the index is written again — in place, the same
    /// size, its modification time put back — it is not, and the index is read.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_recorded_read_is_used_until_the_index_changes_even_with_its_times_put_back() {
        use std::os::unix::fs::MetadataExt;
        let d = crate::test_dir();
        let gitdir = std::fs::canonicalize(d.path()).unwrap().join("repo/.git");
        std::fs::create_dir_all(&gitdir).unwrap();
        let index = gitdir.join("index");
        let real = tests_index(&["build/x"]);
        std::fs::write(&index, &real).unwrap();
        let records = d.path().join("walks");
        // Fresh: read, and recorded.
        assert_eq!(gitlinks_recorded(&gitdir, Some(&records)).unwrap(), vec![PathBuf::from("build/x")]);
        // The record rewritten as if that read had happened long after the index's last change,
        // with a gitlink the index does not have: it is what a later call answers (read back
        // from the record, not this process's memory).
        let m = std::fs::symlink_metadata(&index).unwrap();
        let st = memo::FileStamp::of(&m);
        let aged = memo::IndexRead { index: index.clone(), stamp: st, shared: None, read_ns: st.ctime_ns + 3 * super::super::records::RACY_WINDOW_NS, links: ["build/x", "only/in/the/record"].map(PathBuf::from).to_vec() };
        memo::remember(aged, Some(&records));
        memo::forget(&index);
        assert_eq!(gitlinks_recorded(&gitdir, Some(&records)).unwrap(), ["build/x", "only/in/the/record"].map(PathBuf::from));
        // Written again in place (same inode, same size), modification time put back: its change
        // time moved, so the index is read.
        let other = tests_index(&["build/y"]);
        assert_eq!(other.len(), real.len());
        // (Past the file clock's tick: a change in the same tick as the write before it could
        // leave the change time as it was, which a real read's racy window covers.)
        std::thread::sleep(std::time::Duration::from_millis(30));
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(&index).unwrap();
            f.write_all(&other).unwrap();
        }
        let c = std::ffi::CString::new(index.as_os_str().as_encoded_bytes()).unwrap();
        let times = [libc::timespec { tv_sec: m.atime(), tv_nsec: m.atime_nsec() }, libc::timespec { tv_sec: m.mtime(), tv_nsec: m.mtime_nsec() }];
        // SAFETY: a valid C string and two timespecs.
        assert_eq!(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) }, 0);
        let now = std::fs::symlink_metadata(&index).unwrap();
        assert_eq!((now.ino(), now.size(), now.mtime(), now.mtime_nsec()), (m.ino(), m.size(), m.mtime(), m.mtime_nsec()));
        assert_eq!(gitlinks_recorded(&gitdir, Some(&records)).unwrap(), vec![PathBuf::from("build/y")]);
        // Replaced by another file (what git does): read too.
        std::fs::write(gitdir.join("index.new"), tests_index(&["build/z"])).unwrap();
        std::fs::rename(gitdir.join("index.new"), &index).unwrap();
        assert_eq!(gitlinks_recorded(&gitdir, Some(&records)).unwrap(), vec![PathBuf::from("build/z")]);
    }

    /// A version 2 index with SHA-1 names holding one gitlink per name (names of one length).
    #[cfg(target_os = "linux")]
    fn tests_index(links: &[&str]) -> Vec<u8> {
        let entries: Vec<Vec<u8>> = links.iter().map(|n| entry(GITLINK, n, 20, false, None)).collect();
        index(2, &entries, &[], 20)
    }
}
