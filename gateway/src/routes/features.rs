//! The feature APIs of the dashboard's pages, over `FeatureService`.

use axum::{
    Json,
    extract::{Path, Query, State},
    http::StatusCode,
};
use roost_proto::{
    ErrorReason,
    v1::{
        AcknowledgeAlertRequest, Alert, AlertRule, CreateAlertRuleRequest, CreateCronRequest, CreateGuardPolicyRequest,
        Cron, DeleteAlertRuleRequest, DeleteAlertRuleResponse, DeleteCronRequest, DeleteCronResponse,
        DeleteGuardPolicyRequest, DeleteGuardPolicyResponse, GetAlertsRequest, GetAlertsResponse, GetChannelsRequest,
        GetChannelsResponse, GetCronRequest, GetCronResponse, GetGuardRequest, GetGuardResponse,
        GetHealthReportRequest, GetSkillsRequest, GetSkillsResponse, GetStatusRequest, GetStatusResponse,
        GetUsageRequest, GetUsageResponse, GuardPolicy, HealthReport, KillCronRequest, ListCronsRequest,
        ListCronsResponse, ListReplicasRequest, ListReplicasResponse, UpdateAlertRuleRequest, UpdateCronRequest,
        UpdateGuardPolicyRequest,
    },
};

use crate::{
    Call, Core, HttpError, JsonBody,
    api::{Endpoint, Routes},
};

const HEALTH: Endpoint = Endpoint::get(
    "/api/health",
    "The health page: checks of the store, ingest lag, disk and workers, each ok, warn or fail with a detail.",
)
.answers("HealthReport");

const STATUS: Endpoint = Endpoint::get(
    "/api/status",
    "What `roost status` prints: version, store size and counts, ingest rates, workers, and whether recent handler \
     errors mean empty or broken.",
)
.answers("GetStatusResponse");

const REPLICAS: Endpoint = Endpoint::get(
    "/api/replicas",
    "The replicas serving this store (several `roost serve` on one PostgreSQL; one on SQLite): each one's address, \
     start, last heartbeat and the hosted agents it runs, and which one answered (`self`).",
)
.answers("ListReplicasResponse");

const CHANNELS: Endpoint =
    Endpoint::get("/api/channels", "Messaging channels connected to hosted agents, with their traffic.")
        .answers("GetChannelsResponse");

const USAGE: Endpoint = Endpoint::get(
    "/api/usage",
    "Tokens and cost per day and per model, today/week/month totals, top sessions by cost.",
)
.params(&[("days", "Days back from today (UTC) for the per-day and per-model lists; default 30, at most 366.")])
.answers("GetUsageResponse");

const SKILLS: Endpoint = Endpoint::get(
    "/api/skills",
    "What the skill file and the MCP tools offer: every documented route and tool with its use count (calls, \
     failed calls, last use).",
)
.answers("GetSkillsResponse");

const CRONS: Endpoint =
    Endpoint::get("/api/crons", "Scheduled messages to hosted agents, newest first.").answers("ListCronsResponse");

const CREATE_CRON: Endpoint =
    Endpoint::post("/api/crons", "Schedules a message to a hosted agent on a cron expression (UTC).")
        .body("CreateCronRequest")
        .answers_with(201, "Cron")
        .errors(&[ErrorReason::NotFound]);

const CRON: Endpoint = Endpoint::get("/api/crons/{id}", "One cron with its run history.")
    .answers("GetCronResponse")
    .errors(&[ErrorReason::NotFound]);

const UPDATE_CRON: Endpoint = Endpoint::post("/api/crons/{id}", "Changes a cron (only fields present change).")
    .body("UpdateCronRequest")
    .answers("Cron")
    .errors(&[ErrorReason::NotFound]);

const DELETE_CRON: Endpoint = Endpoint::delete("/api/crons/{id}", "Deletes a cron and its history.")
    .answers("DeleteCronResponse")
    .errors(&[ErrorReason::NotFound]);

const KILL_CRON: Endpoint =
    Endpoint::post("/api/crons/{id}/kill", "Stops a cron from running again; it is kept with its history.")
        .answers("Cron")
        .errors(&[ErrorReason::NotFound]);

const ALERTS: Endpoint =
    Endpoint::get("/api/alerts", "Alert rules, active alerts and their history.").answers("GetAlertsResponse");

const CREATE_ALERT_RULE: Endpoint = Endpoint::post(
    "/api/alerts",
    "Adds an alert rule: cost per day, error rate, token spike or stuck session, optionally delivered to a webhook.",
)
.body("CreateAlertRuleRequest")
.answers_with(201, "AlertRule");

const UPDATE_ALERT_RULE: Endpoint =
    Endpoint::post("/api/alerts/rules/{id}", "Changes an alert rule (only fields present change).")
        .body("UpdateAlertRuleRequest")
        .answers("AlertRule")
        .errors(&[ErrorReason::NotFound]);

const DELETE_ALERT_RULE: Endpoint = Endpoint::delete("/api/alerts/rules/{id}", "Deletes an alert rule.")
    .answers("DeleteAlertRuleResponse")
    .errors(&[ErrorReason::NotFound]);

const ACK_ALERT: Endpoint = Endpoint::post("/api/alerts/{id}/ack", "Acknowledges an alert: marks it seen.")
    .answers("Alert")
    .errors(&[ErrorReason::NotFound]);

const GUARD: Endpoint =
    Endpoint::get("/api/guard", "Guard policies and the incidents they recorded.").answers("GetGuardResponse");

const CREATE_GUARD_POLICY: Endpoint = Endpoint::post(
    "/api/guard",
    "Adds a guard policy: a spend limit per agent per day, or a loop detector over repeated identical tool calls. \
     A tripped policy pauses the hosted agent and records an incident.",
)
.body("CreateGuardPolicyRequest")
.answers_with(201, "GuardPolicy");

const UPDATE_GUARD_POLICY: Endpoint =
    Endpoint::post("/api/guard/{id}", "Changes a guard policy (only fields present change).")
        .body("UpdateGuardPolicyRequest")
        .answers("GuardPolicy")
        .errors(&[ErrorReason::NotFound]);

const DELETE_GUARD_POLICY: Endpoint = Endpoint::delete("/api/guard/{id}", "Deletes a guard policy.")
    .answers("DeleteGuardPolicyResponse")
    .errors(&[ErrorReason::NotFound]);

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Dashboard pages",
        "Presentation-shaped reads and writes for the dashboard. A page that cannot be answered is 200 with an empty \
         result and a `warning`; `GET /api/status` tells the truth.",
    )
    .at(&HEALTH, health)
    .at(&STATUS, status)
    .at(&REPLICAS, replicas)
    .at(&CHANNELS, channels)
    .at(&USAGE, usage)
    .at(&SKILLS, skills)
    .at(&CRONS, list_crons)
    .at(&CREATE_CRON, create_cron)
    .at(&CRON, get_cron)
    .at(&UPDATE_CRON, update_cron)
    .at(&DELETE_CRON, delete_cron)
    .at(&KILL_CRON, kill_cron)
    .at(&ALERTS, alerts)
    .at(&CREATE_ALERT_RULE, create_alert_rule)
    .at(&UPDATE_ALERT_RULE, update_alert_rule)
    .at(&DELETE_ALERT_RULE, delete_alert_rule)
    .at(&ACK_ALERT, acknowledge_alert)
    .at(&GUARD, guard)
    .at(&CREATE_GUARD_POLICY, create_guard_policy)
    .at(&UPDATE_GUARD_POLICY, update_guard_policy)
    .at(&DELETE_GUARD_POLICY, delete_guard_policy)
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
/// `{self, replicas: [{id, addr, started_at, last_seen, agents}]}`.
async fn replicas(State(core): State<Core>, call: Call) -> Result<Json<ListReplicasResponse>, HttpError> {
    Ok(Json(core.features.list_replicas(call.request(ListReplicasRequest {})).await?.into_inner()))
}

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

/// `{skill_file, skills: [{surface, name, section, summary, calls, errors, last_used_at}], warning}`.
async fn skills(State(core): State<Core>, call: Call) -> Result<Json<GetSkillsResponse>, HttpError> {
    Ok(Json(core.features.get_skills(call.request(GetSkillsRequest {})).await?.into_inner()))
}

/// `{status, checked_at, checks: [{name, status, detail}]}`.
async fn health(State(core): State<Core>, call: Call) -> Result<Json<HealthReport>, HttpError> {
    let reply = core.features.get_health_report(call.request(GetHealthReportRequest {})).await?.into_inner();
    Ok(Json(reply.report.unwrap_or_default()))
}
