//! The dashboard's pages: server-rendered HTML over the same core service traits as REST
//! (docs/architecture.md#pages). Nothing here touches the store; a page is a few core calls and
//! a template, and its footer names those calls as REST would make them.
//!
//! Pages work read-only with JavaScript off. Our own small script (`web/static/roost.js`)
//! adds local times, the live feeds (EventSource) and the usage charts (vendored uPlot).
//! All view state is in the URL (filters, paging, the selected span), so every view is a
//! deep link. Forms post to the page's own path, are checked for CSRF
//! ([`crate::cookies`]) and origin (the access policy), and redirect back (post/redirect/get)
//! with a one-line notice, or re-render with the error.
//!
//! Module per page group; templates in `gateway/web/templates/`, assets in
//! `gateway/web/static/` (embedded, hashed URLs: [`assets`]).

mod app;
mod assets;
mod docs;
mod features;
mod feedback;
mod format;
pub mod forms;
pub mod layout;
mod listing;
mod live;
mod markdown;
mod overview;
mod query;
mod redirects;
mod search;
mod sessions;
mod signin;
mod traces;
mod updates;
mod usage;

use askama::Template;
use axum::{
    Router,
    response::{IntoResponse, Redirect, Response},
    routing::get,
};
use http::{StatusCode, Uri};
use roost_proto::{ApiError, ErrorReason};
use tower_http::compression::CompressionLayer;

use crate::{AccessPolicy, Core, access::SIGN_IN_PATH};
use layout::{Chrome, PageCall, percent_encode};

pub use format::*;

/// Every page route, with the security headers and gzip on HTML.
pub(crate) fn router() -> Router<Core> {
    Router::new()
        .route("/", get(app::home::home))
        // A trailing slash (typed, or from a proxy's prefix) still lands on the overview.
        .route("/dashboard/", get(|| async { Redirect::permanent("/dashboard") }))
        .route("/dashboard/{*rest}", get(not_found))
        .route("/static/{*path}", get(assets::serve))
        .route("/favicon.ico", get(assets::favicon))
        .merge(overview::routes())
        .merge(signin::routes())
        .merge(docs::routes())
        .merge(sessions::routes())
        .merge(traces::routes())
        .merge(feedback::routes())
        .merge(live::routes())
        .merge(usage::routes())
        .merge(features::routes())
        .merge(updates::routes())
        .merge(app::routes())
        .layer(axum::middleware::from_fn(layout::security_headers))
        .layer(CompressionLayer::new().gzip(true))
}

/// A page's answer to a visitor the access policy refused: with dashboard tokens set, the
/// sign-in form (a 303 there, remembering where they were going); without, a page saying
/// the dashboard answers loopback visitors only and how to open it to others.
pub(crate) fn refused(policy: &AccessPolicy, err: &ApiError, uri: &Uri) -> Response {
    if err.reason() == ErrorReason::Unauthenticated && !policy.api_tokens.is_empty() {
        let next = uri.path_and_query().map_or("/", |pq| pq.as_str());
        return Redirect::to(&format!("{SIGN_IN_PATH}?next={}", percent_encode(next))).into_response();
    }
    not_allowed(err, "This dashboard is not open to you", err.message().to_owned())
}

/// A web-app form post the access policy refused (from another site): an HTML page with
/// the error table's status; nothing changed.
pub(crate) fn refused_form(err: &ApiError) -> Response {
    not_allowed(err, "Nothing was changed", format!("{} ({})", err.message(), err.reason().code()))
}

/// A refusal made outside a page handler, as an HTML message with the error's status.
fn not_allowed(err: &ApiError, heading: &str, detail: String) -> Response {
    let page = Message { chrome: bare_chrome("Not allowed"), heading: heading.into(), detail, back: None };
    let mut response = (err.reason().http_status(), page.render().unwrap_or_default()).into_response();
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/html; charset=utf-8"));
    response
}

/// `/dashboard/…` paths no page takes: an HTML 404 that links back to the overview.
async fn not_found(page: PageCall, uri: Uri) -> Response {
    let message = Message {
        chrome: page.chrome("Not found", ""),
        heading: "No such page".into(),
        detail: format!("roost has no page at {}. The navigation above lists every page.", uri.path()),
        back: Some(("/dashboard".to_owned(), "The overview".to_owned())),
    };
    page.render_with(StatusCode::NOT_FOUND, &message)
}

/// A page that is only a message (refusals, unknown pages).
#[derive(Template)]
#[template(path = "message.html")]
pub(crate) struct Message {
    chrome: Chrome,
    heading: String,
    detail: String,
    /// A link onwards: where and what it says.
    back: Option<(String, String)>,
}

/// Chrome for answers made outside a page handler (no CSRF field, no footer).
fn bare_chrome(title: &str) -> Chrome {
    Chrome {
        title: title.into(),
        current: "",
        backed_by: Vec::new(),
        csrf: String::new(),
        here: "/".into(),
        signed_in: false,
        notice: None,
        user: None,
        visitor: false,
    }
}
