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
    let text = String::from_utf8(read_file(&real, 4096).ok()?).ok()?;
    let to = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    if to.is_empty() {
        return None;
    }
    Some(dotgit.parent()?.join(to))
}

/// The worktree-relative paths of the gitlinks in the index of the git directory `gitdir` (and
/// in its shared index, for a split index); no index: none.
///
/// # Errors
///
/// The index (or its shared index) exists but is not a regular file, is larger than
/// [`INDEX_MAX_BYTES`], or does not parse.
pub fn gitlinks(gitdir: &Path) -> Result<Vec<PathBuf>, String> {
    let index = gitdir.join("index");
    let (mut names, shared) = match read_file(&index, INDEX_MAX_BYTES) {
        Ok(d) => parse(&d).map_err(|e| format!("{}: {e}", index.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", index.display())),
    };
    if let Some(hex) = shared {
        let s = gitdir.join(format!("sharedindex.{hex}"));
        let d = read_file(&s, INDEX_MAX_BYTES).map_err(|e| format!("{} (the shared part of a split index): {e}", s.display()))?;
        names.extend(parse(&d).map_err(|e| format!("{}: {e}", s.display()))?.0);
    }
    let mut out: Vec<PathBuf> = names.iter().filter_map(|n| rel_path(n)).collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// An index path name as a relative path; `None` for one git would refuse (empty, absolute,
/// `.`/`..` components).
fn rel_path(name: &[u8]) -> Option<PathBuf> {
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
/// writer).
fn read_file(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
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
    Ok(v)
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
}
