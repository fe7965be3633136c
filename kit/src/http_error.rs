//! Errors as HTTP responses: the table's status and the `{"error", "code"}` body.

use axum::{
    Json,
    response::{IntoResponse, Response},
};
use roost_proto::{ApiError, ErrorReason};

/// An [`ApiError`] on its way out as an HTTP response.
#[derive(Debug)]
pub struct HttpError(pub ApiError);

impl HttpError {
    /// An error with the given reason and message.
    pub fn new(reason: ErrorReason, message: impl Into<String>) -> Self {
        Self(ApiError::new(reason, message))
    }
}

impl From<tonic::Status> for HttpError {
    fn from(status: tonic::Status) -> Self {
        Self(ApiError::from_status(&status))
    }
}

impl From<ApiError> for HttpError {
    fn from(err: ApiError) -> Self {
        Self(err)
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let reason = self.0.reason();
        if reason.is_server_fault() {
            tracing::warn!(code = reason.code(), error = self.0.message(), "request failed");
        }
        let mut response = (reason.http_status(), Json(self.0.to_json())).into_response();
        // A bound on work in flight frees up within moments: say when to come back.
        if reason == ErrorReason::Overloaded {
            response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        }
        response
    }
}
