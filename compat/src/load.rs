//! Loading and validation of `compat-commands/`: every group file is parsed with unknown keys
//! rejected, defaults are applied, and the whole corpus is checked; every problem found is
//! reported (not just the first), each naming its file and command.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

use crate::schema::{
    Command, Compare, Corpus, Expect, Group, GroupFile, Normalisation, DEFAULT_TIMEOUT, MAX_TIMEOUT, PLACEHOLDERS,
    REQUIRED_FIXTURES,
};

/// Errors from loading the corpus.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The directory or a file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// Path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// One or more validation problems.
    #[error("{} problem(s) in the corpus:\n  {}", .0.len(), .0.join("\n  "))]
    Invalid(Vec<String>),
}

/// Name of the fixtures directory inside the corpus directory.
pub const FIXTURES_DIR: &str = "fixtures";
/// Name of the optional file of known failure causes.
pub const CAUSES_FILE: &str = "causes.yaml";

/// Loads and validates the corpus in `dir`.
///
/// # Errors
/// [`LoadError::Io`] when the directory or a file cannot be read; [`LoadError::Invalid`] with
/// every problem found otherwise.
pub fn load_corpus(dir: &Path) -> Result<Corpus, LoadError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Io { path, source }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .filter(|p| p.file_name().is_some_and(|n| n != CAUSES_FILE))
        .collect();
    files.sort();
    let fixtures_dir = dir.join(FIXTURES_DIR);
    let mut fixtures: Vec<String> = match std::fs::read_dir(&fixtures_dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(LoadError::Io { path: fixtures_dir, source: e }),
    };
    fixtures.sort();
    let mut sources = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(io(f))?;
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        sources.push((stem, text));
    }
    parse_corpus(&sources, fixtures)
}

/// Parses and validates group files given as `(file stem, YAML text)` against the fixture names
/// available. Pure: the unit tests drive it directly.
///
/// # Errors
/// [`LoadError::Invalid`] with every problem found.
pub fn parse_corpus(sources: &[(String, String)], fixtures: Vec<String>) -> Result<Corpus, LoadError> {
    let mut problems = Vec::new();
    let fixture_set: BTreeSet<&str> = fixtures.iter().map(String::as_str).collect();
    for req in REQUIRED_FIXTURES {
        if !fixture_set.contains(req) {
            problems.push(format!("{FIXTURES_DIR}/{req}: required fixture missing"));
        }
    }
    let name_re = Regex::new(r"^[a-z0-9][a-z0-9._-]*$").expect("static regex");
    let placeholder_re = Regex::new(r"\{\{[^}]*\}\}").expect("static regex");
    let mut groups = Vec::new();
    let mut seen_names: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_groups = BTreeSet::new();
    for (stem, text) in sources {
        let file: GroupFile = match serde_yaml_ng::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                problems.push(format!("{stem}.yaml: {e}"));
                continue;
            }
        };
        let at = |what: &str| format!("{stem}.yaml: {what}");
        if file.group != *stem {
            problems.push(at(&format!("group {:?} must equal the file name {stem:?}", file.group)));
        }
        if !seen_groups.insert(file.group.clone()) {
            problems.push(at(&format!("group {:?} defined twice", file.group)));
        }
        if file.title.trim().is_empty() {
            problems.push(at("empty title"));
        }
        if file.commands.is_empty() {
            problems.push(at("no commands"));
        }
        let mut commands = Vec::new();
        for spec in file.commands {
            let here = |what: &str| format!("{stem}.yaml: {}: {what}", spec.name);
            if !name_re.is_match(&spec.name) {
                problems.push(here("name must match [a-z0-9][a-z0-9._-]*"));
            }
            if let Some(prev) = seen_names.insert(spec.name.clone(), stem.clone()) {
                problems.push(here(&format!("duplicate name (also in {prev}.yaml)")));
            }
            if spec.run.trim().is_empty() {
                problems.push(here("empty run"));
            }
            let fixture = spec.fixture.clone().or_else(|| file.defaults.fixture.clone());
            let fixture = match fixture {
                Some(f) if fixture_set.contains(f.as_str()) => f,
                Some(f) => {
                    problems.push(here(&format!("unknown fixture {f:?} (have: {})", fixtures.join(", "))));
                    f
                }
                None => {
                    problems.push(here("no fixture (set one, or a group default)"));
                    String::new()
                }
            };
            let mut requires = file.defaults.requires.clone();
            requires.extend(spec.requires.iter().cloned());
            requires.sort();
            requires.dedup();
            for r in &requires {
                if r.is_empty() || r.contains('/') || r.chars().any(char::is_whitespace) {
                    problems.push(here(&format!("requires {r:?}: must be a program name")));
                }
            }
            let mut normalise = vec![Normalisation::Paths];
            normalise.extend(file.defaults.normalise.iter().copied());
            normalise.extend(spec.normalise.iter().copied());
            normalise.sort();
            normalise.dedup();
            let mut replace = file.defaults.replace.clone();
            replace.extend(spec.replace.iter().cloned());
            for r in &replace {
                if let Err(e) = Regex::new(&r.re) {
                    problems.push(here(&format!("replace regex {:?}: {e}", r.re)));
                }
            }
            if spec.compare != Compare::Output && spec.why.as_deref().is_none_or(|w| w.trim().is_empty()) {
                problems.push(here("compare narrower than output needs a `why`"));
            }
            if !spec.unstable.is_empty() && spec.why.as_deref().is_none_or(|w| w.trim().is_empty()) {
                problems.push(here("unstable paths need a `why` (what makes them differ from run to run)"));
            }
            if spec.unstable.iter().any(|u| u.is_empty() || u.starts_with('/') || u.split('/').any(|c| c == "..")) {
                problems.push(here("unstable paths are patterns relative to the fixture's copy, without `..`"));
            }
            for l in &spec.degraded_levels {
                if !["full", "standard", "minimal"].contains(&l.as_str()) {
                    problems.push(here(&format!("degraded level {l:?} (full | standard | minimal)")));
                }
            }
            let timeout = spec.timeout.or(file.defaults.timeout).unwrap_or(DEFAULT_TIMEOUT);
            if timeout == 0 || timeout > MAX_TIMEOUT {
                problems.push(here(&format!("timeout {timeout} must be 1..={MAX_TIMEOUT}")));
            }
            let texts = [Some(spec.run.as_str()), spec.check.as_deref()];
            let mut uses = BTreeSet::new();
            for t in texts.into_iter().flatten() {
                for m in placeholder_re.find_iter(t) {
                    if PLACEHOLDERS.contains(&m.as_str()) {
                        uses.insert(m.as_str().to_string());
                    } else {
                        problems.push(here(&format!("unknown placeholder {}", m.as_str())));
                    }
                }
            }
            match spec.expect {
                Expect::Succeed => {
                    if !spec.degraded_levels.is_empty() {
                        problems.push(here("degraded_levels is only for expect: denied"));
                    }
                    if spec.check.is_some() {
                        problems.push(here("`check` is only for expect: denied"));
                    }
                    if !uses.is_empty() {
                        problems.push(here("placeholders are only for expect: denied"));
                    }
                }
                Expect::Denied => {
                    if spec.exit_code != 0 {
                        problems.push(here("a denied command must succeed bare (exit_code 0)"));
                    }
                    let has_check = spec.check.as_deref().is_some_and(|c| !c.trim().is_empty());
                    if !has_check && !uses.contains("{{TOKEN}}") {
                        // (a token sent to a listener is checked by the runner)
                        problems.push(here("a denied command needs a `check` or a {{TOKEN}} sent to a listener"));
                    }
                    let listener = ["{{TCP_PORT}}", "{{UDP_PORT}}", "{{UNIX_SOCK}}"].iter().any(|p| uses.contains(*p));
                    if uses.contains("{{TOKEN}}") && !listener && !has_check {
                        problems.push(here("{{TOKEN}} without a listener ({{TCP_PORT}}, {{UDP_PORT}}, {{UNIX_SOCK}}) or a `check` cannot be checked"));
                    }
                    if spec.compare != Compare::Output {
                        problems.push(here("compare does not apply to denied commands"));
                    }
                    if !spec.degraded_levels.is_empty() && spec.why.as_deref().is_none_or(|w| w.trim().is_empty()) {
                        problems.push(here("degraded_levels needs a `why` naming the documented limitation"));
                    }
                }
            }
            if let Some(w) = &spec.workspace {
                let p = Path::new(w);
                if w.is_empty() || p.is_absolute() || p.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                    problems.push(here("workspace must be a relative subdirectory of the fixture, without `..`"));
                }
            }
            if spec.flags.iter().any(|f| ["--workspace", "--level", "--json", "--timeout", "--"].iter().any(|r| f == r || f.starts_with(&format!("{r}=")))) {
                problems.push(here("flags may not set --workspace, --level, --json or --timeout (the runner does)"));
            }
            commands.push(Command {
                name: spec.name,
                group: file.group.clone(),
                run: spec.run,
                fixture,
                expect: spec.expect,
                exit_code: spec.exit_code,
                requires,
                normalise,
                replace,
                compare: spec.compare,
                why: spec.why,
                timeout,
                check: spec.check,
                degraded_levels: spec.degraded_levels,
                workspace: spec.workspace,
                flags: spec.flags,
                unstable: spec.unstable,
            });
        }
        groups.push(Group { id: file.group, title: file.title, commands });
    }
    if problems.is_empty() {
        Ok(Corpus { groups, fixtures })
    } else {
        Err(LoadError::Invalid(problems))
    }
}

/// A known cause for a failure, from `causes.yaml`: it annotates the report, it never turns a
/// failure into a pass.
#[derive(serde::Deserialize, serde::Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KnownCause {
    /// Command name.
    pub name: String,
    /// Levels it applies to (empty: all).
    #[serde(default)]
    pub levels: Vec<String>,
    /// Users it applies to: `root`, `unprivileged` (empty: all).
    #[serde(default)]
    pub users: Vec<String>,
    /// The explanation.
    pub cause: String,
    /// True when fixing it would weaken a protection (the report says so).
    #[serde(default)]
    pub security_tradeoff: bool,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CausesFile {
    causes: Vec<KnownCause>,
}

/// Parses `causes.yaml` and checks every name against the corpus.
///
/// # Errors
/// [`LoadError::Invalid`] for malformed YAML, an unknown command, level or user.
pub fn parse_causes(text: &str, corpus: &Corpus) -> Result<Vec<KnownCause>, LoadError> {
    let f: CausesFile = serde_yaml_ng::from_str(text).map_err(|e| LoadError::Invalid(vec![format!("{CAUSES_FILE}: {e}")]))?;
    let names: BTreeSet<&str> = corpus.commands().map(|c| c.name.as_str()).collect();
    let mut problems = Vec::new();
    for c in &f.causes {
        if !names.contains(c.name.as_str()) {
            problems.push(format!("{CAUSES_FILE}: {}: no such command", c.name));
        }
        for l in &c.levels {
            if !["full", "standard", "minimal"].contains(&l.as_str()) {
                problems.push(format!("{CAUSES_FILE}: {}: level {l:?}", c.name));
            }
        }
        for u in &c.users {
            if !["root", "unprivileged"].contains(&u.as_str()) {
                problems.push(format!("{CAUSES_FILE}: {}: user {u:?} (root | unprivileged)", c.name));
            }
        }
        if c.cause.trim().is_empty() {
            problems.push(format!("{CAUSES_FILE}: {}: empty cause", c.name));
        }
    }
    if problems.is_empty() {
        Ok(f.causes)
    } else {
        Err(LoadError::Invalid(problems))
    }
}

/// Loads `causes.yaml` from the corpus directory (absent: no causes).
///
/// # Errors
/// As [`parse_causes`], or [`LoadError::Io`].
pub fn load_causes(dir: &Path, corpus: &Corpus) -> Result<Vec<KnownCause>, LoadError> {
    let p = dir.join(CAUSES_FILE);
    match std::fs::read_to_string(&p) {
        Ok(t) => parse_causes(&t, corpus),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(LoadError::Io { path: p, source: e }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fx() -> Vec<String> {
        REQUIRED_FIXTURES.iter().map(|s| (*s).to_string()).collect()
    }

    fn one(stem: &str, yaml: &str) -> Result<Corpus, LoadError> {
        parse_corpus(&[(stem.to_string(), yaml.to_string())], fx())
    }

    fn problems(r: Result<Corpus, LoadError>) -> Vec<String> {
        match r {
            Err(LoadError::Invalid(p)) => p,
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => panic!("expected problems"),
        }
    }

    #[test]
    fn defaults_are_applied() {
        let c = one(
            "g",
            "group: g\ntitle: G\ndefaults: {fixture: git, requires: [git], normalise: [hashes], timeout: 9}\ncommands:\n  - {name: a, run: git log, requires: [jq], normalise: [timestamps]}\n  - {name: b, run: ls, fixture: empty, timeout: 3, exit_code: 2}\n",
        )
        .unwrap();
        let a = &c.groups[0].commands[0];
        assert_eq!(a.fixture, "git");
        assert_eq!(a.requires, vec!["git", "jq"]);
        assert_eq!(a.normalise, vec![Normalisation::Paths, Normalisation::Timestamps, Normalisation::Hashes]);
        assert_eq!(a.timeout, 9);
        assert_eq!(a.expect, Expect::Succeed);
        assert_eq!(a.compare, Compare::Output);
        let b = &c.groups[0].commands[1];
        assert_eq!((b.fixture.as_str(), b.timeout, b.exit_code), ("empty", 3, 2));
        assert_eq!(b.normalise, vec![Normalisation::Paths, Normalisation::Hashes]);
    }

    #[test]
    fn a_group_s_replacements_come_before_the_command_s() {
        let c = one(
            "g",
            "group: g\ntitle: G\ndefaults: {fixture: empty, replace: [{re: '^Blocking .*\\n', with: ''}]}\ncommands:\n  - {name: a, run: ls, replace: [{re: 'x', with: 'y'}]}\n  - {name: b, run: ls}\n",
        )
        .unwrap();
        let [a, b] = [&c.groups[0].commands[0], &c.groups[0].commands[1]];
        assert_eq!(a.replace.iter().map(|r| r.re.as_str()).collect::<Vec<_>>(), ["^Blocking .*\\n", "x"]);
        assert_eq!(b.replace.len(), 1);
        let out = crate::normalise::normalise("  Compiling\nBlocking on lock\nx\n", &a.normalise, &a.replace, &crate::normalise::PathContext::default());
        assert_eq!(out, "  Compiling\ny\n");
        let p = problems(one("g", "group: g\ntitle: G\ndefaults: {fixture: empty, replace: [{re: '(', with: ''}]}\ncommands:\n  - {name: a, run: ls}\n"));
        assert!(p.iter().any(|x| x.contains("a: replace regex")), "{p:?}");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let p = problems(one("g", "group: g\ntitle: G\ncommands:\n  - {name: a, run: ls, fixture: empty, expected: fail}\n"));
        assert!(p[0].contains("unknown field `expected`"), "{p:?}");
        let p = problems(one("g", "group: g\ntitle: G\nextra: 1\ncommands: []\n"));
        assert!(p[0].contains("unknown field `extra`"), "{p:?}");
        let p = problems(one("g", "group: g\ntitle: G\ncommands:\n  - {name: a, run: ls, fixture: empty, normalise: [everything]}\n"));
        assert!(p[0].contains("unknown variant"), "{p:?}");
    }

    #[test]
    fn every_problem_is_reported() {
        let yaml = r#"
group: other
title: ""
commands:
  - {name: "Bad Name", run: "", fixture: nowhere}
  - {name: dup, run: ls}
  - {name: dup, run: ls, fixture: empty, timeout: 0}
  - {name: narrow, run: ls, fixture: empty, compare: stdout}
  - {name: rx, run: ls, fixture: empty, replace: [{re: "(", with: x}]}
  - {name: ph, run: "echo {{OUTSIDE}} {{NOPE}}", fixture: empty}
  - {name: unst, run: ls, fixture: empty, unstable: [a.zip]}
  - {name: unst-up, run: ls, fixture: empty, unstable: [../x], why: w}
"#;
        let p = problems(one("g", yaml));
        let want = [
            "must equal the file name",
            "empty title",
            "Bad Name: name must match",
            "Bad Name: empty run",
            "unknown fixture \"nowhere\"",
            "dup: no fixture",
            "dup: duplicate name",
            "timeout 0",
            "narrow: compare narrower than output needs a `why`",
            "unst: unstable paths need a `why`",
            "unst-up: unstable paths are patterns relative",
            "rx: replace regex",
            "unknown placeholder {{NOPE}}",
            "placeholders are only for expect: denied",
        ];
        for w in want {
            assert!(p.iter().any(|x| x.contains(w)), "missing {w:?} in {p:#?}");
        }
    }

    #[test]
    fn denied_commands_need_an_outside_check() {
        let ok = one("d", "group: d\ntitle: D\ndefaults: {fixture: empty}\ncommands:\n  - {name: w, run: 'touch {{OUTSIDE}}/f', expect: denied, check: 'test ! -e {{OUTSIDE}}/f'}\n  - {name: n, run: 'echo {{TOKEN}} >/dev/tcp/127.0.0.1/{{TCP_PORT}}', expect: denied}\n");
        assert!(ok.is_ok(), "{ok:?}");
        let p = problems(one("d", "group: d\ntitle: D\ndefaults: {fixture: empty}\ncommands:\n  - {name: g, run: 'chmod 1 {{OUTSIDE}}/x', expect: denied, check: 'true', degraded_levels: [standard]}\n  - {name: w, run: 'touch /x', expect: denied}\n  - {name: t, run: 'echo {{TOKEN}}', expect: denied}\n  - {name: e, run: 'x', expect: denied, exit_code: 1, check: 'true'}\n  - {name: s, run: 'x', check: 'true'}\n"));
        for w in ["w: a denied command needs a `check`", "t: {{TOKEN}} without", "e: a denied command must succeed bare", "s: `check` is only for expect: denied", "g: degraded_levels needs a `why`"] {
            assert!(p.iter().any(|x| x.contains(w)), "missing {w:?} in {p:#?}");
        }
    }

    #[test]
    fn names_are_unique_across_groups_and_fixtures_required() {
        let a = ("a".to_string(), "group: a\ntitle: A\ncommands:\n  - {name: x, run: ls, fixture: empty}\n".to_string());
        let b = ("b".to_string(), "group: b\ntitle: B\ncommands:\n  - {name: x, run: ls, fixture: empty}\n".to_string());
        let p = problems(parse_corpus(&[a.clone(), b], fx()));
        assert!(p.iter().any(|x| x.contains("duplicate name (also in a.yaml)")), "{p:?}");
        let p = problems(parse_corpus(&[a], vec!["empty".into()]));
        assert!(p.iter().any(|x| x.contains("fixtures/cargo: required fixture missing")), "{p:?}");
    }

    #[test]
    fn causes_are_checked_against_the_corpus() {
        let c = one("g", "group: g\ntitle: G\ncommands:\n  - {name: a, run: ls, fixture: empty}\n").unwrap();
        let ok = parse_causes("causes:\n  - {name: a, levels: [full], users: [unprivileged], cause: why}\n", &c).unwrap();
        assert_eq!(ok[0].levels, vec!["full"]);
        let LoadError::Invalid(p) = parse_causes("causes:\n  - {name: zz, levels: [max], users: [bob], cause: ''}\n", &c).unwrap_err() else {
            panic!()
        };
        assert_eq!(p.len(), 4, "{p:?}");
    }

    #[test]
    fn the_real_corpus_is_valid_and_large_enough() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat-commands");
        let corpus = match load_corpus(&dir) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let n = corpus.commands().count();
        let succeed = corpus.commands().filter(|c| c.expect == Expect::Succeed).count();
        assert!(succeed >= 500, "only {succeed} must-succeed commands ({n} in all)");
        assert!(corpus.commands().any(|c| c.expect == Expect::Denied));
        for f in REQUIRED_FIXTURES {
            assert!(corpus.commands().any(|c| c.fixture == *f), "no command uses fixture {f}");
        }
        load_causes(&dir, &corpus).unwrap();
    }
}
