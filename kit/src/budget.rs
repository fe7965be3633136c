//! The bound on ingest decoded at once: OTLP exports (HTTP and gRPC) and node pushes hold
//! their decoded size in the budget from before they are decoded until they are stored.
//!
//! A decoded export costs several times its wire size (every attribute becomes its own
//! strings and value, then a row): a 30 MiB protobuf export of tiny attributes takes about
//! 320 MiB of memory while it is decoded and stored, and eight at once took roost past 900
//! MiB. So a body is counted at [`PROTOBUF_EXPANSION`] bytes per protobuf byte and
//! [`JSON_EXPANSION`] per JSON byte (JSON spells out what protobuf packs), decompressed.
//! With the budget full, a request waits up to [`WAIT`] for room, then gets 429
//! `overloaded` (gRPC RESOURCE_EXHAUSTED with RetryInfo) and `Retry-After`: OTLP exporters
//! retry it, and nothing is lost. A request larger than the whole budget waits for all of
//! it, so one always fits.
//!
//! Bodies are counted before they are read when they say their size (`Content-Length`), a
//! gzipped one by the size its gzip trailer states, then by what they turn out to hold.

use std::{sync::Arc, time::Duration};

use roost_proto::{ApiError, ErrorReason};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a request waits for room before it is refused.
pub const WAIT: Duration = Duration::from_secs(1);

/// The default budget, in decoded bytes: the largest protobuf body roost takes (32 MiB).
pub const DEFAULT_BYTES: usize = 256 * 1024 * 1024;
/// Decoded bytes counted per byte of a protobuf body.
pub const PROTOBUF_EXPANSION: usize = 8;
/// Decoded bytes counted per byte of a JSON body.
pub const JSON_EXPANSION: usize = 2;

/// Bytes of ingest in flight, shared by every route and service that decodes telemetry.
#[derive(Debug, Clone)]
pub struct IngestBudget {
    permits: Arc<Semaphore>,
    bytes: u32,
}

/// Room held in the budget; given back when dropped.
#[derive(Debug, Default)]
pub struct Held(Vec<OwnedSemaphorePermit>);

impl Default for IngestBudget {
    fn default() -> Self {
        Self::new(DEFAULT_BYTES)
    }
}

impl IngestBudget {
    /// A budget of `bytes` (at most 4 GiB).
    pub fn new(bytes: usize) -> Self {
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        Self { permits: Arc::new(Semaphore::new(bytes as usize)), bytes }
    }

    /// The budget's size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes as usize
    }

    /// Holds `bytes` more for `held`, waiting up to [`WAIT`]; 429 `overloaded` when there is
    /// no room. More than the whole budget holds all of it.
    pub async fn hold(&self, held: &mut Held, bytes: usize) -> Result<(), ApiError> {
        let already: usize = held.0.iter().map(|p| p.num_permits()).sum();
        let wanted = u32::try_from(bytes.min(self.bytes as usize).saturating_sub(already)).unwrap_or(self.bytes);
        if wanted == 0 {
            return Ok(());
        }
        match tokio::time::timeout(WAIT, self.permits.clone().acquire_many_owned(wanted)).await {
            Ok(Ok(permit)) => {
                held.0.push(permit);
                Ok(())
            }
            _ => Err(ApiError::new(
                ErrorReason::Overloaded,
                format!(
                    "roost is decoding {} MiB of telemetry already, its limit (--max-ingest-inflight-mb); retry shortly",
                    self.bytes / (1024 * 1024)
                ),
            )),
        }
    }

    /// Bytes free now (for tests and metrics).
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

/// The uncompressed size a gzip stream's trailer states (ISIZE, modulo 2³²), if it is one.
pub fn gzip_stated_size(gzip: &[u8]) -> Option<usize> {
    let trailer: [u8; 4] = gzip.get(gzip.len().checked_sub(4)?..)?.try_into().ok()?;
    (gzip.len() >= 18 && gzip.starts_with(&[0x1f, 0x8b])).then(|| u32::from_le_bytes(trailer) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn room_is_held_until_dropped_and_refused_past_the_wait() {
        let budget = IngestBudget::new(100);
        let mut first = Held::default();
        budget.hold(&mut first, 60).await.unwrap();
        budget.hold(&mut first, 80).await.unwrap();
        assert_eq!(budget.available(), 20, "the second hold adds what the first lacked");
        let mut second = Held::default();
        let err = budget.hold(&mut second, 50).await.unwrap_err();
        assert_eq!(err.reason(), ErrorReason::Overloaded);
        drop(first);
        budget.hold(&mut second, 1_000).await.unwrap();
        assert_eq!(budget.available(), 0, "more than the budget holds all of it");
    }

    #[test]
    fn the_gzip_trailer_states_the_size() {
        use std::io::Write as _;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&[7u8; 5000]).unwrap();
        assert_eq!(gzip_stated_size(&gz.finish().unwrap()), Some(5000));
        assert_eq!(gzip_stated_size(b"not gzip at all, long enough"), None);
    }
}
