//! The helper → runner report protocol: typed messages, one JSON object per line on the report
//! pipe (fd 3 in the helper). Every decision the runner takes on what the helper said (fall back
//! to Standard, refuse a result, review a protected path or not) is a `match` on these types,
//! never a match on message text.
//!
//! Lines are written whole with one `write(2)` each (shorter than `PIPE_BUF`, so they never
//! interleave), by the helper, PID 1 and the command's process before `exec`.

use serde::{Deserialize, Serialize};

/// What the helper actually applied, as reported before `exec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedReport {
    /// `fully_enforced` or `not_applied`.
    pub landlock: String,
    /// Number of Landlock path rules added.
    pub landlock_rules: usize,
    /// The seccomp filter was loaded.
    pub seccomp: bool,
    /// Capabilities were dropped (root).
    pub capabilities_dropped: bool,
    /// `no_new_privs` is set.
    pub no_new_privs: bool,
    /// The process joined the per-run cgroup.
    pub cgroup: bool,
    /// The command runs in its own user, PID, mount, network, IPC and UTS namespaces.
    pub namespaces: bool,
    /// macOS: the helper checked that it runs under a Seatbelt profile (`sandbox_check`).
    #[serde(default)]
    pub seatbelt: bool,
}

/// The `argv[0]` that selects the helper (Linux).
pub const HELPER_ARGV0: &str = "localgpt-sandbox";

pub use crate::model::HELPER_FLAG;

/// The environment variable carrying the helper plan.
pub const PLAN_ENV: &str = "LOCALGPT_SANDBOX_PLAN";

/// The value of [`AppliedReport::landlock`] when the ruleset was enforced.
pub const LANDLOCK_ENFORCED: &str = "fully_enforced";

/// Which step of the set-up failed (nothing was executed).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SetupStep {
    /// Creating the user namespace or writing its id maps: the runner may fall back to Standard.
    UserNamespace,
    /// Any other step.
    Other,
}

/// A degradation found while setting up, reported before the command runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SetupWarning {
    /// Protected path number `index` (of the namespace plan's list) could not be made private
    /// and is read-only for the run.
    ProtectedReadOnly {
        /// Index in the namespace plan's protected paths.
        index: usize,
        /// Why.
        message: String,
    },
    /// A directory given a private layer (the namespace plan's `layers`) could not get it and
    /// stays read-only for the run.
    LayerReadOnly {
        /// Why.
        message: String,
    },
    /// The command's own terminal ([`crate::run::StdinMode::Terminal`]) could not be given a
    /// name under `/dev` (it works, but `tty` says it is none).
    TerminalUnnamed {
        /// Why.
        message: String,
    },
}

impl SetupWarning {
    /// For humans.
    #[must_use]
    pub fn message(&self) -> &str {
        match self {
            SetupWarning::ProtectedReadOnly { message, .. } | SetupWarning::LayerReadOnly { message } | SetupWarning::TerminalUnnamed { message } => message,
        }
    }
}

/// One message of the helper.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// Confinement applied; the command is about to `exec`.
    Applied(AppliedReport),
    /// Set-up failed at `step`; nothing was executed.
    SetupFailed {
        /// Which step.
        step: SetupStep,
        /// What went wrong.
        message: String,
    },
    /// `exec` failed with this errno.
    ExecFailed(i32),
    /// PID 1 (cloned by a forking runner) reports the command's raw wait status.
    Status(i32),
    /// A degradation.
    Warning(SetupWarning),
    /// PID 1 listens on this port of the sandbox's loopback for the runner's proxy (the
    /// listening socket comes with this message).
    ProxyListening(u16),
    /// PID 1's UDP socket on `127.0.0.1:53` of the sandbox's loopback, for the runner's DNS stub
    /// (the socket comes with this message).
    DnsListening,
    /// PID 1's `sock_diag` socket, made in the sandbox's network namespace for the runner's
    /// answers to `connect` (the socket comes with this message).
    SocketDiag,
}

/// The helper's descriptor its reports go to (the runner's end reads them).
pub const REPORT_FD: i32 = 3;

/// Writes one report message on [`REPORT_FD`] (one `write`, so lines never interleave): what
/// the helper and its PID 1 say to the runner.
#[cfg(target_os = "linux")]
pub(crate) fn send(r: &Report) {
    let line = r.encode();
    // SAFETY: fd 3 is the report pipe given by the runner; writing a local buffer.
    unsafe { libc::write(REPORT_FD, line.as_ptr().cast(), line.len()) };
}

/// The longest message text kept in a line (so that a line stays below `PIPE_BUF`).
const MAX_MESSAGE: usize = 2048;

impl Report {
    /// One line (JSON and `\n`).
    #[must_use]
    pub fn encode(&self) -> String {
        let mut r = self.clone();
        let cut = |m: &mut String| {
            if m.len() > MAX_MESSAGE {
                let mut end = MAX_MESSAGE;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
            }
        };
        match &mut r {
            Report::SetupFailed { message, .. } => cut(message),
            Report::Warning(SetupWarning::ProtectedReadOnly { message, .. } | SetupWarning::LayerReadOnly { message } | SetupWarning::TerminalUnnamed { message }) => cut(message),
            _ => {}
        }
        let mut line = serde_json::to_string(&r).unwrap_or_else(|_| "{}".into());
        line.push('\n');
        line
    }

    /// Every message in `bytes` (lines that do not decode are skipped).
    #[must_use]
    pub fn decode_all(bytes: &[u8]) -> Vec<Report> {
        bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).filter_map(|l| serde_json::from_slice(l).ok()).collect()
    }
}

/// What the runner learns from the report pipe.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reported {
    /// What was applied.
    pub applied: Option<AppliedReport>,
    /// The set-up failure, if any.
    pub setup_failed: Option<(SetupStep, String)>,
    /// `exec`'s errno, if it failed.
    pub exec_errno: Option<i32>,
    /// The command's raw wait status from PID 1.
    pub status: Option<i32>,
    /// Degradations.
    pub warnings: Vec<SetupWarning>,
}

impl Reported {
    /// Folds the messages of a run.
    #[must_use]
    pub fn from_bytes(bytes: &[u8]) -> Reported {
        let mut r = Reported::default();
        for m in Report::decode_all(bytes) {
            match m {
                Report::Applied(a) => r.applied = Some(a),
                Report::SetupFailed { step, message } => r.setup_failed = Some((step, message)),
                Report::ExecFailed(e) => r.exec_errno = Some(e),
                Report::Status(s) => r.status = Some(s),
                Report::Warning(w) => r.warnings.push(w),
                // The socket that came with it is what the runner uses (told apart by its type).
                Report::ProxyListening(_) | Report::DnsListening | Report::SocketDiag => {}
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let msgs = vec![
            Report::Warning(SetupWarning::ProtectedReadOnly { index: 2, message: "no overlay\nhere".into() }),
            Report::Applied(AppliedReport { landlock: LANDLOCK_ENFORCED.into(), seccomp: true, ..Default::default() }),
            Report::ExecFailed(2),
            Report::Status(0x0900),
            Report::SetupFailed { step: SetupStep::UserNamespace, message: "unshare: EPERM".into() },
        ];
        let bytes: Vec<u8> = msgs.iter().flat_map(|m| m.encode().into_bytes()).collect();
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), msgs.len(), "one line each, newlines in messages escaped");
        assert_eq!(Report::decode_all(&bytes), msgs);
        let r = Reported::from_bytes(&bytes);
        assert_eq!(r.setup_failed, Some((SetupStep::UserNamespace, "unshare: EPERM".into())));
        assert_eq!((r.exec_errno, r.status, r.warnings.len()), (Some(2), Some(0x0900), 1));
        assert!(r.applied.is_some_and(|a| a.seccomp));
        let long = Report::SetupFailed { step: SetupStep::Other, message: "é".repeat(5000) };
        assert!(long.encode().len() < 4096, "below PIPE_BUF");
        assert!(Report::decode_all(b"garbage\n{\"exec_failed\":13}\n").contains(&Report::ExecFailed(13)));
    }
}
