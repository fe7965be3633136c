//! Datasets (`/api/v1/datasets`) and experiments (`/api/v1/experiments`) over
//! `ExperimentService`. The same paths serve the operator (dashboard access) and accounts
//! (their API key as the bearer, which the core checks): an account sees only its own.

use axum::{
    Json,
    extract::{Path, Query, State},
    http::StatusCode,
};
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        AddDatasetItemsRequest, AddDatasetItemsResponse, CancelExperimentRequest, CancelExperimentResponse,
        CreateDatasetRequest, CreateDatasetResponse, CreateExperimentRequest, CreateExperimentResponse,
        DeleteDatasetRequest, DeleteDatasetResponse, GetDatasetRequest, GetDatasetResponse, GetExperimentRequest,
        GetExperimentResponse, ListDatasetsRequest, ListDatasetsResponse, ListExperimentsRequest,
        ListExperimentsResponse,
    },
};

use crate::{
    Call, Core, HttpError, JsonBody,
    api::{Endpoint, Routes},
};

pub(crate) const CREATE_DATASET: Endpoint = Endpoint::post(
    "/api/v1/datasets",
    "Adds a dataset: `{name, description?, items?}`, where items is what `POST /api/v1/datasets/{id}/items` takes \
     (items, jsonl, csv, turn_ids, calls, session_id).",
)
.body("CreateDatasetRequest")
.answers_with(201, "CreateDatasetResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) const LIST_DATASETS: Endpoint =
    Endpoint::get("/api/v1/datasets", "The caller's datasets, newest first.").answers("ListDatasetsResponse");

pub(crate) const GET_DATASET: Endpoint = Endpoint::get(
    "/api/v1/datasets/{id}",
    "A dataset and a page of its items in order (1,000 unless `?limit=`, at most 10,000); `next_offset` is where the \
     next page starts (`?offset=`), 0 after the last.",
)
.params(&[("offset", "items to skip"), ("limit", "items to return at most")])
.answers("GetDatasetResponse")
.errors(&[ErrorReason::NotFound]);

pub(crate) const ADD_ITEMS: Endpoint = Endpoint::post(
    "/api/v1/datasets/{id}/items",
    "Appends items, all or none: given (`items`), as JSON Lines (`jsonl`) or CSV (`csv`, a header row naming input \
     and expected), from hosted turns (`turn_ids`), recorded model calls (`calls`, operator only) or a whole \
     conversation (`session_id`).",
)
.body("AddDatasetItemsRequest")
.answers("AddDatasetItemsResponse")
.errors(&[ErrorReason::NotFound]);

pub(crate) const DELETE_DATASET: Endpoint = Endpoint::delete(
    "/api/v1/datasets/{id}",
    "Deletes a dataset, its items and its finished experiments; 409 while one of its experiments runs.",
)
.answers("DeleteDatasetResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) const CREATE_EXPERIMENT: Endpoint = Endpoint::post(
    "/api/v1/experiments",
    "Runs a dataset against a hosted agent: `{dataset_id, agent_id, name?, brief?, model?, copy?, evaluator_ids?, \
     checks?}`. With a brief or model (or copy) it runs against a temporary copy, destroyed after. Each item is a \
     turn billed to the agent's account.",
)
.body("CreateExperimentRequest")
.answers_with(201, "CreateExperimentResponse")
.errors(&[ErrorReason::NotFound]);

pub(crate) const LIST_EXPERIMENTS: Endpoint =
    Endpoint::get("/api/v1/experiments", "The caller's experiments, newest first (`?dataset_id=` narrows).")
        .params(&[("dataset_id", "only runs of this dataset")])
        .answers("ListExperimentsResponse");

pub(crate) const GET_EXPERIMENT: Endpoint = Endpoint::get(
    "/api/v1/experiments/{id}",
    "An experiment, its aggregates (latency, tokens, cost, check pass rates, score means) and its results per item.",
)
.answers("GetExperimentResponse")
.errors(&[ErrorReason::NotFound]);

pub(crate) const CANCEL_EXPERIMENT: Endpoint = Endpoint::post(
    "/api/v1/experiments/{id}/cancel",
    "Cancels a queued or running experiment after its current item; 409 when it has ended.",
)
.answers("CancelExperimentResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) fn datasets() -> Routes {
    Routes::new("Datasets", WHO_DATASETS)
        .at(&CREATE_DATASET, create_dataset)
        .at(&LIST_DATASETS, list_datasets)
        .at(&GET_DATASET, get_dataset)
        .at(&ADD_ITEMS, add_items)
        .at(&DELETE_DATASET, delete_dataset)
}

pub(crate) fn experiments() -> Routes {
    Routes::new("Experiments", WHO_EXPERIMENTS)
        .at(&CREATE_EXPERIMENT, create_experiment)
        .at(&LIST_EXPERIMENTS, list_experiments)
        .at(&GET_EXPERIMENT, get_experiment)
        .at(&CANCEL_EXPERIMENT, cancel_experiment)
}

const WHO_DATASETS: &str = "Items (input, expected output, metadata) to run as experiments. An account's API key \
     as the bearer acts as that account (its own datasets and agents' turns); a dashboard caller acts as the operator.";
const WHO_EXPERIMENTS: &str = "Runs of a dataset against a hosted agent, checked and graded per item. An account's \
     API key as the bearer acts as that account (its own experiments and agents); a dashboard caller acts as the \
     operator, who may also grade with evaluators.";

type IdPath = Result<Path<String>, axum::extract::rejection::PathRejection>;

fn id(path: IdPath) -> Result<String, HttpError> {
    path.map(|Path(id)| id).map_err(|e| HttpError(ApiError::invalid_argument(format!("bad id: {e}"))))
}

async fn create_dataset(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateDatasetRequest>,
) -> Result<(StatusCode, Json<CreateDatasetResponse>), HttpError> {
    Ok((StatusCode::CREATED, Json(core.experiments.create_dataset(call.request(req)).await?.into_inner())))
}

async fn list_datasets(State(core): State<Core>, call: Call) -> Result<Json<ListDatasetsResponse>, HttpError> {
    Ok(Json(core.experiments.list_datasets(call.request(ListDatasetsRequest {})).await?.into_inner()))
}

/// `?offset=&limit=`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PageQuery {
    offset: i64,
    limit: i64,
}

async fn get_dataset(
    State(core): State<Core>,
    path: IdPath,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
    call: Call,
) -> Result<Json<GetDatasetResponse>, HttpError> {
    let Query(page) = query.map_err(|e| HttpError(ApiError::invalid_argument(format!("bad query: {e}"))))?;
    let req = GetDatasetRequest { id: id(path)?, offset: page.offset, limit: page.limit };
    Ok(Json(core.experiments.get_dataset(call.request(req)).await?.into_inner()))
}

async fn add_items(
    State(core): State<Core>,
    path: IdPath,
    call: Call,
    JsonBody(req): JsonBody<AddDatasetItemsRequest>,
) -> Result<Json<AddDatasetItemsResponse>, HttpError> {
    let req = AddDatasetItemsRequest { dataset_id: id(path)?, ..req };
    Ok(Json(core.experiments.add_dataset_items(call.request(req)).await?.into_inner()))
}

async fn delete_dataset(
    State(core): State<Core>,
    path: IdPath,
    call: Call,
) -> Result<Json<DeleteDatasetResponse>, HttpError> {
    let req = DeleteDatasetRequest { id: id(path)? };
    Ok(Json(core.experiments.delete_dataset(call.request(req)).await?.into_inner()))
}

async fn create_experiment(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateExperimentRequest>,
) -> Result<(StatusCode, Json<CreateExperimentResponse>), HttpError> {
    Ok((StatusCode::CREATED, Json(core.experiments.create_experiment(call.request(req)).await?.into_inner())))
}

/// `?dataset_id=`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ListQuery {
    dataset_id: String,
}

async fn list_experiments(
    State(core): State<Core>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
    call: Call,
) -> Result<Json<ListExperimentsResponse>, HttpError> {
    let Query(query) = query.map_err(|e| HttpError(ApiError::invalid_argument(format!("bad query: {e}"))))?;
    let req = ListExperimentsRequest { dataset_id: query.dataset_id };
    Ok(Json(core.experiments.list_experiments(call.request(req)).await?.into_inner()))
}

async fn get_experiment(
    State(core): State<Core>,
    path: IdPath,
    call: Call,
) -> Result<Json<GetExperimentResponse>, HttpError> {
    let req = GetExperimentRequest { id: id(path)? };
    Ok(Json(core.experiments.get_experiment(call.request(req)).await?.into_inner()))
}

async fn cancel_experiment(
    State(core): State<Core>,
    path: IdPath,
    call: Call,
) -> Result<Json<CancelExperimentResponse>, HttpError> {
    let req = CancelExperimentRequest { id: id(path)? };
    Ok(Json(core.experiments.cancel_experiment(call.request(req)).await?.into_inner()))
}
