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

/// The UTC calendar day of a Unix time in nanoseconds, as `YYYY-MM-DD`.
pub fn utc_day(ns: i64) -> String {
    let (year, month, day) = civil(ns.div_euclid(86_400_000_000_000));
    format!("{year:04}-{month:02}-{day:02}")
}

/// The UTC hour of a Unix time in nanoseconds, as `YYYY-MM-DDTHH`.
pub fn utc_hour(ns: i64) -> String {
    format!("{}T{:02}", utc_day(ns), ns.div_euclid(3_600_000_000_000).rem_euclid(24))
}

/// (year, month 1–12, day 1–31) of a day number since 1970-01-01 (Howard Hinnant's
/// algorithm).
pub fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Unix nanoseconds as a protobuf timestamp.
pub fn timestamp_ns(ns: i64) -> Timestamp {
    Timestamp { seconds: ns.div_euclid(1_000_000_000), nanos: ns.rem_euclid(1_000_000_000) as i32 }
}

/// Unix nanoseconds as an RFC 3339 timestamp in UTC.
pub fn rfc3339_ns(ns: i64) -> String {
    timestamp_ns(ns).to_string()
}

#[cfg(test)]
mod day_tests {
    use super::*;

    #[test]
    fn days_and_rfc3339() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(1_795_000_000 * 1_000_000_000), "2026-11-18");
        assert_eq!(utc_day(951_782_400 * 1_000_000_000), "2000-02-29");
        assert_eq!(utc_day(-1), "1969-12-31");
        assert_eq!(rfc3339_ns(1_500_000_000), "1970-01-01T00:00:01.500Z");
        assert_eq!(utc_hour(1_795_000_000 * 1_000_000_000), "2026-11-18T11");
        assert_eq!(utc_hour(-1), "1969-12-31T23");
    }
}
