//! Who may call the dashboard side of roost (docs/api.md#dashboard-access).
//!
//! One policy for the whole port, gRPC included, keyed by path:
//! - open: `/healthz`, `/skill.md`, `/api/runtimes` (the catalogue), grpc.health and reflection;
//! - the rest of the hosted-agent API (`/api/provision`, `/api/instances…`, `/api/account…`, `/mcp`,
//!   `AgentService`, `AccountService`) and node push (`/ingest/*`, `IngestService`'s
//!   `Heartbeat`/`PushBatch`) check their own keys in the core;
//! - the pages (`/dashboard…`) follow the dashboard's rules, taking the sign-in cookie
//!   as the token; `/dashboard/signin`, `/static/*` and `/favicon.ico` are open;
//! - the web app's pages (`/`, `/login`, `/signup`, `/logout`, `/invite/…`, `/developers`,
//!   `/billing…`, `/instances/…`) check the user's session themselves (`/` shows the
//!   dashboard's overview to a dashboard caller who is not signed in to the web app); a
//!   form post there must come from this site (`Origin`/`Referer` and `Sec-Fetch-Site`);
//! - the Stripe webhook is open: its signature is checked in the core;
//! - everything else is the dashboard: the query API, feature APIs, streams, ingest,
//!   control and update routes, and any path added later (deny by default).
//!
//! Dashboard calls: with `SERVICE_API_TOKENS` unset, only loopback peers are served (the
//! peer address of the TCP connection; `X-Forwarded-For` is never trusted, so behind a
//! reverse proxy set tokens). With tokens set, the call needs `Authorization: Bearer
//! <token>`, or `?token=` on the SSE paths (EventSource cannot send headers). Mutating calls
//! (anything but GET/HEAD/OPTIONS) also need `Origin`, else `Referer`, when present, to name
//! the host the request was sent to: a page on another site cannot drive roost through a
//! browser that happens to be on the same machine.
//!
//! Datasets and experiments (`/api/v1/datasets…`, `/api/v1/experiments…`,
//! `ExperimentService`) serve accounts too: a bearer of an account key's form
//! (`rsk_…`) is let through to the core there, which checks the key and acts as that
//! account (its own datasets, experiments and agents only); any other caller meets the
//! dashboard's rules and acts as the operator.
//!
//! Hosted process runtimes send their OTLP telemetry back to roost with their own agent
//! token (`rat_…`, never a dashboard token): on the OTLP paths a bearer of that form is let
//! through to the core, which checks it and attributes what it carries to that agent
//! (an unknown one is 401 there).
//!
//! `Host` is checked before anything else ([`crate::hosts`]): on every route but `/healthz`
//! while loopback callers are trusted (no `SERVICE_API_TOKENS`), and on `/mcp` always (as
//! rmcp's own check did), so a page that rebinds its DNS name to 127.0.0.1 gets 403
//! `bad_host` instead of the dashboard.
//!
//! This module is the policy only, below the pages (which ask it, and whose sign-in cookie
//! it reads from [`crate::cookies`]). The middleware applying it, which answers refused page
//! visits with pages, is `access_layer::enforce`, above both.

use std::{net::SocketAddr, sync::Arc};

use http::{HeaderMap, Method, header};
use roost_proto::{ApiError, ErrorReason};

use roost_kit::{
    agent_tokens::{AGENT_TOKEN_PREFIX, AgentTokenCheck},
    hosts::HostAllowList,
};

use crate::cookies;

/// The dashboard's sign-in form (open: it is where refused page visitors are sent).
pub const SIGN_IN_PATH: &str = "/dashboard/signin";

/// The SSE paths, where a token may also come as `?token=`.
pub const STREAM_PATHS: [&str; 3] = ["/api/brain-stream", "/api/health-stream", "/api/logs"];

/// Who may call the dashboard.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    /// `SERVICE_API_TOKENS`: when non-empty, dashboard calls need one of them.
    pub api_tokens: Vec<String>,
    /// The `Host` names roost answers to (the DNS-rebinding guard).
    pub hosts: HostAllowList,
    /// The runtimes' agent tokens, accepted on the OTLP paths (none: no agent token is).
    pub agent_tokens: Option<Arc<dyn AgentTokenCheck>>,
}

/// How a path is guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Anyone.
    Open,
    /// The core checks an account key or node token itself.
    OwnKeys,
    /// A dashboard call: token or loopback, and the origin check when mutating.
    Dashboard,
    /// A dashboard page: the dashboard's rules, with the sign-in cookie also taken as the
    /// token; a refused visitor is sent to the sign-in form instead of getting JSON.
    Page,
    /// A web-app page: the page checks the user's session; mutating requests must come
    /// from this site.
    App,
}

/// The web app's pages (besides `/`): exact paths, then prefixes.
const APP_PATHS: [&str; 6] = ["/login", "/signup", "/logout", "/developers", "/billing", "/instances"];
const APP_PREFIXES: [&str; 4] = ["/invite/", "/developers/", "/billing/", "/instances/"];

/// The guard of a request path.
pub fn guard(path: &str) -> Guard {
    const OPEN: [&str; 8] = [
        "/healthz",
        "/skill.md",
        "/openapi.json",
        "/docs",
        "/api/runtimes",
        "/favicon.ico",
        SIGN_IN_PATH,
        "/api/billing/stripe/webhook",
    ];
    // `/telegram/{id}`: Telegram's webhook deliveries, checked by the core against the
    // agent's webhook secret.
    const OPEN_PREFIXES: [&str; 4] = ["/grpc.health.v1.", "/grpc.reflection.", "/static/", "/telegram/"];
    const OWN_KEYS: [&str; 2] = ["/api/provision", "/mcp"];
    // `/llm/`: the model gateway checks hosted agents' own tokens.
    const OWN_KEYS_PREFIXES: [&str; 11] = [
        "/llm/",
        "/api/instances",
        "/api/account",
        "/mcp/",
        "/ingest/",
        "/roost.v1.AgentService/",
        "/roost.v1.AccountService/",
        "/roost.v1.WebAppService/",
        "/roost.v1.BillingService/",
        "/roost.v1.IngestService/Heartbeat",
        "/roost.v1.IngestService/PushBatch",
    ];
    if OPEN.contains(&path) || OPEN_PREFIXES.iter().any(|p| path.starts_with(p)) {
        Guard::Open
    } else if OWN_KEYS.contains(&path) || OWN_KEYS_PREFIXES.iter().any(|p| path.starts_with(p)) {
        Guard::OwnKeys
    } else if path == "/" || APP_PATHS.contains(&path) || APP_PREFIXES.iter().any(|p| path.starts_with(p)) {
        Guard::App
    } else if path == "/dashboard" || path.starts_with("/dashboard/") {
        Guard::Page
    } else {
        Guard::Dashboard
    }
}

/// Whether a request would also be served as a dashboard read. The MCP endpoint takes
/// account keys, but its query tools read the observed store, which is the operator's: they
/// answer only callers the dashboard would answer (a loopback peer while no
/// `SERVICE_API_TOKENS` are set, or a dashboard token as the bearer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DashboardAccess {
    /// Not a dashboard caller.
    Denied,
    /// A loopback peer, and no tokens are configured.
    Loopback,
    /// The bearer is a dashboard token.
    Token,
}

/// Whether `path` serves accounts as well as the dashboard: datasets and experiments.
fn is_shared_with_accounts(path: &str) -> bool {
    ["/api/v1/datasets", "/api/v1/experiments"].iter().any(|p| path == *p || path.starts_with(&format!("{p}/")))
        || path.starts_with("/roost.v1.ExperimentService/")
}

/// Whether `path` takes OTLP ingest (HTTP or gRPC).
fn is_otlp(path: &str) -> bool {
    matches!(path, "/v1/traces" | "/v1/metrics" | "/v1/logs") || path.starts_with("/opentelemetry.proto.collector.")
}

impl AccessPolicy {
    /// An OTLP export presenting a live agent token: the core attributes what it carries to
    /// that agent.
    fn is_agent_ingest(&self, path: &str, presented: Option<&str>) -> bool {
        is_otlp(path)
            && presented.is_some_and(|token| {
                token.starts_with(AGENT_TOKEN_PREFIX) && self.agent_tokens.as_ref().is_some_and(|t| t.is_live(token))
            })
    }

    /// Checks a request; `Err` is the refusal to send.
    pub fn check(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        peer: Option<SocketAddr>,
    ) -> Result<(), ApiError> {
        self.check_host(path, headers)?;
        let guard = guard(path);
        let reads = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if guard == Guard::App && !reads {
            return check_same_site(headers);
        }
        if !matches!(guard, Guard::Dashboard | Guard::Page) {
            return Ok(());
        }
        // The sign-in cookie stands for the token on pages (whose forms carry a CSRF
        // field) and on dashboard reads (the streams and JSON a page's script fetches);
        // never on a mutating API call, which has no CSRF defence of its own.
        let cookie = (guard == Guard::Page || reads).then(|| cookies::get(headers, cookies::TOKEN)).flatten();
        let presented = bearer(headers)
            .or_else(|| STREAM_PATHS.contains(&path).then(|| query.and_then(token_param)).flatten())
            .or(cookie);
        if is_shared_with_accounts(path)
            && bearer(headers).is_some_and(|key| key.starts_with(roost_kit::ACCOUNT_KEY_PREFIX))
        {
            // The core checks the key and acts as its account.
            return Ok(());
        }
        if self.api_tokens.is_empty() {
            let loopback = peer.is_some_and(|p| p.ip().to_canonical().is_loopback());
            if !loopback && !self.is_agent_ingest(path, presented) {
                return Err(ApiError::unauthenticated(
                    "the dashboard API answers loopback clients only; set SERVICE_API_TOKENS to allow others",
                ));
            }
        } else {
            if !self.is_agent_ingest(path, presented) && !matches(presented, self.api_tokens.iter()) {
                let why = if presented.is_some() { "wrong token" } else { "missing token" };
                let how = if STREAM_PATHS.contains(&path) {
                    "Authorization: Bearer <token> or ?token=<token>"
                } else {
                    "Authorization: Bearer <token>"
                };
                return Err(ApiError::unauthenticated(format!("{why}: dashboard calls need {how}")));
            }
        }
        if !reads {
            check_origin(headers)?;
        }
        Ok(())
    }
}

impl AccessPolicy {
    /// Refuses a `Host` roost does not answer to, where the rebinding guard applies: every
    /// route but `/healthz` while loopback callers are trusted, `/mcp` always.
    fn check_host(&self, path: &str, headers: &HeaderMap) -> Result<(), ApiError> {
        let mcp = path == "/mcp" || path.starts_with("/mcp/");
        if !(mcp || self.api_tokens.is_empty()) || path == "/healthz" {
            return Ok(());
        }
        let Some(host) = headers.get(header::HOST) else { return Ok(()) };
        let host = host.to_str().unwrap_or("(not text)");
        if self.hosts.allows(host) {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorReason::BadHost,
            format!(
                "roost does not answer to the host {host} (a guard against DNS rebinding); if that is roost's name, \
                 start it with --allowed-hosts {name}",
                name = roost_kit::hosts::hostname(host)
            ),
        ))
    }

    /// How the dashboard would see this caller (see [`DashboardAccess`]).
    pub fn dashboard_access(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> DashboardAccess {
        if self.api_tokens.is_empty() {
            let loopback = peer.is_some_and(|p| p.ip().to_canonical().is_loopback());
            return if loopback { DashboardAccess::Loopback } else { DashboardAccess::Denied };
        }
        if matches(bearer(headers), self.api_tokens.iter()) { DashboardAccess::Token } else { DashboardAccess::Denied }
    }
}

/// The `Authorization: Bearer` token, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// `token=` of a query string, taken as is: tokens should be URL-safe.
fn token_param(query: &str) -> Option<&str> {
    query.split('&').find_map(|pair| pair.strip_prefix("token="))
}

/// Whether `presented` is one of `tokens`, comparing in constant time per token.
fn matches<'a>(presented: Option<&str>, tokens: impl Iterator<Item = &'a String>) -> bool {
    let Some(presented) = presented else { return false };
    let mut found = false;
    for token in tokens {
        found |= constant_time_eq(presented.as_bytes(), token.as_bytes());
    }
    found
}

/// Compares in time that depends on the length only (tokens, CSRF values).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Origin` (else `Referer`), when present, must name the host the request was sent to.
pub(crate) fn check_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let source = headers
        .get(header::ORIGIN)
        .map(|v| ("Origin", v))
        .or_else(|| headers.get(header::REFERER).map(|v| ("Referer", v)));
    let Some((name, value)) = source else { return Ok(()) };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let origin_host = value.to_str().ok().and_then(authority);
    if host.is_empty() || origin_host.is_none_or(|o| !o.eq_ignore_ascii_case(host)) {
        return Err(ApiError::new(
            ErrorReason::CrossOrigin,
            format!("{name} {} does not match the host {host}", value.to_str().unwrap_or("(not text)")),
        ));
    }
    Ok(())
}

/// A web-app form post must come from this site: `Sec-Fetch-Site` (sent by every current
/// browser) may not say `cross-site` or `same-site` (a sibling subdomain), and `Origin`
/// or `Referer`, when present, must name this host ([`check_origin`]).
pub(crate) fn check_same_site(headers: &HeaderMap) -> Result<(), ApiError> {
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).unwrap_or("");
    if matches!(fetch_site, "cross-site" | "same-site") {
        return Err(ApiError::new(
            ErrorReason::CrossOrigin,
            format!("a form on another site (Sec-Fetch-Site: {fetch_site}) cannot post here"),
        ));
    }
    check_origin(headers)
}

/// The `host[:port]` of an absolute URL.
fn authority(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|a| !a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one live agent token of these tests.
    #[derive(Debug)]
    struct OneToken;

    impl AgentTokenCheck for OneToken {
        fn is_live(&self, token: &str) -> bool {
            token == "rat_x"
        }
    }

    fn policy(tokens: &[&str]) -> AccessPolicy {
        AccessPolicy {
            api_tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            hosts: HostAllowList::default(),
            agent_tokens: Some(Arc::new(OneToken)),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    const LOCAL: Option<SocketAddr> = Some(SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5));
    const REMOTE: Option<SocketAddr> =
        Some(SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 9)), 5));

    #[test]
    fn paths_are_classified_deny_by_default() {
        assert_eq!(guard("/healthz"), Guard::Open);
        assert_eq!(guard("/telegram/ins_abc"), Guard::Open);
        assert_eq!(guard("/api/instances/abc/pause"), Guard::OwnKeys);
        assert_eq!(guard("/roost.v1.IngestService/PushBatch"), Guard::OwnKeys);
        assert_eq!(guard("/roost.v1.IngestService/CreateRun"), Guard::Dashboard);
        assert_eq!(guard("/api/local/query"), Guard::Dashboard);
        assert_eq!(guard("/something/new"), Guard::Dashboard);
    }

    #[test]
    fn without_tokens_only_loopback_is_served() {
        let p = policy(&[]);
        assert!(p.check(&Method::GET, "/api/usage", None, &HeaderMap::new(), LOCAL).is_ok());
        let mapped = Some("[::ffff:127.0.0.1]:5".parse().unwrap());
        assert!(p.check(&Method::GET, "/api/usage", None, &HeaderMap::new(), mapped).is_ok());
        let err = p.check(&Method::GET, "/api/usage", None, &HeaderMap::new(), REMOTE).unwrap_err();
        assert_eq!(err.reason(), ErrorReason::Unauthenticated);
        assert!(p.check(&Method::GET, "/api/instances", None, &HeaderMap::new(), REMOTE).is_ok());
        // An agent token passes on OTLP paths only (the core checks it).
        let rt = headers(&[("authorization", "Bearer rat_x")]);
        assert!(p.check(&Method::POST, "/v1/traces", None, &rt, REMOTE).is_ok());
        assert!(p.check(&Method::POST, "/api/local/query", None, &rt, REMOTE).is_err());
        // A made-up one is refused before the body is read.
        let made_up = headers(&[("authorization", "Bearer rat_made_up")]);
        assert!(p.check(&Method::POST, "/v1/traces", None, &made_up, REMOTE).is_err());
    }

    #[test]
    fn with_tokens_every_dashboard_call_needs_one() {
        let p = policy(&["a", "b"]);
        let good = headers(&[("authorization", "Bearer b")]);
        let bad = headers(&[("authorization", "Bearer c")]);
        assert!(p.check(&Method::GET, "/api/usage", None, &good, REMOTE).is_ok());
        assert!(p.check(&Method::GET, "/api/usage", None, &HeaderMap::new(), LOCAL).is_err());
        assert!(p.check(&Method::GET, "/api/usage", None, &bad, LOCAL).is_err());
        assert!(p.check(&Method::GET, "/api/logs", Some("level=warn&token=a"), &HeaderMap::new(), REMOTE).is_ok());
        assert!(p.check(&Method::GET, "/api/usage", Some("token=a"), &HeaderMap::new(), REMOTE).is_err());
        assert!(
            p.check(&Method::POST, "/v1/logs", None, &headers(&[("authorization", "Bearer rat_x")]), REMOTE).is_ok()
        );
        assert!(
            p.check(&Method::GET, "/api/usage", None, &headers(&[("authorization", "Bearer rat_x")]), REMOTE).is_err()
        );
    }

    #[test]
    fn mutating_calls_need_a_matching_origin_when_one_is_sent() {
        let p = policy(&[]);
        let same = headers(&[("host", "127.0.0.1:8900"), ("origin", "http://127.0.0.1:8900")]);
        let referer = headers(&[("host", "127.0.0.1:8900"), ("referer", "http://127.0.0.1:8900/usage?x=1")]);
        let foreign = headers(&[("host", "127.0.0.1:8900"), ("origin", "https://evil.example")]);
        let null = headers(&[("host", "127.0.0.1:8900"), ("origin", "null")]);
        assert!(p.check(&Method::POST, "/api/alerts", None, &same, LOCAL).is_ok());
        assert!(p.check(&Method::POST, "/api/alerts", None, &referer, LOCAL).is_ok());
        assert!(p.check(&Method::POST, "/api/alerts", None, &headers(&[("host", "localhost")]), LOCAL).is_ok());
        for refused in [&foreign, &null] {
            let err = p.check(&Method::POST, "/api/alerts", None, refused, LOCAL).unwrap_err();
            assert_eq!(err.reason(), ErrorReason::CrossOrigin);
        }
        // Reads are not origin-checked.
        assert!(p.check(&Method::GET, "/api/alerts", None, &foreign, LOCAL).is_ok());
    }

    #[test]
    fn account_keys_reach_datasets_and_experiments_only() {
        let key = headers(&[("host", "roost.example"), ("authorization", "Bearer rsk_account_key")]);
        for path in ["/api/v1/datasets", "/api/v1/experiments/ex_1/cancel", "/roost.v1.ExperimentService/ListDatasets"]
        {
            assert!(policy(&["a"]).check(&Method::POST, path, None, &key, REMOTE).is_ok(), "{path}");
        }
        for path in ["/api/v1/evaluators", "/api/v1/datasetsx", "/api/local/query", "/roost.v1.EvaluatorService/x"] {
            let err = policy(&["a"]).check(&Method::POST, path, None, &key, REMOTE).unwrap_err();
            assert_eq!(err.reason(), ErrorReason::Unauthenticated, "{path}");
        }
        // Without a key of that form, the dashboard's rules apply there too.
        let none = headers(&[("host", "roost.example")]);
        assert!(policy(&["a"]).check(&Method::GET, "/api/v1/datasets", None, &none, REMOTE).is_err());
    }

    #[test]
    fn hosts_are_checked_while_loopback_is_trusted_and_on_mcp_always() {
        let rebound = headers(&[("host", "rebind.attacker.example:8900")]);
        for path in ["/api/usage", "/dashboard", "/api/instances", "/", "/mcp"] {
            let err = policy(&[]).check(&Method::GET, path, None, &rebound, LOCAL).unwrap_err();
            assert_eq!(err.reason(), ErrorReason::BadHost, "{path}");
        }
        assert!(policy(&[]).check(&Method::GET, "/healthz", None, &rebound, LOCAL).is_ok());
        let with_token = headers(&[("host", "rebind.attacker.example"), ("authorization", "Bearer a")]);
        assert!(policy(&["a"]).check(&Method::GET, "/api/usage", None, &with_token, REMOTE).is_ok());
        let err = policy(&["a"]).check(&Method::POST, "/mcp", None, &with_token, REMOTE).unwrap_err();
        assert_eq!(err.reason(), ErrorReason::BadHost);
    }

    #[test]
    fn dashboard_access_follows_the_dashboard_rules() {
        let open = policy(&[]);
        assert_eq!(open.dashboard_access(&HeaderMap::new(), LOCAL), DashboardAccess::Loopback);
        assert_eq!(open.dashboard_access(&HeaderMap::new(), REMOTE), DashboardAccess::Denied);
        let closed = policy(&["a"]);
        let token = headers(&[("authorization", "Bearer a")]);
        let key = headers(&[("authorization", "Bearer rk_account_key")]);
        assert_eq!(closed.dashboard_access(&token, REMOTE), DashboardAccess::Token);
        assert_eq!(closed.dashboard_access(&key, LOCAL), DashboardAccess::Denied);
    }
}
