//! The summaries q/1 reads instead of raw rows: sessions, traces, services, daily usage
//! per model and daily activity, plus each run's counters. Deltas are gathered in memory
//! for a write group, then applied with one upsert per table.

use std::collections::BTreeMap;

use super::{
    latency,
    row_counts::{RowCountTx as _, RowCounts},
    rows::{EventRow, GenAi, LogRow, MetricRow, MetricUsage, SpanRow, UsageKind},
    trace_sessions::{MovedIn, TraceSession, UNNAMED},
};
use crate::{
    Result,
    store::impl_for_connections,
    time::{utc_day, utc_hour},
};

/// Daily usage per model as read (a subquery for `FROM`): the calls (`usage_daily`), plus
/// what metrics reported for services that report no calls (`metric_usage_daily`; see
/// [`Summaries::metric_usage`]). Decided when read, so the order metrics and calls arrive
/// in does not matter.
pub const USAGE_WITH_METRICS: &str = "(SELECT day, model, CAST(SUM(calls) AS BIGINT) AS calls, \
    CAST(SUM(input_tokens) AS BIGINT) AS input_tokens, CAST(SUM(output_tokens) AS BIGINT) AS output_tokens, \
    CAST(SUM(cache_read_tokens) AS BIGINT) AS cache_read_tokens, \
    CAST(SUM(cache_write_tokens) AS BIGINT) AS cache_write_tokens, \
    CAST(SUM(cost_nanocents) AS BIGINT) AS cost_nanocents, CAST(SUM(unpriced_calls) AS BIGINT) AS unpriced_calls \
    FROM (SELECT day, model, calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, \
                 cost_nanocents, unpriced_calls FROM usage_daily \
          UNION ALL \
          SELECT m.day, m.model, 0, m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_write_tokens, \
                 m.cost_nanocents, 0 FROM metric_usage_daily m \
           WHERE NOT EXISTS (SELECT 1 FROM services s WHERE s.service = m.service AND s.usage_calls > 0)) AS u \
    GROUP BY day, model) AS usage";

/// Most rows one upsert of labels or latency writes (8 values each at most: far below
/// either backend's limit on bound values).
const ROWS_PER_STATEMENT: usize = 1000;

/// OTLP severity number from which a log record counts as an error.
const ERROR_SEVERITY: i32 = 17;
/// OTLP span status code for errors.
const STATUS_ERROR: i32 = 2;

#[derive(Debug, Clone, Default)]
struct SessionDelta {
    agent_id: String,
    service: String,
    first_ns: i64,
    last_ns: i64,
    spans: i64,
    events: i64,
    logs: i64,
    errors: i64,
    input_tokens: i64,
    output_tokens: i64,
    cost: i64,
    /// Calls whose cost is left out of `cost`: their model has no price.
    unpriced_calls: i64,
    last_model: String,
    last_model_ns: i64,
}

#[derive(Debug, Clone, Default)]
struct TraceDelta {
    start_ns: i64,
    end_ns: i64,
    spans: i64,
    errors: i64,
    root_name: String,
    service: String,
    session_id: String,
    input_tokens: i64,
    output_tokens: i64,
    cost: i64,
    /// Spans that are model calls (a trace with some and no session is a conversation).
    model_calls: i64,
    unpriced_calls: i64,
    /// How `session_id` was chosen ([`super::trace_sessions`]), when this write chose it.
    session_rank: Option<i64>,
}

#[derive(Debug, Clone, Default)]
struct ServiceDelta {
    first_ns: i64,
    last_ns: i64,
    spans: i64,
    errors: i64,
    logs: i64,
    log_errors: i64,
    metric_points: i64,
    usage_calls: i64,
}

#[derive(Debug, Clone, Default)]
struct UsageDelta {
    calls: i64,
    input_tokens: i64,
    output_tokens: i64,
    cache_read_tokens: i64,
    cache_write_tokens: i64,
    cost: i64,
    unpriced_calls: i64,
}

#[derive(Debug, Clone, Default)]
struct MetricUsageDelta {
    input_tokens: f64,
    output_tokens: f64,
    cache_read_tokens: f64,
    cache_write_tokens: f64,
    cost: f64,
}

#[derive(Debug, Clone, Default)]
struct ActivityDelta {
    spans: i64,
    span_errors: i64,
    logs: i64,
    log_errors: i64,
    metric_points: i64,
    events: i64,
    runs: i64,
    input_tokens: i64,
    output_tokens: i64,
    cost: i64,
}

#[derive(Debug, Clone, Default)]
struct RunDelta {
    events: i64,
    input_tokens: i64,
    output_tokens: i64,
    cost: i64,
}

/// A latency histogram's bucket: (hour, model, service, agent, measure, bucket).
type LatencyKey = (String, String, String, String, i64, i64);

/// Summary deltas of one write group. Kept in key order, so every transaction upserts
/// summary rows in the same order: two writers (the ingest writer and the turn recorder,
/// or replicas on one PostgreSQL) touching the same rows wait for each other instead of
/// deadlocking.
#[derive(Debug, Default)]
pub struct Summaries {
    sessions: BTreeMap<String, SessionDelta>,
    traces: BTreeMap<String, TraceDelta>,
    services: BTreeMap<String, ServiceDelta>,
    usage: BTreeMap<(String, String), UsageDelta>,
    /// The same per UTC hour (without cache tokens).
    usage_hourly: BTreeMap<(String, String), UsageDelta>,
    metric_usage: BTreeMap<(String, String, String), MetricUsageDelta>,
    activity: BTreeMap<String, ActivityDelta>,
    runs: BTreeMap<String, RunDelta>,
    /// [Labels](super::labels) of traces (from their spans), by (label, trace), with the
    /// newest time one came.
    trace_labels: BTreeMap<(String, String), i64>,
    /// Labels of sessions from their log records (which have no trace), likewise.
    session_labels: BTreeMap<(String, String), i64>,
    /// Model call [latency](super::latency) histograms: (hour, model, service, agent,
    /// measure, bucket) → (calls, total ns).
    latency: BTreeMap<LatencyKey, (i64, i64)>,
    /// Rows added to the tables [`super::row_counts`] keeps; the sessions among them are
    /// counted by the upsert that inserts them ([`SummaryTx::apply_summaries`]).
    rows: RowCounts,
}

fn widen(first: &mut i64, last: &mut i64, seen: bool, start: i64, end: i64) {
    if seen {
        *first = (*first).min(start);
        *last = (*last).max(end);
    } else {
        (*first, *last) = (start, end);
    }
}

impl Summaries {
    fn session(&mut self, id: &str, start: i64, end: i64) -> &mut SessionDelta {
        let seen = self.sessions.contains_key(id);
        let delta = self.sessions.entry(id.to_owned()).or_default();
        widen(&mut delta.first_ns, &mut delta.last_ns, seen, start, end);
        delta
    }

    fn service(&mut self, name: &str, start: i64, end: i64) -> &mut ServiceDelta {
        let seen = self.services.contains_key(name);
        let delta = self.services.entry(name.to_owned()).or_default();
        widen(&mut delta.first_ns, &mut delta.last_ns, seen, start, end);
        delta
    }

    /// Counts usage in its day and in its hour; `unpriced` when its model has no price.
    fn usage(
        &mut self,
        ns: i64,
        model: &str,
        (input, output, cost): (i64, i64, i64),
        call: bool,
        unpriced: bool,
    ) -> &mut UsageDelta {
        let add = |usage: &mut UsageDelta| {
            usage.calls += i64::from(call);
            usage.input_tokens += input;
            usage.output_tokens += output;
            usage.cost += cost;
            usage.unpriced_calls += i64::from(unpriced);
        };
        add(self.usage_hourly.entry((utc_hour(ns), model.to_owned())).or_default());
        let usage = self.usage.entry((utc_day(ns), model.to_owned())).or_default();
        add(usage);
        usage
    }

    /// Counts the model call a span or log record reports (if it reports one) in daily
    /// usage and in its session. A span naming a model is a call; a log record is one only
    /// when it reports tokens (coding agents name the model on every event). Neither is
    /// when its usage is [self-reported](GenAi::self_reported): a hosted agent's calls are
    /// counted from the model gateway's spans.
    fn gen_ai_call(&mut self, g: &GenAi, start_ns: i64, end_ns: i64, is_log: bool) {
        let (input, output, cost) =
            (g.input_tokens.unwrap_or(0), g.output_tokens.unwrap_or(0), g.cost_nanocents.unwrap_or(0));
        let model = g.model().unwrap_or_default();
        if let Some(session) = &g.session_id {
            let delta = self.session(session, start_ns, end_ns);
            delta.input_tokens += input;
            delta.output_tokens += output;
            delta.cost += cost;
            delta.unpriced_calls += i64::from(g.is_unpriced());
            if let Some(agent) = &g.agent_id {
                delta.agent_id.clone_from(agent);
            }
            if !model.is_empty() && end_ns >= delta.last_model_ns {
                (delta.last_model, delta.last_model_ns) = (model.to_owned(), end_ns);
            }
        }
        let call = !g.self_reported && if is_log { g.has_usage() } else { g.model().is_some() && !g.aggregate };
        if call || input > 0 || output > 0 {
            let usage = self.usage(start_ns, model, (input, output, cost), call, g.is_unpriced());
            usage.cache_read_tokens += g.cache_read_tokens.unwrap_or(0).max(0);
            usage.cache_write_tokens += g.cache_write_tokens.unwrap_or(0).max(0);
        }
        let day = self.activity(start_ns);
        day.input_tokens += input;
        day.output_tokens += output;
        day.cost += cost;
    }

    fn activity(&mut self, ns: i64) -> &mut ActivityDelta {
        self.activity.entry(utc_day(ns)).or_default()
    }

    /// Counts a newly stored span.
    pub fn span(&mut self, span: &SpanRow, service: &str) {
        let error = i64::from(span.status_code == STATUS_ERROR);
        let g = &span.gen_ai;
        let (input, output, cost) =
            (g.input_tokens.unwrap_or(0), g.output_tokens.unwrap_or(0), g.cost_nanocents.unwrap_or(0));

        let trace_seen = self.traces.contains_key(&span.trace_id);
        let trace = self.traces.entry(span.trace_id.clone()).or_default();
        widen(&mut trace.start_ns, &mut trace.end_ns, trace_seen, span.start_ns, span.end_ns);
        trace.spans += 1;
        trace.errors += error;
        trace.input_tokens += input;
        trace.output_tokens += output;
        trace.cost += cost;
        trace.model_calls += i64::from(g.model().is_some() && !g.aggregate);
        trace.unpriced_calls += i64::from(g.is_unpriced());
        if span.parent_span_id.is_empty() {
            trace.root_name.clone_from(&span.name);
            trace.service = service.to_owned();
        } else if trace.service.is_empty() {
            trace.service = service.to_owned();
        }
        if let Some(session) = &g.session_id {
            trace.session_id.clone_from(session);
            let delta = self.session(session, span.start_ns, span.end_ns);
            delta.spans += 1;
            delta.errors += error;
            delta.service = service.to_owned();
        }
        self.gen_ai_call(g, span.start_ns, span.end_ns, false);
        for label in &span.labels {
            let time = self.trace_labels.entry((label.clone(), span.trace_id.clone())).or_default();
            *time = (*time).max(span.end_ns);
        }
        if let Some(model) = g.model().filter(|_| !g.aggregate && !g.self_reported) {
            let group =
                (utc_hour(span.start_ns), model.to_owned(), service.to_owned(), g.agent_id.clone().unwrap_or_default());
            let measures =
                [(latency::DURATION, Some(span.end_ns - span.start_ns)), (latency::FIRST_TOKEN, span.first_token_ns)];
            for (measure, ns) in measures {
                let Some(ns) = ns.filter(|ns| *ns >= 0) else { continue };
                let key =
                    (group.0.clone(), group.1.clone(), group.2.clone(), group.3.clone(), measure, latency::bucket(ns));
                let histogram = self.latency.entry(key).or_default();
                histogram.0 += 1;
                histogram.1 = histogram.1.saturating_add(ns);
            }
        }
        let svc = self.service(service, span.start_ns, span.end_ns);
        svc.spans += 1;
        svc.errors += error;
        svc.usage_calls += i64::from(g.has_usage() && !g.aggregate);
        self.rows.spans += 1;
        let day = self.activity(span.start_ns);
        day.spans += 1;
        day.span_errors += error;
    }

    /// Records the session this write chose for a trace whose spans it counted; false when
    /// it counted none of them (the caller then records it on the trace's row itself).
    pub fn trace_session(&mut self, trace_id: &str, session: &TraceSession) -> bool {
        let Some(trace) = self.traces.get_mut(trace_id) else {
            return false;
        };
        trace.session_id.clone_from(&session.session);
        trace.session_rank = Some(session.rank);
        true
    }

    /// Adds what a trace's stored rows bring the session they were moved into
    /// ([`super::trace_sessions`]; the session they left was updated by the move).
    pub fn moved_in(&mut self, session: &str, moved: &MovedIn) {
        let (spans, logs) = (&moved.spans, &moved.logs);
        let (first, last) = match (spans.rows > 0, logs.rows > 0) {
            (true, true) => (spans.first_ns.min(logs.first_ns), spans.last_ns.max(logs.last_ns)),
            (true, false) => (spans.first_ns, spans.last_ns),
            (false, true) => (logs.first_ns, logs.last_ns),
            (false, false) => return,
        };
        let delta = self.session(session, first, last);
        delta.spans += spans.rows;
        delta.logs += logs.rows;
        delta.errors += spans.errors + logs.errors;
        delta.input_tokens += spans.input_tokens + logs.input_tokens;
        delta.output_tokens += spans.output_tokens + logs.output_tokens;
        delta.cost += spans.cost + logs.cost;
        delta.unpriced_calls += spans.unpriced + logs.unpriced;
        if let Some(agent) = spans.agent_id.as_ref().or(logs.agent_id.as_ref()) {
            delta.agent_id.clone_from(agent);
        }
        if let Some(service) = spans.service.as_ref().or(logs.service.as_ref()) {
            delta.service.clone_from(service);
        }
        if let Some((model, end_ns)) = &moved.last_model
            && *end_ns >= delta.last_model_ns
        {
            (delta.last_model, delta.last_model_ns) = (model.clone(), *end_ns);
        }
    }

    /// Counts sessions a move left empty and deleted.
    pub fn sessions_removed(&mut self, count: i64) {
        self.rows.sessions -= count;
    }

    /// Counts a stored log record (and the model call it reports, for coding agents'
    /// events).
    pub fn log(&mut self, log: &LogRow, service: &str) {
        let error = i64::from(log.severity_number >= ERROR_SEVERITY);
        if let Some(session) = &log.gen_ai.session_id {
            for label in &log.labels {
                let time = self.session_labels.entry((label.clone(), session.clone())).or_default();
                *time = (*time).max(log.time_ns);
            }
            let delta = self.session(session, log.time_ns, log.time_ns);
            delta.logs += 1;
            delta.errors += error;
            if delta.service.is_empty() {
                delta.service = service.to_owned();
            }
        }
        self.gen_ai_call(&log.gen_ai, log.time_ns, log.time_ns, true);
        let svc = self.service(service, log.time_ns, log.time_ns);
        svc.usage_calls += i64::from(log.gen_ai.has_usage());
        svc.logs += 1;
        svc.log_errors += error;
        self.rows.logs += 1;
        let day = self.activity(log.time_ns);
        day.logs += 1;
        day.log_errors += error;
    }

    /// Adds what a usage metric's point reports (`amount`: its growth, for a cumulative
    /// series) to the day's metric usage of its service and model.
    pub fn metric_usage(&mut self, ns: i64, service: &str, usage: &MetricUsage, amount: f64) {
        let delta = self.metric_usage.entry((utc_day(ns), service.to_owned(), usage.model.clone())).or_default();
        match usage.kind {
            UsageKind::Input => delta.input_tokens += amount,
            UsageKind::Output => delta.output_tokens += amount,
            UsageKind::CacheReadApart => {
                delta.cache_read_tokens += amount;
                delta.input_tokens += amount;
            }
            UsageKind::CacheWriteApart => {
                delta.cache_write_tokens += amount;
                delta.input_tokens += amount;
            }
            UsageKind::CostUsd => {}
        }
        delta.cost += amount * usage.nanocents_per_unit as f64;
    }

    /// Counts a stored metric point.
    pub fn metric(&mut self, point: &MetricRow, service: &str) {
        self.service(service, point.time_ns, point.time_ns).metric_points += 1;
        self.activity(point.time_ns).metric_points += 1;
        self.rows.metric_points += 1;
    }

    /// Counts a new run.
    pub fn run(&mut self, started_ns: i64) {
        self.activity(started_ns).runs += 1;
    }

    /// Counts a newly stored event.
    pub fn event(&mut self, event: &EventRow) {
        let (input, output, cost) = (event.input_tokens, event.output_tokens, event.cost_nanocents);
        let delta = self.session(&event.session_id, event.ts_ns, event.ts_ns);
        delta.events += 1;
        delta.input_tokens += input;
        delta.output_tokens += output;
        delta.cost += cost;
        if !event.agent_id.is_empty() {
            delta.agent_id.clone_from(&event.agent_id);
        }
        if !event.model.is_empty() && event.ts_ns >= delta.last_model_ns {
            (delta.last_model, delta.last_model_ns) = (event.model.clone(), event.ts_ns);
        }
        let run = self.runs.entry(event.run_id.clone()).or_default();
        run.events += 1;
        run.input_tokens += input;
        run.output_tokens += output;
        run.cost += cost;
        if !event.model.is_empty() || input > 0 || output > 0 {
            self.usage(event.ts_ns, &event.model, (input, output, cost), !event.model.is_empty(), false);
        }
        self.rows.events += 1;
        let day = self.activity(event.ts_ns);
        day.events += 1;
        day.input_tokens += input;
        day.output_tokens += output;
        day.cost += cost;
    }
}

/// How a backend spells the two-argument minimum and maximum.
pub(crate) trait Dialect {
    /// `MIN` (SQLite) or `LEAST` (PostgreSQL).
    const LEAST: &'static str;
    /// `MAX` (SQLite) or `GREATEST` (PostgreSQL).
    const GREATEST: &'static str;
    /// Whether a new trace's number (`traces.seq`) comes from the table's sequence
    /// (PostgreSQL, where replicas insert side by side) rather than from the writer (SQLite:
    /// one writer at a time, so the next after the largest).
    const SEQUENCES: bool;
    /// Whether an upsert's `RETURNING (xmax = 0)` tells the rows it inserted from the ones
    /// it updated (PostgreSQL: a row the statement updated carries its transaction's lock).
    /// SQLite has no such column; there one writer runs at a time, so the keys missing
    /// before the upsert are the ones it inserts.
    const RETURNS_INSERTED: bool;
    /// What a `SELECT` ends with to lock the rows it reads until the transaction ends:
    /// nothing on SQLite (one writer at a time), `FOR UPDATE` on PostgreSQL.
    const FOR_UPDATE: &'static str;
}

impl Dialect for sqlx::SqliteConnection {
    const LEAST: &'static str = "MIN";
    const GREATEST: &'static str = "MAX";
    const SEQUENCES: bool = false;
    const RETURNS_INSERTED: bool = false;
    const FOR_UPDATE: &'static str = "";
}

impl Dialect for sqlx::PgConnection {
    const LEAST: &'static str = "LEAST";
    const GREATEST: &'static str = "GREATEST";
    const SEQUENCES: bool = true;
    const RETURNS_INSERTED: bool = true;
    const FOR_UPDATE: &'static str = " FOR UPDATE";
}

/// Applying summary deltas inside the write transaction.
pub(crate) trait SummaryTx {
    /// One upsert per summary table.
    async fn apply_summaries(&mut self, summaries: &Summaries) -> Result<()>;
}

impl_for_connections! {
    impl SummaryTx {
        async fn apply_summaries(&mut self, s: &Summaries) -> Result<()> {
            let (least, greatest) = (Self::LEAST, Self::GREATEST);
            let mut rows = s.rows;
            if !s.sessions.is_empty() {
                if !Self::RETURNS_INSERTED {
                    let mut q = sqlx::QueryBuilder::new("SELECT COUNT(*) FROM sessions WHERE session_id IN (");
                    let mut ids = q.separated(", ");
                    for id in s.sessions.keys() {
                        ids.push_bind(id);
                    }
                    q.push(")");
                    let known: i64 = q.build_query_scalar().fetch_one(&mut *self).await?;
                    rows.sessions += s.sessions.len() as i64 - known;
                }
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO sessions (session_id, agent_id, service, first_ns, last_ns, spans, events, logs, errors, \
                     input_tokens, output_tokens, cost_nanocents, last_model, unpriced_calls) ",
                );
                q.push_values(&s.sessions, |mut row, (id, d)| {
                    row.push_bind(id).push_bind(&d.agent_id).push_bind(&d.service).push_bind(d.first_ns).push_bind(d.last_ns)
                        .push_bind(d.spans).push_bind(d.events).push_bind(d.logs).push_bind(d.errors).push_bind(d.input_tokens)
                        .push_bind(d.output_tokens).push_bind(d.cost).push_bind(&d.last_model).push_bind(d.unpriced_calls);
                });
                q.push(format!(
                    " ON CONFLICT (session_id) DO UPDATE SET \
                     agent_id = CASE WHEN excluded.agent_id <> '' THEN excluded.agent_id ELSE sessions.agent_id END, \
                     service = CASE WHEN excluded.service <> '' THEN excluded.service ELSE sessions.service END, \
                     last_model = CASE WHEN excluded.last_model <> '' AND excluded.last_ns >= sessions.last_ns \
                         THEN excluded.last_model ELSE sessions.last_model END, \
                     first_ns = {least}(sessions.first_ns, excluded.first_ns), \
                     last_ns = {greatest}(sessions.last_ns, excluded.last_ns), \
                     spans = sessions.spans + excluded.spans, events = sessions.events + excluded.events, \
                     logs = sessions.logs + excluded.logs, errors = sessions.errors + excluded.errors, \
                     input_tokens = sessions.input_tokens + excluded.input_tokens, \
                     output_tokens = sessions.output_tokens + excluded.output_tokens, \
                     cost_nanocents = sessions.cost_nanocents + excluded.cost_nanocents, \
                     unpriced_calls = sessions.unpriced_calls + excluded.unpriced_calls"
                ));
                if Self::RETURNS_INSERTED {
                    q.push(" RETURNING (xmax = 0)");
                    let inserted: Vec<bool> = q.build_query_scalar().fetch_all(&mut *self).await?;
                    rows.sessions += inserted.into_iter().filter(|&new| new).count() as i64;
                } else {
                    q.build().execute(&mut *self).await?;
                }
            }
            if !s.traces.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO traces (trace_id, start_ns, end_ns, spans, errors, root_name, service, session_id, \
                     input_tokens, output_tokens, cost_nanocents, model_calls, unpriced_calls, session_rank) ",
                );
                q.push_values(&s.traces, |mut row, (id, d)| {
                    row.push_bind(id).push_bind(d.start_ns).push_bind(d.end_ns).push_bind(d.spans).push_bind(d.errors)
                        .push_bind(&d.root_name).push_bind(&d.service).push_bind(&d.session_id).push_bind(d.input_tokens)
                        .push_bind(d.output_tokens).push_bind(d.cost).push_bind(d.model_calls).push_bind(d.unpriced_calls)
                        .push_bind(d.session_rank.unwrap_or(UNNAMED));
                });
                q.push(format!(
                    " ON CONFLICT (trace_id) DO UPDATE SET \
                     root_name = CASE WHEN excluded.root_name <> '' THEN excluded.root_name ELSE traces.root_name END, \
                     service = CASE WHEN excluded.root_name <> '' OR traces.service = '' THEN excluded.service ELSE traces.service END, \
                     session_id = CASE WHEN excluded.session_rank < traces.session_rank THEN excluded.session_id \
                         ELSE traces.session_id END, \
                     session_rank = {least}(traces.session_rank, excluded.session_rank), \
                     start_ns = {least}(traces.start_ns, excluded.start_ns), end_ns = {greatest}(traces.end_ns, excluded.end_ns), \
                     spans = traces.spans + excluded.spans, errors = traces.errors + excluded.errors, \
                     input_tokens = traces.input_tokens + excluded.input_tokens, \
                     output_tokens = traces.output_tokens + excluded.output_tokens, \
                     cost_nanocents = traces.cost_nanocents + excluded.cost_nanocents, \
                     model_calls = traces.model_calls + excluded.model_calls, \
                     unpriced_calls = traces.unpriced_calls + excluded.unpriced_calls"
                ));
                q.build().execute(&mut *self).await?;
            }
            if !s.services.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO services (service, first_ns, last_ns, spans, errors, logs, log_errors, metric_points, \
                     usage_calls) ",
                );
                q.push_values(&s.services, |mut row, (name, d)| {
                    row.push_bind(name).push_bind(d.first_ns).push_bind(d.last_ns).push_bind(d.spans).push_bind(d.errors)
                        .push_bind(d.logs).push_bind(d.log_errors).push_bind(d.metric_points).push_bind(d.usage_calls);
                });
                q.push(format!(
                    " ON CONFLICT (service) DO UPDATE SET \
                     first_ns = {least}(services.first_ns, excluded.first_ns), last_ns = {greatest}(services.last_ns, excluded.last_ns), \
                     spans = services.spans + excluded.spans, errors = services.errors + excluded.errors, \
                     logs = services.logs + excluded.logs, log_errors = services.log_errors + excluded.log_errors, \
                     metric_points = services.metric_points + excluded.metric_points, \
                     usage_calls = services.usage_calls + excluded.usage_calls"
                ));
                q.build().execute(&mut *self).await?;
            }
            if !s.metric_usage.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO metric_usage_daily (day, service, model, input_tokens, output_tokens, cache_read_tokens, \
                     cache_write_tokens, cost_nanocents) ",
                );
                // Metric values are floats; usage is counted in whole tokens and nanocents.
                let whole = |v: f64| v.round().clamp(0.0, i64::MAX as f64) as i64;
                q.push_values(&s.metric_usage, |mut row, ((day, service, model), d)| {
                    row.push_bind(day).push_bind(service).push_bind(model).push_bind(whole(d.input_tokens))
                        .push_bind(whole(d.output_tokens)).push_bind(whole(d.cache_read_tokens))
                        .push_bind(whole(d.cache_write_tokens)).push_bind(whole(d.cost));
                });
                q.push(
                    " ON CONFLICT (day, service, model) DO UPDATE SET \
                     input_tokens = metric_usage_daily.input_tokens + excluded.input_tokens, \
                     output_tokens = metric_usage_daily.output_tokens + excluded.output_tokens, \
                     cache_read_tokens = metric_usage_daily.cache_read_tokens + excluded.cache_read_tokens, \
                     cache_write_tokens = metric_usage_daily.cache_write_tokens + excluded.cache_write_tokens, \
                     cost_nanocents = metric_usage_daily.cost_nanocents + excluded.cost_nanocents",
                );
                q.build().execute(&mut *self).await?;
            }
            if !s.usage.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO usage_daily (day, model, calls, input_tokens, output_tokens, cache_read_tokens, \
                     cache_write_tokens, cost_nanocents, unpriced_calls) ",
                );
                q.push_values(&s.usage, |mut row, ((day, model), d)| {
                    row.push_bind(day).push_bind(model).push_bind(d.calls).push_bind(d.input_tokens)
                        .push_bind(d.output_tokens).push_bind(d.cache_read_tokens).push_bind(d.cache_write_tokens)
                        .push_bind(d.cost).push_bind(d.unpriced_calls);
                });
                q.push(
                    " ON CONFLICT (day, model) DO UPDATE SET calls = usage_daily.calls + excluded.calls, \
                     input_tokens = usage_daily.input_tokens + excluded.input_tokens, \
                     output_tokens = usage_daily.output_tokens + excluded.output_tokens, \
                     cache_read_tokens = usage_daily.cache_read_tokens + excluded.cache_read_tokens, \
                     cache_write_tokens = usage_daily.cache_write_tokens + excluded.cache_write_tokens, \
                     cost_nanocents = usage_daily.cost_nanocents + excluded.cost_nanocents, \
                     unpriced_calls = usage_daily.unpriced_calls + excluded.unpriced_calls",
                );
                q.build().execute(&mut *self).await?;
            }
            if !s.usage_hourly.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO usage_hourly (hour, model, calls, input_tokens, output_tokens, cost_nanocents, \
                     unpriced_calls) ",
                );
                q.push_values(&s.usage_hourly, |mut row, ((hour, model), d)| {
                    row.push_bind(hour).push_bind(model).push_bind(d.calls).push_bind(d.input_tokens)
                        .push_bind(d.output_tokens).push_bind(d.cost).push_bind(d.unpriced_calls);
                });
                q.push(
                    " ON CONFLICT (hour, model) DO UPDATE SET calls = usage_hourly.calls + excluded.calls, \
                     input_tokens = usage_hourly.input_tokens + excluded.input_tokens, \
                     output_tokens = usage_hourly.output_tokens + excluded.output_tokens, \
                     cost_nanocents = usage_hourly.cost_nanocents + excluded.cost_nanocents, \
                     unpriced_calls = usage_hourly.unpriced_calls + excluded.unpriced_calls",
                );
                q.build().execute(&mut *self).await?;
            }
            if !s.activity.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO activity_daily (day, spans, span_errors, logs, log_errors, metric_points, events, runs, \
                     input_tokens, output_tokens, cost_nanocents) ",
                );
                q.push_values(&s.activity, |mut row, (day, d)| {
                    row.push_bind(day).push_bind(d.spans).push_bind(d.span_errors).push_bind(d.logs).push_bind(d.log_errors)
                        .push_bind(d.metric_points).push_bind(d.events).push_bind(d.runs).push_bind(d.input_tokens)
                        .push_bind(d.output_tokens).push_bind(d.cost);
                });
                q.push(
                    " ON CONFLICT (day) DO UPDATE SET spans = activity_daily.spans + excluded.spans, \
                     span_errors = activity_daily.span_errors + excluded.span_errors, logs = activity_daily.logs + excluded.logs, \
                     log_errors = activity_daily.log_errors + excluded.log_errors, \
                     metric_points = activity_daily.metric_points + excluded.metric_points, \
                     events = activity_daily.events + excluded.events, runs = activity_daily.runs + excluded.runs, \
                     input_tokens = activity_daily.input_tokens + excluded.input_tokens, \
                     output_tokens = activity_daily.output_tokens + excluded.output_tokens, \
                     cost_nanocents = activity_daily.cost_nanocents + excluded.cost_nanocents",
                );
                q.build().execute(&mut *self).await?;
            }
            // Labels and latency come many per item: in statements of a bounded size.
            for (table, owner, labels) in
                [("trace_labels", "trace_id", &s.trace_labels), ("session_labels", "session_id", &s.session_labels)]
            {
                let labels: Vec<_> = labels.iter().collect();
                for chunk in labels.chunks(ROWS_PER_STATEMENT) {
                    let mut q = sqlx::QueryBuilder::new(format!("INSERT INTO {table} (label, {owner}, time_ns) "));
                    q.push_values(chunk, |mut row, ((label, id), time)| {
                        row.push_bind(label).push_bind(id).push_bind(*time);
                    });
                    q.push(format!(
                        " ON CONFLICT (label, {owner}) DO UPDATE SET time_ns = {greatest}({table}.time_ns, excluded.time_ns)"
                    ));
                    q.build().execute(&mut *self).await?;
                }
            }
            let latency: Vec<_> = s.latency.iter().collect();
            for chunk in latency.chunks(ROWS_PER_STATEMENT) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO latency_hourly (hour, model, service, agent_id, measure, bucket, calls, total_ns) ",
                );
                q.push_values(chunk, |mut row, ((hour, model, service, agent, measure, bucket), (calls, total))| {
                    row.push_bind(hour).push_bind(model).push_bind(service).push_bind(agent).push_bind(*measure)
                        .push_bind(*bucket).push_bind(*calls).push_bind(*total);
                });
                q.push(
                    " ON CONFLICT (hour, model, service, agent_id, measure, bucket) DO UPDATE SET \
                     calls = latency_hourly.calls + excluded.calls, total_ns = latency_hourly.total_ns + excluded.total_ns",
                );
                q.build().execute(&mut *self).await?;
            }
            for (run_id, d) in &s.runs {
                sqlx::query(
                    "UPDATE runs SET events = events + $2, input_tokens = input_tokens + $3, \
                     output_tokens = output_tokens + $4, cost_nanocents = cost_nanocents + $5 WHERE id = $1",
                )
                .bind(run_id)
                .bind(d.events)
                .bind(d.input_tokens)
                .bind(d.output_tokens)
                .bind(d.cost)
                .execute(&mut *self)
                .await?;
            }
            self.add_row_counts(&rows).await?;
            Ok(())
        }
    }
}
