//! The `Host` names roost answers to: its guard against DNS rebinding.
//!
//! A web page on `rebind.attacker.example` can make its DNS name resolve to 127.0.0.1, and
//! the browser then sends the page's requests to a local roost as if they were same-origin,
//! with `Host: rebind.attacker.example`. While roost trusts loopback callers (no
//! `SERVICE_API_TOKENS`), such a page could read and change everything. So, like Vite's
//! `server.allowedHosts`, Jupyter's `allow_remote_access` and webpack-dev-server's
//! `allowedHosts`, roost answers only requests whose `Host` is one it knows:
//!
//! - `localhost` and names under `.localhost` (browsers resolve them to loopback themselves);
//! - any IP address (an IP in the address bar is its own origin: no name to rebind), so
//!   the bound address is always allowed;
//! - the host of `--public-url`, the host `--addr` names, and every entry of
//!   `--allowed-hosts` and `--mcp-allowed-hosts`: a name, or `.example.com` for that
//!   domain and every name under it; `*` allows any host.
//!
//! The port is not compared (Vite does the same): the names are what a rebinding page
//! cannot fake. A request without any `Host` (HTTP/1.0 clients) comes from no browser and
//! passes.

/// The names roost answers to; see the module doc.
#[derive(Debug, Clone, Default)]
pub struct HostAllowList {
    /// Configured names, lower-cased, without port or trailing dot; `.domain` entries match
    /// the domain and its subdomains.
    names: Vec<String>,
    /// `*` was configured: every host is allowed.
    any: bool,
}

impl HostAllowList {
    /// The built-in rules plus `entries` (names, `name:port`, `.domain`, URLs, or `*`).
    pub fn new<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Self {
        let mut list = Self::default();
        for entry in entries {
            list.add(entry.as_ref());
        }
        list
    }

    /// Allows one more entry (a name, `name:port`, `.domain`, an `http(s)://` URL, or `*`).
    pub fn add(&mut self, entry: &str) {
        let entry = entry.trim();
        if entry == "*" {
            self.any = true;
            return;
        }
        let authority = entry.split_once("://").map_or(entry, |(_, rest)| rest);
        let authority = authority.split(['/', '?', '#']).next().unwrap_or_default();
        let (subdomains, name) = match authority.strip_prefix('.') {
            Some(rest) => (true, rest),
            None => (false, authority),
        };
        let name = hostname(name);
        if !name.is_empty() {
            self.names.push(if subdomains { format!(".{name}") } else { name });
        }
    }

    /// Whether a request with this `Host` (or `:authority`) value may be answered.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let name = hostname(host);
        if name.is_empty() {
            // `Host:` with nothing usable: not something a browser sends.
            return host.trim().is_empty();
        }
        if name == "localhost" || name.ends_with(".localhost") || name.parse::<std::net::IpAddr>().is_ok() {
            return true;
        }
        self.names.iter().any(|allowed| match allowed.strip_prefix('.') {
            Some(domain) => name == domain || name.strip_suffix(domain).is_some_and(|sub| sub.ends_with('.')),
            None => *allowed == name,
        })
    }
}

/// The host name of a `Host` value: lower case, without port, brackets or a trailing dot.
pub fn hostname(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        // `[::1]:8900`
        rest.split(']').next().unwrap_or_default()
    } else if host.matches(':').count() > 1 {
        // A bare IPv6 address, as `--mcp-allowed-hosts ::1` writes it.
        host
    } else {
        host.split(':').next().unwrap_or_default()
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_are_always_allowed() {
        let list = HostAllowList::default();
        for host in ["localhost", "localhost:8900", "LOCALHOST.", "app.localhost:3000", "127.0.0.1:8900", "[::1]:8900"]
        {
            assert!(list.allows(host), "{host}");
        }
        // The bound address, whatever it is: an IP cannot be rebound.
        assert!(list.allows("192.168.1.5:8900"));
        assert!(list.allows(""), "no Host at all: not a browser");
        for host in ["rebind.attacker.example:8900", "localhost.attacker.example", "127.0.0.1.nip.io", "roost.lan"] {
            assert!(!list.allows(host), "{host}");
        }
    }

    #[test]
    fn configured_names_domains_and_urls() {
        let list = HostAllowList::new(["roost.lan", ".example.com", "https://Roost.Example.org:8443/", "::1", " "]);
        for host in ["roost.lan:8900", "example.com", "a.b.example.com:1", "roost.example.org"] {
            assert!(list.allows(host), "{host}");
        }
        for host in ["roost.lan.evil", "notexample.com", "example.org"] {
            assert!(!list.allows(host), "{host}");
        }
        assert!(HostAllowList::new(["*"]).allows("anything.example"));
    }
}
