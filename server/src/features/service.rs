//! `FeatureService`: the dashboard pages' answers.

use std::sync::Arc;

use crate::time::{now_ms, timestamp_ms, utc_day};

use roost_proto::v1::{
    AcknowledgeAlertRequest, AcknowledgeAlertResponse, ClusterStatus, CreateAlertRuleRequest, CreateAlertRuleResponse,
    CreateCronRequest, CreateCronResponse, CreateGuardPolicyRequest, CreateGuardPolicyResponse, DeleteAlertRuleRequest,
    DeleteAlertRuleResponse, DeleteCronRequest, DeleteCronResponse, DeleteGuardPolicyRequest,
    DeleteGuardPolicyResponse, GetAlertsRequest, GetAlertsResponse, GetChannelsRequest, GetChannelsResponse,
    GetCronRequest, GetCronResponse, GetGuardRequest, GetGuardResponse, GetHealthReportRequest,
    GetHealthReportResponse, GetSkillsRequest, GetSkillsResponse, GetStatusRequest, GetStatusResponse, GetUsageRequest,
    GetUsageResponse, IngestStatus, KillCronRequest, KillCronResponse, ListCronsRequest, ListCronsResponse,
    ListReplicasRequest, ListReplicasResponse, ReplicaInfo, StoreStatus, UnpricedModel, UpdateAlertRuleRequest,
    UpdateAlertRuleResponse, UpdateCronRequest, UpdateCronResponse, UpdateGuardPolicyRequest,
    UpdateGuardPolicyResponse, feature_service_server::FeatureService,
};
use tonic::{Request, Response, Status};

use super::{
    alerts::{Alerts, RuleSpec},
    channels,
    crons::Crons,
    failures::HandlerFailures,
    guard::Guard,
    health::HealthChecks,
    skills::Skills,
    usage,
};
use crate::{
    Result,
    build_info::BUILD,
    cluster::leader::Leadership,
    store::{Store, on_reader},
    update::Updater,
};

/// The feature APIs of one server.
pub struct FeatureCore {
    store: Store,
    health: HealthChecks,
    crons: Arc<Crons>,
    alerts: Arc<Alerts>,
    guard: Arc<Guard>,
    skills: Arc<Skills>,
    updater: Arc<Updater>,
    failures: Arc<HandlerFailures>,
    leadership: Arc<Leadership>,
}

/// The workers and pages [`FeatureCore`] answers from.
pub struct FeatureParts {
    /// Health checks.
    pub health: HealthChecks,
    /// Crons.
    pub crons: Arc<Crons>,
    /// Alerts.
    pub alerts: Arc<Alerts>,
    /// Guard.
    pub guard: Arc<Guard>,
    /// The skills page.
    pub skills: Arc<Skills>,
    /// The self-updater, for `roost status`.
    pub updater: Arc<Updater>,
    /// Reads that answered empty (shared with q/1), for `roost status`.
    pub failures: Arc<HandlerFailures>,
    /// This replica's view of the leader lease, for `roost status`.
    pub leadership: Arc<Leadership>,
}

impl FeatureCore {
    /// Features over `store`.
    pub fn new(store: Store, parts: FeatureParts) -> Self {
        let FeatureParts { health, crons, alerts, guard, skills, updater, failures, leadership } = parts;
        Self { store, health, crons, alerts, guard, skills, updater, failures, leadership }
    }
}

impl FeatureCore {
    /// This replica and the leader of the cluster-wide workers (the store's word: a lease
    /// that expired still names its last holder, with a negative time left, so it is shown
    /// as no leader).
    async fn cluster(&self) -> ClusterStatus {
        let holder = self.leadership.leader().await.ok().flatten();
        ClusterStatus {
            replica_id: self.leadership.replica().to_owned(),
            leading: self.leadership.term().is_some(),
            leader_id: holder.as_ref().map(|h| h.owner.clone()).unwrap_or_default(),
            leader_epoch: holder.map_or(0, |h| h.epoch),
            replicas: self.replicas().await.unwrap_or_default(),
        }
    }

    /// The replicas serving the store (`Leadership::replicas`), in the API's form.
    async fn replicas(&self) -> Result<Vec<ReplicaInfo>> {
        let rows = self.leadership.replicas().await?;
        Ok(rows
            .into_iter()
            .map(|r| ReplicaInfo {
                id: r.id,
                addr: r.addr,
                started_at: Some(timestamp_ms(r.started_at)),
                last_seen: Some(timestamp_ms(r.last_seen)),
                agents: r.agents,
            })
            .collect())
    }

    async fn status(&self) -> GetStatusResponse {
        let store = &self.store;
        let mut status = StoreStatus {
            backend: store.kind().name().into(),
            location: store.location().into(),
            size_bytes: store.size_bytes().await.unwrap_or_default(),
            ..StoreStatus::default()
        };
        // The large tables' rows and the sessions are kept as they change; the small
        // tables counted.
        let kept = crate::telemetry::row_counts::read(store).await;
        let counted: std::result::Result<(i64, i64), sqlx::Error> = on_reader!(store, |pool| {
            sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM instances WHERE destroyed_at IS NULL)",
            )
            .fetch_one(pool)
            .await
        });
        match (kept, counted) {
            (Ok(rows), Ok((runs, hosted_agents))) => {
                status.reachable = true;
                (status.spans, status.logs, status.metric_points, status.events, status.sessions) =
                    (rows.spans, rows.logs, rows.metric_points, rows.events, rows.sessions);
                (status.runs, status.hosted_agents) = (runs, hosted_agents);
            }
            (Err(err), _) => status.error = err.to_string(),
            (_, Err(err)) => status.error = err.to_string(),
        }
        let since = utc_day(now_ms() * 1_000_000 - 29 * 86_400_000_000_000);
        let unpriced: Vec<(String, i64)> = on_reader!(store, |pool| {
            sqlx::query_as(
                "SELECT model, CAST(SUM(unpriced_calls) AS BIGINT) FROM usage_daily WHERE day >= $1 AND unpriced_calls > 0 \
                 GROUP BY model ORDER BY model",
            )
            .bind(&since)
            .fetch_all(pool)
            .await
        })
        .unwrap_or_default();
        let (total, rate) = self.health.telemetry.stats().snapshot();
        let last = self.failures.last();
        let verdict = match (&last, status.reachable) {
            (None, _) => "none",
            (Some(_), true) => "transient",
            (Some(_), false) => "broken",
        };
        GetStatusResponse {
            version: BUILD.version.into(),
            git_commit: BUILD.git_commit.into(),
            store: Some(status),
            ingest: Some(IngestStatus {
                spans_total: total.spans as i64,
                logs_total: total.logs as i64,
                metric_points_total: total.metric_points as i64,
                events_total: total.events as i64,
                spans_per_sec: rate[0],
                logs_per_sec: rate[1],
                metric_points_per_sec: rate[2],
                events_per_sec: rate[3],
            }),
            health: Some(self.health.run().await),
            last_handler_failure: last,
            handler_verdict: verdict.into(),
            update: Some(crate::update::service::status(&self.updater).await),
            unpriced_models: unpriced.into_iter().map(|(model, calls)| UnpricedModel { model, calls }).collect(),
            cluster: Some(self.cluster().await),
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
        Ok(Response::new(self.failures.or_warning("usage", page, |p, w| p.warning = w)?))
    }

    async fn list_crons(&self, _req: Request<ListCronsRequest>) -> Result<Response<ListCronsResponse>, Status> {
        let page = self.crons.list().await.map(|crons| ListCronsResponse { crons, warning: String::new() });
        Ok(Response::new(self.failures.or_warning("crons", page, |p, w| p.warning = w)?))
    }

    async fn create_cron(&self, req: Request<CreateCronRequest>) -> Result<Response<CreateCronResponse>, Status> {
        let req = req.into_inner();
        let enabled = req.enabled.unwrap_or(true);
        let cron = self.crons.create(&req.instance_id, &req.name, &req.schedule, &req.message, enabled).await?;
        Ok(Response::new(CreateCronResponse { cron: Some(cron) }))
    }

    async fn get_cron(&self, req: Request<GetCronRequest>) -> Result<Response<GetCronResponse>, Status> {
        let (cron, runs) = self.crons.get(&req.get_ref().id).await?;
        Ok(Response::new(GetCronResponse { cron: Some(cron), runs }))
    }

    async fn update_cron(&self, req: Request<UpdateCronRequest>) -> Result<Response<UpdateCronResponse>, Status> {
        let r = req.into_inner();
        let cron =
            self.crons.update(&r.id, r.name.as_deref(), r.schedule.as_deref(), r.message.as_deref(), r.enabled).await?;
        Ok(Response::new(UpdateCronResponse { cron: Some(cron) }))
    }

    async fn delete_cron(&self, req: Request<DeleteCronRequest>) -> Result<Response<DeleteCronResponse>, Status> {
        self.crons.delete(&req.get_ref().id).await?;
        Ok(Response::new(DeleteCronResponse {}))
    }

    async fn kill_cron(&self, req: Request<KillCronRequest>) -> Result<Response<KillCronResponse>, Status> {
        Ok(Response::new(KillCronResponse { cron: Some(self.crons.kill(&req.get_ref().id).await?) }))
    }

    async fn get_alerts(&self, _req: Request<GetAlertsRequest>) -> Result<Response<GetAlertsResponse>, Status> {
        let page = self.alerts.page().await;
        Ok(Response::new(self.failures.or_warning("alerts", page, |p, w| p.warning = w)?))
    }

    async fn create_alert_rule(
        &self,
        req: Request<CreateAlertRuleRequest>,
    ) -> Result<Response<CreateAlertRuleResponse>, Status> {
        let r = req.into_inner();
        let spec = RuleSpec {
            name: r.name,
            kind: r.kind,
            threshold: r.threshold,
            window_secs: r.window_secs,
            webhook_url: r.webhook_url,
            enabled: r.enabled.unwrap_or(true),
        };
        Ok(Response::new(CreateAlertRuleResponse { rule: Some(self.alerts.create(spec).await?) }))
    }

    async fn update_alert_rule(
        &self,
        req: Request<UpdateAlertRuleRequest>,
    ) -> Result<Response<UpdateAlertRuleResponse>, Status> {
        let r = req.into_inner();
        let rule = self
            .alerts
            .update(&r.id, |spec| {
                if let Some(name) = r.name {
                    spec.name = name;
                }
                if let Some(threshold) = r.threshold {
                    spec.threshold = threshold;
                }
                if let Some(window) = r.window_secs {
                    spec.window_secs = window;
                }
                if let Some(url) = r.webhook_url {
                    spec.webhook_url = url;
                }
                if let Some(enabled) = r.enabled {
                    spec.enabled = enabled;
                }
            })
            .await?;
        Ok(Response::new(UpdateAlertRuleResponse { rule: Some(rule) }))
    }

    async fn delete_alert_rule(
        &self,
        req: Request<DeleteAlertRuleRequest>,
    ) -> Result<Response<DeleteAlertRuleResponse>, Status> {
        self.alerts.delete(&req.get_ref().id).await?;
        Ok(Response::new(DeleteAlertRuleResponse {}))
    }

    async fn acknowledge_alert(
        &self,
        req: Request<AcknowledgeAlertRequest>,
    ) -> Result<Response<AcknowledgeAlertResponse>, Status> {
        Ok(Response::new(AcknowledgeAlertResponse { alert: Some(self.alerts.acknowledge(req.get_ref().id).await?) }))
    }

    async fn get_guard(&self, _req: Request<GetGuardRequest>) -> Result<Response<GetGuardResponse>, Status> {
        let page = self.guard.page().await;
        Ok(Response::new(self.failures.or_warning("guard", page, |p, w| p.warning = w)?))
    }

    async fn create_guard_policy(
        &self,
        req: Request<CreateGuardPolicyRequest>,
    ) -> Result<Response<CreateGuardPolicyResponse>, Status> {
        let r = req.into_inner();
        let policy = self.guard.create(&r.kind, &r.instance_id, r.limit, r.enabled.unwrap_or(true)).await?;
        Ok(Response::new(CreateGuardPolicyResponse { policy: Some(policy) }))
    }

    async fn update_guard_policy(
        &self,
        req: Request<UpdateGuardPolicyRequest>,
    ) -> Result<Response<UpdateGuardPolicyResponse>, Status> {
        let r = req.into_inner();
        Ok(Response::new(UpdateGuardPolicyResponse {
            policy: Some(self.guard.update(&r.id, r.limit, r.enabled).await?),
        }))
    }

    async fn delete_guard_policy(
        &self,
        req: Request<DeleteGuardPolicyRequest>,
    ) -> Result<Response<DeleteGuardPolicyResponse>, Status> {
        self.guard.delete(&req.get_ref().id).await?;
        Ok(Response::new(DeleteGuardPolicyResponse {}))
    }

    async fn get_status(&self, _req: Request<GetStatusRequest>) -> Result<Response<GetStatusResponse>, Status> {
        Ok(Response::new(self.status().await))
    }

    async fn list_replicas(
        &self,
        _req: Request<ListReplicasRequest>,
    ) -> Result<Response<ListReplicasResponse>, Status> {
        let self_id = self.leadership.replica().to_owned();
        let list = self.replicas().await.map(|replicas| ListReplicasResponse { replicas, ..Default::default() });
        let mut answer = self.failures.or_warning("replicas", list, |p, w| p.warning = w)?;
        answer.self_id = self_id;
        Ok(Response::new(answer))
    }

    async fn get_channels(&self, _req: Request<GetChannelsRequest>) -> Result<Response<GetChannelsResponse>, Status> {
        let page = channels::channels_page(&self.store).await;
        Ok(Response::new(self.failures.or_warning("channels", page, |p, w| p.warning = w)?))
    }

    async fn get_skills(&self, _req: Request<GetSkillsRequest>) -> Result<Response<GetSkillsResponse>, Status> {
        // The list never needs the store; only the counts do.
        let (mut page, failure) = self.skills.page().await;
        if let Some(err) = failure {
            page.warning = self.failures.note("skills", &err);
        }
        Ok(Response::new(page))
    }
}
