//! The filter for a command that has a terminal of its own: `--stdin inherit` on a terminal
//! gives it a pseudo-terminal that the runner relays ([`crate::run::StdinMode::Terminal`]), and
//! what it draws goes through a [`ScreenFilter`] on its way to the user's terminal.
//!
//! Full-screen programs (vi, less, top, a REPL) need much more of the terminal than
//! [`super::TerminalFilter`] lets through: the alternate screen, scroll regions, insert and
//! delete, cursor visibility and shape, keypad and cursor-key modes, character sets. Whatever
//! the user's terminal answers during the run is typed into the program's own terminal (the
//! relay), not into the user's shell. What is still dangerous:
//!
//! - a sequence that acts on the host: OSC 52 writes (and reads back) the clipboard, other OSC,
//!   DCS, APC, PM and SOS strings set titles, hyperlinks, notifications, write files (iTerm2's
//!   `File=`) or pass through to a multiplexer;
//! - a request whose reply arrives after the run, when the user's shell reads it as typed input
//!   (device status, device attributes, window and title reports, mode reports, `ENQ`'s
//!   answerback);
//! - a mode that outlives the run and changes what the keyboard or mouse type into the user's
//!   shell (VT52 mode, keyboard lock, mouse and focus reports, bracketed paste).
//!
//! So the filter is default-deny: it lets through text (UTF-8), the C0 controls a screen uses
//! (`BEL BS HT LF VT FF CR SO SI`), and an explicit list of escape and control sequences that
//! only draw or set drawing modes ([`csi_allowed`], [`esc_allowed`]). Everything else is
//! dropped whole, strings to their terminator, so the screen is not littered with their text.
//! The modes it let through that would outlive the run are put back at [`ScreenFilter::finish`]:
//! the input modes (mouse, focus, bracketed paste, application keypad and cursor keys, xterm's
//! modifyOtherKeys), and the display state that could hide what the sandbox prints after the
//! command (colours and attributes such as conceal, character sets, scroll margins, origin mode,
//! a hidden cursor, the alternate screen).
//! `ESC` only ever leaves it at the start of a complete allowed sequence, so the terminal is
//! back in its ground state after each one.

/// The longest control sequence kept whole; a longer one is dropped.
const MAX_SEQUENCE: usize = 128;

/// DEC private modes put back to their default (on: `true`) at the end of the run if the
/// command left them changed: those that make the terminal send input of its own (cursor keys'
/// and keypad encoding, mouse, focus, bracketed paste) and those that change how later text is
/// shown (reverse video, origin mode, autowrap, cursor visibility); the alternate screens last.
const RESTORED_MODES: &[(u32, bool)] = &[
    (1, false), (5, false), (6, false), (7, true), (9, false), (25, true), (66, false), (1000, false), (1001, false),
    (1002, false), (1003, false), (1004, false), (1005, false), (1006, false), (1015, false), (1016, false), (2004, false),
    (47, false), (1047, false), (1049, false),
];

/// CSI final bytes without a private marker or intermediates that only draw: insert and delete,
/// cursor moves and positions, erase, scroll, tabs, repeat, SGR, scroll region, save and
/// restore the cursor (`h`/`l`, ANSI modes, are limited to insert and newline modes).
const PLAIN_CSI: &[u8] = b"@ABCDEFGHIJKLMPSTXZ`abdefghlmrsu";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Text,
    /// After ESC (`seq` holds it).
    Esc,
    /// `ESC` and intermediates (`seq`).
    EscInter,
    /// Inside `ESC [` (`seq` holds what came so far).
    Csi,
    /// An overlong CSI, dropped to its final byte.
    CsiSkip,
    /// Inside an OSC, DCS, APC, PM or SOS string: dropped to its terminator.
    Str,
    /// `ESC` inside such a string (`ESC \` ends it).
    StrEsc,
}

/// Streaming default-deny filter for a program's output on its way to the user's terminal when
/// the program has a terminal of its own (see the module's documentation for what passes).
#[derive(Debug, Default)]
pub struct ScreenFilter {
    state: State,
    /// The control sequence so far.
    seq: Vec<u8>,
    /// The bytes of an unfinished UTF-8 character.
    utf8: Vec<u8>,
    /// [`RESTORED_MODES`] the command changed.
    modes: Vec<u32>,
    /// Application keypad (`ESC =`) on.
    keypad: bool,
    /// xterm's modifyOtherKeys (`CSI > 4 ; n m`, n > 0) on.
    modify_keys: bool,
    /// The last SGR left attributes on.
    sgr: bool,
    /// G0 and G1 hold other character sets than ASCII (G2 and G3 are reached only by a single
    /// shift, one character).
    gsets: [bool; 2],
    /// Shifted to G1 (`SO`).
    shifted: bool,
    /// Scroll margins were set.
    margins: bool,
}

impl ScreenFilter {
    /// A filter at the start of a stream.
    #[must_use]
    pub fn new() -> Self {
        ScreenFilter::default()
    }

    /// Filters `input`, appending what may reach the terminal to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            self.byte(b, out);
        }
    }

    /// Ends the stream: an unfinished sequence is dropped, an unfinished character shown as
    /// U+FFFD, and the input modes the command left on are switched off.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.reset();
        if !self.utf8.is_empty() {
            self.utf8.clear();
            out.extend_from_slice(super::REPLACEMENT);
        }
        if std::mem::take(&mut self.margins) {
            out.extend_from_slice(b"\x1b7\x1b[r\x1b8");
        }
        let mut modes = std::mem::take(&mut self.modes);
        modes.sort_by_key(|m| RESTORED_MODES.iter().position(|(r, _)| r == m));
        for m in modes {
            let on = RESTORED_MODES.iter().any(|(r, on)| *r == m && *on);
            out.extend_from_slice(format!("\x1b[?{m}{}", if on { 'h' } else { 'l' }).as_bytes());
        }
        let mut charset = std::mem::take(&mut self.gsets) != [false; 2] || std::mem::take(&mut self.shifted);
        for (flag, restore) in [(&mut self.sgr, &b"\x1b[0m"[..]), (&mut charset, b"\x1b(B\x1b)B\x0f"), (&mut self.keypad, b"\x1b>"), (&mut self.modify_keys, b"\x1b[>4m")] {
            if std::mem::take(flag) {
                out.extend_from_slice(restore);
            }
        }
    }

    fn reset(&mut self) {
        self.seq.clear();
        self.state = State::Text;
    }

    fn byte(&mut self, b: u8, out: &mut Vec<u8>) {
        match self.state {
            State::Text => self.text(b, out),
            State::Esc => match b {
                b'[' => {
                    self.seq.push(b);
                    self.state = State::Csi;
                }
                b']' | b'P' | b'_' | b'^' | b'X' => {
                    self.reset();
                    self.state = State::Str;
                }
                0x20..=0x2f => {
                    self.seq.push(b);
                    self.state = State::EscInter;
                }
                0x30..=0x7e => {
                    self.seq.push(b);
                    self.emit_esc(out);
                }
                _ => {
                    self.reset();
                    self.text(b, out);
                }
            },
            State::EscInter => match b {
                0x20..=0x2f if self.seq.len() < 4 => self.seq.push(b),
                0x30..=0x7e => {
                    self.seq.push(b);
                    self.emit_esc(out);
                }
                _ => {
                    self.reset();
                    self.text(b, out);
                }
            },
            State::Csi => match b {
                0x20..=0x3f => {
                    self.seq.push(b);
                    if self.seq.len() > MAX_SEQUENCE {
                        self.seq.clear();
                        self.state = State::CsiSkip;
                    }
                }
                0x40..=0x7e => {
                    self.seq.push(b);
                    if csi_allowed(&self.seq[2..]) {
                        self.track_csi();
                        out.extend_from_slice(&self.seq);
                    }
                    self.reset();
                }
                _ => {
                    self.reset();
                    self.text(b, out);
                }
            },
            State::CsiSkip => match b {
                0x20..=0x3f => {}
                0x40..=0x7e => self.reset(),
                _ => {
                    self.reset();
                    self.text(b, out);
                }
            },
            State::Str => match b {
                0x07 | 0x18 | 0x1a => self.reset(),
                0x1b => self.state = State::StrEsc,
                _ => {}
            },
            State::StrEsc => {
                self.reset();
                if b != b'\\' {
                    // Another sequence starts (terminals end the string there too).
                    self.seq.push(0x1b);
                    self.state = State::Esc;
                    self.byte(b, out);
                }
            }
        }
    }

    /// A complete `ESC …` sequence in `seq`: emitted if allowed, its mode tracked.
    fn emit_esc(&mut self, out: &mut Vec<u8>) {
        if esc_allowed(&self.seq[1..]) {
            match self.seq[1] {
                b'=' => self.keypad = true,
                b'>' => self.keypad = false,
                // A full reset puts everything back.
                b'c' => {
                    let fresh = ScreenFilter::new();
                    *self = ScreenFilter { state: self.state, seq: std::mem::take(&mut self.seq), utf8: std::mem::take(&mut self.utf8), ..fresh };
                }
                b'(' => self.gsets[0] = self.seq[2] != b'B',
                b')' | b'-' => self.gsets[1] = self.seq[2] != b'B',
                _ => {}
            }
            out.extend_from_slice(&self.seq);
        }
        self.reset();
    }

    /// Keeps track of what an allowed CSI sequence (in `seq`) changes that outlives the run.
    fn track_csi(&mut self) {
        let body = &self.seq[2..];
        let (fin, rest) = (body[body.len() - 1], &body[..body.len() - 1]);
        match (rest.first(), fin) {
            (Some(b'?'), b'h' | b'l' | b'r') => {
                for n in numbers(&rest[1..]).flatten() {
                    let Some(&(_, default_on)) = RESTORED_MODES.iter().find(|(m, _)| *m == n) else { continue };
                    self.modes.retain(|m| *m != n);
                    // (XTRESTORE, `r`, may bring back any saved state.)
                    if fin == b'r' || (fin == b'h') != default_on {
                        self.modes.push(n);
                    }
                }
            }
            (Some(b'>'), b'm') => {
                let mut n = numbers(&rest[1..]);
                if n.next() == Some(Some(4)) {
                    self.modify_keys = n.next().is_some_and(|v| v != Some(0));
                }
            }
            (_, b'm') => self.sgr = !numbers(rest).all(|n| n == Some(0)),
            (_, b'r') => self.margins = !rest.is_empty(),
            _ => {}
        }
    }

    /// One byte outside any sequence (UTF-8 assembled in `utf8`).
    fn text(&mut self, b: u8, out: &mut Vec<u8>) {
        let Some(b) = super::utf8_byte(&mut self.utf8, b, out) else { return };
        match b {
            0x1b => {
                self.seq.push(b);
                self.state = State::Esc;
            }
            // BEL BS HT LF VT FF CR SO SI.
            0x07..=0x0f | 0x20..=0x7e => {
                match b {
                    0x0e => self.shifted = true,
                    0x0f => self.shifted = false,
                    _ => {}
                }
                out.push(b);
            }
            // The other C0 controls (ENQ makes the terminal type its answerback), and DEL.
            _ => {}
        }
    }
}

/// The numeric parameters of a control sequence (an empty one is 0); `None` for one that has
/// subparameters (`2:5`, which a terminal reads as 2) or does not fit in 16 bits (which one
/// terminal saturates and another wraps).
fn numbers(params: &[u8]) -> impl Iterator<Item = Option<u32>> + '_ {
    params.split(|b| *b == b';').map(|p| match p {
        [] => Some(0),
        _ => std::str::from_utf8(p).ok().and_then(|s| s.parse::<u16>().ok()).map(u32::from),
    })
}

/// Whether every parameter reads, as a terminal reads it, as a number that `ok` accepts.
fn all_numbers(params: &[u8], ok: impl Fn(u32) -> bool) -> bool {
    numbers(params).all(|n| n.is_some_and(&ok))
}

/// Whether a CSI sequence (`body`: what follows `ESC [`, its final byte included) only draws or
/// sets a drawing mode: [`PLAIN_CSI`]; the DEC private modes (`CSI ? … h/l`, save and restore)
/// except VT52 mode; selective erase; xterm's modifyOtherKeys; the cursor's shape; a soft reset.
/// Requests that make the terminal answer (`n`, `c`, `t`, `x`, `q`, `$p`, `? u`…), media copy
/// and everything else are not.
#[must_use]
pub fn csi_allowed(body: &[u8]) -> bool {
    let Some((&fin, rest)) = body.split_last() else { return false };
    let (marker, rest) = match rest.first() {
        Some(&m) if b"<=>?".contains(&m) => (Some(m), &rest[1..]),
        _ => (None, rest),
    };
    let split = rest.iter().position(|b| (0x20..=0x2f).contains(b)).unwrap_or(rest.len());
    let (params, inter) = rest.split_at(split);
    if !params.iter().all(|b| b.is_ascii_digit() || *b == b';' || *b == b':') || !inter.iter().all(|b| (0x20..=0x2f).contains(b)) {
        return false;
    }
    match (marker, inter, fin) {
        // ANSI modes: insert (4) and automatic newline (20) only; not keyboard lock (2) or
        // local echo (12).
        (None, [], b'h' | b'l') => all_numbers(params, |n| n == 4 || n == 20),
        (None, [], f) => PLAIN_CSI.contains(&f),
        // DEC private modes, set, reset, save and restore; not VT52 mode (2), which changes
        // how every later sequence is read.
        (Some(b'?'), [], b'h' | b'l' | b'r' | b's') => all_numbers(params, |n| n != 2),
        (Some(b'?'), [], b'J' | b'K') => true,
        (Some(b'>'), [], b'm') => true,
        (None, [b' '], b'q') | (None, [b'!'], b'p') => true,
        _ => false,
    }
}

/// Whether an `ESC` sequence (`body`: what follows `ESC`) only draws: save and restore the
/// cursor, keypad modes, index, reverse index, next line, tab set, single shifts, full reset,
/// character set designations, DEC line sizes and screen alignment, UTF-8 selection. Not
/// `ESC Z` (identify: the terminal answers), nor the 7/8-bit control switches.
#[must_use]
pub fn esc_allowed(body: &[u8]) -> bool {
    match body {
        [f] => b"78=>DEHMNOc".contains(f),
        [b'(' | b')' | b'*' | b'+' | b'-' | b'.' | b'/', f] => (0x30..=0x7e).contains(f),
        [b'#', f] => b"34568".contains(f),
        [b'%', f] => *f == b'@' || *f == b'G',
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(chunks: &[&[u8]]) -> Vec<u8> {
        let mut f = ScreenFilter::new();
        let mut out = Vec::new();
        for c in chunks {
            f.push(c, &mut out);
        }
        f.finish(&mut out);
        out
    }

    fn one(s: &[u8]) -> String {
        String::from_utf8(filter(&[s])).expect("UTF-8")
    }

    /// Without the end of the stream (what it puts back).
    fn pushed(s: &[u8]) -> String {
        let mut out = Vec::new();
        ScreenFilter::new().push(s, &mut out);
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn what_full_screen_programs_draw_passes() {
        for s in [
            &b"plain \xc3\xa9 text\r\n"[..],
            b"\x1b[?1049h\x1b[22;0;0t",
            b"\x1b[?1049h\x1b[?25l\x1b[1;24r\x1b[H\x1b[2J\x1b[3L\x1b[2M\x1b[4P\x1b[5@\x1b[7X\x1b[?25h\x1b[?1049l",
            b"\x1b7\x1b8\x1bM\x1bD\x1bE\x1b(0lqk\x1b(B\x0e\x0f\x07",
            b"\x1b[38;2;1;2;3;48:5:17m\x1b[0m\x1b[2 q\x1b[!p\x1b[?12l\x1b[4h\x1b[4l\x1b[3g\x1b[10;20f\x1b[5d\x1b[3`",
        ] {
            let expected: Vec<u8> = String::from_utf8_lossy(s).replace("\x1b[22;0;0t", "").into_bytes();
            assert_eq!(pushed(s).into_bytes(), expected, "{s:x?}");
        }
    }

    #[test]
    fn what_acts_on_the_host_or_answers_is_dropped_whole() {
        for s in [
            &b"\x1b]52;c;ZXZpbA==\x07"[..],
            b"\x1b]52;c;?\x1b\\",
            b"\x1b]0;title\x07\x1b]8;;http://x\x1b\\",
            b"\x1b]1337;File=name=eA==:aGk=\x07",
            b"\x1bP+q544e\x1b\\\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\",
            b"\x1b_Gf=100;AAAA\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\",
            b"\x1b[6n\x1b[?6n\x1b[5n\x1b[c\x1b[>c\x1b[=c\x1b[21t\x1b[14t\x1b[18t\x1b[8;1;1t\x1b[x\x1b[>q\x1b[?u\x1b[?1$p\x1b[2$p\x1b[0i\x1b[5i",
            b"\x1bZ\x1b F\x1b G\x05\x00\x1c",
            b"\x1b[?2l\x1b[?2:5h\x1b[?65538h\x1b[2h\x1b[12l\x1b[?1;2h\x1b[>1u\x1b[=1;1u\x1b[<u\x1b[?S",
            "\u{9b}6n\u{9d}0;x\u{7}".as_bytes(),
        ] {
            let out = one(s);
            assert!(!out.contains('\x1b') && !out.contains('\x05'), "{s:x?} → {out:?}");
        }
        // The text around a dropped string survives, and nothing of the string.
        assert_eq!(one(b"a\x1b]52;c;ZXZpbA==\x07b\x1b]0;t\x1b\\c"), "abc");
        // C1 controls as UTF-8 or raw bytes are not passed.
        assert_eq!(one("x\u{9b}6n".as_bytes()), "x\u{FFFD}6n");
        assert_eq!(one(b"x\x9b6n\xff"), "x\u{FFFD}6n\u{FFFD}");
        // An overlong sequence is dropped to its end.
        assert_eq!(one(format!("a\x1b[{}mb", "1;".repeat(100)).as_bytes()), "ab");
    }

    #[test]
    fn what_would_outlive_the_run_is_put_back_at_the_end() {
        assert_eq!(one(b"\x1b[?1000;1006h\x1b[?2004h\x1b="), "\x1b[?1000;1006h\x1b[?2004h\x1b=\x1b[?1000l\x1b[?1006l\x1b[?2004l\x1b>");
        assert_eq!(one(b"\x1b[?1000h\x1b[?1000l\x1b=\x1b>"), "\x1b[?1000h\x1b[?1000l\x1b=\x1b>");
        assert_eq!(one(b"\x1b[>4;2m"), "\x1b[>4;2m\x1b[>4m");
        assert_eq!(one(b"\x1b[>4;2m\x1b[>4;0m"), "\x1b[>4;2m\x1b[>4;0m");
        // XTRESTORE may switch a saved mode back on.
        assert_eq!(one(b"\x1b[?1004r"), "\x1b[?1004r\x1b[?1004l");
        assert_eq!(one(b"\x1b[?1004h\x1bc"), "\x1b[?1004h\x1bc");
        // What would hide the sandbox's report: concealed or coloured text, a hidden cursor, a
        // line-drawing character set, scroll margins, the alternate screen (left last).
        assert_eq!(one(b"\x1b[8m"), "\x1b[8m\x1b[0m");
        assert_eq!(one(b"\x1b[30;40mx\x1b[0m"), "\x1b[30;40mx\x1b[0m");
        assert_eq!(one(b"\x1b[?1049h\x1b[?25l\x1b[?7l"), "\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[?7h\x1b[?25h\x1b[?1049l");
        assert_eq!(one(b"\x1b(0q\x0e"), "\x1b(0q\x0e\x1b(B\x1b)B\x0f");
        assert_eq!(one(b"\x1b(0q\x1b)B"), "\x1b(0q\x1b)B\x1b(B\x1b)B\x0f");
        assert_eq!(one(b"\x1b(0q\x1b(B\x0e\x0f"), "\x1b(0q\x1b(B\x0e\x0f");
        assert_eq!(one(b"\x1b[2;5r"), "\x1b[2;5r\x1b7\x1b[r\x1b8");
        assert_eq!(one(b"\x1b[2;5r\x1b[r"), "\x1b[2;5r\x1b[r");
    }

    #[test]
    fn sequences_split_across_chunks() {
        assert_eq!(filter(&[b"\x1b", b"[?10", b"49h", b"\x1b]5", b"2;c;x", b"\x1b", b"\\ok"]), b"\x1b[?1049hok\x1b[?1049l");
        assert_eq!(filter(&[&"é".as_bytes()[..1], &"é".as_bytes()[1..]]), "é".as_bytes());
        assert_eq!(filter(&[b"x\x1b[12"]), b"x");
        assert_eq!(filter(&[&"é".as_bytes()[..1]]), "\u{FFFD}".as_bytes());
    }
}
