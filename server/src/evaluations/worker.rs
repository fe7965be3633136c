//! The evaluators' worker: on the leader replica, it takes each evaluator's new calls
//! (moving its cursor over `spans.id`), then judges its pending ones one at a time while
//! its budget lasts. See [`super`] for the rules.

use std::{sync::Arc, time::Duration};

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value::Value as Any},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span::Link, span::SpanKind, status::StatusCode},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{
    EvaluatorRow, Evaluators, JUDGE_SERVICE, MAX_ATTEMPTS,
    grading::{self, Grade},
};
use crate::{
    Result,
    llm::judge::JudgeCall,
    store::{BeginWrite as _, on_reader, on_writer},
    telemetry::{message_texts, rows::ScoreRow, scores},
    time::now_ms,
};

/// Spans read per evaluator and pass.
const SCAN: i64 = 2_000;
/// Calls judged at once, at most.
const AT_ONCE: usize = 8;
/// How long a batch waits, at most, for ingest's queue to empty before it is judged
/// anyway ([`Evaluators::give_way_to_ingest`]), and how often it looks.
const GIVE_WAY_AT_MOST: Duration = Duration::from_secs(1);
const GIVE_WAY_STEP: Duration = Duration::from_millis(10);

/// A stored model call an evaluator may take.
#[derive(Debug, Clone, sqlx::FromRow)]
struct Call {
    id: i64,
    trace_id: String,
    span_id: String,
    service: String,
    model: Option<String>,
    agent_id: Option<String>,
    session_id: Option<String>,
}

/// A call to judge: a new one (after the cursor), or a retry of one whose judge failed.
struct Job {
    trace_id: String,
    span_id: String,
    /// Attempts before this one.
    attempts: i64,
}

/// What judging one call came to, to be written with the others of its batch.
struct Outcome {
    trace_id: String,
    span_id: String,
    attempts: i64,
    /// "done", "failed", or "pending" (to be tried again).
    status: &'static str,
    error: String,
    score: Option<ScoreRow>,
    cost_nanocents: i64,
    /// The judge call's span, when it answered.
    span: Option<Span>,
    /// The upstream failed: the rest of the pass waits.
    upstream_failed: bool,
}

impl Evaluators {
    /// Runs passes until `stop`: right after one that did work, else every `every`.
    pub async fn run(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        loop {
            let busy = match self.pass(&stop).await {
                Ok(busy) => busy,
                Err(err) => {
                    warn!(error = %err, "evaluators' pass failed");
                    false
                }
            };
            let pause = if busy { Duration::ZERO } else { every };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One pass over every evaluator; true when it judged anything or read on.
    pub async fn pass(&self, stop: &CancellationToken) -> Result<bool> {
        let mut busy = false;
        for evaluator in self.list().await? {
            if stop.is_cancelled() {
                break;
            }
            if !evaluator.judging() {
                self.skip_to_newest(&evaluator).await?;
                continue;
            }
            busy |= self.judge_next(evaluator, stop).await?;
        }
        Ok(busy)
    }

    /// Moves a stopped evaluator's cursor to the newest span: what is stored while it is
    /// paused or out of budget is not its to judge, so resuming it (or raising its budget)
    /// does not bring a bill for every call it missed.
    async fn skip_to_newest(&self, evaluator: &EvaluatorRow) -> Result<()> {
        on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE evaluators SET cursor = (SELECT COALESCE(MAX(id), 0) FROM spans) \
                 WHERE id = $1 AND cursor < (SELECT COALESCE(MAX(id), 0) FROM spans)",
            )
            .bind(&evaluator.id)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    /// Judges the evaluator's retries, then the calls stored after its cursor (up to
    /// [`SCAN`] spans read), a few at once, as many as its budget left pays for. Nothing
    /// is written for a call before it is judged: each batch's judgements, charge and
    /// cursor are one transaction, its scores one write and its judge spans one more, so
    /// judging costs ingest's writer three writes a batch, not three a call. A call taken
    /// but not yet written when roost stops is judged again after (its cursor had not
    /// moved past it); that judge call is not charged.
    async fn judge_next(&self, mut evaluator: EvaluatorRow, stop: &CancellationToken) -> Result<bool> {
        let retries: Vec<Job> = on_reader!(self.store, |pool| {
            sqlx::query_as::<_, (String, String, i64)>(
                "SELECT trace_id, span_id, attempts FROM judgements WHERE evaluator_id = $1 AND status = 'pending' \
                 ORDER BY time_ns, trace_id, span_id LIMIT $2",
            )
            .bind(&evaluator.id)
            .bind(AT_ONCE as i64)
            .fetch_all(pool)
            .await
        })?
        .into_iter()
        .map(|(trace_id, span_id, attempts)| Job { trace_id, span_id, attempts })
        .collect();
        let scanned: Vec<Call> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT id, trace_id, span_id, service, COALESCE(response_model, request_model) AS model, \
                 COALESCE(NULLIF(agent_instance, ''), agent_id) AS agent_id, session_id FROM spans \
                 WHERE id > $1 ORDER BY id LIMIT $2",
            )
            .bind(evaluator.cursor)
            .bind(SCAN)
            .fetch_all(pool)
            .await
        })?;
        let scan_end = scanned.last().map(|c| c.id);
        let fresh: Vec<Call> = scanned.into_iter().filter(|c| takes(&evaluator, c)).collect();
        let mut fresh = fresh.into_iter().peekable();
        let mut retries = retries.into_iter().peekable();
        let mut busy = false;
        // The most one call has cost: how many more calls the budget pays for.
        let mut dearest = 0_i64;
        while evaluator.judging() && !stop.is_cancelled() {
            let left = evaluator.budget_nanocents - evaluator.spent_nanocents;
            let room = if dearest == 0 { 1 } else { usize::try_from(left / dearest).unwrap_or(0).clamp(1, AT_ONCE) };
            let mut jobs: Vec<Job> = retries.by_ref().take(room).collect();
            let mut cursor = evaluator.cursor;
            while jobs.len() < room {
                let Some(call) = fresh.next() else { break };
                cursor = call.id;
                jobs.push(Job { trace_id: call.trace_id, span_id: call.span_id, attempts: 0 });
            }
            if fresh.peek().is_none() {
                // Every taken call of the scan is in this batch: the rest of it is read.
                cursor = cursor.max(scan_end.unwrap_or(cursor));
            }
            if jobs.is_empty() && cursor == evaluator.cursor {
                break;
            }
            busy = true;
            self.give_way_to_ingest(stop).await;
            let outcomes = futures::future::join_all(jobs.iter().map(|job| self.judge(&evaluator, job))).await;
            let outcomes = outcomes.into_iter().collect::<Result<Vec<_>>>()?;
            dearest = outcomes.iter().map(|o| o.cost_nanocents).fold(dearest, i64::max);
            let spent: i64 = outcomes.iter().map(|o| o.cost_nanocents).sum();
            let upstream_failed = outcomes.iter().any(|o| o.upstream_failed);
            self.write(&evaluator, outcomes, cursor).await?;
            evaluator.spent_nanocents = evaluator.spent_nanocents.saturating_add(spent);
            evaluator.cursor = evaluator.cursor.max(cursor);
            if upstream_failed {
                // The upstream is failing: the rest waits for the next pass.
                break;
            }
        }
        Ok(busy)
    }

    /// Waits while ingest has requests queued for the telemetry writer, for at most
    /// [`GIVE_WAY_AT_MOST`]. Judging is background work: a batch's reads, its judge calls
    /// and its three writes take the writer and the cores from ingest, which clients wait
    /// on. Under ingest that never pauses, a batch still goes ahead once a second (about 8
    /// calls a second); the rest is judged when ingest eases (docs/observing.md).
    async fn give_way_to_ingest(&self, stop: &CancellationToken) {
        let until = tokio::time::Instant::now() + GIVE_WAY_AT_MOST;
        while self.telemetry.backlog().0 > 0 && tokio::time::Instant::now() < until && !stop.is_cancelled() {
            tokio::time::sleep(GIVE_WAY_STEP).await;
        }
    }

    /// Judges one call: its grade (or why there is none), its cost and its judge span.
    async fn judge(&self, evaluator: &EvaluatorRow, job: &Job) -> Result<Outcome> {
        let attempts = job.attempts + 1;
        let mut outcome = Outcome {
            trace_id: job.trace_id.clone(),
            span_id: job.span_id.clone(),
            attempts,
            status: "failed",
            error: String::new(),
            score: None,
            cost_nanocents: 0,
            span: None,
            upstream_failed: false,
        };
        let Some((call, input, output)) = self.call(&job.trace_id, &job.span_id).await? else {
            // Gone (retention) before it was judged.
            outcome.error = "the call is no longer stored".to_owned();
            return Ok(outcome);
        };
        let metadata = json!({
            "model": call.model, "service": call.service, "agent_id": call.agent_id, "session_id": call.session_id,
        })
        .to_string();
        let prompt = grading::render(&evaluator.prompt, &input, &output, &metadata);
        match self.models.judge(&evaluator.model, &prompt).await {
            Ok(judged) => {
                outcome.cost_nanocents = judged.cost_nanocents;
                outcome.span = Some(judge_span(evaluator, (&call.trace_id, &call.span_id), &judged, &prompt));
                match evaluator.parser().read(&judged.text) {
                    Ok(grade) => {
                        outcome.score = Some(self.score_row(evaluator, &call, &grade, &judged));
                        outcome.status = "done";
                    }
                    // Asking again would cost as much and answer alike: failed at once.
                    Err(why) => outcome.error = why,
                }
            }
            Err(err) => {
                outcome.error = err.message().to_owned();
                outcome.upstream_failed = true;
                if attempts < MAX_ATTEMPTS {
                    outcome.status = "pending";
                }
            }
        }
        Ok(outcome)
    }

    /// Writes a batch: its scores, its judge spans, then its judgements with the charge
    /// and the cursor in one transaction (the evaluator's spending is always the sum of
    /// its judgements). A failure to store the spans is logged: the grades and the charge
    /// stand.
    async fn write(&self, evaluator: &EvaluatorRow, outcomes: Vec<Outcome>, cursor: i64) -> Result<()> {
        let scores: Vec<ScoreRow> = outcomes.iter().filter_map(|o| o.score.clone()).collect();
        if !scores.is_empty() {
            self.scores.record(scores).await?;
        }
        let spans: Vec<Span> = outcomes.iter().filter_map(|o| o.span.clone()).collect();
        if !spans.is_empty()
            && let Err(err) = self.telemetry.export_traces(judge_request(spans), None).await
        {
            warn!(error = %err.message(), evaluator = %evaluator.id, "judge calls' spans were not stored");
        }
        let spent: i64 = outcomes.iter().map(|o| o.cost_nanocents).sum();
        let judged = outcomes.iter().filter(|o| o.status == "done").count() as i64;
        let failed = outcomes.iter().filter(|o| o.status == "failed").count() as i64;
        let now_ns = now_ms().saturating_mul(1_000_000);
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            if !outcomes.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO judgements (evaluator_id, trace_id, span_id, status, attempts, error, score_id, \
                     cost_nanocents, time_ns) ",
                );
                q.push_values(&outcomes, |mut row, o| {
                    row.push_bind(&evaluator.id)
                        .push_bind(&o.trace_id)
                        .push_bind(&o.span_id)
                        .push_bind(o.status)
                        .push_bind(o.attempts)
                        .push_bind(&o.error)
                        .push_bind(o.score.as_ref().map(|s| s.id.as_str()).unwrap_or_default())
                        .push_bind(o.cost_nanocents)
                        .push_bind(now_ns);
                });
                q.push(
                    " ON CONFLICT (evaluator_id, trace_id, span_id) DO UPDATE SET status = excluded.status, \
                     attempts = excluded.attempts, error = excluded.error, score_id = excluded.score_id, \
                     cost_nanocents = judgements.cost_nanocents + excluded.cost_nanocents, time_ns = excluded.time_ns",
                );
                q.build().execute(&mut *tx).await?;
            }
            // The cursor never goes back: a leader before this one may have moved it on.
            sqlx::query(
                "UPDATE evaluators SET spent_nanocents = spent_nanocents + $2, judged = judged + $3, \
                 failed = failed + $4, cursor = CASE WHEN cursor < $5 THEN $5 ELSE cursor END WHERE id = $1",
            )
            .bind(&evaluator.id)
            .bind(spent)
            .bind(judged)
            .bind(failed)
            .bind(cursor)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })?;
        Ok(())
    }

    /// The call, its input and its output as text; `None` when it is no longer stored.
    async fn call(&self, trace_id: &str, span_id: &str) -> Result<Option<(Call, String, String)>> {
        let call: Option<Call> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT id, trace_id, span_id, service, COALESCE(response_model, request_model) AS model, \
                 COALESCE(NULLIF(agent_instance, ''), agent_id) AS agent_id, session_id FROM spans \
                 WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = $1) AND span_id = $2",
            )
            .bind(trace_id)
            .bind(span_id)
            .fetch_optional(pool)
            .await
        })?;
        let Some(call) = call else { return Ok(None) };
        let texts = message_texts::call(&self.store, trace_id, span_id).await?.map(|(_, t)| t).unwrap_or_default();
        // The answer is the assistant messages at the end; the input is everything before.
        let split = texts.iter().rposition(|t| t.role != "assistant").map_or(0, |i| i + 1);
        let line = |t: &message_texts::Text| format!("{}: {}", t.role, t.content());
        let input = texts[..split].iter().map(line).collect::<Vec<_>>().join("\n");
        let output = texts[split..].iter().map(|t| t.content()).collect::<Vec<_>>().join("\n");
        Ok(Some((call, input, output)))
    }

    /// The `eval` score a grade becomes, on the judged call.
    fn score_row(&self, evaluator: &EvaluatorRow, call: &Call, grade: &Grade, judged: &JudgeCall) -> ScoreRow {
        let (kind, value, label) = match grade {
            Grade::Number(n) => ("numeric", Some(*n), String::new()),
            Grade::Category(c) => ("categorical", None, c.clone()),
        };
        let comment = scores::truncate(judged.text.trim().to_owned(), scores::MAX_COMMENT_BYTES);
        ScoreRow {
            // One per evaluator and call: judging it again (never, but) would replace it.
            id: format!("eval_{}_{}_{}", evaluator.id, call.trace_id, call.span_id),
            name: evaluator.score_name.clone(),
            kind,
            value,
            label,
            comment,
            source: "eval".to_owned(),
            target: "span",
            trace_id: call.trace_id.clone(),
            span_id: call.span_id.clone(),
            session_id: call.session_id.clone().unwrap_or_default(),
            turn_id: String::new(),
            model: call.model.clone().unwrap_or_default(),
            agent_id: call.agent_id.clone().unwrap_or_default(),
            service: call.service.clone(),
            evaluator_id: evaluator.id.clone(),
            author: evaluator.name.clone(),
            time_ns: now_ms().saturating_mul(1_000_000),
        }
    }
}

/// A judge call as a GenAI span of [`JUDGE_SERVICE`], linked to the call it judged (its
/// trace and span ids; an experiment's answer has none, and no link).
pub(super) fn judge_span(evaluator: &EvaluatorRow, call: (&str, &str), judged: &JudgeCall, prompt: &str) -> Span {
    let text = |key: &str, value: &str| kv(key, Any::StringValue(value.to_owned()));
    let int = |key: &str, value: i64| kv(key, Any::IntValue(value));
    let attributes = vec![
        text("gen_ai.operation.name", "chat"),
        text("gen_ai.provider.name", "openai"),
        text("gen_ai.request.model", &evaluator.model),
        text("gen_ai.response.model", &judged.model),
        int("gen_ai.usage.input_tokens", judged.input_tokens),
        int("gen_ai.usage.output_tokens", judged.output_tokens),
        kv("gen_ai.usage.cost", Any::DoubleValue(judged.cost_nanocents as f64 / 1e11)),
        text(
            "gen_ai.input.messages",
            &json!([{"role": "user", "parts": [{"type": "text", "content": prompt}]}]).to_string(),
        ),
        text(
            "gen_ai.output.messages",
            &json!([{"role": "assistant", "parts": [{"type": "text", "content": judged.text}]}]).to_string(),
        ),
        text("roost.evaluator.id", &evaluator.id),
        text("roost.evaluator.name", &evaluator.name),
        text("roost.evaluation.trace_id", call.0),
        text("roost.evaluation.span_id", call.1),
    ];
    let ns = |ms: i64| u64::try_from(ms.saturating_mul(1_000_000)).unwrap_or(0);
    let link = (|| {
        Some(Link {
            trace_id: hex::decode(call.0).ok().filter(|id| id.len() == 16)?,
            span_id: hex::decode(call.1).ok().filter(|id| id.len() == 8)?,
            ..Link::default()
        })
    })();
    Span {
        trace_id: crate::llm::spans::random_trace_id().to_vec(),
        span_id: crate::llm::spans::random_span_id().to_vec(),
        name: format!("chat {}", evaluator.model),
        kind: SpanKind::Client as i32,
        start_time_unix_nano: ns(judged.started_ms),
        end_time_unix_nano: ns(judged.started_ms.saturating_add(judged.duration_ms)),
        attributes,
        links: link.into_iter().collect(),
        status: Some(Status { code: StatusCode::Ok as i32, message: String::new() }),
        ..Span::default()
    }
}

/// Judge spans as one export of [`JUDGE_SERVICE`].
pub(super) fn judge_request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Any::StringValue(JUDGE_SERVICE.to_owned()))],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "roost.evaluations".to_owned(),
                    ..InstrumentationScope::default()
                }),
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

/// Whether `evaluator` takes `call`: a model call (it names a model), not a judge's, that
/// its filter matches, in its sample.
fn takes(evaluator: &EvaluatorRow, call: &Call) -> bool {
    let matches = |wanted: &str, got: Option<&str>| wanted.is_empty() || got == Some(wanted);
    call.model.is_some()
        && call.service != JUDGE_SERVICE
        && matches(&evaluator.filter_service, Some(&call.service))
        && matches(&evaluator.filter_model, call.model.as_deref())
        && matches(&evaluator.filter_agent, call.agent_id.as_deref())
        && matches(&evaluator.filter_session, call.session_id.as_deref())
        && grading::sampled(&evaluator.id, &call.trace_id, &call.span_id, evaluator.sample_rate)
}
