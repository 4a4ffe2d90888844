//! The default path tables, each entry with its reason: what every policy grants, denies and
//! protects unless configured otherwise. One room, imported by the policy, the config and the
//! planners (it depends on nothing but [`Platform`]).
//!
//! The tables without a platform in their name are Linux's; [`tables`] gives each platform's.

use crate::platform::Platform;

/// System directories granted read + execute.
pub const SYSTEM_READ_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys", "/proc",
    "/nix/store",
];

/// Toolchains and tool configuration under `$HOME` granted read + execute.
pub const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo", ".rustup", ".pyenv", ".nvm", ".rbenv", ".goenv", ".volta", ".bun", ".deno", ".sdkman",
    "go", ".local/bin", ".local/lib", ".gitconfig", ".config/git",
];

/// Credential locations under `$HOME`: never readable, even when a parent is granted.
/// Deliberately not the whole of `~/.config`: git reads `~/.config/git/config`.
pub const HOME_CREDENTIALS: &[&str] = &[
    ".ssh", ".aws", ".gnupg", ".docker", ".netrc", ".git-credentials", ".pypirc", ".kube",
    ".azure", ".vault-token", ".password-store", ".terraform.d", ".config/gh", ".config/gcloud",
    ".config/hub", ".config/op", ".config/git/credentials", ".local/share/keyrings",
    ".cargo/credentials", ".cargo/credentials.toml", ".m2/settings.xml", ".gradle/gradle.properties",
];

/// Device nodes usable read-write in every confined mode.
pub const DEVICE_PATHS: &[&str] = &[
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx",
    "/dev/pts",
];

/// Writable scratch in `workspace-write` mode (spec mode table: workspace + `/tmp`; `/dev/shm`
/// for POSIX semaphores, which Python multiprocessing needs).
pub const SCRATCH_WRITE_DIRS: &[&str] = &["/tmp", "/dev/shm"];

/// Workspace paths that run code later, outside the sandbox (relative to the workspace): made
/// private for the run, or reviewed after it (see [`crate::plan::protected`]).
pub const DEFAULT_PROTECTED_WORKSPACE_PATHS: &[&str] = &[".git", ".vscode", ".localgpt", ".idea"];

/// macOS system directories granted read + execute (canonical paths: `/etc`, `/tmp` and `/var`
/// are symbolic links into `/private` there, and Seatbelt checks resolved paths). `/Library` and
/// `/Applications` hold the developer tools `/usr/bin`'s shims run (`xcrun` → Xcode or the
/// Command Line Tools).
pub const MACOS_SYSTEM_READ_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/System", "/Library", "/Applications", "/opt", "/private/etc",
    "/private/var/db/timezone", "/private/var/db/dyld", "/private/var/select", "/private/var/db/xcode_select_link",
];

/// Credential locations under `$HOME` on macOS besides [`HOME_CREDENTIALS`].
pub const MACOS_HOME_CREDENTIALS: &[&str] = &["Library/Keychains", "Library/Cookies"];

/// Device nodes usable on macOS (the pseudo-terminals the command opens itself are granted by
/// Seatbelt's pty extension, not by path).
pub const MACOS_DEVICE_PATHS: &[&str] = &[
    "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/fd", "/dev/dtracehelper",
];

/// Writable scratch on macOS in `workspace-write` mode.
pub const MACOS_SCRATCH_WRITE_DIRS: &[&str] = &["/private/tmp"];

/// One platform's default tables.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    /// System directories granted read + execute.
    pub system_read: &'static [&'static str],
    /// Toolchains under `$HOME` granted read + execute.
    pub home_toolchains: &'static [&'static str],
    /// Credential locations under `$HOME` (each platform's list adds to [`HOME_CREDENTIALS`]).
    pub home_credentials: &'static [&'static [&'static str]],
    /// Device nodes usable read-write.
    pub devices: &'static [&'static str],
    /// Writable scratch in `workspace-write` mode.
    pub scratch_write: &'static [&'static str],
}

/// The default tables of `platform` (Windows has no backend yet: it gets Linux's names, which
/// match nothing there, and plans for it are refused).
#[must_use]
pub fn tables(platform: Platform) -> Tables {
    match platform {
        Platform::Macos => Tables {
            system_read: MACOS_SYSTEM_READ_DIRS,
            home_toolchains: HOME_TOOLCHAINS,
            home_credentials: &[HOME_CREDENTIALS, MACOS_HOME_CREDENTIALS],
            devices: MACOS_DEVICE_PATHS,
            scratch_write: MACOS_SCRATCH_WRITE_DIRS,
        },
        Platform::Linux | Platform::Windows => Tables {
            system_read: SYSTEM_READ_DIRS,
            home_toolchains: HOME_TOOLCHAINS,
            home_credentials: &[HOME_CREDENTIALS],
            devices: DEVICE_PATHS,
            scratch_write: SCRATCH_WRITE_DIRS,
        },
    }
}
