//! The gRPC side of the one port: roost's services, grpc.health.v1 and server reflection,
//! each also reachable as gRPC-web over HTTP/1.1.

use std::sync::Arc;

use roost_proto::v1::{
    account_service_server::AccountServiceServer, agent_service_server::AgentServiceServer,
    system_service_server::SystemServiceServer,
};
use tonic::service::Routes;
use tonic_health::server::HealthReporter;
use tonic_web::{GrpcWebLayer, GrpcWebService};
use tower::Layer;

use crate::{accounts::service::AccountCore, agents::service::AgentCore, system::SystemCore};

/// The core services the server exposes over gRPC (and, through the gateway, REST).
#[derive(Clone)]
pub struct Services {
    /// Health and version.
    pub system: Arc<SystemCore>,
    /// Hosted agents.
    pub agents: Arc<AgentCore>,
    /// Accounts and their ledgers.
    pub accounts: Arc<AccountCore>,
}

/// Adds every gRPC service to `router`, which keeps its own routes and fallback.
///
/// Returns the health reporter, so the server can report NOT_SERVING while it stops.
pub async fn add_services(router: axum::Router, services: &Services) -> anyhow::Result<(axum::Router, HealthReporter)> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<SystemServiceServer<SystemCore>>().await;
    reporter.set_serving::<AgentServiceServer<AgentCore>>().await;
    reporter.set_serving::<AccountServiceServer<AccountCore>>().await;

    let routes = Routes::from(router)
        .add_service(web(SystemServiceServer::from_arc(services.system.clone())))
        .add_service(web(AgentServiceServer::from_arc(services.agents.clone())))
        .add_service(web(AccountServiceServer::from_arc(services.accounts.clone())))
        .add_service(web(health))
        .add_service(web(reflection().build_v1()?))
        .add_service(web(reflection().build_v1alpha()?));
    Ok((routes.prepare().into_axum_router(), reporter))
}

/// gRPC-web goes on each service, never on the whole router: there it would answer every
/// plain HTTP/1.1 request with 400.
fn web<S>(service: S) -> GrpcWebService<S> {
    GrpcWebLayer::new().layer(service)
}

/// Reflection over roost.v1 and grpc.health.v1 (the reflection service adds itself), so
/// grpcurl-style clients need no .proto files.
fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(roost_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}
