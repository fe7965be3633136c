//! The control endpoints, over `ControlService`.

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use roost_proto::ErrorReason;
use roost_proto::v1::{Instance, PauseAgentRequest, RestartRequest, RestartResponse, ResumeAgentRequest};

use crate::{
    Call, Core, HttpError,
    api::{Endpoint, Routes},
};

const RESTART: Endpoint = Endpoint::post(
    "/api/control/restart",
    "Restarts the daemon in place: it stops gracefully and starts again moments later.",
)
.answers_with(202, "RestartResponse");

const PAUSE: Endpoint =
    Endpoint::post("/api/control/agents/{id}/pause", "Pauses any hosted agent (operator action); answers the agent.")
        .answers("Instance")
        .errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

const RESUME: Endpoint =
    Endpoint::post("/api/control/agents/{id}/resume", "Resumes any hosted agent (operator action); answers the agent.")
        .answers("Instance")
        .errors(&[ErrorReason::InsufficientCredits, ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) fn routes() -> Routes {
    Routes::new("Control", "Narrow operator actions from the dashboard; origin-checked.")
        .at(&RESTART, restart)
        .at(&PAUSE, pause)
        .at(&RESUME, resume)
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
