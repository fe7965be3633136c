//! Rows keyed by their trace's number (migrations 0028, 0029): a trace's log records and
//! messages are found by its id whether they arrived before its spans (stored unnumbered)
//! or after (numbered at once), and the first span numbers the ones that waited. A
//! session's rows are found the same way: through its traces, and (while they have no
//! trace number) by the session they name (migration 0036).

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::{otlp::traces_request, post_otlp, q1};

each_backend!(a_traces_logs_and_messages_are_found_before_and_after_its_spans);

/// A logs request: for each `(trace byte, event name, body)`, one record in that trace,
/// `at` ns after the traces' spans start, a nanosecond apart, each naming session `waiting`.
fn logs_request(at: u64, records: &[(u8, &str, &str)]) -> Value {
    let records: Vec<Value> = records
        .iter()
        .enumerate()
        .map(|(i, (trace, event, body))| {
            json!({
                "timeUnixNano": (1_700_000_000_000_000_000_u64 + at + i as u64).to_string(),
                "traceId": hex::encode([*trace; 16]),
                "spanId": hex::encode(1_u64.to_be_bytes()),
                "severityNumber": 9,
                "eventName": event,
                "body": {"stringValue": body},
                "attributes": [{"key": "session.id", "value": {"stringValue": "waiting"}}],
            })
        })
        .collect();
    json!({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "early-logs"}}]},
        "scopeLogs": [{"logRecords": records}],
    }]})
}

async fn post_logs(server: &TestServer, at: u64, records: &[(u8, &str, &str)]) {
    let body = serde_json::to_vec(&logs_request(at, records)).unwrap();
    let resp = post_otlp(server, "/v1/logs", "application/json", body).await;
    assert_eq!(resp.status(), 200);
}

/// Log records and messages of trace `trace` stored without its number, read from the
/// database beside roost.
async fn unnumbered(server: &TestServer, trace: u8) -> (i64, i64) {
    let count = |table: &str| {
        format!("SELECT COUNT(*) FROM {table} WHERE trace_seq IS NULL AND trace_id = '{}'", hex::encode([trace; 16]))
    };
    (server.sql(&count("logs")).await.unwrap()[0], server.sql(&count("messages")).await.unwrap()[0])
}

/// The transcript of trace `trace`: (source, text) of each item.
async fn transcript(api: &roost_tests::Api, trace: u8) -> Vec<(String, String)> {
    q1(api, "transcript", json!({"trace_id": hex::encode([trace; 16])}))
        .await
        .iter()
        .map(|r| (r["source"].as_str().unwrap().to_owned(), r["text"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// The transcript of session `session`: (source, text) of each item.
async fn session_transcript(api: &roost_tests::Api, session: &str) -> Vec<(String, String)> {
    q1(api, "transcript", json!({"session_id": session}))
        .await
        .iter()
        .map(|r| (r["source"].as_str().unwrap().to_owned(), r["text"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

async fn a_traces_logs_and_messages_are_found_before_and_after_its_spans(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let logs_of = |trace: u8| q1(&api, "logs", json!({"trace_id": hex::encode([trace; 16])}));
    let session_logs = |session: &'static str| q1(&api, "logs", json!({"session_id": session}));

    // Trace 7's records come first: a question (a message) and a plain record. Trace 8's
    // record never gets a span.
    post_logs(
        &server,
        100_000,
        &[(7, "gen_ai.user.message", r#"{"content":"where to?"}"#), (7, "planner.step", "planning"), (8, "x", "alone")],
    )
    .await;
    assert_eq!(unnumbered(&server, 7).await, (2, 1), "no span yet: stored unnumbered");
    assert_eq!(logs_of(7).await.len(), 2);
    let before = transcript(&api, 7).await;
    assert!(before.contains(&("message".into(), "where to?".into())), "{before:?}");
    assert!(before.contains(&("log".into(), "planning".into())), "{before:?}");
    // No trace reaches them yet: found by the session they name.
    assert_eq!(session_logs("waiting").await.len(), 3);
    let waiting = session_transcript(&api, "waiting").await;
    for item in [("message", "where to?"), ("log", "planning"), ("log", "alone")] {
        assert!(waiting.contains(&(item.0.into(), item.1.into())), "{item:?} in {waiting:?}");
    }

    // Its spans arrive: the waiting rows get the trace's number and are found as before.
    let spans = prost::Message::encode_to_vec(&traces_request(7, 2, "early"));
    assert_eq!(post_otlp(&server, "/v1/traces", "application/x-protobuf", spans).await.status(), 200);
    assert_eq!(unnumbered(&server, 7).await, (0, 0), "the first span numbers what waited");
    assert_eq!(unnumbered(&server, 8).await, (1, 0), "other traces' rows still wait");
    assert_eq!(logs_of(7).await.len(), 2);
    let after = transcript(&api, 7).await;
    assert_eq!(after.iter().filter(|(source, _)| source == "span").count(), 2, "{after:?}");
    for item in &before {
        assert!(after.contains(item), "{item:?} kept: {after:?}");
    }
    // The spans' root names session `early`: the trace and its waiting rows move there,
    // found through the trace; trace 8's record stays in `waiting`.
    assert_eq!(session_logs("early").await.len(), 2);
    let early = session_transcript(&api, "early").await;
    assert_eq!(early.iter().filter(|(source, _)| source == "span").count(), 2, "{early:?}");
    for item in &before {
        assert!(early.contains(item), "{item:?} in the trace's session: {early:?}");
    }
    assert_eq!(q1(&api, "spans", json!({"session_id": "early"})).await.len(), 2);
    let left = session_logs("waiting").await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["body"], "alone");
    assert!(q1(&api, "spans", json!({"session_id": ""})).await.is_empty(), "an empty id names no session");

    // A record after the spans is numbered at once; the trace without spans is found by id.
    post_logs(&server, 200_000, &[(7, "planner.step", "done")]).await;
    assert_eq!(unnumbered(&server, 7).await, (0, 0));
    let bodies: Vec<String> = logs_of(7).await.iter().map(|r| r["body"].as_str().unwrap().to_owned()).collect();
    assert_eq!(bodies, ["done", "planning", r#"{"content":"where to?"}"#], "newest first");
    assert!(transcript(&api, 7).await.contains(&("log".into(), "done".into())));
    assert_eq!(logs_of(8).await.len(), 1);
    assert!(logs_of(9).await.is_empty());
}
