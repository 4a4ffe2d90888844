//! What a run costs an agent host through a warm `Sandbox`, by hand: `/bin/true x` spawned and
//! waited for through one `handle::Sandbox` (made once) and bare (`std::process::Command`), each
//! `-n` times, interleaved, after a warm-up; prints p50 and p99 in ms and the difference. Every
//! spawn is made from a thread of its own, as in a multithreaded host (the zygote forks the
//! helper). Build it on two trees to compare them; `localgpt-latency` (bench/) is the gated
//! benchmark.
//!
//! ```sh
//! cargo run --release -p localgpt-sandbox --example warm_latency -- [-n 300] [--level standard]
//! ```

use std::time::Instant;

fn main() {
    localgpt_sandbox::dispatch(); // the helper and the zygote are this binary re-executed
    let mut args = std::env::args().skip(1);
    let (mut n, mut level) = (300usize, "standard".to_string());
    while let Some(a) = args.next() {
        match a.as_str() {
            "-n" => n = args.next().and_then(|v| v.parse().ok()).expect("-n N"),
            "--level" => level = args.next().expect("--level LEVEL"),
            _ => panic!("usage: warm_latency [-n N] [--level LEVEL]"),
        }
    }
    let ws = tempfile::tempdir_in("/var/tmp").expect("workspace");
    let settings = localgpt_sandbox::SandboxSettings { level: localgpt_sandbox::policy::LevelSetting::parse(&level).expect("level"), ..Default::default() };
    let policy = localgpt_sandbox::build_sandbox_policy(ws.path(), &settings).expect("policy");
    let sandbox = localgpt_sandbox::Sandbox::new(policy).expect("sandbox");
    let cmd = localgpt_sandbox::Command::new("/bin/true").arg("x");
    let sandboxed = || {
        let t = Instant::now();
        let r = sandbox.spawn(&cmd).and_then(|mut c| c.wait()).expect("run");
        assert_eq!(r.exit_code, 0, "{r:?}");
        t.elapsed().as_secs_f64() * 1000.0
    };
    let bare = || {
        let t = Instant::now();
        assert!(std::process::Command::new("/bin/true").arg("x").status().expect("spawn").success());
        t.elapsed().as_secs_f64() * 1000.0
    };
    let on_thread = |f: &(dyn Fn() -> f64 + Sync)| std::thread::scope(|s| s.spawn(f).join().expect("thread"));
    // The walk's records of a fresh workspace hold only once it is 2 s old (their racy window):
    // wait, so that every sample sees the same steady state.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for _ in 0..5 {
        on_thread(&sandboxed);
        on_thread(&bare);
    }
    let (mut s, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            s.push(on_thread(&sandboxed));
            b.push(on_thread(&bare));
        } else {
            b.push(on_thread(&bare));
            s.push(on_thread(&sandboxed));
        }
    }
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
    };
    let (s50, s99, b50, b99) = (q(&mut s, 0.5), q(&mut s, 0.99), q(&mut b, 0.5), q(&mut b, 0.99));
    println!("{level}, {n} interleaved runs of /bin/true x, ms: warm Sandbox p50 {s50:.2} p99 {s99:.2}; bare p50 {b50:.2} p99 {b99:.2}; added p50 {:.2} p99 {:.2}", s50 - b50, s99 - b99);
}
