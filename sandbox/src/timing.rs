//! Opt-in start-up timestamps for the latency benchmark (`bench/`, `localgpt-latency`).
//!
//! When `LOCALGPT_SANDBOX_TIMING` is set in a process's environment, [`stamp`] records
//! `CLOCK_MONOTONIC` at named points and [`flush`] writes them to stderr as one line,
//! `localgpt-sandbox-timing <who> <label>=<ns> …`. Otherwise both return after one cached check
//! of the environment (read once per process). Only times are recorded: no paths, no policy.
//! The helper sees the variable only when the caller asks for it with
//! `--keep-env LOCALGPT_SANDBOX_TIMING` (the environment allowlist drops it otherwise).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// The variable that turns the timestamps on.
pub const TIMING_ENV: &str = "LOCALGPT_SANDBOX_TIMING";

/// 0 = not checked yet, 1 = off, 2 = on.
static STATE: AtomicU8 = AtomicU8::new(0);
static STAMPS: Mutex<Vec<(&'static str, u64)>> = Mutex::new(Vec::new());

fn enabled() -> bool {
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let on = std::env::var_os(TIMING_ENV).is_some();
            STATE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock `std::time::Instant` uses on Linux).
#[must_use]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// In a forked copy of a process (the helper forked by the runner): forgets the stamps inherited
/// from the parent and turns the stamps on or off as the child's own environment would.
pub fn restart(enabled: bool) {
    forget();
    STATE.store(if enabled { 2 } else { 1 }, Ordering::Relaxed);
}

/// Forgets the stamps recorded so far (they were already written by another process).
pub fn forget() {
    if let Ok(mut v) = STAMPS.lock() {
        v.clear();
    }
}

/// The stamps recorded so far (`None` unless enabled), for [`restore`]: around a child that
/// shares this process's memory and flushes them as its own.
#[cfg(target_os = "linux")]
pub(crate) fn save() -> Option<Vec<(&'static str, u64)>> {
    if !enabled() {
        return None;
    }
    STAMPS.lock().ok().map(|v| v.clone())
}

/// Puts back what [`save`] returned.
#[cfg(target_os = "linux")]
pub(crate) fn restore(saved: Option<Vec<(&'static str, u64)>>) {
    if let (Some(s), Ok(mut v)) = (saved, STAMPS.lock()) {
        *v = s;
    }
}

/// Records the time of `label` (no-op unless enabled).
pub fn stamp(label: &'static str) {
    if enabled() {
        if let Ok(mut v) = STAMPS.lock() {
            v.push((label, now_ns()));
        }
    }
}

/// Writes the recorded stamps to stderr as one line and forgets them (no-op unless enabled).
pub fn flush(who: &str) {
    if !enabled() {
        return;
    }
    let Ok(mut v) = STAMPS.lock() else { return };
    let mut line = format!("localgpt-sandbox-timing {who}");
    for (l, t) in v.drain(..) {
        line.push_str(&format!(" {l}={t}"));
    }
    line.push('\n');
    // SAFETY: writing a buffer we own to fd 2.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}
