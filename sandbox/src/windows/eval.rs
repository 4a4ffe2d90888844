//! A model of Windows' access check for the objects a [`WindowsPlan`] touches (pure): given the
//! plan applied to a filesystem and one operation of the restricted, Low-integrity command, it
//! says whether Windows would allow it. The conformance table is checked against it on any OS.
//!
//! ## Semantics, and where each comes from (Microsoft's "How AccessCheck Works", "Restricted
//! Tokens", "Mandatory Integrity Control" and "Order of ACEs in a DACL")
//!
//! * **Integrity.** An object without a label is Medium with no-write-up. A subject below the
//!   object's level gets no write access when the label has no-write-up, no read access with
//!   no-read-up, no execute access with no-execute-up. The nearest label wins: the object's own,
//!   else the one inherited from the nearest ancestor with an inheritable label.
//! * **Restricted token, `WRITE_RESTRICTED`.** A write is granted only if the check against the
//!   restricting SIDs grants it too; reads are not checked against them. The model assumes the
//!   user's own DACL grants the user everything it names (the user's files) and grants the
//!   restricting SIDs nothing: the capability SID is the sandbox's own, and files do not name
//!   the logon SID.
//! * **ACE order.** An object's ACEs are its explicit ones, denies first, then the inherited
//!   ones, nearest ancestor first (each ancestor's denies before its allows). The first ACE that
//!   names a requested right decides it: a deny denies, an allow grants.
//! * **Operations.** Writing needs `FILE_WRITE_DATA` on the file; creating needs
//!   `FILE_ADD_FILE` on the directory it is created in; removing needs `DELETE` on the object
//!   (or `FILE_DELETE_CHILD` on its directory, which [`rights::MODIFY`] does not include);
//!   renaming needs `DELETE` on the object and `FILE_ADD_FILE` on the directory; connecting to a
//!   unix socket opens the socket file for writing; terminating another process needs
//!   `PROCESS_TERMINATE`, which no-write-up on the user's Medium processes refuses.

use std::path::{Path, PathBuf};

use super::acl::{label, rights, AceKind, WindowsPlan};
use super::sid;

/// One operation of the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WinOp {
    /// Read a file or list a directory.
    Read(PathBuf),
    /// Write to an existing file.
    Write(PathBuf),
    /// Create a file (and missing directories above it).
    Create(PathBuf),
    /// Run a program.
    Exec(PathBuf),
    /// Remove.
    Unlink(PathBuf),
    /// Rename (within its directory).
    Rename(PathBuf),
    /// Connect to a TCP listener outside.
    ConnectTcp,
    /// Connect to a unix socket.
    ConnectUnix(PathBuf),
    /// Terminate a process outside the sandbox (`false`) or the command's own child (`true`).
    Signal {
        /// The target is the command's own child.
        own: bool,
    },
}

/// What the model decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WinDecision {
    /// Allowed.
    pub allowed: bool,
    /// Allowed, but the path is reviewed after the run (the change is taken back).
    pub reviewed: bool,
    /// Why, in words.
    pub why: String,
}

fn integrity_rank(sid_str: &str) -> u8 {
    match sid_str {
        sid::LOW_INTEGRITY => 1,
        sid::MEDIUM_INTEGRITY => 2,
        _ => 3,
    }
}

/// The label deciding `path`: (level, policy).
fn label_of<'a>(plan: &'a WindowsPlan, path: &Path) -> (&'a str, u32) {
    let mut best: Option<(usize, &str, u32)> = None;
    for a in plan.aces.iter().filter(|a| a.kind == AceKind::Label) {
        let Ok(rest) = path.strip_prefix(&a.path) else { continue };
        let depth = rest.components().count();
        if (depth == 0 || a.inherit) && best.is_none_or(|(d, _, _)| depth < d) {
            best = Some((depth, a.sid.as_str(), a.mask));
        }
    }
    best.map_or((sid::MEDIUM_INTEGRITY, label::NO_WRITE_UP), |(_, s, m)| (s, m))
}

/// Whether the Low-integrity command passes the integrity check for `policy_bit` on `path`.
fn integrity_allows(plan: &WindowsPlan, path: &Path, policy_bit: u32) -> Result<(), String> {
    let (level, policy) = label_of(plan, path);
    if integrity_rank(level) > integrity_rank(&plan.token.integrity) && policy & policy_bit != 0 {
        return Err(format!("integrity: {} is labelled {level} with {policy:#x}", path.display()));
    }
    Ok(())
}

/// The restricted check (capability SID) for `want` on `path`.
fn restricted_allows(plan: &WindowsPlan, path: &Path, want: u32) -> Result<(), String> {
    // (distance, deny first) order.
    let mut aces: Vec<(usize, bool, &super::acl::AceEntry)> = plan
        .aces
        .iter()
        .filter(|a| a.kind != AceKind::Label && plan.token.restricting_sids.contains(&a.sid))
        .filter_map(|a| {
            let depth = path.strip_prefix(&a.path).ok()?.components().count();
            (depth == 0 || a.inherit).then_some((depth, a.kind == AceKind::Allow, a))
        })
        .collect();
    aces.sort_by_key(|(d, allow, _)| (*d, *allow));
    let mut granted = 0u32;
    for (_, _, a) in aces {
        if a.kind == AceKind::Deny && a.mask & want & !granted != 0 {
            return Err(format!("denied by {} on {} ({})", a.sddl(), a.path.display(), a.reason));
        }
        if a.kind == AceKind::Allow {
            granted |= a.mask & want;
            if granted == want {
                return Ok(());
            }
        }
    }
    Err(format!("no ACE grants the capability SID {want:#x} on {}", path.display()))
}

fn write_check(plan: &WindowsPlan, path: &Path, want: u32) -> Result<(), String> {
    integrity_allows(plan, path, label::NO_WRITE_UP)?;
    restricted_allows(plan, path, want)
}

/// The nearest ancestor of `p` that exists (the directory a new entry is created in).
fn existing_parent(p: &Path, exists: &dyn Fn(&Path) -> bool) -> PathBuf {
    let mut a = p.parent();
    while let Some(d) = a {
        if exists(d) || d.parent().is_none() {
            return d.to_path_buf();
        }
        a = d.parent();
    }
    PathBuf::from("/")
}

/// Decides `op` under `plan` (paths already resolved; `exists` says which are there before the
/// run, to find the directory a new file is created in).
#[must_use]
pub fn decide(plan: &WindowsPlan, op: &WinOp, exists: &dyn Fn(&Path) -> bool) -> WinDecision {
    let reviewed_at = |p: &Path| plan.reviewed.iter().any(|r| p.starts_with(&r.path));
    let created_dir = |p: &Path| plan.aces.iter().any(|a| a.create_dir && a.path == p);
    let (result, path): (Result<(), String>, Option<&Path>) = match op {
        WinOp::Read(p) => (integrity_allows(plan, p, label::NO_READ_UP), Some(p)),
        WinOp::Exec(p) => (integrity_allows(plan, p, label::NO_READ_UP).and_then(|()| integrity_allows(plan, p, label::NO_EXECUTE_UP)), Some(p)),
        WinOp::Write(p) => (write_check(plan, p, rights::WRITE_DATA), Some(p)),
        WinOp::Create(p) => {
            // Created-for-the-run directories exist during the run.
            let mut parent = existing_parent(p, exists);
            let mut a = p.parent();
            while let Some(d) = a {
                if created_dir(d) {
                    parent = d.to_path_buf();
                    break;
                }
                a = d.parent();
            }
            (write_check(plan, &parent, rights::WRITE_DATA), Some(p))
        }
        WinOp::Unlink(p) => (write_check(plan, p, rights::DELETE).or_else(|e| p.parent().map_or(Err(e.clone()), |d| write_check(plan, d, rights::DELETE_CHILD).map_err(|_| e))), Some(p)),
        WinOp::Rename(p) => (write_check(plan, p, rights::DELETE).and_then(|()| p.parent().map_or(Ok(()), |d| write_check(plan, d, rights::WRITE_DATA))), Some(p)),
        WinOp::ConnectTcp => (Ok(()), None),
        WinOp::ConnectUnix(p) => (integrity_allows(plan, p, label::NO_WRITE_UP), Some(p)),
        WinOp::Signal { own: true } => (Ok(()), None),
        WinOp::Signal { own: false } => (Err("integrity: the user's processes are Medium with no-write-up (PROCESS_TERMINATE refused)".into()), None),
    };
    match result {
        Ok(()) => {
            let reviewed = matches!(op, WinOp::Write(_) | WinOp::Create(_) | WinOp::Unlink(_) | WinOp::Rename(_)) && path.is_some_and(reviewed_at);
            WinDecision { allowed: true, reviewed, why: if reviewed { "allowed, reviewed after the run".into() } else { "allowed".into() } }
        }
        Err(why) => WinDecision { allowed: false, reviewed: false, why },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::windows::acl::{AceEntry, JobLimits, Reviewed, TokenSpec};

    fn plan() -> WindowsPlan {
        let cap = "S-1-15-3-1024-7".to_string();
        let e = |p: &str, kind, sid: &str, mask, inherit| AceEntry { path: p.into(), kind, sid: sid.into(), mask, inherit, create_dir: false, reason: "r".into() };
        WindowsPlan {
            capability_sid: cap.clone(),
            token: TokenSpec { flags: vec![], restricting_sids: vec![cap.clone(), "logon".into()], integrity: sid::LOW_INTEGRITY.into() },
            aces: vec![
                e("/h/.ssh", AceKind::Label, sid::MEDIUM_INTEGRITY, 7, true),
                e("/w/.git/hooks", AceKind::Deny, &cap, rights::ANY_WRITE, true),
                e("/w", AceKind::Deny, &cap, rights::NO_REMOVE, false),
                e("/w", AceKind::Label, sid::LOW_INTEGRITY, 1, true),
                e("/w", AceKind::Allow, &cap, rights::MODIFY, true),
            ],
            reviewed: vec![Reviewed { path: "/w/.git/commondir".into(), why: "absent".into() }],
            absent_credentials: vec![],
            job: JobLimits { kill_on_close: true, die_on_unhandled_exception: true, active_processes: 1, job_memory_bytes: 1, cpu_time_100ns: 1, ui_restrictions: vec![] },
            temp_dir: None,
        }
    }

    #[test]
    fn the_model_grants_the_workspace_and_nothing_else() {
        let p = plan();
        let there = |x: &Path| ["/w", "/w/.git", "/w/.git/hooks", "/h", "/h/.ssh", "/"].iter().any(|e| x == Path::new(e));
        let d = |op: WinOp| decide(&p, &op, &there);
        assert!(d(WinOp::Write("/w/src/a.rs".into())).allowed);
        assert!(d(WinOp::Unlink("/w/a.txt".into())).allowed);
        assert!(!d(WinOp::Write("/h/.bashrc".into())).allowed, "Medium, no label: no write up");
        assert!(d(WinOp::Read("/h/.bashrc".into())).allowed, "reads are not confined on this tier");
        assert!(!d(WinOp::Read("/h/.ssh/id".into())).allowed);
        assert!(!d(WinOp::Write("/w/.git/hooks/pre-commit".into())).allowed, "the nearer deny comes first");
        assert!(!d(WinOp::Rename("/w".into())).allowed);
        let r = d(WinOp::Create("/w/.git/commondir".into()));
        assert!(r.allowed && r.reviewed, "{r:?}");
        assert!(!d(WinOp::Signal { own: false }).allowed && d(WinOp::Signal { own: true }).allowed);
        // Without the hooks' deny the write goes through: the deny is what stops it.
        let mut q = plan();
        q.aces.remove(1);
        assert!(decide(&q, &WinOp::Write("/w/.git/hooks/pre-commit".into()), &there).allowed);
    }
}
