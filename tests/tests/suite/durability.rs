//! What an acknowledgement promises (`--durability`): the real `roost` binary is killed
//! with SIGKILL while OTLP exporters and a hosted agent's callers are mid-work, then started
//! again on the same store. Every span whose request was answered 200 and every turn whose
//! message was answered is there, under `process` (the default: acknowledged once in the
//! OS's hands) and under `disk` (once synced). Power loss is what separates the two, and a
//! test cannot pull the plug; that `process` commits skip the sync is measured by the
//! benches instead (see the README's durability section).

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value::Value as OtlpValue},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span},
};
use prost::Message as _;
use roost_tests::{
    Api, Backend, TestDatabase, each_backend,
    process::{create_account, replica_command, serve_replica},
    roost_binary,
};
use serde_json::{Value, json};

each_backend!(
    acknowledged_writes_survive_kill_9_with_process_durability,
    acknowledged_writes_survive_kill_9_with_disk_durability,
    an_experiment_resumes_after_kill_9,
);

async fn acknowledged_writes_survive_kill_9_with_process_durability(backend: Backend) {
    acknowledged_writes_survive_kill_9(backend, "process").await;
}

async fn acknowledged_writes_survive_kill_9_with_disk_durability(backend: Backend) {
    acknowledged_writes_survive_kill_9(backend, "disk").await;
}

/// Spans per request: one trace each.
const SPANS: u64 = 40;

/// Traces request `n`: one trace of [`SPANS`] spans, its id made from `n`.
fn request(n: u64) -> Vec<u8> {
    let mut trace_id = [7u8; 16];
    trace_id[..8].copy_from_slice(&(n + 1).to_be_bytes());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let spans = (0..SPANS)
        .map(|i| Span {
            trace_id: trace_id.to_vec(),
            span_id: (i + 1).to_be_bytes().to_vec(),
            name: format!("step {i}"),
            start_time_unix_nano: now + i,
            end_time_unix_nano: now + i + 1_000,
            ..Default::default()
        })
        .collect();
    let service = KeyValue {
        key: "service.name".into(),
        value: Some(AnyValue { value: Some(OtlpValue::StringValue("killed".into())) }),
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![service], ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// Exports and turns the senders would send if never cut off.
const EXPORTS: u64 = 1_000_000;
const TURNS: u64 = 100_000;

async fn acknowledged_writes_survive_kill_9(backend: Backend, durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let database = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(TestDatabase::create().await),
    };
    let db =
        database.as_ref().map_or_else(|| format!("sqlite://{}/roost.db", dir.path().display()), |d| d.url().to_owned());
    let bin = roost_binary();
    let bin = bin.to_str().unwrap();
    let key = create_account(replica_command(bin, &db, dir.path()), 100_000);
    let serve = || serve_replica(replica_command(bin, &db, dir.path()), 30, &["--durability", durability]);
    let (mut child, base) = serve();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
    let api = Api::new(http.clone(), base.clone(), Some(key.clone()));
    let agent = api.provision("echo", "kill -9 brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&agent, "running").await;

    // Exporters and callers keep going until the kill cuts them off.
    let acked_traces = Arc::new(Mutex::new(Vec::new()));
    let acked_turns = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for worker in 0..4u64 {
        let (http, url, acked) = (http.clone(), format!("{base}/v1/traces"), acked_traces.clone());
        workers.push(tokio::spawn(async move {
            for n in (worker..EXPORTS).step_by(4) {
                let sent =
                    http.post(&url).header("content-type", "application/x-protobuf").body(request(n)).send().await;
                match sent {
                    Ok(resp) if resp.status() == 200 => acked.lock().unwrap().push(n),
                    _ => return,
                }
            }
        }));
    }
    for caller in 0..2 {
        let (http, url, key, acked) =
            (http.clone(), format!("{base}/api/instances/{agent}/messages"), key.clone(), acked_turns.clone());
        workers.push(tokio::spawn(async move {
            for n in 0..TURNS / 2 {
                let text = format!("caller {caller} message {n}");
                let sent = http.post(&url).bearer_auth(&key).json(&json!({"text": text})).send().await;
                match sent {
                    Ok(resp) if resp.status() == 200 => acked.lock().unwrap().push(text),
                    _ => return,
                }
            }
        }));
    }
    // The kill comes once a good number of each is acknowledged (after at least half a
    // second, at most 30 s on a busy machine), while far more is still to be sent: the
    // senders' work is sized never to finish first, however fast roost is.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..300 {
        if acked_traces.lock().unwrap().len() >= 40 && acked_turns.lock().unwrap().len() >= 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    for worker in workers {
        worker.await.unwrap();
    }
    let traces = acked_traces.lock().unwrap().clone();
    let turns = acked_turns.lock().unwrap().clone();
    assert!(traces.len() >= 4 && turns.len() >= 2, "work was acknowledged before the kill: {traces:?} {turns:?}");
    assert!(traces.len() < EXPORTS as usize && turns.len() < TURNS as usize, "the kill came while the work went on");
    eprintln!("killed after {} acknowledged exports and {} turns ({durability})", traces.len(), turns.len());

    let (mut child, base) = serve();
    let api = Api::new(http, base, Some(key));
    for n in &traces {
        let mut trace_id = [7u8; 16];
        trace_id[..8].copy_from_slice(&(n + 1).to_be_bytes());
        let found = api
            .post(
                "/api/local/query",
                json!({"shape": "spans", "args": {"trace_id": hex::encode(trace_id), "limit": 100}}),
            )
            .await
            .ok();
        assert_eq!(found["count"], SPANS, "acknowledged request {n} lost spans ({durability}): {found}");
    }
    let activity = api.get(&format!("/api/instances/{agent}/activity?limit=500")).await.ok();
    let recorded: HashSet<&str> =
        activity["turns"].as_array().unwrap().iter().filter_map(|t| t["text"].as_str()).collect();
    let lost: Vec<&String> = turns.iter().filter(|t| !recorded.contains(t.as_str())).collect();
    assert!(lost.is_empty(), "acknowledged turns lost ({durability}): {lost:?} of {}", turns.len());
    let _: Value = api.get("/api/health").await.body;
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Items of the experiment killed mid-run.
const ITEMS: usize = 120;

/// An experiment of [`ITEMS`] items against a metered `assistant` agent is killed with
/// SIGKILL once some items are answered, then roost starts again on the same store: the run
/// goes on where it stopped and completes. Every item has one result and was sent to the
/// agent once (one turn each, `interrupted` when the kill cut it off), and the account was
/// charged exactly what its turns' records say, so nothing was run or charged twice.
async fn an_experiment_resumes_after_kill_9(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let database = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(TestDatabase::create().await),
    };
    let db =
        database.as_ref().map_or_else(|| format!("sqlite://{}/roost.db", dir.path().display()), |d| d.url().to_owned());
    let upstream = crate::agents::experiments::fake_model().await;
    let bin = roost_binary();
    let bin = bin.to_str().unwrap();
    let credits = 100_000;
    let key = create_account(replica_command(bin, &db, dir.path()), credits);
    let serve = || serve_replica(replica_command(bin, &db, dir.path()), 30, &["--model-upstream-url", &upstream]);
    let (mut child, base) = serve();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
    let api = Api::new(http.clone(), base, Some(key.clone()));
    let agent = api.provision("assistant", "Kim").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&agent, "running").await;
    let jsonl: String =
        (0..ITEMS).map(|n| format!("{{\"input\":\"item {n}\",\"expected\":\"Kim: item {n}\"}}\n")).collect();
    let dataset =
        api.post("/api/v1/datasets", json!({"name": "resume", "items": {"jsonl": jsonl}})).await.ok()["dataset"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let run = api.post("/api/v1/experiments", json!({"dataset_id": dataset, "agent_id": agent})).await.ok()["experiment"]
        ["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/experiments/{run}");
    for _ in 0..600 {
        if api.get(&path).await.ok()["experiment"]["completed"].as_i64().unwrap_or_default() >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let (mut child, base) = serve();
    let api = Api::new(http, base, Some(key));
    let mut detail = Value::Null;
    for _ in 0..1200 {
        detail = api.get(&path).await.ok();
        if detail["experiment"]["status"] != "running" && detail["experiment"]["status"] != "queued" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let experiment = &detail["experiment"];
    assert_eq!(experiment["status"], "completed", "{experiment}");
    let results = detail["results"].as_array().unwrap();
    assert_eq!(results.len(), ITEMS, "one result an item");
    let answered = experiment["completed"].as_i64().unwrap();
    assert!(answered < ITEMS as i64 || experiment["failed"] == 0, "{experiment}");
    assert_eq!(answered + experiment["failed"].as_i64().unwrap(), ITEMS as i64, "{experiment}");
    assert!(answered >= ITEMS as i64 - 1, "at most the item under the kill failed (interrupted): {experiment}");

    // Each item was sent once: one turn per input, and the turns are the results' turns.
    let activity = api.get(&format!("/api/instances/{agent}/activity?limit=500")).await.ok();
    let turns = activity["turns"].as_array().unwrap();
    let mut inputs: Vec<&str> = turns.iter().filter_map(|t| t["text"].as_str()).collect();
    inputs.sort_unstable();
    let before = inputs.len();
    inputs.dedup();
    assert_eq!(before, inputs.len(), "an item ran twice");
    // A turn cut off in its first 200 ms leaves no record (and its item fails).
    assert!(before >= ITEMS - 1, "{before} turns for {ITEMS} items");
    let result_turns: HashSet<&str> = results.iter().filter_map(|r| r["turn_id"].as_str()).collect();
    let recorded: HashSet<&str> = turns.iter().filter_map(|t| t["id"].as_str()).collect();
    assert!(recorded.is_subset(&result_turns), "a turn no result names");
    // Nothing charged twice: the ledger adds up to the balance, each model call charged
    // names one of the results' turns, and no turn was charged for two calls.
    let charges = activity["charges"].as_array().unwrap();
    let ledger: i64 = charges.iter().map(|c| c["amount_nanocents"].as_i64().unwrap_or_default()).sum();
    let balance = api.get("/api/account").await.ok()["balance_nanocents"].as_i64().unwrap();
    assert_eq!(balance - credits * 1_000_000_000, ledger, "the ledger is the balance");
    let mut charged: Vec<&str> =
        charges.iter().filter_map(|c| c["description"].as_str()?.split("(turn ").nth(1)?.strip_suffix(')')).collect();
    assert!(charged.len() >= ITEMS - 1, "each answered item's call was charged: {}", charged.len());
    assert!(charged.iter().all(|t| result_turns.contains(t)), "a charge for a turn no result names");
    charged.sort_unstable();
    let calls = charged.len();
    charged.dedup();
    assert_eq!(charged.len(), calls, "a turn was charged twice");
    let turn_costs: i64 = turns.iter().map(|t| t["charged_nanocents"].as_i64().unwrap_or_default()).sum();
    let cut_off: i64 = results
        .iter()
        .filter(|r| !recorded.contains(r["turn_id"].as_str().unwrap_or_default()))
        .map(|r| r["cost_nanocents"].as_i64().unwrap_or_default())
        .sum();
    assert_eq!(experiment["summary"]["cost_nanocents"].as_i64().unwrap(), turn_costs + cut_off, "{experiment}");
    assert_eq!(-ledger, turn_costs + cut_off, "every charge is an item's");
    child.kill().unwrap();
    child.wait().unwrap();
}
