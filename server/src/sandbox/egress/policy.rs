//! The egress proxy's rules: which destinations an agent may reach.
//!
//! The operator's `--egress-deny` patterns beat everything; `--egress-allow` patterns admit
//! a destination by the name or IP literal the agent asked for, even a private one (a test
//! server, a service on the host the operator chose to share); anything else must resolve
//! only to public addresses, and with `--egress-default deny` must be allowed too.
//!
//! "Public" means outside every IANA special-purpose range (loopback, private, link-local
//! and so the metadata service, CGNAT, documentation, benchmarking, multicast, reserved, the
//! deprecated and transition ranges; see `NON_PUBLIC`), and an IPv6 address that carries an
//! IPv4 one (IPv4-mapped, IPv4-translated, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged by
//! the IPv4 address inside, so `64:ff9b::7f00:1` is as refused as 127.0.0.1. A deny pattern
//! for an IPv4 network refuses those IPv6 spellings of its addresses too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The operator's egress rules (from `--egress-allow`, `--egress-deny`, `--egress-default`).
#[derive(Debug, Clone)]
pub struct EgressPolicy {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    default_allow: bool,
}

impl Default for EgressPolicy {
    /// Every public destination, nothing else.
    fn default() -> Self {
        Self { allow: Vec::new(), deny: Vec::new(), default_allow: true }
    }
}

impl EgressPolicy {
    /// `allow` and `deny` are patterns: a host name (`example.com`), a wildcard domain
    /// (`*.example.com`, matching subdomains only), an IP (`10.1.2.3`, `::1`), a CIDR
    /// (`10.0.0.0/8`), each optionally with `:port` (IPv6 with port as `[::1]:8080`).
    /// `default_allow`: whether a public destination matching neither list is allowed.
    ///
    /// A deny pattern matches the name as asked or any address it resolves to, and beats
    /// everything. An allow pattern matches the name or IP literal as asked (not what a name
    /// resolves to) and admits it even when it is not public.
    pub fn new(allow: &[String], deny: &[String], default_allow: bool) -> Result<Self, String> {
        let parse = |patterns: &[String], flag: &str| -> Result<Vec<Pattern>, String> {
            patterns.iter().map(|p| Pattern::parse(p).map_err(|err| format!("--egress-{flag}: {err}"))).collect()
        };
        Ok(Self { allow: parse(allow, "allow")?, deny: parse(deny, "deny")?, default_allow })
    }

    /// The checks made before resolving: `Err(reason)` if refused, else whether an allow
    /// pattern names this destination.
    pub(super) fn check_name(&self, host: &str, port: u16) -> Result<bool, String> {
        if let Some(pattern) = self.deny.iter().find(|p| p.matches_name(host, port)) {
            return Err(format!("denied by --egress-deny {}", pattern.text));
        }
        if self.allow.iter().any(|p| p.matches_name(host, port)) {
            return Ok(true);
        }
        if host == "localhost" || host.ends_with(".localhost") {
            return Err(format!("{host} is a loopback name"));
        }
        Ok(false)
    }

    /// The checks made on what `host` resolved to; `allowed`: what [`Self::check_name`] said.
    pub(super) fn check_addresses(&self, host: &str, allowed: bool, addresses: &[SocketAddr]) -> Result<(), String> {
        for address in addresses {
            if let Some(pattern) = self.deny.iter().find(|p| p.matches_address(address.ip(), address.port())) {
                return Err(format!("denied by --egress-deny {}", pattern.text));
            }
        }
        if allowed {
            return Ok(());
        }
        for ip in addresses.iter().map(SocketAddr::ip) {
            if let Some(kind) = non_public(ip) {
                let named = host.parse::<IpAddr>().is_err();
                return Err(if named { format!("{host} resolves to {ip}, {kind}") } else { format!("{ip} is {kind}") });
            }
        }
        if !self.default_allow {
            return Err("not in --egress-allow".to_owned());
        }
        Ok(())
    }
}

/// `host[:port]`; an IPv6 host takes brackets when a port follows (`[::1]:8080`), and a
/// bare one has no port.
pub(super) fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return if after.is_empty() { Some((host, None)) } else { Some((host, Some(after.strip_prefix(':')?))) };
    }
    match text.split_once(':') {
        Some((host, port)) if !port.contains(':') => Some((host, Some(port))),
        _ => Some((text, None)),
    }
}

pub(super) fn parse_port(text: &str) -> Option<u16> {
    text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok()).flatten().filter(|&port| port != 0)
}

/// A DNS name, lowercase and without a trailing dot, if `name` is one. A numeric last label
/// is refused: no top-level domain is numeric, so it is a mistyped IP address (`300.1.1.1`)
/// or one in a form only the resolver reads (`2130706433`).
pub(super) fn dns_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let label =
        |l: &str| (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let numeric = name.rsplit('.').next().is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    (name.len() <= 253 && name.split('.').all(label) && !numeric).then_some(name)
}

/// One `--egress-allow` or `--egress-deny` pattern.
#[derive(Debug, Clone)]
struct Pattern {
    /// As the operator wrote it, for refusal reasons.
    text: String,
    target: Target,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Debug, Clone)]
enum Target {
    /// Exactly this name.
    Name(String),
    /// Any subdomain of this name, not the name itself.
    Subdomains(String),
    /// An address and prefix length (a single address has the full length).
    Network(IpAddr, u8),
}

impl Pattern {
    fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let fail = |why: &str| format!("{text:?} is not a valid pattern: {why}");
        let (host, port) = split_host_port(text).ok_or_else(|| fail("expected [IPv6]:port"))?;
        let port = port.map(|p| parse_port(p).ok_or_else(|| fail("the port must be 1-65535"))).transpose()?;
        let target = Self::target(host).map_err(fail)?;
        Ok(Self { text: text.to_owned(), target, port })
    }

    fn target(host: &str) -> Result<Target, &'static str> {
        if let Some((ip, length)) = host.split_once('/') {
            let ip: IpAddr = ip.parse().map_err(|_| "a CIDR starts with an IP address")?;
            let bits = if ip.is_ipv4() { 32 } else { 128 };
            let length = length.parse::<u8>().ok().filter(|&l| l <= bits).ok_or("bad CIDR prefix length")?;
            return Ok(network(ip, length));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(network(ip, if ip.is_ipv4() { 32 } else { 128 }));
        }
        if let Some(domain) = host.strip_prefix("*.") {
            return dns_name(domain).map(Target::Subdomains).ok_or("expected a domain name after '*.'");
        }
        dns_name(host).map(Target::Name).ok_or("expected a host name, *.domain, IP address or CIDR")
    }

    fn matches_name(&self, host: &str, port: u16) -> bool {
        self.port.is_none_or(|p| p == port)
            && match &self.target {
                Target::Name(name) => host == name,
                Target::Subdomains(domain) => {
                    host.strip_suffix(domain.as_str()).is_some_and(|sub| sub.len() > 1 && sub.ends_with('.'))
                }
                Target::Network(net, length) => host.parse().is_ok_and(|ip| in_network(ip, *net, *length)),
            }
    }

    /// Whether `ip` is in this pattern's network, or (for an IPv4 network) carries an IPv4
    /// address in it the way [`embedded_ipv4`] reads: a deny of `10.0.0.0/8` refuses
    /// `64:ff9b::a00:1` and `2002:a00:1::` too.
    fn matches_address(&self, ip: IpAddr, port: u16) -> bool {
        let Target::Network(net, length) = self.target else { return false };
        let embedded = match ip {
            IpAddr::V6(v6) => embedded_ipv4(v6).map(|(v4, _)| IpAddr::V4(v4)),
            IpAddr::V4(_) => None,
        };
        self.port.is_none_or(|p| p == port)
            && (in_network(ip, net, length) || embedded.is_some_and(|v4| in_network(v4, net, length)))
    }
}

/// An IPv4-mapped IPv6 network is kept as the IPv4 one, so it matches either spelling.
fn network(ip: IpAddr, length: u8) -> Target {
    match ip {
        IpAddr::V6(v6) if length >= 96 => match v6.to_ipv4_mapped() {
            Some(v4) => Target::Network(IpAddr::V4(v4), length - 96),
            None => Target::Network(ip, length),
        },
        _ => Target::Network(ip, length),
    }
}

fn in_network(ip: IpAddr, net: IpAddr, length: u8) -> bool {
    let (a, n, bits) = match (ip.to_canonical(), net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u128::from(u32::from(a)), u128::from(u32::from(n)), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        _ => return false,
    };
    (a ^ n).checked_shr(bits - u32::from(length).min(bits)).unwrap_or(0) == 0
}

/// Where an agent may not go unless a pattern allows it by name or literal, and what each
/// range is: every IANA special-purpose range that is not plainly a public host, the
/// deprecated ones included. The metadata service (169.254.169.254, fd00:ec2::254) is in
/// two of them. IPv6 that embeds an IPv4 address (mapped, translated, NAT64, 6to4) is not
/// here: [`non_public`] judges the IPv4 address inside. The first match names the kind, so
/// a narrower range comes before a wider one that holds it.
///
/// IANA lists a few of these as globally reachable (the AS112 and AMT ranges, parts of
/// 2001::/23): an agent has no business with DNS sinks, multicast relays or protocol
/// anycast, so they are refused with their neighbours.
const NON_PUBLIC: [(IpAddr, u8, &str); 32] = [
    (v4(0, 0, 0, 0), 8, "an unspecified address"),
    (v4(127, 0, 0, 0), 8, "a loopback address"),
    (v4(10, 0, 0, 0), 8, "a private address"),
    (v4(172, 16, 0, 0), 12, "a private address"),
    (v4(192, 168, 0, 0), 16, "a private address"),
    (v4(169, 254, 0, 0), 16, "a link-local address"),
    (v4(100, 64, 0, 0), 10, "a carrier-grade NAT address"),
    (v4(192, 0, 0, 0), 24, "an IETF protocol assignment address"),
    (v4(192, 0, 2, 0), 24, "a documentation address"),
    (v4(198, 51, 100, 0), 24, "a documentation address"),
    (v4(203, 0, 113, 0), 24, "a documentation address"),
    (v4(192, 31, 196, 0), 24, "an AS112 DNS address"),
    (v4(192, 175, 48, 0), 24, "an AS112 DNS address"),
    (v4(192, 52, 193, 0), 24, "an AMT relay address"),
    (v4(192, 88, 99, 0), 24, "a 6to4 relay anycast address"),
    (v4(198, 18, 0, 0), 15, "a benchmarking address"),
    (v4(224, 0, 0, 0), 4, "a multicast address"),
    (v4(240, 0, 0, 0), 4, "a reserved or broadcast address"),
    (v6(0), 128, "an unspecified address"),
    (v6(1), 128, "a loopback address"),
    // Deprecated (RFC 4291): nothing routes it, and a stack may treat it as the IPv4 inside.
    (v6(0), 96, "an IPv4-compatible address"),
    (v6(0x0064_ff9b_0001 << 80), 48, "a local-use NAT64 address"),
    (v6(0x0100 << 112), 64, "a discard-only address"),
    // Teredo hides its client's IPv4 address (inverted) in the last 32 bits.
    (v6(0x2001 << 112), 32, "a Teredo address"),
    (v6(0x2001 << 112), 23, "an IETF protocol assignment address"),
    (v6(0x2001_0db8 << 96), 32, "a documentation address"),
    (v6(0x3fff << 112), 20, "a documentation address"),
    (v6(0x5f00 << 112), 16, "an SRv6 address"),
    (v6(0xfc00 << 112), 7, "a private address"),
    (v6(0xfe80 << 112), 10, "a link-local address"),
    (v6(0xfec0 << 112), 10, "a site-local address"),
    (v6(0xff00 << 112), 8, "a multicast address"),
];

const fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

const fn v6(bits: u128) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from_bits(bits))
}

/// Why an address is not public: its kind, and the IPv6 form that carried it when the kind
/// is that of an IPv4 address inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NonPublic {
    kind: &'static str,
    inside: Option<&'static str>,
}

impl std::fmt::Display for NonPublic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.inside {
            Some(form) => write!(f, "{} (IPv4 inside {form})", self.kind),
            None => f.write_str(self.kind),
        }
    }
}

/// The IPv4 address an IPv6 address stands for, and the form's name (`None` for
/// IPv4-mapped, which is the IPv4 address itself to a dual-stack socket): IPv4-mapped
/// `::ffff:0:0/96`, IPv4-translated `::ffff:0:0:0/96` (SIIT), NAT64's well-known
/// `64:ff9b::/96`, each with the address in the last 32 bits, and 6to4 `2002::/16` with it in
/// bits 16 to 48. Deprecated IPv4-compatible `::/96` is not here: it is refused whole.
fn embedded_ipv4(ip: Ipv6Addr) -> Option<(Ipv4Addr, Option<&'static str>)> {
    let bits = ip.to_bits();
    let last = Ipv4Addr::from_bits(bits as u32);
    match bits >> 32 {
        0xffff => Some((last, None)),
        0xffff_0000 => Some((last, Some("IPv4-translated ::ffff:0:0:0/96"))),
        prefix if prefix == 0x0064_ff9b << 64 => Some((last, Some("NAT64 64:ff9b::/96"))),
        _ if bits >> 112 == 0x2002 => Some((Ipv4Addr::from_bits((bits >> 80) as u32), Some("6to4 2002::/16"))),
        _ => None,
    }
}

/// What kind of non-public address `ip` is, if it is one. IPv4 inside IPv6 (see
/// [`embedded_ipv4`]) is judged as the IPv4 address: `64:ff9b::5db8:d822` is as public as
/// 93.184.216.34, `2002:7f00:1::` as loopback as 127.0.0.1.
fn non_public(ip: IpAddr) -> Option<NonPublic> {
    let (ip, inside) = match ip {
        IpAddr::V6(v6) => match embedded_ipv4(v6) {
            Some((v4, inside)) => (IpAddr::V4(v4), inside),
            None => (ip, None),
        },
        IpAddr::V4(_) => (ip, None),
    };
    NON_PUBLIC
        .iter()
        .find(|(net, length, _)| in_network(ip, *net, *length))
        .map(|&(_, _, kind)| NonPublic { kind, inside })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str], default_allow: bool) -> EgressPolicy {
        let owned = |list: &[&str]| list.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        EgressPolicy::new(&owned(allow), &owned(deny), default_allow).unwrap()
    }

    /// The whole decision for `host:port` resolving to `addresses`.
    fn check(policy: &EgressPolicy, host: &str, port: u16, addresses: &[&str]) -> Result<(), String> {
        let allowed = policy.check_name(host, port)?;
        let addresses: Vec<SocketAddr> = addresses.iter().map(|a| SocketAddr::new(a.parse().unwrap(), port)).collect();
        policy.check_addresses(host, allowed, &addresses)
    }

    #[test]
    fn only_public_addresses_pass_by_default() {
        let default = EgressPolicy::default();
        for ip in [
            "127.0.0.1",
            "10.0.0.5",
            "172.16.3.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd00:ec2::254",
            "ff02::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(check(&default, &ip.parse::<IpAddr>().unwrap().to_string(), 443, &[ip]).is_err(), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700::1111", "172.32.0.1", "100.128.0.1"] {
            assert_eq!(check(&default, ip, 443, &[ip]), Ok(()), "{ip}");
        }
        let metadata = check(&default, "169.254.169.254", 80, &["169.254.169.254"]).unwrap_err();
        assert_eq!(metadata, "169.254.169.254 is a link-local address");
        let mapped = check(&default, "::ffff:10.0.0.1", 80, &["::ffff:10.0.0.1"]).unwrap_err();
        assert_eq!(mapped, "::ffff:10.0.0.1 is a private address");
        // Every address counts, not just the first.
        let rebind = check(&default, "sneaky.example", 443, &["93.184.216.34", "10.0.0.1"]).unwrap_err();
        assert_eq!(rebind, "sneaky.example resolves to 10.0.0.1, a private address");
    }

    #[test]
    fn localhost_names_are_refused_unless_allowed() {
        let default = EgressPolicy::default();
        assert_eq!(default.check_name("localhost", 80), Err("localhost is a loopback name".to_owned()));
        assert!(default.check_name("api.localhost", 80).is_err());
        assert_eq!(check(&policy(&["localhost"], &[], true), "localhost", 80, &["127.0.0.1"]), Ok(()));
    }

    #[test]
    fn deny_beats_allow() {
        let both = policy(&["example.com"], &["example.com"], true);
        assert_eq!(
            check(&both, "example.com", 443, &["93.184.216.34"]),
            Err("denied by --egress-deny example.com".into())
        );
        // A denied network is refused whatever name leads there.
        let net = policy(&["example.com"], &["93.184.0.0/16"], true);
        assert!(check(&net, "example.com", 443, &["93.184.216.34"]).unwrap_err().contains("93.184.0.0/16"));
        assert_eq!(check(&net, "example.org", 443, &["96.7.128.1"]), Ok(()));
    }

    #[test]
    fn explicit_allows_admit_private_destinations() {
        let allow = policy(&["127.0.0.1:8080", "[::1]:9000", "db.internal"], &[], false);
        assert_eq!(check(&allow, "127.0.0.1", 8080, &["127.0.0.1"]), Ok(()));
        assert!(check(&allow, "127.0.0.1", 8081, &["127.0.0.1"]).is_err());
        assert_eq!(check(&allow, "::1", 9000, &["::1"]), Ok(()));
        assert_eq!(check(&allow, "db.internal", 5432, &["10.1.2.3"]), Ok(()));
    }

    #[test]
    fn wildcards_match_subdomains_and_cidrs_match_literals() {
        let allow = policy(&["*.example.com", "10.0.0.0/8"], &[], false);
        let public = ["93.184.216.34"];
        assert_eq!(check(&allow, "api.example.com", 443, &public), Ok(()));
        assert_eq!(check(&allow, "a.b.example.com", 443, &public), Ok(()));
        assert_eq!(check(&allow, "example.com", 443, &public), Err("not in --egress-allow".into()));
        assert!(check(&allow, "badexample.com", 443, &public).is_err());
        assert_eq!(check(&allow, "10.9.8.7", 22, &["10.9.8.7"]), Ok(()));
        assert_eq!(check(&allow, "::ffff:10.9.8.7", 22, &["::ffff:10.9.8.7"]), Ok(()));
        assert!(check(&allow, "11.0.0.1", 22, &["11.0.0.1"]).is_err());
        // An allowed network does not admit names that resolve into it.
        assert!(check(&allow, "intranet.corp", 80, &["10.0.0.1"]).is_err());
    }

    #[test]
    fn every_special_purpose_range_is_refused_in_every_spelling() {
        const TRANSLATED: &str = " (IPv4 inside IPv4-translated ::ffff:0:0:0/96)";
        const NAT64: &str = " (IPv4 inside NAT64 64:ff9b::/96)";
        const SIX_TO_FOUR: &str = " (IPv4 inside 6to4 2002::/16)";
        let unspecified = "an unspecified address";
        let loopback = "a loopback address";
        let private = "a private address";
        let link_local = "a link-local address";
        let ietf = "an IETF protocol assignment address";
        let documentation = "a documentation address";
        let as112 = "an AS112 DNS address";
        let multicast = "a multicast address";
        let reserved = "a reserved or broadcast address";
        let compatible = "an IPv4-compatible address";
        let local_nat64 = "a local-use NAT64 address";
        let teredo = "a Teredo address";
        let refused: Vec<(&str, String)> = [
            // IPv4, first and last of each range.
            ("0.0.0.0", unspecified),
            ("0.255.255.255", unspecified),
            ("10.0.0.0", private),
            ("10.255.255.255", private),
            ("100.64.0.0", "a carrier-grade NAT address"),
            ("100.127.255.255", "a carrier-grade NAT address"),
            ("127.0.0.0", loopback),
            ("127.255.255.255", loopback),
            ("169.254.0.0", link_local),
            ("169.254.169.254", link_local),
            ("169.254.255.255", link_local),
            ("172.16.0.0", private),
            ("172.31.255.255", private),
            ("192.0.0.0", ietf),
            ("192.0.0.255", ietf),
            ("192.0.2.0", documentation),
            ("192.0.2.255", documentation),
            ("192.31.196.0", as112),
            ("192.31.196.255", as112),
            ("192.52.193.0", "an AMT relay address"),
            ("192.52.193.255", "an AMT relay address"),
            ("192.88.99.0", "a 6to4 relay anycast address"),
            ("192.88.99.255", "a 6to4 relay anycast address"),
            ("192.168.0.0", private),
            ("192.168.255.255", private),
            ("192.175.48.0", as112),
            ("192.175.48.255", as112),
            ("198.18.0.0", "a benchmarking address"),
            ("198.19.255.255", "a benchmarking address"),
            ("198.51.100.0", documentation),
            ("198.51.100.255", documentation),
            ("203.0.113.0", documentation),
            ("203.0.113.255", documentation),
            ("224.0.0.0", multicast),
            ("239.255.255.255", multicast),
            ("240.0.0.0", reserved),
            ("255.255.255.255", reserved),
            // IPv6.
            ("::", unspecified),
            ("::1", loopback),
            ("::2", compatible),
            ("::ffff:ffff", compatible),
            ("64:ff9b:1::", local_nat64),
            ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", local_nat64),
            ("100::", "a discard-only address"),
            ("100::ffff:ffff:ffff:ffff", "a discard-only address"),
            ("2001::", teredo),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", teredo),
            ("2001:0:ffff:ffff:ffff:ffff:ffff:ffff", teredo),
            ("2001:1::", ietf),
            ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", ietf),
            ("2001:db8::", documentation),
            ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", documentation),
            ("3fff::", documentation),
            ("3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", documentation),
            ("5f00::", "an SRv6 address"),
            ("5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "an SRv6 address"),
            ("fc00::", private),
            ("fd00:ec2::254", private),
            ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", private),
            ("fe80::", link_local),
            ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", link_local),
            ("fec0::", "a site-local address"),
            ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "a site-local address"),
            ("ff00::", multicast),
            ("ff02::1", multicast),
            ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", multicast),
        ]
        .into_iter()
        .map(|(ip, reason)| (ip, reason.to_owned()))
        .chain(
            // 127.0.0.1, 10.0.0.1 and the metadata service in each IPv6 spelling.
            [
                ("::ffff:127.0.0.1", loopback.to_owned()),
                ("::ffff:10.0.0.1", private.to_owned()),
                ("::ffff:169.254.169.254", link_local.to_owned()),
                ("::ffff:0.0.0.0", unspecified.to_owned()),
                ("::ffff:255.255.255.255", reserved.to_owned()),
                ("::127.0.0.1", compatible.to_owned()),
                ("::7f00:1", compatible.to_owned()),
                ("::10.0.0.1", compatible.to_owned()),
                ("::169.254.169.254", compatible.to_owned()),
                ("::ffff:0:127.0.0.1", format!("{loopback}{TRANSLATED}")),
                ("::ffff:0:a00:1", format!("{private}{TRANSLATED}")),
                ("::ffff:0:a9fe:a9fe", format!("{link_local}{TRANSLATED}")),
                ("64:ff9b::127.0.0.1", format!("{loopback}{NAT64}")),
                ("64:ff9b::a00:1", format!("{private}{NAT64}")),
                ("64:ff9b::a9fe:a9fe", format!("{link_local}{NAT64}")),
                ("64:ff9b::", format!("{unspecified}{NAT64}")),
                ("64:ff9b::ffff:ffff", format!("{reserved}{NAT64}")),
                ("2002:7f00:1::", format!("{loopback}{SIX_TO_FOUR}")),
                ("2002:a00:1::1", format!("{private}{SIX_TO_FOUR}")),
                ("2002:a9fe:a9fe:1:2:3:4:5", format!("{link_local}{SIX_TO_FOUR}")),
                ("2002::", format!("{unspecified}{SIX_TO_FOUR}")),
                ("2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", format!("{reserved}{SIX_TO_FOUR}")),
            ],
        )
        .collect();
        let default = EgressPolicy::default();
        for (ip, reason) in refused {
            let ip: IpAddr = ip.parse().unwrap();
            let literal = check(&default, &ip.to_string(), 443, &[&ip.to_string()]);
            assert_eq!(literal, Err(format!("{ip} is {reason}")));
            let named = check(&default, "example.com", 443, &["93.184.216.34", &ip.to_string()]);
            assert_eq!(named, Err(format!("example.com resolves to {ip}, {reason}")));
        }
    }

    #[test]
    fn public_addresses_pass_in_every_spelling() {
        let default = EgressPolicy::default();
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "2606:4700::1111",
            "2a00:1450:4001:80b::200e",
            "64:ff9b::5db8:d822",
            "::ffff:93.184.216.34",
            "::ffff:0:5db8:d822",
            "2002:5db8:d822::1",
            // Just past a refused range.
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.1",
            "126.255.255.255",
            "128.0.0.0",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.255",
            "192.0.3.1",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.255",
            "2001:200::1",
            "2001:db9::1",
            "3fff:1000::1",
        ] {
            assert_eq!(non_public(ip.parse().unwrap()), None, "{ip}");
            assert_eq!(check(&default, "example.com", 443, &[ip]), Ok(()), "{ip}");
        }
    }

    #[test]
    fn an_ipv4_deny_also_refuses_it_inside_ipv6() {
        let allow = ["64:ff9b::a00:1", "2002:a00:1::1", "::ffff:10.0.0.1", "::ffff:0:a00:1"];
        let allowed = policy(&allow, &[], true);
        let denied = policy(&allow, &["10.0.0.0/8"], true);
        for ip in allow {
            assert_eq!(check(&allowed, ip, 443, &[ip]), Ok(()), "{ip}");
            assert_eq!(check(&denied, ip, 443, &[ip]), Err("denied by --egress-deny 10.0.0.0/8".into()), "{ip}");
        }
        let public = policy(&[], &["93.184.216.34:443"], true);
        for ip in ["93.184.216.34", "::ffff:93.184.216.34", "64:ff9b::5db8:d822", "2002:5db8:d822::1"] {
            let refused = check(&public, "example.com", 443, &[ip]);
            assert_eq!(refused, Err("denied by --egress-deny 93.184.216.34:443".into()), "{ip}");
            assert_eq!(check(&public, "example.com", 80, &[ip]), Ok(()), "{ip}");
        }
        // An IPv6 deny stays IPv6: it does not reach the IPv4 address itself.
        let v6 = policy(&[], &["2002::/16"], true);
        assert!(check(&v6, "example.com", 443, &["2002:5db8:d822::1"]).is_err());
        assert_eq!(check(&v6, "example.com", 443, &["93.184.216.34"]), Ok(()));
    }

    #[test]
    fn bad_patterns_are_rejected() {
        for bad in ["", "exa mple.com", "10.0.0.0/33", "example.com:0", "example.com:http", "[::1", "*.", "a..b"] {
            let err = EgressPolicy::new(&[bad.to_owned()], &[], true).unwrap_err();
            assert!(err.starts_with("--egress-allow: ") && err.contains("is not a valid pattern"), "{err}");
        }
        assert!(EgressPolicy::new(&[], &["300.1.1.1".to_owned()], true).unwrap_err().starts_with("--egress-deny"));
    }
}
