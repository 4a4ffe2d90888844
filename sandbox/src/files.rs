//! Reading the small files a command may have left (git and toolchain configs, `commondir`)
//! without blocking on them. Layer 0 of `ARCHITECTURE.md`: the standard library and `libc`.

/// Reads a configuration file (following links, as the programs that read it do) without
/// blocking: a FIFO, a device or a file over `max` bytes left where one is expected is `None`,
/// not read (a FIFO would wait for a writer: every later plan would hang).
#[must_use]
pub fn read_config_file(path: &std::path::Path, max: u64) -> Option<String> {
    read_config_bytes(path, max).and_then(|b| String::from_utf8(b).ok())
}

/// Reads a regular file of at most `max` bytes without blocking on a FIFO: its bytes, whatever
/// their encoding (git reads a config file as bytes: one that is not UTF-8 is still git's).
#[must_use]
pub fn read_config_bytes(path: &std::path::Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK);
    }
    let f = o.open(path).ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > max {
        return None;
    }
    let mut s = Vec::new();
    f.take(max).read_to_end(&mut s).ok()?;
    Some(s)
}
