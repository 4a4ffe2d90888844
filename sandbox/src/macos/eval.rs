//! An evaluator of the SBPL subset the generator emits ([`super::sbpl`]): given a profile, its
//! `-D` parameters and one operation (read this path, exec that one, connect, signal), it says
//! whether Seatbelt would allow it. The conformance table is checked against generated profiles
//! with it, on any OS; a Mac checks the real thing with `localgpt sandbox test`.
//!
//! ## Semantics, and where each comes from
//!
//! * **Operations.** A rule names operations; a name ending in `*` covers every operation that
//!   starts with the name before the `*` (`file-read*` covers `file-read-data` and
//!   `file-read-metadata`, `network*` covers `network-outbound`). `default` is the fallback: it
//!   decides an operation no other rule matches. (Apple's profiles under
//!   `/System/Library/Sandbox/Profiles` and the reverse-engineered operation list in Dionysus
//!   Blazakis' "The Apple Sandbox" and fG!'s "Apple Sandbox Guide" use these families.)
//! * **Filters.** With no filter a rule matches every instance of its operations; with several,
//!   any one matching is enough. `literal` matches the path exactly; `subpath` the path and
//!   everything below it, at a component boundary; `regex` a POSIX extended expression over the
//!   path; `(param "N")` is the value passed as `-DN=…`; `require-all`, `require-any` and
//!   `require-not` combine filters; `(target same-sandbox)` matches a process in the same
//!   sandbox (signals, process information); `global-name` a mach service; `ipc-posix-name` a
//!   POSIX IPC object; `extension` a sandbox extension the process holds (the pty extension
//!   that `pseudo-tty` issues for terminals the command opens). (Sources as above, and the
//!   profiles of Chromium's `sandbox/policy/mac/*.sb` and OpenAI Codex's Seatbelt policy, which
//!   use these filters with these meanings; paths are compared after symbolic links are
//!   resolved, which is why every parameter is a canonical path.)
//! * **Precedence.** When rules of both kinds match, Seatbelt lets the *last* matching rule decide
//!   (Apple's profiles put general allows before specific denies and depend on it). Apple does not
//!   document this, so the generator never depends on it: no allow rule matches what a deny rule
//!   matches for the same operation (denied paths are cut out of every allow rule with
//!   `require-not`). [`Decision::ambiguous`] reports a query that rules of both kinds match, and
//!   the conformance test evaluates every row under both readings ([`Precedence`]) and requires
//!   the same answer.

use std::path::{Path, PathBuf};

use super::sbpl::{parse, SbplError, Sexp};

/// How to settle a query that both an allow and a deny rule match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precedence {
    /// The last matching rule decides (Seatbelt's behaviour).
    LastMatch,
    /// Any matching deny rule decides.
    DenyWins,
}

/// One operation to decide.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// The operation (`file-read-data`, `file-write-create`, `process-exec`, `signal`,
    /// `network-outbound`, `mach-lookup`, …).
    pub op: String,
    /// The (canonical) path it concerns, for file operations and `process-exec`.
    pub path: Option<PathBuf>,
    /// For `signal` and `process-info*`: the target is in the same sandbox.
    pub same_sandbox: bool,
    /// A mach service or IPC name.
    pub name: Option<String>,
    /// Sandbox extensions the process holds for this object.
    pub extensions: Vec<String>,
}

impl Query {
    /// A file operation on `path`.
    #[must_use]
    pub fn file(op: &str, path: &Path) -> Query {
        Query { op: op.into(), path: Some(path.to_path_buf()), ..Query::default() }
    }
}

/// What the profile decides for a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Allowed.
    pub allowed: bool,
    /// The deciding rule, as text (`None`: the `default` fallback decided).
    pub rule: Option<String>,
    /// The deciding deny rule's `with message` tag.
    pub message: Option<String>,
    /// Both allow and deny rules match (the answer then depends on precedence).
    pub ambiguous: bool,
}

#[derive(Clone, Debug)]
struct Rule {
    allow: bool,
    ops: Vec<String>,
    filters: Vec<Sexp>,
    message: Option<String>,
    text: String,
}

/// A profile ready to answer queries.
#[derive(Clone, Debug)]
pub struct Evaluator {
    rules: Vec<Rule>,
    default_allow: Option<bool>,
    params: Vec<(String, PathBuf)>,
}

impl Evaluator {
    /// Reads a profile and its parameters.
    ///
    /// # Errors
    /// [`SbplError`] when the profile does not parse or has a form that is not a rule.
    pub fn new(profile: &str, params: &[(String, PathBuf)]) -> Result<Evaluator, SbplError> {
        let mut rules = Vec::new();
        let mut default_allow = None;
        for f in parse(profile)? {
            match f.head() {
                Some("version") => continue,
                Some(h @ ("allow" | "deny")) => {
                    let allow = h == "allow";
                    let mut ops = Vec::new();
                    let mut filters = Vec::new();
                    let mut message = None;
                    for a in f.args() {
                        match a {
                            Sexp::Symbol(s) => ops.push(s.clone()),
                            Sexp::List(_) if a.head() == Some("with") => {
                                if let [Sexp::Symbol(w), Sexp::Str(m)] = a.args() {
                                    if w == "message" {
                                        message = Some(m.clone());
                                    }
                                }
                            }
                            Sexp::List(_) => filters.push(a.clone()),
                            _ => return Err(SbplError(format!("unexpected {a} in {f}"))),
                        }
                    }
                    if ops.iter().any(|o| o == "default") {
                        default_allow = Some(allow);
                        continue;
                    }
                    rules.push(Rule { allow, ops, filters, message, text: f.to_string() });
                }
                _ => return Err(SbplError(format!("not a rule: {f}"))),
            }
        }
        Ok(Evaluator { rules, default_allow, params: params.to_vec() })
    }

    /// Decides `q` (see the module docs).
    #[must_use]
    pub fn decide(&self, q: &Query, precedence: Precedence) -> Decision {
        let matching: Vec<&Rule> = self.rules.iter().filter(|r| covers(&r.ops, &q.op) && (r.filters.is_empty() || r.filters.iter().any(|f| self.filter(f, q)))).collect();
        let ambiguous = matching.iter().any(|r| r.allow) && matching.iter().any(|r| !r.allow);
        let decider = match precedence {
            Precedence::LastMatch => matching.last().copied(),
            Precedence::DenyWins => matching.iter().find(|r| !r.allow).or_else(|| matching.last()).copied(),
        };
        match decider {
            Some(r) => Decision { allowed: r.allow, rule: Some(r.text.clone()), message: r.message.clone().filter(|_| !r.allow), ambiguous },
            // Seatbelt's own fallback, when a profile names no default, is to allow.
            None => Decision { allowed: self.default_allow.unwrap_or(true), rule: None, message: None, ambiguous },
        }
    }

    fn param(&self, name: &str) -> Option<&Path> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_path())
    }

    /// The path a `literal`/`subpath` argument stands for.
    fn path_arg(&self, a: &Sexp) -> Option<PathBuf> {
        match a {
            Sexp::Str(s) => Some(PathBuf::from(s)),
            Sexp::List(_) if a.head() == Some("param") => match a.args() {
                [Sexp::Str(n)] => self.param(n).map(Path::to_path_buf),
                _ => None,
            },
            _ => None,
        }
    }

    fn filter(&self, f: &Sexp, q: &Query) -> bool {
        let args = f.args();
        match f.head() {
            Some("literal") => q.path.as_ref().is_some_and(|p| args.first().and_then(|a| self.path_arg(a)).is_some_and(|x| *p == x)),
            // Path::starts_with compares whole components.
            Some("subpath") => q.path.as_ref().is_some_and(|p| args.first().and_then(|a| self.path_arg(a)).is_some_and(|x| p.starts_with(x))),
            Some("regex") => match (args.first(), &q.path) {
                (Some(Sexp::Regex(r)), Some(p)) => regex_match(r, &p.to_string_lossy()),
                _ => false,
            },
            Some("require-all") => args.iter().all(|a| self.filter(a, q)),
            Some("require-any") => args.iter().any(|a| self.filter(a, q)),
            Some("require-not") => !args.first().is_some_and(|a| self.filter(a, q)),
            Some("target") => matches!(args.first(), Some(Sexp::Symbol(t)) if t == "same-sandbox") && q.same_sandbox,
            Some("global-name" | "ipc-posix-name") => matches!(args.first(), Some(Sexp::Str(s)) if q.name.as_deref() == Some(s.as_str())),
            Some("extension") => matches!(args.first(), Some(Sexp::Str(s)) if q.extensions.iter().any(|e| e == s)),
            // An unknown filter matches nothing: the evaluator never grants by guessing.
            _ => false,
        }
    }
}

/// `ops` (a rule's operation names) covers `op`.
fn covers(ops: &[String], op: &str) -> bool {
    ops.iter().any(|o| match o.strip_suffix('*') {
        Some(family) => op.starts_with(family),
        None => o == op,
    })
}

/// A match of the small regular-expression subset the generator uses: `^`, `$`, literal
/// characters, `\` escapes, `.`, bracket classes with ranges, and the `*`, `+`, `?`
/// quantifiers. Unanchored patterns match anywhere.
#[must_use]
pub fn regex_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    if p.first() == Some(&'^') {
        return match_here(&p[1..], &t);
    }
    (0..=t.len()).any(|i| match_here(&p, &t[i..]))
}

/// One atom of a pattern: its length in `p` and whether it matches `c`.
fn atom(p: &[char], c: char) -> (usize, bool) {
    match p[0] {
        '.' => (1, true),
        '\\' if p.len() > 1 => (2, p[1] == c),
        '[' => {
            let mut i = 1;
            let negate = p.get(1) == Some(&'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            while i < p.len() && (p[i] != ']' || i == 1 + usize::from(negate)) {
                if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
                    hit |= p[i] <= c && c <= p[i + 2];
                    i += 3;
                } else {
                    hit |= p[i] == c;
                    i += 1;
                }
            }
            (i + 1, hit != negate)
        }
        x => (1, x == c),
    }
}

fn match_here(p: &[char], t: &[char]) -> bool {
    if p.is_empty() {
        return true;
    }
    if p == ['$'] {
        return t.is_empty();
    }
    let (len, _) = atom(p, '\0');
    let quant = p.get(len).copied();
    let one = |c: Option<&char>| c.is_some_and(|&c| atom(p, c).1);
    match quant {
        Some('*' | '+' | '?') => {
            let rest = &p[len + 1..];
            let mut n = 0;
            while n < t.len() && one(t.get(n)) && (quant != Some('?') || n < 1) {
                n += 1;
            }
            let min = usize::from(quant == Some('+'));
            (min..=n).rev().any(|k| match_here(rest, &t[k..]))
        }
        _ => one(t.first()) && match_here(&p[len..], &t[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(profile: &str, params: &[(&str, &str)]) -> Evaluator {
        let params: Vec<(String, PathBuf)> = params.iter().map(|(n, v)| ((*n).to_string(), PathBuf::from(v))).collect();
        Evaluator::new(profile, &params).unwrap()
    }

    fn read(e: &Evaluator, p: &str) -> bool {
        e.decide(&Query::file("file-read-data", Path::new(p)), Precedence::LastMatch).allowed
    }

    #[test]
    fn default_deny_and_subpath_at_component_boundaries() {
        let e = ev("(version 1)(deny default)(allow file-read* (subpath (param \"R\")))", &[("R", "/Users/u/proj")]);
        assert!(read(&e, "/Users/u/proj"));
        assert!(read(&e, "/Users/u/proj/src/a.rs"));
        assert!(!read(&e, "/Users/u/project"), "subpath is not a string prefix");
        assert!(!read(&e, "/Users/u"));
        assert!(!e.decide(&Query::file("file-write-data", Path::new("/Users/u/proj/a")), Precedence::LastMatch).allowed);
    }

    #[test]
    fn literal_matches_only_the_path() {
        let e = ev("(version 1)(deny default)(allow file-write* (literal (param \"F\")))", &[("F", "/a/b")]);
        assert!(e.decide(&Query::file("file-write-create", Path::new("/a/b")), Precedence::LastMatch).allowed);
        assert!(!e.decide(&Query::file("file-write-create", Path::new("/a/b/c")), Precedence::LastMatch).allowed);
    }

    #[test]
    fn families_and_exact_operations() {
        assert!(covers(&["file-read*".into()], "file-read-metadata"));
        assert!(!covers(&["file-read*".into()], "file-write-data"));
        assert!(covers(&["network*".into()], "network-outbound"));
        assert!(!covers(&["process-exec".into()], "process-fork"));
    }

    #[test]
    fn require_combinators() {
        let p = "(version 1)(deny default)(allow file-read* (require-all (subpath (param \"R\")) (require-not (require-any (subpath (param \"D\")) (literal (param \"L\"))))))";
        let e = ev(p, &[("R", "/h"), ("D", "/h/.ssh"), ("L", "/h/x")]);
        assert!(read(&e, "/h/a"));
        assert!(!read(&e, "/h/.ssh/id"));
        assert!(!read(&e, "/h/x"));
        assert!(read(&e, "/h/x/y"), "literal does not cover children");
    }

    #[test]
    fn precedence_readings_and_ambiguity() {
        let e = ev("(version 1)(deny default)(deny file-read* (subpath (param \"D\")) (with message \"tag\"))(allow file-read* (subpath (param \"R\")))", &[("R", "/h"), ("D", "/h/.ssh")]);
        let q = Query::file("file-read-data", Path::new("/h/.ssh/k"));
        let last = e.decide(&q, Precedence::LastMatch);
        let deny = e.decide(&q, Precedence::DenyWins);
        assert!(last.allowed && !deny.allowed && last.ambiguous && deny.ambiguous);
        assert_eq!(deny.message.as_deref(), Some("tag"));
        assert!(!e.decide(&Query::file("file-read-data", Path::new("/h/a")), Precedence::DenyWins).ambiguous);
    }

    #[test]
    fn no_default_rule_means_allow_and_unknown_filters_match_nothing() {
        let e = ev("(version 1)(deny file-read* (subpath (param \"D\")))", &[("D", "/x")]);
        assert!(read(&e, "/y"));
        let e = ev("(version 1)(deny default)(allow file-read* (vnode-type REGULAR-FILE))", &[]);
        assert!(!read(&e, "/y"));
    }

    #[test]
    fn targets_names_and_extensions() {
        let e = ev("(version 1)(deny default)(allow signal (target same-sandbox))(allow mach-lookup (global-name \"a.b\"))(allow file-read* (require-all (regex #\"^/dev/ttys[0-9]+$\") (extension \"com.apple.sandbox.pty\")))", &[]);
        let sig = |same| e.decide(&Query { op: "signal".into(), same_sandbox: same, ..Query::default() }, Precedence::LastMatch).allowed;
        assert!(sig(true) && !sig(false));
        let mach = |n: &str| e.decide(&Query { op: "mach-lookup".into(), name: Some(n.into()), ..Query::default() }, Precedence::LastMatch).allowed;
        assert!(mach("a.b") && !mach("a.c"));
        let tty = |p: &str, ext: bool| {
            let mut q = Query::file("file-read-data", Path::new(p));
            if ext {
                q.extensions.push("com.apple.sandbox.pty".into());
            }
            e.decide(&q, Precedence::LastMatch).allowed
        };
        assert!(tty("/dev/ttys003", true));
        assert!(!tty("/dev/ttys003", false), "another terminal of the user");
        assert!(!tty("/dev/ttys003x", true));
    }

    #[test]
    fn the_regex_subset() {
        assert!(regex_match("^/dev/ttys[0-9]+$", "/dev/ttys000"));
        assert!(!regex_match("^/dev/ttys[0-9]+$", "/dev/ttys"));
        assert!(!regex_match("^/dev/ttys[0-9]+$", "/dev/ttysa"));
        assert!(regex_match("b.d", "abcde"));
        assert!(!regex_match("^b", "abc"));
        assert!(regex_match("^a[^x]?c$", "ac") && regex_match("^a[^x]?c$", "abc") && !regex_match("^a[^x]?c$", "axc"));
        assert!(regex_match("^a\\.b*$", "a.bbb") && !regex_match("^a\\.b*$", "axb"));
    }
}
