//! Gates and the release report.
//!
//! Contract shared by every suite (security, latency, compat, platform): a suite writes one
//! section file `<report dir>/sections/<name>.json`:
//!
//! ```json
//! {"name": "security", "title": "…", "gate": {"passed": true, "criterion": "0 escapes", "summary": "…"},
//!  "figures": {…}, "markdown": "…section body…"}
//! ```
//!
//! (`gate` may be `null` for an informative section.) [`merge`] reads every section file present
//! and writes `report.json` and `report.md`, one section per gate with its figures and pass/fail.
//! The release fails when any gate failed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The outcome of one vector at one level for one user.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CaseResult {
    /// Vector name.
    pub vector: String,
    /// Family.
    pub family: String,
    /// Source (CVE, advisory, …).
    pub source: String,
    /// What it attempts.
    pub attempts: String,
    /// Level.
    pub level: String,
    /// User label (`root` or the user name).
    pub user: String,
    /// `blocked`, `escaped`, `not_preventable`, `skipped`, `invalid_probe` or `error`.
    pub verdict: String,
    /// Why, with the evidence.
    pub detail: String,
}

impl CaseResult {
    /// Whether the case passes (blocked, not preventable, skipped).
    #[must_use]
    pub fn passed(&self) -> bool {
        matches!(self.verdict.as_str(), "blocked" | "not_preventable" | "skipped")
    }
}

/// A gate's outcome.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Gate {
    /// Pass/fail.
    pub passed: bool,
    /// The success criterion (spec 11).
    pub criterion: String,
    /// One line.
    pub summary: String,
}

/// One section of the release report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Section {
    /// File stem and id.
    pub name: String,
    /// Title.
    pub title: String,
    /// The gate, or `null` for an informative section.
    pub gate: Option<Gate>,
    /// Figures (any JSON).
    pub figures: serde_json::Value,
    /// Markdown body.
    pub markdown: String,
}

/// The default report directory: `$LOCALGPT_REPORT_DIR` or `target/release-report`.
#[must_use]
pub fn report_dir() -> PathBuf {
    std::env::var_os("LOCALGPT_REPORT_DIR").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from("target/release-report"), PathBuf::from)
}

/// Writes `section` to `<dir>/sections/<name>.json`.
///
/// # Errors
/// I/O errors.
pub fn write_section(dir: &Path, section: &Section) -> std::io::Result<PathBuf> {
    let d = dir.join("sections");
    std::fs::create_dir_all(&d)?;
    let p = d.join(format!("{}.json", section.name));
    std::fs::write(&p, serde_json::to_vec_pretty(section).map_err(std::io::Error::other)?)?;
    Ok(p)
}

/// The minimum number of vectors (spec 11.1 asks for 50+; the corpus issue for 60+).
pub const MIN_VECTORS: usize = 60;

/// Per vector: its source, and the verdict per (level, user).
type VectorRow = (String, BTreeMap<(String, String), String>);

/// Most skipped cases per (level, user) column: a skip is a case that proves nothing, so it is
/// counted against the gate, and a run that skips more than this (about a tenth of the corpus)
/// fails. (Here: 14 root-only vectors per level as the unprivileged user, 1 without the x32 ABI.)
pub const MAX_SKIPPED_PER_COLUMN: usize = 16;

/// Builds the security section from the results of one or more runs (one per user). `expected`
/// names the corpus's vectors (empty: not checked): each must have a result in every (level,
/// user) column that appears, and no other vector may.
#[must_use]
pub fn security_section(results: &[CaseResult], expected: &[String]) -> Section {
    let mut by_verdict: BTreeMap<String, usize> = BTreeMap::new();
    let mut columns: BTreeSet<(String, String)> = BTreeSet::new();
    let mut rows: BTreeMap<(String, String), VectorRow> = BTreeMap::new();
    for r in results {
        *by_verdict.entry(r.verdict.clone()).or_insert(0) += 1;
        columns.insert((r.level.clone(), r.user.clone()));
        let e = rows.entry((r.family.clone(), r.vector.clone())).or_insert_with(|| (r.source.clone(), BTreeMap::new()));
        e.1.insert((r.level.clone(), r.user.clone()), r.verdict.clone());
    }
    let count = |k: &str| by_verdict.get(k).copied().unwrap_or(0);
    let vectors = rows.len();
    let users: BTreeSet<&str> = results.iter().map(|r| r.user.as_str()).collect();
    let has_root = users.contains("root");
    let has_unpriv = users.iter().any(|u| *u != "root");
    let levels: BTreeSet<&str> = results.iter().map(|r| r.level.as_str()).collect();
    let escapes: Vec<&CaseResult> = results.iter().filter(|r| r.verdict == "escaped").collect();
    let bad: Vec<&CaseResult> = results.iter().filter(|r| r.verdict == "invalid_probe" || r.verdict == "error").collect();
    let mut problems = Vec::new();
    if !escapes.is_empty() {
        problems.push(format!("{} escape(s)", escapes.len()));
    }
    if count("invalid_probe") > 0 {
        problems.push(format!("{} invalid probe(s)", count("invalid_probe")));
    }
    if count("error") > 0 {
        problems.push(format!("{} error(s)", count("error")));
    }
    if vectors < MIN_VECTORS {
        problems.push(format!("only {vectors} vectors (need {MIN_VECTORS})"));
    }
    if !has_root {
        problems.push("no run as root".into());
    }
    if !has_unpriv {
        problems.push("no run as an unprivileged user".into());
    }
    // Every cell present: a vector missing at one level or for one user is an unproven case.
    let mut missing: Vec<String> = Vec::new();
    for ((_, vector), (_, cells)) in &rows {
        for c in &columns {
            if !cells.contains_key(c) {
                missing.push(format!("{vector} at {} as {}", c.0, c.1));
            }
        }
    }
    let names: BTreeSet<&str> = rows.keys().map(|(_, v)| v.as_str()).collect();
    for e in expected {
        if !names.contains(e.as_str()) {
            missing.push(format!("{e} (no result at all)"));
        }
    }
    let unknown: Vec<&str> = if expected.is_empty() { Vec::new() } else { names.iter().copied().filter(|n| !expected.iter().any(|e| e == n)).collect() };
    if !missing.is_empty() {
        problems.push(format!("{} missing case(s): {}", missing.len(), missing.join(", ")));
    }
    if !unknown.is_empty() {
        problems.push(format!("results for vectors not in the corpus: {}", unknown.join(", ")));
    }
    let mut skipped_per: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in results.iter().filter(|r| r.verdict == "skipped") {
        *skipped_per.entry((r.level.clone(), r.user.clone())).or_insert(0) += 1;
    }
    for ((l, u), n) in &skipped_per {
        if *n > MAX_SKIPPED_PER_COLUMN {
            problems.push(format!("{n} skipped cases at {l} as {u} (at most {MAX_SKIPPED_PER_COLUMN})"));
        }
    }
    let passed = problems.is_empty();
    let summary = if passed {
        format!(
            "0 escapes: {vectors} vectors × {} level(s) × {} user(s): {} blocked, {} not preventable (degraded protection), {} skipped",
            levels.len(),
            users.len(),
            count("blocked"),
            count("not_preventable"),
            count("skipped")
        )
    } else {
        format!("FAILED: {}", problems.join(", "))
    };
    let mut md = String::new();
    let _ = writeln!(md, "{summary}.\n");
    let _ = writeln!(md, "Every vector also ran bare (unsandboxed) and had to escape there; every \"blocked\" was verified from outside (canary files, listeners, the victim process, the process table). \"Not preventable\" means a protection the vector depends on is listed as degraded or off by `localgpt sandbox status` at that level; it is never counted as blocked.\n");
    let _ = writeln!(md, "| verdict | cases |\n|---|---|");
    for (k, n) in &by_verdict {
        let _ = writeln!(md, "| {k} | {n} |");
    }
    let _ = writeln!(md, "\nSkipped cases per level and user (at most {MAX_SKIPPED_PER_COLUMN} each; each with its reason below):\n");
    let _ = writeln!(md, "| level | user | skipped |\n|---|---|---|");
    for c in &columns {
        let _ = writeln!(md, "| {} | {} | {} |", c.0, c.1, skipped_per.get(c).copied().unwrap_or(0));
    }
    if !escapes.is_empty() || !bad.is_empty() {
        let _ = writeln!(md, "\n### Failures\n");
        for r in escapes.iter().chain(bad.iter()) {
            let _ = writeln!(md, "- **{}** at {} as {}: {} — {}", r.vector, r.level, r.user, r.verdict, r.detail.replace('\n', " "));
        }
    }
    let _ = write!(md, "\n### Vectors\n\n| family | vector | source |");
    for (l, u) in &columns {
        let _ = write!(md, " {l} / {u} |");
    }
    let _ = write!(md, "\n|---|---|---|");
    for _ in &columns {
        let _ = write!(md, "---|");
    }
    let _ = writeln!(md);
    for ((family, vector), (source, cells)) in &rows {
        let _ = write!(md, "| {family} | {vector} | {} |", source.replace('|', "/"));
        for c in &columns {
            let _ = write!(md, " {} |", cells.get(c).map_or("—", String::as_str));
        }
        let _ = writeln!(md);
    }
    let skipped: Vec<&CaseResult> = results.iter().filter(|r| r.verdict == "skipped" || r.verdict == "not_preventable").collect();
    if !skipped.is_empty() {
        let _ = writeln!(md, "\n### Skipped and not preventable (reasons)\n");
        let mut seen = BTreeSet::new();
        for r in skipped {
            let line = format!("- {} ({} / {}): {}: {}", r.vector, r.level, r.user, r.verdict, r.detail);
            if seen.insert(line.clone()) {
                let _ = writeln!(md, "{line}");
            }
        }
    }
    Section {
        name: "security".into(),
        title: "Security: escape-vector corpus".into(),
        gate: Some(Gate { passed, criterion: format!("0 escapes against {MIN_VECTORS}+ vectors, every probe valid bare, at every reachable level, as root and as an unprivileged user (spec 11.1)"), summary }),
        figures: serde_json::json!({
            "vectors": vectors,
            "cases": results.len(),
            "verdicts": by_verdict,
            "levels": levels,
            "users": users,
            "escapes": escapes.iter().map(|r| serde_json::json!({"vector": r.vector, "level": r.level, "user": r.user, "detail": r.detail})).collect::<Vec<_>>(),
        }),
        markdown: md,
    }
}

/// Reads results files (each a JSON object with a `results` array, as printed by
/// `localgpt sandbox test --full --json`, or a bare array).
///
/// # Errors
/// Unreadable or malformed files.
pub fn read_results(paths: &[PathBuf]) -> Result<Vec<CaseResult>, String> {
    let mut all = Vec::new();
    for p in paths {
        let text = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        let arr = v.get("results").cloned().unwrap_or(v);
        let mut rs: Vec<CaseResult> = serde_json::from_value(arr).map_err(|e| format!("{}: {e}", p.display()))?;
        all.append(&mut rs);
    }
    Ok(all)
}

/// The sections every release report must have (a section `NAME` or `NAME-…`, e.g. one per
/// user): a suite that did not run cannot pass by absence.
pub const REQUIRED_SECTIONS: [&str; 5] = ["security", "compat", "latency", "platform", "ablation"];

/// The required sections `sections` lacks.
fn missing_sections(sections: &[Section]) -> Vec<&'static str> {
    REQUIRED_SECTIONS.iter().copied().filter(|r| !sections.iter().any(|s| s.name == *r || s.name.starts_with(&format!("{r}-")))).collect()
}

/// Merges every section file of `<dir>/sections` into `report.json` and `report.md`.
/// Returns whether every gate passed and every required section is there (false also when
/// there is no gated section at all).
///
/// # Errors
/// I/O errors or a malformed section file.
pub fn merge(dir: &Path) -> Result<bool, String> {
    let sdir = dir.join("sections");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&sdir)
        .map_err(|e| format!("{}: {e}", sdir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let order = ["security", "compat", "latency", "platform"];
    let mut sections: Vec<Section> = Vec::new();
    for f in &files {
        let text = std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let s: Section = serde_json::from_slice(&text).map_err(|e| format!("{}: not a section: {e}", f.display()))?;
        sections.push(s);
    }
    sections.sort_by_key(|s| (order.iter().position(|o| *o == s.name).unwrap_or(order.len()), s.name.clone()));
    let gated: Vec<&Section> = sections.iter().filter(|s| s.gate.is_some()).collect();
    let missing = missing_sections(&sections);
    let all_passed = !gated.is_empty() && gated.iter().all(|s| s.gate.as_ref().is_some_and(|g| g.passed)) && missing.is_empty();
    let mut md = String::from("# LocalGPT sandbox — release report\n\n");
    let _ = writeln!(md, "Overall: **{}**\n", if all_passed { "PASS" } else { "FAIL" });
    if !missing.is_empty() {
        let _ = writeln!(md, "Missing sections (their suite did not run or wrote nothing): **{}**\n", missing.join(", "));
    }
    let _ = writeln!(md, "| gate | result | criterion | summary |\n|---|---|---|---|");
    for s in &sections {
        match &s.gate {
            Some(g) => {
                let _ = writeln!(md, "| {} | {} | {} | {} |", s.title, if g.passed { "✅ pass" } else { "❌ FAIL" }, g.criterion, g.summary.replace('|', "/"));
            }
            None => {
                let _ = writeln!(md, "| {} | (informative) | — | — |", s.title);
            }
        }
    }
    for s in &sections {
        let _ = writeln!(md, "\n## {}\n", s.title);
        if let Some(g) = &s.gate {
            let _ = writeln!(md, "Gate: **{}** — {}\n", if g.passed { "pass" } else { "FAIL" }, g.criterion);
        }
        let _ = writeln!(md, "Figures:\n\n```json\n{}\n```\n", serde_json::to_string_pretty(&s.figures).unwrap_or_default());
        md.push_str(&s.markdown);
        md.push('\n');
    }
    let json = serde_json::json!({
        "passed": all_passed,
        "missing_sections": missing,
        "gates": sections.iter().filter_map(|s| s.gate.as_ref().map(|g| serde_json::json!({"name": s.name, "title": s.title, "passed": g.passed, "criterion": g.criterion, "summary": g.summary}))).collect::<Vec<_>>(),
        "sections": sections,
    });
    std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&json).unwrap_or_default()).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("report.md"), md).map_err(|e| e.to_string())?;
    Ok(all_passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(vector: &str, level: &str, user: &str, verdict: &str) -> CaseResult {
        CaseResult {
            vector: vector.into(),
            family: "network".into(),
            source: "CVE-0000-0000".into(),
            attempts: "x".into(),
            level: level.into(),
            user: user.into(),
            verdict: verdict.into(),
            detail: "d".into(),
        }
    }

    fn many(verdict_of: impl Fn(usize) -> &'static str) -> Vec<CaseResult> {
        let mut v = Vec::new();
        for i in 0..MIN_VECTORS {
            for u in ["root", "lgtest"] {
                v.push(r(&format!("v{i}"), "standard", u, verdict_of(i)));
            }
        }
        v
    }

    #[test]
    fn gate_passes_only_with_zero_escapes_both_users_and_enough_vectors() {
        let s = security_section(&many(|_| "blocked"), &[]);
        assert!(s.gate.as_ref().unwrap().passed, "{:?}", s.gate);
        let s = security_section(&many(|i| if i == 3 { "escaped" } else { "blocked" }), &[]);
        assert!(!s.gate.as_ref().unwrap().passed);
        assert!(s.markdown.contains("Failures"));
        let s = security_section(&many(|i| if i == 3 { "invalid_probe" } else { "not_preventable" }), &[]);
        assert!(!s.gate.as_ref().unwrap().passed);
        let root_only: Vec<_> = many(|_| "blocked").into_iter().filter(|x| x.user == "root").collect();
        assert!(!security_section(&root_only, &[]).gate.unwrap().passed);
        let few: Vec<_> = many(|_| "blocked").into_iter().filter(|x| x.vector.len() < 3).collect();
        assert!(!security_section(&few, &[]).gate.unwrap().passed);
    }

    #[test]
    fn gate_needs_every_cell_the_whole_corpus_and_bounded_skips() {
        // One case missing (v5 as lgtest): the gate fails and names it.
        let holed: Vec<_> = many(|_| "blocked").into_iter().filter(|x| !(x.vector == "v5" && x.user == "lgtest")).collect();
        let g = security_section(&holed, &[]).gate.unwrap();
        assert!(!g.passed && g.summary.contains("v5 at standard as lgtest"), "{}", g.summary);
        // A corpus vector with no result, and a result for a vector the corpus does not have.
        let names: Vec<String> = (0..MIN_VECTORS).map(|i| format!("v{i}")).chain(["extra".to_string()]).collect();
        let g = security_section(&many(|_| "blocked"), &names).gate.unwrap();
        assert!(!g.passed && g.summary.contains("extra (no result at all)"), "{}", g.summary);
        let g = security_section(&many(|_| "blocked"), &names[1..MIN_VECTORS]).gate.unwrap();
        assert!(!g.passed && g.summary.contains("not in the corpus: v0"), "{}", g.summary);
        assert!(security_section(&many(|_| "blocked"), &names[..MIN_VECTORS]).gate.unwrap().passed);
        // Skips are counted: at most MAX_SKIPPED_PER_COLUMN per level and user.
        let ok = security_section(&many(|i| if i < MAX_SKIPPED_PER_COLUMN { "skipped" } else { "blocked" }), &[]);
        assert!(ok.gate.unwrap().passed);
        let g = security_section(&many(|i| if i <= MAX_SKIPPED_PER_COLUMN { "skipped" } else { "blocked" }), &[]).gate.unwrap();
        assert!(!g.passed && g.summary.contains("skipped cases"), "{}", g.summary);
    }

    #[test]
    fn merge_takes_any_section_and_fails_on_a_failed_gate() {
        let d = std::env::temp_dir().join(format!("lg-report-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        write_section(&d, &security_section(&many(|_| "blocked"), &[])).unwrap();
        let latency = Section {
            name: "latency".into(),
            title: "Latency".into(),
            gate: Some(Gate { passed: true, criterion: "<50ms p99".into(), summary: "p99 12ms".into() }),
            figures: serde_json::json!({"p99_ms": 12}),
            markdown: "lat".into(),
        };
        write_section(&d, &latency).unwrap();
        // Without the other required sections the report fails, and says which are missing.
        assert!(!merge(&d).unwrap());
        let j: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("report.json")).unwrap()).unwrap();
        assert_eq!(j["missing_sections"], serde_json::json!(["compat", "platform", "ablation"]));
        for name in ["compat", "platform", "ablation-root"] {
            write_section(&d, &Section { name: name.into(), title: name.into(), ..latency.clone() }).unwrap();
        }
        assert!(merge(&d).unwrap());
        let md = std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(md.contains("Latency") && md.contains("Security") && md.contains("v1"));
        let failing = Section { gate: Some(Gate { passed: false, criterion: "c".into(), summary: "s".into() }), name: "compat".into(), title: "compat".into(), ..latency };
        write_section(&d, &failing).unwrap();
        assert!(!merge(&d).unwrap());
        let j: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("report.json")).unwrap()).unwrap();
        assert_eq!(j["passed"], false);
        assert_eq!(j["gates"].as_array().unwrap().len(), 5);
        let _ = std::fs::remove_dir_all(&d);
    }
}
