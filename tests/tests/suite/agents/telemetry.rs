//! Telemetry a hosted agent sends with its own token is the agent's: whatever it names, it
//! lands in the agent's own session, and the usage it reports about itself counts nowhere.
//!
//! The forging runtime (tests/runtimes/forger_agent.py, stdlib Python) sends traces, logs
//! and metrics with its agent token, naming another agent's session, conversation and
//! instance (on the items and their resource), with a billion-token model call, its own
//! $11,250 cost, a user message, and evaluation events grading itself. Before: all of it showed in the other agent's session
//! (its cost, its transcript) and fired the installation's cost and token alerts.

use std::{path::Path, time::Duration};

use opentelemetry_proto::tonic::trace::v1::Status;
use prost::Message as _;
use roost_server::runtimes::Catalogue;
use roost_tests::{Api, Backend, TestServer, each_backend};
use serde_json::{Map, Value, json};

use super::{TEST_CATALOGUE, start};
use crate::observe::{otlp::traces_request, post_otlp, q1};

each_backend!(an_agents_token_claims_only_its_own_session_and_no_usage);

/// What the forged user message says; one word of it is searched for.
const FORGED: &str = "FORGED transcript line: wire 11250 dollars to zanzibarquux";

fn catalogue() -> Catalogue {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtimes/forger_agent.py");
    let text = format!(
        "{TEST_CATALOGUE}\n[[runtime]]\nid = \"forger\"\ndriver = \"process\"\nprice_cents_month = 0\n\
         included_model = true\ndefault_model = \"example\"\ncommand = [\"python3\", {:?}]\n",
        script.display().to_string()
    );
    Catalogue::from_toml(&text).expect("catalogue")
}

/// A running forger agent of a new account: its API and id.
async fn agent(server: &TestServer, brief: &str) -> (Api, String, String) {
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("forger", brief).await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    (api, id, account.id)
}

/// Polls `check` until it gives a value (15 s at most).
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of attribute `key` of a row's `attributes` (null when it has none).
fn attribute(row: &Map<String, Value>, key: &str) -> Value {
    row["attributes"].get(key).cloned().unwrap_or_default()
}

/// A row's figure that must not be counted: absent, null or zero.
fn uncounted(row: &Map<String, Value>, field: &str) -> bool {
    row.get(field).is_none_or(|v| v.is_null() || v.as_f64() == Some(0.0))
}

async fn an_agents_token_claims_only_its_own_session_and_no_usage(backend: Backend) {
    let server = start(backend, |config| {
        config.hosting.catalogue = catalogue();
        config.alerts_every = Duration::from_millis(200);
    })
    .await;
    // Two agents of two accounts: A forges, C is who it claims to be.
    let (api_a, a, account_a) = agent(&server, "forger").await;
    let (api_c, c, _) = agent(&server, "victim").await;
    assert_eq!(api_c.message(&c, "hello").await.ok()["reply"], "ok: hello");
    let observer = server.api(None);
    let usage_before = observer.get("/api/usage").await.ok();

    // The installation's cost and token alerts, at thresholds the forgery is far past.
    let mut rules = Vec::new();
    for (kind, threshold) in [("cost_per_day", 1.0), ("token_spike", 1000.0)] {
        let rule = observer.post("/api/alerts", json!({"kind": kind, "threshold": threshold, "window_secs": 60})).await;
        rules.push(rule.ok()["id"].as_str().unwrap().to_owned());
    }

    let (trace_id, span_id) = ("7a".repeat(16), "5b".repeat(8));
    let order = json!({"victim": c, "trace_id": trace_id, "span_id": span_id, "text": FORGED});
    let reply = api_a.message(&a, &order.to_string()).await.ok();
    let statuses: Value = serde_json::from_str(reply["reply"].as_str().unwrap()).unwrap();
    assert_eq!(statuses, json!({"traces": 200, "logs": 200, "metrics": 200}), "{reply}");

    // A sentinel that does fire once the checker has seen everything above: an error span,
    // from the dashboard's OTLP, after the forgery was stored (exports answer once stored).
    let sentinel =
        observer.post("/api/alerts", json!({"kind": "error_rate", "threshold": 0.01, "window_secs": 60})).await.ok();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut error = traces_request(201, 1, "sentinel");
    for span in &mut error.resource_spans[0].scope_spans[0].spans {
        span.attributes.clear();
        (span.start_time_unix_nano, span.end_time_unix_nano) = (now, now + 1);
        span.status = Some(Status { code: 2, message: "sentinel".into() });
    }
    assert_eq!(post_otlp(&server, "/v1/traces", "application/x-protobuf", error.encode_to_vec()).await.status(), 200);
    let alerts = eventually("the sentinel alert", async || {
        let page = observer.get("/api/alerts").await.ok();
        page["active"].as_array().unwrap().iter().any(|a| a["rule_id"] == sentinel["id"]).then_some(page)
    })
    .await;
    // Neither the cost nor the token alert fired.
    for list in ["active", "history"] {
        for alert in alerts[list].as_array().unwrap() {
            assert!(!rules.iter().any(|r| alert["rule_id"] == r.as_str()), "{list}: {alert}\n{alerts}");
        }
    }

    // Nothing new in C's session: no span, log, metric or message, no cost, no tokens.
    assert_eq!(q1(&observer, "spans", json!({"session_id": c})).await, Vec::<Map<String, Value>>::new());
    assert_eq!(q1(&observer, "spans", json!({"agent_id": c})).await, Vec::<Map<String, Value>>::new());
    assert_eq!(q1(&observer, "metrics", json!({"session_id": c})).await, Vec::<Map<String, Value>>::new());
    for log in q1(&observer, "logs", json!({"session_id": c})).await {
        assert_eq!(log["event_name"], roost_proto::RUNTIME_OUTPUT_EVENT, "only its own output: {log:?}");
    }
    let transcript = q1(&observer, "transcript", json!({"session_id": c})).await;
    assert!(
        transcript.iter().all(|row| !row["text"].as_str().unwrap_or_default().contains("FORGED")),
        "{transcript:?}"
    );
    assert_eq!(q1(&observer, "search", json!({"text": "zanzibarquux", "session_id": c})).await.len(), 0);
    let session_c = q1(&observer, "sessions", json!({"session_id": c})).await;
    assert_eq!(session_c.len(), 1, "C's own turn: {session_c:?}");
    assert_eq!((session_c[0]["spans"].as_i64(), session_c[0]["agent_id"].as_str()), (Some(0), Some(c.as_str())));
    for field in ["input_tokens", "output_tokens", "cost_usd"] {
        assert!(uncounted(&session_c[0], field), "{field}: {session_c:?}");
    }
    // No stored row or resource names C (but its own runtime output, if it printed any).
    let named = format!("LIKE '%{c}%'");
    for (table, condition) in [
        ("resources", format!("attributes {named} AND service LIKE 'forged-%'")),
        ("spans", format!("attributes {named} OR session_id {named} OR agent_id {named}")),
        ("span_events", format!("attributes {named}")),
        (
            "logs",
            format!(
                "(attributes {named} OR session_id {named} OR agent_id {named}) \
                 AND COALESCE(event_name, '') <> '{}'",
                roost_proto::RUNTIME_OUTPUT_EVENT
            ),
        ),
        ("metric_points", format!("attributes {named} OR session_id {named}")),
        ("messages", format!("session_id {named}")),
    ] {
        let rows = server.sql(&format!("SELECT COUNT(*) FROM {table} WHERE {condition}")).await.unwrap();
        assert_eq!(rows, [0], "{table} names {c}");
    }

    // What A sent is in A's own session, with its numbers as attributes and none counted.
    let spans = q1(&observer, "spans", json!({"session_id": a})).await;
    let span = spans.iter().find(|s| s["trace_id"] == trace_id.as_str()).unwrap_or_else(|| panic!("{spans:?}"));
    assert_eq!((span["session_id"].as_str(), span["agent_id"].as_str()), (Some(a.as_str()), Some(a.as_str())));
    for field in ["input_tokens", "output_tokens", "cost_usd"] {
        assert!(uncounted(span, field), "{field}: {span:?}");
    }
    assert_eq!(attribute(span, "gen_ai.usage.input_tokens"), 1_000_000_000, "{span:?}");
    assert_eq!(attribute(span, "gen_ai.usage.cost"), 11250.0);
    assert_eq!(attribute(span, "roost.self_reported"), true);
    for key in
        ["session.id", "gen_ai.conversation.id", "roost.instance.id", "gen_ai.agent.id", "session_id", "agent_id"]
    {
        assert_eq!(attribute(span, key), a.as_str(), "{key}: {span:?}");
    }
    let full = q1(&observer, "span", json!({"trace_id": trace_id, "span_id": span_id})).await;
    let resource = &full[0]["resource"];
    for key in ["session.id", "gen_ai.conversation.id", "roost.instance.id", "gen_ai.agent.id"] {
        assert_eq!(resource[key], a.as_str(), "{key}: {resource}");
    }
    assert_eq!(
        (resource["roost.account.id"].as_str(), &resource["roost.self_reported"]),
        (Some(account_a.as_str()), &json!(true))
    );
    assert_eq!(full[0]["events"][0]["attributes"]["session.id"], a.as_str(), "{full:?}");

    let logs: Vec<_> = q1(&observer, "logs", json!({"session_id": a}))
        .await
        .into_iter()
        .filter(|log| log["event_name"] != roost_proto::RUNTIME_OUTPUT_EVENT)
        .collect();
    assert_eq!(logs.len(), 3, "{logs:?}");
    // Its evaluation events are kept as events, renamed, and score nothing.
    assert!(logs.iter().any(|l| l["event_name"] == "roost.claimed.gen_ai.evaluation.result"), "{logs:?}");
    let span_events = &full[0]["events"];
    assert!(
        span_events.as_array().unwrap().iter().any(|e| e["name"] == "roost.claimed.gen_ai.evaluation.result"),
        "{span_events}"
    );
    assert_eq!(server.sql("SELECT COUNT(*) FROM scores").await.unwrap(), [0], "an agent grades nothing");
    for log in &logs {
        assert_eq!((log["session_id"].as_str(), log["agent_id"].as_str()), (Some(a.as_str()), Some(a.as_str())));
        for field in ["input_tokens", "output_tokens", "cost_usd"] {
            assert!(uncounted(log, field), "{field}: {log:?}");
        }
        assert_eq!(attribute(log, "roost.self_reported"), true, "{log:?}");
    }
    let call = logs.iter().find(|l| l["event_name"] == "claude_code.api_request").unwrap();
    assert_eq!(attribute(call, "input_tokens"), 1_000_000_000, "{call:?}");
    let transcript = q1(&observer, "transcript", json!({"session_id": a})).await;
    assert!(transcript.iter().any(|row| row["text"] == FORGED), "its own claims, in its own session: {transcript:?}");
    let metrics = q1(&observer, "metrics", json!({"session_id": a})).await;
    assert_eq!(metrics.len(), 2, "{metrics:?}");
    assert!(metrics.iter().all(|m| attribute(m, "roost.self_reported") == true), "{metrics:?}");

    let session_a = q1(&observer, "sessions", json!({"session_id": a})).await;
    assert_eq!(session_a[0]["agent_id"], a.as_str(), "{session_a:?}");
    assert!(session_a[0]["spans"].as_i64().unwrap() >= 1 && session_a[0]["logs"].as_i64().unwrap() >= 2);
    for field in ["input_tokens", "output_tokens", "cost_usd"] {
        assert!(uncounted(&session_a[0], field), "{field}: {session_a:?}");
    }

    // Usage did not move: no tokens, cost or calls from what the agent said about itself
    // (the turns themselves are calls of no model cost, as before).
    let usage = observer.get("/api/usage").await.ok();
    for period in ["today", "week", "month"] {
        for field in ["input_tokens", "output_tokens", "cost_usd"] {
            assert_eq!(usage[period][field], usage_before[period][field], "{period} {field}: {usage}");
        }
    }
    let models = usage["models"].as_array().unwrap();
    assert!(models.iter().all(|m| m["model"] != "gpt-4o" && m["model"] != "claude-sonnet-4-5"), "{usage}");
    assert!(usage["top_sessions"].as_array().unwrap().iter().all(|s| s["session_id"] != c.as_str()), "{usage}");
    let hourly = q1(&observer, "usage_hourly", json!({})).await;
    assert!(hourly.iter().all(|h| uncounted(h, "input_tokens") && uncounted(h, "cost_usd")), "{hourly:?}");
}
