//! Judging one command at one level: the bare run against the sandboxed run. Pure.

use serde::{Deserialize, Serialize};

use crate::normalise::{diff_lines, normalise, PathContext};
use crate::schema::{Command, Compare, Expect};
use crate::tree;

/// What one process run produced (bare, or sandboxed as reported by `--json`).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOutput {
    /// Exit code (128+N for a signal), `None` when the run could not be made.
    pub exit_code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// The run hit its timeout.
    pub timed_out: bool,
    /// Milliseconds of wall time (informational only).
    pub duration_ms: u64,
    /// The level the sandbox reported (sandboxed runs).
    pub level: Option<String>,
    /// The run could not be made or its report could not be read.
    pub error: Option<String>,
    /// Sandboxed runs: paths (relative to the fixture's copy) the sandbox held back for the
    /// user's review (`protected_review.pending`), left out of the workspace comparison.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
}

/// Outcome of one command at one level for one user.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Same exit code and equivalent output.
    Pass,
    /// Differs (or a run failed to happen).
    Fail,
    /// A required program is missing, or the level is unavailable.
    Skip,
    /// A must-be-denied command was denied (effect absent outside).
    DeniedOk,
    /// A must-be-denied command was not denied, or its probe proved nothing.
    DeniedFail,
    /// A must-be-denied command was not denied at a level where that protection is documented
    /// as degraded (reported, not gating).
    DeniedDegraded,
}

/// The verdict with its explanation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Outcome.
    pub outcome: Outcome,
    /// Why (empty for a pass).
    pub cause: String,
    /// Line diff of the normalised texts that differ (bare `-`, sandboxed `+`).
    pub diff: String,
}

/// For denied commands: whether the probe's effect was seen from outside after a run.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectSeen {
    /// The outside effect was present.
    pub present: bool,
}

const DIFF_LINES: usize = 40;

/// Notable phrases in a sandboxed stderr, quoted in the cause so that a reader sees the denial.
const DENIAL_MARKERS: &[&str] = &[
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
    "Function not implemented",
    "Bad file descriptor",
    "No such device",
    "Resource temporarily unavailable",
    "Too many open files",
    "File too large",
];

fn first_marker_line(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find(|l| DENIAL_MARKERS.iter().any(|m| l.contains(m)))
        .map(|l| l.chars().take(200).collect())
}

fn exit_text(o: &RunOutput) -> String {
    match (o.exit_code, o.timed_out) {
        (_, true) => "timed out".into(),
        (Some(c), false) => c.to_string(),
        (None, false) => "none".into(),
    }
}

/// Judges a must-succeed command: `bare` and `sandboxed` outputs, each with its own path
/// context (the workspace is the same path in both; the cache scratch is not).
#[must_use]
pub fn judge_succeed(cmd: &Command, bare: &RunOutput, bare_ctx: &PathContext, sbx: &RunOutput, sbx_ctx: &PathContext) -> Verdict {
    let fail = |cause: String, diff: String| Verdict { outcome: Outcome::Fail, cause, diff };
    if let Some(e) = &bare.error {
        return fail(format!("bare run could not be made: {e}"), String::new());
    }
    if bare.timed_out || bare.exit_code != Some(cmd.exit_code) {
        return fail(
            format!("bare run exited {} but the corpus declares {}: corpus or environment problem", exit_text(bare), cmd.exit_code),
            diff_lines("", &bare.stderr, DIFF_LINES),
        );
    }
    if let Some(e) = &sbx.error {
        return fail(format!("sandbox error: {e}"), String::new());
    }
    if sbx.timed_out {
        return fail(format!("timed out in the sandbox after {} s (bare took {} ms)", cmd.timeout, bare.duration_ms), String::new());
    }
    let norm = |t: &str, ctx: &PathContext| normalise(t, &cmd.normalise, &cmd.replace, ctx);
    let (bo, so) = (norm(&bare.stdout, bare_ctx), norm(&sbx.stdout, sbx_ctx));
    let (be, se) = (norm(&bare.stderr, bare_ctx), norm(&sbx.stderr, sbx_ctx));
    let hint = first_marker_line(&sbx.stderr).filter(|_| !bare.stderr.contains("Permission denied")).map(|l| format!("; sandboxed stderr: {l:?}")).unwrap_or_default();
    if bare.exit_code != sbx.exit_code {
        let mut diff = diff_lines(&be, &se, DIFF_LINES);
        if bo != so {
            diff = format!("stdout:\n{}\nstderr:\n{diff}", diff_lines(&bo, &so, DIFF_LINES));
        }
        return fail(format!("exit code differs: bare {}, sandboxed {}{hint}", exit_text(bare), exit_text(sbx)), diff);
    }
    if cmd.compare != Compare::Exit && bo != so {
        return fail(format!("stdout differs (same exit code {}){hint}", exit_text(sbx)), diff_lines(&bo, &so, DIFF_LINES));
    }
    if cmd.compare == Compare::Output && be != se {
        return fail(format!("stderr differs (same exit code {}){hint}", exit_text(sbx)), diff_lines(&be, &se, DIFF_LINES));
    }
    Verdict { outcome: Outcome::Pass, cause: String::new(), diff: String::new() }
}

/// A passing must-succeed verdict fails when the workspace the sandboxed run left differs from
/// the bare run's under `rules` (the sandbox's `held` paths aside; see [`crate::tree`]).
#[must_use]
pub fn judge_workspace(v: Verdict, rules: &[tree::Rule], bare: &Result<tree::Snapshot, String>, sbx: &Result<tree::Snapshot, String>, held: &[String]) -> Verdict {
    if v.outcome != Outcome::Pass {
        return v;
    }
    let diffs = match (bare, sbx) {
        (Ok(b), Ok(s)) => tree::differences(b, s, rules, held),
        (Err(b), Err(s)) if b == s => Vec::new(),
        (b, s) => vec![format!("the workspace could not be read the same way: bare {:?}, sandboxed {:?}", b.as_ref().err(), s.as_ref().err())],
    };
    if diffs.is_empty() {
        return v;
    }
    let shown: Vec<&str> = diffs.iter().take(DIFF_LINES).map(String::as_str).collect();
    Verdict {
        outcome: Outcome::Fail,
        cause: format!("same exit code and output, but the workspace differs after the run ({} entries: content, mode or presence)", diffs.len()),
        diff: shown.join("\n"),
    }
}

/// Judges a must-be-denied command from the two runs and what was seen outside after each.
#[must_use]
/// `degraded` names the documented limitation when the level is one of the command's
/// `degraded_levels`.
pub fn judge_denied(bare: &RunOutput, bare_effect: EffectSeen, sbx: &RunOutput, sbx_effect: EffectSeen, degraded: Option<&str>) -> Verdict {
    let v = |outcome, cause: String| Verdict { outcome, cause, diff: String::new() };
    if bare.error.is_some() || bare.timed_out || bare.exit_code != Some(0) {
        return v(Outcome::DeniedFail, format!("the probe failed bare (exit {}): it proves nothing; stderr: {}", exit_text(bare), bare.stderr.trim()));
    }
    if !bare_effect.present {
        return v(Outcome::DeniedFail, "the probe's effect was not visible outside after the bare run: the check proves nothing".into());
    }
    if let Some(e) = &sbx.error {
        return v(Outcome::DeniedFail, format!("sandbox error, nothing ran: {e}"));
    }
    if sbx_effect.present {
        if let Some(why) = degraded {
            return v(Outcome::DeniedDegraded, format!("not denied at this level, as documented: {why}"));
        }
        return v(Outcome::DeniedFail, format!("NOT DENIED: the effect is visible outside after the sandboxed run (exit {})", exit_text(sbx)));
    }
    let how = first_marker_line(&sbx.stderr).unwrap_or_else(|| sbx.stderr.lines().next().unwrap_or("").chars().take(200).collect());
    v(Outcome::DeniedOk, format!("denied (exit {}): {how}", exit_text(sbx)))
}

/// True when a command expects denial.
#[must_use]
pub fn is_denied(cmd: &Command) -> bool {
    cmd.expect == Expect::Denied
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Normalisation, Replace};

    fn cmd() -> Command {
        Command {
            name: "c".into(),
            group: "g".into(),
            run: "x".into(),
            fixture: "empty".into(),
            expect: Expect::Succeed,
            exit_code: 0,
            requires: vec![],
            normalise: vec![Normalisation::Paths],
            replace: vec![],
            compare: Compare::Output,
            why: None,
            timeout: 10,
            check: None,
            degraded_levels: vec![],
            workspace: None,
            flags: vec![],
            unstable: Vec::new(),
        }
    }

    fn out(code: i32, stdout: &str, stderr: &str) -> RunOutput {
        RunOutput { exit_code: Some(code), stdout: stdout.into(), stderr: stderr.into(), ..RunOutput::default() }
    }

    fn ctx(scratch: &str) -> PathContext {
        let mut c = PathContext::default();
        c.add("/w/ws", "<WS>");
        c.add(scratch, "<CACHE>");
        c
    }

    #[test]
    fn the_workspace_left_behind_is_judged_only_after_a_pass() {
        use crate::tree::{Entry, Snapshot, RULES};
        let pass = || Verdict { outcome: Outcome::Pass, cause: String::new(), diff: String::new() };
        let bare: Snapshot = [("a".to_string(), Entry::File { mode: 0o644, hash: 1 })].into();
        let mut sbx = bare.clone();
        assert_eq!(judge_workspace(pass(), RULES, &Ok(bare.clone()), &Ok(sbx.clone()), &[]).outcome, Outcome::Pass);
        sbx.insert("a".into(), Entry::File { mode: 0o600, hash: 1 });
        let v = judge_workspace(pass(), RULES, &Ok(bare.clone()), &Ok(sbx.clone()), &[]);
        assert_eq!(v.outcome, Outcome::Fail);
        assert!(v.cause.contains("workspace differs") && v.diff.contains("~ a:"), "{v:?}");
        // A held-back path is the protection working, not a difference.
        assert_eq!(judge_workspace(pass(), RULES, &Ok(bare.clone()), &Ok(sbx.clone()), &["a".into()]).outcome, Outcome::Pass);
        let failed = Verdict { outcome: Outcome::Fail, cause: "exit code differs".into(), diff: String::new() };
        assert_eq!(judge_workspace(failed, RULES, &Ok(bare.clone()), &Ok(sbx), &[]).cause, "exit code differs");
        assert_eq!(judge_workspace(pass(), RULES, &Err("x: denied".into()), &Err("x: denied".into()), &[]).outcome, Outcome::Pass);
        assert_eq!(judge_workspace(pass(), RULES, &Ok(bare), &Err("x: denied".into()), &[]).outcome, Outcome::Fail);
    }

    #[test]
    fn pass_after_path_normalisation() {
        let v = judge_succeed(&cmd(), &out(0, "/w/ws/a /w/s/pip\n", ""), &ctx("/w/s"), &out(0, "/w/ws/a /tmp/.localgpt-cache/pip\n", ""), &ctx("/tmp/.localgpt-cache"));
        assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
    }

    #[test]
    fn exit_code_difference_fails_with_the_denial_quoted() {
        let v = judge_succeed(&cmd(), &out(0, "ok\n", ""), &ctx("/s"), &out(1, "", "touch: cannot touch 'x': Read-only file system\n"), &ctx("/s"));
        assert_eq!(v.outcome, Outcome::Fail);
        assert!(v.cause.starts_with("exit code differs: bare 0, sandboxed 1; sandboxed stderr: \"touch"), "{}", v.cause);
        assert!(v.diff.contains("-ok"), "{}", v.diff);
    }

    #[test]
    fn stdout_and_stderr_are_both_compared_unless_declared() {
        let a = out(0, "x\n", "warn 1\n");
        let b = out(0, "x\n", "warn 2\n");
        let v = judge_succeed(&cmd(), &a, &ctx("/s"), &b, &ctx("/s"));
        assert_eq!(v.outcome, Outcome::Fail);
        assert!(v.cause.starts_with("stderr differs"));
        let mut c = cmd();
        c.compare = Compare::Stdout;
        c.why = Some("w".into());
        assert_eq!(judge_succeed(&c, &a, &ctx("/s"), &b, &ctx("/s")).outcome, Outcome::Pass);
        let v = judge_succeed(&c, &out(0, "y\n", ""), &ctx("/s"), &b, &ctx("/s"));
        assert!(v.cause.starts_with("stdout differs"), "{v:?}");
        c.replace = vec![Replace { re: r"warn \d".into(), with: "warn N".into() }];
        c.compare = Compare::Output;
        assert_eq!(judge_succeed(&c, &a, &ctx("/s"), &b, &ctx("/s")).outcome, Outcome::Pass);
    }

    #[test]
    fn bare_must_match_the_declared_exit_code() {
        let v = judge_succeed(&cmd(), &out(2, "", "boom"), &ctx("/s"), &out(2, "", "boom"), &ctx("/s"));
        assert_eq!(v.outcome, Outcome::Fail);
        assert!(v.cause.contains("corpus declares 0"), "{}", v.cause);
        let mut c = cmd();
        c.exit_code = 2;
        assert_eq!(judge_succeed(&c, &out(2, "", "boom"), &ctx("/s"), &out(2, "", "boom"), &ctx("/s")).outcome, Outcome::Pass);
    }

    #[test]
    fn timeouts_and_sandbox_errors_fail() {
        let t = RunOutput { timed_out: true, exit_code: Some(124), ..RunOutput::default() };
        assert!(judge_succeed(&cmd(), &out(0, "", ""), &ctx("/s"), &t, &ctx("/s")).cause.starts_with("timed out in the sandbox"));
        let e = RunOutput { error: Some("ran at standard, not full".into()), ..RunOutput::default() };
        assert!(judge_succeed(&cmd(), &out(0, "", ""), &ctx("/s"), &e, &ctx("/s")).cause.starts_with("sandbox error"));
    }

    #[test]
    fn denial_needs_a_working_probe_and_an_absent_effect() {
        let seen = EffectSeen { present: true };
        let unseen = EffectSeen { present: false };
        let ok = judge_denied(&out(0, "", ""), seen, &out(1, "", "x: Permission denied\n"), unseen, None);
        assert_eq!(ok.outcome, Outcome::DeniedOk);
        assert!(ok.cause.contains("Permission denied"));
        assert_eq!(judge_denied(&out(1, "", ""), seen, &out(1, "", ""), unseen, None).outcome, Outcome::DeniedFail);
        assert!(judge_denied(&out(0, "", ""), unseen, &out(1, "", ""), unseen, None).cause.contains("proves nothing"));
        assert!(judge_denied(&out(0, "", ""), seen, &out(0, "", ""), seen, None).cause.starts_with("NOT DENIED"));
        let d = judge_denied(&out(0, "", ""), seen, &out(0, "", ""), seen, Some("chmod is not covered by Landlock"));
        assert_eq!(d.outcome, Outcome::DeniedDegraded);
        // a degraded level that does deny is simply denied
        assert_eq!(judge_denied(&out(0, "", ""), seen, &out(1, "", ""), unseen, Some("x")).outcome, Outcome::DeniedOk);
    }
}
