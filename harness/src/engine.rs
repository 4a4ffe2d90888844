//! Runs one vector at one level: a fresh world, the bare run (which must escape, else the probe
//! is invalid), a fresh world again, the sandboxed run through the real binary, and the checks
//! from outside. The verdict takes the level's protection table into account: a vector whose
//! protection is not enforced at that level is "not preventable", never "blocked".

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use localgpt_corpus::{Check, FdKind, Require, Vector};
use serde::{Deserialize, Serialize};

use crate::probes::{self, STARTED};
use crate::world::{snapshot, world_base, World};

/// Hard bound on any single process the harness runs (a hung run is an error, never a pass).
const RUN_DEADLINE: Duration = Duration::from_secs(90);
/// The sandbox `--timeout` when the vector sets none.
const DEFAULT_TIMEOUT: u64 = 20;

pub use crate::report::CaseResult;

/// Machine facts that decide preconditions.
#[derive(Clone, Debug, Serialize)]
pub struct Facts {
    /// Running as root.
    pub root: bool,
    /// uid.
    pub uid: u32,
    /// User label.
    pub user: String,
    /// Unmet preconditions and why.
    pub unmet: BTreeMap<String, String>,
}

fn require_key(r: Require) -> String {
    serde_json::to_value(r).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn fork_check(f: impl FnOnce() -> bool) -> bool {
    // SAFETY: the child only runs `f` and `_exit`s; used for probes that may crash.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::_exit(i32::from(!f()));
        }
        if pid < 0 {
            return false;
        }
        let mut st = 0;
        libc::waitpid(pid, &mut st, 0);
        libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0
    }
}

/// Whether the running kernel's release is at least `major.minor`.
#[cfg(target_os = "linux")]
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
}

/// The preconditions only Linux has, checked for real.
#[cfg(target_os = "linux")]
fn linux_facts(root: bool, no: &mut impl FnMut(Require, &str)) {
        // SAFETY: unshare in a throw-away child. Root too: user.max_user_namespaces = 0 stops
        // everyone.
        if !fork_check(|| unsafe { libc::unshare(libc::CLONE_NEWUSER) == 0 }) {
            let why = if root { "user namespaces cannot be created here, even by root (user.max_user_namespaces = 0?)" } else { "unprivileged user namespaces are disabled on this machine" };
            no(Require::UserNamespaces, why);
        }
        let mut p = [0u32; 30];
        // SAFETY: io_uring_setup with a zeroed params buffer; the fd is closed.
        let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, p.as_mut_ptr()) };
        if fd < 0 {
            no(Require::IoUring, &format!("io_uring_setup fails here ({}): kernel.io_uring_disabled or a seccomp filter", std::io::Error::last_os_error()));
        } else {
            // SAFETY: closing the fd we got.
            unsafe { libc::close(fd as i32) };
        }
        if fd < 0 || !kernel_at_least(5, 19) {
            no(Require::IoUringSocket, "io_uring has no IORING_OP_SOCKET before Linux 5.19 (or no io_uring here)");
        }
        let available = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().find_map(|l| l.strip_prefix("MemAvailable:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())))
            .unwrap_or(0);
        if available < 2 << 20 {
            no(Require::SpareMemory, &format!("only {} MiB of memory available (MemAvailable): the bare run would push this machine into its OOM killer", available >> 10));
        }
        // SAFETY: x32 getpid in a child.
        if !cfg!(target_arch = "x86_64") || !fork_check(|| unsafe { libc::syscall(0x4000_0000 | libc::SYS_getpid) } > 0) {
            no(Require::X32Abi, "the kernel has no x32 ABI (CONFIG_X86_X32_ABI is off): x32 syscalls fail bare too");
        }
        // SAFETY: i386 getpid through int 0x80 in a child (may fault when ia32 is disabled).
        #[cfg(target_arch = "x86_64")]
        if !fork_check(|| unsafe { crate::probes::int80_getpid() } > 0) {
            no(Require::Ia32Abi, "the kernel does not run i386 syscalls (IA32 emulation off)");
        }
        #[cfg(not(target_arch = "x86_64"))]
        no(Require::Ia32Abi, &format!("i386 system calls exist only on x86_64 ({} here)", std::env::consts::ARCH));
        let legacy = fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").map(|s| s.trim() == "1").unwrap_or(false);
        if !root && !legacy {
            no(Require::Tiocsti, "dev.tty.legacy_tiocsti = 0: the kernel refuses TIOCSTI to unprivileged users even bare");
        }
        let other_if = fs::read_dir("/sys/class/net").map(|d| d.flatten().any(|e| e.file_name() != "lo")).unwrap_or(false);
        if !other_if {
            no(Require::HostInterface, "the host's network namespace has no interface besides lo");
        }
        if crate::world::host_ipv4().is_none() {
            no(Require::HostAddress, "the host has no IPv4 address outside 127.0.0.0/8");
        }
        if !Path::new("/dev/tty0").exists() {
            no(Require::VtConsole, "no virtual console (/dev/tty0)");
        }
        if !Path::new("/dev/loop-control").exists() {
            no(Require::LoopControl, "no /dev/loop-control (the loop driver is not loaded)");
        }
        if crate::world::group_secret().is_none() {
            no(Require::GroupSecret, "no file under /etc that this user reads only through one of its groups (ci/lgtest-user gives the CI user one)");
        }
        let pattern = fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
        let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: valid pointer.
        unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut rl) };
        if pattern.starts_with('|') || pattern.trim().is_empty() || pattern.contains('/') {
            no(Require::CorePatternPlain, &format!("kernel.core_pattern is {:?}: core files do not land in the working directory", pattern.trim()));
        } else if rl.rlim_max == 0 {
            no(Require::CorePatternPlain, "the hard RLIMIT_CORE of this process is 0: no core files even bare");
        }
        // SAFETY: add_key test; the key is invalidated at once.
        let id = unsafe { libc::syscall(libc::SYS_add_key, c"user".as_ptr(), c"lg-facts-probe".as_ptr(), c"x".as_ptr(), 1usize, -4i64) };
        if id < 0 {
            no(Require::Keyring, &format!("add_key fails here ({})", std::io::Error::last_os_error()));
        } else {
            // SAFETY: invalidating our own key.
            unsafe { libc::syscall(libc::SYS_keyctl, 21, id) };
        }
}

impl Facts {
    /// Detects the facts of this machine for the current user.
    #[must_use]
    pub fn detect() -> Facts {
        // SAFETY: trivial getters.
        let uid = unsafe { libc::geteuid() };
        let root = uid == 0;
        let user = if root {
            "root".to_string()
        } else {
            std::env::var("USER").ok().filter(|u| !u.is_empty() && u != "root").unwrap_or_else(|| format!("uid{uid}"))
        };
        let mut unmet = BTreeMap::new();
        let mut no = |r: Require, why: &str| {
            unmet.insert(require_key(r), why.to_string());
        };
        if !root {
            no(Require::Root, "needs root (the suite runs unprivileged)");
        } else {
            no(Require::NonRoot, "needs an unprivileged user (the suite runs as root)");
        }
        #[cfg(target_os = "linux")]
        linux_facts(root, &mut no);
        #[cfg(not(target_os = "linux"))]
        for (r, what) in [
            (Require::UserNamespaces, "user namespaces"),
            (Require::IoUring, "io_uring"),
            (Require::IoUringSocket, "io_uring"),
            (Require::SpareMemory, "the memory probe's OOM check"),
            (Require::X32Abi, "the x32 ABI"),
            (Require::Ia32Abi, "i386 system calls"),
            (Require::Tiocsti, "the TIOCSTI probe"),
            (Require::VtConsole, "virtual consoles"),
            (Require::LoopControl, "loop devices"),
            (Require::GroupSecret, "the /etc secrets of a Linux system"),
            (Require::Keyring, "the kernel keyring"),
            (Require::SysvIpc, "the SysV message queues the world uses"),
            (Require::CorePatternPlain, "kernel.core_pattern"),
            (Require::HostInterface, "/sys/class/net"),
            (Require::HostAddress, "the host's addresses (getifaddrs)"),
        ] {
            no(r, &format!("{what}: Linux only ({} here)", std::env::consts::OS));
        }
        let base = world_base();
        let probe = base.join(format!("lg-xattr-{}", crate::world::new_token()));
        let xattr_ok = fs::write(&probe, "x").is_ok() && {
            let cp = std::ffi::CString::new(probe.as_os_str().as_encoded_bytes()).unwrap_or_default();
            // SAFETY: valid strings.
            #[cfg(target_os = "linux")]
            let ok = unsafe { libc::setxattr(cp.as_ptr(), c"user.lg".as_ptr(), c"1".as_ptr().cast(), 1, 0) == 0 };
            // The world's xattr checks are Linux's (`user.*` names).
            #[cfg(not(target_os = "linux"))]
            let ok = {
                let _ = cp;
                false
            };
            ok
        };
        let _ = fs::remove_file(&probe);
        if !xattr_ok {
            no(Require::UserXattr, &format!("{} does not support user.* extended attributes", base.display()));
        }
        // SAFETY: create and remove a SysV segment.
        let shm = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
        if shm < 0 {
            no(Require::SysvIpc, "SysV IPC is not available");
        } else {
            // SAFETY: removing what we created.
            unsafe { libc::shmctl(shm, libc::IPC_RMID, std::ptr::null_mut()) };
        }
        if !(root && Path::new("/etc/cron.d").is_dir()) {
            no(Require::CronD, "needs root and /etc/cron.d");
        }
        if ip_command().is_none() {
            no(Require::IpCommand, "the ip command (iproute2) is not installed");
        }
        Facts { root, uid, user, unmet }
    }

    /// The first unmet precondition of `v`, with the reason; a tool the vector declares that is
    /// not installed is one too (its bare run could not start, which proves nothing).
    #[must_use]
    pub fn unmet_for(&self, v: &Vector) -> Option<String> {
        v.requires
            .iter()
            .find_map(|r| self.unmet.get(&require_key(*r)).map(|why| format!("{}: {why}", require_key(*r))))
            .or_else(|| v.tools.iter().find(|t| !installed(t)).map(|t| format!("{t} is not installed (on {RUN_PATH})")))
    }
}

fn ip_command() -> Option<PathBuf> {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].iter().map(PathBuf::from).find(|p| p.exists())
}

/// Whether `tool` is on [`RUN_PATH`].
#[must_use]
pub fn installed(tool: &str) -> bool {
    RUN_PATH.split(':').any(|d| Path::new(d).join(tool).exists())
}

/// The CLI's variable that selects how the helper starts (`localgpt_sandbox::run::HELPER_START_ENV`;
/// the harness does not depend on the sandbox crate).
pub const HELPER_START_ENV: &str = "LOCALGPT_SANDBOX_HELPER_START";

/// PATH for runs: standard system directories only.
pub const RUN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One protection row of a level.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProtectionRow {
    /// enforced / degraded / off.
    pub state: String,
    /// Detail.
    pub detail: String,
}

/// A level this machine reaches, with its protection table from `sandbox explain`.
#[derive(Clone, Debug, Serialize)]
pub struct LevelInfo {
    /// Level name.
    pub name: String,
    /// id → row.
    pub protections: BTreeMap<String, ProtectionRow>,
    /// Set when `explain` for this level disagrees with `status` (every case at this level is
    /// then an error).
    pub inconsistency: Option<String>,
    /// The protections pinned as not enforced here, for this kernel, user and level
    /// (`ci/kernel-matrix.d/expectations.json`), and the configuration they come from; `None`
    /// when no configuration has this machine's Landlock ABI.
    pub pinned: Option<(String, std::collections::BTreeSet<String>)>,
}

/// The expectations the kernel matrix checks, compiled in (the suite binary also runs copied
/// elsewhere, as the unprivileged user).
const EXPECTATIONS: &str = include_str!("../../ci/kernel-matrix.d/expectations.json");

/// How the kernel matrix reads those expectations: the same source file.
#[path = "../../matrix/src/gaps.rs"]
mod gaps;

/// Names the configuration of `ci/kernel-matrix.d/expectations.json` whose pins apply (set by the
/// kernel matrix's guest suite); unset, the configuration is chosen by the Landlock ABI.
pub const EXPECT_CONFIG_ENV: &str = "LOCALGPT_EXPECT_CONFIG";

/// The protections pinned as not enforced for a machine with Landlock ABI `abi`, for `user`
/// (`root` or any unprivileged one) at `level` (`minimal+mounts` for Minimal with namespaces),
/// with `cgroup`/`memory_cgroup` as `status` reports them: the configuration named by
/// [`EXPECT_CONFIG_ENV`] (an unknown name fails the suite), else the one named `host` when its
/// ABI matches, else the first with this ABI; plus the `world_gaps` a workspace or home can cause
/// (the corpus's worlds have them), and for an unprivileged user who reads a secret under /etc
/// through a group (`group_secret`, an environment fact) the `group_secret_gaps`.
fn pinned_gaps(abi: u64, root: bool, level: &str, cgroup: bool, memory_cgroup: bool) -> Option<(String, std::collections::BTreeSet<String>)> {
    let exp: serde_json::Value = serde_json::from_str(EXPECTATIONS).ok()?;
    let cfgs = exp["configurations"].as_array()?;
    // The kernel matrix names its configuration (two may share an ABI: 7.3 and 7.3-no-userns).
    let cfg = match std::env::var(EXPECT_CONFIG_ENV) {
        Ok(name) => cfgs.iter().find(|c| c["name"] == name.as_str())?,
        Err(_) => cfgs
            .iter()
            .find(|c| c["name"] == "host" && c["abi"].as_u64() == Some(abi))
            .or_else(|| cfgs.iter().find(|c| c["abi"].as_u64() == Some(abi)))?,
    };
    let mut s = gaps::expected_gaps(&exp, cfg, if root { "root" } else { "uid65534" }, level, cgroup, memory_cgroup);
    s.extend(gaps::strings(&exp["world_gaps"][level]));
    if !root && crate::world::group_secret().is_some() {
        s.extend(gaps::strings(&exp["group_secret_gaps"][level]));
    }
    Some((cfg["name"].as_str().unwrap_or("?").to_string(), s))
}

/// Everything a suite needs: the binary, the facts, the levels.
pub struct Suite {
    /// The `localgpt` binary under test.
    pub bin: PathBuf,
    /// Its directory (granted read + execute so the probes can run inside the sandbox).
    pub bin_dir: PathBuf,
    /// Facts.
    pub facts: Facts,
    /// Levels to run, best first.
    pub levels: Vec<LevelInfo>,
    /// The level `status` reports as the default.
    pub status_level: Option<String>,
    bare_cache: Mutex<BTreeMap<String, Result<String, String>>>,
    scratch: PathBuf,
    /// Protections the sandboxed runs ablate (`LOCALGPT_ABLATE`; only an ablation build of the
    /// binary honours it, see `localgpt-ablation`); bare runs are unaffected and stay cached.
    pub ablate: std::sync::RwLock<Option<String>>,
}

impl Drop for Suite {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.scratch);
    }
}

/// Resolves the binary under test: `$LOCALGPT_BIN`, else `localgpt` next to the running test
/// executable's directory (`target/debug/deps/x` → `target/debug/localgpt`) or beside it.
#[must_use]
pub fn find_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LOCALGPT_BIN").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("localgpt"), dir.parent()?.join("localgpt")].into_iter().find(|p| p.is_file())
}

fn json_of(out: &std::process::Output, what: &str) -> Result<serde_json::Value, String> {
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!("{what}: not JSON ({e}); exit {:?}; stderr: {}", out.status.code(), String::from_utf8_lossy(&out.stderr))
    })
}

/// How a bare run in which some check saw nothing starts (see [`Suite::bare_effects`]).
const SILENT_BARE: &str = "checks silent bare: ";

/// Where the world's planted secrets appear as file content: in the workspace (any file), and,
/// with `since`, in the host's `/tmp` and `/dev/shm` (files changed since then, two levels
/// deep). Bounded: at most 5000 files, each read up to 1 MiB. Each entry is `name at path`.
fn secret_copies(w: &World, since: Option<std::time::SystemTime>) -> Vec<String> {
    use std::io::Read;
    let values: Vec<(&String, &String)> = w.secrets.iter().filter(|(_, v)| v.starts_with("lgsecret-")).collect();
    let mut out = Vec::new();
    let mut budget = 5000usize;
    let mut roots: Vec<(PathBuf, usize, bool)> = vec![(w.ws.clone(), 8, false)];
    if since.is_some() {
        roots.push((PathBuf::from("/tmp"), 2, true));
        roots.push((PathBuf::from("/dev/shm"), 2, true));
    }
    for (root, max_depth, recent_only) in roots {
        let mut stack = vec![(root, 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let Some(b) = budget.checked_sub(1) else { return out };
                budget = b;
                let Ok(m) = e.path().symlink_metadata() else { continue };
                if m.is_dir() {
                    if depth < max_depth {
                        stack.push((e.path(), depth + 1));
                    }
                    continue;
                }
                if !m.is_file() || (recent_only && since.is_some_and(|t| m.modified().map_or(true, |mt| mt < t))) {
                    continue;
                }
                let mut buf = Vec::new();
                let Ok(f) = fs::File::open(e.path()) else { continue };
                if f.take(1 << 20).read_to_end(&mut buf).is_err() {
                    continue;
                }
                for (name, v) in &values {
                    if buf.windows(v.len()).any(|x| x == v.as_bytes()) {
                        out.push(format!("{name} at {}", e.path().display()));
                    }
                }
            }
        }
    }
    out
}

/// A run's protection table, by id.
type Table = BTreeMap<String, ProtectionRow>;

fn table(v: &serde_json::Value) -> BTreeMap<String, ProtectionRow> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((p.get("id")?.as_str()?.to_string(), ProtectionRow {
                        state: p.get("state")?.as_str()?.to_string(),
                        detail: p.get("detail").and_then(|d| d.as_str()).unwrap_or("").to_string(),
                    }))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Suite {
    /// Prepares a suite for `bin`: detects facts, reads `status --json` for the reachable levels
    /// and `explain --json --level L` for each one's protection table.
    ///
    /// # Errors
    /// When the binary cannot be run or its JSON is unusable.
    pub fn new(bin: &Path, only_levels: Option<&[String]>) -> Result<Suite, String> {
        let bin = fs::canonicalize(bin).map_err(|e| format!("{}: {e}", bin.display()))?;
        let bin_dir = bin.parent().ok_or("binary has no directory")?.to_path_buf();
        let facts = Facts::detect();
        let base = world_base();
        let scratch = base.join(format!("lgsuite-{}", crate::world::new_token()));
        for d in ["home", "xdg", "ws"] {
            fs::create_dir_all(scratch.join(d)).map_err(|e| format!("{}: {e}", scratch.display()))?;
        }
        let cmd = |args: &[&str]| -> Result<serde_json::Value, String> {
            let out = Command::new(&bin)
                .args(args)
                .env_clear()
                .env("HOME", scratch.join("home"))
                .env("XDG_CONFIG_HOME", scratch.join("xdg"))
                .env("PATH", RUN_PATH)
                .current_dir(scratch.join("ws"))
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("run {}: {e}", bin.display()))?;
            json_of(&out, &args.join(" "))
        };
        let status = cmd(&["sandbox", "status", "--json"])?;
        let available: Vec<String> = status
            .get("available_levels")
            .and_then(|l| l.as_array())
            .ok_or("status --json has no available_levels")?
            .iter()
            .filter_map(|l| l.as_str().map(str::to_string))
            .collect();
        let status_level = status.get("level").and_then(|l| l.as_str()).map(str::to_string);
        let status_table = table(status.get("protections").unwrap_or(&serde_json::Value::Null));
        let mut levels = Vec::new();
        for l in &available {
            if only_levels.is_some_and(|o| !o.iter().any(|x| x == l)) {
                continue;
            }
            let ex = cmd(&["sandbox", "explain", "--json", "--level", l])?;
            let t = table(ex.pointer("/plan/protections").unwrap_or(&serde_json::Value::Null));
            if t.is_empty() {
                return Err(format!("explain --level {l}: empty protection table"));
            }
            levels.push(LevelInfo { name: l.clone(), protections: t, inconsistency: None, pinned: None });
        }
        // The default (`auto`) run is what `status` describes. It usually equals one explicit
        // level, but not always: without Landlock but with user namespaces, auto is minimal plus
        // namespaces while `--level minimal` is seccomp only. Then `auto` is a level of its own.
        let ex = cmd(&["sandbox", "explain", "--json"])?;
        let auto_table = table(ex.pointer("/plan/protections").unwrap_or(&serde_json::Value::Null));
        let states = |t: &BTreeMap<String, ProtectionRow>| -> BTreeMap<String, String> {
            t.iter().map(|(k, v)| (k.clone(), v.state.clone())).collect()
        };
        let (a, b) = (states(&status_table), states(&auto_table));
        let inconsistency = (a != b).then(|| format!("`sandbox status` and `sandbox explain` disagree: {a:?} vs {b:?}"));
        match levels.iter_mut().find(|li| status_level.as_deref() == Some(li.name.as_str())) {
            Some(li) if states(&li.protections) == b => li.inconsistency = inconsistency,
            _ => {
                let wanted = only_levels.is_none_or(|o| o.iter().any(|x| x == "auto" || Some(x.as_str()) == status_level.as_deref()));
                if wanted {
                    levels.insert(0, LevelInfo { name: "auto".into(), protections: auto_table, inconsistency, pinned: None });
                }
            }
        }
        // What this kernel, user and level may leave unenforced, pinned in data: a run that
        // reports more is a regression, never an excuse for an escape.
        let abi = status.pointer("/landlock/abi").and_then(serde_json::Value::as_u64).unwrap_or(0);
        // A named configuration must exist and describe this kernel's Landlock ABI: the name
        // picks between configurations of one ABI, it cannot borrow an older kernel's gaps.
        if let Ok(name) = std::env::var(EXPECT_CONFIG_ENV) {
            let cfg_abi = serde_json::from_str::<serde_json::Value>(EXPECTATIONS)
                .ok()
                .and_then(|e| e["configurations"].as_array().and_then(|a| a.iter().find(|c| c["name"] == name.as_str()).map(|c| c["abi"].as_u64())));
            match cfg_abi {
                None => return Err(format!("{EXPECT_CONFIG_ENV}={name}: no such configuration in ci/kernel-matrix.d/expectations.json")),
                Some(a) if a != Some(abi) => {
                    return Err(format!("{EXPECT_CONFIG_ENV}={name}: that configuration describes Landlock ABI {}, this kernel has {abi}", a.map_or("?".into(), |x| x.to_string())));
                }
                Some(_) => {}
            }
        }
        let (cgroup, memory_cgroup) = (!status["cgroup_pids"].is_null(), !status["cgroup_memory"].is_null());
        for li in &mut levels {
            let key = if li.name == "auto" { "minimal+mounts" } else { li.name.as_str() };
            li.pinned = pinned_gaps(abi, facts.root, key, cgroup, memory_cgroup);
        }
        // The scratch home/workspace was only needed for `status` and `explain`: remove it now
        // (a suite held in a static, as in the test target, is never dropped).
        let _ = fs::remove_dir_all(&scratch);
        Ok(Suite { bin, bin_dir, facts, levels, status_level, bare_cache: Mutex::new(BTreeMap::new()), scratch, ablate: std::sync::RwLock::new(None) })
    }

    /// Runs `v` at `level` (a name from [`Suite::levels`]).
    #[must_use]
    pub fn run_case(&self, v: &Vector, level: &str) -> CaseResult {
        let mut r = CaseResult {
            vector: v.name.clone(),
            family: v.family.clone(),
            source: v.source.clone(),
            attempts: v.attempts.clone(),
            level: level.to_string(),
            user: self.facts.user.clone(),
            verdict: String::new(),
            detail: String::new(),
        };
        let set = |r: &mut CaseResult, verdict: &str, detail: String| {
            r.verdict = verdict.into();
            r.detail = detail;
        };
        if let Some(why) = self.facts.unmet_for(v) {
            set(&mut r, "skipped", why);
            return r;
        }
        if let Some(Err(why)) = v.probe.builtin.as_deref().map(crate::probes::available_here) {
            set(&mut r, "skipped", why);
            return r;
        }
        let Some(info) = self.levels.iter().find(|l| l.name == level) else {
            set(&mut r, "error", format!("level {level} is not reachable here"));
            return r;
        };
        if let Some(why) = &info.inconsistency {
            set(&mut r, "error", why.clone());
            return r;
        }
        let bare = self.bare_effects(v);
        let sandboxed = self.sandboxed_effects(v, level);
        // The protection table of this very run (it depends on the workspace, e.g. which .git
        // paths exist), falling back to `explain --level` for the level.
        let table = match &sandboxed {
            Ok((_, Some(t))) if !t.is_empty() => t.clone(),
            _ => info.protections.clone(),
        };
        let sandboxed = sandboxed.map(|(e, _)| e);
        // A protection the vector depends on and the table does not list is an error, never an
        // excuse: every level lists every protection (a dropped row must not turn an escape
        // into "not preventable").
        let missing: Vec<&String> = v.protections.iter().filter(|p| !table.contains_key(*p)).collect();
        if !missing.is_empty() {
            set(&mut r, "error", format!("the run's protection table does not list {} at level {level}", missing.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")));
            return r;
        }
        // Every row the run reports not enforced must be pinned as such for this machine.
        if let Some((cfg, pinned)) = &info.pinned {
            let regressed: Vec<String> = table.iter().filter(|(id, row)| row.state != "enforced" && !pinned.contains(*id) && !v.config_opens.contains(*id)).map(|(id, row)| format!("{id} ({})", row.state)).collect();
            if !regressed.is_empty() {
                set(&mut r, "error", format!(
                    "the run reports {} not enforced at level {level}, but ci/kernel-matrix.d/expectations.json (configuration {cfg}) pins it as enforced for this kernel and user: a regression, not an excuse",
                    regressed.join(", ")));
                return r;
            }
        }
        let degraded: Vec<String> = v
            .protections
            .iter()
            .filter_map(|p| match table.get(p) {
                Some(row) if row.state == "enforced" => None,
                Some(row) => Some(format!("protection {p} is {} ({})", row.state, row.detail)),
                None => None,
            })
            .collect();
        match (bare, sandboxed) {
            (_, Err(e)) => set(&mut r, "error", format!("sandboxed run: {e}")),
            (Err(e), _) => set(&mut r, "error", format!("bare run: {e}")),
            (Ok(b), Ok(s)) => {
                if b.is_empty() {
                    set(&mut r, "invalid_probe", "the bare (unsandboxed) run had no effect, so a sandboxed result proves nothing".into());
                } else if let Some(silent) = b.strip_prefix(SILENT_BARE) {
                    set(&mut r, "invalid_probe", format!("a check saw no effect bare, so its silence sandboxed proves nothing: {silent}"));
                } else if !degraded.is_empty() {
                    let how = if s.is_empty() { "no effect this run" } else { "escaped, as expected" };
                    set(&mut r, "not_preventable", format!("not preventable: {}; sandboxed: {how}", degraded.join("; ")));
                } else if !s.is_empty() {
                    set(&mut r, "escaped", format!("ESCAPE: sandboxed effect: {}; bare effect: {}", s, b));
                } else {
                    set(&mut r, "blocked", format!("bare effect: {b}; sandboxed: no effect (checked from outside)"));
                }
            }
        }
        r
    }

    /// The bare run's effects. Every check must see its effect bare: a check that cannot fire
    /// even without the sandbox proves nothing when it stays silent sandboxed (an error names it).
    fn bare_effects(&self, v: &Vector) -> Result<String, String> {
        if let Some(r) = self.bare_cache.lock().ok().and_then(|c| c.get(&v.name).cloned()) {
            return r;
        }
        let r = self.effects(v, None).map(|(e, _)| {
            let silent: Vec<String> = v.check.iter().zip(&e).filter(|(_, x)| x.is_none()).map(|(c, _)| format!("{c:?}")).collect();
            let seen = e.into_iter().flatten().collect::<Vec<_>>().join("; ");
            if seen.is_empty() || silent.is_empty() {
                seen
            } else {
                format!("{SILENT_BARE}{}; seen: {seen}", silent.join(", "))
            }
        });
        if let Ok(mut c) = self.bare_cache.lock() {
            c.insert(v.name.clone(), r.clone());
        }
        r
    }

    fn sandboxed_effects(&self, v: &Vector, level: &str) -> Result<(String, Option<BTreeMap<String, ProtectionRow>>), String> {
        self.effects(v, Some(level)).map(|(e, t)| (e.into_iter().flatten().collect::<Vec<_>>().join("; "), t))
    }

    /// Runs `v` in a fresh world, bare (`level = None`) or sandboxed, and returns the effects
    /// seen from outside (empty: none).
    /// One entry per check, in order: `Some(what was seen)` or `None`.
    fn effects(&self, v: &Vector, level: Option<&str>) -> Result<(Vec<Option<String>>, Option<Table>), String> {
        // Vectors that touch host-global state (host name, sysctls, the console, lo, the core
        // pattern, the host's shared memory) run one at a time across every harness process, so
        // their checks cannot see each other's effects.
        let _host_lock = v.check.iter().any(|c| {
            matches!(c, Check::SysctlUnchanged(_) | Check::HostnameUnchanged | Check::LoAddressAbsent | Check::KmsgRedirectUnchanged | Check::NoCoreFile(_) | Check::ShmemGrowthAtMost(_))
        }).then(host_lock);
        let mut w = World::new(&world_base(), v)?;
        w.vars.insert("bin".into(), self.bin.display().to_string());
        let n: u32 = w.token.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        w.vars.insert("lo_addr".into(), format!("127.77.{}.{}", (n >> 8) % 250 + 1, n % 250 + 1));
        // A loop device number no one uses, unique per world (minors go up to 2^20).
        w.vars.insert("loop_nr".into(), (300_000 + n % 700_000).to_string());
        let kmsg_before = kmsg_redirect();
        w.vars.insert("kmsg_console".into(), ((kmsg_before.unwrap_or(0) % 6) + 1).to_string());
        let host_shell = HostShell { ws: w.ws.clone(), home: w.home.clone(), xdg: w.xdg.clone() };
        if let Some(setup) = &v.setup {
            host_shell.run("setup", &w.subst(setup))?;
        }
        for c in &v.check {
            let p = match c {
                Check::FileUnchanged(p) | Check::MetadataUnchanged(p) | Check::SysctlUnchanged(p) => w.subst(p),
                _ => continue,
            };
            w.before.insert(p.clone(), snapshot(Path::new(&p)));
        }
        for c in &v.check {
            if let Check::FileAbsent(p) | Check::NoSetidFile(p) = c {
                let p = w.subst(p);
                if p.starts_with("/tmp/") || p.starts_with("/dev/shm/") || p.starts_with("/etc/cron.d/") {
                    w.remove_on_drop(PathBuf::from(&p));
                }
            }
        }
        let hostname_before = hostname();
        let cmd: Vec<String> = if let Some(b) = &v.probe.builtin {
            let mut c = vec![self.bin.display().to_string(), "sandbox".into(), "probe".into(), b.clone()];
            c.extend(v.probe.args.iter().map(|a| w.subst(a)));
            c
        } else {
            vec!["bash".into(), "-c".into(), format!("echo {STARTED}; {}", w.subst(v.probe.shell.as_deref().unwrap_or("")))]
        };
        let timeout = v.timeout.unwrap_or(DEFAULT_TIMEOUT);
        // `sandbox run` at `l` in this world, then the command's own arguments.
        let ws_arg = w.ws.display().to_string();
        // A `terminal` vector's run is as on the user's terminal: the command gets a terminal of
        // its own (`--stdin inherit`), and there is no JSON result to read (what it printed is
        // on the world's pty).
        let result_flags: Vec<String> = if v.terminal { vec!["--stdin".into(), "inherit".into()] } else { vec!["--json".into()] };
        let sandboxed = |l: &str| -> Vec<String> {
            [self.bin.display().to_string(), "sandbox".into(), "run".into()].into_iter().chain(result_flags.iter().cloned()).chain([

                "--level".into(),
                l.into(),
                "--workspace".into(),
                ws_arg.clone(),
                "--allow-read".into(),
                self.bin_dir.display().to_string(),
                "--timeout".into(),
                timeout.to_string(),
                "--".into(),
            ]).collect()
        };
        let mut argv: Vec<String> = match level {
            None => cmd,
            Some(l) => {
                let mut a = sandboxed(l);
                if v.probe.builtin.is_some() {
                    a.extend(cmd);
                } else {
                    a.push(cmd[2].clone());
                }
                a
            }
        };
        let status_file = w.outside.join("victim.status");
        if v.victim {
            let mut wrapped = vec![self.bin.display().to_string(), "sandbox".into(), "probe".into(), "__victim".into(), status_file.display().to_string(), "--".into()];
            wrapped.extend(argv);
            argv = wrapped;
        }
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), w.home.display().to_string()),
            ("XDG_CONFIG_HOME".into(), w.xdg.display().to_string()),
            ("PATH".into(), RUN_PATH.into()),
            ("LC_ALL".into(), "C.UTF-8".into()),
            ("LG_VICTIM_API_TOKEN".into(), w.secrets.get("victim").cloned().unwrap_or_default()),
        ];
        if let Ok(u) = std::env::var("USER") {
            env.push(("USER".into(), u));
        }
        if let (Some(_), Some(ids)) = (level, self.ablate.read().ok().and_then(|a| a.clone())) {
            env.push(("LOCALGPT_ABLATE".into(), ids));
        }
        // The helper's start under test (`zygote`: the corpus through a multithreaded host's
        // start), passed on to sandboxed runs only.
        if let (Some(_), Ok(start)) = (level, std::env::var(HELPER_START_ENV)) {
            env.push((HELPER_START_ENV.into(), start));
        }
        for (k, val) in &v.env {
            env.push((k.clone(), w.subst(val)));
        }
        let mut fds: Vec<(i32, OwnedFd)> = if v.terminal { w.pty_stdio()? } else { Vec::new() };
        for f in &v.fds {
            let fd = match f.kind {
                FdKind::TcpSocket => w.connect_tcp().map(OwnedFd::from).map_err(|e| format!("connect: {e}"))?,
                kind => {
                    let p = w.subst(f.path.as_deref().unwrap_or(""));
                    let flags = match kind {
                        FdKind::Write => libc::O_WRONLY,
                        FdKind::Read => libc::O_RDONLY,
                        FdKind::Dir => libc::O_RDONLY | libc::O_DIRECTORY,
                        #[cfg(target_os = "linux")]
                        _ => libc::O_PATH,
                        #[cfg(not(target_os = "linux"))]
                        _ => libc::O_RDONLY,
                    };
                    let cp = std::ffi::CString::new(p.clone()).map_err(|e| e.to_string())?;
                    // SAFETY: open with a valid path; the fd is owned below.
                    let fd = unsafe { libc::open(cp.as_ptr(), flags | libc::O_CLOEXEC) };
                    if fd < 0 {
                        return Err(format!("open {p} for fd {}: {}", f.fd, std::io::Error::last_os_error()));
                    }
                    // SAFETY: we own fd.
                    unsafe { OwnedFd::from_raw_fd(fd) }
                }
            };
            fds.push((f.fd, fd));
        }
        // The harness's own connection for a leaked TCP socket is not the probe's doing.
        let _ = w.observe_tcp();
        let naive_timeout = if level.is_none() && v.timeout.is_some() { Some(Duration::from_secs(timeout)) } else { None };
        let secrets_before = secret_copies(&w, None);
        let started_at = std::time::SystemTime::now();
        // An earlier command of the same session: run the way the probe's run is (bare, or
        // sandboxed at the same level in the same world), before it.
        if let Some(e) = &v.earlier_run {
            let script = w.subst(e);
            match level {
                None => host_shell.run("the earlier run (`earlier_run`)", &script)?,
                Some(l) => {
                    let mut a = sandboxed(l);
                    a.push(script.clone());
                    let out = execute(&a, &env, &w.ws, Vec::new(), None, None, Vec::new())?;
                    if out.code != Some(0) {
                        return Err(format!("the earlier run (`earlier_run`) `{script}` failed sandboxed ({:?}, signal {:?}): {}", out.code, out.signal, String::from_utf8_lossy(&out.stderr).trim()));
                    }
                }
            }
        }
        let watch: Vec<(PathBuf, Option<Vec<u8>>)> = v
            .check
            .iter()
            .filter_map(|c| match c {
                Check::LiveFileUnchanged(p) => Some(PathBuf::from(w.subst(p))),
                _ => None,
            })
            .map(|p| {
                let before = fs::read(&p).ok();
                (p, before)
            })
            .collect();
        let monitor = v.needs_monitor().then(|| w.token.clone());
        let (out, during) = with_during(&w, &host_shell, v.during.as_ref(), || execute(&argv, &env, &w.ws, fds, naive_timeout, monitor, watch));
        let out = out?;
        if v.victim {
            // The probe may have killed the victim (our direct child) while `sandbox run` is
            // still finishing below it: let the rest of the process group end on its own before
            // looking for survivors (bounded; what is left afterwards is killed below).
            let pgid = out.pid;
            for _ in 0..3000 {
                if !group_running(pgid) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Leftovers: scanned several times over a short window (a process between fork and exec
        // can briefly show an empty command line), so that none is missed.
        let mut survivors = token_pids(&w.token);
        if v.check.contains(&Check::NoSurvivor) {
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(20));
                for p in token_pids(&w.token) {
                    if !survivors.contains(&p) {
                        survivors.push(p);
                    }
                }
            }
        }
        for pid in &survivors {
            // SAFETY: killing processes that carry this world's unique token.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        // The user's next command on the host (bare, after the run): what it runs because of
        // what the run left is an effect the checks below see.
        if let Some(a) = &v.afterwards {
            host_shell.run("the user's next command after the run (`afterwards`)", &w.subst(a))?;
        }

        // What the host wrote during the run (the files its action declares) is not a copy the
        // command made.
        let host_made = match during {
            Some(Err(e)) => return Err(e),
            Some(Ok(files)) => files,
            None => Vec::new(),
        };
        let mut run_table = None;
        let mut timed_out = false;
        let (stdout, stderr) = match level {
            // Bare, or on the user's terminal: what reached it (the banner says the level).
            _ if v.terminal => {
                let screen = w.pty_output();
                if let Some(l) = level {
                    let want = if l == "auto" { self.status_level.as_deref().unwrap_or(l) } else { l };
                    let shown = String::from_utf8_lossy(&screen);
                    if !shown.contains(&format!("Level: {want}")) {
                        return Err(format!("asked for level {l}, the run's banner on the terminal does not say it: {}", shown.chars().take(600).collect::<String>()));
                    }
                }
                (screen, Vec::new())
            }
            None => (out.stdout.clone(), out.stderr.clone()),
            Some(l) => {
                let j: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
                    format!(
                        "`sandbox run` did not print its JSON result ({e}); exit {:?}; stderr: {}",
                        out.code,
                        String::from_utf8_lossy(&out.stderr).chars().take(600).collect::<String>()
                    )
                })?;
                let got = j.get("level").and_then(|x| x.as_str()).unwrap_or("");
                // `auto` runs at the level `status` reports.
                let want = if l == "auto" { self.status_level.as_deref().unwrap_or(l) } else { l };
                if got != want {
                    // No level: the CLI's own error object (`{"error", "exit_code"}`): say what it was.
                    let why = j.get("error").and_then(|x| x.as_str()).map(|e| format!(" (the CLI failed, exit {:?}: {e})", out.code)).unwrap_or_default();
                    return Err(format!("asked for level {l}, the run reports level {got}{why}"));
                }
                run_table = Some(table(j.get("protections").unwrap_or(&serde_json::Value::Null)));
                timed_out = j.get("timed_out").and_then(serde_json::Value::as_bool) == Some(true);
                let so = j.get("stdout").and_then(|x| x.as_str()).unwrap_or("").as_bytes().to_vec();
                let se = j.get("stderr").and_then(|x| x.as_str()).unwrap_or("").as_bytes().to_vec();
                (so, se)
            }
        };
        // Why a run proves nothing, with the start of what it printed.
        let unproven = |why: String| {
            format!(
                "{why}, so nothing is proven; stdout: {}; stderr: {}",
                String::from_utf8_lossy(&stdout).chars().take(400).collect::<String>(),
                String::from_utf8_lossy(&stderr).chars().take(600).collect::<String>()
            )
        };
        if !String::from_utf8_lossy(&stdout).contains(STARTED) {
            return Err(unproven(format!("the command did not start (no {STARTED} on stdout)")));
        }
        let mut all = stdout.clone();
        all.extend_from_slice(&stderr);
        let all = String::from_utf8_lossy(&all).into_owned();
        let mut effects: Vec<Option<String>> = Vec::new();
        for c in &v.check {
            effects.push(self.check(c, &mut w, &out, &all, stdout.len(), &survivors, hostname_before.as_deref(), kmsg_before)?);
        }
        // Every run, whatever the vector checks: a planted secret copied into the workspace or
        // the shared scratch is exfiltration too (after the declared checks, so that bare
        // validity still counts those one by one).
        let copies: Vec<String> = secret_copies(&w, Some(started_at))
            .into_iter()
            .filter(|c| !secrets_before.contains(c) && !host_made.iter().any(|p| c.ends_with(&format!(" at {}", p.display()))))
            .collect();
        if !copies.is_empty() {
            effects.push(Some(format!("planted secret(s) copied: {}", copies.join(", "))));
        }
        // A run that shows no effect is judged only when its probe got to make its attempt: a
        // slow start (a TCG guest) can leave a probe no time to try before the timeout, and the
        // checks would then see nothing and call it blocked. An effect is an effect whenever it
        // came, so these two rules never hide one. (A bare run without an effect is an invalid
        // probe already.)
        if level.is_some() && effects.iter().all(Option::is_none) {
            if v.check.contains(&Check::NoSurvivor) {
                // Its survivor, detached, existed before the run ended.
                if !String::from_utf8_lossy(&stdout).contains(localgpt_corpus::DETACHED) {
                    return Err(unproven(format!("the probe never made the process it meant to leave behind (no {} on stdout: the run ended first)", localgpt_corpus::DETACHED)));
                }
            } else if timed_out && !out.monitor.held {
                // Other probes end by themselves, or hold once their effect is complete.
                return Err(unproven(format!("the sandboxed run was ended by its timeout ({} s) before the probe said its attempt was complete", v.timeout.unwrap_or(DEFAULT_TIMEOUT))));
            }
        }
        Ok((effects, run_table))
    }

    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        c: &Check,
        w: &mut World,
        out: &Execution,
        all: &str,
        stdout_len: usize,
        survivors: &[i32],
        hostname_before: Option<&str>,
        kmsg_before: Option<u8>,
    ) -> Result<Option<String>, String> {
        let some = |b: bool, s: String| if b { Some(s) } else { None };
        Ok(match c {
            Check::FileUnchanged(p) => {
                let p = w.subst(p);
                let now = snapshot(Path::new(&p));
                let before = w.before.get(&p).cloned();
                some(before.as_ref().map(|b| &b.content) != Some(&now.content), format!("{p} changed or removed"))
            }
            Check::FileAbsent(p) => {
                let p = w.subst(p);
                some(fs::symlink_metadata(&p).is_ok(), format!("{p} was created"))
            }
            Check::MetadataUnchanged(p) => {
                let p = w.subst(p);
                let now = snapshot(Path::new(&p));
                let before = w.before.get(&p).cloned();
                some(before.as_ref().map(|b| &b.meta) != Some(&now.meta), format!("metadata of {p} changed: {:?} → {:?}", before.and_then(|b| b.meta), now.meta))
            }
            Check::NotExecutable(p) => {
                let p = w.subst(p);
                let mode = fs::symlink_metadata(&p).map(|m| m.mode()).ok();
                some(mode.is_some_and(|m| m & 0o111 != 0), format!("{p} is executable (mode {:o})", mode.unwrap_or(0)))
            }
            Check::NoOtherLinks(p) => {
                let p = w.subst(p);
                let links = fs::symlink_metadata(&p).map(|m| m.nlink()).unwrap_or(0);
                some(links > 1, format!("{p} has {links} hard links"))
            }
            Check::NoSetidFile(p) => {
                let p = w.subst(p);
                let found = setid_files(Path::new(&p), 0);
                some(!found.is_empty(), format!("setuid/setgid file(s): {}", found.join(", ")))
            }
            Check::SecretNotInOutput(name) => {
                let s = w.secrets.get(name).cloned().ok_or_else(|| format!("the world has no secret `{name}`"))?;
                some(all.contains(&s), format!("secret `{name}` appeared in the output"))
            }
            Check::TcpSilent => {
                let s = w.observe_tcp();
                some(s.anything(), format!("TCP listener saw {} connection(s), {} byte(s)", s.connections, s.data.len()))
            }
            Check::UdpSilent => {
                let s = w.observe_udp();
                some(s.anything(), format!("UDP listener received {} datagram(s)", s.connections))
            }
            Check::UnixSilent => {
                let s = w.observe_unix();
                some(s.anything(), format!("pathname unix listener saw {} connection(s), {} byte(s)", s.connections, s.data.len()))
            }
            Check::DgramSilent => {
                let s = w.observe_dgram();
                some(s.anything(), format!("pathname datagram socket received {} datagram(s)", s.connections))
            }
            Check::AbstractSilent => {
                let s = w.observe_abstract();
                some(s.anything(), format!("abstract socket saw {} connection(s)/datagram(s)", s.connections))
            }
            Check::InboundUnreached => {
                let n = w.inbound_reached();
                some(n > 0, format!("a host client connected {n} time(s) to a listener the command made, through {}:{}", w.subst("{host_ip}"), w.subst("{free_port}")))
            }
            Check::SquatUnreached => {
                let n = w.squat_reached();
                some(n > 0, format!("a host client connected {n} time(s) to a listener the command made on the abstract name {}", w.subst("{squat_name}")))
            }
            Check::VictimUntouched => {
                let st = fs::read_to_string(w.outside.join("victim.status")).unwrap_or_default();
                let mut e = Vec::new();
                if out.stopped {
                    e.push("victim was stopped".to_string());
                }
                if out.signal.is_some() {
                    e.push(format!("victim was killed by signal {:?}", out.signal));
                }
                if st.is_empty() && out.signal.is_none() {
                    e.push("victim left no status".to_string());
                }
                if st.contains("tampered=1") {
                    e.push("victim memory was written".to_string());
                }
                if st.contains("limits=1") {
                    e.push("victim's resource limits or scheduling were changed".to_string());
                }
                if !st.is_empty() && !st.contains("signals=0") {
                    e.push(format!("victim received signals ({})", st.trim()));
                }
                some(!e.is_empty(), e.join(", "))
            }
            Check::NoSurvivor => some(!survivors.is_empty(), format!("{} process(es) survived the run: {survivors:?}", survivors.len())),
            Check::LiveFileUnchanged(p) => {
                let p = PathBuf::from(w.subst(p));
                some(out.monitor.live_changes.contains(&p), format!("{} changed on the host while the command ran", p.display()))
            }
            Check::MaxProcesses(n) => {
                let m = out.monitor.max_procs;
                some(m > *n as usize, format!("{m} probe processes at once (bound {n})"))
            }
            Check::MaxFds(n) => {
                let m = out.monitor.max_fds;
                some(m > *n as usize, format!("a probe process held {m} descriptors (bound {n})"))
            }
            Check::NoNewNamespace => some(!out.monitor.namespaces.is_empty(), out.monitor.namespaces.join(", ")),
            Check::ShmemGrowthAtMost(b) => {
                let g = out.monitor.max_shmem_growth_kb * 1024;
                some(g > *b, format!("the host's shared memory grew by {} MiB (bound {} MiB)", g >> 20, b >> 20))
            }
            Check::MaxRssBytes(b) => {
                let r = out.monitor.max_rss_kb * 1024;
                some(r > *b, format!("the probe held {} MiB resident (bound {} MiB)", r >> 20, b >> 20))
            }
            Check::FileLacks { path, text } => {
                let p = w.subst(path);
                let has = fs::read(&p).is_ok_and(|c| c.windows(text.len().max(1)).any(|x| x == text.as_bytes()));
                some(has, format!("{p} contains {text:?}"))
            }
            Check::FileSizeAtMost { path, bytes } => {
                let p = w.subst(path);
                let sz = fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                some(sz > *bytes, format!("{p} is {sz} bytes (bound {bytes})"))
            }
            Check::OutputAtMost(n) => some(stdout_len as u64 > *n, format!("{stdout_len} bytes of stdout reached the caller (bound {n})")),
            Check::TtyOutputEmpty => {
                let got = w.pty_output();
                some(!got.is_empty(), format!("{} byte(s) written to the user's terminal: {:?}", got.len(), String::from_utf8_lossy(&got)))
            }
            Check::TtyOutputLacks(text) => {
                let got = w.pty_output();
                let t = w.subst(text);
                some(got.windows(t.len().max(1)).any(|x| x == t.as_bytes()), format!("{t:?} reached the user's terminal"))
            }
            Check::TtyInputEmpty => {
                let got = w.pty_input();
                some(!got.is_empty(), format!("{} byte(s) injected into the terminal: {:?}", got.len(), String::from_utf8_lossy(&got)))
            }
            Check::SysvUnchanged => {
                let (a, b, c) = w.sysv_intact();
                some(!(a && b && c), format!("SysV objects changed (shm intact {a}, message queued {b}, semaphore intact {c})"))
            }
            Check::SysctlUnchanged(p) => {
                let p = w.subst(p);
                let now = fs::read(&p).ok();
                let before = w.before.get(&p).and_then(|s| s.content.clone());
                let changed = now != before;
                if changed {
                    if let Some(b) = &before {
                        let _ = fs::write(&p, b);
                    }
                }
                some(changed, format!("{p} changed (restored)"))
            }
            Check::HostnameUnchanged => {
                let now = hostname();
                let changed = now.as_deref() != hostname_before;
                if changed {
                    if let Some(h) = hostname_before {
                        // SAFETY: restoring the host name we read before.
                        #[cfg(target_os = "linux")]
                        unsafe { libc::sethostname(h.as_ptr().cast(), h.len()) };
                        #[cfg(not(target_os = "linux"))]
                        unsafe { libc::sethostname(h.as_ptr().cast(), h.len() as libc::c_int) };
                    }
                }
                some(changed, format!("host name changed to {now:?} (restored)"))
            }
            Check::LoopDeviceAbsent => {
                let nr: u64 = w.vars.get("loop_nr").and_then(|s| s.parse().ok()).ok_or("no loop_nr")?;
                let present = Path::new(&format!("/sys/devices/virtual/block/loop{nr}")).exists();
                if present {
                    remove_loop_device(nr);
                }
                some(present, format!("loop device loop{nr} was created on the host (removed)"))
            }
            Check::LoAddressAbsent => {
                let addr = w.vars.get("lo_addr").cloned().unwrap_or_default();
                let ip = ip_command().ok_or("no ip command")?;
                let o = Command::new(&ip).args(["-4", "-o", "addr", "show", "dev", "lo"]).output().map_err(|e| e.to_string())?;
                let present = String::from_utf8_lossy(&o.stdout).contains(&format!("inet {addr}/"));
                if present {
                    let _ = Command::new(&ip).args(["addr", "del", &format!("{addr}/32"), "dev", "lo"]).output();
                }
                some(present, format!("address {addr} was added to lo (removed)"))
            }
            Check::KmsgRedirectUnchanged => {
                let now = kmsg_redirect();
                let changed = now != kmsg_before;
                if changed {
                    if let Some(b) = kmsg_before {
                        set_kmsg_redirect(b);
                    }
                }
                some(changed, format!("console kmsg redirect changed {kmsg_before:?} → {now:?} (restored)"))
            }
            Check::NoCoreFile(d) => {
                let d = w.subst(d);
                let cores: Vec<String> = fs::read_dir(&d)
                    .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("core")).collect())
                    .unwrap_or_default();
                some(!cores.is_empty(), format!("core file(s) in {d}: {cores:?}"))
            }
        })
    }
}

/// An exclusive lock on `<world base>/localgpt-harness-host.lock`, released on drop.
struct HostLock(Option<fs::File>);

impl Drop for HostLock {
    fn drop(&mut self) {
        if let Some(f) = &self.0 {
            // SAFETY: unlocking our own descriptor.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}

fn host_lock() -> HostLock {
    let p = world_base().join("localgpt-harness-host.lock");
    let f = fs::OpenOptions::new().create(true).append(true).open(&p).ok();
    if let Some(f) = &f {
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions(&p, fs::Permissions::from_mode(0o666));
        // SAFETY: blocking flock on our own descriptor.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    }
    HostLock(f)
}

fn setid_files(p: &Path, depth: usize) -> Vec<String> {
    let Ok(m) = fs::symlink_metadata(p) else { return Vec::new() };
    if m.is_file() && m.mode() & 0o6000 != 0 {
        return vec![format!("{} ({:o})", p.display(), m.mode() & 0o7777)];
    }
    let mut v = Vec::new();
    if m.is_dir() && depth < 4 {
        if let Ok(rd) = fs::read_dir(p) {
            for e in rd.flatten() {
                v.extend(setid_files(&e.path(), depth + 1));
            }
        }
    }
    v
}

fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: valid buffer.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

fn kmsg_redirect() -> Option<u8> {
    // SAFETY: TIOCLINUX(TIOCL_GETKMSGREDIRECT) on /dev/tty0 (root only); fd closed.
    unsafe {
        let fd = libc::open(c"/dev/tty0".as_ptr(), libc::O_RDONLY | libc::O_NOCTTY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut buf = [17u8, 0];
        let r = libc::ioctl(fd, 0x541C, buf.as_mut_ptr());
        libc::close(fd);
        (r >= 0).then_some(buf[0])
    }
}

fn set_kmsg_redirect(v: u8) {
    // SAFETY: as above.
    unsafe {
        let fd = libc::open(c"/dev/tty0".as_ptr(), libc::O_RDONLY | libc::O_NOCTTY | libc::O_CLOEXEC);
        if fd >= 0 {
            let buf = [11u8, v];
            libc::ioctl(fd, 0x541C, buf.as_ptr());
            libc::close(fd);
        }
    }
}

/// PIDs whose command line contains `token`.
#[must_use]
pub fn token_pids(token: &str) -> Vec<i32> {
    let mut v = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else { return v };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if let Ok(c) = fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&c).contains(token) {
                v.push(pid);
            }
        }
    }
    v
}

/// The fields of a `/proc/PID/stat` line after the command name (state, ppid, pgrp, …): the name
/// is in parentheses and may itself hold spaces and parentheses, so the split is after the last `)`.
pub(crate) fn stat_fields(stat: &str) -> std::str::SplitWhitespace<'_> {
    stat.rsplit_once(')').map_or("", |x| x.1).split_whitespace()
}

/// Whether process group `pgid` still has a member that has not ended. A zombie has ended: it only
/// waits to be reaped, which for one orphaned by the run's end (a zygote killed with the `sandbox
/// run` CLI that started it) is up to `init`, and some container inits reap only every second or
/// two. Where `/proc` cannot be read, any member counts.
fn group_running(pgid: i32) -> bool {
    // SAFETY: probing a process group of ours.
    if unsafe { libc::kill(-pgid, 0) } != 0 {
        return false;
    }
    let Ok(rd) = fs::read_dir("/proc") else { return true };
    rd.flatten().any(|e| {
        e.file_name().to_str().is_some_and(|n| n.parse::<i32>().is_ok())
            && fs::read_to_string(e.path().join("stat")).ok().is_some_and(|st| {
                let mut f = stat_fields(&st);
                let (state, pgrp) = (f.next(), f.nth(1).and_then(|g| g.parse::<i32>().ok()));
                pgrp == Some(pgid) && !matches!(state, Some("Z" | "X"))
            })
    })
}

/// Removes loop device `nr` (`LOOP_CTL_REMOVE` on `/dev/loop-control`).
fn remove_loop_device(nr: u64) {
    #[cfg(target_os = "linux")]
    // SAFETY: open/ioctl/close on our own descriptor.
    unsafe {
        let fd = libc::open(c"/dev/loop-control".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::ioctl(fd, 0x4C81, nr as libc::c_ulong);
            libc::close(fd);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nr;
}

/// What the monitor saw while a run was going on.
#[derive(Default, Clone, Debug)]
pub struct MonitorStats {
    /// Most probe processes alive at once.
    pub max_procs: usize,
    /// Most descriptors held by one probe process.
    pub max_fds: usize,
    /// New namespaces or token mounts seen.
    pub namespaces: Vec<String>,
    /// `Shmem` of /proc/meminfo before the run, kB.
    pub shmem_before_kb: u64,
    /// Most `Shmem` growth seen, kB.
    pub max_shmem_growth_kb: u64,
    /// Most resident memory of the probe processes together, kB.
    pub max_rss_kb: u64,
    /// Watched files seen with content other than at launch while the run went on.
    pub live_changes: Vec<PathBuf>,
    /// A probe was seen under the name [`probes::HELD_COMM`]: its effect was complete.
    pub held: bool,
}

/// `Shmem` of /proc/meminfo, kB.
fn shmem_kb() -> u64 {
    fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("Shmem:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())))
        .unwrap_or(0)
}

fn is_probe_cmdline(c: &[u8], token: &str) -> bool {
    let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
    args.len() > 3 && args[1] == b"sandbox" && args[2] == b"probe" && String::from_utf8_lossy(c).contains(token)
}

/// What one monitor sample saw besides the maxima it folds into [`MonitorStats`].
#[derive(Default)]
struct Sample {
    /// This world's probe processes, victim wrappers excluded (the `sandbox run` CLI, whose JSON
    /// result the harness reads, is never one).
    probes: Vec<i32>,
    /// One of them had taken the name [`probes::HELD_COMM`]: its effect was complete.
    held: bool,
}

fn monitor_sample(token: &str, s: &mut MonitorStats) -> Sample {
    let mut sample = Sample::default();
    let Ok(rd) = fs::read_dir("/proc") else { return sample };
    let mut probes: BTreeMap<i32, (i32, String, String)> = BTreeMap::new();
    let mut rss = 0u64;
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|x| x.parse::<i32>().ok()) else { continue };
        let Ok(c) = fs::read(e.path().join("cmdline")) else { continue };
        // Memory: every process carrying the token (shell probes name it in their argv) but the
        // CLI running the sandbox.
        let args: Vec<&[u8]> = c.split(|&b| b == 0).collect();
        if String::from_utf8_lossy(&c).contains(token) && !(args.len() > 2 && args[1] == b"sandbox" && args[2] == b"run") {
            rss += fs::read_to_string(e.path().join("status"))
                .ok()
                .and_then(|st| st.lines().find_map(|l| l.strip_prefix("VmRSS:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())))
                .unwrap_or(0);
        }
        if !is_probe_cmdline(&c, token) {
            continue;
        }
        let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat_fields(&stat).nth(1).and_then(|x| x.parse().ok()).unwrap_or(0);
        let ns = |n: &str| fs::read_link(e.path().join("ns").join(n)).map(|p| p.display().to_string()).unwrap_or_default();
        probes.insert(pid, (ppid, ns("user"), ns("mnt")));
        if args.get(3) != Some(&b"__victim".as_slice()) {
            sample.probes.push(pid);
        }
        let fds = fs::read_dir(e.path().join("fd")).map(|d| d.count()).unwrap_or(0);
        s.max_fds = s.max_fds.max(fds);
        if fs::read_to_string(e.path().join("comm")).is_ok_and(|n| n.trim_end() == probes::HELD_COMM) {
            sample.held = true;
        }
        if let Ok(mi) = fs::read_to_string(e.path().join("mountinfo")) {
            if mi.contains(&format!("lgmnt-{token}")) {
                let m = format!("a mount carrying the token exists in pid {pid}'s mount namespace");
                if !s.namespaces.contains(&m) {
                    s.namespaces.push(m);
                }
            }
        }
    }
    s.max_procs = s.max_procs.max(probes.len());
    s.max_shmem_growth_kb = s.max_shmem_growth_kb.max(shmem_kb().saturating_sub(s.shmem_before_kb));
    s.max_rss_kb = s.max_rss_kb.max(rss);
    for (pid, (ppid, user, mnt)) in &probes {
        if let Some((_, pu, pm)) = probes.get(ppid) {
            if (!user.is_empty() && !pu.is_empty() && user != pu) || (!mnt.is_empty() && !pm.is_empty() && mnt != pm) {
                let m = format!("pid {pid} runs in a new namespace ({user} {mnt}, parent {pu} {pm})");
                if !s.namespaces.iter().any(|x| x.starts_with(&format!("pid {pid} "))) {
                    s.namespaces.push(m);
                }
            }
        }
    }
    sample
}

/// The raw outcome of one process run.
pub struct Execution {
    /// stdout bytes (capped at 64 MiB).
    pub stdout: Vec<u8>,
    /// stderr bytes.
    pub stderr: Vec<u8>,
    /// Exit code.
    pub code: Option<i32>,
    /// Killing signal.
    pub signal: Option<i32>,
    /// The direct child was seen stopped (and continued).
    pub stopped: bool,
    /// The direct child's pid (and process group).
    pub pid: i32,
    /// Monitor samples.
    pub monitor: MonitorStats,
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if v.len() < 64 << 20 {
                        v.extend_from_slice(&buf[..n]);
                    }
                }
            }
        }
        v
    })
}

/// Runs the shell snippets of a vector (`setup`, `during`) bare, in the world: cwd the
/// workspace, the run's `HOME`, `XDG_CONFIG_HOME` and `PATH`, nothing else of the harness's
/// environment.
struct HostShell {
    ws: PathBuf,
    home: PathBuf,
    xdg: PathBuf,
}

impl HostShell {
    /// Runs `script`; an error unless it exits 0.
    fn run(&self, what: &str, script: &str) -> Result<(), String> {
        let out = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(&self.ws)
            .env_clear()
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("PATH", RUN_PATH)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if !out.status.success() {
            return Err(format!("{what} `{script}` failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(())
    }
}

/// Runs `run` (the command) while a vector's `during` action waits for its trigger on a second
/// thread; the action runs once, as soon as its `when` path exists (checked every 5 ms). Also
/// returns, when there is an action, its verdict: the files it declares it writes (the host's
/// own: a secret there is not a copy the command made), or why it proves nothing — it failed,
/// or never ran while the command did.
fn with_during<T>(w: &World, host: &HostShell, during: Option<&localgpt_corpus::During>, run: impl FnOnce() -> T) -> (T, Option<Result<Vec<PathBuf>, String>>) {
    let Some(d) = during else { return (run(), None) };
    let (when, script) = (PathBuf::from(w.subst(&d.when)), w.subst(&d.shell));
    let writes: Vec<PathBuf> = d.writes.iter().map(|p| PathBuf::from(w.subst(p))).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if fs::symlink_metadata(&when).is_ok() {
                    return Some(host.run("the host action while the command ran (`during`)", &script).map(|()| writes));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            None
        });
        let out = run();
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let verdict = match waiter.join() {
            Ok(Some(r)) => r,
            Ok(None) => Err(format!("the host action (`during`) never ran: {} did not appear while the command ran, so nothing is proven", when.display())),
            Err(_) => Err("the host action's thread panicked".into()),
        };
        (out, Some(verdict))
    })
}

/// Runs `argv` with exactly `env`, in `cwd`, stdin `/dev/null`, the given fds leaked, and
/// (bare runs of timed vectors) a naive timeout that kills only the direct child, like a typical
/// agent without a sandbox does.
///
/// # Errors
/// Spawn failure, or the run exceeded the harness's hard deadline.
pub fn execute(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    fds: Vec<(i32, OwnedFd)>,
    naive_timeout: Option<Duration>,
    monitor_token: Option<String>,
    watch: Vec<(PathBuf, Option<Vec<u8>>)>,
) -> Result<Execution, String> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).env_clear().envs(env.iter().map(|(k, v)| (k, v))).current_dir(cwd);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let raw: Vec<(i32, i32)> = fds.iter().map(|(t, f)| (*t, f.as_raw_fd())).collect();
    // SAFETY: only dup2/fcntl (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for (target, src) in &raw {
                if libc::dup2(*src, *target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if src == target {
                    libc::fcntl(*target, libc::F_SETFD, 0);
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| format!("spawn {}: {e}", argv[0]))?;
    drop(fds);
    let pid = child.id() as i32;
    let out_r = reader(child.stdout.take().ok_or("no stdout")?);
    let err_r = reader(child.stderr.take().ok_or("no stderr")?);
    let done = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Mutex::new(MonitorStats { shmem_before_kb: shmem_kb(), ..MonitorStats::default() }));
    let mon = monitor_token.map(|tok| {
        let done = Arc::clone(&done);
        let stats = Arc::clone(&stats);
        std::thread::spawn(move || {
            let (mut held_before, mut released) = (false, false);
            while !done.load(Ordering::SeqCst) {
                let mut s = stats.lock().map(|s| s.clone()).unwrap_or_default();
                let sample = monitor_sample(&tok, &mut s);
                // The probe's effect was complete in the previous sample, and this one, taken
                // entirely after it, has counted it too: end the run now rather than at the
                // vector's timeout (see `probes::HELD_COMM`).
                if held_before && !released {
                    released = true;
                    for pid in &sample.probes {
                        // SAFETY: killing a process that carries this world's unique token.
                        unsafe { libc::kill(*pid, libc::SIGKILL) };
                    }
                }
                held_before |= sample.held;
                s.held |= sample.held;
                for (p, before) in &watch {
                    if fs::read(p).ok() != *before && !s.live_changes.contains(p) {
                        s.live_changes.push(p.clone());
                    }
                }
                if let Ok(mut g) = stats.lock() {
                    *g = s;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    });
    let start = Instant::now();
    let mut stopped = false;
    let mut naive_killed = false;
    let status = loop {
        let mut st = 0;
        // SAFETY: non-blocking wait for our own child, also reporting stops.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG | libc::WUNTRACED) };
        if r == pid {
            if libc::WIFSTOPPED(st) {
                stopped = true;
                // SAFETY: continuing our own child.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                continue;
            }
            break st;
        }
        if r < 0 {
            return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
        }
        if let Some(t) = naive_timeout {
            if !naive_killed && start.elapsed() >= t {
                naive_killed = true;
                // SAFETY: killing our own direct child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        if start.elapsed() > RUN_DEADLINE {
            // SAFETY: killing our own child's process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            // SAFETY: reaping it.
            unsafe { libc::waitpid(pid, &mut st, 0) };
            done.store(true, Ordering::SeqCst);
            return Err(format!("{} did not finish within {RUN_DEADLINE:?}; killed", argv.join(" ").chars().take(200).collect::<String>()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Survivors may still hold the pipes (they should not: probes detach their stdio); wait a
    // bounded time for EOF, then carry on with what arrived.
    let grace = Instant::now() + Duration::from_secs(3);
    while !(out_r.is_finished() && err_r.is_finished()) && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(5));
    }
    done.store(true, Ordering::SeqCst);
    if let Some(m) = mon {
        let _ = m.join();
    }
    let stdout = if out_r.is_finished() { out_r.join().unwrap_or_default() } else { Vec::new() };
    let stderr = if err_r.is_finished() { err_r.join().unwrap_or_default() } else { Vec::new() };
    let monitor = stats.lock().map(|s| s.clone()).unwrap_or_default();
    Ok(Execution {
        stdout,
        stderr,
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: (libc::WIFSIGNALED(status) && !naive_killed).then(|| libc::WTERMSIG(status)),
        stopped,
        pid,
        monitor,
    })
}

/// Runs every vector at every level of `suite`, `jobs` at a time; calls `progress` after each.
#[must_use]
pub fn run_all(suite: &Suite, vectors: &[Vector], jobs: usize, progress: &(dyn Fn(&CaseResult) + Sync)) -> Vec<CaseResult> {
    let cases: Vec<(usize, &Vector, String)> = vectors
        .iter()
        .flat_map(|v| suite.levels.iter().map(move |l| (v, l.name.clone())))
        .enumerate()
        .map(|(i, (v, l))| (i, v, l))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some((idx, v, l)) = cases.get(i) else { break };
                let r = suite.run_case(v, l);
                progress(&r);
                if let Ok(mut g) = results.lock() {
                    g.push((*idx, r));
                }
            });
        }
    });
    let mut v = results.into_inner().unwrap_or_default();
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, r)| r).collect()
}

/// Levels, users and verdict counts of a result set.
#[must_use]
pub fn summarize(results: &[CaseResult]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in results {
        *m.entry(r.verdict.clone()).or_insert(0) += 1;
    }
    m
}

/// Distinct vector names in a result set.
#[must_use]
pub fn vector_names(results: &[CaseResult]) -> BTreeSet<String> {
    results.iter().map(|r| r.vector.clone()).collect()
}

/// Keeps `IntoRawFd` in scope for callers that leak descriptors deliberately.
pub fn leak_fd(fd: OwnedFd) -> i32 {
    fd.into_raw_fd()
}
