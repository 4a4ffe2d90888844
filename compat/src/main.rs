//! `localgpt-compat`: validate the corpus, run it as the current user, merge users' results into
//! the release-report section (see [`app`]). It runs commands through the sandbox on Unix only.

#[cfg(unix)]
mod app;

fn main() -> std::process::ExitCode {
    #[cfg(unix)]
    return app::main();
    #[cfg(not(unix))]
    {
        eprintln!("localgpt-compat runs the compatibility corpus through the sandbox, which this build has on Linux and macOS only");
        std::process::ExitCode::from(2)
    }
}
