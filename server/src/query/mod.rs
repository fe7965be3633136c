//! The versioned q/1 query contract over the observed store (docs/query.md).
//!
//! [`registry::SHAPES`] declares every shape; [`QueryCore`] (the gRPC QueryService) checks
//! arguments against it and runs the shape. REST and MCP call QueryService.
//!
//! An answer holds at most [`MAX_ANSWER_BYTES`] of rows; past it, it says `truncated`.

pub mod args;
pub mod export;
pub mod latency;
pub mod registry;
pub mod run;
pub mod scores;
pub mod search;

use std::{sync::Arc, time::Instant};

use roost_kit::streams::RpcStream;
use roost_proto::{
    ApiError,
    json::value::{from_json, map_to_struct, struct_to_map},
    v1::{
        ExportRequest, ExportResponse, ListSessionsRequest, ListSessionsResponse, ListShapesRequest,
        ListShapesResponse, QueryRequest, QueryResponse, ShapeArg, ShapeInfo, query_service_server::QueryService,
    },
};
use serde_json::{Map, Value as Json};
use tonic::{Request, Response, Status};

use crate::{Result, features::failures::HandlerFailures, store::Store, time::now_ms};
use args::Args;
use registry::{CONTRACT, SHAPES};
pub use run::MAX_ANSWER_BYTES;

/// What a query returned.
#[derive(Debug)]
pub struct Rows {
    /// One object per row.
    pub rows: Vec<Map<String, Json>>,
    /// Rows were left out to stay within [`MAX_ANSWER_BYTES`].
    pub truncated: bool,
    /// Time spent in roost.
    pub elapsed_ms: f64,
}

/// The query service over the store.
pub struct QueryCore {
    store: Store,
    failures: Arc<HandlerFailures>,
    exports: export::Exports,
}

impl QueryCore {
    /// Queries `store`; a shape that cannot run answers empty with a warning, noted in
    /// `failures` for `roost status`.
    pub fn new(store: Store, failures: Arc<HandlerFailures>) -> Self {
        Self { store, failures, exports: export::Exports::default() }
    }

    /// Runs `shape` with `args` (a JSON object).
    pub async fn query(&self, shape: &str, args: &Map<String, Json>) -> Result<Rows> {
        let started = Instant::now();
        let shape = registry::shape(shape).ok_or_else(|| {
            ApiError::invalid_argument(format!("unknown shape {shape:?}; allowed: {}", registry::names().join(", ")))
        })?;
        let args = Args::check(shape.name, shape.args, args)?;
        let fetched = run::run(&self.store, shape, &args, now_ms() * 1_000_000).await?;
        Ok(Rows {
            rows: fetched.rows,
            truncated: fetched.truncated,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    }

    /// Starts exporting every row of list shape `shape` for `args` in `format`
    /// ([`export`]): the file's bytes, in order.
    pub fn export(
        &self,
        shape: &str,
        args: &Map<String, Json>,
        format: &str,
    ) -> Result<impl futures::Stream<Item = Result<bytes::Bytes>> + Send + 'static> {
        let shape = registry::shape(shape).ok_or_else(|| {
            ApiError::invalid_argument(format!("unknown shape {shape:?}; allowed: {}", registry::names().join(", ")))
        })?;
        let format = export::Format::parse(format)?;
        let args = Args::check(shape.name, shape.args, args)?;
        export::start(self.store.clone(), &self.exports, shape, args, format, now_ms() * 1_000_000)
    }
}

/// The registry as the API lists it.
pub fn shape_infos() -> Vec<ShapeInfo> {
    SHAPES
        .iter()
        .map(|shape| ShapeInfo {
            name: shape.name.to_owned(),
            description: shape.description.to_owned(),
            args: shape
                .args
                .iter()
                .map(|a| ShapeArg {
                    name: a.name.to_owned(),
                    r#type: a.ty.name().to_owned(),
                    description: a.description.to_owned(),
                    default: a.default.map(|d| from_json(&Json::from(d))),
                    min: a.range.map_or(0, |r| r.0),
                    max: a.range.map_or(0, |r| r.1),
                })
                .collect(),
            columns: registry::visible(shape).map(|c| c.name.to_owned()).collect(),
        })
        .collect()
}

/// Every shape's name, as `allowed_shapes` lists them.
pub fn allowed_shapes() -> Vec<String> {
    registry::names().into_iter().map(str::to_owned).collect()
}

#[tonic::async_trait]
impl QueryService for QueryCore {
    type ExportStream = RpcStream<ExportResponse>;

    async fn export(&self, req: Request<ExportRequest>) -> Result<Response<Self::ExportStream>, Status> {
        use futures::StreamExt as _;
        let req = req.into_inner();
        let args = req.args.as_ref().map(struct_to_map).unwrap_or_default();
        let bytes = QueryCore::export(self, &req.shape, &args, &req.format)?;
        let parts = bytes.map(|part| part.map(|data| ExportResponse { data: data.to_vec() }).map_err(Status::from));
        Ok(Response::new(Box::pin(parts)))
    }

    async fn query(&self, req: Request<QueryRequest>) -> Result<Response<QueryResponse>, Status> {
        let req = req.into_inner();
        let args = req.args.as_ref().map(struct_to_map).unwrap_or_default();
        let result = QueryCore::query(self, &req.shape, &args).await.map(|result| QueryResponse {
            count: result.rows.len() as i64,
            rows: result.rows.iter().map(map_to_struct).collect(),
            elapsed_ms: result.elapsed_ms,
            truncated: result.truncated,
            ..QueryResponse::default()
        });
        let mut answer = self.failures.or_warning(&format!("q/1 {}", req.shape), result, |a, w| a.warning = w)?;
        answer.shape = req.shape;
        answer.contract = CONTRACT.to_owned();
        Ok(Response::new(answer))
    }

    async fn list_shapes(&self, _req: Request<ListShapesRequest>) -> Result<Response<ListShapesResponse>, Status> {
        Ok(Response::new(ListShapesResponse {
            contract: CONTRACT.to_owned(),
            allowed_shapes: allowed_shapes(),
            shapes: shape_infos(),
        }))
    }

    async fn list_sessions(&self, req: Request<ListSessionsRequest>) -> Result<Response<ListSessionsResponse>, Status> {
        let mut args = Map::new();
        if req.get_ref().limit != 0 {
            args.insert("limit".to_owned(), Json::from(req.get_ref().limit));
        }
        let result = QueryCore::query(self, "sessions", &args).await.map(|result| ListSessionsResponse {
            count: result.rows.len() as i64,
            rows: result.rows.iter().map(map_to_struct).collect(),
            elapsed_ms: result.elapsed_ms,
            truncated: result.truncated,
            ..ListSessionsResponse::default()
        });
        let mut answer = self.failures.or_warning("q/1 sessions", result, |a, w| a.warning = w)?;
        answer.shape = "sessions".to_owned();
        answer.contract = CONTRACT.to_owned();
        Ok(Response::new(answer))
    }
}
