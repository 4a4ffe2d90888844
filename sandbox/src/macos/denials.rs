//! What Seatbelt denied in a run, read back from the system log (macOS). Every deny rule of the
//! profile carries the run's marker (`(with message "localgpt-sandbox-RUN:credential")`), and
//! Seatbelt logs each denied operation with it: `Sandbox: bash(812) deny(1) file-read-data
//! /Users/me/.ssh/id_ed25519 localgpt-sandbox-RUN:credential`. [`parse`] is pure and tested here;
//! `read` (macOS only) runs `/usr/bin/log show` for the run's time window, only when the caller
//! asks (`--json`): reading the log takes a second or more.
//!
//! Denials by the profile's `(deny default)` carry no marker and are not attributed to the run.

use serde::{Deserialize, Serialize};

/// One denied operation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The process, as logged (`bash(812)`).
    pub process: String,
    /// The operation (`file-read-data`, `network-outbound`, …).
    pub operation: String,
    /// Its target, when logged (a path, an address).
    pub target: Option<String>,
    /// The rule's tag after the marker (`credential`, `protected`, `ancestor`, `network`).
    pub rule: String,
}

/// The run's denials in `log` (text of `log show`), in order, duplicates kept once.
#[must_use]
pub fn parse(log: &str, marker: &str) -> Vec<Denial> {
    let mut out: Vec<Denial> = Vec::new();
    for line in log.lines().filter(|l| l.contains(marker)) {
        let Some(at) = line.find("Sandbox: ") else { continue };
        let mut words = line[at + "Sandbox: ".len()..].split_whitespace();
        let (Some(process), Some(verdict), Some(operation)) = (words.next(), words.next(), words.next()) else { continue };
        if !verdict.starts_with("deny") {
            continue;
        }
        let rest: Vec<&str> = words.collect();
        let tag_at = rest.iter().position(|w| w.contains(marker));
        let target = rest[..tag_at.unwrap_or(rest.len())].join(" ");
        let rule = tag_at
            .and_then(|i| rest[i].split_once(&format!("{marker}:")).map(|(_, r)| r.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-').to_string()))
            .unwrap_or_default();
        let d = Denial { process: process.to_string(), operation: operation.to_string(), target: (!target.is_empty()).then_some(target), rule };
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// The run's denials since `since` (macOS: `/usr/bin/log show`); empty when the log cannot be
/// read.
#[cfg(target_os = "macos")]
#[must_use]
pub fn read(marker: &str, since: std::time::SystemTime) -> Vec<Denial> {
    let secs = since.elapsed().map_or(60, |d| d.as_secs() + 2);
    let predicate = format!("eventMessage CONTAINS \"{}\"", marker.replace('"', ""));
    let out = std::process::Command::new("/usr/bin/log")
        .args(["show", "--style", "compact", "--last", &format!("{secs}s"), "--predicate", &predicate])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) => parse(&String::from_utf8_lossy(&o.stdout), marker),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_denials_are_read_and_others_ignored() {
        let m = "localgpt-sandbox-ab12cd";
        let log = "2026-11-25 10:00:01.1 E  kernel[0:1] (Sandbox) Sandbox: bash(812) deny(1) file-read-data /Users/me/.ssh/id_ed25519 localgpt-sandbox-ab12cd:credential\n\
                   2026-11-25 10:00:01.2 E  kernel[0:1] (Sandbox) Sandbox: bash(812) deny(1) file-read-data /Users/me/.ssh/id_ed25519 localgpt-sandbox-ab12cd:credential\n\
                   2026-11-25 10:00:01.3 E  kernel[0:1] (Sandbox) Sandbox: curl(813) deny(1) network-outbound 1.2.3.4:443 localgpt-sandbox-ab12cd:network\n\
                   2026-11-25 10:00:01.4 E  kernel[0:1] (Sandbox) Sandbox: bash(900) deny(1) file-read-data /etc/x localgpt-sandbox-zz99:credential\n\
                   2026-11-25 10:00:01.5 E  kernel[0:1] (Sandbox) Sandbox: git(814) deny(1) file-write-create /Users/me/p/.git/hooks/pre-commit localgpt-sandbox-ab12cd:protected\n";
        let d = parse(log, m);
        assert_eq!(d.len(), 3, "{d:?}");
        assert_eq!(d[0], Denial { process: "bash(812)".into(), operation: "file-read-data".into(), target: Some("/Users/me/.ssh/id_ed25519".into()), rule: "credential".into() });
        assert_eq!((d[1].operation.as_str(), d[1].rule.as_str()), ("network-outbound", "network"));
        assert_eq!(d[2].target.as_deref(), Some("/Users/me/p/.git/hooks/pre-commit"));
        assert!(parse("Sandbox: bash(1) allow file-read-data /x localgpt-sandbox-ab12cd:credential", m).is_empty());
    }
}
