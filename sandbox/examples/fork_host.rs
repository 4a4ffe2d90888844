//! A single-threaded host that runs commands in a loop (`run_sandboxed`), as a simple agent does:
//! this process forks each run's helper itself, and from its second run at Standard on, the
//! command's process enforces a Landlock ruleset kept from an earlier run (while every rule still
//! leads where it did) instead of building its own. `ci/test` runs it, as root and as the
//! unprivileged user: at every run, checked from outside, a granted directory's file is read and
//! a file outside every grant is not (bare, it is); between two runs the granted directory is
//! moved away and another made at its path: the next runs read the new one and cannot read the
//! moved one (bare, they can); and the command has no descriptor above 2 (the kept ruleset's
//! stays with the helper). With `--time N` it instead prints what `/bin/true x` costs through
//! `run_argv` against bare, N interleaved runs (build it on two trees to compare them).
//!
//! ```sh
//! cargo run -p localgpt-sandbox --example fork_host [-- --time 300]
//! ```

use std::path::Path;
use std::time::Instant;

fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}

/// What `bash -c script` prints, bare.
fn bare(script: &str) -> String {
    let out = std::process::Command::new("bash").arg("-c").arg(script).output().expect("bare bash");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fail(msg: &str) -> ! {
    eprintln!("fork_host: FAILED: {msg}");
    std::process::exit(1)
}

fn main() {
    localgpt_sandbox::dispatch(); // first line: become the helper when argv[0] = localgpt-sandbox
    let args: Vec<String> = std::env::args().skip(1).collect();
    let time: Option<usize> = match args.as_slice() {
        [] => None,
        [t, n] if t == "--time" => Some(n.parse().expect("--time N")),
        _ => fail("usage: fork_host [--time N]"),
    };
    if localgpt_sandbox::detect_sandbox_capabilities().landlock.abi == 0 {
        println!("fork_host: skipped: no Landlock here (Standard is what it checks)");
        return;
    }
    // Every run's helper is forked from this process only while it has one thread.
    if threads() != 1 {
        fail(&format!("the host has {} threads: its runs would go through the zygote", threads()));
    }
    let base = tempfile::tempdir_in("/var/tmp").expect("scratch");
    let (ws, granted, moved, outside) = (base.path().join("ws"), base.path().join("granted"), base.path().join("moved"), base.path().join("outside"));
    for d in [&ws, &granted, &outside] {
        std::fs::create_dir(d).expect("mkdir");
    }
    std::fs::write(granted.join("in"), "first-granted\n").expect("write");
    std::fs::write(outside.join("secret"), "outside-secret\n").expect("write");
    let settings = localgpt_sandbox::SandboxSettings {
        level: localgpt_sandbox::policy::LevelSetting::parse("standard").expect("level"),
        extra_read: vec![granted.clone()],
        ..Default::default()
    };
    let policy = localgpt_sandbox::build_sandbox_policy(&ws, &settings).expect("policy");
    if let Some(n) = time {
        return timed(&policy, n);
    }
    let show = |p: &Path| format!("cat {}/* 2>/dev/null; true", p.display());
    // Bare, every probe escapes: both files read, and (below) the moved directory's.
    let both = format!("{}; {}", show(&granted), show(&outside));
    if bare(&both) != "first-granted\noutside-secret\n" {
        fail(&format!("bare, the probe does not read both files: {:?}", bare(&both)));
    }
    for run in 0..6 {
        if run == 3 {
            std::fs::rename(&granted, &moved).expect("move the granted directory away");
            std::fs::create_dir(&granted).expect("mkdir");
            std::fs::write(granted.join("in"), "second-granted\n").expect("write");
            let all = format!("{}; {}", show(&granted), show(&moved));
            if bare(&all) != "second-granted\nfirst-granted\n" {
                fail(&format!("bare, the probe does not read the new and the moved directory: {:?}", bare(&all)));
            }
        }
        let (script, want) = if run < 3 {
            (both.clone(), "first-granted\n")
        } else {
            (format!("{}; {}; {}", show(&granted), show(&moved), show(&outside)), "second-granted\n")
        };
        let r = localgpt_sandbox::run_sandboxed(&script, &policy).unwrap_or_else(|e| fail(&format!("run {run}: {e}")));
        if r.level != localgpt_sandbox::SandboxLevel::Standard {
            fail(&format!("run {run} ran at {}", r.level));
        }
        if r.stdout != want {
            fail(&format!("run {run}: the sandboxed probe printed {:?}, expected {want:?} (stderr {:?})", r.stdout, r.stderr));
        }
        // The kept ruleset's descriptor never reaches the command: `ls` sees fds 0-2 and its own.
        let fds = localgpt_sandbox::run_sandboxed("ls /proc/self/fd | tr '\\n' ' '", &policy).unwrap_or_else(|e| fail(&format!("run {run}: {e}")));
        if fds.stdout != "0 1 2 3 " {
            fail(&format!("run {run}: the command has the descriptors {:?}", fds.stdout));
        }
        // From outside: the files are as they were.
        if bare(&show(&outside)) != "outside-secret\n" {
            fail("the outside file changed");
        }
    }
    if threads() != 1 {
        fail("a thread of a run outlived it");
    }
    println!("fork_host: 12 runs at Standard from one thread: the granted directory read, the outside file not; after the move the new directory read, the moved one not; no descriptor above 2 in the command");
}

/// `/bin/true x` through `run_argv` and bare, `n` times each, interleaved, after a warm-up.
fn timed(policy: &localgpt_sandbox::SandboxPolicy, n: usize) {
    struct Discard;
    impl localgpt_sandbox::run::OutputSink for Discard {
        fn output(&mut self, _: localgpt_sandbox::run::Stream, _: &[u8]) {}
    }
    let opts = localgpt_sandbox::RunOptions::default();
    let argv = ["/bin/true", "x"];
    let sandboxed = || {
        let t = Instant::now();
        let r = localgpt_sandbox::run_argv(&argv, policy, &opts, &mut Discard).expect("run");
        assert_eq!(r.exit_code, 0);
        t.elapsed().as_secs_f64() * 1000.0
    };
    let bare = || {
        let t = Instant::now();
        assert!(std::process::Command::new("/bin/true").arg("x").status().expect("spawn").success());
        t.elapsed().as_secs_f64() * 1000.0
    };
    // The walk's records of a fresh workspace hold once it is 2 s old.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for _ in 0..5 {
        sandboxed();
        bare();
    }
    let (mut s, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        if i % 2 == 0 {
            s.push(sandboxed());
            b.push(bare());
        } else {
            b.push(bare());
            s.push(sandboxed());
        }
    }
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
    };
    let (s50, s99, b50, b99) = (q(&mut s, 0.5), q(&mut s, 0.99), q(&mut b, 0.5), q(&mut b, 0.99));
    println!("standard, {n} interleaved runs of /bin/true x from one thread, ms: run_argv p50 {s50:.2} p99 {s99:.2}; bare p50 {b50:.2} p99 {b99:.2}; added p50 {:.2} p99 {:.2}", s50 - b50, s99 - b99);
}
