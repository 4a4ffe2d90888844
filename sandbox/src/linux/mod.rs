//! The Linux backend: the artefacts a [`crate::plan::Plan`] compiles to on Linux — Landlock
//! rules ([`landlock`]), the seccomp table and its BPF program per architecture ([`seccomp`]),
//! namespaces and mounts ([`mounts`]) — and the thin code that applies them. The artefact
//! planners are pure data and compile on every Unix; the glue (the helper, `apply`, the
//! namespace set-up, the supervisor, the protected paths' staging and review) is Linux only and
//! decides nothing.

pub mod compile;
pub mod landlock;
pub mod mounts;
pub mod seccomp;
pub mod syscalls;

#[cfg(target_os = "linux")]
pub mod apply;
#[cfg(target_os = "linux")]
pub mod helper;
#[cfg(target_os = "linux")]
pub mod namespaces;
#[cfg(target_os = "linux")]
pub mod protect;
#[cfg(target_os = "linux")]
pub mod supervise;
#[cfg(target_os = "linux")]
pub(crate) mod probe;
#[cfg(target_os = "linux")]
pub(crate) mod unixgrant;
#[cfg(target_os = "linux")]
pub(crate) mod procguard;
#[cfg(target_os = "linux")]
pub mod proxy;
#[cfg(target_os = "linux")]
pub(crate) mod dns;
#[cfg(target_os = "linux")]
pub(crate) mod capture;
#[cfg(target_os = "linux")]
pub(crate) mod netlog;
#[cfg(target_os = "linux")]
pub(crate) mod rulesets;
#[cfg(target_os = "linux")]
pub(crate) mod zygote;

/// Runs `f` on a new thread of the runner unless `counter` already counts `max` running ones
/// (then returns false and runs nothing); the count drops when `f` returns.
#[cfg(target_os = "linux")]
pub(crate) fn spawn_bounded(counter: &'static std::sync::atomic::AtomicUsize, max: usize, name: &str, stack: usize, f: impl FnOnce() + Send + 'static) -> bool {
    use std::sync::atomic::Ordering;
    if counter.fetch_add(1, Ordering::SeqCst) >= max {
        counter.fetch_sub(1, Ordering::SeqCst);
        return false;
    }
    let spawned = std::thread::Builder::new().name(name.into()).stack_size(stack).spawn(move || {
        f();
        counter.fetch_sub(1, Ordering::SeqCst);
    });
    if spawned.is_err() {
        counter.fetch_sub(1, Ordering::SeqCst);
    }
    spawned.is_ok()
}

/// Waits until `fd` has an event or `stop` (a pipe's read end, closed when the run ends) does;
/// `EINTR` is retried. `fd`'s `revents`, or `None` once `stop` fires or `poll` fails: the
/// serving loops of the runner's threads (broker, proxy, DNS stub) end then.
#[cfg(target_os = "linux")]
pub(crate) fn wait_or_stop(fd: i32, stop: i32) -> Option<i16> {
    loop {
        let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 }];
        // SAFETY: a valid array of two pollfds.
        if unsafe { libc::poll(p.as_mut_ptr(), 2, -1) } < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return None;
        }
        return (p[1].revents == 0).then_some(p[0].revents);
    }
}

/// `getsockopt(SOL_SOCKET, opt)` as an int (`None` when it fails: not a socket).
#[cfg(target_os = "linux")]
pub(crate) fn sockopt(fd: &impl std::os::fd::AsRawFd, opt: i32) -> Option<i32> {
    sockopt_at(fd, libc::SOL_SOCKET, opt)
}

/// An integer socket option at `level` (`None`: the call failed).
#[cfg(target_os = "linux")]
pub(crate) fn sockopt_at(fd: &impl std::os::fd::AsRawFd, level: i32, opt: i32) -> Option<i32> {
    let mut v: i32 = 0;
    let mut l = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: getsockopt into a local int.
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), level, opt, (&mut v as *mut i32).cast(), &mut l) };
    (r == 0).then_some(v)
}

/// Sets an integer socket option at `level`.
///
/// # Errors
/// What `setsockopt` said.
#[cfg(target_os = "linux")]
pub(crate) fn set_sockopt_int(fd: &impl std::os::fd::AsRawFd, level: i32, opt: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: setsockopt from a local int.
    let r = unsafe { libc::setsockopt(fd.as_raw_fd(), level, opt, (&v as *const i32).cast(), std::mem::size_of::<i32>() as libc::socklen_t) };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}
