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
    let (spans, events) = tokio::join!(
        query::run(&core, &page, "spans", json!({ "limit": RECENT })),
        query::run(&core, &page, "events", json!({ "limit": RECENT })),
    );
    // The stream's items, newest first: spans and events (custom-run events and hosted
    // turns) merged by time, as the stream interleaves them.
    let recent = spans.and_then(|spans| {
        let events = events?;
        let mut items: Vec<(i64, FeedRow)> = spans.rows.iter().map(span_row).collect();
        items.extend(events.rows.iter().map(event_row));
        items.sort_by_key(|(ns, _)| std::cmp::Reverse(*ns));
        items.truncate(RECENT as usize);
        let warning = [spans.warning, events.warning].into_iter().filter(|w| !w.is_empty()).collect::<Vec<_>>();
        Ok((items.into_iter().map(|(_, row)| row).collect::<Vec<_>>(), warning.join(" ")))
    });
    let (recent, warning) = match recent {
        Ok((rows, warning)) => (Ok(rows), warning),
        Err(err) => (Err(err.into()), String::new()),
    };
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

/// A brain item's detail, as the page script's `brainDetail` writes it for streamed
/// items (keep the two in step): why it failed, its tokens and cost, and for events
/// and turns their data. A span's raw attributes are left to the trace page.
fn brain_detail(kind: &str, used: i64, cost: f64, status: &str, status_message: &str, data: &str) -> String {
    let mut parts = Vec::new();
    if status == "error" {
        parts.push(if status_message.is_empty() { "error".to_owned() } else { format!("error: {status_message}") });
    }
    if used > 0 {
        parts.push(format!("{} tokens", tokens(used)));
        if cost > 0.0 {
            parts.push(usd(cost));
        }
    }
    if kind != "span" && !data.is_empty() {
        parts.push(data.to_owned());
    }
    parts.join(" · ")
}

/// The row of a brain item; the session links to its page.
fn brain_row(kind: &str, time: When, cells: [String; 3], session: String, detail: String, failed: bool) -> FeedRow {
    let [service, title, model] = cells;
    FeedRow {
        time,
        cells: vec![kind.to_owned(), service, title, model],
        link: (!session.is_empty()).then(|| (format!("/dashboard/sessions/{}", percent_encode(&session)), session)),
        detail,
        class: if failed { "error" } else { "" },
    }
}

/// A q/1 `spans` row as the stream shows a span (and its start in Unix ns, for merging).
fn span_row(r: &serde_json::Map<String, serde_json::Value>) -> (i64, FeedRow) {
    let start = text(r, "start_time");
    let status = text(r, "status");
    let used = int(r, "input_tokens") + int(r, "output_tokens");
    let detail = brain_detail("span", used, float(r, "cost_usd"), &status, &text(r, "status_message"), "");
    let cells = [text(r, "service"), text(r, "name"), text(r, "model")];
    let row = brain_row("span", When::iso(&start), cells, text(r, "session_id"), detail, status == "error");
    (super::sessions::unix_ns(&start).unwrap_or(0), row)
}

/// A q/1 `events` row as the stream shows it: a hosted agent's turn, or a run's event.
fn event_row(r: &serde_json::Map<String, serde_json::Value>) -> (i64, FeedRow) {
    let ts = text(r, "ts");
    let event_type = text(r, "event_type");
    let kind = if text(r, "run_id").is_empty() && event_type == "turn" { "turn" } else { "event" };
    let data = match r.get("data") {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(value) => value.to_string().chars().take(DETAIL_CHARS).collect(),
    };
    let used = int(r, "input_tokens") + int(r, "output_tokens");
    let detail = brain_detail(kind, used, float(r, "cost_usd"), "", "", &data);
    let row = brain_row(
        kind,
        When::iso(&ts),
        [String::new(), event_type, text(r, "model")],
        text(r, "session_id"),
        detail,
        false,
    );
    (super::sessions::unix_ns(&ts).unwrap_or(0), row)
}

/// Characters of an event's data the stream carries (`BrainEvent.detail`).
const DETAIL_CHARS: usize = 300;

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

    #[test]
    fn brain_details_say_why_what_it_cost_and_the_events_data() {
        use super::brain_detail;
        assert_eq!(brain_detail("span", 420, 0.0013, "ok", "", ""), "420 tokens · $0.0013");
        assert_eq!(
            brain_detail("span", 0, 0.0, "error", "upstream 529 overloaded", ""),
            "error: upstream 529 overloaded"
        );
        assert_eq!(brain_detail("span", 0, 0.0, "", "", r#"{"a":1}"#), "", "a span's attributes are not shown");
        assert_eq!(brain_detail("turn", 12, 0.0, "", "", r#"{"text":"hi"}"#), r#"12 tokens · {"text":"hi"}"#);
    }
}
