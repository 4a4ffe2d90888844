//! Merging per-user results into the release-report section `compat` (pure) and writing it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::compare::Outcome;
use crate::load::KnownCause;
use crate::results::{CaseRecord, UserResults};
use crate::schema::Expect;

/// Gate thresholds, in percent.
pub const GATE_FAIL_BELOW: f64 = 95.0;
/// Below this the gate fails at Full and Standard (the levels users get by default: Full where
/// user namespaces work, Standard where they are restricted, as on Ubuntu); elsewhere it warns.
pub const GATE_WARN_BELOW: f64 = 99.0;
/// At most this many must-succeed commands skipped per level and user (a tool missing for that
/// user): skips leave the pass rate's denominator, so they are bounded, counted and listed.
pub const MAX_SKIPPED_PER_COLUMN: usize = 64;
/// The gate's criterion, as printed.
pub const CRITERION: &str = "≥ 99 % at Full and at Standard and ≥ 95 % at other levels, per level × user";

/// One row of the per level × user table.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct LevelUser {
    /// Level.
    pub level: String,
    /// User name.
    pub user: String,
    /// `root` or `unprivileged`.
    pub user_kind: String,
    /// Must-succeed commands.
    pub total: usize,
    /// Passed.
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
    /// Must-be-denied commands correctly denied.
    pub denied_ok: usize,
    /// Must-be-denied commands not denied (or whose probe proved nothing).
    pub denied_failed: usize,
    /// Must-be-denied commands not denied at a level where that protection is documented as
    /// degraded.
    pub denied_degraded: usize,
    /// passed / (total − skipped), percent, two decimals.
    pub pass_rate: f64,
}

/// A listed failure.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct FailureEntry {
    /// Command.
    pub name: String,
    /// Group.
    pub group: String,
    /// Level.
    pub level: String,
    /// User.
    pub user: String,
    /// Measured cause, plus the known explanation from `causes.yaml` when there is one.
    pub cause: String,
    /// The known explanation alone.
    pub known_cause: Option<String>,
    /// True when fixing it would weaken a protection.
    pub security_tradeoff: bool,
    /// Normalised diff.
    pub diff: String,
    /// Sandboxed stderr.
    pub stderr: String,
}

/// A listed skip.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct SkipEntry {
    /// Command.
    pub name: String,
    /// Group.
    pub group: String,
    /// Level.
    pub level: String,
    /// User.
    pub user: String,
    /// Reason.
    pub reason: String,
}

/// Gate block.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Gate {
    /// Passed.
    pub passed: bool,
    /// Criterion text.
    pub criterion: String,
    /// One-paragraph summary.
    pub summary: String,
}

/// Figures block.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Figures {
    /// Per level × user.
    pub per_level_user: Vec<LevelUser>,
    /// Per group × level × user: `[group, level, user, passed, failed, skipped]`.
    pub per_group: Vec<GroupRow>,
    /// Every failure.
    pub failures: Vec<FailureEntry>,
    /// Every skip.
    pub skips: Vec<SkipEntry>,
    /// Every must-be-denied command's result.
    pub denials: Vec<SkipEntry>,
    /// Denials that failed (security problems; they fail the gate).
    pub denial_failures: Vec<FailureEntry>,
    /// Number of commands in the corpus, must-succeed and must-be-denied.
    pub corpus_succeed: usize,
    /// Must-be-denied commands in the corpus.
    pub corpus_denied: usize,
    /// Commands used to produce these figures.
    pub commands: Vec<String>,
    /// Wall time per user run, informational.
    pub wall_seconds: BTreeMap<String, f64>,
}

/// One row of the per-group table.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct GroupRow {
    /// Group.
    pub group: String,
    /// Level.
    pub level: String,
    /// User.
    pub user: String,
    /// Passed (or correctly denied).
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
}

/// The release-report section.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Section {
    /// `compat`.
    pub name: String,
    /// `Compatibility`.
    pub title: String,
    /// Gate.
    pub gate: Gate,
    /// Figures.
    pub figures: Figures,
    /// Markdown rendering.
    pub markdown: String,
}

fn known_for<'a>(causes: &'a [KnownCause], r: &CaseRecord, user_kind: &str) -> Option<&'a KnownCause> {
    causes.iter().find(|c| {
        c.name == r.name
            && (c.levels.is_empty() || c.levels.contains(&r.level))
            && (c.users.is_empty() || c.users.iter().any(|u| u == user_kind))
    })
}

/// passed / denom in percent, rounded down to two decimals (0 when denom is 0).
#[must_use]
pub fn rate(passed: usize, denom: usize) -> f64 {
    if denom == 0 {
        return 0.0;
    }
    ((passed as f64) * 10000.0 / (denom as f64)).floor() / 100.0
}

fn one_line(s: &str, max: usize) -> String {
    let s = s.replace('\n', " ⏎ ").replace('|', "\\|");
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

/// Builds the section from every user's results. `expected_users` lists user kinds that must
/// be present (a missing one fails the gate).
#[must_use]
pub fn build_section(all: &[UserResults], causes: &[KnownCause], expected_users: &[&str]) -> Section {
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut denial_failures = Vec::new();
    let mut skips = Vec::new();
    let mut denials = Vec::new();
    let mut groups: BTreeMap<(String, String, String), [usize; 3]> = BTreeMap::new();
    let mut commands = Vec::new();
    let mut wall = BTreeMap::new();
    let (mut corpus_succeed, mut corpus_denied) = (0, 0);
    let mut size_problems = Vec::new();
    for u in all {
        // The gate is over the whole corpus: a filtered run, or a level with fewer results than
        // commands, is a failure (a command that vanished cannot pass by not being counted).
        if u.selected_commands != u.corpus_commands {
            size_problems.push(format!("{}: a filtered run ({} of {} commands)", u.user, u.selected_commands, u.corpus_commands));
        }
        for level in &u.levels {
            let n = u.cases.iter().filter(|r| r.level == *level).count();
            if n != u.corpus_commands {
                size_problems.push(format!("{level} as {}: {n} results for {} commands in the corpus", u.user, u.corpus_commands));
            }
        }
        commands.push(u.command_line.clone());
        wall.insert(u.user.clone(), u.wall_seconds);
        for level in &u.levels {
            let mut row = LevelUser {
                level: level.clone(),
                user: u.user.clone(),
                user_kind: u.user_kind.clone(),
                total: 0,
                passed: 0,
                failed: 0,
                skipped: 0,
                denied_ok: 0,
                denied_failed: 0,
                denied_degraded: 0,
                pass_rate: 0.0,
            };
            for r in u.cases.iter().filter(|r| r.level == *level) {
                let g = groups.entry((r.group.clone(), level.clone(), u.user.clone())).or_default();
                let known = known_for(causes, r, &u.user_kind);
                let entry = || FailureEntry {
                    name: r.name.clone(),
                    group: r.group.clone(),
                    level: level.clone(),
                    user: u.user.clone(),
                    cause: match known {
                        Some(k) => format!("{} — {}", r.cause, k.cause),
                        None => r.cause.clone(),
                    },
                    known_cause: known.map(|k| k.cause.clone()),
                    security_tradeoff: known.is_some_and(|k| k.security_tradeoff),
                    diff: r.diff.clone(),
                    stderr: r.stderr.clone(),
                };
                let skip = || SkipEntry { name: r.name.clone(), group: r.group.clone(), level: level.clone(), user: u.user.clone(), reason: r.cause.clone() };
                if r.expect == Expect::Succeed {
                    row.total += 1;
                }
                match r.outcome {
                    Outcome::Pass => {
                        row.passed += 1;
                        g[0] += 1;
                    }
                    Outcome::Fail => {
                        row.failed += 1;
                        g[1] += 1;
                        failures.push(entry());
                    }
                    Outcome::Skip => {
                        if r.expect == Expect::Succeed {
                            row.skipped += 1;
                        } else {
                            // A must-be-denied command that did not run proves nothing: fail.
                            denial_failures.push(entry());
                            row.denied_failed += 1;
                        }
                        g[2] += 1;
                        skips.push(skip());
                    }
                    Outcome::DeniedOk => {
                        row.denied_ok += 1;
                        g[0] += 1;
                        denials.push(skip());
                    }
                    Outcome::DeniedDegraded => {
                        row.denied_degraded += 1;
                        g[0] += 1;
                        denials.push(skip());
                    }
                    Outcome::DeniedFail => {
                        row.denied_failed += 1;
                        g[1] += 1;
                        denial_failures.push(entry());
                        denials.push(skip());
                    }
                }
            }
            row.pass_rate = rate(row.passed, row.total - row.skipped);
            rows.push(row);
        }
        corpus_succeed = corpus_succeed.max(u.cases.iter().filter(|c| c.expect == Expect::Succeed).count() / u.levels.len().max(1));
        corpus_denied = corpus_denied.max(u.cases.iter().filter(|c| c.expect == Expect::Denied).count() / u.levels.len().max(1));
    }
    // gate
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    for kind in expected_users {
        if !all.iter().any(|u| u.user_kind == *kind) {
            problems.push(format!("no results for a {kind} user"));
        }
    }
    if rows.is_empty() {
        problems.push("no results at all".into());
    }
    problems.extend(size_problems);
    for r in &rows {
        let who = format!("{} as {}", r.level, r.user);
        if r.total == r.skipped {
            problems.push(format!("{who}: every command skipped"));
        } else if r.pass_rate < GATE_FAIL_BELOW {
            problems.push(format!("{who}: {:.2} % < {GATE_FAIL_BELOW} %", r.pass_rate));
        } else if r.pass_rate < GATE_WARN_BELOW && (r.level == "full" || r.level == "standard") {
            problems.push(format!("{who}: {:.2} % < {GATE_WARN_BELOW} % (required at Full and Standard)", r.pass_rate));
        } else if r.pass_rate < GATE_WARN_BELOW {
            warnings.push(format!("{who}: {:.2} % < {GATE_WARN_BELOW} % goal", r.pass_rate));
        }
        if r.denied_failed > 0 {
            problems.push(format!("{who}: {} must-be-denied command(s) not denied or not run", r.denied_failed));
        }
        if r.skipped > MAX_SKIPPED_PER_COLUMN {
            problems.push(format!("{who}: {} commands skipped (at most {MAX_SKIPPED_PER_COLUMN})", r.skipped));
        }
    }
    let rates: Vec<String> = rows.iter().map(|r| format!("{} × {} {:.2} %", r.level, r.user, r.pass_rate)).collect();
    let passed = problems.is_empty();
    let mut summary = format!(
        "{} must-succeed + {} must-be-denied commands; pass rates: {}.",
        corpus_succeed,
        corpus_denied,
        if rates.is_empty() { "none".to_string() } else { rates.join(", ") }
    );
    if !problems.is_empty() {
        let _ = write!(summary, " FAIL: {}.", problems.join("; "));
    }
    if !warnings.is_empty() {
        let _ = write!(summary, " WARN: {}.", warnings.join("; "));
    }
    let per_group: Vec<GroupRow> = groups
        .into_iter()
        .map(|((group, level, user), c)| GroupRow { group, level, user, passed: c[0], failed: c[1], skipped: c[2] })
        .collect();
    let figures = Figures {
        per_level_user: rows,
        per_group,
        failures,
        skips,
        denials,
        denial_failures,
        corpus_succeed,
        corpus_denied,
        commands,
        wall_seconds: wall,
    };
    let gate = Gate { passed, criterion: CRITERION.to_string(), summary };
    let markdown = render_markdown(&gate, &figures, &warnings);
    Section { name: "compat".into(), title: "Compatibility".into(), gate, figures, markdown }
}

fn render_markdown(gate: &Gate, f: &Figures, warnings: &[String]) -> String {
    let mut m = String::new();
    let verdict = if !gate.passed {
        "**FAIL**"
    } else if warnings.is_empty() {
        "**PASS**"
    } else {
        "**PASS (warning: below the 99 % goal)**"
    };
    let _ = writeln!(m, "Compat gate ({}): {verdict}. {}\n", gate.criterion, gate.summary);
    let _ = writeln!(m, "Every command runs bare and sandboxed (default mode, no config) in identical fresh fixtures; exit code and normalised stdout + stderr are compared. Pass rate = passed / (total − skipped).\n");
    let _ = writeln!(m, "| level | user | total | passed | failed | skipped | pass rate | denied ok | denied: known degraded | denial failures |");
    let _ = writeln!(m, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &f.per_level_user {
        let _ = writeln!(
            m,
            "| {} | {} ({}) | {} | {} | {} | {} | **{:.2} %** | {} | {} | {} |",
            r.level, r.user, r.user_kind, r.total, r.passed, r.failed, r.skipped, r.pass_rate, r.denied_ok, r.denied_degraded, r.denied_failed
        );
    }
    // per group: one column per level × user
    let cols: Vec<(String, String)> = f.per_level_user.iter().map(|r| (r.level.clone(), r.user.clone())).collect();
    let mut by_group: BTreeMap<&str, BTreeMap<(String, String), &GroupRow>> = BTreeMap::new();
    for g in &f.per_group {
        by_group.entry(g.group.as_str()).or_default().insert((g.level.clone(), g.user.clone()), g);
    }
    let _ = writeln!(m, "\nPer group (passed / failed / skipped):\n");
    let _ = write!(m, "| group |");
    for (l, u) in &cols {
        let _ = write!(m, " {l} × {u} |");
    }
    let _ = write!(m, "\n|---|");
    for _ in &cols {
        let _ = write!(m, "---|");
    }
    let _ = writeln!(m);
    for (g, cells) in &by_group {
        let _ = write!(m, "| {g} |");
        for c in &cols {
            match cells.get(c) {
                Some(r) => {
                    let _ = write!(m, " {} / {} / {} |", r.passed, r.failed, r.skipped);
                }
                None => {
                    let _ = write!(m, " – |");
                }
            }
        }
        let _ = writeln!(m);
    }
    let _ = writeln!(m, "\n### Failures ({})\n", f.failures.len());
    if f.failures.is_empty() {
        let _ = writeln!(m, "None.");
    } else {
        let _ = writeln!(m, "| command | group | level | user | cause |");
        let _ = writeln!(m, "|---|---|---|---|---|");
        for x in &f.failures {
            let tag = if x.security_tradeoff { " **(not fixable without weakening a protection)**" } else { "" };
            let _ = writeln!(m, "| `{}` | {} | {} | {} | {}{tag} |", x.name, x.group, x.level, x.user, one_line(&x.cause, 400));
        }
    }
    if !f.denial_failures.is_empty() {
        let _ = writeln!(m, "\n### Must-be-denied commands NOT denied ({})\n", f.denial_failures.len());
        for x in &f.denial_failures {
            let _ = writeln!(m, "- `{}` at {} as {}: {}", x.name, x.level, x.user, one_line(&x.cause, 400));
        }
    }
    let degraded: Vec<&SkipEntry> = f.denials.iter().filter(|d| d.reason.starts_with("not denied at this level, as documented")).collect();
    let denied_ok = f.denials.len() - f.denial_failures.len() - degraded.len();
    let _ = writeln!(m, "\nMust-be-denied commands (network, writes outside the workspace): {denied_ok} of {} runs correctly denied, counted separately from the pass rate.", f.denials.len());
    if !degraded.is_empty() {
        let _ = writeln!(m, "\nNot denied where the protection is documented as degraded ({}):\n", degraded.len());
        for d in degraded {
            let _ = writeln!(m, "- `{}` at {} as {}: {}", d.name, d.level, d.user, one_line(&d.reason, 300));
        }
    }
    let _ = writeln!(m, "\n### Skips ({})\n", f.skips.len());
    if f.skips.is_empty() {
        let _ = writeln!(m, "None.");
    } else {
        let mut by_reason: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
        for s in &f.skips {
            by_reason.entry((s.user.as_str(), s.reason.as_str())).or_default().push(s.name.as_str());
        }
        for ((user, reason), names) in by_reason {
            let mut names = names;
            names.sort_unstable();
            names.dedup();
            let _ = writeln!(m, "- {user}: {reason} — {} command(s) × every level: {}", names.len(), names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "));
        }
    }
    let _ = writeln!(m, "\nReproduce everything (installs the tools, runs as root and as lgtest, merges): `bash ci/compat`. Produced by:");
    for c in &f.commands {
        let _ = writeln!(m, "- `{c}`");
    }
    m
}

/// Writes `sections/compat.json` and the raw `compat.json` (every user's results) under `dir`
/// (normally `target/release-report`), plus `compat.md`.
///
/// # Errors
/// I/O errors.
pub fn write_section(dir: &Path, section: &Section, all: &[UserResults]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("sections"))?;
    std::fs::write(dir.join("sections").join("compat.json"), to_json(section))?;
    std::fs::write(dir.join("compat.json"), to_json(&all))?;
    std::fs::write(dir.join("compat.md"), format!("## {}\n\n{}", section.title, section.markdown))?;
    Ok(())
}

fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, level: &str, outcome: Outcome, expect: Expect) -> CaseRecord {
        CaseRecord {
            name: name.into(),
            group: "g".into(),
            fixture: "empty".into(),
            expect,
            level: level.into(),
            outcome,
            cause: format!("cause of {name}"),
            diff: String::new(),
            stderr: String::new(),
            bare_exit: Some(0),
            sandbox_exit: Some(0),
            bare_ms: 1,
            sandbox_ms: 1,
        }
    }

    fn user(name: &str, uid: u32, cases: Vec<CaseRecord>) -> UserResults {
        UserResults {
            user: name.into(),
            uid,
            user_kind: crate::results::user_kind(uid).into(),
            levels: vec!["full".into()],
            localgpt: "x".into(),
            jobs: 2,
            corpus_commands: cases.len(),
            selected_commands: cases.len(),
            wall_seconds: 1.0,
            command_line: format!("localgpt-compat run # {name}"),
            cases,
        }
    }

    fn many(pass: usize, fail: usize, skip: usize) -> Vec<CaseRecord> {
        let mut v = Vec::new();
        for i in 0..pass {
            v.push(rec(&format!("p{i}"), "full", Outcome::Pass, Expect::Succeed));
        }
        for i in 0..fail {
            v.push(rec(&format!("f{i}"), "full", Outcome::Fail, Expect::Succeed));
        }
        for i in 0..skip {
            v.push(rec(&format!("s{i}"), "full", Outcome::Skip, Expect::Succeed));
        }
        v.push(rec("d", "full", Outcome::DeniedOk, Expect::Denied));
        v
    }

    #[test]
    fn pass_rate_excludes_skips_and_denials() {
        let s = build_section(&[user("root", 0, many(98, 1, 10)), user("lgtest", 1001, many(99, 0, 0))], &[], &["root", "unprivileged"]);
        let r = &s.figures.per_level_user[0];
        assert_eq!((r.total, r.passed, r.failed, r.skipped, r.denied_ok), (109, 98, 1, 10, 1));
        assert_eq!(r.pass_rate, 98.98);
        // Below 99 % at Full or Standard fails the gate (at other levels it only warns).
        assert!(!s.gate.passed && s.gate.summary.contains("required at Full and Standard"), "{}", s.gate.summary);
        let standard: Vec<CaseRecord> = many(98, 1, 10).into_iter().map(|mut c| {
            c.level = "standard".into();
            c
        }).collect();
        let mut u = user("root", 0, standard);
        u.levels = vec!["standard".into()];
        let s2 = build_section(&[u, user("lgtest", 1001, many(99, 0, 0))], &[], &["root", "unprivileged"]);
        assert!(!s2.gate.passed && s2.gate.summary.contains("standard as root: 98.98 %"), "{}", s2.gate.summary);
        let minimal: Vec<CaseRecord> = many(98, 1, 10).into_iter().map(|mut c| {
            c.level = "minimal".into();
            c
        }).collect();
        let mut u = user("root", 0, minimal);
        u.levels = vec!["minimal".into()];
        let s3 = build_section(&[u, user("lgtest", 1001, many(99, 0, 0))], &[], &["root", "unprivileged"]);
        assert!(s3.gate.passed && s3.gate.summary.contains("WARN"), "{}", s3.gate.summary);
        assert_eq!(s.figures.per_level_user[1].pass_rate, 100.0);
        assert_eq!(s.figures.failures.len(), 1);
        assert_eq!(s.figures.skips.len(), 10);
        assert!(s.markdown.contains("| full | root (root) | 109 | 98 | 1 | 10 | **98.98 %** | 1 | 0 | 0 |"), "{}", s.markdown);
    }

    #[test]
    fn gate_fails_below_95_missing_user_or_failed_denial() {
        let s = build_section(&[user("root", 0, many(94, 6, 0))], &[], &["root"]);
        assert!(!s.gate.passed);
        assert!(s.gate.summary.contains("94.00 % < 95"), "{}", s.gate.summary);
        let s = build_section(&[user("root", 0, many(100, 0, 0))], &[], &["root", "unprivileged"]);
        assert!(!s.gate.passed && s.gate.summary.contains("no results for a unprivileged user"));
        let mut c = many(100, 0, 0);
        c.push(rec("leak", "full", Outcome::DeniedFail, Expect::Denied));
        let s = build_section(&[user("root", 0, c)], &[], &["root"]);
        assert!(!s.gate.passed && s.figures.denial_failures.len() == 1);
        assert!(s.markdown.contains("NOT denied"));
        let s = build_section(&[user("root", 0, many(0, 0, 5))], &[], &["root"]);
        assert!(!s.gate.passed && s.gate.summary.contains("every command skipped"));
    }

    #[test]
    fn gate_counts_skips_denied_skips_and_the_corpus_size() {
        // Too many skips in one column.
        let s = build_section(&[user("root", 0, many(1000, 0, MAX_SKIPPED_PER_COLUMN + 1))], &[], &["root"]);
        assert!(!s.gate.passed && s.gate.summary.contains("commands skipped (at most"), "{}", s.gate.summary);
        // A must-be-denied command skipped (its tool missing) fails.
        let mut c = many(100, 0, 0);
        c.push(rec("deny-node", "full", Outcome::Skip, Expect::Denied));
        let s = build_section(&[user("root", 0, c)], &[], &["root"]);
        assert!(!s.gate.passed && s.gate.summary.contains("not denied or not run"), "{}", s.gate.summary);
        // Fewer results than the corpus has commands, or a filtered run.
        let mut u = user("root", 0, many(100, 0, 0));
        u.corpus_commands += 3;
        let s = build_section(&[u], &[], &["root"]);
        assert!(!s.gate.passed && s.gate.summary.contains("results for 104 commands"), "{}", s.gate.summary);
        let mut u = user("root", 0, many(100, 0, 0));
        u.selected_commands -= 1;
        let s = build_section(&[u], &[], &["root"]);
        assert!(!s.gate.passed && s.gate.summary.contains("a filtered run"), "{}", s.gate.summary);
    }

    #[test]
    fn known_causes_annotate_but_never_pass() {
        let causes = vec![KnownCause {
            name: "f0".into(),
            levels: vec!["full".into()],
            users: vec!["unprivileged".into()],
            cause: "uid mapping".into(),
            security_tradeoff: true,
        }];
        let s = build_section(&[user("root", 0, many(99, 1, 0)), user("lgtest", 1001, many(99, 1, 0))], &causes, &[]);
        assert_eq!(s.figures.failures.len(), 2);
        let root = s.figures.failures.iter().find(|f| f.user == "root").unwrap();
        let lg = s.figures.failures.iter().find(|f| f.user == "lgtest").unwrap();
        assert!(root.known_cause.is_none());
        assert_eq!(lg.known_cause.as_deref(), Some("uid mapping"));
        assert!(lg.cause.ends_with("— uid mapping") && lg.security_tradeoff);
        assert_eq!(s.figures.per_level_user[1].failed, 1);
    }
}
