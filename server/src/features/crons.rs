//! Crons: messages sent to hosted agents on a schedule (`/api/crons`).
//!
//! A due cron is claimed by moving its `next_run_ms` forward with a compare-and-set on the
//! old value, so replicas sharing PostgreSQL run each occurrence once, and a crash during a
//! run skips that occurrence rather than repeating it. The message goes through the same
//! path as any other (`Hosting::send_message`, source `cron`): the agent's queue, turn cap
//! and billing apply. Runs are kept per cron, the newest 100.

use std::{sync::Arc, time::Duration};

use roost_proto::{
    ApiError,
    v1::{Cron, CronRun, SendMessageRequest},
};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::schedule::Schedule;
use crate::{
    Result,
    agents::{Hosting, limits},
    ids,
    store::{Store, on_reader, on_writer},
    telemetry::turns::detail,
    time::{now_ms, timestamp_ms},
};

/// Runs kept per cron.
const KEEP_RUNS: i64 = 100;
/// How often the worker looks for due crons.
const TICK: Duration = Duration::from_millis(500);
/// Longest label.
const MAX_NAME_BYTES: usize = 200;

type CronRow = (String, String, String, String, String, bool, Option<i64>, Option<i64>, i64);
const CRON_COLUMNS: &str = "id, instance_id, name, schedule, message, enabled, next_run_ms, last_run_ms, created_ms";

fn to_proto(row: CronRow) -> Cron {
    let (id, instance_id, name, schedule, message, enabled, next, last, created) = row;
    Cron {
        id,
        instance_id,
        name,
        schedule,
        message,
        enabled,
        next_run: next.map(timestamp_ms),
        last_run: last.map(timestamp_ms),
        created_at: Some(timestamp_ms(created)),
    }
}

fn parse(schedule: &str) -> Result<Schedule, ApiError> {
    Schedule::parse(schedule).map_err(|e| ApiError::invalid_argument(format!("schedule: {e}")))
}

/// The next run after `after_ms` (Unix ms), if the schedule fires again.
fn next_run(schedule: &Schedule, after_ms: i64) -> Option<i64> {
    schedule.next_after(after_ms.div_euclid(1000)).map(|s| s * 1000)
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("no cron {id}"))
}

/// The crons of one store, run against one hosting.
pub struct Crons {
    store: Store,
    hosting: Arc<Hosting>,
}

impl Crons {
    /// Crons stored in `store`, messaging agents of `hosting`.
    pub fn new(store: Store, hosting: Arc<Hosting>) -> Arc<Self> {
        Arc::new(Self { store, hosting })
    }

    /// Every cron, newest first.
    pub async fn list(&self) -> Result<Vec<Cron>> {
        let rows: Vec<CronRow> =
            self.store.read_all(&format!("SELECT {CRON_COLUMNS} FROM crons ORDER BY created_ms DESC, id")).await?;
        Ok(rows.into_iter().map(to_proto).collect())
    }

    async fn row(&self, id: &str) -> Result<CronRow> {
        let row = self.store.read_by_id(&format!("SELECT {CRON_COLUMNS} FROM crons WHERE id = $1"), id).await?;
        Ok(row.ok_or_else(|| not_found(id))?)
    }

    /// A cron and its latest runs.
    pub async fn get(&self, id: &str) -> Result<(Cron, Vec<CronRun>)> {
        let cron = to_proto(self.row(id).await?);
        let runs: Vec<(i64, i64, bool, String, String)> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT started_ms, duration_ms, ok, reply, error FROM cron_runs WHERE cron_id = $1 \
                 ORDER BY id DESC LIMIT $2",
            )
            .bind(id)
            .bind(KEEP_RUNS)
            .fetch_all(pool)
            .await
        })?;
        let runs = runs
            .into_iter()
            .map(|(started, duration_ms, ok, reply, error)| CronRun {
                started_at: Some(timestamp_ms(started)),
                duration_ms,
                ok,
                reply,
                error,
            })
            .collect();
        Ok((cron, runs))
    }

    /// Creates a cron for a live hosted agent.
    pub async fn create(
        &self,
        instance_id: &str,
        name: &str,
        schedule: &str,
        message: &str,
        enabled: bool,
    ) -> Result<Cron> {
        let instance_id = limits::instance_id(instance_id)?;
        let schedule_parsed = parse(schedule)?;
        check_fields(name, message)?;
        match self.store.instance(instance_id).await? {
            Some(row) if row.destroyed_at.is_none() => {}
            _ => return Err(ApiError::not_found(format!("no hosted agent {instance_id}")).into()),
        }
        let now = now_ms();
        let id = ids::new_id("cron");
        let next = enabled.then(|| next_run(&schedule_parsed, now)).flatten();
        on_writer!(self.store, |pool| {
            sqlx::query(
                "INSERT INTO crons (id, instance_id, name, schedule, message, enabled, next_run_ms, last_run_ms, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8)",
            )
            .bind(&id)
            .bind(instance_id)
            .bind(name)
            .bind(schedule.trim())
            .bind(message)
            .bind(enabled)
            .bind(next)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        info!(cron = %id, instance = instance_id, schedule = schedule.trim(), "cron created");
        Ok(to_proto(self.row(&id).await?))
    }

    /// Changes the given fields; a new schedule or re-enabling computes the next run anew.
    pub async fn update(
        &self,
        id: &str,
        name: Option<&str>,
        schedule: Option<&str>,
        message: Option<&str>,
        enabled: Option<bool>,
    ) -> Result<Cron> {
        let (_, _, old_name, old_schedule, old_message, old_enabled, ..) = self.row(id).await?;
        let name = name.unwrap_or(&old_name);
        let schedule = schedule.map_or(old_schedule.as_str(), str::trim);
        let message = message.unwrap_or(&old_message);
        let enabled = enabled.unwrap_or(old_enabled);
        let parsed = parse(schedule)?;
        check_fields(name, message)?;
        let next = enabled.then(|| next_run(&parsed, now_ms())).flatten();
        on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE crons SET name = $2, schedule = $3, message = $4, enabled = $5, next_run_ms = $6 WHERE id = $1",
            )
            .bind(id)
            .bind(name)
            .bind(schedule)
            .bind(message)
            .bind(enabled)
            .bind(next)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(to_proto(self.row(id).await?))
    }

    /// Stops a cron from running again.
    pub async fn kill(&self, id: &str) -> Result<Cron> {
        let cron = self.update(id, None, None, None, Some(false)).await?;
        info!(cron = id, "cron killed");
        Ok(cron)
    }

    /// Removes a cron and its runs.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let deleted = on_writer!(self.store, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM cron_runs WHERE cron_id = $1").bind(id).execute(&mut *tx).await?;
            let deleted =
                sqlx::query("DELETE FROM crons WHERE id = $1").bind(id).execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            Ok::<_, sqlx::Error>(deleted)
        })?;
        if deleted == 0 {
            return Err(not_found(id).into());
        }
        Ok(())
    }

    /// Claims the due occurrences: each cron whose next run has come, moved to its next
    /// run after now. Returns what to run.
    async fn claim_due(&self, now: i64) -> Result<Vec<CronRow>> {
        let due: Vec<CronRow> = on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {CRON_COLUMNS} FROM crons WHERE enabled = $1 AND next_run_ms <= $2"
            )))
            .bind(true)
            .bind(now)
            .fetch_all(pool)
            .await
        })?;
        let mut claimed = Vec::new();
        for row in due {
            let next = Schedule::parse(&row.3).ok().and_then(|s| next_run(&s, now));
            let won = on_writer!(self.store, |pool| {
                sqlx::query("UPDATE crons SET next_run_ms = $3, last_run_ms = $4 WHERE id = $1 AND next_run_ms = $2")
                    .bind(&row.0)
                    .bind(row.6)
                    .bind(next)
                    .bind(now)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            })?;
            if won == 1 {
                claimed.push(row);
            }
        }
        Ok(claimed)
    }

    /// Sends one occurrence's message and records the run.
    async fn run_one(&self, row: CronRow) {
        let (id, instance_id, .., message) = (row.0, row.1, row.4);
        let started = now_ms();
        let outcome = async {
            let instance = self.store.instance(&instance_id).await?;
            let Some(instance) = instance.filter(|i| i.destroyed_at.is_none()) else {
                return Err(ApiError::not_found(format!("hosted agent {instance_id} is gone")).into());
            };
            let req = SendMessageRequest { instance_id: instance_id.clone(), text: message };
            self.hosting.send_message(&instance.account_id, req, "cron").await
        }
        .await;
        let (ok, reply, error) = match outcome {
            Ok(reply) => (true, detail(&reply.reply), String::new()),
            Err(err) => {
                let err = err.to_api();
                warn!(cron = %id, instance = %instance_id, error = err.message(), "cron run failed");
                (false, String::new(), format!("{}: {}", err.reason().code(), err.message()))
            }
        };
        let duration = now_ms() - started;
        let recorded: Result<u64, sqlx::Error> = on_writer!(self.store, |pool| {
            async {
            sqlx::query(
                "INSERT INTO cron_runs (cron_id, started_ms, duration_ms, ok, reply, error) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&id)
            .bind(started)
            .bind(duration)
            .bind(ok)
            .bind(&reply)
            .bind(&error)
            .execute(pool)
            .await?;
            sqlx::query(
                "DELETE FROM cron_runs WHERE cron_id = $1 AND id <= \
                 (SELECT id FROM cron_runs WHERE cron_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
            )
            .bind(&id)
            .bind(KEEP_RUNS)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        }
        .await
        });
        if let Err(err) = recorded {
            warn!(cron = %id, error = %err, "could not record a cron run");
        }
    }

    /// The worker: runs due crons until `stop`. Each run is its own task, so a slow turn
    /// delays nothing else.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            match self.claim_due(now_ms()).await {
                Ok(due) => {
                    for row in due {
                        let crons = self.clone();
                        tokio::spawn(async move { crons.run_one(row).await });
                    }
                }
                Err(err) => warn!(error = %err, "could not look for due crons"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }
}

fn check_fields(name: &str, message: &str) -> Result<(), ApiError> {
    if name.len() > MAX_NAME_BYTES {
        return Err(ApiError::invalid_argument(format!("name is longer than {MAX_NAME_BYTES} bytes")));
    }
    if message.trim().is_empty() {
        return Err(ApiError::invalid_argument("message is required"));
    }
    limits::text(message)
}
