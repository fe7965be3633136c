//! LLM judges (`/api/v1/evaluators`) over `EvaluatorService`.

use axum::{
    Json,
    extract::{Path, State},
    http::StatusCode,
};
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        CreateEvaluatorRequest, CreateEvaluatorResponse, DeleteEvaluatorRequest, DeleteEvaluatorResponse,
        GetEvaluatorRequest, GetEvaluatorResponse, ListEvaluatorsRequest, ListEvaluatorsResponse,
        UpdateEvaluatorRequest, UpdateEvaluatorResponse,
    },
};

use crate::{
    Call, Core, HttpError, JsonBody,
    api::{Endpoint, Routes},
};

const CREATE: Endpoint = Endpoint::post(
    "/api/v1/evaluators",
    "Adds an LLM judge: `{\"evaluator\": {name, model, prompt, output, categories?, min?, max?, sample_rate?, \
     filter?, budget_usd}}`. It grades new matching model calls through the model gateway and records each grade as \
     an `eval` score, charging its budget.",
)
.body("CreateEvaluatorRequest")
.answers_with(201, "CreateEvaluatorResponse")
.errors(&[ErrorReason::UnpricedModel, ErrorReason::Unavailable]);

const LIST: Endpoint = Endpoint::get("/api/v1/evaluators", "Every evaluator with its status and spending.")
    .answers("ListEvaluatorsResponse");

const GET: Endpoint = Endpoint::get("/api/v1/evaluators/{id}", "An evaluator and its latest judgements.")
    .answers("GetEvaluatorResponse")
    .errors(&[ErrorReason::NotFound]);

const UPDATE: Endpoint = Endpoint::post(
    "/api/v1/evaluators/{id}",
    "Changes an evaluator (only fields present change): pause or resume it, its sampling rate, budget, prompt or \
     judge model.",
)
.body("UpdateEvaluatorRequest")
.answers("UpdateEvaluatorResponse")
.errors(&[ErrorReason::NotFound]);

const DELETE: Endpoint = Endpoint::delete("/api/v1/evaluators/{id}", "Deletes an evaluator (its scores stay).")
    .answers("DeleteEvaluatorResponse")
    .errors(&[ErrorReason::NotFound]);

pub(crate) fn routes() -> Routes {
    Routes::new("Evaluators", "LLM judges that grade new model calls, within a budget.")
        .at(&CREATE, create)
        .at(&LIST, list)
        .at(&GET, get)
        .at(&UPDATE, update)
        .at(&DELETE, delete)
}

type IdPath = Result<Path<String>, axum::extract::rejection::PathRejection>;

fn id(path: IdPath) -> Result<String, HttpError> {
    path.map(|Path(id)| id).map_err(|e| HttpError(ApiError::invalid_argument(format!("bad evaluator id: {e}"))))
}

async fn create(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateEvaluatorRequest>,
) -> Result<(StatusCode, Json<CreateEvaluatorResponse>), HttpError> {
    Ok((StatusCode::CREATED, Json(core.evaluators.create_evaluator(call.request(req)).await?.into_inner())))
}

async fn list(State(core): State<Core>, call: Call) -> Result<Json<ListEvaluatorsResponse>, HttpError> {
    Ok(Json(core.evaluators.list_evaluators(call.request(ListEvaluatorsRequest {})).await?.into_inner()))
}

async fn get(State(core): State<Core>, path: IdPath, call: Call) -> Result<Json<GetEvaluatorResponse>, HttpError> {
    let req = GetEvaluatorRequest { id: id(path)? };
    Ok(Json(core.evaluators.get_evaluator(call.request(req)).await?.into_inner()))
}

async fn update(
    State(core): State<Core>,
    path: IdPath,
    call: Call,
    JsonBody(req): JsonBody<UpdateEvaluatorRequest>,
) -> Result<Json<UpdateEvaluatorResponse>, HttpError> {
    let req = UpdateEvaluatorRequest { id: id(path)?, ..req };
    Ok(Json(core.evaluators.update_evaluator(call.request(req)).await?.into_inner()))
}

async fn delete(
    State(core): State<Core>,
    path: IdPath,
    call: Call,
) -> Result<Json<DeleteEvaluatorResponse>, HttpError> {
    let req = DeleteEvaluatorRequest { id: id(path)? };
    Ok(Json(core.evaluators.delete_evaluator(call.request(req)).await?.into_inner()))
}
