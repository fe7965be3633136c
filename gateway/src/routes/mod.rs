//! The REST routes, one module per core service.

pub(crate) mod accounts;
pub(crate) mod agent_files;
pub(crate) mod agents;
pub(crate) mod billing;
pub(crate) mod control;
pub(crate) mod evaluators;
pub(crate) mod experiments;
pub(crate) mod features;
pub(crate) mod ingest;
pub(crate) mod otlp;
pub(crate) mod query;
pub(crate) mod scores;
pub(crate) mod streams;
pub(crate) mod system;
pub(crate) mod updates;
