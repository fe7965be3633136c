//! The experiments' worker, on the leader replica: runs each queued or running experiment
//! item by item (see [`super`] for the rules that make a run resumable), and destroys the
//! copies of experiments that ended.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use roost_proto::{
    ErrorReason,
    v1::{ConfigureRequest, ModelMode, ProvisionRequest, SendMessageRequest},
};
use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Experiments, SOURCE, datasets::ItemRow, runs::ExperimentRow};
use crate::{
    Result,
    agents::instances::Status,
    evaluations::grading::Grade,
    ids::new_sortable_id,
    store::{BeginWrite as _, on_reader, on_writer},
    telemetry::rows::ScoreRow,
    time::now_ms,
};

/// How long a busy agent (queue full, restarting) is waited for before the next try.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// An item's claim: its `running` result with its turn id, while the experiment runs.
const CLAIM: &str = "INSERT INTO experiment_results (experiment_id, item_id, position, turn_id, status, output, error, \
     latency_ms, input_tokens, output_tokens, cost_nanocents, checks, scores, score_errors, judge_nanocents) \
     SELECT $1, $2, $3, $4, 'running', '', '', 0, 0, 0, 0, '{}', '{}', '{}', 0 \
     WHERE EXISTS (SELECT 1 FROM experiments WHERE id = $1 AND status = 'running')";

/// A recorded turn, as an item's result is settled from it.
#[derive(Debug, Clone, sqlx::FromRow)]
struct TurnDone {
    status: String,
    reply: String,
    error: String,
    duration_ms: i64,
    input_tokens: i64,
    output_tokens: i64,
    model: String,
    charged_nanocents: i64,
}

/// What an item came to, to be written in one transaction.
struct Settled {
    status: &'static str,
    output: String,
    error: String,
    turn: Option<TurnDone>,
    checks: BTreeMap<String, bool>,
    scores: Map<String, Value>,
    score_errors: BTreeMap<String, String>,
    /// (evaluator, cost) of each judge call.
    judge_costs: Vec<(String, i64)>,
}

/// Why a run stopped before its end.
enum Stop {
    /// Cancelled, or roost is stopping: nothing more to write.
    Quietly,
    /// The run cannot go on; the experiment fails with this.
    Failed(String),
}

impl From<crate::Error> for Stop {
    fn from(err: crate::Error) -> Self {
        Self::Failed(err.to_api().message().to_owned())
    }
}

/// The experiments running on this replica, by id.
#[derive(Default)]
pub struct Running(Mutex<HashMap<String, JoinHandle<()>>>);

impl Experiments {
    /// Runs experiments until `stop`: each in a task of its own, started by a pass when it
    /// is queued (or found running after a restart); a pass runs on a wake-up or every
    /// `every`.
    pub async fn run(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        let running = Running::default();
        loop {
            if let Err(err) = self.pass(&running, &stop).await {
                warn!(error = %err, "experiments' pass failed");
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(every) => {}
            }
        }
        let tasks: Vec<JoinHandle<()>> =
            running.0.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, t)| t).collect();
        for task in tasks {
            let _ = task.await;
        }
    }

    /// Starts a task for each live experiment without one, and destroys ended
    /// experiments' copies.
    async fn pass(self: &Arc<Self>, running: &Running, stop: &CancellationToken) -> Result<()> {
        let sql = format!(
            "SELECT {} FROM experiments WHERE status IN ('queued', 'running') OR copy_id <> '' ORDER BY created_ms",
            super::runs::COLUMNS
        );
        let rows: Vec<ExperimentRow> =
            on_reader!(self.store, |pool| { sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).fetch_all(pool).await })?;
        let mut tasks = running.0.lock().unwrap_or_else(|p| p.into_inner());
        tasks.retain(|_, task| !task.is_finished());
        for row in rows {
            if tasks.contains_key(&row.id) {
                continue;
            }
            let (this, stop, id) = (self.clone(), stop.clone(), row.id.clone());
            let task = if row.live() {
                tokio::spawn(async move { this.run_experiment(row, stop).await })
            } else {
                tokio::spawn(async move { this.destroy_copy(&row).await })
            };
            tasks.insert(id, task);
        }
        Ok(())
    }

    /// Runs one experiment to its end (or until it is cancelled or roost stops).
    async fn run_experiment(self: Arc<Self>, row: ExperimentRow, stop: CancellationToken) {
        let outcome = self.run_items(&row, &stop).await;
        let (status, detail) = match outcome {
            Ok(()) => {
                let done = self.experiment_row(&row.id).await.ok().flatten().unwrap_or(row.clone());
                ("completed", format!("Ran {} items: {} answered, {} failed.", done.items, done.completed, done.failed))
            }
            Err(Stop::Quietly) => return,
            Err(Stop::Failed(why)) => ("failed", format!("Stopped: {why}")),
        };
        let ended = on_writer!(self.store, |pool| {
            async {
                let mut tx = pool.begin_write().await?;
                // The item the run stopped on was refused before its turn ran (else its
                // record would have settled it): it failed with the run.
                let left = sqlx::query(
                    "UPDATE experiment_results SET status = 'failed', error = $2 \
                     WHERE experiment_id = $1 AND status = 'running'",
                )
                .bind(&row.id)
                .bind(&detail)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                sqlx::query(
                    "UPDATE experiments SET status = $2, status_detail = $3, finished_ms = $4, failed = failed + $5 \
                     WHERE id = $1 AND status IN ('queued', 'running')",
                )
                .bind(&row.id)
                .bind(status)
                .bind(&detail)
                .bind(now_ms())
                .bind(left as i64)
                .execute(&mut *tx)
                .await?;
                tx.commit().await
            }
            .await
        });
        if let Err(err) = ended {
            warn!(experiment = %row.id, error = %err, "could not record an experiment's end");
        }
        info!(experiment = %row.id, status, "experiment ended");
        if let Ok(Some(ended)) = self.experiment_row(&row.id).await {
            self.destroy_copy(&ended).await;
        }
    }

    /// Runs every item not yet settled, in dataset order. Each item's claim (its result
    /// row with the turn id it will use) is written in the transaction that settles the
    /// item before it, so an item costs the store two writes besides its turn's, not three.
    async fn run_items(&self, row: &ExperimentRow, stop: &CancellationToken) -> std::result::Result<(), Stop> {
        self.set_status(row, "running", &format!("Running {} items.", row.items)).await?;
        let target = if row.on_copy { self.copy_of(row, stop).await? } else { row.agent_id.clone() };
        let items: Vec<ItemRow> =
            self.items(&row.dataset_id).await?.into_iter().filter(|item| item.position <= row.items).collect();
        let started: HashMap<String, (String, String)> = on_reader!(self.store, |pool| {
            sqlx::query_as::<_, (String, String, String)>(
                "SELECT item_id, status, turn_id FROM experiment_results WHERE experiment_id = $1",
            )
            .bind(&row.id)
            .fetch_all(pool)
            .await
        })
        .map_err(crate::Error::from)?
        .into_iter()
        .map(|(item, status, turn)| (item, (status, turn)))
        .collect();
        let pending: Vec<&ItemRow> = items
            .iter()
            .filter(|item| !matches!(started.get(&item.id), Some((status, _)) if status != "running"))
            .collect();
        // The turn id the previous settle claimed for this item.
        let mut claimed: Option<String> = None;
        for (at, item) in pending.iter().enumerate() {
            if stop.is_cancelled() {
                return Err(Stop::Quietly);
            }
            let (turn_id, fresh) = match (claimed.take(), started.get(&item.id)) {
                (Some(turn_id), _) => (turn_id, true),
                // Claimed before a restart: it may have run.
                (None, Some((_, turn_id))) => {
                    self.still_running(row).await?;
                    (turn_id.clone(), false)
                }
                (None, None) => (self.claim(row, item).await?.ok_or(Stop::Quietly)?, true),
            };
            let settled = self.run_item(row, &target, item, &turn_id, fresh, stop).await?;
            let next = pending.get(at + 1).copied().filter(|next| !started.contains_key(&next.id));
            claimed = self.settle(row, item, settled, next).await?;
            if next.is_some() && claimed.is_none() {
                // Cancelled: the next item was not claimed.
                return Err(Stop::Quietly);
            }
        }
        Ok(())
    }

    /// Stops the run when it was cancelled.
    async fn still_running(&self, row: &ExperimentRow) -> std::result::Result<(), Stop> {
        let status: Option<String> = on_reader!(self.store, |pool| {
            sqlx::query_scalar("SELECT status FROM experiments WHERE id = $1").bind(&row.id).fetch_optional(pool).await
        })
        .map_err(crate::Error::from)?;
        if status.as_deref() == Some("running") { Ok(()) } else { Err(Stop::Quietly) }
    }

    async fn set_status(&self, row: &ExperimentRow, status: &str, detail: &str) -> Result<()> {
        on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE experiments SET status = $2, status_detail = $3 WHERE id = $1 AND status IN ('queued', 'running')",
            )
            .bind(&row.id)
            .bind(status)
            .bind(detail)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    /// Writes an item's `running` result with the turn id it will use, before the turn
    /// runs: what makes a restart find the turn instead of running another. Only while the
    /// experiment is running, so a cancelled run claims nothing more: `None` then.
    async fn claim(&self, row: &ExperimentRow, item: &ItemRow) -> Result<Option<String>> {
        let turn_id = new_sortable_id("turn");
        let claimed = on_writer!(self.store, |pool| {
            sqlx::query(CLAIM)
                .bind(&row.id)
                .bind(&item.id)
                .bind(item.position)
                .bind(&turn_id)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok((claimed == 1).then_some(turn_id))
    }

    /// The turn an item has, or had before a restart: its record when there is one (never
    /// run twice), else it is run now under `turn_id`. A `fresh` claim (made by this run)
    /// has not been sent yet, so its first try skips looking for what it left.
    async fn run_item(
        &self,
        row: &ExperimentRow,
        target: &str,
        item: &ItemRow,
        turn_id: &str,
        fresh: bool,
        stop: &CancellationToken,
    ) -> std::result::Result<Settled, Stop> {
        let mut look = !fresh;
        loop {
            if look {
                if let Some(turn) = self.turn_record(turn_id).await? {
                    return Ok(self.grade(row, target, item, turn_id, turn).await);
                }
                if self.turn_in_flight(turn_id).await? {
                    // Still running somewhere, or about to be recorded as interrupted.
                    self.pause(stop).await?;
                    continue;
                }
                if let Some(cut_off) = self.unrecorded_turn(turn_id).await? {
                    // It ran (its model calls were charged) but roost stopped before it
                    // was recorded: not run again, so not charged again.
                    return Ok(self.grade(row, target, item, turn_id, cut_off).await);
                }
            }
            look = true;
            let req = SendMessageRequest { instance_id: target.to_owned(), text: item.input.clone() };
            let sent = self.hosting.send_message_as(&row.account_id, req, SOURCE, Some(turn_id.to_owned())).await;
            let err = match sent {
                Ok(_) => continue,
                Err(err) => err.to_api(),
            };
            if self.turn_record(turn_id).await?.is_some() {
                // The turn ran and failed: its record says how.
                continue;
            }
            match err.reason() {
                ErrorReason::QueueFull => self.pause(stop).await?,
                ErrorReason::WrongState | ErrorReason::Unavailable => {
                    let status = self.hosting.store().instance(target).await?.map(|i| Status::parse(&i.status));
                    match status {
                        Some(Status::Running | Status::Restarting | Status::Provisioning) => self.pause(stop).await?,
                        _ => return Err(Stop::Failed(format!("the agent cannot take turns: {}", err.message()))),
                    }
                }
                _ => return Err(Stop::Failed(format!("item {}: {}", item.position, err.message()))),
            }
        }
    }

    async fn pause(&self, stop: &CancellationToken) -> std::result::Result<(), Stop> {
        tokio::select! {
            () = stop.cancelled() => Err(Stop::Quietly),
            () = tokio::time::sleep(RETRY_AFTER) => Ok(()),
        }
    }

    async fn turn_record(&self, turn_id: &str) -> Result<Option<TurnDone>> {
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT status, reply, error, duration_ms, input_tokens, output_tokens, model, charged_nanocents \
                 FROM turns WHERE id = $1",
            )
            .bind(turn_id)
            .fetch_optional(pool)
            .await
        })?)
    }

    /// A turn with no record whose model calls were recorded (and charged): roost stopped
    /// within its first 200 ms, before it was noted in flight. As an interrupted turn
    /// costing what its calls did; `None` when it made none (nothing of it happened).
    async fn unrecorded_turn(&self, turn_id: &str) -> Result<Option<TurnDone>> {
        let (calls, input, output, charged): (i64, Option<i64>, Option<i64>, Option<i64>) =
            on_reader!(self.store, |pool| {
                sqlx::query_as(
                    "SELECT COUNT(*), CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), \
                     CAST(SUM(charged_nanocents) AS BIGINT) FROM model_calls \
                     WHERE turn_id = $1 AND turn_id <> ''",
                )
                .bind(turn_id)
                .fetch_one(pool)
                .await
            })?;
        Ok((calls > 0).then(|| TurnDone {
            status: "interrupted".to_owned(),
            reply: String::new(),
            error: "roost stopped during this item's turn, after its model calls (which were charged); it is not run \
                    again"
                .to_owned(),
            duration_ms: 0,
            input_tokens: input.unwrap_or_default(),
            output_tokens: output.unwrap_or_default(),
            model: String::new(),
            charged_nanocents: charged.unwrap_or_default(),
        }))
    }

    async fn turn_in_flight(&self, turn_id: &str) -> Result<bool> {
        let found: Option<String> = on_reader!(self.store, |pool| {
            sqlx::query_scalar("SELECT id FROM turns_in_flight WHERE id = $1").bind(turn_id).fetch_optional(pool).await
        })?;
        Ok(found.is_some())
    }

    /// An item's result from its recorded turn: its checks, and its evaluators' grades.
    async fn grade(&self, row: &ExperimentRow, target: &str, item: &ItemRow, turn_id: &str, turn: TurnDone) -> Settled {
        let mut settled = Settled {
            status: "failed",
            output: turn.reply.clone(),
            error: String::new(),
            turn: None,
            checks: BTreeMap::new(),
            scores: Map::new(),
            score_errors: BTreeMap::new(),
            judge_costs: Vec::new(),
        };
        if turn.status != "completed" {
            settled.error =
                if turn.error.is_empty() { format!("the turn ended {}", turn.status) } else { turn.error.clone() };
            settled.turn = Some(turn);
            return settled;
        }
        settled.status = "completed";
        for check in row.checks() {
            settled.checks.insert(check.name(), check.passes(&turn.reply, &item.expected));
        }
        let metadata = json!({
            "expected": item.expected,
            "metadata": serde_json::from_str::<Value>(&item.metadata).unwrap_or(Value::Null),
            "model": turn.model,
            "agent_id": target,
            "experiment_id": row.id,
        })
        .to_string();
        let mut scores = Vec::new();
        for evaluator in row.evaluator_ids() {
            match self.evaluators.grade_answer(&evaluator, &item.input, &turn.reply, &metadata).await {
                Ok(graded) => {
                    settled.judge_costs.push((evaluator.clone(), graded.cost_nanocents));
                    match graded.grade {
                        Ok(grade) => {
                            let value = match &grade {
                                Grade::Number(n) => json!(n),
                                Grade::Category(c) => json!(c),
                            };
                            settled.scores.insert(graded.score_name.clone(), value);
                            scores.push(score_row(&graded.score_name, &evaluator, &grade, turn_id, target, &turn));
                        }
                        Err(why) => {
                            settled.score_errors.insert(graded.score_name, why);
                        }
                    }
                }
                Err(err) => {
                    settled.score_errors.insert(evaluator, err.to_api().message().to_owned());
                }
            }
        }
        if !scores.is_empty()
            && let Err(err) = self.scores.record(scores).await
        {
            warn!(experiment = %row.id, error = %err, "an experiment's grades were not stored as scores");
        }
        settled.turn = Some(turn);
        settled
    }

    /// Writes an item's result and adds it to the experiment's aggregates (and its judge
    /// calls to their evaluators' spending), once: only a `running` result is settled. In
    /// the same transaction it claims `next` ([`CLAIM`]), and answers the turn id claimed.
    async fn settle(
        &self,
        row: &ExperimentRow,
        item: &ItemRow,
        settled: Settled,
        next: Option<&ItemRow>,
    ) -> Result<Option<String>> {
        let next_turn = next.map(|_| new_sortable_id("turn"));
        let turn = settled.turn.clone();
        let (latency, input, output, cost) = turn
            .as_ref()
            .map_or((0, 0, 0, 0), |t| (t.duration_ms, t.input_tokens, t.output_tokens, t.charged_nanocents));
        let judge: i64 = settled.judge_costs.iter().map(|(_, c)| c).sum();
        let (completed, failed) = if settled.status == "completed" { (1, 0) } else { (0, 1) };
        let checks = serde_json::to_string(&settled.checks).unwrap_or_else(|_| "{}".to_owned());
        let scores = Value::Object(settled.scores.clone()).to_string();
        let score_errors = serde_json::to_string(&settled.score_errors).unwrap_or_else(|_| "{}".to_owned());
        let claimed = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            let updated = sqlx::query(
                "UPDATE experiment_results SET status = $3, output = $4, error = $5, latency_ms = $6, input_tokens = $7, \
                 output_tokens = $8, cost_nanocents = $9, checks = $10, scores = $11, score_errors = $12, \
                 judge_nanocents = $13 WHERE experiment_id = $1 AND item_id = $2 AND status = 'running'",
            )
            .bind(&row.id)
            .bind(&item.id)
            .bind(settled.status)
            .bind(&settled.output)
            .bind(&settled.error)
            .bind(latency)
            .bind(input)
            .bind(output)
            .bind(cost)
            .bind(&checks)
            .bind(&scores)
            .bind(&score_errors)
            .bind(judge)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 1 {
                sqlx::query(
                    "UPDATE experiments SET completed = completed + $2, failed = failed + $3, \
                     latency_ms = latency_ms + $4, input_tokens = input_tokens + $5, output_tokens = output_tokens + $6, \
                     cost_nanocents = cost_nanocents + $7, judge_nanocents = judge_nanocents + $8, \
                     status_detail = $9 WHERE id = $1",
                )
                .bind(&row.id)
                .bind(completed)
                .bind(failed)
                .bind(if completed == 1 { latency } else { 0 })
                .bind(input)
                .bind(output)
                .bind(cost)
                .bind(judge)
                .bind(format!("Ran item {} of {}.", item.position, row.items))
                .execute(&mut *tx)
                .await?;
                for (evaluator, cost) in &settled.judge_costs {
                    sqlx::query(crate::evaluations::CHARGE_ANSWER).bind(evaluator).bind(cost).execute(&mut *tx).await?;
                }
            }
            let mut claimed = 0;
            if let (Some(next), Some(turn_id)) = (next, &next_turn) {
                claimed = sqlx::query(CLAIM)
                    .bind(&row.id)
                    .bind(&next.id)
                    .bind(next.position)
                    .bind(turn_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(claimed)
        })?;
        Ok(next_turn.filter(|_| claimed == 1))
    }

    /// The copy this run uses: the one it made before (kept in `copy_id`, or found by its
    /// name when roost stopped before writing that down), else a new one, once it runs.
    async fn copy_of(&self, row: &ExperimentRow, stop: &CancellationToken) -> std::result::Result<String, Stop> {
        let name = copy_name(&row.id);
        let mut copy_id = row.copy_id.clone();
        if copy_id.is_empty() {
            copy_id = self
                .hosting
                .store()
                .instances_of(&row.account_id)
                .await?
                .into_iter()
                .find(|i| i.name == name && i.destroyed_at.is_none())
                .map(|i| i.id)
                .unwrap_or_default();
        }
        if copy_id.is_empty() {
            let agent = self
                .hosting
                .store()
                .instance(&row.agent_id)
                .await?
                .filter(|a| a.destroyed_at.is_none())
                .ok_or_else(|| Stop::Failed(format!("the agent {} is gone", row.agent_id)))?;
            let brief = if row.brief.is_empty() { agent.brief.clone() } else { row.brief.clone() };
            let req =
                ProvisionRequest { runtime: agent.runtime.clone(), brief, model_mode: ModelMode::Managed as i32, name };
            let made = self.hosting.provision(&row.account_id, req).await?;
            copy_id = made.instance.map(|i| i.id).unwrap_or_default();
            let model = if row.model.is_empty() { agent.model.clone() } else { row.model.clone() };
            self.wait_running(&copy_id, stop).await?;
            if !model.is_empty() {
                let req = ConfigureRequest {
                    instance_id: copy_id.clone(),
                    model: Some(model),
                    ..ConfigureRequest::default()
                };
                self.hosting.configure(&row.account_id, req).await?;
            }
        }
        on_writer!(self.store, |pool| {
            sqlx::query("UPDATE experiments SET copy_id = $2 WHERE id = $1")
                .bind(&row.id)
                .bind(&copy_id)
                .execute(pool)
                .await
                .map(|_| ())
        })
        .map_err(crate::Error::from)?;
        self.wait_running(&copy_id, stop).await?;
        Ok(copy_id)
    }

    /// Waits for an agent to be running (a copy booting), within its boot timeout.
    async fn wait_running(&self, id: &str, stop: &CancellationToken) -> std::result::Result<(), Stop> {
        let deadline = tokio::time::Instant::now() + self.hosting.config().boot_timeout + Duration::from_secs(30);
        loop {
            let status = self.hosting.store().instance(id).await?.map(|i| Status::parse(&i.status));
            match status {
                Some(Status::Running) => return Ok(()),
                Some(Status::Provisioning | Status::Restarting) if tokio::time::Instant::now() < deadline => {
                    self.pause(stop).await?;
                }
                other => {
                    return Err(Stop::Failed(format!(
                        "the copy {id} did not start ({})",
                        other.map_or("gone", Status::as_str)
                    )));
                }
            }
        }
    }

    /// Destroys an ended experiment's copy (refunding its unused period), once.
    async fn destroy_copy(&self, row: &ExperimentRow) {
        if row.copy_id.is_empty() || row.live() {
            return;
        }
        let gone = match self.hosting.destroy(&row.account_id, &row.copy_id).await {
            Ok(_) => true,
            Err(err) => {
                let err = err.to_api();
                // Destroyed already (or by its owner): nothing left to do.
                err.reason() == ErrorReason::NotFound || {
                    warn!(experiment = %row.id, copy = %row.copy_id, error = err.message(), "could not destroy a copy");
                    false
                }
            }
        };
        if gone {
            let cleared = on_writer!(self.store, |pool| {
                sqlx::query("UPDATE experiments SET copy_id = '' WHERE id = $1")
                    .bind(&row.id)
                    .execute(pool)
                    .await
                    .map(|_| ())
            });
            if let Err(err) = cleared {
                warn!(experiment = %row.id, error = %err, "could not record a copy's end");
            }
        }
    }
}

/// The name of an experiment's copy: how a restart finds a copy made just before it.
pub fn copy_name(experiment_id: &str) -> String {
    format!("experiment {experiment_id}")
}

/// An evaluator's grade of an experiment's answer, as an `eval` score on its turn.
fn score_row(name: &str, evaluator: &str, grade: &Grade, turn_id: &str, target: &str, turn: &TurnDone) -> ScoreRow {
    let (kind, value, label) = match grade {
        Grade::Number(n) => ("numeric", Some(*n), String::new()),
        Grade::Category(c) => ("categorical", None, c.clone()),
    };
    ScoreRow {
        id: format!("eval_{evaluator}_{turn_id}"),
        name: name.to_owned(),
        kind,
        value,
        label,
        comment: String::new(),
        source: "eval".to_owned(),
        target: "turn",
        trace_id: String::new(),
        span_id: String::new(),
        session_id: target.to_owned(),
        turn_id: turn_id.to_owned(),
        model: turn.model.clone(),
        agent_id: target.to_owned(),
        service: String::new(),
        evaluator_id: evaluator.to_owned(),
        author: evaluator.to_owned(),
        time_ns: now_ms().saturating_mul(1_000_000),
    }
}
