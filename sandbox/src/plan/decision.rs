//! The planner's OS-neutral decision that every backend reads: the access lists with their
//! reasons, the resource limits and how each is bounded (cgroup, rlimit), and the run's context.
//! Data and the small rules that fill it; no backend's artefacts (those are each compiler's own:
//! `linux::compile`, `macos`, `windows`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::ids::{prot, Protection, ProtectionId, ProtectionState};
use crate::model::guard::{ProtectedPath, Unprotectable};
use crate::policy::{SandboxLevel, SandboxMode, SandboxPolicy};

/// How the sandbox's own process count is bounded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ProcessLimit {
    /// A per-run child of this cgroup with `pids.max`.
    Cgroup {
        /// Parent directory for the per-run cgroup.
        base: PathBuf,
        /// `v1` or `v2`.
        version: String,
        /// `pids.max` (the supervisor counts as one).
        max: u32,
    },
    /// `RLIMIT_NPROC` (counts every process of the uid, system-wide).
    Rlimit {
        /// The limit.
        max: u64,
    },
    /// No bound (root without a usable cgroup).
    Unbounded,
}

/// How the sandbox's memory is bounded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum MemoryLimit {
    /// A per-run child of this cgroup with a memory limit (`memory.max` on v2,
    /// `memory.limit_in_bytes` on v1): the OOM killer acts inside the sandbox, and the private
    /// `/tmp`'s pages are charged to it.
    Cgroup {
        /// Parent directory for the per-run cgroup.
        base: PathBuf,
        /// `v1` or `v2`.
        version: String,
        /// The limit, bytes.
        max_bytes: u64,
    },
    /// No memory cgroup available (not root, no delegated cgroup): only the private tmpfs
    /// mounts are bounded.
    Unbounded,
}

/// One per-run cgroup directory to create: its parent and the limits written into it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CgroupSetting {
    /// Parent directory.
    pub base: PathBuf,
    /// `v1` or `v2`.
    pub version: String,
    /// (file, value) written after creation, e.g. (`pids.max`, `66`).
    pub limits: Vec<(String, String)>,
}

/// One resource limit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RlimitSetting {
    /// Name (`RLIMIT_FSIZE`, …).
    pub name: String,
    /// `libc` resource number.
    pub resource: i32,
    /// Hard value (and soft, unless [`RlimitSetting::soft`] says lower).
    pub value: u64,
    /// A lower soft value the command starts with (it may raise it up to `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft: Option<u64>,
}

/// A platform's `RLIMIT_*` numbers for the limits every confined command gets.
pub(crate) struct RlimitNumbers {
    pub(crate) fsize: i32,
    pub(crate) nofile: i32,
    pub(crate) core: i32,
}

/// The rlimits every confined command gets, whatever the platform: the policy's descriptor
/// bound (a login shell's soft limit under it), its file size bound if it sets one, and no
/// core files.
pub(crate) fn confined_rlimits(policy: &SandboxPolicy, n: &RlimitNumbers) -> Vec<RlimitSetting> {
    let soft = crate::defaults::SOFT_OPEN_FILES;
    let mut v = vec![
        RlimitSetting { name: "RLIMIT_NOFILE".into(), resource: n.nofile, value: policy.max_open_files, soft: (policy.max_open_files > soft).then_some(soft) },
        RlimitSetting { name: "RLIMIT_CORE".into(), resource: n.core, value: 0, soft: None },
    ];
    if let Some(f) = policy.max_file_size_bytes {
        v.insert(0, RlimitSetting { name: "RLIMIT_FSIZE".into(), resource: n.fsize, value: f, soft: None });
    }
    v
}

/// The `file-size` protection row (every platform): enforced only where the policy sets a bound.
pub(crate) fn file_size_row(l: &Limits) -> Protection {
    match l.file_size_bytes {
        Some(b) => prot(ProtectionId::FileSize, ProtectionState::Enforced, "RLIMIT_FSIZE", format!("a write past {b} bytes fails with EFBIG")),
        None => prot(ProtectionId::FileSize, ProtectionState::Off, "none (the default)",
            "no per-file bound: large build outputs, wheels and packfiles are ordinary work; set max_file_size_bytes or --max-file-size to bound it"),
    }
}

/// The `open-files` protection row (every platform).
pub(crate) fn open_files_row(l: &Limits) -> Protection {
    let soft = crate::defaults::SOFT_OPEN_FILES.min(l.open_files);
    prot(ProtectionId::OpenFiles, ProtectionState::Enforced, "RLIMIT_NOFILE",
        format!("at most {} descriptors per process (soft limit {soft}, raisable to that)", l.open_files))
}

/// One path of the [`Access`] lists.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AccessRule {
    /// The path (as the policy gives it).
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// The OS-neutral access rules of a plan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Read and execute (system, toolchains, grants; the workspace in read-only mode).
    pub read: Vec<AccessRule>,
    /// Read and write (the workspace in workspace-write mode, scratch, grants).
    pub write: Vec<AccessRule>,
    /// Never read nor written, even inside a granted path (credentials, secrets, configs with
    /// credentials at Standard).
    pub deny: Vec<AccessRule>,
    /// Device nodes opened read-write.
    pub devices: Vec<PathBuf>,
}

impl Access {
    /// The access rules of `policy`.
    #[must_use]
    pub fn of(policy: &SandboxPolicy) -> Access {
        let t = crate::defaults::tables(policy.platform);
        let home_toolchains: Vec<PathBuf> = policy.home.iter().flat_map(|h| t.home_toolchains.iter().map(move |x| h.join(x))).collect();
        // The default reads, looked up by hash: `Path`'s hash agrees with its (component-wise)
        // equality, and a list compared one by one cost ~1 µs per granted path (35 comparisons,
        // each walking both paths' components): 0.1 ms for 100 `--allow-read` paths.
        let defaults: std::collections::HashSet<&Path> = t.system_read.iter().map(Path::new).chain(home_toolchains.iter().map(PathBuf::as_path)).collect();
        let rule = |p: &PathBuf, reason: &str| AccessRule { path: p.clone(), reason: reason.into() };
        let mut read: Vec<AccessRule> = policy
            .read_only_paths
            .iter()
            .map(|p| {
                let default = defaults.contains(p.as_path());
                match policy.context_reads.iter().find(|(c, _)| c == p) {
                    Some((_, why)) => rule(p, why),
                    None => rule(p, if default { "system or toolchain" } else { "allow_paths.read" }),
                }
            })
            .collect();
        let mut write: Vec<AccessRule> = policy
            .writable_paths
            .iter()
            .map(|p| match policy.context_writes.iter().find(|(c, _)| c == p) {
                Some((_, why)) => rule(p, why),
                None => rule(p, if t.scratch_write.iter().any(|s| Path::new(s) == p) { "scratch" } else { "allow_paths.write" }),
            })
            .collect();
        match policy.mode {
            SandboxMode::WorkspaceWrite => write.insert(0, rule(&policy.workspace_path, "workspace")),
            _ => read.insert(0, rule(&policy.workspace_path, "workspace (read-only mode)")),
        }
        let deny = policy.deny_paths.iter().map(|p| rule(p, "credential or secret")).collect();
        Access { read, write, deny, devices: policy.device_paths.clone() }
    }
}

/// The resource limits of a plan (OS-neutral; each backend enforces what it can).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest file the command may write (`None`: no per-file bound).
    #[serde(default)]
    pub file_size_bytes: Option<u64>,
    /// Open descriptors (the hard limit).
    pub open_files: u64,
    /// Processes.
    pub processes: u32,
    /// Memory (where a cgroup or job object can bound it).
    pub memory_bytes: u64,
    /// Each private tmpfs (Linux, Full level).
    pub tmp_bytes: u64,
}

/// Inputs of [`super::make_plan`] that come from the run rather than the policy.
#[derive(Clone, Debug, Default)]
pub struct RunContext {
    /// The caller's environment.
    pub caller_env: Vec<(String, String)>,
    /// The per-run scratch directory, if one was created.
    pub scratch: Option<PathBuf>,
    /// Processes the caller's uid already has (for a relative `RLIMIT_NPROC`).
    pub uid_tasks: Option<u64>,
    /// The run's id (tags macOS denials in the system log).
    pub run_id: Option<String>,
    /// The binary exec'd inside the sandbox as the helper (macOS; default: this executable).
    pub helper_exe: Option<PathBuf>,
    /// `--network allowlist` without a network namespace: the port on the host's loopback the
    /// runner's proxy listens on (chosen, and held, by the runner before the plan is made).
    pub proxy_port: Option<u16>,
    /// Test-only (cargo feature `ablation`): the protections whose mechanisms the plan is made
    /// without (see [`crate::ablation`]). Always empty in a shipped build.
    pub ablate: Vec<crate::model::ids::ProtectionId>,
}

/// The memory limit when the policy sets none: half of physical memory (4 GiB when unknown).
#[must_use]
pub fn default_memory_bytes(mem_total: u64) -> u64 {
    if mem_total == 0 {
        4 << 30
    } else {
        mem_total / 2
    }
}

/// The size of each private tmpfs (`/tmp`, `/dev/shm`) when the policy sets none: a quarter of
/// physical memory (1 GiB when unknown).
#[must_use]
pub fn default_tmp_bytes(mem_total: u64) -> u64 {
    if mem_total == 0 {
        1 << 30
    } else {
        mem_total / 4
    }
}

/// Where caches go at Full level: inside the private `/tmp`, gone with the namespace.
pub const PRIVATE_SCRATCH: &str = "/tmp/.localgpt-cache";

/// What a backend's protection table reads of a finished plan: its OS-neutral part, borrowed
/// (the backend's own artefacts are passed beside it). Made by [`super::Plan::decided`].
#[derive(Clone, Copy, Debug)]
pub struct Decided<'a> {
    /// The level the command runs at.
    pub level: SandboxLevel,
    /// The mode.
    pub mode: SandboxMode,
    /// The workspace (canonical).
    pub workspace: &'a Path,
    /// The access lists.
    pub access: &'a Access,
    /// The resource limits.
    pub limits: &'a Limits,
    /// Bytes kept per output stream.
    pub max_output_bytes: u64,
    /// The caller's variables the environment filter drops.
    pub env_dropped: &'a [String],
    /// Secrets under `/etc` denied.
    pub system_secrets: &'a [PathBuf],
    /// Toolchain config files with credentials (and the keys scrubbed from each).
    pub configs: &'a [(PathBuf, Vec<String>)],
    /// The protected workspace paths.
    pub protected: &'a [ProtectedPath],
    /// Protected names that could not be protected.
    pub unprotectable: &'a [Unprotectable],
}
