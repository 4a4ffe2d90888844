//! Transparent capture under `--network allowlist`: the tools that never read the proxy
//! variables (the JVM, Gradle, Go and Rust clients built without proxy support, `ssh`,
//! `git://`) reach what the allowlist allows, through the same proxy and the same judgement,
//! and nothing else.
//!
//! Where the runner answers the command's `connect` calls (the seccomp broker,
//! [`super::unixgrant`]):
//!
//! 1. The DNS stub (Full, [`super::dns`]) answers an allowed name with an address of its own in
//!    `198.18.0.0/15` (RFC 2544's benchmarking block, which no service is meant to use), one per
//!    name for the run, instead of `127.0.0.1`.
//! 2. A TCP `connect` to any address that is not the sandbox's own loopback is made by the runner
//!    to the proxy instead: it binds the command's socket to a loopback port (as the kernel would
//!    at `connect`), records *that port → the destination asked for* here, then connects the
//!    socket to the proxy's listener. The command's socket is really connected — to the proxy.
//! 3. The proxy, accepting a connection whose peer port is recorded (and taking the record),
//!    serves it as a tunnel: to the name behind the address when it is one of the stub's, or else
//!    to the name the opening bytes carry (the TLS server name, the HTTP `Host`). The name and
//!    port are decided by the allowlist, the opening must name that host (no fronting), and what
//!    is dialled is the name's addresses as the runner resolves them (special ranges refused):
//!    never the address the command asked for.
//!
//! What this adds cannot widen the policy: a captured connection is judged exactly as a
//! `CONNECT name:port` through the proxy would be, and a record only names the destination of
//! the connection the runner itself is making.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Mutex;

/// The stub's block: `198.18.0.0/15`.
const BLOCK: u32 = 0xC612_0000;
const BLOCK_SIZE: u32 = 1 << 17;
/// Names given an address per run (the rest get `127.0.0.1`, as without capture).
const MAX_NAMES: usize = 60_000;
/// Connections recorded and not yet accepted by the proxy, per run.
const MAX_FLOWS: usize = 4096;
/// Names whose first DNS answer is recorded, per run; beyond, answers go on but are not listed.
const MAX_ANSWERED: usize = 1024;

/// One run's capture state, shared by the broker, the DNS stub and the proxy.
#[derive(Default)]
pub(crate) struct Capture {
    /// The names the stub gave addresses to: the `i`-th has `198.18.0.0 + 1 + i`.
    names: Mutex<Vec<String>>,
    /// The command's local (loopback) port → the destination it asked for.
    flows: Mutex<HashMap<u16, SocketAddr>>,
    /// The names the DNS stub answered (over UDP or TCP), lower case: the first answer for each
    /// is recorded, repeats are not.
    answered: Mutex<std::collections::HashSet<String>>,
}

impl Capture {
    /// The stub's address for `name` (normalised: lower case, no trailing dot), given on first
    /// use; `None` when the name is not one or the block is used up.
    pub(crate) fn address_for(&self, name: &str) -> Option<Ipv4Addr> {
        let name = crate::network::normalize_host(name).ok()?;
        let mut names = self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let i = match names.iter().position(|n| *n == name) {
            Some(i) => i,
            None if names.len() < MAX_NAMES => {
                names.push(name);
                names.len() - 1
            }
            None => return None,
        };
        u32::try_from(i).ok().map(|i| Ipv4Addr::from(BLOCK + 1 + i))
    }

    /// The name the stub gave `ip` to, if it did.
    pub(crate) fn name_of(&self, ip: IpAddr) -> Option<String> {
        let n = match ip.to_canonical() {
            IpAddr::V4(v4) => u32::from(v4),
            IpAddr::V6(_) => return None,
        };
        if n <= BLOCK || n >= BLOCK + BLOCK_SIZE {
            return None;
        }
        let names = self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        names.get((n - BLOCK - 1) as usize).cloned()
    }

    /// Whether `ip` is in the stub's block (given to a name or not).
    pub(crate) fn in_block(ip: IpAddr) -> bool {
        matches!(ip.to_canonical(), IpAddr::V4(v4) if (BLOCK..BLOCK + BLOCK_SIZE).contains(&u32::from(v4)))
    }

    /// Runs `record` if this is the stub's first answer for `name` in the run (and fewer than
    /// [`MAX_ANSWERED`] names were recorded).
    pub(crate) fn first_answer(&self, name: &str, record: impl FnOnce()) {
        let mut seen = self.answered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.len() < MAX_ANSWERED && seen.insert(name.to_ascii_lowercase()) {
            drop(seen);
            record();
        }
    }

    /// Records that the connection from local port `port` the runner is about to make was asked
    /// for `dest`; `false` when too many are waiting (the connect is then refused).
    pub(crate) fn expect(&self, port: u16, dest: SocketAddr) -> bool {
        let mut flows = self.flows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if flows.len() >= MAX_FLOWS && !flows.contains_key(&port) {
            return false;
        }
        flows.insert(port, dest);
        true
    }

    /// The destination recorded for a connection from `port`, taken (once).
    pub(crate) fn take(&self, port: u16) -> Option<SocketAddr> {
        self.flows.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&port)
    }
}

/// The DNS port. A TCP `connect` to it is captured whatever the address (the host's resolver on
/// loopback, `127.0.0.53`, at Standard too) and answered by the DNS stub over TCP
/// ([`super::dns::serve_tcp`]): from the allowlist alone, never forwarded. At Standard, where
/// the command has no UDP, the C library's resolver is told to ask over TCP (`RES_OPTIONS=use-vc`),
/// so that a tool resolving a name itself (Node's `fetch`) gets the stub's address for an
/// allowed name, which is then captured as above.
pub(crate) const DNS_PORT: u16 = 53;

/// Whether a `connect` to `ip`:`port` from the sandbox is captured: anything but loopback and
/// the unspecified address (the sandbox's own listeners, reached as asked), and the DNS port at
/// any address.
#[must_use]
pub(crate) fn captured(ip: IpAddr, port: u16) -> bool {
    let ip = ip.to_canonical();
    port == DNS_PORT || (!ip.is_loopback() && !ip.is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_gets_one_address_of_the_block_for_the_run() {
        let c = Capture::default();
        let a = c.address_for("Pkg.Example.com.").unwrap();
        assert_eq!(a, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(c.address_for("pkg.example.com"), Some(a));
        let b = c.address_for("other.example.com").unwrap();
        assert_eq!(b, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(c.name_of(IpAddr::V4(a)).as_deref(), Some("pkg.example.com"));
        assert_eq!(c.name_of(IpAddr::V6(b.to_ipv6_mapped())).as_deref(), Some("other.example.com"));
        // Addresses never given, the block's own address and addresses outside it name nothing.
        for ip in ["198.18.0.3", "198.18.0.0", "198.17.255.255", "198.20.0.1", "127.0.0.1", "::1"] {
            assert_eq!(c.name_of(ip.parse().unwrap()), None, "{ip}");
        }
        assert!(Capture::in_block("198.19.255.255".parse().unwrap()) && !Capture::in_block("198.20.0.0".parse().unwrap()));
        assert_eq!(c.address_for("not a name"), None);
    }

    #[test]
    fn a_flow_is_taken_once() {
        let c = Capture::default();
        let d: SocketAddr = "198.18.0.1:443".parse().unwrap();
        assert!(c.expect(40_000, d));
        assert_eq!(c.take(40_001), None);
        assert_eq!(c.take(40_000), Some(d));
        assert_eq!(c.take(40_000), None);
        for p in 0..MAX_FLOWS as u16 {
            assert!(c.expect(p, d));
        }
        assert!(!c.expect(u16::MAX, d), "bounded");
    }

    #[test]
    fn loopback_is_reached_as_asked_and_the_rest_is_captured() {
        for ip in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::"] {
            assert!(!captured(ip.parse().unwrap(), 8080), "{ip}");
            assert!(captured(ip.parse().unwrap(), DNS_PORT), "{ip}: DNS over TCP is the stub's");
        }
        for ip in ["198.18.0.1", "93.184.216.34", "10.0.0.1", "::ffff:1.2.3.4", "2001:db8::1", "169.254.169.254"] {
            assert!(captured(ip.parse().unwrap(), 443), "{ip}");
        }
    }
}
