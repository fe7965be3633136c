//! Hosted agents' turns as observed activity (DESIGN.md: "the two halves meet"): each
//! turn becomes an event of type `turn` whose session and agent are the agent's instance
//! id (and whose run is none: ""), so q/1, the transcript and the live streams show hosted
//! agents with no setup.
//!
//! Turns are frequent and their replies must not wait on this: events are buffered and
//! written in batches by one task. A turn answered just before a crash may miss its event
//! (its turn row in activity is the record of truth); never a charge.

use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::warn;

use super::{
    Telemetry,
    rows::{Batch, EventRow},
};
use roost_proto::v1::{AddRunEventsRequest, RunEvent};

/// Turns waiting to be written before new ones are dropped (with a warning).
const BUFFER: usize = 16 * 1024;
/// Most turns written per batch.
const PER_BATCH: usize = 1024;
/// How much of a message and a reply an event keeps (the brain stream's `detail`).
pub const DETAIL_CHARS: usize = 300;

/// Where hosted turns are reported.
#[derive(Clone)]
pub struct TurnEvents {
    tx: mpsc::Sender<EventRow>,
}

impl TurnEvents {
    /// Starts the task that writes reported turns through `telemetry`.
    pub fn start(telemetry: Arc<Telemetry>) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<EventRow>(BUFFER);
        let task = tokio::spawn(async move {
            let mut events = Vec::with_capacity(PER_BATCH);
            while rx.recv_many(&mut events, PER_BATCH).await > 0 {
                let batch = std::mem::take(&mut events);
                let request = AddRunEventsRequest {
                    run_id: String::new(),
                    event: None,
                    events: batch.iter().map(outbox_form).collect(),
                };
                if let Err(err) =
                    telemetry.ingest(Batch { events: batch, ..Batch::default() }, "run_events", &request).await
                {
                    warn!(error = %err, "could not record hosted turns as events");
                }
            }
        });
        (Self { tx }, task)
    }

    /// Waits (up to a second) until every reported turn has been handed to the writer.
    pub async fn drain(&self) {
        for _ in 0..200 {
            if self.tx.capacity() == self.tx.max_capacity() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Reports a turn; never waits.
    pub fn report(&self, event: EventRow) {
        if self.tx.try_send(event).is_err() {
            warn!("turn events are backed up; dropping one (its turn is still in activity)");
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
