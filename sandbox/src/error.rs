//! The crate's error type.

use thiserror::Error;

/// Everything that can go wrong before, while or after confining a command.
///
/// The CLI maps [`SandboxError::Policy`] and [`SandboxError::Config`] to exit code 2 (nothing
/// was executed), and the others to exit code 1.
#[derive(Debug, Error)]
pub enum SandboxError {
    /// The configuration file could not be read or parsed, or has an unknown key.
    #[error("config: {0}")]
    Config(String),
    /// The policy is invalid (bad path, limit out of range, missing acknowledgment, …).
    #[error("policy: {0}")]
    Policy(String),
    /// The requested or required level cannot be met on this machine. Nothing was executed.
    #[error("{0}")]
    LevelUnavailable(String),
    /// The plan could not be built (a path rule could not be resolved, …).
    #[error("plan: {0}")]
    Plan(String),
    /// The helper failed to apply the plan; the command was not executed.
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    /// The user namespace (Full level) could not be created; nothing was executed. A run at
    /// level `auto` falls back to Standard on this.
    #[error("user namespaces are unavailable: {0}")]
    NamespacesUnavailable(String),
    /// The per-run cgroup could not be created although the cgroup looked writable (inside
    /// another sandbox, whose Landlock rules `access(2)` does not see); nothing was executed. A
    /// run falls back to the limits that need no cgroup on this, and says so.
    #[error("the per-run cgroup cannot be created here: {0}")]
    CgroupUnavailable(String),
    /// An OS error in the parent (spawn, pipes, wait).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// This platform has no enforcement backend in this build.
    #[error("unsupported platform: {0}")]
    Unsupported(String),
}

impl SandboxError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Io { context: context.into(), source }
    }

    /// True when nothing ran because the user's input (config, policy, flags) was wrong.
    #[must_use]
    pub fn is_usage(&self) -> bool {
        matches!(self, SandboxError::Config(_) | SandboxError::Policy(_))
    }
}
