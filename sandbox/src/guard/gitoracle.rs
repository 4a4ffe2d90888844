//! Git as the oracle of its own file formats (issue 55): the after-run review reads a git config
//! file the command wrote with the host's own `git`, not only with this crate's parser.
//!
//! Re-implementing git's syntax to decide what is safe leaves a differential: a value git reads
//! as `!sh -c …` that the project's parser reads as something else is a hole. So the review asks
//! git (`git config --file - --no-includes --null --list`, fed the exact bytes the review holds:
//! reading runs nothing and follows no include) and compares git's list of keys and values with
//! its own parse. A file git cannot read, or one the two read differently, is pending as a whole
//! ([`crate::guard::review::review_config`]).
//!
//! The `git` used is the host's, unconfined: it must be one no sandboxed command could have
//! planted. Only an absolute `PATH` entry counts, and the binary's real path and every directory
//! above it must belong to root and be writable by no one else ([`trusted_git`]): a `git` of the
//! user's own (in `~/.local/bin`, in a workspace's `bin/` on `PATH`) could be one a command wrote
//! through a granted path. Without a trusted git every changed config file is pending whole. It runs with an empty environment (no `GIT_*` variable, no
//! system or global config, `HOME` pointing nowhere), outside any repository, with a bound on
//! its output and its time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A config file's entries as git lists them: `(section[.subsection].key, value)`, section and
/// key lower-cased, `None` for a key without `=`.
pub type ConfigList = Vec<(String, Option<String>)>;

/// The most bytes of output read from git (a config the review reads is at most this large too).
const MAX_OUTPUT: usize = 8 << 20;

/// How long git may take to list one file.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Splits `git config --null --list` output into its entries: each is `name\nvalue\0`, or
/// `name\0` for a key without a value.
///
/// # Errors
/// A message when the output is not that (not UTF-8, or an entry without its terminator).
pub fn parse_null_list(out: &[u8]) -> Result<ConfigList, String> {
    let text = std::str::from_utf8(out).map_err(|_| "git listed bytes that are not UTF-8".to_string())?;
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = text.strip_suffix('\0') else { return Err("git's list is not NUL-terminated".into()) };
    Ok(body
        .split('\0')
        .map(|e| match e.split_once('\n') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (e.to_string(), None),
        })
        .collect())
}

/// The host's `git`, when a trusted one is found on `PATH` (see the module docs); looked up once.
#[must_use]
pub fn trusted_git() -> Option<&'static Path> {
    static GIT: OnceLock<Option<PathBuf>> = OnceLock::new();
    GIT.get_or_init(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).filter(|d| d.is_absolute()).map(|d| d.join("git")).find(|g| trusted_file(g))
    })
    .as_deref()
}

#[cfg(unix)]
fn trusted_owner(p: &Path, dir: bool) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0 && (m.is_dir() == dir))
}

/// `p` (followed to its real path) is a regular executable file of root's whose every directory
/// on the way from `/` belongs to root and is writable by no one else.
#[cfg(unix)]
fn trusted_file(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(real) = std::fs::canonicalize(p) else { return false };
    if !std::fs::metadata(&real).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0) || !trusted_owner(&real, false) {
        return false;
    }
    real.ancestors().skip(1).all(|d| trusted_owner(d, true))
}

#[cfg(not(unix))]
fn trusted_file(p: &Path) -> bool {
    p.is_file()
}

/// Lists the config file `content` with `git` ([`trusted_git`]): what git itself reads in it.
///
/// # Errors
/// A message when no trusted git is found, git refuses the file (its own message), or it does
/// not answer within its bounds.
pub fn config_list(content: &[u8]) -> Result<ConfigList, String> {
    let git = trusted_git().ok_or("no trusted git on PATH to read it with")?;
    list_with(git, content)
}

fn list_with(git: &Path, content: &[u8]) -> Result<ConfigList, String> {
    let mut child = Command::new(git)
        .args(["config", "--file", "-", "--no-includes", "--null", "--list"])
        .env_clear()
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_DIR", "/nonexistent")
        .env("LC_ALL", "C")
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", git.display()))?;
    // The input is written from a thread: git may answer (an error) before reading it all.
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let input = content.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let err_reader = std::thread::spawn(move || {
        let mut e = Vec::new();
        let _ = (&mut stderr).take(4096).read_to_end(&mut e);
        e
    });
    let deadline = Instant::now() + TIMEOUT;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let r = (&mut stdout).take(MAX_OUTPUT as u64 + 1).read_to_end(&mut out);
        r.map(|_| out)
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("git did not answer in time".into());
            }
        }
    };
    let _ = writer.join();
    let out = reader.join().map_err(|_| "reader failed")?.map_err(|e| e.to_string())?;
    let err = err_reader.join().unwrap_or_default();
    if out.len() > MAX_OUTPUT {
        return Err("git's list is too large".into());
    }
    if !status.success() {
        let msg = String::from_utf8_lossy(&err);
        return Err(format!("git refuses it: {}", msg.trim().trim_start_matches("fatal: ")));
    }
    parse_null_list(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_null_list_splits_keys_values_and_bare_keys() {
        assert_eq!(parse_null_list(b"").unwrap(), vec![]);
        assert_eq!(parse_null_list(b"a.b\n1\0c.d.e\0x.y\n\n\0").unwrap(), vec![("a.b".into(), Some("1".into())), ("c.d.e".into(), None), ("x.y".into(), Some("\n".into()))]);
        assert!(parse_null_list(b"a.b\n1").is_err());
        assert!(parse_null_list(b"a.b\n\xff\0").is_err());
    }

    #[test]
    fn git_reads_a_config_and_refuses_a_broken_one() {
        let Some(_) = trusted_git() else {
            eprintln!("skipped: no trusted git on PATH");
            return;
        };
        let l = config_list(b"[core]\n\tfsmonitor = \"a\\tb\"\n[Sec \"Sub\"]\nK\n").unwrap();
        assert_eq!(l, vec![("core.fsmonitor".into(), Some("a\tb".into())), ("sec.Sub.k".into(), None)]);
        assert!(config_list(b"[core\n").is_err());
        assert!(config_list(b"[alias]\n\tx = \"!\\u\"\n").is_err());
        // Includes are not followed; the include key itself is listed.
        let l = config_list(b"[include]\n\tpath = /etc/passwd\n").unwrap();
        assert_eq!(l, vec![("include.path".into(), Some("/etc/passwd".into()))]);
    }

    /// A random config text from pieces where parsers tend to differ: quoting, escapes, line
    /// continuations, comments, blanks, CRLF, header forms, case, non-ASCII.
    pub(crate) fn random_config(seed: &mut u64) -> Vec<u8> {
        let mut next = |n: u64| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed % n
        };
        const HEADERS: &[&str] = &["[core]", "[Core]", "[alias]", "[remote \"origin\"]", "[remote \"o\\\"r\"]", "[remote \"a\\\\b\"]", "[remote \"a\\xb\"]", "[branch.Main]", "[ core ]", "[sec \"sub\" ]", "[a.b.c]", "[x-y]", "[sec \"\"]", "[sec\t\"t\"]", "[bad", "[sec \"unterminated]", "[]", "[ \"x\"]", "[a.b \"c\"]", "[.a]", "[a.]", "[\u{b}core]", "[core\u{c}]", "[x \"a]b\"]", "k = before any section"];
        const KEYS: &[&str] = &["fsmonitor", "FsMonitor", "st", "url", "key-1", "k", "1bad", "bad_key", "x"];
        const VALUES: &[&str] = &["", "plain", " spaced  ", "\"quoted ; # \"", "a \"b\" c", "\\n\\t\\b\\\\\\\"", "\\x", "!sh -c id", "\"!\"sh", "a ; comment", "a # comment", "\"unterminated", "tail\\", "é ü", "a\\\n!b", "\\\n!c", "x\ty", "\"\\!\"", "\u{b}", "\u{c}", "\r", "a\rb", "\"a\rb\"", "\\\r\n!d"];
        const ENDS: &[&str] = &["\n", "\r\n", "\n\n", " \n", "\t# c\n", " ; c\n", "\r\r\n", "\u{b}\n", "\r"];
        let mut out = String::new();
        match next(12) {
            0 => out.push('\u{feff}'),
            1 => out.push('\u{ef}'),
            _ => {}
        }
        for _ in 0..next(6) + 1 {
            out.push_str(HEADERS[next(HEADERS.len() as u64) as usize]);
            if next(4) == 0 {
                out.push(' ');
                out.push_str(KEYS[next(KEYS.len() as u64) as usize]);
                out.push_str(" = v");
            }
            out.push_str(ENDS[next(ENDS.len() as u64) as usize]);
            for _ in 0..next(4) {
                out.push_str(["", "\t", "  ", " \t"][next(4) as usize]);
                out.push_str(KEYS[next(KEYS.len() as u64) as usize]);
                match next(4) {
                    0 => {}
                    1 => out.push_str(" = "),
                    2 => out.push('='),
                    _ => out.push_str("\t=\t"),
                }
                if !out.ends_with(|c: char| c.is_ascii_alphanumeric()) {
                    for _ in 0..next(3) + 1 {
                        out.push_str(VALUES[next(VALUES.len() as u64) as usize]);
                    }
                }
                out.push_str(ENDS[next(ENDS.len() as u64) as usize]);
            }
            if next(5) == 0 {
                out.push_str(["# comment\n", "; comment\n", "\n", "   \n"][next(4) as usize]);
            }
        }
        out.into_bytes()
    }

    /// The differential target against git (issue 55): this crate's config parser and git read
    /// every generated file alike — both refuse it, or both list the same keys and values.
    /// `LGCI_DIFF_CASES` sets how many cases (the nightly runs more), `LGCI_DIFF_SEED` the seed.
    #[test]
    fn the_review_parser_reads_configs_as_git_does() {
        let Some(_) = trusted_git() else {
            eprintln!("skipped: no trusted git on PATH");
            return;
        };
        let cases: usize = std::env::var("LGCI_DIFF_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
        let mut seed: u64 = std::env::var("LGCI_DIFF_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed_cafe_f00d_0001);
        let mut disagreements = Vec::new();
        for _ in 0..cases {
            let bytes = random_config(&mut seed);
            let text = String::from_utf8(bytes.clone()).unwrap();
            let ours = crate::guard::gitconfig::parse(&text).map(|c| c.entries.iter().map(|e| (e.name(), e.value.clone())).collect::<ConfigList>());
            let git = config_list(&bytes);
            let same = match (&ours, &git) {
                (Ok(a), Ok(b)) => a == b,
                (Err(_), Err(_)) => true,
                _ => false,
            };
            if !same {
                disagreements.push(format!("{text:?}\n  ours: {ours:?}\n  git:  {git:?}"));
            }
        }
        assert!(disagreements.is_empty(), "{} of {cases} configs read differently:\n{}", disagreements.len(), disagreements.iter().take(5).cloned().collect::<Vec<_>>().join("\n"));
    }
}
