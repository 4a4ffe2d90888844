//! The protection table of a macOS plan: the same ids as Linux, each enforced, degraded (and
//! why) or off under Seatbelt. Every row says what the profile does; the backend has not run on
//! a Mac in this project's CI (the plan's warnings say so, and `localgpt sandbox test` checks it
//! on a Mac).

use crate::detect::Capabilities;
use crate::model::ids::{Protection, ProtectionId, ProtectionState};
use crate::plan::decision::Decided;
use crate::policy::{SandboxLevel, SandboxMode};

use crate::model::ids::prot;

/// The table for a plan made for macOS (its neutral part, `plan`) on `caps`.
#[must_use]
pub fn protections(plan: &Decided<'_>, caps: &Capabilities) -> Vec<Protection> {
    use ProtectionId as P;
    use ProtectionState::{Degraded, Enforced, Off};
    if plan.level == SandboxLevel::None {
        let why = if plan.mode == SandboxMode::FullAccess { "full-access mode: no sandbox" } else { "no Seatbelt (sandbox-exec) here" };
        return ProtectionId::ALL
            .iter()
            .map(|&id| match id {
                P::TimeoutKillTree => prot(id, Degraded, "supervisor (process group)", "the command's process group is killed at the timeout; a descendant in its own session survives"),
                P::OutputCap => prot(id, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)),
                P::EnvSecrets if plan.mode != SandboxMode::FullAccess => prot(id, Enforced, "environment allowlist", format!("{} caller variables dropped", plan.env_dropped.len())),
                _ => prot(id, Off, "none", why),
            })
            .collect();
    }
    let sb = "seatbelt";
    let fs_confined = plan.level >= SandboxLevel::Standard;
    let mut v = Vec::new();
    v.push(if fs_confined {
        prot(P::FsWriteOutside, Enforced, sb, "writes only below the workspace (workspace-write mode), the scratch directories and granted paths")
    } else {
        prot(P::FsWriteOutside, Off, "none", "level minimal: writes are not confined (only credentials and protected paths are denied)")
    });
    v.push(prot(P::FsReadCredentials, Enforced, sb, format!("{} credential paths denied for reads, writes and exec (by resolved path)", plan.access.deny.len())));
    v.push(if plan.system_secrets.is_empty() && !caps.is_root {
        prot(P::FsReadSystemSecrets, Enforced, "file permissions", "no secret under /etc is readable by this user")
    } else {
        prot(P::FsReadSystemSecrets, Enforced, sb, format!("{} secrets under /etc denied", plan.system_secrets.len()))
    });
    v.push(if plan.configs.is_empty() {
        prot(P::ConfigCredentials, Enforced, "none needed", "no toolchain config file with credentials")
    } else {
        prot(P::ConfigCredentials, Enforced, "originals denied (seatbelt), tools pointed at scrubbed copies", format!("{} toolchain config files", plan.configs.len()))
    });
    v.push(if fs_confined {
        prot(P::FsTruncateOutside, Enforced, sb, "file-write-data outside the writable roots is denied")
    } else {
        prot(P::FsTruncateOutside, Off, "none", "level minimal: writes are not confined")
    });
    v.push(prot(P::FsLinkRenameOut, Degraded, sb,
        "renames and new names outside the writable roots are denied; a hard link inside the workspace to a file elsewhere on the same volume is not known to be refused (Seatbelt checks the path a file is opened by), so it is not claimed: `localgpt sandbox test` on a Mac checks it"));
    v.push(prot(P::FsDeviceIoctl, Enforced, sb, "ioctl only on the plan's device nodes and on terminals the command opens itself"));
    v.push(if fs_confined {
        prot(P::FsReadOutside, Enforced, sb, "contents readable only below the system, toolchain, workspace and granted paths")
    } else {
        prot(P::FsReadOutside, Off, "none", "level minimal: reads are not confined")
    });
    v.push(prot(P::FsMetadataOutside, Degraded, sb, "metadata (stat, readlink, existence) is readable everywhere but denied paths: tools resolve paths through it"));
    v.push(prot(P::FsStatSecrets, Enforced, sb, "denied paths cannot even be stat'ed"));
    v.push(if fs_confined {
        prot(P::HomePrivate, Degraded, sb, "$HOME's contents are unreadable except the toolchains; names and metadata under it are visible")
    } else {
        prot(P::HomePrivate, Off, "none", "level minimal: reads are not confined")
    });
    let wp = workspace_persistence(plan);
    // Seatbelt denies the writes in place: what holds after the run holds during it.
    let live = prot(ProtectionId::WorkspacePersistenceLive, wp.state, "seatbelt", "the protected paths are denied in place: the host never sees a change");
    v.push(wp);
    v.push(live);
    v.push(prot(P::TmpPrivate, Degraded, "none", "/private/tmp is shared with the host (read-write in workspace-write mode); macOS has no private /tmp"));
    v.push(prot(P::Network, Enforced, sb, "every network operation is denied: TCP, UDP, DNS and unix sockets"));
    v.push(prot(P::UnixSocketsOutside, Enforced, sb, "connecting to or binding a unix socket is a network operation, denied"));
    v.push(prot(P::AbstractSocketsOutside, Enforced, "platform", "macOS has no abstract socket namespace"));
    v.push(prot(P::SignalsOutside, Enforced, sb, "signals only to processes of the same sandbox"));
    v.push(prot(P::Ptrace, Enforced, sb, "process information and debugging only within the sandbox"));
    v.push(prot(P::SyscallAbi, Enforced, sb, "Seatbelt checks operations in the kernel, whichever system call or ABI reaches them"));
    v.push(prot(P::IoUring, Enforced, "platform", "macOS has no io_uring"));
    v.push(if caps.is_root {
        prot(P::TtyInjection, Degraded, "setsid", "the command has no controlling terminal, but as root TIOCSTI on an inherited terminal is not refused by the kernel; do not pass a terminal (--stdin inherit) to a command run as root")
    } else {
        prot(P::TtyInjection, Enforced, "setsid", "the command has no controlling terminal, and macOS refuses TIOCSTI on a terminal that is not the caller's controlling one")
    });
    v.push(prot(P::OtherTerminals, Enforced, sb, "only /dev/tty and the terminals the command opens itself (pty extension), not the user's other /dev/ttys*"));
    v.push(prot(P::Keyring, Enforced, sb, "the keychain's services are not reachable (mach-lookup denied) and ~/Library/Keychains is denied"));
    v.push(prot(P::SysvIpc, Enforced, sb, "SysV IPC operations are denied by default; POSIX semaphores are allowed"));
    v.push(prot(P::NamespacesMount, Enforced, "platform", "macOS has no namespaces; mounting needs root"));
    v.push(prot(P::KernelSurface, Degraded, sb, "the default deny covers kernel extensions, sysctl writes and IOKit user clients, but not every system call as a seccomp filter does"));
    v.push(prot(P::KernelInfo, Degraded, sb, "sysctl reads (kernel version, hardware, the host's network interfaces) are allowed: tools need them"));
    v.push(prot(P::PidIsolation, Degraded, "none", "ps lists the host's processes (sysctl); other processes' information and arguments are denied by process-info"));
    v.push(prot(P::InheritedFds, Enforced, "helper", "every fd above 2 is closed before exec"));
    v.push(prot(P::EnvSecrets, Enforced, "environment allowlist", format!("{} caller variables dropped", plan.env_dropped.len())));
    v.push(prot(P::Capabilities, Enforced, sb, "the profile is inherited by every descendant, setuid programs included"));
    v.push(prot(P::ProcessCount, Degraded, "none", "no per-sandbox process bound on macOS (RLIMIT_NPROC counts all of the user's processes); kern.maxprocperuid bounds a fork bomb"));
    v.push(prot(P::Memory, Degraded, "none", "no memory bound on macOS"));
    v.push(crate::plan::decision::file_size_row(&plan.limits));
    v.push(crate::plan::decision::open_files_row(&plan.limits));
    v.push(prot(P::CoreDumps, Enforced, "RLIMIT_CORE=0", "no core files"));
    v.push(prot(P::TimeoutKillTree, Degraded, "supervisor (process group)",
        "the command's process group is killed at the timeout and when it exits; a descendant that starts its own session survives (macOS has no subreaper or PID namespace)"));
    v.push(prot(P::OutputCap, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)));
    v
}

fn workspace_persistence(plan: &Decided<'_>) -> Protection {
    use ProtectionState::{Degraded, Enforced};
    let id = ProtectionId::WorkspacePersistence;
    if plan.mode != SandboxMode::WorkspaceWrite {
        return prot(id, Enforced, "seatbelt", "the workspace is read-only");
    }
    let rel = |p: &std::path::Path| p.strip_prefix(&plan.workspace).unwrap_or(p).display().to_string();
    let names: Vec<String> = plan.protected.iter().map(|p| if p.absent { format!("{} (absent)", rel(&p.path)) } else { rel(&p.path) }).collect();
    let mut detail = format!(
        "not writable, creatable, renamable or removable, nor are their ancestors renamable: {}; in .git only hooks, config and the files that redirect git or run code later (objects, refs and the index stay writable, so commits work; rebases and submodule updates do not)",
        names.join(", ")
    );
    if !plan.unprotectable.is_empty() {
        let bad: Vec<String> = plan.unprotectable.iter().map(|u| format!("{} ({})", rel(&u.path), u.why)).collect();
        detail.push_str(&format!("; not protected: {}", bad.join("; ")));
        return prot(id, Degraded, "seatbelt", detail);
    }
    prot(id, Enforced, "seatbelt", detail)
}
