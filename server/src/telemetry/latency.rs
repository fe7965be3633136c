//! Model call latency: each call's duration and time to first token, counted at ingest in
//! hourly histograms per model, service and agent (`latency_hourly`), from which the
//! `latency` shape reads percentiles.
//!
//! A histogram, not the calls: a percentile over a month of calls would otherwise read
//! every span of the month. Buckets are 1/16 of a doubling wide (bucket `b` ≥ 1 holds
//! durations from 2^((b-1)/16) to 2^(b/16) microseconds; bucket 0 those under 1 µs), and
//! a percentile is its bucket's geometric middle: within 2.2 % of the exact value. A
//! second is bucket 319, an hour 508. The total is kept exactly, for the mean.
//!
//! Time to first token comes from the attribute the sender puts it in:
//! `gen_ai.server.time_to_first_token` (seconds; the GenAI conventions, OpenLIT and roost's
//! model gateway), `ai.response.msToFirstChunk` or `ai.stream.msToFirstChunk`
//! (milliseconds; the Vercel AI SDK) or `langfuse.observation.completion_start_time` (the
//! time the first token came, RFC 3339 or Unix nanoseconds; Langfuse). Calls without one
//! count in durations only.

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value::Value};

/// Buckets per doubling.
pub const PER_DOUBLING: f64 = 16.0;
/// The `measure` of a call's duration.
pub const DURATION: i64 = 0;
/// The `measure` of a call's time to first token.
pub const FIRST_TOKEN: i64 = 1;

/// Attributes giving the time to first token in seconds.
pub const FIRST_TOKEN_SECONDS: &[&str] = &["gen_ai.server.time_to_first_token", "gen_ai.response.time_to_first_token"];
/// Attributes giving it in milliseconds.
pub const FIRST_TOKEN_MS: &[&str] = &["ai.response.msToFirstChunk", "ai.stream.msToFirstChunk"];
/// Attributes giving the time the first token came.
pub const FIRST_TOKEN_AT: &[&str] = &["langfuse.observation.completion_start_time"];

/// The bucket of a duration in nanoseconds.
pub fn bucket(ns: i64) -> i64 {
    let us = ns as f64 / 1000.0;
    if us < 1.0 { 0 } else { (us.log2() * PER_DOUBLING).floor() as i64 + 1 }
}

/// The value a bucket stands for, in milliseconds: its geometric middle.
pub fn bucket_ms(bucket: i64) -> f64 {
    if bucket <= 0 { 0.0005 } else { 2f64.powf((bucket as f64 - 0.5) / PER_DOUBLING) / 1000.0 }
}

/// The `p` quantile (0 < p ≤ 1) of a histogram of (bucket, calls) in bucket order, by
/// nearest rank: the bucket holding the ⌈p·n⌉-th smallest call. None when it is empty.
pub fn quantile_ms(histogram: &[(i64, i64)], p: f64) -> Option<f64> {
    let calls: i64 = histogram.iter().map(|(_, n)| n).sum();
    if calls <= 0 {
        return None;
    }
    let rank = ((p * calls as f64).ceil() as i64).clamp(1, calls);
    let mut seen = 0;
    for (bucket, n) in histogram {
        seen += n;
        if seen >= rank {
            return Some(bucket_ms(*bucket));
        }
    }
    histogram.last().map(|(bucket, _)| bucket_ms(*bucket))
}

/// A span's time to first token in nanoseconds, from the attributes its sender puts it in;
/// none when it names none, or one that is negative or past the span's end.
pub fn first_token_ns(attributes: &[KeyValue], start_ns: i64, end_ns: i64) -> Option<i64> {
    let value = |key: &str| attributes.iter().rev().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref();
    let number = |v: &Value| match v {
        Value::DoubleValue(d) => Some(*d),
        Value::IntValue(i) => Some(*i as f64),
        Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    };
    let found = FIRST_TOKEN_SECONDS
        .iter()
        .find_map(|k| value(k).and_then(number).map(|s| s * 1e9))
        .or_else(|| FIRST_TOKEN_MS.iter().find_map(|k| value(k).and_then(number).map(|ms| ms * 1e6)))
        .or_else(|| {
            FIRST_TOKEN_AT.iter().find_map(|k| match value(k)? {
                Value::StringValue(s) => s
                    .parse::<prost_types::Timestamp>()
                    .ok()
                    .map(|t| (t.seconds as i128 * 1_000_000_000 + t.nanos as i128 - start_ns as i128) as f64),
                Value::IntValue(at) => Some((*at as i128 - start_ns as i128) as f64),
                _ => None,
            })
        })?;
    (found.is_finite() && found >= 0.0 && found <= (end_ns - start_ns).max(0) as f64).then_some(found.round() as i64)
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::AnyValue;

    use super::*;

    #[test]
    fn buckets_are_a_sixteenth_of_a_doubling_and_quantiles_within_2_2_percent() {
        assert_eq!((bucket(0), bucket(999), bucket(1000), bucket(1_000_000_000)), (0, 0, 1, 319));
        for ms in [0.003, 0.5, 1.0, 17.0, 250.0, 999.0, 4_321.0, 3_600_000.0] {
            let shown = bucket_ms(bucket((ms * 1e6) as i64));
            assert!((shown / ms - 1.0).abs() <= 0.022, "{ms} ms is shown as {shown}");
        }
        // 1..=100 ms, once each: by nearest rank p50 is 50 ms, p95 95 and p99 99.
        let mut histogram = std::collections::BTreeMap::new();
        for ms in 1..=100 {
            *histogram.entry(bucket(ms * 1_000_000)).or_insert(0) += 1;
        }
        let histogram: Vec<(i64, i64)> = histogram.into_iter().collect();
        for (p, exact) in [(0.5, 50.0), (0.95, 95.0), (0.99, 99.0), (1.0, 100.0)] {
            let shown = quantile_ms(&histogram, p).unwrap();
            assert!((shown / exact - 1.0).abs() <= 0.022, "p{p}: {shown} for {exact}");
        }
        assert_eq!(quantile_ms(&[], 0.5), None);
    }

    #[test]
    fn time_to_first_token_from_each_sender() {
        let kv = |key: &str, value: Value| KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..Default::default()
        };
        let second = 1_000_000_000;
        let at = |attrs: &[KeyValue]| first_token_ns(attrs, 10 * second, 12 * second);
        assert_eq!(at(&[kv("gen_ai.server.time_to_first_token", Value::DoubleValue(0.25))]), Some(250_000_000));
        assert_eq!(at(&[kv("ai.response.msToFirstChunk", Value::IntValue(40))]), Some(40_000_000));
        let langfuse =
            kv("langfuse.observation.completion_start_time", Value::StringValue("1970-01-01T00:00:10.5Z".into()));
        assert_eq!(at(&[langfuse]), Some(500_000_000));
        assert_eq!(at(&[kv("gen_ai.server.time_to_first_token", Value::DoubleValue(-1.0))]), None);
        assert_eq!(at(&[kv("gen_ai.server.time_to_first_token", Value::DoubleValue(3.0))]), None, "past the end");
        assert_eq!(at(&[]), None);
    }
}
