//! What ingest stored (and refused) since the process started, and over the last minute
//! (`roost status`, `GET /metrics`).

use std::{
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

/// Seconds of the rate window.
const WINDOW: usize = 60;

/// Rows stored, by kind: spans, log records, metric points, events.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Spans.
    pub spans: u64,
    /// Log records.
    pub logs: u64,
    /// Metric points.
    pub metric_points: u64,
    /// Run events (hosted turns included).
    pub events: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.spans += other.spans;
        self.logs += other.logs;
        self.metric_points += other.metric_points;
        self.events += other.events;
    }
}

struct Inner {
    total: Counts,
    /// Items refused inside accepted requests (OTLP partial success).
    rejected: Counts,
    /// Per second, by Unix second modulo the window.
    seconds: [(u64, Counts); WINDOW],
}

impl Default for Inner {
    fn default() -> Self {
        Self { total: Counts::default(), rejected: Counts::default(), seconds: [(0, Counts::default()); WINDOW] }
    }
}

/// Totals and a one-minute rate of what was stored.
#[derive(Default)]
pub struct IngestStats {
    inner: Mutex<Inner>,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl IngestStats {
    /// Counts a committed batch.
    pub fn record(&self, stored: Counts) {
        let now = now_secs();
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.total.add(&stored);
        let slot = &mut inner.seconds[now as usize % WINDOW];
        if slot.0 != now {
            *slot = (now, Counts::default());
        }
        slot.1.add(&stored);
    }

    /// Counts items refused inside an accepted request (the request's partial success).
    pub fn reject(&self, rejected: Counts) {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.rejected.add(&rejected);
    }

    /// Items refused since start.
    pub fn rejected(&self) -> Counts {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).rejected
    }

    /// Totals since start, and the average per second over the last minute.
    pub fn snapshot(&self) -> (Counts, [f64; 4]) {
        let now = now_secs();
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut minute = Counts::default();
        for (second, counts) in &inner.seconds {
            if now.saturating_sub(*second) < WINDOW as u64 {
                minute.add(counts);
            }
        }
        let per_sec = |n: u64| n as f64 / WINDOW as f64;
        (
            inner.total,
            [per_sec(minute.spans), per_sec(minute.logs), per_sec(minute.metric_points), per_sec(minute.events)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_the_minute_rate() {
        let stats = IngestStats::default();
        stats.record(Counts { spans: 60, logs: 6, metric_points: 0, events: 120 });
        stats.record(Counts { spans: 60, ..Counts::default() });
        let (total, rate) = stats.snapshot();
        assert_eq!(total, Counts { spans: 120, logs: 6, metric_points: 0, events: 120 });
        assert_eq!(rate, [2.0, 0.1, 0.0, 2.0]);
        stats.reject(Counts { spans: 2, ..Counts::default() });
        assert_eq!(stats.rejected(), Counts { spans: 2, ..Counts::default() });
    }
}
