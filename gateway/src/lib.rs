//! roost's HTTP face. Every route here is an adapter of a few lines: decode the request,
//! call the core through its generated gRPC service trait, encode the answer. The gateway
//! never touches the store, so REST, gRPC and MCP share one implementation and cannot drift.
//!
//! The JSON bodies are the `roost.v1` messages themselves (they derive serde), and every
//! error is the `{"error", "code"}` body of the shared error table.

mod call;
mod error;
mod extract;
mod fallback;
mod routes;

use std::sync::Arc;

use axum::Router;
use roost_proto::v1::{
    account_service_server::AccountService, agent_service_server::AgentService, system_service_server::SystemService,
};

pub use call::Call;
pub use error::HttpError;
pub use extract::{InstanceId, JsonBody, LimitQuery};

/// The core's services, as the gateway sees them: trait objects of the generated gRPC
/// service traits, shared with the tonic servers on the same port.
#[derive(Clone)]
pub struct Core {
    /// Health and version.
    pub system: Arc<dyn SystemService>,
    /// Hosted agents.
    pub agents: Arc<dyn AgentService>,
    /// The caller's account.
    pub accounts: Arc<dyn AccountService>,
}

/// Limits the gateway enforces before a request reaches the core.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// Largest JSON request body accepted, in bytes (413 above).
    pub max_json_body_bytes: usize,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self { max_json_body_bytes: 1024 * 1024 }
    }
}

/// The documented REST routes plus roost's JSON 404/405 fallbacks. gRPC services are added
/// to this router by the server, so unknown paths stay JSON 404s for HTTP clients and
/// become UNIMPLEMENTED for gRPC clients.
pub fn router(core: Core, options: GatewayOptions) -> Router {
    routes::system::routes()
        .merge(routes::agents::routes())
        .merge(routes::accounts::routes())
        .fallback(fallback::not_found)
        .method_not_allowed_fallback(fallback::method_not_allowed)
        .layer(axum::Extension(Arc::new(options)))
        .with_state(core)
}
