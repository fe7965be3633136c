//! Helpers the benchmarks share.

use std::time::Duration;

/// `p50 …, p99 …, max …` of `samples` in milliseconds (sorts them).
pub fn percentiles(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "no samples".into();
    }
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    format!("p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", at(0.5), at(0.99), at(1.0))
}
