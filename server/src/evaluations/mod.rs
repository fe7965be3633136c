//! LLM judges (docs/observing.md#llm-judges): evaluators that grade new model calls with a
//! judge model and record each grade as an `eval` score on the call.
//!
//! - **Which calls.** The worker ([`worker`]) reads spans stored after the evaluator was
//!   made, in store order (`spans.id`, from the evaluator's cursor), and takes the model
//!   calls its filter matches, a share `sample_rate` of them chosen by a hash
//!   ([`grading::sampled`]). A judged call is a `judgements` row, unique per evaluator and
//!   call, written with the cursor past it, so it is judged once whatever restarts or
//!   replicas do. Judge calls are stored under the service [`JUDGE_SERVICE`], which no
//!   evaluator takes: a judge never evaluates its own calls.
//! - **In batches.** Up to 8 calls are judged at once (no more than the budget left pays
//!   for at the dearest call's price), and a batch is written together: its scores, its
//!   judge spans, and its judgements with the charge and the cursor in one transaction.
//!   Nothing is written for a call before it is judged, so judging costs ingest's writer
//!   three writes a batch.
//! - **Through the model gateway.** The judge is asked through roost's model gateway, to
//!   the operator's managed upstream, and priced by the price book
//!   ([`crate::llm::judge`]); an unpriced judge model is refused when the evaluator is
//!   made. Each judge call is a span of its own (linked to the call it judged).
//! - **A budget of its own.** Each call's cost is added to the evaluator's spending and to
//!   its judgement row in one transaction, so what it spent is always the sum of its
//!   judgements. It judges only while spending is under budget, and never more calls at
//!   once than the budget left pays for: it stops when the budget is spent (the batch that
//!   crossed it is the last, and it is one call when the budget is nearly spent), says so in
//!   its status, and judges again once the budget is raised. While it is paused or out of
//!   budget its cursor follows the newest span: it never judges what was stored meanwhile.
//! - **Failures are kept, not retried forever.** A judge that cannot be reached or fails
//!   is kept as a `pending` judgement and tried again on later passes, 3 attempts in all
//!   (the rest of a pass waits once the upstream fails); an answer that cannot be read is
//!   failed at once (asking again would cost as much and answer alike). Either way the
//!   error is on the judgement.

pub mod answers;
pub mod grading;
pub mod service;
pub mod worker;

use std::sync::Arc;

use roost_proto::{
    ApiError,
    numbers::usd_exact,
    v1::{Evaluator, EvaluatorFilter, Judgement, UpdateEvaluatorRequest},
};

use crate::{
    Result,
    ids::new_id,
    llm::ModelGateway,
    scores::Scores,
    store::{BeginWrite as _, Store, on_reader, on_writer},
    telemetry::{Telemetry, runs::nanocents_to_usd, scores::value_json},
    time::{now_ms, timestamp_ms, timestamp_ns},
};

pub use answers::CHARGE_ANSWER;

/// The service judge calls are stored under; evaluators never take its calls.
pub const JUDGE_SERVICE: &str = "roost-evaluations";
/// Attempts a judgement gets before it is failed.
pub const MAX_ATTEMPTS: i64 = 3;
/// Longest prompt template.
const MAX_PROMPT_BYTES: usize = 32 * 1024;
/// Most categories of a category evaluator.
const MAX_CATEGORIES: usize = 64;
/// Judgements a detail answer lists.
const RECENT: i64 = 50;

/// An evaluator as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EvaluatorRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) score_name: String,
    pub(crate) model: String,
    pub(crate) prompt: String,
    pub(crate) output: String,
    pub(crate) categories: String,
    pub(crate) min_value: f64,
    pub(crate) max_value: f64,
    pub(crate) sample_rate: f64,
    pub(crate) filter_service: String,
    pub(crate) filter_model: String,
    pub(crate) filter_agent: String,
    pub(crate) filter_session: String,
    pub(crate) budget_nanocents: i64,
    pub(crate) spent_nanocents: i64,
    pub(crate) enabled: bool,
    pub(crate) cursor: i64,
    pub(crate) judged: i64,
    pub(crate) failed: i64,
    pub(crate) created_ms: i64,
}

const COLUMNS: &str = "id, name, score_name, model, prompt, output, categories, min_value, max_value, sample_rate, \
     filter_service, filter_model, filter_agent, filter_session, budget_nanocents, spent_nanocents, enabled, cursor, \
     judged, failed, created_ms";

impl EvaluatorRow {
    /// How its answers are read.
    pub fn parser(&self) -> grading::Parser {
        if self.output == "category" {
            grading::Parser::Category(serde_json::from_str(&self.categories).unwrap_or_default())
        } else {
            grading::Parser::Number { min: self.min_value, max: self.max_value }
        }
    }

    /// True while it may judge: enabled, with budget left.
    pub fn judging(&self) -> bool {
        self.enabled && self.spent_nanocents < self.budget_nanocents
    }

    fn status(&self) -> (&'static str, String) {
        if !self.enabled {
            (
                "paused",
                "Paused by the operator: it judges no calls until it is resumed, and not those stored meanwhile."
                    .to_owned(),
            )
        } else if self.spent_nanocents >= self.budget_nanocents {
            (
                "budget_spent",
                format!(
                    "Its budget of {} is spent ({} on {} judged calls): it judges no more calls until the budget \
                     is raised.",
                    usd_exact(self.budget_nanocents),
                    usd_exact(self.spent_nanocents),
                    self.judged
                ),
            )
        } else {
            (
                "active",
                format!(
                    "Judging {} % of new matching calls; {} of {} spent.",
                    (self.sample_rate * 10_000.0).round() / 100.0,
                    usd_exact(self.spent_nanocents),
                    usd_exact(self.budget_nanocents)
                ),
            )
        }
    }

    /// As the API shows it.
    pub fn to_proto(&self) -> Evaluator {
        let (status, detail) = self.status();
        Evaluator {
            id: self.id.clone(),
            name: self.name.clone(),
            model: self.model.clone(),
            prompt: self.prompt.clone(),
            output: self.output.clone(),
            categories: serde_json::from_str(&self.categories).unwrap_or_default(),
            min: self.min_value,
            max: self.max_value,
            sample_rate: self.sample_rate,
            filter: Some(EvaluatorFilter {
                service: self.filter_service.clone(),
                model: self.filter_model.clone(),
                agent_id: self.filter_agent.clone(),
                session_id: self.filter_session.clone(),
            }),
            budget_nanocents: self.budget_nanocents,
            spent_nanocents: self.spent_nanocents,
            budget_usd: nanocents_to_usd(self.budget_nanocents),
            spent_usd: nanocents_to_usd(self.spent_nanocents),
            enabled: self.enabled,
            status: status.to_owned(),
            status_detail: detail,
            judged: self.judged,
            failed: self.failed,
            score_name: self.score_name.clone(),
            created_at: Some(timestamp_ms(self.created_ms)),
        }
    }
}

/// A budget given in US dollars or nanocents (nanocents win when both are given).
fn budget(nanocents: i64, usd: f64) -> std::result::Result<i64, String> {
    if nanocents < 0 || usd < 0.0 || !usd.is_finite() {
        return Err("a budget is not negative".to_owned());
    }
    if nanocents > 0 {
        return Ok(nanocents);
    }
    let from_usd = (usd * 1e11).round();
    if from_usd > i64::MAX as f64 {
        return Err("that budget is too large".to_owned());
    }
    Ok(from_usd as i64)
}

fn invalid(why: impl Into<String>) -> crate::Error {
    ApiError::invalid_argument(why).into()
}

/// The evaluators of one store.
pub struct Evaluators {
    pub(crate) store: Store,
    pub(crate) models: ModelGateway,
    pub(crate) scores: Arc<Scores>,
    pub(crate) telemetry: Arc<Telemetry>,
}

impl Evaluators {
    /// Evaluators over `store`, judging through `models` and scoring into `scores`.
    pub fn new(store: Store, models: ModelGateway, scores: Arc<Scores>, telemetry: Arc<Telemetry>) -> Self {
        Self { store, models, scores, telemetry }
    }

    /// Adds an evaluator; it judges calls stored from now on.
    pub async fn create(&self, given: Evaluator) -> Result<Evaluator> {
        let name = given.name.trim().to_owned();
        if name.is_empty() || name.len() > 256 {
            return Err(invalid("name is required: 1-256 bytes"));
        }
        let score_name =
            if given.score_name.trim().is_empty() { name.clone() } else { given.score_name.trim().to_owned() };
        if score_name.len() > 256 {
            return Err(invalid("score_name is longer than 256 bytes"));
        }
        if given.model.trim().is_empty() {
            return Err(invalid("model is required: the judge model"));
        }
        check_prompt(&given.prompt)?;
        let output = if given.output.is_empty() { "number" } else { given.output.as_str() };
        let (min, max) = if given.min == 0.0 && given.max == 0.0 { (0.0, 1.0) } else { (given.min, given.max) };
        match output {
            "number" if !(min.is_finite() && max.is_finite() && min < max) => {
                return Err(invalid("min must be less than max"));
            }
            "number" => {}
            "category" => {
                if given.categories.is_empty() || given.categories.len() > MAX_CATEGORIES {
                    return Err(invalid(format!("a category evaluator needs 1-{MAX_CATEGORIES} categories")));
                }
                if given.categories.iter().any(|c| c.trim().is_empty() || c.len() > 256) {
                    return Err(invalid("a category is 1-256 bytes"));
                }
            }
            other => return Err(invalid(format!("output must be number or category, not {other:?}"))),
        }
        let rate = if given.sample_rate == 0.0 { 1.0 } else { given.sample_rate };
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(invalid("sample_rate is more than 0 and at most 1"));
        }
        let budget = budget(given.budget_nanocents, given.budget_usd).map_err(invalid)?;
        if budget == 0 {
            return Err(invalid("set a budget (budget_usd or budget_nanocents): judge calls are paid for from it"));
        }
        let filter = given.filter.unwrap_or_default();
        for value in [&filter.service, &filter.model, &filter.agent_id, &filter.session_id] {
            if value.len() > 1024 {
                return Err(invalid("a filter value is at most 1024 bytes"));
            }
        }
        self.models.check_judge(given.model.trim())?;
        let id = new_id("ev");
        let created_ms = now_ms();
        let categories = serde_json::to_string(&given.categories).unwrap_or_else(|_| "[]".to_owned());
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            // Only calls stored from now on: the cursor starts at the newest span.
            let cursor: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM spans").fetch_one(&mut *tx).await?;
            sqlx::query(
                "INSERT INTO evaluators (id, name, score_name, model, prompt, output, categories, min_value, \
                 max_value, sample_rate, filter_service, filter_model, filter_agent, filter_session, \
                 budget_nanocents, spent_nanocents, enabled, cursor, judged, failed, created_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 0, TRUE, $16, 0, 0, $17)",
            )
            .bind(&id)
            .bind(&name)
            .bind(&score_name)
            .bind(given.model.trim())
            .bind(&given.prompt)
            .bind(output)
            .bind(&categories)
            .bind(min)
            .bind(max)
            .bind(rate)
            .bind(&filter.service)
            .bind(&filter.model)
            .bind(&filter.agent_id)
            .bind(&filter.session_id)
            .bind(budget)
            .bind(cursor)
            .bind(created_ms)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })?;
        Ok(self.row(&id).await?.map(|r| r.to_proto()).unwrap_or_default())
    }

    /// Every evaluator, newest first.
    pub async fn list(&self) -> Result<Vec<EvaluatorRow>> {
        let sql = format!("SELECT {COLUMNS} FROM evaluators ORDER BY created_ms DESC, id");
        Ok(on_reader!(self.store, |pool| { sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).fetch_all(pool).await })?)
    }

    /// One evaluator.
    pub async fn row(&self, id: &str) -> Result<Option<EvaluatorRow>> {
        let sql = format!("SELECT {COLUMNS} FROM evaluators WHERE id = $1");
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(id).fetch_optional(pool).await
        })?)
    }

    /// One evaluator and its latest judgements; 404 when there is none.
    pub async fn get(&self, id: &str) -> Result<(Evaluator, Vec<Judgement>)> {
        let row = self.row(id).await?.ok_or_else(|| ApiError::not_found(format!("no evaluator {id}")))?;
        type Recent =
            (String, String, String, String, i64, String, i64, i64, Option<f64>, Option<String>, Option<String>);
        let recent: Vec<Recent> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT j.trace_id, j.span_id, j.status, j.error, j.attempts, j.score_id, j.cost_nanocents, j.time_ns, \
                 s.value, s.label, s.kind FROM judgements j LEFT JOIN scores s ON s.id = j.score_id \
                 WHERE j.evaluator_id = $1 ORDER BY j.time_ns DESC LIMIT $2",
            )
            .bind(id)
            .bind(RECENT)
            .fetch_all(pool)
            .await
        })?;
        let judgements = recent
            .into_iter()
            .map(|r| Judgement {
                trace_id: r.0,
                span_id: r.1,
                status: r.2,
                error: r.3,
                attempts: r.4,
                value: r.10.as_deref().map(|kind| {
                    roost_proto::json::value::from_json(&value_json(kind, r.8, r.9.as_deref().unwrap_or_default()))
                }),
                cost_nanocents: r.6,
                time: Some(timestamp_ns(r.7)),
            })
            .collect();
        Ok((row.to_proto(), judgements))
    }

    /// Changes an evaluator's fields.
    pub async fn update(&self, req: UpdateEvaluatorRequest) -> Result<Evaluator> {
        let row = self.row(&req.id).await?.ok_or_else(|| ApiError::not_found(format!("no evaluator {}", req.id)))?;
        if let Some(rate) = req.sample_rate
            && !(rate > 0.0 && rate <= 1.0)
        {
            return Err(invalid("sample_rate is more than 0 and at most 1"));
        }
        let new_budget = match (req.budget_nanocents, req.budget_usd) {
            (None, None) => None,
            (n, usd) => Some(budget(n.unwrap_or_default(), usd.unwrap_or_default()).map_err(invalid)?),
        };
        if let Some(prompt) = &req.prompt {
            check_prompt(prompt)?;
        }
        if let Some(model) = &req.model {
            self.models.check_judge(model.trim())?;
        }
        on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE evaluators SET enabled = COALESCE($2, enabled), sample_rate = COALESCE($3, sample_rate), \
                 budget_nanocents = COALESCE($4, budget_nanocents), prompt = COALESCE($5, prompt), \
                 model = COALESCE($6, model) WHERE id = $1",
            )
            .bind(&row.id)
            .bind(req.enabled)
            .bind(req.sample_rate)
            .bind(new_budget)
            .bind(&req.prompt)
            .bind(req.model.as_deref().map(str::trim))
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(self.row(&row.id).await?.map(|r| r.to_proto()).unwrap_or_default())
    }

    /// Deletes an evaluator and its judgements; its scores stay.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let deleted = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query("DELETE FROM judgements WHERE evaluator_id = $1").bind(id).execute(&mut *tx).await?;
            let deleted =
                sqlx::query("DELETE FROM evaluators WHERE id = $1").bind(id).execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            Ok::<_, sqlx::Error>(deleted)
        })?;
        if deleted == 0 {
            return Err(ApiError::not_found(format!("no evaluator {id}")).into());
        }
        Ok(())
    }
}

fn check_prompt(prompt: &str) -> Result<()> {
    if prompt.trim().is_empty() || prompt.len() > MAX_PROMPT_BYTES {
        return Err(invalid(format!("prompt is required: at most {MAX_PROMPT_BYTES} bytes")));
    }
    if !grading::PLACEHOLDERS.iter().any(|p| prompt.contains(p)) {
        return Err(invalid("the prompt shows the judge nothing: use {{input}}, {{output}} or {{metadata}}"));
    }
    Ok(())
}
