//! The per-user partial results file the runner writes and the report step merges.

use serde::{Deserialize, Serialize};

use crate::compare::Outcome;
use crate::schema::Expect;

/// Result of one command at one level for one user.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CaseRecord {
    /// Command name.
    pub name: String,
    /// Group id.
    pub group: String,
    /// Fixture.
    pub fixture: String,
    /// Expectation.
    pub expect: Expect,
    /// Level (`full`, `standard`).
    pub level: String,
    /// Outcome.
    pub outcome: Outcome,
    /// Why (failures, skips, denials).
    pub cause: String,
    /// Normalised line diff (bare `-`, sandboxed `+`).
    #[serde(default)]
    pub diff: String,
    /// Sandboxed stderr (truncated).
    #[serde(default)]
    pub stderr: String,
    /// Bare exit code.
    pub bare_exit: Option<i32>,
    /// Sandboxed exit code.
    pub sandbox_exit: Option<i32>,
    /// Bare wall time, informational.
    pub bare_ms: u64,
    /// Sandboxed wall time, informational.
    pub sandbox_ms: u64,
}

/// Everything one runner invocation (one user) produced.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct UserResults {
    /// User name.
    pub user: String,
    /// Numeric uid.
    pub uid: u32,
    /// `root` or `unprivileged`.
    pub user_kind: String,
    /// Levels run.
    pub levels: Vec<String>,
    /// The `localgpt` binary used.
    pub localgpt: String,
    /// Parallel jobs.
    pub jobs: usize,
    /// Commands in the corpus (all of them, whatever the filter).
    pub corpus_commands: usize,
    /// Commands selected by the filter.
    pub selected_commands: usize,
    /// Wall time of the whole run, informational.
    pub wall_seconds: f64,
    /// The command line that produced this file.
    pub command_line: String,
    /// One record per command × level.
    pub cases: Vec<CaseRecord>,
}

/// `root` for uid 0, else `unprivileged`.
#[must_use]
pub fn user_kind(uid: u32) -> &'static str {
    if uid == 0 {
        "root"
    } else {
        "unprivileged"
    }
}
