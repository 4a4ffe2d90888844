//! Protection ablation: a **test-only** build (cargo feature `ablation`, which no release
//! build enables) that removes the mechanisms of the protections named in
//! `LOCALGPT_ABLATE` (comma-separated ids, e.g. `io-uring,ptrace`) from every plan it makes,
//! while the plan's protection table still reports them as before. The escape corpus then shows
//! that each protection matters: with it removed, at least one vector that names it must escape
//! (the harness's `localgpt-ablation`). A protection no vector catches is a corpus gap.
//!
//! Each cut removes every layer of the protection it can reach (Landlock rights and scopes,
//! seccomp rows, mounts, rlimits, cgroups, the environment filter, the runner's caps); where
//! two protections share one mechanism the cut removes it for both and [`cut`] says so. Without
//! the feature nothing of this exists: [`is`] is a constant `false`.

// (On Windows only `is` is used: the Linux mechanisms' cuts have nothing to cut there.)
#![cfg_attr(not(unix), allow(dead_code))]

use crate::plan::ProtectionId;

#[cfg(feature = "ablation")]
mod imp {
    use super::ProtectionId;
    use std::cell::Cell;
    use std::sync::OnceLock;

    static ABLATED: OnceLock<Vec<ProtectionId>> = OnceLock::new();

    thread_local! {
        /// Set while the reference plan (the protection table reported) is made.
        static REFERENCE: Cell<bool> = const { Cell::new(false) };
    }

    /// The ids in `LOCALGPT_ABLATE` (read once). An unknown id ends the process: an ablation
    /// run that silently removed nothing would report a protection as uncaught for no reason.
    pub fn ablated() -> &'static [ProtectionId] {
        ABLATED.get_or_init(|| {
            let v = std::env::var("LOCALGPT_ABLATE").unwrap_or_default();
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    ProtectionId::parse(s).unwrap_or_else(|| {
                        eprintln!("localgpt (ablation build): LOCALGPT_ABLATE names an unknown protection `{s}`");
                        std::process::exit(2)
                    })
                })
                .collect()
        })
    }

    pub fn is(id: ProtectionId) -> bool {
        !REFERENCE.with(Cell::get) && ablated().contains(&id)
    }

    pub fn reference<T>(f: impl FnOnce() -> T) -> T {
        REFERENCE.with(|r| r.set(true));
        let out = f();
        REFERENCE.with(|r| r.set(false));
        out
    }
}

/// Whether `id` is ablated in this process (always `false` without the feature).
#[cfg(feature = "ablation")]
#[must_use]
pub fn is(id: ProtectionId) -> bool {
    imp::is(id)
}

/// Whether `id` is ablated in this process (always `false` without the feature).
#[cfg(not(feature = "ablation"))]
#[must_use]
#[inline]
pub const fn is(_id: ProtectionId) -> bool {
    false
}

/// Whether any protection is ablated.
#[cfg(feature = "ablation")]
#[must_use]
pub fn active() -> bool {
    ProtectionId::ALL.iter().any(|p| is(*p))
}

/// Runs `f` (making the reference plan) with nothing ablated.
#[cfg(feature = "ablation")]
pub fn reference<T>(f: impl FnOnce() -> T) -> T {
    imp::reference(f)
}

#[cfg(feature = "ablation")]
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

/// Removes the ablated protections' mechanisms from `plan` (its protection table is left as
/// it was). Returns one line per ablated protection saying what was removed.
///
/// # Errors
/// The seccomp program cannot be compiled again.
#[cfg(feature = "ablation")]
pub fn cut(plan: &mut crate::plan::Plan, caller_env: &[(String, String)]) -> Result<Vec<String>, crate::SandboxError> {
    use crate::linux::landlock::scope;
    let ids: Vec<ProtectionId> = imp::ablated().to_vec();
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
                if !owned.is_empty() {
                    s.program = crate::linux::seccomp::compile_for(s.arch, &s.rules).map_err(crate::SandboxError::Plan)?;
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
                ProtectionId::ProcessCount if !matches!(l.process_limit, crate::plan::ProcessLimit::Unbounded) => {
                    l.process_limit = crate::plan::ProcessLimit::Unbounded;
                    how.push("the pids cgroup".into());
                }
                ProtectionId::Memory if !matches!(l.memory_limit, crate::plan::MemoryLimit::Unbounded) => {
                    l.memory_limit = crate::plan::MemoryLimit::Unbounded;
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
