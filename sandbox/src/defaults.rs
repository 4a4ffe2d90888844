//! The default path tables, each entry with its reason: what every policy grants, denies and
//! protects unless configured otherwise. One room, imported by the policy, the config and the
//! planners (it depends on nothing).

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
