//! `GET /healthz`, `GET /api/local/health`, `POST /api/version`, `GET /metrics` over
//! `SystemService`.

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, header},
    response::{IntoResponse, Response},
};
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        GetHealthRequest, GetHealthResponse, GetMetricsRequest, GetVersionRequest, GetVersionResponse, HealthStatus,
        MetricsFormat,
    },
};
use serde_json::{Value, json};

use crate::{
    Call, Core, HttpError, JsonBody,
    api::{Answer, Endpoint, Routes},
};

const HEALTHZ: Endpoint = Endpoint::get(
    "/healthz",
    "Liveness for load balancers and supervisors: 200 `{\"status\":\"ok\"}` while roost serves and its database \
     answers, else 503 `unavailable`. Always open.",
)
.answer_of(Answer::JsonText(200, "`{\"status\": \"ok\"}`"))
.errors(&[ErrorReason::Unavailable]);

const HEALTH: Endpoint =
    Endpoint::get("/api/local/health", "The full health report (200 even when degraded).").answers("GetHealthResponse");

const VERSION: Endpoint = Endpoint::post(
    "/api/version",
    "roost's version and the contract versions it speaks; send your own to learn whether they are supported.",
)
.body("GetVersionRequest")
.answers("GetVersionResponse");

const METRICS: Endpoint = Endpoint::get(
    "/metrics",
    "This process's metrics for Prometheus: requests by route and status with latency, ingest, turns by \
     status with duration, queues, agents by status, stream clients, the store, the updater and the process. \
     Prometheus text format 0.0.4, or OpenMetrics 1.0 when `Accept` asks for `application/openmetrics-text`.",
)
.answer_of(Answer::Document("text/plain"));

pub(crate) fn routes() -> Routes {
    Routes::new("System", "Liveness, health, version and metrics.")
        .at(&HEALTHZ, healthz)
        .at(&HEALTH, health)
        .at(&VERSION, version)
        .at(&METRICS, metrics)
}

/// Liveness for load balancers and supervisors: 200 `{"status":"ok"}` while roost serves
/// and its database answers; 503 `unavailable` (with the reason) when the database does not.
async fn healthz(State(core): State<Core>, call: Call) -> Result<Json<Value>, HttpError> {
    let health = core.system.get_health(call.request(GetHealthRequest {})).await?.into_inner();
    if health.status() == HealthStatus::Ok {
        return Ok(Json(json!({ "status": "ok" })));
    }
    let why = health.database.map(|db| db.error).unwrap_or_default();
    Err(ApiError::new(ErrorReason::Unavailable, format!("database unreachable: {why}")).into())
}

/// The full health report; 200 even when degraded, since the report itself is the answer.
async fn health(State(core): State<Core>, call: Call) -> Result<Json<GetHealthResponse>, HttpError> {
    Ok(Json(core.system.get_health(call.request(GetHealthRequest {})).await?.into_inner()))
}

async fn version(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<GetVersionRequest>,
) -> Result<Json<GetVersionResponse>, HttpError> {
    Ok(Json(core.system.get_version(call.request(req)).await?.into_inner()))
}

/// One scrape, in the format the scraper asks for (Prometheus asks for OpenMetrics first).
async fn metrics(State(core): State<Core>, headers: HeaderMap, call: Call) -> Result<Response, HttpError> {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|accept| accept.contains("application/openmetrics-text"));
    let format = if openmetrics { MetricsFormat::Openmetrics } else { MetricsFormat::Unspecified };
    let scrape = core.system.get_metrics(call.request(GetMetricsRequest { format: format as i32 })).await?.into_inner();
    Ok(([(header::CONTENT_TYPE, scrape.content_type)], scrape.text).into_response())
}
