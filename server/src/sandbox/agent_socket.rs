//! Each sandboxed runtime's own Unix socket to roost: its model gateway (`/llm/…`) and
//! OTLP ingest (`/v1/traces`, `/v1/logs`, `/v1/metrics`, and OTLP over gRPC), and nothing
//! else of roost's API.
//!
//! Every request still passes the same access check as on roost's listener, as a caller
//! that is not on loopback: an agent token opens the model gateway and ingest (as its agent),
//! the dashboard API stays shut even when roost trusts loopback, and any other path gets
//! 404 before it is routed. One socket per agent, and every request on it handled as
//! having arrived on that agent's socket ([`crate::callers::tokens::on_agent_socket`]):
//! a sandboxed agent's token is good on its own socket only, so a token one agent stole
//! from another (or from anywhere) opens nothing from its own sandbox, nor from roost's
//! listener.

use std::{convert::Infallible, sync::Arc};

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

/// Serves roost's router (access check included; `app` has it once the server built it)
/// on `listener`, agent `agent`'s socket, until `stop`.
pub async fn serve(
    listener: std::os::unix::net::UnixListener,
    agent: Arc<str>,
    mut app: tokio::sync::watch::Receiver<Option<Router>>,
    stop: CancellationToken,
) {
    let listener = match listener.set_nonblocking(true).and_then(|()| UnixListener::from_std(listener)) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(instance = %agent, error = %err, "cannot serve an agent's gateway socket");
            return;
        }
    };
    // Until the server has built its router, connections wait in the backlog.
    let app = tokio::select! {
        () = stop.cancelled() => return,
        ready = app.wait_for(Option::is_some) => match ready.ok().and_then(|app| app.clone()) {
            Some(app) => app,
            None => return,
        },
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
        let (app, builder, stop, agent) = (app.clone(), builder.clone(), stop.clone(), agent.clone());
        tokio::spawn(async move {
            let service = tower::service_fn(move |request: http::Request<Incoming>| {
                let (app, agent) = (app.clone(), agent.clone());
                async move {
                    if !allowed(request.uri().path()) {
                        return Ok::<_, Infallible>(not_here());
                    }
                    crate::callers::tokens::on_agent_socket(agent, app.oneshot(request.map(Body::new))).await
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
