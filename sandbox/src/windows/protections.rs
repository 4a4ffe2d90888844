//! The protection table of a Windows plan: the same ids as Linux and macOS, each enforced,
//! degraded (and why) or off under the unelevated tier (restricted token at Low integrity,
//! capability-SID ACEs, labels, job object). The backend has not run on Windows in this
//! project's CI: the plan's warnings say so.

use crate::detect::Capabilities;
use crate::model::ids::{prot, Protection, ProtectionId, ProtectionState};
use crate::plan::decision::Decided;
use crate::policy::{SandboxLevel, SandboxMode};

/// The table for a plan made for Windows (its neutral part, `plan`, and its artefacts,
/// `windows`) on `caps`.
#[must_use]
pub fn protections(plan: &Decided<'_>, windows: Option<&super::WindowsPlan>, _caps: &Capabilities) -> Vec<Protection> {
    use ProtectionId as P;
    use ProtectionState::{Degraded, Enforced, Off};
    let Some(w) = windows.filter(|_| plan.level > SandboxLevel::None) else {
        let why = if plan.mode == SandboxMode::FullAccess { "full-access mode: no sandbox" } else { "no Windows backend here" };
        return ProtectionId::ALL
            .iter()
            .map(|&id| match id {
                P::OutputCap => prot(id, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)),
                P::EnvSecrets if plan.mode != SandboxMode::FullAccess => prot(id, Enforced, "environment allowlist", format!("{} caller variables dropped", plan.env_dropped.len())),
                _ => prot(id, Off, "none", why),
            })
            .collect();
    };
    let tok = "restricted token (write-restricted, Low integrity)";
    let job = "job object";
    let creds = w.aces.iter().filter(|a| a.kind == super::acl::AceKind::Label && a.sid == super::sid::MEDIUM_INTEGRITY).count();
    let mut v = Vec::new();
    v.push(prot(P::FsWriteOutside, Enforced, tok, "writes only where the capability SID has an ACE (the workspace, the run's temp directory, --allow-write paths) and the label is Low"));
    v.push(prot(P::FsReadCredentials, Enforced, "mandatory labels (no-read-up)", format!("{creds} credential paths labelled Medium with no-read-up, no-write-up, no-execute-up; {} absent at launch", w.absent_credentials.len())));
    v.push(prot(P::FsReadSystemSecrets, Enforced, "file permissions", "Windows' system secrets (the SAM and SECURITY hives, LSA secrets) are readable by SYSTEM only"));
    v.push(if plan.configs.is_empty() {
        prot(P::ConfigCredentials, Enforced, "none needed", "no toolchain config file with credentials")
    } else {
        prot(P::ConfigCredentials, Degraded, "none", format!("{} toolchain config files with credentials are readable (reads are not confined on this tier)", plan.configs.len()))
    });
    v.push(prot(P::FsTruncateOutside, Enforced, tok, "opening for write outside the writable roots is refused"));
    v.push(prot(P::FsLinkRenameOut, Degraded, tok,
        "renames and new names outside the writable roots are refused; a hard link inside the workspace to a file elsewhere on the volume needs write access to that file (CreateHardLink), which is not modelled: not claimed until it runs on Windows"));
    v.push(prot(P::FsDeviceIoctl, Degraded, tok, "raw devices (\\\\.\\PhysicalDrive*) need administrator rights; device ioctls the user may issue are not filtered"));
    v.push(prot(P::FsReadOutside, Off, "none", "reads are not confined on the unelevated tier (only credentials are denied); an explicit read allowlist needs the AppContainer (LPAC) mode, not built yet"));
    v.push(prot(P::FsMetadataOutside, Off, "none", "metadata is readable wherever the user may read"));
    v.push(prot(P::FsStatSecrets, Degraded, "mandatory labels", "credential paths' names and sizes are visible (no-read-up refuses their contents)"));
    v.push(prot(P::HomePrivate, Off, "none", "%USERPROFILE% is readable by the command on the unelevated tier"));
    v.push(workspace_persistence(plan, w));
    v.push(prot(P::WorkspacePersistenceLive, if w.reviewed.is_empty() { Enforced } else { Degraded }, "deny ACEs",
        if w.reviewed.is_empty() { "denied in place: the host never sees a change".to_string() } else { format!("{} absent protected paths are reviewed after the run, so a process of the user could see them during it", w.reviewed.len()) }));
    v.push(prot(P::TmpPrivate, Enforced, "per-run temp directory", "TEMP and TMP point to the run's own directory; the user's %TEMP% is not writable (Low integrity)"));
    v.push(prot(P::Network, Off, "none", "a write-restricted token does not confine the network; the AppContainer mode that would is not built yet"));
    v.push(prot(P::UnixSocketsOutside, Degraded, "mandatory labels", "connecting to an AF_UNIX socket file outside needs write access to it, refused at Low integrity (modelled, not yet run on Windows); named pipes whose DACL lets the user in are reachable"));
    v.push(prot(P::AbstractSocketsOutside, Enforced, "platform", "Windows' AF_UNIX has no abstract namespace"));
    v.push(prot(P::SignalsOutside, Enforced, "integrity", "the user's other processes are Medium: PROCESS_TERMINATE and the like are refused (no-write-up)"));
    v.push(prot(P::Ptrace, Enforced, "integrity", "debugging, reading or writing the memory of a Medium process is refused"));
    v.push(prot(P::SyscallAbi, Enforced, "platform", "access checks are made by the kernel's object manager, whichever call reaches them"));
    v.push(prot(P::IoUring, Enforced, "platform", "Windows has no io_uring (its I/O rings do the access check at open)"));
    v.push(prot(P::TtyInjection, Degraded, "job object", "no console of its own yet: the command shares the runner's console (input is a pipe when --stdin is not inherited)"));
    v.push(prot(P::OtherTerminals, Enforced, "job object (UI limits)", "no handles of other processes' windows, no desktop switching, no clipboard"));
    v.push(prot(P::Keyring, Enforced, "mandatory labels", "the Credential Manager's and DPAPI's files are labelled no-read-up; the vault service refuses Low-integrity callers"));
    v.push(prot(P::SysvIpc, Degraded, "integrity", "named objects (events, sections, mutexes) of Medium processes are not writable; readable ones are"));
    v.push(prot(P::NamespacesMount, Enforced, "restricted token", "DISABLE_MAX_PRIVILEGE: no privilege to mount, load drivers or create symbolic links"));
    v.push(prot(P::KernelSurface, Degraded, "restricted token", "every privilege is removed, but the system calls the user may make are not filtered"));
    v.push(prot(P::KernelInfo, Off, "none", "the system's version and configuration are readable"));
    v.push(prot(P::PidIsolation, Degraded, "integrity", "the user's processes are listed (names, ids); their memory and handles are not accessible"));
    v.push(prot(P::InheritedFds, Enforced, "runner", "only the three standard handles are inherited (STARTUPINFOEX handle list)"));
    v.push(prot(P::EnvSecrets, Enforced, "environment allowlist", format!("{} caller variables dropped", plan.env_dropped.len())));
    v.push(prot(P::Capabilities, Enforced, "restricted token", "DISABLE_MAX_PRIVILEGE and LUA_TOKEN: no privilege but change-notify, not elevated"));
    v.push(prot(P::ProcessCount, Enforced, job, format!("at most {} active processes", w.job.active_processes)));
    v.push(prot(P::Memory, Enforced, job, format!("{} bytes committed by the whole tree", w.job.job_memory_bytes)));
    v.push(prot(P::FileSize, Off, "none", "Windows has no per-file size limit"));
    v.push(prot(P::OpenFiles, Off, "none", "Windows has no per-process handle limit a user can set"));
    v.push(prot(P::CoreDumps, Enforced, job, "die on unhandled exception: no error-reporting dump"));
    v.push(prot(P::TimeoutKillTree, Enforced, job, "the job is terminated at the timeout and when the runner exits (kill on close): every descendant dies"));
    v.push(prot(P::OutputCap, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)));
    v
}

fn workspace_persistence(plan: &Decided<'_>, w: &super::WindowsPlan) -> Protection {
    use ProtectionState::{Degraded, Enforced};
    let id = ProtectionId::WorkspacePersistence;
    if plan.mode != SandboxMode::WorkspaceWrite {
        return prot(id, Enforced, "restricted token", "the workspace is read-only");
    }
    let denied = w.aces.iter().filter(|a| a.kind == super::acl::AceKind::Deny && a.mask == super::acl::rights::ANY_WRITE).count();
    let detail = format!(
        "{denied} protected paths carry a deny ACE for the capability SID (not written, created in, renamed or removed; their ancestors not renamed); {} absent ones reviewed after the run",
        w.reviewed.len()
    );
    if plan.unprotectable.is_empty() {
        prot(id, Enforced, "deny ACEs + review", detail)
    } else {
        prot(id, Degraded, "deny ACEs + review", format!("{detail}; {} not protected", plan.unprotectable.len()))
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::config::{build_sandbox_policy_for, SandboxSettings};
    use crate::detect::{assumed_for, Platform};
    use crate::plan::{make_plan, Plan, ProtectionId, RunContext};
    use crate::policy::{SandboxLevel, SandboxMode};
    use crate::windows::acl::{rights, AceKind};

    fn win_plan(root: &Path, mode: SandboxMode) -> Plan {
        let home = root.join("home");
        let ws = home.join("proj");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
        let s = SandboxSettings { mode, home: Some(home), dangerously_allow_full_access: mode == SandboxMode::FullAccess, ..Default::default() };
        let policy = build_sandbox_policy_for(&ws, &s, Platform::Windows).unwrap();
        let ctx = RunContext { scratch: Some(root.join("temp-run")), ..RunContext::default() };
        make_plan(&policy, &assumed_for(Platform::Windows), &ctx).unwrap()
    }

    #[test]
    fn protection_table_has_every_id_once_in_order() {
        let d = crate::test_dir();
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly, SandboxMode::FullAccess] {
            let plan = win_plan(d.path(), mode);
            let ids: Vec<ProtectionId> = plan.protections.iter().map(|p| p.id).collect();
            assert_eq!(ids, ProtectionId::ALL, "{mode:?}");
            assert_eq!(plan.windows.is_some(), mode != SandboxMode::FullAccess);
            assert_eq!(plan.level, if mode == SandboxMode::FullAccess { SandboxLevel::None } else { SandboxLevel::Minimal });
        }
    }

    #[test]
    fn the_plan_grants_the_workspace_and_temp_denies_protected_paths_and_labels_credentials() {
        let d = crate::test_dir();
        let root = d.path().canonicalize().unwrap();
        let plan = win_plan(&root, SandboxMode::WorkspaceWrite);
        let w = plan.windows.unwrap();
        let ws = root.join("home/proj");
        let has = |p: PathBuf, kind: AceKind, mask: u32| w.aces.iter().any(|a| a.path == p && a.kind == kind && a.mask == mask);
        assert!(has(ws.clone(), AceKind::Allow, rights::MODIFY) && has(ws.clone(), AceKind::Label, 1));
        assert!(has(root.join("temp-run"), AceKind::Allow, rights::MODIFY));
        assert!(has(ws.join(".git/hooks"), AceKind::Deny, rights::ANY_WRITE) && has(ws.join(".vscode"), AceKind::Deny, rights::ANY_WRITE));
        assert!(has(ws.join(".git"), AceKind::Deny, rights::NO_REMOVE) && has(ws.clone(), AceKind::Deny, rights::NO_REMOVE));
        assert!(has(root.join("home/.ssh"), AceKind::Label, 7), "{:#?}", w.aces);
        assert!(w.aces.iter().any(|a| a.create_dir && a.path == ws.join(".idea")), "an absent protected directory is created to carry its deny");
        assert!(w.reviewed.iter().any(|r| r.path == ws.join(".mcp.json")), "an absent protected file is reviewed");
        // Denies and labels on credentials come before the grants they carve out of.
        let first_allow = w.aces.iter().position(|a| a.kind == AceKind::Allow).unwrap();
        assert!(w.aces[..first_allow].iter().any(|a| a.kind == AceKind::Deny));
        // Read-only mode: nothing in the workspace is writable.
        let ro = win_plan(&root, SandboxMode::ReadOnly).windows.unwrap();
        assert!(!ro.aces.iter().any(|a| a.kind == AceKind::Allow && a.path == ws));
        assert!(ro.aces.iter().all(|a| a.kind != AceKind::Deny || !a.path.starts_with(&ws)));
    }
}
