//! The installation record: every change the sandbox makes to a security descriptor is written
//! here *before* it is made, and undone in reverse order when the last run holding it ends — or,
//! after a crash, when the next run starts ([`recover`]). Pure: the filesystem's security
//! descriptors and the record's file are behind [`AclStore`], so that the transaction, its
//! roll-back after a failure part-way and the recovery after a crash are unit-tested here; the
//! Win32 store is `super::glue` (Windows only).
//!
//! * One entry per (path, part, ACE), with the runs that hold it: concurrent runs of one
//!   workspace share the workspace's ACEs, and a run that ends does not take away what another
//!   still needs. An entry already applied and held is not applied again (idempotent).
//! * An entry is `pending` from before its change until the change is made, `applied` after.
//!   Roll-back removes exactly the ACE that was added (never a whole saved DACL, which would
//!   erase what the user changed meanwhile), restores the label that was there before, and
//!   removes a directory the sandbox created if it is still empty. Undoing a pending entry that
//!   was never applied changes nothing, so a crash at any point is recovered the same way.
//! * Nothing is changed on a path the user does not own, or below a system location
//!   (`WindowsApps`, `C:\Users\Default`, `Program Files`, `C:\Windows`): a typed error names the
//!   path ([`AclError::Refused`]) and the run is not started.
//! * The record carries a schema version; a record of another version is an error naming it,
//!   never silently ignored (its ACEs would stay behind).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::acl::{add_ace, label_of, remove_ace, set_label, AceEntry};

/// The record's schema version.
pub const SCHEMA: u32 = 1;

/// System locations whose ACLs are never changed (lower case, `\` separators).
pub const NEVER_TOUCH: &[&str] = &[r"c:\windows", r"c:\program files", r"c:\program files (x86)", r"c:\users\default", r"c:\programdata\microsoft"];

/// A run holding entries.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The runner's process id.
    pub pid: u32,
    /// The run's id.
    pub run: String,
}

/// Where an entry is in its transaction.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EntryState {
    /// Recorded; the change may or may not have been made.
    Pending,
    /// Made.
    Applied,
}

/// One change, recorded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RecordEntry {
    /// The path.
    pub path: PathBuf,
    /// `D` (DACL) or `S` (the mandatory label).
    pub part: char,
    /// The ACE added, in SDDL.
    pub ace: String,
    /// For a label: the label it replaced (restored on roll-back).
    #[serde(default)]
    pub before_label: Option<String>,
    /// The directory was created for the run.
    #[serde(default)]
    pub create_dir: bool,
    /// Where the transaction is.
    pub state: EntryState,
    /// The runs holding it.
    pub holders: Vec<Holder>,
}

/// The record (a JSON file under the user's local app data).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// [`SCHEMA`].
    pub schema: u32,
    /// The changes, in the order they were made.
    pub entries: Vec<RecordEntry>,
}

impl Default for Record {
    fn default() -> Self {
        Record { schema: SCHEMA, entries: Vec::new() }
    }
}

impl Record {
    /// Reads a record's text (empty text: an empty record).
    ///
    /// # Errors
    /// [`AclError::Record`] for text that does not parse or another schema version.
    pub fn parse(text: &str) -> Result<Record, AclError> {
        if text.trim().is_empty() {
            return Ok(Record::default());
        }
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| AclError::Record(format!("does not parse: {e}")))?;
        let schema = v.get("schema").and_then(serde_json::Value::as_u64).unwrap_or(0);
        if schema != u64::from(SCHEMA) {
            return Err(AclError::Record(format!("has schema version {schema}, this build reads {SCHEMA}: its changes are left as they are; remove them with the build that made them")));
        }
        serde_json::from_value(v).map_err(|e| AclError::Record(format!("does not match schema {SCHEMA}: {e}")))
    }
}

/// What went wrong changing or restoring security descriptors.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AclError {
    /// The path is not the user's or is a system location: it is not changed.
    #[error("{}: {why}; the sandbox changes ACLs only on paths the user owns, outside system locations (nothing was run)", path.display())]
    Refused {
        /// The path.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// An operation on a path failed.
    #[error("{}: {op} failed: {message}", path.display())]
    Os {
        /// The path.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The system's message.
        message: String,
    },
    /// The installation record could not be read or written.
    #[error("the sandbox's installation record {0}")]
    Record(String),
}

/// The security descriptors of the filesystem, and the record's storage.
pub trait AclStore {
    /// One part (`D` or `S`) of `path`'s security descriptor, in SDDL.
    ///
    /// # Errors
    /// [`AclError::Os`].
    fn get(&mut self, path: &Path, part: char) -> Result<String, AclError>;
    /// Replaces one part of `path`'s security descriptor (inheritable ACEs propagate below).
    ///
    /// # Errors
    /// [`AclError::Os`].
    fn set(&mut self, path: &Path, part: char, sddl: &str) -> Result<(), AclError>;
    /// The SID of `path`'s owner.
    ///
    /// # Errors
    /// [`AclError::Os`].
    fn owner(&mut self, path: &Path) -> Result<String, AclError>;
    /// Creates a directory.
    ///
    /// # Errors
    /// [`AclError::Os`].
    fn create_dir(&mut self, path: &Path) -> Result<(), AclError>;
    /// Removes a directory if it is empty (an absent one is fine).
    ///
    /// # Errors
    /// [`AclError::Os`].
    fn remove_dir_if_empty(&mut self, path: &Path) -> Result<(), AclError>;
    /// Writes the record durably.
    ///
    /// # Errors
    /// [`AclError::Record`].
    fn save(&mut self, record: &Record) -> Result<(), AclError>;
}

/// Refuses a system location, whoever owns it.
///
/// # Errors
/// [`AclError::Refused`] naming the location.
pub fn check_location(path: &Path) -> Result<(), AclError> {
    let p = path.to_string_lossy().replace('/', "\\").to_lowercase();
    let p = p.strip_prefix(r"\\?\").unwrap_or(&p);
    for root in NEVER_TOUCH {
        if p == *root || p.starts_with(&format!("{root}\\")) {
            return Err(AclError::Refused { path: path.to_path_buf(), why: format!("below the system location {root}") });
        }
    }
    if p.split('\\').any(|c| c == "windowsapps") {
        return Err(AclError::Refused { path: path.to_path_buf(), why: "a WindowsApps directory".into() });
    }
    Ok(())
}

/// Applies `aces` for `holder`, recording each change before it is made. On a failure part-way
/// everything this holder holds is rolled back and the error returned: nothing is run.
///
/// # Errors
/// [`AclError`] from the store, or [`AclError::Refused`] for a path the user does not own.
pub fn acquire(store: &mut dyn AclStore, record: &mut Record, holder: &Holder, user_sid: &str, aces: &[AceEntry]) -> Result<(), AclError> {
    let r = acquire_all(store, record, holder, user_sid, aces);
    if let Err(e) = r {
        let _ = release_where(store, record, &|h| h == holder);
        return Err(e);
    }
    Ok(())
}

fn acquire_all(store: &mut dyn AclStore, record: &mut Record, holder: &Holder, user_sid: &str, aces: &[AceEntry]) -> Result<(), AclError> {
    for a in aces {
        let (part, ace) = (a.part(), a.sddl());
        if let Some(e) = record.entries.iter_mut().find(|e| e.path == a.path && e.part == part && e.ace == ace && e.state == EntryState::Applied) {
            if !e.holders.contains(holder) {
                e.holders.push(holder.clone());
                store.save(record)?;
            }
            continue;
        }
        check_location(&a.path)?;
        let owned_by = if a.create_dir { a.path.parent().unwrap_or(&a.path) } else { &a.path };
        let owner = store.owner(owned_by)?;
        if owner != user_sid {
            return Err(AclError::Refused { path: owned_by.to_path_buf(), why: format!("owned by {owner}, not by the user ({user_sid})") });
        }
        let before_label = if part == 'S' && !a.create_dir { label_of(&store.get(&a.path, 'S')?) } else { None };
        record.entries.push(RecordEntry { path: a.path.clone(), part, ace: ace.clone(), before_label, create_dir: a.create_dir, state: EntryState::Pending, holders: vec![holder.clone()] });
        let i = record.entries.len() - 1;
        store.save(record)?;
        if a.create_dir {
            store.create_dir(&a.path)?;
        }
        let now = store.get(&a.path, part)?;
        let new = if part == 'S' { set_label(&now, &ace) } else { add_ace(&now, &ace) };
        if new != now {
            store.set(&a.path, part, &new)?;
        }
        record.entries[i].state = EntryState::Applied;
        store.save(record)?;
    }
    Ok(())
}

/// Ends `holder`'s run: undoes, in reverse order, every entry no other run holds.
///
/// # Errors
/// The first [`AclError`]; entries that could not be undone stay in the record (the next start
/// retries them).
pub fn release(store: &mut dyn AclStore, record: &mut Record, holder: &Holder) -> Result<(), AclError> {
    release_where(store, record, &|h| h == holder)
}

/// At start: drops the holders that are no longer running (a crash) and undoes, in reverse
/// order, what nobody holds any more.
///
/// # Errors
/// As [`release`].
pub fn recover(store: &mut dyn AclStore, record: &mut Record, alive: &dyn Fn(&Holder) -> bool) -> Result<(), AclError> {
    release_where(store, record, &|h| !alive(h))
}

fn release_where(store: &mut dyn AclStore, record: &mut Record, drop: &dyn Fn(&Holder) -> bool) -> Result<(), AclError> {
    let mut first_err = None;
    for i in (0..record.entries.len()).rev() {
        record.entries[i].holders.retain(|h| !drop(h));
        if !record.entries[i].holders.is_empty() {
            continue;
        }
        let e = record.entries[i].clone();
        match undo(store, &e) {
            Ok(()) => {
                record.entries.remove(i);
            }
            Err(err) => {
                first_err.get_or_insert(err);
            }
        }
        if let Err(err) = store.save(record) {
            first_err.get_or_insert(err);
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn undo(store: &mut dyn AclStore, e: &RecordEntry) -> Result<(), AclError> {
    let exists = match store.get(&e.path, e.part) {
        Ok(now) => {
            let restored = if e.part == 'S' {
                if now.contains(&e.ace) {
                    match &e.before_label {
                        Some(l) => set_label(&now, l),
                        None => remove_ace(&now, &e.ace),
                    }
                } else {
                    now.clone()
                }
            } else {
                remove_ace(&now, &e.ace)
            };
            if restored != now {
                store.set(&e.path, e.part, &restored)?;
            }
            true
        }
        // A created directory that never came to be, or a path removed meanwhile: nothing to undo.
        Err(_) if e.create_dir || e.state == EntryState::Pending => false,
        Err(err) => return Err(err),
    };
    if e.create_dir && exists {
        store.remove_dir_if_empty(&e.path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::windows::acl::AceKind;
    use crate::windows::sid;

    /// An in-memory filesystem of security descriptors that can "lose power" after N changes:
    /// every call fails from then on, and only the record as last saved survives.
    #[derive(Default)]
    struct Fake {
        sd: BTreeMap<(PathBuf, char), String>,
        dirs: Vec<PathBuf>,
        saved: Record,
        changes: usize,
        power_cut_after: Option<usize>,
    }

    impl Fake {
        fn tick(&mut self) -> Result<(), AclError> {
            if self.power_cut_after.is_some_and(|n| self.changes >= n) {
                return Err(AclError::Os { path: "/".into(), op: "anything", message: "power cut".into() });
            }
            self.changes += 1;
            Ok(())
        }
    }

    impl AclStore for Fake {
        fn get(&mut self, path: &Path, part: char) -> Result<String, AclError> {
            if self.power_cut_after.is_some_and(|n| self.changes >= n) {
                return Err(AclError::Os { path: path.into(), op: "get", message: "power cut".into() });
            }
            self.sd.get(&(path.to_path_buf(), part)).cloned().ok_or_else(|| AclError::Os { path: path.into(), op: "get", message: "no such file".into() })
        }
        fn set(&mut self, path: &Path, part: char, sddl: &str) -> Result<(), AclError> {
            self.tick()?;
            self.sd.insert((path.to_path_buf(), part), sddl.to_string());
            Ok(())
        }
        fn owner(&mut self, path: &Path) -> Result<String, AclError> {
            Ok(if path.starts_with("/other") { "S-1-5-18".into() } else { "S-1-5-21-1".into() })
        }
        fn create_dir(&mut self, path: &Path) -> Result<(), AclError> {
            self.tick()?;
            self.dirs.push(path.to_path_buf());
            self.sd.insert((path.to_path_buf(), 'D'), "D:AI(A;OICIID;FA;;;S-1-5-21-1)".into());
            self.sd.insert((path.to_path_buf(), 'S'), String::new());
            Ok(())
        }
        fn remove_dir_if_empty(&mut self, path: &Path) -> Result<(), AclError> {
            self.tick()?;
            self.dirs.retain(|d| d != path);
            self.sd.retain(|(p, _), _| p != path);
            Ok(())
        }
        fn save(&mut self, record: &Record) -> Result<(), AclError> {
            self.tick()?;
            self.saved = record.clone();
            Ok(())
        }
    }

    fn world() -> Fake {
        let mut f = Fake::default();
        for p in ["/w", "/w/.git/hooks", "/h/.ssh", "/other/x"] {
            f.sd.insert((p.into(), 'D'), "D:AI(A;OICI;FA;;;S-1-5-21-1)(A;OICIID;FA;;;SY)".into());
            f.sd.insert((p.into(), 'S'), String::new());
        }
        f.sd.insert(("/h/.ssh".into(), 'S'), "S:(ML;;NW;;;S-1-16-8192)".into());
        f
    }

    fn aces() -> Vec<AceEntry> {
        let e = |p: &str, kind, sid: &str, mask, create_dir| AceEntry { path: p.into(), kind, sid: sid.into(), mask, inherit: true, create_dir, reason: String::new() };
        vec![
            e("/h/.ssh", AceKind::Label, sid::MEDIUM_INTEGRITY, 7, false),
            e("/w/.git/hooks", AceKind::Deny, "S-1-15-3-1024-5", 0xd0156, false),
            e("/w/.vscode", AceKind::Deny, "S-1-15-3-1024-5", 0xd0156, true),
            e("/w", AceKind::Label, sid::LOW_INTEGRITY, 1, false),
            e("/w", AceKind::Allow, "S-1-15-3-1024-5", 0x1301bf, false),
        ]
    }

    const USER: &str = "S-1-5-21-1";

    fn holder(pid: u32) -> Holder {
        Holder { pid, run: format!("run{pid}") }
    }

    #[test]
    fn a_run_applies_its_aces_and_leaves_nothing_behind() {
        let mut f = world();
        let before = f.sd.clone();
        let mut rec = Record::default();
        acquire(&mut f, &mut rec, &holder(1), USER, &aces()).unwrap();
        assert!(f.sd[&("/w".into(), 'D')].starts_with("D:AI(A;OICI;FA;;;S-1-5-21-1)(A;OICI;0x1301bf;;;S-1-15-3-1024-5)"), "{:?}", f.sd);
        assert!(f.sd[&("/w/.git/hooks".into(), 'D')].starts_with("D:AI(D;OICI;0xd0156"));
        assert_eq!(f.sd[&("/h/.ssh".into(), 'S')], "S:(ML;OICI;NWNRNX;;;S-1-16-8192)");
        assert!(f.dirs.contains(&PathBuf::from("/w/.vscode")));
        assert_eq!(f.saved.entries.len(), 5);
        assert!(f.saved.entries.iter().all(|e| e.state == EntryState::Applied));
        release(&mut f, &mut rec, &holder(1)).unwrap();
        assert_eq!(f.sd, before, "every change undone, the previous label restored, the created directory removed");
        assert!(rec.entries.is_empty() && f.saved.entries.is_empty());
    }

    #[test]
    fn concurrent_runs_share_entries_and_the_last_one_out_removes_them() {
        let mut f = world();
        let before = f.sd.clone();
        let mut rec = Record::default();
        acquire(&mut f, &mut rec, &holder(1), USER, &aces()).unwrap();
        let changes = f.changes;
        acquire(&mut f, &mut rec, &holder(2), USER, &aces()).unwrap();
        assert_eq!(f.changes - changes, 5, "only the record was saved again (one save per shared entry), no ACL changed");
        release(&mut f, &mut rec, &holder(1)).unwrap();
        assert_ne!(f.sd, before, "run 2 still holds them");
        release(&mut f, &mut rec, &holder(2)).unwrap();
        assert_eq!(f.sd, before);
    }

    #[test]
    fn a_crash_at_any_point_is_rolled_back_at_the_next_start() {
        let base = world();
        let before = base.sd.clone();
        // Count the calls of a full acquisition, then cut the power after each of them.
        let mut probe = world();
        acquire(&mut probe, &mut Record::default(), &holder(1), USER, &aces()).unwrap();
        for n in 0..=probe.changes {
            let mut f = world();
            f.power_cut_after = Some(n);
            let mut rec = Record::default();
            let r = acquire(&mut f, &mut rec, &holder(1), USER, &aces());
            assert_eq!(r.is_err(), n < probe.changes, "cut after {n}");
            // Next start: the disk is as it was, the record as last saved, the old run is gone.
            f.power_cut_after = None;
            let mut saved = Record::parse(&serde_json::to_string(&f.saved).unwrap()).unwrap();
            recover(&mut f, &mut saved, &|_| false).unwrap();
            assert_eq!(f.sd, before, "cut after {n}: everything undone");
            assert!(saved.entries.is_empty() && f.dirs.is_empty(), "cut after {n}");
        }
    }

    #[test]
    fn a_failure_part_way_rolls_back_and_recovery_keeps_live_runs() {
        let mut f = world();
        let before = f.sd.clone();
        let mut rec = Record::default();
        let mut bad = aces();
        bad.insert(3, AceEntry { path: "/other/x".into(), kind: AceKind::Allow, sid: "S-1-15-3-1024-5".into(), mask: 1, inherit: false, create_dir: false, reason: String::new() });
        let e = acquire(&mut f, &mut rec, &holder(1), USER, &bad).unwrap_err();
        assert!(matches!(&e, AclError::Refused { path, .. } if path == Path::new("/other/x")), "{e}");
        assert_eq!(f.sd, before, "the changes made before the refusal are undone");
        // A live run's entries survive another run's recovery.
        acquire(&mut f, &mut rec, &holder(1), USER, &aces()).unwrap();
        recover(&mut f, &mut rec, &|h| h.pid == 1).unwrap();
        assert_eq!(rec.entries.len(), 5);
    }

    #[test]
    fn system_locations_and_other_schemas_are_refused() {
        for p in [r"C:\Windows\System32", r"C:\Program Files\Git", r"c:/users/default/x", r"C:\Users\me\AppData\Local\Microsoft\WindowsApps\python.exe", r"\\?\C:\Program Files (x86)\x"] {
            assert!(check_location(Path::new(p)).is_err(), "{p}");
        }
        for p in [r"C:\Users\me\project", r"D:\src\windows-tools", r"C:\Users\defaulted"] {
            assert!(check_location(Path::new(p)).is_ok(), "{p}");
        }
        assert!(Record::parse(r#"{"schema": 2, "entries": []}"#).unwrap_err().to_string().contains("schema version 2"));
        assert_eq!(Record::parse("").unwrap(), Record::default());
    }
}
