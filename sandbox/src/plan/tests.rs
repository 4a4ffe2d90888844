//! The planner's unit tests.

use super::*;
use crate::config::{build_sandbox_policy, SandboxSettings};
use crate::detect::{Feature, LandlockSupport};
use crate::linux::landlock;
use crate::linux::landlock::PathRule;

fn caps(abi: u32, root: bool) -> Capabilities {
    Capabilities {
        platform: crate::detect::Platform::Linux,
        seatbelt: None,
        windows: None,
        kernel: "6.18.0-test".into(),
        landlock: LandlockSupport { abi, state: if abi > 0 { "available".into() } else { "not-built".into() }, detail: String::new() },
        seccomp: Feature { available: true, detail: String::new() },
        user_namespaces: Some(Feature { available: false, detail: "test: no userns".into() }),
        cgroup_pids: None,
        cgroup_memory: None,
        mem_total_bytes: 8 << 30,
        overlay_fs: true,
        seccomp_broker: Some(Feature { available: true, detail: String::new() }),
        is_root: root,
        uid: if root { 0 } else { 1000 },
        gid: if root { 0 } else { 1000 },
    }
}

fn policy(mode: SandboxMode, home: &Path, ws: &Path) -> SandboxPolicy {
    let s = SandboxSettings { mode, home: Some(home.to_path_buf()), dangerously_allow_full_access: true, ..Default::default() };
    build_sandbox_policy(ws, &s).unwrap()
}

fn world() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = crate::test_dir();
    let home = d.path().join("home");
    let ws = d.path().join("ws");
    for p in [".ssh", ".cargo/bin", ".config/git", "ws-other"] {
        std::fs::create_dir_all(home.join(p)).unwrap();
    }
    std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let home = std::fs::canonicalize(home).unwrap();
    let ws = std::fs::canonicalize(ws).unwrap();
    (d, home, ws)
}

fn rule<'a>(p: &'a Plan, path: &Path) -> Option<&'a PathRule> {
    p.landlock().unwrap().rules.iter().find(|r| r.path == path)
}

#[test]
fn access_classifies_reads_as_component_equality_does() {
    let (_d, home, ws) = world();
    let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let sys = crate::defaults::tables(pol.platform).system_read[0];
    let toolchain = home.join(crate::defaults::tables(pol.platform).home_toolchains[0]);
    // Spelled otherwise than the tables (a trailing slash, a `.` component): the same paths.
    pol.read_only_paths = vec![PathBuf::from(format!("{sys}/")), toolchain.join("."), home.join("ws-other")];
    let why: Vec<String> = Access::of(&pol).read.iter().skip(usize::from(pol.mode != SandboxMode::WorkspaceWrite)).map(|r| r.reason.clone()).collect();
    assert_eq!(why, ["system or toolchain", "system or toolchain", "allow_paths.read"]);
}

#[test]
fn workspace_write_plan() {
    let (_d, home, ws) = world();
    let p = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &caps(7, false), &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::Standard);
    let ll = p.landlock().unwrap();
    assert_eq!(ll.handled_net, 3);
    assert_eq!(ll.scopes, 3);
    assert_eq!(rule(&p, &ws).unwrap().access, landlock::read_write(7));
    assert_eq!(rule(&p, Path::new("/tmp")).unwrap().access, landlock::read_write(7));
    assert!(rule(&p, &home).is_none());
    assert!(rule(&p, &home.join(".ssh")).is_none());
    // ~/.cargo holds a credential file: granted by siblings.
    assert!(rule(&p, &home.join(".cargo")).is_none());
    assert!(rule(&p, &home.join(".cargo/bin")).is_some());
    assert!(rule(&p, &home.join(".cargo/credentials.toml")).is_none());
    assert!(rule(&p, Path::new("/proc")).unwrap().access & landlock::fs::EXECUTE == 0);
    assert!(p.seccomp().unwrap().program.len() > 10);
    assert!(p.rlimits().iter().any(|r| r.name == "RLIMIT_CORE" && r.value == 0));
    assert!(matches!(p.process_limit(), ProcessLimit::Rlimit { .. }));
    assert!(!p.drop_capabilities());
}

#[test]
fn a_granted_unix_socket_is_in_the_plan_and_nothing_else_opens() {
    let (_d, home, ws) = world();
    let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let sock = PathBuf::from("/run/user/1000/ssh-agent.sock");
    pol.allow_unix_sockets = vec![(sock.clone(), sock.clone())];
    let ctx = RunContext { caller_env: vec![("SSH_AUTH_SOCK".into(), sock.display().to_string()), ("GPG_TTY".into(), "x".into())], ..Default::default() };
    let p = make_plan(&pol, &caps(7, false), &ctx).unwrap();
    assert_eq!(p.unix_sockets, vec![UnixSocketGrant::new(&sock, &sock)]);
    assert!(p.env.vars.iter().any(|(k, v)| k == "SSH_AUTH_SOCK" && Path::new(v) == sock), "{:?}", p.env.vars);
    assert!(p.seccomp_listener());
    assert_eq!(p.helper_plan(1, Vec::new()).seccomp_listener, p.seccomp_listener(), "the helper loads the listener the plan says");
    let row = p.protections.iter().find(|x| x.id == ProtectionId::UnixSocketsOutside).unwrap();
    assert_eq!(row.state, ProtectionState::Enforced);
    assert!(row.detail.contains("and the granted /run/user/1000/ssh-agent.sock"), "{row:?}");
    assert!(p.warnings.iter().all(|w| !w.contains("GRANTED SOCKET")), "{:?}", p.warnings);
    // The same variable naming another socket stays out; no grant, no listener.
    let other = RunContext { caller_env: vec![("SSH_AUTH_SOCK".into(), "/tmp/other".into())], ..Default::default() };
    assert!(!make_plan(&pol, &caps(7, false), &other).unwrap().env.vars.iter().any(|(k, _)| k == "SSH_AUTH_SOCK"));
    // No grant: the runner still answers connect and listen (the sandbox's own servers).
    let plain = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &caps(7, false), &ctx).unwrap();
    assert!(plain.seccomp_listener() && plain.unix_sockets.is_empty());
    assert!(!plain.env.vars.iter().any(|(k, _)| k == "SSH_AUTH_SOCK"));
    // Where the runner cannot answer: no listener, and a grant is an error naming why.
    let mut old = caps(7, false);
    old.seccomp_broker = Some(Feature { available: false, detail: "needs pidfd_getfd (Linux 5.6): ENOSYS".into() });
    let p = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &old, &ctx).unwrap();
    assert!(!p.seccomp_listener());
    assert!(p.seccomp().unwrap().rules.iter().any(|r| r.syscall == "listen" && r.action == crate::linux::seccomp::SeccompDeny::Eperm));
    let e = make_plan(&pol, &old, &ctx).unwrap_err().to_string();
    assert!(e.contains("--allow-unix-socket") && e.contains("pidfd_getfd"), "{e}");
    // A container runtime's socket is said loudly.
    let docker = PathBuf::from("/var/run/docker.sock");
    pol.allow_unix_sockets = vec![(docker, PathBuf::from("/run/docker.sock"))];
    let p = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
    assert!(p.warnings.iter().any(|w| w.contains("GRANTED SOCKET /var/run/docker.sock") && w.contains("root on the host")), "{:?}", p.warnings);
}

/// Ablation is flags on the plan (issue 56): a build without the feature makes the same plan,
/// helper plan and seccomp program whatever the context asks to cut.
#[cfg(not(feature = "ablation"))]
#[test]
fn a_shipped_build_ignores_ablation_flags() {
    let (_d, home, ws) = world();
    let pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let reference = make_plan(&pol, &caps(7, true), &RunContext::default()).unwrap();
    let mut asked = make_plan(&pol, &caps(7, true), &RunContext { ablate: ProtectionId::ALL.to_vec(), ..Default::default() }).unwrap();
    assert!(asked.ablated.is_empty());
    // (The launch walk's records hold the time each directory was read.)
    assert_eq!(asked.nested_walks.len(), reference.nested_walks.len());
    asked.nested_walks.clone_from(&reference.nested_walks);
    assert_eq!(asked, reference);
    assert_eq!(asked.helper_plan(1, Vec::new()), reference.helper_plan(1, Vec::new()));
    assert!(ProtectionId::ALL.iter().all(|id| !crate::ablation::is(ProtectionId::ALL, *id)));
}

#[test]
fn allowlist_holds_only_where_the_proxy_is_the_only_way_out() {
    let (_d, home, ws) = world();
    let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    pol.network_access = crate::policy::NetworkPolicy::Allowlist;
    pol.network_allowlist = Some(crate::network::Allowlist::default());
    // Standard (the test capabilities have no user namespaces) with the runner answering
    // connect: the proxy on the port the runner holds, its variables set.
    let ctx = RunContext { proxy_port: Some(40_123), ..Default::default() };
    let p = make_plan(&pol, &caps(7, false), &ctx).unwrap();
    assert_eq!((p.level, p.proxy_port), (SandboxLevel::Standard, Some(40_123)));
    assert!(p.env.vars.iter().any(|(k, v)| k == "HTTPS_PROXY" && v == "http://127.0.0.1:40123"), "{:?}", p.env.vars);
    // pip gives up on a refused index after one retry, not five; a kept setting of the caller wins.
    assert!(p.env.vars.iter().any(|(k, v)| k == "PIP_RETRIES" && v == "1"), "{:?}", p.env.vars);
    let mut kept = pol.clone();
    kept.environment.keep.push("PIP_RETRIES".into());
    let caller = RunContext { caller_env: vec![("PIP_RETRIES".into(), "4".into())], ..ctx.clone() };
    let k = make_plan(&kept, &caps(7, false), &caller).unwrap();
    assert_eq!(k.env.vars.iter().filter(|(n, _)| n == "PIP_RETRIES").map(|(_, v)| v.as_str()).collect::<Vec<_>>(), ["4"]);
    let row = p.protections.iter().find(|x| x.id == ProtectionId::Network).unwrap();
    assert!(row.detail.contains("only through the proxy at 127.0.0.1:40123") && row.mechanism.contains("host's loopback"), "{row:?}");
    // Without the runner (or with nothing but a proxy variable) it would be bypassable:
    // refused, nothing planned.
    let mut old = caps(7, false);
    old.seccomp_broker = Some(Feature { available: false, detail: "needs pidfd_getfd (Linux 5.6)".into() });
    let e = make_plan(&pol, &old, &ctx).unwrap_err();
    assert!(matches!(e, SandboxError::LevelUnavailable(_)) && e.to_string().contains("could be bypassed"), "{e}");
    // Full: the command's resolv.conf names the runner's DNS stub (read-only copy), which
    // PID 1's socket serves; at Standard the host's stays.
    assert!(p.namespaces().is_none());
    let mut full = caps(7, false);
    full.user_namespaces = Some(Feature { available: true, detail: String::new() });
    let p = make_plan(&pol, &full, &RunContext::default()).unwrap();
    assert_eq!((p.level, p.proxy_port), (SandboxLevel::Full, Some(crate::network::PROXY_PORT)));
    if let Some(r) = std::fs::canonicalize("/etc/resolv.conf").ok().filter(|r| r.is_file()) {
        let o = p.namespaces().unwrap().config_overlays.iter().find(|o| o.target == r).expect("resolv.conf overlay");
        assert_eq!(o.content, crate::linux::compile::RESOLV_CONF);
        assert!(o.content.lines().filter(|l| l.starts_with("nameserver")).eq(["nameserver 127.0.0.1"]));
    }
    pol.network_access = crate::policy::NetworkPolicy::Deny;
    pol.network_allowlist = None;
    let p = make_plan(&pol, &full, &RunContext::default()).unwrap();
    assert!(!p.namespaces().unwrap().config_overlays.iter().any(|o| o.content == crate::linux::compile::RESOLV_CONF), "only with the allowlist");
}

#[test]
fn network_full_opens_only_the_network() {
    let (_d, home, ws) = world();
    let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    pol.network_access = crate::policy::NetworkPolicy::Full;
    let mut c = caps(7, false);
    c.user_namespaces = Some(Feature { available: true, detail: String::new() });
    for caps in [caps(7, false), c] {
        let p = make_plan(&pol, &caps, &RunContext::default()).unwrap();
        let state = |id: ProtectionId| p.protections.iter().find(|x| x.id == id).unwrap().state;
        assert_eq!(state(ProtectionId::Network), ProtectionState::Off, "{:?}", p.level);
        for id in [ProtectionId::UnixSocketsOutside, ProtectionId::AbstractSocketsOutside, ProtectionId::FsWriteOutside, ProtectionId::FsReadCredentials] {
            assert_eq!(state(id), ProtectionState::Enforced, "{id:?} at {:?}", p.level);
        }
        assert!(p.landlock().is_some_and(|l| l.handled_net == 0), "no TCP rules: the network is open");
        assert!(p.seccomp().unwrap().rules.iter().any(|r| r.syscall == "bind" && r.action == crate::linux::seccomp::SeccompDeny::UserNotif),
            "abstract names stay the runner's to prefix in the host's namespace");
        if let Some(ns) = p.namespaces() {
            assert!(ns.host_network && p.level == SandboxLevel::Full);
        }
    }
    let mut mac_pol = pol.clone();
    mac_pol.platform = crate::detect::Platform::Macos;
    let mac = make_plan(&mac_pol, &crate::detect::assumed_for(crate::detect::Platform::Macos), &RunContext::default()).unwrap_err();
    assert!(mac.to_string().contains("Linux only"), "{mac}");
}

#[test]
fn read_only_plan_has_no_writable_dirs() {
    let (_d, home, ws) = world();
    let p = make_plan(&policy(SandboxMode::ReadOnly, &home, &ws), &caps(7, true), &RunContext::default()).unwrap();
    let ll = p.landlock().unwrap();
    for r in &ll.rules {
        if r.reason != "device node" {
            assert_eq!(r.access & (landlock::fs::WRITE_FILE | landlock::fs::MAKE_REG), 0, "{r:?}");
        }
    }
    assert!(rule(&p, Path::new("/tmp")).is_none());
    assert!(p.drop_capabilities());
    assert!(matches!(p.process_limit(), ProcessLimit::Unbounded));
    let pc = p.protections.iter().find(|x| x.id == "process-count").unwrap();
    assert_eq!(pc.state, ProtectionState::Degraded);
}

#[test]
fn full_access_plan_is_unconfined_and_labelled() {
    let (_d, home, ws) = world();
    let p = make_plan(&policy(SandboxMode::FullAccess, &home, &ws), &caps(7, false), &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::None);
    assert!(p.landlock().is_none() && p.seccomp().is_none());
    assert!(p.warnings[0].contains("FULL ACCESS"));
    assert!(!p.helper_plan(1, Vec::new()).confine);
}

#[test]
fn abi_dependent_rights_and_degradations() {
    let (_d, home, ws) = world();
    let pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let p2 = make_plan(&pol, &caps(2, false), &RunContext::default()).unwrap();
    let ll = p2.landlock().unwrap();
    assert_eq!(ll.handled_net, 0);
    assert_eq!(ll.scopes, 0);
    assert_eq!(ll.handled_fs & landlock::fs::TRUNCATE, 0);
    let state = |p: &Plan, id: &str| p.protections.iter().find(|x| x.id == id).unwrap().state;
    // Below ABI 6 the runner checks every signal (and so the supervisor survives the
    // command: timeout-kill-tree holds); without the runner nothing stops a signal outside.
    assert_eq!(state(&p2, "signals-outside"), ProtectionState::Enforced);
    assert_eq!(state(&p2, "timeout-kill-tree"), ProtectionState::Enforced);
    let notified = |p: &Plan, name: &str| p.seccomp().unwrap().rules.iter().any(|r| r.syscall == name && r.action == crate::linux::seccomp::SeccompDeny::UserNotif);
    for name in ["kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal", "fcntl"] {
        assert!(notified(&p2, name), "{name}");
    }
    let mut unbrokered = caps(2, false);
    unbrokered.seccomp_broker = Some(Feature { available: false, detail: "test".into() });
    let p2n = make_plan(&pol, &unbrokered, &RunContext::default()).unwrap();
    assert_eq!(state(&p2n, "signals-outside"), ProtectionState::Degraded);
    assert_eq!(state(&p2n, "timeout-kill-tree"), ProtectionState::Degraded);
    assert!(!p2n.seccomp().unwrap().rules.iter().any(|r| r.syscall == "kill"));
    // Below ABI 3, seccomp stands in for Landlock's truncate right at Standard.
    assert_eq!(state(&p2, "fs-truncate-outside"), ProtectionState::Enforced);
    let rules = &p2.seccomp().unwrap().rules;
    assert!(rules.iter().any(|r| r.syscall == "truncate") && rules.iter().any(|r| r.syscall == "openat2"));
    let p1 = make_plan(&pol, &caps(1, false), &RunContext::default()).unwrap();
    assert_eq!(state(&p1, "fs-truncate-outside"), ProtectionState::Enforced);
    assert_eq!(state(&p2, "network"), ProtectionState::Enforced);
    let p7 = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
    assert_eq!(state(&p7, "signals-outside"), ProtectionState::Enforced);
    assert!(!p7.seccomp().unwrap().rules.iter().any(|r| r.syscall == "kill"), "ABI 6+: Landlock scopes signals");
    assert!(!p7.seccomp().unwrap().rules.iter().any(|r| r.syscall == "truncate"), "ABI 3+: Landlock handles truncate");
    assert_eq!(state(&p7, "fs-metadata-outside"), ProtectionState::Degraded);
    let p11 = make_plan(&pol, &caps(11, false), &RunContext::default()).unwrap();
    assert_eq!(p11.landlock().unwrap().handled_abi, landlock::MAX_KNOWN_ABI);
}

#[test]
fn levels_requirements_and_fallbacks() {
    let (_d, home, ws) = world();
    let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let p = make_plan(&pol, &caps(0, false), &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::Minimal);
    assert!(p.landlock().is_none() && p.seccomp().is_some());
    assert!(p.warnings[0].contains("minimal"));
    pol.require_level = Some(SandboxLevel::Standard);
    let e = make_plan(&pol, &caps(0, false), &RunContext::default()).unwrap_err().to_string();
    assert!(e.contains("Landlock"), "{e}");
    pol.require_level = None;
    pol.level = LevelSetting::Exactly(SandboxLevel::Full);
    assert!(make_plan(&pol, &caps(7, false), &RunContext::default()).is_err());
    pol.level = LevelSetting::Exactly(SandboxLevel::Minimal);
    assert_eq!(make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap().level, SandboxLevel::Minimal);
    let mut none_caps = caps(0, false);
    none_caps.seccomp.available = false;
    pol.level = LevelSetting::Auto;
    pol.unconfined_acknowledged = false;
    assert!(make_plan(&pol, &none_caps, &RunContext::default()).is_err());
}

#[test]
fn user_paths_must_exist_and_deny_wins() {
    let (d, home, ws) = world();
    let s = SandboxSettings {
        home: Some(home.clone()),
        extra_read: vec![d.path().join("missing")],
        ..Default::default()
    };
    // A missing user grant is skipped when the policy is built, and named in a warning…
    let pol = build_sandbox_policy(&ws, &s).unwrap();
    assert_eq!(pol.skipped_grants, vec![d.path().join("missing")]);
    assert!(!pol.read_only_paths.contains(&d.path().join("missing")));
    let p = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
    assert!(p.warnings.iter().any(|w| w.contains("missing") && w.contains("skipped")), "{:?}", p.warnings);
    // …a glob that matches nothing is an input error…
    let s = SandboxSettings { home: Some(home.clone()), extra_deny: vec![ws.join("*.env")], ..Default::default() };
    let e = build_sandbox_policy(&ws, &s).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("glob"), "{e}");
    // …and so are a grant inside a protected path and a denied file with other links.
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "").unwrap();
    let s = SandboxSettings { home: Some(home.clone()), extra_write: vec![ws.join(".git/config")], ..Default::default() };
    let e = build_sandbox_policy(&ws, &s).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("protected"), "{e}");
    std::fs::write(ws.join("secret"), "S").unwrap();
    std::fs::hard_link(ws.join("secret"), ws.join("alias")).unwrap();
    let s = SandboxSettings { home: Some(home.clone()), extra_deny: vec![ws.join("secret")], ..Default::default() };
    let e = build_sandbox_policy(&ws, &s).unwrap_err();
    assert!(e.is_usage() && e.to_string().contains("hard links"), "{e}");
    // A path that vanished after the policy was built is refused when the plan is made.
    let mut pol = build_sandbox_policy(&ws, &SandboxSettings { home: Some(home.clone()), ..Default::default() }).unwrap();
    pol.read_only_paths.push(d.path().join("missing"));
    assert!(make_plan(&pol, &caps(7, false), &RunContext::default()).is_err());
    let s = SandboxSettings { home: Some(home.clone()), extra_read: vec![home.clone()], ..Default::default() };
    let pol = build_sandbox_policy(&ws, &s).unwrap();
    let p = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
    assert!(rule(&p, &home).is_none());
    assert!(rule(&p, &home.join("ws-other")).is_some());
    assert!(!p.landlock().unwrap().rules.iter().any(|r| r.path.starts_with(home.join(".ssh"))));
}

#[test]
fn every_level_lists_every_protection_once() {
    // A row missing from the table would let an escape of that protection pass as "not
    // listed": every plan lists each id exactly once, whatever the kernel offers.
    let (_d, home, ws) = world();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let pol = policy(mode, &home, &ws);
        for abi in [0, 1, 3, 4, 7] {
            for userns in [false, true] {
                for root in [false, true] {
                    let mut c = caps(abi, root);
                    c.user_namespaces = Some(Feature { available: userns, detail: String::new() });
                    let Ok(p) = make_plan(&pol, &c, &RunContext::default()) else { continue };
                    let mut got: Vec<String> = p.protections.iter().map(|x| x.id.to_string()).collect();
                    got.sort();
                    let mut want: Vec<String> = ProtectionId::ALL.iter().map(ToString::to_string).collect();
                    want.sort();
                    assert_eq!(got, want, "{mode:?} abi {abi} userns {userns} root {root}: level {}", p.level);
                }
            }
        }
    }
}

#[test]
fn full_level_confines_reads_with_a_fresh_root() {
    use crate::linux::landlock::fs;
    let (_d, home, ws) = world();
    let mut c = caps(7, false);
    c.user_namespaces = Some(Feature { available: true, detail: String::new() });
    let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::Full);
    let ns = p.namespaces().unwrap();
    let root = ns.fresh_root.as_ref().expect("a fresh root where /dev is private");
    // The grants are bound (outermost only), the rest of the host is not.
    for k in [&ws, &home, Path::new("/dev"), Path::new("/proc")] {
        assert!(root.binds.iter().any(|b| k.starts_with(b)), "{} not in {:?}", k.display(), root.binds);
    }
    assert!(!root.binds.iter().any(|b| b == Path::new("/")), "{:?}", root.binds);
    for (i, b) in root.binds.iter().enumerate() {
        assert!(!root.binds.iter().enumerate().any(|(j, o)| i != j && b.starts_with(o)), "{} is inside another bind", b.display());
    }
    // Landlock handles no right that makes it check every open; what it still handles,
    // every rule stays within.
    let ll = p.landlock().unwrap();
    assert_eq!(ll.handled_fs & (fs::READ_FILE | fs::READ_DIR | fs::TRUNCATE), 0);
    assert_ne!(ll.handled_fs & (fs::EXECUTE | fs::WRITE_FILE | fs::MAKE_REG | fs::IOCTL_DEV), 0);
    assert!(ll.rules.iter().all(|r| r.access != 0 && r.access & !ll.handled_fs == 0));
    let row = |p: &Plan, id: ProtectionId| p.protections.iter().find(|x| x.id == id).unwrap().clone();
    assert_eq!(row(&p, ProtectionId::FsReadOutside).mechanism, "fresh root (mount namespace)");
    assert_eq!(row(&p, ProtectionId::FsTruncateOutside).mechanism, "read-only mounts");
    assert_eq!(row(&p, ProtectionId::FsReadCredentials).mechanism, "mount masks");
    // A denied path that no mount can hide (absent at launch, inside the writable workspace):
    // Landlock expands around it and keeps handling reads, as before.
    pol.deny_paths.push(ws.join("later/secret"));
    let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
    let ll = p.landlock().unwrap();
    assert!(!ll.expanded.is_empty());
    assert_eq!(ll.handled_fs & (fs::READ_FILE | fs::READ_DIR), fs::READ_FILE | fs::READ_DIR);
    assert_eq!(row(&p, ProtectionId::FsReadOutside).mechanism, "landlock");
    assert!(p.namespaces().unwrap().fresh_root.is_some());
    // Standard: no namespace, Landlock handles reads.
    let s = make_plan(&pol, &caps(7, false), &RunContext::default()).unwrap();
    assert_ne!(s.landlock().unwrap().handled_fs & fs::READ_FILE, 0);
    // More separate grants than a fresh root is built with: the host's tree and Landlock's
    // reads, as before.
    pol.deny_paths.pop();
    let d = crate::test_dir();
    for i in 0..=crate::linux::mounts::MAX_FRESH_ROOT_BINDS {
        let g = std::fs::canonicalize(d.path()).unwrap().join(format!("g{i}"));
        std::fs::create_dir_all(&g).unwrap();
        pol.read_only_paths.push(g);
    }
    let many = make_plan(&pol, &c, &RunContext::default()).unwrap();
    assert!(many.namespaces().unwrap().fresh_root.is_none());
    assert_ne!(many.landlock().unwrap().handled_fs & fs::READ_FILE, 0);
    assert_eq!(row(&many, ProtectionId::FsReadOutside).mechanism, "landlock");
}

#[test]
fn without_landlock_the_namespaces_confine_reads_with_a_fresh_root() {
    let (_d, home, ws) = world();
    // A kernel without Landlock, with user namespaces: the automatic level is minimal, with
    // the namespaces.
    let mut c = caps(0, false);
    c.user_namespaces = Some(Feature { available: true, detail: String::new() });
    let mut pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    pol.level = LevelSetting::Auto;
    let outside = std::fs::canonicalize(ws.parent().unwrap()).unwrap().join("granted");
    std::fs::create_dir_all(&outside).unwrap();
    pol.read_only_paths.push(outside.clone());
    let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::Minimal);
    assert!(p.landlock().is_none());
    let root = p.namespaces().unwrap().fresh_root.as_ref().expect("a fresh root without Landlock");
    for k in [&ws, &outside, Path::new("/dev"), Path::new("/proc"), Path::new("/usr")] {
        assert!(root.binds.iter().any(|b| k.starts_with(b)), "{} not in {:?}", k.display(), root.binds);
    }
    // The granted directory's parent is not bound whole: its other entries do not exist.
    assert!(!root.binds.iter().any(|b| b == outside.parent().unwrap() || b == Path::new("/")), "{:?}", root.binds);
    let row = |p: &Plan, id: ProtectionId| p.protections.iter().find(|x| x.id == id).unwrap().clone();
    let r = row(&p, ProtectionId::FsReadOutside);
    assert_eq!((r.state, r.mechanism.as_str()), (ProtectionState::Enforced, "fresh root (mount namespace)"));
    // A denied path absent at launch inside the writable workspace: no mount can hide it once
    // created, and without Landlock nothing else does (vector denied-path-absent-at-launch).
    assert_eq!(row(&p, ProtectionId::FsReadCredentials).state, ProtectionState::Enforced);
    let mut later = pol.clone();
    later.deny_paths.push(ws.join("later.env"));
    let p = make_plan(&later, &c, &RunContext::default()).unwrap();
    assert_eq!(p.namespaces().unwrap().unmaskable, vec![ws.join("later.env")]);
    assert_eq!(row(&p, ProtectionId::FsReadCredentials).state, ProtectionState::Degraded);
    assert!(p.warnings.iter().any(|w| w.contains("later.env")), "{:?}", p.warnings);
    // With Landlock (Full), Landlock denies it: the row holds.
    let mut full_caps = caps(7, false);
    full_caps.user_namespaces = c.user_namespaces.clone();
    let p = make_plan(&later, &full_caps, &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::Full);
    assert_eq!(row(&p, ProtectionId::FsReadCredentials).state, ProtectionState::Enforced);
    // `/` granted: nothing to build a root from, and the table says reads are not confined.
    pol.read_only_paths.push(PathBuf::from("/"));
    let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
    assert!(p.namespaces().unwrap().fresh_root.is_none());
    assert_eq!(row(&p, ProtectionId::FsReadOutside).state, ProtectionState::Degraded);
    // No user namespaces either: nothing confines reads.
    pol.read_only_paths.pop();
    let p = make_plan(&pol, &caps(0, false), &RunContext::default()).unwrap();
    assert!(p.namespaces().is_none());
    assert_eq!(row(&p, ProtectionId::FsReadOutside).state, ProtectionState::Degraded);
}

#[test]
fn full_level_plan_uses_mounts() {
    let (_d, home, ws) = world();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let mut c = caps(7, false);
    c.user_namespaces = Some(Feature { available: true, detail: String::new() });
    let pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::Full);
    let ns = p.namespaces().unwrap();
    // ~/.ssh is outside every kept path of the private $HOME; the credential file inside the
    // kept ~/.cargo is masked.
    let view = ns.home_view.as_ref().expect("private home");
    assert!(!view.keep.iter().any(|k| home.join(".ssh").starts_with(k)) && !ns.masks.iter().any(|m| m.path == home.join(".ssh")));
    assert!(ns.masks.iter().any(|m| m.path == home.join(".cargo/credentials.toml")));
    // The protected paths: the present .git gets a private copy (the namespace mounts it);
    // the absent ones are reviewed in place after the run.
    assert_eq!(ns.protected.iter().map(|x| x.path.clone()).collect::<Vec<_>>(), vec![ws.join(".git")]);
    assert_eq!(p.protected[..4].iter().map(|x| (x.path.clone(), x.absent, x.private)).collect::<Vec<_>>(),
        vec![(ws.join(".git"), false, true), (ws.join(".vscode"), true, false), (ws.join(".idea"), true, false), (ws.join(".localgpt"), true, false)]);
    assert!(p.protected[1..].iter().all(|x| x.absent && !x.private));
    assert!(ns.tmpfs.contains(&PathBuf::from("/tmp")));
    // Masked credentials need no sibling expansion: ~/.cargo is granted whole.
    assert!(rule(&p, &home.join(".cargo")).is_some());
    assert!(p.drop_capabilities(), "capabilities are dropped inside the user namespace");
    let want = u64::from(crate::defaults::default_max_processes());
    assert!(matches!(p.process_limit(), ProcessLimit::Rlimit { max } if *max == want));
    let state = |id: &str| p.protections.iter().find(|x| x.id == id).unwrap().state;
    for id in ["fs-metadata-outside", "fs-stat-secrets", "tmp-private", "pid-isolation", "process-count"] {
        assert_eq!(state(id), ProtectionState::Enforced, "{id}");
    }
    // Every present protected path is private: enforced, during the run too. A kernel
    // without overlay mounts in a user namespace (< 5.11) reviews them in place instead:
    // what is left after the run is still enforced, the host's view during it degraded.
    assert_eq!(state("workspace-persistence"), ProtectionState::Enforced);
    assert_eq!(state("workspace-persistence-live"), ProtectionState::Enforced);
    let mut old_kernel = c.clone();
    old_kernel.kernel = "5.10.0-46-cloud-amd64".into();
    let p510 = make_plan(&pol, &old_kernel, &RunContext::default()).unwrap();
    let st510 = |id: &str| p510.protections.iter().find(|x| x.id == id).unwrap().state;
    assert_eq!((st510("workspace-persistence"), st510("workspace-persistence-live")), (ProtectionState::Enforced, ProtectionState::Degraded));
    assert!(p510.namespaces().unwrap().protected.is_empty() && p510.protected.iter().all(|x| !x.private));
    // Without overlayfs loaded the mount will fail and the path be read-only: said beforehand.
    let mut no_overlay = c.clone();
    no_overlay.overlay_fs = false;
    let pno = make_plan(&pol, &no_overlay, &RunContext::default()).unwrap();
    let wp = pno.protections.iter().find(|x| x.id == "workspace-persistence").unwrap();
    // Read-only is stricter than a private copy (only git commits inside fail): enforced.
    assert_eq!(wp.state, ProtectionState::Enforced);
    assert!(wp.detail.contains("overlayfs is not loaded") && wp.detail.contains(".git"), "{}", wp.detail);
    assert!(p.env.vars.contains(&("TMPDIR".into(), "/tmp".into())));
    assert!(p.helper_plan(1, Vec::new()).namespaces.is_some());
    // Below ABI 3 the read-only mounts stop truncation outside; no seccomp guard is needed.
    let mut c2 = c.clone();
    c2.landlock.abi = 2;
    let p2 = make_plan(&pol, &c2, &RunContext::default()).unwrap();
    assert_eq!(p2.protections.iter().find(|x| x.id == "fs-truncate-outside").unwrap().state, ProtectionState::Enforced);
    assert!(!p2.seccomp().unwrap().rules.iter().any(|r| r.syscall == "truncate"));
    // Asking for standard explicitly drops the namespaces.
    let mut pol = pol;
    pol.level = LevelSetting::Exactly(SandboxLevel::Standard);
    assert!(make_plan(&pol, &c, &RunContext::default()).unwrap().namespaces().is_none());
    // At Standard a TMPDIR outside every writable grant points to /tmp (mktemp would fail);
    // one inside the workspace is kept.
    let ctx = |t: &Path| RunContext { caller_env: vec![("TMPDIR".into(), t.display().to_string())], ..RunContext::default() };
    let ps = make_plan(&pol, &c, &ctx(Path::new("/var/lib/elsewhere"))).unwrap();
    assert!(ps.env.vars.contains(&("TMPDIR".into(), "/tmp".into())) && ps.env.redirected.contains(&"TMPDIR".to_string()), "{:?}", ps.env.vars);
    let ps = make_plan(&pol, &c, &ctx(&ws.join("tmp"))).unwrap();
    assert!(ps.env.vars.contains(&("TMPDIR".into(), ws.join("tmp").display().to_string())), "{:?}", ps.env.vars);
}

#[test]
fn no_landlock_with_user_namespaces_uses_mounts_at_minimal() {
    let (_d, home, ws) = world();
    let mut c = caps(0, false);
    c.user_namespaces = Some(Feature { available: true, detail: String::new() });
    let pol = policy(SandboxMode::WorkspaceWrite, &home, &ws);
    let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
    assert_eq!(p.level, SandboxLevel::Minimal);
    assert!(p.landlock().is_none() && p.namespaces().is_some());
    let state = |id: &str| p.protections.iter().find(|x| x.id == id).unwrap();
    assert_eq!(state("fs-write-outside").state, ProtectionState::Enforced);
    assert_eq!(state("fs-write-outside").mechanism, "read-only mounts");
    assert_eq!(state("fs-read-credentials").mechanism, "mount masks");
    // Reads: the fresh root (see without_landlock_the_namespaces_confine_reads_with_a_fresh_root).
    assert_eq!(state("fs-read-outside").state, ProtectionState::Enforced);
    assert_eq!(state("fs-read-outside").mechanism, "fresh root (mount namespace)");
    assert_eq!(state("signals-outside").state, ProtectionState::Enforced);
    assert_eq!(state("fs-device-ioctl").mechanism, "private /dev");
    assert!(p.warnings[0].contains("a fresh root holds only the granted paths"), "{:?}", p.warnings);
    // An explicit --level minimal stays seccomp only.
    let mut pol = pol;
    pol.level = LevelSetting::Exactly(SandboxLevel::Minimal);
    let p = make_plan(&pol, &c, &RunContext::default()).unwrap();
    assert!(p.namespaces().is_none());
    assert_eq!(p.protections.iter().find(|x| x.id == "fs-write-outside").unwrap().state, ProtectionState::Off);
}

#[test]
fn cgroup_process_limit_when_available() {
    let (_d, home, ws) = world();
    let mut c = caps(7, true);
    c.cgroup_pids = Some(crate::detect::CgroupPids { base: "/sys/fs/cgroup/pids".into(), version: "v1".into() });
    let p = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &c, &RunContext::default()).unwrap();
    let want = crate::defaults::default_max_processes() + 2;
    assert!(matches!(p.process_limit(), ProcessLimit::Cgroup { max, .. } if *max == want));
    assert!(!p.rlimits().iter().any(|r| r.name == "RLIMIT_NPROC"));
    // The default: no per-file bound (the row says so), a login shell's soft descriptor
    // limit under a hard one that tools may raise it to.
    assert!(!p.rlimits().iter().any(|r| r.name == "RLIMIT_FSIZE"));
    assert_eq!(p.protections.iter().find(|x| x.id == "file-size").unwrap().state, ProtectionState::Off);
    let nofile = p.rlimits().iter().find(|r| r.name == "RLIMIT_NOFILE").unwrap();
    assert_eq!((nofile.soft, nofile.value), (Some(1024), crate::defaults::DEFAULT_OPEN_FILES));
}

/// The plans of fixed fixtures on the three platforms, against `tests/golden/plans/*.json`
/// (issue 56: a redesign step must leave them unchanged). Linux plans are projected onto what
/// does not depend on the host's filesystem (the protection table, the seccomp table, the
/// environment, the config copies, the warnings; digits in texts become `#`, the fixture's
/// directory `$D`; root fixtures where the host's /etc would decide a row); macOS and Windows plans, made for another OS, are compared whole (with
/// no shared scratch directory and a fixed helper path).
/// `GOLDEN_UPDATE=1` rewrites the files.
#[test]
fn plans_match_the_golden_files() {
    use crate::detect::{assumed_for, Platform};
    let (d, home, ws) = world();
    std::fs::write(home.join(".gitconfig"), "[user]\n\tname = me\n[http]\n\textraHeader = Authorization: Bearer abc\n").unwrap();
    std::fs::write(home.join(".npmrc"), "//registry.npmjs.org/:_authToken=abc\nsave-exact=true\n").unwrap();
    let root = std::fs::canonicalize(d.path()).unwrap();
    // The workspace's persistent tool caches are named after its inode: one name for all.
    let caches = root.join("home/.cache/localgpt/sandbox-caches");
    let norm = |s: &str| -> String {
        let mut s = s.to_string();
        for e in std::fs::read_dir(&caches).into_iter().flatten().flatten() {
            s = s.replace(&*e.file_name().to_string_lossy(), "ws-KEY");
        }
        let s = s.replace(&root.display().to_string(), "$D");
        let mut out = String::with_capacity(s.len());
        let mut last_digit = false;
        for c in s.chars() {
            if c.is_ascii_digit() {
                if !last_digit {
                    out.push('#');
                }
                last_digit = true;
            } else {
                out.push(c);
                last_digit = false;
            }
        }
        out
    };
    let with = |f: &dyn Fn(&mut Capabilities)| {
        let mut c = caps(7, false);
        f(&mut c);
        c
    };
    let userns = |c: &mut Capabilities| c.user_namespaces = Some(Feature { available: true, detail: String::new() });
    let allowlist = |p: &mut SandboxPolicy| {
        p.network_access = crate::policy::NetworkPolicy::Allowlist;
        p.network_allowlist = Some(crate::network::Allowlist::default());
    };
    let none = |_: &mut SandboxPolicy| {};
    let scratch = RunContext { scratch: Some(root.join("scratch")), proxy_port: Some(40_123), ..Default::default() };
    type Fixture<'a> = (&'a str, Capabilities, SandboxMode, &'a dyn Fn(&mut SandboxPolicy));
    let linux: Vec<Fixture<'_>> = vec![
        ("linux-standard-abi7-user", caps(7, false), SandboxMode::WorkspaceWrite, &none),
        ("linux-standard-abi7-root", caps(7, true), SandboxMode::WorkspaceWrite, &none),
        ("linux-standard-abi3-user", caps(3, false), SandboxMode::WorkspaceWrite, &none),
        ("linux-standard-abi5-no-broker", with(&|c| { c.landlock.abi = 5; c.seccomp_broker = Some(Feature { available: false, detail: "test".into() }) }), SandboxMode::WorkspaceWrite, &none),
        ("linux-full-abi7-user", with(&userns), SandboxMode::WorkspaceWrite, &none),
        ("linux-full-abi0-root", { let mut c = caps(0, true); userns(&mut c); c }, SandboxMode::WorkspaceWrite, &none),
        ("linux-minimal-abi0-root", caps(0, true), SandboxMode::WorkspaceWrite, &none),
        ("linux-read-only-abi7", caps(7, false), SandboxMode::ReadOnly, &none),
        ("linux-full-access", caps(7, false), SandboxMode::FullAccess, &none),
        ("linux-allowlist-standard", caps(7, false), SandboxMode::WorkspaceWrite, &allowlist),
        ("linux-allowlist-full", with(&userns), SandboxMode::WorkspaceWrite, &allowlist),
        ("linux-network-full", with(&userns), SandboxMode::WorkspaceWrite, &|p: &mut SandboxPolicy| p.network_access = crate::policy::NetworkPolicy::Full),
    ];
    let mut got: Vec<(String, String)> = Vec::new();
    for (name, c, mode, edit) in &linux {
        let mut pol = policy(*mode, &home, &ws);
        edit(&mut pol);
        let p = make_plan(&pol, c, &scratch).unwrap();
        let rows = |v: &[Protection]| v.iter().map(|r| serde_json::json!([r.id, r.state, norm(&r.mechanism), norm(&r.detail)])).collect::<Vec<_>>();
        let j = serde_json::json!({
            "level": p.level,
            "protections": rows(&p.protections),
            "seccomp": p.seccomp().map(|s| s.rules.iter().map(|r| serde_json::json!([r.syscall, r.nr, r.conditions, r.condition_text, r.action, r.reason, r.protections])).collect::<Vec<_>>()),
            "env": p.env.vars.iter().map(|(k, v)| format!("{k}={}", norm(v))).collect::<Vec<_>>(),
            "dropped": p.env.dropped,
            "redirected": p.env.redirected,
            "configs": p.configs.iter().map(|(f, r)| (norm(&f.display().to_string()), r.clone())).collect::<Vec<_>>(),
            "config_copies": p.config_copies.iter().map(|(f, t)| (norm(&f.display().to_string()), t.clone())).collect::<Vec<_>>(),
            "proxy_port": p.proxy_port,
            "warnings": p.warnings.iter().map(|w| norm(w)).collect::<Vec<_>>(),
        });
        got.push(((*name).to_string(), serde_json::to_string_pretty(&j).unwrap()));
    }
    for (platform, name) in [(Platform::Macos, "macos"), (Platform::Windows, "windows")] {
        let mut c = assumed_for(platform);
        (c.uid, c.gid, c.is_root) = (1000, 1000, false);
        for (mode, m) in [(SandboxMode::WorkspaceWrite, "workspace-write"), (SandboxMode::ReadOnly, "read-only")] {
            let mut pol = policy(mode, &home, &ws);
            pol.platform = platform;
            // Host-independent: no shared scratch dirs (whose nested repositories differ from
            // host to host), a fixed helper path.
            pol.writable_paths.clear();
            let ctx = RunContext { helper_exe: Some(PathBuf::from("/opt/localgpt/bin/localgpt")), ..scratch.clone() };
            let p = make_plan(&pol, &c, &ctx).unwrap();
            got.push((format!("{name}-{m}"), norm(&serde_json::to_string_pretty(&p).unwrap())));
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/plans");
    let update = std::env::var_os("GOLDEN_UPDATE").is_some();
    let mut differ = Vec::new();
    for (name, text) in &got {
        let file = dir.join(format!("{name}.json"));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&file, format!("{text}\n")).unwrap();
        } else if std::fs::read_to_string(&file).map(|t| t.trim_end().to_string()).ok().as_deref() != Some(text.as_str()) {
            differ.push(name.clone());
        }
    }
    assert!(differ.is_empty(), "plans differ from tests/golden/plans (GOLDEN_UPDATE=1 rewrites them once the change is meant): {differ:?}");
}

#[test]
fn a_terminal_of_its_own_is_named_in_a_private_dev_and_nothing_else_opens() {
    use crate::linux::landlock::fs;
    let (_d, home, ws) = world();
    let mut c = caps(7, false);
    c.user_namespaces = Some(Feature { available: true, detail: String::new() });
    let p = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &c, &RunContext::default()).unwrap();
    let plain = p.helper_plan(1, Vec::new());
    assert!(!plain.terminal && !plain.landlock.as_ref().unwrap().rules.iter().any(|(r, _)| r == Path::new(CONSOLE)));
    let mut h = plain.clone();
    h.with_terminal();
    assert!(h.terminal);
    let added: Vec<_> = h.landlock.as_ref().unwrap().rules.iter().filter(|r| !plain.landlock.as_ref().unwrap().rules.contains(r)).collect();
    let handled = h.landlock.as_ref().unwrap().fs;
    assert_eq!(added, [&(PathBuf::from(CONSOLE), (fs::READ_FILE | fs::WRITE_FILE | fs::IOCTL_DEV) & handled)], "one rule, for the terminal only");
    assert!(handled & fs::WRITE_FILE != 0);
    // Without a private /dev (Standard) the terminal keeps its host name: no rule.
    let std = make_plan(&policy(SandboxMode::WorkspaceWrite, &home, &ws), &caps(7, false), &RunContext::default()).unwrap();
    let mut h = std.helper_plan(1, Vec::new());
    let before = h.landlock.clone();
    h.with_terminal();
    assert!(h.terminal && h.landlock == before);
}
