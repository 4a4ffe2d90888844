//! Full level glue: enter user + PID namespaces (supervisor), then mount, network, IPC and UTS
//! namespaces and the mount plan (init). Applies a [`NamespacePlan`]; decides nothing.

use crate::model::ids::ProtectionId;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::linux::mounts::{FreshRoot, MaskKind, NamespacePlan, FRESH_ROOT_DIR};
use crate::run::report::{Report, SetupWarning};

fn c(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|e| format!("{}: {e}", p.display()))
}

fn last_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn write_file(path: &str, data: &str) -> Result<(), String> {
    std::fs::write(path, data).map_err(|e| format!("write {path}: {e}"))
}

/// The host's `kernel.pid_max`, recorded by the supervisor before the PID namespace exists
/// (0 = unknown). The helper is single-threaded; `fork` copies the value into init.
static HOST_PID_MAX: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Records the host's `kernel.pid_max` while `/proc` is still the host's: init copies it into
/// the new PID namespace (see [`setup_init_namespaces`]).
pub fn record_host_pid_max() {
    if let Some(v) = std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse::<u64>().ok()) {
        HOST_PID_MAX.store(v, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Supervisor: unshare user + PID namespaces and map the caller's uid/gid to themselves.
///
/// # Errors
/// A message when user namespaces are unavailable (the caller reports it as
/// [`crate::run::report::SetupStep::UserNamespace`]).
pub fn enter_user_and_pid_namespaces(ns: &NamespacePlan) -> Result<(), String> {
    record_host_pid_max();
    // SAFETY: unshare with constant flags.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) } != 0 {
        return Err(last_err("unshare(CLONE_NEWUSER|CLONE_NEWPID)"));
    }
    write_id_maps(ns)
}

/// Maps the caller's uid/gid to themselves in the user namespace the calling process is the
/// first member of (`setgroups` denied first, as unprivileged mapping requires).
///
/// # Errors
/// A message (the caller reports it as a user-namespace failure).
pub fn write_id_maps(ns: &NamespacePlan) -> Result<(), String> {
    match std::fs::write("/proc/self/setgroups", "deny") {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("write /proc/self/setgroups: {e}")),
    }
    write_file("/proc/self/uid_map", &format!("{0} {0} 1\n", ns.uid))?;
    write_file("/proc/self/gid_map", &format!("{0} {0} 1\n", ns.gid))?;
    Ok(())
}

fn mount(src: Option<&str>, target: &Path, fstype: Option<&str>, flags: libc::c_ulong, data: Option<&str>) -> Result<(), String> {
    let src_c = src.map(|s| CString::new(s).unwrap_or_default());
    let fs_c = fstype.map(|s| CString::new(s).unwrap_or_default());
    let data_c = data.map(|s| CString::new(s).unwrap_or_default());
    let t = c(target)?;
    // SAFETY: every pointer is a valid C string or NULL.
    let r = unsafe {
        libc::mount(
            src_c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            t.as_ptr(),
            fs_c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data_c.as_ref().map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    };
    if r != 0 {
        return Err(last_err(&format!("mount {} on {}", src.or(fstype).unwrap_or("-"), target.display())));
    }
    Ok(())
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const SYS_MOUNT_SETATTR: libc::c_long = 442;

/// mount_setattr(2); `Ok(false)` when the kernel lacks it (< 5.12).
fn mount_setattr(target: &Path, recursive: bool, set: u64, clr: u64) -> Result<bool, String> {
    let t = c(target)?;
    let attr = MountAttr { attr_set: set, attr_clr: clr, propagation: 0, userns_fd: 0 };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: valid path and attribute struct of the size passed.
    let r = unsafe {
        libc::syscall(SYS_MOUNT_SETATTR, libc::AT_FDCWD, t.as_ptr(), flags, &attr as *const MountAttr, std::mem::size_of::<MountAttr>())
    };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOSYS) {
        return Ok(false);
    }
    Err(format!("mount_setattr {}: {e}", target.display()))
}

/// The flags of a mount from its mountinfo options, which must be preserved on remount.
fn locked_flags(opts: &str) -> libc::c_ulong {
    let mut f = 0;
    for o in opts.split(',') {
        f |= match o {
            "nosuid" => libc::MS_NOSUID,
            "nodev" => libc::MS_NODEV,
            "noexec" => libc::MS_NOEXEC,
            "noatime" => libc::MS_NOATIME,
            "nodiratime" => libc::MS_NODIRATIME,
            "relatime" => libc::MS_RELATIME,
            _ => 0,
        };
    }
    f
}

/// Remounts one bind read-only or read-write without mount_setattr (kernels < 5.12).
fn remount_bind(target: &Path, readonly: bool) -> Result<(), String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("mountinfo: {e}"))?;
    let opts = info
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 5 && crate::host::mount_point(f[4].as_bytes()) == target).then(|| f[5].to_string())
        })
        .next_back()
        .unwrap_or_default();
    let ro = if readonly { libc::MS_RDONLY } else { 0 };
    mount(None, target, None, libc::MS_REMOUNT | libc::MS_BIND | ro | locked_flags(&opts), None)
}

/// Makes every mount read-only (recursive from `/`).
fn make_all_readonly() -> Result<(), String> {
    if mount_setattr(Path::new("/"), true, MOUNT_ATTR_RDONLY, 0)? {
        return Ok(());
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("mountinfo: {e}"))?;
    for line in info.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 {
            continue;
        }
        let target = crate::host::mount_point(f[4].as_bytes());
        mount(None, &target, None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | locked_flags(f[5]), None)?;
    }
    Ok(())
}

fn set_writable(p: &Path) -> Result<(), String> {
    if mount_setattr(p, false, 0, MOUNT_ATTR_RDONLY)? {
        return Ok(());
    }
    remount_bind(p, false)
}

fn set_readonly(p: &Path) -> Result<(), String> {
    if mount_setattr(p, false, MOUNT_ATTR_RDONLY, 0)? {
        return Ok(());
    }
    remount_bind(p, true)
}

/// A path held open (`O_PATH`) so that it can be bound back after a fresh mount covers it.
struct Held {
    path: std::path::PathBuf,
    file: std::fs::File,
    is_dir: bool,
}

impl Held {
    fn open(path: &Path) -> Result<Held, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)
            .map_err(|e| format!("open {}: {e}", path.display()))?;
        let is_dir = file.metadata().map(|m| m.is_dir()).map_err(|e| format!("stat {}: {e}", path.display()))?;
        Ok(Held { path: path.to_path_buf(), file, is_dir })
    }

    /// Creates the mount point at the same path (under the new mount) and binds the held object.
    fn bind_back(&self, flags: libc::c_ulong) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        mount_point(&self.path, self.is_dir)?;
        mount(Some(&format!("/proc/self/fd/{}", self.file.as_raw_fd())), &self.path, None, flags, None)
    }
}

/// Creates `p` (a directory, or an empty file) and its missing parents, to mount on.
fn mount_point(p: &Path, is_dir: bool) -> Result<(), String> {
    if is_dir {
        return std::fs::create_dir_all(p).map_err(|e| format!("mkdir {}: {e}", p.display()));
    }
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
    }
    empty_file(p)
}

/// Creates the empty file `p` to mount on, unless something is there already. Never truncates:
/// a mount point inside the workspace (a read-only file in it, bound back) is the host's own file,
/// which opening with `O_TRUNC` would empty — the user's file, lost.
fn empty_file(p: &Path) -> Result<(), String> {
    match std::fs::OpenOptions::new().write(true).create_new(true).open(p) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("create {}: {e}", p.display())),
    }
}

/// Replaces `/dev` with a tmpfs holding only the plan's device nodes (bound from the host through
/// descriptors opened before the host's `/dev` is covered), a private devpts, `/dev/shm` and the
/// usual links; then makes the new `/dev` itself read-only.
///
/// With `console` (the command's own terminal, [`crate::run::StdinMode::Terminal`]) our stdin, the
/// run's pseudo-terminal, is bound at [`crate::plan::CONSOLE`], as container managers do: the terminal
/// belongs to the host's devpts, which is not mounted here, so without a name under `/dev` the
/// C library's `ttyname` (and `tty`) finds none. It gives the command no terminal it does not
/// hold already: the run's own, whose master only the runner holds.
fn private_dev(ns: &NamespacePlan, cut: &[ProtectionId], console: bool) -> Result<(), String> {
    let held = ns.dev_nodes.iter().map(|n| Held::open(n)).collect::<Result<Vec<_>, _>>()?;
    // (An ablation build without `other-terminals` keeps the host's devpts, the user's terminals.)
    let host_pts = if crate::ablation::is(cut, ProtectionId::OtherTerminals) { Some(Held::open(Path::new("/dev/pts"))?) } else { None };
    let terminal = if console {
        let found = terminal_by_path();
        if let Err(e) = &found {
            crate::run::report::send(&Report::Warning(SetupWarning::TerminalUnnamed { message: format!("the command's terminal has no name under /dev (`tty` says it is none): {e}") }));
        }
        found.ok()
    } else {
        None
    };
    let dev = Path::new("/dev");
    let size = 64 * 1024 + ns.config_overlays.iter().map(|o| o.content.len() + 4096).sum::<usize>();
    mount(Some("tmpfs"), dev, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NOEXEC, Some(&format!("mode=0755,size={size}")))?;
    // The scrubbed configs, bound over their originals later (see `config_overlays`).
    if !ns.config_overlays.is_empty() {
        std::fs::create_dir(CONFIG_OVERLAY_DIR).map_err(|e| format!("mkdir {CONFIG_OVERLAY_DIR}: {e}"))?;
        for (i, o) in ns.config_overlays.iter().enumerate() {
            let f = format!("{CONFIG_OVERLAY_DIR}/{i}");
            std::fs::write(&f, &o.content).map_err(|e| format!("write {f}: {e}"))?;
        }
    }
    for h in &held {
        h.bind_back(libc::MS_BIND)?;
    }
    for d in ["/dev/shm"].into_iter().chain(host_pts.is_none().then_some("/dev/pts")).chain(ns.fresh_root.is_some().then_some(FRESH_ROOT_DIR)) {
        std::fs::create_dir(d).map_err(|e| format!("mkdir {d}: {e}"))?;
    }
    match &host_pts {
        Some(h) => h.bind_back(libc::MS_BIND | libc::MS_REC)?,
        None => mount(Some("devpts"), Path::new("/dev/pts"), Some("devpts"), libc::MS_NOSUID | libc::MS_NOEXEC, Some("newinstance,ptmxmode=0666,mode=0620"))?,
    }
    if let Some(t) = &terminal {
        use std::os::fd::AsRawFd;
        let console = Path::new(crate::plan::CONSOLE);
        empty_file(console)?;
        mount(Some(&format!("/proc/self/fd/{}", t.file.as_raw_fd())), console, None, libc::MS_BIND, None)?;
    }
    for (link, target) in [("/dev/ptmx", "pts/ptmx"), ("/dev/fd", "/proc/self/fd"), ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"), ("/dev/stderr", "/proc/self/fd/2")] {
        std::os::unix::fs::symlink(target, link).map_err(|e| format!("symlink {link}: {e}"))?;
    }
    set_readonly(dev)
}

/// Our stdin, the command's terminal, opened again by the path its descriptor names (a terminal
/// of the host's devpts, still mounted at this point): a descriptor opened before the mount
/// namespace was made cannot be bound in it. The object found must be the very one we hold.
fn terminal_by_path() -> Result<Held, String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: a zeroed plain struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: isatty and fstat on our own descriptor, into that struct.
    let (tty, stat) = unsafe { (libc::isatty(0), libc::fstat(0, &mut st)) };
    if tty != 1 || stat != 0 {
        return Err("stdin is not a terminal".into());
    }
    let path = std::fs::read_link("/proc/self/fd/0").map_err(|e| format!("read its name: {e}"))?;
    let held = Held::open(&path)?;
    let meta = held.file.metadata().map_err(|e| format!("stat {}: {e}", path.display()))?;
    if (meta.dev(), meta.ino(), meta.rdev()) != (st.st_dev, st.st_ino, st.st_rdev) {
        return Err(format!("{} is another file", path.display()));
    }
    Ok(held)
}

/// `mount --bind src target` with `flags`, paths passed as bytes (not text).
fn bind(src: &Path, target: &Path, flags: libc::c_ulong) -> Result<(), String> {
    let (s, t) = (c(src)?, c(target)?);
    // SAFETY: valid C strings; no filesystem type or data.
    if unsafe { libc::mount(s.as_ptr(), t.as_ptr(), std::ptr::null(), flags, std::ptr::null()) } != 0 {
        return Err(last_err(&format!("bind {} on {}", src.display(), target.display())));
    }
    Ok(())
}

/// The staging paths of protected path `i`.
#[must_use]
pub fn staging_of(staging: &Path, i: usize) -> (PathBuf, PathBuf, PathBuf) {
    let d = staging.join(i.to_string());
    (d.join("upper"), d.join("work"), d.join("file"))
}

/// Mounts the private layer `l` over its directory (see [`crate::linux::mounts::Layer`]): its
/// store's `upper` and `work` directories are made and opened below the store without following
/// a link (the store lies in the workspace's tool caches, which earlier runs could write: a link
/// planted there must not make a host directory the upper layer).
fn layer(l: &crate::linux::mounts::Layer) -> Result<(), String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let at = |parent: i32, name: &std::ffi::CStr| -> Result<OwnedFd, String> {
        // SAFETY: mkdirat/openat relative to a descriptor we hold, with a C string name.
        unsafe {
            if libc::mkdirat(parent, name.as_ptr(), 0o700) != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                return Err(last_err(&format!("mkdir {}", name.to_string_lossy())));
            }
            match libc::openat(parent, name.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) {
                fd if fd < 0 => Err(last_err(&format!("open {} (not a directory, or a link)", name.to_string_lossy()))),
                fd => Ok(OwnedFd::from_raw_fd(fd)),
            }
        }
    };
    let parent = l.store.parent().ok_or("no store")?;
    let name = std::ffi::CString::new(l.store.file_name().ok_or("no store")?.as_encoded_bytes()).map_err(|e| e.to_string())?;
    let caches = Held::open(parent)?;
    let store = at(caches.file.as_raw_fd(), &name)?;
    let (upper, work) = (at(store.as_raw_fd(), c"upper")?, at(store.as_raw_fd(), c"work")?);
    // `volatile`: no sync of the upper file system when the namespace goes (without it its
    // unmount syncs the whole home file system, +3 ms per run measured). Overlayfs marks such an
    // upper directory with `work/work/incompat/volatile`, even after a clean unmount, and
    // refuses to mount it again while the marker is there: it is a cache, so the marker goes
    // (after a crash of the host it may hold partly written files; cargo checks every crate's
    // checksum, and removing `store` starts it afresh).
    // SAFETY: unlinkat relative to a descriptor we hold, with C string names.
    unsafe {
        libc::unlinkat(work.as_raw_fd(), c"work/incompat/volatile/dirty".as_ptr(), 0);
        libc::unlinkat(work.as_raw_fd(), c"work/incompat/volatile".as_ptr(), libc::AT_REMOVEDIR);
    }
    let lower = Held::open(&l.path)?;
    overlay(&l.path, [lower.file.as_raw_fd(), upper.as_raw_fd(), work.as_raw_fd()], ",volatile")
}

/// Mounts an overlay on `target` from the directories open at `[lower, upper, work]` (named
/// through `/proc/self/fd`, so no path is looked up again), with user extended attributes (an
/// unprivileged mount) and `extra` options (`,opt,…`).
fn overlay(target: &Path, [lower, upper, work]: [i32; 3], extra: &str) -> Result<(), String> {
    let opts = format!("lowerdir=/proc/self/fd/{lower},upperdir=/proc/self/fd/{upper},workdir=/proc/self/fd/{work},userxattr{extra}");
    mount(Some("overlay"), target, Some("overlay"), libc::MS_NOSUID | libc::MS_NODEV, Some(&opts))
}

/// Makes each protected path private for the run: a directory gets an overlay whose lower layer
/// is the real directory and whose upper layer is its staging directory (so writes, creations,
/// deletions and renames inside stay there); a file gets its staged copy bound over it. Either
/// way the path becomes a mount point, which cannot be renamed or removed. A directory whose
/// overlay cannot be mounted (a kernel before 5.11, an upper filesystem without user extended
/// attributes) is bound read-only instead, and a `W` line says so.
///
/// Returns the mount points and whether each is writable.
fn protect(ns: &NamespacePlan) -> Result<Vec<(PathBuf, bool)>, String> {
    use crate::guard::protected::ProtectedKind;
    use std::os::fd::AsRawFd;
    let mut out = Vec::new();
    for (i, p) in ns.protected.iter().enumerate() {
        let staged = ns.staging.as_deref().map(|s| staging_of(s, i));
        match (p.kind, staged) {
            (ProtectedKind::File, Some((_, _, file))) => {
                bind(&file, &p.path, libc::MS_BIND)?;
                out.push((p.path.clone(), true));
            }
            (ProtectedKind::GitDir | ProtectedKind::Dir, Some((upper, work, _))) => {
                let open = |q: &Path| Held::open(q);
                let (l, u, w) = (open(&p.path)?, open(&upper)?, open(&work)?);
                match overlay(&p.path, [l.file.as_raw_fd(), u.file.as_raw_fd(), w.file.as_raw_fd()], "") {
                    Ok(()) => out.push((p.path.clone(), true)),
                    Err(e) => {
                        bind(&p.path, &p.path, libc::MS_BIND)?;
                        set_readonly(&p.path)?;
                        crate::run::report::send(&Report::Warning(SetupWarning::ProtectedReadOnly {
                            index: i,
                            message: format!("{} is read-only for this run: no private copy ({e})", p.path.display()),
                        }));
                        out.push((p.path.clone(), false));
                    }
                }
            }
            (_, None) => {
                bind(&p.path, &p.path, libc::MS_BIND)?;
                set_readonly(&p.path)?;
                crate::run::report::send(&Report::Warning(SetupWarning::ProtectedReadOnly {
                    index: i,
                    message: format!("{} is read-only for this run: no staging directory", p.path.display()),
                }));
                out.push((p.path.clone(), false));
            }
        }
    }
    Ok(out)
}

/// Where the private `/dev` keeps the scrubbed config files.
const CONFIG_OVERLAY_DIR: &str = "/dev/.localgpt-config";

/// Binds each scrubbed config (written into the private `/dev`) read-only over its original.
fn config_overlays(ns: &NamespacePlan) -> Result<(), String> {
    if !ns.config_overlays.is_empty() && !ns.private_dev {
        return Err("scrubbed toolchain configs need the private /dev".into());
    }
    for (i, o) in ns.config_overlays.iter().enumerate() {
        mount(Some(&format!("{CONFIG_OVERLAY_DIR}/{i}")), &o.target, None, libc::MS_BIND, None)?;
        set_readonly(&o.target)?;
    }
    Ok(())
}

/// Covers `$HOME` with an empty tmpfs holding only the kept paths (bound back from descriptors
/// opened before it is covered, with their submounts and their read-only or writable state),
/// the symlinks on the way to them and empty mount points for scrubbed configs outside them;
/// then makes the tmpfs itself read-only.
fn private_home(h: &crate::linux::mounts::HomeView, overlays: &[crate::linux::mounts::ConfigOverlay]) -> Result<(), String> {
    let held = h.keep.iter().map(|p| Held::open(p)).collect::<Result<Vec<_>, _>>()?;
    mount(Some("tmpfs"), &h.home, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some("mode=0755,size=1m,nr_inodes=16384"))?;
    for k in &held {
        k.bind_back(libc::MS_BIND | libc::MS_REC)?;
    }
    for o in overlays.iter().filter(|o| o.target.starts_with(&h.home) && !h.keep.iter().any(|k| o.target.starts_with(k))) {
        if let Some(parent) = o.target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
        }
        empty_file(&o.target)?;
    }
    for (link, target) in &h.symlinks {
        if let Some(parent) = link.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
        }
        std::os::unix::fs::symlink(target, link).map_err(|e| format!("symlink {}: {e}", link.display()))?;
    }
    set_readonly(&h.home)
}

/// Brings up `lo` in the sandbox's fresh network namespace (it starts down): the command's
/// local servers and their clients talk over it; nothing else is in the namespace.
fn loopback_up() -> Result<(), String> {
    // SAFETY: a datagram socket for the interface ioctls, closed below; `ifreq` is zeroed and
    // its name NUL-terminated.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(last_err("socket for lo"));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let r = if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) != 0 {
            Err(last_err("SIOCGIFFLAGS lo"))
        } else {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) != 0 {
                Err(last_err("SIOCSIFFLAGS lo up"))
            } else {
                Ok(())
            }
        };
        libc::close(fd);
        r
    }
}

/// Starts a thread that makes the sandbox's network namespace, with its loopback up, and returns
/// a descriptor of it for `setns`. Making one costs ~0.4 ms (the kernel registers the
/// namespace's sysctls and its loopback device), as long as PID 1's mounts take, so it is made
/// beside them instead of before them. `unshare(CLONE_NEWNET)` moves only the calling thread;
/// the thread has not entered the mount namespace PID 1 is about to make, so its `/proc` is
/// not changed under it. It is owned by PID 1's user namespace, which PID 1 is root in.
fn network_namespace() -> std::thread::JoinHandle<Result<std::os::fd::OwnedFd, String>> {
    std::thread::spawn(|| {
        // SAFETY: unshare with a constant flag; it moves this thread only.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(last_err("unshare(net)"));
        }
        loopback_up()?;
        std::fs::File::open("/proc/thread-self/ns/net").map(std::os::fd::OwnedFd::from).map_err(|e| format!("open the new network namespace: {e}"))
    })
}

/// A listening TCP socket on `127.0.0.1:port` of this process's network namespace
/// (close-on-exec).
///
/// # Errors
/// The failing call.
pub fn loopback_listener(port: u16) -> std::io::Result<std::os::fd::OwnedFd> {
    let l = std::net::TcpListener::bind(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port))?;
    Ok(std::os::fd::OwnedFd::from(l))
}

/// A UDP socket bound on `127.0.0.1:PORT` (the sandbox's loopback), for the runner.
///
/// # Errors
/// The bind's error.
pub fn loopback_udp(port: u16) -> std::io::Result<std::os::fd::OwnedFd> {
    let s = std::net::UdpSocket::bind(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port))?;
    Ok(std::os::fd::OwnedFd::from(s))
}

/// Init (PID 1): unshare mount, network, IPC and UTS namespaces and set up the mounts. `cut`:
/// the ablation build's cuts ([`crate::plan::HelperPlan::ablated`]; nothing in a shipped build).
/// `terminal`: our stdin is the command's own terminal ([`crate::plan::HelperPlan::terminal`]).
///
/// # Errors
/// The failing step; the caller must not run the command.
pub fn setup_init_namespaces(ns: &NamespacePlan, cut: &[ProtectionId], terminal: bool) -> Result<(), String> {
    // `network = "full"` keeps the host's network namespace; every other one is the sandbox's,
    // made on a second thread while this one builds the mounts (see `network_namespace`).
    let net = (!ns.host_network).then(network_namespace);
    // SAFETY: unshare with constant flags.
    if unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS) } != 0 {
        return Err(last_err("unshare(mount, ipc, uts)"));
    }
    crate::timing::stamp("init_unshared");
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    for p in &ns.rw_binds {
        bind(p, p, libc::MS_BIND | libc::MS_REC)?;
    }
    // Protected paths: private copies (writable) or, where that fails, read-only binds.
    let private = protect(ns)?;
    crate::timing::stamp("init_binds");
    if !crate::ablation::is(cut, ProtectionId::FsMetadataOutside) {
        make_all_readonly()?;
    }
    for p in &ns.rw_binds {
        set_writable(p)?;
    }
    for (p, writable) in &private {
        if *writable {
            set_writable(p)?;
        }
    }
    crate::timing::stamp("init_readonly");
    if ns.private_dev {
        private_dev(ns, cut, terminal)?;
    }
    crate::timing::stamp("init_dev");
    // Hold the grants a tmpfs is about to cover, then bind them back inside it (the writable
    // ones as they are, the read-only ones read-only).
    let held_rw = ns.tmpfs_rw_binds.iter().map(|p| Held::open(p)).collect::<Result<Vec<_>, _>>()?;
    let held = ns.tmpfs_ro_binds.iter().map(|p| Held::open(p)).collect::<Result<Vec<_>, _>>()?;
    let mut tmpfs_opts = String::from("mode=1777");
    if let Some(size) = ns.tmpfs_size_bytes {
        tmpfs_opts.push_str(&format!(",size={size}"));
    }
    if let Some(inodes) = ns.tmpfs_inodes {
        tmpfs_opts.push_str(&format!(",nr_inodes={inodes}"));
    }
    for t in &ns.tmpfs {
        mount(Some("tmpfs"), t, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(&tmpfs_opts))?;
    }
    for h in &held_rw {
        h.bind_back(libc::MS_BIND | libc::MS_REC)?;
    }
    for h in &held {
        h.bind_back(libc::MS_BIND | libc::MS_REC)?;
        set_readonly(&h.path)?;
    }
    crate::timing::stamp("init_tmpfs");
    if let Some(h) = &ns.home_view {
        private_home(h, &ns.config_overlays)?;
    }
    crate::timing::stamp("init_home");
    for l in &ns.layers {
        if let Err(e) = layer(l) {
            crate::run::report::send(&Report::Warning(SetupWarning::LayerReadOnly {
                message: format!("{} is read-only for this run: no private layer ({e})", l.path.display()),
            }));
        }
    }
    for m in &ns.masks {
        // Already hidden by a fresh tmpfs, unless a grant bound back into it holds it.
        if ns.tmpfs.iter().any(|t| m.path.starts_with(t)) && !ns.tmpfs_ro_binds.iter().chain(&ns.tmpfs_rw_binds).any(|b| m.path.starts_with(b)) {
            continue;
        }
        // Gone since the plan was made (a host process removed it): nothing left to hide, as
        // for a path created after launch (Landlock still gives it no rule).
        if std::fs::symlink_metadata(&m.path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            continue;
        }
        match m.kind {
            MaskKind::EmptyDir => mount(
                Some("tmpfs"),
                &m.path,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some("mode=0755,size=4k"),
            )?,
            MaskKind::EmptyFile => {
                mount(Some("/dev/null"), &m.path, None, libc::MS_BIND, None)?;
                set_readonly(&m.path)?;
            }
        }
    }
    config_overlays(ns)?;
    crate::timing::stamp("init_masks");
    // The network namespace, before anything that depends on it (sysfs, mounted below, shows the
    // network namespace of whoever mounts it, and may only be mounted from one this user
    // namespace owns; the command and the proxy's sockets are made after this function).
    if let Some(t) = net {
        let fd = t.join().map_err(|_| "the thread making the network namespace panicked".to_string())??;
        // SAFETY: a namespace descriptor owned by `fd`, open for the call.
        if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&fd), libc::CLONE_NEWNET) } != 0 {
            return Err(last_err("setns(net)"));
        }
        crate::timing::stamp("init_net");
    }
    mount(Some("proc"), Path::new("/proc"), Some("proc"), libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, None)?;
    crate::timing::stamp("init_proc");
    if let Some(name) = &ns.hostname {
        let host = name.as_bytes();
        // SAFETY: valid buffer and length.
        if unsafe { libc::sethostname(host.as_ptr().cast(), host.len()) } != 0 {
            return Err(last_err("sethostname"));
        }
    }
    write_file("/proc/sys/user/max_user_namespaces", "0")?;
    // Since Linux 6.14 pid_max is per PID namespace and a new one starts at the built-in
    // maximum, not at the host's value: `ps` sizes its PID columns from it, so `ps -ef`/`ps aux`
    // were laid out differently inside. Give the namespace the host's value (only ever lower,
    // and only when it differs, which never happens on kernels where pid_max is global).
    let host_max = HOST_PID_MAX.load(std::sync::atomic::Ordering::SeqCst);
    let ns_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse::<u64>().ok());
    if host_max > 0 && ns_max.is_some_and(|m| m > host_max) {
        let _ = std::fs::write("/proc/sys/kernel/pid_max", host_max.to_string());
    }
    if crate::ablation::is(cut, ProtectionId::PidIsolation) {
        // The host's /proc again, under the fresh one (its sysctls are written above).
        // SAFETY: a valid path; detaching our own namespace's mount.
        unsafe { libc::umount2(c"/proc".as_ptr(), libc::MNT_DETACH) };
    }
    if !crate::ablation::is(cut, ProtectionId::KernelInfo) {
        kernel_views()?;
    }
    crate::timing::stamp("init_kernel_views");
    if let Some(root) = &ns.fresh_root {
        switch_to_fresh_root(root)?;
        crate::timing::stamp("init_fresh_root");
    }
    Ok(())
}

/// Builds the fresh root (see [`FreshRoot`]) in a tmpfs at [`FRESH_ROOT_DIR`] and makes it `/`:
/// each kept path bound with the mounts under it, the links recreated, then `pivot_root`, the old
/// root detached, and the new one read-only.
fn switch_to_fresh_root(root: &FreshRoot) -> Result<(), String> {
    let base = Path::new(FRESH_ROOT_DIR);
    mount(Some("tmpfs"), base, Some("tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some("mode=0755,size=1m,nr_inodes=4096"))?;
    let inside = |p: &Path| base.join(p.strip_prefix("/").unwrap_or(p));
    // `/dev` first: the copy of it holds the new root as it is then (a mount of the same empty
    // tmpfs, without the binds made into it later), unmounted after the switch.
    let mut binds: Vec<&PathBuf> = root.binds.iter().collect();
    binds.sort_by_key(|b| b.as_path() != Path::new("/dev"));
    for b in binds {
        let t = inside(b);
        let is_dir = match std::fs::metadata(b) {
            Ok(m) => m.is_dir(),
            // Gone since the plan was made (a host process removed it): not bound, which can
            // only remove access, as a vanished Landlock rule path is not granted.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("stat {}: {e}", b.display())),
        };
        mount_point(&t, is_dir)?;
        bind(b, &t, libc::MS_BIND | libc::MS_REC)?;
    }
    for (link, target) in &root.symlinks {
        let t = inside(link);
        if let Some(parent) = t.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
        }
        std::os::unix::fs::symlink(target, &t).map_err(|e| format!("symlink {}: {e}", t.display()))?;
    }
    let old = base.join(".old-root");
    std::fs::create_dir(&old).map_err(|e| format!("mkdir {}: {e}", old.display()))?;
    let (new_c, old_c) = (c(base)?, c(&old)?);
    // SAFETY: valid C strings.
    if unsafe { libc::syscall(libc::SYS_pivot_root, new_c.as_ptr(), old_c.as_ptr()) } == 0 {
        // SAFETY: constant paths; detaching our own namespace's mounts.
        unsafe {
            if libc::chdir(c"/".as_ptr()) != 0 {
                return Err(last_err("chdir /"));
            }
            if libc::umount2(c"/.old-root".as_ptr(), libc::MNT_DETACH) != 0 {
                return Err(last_err("detach the old root"));
            }
        }
        std::fs::remove_dir("/.old-root").map_err(|e| format!("rmdir /.old-root: {e}"))?;
    } else if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // `/` is the initial rootfs (a system running from its initramfs), which pivot_root
        // cannot move: the new root is moved over it and entered instead (switch_root's way).
        // The old tree stays under it, out of every path: no process has its root or working
        // directory there once PID 1 has moved, and the command cannot chroot (no capability).
        std::fs::remove_dir(&old).map_err(|e| format!("rmdir {}: {e}", old.display()))?;
        // SAFETY: valid C strings; moving our own namespace's mount.
        unsafe {
            if libc::chdir(new_c.as_ptr()) != 0 {
                return Err(last_err(&format!("chdir {FRESH_ROOT_DIR}")));
            }
            if libc::mount(c".".as_ptr(), c"/".as_ptr(), std::ptr::null(), libc::MS_MOVE, std::ptr::null()) != 0 {
                return Err(last_err("move the fresh root over /"));
            }
            if libc::chroot(c".".as_ptr()) != 0 {
                return Err(last_err("chroot into the fresh root"));
            }
            if libc::chdir(c"/".as_ptr()) != 0 {
                return Err(last_err("chdir /"));
            }
        }
    } else {
        return Err(last_err("pivot_root"));
    }
    let copy = c(base)?;
    // SAFETY: a valid C string; the copy of the new root that `/dev` holds.
    if unsafe { libc::umount2(copy.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(last_err(&format!("unmount {FRESH_ROOT_DIR}")));
    }
    mount(None, Path::new("/"), None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV, None)
}

/// What container runtimes hide in `/proc` and `/sys` (the OCI runtime spec's default masked
/// paths, as runc and Docker apply them), plus `/proc/kallsyms`: kernel addresses, other
/// users' keys, timers and scheduler state, firmware tables.
pub const MASKED_KERNEL_PATHS: &[&str] = &[
    "/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kallsyms", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
];

/// The OCI default read-only `/proc` paths.
pub const READONLY_KERNEL_PATHS: &[&str] = &["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

/// A fresh sysfs for the sandbox's network namespace (so `/sys/class/net` lists only its `lo`,
/// as `/proc/net/dev` does), read-only; where the kernel refuses one (an unusual host `/sys`
/// layout), `/sys/class/net` is hidden instead. Then the masks and read-only paths above.
fn kernel_views() -> Result<(), String> {
    let ro = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    if Path::new("/sys/class").is_dir() && mount(Some("sysfs"), Path::new("/sys"), Some("sysfs"), ro, None).is_err() {
        mount(Some("tmpfs"), Path::new("/sys/class/net"), Some("tmpfs"), ro, Some("mode=0755,size=4k"))?;
    }
    for p in MASKED_KERNEL_PATHS.iter().map(Path::new) {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => mount(Some("tmpfs"), p, Some("tmpfs"), ro, Some("mode=0555,size=4k"))?,
            Ok(_) => {
                mount(Some("/dev/null"), p, None, libc::MS_BIND, None)?;
                set_readonly(p)?;
            }
            Err(_) => {}
        }
    }
    for p in READONLY_KERNEL_PATHS.iter().map(Path::new) {
        if std::fs::symlink_metadata(p).is_ok() {
            mount(Some(&p.to_string_lossy()), p, None, libc::MS_BIND | libc::MS_REC, None)?;
            set_readonly(p)?;
        }
    }
    Ok(())
}
