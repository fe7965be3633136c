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
    telemetry::{message_texts, rows::ScoreRow},
    time::now_ms,
};

/// Spans read per evaluator and pass.
const SCAN: i64 = 2_000;
/// Pending judgements taken per evaluator and pass.
const BATCH: i64 = 100;

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

    /// One pass over every evaluator; true when it took or judged anything.
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
            busy |= self.take_new_calls(&evaluator).await?;
            busy |= self.judge_pending(evaluator, stop).await?;
        }
        Ok(busy)
    }

    /// Moves the evaluator's cursor over the spans stored since, taking the calls it
    /// judges as pending judgements (in one transaction with the cursor).
    async fn take_new_calls(&self, evaluator: &EvaluatorRow) -> Result<bool> {
        let calls: Vec<Call> = on_reader!(self.store, |pool| {
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
        let Some(last) = calls.last().map(|c| c.id) else { return Ok(false) };
        let taken: Vec<&Call> = calls.iter().filter(|c| takes(evaluator, c)).collect();
        let now_ns = now_ms().saturating_mul(1_000_000);
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            for chunk in taken.chunks(500) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO judgements (evaluator_id, trace_id, span_id, status, attempts, error, score_id, \
                     cost_nanocents, time_ns) ",
                );
                q.push_values(chunk, |mut row, call| {
                    row.push_bind(&evaluator.id)
                        .push_bind(&call.trace_id)
                        .push_bind(&call.span_id)
                        .push_bind("pending")
                        .push_bind(0_i64)
                        .push_bind("")
                        .push_bind("")
                        .push_bind(0_i64)
                        .push_bind(now_ns);
                });
                q.push(" ON CONFLICT (evaluator_id, trace_id, span_id) DO NOTHING");
                q.build().execute(&mut *tx).await?;
            }
            // Never backwards: another pass (a leader before this one) may have moved it on.
            sqlx::query("UPDATE evaluators SET cursor = $2 WHERE id = $1 AND cursor < $2")
                .bind(&evaluator.id)
                .bind(last)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        })?;
        Ok(true)
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

    /// Judges the evaluator's pending calls, oldest first, one at a time while its budget
    /// lasts.
    async fn judge_pending(&self, mut evaluator: EvaluatorRow, stop: &CancellationToken) -> Result<bool> {
        let pending: Vec<(String, String, i64)> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT trace_id, span_id, attempts FROM judgements WHERE evaluator_id = $1 AND status = 'pending' \
                 ORDER BY time_ns, trace_id, span_id LIMIT $2",
            )
            .bind(&evaluator.id)
            .bind(BATCH)
            .fetch_all(pool)
            .await
        })?;
        let parser = evaluator.parser();
        let mut busy = false;
        for (trace_id, span_id, attempts) in pending {
            if stop.is_cancelled() || !evaluator.judging() {
                break;
            }
            busy = true;
            let call = self.call(&trace_id, &span_id).await?;
            let Some((call, input, output)) = call else {
                // Gone (retention) before it was judged.
                self.settle(
                    &evaluator.id,
                    &trace_id,
                    &span_id,
                    attempts + 1,
                    Err("the call is no longer stored"),
                    0,
                    None,
                )
                .await?;
                evaluator.failed += 1;
                continue;
            };
            let metadata = json!({
                "model": call.model, "service": call.service, "agent_id": call.agent_id, "session_id": call.session_id,
            })
            .to_string();
            let prompt = grading::render(&evaluator.prompt, &input, &output, &metadata);
            match self.models.judge(&evaluator.model, &prompt).await {
                Ok(judged) => {
                    self.record_judge_span(&evaluator, &call, &judged, &prompt).await;
                    let grade = parser.read(&judged.text);
                    let score = grade.as_ref().ok().map(|g| self.score_row(&evaluator, &call, g, &judged));
                    if let Some(score) = &score {
                        self.scores.record(vec![score.clone()]).await?;
                    }
                    let error = grade.as_ref().err().map(String::as_str);
                    let outcome = match error {
                        None => Ok(()),
                        Some(why) => Err(why),
                    };
                    let score_id = score.as_ref().map(|s| s.id.as_str());
                    self.settle(
                        &evaluator.id,
                        &trace_id,
                        &span_id,
                        attempts + 1,
                        outcome,
                        judged.cost_nanocents,
                        score_id,
                    )
                    .await?;
                    evaluator.spent_nanocents = evaluator.spent_nanocents.saturating_add(judged.cost_nanocents);
                }
                Err(err) => {
                    let failed = attempts + 1 >= MAX_ATTEMPTS;
                    if failed {
                        self.settle(&evaluator.id, &trace_id, &span_id, attempts + 1, Err(err.message()), 0, None)
                            .await?;
                    } else {
                        self.retry_later(&evaluator.id, &trace_id, &span_id, err.message()).await?;
                    }
                    // The upstream is failing: the rest waits for the next pass.
                    break;
                }
            }
        }
        Ok(busy)
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
        let mut comment = judged.text.trim().to_owned();
        if comment.len() > crate::telemetry::scores::MAX_COMMENT_BYTES {
            let mut end = crate::telemetry::scores::MAX_COMMENT_BYTES;
            while !comment.is_char_boundary(end) {
                end -= 1;
            }
            comment.truncate(end);
        }
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

    /// Ends a judgement, done or failed, and charges what its judge call cost to the
    /// evaluator, in one transaction: its spending is always the sum of its judgements.
    #[allow(clippy::too_many_arguments)]
    async fn settle(
        &self,
        evaluator_id: &str,
        trace_id: &str,
        span_id: &str,
        attempts: i64,
        outcome: std::result::Result<(), &str>,
        cost_nanocents: i64,
        score_id: Option<&str>,
    ) -> Result<()> {
        let (status, error, judged, failed) = match outcome {
            Ok(()) => ("done", "", 1_i64, 0_i64),
            Err(why) => ("failed", why, 0, 1),
        };
        let now_ns = now_ms().saturating_mul(1_000_000);
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query(
                "UPDATE judgements SET status = $4, attempts = $5, error = $6, score_id = $7, \
                 cost_nanocents = cost_nanocents + $8, time_ns = $9 \
                 WHERE evaluator_id = $1 AND trace_id = $2 AND span_id = $3",
            )
            .bind(evaluator_id)
            .bind(trace_id)
            .bind(span_id)
            .bind(status)
            .bind(attempts)
            .bind(error)
            .bind(score_id.unwrap_or_default())
            .bind(cost_nanocents)
            .bind(now_ns)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE evaluators SET spent_nanocents = spent_nanocents + $2, judged = judged + $3, \
                 failed = failed + $4 WHERE id = $1",
            )
            .bind(evaluator_id)
            .bind(cost_nanocents)
            .bind(judged)
            .bind(failed)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })?;
        Ok(())
    }

    /// Counts a failed attempt, keeping the judgement pending for a later pass.
    async fn retry_later(&self, evaluator_id: &str, trace_id: &str, span_id: &str, error: &str) -> Result<()> {
        on_writer!(self.store, |pool| {
            sqlx::query(
                "UPDATE judgements SET attempts = attempts + 1, error = $4 \
                 WHERE evaluator_id = $1 AND trace_id = $2 AND span_id = $3",
            )
            .bind(evaluator_id)
            .bind(trace_id)
            .bind(span_id)
            .bind(error)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    /// The judge call as a GenAI span of [`JUDGE_SERVICE`], linked to the call it judged;
    /// a failure to store it is logged (the grade and the charge stand).
    async fn record_judge_span(&self, evaluator: &EvaluatorRow, call: &Call, judged: &JudgeCall, prompt: &str) {
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
            text("roost.evaluation.trace_id", &call.trace_id),
            text("roost.evaluation.span_id", &call.span_id),
        ];
        let ns = |ms: i64| u64::try_from(ms.saturating_mul(1_000_000)).unwrap_or(0);
        let link = (|| {
            Some(Link {
                trace_id: hex::decode(&call.trace_id).ok()?,
                span_id: hex::decode(&call.span_id).ok()?,
                ..Link::default()
            })
        })();
        let span = Span {
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
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![text("service.name", JUDGE_SERVICE)],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "roost.evaluations".to_owned(),
                        ..InstrumentationScope::default()
                    }),
                    spans: vec![span],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        if let Err(err) = self.telemetry.export_traces(request, None).await {
            warn!(error = %err.message(), evaluator = %evaluator.id, "a judge call's span was not stored");
        }
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
