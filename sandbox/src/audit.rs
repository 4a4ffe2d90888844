//! The audit log (`--audit-log PATH`, `[sandbox] audit_log`): one JSON object per line for the
//! start of a run, each network decision of the allowlist proxy, and the end of the run. The
//! file is opened `O_APPEND` and each line is one `write` call, so the lines of several sandboxes
//! writing to one file at once never interleave; it is created mode 0600 and must lie outside
//! everything the command may write (the policy refuses it otherwise).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::SandboxError;

/// An open audit log.
#[derive(Debug)]
pub struct Audit {
    file: std::fs::File,
    run: String,
}

impl Audit {
    /// Opens (creates) `path` for appending; `run` identifies this run's lines.
    ///
    /// # Errors
    /// [`SandboxError::Io`] when it cannot be opened: the run does not start.
    pub fn open(path: &Path, run: &str) -> Result<Audit, SandboxError> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| SandboxError::io(format!("open audit log {}", path.display()), e))?;
        Ok(Audit { file, run: run.to_string() })
    }

    /// Appends one event: `fields` plus `event`, `run` and `time` (seconds since the epoch).
    /// A failed write is reported on stderr, never silently dropped; the run goes on.
    pub fn event(&self, event: &str, mut fields: serde_json::Value) {
        if let Some(o) = fields.as_object_mut() {
            o.insert("event".into(), event.into());
            o.insert("run".into(), self.run.clone().into());
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
            o.insert("time".into(), now.into());
        }
        let mut line = serde_json::to_vec(&fields).unwrap_or_default();
        line.push(b'\n');
        match (&self.file).write(&line) {
            Ok(n) if n == line.len() => {}
            Ok(n) => eprintln!("localgpt-sandbox: audit log: short write ({n} of {} bytes)", line.len()),
            Err(e) => eprintln!("localgpt-sandbox: audit log: {e}"),
        }
    }
}

/// The `end` line of a run, owed once its `start` line is written: [`RunEnd::end`] writes it
/// with the result; dropped unwritten (the run stopped in its set-up, before or while starting
/// the command), it writes an `end` saying so, so that no `start` stays without an `end`.
pub(crate) struct RunEnd(Option<std::sync::Arc<Audit>>);

impl RunEnd {
    /// The `end` owed for the `start` just written to `audit`.
    pub(crate) fn new(audit: std::sync::Arc<Audit>) -> RunEnd {
        RunEnd(Some(audit))
    }

    /// Writes the `end` line.
    pub(crate) fn end(mut self, fields: serde_json::Value) {
        if let Some(a) = self.0.take() {
            a.event("end", fields);
        }
    }
}

impl Drop for RunEnd {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            a.event("end", serde_json::json!({ "error": "the run stopped in its set-up; the command did not run" }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_always_gets_an_end_and_links_are_not_followed() {
        let d = crate::test_dir();
        let p = d.path().join("audit.jsonl");
        let a = std::sync::Arc::new(Audit::open(&p, "r").unwrap());
        a.event("start", serde_json::json!({}));
        drop(RunEnd::new(std::sync::Arc::clone(&a))); // set-up failed
        a.event("start", serde_json::json!({}));
        RunEnd::new(a).end(serde_json::json!({ "exit_code": 0 }));
        let ends: Vec<serde_json::Value> = std::fs::read_to_string(&p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).filter(|v: &serde_json::Value| v["event"] == "end").collect();
        assert_eq!(ends.len(), 2);
        assert!(ends[0]["error"].as_str().is_some_and(|e| e.contains("did not run")) && ends[1]["exit_code"] == 0);
        std::os::unix::fs::symlink(&p, d.path().join("link.jsonl")).unwrap();
        assert!(Audit::open(&d.path().join("link.jsonl"), "r").is_err());
    }

    #[test]
    fn lines_from_many_threads_stay_whole() {
        let d = crate::test_dir();
        let p = d.path().join("audit.jsonl");
        std::thread::scope(|s| {
            for t in 0..8 {
                let p = &p;
                s.spawn(move || {
                    let a = Audit::open(p, &format!("run{t}")).unwrap();
                    for i in 0..200 {
                        a.event("network", serde_json::json!({"host": "x".repeat(500), "i": i}));
                    }
                });
            }
        });
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 1600);
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["event"], "network");
        }
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
