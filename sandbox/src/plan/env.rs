//! The environment a sandboxed command gets: a small allowlist, minus anything that looks like a
//! secret, plus what the policy keeps and sets, plus cache directories redirected away from the
//! host's: to the workspace's persistent tool caches (the sandbox's own directory, kept across
//! runs of that workspace) or to a per-run scratch directory, so that nothing a command caches
//! reaches a host tool.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::EnvPolicy;

/// Variables passed through when they don't look like secrets.
pub const ENV_ALLOWLIST: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ", "EDITOR",
    "VISUAL", "PAGER", "COLUMNS", "LINES", "NO_COLOR", "CLICOLOR", "HOSTNAME", "TMPDIR", "CI",
    "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "RUST_BACKTRACE", "RUST_LOG", "CARGO_TERM_COLOR",
    "PYENV_ROOT", "PYENV_VERSION", "PYENV_SHELL", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE",
    "NVM_DIR", "NVM_BIN", "NODE_PATH", "GOPATH", "GOROOT", "GOFLAGS", "JAVA_HOME", "CC", "CXX", "CFLAGS",
    "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "MANPATH",
    "DEBIAN_FRONTEND", "SOURCE_DATE_EPOCH", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
    // Where the host's trusted CA certificates are (paths, not credentials): a tool inside trusts
    // what it trusts bare, behind a TLS-inspecting proxy or a private mirror (the sandbox's proxy
    // tunnels TLS end to end, it does not terminate it). (`AWS_CA_BUNDLE` stays dropped by the
    // `AWS_` prefix.)
    "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT",
    "GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
];

/// Windows only, besides [`ENV_ALLOWLIST`]: what cmd.exe and programs need to find the system,
/// the user's folders and each other (names compared without regard to case there).
pub const WINDOWS_ENV_ALLOWLIST: &[&str] = &[
    "SystemRoot", "windir", "SystemDrive", "ComSpec", "PATHEXT", "USERPROFILE", "APPDATA", "LOCALAPPDATA",
    "ProgramFiles", "ProgramFiles(x86)", "ProgramW6432", "ProgramData", "CommonProgramFiles",
    "CommonProgramFiles(x86)", "CommonProgramW6432", "ALLUSERSPROFILE", "PUBLIC", "HOMEDRIVE", "HOMEPATH",
    "USERNAME", "NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE", "OS",
];

/// Name fragments that mark a variable as a secret (matched case-insensitively).
pub const SECRET_MARKERS: &[&str] = &[
    "KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "PRIVATE",
];

/// Name prefixes of cloud and service credentials.
pub const SECRET_PREFIXES: &[&str] = &[
    "AWS_", "AZURE_", "GOOGLE_", "GCP_", "GCLOUD_", "GH_", "GITHUB_", "GITLAB_", "OPENAI_", "ANTHROPIC_",
    "HF_", "HUGGING", "NPM_", "DOCKER_", "KUBE", "VAULT_", "SSH_", "DBUS_", "DIGITALOCEAN_", "HEROKU_",
];

/// Cache variables redirected to the persistent tool caches or the per-run scratch directory,
/// each to its own subdirectory.
pub const CACHE_VARS: &[(&str, &str)] = &[
    ("XDG_CACHE_HOME", "xdg-cache"),
    ("npm_config_cache", "npm-cache"),
    ("PIP_CACHE_DIR", "pip-cache"),
    ("YARN_CACHE_FOLDER", "yarn-cache"),
    ("PNPM_HOME", "pnpm"),
    ("UV_CACHE_DIR", "uv-cache"),
    ("GOMODCACHE", "go-mod"),
    ("GOCACHE", "go-build"),
];

/// True when a variable name looks like it carries a secret.
#[must_use]
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|m| upper.contains(m)) || SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
}

fn allowlisted(name: &str) -> bool {
    if cfg!(windows) {
        return ENV_ALLOWLIST.iter().chain(WINDOWS_ENV_ALLOWLIST).any(|a| a.eq_ignore_ascii_case(name));
    }
    ENV_ALLOWLIST.contains(&name) || name.starts_with("LC_")
}

/// The computed environment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvPlan {
    /// The full environment given to the helper and the command.
    pub vars: Vec<(String, String)>,
    /// Names of the caller's variables that were dropped (values never recorded).
    pub dropped: Vec<String>,
    /// Variables pointed at the scratch directory or the persistent caches.
    pub redirected: Vec<String>,
    /// Where the cache variables point when they persist across runs (the workspace's tool
    /// caches); `None`: the per-run scratch directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_caches: Option<PathBuf>,
}

/// Computes the sandbox environment from the caller's. `scratch` is the per-run scratch
/// directory, when the plan has one; `persistent` the workspace's tool caches, which the cache
/// variables point into instead when given.
#[must_use]
pub fn plan_environment(caller: &[(String, String)], policy: &EnvPolicy, workspace: &Path, scratch: Option<&Path>, persistent: Option<&Path>) -> EnvPlan {
    let mut out = EnvPlan::default();
    for (k, v) in caller {
        let keep = policy.keep.iter().any(|x| x == k) || (allowlisted(k) && !looks_secret(k));
        if keep {
            out.vars.push((k.clone(), v.clone()));
        } else {
            out.dropped.push(k.clone());
        }
    }
    let mut set = |k: &str, v: String| {
        out.vars.retain(|(n, _)| n != k);
        out.vars.push((k.to_string(), v));
    };
    if !caller.iter().any(|(k, _)| k == "PATH") {
        set("PATH", "/usr/local/bin:/usr/bin:/bin".into());
    }
    set("PWD", workspace.display().to_string());
    set("LOCALGPT_SANDBOX", "1".into());
    if policy.redirect_caches {
        if let Some(s) = persistent.or(scratch) {
            for (var, sub) in CACHE_VARS {
                set(var, s.join(sub).display().to_string());
                out.redirected.push((*var).to_string());
            }
        }
    }
    out.persistent_caches = persistent.filter(|_| policy.redirect_caches).map(Path::to_path_buf);
    for (k, v) in &policy.set {
        set(k, v.clone());
    }
    out.dropped.sort();
    out.dropped.dedup();
    out
}

/// The variables that point common tools at the allowlist proxy on `127.0.0.1:port`: the
/// usual `*_PROXY` pair in both cases (curl, wget, git, pip, Python, Go, Rust), `ALL_PROXY` as
/// SOCKS5 with remote name resolution, npm's and Yarn's own settings, the JVM's properties and
/// Node's built-in proxy support (Node 24+); `NO_PROXY` keeps the sandbox's own loopback
/// direct.
#[must_use]
pub fn proxy_vars(port: u16) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let mut v: Vec<(String, String)> = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY"] {
        v.push((k.into(), http.clone()));
    }
    for k in ["ALL_PROXY", "all_proxy"] {
        v.push((k.into(), format!("socks5h://127.0.0.1:{port}")));
    }
    for k in ["NO_PROXY", "no_proxy"] {
        v.push((k.into(), "localhost,127.0.0.1,::1".into()));
    }
    v.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    v.push(("JAVA_TOOL_OPTIONS".into(), format!("-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={port} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={port} -Dhttp.nonProxyHosts=localhost|127.0.0.1")));
    v
}

/// The root of the Cargo workspace the `workspace` is a member of, when the command cannot
/// write that root's `target/` (`writable` says what it can write): the nearest ancestor whose
/// `Cargo.toml` has a `[workspace]` table. Cargo builds into `<root>/target` from any member,
/// so a member's build then fails; the plan points `CARGO_TARGET_DIR` into the workspace.
#[must_use]
pub fn cargo_member_root(workspace: &Path, writable: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    for anc in workspace.ancestors().skip(1) {
        let manifest = anc.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        if !text.lines().any(|l| l.trim_start().starts_with("[workspace]")) {
            continue;
        }
        return (!writable(&anc.join("target"))).then(|| anc.to_path_buf());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cargo_member_builds_into_the_workspace_when_the_root_target_is_read_only() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("crates/app")).unwrap();
        std::fs::write(root.join("Cargo.toml"), "[workspace]\nmembers = [\"crates/app\"]\n").unwrap();
        std::fs::write(root.join("crates/app/Cargo.toml"), "[package]\nname = \"app\"\n").unwrap();
        let ws = root.join("crates/app");
        let only_ws = |p: &Path| p.starts_with(&ws);
        assert_eq!(cargo_member_root(&ws, &only_ws), Some(root.to_path_buf()));
        // The root's target/ granted writable: nothing to change.
        let target = root.join("target");
        assert_eq!(cargo_member_root(&ws, &|p: &Path| p.starts_with(&ws) || p.starts_with(&target)), None);
        // Not a member: the workspace root itself, or a package without [workspace] above.
        assert_eq!(cargo_member_root(root, &only_ws), None);
        std::fs::write(root.join("Cargo.toml"), "[package]\nname = \"solo\"\n").unwrap();
        assert_eq!(cargo_member_root(&ws, &only_ws), None);
    }

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn secrets_and_unknowns_are_dropped() {
        let caller = vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("GITHUB_TOKEN", "x"),
            ("MY_API_KEY", "x"),
            ("SSH_AUTH_SOCK", "/run/ssh"),
            ("RANDOM_THING", "y"),
            ("DISPLAY", ":0"),
        ]);
        let p = plan_environment(&caller, &EnvPolicy::default(), Path::new("/w"), None, None);
        let names: Vec<_> = p.vars.iter().map(|(k, _)| k.as_str()).collect();
        assert!(names.contains(&"PATH") && names.contains(&"HOME") && names.contains(&"LC_ALL"));
        for gone in ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "MY_API_KEY", "SSH_AUTH_SOCK", "RANDOM_THING", "DISPLAY"] {
            assert!(!names.contains(&gone), "{gone}");
            assert!(p.dropped.iter().any(|d| d == gone));
        }
        assert!(p.vars.contains(&("PWD".into(), "/w".into())));
    }

    /// The host's CA bundles (paths) pass, so that a tool inside trusts what it trusts bare;
    /// `AWS_CA_BUNDLE` is dropped with every `AWS_` variable.
    #[test]
    fn ca_bundle_paths_pass_and_aws_ones_do_not() {
        let ca = "/etc/ssl/certs/ca-certificates.crt";
        let caller = vars(&[("NODE_EXTRA_CA_CERTS", ca), ("SSL_CERT_FILE", ca), ("REQUESTS_CA_BUNDLE", ca), ("PIP_CERT", ca), ("AWS_CA_BUNDLE", ca)]);
        let p = plan_environment(&caller, &EnvPolicy::default(), Path::new("/w"), None, None);
        for kept in ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT"] {
            assert!(p.vars.contains(&(kept.into(), ca.into())), "{kept}");
        }
        assert!(p.dropped.iter().any(|d| d == "AWS_CA_BUNDLE"));
    }

    #[test]
    fn keep_and_set_and_caches() {
        let caller = vars(&[("MY_API_KEY", "k"), ("XDG_CACHE_HOME", "/home/u/.cache")]);
        let policy = EnvPolicy { keep: vec!["MY_API_KEY".into()], set: vec![("CI".into(), "1".into())], redirect_caches: true, persistent_caches: true };
        let p = plan_environment(&caller, &policy, Path::new("/w"), Some(Path::new("/tmp/s")), None);
        assert!(p.vars.contains(&("MY_API_KEY".into(), "k".into())));
        assert!(p.vars.contains(&("CI".into(), "1".into())));
        assert!(p.vars.contains(&("XDG_CACHE_HOME".into(), "/tmp/s/xdg-cache".into())));
        assert!(p.vars.contains(&("npm_config_cache".into(), "/tmp/s/npm-cache".into())));
        assert!(p.vars.iter().any(|(k, _)| k == "PATH"));
    }

    #[test]
    fn secret_detection() {
        assert!(looks_secret("OPENAI_API_KEY"));
        assert!(looks_secret("db_password"));
        assert!(!looks_secret("PATH"));
        assert!(!looks_secret("LANG"));
    }
}
