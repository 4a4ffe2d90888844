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
    let out = run(git, &["config", "--file", "-", "--no-includes", "--null", "--list"].map(std::ffi::OsString::from), None, Some(content))?;
    parse_null_list(&out)
}

/// The pathspec magic that matches `name` in every directory, whatever its case: a superset of
/// lint-staged's own `:(glob)**/name`.
fn anywhere_pathspec(name: &str) -> String {
    format!(":(glob,icase)**/{name}")
}

/// The files named one of `names` (in any directory, any case) that git lists in the worktree
/// `worktree`: tracked, or untracked and not ignored by a `.gitignore` — what lint-staged 13
/// and later look for their configurations with (`git ls-files --cached --others
/// --exclude-standard -- ':(glob)**/NAME'`), and a superset of it. The host's git is the oracle
/// of which files git shows (issue 55): the nested walk stops at its depth and skips `build/`,
/// `dist/`, `vendor/`…, and lint-staged does not.
///
/// It runs as [`config_list`]'s git does (no system or global config, no `GIT_*` variable) in
/// the worktree, with what could run code or hide a file turned off: `core.fsmonitor` (a
/// program), the index's untracked cache (data the command could have written), the
/// repository's exclude file and `core.excludesFile` (only `.gitignore` files exclude here: a
/// file git would show to lint-staged is never left out). Reading runs nothing.
///
/// # Errors
/// A message when no trusted git is found, git refuses (not a repository, a broken index: its
/// own message), a path it lists is not in the worktree, or it does not answer within its bounds.
pub fn listed_files(worktree: &Path, names: &[&str]) -> Result<Vec<PathBuf>, String> {
    ls_files(worktree, names.iter().map(|n| anywhere_pathspec(n).into()).collect())
}

/// [`listed_files`] limited to parts of the worktree: the files of `names` (any case) at any
/// depth below each directory of `dirs`, and each file of `files` (exactly that path), all inside
/// `worktree`. What git lists there is what it lists there in a whole listing (the same
/// options; its pathspecs only limit where it looks). Nothing asked, nothing listed.
///
/// # Errors
/// As [`listed_files`]; a path not inside `worktree`.
#[cfg(unix)]
pub fn listed_files_in(worktree: &Path, names: &[&str], dirs: &[PathBuf], files: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let rel = |p: &Path| p.strip_prefix(worktree).map(|r| r.as_os_str().as_bytes().to_vec()).map_err(|_| format!("{} is not in the worktree {}", p.display(), worktree.display()));
    let mut specs: Vec<std::ffi::OsString> = Vec::new();
    for d in dirs {
        let r = rel(d)?;
        for n in names {
            specs.push(if r.is_empty() { anywhere_pathspec(n).into() } else { std::ffi::OsString::from_vec(below_pathspec(&r, n)) });
        }
    }
    for f in files {
        let r = rel(f)?;
        if r.is_empty() {
            return Err(format!("{} is the worktree, not a file in it", f.display()));
        }
        let mut spec = b":(literal)".to_vec();
        spec.extend_from_slice(&r);
        specs.push(std::ffi::OsString::from_vec(spec));
    }
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    ls_files(worktree, specs)
}

/// The pathspec that matches `name` (any case) at any depth below the worktree's directory
/// `rel` (its bytes, each of git's glob characters `\`, `*`, `?` and `[` escaped: a directory
/// a command named `*` stands for itself).
#[cfg(unix)]
fn below_pathspec(rel: &[u8], name: &str) -> Vec<u8> {
    let mut spec = b":(glob,icase)".to_vec();
    for (i, part) in [rel, b"/**/".as_slice(), name.as_bytes()].into_iter().enumerate() {
        for &b in part {
            // (The `**` between them is the pattern's own.)
            if i != 1 && matches!(b, b'\\' | b'*' | b'?' | b'[') {
                spec.push(b'\\');
            }
            spec.push(b);
        }
    }
    spec
}

/// `git ls-files` of the worktree for `pathspecs`, as [`listed_files`] runs it.
fn ls_files(worktree: &Path, pathspecs: Vec<std::ffi::OsString>) -> Result<Vec<PathBuf>, String> {
    let git = trusted_git().ok_or("no trusted git on PATH to list them with")?;
    let mut args: Vec<std::ffi::OsString> = ["-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false", "-c", "safe.directory=*", "--no-optional-locks", "--work-tree=."]
        .iter()
        .chain(&["ls-files", "-z", "--full-name", "--cached", "--others", "--exclude-per-directory=.gitignore", "--"])
        .map(std::ffi::OsString::from)
        .collect();
    args.extend(pathspecs);
    let out = run(git, &args, Some(worktree), None)?;
    parse_listed(worktree, &out)
}

/// `git ls-files -z` output: NUL-terminated paths relative to `worktree`, each joined to it
/// (duplicates, an unmerged file's stages, once).
///
/// # Errors
/// A message when the output is not that: a path not NUL-terminated, empty, absolute, or one
/// with a `..` or `.` component.
pub fn parse_listed(worktree: &Path, out: &[u8]) -> Result<Vec<PathBuf>, String> {
    if out.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = out.strip_suffix(b"\0") else { return Err("git's list is not NUL-terminated".into()) };
    let mut files: Vec<PathBuf> = Vec::new();
    // A set beside the list: the names are the command's, and it can make many of them.
    let mut seen: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    for rel in body.split(|b| *b == 0) {
        #[cfg(unix)]
        let rel = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(rel));
        #[cfg(not(unix))]
        let rel = Path::new(std::str::from_utf8(rel).map_err(|_| "git listed a path that is not UTF-8".to_string())?);
        if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
            return Err(format!("git listed a path that is not in the worktree: {}", rel.display()));
        }
        let path = worktree.join(rel);
        if seen.insert(path.clone()) {
            files.push(path);
        }
    }
    Ok(files)
}

/// Runs the host's `git` with `args`, an empty environment and no system or global config, in
/// `cwd` (else `/`, outside any repository), `stdin` fed to it; returns what it wrote to stdout.
fn run(git: &Path, args: &[std::ffi::OsString], cwd: Option<&Path>, stdin: Option<&[u8]>) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new(git);
    cmd.args(args).env_clear().env("HOME", "/nonexistent").env("GIT_CONFIG_NOSYSTEM", "1").env("GIT_CONFIG_GLOBAL", "/dev/null").env("LC_ALL", "C");
    match cwd {
        Some(d) => cmd.current_dir(d),
        None => cmd.env("GIT_DIR", "/nonexistent").current_dir("/"),
    };
    let mut child = cmd
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", git.display()))?;
    // The input is written from a thread: git may answer (an error) before reading it all.
    let writer = match (stdin, child.stdin.take()) {
        (Some(content), Some(mut pipe)) => {
            let input = content.to_vec();
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(&input);
            }))
        }
        _ => None,
    };
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
    // Polled from 50 µs, doubling to 2 ms: git answers most lists in a few milliseconds, and a
    // run asks it twice where lint-staged is in force.
    let mut pause = Duration::from_micros(50);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(2));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("git did not answer in time".into());
            }
        }
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    let out = reader.join().map_err(|_| "reader failed")?.map_err(|e| e.to_string())?;
    let err = err_reader.join().unwrap_or_default();
    if out.len() > MAX_OUTPUT {
        return Err("git's list is too large".into());
    }
    if !status.success() {
        let msg = String::from_utf8_lossy(&err);
        return Err(format!("git refuses it: {}", msg.trim().trim_start_matches("fatal: ")));
    }
    Ok(out)
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
    fn a_listing_reads_back_inside_the_worktree_or_is_refused() {
        let w = Path::new("/w");
        assert_eq!(parse_listed(w, b"").unwrap(), Vec::<PathBuf>::new());
        assert_eq!(parse_listed(w, b"a/package.json\0b/.lintstagedrc\0a/package.json\0").unwrap(), vec![w.join("a/package.json"), w.join("b/.lintstagedrc")]);
        for bad in [&b"a/package.json"[..], b"\0", b"a\0\0", b"/etc/x\0", b"a/../x\0", b"./x\0", b".."] {
            assert!(parse_listed(w, bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// What lint-staged would find and more: tracked and untracked files at any depth and in
    /// `build/`, any case; not what a `.gitignore` hides; what the repository's exclude file
    /// hides is listed (the command could have written it); `core.fsmonitor` does not run.
    #[test]
    fn git_lists_configurations_anywhere_but_where_gitignore_hides_them() {
        let Some(_) = trusted_git() else {
            eprintln!("skipped: no trusted git on PATH");
            return;
        };
        let d = crate::test_dir();
        let r = std::fs::canonicalize(d.path()).unwrap();
        let git = |args: &[&str]| assert!(Command::new("git").current_dir(&r).args(args).env("GIT_CONFIG_NOSYSTEM", "1").env("GIT_CONFIG_GLOBAL", "/dev/null").status().unwrap().success(), "{args:?}");
        git(&["init", "-q"]);
        let files = ["package.json", "a/b/c/d/e/f/.lintstagedrc.json", "build/package.json", "gen/package.json", "excluded/.lintstagedrc", "x/.LintStagedRC.JSON", "x/not.lintstagedrc.json", "tracked/deep/er/still/lint-staged.config.js"];
        for f in files {
            std::fs::create_dir_all(r.join(f).parent().unwrap()).unwrap();
            std::fs::write(r.join(f), "{}").unwrap();
        }
        git(&["add", "tracked"]);
        std::fs::write(r.join(".gitignore"), "gen/\n").unwrap();
        std::fs::write(r.join(".git/info/exclude"), "excluded/\n").unwrap();
        let marker = r.join("fsmonitor-ran");
        git(&["config", "core.fsmonitor", &format!("touch {}", marker.display())]);
        let mut got = listed_files(&r, &["package.json", ".lintstagedrc.json", ".lintstagedrc", "lint-staged.config.js"]).unwrap();
        got.sort();
        let mut want: Vec<PathBuf> = ["package.json", "a/b/c/d/e/f/.lintstagedrc.json", "build/package.json", "excluded/.lintstagedrc", "x/.LintStagedRC.JSON", "tracked/deep/er/still/lint-staged.config.js"].iter().map(|f| r.join(f)).collect();
        want.sort();
        assert_eq!(got, want);
        assert!(!marker.exists(), "core.fsmonitor ran");
        assert!(listed_files(&r.join("a"), &["package.json"]).is_ok(), "a subdirectory of the worktree lists too");
        let not_repo = crate::test_dir();
        assert!(listed_files(not_repo.path(), &["package.json"]).is_err());
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
