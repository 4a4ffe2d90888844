//! The library's handle API as a multithreaded agent host uses it (`Sandbox` → `spawn` →
//! `SandboxedChild`): many runs at once without leaks, cancel and drop that leave no process of
//! the tree alive, stdin, output caps with a reader that never reads, and the timeout while the
//! host does not poll. Each check looks from outside the library: `/proc/self/fd`, this process's
//! children, the processes by command line, the cgroup and scratch directories.

mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use localgpt_sandbox::handle::{Command, Sandbox};
use localgpt_sandbox::policy::LevelSetting;
use localgpt_sandbox::SandboxSettings;
use support::*;

fn sandbox(w: &World, tweak: impl FnOnce(&mut SandboxSettings)) -> Sandbox {
    let mut s = SandboxSettings { home: Some(w.home.clone()), ..Default::default() };
    if let Ok(l) = std::env::var("LOCALGPT_TEST_LEVEL") {
        if !l.is_empty() {
            s.level = LevelSetting::parse(&l).expect("LOCALGPT_TEST_LEVEL");
        }
    }
    tweak(&mut s);
    let policy = localgpt_sandbox::build_sandbox_policy(&w.ws, &s).expect("policy");
    Sandbox::new(policy).expect("sandbox").helper_exe(localgpt_bin())
}

fn open_fds() -> Vec<String> {
    // A descriptor this process inherited (from a test of the parent process that leaks one on
    // purpose while this one was started) may name a file that is removed meanwhile: its target
    // then gains " (deleted)", which is no leak.
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .map(|e| {
            let to = std::fs::read_link(e.path()).map(|p| p.display().to_string()).unwrap_or_default();
            format!("{} -> {}", e.file_name().to_string_lossy(), to.trim_end_matches(" (deleted)"))
        })
        .collect();
    v.sort();
    v
}

/// This process's children (any thread's): reaped runs leave none.
fn children() -> Vec<String> {
    let mut v = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        v.extend(c.split_whitespace().map(str::to_string));
    }
    v
}

/// The per-run cgroups this process made (named after its pid), under every hierarchy.
fn our_cgroups() -> Vec<PathBuf> {
    let tag = format!("localgpt-sandbox-{}-", std::process::id());
    let mut found = Vec::new();
    let mut stack = vec![PathBuf::from("/sys/fs/cgroup")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name().to_string_lossy().starts_with(&tag) {
                    found.push(e.path());
                } else if stack.len() < 4096 {
                    stack.push(e.path());
                }
            }
        }
    }
    found
}

/// Whether `pid` is still this process's child (running or a zombie): a reaped run's helper
/// is gone (or its pid belongs to someone else now).
fn still_our_child(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a.split_whitespace().collect::<Vec<_>>()).unwrap_or_default();
    after.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id())
}

/// The leak check runs in a process of its own: other tests of this binary, in other threads
/// of the same process, open descriptors and start children meanwhile.
#[test]
fn two_hundred_runs_sixteen_at_a_time_leak_nothing() {
    let exe = std::env::current_exe().unwrap();
    let o = std::process::Command::new(exe)
        .args(["--exact", "leak_check_in_its_own_process", "--ignored", "--test-threads", "1", "--nocapture"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
#[ignore = "run alone in its own process by two_hundred_runs_sixteen_at_a_time_leak_nothing"]
fn leak_check_in_its_own_process() {
    let w = World::new();
    // Per-run caches, so that every run makes and removes a scratch directory of its own (the
    // persistent ones are the workspace's, kept by design: tests/works_inside.rs).
    let sb = sandbox(&w, |s| s.env.persistent_caches = false);
    // One warm-up run, so that lazily made process-wide things (the runner's helpers, the
    // zygote that forks them) exist before the count.
    assert_eq!(sb.spawn(&Command::shell("true")).unwrap().wait().unwrap().exit_code, 0);
    let (fds_before, cgroups_before, children_before) = (open_fds(), our_cgroups(), children());
    // The only child left after the warm-up is the zygote, and it holds nothing of this process:
    // no descriptor but its socket and /dev/null on 0 and 1 (2 is the host's stderr).
    assert_eq!(children_before.len(), 1, "children after one run: {children_before:?}");
    let zygote = &children_before[0];
    let cmdline = std::fs::read(format!("/proc/{zygote}/cmdline")).unwrap();
    assert!(cmdline.starts_with(b"localgpt-sandbox-zygote\0"), "{}", String::from_utf8_lossy(&cmdline));
    let mut zfds: Vec<String> = std::fs::read_dir(format!("/proc/{zygote}/fd")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    zfds.sort();
    assert_eq!(zfds, ["0", "1", "2", "3"], "the zygote's descriptors");
    assert!(std::fs::read_link(format!("/proc/{zygote}/fd/3")).unwrap().to_string_lossy().starts_with("socket:"));
    assert!(std::fs::read_to_string(format!("/proc/{zygote}/environ")).unwrap().is_empty(), "the zygote has no environment");
    let next = std::sync::atomic::AtomicUsize::new(0);
    let caches = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= 200 {
                    break;
                }
                // Each run writes a cache (its scratch directory is then made) and prints where.
                let mut child = sb.spawn(&Command::shell(format!("mkdir -p \"$XDG_CACHE_HOME/x\" && echo \"$XDG_CACHE_HOME\" && echo run {i}"))).unwrap();
                let mut out = String::new();
                child.stdout().unwrap().read_to_string(&mut out).unwrap();
                let r = child.wait().unwrap();
                assert_eq!(r.exit_code, 0, "run {i}: {r:?}");
                assert!(out.ends_with(&format!("run {i}\n")), "run {i}: {out:?}");
                caches.lock().unwrap().push((r.level, out.lines().next().unwrap_or_default().to_string()));
            });
        }
    });
    assert_eq!(caches.lock().unwrap().len(), 200);
    assert_eq!(open_fds(), fds_before, "descriptors leaked");
    assert_eq!(children(), children_before, "unreaped children");
    assert_eq!(our_cgroups(), cgroups_before, "per-run cgroups left behind");
    // Without a private /tmp the scratch directory is the host's: removed after each run.
    for (level, dir) in caches.lock().unwrap().iter().filter(|(l, _)| *l != localgpt_sandbox::SandboxLevel::Full) {
        let scratch = Path::new(dir).parent().unwrap();
        assert!(!scratch.exists(), "scratch dir {} of a {level} run left behind", scratch.display());
    }
}

#[test]
fn cancel_and_drop_leave_no_process_of_the_tree() {
    let w = World::new();
    let sb = sandbox(&w, |_| {});
    for how in ["cancel", "kill", "drop"] {
        let marker = format!("lg-handle-{how}-{}", unique_token());
        let script = format!("exec -a {marker} sleep 600 & exec -a {marker} sleep 600 & echo started; wait");
        let mut child = sb.spawn(&Command::shell(script)).unwrap();
        let mut out = child.stdout().unwrap();
        let mut b = [0u8; 8];
        out.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"started\n");
        let helper = child.id().expect("the helper's pid, once it has run the command");
        // Both sleeps run (bash's `exec -a` sets their argv[0]).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pids_with_cmdline(&[&marker, "600"]).len() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(pids_with_cmdline(&[&marker, "600"]).len(), 2, "{how}: the tree did not start");
        match how {
            "cancel" | "kill" => {
                if how == "cancel" {
                    child.cancel();
                } else {
                    child.kill();
                }
                let r = child.wait().unwrap();
                assert!(r.cancelled && r.exit_code == 130, "{how}: {r:?}");
            }
            _ => drop(child),
        }
        assert!(pids_with_cmdline(&[&marker, "600"]).is_empty(), "{how}: processes of the tree survive");
        assert!(!still_our_child(helper), "{how}: the helper {helper} was not reaped");
    }
}

#[test]
fn stdin_is_delivered_and_closed() {
    let w = World::new();
    let sb = sandbox(&w, |_| {});
    let mut child = sb.spawn(&Command::new("sh").arg("-c").arg("cat; echo eof").stdin_piped()).unwrap();
    let mut stdin = child.stdin().unwrap();
    stdin.write_all(b"hello from the host\n").unwrap();
    drop(stdin);
    let mut out = String::new();
    child.stdout().unwrap().read_to_string(&mut out).unwrap();
    let r = child.wait().unwrap();
    assert_eq!((r.exit_code, out.as_str()), (0, "hello from the host\neof\n"));
    // A piped stdin never taken is closed by wait(): the command sees its end, not the timeout.
    let mut child = sb.spawn(&Command::new("sh").arg("-c").arg("cat; echo eof").stdin_piped()).unwrap();
    let r = child.wait().unwrap();
    assert!(!r.timed_out && r.exit_code == 0, "{r:?}");
    let mut out = String::new();
    child.stdout().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(out, "eof\n");
}

#[test]
fn caps_hold_with_a_reader_that_never_reads_and_the_timeout_fires_unpolled() {
    let w = World::new();
    let sb = sandbox(&w, |s| {
        s.max_output_bytes = 4096;
        s.timeout_secs = 2;
    });
    // 50 MB of output nobody reads while the command runs: the runner is never blocked by the
    // host, keeps the head, and the run ends by itself.
    let mut child = sb.spawn(&Command::shell("head -c 50000000 /dev/zero; echo done >&2")).unwrap();
    let r = child.wait().unwrap();
    assert!(r.stdout_truncated && r.stdout_bytes == 50_000_000 && r.exit_code == 0, "{r:?}");
    let mut out = Vec::new();
    child.stdout().unwrap().read_to_end(&mut out).unwrap();
    assert!(out.len() < 4096 + 200 && out.starts_with(&[0u8; 4096]), "{} bytes kept", out.len());
    // The timeout, with the host not polling at all (it sleeps, then waits).
    let mut child = sb.spawn(&Command::shell("sleep 600")).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let r = child.wait().unwrap();
    assert!(r.timed_out && r.exit_code == 124, "{r:?}");
}

/// Confines the calling thread (only it) against making symlinks: by a seccomp filter that
/// fails `symlink` and `symlinkat` with `EPERM`, or by a Landlock domain that handles
/// `MAKE_SYM` and grants it nowhere. Returns false when this kernel has no Landlock.
fn forbid_symlinks_in_this_thread(landlock: bool) -> bool {
    // SAFETY: (whole function) prctl, a seccomp filter of our own and Landlock syscalls on the
    // calling thread, with pointers to live locals.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        if landlock {
            const MAKE_SYM: u64 = 1 << 12;
            let attr: [u64; 1] = [MAKE_SYM];
            let fd = libc::syscall(libc::SYS_landlock_create_ruleset, attr.as_ptr(), 8usize, 0u32);
            if fd < 0 {
                return false;
            }
            assert_eq!(libc::syscall(libc::SYS_landlock_restrict_self, fd as i32, 0u32), 0, "{}", std::io::Error::last_os_error());
            libc::close(fd as i32);
            return true;
        }
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let f = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        let prog = [
            f((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0, 0, 0),
            f((libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, 2, 0, libc::SYS_symlink as u32),
            f((libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, 1, 0, libc::SYS_symlinkat as u32),
            f((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, libc::SECCOMP_RET_ALLOW),
            f((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, eperm),
        ];
        let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr().cast_mut() };
        assert_eq!(libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog as *const _ as libc::c_ulong, 0, 0), 0, "{}", std::io::Error::last_os_error());
        true
    }
}

/// A run started from a host thread that confined itself after the host's first run (so after
/// the zygote that forks helpers was started) is as confined as that thread — as an exec'd
/// helper would be — by a seccomp filter and by a Landlock domain alike. Checked from outside:
/// the symlink is not there. The same command from an unconfined thread makes it.
#[test]
fn a_thread_that_confines_itself_after_the_first_run_gets_runs_as_confined() {
    let w = World::new();
    let sb = sandbox(&w, |_| {});
    // The warm-up: this process's zygote now exists, started by an unconfined thread.
    assert_eq!(sb.spawn(&Command::shell("true")).unwrap().wait().unwrap().exit_code, 0);
    for landlock in [false, true] {
        let link = w.ws.join(format!("link-{landlock}"));
        let run = || sb.spawn(&Command::shell(format!("ln -s target '{}'", link.display()))).and_then(|mut c| c.wait());
        let confined = std::thread::scope(|s| {
            s.spawn(|| {
                if !forbid_symlinks_in_this_thread(landlock) {
                    return None;
                }
                Some(run())
            })
            .join()
            .unwrap()
        });
        let Some(confined) = confined else {
            eprintln!("skipped: the Landlock case (no Landlock here)");
            continue;
        };
        assert!(std::fs::symlink_metadata(&link).is_err(), "landlock={landlock}: the confined thread's run made {} ({confined:?})", link.display());
        assert!(confined.map_or(true, |r| r.exit_code != 0), "landlock={landlock}: ln succeeded");
        // Bare of the thread's confinement, the same run makes the link.
        let r = run().unwrap();
        assert_eq!(r.exit_code, 0, "landlock={landlock}: unconfined run: {r:?}");
        assert!(std::fs::symlink_metadata(&link).is_ok(), "landlock={landlock}: the unconfined run made no link");
    }
}

/// Nothing of the host reaches the command through the helper's start (the zygote's, in this
/// multithreaded test process): a descriptor the host holds open without close-on-exec, and the
/// host's own environment variables that the plan does not pass.
#[test]
fn the_hosts_descriptors_and_environment_do_not_reach_the_command() {
    use std::os::fd::AsRawFd;
    let w = World::new();
    let sb = sandbox(&w, |_| {});
    let canary = std::fs::File::open(&w.canary).unwrap();
    // An inheritable duplicate (dup clears close-on-exec), as a careless host would hold.
    // SAFETY: dup of a descriptor we own; closed below.
    let leaky = unsafe { libc::dup(canary.as_raw_fd()) };
    assert!(leaky > 2);
    // What the test runner sets (the allowlist passes the toolchain's own CARGO_HOME and RUST*).
    let host_vars: Vec<String> = std::env::vars().map(|(k, _)| k).filter(|k| k.starts_with("NEXTEST") || k.starts_with("CARGO_PKG") || k == "CARGO_MANIFEST_DIR").collect();
    let mut child = sb.spawn(&Command::shell("ls -l /proc/self/fd/; env")).unwrap();
    let mut out = String::new();
    child.stdout().unwrap().read_to_string(&mut out).unwrap();
    let r = child.wait().unwrap();
    // SAFETY: closing our own duplicate.
    unsafe { libc::close(leaky) };
    assert_eq!(r.exit_code, 0, "{r:?}");
    let canary_name = w.canary.file_name().unwrap().to_string_lossy().into_owned();
    assert!(!out.contains(&canary_name), "the host's descriptor reached the command:\n{out}");
    for line in out.lines().filter(|l| l.contains(" -> ")) {
        let fd: i32 = line.split(" -> ").next().unwrap().split_whitespace().last().unwrap().parse().unwrap();
        assert!(fd <= 3, "descriptor {fd} in the command: {line}\n{out}");
    }
    for k in &host_vars {
        assert!(!out.lines().any(|l| l.starts_with(&format!("{k}="))), "{k} reached the command:\n{out}");
    }
}

/// This process's zygote (its only child between runs), by its command line.
fn zygote_pid() -> Option<String> {
    children().into_iter().find(|c| std::fs::read(format!("/proc/{c}/cmdline")).is_ok_and(|l| l.starts_with(b"localgpt-sandbox-zygote\0")))
}

/// Killing the zygote between runs (as a command at Minimal level, same uid, could) costs the
/// next run nothing but a new zygote. In a process of its own: the kill must not land in another
/// test's run.
#[test]
fn a_killed_zygote_is_replaced() {
    let exe = std::env::current_exe().unwrap();
    let o = std::process::Command::new(exe)
        .args(["--exact", "killed_zygote_in_its_own_process", "--ignored", "--test-threads", "1", "--nocapture"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
#[ignore = "run alone in its own process by a_killed_zygote_is_replaced"]
fn killed_zygote_in_its_own_process() {
    let w = World::new();
    let sb = sandbox(&w, |_| {});
    assert_eq!(sb.spawn(&Command::shell("true")).unwrap().wait().unwrap().exit_code, 0);
    let first = zygote_pid().expect("a zygote after the first run");
    assert!(std::process::Command::new("kill").args(["-KILL", &first]).status().unwrap().success());
    // Its keeper thread reaps it.
    let t0 = std::time::Instant::now();
    while children().contains(&first) && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!children().contains(&first), "the killed zygote was not reaped");
    let mut child = sb.spawn(&Command::shell("echo again")).unwrap();
    let mut out = String::new();
    child.stdout().unwrap().read_to_string(&mut out).unwrap();
    let r = child.wait().unwrap();
    assert_eq!((r.exit_code, out.as_str()), (0, "again\n"), "{r:?}");
    let second = zygote_pid().expect("a new zygote");
    assert_ne!(first, second);
}

/// A warm `Sandbox` reuses the Landlock ruleset of its earlier runs only while every rule's
/// path leads where it did (Standard; Full binds the grants afresh at every run): a granted
/// directory moved away and another made in its place is the grant at the next run, and the
/// moved one, now outside every grant, is out of reach. Checked from outside by what the
/// command could read; bare, the moved file is readable (the probe would escape).
#[test]
fn a_granted_directory_replaced_between_runs_is_granted_anew() {
    let w = World::new();
    let granted = w.outside.join("granted");
    std::fs::create_dir(&granted).unwrap();
    std::fs::write(granted.join("f"), "first").unwrap();
    let sb = sandbox(&w, |s| s.extra_read = vec![granted.clone()]);
    let read = |path: &Path| -> (i32, String) {
        let mut child = sb.spawn(&Command::new("cat").arg(path.as_os_str())).unwrap();
        let mut out = String::new();
        child.stdout().unwrap().read_to_string(&mut out).unwrap();
        (child.wait().unwrap().exit_code, out)
    };
    assert_eq!(read(&granted.join("f")), (0, "first".to_string()));
    assert_eq!(read(&granted.join("f")), (0, "first".to_string()), "the same grant at the next run");
    let moved = w.outside.join("moved");
    std::fs::rename(&granted, &moved).unwrap();
    std::fs::create_dir(&granted).unwrap();
    std::fs::write(granted.join("f"), "second").unwrap();
    assert_eq!(read(&granted.join("f")), (0, "second".to_string()), "the new directory is the grant");
    if needs_protections(&w, "a_granted_directory_replaced_between_runs_is_granted_anew (the moved directory)", &["fs-read-outside"]) {
        let (code, out) = read(&moved.join("f"));
        assert!(code != 0 && !out.contains("first"), "the moved-away directory stayed in reach: exit {code}, {out:?}");
    }
    assert_eq!(std::fs::read_to_string(moved.join("f")).unwrap(), "first", "bare, it is readable");
}
