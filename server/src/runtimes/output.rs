//! A runtime's stdout and stderr: each line goes to roost's own log (target
//! `roost::runtime`, with the agent's id) and, when roost observes activity, into its log
//! store as a record of the agent's session (`session.id` = the instance id, service = the
//! runtime's id, severity info for stdout and warn for stderr, event name
//! [`EVENT_NAME`]), so the logs page finds it and the session page shows it apart from the
//! conversation (the transcript leaves these records out: a runtime's boot chatter is not
//! what the agent said).
//!
//! Lines are stored in batches (at most [`BATCH`] lines or [`FLUSH`] apart), cut at
//! [`MAX_LINE`] bytes, and at most [`PER_SECOND`] a second per stream: a runtime printing
//! in a loop cannot fill the store; what it dropped is said in one record afterwards.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::logs::v1::ExportLogsServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, any_value::Value as Any},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    resource::v1::Resource,
};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tracing::{info, warn};

use crate::{llm::spans::text, telemetry::Telemetry};

/// The event name of a runtime's output records.
pub use roost_proto::RUNTIME_OUTPUT_EVENT as EVENT_NAME;
/// Most lines in one stored batch.
const BATCH: usize = 200;
/// Longest a line waits to be stored.
const FLUSH: Duration = Duration::from_millis(250);
/// Longest line stored, in bytes (the rest is cut).
const MAX_LINE: usize = 8 * 1024;
/// Most lines stored a second, per stream.
const PER_SECOND: usize = 500;
/// How many of stderr's last lines a tail keeps (a failed boot quotes them).
pub const TAIL_LINES: usize = 8;

/// Which of a runtime's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// stdout: info.
    Stdout,
    /// stderr: warn; its last lines explain a failed boot.
    Stderr,
}

impl Stream {
    fn severity(self) -> (i32, &'static str) {
        match self {
            Self::Stdout => (9, "INFO"),
            Self::Stderr => (13, "WARN"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// Whose output it is and where it goes.
#[derive(Clone)]
pub struct Output {
    /// The agent.
    pub instance_id: String,
    /// Its runtime's catalogue id (the records' service).
    pub runtime_id: String,
    /// The store, when roost observes activity.
    pub telemetry: Option<Arc<Telemetry>>,
}

impl Output {
    /// Reads `stream` line by line until it ends, logging and storing each line; keeps
    /// the last lines in `tail` when given.
    pub async fn forward(
        self,
        stream: impl AsyncRead + Unpin,
        which: Stream,
        tail: Option<Arc<Mutex<VecDeque<String>>>>,
    ) {
        let mut lines = BufReader::new(stream).lines();
        let mut batch: Vec<String> = Vec::new();
        let mut due: Option<tokio::time::Instant> = None;
        let mut window = (Instant::now(), 0usize);
        let mut dropped = 0usize;
        loop {
            let next = match due {
                Some(at) => tokio::select! {
                    line = lines.next_line() => line,
                    () = tokio::time::sleep_until(at) => {
                        self.store(which, std::mem::take(&mut batch), &mut dropped);
                        due = None;
                        continue;
                    }
                },
                None => lines.next_line().await,
            };
            let Ok(Some(line)) = next else { break };
            match which {
                Stream::Stdout => info!(target: "roost::runtime", instance = %self.instance_id, "{line}"),
                Stream::Stderr => warn!(target: "roost::runtime", instance = %self.instance_id, "{line}"),
            }
            if let Some(tail) = &tail
                && let Ok(mut tail) = tail.lock()
            {
                if tail.len() >= TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line.clone());
            }
            if self.telemetry.is_none() {
                continue;
            }
            if window.0.elapsed() >= Duration::from_secs(1) {
                window = (Instant::now(), 0);
            }
            if window.1 >= PER_SECOND {
                dropped += 1;
                continue;
            }
            window.1 += 1;
            batch.push(cut(line));
            due.get_or_insert_with(|| tokio::time::Instant::now() + FLUSH);
            if batch.len() >= BATCH {
                self.store(which, std::mem::take(&mut batch), &mut dropped);
                due = None;
            }
        }
        self.store(which, batch, &mut dropped);
    }

    /// Stores `lines` (and a note of any dropped) in the background.
    fn store(&self, which: Stream, mut lines: Vec<String>, dropped: &mut usize) {
        let Some(telemetry) = self.telemetry.clone() else { return };
        if *dropped > 0 {
            lines.push(format!(
                "[roost] {dropped} lines of {} were not stored (over {PER_SECOND} a second)",
                which.name()
            ));
            *dropped = 0;
        }
        if lines.is_empty() {
            return;
        }
        let request = self.request(which, lines);
        tokio::spawn(async move {
            if let Err(err) = telemetry.export_logs(request).await {
                tracing::debug!(error = %err.message(), "could not store a runtime's output");
            }
        });
    }

    fn request(&self, which: Stream, lines: Vec<String>) -> ExportLogsServiceRequest {
        let now = u64::try_from(crate::time::now_ms()).unwrap_or(0).saturating_mul(1_000_000);
        let (severity_number, severity) = which.severity();
        let records = lines
            .into_iter()
            .map(|line| LogRecord {
                time_unix_nano: now,
                observed_time_unix_nano: now,
                severity_number,
                severity_text: severity.to_owned(),
                body: Some(AnyValue { value: Some(Any::StringValue(line)) }),
                attributes: vec![text("session.id", &self.instance_id), text("log.iostream", which.name())],
                event_name: EVENT_NAME.to_owned(),
                ..LogRecord::default()
            })
            .collect();
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: vec![
                        text("service.name", &self.runtime_id),
                        text("roost.instance.id", &self.instance_id),
                        text("roost.runtime", &self.runtime_id),
                    ],
                    ..Resource::default()
                }),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope { name: "roost.runtime.output".into(), ..Default::default() }),
                    log_records: records,
                    ..ScopeLogs::default()
                }],
                ..ResourceLogs::default()
            }],
        }
    }
}

/// `line` cut to [`MAX_LINE`] bytes on a character boundary.
fn cut(mut line: String) -> String {
    if line.len() > MAX_LINE {
        let mut end = MAX_LINE;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push('…');
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let line = "é".repeat(MAX_LINE);
        let cut = cut(line);
        assert!(cut.len() <= MAX_LINE + '…'.len_utf8());
        assert!(cut.ends_with('…'));
        assert_eq!(super::cut("short".into()), "short");
    }
}
