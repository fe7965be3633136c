//! The live streams over SSE (and gRPC): ingested activity reaches connected clients,
//! reconnects resume from Last-Event-ID, late resumes get a lagged notice, caps give 429.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::{logs::v1::ExportLogsServiceRequest, trace::v1::ExportTraceServiceRequest};
use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, any_value},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
};
use prost::Message;
use roost_proto::v1::{BrainStreamRequest, stream_service_client::StreamServiceClient};
use roost_tests::{Backend, Reply, SseClient, SseItem, TestServer, each_backend};
use serde_json::{Value, json};

use super::{otlp::traces_request, post_otlp};

each_backend!(ingested_activity_reaches_the_brain_stream_and_resumes);

const WAIT: Duration = Duration::from_secs(10);

async fn post_traces(server: &TestServer, request: &ExportTraceServiceRequest) {
    let reply = post_otlp(server, "/v1/traces", "application/x-protobuf", request.encode_to_vec()).await;
    assert_eq!(reply.status(), 200);
}

fn event_id(item: &SseItem) -> String {
    match item {
        SseItem::Event { id, .. } => id.clone().expect("an id"),
        SseItem::Comment(c) => panic!("comment {c}"),
    }
}

async fn ingested_activity_reaches_the_brain_stream_and_resumes(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut client = SseClient::open(server.http.get(server.url("/api/brain-stream"))).await.unwrap();
    assert_eq!(client.headers["content-type"], "text/event-stream");
    assert_eq!(client.headers["cache-control"], "no-cache");
    assert_eq!(client.headers["x-accel-buffering"], "no");

    post_traces(&server, &traces_request(1, 2, "sess-live")).await;
    let first = client.next_event(WAIT).await.expect("the first span");
    let span = first.json();
    assert_eq!((span["kind"].as_str(), span["title"].as_str()), (Some("span"), Some("root")), "{span}");
    assert_eq!(span["session_id"], "sess-live");
    assert_eq!(span["model"], "claude-3-5-sonnet");
    assert_eq!(span["input_tokens"], 100);
    assert!(span["detail"].as_str().unwrap().contains("session.id"), "{span}");
    let second = client.next_event(WAIT).await.expect("the second span");
    assert_eq!(second.json()["title"], "step 1");
    let seen = event_id(&second);
    // A resent request stores nothing new and streams nothing.
    post_traces(&server, &traces_request(1, 2, "sess-live")).await;
    drop(client);

    // While disconnected: a run event with a long payload, and more spans.
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "custom", "session_id": "sess-live"})).await.ok();
    let run_id = run["run_id"].as_str().unwrap();
    let long = "x".repeat(1000);
    api.post(
        &format!("/api/v1/runs/{run_id}/events"),
        json!({"event": {"id": "e1", "event_type": "tool_call", "tool_name": "grep", "data": {"text": long}}}),
    )
    .await
    .ok();
    post_traces(&server, &traces_request(2, 1, "sess-live")).await;

    let mut resumed =
        SseClient::open(server.http.get(server.url("/api/brain-stream")).header("last-event-id", &seen)).await.unwrap();
    let event = resumed.next_event(WAIT).await.expect("the missed event").json();
    assert_eq!((event["kind"].as_str(), event["tool_name"].as_str()), (Some("event"), Some("grep")), "{event}");
    assert_eq!(event["run_id"], run_id);
    assert_eq!(event["detail"].as_str().unwrap().chars().count(), 300, "detail is the first 300 characters");
    let span = resumed.next_event(WAIT).await.expect("the missed span").json();
    assert_eq!(span["trace_id"], "02".repeat(16));
    assert!(resumed.next_event(Duration::from_millis(300)).await.is_none(), "nothing else: the resend added nothing");

    // The same stream over gRPC.
    let mut grpc = StreamServiceClient::new(server.channel().await)
        .brain_stream(BrainStreamRequest { last_event_id: seen.parse().unwrap() })
        .await
        .unwrap()
        .into_inner();
    let item = tokio::time::timeout(WAIT, grpc.message()).await.unwrap().unwrap().unwrap();
    assert_eq!(item.event.unwrap().tool_name, "grep");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_turns_are_on_the_brain_stream() {
    let server = TestServer::start(Backend::Sqlite).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "streamed").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let mut client = SseClient::open(server.http.get(server.url("/api/brain-stream"))).await.unwrap();
    api.message(&id, "hello stream").await.ok();
    let turn = client.next_event(WAIT).await.expect("the turn").json();
    assert_eq!((turn["kind"].as_str(), turn["agent_id"].as_str()), (Some("turn"), Some(id.as_str())), "{turn}");
    assert!(turn["detail"].as_str().unwrap().contains("hello stream"), "{turn}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_older_than_the_buffer_gets_a_lagged_notice() {
    let server = TestServer::start(Backend::Sqlite).await;
    let mut client = SseClient::open(server.http.get(server.url("/api/brain-stream"))).await.unwrap();
    post_traces(&server, &traces_request(1, 1, "s")).await;
    let seen = event_id(&client.next_event(WAIT).await.unwrap());
    drop(client);
    // More than the buffer holds (4096) while away.
    for trace in 2..4 {
        post_traces(&server, &traces_request(trace, 2500, "s")).await;
    }
    let mut resumed =
        SseClient::open(server.http.get(server.url("/api/brain-stream")).header("last-event-id", &seen)).await.unwrap();
    match resumed.next(WAIT).await.expect("a notice") {
        SseItem::Event { event, data, .. } => {
            assert_eq!(event, "lagged");
            let skipped: Value = serde_json::from_str(&data).unwrap();
            assert_eq!(skipped["skipped"], 5000 - 4096, "{data}");
        }
        other => panic!("expected the lagged notice, got {other:?}"),
    }
    assert_eq!(resumed.next_event(WAIT).await.unwrap().json()["kind"], "span");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eleventh_log_stream_client_gets_429_and_levels_filter() {
    let server = TestServer::start(Backend::Sqlite).await;
    let open = || SseClient::open(server.http.get(server.url("/api/logs?level=warn")));
    let mut clients = Vec::new();
    for _ in 0..10 {
        clients.push(open().await.unwrap());
    }
    let (status, body) = open().await.unwrap_err();
    assert_eq!((status, body["code"].as_str()), (429, Some("queue_full")), "{body}");
    // A place frees once the server sees the client hang up: soon, not at once.
    clients.pop();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match open().await {
            Ok(client) => break clients.push(client),
            Err((429, _)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(refused) => panic!("a freed place stays taken: {refused:?}"),
        }
    }
    Reply::of(server.http.get(server.url("/api/logs?level=loud"))).await.err(400, "invalid_argument");

    let record = |severity: i32, text: &str| LogRecord {
        time_unix_nano: 1_700_000_000_000_000_000,
        severity_number: severity,
        body: Some(AnyValue { value: Some(any_value::Value::StringValue(text.into())) }),
        ..Default::default()
    };
    let logs = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs {
                log_records: vec![record(9, "just info"), record(17, "it broke")],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let reply = post_otlp(&server, "/v1/logs", "application/x-protobuf", logs.encode_to_vec()).await;
    assert_eq!(reply.status(), 200);
    let client = clients.last_mut().unwrap();
    // roost's own warnings, if any, may come first.
    let line = loop {
        let line = client.next_event(WAIT).await.expect("the error line").json();
        if line["source"] != "roost" {
            break line;
        }
    };
    assert_eq!((line["level"].as_str(), line["message"].as_str()), (Some("error"), Some("it broke")), "{line}");
    assert_eq!(line["source"], "ingest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roost_own_log_lines_are_on_the_log_stream() {
    let server = TestServer::start(Backend::Sqlite).await;
    let mut client = SseClient::open(server.http.get(server.url("/api/logs"))).await.unwrap();
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "logged").await["id"].as_str().unwrap().to_owned();
    // Several servers share this process's log; find this one's line.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let line = client.next_event(deadline - tokio::time::Instant::now()).await.expect("roost's own line").json();
        if line["source"] == "roost" && line["message"].as_str().unwrap().contains(&id) {
            assert!(line["message"].as_str().unwrap().starts_with("agent provisioned"), "{line}");
            assert_eq!(line["level"], "info");
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_stream_starts_with_the_report_and_keeps_alive() {
    let server =
        TestServer::start_with(Backend::Sqlite, |c| c.gateway.sse_keepalive = Duration::from_millis(100)).await;
    let report = Reply::of(server.http.get(server.url("/api/health"))).await.ok();
    let names: Vec<&str> = report["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["store", "ingest", "disk", "workers", "cluster", "sandbox"], "{report}");
    assert_eq!(report["checks"][0]["status"], "ok", "{report}");
    assert_eq!(report["checks"][3]["status"], "ok", "{report}");
    assert_eq!(report["checks"][5]["status"], "ok", "bubblewrap sandboxes process agents here: {report}");

    let mut client = SseClient::open(server.http.get(server.url("/api/health-stream"))).await.unwrap();
    let streamed = client.next_event(WAIT).await.expect("the current report").json();
    assert_eq!(streamed["checks"].as_array().unwrap().len(), 6, "{streamed}");
    assert!(matches!(client.next(WAIT).await, Some(SseItem::Comment(c)) if c == "keepalive"));
}
