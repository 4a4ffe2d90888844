//! `lgmatrix`: the focused suite that `ci/kernel-matrix` runs in every kernel configuration
//! (inside a TCG guest, or directly on the host for the host kernel).
//!
//! ```text
//! lgmatrix suite --root DIR --config NAME --expect FILE --localgpt PATH [--corpus off|cover|full]
//! lgmatrix exit-port N   qemu isa-debug-exit (guest only)
//! ```
//!
//! Per user (root, then uid 65534) the suite checks `localgpt sandbox status --json` against the
//! expectations file (ABI, Landlock state, level, available levels, exactly which protections are
//! not enforced); at every available level it runs a smoke command and checks what the run
//! reports it applied and left unenforced; then it runs the escape corpus compiled into the
//! binary, `localgpt sandbox test --cover` (one vector per protection, the most specific one that
//! can run in the guest, at every level) or `--full` (all of it). The corpus is judged by the
//! same engine as on the host (each vector run bare, where it must escape, then sandboxed, every
//! effect checked from outside; an escape is excused only when a protection it depends on is
//! pinned as not enforced for this configuration, `LOCALGPT_EXPECT_CONFIG`): this suite has no
//! escape vectors of its own.
//!
//! The result is one JSON line after `LGMATRIX-RESULT ` and a final `LGMATRIX-END pass|fail`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod gaps;
use gaps::expected_gaps;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = match args.get(1).map(String::as_str) {
        Some("suite") => suite(&args[2..]),
        Some("exit-port") => exit_port(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1)),
        _ => {
            eprintln!("usage: lgmatrix suite|exit-port …");
            2
        }
    };
    std::process::exit(code);
}

// ------------------------------------------------------------------------------------------------
// small helpers

fn opt(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn need(args: &[String], name: &str) -> String {
    opt(args, name).unwrap_or_else(|| {
        eprintln!("lgmatrix: missing {name}");
        std::process::exit(2)
    })
}

fn chown(p: &Path, uid: u32, gid: u32) {
    let _ = std::os::unix::fs::chown(p, Some(uid), Some(gid));
}

/// qemu `isa-debug-exit` at 0xf4: qemu exits with `(code << 1) | 1`.
#[cfg(target_arch = "x86_64")]
fn exit_port(code: u32) -> i32 {
    // SAFETY: ioperm on one port range, then a single `out` to it (guest only, as root).
    unsafe {
        if libc::ioperm(0xf4, 4, 1) != 0 {
            eprintln!("lgmatrix: ioperm: {}", std::io::Error::last_os_error());
            return 1;
        }
        std::arch::asm!("out dx, eax", in("dx") 0xf4u16, in("eax") code, options(nomem, nostack));
    }
    0
}

/// Other architectures' machines have no `isa-debug-exit`: the guest powers off and the host
/// judges by the `LGMATRIX-END` marker and the result line alone.
#[cfg(not(target_arch = "x86_64"))]
fn exit_port(code: u32) -> i32 {
    println!("LGMATRIX-EXIT {code} (no isa-debug-exit on {})", std::env::consts::ARCH);
    0
}

// ------------------------------------------------------------------------------------------------
// the suite

#[derive(Clone, Copy)]
struct User {
    name: &'static str,
    uid: u32,
    gid: u32,
}

const USERS: [User; 2] = [User { name: "root", uid: 0, gid: 0 }, User { name: "uid65534", uid: 65534, gid: 65534 }];

/// A process's captured result.
struct Output {
    code: i32,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Runs `cmd` as `user` with a clean environment (plus `env`), capturing output, killed after
/// `limit`.
fn run_as(user: User, home: &Path, cwd: &Path, argv: &[String], env: &[(&str, &str)], limit: Duration) -> Output {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("LANG", "C")
        .env("USER", user.name)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if user.uid != 0 {
        c.uid(user.uid).gid(user.gid);
    }
    let mut child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) => return Output { code: -1, stdout: String::new(), stderr: format!("spawn {}: {e}", argv[0]), timed_out: false },
    };
    let mut so = child.stdout.take();
    let mut se = child.stderr.take();
    let t1 = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = so.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = se.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if start.elapsed() > limit => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let stdout = String::from_utf8_lossy(&t1.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&t2.join().unwrap_or_default()).into_owned();
    let code = status.and_then(|s| s.code().or_else(|| std::os::unix::process::ExitStatusExt::signal(&s).map(|n| 128 + n))).unwrap_or(-1);
    Output { code, stdout, stderr, timed_out }
}

fn not_enforced(protections: &Value) -> BTreeSet<String> {
    protections
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|p| p["state"].as_str() != Some("enforced"))
                .filter_map(|p| p["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn fmt_set(s: &BTreeSet<String>) -> String {
    if s.is_empty() {
        "{}".into()
    } else {
        s.iter().cloned().collect::<Vec<_>>().join(",")
    }
}

fn suite(args: &[String]) -> i32 {
    let t0 = Instant::now();
    let root = PathBuf::from(need(args, "--root"));
    let config = need(args, "--config");
    let expect_path = need(args, "--expect");
    let localgpt_src = PathBuf::from(need(args, "--localgpt"));
    let corpus = opt(args, "--corpus").unwrap_or_else(|| "cover".into());
    let mut failures: Vec<String> = Vec::new();
    let result = |failures: &[String], body: Value| {
        let passed = failures.is_empty();
        let mut v = body;
        v["config"] = json!(config);
        v["passed"] = json!(passed);
        v["failures"] = json!(failures);
        v["duration_s"] = json!((t0.elapsed().as_secs_f64() * 10.0).round() / 10.0);
        println!("LGMATRIX-RESULT {v}");
        println!("LGMATRIX-END {}", if passed { "pass" } else { "fail" });
        i32::from(!passed)
    };
    if !["off", "cover", "full"].contains(&corpus.as_str()) {
        return result(&[format!("--corpus {corpus}: expected off, cover or full")], json!({}));
    }
    let exp: Value = match fs::read_to_string(&expect_path).map_err(|e| e.to_string()).and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string())) {
        Ok(v) => v,
        Err(e) => return result(&[format!("expectations {expect_path}: {e}")], json!({})),
    };
    let Some(cfg) = exp["configurations"].as_array().and_then(|a| a.iter().find(|c| c["name"] == config.as_str())).cloned() else {
        return result(&[format!("configuration {config} not in {expect_path}")], json!({}));
    };
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    if let Some(prefix) = cfg["version_prefix"].as_str() {
        if !kernel.starts_with(prefix) {
            failures.push(format!("kernel {kernel} is not the {prefix}* kernel this configuration describes"));
        }
    }

    // The binary in a world-readable place (the unprivileged user must exec it).
    let _ = fs::remove_dir_all(&root);
    let bin = root.join("bin");
    if let Err(e) = fs::create_dir_all(&bin) {
        return result(&[format!("{}: {e}", bin.display())], json!({}));
    }
    let _ = fs::set_permissions(&root, fs::Permissions::from_mode(0o755));
    let _ = fs::set_permissions(&bin, fs::Permissions::from_mode(0o755));
    let localgpt = bin.join("localgpt");
    if let Err(e) = fs::copy(&localgpt_src, &localgpt).map_err(|e| format!("copy {} → {}: {e}", localgpt_src.display(), localgpt.display())).and_then(|_| fs::set_permissions(&localgpt, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())) {
        return result(&[e], json!({}));
    }
    let limit = Duration::from_secs(180);
    let mut users_out = serde_json::Map::new();

    for user in USERS {
        let mut fail = |m: String| failures.push(format!("{}: {m}", user.name));
        let home = root.join(format!("home-{}", user.name));
        let dir = |p: &Path| -> Result<(), String> {
            let _ = fs::remove_dir_all(p);
            fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
            chown(p, user.uid, user.gid);
            Ok(())
        };
        if let Err(e) = dir(&home) {
            fail(format!("home setup: {e}"));
            continue;
        }
        let _ = fs::set_permissions(&home, fs::Permissions::from_mode(0o700));
        let mut uo = serde_json::Map::new();

        // --- status --------------------------------------------------------------------------
        // Workspaces are repositories: the protection table pins what a `.git/hooks` brings.
        let repo = |p: &Path| dir(p).and_then(|()| dir(&p.join(".git"))).and_then(|()| dir(&p.join(".git/hooks")));
        let status_ws = root.join(format!("ws-{}-status", user.name));
        if let Err(e) = repo(&status_ws) {
            fail(e);
            continue;
        }
        let st = run_as(user, &home, &status_ws, &[localgpt.display().to_string(), "sandbox".into(), "status".into(), "--json".into()], &[], limit);
        let status: Value = serde_json::from_str(&st.stdout).unwrap_or(Value::Null);
        if st.code != 0 || status.is_null() {
            fail(format!("status --json failed (exit {}): {}", st.code, st.stderr.trim()));
            users_out.insert(user.name.into(), json!({"status_error": st.stderr}));
            continue;
        }
        let abi = status["landlock"]["abi"].as_u64().unwrap_or(999);
        let level = status["level"].as_str().unwrap_or("?").to_string();
        let levels: Vec<String> = status["available_levels"].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default();
        let want_levels: Vec<String> = cfg["levels"][user.name].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default();
        if Some(abi) != cfg["abi"].as_u64() {
            fail(format!("status: Landlock ABI {abi}, expected {}", cfg["abi"]));
        }
        if status["landlock"]["state"] != cfg["landlock_state"] {
            fail(format!("status: Landlock state {}, expected {}", status["landlock"]["state"], cfg["landlock_state"]));
        }
        if status["seccomp"]["available"] != json!(true) {
            fail("status: seccomp unavailable".into());
        }
        if levels != want_levels {
            fail(format!("status: available levels {levels:?}, expected {want_levels:?}"));
        }
        if want_levels.first() != Some(&level) {
            fail(format!("status: level {level}, expected {:?}", want_levels.first()));
        }
        let gaps = not_enforced(&status["protections"]);
        let cgroup = !status["cgroup_pids"].is_null();
        let memory_cgroup = !status["cgroup_memory"].is_null();
        // Minimal because Landlock is missing, with namespaces carrying what they can.
        let gap_key = if level == "minimal" && status["namespaces"] == json!(true) { "minimal+mounts".to_string() } else { level.clone() };
        let want_gaps = expected_gaps(&exp, &cfg, user.name, &gap_key, cgroup, memory_cgroup);
        if gaps != want_gaps {
            fail(format!("status at {level}: not enforced {{{}}}, expected {{{}}}", fmt_set(&gaps), fmt_set(&want_gaps)));
        }
        uo.insert(
            "status".into(),
            json!({"abi": abi, "landlock_state": status["landlock"]["state"], "level": level, "available_levels": levels,
                   "user_namespaces": status["user_namespaces"]["available"], "cgroup_pids": cgroup, "not_enforced": gaps, "kernel": status["kernel"]}),
        );

        // --- every available level: a smoke command, and what the run says it applied ---------
        let mut lv_out = serde_json::Map::new();
        // `auto` too when it differs from every explicit level (minimal with namespaces).
        let mut run_levels = levels.clone();
        if gap_key == "minimal+mounts" {
            run_levels.insert(0, "auto".to_string());
        }
        for lvl in &run_levels {
            let ws = root.join(format!("ws-{}-{lvl}", user.name));
            if let Err(e) = repo(&ws) {
                fail(e);
                continue;
            }
            let msg = format!("hello-{lvl}-{}", user.name);
            let out = run_as(
                user,
                &home,
                &ws,
                &[localgpt.display().to_string(), "sandbox".into(), "run".into(), "--json".into(), "--quiet".into(), "--level".into(), lvl.clone(),
                  "--workspace".into(), ws.display().to_string(), "--timeout".into(), "120".into(), "--".into(),
                  "/bin/sh".into(), "-c".into(), format!("echo {msg} > hello.txt && cat hello.txt && exit 5")],
                &[],
                limit,
            );
            let rj: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
            let hello = fs::read_to_string(ws.join("hello.txt")).unwrap_or_default();
            let smoke_ok = rj["exit_code"] == json!(5) && rj["stdout"].as_str().unwrap_or("").contains(&msg) && hello.trim() == msg && !out.timed_out;
            if !smoke_ok {
                fail(format!("smoke at {lvl}: exit {} (want 5), output {:?}, hello.txt {:?}, stderr {:?}", rj["exit_code"], rj["stdout"], hello.trim(), out.stderr.trim()));
            }
            // `auto` runs at the status level, with the namespaces of the minimal+mounts case.
            let (eff_level, eff_key) = if lvl == "auto" { (level.as_str(), gap_key.as_str()) } else { (lvl.as_str(), lvl.as_str()) };
            if rj["level"].as_str() != Some(eff_level) {
                fail(format!("run at {lvl} reported level {}", rj["level"]));
            }
            let applied = &rj["applied"];
            let want_ll = if eff_level == "minimal" { "not_applied" } else { "fully_enforced" };
            let want_ns = eff_level == "full" || eff_key == "minimal+mounts";
            if applied["seccomp"] != json!(true) || applied["landlock"].as_str() != Some(want_ll) || applied["namespaces"] != json!(want_ns) {
                fail(format!("applied at {lvl}: {applied} (want seccomp, landlock {want_ll}, namespaces {want_ns})"));
            }
            let gaps = not_enforced(&rj["protections"]);
            let want = expected_gaps(&exp, &cfg, user.name, eff_key, cgroup, memory_cgroup);
            if gaps != want {
                fail(format!("run at {lvl}: not enforced {{{}}}, expected {{{}}}", fmt_set(&gaps), fmt_set(&want)));
            }
            lv_out.insert(lvl.clone(), json!({"smoke_ok": smoke_ok, "not_enforced": gaps, "run_ms": rj["duration_ms"],
                                              "blocked": [], "not_preventable": [], "escaped": [], "other": []}));
        }

        // --- the escape corpus, by the engine the host uses ------------------------------------
        let corpus_v = if corpus == "off" {
            json!({"state": "skipped", "reason": "--corpus off"})
        } else {
            let argv = vec![localgpt.display().to_string(), "sandbox".into(), "test".into(), "--json".into(), format!("--{corpus}")];
            let out = run_as(user, &home, &status_ws, &argv, &[("LOCALGPT_EXPECT_CONFIG", config.as_str())], Duration::from_secs(1800));
            let tj: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
            let results = tj["results"].as_array().cloned().unwrap_or_default();
            if out.code != 0 || tj.is_null() || results.is_empty() {
                // The progress lines of passing cases say nothing about the failure.
                let notes: Vec<&str> = out.stderr.lines().filter(|l| !(l.starts_with("  ✓") || l.starts_with("  ·") || l.trim().is_empty())).collect();
                let tail = notes[notes.len().saturating_sub(20)..].join(" | ");
                fail(format!("`{}` failed (exit {}, {} results); stderr: {}", argv[1..].join(" "), out.code, results.len(), tail.chars().take(2000).collect::<String>()));
            }
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for r in &results {
                let (vector, lvl, verdict) = (r["vector"].as_str().unwrap_or("?"), r["level"].as_str().unwrap_or("?"), r["verdict"].as_str().unwrap_or("?"));
                *counts.entry(verdict.to_string()).or_default() += 1;
                let list = match verdict {
                    "blocked" | "not_preventable" | "escaped" => verdict,
                    _ => "other",
                };
                if !matches!(verdict, "blocked" | "not_preventable" | "skipped") {
                    fail(format!("{verdict}: {vector} at {lvl}: {}", r["detail"].as_str().unwrap_or("")));
                }
                let entry = lv_out.entry(lvl.to_string()).or_insert_with(|| json!({"blocked": [], "not_preventable": [], "escaped": [], "other": []}));
                if let Some(a) = entry[list].as_array_mut() {
                    a.push(json!(if list == "other" { format!("{vector} ({verdict})") } else { vector.to_string() }));
                }
            }
            json!({"state": if out.code == 0 && !results.is_empty() { "passed" } else { "failed" }, "command": argv[1..].join(" "), "exit": out.code,
                   "vectors": tj["vectors"], "summary": counts, "uncovered": tj["uncovered"]})
        };
        uo.insert("levels".into(), Value::Object(lv_out));
        uo.insert("corpus".into(), corpus_v);
        users_out.insert(user.name.into(), Value::Object(uo));
    }
    result(&failures, json!({"kernel": kernel, "users": users_out}))
}
