//! Toolchain configuration files the command needs, without the credentials they may hold.
//!
//! `~/.gitconfig` can carry `url."https://TOKEN@host/".insteadOf`, `http.extraHeader` with an
//! `Authorization` header or an inline credential helper that prints a password; `~/.npmrc`
//! registry tokens (`//registry/:_authToken`); pip's config an index URL with user and
//! password; `~/.cargo/config.toml` registry tokens and URLs with user info. The command gets the
//! same files with those keys removed: bind-mounted over the originals at Full level, pointed to
//! by the tools' own environment variables at Standard (`GIT_CONFIG_GLOBAL`,
//! `npm_config_userconfig`, `PIP_CONFIG_FILE`). The whole file is never masked, since that loses
//! the user's ordinary settings (masking `~/.npmrc` changed npm's output).
//!
//! Every scrubber is pure and returns the names of the keys it removed, so that `explain` and
//! `status` can say what was withheld.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::guard::gitconfig;

/// The format of a tool's configuration file.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConfigKind {
    /// git's config format.
    Git,
    /// npm's `key=value` lines.
    Npmrc,
    /// An INI file (pip).
    Ini,
    /// Cargo's TOML.
    CargoToml,
}

/// A toolchain config file under `$HOME` and how a tool can be pointed at a copy of it.
#[derive(Clone, Copy, Debug)]
pub struct KnownConfig {
    /// Path relative to `$HOME`.
    pub rel: &'static str,
    /// Its format.
    pub kind: ConfigKind,
    /// The variable that points the tool at a copy (Standard level), if any.
    pub env: Option<&'static str>,
}

/// The toolchain configs that are scrubbed. git reads both global files; at Standard one merged
/// copy (XDG first, as git reads them) goes to `GIT_CONFIG_GLOBAL`.
pub const KNOWN_CONFIGS: &[KnownConfig] = &[
    KnownConfig { rel: ".config/git/config", kind: ConfigKind::Git, env: Some("GIT_CONFIG_GLOBAL") },
    KnownConfig { rel: ".gitconfig", kind: ConfigKind::Git, env: Some("GIT_CONFIG_GLOBAL") },
    KnownConfig { rel: ".npmrc", kind: ConfigKind::Npmrc, env: Some("npm_config_userconfig") },
    KnownConfig { rel: ".config/pip/pip.conf", kind: ConfigKind::Ini, env: Some("PIP_CONFIG_FILE") },
    KnownConfig { rel: ".pip/pip.conf", kind: ConfigKind::Ini, env: Some("PIP_CONFIG_FILE") },
    KnownConfig { rel: ".cargo/config.toml", kind: ConfigKind::CargoToml, env: None },
    KnownConfig { rel: ".cargo/config", kind: ConfigKind::CargoToml, env: None },
];

/// A config file as the command sees it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ScrubbedConfig {
    /// The original file (canonical path).
    pub path: PathBuf,
    /// Its format.
    pub kind: ConfigKind,
    /// What the command gets instead (equal to the original when nothing was removed).
    pub content: String,
    /// Names of the keys (or sections) that were removed.
    pub removed: Vec<String>,
    /// The variable that points the tool at a copy (its [`KnownConfig::env`]).
    #[serde(default)]
    pub env: Option<String>,
}

/// Key-name fragments that mark a credential (matched case-insensitively).
const SECRET_KEY_MARKERS: &[&str] = &["token", "password", "passwd", "secret", "apikey", "api-key", "api_key", "smtppass", "cookie", "_auth"];

fn secret_key(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    SECRET_KEY_MARKERS.iter().any(|m| l.contains(m))
}

/// A URL with credentials in its user info: `scheme://user:password@host` or a long token as
/// the user name (`https://ghp_…@github.com`); `ssh://git@host` is not one.
#[must_use]
pub fn url_has_credentials(v: &str) -> bool {
    let mut rest = v;
    while let Some(i) = rest.find("://") {
        let after = &rest[i + 3..];
        let authority_end = after.find(['/', '?', '#', ' ', '"', '\'']).unwrap_or(after.len());
        let authority = &after[..authority_end];
        if let Some(at) = authority.rfind('@') {
            let user = &authority[..at];
            if user.contains(':') || user.len() >= 16 {
                return true;
            }
        }
        rest = after;
    }
    false
}

/// Scrubs `text` of kind `kind`: `(content, removed key names)`. A file that cannot be parsed is
/// withheld whole (fail closed): the content is empty and the one removed name says why.
#[must_use]
pub fn scrub(kind: ConfigKind, text: &str) -> (String, Vec<String>) {
    match kind {
        ConfigKind::Git => scrub_git(text),
        ConfigKind::Npmrc | ConfigKind::Ini => scrub_lines(text, kind == ConfigKind::Npmrc),
        ConfigKind::CargoToml => scrub_cargo(text),
    }
}

fn scrub_git(text: &str) -> (String, Vec<String>) {
    let c = match gitconfig::parse(text) {
        Ok(c) => c,
        Err(e) => return (String::new(), vec![format!("<whole file: unparsable ({e})>")]),
    };
    let mut drop: Vec<(usize, usize)> = Vec::new();
    let mut removed = Vec::new();
    for s in &c.sections {
        // url."https://TOKEN@host/".insteadOf: the credential is the section's name.
        if s.section == "url" && s.subsection.as_deref().is_some_and(url_has_credentials) {
            drop.push((s.first_line, s.end_line));
            removed.push("url.<base with credentials>.*".to_string());
        }
    }
    for e in &c.entries {
        let credential = e.section == "credential"
            || (e.section == "http" && (e.key == "extraheader" || e.key == "cookiefile"))
            || secret_key(&e.key)
            || e.value.as_deref().is_some_and(url_has_credentials);
        if credential && !drop.iter().any(|&(a, b)| (a..b).contains(&e.first_line)) {
            drop.push((e.first_line, e.end_line));
            removed.push(match (&e.section, &e.subsection) {
                (s, Some(_)) if s == "credential" || s == "http" => format!("{s}.<url>.{}", e.key),
                _ => e.name(),
            });
        }
    }
    removed.dedup();
    (gitconfig::drop_lines(text, &drop), removed)
}

/// npmrc and INI: `key = value` lines, `#`/`;` comments, `[section]` headers; in INI a line
/// that starts with whitespace continues the previous value (the whole key goes when any of its
/// lines carries a credential).
fn scrub_lines(text: &str, npm: bool) -> (String, Vec<String>) {
    const NPM_AUTH_KEYS: &[&str] = &["_auth", "_authtoken", "_password", "username", "password", "email", "cert", "key", "certfile", "keyfile", "otp"];
    // Logical lines: a line and its continuation lines.
    let mut groups: Vec<Vec<&str>> = Vec::new();
    for line in text.split_inclusive('\n') {
        let continuation = !npm && line.starts_with([' ', '\t']) && !line.trim().is_empty();
        match groups.last_mut() {
            Some(g) if continuation => g.push(line),
            _ => groups.push(vec![line]),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut removed = Vec::new();
    for g in groups {
        let t = g[0].trim();
        let is_entry = !(t.is_empty() || t.starts_with(['#', ';', '[']));
        let (key, value) = match t.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => (t, ""),
        };
        let lk = key.to_ascii_lowercase();
        // A line that is not `key = value` can only set a boolean: dropped, since it may as well
        // be a token pasted on its own line.
        let credential = is_entry
            && (!t.contains('=')
                || secret_key(key)
                || url_has_credentials(value)
                || g[1..].iter().any(|l| url_has_credentials(l))
                || (npm && (key.starts_with("//") || NPM_AUTH_KEYS.contains(&lk.as_str()))));
        if credential {
            // Names only, never values (a bare line may be the secret itself).
            removed.push(if key.starts_with("//") {
                "//<registry>/:<auth>".to_string()
            } else if !t.contains('=') {
                "<line without =>".to_string()
            } else {
                key.to_string()
            });
        } else {
            g.iter().for_each(|l| out.push_str(l));
        }
    }
    removed.dedup();
    (out, removed)
}

fn scrub_cargo(text: &str) -> (String, Vec<String>) {
    let mut doc: toml::Table = match toml::from_str(text) {
        Ok(d) => d,
        Err(e) => return (String::new(), vec![format!("<whole file: unparsable ({})>", e.to_string().lines().next().unwrap_or(""))]),
    };
    let mut removed = Vec::new();
    fn walk(t: &mut toml::Table, prefix: &str, removed: &mut Vec<String>) {
        let keys: Vec<String> = t.keys().cloned().collect();
        for k in keys {
            let name = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            let drop = match t.get_mut(&k) {
                Some(toml::Value::Table(sub)) => {
                    walk(sub, &name, removed);
                    false
                }
                Some(toml::Value::String(s)) => secret_key(&k) || url_has_credentials(s),
                Some(toml::Value::Array(a)) => secret_key(&k) || a.iter().any(|v| v.as_str().is_some_and(url_has_credentials)),
                Some(_) => secret_key(&k),
                None => false,
            };
            if drop {
                t.remove(&k);
                removed.push(name);
            }
        }
    }
    walk(&mut doc, "", &mut removed);
    if removed.is_empty() {
        return (text.to_string(), removed);
    }
    (toml::to_string(&doc).unwrap_or_default(), removed)
}

/// Reads and scrubs the known configs that exist under `home` (canonical paths, symlinks
/// followed, resolved with the plan's `resolver`). Unreadable files are skipped (the command
/// could not read them either).
#[must_use]
pub fn scrub_known(resolver: &mut crate::plan::resolve::PathResolver, home: &Path) -> Vec<ScrubbedConfig> {
    let mut out: Vec<ScrubbedConfig> = Vec::new();
    for k in KNOWN_CONFIGS {
        let p = home.join(k.rel);
        let Ok(path) = resolver.canonicalize(&p).map(|r| r.path) else { continue };
        if out.iter().any(|c| c.path == path) {
            continue;
        }
        // Not opened if it is a FIFO (a workspace that is `$HOME` could have one left there).
        let Some(text) = crate::files::read_config_file(&path, u64::MAX) else { continue };
        let (content, removed) = scrub(k.kind, &text);
        out.push(ScrubbedConfig { path, kind: k.kind, content, removed, env: k.env.map(str::to_string) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_credentials() {
        assert!(url_has_credentials("https://user:pw@example.test/simple"));
        assert!(url_has_credentials("https://x-access-token:ghs_abc@github.com/o/r"));
        assert!(url_has_credentials("see https://ghp_0123456789abcdef0123@github.com/"));
        assert!(!url_has_credentials("ssh://git@github.com/o/r.git"));
        assert!(!url_has_credentials("https://github.com/o/r"));
        assert!(!url_has_credentials("git@github.com:o/r.git"));
        assert!(!url_has_credentials("https://example.test/a@b"));
    }

    #[test]
    fn git_config_loses_its_credentials_and_keeps_the_rest() {
        let text = "[user]\n\tname = A\n\temail = a@example.test\n\tsigningkey = ABCD\n[url \"https://x-access-token:ghs_SECRET1@github.com/\"]\n\tinsteadOf = https://github.com/\n[http]\n\textraHeader = Authorization: Bearer SECRET2\n[http \"https://ex.test\"]\n\textraheader = X-Token: SECRET3\n\tsslVerify = true\n[credential]\n\thelper = \"!f() { echo password=SECRET4; }; f\"\n[credential \"https://ex.test\"]\n\tusername = bob\n[github]\n\ttoken = SECRET5\n[remote \"origin\"]\n\turl = https://bob:SECRET6@ex.test/r.git\n[alias]\n\tst = status\n[core]\n\teditor = vim\n";
        let (out, removed) = scrub(ConfigKind::Git, text);
        for s in ["SECRET1", "SECRET2", "SECRET3", "SECRET4", "SECRET5", "SECRET6", "bob"] {
            assert!(!out.contains(s), "{s} left in:\n{out}");
        }
        for kept in ["name = A", "signingkey = ABCD", "sslVerify = true", "st = status", "editor = vim", "[http \"https://ex.test\"]"] {
            assert!(out.contains(kept), "{kept} lost:\n{out}");
        }
        assert!(gitconfig::parse(&out).is_ok(), "{out}");
        assert!(removed.contains(&"github.token".to_string()) && removed.contains(&"http.extraheader".to_string()), "{removed:?}");
        // A clean file is returned unchanged.
        let clean = "[user]\n\tname = A\n[init]\n\tdefaultBranch = main\n";
        assert_eq!(scrub(ConfigKind::Git, clean), (clean.to_string(), Vec::new()));
        // An unparsable file is withheld whole.
        let (o, r) = scrub(ConfigKind::Git, "[broken\nkey = \"x\n");
        assert!(o.is_empty() && r[0].contains("unparsable"));
    }

    #[test]
    fn npmrc_and_pip_conf() {
        let npmrc = "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_SECRET\n_auth = c2VjcmV0\nemail=me@example.test\nsave-exact=true\n# comment\nnodedir=/usr/include/node\nnpm_PASTEDSECRET\n";
        let (out, removed) = scrub(ConfigKind::Npmrc, npmrc);
        assert_eq!(out, "registry=https://registry.npmjs.org/\nsave-exact=true\n# comment\nnodedir=/usr/include/node\n");
        assert_eq!(removed, vec!["//<registry>/:<auth>", "_auth", "email", "<line without =>"]);
        let pip = "[global]\nindex-url = https://user:SECRET@pypi.example.test/simple\nextra-index-url =\n    https://pypi.org/simple\n    https://u:SECRET2@other.test/simple\ntimeout = 30\n[install]\nno-cache-dir = false\n";
        let (out, removed) = scrub(ConfigKind::Ini, pip);
        assert!(!out.contains("SECRET") && out.contains("timeout = 30") && out.contains("[install]"), "{out}");
        assert!(removed.contains(&"index-url".to_string()), "{removed:?}");
    }

    #[test]
    fn cargo_config() {
        let text = "[build]\njobs = 4\n[registry]\ntoken = \"cio_SECRET\"\n[registries.corp]\nindex = \"sparse+https://u:SECRET2@corp.test/index/\"\n[net]\ngit-fetch-with-cli = true\n";
        let (out, removed) = scrub(ConfigKind::CargoToml, text);
        assert!(!out.contains("SECRET") && out.contains("jobs = 4") && out.contains("git-fetch-with-cli = true"), "{out}");
        assert_eq!(removed, vec!["registries.corp.index", "registry.token"]);
        let clean = "[build]\njobs = 4 # comment kept\n";
        assert_eq!(scrub(ConfigKind::CargoToml, clean), (clean.to_string(), Vec::new()));
    }
}
