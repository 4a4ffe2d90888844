//! The Linux protection table: for each protection of a plan, its state (enforced, degraded,
//! off), what enforces it and why — what `status`, `explain` and every run report.

use super::*;

/// The protection table for a plan.
#[must_use]
pub fn protections(plan: &Plan, caps: &Capabilities) -> Vec<Protection> {
    use ProtectionState::{Degraded, Enforced, Off};
    let mut v = Vec::new();
    if plan.level == SandboxLevel::None {
        let why = if plan.mode == SandboxMode::FullAccess { "full-access mode: no confinement" } else { "level none: no kernel confinement" };
        use ProtectionId as P;
        for id in [P::FsWriteOutside, P::FsReadCredentials, P::FsReadSystemSecrets, P::ConfigCredentials, P::Network, P::SignalsOutside, P::Ptrace, P::SyscallAbi, P::EnvSecrets, P::InheritedFds, P::ProcessCount] {
            v.push(prot(id, Off, "none", why));
        }
        v.push(prot(ProtectionId::TimeoutKillTree, Enforced, "supervisor (subreaper)", "every descendant is killed at the timeout and when the command exits"));
        v.push(prot(ProtectionId::OutputCap, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)));
        return v;
    }
    let f = Facts::of(plan);
    fs_confinement_rows(plan, &f, &mut v);
    fs_read_rows(plan, caps, &f, &mut v);
    v.extend(workspace_persistence(plan, caps, f.tree_killed));
    v.push(match f.ns {
        Some(n) if n.tmpfs.iter().any(|t| t == Path::new("/tmp")) => prot(ProtectionId::TmpPrivate, Enforced, "mount namespace (tmpfs)",
            format!("/tmp and /dev/shm are private tmpfs mounts{}, discarded after the run{}",
                n.tmpfs_size_bytes.map(|b| format!(" of at most {} MiB and {} inodes each", b >> 20, n.tmpfs_inodes.unwrap_or(0))).unwrap_or_default(),
                if n.tmpfs_rw_binds.is_empty() { String::new() } else {
                    format!("; only the granted {} of the host's are bound into them", path_list(&n.tmpfs_rw_binds))
                })),
        Some(n) if plan.mode == SandboxMode::WorkspaceWrite => prot(ProtectionId::TmpPrivate, Degraded, "mount namespace",
            format!("a writable path lies under /tmp, so /tmp stays the host's (read-write); private: {}", path_list(&n.tmpfs))),
        Some(_) => prot(ProtectionId::TmpPrivate, Enforced, "read-only mounts", "/tmp and /dev/shm are read-only in read-only mode"),
        None => prot(ProtectionId::TmpPrivate, Degraded, "none", "/tmp and /dev/shm are shared with the host (read-write); Full level gives a private /tmp"),
    });
    network_rows(plan, &f, &mut v);
    process_rows(plan, caps, &f, &mut v);
    v.push(prot(ProtectionId::OutputCap, Enforced, "runner", format!("{} bytes per stream, head kept", plan.max_output_bytes)));
    v
}

/// What the rows of a confining level are decided from.
struct Facts<'a> {
    /// The Landlock ABI the plan handles (0: none).
    abi: u32,
    /// Landlock confines the filesystem.
    ll: bool,
    /// The namespace plan (Full).
    ns: Option<&'a NamespacePlan>,
    /// Reads are confined by a fresh root rather than by Landlock.
    reads_by_mounts: bool,
    /// The per-run cgroup is out of the command's reach.
    cgroup_out_of_reach: bool,
    /// The runner checks every signal (below Landlock ABI 6).
    signal_guard: bool,
    /// Every descendant is killed when the command ends.
    tree_killed: bool,
    /// The sandbox's own network namespace.
    own_net: bool,
    /// The runner answers connect and listen (seccomp user notification).
    via_runner: bool,
}

impl<'a> Facts<'a> {
    fn of(plan: &'a Plan) -> Facts<'a> {
        let abi = plan.landlock().map_or(0, |l| l.handled_abi);
        let ll = plan.landlock().is_some();
        let ns = plan.namespaces();
        // A per-run cgroup bounds the command only if it cannot write cgroupfs: Landlock grants
        // `/sys` read-only, and Full's fresh sysfs has no cgroup mount. Without either (minimal), the
        // cgroup's files are the command's uid's (root's, or a delegated subtree's): it can raise its
        // limits or move itself out (red-team finding: `echo $$ > /sys/fs/cgroup/memory/cgroup.procs`
        // as root at minimal).
        let cgroup_out_of_reach = ll || ns.is_some();
        // A fresh root: reads are confined by the mount namespace, and Landlock, where there is
        // Landlock, handles no read right (nor truncate, which the read-only mounts refuse).
        let reads_by_mounts = ns.is_some_and(|n| n.fresh_root.is_some()) && plan.landlock().is_none_or(|l| l.handled_fs & crate::linux::landlock::fs::READ_FILE == 0);
        // Every descendant is killed when the command ends (the after-run review of the protected
        // paths relies on it: a survivor could write after the review).
        // Below ABI 6 the runner checks every signal instead (seccomp → the runner).
        let signal_guard = plan.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.syscall == "kill" && r.action == crate::linux::seccomp::SeccompDeny::UserNotif));
        let tree_killed = ns.is_some() || (matches!(plan.process_limit(), ProcessLimit::Cgroup { .. }) && cgroup_out_of_reach) || abi >= 6 || signal_guard;
        // The sandbox's own network namespace (Full, unless network = "full" keeps the host's).
        let own_net = ns.is_some_and(|n| !n.host_network);
        let via_runner = plan.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.action == crate::linux::seccomp::SeccompDeny::UserNotif));
        Facts { abi, ll, ns, reads_by_mounts, cgroup_out_of_reach, signal_guard, tree_killed, own_net, via_runner }
    }
}

/// The rows of what the command may write, truncate, link out and ioctl outside the workspace.
fn fs_confinement_rows(plan: &Plan, f: &Facts<'_>, v: &mut Vec<Protection>) {
    use ProtectionState::{Degraded, Enforced, Off};
    let Facts { abi, ll, ns, reads_by_mounts, .. } = *f;
    let truncate_guard = plan.seccomp().is_some_and(|s| s.rules.iter().any(|r| r.syscall == "truncate"));
    let fs_off = |id: ProtectionId, what: &str| prot(id, Off, "none", format!("{what}: no Landlock at level {}", plan.level));
    if ll {
        v.push(prot(ProtectionId::FsWriteOutside, Enforced, "landlock", "writes only in the workspace and granted paths"));
        v.push(if reads_by_mounts {
            prot(ProtectionId::FsReadCredentials, Enforced, "mount masks",
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null) or absent from the fresh root", ns.map_or(0, |n| n.masks.len())))
        } else {
            prot(ProtectionId::FsReadCredentials, Enforced, "landlock", "credential paths get no rule (siblings granted instead, snapshot at launch)")
        });
        v.push(if reads_by_mounts {
            prot(ProtectionId::FsTruncateOutside, Enforced, "read-only mounts", "everything outside the workspace and writable paths is mounted read-only")
        } else if abi >= 3 {
            prot(ProtectionId::FsTruncateOutside, Enforced, "landlock (ABI 3 truncate)", "truncate(2) needs the truncate right")
        } else if ns.is_some() {
            prot(ProtectionId::FsTruncateOutside, Enforced, "read-only mounts",
                format!("everything outside the workspace and writable paths is mounted read-only (Landlock ABI {abi} < 3 does not control truncation)"))
        } else if truncate_guard {
            prot(ProtectionId::FsTruncateOutside, Enforced, "seccomp (truncate guard)",
                format!("Landlock ABI {abi} < 3 does not control truncation: truncate(2) fails everywhere (ftruncate on a file opened for writing works) and open(O_RDONLY|O_TRUNC) fails"))
        } else {
            prot(ProtectionId::FsTruncateOutside, Degraded, "landlock", format!("Landlock ABI {abi} < 3 does not control truncate(2) on readable files"))
        });
        v.push(prot(ProtectionId::FsLinkRenameOut, Enforced, if abi >= 2 { "landlock (ABI 2 refer)" } else { "landlock (ABI 1 forbids reparenting)" },
            "files cannot be linked or renamed out of the workspace"));
        if abi >= 5 {
            v.push(prot(ProtectionId::FsDeviceIoctl, Enforced, "landlock (ABI 5 ioctl_dev)", "ioctl only on granted device nodes"));
        } else if !ns.is_some_and(|n| n.private_dev) {
            v.push(prot(ProtectionId::FsDeviceIoctl, Degraded, "landlock", format!("Landlock ABI {abi} < 5 does not control device ioctls")));
        }
    } else if let Some(n) = ns {
        v.push(prot(ProtectionId::FsWriteOutside, Enforced, "read-only mounts",
            "everything outside the workspace, the private /tmp and writable paths is mounted read-only; /dev is private"));
        v.push(if n.unmaskable.is_empty() {
            prot(ProtectionId::FsReadCredentials, Enforced, "mount masks",
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null); without Landlock, ones created during the run are readable", n.masks.len()))
        } else {
            prot(ProtectionId::FsReadCredentials, Degraded, "mount masks",
                format!("{} existing credential paths are masked, but without Landlock nothing hides a denied path that is absent at launch inside a writable grant once the command creates it: {}",
                    n.masks.len(), path_list(&n.unmaskable)))
        });
        v.push(prot(ProtectionId::FsTruncateOutside, Enforced, "read-only mounts", "everything outside the workspace and writable paths is mounted read-only"));
        v.push(prot(ProtectionId::FsLinkRenameOut, Enforced, "read-only mounts", "links and renames out of the workspace cross into read-only mounts and fail"));
        if !n.private_dev {
            v.push(fs_off(ProtectionId::FsDeviceIoctl, "device ioctls are not controlled"));
        }
    } else {
        v.push(fs_off(ProtectionId::FsWriteOutside, "writes outside the workspace are not confined"));
        v.push(fs_off(ProtectionId::FsReadCredentials, "credentials are readable"));
        v.push(fs_off(ProtectionId::FsTruncateOutside, "truncation outside the workspace is not confined"));
        v.push(fs_off(ProtectionId::FsLinkRenameOut, "links and renames out of the workspace are not confined"));
        v.push(fs_off(ProtectionId::FsDeviceIoctl, "device ioctls are not controlled"));
    }
}

/// The rows of what the command may read or see outside the workspace (credentials, secrets,
/// metadata, $HOME).
fn fs_read_rows(plan: &Plan, caps: &Capabilities, f: &Facts<'_>, v: &mut Vec<Protection>) {
    use ProtectionState::{Degraded, Enforced, Off};
    let Facts { abi, ll, ns, reads_by_mounts, .. } = *f;
    let scrubbed: Vec<String> = plan.configs.iter().filter(|(_, r)| !r.is_empty()).map(|(p, r)| format!("{} ({})", p.display(), r.join(", "))).collect();
    v.push(match (scrubbed.is_empty(), ns.is_some(), ll) {
        (true, _, _) => prot(ProtectionId::ConfigCredentials, Enforced, "scrubbed copies", format!("{} toolchain config files, none with credentials", plan.configs.len())),
        (false, true, _) => prot(ProtectionId::ConfigCredentials, Enforced, "scrubbed copies bound over the originals", format!("credentials removed from {}", scrubbed.join("; "))),
        (false, false, true) => prot(ProtectionId::ConfigCredentials, Enforced, "originals denied (landlock), tools pointed at scrubbed copies",
            format!("credentials removed from {} (cargo has no variable for its config file: it runs without it)", scrubbed.join("; "))),
        (false, false, false) => prot(ProtectionId::ConfigCredentials, Off, "none", format!("without Landlock or namespaces these stay readable: {}", scrubbed.join("; "))),
    });
    let n_secrets = plan.system_secrets.len();
    let who = if caps.is_root { "root-only files under /etc (shadow, host keys, …)" } else { "group-readable secrets under /etc" };
    v.push(match (ns.is_some(), ll) {
        (true, _) => prot(ProtectionId::FsReadSystemSecrets, Enforced, "mount masks", format!("{n_secrets} {who} are masked")),
        (false, true) => prot(ProtectionId::FsReadSystemSecrets, Enforced, "landlock (denied, siblings granted)", format!("{n_secrets} {who} are denied")),
        (false, false) if n_secrets == 0 && !caps.is_root => prot(ProtectionId::FsReadSystemSecrets, Enforced, "file permissions", "no secret under /etc is readable by this user"),
        (false, false) => prot(ProtectionId::FsReadSystemSecrets, Off, "none", format!("without Landlock or namespaces, {n_secrets} {who} stay readable")),
    });
    v.push(if reads_by_mounts {
        prot(ProtectionId::FsReadOutside, Enforced, "fresh root (mount namespace)",
            "the command's / holds only the workspace, system and toolchain dirs, scratch and granted paths: nothing else of the host exists")
    } else if ll {
        prot(ProtectionId::FsReadOutside, Enforced, "landlock", "reads only in the workspace, system and toolchain dirs, scratch and granted paths")
    } else if ns.is_some_and(|n| n.private_dev) {
        prot(ProtectionId::FsReadOutside, Degraded, "none",
            format!("no Landlock, and no fresh root for this policy (its grants include / or need more than {} binds): files outside the workspace (other than masked credentials) are readable", crate::linux::mounts::MAX_FRESH_ROOT_BINDS))
    } else {
        prot(ProtectionId::FsReadOutside, Degraded, "none", "no Landlock: files outside the workspace (other than masked credentials) are readable")
    });
    // (The private /dev row where Landlock does not control ioctls; the other cases are above.)
    if !ll || abi < 5 {
        if let Some(n) = ns.filter(|n| n.private_dev) {
            v.push(prot(ProtectionId::FsDeviceIoctl, Enforced, "private /dev",
                format!("only {} and a private devpts exist in /dev", path_list(&n.dev_nodes))));
        }
    }
    v.push(match ns {
        Some(_) => prot(ProtectionId::FsMetadataOutside, Enforced, "read-only mounts",
            "everything outside the workspace, the private /tmp and writable paths is mounted read-only: chmod, chown, utimensat and xattrs fail with EROFS"),
        None => prot(ProtectionId::FsMetadataOutside, Degraded, if ll { "landlock (partial)" } else { "none" },
            "Landlock does not control chmod, chown, utimensat or xattrs outside the workspace; Full level's read-only mounts do"),
    });
    v.push(match ns {
        Some(n) => prot(ProtectionId::FsStatSecrets, Enforced, "mount masks",
            if reads_by_mounts {
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null); outside the grants nothing of the host exists in the fresh root", n.masks.len())
            } else {
                format!("{} existing credential paths are masked (empty read-only tmpfs or /dev/null); paths created after launch are covered by Landlock only", n.masks.len())
            }),
        None => prot(ProtectionId::FsStatSecrets, Degraded, "none", "stat() of credential files still works (existence and size leak); Full level hides them"),
    });
    v.push(match ns.and_then(|n| n.home_view.as_ref()) {
        Some(h) => prot(ProtectionId::HomePrivate, Enforced, "mount namespace (empty read-only tmpfs over $HOME)",
            format!("$HOME holds only the {} granted paths under it; watches and stat() on $HOME see nothing else", h.keep.len())),
        None if ns.is_some() => prot(ProtectionId::HomePrivate, Enforced, "mount namespace", "$HOME is not separate from the granted paths (no $HOME, or the workspace contains it)"),
        None => prot(ProtectionId::HomePrivate, Degraded, if ll { "landlock (partial)" } else { "none" },
            "Landlock refuses to list or read $HOME but does not control inotify or stat(): a watch on $HOME sees the names of the files the user creates and opens; Full level gives a private $HOME"),
    });
}

/// The network and socket rows.
fn network_rows(plan: &Plan, f: &Facts<'_>, v: &mut Vec<Protection>) {
    use ProtectionState::{Enforced, Off};
    let Facts { abi, own_net, via_runner, .. } = *f;
    // Network, then host unix sockets: where the runner answers (seccomp user notification),
    // every `connect` and `listen` goes to it; it checks and makes the call itself.
    let granted = granted_sockets_text(plan);
    let and_granted = if granted.is_empty() { String::new() } else { format!(", and the granted {granted} (connect-only; stream sockets)") };
    let open_net = plan.network == crate::policy::NetworkPolicy::Full;
    v.push(match (own_net, &plan.network_allowlist) {
        _ if open_net => prot(ProtectionId::Network, Off, "none (network = \"full\")",
            "the host's network is open on request: TCP and UDP to any address, the host's loopback services and the cloud metadata address included; every other protection is kept, and the host's unix sockets stay out of reach"),
        (_, Some(a)) => {
            let list = |v: &[crate::network::DomainRule]| if v.is_empty() { "none".to_string() } else { v.iter().map(|d| d.text.clone()).collect::<Vec<_>>().join(", ") };
            prot(ProtectionId::Network, Enforced,
                match (own_net, via_runner) {
                    (true, true) => "private network namespace (only lo) + the runner's allowlist proxy + seccomp (socket families; connect → the runner, which captures TCP to any address but loopback to the proxy)",
                    (true, false) => "private network namespace (only lo) + the runner's allowlist proxy + seccomp (socket families)",
                    (false, _) => "the runner's allowlist proxy on the host's loopback + seccomp (TCP only; bind, listen and connect → the runner, which captures TCP to any address but loopback to the proxy and lets loopback reach only the proxy and the sandbox's own listeners)",
                },
                format!("only through the proxy at 127.0.0.1:{} (HTTP, CONNECT, SOCKS5){}: allowed domains {}, denied {}, ports {}; the runner resolves names itself and refuses loopback, private, link-local and other special addresses{}{}; a tunnel must show the requested host before it is dialled (its TLS server name, or the Host of the one HTTP request it carries){}; {}",
                    plan.proxy_port.unwrap_or(crate::network::PROXY_PORT),
                    if via_runner { ", and captured: a TCP connect to any address but loopback (a tool that ignores the proxy variables) is made to the proxy by the runner and judged as a tunnel to the name behind the address (its DNS answer) or to the name its opening carries; the name's own addresses are dialled, never the one asked for" } else { "" },
                    list(&a.allow), list(&a.deny), a.ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", "),
                    if a.cidrs.is_empty() { String::new() } else { format!(" outside allow_cidrs {}", a.cidrs.iter().map(|c| format!("{}/{}", c.addr, c.prefix)).collect::<Vec<_>>().join(", ")) },
                    if a.private_hosts.is_empty() { String::new() } else { format!(", except the private-range addresses of allow_private_hosts {}", list(&a.private_hosts)) },
                    if a.opaque.is_empty() { String::new() } else { format!(", except to allow_opaque_tunnels {} (unchecked)", list(&a.opaque)) },
                    if own_net && via_runner { "the command's DNS goes to the runner's stub on 127.0.0.1:53, which answers from the allowlist alone (allowed names: an address of their own in 198.18.0.0/15, captured; others: REFUSED) and forwards nothing" } else if own_net { "the command's DNS goes to the runner's stub on 127.0.0.1:53, which answers from the allowlist alone (allowed names: 127.0.0.1; others: REFUSED) and forwards nothing" } else { "the command has no UDP, so it resolves no name itself (the proxy resolves)" }))
        }
        (true, None) => prot(ProtectionId::Network, Enforced,
            if via_runner { "private network namespace (only lo) + seccomp (socket families) + every connect made by the runner" } else { "private network namespace (only lo) + seccomp (socket families)" },
            "TCP and UDP work on the sandbox's own loopback (local servers and their clients); nothing reaches the host's network; netlink routing queries only (they show lo); no packet or raw sockets"),
        (false, None) => {
            let mut net_mech = if via_runner { "seccomp (socket family and type; bind, listen and connect → the runner; no MSG_FASTOPEN, no SO_REUSEPORT)" } else { "seccomp (socket family, connect/bind/listen/accept)" }.to_string();
            if abi >= 4 {
                net_mech.push_str(" + landlock TCP (ABI 4)");
            }
            prot(ProtectionId::Network, Enforced, &net_mech, if via_runner {
                "TCP only on loopback, between the sandbox's own processes (the runner binds to loopback only, a wildcard address included, and connects only to the sandbox's own listeners; the host's loopback services answer connection refused); no UDP, SCTP, raw or packet sockets; netlink routing queries only, with no capability to change anything; unix sockets only between the sandbox's own processes"
            } else {
                "no AF_INET/AF_INET6/packet sockets (netlink: routing queries only, no capabilities to change anything); no connect, bind, listen or accept on any socket"
            })
        }
    });
    // Without the runner, unix sockets are socketpairs only wherever `connect` is free for TCP
    // (the sandbox's own namespace, or the host's opened on purpose).
    v.push(match (via_runner, own_net || open_net) {
        (true, _) => prot(ProtectionId::UnixSocketsOutside, Enforced, "seccomp (connect and listen → the runner, which checks what the path is bound to and makes the call itself)",
            format!("pathname sockets (docker.sock, D-Bus, systemd) are unreachable: connect reaches only sockets the sandbox's own processes listen on{and_granted}")),
        (false, true) => prot(ProtectionId::UnixSocketsOutside, Enforced, "seccomp (no socket(AF_UNIX): socketpairs only)",
            "pathname sockets (docker.sock, D-Bus, systemd) are unreachable: the command cannot create a unix socket to connect with"),
        (false, false) => prot(ProtectionId::UnixSocketsOutside, Enforced,
            if abi >= 9 { "seccomp (connect) + landlock resolve_unix (ABI 9)" } else { "seccomp (connect)" }, "pathname sockets (docker.sock, D-Bus, systemd) are unreachable"),
    });
    let mut abs_mech = if abi >= 6 { "seccomp (connect) + landlock scope (ABI 6)".to_string() } else { "seccomp (connect)".to_string() };
    if own_net {
        abs_mech.push_str(" + network namespace");
    }
    if via_runner && !own_net {
        abs_mech.push_str(" + bind and listen → the runner");
    }
    v.push(prot(ProtectionId::AbstractSocketsOutside, Enforced, &abs_mech,
        if own_net { "abstract unix sockets outside are unreachable, and the sandbox's own abstract names are invisible outside (network namespace)" } else { "abstract unix sockets outside are unreachable, and the command cannot listen on an abstract name (host processes could reach it)" }));
}

/// The rows of other processes, the kernel, capabilities and resource limits.
fn process_rows(plan: &Plan, caps: &Capabilities, f: &Facts<'_>, v: &mut Vec<Protection>) {
    use ProtectionState::{Degraded, Enforced};
    let Facts { abi, ll, ns, cgroup_out_of_reach, signal_guard, tree_killed, own_net, via_runner, .. } = *f;
    let cgroup_in_reach = "the filesystem is not confined at this level: the cgroup's files belong to the command's uid, which can raise its limits or move itself out of it";
    let sched = if via_runner { "seccomp (prlimit64; setpriority, sched_setscheduler, sched_setattr and ioprio_set on another pid → the runner, which allows the sandbox's own)" } else { "seccomp (prlimit64, setpriority, sched_setscheduler, sched_setattr, ioprio_set)" };
    v.push(match (ns.is_some(), abi >= 6) {
        (true, true) => prot(ProtectionId::SignalsOutside, Enforced, "PID namespace + landlock scope (ABI 6) + seccomp (prlimit64)", "no process outside the sandbox is visible, signalable or has its resource limits changed"),
        (true, false) => prot(ProtectionId::SignalsOutside, Enforced, "PID namespace + seccomp (prlimit64)", "no process outside the sandbox is visible, signalable or has its resource limits changed"),
        (false, true) => prot(ProtectionId::SignalsOutside, Enforced, &format!("landlock scope (ABI 6) + {sched}"),
            "no signals to processes outside the sandbox, and no changes to their resource limits (a hard RLIMIT_CPU or RLIMIT_FSIZE would make the kernel kill them) or scheduling (SCHED_IDLE or nice 19 under busy loops would starve the runner and delay the timeout)"),
        (false, false) if signal_guard => prot(ProtectionId::SignalsOutside, Enforced,
            &format!("seccomp (kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal, F_SETOWN, setpgid into another group → the runner, which allows the sandbox's own processes and groups and keeps everyone out of the supervisor's; F_SETOWN_EX, FIOSETOWN, SIOCSPGRP refused) + {sched}"),
            format!("Landlock ABI {abi} < 6 has no signal scoping, so the runner checks each signal: none reaches a process outside the sandbox; nor do changes to their resource limits or scheduling")),
        (false, false) => prot(ProtectionId::SignalsOutside, Degraded, sched, format!("Landlock ABI {abi} < 6 has no signal scoping: kill of same-uid processes outside works (changing their resource limits or scheduling does not); only a PID namespace (Full level) stops it")),
    });
    v.push(if ll {
        prot(ProtectionId::Ptrace, Enforced, "seccomp + landlock", "no ptrace, process_vm_readv/writev; /proc/<pid>/mem, environ and root of processes outside are refused")
    } else if ns.is_some() {
        prot(ProtectionId::Ptrace, Enforced, "seccomp + PID namespace", "no ptrace, process_vm_readv/writev; processes outside are not visible in the sandbox's /proc")
    } else {
        prot(ProtectionId::Ptrace, Degraded, "seccomp", "ptrace and process_vm_readv/writev fail, but without Landlock /proc/<pid>/mem, environ and root of same-uid processes outside stay accessible")
    });
    v.push(prot(ProtectionId::SyscallAbi, Enforced, "seccomp (arch check, x32 deny)", "i386 int 0x80 kills the process; x32 syscalls fail"));
    v.push(prot(ProtectionId::IoUring, Enforced, "seccomp", "io_uring_setup/enter/register fail"));
    v.push(prot(ProtectionId::TtyInjection, Enforced, "seccomp + setsid", "TIOCSTI and TIOCLINUX fail; the command has no controlling terminal, or (`--stdin inherit` on a terminal) one of its own that the runner relays: the user's terminal is never its controlling terminal, and what the CLI shows there passes its screen filter (sequences a terminal answers as typed input, OSC, DCS and C1 controls are dropped)"));
    v.push(match ns {
        Some(n) if n.private_dev => prot(ProtectionId::OtherTerminals, Enforced, "private devpts instance", "the user's own terminals under /dev/pts are not visible"),
        _ => prot(ProtectionId::OtherTerminals, Degraded, "none",
            "/dev/pts must stay usable for script and pty-based tools, so the user's other terminals (same uid) can be opened, read and written; Full level mounts a private devpts"),
    });
    v.push(prot(ProtectionId::Keyring, Enforced, "seccomp", "keyctl/add_key/request_key fail"));
    v.push(prot(ProtectionId::SysvIpc, Enforced, if ns.is_some() { "seccomp + IPC namespace" } else { "seccomp" }, "SysV shm/msg/sem calls fail"));
    v.push(prot(ProtectionId::NamespacesMount, Enforced, if ns.is_some() { "seccomp + max_user_namespaces = 0 inside" } else { "seccomp" },
        "unshare, setns, namespace clone flags, clone3 and the mount family fail"));
    v.push(prot(ProtectionId::KernelSurface, Enforced, "seccomp", "bpf, perf_event_open, userfaultfd, open_by_handle_at, kexec, modules fail"));
    v.push(if ns.is_some() {
        prot(ProtectionId::KernelInfo, Enforced, "/proc and /sys masks",
            if own_net { "the OCI runtime spec's default masked paths (kallsyms, kcore, keys, timer_list, sched_debug, interrupts, firmware, …) are hidden, /proc/sys, /proc/sysrq-trigger and the rest read-only; a fresh sysfs whose /sys/class/net lists only lo" }
            else { "the OCI runtime spec's default masked paths (kallsyms, kcore, keys, timer_list, sched_debug, interrupts, firmware, …) are hidden, /proc/sys, /proc/sysrq-trigger and the rest read-only; /sys/class/net hidden where no fresh sysfs can be mounted (network = \"full\" keeps the host's network namespace)" })
    } else {
        prot(ProtectionId::KernelInfo, Degraded, "none",
            "no mount namespace at this level: /proc/kallsyms, /proc/timer_list, /proc/keys, /sys/firmware and /sys/class/net are the host's (Landlock grants /proc whole: its per-process entries cannot be listed ahead)")
    });
    v.push(if ns.is_some() {
        prot(ProtectionId::PidIsolation, Enforced, "PID namespace + fresh /proc", "ps shows only the sandbox's processes")
    } else {
        prot(ProtectionId::PidIsolation, Degraded, "none", format!(
            "no PID namespace at level {}: ps shows host processes, and /proc/<pid>/cmdline of every host process is readable (passwords and tokens passed in argv leak); Landlock cannot grant /proc per process, and Full level mounts a fresh /proc",
            plan.level))
    });
    v.push(prot(ProtectionId::InheritedFds, Enforced, "helper (close_range)", "every fd above 2 is closed before exec"));
    v.push(prot(ProtectionId::EnvSecrets, Enforced, "environment allowlist", format!("{} caller variables dropped", plan.env.dropped.len())));
    v.push(if ns.is_some() {
        prot(ProtectionId::Capabilities, Enforced, "user namespace + capset + bounding set + no_new_privs",
            "no capability in the host's namespace; every capability dropped inside the sandbox's own")
    } else if plan.drop_capabilities() {
        prot(ProtectionId::Capabilities, Enforced, "capset + bounding set + no_new_privs", "running as root: every capability dropped")
    } else {
        prot(ProtectionId::Capabilities, Enforced, "no_new_privs", "no capabilities held; setuid binaries cannot gain privileges")
    });
    v.push(match plan.process_limit() {
        ProcessLimit::Cgroup { version, .. } if !cgroup_out_of_reach => prot(ProtectionId::ProcessCount, Degraded, &format!("cgroup {version} pids.max"), cgroup_in_reach),
        ProcessLimit::Cgroup { max, version, .. } => prot(ProtectionId::ProcessCount, Enforced, &format!("cgroup {version} pids.max"), format!("at most {} tasks (processes and their threads)", max - 2)),
        ProcessLimit::Rlimit { max } if ns.is_some() => prot(ProtectionId::ProcessCount, Enforced, "RLIMIT_NPROC in a user namespace",
            format!("at most {max} processes, counted inside the sandbox's own user namespace")),
        ProcessLimit::Rlimit { max } => prot(ProtectionId::ProcessCount, Degraded, "RLIMIT_NPROC",
            format!("RLIMIT_NPROC = {max} counts every process of uid {} system-wide (its current ones + the sandbox's)", caps.uid)),
        ProcessLimit::Unbounded => prot(ProtectionId::ProcessCount, Degraded, "none", "running as root without a writable pids cgroup: RLIMIT_NPROC does not apply to root"),
    });
    v.push(match plan.memory_limit() {
        MemoryLimit::Cgroup { version, .. } if !cgroup_out_of_reach => prot(ProtectionId::Memory, Degraded, &format!("cgroup {version} memory limit"), cgroup_in_reach),
        MemoryLimit::Cgroup { max_bytes, version, .. } => prot(ProtectionId::Memory, Enforced, &format!("cgroup {version} memory limit"),
            format!("at most {} MiB (the private /tmp's pages count too); the OOM killer acts inside the sandbox", max_bytes >> 20)),
        MemoryLimit::Unbounded => prot(ProtectionId::Memory, Degraded, "none",
            match plan.namespaces().and_then(|n| n.tmpfs_size_bytes) {
                Some(t) => format!("no writable memory cgroup: the command's own memory is bounded only by the host; the private /tmp and /dev/shm are bounded ({} MiB each)", t >> 20),
                None => "no writable memory cgroup: the command's memory (and what it writes to /tmp and /dev/shm) is bounded only by the host".to_string(),
            }),
    });
    v.push(file_size_row(&plan.limits));
    v.push(open_files_row(&plan.limits));
    v.push(prot(ProtectionId::CoreDumps, Enforced, "RLIMIT_CORE=0", "no core files"));
    let tree = if ns.is_some() {
        prot(ProtectionId::TimeoutKillTree, Enforced, "PID namespace (init) + supervisor",
            "the command runs under its own init; killing it kills every process in the namespace")
    } else if tree_killed {
        prot(ProtectionId::TimeoutKillTree, Enforced, "supervisor subreaper (+ cgroup when available)",
            "every descendant, including setsid'd and double-forked ones, is killed at the timeout and when the command exits")
    } else {
        prot(ProtectionId::TimeoutKillTree, Degraded, "supervisor subreaper",
            "without signal scoping or a cgroup out of the command's reach, a sandboxed process can kill the supervisor and orphan its descendants")
    };
    v.push(tree);
}

/// The `workspace-persistence` rows. `workspace-persistence`: after the run, nothing the command
/// planted in a protected path (present or absent at launch, at the top of a writable root or
/// nested, or made during the run) is left on the host — private copies at Full, the review
/// after the run everywhere. `workspace-persistence-live`: during the run too, for the paths
/// present at launch — only private copies (or read-only binds) give that; a path reviewed in
/// place is the host's until the run ends.
fn workspace_persistence(plan: &Plan, caps: &Capabilities, tree_killed: bool) -> [Protection; 2] {
    use ProtectionState::{Degraded, Enforced};
    if plan.mode != SandboxMode::WorkspaceWrite {
        let mech = if plan.namespaces().is_some() { "read-only mounts" } else { "landlock" };
        return [
            prot(ProtectionId::WorkspacePersistence, Enforced, mech, "the workspace is read-only"),
            prot(ProtectionId::WorkspacePersistenceLive, Enforced, mech, "the workspace is read-only"),
        ];
    }
    let rel = |p: &Path| p.strip_prefix(&plan.workspace).unwrap_or(p).display().to_string();
    let private: Vec<String> = plan.protected.iter().filter(|p| p.private).map(|p| rel(&p.path)).collect();
    let in_place: Vec<String> = plan.protected.iter().filter(|p| !p.private).map(|p| {
        let keys = if p.keys.is_empty() { String::new() } else { format!(" (its {} key only)", p.keys.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(" and ")) };
        if p.absent { format!("{}{keys} (absent)", rel(&p.path)) } else { format!("{}{keys}", rel(&p.path)) }
    }).collect();
    let present_in_place: Vec<String> = plan.protected.iter().filter(|p| !p.private && !p.absent).map(|p| rel(&p.path)).collect();
    let bad = plan.unprotectable.iter().map(|u| format!("{} ({})", rel(&u.path), u.why)).collect::<Vec<_>>().join("; ");
    let review = "after the run harmless changes are applied and code-running ones (hooks, executable git keys, redirection files, editor tasks and settings) are kept as pending changes (`localgpt sandbox pending`); a protected directory renamed or replaced by a link, a file or another directory is put back (what replaced it is kept as a pending change), one moved with a parent is reviewed where it went, nothing is written through a link, and the names created in subdirectories during the run (a new repository's hooks) are reviewed too";
    let mut detail = Vec::new();
    let review = if plan.nested_walks.is_empty() {
        review.to_string()
    } else if plan.walk_records.is_some() {
        #[cfg(target_os = "linux")]
        let service = if crate::guard::walkd::enabled() {
            "; in a large workspace a process of the user's keeps that walk warm with the kernel's change reports (the walk service; LOCALGPT_SANDBOX_WALK_SERVICE=0 turns it off)"
        } else {
            "; the walk service is off (LOCALGPT_SANDBOX_WALK_SERVICE=0): every run looks at every recorded directory"
        };
        #[cfg(not(target_os = "linux"))]
        let service = "";
        format!("{review}; the walk that looks for them remembers across runs what it read, so that no run can push a name out of the next run's reach{service}")
    } else {
        format!("{review}; the walk that looks for them keeps no records (where they would be, this run could write them, or that directory is not private to this user), so its budget counts every directory again")
    };
    if !private.is_empty() {
        detail.push(format!("private copies for the run (overlay; cannot be renamed or removed): {}", private.join(", ")));
    }
    if !in_place.is_empty() {
        detail.push(format!("reviewed in place after the run: {}", in_place.join(", ")));
    }
    detail.push(review);
    if !bad.is_empty() {
        detail.push(format!("not protected: {bad}"));
    }
    let no_overlay = !private.is_empty() && !caps.overlay_fs;
    if no_overlay {
        detail.insert(0, format!(
            "overlayfs is not loaded in this kernel and a sandbox cannot load its module: {} will be read-only for the run instead of private copies (git commits inside fail)",
            private.join(", ")
        ));
    }
    let mech = if private.is_empty() { "review after the run" } else { "private copies (overlay) + review after the run" };
    let survivors = !tree_killed && plan.protected.iter().any(|p| !p.private);
    if survivors {
        detail.push("the review after the run cannot be trusted here: without a PID namespace, a cgroup or Landlock signal scoping (ABI 6), a process of the command can outlive it and write after the review".into());
    }
    let after = prot(ProtectionId::WorkspacePersistence, if bad.is_empty() && !survivors { Enforced } else { Degraded }, mech, detail.join("; "));
    let absent_note = "names absent at launch are created on the host and reviewed after the run, at every level";
    let live = if present_in_place.is_empty() {
        prot(ProtectionId::WorkspacePersistenceLive, Enforced, if private.is_empty() { "nothing present to protect" } else { "private copies (overlay)" },
            format!("every protected path present at launch is private for the run (the host sees none of the command's changes until the review); {absent_note}"))
    } else {
        let why = if plan.namespaces().is_some() {
            "files are reviewed in place (a bound copy breaks `sed -i` and `git submodule add`)"
        } else {
            "no mount namespace at this level, so no private copies: Landlock cannot keep a path inside the writable workspace unwritable without making the workspace's own top level unwritable"
        };
        prot(ProtectionId::WorkspacePersistenceLive, Degraded, "review after the run",
            format!("present at launch and the host's until the run ends (a host process that reads them meanwhile, an editor or a git command in another terminal, sees the command's changes): {} ({why}); {absent_note}", present_in_place.join(", ")))
    };
    [after, live]
}

/// `release` (`uname -r`) is at least `major.minor`.
#[must_use]
pub fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut it = release.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse::<u32>().unwrap_or(0));
    let (ma, mi) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (ma, mi) >= (major, minor)
}

/// Why a run is at Minimal: what Standard lacks here, or that it was asked for.
pub(super) fn why_minimal(caps: &Capabilities) -> String {
    let missing = caps.missing_for(SandboxLevel::Standard);
    if missing.is_empty() { "minimal was asked for; this kernel offers more".into() } else { missing.join("; ") }
}

/// The granted host sockets, for the protection table ("" when none).
fn granted_sockets_text(plan: &Plan) -> String {
    plan.unix_sockets.iter().map(|g| g.given.display().to_string()).collect::<Vec<_>>().join(", ")
}

