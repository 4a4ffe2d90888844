//! # localgpt-sandbox
//!
//! A kernel-enforced sandbox for the shell commands AI agents run.
//!
//! ## Model
//!
//! * **Policy** ([`policy::SandboxPolicy`]) — what the user wants: a workspace, a mode
//!   (`workspace-write`, `read-only`, `full-access`), extra paths, limits. Built automatically by
//!   [`build_sandbox_policy`] from a mode and a workspace (spec 3.3).
//! * **Plan** ([`plan::Plan`]) — pure data computed from policy + detected capabilities
//!   ([`detect_sandbox_capabilities`]): the Landlock rules, the seccomp table and its compiled
//!   program, rlimits, environment, and for every protection whether it is enforced, degraded or
//!   off. All decisions live there and are unit-tested.
//! * **Apply** ([`linux`]) — the helper applies the plan in one fixed order and decides
//!   nothing: new session and parent-death signal → namespaces (Full) → rlimits → fds above 2
//!   closed → `no_new_privs` → Landlock → capabilities dropped → seccomp → exec. The helper is a
//!   fork of the runner when the runner is single-threaded (the CLI), and the runner's binary
//!   re-executed as `localgpt-sandbox` otherwise ([`runner::HelperStart`], [`helper`]).
//!
//! The parent ([`runner`]) is never restricted: it starts the helper, caps output, enforces the
//! timeout and reports what ran at which level. Nothing outlives the command: at Standard and
//! Minimal the helper stays as a subreaper *supervisor* that kills every leftover descendant; at
//! Full the command runs under PID 1 of its own PID namespace, which the kernel empties when PID 1
//! exits (and PID 1 dies with the runner).

//! ## Embedding
//!
//! The host binary must call [`dispatch`] first thing in `main()`; then
//! [`run_sandboxed`] runs `bash -c CMD` under a policy, and [`SandboxPolicy::check_read`] /
//! [`SandboxPolicy::check_write`] apply the same policy to file tools.

pub mod config;
pub mod defaults;
pub mod detect;
pub mod error;
pub mod linux;
pub mod paths;
#[cfg(unix)]
pub mod pending;
pub mod plan;
pub mod platform;

pub mod policy;
#[cfg(unix)]
mod rand;
pub mod review;
pub mod text;
#[cfg(unix)]
pub mod timing;
#[cfg(unix)]
pub mod run;
pub mod macos;

pub use config::{build_sandbox_policy, SandboxSettings};
pub use detect::{detect_sandbox_capabilities, Capabilities};
pub use error::SandboxError;
pub use plan::{make_plan, Plan, Protection, ProtectionState};
pub use policy::{SandboxLevel, SandboxMode, SandboxPolicy};
#[cfg(unix)]
pub use run::{prepare, run_argv, run_sandboxed, PreparedRun, RunOptions, RunResult};

/// If this process was started as the sandbox helper (`argv[0]` is `localgpt-sandbox`), becomes
/// the helper and never returns. Call it first in the host's `main()`.
pub fn dispatch() {
    #[cfg(target_os = "linux")]
    {
        timing::stamp("start");
        let is_helper = std::env::args_os()
            .next()
            .map(std::path::PathBuf::from)
            .and_then(|p| p.file_name().map(|f| f == linux::helper::HELPER_ARGV0))
            .unwrap_or(false);
        if is_helper {
            linux::helper::helper_main();
        }
    }
    #[cfg(target_os = "macos")]
    if macos::helper::is_helper() {
        macos::helper::helper_main();
    }
}

/// A scratch dir for unit tests, outside `/tmp` (which the default policy grants read-write).
#[cfg(test)]
pub(crate) fn test_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").expect("tempdir in /var/tmp")
}
