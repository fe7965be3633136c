//! The model gateway (`/llm`): a process runtime calls the model through roost with the
//! official `openai` and `anthropic` Python SDKs (tests/senders/python/gateway_agent.py),
//! against fake OpenAI and Anthropic upstreams that record what they receive. The upstream
//! gets the operator's key (managed) or the agent's own (byok), never the gateway token;
//! the runtime's environment holds neither; managed calls are charged at the price book ×
//! reported usage, one ledger row per call, and admitted through the account's holds; every
//! call is a span in the agent's session, under its turn.

use std::{path::Path, time::Duration};

use roost_server::{billing::prices::PriceBook, llm::Upstream};
use roost_tests::{
    Api, Backend, TestServer, each_backend,
    fake_models::{self, FakeModels},
    tools,
};
use serde_json::{Value, json};

use super::{
    TEST_CATALOGUE,
    money::{NC, assert_books_balance, assert_holds_released},
    start,
};

each_backend!(
    sdk_calls_are_routed_metered_and_traced_under_their_turn,
    byok_calls_carry_the_agents_own_key_and_are_not_charged,
    the_gateway_refuses_strangers_spent_balances_and_old_tokens,
    concurrent_calls_across_agents_never_overdraw_past_one_call,
    a_hang_up_cancels_the_upstream_and_an_agent_has_a_cap_on_calls_at_once,
    a_stream_that_stalls_fails_the_call_and_ends_the_answer,
    an_unreachable_upstream_fails_the_call_without_charging_or_naming_it,
    a_turn_in_a_loop_stops_at_its_limit_on_calls_or_on_spend,
    https_upstreams_are_verified_against_the_system_and_the_operators_roots,
    the_guard_counts_calls_made_between_turns,
    a_calls_hold_counts_every_choice_it_asks_for
);

/// The operator's managed keys, which only the upstreams may see.
const OPENAI_KEY: &str = "sk-operator-openai";
const ANTHROPIC_KEY: &str = "sk-operator-anthropic";
/// The model the gateway agent calls.
const MODEL: &str = "gpt-4o-mini";

/// Prices that make each call cost whole cents: input 1 ¢/token, output 2 ¢, cache reads
/// 0.5 ¢, cache writes 1.25 ¢ (USD per million tokens: 10,000 is 1 ¢ per token).
const PRICES: &str = r#"
[models."gpt-4o-mini"]
input_usd_per_mtok = 10000
output_usd_per_mtok = 20000
cache_read_usd_per_mtok = 5000
cache_write_usd_per_mtok = 12500
"#;

/// An OpenAI call's cost in hundredths of a cent: 16 uncached + 5 cached prompt tokens, 7
/// completion tokens.
const OPENAI_CALL: i64 = 16 * 100 + 5 * 50 + 7 * 200;
/// An Anthropic call's: 13 uncached, 4 cache reads, 3 cache writes, 9 output tokens.
const ANTHROPIC_CALL: i64 = 13 * 100 + 4 * 50 + 3 * 125 + 9 * 200;

/// Starts roost with the gateway agent in its catalogue and `fake` as its upstreams.
pub(super) async fn start_gateway(
    backend: Backend,
    fake: &FakeModels,
    configure: impl FnOnce(&mut roost_server::ServeConfig),
) -> TestServer {
    let senders = Path::new(env!("CARGO_MANIFEST_DIR")).join("senders");
    let venv = tools::venv(
        "senders-venv",
        &senders.join("python/requirements.txt"),
        "run `scripts/test --setup-only` (it builds the venv), or the commands in tests/senders/README.md",
    );
    let command = format!(
        "command = [{:?}, {:?}]",
        venv.join("bin/python").display().to_string(),
        senders.join("python/gateway_agent.py").display().to_string(),
    );
    // `gateway-frugal` is the same runtime with a limit of its own on a turn's spend.
    let catalogue = format!(
        "{TEST_CATALOGUE}\n[[runtime]]\nid = \"gateway\"\ndriver = \"process\"\nprice_cents_month = 0\n\
         included_model = true\ndefault_model = \"{MODEL}\"\n{command}\n\
         [[runtime]]\nid = \"gateway-frugal\"\ndriver = \"process\"\nprice_cents_month = 0\n\
         included_model = true\ndefault_model = \"{MODEL}\"\nmax_turn_spend_cents = 30\n{command}\n",
    );
    let (openai, anthropic) = (fake.openai_base_url(), fake.anthropic_base_url());
    start(backend, move |config| {
        config.hosting.catalogue = roost_server::runtimes::Catalogue::from_toml(&catalogue).expect("catalogue");
        config.hosting.prices = PriceBook::from_toml(PRICES).expect("prices");
        config.hosting.models.openai = Some(Upstream { base_url: openai.clone(), api_key: Some(OPENAI_KEY.into()) });
        config.hosting.models.anthropic = Some(Upstream { base_url: anthropic, api_key: Some(ANTHROPIC_KEY.into()) });
        config.hosting.models.byok_openai_url = openai;
        config.hosting.models.byok_anthropic_url = fake.anthropic_base_url();
        configure(config);
    })
    .await
}

/// A running gateway agent of `api`'s account.
pub(super) async fn agent(api: &Api) -> String {
    let id = api.provision("gateway", "You are terse.").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    id
}

/// A running gateway agent of `api`'s account, and its gateway token (from its
/// environment).
async fn agent_with_token(api: &Api) -> (String, String) {
    let id = agent(api).await;
    let token = environment(api, &id).await["OPENAI_API_KEY"].as_str().unwrap().to_owned();
    (id, token)
}

/// Sends `text`; the turn's reply body (200 expected).
async fn turn(api: &Api, id: &str, text: &str) -> Value {
    let reply = api.message(id, text).await;
    assert_eq!(reply.status, 200, "{text}: {}", reply.body);
    reply.body
}

/// The reply text of a turn.
async fn said(api: &Api, id: &str, text: &str) -> String {
    turn(api, id, text).await["reply"].as_str().unwrap().to_owned()
}

/// The runtime's environment.
async fn environment(api: &Api, id: &str) -> Value {
    serde_json::from_str(&said(api, id, "env").await).unwrap()
}

async fn sdk_calls_are_routed_metered_and_traced_under_their_turn(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = agent(&api).await;

    // The runtime finds the gateway where the SDKs look (its sandbox's relay to roost),
    // with its own token, and no key.
    let env = environment(&api, &id).await;
    assert_eq!(env["OPENAI_BASE_URL"], "http://127.0.0.1:7300/llm/v1");
    assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:7300/llm/anthropic");
    let token = env["OPENAI_API_KEY"].as_str().unwrap().to_owned();
    assert!(token.starts_with("rat_"), "{env}");
    assert_eq!(env["ANTHROPIC_API_KEY"], token.as_str());
    let all = env.to_string();
    for secret in [OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(!all.contains(secret), "the runtime must not see {secret}");
    }
    assert!(env.get("PROVIDER_API_KEY").is_none() && env.get("MESSAGING_BOT_TOKEN").is_none(), "{env}");

    // Plain, streamed, and tool-calling replies arrive intact through the gateway.
    let plain = turn(&api, &id, "openai").await;
    assert_eq!(plain["reply"], fake_models::REPLY);
    assert_eq!(plain["usage"], json!({"input_tokens": 21, "output_tokens": 7}), "the turn's usage is its call's");
    let streamed: Value = serde_json::from_str(&said(&api, &id, "openai-stream").await).unwrap();
    assert_eq!(streamed, json!({"text": fake_models::REPLY, "usage_chunks": 0}), "no usage chunk it did not ask for");
    let with_usage: Value = serde_json::from_str(&said(&api, &id, "openai-stream-usage").await).unwrap();
    assert_eq!(with_usage["text"], fake_models::REPLY);
    assert_eq!(with_usage["usage"]["prompt_tokens"], 21, "{with_usage}");
    let tool = said(&api, &id, "openai-tool").await;
    let tool: Value = serde_json::from_str(&tool).unwrap_or_else(|_| panic!("{tool}"));
    assert_eq!(
        tool,
        json!({"tool": "get_weather", "arguments": fake_models::TOOL_ARGUMENTS, "reply": fake_models::REPLY_AFTER_TOOL})
    );
    let tool_stream: Value = serde_json::from_str(&said(&api, &id, "openai-tool-stream").await).unwrap();
    assert_eq!(tool_stream, tool);
    assert_eq!(said(&api, &id, "anthropic").await, fake_models::REPLY);
    assert_eq!(said(&api, &id, "anthropic-stream").await, fake_models::REPLY);
    let claude_tool: Value = serde_json::from_str(&said(&api, &id, "anthropic-tool").await).unwrap();
    assert_eq!(claude_tool["input"], json!({"city": "Paris"}), "{claude_tool}");
    assert_eq!(claude_tool["reply"], fake_models::REPLY_AFTER_TOOL);

    // The upstreams got the operator's keys, never the gateway token; streamed OpenAI
    // calls were asked for their usage.
    let received = fake.requests();
    let (openai_calls, anthropic_calls) = (7, 4);
    assert_eq!(received.iter().filter(|r| r.api == "openai").count(), openai_calls, "{received:#?}");
    assert_eq!(received.iter().filter(|r| r.api == "anthropic").count(), anthropic_calls, "{received:#?}");
    for request in &received {
        let presented = format!("{:?} {:?}", request.authorization, request.api_key);
        assert!(!presented.contains(&token), "the gateway token reached the upstream: {presented}");
        match request.api {
            "openai" => assert_eq!(request.authorization.as_deref(), Some(&*format!("Bearer {OPENAI_KEY}"))),
            _ => assert_eq!(request.api_key.as_deref(), Some(ANTHROPIC_KEY)),
        }
        if request.api == "openai" && request.body["stream"] == true {
            assert_eq!(request.body["stream_options"]["include_usage"], true, "{:?}", request.body);
        }
    }

    // Charges: the price book × the reported usage, one ledger row per call, and the
    // turns report the sum of their calls.
    let cost_hundredths = openai_calls as i64 * OPENAI_CALL + anthropic_calls as i64 * ANTHROPIC_CALL;
    let balance = assert_books_balance(&server, &account).await;
    assert_eq!(balance, 10_000 * NC - cost_hundredths * (NC / 100), "each call charged exactly, below a cent");
    let ledger = api.get("/api/account/ledger?limit=100").await.ok();
    let usage_rows = ledger["charges"].as_array().unwrap().iter().filter(|c| c["kind"] == "usage").count();
    assert_eq!(usage_rows, openai_calls + anthropic_calls, "{ledger}");
    let calls = server
        .sql(&format!("SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND status = 'completed'"))
        .await
        .unwrap();
    assert_eq!(calls, [(openai_calls + anthropic_calls) as i64]);
    assert_eq!(plain["charged_nanocents"], OPENAI_CALL * (NC / 100), "{plain}");

    // Every call is a span in the agent's session, in its turn's trace, under the turn.
    // (A call's span is written just after its charge: wait for the last ones.)
    let dashboard = api_dashboard(&server);
    let mut spans = Vec::new();
    for _ in 0..100 {
        spans = crate::observe::q1(&dashboard, "spans", json!({"session_id": id, "limit": 200})).await;
        let count = |operation: &str| spans.iter().filter(|s| s["operation"] == operation).count();
        // Eight turns called the model.
        if count("chat") == openai_calls + anthropic_calls && count("invoke_agent") == 8 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let chats: Vec<_> = spans.iter().filter(|s| s["operation"] == "chat").collect();
    assert_eq!(chats.len(), openai_calls + anthropic_calls, "{spans:#?}");
    let turns: Vec<_> = spans.iter().filter(|s| s["operation"] == "invoke_agent").collect();
    for chat in &chats {
        assert!(
            turns.iter().any(|t| t["trace_id"] == chat["trace_id"] && t["span_id"] == chat["parent_span_id"]),
            "a call's span is under its turn's: {chat:#?}"
        );
        assert!(chat["input_tokens"].as_i64().unwrap() > 0, "{chat:#?}");
    }
    let anthropic_span = chats.iter().find(|s| s["system"] == "anthropic").expect("an Anthropic span");
    assert_eq!(
        (&anthropic_span["input_tokens"], &anthropic_span["cache_read_tokens"], &anthropic_span["cache_write_tokens"]),
        (&json!(20), &json!(4), &json!(3)),
        "{anthropic_span:#?}"
    );
    let spans_text = serde_json::to_string(&spans).unwrap();
    for secret in [OPENAI_KEY, ANTHROPIC_KEY, token.as_str()] {
        assert!(!spans_text.contains(secret), "a key in a span");
    }
}

/// The dashboard's view (q/1), as a loopback client.
fn api_dashboard(server: &TestServer) -> Api {
    server.api(None)
}

async fn byok_calls_carry_the_agents_own_key_and_are_not_charged(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |_| {}).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let created =
        api.post("/api/provision", json!({"runtime": "gateway", "brief": "mine", "model_mode": "byok"})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    // Without its key, a byok agent's call is refused by roost, not sent.
    assert!(said(&api, &id, "openai").await.starts_with("error: 409"), "no key yet");
    assert!(fake.requests().is_empty());

    let key = "sk-agent-own-key-123";
    api.post(&format!("/api/instances/{id}/config"), json!({"PROVIDER_API_KEY": key})).await.ok();
    api.wait_status(&id, "running").await;
    let env = environment(&api, &id).await;
    assert!(!env.to_string().contains(key), "the agent's key stays in roost: {env}");

    assert_eq!(said(&api, &id, "openai").await, fake_models::REPLY);
    assert_eq!(said(&api, &id, "anthropic").await, fake_models::REPLY);
    let received = fake.requests();
    assert_eq!(received[0].authorization.as_deref(), Some(&*format!("Bearer {key}")));
    assert_eq!(received[1].api_key.as_deref(), Some(key));

    // Recorded and costed, not charged.
    assert_eq!(assert_books_balance(&server, &account).await, 1_000 * NC);
    let costed = server
        .sql(&format!(
            "SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND cost_nanocents > 0 AND charged_nanocents = 0"
        ))
        .await
        .unwrap();
    assert_eq!(costed, [2]);
}

/// A chat completion sent straight to the gateway with `token`.
/// A chat completion as agent `id`'s runtime makes it (on its own socket) with `token`.
async fn call(server: &TestServer, id: &str, token: &str, body: Value) -> (u16, Value) {
    let resp =
        server.as_agent(id).post("/llm/v1/chat/completions").bearer_auth(token).json(&body).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn hello(model: &str) -> Value {
    json!({"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "hello"}]})
}

async fn the_gateway_refuses_strangers_spent_balances_and_old_tokens(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = agent(&api).await;
    // A managed turn on a priced model needs credits: 402 before the runtime is asked.
    assert_eq!(api.message(&id, "openai").await.status, 402);
    // On an unpriced model the turn runs (and its call is refused by the gateway, below).
    api.post(&format!("/api/instances/{id}/config"), json!({"model": "no-such-model"})).await.ok();
    api.wait_status(&id, "running").await;
    let token = environment(&api, &id).await["OPENAI_API_KEY"].as_str().unwrap().to_owned();

    // Strangers: no token, a made-up one, an account key.
    let anonymous = server.http.post(server.url("/llm/v1/chat/completions")).json(&hello(MODEL)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.json::<Value>().await.unwrap()["code"], "unauthenticated");
    assert_eq!(call(&server, &id, "rat_made_up", hello(MODEL)).await.0, 401);
    assert_eq!(call(&server, &id, &account.key, hello(MODEL)).await.0, 401);
    let wrong_header = server
        .as_agent(&id)
        .post("/llm/v1/chat/completions")
        .header("x-api-key", &token)
        .json(&hello(MODEL))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_header.status(), 401, "OpenAI-style calls present a bearer token");

    // A spent balance: 402 before any upstream call.
    let (status, body) = call(&server, &id, &token, hello(MODEL)).await;
    assert_eq!((status, body["code"].as_str()), (402, Some("insufficient_credits")), "{body}");
    // An unpriced model on the managed model: 400, named.
    let (status, body) = call(&server, &id, &token, hello("no-such-model")).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("unpriced_model")), "{body}");
    // Bad bodies: 400, clear.
    let (status, body) = call(&server, &id, &token, json!({"messages": []})).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_argument")), "{body}");
    assert!(fake.requests().is_empty(), "nothing reached the upstream: {:?}", fake.requests());

    // With credits the same token works; once the agent is destroyed it is dead.
    server.store().await.add_credits(&account.id, 1_000).await.unwrap();
    assert_eq!(call(&server, &id, &token, hello(MODEL)).await.0, 200);
    // A call between turns (a heartbeat, a background job) is a trace of its own.
    let dashboard = api_dashboard(&server);
    let mut alone = Vec::new();
    for _ in 0..100 {
        alone = crate::observe::q1(&dashboard, "spans", json!({"session_id": id})).await;
        if !alone.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(alone.len(), 1, "{alone:#?}");
    assert_eq!((&alone[0]["operation"], &alone[0]["parent_span_id"]), (&json!("chat"), &json!("")), "{alone:#?}");
    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    assert_eq!(call(&server, &id, &token, hello(MODEL)).await.0, 401, "a destroyed agent's token");
    assert_books_balance(&server, &account).await;
}

async fn concurrent_calls_across_agents_never_overdraw_past_one_call(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |_| {}).await;
    let account = server.account(100).await;
    let api = server.api(Some(&account));
    let mut agents = Vec::new();
    for _ in 0..4 {
        agents.push(agent_with_token(&api).await);
    }
    // 20 calls at once, 5 per agent, each costing 32.5 ¢ against a balance of 100 ¢.
    let calls = agents.iter().flat_map(|agent| (0..5).map(move |_| agent.clone())).map(|(id, token)| {
        let server = &server;
        async move { call(server, &id, &token, hello(MODEL)).await.0 }
    });
    let statuses = futures::future::join_all(calls).await;
    let served = statuses.iter().filter(|s| **s == 200).count();
    assert!(statuses.iter().all(|s| *s == 200 || *s == 402), "{statuses:?}");
    assert!((1..20).contains(&served), "{statuses:?}");
    let balance = assert_books_balance(&server, &account).await;
    assert!(balance > -OPENAI_CALL * (NC / 100), "overdrawn past one call: {balance} after {statuses:?}");
    assert_holds_released(&server).await;
}

async fn a_hang_up_cancels_the_upstream_and_an_agent_has_a_cap_on_calls_at_once(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |config| config.hosting.models.max_calls_per_agent = 1).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let (id, token) = agent_with_token(&api).await;
    fake.set_delay(500);

    // A streamed call: its first event arrives at once, the rest slowly.
    let mut body = hello(MODEL);
    body["stream"] = json!(true);
    let mut stream =
        server.as_agent(&id).post("/llm/v1/chat/completions").bearer_auth(&token).json(&body).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.chunk().await.unwrap().is_some_and(|c| c.starts_with(b"data: ")));
    assert_eq!(fake.open_streams(), 1);

    // The agent's one call at a time is taken: 429 with Retry-After.
    let second = server
        .as_agent(&id)
        .post("/llm/v1/chat/completions")
        .bearer_auth(&token)
        .json(&hello(MODEL))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 429);
    assert!(second.headers().contains_key("retry-after"));
    assert_eq!(second.json::<Value>().await.unwrap()["code"], "overloaded");

    // Hanging up cancels the upstream call; the call settles as cancelled, its hold released.
    drop(stream);
    let mut settled = Vec::new();
    for _ in 0..100 {
        settled = server
            .sql(&format!("SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND status = 'cancelled'"))
            .await
            .unwrap();
        if settled == [1] && fake.open_streams() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!((settled, fake.open_streams()), (vec![1], 0), "the upstream stream was dropped");
    assert_holds_released(&server).await;
    // The slot is free again.
    assert_eq!(call(&server, &id, &token, hello(MODEL)).await.0, 200);
    assert_books_balance(&server, &account).await;
}

/// An upstream that goes quiet mid-stream for longer than the upstream timeout: the agent
/// has the events sent so far, then its answer breaks off (not a clean end it could take
/// for the whole answer); the call settles as failed, saying why, and its hold is released.
async fn a_stream_that_stalls_fails_the_call_and_ends_the_answer(backend: Backend) {
    let fake = FakeModels::start().await;
    let server =
        start_gateway(backend, &fake, |config| config.hosting.models.upstream_timeout = Duration::from_secs(1)).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let (id, token) = agent_with_token(&api).await;
    fake.set_delay(5_000);

    let mut body = hello(MODEL);
    body["stream"] = json!(true);
    let mut stream = open_stream(&server, &id, &token, &body).await;
    let started = std::time::Instant::now();
    let rest = loop {
        match stream.chunk().await {
            Ok(Some(_)) => {}
            end => break end,
        }
    };
    assert!(rest.is_err(), "the answer broke off rather than ending: {rest:?}");
    assert!(started.elapsed() < Duration::from_secs(4), "it broke off at the timeout, not the upstream's next chunk");
    let failed = format!(
        "SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND status = 'failed' \
         AND error LIKE '%sent nothing for 1 s%'"
    );
    assert_eq!(eventually(&server, &failed, 1).await, 1);
    for _ in 0..100 {
        if fake.open_streams() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fake.open_streams(), 0, "the upstream call was dropped");
    assert_holds_released(&server).await;
    assert_books_balance(&server, &account).await;
}

async fn an_unreachable_upstream_fails_the_call_without_charging_or_naming_it(backend: Backend) {
    let fake = FakeModels::start().await;
    // Nothing listens on the discard port.
    let dead = "http://127.0.0.1:9/v1".to_owned();
    let server = start_gateway(backend, &fake, |config| {
        config.hosting.models.openai = Some(Upstream { base_url: dead, api_key: Some(OPENAI_KEY.into()) });
    })
    .await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let (id, token) = agent_with_token(&api).await;

    let (status, body) = call(&server, &id, &token, hello(MODEL)).await;
    assert_eq!((status, body["code"].as_str()), (503, Some("unavailable")), "{body}");
    let text = body.to_string();
    assert!(!text.contains("127.0.0.1:9") && !text.contains(OPENAI_KEY), "{text}");
    // The call is recorded just after its answer.
    let failed = format!("SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND status = 'failed'");
    assert_eq!(eventually(&server, &failed, 1).await, 1);
    assert_holds_released(&server).await;
    assert_eq!(assert_books_balance(&server, &account).await, 1_000 * NC, "nothing charged");
}

/// A runtime in a loop is stopped: past the turn's limit on model calls, or once its calls
/// have spent the turn's limit, the gateway answers 429 `turn_limit` and the turn fails
/// saying which limit it hit. The next turn starts afresh.
async fn a_turn_in_a_loop_stops_at_its_limit_on_calls_or_on_spend(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |config| {
        config.hosting.models.turn_limits = roost_server::callers::TurnLimits { max_calls: 3, ..Default::default() };
    })
    .await;
    // Enough for five calls' holds at once (each holds 16,384 output tokens at 2 cents).
    let account = server.account(1_000_000).await;
    let api = server.api(Some(&account));
    let id = agent(&api).await;

    // Five calls at once: three are the turn's, two are refused, and the turn fails (its
    // spend, 97.5 cents, is within the default limit).
    let looped = api.message(&id, "many 5").await;
    looped.err(429, "turn_limit");
    assert!(looped.body["error"].as_str().unwrap().contains("limit of 3 model calls"), "{}", looped.body);
    let calls = |status: &'static str| {
        let server = &server;
        let id = id.clone();
        async move {
            server
                .sql(&format!("SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND status = '{status}'"))
                .await
                .unwrap()
        }
    };
    assert_eq!(calls("completed").await, [3], "only the turn's three calls reached the upstream");
    assert_eq!(fake.requests().len(), 3);
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let failed = &activity["turns"][0];
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("limit of 3 model calls"), "{failed}");
    assert_eq!(failed["charged_nanocents"], 97_500_000_000_i64, "what the three calls cost is still charged: {failed}");

    // The frugal runtime's turns may spend 30 cents. A tool round is two calls in a row:
    // the first spends 32.5 cents, so the second is refused.
    let frugal = api.provision("gateway-frugal", "You are terse.").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&frugal, "running").await;
    let spent = api.message(&frugal, "openai-tool").await;
    spent.err(429, "turn_limit");
    assert!(spent.body["error"].as_str().unwrap().contains("spending limit of 30 cents"), "{}", spent.body);
    assert_eq!(fake.requests().len(), 4);

    // A turn within its limits is answered.
    assert_eq!(said(&api, &id, "openai").await, fake_models::REPLY);
    assert_books_balance(&server, &account).await;
}

/// An upstream over HTTPS (a model server with a private CA): with its CA trusted
/// (`--llm-upstream-ca-file`), calls go through, streamed and not; without, the certificate
/// is refused and the call is 503, naming neither the upstream nor its key.
async fn https_upstreams_are_verified_against_the_system_and_the_operators_roots(backend: Backend) {
    let (fake, ca) = FakeModels::start_tls().await;
    assert!(fake.openai_base_url().starts_with("https://localhost:"));
    let roots = reqwest::Certificate::from_pem_bundle(ca.as_bytes()).unwrap();
    let server = start_gateway(backend, &fake, |config| config.hosting.models.upstream_roots = roots).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = agent(&api).await;
    assert_eq!(said(&api, &id, "openai").await, fake_models::REPLY);
    let streamed: Value = serde_json::from_str(&said(&api, &id, "openai-stream").await).unwrap();
    assert_eq!(streamed["text"], fake_models::REPLY);
    assert_eq!(said(&api, &id, "anthropic").await, fake_models::REPLY);
    let received = fake.requests();
    assert_eq!(received.len(), 3);
    assert_eq!(received[0].authorization.as_deref(), Some(&*format!("Bearer {OPENAI_KEY}")));
    server.stop().await.unwrap();

    // The system's roots alone do not know the fake's certificate.
    let server = start_gateway(backend, &fake, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let (id, token) = agent_with_token(&api).await;
    let (status, body) = call(&server, &id, &token, hello(MODEL)).await;
    assert_eq!((status, body["code"].as_str()), (503, Some("unavailable")), "{body}");
    let text = body.to_string();
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    assert!(!text.contains(&fake.addr.port().to_string()) && !text.contains(OPENAI_KEY), "{text}");
    assert_eq!(fake.requests().len(), 3, "nothing reached the upstream");
}

/// An agent's guard policies count its model calls between turns too (heartbeats,
/// background jobs): a `spend_per_day` policy pauses an agent whose background calls spent
/// past its limit, and the paused agent's token no longer reaches the gateway.
async fn the_guard_counts_calls_made_between_turns(backend: Backend) {
    let fake = FakeModels::start().await;
    let server =
        start_gateway(backend, &fake, |config| config.guard_every = std::time::Duration::from_millis(100)).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let (id, token) = agent_with_token(&api).await;
    // 10 cents a day; one OpenAI call costs 32.5 here.
    let dashboard = api_dashboard(&server);
    dashboard.post("/api/guard", json!({"kind": "spend_per_day", "limit": 0.1, "instance_id": id})).await.ok();

    assert_eq!(call(&server, &id, &token, hello(MODEL)).await.0, 200);
    api.wait_status(&id, "paused").await;
    // The incident is written once the pause is done.
    let mut incidents = Value::Null;
    for _ in 0..100 {
        incidents = dashboard.get("/api/guard").await.ok()["incidents"].clone();
        if incidents[0]["detail"].is_string() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(incidents[0]["detail"].as_str().unwrap_or_default().contains("over the limit"), "{incidents}");
    assert_eq!(call(&server, &id, &token, hello(MODEL)).await.0, 401, "a paused agent's token is dead");
}

/// What the counting query `sql` answers once it answers `expected`, or after 5 s.
async fn eventually(server: &TestServer, sql: &str, expected: i64) -> i64 {
    let mut count = -1;
    for _ in 0..100 {
        count = server.sql(sql).await.unwrap()[0];
        if count == expected {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    count
}

/// Opens a streamed chat completion with `token` and reads its first chunk: the call is then
/// in flight (the fake sends the rest slowly), holding its estimate, until it is dropped.
async fn open_stream(server: &TestServer, id: &str, token: &str, body: &Value) -> reqwest::Response {
    let mut stream =
        server.as_agent(id).post("/llm/v1/chat/completions").bearer_auth(token).json(body).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.chunk().await.unwrap().is_some_and(|c| c.starts_with(b"data: ")));
    stream
}

/// A call's hold counts the output of every choice it asks for (`n`), not one: with little
/// credit, two calls at once fit with one choice each, while with eight the first holds
/// more than the account has and the second is refused with 402 before anything reaches
/// the upstream. What a call is charged is still the usage the upstream reports, in full
/// even when that is more than its hold; a count the API does not take is 400.
async fn a_calls_hold_counts_every_choice_it_asks_for(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_gateway(backend, &fake, |_| {}).await;
    let account = server.account(5_000).await;
    let api = server.api(Some(&account));
    let (id, token) = agent_with_token(&api).await;
    fake.set_delay(500);
    // Each choice may be 1,000 output tokens at 2 cents: 20 dollars a choice, against a
    // balance of 50 dollars (the prompt's bytes add under 2 dollars).
    let ask = |n: i64, stream: bool| {
        json!({"model": MODEL, "max_tokens": 1000, "n": n, "stream": stream,
            "messages": [{"role": "user", "content": "hello"}]})
    };
    let cancelled = format!("SELECT COUNT(*) FROM model_calls WHERE instance_id = '{id}' AND status = 'cancelled'");

    // One choice each: a call in flight holds about 21 dollars, and a second call fits.
    let first = open_stream(&server, &id, &token, &ask(1, true)).await;
    let (status, body) = call(&server, &id, &token, ask(1, false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"].as_array().unwrap().len(), 1, "{body}");
    drop(first);
    assert_eq!(eventually(&server, &cancelled, 1).await, 1);

    // Eight choices each: the call in flight holds about 161 dollars, more than the account
    // has, so the same second call is refused before the upstream.
    let sent = fake.requests().len();
    let first = open_stream(&server, &id, &token, &ask(8, true)).await;
    assert_eq!(fake.requests().len(), sent + 1);
    assert_eq!(fake.requests()[sent].body["n"], 8, "the request goes upstream as sent");
    let (status, body) = call(&server, &id, &token, ask(8, false)).await;
    assert_eq!((status, body["code"].as_str()), (402, Some("insufficient_credits")), "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("held for calls in flight")), "{body}");
    assert_eq!(fake.requests().len(), sent + 1, "the refused call reached nothing upstream");
    drop(first);
    assert_eq!(eventually(&server, &cancelled, 2).await, 2);

    // The charge is the usage reported, prompt once and every choice's output, even past
    // the hold: an upstream that overshoots `max_tokens` 1 (the fake answers 7 tokens a
    // choice) is charged for all 140 output tokens, 280 cents, against a hold of the
    // prompt's bytes and 40 cents.
    let overshoot = json!({"model": MODEL, "max_tokens": 1, "n": 20,
        "messages": [{"role": "user", "content": "hello"}]});
    // Its hold: each body byte at the cache-write price (1.25 cents), 20 × 1 token at 2 cents.
    let hold = (serde_json::to_vec(&overshoot).unwrap().len() * 125 + 20 * 200).div_ceil(100);
    let (status, body) = call(&server, &id, &token, overshoot).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"].as_array().unwrap().len(), 20);
    // (-1 until the call is written, just after its answer.)
    let answered = |column: &str| {
        format!(
            "SELECT COALESCE(MAX({column}), -1) FROM model_calls WHERE instance_id = '{id}' AND status = 'completed' \
             AND output_tokens = {}",
            20 * fake_models::OPENAI_COMPLETION_TOKENS
        )
    };
    // 16 uncached and 5 cached prompt tokens, 140 output tokens: 298.5 cents, exactly.
    let cost_hundredths = 16 * 100 + 5 * 50 + 140 * 200;
    let cost = cost_hundredths * (NC / 100);
    assert_eq!(eventually(&server, &answered("charged_nanocents"), cost).await, cost);
    assert!(i64::try_from(hold).unwrap() * 100 < cost_hundredths, "the call cost more than its hold of {hold} cents");
    let input = server.sql(&answered("input_tokens")).await.unwrap();
    assert_eq!(input, [fake_models::OPENAI_PROMPT_TOKENS], "the prompt is counted once");
    let balance = assert_books_balance(&server, &account).await;
    assert_eq!(balance, 5_000 * NC - (OPENAI_CALL + cost_hundredths) * (NC / 100), "every call charged as reported");

    // Counts the API does not take: 400 `invalid_argument`, saying so, and nothing upstream.
    let sent = fake.requests().len();
    for (field, value) in [
        ("n", json!(0)),
        ("n", json!(-1)),
        ("n", json!(129)),
        ("n", json!(1.5)),
        ("n", json!("8")),
        ("best_of", json!(0)),
        ("max_tokens", json!(-1)),
        ("max_completion_tokens", json!(0)),
    ] {
        let mut bad = hello(MODEL);
        bad[field] = value.clone();
        let (status, body) = call(&server, &id, &token, bad).await;
        assert_eq!((status, body["code"].as_str()), (400, Some("invalid_argument")), "{field} {value}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.starts_with(&format!("`{field}` must be a whole number")), "{error}");
    }
    let anthropic = server
        .as_agent(&id)
        .post("/llm/anthropic/v1/messages")
        .header("x-api-key", &token)
        .json(&json!({"model": MODEL, "max_tokens": -1, "messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(anthropic.status(), 400);
    assert_eq!(anthropic.json::<Value>().await.unwrap()["code"], "invalid_argument");
    assert_eq!(fake.requests().len(), sent, "no refused call reached the upstream");
    assert_holds_released(&server).await;
}
