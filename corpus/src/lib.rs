//! # localgpt-corpus
//!
//! The case schema shared by the LocalGPT sandbox corpora, with loading and validation.
//!
//! The escape corpus (`escapes/*.yaml`, one file per family) is data only: each vector names
//! what it attempts, its source (CVE, advisory, issue or paper), the probe that attempts it, the
//! protections it depends on, the expected verdict and the checks that verify the effect from
//! outside the sandbox. The harness crate runs it; this crate only parses and validates it.
//!
//! Validation rejects unknown fields, duplicate names, a missing or empty source, unknown
//! protection ids, unknown placeholders and (with [`Corpus::validate_probes`]) unknown probes.
//!
//! The corpus is embedded in the binary ([`embedded`]), so `localgpt sandbox test --full` needs
//! no source tree.

pub mod conformance;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A corpus error: which file / vector, and what is wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CorpusError {
    /// The file is not valid YAML or does not match the schema.
    #[error("{file}: {message}")]
    Parse {
        /// File name.
        file: String,
        /// Parser message.
        message: String,
    },
    /// The data parses but breaks a rule.
    #[error("{file}: vector `{vector}`: {message}")]
    Invalid {
        /// File name.
        file: String,
        /// Vector name (or `-` for file-level errors).
        vector: String,
        /// What is wrong.
        message: String,
    },
    /// Reading a corpus directory failed.
    #[error("{path}: {message}")]
    Io {
        /// Path.
        path: String,
        /// OS message.
        message: String,
    },
}

/// Families of the escape corpus (one YAML file each).
pub const FAMILIES: &[&str] =
    &["filesystem", "network", "ipc-signals", "privilege", "terminal", "persistence", "process-lifetime", "resources"];

/// Protection ids of `localgpt sandbox status` / `explain` that a vector may depend on: the
/// sandbox's own enum, so a vector cannot name a protection the sandbox does not report.
#[must_use]
pub fn protection_ids() -> Vec<&'static str> {
    localgpt_sandbox::plan::ProtectionId::ALL.iter().map(|p| p.as_str()).collect()
}

/// Placeholders a probe, check or env value may use; the harness substitutes them per world.
pub const PLACEHOLDERS: &[&str] = &[
    "ws", "outside", "home", "canary", "bin", "token", "tcp_port", "udp_port", "docker_sock", "dbus_sock",
    "systemd_sock", "state_sock", "dgram_sock", "agent_sock", "ws_agent_sock", "abstract_name", "abstract_dgram", "squat_name", "tcp_reuse_port", "free_port", "host_ip", "pty", "shm_id", "msg_id", "sem_id",
    "key_desc", "host_tmp_secret", "host_shm_secret", "secret_env", "uid", "gid", "lo_addr", "kmsg_console", "etc_secret", "loop_nr",
    "group_secret", "late_secret",
];

/// Conditions under which a vector can run at all (checked before anything runs; when one is
/// not met the vector is reported *skipped* with the reason, and counted).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Require {
    /// The suite runs as root.
    Root,
    /// The suite runs as an unprivileged user.
    NonRoot,
    /// Unprivileged user namespaces work (or root).
    UserNamespaces,
    /// `io_uring_setup` works (kernel.io_uring_disabled = 0 for this user).
    IoUring,
    /// io_uring has `IORING_OP_SOCKET` (Linux 5.19), besides [`Require::IoUring`].
    IoUringSocket,
    /// At least 2 GiB of memory available (`MemAvailable`): a probe that touches 768 MiB bare
    /// would otherwise push a small machine (a 768 MiB guest) into its OOM killer.
    SpareMemory,
    /// The kernel has the x32 ABI (CONFIG_X86_X32_ABI).
    X32Abi,
    /// The kernel runs i386 binaries / `int 0x80` (CONFIG_IA32_EMULATION, not disabled).
    Ia32Abi,
    /// TIOCSTI works for this user (dev.tty.legacy_tiocsti = 1, or root).
    Tiocsti,
    /// A virtual console (`/dev/tty0`) exists.
    VtConsole,
    /// `kernel.core_pattern` writes plain core files (not a pipe).
    CorePatternPlain,
    /// The kernel keyring works for this user.
    Keyring,
    /// The world's filesystem supports `user.*` extended attributes.
    UserXattr,
    /// SysV IPC works.
    SysvIpc,
    /// `/etc/cron.d` exists.
    CronD,
    /// The `ip` command (iproute2) exists, to verify and undo netlink changes.
    IpCommand,
    /// The host's network namespace has an interface besides `lo` (in `/sys/class/net`).
    HostInterface,
    /// The host has an IPv4 address outside 127.0.0.0/8 (`{host_ip}`).
    HostAddress,
    /// `/dev/loop-control` exists (the loop driver is loaded).
    LoopControl,
    /// A secret under `/etc` that this user reads only through one of its groups (a key in
    /// `/etc/ssl/private` through `ssl-cert`, `/etc/shadow` through `shadow`; for root any
    /// group-readable file that is not world-readable). `ci/lgtest-user` gives the CI user one.
    GroupSecret,
}

/// The workspace a vector runs in. Worlds are what users have, never arranged so that a vector
/// passes: no protected path (`.vscode`, `.idea`, the agent's config) exists unless the world
/// says so.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum WorldKind {
    /// A fresh `git init` repository with one commit (`.git` with hooks samples and a config).
    #[default]
    GitRepo,
    /// A linked worktree checkout: `.git` is a *file* pointing to the main repository's
    /// `worktrees/<name>` directory outside the workspace.
    GitWorktree,
    /// A repository whose `core.hooksPath` is `.husky/_` inside the worktree (husky 9), the hook
    /// directory present.
    HooksPath,
    /// A plain directory, no repository.
    NoGit,
    /// A repository with another repository nested in `sub/repo` (a monorepo's vendored or
    /// checked-out project), and a `.vscode` in `sub`.
    NestedRepo,
    /// A repository with a submodule checked out in `sub`: `sub/.git` is a file pointing to
    /// `.git/modules/sub`, which has its own hooks and config.
    Submodule,
    /// The workspace is `$HOME` (an agent started in the home directory, a dotfiles
    /// repository): the home's files (`.bashrc`, `.profile`, the credentials) are in it, and it
    /// is a repository.
    HomeWorkspace,
    /// A plain directory (no repository) in the host's `/tmp`, one level down:
    /// `/tmp/<token>-tmpws/ws` (an agent's scratch clone). Its parent is in a scratch directory,
    /// which every level below Full shares with the host; removed with the world.
    TmpWorkspace,
}

/// The attempt itself.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// A probe function compiled into the binary (`localgpt sandbox probe NAME ARGS…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<String>,
    /// Arguments of the builtin probe (placeholders allowed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// A shell-level attempt, run as `bash -c SHELL` (placeholders allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
}

/// The verdict a vector must get in the sandbox.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The effect must be absent (checked from outside).
    Blocked,
}

/// A shell command the harness runs bare (as `setup` runs) *while* the command runs: once the
/// path `when` exists (the probe makes it, so the command has started and the sandbox is in
/// place), `shell` runs once. A run in which it did not run, or failed, proves nothing and is an
/// error, never a pass.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct During {
    /// The path whose appearance triggers the action (placeholders allowed).
    pub when: String,
    /// The action (placeholders allowed; cwd the workspace; the run's `HOME`,
    /// `XDG_CONFIG_HOME` and `PATH`). It must succeed.
    pub shell: String,
    /// The files the action writes (placeholders allowed): a planted secret found there after
    /// the run is the host's own, not a copy the command made. Only these paths are exempt.
    #[serde(default)]
    pub writes: Vec<String>,
}

/// A file descriptor the caller leaks into the command (not close-on-exec).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct InheritFd {
    /// The descriptor number in the child (≥ 4).
    pub fd: i32,
    /// What it is.
    pub kind: FdKind,
    /// Path (placeholders allowed) for file/dir kinds.
    #[serde(default)]
    pub path: Option<String>,
}

/// Kinds of leaked descriptors.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FdKind {
    /// A file opened for writing.
    Write,
    /// A file opened for reading.
    Read,
    /// A directory (`O_DIRECTORY`).
    Dir,
    /// An `O_PATH` descriptor.
    OPath,
    /// A TCP socket connected to the world's listener.
    TcpSocket,
}

/// How the effect is verified from outside the sandbox. The vector escaped if any check sees
/// its effect.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// The file still exists with its original content.
    FileUnchanged(String),
    /// The file's content never differs from its content at launch while the command runs
    /// (sampled from outside every 10 ms): what a host process reading it meanwhile would see.
    LiveFileUnchanged(String),
    /// The path does not exist.
    FileAbsent(String),
    /// Mode, owner, mtime and extended attributes are unchanged.
    MetadataUnchanged(String),
    /// The file is absent or no one may execute it (no execute bit): a hook git would skip.
    NotExecutable(String),
    /// The file is absent or has no other hard link (through another name it could be changed
    /// where no review looks).
    NoOtherLinks(String),
    /// No file below the directory has the setuid or setgid bit.
    NoSetidFile(String),
    /// A named secret of the world does not appear in the command's stdout or stderr.
    SecretNotInOutput(String),
    /// The TCP listener on 127.0.0.1 saw no connection and no data.
    TcpSilent,
    /// The UDP listener on 127.0.0.1 received nothing.
    UdpSilent,
    /// The pathname unix stream listeners (docker.sock, D-Bus, systemd) saw nothing.
    UnixSilent,
    /// The pathname unix datagram socket received nothing.
    DgramSilent,
    /// The abstract unix listeners (stream and datagram) saw nothing.
    AbstractSilent,
    /// No host process reached a listener on the world's squatted abstract name
    /// (`{squat_name}`: a host client tries to connect to it all through the run).
    SquatUnreached,
    /// No host client reached a listener the command made, through the host's non-loopback
    /// address `{host_ip}:{free_port}` (a host client tries all through the run).
    InboundUnreached,
    /// The victim (an unsandboxed ancestor of the command) was not signalled, stopped, killed
    /// or written to.
    VictimUntouched,
    /// No process carrying the world's token is left once the run returned.
    NoSurvivor,
    /// Never more than this many processes carrying the token at once (sampled from outside).
    MaxProcesses(u32),
    /// No token process ever held more than this many descriptors (sampled from outside).
    MaxFds(u32),
    /// No token process ever ran in a user or mount namespace other than its parent's, and no
    /// mount carrying the token was ever seen (sampled from outside).
    NoNewNamespace,
    /// The file is at most this many bytes (or absent).
    FileSizeAtMost {
        /// Path (placeholders allowed).
        path: String,
        /// Size bound.
        bytes: u64,
    },
    /// The file, if it exists, does not contain this text (a key planted in a config file that
    /// the run may create or keep).
    FileLacks {
        /// Path (placeholders allowed).
        path: String,
        /// The text.
        text: String,
    },
    /// The command's captured stdout is at most this many bytes.
    OutputAtMost(u64),
    /// Nothing was injected into the input queue of the world's pseudo-terminal.
    TtyInputEmpty,
    /// No loop device numbered `{loop_nr}` (unique per world) appeared on the host (one that
    /// did is removed again).
    LoopDeviceAbsent,
    /// Nothing was written to the world's pseudo-terminal (a terminal of the user's, outside
    /// the sandbox): its master side reads nothing.
    TtyOutputEmpty,
    /// What reached the world's pseudo-terminal (the user's screen, in a `terminal` vector)
    /// never holds this text: a sequence a terminal acts on beyond drawing (it answers as typed
    /// input, writes the clipboard, changes its title).
    TtyOutputLacks(String),
    /// The world's SysV shared memory, message queue and semaphore are unchanged.
    SysvUnchanged,
    /// The file under /proc/sys is unchanged (restored after the bare run).
    SysctlUnchanged(String),
    /// The host name is unchanged (restored after the bare run).
    HostnameUnchanged,
    /// No address carrying the token's number was added to `lo` (removed after the bare run).
    LoAddressAbsent,
    /// The console's kernel-message redirect is unchanged (restored after the bare run).
    KmsgRedirectUnchanged,
    /// No core file appeared in the directory.
    NoCoreFile(String),
    /// The host's shared memory (`Shmem` in /proc/meminfo: tmpfs and shm pages) never grew by
    /// more than this many bytes during the run (sampled from outside).
    ShmemGrowthAtMost(u64),
    /// The probe processes never held more than this many bytes of resident memory together
    /// (sampled from outside).
    MaxRssBytes(u64),
}

impl Check {
    /// Whether this check needs the process monitor (sampling /proc during the run).
    #[must_use]
    pub fn needs_monitor(&self) -> bool {
        matches!(self, Check::MaxProcesses(_) | Check::MaxFds(_) | Check::NoNewNamespace | Check::ShmemGrowthAtMost(_) | Check::MaxRssBytes(_) | Check::LiveFileUnchanged(_))
    }

    /// Strings in this check that may contain placeholders.
    fn strings(&self) -> Vec<&str> {
        match self {
            Check::FileUnchanged(s)
            | Check::LiveFileUnchanged(s)
            | Check::FileAbsent(s)
            | Check::MetadataUnchanged(s)
            | Check::NotExecutable(s)
            | Check::NoOtherLinks(s)
            | Check::NoSetidFile(s)
            | Check::SysctlUnchanged(s)
            | Check::NoCoreFile(s) => vec![s.as_str()],
            Check::FileSizeAtMost { path, .. } | Check::FileLacks { path, .. } => vec![path.as_str()],
            _ => Vec::new(),
        }
    }
}

/// The line a probe prints once the process it means to leave behind exists, detached as the
/// vector says (its own session, or a background job of a shell that has not exited). A vector
/// that checks [`Check::NoSurvivor`] is judged only on runs that printed it: without it, a run
/// whose timeout or exit came before the survivor was made would pass as "blocked" with nothing
/// tried (the sandbox's start can eat most of a 1-second timeout in a slow guest, while the bare
/// run, started at once, still escapes). Builtin `survivor` probes print it themselves; a shell
/// probe prints it after waiting for its survivor (see the process-lifetime family).
pub const DETACHED: &str = "LGPROBE-DETACHED";

/// Secret names usable in [`Check::SecretNotInOutput`].
pub const SECRET_NAMES: &[&str] = &[
    "ssh", "aws", "gnupg", "docker", "netrc", "git_credentials", "kube", "gh", "npmrc", "pypirc", "cargo",
    "outside", "env", "victim", "shm", "msg", "key", "host_tmp", "host_shm", "stat_ssh", "argv", "home_activity", "etc", "gitconfig", "cargo_config", "pip_conf",
    "group", "late",
];

/// One escape vector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    /// Unique kebab-case name.
    pub name: String,
    /// What it attempts, in one sentence.
    pub attempts: String,
    /// Where it comes from: CVE, advisory, issue or paper.
    pub source: String,
    /// Protection ids (as in `sandbox status`) that must be enforced for it to be blocked.
    pub protections: Vec<String>,
    /// Preconditions; unmet → skipped with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<Require>,
    /// Programs the shell probe cannot escape without (looked up on the runs' `PATH`); one that
    /// is not installed → skipped with the reason (a bare run that cannot start proves nothing).
    /// Only what the escape needs: a probe that also tries a tool after a plain `cat` does not
    /// list it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The attempt.
    pub probe: Probe,
    /// Expected verdict in the sandbox.
    pub expect: Expect,
    /// Outside checks (at least one).
    pub check: Vec<Check>,
    /// Sandbox `--timeout` (and the bare run's naive timeout) in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Extra environment of the run (placeholders allowed in values).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Descriptors leaked into the command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fds: Vec<InheritFd>,
    /// The workspace it runs in.
    #[serde(default, skip_serializing_if = "is_default_world")]
    pub world: WorldKind,
    /// The `[sandbox]` configuration of the sandboxed runs (TOML, written to the world's
    /// `$XDG_CONFIG_HOME/localgpt/config.toml`), e.g. smaller limits so that a bound is reached
    /// quickly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// A shell command run bare in the world before each run, bare and sandboxed (placeholders
    /// allowed; the run's `HOME`, `XDG_CONFIG_HOME` and `PATH`; cwd the workspace): places what
    /// the world does not have, e.g. a file the `config` denies. It must succeed. What it makes
    /// in the host's `/tmp` or `/dev/shm` is named `{token}…`: the world removes such entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// A host action while the command runs: what a user or a host process does meanwhile
    /// (writes a credential the command then tries to read, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<During>,
    /// An earlier command of the same agent session, run in the world before the probe's run
    /// and in the same way: bare before the bare run, sandboxed before a sandboxed one (same
    /// level, workspace and configuration). What it leaves is what the probe's run starts from
    /// (a directory it filled, so that the next run's launch walk stops there). Placeholders
    /// allowed; it must succeed. Both runs together are the attempt: the checks see the effects
    /// of either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_run: Option<String>,
    /// What the user does next on the host, once the run returned (`git status` in the
    /// workspace): run bare as `setup` is, after the run's leftovers were killed and before the
    /// checks look (placeholders allowed); it must succeed. A check then sees what the user's own
    /// command ran outside the sandbox because of what the run left (a planted `core.fsmonitor`
    /// touching a file under `{outside}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afterwards: Option<String>,
    /// Protections the `config` switches off on purpose (`network = "full"` opens `network`):
    /// the run may report exactly these not enforced beyond the machine's pinned gaps. Never
    /// one the vector depends on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_opens: Vec<String>,
    /// Run the command under the victim process (an unsandboxed ancestor the probe attacks).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub victim: bool,
    /// Run as on the user's terminal: the standard streams of the run (of `sandbox run`, with
    /// `--stdin inherit` and without `--json`, so that the command gets a terminal of its own
    /// that the runner relays through its screen filter; of the command itself, bare) are the
    /// world's pseudo-terminal, whose other side the harness reads as the user's screen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
    /// Family (filled in from the file).
    #[serde(default, skip_deserializing)]
    pub family: String,
}

impl Vector {
    /// Whether any check needs the process monitor.
    #[must_use]
    pub fn needs_monitor(&self) -> bool {
        self.check.iter().any(Check::needs_monitor)
    }
}

fn is_default_world(w: &WorldKind) -> bool {
    *w == WorldKind::GitRepo
}

/// One YAML file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FamilyFile {
    family: String,
    title: String,
    vectors: Vec<serde_json::Value>,
}

/// A loaded, validated corpus.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Corpus {
    /// Family titles, by family.
    pub families: BTreeMap<String, String>,
    /// Every vector, in file order.
    pub vectors: Vec<Vector>,
}

fn placeholders_in(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) if after[..j].chars().all(|c| c.is_ascii_lowercase() || c == '_') && j > 0 => {
                out.push(after[..j].to_string());
                rest = &after[j + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

impl Corpus {
    /// Parses and validates several YAML files given as `(file name, text)`.
    ///
    /// # Errors
    /// The first schema or rule violation, naming the file and the vector.
    pub fn from_sources<'a>(sources: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Corpus, CorpusError> {
        let mut corpus = Corpus::default();
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        for (file, text) in sources {
            let value: serde_json::Value = serde_yaml_ng::from_str(text)
                .map_err(|e| CorpusError::Parse { file: file.into(), message: e.to_string() })?;
            let ff: FamilyFile = serde_json::from_value(value)
                .map_err(|e| CorpusError::Parse { file: file.into(), message: e.to_string() })?;
            let invalid = |vector: &str, message: String| CorpusError::Invalid { file: file.into(), vector: vector.into(), message };
            if !FAMILIES.contains(&ff.family.as_str()) {
                return Err(invalid("-", format!("unknown family `{}` (known: {})", ff.family, FAMILIES.join(", "))));
            }
            if corpus.families.insert(ff.family.clone(), ff.title.clone()).is_some() {
                return Err(invalid("-", format!("family `{}` appears in two files", ff.family)));
            }
            for (i, raw) in ff.vectors.into_iter().enumerate() {
                let label = raw.get("name").and_then(|n| n.as_str()).map_or_else(|| format!("#{}", i + 1), str::to_string);
                let mut v: Vector = serde_json::from_value(raw).map_err(|e| invalid(&label, e.to_string()))?;
                v.family = ff.family.clone();
                validate_vector(&v).map_err(|m| invalid(&v.name, m))?;
                if let Some(other) = names.insert(v.name.clone(), file.to_string()) {
                    return Err(invalid(&v.name, format!("duplicate name (also in {other})")));
                }
                corpus.vectors.push(v);
            }
        }
        Ok(corpus)
    }

    /// Loads every `*.yaml` file of a directory (sorted by name).
    ///
    /// # Errors
    /// I/O errors and everything [`Corpus::from_sources`] rejects.
    pub fn load_dir(dir: &Path) -> Result<Corpus, CorpusError> {
        let io = |e: std::io::Error| CorpusError::Io { path: dir.display().to_string(), message: e.to_string() };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        let mut texts = Vec::new();
        for f in &files {
            let t = std::fs::read_to_string(f).map_err(|e| CorpusError::Io { path: f.display().to_string(), message: e.to_string() })?;
            texts.push((f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), t));
        }
        Corpus::from_sources(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())))
    }

    /// Checks that every builtin probe the corpus names exists.
    ///
    /// # Errors
    /// The first vector naming an unknown probe.
    pub fn validate_probes(&self, known: &[&str]) -> Result<(), CorpusError> {
        for v in &self.vectors {
            if let Some(b) = &v.probe.builtin {
                if !known.contains(&b.as_str()) {
                    return Err(CorpusError::Invalid {
                        file: format!("{}.yaml", v.family),
                        vector: v.name.clone(),
                        message: format!("unknown builtin probe `{b}`"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Number of vectors per family.
    #[must_use]
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for v in &self.vectors {
            *m.entry(v.family.clone()).or_insert(0) += 1;
        }
        m
    }
}

fn validate_vector(v: &Vector) -> Result<(), String> {
    if !is_kebab(&v.name) {
        return Err("name must be kebab-case (a-z, 0-9, single dashes)".into());
    }
    if v.attempts.trim().len() < 8 {
        return Err("`attempts` must say what the vector attempts".into());
    }
    if v.source.trim().len() < 6 {
        return Err("`source` must name a CVE, advisory, issue or paper".into());
    }
    if v.protections.is_empty() {
        return Err("`protections` must name at least one protection id".into());
    }
    if let Some(p) = v.config_opens.iter().find(|p| v.protections.contains(p)) {
        return Err(format!("`config_opens` lists {p}, which the vector depends on: it could never be blocked"));
    }
    if !v.config_opens.is_empty() && v.config.is_none() {
        return Err("`config_opens` without a `config` that opens anything".into());
    }
    let mut seen = BTreeSet::new();
    for p in &v.protections {
        if localgpt_sandbox::plan::ProtectionId::parse(p).is_none() {
            return Err(format!("unknown protection id `{p}`"));
        }
        if !seen.insert(p) {
            return Err(format!("protection `{p}` listed twice"));
        }
    }
    match (&v.probe.builtin, &v.probe.shell) {
        (Some(b), None) if is_kebab(b.trim_start_matches('_')) => {}
        (Some(_), None) => return Err("builtin probe names are kebab-case".into()),
        (None, Some(s)) if !s.trim().is_empty() => {
            if !v.probe.args.is_empty() {
                return Err("`args` only go with `builtin`".into());
            }
        }
        _ => return Err("`probe` needs exactly one of `builtin` or `shell`".into()),
    }
    if v.check.is_empty() {
        return Err("`check` needs at least one outside check".into());
    }
    if v.check.contains(&Check::NoSurvivor) && v.probe.builtin.as_deref() != Some("survivor") && !v.probe.shell.as_deref().is_some_and(|s| s.contains(DETACHED)) {
        return Err(format!("`no_survivor` needs a probe that proves its survivor was made: the builtin `survivor`, or a shell probe that prints {DETACHED} once it exists"));
    }
    if v.requires.contains(&Require::Root) && v.requires.contains(&Require::NonRoot) {
        return Err("requires both root and non_root".into());
    }
    if v.timeout == Some(0) {
        return Err("timeout must be at least 1 second".into());
    }
    if let Some(t) = v.tools.iter().find(|t| t.is_empty() || t.contains(['/', ' '])) {
        return Err(format!("tool `{t}` must be a program name (looked up on PATH)"));
    }
    if !v.tools.is_empty() && v.probe.shell.is_none() {
        return Err("`tools` is for shell probes (a builtin probe needs only this binary)".into());
    }
    let mut strings: Vec<&str> = Vec::new();
    strings.extend(v.probe.builtin.iter().map(String::as_str));
    strings.extend(v.probe.args.iter().map(String::as_str));
    strings.extend(v.probe.shell.iter().map(String::as_str));
    strings.extend(v.env.values().map(String::as_str));
    strings.extend(v.fds.iter().filter_map(|f| f.path.as_deref()));
    strings.extend(v.setup.iter().map(String::as_str));
    strings.extend(v.earlier_run.iter().map(String::as_str));
    strings.extend(v.afterwards.iter().map(String::as_str));
    if let Some(d) = &v.during {
        if d.when.trim().is_empty() || d.shell.trim().is_empty() {
            return Err("`during` needs a `when` path and a `shell` action".into());
        }
        strings.extend([d.when.as_str(), d.shell.as_str()]);
        strings.extend(d.writes.iter().map(String::as_str));
    }
    strings.extend(v.config.iter().map(String::as_str));
    for c in &v.check {
        strings.extend(c.strings());
        if let Check::SecretNotInOutput(s) = c {
            if !SECRET_NAMES.contains(&s.as_str()) {
                return Err(format!("unknown secret `{s}` (known: {})", SECRET_NAMES.join(", ")));
            }
        }
    }
    for s in strings {
        for p in placeholders_in(s) {
            if !PLACEHOLDERS.contains(&p.as_str()) {
                return Err(format!("unknown placeholder `{{{p}}}`"));
            }
        }
    }
    let mut fds = BTreeSet::new();
    for f in &v.fds {
        if f.fd < 4 || f.fd > 64 {
            return Err(format!("inherited fd {} must be between 4 and 64", f.fd));
        }
        if !fds.insert(f.fd) {
            return Err(format!("fd {} listed twice", f.fd));
        }
        if f.kind != FdKind::TcpSocket && f.path.is_none() {
            return Err(format!("fd {} needs a path", f.fd));
        }
    }
    for k in v.env.keys() {
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            return Err(format!("environment name `{k}` must be UPPER_SNAKE"));
        }
    }
    Ok(())
}

/// The escape corpus as shipped in this binary: `(file name, YAML text)`.
#[must_use]
pub fn embedded() -> Vec<(&'static str, &'static str)> {
    vec![
        ("filesystem.yaml", include_str!("../../escapes/filesystem.yaml")),
        ("network.yaml", include_str!("../../escapes/network.yaml")),
        ("ipc-signals.yaml", include_str!("../../escapes/ipc-signals.yaml")),
        ("privilege.yaml", include_str!("../../escapes/privilege.yaml")),
        ("terminal.yaml", include_str!("../../escapes/terminal.yaml")),
        ("persistence.yaml", include_str!("../../escapes/persistence.yaml")),
        ("process-lifetime.yaml", include_str!("../../escapes/process-lifetime.yaml")),
        ("resources.yaml", include_str!("../../escapes/resources.yaml")),
    ]
}

/// Loads and validates the embedded escape corpus.
///
/// # Errors
/// Only if the shipped data is invalid (the unit tests make sure it is not).
pub fn load_embedded() -> Result<Corpus, CorpusError> {
    Corpus::from_sources(embedded())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
family: filesystem
title: Filesystem
vectors:
  - name: write-outside
    attempts: overwrite a file outside the workspace
    source: "spec 2.1 threat 1"
    protections: [fs-write-outside]
    probe: {builtin: write-file, args: ["{canary}", "x"]}
    expect: blocked
    check:
      - file_unchanged: "{canary}"
      - tcp_silent
      - file_size_at_most: {path: "{ws}/big", bytes: 10}
"#;

    fn one(text: &str) -> Result<Corpus, CorpusError> {
        Corpus::from_sources([("t.yaml", text)])
    }

    fn err(text: &str) -> String {
        one(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_a_good_file() {
        let c = one(GOOD).unwrap();
        assert_eq!(c.vectors.len(), 1);
        let v = &c.vectors[0];
        assert_eq!(v.family, "filesystem");
        assert_eq!(v.check[0], Check::FileUnchanged("{canary}".into()));
        assert_eq!(v.check[1], Check::TcpSilent);
        assert!(!v.needs_monitor());
    }

    #[test]
    fn rejects_unknown_fields_everywhere() {
        assert!(err(&GOOD.replace("expect: blocked", "expect: blocked\n    colour: red")).contains("unknown field `colour`"));
        assert!(err(&GOOD.replace("title: Filesystem", "title: Filesystem\nextra: 1")).contains("unknown field `extra`"));
        assert!(err(&GOOD.replace("args: [", "argz: [")).contains("unknown field `argz`"));
        assert!(err(&GOOD.replace("- tcp_silent", "- tcp_quiet")).contains("unknown variant `tcp_quiet`"));
        assert!(err(&GOOD.replace("bytes: 10", "bytes: 10, extra: 1")).contains("unknown field `extra`"));
    }

    #[test]
    fn requires_a_source() {
        assert!(err(&GOOD.replace("    source: \"spec 2.1 threat 1\"\n", "")).contains("missing field `source`"));
        assert!(err(&GOOD.replace("\"spec 2.1 threat 1\"", "\"\"")).contains("source"));
    }

    #[test]
    fn a_survivor_check_needs_a_probe_that_proves_its_survivor_was_made() {
        let survivor = GOOD.replace("      - tcp_silent\n", "      - no_survivor\n");
        assert!(err(&survivor).contains("no_survivor"), "{}", err(&survivor));
        let shell = |cmd: &str| survivor.replace(r#"{builtin: write-file, args: ["{canary}", "x"]}"#, &format!("{{shell: \"{cmd}\"}}"));
        assert!(err(&shell("(setsid sleep 300 &)")).contains("no_survivor"));
        one(&shell(&format!("(setsid sleep 300 &); echo {DETACHED}"))).unwrap();
        one(&survivor.replace(r#"{builtin: write-file, args: ["{canary}", "x"]}"#, r#"{builtin: survivor, args: ["{token}", "setsid-exit"]}"#)).unwrap();
    }

    #[test]
    fn rejects_duplicate_names_across_files() {
        let other = GOOD.replace("family: filesystem", "family: network");
        let e = Corpus::from_sources([("a.yaml", GOOD), ("b.yaml", other.as_str())]).unwrap_err().to_string();
        assert!(e.contains("duplicate name"), "{e}");
    }

    #[test]
    fn rejects_bad_values() {
        assert!(err(&GOOD.replace("[fs-write-outside]", "[fs-write-elsewhere]")).contains("unknown protection"));
        assert!(err(&GOOD.replace("[fs-write-outside]", "[]")).contains("protections"));
        assert!(err(&GOOD.replace("{canary}\", \"x\"", "{kanary}\", \"x\"")).contains("unknown placeholder"));
        assert!(err(&GOOD.replace("name: write-outside", "name: Write_Outside")).contains("kebab"));
        assert!(err(&GOOD.replace("expect: blocked", "expect: escaped")).contains("unknown variant"));
        assert!(err(&GOOD.replace("family: filesystem", "family: weather")).contains("unknown family"));
        let both = GOOD.replace("probe: {builtin: write-file, args: [\"{canary}\", \"x\"]}", "probe: {builtin: a, shell: b}");
        assert!(err(&both).contains("exactly one"));
        let no_check = GOOD.split("    check:").next().unwrap().to_string() + "    check: []\n";
        assert!(err(&no_check).contains("at least one"));
        let tools = GOOD.replace("    probe:", "    tools: [/usr/bin/python3]\n    probe:");
        assert!(err(&tools).contains("program name"));
        let tools = GOOD.replace("    probe:", "    tools: [python3]\n    probe:");
        assert!(err(&tools).contains("shell probes"));
        let setup = GOOD.replace("    probe:", "    setup: \"cp {kanary} {ws}/x\"\n    probe:");
        assert!(err(&setup).contains("unknown placeholder"));
        assert!(err(&GOOD.replace("    probe:", "    afterwards: \"cat {kanary}\"\n    probe:")).contains("unknown placeholder"));
        assert!(one(&GOOD.replace("    probe:", "    afterwards: \"git -C {ws} status\"\n    probe:")).is_ok());
        assert!(err(&GOOD.replace("    probe:", "    earlier_run: \"cat {kanary}\"\n    probe:")).contains("unknown placeholder"));
        assert!(one(&GOOD.replace("    probe:", "    earlier_run: \"mkdir {ws}/a\"\n    probe:")).is_ok());
        let during = |when: &str, shell: &str| GOOD.replace("    probe:", &format!("    during: {{when: \"{when}\", shell: \"{shell}\"}}\n    probe:"));
        assert!(one(&during("{ws}/ready", "echo {late_secret} > {ws}/x")).is_ok());
        assert!(err(&during("{ws}/ready", "echo {kanary} > {ws}/x")).contains("unknown placeholder"));
        assert!(err(&during("{wz}/ready", "true")).contains("unknown placeholder"));
        assert!(err(&GOOD.replace("    probe:", "    during: {when: x, shell: y, writes: [\"{kanary}\"]}\n    probe:")).contains("unknown placeholder"));
        assert!(err(&during(" ", "true")).contains("`during` needs"));
        assert!(err(&GOOD.replace("    probe:", "    during: {when: x, shell: y, after: 1}\n    probe:")).contains("unknown field `after`"));
    }

    #[test]
    fn validates_probe_names() {
        let c = one(GOOD).unwrap();
        assert!(c.validate_probes(&["write-file"]).is_ok());
        assert!(c.validate_probes(&["read-file"]).unwrap_err().to_string().contains("unknown builtin probe"));
    }

    #[test]
    fn placeholder_scanner() {
        assert_eq!(placeholders_in("a {ws}/b {tcp_port} {} {X} {"), vec!["ws", "tcp_port"]);
    }

    #[test]
    fn embedded_corpus_is_valid_and_large_enough() {
        let c = load_embedded().unwrap();
        assert!(c.vectors.len() >= 60, "only {} vectors", c.vectors.len());
        for f in FAMILIES {
            assert!(c.counts().get(*f).copied().unwrap_or(0) >= 2, "family {f} has fewer than 2 vectors");
        }
        let protections: BTreeSet<&str> = c.vectors.iter().flat_map(|v| v.protections.iter().map(String::as_str)).collect();
        for must in ["network", "fs-write-outside", "fs-read-credentials", "ptrace", "syscall-abi", "io-uring", "tty-injection"] {
            assert!(protections.contains(must), "no vector depends on {must}");
        }
    }

    #[test]
    fn embedded_files_match_the_directory() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../escapes");
        let mut from_dir = Corpus::load_dir(&dir).unwrap().vectors;
        let mut emb = load_embedded().unwrap().vectors;
        from_dir.sort_by(|a, b| a.name.cmp(&b.name));
        emb.sort_by(|a, b| a.name.cmp(&b.name));
        assert!(from_dir == emb, "a file in escapes/ is not embedded (add it to embedded())");
    }
}
