//! The default path tables, each entry with its reason: what every policy grants, denies and
//! protects unless configured otherwise. One room, imported by the policy, the config and the
//! planners (it depends on nothing but [`Platform`] and the protected-path kinds). The protected
//! workspace paths are a data file, `data/protected-paths.toml` ([`protected_table`]).
//!
//! The tables without a platform in their name are Linux's; [`tables`] gives each platform's.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::model::guard::ProtectedKind;
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

/// Tool configs that tools look for upward from the working directory (editors, formatters,
/// version managers, workspace manifests): where one exists in an ancestor of the workspace it
/// is granted read-only, so a tool in the workspace finds what it finds outside.
pub const UPWARD_CONFIGS: &[&str] = &[
    ".editorconfig", ".prettierrc", ".prettierrc.json", ".prettierrc.yaml", ".prettierrc.yml", ".prettierrc.js", ".prettierrc.cjs",
    "prettier.config.js", ".eslintrc", ".eslintrc.json", ".eslintrc.js", ".eslintrc.cjs", "eslint.config.js", "eslint.config.mjs",
    "rustfmt.toml", ".rustfmt.toml", "clippy.toml", ".clippy.toml", "rust-toolchain", "rust-toolchain.toml", "Cargo.toml", "Cargo.lock",
    ".nvmrc", ".node-version", ".tool-versions", ".python-version", ".ruby-version", "pyproject.toml", "setup.cfg", "ruff.toml", ".ruff.toml",
    "package.json", "package-lock.json", "pnpm-workspace.yaml", "pnpm-lock.yaml", "yarn.lock", "lerna.json", "nx.json", "turbo.json",
    "tsconfig.json", "tsconfig.base.json", "go.mod", "go.work", "go.sum", ".gitignore", ".gitattributes", ".clang-format", ".clang-tidy",
    "deno.json", "biome.json",
];

/// One entry of `data/protected-paths.toml`: a workspace name that makes programs run later,
/// outside the sandbox.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProtectedEntry {
    /// The name, relative to the workspace.
    pub name: String,
    /// What it is when absent (a present one is protected as what it is).
    pub kind: ProtectedKind,
    /// Why it is protected.
    pub why: String,
    /// Who protects it (peers, or ours).
    pub source: String,
}

#[derive(Deserialize)]
struct ProtectedFile {
    path: Vec<ProtectedEntry>,
}

/// The data file, compiled into the binary.
const PROTECTED_PATHS_TOML: &str = include_str!("../data/protected-paths.toml");

/// The protected-path table, parsed once from the data file compiled into the binary (its
/// unit test checks that it parses, so an empty table here is impossible in a tested build).
#[must_use]
pub fn protected_table() -> &'static [ProtectedEntry] {
    static TABLE: OnceLock<Vec<ProtectedEntry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        read_plain_table(PROTECTED_PATHS_TOML)
            .unwrap_or_else(|| toml::from_str::<ProtectedFile>(PROTECTED_PATHS_TOML).map(|f| f.path).unwrap_or_default())
    })
}

/// The protected-path table read without the TOML parser, which cost ~90 µs of every CLI run
/// (a tenth of the planning). It reads only the file's plain shape: blank and comment lines,
/// `[[path]]` headers, and `key = "value"` lines whose value has no escape or quote. Anything
/// else (another key, a missing or repeated one, an escape, a trailing comment) gives `None` and
/// the caller parses with `toml`; a unit test checks that both readings of the file agree.
fn read_plain_table(src: &str) -> Option<Vec<ProtectedEntry>> {
    fn entry(fields: [Option<String>; 4]) -> Option<ProtectedEntry> {
        let [Some(name), Some(kind), Some(why), Some(source)] = fields else { return None };
        let kind = match kind.as_str() {
            "git_dir" => ProtectedKind::GitDir,
            "dir" => ProtectedKind::Dir,
            "file" => ProtectedKind::File,
            _ => return None,
        };
        Some(ProtectedEntry { name, kind, why, source })
    }
    let mut out = Vec::new();
    let mut cur: Option<[Option<String>; 4]> = None;
    for line in src.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "[[path]]" {
            if let Some(fields) = cur.take() {
                out.push(entry(fields)?);
            }
            cur = Some(Default::default());
            continue;
        }
        let (key, value) = line.split_once(" = ")?;
        let value = value.strip_prefix('"')?.strip_suffix('"')?;
        if value.contains(['"', '\\']) {
            return None;
        }
        let slot = ["name", "kind", "why", "source"].iter().position(|k| *k == key)?;
        let field = &mut cur.as_mut()?[slot];
        if field.is_some() {
            return None;
        }
        *field = Some(value.to_string());
    }
    out.push(entry(cur?)?);
    Some(out)
}

/// The default protected workspace names (the table's, in its order): made private for the
/// run, or reviewed after it (see [`crate::guard::protected`]).
#[must_use]
pub fn default_protected_names() -> Vec<String> {
    protected_table().iter().map(|e| e.name.clone()).collect()
}

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

/// Default hard `RLIMIT_NOFILE`: what a login shell gets from systemd (`DefaultLimitNOFILE`'s
/// hard half, 512 Ki), so that tools can raise their own soft limit as they do outside (the JVM,
/// Go programs, bundlers). Never above the caller's own hard limit.
pub const DEFAULT_OPEN_FILES: u64 = 512 << 10;

/// Soft `RLIMIT_NOFILE` every confined command starts with (a login shell's; `select(2)`'s
/// `FD_SETSIZE`), at most the hard limit.
pub const SOFT_OPEN_FILES: u64 = 1024;

/// Least default process bound, counted as the kernel counts it (`pids.max` and
/// `RLIMIT_NPROC` count threads too).
pub const MIN_DEFAULT_PROCESSES: u32 = 1024;

/// Default process bound per CPU above [`MIN_DEFAULT_PROCESSES`].
pub const PROCESSES_PER_CPU: u32 = 32;

/// The default process (task) bound on this host: `max(1024, 32 × CPUs)`. Threads count, so
/// a bound of 64 broke a 100-thread Python program and any parallel build on a workstation;
/// this one is above what `make -j`, `cargo build` and worker pools reach, and still bounds a
/// fork bomb (the memory cgroup bounds what each task may hold).
#[must_use]
pub fn default_max_processes() -> u32 {
    // `available_parallelism` is the CPUs this process may run on, lowered by a cgroup CPU
    // quota (which it reads from /proc/self/cgroup and the cgroup's files at every start): where
    // those CPUs alone are too few to raise the bound above its floor, the quota cannot either.
    if affinity_cpus().is_some_and(|n| n.saturating_mul(PROCESSES_PER_CPU) <= MIN_DEFAULT_PROCESSES) {
        return MIN_DEFAULT_PROCESSES;
    }
    processes_for(std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

fn processes_for(cpus: usize) -> u32 {
    MIN_DEFAULT_PROCESSES.max(u32::try_from(cpus).unwrap_or(u32::MAX).saturating_mul(PROCESSES_PER_CPU))
}

/// How many CPUs `sched_getaffinity` lets this process run on (Linux; `None` elsewhere or when
/// it fails, e.g. more CPUs than a `cpu_set_t` holds).
fn affinity_cpus() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t of its own size, filled by the kernel.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; pid 0 is the calling thread.
        if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } == 0 {
            // SAFETY: a cpu_set_t the kernel filled.
            return u32::try_from(unsafe { libc::CPU_COUNT(&set) }).ok();
        }
    }
    None
}

/// Windows system directories granted read + execute (the unelevated tier does not confine
/// reads: these say what a command is expected to need).
pub const WINDOWS_SYSTEM_READ_DIRS: &[&str] = &[r"C:\Windows", r"C:\Program Files", r"C:\Program Files (x86)", r"C:\ProgramData"];

/// Toolchains under `%USERPROFILE%` on Windows.
pub const WINDOWS_HOME_TOOLCHAINS: &[&str] = &[
    ".cargo", ".rustup", ".gitconfig", ".config/git", "go", "scoop", ".bun", ".deno", "AppData/Local/Programs", "AppData/Roaming/npm", "AppData/Local/pnpm",
];

/// Credential locations under `%USERPROFILE%` on Windows besides [`HOME_CREDENTIALS`]: the
/// Credential Manager's vaults, DPAPI's master keys (which decrypt every DPAPI secret of the
/// user), the cloud CLIs' Windows locations, browsers' and git's credential stores.
pub const WINDOWS_HOME_CREDENTIALS: &[&str] = &[
    "AppData/Roaming/Microsoft/Credentials", "AppData/Local/Microsoft/Credentials", "AppData/Roaming/Microsoft/Protect",
    "AppData/Local/Microsoft/Vault", "AppData/Roaming/Microsoft/Vault", "AppData/Roaming/gcloud", "AppData/Roaming/GitHub CLI",
    "AppData/Local/GitCredentialManager", "AppData/Roaming/Docker", "AppData/Local/Google/Chrome/User Data",
    "AppData/Local/Microsoft/Edge/User Data", "AppData/Roaming/Mozilla/Firefox/Profiles", "AppData/Roaming/npm/etc/npmrc",
];

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

/// The default tables of `platform`.
#[must_use]
pub fn tables(platform: Platform) -> Tables {
    match platform {
        Platform::Windows => Tables {
            system_read: WINDOWS_SYSTEM_READ_DIRS,
            home_toolchains: WINDOWS_HOME_TOOLCHAINS,
            home_credentials: &[HOME_CREDENTIALS, WINDOWS_HOME_CREDENTIALS],
            devices: &[],
            scratch_write: &[],
        },
        Platform::Macos => Tables {
            system_read: MACOS_SYSTEM_READ_DIRS,
            home_toolchains: HOME_TOOLCHAINS,
            home_credentials: &[HOME_CREDENTIALS, MACOS_HOME_CREDENTIALS],
            devices: MACOS_DEVICE_PATHS,
            scratch_write: MACOS_SCRATCH_WRITE_DIRS,
        },
        Platform::Linux => Tables {
            system_read: SYSTEM_READ_DIRS,
            home_toolchains: HOME_TOOLCHAINS,
            home_credentials: &[HOME_CREDENTIALS],
            devices: DEVICE_PATHS,
            scratch_write: SCRATCH_WRITE_DIRS,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_bound_is_the_one_available_parallelism_gives() {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        assert_eq!(default_max_processes(), processes_for(cpus));
        // The CPUs this process may use bound what a quota leaves.
        if let Some(n) = affinity_cpus() {
            assert!(cpus <= n as usize, "{cpus} > {n}");
        }
        assert_eq!([1, 32, 33, 64].map(processes_for), [1024, 1024, 1056, 2048]);
    }

    #[test]
    fn the_plain_reading_of_the_protected_table_is_the_toml_reading() {
        let parsed = toml::from_str::<ProtectedFile>(PROTECTED_PATHS_TOML).unwrap().path;
        assert_eq!(read_plain_table(PROTECTED_PATHS_TOML).as_deref(), Some(parsed.as_slice()));
        assert_eq!(protected_table(), parsed.as_slice());
        // What the plain reader does not know is left to `toml`.
        let one = "[[path]]\nname = \".x\"\nkind = \"dir\"\nwhy = \"w\"\nsource = \"s\"\n";
        assert_eq!(read_plain_table(one).map(|t| t.len()), Some(1));
        for other in [
            one.replace("\"w\"", "\"a \\\" b\""),
            one.replace("\"w\"", "\"w\" # note"),
            one.replace("kind = \"dir\"", "kind = \"link\""),
            one.replace("source = \"s\"\n", ""),
            one.replace("source", "name"),
            one.replace("why", "reason"),
            format!("name = \".y\"\n{one}"),
            String::new(),
        ] {
            assert_eq!(read_plain_table(&other), None, "{other}");
        }
    }

    #[test]
    fn protected_table_is_complete_and_well_formed() {
        let t = protected_table();
        assert!(t.len() >= 20, "the data file parses: {} entries", t.len());
        let names: Vec<&str> = t.iter().map(|e| e.name.as_str()).collect();
        // At least the union of what the strictest peers protect (sandbox-runtime, Codex).
        for n in [".git", ".vscode", ".idea", ".claude", ".codex", ".mcp.json", ".gitconfig", ".gitmodules", ".ripgreprc", ".bashrc",
            ".bash_profile", ".profile", ".zshrc", ".zprofile", ".localgpt"] {
            assert!(names.contains(&n), "{n}");
        }
        for (i, e) in t.iter().enumerate() {
            assert!(!e.why.trim().is_empty() && !e.source.trim().is_empty(), "{}", e.name);
            let p = std::path::Path::new(&e.name);
            assert!(p.is_relative() && p.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{}", e.name);
            assert!(!names[..i].contains(&e.name.as_str()), "duplicate {}", e.name);
            assert_eq!(e.kind == ProtectedKind::GitDir, e.name == ".git", "{}", e.name);
        }
    }
}
