//! Policy + capabilities → [`Plan`]: pure data saying exactly what the helper will apply, and for
//! each protection whether it is enforced, degraded (and why) or off. Every decision lives here;
//! `apply` decides nothing. `localgpt sandbox explain` prints a plan.

#[cfg(feature = "ablation")]
pub mod ablate;
pub mod configs;
pub mod env;
mod protections;
pub use protections::{kernel_at_least, protections};
use protections::why_minimal;
mod helper;
pub use helper::{HelperLandlock, HelperPlan, CONSOLE};
mod sockets;
pub use sockets::UnixSocketGrant;
use sockets::SOCKET_VARS;
mod warnings;
use warnings::{path_list, warnings};
pub mod resolve;
#[cfg(unix)]
pub mod system_secrets;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::detect::{Capabilities, Platform};
use crate::error::SandboxError;
use crate::guard::protected;
use crate::policy::{LevelSetting, SandboxLevel, SandboxMode, SandboxPolicy};
use crate::linux::mounts::NamespacePlan;
use env::EnvPlan;
pub mod decision;
pub use decision::{
    default_memory_bytes, default_tmp_bytes, Access, AccessRule, CgroupSetting, Decided, Limits, MemoryLimit, ProcessLimit, RlimitSetting, RunContext, PRIVATE_SCRATCH,
};
pub(crate) use decision::{file_size_row, open_files_row};
pub use crate::files::{read_config_bytes, read_config_file};
pub use crate::linux::compile::{LandlockPlan, LinuxPlan, SeccompPlan};
pub(crate) use crate::model::ids::prot;
pub use crate::model::ids::{Protection, ProtectionId, ProtectionState};

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
    /// Those of them looked for because a hook manager reads them in every directory
    /// (lint-staged's configurations; see [`protected::nested_protection`]; not serialised).
    #[serde(skip)]
    pub nested_hook_names: Vec<String>,
    /// The worktrees in which git lists what a hook manager reads in every directory
    /// (lint-staged's configurations; [`protected::GitListing`]; not serialised): asked again
    /// after the run.
    #[serde(skip)]
    pub git_listings: Vec<protected::GitListing>,
    /// Where the nested walks' records are kept, when no command of the run can write there
    /// (see [`crate::guard::nested`]; runner only, not serialised).
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
    /// Test-only (cargo feature `ablation`): the protections whose mechanisms this plan was made
    /// without and `ablate::cut` takes out (their rows in `protections` are the reference
    /// plan's). The helper gets them in [`HelperPlan::ablated`]. Always empty in a shipped
    /// build, where [`crate::ablation::is`] is `false` whatever this holds; not serialised.
    #[serde(skip)]
    pub ablated: Vec<ProtectionId>,
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
    let proxy_port = proxy_port(policy, caps, ctx, level, full)?;
    // Secrets under /etc the caller can read (all of root's): denied like credentials.
    // (Only this machine's: a plan for another OS does not list this one's /etc.)
    #[cfg(unix)]
    let system_secrets = if confined && caps.platform == Platform::current() && !crate::ablation::is(&ctx.ablate, ProtectionId::FsReadSystemSecrets) { system_secrets::system_secrets(caps.is_root) } else { Vec::new() };
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
        (Some(h), true) if !crate::ablation::is(&ctx.ablate, ProtectionId::ConfigCredentials) => configs::scrub_known(&mut resolver, h),
        _ => Vec::new(),
    };
    // Standard: a config with credentials is denied, and the tool is pointed at a scrubbed copy
    // in the per-run scratch dir (or, for cargo, which has no such variable, goes without it).
    let ConfigCopies { denying, copies: config_copies, env: config_env, reads: mut config_reads } = if full { ConfigCopies::default() } else { copy_configs(policy, ctx, &scrubbed) };
    let with_configs;
    let policy = match denying {
        Some(p) => {
            with_configs = p;
            &with_configs
        }
        None => policy,
    };
    #[cfg(unix)]
    crate::timing::stamp("plan_configs");
    // Protected workspace paths: private copies at Full for the ones that exist (where the
    // kernel has overlay mounts in a user namespace), a review in place after the run otherwise.
    let protected::ProtectedSet { paths: mut protected, mut unprotectable, nested_walks, nested_names, nested_hook_names, git_config_files, in_scratch, scratch_ancestors, walk_records, git_listings } =
        if confined && policy.mode == SandboxMode::WorkspaceWrite && !(crate::ablation::is(&ctx.ablate, ProtectionId::WorkspacePersistence) || crate::ablation::is(&ctx.ablate, ProtectionId::WorkspacePersistenceLive)) {
            protected::protected_paths(&mut resolver, policy)
        } else {
            protected::ProtectedSet::default()
        };
    // What a protected path leads to in `/tmp` or `/dev/shm`: the host's, writable, below Full
    // (a private one for the run at Full).
    // ... and where a repository the command makes there would be found by the host's git run
    // in a writable root (reviewed after the run).
    if level != SandboxLevel::Full {
        unprotectable.extend(in_scratch);
        protected.extend(scratch_ancestors);
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
    let (linux, macos, windows) = compile_backend(Backend { policy, caps, ctx, level, full, scrubbed: &scrubbed, protected: &protected, limits: &limits, config_reads: &mut config_reads, resolver: &mut resolver })?;
    #[cfg(unix)]
    crate::timing::stamp("plan_backend");
    let (env, cargo_root) = plan_env(policy, ctx, level, full, &config_env, proxy_port);
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
        nested_hook_names,
        git_listings,
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
        // A shipped build carries no cut, whatever the context says.
        ablated: if cfg!(feature = "ablation") { ctx.ablate.clone() } else { Vec::new() },
    };
    plan.protections = match caps.platform {
        Platform::Macos => crate::macos::protections::protections(&plan.decided(), caps),
        Platform::Windows => crate::windows::protections::protections(&plan.decided(), plan.windows.as_ref(), caps),
        Platform::Linux => protections(&plan, caps),
    };
    // The private layers (Full): writable for the command, the host's directory unchanged.
    let layered: Vec<PathBuf> = plan.namespaces().map(|n| n.layers.iter().map(|l| l.path.clone()).collect()).unwrap_or_default();
    for path in layered {
        plan.access.write.push(AccessRule { path, reason: crate::linux::compile::LAYER_WHY.into() });
    }
    plan.warnings = plan_warnings(&plan, caps, policy, cargo_root.as_deref());
    Ok(plan)
}

/// The port of the allowlist proxy the plan needs (`--network allowlist`), or an error where
/// the proxy could be bypassed or `network = "full"` is not implemented.
fn proxy_port(policy: &SandboxPolicy, caps: &Capabilities, ctx: &RunContext, level: SandboxLevel, full: bool) -> Result<Option<u16>, SandboxError> {
    let confined = level > SandboxLevel::None;
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
    Ok(proxy_port)
}

/// Where a toolchain config lost credentials (below Full): the policy that denies the
/// original, the scrubbed copies to write into the run's scratch dir and the variables that
/// point the tools at them; clean configs are granted for reading as they are.
#[derive(Default)]
struct ConfigCopies {
    /// The policy with the originals denied (None: nothing was scrubbed).
    denying: Option<SandboxPolicy>,
    copies: Vec<(PathBuf, String)>,
    env: Vec<(String, String)>,
    reads: Vec<PathBuf>,
}

/// [`ConfigCopies`] for the `scrubbed` configs of `policy`.
fn copy_configs(policy: &SandboxPolicy, ctx: &RunContext, scrubbed: &[configs::ScrubbedConfig]) -> ConfigCopies {
    if scrubbed.is_empty() {
        return ConfigCopies::default();
    }
    let mut config_copies: Vec<(PathBuf, String)> = Vec::new();
    let mut config_env: Vec<(String, String)> = Vec::new();
    let mut config_reads: Vec<PathBuf> = Vec::new();
    let mut p = policy.clone();
    for c in scrubbed {
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
    ConfigCopies { denying: Some(p), copies: config_copies, env: config_env, reads: config_reads }
}

/// What a backend compiler is given.
struct Backend<'a> {
    policy: &'a SandboxPolicy,
    caps: &'a Capabilities,
    ctx: &'a RunContext,
    level: SandboxLevel,
    full: bool,
    scrubbed: &'a [configs::ScrubbedConfig],
    protected: &'a [protected::ProtectedPath],
    limits: &'a Limits,
    config_reads: &'a mut Vec<PathBuf>,
    resolver: &'a mut resolve::PathResolver,
}

/// The platform's artefacts: the Linux plan, the macOS profile or the Windows ACL plan.
type Artefacts = (Option<LinuxPlan>, Option<crate::macos::MacosPlan>, Option<crate::windows::WindowsPlan>);

/// Compiles the platform's artefacts (see [`Backend`]).
fn compile_backend(b: Backend<'_>) -> Result<Artefacts, SandboxError> {
    let Backend { policy, caps, ctx, level, full, scrubbed, protected, limits, config_reads, resolver } = b;
    let confined = level > SandboxLevel::None;
    let mut windows = None;
    let (linux, macos) = match caps.platform {
        Platform::Linux => (
            Some(crate::linux::compile::compile(crate::linux::compile::Inputs {
                policy,
                caps,
                ctx,
                level,
                full,
                scrubbed,
                protected,
                config_reads,
                resolver,
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
                    protected,
                    scratch: ctx.scratch.as_deref(),
                    helper: helper.as_deref(),
                    marker: &marker,
                    resolver,
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
                    protected,
                    limits,
                    scratch: ctx.scratch.as_deref(),
                    resolver,
                })
            });
            (None, None)
        }
    };
    Ok((linux, macos, windows))
}

/// The command's environment: the caller's allowlisted variables, TMPDIR where the command can
/// write, the scrubbed configs' and the proxy's variables, granted sockets' variables; and the
/// root of a Cargo workspace whose target/ is redirected into the workspace.
fn plan_env(policy: &SandboxPolicy, ctx: &RunContext, level: SandboxLevel, full: bool, config_env: &[(String, String)], proxy_port: Option<u16>) -> (EnvPlan, Option<PathBuf>) {
    let confined = level > SandboxLevel::None;
    // The workspace's persistent tool caches, where the policy grants them (workspace-write).
    let persistent = policy.tool_caches.as_deref().filter(|d| policy.mode == SandboxMode::WorkspaceWrite && policy.writable_paths.iter().any(|w| w == d));
    let mut env = if full {
        let private_scratch = (policy.mode == SandboxMode::WorkspaceWrite).then(|| PathBuf::from(PRIVATE_SCRATCH));
        let mut e = env::plan_environment(&ctx.caller_env, &policy.environment, &policy.workspace_path, private_scratch.as_deref(), persistent);
        if private_scratch.is_some() {
            e.vars.retain(|(k, _)| k != "TMPDIR");
            e.vars.push(("TMPDIR".into(), "/tmp".into()));
        }
        e
    } else if confined {
        let mut e = env::plan_environment(&ctx.caller_env, &policy.environment, &policy.workspace_path, ctx.scratch.as_deref(), persistent);
        for (k, v) in config_env {
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
        EnvPlan { vars: ctx.caller_env.clone(), dropped: Vec::new(), redirected: Vec::new(), persistent_caches: None }
    };
    if let (Some(port), true) = (proxy_port, policy.network_allowlist.is_some()) {
        for (k, v) in env::proxy_vars(port) {
            env.vars.retain(|(n, _)| *n != k);
            env.vars.push((k, v));
        }
        // pip counts a refused tunnel as a failure to retry, five times with back-off (8 s
        // before it reports a denied index): one retry, unless the command's own setting is kept.
        if !env.vars.iter().any(|(k, _)| k == "PIP_RETRIES") {
            env.vars.push(("PIP_RETRIES".into(), "1".into()));
        }
        // Without the sandbox's own network namespace the command has no UDP: the C library's
        // resolver asks over TCP instead (`use-vc`), which the broker captures to the DNS stub
        // (`linux::capture::DNS_PORT`), so that a tool resolving a name itself (Node's `fetch`)
        // gets the stub's answer. The command's own options are kept before it.
        if !full {
            let v = env.vars.iter().find(|(k, _)| k == "RES_OPTIONS").map_or_else(|| "use-vc".to_string(), |(_, v)| format!("{v} use-vc"));
            env.vars.retain(|(k, _)| k != "RES_OPTIONS");
            env.vars.push(("RES_OPTIONS".into(), v));
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
    (env, cargo_root)
}

/// The plan's warnings: [`warnings`], then the Cargo target redirection and the workspace
/// given through a symbolic link.
fn plan_warnings(plan: &Plan, caps: &Capabilities, policy: &SandboxPolicy, cargo_root: Option<&Path>) -> Vec<String> {
    let mut out = warnings(plan, caps, policy);
    if let Some(root) = cargo_root {
        out.push(format!(
            "the workspace is a member of the Cargo workspace {}, whose target/ is not writable here: cargo builds into {} for this run (CARGO_TARGET_DIR; --allow-write {} to build into the shared one)",
            root.display(),
            plan.workspace.join("target").display(),
            root.join("target").display()
        ));
    }
    if let Some(given) = &policy.workspace_via_symlink {
        out.insert(0, format!(
            "the workspace was given as {}, which goes through a symbolic link: the writable workspace is {}",
            given.display(),
            plan.workspace.display()
        ));
    }
    out
}

impl Plan {
    /// The OS-neutral part of the plan, as the backends' protection tables read it.
    #[must_use]
    pub fn decided(&self) -> Decided<'_> {
        Decided {
            level: self.level,
            mode: self.mode,
            workspace: &self.workspace,
            access: &self.access,
            limits: &self.limits,
            max_output_bytes: self.max_output_bytes,
            env_dropped: &self.env.dropped,
            system_secrets: &self.system_secrets,
            configs: &self.configs,
            protected: &self.protected,
            unprotectable: &self.unprotectable,
        }
    }

    /// An identifier of a run's effective policy for the audit log: FNV-1a (64 bit) of the JSON of
    /// what the plan grants (mode, workspace, access, limits, network). It tells runs under the same
    /// policy apart from others; it is not a cryptographic digest.
    #[must_use]
    pub fn policy_digest(&self) -> String {
        let json = serde_json::to_vec(&(&self.mode, &self.workspace, &self.access, &self.limits, &self.network, &self.network_allowlist, &self.unix_sockets)).unwrap_or_default();
        format!("fnv1a64:{:016x}", crate::guard::nested::fnv1a64(&json))
    }

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


#[cfg(test)]
mod tests;
