//! The hosted agent API of seeds/hosted-agent-api.md, over `AgentService`.

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use roost_proto::v1::{
    ConfigureRequest, ConfigureResponse, DestroyRequest, DestroyResponse, GetActivityRequest, GetActivityResponse,
    GetInstanceRequest, Instance, ListInstancesRequest, ListRuntimesRequest, PauseRequest, PauseResponse,
    ProvisionRequest, ProvisionResponse, ResumeRequest, ResumeResponse, Runtime, SendMessageRequest,
};

use crate::{Call, Core, HttpError, InstanceId, JsonBody, LimitQuery};

/// Tells the core a message came over REST (MCP says "mcp"; gRPC clients say nothing).
const SOURCE: (&str, &str) = ("x-roost-source", "api");

pub(crate) fn routes() -> Router<Core> {
    Router::new()
        .route("/api/runtimes", get(list_runtimes))
        .route("/api/provision", post(provision))
        .route("/api/instances", get(list_instances))
        .route("/api/instances/{instance_id}", get(get_instance))
        .route("/api/instances/{instance_id}/activity", get(activity))
        .route("/api/instances/{instance_id}/messages", post(send_message))
        .route("/api/instances/{instance_id}/config", post(configure))
        .route("/api/instances/{instance_id}/pause", post(pause))
        .route("/api/instances/{instance_id}/resume", post(resume))
        .route("/api/instances/{instance_id}/destroy", post(destroy))
}

/// `GET /api/runtimes`: the catalogue, as a bare array; no key needed.
async fn list_runtimes(State(core): State<Core>, call: Call) -> Result<Json<Vec<Runtime>>, HttpError> {
    Ok(Json(core.agents.list_runtimes(call.request(ListRuntimesRequest {})).await?.into_inner().runtimes))
}

/// `POST /api/provision`: 201 with the instance's fields plus `charged_cents`, `balance_cents`.
async fn provision(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<ProvisionRequest>,
) -> Result<(StatusCode, Json<ProvisionResponse>), HttpError> {
    Ok((StatusCode::CREATED, Json(core.agents.provision(call.request(req)).await?.into_inner())))
}

/// `GET /api/instances`: the caller's agents, as a bare array.
async fn list_instances(State(core): State<Core>, call: Call) -> Result<Json<Vec<Instance>>, HttpError> {
    Ok(Json(core.agents.list_instances(call.request(ListInstancesRequest {})).await?.into_inner().instances))
}

/// `GET /api/instances/{id}`: the instance object.
async fn get_instance(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    call: Call,
) -> Result<Json<Option<Instance>>, HttpError> {
    let resp = core.agents.get_instance(call.request(GetInstanceRequest { instance_id })).await?;
    Ok(Json(resp.into_inner().instance))
}

/// `GET /api/instances/{id}/activity?limit=`: `{turns, charges}`, newest first.
async fn activity(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    LimitQuery { limit }: LimitQuery,
    call: Call,
) -> Result<Json<GetActivityResponse>, HttpError> {
    let req = GetActivityRequest { instance_id, limit: limit.unwrap_or_default() };
    Ok(Json(core.agents.get_activity(call.request(req)).await?.into_inner()))
}

/// `POST /api/instances/{id}/messages {text}`: the turn's JSON, or with `Accept: text/plain`
/// just the reply.
async fn send_message(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    headers: HeaderMap,
    call: Call,
    JsonBody(mut req): JsonBody<SendMessageRequest>,
) -> Result<Response, HttpError> {
    req.instance_id = instance_id;
    let turn = core.agents.send_message(call.with_header(SOURCE.0, SOURCE.1).request(req)).await?.into_inner();
    if prefers_text(&headers) {
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], turn.reply).into_response());
    }
    Ok(Json(turn).into_response())
}

/// `POST /api/instances/{id}/config`: lifecycle answer; a running agent restarts.
async fn configure(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    call: Call,
    JsonBody(mut req): JsonBody<ConfigureRequest>,
) -> Result<Json<ConfigureResponse>, HttpError> {
    req.instance_id = instance_id;
    Ok(Json(core.agents.configure(call.request(req)).await?.into_inner()))
}

/// `POST /api/instances/{id}/pause`.
async fn pause(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    call: Call,
    JsonBody(mut req): JsonBody<PauseRequest>,
) -> Result<Json<PauseResponse>, HttpError> {
    req.instance_id = instance_id;
    Ok(Json(core.agents.pause(call.request(req)).await?.into_inner()))
}

/// `POST /api/instances/{id}/resume`.
async fn resume(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    call: Call,
    JsonBody(mut req): JsonBody<ResumeRequest>,
) -> Result<Json<ResumeResponse>, HttpError> {
    req.instance_id = instance_id;
    Ok(Json(core.agents.resume(call.request(req)).await?.into_inner()))
}

/// `POST /api/instances/{id}/destroy`: adds `refunded_cents`, `balance_cents`.
async fn destroy(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    call: Call,
    JsonBody(mut req): JsonBody<DestroyRequest>,
) -> Result<Json<DestroyResponse>, HttpError> {
    req.instance_id = instance_id;
    Ok(Json(core.agents.destroy(call.request(req)).await?.into_inner()))
}

/// True when the client asked for `text/plain` ahead of JSON.
fn prefers_text(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    for media in accept.split(',').map(|m| m.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()) {
        match media.as_str() {
            "text/plain" | "text/*" => return true,
            "application/json" | "application/*" | "*/*" => return false,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, value.parse().unwrap());
        headers
    }

    #[test]
    fn text_only_when_asked_for_first() {
        assert!(prefers_text(&accept("text/plain")));
        assert!(prefers_text(&accept("text/plain; charset=utf-8, application/json")));
        assert!(!prefers_text(&accept("application/json, text/plain")));
        assert!(!prefers_text(&accept("*/*")));
        assert!(!prefers_text(&HeaderMap::new()));
    }
}
