//! Time in the store is UTC Unix milliseconds (`BIGINT`); the API speaks `Timestamp`.

use std::time::{SystemTime, UNIX_EPOCH};

use prost_types::Timestamp;

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Unix milliseconds as a protobuf timestamp.
pub fn timestamp_ms(ms: i64) -> Timestamp {
    Timestamp { seconds: ms.div_euclid(1000), nanos: (ms.rem_euclid(1000) * 1_000_000) as i32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_become_timestamps() {
        assert_eq!(timestamp_ms(1_500), Timestamp { seconds: 1, nanos: 500_000_000 });
        assert_eq!(timestamp_ms(-1), Timestamp { seconds: -1, nanos: 999_000_000 });
    }
}
