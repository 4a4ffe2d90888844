//! `localgpt`: the CLI. The first thing `main` does is the `argv[0]` dispatch into the sandbox
//! helper, so that the same binary serves as `localgpt-sandbox`.

#[cfg(unix)]
mod cli;
#[cfg(unix)]
mod probe;
#[cfg(unix)]
mod render;
#[cfg(unix)]
mod selftest;

#[cfg(unix)]
use clap::Parser;

/// Elsewhere (Windows) there is no backend in this build: nothing is run unconfined.
#[cfg(not(unix))]
fn main() {
    eprintln!("localgpt: this build has no sandbox backend for {} (Linux and macOS only); refusing to run commands unconfined", std::env::consts::OS);
    std::process::exit(1);
}

#[cfg(unix)]
fn main() {
    localgpt_sandbox::dispatch();
    probe::dispatch();
    localgpt_sandbox::timing::stamp("parse");
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = match cli::fast_run_args(&args) {
        Some(run) => cli::Top::Sandbox(cli::SandboxCmd::Run(run)),
        None => cli::Cli::parse_from(args).command,
    };
    let outcome = match command {
        cli::Top::Sandbox(cli::SandboxCmd::Run(a)) => cli::run(a),
        cli::Top::Sandbox(cli::SandboxCmd::Status(a)) => cli::status(a),
        cli::Top::Sandbox(cli::SandboxCmd::Explain(a)) => cli::explain(a),
        cli::Top::Sandbox(cli::SandboxCmd::Test(a)) => selftest::test(&a),
        cli::Top::Sandbox(cli::SandboxCmd::Pending(a)) => cli::pending(a),
    };
    localgpt_sandbox::timing::stamp("exiting");
    localgpt_sandbox::timing::flush("cli");
    match outcome {
        Ok(code) => std::process::exit(code),
        Err(f) => {
            eprintln!("localgpt: {}", localgpt_sandbox::text::escape_controls(&f.message));
            std::process::exit(f.code);
        }
    }
}
