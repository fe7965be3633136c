//! Use counts of the documented routes and MCP tools, for the skills page.
//!
//! The counters are `roost_kit::usage`'s, which the core drains into the store
//! (`server::features::skills`); the gateway only counts.

use axum::{
    extract::{MatchedPath, Request, State},
    middleware::Next,
    response::Response,
};

use crate::Core;

/// The route layer: counts every call to a documented route (the MCP transport's requests
/// are not counted; its tool calls are).
pub(crate) async fn count(State(core): State<Core>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let response = next.run(request).await;
    if let Some(route) = route.filter(|r| r.as_str() != "/mcp") {
        let status = response.status();
        core.usage.record_route(&method, route.as_str(), status.is_client_error() || status.is_server_error());
    }
    response
}
