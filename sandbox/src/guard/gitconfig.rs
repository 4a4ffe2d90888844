//! A parser for git's configuration file format (`git-config(1)` "CONFIGURATION FILE"), enough
//! to scrub credentials out of a user's config and to compare a repository's config before and
//! after a run, key by key.
//!
//! Syntax handled as git does (config.c): `#`/`;` comments; section headers `[section]`,
//! `[section "subsection"]` (subsection case-sensitive, `\"` and `\\` escapes) and the old
//! `[section.subsection]` (subsection lower-cased); a key on the header's line
//! (`[core] bare = true`); keys are letters, digits and `-`, case-insensitive; a key without `=`
//! is boolean true; values are trimmed, `"` quotes protect whitespace and comment characters,
//! `\n \t \b \\ \"` are escapes, and a `\` at the end of a line continues the value.
//!
//! Each entry keeps the line range it came from, so that a scrubber can drop exactly those lines
//! and leave everything else (comments, layout) as it was.

use std::fmt;

/// One `key = value` of a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Section name, lower-cased.
    pub section: String,
    /// Subsection, as written (`None` for `[section]`).
    pub subsection: Option<String>,
    /// Key name, lower-cased.
    pub key: String,
    /// The value, unquoted and unescaped; `None` for a bare key (boolean true).
    pub value: Option<String>,
    /// First line (0-based) of the entry.
    pub first_line: usize,
    /// Line after its last (continuation lines included).
    pub end_line: usize,
}

impl Entry {
    /// `section.subsection.key` (or `section.key`), as `git config --list` prints it.
    #[must_use]
    pub fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{}.{}", self.section, sub, self.key),
            // A key before any section (git reads it, named without a section).
            None if self.section.is_empty() => self.key.clone(),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// A section header with the lines it spans (up to the next header or the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionSpan {
    /// Section name, lower-cased.
    pub section: String,
    /// Subsection, as written.
    pub subsection: Option<String>,
    /// Line of the header.
    pub first_line: usize,
    /// Line of the next header, or the number of lines.
    pub end_line: usize,
}

/// A parsed config file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigFile {
    /// Entries in file order.
    pub entries: Vec<Entry>,
    /// Sections in file order.
    pub sections: Vec<SectionSpan>,
}

/// A syntax error, with its 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The bytes of a config file as git's `get_next_char` hands them out: `\r\n` is `\n`, and the
/// end of the input is one more `\n` (with `eof` set).
struct Src<'a> {
    b: &'a [u8],
    pos: usize,
    /// Lines (`\n`) consumed so far.
    line: usize,
    eof: bool,
}

impl Src<'_> {
    fn next(&mut self) -> u8 {
        let Some(&c) = self.b.get(self.pos) else {
            self.eof = true;
            return b'\n';
        };
        self.pos += 1;
        let c = if c == b'\r' && self.b.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            b'\n'
        } else {
            c
        };
        if c == b'\n' {
            self.line += 1;
        }
        c
    }

    fn err(&self, message: &str) -> ParseError {
        ParseError { line: self.line + 1, message: message.into() }
    }

    /// The line after the one just finished (the end of the input ends a line too).
    fn end_line(&self) -> usize {
        if self.eof { self.line + 1 } else { self.line }
    }
}

/// git's `isspace` (sane_ctype): space, tab, line feed and carriage return; not `\v`, not `\f`.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

fn text_of(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Parses a config file's text.
///
/// # Errors
/// A [`ParseError`] where git also refuses the file (bad header, key or escape).
pub fn parse(text: &str) -> Result<ConfigFile, ParseError> {
    parse_bytes(text.as_bytes())
}

/// Parses a config file's bytes the way git's `config.c` (`git_parse_source`) does, step for
/// step: a UTF-8 byte order mark at the start is skipped (part of one is an error); `\r\n` is a
/// line end; blanks are git's four; a key starts with a letter and may stand before any section
/// (then its name has no section). Values that are not UTF-8 are read lossily (the review
/// refuses such files before it compares them: `review::review_config`).
///
/// # Errors
/// A [`ParseError`] exactly where git refuses the file.
pub fn parse_bytes(bytes: &[u8]) -> Result<ConfigFile, ParseError> {
    const BOM: &[u8] = b"\xef\xbb\xbf";
    let mut c = Src { b: bytes, pos: 0, line: 0, eof: false };
    if bytes.starts_with(BOM) {
        c.pos = BOM.len();
    } else if !bytes.is_empty() && bytes[0] == BOM[0] {
        // git does not tolerate part of a byte order mark.
        let n = bytes.iter().zip(BOM).take_while(|(a, b)| a == b).count();
        if n > 0 {
            return Err(c.err("part of a byte order mark"));
        }
    }
    let mut out = ConfigFile::default();
    let mut current: Option<(String, Option<String>)> = None;
    let mut comment = false;
    loop {
        let line = c.line;
        let ch = c.next();
        if ch == b'\n' {
            if c.eof {
                break;
            }
            comment = false;
            continue;
        }
        if comment || is_space(ch) {
            continue;
        }
        if ch == b'#' || ch == b';' {
            comment = true;
            continue;
        }
        if ch == b'[' {
            if let Some(last) = out.sections.last_mut() {
                last.end_line = line;
            }
            let (section, subsection) = parse_header(&mut c)?;
            out.sections.push(SectionSpan { section: section.clone(), subsection: subsection.clone(), first_line: line, end_line: usize::MAX });
            current = Some((section, subsection));
            continue;
        }
        if !ch.is_ascii_alphabetic() {
            return Err(c.err("unexpected character"));
        }
        let mut key = String::from(char::from(ch.to_ascii_lowercase()));
        let mut k = c.next();
        while !c.eof && is_key_char(k) {
            key.push(char::from(k.to_ascii_lowercase()));
            k = c.next();
        }
        while k == b' ' || k == b'\t' {
            k = c.next();
        }
        let value = if k == b'\n' {
            None
        } else if k == b'=' {
            Some(parse_value(&mut c)?)
        } else {
            return Err(c.err("bad key"));
        };
        let (section, subsection) = current.clone().unwrap_or_default();
        out.entries.push(Entry { section, subsection, key, value, first_line: line, end_line: c.end_line() });
    }
    let lines = bytes.split_inclusive(|b| *b == b'\n').count();
    if let Some(last) = out.sections.last_mut() {
        last.end_line = lines;
    }
    Ok(out)
}

/// A section header after its `[` (git's `get_base_var` and `get_extended_base_var`).
fn parse_header(c: &mut Src<'_>) -> Result<(String, Option<String>), ParseError> {
    let mut name = Vec::new();
    let mut sub: Option<Vec<u8>> = None;
    loop {
        let ch = c.next();
        if c.eof {
            return Err(c.err("unterminated section header"));
        }
        if ch == b']' {
            break;
        }
        if is_space(ch) {
            // `[section "subsection"]`: blanks, then the quoted subsection, then `]`.
            let mut ch = ch;
            loop {
                if ch == b'\n' {
                    return Err(c.err("unterminated section header"));
                }
                ch = c.next();
                if !is_space(ch) {
                    break;
                }
            }
            if ch != b'"' {
                return Err(c.err("bad section header"));
            }
            let mut s = Vec::new();
            loop {
                let mut ch = c.next();
                if ch == b'\n' {
                    return Err(c.err("unterminated subsection"));
                }
                if ch == b'"' {
                    break;
                }
                if ch == b'\\' {
                    ch = c.next();
                    if ch == b'\n' {
                        return Err(c.err("unterminated subsection"));
                    }
                }
                s.push(ch);
            }
            if c.next() != b']' {
                return Err(c.err("bad section header"));
            }
            sub = Some(s);
            break;
        }
        if !is_key_char(ch) && ch != b'.' {
            return Err(c.err("bad section name"));
        }
        name.push(ch.to_ascii_lowercase());
    }
    if name.is_empty() && sub.is_none() {
        return Err(c.err("empty section name"));
    }
    let name = text_of(name);
    Ok(match sub {
        Some(s) => (name, Some(text_of(s))),
        // The deprecated [section.subsection] form (lower-cased like the rest).
        None => match name.split_once('.') {
            Some((sec, rest)) => (sec.to_string(), Some(rest.to_string())),
            None => (name, None),
        },
    })
}

/// A value after its `=` (git's `parse_value`): blanks outside quotes are dropped at the start
/// and the end and kept between words; `;` and `#` outside quotes start a comment; `\n \t \b
/// \\ \"` are escapes, `\` at the end of a line continues the value, any other escape is an
/// error, and so is a quote left open at the end of the line.
fn parse_value(c: &mut Src<'_>) -> Result<String, ParseError> {
    let mut v: Vec<u8> = Vec::new();
    let (mut quote, mut comment) = (false, false);
    let mut trim_len = 0usize;
    loop {
        let mut ch = c.next();
        if ch == b'\n' {
            if quote {
                return Err(c.err("unterminated quote"));
            }
            if trim_len > 0 {
                v.truncate(trim_len);
            }
            return Ok(text_of(v));
        }
        if comment {
            continue;
        }
        if is_space(ch) && !quote {
            if trim_len == 0 {
                trim_len = v.len();
            }
            if !v.is_empty() {
                v.push(ch);
            }
            continue;
        }
        if !quote && (ch == b';' || ch == b'#') {
            comment = true;
            continue;
        }
        trim_len = 0;
        if ch == b'\\' {
            ch = c.next();
            let e = match ch {
                b'\n' => continue,
                b't' => b'\t',
                b'b' => 8,
                b'n' => b'\n',
                b'\\' | b'"' => ch,
                _ => return Err(c.err("bad escape in value")),
            };
            v.push(e);
            continue;
        }
        if ch == b'"' {
            quote = !quote;
            continue;
        }
        v.push(ch);
    }
}

/// `text` without the given line ranges (`[first, end)`), which may overlap.
#[must_use]
pub fn drop_lines(text: &str, ranges: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if !ranges.iter().any(|&(a, b)| (a..b).contains(&i)) {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(c: &ConfigFile) -> Vec<(String, Option<String>)> {
        c.entries.iter().map(|e| (e.name(), e.value.clone())).collect()
    }

    #[test]
    fn parses_what_git_writes_and_reads() {
        let text = "# comment\n[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfilemode\n[remote \"Origin\"]\n\turl = https://example.test/x.git ; trailing\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch.Main]\n\tremote = origin\n[alias] co = checkout\n";
        let c = parse(text).unwrap();
        assert_eq!(names(&c), vec![
            ("core.repositoryformatversion".into(), Some("0".into())),
            ("core.bare".into(), Some("false".into())),
            ("core.filemode".into(), None),
            ("remote.Origin.url".into(), Some("https://example.test/x.git".into())),
            ("remote.Origin.fetch".into(), Some("+refs/heads/*:refs/remotes/origin/*".into())),
            ("branch.main.remote".into(), Some("origin".into())),
            ("alias.co".into(), Some("checkout".into())),
        ]);
        assert_eq!(c.sections.len(), 4);
        assert_eq!((c.sections[1].first_line, c.sections[1].end_line), (5, 8));
        assert_eq!((c.sections[3].first_line, c.sections[3].end_line), (10, 11));
    }

    #[test]
    fn values_quotes_escapes_and_continuations() {
        let text = "[a]\n\tk1 = \"  spaced # not a comment \"\n\tk2 = one \\\n  two\n\tk3 = tab\\tand\\\"quote\\\\\n\tK4 = x  y   # c\n\tk5 =\n";
        let c = parse(text).unwrap();
        assert_eq!(names(&c), vec![
            ("a.k1".into(), Some("  spaced # not a comment ".into())),
            ("a.k2".into(), Some("one   two".into())),
            ("a.k3".into(), Some("tab\tand\"quote\\".into())),
            ("a.k4".into(), Some("x  y".into())),
            ("a.k5".into(), Some(String::new())),
        ]);
        assert_eq!((c.entries[1].first_line, c.entries[1].end_line), (2, 4));
    }

    #[test]
    fn refuses_what_git_refuses() {
        for bad in ["[core\n", "[a \"unterminated]\n", "[a]\n\t9key\n", "[a]\n\tk = \"open\n", "[a]\n\tk = bad\\q\n"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn drop_lines_keeps_the_rest_verbatim() {
        let text = "a\nb\nc\nd";
        assert_eq!(drop_lines(text, &[(1, 3)]), "a\nd");
        assert_eq!(drop_lines(text, &[(0, 1), (3, 4)]), "b\nc\n");
    }
}
