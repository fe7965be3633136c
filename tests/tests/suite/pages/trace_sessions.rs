//! A session is a property of the trace (issue 48): a trace belongs to the session its root
//! names, else the earliest of its spans and log records that names one, whatever order
//! and in how many exports they arrive. Checked where people look: q/1 `sessions`, `spans`,
//! `logs`, `transcript`, `search`, the sessions pages, and the kept row counts; and the
//! background pass that attributes traces stored before.

use opentelemetry_proto::tonic::logs::v1::LogRecord;
use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::{Map, Value, json};

use super::sessions::{chat, int, now_ns, send_logs, send_spans, span, string};
use crate::observe::{assert_row_counts, q1};

each_backend!(
    calls_exported_before_their_root_count_in_its_session,
    a_trace_naming_two_sessions_goes_to_its_roots_else_the_earliest,
    log_records_before_any_span_join_their_traces_session,
    traces_stored_before_are_attributed_once_in_the_background,
);

/// A model call's span attributes without a session (what an instrumentation library
/// sends), with the user's prompt as its input message.
fn call(model: &str, input: i64, output: i64, prompt: &str) -> Vec<opentelemetry_proto::tonic::common::v1::KeyValue> {
    vec![
        string("gen_ai.operation.name", "chat"),
        string("gen_ai.request.model", model),
        int("gen_ai.usage.input_tokens", input),
        int("gen_ai.usage.output_tokens", output),
        string(
            "gen_ai.input.messages",
            &json!([{"role": "user", "parts": [{"type": "text", "content": prompt}]}]).to_string(),
        ),
    ]
}

async fn session(server: &TestServer, id: &str) -> Option<Map<String, Value>> {
    q1(&server.api(None), "sessions", json!({"session_id": id})).await.into_iter().next()
}

fn n(row: &Map<String, Value>, field: &str) -> i64 {
    row.get(field).and_then(Value::as_i64).unwrap_or_default()
}

/// The README's pattern: the calls (and a log record of theirs) exported first, with no
/// session; their root, naming the session, in a later request.
async fn calls_exported_before_their_root_count_in_its_session(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns() - 60_000_000_000;
    send_spans(
        &server,
        "wrapped-app",
        vec![
            span(9, 2, 1, "chat gpt-4o", now + 1_000_000, 100, call("gpt-4o", 100, 10, "Where is Lisbon?")),
            span(9, 3, 1, "chat gpt-4o", now + 200_000_000, 100, call("gpt-4o", 200, 20, "And Porto?")),
        ],
    )
    .await;
    let record = LogRecord {
        time_unix_nano: now + 150_000_000,
        severity_number: 17,
        trace_id: vec![9; 16],
        span_id: 2u64.to_be_bytes().to_vec(),
        body: Some(opentelemetry_proto::tonic::common::v1::AnyValue {
            value: Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
                "the Lisbon lookup was slow".into(),
            )),
        }),
        ..Default::default()
    };
    send_logs(&server, "wrapped-app", vec![record]).await;
    let api = server.api(None);
    let sessionless = q1(&api, "traces", json!({"sessionless": true})).await;
    assert_eq!(sessionless.len(), 1, "no session yet: a conversation of its own: {sessionless:#?}");

    send_spans(&server, "wrapped-app", vec![span(9, 1, 0, "turn", now, 500, vec![string("session.id", "wrapped")])])
        .await;
    let row = session(&server, "wrapped").await.expect("the session");
    assert_eq!((n(&row, "spans"), n(&row, "logs"), n(&row, "errors")), (3, 1, 1), "{row:#?}");
    assert_eq!((n(&row, "input_tokens"), n(&row, "output_tokens")), (300, 30), "{row:#?}");
    assert!(row["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "priced: {row:#?}");
    assert_eq!(row["last_model"], "gpt-4o", "{row:#?}");
    assert!(q1(&api, "traces", json!({"sessionless": true})).await.is_empty());
    assert_eq!(q1(&api, "spans", json!({"session_id": "wrapped"})).await.len(), 3);
    assert_eq!(q1(&api, "logs", json!({"session_id": "wrapped"})).await.len(), 1);
    let transcript = q1(&api, "transcript", json!({"session_id": "wrapped"})).await;
    let said: Vec<&str> =
        transcript.iter().filter(|r| r["kind"] == "message").filter_map(|r| r["text"].as_str()).collect();
    assert_eq!(said, ["Where is Lisbon?", "And Porto?"], "{transcript:#?}");
    let hits = q1(&api, "search", json!({"text": "lisbon"})).await;
    assert!(!hits.is_empty() && hits.iter().all(|h| h["session_id"] == "wrapped"), "{hits:#?}");

    // A call exported after its root joins the session as it arrives.
    send_spans(
        &server,
        "wrapped-app",
        vec![span(9, 4, 1, "chat gpt-4o", now + 400_000_000, 50, call("gpt-4o", 1, 1, "Thanks"))],
    )
    .await;
    let row = session(&server, "wrapped").await.unwrap();
    assert_eq!((n(&row, "spans"), n(&row, "input_tokens")), (4, 301), "{row:#?}");

    // The pages say the same.
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/sessions").await;
    assert_eq!(page.status, StatusCode::OK);
    let cells = page.texts("table.sessions tbody tr:first-child td");
    assert_eq!(cells[0], "wrapped", "{cells:?}");
    assert_eq!(cells[10..12], ["301", "31"], "tokens: {cells:?}");
    assert!(cells[12].starts_with('$') && cells[12] != "$0", "priced: {cells:?}");
    let page = visitor.get("/dashboard/sessions/wrapped").await;
    assert_eq!(page.status, StatusCode::OK);
    let text = page.main_text();
    assert!(text.contains("Where is Lisbon?") && text.contains("And Porto?"), "{text}");
    assert_row_counts(&server).await;
}

/// The root's session wins over a child's, whichever arrives first; without a root, the
/// earliest claim wins. The session a trace leaves with nothing is gone.
async fn a_trace_naming_two_sessions_goes_to_its_roots_else_the_earliest(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns() - 60_000_000_000;
    send_spans(&server, "svc", vec![span(4, 2, 1, "chat", now + 10, 10, chat("child-said", "gpt-4o", 10, 1))]).await;
    assert_eq!(session(&server, "child-said").await.map(|r| n(&r, "spans")), Some(1));
    send_spans(&server, "svc", vec![span(4, 1, 0, "turn", now, 100, vec![string("session.id", "root-said")])]).await;
    assert!(session(&server, "child-said").await.is_none(), "left empty, deleted");
    let root = session(&server, "root-said").await.unwrap();
    assert_eq!((n(&root, "spans"), n(&root, "input_tokens")), (2, 10), "{root:#?}");
    // A later child naming another session stays in the root's.
    send_spans(&server, "svc", vec![span(4, 3, 1, "chat", now + 20, 10, chat("other", "gpt-4o", 5, 1))]).await;
    assert!(session(&server, "other").await.is_none());
    assert_eq!(session(&server, "root-said").await.map(|r| n(&r, "input_tokens")), Some(15));

    // No root: the earliest claim, here a later export's.
    send_spans(&server, "svc", vec![span(5, 2, 1, "step", now + 500, 10, chat("later", "gpt-4o", 1, 1))]).await;
    send_spans(&server, "svc", vec![span(5, 3, 1, "step", now + 100, 10, chat("earlier", "gpt-4o", 2, 1))]).await;
    assert!(session(&server, "later").await.is_none());
    assert_eq!(session(&server, "earlier").await.map(|r| (n(&r, "spans"), n(&r, "input_tokens"))), Some((2, 3)));
    let traces = q1(&server.api(None), "traces", json!({"session_id": "earlier"})).await;
    assert_eq!(traces.len(), 1, "{traces:#?}");
    assert_row_counts(&server).await;
}

/// Log records exported before any span of their trace wait unnumbered; when the trace's
/// spans arrive they join its session, and their claim counts when no span names one.
async fn log_records_before_any_span_join_their_traces_session(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns() - 60_000_000_000;
    let record = |trace: u8, session: Option<&str>| LogRecord {
        time_unix_nano: now + 5,
        severity_number: 9,
        trace_id: vec![trace; 16],
        attributes: session.map(|s| vec![string("session.id", s)]).unwrap_or_default(),
        ..Default::default()
    };
    send_logs(&server, "svc", vec![record(6, None), record(7, Some("from-a-log"))]).await;
    send_spans(&server, "svc", vec![span(6, 1, 0, "turn", now, 100, vec![string("session.id", "root-6")])]).await;
    send_spans(&server, "svc", vec![span(7, 1, 0, "turn", now, 100, call("gpt-4o", 7, 1, "hi"))]).await;
    let six = session(&server, "root-6").await.unwrap();
    assert_eq!((n(&six, "spans"), n(&six, "logs")), (1, 1), "{six:#?}");
    let seven = session(&server, "from-a-log").await.unwrap();
    assert_eq!((n(&seven, "spans"), n(&seven, "logs"), n(&seven, "input_tokens")), (1, 1, 7), "{seven:#?}");
    assert_eq!(q1(&server.api(None), "logs", json!({"session_id": "root-6"})).await.len(), 1);
    assert_row_counts(&server).await;
}

/// A store written before sessions were the trace's: its calls outside their root's
/// session. The background pass moves them in once, resumably.
async fn traces_stored_before_are_attributed_once_in_the_background(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns() - 60_000_000_000;
    send_spans(
        &server,
        "old-app",
        vec![
            span(8, 1, 0, "turn", now, 500, vec![string("session.id", "old-session")]),
            span(8, 2, 1, "chat gpt-4o", now + 1_000, 100, call("gpt-4o", 40, 4, "Where is Lisbon?")),
        ],
    )
    .await;
    // As the earlier binary left it: only the root in the session.
    for statement in [
        "UPDATE spans SET session_id = NULL WHERE parent_span_id <> ''",
        "UPDATE messages SET session_id = NULL",
        "UPDATE search_docs SET session_id = '' WHERE span_id <> ''",
        "UPDATE traces SET session_rank = 9223372036854775807",
        "UPDATE sessions SET spans = 1, input_tokens = 0, output_tokens = 0, cost_nanocents = 0",
        "UPDATE roost_meta SET value = (SELECT CAST(MAX(seq) AS TEXT) FROM traces) WHERE key = 'session_backfill_traces'",
    ] {
        server.sql(statement).await.unwrap();
    }
    assert_eq!(session(&server, "old-session").await.map(|r| n(&r, "input_tokens")), Some(0));

    let store = server.store().await;
    assert_eq!(roost_server::telemetry::trace_sessions::backfill(store).await.unwrap(), 0, "no trace changed session");
    let row = session(&server, "old-session").await.unwrap();
    assert_eq!((n(&row, "spans"), n(&row, "input_tokens"), n(&row, "output_tokens")), (2, 40, 4), "{row:#?}");
    let api = server.api(None);
    assert_eq!(q1(&api, "spans", json!({"session_id": "old-session"})).await.len(), 2);
    let hits = q1(&api, "search", json!({"text": "lisbon"})).await;
    assert!(!hits.is_empty() && hits.iter().all(|h| h["session_id"] == "old-session"), "{hits:#?}");
    // Done: the mark is 0, and running again changes nothing.
    assert_eq!(
        server
            .sql("SELECT COUNT(*) FROM roost_meta WHERE key = 'session_backfill_traces' AND value = '0'")
            .await
            .unwrap(),
        [1]
    );
    assert_eq!(roost_server::telemetry::trace_sessions::backfill(store).await.unwrap(), 0);
    assert_eq!(session(&server, "old-session").await.map(|r| n(&r, "input_tokens")), Some(40));
}
