//! The q/1 routes: `POST /api/local/query {shape, args}` (`{shape: "?"}` lists the
//! registry), `POST /api/local/export {shape, args, format}` and `GET
//! /api/local/sessions?limit=`, over `QueryService`.

use axum::{
    Json,
    body::Body,
    extract::State,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use futures::StreamExt as _;
use roost_proto::{
    ErrorReason,
    v1::{ExportRequest, ListSessionsRequest, ListSessionsResponse, ListShapesRequest, QueryRequest},
};

use crate::{
    Call, Core, HttpError, JsonBody, LimitQuery,
    api::{Answer, Endpoint, Routes},
};

pub(crate) const QUERY: Endpoint = Endpoint::post(
    "/api/local/query",
    "Runs one shape of the versioned q/1 query contract over observed activity. `{\"shape\": \"?\"}` answers the \
     registry instead: every shape with its arguments, types, defaults and limits.",
)
.body("QueryRequest")
.answers("QueryResponse");

pub(crate) const SESSIONS: Endpoint =
    Endpoint::get("/api/local/sessions", "Recent sessions (the `sessions` shape with only a limit).")
        .params(&[("limit", "Most sessions to return (the shape's default and clamp apply).")])
        .answers("ListSessionsResponse");

pub(crate) const EXPORT: Endpoint = Endpoint::post(
    "/api/local/export",
    "Exports every row a list shape's arguments select, as CSV (`format: \"csv\"`: a header row, then RFC 4180 \
     rows) or JSON Lines (`format: \"jsonl\"`), streamed as it is read: no limit, offset or size budget applies. \
     Text cells a spreadsheet would run as a formula get a `'` before them in CSV.",
)
.body("ExportRequest")
.answer_of(Answer::Document("text/csv, application/x-ndjson"))
.errors(&[ErrorReason::RateLimited]);

pub(crate) fn routes() -> Routes {
    Routes::new("Query (q/1)", "Read observed activity: sessions, spans, traces, runs, usage and more.")
        .at(&QUERY, query)
        .at(&EXPORT, export)
        .at(&SESSIONS, sessions)
}

/// The export's file as the body, in the format asked for, named for download.
async fn export(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<ExportRequest>,
) -> Result<Response, HttpError> {
    let name = format!("{}.{}", req.shape, if req.format == "jsonl" { "jsonl" } else { "csv" });
    let parts = core.query.export(call.request(req)).await?.into_inner();
    Ok(export_file(parts, &name))
}

/// A streamed export as a download named `name` (`sessions.csv`): its media type from the
/// name's extension. A failure after the first byte cuts the body short (the status was
/// sent already); the client sees an incomplete transfer, not a file that looks whole.
pub(crate) fn export_file(
    parts: roost_kit::streams::RpcStream<roost_proto::v1::ExportResponse>,
    name: &str,
) -> Response {
    let body = Body::from_stream(parts.map(|part| part.map(|p| bytes::Bytes::from(p.data))));
    let media = if name.ends_with(".jsonl") { "application/x-ndjson" } else { "text/csv; charset=utf-8" };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `{rows, count, shape, contract, elapsed_ms}`; for `{shape: "?"}`, `{contract,
/// allowed_shapes, shapes}` with every shape's arguments.
async fn query(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<QueryRequest>,
) -> Result<Response, HttpError> {
    if req.shape == "?" {
        let shapes = core.query.list_shapes(call.request(ListShapesRequest {})).await?.into_inner();
        return Ok(Json(shapes).into_response());
    }
    Ok(Json(core.query.query(call.request(req)).await?.into_inner()).into_response())
}

async fn sessions(
    State(core): State<Core>,
    LimitQuery { limit }: LimitQuery,
    call: Call,
) -> Result<Json<ListSessionsResponse>, HttpError> {
    let req = ListSessionsRequest { limit: limit.unwrap_or_default() };
    Ok(Json(core.query.list_sessions(call.request(req)).await?.into_inner()))
}
