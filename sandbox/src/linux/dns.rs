//! The network allowlist's DNS stub (Full level): PID 1 binds a UDP socket on `127.0.0.1:53`
//! in the sandbox's network namespace before the command runs and passes it to the runner,
//! which answers on it; the command's `/etc/resolv.conf` names it (a read-only copy bound over
//! the original). Nothing of it runs in the sandbox, and it never forwards a query: a name is
//! answered from the allowlist alone, so DNS carries nothing out of the sandbox.
//!
//! - A name the allowlist allows (at any of its ports): `A` → the name's own address in
//!   `198.18.0.0/15` (TTL 0) where the runner captures connects ([`super::capture`]: a tool
//!   that ignores the proxy variables and dials the address reaches the proxy, which judges the
//!   connection as a tunnel to that name), `127.0.0.1` where it does not (such a tool then gets
//!   a refused connection at once); every other type → no records (`NOERROR`), so that a
//!   resolver asking for `A` and `AAAA` gets the one address. A tool honouring the proxy
//!   variables never uses it.
//! - Any other name: `REFUSED`, at once, so that a tool resolving before it connects fails fast
//!   (`getent hosts` exits 2, `curl` says it could not resolve), and the run's network record
//!   says which name the policy refused and why.
//! - A message that is not one standard query: `FORMERR` or `NOTIMP` (or nothing, when it is
//!   too short to answer).
//!
//! The first answer for each name goes to the run's network record (`via: "dns"`, port 0);
//! repeats (resolvers ask for `A` and `AAAA`, and retry) are not listed again.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use super::capture::Capture;
use crate::network::{Allowlist, NetEvent};

/// `RCODE`s the stub answers with.
const NOERROR: u8 = 0;
const FORMERR: u8 = 1;
const NOTIMP: u8 = 4;
const REFUSED: u8 = 5;
const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;

/// One question, as parsed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Question {
    /// The name, dot-separated, as sent (no trailing dot).
    pub(crate) name: String,
    pub(crate) qtype: u16,
    pub(crate) qclass: u16,
    /// The question's bytes (name, type and class), echoed in the answer.
    wire: Vec<u8>,
}

/// The stub's reply to `msg` and the question it answered (`None` for the reply: drop it); an
/// allowed name's address comes from `capture` when the runner captures connects.
pub(crate) fn reply(msg: &[u8], allow: &Allowlist, capture: Option<&Capture>) -> (Option<Vec<u8>>, Option<(Question, crate::network::Verdict)>) {
    if msg.len() < 12 || msg[2] & 0x80 != 0 {
        return (None, None); // too short to answer, or itself a response
    }
    let opcode = (msg[2] >> 3) & 0x0f;
    let qdcount = u16::from_be_bytes([msg[4], msg[5]]);
    if opcode != 0 {
        return (Some(header(msg, NOTIMP, None, 0)), None);
    }
    let q = match (qdcount, question(&msg[12..])) {
        (1, Some(q)) => q,
        _ => return (Some(header(msg, FORMERR, None, 0)), None),
    };
    let verdict = if q.qclass == CLASS_IN { allow.decide_name(&q.name) } else { crate::network::Verdict::refused(crate::network::Refusal::Unnameable, format!("DNS class {} (only IN is answered)", q.qclass)) };
    let out = if !verdict.allowed() {
        header(msg, REFUSED, Some(&q), 0)
    } else if q.qtype == TYPE_A {
        let mut out = header(msg, NOERROR, Some(&q), 1);
        out.extend_from_slice(&[0xc0, 12]); // the question's name
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes()); // TTL 0: nothing for a cache to keep
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&answer_for(&q.name, capture).octets());
        out
    } else {
        header(msg, NOERROR, Some(&q), 0)
    };
    (Some(out), Some((q, verdict)))
}

/// The address an allowed `name` is answered with: its own in the capture block, or the proxy's.
fn answer_for(name: &str, capture: Option<&Capture>) -> Ipv4Addr {
    capture.and_then(|c| c.address_for(name)).unwrap_or(Ipv4Addr::LOCALHOST)
}

/// A reply's header (the query's id and `RD`; `RA` set) with `q` echoed and `answers` announced.
fn header(msg: &[u8], rcode: u8, q: Option<&Question>, answers: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&msg[..2]);
    out.push(0x80 | (msg[2] & 0x79)); // QR, the query's opcode and RD (AA, TC cleared)
    out.push(0x80 | rcode); // RA
    out.extend_from_slice(&u16::from(q.is_some()).to_be_bytes());
    out.extend_from_slice(&answers.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    if let Some(q) = q {
        out.extend_from_slice(&q.wire);
    }
    out
}

/// The question at the start of `b` (uncompressed labels of at most 63 bytes, 255 in all).
fn question(b: &[u8]) -> Option<Question> {
    let mut i = 0;
    let mut labels: Vec<String> = Vec::new();
    loop {
        let len = usize::from(*b.get(i)?);
        i += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None; // a compression pointer or a reserved label type
        }
        let l = b.get(i..i + len)?;
        // Bytes a host name cannot hold are kept as they are: the allowlist refuses the name.
        labels.push(String::from_utf8_lossy(l).into_owned());
        i += len;
        if i > 255 {
            return None;
        }
    }
    let qtype = u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]);
    let qclass = u16::from_be_bytes([*b.get(i + 2)?, *b.get(i + 3)?]);
    Some(Question { name: labels.join("."), qtype, qclass, wire: b[..i + 4].to_vec() })
}

/// Names recorded per run; beyond this, answers go on but are not listed.
const MAX_NAMES: usize = 1024;

/// The largest query read over TCP (a question is at most 255 bytes of name: anything longer
/// than this is not one standard query).
const MAX_TCP_QUERY: usize = 1024;

/// Queries answered on one TCP connection (glibc asks for `A` and `AAAA` on one).
const MAX_TCP_QUERIES: usize = 64;

/// Answers queries on `c`, a connection the broker captured to the DNS port
/// ([`super::capture::DNS_PORT`]): each a two-byte length and a message (RFC 1035 4.2.2),
/// answered as over UDP ([`reply`]), until the client closes it, is silent for ten seconds, or
/// sends what is not a query of at most [`MAX_TCP_QUERY`] bytes.
pub(crate) fn serve_tcp(mut c: std::net::TcpStream, allow: &Allowlist, capture: &Capture, events: &crate::linux::netlog::Events) {
    use std::io::{Read, Write};
    let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let _ = c.set_write_timeout(Some(std::time::Duration::from_secs(10)));
    let mut buf = [0u8; MAX_TCP_QUERY];
    for _ in 0..MAX_TCP_QUERIES {
        let mut len = [0u8; 2];
        if c.read_exact(&mut len).is_err() {
            return;
        }
        let len = usize::from(u16::from_be_bytes(len));
        if len > buf.len() || c.read_exact(&mut buf[..len]).is_err() {
            return;
        }
        let start = Instant::now();
        let (out, asked) = reply(&buf[..len], allow, Some(capture));
        if let Some(out) = out {
            let Ok(n) = u16::try_from(out.len()) else { return };
            let mut framed = n.to_be_bytes().to_vec();
            framed.extend_from_slice(&out);
            if c.write_all(&framed).is_err() {
                return;
            }
        }
        if let Some((q, v)) = asked {
            capture.first_answer(&q.name, || record_answer(events, q.name.clone(), v, Some(capture), start));
        }
    }
}

/// Records the stub's answer to a question for `name` in the run's network record.
fn record_answer(events: &crate::linux::netlog::Events, name: String, v: crate::network::Verdict, capture: Option<&Capture>, start: Instant) {
    let allowed = v.allowed();
    let rule = match answer_for(&name, capture) {
        _ if !allowed => v.rule,
        Ipv4Addr::LOCALHOST => format!("{}; answered 127.0.0.1, the proxy's address", v.rule),
        a => format!("{}; answered {a}, captured to the proxy", v.rule),
    };
    let ev = NetEvent { via: "dns".into(), host: name, port: 0, address: None, allowed, rule, refusal: v.refusal, bytes_up: 0, bytes_down: 0, duration_ms: 0 };
    crate::linux::netlog::record(events, ev, start);
}

/// Answers queries on `sock` (PID 1's UDP socket) until `stop` (a pipe's read end) reports
/// hang-up.
pub(crate) fn serve(sock: OwnedFd, allow: &Allowlist, capture: Option<&Capture>, events: &crate::linux::netlog::Events, stop: i32) {
    let mut seen: HashSet<String> = HashSet::new();
    let mut buf = [0u8; 1500];
    while crate::linux::wait_or_stop(sock.as_raw_fd(), stop).is_some() {
        // SAFETY: a zeroed sockaddr_storage is a valid out-parameter.
        let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: buffers and lengths are ours and valid.
        let got = unsafe { libc::recvfrom(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT, std::ptr::addr_of_mut!(from).cast(), &mut from_len) };
        let Ok(got) = usize::try_from(got) else { continue };
        let start = Instant::now();
        let (out, asked) = reply(&buf[..got], allow, capture);
        if let Some(out) = out {
            // SAFETY: the reply and the sender's address are valid for their lengths.
            unsafe { libc::sendto(sock.as_raw_fd(), out.as_ptr().cast(), out.len(), libc::MSG_DONTWAIT, std::ptr::addr_of!(from).cast(), from_len) };
        }
        if let Some((q, v)) = asked {
            match capture {
                Some(k) => k.first_answer(&q.name, || record_answer(events, q.name.clone(), v, capture, start)),
                None if seen.len() < MAX_NAMES && seen.insert(q.name.to_ascii_lowercase()) => record_answer(events, q.name, v, None, start),
                None => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
        let mut m = id.to_be_bytes().to_vec();
        m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD, one question
        for l in name.split('.') {
            m.push(l.len() as u8);
            m.extend_from_slice(l.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        m
    }

    fn allow() -> Allowlist {
        Allowlist::new(&["**.example.com".into()], &["evil.example.com".into()], &[], &[]).unwrap()
    }

    fn rcode(r: &[u8]) -> u8 {
        r[3] & 0x0f
    }

    #[test]
    fn an_allowed_name_gets_loopback_for_a_and_no_records_for_other_types() {
        let q = query(0x1234, "Pkg.Example.COM", TYPE_A);
        let (r, asked) = reply(&q, &allow(), None);
        let r = r.unwrap();
        assert_eq!((&r[..2], r[2] & 0x80, rcode(&r)), (&[0x12, 0x34][..], 0x80, NOERROR));
        assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1);
        assert_eq!(&r[r.len() - 4..], &[127, 0, 0, 1]);
        assert_eq!(&r[12..q.len()], &q[12..], "question echoed");
        assert!(asked.unwrap().1.allowed());
        // Where the runner captures connects: the name's own address in 198.18.0.0/15, the same
        // for every spelling of the name; another name gets another.
        let capture = Capture::default();
        for (name, ip) in [("pkg.example.com", [198, 18, 0, 1]), ("PKG.example.com", [198, 18, 0, 1]), ("other.example.com", [198, 18, 0, 2])] {
            let (r, _) = reply(&query(9, name, TYPE_A), &allow(), Some(&capture));
            let r = r.unwrap();
            assert_eq!((rcode(&r), &r[r.len() - 4..]), (NOERROR, &ip[..]), "{name}");
        }
        assert_eq!(capture.name_of([198, 18, 0, 2].into()).as_deref(), Some("other.example.com"));
        let (r, _) = reply(&query(7, "pkg.example.com", 28), &allow(), None);
        let r = r.unwrap();
        assert_eq!((rcode(&r), u16::from_be_bytes([r[6], r[7]])), (NOERROR, 0));
    }

    #[test]
    fn denied_and_unlisted_names_are_refused_with_the_reason_recorded() {
        for (name, why) in [("evil.example.com", "deny_domains"), ("lgexfil.secret.attacker.net", "no allow_domains"), ("1.0.0.127.in-addr.arpa", "no allow_domains")] {
            let (r, asked) = reply(&query(1, name, TYPE_A), &allow(), None);
            assert_eq!(rcode(&r.unwrap()), REFUSED, "{name}");
            let (q, v) = asked.unwrap();
            assert_eq!(q.name, name);
            assert!(!v.allowed() && v.rule.contains(why), "{name}: {}", v.rule);
        }
        // A label with bytes no host name holds is refused too, not cut.
        let (r, _) = reply(&query(1, "a\u{1}b.example.com", TYPE_A), &allow(), None);
        assert_eq!(rcode(&r.unwrap()), REFUSED);
    }

    #[test]
    fn malformed_messages_get_formerr_notimp_or_nothing() {
        assert!(reply(&[0; 5], &allow(), None).0.is_none());
        let mut resp = query(1, "example.com", TYPE_A);
        resp[2] |= 0x80;
        assert!(reply(&resp, &allow(), None).0.is_none(), "a response is never answered (no loops)");
        let mut upd = query(1, "example.com", TYPE_A);
        upd[2] = 5 << 3; // UPDATE
        assert_eq!(rcode(&reply(&upd, &allow(), None).0.unwrap()), NOTIMP);
        let mut two = query(1, "example.com", TYPE_A);
        two[5] = 2;
        assert_eq!(rcode(&reply(&two, &allow(), None).0.unwrap()), FORMERR);
        let mut ptr = query(1, "example.com", TYPE_A);
        ptr[12] = 0xc0;
        assert_eq!(rcode(&reply(&ptr, &allow(), None).0.unwrap()), FORMERR, "no compression in the question");
        let cut = query(1, "example.com", TYPE_A);
        assert_eq!(rcode(&reply(&cut[..cut.len() - 2], &allow(), None).0.unwrap()), FORMERR);
        let mut chaos = query(1, "example.com", TYPE_A);
        let n = chaos.len();
        chaos[n - 1] = 3; // CH
        assert_eq!(rcode(&reply(&chaos, &allow(), None).0.unwrap()), REFUSED);
    }

    /// Over TCP (a connection the broker captured to port 53): each query framed by its length,
    /// answered as over UDP with the capture block's addresses, the first answer per name
    /// recorded once; a length beyond a query's ends the connection.
    #[test]
    fn queries_over_tcp_are_answered_by_length_and_recorded_once() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let list = std::sync::Arc::default();
        let events = crate::linux::netlog::Events::new(&list, None, &std::sync::Arc::default());
        let capture = Capture::default();
        let t = std::thread::spawn(move || serve_tcp(s, &allow(), &capture, &events));
        let framed = |m: Vec<u8>| [u16::try_from(m.len()).unwrap().to_be_bytes().to_vec(), m].concat();
        let read_reply = |c: &mut std::net::TcpStream| {
            let mut len = [0u8; 2];
            c.read_exact(&mut len).unwrap();
            let mut r = vec![0u8; usize::from(u16::from_be_bytes(len))];
            c.read_exact(&mut r).unwrap();
            r
        };
        // A and AAAA on one connection, written in one piece (as glibc does).
        c.write_all(&[framed(query(1, "pkg.example.com", TYPE_A)), framed(query(2, "pkg.example.com", 28))].concat()).unwrap();
        let a = read_reply(&mut c);
        assert_eq!((rcode(&a), &a[a.len() - 4..]), (NOERROR, &[198, 18, 0, 1][..]));
        let aaaa = read_reply(&mut c);
        assert_eq!((rcode(&aaaa), u16::from_be_bytes([aaaa[6], aaaa[7]])), (NOERROR, 0));
        c.write_all(&framed(query(3, "evil.example.com", TYPE_A))).unwrap();
        assert_eq!(rcode(&read_reply(&mut c)), REFUSED);
        // Not a query: the connection ends.
        c.write_all(&[0xff, 0xff]).unwrap();
        t.join().unwrap();
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).unwrap_or(0), 0);
        let list = list.lock().unwrap();
        let names: Vec<(&str, bool)> = list.iter().map(|e: &NetEvent| (e.host.as_str(), e.allowed)).collect();
        assert_eq!(names, [("pkg.example.com", true), ("evil.example.com", false)]);
    }
}
