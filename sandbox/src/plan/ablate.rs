//! The cuts of a protection-ablation build (see [`crate::ablation`]): what removing each
//! protection's mechanisms takes out of a finished plan. Test-only: compiled with the cargo
//! feature `ablation` alone.

use crate::model::ids::ProtectionId;

/// Landlock filesystem rights a protection owns.
#[must_use]
pub fn landlock_fs(id: ProtectionId) -> u64 {
    use crate::linux::landlock::fs;
    match id {
        // Removing REFER alone would be stricter (Landlock then forbids every reparenting), so
        // links and renames out are ablated with the write rights.
        ProtectionId::FsWriteOutside | ProtectionId::FsLinkRenameOut => {
            fs::WRITE_FILE | fs::REMOVE_DIR | fs::REMOVE_FILE | fs::MAKE_CHAR | fs::MAKE_DIR | fs::MAKE_REG | fs::MAKE_SOCK | fs::MAKE_FIFO | fs::MAKE_BLOCK | fs::MAKE_SYM | fs::REFER
        }
        ProtectionId::FsTruncateOutside => fs::TRUNCATE,
        ProtectionId::FsDeviceIoctl => fs::IOCTL_DEV,
        ProtectionId::FsReadOutside => fs::READ_FILE | fs::READ_DIR,
        ProtectionId::UnixSocketsOutside => fs::RESOLVE_UNIX,
        _ => 0,
    }
}

/// Removes the mechanisms of the protections in `plan.ablated` from `plan` (its protection
/// table is left as it was). Returns one line per ablated protection saying what was removed.
///
/// # Errors
/// The seccomp program cannot be compiled again.
pub fn cut(plan: &mut super::Plan, caller_env: &[(String, String)]) -> Result<Vec<String>, crate::SandboxError> {
    use crate::linux::landlock::scope;
    let ids: Vec<ProtectionId> = plan.ablated.clone();
    // Without `syscall-abi` the program lets every other ABI's calls through unfiltered.
    let abi_open = ids.contains(&ProtectionId::SyscallAbi);
    let mut said = Vec::new();
    for id in ids {
        let mut how: Vec<String> = Vec::new();
        if let Some(l) = plan.linux.as_mut() {
            if let Some(ll) = l.landlock.as_mut() {
                let mut fs = landlock_fs(id);
                let mut sc = 0;
                match id {
                    ProtectionId::AbstractSocketsOutside => sc = scope::ABSTRACT_UNIX_SOCKET,
                    ProtectionId::SignalsOutside => sc = scope::SIGNAL,
                    ProtectionId::Network if ll.handled_net != 0 => {
                        ll.handled_net = 0;
                        how.push("landlock TCP rights".into());
                    }
                    _ => {}
                }
                fs &= ll.handled_fs;
                sc &= ll.scopes;
                if fs != 0 {
                    ll.handled_fs &= !fs;
                    for r in &mut ll.rules {
                        r.access &= ll.handled_fs;
                    }
                    ll.rules.retain(|r| r.access != 0);
                    how.push(format!("landlock rights {fs:#x}"));
                }
                if sc != 0 {
                    ll.scopes &= !sc;
                    how.push(format!("landlock scope {sc:#x}"));
                }
            }
            if let Some(s) = l.seccomp.as_mut() {
                // The rows that declare this protection (`SeccompRuleSpec::protections`).
                let (owned, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut s.rules).into_iter().partition(|r| r.protections.contains(&id));
                s.rules = kept;
                if !owned.is_empty() || (id == ProtectionId::SyscallAbi && abi_open) {
                    s.program = crate::linux::seccomp::compile_with(s.arch, &s.rules, abi_open).map_err(crate::SandboxError::Plan)?;
                }
                if id == ProtectionId::SyscallAbi {
                    how.push("the seccomp program's kill of other ABIs' calls".into());
                }
                if !owned.is_empty() {
                    let mut names: Vec<&str> = owned.iter().map(|r| r.syscall.as_str()).collect();
                    names.dedup();
                    how.push(format!("{} seccomp rows ({})", owned.len(), names.join(", ")));
                }
            }
            if let Some(ns) = l.namespaces.as_mut() {
                match id {
                    ProtectionId::HomePrivate if ns.home_view.take().is_some() => how.push("the private $HOME".into()),
                    ProtectionId::FsReadOutside if ns.fresh_root.take().is_some() => how.push("the fresh root".into()),
                    ProtectionId::TmpPrivate if !ns.tmpfs.is_empty() => {
                        ns.tmpfs.clear();
                        how.push("the private /tmp and /dev/shm".into());
                    }
                    ProtectionId::FsReadCredentials | ProtectionId::FsStatSecrets | ProtectionId::FsReadSystemSecrets if !ns.masks.is_empty() => {
                        ns.masks.clear();
                        how.push("every mount mask".into());
                    }
                    _ => {}
                }
            }
            let resource = match id {
                ProtectionId::OpenFiles => Some("RLIMIT_NOFILE"),
                ProtectionId::CoreDumps => Some("RLIMIT_CORE"),
                ProtectionId::FileSize => Some("RLIMIT_FSIZE"),
                ProtectionId::ProcessCount => Some("RLIMIT_NPROC"),
                _ => None,
            };
            if let Some(name) = resource {
                let before = l.rlimits.len();
                l.rlimits.retain(|r| r.name != name);
                if l.rlimits.len() != before {
                    how.push(name.to_string());
                }
            }
            match id {
                ProtectionId::ProcessCount if !matches!(l.process_limit, super::decision::ProcessLimit::Unbounded) => {
                    l.process_limit = super::decision::ProcessLimit::Unbounded;
                    how.push("the pids cgroup".into());
                }
                ProtectionId::Memory if !matches!(l.memory_limit, super::decision::MemoryLimit::Unbounded) => {
                    l.memory_limit = super::decision::MemoryLimit::Unbounded;
                    how.push("the memory cgroup".into());
                }
                // A Landlock domain forbids ptrace of every process outside it, and that cannot be
                // removed alone: the whole domain goes.
                ProtectionId::Ptrace if l.landlock.is_some() => {
                    l.landlock = None;
                    how.push("the Landlock domain (its ptrace restriction cannot be removed alone)".into());
                }
                ProtectionId::Capabilities if l.drop_capabilities => {
                    l.drop_capabilities = false;
                    how.push("the capability drop".into());
                }
                _ => {}
            }
        }
        match id {
            ProtectionId::EnvSecrets if !plan.env.dropped.is_empty() => {
                how.push(format!("the environment filter ({} variables kept)", plan.env.dropped.len()));
                for (k, v) in caller_env.iter().filter(|(k, _)| plan.env.dropped.contains(k)) {
                    plan.env.vars.push((k.clone(), v.clone()));
                }
                plan.env.dropped.clear();
            }
            ProtectionId::OutputCap => {
                plan.max_output_bytes = u64::MAX / 4;
                how.push("the output cap".into());
            }
            _ => {}
        }
        // Cuts made while the plan was made (`is` at those places).
        match id {
            ProtectionId::ConfigCredentials => how.push("the scrubbed toolchain configs".into()),
            ProtectionId::FsReadSystemSecrets => how.push("the /etc secrets list".into()),
            ProtectionId::FsReadCredentials => how.push("the credential deny list".into()),
            ProtectionId::WorkspacePersistence | ProtectionId::WorkspacePersistenceLive => how.push("the protected workspace paths".into()),
            ProtectionId::InheritedFds => how.push("the helper's close_range".into()),
            ProtectionId::TtyInjection => how.push("the helper's setsid".into()),
            ProtectionId::TimeoutKillTree => how.push("the runner's kill of the tree".into()),
            ProtectionId::FsMetadataOutside => how.push("the read-only mounts".into()),
            ProtectionId::PidIsolation => how.push("the fresh /proc".into()),
            ProtectionId::KernelInfo => how.push("the /proc and /sys masks".into()),
            ProtectionId::OtherTerminals => how.push("the private devpts (the host's is bound instead)".into()),
            _ => {}
        }
        said.push(format!("{id}: removed {}", if how.is_empty() { "nothing (no mechanism of it in this plan)".to_string() } else { how.join(", ") }));
    }
    Ok(said)
}
