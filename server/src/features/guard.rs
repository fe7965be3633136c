//! Guard (`/api/guard`): policies that pause a running hosted agent and record an incident.
//!
//! - `spend_per_day`: the agent's cost today (UTC), from its turns and spans, above the
//!   limit in USD. Once it acted on an agent, the policy leaves that agent alone for the
//!   rest of the day, so an operator who resumes it on purpose is not overruled.
//! - `tool_loop`: the agent's last `limit` tool calls were the same tool with the same
//!   input. It acts again only on a loop that formed after its last incident.
//!
//! Both count only what roost attributed to the agent (`agent_instance`): its turns, its
//! model gateway calls and egress, and the spans its runtime sent with its own agent token
//! (`crate::callers::tokens`). Of those, spend counts only what roost metered: the cost
//! a runtime reports about itself is no cost (`crate::telemetry::agent_claims`), while its
//! tool calls are what `tool_loop` watches. Telemetry that merely names the agent (a
//! `session.id`, an agent id), whoever sends it (another account's node push, a dashboard
//! caller), never makes the guard pause it.

use std::{sync::Arc, time::Duration};

use roost_proto::{
    ApiError,
    v1::{GetGuardResponse, GuardIncident, GuardPolicy},
};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    Result,
    agents::{Hosting, instances::Status, limits},
    ids,
    store::{Store, on_reader, on_writer},
    telemetry::{packed_attributes, runs::nanocents_to_usd},
    time::{now_ms, timestamp_ms},
};

/// The kinds of policy.
pub const KINDS: [&str; 2] = ["spend_per_day", "tool_loop"];
const INCIDENTS: i64 = 50;

type PolicyRow = (String, String, String, f64, bool, i64);
const POLICY_COLUMNS: &str = "id, kind, instance_id, limit_value, enabled, created_ms";

fn policy_proto(p: PolicyRow) -> GuardPolicy {
    GuardPolicy { id: p.0, kind: p.1, instance_id: p.2, limit: p.3, enabled: p.4, created_at: Some(timestamp_ms(p.5)) }
}

fn check_limit(kind: &str, limit: f64) -> Result<(), ApiError> {
    if !KINDS.contains(&kind) {
        return Err(ApiError::invalid_argument(format!("kind must be one of {}", KINDS.join(", "))));
    }
    let ok = match kind {
        "tool_loop" => (2.0..=1000.0).contains(&limit) && limit.fract() == 0.0,
        _ => limit.is_finite() && limit > 0.0,
    };
    if !ok {
        return Err(ApiError::invalid_argument(match kind {
            "tool_loop" => "limit must be a whole number of calls from 2 to 1000",
            _ => "limit must be an amount in USD above 0",
        }));
    }
    Ok(())
}

/// A tool call span's input: its arguments attribute (GenAI semconv, OpenInference,
/// Vercel AI SDK), else all its attributes.
fn span_tool_input(attributes: &serde_json::Value) -> String {
    ["gen_ai.tool.call.arguments", "input.value", "ai.toolCall.args"]
        .iter()
        .find_map(|key| attributes.get(*key))
        .map_or_else(|| attributes.to_string(), |value| value.as_str().map_or_else(|| value.to_string(), str::to_owned))
}

/// A tool call the loop check reads: tool, input (a span's attributes as JSON text when
/// stored before they were packed), a span's packed attributes, time, and whether it is a
/// span.
type ToolCallRow = (String, String, Option<Vec<u8>>, i64, bool);

/// The guard of one store and hosting.
pub struct Guard {
    store: Store,
    hosting: Arc<Hosting>,
}

impl Guard {
    /// Policies in `store`, enforced on `hosting`'s agents.
    pub fn new(store: Store, hosting: Arc<Hosting>) -> Arc<Self> {
        Arc::new(Self { store, hosting })
    }

    async fn policies(&self) -> Result<Vec<PolicyRow>> {
        self.store.read_all(&format!("SELECT {POLICY_COLUMNS} FROM guard_policies ORDER BY created_ms, id")).await
    }

    async fn policy(&self, id: &str) -> Result<PolicyRow> {
        let row =
            self.store.read_by_id(&format!("SELECT {POLICY_COLUMNS} FROM guard_policies WHERE id = $1"), id).await?;
        Ok(row.ok_or_else(|| ApiError::not_found(format!("no guard policy {id}")))?)
    }

    /// The guard page.
    pub async fn page(&self) -> Result<GetGuardResponse> {
        let incidents: Vec<(i64, String, String, i64, String, String)> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT id, policy_id, instance_id, at_ms, detail, action FROM guard_incidents ORDER BY id DESC LIMIT $1",
            )
            .bind(INCIDENTS)
            .fetch_all(pool)
            .await
        })?;
        Ok(GetGuardResponse {
            policies: self.policies().await?.into_iter().map(policy_proto).collect(),
            incidents: incidents
                .into_iter()
                .map(|(id, policy_id, instance_id, at, detail, action)| GuardIncident {
                    id,
                    policy_id,
                    instance_id,
                    at: Some(timestamp_ms(at)),
                    detail,
                    action,
                })
                .collect(),
            warning: String::new(),
        })
    }

    /// Adds a policy.
    pub async fn create(&self, kind: &str, instance_id: &str, limit: f64, enabled: bool) -> Result<GuardPolicy> {
        check_limit(kind, limit)?;
        if !instance_id.is_empty() {
            limits::instance_id(instance_id)?;
            if self.store.instance(instance_id).await?.is_none_or(|i| i.destroyed_at.is_some()) {
                return Err(ApiError::not_found(format!("no hosted agent {instance_id}")).into());
            }
        }
        let id = ids::new_id("grd");
        on_writer!(self.store, |pool| {
            sqlx::query(
                "INSERT INTO guard_policies (id, kind, instance_id, limit_value, enabled, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&id)
            .bind(kind)
            .bind(instance_id)
            .bind(limit)
            .bind(enabled)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        info!(policy = %id, kind, instance = instance_id, limit, "guard policy created");
        Ok(policy_proto(self.policy(&id).await?))
    }

    /// Changes a policy's limit or switch.
    pub async fn update(&self, id: &str, limit: Option<f64>, enabled: Option<bool>) -> Result<GuardPolicy> {
        let (_, kind, _, old_limit, old_enabled, _) = self.policy(id).await?;
        let (limit, enabled) = (limit.unwrap_or(old_limit), enabled.unwrap_or(old_enabled));
        check_limit(&kind, limit)?;
        on_writer!(self.store, |pool| {
            sqlx::query("UPDATE guard_policies SET limit_value = $2, enabled = $3 WHERE id = $1")
                .bind(id)
                .bind(limit)
                .bind(enabled)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(policy_proto(self.policy(id).await?))
    }

    /// Removes a policy (its incidents stay, as history).
    pub async fn delete(&self, id: &str) -> Result<()> {
        let deleted = on_writer!(self.store, |pool| {
            sqlx::query("DELETE FROM guard_policies WHERE id = $1")
                .bind(id)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if deleted == 0 {
            return Err(ApiError::not_found(format!("no guard policy {id}")).into());
        }
        Ok(())
    }

    /// When this policy last acted on this agent, if ever.
    async fn last_incident(&self, policy: &str, instance: &str) -> Result<Option<i64>> {
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_scalar("SELECT MAX(at_ms) FROM guard_incidents WHERE policy_id = $1 AND instance_id = $2")
                .bind(policy)
                .bind(instance)
                .fetch_one(pool)
                .await
        })?)
    }

    /// Why `policy` should pause `instance` now, if it should.
    async fn violation(&self, policy: &PolicyRow, instance: &str, now: i64) -> Result<Option<String>> {
        let last = self.last_incident(&policy.0, instance).await?;
        let day_start_ms = now - now.rem_euclid(86_400_000);
        match policy.1.as_str() {
            "spend_per_day" => {
                if last.is_some_and(|at| at >= day_start_ms) {
                    return Ok(None);
                }
                let since_ns = day_start_ms * 1_000_000;
                let nanocents: i64 = on_reader!(self.store, |pool| {
                    sqlx::query_scalar(
                        "SELECT CAST(COALESCE((SELECT SUM(cost_nanocents) FROM events \
                                                   WHERE agent_instance = $1 AND ts_ns >= $2), 0) \
                              + COALESCE((SELECT SUM(cost_nanocents) FROM spans \
                                          WHERE agent_instance = $1 AND start_ns >= $2), 0) AS BIGINT)",
                    )
                    .bind(instance)
                    .bind(since_ns)
                    .fetch_one(pool)
                    .await
                })?;
                let usd = nanocents_to_usd(nanocents);
                Ok((usd > policy.3).then(|| format!("spent ${usd:.4} today, over the limit of ${:.4}", policy.3)))
            }
            _ => {
                let n = policy.3 as i64;
                let rows: Vec<ToolCallRow> = on_reader!(self.store, |pool| {
                    sqlx::query_as(
                        "SELECT tool_name, data, NULL, ts_ns, FALSE FROM events WHERE agent_instance = $1 AND tool_name <> '' \
                         UNION ALL \
                         SELECT tool_name, attributes, packed_attributes, start_ns, TRUE FROM spans \
                         WHERE agent_instance = $1 AND tool_name IS NOT NULL AND tool_name <> '' \
                         ORDER BY 4 DESC LIMIT $2",
                    )
                    .bind(instance)
                    .bind(n)
                    .fetch_all(pool)
                    .await
                })?;
                let calls: Vec<(String, String, i64)> = rows
                    .into_iter()
                    .map(|(tool, input, packed, at, span)| {
                        let input = if span {
                            span_tool_input(&packed_attributes::stored(packed.as_deref(), &input))
                        } else {
                            input
                        };
                        (tool, input, at)
                    })
                    .collect();
                let looping = calls.len() as i64 == n && calls.windows(2).all(|w| w[0].0 == w[1].0 && w[0].1 == w[1].1);
                // Only a loop that formed after the last incident counts.
                let fresh = calls.last().is_some_and(|oldest| last.is_none_or(|at| oldest.2 / 1_000_000 > at));
                Ok((looping && fresh).then(|| format!("called {} {n} times in a row with the same input", calls[0].0)))
            }
        }
    }

    /// One pass over every enabled policy and the running agents it watches.
    pub async fn check(&self) -> Result<()> {
        let policies: Vec<PolicyRow> = self.policies().await?.into_iter().filter(|p| p.4).collect();
        if policies.is_empty() {
            return Ok(());
        }
        let running: Vec<_> =
            self.store.live_instances().await?.into_iter().filter(|i| i.status() == Status::Running).collect();
        let now = now_ms();
        for policy in &policies {
            for agent in running.iter().filter(|a| policy.2.is_empty() || policy.2 == a.id) {
                let Some(detail) = self.violation(policy, &agent.id, now).await? else { continue };
                let action = match self.hosting.pause(&agent.account_id, &agent.id).await {
                    Ok(_) => "paused".to_owned(),
                    Err(err) => format!("pause_failed: {}", err.to_api().message()),
                };
                warn!(policy = %policy.0, instance = %agent.id, %detail, %action, "guard policy enforced");
                on_writer!(self.store, |pool| {
                    sqlx::query(
                        "INSERT INTO guard_incidents (policy_id, instance_id, at_ms, detail, action) VALUES ($1, $2, $3, $4, $5)",
                    )
                    .bind(&policy.0)
                    .bind(&agent.id)
                    .bind(now)
                    .bind(&detail)
                    .bind(&action)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
                })?;
            }
        }
        Ok(())
    }

    /// The worker: checks every `every` until `stop`.
    pub async fn run(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        super::every("guard", every, stop, || self.check()).await;
    }
}
