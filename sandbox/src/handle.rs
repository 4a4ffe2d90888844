//! The handle API for agent hosts: a [`Sandbox`] (a validated policy, reused for many commands)
//! spawns a [`Command`] as a [`SandboxedChild`], whose output streams as it is produced, whose
//! stdin can be written, and which can be waited for, polled, cancelled or killed from any
//! thread. With the `tokio` feature the streams are also `AsyncRead` and
//! `SandboxedChild::wait_async` waits without blocking a runtime thread.
//!
//! Each child is run by one runner thread of this process (the same code as
//! [`crate::run_argv`]): it enforces the timeout and the output caps whatever the host does with
//! the streams. The streams are in-memory buffers that the runner fills with output already
//! capped (at most [`crate::SandboxPolicy::max_output_bytes`] per stream, plus the truncation
//! marker), so a host that never reads them cannot block the runner, and one that reads late
//! loses nothing. Dropping a [`SandboxedChild`] kills its whole tree and waits for it.
//!
//! A host that embeds this must call [`crate::dispatch`] first thing in `main()`: a
//! multithreaded host's helper is its own binary re-executed as `localgpt-sandbox` (or the binary
//! set with [`Sandbox::helper_exe`]).
//!
//! ```no_run
//! use localgpt_sandbox::handle::{Command, Sandbox};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = localgpt_sandbox::build_sandbox_policy(std::path::Path::new("."), &Default::default())?;
//! let sandbox = Sandbox::new(policy)?;
//! let mut child = sandbox.spawn(&Command::shell("echo hello; sleep 30"))?;
//! let mut line = String::new();
//! std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout().unwrap()), &mut line)?;
//! child.cancel();
//! let result = child.wait()?;
//! assert!(result.cancelled);
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::SandboxError;
use crate::policy::SandboxPolicy;
use crate::run::{CancelToken, HelperStart, OutputSink, RunOptions, RunResult, StdinMode, Stream};

/// A policy prepared for running commands: validated once and the machine's capabilities
/// detected once, both shared by every [`spawn`](Sandbox::spawn). Each run still plans: a run's
/// plan depends on the workspace and the home directory as they are at that moment. What a
/// process can change in its own life is looked at again at each run (its uid and gid, a user
/// namespace or a per-run cgroup that failed since), the kernel's features are not.
#[derive(Clone, Debug)]
pub struct Sandbox {
    policy: SandboxPolicy,
    caps: crate::detect::Capabilities,
    helper_exe: Option<PathBuf>,
}

impl Sandbox {
    /// A sandbox for `policy`.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] when the policy is invalid.
    pub fn new(policy: SandboxPolicy) -> Result<Sandbox, SandboxError> {
        policy.validate()?;
        Ok(Sandbox { policy, caps: crate::detect::detect_quick(), helper_exe: None })
    }

    /// The binary that becomes the helper (it must call [`crate::dispatch`] first); default: this
    /// process's own (`/proc/self/exe`).
    #[must_use]
    pub fn helper_exe(mut self, exe: impl Into<PathBuf>) -> Sandbox {
        self.helper_exe = Some(exe.into());
        self
    }

    /// The policy.
    #[must_use]
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// Plans the run and starts `cmd` under it on a runner thread.
    ///
    /// # Errors
    /// Whatever makes planning fail ([`SandboxError::Policy`], [`SandboxError::LevelUnavailable`],
    /// [`SandboxError::Plan`]), before anything runs; [`SandboxError::Io`] when a pipe or the
    /// runner thread cannot be made. A failure to start the helper comes from
    /// [`SandboxedChild::wait`].
    pub fn spawn(&self, cmd: &Command) -> Result<SandboxedChild, SandboxError> {
        if cmd.argv.is_empty() {
            return Err(SandboxError::Policy("no command given".into()));
        }
        let prepared = crate::run::prepare_with(&self.policy, Some(&self.caps))?;
        let token = CancelToken::new()?;
        let pid = Arc::new(AtomicI32::new(0));
        let (stdin_mode, stdin, relay_src) = if cmd.piped_stdin {
            let p = crate::run::fds::pipe()?;
            // SAFETY: just created (close-on-exec), owned here.
            let (r, w) = unsafe { (OwnedFd::from_raw_fd(p.read), OwnedFd::from_raw_fd(p.write)) };
            (StdinMode::Relay(std::os::fd::AsRawFd::as_raw_fd(&r)), Some(ChildStdin(std::fs::File::from(w))), Some(r))
        } else {
            (StdinMode::Null, None, None)
        };
        let opts = RunOptions {
            stdin: stdin_mode,
            helper_exe: self.helper_exe.clone(),
            helper_start: HelperStart::Auto,
            cancel: None,
            cancel_token: Some(token.clone()),
            pid_slot: Some(Arc::clone(&pid)),
            collect_denials: false,
        };
        let (out, err) = (Arc::new(Buffer::default()), Arc::new(Buffer::default()));
        let done = Arc::new(Done::default());
        let (o, e, d) = (Arc::clone(&out), Arc::clone(&err), Arc::clone(&done));
        let argv = cmd.argv.clone();
        let thread = std::thread::Builder::new()
            .name("localgpt-sandbox-runner".into())
            .spawn(move || {
                let mut sink = BufferSink { out: &o, err: &e };
                let r = prepared.run(&argv, &opts, &mut sink);
                drop(relay_src); // the relay's source: ours to close once the run is over
                o.close();
                e.close();
                d.set(r);
            })
            .map_err(|e| SandboxError::io("start the runner thread", e))?;
        Ok(SandboxedChild {
            stdin,
            stdout: Some(ChildStdout(out)),
            stderr: Some(ChildStderr(err)),
            token,
            pid,
            done,
            thread: Some(thread),
        })
    }
}

/// A command to run: an argv (executed directly) or a shell snippet (`bash -c`), and how its
/// stdin is set up (`/dev/null` unless [`Command::stdin_piped`]).
#[derive(Clone, Debug)]
pub struct Command {
    argv: Vec<OsString>,
    piped_stdin: bool,
}

impl Command {
    /// `program` with no arguments yet.
    pub fn new(program: impl Into<OsString>) -> Command {
        Command { argv: vec![program.into()], piped_stdin: false }
    }

    /// `bash -c SNIPPET`, as `localgpt sandbox run -- 'SNIPPET'` runs it.
    pub fn shell(snippet: impl Into<OsString>) -> Command {
        Command { argv: vec!["bash".into(), "-c".into(), snippet.into()], piped_stdin: false }
    }

    /// Adds an argument.
    #[must_use]
    pub fn arg(mut self, a: impl Into<OsString>) -> Command {
        self.argv.push(a.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Command {
        self.argv.extend(args.into_iter().map(Into::into));
        self
    }

    /// The command's stdin is a pipe the host writes with [`SandboxedChild::stdin`] (closing it
    /// gives the command end-of-file).
    #[must_use]
    pub fn stdin_piped(mut self) -> Command {
        self.piped_stdin = true;
        self
    }
}

/// A running sandboxed command. Dropping it kills the whole tree and waits for it.
#[derive(Debug)]
pub struct SandboxedChild {
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    token: CancelToken,
    pid: Arc<AtomicI32>,
    done: Arc<Done>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SandboxedChild {
    /// The pid of the sandbox's outermost process (the helper), once started.
    #[must_use]
    pub fn id(&self) -> Option<u32> {
        u32::try_from(self.pid.load(Ordering::SeqCst)).ok().filter(|&p| p > 0)
    }

    /// The command's stdin (with [`Command::stdin_piped`]), once: drop it to close it.
    pub fn stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The command's stdout, once.
    pub fn stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The command's stderr, once.
    pub fn stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// A token that cancels this run from anywhere (cloneable, `Send`).
    #[must_use]
    pub fn cancel_token(&self) -> CancelToken {
        self.token.clone()
    }

    /// Stops the run: `SIGTERM` to the whole tree now, `SIGKILL` 2 s later; returns at once.
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// Kills the whole tree now (`SIGKILL`); returns at once.
    pub fn kill(&self) {
        self.token.kill();
    }

    /// The result, if the run is over (never blocks).
    ///
    /// # Errors
    /// As [`SandboxedChild::wait`].
    pub fn try_wait(&mut self) -> Result<Option<RunResult>, SandboxError> {
        if !self.done.is_set() {
            return Ok(None);
        }
        self.wait().map(Some)
    }

    /// Waits for the run to end (every process of the tree is gone when it returns) and
    /// returns its result (its streams stay readable until drained). A stdin not taken yet is
    /// closed first, as `std::process::Child::wait` does, so a command reading it ends.
    ///
    /// # Errors
    /// [`SandboxError::Setup`] when the sandbox could not be set up (nothing ran), or an I/O
    /// error of the runner.
    pub fn wait(&mut self) -> Result<RunResult, SandboxError> {
        drop(self.stdin.take());
        let r = self.done.wait();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        r
    }

    /// [`SandboxedChild::wait`] without blocking a thread of the async runtime; cancellation-safe
    /// (dropping the future leaves the run as it was).
    ///
    /// # Errors
    /// As [`SandboxedChild::wait`].
    #[cfg(feature = "tokio")]
    pub async fn wait_async(&mut self) -> Result<RunResult, SandboxError> {
        drop(self.stdin.take());
        std::future::poll_fn(|cx| self.done.poll(cx)).await;
        self.wait()
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.token.kill();
            let _ = self.wait();
        }
    }
}

/// The result slot of a run.
#[derive(Default, Debug)]
struct Done {
    slot: Mutex<DoneState>,
    cv: Condvar,
}

#[derive(Default, Debug)]
struct DoneState {
    result: Option<Result<RunResult, SandboxError>>,
    /// An error already handed out, for later calls.
    error_text: Option<String>,
    set: bool,
    wakers: Vec<std::task::Waker>,
}

impl Done {
    fn lock(&self) -> std::sync::MutexGuard<'_, DoneState> {
        self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, r: Result<RunResult, SandboxError>) {
        let wakers = {
            let mut s = self.lock();
            s.result = Some(r);
            s.set = true;
            std::mem::take(&mut s.wakers)
        };
        self.cv.notify_all();
        wakers.into_iter().for_each(std::task::Waker::wake);
    }

    fn is_set(&self) -> bool {
        self.lock().set
    }

    /// Blocks until set; the result (an error as itself the first time, as text after).
    fn wait(&self) -> Result<RunResult, SandboxError> {
        let mut s = self.lock();
        while !s.set {
            s = self.cv.wait(s).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if let Some(Ok(r)) = &s.result {
            return Ok(r.clone());
        }
        if let Some(Err(e)) = s.result.take() {
            s.error_text = Some(e.to_string());
            return Err(e);
        }
        Err(SandboxError::Setup(s.error_text.clone().unwrap_or_else(|| "the runner thread ended without a result".into())))
    }

    #[cfg(feature = "tokio")]
    fn poll(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let mut s = self.lock();
        if s.set {
            return std::task::Poll::Ready(());
        }
        if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            s.wakers.push(cx.waker().clone());
        }
        std::task::Poll::Pending
    }
}

/// One output stream between the runner and the host: bytes already capped by the runner.
#[derive(Default, Debug)]
struct Buffer {
    state: Mutex<BufState>,
    cv: Condvar,
}

#[derive(Default, Debug)]
struct BufState {
    data: VecDeque<u8>,
    closed: bool,
    waker: Option<std::task::Waker>,
}

impl Buffer {
    fn lock(&self) -> std::sync::MutexGuard<'_, BufState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, data: &[u8]) {
        let w = {
            let mut s = self.lock();
            s.data.extend(data);
            s.waker.take()
        };
        self.cv.notify_all();
        if let Some(w) = w {
            w.wake();
        }
    }

    fn close(&self) {
        let w = {
            let mut s = self.lock();
            s.closed = true;
            s.waker.take()
        };
        self.cv.notify_all();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Copies what is there into `buf` (0 at the end); `None` when nothing is there yet.
    fn take(s: &mut BufState, buf: &mut [u8]) -> Option<usize> {
        if s.data.is_empty() {
            return s.closed.then_some(0);
        }
        let n = buf.len().min(s.data.len());
        for (d, b) in buf.iter_mut().zip(s.data.drain(..n)) {
            *d = b;
        }
        Some(n)
    }

    fn read_blocking(&self, buf: &mut [u8]) -> usize {
        let mut s = self.lock();
        loop {
            if let Some(n) = Buffer::take(&mut s, buf) {
                return n;
            }
            s = self.cv.wait(s).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    #[cfg(feature = "tokio")]
    fn poll_read(&self, cx: &mut std::task::Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> std::task::Poll<std::io::Result<()>> {
        let mut s = self.lock();
        let mut tmp = vec![0u8; buf.remaining().min(64 * 1024)];
        match Buffer::take(&mut s, &mut tmp) {
            Some(n) => {
                buf.put_slice(&tmp[..n]);
                std::task::Poll::Ready(Ok(()))
            }
            None => {
                s.waker = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        }
    }
}

struct BufferSink<'a> {
    out: &'a Buffer,
    err: &'a Buffer,
}

impl OutputSink for BufferSink<'_> {
    fn output(&mut self, stream: Stream, data: &[u8]) {
        match stream {
            Stream::Stdout => self.out.push(data),
            Stream::Stderr => self.err.push(data),
        }
    }
}

macro_rules! output_stream {
    ($name:ident, $what:literal) => {
        #[doc = concat!("The command's ", $what, ": `Read` (and `AsyncRead` with the `tokio` feature); end-of-file once the run is over and everything was read.")]
        #[derive(Debug)]
        pub struct $name(Arc<Buffer>);

        impl Read for $name {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                Ok(self.0.read_blocking(buf))
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncRead for $name {
            fn poll_read(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> std::task::Poll<std::io::Result<()>> {
                self.0.poll_read(cx, buf)
            }
        }
    };
}

output_stream!(ChildStdout, "stdout");
output_stream!(ChildStderr, "stderr");

/// The command's stdin (with [`Command::stdin_piped`]): `Write`; drop it to close it.
#[derive(Debug)]
pub struct ChildStdin(std::fs::File);

impl Write for ChildStdin {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
