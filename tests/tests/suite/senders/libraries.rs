//! The GenAI instrumentation libraries, each run for real against the fake OpenAI server:
//! the official OpenTelemetry openai-v2, OpenLLMetry, OpenInference (Python) and the
//! Vercel AI SDK (Node). Each driver makes the same three model calls (a plain chat, a
//! call answered with a tool call, the call carrying the tool's result); what each library
//! turns them into is in tests/senders/CAPTURED.md.

use roost_tests::{
    Backend, TestServer, each_backend,
    fake_openai::{CACHED_TOKENS, COMPLETION_TOKENS, FakeOpenAi, MODEL, PROMPT_TOKENS, REPLY, REPLY_AFTER_TOOL},
};
use serde_json::{Value, json};

use super::{Row, Runtime, assert_usd, cost, int, priced, q1, run_driver, usage_model};

each_backend!(openai_v2, openllmetry, openinference, vercel_ai, readme_session_pattern);

// The conversation every driver has (tests/senders/python/_common.py, node/vercel_ai.mjs).
const SYSTEM_PROMPT: &str = "You are a terse assistant.";
const USER_PROMPT: &str = "What is the capital of France?";
const TOOL_PROMPT: &str = "What is the weather in Paris?";
const TOOL: &str = "get_weather";
const REQUEST_MODEL: &str = "gpt-4o-mini";
/// gpt-4o-mini in roost's price book: input, cache read, output, USD per million tokens.
const GPT_4O_MINI: (f64, f64, f64) = (0.15, 0.075, 0.6);
/// Model calls each driver makes.
const CALLS: i64 = 3;

/// What a library is expected to deliver, beyond what every library must.
struct Library {
    runtime: Runtime,
    script: &'static str,
    /// Its resource's service.name.
    service: &'static str,
    /// The session its spans carry, if it sends one.
    session: Option<&'static str>,
    /// Whether it reports the cached prompt tokens.
    reports_cached_tokens: bool,
    /// Whether it names the request model in a standard attribute.
    reports_request_model: bool,
    /// The `operation` of its model-call spans, where the library names one.
    operation: Option<&'static str>,
    /// Whether it has a span for running a tool (its `tool_name` then is the tool's).
    tool_span: bool,
    /// The log records it sends: each event name and how many.
    log_events: &'static [(&'static str, usize)],
}

async fn openai_v2(backend: Backend) {
    run(
        backend,
        &Library {
            runtime: Runtime::Python,
            script: "openai_v2.py",
            service: "senders-openai-v2",
            session: None,
            reports_cached_tokens: false,
            reports_request_model: true,
            operation: Some("chat"),
            tool_span: false,
            // Its content comes as log events on the chat spans (LogRecord.event_name, no
            // event.name attribute): one per message sent (system 1, user 3, the
            // assistant's tool call 1, the tool's result 1), one per choice received.
            log_events: &[
                ("gen_ai.system.message", 1),
                ("gen_ai.user.message", 3),
                ("gen_ai.assistant.message", 1),
                ("gen_ai.tool.message", 1),
                ("gen_ai.choice", 3),
            ],
        },
    )
    .await;
}

async fn openllmetry(backend: Backend) {
    run(
        backend,
        &Library {
            runtime: Runtime::Python,
            script: "openllmetry.py",
            service: "senders-openllmetry",
            session: None,
            reports_cached_tokens: true,
            reports_request_model: true,
            operation: Some("chat"),
            tool_span: false,
            log_events: &[],
        },
    )
    .await;
}

async fn openinference(backend: Backend) {
    run(
        backend,
        &Library {
            runtime: Runtime::Python,
            script: "open_inference.py",
            service: "senders-openinference",
            session: Some("sess-openinference"),
            reports_cached_tokens: true,
            // Only inside llm.invocation_parameters (a JSON string).
            reports_request_model: false,
            // openinference.span.kind = LLM, no operation name.
            operation: None,
            tool_span: false,
            log_events: &[],
        },
    )
    .await;
}

async fn vercel_ai(backend: Backend) {
    run(
        backend,
        &Library {
            runtime: Runtime::Node,
            script: "vercel_ai.mjs",
            service: "senders-vercel-ai",
            // Only as the driver's own metadata (ai.telemetry.metadata.sessionId), not a
            // standard key: not asserted.
            session: None,
            reports_cached_tokens: true,
            reports_request_model: true,
            operation: None,
            tool_span: true,
            log_events: &[],
        },
    )
    .await;
}

/// The README's way to send sessions with the official instrumentation: a `turn` span
/// naming the session around the calls, the calls' spans and log events exported first
/// (tests/senders/python/openai_v2_session.py). The session holds the calls: their tokens,
/// cost and messages, on q/1 and on the pages.
async fn readme_session_pattern(backend: Backend) {
    const SESSION: &str = "readme-conversation-1";
    let server = TestServer::start(backend).await;
    let openai = FakeOpenAi::start().await;
    run_driver(Runtime::Python, "openai_v2_session.py", &openai, &server).await;
    let api = server.api(None);
    let sessions = q1(&api, "sessions", json!({"session_id": SESSION})).await;
    let [session] = &sessions[..] else { panic!("one session: {sessions:#?}") };
    assert_eq!(int(session, "spans"), CALLS + 1, "the calls and the turn: {session:#?}");
    assert_eq!(
        (int(session, "input_tokens"), int(session, "output_tokens")),
        (CALLS * PROMPT_TOKENS, CALLS * COMPLETION_TOKENS),
        "{session:#?}"
    );
    assert_usd(cost(session), CALLS as f64 * priced(PROMPT_TOKENS, 0, COMPLETION_TOKENS, GPT_4O_MINI), session);
    assert_eq!(int(session, "logs"), 9, "the calls' log events: {session:#?}");
    assert!(q1(&api, "traces", json!({"sessionless": true})).await.is_empty(), "no call outside the session");
    let said = messages(&q1(&api, "transcript", json!({"session_id": SESSION})).await);
    assert_message(&said, "user", USER_PROMPT);
    assert_message(&said, "assistant", REPLY);
    assert_message(&said, "assistant", REPLY_AFTER_TOOL);

    let mut visitor = roost_tests::pages::Visitor::new(&server);
    let list = visitor.get("/dashboard/sessions").await;
    let cells = list.texts("table.sessions tbody tr:first-child td");
    assert_eq!(cells[0], SESSION, "{cells:?}");
    assert!(cells[12].starts_with('$') && cells[12] != "$0", "priced: {cells:?}");
    let page = visitor.get(&format!("/dashboard/sessions/{SESSION}")).await;
    let text = page.main_text();
    assert!(text.contains(USER_PROMPT) && text.contains(REPLY_AFTER_TOOL), "{text}");
}

/// Runs `library`'s driver and checks what it delivers (the transcript last: it needs the
/// most of roost).
async fn run(backend: Backend, library: &Library) {
    let server = TestServer::start(backend).await;
    let openai = FakeOpenAi::start().await;
    run_driver(library.runtime, library.script, &openai, &server).await;
    let api = server.api(None);

    // The library really called the model, three times.
    let requests = openai.requests();
    assert_eq!(requests.len(), CALLS as usize, "{requests:?}");
    assert!(requests.iter().all(|r| r["model"] == REQUEST_MODEL), "{requests:?}");
    assert_eq!(requests[0]["messages"][1]["content"], USER_PROMPT, "{requests:?}");

    // q/1 spans: one model-call span per call, with the model, tokens and cost.
    let spans = q1(&api, "spans", json!({"service": library.service})).await;
    let mut calls: Vec<&Row> = spans.iter().filter(|s| s["response_model"] == MODEL).collect();
    calls.sort_by_key(|s| start_ns(s));
    assert_eq!(calls.len(), CALLS as usize, "one span per model call: {spans:#?}");
    let expected_cost = priced(
        PROMPT_TOKENS,
        if library.reports_cached_tokens { CACHED_TOKENS } else { 0 },
        COMPLETION_TOKENS,
        GPT_4O_MINI,
    );
    for span in &calls {
        assert_eq!(span["model"], MODEL, "model is the response model: {span:#?}");
        assert_eq!(
            (int(span, "input_tokens"), int(span, "output_tokens")),
            (PROMPT_TOKENS, COMPLETION_TOKENS),
            "{span:#?}"
        );
        if library.reports_cached_tokens {
            assert_eq!(int(span, "cache_read_tokens"), CACHED_TOKENS, "{span:#?}");
        }
        assert_usd(cost(span), expected_cost, span);
        if library.reports_request_model {
            assert_eq!(span["request_model"], REQUEST_MODEL, "{span:#?}");
        }
        if let Some(operation) = library.operation {
            assert_eq!(span["operation"], operation, "{span:#?}");
        }
        if let Some(session) = library.session {
            assert_eq!(span["session_id"], session, "{span:#?}");
        }
    }
    // No other span counts the same tokens again (the Vercel AI SDK's ai.generateText
    // carries its steps' sum in ai.usage.*).
    let span_tokens: i64 = spans.iter().map(|s| int(s, "input_tokens")).sum();
    assert_eq!(span_tokens, CALLS * PROMPT_TOKENS, "tokens counted once: {spans:#?}");
    if library.tool_span {
        let tools: Vec<&Row> = spans.iter().filter(|s| s["tool_name"] == TOOL).collect();
        assert_eq!(tools.len(), 1, "one span ran the tool: {spans:#?}");
    }

    // /api/usage: the calls once each, priced (the libraries' token metrics add nothing).
    let usage = usage_model(&api, REQUEST_MODEL).await.unwrap_or_else(|| panic!("no gpt-4o-mini usage"));
    assert_eq!(
        (usage["calls"].as_i64(), usage["input_tokens"].as_i64(), usage["output_tokens"].as_i64()),
        (Some(CALLS), Some(CALLS * PROMPT_TOKENS), Some(CALLS * COMPLETION_TOKENS)),
        "{usage}"
    );
    if library.reports_cached_tokens {
        assert_eq!(usage["cache_read_tokens"].as_i64(), Some(CALLS * CACHED_TOKENS), "{usage}");
    }
    assert_usd(usage["cost_usd"].as_f64().unwrap(), CALLS as f64 * expected_cost, &usage);

    // q/1 logs: the library's log records, named.
    let logs = q1(&api, "logs", json!({"service": library.service})).await;
    let names: Vec<&str> = logs.iter().map(|l| l["event_name"].as_str().unwrap_or("")).collect();
    assert_eq!(names.len(), library.log_events.iter().map(|e| e.1).sum::<usize>(), "{logs:#?}");
    for (name, count) in library.log_events {
        assert_eq!(names.iter().filter(|n| *n == name).count(), *count, "{name}: {logs:#?}");
    }
    assert!(logs.iter().all(|l| l["trace_id"].as_str().is_some_and(|t| t.len() == 32)), "{logs:#?}");

    // q/1 transcript: the conversation, by session where the library sends one, else by
    // the calls' traces.
    let transcript_of = |span: &Row| match library.session {
        Some(session) => json!({"session_id": session}),
        None => json!({"trace_id": span["trace_id"]}),
    };
    let plain = messages(&q1(&api, "transcript", transcript_of(calls[0])).await);
    assert_message(&plain, "system", SYSTEM_PROMPT);
    assert_message(&plain, "user", USER_PROMPT);
    assert_message(&plain, "assistant", REPLY);
    let mut tool_round = Vec::new();
    for call in &calls[1..] {
        tool_round.extend(messages(&q1(&api, "transcript", transcript_of(call)).await));
    }
    assert_message(&tool_round, "user", TOOL_PROMPT);
    assert!(
        tool_round.iter().any(|m| m["role"] == "assistant" && asks_for_weather(&m["tool_calls"])),
        "the assistant's tool call, with its arguments: {tool_round:#?}"
    );
    assert!(
        tool_round.iter().any(|m| m["role"] == "tool" && m["text"].as_str().is_some_and(|t| t.contains("sunny"))),
        "the tool's result: {tool_round:#?}"
    );
    assert_message(&tool_round, "assistant", REPLY_AFTER_TOOL);
}

fn start_ns(span: &Row) -> i64 {
    let at: prost_types::Timestamp = span["start_time"].as_str().unwrap().parse().unwrap();
    at.seconds * 1_000_000_000 + i64::from(at.nanos)
}

/// A transcript's message rows.
fn messages(rows: &[Row]) -> Vec<Row> {
    rows.iter().filter(|r| r["kind"] == "message").cloned().collect()
}

#[track_caller]
fn assert_message(messages: &[Row], role: &str, text: &str) {
    assert!(
        messages.iter().any(|m| m["role"] == role && m["text"] == text),
        "no {role} message {text:?} in {messages:#?}"
    );
}

/// True when `tool_calls` (`[{name, arguments}]`) calls get_weather for Paris; the
/// arguments may be the JSON text OpenAI sends or that text parsed.
fn asks_for_weather(tool_calls: &Value) -> bool {
    tool_calls.as_array().is_some_and(|calls| {
        calls.iter().any(|call| {
            let arguments = match &call["arguments"] {
                Value::String(text) => serde_json::from_str(text).unwrap_or(Value::Null),
                other => other.clone(),
            };
            call["name"] == TOOL && arguments == json!({"city": "Paris"})
        })
    })
}
