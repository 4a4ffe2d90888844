//! The Linux implementation of `localgpt-macro-bench` (see the binary's docs).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use localgpt_bench::host::{bwrap_prefix, python3, sandlock_prefix, sh, which, Scratch};
use localgpt_bench::paired::{attribute, paired_ratios, summarize, GOAL};
use localgpt_bench::stats::{r3, Rng};
use serde_json::{json, Value};

/// The flag this tool is re-executed with for the Landlock control.
const LANDLOCK_EXEC: &str = "--landlock-exec";
/// The flag this tool is re-executed with for the seccomp control.
const SECCOMP_EXEC: &str = "--seccomp-exec";

struct Workload {
    name: &'static str,
    what: &'static str,
    /// Tools it needs on PATH; a missing one skips the workload (listed).
    needs: &'static [&'static str],
    /// Directory under the scratch root, made once by [`setup`] (workloads on the same data
    /// share it).
    dir: &'static str,
    /// bash, bare, before every measured run (not timed).
    prepare: &'static str,
    /// bash, measured.
    script: String,
    /// Part of `--quick` (CI's release report). The two longest workloads are not: with every
    /// variant and round they took two thirds of the quick run (about 8 of 13 minutes on the
    /// 2-core CI machine), which CI's 90 minutes no longer afford; `--full` and `--only` run them.
    quick: bool,
}

/// A synthetic repository: `dirs` × `per` text files of 40 lines, committed.
fn repo_setup(py: &str, dirs: usize, per: usize) -> String {
    format!(
        r#"{py} - <<'PY'
import os
for d in range({dirs}):
    os.makedirs(f"src/m{{d:03}}", exist_ok=True)
    for f in range({per}):
        with open(f"src/m{{d:03}}/f{{f:03}}.txt", "w") as h:
            h.write("".join(f"line {{i}} of module {{d}} file {{f}}: value_{{(d * 31 + f * 7 + i) % 9973}}\n" for i in range(40)))
PY
git init -q . && git add -A && git -c user.name=bench -c user.email=bench@localhost commit -qm init"#
    )
}

/// The bash (run bare, once) that makes a workload directory; `None` for an unknown one.
fn setup(dir: &str, py: &str) -> Option<String> {
    let c_project = r##"for i in $(seq 1 40); do
  { echo "#include <stdio.h>"; for j in $(seq 1 30); do echo "int f${i}_${j}(int x) { int s = 0; for (int k = 0; k < x; k++) s += k * ${j} ^ (s >> 3); return s; }"; done; } > m$i.c
done
echo 'int main(void) { return 0; }' > main.c
printf 'OBJS := $(patsubst %%.c,%%.o,$(wildcard *.c))\nCFLAGS := -O2\nprog: $(OBJS)\n\t$(CC) -o $@ $^\nclean:\n\trm -f *.o prog\n' > Makefile"##;
    // 20 modules of 100 small generic functions: a clean build takes ~10 s here, an edit of one
    // module ~1 s (a smaller crate rebuilds in 0.1 s, which measures cargo's start, not rustc).
    let crate_nodeps = r#"cargo init -q --lib --vcs none --name macro_nodeps . && : > src/lib.rs && for i in $(seq 1 20); do
  { for j in $(seq 1 100); do echo "pub fn f$j(v: &[u64]) -> Vec<String> { v.iter().filter(|x| *x % $j == 0).map(|x| format!(\"{x}-{}\", x.wrapping_mul($j))).collect() }"; done; } > src/m$i.rs
  echo "pub mod m$i;" >> src/lib.rs
done && cargo build --offline -q"#;
    let crate_deps = r#"cargo init -q --lib --vcs none --name macro_deps . && printf 'serde = { version = "1", features = ["derive"] }\nserde_json = "1"\nlibc = "0.2"\n' >> Cargo.toml && cargo generate-lockfile --offline -q && cargo fetch --offline -q"#;
    Some(match dir {
        "empty" => String::new(),
        "repo" => repo_setup(py, 200, 100),
        "crate-nodeps" => crate_nodeps.into(),
        "crate-deps" => crate_deps.into(),
        "c-project" => c_project.into(),
        _ => return None,
    })
}

fn workloads(py: &str) -> Vec<Workload> {
    vec![
        Workload {
            name: "find-usr",
            what: "find /usr -type f | wc -l (a directory walk)",
            needs: &["find"],
            dir: "empty",
            prepare: "",
            script: "find /usr -type f 2>/dev/null | wc -l".into(),
            quick: true,
        },
        Workload {
            name: "git-grep",
            what: "git grep in a 20 000-file repository (3 searches)",
            needs: &["git", "python3"],
            dir: "repo",
            prepare: "",
            script: "for i in 1 2 3; do git grep -c 'value_6[0-9]7' >/dev/null; done".into(),
            quick: true,
        },
        Workload {
            name: "git-status",
            what: "git status in a 20 000-file repository (5 times)",
            needs: &["git", "python3"],
            dir: "repo",
            prepare: "",
            script: "for i in 1 2 3 4 5; do git status --porcelain >/dev/null; done".into(),
            quick: true,
        },
        Workload {
            name: "cargo-incremental",
            what: "an incremental cargo build of a 20-module crate (one module edited)",
            needs: &["cargo"],
            dir: "crate-nodeps",
            prepare: "echo \"pub fn edited_$(date +%s%N)() -> u64 { 1 }\" >> src/m1.rs",
            script: "cargo build --offline -q -j2".into(),
            quick: true,
        },
        Workload {
            name: "cargo-clean-deps",
            what: "a clean cargo build of a crate with dependencies (serde, serde_json, libc)",
            needs: &["cargo"],
            dir: "crate-deps",
            prepare: "rm -rf target",
            script: "cargo build --offline -q -j2".into(),
            quick: false,
        },
        Workload {
            name: "python-imports",
            what: "an import-heavy Python start (10 starts importing json, asyncio, email, http, unittest, xml, decimal, sqlite3, …)",
            needs: &["python3"],
            dir: "empty",
            prepare: "",
            script: format!(
                "for i in $(seq 10); do {py} -c 'import json, asyncio, email.parser, http.client, unittest, xml.dom.minidom, decimal, argparse, logging, sqlite3, csv, subprocess'; done"
            ),
            quick: true,
        },
        Workload {
            name: "make-j2",
            what: "make -j2 of a 41-file C project (after make clean)",
            needs: &["make", "gcc"],
            dir: "c-project",
            prepare: "make -s clean",
            script: "make -s -j2".into(),
            quick: false,
        },
    ]
}

struct Opts {
    rounds: usize,
    mode: &'static str,
    bin: PathBuf,
    out: PathBuf,
    only: Option<Vec<String>>,
    bwrap: bool,
    sandlock: Option<PathBuf>,
    seed: u64,
}

fn opts() -> Result<Opts, String> {
    let exe_dir = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)).unwrap_or_default();
    let mut o = Opts {
        rounds: 10,
        mode: "full",
        bin: exe_dir.join("localgpt"),
        out: std::env::var_os("LOCALGPT_REPORT_DIR").filter(|d| !d.is_empty()).map_or_else(|| PathBuf::from("target/release-report"), PathBuf::from),
        only: None,
        bwrap: true,
        sandlock: localgpt_bench::host::sandlock(&exe_dir),
        seed: 0x6d61_6372,
    };
    let mut rounds_set = false;
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut v = || a.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--quick" => o.mode = "quick",
            "--full" => o.mode = "full",
            "--rounds" => {
                o.rounds = v()?.parse().map_err(|e| format!("--rounds: {e}"))?;
                rounds_set = true;
            }
            "--bin" => o.bin = PathBuf::from(v()?),
            "--out" => o.out = PathBuf::from(v()?),
            "--only" => o.only = Some(v()?.split(',').map(str::to_string).collect()),
            "--no-bwrap" => o.bwrap = false,
            "--sandlock" => o.sandlock = Some(PathBuf::from(v()?)),
            "--no-sandlock" => o.sandlock = None,
            "--seed" => o.seed = v()?.parse().map_err(|e| format!("--seed: {e}"))?,
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    if !rounds_set && o.mode == "quick" {
        o.rounds = 3;
    }
    if o.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    Ok(o)
}

/// Applies a one-rule Landlock ruleset (`/`, every filesystem right this kernel handles) and
/// execs `argv`: the Landlock control. Never returns.
fn landlock_exec(argv: &[String]) -> ! {
    use landlock::{Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI};
    let all = AccessFs::from_all(ABI::V5);
    let root = PathFd::new("/").unwrap_or_else(|e| {
        eprintln!("localgpt-macro-bench: open /: {e}");
        std::process::exit(2)
    });
    let status = Ruleset::default()
        .handle_access(all)
        .and_then(|r| r.create())
        .and_then(|r| r.add_rule(PathBeneath::new(root, all)))
        .and_then(|r| r.restrict_self());
    match status {
        Ok(s) if s.ruleset != RulesetStatus::NotEnforced => {}
        Ok(_) => {
            eprintln!("localgpt-macro-bench: Landlock is not enforced on this kernel");
            std::process::exit(2)
        }
        Err(e) => {
            eprintln!("localgpt-macro-bench: Landlock control: {e}");
            std::process::exit(2)
        }
    }
    exec(argv)
}

/// Installs a one-instruction seccomp filter that allows every syscall (with `no_new_privs`)
/// and execs `argv`: the seccomp control. Never returns.
fn seccomp_exec(argv: &[String]) -> ! {
    let allow = [libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW }];
    let prog = libc::sock_fprog { len: 1, filter: allow.as_ptr().cast_mut() };
    // SAFETY: prctl with integer arguments; seccomp(2) with a program that outlives the call.
    let rc = unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            -1
        } else {
            libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog as *const libc::sock_fprog)
        }
    };
    if rc != 0 {
        eprintln!("localgpt-macro-bench: seccomp control: {}", std::io::Error::last_os_error());
        std::process::exit(2)
    }
    exec(argv)
}

fn exec(argv: &[String]) -> ! {
    use std::os::unix::process::CommandExt;
    let Some((prog, args)) = argv.split_first() else { std::process::exit(2) };
    let e = Command::new(prog).args(args).exec();
    eprintln!("localgpt-macro-bench: exec {prog}: {e}");
    std::process::exit(127)
}

/// How a variant runs the wrapped script.
enum How {
    /// `localgpt sandbox run --level L` (a level: attributed to the controls).
    Level(String),
    /// This argv prefix, then `bash -c` (bare, the controls).
    Prefix(Vec<String>),
    /// bubblewrap, its binds naming the workload's directory.
    Bwrap(PathBuf),
    /// Sandlock `--no-supervisor`, the directory writable.
    Sandlock(PathBuf),
}

struct Variant {
    id: String,
    label: String,
    how: How,
}

impl Variant {
    /// bubblewrap or Sandlock: context, not what is measured.
    fn is_peer(&self) -> bool {
        matches!(self.how, How::Bwrap(_) | How::Sandlock(_))
    }

    fn new(id: &str, label: &str, how: How) -> Variant {
        Variant { id: id.into(), label: label.into(), how }
    }

    /// The command for a run in `dir`.
    fn command(&self, bin: &Path, dir: &Path, toolchains: &[PathBuf], script: &str) -> Command {
        let w = wrapped(script);
        let prefix = match &self.how {
            How::Level(l) => {
                let mut c = Command::new(bin);
                c.args(["sandbox", "run", "--quiet", "--level", l, "--workspace"]).arg(dir).args(["--", &w]);
                return c;
            }
            How::Prefix(p) => p.clone(),
            How::Bwrap(b) => bwrap_prefix(b, dir, toolchains),
            How::Sandlock(s) => sandlock_prefix(s, dir, true, toolchains, &[PathBuf::from("/dev/null"), PathBuf::from("/tmp")]),
        };
        let mut c = Command::new(&prefix[0]);
        c.args(&prefix[1..]).args(["bash", "-c", &w]);
        c
    }
}

/// One measured run: inside wall, inside CPU (user + sys), end-to-end wall, in seconds.
#[derive(Clone, Copy)]
struct Sample {
    inside: f64,
    cpu: f64,
    e2e: f64,
}

fn wrapped(script: &str) -> String {
    format!("TIMEFORMAT='__LGT %R %U %S'; time ( {script} ) >/dev/null; echo \"__LGRC $?\" >&2")
}

fn parse_run(stderr: &str) -> Result<(f64, f64), String> {
    let rc = stderr.lines().rev().find_map(|l| l.strip_prefix("__LGRC ")).map(str::trim);
    if rc != Some("0") {
        let tail: String = stderr.chars().rev().take(600).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(format!("workload exit {}: {}", rc.unwrap_or("unknown"), tail.trim()));
    }
    let t = stderr.lines().rev().find_map(|l| l.strip_prefix("__LGT ")).ok_or("no timing line")?;
    let n: Vec<f64> = t.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    if n.len() != 3 {
        return Err(format!("bad timing line {t:?}"));
    }
    Ok((n[0], n[1] + n[2]))
}

fn run_one(o: &Opts, v: &Variant, dir: &Path, toolchains: &[PathBuf], script: &str) -> Result<Sample, String> {
    let mut c = v.command(&o.bin, dir, toolchains, script);
    c.current_dir(dir).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).env_remove("CARGO_TARGET_DIR");
    let t0 = Instant::now();
    let out = c.output().map_err(|e| format!("spawn: {e}"))?;
    let e2e = t0.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    let (inside, cpu) = parse_run(&err)?;
    if !out.status.success() {
        return Err(format!("{} exited {}: {}", v.id, out.status, err.trim()));
    }
    Ok(Sample { inside, cpu, e2e })
}

fn bash_bare(dir: &Path, script: &str) -> Result<(), String> {
    if script.is_empty() {
        return Ok(());
    }
    let out = Command::new("bash").args(["-c", script]).current_dir(dir).env_remove("CARGO_TARGET_DIR").output().map_err(|e| format!("bash: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{script:.60}…: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(LANDLOCK_EXEC) => landlock_exec(&args[2..]),
        Some(SECCOMP_EXEC) => seccomp_exec(&args[2..]),
        _ => {}
    }
    match bench() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("localgpt-macro-bench: {e}");
            std::process::exit(2);
        }
    }
}

#[allow(clippy::too_many_lines)]
fn bench() -> Result<bool, String> {
    let o = opts()?;
    let started = Instant::now();
    let bin = std::fs::canonicalize(&o.bin).map_err(|e| format!("{}: {e} (build with cargo build --release, or pass --bin)", o.bin.display()))?;
    let o = Opts { bin, ..o };
    let status: Value = serde_json::from_str(&sh(&o.bin.to_string_lossy(), &["sandbox", "status", "--json"]).ok_or("`localgpt sandbox status --json` failed")?)
        .map_err(|e| format!("status JSON: {e}"))?;
    let rank = |l: &str| ["full", "standard", "minimal"].iter().position(|x| *x == l);
    let mut levels: Vec<String> = status["available_levels"]
        .as_array()
        .map(|a| a.iter().filter_map(|l| l.as_str()).filter(|l| rank(l).is_some()).map(String::from).collect())
        .unwrap_or_default();
    levels.sort_by_key(|l| rank(l));
    if levels.is_empty() {
        return Err("no sandbox level is available on this machine".into());
    }
    // Whether each level's Landlock ruleset checks every open against its rules: it does when it
    // handles reads (Standard); Full confines reads with its fresh root and handles only writes
    // and execution, so its opens skip Landlock's path walk (`sandbox explain` lists the rights).
    let checks_opens: BTreeMap<String, bool> = levels
        .iter()
        .map(|l| {
            let handled = sh(&o.bin.to_string_lossy(), &["sandbox", "explain", "--level", l]).unwrap_or_default();
            let reads = handled.lines().find(|x| x.contains("handled fs rights:")).is_some_and(|x| x.contains("read_file"));
            (l.clone(), reads)
        })
        .collect();
    let py = python3().map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|| "python3".into());
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?.to_string_lossy().into_owned();

    let root = PathBuf::from(format!("/var/tmp/localgpt-macro-{}", std::process::id()));
    let _scratch = Scratch(root.clone());
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    // Read-only for the peers (bubblewrap, Sandlock), as our default policy grants them: the
    // toolchains and git's user configuration (git refuses to run when it exists but cannot be read).
    let toolchains: Vec<PathBuf> = [".cargo", ".rustup", ".gitconfig", ".config/git"].iter().map(|d| home.join(d)).filter(|p| p.exists()).collect();

    let mut variants = vec![Variant::new("bare", "bare", How::Prefix(vec!["env".into()]))];
    for l in &levels {
        variants.push(Variant::new(l, &format!("localgpt {l}"), How::Level(l.clone())));
    }
    let mut notes = Vec::new();
    if status["landlock"]["abi"].as_u64().is_some_and(|a| a > 0) {
        variants.push(Variant::new("landlock-control", "Landlock control (one rule: / with every right)", How::Prefix(vec![me.clone(), LANDLOCK_EXEC.into()])));
    } else {
        notes.push("Landlock control not run: no Landlock on this kernel".to_string());
    }
    variants.push(Variant::new("seccomp-control", "seccomp control (one instruction: allow)", How::Prefix(vec![me.clone(), SECCOMP_EXEC.into()])));
    match (o.bwrap, which("bwrap")) {
        (true, Some(b)) => variants.push(Variant::new("bwrap", "bubblewrap --unshare-all", How::Bwrap(b))),
        (true, None) => notes.push("bubblewrap not installed: no bubblewrap variant".into()),
        (false, _) => notes.push("bubblewrap variant off (--no-bwrap)".into()),
    }
    match &o.sandlock {
        Some(s) => variants.push(Variant::new("sandlock-nosup", "Sandlock --no-supervisor", How::Sandlock(s.clone()))),
        None => notes.push("Sandlock not found (ci/bench-quick builds it into target/peers): no Sandlock variant".into()),
    }

    // Set up each workload's directory once; a missing tool or a failed setup skips it (listed).
    let mut work: Vec<(Workload, PathBuf)> = Vec::new();
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut set_up: BTreeMap<&str, Result<(), String>> = BTreeMap::new();
    for w in workloads(&py) {
        match o.only.as_ref().map(|only| only.iter().any(|n| n == w.name)) {
            Some(false) => continue,
            None if o.mode == "quick" && !w.quick => {
                notes.push(format!("{} not run in quick mode (one of the two longest workloads); `--full` or `--only {}` runs it", w.name, w.name));
                continue;
            }
            _ => {}
        }
        if let Some(t) = w.needs.iter().find(|t| which(t).is_none()) {
            skipped.push((w.name.into(), format!("{t} is not installed")));
            continue;
        }
        let dir = root.join(w.dir);
        let r = set_up.entry(w.dir).or_insert_with(|| {
            eprintln!("== setup {}", w.dir);
            let script = setup(w.dir, &py).ok_or_else(|| format!("no setup for directory {}", w.dir))?;
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display())).and_then(|()| bash_bare(&dir, &script))
        });
        match r {
            Ok(()) => work.push((w, dir)),
            Err(e) => skipped.push((w.name.into(), format!("setup failed: {e}"))),
        }
    }
    if work.is_empty() {
        return Err(format!("no workload could run: {skipped:?}"));
    }

    // Rounds: round 0 warms caches and is discarded. In quick mode it is lighter: every workload
    // once bare (what warms is the workload's: the page cache of its files, git's index, cargo's
    // target directory) and every variant once on the first workload (its own binaries and
    // caches, e.g. root's cached scan of /etc); full mode warms every pair.
    let light_warmup = o.mode == "quick";
    let mut rng = Rng(o.seed | 1);
    // samples[workload][variant][round]
    let mut samples: Vec<Vec<Vec<Option<Sample>>>> = vec![vec![Vec::new(); variants.len()]; work.len()];
    let mut failures: Vec<String> = Vec::new();
    // A peer that fails here leaves its cells empty and is listed; it does not fail the bench
    // (what is measured is our overhead; the peers are context).
    let mut peer_failures: Vec<String> = Vec::new();
    for round in 0..=o.rounds {
        eprintln!("== round {round}/{}{}", o.rounds, if round == 0 { " (warm-up, discarded)" } else { "" });
        for (wi, (w, dir)) in work.iter().enumerate() {
            let mut order: Vec<usize> = (0..variants.len()).collect();
            rng.shuffle(&mut order);
            for vi in order {
                if round == 0 && light_warmup && wi > 0 && vi != 0 {
                    continue;
                }
                let v = &variants[vi];
                bash_bare(dir, w.prepare).map_err(|e| format!("{} prepare: {e}", w.name))?;
                let r = run_one(&o, v, dir, &toolchains, &w.script);
                if round == 0 {
                    if let Err(e) = &r {
                        let list = if v.is_peer() { &mut peer_failures } else { &mut failures };
                        list.push(format!("{} / {} (warm-up): {e}", w.name, v.id));
                    }
                    continue;
                }
                match r {
                    Ok(s) => samples[wi][vi].push(Some(s)),
                    Err(e) => {
                        let list = if v.is_peer() { &mut peer_failures } else { &mut failures };
                        list.push(format!("{} / {} round {round}: {e}", w.name, v.id));
                        samples[wi][vi].push(None);
                    }
                }
            }
        }
    }

    // Analysis.
    let all_variants = &variants;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Paired ratios against the bare run of the same round: min / median / max over {} rounds ({} mode; a warm-up round discarded{}). *Inside*: the work itself, timed by bash in the sandbox; *end to end*: spawn to exit (start-up and the review after the run included). Goal: ≤ {GOAL}× inside at every level.\n",
        o.rounds,
        o.mode,
        if light_warmup { ": every workload bare and every variant on the first workload" } else { "" }
    );
    let mut figures = serde_json::Map::new();
    let mut goals_met = 0usize;
    let mut goals_total = 0usize;
    for (wi, (w, _)) in work.iter().enumerate() {
        let col = |vi: usize, f: fn(&Sample) -> f64| -> Vec<Option<f64>> { samples[wi][vi].iter().map(|s| s.map(|s| f(&s))).collect() };
        let bare_in = col(0, |s| s.inside);
        let bare_cpu = col(0, |s| s.cpu);
        let bare_e2e = col(0, |s| s.e2e);
        let med = |v: &[Option<f64>]| localgpt_bench::stats::median(&v.iter().flatten().copied().collect::<Vec<_>>());
        let ratio = |vi: usize, f: fn(&Sample) -> f64, base: &[Option<f64>]| summarize(&paired_ratios(base, &col(vi, f)));
        let _ = writeln!(md, "### {} — {}\n", w.name, w.what);
        let _ = writeln!(md, "| variant | median inside (s) | inside ratio min / median / max | CPU ratio (median) | end-to-end ratio (median) |");
        let _ = writeln!(md, "|---|---:|---:|---:|---:|");
        let mut vj = serde_json::Map::new();
        let mut medians: BTreeMap<String, f64> = BTreeMap::new();
        for (vi, v) in all_variants.iter().enumerate() {
            let inside = ratio(vi, |s| s.inside, &bare_in);
            let cpu = ratio(vi, |s| s.cpu, &bare_cpu);
            let e2e = ratio(vi, |s| s.e2e, &bare_e2e);
            if let Some(r) = &inside {
                medians.insert(v.id.clone(), r.median);
            }
            let fmt3 = |r: &Option<localgpt_bench::paired::RatioSummary>| r.as_ref().map_or("—".into(), |r| format!("{:.3}", r.median));
            let _ = writeln!(
                md,
                "| {} | {:.3} | {} | {} | {} |",
                v.label,
                med(&col(vi, |s| s.inside)),
                inside.as_ref().map_or("—".into(), |r| format!("{:.3} / **{:.3}** / {:.3}", r.min, r.median, r.max)),
                fmt3(&cpu),
                fmt3(&e2e),
            );
            vj.insert(
                v.id.clone(),
                json!({"label": v.label, "median_inside_s": r3(med(&col(vi, |s| s.inside))), "median_e2e_s": r3(med(&col(vi, |s| s.e2e))),
                       "inside_ratio": inside, "cpu_ratio": cpu, "e2e_ratio": e2e,
                       "failed_runs": samples[wi][vi].iter().filter(|s| s.is_none()).count()}),
            );
        }
        let mut attr = serde_json::Map::new();
        let _ = writeln!(md);
        for l in &levels {
            let Some(&m) = medians.get(l) else { continue };
            let a = attribute(m, checks_opens.get(l).copied().unwrap_or(true), medians.get("landlock-control").copied(), medians.get("seccomp-control").copied());
            goals_total += 1;
            if a.within_goal {
                goals_met += 1;
                let _ = writeln!(md, "- {l}: {m:.3}× — goal met");
            } else {
                let _ = writeln!(md, "- {l}: {m:.3}× — goal **not met**: {}", a.causes.join("; "));
            }
            attr.insert(l.clone(), serde_json::to_value(&a).unwrap_or(Value::Null));
        }
        let _ = writeln!(md);
        figures.insert(w.name.into(), json!({"what": w.what, "script": w.script, "prepare": w.prepare, "variants": vj, "levels": attr}));
    }
    if !skipped.is_empty() {
        let _ = writeln!(md, "Skipped ({}): {}\n", skipped.len(), skipped.iter().map(|(n, r)| format!("{n} ({r})")).collect::<Vec<_>>().join(", "));
    }
    for n in &notes {
        let _ = writeln!(md, "Note: {n}\n");
    }
    if !peer_failures.is_empty() {
        let _ = writeln!(md, "Peer runs that failed ({}; their cells are empty, the bench does not fail for them):\n", peer_failures.len());
        for f in peer_failures.iter().take(10) {
            let _ = writeln!(md, "- {f}");
        }
        let _ = writeln!(md);
    }
    if !failures.is_empty() {
        let _ = writeln!(md, "**Failed runs ({}):**\n", failures.len());
        for f in &failures {
            let _ = writeln!(md, "- {f}");
        }
        let _ = writeln!(md);
    }
    let cmdline: Vec<String> = std::env::args().collect();
    let _ = writeln!(md, "Goals met: {goals_met}/{goals_total} (workload × level). Command: `{}` ({:.0} s).", cmdline.join(" "), started.elapsed().as_secs_f64());
    let section = json!({
        "name": "macro",
        "title": "Macro overhead: real work inside the sandbox",
        "gate": null,
        "figures": {"mode": o.mode, "rounds": o.rounds, "goal": GOAL, "goals_met": goals_met, "goals_total": goals_total,
                    "levels": levels, "workloads": figures, "skipped": skipped, "failed_runs": failures, "peer_failed_runs": peer_failures, "notes": notes,
                    "command": cmdline.join(" ")},
        "markdown": md,
    });
    let sec_dir = o.out.join("sections");
    std::fs::create_dir_all(&sec_dir).map_err(|e| format!("{}: {e}", sec_dir.display()))?;
    std::fs::write(sec_dir.join("macro.json"), serde_json::to_string_pretty(&section).unwrap_or_default()).map_err(|e| format!("write: {e}"))?;
    std::fs::write(o.out.join("macro.md"), format!("## Macro overhead\n\n{md}")).map_err(|e| format!("write: {e}"))?;
    print!("{md}");
    Ok(failures.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_parsed_from_its_stderr_and_a_failure_is_an_error() {
        let (wall, cpu) = parse_run("noise\n__LGT 1.500 0.250 0.250\n__LGRC 0\n").unwrap();
        assert!((wall - 1.5).abs() < 1e-9 && (cpu - 0.5).abs() < 1e-9);
        assert!(parse_run("__LGT 1.0 0.1 0.1\n__LGRC 1\n").unwrap_err().contains("exit 1"));
        assert!(parse_run("killed\n").unwrap_err().contains("exit unknown"));
    }

    #[test]
    fn every_workload_is_quick_or_says_why_not_and_names_distinct() {
        let w = workloads("python3");
        let mut names: Vec<_> = w.iter().map(|w| w.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), w.len());
        assert!(w.len() >= 7);
        assert!(w.iter().all(|w| setup(w.dir, "python3").is_some()), "every workload's directory has a setup");
    }
}
