//! `FeatureService`: the dashboard pages' answers.

use roost_proto::v1::{
    GetHealthReportRequest, GetHealthReportResponse, GetUsageRequest, GetUsageResponse,
    feature_service_server::FeatureService,
};
use tonic::{Request, Response, Status};
use tracing::warn;

use super::{health::HealthChecks, usage};
use crate::{Result, store::Store};

/// The feature APIs of one server.
pub struct FeatureCore {
    store: Store,
    health: HealthChecks,
}

impl FeatureCore {
    /// Features over `store`, with these health checks.
    pub fn new(store: Store, health: HealthChecks) -> Self {
        Self { store, health }
    }
}

/// The seed's rule for feature APIs: a page that cannot be built is answered empty with a
/// `warning` (and logged), never with a 500. `roost status` reports the store's state.
fn or_warning<T: Default>(page: &str, result: Result<T>, set_warning: impl FnOnce(&mut T, String)) -> T {
    match result {
        Ok(answer) => answer,
        Err(err) => {
            warn!(page, error = %err, "feature API answered empty");
            let mut empty = T::default();
            set_warning(&mut empty, format!("the {page} page could not be built ({err}); this is not an empty store"));
            empty
        }
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

    async fn get_usage(&self, req: Request<GetUsageRequest>) -> Result<Response<GetUsageResponse>, Status> {
        let days = match req.get_ref().days {
            0 => 30,
            n => i64::from(n).clamp(1, 366),
        };
        let page = usage::usage_page(&self.store, days).await;
        Ok(Response::new(or_warning("usage", page, |p, w| p.warning = w)))
    }
}
