//! Denied paths follow their file across renames (issue 20 item 4).
//!
//! A deny rule names a path. A command that may write the directory around it can move the file
//! out from under its name (`mv base moved`), and the next run's `--deny base/d/s` would then
//! match nothing while the file sits, readable, at `moved/d/s`. So each run records the device
//! and inode of every denied path that exists inside a writable root (the workspace, `--allow-write`
//! directories, `/tmp`): a small file next to the pending changes, private to the user and outside
//! everything a sandboxed command can write. At the next launch a rule whose path no longer holds
//! a recorded inode looks for it in the writable roots (breadth first, bounded, no links
//! followed); where it is found it is denied too, and a warning says where the file went.
//!
//! Nothing here can widen access: it only adds deny paths. A record that cannot be read or
//! written is ignored (the rule then matches by name, as before), and said in a warning.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::guard::fsmeta;
use crate::policy::SandboxPolicy;

/// The inodes a deny rule has stood for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
struct Record {
    /// The rule's path.
    path: PathBuf,
    /// Device and inode numbers it has named, newest last (at most [`MAX_INODES`]).
    inodes: Vec<(u64, u64)>,
    /// When last seen (seconds since the epoch).
    seen: u64,
}

/// Most inodes kept per rule (an editor that saves by rename gives each save a new one).
const MAX_INODES: usize = 8;
/// Most rules kept (the oldest go first).
const MAX_RECORDS: usize = 2000;
/// Most directory entries one search reads.
const SEARCH_ENTRIES: usize = 200_000;

/// The record file: `$XDG_STATE_HOME/localgpt/sandbox/denied.json` (beside the pending store).
#[must_use]
pub fn record_file() -> PathBuf {
    crate::guard::pending::state_dir().join("denied.json")
}

fn load(file: &Path) -> Vec<Record> {
    std::fs::read(file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// The roots a command may move a file within: the workspace and the writable paths.
fn roots(policy: &SandboxPolicy) -> Vec<PathBuf> {
    let mut r = vec![policy.workspace_path.clone()];
    r.extend(policy.writable_paths.iter().filter(|p| p.is_dir()).cloned());
    r
}

fn in_roots(roots: &[PathBuf], p: &Path) -> bool {
    roots.iter().any(|r| p.starts_with(r) && p != r)
}

/// Where an entry with one of `inodes` is now in `roots` (breadth first, links not followed).
fn search(roots: &[PathBuf], inodes: &[(u64, u64)]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = SEARCH_ENTRIES;
    let mut queue: std::collections::VecDeque<PathBuf> = roots.iter().cloned().collect();
    while let Some(dir) = queue.pop_front() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            if budget == 0 {
                return found;
            }
            budget -= 1;
            let Ok(ft) = e.file_type() else { continue };
            // Unix reads the inode from the entry and checks the device only for a match.
            if fsmeta::entry_ino(&e).is_none_or(|ino| inodes.iter().any(|(_, i)| *i == ino)) {
                let p = e.path();
                if fsmeta::file_id(&p).is_some_and(|id| inodes.contains(&id)) {
                    found.push(p);
                    continue;
                }
            }
            if ft.is_dir() {
                queue.push_back(e.path());
            }
        }
    }
    found
}

/// Adds to `policy.deny_paths` where each recorded denied file is now, when its rule's path no
/// longer holds it, and notes each in `policy.moved_denies`.
pub fn follow(policy: &mut SandboxPolicy) {
    let roots = roots(policy);
    let candidates: Vec<PathBuf> = policy.deny_paths.iter().filter(|d| in_roots(&roots, d)).cloned().collect();
    if candidates.is_empty() {
        return;
    }
    let records = load(&record_file());
    for d in candidates {
        let Some(rec) = records.iter().find(|r| r.path == d) else { continue };
        let cur = fsmeta::file_id(&d);
        let elsewhere: Vec<(u64, u64)> = rec.inodes.iter().filter(|i| Some(**i) != cur).copied().collect();
        if elsewhere.is_empty() {
            continue;
        }
        for at in search(&roots, &elsewhere) {
            if at != d && !policy.deny_paths.iter().any(|x| at.starts_with(x)) {
                policy.deny_paths.push(at.clone());
                policy.moved_denies.push((d.clone(), at));
            }
        }
    }
}

/// Records the inode of every denied path that exists inside a writable root (after
/// [`follow`]: a followed file keeps its rule's record, under the rule's path).
///
/// # Errors
/// A message when the record file cannot be written (the rules still match by name).
pub fn record(policy: &SandboxPolicy) -> Result<(), String> {
    let roots = roots(policy);
    let moved: Vec<&PathBuf> = policy.moved_denies.iter().map(|(_, at)| at).collect();
    let now: Vec<(PathBuf, (u64, u64))> = policy
        .deny_paths
        .iter()
        .filter(|d| in_roots(&roots, d) && !moved.contains(d))
        .filter_map(|d| fsmeta::file_id(d).map(|id| (d.clone(), id)))
        .collect();
    if now.is_empty() {
        return Ok(());
    }
    let file = record_file();
    let mut records = load(&file);
    let mut changed = false;
    let seen = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    for (path, id) in now {
        match records.iter_mut().find(|r| r.path == path) {
            Some(r) if r.inodes.last() == Some(&id) => {
                // Refresh `seen` at most once a day (no write per run).
                if seen.saturating_sub(r.seen) > 86_400 {
                    r.seen = seen;
                    changed = true;
                }
            }
            Some(r) => {
                r.inodes.retain(|i| *i != id);
                r.inodes.push(id);
                if r.inodes.len() > MAX_INODES {
                    r.inodes.remove(0);
                }
                r.seen = seen;
                changed = true;
            }
            None => {
                records.push(Record { path, inodes: vec![id], seen });
                changed = true;
            }
        }
    }
    if !changed {
        return Ok(());
    }
    records.sort_by_key(|r| std::cmp::Reverse(r.seen));
    records.truncate(MAX_RECORDS);
    let json = serde_json::to_vec(&records).map_err(|e| e.to_string())?;
    if let Some(dir) = file.parent() {
        fsmeta::create_private_dir(dir, true).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    crate::guard::pending::write_atomic(&file, &json, 0o600).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_finds_a_moved_file_and_directory_by_inode() {
        let d = crate::test_dir();
        let ws = fsmeta::canonical(d.path()).unwrap();
        std::fs::create_dir_all(ws.join("base/d")).unwrap();
        std::fs::write(ws.join("base/d/s"), "S").unwrap();
        let m = fsmeta::file_id(&ws.join("base/d/s")).unwrap();
        let dm = fsmeta::file_id(&ws.join("base/d")).unwrap();
        std::fs::rename(ws.join("base"), ws.join("moved")).unwrap();
        let roots = vec![ws.clone()];
        assert_eq!(search(&roots, &[m]), vec![ws.join("moved").join("d").join("s")]);
        assert_eq!(search(&roots, &[dm]), vec![ws.join("moved").join("d")]);
        assert!(search(&roots, &[(m.0, u64::MAX)]).is_empty());
        assert!(in_roots(&roots, &ws.join("x")) && !in_roots(&roots, &ws) && !in_roots(&roots, Path::new("/etc/x")));
    }
}
