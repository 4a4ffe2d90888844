//! `localgpt`: the CLI. The first thing `main` does is the `argv[0]` dispatch into the sandbox
//! helper, so that the same binary serves as `localgpt-sandbox`.

mod cli;
#[cfg(unix)]
mod exec;
#[cfg(unix)]
mod probe;
mod render;
#[cfg(unix)]
mod selftest;

/// Windows: `status` and `explain`; `run` through the experimental backend when the user opted
/// in (`localgpt_sandbox::windows`), refused otherwise; `test` and `pending` refuse. Nothing runs
/// unconfined.
#[cfg(not(unix))]
fn main() {
    let command = cli::parse(std::env::args_os().collect());
    let run_json = command.run_json();
    let outcome = match command {
        cli::Top::Sandbox(cli::SandboxCmd::Status(a)) => cli::status(a),
        cli::Top::Sandbox(cli::SandboxCmd::Explain(a)) => cli::explain(a),
        #[cfg(windows)]
        cli::Top::Sandbox(cli::SandboxCmd::Run(a)) => cli::run_windows(a),
        cli::Top::Sandbox(cmd) => Err(cli::Failure {
            code: 1,
            message: format!(
                "`{}` is not available on {} in this build (the backend is experimental); `localgpt sandbox status` and `explain` are",
                match cmd { cli::SandboxCmd::Run(_) => "run", cli::SandboxCmd::Test(_) => "test", cli::SandboxCmd::Pending(_) => "pending", _ => "this command" },
                std::env::consts::OS
            ),
        }),
    };
    match outcome {
        Ok(code) => std::process::exit(code),
        Err(f) => cli::fail(f, run_json),
    }
}

#[cfg(unix)]
fn main() {
    localgpt_sandbox::dispatch();
    probe::dispatch();
    localgpt_sandbox::timing::stamp("parse");
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = match cli::fast_run_args(&args) {
        Some(run) => cli::Top::Sandbox(cli::SandboxCmd::Run(run)),
        None => cli::parse(args),
    };
    let run_json = command.run_json();
    let outcome = match command {
        cli::Top::Sandbox(cli::SandboxCmd::Run(a)) => exec::run(a),
        cli::Top::Sandbox(cli::SandboxCmd::Status(a)) => cli::status(a),
        cli::Top::Sandbox(cli::SandboxCmd::Explain(a)) => cli::explain(a),
        cli::Top::Sandbox(cli::SandboxCmd::Test(a)) => selftest::test(&a),
        cli::Top::Sandbox(cli::SandboxCmd::Pending(a)) => exec::pending(a),
        cli::Top::Sandbox(cli::SandboxCmd::WalkService(a)) => exec::walk_service(&a.warm),
    };
    localgpt_sandbox::timing::stamp("exiting");
    localgpt_sandbox::timing::flush("cli");
    match outcome {
        Ok(code) => std::process::exit(code),
        Err(f) => cli::fail(f, run_json),
    }
}
