//! An async agent host: runs 20 sandboxed commands at once on a tokio runtime, streams their
//! output line by line as it arrives, cancels two of them part-way, and prints every result.
//!
//! ```sh
//! cargo run -p localgpt-sandbox --features tokio --example tokio_host
//! ```
//!
//! The host calls `localgpt_sandbox::dispatch()` first thing: it is multithreaded, so each
//! run's helper is forked by the zygote, this binary started once as
//! `localgpt-sandbox-zygote`.

use std::time::{Duration, Instant};

use localgpt_sandbox::handle::{Command, Sandbox};
use tokio::io::AsyncBufReadExt;

const JOBS: usize = 20;
/// These two run long and are cancelled after half a second.
const CANCELLED: [usize; 2] = [3, 11];

fn main() {
    localgpt_sandbox::dispatch();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_time().build().expect("tokio runtime");
    std::process::exit(rt.block_on(host()));
}

async fn host() -> i32 {
    let dir = tempfile::tempdir_in("/var/tmp").expect("workspace");
    let policy = localgpt_sandbox::build_sandbox_policy(dir.path(), &Default::default()).expect("policy");
    let sandbox = Sandbox::new(policy).expect("sandbox");
    let start = Instant::now();
    let mut tasks = Vec::new();
    for job in 0..JOBS {
        let sandbox = sandbox.clone();
        tasks.push(tokio::spawn(async move {
            let script = if CANCELLED.contains(&job) {
                format!("echo job {job} starts; sleep 30; echo job {job} was not cancelled")
            } else {
                format!("for i in 1 2 3; do echo job {job} line $i; sleep 0.1; done; echo job {job} wrote >> out-{job}.txt")
            };
            let mut child = sandbox.spawn(&Command::shell(script)).expect("spawn");
            let mut lines = tokio::io::BufReader::new(child.stdout().expect("stdout")).lines();
            let token = child.cancel_token();
            if CANCELLED.contains(&job) {
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    token.cancel();
                });
            }
            let mut seen = 0;
            while let Ok(Some(line)) = lines.next_line().await {
                println!("  [{job:2}] {line}");
                seen += 1;
            }
            let r = child.wait_async().await.expect("result");
            (job, r, seen)
        }));
    }
    let mut cancelled = 0;
    let mut ok = 0;
    for t in tasks {
        let (job, r, seen) = t.await.expect("task");
        println!(
            "job {job:2}: exit {:3} cancelled={} level={} lines={seen} {:.0} ms",
            r.exit_code, r.cancelled, r.level, r.duration_ms
        );
        if r.cancelled {
            cancelled += 1;
        } else if r.exit_code == 0 && seen == 3 {
            ok += 1;
        }
    }
    println!("{JOBS} results: {ok} completed, {cancelled} cancelled, in {:.1} s", start.elapsed().as_secs_f64());
    i32::from(!(ok == JOBS - CANCELLED.len() && cancelled == CANCELLED.len()))
}
