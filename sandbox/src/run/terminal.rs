//! A terminal of the command's own ([`super::StdinMode::Terminal`], Linux): a pseudo-terminal
//! whose slave is the helper's stdin, stdout and stderr, and which the command makes its
//! controlling terminal in a session of its own (`setsid`, `TIOCSCTTY`; see
//! `linux::helper`). The runner relays: the caller's terminal, switched to raw mode for the
//! run, is read into the master (so Ctrl-C, Ctrl-Z and line editing are the pty's, for the
//! program in its foreground), and the master is read as the command's stdout (through the
//! caller's screen filter, [`crate::text::ScreenFilter`]). The window size is copied at the
//! start and whenever it changes (the poll loop checks it at every wake; a `SIGWINCH` handler
//! in the caller wakes it at once), which signals the program as a resize does.
//!
//! The command never holds the caller's terminal, so it cannot inject input into it, change its
//! settings or read another program's input from it. When the run ends the caller's settings
//! are restored and input that arrived meanwhile is discarded (`tcflush`): a terminal's late
//! answer to something the command printed is never typed into the caller's shell.

use std::cell::Cell;

use super::fds::{close, Pipe};
use crate::error::SandboxError;

/// The run's pseudo-terminal and the caller's terminal it relays (restored on drop).
pub(crate) struct Pty {
    /// The master: read as the command's output, written (through a duplicate) with the input.
    master: i32,
    /// The slave, until the helper has its copies.
    slave: Cell<i32>,
    /// The caller's terminal (not ours to close).
    caller: i32,
    /// Its settings before the run.
    saved: libc::termios,
    /// The window size last copied to the master.
    size: Cell<(u16, u16)>,
}

fn last(what: &str) -> SandboxError {
    SandboxError::io(what, std::io::Error::last_os_error())
}

/// `fcntl(fd, F_DUPFD_CLOEXEC)`.
fn dup(fd: i32, what: &str) -> Result<i32, SandboxError> {
    // SAFETY: duplicating a descriptor we hold.
    match unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) } {
        r if r < 0 => Err(last(what)),
        r => Ok(r),
    }
}

impl Pty {
    /// Opens a pseudo-terminal with the settings and window size of `caller`, a terminal, and
    /// switches `caller` to raw mode until the [`Pty`] is dropped.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] when `caller` is not a terminal; [`SandboxError::Io`] when no
    /// pseudo-terminal can be made.
    pub(crate) fn open(caller: i32) -> Result<Pty, SandboxError> {
        // SAFETY: tcgetattr into a zeroed struct, for a descriptor it checks itself.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::tcgetattr(caller, &mut saved) } != 0 {
            return Err(SandboxError::Policy(format!("a terminal for the command: descriptor {caller} is not a terminal")));
        }
        // SAFETY: a fresh master, owned by the Pty from here on (closed on drop).
        let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
        if master < 0 {
            return Err(last("open a pseudo-terminal"));
        }
        let pty = Pty { master, slave: Cell::new(-1), caller, saved, size: Cell::new((0, 0)) };
        // SAFETY: grantpt/unlockpt on our master; TIOCGPTPEER opens its slave without a path
        // lookup (Linux 4.13), not as a controlling terminal.
        let slave = unsafe {
            if libc::grantpt(master) != 0 || libc::unlockpt(master) != 0 {
                return Err(last("unlock the pseudo-terminal"));
            }
            libc::ioctl(master, libc::TIOCGPTPEER, libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC)
        };
        if slave < 0 {
            return Err(last("open the pseudo-terminal's slave"));
        }
        pty.slave.set(slave);
        // SAFETY: settings read from the caller's terminal, set on ours; the master made
        // non-blocking (the relay's writes; reads happen when poll says so).
        unsafe {
            if libc::tcsetattr(slave, libc::TCSANOW, &pty.saved) != 0 {
                return Err(last("set the pseudo-terminal's settings"));
            }
            libc::fcntl(master, libc::F_SETFL, libc::O_NONBLOCK);
        }
        pty.sync_size();
        let mut raw = pty.saved;
        // SAFETY: cfmakeraw edits our copy; tcsetattr on the caller's terminal, restored on drop.
        unsafe {
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(caller, libc::TCSADRAIN, &raw) != 0 {
                return Err(last("switch the terminal to raw mode"));
            }
        }
        Ok(pty)
    }

    /// The helper's stdin, stdout and stderr: `out` and `err` replaced by the terminal (the
    /// stdout stream read from the master; the stderr stream is one that ends at once), and
    /// the stdin to hand over; the runner closes the write ends it gets once the helper
    /// started. The [`Pty`] keeps no slave of its own after this.
    ///
    /// # Errors
    /// [`SandboxError::Io`] when a descriptor cannot be duplicated.
    pub(crate) fn streams(&self, out: Pipe, err: Pipe) -> Result<(i32, Pipe, Pipe), SandboxError> {
        for fd in [out.read, out.write, err.write] {
            close(fd);
        }
        let slave = self.slave.replace(-1);
        let made = (|| {
            let stdin = dup(slave, "duplicate the pseudo-terminal")?;
            let out = Pipe { read: dup(self.master, "duplicate the pseudo-terminal").inspect_err(|_| close(stdin))?, write: slave };
            // The stderr pipe's write end is closed: its stream ends at once.
            let err = Pipe { read: err.read, write: dup(slave, "duplicate the pseudo-terminal").inspect_err(|_| [stdin, out.read].into_iter().for_each(close))? };
            Ok((stdin, out, err))
        })();
        if made.is_err() {
            [slave, err.read].into_iter().for_each(close);
        }
        made
    }

    /// A duplicate of the master for the stdin relay to write the caller's input into.
    ///
    /// # Errors
    /// [`SandboxError::Io`] when it cannot be duplicated.
    pub(crate) fn input(&self) -> Result<i32, SandboxError> {
        dup(self.master, "duplicate the pseudo-terminal")
    }

    /// Copies the caller's window size to the pseudo-terminal if it changed (the kernel then
    /// sends `SIGWINCH` to the program in its foreground).
    pub(crate) fn sync_size(&self) {
        // SAFETY: TIOCGWINSZ into a zeroed struct; TIOCSWINSZ from it on our master.
        unsafe {
            let mut ws: libc::winsize = std::mem::zeroed();
            if libc::ioctl(self.caller, libc::TIOCGWINSZ, &mut ws) == 0 && (ws.ws_row, ws.ws_col) != self.size.get() {
                self.size.set((ws.ws_row, ws.ws_col));
                libc::ioctl(self.master, libc::TIOCSWINSZ, &ws);
            }
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        close(self.master);
        close(self.slave.get());
        // SAFETY: restoring settings read from the same descriptor; discarding its input queue.
        unsafe {
            libc::tcsetattr(self.caller, libc::TCSADRAIN, &self.saved);
            libc::tcflush(self.caller, libc::TCIFLUSH);
        }
    }
}
