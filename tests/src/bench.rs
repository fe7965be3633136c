//! Helpers the benchmarks share.

use std::{future::Future, str::FromStr, time::Duration};

use crate::Backend;

/// A knob from the environment (`ROOST_BENCH_*`), or `default` when unset or unreadable.
pub fn knob<T: FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The backend `ROOST_BENCH_BACKEND` names (`postgres`; SQLite otherwise).
pub fn backend() -> Backend {
    match std::env::var("ROOST_BENCH_BACKEND").as_deref() {
        Ok("postgres") => Backend::Postgres,
        _ => Backend::Sqlite,
    }
}

/// Runs a benchmark's body on a multi-threaded runtime.
pub fn block_on(body: impl Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(body);
}

/// `p50 …, p99 …, max …` of `samples` in milliseconds (sorts them).
pub fn percentiles(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "no samples".into();
    }
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    format!("p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", at(0.5), at(0.99), at(1.0))
}

/// Resident memory of process `pid` (a number, or `"self"`) in KiB, from
/// `/proc/<pid>/status`; 0 when it cannot be read (the process is gone).
pub fn rss_kib(pid: impl std::fmt::Display) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
