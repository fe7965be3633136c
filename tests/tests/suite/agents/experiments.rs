//! Datasets and experiments end to end (docs/evaluating.md): a dataset made from an
//! `assistant` agent's conversation, run against the agent (graded by an evaluator) and
//! against a temporary copy with another brief, the two runs compared; an account sees and
//! runs only its own; bad requests change nothing; the MCP tools answer as REST does.
//! `durability::an_experiment_resumes_after_kill_9` kills the real binary mid-run.

use std::time::Duration;

use axum::{Json, Router, routing::post};
use roost_server::llm::Upstream;
use roost_tests::{Api, Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::start;
use crate::mcp;

each_backend!(
    a_dataset_from_a_conversation_runs_against_an_agent_and_its_copy,
    accounts_reach_only_their_own_datasets_and_experiments,
    bad_requests_are_refused_and_change_nothing,
);

/// Prompt and completion tokens of every answer of [`fake_model`].
pub const USAGE: (i64, i64) = (1_000, 500);
/// What one `gpt-4o` turn costs at [`USAGE`]: $2.50 and $10 per million tokens.
pub const TURN_NANOCENTS: i64 = 750_000_000;
/// What one `gpt-4o-mini` judge call costs at [`USAGE`]: $0.15 and $0.60 per million tokens.
const JUDGE_NANOCENTS: i64 = 1_000 * 15_000 + 500 * 60_000;

/// An OpenAI-compatible upstream for the assistant and the judge alike: a conversation
/// with a system prompt (the agent's brief) is answered `<brief>: <last user message>`,
/// anything else (a judge's prompt) `score: 0.8`. Returns its base URL.
pub async fn fake_model() -> String {
    async fn complete(Json(body): Json<Value>) -> Json<Value> {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let system = messages.iter().find(|m| m["role"] == "system").and_then(|m| m["content"].as_str());
        let last = messages.last().and_then(|m| m["content"].as_str()).unwrap_or_default();
        let reply = match system {
            Some(brief) => format!("{brief}: {last}"),
            None => "score: 0.8".to_owned(),
        };
        Json(json!({
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": USAGE.0, "completion_tokens": USAGE.1},
        }))
    }
    let app = Router::new().route("/v1/chat/completions", post(complete));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

async fn start_with_model(backend: Backend) -> TestServer {
    let upstream = fake_model().await;
    start(backend, move |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: Some("sk-operator".into()) });
    })
    .await
}

/// Polls an experiment until it has ended; its detail.
pub async fn ended(api: &Api, id: &str) -> Value {
    for _ in 0..600 {
        let got = api.get(&format!("/api/v1/experiments/{id}")).await.ok();
        if !["queued", "running"].contains(&got["experiment"]["status"].as_str().unwrap_or_default()) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("experiment {id} did not end");
}

/// The outputs of an experiment's results, in dataset order.
fn outputs(detail: &Value) -> Vec<String> {
    detail["results"].as_array().unwrap().iter().map(|r| r["output"].as_str().unwrap().to_owned()).collect()
}

async fn a_dataset_from_a_conversation_runs_against_an_agent_and_its_copy(backend: Backend) {
    let server = start_with_model(backend).await;
    let account = server.account(5_000).await;
    let api = server.api(Some(&account));
    let operator = server.api(None);
    let agent = api.provision("assistant", "Alpha").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&agent, "running").await;
    for text in ["one", "two", "three"] {
        assert_eq!(api.message(&agent, text).await.ok()["reply"], format!("Alpha: {text}"));
    }

    // The conversation becomes a dataset: each turn's message and reply.
    let made = api.post("/api/v1/datasets", json!({"name": "alpha talk", "items": {"session_id": agent}})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let dataset = made.body["dataset"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (made.body["dataset"]["items"].as_i64(), made.body["dataset"]["account_id"].as_str()),
        (Some(3), Some(account.id.as_str()))
    );
    let items = api.get(&format!("/api/v1/datasets/{dataset}")).await.ok();
    let first = &items["items"][0];
    assert_eq!(
        (&first["input"], &first["expected"], &first["position"]),
        (&json!("one"), &json!("Alpha: one"), &json!(1))
    );
    assert!(first["source"].as_str().unwrap().starts_with("turn:turn_"), "{first}");
    assert_eq!(first["metadata"]["agent_id"], agent);

    // The operator grades with an evaluator; runs are billed to the agent's account.
    let evaluator = operator
        .post(
            "/api/v1/evaluators",
            // Its filter matches no recorded call: it grades the experiment's answers only
            // (an experiment uses the evaluators it names whatever their filters).
            json!({"evaluator": {"name": "helpful", "model": "gpt-4o-mini", "prompt": "Q {{input}} A {{output}}",
                "budget_usd": 1, "filter": {"service": "no-such-service"}}}),
        )
        .await
        .ok()["evaluator"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let balance = || async { api.get("/api/account").await.ok()["balance_nanocents"].as_i64().unwrap() };
    let before = balance().await;
    let run_a = operator
        .post("/api/v1/experiments", json!({"dataset_id": dataset, "agent_id": agent, "evaluator_ids": [evaluator]}))
        .await;
    assert_eq!(run_a.status, 201, "{}", run_a.body);
    let run_a = run_a.body["experiment"]["id"].as_str().unwrap().to_owned();
    let a = ended(&operator, &run_a).await;
    let summary = &a["experiment"]["summary"];
    assert_eq!(a["experiment"]["status"], "completed", "{a}");
    assert_eq!((a["experiment"]["completed"].as_i64(), a["experiment"]["failed"].as_i64()), (Some(3), Some(0)));
    assert_eq!(outputs(&a), ["Alpha: one", "Alpha: two", "Alpha: three"]);
    assert_eq!(summary["checks"]["exact_match"], 1.0, "exact match is the default check: {summary}");
    assert!((summary["scores"]["helpful"].as_f64().unwrap() - 0.8).abs() < 1e-9, "{summary}");
    assert_eq!(summary["cost_nanocents"], 3 * TURN_NANOCENTS);
    assert_eq!(summary["judge_cost_nanocents"], 3 * JUDGE_NANOCENTS);
    assert_eq!(before - balance().await, 3 * TURN_NANOCENTS, "the three turns, billed like any turn");
    let judged = operator.get(&format!("/api/v1/evaluators/{evaluator}")).await.ok();
    assert_eq!(judged["evaluator"]["spent_nanocents"], 3 * JUDGE_NANOCENTS, "the judge calls are the evaluator's");
    let result = &a["results"][0];
    assert_eq!((&result["checks"]["exact_match"], &result["scores"]["helpful"]), (&json!(true), &json!(0.8)));
    assert_eq!(result["latency_ms"].as_i64().map(|l| l >= 0), Some(true));
    // Each grade is an `eval` score on the item's turn, too.
    let turn = result["turn_id"].as_str().unwrap();
    let scores = operator.get(&format!("/api/v1/scores?turn_id={turn}")).await.ok();
    assert_eq!((&scores["scores"][0]["source"], &scores["scores"][0]["value"]), (&json!("eval"), &json!(0.8)));

    // The account runs a copy with another brief: its answers change, the agent's do not.
    let run_b = api
        .post(
            "/api/v1/experiments",
            json!({"dataset_id": dataset, "agent_id": agent, "brief": "Beta", "checks": [{"kind": "contains", "value": "one"}]}),
        )
        .await;
    assert_eq!(run_b.status, 201, "{}", run_b.body);
    let run_b = run_b.body["experiment"]["id"].as_str().unwrap().to_owned();
    let b = ended(&api, &run_b).await;
    assert_eq!(b["experiment"]["status"], "completed", "{b}");
    assert_eq!(b["experiment"]["copy"], true);
    assert_eq!(outputs(&b), ["Beta: one", "Beta: two", "Beta: three"]);
    let checks: Vec<&Value> = b["results"].as_array().unwrap().iter().map(|r| &r["checks"]["contains:one"]).collect();
    assert_eq!(checks, [&json!(true), &json!(false), &json!(false)]);
    assert!((b["experiment"]["summary"]["checks"]["contains:one"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    // The copy is destroyed after the run; the agent still runs, with its own brief.
    let mut copy_gone = false;
    for _ in 0..100 {
        let listed = api.get("/api/instances").await.ok();
        let names: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|i| i["name"].as_str()).collect();
        if !names.iter().any(|n| n.starts_with("experiment ")) {
            copy_gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(copy_gone, "the copy outlived its run");
    assert_eq!(api.message(&agent, "four").await.ok()["reply"], "Alpha: four");

    // Both runs of the dataset, side by side.
    let runs = operator.get(&format!("/api/v1/experiments?dataset_id={dataset}")).await.ok();
    let ids: Vec<&str> = runs["experiments"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [run_b.as_str(), run_a.as_str()], "newest first");
    let mine = api.get("/api/v1/experiments").await.ok();
    assert_eq!(mine["experiments"].as_array().unwrap().len(), 1, "the account sees its own run only: {mine}");

    // MCP: the same over the account's key.
    let (session, _) = mcp::connect(&server, &account.key).await;
    let (listed, _) = mcp::call(&session, "list_datasets", json!({})).await;
    assert_eq!(listed.expect("list_datasets")["datasets"][0]["id"], dataset);
    let (run, _) = mcp::call(&session, "run_experiment", json!({"dataset_id": dataset, "agent_id": agent})).await;
    let run = run.expect("run_experiment")["experiment"]["id"].as_str().unwrap().to_owned();
    let c = ended(&api, &run).await;
    let (got, _) = mcp::call(&session, "get_experiment", json!({"id": run})).await;
    assert_eq!(got.expect("get_experiment")["experiment"]["completed"], c["experiment"]["completed"]);
    let (graded, _) = mcp::call(
        &session,
        "run_experiment",
        json!({"dataset_id": dataset, "agent_id": agent, "evaluator_ids": [evaluator]}),
    )
    .await;
    assert_eq!(graded.unwrap_err()["code"], "invalid_argument", "evaluators are the operator's");
    session.cancel().await.unwrap();
}

async fn accounts_reach_only_their_own_datasets_and_experiments(backend: Backend) {
    let server = start_with_model(backend).await;
    let (mine, theirs) = (server.account(0).await, server.account(0).await);
    let (api, other) = (server.api(Some(&mine)), server.api(Some(&theirs)));
    let agent = api.provision("echo", "mine").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&agent, "running").await;
    let turn = api.message(&agent, "secret").await.ok()["turn_id"].as_str().unwrap().to_owned();
    let dataset = api
        .post(
            "/api/v1/datasets",
            json!({"name": "d", "items": {"jsonl": "{\"input\":\"x\",\"expected\":\"[mine] x\"}"}}),
        )
        .await
        .ok()["dataset"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = api.post("/api/v1/experiments", json!({"dataset_id": dataset, "agent_id": agent})).await.ok()["experiment"]
        ["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = ended(&api, &run).await;
    assert_eq!(done["experiment"]["summary"]["checks"]["exact_match"], 1.0, "{done}");

    // The other account: nothing of mine is found, nothing of mine is runnable.
    let their_set =
        other.post("/api/v1/datasets", json!({"name": "d"})).await.ok()["dataset"]["id"].as_str().unwrap().to_owned();
    other.get(&format!("/api/v1/datasets/{dataset}")).await.err(404, "not_found");
    other.get(&format!("/api/v1/experiments/{run}")).await.err(404, "not_found");
    other.post(&format!("/api/v1/experiments/{run}/cancel"), json!({})).await.err(404, "not_found");
    other.delete_path(&format!("/api/v1/datasets/{dataset}")).await.err(404, "not_found");
    other.post("/api/v1/experiments", json!({"dataset_id": dataset, "agent_id": agent})).await.err(404, "not_found");
    other.post("/api/v1/experiments", json!({"dataset_id": their_set, "agent_id": agent})).await.err(404, "not_found");
    let items = format!("/api/v1/datasets/{their_set}/items");
    let add = |body: Value| other.post(&items, body);
    add(json!({"turn_ids": [turn]})).await.err(404, "not_found");
    add(json!({"session_id": agent})).await.err(404, "not_found");
    add(json!({"calls": [{"trace_id": "0".repeat(32), "span_id": "0".repeat(16)}]})).await.err(400, "invalid_argument");
    assert_eq!(other.get("/api/v1/datasets").await.ok()["datasets"].as_array().unwrap().len(), 1);
    assert!(other.get("/api/v1/experiments").await.ok()["experiments"].as_array().unwrap().is_empty());
    // A key that is no key is refused, not taken for the operator.
    let forged = server.api(None).with_key(Some("rsk_not_a_real_key"));
    forged.get("/api/v1/datasets").await.err(401, "unauthenticated");
    // The operator sees both accounts' datasets.
    assert_eq!(server.api(None).get("/api/v1/datasets").await.ok()["datasets"].as_array().unwrap().len(), 2);
}

async fn bad_requests_are_refused_and_change_nothing(backend: Backend) {
    let server = start_with_model(backend).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let agent = api.provision("echo", "b").await["id"].as_str().unwrap().to_owned();
    let dataset =
        api.post("/api/v1/datasets", json!({"name": "d"})).await.ok()["dataset"]["id"].as_str().unwrap().to_owned();
    let items = format!("/api/v1/datasets/{dataset}/items");
    let bad: Vec<(Value, u16, &str)> = vec![
        (json!({}), 400, "invalid_argument"),
        (json!({"items": [{"input": ""}]}), 400, "invalid_argument"),
        (json!({"items": [{"input": "x", "colour": 1}]}), 400, "invalid_argument"),
        (json!({"items": [{"input": "ok"}], "jsonl": "{\"input\":\"x\"}\nnot json"}), 400, "invalid_argument"),
        (json!({"csv": "question\nx"}), 400, "invalid_argument"),
        (json!({"csv": "input,expected\n\"open"}), 400, "invalid_argument"),
        (json!({"items": [{"input": "x".repeat(70_000)}]}), 400, "invalid_argument"),
        (json!({"turn_ids": ["turn_nope"]}), 404, "not_found"),
        (json!({"session_id": "nobody"}), 404, "not_found"),
        (json!({"extra": true}), 400, "invalid_argument"),
    ];
    for (body, status, code) in bad {
        let reply = api.post(&items, body.clone()).await;
        assert_eq!((reply.status, reply.body["code"].as_str()), (status, Some(code)), "{body}: {}", reply.body);
    }
    assert_eq!(api.get(&format!("/api/v1/datasets/{dataset}")).await.ok()["dataset"]["items"], 0, "nothing was added");
    api.post("/api/v1/datasets", json!({"name": "d"})).await.err(409, "wrong_state");
    api.post("/api/v1/datasets", json!({"name": ""})).await.err(400, "invalid_argument");
    // An empty dataset, or a bad check, runs nothing.
    let runs = |body: Value| api.post("/api/v1/experiments", body);
    runs(json!({"dataset_id": dataset, "agent_id": agent})).await.err(400, "invalid_argument");
    api.post(&items, json!({"csv": "input,expected,topic\nhi,[b] hi,greeting\n"})).await.ok();
    runs(json!({"dataset_id": dataset, "agent_id": agent, "checks": [{"kind": "regex"}]}))
        .await
        .err(400, "invalid_argument");
    runs(json!({"dataset_id": dataset, "agent_id": "ins_nope"})).await.err(404, "not_found");
    runs(json!({"dataset_id": "ds_nope", "agent_id": agent})).await.err(404, "not_found");
    runs(json!({"dataset_id": dataset, "agent_id": agent, "evaluator_ids": ["ev_x"]}))
        .await
        .err(400, "invalid_argument");
    assert!(api.get("/api/v1/experiments").await.ok()["experiments"].as_array().unwrap().is_empty());
    let got = api.get(&format!("/api/v1/datasets/{dataset}")).await.ok();
    assert_eq!(
        (&got["items"][0]["expected"], &got["items"][0]["metadata"]),
        (&json!("[b] hi"), &json!({"topic": "greeting"}))
    );
    // A finished run cannot be cancelled; a running dataset cannot be deleted meanwhile.
    api.wait_status(&agent, "running").await;
    let run = runs(json!({"dataset_id": dataset, "agent_id": agent})).await.ok()["experiment"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ended(&api, &run).await;
    api.post(&format!("/api/v1/experiments/{run}/cancel"), json!({})).await.err(409, "wrong_state");

    // A long run is cancelled part-way: it stops, and says so; its dataset is busy until then.
    let jsonl: String = (0..3_000).map(|n| format!("{{\"input\":\"n{n}\"}}\n")).collect();
    let long =
        api.post("/api/v1/datasets", json!({"name": "long", "items": {"jsonl": jsonl}})).await.ok()["dataset"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let run = runs(json!({"dataset_id": long, "agent_id": agent})).await.ok()["experiment"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api.delete_path(&format!("/api/v1/datasets/{long}")).await.err(409, "wrong_state");
    let cancelled = api.post(&format!("/api/v1/experiments/{run}/cancel"), json!({})).await.ok();
    assert_eq!(cancelled["experiment"]["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopped = api.get(&format!("/api/v1/experiments/{run}")).await.ok();
    let answered = stopped["experiment"]["completed"].as_i64().unwrap();
    assert!(answered < 3_000, "{}", stopped["experiment"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = api.get(&format!("/api/v1/experiments/{run}")).await.ok();
    assert_eq!(later["experiment"]["completed"], answered, "nothing ran after the cancel settled");
    assert!(later["results"].as_array().unwrap().iter().all(|r| r["status"] != "running"), "no item left running");
    assert_eq!(later["experiment"]["dataset_name"], "long");

    // Its items come in pages: 1,000 unless asked, at most 10,000, and where the next starts.
    let api = &api;
    let page = |query: &str| {
        let path = format!("/api/v1/datasets/{long}{query}");
        async move { api.get(&path).await }
    };
    let first = page("").await.ok();
    assert_eq!((first["items"].as_array().unwrap().len(), &first["next_offset"]), (1_000, &json!(1_000)));
    assert_eq!((&first["items"][0]["input"], &first["dataset"]["items"]), (&json!("n0"), &json!(3_000)));
    let last = page("?offset=2500&limit=1000").await.ok();
    assert_eq!((last["items"].as_array().unwrap().len(), &last["next_offset"]), (500, &json!(0)));
    assert_eq!((&last["items"][0]["position"], &last["items"][0]["input"]), (&json!(2_501), &json!("n2500")));
    let whole = page("?limit=50000").await.ok();
    assert_eq!((whole["items"].as_array().unwrap().len(), &whole["next_offset"]), (3_000, &json!(0)));
    let exact = page("?offset=2000&limit=1000").await.ok();
    assert_eq!((exact["items"].as_array().unwrap().len(), &exact["next_offset"]), (1_000, &json!(0)));
    for bad in ["?offset=-1", "?limit=-5", "?limit=many", "?page=2"] {
        page(bad).await.err(400, "invalid_argument");
    }

    api.delete_path(&format!("/api/v1/datasets/{long}")).await.ok();
    api.get(&format!("/api/v1/experiments/{run}")).await.err(404, "not_found");
}
