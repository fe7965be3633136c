//! Turn metrics, recorded by the hosting core as each turn ends.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Registry, Unit},
};

/// A finished turn's labels: its status ("completed", "failed", "timed_out", "cancelled")
/// and where its message came from ("api", "grpc", "mcp", "web", "telegram").
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TurnLabels {
    status: &'static str,
    source: String,
}

/// 5 ms to about 12 minutes, by factors of 2.5: an echo to a turn near the 15-minute cap.
fn turn_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.5, 14))
}

/// Turns by status and source, with their running time.
#[derive(Debug, Clone)]
pub struct TurnMetrics {
    turns: Family<TurnLabels, Counter>,
    duration: Family<TurnLabels, Histogram, fn() -> Histogram>,
}

impl Default for TurnMetrics {
    fn default() -> Self {
        Self { turns: Family::default(), duration: Family::new_with_constructor(turn_histogram) }
    }
}

impl TurnMetrics {
    /// Counts a turn that ran for `seconds` and ended with `status`.
    pub fn record(&self, status: &'static str, source: &str, seconds: f64) {
        // Sources are roost's own names, but keep the label bounded whatever a caller passes.
        let source = match source {
            "api" | "grpc" | "mcp" | "web" | "telegram" => source.to_owned(),
            _ => "other".to_owned(),
        };
        let labels = TurnLabels { status, source };
        self.duration.get_or_create(&labels).observe(seconds);
        self.turns.get_or_create(&labels).inc();
    }

    /// Registers the families in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("turns", "Turns finished, by status and source", self.turns.clone());
        registry.register_with_unit(
            "turn_duration",
            "How long turns ran (queueing not included), by status and source",
            Unit::Seconds,
            self.duration.clone(),
        );
    }
}
