//! Compiling a plan's Linux artefacts: namespaces and mounts ([`super::mounts`]), Landlock
//! rules ([`super::landlock`]), the seccomp program ([`super::seccomp`]), rlimits and the
//! cgroup limits, from the policy, the detected capabilities and the OS-neutral decisions
//! already made ([`crate::plan::make_plan`]). Pure: nothing is applied here.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::landlock::{self, Grant};
use super::{mounts, seccomp};
use crate::detect::Capabilities;
use crate::error::SandboxError;
use crate::plan::configs::ScrubbedConfig;
use crate::guard::protected::ProtectedPath;
use crate::plan::resolve::PathResolver;
use crate::plan::decision::{confined_rlimits, default_memory_bytes, default_tmp_bytes, MemoryLimit, ProcessLimit, RlimitNumbers, RlimitSetting, RunContext};
use crate::policy::{SandboxLevel, SandboxMode, SandboxPolicy};
use landlock::{PathRule, SkippedPath};
use seccomp::{PackedInsn, SeccompRuleSpec};
use serde::{Deserialize, Serialize};

/// Linux's `RLIMIT_*` numbers (the same on x86_64 and aarch64; the plan may be made elsewhere).
const LINUX_RLIMITS: RlimitNumbers = RlimitNumbers { fsize: 1, nofile: 7, core: 4 };
const LINUX_RLIMIT_NPROC: i32 = 6;

/// The command's `/etc/resolv.conf` with the network allowlist at Full: the runner's DNS stub.
pub const RESOLV_CONF: &str = "# localgpt sandbox (network allowlist): names are answered by the runner's DNS stub,\n# from the allowlist alone (allowed names: 127.0.0.1, where the proxy listens; others: REFUSED).\nnameserver 127.0.0.1\noptions timeout:2 attempts:1\n";

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
    pub arch: super::syscalls::SeccompArch,
    /// The rule table, with reasons.
    pub rules: Vec<SeccompRuleSpec>,
    /// The compiled program.
    pub program: Vec<PackedInsn>,
}

fn native_arch() -> super::syscalls::SeccompArch {
    super::syscalls::SeccompArch::native()
}

/// The Linux backend's compiled artefacts of a [`crate::plan::Plan`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct LinuxPlan {
    /// Namespaces and mounts (Full level).
    pub namespaces: Option<mounts::NamespacePlan>,
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

/// What [`compile`] needs.
pub struct Inputs<'a> {
    /// The policy (with the run's extra denies).
    pub policy: &'a SandboxPolicy,
    /// What this machine offers.
    pub caps: &'a Capabilities,
    /// The run's context.
    pub ctx: &'a RunContext,
    /// The level chosen.
    pub level: SandboxLevel,
    /// Namespaces and mounts are used (Full, or Minimal with user namespaces).
    pub full: bool,
    /// The toolchain configs, scrubbed.
    pub scrubbed: &'a [ScrubbedConfig],
    /// The protected workspace paths (the private ones get overlays).
    pub protected: &'a [ProtectedPath],
    /// Paths granted read-only for the scrubbed configs (added to here at Full).
    pub config_reads: &'a mut Vec<PathBuf>,
    /// The plan's path resolver.
    pub resolver: &'a mut PathResolver,
}

/// The Linux artefacts of a run.
///
/// # Errors
/// [`SandboxError::Plan`] when a user-requested path does not exist or the seccomp table fails
/// to compile.
pub fn compile(i: Inputs<'_>) -> Result<LinuxPlan, SandboxError> {
    let Inputs { policy, caps, ctx, level, full, scrubbed, protected, config_reads, resolver } = i;
    let confined = level > SandboxLevel::None;
    let tmp_bytes = policy.max_tmp_bytes.unwrap_or_else(|| default_tmp_bytes(caps.mem_total_bytes));
    let mut namespaces = full.then(|| mounts::namespace_plan_with(resolver, policy, caps.uid, caps.gid, tmp_bytes));
    if let Some(ns) = namespaces.as_mut() {
        ns.protected = protected.iter().filter(|p| p.private).cloned().collect();
    }
    if let Some(ns) = namespaces.as_mut() {
        // Full: scrubbed copies bound over the originals (read-only); a clean one only where the
        // private $HOME would not show it otherwise.
        for c in scrubbed {
            let visible = ns.home_view.as_ref().is_none_or(|h| !c.path.starts_with(&h.home) || h.keep.iter().any(|k| c.path.starts_with(k)));
            if !c.removed.is_empty() || !visible {
                ns.config_overlays.push(mounts::ConfigOverlay { target: c.path.clone(), content: c.content.clone() });
                config_reads.push(c.path.clone());
            }
        }
    }
    // The network allowlist in the sandbox's own network namespace: the command's resolver asks
    // the runner's DNS stub on 127.0.0.1 (see `crate::linux::dns`). Without a resolv.conf the C
    // libraries ask 127.0.0.1 already.
    if let (Some(ns), crate::policy::NetworkPolicy::Allowlist) = (namespaces.as_mut().filter(|n| n.private_dev), policy.network_access) {
        if let Ok(r) = resolver.canonicalize(Path::new("/etc/resolv.conf")) {
            if r.kind == crate::plan::resolve::FileKind::File {
                ns.config_overlays.push(mounts::ConfigOverlay { target: r.path.clone(), content: RESOLV_CONF.into() });
                config_reads.push(r.path);
            }
        }
    }
    // At Full level existing credential paths are hidden by mounts, so Landlock grants need no
    // expansion around them. A denied path that does not exist at launch cannot be masked: under
    // a writable grant the command could create it and then read it, so Landlock expands around
    // it as at Standard (the grant's entries one by one; nothing new directly beside it). Under a
    // read-only grant it can only appear by a concurrent host write, a race the README documents.
    // At Standard every deny inside a grant is expanded around.
    let masked: Vec<PathBuf> = if namespaces.is_some() {
        let writable_paths: Vec<PathBuf> = policy.writable_paths.iter().map(|w| resolver.canonicalize_lenient(w).path).collect();
        let writable = |d: &Path| {
            (policy.mode == crate::policy::SandboxMode::WorkspaceWrite && d.starts_with(&policy.workspace_path)) || writable_paths.iter().any(|w| d.starts_with(w))
        };
        let mut masked = Vec::new();
        for d in &policy.deny_paths {
            // Resolved leniently: a denied path named through a symbolic link to the workspace.
            if resolver.lexists(d) || !writable(&resolver.canonicalize_lenient(d).path) {
                masked.push(d.clone());
            } else if let Some(ns) = namespaces.as_mut() {
                ns.unmaskable.push(d.clone());
            }
        }
        masked
    } else {
        Vec::new()
    };
    let mut landlock = if level >= SandboxLevel::Standard && caps.landlock.abi > 0 {
        Some(landlock_plan(policy, caps.landlock.abi, full, &masked, config_reads, resolver)?)
    } else {
        None
    };
    // Without Landlock (a kernel before 5.13, or one booted without it) the mount namespace is
    // what confines reads, from the policy's grants directly.
    if let Some(ns) = namespaces.as_mut() {
        if landlock.is_some() || (confined && caps.landlock.abi == 0) {
            confine_reads_by_mounts(ns, landlock.as_mut(), policy, config_reads, resolver);
        }
        // The cargo home's private layer: writable through the overlay, whose writes land in the
        // workspace's tool caches (the mount is what keeps the host's directory unchanged;
        // where the layer is not mounted the directory stays a read-only mount).
        ns.layers = mounts::layers(resolver, policy);
        if let Some(ll) = landlock.as_mut() {
            let access = landlock::read_write(ll.handled_abi) & ll.handled_fs;
            for l in &ns.layers {
                ll.rules.push(landlock::PathRule { path: l.path.clone(), access, reason: LAYER_WHY.into() });
            }
        }
    }
    let seccomp = if level >= SandboxLevel::Minimal {
        // In the sandbox's own network namespace TCP and UDP on lo are the sandbox's own.
        let scope = if policy.network_access == crate::policy::NetworkPolicy::Full {
            seccomp::SocketScope::HostNetworkOpen
        } else if full {
            seccomp::SocketScope::OwnNetworkNamespace
        } else {
            seccomp::SocketScope::SocketpairsOnly
        };
        // The runner answers connect and listen where it can: the sandbox's own unix servers
        // then work, and granted host sockets are reachable. A grant it cannot serve is an
        // error, never a silent refusal at run time.
        let brokered = caps.seccomp_broker.as_ref().is_some_and(|b| b.available);
        if !brokered && !policy.allow_unix_sockets.is_empty() {
            let why = caps.seccomp_broker.as_ref().map_or_else(|| "not detected".to_string(), |b| b.detail.clone());
            return Err(SandboxError::Unsupported(format!("--allow-unix-socket: the runner cannot answer the command's connect calls here ({why})")));
        }
        // Below Landlock ABI 6 nothing else keeps the command's signals in the sandbox: the
        // runner checks each (see the function). Without the runner this stays degraded.
        let signal_scoped = landlock.as_ref().is_some_and(|l| l.scopes & landlock::scope::SIGNAL != 0);
        Some(seccomp_plan(SeccompShape {
            scope,
            brokered,
            // Below Landlock ABI 3 nothing else stops truncation outside the workspace at
            // Standard (at Full the read-only mounts do).
            truncate_guard: level == SandboxLevel::Standard && (1..3).contains(&caps.landlock.abi),
            // Without a PID namespace the host's same-uid processes are in reach: only the
            // command's own scheduling may change (see the function).
            scheduling_guard: !full,
            signal_guard: level == SandboxLevel::Standard && !full && !signal_scoped && brokered,
        })?)
    } else {
        None
    };
    let process_limit = if !confined {
        ProcessLimit::Unbounded
    } else if let Some(cg) = &caps.cgroup_pids {
        ProcessLimit::Cgroup { base: cg.base.clone(), version: cg.version.clone(), max: policy.max_processes + 2 }
    } else if caps.is_root {
        ProcessLimit::Unbounded
    } else if full {
        // Inside a fresh user namespace RLIMIT_NPROC counts only that namespace's processes.
        ProcessLimit::Rlimit { max: u64::from(policy.max_processes) }
    } else {
        ProcessLimit::Rlimit { max: ctx.uid_tasks.unwrap_or(0) + u64::from(policy.max_processes) }
    };
    let memory_limit = match &caps.cgroup_memory {
        Some(cg) if confined => MemoryLimit::Cgroup {
            base: cg.base.clone(),
            version: cg.version.clone(),
            max_bytes: policy.max_memory_bytes.unwrap_or_else(|| default_memory_bytes(caps.mem_total_bytes)),
        },
        _ => MemoryLimit::Unbounded,
    };
    let mut rlimits = Vec::new();
    if confined {
        rlimits = confined_rlimits(policy, &LINUX_RLIMITS);
        if let ProcessLimit::Rlimit { max } = process_limit {
            rlimits.push(RlimitSetting { name: "RLIMIT_NPROC".into(), resource: LINUX_RLIMIT_NPROC, value: max, soft: None });
        }
    }
    Ok(LinuxPlan {
        namespaces,
        landlock,
        seccomp,
        rlimits,
        process_limit,
        memory_limit,
        scratch: if full { None } else { ctx.scratch.clone() },
        drop_capabilities: confined && (caps.is_root || full),
    })
}

/// Why a layered directory is writable (Landlock rule; `sandbox explain`).
pub const LAYER_WHY: &str = "a private layer over the cargo home, kept for this workspace (read-write: writes land in its tool caches, never in the host's)";

/// Full, where PID 1 makes a private `/dev` (the fresh root is built in it): the command's `/`
/// becomes a fresh root holding only what the grants name (see [`mounts::FreshRoot`]): the
/// Landlock rules' paths, or without Landlock (`ll` is `None`: the namespaces of a kernel without
/// it) the policy's read, write and device grants and the toolchain configs. With Landlock, it
/// stops handling the rights that would make it check every open against its rules (read, list,
/// and truncate, which it computes at every open): nothing outside the grants exists, and
/// everything but the workspace and the writable grants is mounted read-only (truncation fails
/// with `EROFS`). Where Landlock had to expand a grant around a denied path that no mount can
/// hide (one that does not exist yet, inside a writable grant), it keeps handling reads as well.
/// A policy with more separate grants than [`mounts::MAX_FRESH_ROOT_BINDS`] keeps the host's
/// tree (and Landlock's reads, where there is Landlock), as before.
fn confine_reads_by_mounts(ns: &mut mounts::NamespacePlan, ll: Option<&mut LandlockPlan>, policy: &SandboxPolicy, config_reads: &[PathBuf], resolver: &mut PathResolver) {
    if !ns.private_dev {
        return;
    }
    let special = ["/dev", "/proc", "/sys"].map(PathBuf::from);
    // The policy's grants, as it names them.
    let grants = || policy.read_only_paths.iter().chain(&policy.writable_paths).chain(&policy.device_paths).chain(std::iter::once(&policy.workspace_path));
    let granted: Vec<PathBuf> = match &ll {
        Some(ll) => ll.rules.iter().map(|r| r.path.clone()).collect(),
        None => grants().chain(config_reads).filter_map(|p| resolver.canonicalize(p).ok().map(|r| r.path)).collect(),
    };
    let kept = granted
        .into_iter()
        .chain(ns.rw_binds.iter().cloned())
        .chain(ns.tmpfs.iter().cloned())
        .chain(ns.home_view.as_ref().map(|h| h.home.clone()))
        .chain(special.iter().cloned());
    let named: Vec<PathBuf> = grants().chain(policy.home.as_ref()).chain(special.iter()).cloned().collect();
    let Some(root) = mounts::fresh_root(resolver, kept, &named) else { return };
    ns.fresh_root = Some(root);
    if let Some(ll) = ll.filter(|ll| ll.expanded.is_empty()) {
        let unhandled = landlock::fs::READ_FILE | landlock::fs::READ_DIR | landlock::fs::TRUNCATE;
        ll.handled_fs &= !unhandled;
        for r in &mut ll.rules {
            r.access &= ll.handled_fs;
        }
        ll.rules.retain(|r| r.access != 0);
    }
}

fn landlock_plan(
    policy: &SandboxPolicy,
    abi: u32,
    own_netns: bool,
    masked: &[PathBuf],
    config_reads: &[PathBuf],
    resolver: &mut PathResolver,
) -> Result<LandlockPlan, SandboxError> {
    use landlock::{device, read_exec, read_only, read_write};
    let handled_abi = abi.min(landlock::MAX_KNOWN_ABI);
    let mut grants = Vec::new();
    let mut push = |paths: &[PathBuf], access: u64, reason: &str, must_exist: bool| {
        for p in paths {
            grants.push(Grant { path: p.clone(), access, reason: reason.into(), must_exist });
        }
    };
    let defaults_read = default_read_paths(policy.home.as_deref());
    let (system, user_read): (Vec<PathBuf>, Vec<PathBuf>) =
        policy.read_only_paths.iter().cloned().partition(|p| is_default_read(p, &defaults_read));
    for p in &system {
        let access = if p == Path::new("/proc") || p == Path::new("/sys") { read_only(handled_abi) } else { read_exec(handled_abi) };
        push(std::slice::from_ref(p), access, "system or toolchain (read + execute)", false);
    }
    let (context, user_read): (Vec<PathBuf>, Vec<PathBuf>) = user_read.into_iter().partition(|p| policy.context_reads.iter().any(|(c, _)| c == p));
    push(&user_read, read_exec(handled_abi), "allow_paths.read (read + execute)", true);
    for p in &context {
        let why = policy.context_reads.iter().find(|(c, _)| c == p).map_or("", |(_, w)| w.as_str());
        push(std::slice::from_ref(p), read_exec(handled_abi), &format!("{why} (read + execute)"), false);
    }
    push(config_reads, read_only(handled_abi), "toolchain config (credentials removed)", false);
    push(&policy.device_paths, device(handled_abi), "device node", false);
    let (scratch_dirs, user_write): (Vec<PathBuf>, Vec<PathBuf>) = policy
        .writable_paths
        .iter()
        .cloned()
        .partition(|p| crate::defaults::SCRATCH_WRITE_DIRS.iter().any(|s| Path::new(s) == p));
    push(&scratch_dirs, read_write(handled_abi), "scratch (read-write, shared with the host)", false);
    let (context, user_write): (Vec<PathBuf>, Vec<PathBuf>) = user_write.into_iter().partition(|p| policy.context_writes.iter().any(|(c, _)| c == p));
    push(&user_write, read_write(handled_abi), "allow_paths.write (read-write)", true);
    for p in &context {
        let why = policy.context_writes.iter().find(|(c, _)| c == p).map_or("", |(_, w)| w.as_str());
        push(std::slice::from_ref(p), read_write(handled_abi), &format!("{why} (read-write)"), true);
    }
    let ws_access = if policy.mode == SandboxMode::ReadOnly { read_exec(handled_abi) } else { read_write(handled_abi) };
    push(std::slice::from_ref(&policy.workspace_path), ws_access, "workspace", true);
    let resolved = landlock::resolve_rules_with(resolver, &grants, &policy.deny_paths, masked).map_err(SandboxError::Plan)?;
    Ok(LandlockPlan {
        abi,
        handled_abi,
        handled_fs: landlock::fs_rights_for_abi(handled_abi),
        // In the sandbox's own network namespace TCP reaches only its loopback: not handled.
        // TCP rules only where the host's network is closed: the sandbox's own namespace needs
        // none, and `network = "full"` opens it on purpose.
        handled_net: if own_netns || policy.network_access == crate::policy::NetworkPolicy::Full { 0 } else { landlock::net_rights_for_abi(handled_abi) },
        scopes: landlock::scopes_for_abi(handled_abi),
        rules: resolved.rules,
        skipped: resolved.skipped,
        expanded: resolved.expanded,
    })
}

/// The read grants the policy adds by default (system directories, `$HOME` toolchains): a
/// missing one is skipped rather than an error.
fn default_read_paths(home: Option<&Path>) -> HashSet<PathBuf> {
    let system = crate::defaults::SYSTEM_READ_DIRS.iter().map(PathBuf::from);
    let toolchains = home.into_iter().flat_map(|h| crate::defaults::HOME_TOOLCHAINS.iter().map(move |t| h.join(t)));
    system.chain(toolchains).collect()
}

/// `p` is one of the default read grants (paths compare component by component, as `==` does).
fn is_default_read(p: &Path, defaults: &HashSet<PathBuf>) -> bool {
    defaults.contains(p)
}



/// What a plan's seccomp filter depends on: it is a pure function of these (and of the native
/// architecture), so [`seccomp_plan`] builds each shape once per process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SeccompShape {
    scope: seccomp::SocketScope,
    brokered: bool,
    truncate_guard: bool,
    scheduling_guard: bool,
    signal_guard: bool,
}

/// The seccomp plan of `shape`: its rows for the native architecture and their program, built
/// the first time this process asks for that shape (a host's `Sandbox` plans every run; the
/// table and its compilation do not change between runs) and cloned afterwards.
///
/// # Errors
/// [`SandboxError::Plan`] when the program cannot be compiled.
fn seccomp_plan(shape: SeccompShape) -> Result<SeccompPlan, SandboxError> {
    static BUILT: std::sync::Mutex<Vec<(SeccompShape, SeccompPlan)>> = std::sync::Mutex::new(Vec::new());
    if let Some((_, p)) = BUILT.lock().ok().as_deref().and_then(|b| b.iter().find(|(s, _)| *s == shape)) {
        return Ok(p.clone());
    }
    let plan = build_seccomp_plan(shape)?;
    if let Ok(mut b) = BUILT.lock() {
        b.push((shape, plan.clone()));
    }
    Ok(plan)
}

/// [`seccomp_plan`] built now.
///
/// # Errors
/// As [`seccomp_plan`].
fn build_seccomp_plan(shape: SeccompShape) -> Result<SeccompPlan, SandboxError> {
    let mut rules = seccomp::seccomp_table_with(shape.scope, shape.brokered);
    if shape.truncate_guard {
        rules.extend(seccomp::truncate_guard_rules());
    }
    if shape.scheduling_guard {
        rules.extend(seccomp::scheduling_guard_rules(shape.brokered));
    }
    if shape.signal_guard {
        rules.extend(seccomp::signal_guard_rules());
    }
    let arch = crate::linux::syscalls::SeccompArch::native();
    let rules = seccomp::for_arch(rules, arch);
    let program = seccomp::compile_for(arch, &rules).map_err(SandboxError::Plan)?;
    Ok(SeccompPlan { arch, rules, program })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seccomp_plans_built_once_are_the_plans_built_each_time() {
        use seccomp::SocketScope::{HostNetworkOpen, OwnNetworkNamespace, SocketpairsOnly};
        for scope in [HostNetworkOpen, OwnNetworkNamespace, SocketpairsOnly] {
            for bits in 0..16u8 {
                let shape = SeccompShape { scope, brokered: bits & 1 != 0, truncate_guard: bits & 2 != 0, scheduling_guard: bits & 4 != 0, signal_guard: bits & 8 != 0 };
                let built = build_seccomp_plan(shape).unwrap();
                // The first call builds and keeps it, the second hands back the kept one.
                assert_eq!(seccomp_plan(shape).unwrap(), built, "{shape:?}");
                assert_eq!(seccomp_plan(shape).unwrap(), built, "{shape:?}");
            }
        }
        // Each guard is in the key: a shape with it is not handed the plan without it.
        let base = SeccompShape { scope: SocketpairsOnly, brokered: true, truncate_guard: false, scheduling_guard: false, signal_guard: false };
        let plain = seccomp_plan(base).unwrap();
        for with in [SeccompShape { truncate_guard: true, ..base }, SeccompShape { scheduling_guard: true, ..base }, SeccompShape { signal_guard: true, ..base }] {
            let guarded = seccomp_plan(with).unwrap();
            assert!(guarded.rules.len() > plain.rules.len() && guarded.program != plain.program, "{with:?}");
        }
    }

    #[test]
    fn default_read_lookup_matches_the_linear_scan() {
        let system: Vec<PathBuf> = crate::defaults::SYSTEM_READ_DIRS.iter().map(PathBuf::from).collect();
        let linear = |p: &Path, home: Option<&Path>| {
            system.iter().any(|s| s == p) || home.is_some_and(|h| crate::defaults::HOME_TOOLCHAINS.iter().any(|t| h.join(t) == p))
        };
        let probes = [
            "/usr", "/usr/", "/usr/.", "//usr", "/usr/bin", "/nix/store", "/nix//store/", "/nix/./store", "/proc", "/etc/..",
            "/h/.cargo", "/h/.cargo/", "/h//.cargo", "/h/./.cargo", "/h/.local/bin", "/h/.local", "/h/go", "/h/.config/git/",
            "/h", "/other/.cargo", "usr", "", "/",
        ];
        for home in [None, Some(Path::new("/h")), Some(Path::new("/h/"))] {
            let set = default_read_paths(home);
            for p in probes {
                assert_eq!(is_default_read(Path::new(p), &set), linear(Path::new(p), home), "{p:?} home {home:?}");
            }
        }
    }
}
