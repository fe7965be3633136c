//! Node push: a `roost daemon --upstream URL` node sends what it ingests to a central
//! roost, and a heartbeat whose reply carries the node's plan.
//!
//! Exactly once, even across failures: the node stores each ingested request in its
//! outbox in the same transaction as the data itself, pushes outbox items in sequence
//! order, and drops them only once the central roost says it has applied them. The central
//! side applies a batch and advances the node's cursor in one transaction, and skips items
//! at or below the cursor, so a batch pushed twice is applied once.

pub mod central;
pub mod pusher;

/// The kinds of outbox item, and of pushed item.
pub mod kinds {
    /// An OTLP traces export request.
    pub const OTLP_TRACES: &str = "otlp_traces";
    /// An OTLP logs export request.
    pub const OTLP_LOGS: &str = "otlp_logs";
    /// An OTLP metrics export request.
    pub const OTLP_METRICS: &str = "otlp_metrics";
    /// A `Run` (as created).
    pub const RUN: &str = "run";
    /// An `AddRunEventsRequest` with every default filled in.
    pub const RUN_EVENTS: &str = "run_events";
    /// An `EndRunResponse` (as ended).
    pub const RUN_END: &str = "run_end";
    /// A `ScoreList` (as recorded, every field filled in).
    pub const SCORES: &str = "scores";
}
