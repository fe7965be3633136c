//! `EvaluatorService`: evaluators over gRPC, and through the REST routes that call it.

use std::sync::Arc;

use roost_proto::v1::{
    CreateEvaluatorRequest, CreateEvaluatorResponse, DeleteEvaluatorRequest, DeleteEvaluatorResponse,
    GetEvaluatorRequest, GetEvaluatorResponse, ListEvaluatorsRequest, ListEvaluatorsResponse, UpdateEvaluatorRequest,
    UpdateEvaluatorResponse, evaluator_service_server::EvaluatorService,
};
use tonic::{Request, Response, Status};

use super::Evaluators;

/// `EvaluatorService` for dashboard callers (the access policy lets only them reach it).
pub struct EvaluatorCore {
    evaluators: Arc<Evaluators>,
}

impl EvaluatorCore {
    /// The service over `evaluators`.
    pub fn new(evaluators: Arc<Evaluators>) -> Self {
        Self { evaluators }
    }
}

#[tonic::async_trait]
impl EvaluatorService for EvaluatorCore {
    async fn create_evaluator(
        &self,
        req: Request<CreateEvaluatorRequest>,
    ) -> Result<Response<CreateEvaluatorResponse>, Status> {
        let given = req.into_inner().evaluator.unwrap_or_default();
        Ok(Response::new(CreateEvaluatorResponse { evaluator: Some(self.evaluators.create(given).await?) }))
    }

    async fn list_evaluators(
        &self,
        _: Request<ListEvaluatorsRequest>,
    ) -> Result<Response<ListEvaluatorsResponse>, Status> {
        let evaluators = self.evaluators.list().await?.iter().map(super::EvaluatorRow::to_proto).collect();
        Ok(Response::new(ListEvaluatorsResponse { evaluators }))
    }

    async fn get_evaluator(&self, req: Request<GetEvaluatorRequest>) -> Result<Response<GetEvaluatorResponse>, Status> {
        let (evaluator, judgements) = self.evaluators.get(&req.get_ref().id).await?;
        Ok(Response::new(GetEvaluatorResponse { evaluator: Some(evaluator), judgements }))
    }

    async fn update_evaluator(
        &self,
        req: Request<UpdateEvaluatorRequest>,
    ) -> Result<Response<UpdateEvaluatorResponse>, Status> {
        Ok(Response::new(UpdateEvaluatorResponse { evaluator: Some(self.evaluators.update(req.into_inner()).await?) }))
    }

    async fn delete_evaluator(
        &self,
        req: Request<DeleteEvaluatorRequest>,
    ) -> Result<Response<DeleteEvaluatorResponse>, Status> {
        self.evaluators.delete(&req.get_ref().id).await?;
        Ok(Response::new(DeleteEvaluatorResponse { ok: true }))
    }
}
