//! # localgpt-sandbox
//!
//! A kernel-enforced sandbox for the shell commands AI agents run.
//!
//! ## Model: policy → plan → per-OS artefacts → apply
//!
//! * **Policy** ([`policy::SandboxPolicy`]) — what the user wants: a workspace, a mode
//!   (`workspace-write`, `read-only`, `full-access`), extra paths, limits. Built by
//!   [`build_sandbox_policy`] from a mode and a workspace (spec 3.3), with the default tables of
//!   the platform ([`defaults::tables`]).
//! * **Plan** ([`plan::Plan`]) — pure data computed from policy + detected capabilities
//!   ([`detect_sandbox_capabilities`]) by [`make_plan`], the one place decisions are made. Its
//!   OS-neutral part ([`plan::Access`]: readable, writable and denied paths with their reasons;
//!   protected workspace paths; environment; [`plan::Limits`]; network; timeout and output caps;
//!   and for every protection, by typed id, whether it is enforced, degraded or off) is rendered
//!   by the platform's backend into its artefacts:
//!   * [`linux`] — Landlock rules, the seccomp table and its BPF program per architecture,
//!     namespaces and mounts, rlimits, cgroup limits ([`plan::LinuxPlan`], computed by
//!     `linux::compile`);
//!   * [`macos`] — a Seatbelt profile and its `-D` parameters ([`macos::MacosPlan`]), rendered
//!     on any OS (`localgpt sandbox explain --platform macos`) and checked by an evaluator of
//!     the SBPL it emits against the same conformance table the Linux backend executes;
//!   * [`windows`] — a restricted token, the ACEs and integrity labels that confine it, and job
//!     limits ([`windows::WindowsPlan`]), rendered on any OS (`localgpt sandbox explain
//!     --platform windows`) and checked by a model of Windows' access check against the same
//!     conformance table; every ACL change is a recorded transaction ([`windows::record`]).
//!     Experimental: its glue runs under Wine in CI but has not run on Windows, so a command
//!     runs there only when the user opts in (`LOCALGPT_EXPERIMENTAL_WINDOWS=1`).
//! * **Apply** — thin code that executes a plan and decides nothing. On Linux the helper applies
//!   it in one fixed order: new session and parent-death signal → namespaces (Full) → rlimits →
//!   fds above 2 closed → `no_new_privs` → Landlock → capabilities dropped → seccomp → exec. The
//!   helper is a fork of the runner when the runner is single-threaded (the CLI), and the
//!   runner's binary re-executed as `localgpt-sandbox` otherwise ([`run::HelperStart`]). On macOS
//!   `/usr/bin/sandbox-exec` applies the profile and re-executes the binary as the helper, which
//!   checks it is confined, sets the rlimits and execs the command.
//!
//! The parent ([`run`], shared by Linux and macOS) is never restricted: it starts the helper,
//! caps output, enforces the timeout and reports what ran at which level, from the helper's typed
//! report ([`run::report`]). Nothing outlives the command on Linux: at Standard and Minimal the
//! helper stays as a subreaper *supervisor* that kills every leftover descendant; at Full the
//! command runs under PID 1 of its own PID namespace, which the kernel empties when PID 1 exits
//! (and PID 1 dies with the runner).

//! ## Embedding
//!
//! The host binary must call [`dispatch`] first thing in `main()`; then a [`Sandbox`] spawns
//! commands as [`SandboxedChild`] handles (streaming output, stdin, cancel, and with the `tokio`
//! feature async reads and waits: [`handle`]), [`run_sandboxed`] runs `bash -c CMD` to the end
//! in the calling thread, and [`SandboxPolicy::check_read`] /
//! [`SandboxPolicy::check_write`] apply the same policy to file tools.

#![deny(missing_docs)]

pub(crate) mod ablation;
#[cfg(unix)]
pub mod audit;
pub mod config;
pub mod defaults;
pub mod detect;
pub mod error;
#[cfg(unix)]
pub mod handle;
pub mod linux;
pub mod network;
pub mod paths;
#[cfg(unix)]
pub mod denied;
#[cfg(unix)]
pub mod pending;
pub mod plan;
pub mod platform;

pub mod policy;
#[cfg(unix)]
mod rand;
pub mod review;
pub mod srt;
pub mod text;
#[cfg(unix)]
pub mod timing;
#[cfg(unix)]
pub mod run;
pub mod macos;
pub mod windows;

pub use config::{build_sandbox_policy, SandboxSettings};
pub use detect::{detect_sandbox_capabilities, Capabilities};
pub use error::SandboxError;
pub use plan::{make_plan, Plan, Protection, ProtectionState};
pub use policy::{SandboxLevel, SandboxMode, SandboxPolicy};
#[cfg(unix)]
pub use handle::{Command, Sandbox, SandboxedChild};
#[cfg(unix)]
pub use run::{prepare, run_argv, run_sandboxed, CancelToken, PreparedRun, RunOptions, RunResult};

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
