//! The dashboard's feature APIs, answered from real ingested data.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::{otlp::traces_request, post_otlp};

each_backend!(usage_sums_tokens_and_cost_per_day_model_and_session, a_cron_messages_a_hosted_agent_on_time);

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

fn ms(time: &Value) -> i64 {
    let at: prost_types::Timestamp = time.as_str().unwrap().parse().unwrap();
    at.seconds * 1000 + i64::from(at.nanos) / 1_000_000
}

async fn a_cron_messages_a_hosted_agent_on_time(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(10_000).await;
    let owner = server.api(Some(&account));
    let agent = owner.provision("echo", "cron target").await["id"].as_str().unwrap().to_owned();
    owner.wait_status(&agent, "running").await;

    let api = server.api(None);
    api.post("/api/crons", json!({"instance_id": agent, "schedule": "every minute", "message": "x"}))
        .await
        .err(400, "invalid_argument");
    api.post("/api/crons", json!({"instance_id": agent, "schedule": "* * * * *", "message": ""}))
        .await
        .err(400, "invalid_argument");
    api.post("/api/crons", json!({"instance_id": "ins_nope", "schedule": "* * * * *", "message": "x"}))
        .await
        .err(404, "not_found");
    api.get("/api/crons/cron_nope").await.err(404, "not_found");
    assert_eq!(api.get("/api/crons").await.ok()["crons"], json!([]), "refused requests stored nothing");

    let cron = api
        .post(
            "/api/crons",
            json!({"instance_id": agent, "name": "pinger", "schedule": "* * * * * *", "message": "ping from cron"}),
        )
        .await
        .ok();
    let id = cron["id"].as_str().unwrap().to_owned();
    assert_eq!(cron["enabled"], true, "{cron}");
    let first_due = ms(&cron["next_run"]);

    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let runs = loop {
        let got = api.get(&format!("/api/crons/{id}")).await.ok();
        let runs = got["runs"].as_array().unwrap().clone();
        if runs.len() >= 2 {
            break runs;
        }
        assert!(tokio::time::Instant::now() < deadline, "the cron did not run twice: {got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let oldest = runs.last().unwrap();
    assert_eq!(oldest["ok"], true, "{oldest}");
    assert!(oldest["reply"].as_str().unwrap().contains("ping from cron"), "{oldest}");
    let late = ms(&oldest["started_at"]) - first_due;
    assert!((0..1500).contains(&late), "ran {late} ms after it was due");
    let activity = owner.get(&format!("/api/instances/{agent}/activity")).await.ok();
    assert!(activity["turns"].as_array().unwrap().iter().any(|t| t["text"] == "ping from cron"), "{activity}");

    let killed = api.post(&format!("/api/crons/{id}/kill"), json!({})).await.ok();
    assert_eq!((killed["enabled"].as_bool(), killed["next_run"].is_null()), (Some(false), true), "{killed}");
    let after_kill = api.get(&format!("/api/crons/{id}")).await.ok()["runs"].as_array().unwrap().len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = api.get(&format!("/api/crons/{id}")).await.ok()["runs"].as_array().unwrap().len();
    // A run claimed just before the kill may still land.
    assert!(later <= after_kill + 1, "a killed cron kept running: {after_kill} then {later}");

    let listed = api.get("/api/crons").await.ok();
    assert_eq!(listed["crons"][0]["id"], id.as_str(), "{listed}");
    api.post(&format!("/api/crons/{id}"), json!({"schedule": "61 * * * *"})).await.err(400, "invalid_argument");
    let renamed = api.post(&format!("/api/crons/{id}"), json!({"name": "renamed"})).await.ok();
    assert_eq!((renamed["name"].as_str(), renamed["enabled"].as_bool()), (Some("renamed"), Some(false)));
    api.delete_path(&format!("/api/crons/{id}")).await.ok();
    api.get(&format!("/api/crons/{id}")).await.err(404, "not_found");
}
