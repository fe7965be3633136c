//! A session is a property of the trace (issue 48; migration 0032).
//!
//! The most common way to send sessions is a span of the sender's own around each turn,
//! with `session.id` on it, and the model calls under it from an instrumentation library
//! that knows nothing of sessions. When each span's session was its own attribute, those
//! calls (their tokens, cost and messages) fell outside the session. Now:
//!
//! - **Which session.** A trace belongs to the session named by its root span (no parent);
//!   else by the earliest of its spans and log records that names one (a span by its start,
//!   a log record by its time). A name comes from the item's attributes, then its
//!   resource's (`attributes::gen_ai`); baggage reaches roost as attributes copied by the
//!   sender's baggage processor. Two claims of the same standing: the first seen wins.
//!   A trace whose spans name two sessions goes to the root's.
//! - **Any order, any number of exports.** The root is often exported last. The trace's
//!   row keeps its session and how it was chosen (`session_rank`: the smallest BIGINT for
//!   the root, else the claim's time; the largest while none). Each write compares its
//!   items' claims with the stored one; when the trace's session changes, the rows already
//!   stored (spans, log records, messages, search documents) are moved into the new session,
//!   and their counts, tokens and cost are taken out of the session they were in and added
//!   to the new one ([`TraceSessionTx::move_trace`]). A session left with nothing is deleted.
//!   A session's first and last times are not narrowed by a move (it was active then).
//! - **New items carry it.** Every span and log record of a trace with a session is written
//!   with that session ([`rewrite`]), so everything that reads a row's session (q/1, pages,
//!   search, usage by session, the live streams) agrees with the session's totals.
//! - **Replicas.** On PostgreSQL the writer locks the rows of the traces it writes (in
//!   trace id order) before deciding, so two replicas writing one trace's spans decide one
//!   after the other.
//! - **Stores from before.** Their traces are attributed again once by [`backfill`], which
//!   `roost serve` runs in the background, newest traces first, resumable.
//! - **Log records before any span.** A log record whose trace has no span yet keeps its own
//!   session; once the trace's first span arrives it is numbered (`writer`), its claim
//!   counts, and it is moved like any stored row.

use std::collections::HashMap;

use super::{
    rows::Batch,
    summaries::{Dialect, Summaries, SummaryTx as _},
};
use crate::{
    Result,
    store::{BeginWrite as _, Store, impl_for_connections, on_writer},
};

/// The rank of a root span's claim: before every other.
pub const ROOT_RANK: i64 = i64::MIN;
/// The rank of a trace no item named a session for.
pub const UNNAMED: i64 = i64::MAX;

/// The `roost_meta` key holding the highest trace number [`backfill`] has still to
/// attribute (migration 0032 sets it to the traces stored then; 0 once done).
const BACKFILL_KEY: &str = "session_backfill_traces";
/// Traces attributed per transaction by [`backfill`]: short, so ingest never waits long.
const BACKFILL_CHUNK: i64 = 500;
/// Traces per statement reading stored sessions (one parameter each).
const TRACES_PER_STATEMENT: usize = 2_000;

/// A trace's session and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSession {
    /// '' while none.
    pub session: String,
    /// Lower wins: [`ROOT_RANK`], a claim's time, or [`UNNAMED`].
    pub rank: i64,
}

impl Default for TraceSession {
    fn default() -> Self {
        Self { session: String::new(), rank: UNNAMED }
    }
}

impl TraceSession {
    /// Takes the claim when it ranks before the current one (a tie keeps the current).
    fn offer(&mut self, rank: i64, session: &str) {
        if rank < self.rank && !session.is_empty() {
            (self.session, self.rank) = (session.to_owned(), rank);
        }
    }
}

/// A stored trace as the writer sees it.
#[derive(Debug, Clone)]
pub struct TraceState {
    /// Its number (`traces.seq`).
    pub seq: i64,
    /// Its session as stored before this write.
    pub stored: TraceSession,
    /// Drawn by this write (nothing of it is stored but log records that waited for it).
    pub new: bool,
    /// Log records stored before any of its spans were numbered by this write.
    pub waited: bool,
}

/// What a write decided about its traces' sessions.
#[derive(Debug, Default)]
pub struct Decided {
    /// Each numbered trace of the batch that has a session.
    pub sessions: HashMap<String, TraceSession>,
    /// Traces whose session changed (to record on their rows after the summaries).
    pub changed: Vec<(String, TraceSession)>,
}

/// The best claim of each trace in `batch`: its spans', and its log records' where the trace
/// is numbered (`traces`). A claim is (rank, session).
pub fn claims<'a>(batch: &'a Batch, traces: &HashMap<String, TraceState>) -> HashMap<&'a str, TraceSession> {
    let mut claims: HashMap<&str, TraceSession> = HashMap::new();
    for span in &batch.spans {
        if let Some(session) = &span.gen_ai.session_id {
            let rank = if span.parent_span_id.is_empty() { ROOT_RANK } else { span.start_ns.min(UNNAMED - 1) };
            claims.entry(&span.trace_id).or_default().offer(rank, session);
        }
    }
    for log in &batch.logs {
        if let (Some(trace), Some(session)) = (&log.trace_id, &log.gen_ai.session_id)
            && traces.contains_key(trace)
        {
            claims.entry(trace).or_default().offer(log.time_ns.clamp(ROOT_RANK + 1, UNNAMED - 1), session);
        }
    }
    claims
}

/// The batch with every span and log record of a trace that has a session carrying it, or
/// `None` when each already does (the usual case: no copy).
pub fn rewrite(batch: &Batch, sessions: &HashMap<String, TraceSession>) -> Option<Batch> {
    let of = |trace: &str| sessions.get(trace).map(|s| s.session.as_str()).filter(|s| !s.is_empty());
    let span_differs = |i: usize| {
        let span = &batch.spans[i];
        of(&span.trace_id).is_some_and(|s| span.gen_ai.session_id.as_deref() != Some(s))
    };
    let log_differs = |i: usize| {
        let log = &batch.logs[i];
        log.trace_id.as_deref().and_then(of).is_some_and(|s| log.gen_ai.session_id.as_deref() != Some(s))
    };
    if !(0..batch.spans.len()).any(span_differs) && !(0..batch.logs.len()).any(log_differs) {
        return None;
    }
    let mut rewritten = batch.clone();
    for span in &mut rewritten.spans {
        if let Some(session) = of(&span.trace_id) {
            span.gen_ai.session_id = Some(session.to_owned());
        }
    }
    for log in &mut rewritten.logs {
        if let Some(session) = log.trace_id.as_deref().and_then(of) {
            log.gen_ai.session_id = Some(session.to_owned());
        }
    }
    Some(rewritten)
}

/// The counts of a trace's stored rows in one session (or in none), as a move reads them.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct MovedRows {
    /// The session they were in (`None`: none).
    pub session_id: Option<String>,
    /// Rows.
    pub rows: i64,
    pub errors: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost: i64,
    pub unpriced: i64,
    /// Their time span (a span's start to its end, a log record's time).
    pub first_ns: i64,
    pub last_ns: i64,
    /// The times their search documents may have (a span's document is at its start).
    pub doc_first_ns: i64,
    pub doc_last_ns: i64,
    pub agent_id: Option<String>,
    pub service: Option<String>,
}

/// What a trace's rows moved into a session bring it.
#[derive(Debug, Clone, Default)]
pub struct MovedIn {
    pub spans: MovedRows,
    pub logs: MovedRows,
    /// The latest model of the moved spans, with the end of its call.
    pub last_model: Option<(String, i64)>,
}

/// Session statements inside the write transaction.
pub(crate) trait TraceSessionTx {
    /// Numbered traces' stored sessions, locked until the transaction ends on PostgreSQL
    /// (taken in trace id order, so two writers never wait on each other in a circle).
    async fn stored_traces(&mut self, trace_ids: &[String]) -> Result<HashMap<String, (i64, TraceSession)>>;
    /// Decides the session of each numbered trace of `batch` (`traces`), moves the stored
    /// rows of those whose session changed, and returns the batch to write (rewritten when
    /// some of its items must carry their trace's session).
    async fn decide_sessions(
        &mut self,
        batch: &Batch,
        traces: &HashMap<String, TraceState>,
        summaries: &mut Summaries,
    ) -> Result<(Decided, Option<Batch>)>;
    /// Moves the stored rows of trace `seq` that are not in `session` into it.
    async fn move_trace(&mut self, seq: i64, trace_id: &str, session: &str, summaries: &mut Summaries) -> Result<()>;
    /// Records a trace's session on its row (for traces no summary of this write touches).
    async fn set_trace_session(&mut self, trace_id: &str, session: &TraceSession) -> Result<()>;
}

/// The per-session counts of a trace's stored rows outside `$2`, for spans.
const SPANS_OUTSIDE: &str = "SELECT session_id, COUNT(*) AS rows, \
     CAST(SUM(CASE WHEN status_code = 2 THEN 1 ELSE 0 END) AS BIGINT) AS errors, \
     CAST(SUM(COALESCE(input_tokens, 0)) AS BIGINT) AS input_tokens, \
     CAST(SUM(COALESCE(output_tokens, 0)) AS BIGINT) AS output_tokens, \
     CAST(SUM(COALESCE(cost_nanocents, 0)) AS BIGINT) AS cost, \
     CAST(SUM(CASE WHEN (input_tokens IS NOT NULL OR output_tokens IS NOT NULL) AND cost_nanocents IS NULL \
              AND COALESCE(response_model, request_model) IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS unpriced, \
     MIN(start_ns) AS first_ns, MAX(end_ns) AS last_ns, MIN(start_ns) AS doc_first_ns, MAX(start_ns) AS doc_last_ns, \
     MAX(agent_id) AS agent_id, MAX(service) AS service \
     FROM spans WHERE trace_seq = $1 AND (session_id IS NULL OR session_id <> $2) GROUP BY session_id";
/// The same for log records.
const LOGS_OUTSIDE: &str = "SELECT session_id, COUNT(*) AS rows, \
     CAST(SUM(CASE WHEN severity_number >= 17 THEN 1 ELSE 0 END) AS BIGINT) AS errors, \
     CAST(SUM(COALESCE(input_tokens, 0)) AS BIGINT) AS input_tokens, \
     CAST(SUM(COALESCE(output_tokens, 0)) AS BIGINT) AS output_tokens, \
     CAST(SUM(COALESCE(cost_nanocents, 0)) AS BIGINT) AS cost, \
     CAST(SUM(CASE WHEN (input_tokens IS NOT NULL OR output_tokens IS NOT NULL) AND cost_nanocents IS NULL \
              AND model IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS unpriced, \
     MIN(time_ns) AS first_ns, MAX(time_ns) AS last_ns, MIN(time_ns) AS doc_first_ns, MAX(time_ns) AS doc_last_ns, \
     MAX(agent_id) AS agent_id, MAX(service) AS service \
     FROM logs WHERE trace_seq = $1 AND (session_id IS NULL OR session_id <> $2) GROUP BY session_id";

impl_for_connections! {
    impl TraceSessionTx {
        async fn stored_traces(&mut self, trace_ids: &[String]) -> Result<HashMap<String, (i64, TraceSession)>> {
            let mut ids: Vec<&String> = trace_ids.iter().collect();
            ids.sort_unstable();
            ids.dedup();
            let mut found = HashMap::with_capacity(ids.len());
            for chunk in ids.chunks(TRACES_PER_STATEMENT) {
                let mut q = sqlx::QueryBuilder::new("SELECT trace_id, seq, session_id, session_rank FROM traces WHERE trace_id IN (");
                let mut list = q.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                q.push(") ORDER BY trace_id");
                q.push(<Self as Dialect>::FOR_UPDATE);
                let rows: Vec<(String, i64, String, i64)> = q.build_query_as().fetch_all(&mut *self).await?;
                found.extend(rows.into_iter().map(|(id, seq, session, rank)| (id, (seq, TraceSession { session, rank }))));
            }
            Ok(found)
        }

        async fn decide_sessions(
            &mut self,
            batch: &Batch,
            traces: &HashMap<String, TraceState>,
            summaries: &mut Summaries,
        ) -> Result<(Decided, Option<Batch>)> {
            let mut decided = Decided::default();
            if traces.is_empty() {
                return Ok((decided, None));
            }
            let claims = claims(batch, traces);
            // Log records that waited for their trace's number claim it too.
            let waited: Vec<i64> = traces.values().filter(|t| t.waited).map(|t| t.seq).collect();
            let mut waiting: HashMap<i64, TraceSession> = HashMap::new();
            for chunk in waited.chunks(TRACES_PER_STATEMENT) {
                let mut q = sqlx::QueryBuilder::new(
                    "SELECT trace_seq, session_id, MIN(time_ns) FROM logs WHERE session_id IS NOT NULL AND trace_seq IN (",
                );
                let mut list = q.separated(", ");
                for seq in chunk {
                    list.push_bind(*seq);
                }
                q.push(") GROUP BY trace_seq, session_id ORDER BY 3, 2");
                let rows: Vec<(i64, String, i64)> = q.build_query_as().fetch_all(&mut *self).await?;
                for (seq, session, time) in rows {
                    waiting.entry(seq).or_default().offer(time.clamp(ROOT_RANK + 1, UNNAMED - 1), &session);
                }
            }
            let mut moves = Vec::new();
            for (trace_id, state) in traces {
                let mut session = state.stored.clone();
                if let Some(claim) = waiting.get(&state.seq) {
                    session.offer(claim.rank, &claim.session);
                }
                if let Some(claim) = claims.get(trace_id.as_str()) {
                    session.offer(claim.rank, &claim.session);
                }
                if session.session.is_empty() {
                    continue;
                }
                let changed = session != state.stored;
                if changed {
                    decided.changed.push((trace_id.clone(), session.clone()));
                }
                if (changed && !state.new) || state.waited {
                    moves.push((state.seq, trace_id, session.session.clone()));
                }
                decided.sessions.insert(trace_id.clone(), session);
            }
            // In trace order, as every writer takes them.
            moves.sort_unstable();
            for (seq, trace_id, session) in moves {
                self.move_trace(seq, trace_id, &session, summaries).await?;
            }
            decided.changed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let rewritten = rewrite(batch, &decided.sessions);
            Ok((decided, rewritten))
        }

        async fn move_trace(&mut self, seq: i64, trace_id: &str, session: &str, summaries: &mut Summaries) -> Result<()> {
            let spans: Vec<MovedRows> =
                sqlx::query_as(SPANS_OUTSIDE).bind(seq).bind(session).fetch_all(&mut *self).await?;
            let logs: Vec<MovedRows> = sqlx::query_as(LOGS_OUTSIDE).bind(seq).bind(session).fetch_all(&mut *self).await?;
            if spans.is_empty() && logs.is_empty() {
                return Ok(());
            }
            // Out of the sessions they were in.
            let mut from: HashMap<&str, (&MovedRows, Option<&MovedRows>)> = HashMap::new();
            let empty = MovedRows::default();
            for group in &spans {
                if let Some(old) = group.session_id.as_deref() {
                    from.insert(old, (group, None));
                }
            }
            for group in &logs {
                if let Some(old) = group.session_id.as_deref() {
                    from.entry(old).or_insert((&empty, None)).1 = Some(group);
                }
            }
            let mut olds: Vec<_> = from.into_iter().collect();
            olds.sort_unstable_by_key(|(old, _)| *old);
            for (old, (s, l)) in olds {
                let l = l.unwrap_or(&empty);
                sqlx::query(
                    "UPDATE sessions SET spans = spans - $2, logs = logs - $3, errors = errors - $4, \
                     input_tokens = input_tokens - $5, output_tokens = output_tokens - $6, \
                     cost_nanocents = cost_nanocents - $7, unpriced_calls = unpriced_calls - $8 WHERE session_id = $1",
                )
                .bind(old)
                .bind(s.rows)
                .bind(l.rows)
                .bind(s.errors + l.errors)
                .bind(s.input_tokens + l.input_tokens)
                .bind(s.output_tokens + l.output_tokens)
                .bind(s.cost + l.cost)
                .bind(s.unpriced + l.unpriced)
                .execute(&mut *self)
                .await?;
                let removed = sqlx::query(
                    "DELETE FROM sessions WHERE session_id = $1 AND spans <= 0 AND logs <= 0 AND events <= 0",
                )
                .bind(old)
                .execute(&mut *self)
                .await?
                .rows_affected();
                summaries.sessions_removed(removed as i64);
            }
            // Into the new one.
            let last_model: Option<(String, i64)> = sqlx::query_as(
                "SELECT COALESCE(response_model, request_model), end_ns FROM spans \
                 WHERE trace_seq = $1 AND (session_id IS NULL OR session_id <> $2) \
                   AND COALESCE(response_model, request_model) IS NOT NULL ORDER BY end_ns DESC LIMIT 1",
            )
            .bind(seq)
            .bind(session)
            .fetch_optional(&mut *self)
            .await?;
            let sum = |groups: &[MovedRows]| groups.iter().fold(None, |acc: Option<MovedRows>, g| {
                Some(match acc {
                    None => g.clone(),
                    Some(a) => MovedRows {
                        session_id: None,
                        rows: a.rows + g.rows,
                        errors: a.errors + g.errors,
                        input_tokens: a.input_tokens + g.input_tokens,
                        output_tokens: a.output_tokens + g.output_tokens,
                        cost: a.cost + g.cost,
                        unpriced: a.unpriced + g.unpriced,
                        first_ns: a.first_ns.min(g.first_ns),
                        last_ns: a.last_ns.max(g.last_ns),
                        doc_first_ns: a.doc_first_ns.min(g.doc_first_ns),
                        doc_last_ns: a.doc_last_ns.max(g.doc_last_ns),
                        agent_id: a.agent_id.or(g.agent_id.clone()),
                        service: a.service.or(g.service.clone()),
                    },
                })
            });
            let (spans, logs) = (sum(&spans), sum(&logs));
            let docs = [&spans, &logs]
                .into_iter()
                .flatten()
                .fold((i64::MAX, i64::MIN), |(lo, hi), g| (lo.min(g.doc_first_ns), hi.max(g.doc_last_ns)));
            summaries.moved_in(session, &MovedIn { spans: spans.unwrap_or_default(), logs: logs.unwrap_or_default(), last_model });
            for table in ["spans", "logs", "messages"] {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE {table} SET session_id = $2 WHERE trace_seq = $1 AND (session_id IS NULL OR session_id <> $2)"
                )))
                .bind(seq)
                .bind(session)
                .execute(&mut *self)
                .await?;
            }
            // Search documents have no index by trace: their time bounds them (the trace's
            // documents are at its moved rows' times).
            sqlx::query(
                "UPDATE search_docs SET session_id = $2 WHERE time_ns >= $3 AND time_ns <= $4 AND trace_id = $1 \
                 AND session_id <> $2",
            )
            .bind(trace_id)
            .bind(session)
            .bind(docs.0)
            .bind(docs.1)
            .execute(&mut *self)
            .await?;
            Ok(())
        }

        async fn set_trace_session(&mut self, trace_id: &str, session: &TraceSession) -> Result<()> {
            sqlx::query(
                "UPDATE traces SET session_id = $2, session_rank = $3 WHERE trace_id = $1 AND session_rank > $3",
            )
            .bind(trace_id)
            .bind(&session.session)
            .bind(session.rank)
            .execute(&mut *self)
            .await?;
            Ok(())
        }
    }
}

/// A trace's rows as [`backfill`] reads them: (trace number, session, rank of the claim).
type Claim = (i64, String, i64);

/// Attributes the traces stored before sessions were the trace's (migration 0032) again,
/// newest first, a chunk per transaction; returns how many traces changed session. Each
/// chunk moves the mark in its own transaction, only from the value it read, so replicas
/// sharing a PostgreSQL store (or a restart mid-way) never attribute a chunk twice.
pub async fn backfill(store: &Store) -> Result<u64> {
    let mut changed = 0;
    loop {
        let Some(mark) = store.meta_get(BACKFILL_KEY).await?.and_then(|v| v.parse::<i64>().ok()).filter(|m| *m > 0)
        else {
            return Ok(changed);
        };
        let low = (mark - BACKFILL_CHUNK).max(0);
        changed += on_writer!(store, |pool| {
            let mut tx = pool.begin_volume(store.durability()).await?;
            let moved = sqlx::query("UPDATE roost_meta SET value = $1 WHERE key = $2 AND value = $3")
                .bind(low.to_string())
                .bind(BACKFILL_KEY)
                .bind(mark.to_string())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let changed = if moved == 1 { tx.attribute_traces(low, mark).await? } else { 0 };
            tx.commit().await?;
            Ok::<_, crate::Error>(changed)
        })?;
    }
}

/// [`backfill`]'s statements.
trait BackfillTx {
    /// Attributes the traces numbered in `(low, high]`; returns how many changed session.
    async fn attribute_traces(&mut self, low: i64, high: i64) -> Result<u64>;
}

impl_for_connections! {
    impl BackfillTx {
        async fn attribute_traces(&mut self, low: i64, high: i64) -> Result<u64> {
            let claims: Vec<Claim> = sqlx::query_as(
                "SELECT trace_seq, session_id, CASE WHEN parent_span_id = '' THEN $3 ELSE start_ns END FROM spans \
                 WHERE trace_seq > $1 AND trace_seq <= $2 AND session_id IS NOT NULL \
                 UNION ALL \
                 SELECT trace_seq, session_id, time_ns FROM logs \
                 WHERE trace_seq > $1 AND trace_seq <= $2 AND session_id IS NOT NULL",
            )
            .bind(low)
            .bind(high)
            .bind(ROOT_RANK)
            .fetch_all(&mut *self)
            .await?;
            if claims.is_empty() {
                return Ok(0);
            }
            // The best claim per trace; among equals, the smallest session id (a store's rows
            // come back in no set order).
            let mut best: HashMap<i64, TraceSession> = HashMap::new();
            for (seq, session, rank) in claims {
                let current = best.entry(seq).or_default();
                if rank < current.rank || (rank == current.rank && session < current.session) {
                    *current = TraceSession { session, rank };
                }
            }
            let mut seqs: Vec<i64> = best.keys().copied().collect();
            seqs.sort_unstable();
            let mut stored: Vec<(i64, String, String, i64)> = Vec::with_capacity(seqs.len());
            for chunk in seqs.chunks(TRACES_PER_STATEMENT) {
                let mut q =
                    sqlx::QueryBuilder::new("SELECT seq, trace_id, session_id, session_rank FROM traces WHERE seq IN (");
                let mut list = q.separated(", ");
                for seq in chunk {
                    list.push_bind(*seq);
                }
                q.push(") ORDER BY trace_id");
                q.push(<Self as Dialect>::FOR_UPDATE);
                stored.extend(q.build_query_as::<(i64, String, String, i64)>().fetch_all(&mut *self).await?);
            }
            let mut summaries = Summaries::default();
            let mut changed = 0;
            for (seq, trace_id, session, rank) in stored {
                let Some(decided) = best.get(&seq) else { continue };
                // A write since the migration already ranked this trace: its choice stands.
                if rank != UNNAMED {
                    continue;
                }
                self.move_trace(seq, &trace_id, &decided.session, &mut summaries).await?;
                if decided.session != session {
                    changed += 1;
                }
                self.set_trace_session(&trace_id, decided).await?;
            }
            self.apply_summaries(&summaries).await?;
            Ok(changed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::rows::{GenAi, LogRow, SpanRow};

    fn span(trace: &str, parent: &str, start: i64, session: Option<&str>) -> SpanRow {
        SpanRow {
            trace_id: trace.into(),
            span_id: format!("{trace}-{start}"),
            parent_span_id: parent.into(),
            start_ns: start,
            end_ns: start + 1,
            gen_ai: GenAi { session_id: session.map(str::to_owned), ..GenAi::default() },
            ..SpanRow::default()
        }
    }

    fn numbered(ids: &[&str]) -> HashMap<String, TraceState> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| {
                let state = TraceState { seq: i as i64 + 1, stored: TraceSession::default(), new: true, waited: false };
                ((*id).to_owned(), state)
            })
            .collect()
    }

    #[test]
    fn the_root_claims_first_then_the_earliest() {
        let batch = Batch {
            spans: vec![
                span("t1", "p", 30, Some("late")),
                span("t1", "p", 10, Some("early")),
                span("t2", "p", 10, Some("child")),
                span("t2", "", 50, Some("root")),
                span("t3", "p", 10, None),
            ],
            ..Batch::default()
        };
        let claims = claims(&batch, &numbered(&["t1", "t2", "t3"]));
        assert_eq!(claims["t1"], TraceSession { session: "early".into(), rank: 10 });
        assert_eq!(claims["t2"], TraceSession { session: "root".into(), rank: ROOT_RANK });
        assert!(!claims.contains_key("t3"), "no claim: {claims:?}");
    }

    #[test]
    fn log_records_claim_only_for_numbered_traces() {
        let log = |trace: &str, time: i64| LogRow {
            trace_id: Some(trace.into()),
            time_ns: time,
            gen_ai: GenAi { session_id: Some(format!("log-{trace}")), ..GenAi::default() },
            ..LogRow::default()
        };
        let batch = Batch { logs: vec![log("t1", 5), log("unknown", 5)], ..Batch::default() };
        let claims = claims(&batch, &numbered(&["t1"]));
        assert_eq!(claims.len(), 1);
        assert_eq!(claims["t1"].session, "log-t1");
    }

    #[test]
    fn rewrite_gives_every_item_its_traces_session_and_copies_only_when_needed() {
        let batch = Batch {
            spans: vec![span("t1", "p", 10, None), span("t1", "", 20, Some("s")), span("t2", "", 5, None)],
            ..Batch::default()
        };
        let sessions = HashMap::from([("t1".to_owned(), TraceSession { session: "s".into(), rank: ROOT_RANK })]);
        let rewritten = rewrite(&batch, &sessions).expect("the child has no session yet");
        let of: Vec<_> = rewritten.spans.iter().map(|s| s.gen_ai.session_id.clone()).collect();
        assert_eq!(of, [Some("s".into()), Some("s".into()), None]);
        assert!(rewrite(&rewritten, &sessions).is_none(), "nothing left to change");
    }
}
