//! `GET /healthz`, `GET /api/local/health`, `POST /api/version` over `SystemService`.

use axum::{
    Json, Router,
    extract::State,
    routing::{get, post},
};
use roost_proto::{
    ApiError, ErrorReason,
    v1::{GetHealthRequest, GetHealthResponse, GetVersionRequest, GetVersionResponse, HealthStatus},
};
use serde_json::{Value, json};

use crate::{Call, Core, HttpError, JsonBody};

pub(crate) fn routes() -> Router<Core> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/api/local/health", get(health))
        .route("/api/version", post(version))
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
