//! The sandbox policy: what the user wants confined, independent of how.
//!
//! A [`SandboxPolicy`] is plain, serialisable data (JSON through serde, unknown fields rejected).
//! It is normally built by [`crate::config::build_sandbox_policy`] from a mode and a workspace;
//! [`SandboxPolicy::validate`] checks it before any plan is made from it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;

/// How much the kernel confines a command. Ordered: `None < Minimal < Standard < Full`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxLevel {
    /// No kernel confinement: rlimits, timeout and output caps only.
    None,
    /// seccomp only: network and dangerous syscalls blocked, filesystem open.
    Minimal,
    /// Landlock + seccomp: filesystem and network confinement.
    Standard,
    /// Standard plus user, PID, network, mount and IPC namespaces.
    Full,
}

impl SandboxLevel {
    /// The lowercase name used in config, CLI and JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxLevel::None => "none",
            SandboxLevel::Minimal => "minimal",
            SandboxLevel::Standard => "standard",
            SandboxLevel::Full => "full",
        }
    }

    /// Parses `none|minimal|standard|full`.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] for any other word.
    pub fn parse(s: &str) -> Result<Self, SandboxError> {
        match s {
            "none" => Ok(SandboxLevel::None),
            "minimal" => Ok(SandboxLevel::Minimal),
            "standard" => Ok(SandboxLevel::Standard),
            "full" => Ok(SandboxLevel::Full),
            other => Err(SandboxError::Policy(format!(
                "unknown sandbox level {other:?} (expected none, minimal, standard or full)"
            ))),
        }
    }
}

impl std::fmt::Display for SandboxLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which level the user asked for: the best available (`auto`) or one exact level.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(try_from = "String", into = "String")]
pub enum LevelSetting {
    /// The highest level this kernel and build can enforce.
    #[default]
    Auto,
    /// Exactly this level; refused when the machine cannot reach it.
    Exactly(SandboxLevel),
}

impl TryFrom<String> for LevelSetting {
    type Error = SandboxError;
    fn try_from(s: String) -> Result<Self, SandboxError> {
        LevelSetting::parse(&s)
    }
}

impl From<LevelSetting> for String {
    fn from(l: LevelSetting) -> String {
        match l {
            LevelSetting::Auto => "auto".into(),
            LevelSetting::Exactly(level) => level.as_str().into(),
        }
    }
}

impl LevelSetting {
    /// Parses `auto` or a level name.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] for an unknown word.
    pub fn parse(s: &str) -> Result<Self, SandboxError> {
        if s == "auto" {
            Ok(LevelSetting::Auto)
        } else {
            SandboxLevel::parse(s).map(LevelSetting::Exactly)
        }
    }
}

/// The high-level mode (spec 3.3).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read-write in the workspace and `/tmp`, read-only system, credentials denied. The default.
    #[default]
    WorkspaceWrite,
    /// Read-only everywhere that is readable; no writes anywhere (devices excepted).
    ReadOnly,
    /// No confinement at all. Refused unless explicitly acknowledged.
    FullAccess,
}

impl SandboxMode {
    /// The kebab-case name used in config, CLI and JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::FullAccess => "full-access",
        }
    }

    /// Parses a mode name.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] naming the accepted modes.
    pub fn parse(s: &str) -> Result<Self, SandboxError> {
        match s {
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "read-only" => Ok(SandboxMode::ReadOnly),
            "full-access" => Ok(SandboxMode::FullAccess),
            other => Err(SandboxError::Policy(format!(
                "unknown sandbox mode {other:?} (expected workspace-write, read-only or full-access)"
            ))),
        }
    }
}

/// Network access. Only `deny` is implemented; the spec's proxy mode is future work and is
/// refused at config time rather than silently treated as deny or allow.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkPolicy {
    /// No network at all (unix socketpairs excepted).
    #[default]
    Deny,
    /// Only the hosts of [`SandboxPolicy::network_allowlist`], through the runner's proxy (Full
    /// level: the sandbox's own network namespace; Standard where the runner answers connect).
    Allowlist,
    /// The host's network, open: TCP and UDP anywhere, as without the sandbox. Every other
    /// protection stays (the host's unix sockets, abstract ones included, stay out of reach;
    /// Linux only).
    Full,
}

/// What happens to the caller's environment.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct EnvPolicy {
    /// Variables kept even though they are not on the allowlist or look like secrets.
    #[serde(default)]
    pub keep: Vec<String>,
    /// Variables set (after scrubbing), e.g. `CI=1`.
    #[serde(default)]
    pub set: Vec<(String, String)>,
    /// Point tool caches (`XDG_CACHE_HOME`, `npm_config_cache`, `PIP_CACHE_DIR`, …) at a per-run
    /// scratch directory instead of `$HOME`, so nothing persists outside the workspace.
    #[serde(default = "default_true")]
    pub redirect_caches: bool,
    /// With `redirect_caches`, in workspace-write mode: the caches go to a directory of the
    /// sandbox's that persists across runs of the same workspace ([`SandboxPolicy::tool_caches`])
    /// instead of the per-run scratch directory. Never the host's own caches.
    #[serde(default = "default_true")]
    pub persistent_caches: bool,
}

fn default_protected() -> Vec<String> {
    crate::defaults::default_protected_names()
}

fn default_nested_walk_entries() -> u64 {
    crate::model::guard::NESTED_ENTRIES as u64
}

/// The least [`SandboxPolicy::nested_walk_entries`] accepted.
pub const MIN_NESTED_WALK_ENTRIES: u64 = 1000;

fn default_true() -> bool {
    true
}

/// Everything the sandbox needs to know about one command's confinement (spec 3.2).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    /// The workspace: read-write (read-only in `read-only` mode); the command's cwd. Canonical.
    pub workspace_path: PathBuf,
    /// The workspace as the caller gave it, when that path goes through a symbolic link (shown
    /// loudly: the run's workspace is not where the path seems to point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_via_symlink: Option<PathBuf>,
    /// The mode the policy was built from.
    pub mode: SandboxMode,
    /// Read + execute (system dirs, toolchains, user `allow_paths.read`).
    pub read_only_paths: Vec<PathBuf>,
    /// Read-write besides the workspace (`/tmp`, `/dev/shm`, user `allow_paths.write`).
    pub writable_paths: Vec<PathBuf>,
    /// Device nodes opened read-write (`/dev/null`, `/dev/tty`, `/dev/pts`, …).
    pub device_paths: Vec<PathBuf>,
    /// Never readable nor writable, even under a granted parent.
    pub deny_paths: Vec<PathBuf>,
    /// The user's `$HOME` at policy construction, for display and checks.
    pub home: Option<PathBuf>,
    /// Network policy.
    pub network_access: NetworkPolicy,
    /// The allowlist ([`NetworkPolicy::Allowlist`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_allowlist: Option<crate::network::Allowlist>,
    /// Append one JSON line per event (run start, each network decision, run end) to this file
    /// (outside everything the command can write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_log: Option<PathBuf>,
    /// Kill the whole process tree after this many seconds.
    pub timeout_secs: u64,
    /// Per stream (stdout, stderr) cap; the head is kept.
    pub max_output_bytes: u64,
    /// `RLIMIT_FSIZE`; `None`: no per-file bound (disk use is bounded where it happens: the
    /// private tmpfs at Full level, the filesystem elsewhere).
    #[serde(default)]
    pub max_file_size_bytes: Option<u64>,
    /// Bound on the sandbox's own process count (threads count, as the kernel counts them).
    pub max_processes: u32,
    /// Hard `RLIMIT_NOFILE`; the soft limit starts at
    /// `defaults::SOFT_OPEN_FILES` (1024) or this, whichever is lower.
    pub max_open_files: u64,
    /// Memory limit of the per-run cgroup (where one can be created); `None`: half of physical
    /// memory.
    #[serde(default)]
    pub max_memory_bytes: Option<u64>,
    /// Size of each private tmpfs (`/tmp`, `/dev/shm` at Full level); `None`: a quarter of
    /// physical memory.
    #[serde(default)]
    pub max_tmp_bytes: Option<u64>,
    /// Which level to run at.
    pub level: LevelSetting,
    /// Refuse to run below this level (`--require`, `LOCALGPT_REQUIRE_SANDBOX`).
    pub require_level: Option<SandboxLevel>,
    /// Environment handling.
    pub environment: EnvPolicy,
    /// Workspace paths (relative) bound read-only at Full level because they run later outside
    /// the sandbox (`.git/hooks`, `.git/config`, `.vscode`, …).
    #[serde(default = "default_protected")]
    pub protected_workspace_paths: Vec<String>,
    /// How many directory entries the launch walk for nested protected names reads at most in
    /// directories no earlier walk recorded (`guard::nested`); a walk that runs out is reported
    /// and its root's persistence protection degraded.
    #[serde(default = "default_nested_walk_entries")]
    pub nested_walk_entries: u64,
    /// The user explicitly acknowledged running without kernel confinement
    /// (`full-access` mode or level `none`).
    pub unconfined_acknowledged: bool,
    /// Requested grants (`--allow-read`, `--allow-write`, `[sandbox.allow_paths]`) that did not
    /// exist when the policy was built: skipped, and each named in one warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_grants: Vec<PathBuf>,
    /// Settings that mean nothing under this policy (the allowlist's lists with the network
    /// denied or open): each named in a warning of every run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_settings: Vec<String>,
    /// Denied paths whose file was moved since a previous run recorded it (rule, where the file
    /// is now): the new place is denied too (also in `deny_paths`); see the `denied` module.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved_denies: Vec<(PathBuf, PathBuf)>,
    /// Read-only grants added because of where the workspace lies (also in
    /// `read_only_paths`), each with why: the git repository around it, tool configs in its
    /// ancestors (`defaults::UPWARD_CONFIGS`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_reads: Vec<(PathBuf, String)>,
    /// Writable grants added because of where the workspace lies (also in `writable_paths`),
    /// each with why: the git directory of the repository the workspace is a subdirectory or a
    /// linked worktree of, protected whole by the workspace guard.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_writes: Vec<(PathBuf, String)>,
    /// The persistent tool caches of this workspace (also in `writable_paths`): a directory of
    /// the sandbox's, private to the user, keyed by the workspace, that the cache variables point
    /// at (`None`: per-run scratch). Made by `config::workspace_tool_caches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_caches: Option<PathBuf>,
    /// Why the persistent tool caches could not be used for this run (said in a warning; the
    /// caches are per-run then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_caches_unavailable: Option<String>,
    /// Host unix sockets the command may connect to (`--allow-unix-socket`), connect-only and
    /// exactly these: (the path as given, absolute; its canonical path). Every other host
    /// socket stays unreachable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_unix_sockets: Vec<(PathBuf, PathBuf)>,
    /// The platform whose default tables the policy was built with (a plan is only made for
    /// the same platform).
    #[serde(default)]
    pub platform: crate::platform::Platform,
}

/// Limits accepted by [`SandboxPolicy::validate`], shared with config parsing.
pub mod limits {
    /// Longest timeout: one day.
    pub const MAX_TIMEOUT_SECS: u64 = 86_400;
    /// Largest output cap per stream: 1 GiB.
    pub const MAX_OUTPUT_BYTES: u64 = 1 << 30;
    /// Smallest file size limit (bash needs to write here-doc temp files).
    pub const MIN_FILE_SIZE_BYTES: u64 = 4096;
    /// Process count range.
    pub const MIN_PROCESSES: u32 = 4;
    /// Process count range.
    pub const MAX_PROCESSES: u32 = 100_000;
    /// Open files range.
    pub const MIN_OPEN_FILES: u64 = 16;
    /// Open files range.
    pub const MAX_OPEN_FILES: u64 = 1 << 20;
    /// Longest path a pathname unix socket address holds (`sun_path` without its NUL).
    pub const MAX_UNIX_SOCKET_PATH: usize = 107;
    /// Smallest memory limit (a shell and a small tool).
    pub const MIN_MEMORY_BYTES: u64 = 32 << 20;
    /// Smallest private tmpfs.
    pub const MIN_TMP_BYTES: u64 = 1 << 20;
}

impl SandboxPolicy {
    /// Checks the policy: absolute paths, an existing workspace directory, limits in range, and
    /// the acknowledgment that unconfined runs require.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] with a one-line message naming the offending field.
    pub fn validate(&self) -> Result<(), SandboxError> {
        use limits::*;
        let ws = &self.workspace_path;
        check_absolute("workspace_path", ws)?;
        match std::fs::metadata(ws) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(SandboxError::Policy(format!("workspace {} is not a directory", ws.display()))),
            Err(e) => return Err(SandboxError::Policy(format!("workspace {}: {e}", ws.display()))),
        }
        for (field, list) in [
            ("read_only_paths", &self.read_only_paths),
            ("writable_paths", &self.writable_paths),
            ("device_paths", &self.device_paths),
            ("deny_paths", &self.deny_paths),
        ] {
            for p in list {
                // A plan made for Windows elsewhere (`explain --platform windows`) names the
                // default tables' drive paths, which are absolute only there.
                if self.platform == crate::platform::Platform::Windows && is_windows_absolute(p) {
                    continue;
                }
                check_absolute(field, p)?;
            }
        }
        for (given, canonical) in &self.allow_unix_sockets {
            for p in [given, canonical] {
                check_absolute("allow_unix_sockets", p)?;
                if p.as_os_str().len() > MAX_UNIX_SOCKET_PATH {
                    return Err(SandboxError::Policy(format!(
                        "allow-unix-socket {}: longer than a unix socket address holds ({MAX_UNIX_SOCKET_PATH} bytes)", p.display())));
                }
            }
        }
        if let Some(a) = &self.audit_log {
            check_absolute("audit_log", a)?;
            // Where it really is: its directory with links and `..` resolved (the file itself
            // is opened without following a link).
            let real = match (a.parent().map(std::fs::canonicalize), a.file_name()) {
                (Some(Ok(dir)), Some(name)) => dir.join(name),
                (Some(Err(e)), _) => return Err(SandboxError::Policy(format!("audit_log {}: its directory: {e}", a.display()))),
                _ => return Err(SandboxError::Policy(format!("audit_log {}: not a file path", a.display()))),
            };
            let writable = [a, &real].iter().any(|a| a.starts_with(ws) || (self.mode == SandboxMode::WorkspaceWrite && self.writable_paths.iter().any(|w| a.starts_with(w))));
            if writable {
                return Err(SandboxError::Policy(format!("audit_log {}: inside what the command may write, it could rewrite its own record; put it elsewhere", a.display())));
            }
        }
        if (self.network_access == NetworkPolicy::Allowlist) != self.network_allowlist.is_some() {
            return Err(SandboxError::Policy("network_allowlist must be set exactly when network_access is allowlist".into()));
        }
        in_range("timeout_secs", self.timeout_secs, 1, MAX_TIMEOUT_SECS)?;
        in_range("max_output_bytes", self.max_output_bytes, 1, MAX_OUTPUT_BYTES)?;
        if let Some(f) = self.max_file_size_bytes {
            in_range("max_file_size_bytes", f, MIN_FILE_SIZE_BYTES, u64::MAX / 2)?;
        }
        in_range("max_processes", u64::from(self.max_processes), u64::from(MIN_PROCESSES), u64::from(MAX_PROCESSES))?;
        in_range("max_open_files", self.max_open_files, MIN_OPEN_FILES, MAX_OPEN_FILES)?;
        in_range("nested_walk_entries", self.nested_walk_entries, MIN_NESTED_WALK_ENTRIES, u64::MAX / 2)?;
        if let Some(m) = self.max_memory_bytes {
            in_range("max_memory_bytes", m, MIN_MEMORY_BYTES, u64::MAX / 2)?;
        }
        if let Some(t) = self.max_tmp_bytes {
            in_range("max_tmp_bytes", t, MIN_TMP_BYTES, u64::MAX / 2)?;
        }
        let unconfined = self.mode == SandboxMode::FullAccess || self.level == LevelSetting::Exactly(SandboxLevel::None);
        if unconfined && !self.unconfined_acknowledged {
            return Err(SandboxError::Policy(
                "running without kernel confinement (full-access mode or level none) requires --dangerously-allow-full-access or `dangerously_allow_full_access = true` in [sandbox]".into(),
            ));
        }
        if self.mode == SandboxMode::FullAccess {
            if let Some(req) = self.require_level {
                if req > SandboxLevel::None {
                    return Err(SandboxError::Policy(format!(
                        "full-access mode cannot satisfy the required level {req}"
                    )));
                }
            }
        }
        for rel in &self.protected_workspace_paths {
            let p = Path::new(rel);
            if p.is_absolute() || p.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
                return Err(SandboxError::Policy(format!("protected_workspace_paths: {rel:?} must be relative to the workspace, without ..")));
            }
        }
        for name in &self.environment.keep {
            if name.is_empty() || name.contains('=') {
                return Err(SandboxError::Policy(format!("environment.keep: invalid variable name {name:?}")));
            }
        }
        Ok(())
    }

    /// Parses a policy from JSON and validates it.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] for malformed JSON, unknown fields or a failed validation.
    pub fn from_json(text: &str) -> Result<Self, SandboxError> {
        let p: SandboxPolicy =
            serde_json::from_str(text).map_err(|e| SandboxError::Policy(format!("policy JSON: {e}")))?;
        p.validate()?;
        Ok(p)
    }
}

/// `X:\…`, `X:/…` or `\\server\…`: absolute on Windows whatever the OS this runs on.
fn is_windows_absolute(p: &Path) -> bool {
    let s = p.to_string_lossy();
    let b = s.as_bytes();
    (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/')) || s.starts_with("\\\\")
}

fn check_absolute(field: &str, p: &Path) -> Result<(), SandboxError> {
    if p.is_absolute() {
        Ok(())
    } else {
        Err(SandboxError::Policy(format!("{field}: path {} is not absolute", p.display())))
    }
}

fn in_range(field: &str, v: u64, lo: u64, hi: u64) -> Result<(), SandboxError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(SandboxError::Policy(format!("{field} = {v} is out of range ({lo}..={hi})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ws: &Path) -> SandboxPolicy {
        SandboxPolicy {
            workspace_path: ws.to_path_buf(),
            workspace_via_symlink: None,
            mode: SandboxMode::WorkspaceWrite,
            read_only_paths: vec!["/usr".into()],
            writable_paths: vec![],
            device_paths: vec![],
            deny_paths: vec![],
            home: None,
            network_access: NetworkPolicy::Deny,
            network_allowlist: None,
            audit_log: None,
            timeout_secs: 120,
            max_output_bytes: 1 << 20,
            max_file_size_bytes: Some(50 << 20),
            max_processes: 64,
            max_open_files: 256,
            max_memory_bytes: None,
            max_tmp_bytes: None,
            level: LevelSetting::Auto,
            require_level: None,
            environment: EnvPolicy::default(),
            tool_caches: None,
            tool_caches_unavailable: None,
            protected_workspace_paths: default_protected(),
            nested_walk_entries: default_nested_walk_entries(),
            unconfined_acknowledged: false,
            skipped_grants: Vec::new(),
            ignored_settings: Vec::new(),
            moved_denies: Vec::new(),
            context_reads: Vec::new(),
            context_writes: Vec::new(),
            allow_unix_sockets: Vec::new(),
            platform: crate::platform::Platform::Linux,
        }
    }

    #[test]
    fn levels_are_ordered() {
        assert!(SandboxLevel::None < SandboxLevel::Minimal);
        assert!(SandboxLevel::Minimal < SandboxLevel::Standard);
        assert!(SandboxLevel::Standard < SandboxLevel::Full);
    }

    #[test]
    fn json_round_trip_and_unknown_fields() {
        let d = crate::test_dir();
        let p = sample(d.path());
        let j = serde_json::to_string(&p).unwrap();
        assert_eq!(SandboxPolicy::from_json(&j).unwrap(), p);
        let mut v: serde_json::Value = serde_json::from_str(&j).unwrap();
        v["surprise"] = serde_json::json!(1);
        let err = SandboxPolicy::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(err.contains("surprise"), "{err}");
    }

    #[test]
    fn validation_rejects_bad_values() {
        let d = crate::test_dir();
        let mut p = sample(d.path());
        p.read_only_paths.push("relative/dir".into());
        assert!(p.validate().unwrap_err().to_string().contains("not absolute"));
        let mut p = sample(d.path());
        p.timeout_secs = 0;
        assert!(p.validate().unwrap_err().to_string().contains("timeout_secs"));
        let mut p = sample(&d.path().join("missing"));
        p.workspace_path = d.path().join("missing");
        assert!(p.validate().is_err());
        let mut p = sample(d.path());
        p.mode = SandboxMode::FullAccess;
        assert!(p.validate().unwrap_err().to_string().contains("dangerously"));
        p.unconfined_acknowledged = true;
        p.validate().unwrap();
        let mut p = sample(d.path());
        p.level = LevelSetting::Exactly(SandboxLevel::None);
        assert!(p.validate().is_err());
    }

    #[test]
    fn parse_names() {
        assert_eq!(SandboxMode::parse("read-only").unwrap(), SandboxMode::ReadOnly);
        assert!(SandboxMode::parse("yolo").is_err());
        assert_eq!(LevelSetting::parse("auto").unwrap(), LevelSetting::Auto);
        assert_eq!(LevelSetting::parse("full").unwrap(), LevelSetting::Exactly(SandboxLevel::Full));
        assert!(LevelSetting::parse("max").is_err());
    }
}
