//! Live streams (docs/observing.md#live-streams): the brain stream of agent activity, the health
//! stream and the log stream, each a [`hub::Hub`] the ingest path publishes into after
//! commit and the `StreamService` rpcs (and the SSE routes over them) read from.

pub mod fanout;
pub mod hub;
pub mod id_ranges;
pub mod live;
pub mod own_logs;
pub mod service;

pub use live::{Live, StreamLimits};
