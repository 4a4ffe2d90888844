//! Linux syscall numbers per architecture, for the seccomp table (pure data, so that the table
//! and its program can be built — and `explain`ed — on any machine).
//!
//! x86_64 numbers are from `arch/x86/entry/syscalls/syscall_64.tbl`, aarch64 ones from
//! `include/uapi/asm-generic/unistd.h` (the table aarch64 uses). aarch64 has no `open`, `creat`,
//! `chmod` or `mknod`: only their `*at` forms, which the table covers too.

use serde::{Deserialize, Serialize};

/// An architecture the seccomp program is built for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum SeccompArch {
    /// x86_64 (audit arch `AUDIT_ARCH_X86_64`; the x32 ABI shares it, with bit 30 set in the
    /// syscall number, and i386 `int 0x80` arrives as `AUDIT_ARCH_I386`).
    X86_64,
    /// aarch64 (audit arch `AUDIT_ARCH_AARCH64`; 32-bit ARM compat syscalls arrive as
    /// `AUDIT_ARCH_ARM` and are killed by the architecture check, as i386 ones are on x86_64).
    Aarch64,
}

impl SeccompArch {
    /// The architecture this binary runs on (x86_64 elsewhere, for `explain`).
    #[must_use]
    pub fn native() -> SeccompArch {
        if cfg!(target_arch = "aarch64") {
            SeccompArch::Aarch64
        } else {
            SeccompArch::X86_64
        }
    }

    /// `AUDIT_ARCH_*` of `struct seccomp_data`.
    #[must_use]
    pub fn audit_arch(self) -> u32 {
        match self {
            SeccompArch::X86_64 => 0xC000_003E,
            SeccompArch::Aarch64 => 0xC000_00B7,
        }
    }

    /// The name used in `explain`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SeccompArch::X86_64 => "x86_64",
            SeccompArch::Aarch64 => "aarch64",
        }
    }
}

/// (name, x86_64, aarch64).
const TABLE: &[(&str, i64, Option<i64>)] = &[
    ("accept", 43, Some(202)),
    ("accept4", 288, Some(242)),
    ("add_key", 248, Some(217)),
    ("bind", 49, Some(200)),
    ("bpf", 321, Some(280)),
    ("chmod", 90, None),
    ("clone", 56, Some(220)),
    ("clone3", 435, Some(435)),
    ("connect", 42, Some(203)),
    ("creat", 85, None),
    ("delete_module", 176, Some(106)),
    ("fchmod", 91, Some(52)),
    ("fchmodat", 268, Some(53)),
    ("fchmodat2", 452, Some(452)),
    ("fcntl", 72, Some(25)),
    ("finit_module", 313, Some(273)),
    ("fsconfig", 431, Some(431)),
    ("fsmount", 432, Some(432)),
    ("fsopen", 430, Some(430)),
    ("fspick", 433, Some(433)),
    ("getpid", 39, Some(172)),
    ("init_module", 175, Some(105)),
    ("io_uring_enter", 426, Some(426)),
    ("io_uring_register", 427, Some(427)),
    ("io_uring_setup", 425, Some(425)),
    ("ioctl", 16, Some(29)),
    ("ioprio_set", 251, Some(30)),
    ("kexec_file_load", 320, Some(294)),
    ("kexec_load", 246, Some(104)),
    ("keyctl", 250, Some(219)),
    ("kill", 62, Some(129)),
    ("listen", 50, Some(201)),
    ("mknod", 133, None),
    ("mknodat", 259, Some(33)),
    ("modify_ldt", 154, None),
    ("mount", 165, Some(40)),
    ("mount_setattr", 442, Some(442)),
    ("move_mount", 429, Some(429)),
    ("msgctl", 71, Some(187)),
    ("msgget", 68, Some(186)),
    ("msgrcv", 70, Some(188)),
    ("msgsnd", 69, Some(189)),
    ("name_to_handle_at", 303, Some(264)),
    ("open", 2, None),
    ("open_by_handle_at", 304, Some(265)),
    ("open_tree", 428, Some(428)),
    ("open_tree_attr", 467, Some(467)),
    ("openat", 257, Some(56)),
    ("openat2", 437, Some(437)),
    ("perf_event_open", 298, Some(241)),
    ("pidfd_send_signal", 424, Some(424)),
    ("pivot_root", 155, Some(41)),
    ("prlimit64", 302, Some(261)),
    ("process_vm_readv", 310, Some(270)),
    ("process_vm_writev", 311, Some(271)),
    ("ptrace", 101, Some(117)),
    ("request_key", 249, Some(218)),
    ("rt_sigqueueinfo", 129, Some(138)),
    ("rt_tgsigqueueinfo", 297, Some(240)),
    ("sched_setattr", 314, Some(274)),
    ("sched_setscheduler", 144, Some(119)),
    ("semctl", 66, Some(191)),
    ("semget", 64, Some(190)),
    ("semop", 65, Some(193)),
    ("semtimedop", 220, Some(192)),
    ("sendmmsg", 307, Some(269)),
    ("sendmsg", 46, Some(211)),
    ("sendto", 44, Some(206)),
    ("setns", 308, Some(268)),
    ("setpgid", 109, Some(154)),
    ("setpriority", 141, Some(140)),
    ("setsockopt", 54, Some(208)),
    ("shmat", 30, Some(196)),
    ("shmctl", 31, Some(195)),
    ("shmdt", 67, Some(197)),
    ("shmget", 29, Some(194)),
    ("socket", 41, Some(198)),
    ("socketpair", 53, Some(199)),
    ("tgkill", 234, Some(131)),
    ("tkill", 200, Some(130)),
    ("truncate", 76, Some(45)),
    ("umount2", 166, Some(39)),
    ("unshare", 272, Some(97)),
    ("userfaultfd", 323, Some(282)),
];

/// The number of syscall `name` on `arch` (`None`: the architecture has no such syscall).
#[must_use]
pub fn number(arch: SeccompArch, name: &str) -> Option<i64> {
    let (_, x86, arm) = TABLE.iter().find(|(n, _, _)| *n == name)?;
    match arch {
        SeccompArch::X86_64 => Some(*x86),
        SeccompArch::Aarch64 => *arm,
    }
}

/// The x86_64 number of `name` (the table is written with these, then translated).
///
/// # Panics
/// When `name` is not in the table (a bug, caught by the tests).
#[must_use]
pub fn x86_64(name: &str) -> i64 {
    number(SeccompArch::X86_64, name).unwrap_or_else(|| panic!("syscall {name} missing from linux::syscalls"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table agrees with libc's numbers for the architecture the tests run on.
    #[cfg(target_os = "linux")]
    #[test]
    fn numbers_agree_with_libc_here() {
        let native = SeccompArch::native();
        let libc_nr: &[(&str, i64)] = &[
            ("socket", libc::SYS_socket), ("connect", libc::SYS_connect), ("bind", libc::SYS_bind), ("listen", libc::SYS_listen),
            ("accept4", libc::SYS_accept4), ("ptrace", libc::SYS_ptrace), ("bpf", libc::SYS_bpf), ("keyctl", libc::SYS_keyctl),
            ("mount", libc::SYS_mount), ("unshare", libc::SYS_unshare), ("setns", libc::SYS_setns), ("clone", libc::SYS_clone),
            ("ioctl", libc::SYS_ioctl), ("openat", libc::SYS_openat), ("fchmodat", libc::SYS_fchmodat), ("mknodat", libc::SYS_mknodat),
            ("shmget", libc::SYS_shmget), ("semtimedop", libc::SYS_semtimedop), ("truncate", libc::SYS_truncate),
            ("process_vm_writev", libc::SYS_process_vm_writev), ("userfaultfd", libc::SYS_userfaultfd), ("getpid", libc::SYS_getpid),
            ("io_uring_setup", libc::SYS_io_uring_setup), ("open_by_handle_at", libc::SYS_open_by_handle_at),
            ("prlimit64", libc::SYS_prlimit64), ("setpriority", libc::SYS_setpriority), ("sched_setscheduler", libc::SYS_sched_setscheduler), ("sched_setattr", libc::SYS_sched_setattr), ("ioprio_set", libc::SYS_ioprio_set), ("kill", libc::SYS_kill), ("tkill", libc::SYS_tkill), ("tgkill", libc::SYS_tgkill), ("rt_sigqueueinfo", libc::SYS_rt_sigqueueinfo), ("rt_tgsigqueueinfo", libc::SYS_rt_tgsigqueueinfo), ("pidfd_send_signal", libc::SYS_pidfd_send_signal), ("fcntl", libc::SYS_fcntl), ("setpgid", libc::SYS_setpgid), ("sendto", libc::SYS_sendto), ("sendmsg", libc::SYS_sendmsg), ("sendmmsg", libc::SYS_sendmmsg), ("setsockopt", libc::SYS_setsockopt),
        ];
        for (name, n) in libc_nr {
            assert_eq!(number(native, name), Some(*n), "{name}");
        }
        let names: Vec<&str> = TABLE.iter().map(|(n, _, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "sorted and unique");
    }

    #[test]
    fn aarch64_has_only_the_at_forms() {
        for n in ["open", "creat", "chmod", "mknod"] {
            assert_eq!(number(SeccompArch::Aarch64, n), None);
        }
        assert_eq!(number(SeccompArch::Aarch64, "openat"), Some(56));
        assert_eq!(SeccompArch::Aarch64.audit_arch(), 0xC000_00B7);
    }
}
