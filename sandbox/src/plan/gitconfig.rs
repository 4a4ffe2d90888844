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

struct Cursor<'a> {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    _text: &'a str,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn err(&self, message: &str) -> ParseError {
        ParseError { line: self.line + 1, message: message.into() }
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r')) {
            self.bump();
        }
    }

    fn skip_to_eol(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            self.bump();
        }
    }
}

/// Parses a config file's text.
///
/// # Errors
/// A [`ParseError`] where git would also refuse the file (bad header, key or escape).
pub fn parse(text: &str) -> Result<ConfigFile, ParseError> {
    let mut c = Cursor { chars: text.chars().collect(), pos: 0, line: 0, _text: text };
    let mut out = ConfigFile::default();
    let mut current: Option<(String, Option<String>)> = None;
    loop {
        c.skip_blanks();
        let Some(ch) = c.peek() else { break };
        match ch {
            '\n' => {
                c.bump();
            }
            '#' | ';' => c.skip_to_eol(),
            '[' => {
                if let Some(last) = out.sections.last_mut() {
                    last.end_line = c.line;
                }
                let first_line = c.line;
                let (section, subsection) = parse_header(&mut c)?;
                out.sections.push(SectionSpan { section: section.clone(), subsection: subsection.clone(), first_line, end_line: usize::MAX });
                current = Some((section, subsection));
            }
            ch if ch.is_ascii_alphabetic() => {
                let Some((section, subsection)) = current.clone() else {
                    return Err(c.err("key before any section"));
                };
                let first_line = c.line;
                let mut key = String::new();
                while let Some(k) = c.peek() {
                    if k.is_ascii_alphanumeric() || k == '-' {
                        key.push(k.to_ascii_lowercase());
                        c.bump();
                    } else {
                        break;
                    }
                }
                c.skip_blanks();
                let value = match c.peek() {
                    Some('=') => {
                        c.bump();
                        Some(parse_value(&mut c)?)
                    }
                    None | Some('\n' | '#' | ';') => {
                        c.skip_to_eol();
                        None
                    }
                    Some(_) => return Err(c.err("bad key")),
                };
                let end_line = if c.pos > 0 && c.chars[c.pos - 1] == '\n' { c.line } else { c.line + 1 };
                out.entries.push(Entry { section, subsection, key, value, first_line, end_line });
            }
            _ => return Err(c.err("unexpected character")),
        }
    }
    let lines = text.lines().count().max(c.line + usize::from(!text.ends_with('\n') && !text.is_empty()));
    if let Some(last) = out.sections.last_mut() {
        last.end_line = lines;
    }
    Ok(out)
}

fn parse_header(c: &mut Cursor<'_>) -> Result<(String, Option<String>), ParseError> {
    c.bump(); // '['
    let mut name = String::new();
    while let Some(ch) = c.peek() {
        if ch.is_ascii_alphanumeric() || ch == '-' || ch == '.' {
            name.push(ch);
            c.bump();
        } else {
            break;
        }
    }
    if name.is_empty() {
        return Err(c.err("empty section name"));
    }
    let mut subsection = None;
    c.skip_blanks();
    if c.peek() == Some('"') {
        if name.contains('.') {
            return Err(c.err("dotted section name with a quoted subsection"));
        }
        c.bump();
        let mut sub = String::new();
        loop {
            match c.bump() {
                None | Some('\n') => return Err(c.err("unterminated subsection")),
                Some('"') => break,
                Some('\\') => match c.bump() {
                    None | Some('\n') => return Err(c.err("unterminated subsection")),
                    Some(e) => sub.push(e),
                },
                Some(ch) => sub.push(ch),
            }
        }
        subsection = Some(sub);
        c.skip_blanks();
    } else if let Some((sec, sub)) = name.split_once('.') {
        // The deprecated [section.subsection] form: the subsection is lower-cased.
        let (sec, sub) = (sec.to_string(), sub.to_ascii_lowercase());
        name = sec;
        subsection = Some(sub);
    }
    if c.bump() != Some(']') {
        return Err(c.err("bad section header"));
    }
    Ok((name.to_ascii_lowercase(), subsection))
}

fn parse_value(c: &mut Cursor<'_>) -> Result<String, ParseError> {
    let mut v = String::new();
    let mut quoted = false;
    // Whitespace is kept only between words (trailing blanks are dropped at the end).
    let mut pending_space = String::new();
    c.skip_blanks();
    while let Some(ch) = c.peek() {
        match ch {
            '\n' => {
                if quoted {
                    return Err(c.err("unterminated quote"));
                }
                c.bump();
                break;
            }
            '#' | ';' if !quoted => {
                c.skip_to_eol();
                continue;
            }
            ' ' | '\t' if !quoted => {
                // git keeps the count of blanks between words, each as a space.
                pending_space.push(' ');
                c.bump();
                continue;
            }
            _ => {}
        }
        if !v.is_empty() || quoted {
            v.push_str(&pending_space);
        }
        pending_space.clear();
        c.bump();
        match ch {
            '"' => quoted = !quoted,
            '\\' => match c.bump() {
                Some('\n') => {} // continuation
                Some('\r') if c.peek() == Some('\n') => {
                    c.bump();
                }
                Some('n') => v.push('\n'),
                Some('t') => v.push('\t'),
                Some('b') => {
                    v.pop();
                }
                Some('\\') => v.push('\\'),
                Some('"') => v.push('"'),
                _ => return Err(c.err("bad escape in value")),
            },
            '\r' => {}
            ch => v.push(ch),
        }
    }
    Ok(v)
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
        for bad in ["key = 1\n", "[core\n", "[a \"unterminated]\n", "[a]\n\t9key\n", "[a]\n\tk = \"open\n", "[a]\n\tk = bad\\q\n"] {
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
