//! `FeatureService`: the dashboard pages' answers.

use roost_proto::v1::{GetHealthReportRequest, GetHealthReportResponse, feature_service_server::FeatureService};
use tonic::{Request, Response, Status};

use super::health::HealthChecks;

/// The feature APIs of one server.
pub struct FeatureCore {
    health: HealthChecks,
}

impl FeatureCore {
    /// Features over these checks.
    pub fn new(health: HealthChecks) -> Self {
        Self { health }
    }
}

#[tonic::async_trait]
impl FeatureService for FeatureCore {
    async fn get_health_report(
        &self,
        _req: Request<GetHealthReportRequest>,
    ) -> Result<Response<GetHealthReportResponse>, Status> {
        Ok(Response::new(GetHealthReportResponse { report: Some(self.health.run().await) }))
    }
}
