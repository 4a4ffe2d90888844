//! Process helpers the benchmark binaries share (Linux): finding tools, running one for its
//! output, and the command lines of the peers (bubblewrap, Sandlock).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A scratch directory, removed with everything in it when dropped.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `cmd args…` and returns its trimmed stdout when it exits 0.
#[must_use]
pub fn sh(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The first executable `name` on `PATH`.
#[must_use]
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        let c = CString::new(p.as_os_str().as_bytes()).ok();
        // SAFETY: access() with a valid C string.
        c.is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
    })
}

/// The python3 to run: the system one when present (a pyenv shim is a bash script and would
/// measure pyenv), else whatever PATH has, resolved through symlinks.
#[must_use]
pub fn python3() -> Option<PathBuf> {
    let p = if Path::new("/usr/bin/python3").exists() { PathBuf::from("/usr/bin/python3") } else { which("python3")? };
    Some(std::fs::canonicalize(&p).unwrap_or(p))
}

/// bubblewrap's argv up to and including `--`, confining like our Full level does in spirit:
/// every namespace unshared, the system read-only, a private `/tmp`, the workspace `ws`
/// writable and the working directory, and `ro` (toolchains, say) read-only where they are.
#[must_use]
pub fn bwrap_prefix(bwrap: &Path, ws: &Path, ro: &[PathBuf]) -> Vec<String> {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut v: Vec<String> =
        [s(bwrap).as_str(), "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"].iter().map(|s| s.to_string()).collect();
    for d in ["bin", "sbin", "lib", "lib64", "lib32", "libx32"] {
        let host = Path::new("/").join(d);
        match std::fs::read_link(&host) {
            Ok(target) => v.extend(["--symlink".into(), s(&target), s(&host)]),
            Err(_) if host.is_dir() => v.extend(["--ro-bind".into(), s(&host), s(&host)]),
            Err(_) => {}
        }
    }
    v.extend(["--ro-bind", "/etc", "/etc", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"].iter().map(|s| s.to_string()));
    for p in ro {
        v.extend(["--ro-bind-try".into(), s(p), s(p)]);
    }
    let ws = s(ws);
    v.extend(["--bind", &ws, &ws, "--chdir", &ws, "--"].iter().map(|s| s.to_string()));
    v
}

/// Sandlock's CLI: the one `ci/bench-quick` builds from crates.io into `target/peers` (found
/// from the bench's own directory, `target/release`), else whatever `PATH` has.
#[must_use]
pub fn sandlock(exe_dir: &Path) -> Option<PathBuf> {
    exe_dir.parent().map(|t| t.join("peers/bin/sandlock")).filter(|p| p.exists()).or_else(|| which("sandlock"))
}

/// Sandlock's argv up to and including `--`, as its README runs it: the system directories
/// readable, `ro` readable too, the workspace `ws` and `rw` writable; `no_supervisor`: Landlock and
/// its deny-only seccomp filter, no seccomp-notify supervisor.
#[must_use]
pub fn sandlock_prefix(sandlock: &Path, ws: &Path, no_supervisor: bool, ro: &[PathBuf], rw: &[PathBuf]) -> Vec<String> {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut v = vec![s(sandlock), "run".into()];
    if no_supervisor {
        v.push("--no-supervisor".into());
    }
    for r in ["/usr", "/lib", "/lib64", "/bin", "/etc"].iter().map(Path::new).filter(|p| p.exists()).chain(ro.iter().map(PathBuf::as_path)) {
        v.extend(["-r".into(), s(r)]);
    }
    for w in std::iter::once(ws).chain(rw.iter().map(PathBuf::as_path)) {
        v.extend(["-w".into(), s(w)]);
    }
    v.push("--".into());
    v
}
