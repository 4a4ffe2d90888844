//! Pending changes: what a sandboxed command wrote to a protected workspace path that could run
//! code later (a hook, an executable git config key, an editor task or setting, a redirection
//! file), kept aside instead of applied. The user — or the agent host, asking the user — lists
//! them, applies one ([`apply`]) or drops it ([`drop_change`]); `localgpt sandbox pending` is the
//! CLI for it.
//!
//! The store is a directory per change under `$XDG_STATE_HOME/localgpt/sandbox/pending`
//! (`~/.local/state/…` by default), private to the user and outside everything a sandboxed
//! command can write: `change.json` says what and why, `content` holds the bytes to write.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;
use crate::guard::fsmeta;
use crate::guard::review::KeyChange;

/// What applying a pending change does.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum PendingAction {
    /// Write the stored `content` to the target (created or replaced), with this mode.
    Write {
        /// Permission bits.
        mode: u32,
    },
    /// Make the target a symbolic link to this.
    Symlink {
        /// The link's target.
        to: PathBuf,
    },
    /// Remove the target.
    Delete,
    /// Set these git config keys in the target (each to its `new` values).
    ConfigKeys {
        /// The key changes.
        changes: Vec<KeyChange>,
    },
    /// Put back the directory stored whole under `tree` (what the command left in place of a
    /// protected directory it renamed or replaced). Refused while the target exists.
    Tree,
}

/// One pending change.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PendingChange {
    /// Identifier (`localgpt sandbox pending apply ID`).
    pub id: String,
    /// When it was kept (seconds since the epoch).
    pub created: u64,
    /// The workspace of the run.
    pub workspace: PathBuf,
    /// The file it concerns.
    pub target: PathBuf,
    /// What applying it does.
    pub action: PendingAction,
    /// Why it was not applied.
    pub why: String,
}

impl PendingChange {
    /// One line for humans: `ID  target: what (why)`.
    #[must_use]
    pub fn summary(&self) -> String {
        let what = match &self.action {
            PendingAction::Write { .. } => "write".to_string(),
            PendingAction::Symlink { to } => format!("symlink to {}", to.display()),
            PendingAction::Delete => "delete".to_string(),
            PendingAction::Tree => "a directory, kept whole".to_string(),
            PendingAction::ConfigKeys { changes } => {
                format!("set {}", changes.iter().map(|c| format!("{} = {:?}", c.name(), c.new.iter().map(|v| v.clone().unwrap_or_else(|| "true".into())).collect::<Vec<_>>())).collect::<Vec<_>>().join(", "))
            }
        };
        format!("{}  {}: {what} ({})", self.id, self.target.display(), self.why)
    }
}

pub use crate::host::state_dir;

/// The store's directory for this user.
#[must_use]
pub fn store_dir() -> PathBuf {
    state_dir().join("pending")
}

fn io(ctx: String) -> impl FnOnce(std::io::Error) -> SandboxError {
    move |e| SandboxError::io(ctx, e)
}

/// Keeps a change (with `content` for a write): returns it with its new id.
///
/// # Errors
/// [`SandboxError::Io`] when the store cannot be written.
pub fn keep(workspace: &Path, target: &Path, action: PendingAction, why: &str, content: Option<&[u8]>) -> Result<PendingChange, SandboxError> {
    let (change, cdir) = new_change(workspace, target, action, why)?;
    if let Some(c) = content {
        std::fs::write(cdir.join("content"), c).map_err(io(format!("write {}/content", cdir.display())))?;
    }
    record(change, &cdir)
}

/// Keeps the directory `target` whole (moved into the store: renamed, or copied and removed
/// across filesystems) as a [`PendingAction::Tree`] change.
///
/// # Errors
/// [`SandboxError::Io`] when the store cannot be written or the directory cannot be moved (it
/// then stays where it is).
pub fn keep_tree(workspace: &Path, target: &Path, why: &str) -> Result<PendingChange, SandboxError> {
    let (change, cdir) = new_change(workspace, target, PendingAction::Tree, why)?;
    if let Err(e) = move_tree(target, &cdir.join("tree")) {
        let _ = std::fs::remove_dir_all(&cdir);
        return Err(e);
    }
    record(change, &cdir)
}

/// A new change directory in the store, and the change (not yet recorded).
fn new_change(workspace: &Path, target: &Path, action: PendingAction, why: &str) -> Result<(PendingChange, PathBuf), SandboxError> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = store_dir();
    fsmeta::create_private_dir(&dir, true).map_err(io(format!("create {}", dir.display())))?;
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut random = [0u8; 3];
    crate::rand::fill(&mut random);
    let id = format!("{created}-{}-{}-{:02x}{:02x}{:02x}", std::process::id(), SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst), random[0], random[1], random[2]);
    let cdir = dir.join(&id);
    fsmeta::create_private_dir(&cdir, false).map_err(io(format!("create {}", cdir.display())))?;
    Ok((PendingChange { id, created, workspace: workspace.to_path_buf(), target: target.to_path_buf(), action, why: why.to_string() }, cdir))
}

/// Writes `change.json` (the change exists from then on).
fn record(change: PendingChange, cdir: &Path) -> Result<PendingChange, SandboxError> {
    let json = serde_json::to_vec_pretty(&change).map_err(|e| SandboxError::Plan(e.to_string()))?;
    std::fs::write(cdir.join("change.json"), json).map_err(io(format!("write {}/change.json", cdir.display())))?;
    Ok(change)
}

/// Moves a directory tree: a rename, or across filesystems a copy (directories, regular files,
/// symbolic links, with their permission bits) and then removal of the source.
fn move_tree(from: &Path, to: &Path) -> Result<(), SandboxError> {
    match std::fs::rename(from, to) {
        Ok(()) => return Ok(()),
        Err(e) if fsmeta::is_cross_device(&e) => {}
        Err(e) => return Err(SandboxError::io(format!("move {} to {}", from.display(), to.display()), e)),
    }
    fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
        let m = std::fs::symlink_metadata(from)?;
        if m.file_type().is_symlink() {
            fsmeta::symlink(&std::fs::read_link(from)?, to)
        } else if m.is_dir() {
            std::fs::create_dir(to)?;
            for e in std::fs::read_dir(from)? {
                let e = e?;
                copy(&e.path(), &to.join(e.file_name()))?;
            }
            std::fs::set_permissions(to, m.permissions())
        } else if m.is_file() {
            std::fs::copy(from, to).map(|_| ())
        } else {
            Ok(())
        }
    }
    copy(from, to).and_then(|()| std::fs::remove_dir_all(from)).map_err(io(format!("move {} to {}", from.display(), to.display())))
}

/// Every pending change, oldest first.
///
/// # Errors
/// [`SandboxError::Io`] when the store cannot be read (a missing store is empty).
pub fn list() -> Result<Vec<PendingChange>, SandboxError> {
    let dir = store_dir();
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SandboxError::io(format!("read {}", dir.display()), e)),
    };
    let mut v: Vec<PendingChange> = rd
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("change.json")).ok())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect();
    v.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
    Ok(v)
}

fn find(id: &str) -> Result<(PendingChange, PathBuf), SandboxError> {
    if id.is_empty() || id.contains('/') || id.starts_with('.') {
        return Err(SandboxError::Policy(format!("no pending change {id:?}")));
    }
    let cdir = store_dir().join(id);
    let b = std::fs::read(cdir.join("change.json")).map_err(|_| SandboxError::Policy(format!("no pending change {id:?} (see `localgpt sandbox pending`)")))?;
    let c: PendingChange = serde_json::from_slice(&b).map_err(|e| SandboxError::Config(format!("pending change {id}: {e}")))?;
    Ok((c, cdir))
}

/// Writes `data` to `target` atomically (a temporary file beside it, renamed over it).
///
/// # Errors
/// [`SandboxError::Io`].
pub fn write_atomic(target: &Path, data: &[u8], mode: u32) -> Result<(), SandboxError> {
    let dir = target.parent().ok_or_else(|| SandboxError::Policy(format!("{} has no parent", target.display())))?;
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Unique per process and call: threads of one host may write the same target at once.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = dir.join(format!(".{name}.localgpt-{}-{}.tmp", std::process::id(), SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    let _ = std::fs::remove_file(&tmp);
    let r = fsmeta::with_mode(std::fs::OpenOptions::new().write(true).create_new(true), mode)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, data).and_then(|()| f.sync_all()))
        .and_then(|()| fsmeta::set_mode(&tmp, mode))
        .and_then(|()| std::fs::rename(&tmp, target));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r.map_err(io(format!("write {}", target.display())))
}

/// The deepest existing ancestor of `target`'s parent is a directory reached without a symbolic
/// link (its canonical path is itself), and the missing ones are created: a write to `target`
/// lands where it says. (The runner's review runs when the command and everything it started
/// are gone, so nothing changes the path between this check and the write; `apply` runs at the
/// user's request, and a sandboxed command running at that very moment could still race it.)
pub(crate) fn safe_parent(target: &Path) -> std::io::Result<()> {
    let parent = target.parent().ok_or_else(|| std::io::Error::other("no parent directory"))?;
    let mut anc = parent;
    loop {
        match std::fs::symlink_metadata(anc) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(std::io::Error::other(format!("{} is not a directory", anc.display()))),
            Err(_) => anc = anc.parent().ok_or_else(|| std::io::Error::other("no existing parent directory"))?,
        }
    }
    if fsmeta::canonical(anc)? != anc {
        return Err(std::io::Error::other(format!("a symbolic link on the way ({} leads elsewhere)", anc.display())));
    }
    std::fs::create_dir_all(parent)
}

/// Applies pending change `id` to its target and removes it from the store.
///
/// # Errors
/// [`SandboxError::Policy`] for an unknown id, or when a symbolic link lies on the way to the
/// target; [`SandboxError::Io`] when the target cannot be
/// written (the change then stays pending).
pub fn apply(id: &str) -> Result<PendingChange, SandboxError> {
    let (c, cdir) = find(id)?;
    // A later run may have left a symbolic link on the way (`.git/hooks` made a link): the
    // change goes where it says or nowhere.
    safe_parent(&c.target).map_err(|e| SandboxError::Policy(format!("{}: not applied ({e}); the change stays pending", c.target.display())))?;
    match &c.action {
        PendingAction::Write { mode } => {
            let data = std::fs::read(cdir.join("content")).map_err(io(format!("read {}/content", cdir.display())))?;
            write_atomic(&c.target, &data, *mode)?;
        }
        PendingAction::Symlink { to } => {
            let _ = std::fs::remove_file(&c.target);
            fsmeta::symlink(to, &c.target).map_err(io(format!("symlink {}", c.target.display())))?;
        }
        PendingAction::Delete => match std::fs::symlink_metadata(&c.target) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&c.target).map_err(io(format!("remove {}", c.target.display())))?,
            Ok(_) => std::fs::remove_file(&c.target).map_err(io(format!("remove {}", c.target.display())))?,
            Err(_) => {}
        },
        PendingAction::Tree => {
            if std::fs::symlink_metadata(&c.target).is_ok() {
                return Err(SandboxError::Policy(format!(
                    "{} exists: move it away first, then apply {id} to put the kept directory there",
                    c.target.display()
                )));
            }
            move_tree(&cdir.join("tree"), &c.target)?;
        }
        PendingAction::ConfigKeys { changes } => {
            let mut text = std::fs::read_to_string(&c.target).unwrap_or_default();
            for k in changes {
                text = crate::guard::review::set_key(&text, &k.section, k.subsection.as_deref(), &k.key, &k.new)
                    .map_err(|e| SandboxError::Config(format!("{}: {e}", c.target.display())))?;
            }
            let mode = std::fs::metadata(&c.target).map_or(0o644, |m| fsmeta::mode(&m));
            write_atomic(&c.target, text.as_bytes(), mode)?;
        }
    }
    let _ = std::fs::remove_dir_all(&cdir);
    Ok(c)
}

/// Drops pending change `id` without applying it.
///
/// # Errors
/// [`SandboxError::Policy`] for an unknown id.
pub fn drop_change(id: &str) -> Result<PendingChange, SandboxError> {
    let (c, cdir) = find(id)?;
    std::fs::remove_dir_all(&cdir).map_err(io(format!("remove {}", cdir.display())))?;
    Ok(c)
}

/// What happened to the protected paths of a run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ProtectedReview {
    /// Changes applied to the real files (paths relative to the workspace).
    pub applied: Vec<String>,
    /// Changes kept for the user.
    pub pending: Vec<PendingChange>,
    /// Protected paths that were read-only for the run (no private copy could be made).
    pub read_only: Vec<String>,
    /// What could not be reviewed or applied (the change is then pending, or the note says why
    /// nothing was lost).
    pub notes: Vec<String>,
    /// Where the protected directories were reviewed (their paths after the run): the walk for
    /// names created during the run does not take them for new ones.
    #[serde(skip)]
    pub reviewed: Vec<PathBuf>,
}
