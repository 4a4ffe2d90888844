//! Policy + capabilities → [`Plan`]: pure data saying exactly what the helper will apply, and for
//! each protection whether it is enforced, degraded (and why) or off. Every decision lives here;
//! `apply` decides nothing. `localgpt sandbox explain` prints a plan.

pub mod configs;
pub mod env;
pub mod gitconfig;
pub mod gitindex;
pub mod nested;
pub mod protected;
pub mod resolve;
#[cfg(unix)]
pub mod system_secrets;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::detect::{Capabilities, Platform};
use crate::error::SandboxError;
use crate::policy::{LevelSetting, SandboxLevel, SandboxMode, SandboxPolicy};
use crate::linux::landlock::{PathRule, SkippedPath};
use crate::linux::mounts::NamespacePlan;
use crate::linux::seccomp::{PackedInsn, SeccompRuleSpec};
use env::EnvPlan;

/// Reads a configuration file (following links, as the programs that read it do) without
/// blocking: a FIFO, a device or a file over `max` bytes left where one is expected is `None`,
/// not read (a FIFO would wait for a writer: every later plan would hang).
#[must_use]
pub fn read_config_file(path: &std::path::Path, max: u64) -> Option<String> {
    use std::io::Read;
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK);
    }
    let f = o.open(path).ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.len() > max {
        return None;
    }
    let mut s = String::new();
    f.take(max).read_to_string(&mut s).ok()?;
    Some(s)
}

/// Whether a protection holds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProtectionState {
    /// Enforced by the kernel (or by the supervisor, for lifetime and output).
    Enforced,
    /// Only partly enforced, or not at this level/kernel; `detail` says why.
    Degraded,
    /// Not enforced at all (full-access mode, or the mechanism is missing).
    Off,
}

/// The protections a plan reports on, by stable id (`status`, `explain`, run results, the
/// escape corpus and the kernel matrix's expectations all use these names).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum ProtectionId {
    /// `fs-write-outside`.
    FsWriteOutside,
    /// `fs-read-credentials`.
    FsReadCredentials,
    /// `fs-read-system-secrets`.
    FsReadSystemSecrets,
    /// `config-credentials`.
    ConfigCredentials,
    /// `fs-truncate-outside`.
    FsTruncateOutside,
    /// `fs-link-rename-out`.
    FsLinkRenameOut,
    /// `fs-device-ioctl`.
    FsDeviceIoctl,
    /// `fs-read-outside`.
    FsReadOutside,
    /// `fs-metadata-outside`.
    FsMetadataOutside,
    /// `fs-stat-secrets`.
    FsStatSecrets,
    /// `home-private`.
    HomePrivate,
    /// `workspace-persistence`.
    WorkspacePersistence,
    /// `workspace-persistence-live`.
    WorkspacePersistenceLive,
    /// `tmp-private`.
    TmpPrivate,
    /// `network`.
    Network,
    /// `unix-sockets-outside`.
    UnixSocketsOutside,
    /// `abstract-sockets-outside`.
    AbstractSocketsOutside,
    /// `signals-outside`.
    SignalsOutside,
    /// `ptrace`.
    Ptrace,
    /// `syscall-abi`.
    SyscallAbi,
    /// `io-uring`.
    IoUring,
    /// `tty-injection`.
    TtyInjection,
    /// `other-terminals`.
    OtherTerminals,
    /// `keyring`.
    Keyring,
    /// `sysv-ipc`.
    SysvIpc,
    /// `namespaces-mount`.
    NamespacesMount,
    /// `kernel-surface`.
    KernelSurface,
    /// `kernel-info`.
    KernelInfo,
    /// `pid-isolation`.
    PidIsolation,
    /// `inherited-fds`.
    InheritedFds,
    /// `env-secrets`.
    EnvSecrets,
    /// `capabilities`.
    Capabilities,
    /// `process-count`.
    ProcessCount,
    /// `memory`.
    Memory,
    /// `file-size`.
    FileSize,
    /// `open-files`.
    OpenFiles,
    /// `core-dumps`.
    CoreDumps,
    /// `timeout-kill-tree`.
    TimeoutKillTree,
    /// `output-cap`.
    OutputCap,
}

impl ProtectionId {
    /// Every id, in table order.
    pub const ALL: &'static [ProtectionId] = &[ProtectionId::FsWriteOutside, ProtectionId::FsReadCredentials, ProtectionId::FsReadSystemSecrets, ProtectionId::ConfigCredentials, ProtectionId::FsTruncateOutside, ProtectionId::FsLinkRenameOut, ProtectionId::FsDeviceIoctl, ProtectionId::FsReadOutside, ProtectionId::FsMetadataOutside, ProtectionId::FsStatSecrets, ProtectionId::HomePrivate, ProtectionId::WorkspacePersistence, ProtectionId::WorkspacePersistenceLive, ProtectionId::TmpPrivate, ProtectionId::Network, ProtectionId::UnixSocketsOutside, ProtectionId::AbstractSocketsOutside, ProtectionId::SignalsOutside, ProtectionId::Ptrace, ProtectionId::SyscallAbi, ProtectionId::IoUring, ProtectionId::TtyInjection, ProtectionId::OtherTerminals, ProtectionId::Keyring, ProtectionId::SysvIpc, ProtectionId::NamespacesMount, ProtectionId::KernelSurface, ProtectionId::KernelInfo, ProtectionId::PidIsolation, ProtectionId::InheritedFds, ProtectionId::EnvSecrets, ProtectionId::Capabilities, ProtectionId::ProcessCount, ProtectionId::Memory, ProtectionId::FileSize, ProtectionId::OpenFiles, ProtectionId::CoreDumps, ProtectionId::TimeoutKillTree, ProtectionId::OutputCap];

    /// The stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ProtectionId::FsWriteOutside => "fs-write-outside",
            ProtectionId::FsReadCredentials => "fs-read-credentials",
            ProtectionId::FsReadSystemSecrets => "fs-read-system-secrets",
            ProtectionId::ConfigCredentials => "config-credentials",
            ProtectionId::FsTruncateOutside => "fs-truncate-outside",
            ProtectionId::FsLinkRenameOut => "fs-link-rename-out",
            ProtectionId::FsDeviceIoctl => "fs-device-ioctl",
            ProtectionId::FsReadOutside => "fs-read-outside",
            ProtectionId::FsMetadataOutside => "fs-metadata-outside",
            ProtectionId::FsStatSecrets => "fs-stat-secrets",
            ProtectionId::HomePrivate => "home-private",
            ProtectionId::WorkspacePersistence => "workspace-persistence",
            ProtectionId::WorkspacePersistenceLive => "workspace-persistence-live",
            ProtectionId::TmpPrivate => "tmp-private",
            ProtectionId::Network => "network",
            ProtectionId::UnixSocketsOutside => "unix-sockets-outside",
            ProtectionId::AbstractSocketsOutside => "abstract-sockets-outside",
            ProtectionId::SignalsOutside => "signals-outside",
            ProtectionId::Ptrace => "ptrace",
            ProtectionId::SyscallAbi => "syscall-abi",
            ProtectionId::IoUring => "io-uring",
            ProtectionId::TtyInjection => "tty-injection",
            ProtectionId::OtherTerminals => "other-terminals",
            ProtectionId::Keyring => "keyring",
            ProtectionId::SysvIpc => "sysv-ipc",
            ProtectionId::NamespacesMount => "namespaces-mount",
            ProtectionId::KernelSurface => "kernel-surface",
            ProtectionId::KernelInfo => "kernel-info",
            ProtectionId::PidIsolation => "pid-isolation",
            ProtectionId::InheritedFds => "inherited-fds",
            ProtectionId::EnvSecrets => "env-secrets",
            ProtectionId::Capabilities => "capabilities",
            ProtectionId::ProcessCount => "process-count",
            ProtectionId::Memory => "memory",
            ProtectionId::FileSize => "file-size",
            ProtectionId::OpenFiles => "open-files",
            ProtectionId::CoreDumps => "core-dumps",
            ProtectionId::TimeoutKillTree => "timeout-kill-tree",
            ProtectionId::OutputCap => "output-cap",
        }
    }

    /// The id of a name.
    #[must_use]
    pub fn parse(name: &str) -> Option<ProtectionId> {
        Self::ALL.iter().copied().find(|p| p.as_str() == name)
    }
}

impl PartialEq<&str> for ProtectionId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for ProtectionId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl std::fmt::Display for ProtectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of the protection table (`status`, `explain`, run results).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Protection {
    /// Stable identifier, e.g. `fs-write-outside`.
    pub id: ProtectionId,
    /// State.
    pub state: ProtectionState,
    /// What enforces it.
    pub mechanism: String,
    /// Why degraded/off, or a precise statement of what is enforced.
    pub detail: String,
}

/// The Landlock part of a plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct LandlockPlan {
    /// The kernel's ABI.
    pub abi: u32,
    /// The ABI whose rights are handled (capped at what this build knows).
    pub handled_abi: u32,
    /// Handled filesystem rights.
    pub handled_fs: u64,
    /// Handled network rights (TCP bind/connect, none granted).
    pub handled_net: u64,
    /// Scopes (abstract unix sockets, signals).
    pub scopes: u64,
    /// Path rules.
    pub rules: Vec<PathRule>,
    /// Grants that produced no rule.
    pub skipped: Vec<SkippedPath>,
    /// Directories expanded into siblings around a deny: (granted dir, denied path).
    pub expanded: Vec<(PathBuf, PathBuf)>,
}

/// The seccomp part of a plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SeccompPlan {
    /// The architecture the numbers and the program are for.
    #[serde(default = "native_arch")]
    pub arch: crate::linux::syscalls::SeccompArch,
    /// The rule table, with reasons.
    pub rules: Vec<SeccompRuleSpec>,
    /// The compiled program.
    pub program: Vec<PackedInsn>,
}

fn native_arch() -> crate::linux::syscalls::SeccompArch {
    crate::linux::syscalls::SeccompArch::native()
}

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

/// Everything the helper will do, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The level the command runs at.
    pub level: SandboxLevel,
    /// The kernel release it was made for (`uname -r`).
    #[serde(default)]
    pub kernel: String,
    /// The highest level the kernel offers (may exceed what this build implements).
    pub kernel_level: SandboxLevel,
    /// Mode.
    pub mode: SandboxMode,
    /// Workspace (cwd of the command).
    pub workspace: PathBuf,
    /// What may be read, written and never touched, with the reasons (OS-neutral: every backend
    /// compiles these).
    pub access: Access,
    /// Resource limits.
    pub limits: Limits,
    /// Network policy.
    pub network: crate::policy::NetworkPolicy,
    /// Environment.
    pub env: EnvPlan,
    /// Timeout in seconds.
    pub timeout_secs: u64,
    /// Output cap per stream.
    pub max_output_bytes: u64,
    /// Secrets under `/etc` the caller could read that the command may not (masked at Full,
    /// denied by Landlock at Standard).
    #[serde(default)]
    pub system_secrets: Vec<PathBuf>,
    /// Protected workspace paths (see [`protected`]): private for the run, or reviewed in place.
    #[serde(default)]
    pub protected: Vec<protected::ProtectedPath>,
    /// Protected names that could not be protected, and why.
    #[serde(default)]
    pub unprotectable: Vec<protected::Unprotectable>,
    /// Each writable root's launch walk for nested protected names: the directories it looked
    /// at, with their depths and what they hold (the walk after the run reads only those that
    /// changed since; not serialised).
    #[serde(skip)]
    pub nested_walks: Vec<protected::RootWalk>,
    /// The protected names the launch walk looked for in subdirectories (not serialised).
    #[serde(skip)]
    pub nested_names: Vec<String>,
    /// Where the nested walks' records are kept, when no command of the run can write there
    /// (see [`nested`]; runner only, not serialised).
    #[serde(skip)]
    pub walk_records: Option<PathBuf>,
    /// Files inside a protected git directory that git's configuration includes
    /// ([`protected::read_git_configs`]): reviewed as config files, key by key, not as git's
    /// state (runner only; not serialised).
    #[serde(skip)]
    pub git_config_files: Vec<PathBuf>,
    /// Toolchain config files and the credential keys removed from the command's copy of each.
    #[serde(default)]
    pub configs: Vec<(PathBuf, Vec<String>)>,
    /// Scrubbed copies the runner writes before the run (Standard): (path, content).
    #[serde(default)]
    pub config_copies: Vec<(PathBuf, String)>,
    /// The audit log the runner appends to (JSON lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_log: Option<PathBuf>,
    /// The network allowlist the runner's proxy enforces ([`crate::policy::NetworkPolicy::Allowlist`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_allowlist: Option<crate::network::Allowlist>,
    /// With the allowlist: the loopback port the runner's proxy listens on (the sandbox's own
    /// loopback at Full, the host's elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_port: Option<u16>,
    /// Host unix sockets the command may connect to (connect-only, exactly these; the runner
    /// makes each connection itself, see [`UnixSocketGrant`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unix_sockets: Vec<UnixSocketGrant>,
    /// The protection table.
    pub protections: Vec<Protection>,
    /// Warnings to show (degraded level, unconfined run).
    pub warnings: Vec<String>,
    /// The Linux backend's artefacts (Landlock, seccomp, namespaces and mounts, rlimits, cgroups).
    #[serde(default)]
    pub linux: Option<LinuxPlan>,
    /// The macOS backend's artefacts (the Seatbelt profile and its parameters).
    #[serde(default)]
    pub macos: Option<crate::macos::MacosPlan>,
    /// The Windows backend's artefacts (token, ACEs and labels, job limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<crate::windows::WindowsPlan>,
}

/// One host unix socket granted to the command (`--allow-unix-socket`). On Linux the command's
/// `connect` calls go to the runner (seccomp user notification); the runner compares the
/// address with `given` and `path` byte for byte and, on a match, connects the command's socket
/// itself to `path` as resolved in the host's view (the command's view cannot redirect it). Any
/// other address is refused.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct UnixSocketGrant {
    /// The path as the user gave it (absolute).
    pub given: PathBuf,
    /// Its canonical path, the one the runner connects to.
    pub path: PathBuf,
    /// A socket that equals root on the host (the Docker, containerd or Podman socket): said
    /// loudly in the warnings.
    pub root_equivalent: bool,
}

/// Variables that name a socket, kept when their value is a granted socket.
const SOCKET_VARS: &[&str] = &["SSH_AUTH_SOCK"];

/// Sockets whose clients control a container runtime or the system, as root (by file name).
const ROOT_EQUIVALENT_SOCKETS: &[&str] = &["docker.sock", "containerd.sock", "podman.sock", "crio.sock", "buildkitd.sock", "libvirt-sock", "incus.socket", "unix.socket"];

impl UnixSocketGrant {
    /// The grant for a (given, canonical) pair of the policy.
    #[must_use]
    pub fn new(given: &Path, path: &Path) -> Self {
        let root_equivalent = [given, path].iter().any(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| ROOT_EQUIVALENT_SOCKETS.contains(&n)))
            || path.starts_with("/run/containerd") || path.starts_with("/run/docker");
        UnixSocketGrant { given: given.to_path_buf(), path: path.to_path_buf(), root_equivalent }
    }

    /// Whether `addr` (a pathname socket address's bytes, without the NUL) names this socket.
    #[must_use]
    pub fn matches(&self, addr: &[u8]) -> bool {
        !addr.is_empty() && (addr == path_bytes(&self.given) || addr == path_bytes(&self.path))
    }
}

#[cfg(unix)]
fn path_bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

#[cfg(not(unix))]
fn path_bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_encoded_bytes()
}

/// The Linux backend's compiled artefacts of a [`Plan`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct LinuxPlan {
    /// Namespaces and mounts (Full level).
    pub namespaces: Option<NamespacePlan>,
    /// Landlock, when applied.
    pub landlock: Option<LandlockPlan>,
    /// seccomp, when applied.
    pub seccomp: Option<SeccompPlan>,
    /// rlimits applied to the command.
    pub rlimits: Vec<RlimitSetting>,
    /// Process count mechanism.
    pub process_limit: ProcessLimit,
    /// Memory bound.
    pub memory_limit: MemoryLimit,
    /// Per-run scratch directory (caches), removed after the run.
    pub scratch: Option<PathBuf>,
    /// Drop every capability (running as root).
    pub drop_capabilities: bool,
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
            .map(|p| rule(p, if t.scratch_write.iter().any(|s| Path::new(s) == p) { "scratch" } else { "allow_paths.write" }))
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

impl Plan {
    /// Namespaces and mounts (Linux, Full level).
    #[must_use]
    pub fn namespaces(&self) -> Option<&NamespacePlan> {
        self.linux.as_ref().and_then(|l| l.namespaces.as_ref())
    }

    /// The Landlock ruleset (Linux).
    #[must_use]
    pub fn landlock(&self) -> Option<&LandlockPlan> {
        self.linux.as_ref().and_then(|l| l.landlock.as_ref())
    }

    /// The seccomp filter (Linux).
    #[must_use]
    pub fn seccomp(&self) -> Option<&SeccompPlan> {
        self.linux.as_ref().and_then(|l| l.seccomp.as_ref())
    }

    /// How the process count is bounded (Linux); [`ProcessLimit::Unbounded`] elsewhere.
    #[must_use]
    pub fn process_limit(&self) -> &ProcessLimit {
        self.linux.as_ref().map_or(&ProcessLimit::Unbounded, |l| &l.process_limit)
    }

    /// How memory is bounded (Linux); [`MemoryLimit::Unbounded`] elsewhere.
    #[must_use]
    pub fn memory_limit(&self) -> &MemoryLimit {
        self.linux.as_ref().map_or(&MemoryLimit::Unbounded, |l| &l.memory_limit)
    }

    /// The rlimits applied to the command (in the numbering of the plan's platform).
    #[must_use]
    pub fn rlimits(&self) -> &[RlimitSetting] {
        match (&self.linux, &self.macos) {
            (Some(l), _) => &l.rlimits,
            (None, Some(m)) => &m.rlimits,
            (None, None) => &[],
        }
    }

    /// Whether every capability is dropped (Linux, running as root).
    #[must_use]
    pub fn drop_capabilities(&self) -> bool {
        self.linux.as_ref().is_some_and(|l| l.drop_capabilities)
    }
}

/// Chooses the level for `policy` on `caps`.
///
/// # Errors
/// [`SandboxError::LevelUnavailable`] when the requested or required level cannot be met here,
/// naming what is missing and how to get it.
pub fn choose_level(policy: &SandboxPolicy, caps: &Capabilities) -> Result<SandboxLevel, SandboxError> {
    let best = caps.best_level();
    let level = if policy.mode == SandboxMode::FullAccess {
        SandboxLevel::None
    } else {
        match policy.level {
            LevelSetting::Auto => best,
            LevelSetting::Exactly(l) if l <= best => l,
            LevelSetting::Exactly(l) => {
                return Err(SandboxError::LevelUnavailable(format!(
                    "sandbox level {l} is not available here (best: {best}): {}",
                    caps.missing_for(l).join("; ")
                )))
            }
        }
    };
    if let Some(req) = policy.require_level {
        if level < req {
            let mut why = caps.missing_for(req);
            if why.is_empty() {
                why.push(format!("the policy selects level {level}"));
            }
            return Err(SandboxError::LevelUnavailable(format!(
                "required sandbox level {req} cannot be met (would run at {level}): {}",
                why.join("; ")
            )));
        }
    }
    if level == SandboxLevel::None && !policy.unconfined_acknowledged {
        return Err(SandboxError::LevelUnavailable(format!(
            "no kernel sandbox is available here ({}); refusing to run unconfined without --dangerously-allow-full-access",
            caps.missing_for(SandboxLevel::Minimal).join("; ")
        )));
    }
    Ok(level)
}

/// The caller's environment as UTF-8 pairs (non-UTF-8 variables are dropped).
#[must_use]
pub fn caller_env() -> Vec<(String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
}

/// Inputs of [`make_plan`] that come from the run rather than the policy.
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
}

/// Whether a run at `level` uses the namespaces and mounts (private `/tmp` included): at Full,
/// and also when the level fell to Minimal only because Landlock is missing (a 5.10 kernel, or
/// Landlock left out of `lsm=`) while user namespaces work: read-only mounts, masks, a private
/// /dev and PID/network isolation then carry what they can. An explicit `--level minimal` stays
/// seccomp only.
#[must_use]
pub fn uses_namespaces(policy: &SandboxPolicy, caps: &Capabilities, level: SandboxLevel) -> bool {
    let userns = caps.user_namespaces.as_ref().is_some_and(|u| u.available);
    let mounts_without_landlock =
        level == SandboxLevel::Minimal && policy.level == LevelSetting::Auto && caps.landlock.abi == 0 && userns;
    level == SandboxLevel::Full || mounts_without_landlock
}

/// Validates the policy, chooses the level and builds the plan: the one place every plan comes
/// from.
///
/// # Errors
/// [`SandboxError::Policy`] for an invalid policy, [`SandboxError::LevelUnavailable`] (see
/// [`choose_level`]), [`SandboxError::Plan`] when a user-requested path does not exist or the
/// seccomp table fails to compile, [`SandboxError::Unsupported`] for a platform without a
/// backend.
pub fn make_plan(policy: &SandboxPolicy, caps: &Capabilities, ctx: &RunContext) -> Result<Plan, SandboxError> {
    policy.validate()?;
    let level = choose_level(policy, caps)?;
    make_plan_at(policy, caps, ctx, level)
}

/// [`make_plan`] for a policy already validated and a level already chosen (a run does both
/// once, before it makes its scratch directory).
pub(crate) fn make_plan_at(policy: &SandboxPolicy, caps: &Capabilities, ctx: &RunContext, level: SandboxLevel) -> Result<Plan, SandboxError> {
    if policy.platform != caps.platform {
        return Err(SandboxError::Plan(format!("the policy was built for {} but the plan is for {}", policy.platform, caps.platform)));
    }
    let confined = level > SandboxLevel::None;
    let full = uses_namespaces(policy, caps, level);
    // The allowlist holds where the proxy is the only way out: the sandbox's own network
    // namespace (Full), or, in the host's, where the runner answers every connect (it lets TCP
    // reach the proxy and the sandbox's own listeners, and nothing else; UDP refused).
    let broker = caps.seccomp_broker.as_ref().filter(|b| b.available);
    if policy.network_access == crate::policy::NetworkPolicy::Full && confined && caps.platform != Platform::Linux {
        return Err(SandboxError::Unsupported(format!("network = \"full\" is implemented on Linux only (this plan is for {})", caps.platform)));
    }
    let proxy_port = (policy.network_access == crate::policy::NetworkPolicy::Allowlist && confined).then(|| {
        if full { crate::network::PROXY_PORT } else { ctx.proxy_port.unwrap_or(crate::network::PROXY_PORT) }
    });
    if proxy_port.is_some() && !(caps.platform == Platform::Linux && (full || broker.is_some())) {
        return Err(SandboxError::LevelUnavailable(format!(
            "--network allowlist needs Linux with the sandbox's own network namespace (Full level) or a runner that answers the command's connect calls (Linux 5.6); this run would be at {level}{}: the proxy could be bypassed, so nothing is run",
            match (caps.platform, &caps.seccomp_broker) {
                (Platform::Linux, Some(b)) => format!(" ({}; {})", caps.missing_for(SandboxLevel::Full).join("; "), b.detail),
                (Platform::Linux, None) => format!(" ({})", caps.missing_for(SandboxLevel::Full).join("; ")),
                _ => String::new(),
            }
        )));
    }
    // Secrets under /etc the caller can read (all of root's): denied like credentials.
    // (Only this machine's: a plan for another OS does not list this one's /etc.)
    #[cfg(unix)]
    let system_secrets = if confined && caps.platform == Platform::current() && !crate::ablation::is(ProtectionId::FsReadSystemSecrets) { system_secrets::system_secrets(caps.is_root) } else { Vec::new() };
    #[cfg(not(unix))]
    let system_secrets: Vec<PathBuf> = Vec::new();
    let with_secrets;
    let policy = if system_secrets.is_empty() {
        policy
    } else {
        let mut p = policy.clone();
        p.deny_paths.extend(system_secrets.iter().cloned());
        with_secrets = p;
        &with_secrets
    };
    #[cfg(unix)]
    crate::timing::stamp("plan_secrets");
    // One resolver for the whole plan (the filesystem is taken as unchanged while it is made).
    let mut resolver = resolve::PathResolver::new();
    // Toolchain configs without their credentials.
    let scrubbed = match (&policy.home, confined && policy.mode != SandboxMode::FullAccess) {
        (Some(h), true) if !crate::ablation::is(ProtectionId::ConfigCredentials) => configs::scrub_known(&mut resolver, h),
        _ => Vec::new(),
    };
    // Standard: a config with credentials is denied, and the tool is pointed at a scrubbed copy
    // in the per-run scratch dir (or, for cargo, which has no such variable, goes without it).
    let mut config_copies: Vec<(PathBuf, String)> = Vec::new();
    let mut config_env: Vec<(String, String)> = Vec::new();
    let mut config_reads: Vec<PathBuf> = Vec::new();
    let with_configs;
    let policy = if full || scrubbed.is_empty() {
        policy
    } else {
        let mut p = policy.clone();
        for c in &scrubbed {
            if c.removed.is_empty() {
                config_reads.push(c.path.clone());
                continue;
            }
            p.deny_paths.push(c.path.clone());
            if let (Some(var), Some(dir)) = (c.env.as_deref(), &ctx.scratch) {
                let dest = dir.join("config").join(var.to_ascii_lowercase());
                match config_copies.iter_mut().find(|(d, _)| *d == dest) {
                    // Both git files: one merged copy, in the order git reads them.
                    Some((_, text)) => text.push_str(&c.content),
                    None => {
                        config_copies.push((dest.clone(), c.content.clone()));
                        config_env.push((var.to_string(), dest.display().to_string()));
                    }
                }
            }
        }
        // A clean git file beside a scrubbed one must reach the merged copy too.
        if config_env.iter().any(|(k, _)| k == "GIT_CONFIG_GLOBAL") {
            for c in scrubbed.iter().filter(|c| c.kind == configs::ConfigKind::Git && c.removed.is_empty()) {
                if let Some((_, text)) = config_copies.iter_mut().find(|(d, _)| d.ends_with("git_config_global")) {
                    text.insert_str(0, &c.content);
                }
            }
        }
        with_configs = p;
        &with_configs
    };
    #[cfg(unix)]
    crate::timing::stamp("plan_configs");
    // Protected workspace paths: private copies at Full for the ones that exist (where the
    // kernel has overlay mounts in a user namespace), a review in place after the run otherwise.
    let protected::ProtectedSet { paths: mut protected, mut unprotectable, nested_walks, nested_names, git_config_files, in_scratch, walk_records } =
        if confined && policy.mode == SandboxMode::WorkspaceWrite && !(crate::ablation::is(ProtectionId::WorkspacePersistence) || crate::ablation::is(ProtectionId::WorkspacePersistenceLive)) {
            protected::protected_paths(&mut resolver, policy)
        } else {
            protected::ProtectedSet::default()
        };
    // What a protected path leads to in `/tmp` or `/dev/shm`: the host's, writable, below Full
    // (a private one for the run at Full).
    if level != SandboxLevel::Full {
        unprotectable.extend(in_scratch);
    }
    // Overlays in a user namespace from 5.11. Where overlayfs is not loaded (the sandbox cannot
    // load its module) the mount fails and the path is bound read-only for the run instead: the
    // protection table says so beforehand.
    // A protected file other than the `.git` of a worktree or submodule checkout stays in place
    // and is reviewed after the run: a bound copy could not be replaced by a rename (`sed -i`,
    // `git submodule add` writing .gitmodules fail with EBUSY). A symbolic link cannot be
    // bound either (the mount would land on its target, which is protected on its own).
    let overlays = kernel_at_least(&caps.kernel, 5, 11);
    for p in &mut protected {
        let bindable = p.kind != protected::ProtectedKind::File
            || (p.path.file_name().is_some_and(protected::is_dotgit) && !std::fs::symlink_metadata(&p.path).is_ok_and(|m| m.file_type().is_symlink()));
        p.private = level == SandboxLevel::Full && overlays && !p.absent && bindable;
    }
    #[cfg(unix)]
    crate::timing::stamp("plan_protected");
    // The backend's artefacts.
    let limits = Limits {
        file_size_bytes: policy.max_file_size_bytes,
        open_files: policy.max_open_files,
        processes: policy.max_processes,
        memory_bytes: policy.max_memory_bytes.unwrap_or_else(|| default_memory_bytes(caps.mem_total_bytes)),
        tmp_bytes: policy.max_tmp_bytes.unwrap_or_else(|| default_tmp_bytes(caps.mem_total_bytes)),
    };
    let mut windows = None;
    let (linux, macos) = match caps.platform {
        Platform::Linux => (
            Some(crate::linux::compile::compile(crate::linux::compile::Inputs {
                policy,
                caps,
                ctx,
                level,
                full,
                scrubbed: &scrubbed,
                protected: &protected,
                config_reads: &mut config_reads,
                resolver: &mut resolver,
            })?),
            None,
        ),
        Platform::Macos if confined && !policy.allow_unix_sockets.is_empty() => {
            // Seatbelt's `(remote unix-socket (path-literal …))` filter is not yet in the SBPL
            // subset this backend generates and evaluates: refused rather than granted blind.
            return Err(SandboxError::Unsupported("--allow-unix-socket is not implemented on macOS yet (Linux only)".into()));
        }
        Platform::Macos => {
            let helper = ctx.helper_exe.clone().or_else(|| std::env::current_exe().ok());
            let marker = format!("localgpt-sandbox-{}", ctx.run_id.as_deref().unwrap_or("run"));
            let m = confined.then(|| {
                crate::macos::profile::compile(crate::macos::profile::Inputs {
                    policy,
                    level,
                    protected: &protected,
                    scratch: ctx.scratch.as_deref(),
                    helper: helper.as_deref(),
                    marker: &marker,
                    resolver: &mut resolver,
                    resolve_here: caps.platform == Platform::current(),
                })
            });
            (None, m)
        }
        Platform::Windows if confined && (!policy.allow_unix_sockets.is_empty() || policy.network_allowlist.is_some()) => {
            return Err(SandboxError::Unsupported("--allow-unix-socket and the network allowlist are not implemented on Windows (Linux only)".into()));
        }
        Platform::Windows => {
            windows = confined.then(|| {
                crate::windows::acl::compile(crate::windows::acl::Inputs {
                    policy,
                    protected: &protected,
                    limits: &limits,
                    scratch: ctx.scratch.as_deref(),
                    resolver: &mut resolver,
                })
            });
            (None, None)
        }
    };
    #[cfg(unix)]
    crate::timing::stamp("plan_backend");
    let mut env = if full {
        let private_scratch = (policy.mode == SandboxMode::WorkspaceWrite).then(|| PathBuf::from(PRIVATE_SCRATCH));
        let mut e = env::plan_environment(&ctx.caller_env, &policy.environment, &policy.workspace_path, private_scratch.as_deref());
        if private_scratch.is_some() {
            e.vars.retain(|(k, _)| k != "TMPDIR");
            e.vars.push(("TMPDIR".into(), "/tmp".into()));
        }
        e
    } else if confined {
        let mut e = env::plan_environment(&ctx.caller_env, &policy.environment, &policy.workspace_path, ctx.scratch.as_deref());
        for (k, v) in &config_env {
            e.vars.retain(|(n, _)| n != k);
            e.vars.push((k.clone(), v.clone()));
        }
        // A TMPDIR the command cannot write (outside every writable grant) would make mktemp
        // and every temporary file fail: it points to /tmp instead, as at Full.
        if policy.mode == SandboxMode::WorkspaceWrite {
            let writable = |d: &Path| d.starts_with(&policy.workspace_path) || policy.writable_paths.iter().any(|w| d.starts_with(w));
            if e.vars.iter().any(|(k, v)| k == "TMPDIR" && !writable(Path::new(v))) {
                e.vars.retain(|(k, _)| k != "TMPDIR");
                e.vars.push(("TMPDIR".into(), "/tmp".into()));
                e.redirected.push("TMPDIR".into());
            }
        }
        e
    } else {
        EnvPlan { vars: ctx.caller_env.clone(), dropped: Vec::new(), redirected: Vec::new() }
    };
    if let (Some(port), true) = (proxy_port, policy.network_allowlist.is_some()) {
        for (k, v) in env::proxy_vars(port) {
            env.vars.retain(|(n, _)| *n != k);
            env.vars.push((k, v));
        }
    }
    // A variable that names a granted socket (`SSH_AUTH_SOCK`) is kept: the grant says the
    // command may use it.
    if confined {
        for (k, v) in &ctx.caller_env {
            let granted = policy.allow_unix_sockets.iter().any(|(g, c)| Path::new(v) == g || Path::new(v) == c);
            if SOCKET_VARS.contains(&k.as_str()) && granted && !env.vars.iter().any(|(n, _)| n == k) {
                env.vars.push((k.clone(), v.clone()));
                env.dropped.retain(|d| d != k);
            }
        }
    }
    // A member of a Cargo workspace whose root's target/ the command cannot write: cargo would
    // fail to build there, so it builds into the workspace instead (said in a warning).
    let mut cargo_root = None;
    if confined && policy.mode == SandboxMode::WorkspaceWrite && !env.vars.iter().any(|(k, _)| k == "CARGO_TARGET_DIR") {
        let private_scratch: &[&str] = if full { &["/tmp", "/dev/shm"] } else { &[] };
        let writable = |d: &Path| {
            d.starts_with(&policy.workspace_path) || policy.writable_paths.iter().any(|w| !private_scratch.iter().any(|t| w == Path::new(t)) && d.starts_with(w))
        };
        if let Some(root) = env::cargo_member_root(&policy.workspace_path, &writable) {
            env.vars.push(("CARGO_TARGET_DIR".into(), policy.workspace_path.join("target").display().to_string()));
            env.redirected.push("CARGO_TARGET_DIR".into());
            cargo_root = Some(root);
        }
    }
    let mut plan = Plan {
        level,
        kernel: caps.kernel.clone(),
        kernel_level: caps.kernel_level(),
        mode: policy.mode,
        workspace: policy.workspace_path.clone(),
        access: Access::of(policy),
        limits,
        network: policy.network_access,
        env,
        timeout_secs: policy.timeout_secs,
        max_output_bytes: policy.max_output_bytes,
        system_secrets,
        protected,
        unprotectable,
        nested_walks,
        nested_names,
        walk_records,
        git_config_files,
        configs: scrubbed.iter().map(|c| (c.path.clone(), c.removed.clone())).collect(),
        config_copies,
        network_allowlist: if confined { policy.network_allowlist.clone() } else { None },
        proxy_port: proxy_port.filter(|_| policy.network_allowlist.is_some()),
        audit_log: policy.audit_log.clone(),
        unix_sockets: if confined { policy.allow_unix_sockets.iter().map(|(g, c)| UnixSocketGrant::new(g, c)).collect() } else { Vec::new() },
        protections: Vec::new(),
        warnings: Vec::new(),
        linux,
        macos,
        windows,
    };
    plan.protections = match caps.platform {
        Platform::Macos => crate::macos::protections::protections(&plan, caps),
        Platform::Windows => crate::windows::protections::protections(&plan, caps),
        Platform::Linux => protections(&plan, caps),
    };
    plan.warnings = warnings(&plan, caps, policy);
    if let Some(root) = cargo_root {
        plan.warnings.push(format!(
            "the workspace is a member of the Cargo workspace {}, whose target/ is not writable here: cargo builds into {} for this run (CARGO_TARGET_DIR; --allow-write {} to build into the shared one)",
            root.display(),
            plan.workspace.join("target").display(),
            root.join("target").display()
        ));
    }
    if let Some(given) = &policy.workspace_via_symlink {
        plan.warnings.insert(0, format!(
            "the workspace was given as {}, which goes through a symbolic link: the writable workspace is {}",
            given.display(),
            plan.workspace.display()
        ));
    }
    Ok(plan)
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

impl Plan {
    /// The per-run cgroup directories to create, one per hierarchy (cgroup v1 has one per
    /// controller; v2 one for both), with their limits.
    #[must_use]
    pub fn cgroup_settings(&self) -> Vec<CgroupSetting> {
        let mut v: Vec<CgroupSetting> = Vec::new();
        let mut add = |base: &Path, version: &str, file: &str, value: String| {
            match v.iter_mut().find(|c| c.base == base) {
                Some(c) => c.limits.push((file.into(), value)),
                None => v.push(CgroupSetting { base: base.to_path_buf(), version: version.into(), limits: vec![(file.into(), value)] }),
            }
        };
        if let ProcessLimit::Cgroup { base, version, max } = self.process_limit() {
            add(base, version, "pids.max", max.to_string());
        }
        if let MemoryLimit::Cgroup { base, version, max_bytes } = self.memory_limit() {
            let file = if version == "v1" { "memory.limit_in_bytes" } else { "memory.max" };
            add(base, version, file, max_bytes.to_string());
            if version == "v2" {
                // No swap beyond the limit either.
                add(base, version, "memory.swap.max", "0".into());
            }
        }
        v
    }
}

/// Where caches go at Full level: inside the private `/tmp`, gone with the namespace.
pub const PRIVATE_SCRATCH: &str = "/tmp/.localgpt-cache";

/// `paths` for a message: displayed, comma-separated.
fn path_list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// One protection row.
pub(crate) fn prot(id: ProtectionId, state: ProtectionState, mechanism: &str, detail: impl Into<String>) -> Protection {
    Protection { id, state, mechanism: mechanism.into(), detail: detail.into() }
}

/// The protection table for a plan.
#[must_use]
pub fn protections(plan: &Plan, caps: &Capabilities) -> Vec<Protection> {
    use ProtectionState::{Degraded, Enforced, Off};
    let mut v = Vec::new();
    if plan.level == SandboxLevel::None {
        let why = if plan.mode == SandboxMode::FullAccess { "full-access mode: no confinement" } else { "level none: no kernel confinement" };
        use ProtectionId as P;
        for id in [P::FsWriteOutside, P::FsReadCredentials, P::FsReadSystemSecrets, P::ConfigCredentials, P::Network, P::SignalsOutside, P::Ptrace, P::SyscallAbi, P::EnvSecrets, P::InheritedFds, P::ProcessCount] {
            v.push(prot(id, Off, "none", why));
        }
        v.push(prot(ProtectionId::TimeoutKillTree, Enforced, "supervisor (subreaper)", "every descendant is killed at the timeout and when the command exits"));
        v.push(prot(ProtectionId::OutputCap, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)));
        return v;
    }
    let abi = plan.landlock().map_or(0, |l| l.handled_abi);
    let ll = plan.landlock().is_some();
    let ns = plan.namespaces();
    // A per-run cgroup bounds the command only if it cannot write cgroupfs: Landlock grants
    // `/sys` read-only, and Full's fresh sysfs has no cgroup mount. Without either (minimal), the
    // cgroup's files are the command's uid's (root's, or a delegated subtree's): it can raise its
    // limits or move itself out (red-team finding: `echo $$ > /sys/fs/cgroup/memory/cgroup.procs`
    // as root at minimal).
    let cgroup_out_of_reach = ll || ns.is_some();
    let cgroup_in_reach = "the filesystem is not confined at this level: the cgroup's files belong to the command's uid, which can raise its limits or move itself out of it";
    let truncate_guard = plan.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.syscall == "truncate"));
    // A fresh root: reads are confined by the mount namespace, and Landlock, where there is
    // Landlock, handles no read right (nor truncate, which the read-only mounts refuse).
    let reads_by_mounts = ns.is_some_and(|n| n.fresh_root.is_some()) && plan.landlock().is_none_or(|l| l.handled_fs & crate::linux::landlock::fs::READ_FILE == 0);
    let fs_off = |id: ProtectionId, what: &str| prot(id, Off, "none", format!("{what}: no Landlock at level {}", plan.level));
    if ll {
        v.push(prot(ProtectionId::FsWriteOutside, Enforced, "landlock", "writes only in the workspace and granted paths"));
        v.push(if reads_by_mounts {
            prot(ProtectionId::FsReadCredentials, Enforced, "mount masks",
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null) or absent from the fresh root", ns.map_or(0, |n| n.masks.len())))
        } else {
            prot(ProtectionId::FsReadCredentials, Enforced, "landlock", "credential paths get no rule (siblings granted instead, snapshot at launch)")
        });
        v.push(if reads_by_mounts {
            prot(ProtectionId::FsTruncateOutside, Enforced, "read-only mounts", "everything outside the workspace and writable paths is mounted read-only")
        } else if abi >= 3 {
            prot(ProtectionId::FsTruncateOutside, Enforced, "landlock (ABI 3 truncate)", "truncate(2) needs the truncate right")
        } else if ns.is_some() {
            prot(ProtectionId::FsTruncateOutside, Enforced, "read-only mounts",
                format!("everything outside the workspace and writable paths is mounted read-only (Landlock ABI {abi} < 3 does not control truncation)"))
        } else if truncate_guard {
            prot(ProtectionId::FsTruncateOutside, Enforced, "seccomp (truncate guard)",
                format!("Landlock ABI {abi} < 3 does not control truncation: truncate(2) fails everywhere (ftruncate on a file opened for writing works) and open(O_RDONLY|O_TRUNC) fails"))
        } else {
            prot(ProtectionId::FsTruncateOutside, Degraded, "landlock", format!("Landlock ABI {abi} < 3 does not control truncate(2) on readable files"))
        });
        v.push(prot(ProtectionId::FsLinkRenameOut, Enforced, if abi >= 2 { "landlock (ABI 2 refer)" } else { "landlock (ABI 1 forbids reparenting)" },
            "files cannot be linked or renamed out of the workspace"));
        if abi >= 5 {
            v.push(prot(ProtectionId::FsDeviceIoctl, Enforced, "landlock (ABI 5 ioctl_dev)", "ioctl only on granted device nodes"));
        } else if !ns.is_some_and(|n| n.private_dev) {
            v.push(prot(ProtectionId::FsDeviceIoctl, Degraded, "landlock", format!("Landlock ABI {abi} < 5 does not control device ioctls")));
        }
    } else if let Some(n) = ns {
        v.push(prot(ProtectionId::FsWriteOutside, Enforced, "read-only mounts",
            "everything outside the workspace, the private /tmp and writable paths is mounted read-only; /dev is private"));
        v.push(if n.unmaskable.is_empty() {
            prot(ProtectionId::FsReadCredentials, Enforced, "mount masks",
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null); without Landlock, ones created during the run are readable", n.masks.len()))
        } else {
            prot(ProtectionId::FsReadCredentials, Degraded, "mount masks",
                format!("{} existing credential paths are masked, but without Landlock nothing hides a denied path that is absent at launch inside a writable grant once the command creates it: {}",
                    n.masks.len(), path_list(&n.unmaskable)))
        });
        v.push(prot(ProtectionId::FsTruncateOutside, Enforced, "read-only mounts", "everything outside the workspace and writable paths is mounted read-only"));
        v.push(prot(ProtectionId::FsLinkRenameOut, Enforced, "read-only mounts", "links and renames out of the workspace cross into read-only mounts and fail"));
        if !n.private_dev {
            v.push(fs_off(ProtectionId::FsDeviceIoctl, "device ioctls are not controlled"));
        }
    } else {
        v.push(fs_off(ProtectionId::FsWriteOutside, "writes outside the workspace are not confined"));
        v.push(fs_off(ProtectionId::FsReadCredentials, "credentials are readable"));
        v.push(fs_off(ProtectionId::FsTruncateOutside, "truncation outside the workspace is not confined"));
        v.push(fs_off(ProtectionId::FsLinkRenameOut, "links and renames out of the workspace are not confined"));
        v.push(fs_off(ProtectionId::FsDeviceIoctl, "device ioctls are not controlled"));
    }
    let scrubbed: Vec<String> = plan.configs.iter().filter(|(_, r)| !r.is_empty()).map(|(p, r)| format!("{} ({})", p.display(), r.join(", "))).collect();
    v.push(match (scrubbed.is_empty(), ns.is_some(), ll) {
        (true, _, _) => prot(ProtectionId::ConfigCredentials, Enforced, "scrubbed copies", format!("{} toolchain config files, none with credentials", plan.configs.len())),
        (false, true, _) => prot(ProtectionId::ConfigCredentials, Enforced, "scrubbed copies bound over the originals", format!("credentials removed from {}", scrubbed.join("; "))),
        (false, false, true) => prot(ProtectionId::ConfigCredentials, Enforced, "originals denied (landlock), tools pointed at scrubbed copies",
            format!("credentials removed from {} (cargo has no variable for its config file: it runs without it)", scrubbed.join("; "))),
        (false, false, false) => prot(ProtectionId::ConfigCredentials, Off, "none", format!("without Landlock or namespaces these stay readable: {}", scrubbed.join("; "))),
    });
    let n_secrets = plan.system_secrets.len();
    let who = if caps.is_root { "root-only files under /etc (shadow, host keys, …)" } else { "group-readable secrets under /etc" };
    v.push(match (ns.is_some(), ll) {
        (true, _) => prot(ProtectionId::FsReadSystemSecrets, Enforced, "mount masks", format!("{n_secrets} {who} are masked")),
        (false, true) => prot(ProtectionId::FsReadSystemSecrets, Enforced, "landlock (denied, siblings granted)", format!("{n_secrets} {who} are denied")),
        (false, false) if n_secrets == 0 && !caps.is_root => prot(ProtectionId::FsReadSystemSecrets, Enforced, "file permissions", "no secret under /etc is readable by this user"),
        (false, false) => prot(ProtectionId::FsReadSystemSecrets, Off, "none", format!("without Landlock or namespaces, {n_secrets} {who} stay readable")),
    });
    v.push(if reads_by_mounts {
        prot(ProtectionId::FsReadOutside, Enforced, "fresh root (mount namespace)",
            "the command's / holds only the workspace, system and toolchain dirs, scratch and granted paths: nothing else of the host exists")
    } else if ll {
        prot(ProtectionId::FsReadOutside, Enforced, "landlock", "reads only in the workspace, system and toolchain dirs, scratch and granted paths")
    } else if ns.is_some_and(|n| n.private_dev) {
        prot(ProtectionId::FsReadOutside, Degraded, "none",
            format!("no Landlock, and no fresh root for this policy (its grants include / or need more than {} binds): files outside the workspace (other than masked credentials) are readable", crate::linux::mounts::MAX_FRESH_ROOT_BINDS))
    } else {
        prot(ProtectionId::FsReadOutside, Degraded, "none", "no Landlock: files outside the workspace (other than masked credentials) are readable")
    });
    // (The private /dev row where Landlock does not control ioctls; the other cases are above.)
    if !ll || abi < 5 {
        if let Some(n) = ns.filter(|n| n.private_dev) {
            v.push(prot(ProtectionId::FsDeviceIoctl, Enforced, "private /dev",
                format!("only {} and a private devpts exist in /dev", path_list(&n.dev_nodes))));
        }
    }
    v.push(match ns {
        Some(_) => prot(ProtectionId::FsMetadataOutside, Enforced, "read-only mounts",
            "everything outside the workspace, the private /tmp and writable paths is mounted read-only: chmod, chown, utimensat and xattrs fail with EROFS"),
        None => prot(ProtectionId::FsMetadataOutside, Degraded, if ll { "landlock (partial)" } else { "none" },
            "Landlock does not control chmod, chown, utimensat or xattrs outside the workspace; Full level's read-only mounts do"),
    });
    v.push(match ns {
        Some(n) => prot(ProtectionId::FsStatSecrets, Enforced, "mount masks",
            if reads_by_mounts {
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null); outside the grants nothing of the host exists in the fresh root", n.masks.len())
            } else {
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null); paths created after launch are covered by Landlock only", n.masks.len())
            }),
        None => prot(ProtectionId::FsStatSecrets, Degraded, "none", "stat() of credential files still works (existence and size leak); Full level hides them"),
    });
    v.push(match ns.and_then(|n| n.home_view.as_ref()) {
        Some(h) => prot(ProtectionId::HomePrivate, Enforced, "mount namespace (empty read-only tmpfs over $HOME)",
            format!("$HOME holds only the {} granted paths under it; watches and stat() on $HOME see nothing else", h.keep.len())),
        None if ns.is_some() => prot(ProtectionId::HomePrivate, Enforced, "mount namespace", "$HOME is not separate from the granted paths (no $HOME, or the workspace contains it)"),
        None => prot(ProtectionId::HomePrivate, Degraded, if ll { "landlock (partial)" } else { "none" },
            "Landlock refuses to list or read $HOME but does not control inotify or stat(): a watch on $HOME sees the names of the files the user creates and opens; Full level gives a private $HOME"),
    });
    // Every descendant is killed when the command ends (the after-run review of the protected
    // paths relies on it: a survivor could write after the review).
    // Below ABI 6 the runner checks every signal instead (seccomp → the runner).
    let signal_guard = plan.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.syscall == "kill" && r.action == crate::linux::seccomp::SeccompDeny::UserNotif));
    let tree_killed = ns.is_some() || (matches!(plan.process_limit(), ProcessLimit::Cgroup { .. }) && cgroup_out_of_reach) || abi >= 6 || signal_guard;
    v.extend(workspace_persistence(plan, caps, tree_killed));
    v.push(match ns {
        Some(n) if n.tmpfs.iter().any(|t| t == Path::new("/tmp")) => prot(ProtectionId::TmpPrivate, Enforced, "mount namespace (tmpfs)",
            format!("/tmp and /dev/shm are private tmpfs mounts{}, discarded after the run{}",
                n.tmpfs_size_bytes.map(|b| format!(" of at most {} MiB and {} inodes each", b >> 20, n.tmpfs_inodes.unwrap_or(0))).unwrap_or_default(),
                if n.tmpfs_rw_binds.is_empty() { String::new() } else {
                    format!("; only the granted {} of the host's are bound into them", path_list(&n.tmpfs_rw_binds))
                })),
        Some(n) if plan.mode == SandboxMode::WorkspaceWrite => prot(ProtectionId::TmpPrivate, Degraded, "mount namespace",
            format!("a writable path lies under /tmp, so /tmp stays the host's (read-write); private: {}", path_list(&n.tmpfs))),
        Some(_) => prot(ProtectionId::TmpPrivate, Enforced, "read-only mounts", "/tmp and /dev/shm are read-only in read-only mode"),
        None => prot(ProtectionId::TmpPrivate, Degraded, "none", "/tmp and /dev/shm are shared with the host (read-write); Full level gives a private /tmp"),
    });
    // Network, then host unix sockets: where the runner answers (seccomp user notification),
    // every `connect` and `listen` goes to it; it checks and makes the call itself.
    let granted = granted_sockets_text(plan);
    let via_runner = plan.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.action == crate::linux::seccomp::SeccompDeny::UserNotif));
    let and_granted = if granted.is_empty() { String::new() } else { format!(", and the granted {granted} (connect-only; stream sockets)") };
    // The sandbox's own network namespace (Full, unless network = "full" keeps the host's).
    let own_net = ns.is_some_and(|n| !n.host_network);
    let open_net = plan.network == crate::policy::NetworkPolicy::Full;
    v.push(match (own_net, &plan.network_allowlist) {
        _ if open_net => prot(ProtectionId::Network, Off, "none (network = \"full\")",
            "the host's network is open on request: TCP and UDP to any address, the host's loopback services and the cloud metadata address included; every other protection is kept, and the host's unix sockets stay out of reach"),
        (_, Some(a)) => {
            let list = |v: &[crate::network::DomainRule]| if v.is_empty() { "none".to_string() } else { v.iter().map(|d| d.text.clone()).collect::<Vec<_>>().join(", ") };
            prot(ProtectionId::Network, Enforced,
                if own_net { "private network namespace (only lo) + the runner's allowlist proxy + seccomp (socket families)" } else { "the runner's allowlist proxy on the host's loopback + seccomp (TCP only; bind, listen and connect → the runner, which lets connect reach only the proxy and the sandbox's own listeners)" },
                format!("only through the proxy at 127.0.0.1:{} (HTTP, CONNECT, SOCKS5): allowed domains {}, denied {}, ports {}; the runner resolves names itself and refuses loopback, private, link-local and other special addresses{}; a TLS tunnel's server name must be the requested host; {}",
                    plan.proxy_port.unwrap_or(crate::network::PROXY_PORT), list(&a.allow), list(&a.deny), a.ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", "),
                    if a.cidrs.is_empty() { String::new() } else { format!(" outside allow_cidrs {}", a.cidrs.iter().map(|c| format!("{}/{}", c.addr, c.prefix)).collect::<Vec<_>>().join(", ")) },
                    if own_net { "the command's DNS goes to the runner's stub on 127.0.0.1:53, which answers from the allowlist alone (allowed names: 127.0.0.1; others: REFUSED) and forwards nothing" } else { "the command has no UDP, so it resolves no name itself (the proxy resolves)" }))
        }
        (true, None) => prot(ProtectionId::Network, Enforced,
            if via_runner { "private network namespace (only lo) + seccomp (socket families) + every connect made by the runner" } else { "private network namespace (only lo) + seccomp (socket families)" },
            "TCP and UDP work on the sandbox's own loopback (local servers and their clients); nothing reaches the host's network; netlink routing queries only (they show lo); no packet or raw sockets"),
        (false, None) => {
            let mut net_mech = if via_runner { "seccomp (socket family and type; bind, listen and connect → the runner; no MSG_FASTOPEN, no SO_REUSEPORT)" } else { "seccomp (socket family, connect/bind/listen/accept)" }.to_string();
            if abi >= 4 {
                net_mech.push_str(" + landlock TCP (ABI 4)");
            }
            prot(ProtectionId::Network, Enforced, &net_mech, if via_runner {
                "TCP only on loopback, between the sandbox's own processes (the runner binds to loopback only, a wildcard address included, and connects only to the sandbox's own listeners; the host's loopback services answer connection refused); no UDP, SCTP, raw or packet sockets; netlink routing queries only, with no capability to change anything; unix sockets only between the sandbox's own processes"
            } else {
                "no AF_INET/AF_INET6/packet sockets (netlink: routing queries only, no capabilities to change anything); no connect, bind, listen or accept on any socket"
            })
        }
    });
    // Without the runner, unix sockets are socketpairs only wherever `connect` is free for TCP
    // (the sandbox's own namespace, or the host's opened on purpose).
    v.push(match (via_runner, own_net || open_net) {
        (true, _) => prot(ProtectionId::UnixSocketsOutside, Enforced, "seccomp (connect and listen → the runner, which checks what the path is bound to and makes the call itself)",
            format!("pathname sockets (docker.sock, D-Bus, systemd) are unreachable: connect reaches only sockets the sandbox's own processes listen on{and_granted}")),
        (false, true) => prot(ProtectionId::UnixSocketsOutside, Enforced, "seccomp (no socket(AF_UNIX): socketpairs only)",
            "pathname sockets (docker.sock, D-Bus, systemd) are unreachable: the command cannot create a unix socket to connect with"),
        (false, false) => prot(ProtectionId::UnixSocketsOutside, Enforced,
            if abi >= 9 { "seccomp (connect) + landlock resolve_unix (ABI 9)" } else { "seccomp (connect)" }, "pathname sockets (docker.sock, D-Bus, systemd) are unreachable"),
    });
    let mut abs_mech = if abi >= 6 { "seccomp (connect) + landlock scope (ABI 6)".to_string() } else { "seccomp (connect)".to_string() };
    if own_net {
        abs_mech.push_str(" + network namespace");
    }
    if via_runner && !own_net {
        abs_mech.push_str(" + bind and listen → the runner");
    }
    v.push(prot(ProtectionId::AbstractSocketsOutside, Enforced, &abs_mech,
        if own_net { "abstract unix sockets outside are unreachable, and the sandbox's own abstract names are invisible outside (network namespace)" } else { "abstract unix sockets outside are unreachable, and the command cannot listen on an abstract name (host processes could reach it)" }));
    let sched = if via_runner { "seccomp (prlimit64; setpriority, sched_setscheduler, sched_setattr and ioprio_set on another pid → the runner, which allows the sandbox's own)" } else { "seccomp (prlimit64, setpriority, sched_setscheduler, sched_setattr, ioprio_set)" };
    v.push(match (ns.is_some(), abi >= 6) {
        (true, true) => prot(ProtectionId::SignalsOutside, Enforced, "PID namespace + landlock scope (ABI 6) + seccomp (prlimit64)", "no process outside the sandbox is visible, signalable or has its resource limits changed"),
        (true, false) => prot(ProtectionId::SignalsOutside, Enforced, "PID namespace + seccomp (prlimit64)", "no process outside the sandbox is visible, signalable or has its resource limits changed"),
        (false, true) => prot(ProtectionId::SignalsOutside, Enforced, &format!("landlock scope (ABI 6) + {sched}"),
            "no signals to processes outside the sandbox, and no changes to their resource limits (a hard RLIMIT_CPU or RLIMIT_FSIZE would make the kernel kill them) or scheduling (SCHED_IDLE or nice 19 under busy loops would starve the runner and delay the timeout)"),
        (false, false) if signal_guard => prot(ProtectionId::SignalsOutside, Enforced,
            &format!("seccomp (kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal, F_SETOWN, setpgid into another group → the runner, which allows the sandbox's own processes and groups and keeps everyone out of the supervisor's; F_SETOWN_EX, FIOSETOWN, SIOCSPGRP refused) + {sched}"),
            format!("Landlock ABI {abi} < 6 has no signal scoping, so the runner checks each signal: none reaches a process outside the sandbox; nor do changes to their resource limits or scheduling")),
        (false, false) => prot(ProtectionId::SignalsOutside, Degraded, sched, format!("Landlock ABI {abi} < 6 has no signal scoping: kill of same-uid processes outside works (changing their resource limits or scheduling does not); only a PID namespace (Full level) stops it")),
    });
    v.push(if ll {
        prot(ProtectionId::Ptrace, Enforced, "seccomp + landlock", "no ptrace, process_vm_readv/writev; /proc/<pid>/mem, environ and root of processes outside are refused")
    } else if ns.is_some() {
        prot(ProtectionId::Ptrace, Enforced, "seccomp + PID namespace", "no ptrace, process_vm_readv/writev; processes outside are not visible in the sandbox's /proc")
    } else {
        prot(ProtectionId::Ptrace, Degraded, "seccomp", "ptrace and process_vm_readv/writev fail, but without Landlock /proc/<pid>/mem, environ and root of same-uid processes outside stay accessible")
    });
    v.push(prot(ProtectionId::SyscallAbi, Enforced, "seccomp (arch check, x32 deny)", "i386 int 0x80 kills the process; x32 syscalls fail"));
    v.push(prot(ProtectionId::IoUring, Enforced, "seccomp", "io_uring_setup/enter/register fail"));
    v.push(prot(ProtectionId::TtyInjection, Enforced, "seccomp + setsid", "TIOCSTI and TIOCLINUX fail; the command has no controlling terminal"));
    v.push(match ns {
        Some(n) if n.private_dev => prot(ProtectionId::OtherTerminals, Enforced, "private devpts instance", "the user's own terminals under /dev/pts are not visible"),
        _ => prot(ProtectionId::OtherTerminals, Degraded, "none",
            "/dev/pts must stay usable for script and pty-based tools, so the user's other terminals (same uid) can be opened, read and written; Full level mounts a private devpts"),
    });
    v.push(prot(ProtectionId::Keyring, Enforced, "seccomp", "keyctl/add_key/request_key fail"));
    v.push(prot(ProtectionId::SysvIpc, Enforced, if ns.is_some() { "seccomp + IPC namespace" } else { "seccomp" }, "SysV shm/msg/sem calls fail"));
    v.push(prot(ProtectionId::NamespacesMount, Enforced, if ns.is_some() { "seccomp + max_user_namespaces = 0 inside" } else { "seccomp" },
        "unshare, setns, namespace clone flags, clone3 and the mount family fail"));
    v.push(prot(ProtectionId::KernelSurface, Enforced, "seccomp", "bpf, perf_event_open, userfaultfd, open_by_handle_at, kexec, modules fail"));
    v.push(if ns.is_some() {
        prot(ProtectionId::KernelInfo, Enforced, "/proc and /sys masks",
            if own_net { "the OCI runtime spec's default masked paths (kallsyms, kcore, keys, timer_list, sched_debug, interrupts, firmware, …) are hidden, /proc/sys, /proc/sysrq-trigger and the rest read-only; a fresh sysfs whose /sys/class/net lists only lo" }
            else { "the OCI runtime spec's default masked paths (kallsyms, kcore, keys, timer_list, sched_debug, interrupts, firmware, …) are hidden, /proc/sys, /proc/sysrq-trigger and the rest read-only; /sys/class/net hidden where no fresh sysfs can be mounted (network = \"full\" keeps the host's network namespace)" })
    } else {
        prot(ProtectionId::KernelInfo, Degraded, "none",
            "no mount namespace at this level: /proc/kallsyms, /proc/timer_list, /proc/keys, /sys/firmware and /sys/class/net are the host's (Landlock grants /proc whole: its per-process entries cannot be listed ahead)")
    });
    v.push(if ns.is_some() {
        prot(ProtectionId::PidIsolation, Enforced, "PID namespace + fresh /proc", "ps shows only the sandbox's processes")
    } else {
        prot(ProtectionId::PidIsolation, Degraded, "none", format!(
            "no PID namespace at level {}: ps shows host processes, and /proc/<pid>/cmdline of every host process is readable (passwords and tokens passed in argv leak); Landlock cannot grant /proc per process, and Full level mounts a fresh /proc",
            plan.level))
    });
    v.push(prot(ProtectionId::InheritedFds, Enforced, "helper (close_range)", "every fd above 2 is closed before exec"));
    v.push(prot(ProtectionId::EnvSecrets, Enforced, "environment allowlist", format!("{} caller variables dropped", plan.env.dropped.len())));
    v.push(if ns.is_some() {
        prot(ProtectionId::Capabilities, Enforced, "user namespace + capset + bounding set + no_new_privs",
            "no capability in the host's namespace; every capability dropped inside the sandbox's own")
    } else if plan.drop_capabilities() {
        prot(ProtectionId::Capabilities, Enforced, "capset + bounding set + no_new_privs", "running as root: every capability dropped")
    } else {
        prot(ProtectionId::Capabilities, Enforced, "no_new_privs", "no capabilities held; setuid binaries cannot gain privileges")
    });
    v.push(match plan.process_limit() {
        ProcessLimit::Cgroup { version, .. } if !cgroup_out_of_reach => prot(ProtectionId::ProcessCount, Degraded, &format!("cgroup {version} pids.max"), cgroup_in_reach),
        ProcessLimit::Cgroup { max, version, .. } => prot(ProtectionId::ProcessCount, Enforced, &format!("cgroup {version} pids.max"), format!("at most {} tasks (processes and their threads)", max - 2)),
        ProcessLimit::Rlimit { max } if ns.is_some() => prot(ProtectionId::ProcessCount, Enforced, "RLIMIT_NPROC in a user namespace",
            format!("at most {max} processes, counted inside the sandbox's own user namespace")),
        ProcessLimit::Rlimit { max } => prot(ProtectionId::ProcessCount, Degraded, "RLIMIT_NPROC",
            format!("RLIMIT_NPROC = {max} counts every process of uid {} system-wide (its current ones + the sandbox's)", caps.uid)),
        ProcessLimit::Unbounded => prot(ProtectionId::ProcessCount, Degraded, "none", "running as root without a writable pids cgroup: RLIMIT_NPROC does not apply to root"),
    });
    v.push(match plan.memory_limit() {
        MemoryLimit::Cgroup { version, .. } if !cgroup_out_of_reach => prot(ProtectionId::Memory, Degraded, &format!("cgroup {version} memory limit"), cgroup_in_reach),
        MemoryLimit::Cgroup { max_bytes, version, .. } => prot(ProtectionId::Memory, Enforced, &format!("cgroup {version} memory limit"),
            format!("at most {} MiB (the private /tmp's pages count too); the OOM killer acts inside the sandbox", max_bytes >> 20)),
        MemoryLimit::Unbounded => prot(ProtectionId::Memory, Degraded, "none",
            match plan.namespaces().and_then(|n| n.tmpfs_size_bytes) {
                Some(t) => format!("no writable memory cgroup: the command's own memory is bounded only by the host; the private /tmp and /dev/shm are bounded ({} MiB each)", t >> 20),
                None => "no writable memory cgroup: the command's memory (and what it writes to /tmp and /dev/shm) is bounded only by the host".to_string(),
            }),
    });
    v.push(file_size_row(&plan.limits));
    v.push(open_files_row(&plan.limits));
    v.push(prot(ProtectionId::CoreDumps, Enforced, "RLIMIT_CORE=0", "no core files"));
    let tree = if ns.is_some() {
        prot(ProtectionId::TimeoutKillTree, Enforced, "PID namespace (init) + supervisor",
            "the command runs under its own init; killing it kills every process in the namespace")
    } else if tree_killed {
        prot(ProtectionId::TimeoutKillTree, Enforced, "supervisor subreaper (+ cgroup when available)",
            "every descendant, including setsid'd and double-forked ones, is killed at the timeout and when the command exits")
    } else {
        prot(ProtectionId::TimeoutKillTree, Degraded, "supervisor subreaper",
            "without signal scoping or a cgroup out of the command's reach, a sandboxed process can kill the supervisor and orphan its descendants")
    };
    v.push(tree);
    v.push(prot(ProtectionId::OutputCap, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)));
    v
}

/// The `workspace-persistence` rows. `workspace-persistence`: after the run, nothing the command
/// planted in a protected path (present or absent at launch, at the top of a writable root or
/// nested, or made during the run) is left on the host — private copies at Full, the review
/// after the run everywhere. `workspace-persistence-live`: during the run too, for the paths
/// present at launch — only private copies (or read-only binds) give that; a path reviewed in
/// place is the host's until the run ends.
fn workspace_persistence(plan: &Plan, caps: &Capabilities, tree_killed: bool) -> [Protection; 2] {
    use ProtectionState::{Degraded, Enforced};
    if plan.mode != SandboxMode::WorkspaceWrite {
        let mech = if plan.namespaces().is_some() { "read-only mounts" } else { "landlock" };
        return [
            prot(ProtectionId::WorkspacePersistence, Enforced, mech, "the workspace is read-only"),
            prot(ProtectionId::WorkspacePersistenceLive, Enforced, mech, "the workspace is read-only"),
        ];
    }
    let rel = |p: &Path| p.strip_prefix(&plan.workspace).unwrap_or(p).display().to_string();
    let private: Vec<String> = plan.protected.iter().filter(|p| p.private).map(|p| rel(&p.path)).collect();
    let in_place: Vec<String> = plan.protected.iter().filter(|p| !p.private).map(|p| {
        if p.absent { format!("{} (absent)", rel(&p.path)) } else { rel(&p.path) }
    }).collect();
    let present_in_place: Vec<String> = plan.protected.iter().filter(|p| !p.private && !p.absent).map(|p| rel(&p.path)).collect();
    let bad = plan.unprotectable.iter().map(|u| format!("{} ({})", rel(&u.path), u.why)).collect::<Vec<_>>().join("; ");
    let review = "after the run harmless changes are applied and code-running ones (hooks, executable git keys, redirection files, editor tasks and settings) are kept as pending changes (`localgpt sandbox pending`); a protected directory renamed or replaced by a link, a file or another directory is put back (what replaced it is kept as a pending change), one moved with a parent is reviewed where it went, nothing is written through a link, and the names created in subdirectories during the run (a new repository's hooks) are reviewed too";
    let mut detail = Vec::new();
    let review = if plan.nested_walks.is_empty() {
        review.to_string()
    } else if plan.walk_records.is_some() {
        format!("{review}; the walk that looks for them remembers across runs what it read, so that no run can push a name out of the next run's reach")
    } else {
        format!("{review}; the walk that looks for them keeps no records (where they would be, this run could write them, or that directory is not private to this user), so its budget counts every directory again")
    };
    if !private.is_empty() {
        detail.push(format!("private copies for the run (overlay; cannot be renamed or removed): {}", private.join(", ")));
    }
    if !in_place.is_empty() {
        detail.push(format!("reviewed in place after the run: {}", in_place.join(", ")));
    }
    detail.push(review);
    if !bad.is_empty() {
        detail.push(format!("not protected: {bad}"));
    }
    let no_overlay = !private.is_empty() && !caps.overlay_fs;
    if no_overlay {
        detail.insert(0, format!(
            "overlayfs is not loaded in this kernel and a sandbox cannot load its module: {} will be read-only for the run instead of private copies (git commits inside fail)",
            private.join(", ")
        ));
    }
    let mech = if private.is_empty() { "review after the run" } else { "private copies (overlay) + review after the run" };
    let survivors = !tree_killed && plan.protected.iter().any(|p| !p.private);
    if survivors {
        detail.push("the review after the run cannot be trusted here: without a PID namespace, a cgroup or Landlock signal scoping (ABI 6), a process of the command can outlive it and write after the review".into());
    }
    let after = prot(ProtectionId::WorkspacePersistence, if bad.is_empty() && !survivors { Enforced } else { Degraded }, mech, detail.join("; "));
    let absent_note = "names absent at launch are created on the host and reviewed after the run, at every level";
    let live = if present_in_place.is_empty() {
        prot(ProtectionId::WorkspacePersistenceLive, Enforced, if private.is_empty() { "nothing present to protect" } else { "private copies (overlay)" },
            format!("every protected path present at launch is private for the run (the host sees none of the command's changes until the review); {absent_note}"))
    } else {
        let why = if plan.namespaces().is_some() {
            "files are reviewed in place (a bound copy breaks `sed -i` and `git submodule add`)"
        } else {
            "no mount namespace at this level, so no private copies: Landlock cannot keep a path inside the writable workspace unwritable without making the workspace's own top level unwritable"
        };
        prot(ProtectionId::WorkspacePersistenceLive, Degraded, "review after the run",
            format!("present at launch and the host's until the run ends (a host process that reads them meanwhile, an editor or a git command in another terminal, sees the command's changes): {} ({why}); {absent_note}", present_in_place.join(", ")))
    };
    [after, live]
}

/// `release` (`uname -r`) is at least `major.minor`.
#[must_use]
pub fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut it = release.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse::<u32>().unwrap_or(0));
    let (ma, mi) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (ma, mi) >= (major, minor)
}

/// Why a run is at Minimal: what Standard lacks here, or that it was asked for.
fn why_minimal(caps: &Capabilities) -> String {
    let missing = caps.missing_for(SandboxLevel::Standard);
    if missing.is_empty() { "minimal was asked for; this kernel offers more".into() } else { missing.join("; ") }
}

/// The granted host sockets, for the protection table ("" when none).
fn granted_sockets_text(plan: &Plan) -> String {
    plan.unix_sockets.iter().map(|g| g.given.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn warnings(plan: &Plan, caps: &Capabilities, policy: &SandboxPolicy) -> Vec<String> {
    let mut w: Vec<String> = policy.skipped_grants.iter().map(|p| format!("{} does not exist: its grant is skipped for this run", p.display())).collect();
    for g in plan.unix_sockets.iter().filter(|g| g.root_equivalent) {
        w.push(format!("GRANTED SOCKET {} controls a container runtime: whoever connects to it is root on the host; the command may connect to it", g.given.display()));
    }
    w.extend(policy.moved_denies.iter().map(|(rule, at)| {
        format!("denied {} was moved since a previous run (same file, found by its inode): it is now at {}, denied there too", rule.display(), at.display())
    }));
    match plan.level {
        SandboxLevel::None => w.push(if plan.mode == SandboxMode::FullAccess {
            "FULL ACCESS: this command runs with no sandbox at all (acknowledged with --dangerously-allow-full-access)".to_string()
        } else {
            "UNSANDBOXED: no kernel confinement is available; only the timeout and output caps apply".to_string()
        }),
        SandboxLevel::Minimal if plan.windows.is_some() => w.push(
            "Windows (experimental, unelevated tier): writes are confined to the workspace and the run's temp directory and credentials are unreadable, but other reads and the network are NOT confined; this backend is experimental: its plan is checked by a model and its glue under Wine, never on Windows itself".to_string(),
        ),
        SandboxLevel::Minimal if plan.namespaces().is_some_and(|n| n.fresh_root.is_some()) => w.push(format!(
            "degraded to minimal: no Landlock ({}); namespaces confine the command instead: a fresh root holds only the granted paths, everything outside the workspace is read-only, credentials are masked, processes and network are isolated (`sandbox status` lists what is and is not enforced)",
            why_minimal(caps)
        )),
        SandboxLevel::Minimal if plan.namespaces().is_some() => w.push(format!(
            "degraded to minimal: no Landlock ({}), so reads outside the workspace are NOT confined; namespaces still make everything outside the workspace read-only, mask credentials and isolate processes and network",
            why_minimal(caps)
        )),
        SandboxLevel::Minimal => w.push(format!(
            "degraded to minimal: network and dangerous syscalls are blocked but the filesystem is NOT confined ({})",
            why_minimal(caps)
        )),
        _ => {}
    }
    if let Some(n) = plan.namespaces().filter(|n| plan.landlock().is_none() && !n.unmaskable.is_empty()) {
        w.push(format!(
            "without Landlock, these denied paths are not hidden if the command creates them (absent at launch, inside a writable grant; a mount can only mask what exists): {}",
            path_list(&n.unmaskable)
        ));
    }
    if let Some(ll) = plan.landlock() {
        // A writable root with a denied path inside is granted entry by entry (Landlock cannot
        // take a subtree out of a grant): nothing new can be created directly in it.
        let ws = &plan.workspace;
        let roots = std::iter::once((ws, "the workspace".to_string()))
            .chain(policy.writable_paths.iter().filter(|p| *p != ws).map(|p| (p, format!("the writable grant {}", p.display()))));
        for (root, what) in roots {
            if let Some((_, denied)) = ll.expanded.iter().find(|(dir, _)| dir == root || root.starts_with(dir)) {
                let why = if plan.namespaces().is_some() { " (it does not exist, so no mount can hide it)" } else { "" };
                w.push(format!(
                    "{what} contains the denied path {}{why}: it is granted entry by entry (snapshot at launch), so new files directly in {} cannot be created at this level",
                    denied.display(),
                    root.display()
                ));
            }
        }
    }
    // A protected path that could not be protected is said at every run, not only by `status`.
    if !plan.unprotectable.is_empty() {
        let rel = |p: &Path| p.strip_prefix(&plan.workspace).unwrap_or(p).display().to_string();
        let mut list: Vec<String> = plan.unprotectable.iter().take(3).map(|u| format!("{} ({})", rel(&u.path), u.why)).collect();
        if plan.unprotectable.len() > 3 {
            list.push(format!("and {} more (`localgpt sandbox status`)", plan.unprotectable.len() - 3));
        }
        w.push(format!("NOT PROTECTED for this run: {}", list.join("; ")));
    }
    if plan.level == SandboxLevel::Standard && plan.kernel_level < SandboxLevel::Full {
        if let Some(u) = caps.user_namespaces.as_ref().filter(|u| !u.available) {
            w.push(format!("running at standard, not full: user namespaces are unavailable ({})", u.detail));
        }
    }
    w
}

/// What the helper needs, and nothing else: compact and cheap to decode.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HelperPlan {
    /// The runner's pid (the supervisor checks it is still its parent).
    pub parent_pid: i32,
    /// Working directory.
    pub cwd: PathBuf,
    /// Namespaces and mounts (Full level).
    pub namespaces: Option<NamespacePlan>,
    /// Landlock: (handled_fs, handled_net, scopes, rules as (path, access)).
    pub landlock: Option<HelperLandlock>,
    /// seccomp program.
    pub seccomp: Option<Vec<PackedInsn>>,
    /// (resource, soft, hard).
    pub rlimits: Vec<(i32, u64, u64)>,
    /// The per-run cgroups' `tasks`/`cgroup.procs` files to join (one per hierarchy).
    pub cgroup_procs: Vec<PathBuf>,
    /// Drop all capabilities.
    pub drop_capabilities: bool,
    /// Apply `no_new_privs`, close fds, new session (false only for full-access).
    pub confine: bool,
    /// macOS: the helper must find itself under a Seatbelt profile before it runs the command.
    #[serde(default)]
    pub seatbelt: bool,
    /// The seccomp program sends some calls to the runner (granted host sockets): load it with
    /// a listener and pass the listener to the runner with the report.
    #[serde(default)]
    pub seccomp_listener: bool,
    /// Network allowlist (Full level): PID 1 listens on `127.0.0.1:PORT` in the sandbox's
    /// network namespace and passes the listening socket to the runner, whose proxy serves it.
    #[serde(default)]
    pub proxy_port: Option<u16>,
}

/// Landlock in the helper plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct HelperLandlock {
    /// Handled filesystem rights.
    pub fs: u64,
    /// Handled network rights.
    pub net: u64,
    /// Scopes.
    pub scopes: u64,
    /// (path, access).
    pub rules: Vec<(PathBuf, u64)>,
}

impl Plan {
    /// The Landlock part of [`Plan::helper_plan`].
    #[must_use]
    pub(crate) fn helper_landlock(&self) -> Option<HelperLandlock> {
        self.landlock().map(|l| HelperLandlock {
            fs: l.handled_fs,
            net: l.handled_net,
            scopes: l.scopes,
            rules: l.rules.iter().map(|r| (r.path.clone(), r.access)).collect(),
        })
    }

    /// The part of the plan the helper applies.
    #[must_use]
    pub fn helper_plan(&self, parent_pid: i32, cgroup_procs: Vec<PathBuf>) -> HelperPlan {
        HelperPlan {
            parent_pid,
            cwd: self.workspace.clone(),
            namespaces: self.namespaces().cloned(),
            landlock: self.helper_landlock(),
            seccomp: self.seccomp().map(|s| s.program.clone()),
            rlimits: self.rlimits().iter().map(|r| (r.resource, r.soft.unwrap_or(r.value).min(r.value), r.value)).collect(),
            cgroup_procs,
            drop_capabilities: self.drop_capabilities(),
            confine: self.level > SandboxLevel::None,
            seatbelt: self.macos.is_some(),
            seccomp_listener: self.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.action == crate::linux::seccomp::SeccompDeny::UserNotif)),
            proxy_port: (self.network_allowlist.is_some() && self.namespaces().is_some()).then_some(crate::network::PROXY_PORT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{build_sandbox_policy, SandboxSettings};
    use crate::detect::{Feature, LandlockSupport};
    use crate::linux::landlock;

    fn caps(abi: u32, root: bool) -> Capabilities {
        Capabilities {
            platform: crate::detect::Platform::Linux,
            seatbelt: None,
            windows: None,
            kernel: "6.18.0-test".into(),
            landlock: LandlockSupport { abi, state: if abi > 0 { "available".into() } else { "not-built".into() }, detail: String::new() },
            seccomp: Feature { available: true, detail: String::new() },
            user_namespaces: Some(Feature { available: false, detail: "test: no userns".into() }),
            cgroup_pids: None,
            cgroup_memory: None,
            mem_total_bytes: 8 << 30,
            overlay_fs: true,
            seccomp_broker: Some(Feature { available: true, detail: String::new() }),
            is_root: root,
            uid: if root { 0 } else { 1000 },
            gid: if root { 0 } else { 1000 },
        }
    }

    fn policy(mode: SandboxMode, home: &Path, ws: &Path) -> SandboxPolicy {
        let s = SandboxSettings { mode, home: Some(home.to_path_buf()), dangerously_allow_full_access: true, ..Default::default() };
        build_sandbox_policy(ws, &s).unwrap()
    }

    fn world() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = crate::test_dir();
        let home = d.path().join("home");
        let ws = d.path().join("ws");
        for p in [".ssh", ".cargo/bin", ".config/git", "ws-other"] {
            std::fs::create_dir_all(home.join(p)).unwrap();
        }
        std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let home = std::fs::canonicalize(home).unwrap();
        let ws = std::fs::canonicalize(ws).unwrap();
        (d, home, ws)
    }

    fn rule<'a>(p: &'a Plan, path: &Path) -> Option<&'a PathRule> {
        p.landlock().unwrap().rules.iter().find(|r| r.path == path)
    }

    #[test]
    fn access_classifies_reads_as_component_equality_does() {
        let (_d, home, ws) = world();
        let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        let sys = crate::defaults::tables(pol.platform).system_read[0];
        let toolchain = home.join(crate::defaults::tables(pol.platform).home_toolchains[0]);
        // Spelled otherwise than the tables (a trailing slash, a `.` component): the same paths.
        pol.read_only_paths = vec![PathBuf::from(format!("{sys}/")), toolchain.join("."), home.join("ws-other")];
        let why: Vec<String> = Access::of(&pol).read.iter().skip(usize::from(pol.mode != SandboxMode::WorkspaceWrite)).map(|r| r.reason.clone()).collect();
        assert_eq!(why, ["system or toolchain", "system or toolchain", "allow_paths.read"]);
    }

    #[test]
    fn workspace_write_plan() {
        let (_d, home, ws) = world();
        let p = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &caps(7, false), &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::Standard);
        let ll = p.landlock().unwrap();
        assert_eq!(ll.handled_net, 3);
        assert_eq!(ll.scopes, 3);
        assert_eq!(rule(&p, &ws).unwrap().access, landlock::read_write(7));
        assert_eq!(rule(&p, Path::new("/tmp")).unwrap().access, landlock::read_write(7));
        assert!(rule(&p, &home).is_none());
        assert!(rule(&p, &home.join(".ssh")).is_none());
        // ~/.cargo holds a credential file: granted by siblings.
        assert!(rule(&p, &home.join(".cargo")).is_none());
        assert!(rule(&p, &home.join(".cargo/bin")).is_some());
        assert!(rule(&p, &home.join(".cargo/credentials.toml")).is_none());
        assert!(rule(&p, Path::new("/proc")).unwrap().access & landlock::fs::EXECUTE == 0);
        assert!(p.seccomp().unwrap().program.len() > 10);
        assert!(p.rlimits().iter().any(|r| r.name == "RLIMIT_CORE" && r.value == 0));
        assert!(matches!(p.process_limit(), ProcessLimit::Rlimit { .. }));
        assert!(!p.drop_capabilities());
    }

    #[test]
    fn a_granted_unix_socket_is_in_the_plan_and_nothing_else_opens() {
        let (_d, home, ws) = world();
        let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        let sock = PathBuf::from("/run/user/1000/ssh-agent.sock");
        pol.allow_unix_sockets = vec![(sock.clone(), sock.clone())];
        let ctx = RunContext { caller_env: vec![("SSH_AUTH_SOCK".into(), sock.display().to_string()), ("GPG_TTY".into(), "x".into())], ..Default::default() };
        let p = make_plan(&pol, &caps(7, false), &ctx).unwrap();
        assert_eq!(p.unix_sockets, vec![UnixSocketGrant::new(&sock, &sock)]);
        assert!(p.env.vars.iter().any(|(k, v)| k == "SSH_AUTH_SOCK" && Path::new(v) == sock), "{:?}", p.env.vars);
        assert!(p.helper_plan(1, Vec::new()).seccomp_listener);
        let row = p.protections.iter().find(|x| x.id == ProtectionId::UnixSocketsOutside).unwrap();
        assert_eq!(row.state, ProtectionState::Enforced);
        assert!(row.detail.contains("and the granted /run/user/1000/ssh-agent.sock"), "{row:?}");
        assert!(p.warnings.iter().all(|w| !w.contains("GRANTED SOCKET")), "{:?}", p.warnings);
        // The same variable naming another socket stays out; no grant, no listener.
        let other = RunContext { caller_env: vec![("SSH_AUTH_SOCK".into(), "/tmp/other".into())], ..Default::default() };
        assert!(!make_plan(&pol, &caps(7, false), &other).unwrap().env.vars.iter().any(|(k, _)| k == "SSH_AUTH_SOCK"));
        // No grant: the runner still answers connect and listen (the sandbox's own servers).
        let plain = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &caps(7, false), &ctx).unwrap();
        assert!(plain.helper_plan(1, Vec::new()).seccomp_listener && plain.unix_sockets.is_empty());
        assert!(!plain.env.vars.iter().any(|(k, _)| k == "SSH_AUTH_SOCK"));
        // Where the runner cannot answer: no listener, and a grant is an error naming why.
        let mut old = caps(7, false);
        old.seccomp_broker = Some(Feature { available: false, detail: "needs pidfd_getfd (Linux 5.6): ENOSYS".into() });
        let p = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &old, &ctx).unwrap();
        assert!(!p.helper_plan(1, Vec::new()).seccomp_listener);
        assert!(p.seccomp().unwrap().rules.iter().any(|r| r.syscall == "listen" && r.action == crate::linux::seccomp::SeccompDeny::Eperm));
        let e = make_plan(&pol, &old, &ctx).unwrap_err().to_string();
        assert!(e.contains("--allow-unix-socket") && e.contains("pidfd_getfd"), "{e}");
        // A container runtime's socket is said loudly.
        let docker = PathBuf::from("/var/run/docker.sock");
        pol.allow_unix_sockets = vec![(docker, PathBuf::from("/run/docker.sock"))];
        let p = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
        assert!(p.warnings.iter().any(|w| w.contains("GRANTED SOCKET /var/run/docker.sock") && w.contains("root on the host")), "{:?}", p.warnings);
    }

    #[test]
    fn allowlist_holds_only_where_the_proxy_is_the_only_way_out() {
        let (_d, home, ws) = world();
        let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        pol.network_access = crate::policy::NetworkPolicy::Allowlist;
        pol.network_allowlist = Some(crate::network::Allowlist::default());
        // Standard (the test capabilities have no user namespaces) with the runner answering
        // connect: the proxy on the port the runner holds, its variables set.
        let ctx = RunContext { proxy_port: Some(40_123), ..Default::default() };
        let p = make_plan(&pol, &caps(7, false), &ctx).unwrap();
        assert_eq!((p.level, p.proxy_port), (SandboxLevel::Standard, Some(40_123)));
        assert!(p.env.vars.iter().any(|(k, v)| k == "HTTPS_PROXY" && v == "http://127.0.0.1:40123"), "{:?}", p.env.vars);
        let row = p.protections.iter().find(|x| x.id == ProtectionId::Network).unwrap();
        assert!(row.detail.contains("only through the proxy at 127.0.0.1:40123") && row.mechanism.contains("host's loopback"), "{row:?}");
        // Without the runner (or with nothing but a proxy variable) it would be bypassable:
        // refused, nothing planned.
        let mut old = caps(7, false);
        old.seccomp_broker = Some(Feature { available: false, detail: "needs pidfd_getfd (Linux 5.6)".into() });
        let e = make_plan(&pol, &old, &ctx).unwrap_err();
        assert!(matches!(e, SandboxError::LevelUnavailable(_)) && e.to_string().contains("could be bypassed"), "{e}");
        // Full: the command's resolv.conf names the runner's DNS stub (read-only copy), which
        // PID 1's socket serves; at Standard the host's stays.
        assert!(p.namespaces().is_none());
        let mut full = caps(7, false);
        full.user_namespaces = Some(Feature { available: true, detail: String::new() });
        let p = make_plan(&pol, &full, &RunContext::default()).unwrap();
        assert_eq!((p.level, p.proxy_port), (SandboxLevel::Full, Some(crate::network::PROXY_PORT)));
        if let Some(r) = std::fs::canonicalize("/etc/resolv.conf").ok().filter(|r| r.is_file()) {
            let o = p.namespaces().unwrap().config_overlays.iter().find(|o| o.target == r).expect("resolv.conf overlay");
            assert_eq!(o.content, crate::linux::compile::RESOLV_CONF);
            assert!(o.content.lines().filter(|l| l.starts_with("nameserver")).eq(["nameserver 127.0.0.1"]));
        }
        pol.network_access = crate::policy::NetworkPolicy::Deny;
        pol.network_allowlist = None;
        let p = make_plan(&pol, &full, &RunContext::default()).unwrap();
        assert!(!p.namespaces().unwrap().config_overlays.iter().any(|o| o.content == crate::linux::compile::RESOLV_CONF), "only with the allowlist");
    }

    #[test]
    fn network_full_opens_only_the_network() {
        let (_d, home, ws) = world();
        let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        pol.network_access = crate::policy::NetworkPolicy::Full;
        let mut c = caps(7, false);
        c.user_namespaces = Some(Feature { available: true, detail: String::new() });
        for caps in [caps(7, false), c] {
            let p = make_plan(&pol, &caps, &RunContext::default()).unwrap();
            let state = |id: ProtectionId| p.protections.iter().find(|x| x.id == id).unwrap().state;
            assert_eq!(state(ProtectionId::Network), ProtectionState::Off, "{:?}", p.level);
            for id in [ProtectionId::UnixSocketsOutside, ProtectionId::AbstractSocketsOutside, ProtectionId::FsWriteOutside, ProtectionId::FsReadCredentials] {
                assert_eq!(state(id), ProtectionState::Enforced, "{id:?} at {:?}", p.level);
            }
            assert!(p.landlock().is_some_and(|l| l.handled_net == 0), "no TCP rules: the network is open");
            assert!(p.seccomp().unwrap().rules.iter().any(|r| r.syscall == "bind" && r.action == crate::linux::seccomp::SeccompDeny::UserNotif),
                "abstract names stay the runner's to prefix in the host's namespace");
            if let Some(ns) = p.namespaces() {
                assert!(ns.host_network && p.level == SandboxLevel::Full);
            }
        }
        let mut mac_pol = pol.clone();
        mac_pol.platform = crate::detect::Platform::Macos;
        let mac = make_plan(&mac_pol, &crate::detect::assumed_for(crate::detect::Platform::Macos), &RunContext::default()).unwrap_err();
        assert!(mac.to_string().contains("Linux only"), "{mac}");
    }

    #[test]
    fn read_only_plan_has_no_writable_dirs() {
        let (_d, home, ws) = world();
        let p = make_plan(&policy(SandboxMode::ReadOnly, &home, &ws), &caps(7, true), &RunContext::default()).unwrap();
        let ll = p.landlock().unwrap();
        for r in &ll.rules {
            if r.reason != "device node" {
                assert_eq!(r.access & (landlock::fs::WRITE_FILE | landlock::fs::MAKE_REG), 0, "{r:?}");
            }
        }
        assert!(rule(&p, Path::new("/tmp")).is_none());
        assert!(p.drop_capabilities());
        assert!(matches!(p.process_limit(), ProcessLimit::Unbounded));
        let pc = p.protections.iter().find(|x| x.id == "process-count").unwrap();
        assert_eq!(pc.state, ProtectionState::Degraded);
    }

    #[test]
    fn full_access_plan_is_unconfined_and_labelled() {
        let (_d, home, ws) = world();
        let p = make_plan(&policy(SandboxMode::FullAccess, &home, &ws), &caps(7, false), &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::None);
        assert!(p.landlock().is_none() && p.seccomp().is_none());
        assert!(p.warnings[0].contains("FULL ACCESS"));
        assert!(!p.helper_plan(1, Vec::new()).confine);
    }

    #[test]
    fn abi_dependent_rights_and_degradations() {
        let (_d, home, ws) = world();
        let pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        let p2 = make_plan(&pol, &caps(2, false), &RunContext::default()).unwrap();
        let ll = p2.landlock().unwrap();
        assert_eq!(ll.handled_net, 0);
        assert_eq!(ll.scopes, 0);
        assert_eq!(ll.handled_fs & landlock::fs::TRUNCATE, 0);
        let state = |p: &Plan, id: &str| p.protections.iter().find(|x| x.id == id).unwrap().state;
        // Below ABI 6 the runner checks every signal (and so the supervisor survives the
        // command: timeout-kill-tree holds); without the runner nothing stops a signal outside.
        assert_eq!(state(&p2, "signals-outside"), ProtectionState::Enforced);
        assert_eq!(state(&p2, "timeout-kill-tree"), ProtectionState::Enforced);
        let notified = |p: &Plan, name: &str| p.seccomp().unwrap().rules.iter().any(|r| r.syscall == name && r.action == crate::linux::seccomp::SeccompDeny::UserNotif);
        for name in ["kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal", "fcntl"] {
            assert!(notified(&p2, name), "{name}");
        }
        let mut unbrokered = caps(2, false);
        unbrokered.seccomp_broker = Some(Feature { available: false, detail: "test".into() });
        let p2n = make_plan(&pol, &unbrokered, &RunContext::default()).unwrap();
        assert_eq!(state(&p2n, "signals-outside"), ProtectionState::Degraded);
        assert_eq!(state(&p2n, "timeout-kill-tree"), ProtectionState::Degraded);
        assert!(!p2n.seccomp().unwrap().rules.iter().any(|r| r.syscall == "kill"));
        // Below ABI 3, seccomp stands in for Landlock's truncate right at Standard.
        assert_eq!(state(&p2, "fs-truncate-outside"), ProtectionState::Enforced);
        let rules = &p2.seccomp().unwrap().rules;
        assert!(rules.iter().any(|r| r.syscall == "truncate") && rules.iter().any(|r| r.syscall == "openat2"));
        let p1 = make_plan(&pol, &caps(1, false), &RunContext::default()).unwrap();
        assert_eq!(state(&p1, "fs-truncate-outside"), ProtectionState::Enforced);
        assert_eq!(state(&p2, "network"), ProtectionState::Enforced);
        let p7 = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
        assert_eq!(state(&p7, "signals-outside"), ProtectionState::Enforced);
        assert!(!p7.seccomp().unwrap().rules.iter().any(|r| r.syscall == "kill"), "ABI 6+: Landlock scopes signals");
        assert!(!p7.seccomp().unwrap().rules.iter().any(|r| r.syscall == "truncate"), "ABI 3+: Landlock handles truncate");
        assert_eq!(state(&p7, "fs-metadata-outside"), ProtectionState::Degraded);
        let p11 = make_plan(&pol, &caps(11, false), &RunContext::default()).unwrap();
        assert_eq!(p11.landlock().unwrap().handled_abi, landlock::MAX_KNOWN_ABI);
    }

    #[test]
    fn levels_requirements_and_fallbacks() {
        let (_d, home, ws) = world();
        let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        let p = make_plan(&pol, &caps(0, false), &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::Minimal);
        assert!(p.landlock().is_none() && p.seccomp().is_some());
        assert!(p.warnings[0].contains("minimal"));
        pol.require_level = Some(SandboxLevel::Standard);
        let e = make_plan(&pol, &caps(0, false), &RunContext::default()).unwrap_err().to_string();
        assert!(e.contains("Landlock"), "{e}");
        pol.require_level = None;
        pol.level = LevelSetting::Exactly(SandboxLevel::Full);
        assert!(make_plan(&pol, &caps(7, false), &RunContext::default()).is_err());
        pol.level = LevelSetting::Exactly(SandboxLevel::Minimal);
        assert_eq!(make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap().level, SandboxLevel::Minimal);
        let mut none_caps = caps(0, false);
        none_caps.seccomp.available = false;
        pol.level = LevelSetting::Auto;
        pol.unconfined_acknowledged = false;
        assert!(make_plan(&pol, &none_caps, &RunContext::default()).is_err());
    }

    #[test]
    fn user_paths_must_exist_and_deny_wins() {
        let (d, home, ws) = world();
        let s = SandboxSettings {
            home: Some(home.clone()),
            extra_read: vec![d.path().join("missing")],
            ..Default::default()
        };
        // A missing user grant is skipped when the policy is built, and named in a warning…
        let pol = build_sandbox_policy(&ws, &s).unwrap();
        assert_eq!(pol.skipped_grants, vec![d.path().join("missing")]);
        assert!(!pol.read_only_paths.contains(&d.path().join("missing")));
        let p = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
        assert!(p.warnings.iter().any(|w| w.contains("missing") && w.contains("skipped")), "{:?}", p.warnings);
        // …a glob that matches nothing is an input error…
        let s = SandboxSettings { home: Some(home.clone()), extra_deny: vec![ws.join("*.env")], ..Default::default() };
        let e = build_sandbox_policy(&ws, &s).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("glob"), "{e}");
        // …and so are a grant inside a protected path and a denied file with other links.
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "").unwrap();
        let s = SandboxSettings { home: Some(home.clone()), extra_write: vec![ws.join(".git/config")], ..Default::default() };
        let e = build_sandbox_policy(&ws, &s).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("protected"), "{e}");
        std::fs::write(ws.join("secret"), "S").unwrap();
        std::fs::hard_link(ws.join("secret"), ws.join("alias")).unwrap();
        let s = SandboxSettings { home: Some(home.clone()), extra_deny: vec![ws.join("secret")], ..Default::default() };
        let e = build_sandbox_policy(&ws, &s).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("hard links"), "{e}");
        // A path that vanished after the policy was built is refused when the plan is made.
        let mut pol = build_sandbox_policy(&ws, &SandboxSettings { home: Some(home.clone()), ..Default::default() }).unwrap();
        pol.read_only_paths.push(d.path().join("missing"));
        assert!(make_plan(&pol, &caps(7, false), &RunContext::default()).is_err());
        let s = SandboxSettings { home: Some(home.clone()), extra_read: vec![home.clone()], ..Default::default() };
        let pol = build_sandbox_policy(&ws, &s).unwrap();
        let p = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
        assert!(rule(&p, &home).is_none());
        assert!(rule(&p, &home.join("ws-other")).is_some());
        assert!(!p.landlock().unwrap().rules.iter().any(|r| r.path.starts_with(home.join(".ssh"))));
    }

    #[test]
    fn every_level_lists_every_protection_once() {
        // A row missing from the table would let an escape of that protection pass as "not
        // listed": every plan lists each id exactly once, whatever the kernel offers.
        let (_d, home, ws) = world();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
            let pol = policy(mode, &home, &ws);
            for abi in [0, 1, 3, 4, 7] {
                for userns in [false, true] {
                    for root in [false, true] {
                        let mut c = caps(abi, root);
                        c.user_namespaces = Some(Feature { available: userns, detail: String::new() });
                        let Ok(p) = make_plan(&pol, &c, &RunContext::default()) else { continue };
                        let mut got: Vec<String> = p.protections.iter().map(|x| x.id.to_string()).collect();
                        got.sort();
                        let mut want: Vec<String> = ProtectionId::ALL.iter().map(ToString::to_string).collect();
                        want.sort();
                        assert_eq!(got, want, "{mode:?} abi {abi} userns {userns} root {root}: level {}", p.level);
                    }
                }
            }
        }
    }

    #[test]
    fn full_level_confines_reads_with_a_fresh_root() {
        use crate::linux::landlock::fs;
        let (_d, home, ws) = world();
        let mut c = caps(7, false);
        c.user_namespaces = Some(Feature { available: true, detail: String::new() });
        let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::Full);
        let ns = p.namespaces().unwrap();
        let root = ns.fresh_root.as_ref().expect("a fresh root where /dev is private");
        // The grants are bound (outermost only), the rest of the host is not.
        for k in [&ws, &home, Path::new("/dev"), Path::new("/proc")] {
            assert!(root.binds.iter().any(|b| k.starts_with(b)), "{} not in {:?}", k.display(), root.binds);
        }
        assert!(!root.binds.iter().any(|b| b == Path::new("/")), "{:?}", root.binds);
        for (i, b) in root.binds.iter().enumerate() {
            assert!(!root.binds.iter().enumerate().any(|(j, o)| i != j && b.starts_with(o)), "{} is inside another bind", b.display());
        }
        // Landlock handles no right that makes it check every open; what it still handles,
        // every rule stays within.
        let ll = p.landlock().unwrap();
        assert_eq!(ll.handled_fs & (fs::READ_FILE | fs::READ_DIR | fs::TRUNCATE), 0);
        assert_ne!(ll.handled_fs & (fs::EXECUTE | fs::WRITE_FILE | fs::MAKE_REG | fs::IOCTL_DEV), 0);
        assert!(ll.rules.iter().all(|r| r.access != 0 && r.access & !ll.handled_fs == 0));
        let row = |p: &Plan, id: ProtectionId| p.protections.iter().find(|x| x.id == id).unwrap().clone();
        assert_eq!(row(&p, ProtectionId::FsReadOutside).mechanism, "fresh root (mount namespace)");
        assert_eq!(row(&p, ProtectionId::FsTruncateOutside).mechanism, "read-only mounts");
        assert_eq!(row(&p, ProtectionId::FsReadCredentials).mechanism, "mount masks");
        // A denied path that no mount can hide (absent at launch, inside the writable workspace):
        // Landlock expands around it and keeps handling reads, as before.
        pol.deny_paths.push(ws.join("later/secret"));
        let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
        let ll = p.landlock().unwrap();
        assert!(!ll.expanded.is_empty());
        assert_eq!(ll.handled_fs & (fs::READ_FILE | fs::READ_DIR), fs::READ_FILE | fs::READ_DIR);
        assert_eq!(row(&p, ProtectionId::FsReadOutside).mechanism, "landlock");
        assert!(p.namespaces().unwrap().fresh_root.is_some());
        // Standard: no namespace, Landlock handles reads.
        let s = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
        assert_ne!(s.landlock().unwrap().handled_fs & fs::READ_FILE, 0);
        // More separate grants than a fresh root is built with: the host's tree and Landlock's
        // reads, as before.
        pol.deny_paths.pop();
        let d = crate::test_dir();
        for i in 0..=crate::linux::mounts::MAX_FRESH_ROOT_BINDS {
            let g = std::fs::canonicalize(d.path()).unwrap().join(format!("g{i}"));
            std::fs::create_dir_all(&g).unwrap();
            pol.read_only_paths.push(g);
        }
        let many = make_plan(&pol, &c, &RunContext::default()).unwrap();
        assert!(many.namespaces().unwrap().fresh_root.is_none());
        assert_ne!(many.landlock().unwrap().handled_fs & fs::READ_FILE, 0);
        assert_eq!(row(&many, ProtectionId::FsReadOutside).mechanism, "landlock");
    }

    #[test]
    fn without_landlock_the_namespaces_confine_reads_with_a_fresh_root() {
        let (_d, home, ws) = world();
        // A kernel without Landlock, with user namespaces: the automatic level is minimal, with
        // the namespaces.
        let mut c = caps(0, false);
        c.user_namespaces = Some(Feature { available: true, detail: String::new() });
        let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        pol.level = LevelSetting::Auto;
        let outside = std::fs::canonicalize(ws.parent().unwrap()).unwrap().join("granted");
        std::fs::create_dir_all(&outside).unwrap();
        pol.read_only_paths.push(outside.clone());
        let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::Minimal);
        assert!(p.landlock().is_none());
        let root = p.namespaces().unwrap().fresh_root.as_ref().expect("a fresh root without Landlock");
        for k in [&ws, &outside, Path::new("/dev"), Path::new("/proc"), Path::new("/usr")] {
            assert!(root.binds.iter().any(|b| k.starts_with(b)), "{} not in {:?}", k.display(), root.binds);
        }
        // The granted directory's parent is not bound whole: its other entries do not exist.
        assert!(!root.binds.iter().any(|b| b == outside.parent().unwrap() || b == Path::new("/")), "{:?}", root.binds);
        let row = |p: &Plan, id: ProtectionId| p.protections.iter().find(|x| x.id == id).unwrap().clone();
        let r = row(&p, ProtectionId::FsReadOutside);
        assert_eq!((r.state, r.mechanism.as_str()), (ProtectionState::Enforced, "fresh root (mount namespace)"));
        // A denied path absent at launch inside the writable workspace: no mount can hide it once
        // created, and without Landlock nothing else does (vector denied-path-absent-at-launch).
        assert_eq!(row(&p, ProtectionId::FsReadCredentials).state, ProtectionState::Enforced);
        let mut later = pol.clone();
        later.deny_paths.push(ws.join("later.env"));
        let p = make_plan(&later, &c, &RunContext::default()).unwrap();
        assert_eq!(p.namespaces().unwrap().unmaskable, vec![ws.join("later.env")]);
        assert_eq!(row(&p, ProtectionId::FsReadCredentials).state, ProtectionState::Degraded);
        assert!(p.warnings.iter().any(|w| w.contains("later.env")), "{:?}", p.warnings);
        // With Landlock (Full), Landlock denies it: the row holds.
        let mut full_caps = caps(7, false);
        full_caps.user_namespaces = c.user_namespaces.clone();
        let p = make_plan(&later, &full_caps, &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::Full);
        assert_eq!(row(&p, ProtectionId::FsReadCredentials).state, ProtectionState::Enforced);
        // `/` granted: nothing to build a root from, and the table says reads are not confined.
        pol.read_only_paths.push(PathBuf::from("/"));
        let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
        assert!(p.namespaces().unwrap().fresh_root.is_none());
        assert_eq!(row(&p, ProtectionId::FsReadOutside).state, ProtectionState::Degraded);
        // No user namespaces either: nothing confines reads.
        pol.read_only_paths.pop();
        let p = make_plan(&pol, &caps(0, false), &RunContext::default()).unwrap();
        assert!(p.namespaces().is_none());
        assert_eq!(row(&p, ProtectionId::FsReadOutside).state, ProtectionState::Degraded);
    }

    #[test]
    fn full_level_plan_uses_mounts() {
        let (_d, home, ws) = world();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        let mut c = caps(7, false);
        c.user_namespaces = Some(Feature { available: true, detail: String::new() });
        let pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::Full);
        let ns = p.namespaces().unwrap();
        // ~/.ssh is outside every kept path of the private $HOME; the credential file inside the
        // kept ~/.cargo is masked.
        let view = ns.home_view.as_ref().expect("private home");
        assert!(!view.keep.iter().any(|k| home.join(".ssh").starts_with(k)) && !ns.masks.iter().any(|m| m.path == home.join(".ssh")));
        assert!(ns.masks.iter().any(|m| m.path == home.join(".cargo/credentials.toml")));
        // The protected paths: the present .git gets a private copy (the namespace mounts it);
        // the absent ones are reviewed in place after the run.
        assert_eq!(ns.protected.iter().map(|x| x.path.clone()).collect::<Vec<_>>(), vec![ws.join(".git")]);
        assert_eq!(p.protected[..4].iter().map(|x| (x.path.clone(), x.absent, x.private)).collect::<Vec<_>>(),
            vec![(ws.join(".git"), false, true), (ws.join(".vscode"), true, false), (ws.join(".idea"), true, false), (ws.join(".localgpt"), true, false)]);
        assert!(p.protected[1..].iter().all(|x| x.absent && !x.private));
        assert!(ns.tmpfs.contains(&PathBuf::from("/tmp")));
        // Masked credentials need no sibling expansion: ~/.cargo is granted whole.
        assert!(rule(&p, &home.join(".cargo")).is_some());
        assert!(p.drop_capabilities(), "capabilities are dropped inside the user namespace");
        let want = u64::from(crate::defaults::default_max_processes());
        assert!(matches!(p.process_limit(), ProcessLimit::Rlimit { max } if *max == want));
        let state = |id: &str| p.protections.iter().find(|x| x.id == id).unwrap().state;
        for id in ["fs-metadata-outside", "fs-stat-secrets", "tmp-private", "pid-isolation", "process-count"] {
            assert_eq!(state(id), ProtectionState::Enforced, "{id}");
        }
        // Every present protected path is private: enforced, during the run too. A kernel
        // without overlay mounts in a user namespace (< 5.11) reviews them in place instead:
        // what is left after the run is still enforced, the host's view during it degraded.
        assert_eq!(state("workspace-persistence"), ProtectionState::Enforced);
        assert_eq!(state("workspace-persistence-live"), ProtectionState::Enforced);
        let mut old_kernel = c.clone();
        old_kernel.kernel = "5.10.0-46-cloud-amd64".into();
        let p510 = make_plan(&pol, &old_kernel, &RunContext::default()).unwrap();
        let st510 = |id: &str| p510.protections.iter().find(|x| x.id == id).unwrap().state;
        assert_eq!((st510("workspace-persistence"), st510("workspace-persistence-live")), (ProtectionState::Enforced, ProtectionState::Degraded));
        assert!(p510.namespaces().unwrap().protected.is_empty() && p510.protected.iter().all(|x| !x.private));
        // Without overlayfs loaded the mount will fail and the path be read-only: said beforehand.
        let mut no_overlay = c.clone();
        no_overlay.overlay_fs = false;
        let pno = make_plan(&pol, &no_overlay, &RunContext::default()).unwrap();
        let wp = pno.protections.iter().find(|x| x.id == "workspace-persistence").unwrap();
        // Read-only is stricter than a private copy (only git commits inside fail): enforced.
        assert_eq!(wp.state, ProtectionState::Enforced);
        assert!(wp.detail.contains("overlayfs is not loaded") && wp.detail.contains(".git"), "{}", wp.detail);
        assert!(p.env.vars.contains(&("TMPDIR".into(), "/tmp".into())));
        assert!(p.helper_plan(1, Vec::new()).namespaces.is_some());
        // Below ABI 3 the read-only mounts stop truncation outside; no seccomp guard is needed.
        let mut c2 = c.clone();
        c2.landlock.abi = 2;
        let p2 = make_plan(&pol, &c2, &RunContext::default()).unwrap();
        assert_eq!(p2.protections.iter().find(|x| x.id == "fs-truncate-outside").unwrap().state, ProtectionState::Enforced);
        assert!(!p2.seccomp().unwrap().rules.iter().any(|r| r.syscall == "truncate"));
        // Asking for standard explicitly drops the namespaces.
        let mut pol = pol;
        pol.level = LevelSetting::Exactly(SandboxLevel::Standard);
        assert!(make_plan(&pol, &c, &RunContext::default()).unwrap().namespaces().is_none());
        // At Standard a TMPDIR outside every writable grant points to /tmp (mktemp would fail);
        // one inside the workspace is kept.
        let ctx = |t: &Path| RunContext { caller_env: vec![("TMPDIR".into(), t.display().to_string())], ..RunContext::default() };
        let ps = make_plan(&pol, &c, &ctx(Path::new("/var/lib/elsewhere"))).unwrap();
        assert!(ps.env.vars.contains(&("TMPDIR".into(), "/tmp".into())) && ps.env.redirected.contains(&"TMPDIR".to_string()), "{:?}", ps.env.vars);
        let ps = make_plan(&pol, &c, &ctx(&ws.join("tmp"))).unwrap();
        assert!(ps.env.vars.contains(&("TMPDIR".into(), ws.join("tmp").display().to_string())), "{:?}", ps.env.vars);
    }

    #[test]
    fn no_landlock_with_user_namespaces_uses_mounts_at_minimal() {
        let (_d, home, ws) = world();
        let mut c = caps(0, false);
        c.user_namespaces = Some(Feature { available: true, detail: String::new() });
        let pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
        let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
        assert_eq!(p.level, SandboxLevel::Minimal);
        assert!(p.landlock().is_none() && p.namespaces().is_some());
        let state = |id: &str| p.protections.iter().find(|x| x.id == id).unwrap();
        assert_eq!(state("fs-write-outside").state, ProtectionState::Enforced);
        assert_eq!(state("fs-write-outside").mechanism, "read-only mounts");
        assert_eq!(state("fs-read-credentials").mechanism, "mount masks");
        // Reads: the fresh root (see without_landlock_the_namespaces_confine_reads_with_a_fresh_root).
        assert_eq!(state("fs-read-outside").state, ProtectionState::Enforced);
        assert_eq!(state("fs-read-outside").mechanism, "fresh root (mount namespace)");
        assert_eq!(state("signals-outside").state, ProtectionState::Enforced);
        assert_eq!(state("fs-device-ioctl").mechanism, "private /dev");
        assert!(p.warnings[0].contains("a fresh root holds only the granted paths"), "{:?}", p.warnings);
        // An explicit --level minimal stays seccomp only.
        let mut pol = pol;
        pol.level = LevelSetting::Exactly(SandboxLevel::Minimal);
        let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
        assert!(p.namespaces().is_none());
        assert_eq!(p.protections.iter().find(|x| x.id == "fs-write-outside").unwrap().state, ProtectionState::Off);
    }

    #[test]
    fn cgroup_process_limit_when_available() {
        let (_d, home, ws) = world();
        let mut c = caps(7, true);
        c.cgroup_pids = Some(crate::detect::CgroupPids { base: "/sys/fs/cgroup/pids".into(), version: "v1".into() });
        let p = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &c, &RunContext::default()).unwrap();
        let want = crate::defaults::default_max_processes() + 2;
        assert!(matches!(p.process_limit(), ProcessLimit::Cgroup { max, .. } if *max == want));
        assert!(!p.rlimits().iter().any(|r| r.name == "RLIMIT_NPROC"));
        // The default: no per-file bound (the row says so), a login shell's soft descriptor
        // limit under a hard one that tools may raise it to.
        assert!(!p.rlimits().iter().any(|r| r.name == "RLIMIT_FSIZE"));
        assert_eq!(p.protections.iter().find(|x| x.id == "file-size").unwrap().state, ProtectionState::Off);
        let nofile = p.rlimits().iter().find(|r| r.name == "RLIMIT_NOFILE").unwrap();
        assert_eq!((nofile.soft, nofile.value), (Some(1024), crate::defaults::DEFAULT_OPEN_FILES));
    }
}
