//! Scores (`/api/v1/scores`) over `ScoreService`.

use axum::{
    Json,
    extract::{Path, Query, State},
    http::StatusCode,
};
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        CreateScoresRequest, CreateScoresResponse, DeleteScoreRequest, DeleteScoreResponse, ListScoresRequest,
        ListScoresResponse,
    },
};

use crate::{
    Call, Core, HttpError, JsonBody,
    api::{Endpoint, Routes},
};

const CREATE: Endpoint = Endpoint::post(
    "/api/v1/scores",
    "Records scores: `{\"score\": Score}` or `{\"scores\": [Score, …]}` (at most 1000, all or none). A score has a \
     `name`, a `value` (a number, true/false or a category), one target (`trace_id`, `trace_id` + `span_id`, \
     `session_id` or `turn_id`), and optionally a `comment`, a `source` (api, human or eval), an `author`, a `time` \
     and an `id` (a score given again under its id replaces it).",
)
.body("CreateScoresRequest")
.answers_with(201, "CreateScoresResponse")
.errors(&[ErrorReason::NotFound]);

const LIST: Endpoint = Endpoint::get(
    "/api/v1/scores",
    "The scores of one target, newest first: a trace's include its spans' and its turn's, a session's everything in it.",
)
.params(&[
    ("trace_id", "Scores on this trace."),
    ("session_id", "Scores on this session."),
    ("turn_id", "Scores on this hosted turn."),
    ("name", "Only scores with this name."),
    ("limit", "Most scores; default 200, clamped to [1, 1000]."),
])
.answers("ListScoresResponse");

const DELETE: Endpoint = Endpoint::delete("/api/v1/scores/{id}", "Deletes a score.")
    .answers("DeleteScoreResponse")
    .errors(&[ErrorReason::NotFound]);

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Scores",
        "Judgements of observed work: numbers, yes/no or categories on a trace, span, session or turn.",
    )
    .at(&CREATE, create)
    .at(&LIST, list)
    .at(&DELETE, delete)
}

/// `POST /api/v1/scores`: 201 with the scores as recorded.
async fn create(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateScoresRequest>,
) -> Result<(StatusCode, Json<CreateScoresResponse>), HttpError> {
    Ok((StatusCode::CREATED, Json(core.scores.create_scores(call.request(req)).await?.into_inner())))
}

/// `?trace_id=…&name=…&limit=…` of the list.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    #[serde(default)]
    trace_id: String,
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    turn_id: String,
    #[serde(default)]
    name: String,
    limit: Option<i32>,
}

/// `GET /api/v1/scores?…`: `{scores: [...]}`.
async fn list(
    State(core): State<Core>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
    call: Call,
) -> Result<Json<ListScoresResponse>, HttpError> {
    let Query(q) = query.map_err(|e| HttpError::new(ErrorReason::InvalidArgument, e.body_text()))?;
    let req = ListScoresRequest {
        trace_id: q.trace_id,
        session_id: q.session_id,
        turn_id: q.turn_id,
        name: q.name,
        limit: q.limit.unwrap_or_default(),
    };
    Ok(Json(core.scores.list_scores(call.request(req)).await?.into_inner()))
}

/// `DELETE /api/v1/scores/{id}`.
async fn delete(
    State(core): State<Core>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
    call: Call,
) -> Result<Json<DeleteScoreResponse>, HttpError> {
    let Path(id) = path.map_err(|e| HttpError(ApiError::invalid_argument(format!("bad score id in the path: {e}"))))?;
    Ok(Json(core.scores.delete_score(call.request(DeleteScoreRequest { id })).await?.into_inner()))
}
