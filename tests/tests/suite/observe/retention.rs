//! Retention: old telemetry goes, recent telemetry and daily history stay; the size bound
//! deletes oldest first.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use roost_server::telemetry::retention::{RetentionConfig, sweep, used_bytes};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::json;

use super::{assert_row_counts, otlp::traces_request, q1};

each_backend!(the_worker_deletes_what_is_too_old, the_size_bound_deletes_oldest_first);

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Spans of trace `trace`, session `session` and user `session`, starting `age` ago.
async fn spans_aged(server: &TestServer, trace: u8, count: usize, session: &str, age: Duration) {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
    let mut request = traces_request(trace, count, session);
    let start = now_ns() - age.as_nanos() as u64;
    for (i, span) in request.resource_spans[0].scope_spans[0].spans.iter_mut().enumerate() {
        span.start_time_unix_nano = start + i as u64 * 1000;
        span.end_time_unix_nano = span.start_time_unix_nano + 500;
        let user = AnyValue { value: Some(Value::StringValue(session.into())) };
        span.attributes.push(KeyValue { key: "user.id".into(), value: Some(user), ..Default::default() });
    }
    TraceServiceClient::new(server.channel().await).export(request).await.unwrap();
}

async fn the_worker_deletes_what_is_too_old(backend: Backend) {
    let server = TestServer::start_with(backend, |config| {
        config.retention = RetentionConfig {
            max_age: Some(Duration::from_secs(86_400)),
            max_bytes: None,
            every: Duration::from_millis(100),
        };
    })
    .await;
    spans_aged(&server, 1, 3, "old", Duration::from_secs(3 * 86_400)).await;
    spans_aged(&server, 2, 2, "new", Duration::from_secs(60)).await;
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "r"})).await.ok()["run_id"].as_str().unwrap().to_owned();
    api.post(
        &format!("/api/v1/runs/{run}/events"),
        json!({"events": [{"id": "old", "ts": "2020-01-01T00:00:00Z"}, {"id": "new"}]}),
    )
    .await
    .ok();
    // Scores go by the time they were given.
    let aged = roost_server::time::rfc3339_ns((now_ns() - 3 * 86_400_000_000_000) as i64);
    let scores = json!({"scores": [{"name": "aged", "value": 1, "session_id": "new", "time": aged},
        {"name": "fresh", "value": 1, "session_id": "new"}]});
    api.post("/api/v1/scores", scores).await.ok();

    // A pass deletes table by table, and one may be half-way when the data arrives: wait
    // for the whole outcome.
    for _ in 0..100 {
        let spans = q1(&api, "spans", json!({})).await;
        let sessions = q1(&api, "sessions", json!({})).await;
        let events = q1(&api, "events", json!({"run_id": run})).await;
        let scores = q1(&api, "score_list", json!({})).await;
        if spans.len() == 2
            && events.len() == 1
            && scores.len() == 1
            && !sessions.iter().any(|s| s["session_id"] == "old")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spans = q1(&api, "spans", json!({})).await;
    assert!(spans.len() == 2 && spans.iter().all(|s| s["session_id"] == "new"), "{spans:?}");
    let sessions: Vec<String> =
        q1(&api, "sessions", json!({})).await.iter().map(|s| s["session_id"].as_str().unwrap().to_owned()).collect();
    assert!(sessions.contains(&"new".to_owned()) && !sessions.contains(&"old".to_owned()), "{sessions:?}");
    assert_eq!(q1(&api, "traces", json!({})).await.len(), 1);
    // Labels go with their traces.
    let labels = server.sql("SELECT COUNT(*) FROM trace_labels WHERE label = 'user:old'").await.unwrap();
    assert_eq!((labels, q1(&api, "traces", json!({"user": "new"})).await.len()), (vec![0], 1));
    let events: Vec<String> =
        q1(&api, "events", json!({"run_id": run})).await.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(events, ["new"]);
    let scores: Vec<_> = q1(&api, "score_list", json!({})).await.iter().map(|s| s["name"].clone()).collect();
    assert_eq!(scores, ["fresh"]);
    // Daily history stays.
    assert_eq!(
        q1(&api, "aggregates", json!({"days": 30})).await.iter().map(|d| d["spans"].as_i64().unwrap()).sum::<i64>(),
        5
    );
    assert_row_counts(&server).await;
}

async fn the_size_bound_deletes_oldest_first(backend: Backend) {
    let server = TestServer::start(backend).await;
    for day in 0..10u8 {
        spans_aged(&server, 10 + day, 200, &format!("day-{day}"), Duration::from_secs((10 - day as u64) * 3_600)).await;
    }
    let store = server.store().await;
    let used = used_bytes(store).await.unwrap();
    let config = RetentionConfig { max_age: None, max_bytes: Some(used / 2), every: Duration::from_secs(3600) };
    let swept = sweep(store, &config, now_ns() as i64).await.unwrap();
    assert!(swept.for_size > 0 && swept.aged == 0, "{swept:?}");

    let api = server.api(None);
    let left = q1(&api, "spans", json!({"limit": 1000})).await;
    assert!(!left.is_empty() && left.len() < 2000, "{}", left.len());
    let sessions: Vec<String> = q1(&api, "sessions", json!({"limit": 500}))
        .await
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(sessions.contains(&"day-9".to_owned()), "the newest survive: {sessions:?}");
    assert!(!sessions.contains(&"day-0".to_owned()), "the oldest go first: {sessions:?}");
    // The pass ended folding the counts' changes (one row per write and per deleted
    // chunk) into one.
    assert_eq!(server.sql("SELECT COUNT(*) FROM row_counts").await.unwrap(), [1]);
    assert_row_counts(&server).await;
    // Two passes folding at once (a leader handing over) count every row once.
    spans_aged(&server, 30, 50, "later", Duration::from_secs(60)).await;
    let fold_only = RetentionConfig { max_age: None, max_bytes: None, every: Duration::from_secs(3600) };
    let (a, b) = tokio::join!(sweep(store, &fold_only, now_ns() as i64), sweep(store, &fold_only, now_ns() as i64));
    a.unwrap();
    b.unwrap();
    assert_row_counts(&server).await;
}
