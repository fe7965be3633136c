//! roost's contract: the `roost.v1` protobuf package as Rust (messages, tonic clients and
//! servers), the encoded descriptor set for gRPC reflection, and the error table every
//! adapter maps through.
//!
//! The messages derive serde (see `build.rs`) because the REST gateway's JSON bodies are
//! these same messages.

pub mod attribute_map;
pub mod checks;
pub mod codec;
pub mod describe;
pub mod error;
pub mod json;
pub mod nul;
pub mod numbers;
pub mod search;

/// Package `roost.v1`: every message, enum, client and server roost speaks.
pub mod v1 {
    #![allow(clippy::all, clippy::unwrap_used)]
    include!(concat!(env!("OUT_DIR"), "/roost.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/roost.v1.json_enums.rs"));
    include!(concat!(env!("OUT_DIR"), "/roost.v1.inbound.rs"));
}

/// The encoded `FileDescriptorSet` of `roost.v1` (with its imports), for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/roost_descriptor.bin"));

pub use error::{ApiError, ErrorReason};

/// The event name of the log records that hold a hosted agent's runtime output (its stdout
/// and stderr lines, in its session): part of the contract because the q/1 `logs` shape
/// filters on it and the `transcript` shape leaves such records out of a conversation.
pub const RUNTIME_OUTPUT_EVENT: &str = "roost.runtime.output";
