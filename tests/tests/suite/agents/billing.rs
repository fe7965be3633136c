//! Billing as DESIGN.md has it: renewals each period, suspension when unpaid, resume
//! paying the renewal, and metered managed-model turns, with an OpenAI-compatible upstream
//! played by a local server.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Json, Router, extract::State, http::HeaderMap, routing::post};
use roost_server::runtimes::assistant::Upstream;
use roost_tests::{Backend, each_backend};
use serde_json::{Value, json};

use super::start;

each_backend!(
    renewals_charge_each_period_and_suspend_when_unpaid,
    metered_turns_are_charged_by_the_price_book,
    byok_agents_use_their_own_key
);

async fn renewals_charge_each_period_and_suspend_when_unpaid(backend: Backend) {
    let server = start(backend, |config| config.hosting.billing.period = Duration::from_millis(1500)).await;
    // First agent free; the paid one costs 100 per period: provision + 1 renewal = 200.
    let account = server.account(250).await;
    let api = server.api(Some(&account));
    let free = api.provision("echo", "free").await;
    api.wait_status(free["id"].as_str().unwrap(), "running").await;
    let paid = api.provision("echo-paid", "paid").await;
    assert_eq!(paid["balance_cents"], 150);
    let id = paid["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    // One renewal is paid (50 left), the next cannot be: suspended.
    let suspended = api.wait_status(&id, "suspended").await;
    assert!(suspended["status_detail"].as_str().unwrap().contains("could not be paid"), "{suspended}");
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 50);
    api.message(&id, "hello?").await.err(409, "wrong_state");
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let kinds: Vec<&str> =
        activity["charges"].as_array().unwrap().iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["renewal", "provision"]);
    // The free echo keeps renewing at 0 without ledger noise.
    assert_eq!(api.get(&format!("/api/instances/{}", free["id"].as_str().unwrap())).await.ok()["status"], "running");

    // Resume needs the renewal paid: 402 until credits arrive.
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.err(402, "insufficient_credits");
    server.store().await.add_credits(&account.id, 1_000).await.unwrap();
    let resumed = api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    assert_eq!((resumed["charged_cents"].as_i64(), resumed["balance_cents"].as_i64()), (Some(100), Some(950)));
    api.wait_status(&id, "running").await;
    assert_eq!(api.message(&id, "back").await.ok()["reply"], "[paid] back");
}

/// What the fake upstream saw.
#[derive(Default)]
struct Seen {
    requests: Vec<Value>,
    keys: Vec<String>,
}

/// The fake upstream's state: what it saw, and the usage it reports.
type FakeState = (Arc<Mutex<Seen>>, (i64, i64));

/// An OpenAI-compatible chat-completions server answering every request with `usage`.
async fn fake_upstream(usage: (i64, i64)) -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    async fn complete(
        State((seen, usage)): State<FakeState>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        let last = body["messages"].as_array().and_then(|m| m.last()).map(|m| m["content"].clone()).unwrap_or_default();
        let mut seen = seen.lock().unwrap();
        seen.keys.push(headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned());
        seen.requests.push(body.clone());
        Json(json!({
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("you said {}", last.as_str().unwrap_or_default())}}],
            "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1},
        }))
    }
    let app = Router::new().route("/v1/chat/completions", post(complete)).with_state((seen.clone(), usage));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), seen)
}

async fn metered_turns_are_charged_by_the_price_book(backend: Backend) {
    // gpt-4o: $2.50 in, $10 out per Mtok. 1000 in + 500 out = 0.25 + 0.5 = 0.75 cents a turn.
    let (upstream, seen) = fake_upstream((1_000, 500)).await;
    let server = start(backend, |config| {
        config.hosting.model_upstream = Some(Upstream { base_url: upstream, api_key: Some("managed-key".into()) });
    })
    .await;
    let account = server.account(2).await;
    let api = server.api(Some(&account));
    let id = api.provision("assistant", "You are a parrot.").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let first = api.message(&id, "one").await.ok();
    assert_eq!(first["reply"], "you said one");
    assert_eq!(first["usage"], json!({"input_tokens": 1000, "output_tokens": 500}));
    assert_eq!(first["charged_cents"], 0, "0.75 cents: carried, not rounded");
    let second = api.message(&id, "two").await.ok();
    assert_eq!(second["charged_cents"], 1, "1.5 cents so far: one whole cent charged");
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 1);
    let third = api.message(&id, "three").await.ok();
    assert_eq!(third["charged_cents"], 1, "2.25 cents so far");
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 0);

    // At or below zero, managed turns are refused before they run.
    api.message(&id, "four").await.err(402, "insufficient_credits");
    assert_eq!(seen.lock().unwrap().requests.len(), 3);

    // The brief is the system prompt and the conversation is remembered.
    let requests = seen.lock().unwrap().requests.clone();
    let messages = requests[2]["messages"].as_array().unwrap();
    assert_eq!(messages[0], json!({"role": "system", "content": "You are a parrot."}));
    let contents: Vec<&str> = messages.iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["You are a parrot.", "one", "you said one", "two", "you said two", "three"]);
    assert_eq!(requests[0]["model"], "gpt-4o");
    assert_eq!(seen.lock().unwrap().keys[0], "Bearer managed-key");

    // Usage charges are in the ledger and the turns.
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let usage: Vec<i64> = activity["charges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "usage")
        .map(|c| c["amount_cents"].as_i64().unwrap())
        .collect();
    assert_eq!(usage, [-1, -1]);
    assert_eq!(activity["turns"][0]["charged_cents"], 1);
}

async fn byok_agents_use_their_own_key(backend: Backend) {
    let (upstream, seen) = fake_upstream((10, 10)).await;
    let server = start(backend, |config| config.hosting.byok_upstream_url = upstream).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let created =
        api.post("/api/provision", json!({"runtime": "assistant", "brief": "mine", "model_mode": "byok"})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["model_mode"], "byok");
    let id = created.body["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    // No key yet: the agent cannot answer, and says how to fix it.
    let reply = api.message(&id, "hello").await;
    reply.err(409, "wrong_state");
    assert!(reply.body["error"].as_str().unwrap().contains("PROVIDER_API_KEY"));

    api.post(&format!("/api/instances/{id}/config"), json!({"PROVIDER_API_KEY": "sk-mine"})).await.ok();
    api.wait_status(&id, "running").await;
    let turn = api.message(&id, "hello").await.ok();
    assert_eq!(turn["reply"], "you said hello");
    assert_eq!(turn["charged_cents"], 0, "byok turns are not metered");
    assert_eq!(seen.lock().unwrap().keys, ["Bearer sk-mine"]);
}
