//! `ExperimentService`: datasets and experiments over gRPC, and through the REST routes
//! and MCP tools that call it. A call whose bearer is an account API key acts as that
//! account (401 when the key is not valid); any other call reached the core through the
//! dashboard's access rules (the policy lets only account keys past them on these paths)
//! and acts as the operator.

use std::sync::Arc;

use roost_proto::v1::{
    AddDatasetItemsRequest, AddDatasetItemsResponse, CancelExperimentRequest, CancelExperimentResponse,
    CreateDatasetRequest, CreateDatasetResponse, CreateExperimentRequest, CreateExperimentResponse,
    DeleteDatasetRequest, DeleteDatasetResponse, GetDatasetRequest, GetDatasetResponse, GetExperimentRequest,
    GetExperimentResponse, ListDatasetsRequest, ListDatasetsResponse, ListExperimentsRequest, ListExperimentsResponse,
    experiment_service_server::ExperimentService,
};
use tonic::{Request, Response, Status};

use super::{Caller, Experiments, datasets::DatasetRow, runs::ExperimentRow};
use crate::auth::{Authenticator, bearer_token};

/// `ExperimentService` over the core.
pub struct ExperimentCore {
    experiments: Arc<Experiments>,
    auth: Arc<Authenticator>,
}

impl ExperimentCore {
    /// The service over `experiments`, checking account keys with `auth`.
    pub fn new(experiments: Arc<Experiments>, auth: Arc<Authenticator>) -> Self {
        Self { experiments, auth }
    }

    async fn caller<T>(&self, req: &Request<T>) -> Result<Caller, Status> {
        match bearer_token(req) {
            Some(key) if key.starts_with(roost_kit::ACCOUNT_KEY_PREFIX) => {
                Ok(Caller::Account(self.auth.account_of(req).await?))
            }
            _ => Ok(Caller::Operator),
        }
    }
}

#[tonic::async_trait]
impl ExperimentService for ExperimentCore {
    async fn create_dataset(
        &self,
        req: Request<CreateDatasetRequest>,
    ) -> Result<Response<CreateDatasetResponse>, Status> {
        let caller = self.caller(&req).await?;
        let dataset = self.experiments.create_dataset(req.into_inner(), &caller).await?;
        Ok(Response::new(CreateDatasetResponse { dataset: Some(dataset) }))
    }

    async fn list_datasets(&self, req: Request<ListDatasetsRequest>) -> Result<Response<ListDatasetsResponse>, Status> {
        let caller = self.caller(&req).await?;
        let datasets = self.experiments.list_datasets(&caller).await?.iter().map(DatasetRow::to_proto).collect();
        Ok(Response::new(ListDatasetsResponse { datasets }))
    }

    async fn get_dataset(&self, req: Request<GetDatasetRequest>) -> Result<Response<GetDatasetResponse>, Status> {
        let caller = self.caller(&req).await?;
        let req = req.get_ref();
        let dataset = self.experiments.dataset(&req.id, &caller).await?;
        let (items, next_offset) = self.experiments.items_page(&dataset, req.offset, req.limit).await?;
        let items = items.iter().map(super::datasets::ItemRow::to_proto).collect();
        Ok(Response::new(GetDatasetResponse { dataset: Some(dataset.to_proto()), items, next_offset }))
    }

    async fn add_dataset_items(
        &self,
        req: Request<AddDatasetItemsRequest>,
    ) -> Result<Response<AddDatasetItemsResponse>, Status> {
        let caller = self.caller(&req).await?;
        let (dataset, added) = self.experiments.add_items(req.into_inner(), &caller).await?;
        Ok(Response::new(AddDatasetItemsResponse { dataset: Some(dataset), added }))
    }

    async fn delete_dataset(
        &self,
        req: Request<DeleteDatasetRequest>,
    ) -> Result<Response<DeleteDatasetResponse>, Status> {
        let caller = self.caller(&req).await?;
        self.experiments.delete_dataset(&req.get_ref().id, &caller).await?;
        Ok(Response::new(DeleteDatasetResponse { ok: true }))
    }

    async fn create_experiment(
        &self,
        req: Request<CreateExperimentRequest>,
    ) -> Result<Response<CreateExperimentResponse>, Status> {
        let caller = self.caller(&req).await?;
        let experiment = self.experiments.create_experiment(req.into_inner(), &caller).await?;
        Ok(Response::new(CreateExperimentResponse { experiment: Some(experiment) }))
    }

    async fn list_experiments(
        &self,
        req: Request<ListExperimentsRequest>,
    ) -> Result<Response<ListExperimentsResponse>, Status> {
        let caller = self.caller(&req).await?;
        let rows = self.experiments.list_experiments(&caller, &req.get_ref().dataset_id).await?;
        Ok(Response::new(ListExperimentsResponse { experiments: rows.iter().map(ExperimentRow::to_proto).collect() }))
    }

    async fn get_experiment(
        &self,
        req: Request<GetExperimentRequest>,
    ) -> Result<Response<GetExperimentResponse>, Status> {
        let caller = self.caller(&req).await?;
        let (experiment, results) = self.experiments.get_experiment(&req.get_ref().id, &caller).await?;
        Ok(Response::new(GetExperimentResponse { experiment: Some(experiment), results }))
    }

    async fn cancel_experiment(
        &self,
        req: Request<CancelExperimentRequest>,
    ) -> Result<Response<CancelExperimentResponse>, Status> {
        let caller = self.caller(&req).await?;
        let experiment = self.experiments.cancel_experiment(&req.get_ref().id, &caller).await?;
        Ok(Response::new(CancelExperimentResponse { experiment: Some(experiment) }))
    }
}
