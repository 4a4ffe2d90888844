//! Apply a [`HelperPlan`] to the calling process. Thin and ordered once: rlimits → close fds →
//! `no_new_privs` → Landlock → drop capabilities → seccomp. Decides nothing; every failure is an
//! error (fail closed), and the caller must not exec when this fails.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use crate::linux::seccomp::unpack;
pub use crate::run::report::AppliedReport;
use crate::plan::{HelperLandlock, HelperPlan};

/// The fd the helper reports on (setup errors, exec errors, what was applied).
pub use crate::run::report::REPORT_FD;

fn os_err(step: &str) -> String {
    format!("{step}: {}", std::io::Error::last_os_error())
}

/// Sets every rlimit (resource, soft, hard): the hard one capped at the current hard limit, the
/// soft one at the new hard one.
///
/// # Errors
/// The failing step.
pub fn apply_rlimits(rlimits: &[(i32, u64, u64)]) -> Result<(), String> {
    for &(res, soft, value) in rlimits {
        let mut cur = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: valid pointer to an rlimit struct.
        if unsafe { libc::getrlimit(res as _, &mut cur) } != 0 {
            return Err(os_err("getrlimit"));
        }
        let v = if cur.rlim_max == libc::RLIM_INFINITY { value } else { value.min(cur.rlim_max) };
        let lim = libc::rlimit { rlim_cur: soft.min(v), rlim_max: v };
        // SAFETY: valid pointer to an rlimit struct.
        if unsafe { libc::setrlimit(res as _, &lim) } != 0 {
            return Err(os_err(&format!("setrlimit({res})")));
        }
    }
    Ok(())
}

/// Closes every fd from `first` up.
///
/// # Errors
/// When neither `close_range` nor the `/proc/self/fd` fallback works.
pub fn close_fds_from(first: u32) -> Result<(), String> {
    // SAFETY: close_range only closes descriptors.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    if r == 0 {
        return Ok(());
    }
    let dir = std::fs::read_dir("/proc/self/fd").map_err(|e| format!("close fds: {e}"))?;
    let fds: Vec<i32> = dir
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .filter(|&fd: &i32| fd >= first as i32)
        .collect();
    for fd in fds {
        // SAFETY: closing a descriptor number; the read_dir fd is already gone or harmlessly closed.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// A Landlock ruleset with every rule of a [`HelperLandlock`] added, not yet enforced.
pub(crate) struct BuiltRuleset {
    pub(crate) fd: std::os::fd::OwnedFd,
    /// How many rules were added (a path that vanished since the plan was made is not).
    pub(crate) applied: usize,
}

/// The fd a ruleset built before the helper started is kept at, in the helper and in the
/// command's process until it is enforced (the first one above the report fd).
pub(crate) const PREBUILT_FD: i32 = REPORT_FD + 1;

/// A ruleset the runner handed to the helper (from its cache of built rulesets,
/// [`crate::linux::rulesets`], through the zygote or its own fork when single-threaded), and the
/// Landlock part of the plan it was built from: the command's process enforces it instead of
/// building its own when its plan's Landlock part is that one. Only for a plan without namespaces: its rules were opened in the
/// runner's mount namespace, which is then the command's.
struct Prebuilt {
    landlock: HelperLandlock,
    ruleset: BuiltRuleset,
}

static PREBUILT: std::sync::Mutex<Option<Prebuilt>> = std::sync::Mutex::new(None);

fn prebuilt() -> std::sync::MutexGuard<'static, Option<Prebuilt>> {
    PREBUILT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hands `ruleset`, built from `landlock`, to the helper this process becomes (the zygote's
/// clone, or a runner about to fork its helper, before [`crate::run::spawn::become_helper`],
/// which keeps it at [`PREBUILT_FD`]; the runner withdraws its own copy once it has forked).
pub(crate) fn offer_prebuilt(landlock: HelperLandlock, ruleset: BuiltRuleset) {
    *prebuilt() = Some(Prebuilt { landlock, ruleset });
}

/// Forgets (and closes) a ruleset offered with [`offer_prebuilt`]. Whether there was one.
pub(crate) fn withdraw_prebuilt() -> bool {
    prebuilt().take().is_some()
}

/// In the helper, before its fds are put in place: the descriptor of the offered ruleset (to be
/// moved to [`PREBUILT_FD`]), if any.
pub(crate) fn prebuilt_fd() -> Option<i32> {
    use std::os::fd::AsRawFd;
    prebuilt().as_ref().map(|p| p.ruleset.fd.as_raw_fd())
}

/// In the helper, once the offered ruleset's descriptor was duplicated to
/// [`PREBUILT_FD`]: the offer now names that one (its old number is closed with the others
/// above it, so it is forgotten here rather than closed).
pub(crate) fn keep_prebuilt_at_its_fd() {
    use std::os::fd::FromRawFd;
    if let Some(p) = prebuilt().as_mut() {
        // SAFETY: PREBUILT_FD is the duplicate the caller just made and owns nothing else.
        let moved = unsafe { std::os::fd::OwnedFd::from_raw_fd(PREBUILT_FD) };
        std::mem::forget(std::mem::replace(&mut p.ruleset.fd, moved));
    }
}

/// Whether a ruleset was offered (the first fd to close in the command's process is then the
/// one above it).
pub(crate) fn has_prebuilt() -> bool {
    prebuilt().is_some()
}

/// Builds the ruleset of `ll`: created by the crate with every handled right a hard
/// requirement (an ABI without one of them is an error, so the ruleset enforces all of them),
/// each rule added on an `O_PATH` descriptor of its path.
///
/// # Errors
/// The failing step; a rule's path that vanished since the plan was made is skipped instead
/// (dropping a grant can only remove access, never add it).
pub(crate) fn build_ruleset(ll: &HelperLandlock) -> Result<BuiltRuleset, String> {
    build_ruleset_seeing(ll, &mut |_| {})
}

/// [`build_ruleset`], showing `seen` each rule's `O_PATH` descriptor as it is added (`None` for
/// a rule skipped because its path vanished), in the order of `ll.rules`.
///
/// # Errors
/// As [`build_ruleset`].
pub(crate) fn build_ruleset_seeing(ll: &HelperLandlock, seen: &mut dyn FnMut(Option<i32>)) -> Result<BuiltRuleset, String> {
    use landlock::{AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope};
    use std::os::fd::{AsRawFd, OwnedFd};

    /// uapi `struct landlock_path_beneath_attr` (packed).
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    /// uapi `LANDLOCK_RULE_PATH_BENEATH`.
    const RULE_PATH_BENEATH: libc::c_int = 1;

    /// `open(path, O_PATH | O_CLOEXEC)`, what the crate's `PathFd` does; `buf` is reused for the
    /// C string; the caller keeps the descriptor in [`RuleFds`].
    fn open_path(path: &std::path::Path, buf: &mut Vec<u8>) -> std::io::Result<i32> {
        buf.clear();
        buf.extend_from_slice(path.as_os_str().as_bytes());
        buf.push(0);
        let c = std::ffi::CStr::from_bytes_with_nul(buf).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid C string; the returned descriptor is kept by `RuleFds`.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(fd)
    }

    /// The rules' `O_PATH` descriptors, closed together rather than one `close` per rule (a rule
    /// costs an open, an add and a close, and a Standard plan has ~180 of them): the kernel gives
    /// the lowest free numbers, so they are normally one run of numbers and one `close_range`
    /// closes them; otherwise (a descriptor left open in between, as the ablation build leaves
    /// inherited ones) each is closed on its own. Only what was opened here is closed. They are
    /// close-on-exec too: none reaches the command whatever happens here.
    struct RuleFds(Vec<i32>);
    impl RuleFds {
        fn close(&mut self) {
            let (Some(&lo), Some(&hi)) = (self.0.iter().min(), self.0.iter().max()) else { return };
            // SAFETY: closes only descriptors opened here: the run lo..=hi holds nothing else
            // when it holds as many numbers as were kept (each kept number is distinct).
            let one_run = usize::try_from(hi - lo).is_ok_and(|n| n + 1 == self.0.len())
                && unsafe { libc::syscall(libc::SYS_close_range, lo as u32, hi as u32, 0u32) } == 0;
            if !one_run {
                for &fd in &self.0 {
                    // SAFETY: a descriptor opened here and not closed yet.
                    unsafe { libc::close(fd) };
                }
            }
            self.0.clear();
        }
    }
    impl Drop for RuleFds {
        fn drop(&mut self) {
            self.close();
        }
    }

    let fs = BitFlags::<AccessFs>::from_bits(ll.fs as _).map_err(|e| format!("landlock fs rights: {e}"))?;
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(fs)
        .map_err(|e| format!("landlock handle fs: {e}"))?;
    if ll.net != 0 {
        let net = BitFlags::<AccessNet>::from_bits(ll.net as _).map_err(|e| format!("landlock net rights: {e}"))?;
        rs = rs.handle_access(net).map_err(|e| format!("landlock handle net: {e}"))?;
    }
    if ll.scopes != 0 {
        let sc = BitFlags::<Scope>::from_bits(ll.scopes as _).map_err(|e| format!("landlock scopes: {e}"))?;
        rs = rs.scope(sc).map_err(|e| format!("landlock scope: {e}"))?;
    }
    // Path rules go through `landlock_add_rule` on the ruleset's fd, and it is enforced by
    // `landlock_restrict_self` on it: the crate's `add_rule` also `fstat`s every path to reject
    // directory-only rights on a file, which the plan already accounts for and the kernel
    // rejects anyway (EINVAL); and a ruleset built before the helper started (see
    // [`offer_prebuilt`]) reaches the command's process as a descriptor, not as the crate's
    // value. Creation stays the crate's: with hard requirements it fails rather than create a
    // ruleset that handles less than asked, so whatever it returns is enforced whole.
    let fd = rs
        .create()
        .map_err(|e| format!("landlock create: {e}"))
        .and_then(|c| Option::<OwnedFd>::from(c).ok_or_else(|| "landlock create: no ruleset".to_string()))?;
    let mut buf = Vec::new();
    let mut applied = 0;
    let mut fds = RuleFds(Vec::with_capacity(ll.rules.len().min(1024)));
    for (path, access) in &ll.rules {
        // The crate's checks before its syscall: known rights, not empty, all handled.
        let a = BitFlags::<AccessFs>::from_bits(*access as _).map_err(|e| format!("landlock rule rights: {e}"))?;
        if a.is_empty() || !fs.contains(a) {
            return Err(format!("landlock rule {}: rights {access:#x} empty or not handled ({:#x})", path.display(), ll.fs));
        }
        let opened = match open_path(path, &mut buf) {
            // Out of descriptors (a low `max_open_files`): the kept ones are closed first.
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) && !fds.0.is_empty() => {
                fds.close();
                open_path(path, &mut buf)
            }
            r => r,
        };
        let rule_fd = match opened {
            Ok(fd) => {
                fds.0.push(fd);
                fd
            }
            // A path that vanished since the plan was made (the snapshot expansion around a
            // denied path lists every entry of e.g. ~/.cargo, where cargo creates and deletes
            // `.global-cache-journal` and lock files) is simply not granted: dropping a grant
            // can only remove access, never add it.
            Err(_) if matches!(std::fs::symlink_metadata(path), Err(ref m) if m.kind() == std::io::ErrorKind::NotFound) => {
                seen(None);
                continue;
            }
            Err(e) => return Err(format!("landlock open {}: {e}", path.display())),
        };
        seen(Some(rule_fd));
        let attr = PathBeneathAttr { allowed_access: *access, parent_fd: rule_fd };
        // SAFETY: both descriptors are open and `attr` outlives the call, which only reads it.
        let r = unsafe { libc::syscall(libc::SYS_landlock_add_rule, fd.as_raw_fd(), RULE_PATH_BENEATH, &attr as *const PathBeneathAttr, 0u32) };
        if r != 0 {
            return Err(format!("landlock rule {}: {}", path.display(), std::io::Error::last_os_error()));
        }
        applied += 1;
    }
    Ok(BuiltRuleset { fd, applied })
}

/// Enforces `ll` on the calling process (which has set `no_new_privs`): the ruleset offered for
/// exactly this Landlock part by the runner, or one built now. Returns how many rules it has.
fn landlock(ll: &HelperLandlock) -> Result<usize, String> {
    use std::os::fd::AsRawFd;
    let offered = prebuilt().take();
    let built = match offered {
        Some(p) if p.landlock == *ll => p.ruleset,
        _ => build_ruleset(ll)?,
    };
    // SAFETY: a ruleset descriptor we own; no flags.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, built.fd.as_raw_fd(), 0u32) } != 0 {
        return Err(os_err("landlock restrict_self"));
    }
    // SAFETY: an integer query.
    if unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } != 1 {
        return Err("landlock: no_new_privs not set".into());
    }
    Ok(built.applied)
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_V3: u32 = 0x2008_0522;

fn permitted_caps() -> Result<u64, String> {
    let hdr = CapHeader { version: CAP_V3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget with a v3 header and two data elements.
    if unsafe { libc::syscall(libc::SYS_capget, &hdr as *const CapHeader, data.as_mut_ptr()) } != 0 {
        return Err(os_err("capget"));
    }
    Ok(u64::from(data[0].permitted) | (u64::from(data[1].permitted) << 32))
}

/// Drops every capability: bounding set, ambient set, then effective/permitted/inheritable.
///
/// # Errors
/// The failing prctl/capset.
pub fn drop_capabilities() -> Result<(), String> {
    // Capability numbers are contiguous from 0 to the kernel's CAP_LAST_CAP, and
    // PR_CAPBSET_DROP fails with EINVAL exactly past it: no need to read
    // /proc/sys/kernel/cap_last_cap.
    for cap in 0..64u32 {
        // SAFETY: PR_CAPBSET_DROP takes an integer.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINVAL) => break,
                // Without CAP_SETPCAP the bounding set cannot shrink. That is only acceptable
                // when nothing is permitted: with no_new_privs (set before this step) an exec
                // can then never gain a capability, even as uid 0.
                Some(libc::EPERM) if permitted_caps()? == 0 => break,
                _ => return Err(format!("PR_CAPBSET_DROP({cap}): {e}")),
            }
        }
    }
    // SAFETY: integer arguments.
    if unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(os_err("PR_CAP_AMBIENT_CLEAR_ALL"));
    }
    let hdr = CapHeader { version: CAP_V3, pid: 0 };
    let data = [CapData::default(); 2];
    // SAFETY: capset with a v3 header and two data elements.
    if unsafe { libc::syscall(libc::SYS_capset, &hdr as *const CapHeader, data.as_ptr()) } != 0 {
        return Err(os_err("capset"));
    }
    if permitted_caps()? != 0 {
        return Err("capabilities still permitted after capset".into());
    }
    Ok(())
}

/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`.
const FILTER_FLAG_NEW_LISTENER: u32 = 1 << 3;

/// The listener of the filter loaded by the last [`apply_confinement`] of this process (one
/// that sends calls to the runner), kept for [`take_seccomp_listener`].
static LISTENER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// The seccomp listener [`apply_confinement`] created (`HelperPlan::seccomp_listener`), once:
/// the caller passes it to the runner and must close it before `exec` (whoever holds it
/// answers the command's `connect` calls).
pub fn take_seccomp_listener() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fd = LISTENER.swap(-1, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: the descriptor was created by seccomp() in this process and nothing else owns it.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

fn load_seccomp(program: &[u64], listener: bool) -> Result<(), String> {
    let filter: Vec<libc::sock_filter> = program
        .iter()
        .map(|&i| {
            let (code, jt, jf, k) = unpack(i);
            libc::sock_filter { code, jt, jf, k }
        })
        .collect();
    let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
    let flags = if listener { FILTER_FLAG_NEW_LISTENER } else { 0 };
    // SAFETY: the kernel copies the program; `filter` outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &prog as *const libc::sock_fprog) };
    if r < 0 || (!listener && r != 0) {
        return Err(os_err(if listener { "seccomp(SET_MODE_FILTER, NEW_LISTENER) (granted unix sockets need seccomp user notification, Linux 5.0)" } else { "seccomp(SET_MODE_FILTER)" }));
    }
    if listener {
        // The kernel opens the listener close-on-exec.
        LISTENER.store(r as i32, std::sync::atomic::Ordering::SeqCst);
    }
    Ok(())
}

/// Confines the calling process according to `plan` (the order is the security design).
///
/// # Errors
/// A message naming the step that failed; the process must then exit without exec.
pub fn apply_confinement(plan: &HelperPlan) -> Result<AppliedReport, String> {
    let mut rep = AppliedReport { landlock: "not_applied".into(), ..Default::default() };
    let cwd = CString::new(plan.cwd.as_os_str().as_bytes()).map_err(|e| format!("cwd: {e}"))?;
    // SAFETY: valid C string.
    if unsafe { libc::chdir(cwd.as_ptr()) } != 0 {
        return Err(os_err(&format!("chdir {}", plan.cwd.display())));
    }
    if !plan.confine {
        return Ok(rep);
    }
    rep.namespaces = plan.namespaces.is_some();
    rep.cgroup = !plan.cgroup_procs.is_empty();
    apply_rlimits(&plan.rlimits)?;
    crate::timing::stamp("rlimits");
    // A ruleset offered by the runner is at the first fd above the report fd: kept until it is
    // enforced (and closed then, or when it is not this plan's).
    if !crate::ablation::is(&plan.ablated, crate::plan::ProtectionId::InheritedFds) {
        close_fds_from(if has_prebuilt() { PREBUILT_FD as u32 + 1 } else { REPORT_FD as u32 + 1 })?;
    }
    crate::timing::stamp("fds_closed");
    // SAFETY: integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(os_err("PR_SET_NO_NEW_PRIVS"));
    }
    rep.no_new_privs = true;
    crate::timing::stamp("no_new_privs");
    if let Some(ll) = &plan.landlock {
        rep.landlock_rules = landlock(ll)?;
        rep.landlock = crate::run::report::LANDLOCK_ENFORCED.into();
        crate::timing::stamp("landlock");
    }
    // An offer for a plan without Landlock is closed here all the same.
    let _ = withdraw_prebuilt();
    if plan.drop_capabilities {
        drop_capabilities()?;
        rep.capabilities_dropped = true;
        crate::timing::stamp("capabilities");
    }
    if let Some(p) = &plan.seccomp {
        load_seccomp(p, plan.seccomp_listener)?;
        rep.seccomp = true;
        crate::timing::stamp("seccomp");
    }
    Ok(rep)
}
