//! The host unix sockets a plan grants (`--allow-unix-socket`).

use super::*;

/// One host unix socket granted to the command (`--allow-unix-socket`). On Linux the command's
/// `connect` calls go to the runner (seccomp user notification); the runner compares the
/// address with `given` and `path` byte for byte and, on a match, connects the command's socket
/// itself to `path` as resolved in the host's view (the command's view cannot redirect it). Any
/// other address is refused.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct UnixSocketGrant {
    /// The path as the user gave it (absolute).
    pub given: PathBuf,
    /// Its canonical path, the one the runner connects to.
    pub path: PathBuf,
    /// A socket that equals root on the host (the Docker, containerd or Podman socket): said
    /// loudly in the warnings.
    pub root_equivalent: bool,
}

/// Variables that name a socket, kept when their value is a granted socket.
pub(super) const SOCKET_VARS: &[&str] = &["SSH_AUTH_SOCK"];

/// Sockets whose clients control a container runtime or the system, as root (by file name).
const ROOT_EQUIVALENT_SOCKETS: &[&str] = &["docker.sock", "containerd.sock", "podman.sock", "crio.sock", "buildkitd.sock", "libvirt-sock", "incus.socket", "unix.socket"];

impl UnixSocketGrant {
    /// The grant for a (given, canonical) pair of the policy.
    #[must_use]
    pub fn new(given: &Path, path: &Path) -> Self {
        let root_equivalent = [given, path].iter().any(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| ROOT_EQUIVALENT_SOCKETS.contains(&n)))
            || path.starts_with("/run/containerd") || path.starts_with("/run/docker");
        UnixSocketGrant { given: given.to_path_buf(), path: path.to_path_buf(), root_equivalent }
    }

    /// Whether `addr` (a pathname socket address's bytes, without the NUL) names this socket.
    #[must_use]
    pub fn matches(&self, addr: &[u8]) -> bool {
        !addr.is_empty() && (addr == path_bytes(&self.given) || addr == path_bytes(&self.path))
    }
}

#[cfg(unix)]
fn path_bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

#[cfg(not(unix))]
fn path_bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_encoded_bytes()
}
