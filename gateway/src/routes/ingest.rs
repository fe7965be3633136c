//! Custom runtime ingest (`/api/v1/runs...`, JSON) and node push (`/ingest/heartbeat`,
//! `/ingest/batch`, protobuf or JSON) over `IngestService`.

use axum::{
    Json,
    extract::{Path, Request, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use http::header::{ACCEPT, CONTENT_TYPE};
use prost::Message;
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        AddRunEventsRequest, AddRunEventsResponse, CreateRunRequest, CreateRunResponse, EndRunRequest, EndRunResponse,
        GetRunRequest, HeartbeatRequest, PushBatchRequest, Run, RunEvent,
    },
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use crate::{
    Call, Core, HttpError, JsonBody,
    api::{Body, Endpoint, Routes},
    codec::{Encoding, decode},
};

const CREATE_RUN: Endpoint =
    Endpoint::post("/api/v1/runs", "Starts a custom run: activity of a runtime that does not speak OTLP.")
        .body("CreateRunRequest")
        .answers_with(201, "CreateRunResponse");

const GET_RUN: Endpoint = Endpoint::get("/api/v1/runs/{run_id}", "One run with its event counts.")
    .answers("Run")
    .errors(&[ErrorReason::NotFound]);

const RUN_EVENTS: Endpoint = Endpoint::post(
    "/api/v1/runs/{run_id}/events",
    "Adds events to a run, idempotent on each event's `id`. Fields of an event that roost does not name are kept in \
     its `data`.",
)
.body_of(Body::JsonText("`{\"event\": RunEvent}` or `{\"events\": [RunEvent, …]}` (at most 1000)"))
.answers("AddRunEventsResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

const END_RUN: Endpoint = Endpoint::post("/api/v1/runs/{run_id}/end", "Ends a run, optionally with a status.")
    .body("EndRunRequest")
    .answers("EndRunResponse")
    .errors(&[ErrorReason::NotFound]);

const HEARTBEAT: Endpoint = Endpoint::post(
    "/ingest/heartbeat",
    "A node's heartbeat to its upstream (node token as the bearer key); answers the node's plan and settings.",
)
.body_of(Body::ProtobufOrJson("HeartbeatRequest"))
.answers("HeartbeatResponse");

const PUSH_BATCH: Endpoint = Endpoint::post(
    "/ingest/batch",
    "A node pushes a batch of its observed activity upstream (node token as the bearer key); idempotent per batch.",
)
.body_of(Body::ProtobufOrJson("PushBatchRequest"))
.answers("PushBatchResponse");

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Custom runs and node push",
        "Activity from runtimes without OTLP (runs and events), and from other roost nodes (heartbeat, batches).",
    )
    .at(&CREATE_RUN, create_run)
    .at(&GET_RUN, get_run)
    .at(&RUN_EVENTS, add_events)
    .at(&END_RUN, end_run)
    .at(&HEARTBEAT, heartbeat)
    .at(&PUSH_BATCH, push_batch)
}

fn run_id(path: Result<Path<String>, axum::extract::rejection::PathRejection>) -> Result<String, HttpError> {
    path.map(|Path(id)| id).map_err(|e| HttpError(ApiError::invalid_argument(format!("bad run id in the path: {e}"))))
}

/// `POST /api/v1/runs`: 201 `{ok, run_id}`.
async fn create_run(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateRunRequest>,
) -> Result<(StatusCode, Json<CreateRunResponse>), HttpError> {
    Ok((StatusCode::CREATED, Json(core.ingest.create_run(call.request(req)).await?.into_inner())))
}

/// `GET /api/v1/runs/{run_id}`: the run with its counts.
async fn get_run(
    State(core): State<Core>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    call: Call,
) -> Result<Json<Option<Run>>, HttpError> {
    let req = GetRunRequest { run_id: run_id(path)? };
    Ok(Json(core.ingest.get_run(call.request(req)).await?.into_inner().run))
}

/// `POST /api/v1/runs/{run_id}/events` with `{event}` or `{events: [...]}`.
///
/// Fields of an event that roost does not name are kept in its `data` rather than refused,
/// so clients that send more than ClawMetry's documented fields keep working (unknown
/// fields of the request itself are still a 400).
async fn add_events(
    State(core): State<Core>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    call: Call,
    JsonBody(mut body): JsonBody<Value>,
) -> Result<Json<AddRunEventsResponse>, HttpError> {
    if let Some(event) = body.get_mut("event") {
        fold_unknown_fields(event);
    }
    if let Some(Value::Array(events)) = body.get_mut("events") {
        events.iter_mut().for_each(fold_unknown_fields);
    }
    let mut req: AddRunEventsRequest = serde_json::from_value(body)
        .map_err(|e| HttpError(ApiError::invalid_argument(format!("invalid JSON body: {e}"))))?;
    req.run_id = run_id(path)?;
    Ok(Json(core.ingest.add_run_events(call.request(req)).await?.into_inner()))
}

/// Moves an event's unknown fields into its `data` (an object; a non-object `data` becomes
/// `{"value": data}` first).
fn fold_unknown_fields(event: &mut Value) {
    let Some(fields) = event.as_object_mut() else { return };
    let known = serde_json::to_value(RunEvent::default()).unwrap_or_default();
    let unknown: Vec<String> = fields.keys().filter(|k| known.get(k.as_str()).is_none()).cloned().collect();
    if unknown.is_empty() {
        return;
    }
    let mut data = match fields.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(other) => Map::from_iter([("value".to_owned(), other)]),
    };
    for key in unknown {
        if let Some(value) = fields.remove(&key) {
            data.entry(key).or_insert(value);
        }
    }
    fields.insert("data".to_owned(), Value::Object(data));
}

/// `POST /api/v1/runs/{run_id}/end`, optionally `{status}`.
async fn end_run(
    State(core): State<Core>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    call: Call,
    JsonBody(mut req): JsonBody<EndRunRequest>,
) -> Result<Json<EndRunResponse>, HttpError> {
    req.run_id = run_id(path)?;
    Ok(Json(core.ingest.end_run(call.request(req)).await?.into_inner()))
}

/// `POST /ingest/heartbeat` (node token as the bearer key).
async fn heartbeat(State(core): State<Core>, req: Request) -> Response {
    node_call::<HeartbeatRequest, _, _, _>(
        core.clone(),
        req,
        |core, call| async move { core.ingest.heartbeat(call).await },
    )
    .await
}

/// `POST /ingest/batch` (node token as the bearer key).
async fn push_batch(State(core): State<Core>, req: Request) -> Response {
    node_call::<PushBatchRequest, _, _, _>(
        core.clone(),
        req,
        |core, call| async move { core.ingest.push_batch(call).await },
    )
    .await
}

/// Decodes a node's message (protobuf or JSON), calls the service, answers in the same
/// encoding (or protobuf when the node accepts only that).
async fn node_call<Req, Resp, F, Fut>(core: Core, req: Request, call_service: F) -> Response
where
    Req: Message + Default + DeserializeOwned,
    Resp: Message + Serialize,
    F: FnOnce(Core, tonic::Request<Req>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    let limit = core.options.max_otlp_body_bytes;
    let wants_protobuf =
        req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("protobuf"));
    let (parts, body) = req.into_parts();
    let call = Call::from_parts(&parts);
    let (message, encoding, _held) =
        match decode::<Req>(Request::from_parts(parts, body), limit, &core.ingest_budget).await {
            Ok(decoded) => decoded,
            Err((err, _)) => return HttpError(err).into_response(),
        };
    match call_service(core, call.request(message)).await {
        Ok(resp) if encoding == Encoding::Protobuf || wants_protobuf => {
            ([(CONTENT_TYPE, Encoding::Protobuf.content_type())], resp.into_inner().encode_to_vec()).into_response()
        }
        Ok(resp) => Json(resp.into_inner()).into_response(),
        Err(status) => HttpError::from(status).into_response(),
    }
}
