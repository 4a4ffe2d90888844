//! The Windows artefact of a plan (pure; runs on any OS): the command's restricted token, the
//! access-control entries the sandbox adds for the run (each with its path, SID, rights,
//! inheritance and reason, rendered as SDDL), the protected paths no ACE can cover (reviewed
//! after the run instead), and the job object's limits.
//!
//! ## The model (the unelevated tier: no administrator rights needed)
//!
//! * **Token.** The user's own token made restricted (`CreateRestrictedToken` with
//!   `DISABLE_MAX_PRIVILEGE`, `LUA_TOKEN` and `WRITE_RESTRICTED`), its restricting SIDs the
//!   workspace's capability SID ([`super::sid::capability_sid`]) and the logon SID (the console
//!   and the window station grant it), then lowered to the Low integrity level. A write is
//!   granted only when the user may write *and* a restricting SID is granted the write *and* the
//!   object's integrity label is not above Low. Reads are checked against the user's rights and
//!   the labels only (that is what `WRITE_RESTRICTED` means).
//! * **Writable roots** (the workspace in `workspace-write` mode, the run's temp directory,
//!   `--allow-write` paths): an allow ACE for the capability SID (modify, inherited) and a Low
//!   label (inherited, no-write-up): the only places the command can write.
//! * **Protected workspace paths** (`.git`'s hooks and config, `.vscode`, the agent's config —
//!   the same table as the other backends): a deny ACE for the capability SID (write, append,
//!   delete, attributes, ACL and owner changes; inherited by everything below). An absent
//!   directory is created first (and removed again after the run if it is still empty). What no
//!   ACE can cover — an absent protected file, an absent entry of `.git` that git itself would
//!   take for an operation in progress (`rebase-merge`, `commondir`) — is reviewed after the
//!   run, as Linux's Standard level does. Each protected path's ancestors inside the workspace,
//!   and the workspace itself, are denied `DELETE`: not renamed or removed (moving a parent away
//!   is the classic bypass).
//! * **Credentials** (`~/.ssh`, the cloud CLIs' directories, the Credential Manager's and DPAPI's
//!   files: the plan's deny list): a Medium label with no-read-up, no-write-up and
//!   no-execute-up: a Low process can neither read nor change them; the user's own programs
//!   (Medium) are unaffected.
//! * **Not confined** on this tier, and said so by the protection table: reads elsewhere (the
//!   rest of `$HOME`, other users' readable files) and the network.
//!
//! Every ACE and label is written to the installation record before it is applied and removed
//! in reverse order when the last run holding it ends ([`super::record`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::sid;
use crate::guard::protected::{ProtectedKind, ProtectedPath};
use crate::plan::resolve::PathResolver;
use crate::plan::decision::Limits;
use crate::policy::{SandboxMode, SandboxPolicy};

/// File access rights (`winnt.h`).
pub mod rights {
    /// `FILE_READ_DATA` / `FILE_LIST_DIRECTORY`.
    pub const READ_DATA: u32 = 0x1;
    /// `FILE_WRITE_DATA` / `FILE_ADD_FILE`.
    pub const WRITE_DATA: u32 = 0x2;
    /// `FILE_APPEND_DATA` / `FILE_ADD_SUBDIRECTORY`.
    pub const APPEND_DATA: u32 = 0x4;
    /// `FILE_WRITE_EA`.
    pub const WRITE_EA: u32 = 0x10;
    /// `FILE_EXECUTE` / `FILE_TRAVERSE`.
    pub const EXECUTE: u32 = 0x20;
    /// `FILE_DELETE_CHILD`.
    pub const DELETE_CHILD: u32 = 0x40;
    /// `FILE_WRITE_ATTRIBUTES`.
    pub const WRITE_ATTRIBUTES: u32 = 0x100;
    /// `DELETE`.
    pub const DELETE: u32 = 0x1_0000;
    /// `WRITE_DAC`.
    pub const WRITE_DAC: u32 = 0x4_0000;
    /// `WRITE_OWNER`.
    pub const WRITE_OWNER: u32 = 0x8_0000;
    /// "Modify" as Explorer grants it: read, write, execute and delete (not `FILE_DELETE_CHILD`,
    /// `WRITE_DAC` or `WRITE_OWNER`).
    pub const MODIFY: u32 = 0x0013_01bf;
    /// Every way to change an object or what is below it.
    pub const ANY_WRITE: u32 = WRITE_DATA | APPEND_DATA | WRITE_EA | DELETE_CHILD | WRITE_ATTRIBUTES | DELETE | WRITE_DAC | WRITE_OWNER;
    /// Not renamed, removed, or its ACL or owner changed.
    pub const NO_REMOVE: u32 = DELETE | WRITE_DAC | WRITE_OWNER;
}

/// Mandatory-label policy bits (`SYSTEM_MANDATORY_LABEL_NO_*`).
pub mod label {
    /// No write up.
    pub const NO_WRITE_UP: u32 = 0x1;
    /// No read up.
    pub const NO_READ_UP: u32 = 0x2;
    /// No execute up.
    pub const NO_EXECUTE_UP: u32 = 0x4;
}

/// What an entry adds to an object's security descriptor.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum AceKind {
    /// An access-allowed ACE in the DACL.
    Allow,
    /// An access-denied ACE in the DACL.
    Deny,
    /// A mandatory label in the SACL (the SID is the integrity level, the mask the policy).
    Label,
}

/// One change to one path's security descriptor.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct AceEntry {
    /// The path.
    pub path: PathBuf,
    /// What is added.
    pub kind: AceKind,
    /// The SID (for a label, the integrity level's).
    pub sid: String,
    /// Access rights ([`rights`]), or for a label its policy ([`label`]).
    pub mask: u32,
    /// Inherited by files and directories below (`OI|CI`).
    pub inherit: bool,
    /// The path is a directory created for the run (absent at launch; removed afterwards if
    /// still empty).
    #[serde(default)]
    pub create_dir: bool,
    /// Why.
    pub reason: String,
}

impl AceEntry {
    /// The ACE in SDDL (`(A;OICI;0x1301bf;;;S-1-15-3-…)`, `(ML;OICI;NWNRNX;;;S-1-16-8192)`).
    #[must_use]
    pub fn sddl(&self) -> String {
        let flags = if self.inherit { "OICI" } else { "" };
        match self.kind {
            AceKind::Allow => format!("(A;{flags};{:#x};;;{})", self.mask, self.sid),
            AceKind::Deny => format!("(D;{flags};{:#x};;;{})", self.mask, self.sid),
            AceKind::Label => {
                let mut m = String::new();
                for (bit, s) in [(label::NO_WRITE_UP, "NW"), (label::NO_READ_UP, "NR"), (label::NO_EXECUTE_UP, "NX")] {
                    if self.mask & bit != 0 {
                        m.push_str(s);
                    }
                }
                format!("(ML;{flags};{m};;;{})", self.sid)
            }
        }
    }

    /// The part of the security descriptor it changes (`D:` the DACL, `S:` the SACL).
    #[must_use]
    pub fn part(&self) -> char {
        if self.kind == AceKind::Label {
            'S'
        } else {
            'D'
        }
    }
}

/// The command's token.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TokenSpec {
    /// `CreateRestrictedToken` flags.
    pub flags: Vec<String>,
    /// Restricting SIDs (`logon` stands for the caller's logon SID, read from its token).
    pub restricting_sids: Vec<String>,
    /// The integrity level set on the token.
    pub integrity: String,
}

/// The job object the command is assigned to before its first instruction (created suspended,
/// assigned, then resumed).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct JobLimits {
    /// `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: the tree dies with the runner's handle.
    pub kill_on_close: bool,
    /// `JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION`: no error-reporting dialog keeps it alive.
    pub die_on_unhandled_exception: bool,
    /// `JOB_OBJECT_LIMIT_ACTIVE_PROCESS`.
    pub active_processes: u32,
    /// `JOB_OBJECT_LIMIT_JOB_MEMORY`, bytes committed by the whole job.
    pub job_memory_bytes: u64,
    /// `JOB_OBJECT_LIMIT_JOB_TIME`: user-mode CPU time of the whole job, in 100 ns units (the
    /// timeout × the CPUs, so that it only stops what the wall-clock timeout would).
    pub cpu_time_100ns: u64,
    /// `JOB_OBJECT_UILIMIT_*` restrictions.
    pub ui_restrictions: Vec<String>,
}

/// The UI restrictions every job gets: no clipboard, no desktop switching, no handles of other
/// processes' windows, no system-wide settings, no logoff.
pub const UI_RESTRICTIONS: &[&str] = &["READCLIPBOARD", "WRITECLIPBOARD", "DESKTOP", "DISPLAYSETTINGS", "EXITWINDOWS", "GLOBALATOMS", "HANDLES", "SYSTEMPARAMETERS"];

/// A protected path no ACE covers, reviewed after the run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Reviewed {
    /// The path.
    pub path: PathBuf,
    /// Why it carries no ACE.
    pub why: String,
}

/// The Windows artefacts of a plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WindowsPlan {
    /// The workspace's capability SID.
    pub capability_sid: String,
    /// The command's token.
    pub token: TokenSpec,
    /// The changes to security descriptors, in the order they are applied (removed in reverse).
    pub aces: Vec<AceEntry>,
    /// Protected paths that carry no ACE, reviewed after the run.
    pub reviewed: Vec<Reviewed>,
    /// Credential paths absent at launch: nothing to label (nothing to read).
    pub absent_credentials: Vec<PathBuf>,
    /// The job object's limits.
    pub job: JobLimits,
    /// The run's temp directory (`TEMP`, `TMP`), writable.
    pub temp_dir: Option<PathBuf>,
}

/// What [`compile`] needs.
pub struct Inputs<'a> {
    /// The policy (with the run's extra denies).
    pub policy: &'a SandboxPolicy,
    /// The protected workspace paths.
    pub protected: &'a [ProtectedPath],
    /// The limits.
    pub limits: &'a Limits,
    /// The per-run temp directory.
    pub scratch: Option<&'a Path>,
    /// The plan's resolver. Paths are resolved, and what exists is looked at, through this
    /// machine's filesystem: `explain --platform windows` elsewhere shows the plan for the
    /// workspace as it is here.
    pub resolver: &'a mut PathResolver,
}

/// The path's text as Windows compares it in the SID derivation (the separators as given).
fn key(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Renders the Windows artefacts of a plan.
#[must_use]
pub fn compile(i: Inputs<'_>) -> WindowsPlan {
    let Inputs { policy, protected, limits, scratch, resolver } = i;
    let mut canon = |p: &Path| resolver.canonicalize_lenient(p).path;
    let exists = |p: &Path| p.symlink_metadata().is_ok();
    let is_dir = |p: &Path| p.is_dir();
    let ws = canon(&policy.workspace_path);
    let cap = sid::capability_sid(&key(&ws));
    let mut aces: Vec<AceEntry> = Vec::new();
    let mut reviewed = Vec::new();
    let entry = |path: &Path, kind: AceKind, sid: &str, mask: u32, inherit: bool, reason: &str| AceEntry {
        path: path.to_path_buf(),
        kind,
        sid: sid.to_string(),
        mask,
        inherit,
        create_dir: false,
        reason: reason.to_string(),
    };
    // Credentials first: labelled before anything else is granted.
    let mut absent_credentials = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for d in &policy.deny_paths {
        let p = canon(d);
        if !seen.insert(p.clone()) {
            continue;
        }
        if exists(&p) {
            let m = label::NO_WRITE_UP | label::NO_READ_UP | label::NO_EXECUTE_UP;
            aces.push(entry(&p, AceKind::Label, sid::MEDIUM_INTEGRITY, m, is_dir(&p), "credential: a Low-integrity process cannot read, change or run it"));
        } else {
            absent_credentials.push(p);
        }
    }
    // Protected workspace paths: denies before the grants they carve out of.
    let mut ancestors: Vec<PathBuf> = Vec::new();
    if policy.mode == SandboxMode::WorkspaceWrite {
        for pp in protected {
            let p = canon(&pp.path);
            let mut targets: Vec<(PathBuf, &str)> = Vec::new();
            match pp.kind {
                ProtectedKind::GitDir if is_dir(&p) || !exists(&p) => {
                    if exists(&p) {
                        aces.push(entry(&p, AceKind::Deny, &cap, rights::NO_REMOVE, false, "protected .git: not renamed, removed or re-permissioned (objects, refs and the index stay writable, so commits work)"));
                    } else {
                        reviewed.push(Reviewed { path: p.clone(), why: "absent .git: a new repository is reviewed after the run".into() });
                    }
                    for e in crate::macos::profile::GIT_CODE_ENTRIES {
                        targets.push((p.join(e), "runs code later or redirects git"));
                    }
                }
                _ => targets.push((p.clone(), pp.reason.as_str())),
            }
            for (t, why) in targets {
                if exists(&t) {
                    aces.push(entry(&t, AceKind::Deny, &cap, rights::ANY_WRITE, is_dir(&t), &format!("protected ({why}): not written, created in, renamed or removed")));
                } else if pp.kind == ProtectedKind::Dir && t == p {
                    let mut e = entry(&t, AceKind::Deny, &cap, rights::ANY_WRITE, true, &format!("protected ({why}), absent: created empty for the run so that it can carry the deny"));
                    e.create_dir = true;
                    aces.push(e);
                } else {
                    reviewed.push(Reviewed { path: t.clone(), why: format!("absent {}: no object to carry an ACE; reviewed after the run", if pp.kind == ProtectedKind::File { "file" } else { ".git entry (git would take an empty one for an operation in progress)" }) });
                }
            }
            let mut a = p.parent();
            while let Some(d) = a.filter(|d| d.starts_with(&ws)) {
                if !ancestors.iter().any(|x| x == d) {
                    ancestors.push(d.to_path_buf());
                }
                a = d.parent();
            }
        }
    }
    for d in &ancestors {
        aces.push(entry(d, AceKind::Deny, &cap, rights::NO_REMOVE, false, "ancestor of a protected path: not renamed or removed"));
    }
    // Writable roots.
    let mut writable: Vec<(PathBuf, &str)> = Vec::new();
    if policy.mode == SandboxMode::WorkspaceWrite {
        writable.push((ws.clone(), "the workspace"));
        writable.extend(policy.writable_paths.iter().map(|w| (canon(w), "--allow-write")));
    }
    writable.extend(scratch.map(|s| (canon(s), "the run's temp directory")));
    let mut seen_w = std::collections::BTreeSet::new();
    for (w, why) in writable {
        if !seen_w.insert(w.clone()) {
            continue;
        }
        aces.push(entry(&w, AceKind::Label, sid::LOW_INTEGRITY, label::NO_WRITE_UP, true, &format!("{why}: Low label, so the Low-integrity command may write here")));
        aces.push(entry(&w, AceKind::Allow, &cap, rights::MODIFY, true, &format!("{why}: writable by the command (modify)")));
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) as u64;
    WindowsPlan {
        capability_sid: cap.clone(),
        token: TokenSpec {
            flags: ["DISABLE_MAX_PRIVILEGE", "LUA_TOKEN", "WRITE_RESTRICTED"].map(String::from).to_vec(),
            restricting_sids: vec![cap, "logon".into()],
            integrity: sid::LOW_INTEGRITY.into(),
        },
        aces,
        reviewed,
        absent_credentials,
        job: JobLimits {
            kill_on_close: true,
            die_on_unhandled_exception: true,
            active_processes: policy.max_processes,
            job_memory_bytes: limits.memory_bytes,
            cpu_time_100ns: policy.timeout_secs.saturating_mul(cpus).saturating_mul(10_000_000),
            ui_restrictions: UI_RESTRICTIONS.iter().map(|s| (*s).to_string()).collect(),
        },
        temp_dir: scratch.map(Path::to_path_buf),
    }
}

/// `dacl` (the `D:` part of an SDDL string, or empty) with `ace` added in canonical order: a deny
/// before every explicit allow, an allow after the explicit ACEs and before the inherited ones.
/// Adding an ACE that is already there changes nothing.
#[must_use]
pub fn add_ace(sddl: &str, ace: &str) -> String {
    let (head, aces) = split_aces(sddl);
    if aces.iter().any(|a| a == ace) {
        return sddl.to_string();
    }
    let deny = ace.starts_with("(D;");
    let inherited = |a: &str| a.split(';').nth(1).is_some_and(|f| f.contains("ID"));
    let at = if deny {
        aces.iter().position(|a| !a.starts_with("(D;") || inherited(a)).unwrap_or(aces.len())
    } else {
        aces.iter().position(|a| inherited(a)).unwrap_or(aces.len())
    };
    let mut v = aces;
    v.insert(at, ace.to_string());
    format!("{head}{}", v.concat())
}

/// `sddl` without `ace` (unchanged when it is not there).
#[must_use]
pub fn remove_ace(sddl: &str, ace: &str) -> String {
    let (head, aces) = split_aces(sddl);
    let rest: String = aces.into_iter().filter(|a| a != ace).collect();
    if head == "S:" && rest.is_empty() {
        // No label left: the part is empty, as on an object that never had one.
        return String::new();
    }
    format!("{head}{rest}")
}

/// A label part (`S:…`) with `ace` as its only mandatory label (a label replaces the previous
/// one; other SACL ACEs are kept).
#[must_use]
pub fn set_label(sddl: &str, ace: &str) -> String {
    let (head, aces) = split_aces(sddl);
    let head = if head.is_empty() { "S:".to_string() } else { head };
    format!("{head}{ace}{}", aces.into_iter().filter(|a| !a.starts_with("(ML;")).collect::<String>())
}

/// The mandatory label ACE of a label part (`S:…`), if any.
#[must_use]
pub fn label_of(sddl: &str) -> Option<String> {
    split_aces(sddl).1.into_iter().find(|a| a.starts_with("(ML;"))
}

/// The header (`D:PAI`) and the ACEs of one part of an SDDL string.
fn split_aces(sddl: &str) -> (String, Vec<String>) {
    let head_end = sddl.find('(').unwrap_or(sddl.len());
    let head = sddl[..head_end].to_string();
    let mut aces = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in sddl[head_end..].chars() {
        cur.push(c);
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    aces.push(std::mem::take(&mut cur));
                }
            }
            _ => {}
        }
    }
    (head, aces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aces_render_as_sddl() {
        let e = |kind, sid: &str, mask, inherit| AceEntry { path: "/w".into(), kind, sid: sid.into(), mask, inherit, create_dir: false, reason: String::new() };
        assert_eq!(e(AceKind::Allow, "S-1-15-3-1024-1", rights::MODIFY, true).sddl(), "(A;OICI;0x1301bf;;;S-1-15-3-1024-1)");
        assert_eq!(e(AceKind::Deny, "S-1-15-3-1024-1", rights::NO_REMOVE, false).sddl(), "(D;;0xd0000;;;S-1-15-3-1024-1)");
        assert_eq!(e(AceKind::Label, sid::MEDIUM_INTEGRITY, 7, true).sddl(), "(ML;OICI;NWNRNX;;;S-1-16-8192)");
        assert_eq!(e(AceKind::Label, sid::LOW_INTEGRITY, 1, true).part(), 'S');
    }

    #[test]
    fn aces_go_in_canonical_order_and_come_out_exactly() {
        let dacl = "D:AI(A;;FA;;;S-1-5-21-1)(A;OICIID;FA;;;SY)(D;OICIID;FA;;;S-1-5-7)";
        let allow = "(A;OICI;0x1301bf;;;S-1-15-3-1024-9)";
        let deny = "(D;OICI;0xd0156;;;S-1-15-3-1024-9)";
        let a = add_ace(dacl, allow);
        assert_eq!(a, "D:AI(A;;FA;;;S-1-5-21-1)(A;OICI;0x1301bf;;;S-1-15-3-1024-9)(A;OICIID;FA;;;SY)(D;OICIID;FA;;;S-1-5-7)");
        let b = add_ace(&a, deny);
        assert!(b.starts_with("D:AI(D;OICI;0xd0156;;;S-1-15-3-1024-9)(A;;FA"), "{b}");
        assert_eq!(add_ace(&b, deny), b, "adding twice changes nothing");
        assert_eq!(remove_ace(&remove_ace(&b, deny), allow), dacl);
        assert_eq!(remove_ace(dacl, deny), dacl);
        assert_eq!(add_ace("D:", allow), format!("D:{allow}"));
        assert_eq!(set_label("", "(ML;OICI;NW;;;S-1-16-4096)"), "S:(ML;OICI;NW;;;S-1-16-4096)");
        assert_eq!(set_label("S:(ML;;NW;;;S-1-16-8192)(AU;SA;FA;;;WD)", "(ML;OICI;NW;;;S-1-16-4096)"), "S:(ML;OICI;NW;;;S-1-16-4096)(AU;SA;FA;;;WD)");
    }
}
