//! The hosted agent API (docs/hosting.md), over `AgentService`.

use axum::{
    Json,
    extract::{Path, Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::StreamExt as _;
use roost_proto::v1::{
    ConfigureRequest, ConfigureResponse, DeliverTelegramUpdateRequest, DeliverTelegramUpdateResponse, DestroyRequest,
    DestroyResponse, GetActivityRequest, GetActivityResponse, GetChannelRequest, GetInstanceRequest, Instance,
    ListInstancesRequest, ListRuntimesRequest, PairChannelRequest, PairChannelResponse, PauseRequest, PauseResponse,
    ProvisionRequest, ProvisionResponse, RateTurnRequest, RateTurnResponse, ResumeRequest, ResumeResponse, Runtime,
    SendMessageRequest, StreamMessageRequest, StreamMessageResponse, TelegramChannel,
};
use roost_proto::{ApiError, ErrorReason};

use roost_kit::streams::RpcStream;

use crate::{
    Call, Core, HttpError, InstanceId, JsonBody, LimitQuery,
    api::{Answer, Body, Endpoint, Routes},
    codec::read_limited,
};

/// Tells the core a message came over REST (MCP says "mcp"; gRPC clients say nothing).
const SOURCE: (&str, &str) = ("x-roost-source", "api");

pub(crate) const RUNTIMES: Endpoint = Endpoint::get(
    "/api/runtimes",
    "The runtime catalogue: the `id`s `POST /api/provision` takes, with prices and channels. No key needed.",
)
.answer_of(Answer::JsonArray("Runtime"));

pub(crate) const PROVISION: Endpoint = Endpoint::post(
    "/api/provision",
    "Creates an agent and debits its first 30-day period (the account's first agent is free). The agent boots \
     asynchronously: poll `GET /api/instances/{instance_id}` until `status` is `running` (1 to 2 minutes for real \
     runtimes). One deploy per account settles at a time.",
)
.body("ProvisionRequest")
.answers_with(201, "ProvisionResponse")
.errors(&[ErrorReason::InsufficientCredits, ErrorReason::DeploySettling]);

pub(crate) const INSTANCES: Endpoint =
    Endpoint::get("/api/instances", "The caller's agents, newest first (destroyed ones are not listed).")
        .answer_of(Answer::JsonArray("Instance"));

pub(crate) const INSTANCE: Endpoint =
    Endpoint::get("/api/instances/{instance_id}", "One agent: status, config flags (never secret values), brief.")
        .answers("Instance")
        .errors(&[ErrorReason::NotFound]);

pub(crate) const ACTIVITY: Endpoint = Endpoint::get(
    "/api/instances/{instance_id}/activity",
    "The agent's recent turns and credit charges, newest first; readable after destroy, so the refund shows.",
)
.params(&[("limit", "Most turns and most charges to return; default 50, clamped to [1, 500].")])
.answers("GetActivityResponse")
.errors(&[ErrorReason::NotFound]);

pub(crate) const MESSAGES: Endpoint = Endpoint::post(
    "/api/instances/{instance_id}/messages",
    "Sends one message and waits for the reply (a synchronous turn). Turns to one agent run one at a time in \
     arrival order; a turn is capped at 900 s, so use a client time-out of 910 s. With `Accept: text/plain` the \
     answer is just the reply text. With `Accept: text/event-stream` the turn streams as server-sent events: \
     `delta` ({text}: the reply as it is written), `tool` (a ToolStep, when a tool starts and when it ends), then \
     `done` (this SendMessageResponse) or `error` ({error, code}); hanging up cancels the turn.",
)
.body("SendMessageRequest")
.answers("SendMessageResponse")
.errors(&[
    ErrorReason::InsufficientCredits,
    ErrorReason::NotFound,
    ErrorReason::WrongState,
    ErrorReason::QueueFull,
    ErrorReason::RuntimeFailed,
    ErrorReason::TurnTimeout,
    ErrorReason::UnpricedModel,
]);

pub(crate) const RATING: Endpoint = Endpoint::post(
    "/api/instances/{instance_id}/turns/{turn_id}/rating",
    "Rates one of the agent's replies: `value` is `true` or `false` (thumbs up or down, the score `thumbs`) or a \
     number from 1 to 5 (the score `rating`), with an optional `comment`. It is kept as a `human` score on the turn, \
     authored by the account, and read with the dashboard's scores; rating the same turn again replaces it. A turn \
     that is not this agent's is 404.",
)
.body("RateTurnRequest")
.answers("RateTurnResponse")
.errors(&[ErrorReason::NotFound]);

pub(crate) const CONFIG: Endpoint = Endpoint::post(
    "/api/instances/{instance_id}/config",
    "Changes the name, brief, model, model key or chat bot token (only fields present change). A running agent \
     restarts to apply it (a new name alone restarts nothing); a paused one applies it on resume.",
)
.body("ConfigureRequest")
.answers("ConfigureResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState, ErrorReason::UnpricedModel]);

pub(crate) const PAUSE: Endpoint =
    Endpoint::post("/api/instances/{instance_id}/pause", "Stops a running agent's machine.")
        .body("PauseRequest")
        .answers("PauseResponse")
        .errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) const RESUME: Endpoint = Endpoint::post(
    "/api/instances/{instance_id}/resume",
    "Boots a paused or failed agent again; a suspended one first pays its renewal.",
)
.body("ResumeRequest")
.answers("ResumeResponse")
.errors(&[ErrorReason::InsufficientCredits, ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) const DESTROY: Endpoint = Endpoint::post(
    "/api/instances/{instance_id}/destroy",
    "Removes the agent for good and refunds the unused part of its paid period.",
)
.body("DestroyRequest")
.answers("DestroyResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) const CHANNEL: Endpoint = Endpoint::get(
    "/api/instances/{instance_id}/channel",
    "The agent's Telegram channel: the bot's username, allowed chats, chats waiting for approval (without their \
     codes), when the last update came, messages in and out, the last error, and chats that blocked the bot.",
)
.answers("TelegramChannel")
.errors(&[ErrorReason::NotFound]);

pub(crate) const PAIR: Endpoint = Endpoint::post(
    "/api/instances/{instance_id}/channel/pair",
    "Approves a pairing code: a chat that is not allowed gets a one-time code from the bot (valid one hour); the \
     owner sends it here and the chat joins `MESSAGING_ALLOWED_CHAT_IDS`. 404 for an unknown or expired code.",
)
.body("PairChannelRequest")
.answers("PairChannelResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) const TELEGRAM_WEBHOOK: Endpoint = Endpoint::post(
    "/telegram/{instance_id}",
    "Telegram's webhook (with `--telegram-mode webhook`): one Update, verified by the \
     `X-Telegram-Bot-Api-Secret-Token` header roost gave Telegram with setWebhook. Stored once (Telegram's \
     retries are answered 200), then answered like a polled update.",
)
.body_of(Body::JsonText("a Telegram Update, exactly as Telegram sends it"))
.answers("DeliverTelegramUpdateResponse")
.errors(&[ErrorReason::Unauthenticated]);

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Hosted agents",
        "Create agents from the runtime catalogue, message them, reconfigure, pause, resume and destroy them. \
         Every route but `/api/runtimes` needs `Authorization: Bearer <API_KEY>`; an agent that is not the \
         caller's is 404.",
    )
    .at(&RUNTIMES, list_runtimes)
    .at(&PROVISION, provision)
    .at(&INSTANCES, list_instances)
    .at(&INSTANCE, get_instance)
    .at(&ACTIVITY, activity)
    .at(&MESSAGES, send_message)
    .at(&RATING, rate_turn)
    .at(&CONFIG, configure)
    .at(&PAUSE, pause)
    .at(&RESUME, resume)
    .at(&DESTROY, destroy)
    .at(&CHANNEL, get_channel)
    .at(&PAIR, pair_channel)
    .at(&super::agent_files::FILES, super::agent_files::list_files)
    .at(&super::agent_files::FILE, super::agent_files::read_file)
    .at(&TELEGRAM_WEBHOOK, telegram_webhook)
}

/// `GET /api/instances/{id}/channel`: the channel object.
async fn get_channel(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    call: Call,
) -> Result<Json<Option<TelegramChannel>>, HttpError> {
    let resp = core.agents.get_channel(call.request(GetChannelRequest { instance_id })).await?;
    Ok(Json(resp.into_inner().channel))
}

/// `POST /api/instances/{id}/channel/pair {code}`.
async fn pair_channel(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    call: Call,
    JsonBody(mut req): JsonBody<PairChannelRequest>,
) -> Result<Json<PairChannelResponse>, HttpError> {
    req.instance_id = instance_id;
    Ok(Json(core.agents.pair_channel(call.request(req)).await?.into_inner()))
}

/// `POST /telegram/{id}`: the body goes to the core as it came; the core checks the secret.
async fn telegram_webhook(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    request: Request,
) -> Result<Json<DeliverTelegramUpdateResponse>, HttpError> {
    let (parts, body) = request.into_parts();
    let secret_token = parts
        .headers
        .get("x-telegram-bot-api-secret-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let payload = read_limited(body, core.options.max_json_body_bytes).await?.to_vec();
    let req = DeliverTelegramUpdateRequest { instance_id, secret_token, payload };
    Ok(Json(core.agents.deliver_telegram_update(Call::from_parts(&parts).request(req)).await?.into_inner()))
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
    if prefers_event_stream(&headers) {
        let req = StreamMessageRequest { instance_id: req.instance_id, text: req.text };
        let events = core.agents.stream_message(call.with_header(SOURCE.0, SOURCE.1).request(req)).await?.into_inner();
        return Ok(turn_events(&core, events));
    }
    let turn = core.agents.send_message(call.with_header(SOURCE.0, SOURCE.1).request(req)).await?.into_inner();
    if prefers_text(&headers) {
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], turn.reply).into_response());
    }
    Ok(Json(turn).into_response())
}

/// A streamed turn as server-sent events: `delta` (`{"text"}`), `tool` (a `ToolStep`),
/// then `done` (the `SendMessageResponse`), or `error` (`{"error", "code"}`, as the
/// synchronous call's error body) when the turn fails. Each event is sent as it happens;
/// the client hanging up drops the stream, which cancels the turn.
pub(crate) fn turn_events(core: &Core, events: RpcStream<StreamMessageResponse>) -> Response {
    let items = events.map(|item| {
        let event = match item {
            Ok(StreamMessageResponse { delta: Some(delta), .. }) => Event::default().event("delta").json_data(delta),
            Ok(StreamMessageResponse { tool: Some(step), .. }) => Event::default().event("tool").json_data(step),
            Ok(StreamMessageResponse { done: Some(answer), .. }) => Event::default().event("done").json_data(answer),
            Ok(_) => return Ok(Event::default().comment("empty")),
            Err(status) => Event::default().event("error").json_data(ApiError::from_status(&status).to_json()),
        };
        Ok::<_, std::convert::Infallible>(event.unwrap_or_else(|_| Event::default().comment("unencodable")))
    });
    let mut response = Sse::new(items)
        .keep_alive(KeepAlive::new().interval(core.options.sse_keepalive).text("keepalive"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// `POST /api/instances/{id}/turns/{turn_id}/rating {value, comment}`: the score as recorded.
async fn rate_turn(
    State(core): State<Core>,
    path: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    call: Call,
    JsonBody(mut req): JsonBody<RateTurnRequest>,
) -> Result<Json<RateTurnResponse>, HttpError> {
    let Path((instance_id, turn_id)) =
        path.map_err(|err| HttpError::new(ErrorReason::InvalidArgument, format!("bad path: {}", err.body_text())))?;
    req.instance_id = instance_id;
    req.turn_id = turn_id;
    Ok(Json(core.agents.rate_turn(call.request(req)).await?.into_inner()))
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
/// Whether the client asked for the turn as it happens (`Accept: text/event-stream`,
/// before any JSON or text type).
fn prefers_event_stream(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    for media in accept.split(',').map(|m| m.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()) {
        match media.as_str() {
            "text/event-stream" => return true,
            "application/json" | "application/*" | "text/plain" | "text/*" | "*/*" => return false,
            _ => {}
        }
    }
    false
}

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

    #[test]
    fn events_only_when_asked_for_first() {
        assert!(prefers_event_stream(&accept("text/event-stream")));
        assert!(prefers_event_stream(&accept("text/event-stream, application/json")));
        assert!(!prefers_event_stream(&accept("application/json, text/event-stream")));
        assert!(!prefers_event_stream(&accept("*/*")));
        assert!(!prefers_text(&accept("text/event-stream")));
    }
}
