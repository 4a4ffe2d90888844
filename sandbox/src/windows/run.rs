//! Running a command under a Windows plan (Windows only): the installation record locked and
//! recovered, the plan's ACEs and labels applied and read back, the restricted token and the job,
//! the command started suspended and checked from outside before it runs, its output capped, the
//! timeout enforced on the whole job, the ACEs removed again, and what appeared at a reviewed
//! protected path held back. Experimental: this runs only when the user opts in
//! ([`crate::detect::EXPERIMENTAL_WINDOWS_ENV`]), and has not been run on Windows.

#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use windows_sys::Win32::Foundation::{SetHandleInformation, HANDLE, HANDLE_FLAG_INHERIT, STILL_ACTIVE, WAIT_TIMEOUT};
use windows_sys::Win32::System::Threading::{GetExitCodeProcess, OpenProcess, WaitForSingleObject, INFINITE, PROCESS_QUERY_LIMITED_INFORMATION};

use super::glue::{self, Owned, Win32Acl};
use super::record::{self, Holder, Record};
use crate::error::SandboxError;
use crate::plan::{Plan, ProtectionId};
use crate::text::TerminalFilter;

/// What a run gives back.
#[derive(Serialize, Clone, Debug)]
pub struct WinRunResult {
    /// The command's exit code (124 at the timeout).
    pub exit_code: i32,
    /// The timeout fired (the whole job was terminated).
    pub timed_out: bool,
    /// Captured standard output (at most the cap).
    #[serde(skip)]
    pub stdout: Vec<u8>,
    /// Captured standard error (at most the cap).
    #[serde(skip)]
    pub stderr: Vec<u8>,
    /// Bytes of standard output beyond the cap (dropped).
    pub stdout_dropped: u64,
    /// Bytes of standard error beyond the cap (dropped).
    pub stderr_dropped: u64,
    /// Wall-clock time, milliseconds.
    pub duration_ms: u64,
    /// Protected paths that appeared during the run, held back (moved to the held directory).
    pub held: Vec<(PathBuf, PathBuf)>,
}

fn setup(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Setup(e.to_string())
}

/// The directory of the installation record and held paths (`%LOCALAPPDATA%\localgpt\sandbox`).
///
/// # Errors
/// [`SandboxError::Setup`] when `LOCALAPPDATA` is not set.
pub fn state_dir() -> Result<PathBuf, SandboxError> {
    // The installation record must outlive the temporary directory the fallback would use.
    std::env::var_os("LOCALAPPDATA").filter(|v| !v.is_empty()).map(|_| crate::host::state_dir()).ok_or_else(|| setup("LOCALAPPDATA is not set: no place for the installation record"))
}

fn alive(pid: u32) -> bool {
    // SAFETY: a query handle, closed by Owned.
    unsafe {
        let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if h.is_null() {
            return false;
        }
        let h = Owned(h);
        let mut code = 0u32;
        GetExitCodeProcess(h.0, &mut code) != 0 && code == STILL_ACTIVE as u32
    }
}

/// Runs the record's transaction `f` under the record's lock.
fn with_record<T>(store: &mut Win32Acl, f: impl FnOnce(&mut Win32Acl, &mut Record) -> Result<T, SandboxError>) -> Result<T, SandboxError> {
    let dir = store.record_path.parent().map(Path::to_path_buf).unwrap_or_default();
    std::fs::create_dir_all(&dir).map_err(|e| setup(format!("{}: {e}", dir.display())))?;
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("acl-record.lock")).map_err(|e| setup(format!("record lock: {e}")))?;
    lock.lock().map_err(|e| setup(format!("record lock: {e}")))?;
    let text = match std::fs::read_to_string(&store.record_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(setup(format!("{}: {e}", store.record_path.display()))),
    };
    let mut rec = Record::parse(&text).map_err(setup)?;
    let r = f(store, &mut rec);
    let _ = lock.unlock();
    r
}

/// Symbolic links and junctions below `root` whose target is outside every one of `roots`
/// (an unresolvable one counts as outside).
fn outside_links(root: &Path, roots: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let p = e.path();
            if ft.is_symlink() {
                let target = std::fs::canonicalize(&p).unwrap_or_default();
                if target.as_os_str().is_empty() || !roots.iter().any(|w| target.starts_with(w)) {
                    out.push((p, target));
                }
            } else if ft.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

fn inheritable(h: HANDLE) -> Result<(), SandboxError> {
    // SAFETY: a handle this process owns.
    if unsafe { SetHandleInformation(h, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT) } == 0 {
        return Err(setup(format!("SetHandleInformation: {}", std::io::Error::last_os_error())));
    }
    Ok(())
}

/// Where a stream's kept bytes are also shown while the command runs.
#[derive(Clone, Copy)]
enum Echo {
    /// Not shown (`--json`).
    None,
    /// Our standard output.
    Stdout,
    /// Our standard error.
    Stderr,
}

/// Reads `r` to the end, keeping at most `cap` bytes and showing them as `echo` says; on a
/// terminal through a [`TerminalFilter`] (colours pass; clipboard, title and report sequences
/// are shown, not acted on), as on Linux.
fn drain(mut r: std::io::PipeReader, cap: u64, echo: Echo) -> (Vec<u8>, u64) {
    use std::io::{IsTerminal, Write};
    let mut out: Option<Box<dyn Write>> = match echo {
        Echo::None => None,
        Echo::Stdout => Some(Box::new(std::io::stdout())),
        Echo::Stderr => Some(Box::new(std::io::stderr())),
    };
    let terminal = match echo {
        Echo::None => false,
        Echo::Stdout => std::io::stdout().is_terminal(),
        Echo::Stderr => std::io::stderr().is_terminal(),
    };
    let mut filter = terminal.then(TerminalFilter::new);
    let mut shown = Vec::new();
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = usize::try_from(cap.saturating_sub(kept.len() as u64)).unwrap_or(usize::MAX).min(n);
                kept.extend_from_slice(&buf[..room]);
                if let Some(o) = out.as_mut() {
                    let data: &[u8] = match filter.as_mut() {
                        Some(f) => {
                            shown.clear();
                            f.push(&buf[..room], &mut shown);
                            &shown
                        }
                        None => &buf[..room],
                    };
                    let _ = o.write_all(data).and_then(|()| o.flush());
                }
                dropped += (n - room) as u64;
            }
        }
    }
    if let (Some(o), Some(f)) = (out.as_mut(), filter.as_mut()) {
        shown.clear();
        f.finish(&mut shown);
        let _ = o.write_all(&shown);
    }
    (kept, dropped)
}

/// Runs `argv` (one argument: a `cmd.exe` command) under `plan`, streaming output when `stream`.
///
/// # Errors
/// [`SandboxError::Setup`] when anything of the plan cannot be applied or verified (nothing was
/// run), [`SandboxError::Unsupported`] for a plan without Windows artefacts.
pub fn run(plan: &Plan, argv: &[String], run_id: &str, stream: bool) -> Result<WinRunResult, SandboxError> {
    let w = plan.windows.as_ref().ok_or_else(|| SandboxError::Unsupported("the plan has no Windows artefacts".into()))?;
    let started = Instant::now();
    let user = glue::user_sid().map_err(setup)?;
    let mut store = Win32Acl { record_path: state_dir()?.join("acl-record.json") };
    let holder = Holder { pid: std::process::id(), run: run_id.to_string() };
    if let Some(t) = &w.temp_dir {
        std::fs::create_dir_all(t).map_err(|e| setup(format!("{}: {e}", t.display())))?;
    }
    // Ablation builds only (test-only, never a release): `fs-write-outside` cuts the ACEs and
    // labels, `capabilities` the check of the command's token. `ci/wine-check` runs the parent
    // side under Wine, which enforces neither, that way; a release build refuses there.
    let aces: &[super::acl::AceEntry] = if crate::ablation::is(&plan.ablated, ProtectionId::FsWriteOutside) { &[] } else { &w.aces };
    let applied = apply(&mut store, &holder, &user, aces);
    if let Err(e) = applied {
        if let Some(t) = &w.temp_dir {
            let _ = std::fs::remove_dir_all(t);
        }
        return Err(e);
    }
    let result = run_applied(plan, w, argv, stream, started);
    let released = with_record(&mut store, |s, rec| record::release(s, rec, &holder).map_err(setup));
    if let Some(t) = &w.temp_dir {
        let _ = std::fs::remove_dir_all(t);
    }
    let mut r = result?;
    released?;
    r.held = hold_reviewed(w, run_id)?;
    Ok(r)
}

/// Applies `aces` (the plan's ACEs and labels) for `holder` (after the link check), and reads each back.
fn apply(store: &mut Win32Acl, holder: &Holder, user: &str, aces: &[super::acl::AceEntry]) -> Result<(), SandboxError> {
    // A link below a writable root that leads outside every writable root would carry the
    // inheritable grant and label there if ACL propagation followed it: refused, named.
    let roots: Vec<PathBuf> = aces.iter().filter(|a| a.kind == super::acl::AceKind::Allow).map(|a| a.path.clone()).collect();
    for r in &roots {
        if let Some((link, target)) = outside_links(r, &roots).into_iter().next() {
            return Err(setup(format!(
                "{} is a link to {}, outside the writable roots: the sandbox's inheritable ACEs must not reach through it; remove it or grant its target (--allow-write)",
                link.display(),
                target.display()
            )));
        }
    }
    with_record(store, |s, rec| {
        record::recover(s, rec, &|h| alive(h.pid)).map_err(setup)?;
        record::acquire(s, rec, holder, user, aces).map_err(setup)?;
        // Read every change back: what the sandbox claims is what the filesystem holds.
        for a in aces {
            let now = record::AclStore::get(s, &a.path, a.part()).map_err(setup)?;
            if !now.contains(&a.sddl()) {
                let _ = record::release(s, rec, holder);
                return Err(setup(format!("{}: {} was applied but is not in its security descriptor ({now})", a.path.display(), a.sddl())));
            }
        }
        Ok(())
    })
}

fn run_applied(plan: &Plan, w: &super::WindowsPlan, argv: &[String], stream: bool, started: Instant) -> Result<WinRunResult, SandboxError> {
    let token = glue::restricted_token(&w.token).map_err(setup)?;
    let job = glue::job(&w.job).map_err(setup)?;
    let nul = std::fs::File::open("NUL").map_err(|e| setup(format!("NUL: {e}")))?;
    let (out_r, out_w) = std::io::pipe().map_err(|e| setup(format!("pipe: {e}")))?;
    let (err_r, err_w) = std::io::pipe().map_err(|e| setup(format!("pipe: {e}")))?;
    let stdio = [nul.as_raw_handle() as HANDLE, out_w.as_raw_handle() as HANDLE, err_w.as_raw_handle() as HANDLE];
    for h in stdio {
        inheritable(h)?;
    }
    let mut vars = plan.env.vars.clone();
    if let Some(t) = &w.temp_dir {
        vars.retain(|(k, _)| !k.eq_ignore_ascii_case("TEMP") && !k.eq_ignore_ascii_case("TMP"));
        vars.push(("TEMP".into(), t.display().to_string()));
        vars.push(("TMP".into(), t.display().to_string()));
    }
    let cmd = super::cmdline::command_line(argv);
    let spec = w.token.clone();
    let child = glue::start(&token, job, OsStr::new(&cmd), &super::cmdline::env_block(&vars), &plan.workspace, stdio, &|p| if crate::ablation::is(&plan.ablated, ProtectionId::Capabilities) { Ok(()) } else { glue::verify_token(p, &spec) }).map_err(setup)?;
    drop((nul, out_w, err_w));
    let cap = plan.max_output_bytes;
    let (eo, ee) = if stream { (Echo::Stdout, Echo::Stderr) } else { (Echo::None, Echo::None) };
    let out_t = std::thread::spawn(move || drain(out_r, cap, eo));
    let err_t = std::thread::spawn(move || drain(err_r, cap, ee));
    let ms = u32::try_from(plan.timeout_secs.saturating_mul(1000)).unwrap_or(INFINITE - 1);
    // SAFETY: the process handle is owned by `child`.
    let timed_out = unsafe { WaitForSingleObject(child.process.0, ms) } == WAIT_TIMEOUT;
    // The command is done (or out of time): nothing of its tree outlives it.
    child.kill();
    unsafe { WaitForSingleObject(child.process.0, INFINITE) };
    let mut code = 0u32;
    unsafe { GetExitCodeProcess(child.process.0, &mut code) };
    let (stdout, stdout_dropped) = out_t.join().unwrap_or_default();
    let (stderr, stderr_dropped) = err_t.join().unwrap_or_default();
    Ok(WinRunResult {
        exit_code: if timed_out { 124 } else { code as i32 },
        timed_out,
        stdout,
        stderr,
        stdout_dropped,
        stderr_dropped,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        held: Vec::new(),
    })
}

/// Renames what appeared at a reviewed (absent at launch) protected path to a sibling named after
/// the run (`.mcp.json.localgpt-held-RUN`): not applied — no tool looks for that name — and not
/// lost. A sibling stays on the same volume, so the rename cannot fail for crossing one.
fn hold_reviewed(w: &super::WindowsPlan, run_id: &str) -> Result<Vec<(PathBuf, PathBuf)>, SandboxError> {
    let mut held = Vec::new();
    for r in w.reviewed.iter().filter(|r| r.path.symlink_metadata().is_ok()) {
        let mut name = r.path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".localgpt-held-{run_id}"));
        let to = r.path.with_file_name(name);
        std::fs::rename(&r.path, &to).map_err(|e| setup(format!("holding back {} (it appeared at a protected path during the run and is still there): {e}", r.path.display())))?;
        held.push((r.path.clone(), to));
    }
    Ok(held)
}
