//! `GET /metrics`: this process's metrics for Prometheus, through `SystemService.GetMetrics`.
//!
//! One registry per server (tests run several in one process, so nothing is global). Two
//! kinds of figures go into it:
//! - **Recorded as they happen**: requests and their latency (the HTTP adapters'
//!   [`RequestMetrics`](roost_kit::request_metrics::RequestMetrics)) and turns with their
//!   duration ([`turns::TurnMetrics`]). These are counters and histograms.
//! - **Sampled at the scrape**: what ingest stored and refused, the ingest and turn queues,
//!   agents by status, stream clients, the store, the updater, the process. Reading them
//!   costs a few in-memory reads, a file stat (SQLite) or one size query (PostgreSQL) and a
//!   ping, so a scrape every few seconds is cheap.
//!
//! Labels stay bounded: no instance, session or account ids. Queue depth per agent is
//! reported for the deepest [`TOP_QUEUES`] agents by rank (`rank="1"` is the deepest), so an
//! alert can fire on one agent backing up; which agent it is, the dashboard says.

mod process;
mod text;
pub mod turns;

use std::{fmt, sync::Arc};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, text::encode_registry},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::{Registry, Unit},
};
use roost_kit::request_metrics::RequestMetrics;
use roost_proto::v1::MetricsFormat;

use crate::{
    agents::{Hosting, instances::Status},
    build_info::BUILD,
    store::Store,
    streams::Live,
    telemetry::{Telemetry, stats::Counts},
    time::now_ms,
    update::Updater,
};

/// How many of the deepest agent queues are reported one by one.
pub const TOP_QUEUES: usize = 5;

/// What the scrape-time figures are read from.
pub struct Sources {
    /// The store (size, reachability).
    pub store: Store,
    /// Ingest (what it stored and refused, its backlog).
    pub telemetry: Arc<Telemetry>,
    /// Hosted agents (statuses, queues, turn metrics).
    pub hosting: Arc<Hosting>,
    /// Live streams (their clients).
    pub live: Arc<Live>,
    /// The self-updater.
    pub updater: Arc<Updater>,
}

/// The registry of one server and what it samples at each scrape.
pub struct Metrics {
    registry: Registry,
    sampled: Arc<Sampled>,
    sources: Sources,
    /// One scrape at a time, so a scrape encodes the sample it took.
    scrape: tokio::sync::Mutex<()>,
}

impl Metrics {
    /// A registry holding the request families, the hosting core's turn families and the
    /// sampled figures.
    pub fn new(sources: Sources, requests: &RequestMetrics) -> Self {
        let sampled = Arc::new(Sampled::default());
        let mut registry = Registry::default();
        {
            let roost = registry.sub_registry_with_prefix("roost");
            requests.register(roost);
            sources.hosting.turn_metrics().register(roost);
            roost.register_collector(Box::new(sampled.clone()));
        }
        registry.register_collector(Box::new(process::ProcessCollector { started_at_secs: now_ms() as f64 / 1000.0 }));
        Self { registry, sampled, sources, scrape: tokio::sync::Mutex::new(()) }
    }

    /// One scrape in `format`: its media type and text.
    pub async fn scrape(&self, format: MetricsFormat) -> (&'static str, String) {
        let _one = self.scrape.lock().await;
        let sample = Sample::take(&self.sources).await;
        *self.sampled.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = sample;
        let mut openmetrics = String::with_capacity(32 * 1024);
        // Writing to a String cannot fail; an encoder error would be a bug in a collector,
        // and a partial scrape is still better than none.
        if let Err(err) = encode_registry(&mut openmetrics, &self.registry) {
            tracing::warn!(error = %err, "encoding the metrics failed part way");
        }
        match format {
            MetricsFormat::Openmetrics => {
                openmetrics.push_str("# EOF\n");
                (text::OPENMETRICS, openmetrics)
            }
            MetricsFormat::Unspecified => (text::PROMETHEUS, text::to_prometheus(&openmetrics)),
        }
    }
}

/// The figures read at one scrape.
#[derive(Debug, Default)]
struct Sample {
    stored: Counts,
    rejected: Counts,
    /// Ingest requests waiting for the writer, and how many may wait.
    ingest_backlog: (usize, usize),
    agents: Vec<(&'static str, i64)>,
    queued_total: i64,
    /// The deepest queues, deepest first, at most [`TOP_QUEUES`].
    queued_top: Vec<i64>,
    stream_clients: Vec<(&'static str, i64)>,
    store_bytes: Option<i64>,
    store_up: bool,
    update: UpdateSample,
}

/// The updater's state, as numbers.
#[derive(Debug, Default)]
struct UpdateSample {
    available: bool,
    auto_install: bool,
    installing: bool,
    last_check_secs: Option<f64>,
    last_check_failed: bool,
}

/// Every status a hosted (not destroyed) agent can have, so each has a series even at zero.
const STATUSES: [Status; 6] =
    [Status::Provisioning, Status::Running, Status::Restarting, Status::Paused, Status::Suspended, Status::Failed];

impl Sample {
    async fn take(sources: &Sources) -> Self {
        let stats = sources.telemetry.stats();
        let agents = sources.hosting.agent_loads();
        let mut queues: Vec<i64> = agents.iter().map(|(_, queued)| *queued as i64).collect();
        queues.sort_unstable_by(|a, b| b.cmp(a));
        let agents_by_status = STATUSES
            .iter()
            .map(|status| (status.as_str(), agents.iter().filter(|(s, _)| s == status).count() as i64))
            .collect();
        let live = &sources.live;
        let state = sources.updater.state().await;
        let update = UpdateSample {
            available: sources.updater.newer_available(&state),
            auto_install: sources.updater.installs_unattended().await,
            installing: sources.updater.is_installing(),
            last_check_secs: state.last_check.as_ref().map(|e| e.at_ms as f64 / 1000.0),
            last_check_failed: state.last_check.as_ref().is_some_and(|e| e.outcome == "failed"),
        };
        Self {
            stored: stats.snapshot().0,
            rejected: stats.rejected(),
            ingest_backlog: sources.telemetry.backlog(),
            agents: agents_by_status,
            queued_total: queues.iter().sum(),
            queued_top: queues.into_iter().take(TOP_QUEUES).collect(),
            stream_clients: vec![
                ("brain", live.brain.clients() as i64),
                ("health", live.health.clients() as i64),
                ("logs", live.logs.clients() as i64),
            ],
            store_bytes: sources.store.size_bytes().await.ok(),
            store_up: sources.store.ping().await.is_ok(),
            update,
        }
    }
}

/// The last sample, encoded at each scrape.
#[derive(Debug, Default)]
struct Sampled(std::sync::Mutex<Sample>);

/// Encodes one family of sampled values: `rows` of (labels, value).
fn family<L, V>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    kind: MetricType,
    rows: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result
where
    L: prometheus_client::encoding::EncodeLabelSet,
    V: Into<Value>,
{
    let mut metric = encoder.encode_descriptor(name, help, unit, kind)?;
    for (labels, value) in rows {
        value.into().encode(metric.encode_family(&labels)?, kind)?;
    }
    Ok(())
}

/// Encodes one unlabelled sampled value.
fn one(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    kind: MetricType,
    value: impl Into<Value>,
) -> fmt::Result {
    value.into().encode(encoder.encode_descriptor(name, help, unit, kind)?, kind)
}

/// A sampled number.
enum Value {
    Int(i64),
    Float(f64),
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Self::Float(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Int(i64::from(b))
    }
}

impl Value {
    fn encode(self, encoder: MetricEncoder, kind: MetricType) -> fmt::Result {
        match (self, kind) {
            (Self::Int(n), MetricType::Counter) => ConstCounter::new(u64::try_from(n).unwrap_or(0)).encode(encoder),
            (Self::Float(n), MetricType::Counter) => ConstCounter::new(n).encode(encoder),
            (Self::Int(n), _) => ConstGauge::new(n).encode(encoder),
            (Self::Float(n), _) => ConstGauge::new(n).encode(encoder),
        }
    }
}

impl Collector for Sampled {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let sample = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let e = &mut encoder;
        let kinds = |c: &Counts| {
            [
                ([("kind", "span")], c.spans as i64),
                ([("kind", "log")], c.logs as i64),
                ([("kind", "metric_point")], c.metric_points as i64),
                ([("kind", "event")], c.events as i64),
            ]
        };
        family(e, "ingested", "Items ingest stored, by kind", None, MetricType::Counter, kinds(&sample.stored))?;
        family(
            e,
            "ingest_rejected",
            "Items refused inside accepted OTLP requests (partial success), by kind; requests refused whole \
             are counted by roost_http_requests and roost_grpc_requests",
            None,
            MetricType::Counter,
            kinds(&sample.rejected).into_iter().take(3),
        )?;
        one(
            e,
            "ingest_backlog",
            "Ingest requests waiting for the store writer",
            None,
            MetricType::Gauge,
            sample.ingest_backlog.0 as i64,
        )?;
        one(
            e,
            "ingest_backlog_capacity",
            "Ingest requests that may wait before ingest waits too",
            None,
            MetricType::Gauge,
            sample.ingest_backlog.1 as i64,
        )?;
        family(
            e,
            "agents",
            "Hosted agents (destroyed ones left out), by status",
            None,
            MetricType::Gauge,
            sample.agents.iter().map(|(status, n)| ([("status", *status)], *n)),
        )?;
        one(
            e,
            "turn_queue_depth",
            "Turns waiting or running, all agents together",
            None,
            MetricType::Gauge,
            sample.queued_total,
        )?;
        let ranks: Vec<String> = (1..=sample.queued_top.len()).map(|r| r.to_string()).collect();
        family(
            e,
            "turn_queue_depth_top",
            "Turns waiting or running at the deepest agent queues; rank 1 is the deepest",
            None,
            MetricType::Gauge,
            ranks.iter().zip(&sample.queued_top).map(|(rank, n)| ([("rank", rank.as_str())], *n)),
        )?;
        family(
            e,
            "stream_clients",
            "Clients connected to a live stream (SSE or gRPC), by stream",
            None,
            MetricType::Gauge,
            sample.stream_clients.iter().map(|(stream, n)| ([("stream", *stream)], *n)),
        )?;
        if let Some(bytes) = sample.store_bytes {
            one(
                e,
                "store_size",
                "Bytes the store uses (SQLite: file and WAL; PostgreSQL: the database)",
                Some(&Unit::Bytes),
                MetricType::Gauge,
                bytes,
            )?;
        }
        one(
            e,
            "store_up",
            "1 when the store answered a ping at this scrape",
            None,
            MetricType::Gauge,
            sample.store_up,
        )?;
        let update = &sample.update;
        one(
            e,
            "update_available",
            "1 when the last check saw a release newer than this build",
            None,
            MetricType::Gauge,
            update.available,
        )?;
        one(
            e,
            "update_auto_install",
            "1 when updates install unattended",
            None,
            MetricType::Gauge,
            update.auto_install,
        )?;
        one(e, "update_installing", "1 while an update installs", None, MetricType::Gauge, update.installing)?;
        one(
            e,
            "update_last_check_failed",
            "1 when the last update check failed",
            None,
            MetricType::Gauge,
            update.last_check_failed,
        )?;
        if let Some(secs) = update.last_check_secs {
            one(
                e,
                "update_last_check_timestamp_seconds",
                "When the last update check ran, Unix seconds",
                None,
                MetricType::Gauge,
                secs,
            )?;
        }
        family(
            e,
            "build_info",
            "Always 1; the labels name the running build",
            None,
            MetricType::Gauge,
            [([("version", BUILD.version), ("commit", BUILD.git_commit)], 1i64)],
        )
    }
}
