//! Capability detection (spec 3.5, 6.3): the platform; on Linux the Landlock ABI, seccomp, user
//! namespaces, and the cgroups the caller can use to bound the sandbox's processes and memory; on
//! macOS whether `/usr/bin/sandbox-exec` (Seatbelt) is there.
//!
//! Landlock is detected with `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`
//! (mainline kernels have no sysfs file for it): ENOSYS means not built, EOPNOTSUPP disabled at
//! boot. User namespaces are detected by a real probe (a throwaway `unshare` in a child), cached
//! for the process.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::policy::SandboxLevel;

/// State of Landlock on this kernel.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct LandlockSupport {
    /// ABI version, 0 when unavailable.
    pub abi: u32,
    /// `available`, `not-built` (ENOSYS), `disabled` (EOPNOTSUPP) or `error`.
    pub state: String,
    /// Detail (errno text).
    pub detail: String,
}

/// State of a yes/no feature with an explanation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Feature {
    /// Usable.
    pub available: bool,
    /// Why (or why not).
    pub detail: String,
}

/// A cgroup directory under which the caller can create a child with a `pids.max`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CgroupPids {
    /// The parent directory for per-run cgroups.
    pub base: PathBuf,
    /// `v1` or `v2`.
    pub version: String,
}

pub use crate::platform::Platform;

/// Where macOS keeps `sandbox-exec` (always run by absolute path).
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Everything detected about this machine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The operating system (and so the backend).
    #[serde(default)]
    pub platform: Platform,
    /// macOS: `/usr/bin/sandbox-exec` is there and executable (`None` elsewhere).
    #[serde(default)]
    pub seatbelt: Option<Feature>,
    /// Windows: the restricted-token backend can run commands here (`None` elsewhere).
    #[serde(default)]
    pub windows: Option<Feature>,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Landlock.
    pub landlock: LandlockSupport,
    /// seccomp filter mode.
    pub seccomp: Feature,
    /// Unprivileged user namespaces (probed; `None` when not probed).
    pub user_namespaces: Option<Feature>,
    /// A usable pids cgroup.
    pub cgroup_pids: Option<CgroupPids>,
    /// A usable memory cgroup (where per-run children can get a memory limit).
    #[serde(default)]
    pub cgroup_memory: Option<CgroupPids>,
    /// Physical memory (`MemTotal`), bytes; 0 when unknown.
    #[serde(default)]
    pub mem_total_bytes: u64,
    /// The kernel has overlayfs now (`/proc/filesystems`): built in or its module loaded. A
    /// sandbox in a user namespace cannot load the module, so without it the protected paths are
    /// reviewed in place instead of made private.
    #[serde(default)]
    pub overlay_fs: bool,
    /// The runner can answer the command's seccomp user notifications (`linux::unixgrant`):
    /// `pidfd_getfd` and `openat2` (Linux 5.6) and ptrace access to its own children (Yama).
    /// Without it unix sockets are socketpairs only and `--allow-unix-socket` is refused.
    /// `None`: not Linux.
    #[serde(default)]
    pub seccomp_broker: Option<Feature>,
    /// Effective uid is 0.
    pub is_root: bool,
    /// Effective uid.
    pub uid: u32,
    /// Effective gid.
    pub gid: u32,
}

/// The highest level implemented by this build.
pub const MAX_LEVEL_IN_BUILD: SandboxLevel = SandboxLevel::Full;

impl Capabilities {
    /// The highest level the kernel could support, ignoring what this build implements.
    #[must_use]
    pub fn kernel_level(&self) -> SandboxLevel {
        match self.platform {
            Platform::Linux => {}
            // Seatbelt confines files, network, processes and signals like Standard does; there
            // is nothing like namespaces for Full.
            Platform::Macos if self.seatbelt.as_ref().is_some_and(|f| f.available) => return SandboxLevel::Standard,
            // The unelevated tier confines writes and credentials, not reads or the network:
            // reported as minimal.
            Platform::Windows if self.windows.as_ref().is_some_and(|f| f.available) => return SandboxLevel::Minimal,
            Platform::Macos | Platform::Windows => return SandboxLevel::None,
        }
        let userns = self.user_namespaces.as_ref().is_some_and(|u| u.available);
        match (self.landlock.abi, self.seccomp.available) {
            (abi, true) if abi >= 1 && userns => SandboxLevel::Full,
            (abi, true) if abi >= 1 => SandboxLevel::Standard,
            (_, true) => SandboxLevel::Minimal,
            _ => SandboxLevel::None,
        }
    }

    /// The highest level this build can enforce here.
    #[must_use]
    pub fn best_level(&self) -> SandboxLevel {
        self.kernel_level().min(MAX_LEVEL_IN_BUILD)
    }

    /// What is missing for `level`, as "what" and "how to get it" sentences.
    #[must_use]
    pub fn missing_for(&self, level: SandboxLevel) -> Vec<String> {
        let mut m = Vec::new();
        match self.platform {
            Platform::Linux => {}
            Platform::Macos => {
                match &self.seatbelt {
                    Some(f) if f.available => {}
                    Some(f) => m.push(format!("Seatbelt is unavailable ({}); macOS ships {SANDBOX_EXEC}", f.detail)),
                    None => m.push(format!("{SANDBOX_EXEC} was not looked for")),
                }
                if level >= SandboxLevel::Full {
                    m.push("level full needs Linux namespaces; macOS offers standard (Seatbelt)".into());
                }
                return m;
            }
            Platform::Windows => {
                match &self.windows {
                    Some(f) if f.available => {}
                    Some(f) => m.push(format!("the Windows backend cannot run commands here: {}", f.detail)),
                    None => m.push("the Windows backend was not looked for".into()),
                }
                if level >= SandboxLevel::Standard {
                    m.push("levels standard and full confine reads and the network; the Windows backend's unelevated tier confines writes and credentials only (minimal)".into());
                }
                return m;
            }
        }
        if level >= SandboxLevel::Minimal && !self.seccomp.available {
            m.push(format!("seccomp filters are unavailable ({}); use a kernel built with CONFIG_SECCOMP_FILTER", self.seccomp.detail));
        }
        if level >= SandboxLevel::Standard && self.landlock.abi == 0 {
            let how = match self.landlock.state.as_str() {
                "disabled" => "add landlock to the kernel's lsm= boot parameter (e.g. lsm=landlock,lockdown,yama,apparmor,bpf)",
                "not-built" => "use a kernel ≥ 5.13 built with CONFIG_SECURITY_LANDLOCK (Debian/Ubuntu cloud kernels ≥ 6.1 have it)",
                _ => "check the kernel's Landlock support",
            };
            m.push(format!("Landlock is {} ({}); {how}", self.landlock.state, self.landlock.detail));
        }
        if level >= SandboxLevel::Full {
            match &self.user_namespaces {
                Some(u) if u.available => {}
                Some(u) => m.push(format!("user namespaces are unavailable ({}); allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, or the AppArmor userns restriction)", u.detail)),
                None => m.push("user namespaces were not probed".into()),
            }

        }
        m
    }
}

#[cfg(target_os = "linux")]
fn errno_text(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// Detects the Landlock ABI.
#[must_use]
pub fn detect_landlock() -> LandlockSupport {
    #[cfg(target_os = "linux")]
    {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: a NULL attribute with size 0 and the VERSION flag only queries the ABI.
        let r = unsafe {
            libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION)
        };
        if r >= 0 {
            return LandlockSupport { abi: r as u32, state: "available".into(), detail: format!("ABI {r}") };
        }
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let state = match e {
            libc::ENOSYS => "not-built",
            libc::EOPNOTSUPP => "disabled",
            _ => "error",
        };
        LandlockSupport { abi: 0, state: state.into(), detail: errno_text(e) }
    }
    #[cfg(not(target_os = "linux"))]
    LandlockSupport { abi: 0, state: "not-built".into(), detail: "not Linux".into() }
}

/// Whether the runner can answer seccomp user notifications (see
/// [`Capabilities::seccomp_broker`]). Probed once per process (a few system calls and a read of
/// Yama's setting, which do not change under it), not on every run.
#[must_use]
pub fn detect_seccomp_broker(is_root: bool) -> Feature {
    #[cfg(target_os = "linux")]
    {
        // Keyed by root-ness: Yama's answer depends on it.
        static CACHE: [OnceLock<Feature>; 2] = [OnceLock::new(), OnceLock::new()];
        CACHE[usize::from(is_root)]
            .get_or_init(|| match crate::linux::probe::check_support(is_root) {
                Ok(()) => Feature { available: true, detail: "pidfd_getfd, openat2, ptrace access to the command".into() },
                Err(e) => Feature { available: false, detail: e },
            })
            .clone()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = is_root;
        Feature { available: false, detail: "not Linux".into() }
    }
}

/// Detects seccomp filter support.
#[must_use]
pub fn detect_seccomp() -> Feature {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_GET_SECCOMP takes no pointer arguments.
        let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
        if mode < 0 {
            return Feature { available: false, detail: format!("PR_GET_SECCOMP: {}", std::io::Error::last_os_error()) };
        }
        let action: u32 = libc::SECCOMP_RET_ERRNO;
        // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from the pointer.
        let r = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_ACTION_AVAIL, 0, &action as *const u32) };
        if r == 0 {
            let already = if mode == 2 { " (this process already runs under a filter; filters stack)" } else { "" };
            Feature { available: true, detail: format!("filter mode{already}") }
        } else {
            Feature { available: false, detail: format!("SECCOMP_GET_ACTION_AVAIL: {}", std::io::Error::last_os_error()) }
        }
    }
    #[cfg(not(target_os = "linux"))]
    Feature { available: false, detail: "not Linux".into() }
}

/// Probes unprivileged user namespaces with a throwaway `unshare(CLONE_NEWUSER)` in a child.
#[must_use]
pub fn probe_user_namespaces() -> Feature {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the child only calls async-signal-safe functions (unshare, _exit).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Feature { available: false, detail: format!("fork: {}", std::io::Error::last_os_error()) };
        }
        if pid == 0 {
            // SAFETY: child side of fork.
            unsafe {
                let r = libc::unshare(libc::CLONE_NEWUSER);
                let code = if r == 0 { 0 } else { *libc::__errno_location() & 0x7f };
                libc::_exit(code);
            }
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            return Feature { available: true, detail: "unshare(CLONE_NEWUSER) succeeded in a probe".into() };
        }
        let e = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 0 };
        let mut why = format!("unshare(CLONE_NEWUSER): {}", errno_text(e));
        if let Ok(v) = std::fs::read_to_string("/proc/sys/user/max_user_namespaces") {
            if v.trim() == "0" {
                why.push_str("; user.max_user_namespaces = 0");
            }
        }
        if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone") {
            if v.trim() == "0" {
                why.push_str("; kernel.unprivileged_userns_clone = 0");
            }
        }
        if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") {
            if v.trim() == "1" {
                why.push_str("; AppArmor restricts unprivileged user namespaces");
            }
        }
        Feature { available: false, detail: why }
    }
    #[cfg(not(target_os = "linux"))]
    Feature { available: false, detail: "not Linux".into() }
}

/// Finds a pids cgroup the caller may create children in.
#[must_use]
pub fn detect_cgroup_pids() -> Option<CgroupPids> {
    let (m, o) = cgroup_sources()?;
    detect_cgroup(&m, &o, "pids")
}

/// `/proc/self/mountinfo` and `/proc/self/cgroup` (Linux), read once for every controller.
fn cgroup_sources() -> Option<(String, String)> {
    if Platform::current() != Platform::Linux {
        return None;
    }
    Some((read_small("/proc/self/mountinfo")?, read_small("/proc/self/cgroup")?))
}

/// `name` is listed in `/proc/filesystems`.
#[must_use]
pub fn has_filesystem(name: &str) -> bool {
    read_small("/proc/filesystems").is_some_and(|t| t.lines().any(|l| l.split_whitespace().last() == Some(name)))
}

/// `MemTotal` from `/proc/meminfo`, in bytes (0 when unknown).
#[must_use]
pub fn mem_total_bytes() -> u64 {
    read_small("/proc/meminfo")
        .and_then(|m| {
            m.lines().find_map(|l| l.strip_prefix("MemTotal:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()))
        })
        .map_or(0, |kb| kb * 1024)
}

/// Finds a cgroup with `controller` the caller may create children in: on v1 the controller's
/// own hierarchy at the caller's path in it; on v2 the caller's cgroup when it is the root of
/// the hierarchy seen (a container or a delegated namespace) and delegates the controller.
fn detect_cgroup(mountinfo: &str, own: &str, controller: &str) -> Option<CgroupPids> {
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else { continue };
        let mut post = post.split_whitespace();
        let fstype = post.next().unwrap_or("");
        let _src = post.next();
        let superopts = post.next().unwrap_or("");
        let mount_point = pre.split_whitespace().nth(4).unwrap_or("");
        if fstype == "cgroup" && superopts.split(',').any(|o| o == controller) {
            let rel = own.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let _id = f.next();
                let ctrls = f.next()?;
                let path = f.next()?;
                ctrls.split(',').any(|c| c == controller).then(|| path.to_string())
            })?;
            let base = crate::host::mount_point(mount_point.as_bytes()).join(rel.trim_start_matches('/'));
            if base.join("cgroup.procs").exists() && writable_by_caller(&base) {
                return Some(CgroupPids { base, version: "v1".into() });
            }
        }
        if fstype == "cgroup2" {
            let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
            let base = crate::host::mount_point(mount_point.as_bytes()).join(rel.trim_start_matches('/'));
            let ctl = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
            // Only where the controller is already delegated to children of our own cgroup and
            // we may write.
            if ctl.split_whitespace().any(|c| c == controller) && writable_by_caller(&base) && rel.trim() == "/" {
                return Some(CgroupPids { base, version: "v2".into() });
            }
        }
    }
    None
}

/// The variable that opts in to the experimental Windows backend (`1`).
pub const EXPERIMENTAL_WINDOWS_ENV: &str = "LOCALGPT_EXPERIMENTAL_WINDOWS";

/// Whether the Windows backend runs commands here. Its glue has never run on Windows in this
/// project's CI, so by default this build refuses (fail closed) rather than run a command under
/// artefacts nobody has seen enforced; `explain --platform windows` shows them. With
/// `LOCALGPT_EXPERIMENTAL_WINDOWS=1` the user opts in, and `status` says what that means.
#[must_use]
pub fn detect_windows() -> Feature {
    if std::env::var_os(EXPERIMENTAL_WINDOWS_ENV).is_some_and(|v| v == "1") {
        return Feature {
            available: true,
            detail: format!("experimental, enabled by {EXPERIMENTAL_WINDOWS_ENV}=1: not verified on Windows by this project's CI; every ACE is read back and the command's token checked before it runs"),
        };
    }
    Feature { available: false, detail: format!("experimental: the restricted-token backend has not been verified on Windows; set {EXPERIMENTAL_WINDOWS_ENV}=1 to use it anyway") }
}

/// Looks for `/usr/bin/sandbox-exec` (macOS).
#[must_use]
pub fn detect_seatbelt() -> Feature {
    match std::fs::metadata(SANDBOX_EXEC) {
        Ok(m) if m.is_file() => Feature { available: true, detail: format!("{SANDBOX_EXEC} present") },
        Ok(_) => Feature { available: false, detail: format!("{SANDBOX_EXEC} is not a file") },
        Err(e) => Feature { available: false, detail: format!("{SANDBOX_EXEC}: {e}") },
    }
}

#[cfg(not(unix))]
fn kernel_release() -> String {
    String::new()
}

#[cfg(unix)]
fn kernel_release() -> String {
    // SAFETY: uname fills a zeroed utsname; release is NUL-terminated by the kernel.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return String::new();
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr()).to_string_lossy().into_owned()
    }
}

#[cfg(unix)]
fn writable_by_caller(p: &std::path::Path) -> bool {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok();
    // SAFETY: access() with a valid C string.
    c.is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0)
}

#[cfg(not(unix))]
fn writable_by_caller(_: &std::path::Path) -> bool {
    false
}

pub use crate::host::effective_ids;

pub(crate) use crate::host::read_small;

/// A cheap prediction of whether unprivileged user namespaces work, from sysctls. The helper's own
/// `unshare` is the real test at run time; when it fails the runner falls back to Standard, says
/// why, and remembers it for the process ([`record_userns_failure`]).
#[must_use]
pub fn predict_user_namespaces() -> Feature {
    if let Some(why) = USERNS_FAILURE.get() {
        return Feature { available: false, detail: why.clone() };
    }
    let root = effective_ids().0 == 0 && cfg!(unix);
    predict_userns_from(|p| read_small(p).map(|s| s.trim().to_string()), root)
}

/// The prediction itself, over a sysctl reader (pure, for tests).
pub fn predict_userns_from(read: impl Fn(&str) -> Option<String>, root: bool) -> Feature {
    let max = read("/proc/sys/user/max_user_namespaces");
    if max.as_deref() == Some("0") {
        return Feature { available: false, detail: "user.max_user_namespaces = 0".into() };
    }
    if !root && read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Feature { available: false, detail: "kernel.unprivileged_userns_clone = 0".into() };
    }
    if !root && read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        // Ubuntu 23.10 and later: only programs whose AppArmor profile has the `userns` rule may
        // create one. A process with a profile attached (its label is not `unconfined`) may have
        // that rule: the helper's unshare decides then.
        let label = read("/proc/self/attr/apparmor/current").or_else(|| read("/proc/self/attr/current")).unwrap_or_default();
        let label = label.trim_end_matches('\0').trim();
        if label.is_empty() || label == "unconfined" {
            return Feature {
                available: false,
                detail: format!(
                    "AppArmor restricts unprivileged user namespaces (sysctl kernel.apparmor_restrict_unprivileged_userns = 1) and this binary runs without an AppArmor profile that allows them (label {:?}): install the profile shipped in packaging/apparmor (docs/protections.md: Ubuntu 23.10 and later) to get Full",
                    if label.is_empty() { "none" } else { label })
            };
        }
    }
    if max.is_none() && read("/proc/self/ns/user").is_none() {
        return Feature { available: false, detail: "kernel built without user namespaces".into() };
    }
    Feature { available: true, detail: "predicted from sysctls; confirmed by the helper's unshare at run time".into() }
}

static USERNS_FAILURE: OnceLock<String> = OnceLock::new();

static CGROUP_FAILURE: OnceLock<String> = OnceLock::new();

/// Remembers, for this process, that creating the per-run cgroup failed (and why): later
/// detections report no usable cgroup.
pub fn record_cgroup_failure(why: &str) {
    let _ = CGROUP_FAILURE.set(why.to_string());
}

/// Remembers, for this process, that creating a user namespace failed (and why).
pub fn record_userns_failure(why: &str) {
    let _ = USERNS_FAILURE.set(why.to_string());
}

/// Detects everything without forking (user namespaces predicted): what a run needs.
#[must_use]
pub fn detect_quick() -> Capabilities {
    let (uid, gid) = effective_ids();
    let platform = Platform::current();
    let linux = platform == Platform::Linux;
    let sources = cgroup_sources();
    Capabilities {
        platform,
        seatbelt: (platform == Platform::Macos).then(detect_seatbelt),
        windows: (platform == Platform::Windows).then(detect_windows),
        kernel: kernel_release(),
        landlock: detect_landlock(),
        seccomp: detect_seccomp(),
        user_namespaces: linux.then(predict_user_namespaces),
        cgroup_pids: sources.as_ref().filter(|_| CGROUP_FAILURE.get().is_none()).and_then(|(m, o)| detect_cgroup(m, o, "pids")),
        cgroup_memory: sources.as_ref().filter(|_| CGROUP_FAILURE.get().is_none()).and_then(|(m, o)| detect_cgroup(m, o, "memory")),
        mem_total_bytes: mem_total_bytes(),
        overlay_fs: linux && has_filesystem("overlay"),
        seccomp_broker: linux.then(|| detect_seccomp_broker(uid == 0)),
        is_root: cfg!(unix) && uid == 0,
        uid,
        gid,
    }
}

/// `cached` (what [`detect_quick`] returned earlier in this process) as a run made now would
/// detect it, without reading `/proc` again: what a process can change in its own life is looked
/// at again, the machine's kernel features are not. A change of effective uid or gid (a host that
/// drops privileges) detects everything again; a user namespace or a per-run cgroup that failed
/// since ([`record_userns_failure`], [`record_cgroup_failure`]) is unavailable, as in a fresh
/// detection.
#[must_use]
pub fn refresh(cached: &Capabilities) -> Capabilities {
    refresh_from(cached, effective_ids(), USERNS_FAILURE.get().map(String::as_str), CGROUP_FAILURE.get().is_some()).unwrap_or_else(detect_quick)
}

/// [`refresh`] over the process's ids and failure records (pure, for tests); `None` when
/// everything must be detected again.
fn refresh_from(cached: &Capabilities, ids: (u32, u32), userns_failure: Option<&str>, cgroup_failed: bool) -> Option<Capabilities> {
    if ids != (cached.uid, cached.gid) {
        return None;
    }
    let mut c = cached.clone();
    if let (Some(why), Some(userns)) = (userns_failure, c.user_namespaces.as_mut()) {
        *userns = Feature { available: false, detail: why.to_string() };
    }
    if cgroup_failed {
        c.cgroup_pids = None;
        c.cgroup_memory = None;
    }
    Some(c)
}

/// The capabilities a machine of `platform` is assumed to have when a plan is made for it
/// elsewhere (`localgpt sandbox explain --platform macos` on Linux): the backend present, the
/// caller's own uid and environment. On `platform`'s own machine this is [`detect_quick`].
#[must_use]
pub fn assumed_for(platform: Platform) -> Capabilities {
    if platform == Platform::current() {
        return detect_quick();
    }
    let (uid, gid) = effective_ids();
    let absent = |what: &str| Feature { available: false, detail: format!("not {what}") };
    Capabilities {
        platform,
        seatbelt: (platform == Platform::Macos).then(|| Feature { available: true, detail: format!("assumed: {SANDBOX_EXEC} ships with macOS") }),
        windows: (platform == Platform::Windows).then(|| Feature { available: true, detail: "assumed: restricted tokens, labels and job objects ship with Windows".into() }),
        kernel: String::new(),
        landlock: LandlockSupport { abi: 0, state: "not-built".into(), detail: "not Linux".into() },
        seccomp: absent("Linux"),
        user_namespaces: None,
        cgroup_pids: None,
        cgroup_memory: None,
        mem_total_bytes: 0,
        overlay_fs: false,
        seccomp_broker: None,
        is_root: uid == 0,
        uid,
        gid,
    }
}

/// Detects every capability, probing user namespaces once per process (cached).
#[must_use]
pub fn detect_sandbox_capabilities() -> Capabilities {
    static CACHE: OnceLock<Capabilities> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let mut c = detect_quick();
            if c.platform == Platform::Linux {
                c.user_namespaces = Some(probe_user_namespaces());
            }
            c
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(abi: u32, seccomp: bool, userns: bool) -> Capabilities {
        Capabilities {
            platform: Platform::Linux,
            seatbelt: None,
            windows: None,
            kernel: "x".into(),
            landlock: LandlockSupport { abi, state: if abi > 0 { "available" } else { "disabled" }.into(), detail: String::new() },
            seccomp: Feature { available: seccomp, detail: String::new() },
            user_namespaces: Some(Feature { available: userns, detail: "probe".into() }),
            cgroup_pids: None,
            cgroup_memory: None,
            mem_total_bytes: 8 << 30,
            overlay_fs: true,
            seccomp_broker: Some(Feature { available: true, detail: String::new() }),
            is_root: false,
            uid: 1000,
            gid: 1000,
        }
    }

    #[test]
    fn levels_from_features() {
        assert_eq!(caps(7, true, true).kernel_level(), SandboxLevel::Full);
        assert_eq!(caps(7, true, true).best_level(), SandboxLevel::Full);
        assert!(caps(7, true, false).missing_for(SandboxLevel::Full)[0].contains("user namespaces"));
        assert_eq!(caps(7, true, false).kernel_level(), SandboxLevel::Standard);
        assert_eq!(caps(0, true, true).kernel_level(), SandboxLevel::Minimal);
        assert_eq!(caps(0, false, false).kernel_level(), SandboxLevel::None);
        let m = caps(0, true, false).missing_for(SandboxLevel::Standard);
        assert!(m[0].contains("lsm="), "{m:?}");
    }

    #[test]
    fn refresh_keeps_the_machine_and_looks_again_at_the_process() {
        let mut cached = caps(7, true, true);
        cached.cgroup_pids = Some(CgroupPids { base: "/sys/fs/cgroup/x".into(), version: "v2".into() });
        cached.cgroup_memory = cached.cgroup_pids.clone();
        // Nothing changed: the same capabilities.
        assert_eq!(refresh_from(&cached, (1000, 1000), None, false).as_ref(), Some(&cached));
        // Another uid or gid: everything detected again.
        assert_eq!(refresh_from(&cached, (0, 1000), None, false), None);
        assert_eq!(refresh_from(&cached, (1000, 0), None, false), None);
        // A user namespace that failed since: unavailable, saying why; nothing else changes.
        let r = refresh_from(&cached, (1000, 1000), Some("unshare: EPERM"), false).unwrap();
        let u = r.user_namespaces.as_ref().unwrap();
        assert!(!u.available && u.detail == "unshare: EPERM");
        assert_eq!(r.kernel_level(), SandboxLevel::Standard);
        assert_eq!(r.cgroup_pids, cached.cgroup_pids);
        // A per-run cgroup refused since: no cgroup controller.
        let r = refresh_from(&cached, (1000, 1000), None, true).unwrap();
        assert!(r.cgroup_pids.is_none() && r.cgroup_memory.is_none());
        assert_eq!(r.user_namespaces, cached.user_namespaces);
        // Off Linux there is no namespace to mark.
        let mut mac = cached.clone();
        mac.user_namespaces = None;
        assert!(refresh_from(&mac, (1000, 1000), Some("x"), false).unwrap().user_namespaces.is_none());
    }

    #[test]
    fn userns_prediction_from_sysctls() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            move |p: &str| pairs.iter().find(|(k, _)| p.ends_with(k)).map(|(_, v)| (*v).to_string())
        };
        assert!(predict_userns_from(with(&[("max_user_namespaces", "100")]), false).available);
        let f = predict_userns_from(with(&[("max_user_namespaces", "0")]), true);
        assert!(!f.available && f.detail.contains("max_user_namespaces = 0"));
        assert!(!predict_userns_from(with(&[("max_user_namespaces", "9"), ("unprivileged_userns_clone", "0")]), false).available);
        assert!(predict_userns_from(with(&[("max_user_namespaces", "9"), ("unprivileged_userns_clone", "0")]), true).available);
        let a = predict_userns_from(with(&[("max_user_namespaces", "9"), ("apparmor_restrict_unprivileged_userns", "1")]), false);
        assert!(!a.available && a.detail.contains("AppArmor") && a.detail.contains("apparmor_restrict_unprivileged_userns = 1") && a.detail.contains("packaging/apparmor"), "{}", a.detail);
        let a = predict_userns_from(with(&[("max_user_namespaces", "9"), ("apparmor_restrict_unprivileged_userns", "1"), ("attr/apparmor/current", "unconfined")]), false);
        assert!(!a.available, "{}", a.detail);
        // The shipped profile attached: the helper's unshare decides.
        let a = predict_userns_from(with(&[("max_user_namespaces", "9"), ("apparmor_restrict_unprivileged_userns", "1"), ("attr/apparmor/current", "localgpt (unconfined)")]), false);
        assert!(a.available, "{}", a.detail);
        assert!(!predict_userns_from(with(&[]), false).available);
    }

    #[test]
    fn detection_runs_here() {
        let c = detect_quick();
        assert!(!c.kernel.is_empty());
        if c.landlock.abi == 0 {
            assert_ne!(c.landlock.state, "available");
        }
    }
}
