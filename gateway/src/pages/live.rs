//! `/dashboard/live` (the brain stream) and `/dashboard/logs` (the log stream).
//!
//! Each page is complete without JavaScript: the server renders the most recent items
//! from q/1 (spans for the live feed, log records for logs). With JavaScript, the page
//! script opens the stream with EventSource and puts each new item on top, keeping at most
//! [`MAX_ROWS`] rows; Pause closes the stream and Resume reopens it after the last event
//! id seen (`?last_event_id=`), and EventSource's own reconnects resend `Last-Event-ID`.
//! A refused or dead stream says so with a Reconnect button, never an endless spinner.

use askama::Template;
use axum::{
    Router,
    extract::{Query, State},
    response::Response,
    routing::get,
};
use serde::Deserialize;
use serde_json::json;

use super::{
    Failure, When, float, int,
    layout::{Chrome, PageCall, percent_encode},
    query, text, tokens, usd,
};
use crate::Core;

/// Rows a live table keeps; older ones are dropped as new ones arrive.
pub const MAX_ROWS: usize = 200;

/// Rows rendered on the server before the stream takes over.
const RECENT: i64 = 50;

pub(super) fn routes() -> Router<Core> {
    Router::new().route("/dashboard/live", get(live)).route("/dashboard/logs", get(logs))
}

/// One row of either feed, as the server renders it (the script renders the same columns).
struct FeedRow {
    time: When,
    cells: Vec<String>,
    link: Option<(String, String)>,
    detail: String,
    class: &'static str,
}

#[derive(Template)]
#[template(path = "live.html")]
struct Live {
    chrome: Chrome,
    heading: &'static str,
    intro: &'static str,
    stream: String,
    kind: &'static str,
    max: usize,
    columns: &'static [&'static str],
    recent: Result<Vec<FeedRow>, Failure>,
    warning: String,
    levels: &'static [&'static str],
    level: String,
}

async fn live(State(core): State<Core>, page: PageCall) -> Response {
    page.note("GET /api/brain-stream (EventSource)");
    let recent = query::run(&core, &page, "spans", json!({ "limit": RECENT })).await;
    let (recent, warning) = split(recent, |r| {
        let model = text(r, "model");
        let used = int(r, "input_tokens") + int(r, "output_tokens");
        let mut detail = text(r, "status_message");
        if used > 0 {
            detail = format!("{} tokens · {} {detail}", tokens(used), usd(float(r, "cost_usd")));
        }
        let session = text(r, "session_id");
        FeedRow {
            time: When::iso(&text(r, "start_time")),
            cells: vec!["span".into(), text(r, "service"), text(r, "name"), model],
            link: (!session.is_empty()).then(|| (format!("/dashboard/sessions/{}", percent_encode(&session)), session)),
            detail,
            class: if text(r, "status") == "error" { "error" } else { "" },
        }
    });
    let view = Live {
        chrome: page.chrome("Live", "/dashboard/live"),
        heading: "Live activity",
        intro: "Spans, run events and hosted-agent turns as roost ingests them, newest on top.",
        stream: "/api/brain-stream".into(),
        kind: "brain",
        max: MAX_ROWS,
        columns: &["Time", "Kind", "Service", "What", "Model", "Session", "Detail"],
        recent,
        warning,
        levels: &[],
        level: String::new(),
    };
    page.render(&view)
}

#[derive(Debug, Default, Deserialize)]
struct LogFilter {
    #[serde(default)]
    level: String,
}

/// The stream's levels and the OTLP severity number each starts at.
const LEVELS: &[(&str, i64)] = &[("trace", 1), ("debug", 5), ("info", 9), ("warn", 13), ("error", 17)];

async fn logs(State(core): State<Core>, page: PageCall, Query(filter): Query<LogFilter>) -> Response {
    let level = LEVELS.iter().find(|(name, _)| *name == filter.level).copied().unwrap_or(("info", 9));
    let stream = format!("/api/logs?level={}", level.0);
    page.note(format!("GET {stream} (EventSource)"));
    // Records with no severity (GenAI events) count as info, as in the stream.
    let unset = level.1 <= 9;
    let recent =
        query::run(&core, &page, "logs", json!({ "limit": RECENT, "min_severity": level.1, "unset_severity": unset }))
            .await;
    let (recent, warning) = split(recent, |r| {
        let trace = text(r, "trace_id");
        let severity = text(r, "severity");
        let level = level_of(int(r, "severity_number"), &severity);
        FeedRow {
            time: When::iso(&text(r, "time")),
            cells: vec![level.to_owned(), "ingest".into(), text(r, "service")],
            link: (!trace.is_empty())
                .then(|| (format!("/dashboard/traces/{}", percent_encode(&trace)), "trace".into())),
            detail: text(r, "body"),
            class: match level {
                "error" => "level-error",
                "warn" => "level-warn",
                _ => "",
            },
        }
    });
    let view = Live {
        chrome: page.chrome("Logs", "/dashboard/logs"),
        heading: "Logs",
        intro: "Log records senders export over OTLP, and roost's own log lines, newest on top.",
        stream,
        kind: "logs",
        max: MAX_ROWS,
        columns: &["Time", "Level", "Source", "Service", "Message", "Trace"],
        recent,
        warning,
        levels: &["trace", "debug", "info", "warn", "error"],
        level: level.0.to_owned(),
    };
    page.render(&view)
}

/// The level name of an OTLP severity number (or its text when the number is unset;
/// "unset" when both are).
fn level_of(number: i64, text: &str) -> &'static str {
    match number {
        1..=4 => "trace",
        5..=8 => "debug",
        9..=12 => "info",
        13..=16 => "warn",
        17.. => "error",
        _ => match text.to_ascii_lowercase().as_str() {
            "trace" => "trace",
            "debug" => "debug",
            "warn" | "warning" => "warn",
            "error" | "fatal" | "critical" => "error",
            "" => "unset",
            _ => "info",
        },
    }
}

type QueryRows = Result<query::Rows, roost_proto::ApiError>;

/// Rows mapped by `row`, or the failure; and the shape's warning.
fn split(
    answer: QueryRows,
    row: impl Fn(&serde_json::Map<String, serde_json::Value>) -> FeedRow,
) -> (Result<Vec<FeedRow>, Failure>, String) {
    match answer {
        Ok(rows) if rows.truncated && rows.warning.is_empty() => {
            (Ok(rows.rows.iter().map(row).collect()), "Some items were left out: they were too large to show.".into())
        }
        Ok(rows) => (Ok(rows.rows.iter().map(row).collect()), rows.warning),
        Err(err) => (Err(err.into()), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::level_of;

    #[test]
    fn severities_map_to_the_stream_levels() {
        assert_eq!(level_of(9, ""), "info");
        assert_eq!(level_of(13, ""), "warn");
        assert_eq!(level_of(21, ""), "error");
        assert_eq!(level_of(0, "WARNING"), "warn");
        assert_eq!(level_of(0, ""), "unset");
        assert_eq!(level_of(0, "notice"), "info");
    }
}
