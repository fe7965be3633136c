//! Billing as docs/architecture.md#money has it: renewals each period, suspension when unpaid,
//! resume paying the renewal, and metered managed-model turns, with an OpenAI-compatible upstream
//! played by a local server.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Json, Router, extract::State, http::HeaderMap, routing::post};
use roost_server::{billing::prices::PriceBook, llm::Upstream};
use roost_tests::{Backend, each_backend};
use serde_json::{Value, json};

use super::start;

each_backend!(
    renewals_charge_each_period_and_suspend_when_unpaid,
    metered_turns_are_charged_by_the_price_book,
    managed_models_are_priced_by_the_book_and_the_model_that_answered,
    a_reply_with_nul_is_kept_and_store_errors_stay_out_of_answers,
    byok_agents_use_their_own_key
);

async fn renewals_charge_each_period_and_suspend_when_unpaid(backend: Backend) {
    let server = start(backend, |config| config.hosting.billing.period = Duration::from_millis(1500)).await;
    // The free month used up; the paid one costs 100 per period: provision + 1 renewal = 200.
    let account = server.account(250).await;
    let api = server.api(Some(&account));
    super::money::use_up_free_month(&api).await;
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
pub(super) struct Seen {
    pub requests: Vec<Value>,
    pub keys: Vec<String>,
}

/// What the fake upstream answers: the usage it reports, and the model and reply it names
/// (by default the request's model and "you said <the last message>").
#[derive(Clone, Default)]
pub(super) struct Answer {
    pub usage: (i64, i64),
    pub model: Option<String>,
    pub reply: Option<String>,
}

impl Answer {
    /// The request's model and "you said …", with this usage.
    pub fn usage(prompt: i64, completion: i64) -> Self {
        Self { usage: (prompt, completion), ..Self::default() }
    }
}

/// The fake upstream's state: what it saw, and what it answers.
type FakeState = (Arc<Mutex<Seen>>, Answer);

/// An OpenAI-compatible chat-completions server answering every request with `answer`.
pub(super) async fn fake_upstream(answer: Answer) -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    async fn complete(
        State((seen, answer)): State<FakeState>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> Json<Value> {
        let last = body["messages"].as_array().and_then(|m| m.last()).map(|m| m["content"].clone()).unwrap_or_default();
        let mut seen = seen.lock().unwrap();
        seen.keys.push(headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned());
        seen.requests.push(body.clone());
        let reply = answer.reply.clone().unwrap_or_else(|| format!("you said {}", last.as_str().unwrap_or_default()));
        Json(json!({
            "model": answer.model.clone().map_or(body["model"].clone(), Value::from),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": answer.usage.0, "completion_tokens": answer.usage.1},
        }))
    }
    let app = Router::new().route("/v1/chat/completions", post(complete)).with_state((seen.clone(), answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), seen)
}

async fn metered_turns_are_charged_by_the_price_book(backend: Backend) {
    // gpt-4o: $2.50 in, $10 out per Mtok. 1000 in + 500 out = 0.25 + 0.5 = 0.75 cents a turn.
    let (upstream, seen) = fake_upstream(Answer::usage(1_000, 500)).await;
    let server = start(backend, |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: Some("managed-key".into()) });
    })
    .await;
    let account = server.account(2).await;
    let api = server.api(Some(&account));
    let id = api.provision("assistant", "You are a parrot.").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let first = api.message(&id, "one").await.ok();
    assert_eq!(first["reply"], "you said one");
    assert_eq!(first["usage"], json!({"input_tokens": 1000, "output_tokens": 500}));
    // Each turn is charged exactly what it cost, below a cent; `*_cents` fields round it.
    assert_eq!((first["charged_nanocents"].as_i64(), first["charged_cents"].as_i64()), (Some(750_000_000), Some(1)));
    let account_now = || async { api.get("/api/account").await.ok() };
    assert_eq!(account_now().await["balance_nanocents"], 1_250_000_000_i64);
    let second = api.message(&id, "two").await.ok();
    assert_eq!(second["charged_nanocents"], 750_000_000);
    let after_two = account_now().await;
    assert_eq!(
        (after_two["balance_nanocents"].as_i64(), after_two["balance_cents"].as_i64()),
        (Some(500_000_000), Some(1))
    );
    let third = api.message(&id, "three").await.ok();
    assert_eq!(third["charged_nanocents"], 750_000_000);
    let after_three = account_now().await;
    assert_eq!(
        (after_three["balance_nanocents"].as_i64(), after_three["balance_cents"].as_i64()),
        (Some(-250_000_000), Some(0)),
        "a metered turn may take the balance below zero; -0.25 cents rounds to 0"
    );

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
        .map(|c| c["amount_nanocents"].as_i64().unwrap())
        .collect();
    assert_eq!(usage, [-750_000_000; 3]);
    assert_eq!(activity["turns"][0]["charged_nanocents"], 750_000_000);

    // The assistant calls its model through the model gateway, like any runtime: each turn
    // is one recorded call, charged per call (the ledger rows name it), and its span sits
    // under the turn's in the agent's session.
    let calls = server
        .sql(&format!(
            "SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND turn_id LIKE 'turn_%' \
             AND input_tokens = 1000 AND status = 'completed'"
        ))
        .await
        .unwrap();
    assert_eq!(calls, [3], "one call per turn, in its turn");
    let per_call =
        server.sql("SELECT COUNT(*) FROM ledger WHERE kind = 'usage' AND call_id LIKE 'call_%'").await.unwrap();
    assert_eq!(per_call, [3], "each call charged exactly, on a row naming it");
    let dashboard = server.api(None);
    let mut spans = Vec::new();
    for _ in 0..100 {
        spans = crate::observe::q1(&dashboard, "spans", json!({"session_id": id, "limit": 50})).await;
        if spans.iter().filter(|s| s["operation"] == "chat").count() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let turns: Vec<_> = spans.iter().filter(|s| s["operation"] == "invoke_agent").collect();
    let chats: Vec<_> = spans.iter().filter(|s| s["operation"] == "chat").collect();
    assert_eq!((turns.len(), chats.len()), (3, 3), "{spans:#?}");
    for chat in chats {
        assert!(turns.iter().any(|t| t["span_id"] == chat["parent_span_id"]), "under its turn: {chat:#?}");
        assert_eq!(chat["input_tokens"], 1000);
    }
}

async fn byok_agents_use_their_own_key(backend: Backend) {
    let (upstream, seen) = fake_upstream(Answer::usage(10, 10)).await;
    let server = start(backend, |config| config.hosting.models.byok_openai_url = upstream).await;
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

/// A managed assistant is metered whatever its model is called: a name the price book does
/// not price (roost's own runtimes' model names among them) is refused before the upstream
/// is called, a router-prefixed one is priced as its model, and the model the upstream says
/// answered is the one charged.
async fn managed_models_are_priced_by_the_book_and_the_model_that_answered(backend: Backend) {
    // 1M in + 330k out tokens: $5.80 at gpt-4o's $2.50 / $10, $0.348 at gpt-4o-mini's.
    let (upstream, seen) = fake_upstream(Answer::usage(1_000_000, 330_000)).await;
    let server = start(backend, |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: None });
    })
    .await;
    let account = server.account(100_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("assistant", "priced").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let path = format!("/api/instances/{id}/config");
    let config = |model: &str| api.post(&path, json!({"model": model}));

    for model in ["echo", "example", "echo-gpt-4o", "example-4o", "a-model-nobody-prices"] {
        let refused = config(model).await;
        refused.err(400, "unpriced_model");
        assert!(refused.body["error"].as_str().unwrap().contains(model), "{}", refused.body);
    }
    assert_eq!(api.get(&format!("/api/instances/{id}")).await.ok()["model"], "", "nothing changed: the default");

    config("example/gpt-4o").await.ok();
    api.wait_status(&id, "running").await;
    let turn = api.message(&id, "one").await.ok();
    assert_eq!(turn["charged_cents"], 580, "priced as gpt-4o: {turn}");
    assert_eq!(seen.lock().unwrap().requests.len(), 1);
    let balance = api.get("/api/account").await.ok()["balance_cents"].as_i64().unwrap();
    assert_eq!(balance, 100_000 - 580, "the first agent's period is free; the turn cost 580");
    server.stop().await.unwrap();

    // The upstream answering with another model than the one asked for: that one is
    // charged.
    let (upstream, _) =
        fake_upstream(Answer { model: Some("gpt-4o-2024-08-06".into()), ..Answer::usage(1_000_000, 330_000) }).await;
    let server = start(backend, |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: None });
    })
    .await;
    let account = server.account(100_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("assistant", "cheap").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    api.post(&format!("/api/instances/{id}/config"), json!({"model": "gpt-4o-mini"})).await.ok();
    api.wait_status(&id, "running").await;
    let turn = api.message(&id, "one").await.ok();
    assert_eq!(turn["charged_cents"], 580, "charged as the gpt-4o that answered, not the gpt-4o-mini asked for");
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    assert_eq!(activity["turns"][0]["model"], "gpt-4o-2024-08-06");
    server.stop().await.unwrap();

    // A price book that does not price the runtime's default model: the first message is
    // refused, and the upstream never hears of it.
    let (upstream, seen) = fake_upstream(Answer::usage(10, 10)).await;
    let prices = "[models.\"gpt-4o-mini\"]\ninput_usd_per_mtok = 0.15\noutput_usd_per_mtok = 0.6\n";
    let server = start(backend, |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: None });
        config.hosting.prices = PriceBook::from_toml(prices).unwrap();
    })
    .await;
    let account = server.account(100_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("assistant", "unpriced").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let refused = api.message(&id, "hello").await;
    refused.err(400, "unpriced_model");
    assert!(refused.body["error"].as_str().unwrap().contains("gpt-4o"), "{}", refused.body);
    assert!(seen.lock().unwrap().requests.is_empty(), "the upstream was not called");
}

/// PostgreSQL's text cannot hold U+0000: a model that answers with one still gets its
/// turn answered, charged and remembered (as U+FFFD, on both backends), a store that
/// cannot keep the history does not lose it while the agent runs, and no database error
/// text reaches a client.
async fn a_reply_with_nul_is_kept_and_store_errors_stay_out_of_answers(backend: Backend) {
    let (upstream, seen) =
        fake_upstream(Answer { reply: Some("zero\0byte".into()), ..Answer::usage(1_000, 500) }).await;
    let server = start(backend, |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: None });
    })
    .await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("assistant", "nul").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    for text in ["one", "two"] {
        let turn = api.message(&id, text).await.ok();
        assert_eq!(turn["reply"], "zero\u{FFFD}byte", "{turn}");
    }
    // The second call carried the first exchange.
    let requests = seen.lock().unwrap().requests.clone();
    let contents: Vec<&str> =
        requests[1]["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["nul", "one", "zero\u{FFFD}byte", "two"]);

    // The agent reads its history from the store at its first turn and keeps it in memory
    // after: a store that cannot keep an exchange does not fail the turn, and the next
    // turn still carries it.
    server.sql("DROP TABLE assistant_exchanges").await.unwrap();
    for text in ["three", "four"] {
        assert_eq!(api.message(&id, text).await.ok()["reply"], "zero\u{FFFD}byte");
    }
    let requests = seen.lock().unwrap().requests.clone();
    let contents: Vec<&str> =
        requests[3]["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents[contents.len() - 3..], ["three", "zero\u{FFFD}byte", "four"]);

    // A store that fails the history read (a new agent's first turn): the answer says so,
    // without the database's words.
    let id = api.provision("assistant", "nul").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let failed = api.message(&id, "five").await;
    failed.err(502, "runtime_failed");
    let error = failed.body["error"].as_str().unwrap().to_lowercase();
    assert!(
        !error.contains("assistant_exchanges") && !error.contains("no such table") && !error.contains("relation"),
        "{error}"
    );
}
