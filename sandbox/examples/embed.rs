//! The library example of docs/library.md, compiled and run by `ci/test` without the `internals`
//! feature, so it can use only the documented API: run one command to the end, then write a
//! file through the same policy the way a file tool does.
//!
//! ```sh
//! cargo run -p localgpt-sandbox --example embed
//! ```

use std::io::Write;

fn main() {
    localgpt_sandbox::dispatch(); // first line: become the helper when argv[0] = localgpt-sandbox
    let dir = tempfile::tempdir_in("/var/tmp").expect("workspace");
    let settings = localgpt_sandbox::SandboxSettings::default();
    let policy = localgpt_sandbox::build_sandbox_policy(dir.path(), &settings).expect("policy");
    let result = localgpt_sandbox::run_sandboxed("echo hello from $(pwd)", &policy).expect("run");
    println!("{} {}", result.exit_code, result.stdout.trim());
    // Same policy for file tools: an opened file, checked (no symlink followed, /proc refused,
    // protected paths read-only).
    let mut f = policy.open_write("notes.txt".as_ref(), localgpt_sandbox::WriteMode::Truncate).expect("open");
    f.write_all(b"hello").expect("write");
    std::process::exit(result.exit_code);
}
