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

/// The live page's first rows are what its stream carries: spans, custom-run events and
/// hosted turns, newest first, each with the same detail the stream's rows get (tokens
/// and cost, not a span's raw attributes).
async fn live_renders_events_and_turns_beside_spans(backend: Backend) {
    let server = TestServer::start(backend).await;
    post_json(&server, "/v1/traces", &genai_span(4, 1, "gpt-4o-mini", 300, 120, "s-live-mix")).await;
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "eval-harness", "session_id": "s-live-mix"})).await;
    let run_id = run.body["run_id"].as_str().unwrap().to_owned();
    api.post(
        &format!("/api/v1/runs/{run_id}/events"),
        json!({"event": {"event_type": "score", "data": {"score": 0.93}}}),
    )
    .await
    .ok();
    let account = server.account(0).await;
    let agents = server.api(Some(&account));
    let id = agents.provision("echo", "Be brief.").await["id"].as_str().unwrap().to_owned();
    agents.wait_status(&id, "running").await;
    agents.message(&id, "hello live page").await.ok();
    let mut visitor = Visitor::new(&server);
    let mut page = visitor.get("/dashboard/live").await;
    for _ in 0..100 {
        if page.texts("[data-stream] tbody tr").len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        page = visitor.get("/dashboard/live").await;
    }
    let kinds = page.texts("[data-stream] tbody td:nth-child(2)");
    for kind in ["span", "event", "turn"] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    let rows = page.texts("[data-stream] tbody tr");
    let span = rows.iter().find(|r| r.contains("chat gpt-4o-mini")).unwrap();
    assert!(span.contains("420 tokens · $0.00012"), "{span}");
    assert!(!span.contains("gen_ai"), "no raw attributes: {span}");
    let event = rows.iter().find(|r| r.contains("score")).unwrap();
    assert!(event.contains(r#"{"score":0.93}"#), "{event}");
    assert!(rows.iter().any(|r| r.contains("hello live page")), "the turn's data: {rows:?}");
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
    live_renders_events_and_turns_beside_spans,
    logs_filter_by_level_on_the_server_and_in_the_stream,
    logs_show_records_without_a_severity
);
