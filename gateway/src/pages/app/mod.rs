//! The hosted web app (docs/architecture.md#pages): sign-up, sign-in and
//! invites ([`auth`]); the signed-in home with the account's agents ([`home`]); one
//! agent's page with its config, lifecycle buttons, activity and chat ([`instance`]) and
//! its files ([`files`]); API keys ([`developers`]); credits and Stripe top-ups
//! ([`billing`]).
//!
//! A signed-in browser holds the `roost_session` cookie; [`PageCall`] hands it to the core
//! as session metadata, and the core's services treat it as they treat the account's API
//! key, so every page here is the same core call a REST client makes, and another
//! account's agent is a 404 here as over REST. Every form is a [`Posted`] (CSRF field)
//! and must come from this site (the access policy's `App` guard). State-changing buttons
//! that cannot be undone (pause, resume, destroy, revoke) go through a confirmation page,
//! which works with JavaScript off.
//!
//! [`Posted`]: super::forms::Posted

mod auth;
mod billing;
mod developers;
mod files;
pub(super) mod home;
mod instance;

use axum::{
    Router,
    extract::DefaultBodyLimit,
    response::{IntoResponse, Redirect, Response},
};
use roost_proto::{
    ErrorReason,
    v1::{Account, GetSessionRequest},
};

use super::layout::{Chrome, PageCall, percent_encode};
use crate::Core;

/// Largest form a web-app page takes (a brief is at most 16 KiB and a message 64 KiB,
/// form-encoded); more is 413.
const MAX_FORM_BYTES: usize = 256 * 1024;

pub(super) fn routes() -> Router<Core> {
    Router::new()
        .merge(auth::routes())
        .merge(home::routes())
        .merge(instance::routes())
        .merge(files::routes())
        .merge(developers::routes())
        .merge(billing::routes())
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
}

/// The post of a form that is only a button (sign out, pause, revoke…): its CSRF field.
#[derive(Debug, serde::Deserialize)]
pub(super) struct Button {
    #[serde(default)]
    csrf: String,
}

super::forms::csrf_field!(Button);

/// The signed-in user of a page request.
pub(super) struct Signed {
    /// Their email.
    pub email: String,
    /// Their account, as read at the start of the request.
    pub account: Account,
}

impl Signed {
    /// The chrome of one of the user's pages.
    pub fn chrome(&self, page: &PageCall, title: &str, current: &'static str) -> Chrome {
        page.chrome(title, current).for_user(&self.email)
    }
}

/// The visitor's session, or the answer for a visitor who is not signed in: a 303 to
/// `/login`, remembering where they were going.
pub(super) async fn signed_in(core: &Core, page: &PageCall) -> Result<Signed, Response> {
    match page.load("WebAppService/GetSession", core.webapp.get_session(page.request(GetSessionRequest {}))).await {
        Ok(session) => {
            let email = session.user.map(|u| u.email).unwrap_or_default();
            page.for_user(&email);
            Ok(Signed { email, account: session.account.unwrap_or_default() })
        }
        Err(err) if err.reason() == ErrorReason::Unauthenticated => Err(to_login(page.here())),
        Err(err) => Err(super::forms::failed(page, &err)),
    }
}

/// 303 to the sign-in form, coming back to `next` afterwards.
pub(super) fn to_login(next: &str) -> Response {
    Redirect::to(&format!("/login?next={}", percent_encode(next))).into_response()
}

/// Where to go after signing in: a path on this site, else the home page.
pub(super) fn safe_next(next: &str) -> &str {
    super::redirects::local_next(next, &["/login", "/logout", "/signup", "/invite/"], "/")
}
