//! `ScoreService`: scores over gRPC, and through the REST routes that call it.

use std::sync::Arc;

use roost_proto::v1::{
    CreateScoresRequest, CreateScoresResponse, DeleteScoreRequest, DeleteScoreResponse, ListScoresRequest,
    ListScoresResponse, score_service_server::ScoreService,
};
use tonic::{Request, Response, Status};

use super::{Giver, Scores};

/// `ScoreService` for dashboard callers (the access policy lets only them reach it).
pub struct ScoreCore {
    scores: Arc<Scores>,
}

impl ScoreCore {
    /// The service over `scores`.
    pub fn new(scores: Arc<Scores>) -> Self {
        Self { scores }
    }
}

#[tonic::async_trait]
impl ScoreService for ScoreCore {
    async fn create_scores(&self, req: Request<CreateScoresRequest>) -> Result<Response<CreateScoresResponse>, Status> {
        let scores = self.scores.create(req.into_inner(), Giver::Dashboard).await?;
        Ok(Response::new(CreateScoresResponse { ok: true, scores }))
    }

    async fn list_scores(&self, req: Request<ListScoresRequest>) -> Result<Response<ListScoresResponse>, Status> {
        Ok(Response::new(ListScoresResponse { scores: self.scores.list(req.get_ref()).await? }))
    }

    async fn delete_score(&self, req: Request<DeleteScoreRequest>) -> Result<Response<DeleteScoreResponse>, Status> {
        self.scores.delete(&req.get_ref().id).await?;
        Ok(Response::new(DeleteScoreResponse { ok: true }))
    }
}
