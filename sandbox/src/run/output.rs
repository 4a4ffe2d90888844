//! The command's streams on the parent side: output sinks with the per-stream cap, and the
//! relay of the caller's stdin into the command's stdin pipe.

use super::fds::close;

/// Which output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// stdout
    Stdout,
    /// stderr
    Stderr,
}

/// Receives the command's output as it arrives (already capped).
pub trait OutputSink {
    /// A chunk of output within the cap.
    fn output(&mut self, stream: Stream, data: &[u8]);
    /// Called once per stream that exceeded the cap, after its last chunk.
    fn truncated(&mut self, stream: Stream, dropped: u64) {
        let marker = format!("\n[localgpt-sandbox: output truncated: {dropped} more bytes dropped]\n");
        self.output(stream, marker.as_bytes());
    }
}

/// Collects output in memory.
#[derive(Default, Debug)]
pub struct CaptureSink {
    /// Captured stdout.
    pub stdout: Vec<u8>,
    /// Captured stderr.
    pub stderr: Vec<u8>,
}

impl OutputSink for CaptureSink {
    fn output(&mut self, stream: Stream, data: &[u8]) {
        match stream {
            Stream::Stdout => self.stdout.extend_from_slice(data),
            Stream::Stderr => self.stderr.extend_from_slice(data),
        }
    }
}

/// Bytes on their way from the caller's descriptor to the command's stdin pipe.
pub(crate) struct StdinRelay {
    /// The caller's descriptor (not ours to close).
    pub(crate) src: i32,
    /// The pipe's write end (non-blocking), closed at the caller's EOF or the command's exit.
    pub(crate) write: i32,
    /// Read but not yet written.
    pub(crate) buf: Vec<u8>,
    /// `src` has not reached EOF.
    pub(crate) src_open: bool,
}

impl StdinRelay {
    /// At most this much is buffered (then `src` is not polled until the command reads).
    pub(crate) const MAX_BUF: usize = 64 * 1024;

    pub(crate) fn close_write(&mut self) {
        close(self.write);
        self.write = -1;
    }

    /// Moves bytes after poll reported `src` readable or the pipe writable.
    pub(crate) fn pump(&mut self, src_ready: bool, dst_ready: bool, scratch: &mut [u8]) {
        if src_ready && self.src_open && self.buf.len() < Self::MAX_BUF {
            let room = (Self::MAX_BUF - self.buf.len()).min(scratch.len());
            // SAFETY: reading into our buffer.
            let n = unsafe { libc::read(self.src, scratch.as_mut_ptr().cast(), room) };
            if n > 0 {
                self.buf.extend_from_slice(&scratch[..n as usize]);
            } else if n == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                self.src_open = false;
            }
        }
        if (dst_ready || !self.buf.is_empty()) && self.write >= 0 && !self.buf.is_empty() {
            // SAFETY: writing our buffer to our non-blocking pipe end.
            let n = unsafe { libc::write(self.write, self.buf.as_ptr().cast(), self.buf.len()) };
            if n > 0 {
                self.buf.drain(..n as usize);
            } else if n < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                if e != Some(libc::EAGAIN) && e != Some(libc::EINTR) {
                    // EPIPE: the command closed its stdin; what is left is dropped.
                    self.buf.clear();
                    self.src_open = false;
                }
            }
        }
        if !self.src_open && self.buf.is_empty() && self.write >= 0 {
            self.close_write();
        }
    }
}

pub(crate) struct StreamState {
    pub(crate) fd: i32,
    pub(crate) stream: Stream,
    pub(crate) total: u64,
    pub(crate) open: bool,
}
