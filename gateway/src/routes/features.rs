//! The feature APIs of the dashboard's pages, over `FeatureService`.

use axum::{
    Json, Router,
    extract::{Path, Query, State},
    http::StatusCode,
    routing::{get, post},
};
use roost_proto::{
    ErrorReason,
    v1::{
        AcknowledgeAlertRequest, Alert, AlertRule, CreateAlertRuleRequest, CreateCronRequest, CreateGuardPolicyRequest,
        Cron, DeleteAlertRuleRequest, DeleteAlertRuleResponse, DeleteCronRequest, DeleteCronResponse,
        DeleteGuardPolicyRequest, DeleteGuardPolicyResponse, GetAlertsRequest, GetAlertsResponse, GetChannelsRequest,
        GetChannelsResponse, GetCronRequest, GetCronResponse, GetGuardRequest, GetGuardResponse,
        GetHealthReportRequest, GetStatusRequest, GetStatusResponse, GetUsageRequest, GetUsageResponse, GuardPolicy,
        HealthReport, KillCronRequest, ListCronsRequest, ListCronsResponse, UpdateAlertRuleRequest, UpdateCronRequest,
        UpdateGuardPolicyRequest,
    },
};

use crate::{Call, Core, HttpError, JsonBody};

pub(crate) fn routes() -> Router<Core> {
    Router::new()
        .route("/api/health", get(health))
        .route("/api/status", get(status))
        .route("/api/channels", get(channels))
        .route("/api/usage", get(usage))
        .route("/api/crons", get(list_crons).post(create_cron))
        .route("/api/crons/{id}", get(get_cron).post(update_cron).delete(delete_cron))
        .route("/api/crons/{id}/kill", post(kill_cron))
        .route("/api/alerts", get(alerts).post(create_alert_rule))
        .route("/api/alerts/rules/{id}", post(update_alert_rule).delete(delete_alert_rule))
        .route("/api/alerts/{id}/ack", post(acknowledge_alert))
        .route("/api/guard", get(guard).post(create_guard_policy))
        .route("/api/guard/{id}", post(update_guard_policy).delete(delete_guard_policy))
}

/// `{rules, active, history, warning}`.
async fn alerts(State(core): State<Core>, call: Call) -> Result<Json<GetAlertsResponse>, HttpError> {
    Ok(Json(core.features.get_alerts(call.request(GetAlertsRequest {})).await?.into_inner()))
}

/// 201 with the rule.
async fn create_alert_rule(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateAlertRuleRequest>,
) -> Result<(StatusCode, Json<AlertRule>), HttpError> {
    let rule = core.features.create_alert_rule(call.request(req)).await?.into_inner().rule;
    Ok((StatusCode::CREATED, Json(rule.unwrap_or_default())))
}

async fn update_alert_rule(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
    JsonBody(req): JsonBody<UpdateAlertRuleRequest>,
) -> Result<Json<AlertRule>, HttpError> {
    let rule = core.features.update_alert_rule(call.request(UpdateAlertRuleRequest { id, ..req })).await?;
    Ok(Json(rule.into_inner().rule.unwrap_or_default()))
}

async fn delete_alert_rule(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
) -> Result<Json<DeleteAlertRuleResponse>, HttpError> {
    Ok(Json(core.features.delete_alert_rule(call.request(DeleteAlertRuleRequest { id })).await?.into_inner()))
}

/// The control endpoint: marks an alert seen.
async fn acknowledge_alert(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
) -> Result<Json<Alert>, HttpError> {
    let id = id.parse().map_err(|_| HttpError::new(ErrorReason::NotFound, format!("no alert {id}")))?;
    let alert = core.features.acknowledge_alert(call.request(AcknowledgeAlertRequest { id })).await?;
    Ok(Json(alert.into_inner().alert.unwrap_or_default()))
}

/// `{policies, incidents, warning}`.
async fn guard(State(core): State<Core>, call: Call) -> Result<Json<GetGuardResponse>, HttpError> {
    Ok(Json(core.features.get_guard(call.request(GetGuardRequest {})).await?.into_inner()))
}

/// 201 with the policy.
async fn create_guard_policy(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateGuardPolicyRequest>,
) -> Result<(StatusCode, Json<GuardPolicy>), HttpError> {
    let policy = core.features.create_guard_policy(call.request(req)).await?.into_inner().policy;
    Ok((StatusCode::CREATED, Json(policy.unwrap_or_default())))
}

async fn update_guard_policy(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
    JsonBody(req): JsonBody<UpdateGuardPolicyRequest>,
) -> Result<Json<GuardPolicy>, HttpError> {
    let policy = core.features.update_guard_policy(call.request(UpdateGuardPolicyRequest { id, ..req })).await?;
    Ok(Json(policy.into_inner().policy.unwrap_or_default()))
}

async fn delete_guard_policy(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
) -> Result<Json<DeleteGuardPolicyResponse>, HttpError> {
    Ok(Json(core.features.delete_guard_policy(call.request(DeleteGuardPolicyRequest { id })).await?.into_inner()))
}

/// `{crons: [...]}`, newest first.
async fn list_crons(State(core): State<Core>, call: Call) -> Result<Json<ListCronsResponse>, HttpError> {
    Ok(Json(core.features.list_crons(call.request(ListCronsRequest {})).await?.into_inner()))
}

/// 201 with the cron.
async fn create_cron(
    State(core): State<Core>,
    call: Call,
    JsonBody(req): JsonBody<CreateCronRequest>,
) -> Result<(StatusCode, Json<Cron>), HttpError> {
    let cron = core.features.create_cron(call.request(req)).await?.into_inner().cron;
    Ok((StatusCode::CREATED, Json(cron.unwrap_or_default())))
}

/// `{cron, runs}`.
async fn get_cron(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
) -> Result<Json<GetCronResponse>, HttpError> {
    Ok(Json(core.features.get_cron(call.request(GetCronRequest { id })).await?.into_inner()))
}

/// The changed cron; the body's fields are those of `UpdateCronRequest` (the id is the
/// path's).
async fn update_cron(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
    JsonBody(req): JsonBody<UpdateCronRequest>,
) -> Result<Json<Cron>, HttpError> {
    let cron = core.features.update_cron(call.request(UpdateCronRequest { id, ..req })).await?.into_inner().cron;
    Ok(Json(cron.unwrap_or_default()))
}

async fn delete_cron(
    State(core): State<Core>,
    Path(id): Path<String>,
    call: Call,
) -> Result<Json<DeleteCronResponse>, HttpError> {
    Ok(Json(core.features.delete_cron(call.request(DeleteCronRequest { id })).await?.into_inner()))
}

/// The control endpoint: the cron stops running (kept, with its history).
async fn kill_cron(State(core): State<Core>, Path(id): Path<String>, call: Call) -> Result<Json<Cron>, HttpError> {
    let cron = core.features.kill_cron(call.request(KillCronRequest { id })).await?.into_inner().cron;
    Ok(Json(cron.unwrap_or_default()))
}

/// `?days=` of the usage page.
#[derive(Debug, Default, serde::Deserialize)]
struct DaysQuery {
    days: Option<i32>,
}

/// `{agents: [{instance_id, account_id, runtime, status, chat_bot_connected, traffic}], warning}`.
async fn channels(State(core): State<Core>, call: Call) -> Result<Json<GetChannelsResponse>, HttpError> {
    Ok(Json(core.features.get_channels(call.request(GetChannelsRequest {})).await?.into_inner()))
}

/// What `roost status` prints.
async fn status(State(core): State<Core>, call: Call) -> Result<Json<GetStatusResponse>, HttpError> {
    Ok(Json(core.features.get_status(call.request(GetStatusRequest {})).await?.into_inner()))
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
