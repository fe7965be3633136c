//! What every page shares: the chrome around its content (navigation, the "backed by"
//! footer, asset URLs, the CSRF field), the request context a page handler gets, and the
//! headers every HTML answer carries (a strict CSP among them).

use std::{future::Future, time::Duration};

use askama::Template;
use axum::{
    extract::{FromRequestParts, Request},
    middleware::Next,
    response::{IntoResponse, Response},
};
use http::{HeaderMap, HeaderValue, StatusCode, header, request::Parts};
use roost_proto::ApiError;

use super::assets;
use crate::{Call, Core, cookies};

/// Every asset a template links (checked by a unit test against the embedded files).
pub const ASSETS: &[&str] =
    &["roost.css", "roost.js", "favicon.svg", "vendor/uplot/uPlot.iife.min.js", "vendor/uplot/uPlot.min.css"];

/// The Content-Security-Policy of every page: our own scripts, styles and connections
/// only; no inline script or style, no eval, no framing, forms post back to roost only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                       base-uri 'none'";

/// Adds the security headers to every answer of the page routes.
pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    // A page that posts to another site (billing, to Stripe Checkout) sets its own.
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// One entry of the navigation.
#[derive(Debug, Clone, Copy)]
pub struct NavItem {
    /// The page's path.
    pub href: &'static str,
    /// Its label.
    pub label: &'static str,
}

/// The dashboard's navigation, in order.
pub const NAV: &[NavItem] = &[
    NavItem { href: "/dashboard", label: "Overview" },
    NavItem { href: "/dashboard/sessions", label: "Sessions" },
    NavItem { href: "/dashboard/traces", label: "Traces" },
    NavItem { href: "/dashboard/live", label: "Live" },
    NavItem { href: "/dashboard/logs", label: "Logs" },
    NavItem { href: "/dashboard/usage", label: "Usage" },
    NavItem { href: "/dashboard/alerts", label: "Alerts" },
    NavItem { href: "/dashboard/guard", label: "Guard" },
    NavItem { href: "/dashboard/evaluators", label: "Evaluators" },
    NavItem { href: "/dashboard/datasets", label: "Datasets" },
    NavItem { href: "/dashboard/crons", label: "Crons" },
    NavItem { href: "/dashboard/channels", label: "Channels" },
    NavItem { href: "/dashboard/skills", label: "Skills" },
    NavItem { href: "/dashboard/health", label: "Health" },
    NavItem { href: "/dashboard/updates", label: "Updates" },
];

/// The web app's navigation, for a signed-in user.
pub const APP_NAV: &[NavItem] = &[
    NavItem { href: "/", label: "Agents" },
    NavItem { href: "/developers", label: "Developers" },
    NavItem { href: "/billing", label: "Billing" },
];

/// The frame of a page, read by `base.html`.
#[derive(Debug, Clone)]
pub struct Chrome {
    /// The document title (before " · roost").
    pub title: String,
    /// The nav entry to mark current (its href).
    pub current: &'static str,
    /// The API calls that backed the page, for its footer.
    pub backed_by: Vec<String>,
    /// The value of every form's hidden `csrf` field.
    pub csrf: String,
    /// The path and query of this page (for retry links and redirects back).
    pub here: String,
    /// Whether the visitor signed in with a token cookie (shows "Sign out").
    pub signed_in: bool,
    /// A one-line notice after a form post (`?done=`), shown above the content.
    pub notice: Option<String>,
    /// The signed-in web-app user's email: the page is the web app's (its navigation, and
    /// "Sign out" ends the user's session).
    pub user: Option<String>,
    /// A web-app page for someone not signed in (sign-in, sign-up, invite): no navigation.
    pub visitor: bool,
}

impl Chrome {
    /// The navigation: the web app's for a signed-in user's page, else the dashboard's.
    pub fn nav(&self) -> &'static [NavItem] {
        match (self.visitor, self.user.is_some()) {
            (true, _) => &[],
            (false, true) => APP_NAV,
            (false, false) => NAV,
        }
    }

    /// Where the brand links.
    pub fn home(&self) -> &'static str {
        if self.user.is_some() || self.visitor { "/" } else { "/dashboard" }
    }

    /// The chrome of a web-app page for someone not signed in.
    pub fn for_visitor(mut self) -> Self {
        self.visitor = true;
        self
    }

    /// The chrome of a signed-in user's page. Account holders see no "Backed by" footer:
    /// the API calls behind a page are for operators reading the dashboard, where they
    /// say which call to make to get the same data; to an account holder they are noise.
    pub fn for_user(mut self, email: &str) -> Self {
        self.user = Some(email.to_owned());
        self.backed_by.clear();
        self
    }

    /// The hashed URL of an embedded asset.
    pub fn asset(&self, name: &str) -> String {
        assets::url(name)
    }
}

/// What a page handler gets: the call to forward to the core (headers, peer address), the
/// CSRF value for its forms, and where it is.
#[derive(Debug, Clone)]
pub struct PageCall {
    call: Call,
    csrf: String,
    /// True when `csrf` is new and must be set as a cookie with the answer.
    fresh_csrf: bool,
    /// Cookies set with the answer get `Secure` (https, or an https `--public-url`).
    secure_cookies: bool,
    here: String,
    signed_in: bool,
    notice: Option<String>,
    /// Whether the visitor may read the operator's dashboard.
    reads_dashboard: bool,
    /// The API calls made so far, for the footer.
    backed_by: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The web-app user the page is for, once [`PageCall::for_user`] said so: its chrome is
    /// the web app's from then on, error pages included.
    user: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// The page of this site the visitor came from (its path and query), from a same-origin
    /// `Referer`: where an error page's "Go back" leads.
    came_from: Option<String>,
}

impl FromRequestParts<Core> for PageCall {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, core: &Core) -> Result<Self, Self::Rejection> {
        // A visitor with a session or sign-in cookie has a CSRF value bound to them; others
        // the double-submit cookie (see `cookies`).
        let session = cookies::get(&parts.headers, cookies::SESSION);
        let token = cookies::get(&parts.headers, cookies::TOKEN);
        let existing = cookies::get(&parts.headers, cookies::CSRF).filter(|v| cookies::is_csrf_shaped(v));
        let (csrf, fresh_csrf) = match (session, token, existing) {
            (None, None, Some(value)) => (value.to_owned(), false),
            (None, None, None) => (cookies::new_csrf(), true),
            (session, token, _) => (cookies::bound_csrf(session, token), false),
        };
        let secure_cookies = core.options.secure_cookies || cookies::is_https(&parts.headers);
        let here = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());
        let came_from = same_site_referer(&parts.headers);
        let notice = parts
            .uri
            .query()
            .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("done=")))
            .map(|v| percent_decode(v).chars().take(200).collect());
        // Whether this visitor may read the operator's dashboard: pages link there only then.
        let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0);
        let reads_dashboard = core.access.check(&http::Method::GET, "/dashboard", None, &parts.headers, peer).is_ok();
        let mut call = Call::from_parts(parts);
        // The web-app session cookie becomes the core's session metadata here, on page
        // requests only (their forms carry the CSRF field); REST routes never read cookies.
        if let Some(token) = cookies::get(&parts.headers, cookies::SESSION) {
            call = call.with_session(token);
        }
        Ok(Self {
            call,
            csrf,
            fresh_csrf,
            secure_cookies,
            here,
            signed_in: token.is_some(),
            notice,
            reads_dashboard,
            backed_by: Default::default(),
            user: Default::default(),
            came_from,
        })
    }
}

impl PageCall {
    /// Marks the page as the web app's, for the signed-in `email`: every chrome made from
    /// now on (the error page's too) has the app's navigation and no "Backed by" footer.
    pub fn for_user(&self, email: &str) {
        *self.user.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(email.to_owned());
    }

    /// Whether the page is a signed-in web-app user's.
    pub fn is_app(&self) -> bool {
        self.user.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// The page of this site the visitor came from, when the browser said.
    pub fn came_from(&self) -> Option<&str> {
        self.came_from.as_deref()
    }

    /// Whether the visitor may read the operator's dashboard (links to it are shown only
    /// then).
    pub fn reads_dashboard(&self) -> bool {
        self.reads_dashboard
    }

    /// The gRPC request for a core call, carrying this page request's headers and peer.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        self.call.clone().request(message)
    }

    /// Runs a core call, noting `api` (how the same call reads over REST) for the footer.
    /// Errors come back as the error table's [`ApiError`], for the page to show.
    pub async fn load<T>(
        &self,
        api: impl Into<String>,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ApiError> {
        self.load_within(Duration::from_secs(10), api, call).await
    }

    /// [`PageCall::load`] with its own time limit (a chat turn may take up to the turn cap).
    pub async fn load_within<T>(
        &self,
        limit: Duration,
        api: impl Into<String>,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, ApiError> {
        self.note(api);
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(ApiError::from_status(&status)),
            Err(_) => Err(ApiError::new(
                roost_proto::ErrorReason::Unavailable,
                format!("the core did not answer within {} s", limit.as_secs()),
            )),
        }
    }

    /// Notes an API call the page's script makes (a live stream, say) for the footer.
    pub fn note(&self, api: impl Into<String>) {
        if let Ok(mut list) = self.backed_by.lock() {
            list.push(api.into());
        }
    }

    /// The chrome for a page titled `title` under the nav entry `current`.
    pub fn chrome(&self, title: impl Into<String>, current: &'static str) -> Chrome {
        let chrome = Chrome {
            title: title.into(),
            current,
            backed_by: self.backed_by.lock().map(|l| l.clone()).unwrap_or_default(),
            csrf: self.csrf.clone(),
            here: self.here.clone(),
            signed_in: self.signed_in,
            notice: self.notice.clone(),
            user: None,
            visitor: false,
        };
        let user = self.user.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        match user {
            Some(email) => chrome.for_user(&email),
            None => chrome,
        }
    }

    /// Whether cookies set with this answer get `Secure`.
    pub fn secure_cookies(&self) -> bool {
        self.secure_cookies
    }

    /// Whether a posted `csrf` field matches this visitor's CSRF value.
    pub fn csrf_matches(&self, posted: &str) -> bool {
        !self.fresh_csrf && crate::access::constant_time_eq(posted.as_bytes(), self.csrf.as_bytes())
    }

    /// The page as an HTML answer with `status`, setting the CSRF cookie when it is new.
    pub fn render_with(&self, status: StatusCode, page: &impl Template) -> Response {
        let html = match page.render() {
            Ok(html) => html,
            Err(err) => {
                tracing::warn!(error = %err, "rendering a page failed");
                return (StatusCode::INTERNAL_SERVER_ERROR, "the page could not be rendered").into_response();
            }
        };
        let mut response = (status, html).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if self.fresh_csrf {
            cookies::set(headers, cookies::CSRF, &self.csrf, None, self.secure_cookies);
        }
        response
    }

    /// The page as a 200 HTML answer.
    pub fn render(&self, page: &impl Template) -> Response {
        self.render_with(StatusCode::OK, page)
    }

    /// The TCP peer of the request (for the access policy's loopback rule).
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.call.peer()
    }

    /// This page's path and query.
    pub fn here(&self) -> &str {
        &self.here
    }

    /// Where this request came from (its headers), for form handlers.
    pub fn headers(&self) -> &HeaderMap {
        self.call.headers()
    }
}

/// Decodes `%XX` escapes and `+` of a query value (invalid escapes are kept as they are,
/// invalid UTF-8 is replaced).
pub fn percent_decode(value: &str) -> String {
    String::from_utf8_lossy(&crate::uri::percent_decode(value.as_bytes(), true)).into_owned()
}

/// Encodes a value for a URL query (everything but unreserved characters is escaped).
/// The path and query of a `Referer` on this site (same host as the request's `Host`),
/// for a link back; anything else is `None`.
fn same_site_referer(headers: &http::HeaderMap) -> Option<String> {
    let referer = headers.get(header::REFERER)?.to_str().ok()?;
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let rest = referer.strip_prefix("http://").or_else(|| referer.strip_prefix("https://"))?;
    let (authority, path) = rest.split_at(rest.find('/')?);
    (authority.eq_ignore_ascii_case(host) && !path.starts_with("//")).then(|| path.to_owned())
}

pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_round_trip() {
        for value in ["plain", "a b&c=d", "100%", "é/?#", ""] {
            assert_eq!(percent_decode(&percent_encode(value)), value);
        }
        assert_eq!(percent_decode("a+b%2"), "a b%2");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
