//! The runner's answers to the command's calls on *other processes* (seccomp user
//! notification), where no PID namespace hides the host's (Standard, Minimal):
//!
//! - scheduling (`setpriority`, `sched_setscheduler`, `sched_setattr`, `ioprio_set` on another
//!   pid: [`crate::linux::seccomp::scheduling_guard_rules`]);
//! - signals, at Standard where Landlock has no signal scope (ABI < 6): `kill`, `tkill`,
//!   `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo`, `pidfd_send_signal` and `fcntl(F_SETOWN)`
//!   ([`crate::linux::seccomp::signal_guard_rules`]).
//!
//! A call may proceed only on the sandbox's own tree: a process or thread that is a strict
//! descendant of the helper (the supervisor is a subreaper, so orphans stay in it), or a process
//! group of the tree. The command starts in the supervisor's own process group (the supervisor
//! made the session): a signal to that group (`kill 0`, `kill -- -$(ps -o pgid= $$)`) is sent
//! by the runner to each of the group's members but the supervisor, and nobody may join that
//! group (`setpgid` comes here too). Every other group of the tree's sessions holds only the
//! tree's processes (nobody outside can join a session, and its maker's descendants stay in the
//! tree): such a group is judged by one of its members. Where the target is a number in a
//! register the kernel then makes the call as asked (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`; a
//! target that exits between the check and the call could in principle be replaced by a host
//! process of the same pid, which needs the whole pid space to wrap within microseconds). A
//! pidfd is a descriptor another thread could swap after the check: the runner sends that
//! signal itself, from its own copy of the descriptor it checked.

use std::os::fd::{AsRawFd, OwnedFd};

use crate::linux::seccomp::{F_SETOWN, IOPRIO_WHO_PROCESS, PRIO_PROCESS};

/// What the runner does with a call.
enum Verdict {
    /// The kernel makes it as asked.
    Proceed,
    /// `EPERM`.
    Refuse,
    /// The runner made it (or its part of it) itself: this result.
    Answer(Result<i64, i32>),
    /// As `Answer`, then the runner signals the caller's own process too (a signal sent while
    /// the caller waits for the answer would interrupt its call: `EINTR`).
    AnswerThenSignal(Result<i64, i32>, i32, i32),
}

impl From<bool> for Verdict {
    fn from(ok: bool) -> Verdict {
        if ok { Verdict::Proceed } else { Verdict::Refuse }
    }
}

/// Answers `req` if it is one of this module's calls (returns false otherwise: not answered).
/// `root`: the helper's pid. `take_fd`: a duplicate of the caller's descriptor, checked to be
/// taken from the caller still waiting; `respond`: the answer when the runner made the call.
pub(crate) fn answer(
    listener: &OwnedFd,
    req: &libc::seccomp_notif,
    root: i32,
    take_fd: impl Fn(i32) -> Result<OwnedFd, i32>,
    respond: impl Fn(Result<i64, i32>),
) -> bool {
    let arg = |i: usize| req.data.args[i];
    let pid = |i: usize| arg(i) as i32;
    let verdict = match i64::from(req.data.nr) {
        libc::SYS_setpriority => (arg(0) as u32 == PRIO_PROCESS && in_tree(pid(1), root)).into(),
        libc::SYS_ioprio_set => (arg(0) as u32 == IOPRIO_WHO_PROCESS && in_tree(pid(1), root)).into(),
        libc::SYS_sched_setscheduler | libc::SYS_sched_setattr => in_tree(pid(0), root).into(),
        libc::SYS_kill => kill(pid(0), pid(1), req.pid as i32, root),
        // The kernel checks that the group is in the caller's session.
        libc::SYS_setpgid => (pid(1) != root).into(),
        libc::SYS_fcntl => match pid(2) {
            _ if arg(1) as u32 != F_SETOWN => Verdict::Refuse,
            o if o > 0 => in_tree(o, root).into(),
            o => o.checked_neg().is_some_and(|g| g != root && group_in_tree(g, root)).into(),
        },
        libc::SYS_tkill | libc::SYS_rt_sigqueueinfo => in_tree(pid(0), root).into(),
        // The kernel checks that the thread belongs to the thread group.
        libc::SYS_tgkill | libc::SYS_rt_tgsigqueueinfo => in_tree(pid(1), root).into(),
        libc::SYS_pidfd_send_signal => Verdict::Answer(send_by_pidfd(pid(0), pid(1), arg(2), arg(3) as u32, root, take_fd)),
        _ => return false,
    };
    match verdict {
        Verdict::Proceed => continue_call(listener, req.id),
        Verdict::Refuse => respond(Err(libc::EPERM)),
        Verdict::Answer(r) => respond(r),
        Verdict::AnswerThenSignal(r, pid, sig) => {
            respond(r);
            // SAFETY: signalling the caller, a process of the sandbox's own tree.
            unsafe { libc::kill(pid, sig) };
        }
    }
    true
}

/// Lets the kernel make the call as the command asked (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
pub(crate) fn continue_call(listener: &OwnedFd, id: u64) {
    let mut resp = libc::seccomp_notif_resp { id, val: 0, error: 0, flags: 1 };
    // SAFETY: the ioctl reads the response; ENOENT (the caller went away) needs nothing.
    unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) };
}

/// `kill(target, sig)` from `caller`: a process (> 0), the caller's own group (0), a group
/// (< -1); every process of the uid (-1) never. The supervisor's group: each member but the
/// supervisor, signalled by the runner.
fn kill(target: i32, sig: i32, caller: i32, root: i32) -> Verdict {
    let group = match target {
        t if t > 0 => return in_tree(t, root).into(),
        -1 => return Verdict::Refuse,
        0 => match stat_fields(caller) {
            Some(f) => f.pgrp,
            None => return Verdict::Refuse,
        },
        t => match t.checked_neg() {
            Some(g) => g,
            None => return Verdict::Refuse,
        },
    };
    if group == root {
        let caller = tgid(caller).unwrap_or(caller);
        match kill_supervisors_group(sig, root, caller) {
            (r, true) if sig != 0 => Verdict::AnswerThenSignal(r.or(Ok(0)), caller, sig),
            (r, included) => Verdict::Answer(if included { r.or(Ok(0)) } else { r }),
        }
    } else {
        group_in_tree(group, root).into()
    }
}

/// Sends `sig` to every process of the supervisor's group but the supervisor (the command's
/// processes that stayed in the group they started in) and the caller (process `caller`):
/// `Ok(0)` if any received it, and whether the caller is in the group (the runner signals it
/// after answering).
fn kill_supervisors_group(sig: i32, root: i32, caller: i32) -> (Result<i64, i32>, bool) {
    let mut last = libc::ESRCH;
    let (mut sent, mut included) = (false, false);
    for p in crate::linux::supervise::descendants(root) {
        if stat_fields(p).is_none_or(|f| f.pgrp != root) {
            continue;
        }
        if p == caller {
            included = true;
            continue;
        }
        // SAFETY: signalling a process of the sandbox's own tree, just checked.
        if unsafe { libc::kill(p, sig) } == 0 {
            sent = true;
        } else {
            last = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM);
        }
    }
    (if sent { Ok(0) } else { Err(last) }, included)
}

/// `pidfd_send_signal(fd, sig, info, flags)` for the caller: the runner takes its own copy of
/// the descriptor, finds the process it refers to (a pidfd's `Pid:` in fdinfo, or a
/// `/proc/<pid>` directory) and, if it is the sandbox's own, sends the signal from that copy.
/// A `siginfo` the caller supplies is refused (it is in the caller's memory), and so is
/// `PIDFD_SIGNAL_PROCESS_GROUP` (Linux 6.9: the process's whole group, which may be the
/// supervisor's); the thread and thread-group flags pass.
fn send_by_pidfd(fd: i32, sig: i32, info: u64, flags: u32, root: i32, take_fd: impl Fn(i32) -> Result<OwnedFd, i32>) -> Result<i64, i32> {
    const PIDFD_SIGNAL_THREAD: u32 = 1;
    const PIDFD_SIGNAL_THREAD_GROUP: u32 = 2;
    if info != 0 || flags & !(PIDFD_SIGNAL_THREAD | PIDFD_SIGNAL_THREAD_GROUP) != 0 {
        return Err(libc::EPERM);
    }
    let dup = take_fd(fd)?;
    let n = dup.as_raw_fd();
    let target = std::fs::read_to_string(format!("/proc/self/fdinfo/{n}"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Pid:").and_then(|v| v.trim().parse::<i32>().ok())))
        .or_else(|| {
            let link = std::fs::read_link(format!("/proc/self/fd/{n}")).ok()?;
            link.strip_prefix("/proc").ok()?.to_str()?.parse::<i32>().ok()
        });
    match target {
        Some(t) if in_tree(t, root) => {
            // SAFETY: signalling through our own copy of the descriptor just checked.
            let r = unsafe { libc::syscall(libc::SYS_pidfd_send_signal, n, sig, std::ptr::null::<libc::siginfo_t>(), flags) };
            if r == 0 { Ok(0) } else { Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EPERM)) }
        }
        Some(_) => Err(libc::EPERM),
        None => Err(libc::EBADF),
    }
}

/// The process (thread group) thread `tid` belongs to.
pub(crate) fn tgid(tid: i32) -> Option<i32> {
    status_field(tid, "Tgid:")
}

fn status_field(p: i32, key: &str) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{p}/status")).ok()?.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse().ok()))
}

/// Whether thread or process `tid` belongs to a strict descendant of `root` (the sandbox's own
/// tree): its thread group's parent chain reaches `root`. The supervisor itself, the runner and
/// every other process are not in it.
pub(crate) fn in_tree(tid: i32, root: i32) -> bool {
    if tid <= 0 {
        return false;
    }
    let Some(mut p) = tgid(tid) else { return false };
    if p == root {
        return false;
    }
    for _ in 0..4096 {
        match status_field(p, "PPid:") {
            Some(pp) if pp == root => return true,
            Some(pp) if pp > 1 => p = pp,
            _ => return false,
        }
    }
    false
}

/// Whether process group `pgid` (not the supervisor's) belongs to the sandbox's own tree: one
/// of its members is in the tree. (A group never spans sessions; the supervisor's session holds
/// only the supervisor and the tree, and the supervisor is alone in its group but for the tree;
/// a session the tree made holds only the tree's processes.) Nothing qualifies unless the
/// supervisor leads its own session.
fn group_in_tree(pgid: i32, root: i32) -> bool {
    if pgid <= 1 || pgid == root || stat_fields(root).is_none_or(|f| f.session != root) {
        return false;
    }
    // The leader if it still runs, else any member among the tree's processes.
    if stat_fields(pgid).is_some_and(|f| f.pgrp == pgid) {
        return in_tree(pgid, root);
    }
    crate::linux::supervise::descendants(root).into_iter().any(|p| stat_fields(p).is_some_and(|f| f.pgrp == pgid))
}

struct StatFields {
    pgrp: i32,
    session: i32,
}

/// The process group and session of process `pid` (`/proc/<pid>/stat`, after the command name).
fn stat_fields(pid: i32) -> Option<StatFields> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&s)
}

fn parse_stat(s: &str) -> Option<StatFields> {
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace().skip(2); // state, ppid
    Some(StatFields { pgrp: f.next()?.parse().ok()?, session: f.next()?.parse().ok()? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_after_the_last_parenthesis() {
        let f = parse_stat("4242 (a) b) (c) S 1 4240 4200 0 -1 4194560").unwrap();
        assert_eq!((f.pgrp, f.session), (4240, 4200));
        assert!(parse_stat("4242 (x").is_none());
    }

    fn refused(v: Verdict) -> bool {
        matches!(v, Verdict::Refuse)
    }

    #[test]
    fn every_process_of_the_uid_and_outsiders_are_never_targets() {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        assert!(refused(kill(-1, 9, me, me)), "every process of the uid");
        // This process is the root: it is not in its own tree, nor is PID 1.
        assert!(!in_tree(me, me) && !in_tree(1, me));
        assert!(refused(kill(me, 9, me, me)));
        assert!(refused(kill(1, 9, me, me)));
        assert!(!group_in_tree(me, me));
    }

    #[test]
    fn the_supervisors_group_is_signalled_without_the_supervisor() {
        use std::os::unix::process::CommandExt;
        // A root that leads its own session, as the supervisor does, with a child in its group.
        let mut root = std::process::Command::new("sh");
        root.args(["-c", "sleep 5 & echo $!; wait"]).stdout(std::process::Stdio::piped());
        // SAFETY: setsid in the child before exec.
        unsafe { root.pre_exec(|| if libc::setsid() < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }) };
        let mut root = root.spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(root.stdout.take().unwrap()), &mut line).unwrap();
        let (r, child): (i32, i32) = (root.id() as i32, line.trim().parse().unwrap());
        assert!(in_tree(child, r));
        assert!(matches!(kill(child, 0, child, r), Verdict::Proceed));
        assert_eq!(stat_fields(child).unwrap().pgrp, r);
        assert!(!group_in_tree(r, r), "the supervisor's group is never continued in the kernel");
        assert!(matches!(kill(0, 0, child, r), Verdict::Answer(Ok(0))), "kill 0 from the command reaches its group");
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        assert!(matches!(kill(-r, 0, me, r), Verdict::Answer(Ok(0))), "the child is reached");
        // A caller outside the tree, in a group of its own session: refused.
        assert!(refused(kill(0, 0, me, r)));
        // The caller itself is signalled after the answer (here: by the test).
        assert!(matches!(kill(-r, libc::SIGTERM, child, r), Verdict::AnswerThenSignal(Ok(0), c, libc::SIGTERM) if c == child));
        // SAFETY: signalling the test's own grandchild.
        unsafe { libc::kill(child, libc::SIGTERM) };
        let st = root.wait().unwrap();
        assert!(st.success(), "the root was signalled too: {st:?}");
    }
}
