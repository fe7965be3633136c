//! `/dashboard/signin` and `/dashboard/signout`: the token gate of the pages.
//!
//! With `SERVICE_API_TOKENS` set, a page visitor without a token is sent here. The form
//! takes a token, checks it against the same list the API checks, and stores it in the
//! HttpOnly, SameSite=Strict `roost_token` cookie ([`crate::cookies`]); then it sends the
//! visitor where they were going (a path on this host only). A wrong token re-renders the
//! form with 401; 10 wrong tokens from one address in 10 minutes close the form to it (429,
//! the web app's brake). Sign-out clears the cookie.

use askama::Template;
use axum::{
    Form, Router,
    extract::{Query, State},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use http::{HeaderMap, StatusCode};
use serde::Deserialize;

use super::layout::{Chrome, PageCall};
use crate::{Core, access::SIGN_IN_PATH, cookies};

pub(super) fn routes() -> Router<Core> {
    Router::new().route(SIGN_IN_PATH, get(form).post(sign_in)).route("/dashboard/signout", post(sign_out))
}

#[derive(Template)]
#[template(path = "signin.html")]
struct SignIn {
    chrome: Chrome,
    next: String,
    error: Option<String>,
    tokens_set: bool,
}

#[derive(Debug, Deserialize)]
struct Next {
    #[serde(default)]
    next: String,
}

async fn form(State(core): State<Core>, page: PageCall, Query(query): Query<Next>) -> Response {
    let page_view = SignIn {
        chrome: page.chrome("Sign in", ""),
        next: safe_next(&query.next).to_owned(),
        error: None,
        tokens_set: !core.access.api_tokens.is_empty(),
    };
    page.render(&page_view)
}

#[derive(Debug, Deserialize)]
struct Posted {
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
    #[serde(default)]
    csrf: String,
}

async fn sign_in(State(core): State<Core>, page: PageCall, headers: HeaderMap, Form(posted): Form<Posted>) -> Response {
    let next = safe_next(&posted.next).to_owned();
    let refuse = |status: StatusCode, error: &str| {
        let view = SignIn {
            chrome: page.chrome("Sign in", ""),
            next: next.clone(),
            error: Some(error.to_owned()),
            tokens_set: !core.access.api_tokens.is_empty(),
        };
        page.render_with(status, &view)
    };
    if let Err(err) = crate::access::check_origin(&headers) {
        return refuse(StatusCode::FORBIDDEN, err.message());
    }
    if !page.csrf_matches(&posted.csrf) {
        return refuse(StatusCode::FORBIDDEN, "The form expired; please sign in again.");
    }
    // Guessing tokens is braked like guessing passwords: 10 failures per address.
    let address = page.peer().map(|p| format!("addr:{}", p.ip().to_canonical()));
    let attempt = match core.token_brake.attempt(address.into_iter().collect()) {
        Ok(attempt) => attempt,
        Err(err) => return refuse(StatusCode::TOO_MANY_REQUESTS, err.message()),
    };
    let token = posted.token.trim();
    let known = core.access.api_tokens.iter().any(|t| crate::access::constant_time_eq(t.as_bytes(), token.as_bytes()));
    if !known || !cookies::is_cookie_safe(token) {
        attempt.failed();
        return refuse(StatusCode::UNAUTHORIZED, "That token is not one of this roost's SERVICE_API_TOKENS.");
    }
    attempt.succeeded(None);
    let mut response = Redirect::to(&next).into_response();
    cookies::set(
        response.headers_mut(),
        cookies::TOKEN,
        token,
        Some(cookies::TOKEN_MAX_AGE_SECS),
        page.secure_cookies(),
    );
    response
}

#[derive(Debug, Deserialize)]
struct SignOut {
    #[serde(default)]
    csrf: String,
}

async fn sign_out(page: PageCall, Form(posted): Form<SignOut>) -> Response {
    if !page.csrf_matches(&posted.csrf) {
        return (StatusCode::FORBIDDEN, "the form expired; reload the page and try again").into_response();
    }
    let mut response = Redirect::to(SIGN_IN_PATH).into_response();
    cookies::set(response.headers_mut(), cookies::TOKEN, "", Some(0), page.secure_cookies());
    response
}

/// Where to go after signing in: a path on this site, else the dashboard.
fn safe_next(next: &str) -> &str {
    super::redirects::local_next(next, &[SIGN_IN_PATH], "/dashboard")
}
