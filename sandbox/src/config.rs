//! `config.toml` `[sandbox]` → [`SandboxSettings`], and automatic policy construction
//! (spec 3.3): [`build_sandbox_policy`] turns a mode and a workspace into a [`SandboxPolicy`].
//!
//! The config file is shared with the rest of LocalGPT, so only the `[sandbox]` table is read;
//! inside it every key is checked and an unknown key is an error that names it.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::platform::Platform;
use crate::error::SandboxError;
use crate::policy::{
    EnvPolicy, LevelSetting, NetworkPolicy, SandboxLevel, SandboxMode, SandboxPolicy,
};

/// Settings resolved from `config.toml` and command-line overrides; the input of
/// [`build_sandbox_policy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Mode (default `workspace-write`).
    pub mode: SandboxMode,
    /// Level (default `auto`).
    pub level: LevelSetting,
    /// Minimum level; `None` means no minimum.
    pub require: Option<SandboxLevel>,
    /// Workspace from config (`workspace = "."` means the current directory).
    pub workspace: Option<PathBuf>,
    /// Timeout in seconds.
    pub timeout_secs: u64,
    /// Output cap per stream.
    pub max_output_bytes: u64,
    /// `RLIMIT_FSIZE`; `None` (the default): no per-file bound.
    pub max_file_size_bytes: Option<u64>,
    /// Process bound (threads count).
    pub max_processes: u32,
    /// Hard `RLIMIT_NOFILE` (the soft one starts at 1024 or below).
    pub max_open_files: u64,
    /// Memory limit (cgroup); `None`: half of physical memory.
    pub max_memory_bytes: Option<u64>,
    /// Size of each private tmpfs; `None`: a quarter of physical memory.
    pub max_tmp_bytes: Option<u64>,
    /// Extra read + execute paths.
    pub extra_read: Vec<PathBuf>,
    /// Extra read-write paths.
    pub extra_write: Vec<PathBuf>,
    /// Extra denied paths.
    pub extra_deny: Vec<PathBuf>,
    /// Host unix sockets the command may connect to (connect-only, exactly these).
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Network mode (`deny` or `allowlist`).
    pub network: NetworkPolicy,
    /// Allowed domains (allowlist mode; see the `network` module).
    pub allow_domains: Vec<String>,
    /// Denied domains (win over allowed ones).
    pub deny_domains: Vec<String>,
    /// Allowed ports (default 80 and 443).
    pub allow_ports: Vec<u16>,
    /// Address blocks that may be dialled, special ranges included.
    pub allow_cidrs: Vec<String>,
    /// Domains whose tunnels the proxy lets through without checking what they carry.
    pub allow_opaque_tunnels: Vec<String>,
    /// Exact host names allowed, and allowed to resolve into a private range (a corporate
    /// mirror).
    pub allow_private_hosts: Vec<String>,
    /// The audit log (JSON lines).
    pub audit_log: Option<PathBuf>,
    /// Environment handling.
    pub env: EnvPolicy,
    /// Acknowledgment for full-access mode / level none.
    pub dangerously_allow_full_access: bool,
    /// `$HOME` to derive toolchain and credential paths from (default: the environment's).
    pub home: Option<PathBuf>,
    /// Workspace paths bound read-only at Full level.
    pub protected_workspace_paths: Vec<String>,
    /// The launch walk's budget for nested protected names (entries of directories no earlier
    /// walk recorded; see [`crate::guard::nested`]).
    pub nested_walk_entries: u64,
    /// A trusted directory the workspace must resolve into (symlinks followed); `None`: any.
    pub workspace_root: Option<PathBuf>,
    /// Accept a workspace that is `/`, a system directory, `$HOME` or one of its ancestors.
    pub force_workspace: bool,
    /// The config file these settings were read from ([`SandboxSettings::load`]): granted
    /// read-only, so that a sandbox started inside the sandbox reads the same settings.
    pub config_file: Option<PathBuf>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::WorkspaceWrite,
            level: LevelSetting::Auto,
            require: None,
            workspace: None,
            timeout_secs: 120,
            max_output_bytes: 1 << 20,
            max_file_size_bytes: None,
            max_processes: crate::defaults::default_max_processes(),
            max_open_files: crate::defaults::DEFAULT_OPEN_FILES,
            max_memory_bytes: None,
            max_tmp_bytes: None,
            extra_read: Vec::new(),
            extra_write: Vec::new(),
            extra_deny: Vec::new(),
            allow_unix_sockets: Vec::new(),
            network: NetworkPolicy::Deny,
            allow_domains: Vec::new(),
            deny_domains: Vec::new(),
            allow_ports: Vec::new(),
            allow_cidrs: Vec::new(),
            allow_opaque_tunnels: Vec::new(),
            allow_private_hosts: Vec::new(),
            audit_log: None,
            env: EnvPolicy { keep: Vec::new(), set: Vec::new(), redirect_caches: true, persistent_caches: true },
            dangerously_allow_full_access: false,
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
            protected_workspace_paths: crate::defaults::default_protected_names(),
            nested_walk_entries: crate::model::guard::NESTED_ENTRIES as u64,
            workspace_root: None,
            force_workspace: false,
            config_file: None,
        }
    }
}

#[derive(Deserialize, Default)]
struct ConfigFile {
    #[serde(default)]
    sandbox: Option<SandboxSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SandboxSection {
    enabled: Option<bool>,
    level: Option<String>,
    mode: Option<String>,
    require: Option<String>,
    workspace: Option<PathBuf>,
    timeout_secs: Option<u64>,
    max_output_bytes: Option<u64>,
    max_file_size_bytes: Option<u64>,
    max_processes: Option<u32>,
    max_open_files: Option<u64>,
    max_memory_bytes: Option<u64>,
    max_tmp_bytes: Option<u64>,
    dangerously_allow_full_access: Option<bool>,
    protected_workspace_paths: Option<Vec<String>>,
    nested_walk_entries: Option<u64>,
    workspace_root: Option<PathBuf>,
    force_workspace: Option<bool>,
    allow_paths: Option<AllowPaths>,
    allow_unix_sockets: Option<Vec<PathBuf>>,
    network: Option<NetworkField>,
    allow_domains: Option<Vec<String>>,
    deny_domains: Option<Vec<String>>,
    allow_ports: Option<Vec<u16>>,
    allow_cidrs: Option<Vec<String>>,
    allow_opaque_tunnels: Option<Vec<String>>,
    allow_private_hosts: Option<Vec<String>>,
    audit_log: Option<PathBuf>,
    env: Option<EnvSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AllowPaths {
    #[serde(default)]
    read: Vec<PathBuf>,
    #[serde(default)]
    write: Vec<PathBuf>,
    #[serde(default)]
    deny: Vec<PathBuf>,
}

/// `network = "deny" | "allowlist" | "full"`, or the older `[sandbox.network]` table.
#[derive(Deserialize)]
#[serde(untagged)]
enum NetworkField {
    Mode(String),
    Table(NetworkSection),
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NetworkSection {
    policy: Option<String>,
    proxy_socket: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EnvSection {
    #[serde(default)]
    keep: Vec<String>,
    #[serde(default)]
    set: BTreeMap<String, String>,
    redirect_caches: Option<bool>,
    persistent_caches: Option<bool>,
}

/// Where the config file is looked up: `$LOCALGPT_CONFIG` (must exist when set), else
/// `$XDG_CONFIG_HOME/localgpt/config.toml` or `~/.config/localgpt/config.toml` (optional).
#[must_use]
pub fn config_location() -> (Option<PathBuf>, bool) {
    if let Some(p) = std::env::var_os("LOCALGPT_CONFIG").filter(|p| !p.is_empty()) {
        return (Some(PathBuf::from(p)), true);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|p| !p.is_empty()).map(|h| Path::new(&h).join(".config")));
    (base.map(|b| b.join("localgpt").join("config.toml")), false)
}

impl SandboxSettings {
    /// Loads the settings from the default config location (see [`config_location`]) and
    /// applies `LOCALGPT_REQUIRE_SANDBOX`.
    ///
    /// # Errors
    /// [`SandboxError::Config`] when `$LOCALGPT_CONFIG` names a missing file, or the file is
    /// unreadable, malformed, or has an unknown key or value.
    pub fn load() -> Result<(Self, Option<PathBuf>), SandboxError> {
        let (path, required) = config_location();
        let mut settings = match &path {
            Some(p) if required || p.exists() => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| SandboxError::Config(format!("{}: {e}", p.display())))?;
                Self::from_toml(&text).map_err(|e| match e {
                    SandboxError::Config(m) => SandboxError::Config(format!("{}: {m}", p.display())),
                    other => other,
                })?
            }
            _ => SandboxSettings::default(),
        };
        settings.apply_require_env(std::env::var("LOCALGPT_REQUIRE_SANDBOX").ok().as_deref())?;
        let used = path.filter(|p| p.exists());
        settings.config_file.clone_from(&used);
        Ok((settings, used))
    }

    /// Applies the value of `LOCALGPT_REQUIRE_SANDBOX`: `1`/`true` means at least standard, a
    /// level name means at least that level, `0`/empty means nothing.
    ///
    /// # Errors
    /// [`SandboxError::Config`] for any other value.
    pub fn apply_require_env(&mut self, value: Option<&str>) -> Result<(), SandboxError> {
        let level = match value.map(str::trim) {
            None | Some("") | Some("0") | Some("false") => return Ok(()),
            Some("1") | Some("true") | Some("yes") => SandboxLevel::Standard,
            Some(other) => SandboxLevel::parse(other)
                .map_err(|_| SandboxError::Config(format!("LOCALGPT_REQUIRE_SANDBOX={other:?}: expected 1, minimal, standard or full")))?,
        };
        self.require = Some(self.require.map_or(level, |r| r.max(level)));
        Ok(())
    }

    /// Parses a `config.toml` text (only its `[sandbox]` table).
    ///
    /// # Errors
    /// [`SandboxError::Config`] for malformed TOML, an unknown key (named in the message), a
    /// bad value, or the not-yet-implemented `proxy` network policy.
    pub fn from_toml(text: &str) -> Result<Self, SandboxError> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| SandboxError::Config(one_line(&e.to_string())))?;
        let mut s = SandboxSettings::default();
        let Some(sec) = file.sandbox else { return Ok(s) };
        let cfg = |e: SandboxError| match e {
            SandboxError::Policy(m) => SandboxError::Config(m),
            other => other,
        };
        if let Some(m) = sec.mode {
            s.mode = SandboxMode::parse(&m).map_err(cfg)?;
        }
        if let Some(l) = sec.level {
            // The spec's example config also accepts mode names under `level`.
            match SandboxMode::parse(&l) {
                Ok(mode) => s.mode = mode,
                Err(_) => s.level = LevelSetting::parse(&l).map_err(cfg)?,
            }
        }
        if let Some(r) = sec.require {
            s.require = Some(SandboxLevel::parse(&r).map_err(cfg)?);
        }
        if let Some(false) = sec.enabled {
            s.mode = SandboxMode::FullAccess;
        }
        s.workspace = sec.workspace.map(|p| expand_home(&p, s.home.as_deref())).transpose()?;
        s.workspace_root = sec.workspace_root.map(|p| expand_home(&p, s.home.as_deref())).transpose()?;
        s.force_workspace = sec.force_workspace.unwrap_or(false);
        macro_rules! take {
            ($($f:ident),*) => { $( if let Some(v) = sec.$f { s.$f = v; } )* };
        }
        take!(timeout_secs, max_output_bytes, max_processes, max_open_files, nested_walk_entries);
        s.max_file_size_bytes = sec.max_file_size_bytes.or(s.max_file_size_bytes);
        s.max_memory_bytes = sec.max_memory_bytes.or(s.max_memory_bytes);
        s.max_tmp_bytes = sec.max_tmp_bytes.or(s.max_tmp_bytes);
        s.dangerously_allow_full_access = sec.dangerously_allow_full_access.unwrap_or(false);
        if let Some(p) = sec.protected_workspace_paths {
            s.protected_workspace_paths = p;
        }
        if let Some(a) = sec.allow_paths {
            let home = s.home.clone();
            let abs = |v: Vec<PathBuf>| -> Result<Vec<PathBuf>, SandboxError> {
                v.iter().map(|p| expand_home(p, home.as_deref())).collect()
            };
            s.extra_read = abs(a.read)?;
            s.extra_write = abs(a.write)?;
            s.extra_deny = abs(a.deny)?;
        }
        if let Some(socks) = sec.allow_unix_sockets {
            s.allow_unix_sockets = socks.iter().map(|p| expand_home(p, s.home.as_deref())).collect::<Result<_, _>>()?;
        }
        if let Some(NetworkField::Mode(m)) = &sec.network {
            s.network = parse_network_mode(m).map_err(cfg)?;
        }
        macro_rules! take_list {
            ($($f:ident),*) => { $( if let Some(v) = sec.$f { s.$f = v; } )* };
        }
        take_list!(allow_domains, deny_domains, allow_ports, allow_cidrs, allow_opaque_tunnels, allow_private_hosts);
        if let Some(a) = sec.audit_log {
            s.audit_log = Some(expand_home(&a, s.home.as_deref())?);
        }
        if let Some(NetworkField::Table(n)) = sec.network {
            match n.policy.as_deref() {
                None | Some("deny") => {}
                Some("proxy") => {
                    return Err(SandboxError::Config(
                        "[sandbox.network] policy = \"proxy\" is not implemented yet; only \"deny\" is supported".into(),
                    ))
                }
                Some(other) => {
                    return Err(SandboxError::Config(format!("[sandbox.network] policy = {other:?}: expected \"deny\"")))
                }
            }
            if n.proxy_socket.is_some() {
                return Err(SandboxError::Config("[sandbox.network] proxy_socket needs policy = \"proxy\", which is not implemented yet".into()));
            }
        }
        if let Some(e) = sec.env {
            s.env.keep = e.keep;
            s.env.set = e.set.into_iter().collect();
            if let Some(r) = e.redirect_caches {
                s.env.redirect_caches = r;
            }
            if let Some(r) = e.persistent_caches {
                s.env.persistent_caches = r;
            }
        }
        Ok(s)
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Expands a leading `~/` and requires the result to be absolute.
fn expand_home(p: &Path, home: Option<&Path>) -> Result<PathBuf, SandboxError> {
    if p == Path::new(".") {
        return Ok(p.to_path_buf());
    }
    let expanded = match p.strip_prefix("~") {
        Ok(rest) => match home {
            Some(h) => h.join(rest),
            None => return Err(SandboxError::Config(format!("{}: ~ used but $HOME is not set", p.display()))),
        },
        Err(_) => p.to_path_buf(),
    };
    if expanded.is_absolute() {
        Ok(expanded)
    } else {
        Err(SandboxError::Config(format!("path {} must be absolute or start with ~/", p.display())))
    }
}

/// Makes `p` absolute against `base` (no symlink resolution).
#[must_use]
pub fn absolutize(p: &Path, base: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Directories that are never a workspace (they or everything under them are the system's):
/// the root, and the system trees themselves (a project under `/opt` or `/var/tmp` is fine).
const NOT_A_WORKSPACE: &[&str] = &[
    "/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/dev", "/proc", "/sys",
    "/run", "/var", "/opt", "/srv", "/nix", "/snap", "/home", "/root", "/tmp", "/var/tmp", "/mnt", "/media",
];
/// System trees no workspace may lie in.
const SYSTEM_TREES: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/boot", "/dev", "/proc", "/sys", "/run"];

/// The first component of `requested` (made absolute) that is a symbolic link, if any.
#[must_use]
pub fn first_symlink_in(requested: &Path) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    for c in requested.components() {
        prefix.push(c);
        if std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(prefix);
        }
    }
    None
}

/// Refuses a workspace that would make the sandbox pointless or the host writable (red-team
/// finding: a symlink planted by one run, `pkg -> ..` or `root -> /`, made a later
/// `--workspace ws/pkg` run with `$HOME` or `/` writable): `/`, a system directory or a tree
/// under one, `$HOME` or one of its ancestors — unless `force_workspace` — and, when a trusted
/// `workspace_root` is set, anything that does not resolve to a path under it.
fn check_workspace(requested: &Path, ws: &Path, home: Option<&Path>, settings: &SandboxSettings) -> Result<(), SandboxError> {
    let via = first_symlink_in(requested).map(|l| format!(" (given as {}, through the symlink {})", requested.display(), l.display())).unwrap_or_default();
    if let Some(root) = &settings.workspace_root {
        let root = std::fs::canonicalize(root).map_err(|e| SandboxError::Policy(format!("workspace root {}: {e}", root.display())))?;
        if !ws.starts_with(&root) {
            return Err(SandboxError::Policy(format!("workspace {}{via} is outside the trusted workspace root {}", ws.display(), root.display())));
        }
    }
    if settings.force_workspace {
        return Ok(());
    }
    let danger = if home.is_some_and(|h| h.starts_with(ws)) {
        Some(if home == Some(ws) { "your home directory" } else { "an ancestor of your home directory" })
    } else if NOT_A_WORKSPACE.iter().any(|d| ws == Path::new(d)) || SYSTEM_TREES.iter().any(|d| ws.starts_with(d)) {
        Some("a system directory")
    } else {
        None
    };
    match danger {
        Some(what) => Err(SandboxError::Policy(format!(
            "workspace {}{via} is {what}: the command could write anywhere in it; pass --force-workspace (or force_workspace = true) if that is really meant",
            ws.display()
        ))),
        None => Ok(()),
    }
}

/// The allowlist's settings that mean nothing in `settings`' network mode (warnings of every
/// run, not errors: a config file's `allow_domains` kept for the days the allowlist is on must not
/// stop `sandbox status` or every run). Denying domains when the network is open cannot be done:
/// that is refused.
///
/// # Errors
/// [`SandboxError::Policy`] for `deny_domains` with `network = "full"`.
fn ignored_network_settings(settings: &SandboxSettings) -> Result<Vec<String>, SandboxError> {
    let listed = |v: &[String], name: &str| (!v.is_empty()).then(|| name.to_string());
    let names: Vec<String> = [listed(&settings.allow_domains, "allow_domains"), listed(&settings.deny_domains, "deny_domains"), listed(&settings.allow_cidrs, "allow_cidrs"), listed(&settings.allow_opaque_tunnels, "allow_opaque_tunnels"), listed(&settings.allow_private_hosts, "allow_private_hosts")].into_iter().flatten().collect();
    match settings.network {
        NetworkPolicy::Allowlist => Ok(Vec::new()),
        _ if names.is_empty() => Ok(Vec::new()),
        NetworkPolicy::Full if !settings.deny_domains.is_empty() => {
            Err(SandboxError::Policy("deny_domains cannot be enforced with network = \"full\" (every destination is reachable): use network = \"allowlist\" (--network allowlist)".into()))
        }
        NetworkPolicy::Full => Ok(vec![format!("{} ignored: network = \"full\" reaches every destination already", names.join(", "))]),
        NetworkPolicy::Deny => Ok(vec![format!("{} ignored: the network is denied (network = \"deny\"); set network = \"allowlist\" or pass --network allowlist to use them", names.join(", "))]),
    }
}

/// Builds the policy for `workspace` from the settings: the zero-configuration path of spec 3.3.
///
/// System dirs and `$HOME` toolchains are read + execute, the workspace (and `/tmp`, `/dev/shm`
/// in `workspace-write`) read-write, credentials denied, network denied.
///
/// # Errors
/// [`SandboxError::Policy`] when the workspace does not exist or is not a directory, when a
/// setting conflicts with the mode. The policy is validated where its plan is made
/// ([`crate::plan::make_plan`]), once per run.
pub fn build_sandbox_policy(workspace: &Path, settings: &SandboxSettings) -> Result<SandboxPolicy, SandboxError> {
    build_sandbox_policy_for(workspace, settings, Platform::current())
}

/// [`build_sandbox_policy`] with `platform`'s default tables (system directories, credentials,
/// devices, scratch): for `localgpt sandbox explain --platform P`, which shows the plan another
/// OS would run.
///
/// # Errors
/// As [`build_sandbox_policy`].
pub fn build_sandbox_policy_for(workspace: &Path, settings: &SandboxSettings, platform: Platform) -> Result<SandboxPolicy, SandboxError> {
    let t = crate::defaults::tables(platform);
    let ws = std::fs::canonicalize(workspace)
        .map_err(|e| SandboxError::Policy(format!("workspace {}: {e}", workspace.display())))?;
    if !ws.is_dir() {
        return Err(SandboxError::Policy(format!("workspace {} is not a directory", ws.display())));
    }
    let home = settings.home.clone().filter(|h| h.is_absolute());
    check_workspace(workspace, &ws, home.as_deref(), settings)?;
    // A grant the user asked for that does not exist is skipped with a warning (a config that
    // lists ~/.cache/pnpm must not break every run on a machine without it); a glob is refused
    // (nothing expands it: it would grant or deny nothing, silently).
    let mut skipped_grants = Vec::new();
    for (what, list) in [("allow-read", &settings.extra_read), ("allow-write", &settings.extra_write), ("deny", &settings.extra_deny)] {
        for p in list {
            let lstat = std::fs::symlink_metadata(p);
            if lstat.is_err() && p.to_string_lossy().contains(['*', '?', '[']) {
                return Err(SandboxError::Policy(format!(
                    "{what} {}: globs are not supported (nothing would match it); list the paths themselves", p.display())));
            }
            // What `lstat` found resolves unless it is a link (then its target must exist too).
            let resolves = match lstat {
                Ok(m) if !m.file_type().is_symlink() => true,
                Ok(_) => std::fs::metadata(p).is_ok(),
                Err(_) => false,
            };
            if what != "deny" && !resolves {
                skipped_grants.push(p.clone());
            }
        }
    }
    let (extra_read, extra_write): (Vec<PathBuf>, Vec<PathBuf>) = (
        settings.extra_read.iter().filter(|p| !skipped_grants.contains(p)).cloned().collect(),
        settings.extra_write.iter().filter(|p| !skipped_grants.contains(p)).cloned().collect(),
    );
    refuse_protected_grants(&ws, &extra_write, &settings.protected_workspace_paths)?;
    // The scratch directories themselves are already writable (private ones at Full): a grant
    // of one would be ignored there without a word.
    for w in &extra_write {
        if t.scratch_write.iter().any(|s| std::fs::canonicalize(w).is_ok_and(|c| c == Path::new(s))) {
            return Err(SandboxError::Policy(format!(
                "allow-write {}: already writable — a private one for the run at Full level (discarded after it), the host's at Standard; to share files with the host, grant a directory in it (--allow-write {}/DIR)",
                w.display(), w.display())));
        }
    }
    let allow_unix_sockets = unix_socket_grants(&settings.allow_unix_sockets, &mut skipped_grants)?;
    refuse_linked_denies(&settings.extra_deny)?;
    refuse_grants_inside_denies(&ws, &extra_read, &extra_write, &settings.extra_deny)?;
    let mut read_only_paths: Vec<PathBuf> = t.system_read.iter().map(PathBuf::from).collect();
    let mut context_reads = if settings.mode == SandboxMode::FullAccess { Vec::new() } else { context_reads(&ws, home.as_deref()) };
    if let Some(c) = settings.config_file.as_ref().filter(|_| settings.mode != SandboxMode::FullAccess) {
        if let Ok(c) = std::fs::canonicalize(c) {
            context_reads.push((c, "this tool's own config (read-only: a sandbox started inside the sandbox reads the same settings)".into()));
        }
    }
    read_only_paths.extend(context_reads.iter().map(|(p, _)| p.clone()));
    let mut deny_paths = Vec::new();
    if let Some(h) = &home {
        read_only_paths.extend(t.home_toolchains.iter().map(|x| h.join(x)));
        deny_paths.extend(t.home_credentials.iter().flat_map(|l| l.iter()).map(|c| h.join(c)));
    }
    read_only_paths.extend(extra_read);
    deny_paths.extend(settings.extra_deny.iter().cloned());
    let mut writable_paths = Vec::new();
    let mut context_writes = Vec::new();
    match settings.mode {
        SandboxMode::WorkspaceWrite => {
            writable_paths.extend(t.scratch_write.iter().map(PathBuf::from));
            writable_paths.extend(extra_write);
            // Where the git directory of the repository around the workspace is protected as one
            // (`.git` a protected name): writable, so that git add and commit work there too.
            if settings.protected_workspace_paths.iter().any(|n| n.starts_with(".git")) {
                context_writes = repo_git_writes(&ws, home.as_deref(), &deny_paths);
                for (p, _) in &context_writes {
                    if !writable_paths.contains(p) {
                        writable_paths.push(p.clone());
                    }
                }
            }
        }
        SandboxMode::ReadOnly => {
            if !settings.extra_write.is_empty() {
                return Err(SandboxError::Policy("extra writable paths conflict with read-only mode".into()));
            }
        }
        SandboxMode::FullAccess => {}
    }
    // The sandbox's own state (pending changes, the records later runs trust): where a writable
    // path of this run holds it (a workspace that is the home directory, `--allow-write
    // ~/.local`), the command is denied it, so that no run can plant or edit what a later one
    // trusts; a workspace or a grant inside it is refused.
    #[cfg(unix)]
    if settings.mode == SandboxMode::WorkspaceWrite {
        let scratch: Vec<PathBuf> = t.scratch_write.iter().map(PathBuf::from).collect();
        deny_own_state(&crate::host::state_dir(), &ws, &writable_paths, &scratch, &mut deny_paths)?;
    }
    let (tool_caches, tool_caches_unavailable) = grant_tool_caches(settings, platform, &ws, home.as_deref(), &deny_paths, &mut writable_paths, &mut context_writes);
    let policy = SandboxPolicy {
        workspace_via_symlink: first_symlink_in(workspace).map(|_| workspace.to_path_buf()),
        workspace_path: ws,
        mode: settings.mode,
        read_only_paths,
        writable_paths,
        device_paths: t.devices.iter().map(PathBuf::from).collect(),
        platform,
        deny_paths,
        home,
        network_access: settings.network,
        network_allowlist: match settings.network {
            NetworkPolicy::Allowlist => Some(crate::network::Allowlist::new(&settings.allow_domains, &settings.deny_domains, &settings.allow_ports, &settings.allow_cidrs)?.with_opaque_tunnels(&settings.allow_opaque_tunnels)?.with_private_hosts(&settings.allow_private_hosts)?),
            NetworkPolicy::Deny | NetworkPolicy::Full => None,
        },
        ignored_settings: ignored_network_settings(settings)?,
        audit_log: settings.audit_log.clone(),
        timeout_secs: settings.timeout_secs,
        max_output_bytes: settings.max_output_bytes,
        max_file_size_bytes: settings.max_file_size_bytes,
        max_processes: settings.max_processes,
        max_open_files: settings.max_open_files,
        max_memory_bytes: settings.max_memory_bytes,
        max_tmp_bytes: settings.max_tmp_bytes,
        level: settings.level,
        require_level: settings.require,
        environment: settings.env.clone(),
        protected_workspace_paths: settings.protected_workspace_paths.clone(),
        nested_walk_entries: settings.nested_walk_entries,
        unconfined_acknowledged: settings.dangerously_allow_full_access,
        skipped_grants,
        moved_denies: Vec::new(),
        context_reads,
        context_writes,
        tool_caches,
        tool_caches_unavailable,
        allow_unix_sockets,
    };
    // Validated where every plan is made (`make_plan`), once per run.
    Ok(policy)
}

/// `deny`, `allowlist` or `full` (refused: not implemented yet).
///
/// # Errors
/// [`SandboxError::Policy`] for another value.
pub fn parse_network_mode(m: &str) -> Result<NetworkPolicy, SandboxError> {
    match m {
        "deny" => Ok(NetworkPolicy::Deny),
        "allowlist" => Ok(NetworkPolicy::Allowlist),
        "full" => Ok(NetworkPolicy::Full),
        other => Err(SandboxError::Policy(format!("network {other:?}: expected deny, allowlist or full"))),
    }
}

/// The host sockets granted with `--allow-unix-socket`: (as given, canonical). A path that does
/// not exist is skipped with a warning like any other grant (an agent socket comes and goes);
/// one that is not a socket, or that is relative, is an error.
#[cfg(not(unix))]
fn unix_socket_grants(list: &[PathBuf], _skipped: &mut Vec<PathBuf>) -> Result<Vec<(PathBuf, PathBuf)>, SandboxError> {
    match list.first() {
        Some(p) => Err(SandboxError::Policy(format!("allow-unix-socket {}: host unix sockets cannot be granted on this platform", p.display()))),
        None => Ok(Vec::new()),
    }
}

#[cfg(unix)]
fn unix_socket_grants(list: &[PathBuf], skipped: &mut Vec<PathBuf>) -> Result<Vec<(PathBuf, PathBuf)>, SandboxError> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = Vec::new();
    for p in list {
        if !p.is_absolute() {
            return Err(SandboxError::Policy(format!("allow-unix-socket {}: not an absolute path", p.display())));
        }
        match std::fs::metadata(p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => skipped.push(p.clone()),
            Err(e) => return Err(SandboxError::Policy(format!("allow-unix-socket {}: {e}", p.display()))),
            Ok(m) if !m.file_type().is_socket() => {
                return Err(SandboxError::Policy(format!("allow-unix-socket {}: not a unix socket", p.display())));
            }
            Ok(_) => {
                let c = std::fs::canonicalize(p).map_err(|e| SandboxError::Policy(format!("allow-unix-socket {}: {e}", p.display())))?;
                if !out.iter().any(|(g, _)| g == p) {
                    out.push((p.clone(), c));
                }
            }
        }
    }
    Ok(out)
}

/// Read-only grants for where the workspace lies: the root of the git repository around it
/// (when the workspace has no `.git` of its own), so that `git status` in a subdirectory and a
/// Cargo or npm workspace member work; and the tool configs ([`crate::defaults::UPWARD_CONFIGS`])
/// that exist in its ancestors. Never `/`, `$HOME` or an ancestor of `$HOME` as a repository
/// (a dotfiles repository in `$HOME` would open all of it), nor a directory the caller does not
/// own or that others may write (a `.git` planted in `/var/tmp` by another user must not open
/// `/var/tmp`: git's own `safe.directory` ownership rule); deny rules still win inside.
fn context_reads(ws: &Path, home: Option<&Path>) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let too_wide = |d: &Path| too_wide_for_context(d, home);
    let own_git = std::fs::symlink_metadata(ws.join(".git")).is_ok();
    let mut repo: Option<PathBuf> = None;
    for d in ws.ancestors().skip(1) {
        if !own_git && repo.is_none() && std::fs::symlink_metadata(d.join(".git")).is_ok() {
            if !too_wide(d) {
                out.push((d.to_path_buf(), "the git repository around the workspace (read-only: git status in a subdirectory, workspace members)".into()));
            }
            repo = Some(d.to_path_buf());
        }
        // Tool configs up to $HOME (included), or up to / outside $HOME; inside a granted
        // repository they are covered already.
        if repo.as_deref().is_none_or(|r| !d.starts_with(r) || too_wide(r)) && d != Path::new("/") {
            for f in upward_configs_in(d, small_dir(d)) {
                out.push((f, "a tool config in an ancestor of the workspace (read-only)".into()));
            }
        }
        if home.is_some_and(|h| d == h) {
            break;
        }
    }
    out
}

/// Whether `d` may not be opened because of where the workspace lies: `/`, `$HOME` or one of its
/// ancestors (a dotfiles repository in `$HOME` would open all of it), or a directory the caller
/// does not own or that others may write (a `.git` planted in `/var/tmp` by another user: git's
/// own `safe.directory` ownership rule).
fn too_wide_for_context(d: &Path, home: Option<&Path>) -> bool {
    #[cfg(unix)]
    let foreign = |d: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(d).map_or(true, |m| m.uid() != crate::host::effective_ids().0 || m.mode() & 0o002 != 0)
    };
    #[cfg(not(unix))]
    let foreign = |_: &Path| false;
    d == Path::new("/") || home.is_some_and(|h| h.starts_with(d)) || foreign(d)
}

/// Why the git directory of the repository around the workspace is writable.
pub const REPO_GIT_WHY: &str = "the git directory of the repository the workspace is a subdirectory or a linked worktree of (git add and commit work; its hooks, config and redirection files stay protected: reviewed after the run)";

/// Writable grants for where the workspace lies: the git directory of the repository the
/// workspace is a subdirectory of (`--workspace repo/sub`) or a linked worktree of (`git worktree
/// add ../wt`), where it lies outside the workspace, so that `git add` and `git commit` work —
/// the shared one and the worktree's own. Each is a writable root that is a git directory, which
/// the workspace guard protects whole ([`crate::guard::protected::GIT_ROOT_WHY`]): git's data is
/// applied after the run, hooks, config and the rest are pending changes. Never one of a
/// repository [`context_reads`] would not open (its worktree or the directory itself `/`, `$HOME`
/// or above, not the caller's, writable by others), nor one inside a denied path.
fn repo_git_writes(ws: &Path, home: Option<&Path>, denies: &[PathBuf]) -> Vec<(PathBuf, String)> {
    use crate::guard::gitindex;
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let Some(dotgit) = gitindex::enclosing_dotgit(ws) else { return out };
    let (Some(worktree), Some(gd)) = (dotgit.parent(), gitindex::git_dir(&dotgit)) else { return out };
    if too_wide_for_context(worktree, home) {
        return out;
    }
    for d in [gitindex::common_dir(&gd), gd] {
        let Ok(c) = crate::guard::fsmeta::canonical(&d) else { continue };
        let covered = c.starts_with(ws) || out.iter().any(|(o, _)| c.starts_with(o)) || denies.iter().any(|x| c.starts_with(x));
        if !covered && !too_wide_for_context(&c, home) && gitindex::is_git_directory(&c) {
            out.push((c, REPO_GIT_WHY.into()));
        }
    }
    out
}

/// Whether listing `d` is cheaper than looking up each of the ~50 config names in it: a
/// directory of at most 8 KiB (a few hundred entries on ext4, tmpfs, btrfs or XFS).
fn small_dir(d: &Path) -> bool {
    std::fs::metadata(d).is_ok_and(|m| m.len() <= 8192)
}

/// The tool configs ([`crate::defaults::UPWARD_CONFIGS`]) that are files (symlinks followed) in
/// `d`, in that list's order: found by listing `d` once when `list` (and it can be listed),
/// else by looking each name up. Both ways give the same paths.
fn upward_configs_in(d: &Path, list: bool) -> Vec<PathBuf> {
    let names: Vec<&str> = match list.then(|| std::fs::read_dir(d).ok()).flatten() {
        Some(rd) => {
            let present: HashSet<std::ffi::OsString> = rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect();
            crate::defaults::UPWARD_CONFIGS.iter().copied().filter(|n| present.contains(std::ffi::OsStr::new(n))).collect()
        }
        None => crate::defaults::UPWARD_CONFIGS.to_vec(),
    };
    names.into_iter().map(|n| d.join(n)).filter(|f| std::fs::metadata(f).is_ok_and(|m| m.is_file())).collect()
}

/// An explicit writable grant inside a protected workspace path (`--allow-write .git/config`)
/// is refused: the path is protected (private or reviewed), and a grant would either be
/// overridden silently or open what the protection closes.
fn refuse_protected_grants(ws: &Path, writes: &[PathBuf], protected: &[String]) -> Result<(), SandboxError> {
    let git_protected = protected.iter().any(|n| n.starts_with(".git"));
    for w in writes {
        let Ok(c) = std::fs::canonicalize(w) else { continue };
        if let Ok(rel) = c.strip_prefix(ws) {
            refuse_inside_protected_name(ws, w, rel, protected)?;
        }
        // Inside a git directory (`--allow-write repo/.git/hooks`): a grant of the git directory
        // itself is protected whole (its data applied after the run, the rest pending); one of a
        // part of it would leave that part unreviewed.
        if let Some(g) = c.ancestors().skip(1).find(|a| git_protected && crate::guard::gitindex::is_git_directory(a)) {
            return Err(SandboxError::Policy(format!(
                "allow-write {}: inside the git directory {}, whose hooks and config run at the next git command; grant the git directory itself (--allow-write {}): git's own data is applied after the run, the rest kept as pending changes",
                w.display(), g.display(), g.display())));
        }
    }
    Ok(())
}

/// A grant at `rel` in the workspace inside one of its protected names.
fn refuse_inside_protected_name(ws: &Path, w: &Path, rel: &Path, protected: &[String]) -> Result<(), SandboxError> {
    for name in protected {
        let top = Path::new(name);
        let top = if top.starts_with(".git") { Path::new(".git") } else { top };
        if !rel.as_os_str().is_empty() && rel.starts_with(top) {
            return Err(SandboxError::Policy(format!(
                "allow-write {}: inside the protected workspace path {} (its changes are reviewed after the run: `localgpt sandbox pending`); to grant it, remove {name} from [sandbox] protected_workspace_paths",
                w.display(), ws.join(top).display())));
        }
    }
    Ok(())
}

/// The workspace's persistent tool caches (Linux, workspace-write mode): a writable grant of the
/// sandbox's own, with its reason (`explain`); where they cannot be used, why (per-run caches
/// and a warning).
fn grant_tool_caches(
    settings: &SandboxSettings,
    platform: Platform,
    ws: &Path,
    home: Option<&Path>,
    deny_paths: &[PathBuf],
    writable_paths: &mut Vec<PathBuf>,
    context_writes: &mut Vec<(PathBuf, String)>,
) -> (Option<PathBuf>, Option<String>) {
    if platform != Platform::Linux || settings.mode != SandboxMode::WorkspaceWrite || !settings.env.redirect_caches || !settings.env.persistent_caches {
        return (None, None);
    }
    #[cfg(target_os = "linux")]
    {
        let made = crate::host::tool_cache_root(home)
            .ok_or_else(|| "no absolute XDG_CACHE_HOME or HOME".to_string())
            .and_then(|root| workspace_tool_caches(&root, ws, deny_paths, &crate::host::state_dir()));
        match made {
            Ok(d) => {
                if !writable_paths.contains(&d) {
                    writable_paths.push(d.clone());
                }
                context_writes.push((d.clone(), TOOL_CACHES_WHY.into()));
                (Some(d), None)
            }
            Err(why) => (None, Some(why)),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ws, home, deny_paths, writable_paths, context_writes);
        (None, None)
    }
}

/// Why the persistent tool caches are writable (`sandbox explain`).
pub const TOOL_CACHES_WHY: &str =
    "this workspace's persistent tool caches (pip, npm, yarn, pnpm, uv, go, XDG_CACHE_HOME, the cargo home's layer at Full): the sandbox's own, kept across runs of this workspace only, never the host's caches";

/// The directory below `root` (`~/.cache/localgpt/sandbox-caches`) that holds the persistent
/// tool caches of the workspace `ws` (canonical), made private to the user where it is absent,
/// canonical. One per workspace, keyed by its path, device, inode and birth time
/// (`workspace_ident`): a run can fill only its own
/// workspace's caches, which is no more than it can already write, so a command in one
/// repository cannot plant a package that a run in another one installs.
///
/// # Errors
/// Why it cannot be used (the run then gets per-run caches): it cannot be made; it is not a
/// directory of the user's own (a link, another owner); it lies in or holds a denied path or
/// the sandbox's own state.
#[cfg(target_os = "linux")]
pub fn workspace_tool_caches(root: &Path, ws: &Path, deny: &[PathBuf], state: &Path) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(ws).map_err(|e| format!("{}: {e}", ws.display()))?;
    let ident = workspace_ident(&meta);
    let mut key = ws.as_os_str().as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(ident.as_bytes());
    let name: String = ws.file_name().map(|n| n.to_string_lossy().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).take(32).collect()).unwrap_or_default();
    // Below an existing home or cache directory only (a home that does not exist is not made).
    if !root.parent().and_then(Path::parent).and_then(Path::parent).is_some_and(Path::is_dir) {
        return Err(format!("{}: no home or cache directory to keep it in", root.display()));
    }
    let dir_name = format!("{}-{:016x}", if name.is_empty() { "ws" } else { &name }, crate::guard::records::fnv1a64(&key));
    let dir = root.join(&dir_name);
    // (Made once: later runs find it, one mkdir that fails with EEXIST.)
    let made = |d: &Path, recursive: bool| match crate::guard::fsmeta::create_private_dir(d, recursive) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(format!("create {}: {e}", d.display())),
        _ => Ok(()),
    };
    if made(&dir, false).is_err() {
        made(root, true)?;
        made(&dir, false)?;
    }
    // What was there or was made: a directory of this user's, not a link to somewhere else.
    let m = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !m.file_type().is_dir() || m.uid() != crate::host::effective_ids().0 {
        return Err(format!("{} is not a directory of this user's", dir.display()));
    }
    // Private: a run may have opened it to others (it owns it): closed again before the grant.
    if m.mode() & 0o077 != 0 {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| format!("chmod {}: {e}", dir.display()))?;
    }
    let canon = std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let c = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if let Some(d) = deny.iter().find(|d| { let d = c(d); canon.starts_with(&d) || d.starts_with(&canon) }) {
        return Err(format!("{} and the denied path {} overlap", canon.display(), d.display()));
    }
    let st = c(state);
    if canon.starts_with(&st) || st.starts_with(&canon) {
        return Err(format!("{} and the sandbox's own state {} overlap", canon.display(), state.display()));
    }
    // Beside it (where no run writes), which workspace it is for: the daily prune removes the
    // caches of workspaces that are gone.
    let owner = root.join(format!("{dir_name}{OWNER_SUFFIX}"));
    let mut id = format!("{ident}\n").into_bytes();
    id.extend_from_slice(ws.as_os_str().as_bytes());
    if std::fs::read(&owner).ok().as_deref() != Some(id.as_slice()) {
        let _ = std::fs::write(&owner, &id);
    }
    prune_tool_caches(root, std::time::Duration::from_secs(86_400));
    Ok(canon)
}

/// The file beside a workspace's cache directory that says which workspace it is for.
#[cfg(target_os = "linux")]
const OWNER_SUFFIX: &str = ".ws";

/// The file beside a workspace's cache directory `cache` that a run locks while it mounts the
/// private layers kept in it (see `linux::mounts::Layer`): where no run writes.
#[cfg(target_os = "linux")]
pub(crate) fn layer_lock(cache: &Path) -> PathBuf {
    let mut p = cache.as_os_str().to_os_string();
    p.push(".lock");
    PathBuf::from(p)
}

/// A workspace directory's identity: device, inode and (where the file system keeps it) birth
/// time, so that a directory made later at the same path, even on a reused inode, is another one.
#[cfg(target_os = "linux")]
fn workspace_ident(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let born = m.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    format!("{}:{}:{born}", m.dev(), m.ino())
}

/// Removes, at most once per `every`, the tool caches below `root` whose workspace is gone (no
/// directory at its path, or another one: its device and inode differ). Best effort.
#[cfg(target_os = "linux")]
fn prune_tool_caches(root: &Path, every: std::time::Duration) {
    let stamp = root.join(".pruned");
    if std::fs::metadata(&stamp).and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|e| e < every)) {
        return;
    }
    if std::fs::write(&stamp, b"").is_err() {
        return;
    }
    use std::os::unix::ffi::OsStrExt;
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(dir_name) = name.as_bytes().strip_suffix(OWNER_SUFFIX.as_bytes()) else { continue };
        let Ok(text) = std::fs::read(e.path()) else { continue };
        let Some(nl) = text.iter().position(|&b| b == b'\n') else { continue };
        let (id, ws) = (&text[..nl], std::ffi::OsStr::from_bytes(&text[nl + 1..]));
        let live = std::fs::metadata(ws).is_ok_and(|m| m.is_dir() && workspace_ident(&m).as_bytes() == id);
        if !live {
            let dir = root.join(std::ffi::OsStr::from_bytes(dir_name));
            if crate::guard::fsmeta::remove_tree(&dir).is_ok() || !dir.exists() {
                let _ = std::fs::remove_file(e.path());
                let _ = std::fs::remove_file(layer_lock(&dir));
            }
        }
    }
}

/// Denies `state` (the sandbox's own state directory) to the command when the workspace or a
/// writable path other than the scratch directories holds it; refuses a workspace or writable
/// path inside it. (A state kept in a scratch directory is never trusted: not denied.)
#[cfg(unix)]
fn deny_own_state(state: &Path, ws: &Path, writable: &[PathBuf], scratch: &[PathBuf], deny_paths: &mut Vec<PathBuf>) -> Result<(), SandboxError> {
    let mut resolver = crate::plan::resolve::PathResolver::new();
    // Where a path is, or what a directory made there would be (as written where that cannot be
    // told: a dangling link on the way).
    let mut canon = |p: &Path| resolver.canonicalize_beyond(p).unwrap_or_else(|| p.to_path_buf());
    let sc = canon(state);
    for (what, w) in std::iter::once(("workspace", ws)).chain(writable.iter().map(|w| ("allow-write", w.as_path()))) {
        if canon(w).starts_with(&sc) {
            return Err(SandboxError::Policy(format!(
                "{what} {}: inside the sandbox's own state ({}: pending changes and the records later runs trust), which no sandboxed command may write",
                w.display(), state.display())));
        }
    }
    let held = std::iter::once(ws).chain(writable.iter().map(PathBuf::as_path).filter(|w| !scratch.iter().any(|s| s == w))).any(|w| sc.starts_with(canon(w)));
    if held && !deny_paths.iter().any(|d| sc.starts_with(canon(d))) {
        deny_paths.push(state.to_path_buf());
    }
    Ok(())
}

/// The rule between grants and denies: **a deny covers everything inside it**, whatever is
/// granted there. Landlock cannot grant inside a denied directory (a rule on the deny's parent
/// would be needed, which the deny forbids), so a grant inside a deny, and a workspace inside a
/// deny, are refused with the reason instead of being silently ineffective.
fn refuse_grants_inside_denies(ws: &Path, reads: &[PathBuf], writes: &[PathBuf], denies: &[PathBuf]) -> Result<(), SandboxError> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    for d in denies {
        let dc = canon(d);
        if ws.starts_with(&dc) {
            return Err(SandboxError::Policy(format!("deny {}: the workspace {} lies inside it (a deny covers everything inside it)", d.display(), ws.display())));
        }
        for (what, g) in reads.iter().map(|g| ("allow-read", g)).chain(writes.iter().map(|g| ("allow-write", g))) {
            let gc = canon(g);
            if gc != dc && gc.starts_with(&dc) {
                return Err(SandboxError::Policy(format!(
                    "{what} {}: inside the denied {} (a deny covers everything inside it); narrow the deny to what must stay hidden",
                    g.display(), d.display())));
            }
        }
    }
    Ok(())
}

/// A denied regular file with other hard links would stay readable through them (a rule is
/// by path): refused, naming the file.
fn refuse_linked_denies(denies: &[PathBuf]) -> Result<(), SandboxError> {
    #[cfg(unix)]
    for d in denies {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::symlink_metadata(d) {
            if m.is_file() && m.nlink() > 1 {
                return Err(SandboxError::Policy(format!(
                    "deny {}: a file with {} hard links: its other names would stay readable; deny a directory that holds them all, or remove the extra links",
                    d.display(), m.nlink())));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = denies;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn upward_configs_are_the_same_listed_or_looked_up() {
        let d = crate::test_dir();
        let p = d.path();
        std::fs::write(p.join("Cargo.toml"), "[workspace]").unwrap();
        std::fs::write(p.join(".editorconfig"), "root = true").unwrap();
        std::fs::write(p.join("real-tsconfig"), "{}").unwrap();
        std::os::unix::fs::symlink("real-tsconfig", p.join("tsconfig.json")).unwrap();
        std::os::unix::fs::symlink("missing", p.join("go.mod")).unwrap();
        std::fs::create_dir(p.join("package.json")).unwrap();
        std::fs::write(p.join("unrelated.toml"), "").unwrap();
        std::fs::write(p.join("CARGO.TOML"), "").unwrap();
        let want: Vec<PathBuf> = [".editorconfig", "Cargo.toml", "tsconfig.json"].iter().map(|n| p.join(n)).collect();
        assert_eq!(upward_configs_in(p, true), want);
        assert_eq!(upward_configs_in(p, false), want);
        assert!(small_dir(p));
        // A directory that cannot be listed (or does not exist) is looked up name by name.
        assert_eq!(upward_configs_in(&p.join("absent"), true), Vec::<PathBuf>::new());
    }

    #[cfg(unix)]
    #[test]
    fn context_reads_the_repository_around_but_never_home() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let home = root.join("home");
        let repo = home.join("code/repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("crates/a")).unwrap();
        std::fs::write(home.join(".editorconfig"), "root = true\n").unwrap();
        std::fs::write(home.join(".npmrc"), "//registry/:_authToken=SECRET\n").unwrap();
        let got = context_reads(&repo.join("crates/a"), Some(&home));
        let paths: Vec<&Path> = got.iter().map(|(p, _)| p.as_path()).collect();
        assert!(paths.contains(&repo.as_path()), "{paths:?}");
        assert!(paths.contains(&home.join(".editorconfig").as_path()), "{paths:?}");
        assert!(!paths.iter().any(|p| p.ends_with(".npmrc") || *p == home.as_path()), "{paths:?}");
        // A workspace with its own .git needs no repository above it.
        assert!(!context_reads(&repo, Some(&home)).iter().any(|(p, _)| p == &repo));
        // A dotfiles repository in $HOME is never granted whole.
        std::fs::create_dir_all(home.join(".git")).unwrap();
        let got = context_reads(&home.join("notes"), Some(&home));
        assert!(!got.iter().any(|(p, _)| p == &home), "{got:?}");
        // A grant inside a deny, or a workspace inside one, is refused: a deny covers all of it.
        let s = SandboxSettings { home: Some(home.clone()), extra_deny: vec![root.clone()], ..Default::default() };
        assert!(build_sandbox_policy(&repo, &s).unwrap_err().to_string().contains("lies inside it"));
        let other = root.join("other");
        std::fs::create_dir_all(other.join("b/a")).unwrap();
        let s = SandboxSettings { home: Some(home.clone()), extra_write: vec![other.clone(), other.join("b/a")], extra_deny: vec![other.join("b")], ..Default::default() };
        let e = build_sandbox_policy(&repo, &s).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("inside the denied"), "{e}");
        // Nor a repository root others may write (a .git planted in a shared directory).
        let shared = root.join("shared");
        std::fs::create_dir_all(shared.join(".git")).unwrap();
        std::fs::create_dir_all(shared.join("w")).unwrap();
        std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
        assert!(!context_reads(&shared.join("w"), Some(&home)).iter().any(|(p, _)| p == &shared));
        std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        assert!(context_reads(&shared.join("w"), Some(&home)).iter().any(|(p, _)| p == &shared));
    }

    /// One private directory per workspace, the same at every run; a link or a directory opened
    /// to others is not taken as it is; none where it would overlap a deny or the state, or
    /// where the home does not exist.
    #[cfg(target_os = "linux")]
    #[test]
    fn each_workspace_has_its_own_private_tool_caches() {
        use std::os::unix::fs::PermissionsExt;
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let caches = root.join("home/.cache/localgpt/sandbox-caches");
        let (a, b) = (root.join("a"), root.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let state = root.join("home/.local/state/localgpt/sandbox");
        let make = |ws: &Path, deny: &[PathBuf]| workspace_tool_caches(&caches, ws, deny, &state);
        // No home: nothing is made.
        assert!(make(&a, &[]).is_err() && !root.join("home").exists());
        std::fs::create_dir_all(root.join("home")).unwrap();
        let ca = make(&a, &[]).unwrap();
        assert!(ca.starts_with(&caches) && ca.file_name().unwrap().to_string_lossy().starts_with("a-"), "{}", ca.display());
        assert_eq!(std::fs::metadata(&ca).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(make(&a, &[]).unwrap(), ca);
        let cb = make(&b, &[]).unwrap();
        assert_ne!(ca, cb);
        // Opened to others by a run (it owns it): private again.
        std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(make(&a, &[]).unwrap(), ca);
        assert_eq!(std::fs::metadata(&ca).unwrap().permissions().mode() & 0o777, 0o700);
        // A link put in its place is not followed to a grant elsewhere.
        std::fs::remove_dir(&cb).unwrap();
        std::os::unix::fs::symlink(root.join("a"), &cb).unwrap();
        assert!(make(&b, &[]).unwrap_err().contains("not a directory of this user's"));
        // A deny over it or inside it, or the state inside it: not used.
        assert!(make(&a, &[root.join("home/.cache")]).is_err());
        assert!(make(&a, &[ca.join("x")]).is_err());
        assert!(workspace_tool_caches(&caches, &a, &[], &ca.join("state")).is_err());
        // The caches of a workspace that is gone are pruned (once per period), read-only
        // directories (Go's module cache) and all; a live one's stay.
        std::fs::remove_file(&cb).unwrap();
        let cb = make(&b, &[]).unwrap();
        std::fs::create_dir_all(cb.join("go-mod/m@v1")).unwrap();
        std::fs::set_permissions(cb.join("go-mod/m@v1"), std::fs::Permissions::from_mode(0o555)).unwrap();
        std::fs::remove_dir(&b).unwrap();
        prune_tool_caches(&caches, std::time::Duration::from_secs(86_400));
        assert!(cb.exists(), "pruned again within the period");
        prune_tool_caches(&caches, std::time::Duration::ZERO);
        let owner = |c: &Path| c.with_file_name(format!("{}{OWNER_SUFFIX}", c.file_name().unwrap().to_string_lossy()));
        assert!(!cb.exists() && !owner(&cb).exists());
        assert!(ca.exists() && owner(&ca).exists());
        // A workspace named with dots keeps its own owner file (no extension taken off).
        let dotted = root.join("my.proj");
        std::fs::create_dir_all(&dotted).unwrap();
        let cd = make(&dotted, &[]).unwrap();
        assert!(owner(&cd).exists() && cd.file_name().unwrap().to_string_lossy().starts_with("myproj-"), "{}", cd.display());
    }

    #[cfg(unix)]
    #[test]
    fn the_git_directory_of_the_repository_around_is_writable_and_nothing_wider() {
        let d = crate::test_dir();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let home = root.join("home");
        let repo = home.join("code/repo");
        let git = |at: &Path, args: &[&str]| {
            let ok = std::process::Command::new("git").args(args).current_dir(at).env("HOME", &home).env("GIT_CONFIG_NOSYSTEM", "1").output().is_ok_and(|o| o.status.success());
            assert!(ok, "git {args:?}");
        };
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["-c", "user.name=a", "-c", "user.email=b@c", "commit", "-q", "--allow-empty", "-m", "x"]);
        git(&repo, &["worktree", "add", "-q", "../wt"]);
        let s = |ws: &Path| build_sandbox_policy(ws, &SandboxSettings { home: Some(home.clone()), ..Default::default() }).unwrap();
        // A subdirectory: the repository's git directory, with why.
        let p = s(&repo.join("sub"));
        // (Besides the workspace's own persistent tool caches.)
        let git_writes = |p: &SandboxPolicy| p.context_writes.iter().map(|(c, _)| c.clone()).filter(|c| Some(c) != p.tool_caches.as_ref()).collect::<Vec<_>>();
        assert_eq!(git_writes(&p), vec![repo.join(".git")]);
        assert!(p.tool_caches.as_ref().is_some_and(|c| c.starts_with(home.join(".cache/localgpt/sandbox-caches"))), "{:?}", p.tool_caches);
        assert!(p.writable_paths.contains(&repo.join(".git")));
        assert!(crate::plan::decision::Access::of(&p).write.iter().any(|r| r.path == repo.join(".git") && r.reason == REPO_GIT_WHY));
        // A linked worktree: the shared git directory (its worktrees/wt is inside it).
        assert_eq!(git_writes(&s(&home.join("code/wt"))), vec![repo.join(".git")]);
        // The repository itself, or a directory of no repository: nothing.
        assert!(git_writes(&s(&repo)).is_empty());
        std::fs::create_dir_all(root.join("plain")).unwrap();
        assert!(git_writes(&s(&root.join("plain"))).is_empty());
        // Read-only mode: nothing writable.
        let ro = build_sandbox_policy(&repo.join("sub"), &SandboxSettings { home: Some(home.clone()), mode: SandboxMode::ReadOnly, ..Default::default() }).unwrap();
        assert!(ro.context_writes.is_empty() && !ro.writable_paths.contains(&repo.join(".git")));
        // `.git` not a protected name: no grant (nothing would review it).
        let unprotected = SandboxSettings { home: Some(home.clone()), protected_workspace_paths: vec![".vscode".into()], ..Default::default() };
        assert!(git_writes(&build_sandbox_policy(&repo.join("sub"), &unprotected).unwrap()).is_empty());
        // A grant inside a git directory is refused; the git directory itself is not.
        let w = |g: PathBuf| build_sandbox_policy(&repo.join("sub"), &SandboxSettings { home: Some(home.clone()), extra_write: vec![g], ..Default::default() });
        let e = w(repo.join(".git/hooks")).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("inside the git directory"), "{e}");
        assert!(w(repo.join(".git")).is_ok());
        // A dotfiles repository in $HOME is never opened for writing.
        std::fs::create_dir_all(home.join("notes")).unwrap();
        git(&home, &["init", "-q"]);
        assert!(git_writes(&s(&home.join("notes"))).is_empty());
    }

    #[test]
    fn unknown_key_is_named() {
        let e = SandboxSettings::from_toml("[sandbox]\ntimeout_sec = 3\n").unwrap_err().to_string();
        assert!(e.contains("timeout_sec"), "{e}");
        let e = SandboxSettings::from_toml("[sandbox.allow_paths]\nreed = []\n").unwrap_err().to_string();
        assert!(e.contains("reed"), "{e}");
    }

    #[test]
    fn other_tables_are_ignored_and_values_read() {
        let s = SandboxSettings::from_toml(
            "[agent]\nmodel='x'\n[sandbox]\nlevel='standard'\ntimeout_secs=7\n[sandbox.allow_paths]\nread=['/data']\nwrite=['/tmp/builds']\n[sandbox.network]\npolicy='deny'\n",
        )
        .unwrap();
        assert_eq!(s.level, LevelSetting::Exactly(SandboxLevel::Standard));
        assert_eq!(s.timeout_secs, 7);
        assert_eq!(s.extra_read, vec![PathBuf::from("/data")]);
        assert_eq!(s.extra_write, vec![PathBuf::from("/tmp/builds")]);
    }

    #[test]
    fn proxy_and_bad_values_are_refused() {
        assert!(SandboxSettings::from_toml("[sandbox.network]\npolicy='proxy'\n").is_err());
        // `network` as a mode, with the allowlist's lists.
        let s = SandboxSettings::from_toml("[sandbox]\nnetwork = 'allowlist'\nallow_domains = ['**.pypi.org']\ndeny_domains = ['x.pypi.org']\nallow_ports = [443]\nallow_cidrs = ['10.0.0.0/8']\naudit_log = '/var/log/a.jsonl'\n").unwrap();
        assert_eq!(s.network, NetworkPolicy::Allowlist);
        assert_eq!((s.allow_domains.len(), s.deny_domains.len(), s.allow_ports.as_slice(), s.allow_cidrs.len()), (1, 1, &[443u16][..], 1));
        assert_eq!(s.audit_log.as_deref(), Some(std::path::Path::new("/var/log/a.jsonl")));
        // A mirror in a private range, by its exact name; a wildcard is refused with the key named.
        let ws = std::path::Path::new("/tmp");
        let forced = |s: SandboxSettings| SandboxSettings { force_workspace: true, ..s };
        let m = forced(SandboxSettings::from_toml("[sandbox]\nnetwork = 'allowlist'\nallow_private_hosts = ['mirror.corp.example']\n").unwrap());
        let a = build_sandbox_policy(ws, &m).unwrap().network_allowlist.unwrap();
        assert!(a.decide("mirror.corp.example", 443).allowed() && a.check_address_of("mirror.corp.example", "10.9.8.7".parse().unwrap()).is_ok());
        let w = forced(SandboxSettings::from_toml("[sandbox]\nnetwork = 'allowlist'\nallow_private_hosts = ['*.corp.example']\n").unwrap());
        assert!(build_sandbox_policy(ws, &w).unwrap_err().to_string().contains("allow_private_hosts"));
        let d = forced(SandboxSettings::from_toml("[sandbox]\nallow_private_hosts = ['mirror.corp.example']\n").unwrap());
        assert!(build_sandbox_policy(ws, &d).unwrap().ignored_settings[0].contains("allow_private_hosts ignored"));
        assert_eq!(SandboxSettings::from_toml("[sandbox]\nnetwork = 'full'\n").unwrap().network, NetworkPolicy::Full);
        // With full or deny the allowlist's lists mean nothing: a warning of every run (issue 58:
        // a config file's lists must not stop every run); denying domains with full cannot be
        // done: refused.
        let s = SandboxSettings::from_toml("[sandbox]\nnetwork = 'full'\nallow_domains = ['x.org']\n").unwrap();
        let p = build_sandbox_policy(std::path::Path::new("/tmp"), &SandboxSettings { force_workspace: true, ..s }).unwrap();
        assert!(p.ignored_settings[0].starts_with("allow_domains ignored"), "{:?}", p.ignored_settings);
        let s = SandboxSettings::from_toml("[sandbox]\nallow_domains = ['x.org']\nallow_cidrs = ['10.0.0.0/8']\n").unwrap();
        let p = build_sandbox_policy(std::path::Path::new("/tmp"), &SandboxSettings { force_workspace: true, ..s }).unwrap();
        assert!(p.network_allowlist.is_none() && p.ignored_settings[0].contains("allow_domains, allow_cidrs ignored: the network is denied"), "{:?}", p.ignored_settings);
        let s = SandboxSettings::from_toml("[sandbox]\nnetwork = 'full'\ndeny_domains = ['x.org']\n").unwrap();
        assert!(build_sandbox_policy(std::path::Path::new("/tmp"), &SandboxSettings { force_workspace: true, ..s }).is_err());
        assert!(SandboxSettings::from_toml("[sandbox]\nnetwork = 'open'\n").is_err());
        assert!(SandboxSettings::from_toml("[sandbox]\nmode='yolo'\n").is_err());
        assert!(SandboxSettings::from_toml("[sandbox\n").is_err());
        assert!(SandboxSettings::from_toml("[sandbox.allow_paths]\nread=['rel/dir']\n").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn the_sandboxs_own_state_is_denied_where_a_writable_path_holds_it() {
        let d = crate::test_dir();
        let home = std::fs::canonicalize(d.path()).unwrap();
        let state = home.join(".local/state/localgpt/sandbox");
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let scratch = vec![PathBuf::from("/tmp")];
        let deny = |ws: &Path, writable: &[PathBuf]| {
            let mut denies = Vec::new();
            deny_own_state(&state, ws, writable, &scratch, &mut denies).map(|()| denies)
        };
        // Outside everything writable: nothing to deny.
        assert_eq!(deny(&ws, &[PathBuf::from("/tmp")]).unwrap(), Vec::<PathBuf>::new());
        // The workspace is the home directory, or a grant holds the state (it need not exist).
        assert_eq!(deny(&home, &[]).unwrap(), vec![state.clone()]);
        assert_eq!(deny(&ws, &[home.join(".local")]).unwrap(), vec![state.clone()]);
        // Inside it: refused.
        std::fs::create_dir_all(state.join("pending/x")).unwrap();
        assert!(deny(&state.join("pending/x"), &[]).is_err());
        assert!(deny(&ws, &[state.join("pending")]).is_err());
        // Through a link to it: the same.
        std::os::unix::fs::symlink(&state, home.join("st")).unwrap();
        assert!(deny(&ws, &[home.join("st/pending")]).is_err());
    }

    #[test]
    fn mode_word_under_level_and_enabled_false() {
        let s = SandboxSettings::from_toml("[sandbox]\nlevel='read-only'\n").unwrap();
        assert_eq!(s.mode, SandboxMode::ReadOnly);
        let s = SandboxSettings::from_toml("[sandbox]\nenabled=false\n").unwrap();
        assert_eq!(s.mode, SandboxMode::FullAccess);
    }

    #[test]
    fn require_env_values() {
        let mut s = SandboxSettings::default();
        s.apply_require_env(Some("1")).unwrap();
        assert_eq!(s.require, Some(SandboxLevel::Standard));
        s.apply_require_env(Some("full")).unwrap();
        assert_eq!(s.require, Some(SandboxLevel::Full));
        assert!(s.apply_require_env(Some("maybe")).is_err());
    }

    #[test]
    fn default_policy_per_mode() {
        let d = crate::test_dir();
        let mut settings = SandboxSettings { home: Some("/home/u".into()), ..Default::default() };
        let p = build_sandbox_policy(d.path(), &settings).unwrap();
        assert!(p.writable_paths.contains(&PathBuf::from("/tmp")));
        assert!(p.deny_paths.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(p.read_only_paths.contains(&PathBuf::from("/home/u/.cargo")));
        assert!(!p.deny_paths.contains(&PathBuf::from("/home/u/.config")));
        settings.mode = SandboxMode::ReadOnly;
        let p = build_sandbox_policy(d.path(), &settings).unwrap();
        assert!(p.writable_paths.is_empty());
        settings.extra_write.push("/x".into());
        assert!(build_sandbox_policy(d.path(), &settings).is_err());
        settings.mode = SandboxMode::FullAccess;
        settings.extra_write.clear();
        // Validated where plans are made (once per run).
        assert!(build_sandbox_policy(d.path(), &settings).unwrap().validate().is_err());
        settings.dangerously_allow_full_access = true;
        build_sandbox_policy(d.path(), &settings).unwrap();
        assert!(build_sandbox_policy(&d.path().join("nope"), &settings).is_err());
    }
}
