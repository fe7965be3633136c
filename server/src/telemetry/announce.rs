//! What the telemetry writer tells the live streams about what it stored.
//!
//! The streams show what telemetry stored (`streams::live` turns its rows into stream
//! items, `streams::fanout` reads other replicas' rows back), so they depend on telemetry
//! and telemetry names nothing of theirs. The writer reaches them through what is defined
//! here, and the streams implement it:
//!
//! - [`LiveFeed`]: this server's hubs, handed to [`Telemetry::new`](super::Telemetry::new)
//!   as a trait object, get each committed batch;
//! - [`AnnounceTx`]: the write transaction tells the other replicas of the rows it stored
//!   ([`LiveIds`]); the fanout, which owns the notice format and its channel, implements it
//!   for each backend's connection.

use super::rows::Batch;
use crate::Result;

/// The store ids of rows one transaction stored, for the other replicas' streams. Empty on
/// SQLite (only PostgreSQL fans out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveIds {
    /// `spans.id` of the new spans.
    pub spans: Vec<i64>,
    /// `logs.id`.
    pub logs: Vec<i64>,
    /// `events.seq` of the new events.
    pub events: Vec<i64>,
}

impl LiveIds {
    /// Nothing to announce.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty() && self.logs.is_empty() && self.events.is_empty()
    }
}

/// This server's live streams, as the writer sees them: where each committed batch is
/// published (the streams' `Live` implements it).
pub trait LiveFeed: Send + Sync {
    /// Publishes what a committed batch stored: the spans at `new_spans` (indices into
    /// `batch.spans`), the events flagged new, every log record.
    fn publish(&self, batch: &Batch, new_spans: &[usize], new_events: &[bool]);

    /// Remembers the store ids of rows this server stored and published, so a catch-up
    /// after a lost listener does not publish them twice (empty on SQLite: no-op).
    fn remember_own(&self, ids: &LiveIds);

    /// Random, per server: names this server's `roost_live` notices, so its listener
    /// leaves its own rows (published already) alone.
    fn origin(&self) -> &str;
}

/// Announcing stored rows from inside the write transaction, per backend (implemented by
/// the streams' fanout, which owns the notice format and the channel).
pub(crate) trait AnnounceTx {
    /// Whether this backend fans out: inserts then return the ids of their rows.
    const FANS_OUT: bool;
    /// Sends the notices for `written` (delivered when the transaction commits).
    async fn announce<'a>(&mut self, origin: &str, written: impl IntoIterator<Item = &'a LiveIds>) -> Result<()>;
}
