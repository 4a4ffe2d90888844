//! `localgpt sandbox run` and `pending` (Unix): the command's output passed through a terminal
//! filter, stdin, cancellation by signal, and the review of protected paths after the run.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use localgpt_sandbox::run::{HelperStart, OutputSink, RunOptions, StdinMode, Stream};
use localgpt_sandbox::text::{escape_controls, ScreenFilter, TerminalFilter};

use crate::cli::{resolve_policy, usage, Failure, PendingArgs, RunArgs};
use crate::render;

static CANCEL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_cancel(_: libc::c_int) {
    CANCEL.store(true, Ordering::SeqCst);
}

fn install_cancel_handler() {
    localgpt_sandbox::run::set_signal_handlers(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP], on_cancel);
}

/// Does nothing: its signal (`SIGWINCH`) interrupts the runner's wait, which then copies the
/// new window size to the command's terminal at once.
extern "C" fn on_resize(_: libc::c_int) {}

fn is_tty(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// A filter on the way to a terminal: a command's output ([`TerminalFilter`]), or the screen of
/// a command with a terminal of its own ([`ScreenFilter`]).
enum Filter {
    Text(TerminalFilter),
    Screen(ScreenFilter),
}

impl Filter {
    fn push(&mut self, data: &[u8], out: &mut Vec<u8>) {
        match self {
            Filter::Text(f) => f.push(data, out),
            Filter::Screen(f) => f.push(data, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        match self {
            Filter::Text(f) => f.finish(out),
            Filter::Screen(f) => f.finish(out),
        }
    }
}

/// Streams output to our own stdout/stderr; a stream that is a terminal gets the command's
/// output through a [`TerminalFilter`] (colours and cursor moves pass, anything a terminal
/// would act on otherwise — clipboard and title writes, reports typed back into its input,
/// mode switches — is shown instead of interpreted), or, when the command has a terminal of
/// its own, through a [`ScreenFilter`] (what full-screen programs draw passes, the rest is
/// dropped).
struct PassThrough {
    filters: [Option<Filter>; 2],
    buf: Vec<u8>,
    /// The last [`STDERR_TAIL`] bytes of stderr (of the terminal, when the command has one),
    /// scanned for refused file accesses afterwards.
    tail: Vec<u8>,
    /// The command has a terminal of its own (all of its output arrives as stdout).
    screen: bool,
}

/// How much of the end of the command's stderr is kept for the refusal report.
const STDERR_TAIL: usize = 64 << 10;

impl PassThrough {
    fn new(screen: bool) -> Self {
        let text = |fd| is_tty(fd).then(|| Filter::Text(TerminalFilter::new()));
        let stdout = if screen { Some(Filter::Screen(ScreenFilter::new())) } else { text(1) };
        PassThrough { filters: [stdout, text(2)], buf: Vec::new(), tail: Vec::new(), screen }
    }

    fn write(stream: Stream, data: &[u8]) {
        let _ = match stream {
            Stream::Stdout => std::io::stdout().lock().write_all(data).and_then(|()| std::io::stdout().flush()),
            Stream::Stderr => std::io::stderr().lock().write_all(data),
        };
    }

    /// Ends both streams (an unfinished escape sequence is shown, not kept).
    fn finish(&mut self) {
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            if let Some(f) = self.filters[i].as_mut() {
                self.buf.clear();
                f.finish(&mut self.buf);
                Self::write(stream, &self.buf);
            }
        }
    }
}

impl OutputSink for PassThrough {
    fn output(&mut self, stream: Stream, data: &[u8]) {
        let i = usize::from(stream == Stream::Stderr);
        if stream == Stream::Stderr || self.screen {
            self.tail.extend_from_slice(&data[data.len().saturating_sub(STDERR_TAIL)..]);
            let over = self.tail.len().saturating_sub(STDERR_TAIL);
            self.tail.drain(..over);
        }
        match self.filters[i].as_mut() {
            Some(f) => {
                self.buf.clear();
                f.push(data, &mut self.buf);
                Self::write(stream, &self.buf);
            }
            None => Self::write(stream, data),
        }
    }
}

/// The terminal settings of fd 0, restored on drop (the command may have changed them when it
/// was handed the terminal with `--stdin inherit`).
struct SavedTerminal(Option<libc::termios>);

impl SavedTerminal {
    fn save() -> Self {
        // SAFETY: tcgetattr fills a zeroed termios for a descriptor it checks itself.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            SavedTerminal((libc::tcgetattr(0, &mut t) == 0).then_some(t))
        }
    }
}

impl Drop for SavedTerminal {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            // SAFETY: restoring settings read from the same descriptor.
            unsafe { libc::tcsetattr(0, libc::TCSANOW, t) };
        }
    }
}

/// The command's stdin from `--stdin` (see [`RunArgs::stdin`]).
fn stdin_mode(flag: Option<&str>, json: bool) -> Result<StdinMode, Failure> {
    match flag {
        Some("null") => Ok(StdinMode::Null),
        Some("pipe") => Ok(StdinMode::Relay(0)),
        // A terminal on both sides: the command gets one of its own (Linux).
        Some("inherit") if cfg!(target_os = "linux") && !json && is_tty(0) && is_tty(1) => Ok(StdinMode::Terminal(0)),
        Some("inherit") => Ok(StdinMode::Inherit),
        Some(other) => Err(usage(format!("--stdin {other:?}: expected null, pipe or inherit"))),
        None if json || is_tty(0) || is_dev_null(0) => Ok(StdinMode::Null),
        None => Ok(StdinMode::Relay(0)),
    }
}

/// fd is `/dev/null` (character device 1:3): nothing to relay.
fn is_dev_null(fd: i32) -> bool {
    // SAFETY: fstat into a zeroed buffer.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3)
    }
}

/// `sandbox run`.
///
/// # Errors
/// A failure with exit code 1 or 2 when nothing could be run.
pub fn run(args: RunArgs) -> Result<i32, Failure> {
    localgpt_sandbox::timing::stamp("args");
    let policy = resolve_policy(&args.policy)?;
    localgpt_sandbox::timing::stamp("policy");
    let argv: Vec<std::ffi::OsString> = if args.cmd.len() == 1 {
        vec!["bash".into(), "-c".into(), args.cmd[0].clone()]
    } else {
        args.cmd.clone()
    };
    let stdin = stdin_mode(args.stdin.as_deref(), args.json)?;
    // How the helper starts: the fork (the default) or, for tests and benchmarks of the other
    // starts, as the variable says.
    let helper_start = match std::env::var(localgpt_sandbox::run::HELPER_START_ENV) {
        Ok(v) => HelperStart::parse(&v).map_err(|e| usage(e.to_string()))?,
        Err(_) => HelperStart::Auto,
    };
    let prepared = localgpt_sandbox::prepare(&policy)?;
    if !args.json {
        for w in &prepared.plan.warnings {
            eprintln!("⚠ {}", escape_controls(w));
        }
        if !args.quiet {
            eprint!("{}", render::banner(&args.cmd, &prepared.plan));
        }
    }
    install_cancel_handler();
    let screen = matches!(stdin, StdinMode::Terminal(_));
    if screen {
        localgpt_sandbox::run::set_signal_handlers(&[libc::SIGWINCH], on_resize);
    }
    let rules = localgpt_sandbox::why::PathRules::of(&prepared.plan);
    let plan_warnings = prepared.plan.warnings.clone();
    // The DNS stub answers names at Full under an allowlist (the sandbox's own namespace).
    // The sandbox answers names itself: at Full (its own network namespace) and, under the
    // allowlist, wherever the runner answers `connect` (Standard: over TCP, `RES_OPTIONS=use-vc`).
    let network = prepared.plan.network;
    let dns_stub = prepared.plan.namespaces().is_some() || (network == localgpt_sandbox::policy::NetworkPolicy::Allowlist && prepared.plan.seccomp_listener());
    // Where the walk service is to be started after the run: on, not answering now, and a root
    // large enough to be worth asking it about walked here.
    #[cfg(target_os = "linux")]
    let walk_service = walk_service_to_start(&prepared.plan);
    let opts = RunOptions { stdin, helper_exe: None, helper_start, cancel: Some(&CANCEL), collect_denials: args.json, ..Default::default() };
    let _terminal = (stdin == StdinMode::Inherit).then(SavedTerminal::save);
    let result = if args.json {
        let mut sink = localgpt_sandbox::run::CaptureSink::default();
        let mut r = prepared.run(&argv, &opts, &mut sink)?;
        r.stdout = String::from_utf8_lossy(&sink.stdout).into_owned();
        r.stderr = String::from_utf8_lossy(&sink.stderr).into_owned();
        r.refusals = refusals(&r.stderr, &rules);
        r.hints.extend(localgpt_sandbox::why::resolution_hint(&r.stderr, network, dns_stub));
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
        r
    } else {
        let mut sink = PassThrough::new(screen);
        let r = prepared.run(&argv, &opts, &mut sink);
        sink.finish();
        let mut r = r?;
        let tail = String::from_utf8_lossy(&sink.tail);
        r.refusals = refusals(&tail, &rules);
        r.hints.extend(localgpt_sandbox::why::resolution_hint(&tail, network, dns_stub));
        if !args.quiet {
            eprintln!("{}", render::escape_lines(&render::completion(&r)));
        }
        // What the run itself found (the plan's warnings were shown before it; the recovered
        // runs are in the completion line).
        for w in r.warnings.iter().filter(|w| !plan_warnings.contains(w) && !r.recovered.contains(w)) {
            eprintln!("⚠ {}", escape_controls(w));
        }
        if let Some(rev) = r.protected_review.as_ref().filter(|v| !v.pending.is_empty()) {
            eprintln!("⚠ {} change(s) to protected workspace paths were kept for review, not applied:", rev.pending.len());
            for c in &rev.pending {
                eprintln!("  {}", escape_controls(&c.summary()));
            }
            eprintln!("  apply one with `localgpt sandbox pending apply ID`, drop it with `localgpt sandbox pending drop ID`");
        }
        for n in r.protected_review.iter().flat_map(|v| &v.notes) {
            eprintln!("⚠ protected paths: {}", escape_controls(n));
        }
        r
    };
    // The walk service, where it is on: started for the next run when none answers (after this
    // run, so that it costs this one nothing and is never part of it).
    #[cfg(target_os = "linux")]
    if let Some((dir, warm)) = walk_service {
        if let Ok(exe) = std::env::current_exe() {
            let _ = localgpt_sandbox::guard::walkd::start(&dir, &exe, &warm);
        }
    }
    Ok(result.exit_code)
}

/// Where the walk service is to be started after the run, and the roots it is to walk first: it
/// is on, did not answer now, and a root large enough to be worth asking it about was walked here,
/// or git listed a worktree for lint-staged (the service keeps that listing).
#[cfg(target_os = "linux")]
fn walk_service_to_start(plan: &localgpt_sandbox::plan::Plan) -> Option<(std::path::PathBuf, Vec<localgpt_sandbox::guard::walkd::Request>)> {
    use localgpt_sandbox::guard::walkd;
    let walks = &plan.nested_walks;
    if !walkd::enabled() || walks.iter().any(|w| w.service.is_some()) {
        return None;
    }
    // (And the worktrees git lists for lint-staged: their listing is kept there.)
    let warm: Vec<walkd::Request> = walks
        .iter()
        .filter(|w| w.listings.len() >= walkd::MIN_DIRS)
        .map(|w| walkd::Request::Walk { root: w.root.clone(), names: plan.nested_names.clone(), budget: w.budget as u64 })
        .chain(plan.git_listings.iter().map(|l| walkd::Request::List { root: l.worktree.clone(), names: l.names.clone() }))
        .collect();
    (!warm.is_empty()).then(|| plan.walk_records.clone().map(|d| (d, warm))).flatten()
}

/// `sandbox walk-service` (hidden): the walk service of this user ([`localgpt_sandbox::guard::walkd`]).
pub fn walk_service(warm: &[String]) -> Result<i32, Failure> {
    #[cfg(target_os = "linux")]
    {
        use localgpt_sandbox::guard::walkd;
        let dir = localgpt_sandbox::guard::records::records_dir();
        let warm: Vec<walkd::Request> = warm.iter().filter_map(|h| walkd::Request::decode(&walkd::unhex(h)?)).collect();
        walkd::serve(&dir, &warm).map(|()| 0).map_err(|e| Failure { code: 1, message: e })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = warm;
        Err(Failure { code: 1, message: "the walk service runs on Linux only".into() })
    }
}

/// The file accesses the plan's `rules` refuse that `stderr` names ([`localgpt_sandbox::why::refusals_in`]),
/// each checked against the host: whether the path exists here, and is a directory.
fn refusals(stderr: &str, rules: &localgpt_sandbox::why::PathRules) -> Vec<localgpt_sandbox::why::Refusal> {
    localgpt_sandbox::why::refusals_in(stderr, rules, |p| std::fs::metadata(p).ok().map(|m| m.is_dir()))
}

/// `sandbox pending [list | apply ID | drop ID]`.
///
/// # Errors
/// A usage failure for a bad action or unknown id; a failure when the store cannot be read or
/// the change cannot be applied (it then stays pending).
pub fn pending(args: PendingArgs) -> Result<i32, Failure> {
    use localgpt_sandbox::guard::pending;
    let words: Vec<&str> = args.action.iter().map(String::as_str).collect();
    let done = |verb: &str, c: pending::PendingChange| {
        if args.json {
            println!("{}", serde_json::json!({ verb: c }));
        } else {
            println!("{verb}: {}", escape_controls(&c.summary()));
        }
        Ok(0)
    };
    match words.as_slice() {
        [] | ["list"] => {
            // A run killed before its review left its private copies: reviewed first, so that
            // what it committed lands and what it kept is listed.
            #[cfg(target_os = "linux")]
            for r in localgpt_sandbox::linux::protect::recover_killed_runs(None) {
                eprintln!("note: {}", escape_controls(&r.summary()));
            }
            let all = pending::list()?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "store": pending::store_dir(), "pending": all })).unwrap_or_default());
            } else if all.is_empty() {
                println!("No pending changes ({}).", pending::store_dir().display());
            } else {
                println!("Pending changes to protected workspace paths (apply with `localgpt sandbox pending apply ID`, drop with `… drop ID`):");
                for c in &all {
                    println!("  {}", escape_controls(&c.summary()));
                }
            }
            Ok(0)
        }
        ["apply", id] => done("applied", pending::apply(id)?),
        ["drop", id] => done("dropped", pending::drop_change(id)?),
        _ => Err(usage("usage: localgpt sandbox pending [list | apply ID | drop ID] [--json]")),
    }
}
