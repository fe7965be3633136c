//! Node push: a `roost daemon --upstream` node and a central roost, through an outage of
//! the central one; heartbeats, tokens and batches pushed twice.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message;
use roost_proto::{
    json::value::{from_json, map_to_struct},
    v1::{AddRunEventsRequest, EndRunResponse, PushBatchRequest, PushBatchResponse, PushItem, Run, RunEvent},
};
use roost_server::node::pusher::PushConfig;
use roost_tests::{Api, Backend, TestServer, each_backend};
use serde_json::{Map, Value, json};

use super::{limits::nul_free, otlp::traces_request, q1};

each_backend!(
    everything_arrives_once_across_an_upstream_outage,
    heartbeats_report_the_plan_and_tokens_matter,
    a_batch_pushed_twice_is_applied_once,
    a_pushed_batch_with_nul_is_applied_with_it_replaced
);

/// A node (SQLite, as on an operator's laptop) pushing to `central` with `key`.
async fn node_of(central: &TestServer, key: &str) -> TestServer {
    let push = PushConfig {
        batch_items: 3,
        heartbeat_every: Duration::from_millis(200),
        max_backoff: Duration::from_millis(300),
        ..PushConfig::new(central.url(""), key.to_owned())
    };
    TestServer::start_with(Backend::Sqlite, |config| config.push = Some(push)).await
}

/// What a roost holds, counted the ways that would show a duplicate.
async fn counts(api: &Api) -> Map<String, Value> {
    let sessions = q1(api, "sessions", json!({"limit": 500})).await;
    let sum = |field: &str| sessions.iter().map(|s| s[field].as_i64().unwrap()).sum::<i64>();
    let mut out = Map::new();
    out.insert("spans".into(), sum("spans").into());
    out.insert("events".into(), sum("events").into());
    out.insert("logs".into(), q1(api, "logs", json!({"limit": 1000})).await.len().into());
    out.insert("span_rows".into(), q1(api, "spans", json!({"limit": 1000})).await.len().into());
    out.insert("runs".into(), q1(api, "runs", json!({})).await.len().into());
    out.insert("scores".into(), q1(api, "score_list", json!({"limit": 1000})).await.len().into());
    out
}

async fn ingest(node: &TestServer, round: u8) {
    TraceServiceClient::new(node.channel().await)
        .export(traces_request(100 + round, 3, &format!("push-{round}")))
        .await
        .unwrap();
    let api = node.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "r", "session_id": format!("push-{round}")})).await.ok();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    api.post(&format!("/api/v1/runs/{run_id}/events"), json!({"events": [{"id": "a"}, {"event_type": "x"}]}))
        .await
        .ok();
    api.post(&format!("/api/v1/runs/{run_id}/end"), json!({})).await.ok();
    let score = json!({"score": {"name": "pushed", "value": round, "session_id": format!("push-{round}")}});
    api.post("/api/v1/scores", score).await.ok();
    let log = json!({"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "node-svc"}}]},
        "scopeLogs": [{"logRecords": [{"timeUnixNano": "1700000000000000000", "body": {"stringValue": format!("round {round}")},
        "attributes": [{"key": "session.id", "value": {"stringValue": format!("push-{round}")}}]}]}]}]});
    let resp = node
        .http
        .post(node.url("/v1/logs"))
        .header("content-type", "application/json")
        .body(log.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

async fn wait_for(api: &Api, expected: &Map<String, Value>) {
    for _ in 0..200 {
        if &counts(api).await == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("central never matched the node: {:?} vs {expected:?}", counts(api).await);
}

async fn everything_arrives_once_across_an_upstream_outage(backend: Backend) {
    let central = TestServer::start(backend).await;
    let account = central.account(0).await;
    let node = node_of(&central, &account.key).await;

    ingest(&node, 1).await;
    let node_api = node.api(None);
    let expected = counts(&node_api).await;
    assert_eq!(expected["spans"], 3);
    wait_for(&central.api(None), &expected).await;

    // The central roost goes away; the node keeps ingesting and acknowledging.
    let (central, ()) = central
        .restart_after(async {
            ingest(&node, 2).await;
            ingest(&node, 3).await;
            tokio::time::sleep(Duration::from_millis(800)).await;
        })
        .await;
    let expected = counts(&node_api).await;
    assert_eq!(
        (expected["spans"].as_i64(), expected["logs"].as_i64(), expected["runs"].as_i64(), expected["scores"].as_i64()),
        (Some(9), Some(3), Some(3), Some(3))
    );
    wait_for(&central.api(None), &expected).await;
    // Nothing left to push, and nothing arrives twice later.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(counts(&central.api(None)).await, expected);
    let mut bodies: Vec<String> = q1(&central.api(None), "logs", json!({}))
        .await
        .iter()
        .map(|l| l["body"].as_str().unwrap().to_owned())
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["round 1", "round 2", "round 3"], "each round's own data, none lost or repeated");
}

async fn heartbeats_report_the_plan_and_tokens_matter(backend: Backend) {
    let central = TestServer::start(backend).await;
    let account = central.account(0).await;
    central.store().await.set_plan(&account.id, "pro").await.unwrap();
    let api = central.api(Some(&account));
    let beat =
        api.post("/ingest/heartbeat", json!({"node_id": "node-a", "version": "1.2.3", "outbox_depth": 4})).await.ok();
    assert_eq!(
        (beat["ok"].as_bool(), beat["plan"].as_str(), beat["applied_through"].as_i64()),
        (Some(true), Some("pro"), Some(0))
    );

    central.api(None).post("/ingest/heartbeat", json!({"node_id": "node-a"})).await.err(401, "unauthenticated");
    api.with_key(Some("rsk_wrong"))
        .post("/ingest/batch", json!({"node_id": "node-a"}))
        .await
        .err(401, "unauthenticated");
    let other = central.account(0).await;
    central.api(Some(&other)).post("/ingest/heartbeat", json!({"node_id": "node-a"})).await.err(404, "not_found");
    api.post("/ingest/heartbeat", json!({"node_id": ""})).await.err(400, "invalid_argument");

    // A daemon learns its plan from the heartbeat.
    let node = node_of(&central, &account.key).await;
    for _ in 0..100 {
        if node.store().await.meta_get("upstream_plan").await.unwrap().as_deref() == Some("pro") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the node never learned its plan");
}

async fn a_batch_pushed_twice_is_applied_once(backend: Backend) {
    let central = TestServer::start(backend).await;
    let account = central.account(0).await;
    let run = |id: &str| Run { id: id.into(), runtime: "r".into(), session_id: "s".into(), ..Run::default() };
    let batch = PushBatchRequest {
        node_id: "node-b".into(),
        items: vec![
            PushItem { seq: 1, kind: "run".into(), payload: run("run_one").encode_to_vec() },
            PushItem { seq: 2, kind: "run".into(), payload: run("run_two").encode_to_vec() },
        ],
    };
    let push = || {
        central
            .http
            .post(central.url("/ingest/batch"))
            .bearer_auth(&account.key)
            .header("content-type", "application/x-protobuf")
            .body(batch.encode_to_vec())
            .send()
    };
    let first = PushBatchResponse::decode(push().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!((first.applied, first.skipped, first.applied_through), (2, 0, 2));
    let second = PushBatchResponse::decode(push().await.unwrap().bytes().await.unwrap()).unwrap();
    assert_eq!((second.applied, second.skipped, second.applied_through), (0, 2, 2));
    assert_eq!(q1(&central.api(None), "runs", json!({})).await.len(), 2);

    // Garbage payloads and out-of-order items are refused whole.
    let api = central.api(Some(&account));
    let bad = json!({"node_id": "node-b", "items": [{"seq": 3, "kind": "run", "payload": [1, 2, 3]}]});
    api.post("/ingest/batch", bad).await.err(400, "invalid_argument");
    let unordered = json!({"node_id": "node-b", "items": [{"seq": 5, "kind": "x"}, {"seq": 4, "kind": "x"}]});
    api.post("/ingest/batch", unordered).await.err(400, "invalid_argument");
    assert_eq!(q1(&central.api(None), "runs", json!({})).await.len(), 2);
}

/// A node's items with U+0000 in their strings (pushed by an older node, or relayed from
/// one that stored them): the central roost applies them with U+FFFD in its place rather
/// than failing the batch, which the node would retry forever.
async fn a_pushed_batch_with_nul_is_applied_with_it_replaced(backend: Backend) {
    let central = TestServer::start(backend).await;
    let account = central.account(0).await;
    let mut traces = traces_request(90, 2, "pushed\0");
    traces.resource_spans[0].scope_spans[0].spans[1].name = "step\0".into();
    let run = Run {
        id: "run_nul".into(),
        runtime: "r\0".into(),
        session_id: "pushed\0".into(),
        metadata: Some(map_to_struct(json!({"k\0": "v\0"}).as_object().unwrap())),
        ..Run::default()
    };
    let event = RunEvent {
        id: "e\0".into(),
        ts: "1700000000000000000".into(),
        event_type: "t\0".into(),
        session_id: "pushed\0".into(),
        tool_name: "tool\0".into(),
        model: "m\0".into(),
        role: "user\0".into(),
        data: Some(from_json(&json!({"text": "d\0", "list": ["\0"]}))),
        ..RunEvent::default()
    };
    let events = AddRunEventsRequest { run_id: "run_nul".into(), event: None, events: vec![event] };
    let end = EndRunResponse { ok: true, run_id: "run_nul".into(), status: "completed".into(), ended_at: None };
    let item = |seq: i64, kind: &str, payload: Vec<u8>| PushItem { seq, kind: kind.into(), payload };
    let batch = PushBatchRequest {
        node_id: "node-nul".into(),
        items: vec![
            item(1, "otlp_traces", traces.encode_to_vec()),
            item(2, "run", run.encode_to_vec()),
            item(3, "run_events", events.encode_to_vec()),
            item(4, "run_end", end.encode_to_vec()),
        ],
    };
    let resp = central
        .http
        .post(central.url("/ingest/batch"))
        .bearer_auth(&account.key)
        .header("content-type", "application/x-protobuf")
        .body(batch.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let reply = PushBatchResponse::decode(resp.bytes().await.unwrap()).unwrap();
    assert_eq!((reply.applied, reply.applied_through), (4, 4));

    let api = central.api(None);
    let session = "pushed\u{FFFD}";
    let spans = q1(&api, "spans", json!({"session_id": session})).await;
    assert_eq!(spans.len(), 2);
    assert!(spans.iter().any(|s| s["name"] == "step\u{FFFD}"), "{spans:?}");
    let runs = q1(&api, "runs", json!({"session_id": session})).await;
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0]["runtime"].as_str(), runs[0]["status"].as_str()), (Some("r\u{FFFD}"), Some("completed")));
    assert_eq!(runs[0]["metadata"], json!({"k\u{FFFD}": "v\u{FFFD}"}));
    let events = q1(&api, "events", json!({"run_id": "run_nul"})).await;
    assert_eq!(events.len(), 1);
    assert_eq!((events[0]["id"].as_str(), events[0]["event_type"].as_str()), (Some("e\u{FFFD}"), Some("t\u{FFFD}")));
    assert_eq!(events[0]["data"], json!({"text": "d\u{FFFD}", "list": ["\u{FFFD}"]}));
    for rows in [spans, runs, events, q1(&api, "sessions", json!({})).await] {
        nul_free(&rows);
    }
}
