//! Coding agents, which cannot run here: their documented OTLP/JSON (tests/senders/fixtures,
//! sources in tests/senders/README.md) posted as their exporters post it. Claude Code sends
//! events as log records (and metrics); Codex CLI sends log records only. Both carry numbers
//! as strings where their exporters do.

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::json;

use super::{Row, assert_usd, cost, fixture, int, post_json, priced, q1, usage_model};

each_backend!(
    claude_code,
    claude_code_metrics_before_its_events_count_once,
    codex_cli,
    a_metrics_only_service_has_its_token_histogram_counted_once,
    a_senders_own_cost_wins_over_the_price_book
);

const CLAUDE_SESSION: &str = "4f3c2b1a-9d8e-4c7b-a6f5-0e1d2c3b4a59";
const CLAUDE_MODEL: &str = "claude-sonnet-4-5-20250929";
const CLAUDE_PROMPT: &str = "Add a unit test for the config parser";
/// The fixture's two claude_code.api_request events: input, output, cache read and cache
/// creation tokens, and Claude Code's own cost_usd. Claude Code's input_tokens leaves the
/// cache's out; roost's counts every prompt token (the GenAI convention), so it is the sum
/// of the three, with the cache's shares in cache_read_tokens / cache_write_tokens.
const CLAUDE_REQUESTS: [(i64, i64, i64, i64, f64); 2] = [(1200, 350, 9000, 400, 0.0421), (300, 210, 10200, 0, 0.0215)];

/// roost's input_tokens for a Claude Code request (see [`CLAUDE_REQUESTS`]).
fn claude_prompt_tokens((input, _, cache_read, cache_creation, _): (i64, i64, i64, i64, f64)) -> i64 {
    input + cache_read + cache_creation
}

/// Claude Code names an event twice: the body is `claude_code.<name>`, the `event.name`
/// attribute is `<name>` (monitoring-usage docs). roost's `event_name` may be either.
fn is_claude_event(row: &Row, name: &str) -> bool {
    let event_name = row["event_name"].as_str().unwrap_or("");
    event_name == name || event_name == format!("claude_code.{name}")
}

async fn claude_code(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    post_json(&server, "/v1/logs", &fixture("claude_code_logs.json")).await;

    // q/1 logs: every event of the session named; each api_request with the model, its
    // tokens and Claude Code's own cost (which wins over the price book's).
    let logs = q1(&api, "logs", json!({"session_id": CLAUDE_SESSION})).await;
    assert_eq!(logs.len(), 5, "{logs:#?}");
    assert!(logs.iter().all(|l| l["service"] == "claude-code"), "{logs:#?}");
    for name in ["user_prompt", "tool_result", "api_error"] {
        assert_eq!(logs.iter().filter(|l| is_claude_event(l, name)).count(), 1, "{name}: {logs:#?}");
    }
    let mut requests: Vec<&Row> = logs.iter().filter(|l| is_claude_event(l, "api_request")).collect();
    requests.sort_by_key(|l| l["time"].as_str().unwrap().to_owned());
    assert_eq!(requests.len(), 2, "{logs:#?}");
    for (row, request) in requests.iter().zip(CLAUDE_REQUESTS) {
        let (_, output, cache_read, cache_creation, sender_cost) = request;
        assert_eq!(row["model"], CLAUDE_MODEL, "{row:#?}");
        assert_eq!(
            (int(row, "input_tokens"), int(row, "output_tokens")),
            (claude_prompt_tokens(request), output),
            "{row:#?}"
        );
        assert_eq!(
            (int(row, "cache_read_tokens"), int(row, "cache_write_tokens")),
            (cache_read, cache_creation),
            "{row:#?}"
        );
        assert_usd(cost(row), sender_cost, row);
    }
    let error = logs.iter().find(|l| is_claude_event(l, "api_error")).unwrap();
    assert_eq!(error["model"], CLAUDE_MODEL, "{error:#?}");
    assert_eq!((int(error, "input_tokens"), cost(error)), (0, 0.0), "a failed request used nothing: {error:#?}");

    // q/1 sessions and /api/usage: the session's tokens and Claude Code's cost.
    let input: i64 = CLAUDE_REQUESTS.into_iter().map(claude_prompt_tokens).sum();
    let output: i64 = CLAUDE_REQUESTS.iter().map(|r| r.1).sum();
    let (cache_read, cache_creation): (i64, i64) = CLAUDE_REQUESTS.iter().fold((0, 0), |(r, w), q| (r + q.2, w + q.3));
    let total_cost: f64 = CLAUDE_REQUESTS.iter().map(|r| r.4).sum();
    let check_totals = |when: &'static str| {
        let api = api.clone();
        async move {
            let sessions = q1(&api, "sessions", json!({})).await;
            let session = sessions.iter().find(|s| s["session_id"] == CLAUDE_SESSION);
            let session = session.unwrap_or_else(|| panic!("{when}: no session {CLAUDE_SESSION}: {sessions:#?}"));
            assert_eq!(
                (int(session, "input_tokens"), int(session, "output_tokens")),
                (input, output),
                "{when}: {session:#?}"
            );
            assert_usd(cost(session), total_cost, &(when, session));
            assert_eq!(session["last_model"], CLAUDE_MODEL, "{when}: {session:#?}");
            let usage = usage_model(&api, "claude-sonnet-4-5").await.unwrap_or_else(|| panic!("{when}: no usage"));
            assert_eq!(
                (usage["calls"].as_i64(), usage["input_tokens"].as_i64(), usage["output_tokens"].as_i64()),
                (Some(2), Some(input), Some(output)),
                "{when}: {usage}"
            );
            assert_eq!(
                (usage["cache_read_tokens"].as_i64(), usage["cache_write_tokens"].as_i64()),
                (Some(cache_read), Some(cache_creation)),
                "{when}: {usage}"
            );
            assert_usd(usage["cost_usd"].as_f64().unwrap(), total_cost, &(when, usage));
        }
    };
    check_totals("after the events").await;

    // The same usage as metrics (claude_code.token.usage, claude_code.cost.usage) is stored
    // as metrics, and counted no second time.
    post_json(&server, "/v1/metrics", &fixture("claude_code_metrics.json")).await;
    let tokens = q1(&api, "metrics", json!({"name": "claude_code.token.usage"})).await;
    assert_eq!(tokens.len(), 4, "{tokens:#?}");
    let input_point = tokens.iter().find(|m| m["attributes"]["type"] == "input").unwrap();
    let sender_input: i64 = CLAUDE_REQUESTS.iter().map(|r| r.0).sum();
    assert_eq!(input_point["value"].as_f64(), Some(sender_input as f64), "as sent: {input_point:#?}");
    assert_eq!(q1(&api, "metrics", json!({"name": "claude_code.cost.usage"})).await.len(), 1);
    check_totals("after the metrics").await;

    // Beyond the brief's contract: the prompt (sent with OTEL_LOG_USER_PROMPTS=1) is the
    // session's user message.
    let transcript = q1(&api, "transcript", json!({"session_id": CLAUDE_SESSION})).await;
    assert!(
        transcript.iter().any(|r| r["kind"] == "message" && r["role"] == "user" && r["text"] == CLAUDE_PROMPT),
        "{transcript:#?}"
    );
}

/// Claude Code's metrics arriving before the events of the same requests: counted while
/// the service has reported no calls, then the calls replace them (never both).
async fn claude_code_metrics_before_its_events_count_once(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let input: i64 = CLAUDE_REQUESTS.into_iter().map(claude_prompt_tokens).sum();
    let output: i64 = CLAUDE_REQUESTS.iter().map(|r| r.1).sum();
    let total_cost: f64 = CLAUDE_REQUESTS.iter().map(|r| r.4).sum();
    let check = |when: &'static str, calls: i64| {
        let api = api.clone();
        async move {
            let usage = usage_model(&api, "claude-sonnet-4-5").await.unwrap_or_else(|| panic!("{when}: no usage"));
            assert_eq!(
                (usage["calls"].as_i64(), usage["input_tokens"].as_i64(), usage["output_tokens"].as_i64()),
                (Some(calls), Some(input), Some(output)),
                "{when}: {usage}"
            );
            assert_usd(usage["cost_usd"].as_f64().unwrap(), total_cost, &(when, usage));
        }
    };
    post_json(&server, "/v1/metrics", &fixture("claude_code_metrics.json")).await;
    check("metrics alone", 0).await;
    post_json(&server, "/v1/logs", &fixture("claude_code_logs.json")).await;
    check("then the events", 2).await;
}

const CODEX_CONVERSATION: &str = "019a9776-0a34-7842-8627-112b63d66e90";
const CODEX_MODEL: &str = "gpt-5-codex";
const CODEX_PROMPT: &str = "Fix the failing test in lib.rs";
/// The fixture's two codex.sse_event response.completed: input (cached included, as OpenAI
/// counts), cached, output tokens.
const CODEX_RESPONSES: [(i64, i64, i64); 2] = [(2400, 1800, 310), (2900, 2304, 120)];
/// gpt-5-codex in roost's price book: input, cache read, output, USD per million tokens.
const GPT_5_CODEX: (f64, f64, f64) = (1.25, 0.125, 10.0);

async fn codex_cli(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    post_json(&server, "/v1/logs", &fixture("codex_logs.json")).await;

    // q/1 logs: conversation.id is the session; each response.completed carries the
    // model (from the event's common metadata), the tokens, and the price book's cost
    // (Codex sends none).
    let logs = q1(&api, "logs", json!({"session_id": CODEX_CONVERSATION})).await;
    assert_eq!(logs.len(), 9, "{logs:#?}");
    assert!(logs.iter().all(|l| l["service"] == "codex_cli_rs" && l["model"] == CODEX_MODEL), "{logs:#?}");
    let mut completed: Vec<&Row> =
        logs.iter().filter(|l| l["event_name"] == "codex.sse_event" && int(l, "output_tokens") > 0).collect();
    completed.sort_by_key(|l| l["time"].as_str().unwrap().to_owned());
    assert_eq!(completed.len(), 2, "{logs:#?}");
    let mut total_cost = 0.0;
    for (row, (input, cached, output)) in completed.iter().zip(CODEX_RESPONSES) {
        assert_eq!(
            (int(row, "input_tokens"), int(row, "output_tokens"), int(row, "cache_read_tokens")),
            (input, output, cached),
            "{row:#?}"
        );
        let expected = priced(input, cached, output, GPT_5_CODEX);
        assert_usd(cost(row), expected, row);
        total_cost += expected;
    }
    for name in ["codex.conversation_starts", "codex.user_prompt", "codex.tool_decision", "codex.tool_result"] {
        assert_eq!(logs.iter().filter(|l| l["event_name"] == name).count(), 1, "{name}: {logs:#?}");
    }
    let token_rows = logs.iter().filter(|l| int(l, "input_tokens") > 0).count();
    assert_eq!(token_rows, 2, "only response.completed carries tokens: {logs:#?}");

    // q/1 sessions and /api/usage.
    let (input, output): (i64, i64) = CODEX_RESPONSES.iter().fold((0, 0), |(i, o), r| (i + r.0, o + r.2));
    let sessions = q1(&api, "sessions", json!({})).await;
    let session = sessions.iter().find(|s| s["session_id"] == CODEX_CONVERSATION);
    let session = session.unwrap_or_else(|| panic!("no session {CODEX_CONVERSATION}: {sessions:#?}"));
    assert_eq!((int(session, "input_tokens"), int(session, "output_tokens")), (input, output), "{session:#?}");
    assert_usd(cost(session), total_cost, session);
    assert_eq!(session["last_model"], CODEX_MODEL, "{session:#?}");
    let usage = usage_model(&api, CODEX_MODEL).await.expect("gpt-5-codex usage");
    assert_eq!(
        (usage["calls"].as_i64(), usage["input_tokens"].as_i64(), usage["output_tokens"].as_i64()),
        (Some(2), Some(input), Some(output)),
        "{usage}"
    );
    let cached: i64 = CODEX_RESPONSES.iter().map(|r| r.1).sum();
    assert_eq!(usage["cache_read_tokens"].as_i64(), Some(cached), "{usage}");
    assert_usd(usage["cost_usd"].as_f64().unwrap(), total_cost, &usage);

    // Beyond the brief's contract: the prompt (log_user_prompt = true) is the session's
    // user message.
    let transcript = q1(&api, "transcript", json!({"session_id": CODEX_CONVERSATION})).await;
    assert!(
        transcript.iter().any(|r| r["kind"] == "message" && r["role"] == "user" && r["text"] == CODEX_PROMPT),
        "{transcript:#?}"
    );
}

/// The GenAI semantic conventions' token histogram from a service that sends no spans: its
/// usage counts (priced by the price book), a resend of the same cumulative points adds
/// nothing, and once the service reports calls as spans only the calls count.
async fn a_metrics_only_service_has_its_token_histogram_counted_once(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let histogram = fixture("gen_ai_client_token_usage.json");
    post_json(&server, "/v1/metrics", &histogram).await;

    let points = q1(&api, "metrics", json!({"name": "gen_ai.client.token.usage"})).await;
    assert_eq!(points.len(), 2, "{points:#?}");
    for (token_type, sum) in [("input", 63.0), ("output", 21.0)] {
        let point = points.iter().find(|p| p["attributes"]["gen_ai.token.type"] == token_type).unwrap();
        assert_eq!(
            (point["kind"].as_str(), point["count"].as_i64(), point["value"].as_f64()),
            (Some("histogram"), Some(3), Some(sum)),
            "{point:#?}"
        );
        assert_eq!(point["service"], "genai-metrics-only");
    }
    // gpt-4o-mini: $0.15 input, $0.60 output per million tokens.
    let expected = priced(63, 0, 21, (0.15, 0.075, 0.6));
    let check = |when: &'static str| {
        let api = api.clone();
        async move {
            let usage = usage_model(&api, "gpt-4o-mini").await.unwrap_or_else(|| panic!("{when}: no usage"));
            assert_eq!(
                (usage["calls"].as_i64(), usage["input_tokens"].as_i64(), usage["output_tokens"].as_i64()),
                (Some(0), Some(63), Some(21)),
                "{when}: metrics count tokens, not calls: {usage}"
            );
            assert_usd(usage["cost_usd"].as_f64().unwrap(), expected, &(when, usage));
        }
    };
    check("alone").await;
    post_json(&server, "/v1/metrics", &histogram).await;
    check("after the same cumulative points again").await;

    // The service now reports a call as a span: from then on its calls are its usage.
    let span = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "genai-metrics-only"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "chat",
            "startTimeUnixNano": "1790000000000000000", "endTimeUnixNano": "1790000001000000000",
            "attributes": [
                {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "21"}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "7"}}
            ]
        }]}]
    }]});
    post_json(&server, "/v1/traces", &span).await;
    let usage = api.get("/api/usage?days=3650").await.ok();
    let models = usage["models"].as_array().unwrap();
    let tokens: i64 = models.iter().map(|m| m["input_tokens"].as_i64().unwrap()).sum();
    assert_eq!(tokens, 21, "the span's call only: {usage}");
}

/// A span whose sender computed its cost (`gen_ai.usage.cost_usd`): that cost is kept, not
/// the price book's for its model; a span of a model the price book does not know keeps
/// its tokens with no cost, and `/api/status` lists the model as unpriced.
async fn a_senders_own_cost_wins_over_the_price_book(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let span = |span_id: &str, model: &str, cost: Option<f64>| {
        let mut attributes = vec![
            json!({"key": "gen_ai.request.model", "value": {"stringValue": model}}),
            json!({"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1000"}}),
            json!({"key": "gen_ai.usage.output_tokens", "value": {"intValue": "500"}}),
        ];
        if let Some(cost) = cost {
            attributes.push(json!({"key": "gen_ai.usage.cost_usd", "value": {"doubleValue": cost}}));
        }
        json!({"traceId": "5b8efff798038103d269b633813fc60d", "spanId": span_id, "name": "chat",
               "startTimeUnixNano": now.to_string(), "endTimeUnixNano": (now + 1_000_000).to_string(),
               "attributes": attributes})
    };
    let request = json!({"resourceSpans": [{"scopeSpans": [{"spans": [
        span("eee19b7ec3c1b101", "gpt-4o", Some(0.5)),
        span("eee19b7ec3c1b102", "house-model-7", None),
    ]}]}]});
    post_json(&server, "/v1/traces", &request).await;
    let spans = q1(&api, "spans", json!({})).await;
    let priced_span = spans.iter().find(|s| s["model"] == "gpt-4o").unwrap();
    assert_usd(cost(priced_span), 0.5, priced_span);
    let unpriced = spans.iter().find(|s| s["model"] == "house-model-7").unwrap();
    assert_eq!((int(unpriced, "input_tokens"), &unpriced["cost_usd"]), (1000, &json!(null)), "{unpriced:#?}");
    let status = api.get("/api/status").await.ok();
    assert_eq!(status["unpriced_models"], json!([{"model": "house-model-7", "calls": 1}]), "{status}");
}
