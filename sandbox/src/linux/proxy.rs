//! The network allowlist's proxy: it runs in the runner, outside every sandbox layer, and
//! accepts on a listening socket that PID 1 made on `127.0.0.1` inside the sandbox's network
//! namespace and passed out with its report. Nothing of it runs in the sandbox: no relay process
//! the command could take over. The namespace has no route out, so the proxy is the only way
//! out of it.
//!
//! One port speaks HTTP proxy (`CONNECT host:port`, and absolute-URI requests for plain HTTP)
//! and SOCKS5 (`CONNECT` with a domain name, or an address; no authentication, no `BIND`, no UDP).
//! Every request is decided by [`crate::network::Allowlist`]: the name and port first, then every
//! address the runner itself resolves the name to (special ranges refused), then, for a tunnel to
//! port 443, the ClientHello's server name against the `CONNECT` host. A denied HTTP request gets
//! a `403` saying which host and port the sandbox's policy blocked and how to allow it. Each
//! decision is recorded ([`NetEvent`]) with the bytes that went each way.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::network::{Allowlist, NetEvent, Refusal};

/// The decisions of one run, shared by the proxy's threads, and the audit log they also go to.
#[derive(Clone)]
pub(crate) struct Events {
    pub(crate) list: Arc<Mutex<Vec<NetEvent>>>,
    pub(crate) audit: Option<Arc<crate::audit::Audit>>,
    /// Connections of this run whose thread has not finished (and recorded) yet: the runner
    /// waits for them, bounded, before it reads `list` ([`Events::settle`]).
    pub(crate) inflight: Arc<std::sync::atomic::AtomicUsize>,
}

impl Events {
    /// The decisions of one run (`list`), going to `audit` too.
    pub(crate) fn new(list: &Arc<Mutex<Vec<NetEvent>>>, audit: Option<&Arc<crate::audit::Audit>>, inflight: &Arc<std::sync::atomic::AtomicUsize>) -> Events {
        Events { list: Arc::clone(list), audit: audit.cloned(), inflight: Arc::clone(inflight) }
    }

    /// Waits until every connection of the run has been recorded, at most `limit` (once the
    /// command's tree is gone its connections close, so their threads end at once; a decision
    /// still open after that is not in the result, as the field's documentation says).
    pub(crate) fn settle(inflight: &std::sync::atomic::AtomicUsize, limit: Duration) {
        let until = Instant::now() + limit;
        while inflight.load(std::sync::atomic::Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Whether `fd` is a listening TCP socket (PID 1's proxy socket, told apart from the seccomp
/// listener that may come on the same channel).
pub(crate) fn is_tcp_listener(fd: &OwnedFd) -> bool {
    let get = |opt: i32| crate::linux::sockopt(fd, opt);
    get(libc::SO_ACCEPTCONN) == Some(1) && get(libc::SO_DOMAIN) == Some(libc::AF_INET) && get(libc::SO_TYPE) == Some(libc::SOCK_STREAM)
}

/// Whether `fd` is a UDP socket (PID 1's DNS stub socket).
pub(crate) fn is_udp_socket(fd: &OwnedFd) -> bool {
    let get = |opt: i32| crate::linux::sockopt(fd, opt);
    get(libc::SO_DOMAIN) == Some(libc::AF_INET) && get(libc::SO_TYPE) == Some(libc::SOCK_DGRAM)
}

/// Accepts and serves connections until `stop` (a pipe's read end) reports hang-up. Each
/// connection is served on its own thread.
pub(crate) fn serve(listener: OwnedFd, allow: Arc<Allowlist>, events: Events, stop: i32) {
    let listener = TcpListener::from(listener);
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    while crate::linux::wait_or_stop(listener.as_raw_fd(), stop).is_some() {
        while let Ok((c, _)) = listener.accept() {
            // At most MAX_CONNECTIONS at once (each is a thread of the runner): beyond that a
            // connection is closed at once, as by a full backlog.
            let (a, e) = (Arc::clone(&allow), events.clone());
            events.inflight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let spawned = crate::linux::spawn_bounded(&OPEN, MAX_CONNECTIONS, "lg-proxy", 256 << 10, move || {
                let _ = c.set_nonblocking(false);
                handle(c, &a, &e);
                e.inflight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
            if !spawned {
                events.inflight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
}

/// Connections the proxy serves at once (every run of this process together).
const MAX_CONNECTIONS: usize = 512;
static OPEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Decisions kept per run (the rest are counted in a last event).
const MAX_EVENTS: usize = 10_000;

/// What the client asked for.
struct Request {
    via: &'static str,
    host: String,
    port: u16,
    /// Bytes to send upstream first (a rewritten plain-HTTP request, with what followed it).
    forward: Vec<u8>,
}

fn handle(mut c: TcpStream, allow: &Allowlist, events: &Events) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
    let mut first = [0u8; 1];
    if c.peek(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let req = if first[0] == 5 { socks5_request(&mut c) } else { http_request(&mut c) };
    let Some(req) = req else { return };
    let start = Instant::now();
    let mut ev = NetEvent { via: req.via.into(), host: req.host.clone(), port: req.port, address: None, allowed: false, rule: String::new(), refusal: None, bytes_up: 0, bytes_down: 0, duration_ms: 0 };
    let verdict = allow.decide(&req.host, req.port);
    ev.rule = verdict.rule.clone();
    // A TLS tunnel is dialled only once its server name is checked (the upstream sees nothing
    // of a refused one); anything else is dialled first, so that a failure can be told (403).
    let tls = req.via != "http" && req.port == 443;
    let address = |ev: &mut NetEvent, (s, a): (TcpStream, SocketAddr)| {
        ev.address = Some(a.ip().to_string());
        s
    };
    let decided = match verdict.refusal {
        None => resolve(allow, &req.host, req.port),
        Some(kind) => Err((kind, verdict.rule.clone())),
    }
        .and_then(|addrs| {
            if tls {
                Ok((addrs, None))
            } else {
                dial(&req.host, &addrs).map(|d| (addrs, Some(address(&mut ev, d)))).map_err(|why| (Refusal::Unreachable, why))
            }
        });
    let (addrs, mut up) = match decided {
        Ok(d) => d,
        Err((kind, why)) => {
            // Recorded before the client hears it: a command that exits on the 403 must not
            // end the run before its refusal is in the result and the audit log.
            ev.rule = why.clone();
            ev.refusal = Some(kind);
            record(events, ev, start);
            refuse(&mut c, &req, kind, &why);
            return;
        }
    };
    // Accepted: tell the client, then check a TLS tunnel's server name before forwarding.
    let mut pending = req.forward;
    let accepted: &[u8] = match req.via {
        "connect" => b"HTTP/1.1 200 Connection established\r\n\r\n",
        "socks5" => &[5, 0, 0, 1, 0, 0, 0, 0, 0, 0],
        _ => b"",
    };
    if !accepted.is_empty() && c.write_all(accepted).is_err() {
        return;
    }
    if tls {
        match read_client_hello(&mut c) {
            Some((hello, sni)) => {
                let host = crate::network::normalize_host(&req.host).unwrap_or_default();
                if let Some(name) = sni.as_deref().map(|n| crate::network::normalize_host(n).unwrap_or_else(|_| n.to_string())) {
                    if name != host {
                        ev.rule = format!("TLS server name {name} differs from the requested host {host} (domain fronting)");
                        ev.refusal = Some(Refusal::Protocol);
                        record(events, ev, start);
                        return;
                    }
                }
                pending = hello;
            }
            None => {
                ev.rule = "no TLS ClientHello on a tunnel to port 443".into();
                ev.refusal = Some(Refusal::Protocol);
                record(events, ev, start);
                return;
            }
        }
        match dial(&req.host, &addrs) {
            Ok(d) => up = Some(address(&mut ev, d)),
            Err(why) => {
                ev.rule = why;
                ev.refusal = Some(Refusal::Unreachable);
                record(events, ev, start);
                return;
            }
        }
    }
    let Some(up) = up else { return };
    ev.allowed = true;
    let _ = c.set_read_timeout(None);
    let (upn, downn) = splice(c, up, &pending);
    ev.bytes_up = upn + pending.len() as u64;
    ev.bytes_down = downn;
    record(events, ev, start);
}

pub(crate) fn record(events: &Events, mut ev: NetEvent, start: Instant) {
    ev.duration_ms = start.elapsed().as_millis() as u64;
    if let Some(a) = &events.audit {
        a.event("network", serde_json::to_value(&ev).unwrap_or_default());
    }
    let mut v = events.list.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if v.len() < MAX_EVENTS {
        v.push(ev);
    } else if v.len() == MAX_EVENTS {
        v.push(NetEvent { via: "-".into(), host: "-".into(), port: 0, address: None, allowed: false, rule: format!("more than {MAX_EVENTS} decisions: the rest are not listed"), refusal: None, bytes_up: 0, bytes_down: 0, duration_ms: 0 });
    }
}

/// Resolves `host` here (the host's resolver) into the addresses the allowlist lets through.
fn resolve(allow: &Allowlist, host: &str, port: u16) -> Result<Vec<SocketAddr>, (Refusal, String)> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let all: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => (host, port).to_socket_addrs().map_err(|e| (Refusal::Unreachable, format!("{host} does not resolve: {e}")))?.collect(),
    };
    let mut why = (Refusal::Unreachable, format!("{host} has no address"));
    let ok: Vec<SocketAddr> = all
        .into_iter()
        .filter(|a| match allow.check_address(a.ip()) {
            Ok(()) => true,
            Err(w) => {
                why = (Refusal::Address, format!("{host} resolves to {w}"));
                false
            }
        })
        .collect();
    if ok.is_empty() { Err(why) } else { Ok(ok) }
}

/// Dials the first of `addrs` that answers.
fn dial(host: &str, addrs: &[SocketAddr]) -> Result<(TcpStream, SocketAddr), String> {
    let mut why = format!("{host} has no address");
    for a in addrs {
        match TcpStream::connect_timeout(a, Duration::from_secs(10)) {
            Ok(s) => return Ok((s, *a)),
            Err(e) => why = format!("{host} ({a}): {e}"),
        }
    }
    Err(why)
}

fn refuse(c: &mut TcpStream, req: &Request, kind: Refusal, why: &str) {
    if req.via == "socks5" {
        let _ = c.write_all(&[5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
        return;
    }
    let body = match crate::network::allow_hint(&req.host, req.port, kind) {
        Some(hint) => format!("localgpt-sandbox: the sandbox's network policy blocked {}:{} ({why}).\nTo allow it: {hint}.\n", req.host, req.port),
        None => format!("localgpt-sandbox: {}:{} is allowed, but the connection failed ({why}).\n", req.host, req.port),
    };
    let _ = write!(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
}

/// Reads an HTTP proxy request's head (at most 64 KiB).
fn http_request(c: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = c.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 << 10 {
            return None;
        }
    };
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_host_port(target, 443)?;
        return Some(Request { via: "connect", host, port, forward: buf[end..].to_vec() });
    }
    // Plain HTTP: an absolute URI, rewritten to origin form, one request per connection.
    let rest = target.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = split_host_port(authority, 80)?;
    // The Host header is the URI's authority (a client's own Host could name another site
    // behind the same server: fronting over plain HTTP).
    let mut out = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
    for l in lines.filter(|l| !l.is_empty()) {
        let name = l.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" || name == "host" {
            continue;
        }
        out.push_str(l);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut forward = out.into_bytes();
    forward.extend_from_slice(&buf[end..]);
    Some(Request { via: "http", host, port, forward })
}

fn split_host_port(s: &str, default: u16) -> Option<(String, u16)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((format!("[{h}]"), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None => Some((s.to_string(), default)),
    }
}

/// A SOCKS5 `CONNECT` (no authentication).
fn socks5_request(c: &mut TcpStream) -> Option<Request> {
    let mut hdr = [0u8; 2];
    c.read_exact(&mut hdr).ok()?;
    let mut methods = vec![0u8; usize::from(hdr[1])];
    c.read_exact(&mut methods).ok()?;
    if !methods.contains(&0) {
        let _ = c.write_all(&[5, 0xff]);
        return None;
    }
    c.write_all(&[5, 0]).ok()?;
    let mut r = [0u8; 4];
    c.read_exact(&mut r).ok()?;
    if r[0] != 5 || r[1] != 1 {
        let _ = c.write_all(&[5, 7, 0, 1, 0, 0, 0, 0, 0, 0]); // command not supported (BIND, UDP)
        return None;
    }
    let host = match r[3] {
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a).ok()?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            c.read_exact(&mut a).ok()?;
            format!("[{}]", std::net::Ipv6Addr::from(a))
        }
        3 => {
            let mut l = [0u8; 1];
            c.read_exact(&mut l).ok()?;
            let mut name = vec![0u8; usize::from(l[0])];
            c.read_exact(&mut name).ok()?;
            String::from_utf8(name).ok()?
        }
        _ => return None,
    };
    let mut p = [0u8; 2];
    c.read_exact(&mut p).ok()?;
    Some(Request { via: "socks5", host, port: u16::from_be_bytes(p), forward: Vec::new() })
}

/// The client's first TLS record (the ClientHello) and its server name.
fn read_client_hello(c: &mut TcpStream) -> Option<(Vec<u8>, Option<String>)> {
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = vec![0u8; 5];
    c.read_exact(&mut buf).ok()?;
    if buf[0] != 22 {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    buf.resize(5 + len, 0);
    c.read_exact(&mut buf[5..]).ok()?;
    let sni = crate::network::client_hello_sni(&buf);
    Some((buf, sni))
}

/// Copies both ways until both sides are done; returns (bytes up, bytes down).
fn splice(client: TcpStream, upstream: TcpStream, first: &[u8]) -> (u64, u64) {
    let (Ok(mut c2), Ok(mut u2)) = (client.try_clone(), upstream.try_clone()) else { return (0, 0) };
    let mut u1 = upstream;
    if !first.is_empty() && u1.write_all(first).is_err() {
        return (0, 0);
    }
    let down = std::thread::spawn(move || {
        let n = pump(&mut u2, &mut c2);
        let _ = c2.shutdown(std::net::Shutdown::Write);
        n
    });
    let mut c1 = client;
    let up = pump(&mut c1, &mut u1);
    let _ = u1.shutdown(std::net::Shutdown::Write);
    (up, down.join().unwrap_or(0))
}

/// Copies `from` to `to` until end of stream; the bytes copied. In the kernel (`splice`
/// through a pipe: the data never enters the runner's memory), or with a large buffer where
/// that fails (std's `io::copy` between two sockets goes 8 KiB at a time, which halves a fast
/// link's throughput).
fn pump(from: &mut TcpStream, to: &mut TcpStream) -> u64 {
    if let Some(total) = splice_through_pipe(from, to) {
        return total;
    }
    // splice refused before anything moved: copy through a large buffer.
    let mut total = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return total,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return total;
                }
                total += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return total,
        }
    }
}

/// [`pump`] in the kernel: `from` → a pipe → `to`, a chunk at a time, until end of stream or an
/// error; the bytes that reached `to`. `None` when splice is refused before anything moved.
fn splice_through_pipe(from: &TcpStream, to: &TcpStream) -> Option<u64> {
    const CHUNK: usize = 1 << 20;
    let p = crate::run::fds::pipe().ok()?;
    // SAFETY: the pipe's two ends are ours; owned (and closed) from here on.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(p.read), OwnedFd::from_raw_fd(p.write)) };
    // SAFETY: our own pipe; a bigger pipe moves more per call (the default is 64 KiB).
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, CHUNK as libc::c_int) };
    let mut total = 0u64;
    loop {
        let n = splice_once(from.as_raw_fd(), w.as_raw_fd(), CHUNK);
        if n <= 0 {
            return (n == 0 || total > 0).then_some(total);
        }
        let mut left = n as usize;
        while left > 0 {
            let m = splice_once(r.as_raw_fd(), to.as_raw_fd(), left);
            if m <= 0 {
                return Some(total);
            }
            left -= m as usize;
            total += m as u64;
        }
    }
}

/// One `splice(2)` of up to `len` bytes (retried on `EINTR`).
fn splice_once(fd_in: i32, fd_out: i32, len: usize) -> isize {
    loop {
        // SAFETY: splicing between descriptors the caller owns; null offsets (sockets and pipes).
        let n = unsafe { libc::splice(fd_in, std::ptr::null_mut(), fd_out, std::ptr::null_mut(), len, libc::SPLICE_F_MOVE) };
        if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_forms() {
        assert_eq!(split_host_port("example.com:8443", 443), Some(("example.com".into(), 8443)));
        assert_eq!(split_host_port("example.com", 80), Some(("example.com".into(), 80)));
        assert_eq!(split_host_port("[::1]:80", 443), Some(("[::1]".into(), 80)));
        assert_eq!(split_host_port("[::1]", 443), Some(("[::1]".into(), 443)));
        assert_eq!(split_host_port("example.com:x", 80), None);
    }
}
