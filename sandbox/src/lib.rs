//! # localgpt-sandbox
//!
//! A kernel-enforced sandbox for the shell commands AI agents run.
//!
//! ## Model: policy → plan → per-OS artefacts → apply
//!
//! * **Policy** ([`policy::SandboxPolicy`]) — what the user wants: a workspace, a mode
//!   (`workspace-write`, `read-only`, `full-access`), extra paths, limits. Built by
//!   [`build_sandbox_policy`] from a mode and a workspace (spec 3.3), with the default tables of
//!   the platform (`defaults::tables`).
//! * **Plan** ([`plan::Plan`]) — pure data computed from policy + detected capabilities
//!   ([`detect_sandbox_capabilities`]) by [`make_plan`], the one place decisions are made. Its
//!   OS-neutral part ([`plan::Access`]: readable, writable and denied paths with their reasons;
//!   protected workspace paths; environment; [`plan::Limits`]; network; timeout and output caps;
//!   and for every protection, by typed id, whether it is enforced, degraded or off) is rendered
//!   by the platform's backend into its artefacts:
//!   * `linux` — Landlock rules, the seccomp table and its BPF program per architecture,
//!     namespaces and mounts, rlimits, cgroup limits ([`plan::LinuxPlan`], computed by
//!     `linux::compile`);
//!   * `macos` — a Seatbelt profile and its `-D` parameters (`macos::MacosPlan`), rendered
//!     on any OS (`localgpt sandbox explain --platform macos`) and checked by an evaluator of
//!     the SBPL it emits against the same conformance table the Linux backend executes;
//!   * `windows` — a restricted token, the ACEs and integrity labels that confine it, and job
//!     limits (`windows::WindowsPlan`), rendered on any OS (`localgpt sandbox explain
//!     --platform windows`) and checked by a model of Windows' access check against the same
//!     conformance table; every ACL change is a recorded transaction (`windows::record`).
//!     Experimental: its glue runs under Wine in CI but has not run on Windows, so a command
//!     runs there only when the user opts in (`LOCALGPT_EXPERIMENTAL_WINDOWS=1`).
//! * **Apply** — thin code that executes a plan and decides nothing. On Linux the helper applies
//!   it in one fixed order: new session and parent-death signal → namespaces, mounts and the
//!   fresh root (Full) → rlimits → fds above 2 closed → `no_new_privs` → Landlock → capabilities
//!   dropped → seccomp → exec. The
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
//!
//! The API is what this page lists: the items at the crate root and the modules [`handle`],
//! [`run`], [`policy`], [`plan`] (the plan as data: what `explain` shows), [`detect`], [`config`]
//! and [`error`]. Everything else — the backends (`linux`, `macos`, `windows`), path resolution,
//! the review of protected paths, the network proxy, the default tables — is implementation:
//! crate-private. This workspace's own tools (the `localgpt` CLI, the harness, the benches)
//! enable the `internals` feature to reach it; it is not part of the API and an embedder leaves it
//! off.

#![deny(missing_docs)]

/// Declares a module of the implementation: crate-private, unless the workspace's own tools (the
/// CLI, the harness, the benches) enable the `internals` feature — never part of the API.
macro_rules! internal_mod {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        $(#[$m])*
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $name;
    };
}

pub mod ablation;
pub mod config;
pub mod detect;
pub mod error;
pub mod guard;
#[cfg(unix)]
pub mod handle;
pub mod model;
pub mod plan;
pub mod policy;
pub mod why;
#[cfg(unix)]
pub mod run;
mod rand;

internal_mod!(#[cfg(unix)] audit);
internal_mod!(defaults);
internal_mod!(files);
internal_mod!(host);
internal_mod!(linux);
internal_mod!(macos);
internal_mod!(network);
internal_mod!(paths);
internal_mod!(platform);
#[cfg(all(test, target_os = "linux"))]
mod fuzz;
internal_mod!(srt);
internal_mod!(text);
internal_mod!(#[cfg(unix)] timing);
internal_mod!(windows);

pub use config::{build_sandbox_policy, SandboxSettings};
pub use detect::{detect_sandbox_capabilities, Capabilities};
pub use error::SandboxError;
pub use plan::{make_plan, Plan, Protection, ProtectionState};
pub use policy::{SandboxLevel, SandboxMode, SandboxPolicy};
// Types of the implementation's modules that appear in the API's signatures and fields.
pub use network::Allowlist;
pub use paths::WriteMode;
pub use guard::pending::ProtectedReview;
pub use platform::Platform;
#[cfg(unix)]
pub use handle::{Command, Sandbox, SandboxedChild};
#[cfg(unix)]
pub use run::{prepare, run_argv, run_sandboxed, CancelToken, PreparedRun, RunOptions, RunResult};

/// If this process was started as the sandbox helper (`argv[0]` is `localgpt-sandbox`) or, on
/// Linux, as the helper factory of a multithreaded host (`localgpt-sandbox-zygote`), becomes it
/// and never returns. Call it first in the host's `main()`.
pub fn dispatch() {
    #[cfg(target_os = "linux")]
    {
        timing::stamp("start");
        let argv0 = std::env::args_os().next().map(std::path::PathBuf::from);
        let name = argv0.as_deref().and_then(std::path::Path::file_name);
        if name.is_some_and(|f| f == linux::helper::HELPER_ARGV0) {
            linux::helper::helper_main();
        }
        if name.is_some_and(|f| f == linux::zygote::ZYGOTE_ARGV0) {
            linux::zygote::zygote_main();
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
    #[cfg(unix)]
    return tempfile::tempdir_in("/var/tmp").expect("tempdir in /var/tmp");
    #[cfg(not(unix))]
    return tempfile::tempdir().expect("tempdir");
}
