//! The SSE routes over `StreamService`: `/api/brain-stream`, `/api/health-stream`,
//! `/api/logs`.
//!
//! Each item is one SSE event with `id:` (its stream id) and the JSON of the item as
//! `data:`; a `Last-Event-ID` header (sent by EventSource on reconnect) or
//! `?last_event_id=` resumes after that id. A client that fell behind gets `event:
//! lagged` with `{"skipped": n}` and continues. Comments (`: keepalive`) keep idle
//! connections open through proxies; `X-Accel-Buffering: no` asks nginx not to buffer.

use axum::{
    extract::{FromRequestParts, Query, State},
    http::{HeaderMap, HeaderValue, header, request::Parts},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt as _};
use roost_proto::{
    ErrorReason,
    v1::{BrainStreamRequest, HealthStreamRequest, LogStreamRequest},
};
use serde::Serialize;

use crate::{
    Call, Core, HttpError,
    api::{Answer, Endpoint, Routes},
};

const STREAM_PARAMS: &[(&str, &str)] = &[
    ("last_event_id", "Resume after this event id (the `Last-Event-ID` header does the same)."),
    ("token", "A dashboard token, for EventSource clients that cannot send `Authorization`."),
];

const BRAIN: Endpoint = Endpoint::get(
    "/api/brain-stream",
    "Live agent activity: ingested spans, run events and hosted-agent turns, one event each.",
)
.params(STREAM_PARAMS)
.answer_of(Answer::Sse("BrainEvent"))
.errors(&[ErrorReason::QueueFull]);

const HEALTH: Endpoint = Endpoint::get("/api/health-stream", "The health report on a cadence and whenever it changes.")
    .params(STREAM_PARAMS)
    .answer_of(Answer::Sse("HealthReport"))
    .errors(&[ErrorReason::QueueFull]);

const LOGS: Endpoint = Endpoint::get("/api/logs", "Ingested log records and roost's own log lines.")
    .params(&[
        ("level", "Lowest level to send: trace, debug, info, warn or error (default info)."),
        ("last_event_id", "Resume after this event id (the `Last-Event-ID` header does the same)."),
        ("token", "A dashboard token, for EventSource clients that cannot send `Authorization`."),
    ])
    .answer_of(Answer::Sse("LogLine"))
    .errors(&[ErrorReason::QueueFull]);

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Live streams (SSE)",
        "Server-sent events with `id:` on every event; reconnect with `Last-Event-ID` to get what was missed from a \
         bounded buffer. A client that falls behind gets `event: lagged` with `{\"skipped\": n}`. Past the client \
         cap: 429.",
    )
    .at(&BRAIN, brain)
    .at(&HEALTH, health)
    .at(&LOGS, logs)
}

/// The query parameters the stream routes read (`token` is the access layer's; others
/// are ignored, as a browser may add its own).
#[derive(Debug, Default, serde::Deserialize)]
struct StreamQuery {
    last_event_id: Option<String>,
    level: Option<String>,
}

/// Where to resume and, for the log stream, the level.
struct Resume {
    last_event_id: u64,
    level: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Resume {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(query) = Query::<StreamQuery>::from_request_parts(parts, state).await.map_err(|err| {
            HttpError::new(ErrorReason::InvalidArgument, format!("bad query string: {}", err.body_text()))
        })?;
        let header = parts.headers.get("last-event-id").map(|v| v.to_str().unwrap_or("(not text)").to_owned());
        let last_event_id = match header.or(query.last_event_id) {
            None => 0,
            Some(id) if id.trim().is_empty() => 0,
            Some(id) => id.trim().parse().map_err(|_| {
                HttpError::new(
                    ErrorReason::InvalidArgument,
                    format!("Last-Event-ID {id:?} is not an id of this stream"),
                )
            })?,
        };
        Ok(Self { last_event_id, level: query.level.unwrap_or_default() })
    }
}

/// An SSE response of `items`, each already an event.
fn sse<S>(core: &Core, items: S) -> Response
where
    S: Stream<Item = Result<Event, tonic::Status>> + Send + 'static,
{
    let mut response = Sse::new(items)
        .keep_alive(KeepAlive::new().interval(core.options.sse_keepalive).text("keepalive"))
        .into_response();
    let headers: &mut HeaderMap = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The event of one item: its JSON, or the lagged notice when `lagged` is non-zero.
fn event<T: Serialize>(id: u64, item: Option<&T>, lagged: u64) -> Event {
    let event = Event::default().id(id.to_string());
    match item {
        Some(item) if lagged == 0 => event.json_data(item).unwrap_or_else(|_| Event::default().comment("unencodable")),
        _ => event.event("lagged").data(format!("{{\"skipped\":{lagged}}}")),
    }
}

async fn brain(State(core): State<Core>, resume: Resume, call: Call) -> Result<Response, HttpError> {
    let req = BrainStreamRequest { last_event_id: resume.last_event_id };
    let items = core.streams.brain_stream(call.request(req)).await?.into_inner();
    Ok(sse(&core, items.map(|r| r.map(|i| event(i.id, i.event.as_ref(), i.lagged)))))
}

async fn health(State(core): State<Core>, resume: Resume, call: Call) -> Result<Response, HttpError> {
    let req = HealthStreamRequest { last_event_id: resume.last_event_id };
    let items = core.streams.health_stream(call.request(req)).await?.into_inner();
    Ok(sse(&core, items.map(|r| r.map(|i| event(i.id, i.report.as_ref(), i.lagged)))))
}

async fn logs(State(core): State<Core>, resume: Resume, call: Call) -> Result<Response, HttpError> {
    let req = LogStreamRequest { last_event_id: resume.last_event_id, level: resume.level };
    let items = core.streams.log_stream(call.request(req)).await?.into_inner();
    Ok(sse(&core, items.map(|r| r.map(|i| event(i.id, i.line.as_ref(), i.lagged)))))
}
