//! `GET /healthz`, `GET /api/local/health`, `POST /api/version` over `SystemService`.

use axum::{Json, extract::State};
use roost_proto::{
    ApiError, ErrorReason,
    v1::{GetHealthRequest, GetHealthResponse, GetVersionRequest, GetVersionResponse, HealthStatus},
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

pub(crate) fn routes() -> Routes {
    Routes::new("System", "Liveness, health and version.")
        .at(&HEALTHZ, healthz)
        .at(&HEALTH, health)
        .at(&VERSION, version)
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
