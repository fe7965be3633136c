//! Answers for requests no route takes: JSON for HTTP clients, a gRPC status for gRPC ones.

use axum::{
    extract::Request,
    response::{IntoResponse, Response},
};
use http::header::CONTENT_TYPE;
use roost_proto::ErrorReason;

use roost_kit::HttpError;

/// Unknown path: 404 `not_found`, or UNIMPLEMENTED for a gRPC call to a method this build
/// does not serve (so gRPC clients see a gRPC status, not an HTTP error).
pub(crate) async fn not_found(req: Request) -> Response {
    if is_grpc(&req) {
        let status = tonic::Status::unimplemented(format!("{} is not served by this roost", req.uri().path()));
        return status.into_http::<axum::body::Body>().into_response();
    }
    HttpError::new(ErrorReason::NotFound, format!("no route for {} {}", req.method(), req.uri().path())).into_response()
}

/// Known path, wrong method: 405 `method_not_allowed`.
pub(crate) async fn method_not_allowed(req: Request) -> Response {
    HttpError::new(ErrorReason::MethodNotAllowed, format!("{} is not allowed on {}", req.method(), req.uri().path()))
        .into_response()
}

fn is_grpc(req: &Request) -> bool {
    req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/grpc"))
}
