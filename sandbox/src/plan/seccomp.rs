//! The seccomp rule table and its compilation to a BPF program.
//!
//! Every rule sits in [`seccomp_table`] with its reason; `explain` prints that table. The program
//! is compiled in the parent (the helper only loads it) and is a hand-written prologue followed
//! by a seccompiler-generated deny list:
//!
//! 1. architecture ≠ x86_64 → kill the process (i386 `int 0x80`, `socketcall`);
//! 2. x32 syscall numbers (`nr & 0x40000000`) → `EPERM` (seccompiler does not check them);
//! 3. `clone3` and `openat2` → `ENOSYS` (their flags and mode live in
//!    memory, so libc and careful callers fall back to `clone`/`openat`);
//! 4. the table → `EPERM`; everything else allowed.
//!
//! [`truncate_guard_rules`] are added below Landlock ABI 3 without a mount namespace (Standard):
//! there Landlock controls neither `truncate(2)` nor `open(O_RDONLY|O_TRUNC)` on a file it lets
//! the command read, so both are refused here (`ftruncate` needs an fd opened for writing, which
//! Landlock does control).
//!
//! `sendto`/`recvfrom`/`sendmsg`/`recvmsg` are deliberately allowed: asyncio's self-pipe and
//! cargo's jobserver use them on socketpairs, and without `socket(AF_INET)` and `connect` they
//! reach nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A condition on one syscall argument, compared on its low 32 bits.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum ArgCondition {
    /// `arg != value`
    Ne {
        /// Argument index.
        arg: u8,
        /// Value.
        value: u32,
    },
    /// `arg == value`
    Eq {
        /// Argument index.
        arg: u8,
        /// Value.
        value: u32,
    },
    /// `arg & bits == bits` (any of several rules → OR).
    HasBits {
        /// Argument index.
        arg: u8,
        /// Bits.
        bits: u32,
    },
    /// `arg & mask == value`.
    Masked {
        /// Argument index.
        arg: u8,
        /// Mask.
        mask: u32,
        /// Value.
        value: u32,
    },
}

/// What a matching rule does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SeccompDeny {
    /// Fail with `EPERM`.
    Eperm,
    /// Fail with `ENOSYS`.
    Enosys,
    /// Kill the process.
    KillProcess,
}

/// One row of the table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SeccompRuleSpec {
    /// Syscall name (or a pseudo-name for prologue rules).
    pub syscall: String,
    /// x86_64 number (-1 for prologue rules).
    pub nr: i64,
    /// Argument conditions, all of which must hold (AND); empty matches every call.
    pub conditions: Vec<ArgCondition>,
    /// Human form of the condition.
    pub condition_text: Option<String>,
    /// Action.
    pub action: SeccompDeny,
    /// Why.
    pub reason: String,
}

const AF_UNIX: u32 = 1;
const SOCK_DGRAM: u32 = 2;
/// Bit 1 of the socket type: set for SOCK_DGRAM (2), SOCK_RAW (3) and SOCK_PACKET (10), clear for
/// SOCK_STREAM (1) and SOCK_SEQPACKET (5); the SOCK_NONBLOCK/SOCK_CLOEXEC flags do not touch it.
const SOCK_DGRAM_BIT: u32 = 2;
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
const NS_FLAGS: &[(u32, &str)] = &[
    (0x0002_0000, "CLONE_NEWNS"),
    (0x0200_0000, "CLONE_NEWCGROUP"),
    (0x0400_0000, "CLONE_NEWUTS"),
    (0x0800_0000, "CLONE_NEWIPC"),
    (0x1000_0000, "CLONE_NEWUSER"),
    (0x2000_0000, "CLONE_NEWPID"),
    (0x4000_0000, "CLONE_NEWNET"),
];

/// x86_64 numbers of newer syscalls that `libc` may not name.
mod nr {
    pub const OPEN_TREE: i64 = 428;
    pub const MOVE_MOUNT: i64 = 429;
    pub const FSOPEN: i64 = 430;
    pub const FSCONFIG: i64 = 431;
    pub const FSMOUNT: i64 = 432;
    pub const FSPICK: i64 = 433;
    pub const CLONE3: i64 = 435;
    pub const OPENAT2: i64 = 437;
    pub const MOUNT_SETATTR: i64 = 442;
    pub const FCHMODAT2: i64 = 452;
    pub const OPEN_TREE_ATTR: i64 = 467;
}

/// The full rule table, prologue rules first.
#[must_use]
pub fn seccomp_table() -> Vec<SeccompRuleSpec> {
    let mut t = Vec::new();
    let mut row_all = |syscall: &str, nr: i64, conditions: Vec<ArgCondition>, text: Option<String>, action, reason: &str| {
        t.push(SeccompRuleSpec { syscall: syscall.into(), nr, conditions, condition_text: text, action, reason: reason.into() });
    };
    row_all("socket", libc::SYS_socket,
        vec![ArgCondition::Eq { arg: 0, value: AF_UNIX }, ArgCondition::Masked { arg: 1, mask: 0xf, value: SOCK_DGRAM }],
        Some("domain == AF_UNIX && type & 0xf == SOCK_DGRAM".into()), SeccompDeny::Eperm,
        "an unconnected unix datagram socket reaches pathname sockets outside (/dev/log, journald) through sendto/sendmsg, which seccomp cannot inspect; socketpair stays allowed");
    let mut row = |syscall: &str, nr: i64, condition: Option<(ArgCondition, String)>, action, reason: &str| {
        let (conditions, condition_text) = match condition {
            Some((c, s)) => (vec![c], Some(s)),
            None => (Vec::new(), None),
        };
        t.push(SeccompRuleSpec { syscall: syscall.into(), nr, conditions, condition_text, action, reason: reason.into() });
    };
    use SeccompDeny::*;
    row("<any syscall from a non-x86_64 ABI>", -1, None, KillProcess,
        "i386 int 0x80 / socketcall would bypass every x86_64 rule (arch check)");
    row("<any x32 syscall>", -1, Some((ArgCondition::HasBits { arg: 255, bits: 0x4000_0000 }, "nr & 0x40000000".into())), Eperm,
        "x32 numbers alias x86_64 syscalls and are not matched by the rules below");
    row("clone3", nr::CLONE3, None, Enosys,
        "clone3 flags are in memory and cannot be inspected; ENOSYS makes libc fall back to clone");
    row("openat2", nr::OPENAT2, None, Enosys,
        "openat2's mode is in memory (could create setuid files); ENOSYS makes callers fall back to openat");
    let sock = "no network: only AF_UNIX sockets (socketpair, pipes between the sandbox's own processes)";
    row("socket", libc::SYS_socket, Some((ArgCondition::Ne { arg: 0, value: AF_UNIX }, "domain != AF_UNIX".into())), Eperm, sock);
    row("socketpair", libc::SYS_socketpair, Some((ArgCondition::Ne { arg: 0, value: AF_UNIX }, "domain != AF_UNIX".into())), Eperm, sock);
    row("socketpair", libc::SYS_socketpair, Some((ArgCondition::HasBits { arg: 1, bits: SOCK_DGRAM_BIT }, "type & SOCK_DGRAM (datagram; raw and packet too)".into())), Eperm,
        "a datagram socketpair can still sendto()/sendmsg() an explicit pathname address outside (found by the escape corpus: unix-dgram-sendto-pathname); stream socketpairs stay allowed");
    for (name, n) in [("connect", libc::SYS_connect), ("bind", libc::SYS_bind), ("listen", libc::SYS_listen),
        ("accept", libc::SYS_accept), ("accept4", libc::SYS_accept4)] {
        row(name, n, None, Eperm,
            "pathname and abstract unix sockets outside (docker.sock, D-Bus, systemd) are full escapes");
    }
    for (name, n) in [("io_uring_setup", libc::SYS_io_uring_setup), ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register)] {
        row(name, n, None, Eperm, "io_uring creates sockets and opens files without the filtered syscalls");
    }
    for (name, n) in [("ptrace", libc::SYS_ptrace), ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev)] {
        row(name, n, None, Eperm, "no access to other processes' memory");
    }
    for (name, n, why) in [
        ("bpf", libc::SYS_bpf, "kernel attack surface"),
        ("perf_event_open", libc::SYS_perf_event_open, "kernel attack surface, side channels"),
        ("userfaultfd", libc::SYS_userfaultfd, "used to widen kernel race windows"),
        ("keyctl", libc::SYS_keyctl, "kernel keyring holds secrets outside the filesystem"),
        ("add_key", libc::SYS_add_key, "kernel keyring"),
        ("request_key", libc::SYS_request_key, "kernel keyring"),
        ("open_by_handle_at", libc::SYS_open_by_handle_at, "opens files by handle, bypassing path checks"),
        ("name_to_handle_at", libc::SYS_name_to_handle_at, "produces handles for open_by_handle_at"),
        ("kexec_load", libc::SYS_kexec_load, "kernel replacement"),
        ("kexec_file_load", libc::SYS_kexec_file_load, "kernel replacement"),
        ("init_module", libc::SYS_init_module, "kernel module loading"),
        ("finit_module", libc::SYS_finit_module, "kernel module loading"),
        ("delete_module", libc::SYS_delete_module, "kernel module unloading"),
    ] {
        row(name, n, None, Eperm, why);
    }
    for (name, n) in [("mount", libc::SYS_mount), ("umount2", libc::SYS_umount2), ("pivot_root", libc::SYS_pivot_root),
        ("move_mount", nr::MOVE_MOUNT), ("open_tree", nr::OPEN_TREE), ("open_tree_attr", nr::OPEN_TREE_ATTR),
        ("fsopen", nr::FSOPEN), ("fsconfig", nr::FSCONFIG), ("fsmount", nr::FSMOUNT), ("fspick", nr::FSPICK),
        ("mount_setattr", nr::MOUNT_SETATTR)] {
        row(name, n, None, Eperm, "no mount changes");
    }
    row("unshare", libc::SYS_unshare, None, Eperm, "no new namespaces: a user namespace grants a full capability set");
    row("setns", libc::SYS_setns, None, Eperm, "no joining other namespaces");
    for (bit, flag) in NS_FLAGS {
        row("clone", libc::SYS_clone, Some((ArgCondition::HasBits { arg: 0, bits: *bit }, format!("flags & {flag}"))), Eperm,
            "no new namespaces through clone");
    }
    row("ioctl", libc::SYS_ioctl, Some((ArgCondition::Eq { arg: 1, value: TIOCSTI }, "request == TIOCSTI (low 32 bits)".into())), Eperm,
        "keystroke injection into the user's terminal (CVE-2017-5226)");
    row("ioctl", libc::SYS_ioctl, Some((ArgCondition::Eq { arg: 1, value: TIOCLINUX }, "request == TIOCLINUX (low 32 bits)".into())), Eperm,
        "console injection (CVE-2019-10063)");
    let setid = "no setuid/setgid files: they would keep the sandboxed identity's privileges for whoever runs them later, outside";
    for (name, n, arg) in [("chmod", libc::SYS_chmod, 1u8), ("fchmod", libc::SYS_fchmod, 1), ("fchmodat", libc::SYS_fchmodat, 2),
        ("fchmodat2", nr::FCHMODAT2, 2), ("open", libc::SYS_open, 2), ("openat", libc::SYS_openat, 3), ("creat", libc::SYS_creat, 1),
        ("mknod", libc::SYS_mknod, 1), ("mknodat", libc::SYS_mknodat, 2)] {
        for (bits, flag) in [(0o4000u32, "S_ISUID"), (0o2000, "S_ISGID")] {
            row(name, n, Some((ArgCondition::HasBits { arg, bits }, format!("mode & {flag}"))), Eperm, setid);
        }
    }
    for (name, n) in [("shmget", libc::SYS_shmget), ("shmat", libc::SYS_shmat), ("shmctl", libc::SYS_shmctl),
        ("shmdt", libc::SYS_shmdt), ("msgget", libc::SYS_msgget), ("msgsnd", libc::SYS_msgsnd),
        ("msgrcv", libc::SYS_msgrcv), ("msgctl", libc::SYS_msgctl), ("semget", libc::SYS_semget),
        ("semop", libc::SYS_semop), ("semtimedop", libc::SYS_semtimedop), ("semctl", libc::SYS_semctl)] {
        row(name, n, None, Eperm, "SysV IPC objects are shared with the host (no private IPC namespace at this level)");
    }
    t
}

const O_ACCMODE: u32 = 0o3;
const O_TRUNC: u32 = 0o1000;

/// Rules that stand in for Landlock's truncate right (ABI 3) on older ABIs when no read-only
/// mounts cover the filesystem (Standard level): `truncate(2)` fails everywhere, and opening
/// read-only with `O_TRUNC` fails (a write-mode open is checked by Landlock's `write_file`).
#[must_use]
pub fn truncate_guard_rules() -> Vec<SeccompRuleSpec> {
    let why = "Landlock ABI < 3 does not control truncation: truncate(2) by path, and open(O_RDONLY|O_TRUNC) on a file the sandbox may read, would truncate files outside the workspace";
    let trunc_ro = |arg: u8| ArgCondition::Masked { arg, mask: O_ACCMODE | O_TRUNC, value: O_TRUNC };
    vec![
        SeccompRuleSpec { syscall: "truncate".into(), nr: libc::SYS_truncate, conditions: Vec::new(), condition_text: None,
            action: SeccompDeny::Eperm, reason: format!("{why} (ftruncate on a file opened for writing still works)") },
        SeccompRuleSpec { syscall: "open".into(), nr: libc::SYS_open, conditions: vec![trunc_ro(1)],
            condition_text: Some("flags & (O_ACCMODE|O_TRUNC) == O_RDONLY|O_TRUNC".into()), action: SeccompDeny::Eperm, reason: why.into() },
        SeccompRuleSpec { syscall: "openat".into(), nr: libc::SYS_openat, conditions: vec![trunc_ro(2)],
            condition_text: Some("flags & (O_ACCMODE|O_TRUNC) == O_RDONLY|O_TRUNC".into()), action: SeccompDeny::Eperm, reason: why.into() },
        SeccompRuleSpec { syscall: "openat2".into(), nr: nr::OPENAT2, conditions: Vec::new(), condition_text: None,
            action: SeccompDeny::Enosys, reason: "openat2's flags are in memory and cannot be inspected; ENOSYS makes callers fall back to openat".into() },
    ]
}

/// A compiled BPF instruction, packed `code << 48 | jt << 40 | jf << 32 | k` for transport.
pub type PackedInsn = u64;

fn pack(code: u16, jt: u8, jf: u8, k: u32) -> PackedInsn {
    (u64::from(code) << 48) | (u64::from(jt) << 40) | (u64::from(jf) << 32) | u64::from(k)
}

/// Unpacks a [`PackedInsn`] into `(code, jt, jf, k)`.
#[must_use]
pub fn unpack(i: PackedInsn) -> (u16, u8, u8, u32) {
    ((i >> 48) as u16, (i >> 40) as u8, (i >> 32) as u8, i as u32)
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;

/// Compiles the table into a BPF program.
///
/// # Errors
/// A message if seccompiler rejects a rule (a bug in the table).
pub fn compile(table: &[SeccompRuleSpec]) -> Result<Vec<PackedInsn>, String> {
    use seccompiler::{SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch};
    let eperm = RET_ERRNO | libc::EPERM as u32;
    let mut prog = vec![
        pack(BPF_LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        pack(BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        pack(BPF_RET_K, 0, 0, RET_KILL_PROCESS),
        pack(BPF_LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        pack(BPF_JSET_K, 0, 1, 0x4000_0000),
        pack(BPF_RET_K, 0, 0, eperm),
    ];
    // Unconditional ENOSYS rows (clone3 first, always present) in the prologue, once per syscall.
    let mut enosys_seen = Vec::new();
    for r in table.iter().filter(|r| r.nr >= 0 && r.action == SeccompDeny::Enosys) {
        if !r.conditions.is_empty() {
            return Err(format!("{}: conditional ENOSYS rules are not supported", r.syscall));
        }
        if enosys_seen.contains(&r.nr) {
            continue;
        }
        enosys_seen.push(r.nr);
        prog.push(pack(BPF_JEQ_K, 0, 1, r.nr as u32));
        prog.push(pack(BPF_RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32));
    }
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for r in table.iter().filter(|r| r.nr >= 0 && r.action == SeccompDeny::Eperm) {
        let entry = rules.entry(r.nr).or_default();
        if !r.conditions.is_empty() {
            let mut conds = Vec::new();
            for c in &r.conditions {
                let cond = match *c {
                    ArgCondition::Ne { arg, value } => SeccompCondition::new(arg, Len::Dword, Op::Ne, u64::from(value)),
                    ArgCondition::Eq { arg, value } => SeccompCondition::new(arg, Len::Dword, Op::Eq, u64::from(value)),
                    ArgCondition::HasBits { arg, bits } => {
                        SeccompCondition::new(arg, Len::Dword, Op::MaskedEq(u64::from(bits)), u64::from(bits))
                    }
                    ArgCondition::Masked { arg, mask, value } => {
                        SeccompCondition::new(arg, Len::Dword, Op::MaskedEq(u64::from(mask)), u64::from(value))
                    }
                }
                .map_err(|e| format!("{}: {e}", r.syscall))?;
                conds.push(cond);
            }
            entry.push(SeccompRule::new(conds).map_err(|e| format!("{}: {e}", r.syscall))?);
        }
    }
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), TargetArch::x86_64)
        .map_err(|e| e.to_string())?;
    let body: seccompiler::BpfProgram = filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
    prog.extend(body.iter().map(|i| pack(i.code, i.jt, i.jf, i.k)));
    if prog.len() > 4096 {
        return Err(format!("seccomp program too long ({} instructions)", prog.len()));
    }
    Ok(prog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_covers_required_rules() {
        let t = seccomp_table();
        for name in ["socket", "connect", "bind", "listen", "accept", "accept4", "io_uring_setup", "ptrace",
            "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "keyctl", "mount", "pivot_root",
            "open_tree", "unshare", "setns", "clone3", "open_by_handle_at", "kexec_load", "init_module", "shmget", "msgget"] {
            assert!(t.iter().any(|r| r.syscall == name), "{name} missing");
        }
        for allowed in ["sendto", "recvfrom", "sendmsg", "recvmsg"] {
            assert!(!t.iter().any(|r| r.syscall == allowed), "{allowed} must stay allowed");
        }
        assert!(t.iter().all(|r| !r.reason.is_empty()));
        assert!(t.iter().any(|r| r.syscall == "socket" && r.conditions.len() == 2), "unix datagram rule");
        let ioctls: Vec<_> = t.iter().filter(|r| r.syscall == "ioctl").collect();
        assert_eq!(ioctls.len(), 2);
        for name in ["chmod", "fchmod", "fchmodat", "fchmodat2", "open", "openat", "creat", "mknod", "mknodat"] {
            assert_eq!(t.iter().filter(|r| r.syscall == name && r.condition_text.as_deref().is_some_and(|c| c.contains("S_IS"))).count(), 2, "{name}");
        }
        assert!(t.iter().any(|r| r.syscall == "socketpair" && r.conditions == vec![ArgCondition::HasBits { arg: 1, bits: 2 }]));
        assert!(t.iter().any(|r| r.syscall == "openat2" && r.action == SeccompDeny::Enosys));
    }

    #[test]
    fn truncate_guard_compiles_and_openat2_gets_enosys() {
        let mut t = seccomp_table();
        let base = compile(&t).unwrap().len();
        t.extend(truncate_guard_rules());
        let p = compile(&t).unwrap();
        assert!(p.len() > base);
        assert_eq!(unpack(p[8]), (BPF_JEQ_K, 0, 1, nr::OPENAT2 as u32));
        assert_eq!(unpack(p[9]).3, RET_ERRNO | libc::ENOSYS as u32);
        let g = truncate_guard_rules();
        assert!(g.iter().any(|r| r.syscall == "truncate" && r.conditions.is_empty()));
        assert!(g.iter().any(|r| r.syscall == "openat"
            && r.conditions == vec![ArgCondition::Masked { arg: 2, mask: 0o1003, value: 0o1000 }]));
    }

    #[test]
    fn program_starts_with_arch_x32_and_clone3_prologue() {
        let p = compile(&seccomp_table()).unwrap();
        assert_eq!(unpack(p[0]), (BPF_LD_W_ABS, 0, 0, 4));
        assert_eq!(unpack(p[1]).3, AUDIT_ARCH_X86_64);
        assert_eq!(unpack(p[2]).3, RET_KILL_PROCESS);
        assert_eq!(unpack(p[4]), (BPF_JSET_K, 0, 1, 0x4000_0000));
        assert_eq!(unpack(p[7]).3, RET_ERRNO | libc::ENOSYS as u32);
        assert!(p.len() > 40);
        for i in &p {
            assert_eq!(unpack(*i), {
                let (c, t, f, k) = unpack(*i);
                (c, t, f, k)
            });
        }
    }
}
