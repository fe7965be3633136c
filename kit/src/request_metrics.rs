//! Request metrics of the one port: HTTP requests by route and status, gRPC calls by
//! service, method and code, each with a latency histogram.
//!
//! The families live here, where requests pass, and are registered in the core's registry
//! ([`RequestMetrics::register`]), so `GET /metrics` (served by the core through
//! `SystemService.GetMetrics`) encodes them with everything else in one scrape.
//!
//! Labels stay few and bounded: an HTTP route is its matched path template
//! (`/api/instances/{instance_id}`, never an id), and a request that matched no route is
//! `route="unmatched"`; a gRPC method that does not exist (UNIMPLEMENTED) is
//! `method="unknown"`, so a client cannot mint series by inventing paths.
//!
//! What the latency measures: for HTTP, until the response's headers (an SSE stream is
//! counted when it opens, not when it ends); for gRPC, until the call's trailers, so a
//! server-streaming call's duration is the stream's life. gRPC-web calls carry their
//! status inside the body, where this layer does not look: they count with the status of
//! their headers, or `code="unknown"`.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use axum::{
    body::Body,
    extract::{MatchedPath, Request, State},
    http::{HeaderMap, Method},
    middleware::Next,
    response::Response,
};
use bytes::Bytes;
use http_body::Frame;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Registry, Unit},
};

/// The labels of an HTTP request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HttpLabels {
    method: &'static str,
    route: String,
    status: u16,
}

/// The labels of an HTTP request's latency (status left out to keep the buckets few).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    method: &'static str,
    route: String,
}

/// The labels of a gRPC call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GrpcLabels {
    service: String,
    method: String,
    code: &'static str,
}

/// The labels of a gRPC call's latency.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GrpcMethodLabels {
    service: String,
    method: String,
}

type Latencies<L> = Family<L, Histogram, fn() -> Histogram>;

/// 0.5 ms to about 16 s, doubling: a cached read to a slow turn.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The request families, cheap to clone (each is an `Arc`).
#[derive(Debug, Clone)]
pub struct RequestMetrics {
    http_requests: Family<HttpLabels, Counter>,
    http_latency: Latencies<RouteLabels>,
    grpc_requests: Family<GrpcLabels, Counter>,
    grpc_latency: Latencies<GrpcMethodLabels>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        Self {
            http_requests: Family::default(),
            http_latency: Family::new_with_constructor(latency_histogram),
            grpc_requests: Family::default(),
            grpc_latency: Family::new_with_constructor(latency_histogram),
        }
    }
}

impl RequestMetrics {
    /// Registers the families in `registry` (whose prefix, `roost`, they take).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            self.http_requests.clone(),
        );
        registry.register_with_unit(
            "http_request_duration",
            "Time to the response's headers, by method and route",
            Unit::Seconds,
            self.http_latency.clone(),
        );
        registry.register(
            "grpc_requests",
            "gRPC calls finished, by service, method and status code",
            self.grpc_requests.clone(),
        );
        registry.register_with_unit(
            "grpc_request_duration",
            "Time to the call's trailers, by service and method",
            Unit::Seconds,
            self.grpc_latency.clone(),
        );
    }

    fn http(&self, method: &Method, route: String, status: u16, seconds: f64) {
        let method = method_name(method);
        self.http_latency.get_or_create(&RouteLabels { method, route: route.clone() }).observe(seconds);
        self.http_requests.get_or_create(&HttpLabels { method, route, status }).inc();
    }

    fn grpc(&self, path: &str, code: Option<i32>, seconds: f64) {
        let (service, method) = path.trim_start_matches('/').split_once('/').unwrap_or(("unknown", "unknown"));
        let code = code_name(code);
        // UNIMPLEMENTED: a method (or service) that does not exist; its name is the caller's.
        let (service, method) = if code == "UNIMPLEMENTED" { ("unknown", "unknown") } else { (service, method) };
        let labels = GrpcMethodLabels { service: service.to_owned(), method: method.to_owned() };
        self.grpc_latency.get_or_create(&labels).observe(seconds);
        self.grpc_requests.get_or_create(&GrpcLabels { service: labels.service, method: labels.method, code }).inc();
    }
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// The canonical name of a gRPC status code; `None` (the call ended without one) is
/// "unknown".
fn code_name(code: Option<i32>) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    code.and_then(|c| usize::try_from(c).ok()).and_then(|c| NAMES.get(c).copied()).unwrap_or("unknown")
}

fn grpc_status(headers: &HeaderMap) -> Option<i32> {
    headers.get("grpc-status")?.to_str().ok()?.parse().ok()
}

fn is_grpc(request: &Request) -> bool {
    request.headers().get(http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// Middleware recording every request (apply with `Router::layer`, so the matched route
/// is known).
pub async fn record(State(metrics): State<RequestMetrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    if is_grpc(&request) {
        let path = request.uri().path().to_owned();
        let response = next.run(request).await;
        // A trailers-only answer (most errors) has its status in the headers.
        if let Some(code) = grpc_status(response.headers()) {
            metrics.grpc(&path, Some(code), started.elapsed().as_secs_f64());
            return response;
        }
        let (parts, body) = response.into_parts();
        let body = Body::new(UntilTrailers { inner: body, call: Some((metrics, path, started)) });
        return Response::from_parts(parts, body);
    }
    let method = request.method().clone();
    let route =
        request.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    metrics.http(&method, route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

/// A gRPC answer's body that records the call when its trailers pass (or, if the client
/// goes away first, as CANCELLED when it is dropped).
struct UntilTrailers {
    inner: Body,
    call: Option<(RequestMetrics, String, Instant)>,
}

impl UntilTrailers {
    fn finish(&mut self, code: Option<i32>) {
        if let Some((metrics, path, started)) = self.call.take() {
            metrics.grpc(&path, code, started.elapsed().as_secs_f64());
        }
    }
}

impl http_body::Body for UntilTrailers {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    let code = grpc_status(trailers);
                    self.finish(code);
                }
            }
            Poll::Ready(Some(Err(_))) => self.finish(Some(2)),
            Poll::Ready(None) => self.finish(None),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for UntilTrailers {
    fn drop(&mut self) {
        self.finish(Some(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_do_not_become_series() {
        let metrics = RequestMetrics::default();
        metrics.grpc("/roost.v1.AgentService/SendMessage", Some(0), 0.01);
        metrics.grpc("/roost.v1.AgentService/Invented1", Some(12), 0.01);
        metrics.grpc("/roost.v1.AgentService/Invented2", Some(12), 0.01);
        let invented =
            GrpcLabels { service: "roost.v1.AgentService".into(), method: "Invented1".into(), code: "UNIMPLEMENTED" };
        assert!(metrics.grpc_requests.get(&invented).is_none());
        let unknown = GrpcLabels { service: "unknown".into(), method: "unknown".into(), code: "UNIMPLEMENTED" };
        assert_eq!(metrics.grpc_requests.get(&unknown).map(|c| c.get()), Some(2));
        assert_eq!(code_name(Some(16)), "UNAUTHENTICATED");
        assert_eq!(code_name(Some(99)), "unknown");
        assert_eq!(code_name(None), "unknown");
    }
}
