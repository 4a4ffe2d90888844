//! The CLI contract: exit codes for usage/config errors (nothing executed), `status`, `explain`,
//! `--json` shape.

mod support;

use std::fs;
use std::path::Path;

use serde_json::Value;
use support::*;

/// Command that would leave a marker if anything got executed.
fn marker_cmd(marker: &Path) -> String {
    format!("touch {}", sh_quote(marker))
}

/// Exit 125 (`run`'s own failure, as `env` and `docker run`), exactly one non-empty line on
/// stderr, nothing on stdout, nothing executed.
fn assert_usage_error(o: &Out, marker: &Path) {
    assert_eq!(
        o.code(),
        Some(125),
        "expected exit 125 (usage/config error of run){}",
        o.describe()
    );
    let lines: Vec<&str> = o.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "expected a one-line error on stderr, got {} lines{}",
        lines.len(),
        o.describe()
    );
    assert!(
        !marker.exists(),
        "the command was executed despite the error{}",
        o.describe()
    );
    assert!(
        !o.stderr.contains("Running sandboxed"),
        "banner printed although nothing ran{}",
        o.describe()
    );
}

#[test]
fn malformed_config_file_is_a_usage_error() {
    let w = World::new();
    let cfg = w.root.join("bad.toml");
    fs::write(&cfg, "[sandbox\nthis is = = not toml ]]\n").unwrap();
    let marker = w.ws.join("MARKER");
    let mut cmd = w.sandbox_cmd(&[], &[&marker_cmd(&marker)]);
    cmd.env("LOCALGPT_CONFIG", &cfg);
    assert_usage_error(&run(cmd, "malformed LOCALGPT_CONFIG"), &marker);
}

#[test]
fn malformed_xdg_config_is_a_usage_error() {
    let w = World::new();
    fs::create_dir_all(w.xdg.join("localgpt")).unwrap();
    fs::write(
        w.xdg.join("localgpt/config.toml"),
        "[sandbox]\ntimeout_secs = \"soon\"\nbroken = \n",
    )
    .unwrap();
    let marker = w.ws.join("MARKER");
    assert_usage_error(&w.sandboxed(&marker_cmd(&marker)), &marker);
}

#[test]
fn unknown_config_key_is_a_usage_error() {
    let w = World::new();
    let cfg = w.root.join("unknown.toml");
    fs::write(&cfg, "[sandbox]\nno_such_key = true\n").unwrap();
    let marker = w.ws.join("MARKER");
    let mut cmd = w.sandbox_cmd(&[], &[&marker_cmd(&marker)]);
    cmd.env("LOCALGPT_CONFIG", &cfg);
    let o = run(cmd, "unknown config key");
    assert_usage_error(&o, &marker);
    assert!(
        o.stderr.contains("no_such_key"),
        "the error should name the unknown key{}",
        o.describe()
    );
}

#[test]
fn missing_config_file_named_by_env_is_a_usage_error() {
    let w = World::new();
    let marker = w.ws.join("MARKER");
    let mut cmd = w.sandbox_cmd(&[], &[&marker_cmd(&marker)]);
    cmd.env("LOCALGPT_CONFIG", w.root.join("does-not-exist.toml"));
    assert_usage_error(&run(cmd, "LOCALGPT_CONFIG names a missing file"), &marker);
}

#[test]
fn valid_config_file_is_accepted() {
    let w = World::new();
    let cfg = w.root.join("good.toml");
    fs::write(
        &cfg,
        "[sandbox]\ntimeout_secs = 30\nmax_output_bytes = 1048576\n",
    )
    .unwrap();
    let marker = w.ws.join("MARKER");
    let mut cmd = w.sandbox_cmd(&[], &[&marker_cmd(&marker)]);
    cmd.env("LOCALGPT_CONFIG", &cfg);
    let o = run(cmd, "valid config");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert!(marker.exists(), "{}", o.describe());
}

#[test]
fn nonexistent_workspace_is_a_usage_error() {
    let w = World::new();
    let marker = w.ws.join("MARKER");
    let missing = w.root.join("no-such-workspace");
    let missing_s = missing.to_string_lossy().into_owned();
    let o = w.sandboxed_with(&["--workspace", &missing_s], &marker_cmd(&marker));
    assert_usage_error(&o, &marker);
    assert!(!missing.exists());
}

#[test]
fn unknown_mode_is_a_usage_error() {
    let w = World::new();
    let marker = w.ws.join("MARKER");
    let o = w.sandboxed_with(&["--mode", "yolo"], &marker_cmd(&marker));
    assert_usage_error(&o, &marker);
}

#[test]
fn full_access_without_the_dangerous_flag_is_refused() {
    let w = World::new();
    let marker = w.outside.join("MARKER");
    let o = w.sandboxed_with(&["--mode", "full-access"], &marker_cmd(&marker));
    assert_eq!(o.code(), Some(125), "{}", o.describe());
    assert!(
        !marker.exists(),
        "full-access ran without --dangerously-allow-full-access{}",
        o.describe()
    );
}

#[test]
fn full_access_with_the_dangerous_flag_runs_unconfined() {
    let w = World::new();
    let marker = w.outside.join("MARKER");
    let o = w.sandboxed_with(
        &["--mode", "full-access", "--dangerously-allow-full-access"],
        &marker_cmd(&marker),
    );
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert!(
        marker.exists(),
        "full-access should be able to write outside the workspace{}",
        o.describe()
    );
}

#[test]
fn exit_codes_pass_through() {
    let w = World::new();
    assert_eq!(w.sandboxed("exit 0").code(), Some(0));
    let o = w.sandboxed("exit 3");
    assert_eq!(o.code(), Some(3), "{}", o.describe());
    let o = w.sandboxed("kill -KILL $$");
    assert_eq!(
        o.code(),
        Some(128 + 9),
        "died of SIGKILL → 137{}",
        o.describe()
    );
}

#[test]
fn json_result_has_the_documented_shape() {
    let w = World::new();
    let (o, v) = w.sandboxed_json(&[], "echo out; echo err >&2; exit 3");
    assert_eq!(
        o.code(),
        Some(3),
        "localgpt exits with the command's code{}",
        o.describe()
    );
    assert!(
        !o.stderr.contains("Running sandboxed"),
        "--json must not print the banner{}",
        o.describe()
    );
    assert_eq!(v["exit_code"], serde_json::json!(3), "{v:#}");
    assert_eq!(
        v["status"],
        serde_json::json!({"kind": "exited", "code": 3}),
        "{v:#}"
    );
    assert_eq!(v["timed_out"], serde_json::json!(false), "{v:#}");
    assert!(v["duration_ms"].as_f64().is_some_and(|d| d >= 0.0), "{v:#}");
    assert!(
        matches!(
            v["level"].as_str(),
            Some("full" | "standard" | "minimal" | "none")
        ),
        "level: {v:#}"
    );
    assert_eq!(v["mode"], serde_json::json!("workspace-write"), "{v:#}");
    assert_eq!(v["stdout"], serde_json::json!("out\n"), "{v:#}");
    assert_eq!(v["stderr"], serde_json::json!("err\n"), "{v:#}");
    assert_eq!(v["stdout_truncated"], serde_json::json!(false), "{v:#}");
    assert_eq!(v["stderr_truncated"], serde_json::json!(false), "{v:#}");
    assert_eq!(v["stdout_bytes"], serde_json::json!(4), "{v:#}");
    assert_eq!(v["stderr_bytes"], serde_json::json!(4), "{v:#}");
    let prots = v["protections"]
        .as_array()
        .unwrap_or_else(|| panic!("protections not an array: {v:#}"));
    assert!(!prots.is_empty(), "{v:#}");
    for p in prots {
        assert!(
            p["id"].is_string() && p["mechanism"].is_string() && p["detail"].is_string(),
            "{p:#}"
        );
        assert!(
            matches!(p["state"].as_str(), Some("enforced" | "degraded" | "off")),
            "{p:#}"
        );
    }
    // On this kind of machine (Landlock + seccomp) the level is at least standard, unless the
    // suite asked for minimal (ci/test runs every level).
    if status_json(&w)["landlock"]["abi"].as_i64().unwrap_or(0) >= 1 && suite_level(&w) != "minimal" {
        assert!(
            matches!(v["level"].as_str(), Some("full" | "standard")),
            "level: {v:#}"
        );
    }
    // When the suite runs at a forced level, every run must really be at that level.
    if let Some(level) = std::env::var("LOCALGPT_TEST_LEVEL").ok().filter(|l| !l.is_empty()) {
        assert_eq!(v["level"].as_str(), Some(level.as_str()), "{v:#}");
    }
}

#[test]
fn json_reports_signal_death() {
    let w = World::new();
    let (o, v) = w.sandboxed_json(&[], "kill -KILL $$");
    assert_eq!(o.code(), Some(137), "{}", o.describe());
    assert_eq!(
        v["status"],
        serde_json::json!({"kind": "signaled", "signal": 9}),
        "{v:#}"
    );
    assert_eq!(v["exit_code"], serde_json::json!(137), "{v:#}");
}

fn status_json(w: &World) -> Value {
    let o = run(
        w.localgpt_cmd(&["sandbox", "status", "--json"]),
        "sandbox status --json",
    );
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    parse_one_json(&o)
}

#[test]
fn status_json_reports_capabilities() {
    let w = World::new();
    let v = status_json(&w);
    let abi = v["landlock"]["abi"]
        .as_i64()
        .unwrap_or_else(|| panic!("landlock.abi missing: {v:#}"));
    assert!(abi >= 1, "landlock abi {abi}: {v:#}");
    assert_eq!(v["seccomp"]["available"], serde_json::json!(true), "{v:#}");
    assert!(v["user_namespaces"].is_object(), "{v:#}");
    assert!(
        matches!(
            v["level"].as_str(),
            Some("full" | "standard" | "minimal" | "none")
        ),
        "{v:#}"
    );
    assert!(v["protections"].is_array(), "{v:#}");
}

#[test]
fn status_human_output() {
    let w = World::new();
    let o = run(w.localgpt_cmd(&["sandbox", "status"]), "sandbox status");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert!(
        o.stdout.to_lowercase().contains("landlock"),
        "{}",
        o.describe()
    );
}

#[test]
fn explain_json_parses() {
    let w = World::new();
    let ws = w.ws.to_string_lossy().into_owned();
    let o = run(
        w.localgpt_cmd(&["sandbox", "explain", "--workspace", &ws, "--json"]),
        "sandbox explain --json",
    );
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let v = parse_one_json(&o);
    assert!(v.as_object().is_some_and(|m| !m.is_empty()), "{v:#}");
    // The workspace appears somewhere in the policy it explains.
    assert!(
        o.stdout.contains(&ws),
        "explain does not mention the workspace {ws}{}",
        o.describe()
    );
}

#[test]
fn explain_for_windows_shows_the_ace_plan_and_job_limits() {
    // Made on Linux: the token, the ACEs on the workspace, the temp directory, the protected
    // paths and the credentials, the job limits; nothing is changed on disk.
    let w = World::new();
    std::fs::create_dir_all(w.home.join(".ssh")).unwrap();
    std::fs::create_dir_all(w.ws.join(".vscode")).unwrap();
    let ws = w.ws.canonicalize().unwrap();
    // (`--level auto`: the suite may run with `level = "full"` in its config, which Windows does
    // not offer; that refusal is right, and not what this test is about.)
    let text = run(w.localgpt_cmd(&["sandbox", "explain", "--platform", "windows", "--level", "auto", "--workspace", &ws.to_string_lossy()]), "explain --platform windows");
    assert_eq!(text.code(), Some(0), "{}", text.describe());
    let t = &text.stdout;
    for want in [
        "CreateRestrictedToken(DISABLE_MAX_PRIVILEGE | LUA_TOKEN | WRITE_RESTRICTED)",
        "S-1-15-3-1024-",
        "(A;OICI;0x1301bf;;;S-1-15-3-1024-",
        "S:(ML;OICI;NW;;;S-1-16-4096)",
        "the run's temp directory",
        "(D;OICI;0xd0156;;;S-1-15-3-1024-",
        "(ML;OICI;NWNRNX;;;S-1-16-8192)",
        "job object: kill on close true",
        "READCLIPBOARD",
        "✗ network none — a write-restricted token does not confine the network",
    ] {
        assert!(t.contains(want), "{want:?} missing:\n{t}");
    }
    assert!(t.contains(&format!("{}", ws.join(".vscode").display())) && t.contains(&format!("{}", w.home.canonicalize().unwrap().join(".ssh").display())), "{t}");
    let j = run(w.localgpt_cmd(&["sandbox", "explain", "--platform", "windows", "--level", "auto", "--workspace", &ws.to_string_lossy(), "--json"]), "explain --platform windows --json");
    let v = parse_one_json(&j);
    let aces = v["plan"]["windows"]["aces"].as_array().or_else(|| v["windows"]["aces"].as_array()).cloned().unwrap_or_default();
    assert!(aces.len() >= 5, "{v:#}");
    assert!(!w.ws.join(".idea").exists(), "explain created nothing");
}

#[test]
fn explain_rejects_the_same_errors_as_run() {
    let w = World::new();
    let o = run(
        w.localgpt_cmd(&["sandbox", "explain", "--mode", "yolo", "--json"]),
        "explain --mode yolo",
    );
    assert_eq!(o.code(), Some(2), "{}", o.describe());
}

#[test]
fn require_full_is_met_or_refused_with_exit_125() {
    // `--require full` either runs (the machine supports Full) or exits 125 without running.
    let w = World::new();
    let marker = w.ws.join("MARKER");
    let o = w.sandboxed_with(&["--require", "full"], &marker_cmd(&marker));
    match o.code() {
        Some(0) => assert!(marker.exists(), "{}", o.describe()),
        Some(125) => assert!(
            !marker.exists(),
            "exit 1 but the command ran{}",
            o.describe()
        ),
        _ => panic!(
            "--require full must exit 0 (met) or 1 (not met){}",
            o.describe()
        ),
    }
    let o = w.sandboxed_with(&["--require", "minimal"], "echo req-ok");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert!(o.stdout.contains("req-ok"), "{}", o.describe());
}

#[test]
fn level_none_cannot_satisfy_require_standard() {
    let w = World::new();
    let marker = w.ws.join("MARKER");
    let o = w.sandboxed_with(
        &["--level", "none", "--require", "standard"],
        &marker_cmd(&marker),
    );
    assert!(
        o.code() == Some(125),
        "expected a refusal{}",
        o.describe()
    );
    assert!(
        !marker.exists(),
        "ran without the required protection{}",
        o.describe()
    );
}

/// A symlink planted in the workspace by an earlier run (`h -> $HOME`, `root -> /`, `up -> ..`
/// pointing at $HOME's level) must not turn a later `--workspace ws/h` run into one with $HOME or
/// `/` writable (red-team hole 6). Bare, the same path reaches $HOME.
#[test]
fn workspace_through_a_planted_symlink_to_home_or_root_is_refused() {
    let w = World::new();
    std::os::unix::fs::symlink(&w.home, w.ws.join("h")).unwrap();
    std::os::unix::fs::symlink("/", w.ws.join("root")).unwrap();
    let marker = w.home.join("PLANTED");
    // Bare: the path leads into $HOME.
    let o = w.bare(&format!("cd {} && touch PLANTED", sh_quote(w.ws.join("h"))));
    assert!(o.success() && marker.exists(), "bare run did not reach $HOME{}", o.describe());
    fs::remove_file(&marker).unwrap();
    for link in ["h", "root"] {
        let ws = w.ws.join(link);
        let o = w.sandboxed_with(&["--workspace", ws.to_str().unwrap()], "touch PLANTED");
        assert_usage_error(&o, &marker);
        assert!(o.stderr.contains("through the symlink"), "{}", o.describe());
    }
    // The home directory itself, or an ancestor, is refused without any symlink too.
    for ws in [w.home.clone(), w.root.clone()] {
        let o = w.sandboxed_with(&["--workspace", ws.to_str().unwrap()], "touch PLANTED");
        assert_usage_error(&o, &marker);
    }
    // --force-workspace accepts it on purpose (and the banner shows where the path led).
    let o = w.sandboxed_with(&["--workspace", w.ws.join("h").to_str().unwrap(), "--force-workspace"], "true");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert!(o.stderr.contains("goes through a symbolic link"), "{}", o.describe());
}

/// With a trusted workspace root, a workspace that resolves outside it is refused.
#[test]
fn workspace_root_confines_the_workspace() {
    let w = World::new();
    fs::create_dir_all(w.ws.join("pkg")).unwrap();
    std::os::unix::fs::symlink(&w.outside, w.ws.join("away")).unwrap();
    let root = w.ws.to_str().unwrap().to_string();
    let o = w.sandboxed_with(&["--workspace-root", &root, "--workspace", w.ws.join("pkg").to_str().unwrap()], "echo inside");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let marker = w.outside.join("PLANTED");
    let o = w.sandboxed_with(&["--workspace-root", &root, "--workspace", w.ws.join("away").to_str().unwrap()], "touch PLANTED");
    assert_usage_error(&o, &marker);
    assert!(o.stderr.contains("outside the trusted workspace root"), "{}", o.describe());
}

/// Issue 19: `--json` counts what the run wrote to storage (the whole tree's `write_bytes`), so
/// disk use is visible without a per-file size limit killing writers.
#[test]
fn json_counts_the_bytes_the_run_wrote() {
    let w = World::new();
    // tmpfs pages are never written to storage: nothing to count there.
    // SAFETY: statfs into a zeroed struct with a valid C path.
    let on_tmpfs = unsafe {
        let mut sf: libc::statfs = std::mem::zeroed();
        let c = std::ffi::CString::new(w.ws.as_os_str().as_encoded_bytes()).unwrap();
        libc::statfs(c.as_ptr(), &mut sf) == 0 && sf.f_type == 0x0102_1994
    };
    if on_tmpfs {
        return skip("json_counts_the_bytes_the_run_wrote", "the test workspace is on tmpfs, whose writes reach no storage");
    }
    let (o, v) = w.sandboxed_json(&[], "head -c 6000000 /dev/zero > big && sync big; rm -f big");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let n = v["bytes_written"].as_u64().unwrap_or_else(|| panic!("no bytes_written: {v:#}"));
    assert!((6_000_000..7_000_000).contains(&n), "wrote 6 MB in a child of a child, counted {n}: {v:#}");
    let (_, v) = w.sandboxed_json(&[], "true");
    let n = v["bytes_written"].as_u64().unwrap_or_else(|| panic!("no bytes_written: {v:#}"));
    assert!(n < 1_000_000, "a run that writes nothing counted {n}: {v:#}");
}

/// Issue 17: the timeout holds while the caller does not read the output. The runner hands
/// output to the caller (here a pipe nobody reads, which fills up); the command must still be
/// killed at its deadline, checked from outside in the process table.
#[test]
fn timeout_fires_while_the_caller_does_not_read() {
    let w = World::new();
    let token = format!("lgunread{}", unique_token());
    let mut cmd = w.sandbox_cmd(&["--timeout", "2"], &[&format!("exec -a {token} yes")]);
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn localgpt");
    let alive = || {
        fs::read_dir("/proc").unwrap().flatten().any(|e| {
            // argv[0] is the token: the probe, not the runner (whose arguments contain it too).
            fs::read(e.path().join("cmdline")).is_ok_and(|c| c.starts_with(token.as_bytes()))
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(alive(), "the probe did not start");
    // Well past the 2 s deadline (and the 2 s grace before SIGKILL), still not reading.
    std::thread::sleep(std::time::Duration::from_secs(6));
    let survived = alive();
    drop(child.stdout.take());
    let st = child.wait().expect("wait");
    assert!(!survived, "the command outlived its timeout while the caller did not read its output");
    assert_eq!(st.code(), Some(124), "timed out: exit 124");
}

/// `--settings FILE` imports sandbox-runtime's settings: a `denyRead` path stays unread (checked
/// from outside: its text never reaches the output, and bare it does), `allowedDomains` turns the
/// allowlist on (explain says so); a field that cannot be honoured is a one-line usage error
/// naming it, and nothing runs.
#[test]
fn sandbox_runtime_settings_are_imported_or_refused_by_field() {
    let w = World::new();
    let secret = w.outside.join("srt-secret.txt");
    fs::write(&secret, "lgsecret-srt-denyread").unwrap();
    let settings = w.root.join("srt.json");
    fs::write(&settings, format!(
        r#"{{"filesystem": {{"denyRead": ["{}"], "allowWrite": []}}, "network": {{"allowedDomains": ["example.com"], "allowLocalBinding": true}}}}"#,
        secret.display())).unwrap();
    let s = settings.display().to_string();
    let read = format!("cat {} ; true", sh_quote(&secret));
    assert!(w.bare(&read).stdout.contains("lgsecret-srt-denyread"), "bare validity: the file is readable without the sandbox");
    let o = run(w.sandbox_cmd(&["--settings", &s], &[&read]), "run with --settings");
    if needs_protections(&w, "sandbox_runtime_settings_are_imported_or_refused_by_field (denyRead)", &["fs-read-credentials"]) {
        assert!(!o.stdout.contains("lgsecret-srt-denyread") && !o.stderr.contains("lgsecret-srt-denyread"), "denyRead not honoured{}", o.describe());
    }
    let e = run(w.localgpt_cmd(&["sandbox", "explain", "--settings", &s, "--workspace", &w.ws.display().to_string()]), "explain --settings");
    assert!(e.stdout.contains("example.com") && e.stdout.contains("allowlist"), "{}", e.describe());
    // Not honourable: refused by name, nothing runs.
    let marker = w.ws.join("MARKER");
    for (json, field) in [(r#"{"filesystem": {"denyWrite": [".env"]}}"#, "filesystem.denyWrite"), (r#"{"network": {"allowLocalBinding": false}}"#, "network.allowLocalBinding"), (r#"{"sandbox": {}}"#, "sandbox")] {
        fs::write(&settings, json).unwrap();
        let o = run(w.sandbox_cmd(&["--settings", &s], &[&marker_cmd(&marker)]), "refused --settings");
        assert_usage_error(&o, &marker);
        assert!(o.stderr.contains(field), "{field}{}", o.describe());
    }
}

/// Issue 54 item 8: every failure of `run` itself exits 125 (as `env`, `timeout` and `docker run`)
/// — an unknown flag that clap refuses and a policy error alike —, with `--json` a JSON error
/// object on stdout; the command's own status passes through unchanged, 125 included.
#[test]
fn run_failures_exit_125_with_a_json_error_and_the_commands_status_passes_through() {
    let w = World::new();
    let marker = w.ws.join("MARKER");
    for flags in [vec!["--json", "--no-such-flag"], vec!["--json", "--mode", "yolo"], vec!["--json", "--allow-domain", "example.com"]] {
        let o = w.sandboxed_with(&flags, &marker_cmd(&marker));
        assert_eq!(o.code(), Some(125), "{flags:?}{}", o.describe());
        let v: Value = serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("{flags:?}: no JSON error object ({e}){}", o.describe()));
        assert_eq!(v["exit_code"], 125, "{v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        assert!(!marker.exists(), "{flags:?}: the command ran");
    }
    let o = w.sandboxed_with(&["--no-such-flag"], &marker_cmd(&marker));
    assert_eq!((o.code(), o.stdout.as_str()), (Some(125), ""), "{}", o.describe());
    for code in [0, 1, 2, 7, 125, 126] {
        let o = w.sandboxed_with(&["--quiet"], &format!("exit {code}"));
        assert_eq!(o.code(), Some(code), "{}", o.describe());
    }
}

/// Issue 58 item 4: the allowlist's lists in a config file whose network is denied are a warning
/// of every run and of `status`, not a failure of both; the same lists given as flags without
/// `--network allowlist` are a mistake of that command line (125); `--allow-cidr` exists.
#[test]
fn allowlist_settings_without_the_allowlist_warn_and_allow_cidr_exists() {
    let w = World::new();
    let cfg = w.xdg.join("localgpt/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let before = std::fs::read_to_string(&cfg).unwrap_or_else(|_| "[sandbox]\n".into());
    std::fs::write(&cfg, format!("{before}allow_domains = [\"pypi.org\"]\nallow_cidrs = [\"10.0.0.0/8\"]\n")).unwrap();
    let o = w.sandboxed("echo ran");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert!(o.stdout.contains("ran") && o.stderr.contains("allow_domains, allow_cidrs ignored: the network is denied"), "{}", o.describe());
    let s = w.localgpt_cmd(&["sandbox", "status"]).output().unwrap();
    assert!(s.status.success() && String::from_utf8_lossy(&s.stdout).contains("ignored"), "{s:?}");
    let o = w.sandboxed_with(&["--allow-cidr", "10.1.0.0/16"], "echo ran");
    assert_eq!(o.code(), Some(125), "{}", o.describe());
    assert!(o.stderr.contains("--allow-cidr needs --network allowlist"), "{}", o.describe());
    let o = w.sandboxed_with(&["--network", "allowlist", "--allow-cidr", "10.1.0.0/16"], "echo ran");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let o = w.sandboxed_with(&["--network", "allowlist", "--allow-cidr", "not-a-cidr"], "echo ran");
    assert_eq!(o.code(), Some(125), "{}", o.describe());
}

/// The sandbox's own config inside the workspace (`XDG_CONFIG_HOME` under it) is bound read-only
/// at Full: its mount point must be made without truncating the user's file. Until this test, every
/// run at Full emptied it when the workspace lay under `/tmp` (the sandbox's private tmpfs, where
/// the workspace is bound back and the file's mount point was made with `O_TRUNC`). Checked from
/// outside after the run, in a workspace under `/tmp` and in the world's.
#[test]
fn a_config_file_inside_the_workspace_survives_the_run() {
    let w = World::new();
    let level = suite_level(&w);
    let in_tmp = tempfile::Builder::new().prefix("lgws-").tempdir_in("/tmp").unwrap();
    for ws in [std::fs::canonicalize(in_tmp.path()).unwrap(), w.ws.clone()] {
        let cfg = ws.join("cfg/localgpt/config.toml");
        std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
        let text = "[sandbox]\nnetwork = \"deny\"\n# the user's own settings\n";
        std::fs::write(&cfg, text).unwrap();
        let wsarg = ws.display().to_string();
        let mut cmd = w.sandbox_cmd(&["--level", &level, "--workspace", &wsarg], &["cat cfg/localgpt/config.toml"]);
        cmd.env("XDG_CONFIG_HOME", ws.join("cfg")).current_dir(&ws);
        let o = run(cmd, "config inside the workspace");
        assert_eq!(o.code(), Some(0), "{}", o.describe());
        assert_eq!(o.stdout.trim_end(), text.trim_end(), "{}", o.describe());
        assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text, "the user's config in {} was changed by the run at {level}", ws.display());
    }
}
