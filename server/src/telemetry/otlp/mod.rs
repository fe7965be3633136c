//! OTLP export requests → [`Batch`]es. Invalid items are rejected one by one (counted for
//! the response's `partial_success`); the rest of the request is kept.

pub mod logs;
pub mod metrics;
pub mod traces;

use std::{collections::HashMap, fmt::Write as _};

use opentelemetry_proto::tonic::common::v1::KeyValue;
use sha2::{Digest, Sha256};

use super::{
    attributes::{service_name, to_json_text},
    limits::Cuts,
    rows::{Batch, ResourceRow},
};

/// Items of a request that were not stored, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejected {
    /// How many.
    pub count: i64,
    /// The first reason (OTLP's `error_message`).
    pub message: String,
}

impl Rejected {
    /// Counts one rejected item.
    pub fn add(&mut self, why: impl FnOnce() -> String) {
        if self.count == 0 {
            self.message = why();
        }
        self.count += 1;
    }
}

/// What an export did: the items it could not store, and what it changed in the others to
/// store them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// Items not stored.
    pub rejected: Rejected,
    /// Strings replaced or cut, attributes and events dropped.
    pub cuts: Cuts,
}

impl Stored {
    /// OTLP's `partial_success` as (rejected count, error message), when there is anything
    /// to say. With nothing rejected, the message is a warning (as the OTLP spec allows):
    /// what was cut or replaced.
    pub fn partial_success(self) -> Option<(i64, String)> {
        if self.rejected.count == 0 && self.cuts.is_empty() {
            return None;
        }
        let mut message = self.rejected.message;
        if !self.cuts.is_empty() {
            if !message.is_empty() {
                message.push_str("; ");
            }
            let _ = write!(message, "{}", self.cuts);
        }
        Some((self.rejected.count, message))
    }
}

/// Interns a request's resources into its batch: one row per distinct attribute set.
#[derive(Default)]
pub struct Resources {
    by_hash: HashMap<String, usize>,
}

impl Resources {
    /// The batch index of the resource with these attributes.
    pub fn intern(&mut self, batch: &mut Batch, attributes: &[KeyValue]) -> usize {
        let json = to_json_text(attributes);
        let hash = hex::encode(&Sha256::digest(json.as_bytes())[..16]);
        *self.by_hash.entry(hash.clone()).or_insert_with(|| {
            batch.resources.push(ResourceRow { hash, service: service_name(attributes), attributes: json });
            batch.resources.len() - 1
        })
    }
}

/// Lower-case hex of an id, if it has the right length and is not all zeros (OTLP's
/// invalid id).
pub fn id_hex(bytes: &[u8], len: usize) -> Option<String> {
    (bytes.len() == len && bytes.iter().any(|b| *b != 0)).then(|| hex::encode(bytes))
}

/// Nanoseconds as i64 (OTLP uses u64; anything past 2262 is clamped).
pub fn ns(value: u64) -> i64 {
    value.min(i64::MAX as u64) as i64
}
