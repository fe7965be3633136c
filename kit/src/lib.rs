//! Small pieces both roost's core (`server/`) and its HTTP adapters (`gateway/`) use, so
//! that the core never imports the adapter crate as a toolkit: the HTTP answer of an error
//! ([`HttpError`]), the brake on repeated failures ([`brake`]), the ingest budget
//! ([`budget`]), the allowed `Host` names ([`hosts`]), the agent tokens' prefix and the
//! check the access policy asks the core for ([`agent_tokens`]), the boxed stream types
//! the core's streaming services answer with ([`streams`]), the HTTP request metrics
//! ([`request_metrics`]) and the use counts of routes and tools ([`usage`]).
//!
//! What belongs here: plain types and rules with no knowledge of routes, pages or the
//! store. The error table itself is the contract's (`roost_proto::error`).

pub mod agent_tokens;
pub mod brake;
pub mod budget;
pub mod hosts;
mod http_error;
pub mod request_metrics;
pub mod streams;
pub mod usage;

pub use http_error::HttpError;
