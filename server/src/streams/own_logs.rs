//! roost's own log lines (info and above) on the log stream, next to ingested records.
//!
//! The tracing subscriber is process-wide and installed before any server starts, so this
//! layer forwards to every server's log hub registered with [`attach`] (the binary runs one;
//! tests run several in one process). With none attached it costs one atomic load per
//! event.

use std::{
    fmt::Write as _,
    sync::{
        Arc, RwLock, Weak,
        atomic::{AtomicBool, Ordering},
    },
};

use roost_proto::v1::LogLine;
use tracing::{Event, Level, Subscriber, field::Field};
use tracing_subscriber::{Layer, layer::Context};

use super::hub::Hub;
use crate::time::{now_ms, timestamp_ms};

static SINKS: RwLock<Vec<Weak<Hub<LogLine>>>> = RwLock::new(Vec::new());
static ANY: AtomicBool = AtomicBool::new(false);

/// Sends roost's log lines to `hub` from now on, until the hub is dropped.
pub fn attach(hub: &Arc<Hub<LogLine>>) {
    let mut sinks = SINKS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    sinks.retain(|s| s.strong_count() > 0);
    sinks.push(Arc::downgrade(hub));
    ANY.store(true, Ordering::Release);
}

/// The layer the global subscriber installs (see `logging::init`).
#[derive(Debug, Default)]
pub struct OwnLogs;

impl<S: Subscriber> Layer<S> for OwnLogs {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if !ANY.load(Ordering::Acquire) || *event.metadata().level() > Level::INFO {
            return;
        }
        let mut text = Text::default();
        event.record(&mut text);
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            _ => "info",
        };
        let line = LogLine {
            time: Some(timestamp_ms(now_ms())),
            level: level.into(),
            source: "roost".into(),
            service: event.metadata().target().to_owned(),
            message: text.0,
            session_id: String::new(),
            trace_id: String::new(),
        };
        let sinks = SINKS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        for hub in sinks.iter().filter_map(Weak::upgrade) {
            hub.publish(line.clone());
        }
    }
}

/// The message, then the other fields as ` key=value`.
#[derive(Default)]
struct Text(String);

impl tracing::field::Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}
