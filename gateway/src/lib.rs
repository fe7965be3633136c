//! roost's HTTP face. Every route here is an adapter of a few lines: decode the request,
//! call the core through its generated gRPC service trait, encode the answer. The gateway
//! never touches the store, so REST, gRPC and MCP share one implementation and cannot drift.
//!
//! The JSON bodies are the `roost.v1` messages themselves (they derive serde), and every
//! error is the `{"error", "code"}` body of the shared error table.

pub mod access;
pub mod access_layer;
pub mod api;
mod call;
mod codec;
pub mod cookies;
mod extract;
mod fallback;
pub mod mcp;
pub mod openapi;
pub mod pages;
mod routes;
pub mod skill;
mod uri;
pub mod usage;

use std::sync::Arc;

use axum::Router;
use opentelemetry_proto::tonic::collector::{
    logs::v1::logs_service_server::LogsService, metrics::v1::metrics_service_server::MetricsService,
    trace::v1::trace_service_server::TraceService,
};
use roost_proto::v1::{
    account_service_server::AccountService, billing_service_server::BillingService,
    control_service_server::ControlService, evaluator_service_server::EvaluatorService,
    experiment_service_server::ExperimentService, feature_service_server::FeatureService,
    ingest_service_server::IngestService, score_service_server::ScoreService, system_service_server::SystemService,
    update_service_server::UpdateService, web_app_service_server::WebAppService,
};

pub use access::AccessPolicy;
pub use call::Call;
pub use extract::{InstanceId, JsonBody, LimitQuery};
/// The error answer every handler returns, from the crate the core shares.
pub(crate) use roost_kit::HttpError;

/// The core's services, as the gateway sees them: trait objects of the generated gRPC
/// service traits, shared with the tonic servers on the same port.
#[derive(Clone)]
pub struct Core {
    /// Health and version.
    pub system: Arc<dyn SystemService>,
    /// Hosted agents.
    pub agents: Arc<roost_kit::streams::DynAgentService>,
    /// The caller's account.
    pub accounts: Arc<dyn AccountService>,
    /// OTLP traces.
    pub traces: Arc<dyn TraceService>,
    /// OTLP metrics.
    pub metrics: Arc<dyn MetricsService>,
    /// OTLP logs.
    pub logs: Arc<dyn LogsService>,
    /// Custom runs and node push.
    pub ingest: Arc<dyn IngestService>,
    /// q/1.
    pub query: Arc<roost_kit::streams::DynQueryService>,
    /// Live streams (SSE).
    pub streams: Arc<roost_kit::streams::DynStreamService>,
    /// Feature APIs of the dashboard's pages.
    pub features: Arc<dyn FeatureService>,
    /// Control endpoints.
    pub control: Arc<dyn ControlService>,
    /// The self-updater.
    pub updates: Arc<dyn UpdateService>,
    /// Web-app users and sessions.
    pub webapp: Arc<dyn WebAppService>,
    /// Top-ups through Stripe.
    pub billing: Arc<dyn BillingService>,
    /// Scores of observed work.
    pub scores: Arc<dyn ScoreService>,
    /// LLM judges.
    pub evaluators: Arc<dyn EvaluatorService>,
    /// Datasets and experiments.
    pub experiments: Arc<dyn ExperimentService>,
    /// Limits the gateway enforces.
    pub options: Arc<GatewayOptions>,
    /// Who may call the dashboard (the pages' sign-in form checks tokens against it).
    pub access: Arc<AccessPolicy>,
    /// The MCP transport, started on first use.
    pub mcp: mcp::McpState,
    /// Use counts of routes and tools, drained by the core for the skills page.
    pub usage: Arc<roost_kit::usage::UsageCounters>,
    /// The brake on guessing dashboard tokens at `/dashboard/signin`.
    pub token_brake: roost_kit::brake::Brake,
    /// Ingest bytes in flight (OTLP/HTTP and node pushes here; OTLP/gRPC shares it).
    pub ingest_budget: roost_kit::budget::IngestBudget,
}

/// Limits the gateway enforces before a request reaches the core.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// Largest JSON request body accepted, in bytes (413 above).
    pub max_json_body_bytes: usize,
    /// Largest OTLP or node-push body, before and after decompression (413 above).
    pub max_otlp_body_bytes: usize,
    /// Ingest bytes decoded at once, over every listener and protocol (429 past it).
    pub max_ingest_inflight_bytes: usize,
    /// How often an idle SSE stream sends a keepalive comment.
    pub sse_keepalive: std::time::Duration,
    /// Every cookie gets `Secure` (roost's `--public-url` is https); otherwise only pages
    /// that came over https (`X-Forwarded-Proto`) set them so.
    pub secure_cookies: bool,
    /// The categories the dashboard's feedback forms offer for a `label` score
    /// (`--feedback-labels`): a fixed list, so people's labels can be counted and filtered.
    pub feedback_labels: Vec<String>,
}

/// The feedback labels offered when none are configured.
pub const DEFAULT_FEEDBACK_LABELS: &str = "correct,incorrect,off-topic,unsafe";

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            max_json_body_bytes: 1024 * 1024,
            max_otlp_body_bytes: 32 * 1024 * 1024,
            max_ingest_inflight_bytes: roost_kit::budget::DEFAULT_BYTES,
            sse_keepalive: std::time::Duration::from_secs(15),
            secure_cookies: false,
            feedback_labels: DEFAULT_FEEDBACK_LABELS.split(',').map(str::to_owned).collect(),
        }
    }
}

/// Every route, grouped as the skill file documents them. The router serves exactly these.
pub fn sections() -> Vec<api::Routes> {
    vec![
        routes::agents::routes(),
        routes::accounts::routes(),
        routes::billing::routes(),
        mcp::routes(),
        routes::query::routes(),
        routes::otlp::routes(),
        routes::ingest::routes(),
        routes::scores::routes(),
        routes::evaluators::routes(),
        routes::experiments::datasets(),
        routes::experiments::experiments(),
        routes::streams::routes(),
        routes::features::routes(),
        routes::control::routes(),
        routes::updates::routes(),
        routes::system::routes(),
        skill::routes(),
        openapi::routes(),
    ]
}

/// What the skills page lists: every documented route, in the skill file's order, then
/// every MCP tool, each without counts. The core fills in the counts; the list is the
/// gateway's, so the page cannot drift from what is served.
pub fn skill_catalogue() -> Vec<roost_proto::v1::Skill> {
    use roost_kit::usage::Surface;
    let routes = sections().into_iter().flat_map(|section| {
        let title = section.title;
        section.endpoints.into_iter().map(move |endpoint| roost_proto::v1::Skill {
            surface: Surface::Rest.as_str().into(),
            name: format!("{} {}", endpoint.verb.as_str(), endpoint.path),
            section: title.into(),
            summary: endpoint.summary.into(),
            ..Default::default()
        })
    });
    let tools = mcp::tools::TOOLS.iter().map(|tool| roost_proto::v1::Skill {
        surface: Surface::Mcp.as_str().into(),
        name: tool.name.into(),
        section: "MCP tools".into(),
        summary: tool.description.into(),
        ..Default::default()
    });
    routes.chain(tools).collect()
}

/// The documented routes plus roost's JSON 404/405 fallbacks. gRPC services are added to
/// this router by the server, so unknown paths stay JSON 404s for HTTP clients and become
/// UNIMPLEMENTED for gRPC clients.
pub fn router(core: Core) -> Router {
    sections()
        .into_iter()
        .fold(Router::new(), |router, section| router.merge(section.into_router()))
        .route_layer(axum::middleware::from_fn_with_state(core.clone(), usage::count))
        .merge(pages::router())
        .fallback(fallback::not_found)
        .method_not_allowed_fallback(fallback::method_not_allowed)
        .layer(axum::middleware::from_fn(uri::refuse_unreadable))
        .with_state(core)
}
