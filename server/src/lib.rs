//! roost's core: the domain logic behind every `roost.v1` service, the store, the workers,
//! and the wiring that serves gRPC, gRPC-web and the HTTP gateway on one port.
//!
//! The tonic service implementations in this crate are the only implementation of roost's
//! API; the HTTP adapters of `gateway/` (REST, SSE, OTLP/HTTP, MCP) call them through
//! their service traits.

pub mod accounts;
pub mod agents;
pub mod auth;
pub mod billing;
pub mod build_info;
pub mod callers;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod control;
pub mod error;
pub mod evaluations;
pub mod experiments;
pub mod features;
pub mod grpc;
pub mod ids;
pub mod llm;
pub mod logging;
pub mod metrics;
pub mod node;
pub mod query;
pub mod runtimes;
pub mod sandbox;
pub mod scores;
pub mod secrets;
pub mod serve;
pub mod shutdown;
pub mod store;
pub mod streams;
pub mod system;
pub mod telegram;
pub mod telemetry;
pub mod time;
pub mod turn_stream;
pub mod update;
pub mod webapp;

pub use config::ServeConfig;
pub use error::{Error, Result};
