//! Custom runs and events: ClawMetry's field names, idempotent event ids, limits.

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::q1;

each_backend!(runs_and_events_round_trip, duplicate_events_are_stored_once, bad_event_requests_are_refused);

async fn runs_and_events_round_trip(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let created =
        api.post("/api/v1/runs", json!({"runtime": "my-agent", "agent_id": "bot-1", "metadata": {"git": "abc"}})).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["ok"], true);
    let run_id = created.body["run_id"].as_str().unwrap().to_owned();

    let one = api
        .post(&format!("/api/v1/runs/{run_id}/events"), json!({"event": {"id": "e1", "event_type": "message", "role": "user", "data": {"text": "hi"}, "ts": "2026-11-22T10:00:00Z"}}))
        .await
        .ok();
    assert_eq!(one, json!({"ok": true, "accepted": 1, "ids": ["e1"], "duplicates": 0}));
    let many = api
        .post(
            &format!("/api/v1/runs/{run_id}/events"),
            json!({"events": [
                {"id": "e2", "event_type": "llm_call", "model": "gpt-4o", "input_tokens": 2000, "output_tokens": 100, "ts": 1795400001000_i64},
                {"event_type": "tool_call", "tool_name": "search", "ts": 1795400002},
            ]}),
        )
        .await
        .ok();
    assert_eq!(many["accepted"], 2);
    let generated = many["ids"][1].as_str().unwrap();
    assert!(generated.starts_with("evt_"), "{many}");

    let ended = api.post(&format!("/api/v1/runs/{run_id}/end"), json!({"status": "completed"})).await.ok();
    assert_eq!((ended["status"].as_str(), ended["ok"].as_bool()), (Some("completed"), Some(true)));
    let again = api.post(&format!("/api/v1/runs/{run_id}/end"), json!({"status": "failed"})).await.ok();
    assert_eq!(
        (again["status"].as_str(), again["ended_at"].clone()),
        (Some("completed"), ended["ended_at"].clone()),
        "ending twice changes nothing"
    );

    let run = api.get(&format!("/api/v1/runs/{run_id}")).await.ok();
    assert_eq!(run["runtime"], "my-agent");
    assert_eq!(run["session_id"], run_id, "the session defaults to the run");
    assert_eq!(run["agent_id"], "bot-1");
    assert_eq!(run["metadata"], json!({"git": "abc"}));
    assert_eq!(
        (run["events"].as_i64(), run["input_tokens"].as_i64(), run["output_tokens"].as_i64()),
        (Some(3), Some(2000), Some(100))
    );
    // gpt-4o: $2.50 / $10 per Mtok → 0.005 + 0.001.
    assert!((run["cost_usd"].as_f64().unwrap() - 0.006).abs() < 1e-12, "{run}");

    let events = q1(&api, "events", json!({"run_id": run_id})).await;
    let ids: Vec<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [generated, "e2", "e1"], "newest first (ts in seconds, milliseconds and RFC 3339)");
    assert_eq!(events[2]["data"], json!({"text": "hi"}));
    assert_eq!(events[2]["session_id"], run_id);
    assert_eq!(events[2]["agent_id"], "bot-1");
    let runs = q1(&api, "runs", json!({"agent_id": "bot-1"})).await;
    assert_eq!((runs[0]["run_id"].as_str(), runs[0]["status"].as_str()), (Some(run_id.as_str()), Some("completed")));
    let transcript = q1(&api, "transcript", json!({"session_id": run_id})).await;
    let kinds: Vec<&str> = transcript.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["message", "llm_call", "tool_call"], "oldest first");
}

async fn duplicate_events_are_stored_once(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let run_id = api.post("/api/v1/runs", json!({"runtime": "r"})).await.ok()["run_id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/runs/{run_id}/events");
    let batch = json!({"events": [{"id": "a", "input_tokens": 5}, {"id": "b"}, {"id": "a", "input_tokens": 5}]});
    let first = api.post(&path, batch.clone()).await.ok();
    assert_eq!((first["accepted"].as_i64(), first["duplicates"].as_i64()), (Some(3), Some(1)));
    let second = api.post(&path, batch).await.ok();
    assert_eq!((second["accepted"].as_i64(), second["duplicates"].as_i64()), (Some(3), Some(3)));
    assert_eq!(q1(&api, "events", json!({"run_id": run_id})).await.len(), 2);
    let run = api.get(&format!("/api/v1/runs/{run_id}")).await.ok();
    assert_eq!((run["events"].as_i64(), run["input_tokens"].as_i64()), (Some(2), Some(5)), "counted once");
}

async fn bad_event_requests_are_refused(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let run_id = api.post("/api/v1/runs", json!({"runtime": "r"})).await.ok()["run_id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/runs/{run_id}/events");

    let too_many: Vec<Value> = (0..1001).map(|i| json!({"id": format!("e{i}")})).collect();
    api.post(&path, json!({"events": too_many})).await.err(400, "invalid_argument");
    let at_limit: Vec<Value> = (0..1000).map(|i| json!({"id": format!("e{i}")})).collect();
    assert_eq!(api.post(&path, json!({"events": at_limit})).await.ok()["accepted"], 1000);

    api.post(&path, json!({})).await.err(400, "invalid_argument");
    api.post(&path, json!({"event": {"id": "x"}, "events": [{"id": "y"}]})).await.err(400, "invalid_argument");
    api.post(&path, json!({"event": {"ts": "yesterday"}})).await.err(400, "invalid_argument");
    api.post(&path, json!({"event": {"input_tokens": -1}})).await.err(400, "invalid_argument");
    api.post(&path, json!({"event": {"input_tokens": "lots"}})).await.err(400, "invalid_argument");
    api.post(&path, json!({"event": {}, "priority": 1})).await.err(400, "invalid_argument");
    api.post("/api/v1/runs/run_nope/events", json!({"event": {}})).await.err(404, "not_found");
    api.get("/api/v1/runs/run_nope").await.err(404, "not_found");
    api.post("/api/v1/runs/run_nope/end", json!({})).await.err(404, "not_found");
    api.post(&format!("/api/v1/runs/{run_id}/end"), json!({"status": "exploded"})).await.err(400, "invalid_argument");
    api.post("/api/v1/runs", json!({})).await.err(400, "invalid_argument");
    api.post("/api/v1/runs", json!({"runtime": "r", "metadata": [1, 2]})).await.err(400, "invalid_argument");

    let run = api.get(&format!("/api/v1/runs/{run_id}")).await.ok();
    assert_eq!(run["events"], 1000, "only the valid request stored anything");

    // Fields roost does not name are kept in the event's data, not refused.
    let extra = json!({"event": {"id": "x1", "duration_ms": 42, "status": "ok", "data": {"k": 1}}});
    api.post(&path, extra).await.ok();
    let stored = q1(&api, "events", json!({"run_id": run_id, "limit": 1000})).await;
    let x1 = stored.iter().find(|e| e["id"] == "x1").unwrap();
    assert_eq!(x1["data"], json!({"k": 1, "duration_ms": 42, "status": "ok"}));
}
