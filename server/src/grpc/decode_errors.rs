//! Undecodable requests to gRPC services roost did not generate (the OTLP collector
//! services, grpc.health.v1, reflection) answer INVALID_ARGUMENT, as roost's own do.
//!
//! Their code comes from other crates with tonic's prost codec, which answers a request
//! whose bytes do not decode with INTERNAL ("failed to decode Protobuf message: …"):
//! wrong for the client (its request is at fault; INTERNAL invites retries) and unlike
//! `roost.v1`, whose codec ([`roost_proto::codec`]) answers INVALID_ARGUMENT. This layer
//! rewrites exactly that status, in the response headers (a unary call's trailers-only
//! answer) or the trailers (a streaming call), and nothing else.

use std::{
    convert::Infallible,
    task::{Context, Poll},
};

use futures::future::BoxFuture;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::BodyExt as _;
use tonic::{body::Body, server::NamedService};
use tower::Service;

/// prost's `DecodeError` text, as tonic's codec puts it in `grpc-message` (percent-encoded
/// there: spaces as `%20`).
const DECODE_FAILURE: &str = "failed%20to%20decode%20Protobuf%20message";

/// Wraps a gRPC service generated with tonic's prost codec.
#[derive(Debug, Clone)]
pub struct DecodeErrorsAreInvalid<S>(pub S);

impl<S: NamedService> NamedService for DecodeErrorsAreInvalid<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, R, B> Service<Request<R>> for DecodeErrorsAreInvalid<S>
where
    S: Service<Request<R>, Response = Response<B>, Error = Infallible>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<R>) -> Self::Future {
        let answer = self.0.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            fix(response.headers_mut());
            Ok(response.map(|body| {
                Body::new(body.map_frame(|frame| match frame.into_trailers() {
                    Ok(mut trailers) => {
                        fix(&mut trailers);
                        http_body::Frame::trailers(trailers)
                    }
                    Err(frame) => frame,
                }))
            }))
        })
    }
}

/// INTERNAL with prost's decode failure → INVALID_ARGUMENT.
fn fix(headers: &mut HeaderMap) {
    let internal = headers.get("grpc-status").is_some_and(|s| s == "13");
    let decode = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .is_some_and(|m| m.starts_with(DECODE_FAILURE) || m.starts_with("failed to decode Protobuf message"));
    if internal && decode {
        headers.insert("grpc-status", HeaderValue::from_static("3"));
    }
}
