//! The protections by stable id, their states, and one row of the protection table.

use serde::{Deserialize, Serialize};

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

/// One protection row.
pub(crate) fn prot(id: ProtectionId, state: ProtectionState, mechanism: &str, detail: impl Into<String>) -> Protection {
    Protection { id, state, mechanism: mechanism.into(), detail: detail.into() }
}
