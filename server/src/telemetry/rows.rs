//! What one ingest request becomes: rows for the telemetry store, ready to insert.
//!
//! Converting happens in the request's own task (in parallel across requests); the writer
//! only inserts. Each row carries its GenAI fields already pulled out and priced.

pub use super::messages::Message;

/// A resource (the `service.name` and other attributes shared by a request's items),
/// stored once per distinct attribute set.
#[derive(Debug, Clone)]
pub struct ResourceRow {
    /// Hash of the attributes, to find it again.
    pub hash: String,
    /// `service.name`, or "unknown_service".
    pub service: String,
    /// Attributes as a JSON object.
    pub attributes: String,
}

/// The GenAI fields of a span, log or event, read through the
/// [attribute map](super::attribute_map) (which says which attributes each comes from).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenAi {
    /// The session or conversation.
    pub session_id: Option<String>,
    /// The agent (`roost.instance.id` for hosted agents' runtimes).
    pub agent_id: Option<String>,
    /// What was done (`chat`, `execute_tool`, an OpenInference span kind…).
    pub operation: Option<String>,
    /// The model provider.
    pub system: Option<String>,
    /// The model asked for.
    pub request_model: Option<String>,
    /// The model that answered.
    pub response_model: Option<String>,
    /// Prompt tokens, cached ones included.
    pub input_tokens: Option<i64>,
    /// Completion tokens.
    pub output_tokens: Option<i64>,
    /// Of the prompt tokens, those read from the provider's cache.
    pub cache_read_tokens: Option<i64>,
    /// Of the prompt tokens, those written to the provider's cache.
    pub cache_write_tokens: Option<i64>,
    /// The tool called.
    pub tool_name: Option<String>,
    /// The span sums the calls under it (not a call itself: see
    /// [`is_aggregate`](super::attribute_map::is_aggregate)).
    pub aggregate: bool,
    /// The sender reported this usage about itself (a hosted agent's own telemetry: see
    /// [`super::agent_claims`]): the tokens and cost fields are left empty, and the item is no
    /// call in usage. Its numbers stay in its attributes.
    pub self_reported: bool,
    /// What the call cost (nanocents): the sender's own figure, else the price book's for
    /// the model; `None` when neither knows (an unpriced model).
    pub cost_nanocents: Option<i64>,
}

impl GenAi {
    /// The model that answered, else the one asked for.
    pub fn model(&self) -> Option<&str> {
        self.response_model.as_deref().or(self.request_model.as_deref())
    }

    /// True when the item reports tokens.
    pub fn has_usage(&self) -> bool {
        self.input_tokens.is_some() || self.output_tokens.is_some()
    }

    /// True when the item reports tokens of a model whose price is unknown.
    pub fn is_unpriced(&self) -> bool {
        self.has_usage() && self.cost_nanocents.is_none() && self.model().is_some()
    }
}

/// A span.
#[derive(Debug, Clone, Default)]
pub struct SpanRow {
    /// Hex, 32 characters.
    pub trace_id: String,
    /// Hex, 16 characters.
    pub span_id: String,
    /// Hex, or "" for a root span.
    pub parent_span_id: String,
    /// Operation name.
    pub name: String,
    /// OTLP span kind number.
    pub kind: i32,
    /// Start (ns).
    pub start_ns: i64,
    /// End (ns).
    pub end_ns: i64,
    /// OTLP status code: 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    /// Status message.
    pub status_message: String,
    /// Index into the batch's resources.
    pub resource: usize,
    /// Instrumentation scope name.
    pub scope: String,
    /// GenAI fields.
    pub gen_ai: GenAi,
    /// Span attributes, [packed](super::packed_attributes).
    pub attributes: Vec<u8>,
    /// The span's events.
    pub events: Vec<SpanEventRow>,
    /// The conversation messages it carries (attributes, then events): a model call's
    /// whole exchange, its input as sent and then its output.
    pub messages: Vec<Message>,
    /// Where the exchange's new part starts: `messages[new_from..]` is what the
    /// transcript shows (see [`super::messages`]).
    pub new_from: usize,
    /// A tool call's arguments and result as text (`messages::tool_io`); '' for other
    /// spans, and without content capture.
    pub tool_io: String,
    /// The hosted agent roost attributed the span to ('' when none): set only for spans a
    /// runtime sent with its own agent token, never from what the span claims.
    pub agent_instance: String,
    /// Its [labels](super::labels): user, tags, metadata.
    pub labels: Vec<String>,
    /// For a model call, the time its first token took (ns), when the sender says
    /// ([`super::latency::first_token_ns`]).
    pub first_token_ns: Option<i64>,
}

impl SpanRow {
    /// The messages the transcript shows: the exchange's new part.
    pub fn new_messages(&self) -> &[Message] {
        self.messages.get(self.new_from..).unwrap_or_default()
    }
}

/// An event of a span.
#[derive(Debug, Clone)]
pub struct SpanEventRow {
    /// When (ns).
    pub time_ns: i64,
    /// Its name.
    pub name: String,
    /// Attributes as a JSON object.
    pub attributes: String,
}

/// A log record.
#[derive(Debug, Clone, Default)]
pub struct LogRow {
    /// When it happened (ns; the observed time when unset).
    pub time_ns: i64,
    /// When the collector saw it (ns).
    pub observed_ns: i64,
    /// OTLP severity number (9 info, 13 warn, 17 error...).
    pub severity_number: i32,
    /// Severity text.
    pub severity_text: String,
    /// The body, as text (JSON for structured bodies).
    pub body: String,
    /// Index into the batch's resources.
    pub resource: usize,
    /// Trace it belongs to, hex.
    pub trace_id: Option<String>,
    /// Span it belongs to, hex.
    pub span_id: Option<String>,
    /// `LogRecord.event_name`, else the `event.name` attribute.
    pub event_name: Option<String>,
    /// GenAI fields (coding agents report their model calls as log events).
    pub gen_ai: GenAi,
    /// The conversation messages it carries (those a call's input repeats left out).
    pub messages: Vec<Message>,
    /// Its content is conversation messages (kept in `messages`, or left out as repeats):
    /// the transcript shows the messages instead of the record.
    pub is_message: bool,
    /// Attributes as a JSON object.
    pub attributes: String,
    /// Its [labels](super::labels): user, tags, metadata.
    pub labels: Vec<String>,
}

/// One data point of a metric.
#[derive(Debug, Clone)]
pub struct MetricRow {
    /// Metric name.
    pub name: String,
    /// "gauge", "sum", "histogram", "exponential_histogram" or "summary".
    pub kind: &'static str,
    /// Unit.
    pub unit: String,
    /// Index into the batch's resources.
    pub resource: usize,
    /// When (ns).
    pub time_ns: i64,
    /// Start of the aggregation interval (ns), 0 if none.
    pub start_ns: i64,
    /// The value (gauges, sums) or the sum (histograms, summaries).
    pub value: Option<f64>,
    /// How many measurements (histograms, summaries).
    pub count: Option<i64>,
    /// Buckets, quantiles, min and max, as JSON.
    pub detail: Option<String>,
    /// Attributes as a JSON object.
    pub attributes: String,
    /// Its session, if an attribute names one.
    pub session_id: Option<String>,
    /// What it says about model usage, for the token and cost metrics senders emit.
    pub usage: Option<MetricUsage>,
}

/// What a usage metric's point reports (see [`super::otlp::metrics::usage_of`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricUsage {
    /// The model.
    pub model: String,
    /// What the value counts.
    pub kind: UsageKind,
    /// The value: tokens, or USD.
    pub amount: f64,
    /// A cumulative series: the point adds what it grew by since the last one.
    pub cumulative: bool,
    /// What one unit of `amount` costs, in nanocents: the price book's per-token price for
    /// token metrics that no cost metric accompanies, 10^11 for USD.
    pub nanocents_per_unit: i64,
}

/// What a usage metric counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageKind {
    /// Prompt tokens.
    Input,
    /// Completion tokens.
    Output,
    /// Prompt tokens read from the cache, counted apart from the input (so also added to it).
    CacheReadApart,
    /// Prompt tokens written to the cache, counted apart from the input.
    CacheWriteApart,
    /// Cost in USD.
    CostUsd,
}

/// A new custom run.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// Run id.
    pub id: String,
    /// Runtime that produced it.
    pub runtime: String,
    /// Its session (the run id by default).
    pub session_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Metadata as a JSON object.
    pub metadata: String,
    /// When it started (ns).
    pub started_ns: i64,
}

/// An event of a custom run (or a hosted agent's turn).
#[derive(Debug, Clone, Default)]
pub struct EventRow {
    /// The run it belongs to.
    pub run_id: String,
    /// Idempotency key within the run.
    pub id: String,
    /// When (ns).
    pub ts_ns: i64,
    /// What happened.
    pub event_type: String,
    /// Its session.
    pub session_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Tool name.
    pub tool_name: String,
    /// Model.
    pub model: String,
    /// Speaker role.
    pub role: String,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Cost at the model's price (nanocents; 0 when unpriced).
    pub cost_nanocents: i64,
    /// Anything else, as JSON.
    pub data: String,
    /// The hosted agent roost attributed the event to ('' when none): its turn events.
    pub agent_instance: String,
}

/// The end of a custom run.
#[derive(Debug, Clone)]
pub struct RunEnd {
    /// The run.
    pub run_id: String,
    /// "completed", "failed" or "cancelled".
    pub status: String,
    /// When (ns).
    pub ended_ns: i64,
}

/// A score: a judgement of a trace, span, session or hosted turn ([`super::scores`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreRow {
    /// Its id (the client's, or drawn, or made from an OTLP event's content).
    pub id: String,
    /// What is judged.
    pub name: String,
    /// "numeric", "boolean" or "categorical".
    pub kind: &'static str,
    /// The number (1 or 0 for a boolean); `None` for a category.
    pub value: Option<f64>,
    /// The category ("true"/"false" for a boolean; an OTLP numeric score may carry one too).
    pub label: String,
    /// A note.
    pub comment: String,
    /// "api", "human" or "eval".
    pub source: String,
    /// "trace", "span", "session" or "turn".
    pub target: &'static str,
    /// The trace judged, or the one the target is in ('' when none).
    pub trace_id: String,
    /// The span judged ('' when none).
    pub span_id: String,
    /// The session judged, or the one the target is in ('' when unknown).
    pub session_id: String,
    /// The hosted turn judged ('' when none).
    pub turn_id: String,
    /// The model of the call judged ('' when none).
    pub model: String,
    /// The agent of the target ('' when unknown).
    pub agent_id: String,
    /// The service of the target ('' when unknown).
    pub service: String,
    /// The evaluator that gave it ('' for others).
    pub evaluator_id: String,
    /// Who gave it.
    pub author: String,
    /// When (ns).
    pub time_ns: i64,
}

/// Everything one request adds, written in one transaction with the others of its group.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Resources the rows refer to by index.
    pub resources: Vec<ResourceRow>,
    /// Spans.
    pub spans: Vec<SpanRow>,
    /// Log records.
    pub logs: Vec<LogRow>,
    /// Metric points.
    pub metrics: Vec<MetricRow>,
    /// New runs.
    pub runs: Vec<RunRow>,
    /// Run events.
    pub events: Vec<EventRow>,
    /// Ended runs.
    pub run_ends: Vec<RunEnd>,
    /// Scores (recorded through `/api/v1/scores`, or read from OTLP evaluation events).
    pub scores: Vec<ScoreRow>,
    /// The node that pushed this ('' for local ingest).
    pub node_id: String,
}

impl Batch {
    /// Adds another batch's rows (its resource indices shifted past this one's).
    pub fn append(&mut self, mut other: Batch) {
        let offset = self.resources.len();
        self.resources.append(&mut other.resources);
        self.spans.extend(other.spans.into_iter().map(|s| SpanRow { resource: s.resource + offset, ..s }));
        self.logs.extend(other.logs.into_iter().map(|l| LogRow { resource: l.resource + offset, ..l }));
        self.metrics.extend(other.metrics.into_iter().map(|m| MetricRow { resource: m.resource + offset, ..m }));
        self.runs.append(&mut other.runs);
        self.events.append(&mut other.events);
        self.run_ends.append(&mut other.run_ends);
        self.scores.append(&mut other.scores);
    }

    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
            && self.logs.is_empty()
            && self.metrics.is_empty()
            && self.runs.is_empty()
            && self.events.is_empty()
            && self.run_ends.is_empty()
            && self.scores.is_empty()
    }
}
