//! The live and logs pages without a browser: what they show with JavaScript off (the
//! latest items, server-rendered), the stream they open, the level filter.

use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::json;

use super::usage::{genai_span, post_json};

async fn live_renders_the_latest_spans_and_names_its_stream(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard/live").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(empty.main_text().contains("Nothing yet"), "{}", empty.main_text());
    post_json(&server, "/v1/traces", &genai_span(3, 1, "gpt-4o-mini", 10, 5, "s-live-html")).await;
    let page = visitor.get("/dashboard/live").await;
    assert_eq!(page.attrs("[data-stream]", "data-stream"), ["/api/brain-stream"]);
    assert_eq!(page.attrs("[data-stream]", "data-max"), ["200"]);
    let rows = page.texts("[data-stream] tbody tr");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].contains("chat gpt-4o-mini") && rows[0].contains("s-live-html"), "{rows:?}");
    assert_eq!(page.attrs("[data-stream] tbody a", "href"), ["/dashboard/sessions/s-live-html"]);
    assert!(page.backed_by().contains(&"GET /api/brain-stream (EventSource)".to_owned()));
}

async fn logs_filter_by_level_on_the_server_and_in_the_stream(backend: Backend) {
    let server = TestServer::start(backend).await;
    let record = |severity: i64, text: &str, body: &str| {
        json!({"severityNumber": severity, "severityText": text, "body": {"stringValue": body},
               "timeUnixNano": (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64).to_string()})
    };
    let logs = json!({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "pages-logs"}}]},
        "scopeLogs": [{"logRecords": [record(9, "INFO", "routine note"), record(13, "WARN", "disk getting full")]}],
    }]});
    post_json(&server, "/v1/logs", &logs).await;
    let mut visitor = Visitor::new(&server);
    let info = visitor.get("/dashboard/logs").await;
    let text = info.main_text();
    assert!(text.contains("routine note") && text.contains("disk getting full"), "{text}");
    let warn = visitor.get("/dashboard/logs?level=warn").await;
    let text = warn.main_text();
    assert!(!text.contains("routine note") && text.contains("disk getting full"), "{text}");
    assert_eq!(warn.attrs("[data-stream]", "data-stream"), ["/api/logs?level=warn"]);
    assert_eq!(warn.attrs("select[name=level] option[selected]", "value"), ["warn"]);
    assert!(warn.backed_by().iter().any(|c| c.contains("\"min_severity\":13")), "{:?}", warn.backed_by());
}

/// GenAI log events (`gen_ai.user.message`, `gen_ai.choice`, …) carry no severity: the
/// logs page shows them at its default level as "unset", as the stream does, and an empty
/// page shows its empty state without a table header under it.
async fn logs_show_records_without_a_severity(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard/logs").await;
    assert!(empty.main_text().contains("Nothing yet"), "{}", empty.main_text());
    assert_eq!(empty.attrs(".feed .scroll[hidden]", "class"), ["scroll"], "the empty page hides its table");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let logs = json!({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "genai-events"}}]},
        "scopeLogs": [{"logRecords": [{
            "timeUnixNano": now.to_string(), "eventName": "gen_ai.choice",
            "body": {"stringValue": "the assistant's choice"},
        }]}],
    }]});
    post_json(&server, "/v1/logs", &logs).await;
    let page = visitor.get("/dashboard/logs").await;
    let rows = page.texts("[data-stream] tbody tr");
    assert_eq!(rows.len(), 1, "{}", page.main_text());
    assert!(rows[0].contains("unset") && rows[0].contains("the assistant's choice"), "{rows:?}");
    assert!(!page.main_text().contains("Nothing yet"), "{}", page.main_text());
    assert!(page.attrs(".feed .scroll[hidden]", "class").is_empty());
    let warn = visitor.get("/dashboard/logs?level=warn").await;
    assert!(warn.texts("[data-stream] tbody tr").is_empty(), "unset is below warn, as in the stream");
}

each_backend!(
    live_renders_the_latest_spans_and_names_its_stream,
    logs_filter_by_level_on_the_server_and_in_the_stream,
    logs_show_records_without_a_severity
);
