//! A conversation stored once (`telemetry::message_texts`): every model call re-sends
//! the conversation so far, as chat SDKs and their instrumentation do, and the store keeps
//! each distinct message once, shows the conversation whole past the attribute size
//! limit, gives each call's whole input on its span, and finds a word said once once.

use roost_server::telemetry::retention::{RetentionConfig, sweep};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::{post_otlp, q1};

each_backend!(
    a_long_conversation_is_stored_once_and_shown_whole,
    retention_deletes_texts_nothing_recent_refers_to,
    messages_stored_before_keep_their_texts_and_search_hits
);

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn string(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

/// Turns in the conversation: past the 64 KiB attribute limit from about turn 20.
const TURNS: usize = 50;

/// What the user says at turn `n`: about 1.6 KB, different every turn; turn 7 names a
/// word said nowhere else.
fn question(n: usize) -> String {
    let word = if n == 7 { " xylophone" } else { "" };
    format!("question {n}{word}: ") + &format!("tell me more about item {n} and its neighbours. ").repeat(35)
}

fn answer(n: usize) -> String {
    format!("answer {n}: ") + &format!("item {n} is a fine item, in short. ").repeat(20)
}

/// The system prompt every call sends first (3 KB).
fn system() -> String {
    "You are a careful assistant. Answer in full sentences. ".repeat(55)
}

/// Model call `n`: the whole conversation so far as its input, its answer as output.
fn call(session: &str, n: usize, at: u64) -> Value {
    let part = |role: &str, text: &str| json!({"role": role, "parts": [{"type": "text", "content": text}]});
    let mut input = vec![part("system", &system())];
    for earlier in 0..n {
        input.push(part("user", &question(earlier)));
        input.push(part("assistant", &answer(earlier)));
    }
    input.push(part("user", &question(n)));
    let start = at + n as u64 * 1_000_000_000;
    json!({
        "traceId": trace_id(session, n), "spanId": format!("{:016x}", 0xa000 + n), "name": "chat gpt-4o-mini",
        "kind": 3, "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 500_000_000).to_string(),
        "attributes": [
            string("gen_ai.operation.name", "chat"),
            string("gen_ai.request.model", "gpt-4o-mini"),
            string("session.id", session),
            string("gen_ai.input.messages", &Value::Array(input).to_string()),
            string("gen_ai.output.messages", &json!([part("assistant", &answer(n))]).to_string()),
        ],
    })
}

/// Call `n` of `session`'s trace: one per call, distinct across sessions.
fn trace_id(session: &str, n: usize) -> String {
    format!("{:08x}{:024x}", session.bytes().map(u32::from).sum::<u32>(), 0xc0de_0000 + n)
}

async fn send_conversation(server: &TestServer, session: &str, at: u64) {
    for n in 0..TURNS {
        let body = json!({"resourceSpans": [{
            "resource": {"attributes": [string("service.name", "long-talk")]},
            "scopeSpans": [{"spans": [call(session, n, at)]}],
        }]});
        let reply = post_otlp(server, "/v1/traces", "application/json", body.to_string().into_bytes()).await;
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }
}

async fn a_long_conversation_is_stored_once_and_shown_whole(backend: Backend) {
    let server = TestServer::start(backend).await;
    let at = now_ns() - 3_600_000_000_000;
    send_conversation(&server, "long-talk", at).await;

    // Each distinct message once: the system prompt, 50 questions, 50 answers.
    let distinct = 1 + 2 * TURNS;
    assert_eq!(server.sql("SELECT COUNT(*) FROM message_texts").await.unwrap()[0], distinct as i64);
    let distinct_bytes: usize = system().len() + (0..TURNS).map(|n| question(n).len() + answer(n).len()).sum::<usize>();
    let stored = server
        .sql(
            "SELECT CAST(SUM(LENGTH(role) + LENGTH(content) + COALESCE(LENGTH(packed), 0) + COALESCE(LENGTH(tool_calls), 0)) \
             AS BIGINT) FROM message_texts",
        )
        .await
        .unwrap()[0];
    // The references: 50 calls sending 1 + 2n + 1 messages, a few bytes each.
    let refs = server.sql("SELECT CAST(SUM(LENGTH(message_refs)) AS BIGINT) FROM spans").await.unwrap()[0];
    let ratio = (stored + refs) as f64 / distinct_bytes as f64;
    assert!(ratio <= 1.5, "stored {stored} + references {refs} bytes for {distinct_bytes} distinct: {ratio:.2}");
    // The spans keep no copy of the conversation.
    // Packed: 3 well-known keys, a byte each, and their values (`session.id`, `chat`,
    // `gpt-4o-mini`: 24 bytes), with a length and a type for each and the format byte.
    let attributes = server
        .sql("SELECT CAST(SUM(LENGTH(attributes) + LENGTH(packed_attributes)) AS BIGINT) FROM spans")
        .await
        .unwrap()[0];
    assert_eq!(attributes, 34 * TURNS as i64, "bytes of span attributes");

    // The transcript shows each message once, the last ones whole although the calls
    // that sent them were far past the attribute limit.
    let api = server.api(None);
    let transcript = q1(&api, "transcript", json!({"session_id": "long-talk"})).await;
    let said: Vec<(String, String)> = transcript
        .iter()
        .filter(|r| r["kind"] == "message")
        .map(|r| (r["role"].as_str().unwrap().to_owned(), r["text"].as_str().unwrap().to_owned()))
        .collect();
    let mut expected = vec![("system".to_owned(), system())];
    for n in 0..TURNS {
        expected.push(("user".to_owned(), question(n)));
        expected.push(("assistant".to_owned(), answer(n)));
    }
    assert_eq!(said.len(), expected.len());
    assert!(said == expected, "the conversation in order, each message whole");

    // The last call's whole input is on its span: 100 messages sent, 1 answered.
    let span = q1(
        &api,
        "span",
        json!({"trace_id": trace_id("long-talk", TURNS - 1), "span_id": format!("{:016x}", 0xa000 + TURNS - 1)}),
    )
    .await;
    let exchange = span[0]["messages"].as_array().unwrap();
    assert_eq!(exchange.len(), 2 * TURNS + 1);
    assert_eq!(exchange[0]["text"], system());
    assert_eq!(exchange[2 * TURNS - 1]["text"], question(TURNS - 1));
    let new: Vec<bool> = exchange.iter().map(|m| m["new"].as_bool().unwrap()).collect();
    assert_eq!(new.iter().filter(|n| **n).count(), 2, "its new part: the last question and its answer");
    let attributes =
        json!({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "session.id": "long-talk"});
    assert_eq!(span[0]["attributes"], attributes, "as sent, less the messages");

    // A word said once is found once, though 42 later calls sent it again.
    let found = q1(&api, "search", json!({"text": "xylophone"})).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["session_id"], "long-talk");
    assert!(found[0]["snippet"].as_str().unwrap().contains("xylophone"), "{found:#?}");
    // Its document indexes the words without keeping the text again.
    let copies = server.sql("SELECT COUNT(*) FROM search_docs WHERE source = 'message' AND text <> ''").await.unwrap();
    assert_eq!(copies[0], 0);

    // The session page shows the whole conversation.
    let page = server.http.get(server.url("/dashboard/sessions/long-talk")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains(&format!("answer {}: item {} is a fine item", TURNS - 1, TURNS - 1)), "the last answer");
    assert!(!html.contains("[truncated"), "no message is cut");
}

/// Retention deletes a text once nothing newer than its cutoff refers to it, and keeps
/// the texts a recent call still sends.
async fn retention_deletes_texts_nothing_recent_refers_to(backend: Backend) {
    let server = TestServer::start(backend).await;
    let day = 86_400_000_000_000u64;
    // A conversation 40 days old, and one of today that re-sends the old system prompt.
    let old = now_ns() - 40 * day;
    for n in 0..3 {
        let body = json!({"resourceSpans": [{"scopeSpans": [{"spans": [call("old-talk", n, old)]}]}]});
        let reply = post_otlp(&server, "/v1/traces", "application/json", body.to_string().into_bytes()).await;
        assert_eq!(reply.status(), 200);
    }
    let body = json!({"resourceSpans": [{"scopeSpans": [{"spans": [call("new-talk", 0, now_ns() - day)]}]}]});
    let reply = post_otlp(&server, "/v1/traces", "application/json", body.to_string().into_bytes()).await;
    assert_eq!(reply.status(), 200);
    // system, 3 questions, 3 answers; today's call adds nothing new (same system prompt,
    // same first question and answer).
    assert_eq!(server.sql("SELECT COUNT(*) FROM message_texts").await.unwrap()[0], 7);

    sweep(server.store().await, &RetentionConfig::default(), now_ns() as i64).await.unwrap();
    // Today's call still refers to the system prompt, its question and its answer.
    assert_eq!(server.sql("SELECT COUNT(*) FROM message_texts").await.unwrap()[0], 3);
    let api = server.api(None);
    let transcript = q1(&api, "transcript", json!({"session_id": "new-talk"})).await;
    let texts: Vec<&str> =
        transcript.iter().filter(|r| r["kind"] == "message").map(|r| r["text"].as_str().unwrap()).collect();
    assert_eq!(texts, [system(), question(0), answer(0)]);
    assert!(q1(&api, "transcript", json!({"session_id": "old-talk"})).await.is_empty());
}

const OLD_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const OLD_SPAN: &str = "b7ad6b7169203331";

/// A store the earlier binary made, with messages kept as it kept them (text in each
/// row) and their search documents: after the upgrade the transcript and search answer
/// the same.
async fn messages_stored_before_keep_their_texts_and_search_hits(backend: Backend) {
    let at = now_ns() as i64 - 60_000_000_000;
    let inserts = [
        format!(
            "INSERT INTO messages (time_ns, seq, session_id, source, role, content, tool_calls, model, service, node_id) \
             VALUES ({at}, 0, 'before', 'log', 'user', 'what about the quokka?', NULL, 'gpt-4o-mini', 'svc', ''), \
             ({}, 0, 'before', 'log', 'assistant', 'quokkas smile', '[{{\"arguments\":{{}},\"name\":\"look\"}}]', \
             'gpt-4o-mini', 'svc', '')",
            at + 1
        ),
        format!(
            "INSERT INTO search_docs (time_ns, source, session_id, trace_id, span_id, run_id, service, text{}) \
             VALUES ({at}, 'message', 'before', '', '', '', 'svc', 'what about the quokka?'{})",
            if matches!(backend, Backend::Postgres) { ", words" } else { "" },
            if matches!(backend, Backend::Postgres) { ", 'about quokka the what'::tsvector" } else { "" }
        ),
        // A span as it was stored, its attributes JSON text.
        format!(
            "INSERT INTO traces (trace_id, start_ns, end_ns, spans, errors, root_name, service, session_id, \
             input_tokens, output_tokens, cost_nanocents, seq) \
             VALUES ('{OLD_TRACE}', {at}, {at}, 1, 0, 'dig', 'svc', 'before', 0, 0, 0, 1000000)"
        ),
        format!(
            "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, status_code, \
             status_message, service, resource_id, scope, session_id, tool_name, attributes, node_id, trace_seq) \
             VALUES ('{OLD_TRACE}', '{OLD_SPAN}', '', 'dig', 1, {at}, {at}, 0, '', 'svc', 0, '', 'before', 'dig', \
             '{{\"depth\":3,\"session.id\":\"before\",\"tool.name\":\"dig\"}}', '', 1000000)"
        ),
    ];
    // The binary before messages were stored once ran migrations 0001 to 0032.
    let (url, _store) = roost_tests::sql::store_made_before(backend, 32, &inserts).await;

    let server = TestServer::start_with(backend, |config| config.database_url = url.clone()).await;
    assert_eq!(server.sql("SELECT COUNT(*) FROM message_texts").await.unwrap()[0], 2);
    let api = server.api(None);
    let transcript = q1(&api, "transcript", json!({"session_id": "before"})).await;
    let said: Vec<(&str, &str)> = transcript
        .iter()
        .filter(|r| r["kind"] == "message")
        .map(|r| (r["role"].as_str().unwrap(), r["text"].as_str().unwrap()))
        .collect();
    assert_eq!(said, [("user", "what about the quokka?"), ("assistant", "quokkas smile")]);
    let answer = transcript.iter().find(|r| r["role"] == "assistant").unwrap();
    assert_eq!(answer["tool_calls"], json!([{"name": "look", "arguments": {}}]));
    let found = q1(&api, "search", json!({"text": "quokka"})).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["session_id"], "before");
    // The span keeps its attributes as they were stored.
    let span = q1(&api, "span", json!({"trace_id": OLD_TRACE, "span_id": OLD_SPAN})).await;
    assert_eq!(span[0]["attributes"], json!({"depth": 3, "session.id": "before", "tool.name": "dig"}));
    let spans = q1(&api, "spans", json!({"session_id": "before"})).await;
    assert_eq!(spans[0]["attributes"], json!({"depth": 3, "session.id": "before", "tool.name": "dig"}));
    // New messages are stored beside them, once.
    send_conversation(&server, "after", now_ns() - 3_600_000_000_000).await;
    assert_eq!(server.sql("SELECT COUNT(*) FROM message_texts").await.unwrap()[0], 2 + 1 + 2 * TURNS as i64);
}
