//! The access policy as the middleware in front of every route: each request is checked
//! against [`AccessPolicy`], and a refusal is answered in the caller's terms: a gRPC status
//! for gRPC calls, the sign-in form or an HTML message for page visits, the error table's
//! JSON for the rest.
//!
//! It sits above both the policy ([`crate::access`]) and the pages ([`crate::pages`]), and
//! is kept apart from the policy for that reason: the pages use the policy (the sign-in
//! form's token check, the home page asking whether a visitor may see the dashboard), so
//! the policy cannot render its refusals through the pages itself.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    body::Body,
    extract::{ConnectInfo, Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};
use http::{HeaderMap, header};

use crate::{
    HttpError,
    access::{AccessPolicy, Guard, guard},
    pages,
};

/// The middleware: refuses what the policy refuses, with the error table's status and
/// `{"error", "code"}` body, or a gRPC status for gRPC calls.
pub async fn enforce(State(policy): State<Arc<AccessPolicy>>, request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let uri = request.uri();
    // HTTP/2 requests carry the host in the URI's authority, not a Host header.
    let mut headers = request.headers().clone();
    if !headers.contains_key(header::HOST)
        && let Some(authority) = uri.authority().and_then(|a| http::HeaderValue::from_str(a.as_str()).ok())
    {
        headers.insert(header::HOST, authority);
    }
    match policy.check(request.method(), uri.path(), uri.query(), &headers, peer) {
        Ok(()) if uri.path() == "/mcp" || uri.path().starts_with("/mcp/") => {
            let access = policy.dashboard_access(&headers, peer);
            let mut request = request;
            request.extensions_mut().insert(access);
            next.run(request).await
        }
        Ok(()) => next.run(request).await,
        Err(err) if is_grpc(&headers) => err.to_status().into_http::<Body>().into_response(),
        Err(err) if guard(uri.path()) == Guard::Page => pages::refused(&policy, &err, uri),
        Err(err) if guard(uri.path()) == Guard::App => pages::refused_form(&err),
        Err(err) => HttpError(err).into_response(),
    }
}

fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| ct.starts_with("application/grpc"))
}
