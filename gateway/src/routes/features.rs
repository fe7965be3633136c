//! The feature APIs of the dashboard's pages, over `FeatureService`.

use axum::{
    Json, Router,
    extract::{Query, State},
    routing::get,
};
use roost_proto::{
    ErrorReason,
    v1::{GetHealthReportRequest, GetUsageRequest, GetUsageResponse, HealthReport},
};

use crate::{Call, Core, HttpError};

pub(crate) fn routes() -> Router<Core> {
    Router::new().route("/api/health", get(health)).route("/api/usage", get(usage))
}

/// `?days=` of the usage page.
#[derive(Debug, Default, serde::Deserialize)]
struct DaysQuery {
    days: Option<i32>,
}

/// `{days, models, today, week, month, top_sessions, warning}`.
async fn usage(
    State(core): State<Core>,
    query: Result<Query<DaysQuery>, axum::extract::rejection::QueryRejection>,
    call: Call,
) -> Result<Json<GetUsageResponse>, HttpError> {
    let Query(query) = query.map_err(|e| HttpError::new(ErrorReason::InvalidArgument, e.body_text()))?;
    let req = GetUsageRequest { days: query.days.unwrap_or_default() };
    Ok(Json(core.features.get_usage(call.request(req)).await?.into_inner()))
}

/// `{status, checked_at, checks: [{name, status, detail}]}`.
async fn health(State(core): State<Core>, call: Call) -> Result<Json<HealthReport>, HttpError> {
    let reply = core.features.get_health_report(call.request(GetHealthReportRequest {})).await?.into_inner();
    Ok(Json(reply.report.unwrap_or_default()))
}
