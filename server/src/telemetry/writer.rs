//! The telemetry writer: one task that commits ingested batches in groups.
//!
//! Every ingest request hands its [`Batch`] to the writer and waits: it is acknowledged
//! (the OTLP response, the events' ids) only once the group holding it has committed.
//! Grouping is what makes ingest fast: one transaction (one fsync) for all the requests
//! that arrived while the previous group was being written. If a group fails, each of its
//! requests is retried alone, so one bad request cannot fail the others.
//!
//! Spans are stored once per (trace_id, span_id) and events once per (run_id, id): a
//! resent request (an exporter retry, a node re-pushing) adds nothing. Summaries count
//! only what was actually stored.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use roost_proto::{ApiError, ErrorReason};
use tokio::sync::{mpsc, oneshot};
use tracing::{error, warn};

use super::{
    announce::{AnnounceTx, LiveFeed, LiveIds},
    message_texts::{Said, TextsTx as _, pack_refs},
    rows::{Batch, EventRow, LogRow, Message, SpanRow},
    search::{self, SearchTx},
    stats::{Counts, IngestStats},
    summaries::{Dialect, Summaries, SummaryTx},
    trace_sessions::{TraceSession, TraceSessionTx, TraceState},
};
use crate::{
    Error, Result,
    store::{BeginWrite, Store, impl_for_connections, on_writer},
    time::now_ms,
};

/// Requests per group at most.
const MAX_JOBS: usize = 64;
/// Rows per group at most (a group stops growing once past it).
const MAX_ROWS: usize = 50_000;
/// Where a message came from (the columns it shares with its span or log record).
#[derive(Clone, Copy)]
struct MessageOrigin<'a> {
    time_ns: i64,
    session_id: Option<&'a str>,
    trace_id: Option<&'a str>,
    /// The trace's number, when it has one (migration 0029).
    trace_seq: Option<i64>,
    span_id: Option<&'a str>,
    source: &'static str,
    model: Option<&'a str>,
    service: &'a str,
}

/// Rows per INSERT statement (up to 30 parameters each stays under SQLite's 32,766).
const ROWS_PER_INSERT: usize = 1_000;
/// Traces per statement drawing their numbers (11 parameters each).
const TRACES_PER_STATEMENT: usize = 2_000;
/// Requests waiting for the writer before ingest calls wait too (backpressure).
const QUEUE: usize = 256;

/// A request to push upstream later (daemon role), stored with the batch.
#[derive(Debug, Clone)]
pub struct OutboxItem {
    /// What the payload is ("otlp_traces", "run_events", ...).
    pub kind: &'static str,
    /// The request, protobuf-encoded.
    pub payload: Vec<u8>,
}

/// How far a node's pushed items have been applied (central role).
#[derive(Debug, Clone)]
pub struct NodeCursor {
    /// The node.
    pub node_id: String,
    /// Its highest item applied with this batch.
    pub applied_through: i64,
}

/// What writing a batch stored.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Spans stored (not counting ones already there).
    pub spans: usize,
    /// Which: indices into the batch's spans.
    pub new_spans: Vec<usize>,
    /// For each event of the batch, in order: whether it was new.
    pub new_events: Vec<bool>,
    /// The store ids of what was stored, for other replicas' streams (PostgreSQL only).
    pub ids: LiveIds,
    /// The batch as written, when it differs from the one given: some of its spans and log
    /// records took their trace's session ([`super::trace_sessions`]). `new_spans` and
    /// `new_events` index into it alike.
    pub rewritten: Option<Arc<Batch>>,
}

struct Job {
    batch: Arc<Batch>,
    outbox: Option<OutboxItem>,
    cursor: Option<NodeCursor>,
    ack: oneshot::Sender<Result<Written, ApiError>>,
}

impl Job {
    fn rows(&self) -> usize {
        let b = &self.batch;
        b.spans.len() + b.logs.len() + b.metrics.len() + b.events.len() + b.runs.len() + b.scores.len() + 1
    }
}

/// The handle batches are written through.
#[derive(Clone)]
pub struct Writer {
    jobs: mpsc::Sender<Job>,
    live: Arc<dyn LiveFeed>,
    stats: Arc<IngestStats>,
}

impl Writer {
    /// Starts the writer task; it ends after writing what is queued once every handle is
    /// dropped. What is committed is published on `live`; with `search`, it is indexed for
    /// full-text search too ([`search`]: only while content capture is on).
    pub fn start(store: Store, live: Arc<dyn LiveFeed>, search: bool) -> (Self, tokio::task::JoinHandle<()>) {
        let (jobs, rx) = mpsc::channel(QUEUE);
        let origin = live.origin().to_owned();
        (Self { jobs, live, stats: Arc::default() }, tokio::spawn(write_loop(store, rx, origin, search)))
    }

    /// Writes a batch (with an outbox item or a node cursor, if given) and returns once it
    /// is committed, after publishing what it stored on the live streams (in the caller's
    /// task, so the writer never spends its time on them).
    pub async fn write(
        &self,
        batch: Batch,
        outbox: Option<OutboxItem>,
        cursor: Option<NodeCursor>,
    ) -> Result<Written, ApiError> {
        if batch.is_empty() && outbox.is_none() && cursor.is_none() {
            return Ok(Written::default());
        }
        let batch = Arc::new(batch);
        let written = self.submit(batch.clone(), outbox, cursor).await?;
        self.committed(&batch, &written);
        Ok(written)
    }

    /// Publishes what a committed batch stored on the live streams and counts it: for
    /// batches this writer wrote, and for those written in another transaction (hosted
    /// turns' events, committed with their turns).
    pub fn committed(&self, batch: &Batch, written: &Written) {
        let batch = written.rewritten.as_deref().unwrap_or(batch);
        self.live.publish(batch, &written.new_spans, &written.new_events);
        self.live.remember_own(&written.ids);
        self.stats.record(Counts {
            spans: written.spans as u64,
            logs: batch.logs.len() as u64,
            metric_points: batch.metrics.len() as u64,
            events: written.new_events.iter().filter(|new| **new).count() as u64,
        });
    }

    /// What names this server's rows in `roost_live` notices ([`LiveFeed::origin`]).
    pub fn origin(&self) -> &str {
        self.live.origin()
    }

    /// What was stored through this writer.
    pub fn stats(&self) -> &IngestStats {
        &self.stats
    }

    /// Requests waiting for the writer (the ingest health check's lag).
    pub fn backlog(&self) -> (usize, usize) {
        (self.jobs.max_capacity() - self.jobs.capacity(), self.jobs.max_capacity())
    }

    /// Returns once everything handed to the writer before this call is committed.
    pub async fn flush(&self) {
        let _ = self.submit(Arc::default(), None, None).await;
    }

    async fn submit(
        &self,
        batch: Arc<Batch>,
        outbox: Option<OutboxItem>,
        cursor: Option<NodeCursor>,
    ) -> Result<Written, ApiError> {
        let (ack, done) = oneshot::channel();
        let stopped = || ApiError::new(ErrorReason::Unavailable, "roost is shutting down; retry");
        self.jobs.send(Job { batch, outbox, cursor, ack }).await.map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }
}

/// What an insert of spans stored: which were new, and their store ids (PostgreSQL only).
pub(super) struct InsertedSpans {
    new: NewSpans,
    ids: Vec<i64>,
}

/// Which spans of an insert were new.
pub(super) enum NewSpans {
    /// Every one (the common case: no set to build).
    All,
    /// These (trace_id, span_id) keys.
    Some(HashSet<(String, String)>),
}

/// Resource ids already in the store, by hash (only ids of committed rows are kept).
type ResourceCache = HashMap<String, i64>;

async fn write_loop(store: Store, mut jobs: mpsc::Receiver<Job>, origin: String, search: bool) {
    let mut cache = ResourceCache::new();
    while let Some(first) = jobs.recv().await {
        let mut rows = first.rows();
        let mut group = vec![first];
        while group.len() < MAX_JOBS && rows < MAX_ROWS {
            match jobs.try_recv() {
                Ok(job) => {
                    rows += job.rows();
                    group.push(job);
                }
                Err(_) => break,
            }
        }
        match write_group(&store, &group, &mut cache, &origin, search).await {
            Ok(written) => {
                for (job, written) in group.into_iter().zip(written) {
                    let _ = job.ack.send(Ok(written));
                }
            }
            Err(err) if group.len() > 1 => {
                warn!(error = %err, requests = group.len(), "ingest group failed; writing its requests one by one");
                for job in group {
                    let result = write_group(&store, std::slice::from_ref(&job), &mut cache, &origin, search).await;
                    let _ = job.ack.send(result.map(|mut w| w.remove(0)).map_err(|e| failure(&e)));
                }
            }
            Err(err) => {
                for job in group {
                    let _ = job.ack.send(Err(failure(&err)));
                }
            }
        }
    }
}

fn failure(err: &Error) -> ApiError {
    error!(error = %err, "ingest write failed");
    err.to_api()
}

/// One transaction for a group of requests; on PostgreSQL it also announces what it
/// stored to the other replicas (through [`AnnounceTx`]).
async fn write_group(
    store: &Store,
    group: &[Job],
    cache: &mut ResourceCache,
    origin: &str,
    search: bool,
) -> Result<Vec<Written>> {
    let now_ns = now_ms() * 1_000_000;
    let (written, new_resources) = on_writer!(store, |pool| {
        let mut tx = pool.begin_volume(store.durability()).await?;
        let mut summaries = Summaries::default();
        let mut new_resources = Vec::new();
        let mut written = Vec::with_capacity(group.len());
        for job in group {
            let ids = tx.resource_ids(&job.batch, cache, &mut new_resources, now_ns).await?;
            written.push(tx.write_batch(&job.batch, &ids, &mut summaries, search).await?);
            if let Some(item) = &job.outbox {
                tx.insert_outbox(item, now_ns).await?;
            }
            if let Some(cursor) = &job.cursor {
                tx.advance_cursor(cursor).await?;
            }
        }
        tx.apply_summaries(&summaries).await?;
        tx.announce(origin, written.iter().map(|w| &w.ids)).await?;
        tx.commit().await?;
        Ok::<_, Error>((written, new_resources))
    })?;
    cache.extend(new_resources);
    Ok(written)
}

/// Row statements inside the write transaction (also the turn recorder's, for hosted
/// turns' events: see [`super::turns`]).
pub(super) trait IngestTx {
    /// The store ids of a batch's resources, inserting new ones.
    async fn resource_ids(
        &mut self,
        batch: &Batch,
        cache: &ResourceCache,
        new: &mut Vec<(String, i64)>,
        now_ns: i64,
    ) -> Result<Vec<i64>>;
    /// Every row of the batch, and with `search` its search documents; counts what was
    /// stored into `summaries`.
    async fn write_batch(
        &mut self,
        batch: &Batch,
        resource_ids: &[i64],
        summaries: &mut Summaries,
        search: bool,
    ) -> Result<Written>;
    /// The numbers (`traces.seq`) and stored sessions of the traces of `spans`, drawing a
    /// number for each trace not seen before (its summary row, filled in by the summaries
    /// at the end of the transaction, is inserted now to hold it). Their rows stay locked
    /// until the transaction ends on PostgreSQL.
    async fn trace_seqs(&mut self, spans: &[&SpanRow]) -> Result<HashMap<String, TraceState>>;
    /// Numbers the log records and messages that arrived before any span of these newly
    /// numbered traces (stored with no number, in the small unnumbered indexes); returns
    /// the traces some log record waited for.
    async fn number_waiting(&mut self, trace_ids: &[String]) -> Result<HashSet<String>>;
    /// Spans of `batch` not stored before (`seqs`: their traces' numbers); returns which
    /// were new.
    async fn insert_spans(
        &mut self,
        spans: &[&SpanRow],
        refs: &[Option<&[u8]>],
        seqs: &HashMap<&str, i64>,
        batch: &Batch,
        resource_ids: &[i64],
    ) -> Result<InsertedSpans>;
    /// Events not stored before; returns the (run_id, id) of the new ones, with their seq.
    async fn insert_events(&mut self, events: &[EventRow], node_id: &str) -> Result<HashMap<(String, String), i64>>;
    /// Stores an outbox item.
    async fn insert_outbox(&mut self, item: &OutboxItem, now_ns: i64) -> Result<()>;
    /// Records how far a node's items are applied.
    async fn advance_cursor(&mut self, cursor: &NodeCursor) -> Result<()>;
    /// What a cumulative usage series grew by since its last point (all of `value` for a
    /// new series or a restarted one), remembering `value` as its last.
    async fn cumulative_growth(&mut self, series: &str, start_ns: i64, value: f64) -> Result<f64>;
}

impl_for_connections! {
    impl IngestTx {
        async fn resource_ids(
            &mut self,
            batch: &Batch,
            cache: &ResourceCache,
            new: &mut Vec<(String, i64)>,
            now_ns: i64,
        ) -> Result<Vec<i64>> {
            let mut ids = Vec::with_capacity(batch.resources.len());
            for resource in &batch.resources {
                let known = cache.get(&resource.hash).copied().or_else(|| new.iter().find(|(h, _)| *h == resource.hash).map(|(_, id)| *id));
                if let Some(id) = known {
                    ids.push(id);
                    continue;
                }
                sqlx::query(
                    "INSERT INTO resources (hash, service, attributes, first_ns) VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING",
                )
                .bind(&resource.hash)
                .bind(&resource.service)
                .bind(&resource.attributes)
                .bind(now_ns)
                .execute(&mut *self)
                .await?;
                let id: i64 = sqlx::query_scalar("SELECT id FROM resources WHERE hash = $1")
                    .bind(&resource.hash)
                    .fetch_one(&mut *self)
                    .await?;
                new.push((resource.hash.clone(), id));
                ids.push(id);
            }
            Ok(ids)
        }

        async fn write_batch(
            &mut self,
            batch: &Batch,
            resource_ids: &[i64],
            summaries: &mut Summaries,
            search: bool,
        ) -> Result<Written> {
            let service = |index: usize| batch.resources.get(index).map_or("unknown_service", |r| r.service.as_str());
            let mut written = Written::default();

            // Spans: the first copy of each key within the batch, then whatever the store
            // did not have.
            let mut seen = HashSet::with_capacity(batch.spans.len());
            let unique: Vec<usize> = (0..batch.spans.len())
                .filter(|&i| seen.insert((batch.spans[i].trace_id.as_str(), batch.spans[i].span_id.as_str())))
                .collect();
            let mut traces = self.trace_seqs(&unique.iter().map(|&i| &batch.spans[i]).collect::<Vec<_>>()).await?;
            // Log records are numbered by their trace when it has one already (in this batch
            // or stored); the others wait unnumbered (see `number_waiting`).
            let unknown: Vec<String> = batch
                .logs
                .iter()
                .filter_map(|log| log.trace_id.as_ref())
                .filter(|id| !traces.contains_key(*id))
                .collect::<HashSet<_>>()
                .into_iter()
                .cloned()
                .collect();
            if !unknown.is_empty() {
                traces.extend(self.stored_traces(&unknown).await?.into_iter().map(|(id, (seq, stored))| {
                    (id, TraceState { seq, stored, new: false, waited: false })
                }));
            }
            // Each trace's session, on every item of it (the batch rewritten if some lack it).
            let (decided, rewritten) = self.decide_sessions(batch, &traces, summaries).await?;
            let rewritten = rewritten.map(Arc::new);
            let batch: &Batch = rewritten.as_deref().unwrap_or(batch);
            written.rewritten = rewritten.clone();
            let seqs: HashMap<&str, i64> = traces.iter().map(|(id, t)| (id.as_str(), t.seq)).collect();
            // Every message's text, stored once by content (`message_texts`): the spans'
            // whole exchanges and the log records' messages.
            let span_keys: HashMap<usize, Vec<[u8; 16]>> = unique
                .iter()
                .filter(|&&i| !batch.spans[i].messages.is_empty())
                .map(|&i| (i, batch.spans[i].messages.iter().map(Message::key).collect()))
                .collect();
            let log_keys: Vec<Vec<[u8; 16]>> = batch.logs.iter().map(|log| log.messages.iter().map(Message::key).collect()).collect();
            let said: Vec<Said<'_>> = span_keys
                .iter()
                .flat_map(|(&i, keys)| {
                    let span = &batch.spans[i];
                    keys.iter().zip(&span.messages).map(|(key, message)| Said { key: *key, message, time_ns: span.start_ns })
                })
                .chain(batch.logs.iter().zip(&log_keys).flat_map(|(log, keys)| {
                    keys.iter().zip(&log.messages).map(|(key, message)| Said { key: *key, message, time_ns: log.time_ns })
                }))
                .collect();
            let text_ids = if said.is_empty() { HashMap::new() } else { self.intern_texts(&said).await? };
            let text_id = |key: &[u8; 16]| text_ids.get(key).copied().unwrap_or_default();
            let refs: HashMap<usize, Vec<u8>> = span_keys
                .iter()
                .map(|(&i, keys)| (i, pack_refs(batch.spans[i].new_from, &keys.iter().map(text_id).collect::<Vec<_>>())))
                .collect();
            let mut stored = Vec::with_capacity(unique.len());
            for chunk in unique.chunks(ROWS_PER_INSERT) {
                let rows: Vec<&SpanRow> = chunk.iter().map(|&i| &batch.spans[i]).collect();
                let chunk_refs: Vec<Option<&[u8]>> = chunk.iter().map(|i| refs.get(i).map(Vec::as_slice)).collect();
                let inserted = self.insert_spans(&rows, &chunk_refs, &seqs, batch, resource_ids).await?;
                written.ids.spans.extend(inserted.ids);
                match inserted.new {
                    NewSpans::All => stored.extend_from_slice(chunk),
                    NewSpans::Some(new) => stored.extend(chunk.iter().filter(|&&i| {
                        let span = &batch.spans[i];
                        new.contains(&(span.trace_id.clone(), span.span_id.clone()))
                    })),
                }
            }
            written.spans = stored.len();
            let stored_rows: Vec<&SpanRow> = stored.iter().map(|&i| &batch.spans[i]).collect();
            written.new_spans = stored;
            let stored = stored_rows;
            let span_events: Vec<_> = stored.iter().flat_map(|s| s.events.iter().map(move |e| (*s, e))).collect();
            for chunk in span_events.chunks(ROWS_PER_INSERT) {
                let mut q =
                    sqlx::QueryBuilder::new("INSERT INTO span_events (trace_id, span_id, time_ns, name, attributes, trace_seq) ");
                q.push_values(chunk, |mut row, (span, event)| {
                    row.push_bind(&span.trace_id).push_bind(&span.span_id).push_bind(event.time_ns).push_bind(&event.name)
                        .push_bind(&event.attributes).push_bind(seqs.get(span.trace_id.as_str()).copied().unwrap_or_default());
                });
                q.build().execute(&mut *self).await?;
            }
            for span in &stored {
                summaries.span(span, service(span.resource));
            }
            for (trace_id, session) in &decided.changed {
                if !summaries.trace_session(trace_id, session) {
                    self.set_trace_session(trace_id, session).await?;
                }
            }
            let log_seqs: Vec<Option<i64>> =
                batch.logs.iter().map(|log| log.trace_id.as_deref().and_then(|id| seqs.get(id)).copied()).collect();
            let span_messages = written.new_spans.iter().flat_map(|&i| {
                let span = &batch.spans[i];
                let keys = span_keys.get(&i).map(Vec::as_slice).unwrap_or_default();
                let origin = MessageOrigin {
                    time_ns: span.start_ns,
                    session_id: span.gen_ai.session_id.as_deref(),
                    trace_id: Some(&span.trace_id),
                    trace_seq: seqs.get(span.trace_id.as_str()).copied(),
                    span_id: Some(&span.span_id),
                    source: "span",
                    model: span.gen_ai.model(),
                    service: service(span.resource),
                };
                keys.get(span.new_from..).unwrap_or_default().iter().enumerate().map(move |(seq, key)| (origin, seq, key))
            });
            let log_messages = batch.logs.iter().zip(&log_seqs).zip(&log_keys).flat_map(|((log, trace_seq), keys)| {
                let origin = MessageOrigin {
                    time_ns: log.time_ns,
                    session_id: log.gen_ai.session_id.as_deref(),
                    trace_id: log.trace_id.as_deref(),
                    trace_seq: *trace_seq,
                    span_id: log.span_id.as_deref(),
                    source: "log",
                    model: log.gen_ai.model(),
                    service: service(log.resource),
                };
                keys.iter().enumerate().map(move |(seq, key)| (origin, seq, key))
            });
            let all_messages: Vec<_> = span_messages.chain(log_messages).collect();
            for chunk in all_messages.chunks(ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO messages (time_ns, seq, session_id, trace_id, span_id, source, text_id, \
                     model, service, node_id, trace_seq) ",
                );
                q.push_values(chunk, |mut row, (origin, seq, key)| {
                    row.push_bind(origin.time_ns).push_bind(*seq as i64).push_bind(origin.session_id).push_bind(origin.trace_id)
                        .push_bind(origin.span_id).push_bind(origin.source).push_bind(text_id(key))
                        .push_bind(origin.model).push_bind(origin.service).push_bind(&batch.node_id)
                        .push_bind(origin.trace_seq);
                });
                q.build().execute(&mut *self).await?;
            }

            let numbered_logs: Vec<(&LogRow, Option<i64>)> = batch.logs.iter().zip(log_seqs.iter().copied()).collect();
            for chunk in numbered_logs.chunks(ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO logs (time_ns, observed_ns, severity_number, severity_text, body, service, resource_id, \
                     trace_id, span_id, session_id, event_name, agent_id, model, input_tokens, output_tokens, \
                     cache_read_tokens, cache_write_tokens, cost_nanocents, tool_name, messages, attributes, node_id, trace_seq) ",
                );
                q.push_values(chunk, |mut row, (log, trace_seq)| {
                    let g = &log.gen_ai;
                    row.push_bind(log.time_ns).push_bind(log.observed_ns).push_bind(log.severity_number)
                        .push_bind(&log.severity_text).push_bind(&log.body).push_bind(service(log.resource))
                        .push_bind(resource_ids.get(log.resource).copied().unwrap_or_default()).push_bind(&log.trace_id)
                        .push_bind(&log.span_id).push_bind(&g.session_id).push_bind(&log.event_name).push_bind(&g.agent_id)
                        .push_bind(g.model()).push_bind(g.input_tokens).push_bind(g.output_tokens)
                        .push_bind(g.cache_read_tokens).push_bind(g.cache_write_tokens).push_bind(g.cost_nanocents)
                        .push_bind(&g.tool_name).push_bind(i64::from(log.is_message)).push_bind(&log.attributes)
                        .push_bind(&batch.node_id).push_bind(trace_seq);
                });
                if <Self as AnnounceTx>::FANS_OUT {
                    q.push(" RETURNING id");
                    written.ids.logs.extend(q.build_query_scalar::<i64>().fetch_all(&mut *self).await?);
                } else {
                    q.build().execute(&mut *self).await?;
                }
            }
            for log in &batch.logs {
                summaries.log(log, service(log.resource));
            }

            for chunk in batch.metrics.chunks(ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO metric_points (name, kind, unit, service, resource_id, time_ns, start_ns, value, count, \
                     detail, attributes, session_id, node_id) ",
                );
                q.push_values(chunk, |mut row, point| {
                    row.push_bind(&point.name).push_bind(point.kind).push_bind(&point.unit).push_bind(service(point.resource))
                        .push_bind(resource_ids.get(point.resource).copied().unwrap_or_default()).push_bind(point.time_ns)
                        .push_bind(point.start_ns).push_bind(point.value).push_bind(point.count).push_bind(&point.detail)
                        .push_bind(&point.attributes).push_bind(&point.session_id).push_bind(&batch.node_id);
                });
                q.build().execute(&mut *self).await?;
            }
            for point in &batch.metrics {
                summaries.metric(point, service(point.resource));
                if let Some(usage) = &point.usage {
                    let amount = if usage.cumulative {
                        let resource = batch.resources.get(point.resource).map_or("", |r| r.hash.as_str());
                        let series = format!("{resource}|{}|{}", point.name, point.attributes);
                        self.cumulative_growth(&series, point.start_ns, usage.amount).await?
                    } else {
                        usage.amount
                    };
                    summaries.metric_usage(point.time_ns, service(point.resource), usage, amount);
                }
            }

            for run in &batch.runs {
                let inserted = sqlx::query(
                    "INSERT INTO runs (id, runtime, session_id, agent_id, metadata, status, started_ns, node_id) \
                     VALUES ($1, $2, $3, $4, $5, 'running', $6, $7) ON CONFLICT (id) DO NOTHING",
                )
                .bind(&run.id)
                .bind(&run.runtime)
                .bind(&run.session_id)
                .bind(&run.agent_id)
                .bind(&run.metadata)
                .bind(run.started_ns)
                .bind(&batch.node_id)
                .execute(&mut *self)
                .await?
                .rows_affected();
                if inserted > 0 {
                    summaries.run(run.started_ns);
                }
            }

            let mut new_events = HashMap::new();
            for chunk in batch.events.chunks(ROWS_PER_INSERT) {
                new_events.extend(self.insert_events(chunk, &batch.node_id).await?);
            }
            // Within one batch, only the first copy of an id counts as new.
            let mut counted = HashSet::new();
            written.new_events = batch
                .events
                .iter()
                .map(|e| {
                    let key = (e.run_id.clone(), e.id.clone());
                    let seq = new_events.get(&key).copied();
                    let new = seq.is_some() && counted.insert(key);
                    if new {
                        summaries.event(e);
                        if <Self as AnnounceTx>::FANS_OUT {
                            written.ids.events.extend(seq);
                        }
                    }
                    new
                })
                .collect();

            if search {
                self.insert_search_docs(&search::docs(batch, &stored, &written.new_events)).await?;
            }

            for end in &batch.run_ends {
                sqlx::query("UPDATE runs SET status = $2, ended_ns = $3 WHERE id = $1 AND ended_ns IS NULL")
                    .bind(&end.run_id)
                    .bind(&end.status)
                    .bind(end.ended_ns)
                    .execute(&mut *self)
                    .await?;
            }

            // Scores: one row per id, the last given winning (in the batch, and over the
            // stored one: a score given again under its id replaces it).
            let mut last = HashMap::with_capacity(batch.scores.len());
            for (i, score) in batch.scores.iter().enumerate() {
                last.insert(score.id.as_str(), i);
            }
            let scores: Vec<_> =
                batch.scores.iter().enumerate().filter(|(i, s)| last.get(s.id.as_str()) == Some(i)).map(|(_, s)| s).collect();
            for chunk in scores.chunks(ROWS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO scores (id, name, kind, value, label, comment, source, target, trace_id, span_id, \
                     session_id, turn_id, model, agent_id, service, evaluator_id, author, time_ns, node_id) ",
                );
                q.push_values(chunk, |mut row, s| {
                    row.push_bind(&s.id).push_bind(&s.name).push_bind(s.kind).push_bind(s.value).push_bind(&s.label)
                        .push_bind(&s.comment).push_bind(&s.source).push_bind(s.target).push_bind(&s.trace_id)
                        .push_bind(&s.span_id).push_bind(&s.session_id).push_bind(&s.turn_id).push_bind(&s.model)
                        .push_bind(&s.agent_id).push_bind(&s.service).push_bind(&s.evaluator_id).push_bind(&s.author)
                        .push_bind(s.time_ns).push_bind(&batch.node_id);
                });
                q.push(
                    " ON CONFLICT (id) DO UPDATE SET name = excluded.name, kind = excluded.kind, value = excluded.value, \
                     label = excluded.label, comment = excluded.comment, source = excluded.source, \
                     target = excluded.target, trace_id = excluded.trace_id, span_id = excluded.span_id, \
                     session_id = excluded.session_id, turn_id = excluded.turn_id, model = excluded.model, \
                     agent_id = excluded.agent_id, service = excluded.service, evaluator_id = excluded.evaluator_id, \
                     author = excluded.author, time_ns = excluded.time_ns, node_id = excluded.node_id",
                );
                q.build().execute(&mut *self).await?;
            }
            Ok(written)
        }

        async fn trace_seqs(&mut self, spans: &[&SpanRow]) -> Result<HashMap<String, TraceState>> {
            // Each trace once, with the times its spans here cover.
            let mut times: HashMap<&str, (i64, i64)> = HashMap::new();
            for span in spans {
                let (start, end) = times.entry(&span.trace_id).or_insert((span.start_ns, span.end_ns));
                *start = (*start).min(span.start_ns);
                *end = (*end).max(span.end_ns);
            }
            let mut traces: Vec<(&str, (i64, i64))> = times.into_iter().collect();
            traces.sort_unstable();
            let mut seqs = HashMap::with_capacity(traces.len());
            for chunk in traces.chunks(TRACES_PER_STATEMENT) {
                // New traces get their row (and so their number) now; the summaries fill it
                // in. Its times are already this batch's, so the summaries' MIN/MAX keep them.
                let next: i64 = if <Self as Dialect>::SEQUENCES {
                    0
                } else {
                    sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM traces").fetch_one(&mut *self).await?
                };
                let mut q = sqlx::QueryBuilder::new(if <Self as Dialect>::SEQUENCES {
                    "INSERT INTO traces (trace_id, start_ns, end_ns, spans, errors, root_name, service, session_id, \
                     input_tokens, output_tokens, cost_nanocents) "
                } else {
                    "INSERT INTO traces (trace_id, start_ns, end_ns, spans, errors, root_name, service, session_id, \
                     input_tokens, output_tokens, cost_nanocents, seq) "
                });
                q.push_values(chunk.iter().enumerate(), |mut row, (i, (trace_id, (start, end)))| {
                    row.push_bind(*trace_id).push_bind(*start).push_bind(*end).push_bind(0_i64).push_bind(0_i64)
                        .push_bind("").push_bind("").push_bind("").push_bind(0_i64).push_bind(0_i64).push_bind(0_i64);
                    if !<Self as Dialect>::SEQUENCES {
                        row.push_bind(next + i as i64);
                    }
                });
                // Only the rows inserted come back: the new traces.
                q.push(" ON CONFLICT (trace_id) DO NOTHING RETURNING trace_id, seq");
                let drawn: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *self).await?;
                let waited = if drawn.is_empty() {
                    HashSet::new()
                } else {
                    self.number_waiting(&drawn.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>()).await?
                };
                seqs.extend(drawn.into_iter().map(|(id, seq)| {
                    let waited = waited.contains(&id);
                    (id, TraceState { seq, stored: TraceSession::default(), new: true, waited })
                }));
                // Traces seen before: their numbers and sessions are stored.
                let known: Vec<String> =
                    chunk.iter().map(|(id, _)| *id).filter(|id| !seqs.contains_key(*id)).map(str::to_owned).collect();
                if !known.is_empty() {
                    seqs.extend(self.stored_traces(&known).await?.into_iter().map(|(id, (seq, stored))| {
                        (id, TraceState { seq, stored, new: false, waited: false })
                    }));
                }
            }
            Ok(seqs)
        }

        async fn number_waiting(&mut self, trace_ids: &[String]) -> Result<HashSet<String>> {
            // Usually nothing waits: one probe of each unnumbered index says so.
            let (logs, messages): (bool, bool) = sqlx::query_as(
                "SELECT EXISTS (SELECT 1 FROM logs WHERE trace_seq IS NULL AND trace_id IS NOT NULL), \
                        EXISTS (SELECT 1 FROM messages WHERE trace_seq IS NULL AND trace_id IS NOT NULL)",
            )
            .fetch_one(&mut *self)
            .await?;
            let mut waited = HashSet::new();
            for (table, waiting) in [("logs", logs), ("messages", messages)] {
                if !waiting {
                    continue;
                }
                for chunk in trace_ids.chunks(TRACES_PER_STATEMENT) {
                    let mut q = sqlx::QueryBuilder::new(format!(
                        "UPDATE {table} SET trace_seq = (SELECT seq FROM traces WHERE traces.trace_id = {table}.trace_id) \
                         WHERE trace_seq IS NULL AND trace_id IS NOT NULL AND trace_id IN ("
                    ));
                    let mut ids = q.separated(", ");
                    for trace_id in chunk {
                        ids.push_bind(trace_id);
                    }
                    q.push(")");
                    if table == "logs" {
                        q.push(" RETURNING trace_id");
                        waited.extend(q.build_query_scalar::<String>().fetch_all(&mut *self).await?);
                    } else {
                        q.build().execute(&mut *self).await?;
                    }
                }
            }
            Ok(waited)
        }

        async fn insert_spans(
            &mut self,
            spans: &[&SpanRow],
            refs: &[Option<&[u8]>],
            seqs: &HashMap<&str, i64>,
            batch: &Batch,
            resource_ids: &[i64],
        ) -> Result<InsertedSpans> {
            let service = |index: usize| batch.resources.get(index).map_or("unknown_service", |r| r.service.as_str());
            let build = || {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, status_code, \
                     status_message, service, resource_id, scope, session_id, agent_id, operation, gen_ai_system, \
                     request_model, response_model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, \
                     tool_name, cost_nanocents, attributes, packed_attributes, node_id, agent_instance, trace_seq, message_refs) ",
                );
                q.push_values(spans.iter().zip(refs), |mut row, (span, refs)| {
                    let g = &span.gen_ai;
                    row.push_bind(&span.trace_id).push_bind(&span.span_id).push_bind(&span.parent_span_id).push_bind(&span.name)
                        .push_bind(span.kind).push_bind(span.start_ns).push_bind(span.end_ns).push_bind(span.status_code)
                        .push_bind(&span.status_message).push_bind(service(span.resource)).push_bind(resource_ids.get(span.resource).copied().unwrap_or_default())
                        .push_bind(&span.scope).push_bind(&g.session_id).push_bind(&g.agent_id).push_bind(&g.operation)
                        .push_bind(&g.system).push_bind(&g.request_model).push_bind(&g.response_model).push_bind(g.input_tokens)
                        .push_bind(g.output_tokens).push_bind(g.cache_read_tokens).push_bind(g.cache_write_tokens)
                        .push_bind(&g.tool_name).push_bind(g.cost_nanocents).push_bind("").push_bind(&span.attributes).push_bind(&batch.node_id)
                        .push_bind(&span.agent_instance).push_bind(seqs.get(span.trace_id.as_str()).copied().unwrap_or_default())
                        .push_bind(*refs);
                });
                q.push(" ON CONFLICT (trace_seq, span_id) DO NOTHING");
                q
            };
            // Usually every span is new: insert without RETURNING (no rows to send back;
            // only their ids where other replicas are told of them), and only when the
            // count says some were already stored (an exporter's retry) ask which rows this
            // statement added. No savepoint: SQLite would copy every page the insert
            // touches into a sub-journal first (a tenth of the writer's time).
            let (inserted, ids) = if <Self as AnnounceTx>::FANS_OUT {
                let mut q = build();
                q.push(" RETURNING id");
                let ids: Vec<i64> = q.build_query_scalar().fetch_all(&mut *self).await?;
                (ids.len(), ids)
            } else {
                (build().build().execute(&mut *self).await?.rows_affected() as usize, Vec::new())
            };
            if inserted == spans.len() {
                return Ok(InsertedSpans { new: NewSpans::All, ids });
            }
            let rows: Vec<(i64, String, String)> = match (ids.iter().min(), ids.iter().max()) {
                // The ids RETURNING gave (PostgreSQL's sequence may leave gaps: keep only those).
                (Some(first), Some(last)) => {
                    let added: HashSet<i64> = ids.iter().copied().collect();
                    let rows: Vec<(i64, String, String)> =
                        sqlx::query_as("SELECT id, trace_id, span_id FROM spans WHERE id BETWEEN $1 AND $2")
                            .bind(first)
                            .bind(last)
                            .fetch_all(&mut *self)
                            .await?;
                    rows.into_iter().filter(|row| added.contains(&row.0)).collect()
                }
                // SQLite gives the rows of one INSERT consecutive rowids after the largest
                // (one writer, inside its transaction): the last `inserted` of the table.
                _ if !<Self as AnnounceTx>::FANS_OUT && inserted > 0 => {
                    sqlx::query_as("SELECT id, trace_id, span_id FROM spans WHERE id > (SELECT MAX(id) FROM spans) - $1")
                        .bind(inserted as i64)
                        .fetch_all(&mut *self)
                        .await?
                }
                _ => Vec::new(),
            };
            Ok(InsertedSpans { new: NewSpans::Some(rows.into_iter().map(|(_, t, s)| (t, s)).collect()), ids })
        }

        async fn insert_events(&mut self, events: &[EventRow], node_id: &str) -> Result<HashMap<(String, String), i64>> {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO events (run_id, id, ts_ns, event_type, session_id, agent_id, tool_name, model, role, \
                 input_tokens, output_tokens, cost_nanocents, data, node_id, agent_instance) ",
            );
            q.push_values(events, |mut row, e| {
                row.push_bind(&e.run_id).push_bind(&e.id).push_bind(e.ts_ns).push_bind(&e.event_type).push_bind(&e.session_id)
                    .push_bind(&e.agent_id).push_bind(&e.tool_name).push_bind(&e.model).push_bind(&e.role)
                    .push_bind(e.input_tokens).push_bind(e.output_tokens).push_bind(e.cost_nanocents).push_bind(&e.data)
                    .push_bind(node_id).push_bind(&e.agent_instance);
            });
            q.push(" ON CONFLICT (run_id, id) DO NOTHING RETURNING run_id, id, seq");
            let rows: Vec<(String, String, i64)> = q.build_query_as().fetch_all(&mut *self).await?;
            Ok(rows.into_iter().map(|(run, id, seq)| ((run, id), seq)).collect())
        }

        async fn insert_outbox(&mut self, item: &OutboxItem, now_ns: i64) -> Result<()> {
            sqlx::query("INSERT INTO outbox (kind, payload, created_ns) VALUES ($1, $2, $3)")
                .bind(item.kind)
                .bind(&item.payload)
                .bind(now_ns)
                .execute(&mut *self)
                .await?;
            Ok(())
        }

        async fn cumulative_growth(&mut self, series: &str, start_ns: i64, value: f64) -> Result<f64> {
            let last: Option<(i64, f64)> =
                sqlx::query_as("SELECT start_ns, value FROM metric_usage_series WHERE series = $1")
                    .bind(series)
                    .fetch_optional(&mut *self)
                    .await?;
            sqlx::query(
                "INSERT INTO metric_usage_series (series, start_ns, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (series) DO UPDATE SET start_ns = excluded.start_ns, value = excluded.value",
            )
            .bind(series)
            .bind(start_ns)
            .bind(value)
            .execute(&mut *self)
            .await?;
            Ok(match last {
                // The same series, grown (a resend of the same point adds nothing).
                Some((start, previous)) if start == start_ns && value >= previous => value - previous,
                // New, or restarted (a new start time, or a counter that went down).
                _ => value,
            })
        }

        async fn advance_cursor(&mut self, cursor: &NodeCursor) -> Result<()> {
            sqlx::query("UPDATE nodes SET applied_through = $2 WHERE node_id = $1 AND applied_through < $2")
                .bind(&cursor.node_id)
                .bind(cursor.applied_through)
                .execute(&mut *self)
                .await?;
            Ok(())
        }
    }
}
