//! Experiments: a run of a dataset against a hosted agent, its results and aggregates.

use std::collections::{BTreeMap, HashMap};

use roost_proto::{
    ApiError, ErrorReason,
    v1::{CreateExperimentRequest, Experiment, ExperimentResult, ExperimentSummary},
};
use serde_json::Value;

use super::{Caller, Experiments, checks::Check, checks::checked, invalid};
use crate::{
    Result,
    agents::limits,
    ids::new_id,
    store::{on_reader, on_writer},
    telemetry::runs::nanocents_to_usd,
    time::{now_ms, timestamp_ms},
};

/// An experiment as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ExperimentRow {
    pub(crate) id: String,
    pub(crate) owner: String,
    pub(crate) account_id: String,
    pub(crate) name: String,
    pub(crate) dataset_id: String,
    /// Not a column: read from `datasets` (see [`COLUMNS`]).
    pub(crate) dataset_name: String,
    pub(crate) agent_id: String,
    pub(crate) on_copy: bool,
    pub(crate) brief: String,
    pub(crate) model: String,
    pub(crate) copy_id: String,
    pub(crate) evaluator_ids: String,
    pub(crate) checks: String,
    pub(crate) status: String,
    pub(crate) status_detail: String,
    pub(crate) items: i64,
    pub(crate) completed: i64,
    pub(crate) failed: i64,
    pub(crate) latency_ms: i64,
    pub(crate) input_tokens: i64,
    pub(crate) output_tokens: i64,
    pub(crate) cost_nanocents: i64,
    pub(crate) judge_nanocents: i64,
    pub(crate) created_ms: i64,
    pub(crate) finished_ms: Option<i64>,
}

/// An experiment's columns, and its dataset's name (a dataset is deleted only with its
/// experiments, so the name is always there).
pub(crate) const COLUMNS: &str = "id, owner, account_id, name, dataset_id, \
     COALESCE((SELECT d.name FROM datasets d WHERE d.id = experiments.dataset_id), '') AS dataset_name, agent_id, \
     on_copy, brief, model, copy_id, evaluator_ids, checks, status, status_detail, items, completed, failed, \
     latency_ms, input_tokens, output_tokens, cost_nanocents, judge_nanocents, created_ms, finished_ms";

impl ExperimentRow {
    /// Its checks.
    pub fn checks(&self) -> Vec<Check> {
        serde_json::from_str(&self.checks).unwrap_or_default()
    }

    /// Its evaluators' ids.
    pub fn evaluator_ids(&self) -> Vec<String> {
        serde_json::from_str(&self.evaluator_ids).unwrap_or_default()
    }

    /// Whether the worker has more to do for it.
    pub fn live(&self) -> bool {
        matches!(self.status.as_str(), "queued" | "running")
    }

    /// As the API shows it, with the aggregates kept on the row (a detail answer adds
    /// percentiles, check shares and score means from its results).
    pub fn to_proto(&self) -> Experiment {
        Experiment {
            id: self.id.clone(),
            name: self.name.clone(),
            dataset_id: self.dataset_id.clone(),
            dataset_name: self.dataset_name.clone(),
            agent_id: self.agent_id.clone(),
            copy: self.on_copy,
            brief: self.brief.clone(),
            model: self.model.clone(),
            copy_id: self.copy_id.clone(),
            evaluator_ids: self.evaluator_ids(),
            checks: self.checks().iter().map(Check::to_proto).collect(),
            status: self.status.clone(),
            status_detail: self.status_detail.clone(),
            items: self.items,
            completed: self.completed,
            failed: self.failed,
            summary: Some(ExperimentSummary {
                latency_mean_ms: if self.completed > 0 { self.latency_ms as f64 / self.completed as f64 } else { 0.0 },
                input_tokens: self.input_tokens,
                output_tokens: self.output_tokens,
                cost_nanocents: self.cost_nanocents,
                cost_usd: nanocents_to_usd(self.cost_nanocents),
                judge_cost_nanocents: self.judge_nanocents,
                ..ExperimentSummary::default()
            }),
            account_id: self.account_id.clone(),
            created_at: Some(timestamp_ms(self.created_ms)),
            finished_at: self.finished_ms.map(timestamp_ms),
        }
    }
}

/// A result row with its item's input and expected output.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ResultRow {
    pub(crate) item_id: String,
    pub(crate) position: i64,
    pub(crate) turn_id: String,
    pub(crate) status: String,
    pub(crate) output: String,
    pub(crate) error: String,
    pub(crate) latency_ms: i64,
    pub(crate) input_tokens: i64,
    pub(crate) output_tokens: i64,
    pub(crate) cost_nanocents: i64,
    pub(crate) checks: String,
    pub(crate) scores: String,
    pub(crate) score_errors: String,
    pub(crate) input: Option<String>,
    pub(crate) expected: Option<String>,
}

impl ResultRow {
    /// Check name → passed.
    pub fn checks(&self) -> BTreeMap<String, bool> {
        serde_json::from_str(&self.checks).unwrap_or_default()
    }

    /// Score name → grade (a number or a category).
    pub fn scores(&self) -> serde_json::Map<String, Value> {
        serde_json::from_str(&self.scores).unwrap_or_default()
    }

    /// As the API shows it.
    pub fn to_proto(&self) -> ExperimentResult {
        ExperimentResult {
            item_id: self.item_id.clone(),
            position: self.position,
            input: self.input.clone().unwrap_or_default(),
            expected: self.expected.clone().unwrap_or_default(),
            output: self.output.clone(),
            status: self.status.clone(),
            error: self.error.clone(),
            turn_id: self.turn_id.clone(),
            latency_ms: self.latency_ms,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_nanocents: self.cost_nanocents,
            checks: self.checks().into_iter().collect(),
            scores: Some(roost_proto::json::value::map_to_struct(&self.scores())),
            score_errors: serde_json::from_str(&self.score_errors).unwrap_or_default(),
        }
    }
}

/// The value at `share` (0-1) of sorted `values`, by nearest rank.
fn percentile(sorted: &[i64], share: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((share * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64
}

/// The aggregates a detail answer adds: latency percentiles, each check's pass share and
/// each score's mean, over the answered items.
fn summarize(summary: &mut ExperimentSummary, results: &[ResultRow]) {
    let answered: Vec<&ResultRow> = results.iter().filter(|r| r.status == "completed").collect();
    let mut latencies: Vec<i64> = answered.iter().map(|r| r.latency_ms).collect();
    latencies.sort_unstable();
    summary.latency_p50_ms = percentile(&latencies, 0.5);
    summary.latency_p95_ms = percentile(&latencies, 0.95);
    let mut checks: HashMap<String, (u64, u64)> = HashMap::new();
    let mut scores: HashMap<String, (f64, u64)> = HashMap::new();
    for result in &answered {
        for (name, passed) in result.checks() {
            let entry = checks.entry(name).or_default();
            entry.0 += u64::from(passed);
            entry.1 += 1;
        }
        for (name, grade) in result.scores() {
            if let Some(number) = grade.as_f64() {
                let entry = scores.entry(name).or_default();
                entry.0 += number;
                entry.1 += 1;
            }
        }
    }
    summary.checks = checks.into_iter().map(|(name, (passed, of))| (name, passed as f64 / of as f64)).collect();
    summary.scores = scores.into_iter().map(|(name, (sum, of))| (name, sum / of as f64)).collect();
}

fn no_experiment(id: &str) -> crate::Error {
    ApiError::not_found(format!("no experiment {id}")).into()
}

impl Experiments {
    /// Queues a run of a dataset against a hosted agent.
    pub async fn create_experiment(&self, req: CreateExperimentRequest, caller: &Caller) -> Result<Experiment> {
        let dataset = self.dataset(&req.dataset_id, caller).await?;
        let agent = self
            .hosting
            .store()
            .instance(&req.agent_id)
            .await?
            .filter(|a| a.destroyed_at.is_none() && caller.sees(&a.account_id))
            .ok_or_else(|| ApiError::not_found(format!("no hosted agent {}", req.agent_id)))?;
        if dataset.items == 0 {
            return Err(invalid("the dataset has no items"));
        }
        if req.name.len() > 256 {
            return Err(invalid("name is at most 256 bytes"));
        }
        if !req.brief.is_empty() {
            limits::brief("brief", &req.brief)?;
        }
        if req.model.len() > 256 || req.model.chars().any(char::is_control) {
            return Err(invalid("model is at most 256 bytes, without control characters"));
        }
        let on_copy = req.copy || !req.brief.is_empty() || !req.model.trim().is_empty();
        if on_copy && agent.model_mode != "managed" {
            return Err(invalid(
                "a copy runs on the managed model: this agent brings its own key, so run against the agent itself",
            ));
        }
        if !req.evaluator_ids.is_empty() && *caller != Caller::Operator {
            return Err(invalid("evaluators are the operator's: an account's experiment uses checks"));
        }
        if req.evaluator_ids.len() > 8 {
            return Err(invalid("at most 8 evaluators"));
        }
        for id in &req.evaluator_ids {
            if self.evaluators.row(id).await?.is_none() {
                return Err(ApiError::not_found(format!("no evaluator {id}")).into());
            }
        }
        let mut checks = checked(&req.checks).map_err(invalid)?;
        if checks.is_empty() && self.any_expected(&dataset.id).await? {
            checks.push(Check { kind: "exact".to_owned(), value: String::new(), ignore_case: false });
        }
        let name = if req.name.trim().is_empty() {
            let target = if agent.name.is_empty() { agent.id.clone() } else { agent.name.clone() };
            let variant = if on_copy { " (copy)" } else { "" };
            format!("{} · {target}{variant}", dataset.name)
        } else {
            req.name.trim().to_owned()
        };
        let id = new_id("ex");
        let row = ExperimentRow {
            id: id.clone(),
            owner: caller.owner().to_owned(),
            account_id: agent.account_id.clone(),
            name,
            dataset_id: dataset.id.clone(),
            dataset_name: dataset.name.clone(),
            agent_id: agent.id.clone(),
            on_copy,
            brief: req.brief.clone(),
            model: req.model.trim().to_owned(),
            copy_id: String::new(),
            evaluator_ids: serde_json::to_string(&req.evaluator_ids).unwrap_or_else(|_| "[]".to_owned()),
            checks: serde_json::to_string(&checks).unwrap_or_else(|_| "[]".to_owned()),
            status: "queued".to_owned(),
            status_detail: "Waiting for the experiment worker.".to_owned(),
            items: dataset.items,
            completed: 0,
            failed: 0,
            latency_ms: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_nanocents: 0,
            judge_nanocents: 0,
            created_ms: now_ms(),
            finished_ms: None,
        };
        on_writer!(self.store, |pool| {
            sqlx::query(
                "INSERT INTO experiments (id, owner, account_id, name, dataset_id, agent_id, on_copy, brief, model, \
                 copy_id, evaluator_ids, checks, status, status_detail, items, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', $10, $11, $12, $13, $14, $15)",
            )
            .bind(&row.id)
            .bind(&row.owner)
            .bind(&row.account_id)
            .bind(&row.name)
            .bind(&row.dataset_id)
            .bind(&row.agent_id)
            .bind(row.on_copy)
            .bind(&row.brief)
            .bind(&row.model)
            .bind(&row.evaluator_ids)
            .bind(&row.checks)
            .bind(&row.status)
            .bind(&row.status_detail)
            .bind(row.items)
            .bind(row.created_ms)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        self.wake.notify_one();
        Ok(row.to_proto())
    }

    async fn any_expected(&self, dataset_id: &str) -> Result<bool> {
        let found: Option<String> = on_reader!(self.store, |pool| {
            sqlx::query_scalar("SELECT id FROM dataset_items WHERE dataset_id = $1 AND expected <> '' LIMIT 1")
                .bind(dataset_id)
                .fetch_optional(pool)
                .await
        })?;
        Ok(found.is_some())
    }

    /// The caller's experiments, newest first (of one dataset when named).
    pub async fn list_experiments(&self, caller: &Caller, dataset_id: &str) -> Result<Vec<ExperimentRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM experiments WHERE ($1 = '' OR owner = $1) AND ($2 = '' OR dataset_id = $2) \
             ORDER BY created_ms DESC, id"
        );
        let owner = match caller {
            Caller::Operator => "",
            Caller::Account(id) => id.as_str(),
        };
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(owner).bind(dataset_id).fetch_all(pool).await
        })?)
    }

    /// One experiment, as stored; 404 for one the caller may not see.
    pub async fn experiment(&self, id: &str, caller: &Caller) -> Result<ExperimentRow> {
        let row = self.experiment_row(id).await?;
        row.filter(|r| caller.sees(&r.owner)).ok_or_else(|| no_experiment(id))
    }

    pub(crate) async fn experiment_row(&self, id: &str) -> Result<Option<ExperimentRow>> {
        let sql = format!("SELECT {COLUMNS} FROM experiments WHERE id = $1");
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(id).fetch_optional(pool).await
        })?)
    }

    /// An experiment's results in dataset order.
    pub async fn results(&self, id: &str) -> Result<Vec<ResultRow>> {
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT r.item_id, r.position, r.turn_id, r.status, r.output, r.error, r.latency_ms, r.input_tokens, \
                 r.output_tokens, r.cost_nanocents, r.checks, r.scores, r.score_errors, i.input, i.expected \
                 FROM experiment_results r LEFT JOIN dataset_items i ON i.id = r.item_id \
                 WHERE r.experiment_id = $1 ORDER BY r.position",
            )
            .bind(id)
            .fetch_all(pool)
            .await
        })?)
    }

    /// An experiment with its full aggregates, and its results.
    pub async fn get_experiment(&self, id: &str, caller: &Caller) -> Result<(Experiment, Vec<ExperimentResult>)> {
        let row = self.experiment(id, caller).await?;
        let results = self.results(&row.id).await?;
        let mut experiment = row.to_proto();
        if let Some(summary) = experiment.summary.as_mut() {
            summarize(summary, &results);
        }
        Ok((experiment, results.iter().map(ResultRow::to_proto).collect()))
    }

    /// Cancels a queued or running experiment: the worker stops after its current item and
    /// destroys the copy. 409 when it has already ended.
    pub async fn cancel_experiment(&self, id: &str, caller: &Caller) -> Result<Experiment> {
        let row = self.experiment(id, caller).await?;
        let cancelled = on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE experiments SET status = 'cancelled', status_detail = $2, finished_ms = $3 \
                 WHERE id = $1 AND status IN ('queued', 'running')",
            )
            .bind(&row.id)
            .bind("Cancelled: items not yet run were not run.")
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        if cancelled == 0 {
            return Err(
                ApiError::new(ErrorReason::WrongState, format!("the experiment has ended ({})", row.status)).into()
            );
        }
        self.wake.notify_one();
        Ok(self.experiment(id, caller).await?.to_proto())
    }
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
        assert_eq!(percentile(&values, 0.5), 50.0);
        assert_eq!(percentile(&values, 0.95), 100.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
