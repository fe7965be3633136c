//! The sessions pages: the list (filters, links that filter, paging, empty, warning and
//! failed states) and one session (totals, its conversation built from GenAI span
//! messages, hosted turns and custom-run events, its traces and runs, paging through a
//! long conversation, the 404).

use std::time::Duration;

use opentelemetry_proto::tonic::{
    collector::{logs::v1::ExportLogsServiceRequest, trace::v1::ExportTraceServiceRequest},
    common::v1::{AnyValue, KeyValue, any_value},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status, status::StatusCode as SpanStatus},
};
use prost::Message as _;
use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::json;

use crate::observe::post_otlp;

each_backend!(
    the_list_shows_sessions_with_links_that_filter,
    the_list_pages_by_fifty_and_says_when_it_is_empty,
    the_list_shows_the_stores_warning_and_a_failed_call,
    a_session_shows_its_totals_conversation_traces_and_runs,
    a_hosted_agents_turns_read_as_a_conversation,
    a_failed_model_call_reads_as_an_error_in_the_conversation,
    conversations_without_a_session_are_listed_one_per_trace,
    the_overview_says_when_spans_come_without_model_calls,
    costs_show_their_digits_and_say_when_they_are_unpriced,
    filters_match_parts_suggest_sort_and_take_a_range,
    a_long_conversation_pages_without_losing_or_repeating_items,
    an_unknown_session_is_a_404_and_a_bad_one_a_failed_call,
    searching_lists_the_conversations_and_traces_that_mention_the_words,
);

// ---------------------------------------------------------------------------------------
// Telemetry as senders send it (OTLP/HTTP protobuf), shared with the traces pages' tests.

pub(super) fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
        ..Default::default()
    }
}

pub(super) fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::IntValue(value)) }),
        ..Default::default()
    }
}

/// Now in Unix nanoseconds.
pub(super) fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// A span of trace `trace` (16 bytes of it), id `id` under `parent` (0: a root), starting
/// at `start` and lasting `ms` milliseconds.
pub(super) fn span(
    trace: u8,
    id: u64,
    parent: u64,
    name: &str,
    start: u64,
    ms: u64,
    attributes: Vec<KeyValue>,
) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: id.to_be_bytes().to_vec(),
        parent_span_id: if parent == 0 { Vec::new() } else { parent.to_be_bytes().to_vec() },
        name: name.into(),
        start_time_unix_nano: start,
        end_time_unix_nano: start + ms * 1_000_000,
        attributes,
        ..Default::default()
    }
}

/// `span` with an error status.
pub(super) fn failed(mut span: Span, message: &str) -> Span {
    span.status = Some(Status { code: SpanStatus::Error as i32, message: message.into() });
    span
}

/// Exports `spans` from service `service` over OTLP/HTTP protobuf.
pub(super) async fn send_spans(server: &TestServer, service: &str, spans: Vec<Span>) {
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![string("service.name", service)], ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    };
    let reply = post_otlp(server, "/v1/traces", "application/x-protobuf", request.encode_to_vec()).await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text().await.unwrap());
}

/// Exports `records` from service `service` over OTLP/HTTP protobuf.
pub(super) async fn send_logs(server: &TestServer, service: &str, records: Vec<LogRecord>) {
    let request = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource { attributes: vec![string("service.name", service)], ..Default::default() }),
            scope_logs: vec![ScopeLogs { log_records: records, ..Default::default() }],
            ..Default::default()
        }],
    };
    let reply = post_otlp(server, "/v1/logs", "application/x-protobuf", request.encode_to_vec()).await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text().await.unwrap());
}

/// A model call's span attributes: session, model, tokens.
pub(super) fn chat(session: &str, model: &str, input: i64, output: i64) -> Vec<KeyValue> {
    vec![
        string("session.id", session),
        string("gen_ai.operation.name", "chat"),
        string("gen_ai.request.model", model),
        int("gen_ai.usage.input_tokens", input),
        int("gen_ai.usage.output_tokens", output),
    ]
}

/// The q/1 calls a page's footer names, as JSON (`{shape, args}`; key order aside).
pub(super) fn queries(page: &roost_tests::pages::Page) -> Vec<serde_json::Value> {
    page.backed_by()
        .iter()
        .filter_map(|call| call.strip_prefix("POST /api/local/query "))
        .map(|body| serde_json::from_str(body).unwrap_or_else(|e| panic!("{body}: {e}")))
        .collect()
}

/// The sessions table's first-column texts.
fn listed(page: &roost_tests::pages::Page) -> Vec<String> {
    page.texts("table.sessions tbody tr td:first-child")
}

// ---------------------------------------------------------------------------------------

async fn the_list_shows_sessions_with_links_that_filter(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns();
    send_spans(
        &server,
        "planner",
        vec![span(1, 1, 0, "plan", now - 3_000_000_000, 20, chat("alpha-1", "gpt-4o", 1200, 34))],
    )
    .await;
    send_spans(
        &server,
        "writer",
        vec![
            span(2, 1, 0, "write", now - 2_000_000_000, 20, chat("Beta-2", "claude-3-5-sonnet", 15_000, 250)),
            failed(span(2, 2, 1, "tool", now - 1_999_000_000, 5, vec![string("session.id", "Beta-2")]), "boom"),
        ],
    )
    .await;
    // A session last active long ago.
    send_spans(
        &server,
        "planner",
        vec![span(3, 1, 0, "old", 1_700_000_000_000_000_000, 20, chat("alpha-old", "gpt-4o", 1, 1))],
    )
    .await;

    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/sessions").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(page.texts("h1"), ["Sessions"]);
    assert_eq!(page.attrs("nav a[aria-current=page]", "href"), ["/dashboard/sessions"]);
    assert_eq!(listed(&page), ["Beta-2", "alpha-1", "alpha-old"], "most recently active first");
    assert!(page.attrs("table.sessions a", "href").contains(&"/dashboard/sessions/Beta-2".to_owned()));
    let beta = page.texts("table.sessions tbody tr:first-child td");
    assert_eq!(beta.len(), 14, "the last is its scores: {beta:?}");
    assert_eq!(beta[..4], ["Beta-2", "", "writer", "claude-3-5-sonnet"], "{beta:?}");
    assert_eq!(beta[6..12], ["2", "0", "0", "1", "15.0k", "250"], "spans, events, logs, errors, tokens: {beta:?}");
    assert!(beta[12].starts_with('$') && beta[12] != "$0", "priced: {beta:?}");
    assert_eq!(page.attrs("table.sessions tbody tr.error td:first-child a", "href"), ["/dashboard/sessions/Beta-2"]);
    assert_eq!(page.texts("table.sessions tbody tr.error .chip.fail"), ["1"]);
    let alpha = page.texts("table.sessions tbody tr:nth-child(2) td");
    assert_eq!((alpha[9].as_str(), alpha[10].as_str(), alpha[11].as_str()), ("0", "1,200", "34"), "{alpha:?}");
    // Times are <time datetime> in UTC, for the page script to localise.
    let times = page.attrs("table.sessions time", "datetime");
    assert!(times.iter().all(|t| t.ends_with('Z')), "{times:?}");
    assert_eq!(
        queries(&page),
        [
            json!({"shape": "sessions", "args": {"limit": 51, "offset": 0}}),
            json!({"shape": "traces", "args": {"limit": 21, "sessionless": true}}),
            json!({"shape": "health", "args": {"limit": 50}}),
            json!({"shape": "models", "args": {"limit": 50}}),
        ]
    );

    // A service, agent or model cell filters by it.
    let by_service = page.attrs("table.sessions tbody tr:first-child td:nth-child(3) a", "href");
    assert_eq!(by_service, ["/dashboard/sessions?service=writer"]);
    let writer = visitor.get(&by_service[0]).await;
    assert_eq!(listed(&writer), ["Beta-2"]);
    assert_eq!(writer.attrs("input[name=service]", "value"), ["writer"], "the form shows the filter");
    assert_eq!(queries(&writer)[0]["args"]["service_contains"], "writer");

    // The id search ignores case; the model matches whole; the window leaves out the old.
    assert_eq!(listed(&visitor.get("/dashboard/sessions?search=ALPHA").await), ["alpha-1", "alpha-old"]);
    assert_eq!(listed(&visitor.get("/dashboard/sessions?model=gpt-4o").await), ["alpha-1", "alpha-old"]);
    let recent = visitor.get("/dashboard/sessions?search=alpha&window=1h").await;
    assert_eq!(listed(&recent), ["alpha-1"]);
    assert_eq!(recent.attrs("select[name=window] option[selected]", "value"), ["1h"]);
    // Unknown windows and pages are ignored, not errors.
    assert_eq!(listed(&visitor.get("/dashboard/sessions?window=forever&page=abc").await).len(), 3);

    // Nothing matches: it says so and how to widen.
    let none = visitor.get("/dashboard/sessions?service=nobody&window=24h").await;
    assert_eq!(none.status, StatusCode::OK);
    assert!(none.texts("table.sessions").is_empty());
    let text = none.main_text();
    assert!(text.contains("No session matches these filters"), "{text}");
    assert!(none.attrs("main p.empty a", "href").contains(&"/dashboard/sessions".to_owned()));
}

/// `?text=` on the Sessions and Traces pages: the conversations (a session, or a trace
/// without one) and the traces whose content holds every word, the words marked; a text
/// with no words is a warning over the usual list; what was typed is shown escaped.
async fn searching_lists_the_conversations_and_traces_that_mention_the_words(backend: Backend) {
    let server = TestServer::start(backend).await;
    let said = |prompt: &str| {
        string(
            "gen_ai.input.messages",
            &json!([{"role": "user", "parts": [{"type": "text", "content": prompt}]}]).to_string(),
        )
    };
    let start = now_ns() - 60_000_000_000;
    let mut planned = chat("trip", "gpt-4o-mini", 10, 5);
    planned.push(said("Plan a trip to Lisbon in May"));
    let mut sessionless = chat("", "gpt-4o-mini", 10, 5);
    sessionless.retain(|kv| kv.key != "session.id");
    sessionless.push(said("Is Lisbon sunny?"));
    send_spans(
        &server,
        "planner",
        vec![
            span(0x1a, 1, 0, "chat gpt-4o-mini", start, 5, planned),
            span(0x2b, 2, 0, "chat gpt-4o-mini", start + 1_000_000, 5, sessionless),
            span(0x3c, 3, 0, "chat gpt-4o-mini", start + 2_000_000, 5, chat("other", "gpt-4o-mini", 1, 1)),
        ],
    )
    .await;
    let mut visitor = Visitor::new(&server);

    let page = visitor.get("/dashboard/sessions?text=lisbon").await;
    let rows = page.texts("table.found tbody tr");
    assert_eq!(rows.len(), 2, "{}", page.main_text());
    assert!(rows[0].contains("no session") && rows[0].contains("Is Lisbon sunny?"), "{rows:?}");
    assert!(rows[1].starts_with("trip") && rows[1].contains("Plan a trip to Lisbon in May"), "{rows:?}");
    let trace = "2b".repeat(16);
    assert_eq!(
        page.attrs("table.found td.id a", "href"),
        [format!("/dashboard/traces/{trace}?span={}", "0000000000000002"), "/dashboard/sessions/trip".to_owned()]
    );
    assert_eq!(page.texts("table.found mark"), ["Lisbon", "Lisbon"]);
    assert!(page.texts("table.sessions").is_empty(), "the search replaces the list");
    let asked = queries(&page);
    assert!(asked.iter().any(|q| q["shape"] == "search" && q["args"]["group"] == "conversation"), "{asked:?}");

    let page = visitor.get("/dashboard/traces?text=lisbon%20MAY").await;
    let rows = page.texts("table.found tbody tr");
    assert_eq!(rows.len(), 1, "{}", page.main_text());
    assert_eq!(page.texts("table.found tbody td:nth-child(2)"), ["trip"], "the trace's session");
    assert_eq!(page.texts("table.found mark"), ["Lisbon", "May"]);

    // Narrowed by service: nothing from another service.
    let page = visitor.get("/dashboard/sessions?text=lisbon&service=billing").await;
    assert!(page.main_text().contains("Nothing mentions “lisbon” in this range and service"), "{}", page.main_text());

    // No words: a warning, and the usual list.
    let page = visitor.get("/dashboard/sessions?text=%3F%3F").await;
    assert!(page.texts(".warning").join(" ").contains("no words"), "{}", page.main_text());
    assert_eq!(listed(&page).len(), 2, "{}", page.main_text());

    // What was typed is text, never markup.
    let page = visitor.get("/dashboard/sessions?text=%3Cb%3Elisbon%3C%2Fb%3E").await;
    assert!(page.main_text().contains("Nothing mentions “<b>lisbon</b>”"), "{}", page.main_text());
    assert!(page.texts("main b").is_empty(), "no <b> element was made");
    assert!(!page.body.contains("<b>lisbon</b>"), "escaped");
}

async fn filters_match_parts_suggest_sort_and_take_a_range(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns();
    // The expensive one is older, so sorting by cost changes the order.
    send_spans(
        &server,
        "search",
        vec![span(2, 1, 0, "big", now - 3_000_000_000, 20, chat("s-big", "claude-3-5-sonnet", 50_000, 5_000))],
    )
    .await;
    send_spans(
        &server,
        "checkout",
        vec![span(1, 1, 0, "mini", now - 2_000_000_000, 20, chat("s-mini", "gpt-4o-mini-2024-07-18", 100, 10))],
    )
    .await;
    // 2023-11-14T22:13:20Z.
    send_spans(
        &server,
        "checkout",
        vec![span(3, 1, 0, "old", 1_700_000_000_000_000_000, 20, chat("s-old", "gpt-4o-mini-2024-07-18", 1, 1))],
    )
    .await;

    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/sessions").await;
    assert_eq!(listed(&page), ["s-mini", "s-big", "s-old"]);
    // Known services and models are suggested.
    assert_eq!(page.attrs("datalist#known-services option", "value"), ["checkout", "search"]);
    assert_eq!(page.attrs("input[name=service]", "list"), ["known-services"]);
    let models = page.attrs("datalist#known-models option", "value");
    assert!(models.contains(&"gpt-4o-mini-2024-07-18".to_owned()), "{models:?}");

    // A model family and part of a service, in any case.
    assert_eq!(listed(&visitor.get("/dashboard/sessions?model=Gpt-4O").await), ["s-mini", "s-old"]);
    let check = visitor.get("/dashboard/sessions?service=CHECK&order=cost").await;
    assert_eq!(listed(&check), ["s-mini", "s-old"]);
    assert_eq!(
        queries(&check)[0],
        json!({"shape": "sessions", "args": {"limit": 51, "offset": 0, "service_contains": "CHECK", "order": "cost"}})
    );
    assert_eq!(check.attrs("select[name=order] option[selected]", "value"), ["cost"]);

    // Sorting by cost puts the most expensive first.
    assert_eq!(listed(&visitor.get("/dashboard/sessions?order=cost").await)[0], "s-big");
    assert_eq!(listed(&visitor.get("/dashboard/sessions?order=tokens").await)[0], "s-big");

    // A custom range narrows the list; links keep it.
    let range = visitor.get("/dashboard/sessions?from=2023-11-14T00:00&to=2023-11-14").await;
    assert_eq!(listed(&range), ["s-old"]);
    let args = &queries(&range)[0]["args"];
    assert_eq!(
        (args["since"].as_str(), args["until"].as_str()),
        (Some("2023-11-14T00:00:00Z"), Some("2023-11-14T23:59:59.999999999Z"))
    );
    assert_eq!(range.attrs("input[name=from]", "value"), ["2023-11-14T00:00"]);
    let from = visitor.get("/dashboard/sessions?from=2023-11-15").await;
    assert_eq!(listed(&from), ["s-mini", "s-big"]);

    // Unreadable bounds: a clear message, no list, no error.
    let bad = visitor.get("/dashboard/sessions?from=yesterday").await;
    assert_eq!(bad.status, StatusCode::OK);
    let warning = bad.texts("p.warning").join(" ");
    assert!(warning.contains("From “yesterday” is not a date and time"), "{warning}");
    assert!(listed(&bad).is_empty());
    assert!(queries(&bad).iter().all(|q| q["shape"] != "sessions"));
}

async fn the_list_pages_by_fifty_and_says_when_it_is_empty(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard/sessions").await;
    let text = empty.main_text();
    assert!(text.contains("No sessions yet") && text.contains("session.id") && text.contains("/v1/traces"), "{text}");
    assert!(empty.texts("nav.pager").is_empty(), "one page, no pager");

    let now = now_ns();
    // A trace each: a trace belongs to one session.
    let spans: Vec<Span> = (0..53u64)
        .map(|i| {
            span(
                i as u8 + 10,
                1,
                0,
                "step",
                now - 100_000_000_000 + i * 1_000_000_000,
                1,
                vec![string("session.id", &format!("s-{i:02}"))],
            )
        })
        .collect();
    send_spans(&server, "many", spans).await;

    let first = visitor.get("/dashboard/sessions").await;
    let ids = listed(&first);
    assert_eq!((ids.len(), ids[0].as_str(), ids[49].as_str()), (50, "s-52", "s-03"));
    assert_eq!(first.texts("nav.pager span"), ["Sessions 1–50"]);
    assert_eq!(first.attrs("nav.pager a[rel=next]", "href"), ["/dashboard/sessions?page=2"]);
    assert!(first.attrs("nav.pager a[rel=prev]", "href").is_empty());

    let second = visitor.get("/dashboard/sessions?page=2").await;
    assert_eq!(listed(&second), ["s-02", "s-01", "s-00"]);
    assert_eq!(second.texts("nav.pager span"), ["Sessions 51–53"]);
    assert_eq!(second.attrs("nav.pager a[rel=prev]", "href"), ["/dashboard/sessions"]);
    assert!(second.attrs("nav.pager a[rel=next]", "href").is_empty());
    assert_eq!(queries(&second)[0]["args"], json!({"limit": 51, "offset": 50}));

    // Filters stay on while paging.
    let filtered = visitor.get("/dashboard/sessions?service=many&window=24h").await;
    assert_eq!(filtered.attrs("nav.pager a[rel=next]", "href"), ["/dashboard/sessions?service=many&window=24h&page=2"]);

    // Past the end: it says so and links back.
    let past = visitor.get("/dashboard/sessions?page=9").await;
    assert!(past.main_text().contains("No sessions on page 9"), "{}", past.main_text());
    assert!(past.attrs("main p.empty a", "href").contains(&"/dashboard/sessions".to_owned()));
}

async fn the_list_shows_the_stores_warning_and_a_failed_call(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    // An argument the core refuses (q/1 strings are at most 512 bytes): that section says
    // so, with the error's code and a retry link, and the page still renders.
    let long = "x".repeat(600);
    let refused = visitor.get(&format!("/dashboard/sessions?search={long}")).await;
    assert_eq!(refused.status, StatusCode::OK);
    let failure = refused.texts(".failed").join(" ");
    assert!(failure.contains("over 512 bytes") && failure.contains("invalid_argument"), "{failure}");
    assert_eq!(refused.attrs(".failed a", "href"), [format!("/dashboard/sessions?search={long}")]);
    assert_eq!(refused.texts("h1"), ["Sessions"]);

    // The store cannot answer: the shape's warning is shown, not an empty list's advice.
    server.sql("ALTER TABLE sessions RENAME TO sessions_gone").await.unwrap();
    let broken = visitor.get("/dashboard/sessions").await;
    assert_eq!(broken.status, StatusCode::OK);
    let warning = broken.texts("p.warning").join(" ");
    assert!(warning.contains("not an empty store"), "{warning}");
    assert!(!broken.main_text().contains("No sessions yet"), "{}", broken.main_text());
    server.sql("ALTER TABLE sessions_gone RENAME TO sessions").await.unwrap();
}

async fn a_session_shows_its_totals_conversation_traces_and_runs(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns() - 60_000_000_000;
    let session = "conv 1/α";
    let mut first = chat(session, "gpt-4o", 40, 12);
    first.push(string(
        "gen_ai.input.messages",
        &json!([
            {"role": "system", "parts": [{"type": "text", "content": "You are terse."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        ])
        .to_string(),
    ));
    first.push(string(
        "gen_ai.output.messages",
        &json!([{"role": "assistant", "parts": [
            {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}
        ]}])
        .to_string(),
    ));
    let long_answer = format!("Sunny. {}", "Details follow. ".repeat(150));
    let mut second = chat(session, "gpt-4o", 60, 300);
    second.push(string(
        "gen_ai.input.messages",
        &json!([
            {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}]},
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny, 21°C"}]},
        ])
        .to_string(),
    ));
    second.push(string(
        "gen_ai.output.messages",
        &json!([{"role": "assistant", "parts": [{"type": "text", "content": long_answer}]}]).to_string(),
    ));
    send_spans(
        &server,
        "weather-bot",
        vec![
            span(7, 1, 0, "agent run", now, 900, vec![string("session.id", session)]),
            span(7, 2, 1, "chat gpt-4o", now + 1_000_000, 300, first),
            failed(
                span(7, 3, 1, "get_weather", now + 310_000_000, 100, vec![string("session.id", session)]),
                "timeout",
            ),
            span(7, 4, 1, "chat gpt-4o", now + 500_000_000, 400, second),
        ],
    )
    .await;
    // A log record of the session, and a custom run in it.
    send_logs(
        &server,
        "weather-bot",
        vec![LogRecord {
            time_unix_nano: now + 950_000_000,
            severity_number: 9,
            severity_text: "INFO".into(),
            body: Some(AnyValue { value: Some(any_value::Value::StringValue("cache warmed".into())) }),
            attributes: vec![string("session.id", session)],
            ..Default::default()
        }],
    )
    .await;
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "eval-harness", "session_id": session})).await;
    assert_eq!(run.status, 201, "{}", run.body);
    let run_id = run.body["run_id"].as_str().unwrap().to_owned();
    api.post(
        &format!("/api/v1/runs/{run_id}/events"),
        json!({"event": {"event_type": "score", "data": {"score": 0.93}, "ts": (now / 1_000_000) as i64 + 2000}}),
    )
    .await
    .ok();

    let mut visitor = Visitor::new(&server);
    let list = visitor.get("/dashboard/sessions").await;
    let href = list.attrs("table.sessions tbody td:first-child a", "href");
    assert_eq!(href, ["/dashboard/sessions/conv%201%2F%CE%B1"], "the id is one path segment");
    let page = visitor.get(&href[0]).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(page.texts("h1"), [format!("Session {session}")]);
    assert_eq!(page.attrs("nav a[aria-current=page]", "href"), ["/dashboard/sessions"]);
    let stats: Vec<String> = page.texts("ul.stats li");
    for expected in ["Spans 4", "Log records 1", "Events 1", "Errors 1", "Input tokens 100", "Output tokens 312"] {
        assert!(stats.contains(&expected.to_owned()), "{expected} in {stats:?}");
    }
    assert!(page.texts(".session-meta").join(" ").contains("weather-bot"));

    // The conversation: each message once, in order, with roles.
    let roles = page.texts("ol.conversation li.msg .role");
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"], "{:#?}", page.texts("ol.conversation li"));
    // What the sender tells the model on its own is folded, one click away.
    assert_eq!(page.texts("li.msg.system details .text"), ["You are terse."]);
    let texts = page.texts("ol.conversation li.msg > .text");
    assert_eq!(texts[0], "Weather in Paris?");
    assert_eq!(texts[1], "sunny, 21°C", "the call message has no text, only its tool call");
    assert_eq!(page.texts("li.msg.assistant .tool-call code"), ["get_weather"]);
    assert!(page.texts("li.msg.assistant .tool-call pre")[0].contains(r#""city": "Paris""#));
    // A long message is cut, the rest behind a <details>.
    let summary = page.texts("li.msg.assistant details summary");
    assert_eq!(summary.len(), 1, "{summary:?}");
    assert!(summary[0].starts_with("Show ") && summary[0].ends_with(" more characters"), "{summary:?}");
    let whole = page.texts("li.msg.assistant .text").concat();
    assert_eq!(whole.replace(' ', ""), long_answer.replace(' ', ""), "the cut message reads whole");
    // Activity between the messages: the calls, the failed tool span, the log, the event.
    let activity = page.texts("ol.conversation li.activity");
    assert!(
        activity.iter().any(|a| a.starts_with("span") && a.contains("chat gpt-4o") && a.contains("40 in · 12 out")),
        "{activity:#?}"
    );
    assert!(activity.iter().any(|a| a.contains("get_weather")), "{activity:#?}");
    assert!(activity.iter().any(|a| a.starts_with("log") && a.contains("cache warmed")), "{activity:#?}");
    assert!(
        activity.iter().any(|a| a.starts_with("event") && a.contains("score") && a.contains("0.93")),
        "{activity:#?}"
    );
    let trace = hex::encode([7u8; 16]);
    let links = page.attrs("ol.conversation a", "href");
    assert!(links.contains(&format!("/dashboard/traces/{trace}?span=0000000000000002")), "{links:?}");

    // Messages only: no activity, and the switch says where it is.
    let messages = visitor.get(&format!("{}?show=messages", href[0])).await;
    assert!(messages.texts("li.activity").is_empty());
    assert_eq!(messages.texts("li.msg").len(), 5);
    assert_eq!(messages.texts(".view-switch strong"), ["messages only"]);

    // Its traces and runs.
    assert_eq!(page.attrs("#traces-h ~ div table a", "href"), [format!("/dashboard/traces/{trace}")]);
    let trace_row = page.texts("#traces-h ~ div table tbody td").join(" | ");
    assert!(trace_row.starts_with(&format!("agent run {trace} | weather-bot")), "{trace_row}");
    let runs = page.texts("#runs-h ~ div table tbody td").join(" | ");
    assert!(runs.starts_with(&format!("{run_id} | eval-harness | running")), "{runs}");

    // Backed by the q/1 calls, as REST would make them.
    assert_eq!(
        queries(&page),
        [
            json!({"shape": "sessions", "args": {"limit": 1, "session_id": session}}),
            json!({"shape": "transcript", "args": {"limit": 500, "session_id": session}}),
            json!({"shape": "traces", "args": {"limit": 21, "session_id": session}}),
            json!({"shape": "runs", "args": {"limit": 20, "session_id": session}}),
            json!({"shape": "logs", "args": {"event_name": "roost.runtime.output", "limit": 40, "session_id": session}}),
        ]
    );
    assert!(page.texts("#output-h").is_empty(), "no runtime output, no section");
}

async fn a_hosted_agents_turns_read_as_a_conversation(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "Be brief.").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    // Named over REST: the pages show the name where they showed the id.
    let named = api.post(&format!("/api/instances/{id}/config"), json!({"name": "Echo bot"})).await;
    assert_eq!(named.status, 200, "{}", named.body);
    assert_eq!(named.body["applied"], json!(["name"]));
    assert_eq!(api.get(&format!("/api/instances/{id}")).await.ok()["name"], "Echo bot");
    api.message(&id, "hello there").await.ok();

    let mut visitor = Visitor::new(&server);
    let path = format!("/dashboard/sessions/{id}");
    let mut page = visitor.get(&path).await;
    for _ in 0..100 {
        if page.texts("li.msg").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        page = visitor.get(&path).await;
    }
    assert_eq!(page.texts("li.msg .role"), ["user", "assistant"], "{}", page.main_text());
    assert_eq!(page.texts("li.msg .text"), ["hello there", "[Be brief.] hello there"]);
    assert!(page.texts("li.msg.assistant header").join(" ").contains("echo"), "the model");
    // It is in the list too, under its agent.
    let list = visitor.get("/dashboard/sessions").await;
    assert_eq!(listed(&list), [id.as_str()]);
    assert_eq!(list.texts("table.sessions tbody td:nth-child(2)"), ["Echo bot"]);
    assert_eq!(
        list.attrs("table.sessions tbody td:nth-child(2) a", "href"),
        [format!("/dashboard/sessions?agent={id}")]
    );
    assert!(page.texts(".session-meta").join(" ").contains("Echo bot"), "{:?}", page.texts(".session-meta"));
}

/// A model call that failed (`upstream 529 overloaded`, as roost's model gateway records
/// it) is an error in the conversation, with its message, not an empty assistant bubble.
async fn a_failed_model_call_reads_as_an_error_in_the_conversation(backend: Backend) {
    let server = TestServer::start(backend).await;
    let start = now_ns() - 5_000_000_000;
    let failed = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "trip-planner"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "5a".repeat(16), "spanId": "6b".repeat(8), "name": "chat claude-sonnet-4-5", "kind": 3,
            "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 300_000_000).to_string(),
            "status": {"code": 2, "message": "upstream 529 overloaded"},
            "attributes": [
                {"key": "session.id", "value": {"stringValue": "s-failed-call"}},
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "claude-sonnet-4-5"}},
                {"key": "error.type", "value": {"stringValue": "529"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue":
                    r#"[{"role":"user","parts":[{"type":"text","content":"Plan three days in Lisbon"}]}]"#}},
                {"key": "gen_ai.output.messages", "value": {"stringValue": r#"[{"role":"assistant","parts":[]}]"#}},
            ],
        }]}],
    }]});
    crate::pages::usage::post_json(&server, "/v1/traces", &failed).await;
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/sessions/s-failed-call").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.texts("li.msg .role"), ["user", "error"], "{}", page.main_text());
    let error = page.texts("li.msg.error").join(" ");
    assert!(error.contains("upstream 529 overloaded") && error.contains("claude-sonnet-4-5"), "{error}");
    assert_eq!(page.attrs("li.msg.error a", "href").len(), 1, "the error links to its span");
}

/// A GenAI span of trace `trace` (hex byte) as JSON, with the given extra attributes.
fn chat_span(trace: &str, span: &str, model: &str, attributes: serde_json::Value) -> serde_json::Value {
    let start = now_ns() - 2_000_000_000;
    let mut attrs = vec![
        json!({"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}),
        json!({"key": "gen_ai.request.model", "value": {"stringValue": model}}),
    ];
    attrs.extend(attributes.as_array().cloned().unwrap_or_default());
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "openai-app"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": trace.repeat(16), "spanId": span.repeat(8), "name": format!("chat {model}"), "kind": 3,
            "startTimeUnixNano": start.to_string(), "endTimeUnixNano": (start + 400_000_000).to_string(),
            "attributes": attrs,
        }]}],
    }]})
}

/// The official OpenAI instrumentation sends no session id: its conversations are listed
/// on the Sessions page and the Overview, one per trace, marked as such; a trace without
/// a model call is not a conversation.
async fn conversations_without_a_session_are_listed_one_per_trace(backend: Backend) {
    let server = TestServer::start(backend).await;
    let usage = json!([{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "40"}},
                       {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "12"}}]);
    crate::pages::usage::post_json(&server, "/v1/traces", &chat_span("7c", "8d", "gpt-4o-mini", usage)).await;
    let plain = json!({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "9e".repeat(16), "spanId": "af".repeat(8), "name": "GET /health", "kind": 2,
        "startTimeUnixNano": now_ns().to_string(), "endTimeUnixNano": (now_ns() + 1000).to_string(),
    }]}]}]});
    crate::pages::usage::post_json(&server, "/v1/traces", &plain).await;
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/sessions").await;
    assert!(page.main_text().contains("No sessions yet"), "{}", page.main_text());
    let rows = page.texts("#sessionless tbody tr");
    assert_eq!(rows.len(), 1, "{}", page.main_text());
    assert!(rows[0].contains("chat gpt-4o-mini") && rows[0].contains("no session"), "{rows:?}");
    assert_eq!(page.attrs("#sessionless tbody a", "href"), [format!("/dashboard/traces/{}", "7c".repeat(16))]);
    // The trace page holds the conversation.
    let overview = visitor.get("/dashboard").await;
    let active = overview.texts("section[aria-labelledby=active-h] tbody tr");
    assert_eq!(active.len(), 1, "{}", overview.main_text());
    assert!(active[0].contains("chat gpt-4o-mini") && active[0].contains("no session"), "{active:?}");
    let traces = visitor.get("/dashboard/traces?sessionless=1").await;
    assert_eq!(traces.texts("tbody tr").len(), 1, "{}", traces.main_text());
    assert_eq!(traces.attrs("input[name=sessionless][checked]", "value"), ["1"]);
}

/// An app whose GenAI instrumentation is missing (or failed to import) sends spans but no
/// model call: the overview says so, naming the app and README step 4, and links nowhere
/// outside roost; once a model call arrives, it says nothing of the kind.
async fn the_overview_says_when_spans_come_without_model_calls(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard").await;
    assert!(empty.texts("#no-model-calls").is_empty(), "nothing received, nothing to say: {}", empty.main_text());

    let plain = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "my-agent"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "5a".repeat(16), "spanId": "6b".repeat(8), "name": "turn", "kind": 1,
            "startTimeUnixNano": now_ns().to_string(), "endTimeUnixNano": (now_ns() + 1000).to_string(),
            "attributes": [{"key": "session.id", "value": {"stringValue": "s-no-calls"}}],
        }]}],
    }]});
    crate::pages::usage::post_json(&server, "/v1/traces", &plain).await;
    let page = visitor.get("/dashboard").await;
    let said = page.texts("#no-model-calls");
    let [sentence] = &said[..] else { panic!("one sentence: {}", page.main_text()) };
    assert!(
        sentence.starts_with(
            "roost has spans from my-agent but no model calls: is the app's GenAI instrumentation installed"
        ),
        "{sentence}"
    );
    assert!(sentence.contains("opentelemetry-instrumentation-openai-v2"), "{sentence}");
    assert!(
        sentence.contains("See step 4 of the Quick start in roost's README, “Send telemetry from your app”"),
        "{sentence}"
    );
    for href in page.attrs("a[href]", "href") {
        assert!(href.starts_with('/') && !href.starts_with("//"), "only roost's own pages are linked: {href}");
    }

    let usage = json!([{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "40"}},
                       {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "12"}}]);
    crate::pages::usage::post_json(&server, "/v1/traces", &chat_span("7c", "8d", "gpt-4o-mini", usage)).await;
    let page = visitor.get("/dashboard").await;
    assert!(page.texts("#no-model-calls").is_empty(), "a model call arrived: {}", page.main_text());
}

/// A cheap call's cost has its digits (`$0.000045`, never `$0.0000`); a model with no price
/// reads "unpriced", not `$0`; a total that leaves unpriced calls out says it is partial.
async fn costs_show_their_digits_and_say_when_they_are_unpriced(backend: Backend) {
    let server = TestServer::start(backend).await;
    let tokens = |input: i64, output: i64| {
        json!([{"key": "session.id", "value": {"stringValue": "s-costs"}},
               {"key": "gen_ai.usage.input_tokens", "value": {"intValue": input.to_string()}},
               {"key": "gen_ai.usage.output_tokens", "value": {"intValue": output.to_string()}}])
    };
    // gpt-4o-mini: $0.15 per million in, $0.60 out: 100 in + 50 out = $0.000045.
    crate::pages::usage::post_json(&server, "/v1/traces", &chat_span("1a", "2b", "gpt-4o-mini", tokens(100, 50))).await;
    crate::pages::usage::post_json(&server, "/v1/traces", &chat_span("1a", "3c", "house-model-7", tokens(10, 5))).await;
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/sessions/s-costs").await;
    let text = page.main_text();
    assert!(text.contains("$0.000045"), "{text}");
    assert!(!text.contains("$0.0000 ") && !text.contains("$0.0000\n"), "{text}");
    assert!(text.contains("unpriced"), "the house model's call: {text}");
    assert!(page.texts(".stats").join(" ").contains("$0.000045 (partial)"), "{:?}", page.texts(".stats"));
    let list = visitor.get("/dashboard/sessions").await;
    assert!(list.texts("table.sessions tbody tr").join(" ").contains("$0.000045 (partial)"), "{}", list.main_text());
}

async fn a_long_conversation_pages_without_losing_or_repeating_items(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "bulk", "session_id": "long"})).await.body["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // 498 events at one instant, then 7 at the next: the first page ends inside the second.
    let base = 1_795_000_000_000_i64;
    let events: Vec<_> = (0..505)
        .map(|i| {
            let ts = if i < 498 { base } else { base + 1 };
            json!({"id": format!("e{i:03}"), "event_type": "step", "data": {"n": i}, "ts": ts})
        })
        .collect();
    let added = api.post(&format!("/api/v1/runs/{run}/events"), json!({ "events": events })).await.ok();
    assert_eq!(added["accepted"], 505, "{added}");

    let mut visitor = Visitor::new(&server);
    let mut seen = Vec::new();
    let mut path = "/dashboard/sessions/long".to_owned();
    for _ in 0..5 {
        let page = visitor.get(&path).await;
        assert_eq!(page.status, StatusCode::OK);
        seen.extend(page.texts("li.activity .what"));
        match page.attrs("nav.pager a[rel=next]", "href").first() {
            Some(next) => {
                assert!(page.main_text().contains("The conversation goes on"));
                path = next.clone();
            }
            None => {
                assert!(page.attrs(".notice a", "href").contains(&"/dashboard/sessions/long".to_owned()));
                break;
            }
        }
    }
    let expected: Vec<String> = (0..505).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
    let mut sorted = seen.clone();
    sorted.sort_by_key(|s| s.trim_start_matches(r#"{"n":"#).trim_end_matches('}').parse::<i64>().unwrap());
    assert_eq!(sorted, expected, "every event once");
    assert!(path.contains("skip=2"), "{path}");
}

async fn an_unknown_session_is_a_404_and_a_bad_one_a_failed_call(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let missing = visitor.get("/dashboard/sessions/nobody-here").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    assert_eq!(missing.texts("h1"), ["No such session"]);
    assert!(missing.main_text().contains("nobody-here"));
    assert!(missing.attrs("main a", "href").contains(&"/dashboard/sessions".to_owned()));
    assert!(queries(&missing).iter().any(|q| q["shape"] == "transcript"));

    // An id the core refuses: every section says so; the page is not a 404.
    let long = "y".repeat(600);
    let refused = visitor.get(&format!("/dashboard/sessions/{long}")).await;
    assert_eq!(refused.status, StatusCode::OK);
    assert!(refused.texts(".failed").len() >= 3, "{}", refused.main_text());
    assert!(refused.texts(".failed").iter().all(|f| f.contains("invalid_argument")));
}
