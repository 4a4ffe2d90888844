//! Network by allowlist: the policy's grammar and every decision, as pure code.
//!
//! * **Domains.** `example.com` matches that host only; `*.example.com` its subdomains only;
//!   `**.example.com` both. Names are lower-cased and a trailing dot is dropped; a label is
//!   letters, digits and inner hyphens (an internationalised name in its `xn--` form: a name with
//!   other characters is refused, with the hint to give its punycode form). A bare `*` or `**`,
//!   an empty label and a wildcard anywhere but at the front are errors. Deny rules win over
//!   allow rules, and an empty allowlist allows nothing.
//! * **Ports.** Only `allow_ports` (default 80 and 443).
//! * **Addresses.** The runner resolves an allowed name itself and checks every address it would
//!   dial ([`special_range`]): loopback, private, link-local, CGNAT, multicast, unspecified,
//!   IPv4-mapped and the other special ranges are refused unless an `allow_cidrs` entry contains
//!   the address — so an allowed name that resolves to `127.0.0.1` (DNS rebinding) reaches
//!   nothing. A host given as an address (a raw-IP URL) is allowed only through `allow_cidrs`;
//!   a numeric host in another form (`2130706433`, `0177.0.0.1`, `0x7f.1`) is refused outright.
//! * **TLS.** For a tunnel to port 443 the runner reads the ClientHello's SNI ([`client_hello_sni`])
//!   and refuses a tunnel whose SNI names another host than the `CONNECT` (domain fronting).

use std::net::{IpAddr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::error::SandboxError;

/// How a domain rule matches.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DomainMatch {
    /// `example.com`: that host only.
    Exact,
    /// `*.example.com`: subdomains only.
    Subdomains,
    /// `**.example.com`: the host and its subdomains.
    HostAndSubdomains,
}

/// One `allow_domains` / `deny_domains` entry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DomainRule {
    /// The rule as written (for messages and the audit log).
    pub text: String,
    /// The normalised domain after the wildcard.
    pub domain: String,
    /// How it matches.
    pub how: DomainMatch,
}

impl DomainRule {
    /// Parses one rule.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] naming what is wrong with it.
    pub fn parse(text: &str) -> Result<DomainRule, SandboxError> {
        let t = text.trim();
        let (how, rest) = if let Some(r) = t.strip_prefix("**.") {
            (DomainMatch::HostAndSubdomains, r)
        } else if let Some(r) = t.strip_prefix("*.") {
            (DomainMatch::Subdomains, r)
        } else {
            (DomainMatch::Exact, t)
        };
        if rest == "*" || rest == "**" || rest.is_empty() {
            return Err(SandboxError::Policy(format!("domain {text:?}: a bare wildcard would allow every host; name the domains")));
        }
        let domain = normalize_host(rest).map_err(|why| SandboxError::Policy(format!("domain {text:?}: {why}")))?;
        if numeric_host(&domain) {
            return Err(SandboxError::Policy(format!("domain {text:?}: an address, not a name (use allow_cidrs for addresses)")));
        }
        Ok(DomainRule { text: t.to_string(), domain, how })
    }

    /// Whether the (normalised) `host` matches.
    #[must_use]
    pub fn matches(&self, host: &str) -> bool {
        let sub = host.len() > self.domain.len() + 1 && host.ends_with(&self.domain) && host.as_bytes()[host.len() - self.domain.len() - 1] == b'.';
        match self.how {
            DomainMatch::Exact => host == self.domain,
            DomainMatch::Subdomains => sub,
            DomainMatch::HostAndSubdomains => sub || host == self.domain,
        }
    }
}

/// Lower-cases `host`, drops one trailing dot and checks every label.
///
/// # Errors
/// Why the name is not acceptable.
pub fn normalize_host(host: &str) -> Result<String, String> {
    let h = host.strip_suffix('.').unwrap_or(host);
    if h.is_empty() || h.len() > 253 {
        return Err("empty or longer than 253 characters".into());
    }
    if !h.is_ascii() {
        return Err("not ASCII: give an internationalised name in its punycode (xn--) form".into());
    }
    let h = h.to_ascii_lowercase();
    for label in h.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!("label {label:?} is not a valid DNS label"));
        }
    }
    Ok(h)
}

/// A host made only of numbers (any base) and dots: an address in some form, never a name.
#[must_use]
pub fn numeric_host(host: &str) -> bool {
    let last = host.rsplit('.').next().unwrap_or(host);
    // A DNS name's last label (its TLD) is never numeric; `0x7f` counts as a number.
    last.bytes().all(|b| b.is_ascii_digit()) || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An address block (`allow_cidrs`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    /// The network address.
    pub addr: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// Parses `ADDR/LEN` or a single address.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] naming the entry.
    pub fn parse(text: &str) -> Result<Cidr, SandboxError> {
        let bad = || SandboxError::Policy(format!("allow_cidrs entry {text:?}: expected ADDRESS or ADDRESS/PREFIX"));
        let (a, p) = match text.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text.trim(), None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p.parse::<u8>().ok().filter(|&n| n <= max).ok_or_else(bad)?,
            None => max,
        };
        Ok(Cidr { addr, prefix })
    }

    /// Whether `ip` is inside (an IPv4-mapped IPv6 address counts as its IPv4 address).
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = unmap(ip);
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => mask_eq(&n.octets(), &a.octets(), self.prefix),
            (IpAddr::V6(n), IpAddr::V6(a)) => mask_eq(&n.octets(), &a.octets(), self.prefix),
            _ => false,
        }
    }
}

fn mask_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let (full, rest) = (usize::from(prefix / 8), prefix % 8);
    if a[..full] != b[..full] {
        return false;
    }
    rest == 0 || (a[full] ^ b[full]) & (0xffu8 << (8 - rest)) == 0
}

fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The special range `ip` lies in, if any (what the runner never dials without an `allow_cidrs`
/// entry): RFC 6890 and its successors' non-global blocks.
#[must_use]
pub fn special_range(ip: IpAddr) -> Option<&'static str> {
    classify(ip).map(|(r, _)| r)
}

/// Whether `ip` is in a private range a network's own hosts use (RFC 1918, CGNAT, IPv6 unique
/// local): what `allow_private_hosts` may open for a named host. Loopback, link-local (cloud
/// metadata), IPv4-mapped forms and the other special ranges are not.
#[must_use]
pub fn private_range(ip: IpAddr) -> bool {
    classify(ip).is_some_and(|(_, private)| private)
}

/// The one table of special ranges: the range `ip` lies in, and whether it is private.
fn classify(ip: IpAddr) -> Option<(&'static str, bool)> {
    if let IpAddr::V6(v6) = ip {
        if v6.to_ipv4_mapped().is_some() {
            return Some(("IPv4-mapped IPv6", false));
        }
    }
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            let (r, private) = match o {
                [0, ..] => ("unspecified/\"this network\" (0.0.0.0/8)", false),
                [127, ..] => ("loopback (127.0.0.0/8)", false),
                [10, ..] => ("private (10.0.0.0/8)", true),
                [172, b, ..] if (16..32).contains(&b) => ("private (172.16.0.0/12)", true),
                [192, 168, ..] => ("private (192.168.0.0/16)", true),
                [169, 254, ..] => ("link-local (169.254.0.0/16; cloud metadata)", false),
                [100, b, ..] if (64..128).contains(&b) => ("CGNAT (100.64.0.0/10)", true),
                [192, 0, 0, _] => ("IETF protocol assignments (192.0.0.0/24)", false),
                [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => ("documentation", false),
                [198, b, ..] if b == 18 || b == 19 => ("benchmarking (198.18.0.0/15)", false),
                [192, 88, 99, _] => ("6to4 relay anycast", false),
                [a0, ..] if a0 >= 224 => ("multicast or reserved (224.0.0.0/3)", false),
                _ => return None,
            };
            Some((r, private))
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            let (r, private) = if a == Ipv6Addr::UNSPECIFIED {
                ("unspecified (::)", false)
            } else if a == Ipv6Addr::LOCALHOST {
                ("loopback (::1)", false)
            } else if s[0] & 0xfe00 == 0xfc00 {
                ("unique local (fc00::/7)", true)
            } else if s[0] & 0xffc0 == 0xfe80 {
                ("link-local (fe80::/10)", false)
            } else if s[0] & 0xff00 == 0xff00 {
                ("multicast (ff00::/8)", false)
            } else if s[0] == 0x2001 && s[1] == 0x0db8 {
                ("documentation (2001:db8::/32)", false)
            } else if s[0] == 0x0064 && s[1] == 0xff9b {
                ("NAT64 (64:ff9b::/96)", false)
            } else if s[0] == 0x2002 {
                ("6to4 (2002::/16)", false)
            } else if s[0] == 0x2001 && s[1] == 0 {
                ("Teredo (2001::/32)", false)
            } else if s[..6] == [0; 6] {
                ("IPv4-compatible (::/96)", false)
            } else if s[0] == 0x0100 && s[1..4] == [0; 3] {
                ("discard (100::/64)", false)
            } else {
                return None;
            };
            Some((r, private))
        }
    }
}

/// The allowlist of a run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Allowlist {
    /// Allowed domains.
    pub allow: Vec<DomainRule>,
    /// Denied domains (win over `allow`).
    pub deny: Vec<DomainRule>,
    /// Allowed destination ports.
    pub ports: Vec<u16>,
    /// Address blocks that may be dialled, special ranges included (and hosts given as an
    /// address in them).
    pub cidrs: Vec<Cidr>,
    /// Domains whose tunnels go through unchecked (`allow_opaque_tunnels`): a TLS hello without
    /// a server name, a protocol other than TLS and HTTP (ssh, git://). Every other tunnel must
    /// show the allowed host (its TLS server name or HTTP `Host`) before it is dialled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opaque: Vec<DomainRule>,
    /// Exact host names allowed, and allowed to resolve into a private range
    /// (`allow_private_hosts`: a corporate mirror on 10.x, 172.16–31.x, 192.168.x, CGNAT or an
    /// IPv6 unique-local address). Never loopback, link-local (cloud metadata), multicast or the
    /// other special ranges: those stay `allow_cidrs`' alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_hosts: Vec<DomainRule>,
}

/// One network decision of a run (`--json`'s `network`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NetEvent {
    /// `http`, `connect`, `socks5`, `captured` (a connect the runner made to the proxy,
    /// `crate::linux::capture`) or `dns`.
    pub via: String,
    /// The host as the command named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The address dialled (allowed requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Allowed.
    pub allowed: bool,
    /// The rule that decided, or why it was refused.
    pub rule: String,
    /// For a refusal: what, if anything, the user can change to allow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// Bytes from the command to the upstream.
    pub bytes_up: u64,
    /// Bytes from the upstream to the command.
    pub bytes_down: u64,
    /// How long the connection lasted, in milliseconds.
    pub duration_ms: u64,
}

/// The proxy's port on the sandbox's own loopback (Full level: the namespace is private, so it
/// conflicts with nothing on the host).
pub const PROXY_PORT: u16 = 3128;

/// The ports allowed when the policy names none.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// A decision about one destination.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The rule that decided (as written), or why nothing allowed it.
    pub rule: String,
    /// For a refusal: its kind; `None`: allowed.
    pub refusal: Option<Refusal>,
}

/// Why a destination was not reached, as the user can act on it: the hint for each kind is
/// [`allow_hint`]'s (never derived from the wording of a rule).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// Its port is not in `allow_ports`.
    Port,
    /// A `deny_domains` entry matches it (deny wins over allow).
    DenyDomain,
    /// An address, or a name that resolves into a special range: only `allow_cidrs` allows it.
    Address,
    /// A name that resolves into a private range (10/8, 172.16/12, 192.168/16, CGNAT, fc00::/7):
    /// `allow_private_hosts` naming it, or `allow_cidrs`, allows it.
    PrivateAddress,
    /// Not a name that can be allowed: invalid, a numeric form, a DNS class other than IN.
    Unnameable,
    /// No `allow_domains` entry matches it.
    NotAllowed,
    /// The destination is allowed but the connection broke the proxy's rules (a TLS server
    /// name other than the requested host, no ClientHello on port 443): nothing to allow.
    Protocol,
    /// The destination is allowed but did not resolve or answer: nothing to allow.
    Unreachable,
}

impl Verdict {
    /// A refusal of kind `kind`, for `rule`.
    #[must_use]
    pub fn refused(kind: Refusal, rule: String) -> Verdict {
        Verdict { rule, refusal: Some(kind) }
    }

    /// Allowed by `rule`.
    #[must_use]
    pub fn allow(rule: String) -> Verdict {
        Verdict { rule, refusal: None }
    }

    /// Whether the destination is allowed (no refusal).
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.refusal.is_none()
    }
}

impl Allowlist {
    /// Builds an allowlist from the policy's lists.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] for the first entry that does not parse.
    pub fn new(allow: &[String], deny: &[String], ports: &[u16], cidrs: &[String]) -> Result<Allowlist, SandboxError> {
        Ok(Allowlist {
            allow: allow.iter().map(|d| DomainRule::parse(d)).collect::<Result<_, _>>()?,
            deny: deny.iter().map(|d| DomainRule::parse(d)).collect::<Result<_, _>>()?,
            ports: if ports.is_empty() { DEFAULT_PORTS.to_vec() } else { ports.to_vec() },
            cidrs: cidrs.iter().map(|c| Cidr::parse(c)).collect::<Result<_, _>>()?,
            opaque: Vec::new(),
            private_hosts: Vec::new(),
        })
    }

    /// This allowlist with `domains` as the domains whose tunnels go through unchecked.
    ///
    /// # Errors
    /// [`SandboxError::Policy`] for an entry that is not a domain rule.
    pub fn with_opaque_tunnels(mut self, domains: &[String]) -> Result<Allowlist, SandboxError> {
        self.opaque = domains.iter().map(|d| DomainRule::parse(d)).collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// This allowlist with `hosts` as the names allowed into a private range
    /// ([`Allowlist::private_hosts`]).
    ///
    /// # Errors
    /// [`SandboxError::Policy`] for an entry that is not an exact host name (a wildcard would
    /// let any name under it, one a command can make resolve anywhere, reach the private network).
    pub fn with_private_hosts(mut self, hosts: &[String]) -> Result<Allowlist, SandboxError> {
        self.private_hosts = hosts
            .iter()
            .map(|h| {
                let r = DomainRule::parse(h)?;
                if r.how != DomainMatch::Exact {
                    return Err(SandboxError::Policy(format!("allow_private_hosts entry {h:?}: an exact host name, not a wildcard (each host allowed into a private range is named)")));
                }
                Ok(r)
            })
            .collect::<Result<_, _>>()?;
        Ok(self)
    }

    /// Whether tunnels to `host` go through unchecked (an `allow_opaque_tunnels` entry matches it).
    #[must_use]
    pub fn opaque(&self, host: &str) -> bool {
        normalize_host(host).is_ok_and(|h| self.opaque.iter().any(|r| r.matches(&h)))
    }

    /// Decides a destination by name (or address literal) and port, before any resolution.
    #[must_use]
    pub fn decide(&self, host: &str, port: u16) -> Verdict {
        if !self.ports.contains(&port) {
            return Verdict::refused(Refusal::Port, format!("port {port} is not in allow_ports ({})", self.ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")));
        }
        self.decide_name(host)
    }

    /// Decides a destination by name (or address literal) alone, whatever the port: what the
    /// sandbox's DNS stub answers by.
    #[must_use]
    pub fn decide_name(&self, host: &str) -> Verdict {
        let no = Verdict::refused;
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return match self.cidrs.iter().find(|c| c.contains(ip)) {
                Some(c) => Verdict::allow(format!("allow_cidrs {}/{}", c.addr, c.prefix)),
                None => no(Refusal::Address, "an address, not a name: only allow_cidrs can allow it".into()),
            };
        }
        let host = match normalize_host(host) {
            Ok(h) => h,
            Err(why) => return no(Refusal::Unnameable, format!("not a valid host name: {why}")),
        };
        if numeric_host(&host) {
            return no(Refusal::Unnameable, "a numeric host that is not a plain address (decimal, octal or hex forms are refused)".into());
        }
        if let Some(d) = self.deny.iter().find(|d| d.matches(&host)) {
            return no(Refusal::DenyDomain, format!("deny_domains {}", d.text));
        }
        if let Some(a) = self.allow.iter().find(|d| d.matches(&host)) {
            return Verdict::allow(format!("allow_domains {}", a.text));
        }
        match self.private_hosts.iter().find(|d| d.matches(&host)) {
            Some(a) => Verdict::allow(format!("allow_private_hosts {}", a.text)),
            None => no(Refusal::NotAllowed, "no allow_domains entry matches".into()),
        }
    }

    /// Whether the runner may dial `ip` (an address the allowed name resolved to).
    ///
    /// # Errors
    /// Why not: its special range, with no `allow_cidrs` entry containing it.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), String> {
        if self.cidrs.iter().any(|c| c.contains(ip)) {
            return Ok(());
        }
        match special_range(ip) {
            Some(r) => Err(format!("{ip} is {r}; only an allow_cidrs entry allows it")),
            None => Ok(()),
        }
    }

    /// Whether the runner may dial `ip`, an address the allowed name `host` resolved to:
    /// [`Allowlist::check_address`], and a private-range address of a host named in
    /// `allow_private_hosts` (exactly, after normalisation).
    ///
    /// # Errors
    /// The refusal's kind (`Refusal::PrivateAddress` for a private range, else
    /// `Refusal::Address`) and why: its special range, with no `allow_cidrs` entry containing
    /// it and, for a private range, `host` not named in `allow_private_hosts`.
    pub fn check_address_of(&self, host: &str, ip: IpAddr) -> Result<(), (Refusal, String)> {
        let named = || normalize_host(host).is_ok_and(|h| self.private_hosts.iter().any(|r| r.matches(&h)));
        match self.check_address(ip) {
            Err(_) if private_range(ip) && named() => Ok(()),
            Err(w) if private_range(ip) => Err((Refusal::PrivateAddress, format!("{w}, or allow_private_hosts naming the host"))),
            Err(w) => Err((Refusal::Address, w)),
            Ok(()) => Ok(()),
        }
    }
}

/// How a user allows a destination refused as `refusal` (`None`: nothing to allow — it was
/// allowed, and the connection broke a rule or failed).
#[must_use]
pub fn allow_hint(host: &str, port: u16, refusal: Refusal) -> Option<String> {
    match refusal {
        Refusal::Port => Some(format!("add {port} to allow_ports in [sandbox]")),
        Refusal::DenyDomain => Some(format!("{host} is in deny_domains, which wins over allow_domains")),
        Refusal::PrivateAddress => {
            Some(format!("if {host} is a host of your network (a corporate mirror): localgpt sandbox run --network allowlist --allow-private-host {host} …, or add it to allow_private_hosts in [sandbox] (or an allow_cidrs entry for its address)"))
        }
        Refusal::Address => Some("add an allow_cidrs entry in [sandbox] for the address".to_string()),
        Refusal::Unnameable => Some("it cannot be allowed by name".to_string()),
        Refusal::NotAllowed => Some(format!("localgpt sandbox run --network allowlist --allow-domain {host} …, or add it to allow_domains in [sandbox]")),
        Refusal::Protocol | Refusal::Unreachable => None,
    }
}

/// A minimal TLS 1.3-shaped ClientHello record with `name` in its server-name extension (none:
/// no extension): no session id, one cipher suite, null compression. The inverse of
/// [`client_hello_sni`], for the tests and fuzz seeds that exercise it and the proxy.
#[doc(hidden)]
#[must_use]
pub fn client_hello(name: Option<&str>) -> Vec<u8> {
    let mut ext = Vec::new();
    if let Some(n) = name.map(str::as_bytes) {
        let mut body = ((3 + n.len()) as u16).to_be_bytes().to_vec();
        body.push(0);
        body.extend_from_slice(&(n.len() as u16).to_be_bytes());
        body.extend_from_slice(n);
        ext.extend_from_slice(&[0, 0]);
        ext.extend_from_slice(&(body.len() as u16).to_be_bytes());
        ext.extend_from_slice(&body);
    }
    let mut hello = vec![3, 3];
    hello.extend_from_slice(&[0u8; 32]);
    hello.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    hello.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    hello.extend_from_slice(&ext);
    let mut hs = vec![1u8];
    hs.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&hello);
    let mut rec = vec![22u8, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

/// The server name of a TLS ClientHello at the start of `buf` (`None`: not a ClientHello, not
/// complete in `buf`, or without a server name).
#[must_use]
pub fn client_hello_sni(buf: &[u8]) -> Option<String> {
    // TLS record: type 22 (handshake), version, length.
    let rec_len = usize::from(u16::from_be_bytes([*buf.get(3)?, *buf.get(4)?]));
    if *buf.first()? != 22 {
        return None;
    }
    let hs = buf.get(5..5 + rec_len)?;
    // Handshake: type 1 (ClientHello), 3-byte length, version (2), random (32).
    if *hs.first()? != 1 {
        return None;
    }
    let mut i = 4 + 2 + 32;
    let sid = usize::from(*hs.get(i)?);
    i += 1 + sid;
    let cs = usize::from(u16::from_be_bytes([*hs.get(i)?, *hs.get(i + 1)?]));
    i += 2 + cs;
    let comp = usize::from(*hs.get(i)?);
    i += 1 + comp;
    let ext_len = usize::from(u16::from_be_bytes([*hs.get(i)?, *hs.get(i + 1)?]));
    i += 2;
    let exts = hs.get(i..i + ext_len)?;
    let mut j = 0;
    while j + 4 <= exts.len() {
        let ty = u16::from_be_bytes([exts[j], exts[j + 1]]);
        let len = usize::from(u16::from_be_bytes([exts[j + 2], exts[j + 3]]));
        let body = exts.get(j + 4..j + 4 + len)?;
        if ty == 0 {
            // server_name: list length (2), then entries: type (1) = 0 host_name, length (2), name.
            let mut k = 2;
            while k + 3 <= body.len() {
                let nt = body[k];
                let nl = usize::from(u16::from_be_bytes([body[k + 1], body[k + 2]]));
                let name = body.get(k + 3..k + 3 + nl)?;
                if nt == 0 {
                    return std::str::from_utf8(name).ok().map(str::to_string);
                }
                k += 3 + nl;
            }
            return None;
        }
        j += 4 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(allow: &[&str], deny: &[&str]) -> Allowlist {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_string()).collect::<Vec<_>>();
        Allowlist::new(&s(allow), &s(deny), &[], &[]).unwrap()
    }

    #[test]
    fn grammar_exact_subdomains_both_and_deny_wins() {
        let a = list(&["example.com", "*.pkg.dev", "**.github.com"], &["evil.github.com"]);
        let ok = |h: &str, p: u16| a.decide(h, p).allowed();
        assert!(ok("example.com", 443) && ok("EXAMPLE.com.", 80));
        assert!(!ok("www.example.com", 443) && !ok("example.com", 22) && !ok("example.com.evil.net", 443));
        assert!(ok("a.pkg.dev", 443) && ok("a.b.pkg.dev", 443) && !ok("pkg.dev", 443) && !ok("xpkg.dev", 443));
        assert!(ok("github.com", 443) && ok("api.github.com", 443) && !ok("evil.github.com", 443));
        assert!(a.decide("evil.github.com", 443).rule.contains("deny_domains evil.github.com"));
        assert!(!list(&[], &[]).decide("example.com", 443).allowed(), "an empty allowlist allows nothing");
    }

    #[test]
    fn bad_rules_and_hosts_are_refused() {
        for bad in ["*", "**", "*.", "ex ample.com", "exämple.com", "-a.com", "a..com", "*.*.com", "127.0.0.1", "2130706433"] {
            assert!(DomainRule::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(DomainRule::parse("xn--bcher-kva.example").unwrap().domain, "xn--bcher-kva.example");
        let a = list(&["example.com"], &[]);
        for host in ["2130706433", "0177.0.0.1", "0x7f.0.0.1", "127.1", "exämple.com", "127.0.0.1", "[::1]", "::1"] {
            assert!(!a.decide(host, 80).allowed(), "{host}");
        }
    }

    #[test]
    fn addresses_and_cidrs() {
        let a = Allowlist::new(&["localhost".into()], &[], &[8080], &["127.0.0.1/32".into()]).unwrap();
        assert!(a.decide("127.0.0.1", 8080).allowed() && !a.decide("127.0.0.2", 8080).allowed());
        assert!(a.check_address("127.0.0.1".parse().unwrap()).is_ok());
        assert!(a.check_address("::ffff:127.0.0.1".parse().unwrap()).is_ok(), "mapped form of an allowed address");
        let plain = list(&["example.com"], &[]);
        for ip in ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255",
            "::1", "::", "fe80::1", "fc00::1", "ff02::1", "::ffff:8.8.8.8", "64:ff9b::1", "2002::1", "::127.0.0.1"] {
            assert!(plain.check_address(ip.parse().unwrap()).is_err(), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1", "172.32.0.1", "100.128.0.1"] {
            assert!(plain.check_address(ip.parse().unwrap()).is_ok(), "{ip}");
        }
        assert!(Cidr::parse("10.0.0.0/33").is_err() && Cidr::parse("x").is_err());
        assert!(Cidr::parse("10.0.0.0/8").unwrap().contains("10.255.0.1".parse().unwrap()));
        assert!(!Cidr::parse("10.0.0.0/9").unwrap().contains("10.128.0.1".parse().unwrap()));
    }

    #[test]
    fn a_named_host_reaches_its_private_addresses_and_nothing_else_does() {
        let a = list(&["pypi.org"], &[]).with_private_hosts(&["Mirror.Corp.Example.".into()]).unwrap();
        // Named: allowed by its name alone, and its private-range addresses may be dialled.
        assert_eq!(a.decide("mirror.corp.example", 443).rule, "allow_private_hosts Mirror.Corp.Example.");
        for ip in ["10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1", "100.64.0.1", "fd00::1", "fc00::1"] {
            assert!(a.check_address_of("mirror.corp.example", ip.parse().unwrap()).is_ok(), "{ip}");
            assert!(a.check_address_of("MIRROR.corp.example.", ip.parse().unwrap()).is_ok(), "{ip}: the same name");
            // Another name, allowed or not, a subdomain or a suffix: not into the private range.
            for other in ["pypi.org", "x.mirror.corp.example", "corp.example", "mirror.corp.example.evil"] {
                let (kind, e) = a.check_address_of(other, ip.parse().unwrap()).unwrap_err();
                assert!(kind == Refusal::PrivateAddress && e.contains("allow_private_hosts"), "{other} {ip}: {e}");
            }
        }
        // Never loopback, link-local (metadata), unspecified, multicast, mapped or other special forms.
        for ip in ["127.0.0.1", "169.254.169.254", "0.0.0.0", "224.0.0.1", "::1", "fe80::1", "::ffff:10.1.2.3", "::ffff:127.0.0.1", "64:ff9b::a01:203", "192.0.2.1", "198.18.0.1"] {
            assert_eq!(a.check_address_of("mirror.corp.example", ip.parse().unwrap()).map_err(|(k, _)| k), Err(Refusal::Address), "{ip}");
        }
        // Public addresses as before; deny still wins over the name.
        assert!(a.check_address_of("mirror.corp.example", "93.184.216.34".parse().unwrap()).is_ok());
        let denied = Allowlist::new(&[], &["mirror.corp.example".into()], &[], &[]).unwrap().with_private_hosts(&["mirror.corp.example".into()]).unwrap();
        assert!(!denied.decide("mirror.corp.example", 443).allowed());
        // Only exact names.
        for w in ["*.corp.example", "**.corp.example", "10.1.2.3", ""] {
            assert!(list(&[], &[]).with_private_hosts(&[w.into()]).is_err(), "{w:?}");
        }
        // The hint names the flag for a name, the CIDR for an address.
        assert!(allow_hint("mirror.corp.example", 443, Refusal::PrivateAddress).unwrap().contains("--allow-private-host mirror.corp.example"));
        assert!(!allow_hint("pypi.org", 443, Refusal::Address).unwrap().contains("private"), "a documentation or loopback address: allow_cidrs only");
    }

    #[test]
    fn sni_is_read_from_a_client_hello() {
        // A minimal ClientHello with server_name "example.com".
        let name = b"example.com";
        let mut body = ((3 + name.len()) as u16).to_be_bytes().to_vec();
        body.push(0);
        body.extend_from_slice(&(name.len() as u16).to_be_bytes());
        body.extend_from_slice(name);
        let mut sni = vec![0u8, 0];
        sni.extend_from_slice(&(body.len() as u16).to_be_bytes());
        sni.extend_from_slice(&body);
        let mut hello = vec![3, 3];
        hello.extend_from_slice(&[0u8; 32]);
        hello.push(0); // session id
        hello.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
        hello.extend_from_slice(&[1, 0]); // null compression
        hello.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        hello.extend_from_slice(&sni);
        let mut hs = vec![1, 0, 0, 0];
        hs[1..4].copy_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&hello);
        let mut rec = vec![22, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        assert_eq!(client_hello_sni(&rec).as_deref(), Some("example.com"));
        // The builder the other tests use makes these very bytes.
        assert_eq!(client_hello(Some("example.com")), rec);
        assert_eq!(client_hello_sni(&client_hello(None)), None);
        assert_eq!(client_hello_sni(&rec[..rec.len() - 1]), None, "incomplete");
        assert_eq!(client_hello_sni(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn each_refusal_says_how_to_allow_it() {
        let a = Allowlist::new(&["**.example.com".into()], &["evil.example.com".into()], &[], &[]).unwrap();
        for (host, port, hint) in [
            ("pypi.org", 443, "--allow-domain pypi.org"),
            ("a.example.com", 8443, "add 8443 to allow_ports"),
            ("evil.example.com", 443, "evil.example.com is in deny_domains"),
            ("10.0.0.1", 443, "allow_cidrs"),
            ("0x7f.1", 443, "cannot be allowed by name"),
        ] {
            let v = a.decide(host, port);
            assert!(!v.allowed(), "{host}");
            let h = v.refusal.and_then(|r| allow_hint(host, port, r)).unwrap_or_default();
            assert!(h.contains(hint), "{host}: {} / {h}", v.rule);
        }
        assert_eq!(a.decide("a.example.com", 443).refusal, None);
        // Nothing to allow when the destination was allowed and the connection failed.
        assert_eq!(allow_hint("a.example.com", 443, Refusal::Protocol), None);
        assert_eq!(allow_hint("a.example.com", 443, Refusal::Unreachable), None);
    }
}
