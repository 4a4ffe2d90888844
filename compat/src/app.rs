//! `localgpt-compat`: validate the corpus, run it as the current user, merge users' results into
//! the release-report section.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use compat::load::{load_causes, load_corpus};
use compat::report::{build_section, write_section};
use compat::results::UserResults;
use compat::runner::{run, RunConfig};
use compat::schema::Expect;

#[derive(Parser)]
#[command(name = "localgpt-compat", about = "Compatibility corpus: bare vs sandboxed")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Load and validate the corpus; print its size per group.
    Validate {
        /// The corpus directory.
        #[arg(long, default_value = "compat-commands")]
        corpus: PathBuf,
    },
    /// Print every command (group/name, fixture, expectation, run).
    List {
        /// The corpus directory.
        #[arg(long, default_value = "compat-commands")]
        corpus: PathBuf,
    },
    /// Run the corpus as the current user and write its results.
    Run {
        /// The corpus directory.
        #[arg(long, default_value = "compat-commands")]
        corpus: PathBuf,
        /// The localgpt binary (default: $LOCALGPT_BIN, else target/debug/localgpt).
        #[arg(long)]
        localgpt: Option<PathBuf>,
        /// Work root (default `/var/tmp/lgcompat-<user>`; wiped first).
        #[arg(long)]
        work_root: Option<PathBuf>,
        /// Comma-separated levels (default: every available level).
        #[arg(long, value_delimiter = ',')]
        levels: Vec<String>,
        /// Parallel commands (default: number of CPUs).
        #[arg(long, short)]
        jobs: Option<usize>,
        /// Only commands whose group/name matches this regex.
        #[arg(long)]
        filter: Option<String>,
        /// Keep the run directories of failing commands under `<work-root>/failed`.
        #[arg(long)]
        keep_failed: bool,
        /// Wait this long (ms) before each sandboxed run, so that every run falls in another
        /// second than the bare one: a command whose workspace or output depends on the clock
        /// (an archive's member times, a log's start time) then fails every time instead of now
        /// and then, and can be fixed or declared `unstable`. Off by default (and in CI).
        #[arg(long, default_value_t = 0)]
        clock_gap_ms: u64,
        /// Progress bar on (default: when stderr is a terminal).
        #[arg(long, conflicts_with = "no_progress")]
        progress: bool,
        /// Progress bar off.
        #[arg(long)]
        no_progress: bool,
        /// Results file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Merge per-user results into target/release-report/sections/compat.json (+ raw compat.json).
    Report {
        /// The corpus directory (for causes.yaml).
        #[arg(long, default_value = "compat-commands")]
        corpus: PathBuf,
        /// Output directory.
        #[arg(long, default_value = "target/release-report")]
        out_dir: PathBuf,
        /// User kinds that must be present (root, unprivileged); a missing one fails the gate.
        #[arg(long, value_delimiter = ',', default_value = "root,unprivileged")]
        expect_users: Vec<String>,
        /// Results files written by `run`.
        #[arg(required = true)]
        results: Vec<PathBuf>,
    },
}

pub fn main() -> ExitCode {
    match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("localgpt-compat: {e}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> Result<ExitCode, String> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Validate { corpus } => {
            let c = load_corpus(&corpus).map_err(|e| e.to_string())?;
            load_causes(&corpus, &c).map_err(|e| e.to_string())?;
            let mut total = (0, 0);
            for g in &c.groups {
                let s = g.commands.iter().filter(|c| c.expect == Expect::Succeed).count();
                let d = g.commands.len() - s;
                total.0 += s;
                total.1 += d;
                println!("{:<12} {:>4} must succeed {:>4} must be denied  {}", g.id, s, d, g.title);
            }
            println!("{:<12} {:>4} must succeed {:>4} must be denied  fixtures: {}", "total", total.0, total.1, c.fixtures.join(", "));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::List { corpus } => {
            let c = load_corpus(&corpus).map_err(|e| e.to_string())?;
            for cmd in c.commands() {
                println!("{}/{}\t{}\t{:?}\t{}", cmd.group, cmd.name, cmd.fixture, cmd.expect, cmd.run.replace('\n', "⏎"));
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run { corpus, localgpt, work_root, levels, jobs, filter, keep_failed, clock_gap_ms, progress, no_progress, out } => {
            let c = load_corpus(&corpus).map_err(|e| e.to_string())?;
            let localgpt = localgpt
                .or_else(|| std::env::var_os("LOCALGPT_BIN").filter(|v| !v.is_empty()).map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from("target/debug/localgpt"));
            let localgpt = std::fs::canonicalize(&localgpt).map_err(|e| format!("{}: {e}", localgpt.display()))?;
            let corpus = std::fs::canonicalize(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
            let user = compat::runner::user_name();
            let work_root = work_root.unwrap_or_else(|| PathBuf::from(format!("/var/tmp/lgcompat-{user}")));
            let filter = filter.map(|f| regex::Regex::new(&f)).transpose().map_err(|e| e.to_string())?;
            let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            let cfg = RunConfig {
                corpus_dir: corpus,
                localgpt,
                work_root,
                levels,
                jobs,
                filter,
                keep_failed,
                clock_gap: std::time::Duration::from_millis(clock_gap_ms),
                progress: if progress { Some(true) } else if no_progress { Some(false) } else { None },
                command_line: std::env::args().collect::<Vec<_>>().join(" "),
            };
            let r = run(cfg, &c).map_err(|e| e.to_string())?;
            print_summary(&r);
            if let Some(d) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
            let json = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
            std::fs::write(&out, json + "\n").map_err(|e| format!("{}: {e}", out.display()))?;
            eprintln!("compat: results written to {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Report { corpus, out_dir, expect_users, results } => {
            let c = load_corpus(&corpus).map_err(|e| e.to_string())?;
            let causes = load_causes(&corpus, &c).map_err(|e| e.to_string())?;
            let mut all = Vec::new();
            for p in &results {
                let t = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                let r: UserResults = serde_json::from_str(&t).map_err(|e| format!("{}: {e}", p.display()))?;
                all.push(r);
            }
            let users: Vec<&str> = expect_users.iter().map(String::as_str).collect();
            let s = build_section(&all, &causes, &users);
            write_section(&out_dir, &s, &all).map_err(|e| format!("{}: {e}", out_dir.display()))?;
            println!("{}", s.markdown);
            eprintln!("compat: section written to {}", out_dir.join("sections/compat.json").display());
            Ok(if s.gate.passed { ExitCode::SUCCESS } else { ExitCode::from(3) })
        }
    }
}

fn print_summary(r: &UserResults) {
    use compat::compare::Outcome;
    for level in &r.levels {
        let cases: Vec<_> = r.cases.iter().filter(|c| c.level == *level).collect();
        let n = |o: Outcome| cases.iter().filter(|c| c.outcome == o).count();
        let (p, f, s) = (n(Outcome::Pass), n(Outcome::Fail), cases.iter().filter(|c| c.outcome == Outcome::Skip && c.expect == Expect::Succeed).count());
        let denom = p + f;
        let rate = compat::report::rate(p, denom);
        eprintln!(
            "compat: {level} as {}: pass rate {rate:.2} % ({p} pass, {f} fail, {s} skipped); denied ok {}, known degraded {}, denial failures {}",
            r.user,
            n(Outcome::DeniedOk),
            n(Outcome::DeniedDegraded),
            n(Outcome::DeniedFail)
        );
        for c in cases.iter().filter(|c| matches!(c.outcome, Outcome::Fail | Outcome::DeniedFail)) {
            eprintln!("  FAIL {}/{} [{}]: {}", c.group, c.name, level, c.cause);
        }
    }
    eprintln!("compat: wall time {:.1} s with {} job(s)", r.wall_seconds, r.jobs);
}
