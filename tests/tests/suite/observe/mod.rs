//! The observing half end to end: OTLP ingest over every wire, custom runs and events,
//! q/1, and node push.

mod control;
mod conversations;
mod empty_answers;
mod evaluators;
mod features;
mod hosted;
mod limits;
mod lists;
mod node;
pub mod otlp;
mod query;
mod retention;
mod runs;
mod scores;
mod search;
mod streams;
mod trace_keys;

use roost_tests::{Api, TestServer};
use serde_json::{Map, Value, json};

/// Runs a q/1 shape over REST; its rows.
pub async fn q1(api: &Api, shape: &str, args: Value) -> Vec<Map<String, Value>> {
    let reply = api.post("/api/local/query", json!({"shape": shape, "args": args})).await.ok();
    assert_eq!(reply["contract"], "q/1", "{reply}");
    assert_eq!(reply["shape"], shape);
    let rows: Vec<Map<String, Value>> =
        reply["rows"].as_array().unwrap().iter().map(|r| r.as_object().unwrap().clone()).collect();
    assert_eq!(reply["count"], rows.len());
    rows
}

/// POSTs an OTLP/HTTP body of `content_type` to `path` (`/v1/traces`, ...).
pub async fn post_otlp(server: &TestServer, path: &str, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    server.http.post(server.url(path)).header("content-type", content_type).body(body).send().await.unwrap()
}

/// `GET /api/status`'s row counts (kept as rows are added and deleted, not counted: see
/// `telemetry::row_counts`) equal the tables' rows.
pub async fn assert_row_counts(server: &TestServer) {
    let status = server.api(None).get("/api/status").await.ok();
    for table in ["spans", "logs", "metric_points", "events", "sessions"] {
        let rows = server.sql(&format!("SELECT COUNT(*) FROM {table}")).await.unwrap()[0];
        let shown = &status["store"][table];
        let shown = shown.as_i64().or_else(|| shown.as_str().and_then(|s| s.parse().ok())).unwrap_or_default();
        assert_eq!(shown, rows, "{table}: {status}");
    }
}
