//! The q/1 routes: `POST /api/local/query {shape, args}` (`{shape: "?"}` lists the
//! registry) and `GET /api/local/sessions?limit=`, over `QueryService`.

use axum::{
    Json, Router,
    extract::State,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use roost_proto::v1::{ListSessionsRequest, ListSessionsResponse, ListShapesRequest, QueryRequest};

use crate::{Call, Core, HttpError, JsonBody, LimitQuery};

pub(crate) fn routes() -> Router<Core> {
    Router::new().route("/api/local/query", post(query)).route("/api/local/sessions", get(sessions))
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
