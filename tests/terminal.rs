//! The caller's terminal is not the command's (red-team hole 3) and what the sandbox prints is
//! shown as it is (hole 11), and bad input is an input error (hole 12).
//!
//! The CLI runs with a pseudo-terminal as its stdin, stdout and stderr, like an interactive
//! user's. Every check looks from outside: what the terminal's master side received, and the
//! terminal's settings read before and after. Each attempt is also run bare (the same shell
//! line, the terminal as its stdin), where it must have its effect, or it proves nothing.

mod support;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Stdio;
use std::time::{Duration, Instant};

use support::*;

/// A pseudo-terminal: the master (the "terminal") and the slave path (the process's side).
struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

impl Pty {
    fn open() -> Pty {
        // SAFETY: posix_openpt/grantpt/unlockpt/ptsname_r on a fresh master; fds owned below.
        unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(m >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            assert_eq!(libc::grantpt(m), 0);
            assert_eq!(libc::unlockpt(m), 0);
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
            let s = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(s >= 0, "open slave: {}", std::io::Error::last_os_error());
            // Non-blocking master reads.
            libc::fcntl(m, libc::F_SETFL, libc::O_NONBLOCK);
            Pty { master: OwnedFd::from_raw_fd(m), slave: OwnedFd::from_raw_fd(s) }
        }
    }

    fn stdio(&self) -> Stdio {
        Stdio::from(self.slave.try_clone().expect("dup slave"))
    }

    fn termios(&self) -> libc::termios {
        // SAFETY: tcgetattr into a zeroed struct.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            assert_eq!(libc::tcgetattr(self.slave.as_raw_fd(), &mut t), 0);
            t
        }
    }

    /// Everything the master side can read now.
    fn drain(&self) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reading into a local buffer.
            let n = unsafe { libc::read(self.master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return all;
            }
            all.extend_from_slice(&buf[..n as usize]);
        }
    }
}

fn same_termios(a: &libc::termios, b: &libc::termios) -> bool {
    a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag && a.c_lflag == b.c_lflag && a.c_cc == b.c_cc
}

/// Runs `cmd` with the pty as stdin, stdout and stderr; returns its exit code and what the
/// terminal received (read while it runs, so the pty buffer never fills).
fn run_on_pty(pty: &Pty, mut cmd: std::process::Command) -> (Option<i32>, Vec<u8>) {
    cmd.stdin(pty.stdio()).stdout(pty.stdio()).stderr(pty.stdio());
    let mut child = cmd.spawn().expect("spawn");
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        seen.extend(pty.drain());
        if let Some(st) = child.try_wait().expect("wait") {
            std::thread::sleep(Duration::from_millis(50));
            seen.extend(pty.drain());
            return (st.code(), seen);
        }
        assert!(Instant::now() < deadline, "hung: {}", String::from_utf8_lossy(&seen));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The command writes a token to its stdin and switches the terminal to raw mode without echo;
/// bare, both reach the terminal; sandboxed, neither does (stdin is /dev/null).
#[test]
fn the_callers_terminal_is_not_handed_to_the_command() {
    let w = World::new();
    let token = unique_token();
    // The token is assembled by printf, so the banner's copy of the command does not contain it.
    let snippet = format!("printf '%s-%s' '{token}' via-stdin >&0; stty raw -echo <&0; echo done");
    // Bare: the attempt works, so the sandboxed result means something.
    let pty = Pty::open();
    let before = pty.termios();
    let (_, seen) = run_on_pty(&pty, w.bare_cmd(&snippet));
    let bare_changed = !same_termios(&before, &pty.termios());
    assert!(String::from_utf8_lossy(&seen).contains(&format!("{token}-via-stdin")) && bare_changed,
        "bare run had no effect on the terminal, the probe proves nothing: {}", String::from_utf8_lossy(&seen));
    // Sandboxed, through the CLI in human mode (no --json), no --stdin flag.
    let pty = Pty::open();
    let before = pty.termios();
    let (code, seen) = run_on_pty(&pty, w.sandbox_cmd(&[], &[&snippet]));
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains("done"), "the command did not run (exit {code:?}): {seen}");
    assert!(!seen.contains(&format!("{token}-via-stdin")), "the command wrote to the caller's terminal: {seen}");
    assert!(same_termios(&before, &pty.termios()), "the command changed the caller's terminal settings: {seen}");
}

/// `--stdin inherit` hands the terminal over on purpose; its settings are restored afterwards.
#[test]
fn stdin_inherit_restores_the_terminal_settings() {
    let w = World::new();
    let pty = Pty::open();
    let before = pty.termios();
    let (code, seen) = run_on_pty(&pty, w.sandbox_cmd(&["--stdin", "inherit"], &["stty raw -echo; test -t 0 && echo is-a-tty"]));
    let seen = String::from_utf8_lossy(&seen);
    assert_eq!(code, Some(0), "{seen}");
    assert!(seen.contains("is-a-tty"), "--stdin inherit did not hand over the terminal: {seen}");
    assert!(same_termios(&before, &pty.termios()), "terminal settings not restored after the run: {seen}");
}

/// Stdin that is not a terminal is relayed through a pipe: the bytes arrive, the descriptor
/// does not (the command cannot write back into it).
#[test]
fn piped_stdin_is_relayed_not_handed_over() {
    let w = World::new();
    let mut cmd = w.sandbox_cmd(&["--quiet"], &["cat; test -p /dev/stdin && echo is-a-pipe"]);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"line one\nline two\n").expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout, "line one\nline two\nis-a-pipe\n");
    // With --stdin null, nothing arrives.
    let mut cmd = w.sandbox_cmd(&["--quiet", "--stdin", "null"], &["cat; echo end"]);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    {
        use std::io::Write;
        let _ = child.stdin.take().expect("stdin").write_all(b"secret input\n");
    }
    let out = child.wait_with_output().expect("wait");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "end\n");
}

/// Output relayed to a terminal: colours pass, a clipboard write (OSC 52), a title change and a
/// device-status request (which makes the terminal type a reply into its input) are shown as
/// text instead of reaching the terminal as sequences. Bare, the raw sequences reach it.
#[test]
fn output_to_a_terminal_is_neutralised() {
    let w = World::new();
    let snippet = r"printf '\033[31mred\033[0m \033]52;c;cHduZWQ=\007 \033]0;TITLE\007 \033[6n end\n'";
    let pty = Pty::open();
    let (_, bare) = run_on_pty(&pty, w.bare_cmd(snippet));
    assert!(bare.windows(5).any(|x| x == b"\x1b]52;"), "bare output has no OSC 52: {bare:?}");
    let pty = Pty::open();
    let (code, seen) = run_on_pty(&pty, w.sandbox_cmd(&[], &[snippet]));
    let text = String::from_utf8_lossy(&seen);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("\x1b[31mred\x1b[0m"), "colours should pass: {text:?}");
    for bad in [&b"\x1b]52;"[..], b"\x1b]0;", b"\x1b[6n"] {
        assert!(!seen.windows(bad.len()).any(|x| x == bad), "{bad:?} reached the terminal: {text:?}");
    }
    assert!(text.contains("^[]52;c;cHduZWQ=^G"), "the OSC 52 sequence should be shown as text: {text:?}");
    // Output that is not a terminal is passed unchanged (a pipeline gets the exact bytes).
    let o = w.sandboxed_with(&["--quiet"], snippet);
    assert!(o.stdout_raw.windows(5).any(|x| x == b"\x1b]52;"), "{}", o.describe());
}

/// The banner shows the command with its control characters escaped: `\r` plus "erase line"
/// cannot hide the real command behind a harmless one.
#[test]
fn banner_escapes_control_characters() {
    let w = World::new();
    let o = w.sandboxed("true; # \r\x1b[2Kecho harmless");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let banner = o.stderr.lines().find(|l| l.contains("Running sandboxed")).unwrap_or_else(|| panic!("no banner{}", o.describe()));
    assert!(banner.contains("true; # \\r\\e[2Kecho harmless"), "{banner:?}");
    assert!(!o.stderr_raw.contains(&0x1b) && !o.stderr_raw.contains(&b'\r'), "raw control bytes on stderr{}", o.describe());
}

/// Non-UTF-8 arguments are fine as commands and paths: no panic, one-line errors, exit 2 for
/// input errors, nothing executed.
#[test]
fn bad_input_is_one_line_and_exit_2() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::new();
    let marker = w.ws.join("MARKER");
    let touch = format!("touch {}", sh_quote(&marker));
    for opts in [
        // A glob that matches nothing is refused (a missing plain path is skipped: below).
        vec![std::ffi::OsStr::from_bytes(b"--allow-read"), std::ffi::OsStr::from_bytes(b"/var/tmp/\xff-missing*")],
        vec![std::ffi::OsStr::new("--deny"), std::ffi::OsStr::new("relative-missing-dir/*.env")],
        vec![std::ffi::OsStr::new("--allow-write"), std::ffi::OsStr::new("/nonexistent/\x1b[2K")],
        vec![std::ffi::OsStr::new("--workspace"), std::ffi::OsStr::from_bytes(b"/var/tmp/\xff-nope")],
    ] {
        let mut cmd = w.localgpt_cmd(&["sandbox", "run"]);
        cmd.args(&opts).arg("--").arg(&touch);
        let o = run(cmd, &format!("{opts:?}"));
        assert_eq!(o.code(), Some(125), "{opts:?}{}", o.describe());
        assert_eq!(o.stderr.lines().filter(|l| !l.trim().is_empty()).count(), 1, "{opts:?}{}", o.describe());
        assert!(!o.stderr.contains("panicked") && !o.stderr_raw.contains(&0x1b), "{opts:?}{}", o.describe());
        assert!(!marker.exists(), "ran despite {opts:?}");
    }
    // A non-UTF-8 command runs, and its bytes arrive unchanged.
    let mut cmd = w.localgpt_cmd(&["sandbox", "run", "--quiet", "--workspace"]);
    cmd.arg(&w.ws).arg("--").arg(std::ffi::OsStr::from_bytes(b"printf '\\377\\n'; echo \xe9t\xe9"));
    let o = run(cmd, "non-UTF-8 command");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert_eq!(o.stdout_raw, b"\xff\n\xe9t\xe9\n");
    // A grant that does not exist is skipped with one warning line, and the command runs.
    let mut cmd = w.localgpt_cmd(&["sandbox", "run", "--quiet"]);
    cmd.args([std::ffi::OsStr::from_bytes(b"--allow-read"), std::ffi::OsStr::from_bytes(b"/var/tmp/\xff-missing")]).arg("--").arg(&touch);
    let o = run(cmd, "missing --allow-read");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert_eq!(o.stderr.lines().filter(|l| !l.trim().is_empty()).count(), 1 + level_warning_lines(&w), "{}", o.describe());
    assert!(o.stderr.contains("does not exist") && marker.exists(), "{}", o.describe());
}

impl Pty {
    fn set_size(&self, rows: u16, cols: u16) {
        let ws = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCSWINSZ from a local on our master.
        assert_eq!(unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &ws) }, 0);
    }

    fn type_in(&self, bytes: &[u8]) {
        // SAFETY: writing a local buffer to our master.
        assert_eq!(unsafe { libc::write(self.master.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) }, bytes.len() as isize);
    }

    /// The device number of the slave (what `stat -L -c %t:%T` shows of it, in hex).
    fn device(&self) -> String {
        // SAFETY: fstat into a zeroed struct.
        let st = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            assert_eq!(libc::fstat(self.slave.as_raw_fd(), &mut st), 0);
            st
        };
        format!("{:x}:{:x}", libc::major(st.st_rdev), libc::minor(st.st_rdev))
    }
}

/// Text the terminal shows, and what is then done to the terminal.
type Step<'a> = (&'a str, &'a dyn Fn(&Pty));

/// Runs `cmd` as an interactive user would: a session of its own with the pty as its
/// controlling terminal (so that a resize signals it), stdin, stdout and stderr. Each step waits
/// until the terminal has shown its text, then acts on the terminal; returns the exit code and
/// everything shown.
fn run_interactive(pty: &Pty, mut cmd: std::process::Command, steps: &[Step<'_>]) -> (Option<i32>, Vec<u8>) {
    use std::os::unix::process::CommandExt;
    cmd.stdin(pty.stdio()).stdout(pty.stdio()).stderr(pty.stdio());
    // SAFETY: async-signal-safe calls in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn");
    let mut seen = Vec::new();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        seen.extend(pty.drain());
        if let Some((text, act)) = steps.get(next) {
            if String::from_utf8_lossy(&seen).contains(text) {
                act(pty);
                next += 1;
            }
        }
        if let Some(st) = child.try_wait().expect("wait") {
            std::thread::sleep(Duration::from_millis(50));
            seen.extend(pty.drain());
            assert_eq!(next, steps.len(), "ended before the step {next} was reached: {}", String::from_utf8_lossy(&seen));
            return (st.code(), seen);
        }
        assert!(Instant::now() < deadline, "hung: {}", String::from_utf8_lossy(&seen));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `--stdin inherit` on a terminal gives the command a terminal of its own: stdin, stdout and
/// stderr are a terminal of the caller's window size with a name (`tty`), which is not the caller's terminal (its
/// device differs; TIOCSTI is refused); a resize reaches the program; Ctrl-C interrupts the
/// program in the foreground and the run then ends as the command does; the caller's settings
/// are restored. Each is seen from outside, on the caller's terminal.
#[test]
fn stdin_inherit_on_a_terminal_gives_the_command_a_terminal_of_its_own() {
    let w = World::new();
    let program = r#"
import fcntl, os, signal, termios, time
signal.signal(signal.SIGWINCH, lambda *a: print("resized to %dx%d" % os.get_terminal_size(0)[::-1], flush=True))
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("TIOCSTI passed")
except OSError as e:
    print("TIOCSTI refused:", e.errno)
print("READY", flush=True)
try:
    time.sleep(30)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted", flush=True)
"#;
    let script = format!(
        "for f in 0 1 2; do test -t $f && printf 'tty%s ' $f; done; echo; tty >/dev/null && echo has-a-name; stty size; stat -L -c 'device %t:%T' /proc/self/fd/0; exec /usr/bin/python3 -c {}",
        sh_quote(program)
    );
    let pty = Pty::open();
    pty.set_size(33, 101);
    let before = pty.termios();
    let resize: &dyn Fn(&Pty) = &|p| p.set_size(40, 120);
    let interrupt: &dyn Fn(&Pty) = &|p| p.type_in(b"\x03");
    let (code, seen) = run_interactive(&pty, w.sandbox_cmd(&["--quiet", "--stdin", "inherit"], &[&script]), &[("READY", resize), ("resized to 40x120", interrupt)]);
    let seen = String::from_utf8_lossy(&seen);
    assert_eq!(code, Some(0), "{seen}");
    assert!(seen.contains("tty0 tty1 tty2"), "stdin, stdout and stderr are not all a terminal: {seen}");
    assert!(seen.contains("has-a-name"), "the terminal has no name (`tty` says it is not a terminal): {seen}");
    assert!(seen.contains("33 101"), "the window size was not the caller's: {seen}");
    assert!(!seen.contains(&format!("device {}", pty.device())), "the command was handed the caller's terminal: {seen}");
    assert!(seen.contains("TIOCSTI refused: 1"), "{seen}");
    assert!(seen.contains("interrupted") && !seen.contains("not interrupted"), "Ctrl-C did not reach the program: {seen}");
    assert!(same_termios(&before, &pty.termios()), "terminal settings not restored after the run: {seen}");
}

/// A command with a terminal of its own draws a screen: the alternate screen, cursor and mouse
/// modes pass; a clipboard write and a cursor-position request do not reach the caller's
/// terminal (bare, they do); the mouse mode it left on is switched off after the run.
#[test]
fn a_commands_screen_passes_what_draws_and_nothing_else() {
    let w = World::new();
    let snippet = r"printf '\033[?1049h\033[?25l\033[?1000hscreen\033]52;c;cHduZWQ=\007\033[6n\033[?25h\033[?1049l done\n'";
    let pty = Pty::open();
    let (_, bare) = run_on_pty(&pty, w.bare_cmd(snippet));
    assert!(bare.windows(5).any(|x| x == b"\x1b]52;") && bare.windows(4).any(|x| x == b"\x1b[6n"), "bare output lacks the sequences: {bare:?}");
    let pty = Pty::open();
    let (code, seen) = run_on_pty(&pty, w.sandbox_cmd(&["--quiet", "--stdin", "inherit"], &[snippet]));
    let text = String::from_utf8_lossy(&seen);
    assert_eq!(code, Some(0), "{text}");
    for good in ["\x1b[?1049h\x1b[?25l\x1b[?1000hscreen\x1b[?25h\x1b[?1049l done", "\x1b[?1000l"] {
        assert!(text.contains(good), "{good:?} did not pass: {text:?}");
    }
    for bad in [&b"\x1b]52;"[..], b"\x1b[6n", b"cHduZWQ"] {
        assert!(!seen.windows(bad.len()).any(|x| x == bad), "{bad:?} reached the terminal: {text:?}");
    }
}
