//! Alerts (`/api/alerts`): rules over the observed data, checked by a worker; an alert
//! fires when its rule's condition starts to hold, stays active while it holds, and
//! resolves when it clears. A firing alert is POSTed to the rule's webhook, retried on
//! later checks (at most 5 attempts) until a 2xx.

use std::{sync::Arc, time::Duration};

use roost_proto::{
    ApiError, numbers,
    v1::{Alert, AlertRule, GetAlertsResponse},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{
    Result, ids,
    store::{Store, on_reader, on_writer},
    telemetry::{runs::nanocents_to_usd, summaries::USAGE_WITH_METRICS},
    time::{now_ms, timestamp_ms, utc_day},
};

/// The kinds of rule.
pub const KINDS: [&str; 4] = ["cost_per_day", "error_rate", "token_spike", "stuck_session"];
const DEFAULT_WINDOW_SECS: i64 = 3600;
const MAX_DELIVERY_ATTEMPTS: i64 = 5;
const HISTORY: i64 = 50;

type RuleRow = (String, String, String, f64, i64, String, bool, i64);
const RULE_COLUMNS: &str = "id, name, kind, threshold, window_secs, webhook_url, enabled, created_ms";
type AlertRow = (i64, String, String, i64, f64, String, Option<i64>, Option<i64>, bool, String, i64);
const ALERT_COLUMNS: &str = "a.id, a.rule_id, COALESCE(r.name, ''), a.fired_ms, a.value, a.message, a.resolved_ms, \
     a.acknowledged_ms, a.delivered, a.delivery_error, a.delivery_attempts";

fn rule_proto(r: RuleRow) -> AlertRule {
    AlertRule {
        id: r.0,
        name: r.1,
        kind: r.2,
        threshold: r.3,
        window_secs: r.4,
        webhook_url: r.5,
        enabled: r.6,
        created_at: Some(timestamp_ms(r.7)),
    }
}

fn alert_proto(a: AlertRow) -> Alert {
    Alert {
        id: a.0,
        rule_id: a.1,
        rule_name: a.2,
        fired_at: Some(timestamp_ms(a.3)),
        value: a.4,
        message: a.5,
        resolved_at: a.6.map(timestamp_ms),
        acknowledged_at: a.7.map(timestamp_ms),
        delivered: a.8,
        delivery_error: a.9,
        delivery_attempts: a.10,
    }
}

/// Which alerts to read.
enum Filter {
    Active,
    All,
    Id(i64),
    /// Active, with a webhook, not delivered yet.
    Owed,
}

/// A rule's settings, checked.
pub struct RuleSpec {
    /// Label.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Limit.
    pub threshold: f64,
    /// Window, seconds.
    pub window_secs: i64,
    /// Webhook.
    pub webhook_url: String,
    /// On or off.
    pub enabled: bool,
}

impl RuleSpec {
    fn check(&mut self) -> Result<(), ApiError> {
        if !KINDS.contains(&self.kind.as_str()) {
            return Err(ApiError::invalid_argument(format!("kind must be one of {}", KINDS.join(", "))));
        }
        if !self.threshold.is_finite() || self.threshold < 0.0 {
            return Err(ApiError::invalid_argument("threshold must be a number, 0 or more"));
        }
        if self.threshold == 0.0 && self.kind != "stuck_session" {
            return Err(ApiError::invalid_argument(format!("a {} rule needs a threshold above 0", self.kind)));
        }
        if self.window_secs == 0 {
            self.window_secs = DEFAULT_WINDOW_SECS;
        }
        if !(60..=604_800).contains(&self.window_secs) {
            return Err(ApiError::invalid_argument("window_secs must be between 60 and 604800"));
        }
        let url = self.webhook_url.trim();
        if !url.is_empty() && reqwest::Url::parse(url).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
            return Err(ApiError::invalid_argument("webhook_url must be an http or https URL"));
        }
        self.webhook_url = url.to_owned();
        if self.name.len() > 200 {
            return Err(ApiError::invalid_argument("name is longer than 200 bytes"));
        }
        Ok(())
    }
}

/// The alerts of one store.
pub struct Alerts {
    store: Store,
    http: reqwest::Client,
}

impl Alerts {
    /// Alerts kept in `store`.
    pub fn new(store: Store) -> Arc<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap_or_default();
        Arc::new(Self { store, http })
    }

    async fn rules(&self) -> Result<Vec<RuleRow>> {
        self.store.read_all(&format!("SELECT {RULE_COLUMNS} FROM alert_rules ORDER BY created_ms, id")).await
    }

    async fn rule(&self, id: &str) -> Result<RuleRow> {
        let row = self.store.read_by_id(&format!("SELECT {RULE_COLUMNS} FROM alert_rules WHERE id = $1"), id).await?;
        Ok(row.ok_or_else(|| ApiError::not_found(format!("no alert rule {id}")))?)
    }

    async fn alerts(&self, filter: Filter) -> Result<Vec<AlertRow>> {
        let (condition, id) = match filter {
            Filter::Active => ("a.resolved_ms IS NULL", None),
            Filter::All => ("1 = 1", None),
            Filter::Id(id) => ("a.id = $1", Some(id)),
            // NOT works on SQLite's 0/1 and on PostgreSQL's booleans alike.
            Filter::Owed => ("a.resolved_ms IS NULL AND NOT a.delivered AND r.webhook_url <> ''", None),
        };
        let sql = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts a LEFT JOIN alert_rules r ON r.id = a.rule_id WHERE {condition} \
             ORDER BY a.id DESC LIMIT {HISTORY}"
        );
        Ok(on_reader!(self.store, |pool| {
            let query = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()));
            match id {
                Some(id) => query.bind(id).fetch_all(pool).await,
                None => query.fetch_all(pool).await,
            }
        })?)
    }

    /// The alerts page.
    pub async fn page(&self) -> Result<GetAlertsResponse> {
        Ok(GetAlertsResponse {
            rules: self.rules().await?.into_iter().map(rule_proto).collect(),
            active: self.alerts(Filter::Active).await?.into_iter().map(alert_proto).collect(),
            history: self.alerts(Filter::All).await?.into_iter().map(alert_proto).collect(),
            warning: String::new(),
        })
    }

    /// Adds a rule.
    pub async fn create(&self, mut spec: RuleSpec) -> Result<AlertRule> {
        spec.check()?;
        let id = ids::new_id("alr");
        on_writer!(self.store, |pool| {
            sqlx::query(
                "INSERT INTO alert_rules (id, name, kind, threshold, window_secs, webhook_url, enabled, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&id)
            .bind(&spec.name)
            .bind(&spec.kind)
            .bind(spec.threshold)
            .bind(spec.window_secs)
            .bind(&spec.webhook_url)
            .bind(spec.enabled)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(rule_proto(self.rule(&id).await?))
    }

    /// Changes a rule: `change` edits its current settings, which are checked again.
    pub async fn update(&self, id: &str, change: impl FnOnce(&mut RuleSpec)) -> Result<AlertRule> {
        let (_, name, kind, threshold, window_secs, webhook_url, enabled, _) = self.rule(id).await?;
        let mut spec = RuleSpec { name, kind, threshold, window_secs, webhook_url, enabled };
        change(&mut spec);
        spec.check()?;
        on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE alert_rules SET name = $2, threshold = $3, window_secs = $4, webhook_url = $5, enabled = $6 \
                 WHERE id = $1",
            )
            .bind(id)
            .bind(&spec.name)
            .bind(spec.threshold)
            .bind(spec.window_secs)
            .bind(&spec.webhook_url)
            .bind(spec.enabled)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(rule_proto(self.rule(id).await?))
    }

    /// Removes a rule and its alerts.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let deleted = on_writer!(self.store, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM alerts WHERE rule_id = $1").bind(id).execute(&mut *tx).await?;
            let n =
                sqlx::query("DELETE FROM alert_rules WHERE id = $1").bind(id).execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            Ok::<_, sqlx::Error>(n)
        })?;
        if deleted == 0 {
            return Err(ApiError::not_found(format!("no alert rule {id}")).into());
        }
        Ok(())
    }

    /// Marks an alert seen (the first acknowledgement's time is kept).
    pub async fn acknowledge(&self, id: i64) -> Result<Alert> {
        on_writer!(self.store, |pool| {
            sqlx::query("UPDATE alerts SET acknowledged_ms = $2 WHERE id = $1 AND acknowledged_ms IS NULL")
                .bind(id)
                .bind(now_ms())
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        let alert = self.alerts(Filter::Id(id)).await?.into_iter().next();
        Ok(alert_proto(alert.ok_or_else(|| ApiError::not_found(format!("no alert {id}")))?))
    }

    /// What a rule measures now, and a sentence about it.
    async fn measure(&self, rule: &RuleRow, now: i64) -> Result<(f64, String)> {
        let (kind, window) = (rule.2.as_str(), rule.4);
        let now_ns = now * 1_000_000;
        let since_ns = now_ns - window * 1_000_000_000;
        match kind {
            "cost_per_day" => {
                let day = utc_day(now_ns);
                let sql = format!(
                    "SELECT CAST(COALESCE(SUM(cost_nanocents), 0) AS BIGINT) FROM {USAGE_WITH_METRICS} WHERE day = $1"
                );
                let nanocents: i64 = on_reader!(self.store, |pool| {
                    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.as_str())).bind(&day).fetch_one(pool).await
                })?;
                let usd = nanocents_to_usd(nanocents);
                // The page shows the value with the same rule: the two read alike.
                let (spent, limit) = (numbers::usd(usd), numbers::usd(rule.3));
                Ok((usd, format!("{spent} spent today ({day}); the limit is {limit}")))
            }
            "error_rate" => {
                let (total, errors): (i64, i64) = on_reader!(self.store, |pool| {
                    sqlx::query_as(
                        "SELECT (SELECT COUNT(*) FROM spans WHERE start_ns >= $1), \
                                (SELECT COUNT(*) FROM spans WHERE status_code = 2 AND start_ns >= $1)",
                    )
                    .bind(since_ns)
                    .fetch_one(pool)
                    .await
                })?;
                let rate = if total == 0 { 0.0 } else { errors as f64 / total as f64 };
                Ok((rate, format!("{errors} of {total} spans failed in the last {window} s ({:.1}%)", rate * 100.0)))
            }
            "token_spike" => {
                let day_ns = 86_400 * 1_000_000_000;
                let (recent, before): (i64, i64) = on_reader!(self.store, |pool| {
                    sqlx::query_as(
                        "SELECT CAST(COALESCE(SUM(CASE WHEN start_ns >= $1 THEN t END), 0) AS BIGINT), \
                                CAST(COALESCE(SUM(CASE WHEN start_ns < $1 THEN t END), 0) AS BIGINT) FROM ( \
                           SELECT start_ns, COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) AS t FROM spans \
                             WHERE start_ns >= $2 AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL) \
                           UNION ALL \
                           SELECT ts_ns, input_tokens + output_tokens FROM events WHERE ts_ns >= $2 \
                         ) AS usage",
                    )
                    .bind(since_ns)
                    .bind(since_ns - day_ns)
                    .fetch_one(pool)
                    .await
                })?;
                let windows = (86_400.0 / window as f64).max(1.0);
                let average = before as f64 / windows;
                let ratio = recent as f64 / average.max(1.0);
                Ok((
                    ratio,
                    format!("{recent} tokens in the last {window} s, {ratio:.1}× the average of the day before"),
                ))
            }
            _ => {
                let stuck: Vec<(String, String, i64)> = on_reader!(self.store, |pool| {
                    sqlx::query_as(
                        "SELECT r.id, r.session_id, COALESCE(MAX(e.ts_ns), r.started_ns) AS last_ns FROM runs r \
                         LEFT JOIN events e ON e.run_id = r.id WHERE r.ended_ns IS NULL \
                         GROUP BY r.id, r.session_id, r.started_ns \
                         HAVING COALESCE(MAX(e.ts_ns), r.started_ns) < $1 LIMIT 20",
                    )
                    .bind(since_ns)
                    .fetch_all(pool)
                    .await
                })?;
                let message = match stuck.first() {
                    Some((run, session, _)) => format!(
                        "{} open run(s) quiet for over {window} s, such as run {run} of session {session}",
                        stuck.len()
                    ),
                    None => "no stuck sessions".to_owned(),
                };
                Ok((stuck.len() as f64, message))
            }
        }
    }

    /// One check of every enabled rule: fire, keep, resolve; then deliver what is owed.
    pub async fn check(&self) -> Result<()> {
        let now = now_ms();
        for rule in self.rules().await?.into_iter().filter(|r| r.6) {
            let (value, message) = match self.measure(&rule, now).await {
                Ok(measured) => measured,
                Err(err) => {
                    warn!(rule = %rule.0, error = %err, "could not evaluate an alert rule");
                    continue;
                }
            };
            let firing = value > rule.3;
            let active: Option<i64> = on_reader!(self.store, |pool| {
                sqlx::query_scalar("SELECT id FROM alerts WHERE rule_id = $1 AND resolved_ms IS NULL")
                    .bind(&rule.0)
                    .fetch_optional(pool)
                    .await
            })?;
            match (firing, active) {
                (true, None) => {
                    info!(rule = %rule.0, value, %message, "alert fired");
                    on_writer!(self.store, |pool| {
                        sqlx::query(
                            "INSERT INTO alerts (rule_id, fired_ms, value, message, resolved_ms, acknowledged_ms, \
                             delivered, delivery_attempts, delivery_error) VALUES ($1, $2, $3, $4, NULL, NULL, $5, 0, '')",
                        )
                        .bind(&rule.0)
                        .bind(now)
                        .bind(value)
                        .bind(&message)
                        .bind(rule.5.is_empty())
                        .execute(pool)
                        .await
                        .map(|r| r.rows_affected())
                    })?;
                }
                (false, Some(id)) => {
                    info!(rule = %rule.0, "alert resolved");
                    on_writer!(self.store, |pool| {
                        sqlx::query("UPDATE alerts SET resolved_ms = $2 WHERE id = $1")
                            .bind(id)
                            .bind(now)
                            .execute(pool)
                            .await
                            .map(|r| r.rows_affected())
                    })?;
                }
                _ => {}
            }
        }
        self.deliver().await
    }

    /// POSTs active alerts not yet delivered to their rules' webhooks.
    async fn deliver(&self) -> Result<()> {
        let owed = self.alerts(Filter::Owed).await?;
        for alert in owed.into_iter().filter(|a| a.10 < MAX_DELIVERY_ATTEMPTS) {
            let rule = self.rule(&alert.1).await?;
            let attempts = alert.10 + 1;
            let body =
                json!({"event": "roost.alert", "alert": alert_proto(alert.clone()), "rule": rule_proto(rule.clone())});
            let outcome = match self.http.post(&rule.5).json(&body).send().await {
                Ok(resp) if resp.status().is_success() => Ok(()),
                Ok(resp) => Err(format!("the webhook answered {}", resp.status())),
                Err(err) => Err(format!("the webhook could not be reached: {err}")),
            };
            let (delivered, error) = match outcome {
                Ok(()) => (true, String::new()),
                Err(why) => {
                    warn!(alert = alert.0, attempts, error = %why, "alert delivery failed");
                    (false, why)
                }
            };
            on_writer!(self.store, |pool| {
                sqlx::query(
                    "UPDATE alerts SET delivered = $2, delivery_attempts = $3, delivery_error = $4 WHERE id = $1",
                )
                .bind(alert.0)
                .bind(delivered)
                .bind(attempts)
                .bind(&error)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            })?;
        }
        Ok(())
    }

    /// The worker: checks every `every` until `stop`.
    pub async fn run(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        super::every("alert", every, stop, || self.check()).await;
    }
}
