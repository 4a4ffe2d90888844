//! The cross-backend conformance table (`conformance/table.yaml`): one operation per row and the
//! decision every backend must reach. This module parses and validates it, expands its
//! placeholders, and evaluates rows against a macOS profile ([`evaluate_macos`]); the Linux
//! backend executes them for real (`tests/conformance.rs`).

use std::path::{Path, PathBuf};

use localgpt_sandbox::macos::eval::{Evaluator, Precedence, Query};
use localgpt_sandbox::windows::eval::{decide, WinOp};
use localgpt_sandbox::windows::WindowsPlan;
use serde::{Deserialize, Serialize};

use crate::CorpusError;

/// The table, embedded.
pub const TABLE: &str = include_str!("../../conformance/table.yaml");

/// An operation of the table.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Read a file's contents (or list a directory).
    Read,
    /// Append to an existing file.
    Write,
    /// Create a file (and its missing parent directories).
    Create,
    /// Run a program.
    Exec,
    /// Remove a file.
    Unlink,
    /// Rename a file or directory (to `PATH.moved`).
    Rename,
    /// Connect: `tcp` (a listener outside) or `unix:PATH`.
    Connect,
    /// Send SIGTERM: `outside` (a process outside the sandbox) or `own-child`.
    Signal,
}

/// The decision a backend must reach.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// The operation takes effect.
    Allow,
    /// It fails inside and nothing changes outside; for a read, the contents are not revealed
    /// (Full level may show a masked credential as an empty file).
    Deny,
    /// Nothing changes outside after the run (a private copy or a review; denied on macOS).
    Protected,
}

/// The mode a row runs in.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `workspace-write` (the default).
    #[default]
    WorkspaceWrite,
    /// `read-only`.
    ReadOnly,
}

impl Mode {
    /// The CLI's name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::WorkspaceWrite => "workspace-write",
            Mode::ReadOnly => "read-only",
        }
    }
}

/// One row.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Unique id.
    pub id: String,
    /// The operation.
    pub op: Op,
    /// Its target (see the table's header).
    pub path: String,
    /// The decision.
    pub expect: Expect,
    /// The mode.
    #[serde(default)]
    pub mode: Mode,
    /// For `write` and `create`: the line written (`{token}` is replaced by a per-run token);
    /// default `WRITTEN-{token}` / `CREATED-{token}`.
    #[serde(default)]
    pub data: Option<String>,
    /// Why.
    pub why: String,
    /// Where Windows' unelevated tier decides otherwise, by design (it does not confine reads
    /// or the network): its decision. The protection table says the same.
    #[serde(default)]
    pub windows: Option<Expect>,
    /// Why Windows decides otherwise (required with `windows`).
    #[serde(default)]
    pub windows_why: Option<String>,
}

impl Row {
    /// The decision Windows must reach.
    #[must_use]
    pub fn windows_expect(&self) -> Expect {
        self.windows.unwrap_or(self.expect)
    }
}

/// The placeholders' values for one world.
#[derive(Clone, Debug)]
pub struct Places {
    /// `{ws}`.
    pub ws: PathBuf,
    /// `{home}`.
    pub home: PathBuf,
    /// `{outside}`.
    pub outside: PathBuf,
    /// `{etc}`.
    pub etc: PathBuf,
}

/// The placeholders a path may use.
pub const PLACEHOLDERS: &[&str] = &["{ws}", "{home}", "{outside}", "{etc}"];

impl Places {
    /// `s` with its placeholders replaced.
    #[must_use]
    pub fn expand(&self, s: &str) -> String {
        s.replace("{ws}", &self.ws.to_string_lossy())
            .replace("{home}", &self.home.to_string_lossy())
            .replace("{outside}", &self.outside.to_string_lossy())
            .replace("{etc}", &self.etc.to_string_lossy())
    }
}

/// Parses and validates the embedded table.
///
/// # Errors
/// [`CorpusError`] for YAML that does not match the schema, a duplicate id, an unknown
/// placeholder, or a target that does not suit its operation.
pub fn load() -> Result<Vec<Row>, CorpusError> {
    parse(TABLE)
}

/// Parses and validates a table.
///
/// # Errors
/// As [`load`].
pub fn parse(text: &str) -> Result<Vec<Row>, CorpusError> {
    let file = "conformance/table.yaml".to_string();
    let rows: Vec<Row> = serde_yaml_ng::from_str(text).map_err(|e| CorpusError::Parse { file: file.clone(), message: e.to_string() })?;
    let bad = |r: &Row, m: String| CorpusError::Invalid { file: file.clone(), vector: r.id.clone(), message: m };
    let mut seen = std::collections::BTreeSet::new();
    for r in &rows {
        if !seen.insert(r.id.clone()) {
            return Err(bad(r, "duplicate id".into()));
        }
        if r.why.trim().is_empty() {
            return Err(bad(r, "empty why".into()));
        }
        let mut rest = r.path.clone();
        for p in PLACEHOLDERS {
            rest = rest.replace(p, "");
        }
        if rest.contains('{') || rest.contains('}') {
            return Err(bad(r, format!("unknown placeholder in {}", r.path)));
        }
        if r.windows.is_some_and(|w| w == r.expect) || r.windows.is_some() != r.windows_why.as_ref().is_some_and(|w| !w.trim().is_empty()) {
            return Err(bad(r, "windows (a decision other than expect) goes with a non-empty windows_why".into()));
        }
        if r.data.is_some() && !matches!(r.op, Op::Write | Op::Create) {
            return Err(bad(r, "data is only for write and create".into()));
        }
        if r.data.as_ref().is_some_and(|d| !d.contains("{token}")) {
            return Err(bad(r, "data must contain {token} (the effect is looked for by it)".into()));
        }
        let ok = match r.op {
            Op::Connect => r.path == "tcp" || r.path.starts_with("unix:/") || r.path.starts_with("unix:{"),
            Op::Signal => r.path == "outside" || r.path == "own-child",
            _ => r.path.starts_with('/') || r.path.starts_with('{'),
        };
        if !ok {
            return Err(bad(r, format!("target {} does not suit {:?}", r.path, r.op)));
        }
    }
    Ok(rows)
}

/// The path a row's operation concerns, on a Mac: resolved through the world's symbolic links
/// (Seatbelt sees resolved paths), or as given where it does not exist.
fn resolved(p: &str) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p))
}

/// The Seatbelt operations a row needs (all must be allowed for it to take effect).
#[must_use]
pub fn macos_queries(row: &Row, places: &Places) -> Vec<Query> {
    let target = places.expand(&row.path);
    let file = |op: &str, p: &Path| Query::file(op, p);
    match row.op {
        Op::Read => vec![file("file-read-data", &resolved(&target))],
        Op::Write => vec![file("file-write-data", &resolved(&target))],
        Op::Create => {
            // The file and every missing directory above it.
            let p = resolved(&target);
            let mut v = vec![file("file-write-create", &p)];
            let mut a = p.parent();
            while let Some(d) = a.filter(|d| !d.exists()) {
                v.push(file("file-write-create", d));
                a = d.parent();
            }
            v
        }
        Op::Exec => {
            let p = resolved(&target);
            vec![file("process-exec", &p), file("file-read-data", &p)]
        }
        Op::Unlink => vec![file("file-write-unlink", &resolved(&target))],
        Op::Rename => {
            let p = resolved(&target);
            let mut dest = p.clone().into_os_string();
            dest.push(".moved");
            vec![file("file-write-unlink", &p), file("file-write-create", Path::new(&dest))]
        }
        Op::Connect => {
            let path = target.strip_prefix("unix:").map(PathBuf::from);
            vec![Query { op: "network-outbound".into(), path, ..Query::default() }]
        }
        Op::Signal => vec![Query { op: "signal".into(), same_sandbox: row.path == "own-child", ..Query::default() }],
    }
}

/// A row's outcome on the macOS profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MacosOutcome {
    /// The row.
    pub id: String,
    /// Every query was allowed (under both precedence readings).
    pub allowed: bool,
    /// The readings disagree for some query (rules of both kinds match).
    pub ambiguous: bool,
    /// The row's expectation is met.
    pub pass: bool,
    /// The first denied query and its rule, for the report.
    pub detail: String,
}

/// Evaluates `rows` against a profile and its parameters. `protected` rows must be denied on a
/// Mac (Seatbelt has no private copies).
///
/// # Errors
/// The evaluator's message when the profile does not parse.
pub fn evaluate_macos(rows: &[&Row], profile: &str, params: &[(String, PathBuf)], places: &Places) -> Result<Vec<MacosOutcome>, String> {
    let ev = Evaluator::new(profile, params).map_err(|e| e.to_string())?;
    Ok(rows
        .iter()
        .map(|row| {
            let mut allowed = true;
            let mut ambiguous = false;
            let mut detail = String::new();
            for q in macos_queries(row, places) {
                let last = ev.decide(&q, Precedence::LastMatch);
                let deny = ev.decide(&q, Precedence::DenyWins);
                ambiguous |= last.allowed != deny.allowed || last.ambiguous;
                if !(last.allowed && deny.allowed) {
                    if allowed {
                        detail = format!("{} {} denied by {}", q.op, q.path.as_ref().map_or(String::new(), |p| p.display().to_string()), last.rule.clone().unwrap_or_else(|| "(deny default)".into()));
                    }
                    allowed = false;
                }
            }
            let pass = !ambiguous && (allowed == (row.expect == Expect::Allow));
            MacosOutcome { id: row.id.clone(), allowed, ambiguous, pass, detail }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_loads_with_enough_rows_of_every_kind() {
        let rows = load().unwrap();
        assert!(rows.len() >= 80, "{}", rows.len());
        for op in [Op::Read, Op::Write, Op::Create, Op::Exec, Op::Unlink, Op::Rename, Op::Connect, Op::Signal] {
            assert!(rows.iter().any(|r| r.op == op), "{op:?}");
        }
        for e in [Expect::Allow, Expect::Deny, Expect::Protected] {
            assert!(rows.iter().any(|r| r.expect == e), "{e:?}");
        }
        assert!(rows.iter().any(|r| r.mode == Mode::ReadOnly));
    }

    #[test]
    fn validation_refuses_bad_rows() {
        let one = |s: &str| parse(s).unwrap_err().to_string();
        assert!(one("- {id: a, op: read, path: /x, expect: allow, why: w}\n- {id: a, op: read, path: /y, expect: allow, why: w}").contains("duplicate"));
        assert!(one("- {id: a, op: read, path: \"{nope}/x\", expect: allow, why: w}").contains("placeholder"));
        assert!(one("- {id: a, op: signal, path: /x, expect: allow, why: w}").contains("does not suit"));
        assert!(one("- {id: a, op: read, path: /x, expect: maybe, why: w}").contains("conformance"));
        assert!(one("- {id: a, op: read, path: /x, expect: allow, why: w, extra: 1}").contains("extra"));
    }
}

/// The Windows model's operations for one row (paths resolved as Windows would: through links).
#[must_use]
pub fn windows_ops(row: &Row, places: &Places) -> Vec<WinOp> {
    let target = places.expand(&row.path);
    match row.op {
        Op::Read => vec![WinOp::Read(resolved(&target))],
        Op::Write => vec![WinOp::Write(resolved(&target))],
        Op::Create => vec![WinOp::Create(resolved(&target))],
        Op::Exec => vec![WinOp::Exec(resolved(&target))],
        Op::Unlink => vec![WinOp::Unlink(resolved(&target))],
        Op::Rename => vec![WinOp::Rename(resolved(&target))],
        Op::Connect => match target.strip_prefix("unix:") {
            Some(p) => vec![WinOp::ConnectUnix(resolved(p))],
            None => vec![WinOp::ConnectTcp],
        },
        Op::Signal => vec![WinOp::Signal { own: row.path == "own-child" }],
    }
}

/// One row's outcome on a Windows plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowsOutcome {
    /// The row.
    pub id: String,
    /// Every operation allowed.
    pub allowed: bool,
    /// Allowed, but reviewed after the run (the change is taken back).
    pub reviewed: bool,
    /// The row's Windows decision holds (`protected` holds when denied or reviewed).
    pub pass: bool,
    /// The first refusal, or how it was allowed.
    pub detail: String,
}

/// Evaluates `rows` against a Windows plan made for the world `places` names, with Windows'
/// decision for each ([`Row::windows_expect`]).
#[must_use]
pub fn evaluate_windows(rows: &[&Row], plan: &WindowsPlan, places: &Places) -> Vec<WindowsOutcome> {
    let exists = |p: &Path| p.symlink_metadata().is_ok();
    rows.iter()
        .map(|row| {
            let mut allowed = true;
            let mut reviewed = false;
            let mut detail = String::new();
            for op in windows_ops(row, places) {
                let d = decide(plan, &op, &exists);
                reviewed |= d.reviewed;
                if !d.allowed && allowed {
                    allowed = false;
                    detail = format!("{op:?}: {}", d.why);
                } else if allowed {
                    detail = d.why;
                }
            }
            let pass = match row.windows_expect() {
                Expect::Allow => allowed && !reviewed,
                Expect::Deny => !allowed,
                Expect::Protected => !allowed || reviewed,
            };
            WindowsOutcome { id: row.id.clone(), allowed, reviewed, pass, detail }
        })
        .collect()
}
