//! The README's first command and the usage-error contract, driven with assert_cmd.

use assert_cmd::Command;

fn workspace() -> tempfile::TempDir {
    // Outside /tmp: the sandbox grants /tmp read-write, so a workspace there proves less.
    tempfile::tempdir_in("/var/tmp").expect("tempdir in /var/tmp")
}

fn localgpt(ws: &std::path::Path) -> Command {
    let mut c = match std::env::var_os("LOCALGPT_BIN") {
        Some(p) if !p.is_empty() => Command::new(p),
        _ => Command::cargo_bin("localgpt").expect("localgpt binary"),
    };
    c.current_dir(ws)
        .env("XDG_CONFIG_HOME", ws.join(".no-config"))
        .env_remove("LOCALGPT_CONFIG")
        .env_remove("LOCALGPT_REQUIRE_SANDBOX");
    c
}

#[test]
fn echo_hi_into_a_file_in_the_workspace() {
    let ws = workspace();
    localgpt(ws.path())
        .args(["sandbox", "run", "--", "echo hi > f && cat f"])
        .assert()
        .success()
        .stdout("hi\n");
    assert_eq!(std::fs::read_to_string(ws.path().join("f")).unwrap(), "hi\n", "checked from outside");
}

#[test]
fn unknown_mode_is_a_one_line_usage_error_and_runs_nothing() {
    let ws = workspace();
    let out = localgpt(ws.path())
        .args(["sandbox", "run", "--mode", "yolo", "--", "touch ran"])
        .assert()
        .code(125)
        .get_output()
        .clone();
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim().lines().count(), 1);
    assert!(!ws.path().join("ran").exists());
}

#[test]
fn explain_json_is_valid_json() {
    let ws = workspace();
    let out = localgpt(ws.path()).args(["sandbox", "explain", "--json"]).assert().success().get_output().clone();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert!(v["plan"]["protections"].as_array().is_some_and(|p| !p.is_empty()));
    assert!(v["plan"]["linux"]["seccomp"]["rules"].as_array().is_some_and(|r| r.len() > 20));
}
