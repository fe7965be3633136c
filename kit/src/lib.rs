//! Small pieces both roost's core (`server/`) and its HTTP adapters (`gateway/`) use, so
//! that the core never imports the adapter crate as a toolkit: the HTTP answer of an error
//! ([`HttpError`]), the brake on repeated failures ([`brake`]), the ingest budget
//! ([`budget`]), the allowed `Host` names ([`hosts`]), the agent tokens' prefix and the
//! check the access policy asks the core for ([`agent_tokens`]), the boxed stream types
//! the core's streaming services answer with ([`streams`]), the HTTP request metrics
//! ([`request_metrics`]), the use counts of routes and tools ([`usage`]), and the account
//! API keys' prefix ([`ACCOUNT_KEY_PREFIX`]).
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

/// Every account API key starts with this. The access policy lets a bearer of that form
/// through to the core on the paths both accounts and the dashboard call (datasets and
/// experiments), where the core checks the key; the core mints and checks the keys.
pub const ACCOUNT_KEY_PREFIX: &str = "rsk_";
