//! Import of Anthropic sandbox-runtime's settings (`sandbox run --settings FILE`).
//!
//! sandbox-runtime (`srt`) reads a JSON file with a `filesystem` and a `network` object. Each
//! field is mapped onto [`SandboxSettings`] only where this sandbox enforces the same thing;
//! a field it cannot honour is an error that names the field, and so is a field it does not
//! know — never a silent skip, so that a user moving a policy over never gets a weaker one than
//! they wrote.
//!
//! | sandbox-runtime | here |
//! |---|---|
//! | `filesystem.denyRead` | `allow_paths.deny` (no read and no write) |
//! | `filesystem.allowWrite` | `allow_paths.write` |
//! | `filesystem.denyWrite` (non-empty) | refused: a read-only path inside a writable one has no equivalent (use `denyRead`, or the protected workspace paths) |
//! | `network.allowedDomains` | `network = "allowlist"` and `allow_domains` (empty: `network = "deny"`) |
//! | `network.deniedDomains` | `deny_domains` |
//! | `network.allowUnixSockets` | `allow_unix_sockets` |
//! | `network.allowAllUnixSockets: true` | refused (every host socket would be reachable) |
//! | `network.allowLocalBinding: true` | honoured: local servers work (loopback only) |
//! | `network.allowLocalBinding: false` | refused: the sandbox lets commands listen on loopback |
//! | `enableWeakerNestedSandbox: false` | honoured (nothing is weakened); `true` refused |
//! | `filesystem.allowRead` (non-empty) | refused: re-allowing reads inside a denied path has no equivalent (list only what to deny) |
//! | `filesystem.allowGitConfig: false` | honoured: git config changes are reviewed after the run (safe keys applied, the rest pending) |
//! | `filesystem.allowGitConfig: true` | refused: a config key that runs programs is never applied unreviewed |
//! | `allowPty: true` | honoured: pseudo-terminals work inside the sandbox |
//! | `allowPty: false` | refused: the sandbox does not take pseudo-terminals away |
//! | anything else | refused, by name |
//!
//! Paths: `~/` is the home directory, a relative path is relative to the current directory. A
//! glob (`*`, `?`, `[`) is refused with its field named: read as a literal path it would deny
//! nothing. Domains keep their spelling: `example.com` is that host, `*.example.com` its
//! subdomains; a `host:port` entry is refused (ports here are `allow_ports`, for every domain),
//! and so is any entry that is not a domain rule.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::SandboxSettings;
use crate::error::SandboxError;
use crate::policy::NetworkPolicy;

/// Applies the sandbox-runtime settings in `json` (the file's text; `file` names it in errors)
/// to `s`; paths are made absolute against `cwd` and `home`.
///
/// # Errors
/// [`SandboxError::Config`] naming the file and the field: malformed JSON, a field of the wrong
/// type, a field this sandbox cannot honour or does not know.
pub fn apply(s: &mut SandboxSettings, json: &str, file: &Path, cwd: &Path, home: Option<&Path>) -> Result<(), SandboxError> {
    let err = |field: &str, why: &str| SandboxError::Config(format!("--settings {}: {field}: {why}", file.display()));
    let v: Value = serde_json::from_str(json).map_err(|e| err("(file)", &format!("not JSON: {e}")))?;
    let top = v.as_object().ok_or_else(|| err("(file)", "not a JSON object"))?;
    for (k, val) in top {
        match k.as_str() {
            "filesystem" => filesystem(s, val, &err, cwd, home)?,
            "network" => network(s, val, &err, cwd, home)?,
            "enableWeakerNestedSandbox" => only(val, false, k, "true weakens the sandbox; this sandbox has no weaker mode to nest in", &err)?,
            "allowPty" => only(val, true, k, "false cannot be honoured: the sandbox lets commands open pseudo-terminals (/dev/ptmx); other terminals stay out of reach", &err)?,
            _ => return Err(err(k, "unknown field: not imported (nothing is ignored silently)")),
        }
    }
    Ok(())
}

type ErrFn<'a> = dyn Fn(&str, &str) -> SandboxError + 'a;

fn strings(val: &Value, field: &str, err: &ErrFn<'_>) -> Result<Vec<String>, SandboxError> {
    let a = val.as_array().ok_or_else(|| err(field, "must be an array of strings"))?;
    a.iter().map(|x| x.as_str().map(str::to_string).ok_or_else(|| err(field, "must be an array of strings"))).collect()
}

/// A boolean field honoured only as `honoured`: the other value is refused with `why`.
fn only(val: &Value, honoured: bool, field: &str, why: &str, err: &ErrFn<'_>) -> Result<(), SandboxError> {
    match val.as_bool() {
        Some(b) if b == honoured => Ok(()),
        Some(_) => Err(err(field, why)),
        None => Err(err(field, "must be true or false")),
    }
}

/// A list field honoured only empty: entries are refused, listed, with `why`.
fn none_of(val: &Value, field: &str, why: &str, err: &ErrFn<'_>) -> Result<(), SandboxError> {
    let list = strings(val, field, err)?;
    if list.is_empty() { Ok(()) } else { Err(err(field, &format!("{}: {why}", list.join(", ")))) }
}

/// A list of domain rules: a `host:port` entry, or one that is no domain rule, is refused.
fn domains(val: &Value, field: &str, err: &ErrFn<'_>) -> Result<Vec<String>, SandboxError> {
    let list = strings(val, field, err)?;
    for d in &list {
        if d.contains(':') {
            return Err(err(field, &format!("{d}: host:port entries are not imported (ports here are allow_ports, for every allowed domain): give the host, and the port in allow_ports")));
        }
        crate::network::DomainRule::parse(d).map_err(|e| err(field, &format!("{d}: {e}")))?;
    }
    Ok(list)
}

fn path(p: &str, cwd: &Path, home: Option<&Path>, field: &str, err: &ErrFn<'_>) -> Result<PathBuf, SandboxError> {
    if p == "~" || p.starts_with("~/") {
        let h = home.ok_or_else(|| err(field, &format!("{p}: ~ used but no home directory is known")))?;
        return Ok(if p == "~" { h.to_path_buf() } else { h.join(&p[2..]) });
    }
    if p.is_empty() {
        return Err(err(field, "an empty path"));
    }
    if p.contains(['*', '?', '[']) {
        return Err(err(field, &format!("{p}: globs are not imported (read as a literal path it would match nothing); list the paths themselves")));
    }
    Ok(crate::config::absolutize(Path::new(p), cwd))
}

fn filesystem(s: &mut SandboxSettings, val: &Value, err: &ErrFn<'_>, cwd: &Path, home: Option<&Path>) -> Result<(), SandboxError> {
    let o = val.as_object().ok_or_else(|| err("filesystem", "must be an object"))?;
    for (k, v) in o {
        let field = format!("filesystem.{k}");
        match k.as_str() {
            "denyRead" => {
                for p in strings(v, &field, err)? {
                    s.extra_deny.push(path(&p, cwd, home, &field, err)?);
                }
            }
            "allowWrite" => {
                for p in strings(v, &field, err)? {
                    s.extra_write.push(path(&p, cwd, home, &field, err)?);
                }
            }
            "allowRead" => none_of(v, &field, "re-allowing reads inside a denied path has no equivalent here; list in denyRead only what must not be read", err)?,
            "allowGitConfig" => only(v, false, &field, "true cannot be honoured: changes to git's config are reviewed after the run (keys that cannot run programs are applied, the rest kept pending: `localgpt sandbox pending`)", err)?,
            "denyWrite" => none_of(v, &field, "a read-only path inside a writable one has no equivalent here (Landlock cannot take a right back below a grant); use denyRead (no read, no write) or the protected workspace paths", err)?,
            _ => return Err(err(&field, "unknown field: not imported (nothing is ignored silently)")),
        }
    }
    Ok(())
}

fn network(s: &mut SandboxSettings, val: &Value, err: &ErrFn<'_>, cwd: &Path, home: Option<&Path>) -> Result<(), SandboxError> {
    let o = val.as_object().ok_or_else(|| err("network", "must be an object"))?;
    // sandbox-runtime proxies every run: no allowed domain means no network.
    s.network = NetworkPolicy::Deny;
    for (k, v) in o {
        let field = format!("network.{k}");
        match k.as_str() {
            "allowedDomains" => {
                let d = domains(v, &field, err)?;
                if !d.is_empty() {
                    s.network = NetworkPolicy::Allowlist;
                }
                s.allow_domains.extend(d);
            }
            "deniedDomains" => s.deny_domains.extend(domains(v, &field, err)?),
            "allowUnixSockets" => {
                for p in strings(v, &field, err)? {
                    s.allow_unix_sockets.push(path(&p, cwd, home, &field, err)?);
                }
            }
            "allowAllUnixSockets" => only(v, false, &field, "true would make every host socket reachable (docker.sock, D-Bus): list the ones needed in allowUnixSockets", err)?,
            "allowLocalBinding" => only(v, true, &field, "false cannot be honoured: the sandbox lets commands listen on loopback (in its own network namespace at Full, on the host's loopback at Standard, reachable only by its own processes' connects)", err)?,
            _ => return Err(err(&field, "unknown field: not imported (nothing is ignored silently)")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imported(json: &str) -> Result<SandboxSettings, String> {
        let mut s = SandboxSettings::default();
        apply(&mut s, json, Path::new("srt.json"), Path::new("/work/proj"), Some(Path::new("/home/u"))).map_err(|e| e.to_string())?;
        Ok(s)
    }

    #[test]
    fn every_honoured_field_maps() {
        let s = imported(r#"{
            "network": {"allowedDomains": ["github.com", "*.npmjs.org"], "deniedDomains": ["evil.github.com"],
                        "allowUnixSockets": ["~/.ssh/agent.sock"], "allowLocalBinding": true, "allowAllUnixSockets": false},
            "filesystem": {"denyRead": ["~/.ssh", "secrets"], "allowWrite": [".", "/tmp/out"], "denyWrite": [], "allowRead": [], "allowGitConfig": false},
            "enableWeakerNestedSandbox": false, "allowPty": true
        }"#).unwrap();
        assert_eq!(s.network, NetworkPolicy::Allowlist);
        assert_eq!(s.allow_domains, ["github.com", "*.npmjs.org"]);
        assert_eq!(s.deny_domains, ["evil.github.com"]);
        assert_eq!(s.allow_unix_sockets, [PathBuf::from("/home/u/.ssh/agent.sock")]);
        assert_eq!(s.extra_deny, [PathBuf::from("/home/u/.ssh"), PathBuf::from("/work/proj/secrets")]);
        assert_eq!(s.extra_write, [PathBuf::from("/work/proj/."), PathBuf::from("/tmp/out")]);
    }

    #[test]
    fn no_allowed_domain_means_no_network() {
        assert_eq!(imported(r#"{"network": {"allowedDomains": []}}"#).unwrap().network, NetworkPolicy::Deny);
        assert_eq!(imported(r#"{"network": {}}"#).unwrap().network, NetworkPolicy::Deny);
    }

    #[test]
    fn what_cannot_be_honoured_or_is_unknown_is_refused_by_name() {
        for (json, field) in [
            (r#"{"filesystem": {"denyWrite": [".env"]}}"#, "filesystem.denyWrite"),
            (r#"{"network": {"allowLocalBinding": false}}"#, "network.allowLocalBinding"),
            (r#"{"network": {"allowAllUnixSockets": true}}"#, "network.allowAllUnixSockets"),
            (r#"{"network": {"httpProxyPort": 8080}}"#, "network.httpProxyPort"),
            (r#"{"filesystem": {"allowRead": ["/x"]}}"#, "filesystem.allowRead"),
            (r#"{"filesystem": {"denyRead": ["**/.env"]}}"#, "filesystem.denyRead"),
            (r#"{"filesystem": {"denyRead": ["secrets/key?.pem"]}}"#, "filesystem.denyRead"),
            (r#"{"filesystem": {"allowWrite": ["build/[ab]"]}}"#, "filesystem.allowWrite"),
            (r#"{"filesystem": {"allowGitConfig": true}}"#, "filesystem.allowGitConfig"),
            (r#"{"allowPty": false}"#, "allowPty"),
            (r#"{"network": {"allowedDomains": ["github.com:443"]}}"#, "network.allowedDomains"),
            (r#"{"network": {"deniedDomains": ["evil.com:22"]}}"#, "network.deniedDomains"),
            (r#"{"network": {"allowedDomains": ["*"]}}"#, "network.allowedDomains"),
            (r#"{"network": {"allowUnixSockets": ["/run/*.sock"]}}"#, "network.allowUnixSockets"),
            (r#"{"ignoreViolations": {}}"#, "ignoreViolations"),
            (r#"{"enableWeakerNestedSandbox": true}"#, "enableWeakerNestedSandbox"),
            (r#"{"network": {"allowedDomains": "github.com"}}"#, "network.allowedDomains"),
            (r#"{"filesystem": {"denyRead": ["~/x"]}, "network": []}"#, "network"),
            (r#"[]"#, "(file)"),
            (r#"{"network": "#, "(file)"),
        ] {
            let e = imported(json).unwrap_err();
            assert!(e.contains(&format!("srt.json: {field}:")), "{json}: {e}");
        }
    }
}
