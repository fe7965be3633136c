//! Full-text search (q/1 `search`): what agents said and did is found by its words,
//! whatever carried it (span messages, tool calls, span names and failures, log bodies,
//! custom-run events, hosted turns); nothing is indexed without content capture; retention
//! takes the index with the data; bad searches are a 400.

use std::time::Duration;

use roost_server::telemetry::retention::{RetentionConfig, sweep};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Map, Value, json};

use super::{post_otlp, q1};

each_backend!(
    search_finds_what_was_said_whatever_carried_it,
    without_content_capture_nothing_is_indexed,
    retention_takes_the_index_with_the_data,
    bad_searches_are_a_400_that_names_the_problem,
    messages_stored_before_search_are_indexed_once,
    many_documents_are_searched_newest_first_whatever_the_rate
);

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn string(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

/// An OTLP/JSON span of trace `trace` (a hex byte repeated), starting `age` ago.
fn span(trace: &str, id: &str, name: &str, age: Duration, attributes: Vec<Value>) -> Value {
    let start = now_ns() - age.as_nanos() as u64;
    json!({
        "traceId": trace.repeat(16), "spanId": id.repeat(8), "name": name, "kind": 1,
        "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 1_000_000).to_string(),
        "attributes": attributes,
    })
}

async fn send(server: &TestServer, service: &str, spans: Vec<Value>) {
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [string("service.name", service)]},
        "scopeSpans": [{"spans": spans}],
    }]});
    let reply = post_otlp(server, "/v1/traces", "application/json", body.to_string().into_bytes()).await;
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
}

/// A model call of `session` ('' for none) asked `prompt` and answering `reply`.
fn chat(trace: &str, id: &str, session: &str, prompt: &str, reply: &str) -> Value {
    let messages =
        |role: &str, text: &str| json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string();
    let mut attributes = vec![
        string("gen_ai.operation.name", "chat"),
        string("gen_ai.request.model", "gpt-4o-mini"),
        string("gen_ai.input.messages", &messages("user", prompt)),
        string("gen_ai.output.messages", &messages("assistant", reply)),
    ];
    if !session.is_empty() {
        attributes.push(string("session.id", session));
    }
    span(trace, id, "chat gpt-4o-mini", Duration::from_secs(60), attributes)
}

/// What the trip planner, a sessionless app, a failing call and a log did.
async fn send_the_day(server: &TestServer) {
    let mut failed =
        span("3c", "c1", "chat claude-sonnet-4-5", Duration::from_secs(50), vec![string("session.id", "ops")]);
    failed["status"] = json!({"code": 2, "message": "upstream 529 overloaded"});
    let tool = span(
        "1a",
        "a2",
        "execute_tool get_weather",
        Duration::from_secs(59),
        vec![
            string("session.id", "trip-planner"),
            string("gen_ai.operation.name", "execute_tool"),
            string("gen_ai.tool.call.arguments", r#"{"city":"Porto"}"#),
            string("gen_ai.tool.call.result", "sunny and 24 degrees"),
        ],
    );
    send(
        server,
        "planner",
        vec![
            chat("1a", "a1", "trip-planner", "Plan a trip to Lisbon in May", "Lisbon in May is warm: book early."),
            tool,
            failed,
        ],
    )
    .await;
    send(server, "banking-app", vec![chat("2b", "b1", "", "Tell me about banks in Zürich", "Zurich has many.")]).await;
    let logs = json!({"resourceLogs": [{
        "resource": {"attributes": [string("service.name", "cache")]},
        "scopeLogs": [{"logRecords": [{
            "timeUnixNano": now_ns().to_string(), "severityNumber": 9, "body": {"stringValue": "cache warmed for tenant acme"},
        }]}],
    }]});
    let reply = post_otlp(server, "/v1/logs", "application/json", logs.to_string().into_bytes()).await;
    assert_eq!(reply.status(), 200);
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "reports", "session_id": "reports-1"})).await.ok();
    let run = run["run_id"].as_str().unwrap().to_owned();
    let events = json!({"events": [{"id": "e1", "event_type": "message", "data": {"prompt": "summarise the quarterly report"}}]});
    api.post(&format!("/api/v1/runs/{run}/events"), events.clone()).await.ok();
    // A resent event adds nothing.
    api.post(&format!("/api/v1/runs/{run}/events"), events).await.ok();
}

fn field<'a>(row: &'a Map<String, Value>, name: &str) -> &'a str {
    row[name].as_str().unwrap_or_default()
}

async fn search(server: &TestServer, args: Value) -> Vec<Map<String, Value>> {
    q1(&server.api(None), "search", args).await
}

async fn search_finds_what_was_said_whatever_carried_it(backend: Backend) {
    let server = TestServer::start(backend).await;
    send_the_day(&server).await;

    // "Lisbon" finds the trip planner's conversation, by its prompt and its reply (one
    // document: the call's messages), with the words around it.
    let found = search(&server, json!({"text": "Lisbon"})).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    let hit = &found[0];
    assert_eq!(
        (field(hit, "source"), field(hit, "session_id"), field(hit, "trace_id"), field(hit, "span_id")),
        ("message", "trip-planner", "1a".repeat(16).as_str(), "a1".repeat(8).as_str())
    );
    assert_eq!((field(hit, "service"), hit["hits"].as_i64()), ("planner", Some(1)));
    assert!(field(hit, "snippet").starts_with("Plan a trip to Lisbon in May"), "{hit:?}");
    assert!(!field(hit, "snippet").contains('\n'), "one line: {hit:?}");

    // As people type: a prefix of the last word, any case, every word needed.
    for text in ["lisb", "LISBON may", "trip lisbo"] {
        let found = search(&server, json!({"text": text})).await;
        assert_eq!(found.iter().map(|r| field(r, "session_id")).collect::<Vec<_>>(), ["trip-planner"], "{text}");
    }
    for text in ["lisbon zurich", "li", "lisbonx"] {
        assert!(search(&server, json!({"text": text})).await.is_empty(), "{text}");
    }

    // Every carrier: a tool call's arguments and result, a trace's span names and failures,
    // a conversation without a session (accents folded), a log body, a custom-run event.
    let one = |rows: Vec<Map<String, Value>>| {
        assert_eq!(rows.len(), 1, "{rows:#?}");
        rows.into_iter().next().unwrap()
    };
    let tool = one(search(&server, json!({"text": "porto"})).await);
    assert_eq!((field(&tool, "source"), field(&tool, "span_id")), ("tool", "a2".repeat(8).as_str()));
    assert_eq!(field(&one(search(&server, json!({"text": "sunny degrees"})).await), "source"), "tool");
    let failure = one(search(&server, json!({"text": "overloaded"})).await);
    assert_eq!((field(&failure, "source"), field(&failure, "session_id")), ("span", "ops"));
    assert_eq!(field(&one(search(&server, json!({"text": "get_weather"})).await), "trace_id"), "1a".repeat(16));
    let sessionless = one(search(&server, json!({"text": "zurich"})).await);
    assert_eq!((field(&sessionless, "session_id"), field(&sessionless, "trace_id")), ("", "2b".repeat(16).as_str()));
    assert!(field(&sessionless, "snippet").contains("Zürich"), "{sessionless:?}");
    let log = one(search(&server, json!({"text": "acme"})).await);
    assert_eq!((field(&log, "source"), field(&log, "service")), ("log", "cache"));
    let event = one(search(&server, json!({"text": "quarterly"})).await);
    assert_eq!((field(&event, "source"), field(&event, "session_id")), ("event", "reports-1"));
    assert!(!field(&event, "run_id").is_empty());

    // Grouped: one row per conversation (a session, or a trace without one), and per trace.
    let chats = search(&server, json!({"text": "chat", "group": "conversation"})).await;
    let keys: Vec<(&str, &str)> = chats.iter().map(|r| (field(r, "session_id"), field(r, "source"))).collect();
    assert_eq!(keys.len(), 3, "trip-planner, ops, and the sessionless trace: {chats:#?}");
    let trip = chats.iter().find(|r| field(r, "session_id") == "trip-planner").unwrap();
    assert_eq!(trip["hits"], 1, "the trace's span names are one document: {trip:?}");
    let traces = search(&server, json!({"text": "gpt", "group": "trace"})).await;
    assert_eq!(traces.len(), 2, "{traces:#?}");
    assert!(traces.iter().all(|r| !field(r, "trace_id").is_empty()));
    // Narrowed by source, service, session and time.
    assert_eq!(search(&server, json!({"text": "lisbon", "source": "log"})).await.len(), 0);
    assert_eq!(search(&server, json!({"text": "chat", "service_contains": "BANK"})).await.len(), 1);
    assert_eq!(search(&server, json!({"text": "chat", "session_id": "ops"})).await.len(), 1);
    let hour_ago = (now_ns() / 1_000_000 - 3_600_000) as i64;
    assert_eq!(search(&server, json!({"text": "lisbon", "until": hour_ago})).await.len(), 0);

    // Resending the same spans adds no documents.
    send_the_day(&server).await;
    let again = search(&server, json!({"text": "lisbon", "group": "conversation"})).await;
    assert_eq!(again[0]["hits"], 1, "{again:?}");

    // A hosted agent's turns: the message and the reply, under the agent's session.
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "searcher").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    api.message(&id, "remember the pelican").await.ok();
    let turn = one(search(&server, json!({"text": "pelican", "source": "event"})).await);
    assert_eq!(field(&turn, "session_id"), id);
}

async fn without_content_capture_nothing_is_indexed(backend: Backend) {
    let server = TestServer::start_with(backend, |config| config.telemetry.capture_content = false).await;
    send_the_day(&server).await;
    for text in ["lisbon", "porto", "overloaded", "chat", "acme", "quarterly", "zurich"] {
        assert!(search(&server, json!({"text": text})).await.is_empty(), "{text} is indexed");
    }
    // The telemetry itself is stored.
    assert_eq!(q1(&server.api(None), "spans", json!({})).await.len(), 4);
}

async fn retention_takes_the_index_with_the_data(backend: Backend) {
    let server = TestServer::start(backend).await;
    let old = Duration::from_secs(3 * 86_400);
    let mut ancient = chat("4d", "d1", "old-trip", "An old trip to Lisbon", "It was fine.");
    ancient["startTimeUnixNano"] = json!((now_ns() - old.as_nanos() as u64).to_string());
    ancient["endTimeUnixNano"] = json!((now_ns() - old.as_nanos() as u64 + 1000).to_string());
    send(&server, "planner", vec![ancient, chat("1a", "a1", "new-trip", "A new trip to Lisbon", "Enjoy.")]).await;
    assert_eq!(search(&server, json!({"text": "lisbon"})).await.len(), 2);
    let config = RetentionConfig {
        max_age: Some(Duration::from_secs(86_400)),
        max_bytes: None,
        every: Duration::from_secs(3600),
    };
    let now = (now_ns()) as i64;
    let swept = sweep(server.store().await, &config, now).await.unwrap();
    assert!(swept.aged > 0, "{swept:?}");
    let left = search(&server, json!({"text": "lisbon"})).await;
    assert_eq!(left.iter().map(|r| field(r, "session_id")).collect::<Vec<_>>(), ["new-trip"]);
    // The old document left the index too: a search for its own words finds nothing.
    assert!(search(&server, json!({"text": "old"})).await.is_empty());
}

async fn bad_searches_are_a_400_that_names_the_problem(backend: Backend) {
    let server = TestServer::start(backend).await;
    send_the_day(&server).await;
    let api = server.api(None);
    for (args, says) in [
        (json!({}), "needs the argument"),
        (json!({"text": ""}), "no words"),
        (json!({"text": "?! -- ' \" *"}), "no words"),
        (json!({"text": "x".repeat(101)}), "at most 100 characters"),
        (json!({"text": (0..17).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")}), "at most 16 words"),
        (json!({"text": "lisbon", "group": "session"}), "group"),
        (json!({"text": "lisbon", "source": "span_name"}), "source"),
    ] {
        let reply = api.post("/api/local/query", json!({"shape": "search", "args": args})).await;
        reply.err(400, "invalid_argument");
        assert!(reply.body["error"].as_str().unwrap().contains(says), "{args}: {}", reply.body);
    }
    // FTS5 and tsquery syntax in the text are words, not operators.
    for text in
        ["lisbon OR zurich", "lisbon NOT may", "\"lisbon\"", "lisbon:*", "lisbon & (may | june)", "NEAR(lisbon may)"]
    {
        let reply = api.post("/api/local/query", json!({"shape": "search", "args": {"text": text}})).await;
        reply.ok();
    }
    let found = search(&server, json!({"text": "lisbon & may"})).await;
    assert_eq!(found.len(), 1, "punctuation is no operator: {found:?}");
}

/// A store from before search: its messages are indexed by the backfill (which `roost
/// serve` runs at start), newest first, once however often it runs.
async fn messages_stored_before_search_are_indexed_once(backend: Backend) {
    let server = TestServer::start(backend).await;
    send_the_day(&server).await;
    // As an upgraded store is: messages, no documents, the mark at the newest message.
    server.sql("DELETE FROM search_docs").await.unwrap();
    let newest = server.sql("SELECT MAX(id) FROM messages").await.unwrap()[0];
    server
        .sql(&format!("UPDATE roost_meta SET value = '{newest}' WHERE key = 'search_backfill_messages'"))
        .await
        .unwrap();
    assert!(search(&server, json!({"text": "lisbon"})).await.is_empty());

    let store = server.store().await;
    let indexed = roost_server::telemetry::search::backfill(store).await.unwrap();
    let messages = server.sql("SELECT COUNT(*) FROM messages").await.unwrap()[0];
    assert_eq!(indexed as i64, messages, "one document per message");
    let found = search(&server, json!({"text": "lisbon"})).await;
    assert_eq!(found.len(), 2, "the prompt and the reply: {found:#?}");
    assert!(found.iter().all(|r| field(r, "session_id") == "trip-planner" && field(r, "source") == "message"));
    assert_eq!(search(&server, json!({"text": "zurich"})).await.len(), 2);
    // Done: the mark is 0, and running again adds nothing.
    assert_eq!(roost_server::telemetry::search::backfill(store).await.unwrap(), 0);
    assert_eq!(server.sql("SELECT COUNT(*) FROM search_docs").await.unwrap()[0], messages);
}

/// Log record `i` of [`many_documents_are_searched_newest_first_whatever_the_rate`]: every
/// one says `entry`, the oldest hundred `ancient`, one in a hundred `centennial`.
fn numbered_log(base_ns: u64, i: u64) -> Value {
    let mut body = format!("entry number {i}");
    if i < 100 {
        body.push_str(" ancient");
    }
    if i.is_multiple_of(100) {
        body.push_str(" centennial");
    }
    json!({"timeUnixNano": (base_ns + i * 1_000).to_string(), "severityNumber": 9, "body": {"stringValue": body}})
}

/// 60,000 documents, more than PostgreSQL walks before it weighs its GIN index
/// (`query::search`): a word everywhere is found by the walk, one only in the oldest
/// documents through GIN, one in a hundred by walking on. Each answer is the newest hits,
/// newest first, on both backends.
async fn many_documents_are_searched_newest_first_whatever_the_rate(backend: Backend) {
    const RECORDS: u64 = 60_000;
    const PER_REQUEST: u64 = 5_000;
    let server = TestServer::start(backend).await;
    // On a millisecond, so a time filter can cut between two records.
    let base_ns = (now_ns() - 3_600_000_000_000) / 1_000_000 * 1_000_000;
    for first in (0..RECORDS).step_by(PER_REQUEST as usize) {
        let records: Vec<Value> = (first..first + PER_REQUEST).map(|i| numbered_log(base_ns, i)).collect();
        let logs = json!({"resourceLogs": [{
            "resource": {"attributes": [string("service.name", "batch")]},
            "scopeLogs": [{"logRecords": records}],
        }]});
        let reply = post_otlp(&server, "/v1/logs", "application/json", logs.to_string().into_bytes()).await;
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }
    // The records' numbers, as the answer gives them.
    let numbers = |rows: Vec<Map<String, Value>>| -> Vec<u64> {
        rows.iter()
            .map(|row| {
                let snippet = field(row, "snippet");
                let number = snippet.split_whitespace().nth(2).and_then(|n| n.parse().ok());
                number.unwrap_or_else(|| panic!("a numbered record: {row:?}"))
            })
            .collect()
    };
    let everywhere = numbers(search(&server, json!({"text": "entry", "limit": 100})).await);
    assert_eq!(everywhere, (RECORDS - 100..RECORDS).rev().collect::<Vec<_>>());
    let oldest = numbers(search(&server, json!({"text": "ancient"})).await);
    assert_eq!(oldest, (50..100).rev().collect::<Vec<_>>());
    // The newest 20,000 hold 200; ten more are further down.
    let sparse = numbers(search(&server, json!({"text": "centennial", "limit": 210})).await);
    assert_eq!(sparse, (RECORDS / 100 - 210..RECORDS / 100).rev().map(|k| k * 100).collect::<Vec<_>>());
    // Grouped (log records have no conversation: each is its own): the groups fill from
    // the newest hits the same ways.
    let grouped = numbers(search(&server, json!({"text": "ancient", "group": "conversation"})).await);
    assert_eq!(grouped, (50..100).rev().collect::<Vec<_>>());
    let grouped = numbers(search(&server, json!({"text": "centennial", "group": "conversation"})).await);
    assert_eq!(grouped, (RECORDS / 100 - 50..RECORDS / 100).rev().map(|k| k * 100).collect::<Vec<_>>());
    // Filtered: the newest documents hold the word but none the filter keeps.
    let until_ms = base_ns / 1_000_000 + 30;
    let older = numbers(search(&server, json!({"text": "centennial", "until": until_ms})).await);
    assert_eq!(older, (250..=300).rev().map(|k| k * 100).collect::<Vec<_>>()[..50]);
    let both = numbers(search(&server, json!({"text": "ancient centennial"})).await);
    assert_eq!(both, [0]);
    assert!(search(&server, json!({"text": "nowhere"})).await.is_empty());
    // As typed: no whole word `centen`, so its prefix, through the same ways.
    assert_eq!(numbers(search(&server, json!({"text": "centen", "limit": 3})).await), [59_900, 59_800, 59_700]);
}
