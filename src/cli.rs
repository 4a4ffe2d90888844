//! `localgpt sandbox run|status|explain`: argument parsing and the glue from flags and
//! config to a policy. Errors become one line on stderr and an exit code. `run`: 125 for every
//! failure of the sandbox itself — a bad flag, a config or policy error, a sandbox that cannot be
//! set up, a required level that cannot be met; nothing executed — as `env`, `timeout` and
//! `docker run` do, with `--json` a JSON object `{"error", "exit_code"}` on stdout too; otherwise
//! the command's own code (124 timeout, 128+N signal). The other subcommands: 2 for usage, config
//! and policy errors, 1 for the rest.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use localgpt_sandbox::config::absolutize;
use localgpt_sandbox::detect::Platform;
use localgpt_sandbox::policy::{LevelSetting, SandboxLevel, SandboxMode};
use localgpt_sandbox::{SandboxError, SandboxPolicy, SandboxSettings};

use crate::render;

#[derive(Parser)]
#[command(name = "localgpt", version, about = "LocalGPT: kernel-enforced sandbox for agent shell commands")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Top,
}

#[derive(Subcommand)]
pub enum Top {
    /// The shell sandbox.
    #[command(subcommand)]
    Sandbox(SandboxCmd),
}

#[derive(Subcommand)]
pub enum SandboxCmd {
    /// Run a command in the sandbox: one argument runs `bash -c ARG`, several exec that argv.
    Run(RunArgs),
    /// Show what this machine can enforce and at which level commands run.
    Status(StatusArgs),
    /// Show the resolved policy and plan (every Landlock path rule and seccomp rule).
    Explain(ExplainArgs),
    /// Verify enforcement live: the smoke tests, or the whole escape corpus with --full.
    Test(TestArgs),
    /// List the changes to protected workspace paths that runs kept for review; apply or drop one.
    Pending(PendingArgs),
    /// The walk service (started by `run` unless LOCALGPT_SANDBOX_WALK_SERVICE=0).
    #[command(hide = true)]
    WalkService(WalkServiceArgs),
}

#[derive(Args)]
pub struct WalkServiceArgs {
    /// A root to walk before listening (an encoded request, in hexadecimal).
    #[arg(long = "warm", value_name = "REQUEST")]
    pub warm: Vec<String>,
}

#[derive(Args)]
pub struct PendingArgs {
    /// `list` (default), `apply ID` or `drop ID`.
    #[arg(value_name = "ACTION")]
    pub action: Vec<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct TestArgs {
    /// Run the whole escape corpus embedded in this binary, at every reachable level.
    #[arg(long)]
    pub full: bool,
    /// Run one vector per protection (the most specific one that can run here) at every
    /// reachable level: the subset the kernel matrix runs in each guest.
    #[arg(long, conflicts_with = "full")]
    pub cover: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// Only these levels (repeatable; default: every level `sandbox status` lists).
    #[arg(long = "level", value_name = "LEVEL")]
    pub levels: Vec<String>,
    /// Only vectors whose name contains this text (repeatable).
    #[arg(long = "only", value_name = "TEXT")]
    pub only: Vec<String>,
    /// Cases run in parallel (default 2).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Test another build of `localgpt` instead of this one (the harness's own self-test runs
    /// the suite against a stand-in that confines nothing, which must be caught).
    #[arg(long, value_name = "PATH", hide = true)]
    pub bin: Option<PathBuf>,
}

/// Flags that shape the policy (shared by `run` and `explain`).
#[derive(Args, Clone, Default, Debug, PartialEq, Eq)]
pub struct PolicyArgs {
    /// workspace-write (default), read-only or full-access.
    #[arg(long)]
    pub mode: Option<String>,
    /// The workspace (default: `[sandbox] workspace` or the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Extra read + execute path (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    pub allow_read: Vec<PathBuf>,
    /// Extra read-write path (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<PathBuf>,
    /// Extra denied path (repeatable).
    #[arg(long, value_name = "PATH")]
    pub deny: Vec<PathBuf>,
    /// A host unix socket the command may connect to, and only that one (repeatable; e.g.
    /// "$SSH_AUTH_SOCK").
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    pub allow_unix_socket: Vec<PathBuf>,
    /// Network: deny (default), allowlist (the --allow-domain hosts, through the sandbox's
    /// proxy) or full (the host's network, open; every other protection kept).
    #[arg(long, value_name = "MODE")]
    pub network: Option<String>,
    /// A domain the command may reach with --network allowlist (repeatable): example.com,
    /// *.example.com (subdomains), **.example.com (both).
    #[arg(long = "allow-domain", value_name = "DOMAIN")]
    pub allow_domain: Vec<String>,
    /// A domain never reachable, even when an allowed pattern matches it (repeatable).
    #[arg(long = "deny-domain", value_name = "DOMAIN")]
    pub deny_domain: Vec<String>,
    /// An address block the command may dial with --network allowlist (repeatable):
    /// 10.20.0.0/16, fd00::/8 — a corporate mirror in a private range, named by its block.
    #[arg(long = "allow-cidr", value_name = "CIDR")]
    pub allow_cidr: Vec<String>,
    /// A host of your network in a private range (a corporate mirror) the command may reach
    /// with --network allowlist, by its exact name (repeatable): mirror.corp.example. Its
    /// 10.x, 172.16–31.x, 192.168.x, 100.64/10 or fc00::/7 addresses are dialled; loopback and
    /// link-local never.
    #[arg(long = "allow-private-host", value_name = "HOST")]
    pub allow_private_host: Vec<String>,
    /// Append one JSON line per event (start, each network decision, end) to this file.
    #[arg(long = "audit-log", value_name = "PATH")]
    pub audit_log: Option<PathBuf>,
    /// Import Anthropic sandbox-runtime's settings JSON (filesystem.denyRead/allowWrite,
    /// network.allowedDomains/deniedDomains/allowUnixSockets/allowLocalBinding); a field that
    /// cannot be honoured is an error naming it.
    #[arg(long = "settings", value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Timeout in seconds (default 120).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Output cap per stream in bytes (default 1 MiB).
    #[arg(long = "max-output", value_name = "BYTES")]
    pub max_output: Option<u64>,
    /// Process bound, threads included (default: max(1024, 32 × CPUs)).
    #[arg(long = "max-processes", value_name = "N")]
    pub max_processes: Option<u32>,
    /// Hard bound on each process's open files (default 524288; the soft limit starts at 1024).
    #[arg(long = "max-open-files", value_name = "N")]
    pub max_open_files: Option<u64>,
    /// Largest file a process may write, in bytes (K, M, G suffixes; default: no bound).
    #[arg(long = "max-file-size", value_name = "SIZE", value_parser = parse_size)]
    pub max_file_size: Option<u64>,
    /// Memory bound of the run's cgroup, in bytes (K, M, G suffixes; default: half of RAM).
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,
    /// Refuse to run below this level: minimal, standard or full.
    #[arg(long, value_name = "LEVEL")]
    pub require: Option<String>,
    /// Run at exactly this level (auto, full, standard, minimal, none).
    #[arg(long, value_name = "LEVEL")]
    pub level: Option<String>,
    /// Acknowledge running without kernel confinement (full-access mode or level none).
    #[arg(long = "dangerously-allow-full-access")]
    pub dangerously_allow_full_access: bool,
    /// Keep this environment variable even if it looks like a secret (repeatable).
    #[arg(long = "keep-env", value_name = "NAME")]
    pub keep_env: Vec<String>,
    /// A trusted directory: the workspace must resolve (symlinks followed) to a path under it.
    #[arg(long = "workspace-root", value_name = "DIR")]
    pub workspace_root: Option<PathBuf>,
    /// Accept a workspace that is /, a system directory, $HOME or one of its ancestors.
    #[arg(long = "force-workspace")]
    pub force_workspace: bool,
}

#[derive(Args, Default, Debug, PartialEq, Eq)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print one JSON result object on stdout (output captured into it).
    #[arg(long)]
    pub json: bool,
    /// No banner.
    #[arg(long)]
    pub quiet: bool,
    /// The command's stdin: `null`, `pipe` (the bytes of this process's stdin, relayed through
    /// a pipe) or `inherit` (interactive use: on a terminal — stdin and stdout, no --json — the
    /// command gets a terminal of its own that this one relays; otherwise this process's stdin
    /// itself is handed over; the settings are restored afterwards). Default: `null` when stdin is a
    /// terminal or with --json, else `pipe`.
    #[arg(long, value_name = "MODE")]
    pub stdin: Option<String>,
    /// The command.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<std::ffi::OsString>,
}

/// `localgpt sandbox run …` parsed without clap, for the common shapes only: long flags
/// (`--flag value` or `--flag=value`), then `--` and the command. Anything else — a short flag,
/// `--help`, an unknown or repeated single-valued flag, a value that starts with `-`, an empty
/// or non-UTF-8 value, a number that does not parse, no command — returns `None`, and clap
/// parses (and reports) it. Building clap's parser is ~0.13 ms of every run's start-up; the
/// test `fast_run_parse_agrees_with_clap` checks both parsers agree.
#[cfg(unix)]
pub fn fast_run_args(args: &[std::ffi::OsString]) -> Option<RunArgs> {
    let mut it = args.iter().map(|a| a.to_str());
    if it.next().is_none() || it.next()? != Some("sandbox") || it.next()? != Some("run") {
        return None;
    }
    let mut r = RunArgs::default();
    fn once<T>(slot: &mut Option<T>, v: T) -> Option<()> {
        if slot.is_some() {
            return None;
        }
        *slot = Some(v);
        Some(())
    }
    loop {
        let a = it.next()??;
        if a == "--" {
            break;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (a, None),
        };
        let flag = |b: &mut bool| -> Option<()> {
            if inline.is_some() || *b {
                return None;
            }
            *b = true;
            Some(())
        };
        match name {
            "--json" => flag(&mut r.json)?,
            "--quiet" => flag(&mut r.quiet)?,
            "--dangerously-allow-full-access" => flag(&mut r.policy.dangerously_allow_full_access)?,
            "--force-workspace" => flag(&mut r.policy.force_workspace)?,
            _ => {
                let v = match inline {
                    Some(v) => v,
                    None => it.next()??,
                };
                if v.is_empty() || v.starts_with('-') {
                    return None;
                }
                let p = &mut r.policy;
                match name {
                    "--mode" => once(&mut p.mode, v.to_string())?,
                    "--workspace" => once(&mut p.workspace, PathBuf::from(v))?,
                    "--workspace-root" => once(&mut p.workspace_root, PathBuf::from(v))?,
                    "--allow-read" => p.allow_read.push(PathBuf::from(v)),
                    "--allow-write" => p.allow_write.push(PathBuf::from(v)),
                    "--deny" => p.deny.push(PathBuf::from(v)),
                    "--allow-unix-socket" => p.allow_unix_socket.push(PathBuf::from(v)),
                    "--network" => once(&mut p.network, v.to_string())?,
                    "--allow-domain" => p.allow_domain.push(v.to_string()),
                    "--deny-domain" => p.deny_domain.push(v.to_string()),
                    "--allow-cidr" => p.allow_cidr.push(v.to_string()),
                    "--allow-private-host" => p.allow_private_host.push(v.to_string()),
                    "--audit-log" => once(&mut p.audit_log, PathBuf::from(v))?,
                    "--settings" => once(&mut p.settings, PathBuf::from(v))?,
                    "--timeout" => once(&mut p.timeout, v.parse().ok()?)?,
                    "--max-output" => once(&mut p.max_output, v.parse().ok()?)?,
                    "--max-processes" => once(&mut p.max_processes, v.parse().ok()?)?,
                    "--max-open-files" => once(&mut p.max_open_files, v.parse().ok()?)?,
                    "--max-file-size" => once(&mut p.max_file_size, parse_size(v).ok()?)?,
                    "--max-memory" => once(&mut p.max_memory, parse_size(v).ok()?)?,
                    "--require" => once(&mut p.require, v.to_string())?,
                    "--level" => once(&mut p.level, v.to_string())?,
                    "--keep-env" => p.keep_env.push(v.to_string()),
                    "--stdin" => once(&mut r.stdin, v.to_string())?,
                    _ => return None,
                }
            }
        }
    }
    for a in it {
        r.cmd.push(a?.into());
    }
    (!r.cmd.is_empty()).then_some(r)
}

#[derive(Args)]
pub struct StatusArgs {
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The platform to make the plan for: `linux`, `macos` (the Seatbelt profile a Mac would
    /// run for the same flags; shown on any OS) or `windows`. Default: this one.
    #[arg(long)]
    pub platform: Option<String>,
    /// What the sandbox does to this path and why, and the flag that allows what it refuses
    /// (repeatable), instead of the whole plan.
    #[arg(long = "path", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

impl Top {
    /// `Some(--json)` for `sandbox run` (whose failures exit [`RUN_FAILED`]), `None` otherwise.
    #[must_use]
    pub fn run_json(&self) -> Option<bool> {
        match self {
            Top::Sandbox(SandboxCmd::Run(a)) => Some(a.json),
            _ => None,
        }
    }
}

/// The exit code of `run` when the sandbox itself failed and nothing was executed (as `env`,
/// `timeout` and `docker run`: the command's own codes, 124 and 128+N included, stay its own).
pub const RUN_FAILED: i32 = 125;

/// The command line, parsed. A parse error of `sandbox run` (an unknown flag, a missing value)
/// exits [`RUN_FAILED`] — with `--json` before `--`, after a JSON error object on stdout —;
/// help and version print as usual; the other subcommands' errors exit as clap does (2).
pub fn parse(args: Vec<std::ffi::OsString>) -> Top {
    let run = args.get(1).is_some_and(|a| a == "sandbox") && args.get(2).is_some_and(|a| a == "run");
    let json = run && args.iter().skip(3).take_while(|a| *a != "--").any(|a| a == "--json");
    match Cli::try_parse_from(&args) {
        Ok(c) => c.command,
        Err(e) if run && e.use_stderr() => {
            if json {
                print_run_error(e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: "));
            }
            let _ = e.print();
            std::process::exit(RUN_FAILED)
        }
        Err(e) => e.exit(),
    }
}

/// `run --json`'s error object on stdout: `{"error": message, "exit_code": 125}`.
fn print_run_error(message: &str) {
    println!("{}", serde_json::json!({ "error": message, "exit_code": RUN_FAILED }));
}

/// Ends the CLI after a failure: one line on stderr; for `run` (`run_json: Some(json)`) exit
/// [`RUN_FAILED`], and with `--json` a JSON error object on stdout too.
pub fn fail(f: Failure, run_json: Option<bool>) -> ! {
    let message = localgpt_sandbox::text::escape_controls(&f.message);
    let code = if run_json.is_some() { RUN_FAILED } else { f.code };
    if run_json == Some(true) {
        print_run_error(&message);
    }
    eprintln!("localgpt: {message}");
    std::process::exit(code)
}

/// A failure that ends the CLI with a message and an exit code.
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl From<SandboxError> for Failure {
    fn from(e: SandboxError) -> Self {
        Failure { code: if e.is_usage() { 2 } else { 1 }, message: e.to_string() }
    }
}

/// A size in bytes: digits with an optional binary suffix (`K`, `M`, `G`, `T`; `KiB` and `KB`
/// mean the same).
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("{s:?}: a size is a number of bytes with an optional K, M, G or T suffix")),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{s:?}: a size is a number of bytes with an optional K, M, G or T suffix"))
}

pub fn usage(msg: impl Into<String>) -> Failure {
    Failure { code: 2, message: msg.into() }
}

/// Config + flags → policy.
///
/// # Errors
/// A usage failure for bad config, flags or workspace.
pub fn resolve_policy(args: &PolicyArgs) -> Result<SandboxPolicy, Failure> {
    resolve_policy_for(args, Platform::current())
}

/// [`resolve_policy`] with `platform`'s default tables.
///
/// # Errors
/// As [`resolve_policy`].
pub fn resolve_policy_for(args: &PolicyArgs, platform: Platform) -> Result<SandboxPolicy, Failure> {
    let (mut s, _path) = SandboxSettings::load()?;
    let cwd = std::env::current_dir().map_err(|e| usage(format!("current directory: {e}")))?;
    // sandbox-runtime settings: over the config file, under the flags.
    if let Some(f) = &args.settings {
        let f = absolutize(f, &cwd);
        let text = std::fs::read_to_string(&f).map_err(|e| usage(format!("--settings {}: {e}", f.display())))?;
        let home = s.home.clone().or_else(|| std::env::var_os("HOME").map(PathBuf::from));
        localgpt_sandbox::srt::apply(&mut s, &text, &f, &cwd, home.as_deref()).map_err(|e| usage(e.to_string()))?;
    }
    if let Some(m) = &args.mode {
        s.mode = SandboxMode::parse(m).map_err(|e| usage(e.to_string()))?;
    }
    if let Some(l) = &args.level {
        s.level = LevelSetting::parse(l).map_err(|e| usage(e.to_string()))?;
    }
    if let Some(r) = &args.require {
        let lvl = SandboxLevel::parse(r).map_err(|e| usage(e.to_string()))?;
        s.require = Some(s.require.map_or(lvl, |cur| cur.max(lvl)));
    }
    if let Some(t) = args.timeout {
        s.timeout_secs = t;
    }
    if let Some(m) = args.max_output {
        s.max_output_bytes = m;
    }
    if let Some(n) = args.max_processes {
        s.max_processes = n;
    }
    if let Some(n) = args.max_open_files {
        s.max_open_files = n;
    }
    if let Some(b) = args.max_file_size {
        s.max_file_size_bytes = Some(b);
    }
    if let Some(b) = args.max_memory {
        s.max_memory_bytes = Some(b);
    }
    s.extra_read.extend(args.allow_read.iter().map(|p| absolutize(p, &cwd)));
    s.extra_write.extend(args.allow_write.iter().map(|p| absolutize(p, &cwd)));
    s.extra_deny.extend(args.deny.iter().map(|p| absolutize(p, &cwd)));
    s.allow_unix_sockets.extend(args.allow_unix_socket.iter().map(|p| absolutize(p, &cwd)));
    if let Some(m) = &args.network {
        s.network = localgpt_sandbox::config::parse_network_mode(m).map_err(|e| usage(e.to_string()))?;
    }
    // Flags of the allowlist given for a run whose network is not the allowlist are a mistake of
    // this command line: refused (a config file's lists are only warned about, every run).
    let flags: Vec<&str> = [("--allow-domain", args.allow_domain.len()), ("--deny-domain", args.deny_domain.len()), ("--allow-cidr", args.allow_cidr.len()), ("--allow-private-host", args.allow_private_host.len())].iter().filter(|(_, n)| *n > 0).map(|(f, _)| *f).collect();
    if !flags.is_empty() && s.network != localgpt_sandbox::policy::NetworkPolicy::Allowlist {
        return Err(usage(format!("{} {} --network allowlist (or network = \"allowlist\" in the config file)", flags.join(", "), if flags.len() == 1 { "needs" } else { "need" })));
    }
    s.allow_domains.extend(args.allow_domain.iter().cloned());
    s.deny_domains.extend(args.deny_domain.iter().cloned());
    s.allow_cidrs.extend(args.allow_cidr.iter().cloned());
    s.allow_private_hosts.extend(args.allow_private_host.iter().cloned());
    if let Some(a) = &args.audit_log {
        s.audit_log = Some(absolutize(a, &cwd));
    }
    s.env.keep.extend(args.keep_env.iter().cloned());
    s.dangerously_allow_full_access |= args.dangerously_allow_full_access;
    s.force_workspace |= args.force_workspace;
    if let Some(r) = &args.workspace_root {
        s.workspace_root = Some(absolutize(r, &cwd));
    }
    let ws = match (&args.workspace, &s.workspace) {
        (Some(w), _) => absolutize(w, &cwd),
        (None, Some(w)) if w.as_os_str() != "." => w.clone(),
        _ => cwd,
    };
    Ok(localgpt_sandbox::config::build_sandbox_policy_for(&ws, &s, platform)?)
}

/// `sandbox run` on Windows: the experimental backend, when the user opted in (otherwise the
/// plan is refused as unconfined). One argument is a `cmd.exe` command.
///
/// # Errors
/// A failure with exit code 1 or 2 when nothing could be run.
#[cfg(windows)]
pub fn run_windows(args: RunArgs) -> Result<i32, Failure> {
    let policy = resolve_policy(&args.policy)?;
    let caps = localgpt_sandbox::detect_sandbox_capabilities();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let run_id = format!("{}-{nanos:08x}", std::process::id());
    let ctx = localgpt_sandbox::plan::RunContext {
        caller_env: localgpt_sandbox::plan::caller_env(),
        scratch: Some(std::env::temp_dir().join(format!("localgpt-sandbox-{run_id}"))),
        run_id: Some(run_id.clone()),
        ablate: localgpt_sandbox::ablation::requested(),
        ..Default::default()
    };
    let plan = localgpt_sandbox::make_plan(&policy, &caps, &ctx)?;
    if plan.windows.is_none() {
        return Err(Failure { code: 1, message: "unconfined runs (full-access mode) are not implemented on Windows; nothing was run".into() });
    }
    let argv: Vec<String> = args.cmd.iter().map(|a| a.to_str().map(str::to_string)).collect::<Option<_>>().ok_or_else(|| usage("the command is not valid Unicode"))?;
    if !args.json {
        for w in &plan.warnings {
            eprintln!("⚠ {}", localgpt_sandbox::text::escape_controls(w));
        }
        if !args.quiet {
            eprintln!("[sandbox] level {} (windows, experimental) — {}", plan.level, localgpt_sandbox::text::escape_controls(&argv.join(" ")));
        }
    }
    let r = localgpt_sandbox::windows::run::run(&plan, &argv, &run_id, !args.json)?;
    if args.json {
        let v = serde_json::json!({
            "platform": "windows",
            "level": plan.level,
            "exit_code": r.exit_code,
            "timed_out": r.timed_out,
            "stdout": String::from_utf8_lossy(&r.stdout),
            "stderr": String::from_utf8_lossy(&r.stderr),
            "stdout_dropped": r.stdout_dropped,
            "stderr_dropped": r.stderr_dropped,
            "duration_ms": r.duration_ms,
            "held": r.held,
            "protections": plan.protections,
            "warnings": plan.warnings,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else if !args.quiet {
        let why = if r.timed_out { format!(" (timed out after {} s: the whole job was terminated; to allow longer: --timeout SECS)", plan.timeout_secs) } else { String::new() };
        eprintln!("[sandbox] exit {}{why} in {} ms", r.exit_code, r.duration_ms);
        for (stream, n) in [("stdout", r.stdout_dropped), ("stderr", r.stderr_dropped)].into_iter().filter(|(_, n)| *n > 0) {
            eprintln!("⚠ {stream}: {n} bytes over the cap of {} were dropped (to keep more: --max-output BYTES)", plan.max_output_bytes);
        }
        for (from, to) in &r.held {
            eprintln!("⚠ {} appeared at a protected path during the run: held back at {}", from.display(), to.display());
        }
    }
    Ok(r.exit_code)
}

/// `sandbox status`.
///
/// # Errors
/// Failures building the default policy's plan.
pub fn status(args: StatusArgs) -> Result<i32, Failure> {
    let caps = localgpt_sandbox::detect_sandbox_capabilities();
    let policy = resolve_policy(&PolicyArgs::default())?;
    let ctx = localgpt_sandbox::plan::RunContext { caller_env: localgpt_sandbox::plan::caller_env(), ..Default::default() };
    let plan = localgpt_sandbox::make_plan(&policy, &caps, &ctx);
    if args.json {
        let v = render::status_json(&caps, &plan);
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", render::status_text(&caps, &plan));
    }
    Ok(0)
}

/// `sandbox explain`.
///
/// # Errors
/// Failures resolving the policy or building the plan.
pub fn explain(args: ExplainArgs) -> Result<i32, Failure> {
    let platform = match &args.platform {
        Some(p) => Platform::parse(p).map_err(|e| usage(e.to_string()))?,
        None => Platform::current(),
    };
    // (Denied paths that moved are followed on Unix, where runs record them.)
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut policy = resolve_policy_for(&args.policy, platform)?;
    #[cfg(unix)]
    if platform == Platform::current() {
        localgpt_sandbox::guard::denied::follow(&mut policy);
    }
    let caps = if platform == Platform::current() { localgpt_sandbox::detect_sandbox_capabilities() } else { localgpt_sandbox::detect::assumed_for(platform) };
    let ctx = localgpt_sandbox::plan::RunContext {
        caller_env: localgpt_sandbox::plan::caller_env(),
        scratch: Some(if platform == Platform::Windows && Platform::current() == Platform::Windows {
            std::env::temp_dir().join("localgpt-sandbox-XXXXXX")
        } else {
            PathBuf::from("/tmp/localgpt-sandbox-XXXXXX")
        }),
        ..Default::default()
    };
    let plan = localgpt_sandbox::make_plan(&policy, &caps, &ctx)?;
    if platform != Platform::current() && !args.json {
        println!("Plan for {platform}, made on {} (assumed capabilities: {}).\n", Platform::current(), render::backend_name(&caps));
    }
    if !args.paths.is_empty() {
        let cwd = std::env::current_dir().unwrap_or_default();
        let rules = localgpt_sandbox::why::PathRules::of(&plan);
        let found: Vec<_> = args
            .paths
            .iter()
            .map(|p| {
                // As the kernel resolves it: links followed where the path exists.
                let p = cwd.join(p);
                let p = std::fs::canonicalize(&p).unwrap_or(p);
                localgpt_sandbox::why::explain_path(&rules, &p, p.is_dir())
            })
            .collect();
        if args.json {
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "level": plan.level, "paths": found })).unwrap_or_default());
        } else {
            for e in &found {
                println!("{}", render::escape_lines(&e.text()));
            }
        }
        return Ok(0);
    }
    if args.json {
        let v = serde_json::json!({ "policy": policy, "capabilities": caps, "plan": render::plan_json(&plan) });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", render::explain_text(&policy, &plan));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<std::ffi::OsString> {
        v.iter().map(std::ffi::OsString::from).collect()
    }

    fn clap_run(v: &[&str]) -> Option<RunArgs> {
        match Cli::try_parse_from(os(v)).ok()?.command {
            Top::Sandbox(SandboxCmd::Run(r)) => Some(r),
            _ => None,
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2tb"), Ok(2 << 40));
        for bad in ["", "G", "1.5G", "-1", "10X", "99999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fast_run_parse_agrees_with_clap() {
        let fast_shapes: &[&[&str]] = &[
            &["localgpt", "sandbox", "run", "--", "echo hi"],
            &["localgpt", "sandbox", "run", "--quiet", "--level", "standard", "--workspace", "/w", "--", "/bin/true", "x"],
            &["localgpt", "sandbox", "run", "--json", "--level=full", "--timeout", "5", "--max-output=100", "--", "a", "--", "-b"],
            &["localgpt", "sandbox", "run", "--allow-read", "/a", "--allow-read=/b", "--allow-write", "/c", "--deny", "/d", "--keep-env", "X",
                "--keep-env=Y", "--mode", "read-only", "--require", "standard", "--", "cmd"],
            &["localgpt", "sandbox", "run", "--dangerously-allow-full-access", "--level", "none", "--", "x"],
            &["localgpt", "sandbox", "run", "--stdin", "pipe", "--", "x"],
            &["localgpt", "sandbox", "run", "--max-processes", "200", "--max-open-files=4096", "--max-file-size", "1G", "--max-memory=512MiB", "--", "x"],
            &["localgpt", "sandbox", "run", "--workspace-root", "/w", "--force-workspace", "--", "x"],
            &["/abs/path/localgpt", "sandbox", "run", "--workspace", "rel/dir", "--", "x", "y z"],
        ];
        for v in fast_shapes {
            let fast = fast_run_args(&os(v)).unwrap_or_else(|| panic!("fast path declined {v:?}"));
            assert_eq!(Some(fast), clap_run(v), "{v:?}");
        }
        // Shapes the fast path must hand to clap (which accepts or rejects them itself).
        let clap_shapes: &[&[&str]] = &[
            &["localgpt", "sandbox", "run", "echo"],
            &["localgpt", "sandbox", "run", "--"],
            &["localgpt", "sandbox", "run", "--help"],
            &["localgpt", "sandbox", "run", "-q", "--", "x"],
            &["localgpt", "sandbox", "run", "--level", "full", "--level", "standard", "--", "x"],
            &["localgpt", "sandbox", "run", "--json", "--json", "--", "x"],
            &["localgpt", "sandbox", "run", "--json=1", "--", "x"],
            &["localgpt", "sandbox", "run", "--timeout", "soon", "--", "x"],
            &["localgpt", "sandbox", "run", "--timeout", "-1", "--", "x"],
            &["localgpt", "sandbox", "run", "--workspace", "", "--", "x"],
            &["localgpt", "sandbox", "run", "--workspace", "--", "x"],
            &["localgpt", "sandbox", "run", "--unknown", "v", "--", "x"],
            &["localgpt", "sandbox", "run", "--level"],
            &["localgpt", "sandbox", "explain", "--", "x"],
            &["localgpt", "--version"],
            &["localgpt"],
        ];
        for v in clap_shapes {
            assert_eq!(fast_run_args(&os(v)), None, "{v:?}");
        }
        // Whatever the fast path accepts, clap parses identically.
        for v in fast_shapes.iter().chain(clap_shapes) {
            if let Some(f) = fast_run_args(&os(v)) {
                assert_eq!(Some(f), clap_run(v), "{v:?}");
            }
        }
    }
}
