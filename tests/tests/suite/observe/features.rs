//! The dashboard's feature APIs, answered from real ingested data.

use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;
use roost_tests::{Backend, TestServer, each_backend};

use super::{otlp::traces_request, post_otlp};

each_backend!(usage_sums_tokens_and_cost_per_day_model_and_session);

/// Spans of `traces_request`, moved to now.
async fn ingest_now(server: &TestServer, trace: u8, spans: usize, session: &str) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut request = traces_request(trace, spans, session);
    for span in &mut request.resource_spans[0].scope_spans[0].spans {
        span.end_time_unix_nano = now + (span.end_time_unix_nano - span.start_time_unix_nano);
        span.start_time_unix_nano = now;
    }
    let reply = post_otlp(server, "/v1/traces", "application/x-protobuf", request.encode_to_vec()).await;
    assert_eq!(reply.status(), 200);
}

async fn usage_sums_tokens_and_cost_per_day_model_and_session(backend: Backend) {
    let server = TestServer::start(backend).await;
    ingest_now(&server, 1, 3, "cheap").await;
    ingest_now(&server, 2, 5, "dear").await;
    let api = server.api(None);
    let usage = api.get("/api/usage?days=7").await.ok();
    assert_eq!(usage["warning"], "", "{usage}");
    let days = usage["days"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{usage}");
    assert_eq!(days[0]["input_tokens"], 800, "{usage}");
    assert_eq!(days[0]["output_tokens"], 80);
    let models = usage["models"].as_array().unwrap();
    assert_eq!(models[0]["model"], "claude-3-5-sonnet", "{usage}");
    assert_eq!(models[0]["calls"], 8);
    let cost = models[0]["cost_usd"].as_f64().unwrap();
    assert!(cost > 0.0, "{usage}");
    for total in ["today", "week", "month"] {
        assert_eq!(usage[total]["input_tokens"], 800, "{total}: {usage}");
    }
    let top = usage["top_sessions"].as_array().unwrap();
    assert_eq!(top.iter().map(|s| s["session_id"].as_str().unwrap()).collect::<Vec<_>>(), ["dear", "cheap"]);
    assert!((top[0]["cost_usd"].as_f64().unwrap() + top[1]["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9);
    api.get("/api/usage?days=many").await.err(400, "invalid_argument");
}
