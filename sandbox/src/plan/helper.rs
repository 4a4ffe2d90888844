//! What the helper receives: the compact part of a plan it applies.

use super::*;
use crate::linux::seccomp::PackedInsn;

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
    /// The command's stdin, stdout and stderr are a pseudo-terminal of its own
    /// ([`crate::run::StdinMode::Terminal`]): its process starts a session and makes it its
    /// controlling terminal before it confines itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
    /// Test-only (cargo feature `ablation`): [`Plan::ablated`], for the cuts the helper makes
    /// (its `setsid`, `close_range`, devpts, `/proc` and `/sys` masks, read-only mounts, the
    /// kill of the tree). Never sent when empty; ignored by a shipped build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ablated: Vec<crate::model::ids::ProtectionId>,
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

    /// Whether the helper's seccomp filter sends calls to the runner (a rule answers by
    /// user notification): the runner then serves them (sockets, the DNS stub at Standard).
    #[must_use]
    pub fn seccomp_listener(&self) -> bool {
        self.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.action == crate::linux::seccomp::SeccompDeny::UserNotif))
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
            seccomp_listener: self.seccomp_listener(),
            proxy_port: (self.network_allowlist.is_some() && self.namespaces().is_some()).then_some(crate::network::PROXY_PORT),
            terminal: false,
            ablated: self.ablated.clone(),
        }
    }
}

/// Where the command's own terminal is named in a private `/dev` (Full): the host's devpts, which
/// it belongs to, is not mounted there.
pub const CONSOLE: &str = "/dev/console";

impl HelperPlan {
    /// The command's stdin, stdout and stderr are a terminal of its own
    /// ([`crate::run::StdinMode::Terminal`]). In a private `/dev` the terminal is bound at
    /// [`CONSOLE`], and Landlock lets the command open it by that name as it opens `/dev/tty`
    /// (programs open the name `ttyname` gives: `GPG_TTY`, pinentry). It is the run's own
    /// terminal, which the command holds already; no other device is reachable by that name.
    pub fn with_terminal(&mut self) {
        use crate::linux::landlock::fs;
        self.terminal = true;
        if let (Some(ll), true) = (self.landlock.as_mut(), self.namespaces.as_ref().is_some_and(|n| n.private_dev)) {
            let access = (fs::READ_FILE | fs::WRITE_FILE | fs::IOCTL_DEV) & ll.fs;
            ll.rules.push((PathBuf::from(CONSOLE), access));
        }
    }
}
