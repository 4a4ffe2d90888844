//! What the sandbox does to one path, and why — and how to allow what it refuses.
//!
//! Pure functions of a [`Plan`]: [`explain_path`] answers `localgpt sandbox explain --path P`,
//! and [`refusals_in`] turns the file errors a command printed on stderr (`Permission denied`,
//! `Read-only file system`, `Operation not permitted`, and `No such file or directory` for a path
//! the host has but the sandbox does not show) into refusals that name the protection and the
//! flag that allows them, as the network allowlist's refusals already do. The stderr scan is a
//! hint, never a decision: a path is reported only where the plan itself refuses the access.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::guard::protected::ProtectedPath;
use crate::plan::{Access, AccessRule, Plan, Protection, ProtectionId, ProtectionState};

/// What the plan does to one path.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PathExplanation {
    /// The path asked about (absolute).
    pub path: PathBuf,
    /// The command may read (and execute) it.
    pub read: bool,
    /// The command may write it.
    pub write: bool,
    /// The rule that decides, in words.
    pub why: String,
    /// A protected workspace path: changes to it are kept for review after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewed: Option<String>,
    /// What this level does not confine (the filesystem protections that are degraded or off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unconfined: Vec<String>,
    /// The flag that grants what is refused (`None`: nothing refused, or no flag undoes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<String>,
}

impl PathExplanation {
    /// The explanation as lines of text.
    #[must_use]
    pub fn text(&self) -> String {
        let access = match (self.read, self.write) {
            (true, true) => "read and write",
            (true, false) => "read only",
            _ => "no access",
        };
        let mut s = format!("{}: {access} — {}", self.path.display(), self.why);
        if let Some(r) = &self.reviewed {
            s.push_str(&format!("\n  {r}"));
        }
        for u in &self.unconfined {
            s.push_str(&format!("\n  at this level: {u}"));
        }
        if let Some(a) = &self.allow {
            s.push_str(&format!("\n  to allow it: {a}"));
        }
        s
    }
}

/// The part of a plan that decides what a path is: its access rules, protected paths and
/// filesystem protections (a copy, kept while the plan itself goes to the run).
#[derive(Clone, Debug)]
pub struct PathRules {
    access: Access,
    protected: Vec<ProtectedPath>,
    protections: Vec<Protection>,
    fresh_root: bool,
}

impl PathRules {
    /// The rules of `plan`.
    #[must_use]
    pub fn of(plan: &Plan) -> PathRules {
        let fs = |p: &&Protection| matches!(p.id, ProtectionId::FsReadOutside | ProtectionId::FsWriteOutside | ProtectionId::FsReadCredentials);
        PathRules {
            access: plan.access.clone(),
            protected: plan.protected.clone(),
            protections: plan.protections.iter().filter(fs).cloned().collect(),
            fresh_root: plan.namespaces().is_some(),
        }
    }
}

/// The longest rule of `rules` that holds `path`.
fn holding<'a>(rules: &'a [AccessRule], path: &Path) -> Option<&'a AccessRule> {
    rules.iter().filter(|r| path.starts_with(&r.path)).max_by_key(|r| r.path.as_os_str().len())
}

/// What `plan` does to `path` (absolute, as the command names it; links are not followed
/// here: the caller resolves what exists). `is_dir`: the path is a directory on the host (a
/// grant suggested for a file is its directory).
#[must_use]
pub fn explain_path(plan: &PathRules, path: &Path, is_dir: bool) -> PathExplanation {
    let a = &plan.access;
    let grant_of = |flag: &str| {
        let target = if is_dir { path } else { path.parent().unwrap_or(path) };
        format!("{flag} {}", crate::text::escape_controls(&target.display().to_string()))
    };
    let (read, write, why, allow) = if let Some(d) = holding(&a.deny, path) {
        (false, false, format!("denied: {} ({})", d.reason, d.path.display()), None)
    } else if a.devices.iter().any(|d| d == path) {
        (true, true, "a device node the command may open".to_owned(), None)
    } else if let Some(w) = holding(&a.write, path) {
        (true, true, format!("under {} ({})", w.path.display(), w.reason), None)
    } else if let Some(r) = holding(&a.read, path) {
        (true, false, format!("under {} ({}), read-only", r.path.display(), r.reason), Some(format!("{} (or [sandbox.allow_paths] write)", grant_of("--allow-write"))))
    } else {
        let hidden = if plan.fresh_root { "outside every grant: not in the sandbox's fresh root" } else { "outside every grant" };
        (false, false, hidden.to_owned(), Some(format!("{} to read, {} to write (or [sandbox.allow_paths] read / write)", grant_of("--allow-read"), grant_of("--allow-write"))))
    };
    let reviewed = plan
        .protected
        .iter()
        .find(|p| path.starts_with(&p.path))
        .map(|p| format!("{} is a protected path ({}): what the command changes there is kept for review after the run (`localgpt sandbox pending`)", p.path.display(), p.reason));
    let unconfined = plan
        .protections
        .iter()
        .filter(|p| p.state != ProtectionState::Enforced)
        .map(|p| format!("{} is {} ({})", p.id.as_str(), if p.state == ProtectionState::Off { "off" } else { "degraded" }, p.detail))
        .collect();
    PathExplanation { path: path.to_path_buf(), read, write, why, reviewed, unconfined, allow }
}

/// One file access the command was refused, found in what it printed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The path.
    pub path: PathBuf,
    /// `read` or `write`: what the plan refuses there.
    pub access: String,
    /// The protection that refuses it (`fs-write-outside`, `fs-read-outside`,
    /// `fs-read-credentials`).
    pub protection: String,
    /// Why (the rule).
    pub why: String,
    /// The flag that allows it (`None`: a denied path no flag undoes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<String>,
}

/// The most refusals reported for one run.
pub const MAX_REFUSALS: usize = 8;

/// The file errors in `stderr` (a command's) that the plan explains: each absolute path on a
/// line with `Permission denied`, `Read-only file system` or `Operation not permitted` that the
/// plan refuses, and with `No such file or directory` one the sandbox does not show although the
/// host has it or its directory (`host`: whether it exists and is a directory there, `None`:
/// absent); never a path under `/proc`, `/sys` or `/dev`. At most
/// [`MAX_REFUSALS`], each path once.
#[must_use]
pub fn refusals_in(stderr: &str, plan: &PathRules, host: impl Fn(&Path) -> Option<bool>) -> Vec<Refusal> {
    let mut out: Vec<Refusal> = Vec::new();
    for line in stderr.lines() {
        let denied = ["Permission denied", "Read-only file system", "Operation not permitted"].iter().any(|m| line.contains(m));
        let missing = line.contains("No such file or directory");
        if !denied && !missing {
            continue;
        }
        for path in absolute_paths(line) {
            // Kernel interfaces and devices are governed by other protections (ptrace, the PID
            // namespace, the device list): a path grant would not be the answer.
            if out.len() >= MAX_REFUSALS {
                return out;
            }
            let kernel = ["/proc", "/sys", "/dev"].iter().any(|k| path.starts_with(k));
            if kernel || out.iter().any(|r| r.path == path) {
                continue;
            }
            // Missing in the sandbox: the path, or for a file being made its directory, on the host.
            let on_host = host(&path).or_else(|| if missing { path.parent().and_then(&host).filter(|d| *d).map(|_| false) } else { None });
            let e = explain_path(plan, &path, on_host == Some(true));
            let (access, protection) = match (e.read, e.write) {
                (false, _) if e.allow.is_none() && (denied || on_host.is_some()) => ("read", ProtectionId::FsReadCredentials),
                (false, _) if denied || on_host.is_some() => ("read", ProtectionId::FsReadOutside),
                (true, false) if denied => ("write", ProtectionId::FsWriteOutside),
                _ => continue,
            };
            out.push(Refusal { path, access: access.into(), protection: protection.as_str().into(), why: e.why, allow: e.allow });
        }
    }
    out
}

/// What a command's failed name lookups mean in this sandbox, and how to allow them: a hint when
/// `stderr` shows a lookup that failed (`Temporary failure in name resolution`, `EAI_AGAIN`,
/// `Could not resolve host`, …) under `network`, with `dns_stub` where the sandbox answers names
/// itself (under an allowlist at Full, and at Standard where the runner answers `connect`: its
/// refusals are reported as network events, with their own hint). `None` where there is nothing to say (an open network, no such line).
#[must_use]
pub fn resolution_hint(stderr: &str, network: crate::policy::NetworkPolicy, dns_stub: bool) -> Option<String> {
    use crate::policy::NetworkPolicy;
    const FAILED: &[&str] = &[
        "Temporary failure in name resolution", "EAI_AGAIN", "Could not resolve host", "Name or service not known",
        "getaddrinfo ENOTFOUND", "No address associated with hostname", "failed to lookup address", "nodename nor servname",
        "Could not resolve hostname", "no such host", "UnknownHostException", "Resolving timed out",
    ];
    if !stderr.lines().any(|l| FAILED.iter().any(|m| l.contains(m))) {
        return None;
    }
    match (network, dns_stub) {
        (NetworkPolicy::Deny, _) => Some(
            "a name lookup failed: the network is denied in this sandbox; to let the command reach a host: --network allowlist --allow-domain HOST ([sandbox] network = \"allowlist\", allow_domains)".into(),
        ),
        (NetworkPolicy::Allowlist, false) => Some(
            "a name lookup failed: at this level names are not resolved inside the sandbox; tools that use the proxy variables (HTTPS_PROXY, ALL_PROXY=socks5h://…: curl, pip, npm, git over https) resolve allowed names through the proxy, a program that resolves names itself (getaddrinfo, Node's dns.lookup) needs Full level (user namespaces: its DNS stub answers allowed names) or --network full".into(),
        ),
        _ => None,
    }
}

/// The absolute paths named in a line of an error message: words that start with `/`, without
/// the quotes, brackets and trailing punctuation messages put around them.
fn absolute_paths(line: &str) -> Vec<PathBuf> {
    line.split(|c: char| c.is_whitespace() || "'\"`‘’“”()[]{}<>,;".contains(c))
        .map(|w| w.trim_end_matches([':', '.', '!']))
        .filter(|w| w.starts_with('/') && w.len() > 1 && !w.contains("//"))
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::protected::ProtectedKind;
    use crate::plan::prot;

    fn rule(p: &str, why: &str) -> AccessRule {
        AccessRule { path: PathBuf::from(p), reason: why.into() }
    }

    fn plan() -> PathRules {
        let d = crate::test_dir();
        let (home, ws) = (d.path().join("home"), d.path().join("ws"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let s = crate::SandboxSettings { home: Some(home), ..Default::default() };
        let policy = crate::build_sandbox_policy(&ws, &s).unwrap();
        let caps = crate::detect::assumed_for(crate::detect::Platform::current());
        let mut p = PathRules::of(&crate::make_plan(&policy, &caps, &crate::plan::RunContext::default()).unwrap());
        p.access = Access {
            read: vec![rule("/usr", "system or toolchain"), rule("/home/u/.cargo", "system or toolchain")],
            write: vec![rule("/home/u/ws", "workspace"), rule("/tmp", "scratch")],
            deny: vec![rule("/home/u/ws/.env", "credential or secret"), rule("/home/u/.ssh", "credential or secret")],
            devices: vec![PathBuf::from("/dev/null")],
        };
        p.protected = vec![ProtectedPath { path: "/home/u/ws/.git/hooks".into(), kind: ProtectedKind::Dir, absent: false, private: false, reason: "configured".into(), keys: Vec::new() }];
        p.protections = vec![prot(ProtectionId::FsWriteOutside, ProtectionState::Enforced, "landlock", "")];
        p
    }

    #[test]
    fn each_rule_decides_with_its_reason_and_the_flag_that_allows() {
        let p = plan();
        let e = explain_path(&p, Path::new("/home/u/ws/src/main.rs"), false);
        assert!(e.read && e.write && e.allow.is_none() && e.why.contains("workspace"), "{e:?}");
        let e = explain_path(&p, Path::new("/home/u/.cargo/registry"), true);
        assert!(e.read && !e.write, "{e:?}");
        assert_eq!(e.allow.as_deref(), Some("--allow-write /home/u/.cargo/registry (or [sandbox.allow_paths] write)"));
        let e = explain_path(&p, Path::new("/usr/bin/cc"), false);
        assert!(e.allow.as_deref().is_some_and(|a| a.starts_with("--allow-write /usr/bin ")), "a file's grant is its directory: {e:?}");
        let e = explain_path(&p, Path::new("/home/u/.ssh/id_rsa"), false);
        assert!(!e.read && !e.write && e.allow.is_none() && e.why.starts_with("denied"), "{e:?}");
        let e = explain_path(&p, Path::new("/home/u/ws/.env"), false);
        assert!(!e.read && e.why.contains("credential"), "a deny inside a grant wins: {e:?}");
        let e = explain_path(&p, Path::new("/opt/x"), true);
        assert!(!e.read && e.allow.as_deref().is_some_and(|a| a.contains("--allow-read /opt/x") && a.contains("--allow-write /opt/x")), "{e:?}");
        let e = explain_path(&p, Path::new("/home/u/ws/.git/hooks/pre-commit"), false);
        assert!(e.write && e.reviewed.as_deref().is_some_and(|r| r.contains("review")), "{e:?}");
        let e = explain_path(&p, Path::new("/dev/null"), false);
        assert!(e.read && e.write, "{e:?}");
        // `/home/u/wsx` is not under `/home/u/ws`: components, not bytes.
        assert!(!explain_path(&p, Path::new("/home/u/wsx/f"), false).write);
        let mut weak = plan();
        weak.protections = vec![prot(ProtectionId::FsWriteOutside, ProtectionState::Off, "none", "minimal level")];
        assert_eq!(explain_path(&weak, Path::new("/opt/x"), true).unconfined, vec!["fs-write-outside is off (minimal level)".to_string()]);
        assert!(explain_path(&p, Path::new("/opt/x"), true).text().contains("to allow it: --allow-read /opt/x"));
    }

    #[test]
    fn failed_lookups_get_the_hint_of_the_network_mode() {
        use crate::policy::NetworkPolicy;
        let py = "socket.gaierror: [Errno -3] Temporary failure in name resolution\n";
        let node = "Error: getaddrinfo EAI_AGAIN example.com\n";
        let curl = "curl: (6) Could not resolve host: example.com\n";
        for e in [py, node, curl] {
            assert!(resolution_hint(e, NetworkPolicy::Deny, false).is_some_and(|h| h.contains("--allow-domain")), "{e}");
            assert!(resolution_hint(e, NetworkPolicy::Allowlist, false).is_some_and(|h| h.contains("Full level")), "{e}");
            // The stub's own refusals say it (network events); an open network has nothing to add.
            assert_eq!(resolution_hint(e, NetworkPolicy::Allowlist, true), None);
            assert_eq!(resolution_hint(e, NetworkPolicy::Full, false), None);
        }
        assert_eq!(resolution_hint("error: file not found\n", NetworkPolicy::Deny, false), None);
    }

    #[test]
    fn refusals_are_the_errors_the_plan_explains() {
        let p = plan();
        let host = |q: &Path| match q.to_str() {
            Some("/home/u/.cargo/registry/cache") | Some("/opt/data") => Some(true),
            Some("/etc/hosts") => Some(false),
            _ => None,
        };
        let err = "\
touch: cannot touch '/home/u/.cargo/registry/cache/x': Read-only file system
warning: failed to write /home/u/.cargo/registry/cache: Permission denied (os error 13)
PermissionError: [Errno 13] Permission denied: '/home/u/ws/own-file'
cat: /opt/data: No such file or directory
cat: /nonexistent/file: No such file or directory
bash: /opt/data/new.txt: No such file or directory
ls: cannot open directory '/home/u/.ssh': Permission denied
cat: /proc/1/environ: Permission denied
sh: /dev/tty: No such file or directory
error: /home/u/.cargo/registry/cache/x: Read-only file system
";
        let r = refusals_in(err, &p, host);
        let got: Vec<(&str, &str, &str)> = r.iter().map(|x| (x.path.to_str().unwrap(), x.access.as_str(), x.protection.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("/home/u/.cargo/registry/cache/x", "write", "fs-write-outside"),
                ("/home/u/.cargo/registry/cache", "write", "fs-write-outside"),
                ("/opt/data", "read", "fs-read-outside"),
                ("/opt/data/new.txt", "read", "fs-read-outside"),
                ("/home/u/.ssh", "read", "fs-read-credentials")
            ],
            "the workspace's own file (its own permissions) and a path the host lacks are not the sandbox's; each path once"
        );
        assert_eq!(r[0].allow.as_deref(), Some("--allow-write /home/u/.cargo/registry/cache (or [sandbox.allow_paths] write)"));
        assert_eq!(r[1].allow.as_deref(), Some("--allow-write /home/u/.cargo/registry/cache (or [sandbox.allow_paths] write)"));
        assert_eq!(r[3].allow.as_deref(), Some("--allow-read /opt/data to read, --allow-write /opt/data to write (or [sandbox.allow_paths] read / write)"), "a file being made: its directory");
        assert!(r[4].allow.is_none() && r[4].why.contains("credential"));
        let many: String = (0..20).map(|i| format!("x: /opt/d{i}: Permission denied\n")).collect();
        assert_eq!(refusals_in(&many, &p, |_| Some(true)).len(), MAX_REFUSALS);
    }

    /// What a command prints is arbitrary: random lines mixing the markers, paths and
    /// punctuation never panic, and the bound holds.
    #[cfg(unix)]
    #[test]
    fn any_stderr_is_scanned_within_the_bound() {
        let p = plan();
        let words = ["Permission denied", "No such file or directory", "Read-only file system", "/", "/opt/", "'", ":", "‘", "\u{0}", "é", "\n", " ", "//", "/home/u/.ssh", "x"];
        let mut seed = [0u8; 8];
        for _ in 0..2000 {
            crate::rand::fill(&mut seed);
            let line: String = seed.iter().map(|b| words[usize::from(*b) % words.len()]).collect();
            let text = format!("{line}\n{line}{line}");
            let r = refusals_in(&text, &p, |q| (q.as_os_str().len() % 3 != 0).then_some(q.as_os_str().len() % 2 == 0));
            assert!(r.len() <= MAX_REFUSALS);
            for f in &r {
                assert!(f.path.is_absolute() && !["/proc", "/sys", "/dev"].iter().any(|k| f.path.starts_with(k)), "{f:?}");
            }
        }
    }

    #[test]
    fn paths_are_taken_out_of_their_quotes_and_punctuation() {
        assert_eq!(absolute_paths("open ‘/a/b’: x, (/c/d). \"/e\"; /f: [/g] // /"), ["/a/b", "/c/d", "/e", "/f", "/g"].map(PathBuf::from).to_vec());
    }
}
