//! The gRPC side of the one port: roost's services, grpc.health.v1 and server reflection,
//! each also reachable as gRPC-web over HTTP/1.1.

mod decode_errors;
mod ingest_budget;

use std::sync::Arc;

use decode_errors::DecodeErrorsAreInvalid;
use ingest_budget::WithinBudget;
use opentelemetry_proto::tonic::collector::{
    logs::v1::logs_service_server::LogsServiceServer, metrics::v1::metrics_service_server::MetricsServiceServer,
    trace::v1::trace_service_server::TraceServiceServer,
};
use roost_kit::budget::IngestBudget;
use roost_proto::v1::{
    account_service_server::AccountServiceServer, agent_service_server::AgentServiceServer,
    billing_service_server::BillingServiceServer, control_service_server::ControlServiceServer,
    evaluator_service_server::EvaluatorServiceServer, experiment_service_server::ExperimentServiceServer,
    feature_service_server::FeatureServiceServer, ingest_service_server::IngestServiceServer,
    query_service_server::QueryServiceServer, score_service_server::ScoreServiceServer,
    stream_service_server::StreamServiceServer, system_service_server::SystemServiceServer,
    update_service_server::UpdateServiceServer, web_app_service_server::WebAppServiceServer,
};
use tonic::{codec::CompressionEncoding, service::Routes};
use tonic_health::server::HealthReporter;
use tonic_web::{GrpcWebLayer, GrpcWebService};
use tower::Layer;

use crate::{
    accounts::service::AccountCore,
    agents::service::AgentCore,
    billing::service::BillingCore,
    control::ControlCore,
    evaluations::service::EvaluatorCore,
    experiments::service::ExperimentCore,
    features::service::FeatureCore,
    query::QueryCore,
    scores::service::ScoreCore,
    streams::service::StreamCore,
    system::SystemCore,
    telemetry::service::{IngestCore, OtlpCore},
    update::service::UpdateCore,
    webapp::WebAppCore,
};

/// Largest OTLP export accepted over gRPC (tonic's default is 4 MiB; exporters batch more).
const MAX_OTLP_MESSAGE: usize = 32 * 1024 * 1024;

/// The core services the server exposes over gRPC (and, through the HTTP adapters of `gateway/`,
/// REST).
#[derive(Clone)]
pub struct Services {
    /// Health and version.
    pub system: Arc<SystemCore>,
    /// Hosted agents.
    pub agents: Arc<AgentCore>,
    /// Accounts and their ledgers.
    pub accounts: Arc<AccountCore>,
    /// OTLP collector services.
    pub otlp: Arc<OtlpCore>,
    /// Custom runs and node push.
    pub ingest: Arc<IngestCore>,
    /// q/1.
    pub query: Arc<QueryCore>,
    /// Live streams.
    pub streams: Arc<StreamCore>,
    /// Feature APIs.
    pub features: Arc<FeatureCore>,
    /// Control endpoints.
    pub control: Arc<ControlCore>,
    /// The self-updater.
    pub updates: Arc<UpdateCore>,
    /// Web-app users and sessions.
    pub webapp: Arc<WebAppCore>,
    /// Top-ups through Stripe.
    pub billing: Arc<BillingCore>,
    /// Scores.
    pub scores: Arc<ScoreCore>,
    /// LLM judges.
    pub evaluators: Arc<EvaluatorCore>,
    /// Datasets and experiments.
    pub experiments: Arc<ExperimentCore>,
}

/// Adds every gRPC service to `router`, which keeps its own routes and fallback.
///
/// OTLP exports count their bytes in `budget` before they are decoded (see
/// [`ingest_budget`]). Returns the health reporter, so the server can report NOT_SERVING
/// while it stops.
pub async fn add_services(
    router: axum::Router,
    services: &Services,
    budget: &IngestBudget,
) -> anyhow::Result<(axum::Router, HealthReporter)> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<SystemServiceServer<SystemCore>>().await;
    reporter.set_serving::<AgentServiceServer<AgentCore>>().await;
    reporter.set_serving::<AccountServiceServer<AccountCore>>().await;
    reporter.set_serving::<IngestServiceServer<IngestCore>>().await;
    reporter.set_serving::<QueryServiceServer<QueryCore>>().await;
    reporter.set_serving::<StreamServiceServer<StreamCore>>().await;
    reporter.set_serving::<FeatureServiceServer<FeatureCore>>().await;
    reporter.set_serving::<ControlServiceServer<ControlCore>>().await;
    reporter.set_serving::<UpdateServiceServer<UpdateCore>>().await;
    reporter.set_serving::<WebAppServiceServer<WebAppCore>>().await;
    reporter.set_serving::<BillingServiceServer<BillingCore>>().await;
    reporter.set_serving::<ScoreServiceServer<ScoreCore>>().await;
    reporter.set_serving::<EvaluatorServiceServer<EvaluatorCore>>().await;
    reporter.set_serving::<ExperimentServiceServer<ExperimentCore>>().await;
    reporter.set_serving::<TraceServiceServer<OtlpCore>>().await;
    reporter.set_serving::<LogsServiceServer<OtlpCore>>().await;
    reporter.set_serving::<MetricsServiceServer<OtlpCore>>().await;

    let routes = Routes::from(router)
        .add_service(web(SystemServiceServer::from_arc(services.system.clone())))
        .add_service(web(AgentServiceServer::from_arc(services.agents.clone())))
        .add_service(web(AccountServiceServer::from_arc(services.accounts.clone())))
        .add_service(web(IngestServiceServer::from_arc(services.ingest.clone())))
        .add_service(web(QueryServiceServer::from_arc(services.query.clone())))
        .add_service(web(StreamServiceServer::from_arc(services.streams.clone())))
        .add_service(web(FeatureServiceServer::from_arc(services.features.clone())))
        .add_service(web(ControlServiceServer::from_arc(services.control.clone())))
        .add_service(web(UpdateServiceServer::from_arc(services.updates.clone())))
        .add_service(web(WebAppServiceServer::from_arc(services.webapp.clone())))
        .add_service(web(BillingServiceServer::from_arc(services.billing.clone())))
        .add_service(web(ScoreServiceServer::from_arc(services.scores.clone())))
        .add_service(web(EvaluatorServiceServer::from_arc(services.evaluators.clone())))
        .add_service(web(ExperimentServiceServer::from_arc(services.experiments.clone())))
        .add_service(web(DecodeErrorsAreInvalid(WithinBudget::new(
            TraceServiceServer::from_arc(services.otlp.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(MAX_OTLP_MESSAGE),
            budget.clone(),
            MAX_OTLP_MESSAGE,
        ))))
        .add_service(web(DecodeErrorsAreInvalid(WithinBudget::new(
            LogsServiceServer::from_arc(services.otlp.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(MAX_OTLP_MESSAGE),
            budget.clone(),
            MAX_OTLP_MESSAGE,
        ))))
        .add_service(web(DecodeErrorsAreInvalid(WithinBudget::new(
            MetricsServiceServer::from_arc(services.otlp.clone())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(MAX_OTLP_MESSAGE),
            budget.clone(),
            MAX_OTLP_MESSAGE,
        ))))
        .add_service(web(DecodeErrorsAreInvalid(health)))
        .add_service(web(DecodeErrorsAreInvalid(reflection().build_v1()?)))
        .add_service(web(DecodeErrorsAreInvalid(reflection().build_v1alpha()?)));
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
