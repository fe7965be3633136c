//! Hosted agents' turns as observed activity (docs/architecture.md#hosted-turns-as-activity): each
//! turn becomes an event of type `turn` whose session and agent are the agent's instance
//! id (and whose run is none: ""), so q/1, the transcript and the live streams show hosted
//! agents with no setup.
//!
//! A turn's event is written in the turn recorder's transaction, with the turn itself
//! ([`TurnEventsTx`]), and published once that commits ([`TurnEvents::committed`]). So a
//! turn that was answered has its event too, and the turn costs one commit, not two: on
//! SQLite, with one writer connection, a second commit per turn made every caller wait for
//! the other writer's transaction as well.

use std::sync::Arc;

use prost::Message as _;

use super::{
    Telemetry,
    announce::AnnounceTx,
    rows::{Batch, EventRow},
    summaries::{Summaries, SummaryTx},
    writer::{IngestTx, OutboxItem, Written},
};
use crate::{Result, store::impl_for_connections};
use roost_proto::v1::{AddRunEventsRequest, RunEvent};

/// How much of a message and a reply an event keeps (the brain stream's `detail`).
pub const DETAIL_CHARS: usize = 300;

/// Where hosted turns become observed activity: the telemetry they are written into.
#[derive(Clone)]
pub struct TurnEvents {
    telemetry: Arc<Telemetry>,
}

/// Turn events ready to be written in a transaction.
pub struct TurnEventBatch {
    /// The event rows.
    pub batch: Batch,
    /// The same events for the outbox, when this roost pushes upstream.
    pub outbox: Option<OutboxItem>,
    /// What names this server in the notice that tells other replicas of the events.
    origin: String,
    /// Index the events for search (content capture is on).
    search: bool,
}

impl TurnEvents {
    /// Turn events written into `telemetry`'s store and streams.
    pub fn new(telemetry: Arc<Telemetry>) -> Self {
        Self { telemetry }
    }

    /// The telemetry they are written into.
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// The rows (and outbox item) of `events`.
    pub fn batch(&self, events: Vec<EventRow>) -> TurnEventBatch {
        let outbox = self.telemetry.outbox.then(|| {
            let request = AddRunEventsRequest {
                run_id: String::new(),
                event: None,
                events: events.iter().map(outbox_form).collect(),
            };
            OutboxItem { kind: "run_events", payload: request.encode_to_vec() }
        });
        let origin = self.telemetry.writer.origin().to_owned();
        let search = self.telemetry.limits.capture_content;
        TurnEventBatch { batch: Batch { events, ..Batch::default() }, outbox, origin, search }
    }

    /// After the commit: publishes the new events on the live streams and counts them.
    pub fn committed(&self, events: &TurnEventBatch, written: &Written) {
        self.telemetry.writer.committed(&events.batch, written);
    }
}

/// Writing turn events inside the recorder's transaction.
pub(crate) trait TurnEventsTx {
    /// Stores the events with their summaries and, on a node, the outbox item, and tells
    /// the other replicas of them (PostgreSQL).
    async fn write_turn_events(&mut self, events: &TurnEventBatch, now_ns: i64) -> Result<Written>;
}

impl_for_connections! {
    impl TurnEventsTx {
        async fn write_turn_events(&mut self, events: &TurnEventBatch, now_ns: i64) -> Result<Written> {
            let mut summaries = Summaries::default();
            let written = self.write_batch(&events.batch, &[], &mut summaries, events.search).await?;
            self.apply_summaries(&summaries).await?;
            if let Some(item) = &events.outbox {
                self.insert_outbox(item, now_ns).await?;
            }
            self.announce(&events.origin, [&written.ids]).await?;
            Ok(written)
        }
    }
}

/// The text of an event: the first [`DETAIL_CHARS`] characters.
pub fn detail(text: &str) -> String {
    text.chars().take(DETAIL_CHARS).collect()
}

/// The outbox (push) form of a turn event.
fn outbox_form(e: &EventRow) -> RunEvent {
    RunEvent {
        id: e.id.clone(),
        ts: e.ts_ns.to_string(),
        event_type: e.event_type.clone(),
        session_id: e.session_id.clone(),
        agent_id: e.agent_id.clone(),
        tool_name: e.tool_name.clone(),
        model: e.model.clone(),
        role: e.role.clone(),
        input_tokens: e.input_tokens,
        output_tokens: e.output_tokens,
        data: serde_json::from_str(&e.data).ok().map(|v: serde_json::Value| roost_proto::json::value::from_json(&v)),
    }
}
