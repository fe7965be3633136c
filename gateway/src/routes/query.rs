//! The q/1 routes: `POST /api/local/query {shape, args}` (`{shape: "?"}` lists the
//! registry) and `GET /api/local/sessions?limit=`, over `QueryService`.

use axum::{
    Json,
    extract::State,
    response::{IntoResponse, Response},
};
use roost_proto::v1::{ListSessionsRequest, ListSessionsResponse, ListShapesRequest, QueryRequest};

use crate::{
    Call, Core, HttpError, JsonBody, LimitQuery,
    api::{Endpoint, Routes},
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

pub(crate) fn routes() -> Routes {
    Routes::new("Query (q/1)", "Read observed activity: sessions, spans, traces, runs, usage and more.")
        .at(&QUERY, query)
        .at(&SESSIONS, sessions)
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
