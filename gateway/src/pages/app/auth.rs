//! `/login`, `/signup`, `/logout` and `/invite/{token}`: how a person gets a session.
//!
//! Forms use the field names `email` and `password`. A failed sign-in re-renders `/login`
//! with one message whatever the cause (the core answers every cause alike, in the same
//! time); too many failures re-render it with 429. Success sets the session cookie
//! ([`cookies::set_session`]) and sends the visitor on to `next` (a path on this host).

use askama::Template;
use axum::{
    Router,
    extract::{Path, Query, State},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use http::StatusCode;
use roost_proto::{
    ApiError, ErrorReason,
    v1::{AcceptInviteRequest, GetInviteRequest, GetSettingsRequest, SignInRequest, SignOutRequest, SignUpRequest},
};
use serde::Deserialize;

use super::{Button, safe_next};
use crate::{
    Core, cookies,
    pages::{
        When,
        forms::{Posted, csrf_field},
        layout::{Chrome, PageCall},
    },
};

pub(super) fn routes() -> Router<Core> {
    Router::new()
        .route("/login", get(login_form).post(login))
        .route("/signup", get(signup_form).post(signup))
        .route("/logout", post(logout))
        .route("/invite/{token}", get(invite_form).post(accept_invite))
}

/// The one message of a refused sign-in.
const REFUSED: &str = "That email and password do not match a user of this roost.";

#[derive(Template)]
#[template(path = "app_login.html")]
struct Login {
    chrome: Chrome,
    next: String,
    email: String,
    error: Option<String>,
    signup_open: bool,
}

#[derive(Template)]
#[template(path = "app_signup.html")]
struct SignUp {
    chrome: Chrome,
    open: bool,
    email: String,
    account_name: String,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "app_invite.html")]
struct Invite {
    chrome: Chrome,
    token: String,
    invite: Result<InviteView, String>,
    error: Option<String>,
}

struct InviteView {
    email: String,
    account_name: String,
    expires: When,
}

#[derive(Debug, Deserialize)]
struct Next {
    #[serde(default)]
    next: String,
}

#[derive(Debug, Deserialize)]
struct Credentials {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, Deserialize)]
struct NewUser {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    account_name: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, Deserialize)]
struct Password {
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
}

csrf_field!(Credentials, NewUser, Password);

async fn signup_open(core: &Core, page: &PageCall) -> bool {
    page.load("WebAppService/GetSettings", core.webapp.get_settings(page.request(GetSettingsRequest {})))
        .await
        .is_ok_and(|s| s.signup_open)
}

async fn login_form(State(core): State<Core>, page: PageCall, Query(query): Query<Next>) -> Response {
    let view = Login {
        chrome: page.chrome("Sign in", "").for_visitor(),
        next: safe_next(&query.next).to_owned(),
        email: String::new(),
        error: None,
        signup_open: signup_open(&core, &page).await,
    };
    page.render(&view)
}

async fn login(State(core): State<Core>, Posted(page, form): Posted<Credentials>) -> Response {
    let req = SignInRequest { email: form.email.clone(), password: form.password };
    match page.load("WebAppService/SignIn", core.webapp.sign_in(page.request(req))).await {
        Ok(session) => signed_in_to(&page, safe_next(&form.next), &session.session_token),
        Err(err) => {
            let (status, message) = match err.reason() {
                ErrorReason::RateLimited => (StatusCode::TOO_MANY_REQUESTS, err.message().to_owned()),
                ErrorReason::Unauthenticated => (StatusCode::UNAUTHORIZED, REFUSED.to_owned()),
                _ => (err.reason().http_status(), err.message().to_owned()),
            };
            let view = Login {
                chrome: page.chrome("Sign in", "").for_visitor(),
                next: safe_next(&form.next).to_owned(),
                email: form.email,
                error: Some(message),
                signup_open: signup_open(&core, &page).await,
            };
            page.render_with(status, &view)
        }
    }
}

async fn signup_form(State(core): State<Core>, page: PageCall) -> Response {
    let open = signup_open(&core, &page).await;
    let view = SignUp {
        chrome: page.chrome("Create an account", "").for_visitor(),
        open,
        email: String::new(),
        account_name: String::new(),
        error: None,
    };
    page.render_with(if open { StatusCode::OK } else { StatusCode::NOT_FOUND }, &view)
}

async fn signup(State(core): State<Core>, Posted(page, form): Posted<NewUser>) -> Response {
    let req =
        SignUpRequest { email: form.email.clone(), password: form.password, account_name: form.account_name.clone() };
    match page.load("WebAppService/SignUp", core.webapp.sign_up(page.request(req))).await {
        Ok(done) => signed_in_to(&page, "/", &done.session_token),
        Err(err) => {
            let view = SignUp {
                chrome: page.chrome("Create an account", "").for_visitor(),
                open: err.reason() != ErrorReason::NotFound,
                email: form.email,
                account_name: form.account_name,
                error: Some(err.message().to_owned()),
            };
            page.render_with(err.reason().http_status(), &view)
        }
    }
}

async fn logout(State(core): State<Core>, Posted(page, _): Posted<Button>) -> Response {
    // Ending a session that is already gone is still a sign-out.
    let _ = page.load("WebAppService/SignOut", core.webapp.sign_out(page.request(SignOutRequest {}))).await;
    let mut response = Redirect::to("/login").into_response();
    cookies::set_session(response.headers_mut(), "", page.secure_cookies());
    response
}

async fn invite_form(State(core): State<Core>, page: PageCall, Path(token): Path<String>) -> Response {
    let invite = load_invite(&core, &page, &token).await;
    let status = if invite.is_ok() { StatusCode::OK } else { StatusCode::NOT_FOUND };
    let view = Invite { chrome: page.chrome("Set your password", "").for_visitor(), token, invite, error: None };
    page.render_with(status, &view)
}

async fn accept_invite(
    State(core): State<Core>,
    Path(token): Path<String>,
    Posted(page, form): Posted<Password>,
) -> Response {
    let req = AcceptInviteRequest { token: token.clone(), password: form.password };
    match page.load("WebAppService/AcceptInvite", core.webapp.accept_invite(page.request(req))).await {
        Ok(done) => signed_in_to(&page, "/", &done.session_token),
        Err(err) => {
            let invite = load_invite(&core, &page, &token).await;
            let view = Invite {
                chrome: page.chrome("Set your password", "").for_visitor(),
                token,
                invite,
                error: Some(err.message().to_owned()),
            };
            page.render_with(err.reason().http_status(), &view)
        }
    }
}

async fn load_invite(core: &Core, page: &PageCall, token: &str) -> Result<InviteView, String> {
    let req = GetInviteRequest { token: token.to_owned() };
    page.load("WebAppService/GetInvite", core.webapp.get_invite(page.request(req)))
        .await
        .map(|invite| InviteView {
            email: invite.email,
            account_name: invite.account_name,
            expires: When::timestamp(invite.expires_at.as_ref()),
        })
        .map_err(|err: ApiError| err.message().to_owned())
}

/// 303 to `next` with the new session's cookie.
fn signed_in_to(page: &PageCall, next: &str, token: &str) -> Response {
    let mut response = Redirect::to(next).into_response();
    if cookies::is_cookie_safe(token) {
        cookies::set_session(response.headers_mut(), token, page.secure_cookies());
    }
    response
}
