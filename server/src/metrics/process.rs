//! The process's own figures under the names every Prometheus exporter uses
//! (`process_resident_memory_bytes`, `process_open_fds`, ...), read from `/proc` at scrape
//! time. Elsewhere than Linux there is no `/proc`, and only the start time is reported.

use std::fmt;

use crate::runtimes::procfs;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
};

/// Encodes the process family at each scrape.
#[derive(Debug)]
pub struct ProcessCollector {
    /// When the process started, Unix seconds.
    pub started_at_secs: f64,
}

/// What `/proc` says about this process.
#[derive(Debug, Default, PartialEq)]
struct Sample {
    resident_bytes: Option<u64>,
    virtual_bytes: Option<u64>,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
    cpu_seconds: Option<f64>,
}

impl Sample {
    fn read() -> Self {
        let page = rustix::param::page_size() as u64;
        let statm = std::fs::read_to_string("/proc/self/statm").ok();
        let pages =
            |field: usize| statm.as_deref()?.split_whitespace().nth(field)?.parse::<u64>().ok().map(|n| n * page);
        let open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|dir| dir.count() as u64);
        let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let ticks = rustix::param::clock_ticks_per_second();
        let cpu_seconds = procfs::stat(std::process::id() as i32)
            .filter(|_| ticks > 0)
            .map(|stat| stat.cpu_ticks as f64 / ticks as f64);
        Self { resident_bytes: pages(1), virtual_bytes: pages(0), open_fds, max_fds, cpu_seconds }
    }
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: Option<u64>) -> fmt::Result {
    let Some(value) = value else { return Ok(()) };
    let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let sample = Sample::read();
        gauge(&mut encoder, "process_resident_memory_bytes", "Resident memory size in bytes", sample.resident_bytes)?;
        gauge(&mut encoder, "process_virtual_memory_bytes", "Virtual memory size in bytes", sample.virtual_bytes)?;
        gauge(&mut encoder, "process_open_fds", "Open file descriptors", sample.open_fds)?;
        gauge(&mut encoder, "process_max_fds", "The limit of open file descriptors", sample.max_fds)?;
        if let Some(seconds) = sample.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "User and system CPU time spent, in seconds",
                None,
                counter.metric_type(),
            )?)?;
        }
        let start = ConstGauge::new(self.started_at_secs);
        start.encode(encoder.encode_descriptor(
            "process_start_time_seconds",
            "When the process started, Unix seconds",
            None,
            start.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_files() {
        let sample = Sample::read();
        if cfg!(target_os = "linux") {
            assert!(sample.resident_bytes.unwrap_or(0) > 0);
            assert!(sample.open_fds.unwrap_or(0) > 0);
            assert!(sample.cpu_seconds.is_some());
        }
        assert!(sample.max_fds.unwrap_or(1) > 0);
    }
}
