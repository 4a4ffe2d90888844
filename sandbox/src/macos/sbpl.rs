//! The SBPL subset this backend emits: reading it back ([`parse`]) and checking that a profile is
//! well-formed ([`check`]).
//!
//! SBPL (Seatbelt's Sandbox Profile Language) is a Scheme dialect: a profile is a sequence of
//! forms, `(version 1)` first, then rules `(allow|deny OPERATION… FILTER… MODIFIER…)`. The
//! generator ([`super::profile`]) uses a small part of it, and [`check`] holds every generated
//! profile to exactly that part:
//!
//! * balanced parentheses, strings in double quotes (`\"` and `\\` escapes), regular
//!   expressions as `#"…"`, comments from `;` to the end of the line;
//! * only the operations of [`KNOWN_OPERATIONS`] and the filters of [`KNOWN_FILTERS`];
//! * a path never appears as text: path filters take `(param "NAME")`, and the only string
//!   literals are the constants of [`KNOWN_STRINGS`] (mach service and IPC names, the pty
//!   extension, the `same-sandbox` target) and `with message` tags. So no path, however it is
//!   spelt, can change the profile's meaning: it reaches Seatbelt as a `-D` parameter value.

use std::fmt;

/// One S-expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sexp {
    /// `( … )`.
    List(Vec<Sexp>),
    /// A bare word: `allow`, `file-read*`, `subpath`, `1`.
    Symbol(String),
    /// `"…"` (unescaped).
    Str(String),
    /// `#"…"` (the pattern, unescaped).
    Regex(String),
}

impl Sexp {
    /// The head symbol of a list.
    #[must_use]
    pub fn head(&self) -> Option<&str> {
        match self {
            Sexp::List(v) => match v.first() {
                Some(Sexp::Symbol(s)) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// The elements after the head of a list (empty otherwise).
    #[must_use]
    pub fn args(&self) -> &[Sexp] {
        match self {
            Sexp::List(v) if !v.is_empty() => &v[1..],
            _ => &[],
        }
    }
}

impl fmt::Display for Sexp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sexp::List(v) => {
                f.write_str("(")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str(")")
            }
            Sexp::Symbol(s) => f.write_str(s),
            Sexp::Str(s) => write!(f, "\"{}\"", quote(s)),
            Sexp::Regex(s) => write!(f, "#\"{}\"", quote(s)),
        }
    }
}

/// `s` with `\` and `"` escaped, for a string literal.
#[must_use]
pub fn quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A parse or check failure, with the byte offset or the form it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SbplError(pub String);

impl fmt::Display for SbplError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SbplError {}

/// Parses a profile into its top-level forms.
///
/// # Errors
/// [`SbplError`] at an unbalanced parenthesis, an unterminated string, or a stray character.
pub fn parse(text: &str) -> Result<Vec<Sexp>, SbplError> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut stack: Vec<(usize, Vec<Sexp>)> = vec![(0, Vec::new())];
    while i < b.len() {
        match b[i] {
            b';' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'(' => {
                stack.push((i, Vec::new()));
                i += 1;
            }
            b')' => {
                if stack.len() < 2 {
                    return Err(SbplError(format!("unbalanced ')' at byte {i}")));
                }
                let (_, items) = stack.pop().unwrap_or_default();
                push(&mut stack, Sexp::List(items));
                i += 1;
            }
            b'"' => {
                let (s, next) = string_at(b, i + 1)?;
                push(&mut stack, Sexp::Str(s));
                i = next;
            }
            b'#' if b.get(i + 1) == Some(&b'"') => {
                let (s, next) = string_at(b, i + 2)?;
                push(&mut stack, Sexp::Regex(s));
                i = next;
            }
            _ => {
                let start = i;
                while i < b.len() && !b[i].is_ascii_whitespace() && !matches!(b[i], b'(' | b')' | b'"' | b';') {
                    i += 1;
                }
                let word = &text[start..i];
                if word.bytes().any(|c| !(c.is_ascii_alphanumeric() || b"-*_#:.?!<>=+/".contains(&c))) {
                    return Err(SbplError(format!("unexpected symbol {word:?} at byte {start}")));
                }
                push(&mut stack, Sexp::Symbol(word.to_string()));
            }
        }
    }
    if stack.len() != 1 {
        let open = stack.last().map_or(0, |(at, _)| *at);
        return Err(SbplError(format!("unbalanced '(' opened at byte {open}")));
    }
    Ok(stack.pop().map(|(_, v)| v).unwrap_or_default())
}

fn push(stack: &mut [(usize, Vec<Sexp>)], x: Sexp) {
    if let Some((_, v)) = stack.last_mut() {
        v.push(x);
    }
}

/// A string body starting at `i` (after the opening quote): its unescaped text and the index
/// after the closing quote.
fn string_at(b: &[u8], mut i: usize) -> Result<(String, usize), SbplError> {
    let start = i;
    let mut out = Vec::new();
    while i < b.len() {
        match b[i] {
            b'"' => return Ok((String::from_utf8_lossy(&out).into_owned(), i + 1)),
            b'\\' if i + 1 < b.len() => {
                out.push(b[i + 1]);
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Err(SbplError(format!("unterminated string starting at byte {start}")))
}

/// The operations the generator may use. A `*` suffix names a family (`file-read*` is every
/// `file-read-…` operation).
pub const KNOWN_OPERATIONS: &[&str] = &[
    "default", "file-read*", "file-read-data", "file-read-metadata", "file-read-xattr", "file-write*", "file-write-data",
    "file-write-create", "file-write-unlink", "file-write-mode", "file-write-times", "file-write-xattr", "file-write-flags",
    "file-write-owner", "file-ioctl", "process-fork", "process-exec", "process-info*", "signal", "sysctl-read", "mach-lookup",
    "ipc-posix-shm-read-data", "ipc-posix-shm-read-metadata", "ipc-posix-sem", "pseudo-tty", "network*", "network-outbound",
    "network-inbound", "network-bind",
];

/// The filters the generator may use.
pub const KNOWN_FILTERS: &[&str] = &[
    "literal", "subpath", "regex", "param", "require-all", "require-any", "require-not", "target", "global-name",
    "ipc-posix-name", "extension",
];

/// The string literals the generator may use besides `with message` tags: names of system
/// services and IPC objects, the pty extension, a signal target. None is a path of the plan.
pub const KNOWN_STRINGS: &[&str] = &[
    "com.apple.system.opendirectoryd.libinfo", "com.apple.system.logger", "com.apple.logd",
    "com.apple.system.notification_center", "apple.shm.notification_center", "com.apple.sandbox.pty",
];

/// The regular expressions the generator may use (constant: the pseudo-terminals' names).
pub const KNOWN_REGEXES: &[&str] = &["^/dev/ttys[0-9]+$"];

/// Checks that `text` is a well-formed profile of the generator's subset (see the module docs):
/// `(version 1)` first, then rules with known operations, filters, constant strings and
/// parameters only; every parameter a filter names is one of `params`.
///
/// # Errors
/// [`SbplError`] naming the first offending form.
pub fn check(text: &str, params: &[&str]) -> Result<(), SbplError> {
    let forms = parse(text)?;
    let mut it = forms.iter();
    match it.next() {
        Some(f) if f.head() == Some("version") && f.args() == [Sexp::Symbol("1".into())] => {}
        other => return Err(SbplError(format!("the profile must start with (version 1), not {}", other.map_or("nothing".into(), ToString::to_string)))),
    }
    for f in it {
        let head = f.head().unwrap_or("");
        if head != "allow" && head != "deny" {
            return Err(SbplError(format!("not a rule: {f}")));
        }
        let mut ops = 0;
        let mut filters = 0;
        for a in f.args() {
            match a {
                Sexp::Symbol(op) if filters == 0 => {
                    if !KNOWN_OPERATIONS.contains(&op.as_str()) {
                        return Err(SbplError(format!("unknown operation {op} in {f}")));
                    }
                    ops += 1;
                }
                Sexp::List(_) if a.head() == Some("with") => check_modifier(a, f)?,
                Sexp::List(_) => {
                    check_filter(a, params, f)?;
                    filters += 1;
                }
                _ => return Err(SbplError(format!("unexpected {a} in {f}"))),
            }
        }
        if ops == 0 {
            return Err(SbplError(format!("a rule without an operation: {f}")));
        }
    }
    Ok(())
}

fn check_modifier(m: &Sexp, rule: &Sexp) -> Result<(), SbplError> {
    match m.args() {
        [Sexp::Symbol(w), Sexp::Str(_)] if w == "message" => Ok(()),
        _ => Err(SbplError(format!("unknown modifier {m} in {rule}"))),
    }
}

fn check_filter(f: &Sexp, params: &[&str], rule: &Sexp) -> Result<(), SbplError> {
    let head = f.head().unwrap_or("");
    if !KNOWN_FILTERS.contains(&head) {
        return Err(SbplError(format!("unknown filter {f} in {rule}")));
    }
    let args = f.args();
    let bad = || SbplError(format!("malformed filter {f} in {rule}"));
    match head {
        "literal" | "subpath" => match args {
            [p] if p.head() == Some("param") => check_filter(p, params, rule),
            // A path as text is exactly what the generator must never emit.
            [Sexp::Str(s)] => Err(SbplError(format!("a path spliced into the profile as text ({s:?}) in {rule}"))),
            _ => Err(bad()),
        },
        "param" => match args {
            [Sexp::Str(name)] if params.contains(&name.as_str()) => Ok(()),
            [Sexp::Str(name)] => Err(SbplError(format!("parameter {name:?} is not passed with -D ({rule})"))),
            _ => Err(bad()),
        },
        "regex" => match args {
            [Sexp::Regex(r)] if KNOWN_REGEXES.contains(&r.as_str()) => Ok(()),
            _ => Err(SbplError(format!("regex outside the known constants: {f} in {rule}"))),
        },
        "require-all" | "require-any" if !args.is_empty() => args.iter().try_for_each(|a| check_filter(a, params, rule)),
        "require-not" => match args {
            [a] => check_filter(a, params, rule),
            _ => Err(bad()),
        },
        "target" => match args {
            [Sexp::Symbol(t)] if t == "same-sandbox" => Ok(()),
            _ => Err(bad()),
        },
        "global-name" | "ipc-posix-name" | "extension" => match args {
            [Sexp::Str(s)] if KNOWN_STRINGS.contains(&s.as_str()) => Ok(()),
            _ => Err(SbplError(format!("string outside the known constants: {f} in {rule}"))),
        },
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strings_regexes_comments_and_nesting() {
        let forms = parse("(version 1) ; comment (\n(allow file-read* (subpath (param \"A\")) (regex #\"^/dev/ttys[0-9]+$\")) (x \"a\\\"b\")").unwrap();
        assert_eq!(forms.len(), 3);
        assert_eq!(forms[1].head(), Some("allow"));
        assert_eq!(forms[1].args()[2], Sexp::List(vec![Sexp::Symbol("regex".into()), Sexp::Regex("^/dev/ttys[0-9]+$".into())]));
        assert_eq!(forms[2].args()[0], Sexp::Str("a\"b".into()));
        assert_eq!(forms[2].to_string(), "(x \"a\\\"b\")");
    }

    #[test]
    fn unbalanced_and_unterminated_are_errors() {
        assert!(parse("(version 1").unwrap_err().0.contains("unbalanced '('"));
        assert!(parse("(version 1))").unwrap_err().0.contains("unbalanced ')'"));
        assert!(parse("(allow \"x)").unwrap_err().0.contains("unterminated"));
    }

    #[test]
    fn check_accepts_the_subset_and_refuses_the_rest() {
        let ok = "(version 1)\n(deny default)\n(allow file-read* (require-all (subpath (param \"R\")) (require-not (literal (param \"D\")))))\n(deny network* (with message \"m\"))";
        check(ok, &["R", "D"]).unwrap();
        assert!(check("(deny default)", &[]).unwrap_err().0.contains("(version 1)"));
        assert!(check("(version 1)(allow file-frobnicate)", &[]).unwrap_err().0.contains("unknown operation"));
        assert!(check("(version 1)(allow file-read* (vnode-type REGULAR-FILE))", &[]).unwrap_err().0.contains("unknown filter"));
        assert!(check("(version 1)(allow file-read* (subpath \"/Users/x\"))", &[]).unwrap_err().0.contains("as text"));
        assert!(check("(version 1)(allow file-read* (subpath (param \"R\")))", &[]).unwrap_err().0.contains("not passed"));
        assert!(check("(version 1)(allow mach-lookup (global-name \"com.apple.coreservices.launchservicesd\"))", &[]).unwrap_err().0.contains("known constants"));
        assert!(check("(version 1)(allow file-read* (regex #\"^/\"))", &[]).unwrap_err().0.contains("regex"));
        assert!(check("(version 1)(allow)", &[]).unwrap_err().0.contains("without an operation"));
        assert!(check("(version 1)(allow file-read* (with report))", &[]).unwrap_err().0.contains("modifier"));
    }
}
