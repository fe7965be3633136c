//! The egress proxy's rules: which destinations an agent may reach.
//!
//! The operator's `--egress-deny` patterns beat everything; `--egress-allow` patterns admit
//! a destination by the name or IP literal the agent asked for, even a private one (a test
//! server, a service on the host the operator chose to share); anything else must resolve
//! only to public addresses, and with `--egress-default deny` must be allowed too.

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

    fn matches_address(&self, ip: IpAddr, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && matches!(self.target, Target::Network(net, l) if in_network(ip, net, l))
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
/// range is. The metadata service (169.254.169.254, fd00:ec2::254) is in two of them.
const NON_PUBLIC: [(IpAddr, u8, &str); 14] = [
    (v4(0, 0, 0, 0), 8, "an unspecified address"),
    (v4(127, 0, 0, 0), 8, "a loopback address"),
    (v4(10, 0, 0, 0), 8, "a private address"),
    (v4(172, 16, 0, 0), 12, "a private address"),
    (v4(192, 168, 0, 0), 16, "a private address"),
    (v4(169, 254, 0, 0), 16, "a link-local address"),
    (v4(100, 64, 0, 0), 10, "a carrier-grade NAT address"),
    (v4(224, 0, 0, 0), 4, "a multicast address"),
    (v4(240, 0, 0, 0), 4, "a reserved or broadcast address"),
    (v6(0), 128, "an unspecified address"),
    (v6(1), 128, "a loopback address"),
    (v6(0xfc00 << 112), 7, "a private address"),
    (v6(0xfe80 << 112), 10, "a link-local address"),
    (v6(0xff00 << 112), 8, "a multicast address"),
];

const fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

const fn v6(bits: u128) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from_bits(bits))
}

/// What kind of non-public address `ip` is, if it is one. IPv4 inside IPv6 (mapped, or
/// behind NAT64's 64:ff9b::/96) is judged as the IPv4 address.
fn non_public(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) if v6.to_bits() >> 32 == 0x64_ff9b << 64 => IpAddr::V4(Ipv4Addr::from_bits(v6.to_bits() as u32)),
        _ => ip,
    };
    NON_PUBLIC.iter().find(|(net, length, _)| in_network(ip, *net, *length)).map(|(_, _, kind)| *kind)
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
    fn bad_patterns_are_rejected() {
        for bad in ["", "exa mple.com", "10.0.0.0/33", "example.com:0", "example.com:http", "[::1", "*.", "a..b"] {
            let err = EgressPolicy::new(&[bad.to_owned()], &[], true).unwrap_err();
            assert!(err.starts_with("--egress-allow: ") && err.contains("is not a valid pattern"), "{err}");
        }
        assert!(EgressPolicy::new(&[], &["300.1.1.1".to_owned()], true).unwrap_err().starts_with("--egress-deny"));
    }
}
