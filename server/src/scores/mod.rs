//! Scores (docs/observing.md#scores): judgements of observed work, recorded by code
//! (`POST /api/v1/scores`, gRPC `ScoreService`), by people (the dashboard's pages, the web
//! chat's rating) and by evaluators; OTLP evaluation events become scores at ingest
//! ([`crate::telemetry::scores`]).
//!
//! A score names its target by id; roost finds the target (an unknown one is 404, so a
//! typo is not stored as a score of nothing) and keeps the context with the score: the
//! session a trace or span is in, the model of a call or turn, the agent. So a trace's
//! scores include its spans' and its turn's, a session's include everything in it, and
//! the q/1 `scores` aggregates per model or agent read one table.
//!
//! Scores are written through the telemetry writer, like any ingested item: committed
//! before they are acknowledged, grouped with other ingest, and pushed upstream by a node
//! (as a [`kinds::SCORES`](crate::node::kinds::SCORES) item).

pub mod service;

use std::{collections::HashMap, sync::Arc};

use roost_proto::{
    ApiError,
    json::value::to_json,
    v1::{CreateScoresRequest, ListScoresRequest, Score, ScoreList},
};

use crate::{
    Result,
    callers::turn_trace,
    ids::new_id,
    node::kinds,
    store::{Store, on_reader, on_writer},
    telemetry::{
        Telemetry,
        limits::time_in_range,
        rows::{Batch, ScoreRow},
        scores::{self, check, to_proto, value_of},
    },
    time::now_ms,
};

/// Most scores in one request.
pub const MAX_SCORES: usize = 1000;
/// Most scores one list answers.
const MAX_LIST: i64 = 1000;
/// The author of a `human` score given on the dashboard: its callers share tokens, so
/// roost cannot tell one person from another.
pub const OPERATOR: &str = "operator";

/// Who records a score.
#[derive(Debug, Clone, Copy)]
pub enum Giver<'a> {
    /// A dashboard caller: any target, any source.
    Dashboard,
    /// An account holder rating its own agent's turn: only turns of its agents, always
    /// `human`, authored by the account.
    Account(&'a str),
}

/// What a target is, as found in the store.
#[derive(Debug, Clone, Default)]
struct Context {
    trace_id: String,
    span_id: String,
    session_id: String,
    model: String,
    agent_id: String,
    service: String,
}

/// A span's session, agent, model, service and attributed instance, as stored.
type SpanContext = (Option<String>, Option<String>, Option<String>, String, String);

/// Records, lists and deletes scores.
pub struct Scores {
    store: Store,
    telemetry: Arc<Telemetry>,
}

const SELECT: &str = "SELECT id, name, kind, value, label, comment, source, target, trace_id, span_id, session_id, \
     turn_id, model, agent_id, service, evaluator_id, author, time_ns FROM scores";

/// A score as read back.
#[derive(sqlx::FromRow)]
struct Stored {
    id: String,
    name: String,
    kind: String,
    value: Option<f64>,
    label: String,
    comment: String,
    source: String,
    target: String,
    trace_id: String,
    span_id: String,
    session_id: String,
    turn_id: String,
    model: String,
    agent_id: String,
    service: String,
    evaluator_id: String,
    author: String,
    time_ns: i64,
}

fn stored_row(r: Stored) -> ScoreRow {
    let kind = scores::KINDS.into_iter().find(|k| *k == r.kind).unwrap_or("numeric");
    let target = ["trace", "span", "session", "turn"].into_iter().find(|t| *t == r.target).unwrap_or("trace");
    ScoreRow {
        id: r.id,
        name: r.name,
        kind,
        value: r.value,
        label: r.label,
        comment: r.comment,
        source: r.source,
        target,
        trace_id: r.trace_id,
        span_id: r.span_id,
        session_id: r.session_id,
        turn_id: r.turn_id,
        model: r.model,
        agent_id: r.agent_id,
        service: r.service,
        evaluator_id: r.evaluator_id,
        author: r.author,
        time_ns: r.time_ns,
    }
}

impl Scores {
    /// Scores kept in `store`, written through `telemetry`'s writer.
    pub fn new(store: Store, telemetry: Arc<Telemetry>) -> Self {
        Self { store, telemetry }
    }

    /// Records the scores of a request, all or none; they come back as recorded.
    pub async fn create(&self, req: CreateScoresRequest, giver: Giver<'_>) -> Result<Vec<Score>> {
        let given: Vec<Score> = match (req.score, req.scores.is_empty()) {
            (Some(one), true) => vec![one],
            (None, false) => req.scores,
            (None, true) => return Err(ApiError::invalid_argument("give a score, or a list of scores").into()),
            (Some(_), false) => return Err(ApiError::invalid_argument("give score or scores, not both").into()),
        };
        if given.len() > MAX_SCORES {
            return Err(ApiError::invalid_argument(format!("at most {MAX_SCORES} scores in one request")).into());
        }
        let single = given.len() == 1;
        let mut rows = Vec::with_capacity(given.len());
        let mut found: HashMap<(String, String, String, String), Context> = HashMap::new();
        for (i, score) in given.into_iter().enumerate() {
            let at = |e: String| ApiError::invalid_argument(if single { e } else { format!("scores[{i}]: {e}") });
            let mut row = self.checked(score, giver).map_err(at)?;
            let key = (row.trace_id.clone(), row.span_id.clone(), row.session_id.clone(), row.turn_id.clone());
            let context = match found.get(&key) {
                Some(context) => context.clone(),
                None => {
                    let context = self.find(&row, giver).await?;
                    found.insert(key, context.clone());
                    context
                }
            };
            row.trace_id = context.trace_id;
            row.span_id = context.span_id;
            row.session_id = context.session_id;
            row.model = context.model;
            row.agent_id = context.agent_id;
            row.service = context.service;
            rows.push(row);
        }
        self.record(rows).await
    }

    /// Writes scores already checked and placed (an evaluator's, a page's); they come back
    /// as recorded.
    pub(crate) async fn record(&self, rows: Vec<ScoreRow>) -> Result<Vec<Score>> {
        let scores: Vec<Score> = rows.iter().map(to_proto).collect();
        let list = ScoreList { scores: scores.clone() };
        self.telemetry.ingest(Batch { scores: rows, ..Batch::default() }, kinds::SCORES, &list).await?;
        Ok(scores)
    }

    /// A score's own fields, checked, with its target's ids (not yet found).
    fn checked(&self, score: Score, giver: Giver<'_>) -> std::result::Result<ScoreRow, String> {
        let (kind, value, label) = value_of(&score.value.as_ref().map(to_json).unwrap_or_default())?;
        let target = match (
            score.trace_id.is_empty(),
            score.span_id.is_empty(),
            score.session_id.is_empty(),
            score.turn_id.is_empty(),
        ) {
            (false, true, true, true) => "trace",
            (false, false, true, true) => "span",
            (true, true, false, true) => "session",
            (true, true, true, false) => "turn",
            (true, false, _, _) => return Err("a span_id needs its trace_id".to_owned()),
            (true, true, true, true) => {
                return Err("name a target: trace_id, trace_id and span_id, session_id, or turn_id".to_owned());
            }
            _ => return Err("name one target: trace_id (with span_id), session_id or turn_id".to_owned()),
        };
        let now_ns = now_ms().saturating_mul(1_000_000);
        let time_ns = match &score.time {
            None => now_ns,
            Some(t) => t.seconds.saturating_mul(1_000_000_000).saturating_add(i64::from(t.nanos)),
        };
        if !time_in_range(time_ns, now_ns) {
            return Err("time is before 1970 or more than a day ahead".to_owned());
        }
        let (source, author) = match giver {
            Giver::Dashboard => {
                let source = if score.source.is_empty() { "api".to_owned() } else { score.source };
                let author =
                    if score.author.is_empty() && source == "human" { OPERATOR.to_owned() } else { score.author };
                (source, author)
            }
            Giver::Account(account) => {
                if target != "turn" {
                    return Err("an account scores only its agents' turns".to_owned());
                }
                ("human".to_owned(), account.to_owned())
            }
        };
        for (field, id) in [
            ("id", &score.id),
            ("trace_id", &score.trace_id),
            ("span_id", &score.span_id),
            ("session_id", &score.session_id),
            ("turn_id", &score.turn_id),
        ] {
            if id.len() > scores::MAX_NAME_BYTES {
                return Err(format!("{field} is longer than {} bytes", scores::MAX_NAME_BYTES));
            }
        }
        let row = ScoreRow {
            id: if score.id.is_empty() { new_id("score") } else { score.id },
            name: score.name,
            kind,
            value,
            label,
            comment: score.comment,
            source,
            target,
            trace_id: score.trace_id,
            span_id: score.span_id,
            session_id: score.session_id,
            turn_id: score.turn_id,
            evaluator_id: String::new(),
            author,
            time_ns,
            ..ScoreRow::default()
        };
        check(&row)?;
        Ok(row)
    }

    /// Where a score's target is: 404 when it is not stored (or, for an account, not its
    /// own turn).
    async fn find(&self, row: &ScoreRow, giver: Giver<'_>) -> Result<Context> {
        let missing = |what: &str, id: &str| -> crate::Error { ApiError::not_found(format!("no {what} {id}")).into() };
        match row.target {
            "span" => {
                let found: Option<SpanContext> = on_reader!(self.store, |pool| {
                    sqlx::query_as(
                        "SELECT session_id, agent_id, COALESCE(response_model, request_model), service, \
                             agent_instance FROM spans WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = $1) \
                             AND span_id = $2",
                    )
                    .bind(&row.trace_id)
                    .bind(&row.span_id)
                    .fetch_optional(pool)
                    .await
                })?;
                let (session, agent, model, service, instance) =
                    found.ok_or_else(|| missing("span", &format!("{} in trace {}", row.span_id, row.trace_id)))?;
                Ok(Context {
                    trace_id: row.trace_id.clone(),
                    span_id: row.span_id.clone(),
                    session_id: session.unwrap_or_default(),
                    model: model.unwrap_or_default(),
                    agent_id: if instance.is_empty() { agent.unwrap_or_default() } else { instance },
                    service,
                })
            }
            "trace" => {
                let (session, service, agent) =
                    self.trace(&row.trace_id).await?.ok_or_else(|| missing("trace", &row.trace_id))?;
                Ok(Context {
                    trace_id: row.trace_id.clone(),
                    session_id: session,
                    agent_id: agent,
                    service,
                    ..Context::default()
                })
            }
            "session" => {
                let found: Option<(String, String)> = on_reader!(self.store, |pool| {
                    sqlx::query_as("SELECT agent_id, service FROM sessions WHERE session_id = $1")
                        .bind(&row.session_id)
                        .fetch_optional(pool)
                        .await
                })?;
                let (agent, service) = found.ok_or_else(|| missing("session", &row.session_id))?;
                Ok(Context { session_id: row.session_id.clone(), agent_id: agent, service, ..Context::default() })
            }
            _ => {
                let found: Option<(String, String, String)> = on_reader!(self.store, |pool| {
                    sqlx::query_as("SELECT instance_id, account_id, model FROM turns WHERE id = $1")
                        .bind(&row.turn_id)
                        .fetch_optional(pool)
                        .await
                })?;
                let (instance, _, model) = found
                    .filter(|(_, account, _)| match giver {
                        Giver::Dashboard => true,
                        Giver::Account(caller) => caller == account,
                    })
                    .ok_or_else(|| missing("turn", &row.turn_id))?;
                let (trace, span) = turn_trace(&row.turn_id);
                let trace_id = hex::encode(trace);
                // The turn's trace is in the agent's session once recorded; until then (or
                // for a turn recorded without one) the agent's instance id is its session.
                let session = self.trace(&trace_id).await?.map(|t| t.0).filter(|s| !s.is_empty());
                Ok(Context {
                    trace_id,
                    span_id: hex::encode(span),
                    session_id: session.unwrap_or_else(|| instance.clone()),
                    model,
                    agent_id: instance,
                    service: String::new(),
                })
            }
        }
    }

    /// A stored trace's session, service and agent.
    async fn trace(&self, trace_id: &str) -> Result<Option<(String, String, String)>> {
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT t.session_id, t.service, COALESCE((SELECT s.agent_id FROM sessions s \
                 WHERE s.session_id = t.session_id AND t.session_id <> ''), '') FROM traces t WHERE t.trace_id = $1",
            )
            .bind(trace_id)
            .fetch_optional(pool)
            .await
        })?)
    }

    /// The scores of one target, newest first.
    pub async fn list(&self, req: &ListScoresRequest) -> Result<Vec<Score>> {
        let (column, id) = match (req.trace_id.is_empty(), req.session_id.is_empty(), req.turn_id.is_empty()) {
            (false, true, true) => ("trace_id", &req.trace_id),
            (true, false, true) => ("session_id", &req.session_id),
            (true, true, false) => ("turn_id", &req.turn_id),
            _ => return Err(ApiError::invalid_argument("name one of trace_id, session_id or turn_id").into()),
        };
        let limit = if req.limit <= 0 { 200 } else { i64::from(req.limit).min(MAX_LIST) };
        let name_filter = if req.name.is_empty() { "" } else { " AND name = $3" };
        // `<> ''` lets the partial index by target serve it (it leaves out scores on none).
        let sql =
            format!("{SELECT} WHERE {column} = $1 AND {column} <> ''{name_filter} ORDER BY time_ns DESC, id LIMIT $2");
        let rows: Vec<Stored> = on_reader!(self.store, |pool| {
            let q = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(id).bind(limit);
            let q = if req.name.is_empty() { q } else { q.bind(&req.name) };
            q.fetch_all(pool).await
        })?;
        Ok(rows.into_iter().map(|r| to_proto(&stored_row(r))).collect())
    }

    /// One stored score.
    pub async fn get(&self, id: &str) -> Result<Option<ScoreRow>> {
        let sql = format!("{SELECT} WHERE id = $1");
        let row: Option<Stored> = on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(id).fetch_optional(pool).await
        })?;
        Ok(row.map(stored_row))
    }

    /// Deletes a score: 404 when there is none by that id.
    pub async fn delete(&self, id: &str) -> Result<()> {
        let deleted = on_writer!(self.store, |pool| {
            sqlx::query("DELETE FROM scores WHERE id = $1").bind(id).execute(pool).await.map(|r| r.rows_affected())
        })?;
        if deleted == 0 {
            return Err(ApiError::not_found(format!("no score {id}")).into());
        }
        Ok(())
    }
}
