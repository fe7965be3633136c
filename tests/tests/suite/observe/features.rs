//! The dashboard's feature APIs, answered from real ingested data.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::{otlp::traces_request, post_otlp};

each_backend!(
    usage_sums_tokens_and_cost_per_day_model_and_session,
    a_cron_messages_a_hosted_agent_on_time,
    an_alert_fires_to_a_webhook_is_acknowledged_and_resolves,
    guard_policies_pause_an_agent_and_record_incidents,
    telemetry_that_only_names_an_agent_never_trips_its_guard,
    channels_show_each_agents_ways_in_and_traffic
);

/// Spans of `traces_request`, moved to now.
async fn ingest_now(server: &TestServer, trace: u8, spans: usize, session: &str) {
    ingest_now_with(server, trace, spans, session, 0).await;
}

/// Spans of `traces_request`, moved to now, with this status code.
async fn ingest_now_with(server: &TestServer, trace: u8, spans: usize, session: &str, status: i32) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut request = traces_request(trace, spans, session);
    for span in &mut request.resource_spans[0].scope_spans[0].spans {
        span.end_time_unix_nano = now + (span.end_time_unix_nano - span.start_time_unix_nano);
        span.start_time_unix_nano = now;
        span.status = Some(opentelemetry_proto::tonic::trace::v1::Status { code: status, message: String::new() });
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

/// A webhook receiver: every JSON body POSTed to it, in order.
async fn webhook() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> Option<Value>) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn an_alert_fires_to_a_webhook_is_acknowledged_and_resolves(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.alerts_every = Duration::from_millis(200)).await;
    let api = server.api(None);
    let (url, mut received) = webhook().await;
    for bad in [
        json!({"kind": "vibes", "threshold": 1}),
        json!({"kind": "error_rate"}),
        json!({"kind": "error_rate", "threshold": 0.5, "window_secs": 5}),
        json!({"kind": "error_rate", "threshold": 0.5, "webhook_url": "ftp://example.com"}),
    ] {
        api.post("/api/alerts", bad).await.err(400, "invalid_argument");
    }
    api.post("/api/alerts/999/ack", json!({})).await.err(404, "not_found");
    assert_eq!(api.get("/api/alerts").await.ok()["rules"], json!([]), "refused rules stored nothing");

    let rule = api
        .post("/api/alerts", json!({"name": "errors", "kind": "error_rate", "threshold": 0.2, "webhook_url": url}))
        .await
        .ok();
    let rule_id = rule["id"].as_str().unwrap().to_owned();
    assert_eq!(rule["window_secs"], 3600, "{rule}");
    ingest_now_with(&server, 1, 4, "s", 1).await;
    ingest_now_with(&server, 2, 2, "s", 2).await;

    let delivered = tokio::time::timeout(Duration::from_secs(15), received.recv()).await.unwrap().unwrap();
    assert_eq!(delivered["event"], "roost.alert", "{delivered}");
    assert_eq!(delivered["rule"]["id"], rule_id.as_str());
    assert!(delivered["alert"]["message"].as_str().unwrap().contains("2 of 6 spans failed"), "{delivered}");
    let page = eventually("the delivered alert", async || {
        let page = api.get("/api/alerts").await.ok();
        (page["active"][0]["delivered"] == true).then_some(page)
    })
    .await;
    let alert_id = page["active"][0]["id"].as_i64().unwrap();
    assert!((page["active"][0]["value"].as_f64().unwrap() - 2.0 / 6.0).abs() < 1e-9, "{page}");

    let acked = api.post(&format!("/api/alerts/{alert_id}/ack"), json!({})).await.ok();
    assert!(acked["acknowledged_at"].is_string(), "{acked}");

    // Raising the threshold clears the condition: the alert resolves, and stays in history.
    api.post(&format!("/api/alerts/rules/{rule_id}"), json!({"threshold": 0.9})).await.ok();
    let page = eventually("the resolved alert", async || {
        let page = api.get("/api/alerts").await.ok();
        (page["active"] == json!([])).then_some(page)
    })
    .await;
    assert!(page["history"][0]["resolved_at"].is_string(), "{page}");
    assert!(received.try_recv().is_err(), "one delivery per alert");
    api.delete_path(&format!("/api/alerts/rules/{rule_id}")).await.ok();
    assert_eq!(api.get("/api/alerts").await.ok()["history"], json!([]));
}

/// echo's model at a cent a token: an echo agent's turns cost money.
const PRICED_ECHO: &str = "[models.echo]\ninput_usd_per_mtok = 10000\noutput_usd_per_mtok = 10000\n";

async fn guard_policies_pause_an_agent_and_record_incidents(backend: Backend) {
    let server = TestServer::start_with(backend, |c| {
        c.guard_every = Duration::from_millis(200);
        c.hosting.prices = roost_server::billing::prices::PriceBook::from_toml(PRICED_ECHO).unwrap();
    })
    .await;
    let account = server.account(10_000).await;
    let owner = server.api(Some(&account));
    let api = server.api(None);
    // One deploy at a time per account (the seed's settling rule).
    let spender = owner.provision("echo", "spends").await["id"].as_str().unwrap().to_owned();
    owner.wait_status(&spender, "running").await;
    let looper = owner.provision("example", "loops").await["id"].as_str().unwrap().to_owned();
    owner.wait_status(&looper, "running").await;

    api.post("/api/guard", json!({"kind": "spend_per_day", "limit": 0})).await.err(400, "invalid_argument");
    api.post("/api/guard", json!({"kind": "tool_loop", "limit": 1.5})).await.err(400, "invalid_argument");
    api.post("/api/guard", json!({"kind": "tool_loop", "limit": 3, "instance_id": "ins_nope"}))
        .await
        .err(404, "not_found");
    let spend =
        api.post("/api/guard", json!({"kind": "spend_per_day", "limit": 0.000001, "instance_id": spender})).await.ok();
    api.post("/api/guard", json!({"kind": "tool_loop", "limit": 3})).await.ok();

    // The spender's own turn costs money today.
    owner.message(&spender, "hi").await.ok();
    owner.wait_status(&spender, "paused").await;
    // The looper's runtime reports the same tool call with the same input three times, with
    // its own agent token.
    let call = r#"tool:search {"q":"same"}"#;
    for _ in 0..2 {
        assert_eq!(owner.message(&looper, call).await.ok()["reply"], "[loops] reported search: 200");
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(owner.get(&format!("/api/instances/{looper}")).await.ok()["status"], "running", "two calls are no loop");
    // The guard may pause it before this turn ends (409 for the turn): either way, paused.
    owner.message(&looper, call).await;
    owner.wait_status(&looper, "paused").await;

    // The incident is written once the pause is done.
    let page = eventually("both incidents", async || {
        let page = api.get("/api/guard").await.ok();
        (page["incidents"].as_array().unwrap().len() == 2).then_some(page)
    })
    .await;
    let incidents = page["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 2, "{page}");
    assert!(incidents.iter().all(|i| i["action"] == "paused"), "{page}");
    let spent = incidents.iter().find(|i| i["instance_id"] == spender.as_str()).unwrap();
    assert_eq!(spent["policy_id"], spend["id"]);
    assert!(spent["detail"].as_str().unwrap().contains("over the limit"), "{spent}");

    // Resumed on purpose, the spender is left alone for the rest of the day.
    owner.post(&format!("/api/instances/{spender}/resume"), json!({})).await.ok();
    owner.wait_status(&spender, "running").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(owner.get(&format!("/api/instances/{spender}")).await.ok()["status"], "running");
    assert_eq!(api.get("/api/guard").await.ok()["incidents"].as_array().unwrap().len(), 2);
}

/// Issue 29: another account's key pushed a span naming a victim's agent as its session with
/// a $500 cost, and the guard paused the victim within two seconds. Telemetry that merely
/// names an agent, from a node push, the dashboard's OTLP or a custom run, is never
/// counted for it; a token that is no live agent's is 401. What the agent's own runtime
/// says it spent is not counted either: its spend is what roost metered (its turns, its
/// model gateway calls).
async fn telemetry_that_only_names_an_agent_never_trips_its_guard(backend: Backend) {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value as Any};
    use roost_proto::v1::{PushBatchRequest, PushItem};
    let server = TestServer::start_with(backend, |c| c.guard_every = Duration::from_millis(100)).await;
    let victim_account = server.account(10_000).await;
    let victim_api = server.api(Some(&victim_account));
    let victim = victim_api.provision("example", "victim").await["id"].as_str().unwrap().to_owned();
    victim_api.wait_status(&victim, "running").await;
    let api = server.api(None);
    api.post("/api/guard", json!({"kind": "spend_per_day", "limit": 1.0, "instance_id": victim})).await.ok();
    api.post("/api/guard", json!({"kind": "tool_loop", "limit": 3, "instance_id": victim})).await.ok();

    // Spans claiming the victim: session, agent and instance ids, $500 each, a tool loop.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut request = traces_request(90, 4, &victim);
    for span in &mut request.resource_spans[0].scope_spans[0].spans {
        span.start_time_unix_nano = now;
        span.end_time_unix_nano = now + 1;
        for (key, value) in [
            ("gen_ai.usage.cost", Any::DoubleValue(500.0)),
            ("gen_ai.agent.id", Any::StringValue(victim.clone())),
            ("roost.instance.id", Any::StringValue(victim.clone())),
            ("gen_ai.tool.name", Any::StringValue("search".into())),
            ("gen_ai.tool.call.arguments", Any::StringValue("same".into())),
        ] {
            span.attributes.push(KeyValue {
                key: key.into(),
                value: Some(AnyValue { value: Some(value) }),
                ..Default::default()
            });
        }
    }
    // Through another account's node push...
    let stranger = server.account(0).await;
    let batch = PushBatchRequest {
        node_id: "stranger-node".into(),
        items: vec![PushItem { seq: 1, kind: "otlp_traces".into(), payload: request.encode_to_vec() }],
    };
    let pushed = server
        .http
        .post(server.url("/ingest/batch"))
        .bearer_auth(&stranger.key)
        .header("content-type", "application/x-protobuf")
        .body(batch.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), 200);
    // ...the dashboard's own OTLP endpoint, and a custom run's tool events.
    for span in &mut request.resource_spans[0].scope_spans[0].spans {
        span.trace_id = vec![91; 16];
    }
    assert_eq!(post_otlp(&server, "/v1/traces", "application/x-protobuf", request.encode_to_vec()).await.status(), 200);
    let run = api.post("/api/v1/runs", json!({"runtime": "t", "session_id": victim, "agent_id": victim})).await.ok();
    let call = |n: usize| json!({"id": format!("c{n}"), "event_type": "tool_call", "tool_name": "search", "data": {"q": "same"}});
    api.post(
        &format!("/api/v1/runs/{}/events", run["run_id"].as_str().unwrap()),
        json!({"events": [call(1), call(2), call(3)]}),
    )
    .await
    .ok();
    // A guessed agent token is refused, not taken for a dashboard caller's.
    let guessed = server
        .http
        .post(server.url("/v1/traces"))
        .bearer_auth("rat_GUESSEDGUESSEDGUESSEDGUESSEDGUESSEDGUESS")
        .header("content-type", "application/x-protobuf")
        .body(request.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(guessed.status(), 401);

    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(victim_api.get(&format!("/api/instances/{victim}")).await.ok()["status"], "running");
    assert_eq!(api.get("/api/guard").await.ok()["incidents"], json!([]));
    // The claims are still observed (the session shows them), just not held against it.
    let sessions =
        api.post("/api/local/query", json!({"shape": "sessions", "args": {"session_id": victim}})).await.ok();
    assert!(sessions["rows"][0]["cost_usd"].as_f64().unwrap() >= 500.0, "{sessions}");

    // The victim's own runtime reporting $2 with its token is a claim about itself: stored
    // in its session, never counted as spend.
    assert_eq!(victim_api.message(&victim, "spend:2").await.ok()["reply"], "[victim] reported spend: 200");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(victim_api.get(&format!("/api/instances/{victim}")).await.ok()["status"], "running");
    assert_eq!(api.get("/api/guard").await.ok()["incidents"], json!([]));
}

async fn channels_show_each_agents_ways_in_and_traffic(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(10_000).await;
    let owner = server.api(Some(&account));
    // The example runtime serves a chat bot when given a token.
    let id = owner.provision("example", "chatty").await["id"].as_str().unwrap().to_owned();
    owner.wait_status(&id, "running").await;
    for text in ["one", "two"] {
        owner.message(&id, text).await.ok();
    }
    let api = server.api(None);
    // Turn rows are written in batches just after the replies.
    let page = eventually("the turns on the channels page", async || {
        let page = api.get("/api/channels").await.ok();
        (page["agents"][0]["traffic"][0]["messages_24h"] == 2).then_some(page)
    })
    .await;
    let agent = &page["agents"][0];
    assert_eq!(
        (agent["instance_id"].as_str(), agent["chat_bot_connected"].as_bool()),
        (Some(id.as_str()), Some(false))
    );
    assert_eq!(
        (agent["traffic"][0]["source"].as_str(), agent["traffic"][0]["failed_7d"].as_i64()),
        (Some("api"), Some(0))
    );

    owner.post(&format!("/api/instances/{id}/config"), json!({"MESSAGING_BOT_TOKEN": "123:abc"})).await.ok();
    let page = api.get("/api/channels").await.ok();
    assert_eq!(page["agents"][0]["chat_bot_connected"], true, "{page}");
    assert!(!page.to_string().contains("123:abc"), "never the token itself");
}
