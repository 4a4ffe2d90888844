//! Per-phase breakdown of one sandboxed run from a `perf trace` of it.
//!
//! `perf trace -e <syscalls> -o FILE -- localgpt sandbox run … -- /bin/true x` records, per
//! syscall, the start time (ms since the trace began, which is right after the CLI's own
//! `execve`), the duration and the pid. The CLI (pid P) spawns the helper H (`clone3`/`clone`
//! returning H); H forks the command process C (`clone` returning C); C applies Landlock
//! (`landlock_create_ruleset` with attributes … `landlock_restrict_self`) and seccomp, then
//! execs. Those syscalls are the phase boundaries ([`MARKERS`]). A marker that is absent (no
//! cgroup, no Landlock at Minimal level, …) merges its two neighbouring phases.
//!
//! Tracing adds a few microseconds to every traced syscall, so phases with many traced syscalls
//! are overestimated; the untraced, interleaved end-to-end numbers are the reference.

use serde::Serialize;

/// One parsed `perf trace` line.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Start time (ms since the trace began), when printed.
    pub ts: Option<f64>,
    /// Duration (ms), when printed.
    pub dur: Option<f64>,
    /// Command name.
    pub comm: String,
    /// Thread id.
    pub pid: i32,
    /// Syscall name.
    pub name: String,
    /// The completion of a call whose start was printed earlier (`... [continued]:`).
    pub continued: bool,
    /// The return value text after ` = `, when printed.
    pub ret: Option<String>,
    /// The whole line.
    pub line: String,
}

/// Parses one line of `perf trace` output; `None` for anything else.
#[must_use]
pub fn parse_line(line: &str) -> Option<Event> {
    let t = line.trim_start();
    let (ts_s, rest) = t.split_once(' ')?;
    let ts = if ts_s == "?" { None } else { Some(ts_s.parse::<f64>().ok()?) };
    let rest = rest.trim_start().strip_prefix('(')?;
    let (dur_s, rest) = rest.split_once("):")?;
    let dur = dur_s.trim().strip_suffix("ms").and_then(|d| d.trim().parse::<f64>().ok());
    let rest = rest.trim_start();
    let (who, call) = rest.split_once(' ')?;
    let (comm, pid) = who.rsplit_once('/')?;
    let pid: i32 = pid.parse().ok()?;
    let call = call.trim_start();
    let (continued, call) = match call.strip_prefix("... [continued]:") {
        Some(c) => (true, c.trim_start()),
        None => (false, call),
    };
    let name: String = call.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    if name.is_empty() {
        return None;
    }
    let ret = call.rsplit_once(" = ").map(|(_, r)| r.trim().to_string());
    Some(Event { ts, dur, comm: comm.to_string(), pid, name, continued, ret, line: line.to_string() })
}

/// The phase boundaries, in order.
pub const MARKERS: [&str; 14] = [
    "trace start (CLI exec'd)",
    "CLI calls posix_spawn",
    "helper exec'd",
    "helper starts cgroup join",
    "helper joined cgroup",
    "helper starts fork",
    "fork returned",
    "Landlock ruleset creation starts",
    "landlock_restrict_self returned",
    "seccomp load starts",
    "seccomp load returned",
    "command exited",
    "supervisor exited",
    "CLI exited",
];

/// The phase between marker i and marker i+1.
pub const PHASES: [&str; 13] = [
    "CLI: start-up, config, detection, policy, plan, scratch dir, cgroup mkdir",
    "posix_spawn + execve of the helper",
    "helper: dynamic loading, Rust runtime init, plan JSON decode, setsid, prctl",
    "helper: join the per-run cgroup (write cgroup.procs)",
    "helper: signal handlers",
    "helper: fork of the command process",
    "command process: chdir, rlimits, close fds, no_new_privs",
    "Landlock: create ruleset, open + add each path rule, restrict_self",
    "drop capabilities (root only)",
    "seccomp filter load",
    "report on fd 3, execve and run of the command",
    "supervisor: reap, scan /proc for leftovers, exit",
    "CLI: read report, remove cgroup and scratch dir, exit",
];

/// One phase of one run.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Phase {
    /// What happens in it (merged names joined with " + " when a marker was absent).
    pub name: String,
    /// Duration (ms).
    pub ms: f64,
}

fn first_int(s: &str) -> Option<i32> {
    let d: String = s.trim().chars().take_while(char::is_ascii_digit).collect();
    d.parse().ok().filter(|&p| p > 0)
}

/// The marker times of one traced run (see [`MARKERS`]); `None` where a marker is absent.
#[must_use]
pub fn markers(events: &[Event]) -> [Option<f64>; 14] {
    let mut m: [Option<f64>; 14] = [None; 14];
    m[0] = Some(0.0);
    let Some(cli) = events.first().map(|e| e.pid) else { return m };
    let is_fork = |n: &str| matches!(n, "clone" | "clone3" | "vfork");
    let end = |e: &Event| e.ts.map(|t| t + e.dur.unwrap_or(0.0));
    // CLI → helper
    m[1] = events.iter().find(|e| e.pid == cli && is_fork(&e.name) && !e.continued && e.ts.is_some()).and_then(|e| e.ts);
    let helper = events
        .iter()
        .filter(|e| e.pid == cli && is_fork(&e.name))
        .find_map(|e| e.ret.as_deref().and_then(first_int));
    let Some(helper) = helper else { return m };
    let exec = events.iter().find(|e| e.pid == helper && e.name == "execve" && e.ts.is_some());
    let exec_start = exec.and_then(|e| e.ts);
    // The end of the helper's execve when perf printed it in one line, else its next event.
    m[2] = exec.filter(|e| e.dur.is_some()).and_then(end).or_else(|| {
        events
            .iter()
            .filter(|e| e.pid == helper && e.name != "execve" && !e.continued)
            .filter_map(|e| e.ts)
            .find(|&t| !exec_start.is_some_and(|x| t <= x))
    });
    let fork = events.iter().find(|e| e.pid == helper && is_fork(&e.name) && !e.continued && e.ts.is_some());
    // The helper writes nothing before the fork but "0" to cgroup.procs (perf shows the fd's
    // path only when it saw the open, so match on either).
    if let Some(w) = events.iter().find(|e| {
        e.pid == helper
            && e.name == "write"
            && (e.line.contains("cgroup.procs") || fork.and_then(|f| f.ts).zip(e.ts).is_some_and(|(f, t)| t < f))
    }) {
        m[3] = w.ts;
        m[4] = end(w);
    }
    let Some(fork) = fork else { return m };
    m[5] = fork.ts;
    m[6] = end(fork);
    let Some(cmd) = fork.ret.as_deref().and_then(first_int) else { return m };
    let c = |name: &str| events.iter().find(|e| e.pid == cmd && e.name == name && e.ts.is_some());
    m[7] = events
        .iter()
        .find(|e| e.pid == cmd && e.name == "landlock_create_ruleset" && e.line.contains("attr:"))
        .and_then(|e| e.ts);
    m[8] = c("landlock_restrict_self").and_then(end);
    if let Some(s) = c("seccomp") {
        m[9] = s.ts;
        m[10] = end(s);
    }
    m[11] = c("exit_group").and_then(|e| e.ts);
    m[12] = events.iter().find(|e| e.pid == helper && e.name == "exit_group").and_then(|e| e.ts);
    m[13] = events.iter().find(|e| e.pid == cli && e.name == "exit_group").and_then(|e| e.ts);
    m
}

/// Phases from marker times: consecutive present markers; a phase spanning absent markers gets
/// the joined names. Negative spans (cross-CPU clock skew) are clamped to 0.
#[must_use]
pub fn phases(m: &[Option<f64>; 14]) -> Vec<Phase> {
    let present: Vec<(usize, f64)> = m.iter().enumerate().filter_map(|(i, t)| t.map(|t| (i, t))).collect();
    present
        .windows(2)
        .map(|w| {
            let ((i, a), (j, b)) = (w[0], w[1]);
            Phase { name: PHASES[i..j].join(" + "), ms: (b - a).max(0.0) }
        })
        .collect()
}

/// Parses a whole trace and returns its phases.
#[must_use]
pub fn phases_of_trace(text: &str) -> Vec<Phase> {
    let events: Vec<Event> = text.lines().filter_map(parse_line).collect();
    phases(&markers(&events))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"         ? (         ): localgpt/22282  ... [continued]: execve())                                           = 0
     0.272 ( 0.016 ms): localgpt/22282 openat(dfd: CWD, filename: 0xbca380b1, flags: RDONLY|CLOEXEC)         = 4
     1.365 ( 0.012 ms): localgpt/22282 landlock_create_ruleset(flags: 1)                                     = 7
         ? (         ): :22283/22283  ... [continued]: clone3())                                           = 0
     3.444 (         ): localgpt/22282 clone3(uargs: 0x7ffc541a9240, size: 88)                            ...
         ? (         ): exe/22283  ... [continued]: execve())                                           = 0
     3.444 ( 0.362 ms): localgpt/22282  ... [continued]: clone3())                                           = 22283
     3.685 (         ): :22283/22283 execve(filename: 0xce129fc0, argv: 0x5594ce139990, envp: 0x5594ce1399f0) ...
     4.226 ( 0.032 ms): exe/22283 openat(dfd: CWD, filename: 0xec5e10b1, flags: RDONLY|CLOEXEC)         = 4
     5.264 ( 0.042 ms): exe/22283 setsid()                                                              = 22283
     5.492 (12.590 ms): exe/22283 write(fd: 4</sys/fs/cgroup/pids/localgpt-sandbox-22282-0/cgroup.procs>, buf: 0x56348658ad79, count: 1) = 1
    18.163 ( 0.263 ms): exe/22283 clone(clone_flags: CHILD_CLEARTID|CHILD_SETTID|0x11, child_tidptr: 0x7f12ec3a0a50) = 22284 (exe)
         ? (         ): exe/22284  ... [continued]: clone())                                            = 
    18.479 (         ): exe/22283 wait4(upid: -1, stat_addr: 0x7fffceebcc00)                         ...
    18.661 ( 0.018 ms): exe/22284 landlock_create_ruleset(flags: 1)                                     = 7
    18.700 ( 0.023 ms): exe/22284 landlock_create_ruleset(attr: 0x7fffceebc9c0, size: 24)               = 4
    20.727 ( 0.025 ms): exe/22284 landlock_restrict_self(ruleset_fd: 4)                                 = 0
    22.343 ( 0.195 ms): exe/22284 seccomp(op: FILTER, uargs: 0x7fffceebcb50)                            = 0
    27.154 (         ): true/22284 exit_group()                                                          = ?
    18.479 ( 8.845 ms): exe/22283  ... [continued]: wait4())                                            = 22284 (true)
    27.382 (         ): exe/22283 exit_group()                                                          = ?
    28.366 (         ): localgpt/22282 exit_group()                                                          = ?
"#;

    #[test]
    fn parses_lines() {
        let e = parse_line("    18.163 ( 0.263 ms): exe/22283 clone(clone_flags: 0x11) = 22284 (exe)").unwrap();
        assert_eq!(e.ts, Some(18.163));
        assert_eq!(e.dur, Some(0.263));
        assert_eq!(e.comm, "exe");
        assert_eq!(e.pid, 22283);
        assert_eq!(e.name, "clone");
        assert!(!e.continued);
        assert_eq!(e.ret.as_deref(), Some("22284 (exe)"));
        let c = parse_line("         ? (         ): :22283/22283  ... [continued]: clone3())   = 0").unwrap();
        assert_eq!((c.ts, c.dur, c.pid, c.name.as_str(), c.continued), (None, None, 22283, "clone3", true));
        assert!(parse_line("").is_none());
        assert!(parse_line("garbage line").is_none());
    }

    #[test]
    fn breakdown_of_a_standard_run() {
        let ph = phases_of_trace(SAMPLE);
        let get = |n: &str| ph.iter().find(|p| p.name == n).map(|p| p.ms);
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-6);
        assert!(close(get(PHASES[0]), 3.444));
        assert!(close(get(PHASES[1]), 4.226 - 3.444));
        // Without the path of the fd: the helper's only write before the fork.
        let anon = SAMPLE.replace("4</sys/fs/cgroup/pids/localgpt-sandbox-22282-0/cgroup.procs>", "4");
        let ph2 = phases_of_trace(&anon);
        assert!(ph2.iter().any(|p| p.name == PHASES[3] && (p.ms - 12.590).abs() < 1e-6));
        assert!(close(get(PHASES[3]), 12.590));
        assert!(close(get(PHASES[5]), 0.263));
        assert!(close(get(PHASES[7]), 20.752 - 18.700));
        assert!(close(get(PHASES[9]), 0.195));
        assert!(close(get(PHASES[12]), 28.366 - 27.382));
        let total: f64 = ph.iter().map(|p| p.ms).sum();
        assert!((total - 28.366).abs() < 1e-6);
    }

    #[test]
    fn absent_markers_merge_phases() {
        // No cgroup, no Landlock, no seccomp (level none): fewer, merged phases.
        let text: String = SAMPLE
            .lines()
            .filter(|l| !l.contains("cgroup.procs") && !l.contains("landlock_") && !l.contains("seccomp"))
            .map(|l| format!("{l}\n"))
            .collect();
        let ph = phases_of_trace(&text);
        assert!(ph.iter().any(|p| p.name == format!("{} + {}", PHASES[2], PHASES[3]).as_str()
            || p.name.starts_with(PHASES[2])));
        assert!(ph.iter().any(|p| p.name.contains(PHASES[7]) && p.name.contains(PHASES[10])));
        let total: f64 = ph.iter().map(|p| p.ms).sum();
        assert!((total - 28.366).abs() < 1e-6);
    }
}

/// Phase boundaries from the sandbox's opt-in timestamps (`LOCALGPT_SANDBOX_TIMING`, see
/// `localgpt_sandbox::timing`): (process, label, what happened since the previous boundary that
/// is present in the run). `bench` stamps are taken by the benchmark around `posix_spawn` and
/// `wait4`; `helper` stamps come from the helper's lines (`supervisor` or `command`, which share
/// the stamps taken before the fork).
pub const STAMPS: [(&str, &str, &str); 38] = [
    ("bench", "spawn", "benchmark calls posix_spawn"),
    ("cli", "start", "exec of the CLI: posix_spawn, execve, Rust start-up"),
    ("cli", "parse", "CLI: argv[0] (helper) and probe dispatch"),
    ("cli", "args", "CLI: argument parsing (clap)"),
    ("cli", "policy", "CLI: config file, workspace, policy"),
    ("cli", "detected", "CLI: detection (Landlock ABI, seccomp, user namespaces, pids cgroup)"),
    ("cli", "scratch", "CLI: per-run scratch dir (Standard: mkdtemp in /tmp)"),
    ("cli", "counted", "CLI: count the user's tasks for a relative RLIMIT_NPROC (non-root, no namespaces, no pids cgroup)"),
    ("cli", "planned", "CLI: plan (Landlock rules, namespaces, seccomp program, environment, protections)"),
    ("cli", "spawn_helper", "CLI: signal handlers, per-run cgroup, pipes, single-thread check"),
    ("helper", "start", "fork of the runner into the helper (from a multithreaded host: posix_spawn + execve + plan decode)"),
    ("helper", "plan_decoded", "helper: plan decode"),
    ("helper", "cgroup_join", "helper: setsid, subreaper, parent-death signal"),
    ("helper", "cgroup_joined", "helper: join the per-run cgroup (write cgroup.procs)"),
    ("helper", "user_pid_ns", "helper: user + PID namespaces (unshare when exec'd; the forked helper was cloned into them), id maps (Full)"),
    ("helper", "fork", "helper: signal handlers, status pipe (+ setsid, subreaper when no cgroup is joined)"),
    ("command", "init_unshared", "(exec'd helper: fork of PID 1) PID 1 unshares the mount, net, IPC and UTS namespaces (Full)"),
    ("command", "init_binds", "PID 1: private propagation; workspace and protected-path binds"),
    ("command", "init_readonly", "PID 1: everything read-only, the workspace writable again"),
    ("command", "init_dev", "PID 1: private /dev (tmpfs, device node binds, devpts)"),
    ("command", "init_tmpfs", "PID 1: private /tmp and /dev/shm, read-only grants bound back inside"),
    ("command", "init_masks", "PID 1: credential masks"),
    ("command", "init_proc", "PID 1: fresh /proc"),
    ("command", "init_namespaces", "PID 1: max_user_namespaces = 0, pid_max"),
    ("command", "child", "fork of the command process (by PID 1 at Full)"),
    ("command", "rlimits", "chdir, rlimits"),
    ("command", "fds_closed", "close fds above 3"),
    ("command", "no_new_privs", "no_new_privs"),
    ("command", "landlock", "Landlock: create ruleset, open + add one rule per path, restrict_self"),
    ("command", "capabilities", "drop capabilities (root)"),
    ("command", "seccomp", "seccomp filter load"),
    ("command", "exec", "report on fd 3 (+ chdir at level none)"),
    ("supervisor", "command_reaped", "execve + run + exit of the command, reaped by the supervisor (at Full: PID 1 exits too)"),
    ("supervisor", "cleanup_done", "supervisor: scan for leftover descendants"),
    ("cli", "helper_reaped", "supervisor exits; the CLI notices, reaps it, reads the report"),
    ("cli", "cgroup_removed", "CLI: remove the per-run cgroup"),
    ("cli", "exiting", "CLI: remove the scratch dir (Standard), result"),
    ("bench", "reaped", "CLI exit; reaped by the benchmark"),
];

/// The stamps of one run: `(process, label) → ns`, from the `localgpt-sandbox-timing` lines of
/// the CLI's stderr plus the benchmark's own `spawn` and `reaped`.
#[must_use]
pub fn parse_stamps(stderr: &str, spawn_ns: u64, reaped_ns: u64) -> Vec<(String, String, u64)> {
    let mut out = vec![("bench".to_string(), "spawn".to_string(), spawn_ns), ("bench".to_string(), "reaped".to_string(), reaped_ns)];
    for line in stderr.lines() {
        let Some(rest) = line.trim().strip_prefix("localgpt-sandbox-timing ") else { continue };
        let mut it = rest.split_whitespace();
        let Some(who) = it.next() else { continue };
        for kv in it {
            if let Some((k, v)) = kv.split_once('=') {
                if let Ok(ns) = v.parse::<u64>() {
                    out.push((who.to_string(), k.to_string(), ns));
                }
            }
        }
    }
    out
}

/// One span between two present boundaries of a run.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Span {
    /// `process.label` of the start boundary.
    pub from: String,
    /// `process.label` of the end boundary.
    pub to: String,
    /// What happens in it.
    pub what: String,
    /// Duration (ms).
    pub ms: f64,
}

/// The spans of one run, in [`STAMPS`] order. `None` when the run has no sandbox stamps at all
/// (a build without the timing hook).
#[must_use]
pub fn spans(stamps: &[(String, String, u64)]) -> Option<Vec<Span>> {
    let find = |who: &str, label: &str| -> Option<u64> {
        stamps
            .iter()
            .find(|(w, l, _)| l == label && (w == who || (who == "helper" && (w == "supervisor" || w == "command"))))
            .map(|(_, _, t)| *t)
    };
    let present: Vec<(usize, u64)> = STAMPS.iter().enumerate().filter_map(|(i, (w, l, _))| find(w, l).map(|t| (i, t))).collect();
    if present.len() <= 2 {
        return None;
    }
    Some(
        present
            .windows(2)
            .map(|w| {
                let ((i, a), (j, b)) = (w[0], w[1]);
                Span {
                    from: format!("{}.{}", STAMPS[i].0, STAMPS[i].1),
                    to: format!("{}.{}", STAMPS[j].0, STAMPS[j].1),
                    what: STAMPS[j].2.to_string(),
                    ms: b.saturating_sub(a) as f64 / 1e6,
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod stamp_tests {
    use super::*;

    #[test]
    fn spans_of_a_standard_run() {
        let err = "localgpt-sandbox-timing command start=1000000 plan_decoded=1100000 cgroup_join=1200000 cgroup_joined=3200000 fork=3300000 child=3500000 rlimits=3510000 fds_closed=3520000 no_new_privs=3530000 landlock=3630000 capabilities=3700000 seccomp=3900000 exec=3950000\n\
some output of the command\n\
localgpt-sandbox-timing supervisor start=1000000 plan_decoded=1100000 cgroup_join=1200000 cgroup_joined=3200000 fork=3300000 command_reaped=4500000 cleanup_done=4520000\n\
localgpt-sandbox-timing cli start=500000 spawn_helper=800000 helper_reaped=4700000 cgroup_removed=4750000\n";
        let st = parse_stamps(err, 0, 5_000_000);
        let sp = spans(&st).unwrap();
        let get = |to: &str| sp.iter().find(|s| s.to == to).map(|s| s.ms).unwrap();
        assert!((get("cli.start") - 0.5).abs() < 1e-9);
        assert!((get("helper.cgroup_joined") - 2.0).abs() < 1e-9);
        assert!((get("command.landlock") - 0.1).abs() < 1e-9);
        assert!((get("bench.reaped") - 0.25).abs() < 1e-9);
        // Full-only boundaries are absent: fork → child is one span, named after its end.
        let f = sp.iter().find(|s| s.to == "command.child").unwrap();
        assert_eq!(f.from, "helper.fork");
        let total: f64 = sp.iter().map(|s| s.ms).sum();
        assert!((total - 5.0).abs() < 1e-9);
    }

    #[test]
    fn no_stamps_no_spans() {
        assert!(spans(&parse_stamps("plain stderr\n", 0, 10)).is_none());
    }
}
