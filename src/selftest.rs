//! `localgpt sandbox test [--full] [--json]`: verify enforcement live on this machine, with
//! this binary alone (the probes and the escape corpus are compiled in).
//!
//! * default: the spec 6.3 smoke tests — write in the workspace allowed, write outside denied,
//!   `~/.ssh` read denied, network denied, timeout enforced, children inherit the sandbox —
//!   each checked from outside (files, a listener, the process table), and each escape test
//!   also run bare first, where it must succeed;
//! * `--full`: the whole escape corpus at every level `sandbox status` lists;
//! * `--cover`: one vector per protection, the most specific that can run here (unmet
//!   preconditions and missing tools are reasons, listed), at every level: the kernel matrix's
//!   subset, judged by the same engine.
//!
//! Exit code 1 when anything escapes (or a check cannot be trusted: invalid probe, error).

use std::path::PathBuf;

use localgpt_corpus::Corpus;
use localgpt_harness::engine::{execute, token_pids, CaseResult, Suite, RUN_PATH};
use localgpt_harness::world::{world_base, World};

use crate::cli::{Failure, TestArgs};

const SMOKE: &str = r#"
family: filesystem
title: smoke
vectors:
  - name: smoke-write-outside
    attempts: write a file outside the workspace
    source: "spec 6.3 smoke test"
    protections: [fs-write-outside]
    probe: {builtin: write-file, args: ["{canary}", "pwned"]}
    expect: blocked
    check: [{file_unchanged: "{canary}"}]
  - name: smoke-read-ssh
    attempts: read ~/.ssh/id_rsa
    source: "spec 6.3 smoke test"
    protections: [fs-read-credentials]
    probe: {shell: "cat {home}/.ssh/id_rsa"}
    expect: blocked
    check: [{secret_not_in_output: ssh}]
  - name: smoke-network
    attempts: connect to a TCP listener on 127.0.0.1 and send data
    source: "spec 6.3 smoke test"
    protections: [network]
    probe: {builtin: tcp-connect, args: ["{tcp_port}", "exfil"]}
    expect: blocked
    check: [tcp_silent]
  - name: smoke-child-inherits
    attempts: read ~/.ssh/id_rsa from a grandchild process
    source: "spec 6.3 smoke test"
    protections: [fs-read-credentials]
    probe: {shell: "bash -c 'bash -c \"cat {home}/.ssh/id_rsa\"'"}
    expect: blocked
    check: [{secret_not_in_output: ssh}]
"#;

struct SmokeLine {
    label: &'static str,
    passed: bool,
    outcome: String,
    detail: String,
}

fn bin() -> Result<PathBuf, Failure> {
    std::env::current_exe().map_err(|e| Failure { code: 1, message: format!("cannot find this binary: {e}") })
}

fn sandbox_json(suite: &Suite, w: &World, level: &str, timeout: u64, cmd: &str) -> Result<serde_json::Value, String> {
    let argv: Vec<String> = [
        suite.bin.display().to_string(),
        "sandbox".into(),
        "run".into(),
        "--json".into(),
        "--level".into(),
        level.into(),
        "--workspace".into(),
        w.ws.display().to_string(),
        "--timeout".into(),
        timeout.to_string(),
        "--".into(),
        cmd.into(),
    ]
    .into();
    let env = vec![
        ("HOME".to_string(), w.home.display().to_string()),
        ("XDG_CONFIG_HOME".to_string(), w.xdg.display().to_string()),
        ("PATH".to_string(), RUN_PATH.to_string()),
    ];
    let out = execute(&argv, &env, &w.ws, Vec::new(), None, None, Vec::new())?;
    serde_json::from_slice(&out.stdout).map_err(|e| format!("sandbox run printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

fn smoke(suite: &Suite, level: &str) -> Vec<SmokeLine> {
    let corpus = Corpus::from_sources([("smoke.yaml", SMOKE)]);
    let mut lines = Vec::new();
    let vectors = match corpus {
        Ok(c) => c.vectors,
        Err(e) => {
            lines.push(SmokeLine { label: "Smoke corpus", passed: false, outcome: "invalid".into(), detail: e.to_string() });
            return lines;
        }
    };
    // 1. Write to the workspace: allowed (checked from outside).
    let line = match World::new(&world_base(), &vectors[0]) {
        Ok(w) => match sandbox_json(suite, &w, level, 20, "echo lg-smoke-ok > smoke.txt") {
            Ok(j) => {
                let content = std::fs::read_to_string(w.ws.join("smoke.txt")).unwrap_or_default();
                let ok = j["exit_code"] == 0 && content == "lg-smoke-ok\n";
                SmokeLine { label: "Write to workspace:", passed: ok, outcome: if ok { "allowed".into() } else { "FAILED".into() }, detail: format!("exit {} file {:?}", j["exit_code"], content) }
            }
            Err(e) => SmokeLine { label: "Write to workspace:", passed: false, outcome: "error".into(), detail: e },
        },
        Err(e) => SmokeLine { label: "Write to workspace:", passed: false, outcome: "error".into(), detail: e },
    };
    lines.push(line);
    let labels = ["Write outside workspace:", "Read ~/.ssh/id_rsa:", "Network (TCP connect):"];
    let outcomes = ["denied (file unchanged)", "denied (secret not returned)", "denied (listener saw nothing)"];
    for (i, label) in labels.iter().enumerate() {
        let r = suite.run_case(&vectors[i], level);
        lines.push(case_line(label, outcomes[i], &r));
    }
    // 5. Timeout: killed, nothing left running (checked in the process table).
    let line = match World::new(&world_base(), &vectors[0]) {
        Ok(w) => {
            // A looping bash whose own command line carries the token (portable: `exec -a` would
            // rename a busybox `sleep` into an unknown applet).
            let cmd = format!("bash -c 'while :; do sleep 1; done; : {}-sleeper' & wait", w.token);
            match sandbox_json(suite, &w, level, 2, &cmd) {
                Ok(j) => {
                    let left = token_pids(&w.token);
                    for p in &left {
                        // SAFETY: killing leftovers carrying this world's unique token.
                        unsafe { libc::kill(*p, libc::SIGKILL) };
                    }
                    let ok = j["timed_out"] == true && j["exit_code"] == 124 && left.is_empty();
                    SmokeLine {
                        label: "Timeout enforcement:",
                        passed: ok,
                        outcome: if ok { "killed after 2s (nothing left running)".into() } else { "FAILED".into() },
                        detail: format!("timed_out {} exit {} leftovers {left:?}", j["timed_out"], j["exit_code"]),
                    }
                }
                Err(e) => SmokeLine { label: "Timeout enforcement:", passed: false, outcome: "error".into(), detail: e },
            }
        }
        Err(e) => SmokeLine { label: "Timeout enforcement:", passed: false, outcome: "error".into(), detail: e },
    };
    lines.push(line);
    let r = suite.run_case(&vectors[3], level);
    lines.push(case_line("Child process inherits:", "confirmed (grandchild denied ~/.ssh)", &r));
    lines
}

fn case_line(label: &'static str, ok_text: &str, r: &CaseResult) -> SmokeLine {
    let passed = r.verdict == "blocked";
    let outcome = match r.verdict.as_str() {
        "blocked" => ok_text.to_string(),
        "not_preventable" => "NOT ENFORCED at this level".to_string(),
        v => v.to_uppercase(),
    };
    SmokeLine { label, passed, outcome, detail: r.detail.clone() }
}

/// `sandbox test`.
///
/// # Errors
/// A failure (exit 1) when the suite cannot be set up.
pub fn test(args: &TestArgs) -> Result<i32, Failure> {
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => bin()?,
    };
    let only_levels = (!args.levels.is_empty()).then(|| args.levels.clone());
    let suite = Suite::new(&bin, only_levels.as_deref()).map_err(|e| Failure { code: 1, message: e })?;
    if args.full || args.cover {
        return full(&suite, args);
    }
    // `auto` when the default run is a level of its own (see `Suite::levels`), else the status level.
    let auto = suite.levels.iter().any(|x| x.name == "auto").then(|| "auto".to_string());
    let Some(level) = auto
        .or_else(|| suite.status_level.clone().filter(|l| suite.levels.iter().any(|x| &x.name == l)))
        .or_else(|| suite.levels.first().map(|l| l.name.clone()))
    else {
        return Err(Failure { code: 1, message: "no sandbox level is available on this machine (see `localgpt sandbox status`)".into() });
    };
    if !args.json {
        println!("Running sandbox smoke tests (level {level}, {})...", suite.facts.user);
    }
    let lines = smoke(&suite, &level);
    let passed = lines.iter().filter(|l| l.passed).count();
    let all = passed == lines.len();
    if args.json {
        let v = serde_json::json!({
            "suite": "smoke",
            "level": level,
            "user": suite.facts.user,
            "passed": all,
            "results": lines.iter().map(|l| serde_json::json!({"test": l.label.trim_end_matches(':'), "passed": l.passed, "outcome": l.outcome, "detail": l.detail})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        for l in &lines {
            println!("  {} {:<26} {}", if l.passed { "✓" } else { "✗" }, l.label, l.outcome);
            if !l.passed {
                println!("      {}", l.detail);
            }
        }
        if all {
            println!("All {} tests passed.", lines.len());
        } else {
            println!("{} of {} tests FAILED.", lines.len() - passed, lines.len());
        }
    }
    Ok(if all { 0 } else { 1 })
}

fn full(suite: &Suite, args: &TestArgs) -> Result<i32, Failure> {
    let corpus = localgpt_corpus::load_embedded().map_err(|e| Failure { code: 1, message: format!("embedded corpus: {e}") })?;
    let all: Vec<_> = corpus.vectors.into_iter().filter(|v| args.only.is_empty() || args.only.iter().any(|o| v.name.contains(o.as_str()))).collect();
    let (vectors, uncovered) = if args.cover {
        let c = localgpt_harness::cover::cover(&all, &|v| suite.facts.unmet_for(v));
        (c.vectors, c.uncovered)
    } else {
        (all, Vec::new())
    };
    let levels: Vec<String> = suite.levels.iter().map(|l| l.name.clone()).collect();
    let jobs = args.jobs.or_else(|| std::env::var("LOCALGPT_TEST_JOBS").ok().and_then(|j| j.parse().ok())).unwrap_or(2);
    if !args.json {
        println!("Running {} escape vectors at level(s) {} as {} ({} at a time)...", vectors.len(), levels.join(", "), suite.facts.user, jobs);
        for (id, why) in &uncovered {
            println!("  - protection {id} not covered here: {why}");
        }
    }
    let json = args.json;
    let progress = move |r: &CaseResult| {
        let mark = match r.verdict.as_str() {
            "blocked" => "✓",
            "not_preventable" => "·",
            "skipped" => "-",
            _ => "✗",
        };
        let line = format!("  {mark} {:<16} {:<36} {:<9} {}", r.family, r.vector, r.level, r.verdict);
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let results = localgpt_harness::run_all(suite, &vectors, jobs, &progress);
    let summary = localgpt_harness::engine::summarize(&results);
    let escaped = summary.get("escaped").copied().unwrap_or(0);
    let bad = summary.get("invalid_probe").copied().unwrap_or(0) + summary.get("error").copied().unwrap_or(0);
    let passed = escaped == 0 && bad == 0;
    if json {
        let v = serde_json::json!({
            "suite": "escapes",
            "binary": suite.bin,
            "user": suite.facts.user,
            "uid": suite.facts.uid,
            "levels": levels,
            "status_level": suite.status_level,
            "vectors": vectors.len(),
            "subset": if args.cover { "cover" } else { "all" },
            "uncovered": uncovered.iter().map(|(id, why)| serde_json::json!({"protection": id, "reason": why})).collect::<Vec<_>>(),
            "summary": summary,
            "passed": passed,
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        for r in results.iter().filter(|r| !r.passed()) {
            println!("\n✗ {} at {}: {}: {}", r.vector, r.level, r.verdict, r.detail);
        }
        println!("\n{summary:?}");
        println!("{}", if passed { "0 escapes." } else { "FAILED: escapes or untrustworthy results above." });
    }
    Ok(if passed { 0 } else { 1 })
}
