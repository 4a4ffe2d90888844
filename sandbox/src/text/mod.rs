//! Text that reaches a human: escaping control characters in what the sandbox prints about a
//! command (banner, reports), and a streaming filter that neutralises terminal control
//! sequences in a command's output before it is relayed to a terminal.
//!
//! Both are pure and unit-tested. The threat: a command (or a prompt-injected agent choosing it)
//! can write bytes that the user's terminal interprets — `\r` plus "erase line" hides the real
//! command behind a harmless one in the banner; OSC 52 writes the clipboard; OSC 0/2 set the
//! title; device-status and title-report requests make the terminal *type* a reply into its
//! input queue, which the user's shell reads after the run; DECSET modes switch on mouse
//! reporting or bracketed paste; `ESC c` resets the terminal; SO/SI switch character sets.
//!
//! A command that has a terminal of its own (a pseudo-terminal the runner relays) draws a
//! screen: its output goes through [`screen::ScreenFilter`] instead, which lets the drawing
//! sequences of full-screen programs through and drops the rest.

use std::ffi::OsStr;
use std::fmt::Write as _;

pub mod screen;
pub use screen::ScreenFilter;

/// Unicode format characters that reorder or hide text (bidi overrides and isolates, the
/// zero-width and invisible operators): a command shown with them can read differently from
/// what runs ("Trojan Source", CVE-2021-42574).
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{1b}' => out.push_str("\\e"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with every control character (C0, DEL, C1) and every invisible or reordering format
/// character written as an escape (`\n`, `\e`, `\x07`, `\u{9b}`, `\u{202e}`), and backslashes
/// doubled, so that what is shown is exactly what is there, on one line.
#[must_use]
pub fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if c.is_control() || is_invisible_format(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// [`escape_controls`] for an OS string: bytes that are not UTF-8 are shown as `\xNN`.
#[must_use]
pub fn escape_os(s: &OsStr) -> String {
    let mut out = String::new();
    for chunk in s.as_encoded_bytes().utf8_chunks() {
        out.push_str(&escape_controls(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// A command line for display: each argument escaped, arguments that are empty or hold spaces,
/// quotes or backslashes single-quoted, joined by spaces.
#[must_use]
pub fn display_argv<S: AsRef<OsStr>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| {
            let e = escape_os(a.as_ref());
            if e.is_empty() || e.contains([' ', '\'', '"', '\\']) {
                format!("'{}'", e.replace('\'', "'\\''"))
            } else {
                e
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The longest escape sequence kept whole; a longer one is neutralised.
const MAX_SEQUENCE: usize = 64;

/// CSI final bytes that are let through: SGR (colours), erase in line/display, cursor moves.
/// None of them makes the terminal answer, change modes or touch the clipboard.
const SAFE_CSI_FINALS: &[u8] = b"mKJABCDEFGHf";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Plain text.
    Text,
    /// After ESC.
    Esc,
    /// Inside `ESC [` … (parameters so far in `pending`).
    Csi,
}

/// Streaming filter for a command's output on its way to a terminal.
///
/// Kept: printable text (UTF-8), `\n`, `\r`, `\t`, backspace, and CSI sequences whose
/// parameters are digits, `;` and `:` and whose final byte is one of `m K J A–H f` (colours,
/// erasing, cursor movement). Everything else that a terminal would act on is made visible
/// instead of being interpreted: ESC becomes `^[` (so `ESC ]52;c;…` prints as text), other C0
/// controls and DEL become `^X`, C1 controls (U+0080–U+009F) and bytes that are not UTF-8
/// become U+FFFD. Sequences split across [`TerminalFilter::push`] calls are handled.
#[derive(Debug)]
pub struct TerminalFilter {
    state: State,
    /// Bytes of an unfinished escape sequence or UTF-8 character.
    pending: Vec<u8>,
    /// The last SGR sequence let through left attributes on (reset at the end).
    sgr: bool,
}

impl Default for TerminalFilter {
    fn default() -> Self {
        TerminalFilter::new()
    }
}

impl TerminalFilter {
    /// A filter at the start of a stream.
    #[must_use]
    pub fn new() -> Self {
        TerminalFilter { state: State::Text, pending: Vec::new(), sgr: false }
    }

    fn neutralise_pending(&mut self, out: &mut Vec<u8>) {
        // The ESC that started it becomes visible; the rest is re-read as text.
        let rest: Vec<u8> = std::mem::take(&mut self.pending);
        self.state = State::Text;
        out.extend_from_slice(b"^[");
        let body = if rest.first() == Some(&0x1b) { &rest[1..] } else { &rest[..] };
        for &b in body {
            self.text_byte(b, out);
        }
    }

    fn control(b: u8, out: &mut Vec<u8>) {
        match b {
            b'\n' | b'\r' | b'\t' | 0x08 => out.push(b),
            0x7f => out.extend_from_slice(b"^?"),
            _ => {
                out.push(b'^');
                out.push(b + 0x40);
            }
        }
    }

    /// One byte in the `Text` state (UTF-8 assembled in `pending`).
    fn text_byte(&mut self, b: u8, out: &mut Vec<u8>) {
        let Some(b) = utf8_byte(&mut self.pending, b, out) else { return };
        match b {
            0x1b => {
                self.state = State::Esc;
                self.pending.push(b);
            }
            0x00..=0x1f | 0x7f => Self::control(b, out),
            _ => out.push(b),
        }
    }

    /// Filters `input`, appending what may reach the terminal to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            match self.state {
                State::Text => self.text_byte(b, out),
                State::Esc => {
                    if b == b'[' {
                        self.pending.push(b);
                        self.state = State::Csi;
                    } else {
                        self.neutralise_pending(out);
                        self.text_byte(b, out);
                    }
                }
                State::Csi => {
                    if b.is_ascii_digit() || b == b';' || b == b':' {
                        self.pending.push(b);
                        if self.pending.len() > MAX_SEQUENCE {
                            self.neutralise_pending(out);
                        }
                    } else if SAFE_CSI_FINALS.contains(&b) {
                        self.pending.push(b);
                        if b == b'm' {
                            self.sgr = !sgr_resets(&self.pending[2..]);
                        }
                        out.extend_from_slice(&self.pending);
                        self.pending.clear();
                        self.state = State::Text;
                    } else {
                        self.neutralise_pending(out);
                        self.text_byte(b, out);
                    }
                }
            }
        }
    }

    /// Ends the stream: an unfinished sequence or character is neutralised, and colours or
    /// attributes left on are reset (so that what is printed after the command, the sandbox's
    /// own report, is not concealed, or black on black).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        match self.state {
            State::Esc | State::Csi => self.neutralise_pending(out),
            State::Text => {
                if !self.pending.is_empty() {
                    self.pending.clear();
                    out.extend_from_slice(REPLACEMENT);
                }
            }
        }
        if !self.pending.is_empty() {
            self.pending.clear();
            out.extend_from_slice(REPLACEMENT);
        }
        if std::mem::take(&mut self.sgr) {
            out.extend_from_slice(SGR_RESET);
        }
    }
}

/// What resets every graphic rendition attribute.
const SGR_RESET: &[u8] = b"\x1b[0m";

/// Whether an SGR sequence (its parameters and final `m`) resets every attribute and sets none
/// (`CSI m`, `CSI 0 m`, `CSI 0;0 m`).
fn sgr_resets(body: &[u8]) -> bool {
    body[..body.len() - 1].split(|b| *b == b';').all(|p| p.iter().all(|b| *b == b'0'))
}

/// What a character that cannot be shown as it is becomes.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// One byte of a command's text, `b`, with the multi-byte UTF-8 character being assembled in
/// `pending` (empty: none): a continuation byte is taken, and the character, once whole, goes to
/// `out` — or U+FFFD, for one that is not valid UTF-8 or is a C1 control (U+0080–U+009F: 8-bit
/// CSI, OSC, DCS…); any other byte first ends an unfinished character as U+FFFD; a lead byte
/// starts one, a byte that can start none is U+FFFD; an ASCII byte is returned for the caller.
fn utf8_byte(pending: &mut Vec<u8>, b: u8, out: &mut Vec<u8>) -> Option<u8> {
    if !pending.is_empty() {
        if b & 0xc0 == 0x80 {
            pending.push(b);
            if pending.len() == utf8_len(pending[0]) {
                let bytes = std::mem::take(pending);
                match std::str::from_utf8(&bytes).ok().and_then(|s| s.chars().next()).filter(|c| !c.is_control()) {
                    Some(_) => out.extend_from_slice(&bytes),
                    None => out.extend_from_slice(REPLACEMENT),
                }
            }
            return None;
        }
        pending.clear();
        out.extend_from_slice(REPLACEMENT);
    }
    if b.is_ascii() {
        return Some(b);
    }
    if utf8_len(b) > 1 {
        pending.push(b);
    } else {
        out.extend_from_slice(REPLACEMENT);
    }
    None
}

/// Length of a UTF-8 sequence from its first byte (1 for an invalid lead byte).
fn utf8_len(b: u8) -> usize {
    match b {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter_all(chunks: &[&[u8]]) -> String {
        let mut f = TerminalFilter::new();
        let mut out = Vec::new();
        for c in chunks {
            f.push(c, &mut out);
        }
        f.finish(&mut out);
        String::from_utf8(out).expect("the filter emits UTF-8")
    }

    fn filter_one(s: &[u8]) -> String {
        filter_all(&[s])
    }

    #[test]
    fn escape_controls_shows_what_is_there() {
        assert_eq!(escape_controls("echo hi"), "echo hi");
        assert_eq!(escape_controls("rm -rf ~\r\x1b[2Kecho safe"), "rm -rf ~\\r\\e[2Kecho safe");
        assert_eq!(escape_controls("a\tb\nc\x07\x7f"), "a\\tb\\nc\\x07\\x7f");
        assert_eq!(escape_controls("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(escape_controls("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape_controls("back\\slash"), "back\\\\slash");
        assert_eq!(escape_controls("ünïcödé ✓"), "ünïcödé ✓");
    }

    #[cfg(unix)]
    #[test]
    fn escape_os_and_argv() {
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(escape_os(OsStr::from_bytes(b"/tmp/\xff\x1bx")), "/tmp/\\xff\\ex");
        let argv: Vec<&OsStr> = vec![OsStr::new("bash"), OsStr::new("-c"), OsStr::new("echo 'hi'\r\x1b[2K")];
        assert_eq!(display_argv(&argv), "bash -c 'echo '\\''hi'\\''\\r\\e[2K'");
        assert_eq!(display_argv(&[""]), "''");
    }

    #[test]
    fn filter_keeps_text_colours_and_cursor_moves() {
        assert_eq!(filter_one(b"plain text\n"), "plain text\n");
        assert_eq!(filter_one("ünïcödé ✓ 漢字 🦀\r\n".as_bytes()), "ünïcödé ✓ 漢字 🦀\r\n");
        assert_eq!(filter_one(b"\x1b[1;31mred\x1b[0m"), "\x1b[1;31mred\x1b[0m");
        assert_eq!(filter_one(b"\x1b[38:2:255:0:0mx\x1b[m"), "\x1b[38:2:255:0:0mx\x1b[m");
        assert_eq!(filter_one(b"50%\r\x1b[K60%\x1b[1A\x1b[2J\x1b[H"), "50%\r\x1b[K60%\x1b[1A\x1b[2J\x1b[H");
        assert_eq!(filter_one(b"a\tb\x08c"), "a\tb\x08c");
    }

    #[test]
    fn filter_neutralises_what_a_terminal_would_act_on() {
        // OSC 52 clipboard write, OSC 0 title, with BEL and ST terminators.
        assert_eq!(filter_one(b"\x1b]52;c;ZXZpbA==\x07"), "^[]52;c;ZXZpbA==^G");
        assert_eq!(filter_one(b"\x1b]0;owned\x1b\\"), "^[]0;owned^[\\");
        // Requests that make the terminal type a reply: DSR, DA, title report; mode switches.
        assert_eq!(filter_one(b"\x1b[6n"), "^[[6n");
        assert_eq!(filter_one(b"\x1b[c"), "^[[c");
        assert_eq!(filter_one(b"\x1b[21t"), "^[[21t");
        assert_eq!(filter_one(b"\x1b[?1000h"), "^[[?1000h");
        assert_eq!(filter_one(b"\x1b[?2004h"), "^[[?2004h");
        // Reset, DCS, charset shifts, ENQ (answerback), DEL.
        assert_eq!(filter_one(b"\x1bc"), "^[c");
        assert_eq!(filter_one(b"\x1bP+q544e\x1b\\"), "^[P+q544e^[\\");
        assert_eq!(filter_one(b"\x0e\x0f\x05\x7f"), "^N^O^E^?");
        // 8-bit C1 CSI as UTF-8 (U+009B) and raw, invalid UTF-8.
        assert_eq!(filter_one("\u{9b}6n".as_bytes()), "\u{FFFD}6n");
        assert_eq!(filter_one(b"\x9b6n\xff"), "\u{FFFD}6n\u{FFFD}");
        // An overlong CSI is neutralised instead of buffered forever.
        let long = format!("\x1b[{}m", "1;".repeat(100));
        assert!(filter_one(long.as_bytes()).starts_with("^[["));
    }

    #[test]
    fn filter_handles_sequences_split_across_chunks() {
        assert_eq!(filter_all(&[b"\x1b", b"[3", b"1mred\x1b[", b"0m"]), "\x1b[31mred\x1b[0m");
        assert_eq!(filter_all(&[b"\x1b", b"]52;c;x\x07"]), "^[]52;c;x^G");
        assert_eq!(filter_all(&["é".as_bytes()[..1].as_ref(), "é".as_bytes()[1..].as_ref()]), "é");
        assert_eq!(filter_all(&["🦀".as_bytes()[..2].as_ref(), "🦀".as_bytes()[2..].as_ref()]), "🦀");
        // A stream that ends inside a sequence or character.
        assert_eq!(filter_all(&[b"x\x1b[12"]), "x^[[12");
        assert_eq!(filter_all(&[&"é".as_bytes()[..1]]), "\u{FFFD}");
    }

    #[test]
    fn filter_output_is_always_utf8_and_never_contains_a_bare_escape_sequence_start() {
        // Every byte value after every prefix state.
        for prefix in [&b""[..], b"\x1b", b"\x1b[", b"\x1b[1;", b"\xc3", b"\xe2\x82"] {
            for b in 0u8..=255 {
                let mut input = prefix.to_vec();
                input.push(b);
                input.extend_from_slice(b"tail");
                let out = filter_one(&input);
                // ESC survives only at the start of an allowed CSI sequence.
                for (i, _) in out.match_indices('\x1b') {
                    let rest = &out.as_bytes()[i + 1..];
                    assert_eq!(rest.first(), Some(&b'['), "{input:x?} → {out:?}");
                    let end = rest.iter().skip(1).position(|c| !(c.is_ascii_digit() || *c == b';' || *c == b':')).map(|p| p + 1);
                    let fin = end.and_then(|e| rest.get(e)).copied();
                    assert!(fin.is_some_and(|f| SAFE_CSI_FINALS.contains(&f)), "{input:x?} → {out:?}");
                }
                assert!(!out.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\x08' | '\x1b')), "{input:x?} → {out:?}");
            }
        }
    }
}
