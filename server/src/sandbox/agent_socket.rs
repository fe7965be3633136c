//! The Unix socket through which sandboxed runtimes reach roost: its model gateway
//! (`/llm/…`) and OTLP ingest (`/v1/traces`, `/v1/logs`, `/v1/metrics`, and OTLP over
//! gRPC), and nothing else of roost's API.
//!
//! Every request still passes the same access check as on roost's listener, as a caller
//! that is not on loopback: an agent token opens the gateway and ingest (as its agent),
//! the dashboard API stays shut even when roost trusts loopback, and any other path gets
//! 404 before it is routed.

use std::{convert::Infallible, path::Path};

use axum::{Router, body::Body};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto::Builder,
    service::TowerToHyperService,
};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// Whether a sandboxed runtime may call `path`.
pub fn allowed(path: &str) -> bool {
    path.starts_with(crate::llm::PREFIX) && path[crate::llm::PREFIX.len()..].starts_with('/')
        || matches!(path, "/v1/traces" | "/v1/logs" | "/v1/metrics")
        || path.starts_with("/opentelemetry.proto.collector.")
}

/// Serves `app` (roost's router, access check included) on `listener` to sandboxed
/// runtimes until `stop`.
pub async fn serve(listener: std::os::unix::net::UnixListener, path: &Path, app: Router, stop: CancellationToken) {
    let listener = match listener.set_nonblocking(true).and_then(|()| UnixListener::from_std(listener)) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(path = %path.display(), error = %err, "cannot serve the sandboxes' gateway socket");
            return;
        }
    };
    let builder = Builder::new(TokioExecutor::new());
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let (app, builder, stop) = (app.clone(), builder.clone(), stop.clone());
        tokio::spawn(async move {
            let service = tower::service_fn(move |request: http::Request<Incoming>| {
                let app = app.clone();
                async move {
                    if !allowed(request.uri().path()) {
                        return Ok::<_, Infallible>(not_here());
                    }
                    app.oneshot(request.map(Body::new)).await
                }
            });
            let connection =
                builder.serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

/// The answer to a path sandboxes may not call.
fn not_here() -> http::Response<Body> {
    let body = serde_json::json!({
        "error": "a sandboxed runtime reaches only roost's model gateway (/llm) and OTLP ingest here",
        "code": "not_found",
    });
    http::Response::builder()
        .status(http::StatusCode::NOT_FOUND)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_gateway_and_ingest_are_reachable() {
        for path in ["/llm/v1/chat/completions", "/llm/anthropic/v1/messages", "/v1/traces", "/v1/logs"] {
            assert!(super::allowed(path), "{path}");
        }
        for path in ["/api/local/query", "/llmx", "/api/health", "/", "/mcp", "/v1/agents", "/dashboard"] {
            assert!(!super::allowed(path), "{path}");
        }
    }
}
