//! The control endpoints, over `ControlService`.

use axum::{
    Json, Router,
    extract::{Path, State},
    http::StatusCode,
    routing::post,
};
use roost_proto::v1::{Instance, PauseAgentRequest, RestartRequest, RestartResponse, ResumeAgentRequest};

use crate::{Call, Core, HttpError};

pub(crate) fn routes() -> Router<Core> {
    Router::new()
        .route("/api/control/restart", post(restart))
        .route("/api/control/agents/{id}/pause", post(pause))
        .route("/api/control/agents/{id}/resume", post(resume))
}

/// 202 `{restarting, pid}`; roost stops gracefully and starts again moments later.
async fn restart(State(core): State<Core>, call: Call) -> Result<(StatusCode, Json<RestartResponse>), HttpError> {
    Ok((StatusCode::ACCEPTED, Json(core.control.restart(call.request(RestartRequest {})).await?.into_inner())))
}

/// The agent, paused.
async fn pause(
    State(core): State<Core>,
    Path(instance_id): Path<String>,
    call: Call,
) -> Result<Json<Instance>, HttpError> {
    let reply = core.control.pause_agent(call.request(PauseAgentRequest { instance_id })).await?.into_inner();
    Ok(Json(reply.instance.unwrap_or_default()))
}

/// The agent, starting again.
async fn resume(
    State(core): State<Core>,
    Path(instance_id): Path<String>,
    call: Call,
) -> Result<Json<Instance>, HttpError> {
    let reply = core.control.resume_agent(call.request(ResumeAgentRequest { instance_id })).await?.into_inner();
    Ok(Json(reply.instance.unwrap_or_default()))
}
