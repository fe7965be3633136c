//! The three hubs of one server, and what committed ingest becomes on them.

use std::sync::{Arc, Mutex};

use roost_proto::v1::{BrainEvent, HealthReport, LogLine};

use super::{hub::Hub, id_ranges::OwnIds};
use crate::{
    telemetry::{
        announce::{LiveFeed, LiveIds},
        packed_attributes,
        rows::{Batch, EventRow, LogRow, SpanRow},
        runs::nanocents_to_usd,
        turns::{DETAIL_CHARS, detail},
    },
    time::timestamp_ns,
};

/// Items each stream keeps for resuming clients.
const BRAIN_BUFFER: usize = 4096;
const LOG_BUFFER: usize = 4096;
const HEALTH_BUFFER: usize = 64;

/// Client caps (`--max-*-stream-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Brain-stream clients at once.
    pub brain_clients: usize,
    /// Health-stream clients at once.
    pub health_clients: usize,
    /// Log-stream clients at once.
    pub log_clients: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self { brain_clients: 10, health_clients: 10, log_clients: 10 }
    }
}

/// The live streams of one server.
pub struct Live {
    /// Agent activity.
    pub brain: Arc<Hub<BrainEvent>>,
    /// Health reports.
    pub health: Arc<Hub<HealthReport>>,
    /// Log lines.
    pub logs: Arc<Hub<LogLine>>,
    /// Random, per server: names this server's `roost_live` notices, so its listener
    /// leaves its own rows (published already) alone.
    pub origin: String,
    /// Ids of rows this server stored lately (PostgreSQL only), left out of a catch-up.
    pub(super) own: Mutex<OwnIds>,
}

impl Live {
    /// Empty hubs with these caps.
    pub fn new(limits: StreamLimits) -> Arc<Self> {
        Arc::new(Self {
            brain: Arc::new(Hub::new(BRAIN_BUFFER, limits.brain_clients)),
            health: Arc::new(Hub::new(HEALTH_BUFFER, limits.health_clients)),
            logs: Arc::new(Hub::new(LOG_BUFFER, limits.log_clients)),
            origin: crate::ids::random_base32(16),
            own: Mutex::default(),
        })
    }
}

/// What the telemetry writer publishes committed batches through (it holds this server's
/// streams as a [`LiveFeed`], naming nothing of the streams').
impl LiveFeed for Live {
    fn publish(&self, batch: &Batch, new_spans: &[usize], new_events: &[bool]) {
        let service = |index: usize| batch.resources.get(index).map_or("unknown_service", |r| r.service.as_str());
        let spans = new_spans.iter().filter_map(|&i| batch.spans.get(i)).map(|s| span_event(s, service(s.resource)));
        let events = batch.events.iter().zip(new_events).filter(|(_, new)| **new).map(|(e, _)| run_event(e));
        let activity: Vec<BrainEvent> = spans.chain(events).collect();
        if !activity.is_empty() {
            self.brain.publish_all(activity);
        }
        if !batch.logs.is_empty() {
            self.logs.publish_all(batch.logs.iter().map(|l| log_line(l, service(l.resource))));
        }
    }

    fn remember_own(&self, ids: &LiveIds) {
        if !ids.is_empty() {
            self.own.lock().unwrap_or_else(|p| p.into_inner()).remember(ids);
        }
    }

    fn origin(&self) -> &str {
        &self.origin
    }
}

pub(super) fn span_event(span: &SpanRow, service: &str) -> BrainEvent {
    let g = &span.gen_ai;
    BrainEvent {
        kind: "span".into(),
        time: Some(timestamp_ns(span.start_ns)),
        session_id: g.session_id.clone().unwrap_or_default(),
        agent_id: g.agent_id.clone().unwrap_or_default(),
        service: service.to_owned(),
        title: span.name.clone(),
        detail: detail(&packed_attributes::json_prefix(&span.attributes, DETAIL_CHARS)),
        model: g.model().unwrap_or_default().to_owned(),
        input_tokens: g.input_tokens.unwrap_or_default(),
        output_tokens: g.output_tokens.unwrap_or_default(),
        cost_usd: nanocents_to_usd(g.cost_nanocents.unwrap_or_default()),
        trace_id: span.trace_id.clone(),
        span_id: span.span_id.clone(),
        run_id: String::new(),
        status: match span.status_code {
            1 => "ok",
            2 => "error",
            _ => "",
        }
        .into(),
        status_message: span.status_message.clone(),
        tool_name: String::new(),
    }
}

pub(super) fn run_event(event: &EventRow) -> BrainEvent {
    // Hosted agents' turns are events of type "turn" outside any run.
    let kind = if event.run_id.is_empty() && event.event_type == "turn" { "turn" } else { "event" };
    BrainEvent {
        kind: kind.into(),
        time: Some(timestamp_ns(event.ts_ns)),
        session_id: event.session_id.clone(),
        agent_id: event.agent_id.clone(),
        service: String::new(),
        title: event.event_type.clone(),
        detail: detail(&event.data),
        model: event.model.clone(),
        input_tokens: event.input_tokens,
        output_tokens: event.output_tokens,
        cost_usd: nanocents_to_usd(event.cost_nanocents),
        trace_id: String::new(),
        span_id: String::new(),
        run_id: event.run_id.clone(),
        status: String::new(),
        status_message: String::new(),
        tool_name: event.tool_name.clone(),
    }
}

/// An OTLP severity number as a level name; 0 (GenAI events carry no severity) is
/// "unset", which the level filter ranks as info.
pub fn severity_level(number: i32) -> &'static str {
    match number {
        0 => "unset",
        1..=4 => "trace",
        5..=8 => "debug",
        13..=16 => "warn",
        17..=24 => "error",
        _ => "info",
    }
}

/// The rank of a level name, for the stream's minimum-level filter; `None` if unknown.
pub fn level_rank(level: &str) -> Option<u8> {
    Some(match level.to_ascii_lowercase().as_str() {
        "trace" => 0,
        "debug" => 1,
        "info" | "" | "unset" => 2,
        "warn" | "warning" => 3,
        "error" => 4,
        _ => return None,
    })
}

pub(super) fn log_line(log: &LogRow, service: &str) -> LogLine {
    LogLine {
        time: Some(timestamp_ns(log.time_ns)),
        level: severity_level(log.severity_number).into(),
        source: "ingest".into(),
        service: service.to_owned(),
        message: log.body.clone(),
        session_id: log.gen_ai.session_id.clone().unwrap_or_default(),
        trace_id: log.trace_id.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::{level_rank, severity_level};

    /// GenAI events carry no severity: the stream names them "unset" and ranks them as
    /// info, as the logs page does.
    #[test]
    fn unset_severity_reads_unset_and_ranks_as_info() {
        assert_eq!(severity_level(0), "unset");
        assert_eq!(severity_level(9), "info");
        assert_eq!(severity_level(17), "error");
        assert_eq!(level_rank(severity_level(0)), level_rank("info"));
        assert!(level_rank("unset") < level_rank("warn"));
    }
}
