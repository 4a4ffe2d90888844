//! Supervising a run from the parent: the poll loop over the command's output, the stdin relay,
//! the report pipe and the helper's pidfd; the timeout and cancellation; the result.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::cgroup::RunCgroup;
use super::fds::{close, Pipe};
use super::output::{OutputSink, StdinRelay, Stream, StreamState};
use super::{ExitKind, RunOptions, RunResult};
use crate::error::SandboxError;
use super::report::{Reported, SetupStep, LANDLOCK_ENFORCED};
use crate::plan::Plan;
use crate::policy::SandboxLevel;

/// Sends `sig` to the sandbox. On Linux to the helper, which passes it on to everything it
/// supervises (or is PID 1 of the namespace); elsewhere to the command's whole process group too
/// (the helper made it a session leader, so the group's id is its pid).
fn signal_tree(pid: i32, sig: i32) {
    // SAFETY: signalling our own child (and its process group).
    unsafe {
        libc::kill(pid, sig);
        #[cfg(not(target_os = "linux"))]
        libc::kill(-pid, sig);
    }
}

/// Reaps our child `pid` (blocking or not) into `st`; returns what `waitpid` returns. On Linux
/// it also learns the bytes the whole tree caused to be written to storage (`write_bytes`: the
/// helper reaps every process of the tree, and a reaped child's I/O is folded into its parent's
/// counters) into `written`: from the exited child's `/proc/<pid>/io` before it is reaped
/// (`waitid(WNOWAIT)`; readable by root), else as the growth of this process's own counters
/// across the reap (reaps are serialised, so two runs of one host never count each other; a host
/// thread writing files during that one `waitpid` would be counted too).
fn reap(pid: i32, block: bool, written: &mut Option<u64>, st: &mut i32) -> i32 {
    #[cfg(target_os = "linux")]
    {
        fn write_bytes(who: &str) -> Option<u64> {
            std::fs::read_to_string(format!("/proc/{who}/io")).ok()?.lines().find_map(|l| l.strip_prefix("write_bytes:").and_then(|v| v.trim().parse().ok()))
        }
        static REAP: std::sync::Mutex<()> = std::sync::Mutex::new(());
        // SAFETY: a zeroed siginfo for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
        // SAFETY: waitid on our own child with a valid siginfo pointer.
        let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        // SAFETY: reading the pid field waitid filled (0 when nothing exited yet).
        let exited = r == 0 && unsafe { info.si_pid() } == pid;
        if exited {
            if let Some(w) = write_bytes(&pid.to_string()) {
                *written = Some(w);
            } else {
                let _g = REAP.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let before = write_bytes("self");
                // SAFETY: reaping our own exited child with a valid status pointer.
                let r = unsafe { libc::waitpid(pid, st, 0) };
                *written = before.zip(write_bytes("self")).map(|(b, a)| a.saturating_sub(b));
                return r;
            }
        } else if !block {
            return 0;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = &written;
    // SAFETY: waiting for our own child with a valid status pointer.
    unsafe { libc::waitpid(pid, st, if block { 0 } else { libc::WNOHANG }) }
}

/// The timeout and cancellation of one run. They are enforced from the poll loop and, once the
/// command has produced output, from a watchdog thread too: the loop hands output to the
/// caller's sink, which may block (a CLI whose stdout nobody reads, a host that stopped
/// polling), and the deadline must not wait for it. Both go through [`Enforcer::tick`]; the
/// child is reaped under the same lock, so a signal never reaches a reused pid.
struct Enforcer<'a> {
    pid: i32,
    deadline: Instant,
    cancel: Option<&'static std::sync::atomic::AtomicBool>,
    token: Option<&'a super::CancelToken>,
    /// `SIGKILL` to the helper takes the whole tree with it: the helper is (or is the parent of)
    /// PID 1 of the sandbox's PID namespace, or the cgroup is killed too. Otherwise (Standard
    /// without a cgroup) the helper must live to kill its descendants, which it does at once on
    /// `SIGTERM`: a `kill()` is a `SIGTERM` there.
    sigkill_takes_tree: bool,
    cgroup: Option<&'a RunCgroup>,
    state: std::sync::Mutex<EnforceState>,
}

#[derive(Default)]
struct EnforceState {
    reaped: bool,
    kill_deadline: Option<Instant>,
    timed_out: bool,
    cancelled: bool,
    sigkilled: bool,
}

impl Enforcer<'_> {
    fn lock(&self) -> std::sync::MutexGuard<'_, EnforceState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// SIGTERM at the deadline or on cancel, SIGKILL 2 s later (and the cgroup's kill each
    /// time); returns when it next has something to do.
    fn tick(&self) -> Instant {
        let mut s = self.lock();
        let now = Instant::now();
        if s.reaped {
            return now + Duration::from_secs(3600);
        }
        let cancel_now = self.cancel.is_some_and(|c| c.load(Ordering::SeqCst)) || self.token.is_some_and(super::CancelToken::is_cancelled);
        if (now >= self.deadline || cancel_now) && s.kill_deadline.is_none() {
            s.timed_out = now >= self.deadline && !cancel_now;
            s.cancelled = cancel_now;
            signal_tree(self.pid, libc::SIGTERM);
            if let Some(cg) = self.cgroup {
                cg.kill_all();
            }
            s.kill_deadline = Some(now + Duration::from_secs(2));
        }
        // kill(): SIGKILL now rather than 2 s after the SIGTERM.
        let kill_now = self.sigkill_takes_tree && self.token.is_some_and(super::CancelToken::is_killed);
        if let Some(k) = s.kill_deadline {
            if (now >= k || kill_now) && !s.sigkilled {
                s.sigkilled = true;
                signal_tree(self.pid, libc::SIGKILL);
                if let Some(cg) = self.cgroup {
                    cg.kill_all();
                }
                s.kill_deadline = Some(now + Duration::from_secs(3600));
            }
        }
        s.kill_deadline.unwrap_or(self.deadline)
    }

    /// Reaps the child (see [`reap`]) under the lock; marks it reaped.
    fn reap(&self, block: bool, written: &mut Option<u64>, st: &mut i32) -> i32 {
        let mut s = self.lock();
        let r = reap(self.pid, block, written, st);
        if r == self.pid {
            s.reaped = true;
        }
        r
    }
}

/// One run under supervision: the helper `pid` and the pipes it writes to, what it was given,
/// and what the runner serves for it. [`Supervisor::run`] polls until the command's tree is
/// gone and its output read, then builds the result.
pub(crate) struct Supervisor<'a> {
    pub(crate) pid: i32,
    pub(crate) plan: &'a Plan,
    pub(crate) out: &'a Pipe,
    pub(crate) err: &'a Pipe,
    pub(crate) rep: &'a Pipe,
    /// Granted host sockets (Linux): the broker answers the command's connect calls for them.
    pub(crate) granted: Option<&'a super::Granted>,
    /// The report channel is a socketpair that also carries descriptors.
    pub(crate) rep_socket: bool,
    pub(crate) audit: Option<std::sync::Arc<crate::audit::Audit>>,
    pub(crate) relay: Option<StdinRelay>,
    /// The command's own terminal ([`super::StdinMode::Terminal`]): its window size follows the
    /// caller's.
    pub(crate) terminal: Option<&'a super::Pty>,
    pub(crate) cgroup: Option<&'a RunCgroup>,
    pub(crate) opts: &'a RunOptions,
    pub(crate) start: Instant,
}

/// Small until a read fills it (then [`READ_BUF_MAX`]): a command that prints little, the
/// common case, does not pay 16 zeroed pages at every run.
const READ_BUF_MIN: usize = 4096;
const READ_BUF_MAX: usize = 64 * 1024;

/// The poll loop's state: what it reads, what it has read, and the child's end.
struct Pump {
    pid: i32,
    /// The helper's pidfd (Linux); elsewhere -1, and the loop polls the child every 10 ms.
    pidfd: i32,
    rep: i32,
    rep_socket: bool,
    relay: Option<StdinRelay>,
    streams: [StreamState; 2],
    report: Vec<u8>,
    report_open: bool,
    /// The cancel token's pipe wakes the loop; once it has fired it is left out of the poll set
    /// (it stays readable).
    token_fd: Option<i32>,
    cap: u64,
    status: Option<i32>,
    written: Option<u64>,
    drain_deadline: Option<Instant>,
    buf: Vec<u8>,
}

/// One round's poll set, and where the stdin relay's two ends are in it.
struct PollSet {
    fds: Vec<libc::pollfd>,
    relay_src: usize,
    relay_dst: usize,
}

impl Pump {
    /// The command's tree is gone and everything it wrote is read.
    fn done(&self) -> bool {
        self.status.is_some() && !self.streams.iter().any(|s| s.open) && !self.report_open
    }

    fn poll_set(&self) -> PollSet {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(4);
        for s in self.streams.iter().filter(|s| s.open) {
            fds.push(libc::pollfd { fd: s.fd, events: libc::POLLIN, revents: 0 });
        }
        if self.report_open {
            fds.push(libc::pollfd { fd: self.rep, events: libc::POLLIN, revents: 0 });
        }
        if self.status.is_none() && self.pidfd >= 0 {
            fds.push(libc::pollfd { fd: self.pidfd, events: libc::POLLIN, revents: 0 });
        }
        if let Some(fd) = self.token_fd.filter(|_| self.status.is_none()) {
            fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        }
        // stdin relay: read the caller's side while there is room, write while there is data.
        let (mut relay_src, mut relay_dst) = (usize::MAX, usize::MAX);
        if let Some(r) = self.relay.as_ref().filter(|r| self.status.is_none() && r.write >= 0) {
            if r.src_open && r.buf.len() < StdinRelay::MAX_BUF {
                relay_src = fds.len();
                fds.push(libc::pollfd { fd: r.src, events: libc::POLLIN, revents: 0 });
            }
            if !r.buf.is_empty() {
                relay_dst = fds.len();
                fds.push(libc::pollfd { fd: r.write, events: libc::POLLOUT, revents: 0 });
            }
        }
        PollSet { fds, relay_src, relay_dst }
    }

    /// How long this round may wait in `poll`.
    fn wait_ms(&self, now: Instant, kill_deadline: Option<Instant>, deadline: Instant, cancel_flag: bool) -> i32 {
        if self.status.is_none() && self.pidfd < 0 {
            10
        } else if cancel_flag && self.status.is_none() {
            100
        } else {
            let until = match (self.status, kill_deadline, self.drain_deadline) {
                (None, Some(k), _) => k,
                (None, None, _) => deadline,
                (Some(_), _, Some(d)) => d,
                (Some(_), _, None) => now + Duration::from_millis(100),
            };
            until.saturating_duration_since(now).as_millis().clamp(1, 1000) as i32
        }
    }

    /// Reads what `fd` has into the buffer. The report channel is a socketpair when it also
    /// carries descriptors (the seccomp listener, PID 1's proxy socket): each goes to `pass`.
    fn read(&mut self, fd: i32, pass: &mut dyn FnMut(std::os::fd::OwnedFd)) -> isize {
        let got = match () {
            #[cfg(target_os = "linux")]
            () if fd == self.rep && self.rep_socket => {
                let mut passed = Vec::new();
                let got = super::fds::read_with_fd(fd, &mut self.buf, &mut passed);
                passed.into_iter().for_each(pass);
                got
            }
            // SAFETY: reading into our buffer.
            () => unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) },
        };
        #[cfg(not(target_os = "linux"))]
        let _ = (pass, self.rep_socket);
        if got > 0 && got as usize == self.buf.len() && self.buf.len() < READ_BUF_MAX {
            self.buf.resize(READ_BUF_MAX, 0);
        }
        got
    }

    /// Takes `got` bytes read from the report channel (or its end).
    fn on_report(&mut self, got: isize) {
        if got > 0 {
            if self.report.len() < 65536 {
                self.report.extend_from_slice(&self.buf[..got as usize]);
            }
        } else {
            self.report_open = false;
        }
    }

    /// Takes `got` bytes read from the output stream on `fd` (or its end); returns the stream
    /// and how many of them (from the buffer's start) are within the cap and go to the sink.
    fn on_output(&mut self, fd: i32, got: isize) -> Option<(Stream, usize)> {
        let s = self.streams.iter_mut().find(|s| s.fd == fd)?;
        // (A terminal's master is non-blocking: a wake without data is not its end.)
        if got < 0 && matches!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
            return None;
        }
        if got <= 0 {
            s.open = false;
            return None;
        }
        let got = got as u64;
        let keep = got.min(self.cap.saturating_sub(s.total)) as usize;
        s.total += got;
        (keep > 0).then_some((s.stream, keep))
    }

    /// The child was reaped with status `st`.
    fn reaped(&mut self, st: i32, cgroup: Option<&RunCgroup>) {
        self.status = Some(st);
        // Elsewhere than Linux nothing inside reaps the tree: what the command left in its
        // session's process group goes with it. (The group, not the reaped pid, which may
        // already be reused; a group's id is not reused while it has members.)
        // SAFETY: signalling the process group our child led.
        #[cfg(not(target_os = "linux"))]
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL)
        };
        // The supervisor killed its whole tree before exiting. Something still holding
        // the output pipes can only be in the cgroup (if at all): kill it there. With
        // the pipes closed, the cgroup's removal (which kills anything left) is enough.
        if let (Some(cg), true) = (cgroup, self.streams.iter().any(|s| s.open)) {
            cg.kill_all();
        }
        self.drain_deadline = Some(Instant::now() + Duration::from_millis(500));
    }
    /// After the loop: the pidfd closed, the relay's end closed, and the child's wait status
    /// (reaped here if the loop ended before it exited; the deadline still applies meanwhile).
    fn end(&mut self, enforcer: &Enforcer<'_>) -> i32 {
        if self.pidfd >= 0 {
            close(self.pidfd);
        }
        if let Some(r) = self.relay.as_mut() {
            r.close_write();
        }
        match self.status {
            Some(s) => s,
            None => loop {
                // Not under a blocking wait: the deadline still applies meanwhile.
                let mut st = 0;
                if enforcer.reap(false, &mut self.written, &mut st) == self.pid {
                    break st;
                }
                enforcer.tick();
                std::thread::sleep(Duration::from_millis(10));
            },
        }
    }
}

/// The threads that serve what the helper passes over the report channel (Linux): the unix
/// socket broker (the seccomp listener), the allowlist proxy and the DNS stub. They run until
/// `stop`'s write end is closed.
#[cfg(target_os = "linux")]
struct Services<'scope> {
    broker: Option<std::thread::ScopedJoinHandle<'scope, ()>>,
    proxy: Option<std::thread::ScopedJoinHandle<'scope, ()>>,
    dns: Option<std::thread::ScopedJoinHandle<'scope, ()>>,
    /// PID 1's sock_diag socket (the sandbox's network namespace): the broker's, once it starts.
    ns_diag: Option<std::os::fd::OwnedFd>,
    events: crate::linux::netlog::Events,
    stop: i32,
}

#[cfg(target_os = "linux")]
impl<'scope> Services<'scope> {
    fn serve_proxy<'env>(&mut self, scope: &'scope std::thread::Scope<'scope, 'env>, fd: std::os::fd::OwnedFd, a: &crate::network::Allowlist, granted: Option<&super::Granted>) {
        let a = std::sync::Arc::new(a.clone());
        let (ev, stop, capture) = (self.events.clone(), self.stop, granted.and_then(super::Granted::capture));
        self.proxy = Some(scope.spawn(move || crate::linux::proxy::serve(fd, a, ev, stop, capture)));
    }

    /// A descriptor the helper passed: the thread that serves it is started.
    fn take<'env>(&mut self, scope: &'scope std::thread::Scope<'scope, 'env>, fd: std::os::fd::OwnedFd, plan: &'env Plan, granted: Option<&'env super::Granted>, pid: i32) {
        let stop = self.stop;
        // PID 1's sock_diag socket (sandbox's network namespace): the broker's.
        if crate::linux::sockopt(&fd, libc::SO_DOMAIN) == Some(libc::AF_NETLINK) {
            crate::linux::unixgrant::set_diag_timeout(&fd);
            self.ns_diag = Some(fd);
            return;
        }
        // PID 1's UDP socket: the DNS stub answers on it.
        if let (true, Some(a), None) = (crate::linux::proxy::is_udp_socket(&fd), &plan.network_allowlist, &self.dns) {
            let (a, ev, capture) = (a.clone(), self.events.clone(), granted.and_then(super::Granted::capture));
            self.dns = Some(scope.spawn(move || crate::linux::dns::serve(fd, &a, capture.as_deref(), &ev, stop)));
            return;
        }
        match (crate::linux::proxy::is_tcp_listener(&fd), granted, &plan.network_allowlist) {
            // PID 1's listener: the allowlist proxy serves it.
            (true, _, Some(a)) if self.proxy.is_none() => self.serve_proxy(scope, fd, a, granted),
            // The seccomp listener: answer the command's connect calls.
            (false, Some(g), _) if self.broker.is_none() => {
                let diag = self.ns_diag.take();
                self.broker = Some(scope.spawn(move || crate::linux::unixgrant::serve(fd, g, diag, stop, pid)));
            }
            _ => drop(fd),
        }
    }

    /// Stops the threads (closes `stop_write`) and waits for them, then (bounded) for the
    /// proxy's connections to be recorded.
    fn finish(self, stop_write: i32) {
        close(stop_write);
        for t in [self.broker, self.proxy, self.dns].into_iter().flatten() {
            let _ = t.join();
        }
        close(self.stop);
        crate::linux::netlog::Events::settle(&self.events.inflight, Duration::from_secs(2));
    }
}

impl Supervisor<'_> {
    /// Supervises the run to its end: output to `sink` (capped), stdin relayed, the timeout and
    /// cancellation enforced, the helper's report read, the services it needs served.
    ///
    /// # Errors
    /// [`SandboxError::Io`] when polling fails; [`SandboxError::Setup`] /
    /// [`SandboxError::NamespacesUnavailable`] when the helper reports that it could not apply
    /// the plan, or ends without reporting it.
    pub(crate) fn run(self, sink: &mut dyn OutputSink) -> Result<(RunResult, Reported), SandboxError> {
        let Supervisor { pid, plan, out, err, rep, granted, rep_socket, audit, relay, terminal, cgroup, opts, start } = self;
        // SAFETY: pidfd_open on our own child.
        #[cfg(target_os = "linux")]
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        // Elsewhere the loop polls the child's exit every 10 ms.
        #[cfg(not(target_os = "linux"))]
        let pidfd = -1;
        let deadline = start + Duration::from_secs(plan.timeout_secs);
        let sigkill_takes_tree = plan.namespaces().is_some() || cgroup.is_some();
        let enforcer = Enforcer { pid, deadline, cancel: opts.cancel, token: opts.cancel_token.as_ref(), sigkill_takes_tree, cgroup, state: std::sync::Mutex::new(EnforceState::default()) };
        if let Some(slot) = &opts.pid_slot {
            slot.store(pid, Ordering::SeqCst);
        }
        let watchdog_stop = std::sync::atomic::AtomicBool::new(false);
        // Granted host sockets (Linux): a thread answers the command's connect calls from the
        // listener that comes with the report, until `broker_stop`'s write end is closed.
        #[cfg(target_os = "linux")]
        let broker_stop = super::fds::pipe()?;
        #[cfg(not(target_os = "linux"))]
        let _ = (granted, &audit);
        // The allowlist proxy's decisions (Linux, Full level).
        let events: std::sync::Arc<std::sync::Mutex<Vec<super::NetEvent>>> = std::sync::Arc::default();
        let mut pump = Pump {
            pid,
            pidfd,
            rep: rep.read,
            rep_socket,
            relay,
            streams: [StreamState { fd: out.read, stream: Stream::Stdout, total: 0, open: true }, StreamState { fd: err.read, stream: Stream::Stderr, total: 0, open: true }],
            report: Vec::new(),
            report_open: true,
            token_fd: opts.cancel_token.as_ref().map(super::CancelToken::wake_fd),
            cap: plan.max_output_bytes,
            status: None,
            written: None,
            drain_deadline: None,
            buf: vec![0u8; READ_BUF_MIN],
        };
        std::thread::scope(|scope| {
            let mut watchdog: Option<std::thread::ScopedJoinHandle<'_, ()>> = None;
            #[cfg(target_os = "linux")]
            let mut services = Services { broker: None, proxy: None, dns: None, ns_diag: None, events: crate::linux::netlog::Events::new(&events, audit.as_ref(), &std::sync::Arc::default()), stop: broker_stop.read };
            // The allowlist in the host's network namespace: the runner's own proxy socket on the
            // host's loopback, served from the start.
            #[cfg(target_os = "linux")]
            if let (Some(fd), Some(a)) = (granted.and_then(super::Granted::take_host_proxy), &plan.network_allowlist) {
                services.serve_proxy(scope, fd, a, granted);
            }
            let result = (|| {
                loop {
                    if pump.done() {
                        break;
                    }
                    #[cfg(target_os = "linux")]
                    if let Some(t) = terminal.filter(|_| pump.status.is_none()) {
                        t.sync_size();
                    }
                    let now = Instant::now();
                    let kill_deadline = if pump.status.is_none() {
                        enforcer.tick();
                        enforcer.lock().kill_deadline
                    } else {
                        None
                    };
                    if pump.status.is_some() && pump.drain_deadline.is_some_and(|d| now >= d) {
                        break; // something outside our tree holds the pipes; stop reading
                    }
                    let PollSet { mut fds, relay_src, relay_dst } = pump.poll_set();
                    // A cancel flag, and a window size to follow, are polled.
                    let wait_ms = pump.wait_ms(now, kill_deadline, deadline, opts.cancel.is_some() || terminal.is_some());
                    // SAFETY: fds is a valid array of pollfd.
                    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
                    if n < 0 {
                        let e = std::io::Error::last_os_error();
                        if e.raw_os_error() == Some(libc::EINTR) {
                            continue;
                        }
                        return Err(SandboxError::io("poll", e));
                    }
                    if let Some(r) = pump.relay.as_mut() {
                        let src = fds.get(relay_src).is_some_and(|p| p.revents != 0);
                        let dst = fds.get(relay_dst).is_some_and(|p| p.revents != 0);
                        if src || dst {
                            r.pump(src, dst, &mut pump.buf);
                        }
                    }
                    for (i, p) in fds.iter().enumerate() {
                        if p.revents == 0 || i == relay_src || i == relay_dst || p.fd == pump.pidfd {
                            continue;
                        }
                        if Some(p.fd) == pump.token_fd {
                            pump.token_fd = None; // cancelled: the tick at the loop's top acts on it
                            continue;
                        }
                        #[cfg(target_os = "linux")]
                        let got = pump.read(p.fd, &mut |fd| services.take(scope, fd, plan, granted, pid));
                        #[cfg(not(target_os = "linux"))]
                        let got = pump.read(p.fd, &mut drop);
                        if p.fd == rep.read {
                            pump.on_report(got);
                            continue;
                        }
                        let Some((stream, keep)) = pump.on_output(p.fd, got) else { continue };
                        // The sink may block: from now on a watchdog keeps the deadline.
                        if watchdog.is_none() && pump.status.is_none() {
                            let (e, stop) = (&enforcer, &watchdog_stop);
                            watchdog = Some(scope.spawn(move || {
                                while !stop.load(Ordering::SeqCst) {
                                    let next = e.tick();
                                    std::thread::park_timeout(next.saturating_duration_since(Instant::now()).clamp(Duration::from_millis(1), Duration::from_millis(100)));
                                }
                            }));
                        }
                        sink.output(stream, &pump.buf[..keep]);
                    }
                    if pump.status.is_none() {
                        let mut st = 0;
                        // SAFETY: non-blocking wait for our own child.
                        if enforcer.reap(false, &mut pump.written, &mut st) == pid {
                            pump.reaped(st, cgroup);
                        }
                    }
                }
                let st = pump.end(&enforcer);
                let (timed_out, cancelled) = {
                    let s = enforcer.lock();
                    (s.timed_out, s.cancelled)
                };
                outcome(plan, &pump, st, (timed_out, cancelled), sink, start)
            })();
            watchdog_stop.store(true, Ordering::SeqCst);
            if let Some(w) = watchdog {
                w.thread().unpark();
                let _ = w.join();
            }
            #[cfg(target_os = "linux")]
            services.finish(broker_stop.write);
            // Every decision the proxy made while the command ran (a connection still open 2 s
            // after the run ended is recorded by its thread later and is not in the result).
            result.map(|(mut r, rep)| {
                r.network = std::mem::take(&mut *events.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
                (r, rep)
            })
        })
    }
}

/// The run's result once the child is reaped with status `st`: the cap's truncation told to
/// the sink, the helper's report checked (a plan not applied is an error, never a result),
/// the exit code.
fn outcome(plan: &Plan, pump: &Pump, st: i32, (timed_out, cancelled): (bool, bool), sink: &mut dyn OutputSink, start: Instant) -> Result<(RunResult, Reported), SandboxError> {
    let (cap, streams) = (pump.cap, &pump.streams);
    for s in streams {
        if s.total > cap {
            sink.truncated(s.stream, s.total - cap);
        }
    }
    let reported = Reported::from_bytes(&pump.report);
    if let Some((step, message)) = &reported.setup_failed {
        return Err(match step {
            SetupStep::UserNamespace => SandboxError::NamespacesUnavailable(message.clone()),
            SetupStep::Other => SandboxError::Setup(message.clone()),
        });
    }
    // PID 1 cloned by a forking runner reports the command's raw wait status (it cannot die of
    // the command's signal itself).
    let st = reported.status.unwrap_or(st);
    let (applied, exec_errno) = (reported.applied.clone(), reported.exec_errno);
    if plan.level > SandboxLevel::None && applied.is_none() && exec_errno.is_none() && !timed_out && !cancelled {
        return Err(SandboxError::Setup(format!("the helper ended without reporting its confinement (status {st:#x})")));
    }
    // The helper never execs without applying the whole plan; a report that says otherwise is
    // not a result to relabel but an error.
    if let Some(a) = &applied {
        let missing: Vec<&str> = [
            (plan.landlock().is_some() && a.landlock != LANDLOCK_ENFORCED, "Landlock"),
            (plan.seccomp().is_some() && !a.seccomp, "seccomp"),
            (plan.namespaces().is_some() && !a.namespaces, "namespaces"),
            (plan.macos.is_some() && !a.seatbelt, "Seatbelt profile"),
        ]
        .into_iter()
        .filter_map(|(m, name)| m.then_some(name))
        .collect();
        if !missing.is_empty() {
            return Err(SandboxError::Setup(format!("the helper reported the plan's {} not applied", missing.join(", "))));
        }
    }
    let status = if libc::WIFSIGNALED(st) {
        ExitKind::Signaled { signal: libc::WTERMSIG(st) }
    } else {
        ExitKind::Exited { code: libc::WEXITSTATUS(st) }
    };
    if let Some(e) = exec_errno {
        let msg = format!("localgpt-sandbox: {}: {}\n", "exec", std::io::Error::from_raw_os_error(e));
        sink.output(Stream::Stderr, msg.as_bytes());
    }
    let exit_code = if timed_out {
        124
    } else if cancelled {
        130
    } else {
        match status {
            ExitKind::Exited { code } => code,
            ExitKind::Signaled { signal } => 128 + signal,
        }
    };
    let result = RunResult {
        command: Vec::new(),
        workspace: plan.workspace.clone(),
        level: plan.level,
        mode: plan.mode,
        status,
        exit_code,
        timed_out,
        cancelled,
        duration_ms: start.elapsed().as_secs_f64() * 1000.0,
        stdout: String::new(),
        stderr: String::new(),
        stdout_bytes: streams[0].total,
        stderr_bytes: streams[1].total,
        stdout_truncated: streams[0].total > cap,
        stderr_truncated: streams[1].total > cap,
        bytes_written: pump.written,
        protections: plan.protections.clone(),
        warnings: plan.warnings.iter().cloned().chain(reported.warnings.iter().map(|w| w.message().to_string())).collect(),
        recovered: Vec::new(),
        applied,
        protected_review: None,
        denials: Vec::new(),
        refusals: Vec::new(),
        hints: Vec::new(),
        network: Vec::new(),
    };
    Ok((result, reported))
}
