//! The self-updater's routes, `/api/update-check/*`, over `UpdateService`.

use axum::{Json, extract::State};
use roost_proto::v1::{
    CheckNowRequest, CheckNowResponse, DismissRequest, DismissResponse, GetUpdateConfigRequest,
    GetUpdateConfigResponse, GetUpdateStatusRequest, GetUpdateStatusResponse, ListUpdateHistoryRequest,
    ListUpdateHistoryResponse, SetUpdateConfigRequest, SetUpdateConfigResponse,
};

use crate::{
    Call, Core, HttpError, JsonBody, LimitQuery,
    api::{Endpoint, Routes},
};

const STATUS: Endpoint = Endpoint::get(
    "/api/update-check/status",
    "The running and latest versions, whether an update is available, the last check and install attempt, the \
     rollback record, versions held back (failed or refused) and why, and the update settings (role, cadence, \
     minimum age, kill switch, the repository releases must name, the release key).",
)
.answers("GetUpdateStatusResponse");

const CONFIG: Endpoint =
    Endpoint::get("/api/update-check/config", "The node's stored update flags and what they mean now.")
        .answers("GetUpdateConfigResponse");

const SET_CONFIG: Endpoint = Endpoint::post(
    "/api/update-check/config",
    "Sets `auto_update` for this node: an explicit choice that plan sync never overrides. The kill switch \
     (SERVICE_AUTO_UPDATE=off) still wins.",
)
.body("SetUpdateConfigRequest")
.answers("SetUpdateConfigResponse");

const CHECK_NOW: Endpoint = Endpoint::post(
    "/api/update-check/check-now",
    "Polls the package index now, and installs the chosen release when auto_update is on.",
)
.answers("CheckNowResponse");

const DISMISS: Endpoint = Endpoint::post("/api/update-check/dismiss", "Hides the update banner for one version.")
    .body("DismissRequest")
    .answers("DismissResponse");

const HISTORY: Endpoint =
    Endpoint::get("/api/update-check/history", "Past checks, installs, rollbacks and flag changes, newest first.")
        .params(&[("limit", "Most events; default 50, clamped to [1, 100].")])
        .answers("ListUpdateHistoryResponse");

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Self-update",
        "The daemon keeps itself current: it polls the package index, installs newer releases, restarts, and rolls \
         back a release that crash-loops. These routes show and steer it.",
    )
    .at(&STATUS, status)
    .at(&CONFIG, config)
    .at(&SET_CONFIG, set_config)
    .at(&CHECK_NOW, check_now)
    .at(&DISMISS, dismiss)
    .at(&HISTORY, history)
}

async fn status(State(core): State<Core>, call: Call) -> Result<Json<GetUpdateStatusResponse>, HttpError> {
    Ok(Json(core.updates.get_update_status(call.request(GetUpdateStatusRequest {})).await?.into_inner()))
}

async fn config(State(core): State<Core>, call: Call) -> Result<Json<GetUpdateConfigResponse>, HttpError> {
    Ok(Json(core.updates.get_update_config(call.request(GetUpdateConfigRequest {})).await?.into_inner()))
}

async fn set_config(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<SetUpdateConfigRequest>,
) -> Result<Json<SetUpdateConfigResponse>, HttpError> {
    Ok(Json(core.updates.set_update_config(call.request(req)).await?.into_inner()))
}

async fn check_now(State(core): State<Core>, call: Call) -> Result<Json<CheckNowResponse>, HttpError> {
    Ok(Json(core.updates.check_now(call.request(CheckNowRequest {})).await?.into_inner()))
}

async fn dismiss(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<DismissRequest>,
) -> Result<Json<DismissResponse>, HttpError> {
    Ok(Json(core.updates.dismiss(call.request(req)).await?.into_inner()))
}

async fn history(
    State(core): State<Core>,
    LimitQuery { limit }: LimitQuery,
    call: Call,
) -> Result<Json<ListUpdateHistoryResponse>, HttpError> {
    let req = ListUpdateHistoryRequest { limit: limit.unwrap_or_default() };
    Ok(Json(core.updates.list_update_history(call.request(req)).await?.into_inner()))
}
