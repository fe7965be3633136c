//! The feature APIs of the dashboard's pages, over `FeatureService`.

use axum::{Json, Router, extract::State, routing::get};
use roost_proto::v1::{GetHealthReportRequest, HealthReport};

use crate::{Call, Core, HttpError};

pub(crate) fn routes() -> Router<Core> {
    Router::new().route("/api/health", get(health))
}

/// `{status, checked_at, checks: [{name, status, detail}]}`.
async fn health(State(core): State<Core>, call: Call) -> Result<Json<HealthReport>, HttpError> {
    let reply = core.features.get_health_report(call.request(GetHealthReportRequest {})).await?.into_inner();
    Ok(Json(reply.report.unwrap_or_default()))
}
