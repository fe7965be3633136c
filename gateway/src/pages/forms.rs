//! What every page form shares: the CSRF refusal, the error answer, and the redirect back
//! with a notice (post/redirect/get, so a reload never posts twice).

use axum::response::{IntoResponse, Redirect, Response};
use http::StatusCode;
use roost_proto::ApiError;

use super::{
    Message,
    layout::{PageCall, percent_encode},
};

/// A post whose `csrf` field does not match the visitor's cookie: 403, nothing changed.
pub fn expired(page: &PageCall) -> Response {
    let message = Message {
        chrome: page.chrome("Form expired", ""),
        heading: "Nothing was changed".into(),
        detail: "The form was sent without this browser's form key (it expired, or another site sent it). Go back, \
                 reload the page and send it again."
            .into(),
    };
    page.render_with(StatusCode::FORBIDDEN, &message)
}

/// A post the core refused: the error table's status and message, nothing changed.
pub fn failed(page: &PageCall, err: &ApiError) -> Response {
    let message = Message {
        chrome: page.chrome("Not done", ""),
        heading: "Nothing was changed".into(),
        detail: format!("{} ({}). Go back to correct it and send it again.", err.message(), err.reason().code()),
    };
    page.render_with(err.reason().http_status(), &message)
}

/// 303 to `path` with a one-line notice shown above its content.
pub fn done(path: &str, notice: &str) -> Response {
    let joiner = if path.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{path}{joiner}done={}", percent_encode(notice))).into_response()
}
