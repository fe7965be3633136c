//! The observing half of roost: ingest of agent activity (OTLP traces, metrics and logs;
//! custom runs and events; pushes from other nodes) into the telemetry store.
//!
//! Requests are converted to rows in their own task and committed in groups by one
//! [`writer::Writer`]; a request is acknowledged only after its rows are committed. On a
//! node that pushes to an upstream roost (`roost daemon --upstream`), each request is also
//! stored in the outbox in the same transaction, so nothing acknowledged can miss the push.
//!
//! Before a request becomes rows, [`limits::Bounds`] makes every string storable (U+0000
//! replaced) and bounds its sizes as the OTel SDK would; the answer says what it changed.

pub use roost_proto::attribute_map;
pub mod agent_claims;
pub mod announce;
pub mod attributes;
pub mod labels;
pub mod latency;
pub mod limits;
pub mod message_texts;
pub mod messages;
pub mod otlp;
pub mod packed_attributes;
pub mod retention;
pub mod row_counts;
pub mod rows;
pub mod runs;
pub mod scores;
pub mod search;
pub mod service;
pub mod stats;
pub mod summaries;
pub mod trace_sessions;
pub mod turns;
pub mod varint;
pub mod writer;

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::{
    logs::v1::ExportLogsServiceRequest, metrics::v1::ExportMetricsServiceRequest, trace::v1::ExportTraceServiceRequest,
};
use prost::Message;
use roost_proto::ApiError;
use tokio::task::JoinHandle;

use crate::{billing::prices::PriceBook, callers::tokens::AgentIdentity, store::Store};
use announce::LiveFeed;
use limits::{Bounds, Limits};
use otlp::Stored;
use rows::Batch;
use writer::{OutboxItem, Writer, Written};

/// The ingest core, shared by the OTLP services, the ingest service and node push.
pub struct Telemetry {
    pub(crate) store: Store,
    pub(crate) writer: Writer,
    pub(crate) prices: PriceBook,
    /// What is kept of each request's strings and lists.
    pub(crate) limits: Limits,
    /// Whether ingested requests are also kept in the outbox for an upstream.
    outbox: bool,
    writer_task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Telemetry {
    /// Ingest into `store` under `limits`, pricing GenAI usage with `prices` and publishing
    /// what is stored on `live`; `outbox` keeps every request for a push upstream.
    pub fn new(store: Store, prices: PriceBook, limits: Limits, outbox: bool, live: Arc<dyn LiveFeed>) -> Arc<Self> {
        let (writer, task) = Writer::start(store.clone(), live, limits.capture_content);
        Arc::new(Self { store, writer, prices, limits, outbox, writer_task: std::sync::Mutex::new(Some(task)) })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Requests waiting for the writer, and how many may wait before ingest waits too.
    pub fn backlog(&self) -> (usize, usize) {
        self.writer.backlog()
    }

    /// What ingest stored since start and over the last minute.
    pub fn stats(&self) -> &stats::IngestStats {
        self.writer.stats()
    }

    /// The price book.
    pub fn prices(&self) -> &PriceBook {
        &self.prices
    }

    /// Writes a batch of local ingest (and the request for the outbox, when pushing).
    pub(crate) async fn ingest(
        &self,
        batch: Batch,
        kind: &'static str,
        request: &impl Message,
    ) -> Result<Written, ApiError> {
        let outbox = self.outbox.then(|| OutboxItem { kind, payload: request.encode_to_vec() });
        self.writer.write(batch, outbox, None).await
    }

    /// Stores an OTLP traces request (bounded first); the spans it rejected and what it cut.
    /// `attributed` is the hosted agent roost recorded the spans for (its model gateway's
    /// calls, its egress, its turns): they are attributed to that agent and counted as they
    /// say. What an agent's runtime sends with its own token goes through
    /// [`Telemetry::export_agent_traces`] instead.
    pub async fn export_traces(
        &self,
        request: ExportTraceServiceRequest,
        attributed: Option<String>,
    ) -> Result<Stored, ApiError> {
        self.store_traces(request, attributed, None).await
    }

    /// Stores an OTLP traces request `agent`'s runtime sent with its own token: the spans are
    /// the agent's, whatever they say, and their usage is self-reported
    /// ([`agent_claims`]).
    pub async fn export_agent_traces(
        &self,
        request: ExportTraceServiceRequest,
        agent: &AgentIdentity,
    ) -> Result<Stored, ApiError> {
        self.store_traces(request, Some(agent.instance_id.clone()), Some(agent)).await
    }

    async fn store_traces(
        &self,
        mut request: ExportTraceServiceRequest,
        attributed: Option<String>,
        claimed_by: Option<&AgentIdentity>,
    ) -> Result<Stored, ApiError> {
        let mut bounds = Bounds::new(&self.limits);
        bounds.traces(&mut request);
        if let Some(agent) = claimed_by {
            agent_claims::traces(&mut request, agent);
        }
        let (mut batch, rejected) = otlp::traces::convert(&request, &self.prices);
        bounds.keys(&mut batch);
        if let Some(agent) = attributed {
            batch.spans.iter_mut().for_each(|span| span.agent_instance.clone_from(&agent));
        }
        self.ingest(batch, "otlp_traces", &request).await?;
        self.stats().reject(stats::Counts { spans: rejected.count as u64, ..stats::Counts::default() });
        Ok(Stored { rejected, cuts: bounds.cuts() })
    }

    /// Stores an OTLP logs request (bounded first); the records it rejected and what it cut.
    pub async fn export_logs(&self, request: ExportLogsServiceRequest) -> Result<Stored, ApiError> {
        self.store_logs(request, None).await
    }

    /// Stores an OTLP logs request `agent`'s runtime sent with its own token: the records are
    /// the agent's, whatever they say, and their usage is self-reported ([`agent_claims`]).
    pub async fn export_agent_logs(
        &self,
        request: ExportLogsServiceRequest,
        agent: &AgentIdentity,
    ) -> Result<Stored, ApiError> {
        self.store_logs(request, Some(agent)).await
    }

    async fn store_logs(
        &self,
        mut request: ExportLogsServiceRequest,
        claimed_by: Option<&AgentIdentity>,
    ) -> Result<Stored, ApiError> {
        let mut bounds = Bounds::new(&self.limits);
        bounds.logs(&mut request);
        if let Some(agent) = claimed_by {
            agent_claims::logs(&mut request, agent);
        }
        let (mut batch, rejected) = otlp::logs::convert(&request, &self.prices);
        bounds.keys(&mut batch);
        self.ingest(batch, "otlp_logs", &request).await?;
        self.stats().reject(stats::Counts { logs: rejected.count as u64, ..stats::Counts::default() });
        Ok(Stored { rejected, cuts: bounds.cuts() })
    }

    /// Stores an OTLP metrics request (bounded first); the points it rejected and what it cut.
    pub async fn export_metrics(&self, request: ExportMetricsServiceRequest) -> Result<Stored, ApiError> {
        self.store_metrics(request, None).await
    }

    /// Stores an OTLP metrics request `agent`'s runtime sent with its own token: the points
    /// are the agent's, and their usage is never counted ([`agent_claims`]).
    pub async fn export_agent_metrics(
        &self,
        request: ExportMetricsServiceRequest,
        agent: &AgentIdentity,
    ) -> Result<Stored, ApiError> {
        self.store_metrics(request, Some(agent)).await
    }

    async fn store_metrics(
        &self,
        mut request: ExportMetricsServiceRequest,
        claimed_by: Option<&AgentIdentity>,
    ) -> Result<Stored, ApiError> {
        let mut bounds = Bounds::new(&self.limits);
        bounds.metrics(&mut request);
        if let Some(agent) = claimed_by {
            agent_claims::metrics(&mut request, agent);
        }
        let (mut batch, rejected) = otlp::metrics::convert(&request, &self.prices);
        bounds.keys(&mut batch);
        self.ingest(batch, "otlp_metrics", &request).await?;
        self.stats().reject(stats::Counts { metric_points: rejected.count as u64, ..stats::Counts::default() });
        Ok(Stored { rejected, cuts: bounds.cuts() })
    }

    /// Writes what is queued and stops the writer.
    pub async fn shutdown(&self) {
        self.writer.flush().await;
        let task = self.writer_task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            task.abort();
        }
    }
}
