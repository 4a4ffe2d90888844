//! Legitimate work that must succeed inside the default (workspace-write) sandbox, plus the
//! resource contract: timeout, process-tree kill, output caps.

mod support;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use support::*;

fn assert_ok(o: &Out) {
    assert_eq!(o.code(), Some(0), "expected exit 0{}", o.describe());
}

#[test]
fn write_and_read_a_file_in_the_workspace() {
    let w = World::new();
    let o = w.sandboxed("echo hi > f && cat f");
    assert_ok(&o);
    assert_eq!(o.stdout, "hi\n", "{}", o.describe());
    assert_eq!(
        fs::read_to_string(w.ws.join("f")).ok().as_deref(),
        Some("hi\n"),
        "f must exist in the workspace afterwards"
    );
}

#[test]
fn multi_argument_command_is_execed_directly() {
    let w = World::new();
    // Several arguments → exec'd as an argv, not through `bash -c` (the `$HOME` stays literal).
    let o = run(
        w.sandbox_cmd(&[], &["printf", "%s|%s\\n", "a b", "$HOME"]),
        "argv printf",
    );
    assert_ok(&o);
    assert_eq!(o.stdout, "a b|$HOME\n", "{}", o.describe());
}

#[test]
fn banner_on_stderr_unless_quiet() {
    let w = World::new();
    let o = w.sandboxed("true");
    assert_ok(&o);
    assert!(
        o.stderr
            .lines()
            .any(|l| l.starts_with("🔒 Running sandboxed")),
        "expected the banner on stderr{}",
        o.describe()
    );
    assert!(
        !o.stdout.contains("Running sandboxed"),
        "banner must not go to stdout{}",
        o.describe()
    );
    let q = w.sandboxed_with(&["--quiet"], "true");
    assert_ok(&q);
    assert!(
        !q.stderr.contains("Running sandboxed"),
        "--quiet must suppress the banner{}",
        q.describe()
    );
}

#[test]
fn tmp_and_dev_shm_and_devices_are_usable() {
    let w = World::new();
    let t = unique_token();
    let o = w.sandboxed(&format!(
        "set -e; echo x > /tmp/lg-{t}; cat /tmp/lg-{t}; rm /tmp/lg-{t}; \
         if [ -d /dev/shm ]; then echo y > /dev/shm/lg-{t}; rm /dev/shm/lg-{t}; fi; \
         echo z > /dev/null; head -c 4 /dev/zero | wc -c; head -c 4 /dev/urandom | wc -c; echo done"
    ));
    assert_ok(&o);
    assert!(o.stdout.ends_with("done\n"), "{}", o.describe());
}

#[test]
fn python_asyncio_runs() {
    let name = "python_asyncio_runs";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    let o = w.sandboxed(&format!(
        "{} -c 'import asyncio; asyncio.run(asyncio.sleep(0)); print(\"asyncio-ok\")'",
        sh_quote(py)
    ));
    assert_ok(&o);
    assert!(o.stdout.contains("asyncio-ok"), "{}", o.describe());
}

#[test]
fn unix_socketpair_works() {
    let name = "unix_socketpair_works";
    let Some(py) = python3_or_skip(name) else {
        return;
    };
    let w = World::new();
    let o = w.sandboxed(&format!(
        "{} -c 'import socket; a, b = socket.socketpair(); a.send(b\"ping\"); print(b.recv(4).decode())'",
        sh_quote(py)
    ));
    assert_ok(&o);
    assert_eq!(o.stdout, "ping\n", "{}", o.describe());
}

#[test]
fn git_init_and_commit() {
    let name = "git_init_and_commit";
    let Some(git) = which("git") else {
        skip(name, "git not installed");
        return;
    };
    let w = World::new();
    let o = w.sandboxed("git init -q && git -c user.name=a -c user.email=b@c commit -q --allow-empty -m x && echo committed");
    assert_ok(&o);
    assert!(o.stdout.contains("committed"), "{}", o.describe());
    // From outside: the repository and its commit exist in the workspace.
    let log = std::process::Command::new(git)
        .args(["-c", "safe.directory=*", "log", "--format=%s|%an|%ae"])
        .current_dir(&w.ws)
        .env("HOME", &w.home)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "x|a|b@c\n",
        "git log from outside: {log:?}"
    );
}

/// A workspace that is a subdirectory of a repository (`--workspace repo/sub`) and one that is a
/// linked worktree whose main repository lies outside it (`git worktree add ../wt`): `git add`
/// and `git commit` work and land in the repository, while the repository's hooks and config stay
/// protected as a workspace's own `.git` is (pending changes). Checked from outside: the host's
/// git log, the real hooks directory and config, `sandbox pending`; and bare, the same hook write
/// reaches the real file (the probe can escape).
#[test]
fn commits_from_a_subdirectory_and_a_linked_worktree_land_and_the_repository_stays_protected() {
    let name = "commits_from_a_subdirectory_and_a_linked_worktree_land_and_the_repository_stays_protected";
    if which("git").is_none() {
        skip(name, "git not installed");
        return;
    }
    let w = World::new();
    let id = "-c user.name=a -c user.email=b@c";
    let init = w.bare(&format!("git init -q repo && cd repo && mkdir sub && echo a > sub/a && git add . && git {id} commit -q -m init && git worktree add -q ../wt && echo ok"));
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let repo = w.ws.join("repo");
    let config_before = fs::read(repo.join(".git/config")).unwrap();
    let git_log = |dir: &std::path::Path, rev: &str| {
        let o = std::process::Command::new("git").args(["-c", "safe.directory=*", "log", "--format=%s", rev]).current_dir(dir).env("HOME", &w.home).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for (ws, branch, hook) in [(repo.join("sub"), "HEAD", "pre-commit"), (w.ws.join("wt"), "wt", "pre-push")] {
        let ws_arg = ws.display().to_string();
        let snippet = format!(
            "echo {STARTED}; echo work > f-{hook} && git add f-{hook} && git {id} commit -q -m from-{hook} && echo COMMITTED; \
             echo 'touch /tmp/pwned' > \"$(git rev-parse --git-common-dir)/hooks/{hook}\" && echo HOOK-WRITTEN; \
             git config core.fsmonitor 'touch /tmp/pwned' && echo CONFIG-WRITTEN"
        );
        let o = w.sandboxed_with(&["--workspace", &ws_arg], &snippet);
        assert!(o.stdout.contains(STARTED), "{}", o.describe());
        assert!(o.stdout.contains("COMMITTED"), "git commit in {ws_arg} must work\n{}", o.describe());
        assert!(o.stdout.contains("HOOK-WRITTEN") && o.stdout.contains("CONFIG-WRITTEN"), "{}", o.describe());
        // From outside: the commit is in the repository, the hook and the key are not.
        assert!(git_log(&repo, branch).starts_with(&format!("from-{hook}\n")), "{ws_arg}: the commit did not land: {}\n{}", git_log(&repo, branch), o.describe());
        assert!(!repo.join(".git/hooks").join(hook).exists(), "{ws_arg}: the hook reached the repository\n{}", o.describe());
        assert_eq!(fs::read(repo.join(".git/config")).unwrap(), config_before, "{ws_arg}: the repository's config changed\n{}", o.describe());
        let pending = parse_one_json(&run(w.localgpt_cmd(&["sandbox", "pending", "--json"]), "pending"));
        let targets: Vec<String> = pending["pending"].as_array().unwrap().iter().map(|c| c["target"].as_str().unwrap_or("").to_string()).collect();
        assert!(targets.iter().any(|t| t.ends_with(&format!(".git/hooks/{hook}"))), "{ws_arg}: {pending}");
        assert!(targets.iter().filter(|t| t.ends_with("repo/.git/config")).count() >= 1, "{ws_arg}: {pending}");
    }
    // A grant inside the git directory is refused (a part of it would go unreviewed).
    let o = w.sandboxed_with(&["--workspace", &repo.join("sub").display().to_string(), "--allow-write", &repo.join(".git/hooks").display().to_string()], "echo RAN");
    assert!(!o.stdout.contains("RAN") && o.stderr.contains("inside the git directory"), "{}", o.describe());
    // Bare, the same hook write reaches the real file.
    let b = w.bare("cd repo/sub && echo true > \"$(git rev-parse --git-common-dir)/hooks/pre-commit\" && echo HOOK-WRITTEN");
    assert!(b.stdout.contains("HOOK-WRITTEN") && repo.join(".git/hooks/pre-commit").exists(), "{}", b.describe());
}

/// A repository whose hook runs lint-staged (husky 9: `core.hooksPath = .husky/_`, and
/// `.husky/pre-commit` runs `npx lint-staged`): an agent's ordinary edits of `package.json` — a
/// dependency added at the top, a package's scripts, a new package made with its own manifest —
/// land, while a change of a `lint-staged` key (which names what the user's next commit runs) is
/// pending. Checked from outside: the files' contents and `sandbox pending`; and bare, the same
/// key change reaches the file.
#[test]
fn package_json_edits_land_under_lint_staged_and_its_key_stays_protected() {
    let name = "package_json_edits_land_under_lint_staged_and_its_key_stays_protected";
    if which("git").is_none() {
        skip(name, "git not installed");
        return;
    }
    let w = World::new();
    let init = w.bare(
        "git init -q && git config core.hooksPath .husky/_ && mkdir -p .husky/_ packages/a && printf '#!/bin/sh\\nsh .husky/pre-commit\\n' > .husky/_/pre-commit \
         && echo 'npx lint-staged' > .husky/pre-commit && printf '{\"name\": \"root\", \"lint-staged\": {\"*.js\": \"eslint\"}}\\n' > package.json \
         && printf '{\"name\": \"a\"}\\n' > packages/a/package.json && echo ok",
    );
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let edit = "sed -i 's/\"root\"/\"root\", \"dependencies\": {\"left-pad\": \"1.3.0\"}/' package.json \
                && printf '{\"name\": \"a\", \"scripts\": {\"test\": \"node --test\"}}\\n' > packages/a/package.json \
                && mkdir -p packages/b && printf '{\"name\": \"b\"}\\n' > packages/b/package.json && echo EDITED";
    let o = w.sandboxed(edit);
    assert!(o.stdout.contains("EDITED"), "{}", o.describe());
    let read = |rel: &str| fs::read_to_string(w.ws.join(rel)).unwrap_or_default();
    assert!(read("package.json").contains("left-pad") && read("package.json").contains("eslint"), "the dependency did not land: {}\n{}", read("package.json"), o.describe());
    assert!(read("packages/a/package.json").contains("node --test"), "{}", o.describe());
    assert!(read("packages/b/package.json").contains("\"b\""), "{}", o.describe());
    let no_pending = parse_one_json(&run(w.localgpt_cmd(&["sandbox", "pending", "--json"]), "pending"));
    assert!(!no_pending.to_string().contains("package.json"), "{no_pending}");
    // The key a hook reads: pending, the file as it was.
    let before = read("package.json");
    let key = "sed -i 's/eslint/eslint; touch \\/tmp\\/x/' package.json && printf '{\"name\": \"b\", \"lint-staged\": {\"*\": \"id\"}}\\n' > packages/b/package.json && echo KEYED";
    let o = w.sandboxed(key);
    assert!(o.stdout.contains("KEYED"), "{}", o.describe());
    assert_eq!(read("package.json"), before, "{}", o.describe());
    assert!(!read("packages/b/package.json").contains("lint-staged"), "{}", o.describe());
    let pending = parse_one_json(&run(w.localgpt_cmd(&["sandbox", "pending", "--json"]), "pending"));
    let targets: Vec<String> = pending["pending"].as_array().unwrap().iter().map(|c| c["target"].as_str().unwrap_or("").to_string()).collect();
    assert!(targets.iter().any(|t| t.ends_with("ws/package.json")) && targets.iter().any(|t| t.ends_with("packages/b/package.json")), "{pending}");
    // Bare, the key change reaches the file.
    let b = w.bare(key);
    assert!(b.stdout.contains("KEYED") && read("package.json").contains("touch"), "{}", b.describe());
}

/// Four runs in one repository, each staging a file, ending together: every file ends staged in
/// the real index, or its run kept its index as a pending change and said so (or, at Standard,
/// where the command writes the real index, its git failed visibly on git's own lock). Nothing is
/// lost in silence. Checked from outside: the host's `git diff --cached`, each run's `--json`.
#[test]
fn concurrent_runs_in_one_repository_lose_no_staged_file() {
    let name = "concurrent_runs_in_one_repository_lose_no_staged_file";
    if which("git").is_none() {
        skip(name, "git not installed");
        return;
    }
    let w = World::new();
    let init = w.bare("git init -q && git -c user.name=a -c user.email=b@c commit -q --allow-empty -m x && for i in 1 2 3 4; do echo $i > f$i; done && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let runs: Vec<_> = (1..=4)
        .map(|i| {
            let mut cmd = w.sandbox_cmd(&["--json"], &["bash", "-c", &format!("sleep 0.5; git add f{i}")]);
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
            cmd.spawn().expect("spawn")
        })
        .collect();
    let outs: Vec<_> = runs.into_iter().map(|c| c.wait_with_output().expect("wait")).collect();
    let staged = w.bare("git diff --cached --name-only");
    for (i, o) in outs.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("run {}: {e}: {}", i + 1, String::from_utf8_lossy(&o.stdout)));
        let file = format!("f{}", i + 1);
        let is_staged = staged.stdout.lines().any(|l| l == file);
        let kept = v["protected_review"]["pending"].as_array().is_some_and(|a| a.iter().any(|c| c["target"].as_str().is_some_and(|t| t.ends_with(".git/index")) && c["why"].as_str().is_some_and(|y| y.contains("changed on the host during the run"))));
        let failed = v["exit_code"].as_i64() != Some(0);
        assert!(is_staged || kept || failed, "{file}: neither staged, nor kept pending and said, nor a visible failure: {v}\nstaged: {}", staged.stdout);
    }
}

#[test]
fn cargo_version_runs() {
    let name = "cargo_version_runs";
    let Some(cargo) = which("cargo") else {
        skip(name, "no cargo executable by this user on PATH");
        return;
    };
    let real_home = std::env::var_os("HOME").map(PathBuf::from);
    let w = World::new();
    let mut cmd = w.sandbox_cmd(&[], &["cargo --version"]);
    match &real_home {
        // A rustup install under the real $HOME: give the sandbox that HOME so the default
        // policy's toolchain rules (~/.cargo, ~/.rustup) cover it.
        Some(h) if cargo.starts_with(h) => {
            cmd.env("HOME", h);
        }
        _ if cargo.starts_with("/usr")
            || cargo.starts_with("/bin")
            || cargo.starts_with("/opt") => {}
        _ => {
            skip(
                name,
                &format!(
                    "cargo lives at {} (not under $HOME nor a system dir)",
                    cargo.display()
                ),
            );
            return;
        }
    }
    let o = run(cmd, "sandboxed cargo --version");
    assert_ok(&o);
    assert!(o.stdout.starts_with("cargo "), "{}", o.describe());
}

#[test]
fn make_with_a_tiny_makefile() {
    let name = "make_with_a_tiny_makefile";
    if which("make").is_none() {
        skip(name, "make not installed");
        return;
    }
    let w = World::new();
    w.ws_file(
        "Makefile",
        "all: out.txt\n\nout.txt:\n\techo made > out.txt\n",
    );
    let o = w.sandboxed("make");
    assert_ok(&o);
    assert_eq!(
        fs::read_to_string(w.ws.join("out.txt")).ok().as_deref(),
        Some("made\n"),
        "{}",
        o.describe()
    );
}

#[test]
fn ps_runs() {
    let w = World::new();
    let o = w.sandboxed("ps && ps -ef | grep -c 'ps -ef'");
    assert_ok(&o);
    assert!(o.stdout.contains("PID"), "{}", o.describe());
}

#[test]
fn proc_self_fd_lists_only_stdio() {
    let w = World::new();
    let o = w.sandboxed("ls /proc/self/fd");
    assert_ok(&o);
    let fds: Vec<&str> = o.stdout.split_whitespace().collect();
    assert!(
        fds.contains(&"0") && fds.contains(&"1") && fds.contains(&"2"),
        "{}",
        o.describe()
    );
    // 0,1,2 plus the directory fd ls itself opened; no leaked fds.
    assert!(
        fds.len() <= 4,
        "unexpected extra fds in the sandboxed process: {fds:?}{}",
        o.describe()
    );
}

#[test]
fn pipeline_with_background_jobs_and_wait() {
    let w = World::new();
    let o = w.sandboxed("(sleep 0.3; echo bg-a) & (sleep 0.1; echo bg-b) & wait; echo done | tr a-z A-Z; seq 1 1000 | sort -rn | head -1");
    assert_ok(&o);
    for needle in ["bg-a\n", "bg-b\n", "DONE\n", "1000\n"] {
        assert!(
            o.stdout.contains(needle),
            "missing {needle:?}{}",
            o.describe()
        );
    }
}

#[test]
fn exit_code_is_passed_through() {
    let w = World::new();
    let o = w.sandboxed("exit 7");
    assert_eq!(o.code(), Some(7), "{}", o.describe());
    let o = w.sandboxed("kill -TERM $$");
    assert_eq!(
        o.code(),
        Some(128 + libc::SIGTERM),
        "died of SIGTERM → 128+15{}",
        o.describe()
    );
}

#[test]
fn allow_write_and_allow_read_extend_the_policy() {
    let w = World::new();
    let extra = w.root.join("extra-rw");
    fs::create_dir(&extra).unwrap();
    let ro = w.root.join("extra-ro");
    fs::create_dir(&ro).unwrap();
    fs::write(ro.join("data.txt"), "readable-data\n").unwrap();
    let extra_s = extra.to_string_lossy().into_owned();
    let ro_s = ro.to_string_lossy().into_owned();
    let o = w.sandboxed_with(
        &["--allow-write", &extra_s, "--allow-read", &ro_s],
        &format!(
            "echo w > {}/new.txt && cat {}/data.txt; echo nope > {}/x.txt 2>/dev/null || echo ro-denied",
            sh_quote(&extra),
            sh_quote(&ro),
            sh_quote(&ro)
        ),
    );
    assert_ok(&o);
    assert!(
        extra.join("new.txt").exists(),
        "--allow-write dir not writable{}",
        o.describe()
    );
    assert!(
        o.stdout.contains("readable-data"),
        "--allow-read file not readable{}",
        o.describe()
    );
    if needs_protections(&w, "allow_write_and_allow_read_extend_the_policy (read-only grant)", &["fs-write-outside"]) {
        assert!(!ro.join("x.txt").exists(), "--allow-read dir must stay read-only{}", o.describe());
        assert!(o.stdout.contains("ro-denied"), "{}", o.describe());
    }
}

// ---------------------------------------------------------------------------------------------
// Timeout and process-tree kill
// ---------------------------------------------------------------------------------------------

fn unique_sleep() -> String {
    // e.g. "1234.48213": unique per call so parallel tests (and other users) never match.
    let t = unique_token();
    let digits: String = t.chars().filter(char::is_ascii_digit).collect();
    format!("1234.{}", &digits[digits.len().saturating_sub(9)..])
}

/// Assert no `sleep <dur>` survives (checked right away, then after a 1 s grace for reaping).
fn assert_no_survivor(dur: &str, o: &Out) {
    let argv = ["sleep", dur];
    let now = pids_with_cmdline(&argv);
    if now.is_empty() {
        return;
    }
    std::thread::sleep(Duration::from_secs(1));
    let later = pids_with_cmdline(&argv);
    assert!(
        later.is_empty(),
        "process(es) `sleep {dur}` survived the sandboxed command: pids {later:?} (ppid/session: {}){}",
        later
            .iter()
            .map(|p| fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" | "),
        o.describe()
    );
    println!(
        "note: `sleep {dur}` still visible right after exit (pids {now:?}) but gone 1 s later"
    );
}

#[test]
fn timeout_kills_the_whole_tree_including_setsid_children() {
    let w = World::new();
    let dur = unique_sleep();
    let _cleanup = KillOnDrop(vec!["sleep".into(), dur.clone()]);
    let o = w.sandboxed_with(
        &["--timeout", "2"],
        &format!("setsid sh -c \"sleep {dur} &\"; sleep {dur}"),
    );
    assert!(
        o.elapsed < Duration::from_secs(10),
        "took {:?}{}",
        o.elapsed,
        o.describe()
    );
    assert_eq!(o.code(), Some(124), "timeout must exit 124{}", o.describe());
    assert_no_survivor(&dur, &o);
}

#[test]
fn timeout_reported_in_json() {
    let w = World::new();
    let dur = unique_sleep();
    let _cleanup = KillOnDrop(vec!["sleep".into(), dur.clone()]);
    let (o, v) = w.sandboxed_json(&["--timeout", "1"], &format!("sleep {dur}"));
    assert_eq!(o.code(), Some(124), "{}", o.describe());
    assert_eq!(v["timed_out"], serde_json::json!(true), "{v:#}");
    assert_eq!(v["exit_code"], serde_json::json!(124), "{v:#}");
    assert_no_survivor(&dur, &o);
}

#[test]
fn double_forked_daemon_is_killed_when_the_command_exits() {
    let w = World::new();
    let dur = unique_sleep();
    let _cleanup = KillOnDrop(vec!["sleep".into(), dur.clone()]);
    // The daemon's stdio goes to /dev/null: the command's exit alone must trigger the kill.
    let o = w.sandboxed(&format!(
        "setsid sh -c \"(sleep {dur} </dev/null >/dev/null 2>&1 &) &\"; sleep 0.2; echo parent-done"
    ));
    assert_ok(&o);
    assert!(o.stdout.contains("parent-done"), "{}", o.describe());
    assert_no_survivor(&dur, &o);
}

#[test]
fn daemon_holding_stdout_does_not_hang_the_run() {
    let w = World::new();
    let dur = unique_sleep();
    let _cleanup = KillOnDrop(vec!["sleep".into(), dur.clone()]);
    // The daemon keeps the command's stdout/stderr open: the run must still end when the
    // command exits (not at the 20 s timeout), with the command's exit code.
    let o = w.sandboxed(&format!("setsid sh -c \"sleep {dur} &\"; echo parent-done"));
    assert!(
        o.elapsed < Duration::from_secs(10),
        "run lasted {:?}{}",
        o.elapsed,
        o.describe()
    );
    assert_ok(&o);
    assert!(o.stdout.contains("parent-done"), "{}", o.describe());
    assert_no_survivor(&dur, &o);
}

// ---------------------------------------------------------------------------------------------
// Output caps
// ---------------------------------------------------------------------------------------------

const MIB: usize = 1 << 20;
const MARKER_SLACK: usize = 512;

#[test]
fn five_mib_of_stdout_is_cut_in_json() {
    let w = World::new();
    let (o, v) = w.sandboxed_json(&[], "head -c 5242880 /dev/zero | tr '\\0' a");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let out = v["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("stdout not a string"));
    assert!(
        out.len() <= MIB + MARKER_SLACK,
        "captured stdout is {} bytes",
        out.len()
    );
    assert!(out.starts_with(&"a".repeat(4096)), "the head must be kept");
    let payload = out.bytes().take_while(|b| *b == b'a').count();
    assert!(
        payload <= MIB,
        "{payload} bytes of payload kept (more than 1 MiB)"
    );
    assert_eq!(v["stdout_truncated"], serde_json::json!(true));
    assert_eq!(v["stderr_truncated"], serde_json::json!(false));
    assert_eq!(
        v["stdout_bytes"],
        serde_json::json!(5242880u64),
        "stdout_bytes = total produced"
    );
    assert!(
        o.stdout_raw.len() <= MIB + 64 * 1024,
        "the JSON document itself is {} bytes",
        o.stdout_raw.len()
    );
}

#[test]
fn five_mib_of_stdout_is_cut_when_streaming() {
    let w = World::new();
    let o = w.sandboxed_with(&["--quiet"], "head -c 5242880 /dev/zero | tr '\\0' a");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    // The payload is the leading run of 'a's (the marker line itself may contain an 'a').
    let payload = o.stdout_raw.iter().take_while(|b| **b == b'a').count();
    assert!(
        payload <= MIB,
        "{payload} bytes of payload streamed through"
    );
    assert!(
        payload >= 4096 && o.stdout_raw.starts_with(&[b'a'; 4096]),
        "the head must be kept"
    );
    assert!(
        o.stdout_raw.len() <= MIB + MARKER_SLACK,
        "stdout is {} bytes",
        o.stdout_raw.len()
    );
    assert!(
        o.stdout.contains("output truncated"),
        "missing the truncation marker line on stdout"
    );
}

#[test]
fn stderr_is_capped_separately() {
    let w = World::new();
    let (o, v) = w.sandboxed_json(
        &["--max-output", "1000"],
        "head -c 3000 /dev/zero | tr '\\0' e >&2; echo small-stdout",
    );
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let err = v["stderr"].as_str().expect("stderr string");
    assert!(
        err.len() <= 1000 + MARKER_SLACK,
        "stderr kept {} bytes{}",
        err.len(),
        o.describe()
    );
    assert_eq!(v["stderr_truncated"], serde_json::json!(true), "{v:#}");
    assert_eq!(v["stderr_bytes"], serde_json::json!(3000u64), "{v:#}");
    assert_eq!(v["stdout"], serde_json::json!("small-stdout\n"), "{v:#}");
    assert_eq!(v["stdout_truncated"], serde_json::json!(false), "{v:#}");
}

#[test]
fn keep_env_passes_a_variable_through() {
    let w = World::new();
    let mut cmd = w.sandbox_cmd(
        &["--keep-env", "LG_TEST_KEEP"],
        &["printf '%s\\n' \"${LG_TEST_KEEP-unset}\""],
    );
    cmd.env("LG_TEST_KEEP", "kept-value-3e9");
    let o = run(cmd, "sandboxed --keep-env LG_TEST_KEEP");
    assert_ok(&o);
    assert_eq!(o.stdout, "kept-value-3e9\n", "{}", o.describe());
}

/// In a subdirectory of a git repository, git finds the repository (its root is granted
/// read-only) and tools find their configs in the workspace's ancestors; nothing above the
/// workspace becomes writable (issue 19, item 4).
#[test]
fn the_repository_around_the_workspace_is_readable_not_writable() {
    let w = World::new();
    let git_ok = std::process::Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success());
    if !git_ok {
        skip("the_repository_around_the_workspace_is_readable_not_writable", "no git here");
        return;
    }
    let repo = w.ws.join("outer");
    let sub = repo.join("pkg/member");
    fs::create_dir_all(&sub).unwrap();
    fs::write(repo.join(".editorconfig"), "root = true\n").unwrap();
    fs::write(repo.join("top.txt"), "top\n").unwrap();
    let g = |args: &[&str]| {
        let o = std::process::Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap();
        assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    g(&["init", "-q"]);
    g(&["add", "-A"]);
    g(&["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"]);
    let ws = sub.display().to_string();
    let o = run(
        w.sandbox_cmd(&["--workspace", &ws], &["bash", "-c", "git rev-parse --show-toplevel && git log --oneline | wc -l && cat ../../.editorconfig && (echo x > ../../top.txt) 2>/dev/null; echo done"]),
        "git in a repository subdirectory",
    );
    assert_ok(&o);
    let top = fs::canonicalize(&repo).unwrap().display().to_string();
    assert_eq!(o.stdout, format!("{top}\n1\nroot = true\ndone\n"), "{}", o.describe());
    if needs_protections(&w, "the_repository_around_the_workspace_is_readable_not_writable (read-only root)", &["fs-write-outside"]) {
        assert_eq!(fs::read_to_string(repo.join("top.txt")).unwrap(), "top\n", "the repository root must stay read-only");
    }
}

/// A sandbox inside a sandbox (an agent starting a sub-agent) runs at the best level the outer
/// one leaves and says which (issue 19, item 8): the inner one cannot make a user namespace or
/// a cgroup there, and falls back instead of failing.
#[test]
fn a_sandbox_inside_a_sandbox_runs() {
    let w = World::new();
    let bin = localgpt_bin();
    let dir = bin.parent().unwrap().display().to_string();
    // `--level auto`: the suite's config may ask for a level explicitly, and an explicit level
    // the outer sandbox leaves no room for is refused (as it should be), not lowered.
    let inner = format!("{} sandbox run --json --level auto -- echo inner-ok", sh_quote(&bin));
    let o = run(w.sandbox_cmd(&["--allow-read", &dir], &["bash", "-c", &inner]), "nested run");
    assert_ok(&o);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("inner --json: {e}{}", o.describe()));
    assert_eq!(v["stdout"].as_str(), Some("inner-ok\n"), "{}", o.describe());
    let level = v["level"].as_str().unwrap_or_default();
    assert!(["standard", "minimal"].contains(&level), "the inner run says its level: {level:?}{}", o.describe());
}

/// `--allow-unix-socket "$SSH_AUTH_SOCK"`: `ssh-add -l` lists the agent's key, at every level
/// this host runs; without the flag the agent is unreachable. (That no other host socket is
/// reachable with a grant is the escape corpus's `granted-socket-*` vectors, checked from
/// outside.)
#[test]
fn ssh_agent_reachable_only_through_allow_unix_socket() {
    let name = "ssh_agent_reachable_only_through_allow_unix_socket";
    let (Some(agent), Some(add), Some(keygen)) = (which("ssh-agent"), which("ssh-add"), which("ssh-keygen")) else {
        skip(name, "openssh-client (ssh-agent, ssh-add, ssh-keygen) is not installed");
        return;
    };
    let w = World::new();
    let sock = w.outside.join("agent.sock");
    let key = w.outside.join("id_test");
    let mut child = std::process::Command::new(&agent).arg("-D").arg("-a").arg(&sock).stdout(std::process::Stdio::null()).spawn().expect("start ssh-agent");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !sock.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let ok = std::process::Command::new(&keygen).args(["-q", "-t", "ed25519", "-N", "", "-C", "lg-test-key", "-f"]).arg(&key).status().is_ok_and(|s| s.success())
        && std::process::Command::new(&add).arg("-q").arg(&key).env("SSH_AUTH_SOCK", &sock).status().is_ok_and(|s| s.success());
    assert!(ok, "could not set up the test agent");
    let levels = ["full", "standard", "minimal"];
    for level in levels {
        let mut cmd = w.sandbox_cmd(&["--quiet", "--level", level, "--allow-unix-socket", &sock.display().to_string()], &["ssh-add", "-l"]);
        cmd.env("SSH_AUTH_SOCK", &sock);
        let o = run(cmd, &format!("ssh-add -l with the agent granted at {level}"));
        if o.stderr.contains("unavailable") {
            skip(name, &format!("level {level} is unavailable here"));
            continue;
        }
        assert_ok(&o);
        assert!(o.stdout.contains("lg-test-key"), "level {level}{}", o.describe());
        let mut cmd = w.sandbox_cmd(&["--quiet", "--level", level, "--keep-env", "SSH_AUTH_SOCK"], &["ssh-add", "-l"]);
        cmd.env("SSH_AUTH_SOCK", &sock);
        let o = run(cmd, &format!("ssh-add -l without the grant at {level}"));
        assert_eq!(o.code(), Some(2), "without the grant the agent must be unreachable at {level}{}", o.describe());
        assert!(!o.stdout.contains("lg-test-key"), "{}", o.describe());
    }
    let _ = child.kill();
    let _ = child.wait();
    // A granted socket that does not exist: one warning, and the command runs.
    let missing = w.outside.join("gone.sock");
    let o = run(w.sandbox_cmd(&["--quiet", "--allow-unix-socket", &missing.display().to_string()], &["true"]), "missing socket");
    assert_ok(&o);
    assert_eq!(o.stderr.lines().filter(|l| !l.trim().is_empty()).count(), 1 + level_warning_lines(&w), "{}", o.describe());
    // Not a socket: refused before anything runs.
    let file = w.outside.join("plain");
    fs::write(&file, "x").unwrap();
    let o = run(w.sandbox_cmd(&["--quiet", "--allow-unix-socket", &file.display().to_string()], &["touch", "ran"]), "not a socket");
    assert_ne!(o.code(), Some(0), "{}", o.describe());
    assert!(o.stderr.contains("not a unix socket") && !w.ws.join("ran").exists(), "{}", o.describe());
    // A container runtime's socket is named as root-equivalent.
    let docker = w.outside.join("docker.sock");
    let _l = std::os::unix::net::UnixListener::bind(&docker).unwrap();
    let o = run(w.sandbox_cmd(&["--allow-unix-socket", &docker.display().to_string()], &["true"]), "docker.sock granted");
    assert_ok(&o);
    assert!(o.stderr.contains("GRANTED SOCKET") && o.stderr.contains("root on the host"), "{}", o.describe());
}

/// Tool caches persist across runs of one workspace (issue 54, item 7), in the sandbox's own
/// directory: never the host's caches (a poisoned host cache would be a persistence vector) and
/// never another workspace's. Checked from outside, the host's caches' writes also run bare.
#[test]
fn tool_caches_persist_per_workspace_and_never_reach_the_hosts() {
    let w = World::new();
    let ours = w.home.join(".cache/localgpt/sandbox-caches");
    let host_caches = [w.home.join(".cache/pip"), w.home.join(".npm/_cacache"), w.home.join("go/pkg/mod")];
    for d in &host_caches {
        fs::create_dir_all(d).unwrap();
    }
    let vars = "PIP_CACHE_DIR npm_config_cache UV_CACHE_DIR GOMODCACHE GOCACHE YARN_CACHE_FOLDER XDG_CACHE_HOME";
    let fill = format!("for v in {vars}; do d=$(printenv $v) && mkdir -p \"$d\" && echo cached-$v > \"$d/lg-marker\" || echo FAILED $v; done; echo \"DIR=$PIP_CACHE_DIR\"");
    let o = w.sandboxed(&fill);
    assert_ok(&o);
    assert!(!o.stdout.contains("FAILED"), "{}", o.describe());
    let pip = o.stdout.lines().find_map(|l| l.strip_prefix("DIR=")).map(PathBuf::from).unwrap();
    // From outside: in the sandbox's own directory, under this user's home.
    assert!(pip.starts_with(&ours), "{} is not under {}", pip.display(), ours.display());
    assert_eq!(fs::read_to_string(pip.join("lg-marker")).unwrap(), "cached-PIP_CACHE_DIR\n");
    // The next run of the workspace finds every cache.
    let o = w.sandboxed(&format!("for v in {vars}; do cat \"$(printenv $v)/lg-marker\"; done"));
    assert_ok(&o);
    for v in vars.split(' ') {
        assert!(o.stdout.contains(&format!("cached-{v}\n")), "{v} did not persist\n{}", o.describe());
    }
    // Another workspace has caches of its own.
    let other = w.root.join("other-ws");
    fs::create_dir_all(&other).unwrap();
    let o = w.sandboxed_with(&["--workspace", other.to_str().unwrap()], "test -e \"$PIP_CACHE_DIR/lg-marker\" && echo SEEN; echo \"DIR=$PIP_CACHE_DIR\"");
    assert_ok(&o);
    assert!(!o.stdout.contains("SEEN") && !o.stdout.contains(&format!("DIR={}\n", pip.display())), "{}", o.describe());
    // `persistent_caches = false`: per-run caches again, empty at every run.
    fs::create_dir_all(w.xdg.join("localgpt")).unwrap();
    fs::write(w.xdg.join("localgpt/config.toml"), "[sandbox.env]\npersistent_caches = false\n").unwrap();
    let o = w.sandboxed("test -e \"$PIP_CACHE_DIR/lg-marker\" && echo SEEN; echo \"DIR=$PIP_CACHE_DIR\"");
    assert_ok(&o);
    assert!(!o.stdout.contains("SEEN") && !o.stdout.contains(&ours.display().to_string()), "{}", o.describe());
    // The host's own caches: not writable from inside (they are, bare), and untouched — where
    // this level confines writes at all (minimal does not, and says so).
    if protection_state(&w, "fs-write-outside") != "enforced" {
        eprintln!("SKIP tool_caches_persist_per_workspace_and_never_reach_the_hosts (host caches part): fs-write-outside is not enforced at {}", suite_level(&w));
        return;
    }
    let poison = host_caches.iter().map(|d| format!("echo x > {}/lg-poison;", sh_quote(d))).collect::<String>();
    let o = w.sandboxed(&format!("{poison} echo DONE"));
    assert!(o.stdout.contains("DONE"), "{}", o.describe());
    for d in &host_caches {
        assert!(fs::read_dir(d).unwrap().next().is_none(), "{} changed from inside\n{}", d.display(), o.describe());
    }
    let b = w.bare(&format!("{poison} echo DONE"));
    assert!(b.stdout.contains("DONE"), "{}", b.describe());
    for d in &host_caches {
        assert!(d.join("lg-poison").exists(), "bare, {} is writable", d.display());
    }
}

/// The cargo home (issue 54 item 7): at Full a run that can download (a network other than
/// `deny`) writes it through a private layer kept for its workspace, and every later run of the
/// workspace has what it wrote (offline too), while the host's stays unchanged, another
/// workspace does not see it, a second run of the workspace at the same time gets it read-only
/// (said in a warning), and a link a run plants in the layer's store does not make a host
/// directory the next run's upper layer. A run without network and nothing kept gets no layer.
/// At Standard it stays read-only. Each is checked from outside; bare, the same writes land in
/// the host's cargo home.
#[test]
fn the_cargo_home_gets_a_private_layer_per_workspace() {
    let name = "the_cargo_home_gets_a_private_layer_per_workspace";
    let w = World::new();
    if protection_state(&w, "fs-write-outside") != "enforced" {
        eprintln!("SKIP {name}: fs-write-outside is not enforced at {}", suite_level(&w));
        return;
    }
    let cache = w.home.join(".cargo/registry/cache");
    fs::create_dir_all(&cache).unwrap();
    fs::write(cache.join("host.crate"), "host").unwrap();
    let write = "echo sandboxed > ~/.cargo/registry/cache/lg.crate && echo sandboxed > ~/.cargo/registry/cache/host.crate && echo WROTE";
    let unchanged = |o: &Out| {
        assert_eq!(fs::read_to_string(cache.join("host.crate")).unwrap(), "host", "the host's cargo home changed{}", o.describe());
        assert!(!cache.join("lg.crate").exists(), "the host's cargo home changed{}", o.describe());
    };
    // Without network and with nothing kept: no layer.
    let o = w.sandboxed(write);
    unchanged(&o);
    assert!(!o.stdout.contains("WROTE"), "{}", o.describe());
    let net = ["--network", "full"];
    let o = w.sandboxed_with(&net, write);
    unchanged(&o);
    let layered = suite_level(&w) == "full";
    assert_eq!(o.stdout.contains("WROTE"), layered, "{}", o.describe());
    if layered {
        // The next run of the workspace sees what this one wrote.
        let o = w.sandboxed("cat ~/.cargo/registry/cache/lg.crate ~/.cargo/registry/cache/host.crate; echo \"STORE=$(dirname \"$PIP_CACHE_DIR\")/cargo-home\"");
        assert_ok(&o);
        assert!(o.stdout.starts_with("sandboxed\nsandboxed\n"), "{}", o.describe());
        let store = o.stdout.lines().find_map(|l| l.strip_prefix("STORE=")).map(PathBuf::from).unwrap();
        assert!(store.join("upper/registry/cache/lg.crate").exists(), "{}", o.describe());
        unchanged(&o);
        // Another workspace sees the host's.
        let other = w.root.join("other-ws");
        fs::create_dir_all(&other).unwrap();
        let o = w.sandboxed_with(&["--workspace", other.to_str().unwrap()], "cat ~/.cargo/registry/cache/host.crate; test -e ~/.cargo/registry/cache/lg.crate && echo SEEN");
        assert_eq!(o.stdout, "host", "{}", o.describe());
        // A run at the same time in the same workspace: read-only, with a warning.
        let marker = w.ws.join("holding");
        let mut holder = w.sandbox_cmd(&["--quiet"], &["touch holding; sleep 3"]);
        let mut holder = holder.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("spawn");
        let t0 = std::time::Instant::now();
        while !marker.exists() && t0.elapsed() < std::time::Duration::from_secs(30) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = w.sandboxed("echo again > ~/.cargo/registry/cache/lg.crate && echo WROTE");
        assert!(holder.wait().unwrap().success());
        assert!(!o.stdout.contains("WROTE") && o.stderr.contains("another run of this workspace"), "{}", o.describe());
        // A link planted in the store is not followed: read-only again, with a warning.
        let target = w.root.join("link-target");
        fs::create_dir_all(&target).unwrap();
        let o = w.sandboxed(&format!("rm -rf {s}/upper && ln -s {t} {s}/upper && echo PLANTED", s = sh_quote(&store), t = sh_quote(&target)));
        assert!(o.stdout.contains("PLANTED"), "{}", o.describe());
        let o = w.sandboxed_with(&net, write);
        assert!(!o.stdout.contains("WROTE") && o.stderr.contains("no private layer"), "{}", o.describe());
        assert!(fs::read_dir(&target).unwrap().next().is_none(), "the planted link's target was written{}", o.describe());
        unchanged(&o);
    } else {
        skip(name, &format!("the private layer needs Full (at {} the cargo home stays read-only, checked)", suite_level(&w)));
    }
    let b = w.bare(write);
    assert!(b.stdout.contains("WROTE") && fs::read_to_string(cache.join("host.crate")).unwrap() == "sandboxed\n", "bare, the host's cargo home is writable{}", b.describe());
}

/// A workspace that is a linked worktree of a repository whose hook is the pre-commit framework's
/// (installed in the main repository's git directory, outside the workspace): the worktree's
/// `.pre-commit-config.yaml` is what the user's next `git commit` there runs, so an edit of it is
/// pending, not applied (issue 55 class 4). Checked from outside; the same edit bare lands.
#[test]
fn a_hook_managers_config_in_a_linked_worktree_is_protected() {
    let name = "a_hook_managers_config_in_a_linked_worktree_is_protected";
    if which("git").is_none() {
        skip(name, "git not installed");
        return;
    }
    let w = World::new();
    if protection_state(&w, "workspace-persistence") == "off" {
        eprintln!("SKIP {name}: workspace-persistence is off at {}", suite_level(&w));
        return;
    }
    let id = "-c user.name=a -c user.email=b@c";
    let init = w.bare(&format!(
        "git init -q repo && cd repo && git {id} commit -q --allow-empty -m init && git worktree add -q ../wt && \
         printf '#!/bin/sh\\n# File generated by pre-commit: https://pre-commit.com\\n' > .git/hooks/pre-commit && chmod 755 .git/hooks/pre-commit && \
         printf 'repos: []\\n' > ../wt/.pre-commit-config.yaml && echo ok"
    ));
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let (wt, config) = (w.ws.join("wt"), w.ws.join("wt/.pre-commit-config.yaml"));
    let edit = "printf 'repos:\\n- repo: local\\n  hooks:\\n  - id: x\\n    name: x\\n    entry: touch /tmp/pwned\\n    language: system\\n' > .pre-commit-config.yaml && echo EDITED";
    let o = w.sandboxed_with(&["--workspace", &wt.display().to_string()], edit);
    assert!(o.stdout.contains("EDITED"), "{}", o.describe());
    assert_eq!(fs::read_to_string(&config).unwrap(), "repos: []\n", "the edit reached the worktree\n{}", o.describe());
    assert!(o.stderr.contains(".pre-commit-config.yaml") && o.stderr.contains("pre-commit framework"), "the pending change says why\n{}", o.describe());
    let b = run(
        {
            let mut c = w.bare_cmd(edit);
            c.current_dir(&wt);
            c
        },
        "bare edit",
    );
    assert!(b.stdout.contains("EDITED") && fs::read_to_string(&config).unwrap().contains("entry: touch"), "bare, the edit lands\n{}", b.describe());
}
