//! The traces pages: the list (filters, errors, paging, empty and failed states) and one
//! trace (the waterfall as a tree with bars on the trace's time scale, the selected span's
//! attributes, resource, events and messages, the conversation, the 404).

use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, any_value},
    logs::v1::LogRecord,
    trace::v1::span::Event,
};
use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::json;

use super::sessions::{chat, failed, int, now_ns, queries, send_logs, send_spans, span, string};

each_backend!(
    the_list_shows_traces_filters_errors_and_pages,
    the_list_matches_parts_suggests_sorts_and_takes_a_range,
    a_trace_is_a_waterfall_with_the_selected_spans_details,
    a_trace_with_only_log_records_and_unknown_traces,
);

/// The traces table's root-name links.
fn names(page: &roost_tests::pages::Page) -> Vec<String> {
    page.texts("table.traces tbody td:first-child a")
}

async fn the_list_shows_traces_filters_errors_and_pages(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard/traces").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.texts("h1"), ["Traces"]);
    assert!(empty.main_text().contains("No traces yet") && empty.main_text().contains("/v1/traces"));
    assert_eq!(empty.attrs("nav a[aria-current=page]", "href"), ["/dashboard/traces"]);

    let now = now_ns();
    send_spans(
        &server,
        "checkout",
        vec![
            span(1, 1, 0, "POST /checkout", now - 5_000_000_000, 250, vec![string("session.id", "cart-9")]),
            span(1, 2, 1, "chat", now - 4_990_000_000, 200, chat("cart-9", "gpt-4o", 2000, 80)),
        ],
    )
    .await;
    send_spans(
        &server,
        "search",
        vec![
            span(2, 1, 0, "GET /search", now - 3_000_000_000, 40, vec![]),
            failed(span(2, 2, 1, "db query", now - 2_990_000_000, 30, vec![]), "deadlock"),
        ],
    )
    .await;

    let page = visitor.get("/dashboard/traces").await;
    assert_eq!(names(&page), ["GET /search", "POST /checkout"], "newest first");
    let (search, checkout) = (hex::encode([2u8; 16]), hex::encode([1u8; 16]));
    assert_eq!(
        page.attrs("table.traces tbody td:first-child a", "href"),
        [format!("/dashboard/traces/{search}"), format!("/dashboard/traces/{checkout}")]
    );
    let row = page.texts("table.traces tbody tr:nth-child(2) td");
    assert_eq!(row[0], format!("POST /checkout {checkout}"));
    assert_eq!(
        (row[1].as_str(), row[2].as_str(), row[4].as_str(), row[5].as_str()),
        ("checkout", "cart-9", "250 ms", "2")
    );
    assert_eq!((row[7].as_str(), row[8].as_str()), ("2,000", "80"));
    assert_eq!(
        page.attrs("table.traces tbody tr:nth-child(2) td:nth-child(3) a", "href"),
        ["/dashboard/sessions/cart-9"]
    );
    // The failed one is marked.
    assert_eq!(page.texts("table.traces tbody tr.error td:first-child a"), ["GET /search"]);
    assert_eq!(page.texts("table.traces tbody tr.error .chip.fail"), ["1"]);
    assert_eq!(
        queries(&page),
        [
            json!({"shape": "traces", "args": {"limit": 51, "offset": 0}}),
            json!({"shape": "health", "args": {"limit": 50}}),
            json!({"shape": "models", "args": {"limit": 50}}),
        ]
    );

    // Filters: errors only, a model on any span, a session, a service link.
    let errors = visitor.get("/dashboard/traces?errors=1").await;
    assert_eq!(names(&errors), ["GET /search"]);
    assert_eq!(errors.attrs("input[name=errors][checked]", "value"), ["1"]);
    assert_eq!(queries(&errors)[0]["args"]["errors_only"], true);
    assert_eq!(names(&visitor.get("/dashboard/traces?model=gpt-4o").await), ["POST /checkout"]);
    assert_eq!(names(&visitor.get("/dashboard/traces?session=cart-9").await), ["POST /checkout"]);
    let service_link = page.attrs("table.traces tbody tr:first-child td:nth-child(2) a", "href");
    assert_eq!(service_link, ["/dashboard/traces?service=search"]);
    assert_eq!(names(&visitor.get(&service_link[0]).await), ["GET /search"]);
    let none = visitor.get("/dashboard/traces?model=gpt-4o&errors=1").await;
    assert!(none.main_text().contains("No trace matches these filters"), "{}", none.main_text());

    // Fifty a page.
    let many = (0..51u64)
        .map(|i| span(100 + i as u8, 1, 0, &format!("job {i:02}"), now - 60_000_000_000 + i * 1000, 1, vec![]));
    send_spans(&server, "batch", many.collect()).await;
    let first = visitor.get("/dashboard/traces?service=batch").await;
    assert_eq!(names(&first).len(), 50);
    assert_eq!(first.texts("nav.pager span"), ["Traces 1–50"]);
    let next = first.attrs("nav.pager a[rel=next]", "href");
    assert_eq!(next, ["/dashboard/traces?service=batch&page=2"]);
    let second = visitor.get(&next[0]).await;
    assert_eq!(names(&second), ["job 00"]);
    assert_eq!(second.attrs("nav.pager a[rel=prev]", "href"), ["/dashboard/traces?service=batch"]);

    // A value the core refuses: the failed state with its retry link.
    let refused = visitor.get(&format!("/dashboard/traces?service={}", "z".repeat(600))).await;
    assert_eq!(refused.status, StatusCode::OK);
    assert!(refused.texts(".failed").join(" ").contains("invalid_argument"));
    assert_eq!(refused.texts(".failed a"), ["Retry"]);
}

async fn the_list_matches_parts_suggests_sorts_and_takes_a_range(backend: Backend) {
    let server = TestServer::start(backend).await;
    let now = now_ns();
    send_spans(
        &server,
        "search",
        vec![span(2, 1, 0, "big", now - 3_000_000_000, 900, chat("s-big", "claude-3-5-sonnet", 50_000, 5_000))],
    )
    .await;
    send_spans(
        &server,
        "checkout",
        vec![span(1, 1, 0, "mini", now - 2_000_000_000, 20, chat("Cart-7", "gpt-4o-mini-2024-07-18", 100, 10))],
    )
    .await;
    // 2023-11-14T22:13:20Z.
    send_spans(&server, "checkout", vec![span(3, 1, 0, "old", 1_700_000_000_000_000_000, 5, vec![])]).await;

    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/traces").await;
    assert_eq!(names(&page), ["mini", "big", "old"]);
    assert_eq!(page.attrs("datalist#known-services option", "value"), ["checkout", "search"]);
    assert_eq!(page.attrs("input[name=model]", "list"), ["known-models"]);

    assert_eq!(names(&visitor.get("/dashboard/traces?model=Gpt-4O").await), ["mini"]);
    assert_eq!(names(&visitor.get("/dashboard/traces?service=CHECK").await), ["mini", "old"]);
    assert_eq!(names(&visitor.get("/dashboard/traces?session=cart").await), ["mini"]);
    let cost = visitor.get("/dashboard/traces?order=cost").await;
    assert_eq!(names(&cost)[0], "big", "the most expensive first");
    assert_eq!(queries(&cost)[0], json!({"shape": "traces", "args": {"limit": 51, "offset": 0, "order": "cost"}}));
    assert_eq!(names(&visitor.get("/dashboard/traces?order=duration").await), ["big", "mini", "old"]);
    // An unknown order is the default.
    assert_eq!(names(&visitor.get("/dashboard/traces?order=sideways").await), ["mini", "big", "old"]);

    let range = visitor.get("/dashboard/traces?from=2023-11-14&to=2023-11-14T23:00").await;
    assert_eq!(names(&range), ["old"]);
    assert_eq!(names(&visitor.get("/dashboard/traces?from=2023-11-15T00:00").await), ["mini", "big"]);
    let bad = visitor.get("/dashboard/traces?to=2023-13-01").await;
    assert_eq!(bad.status, StatusCode::OK);
    assert!(bad.texts("p.warning").join(" ").contains("To “2023-13-01” is not a date and time"), "{}", bad.main_text());
    assert!(names(&bad).is_empty());
}

async fn a_trace_is_a_waterfall_with_the_selected_spans_details(backend: Backend) {
    let server = TestServer::start(backend).await;
    let t0 = now_ns() - 10_000_000_000;
    let mut llm = chat("trip-3", "gpt-4o", 500, 40);
    llm.push(string(
        "gen_ai.input.messages",
        &json!([{"role": "user", "parts": [{"type": "text", "content": "Plan a trip to Lyon"}]}]).to_string(),
    ));
    llm.push(string(
        "gen_ai.output.messages",
        &json!([{"role": "assistant", "parts": [{"type": "text", "content": "Take the TGV."}]}]).to_string(),
    ));
    llm.push(int("retry.count", 2));
    llm.push(opentelemetry_proto::tonic::common::v1::KeyValue {
        key: "gen_ai.server.time_to_first_token".into(),
        value: Some(AnyValue { value: Some(any_value::Value::DoubleValue(0.32)) }),
        ..Default::default()
    });
    let mut call = span(5, 3, 2, "chat gpt-4o", t0 + 100_000_000, 600, llm);
    call.events = vec![Event {
        time_unix_nano: t0 + 150_000_000,
        name: "rate_limited".into(),
        attributes: vec![string("exception.message", "429 from upstream")],
        ..Default::default()
    }];
    send_spans(
        &server,
        "travel-agent",
        vec![
            span(5, 1, 0, "handle request", t0, 1000, vec![string("session.id", "trip-3")]),
            span(5, 2, 1, "plan", t0 + 50_000_000, 800, vec![string("session.id", "trip-3")]),
            call,
            failed(
                span(
                    5,
                    4,
                    2,
                    "lookup hotels",
                    t0 + 750_000_000,
                    100,
                    vec![
                        string("gen_ai.tool.name", "lookup_hotels"),
                        string("gen_ai.tool.call.arguments", r#"{"city":"Lyon"}"#),
                        string("gen_ai.tool.call.result", "503 Service Unavailable"),
                    ],
                ),
                "hotel API down",
            ),
            span(5, 5, 1, "respond", t0 + 900_000_000, 100, vec![]),
            // Its parent was never sent: drawn as a root.
            span(5, 6, 99, "orphan", t0 + 500_000_000, 10, vec![]),
        ],
    )
    .await;
    send_logs(
        &server,
        "travel-agent",
        vec![LogRecord {
            time_unix_nano: t0 + 960_000_000,
            severity_number: 13,
            severity_text: "WARN".into(),
            body: Some(AnyValue { value: Some(any_value::Value::StringValue("slow hotel API".into())) }),
            trace_id: vec![5; 16],
            span_id: 4u64.to_be_bytes().to_vec(),
            ..Default::default()
        }],
    )
    .await;
    let trace = hex::encode([5u8; 16]);
    let path = format!("/dashboard/traces/{trace}");

    let mut visitor = Visitor::new(&server);
    let page = visitor.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(page.texts("h1"), ["Trace handle request"]);
    assert_eq!(page.attrs("nav a[aria-current=page]", "href"), ["/dashboard/traces"]);
    let stats = page.texts("ul.stats li");
    for expected in ["Duration 1.00 s", "Spans 6", "Errors 1", "Input tokens 500", "Output tokens 40"] {
        assert!(stats.contains(&expected.to_owned()), "{expected} in {stats:?}");
    }
    assert!(page.texts(".trace-meta").join(" ").contains("travel-agent"));
    assert_eq!(page.attrs(".trace-meta a", "href"), ["/dashboard/sessions/trip-3"]);

    // The waterfall: a tree in start order, the orphan last as a root.
    let rows = page.texts("table.waterfall tbody td.name a");
    assert_eq!(rows, ["handle request", "plan", "chat gpt-4o", "lookup hotels", "respond", "orphan"]);
    let guides = page.texts("table.waterfall tbody td.name .depth-mark");
    // (No-break spaces keep the guides' width; the text collapses them like any space.)
    assert_eq!(guides, ["", "├─", "│ ├─", "│ └─", "└─", ""]);
    assert!(page.body.contains("│\u{a0}├─"), "no-break spaces in the guides");
    // Bars on a 0–1000 scale of the trace's second.
    let xs = page.attrs("table.waterfall rect", "x");
    let widths = page.attrs("table.waterfall rect", "width");
    assert_eq!(xs, ["0.0", "50.0", "100.0", "750.0", "900.0", "500.0"]);
    assert_eq!(widths, ["1000.0", "800.0", "600.0", "100.0", "100.0", "10.0"]);
    assert_eq!(page.texts("table.waterfall tbody tr:nth-child(3) svg title"), ["starts at +100 ms, lasts 600 ms"]);
    // Classes: GenAI, error, selected (the root, when none is chosen).
    let classes = page.attrs("table.waterfall tbody tr", "class");
    assert_eq!(classes, ["selected", "genai", "error"], "rows without a class have no attribute");
    let call_detail = page.texts("table.waterfall tr.genai td.name .span-detail");
    assert!(call_detail[0].starts_with("gpt-4o · 500 in · 40 out · $"), "{call_detail:?}");
    assert!(call_detail[0].ends_with(" · first token 320 ms"), "{call_detail:?}");
    let tool_detail = page.texts("table.waterfall tr.error td.name .span-detail");
    assert_eq!(tool_detail, [r#"{"city":"Lyon"} → 503 Service Unavailable"#], "a tool step's arguments and result");
    // A time axis over the bars; one service, so no service column.
    assert_eq!(page.texts("table.waterfall th.bar .axis span"), ["0", "250 ms", "500 ms", "750 ms", "1.00 s"]);
    assert_eq!(page.texts("table.waterfall thead th").len(), 3, "span, duration, timeline");
    // A trace across services names each step's service.
    send_spans(&server, "gateway", vec![span(6, 1, 0, "GET /trip", t0, 500, vec![])]).await;
    send_spans(&server, "planner", vec![span(6, 2, 1, "plan", t0 + 10_000_000, 400, vec![])]).await;
    let two = visitor.get(&format!("/dashboard/traces/{}", hex::encode([6u8; 16]))).await;
    assert_eq!(two.texts("table.waterfall thead th").len(), 4, "{}", two.main_text());
    assert_eq!(two.texts("table.waterfall td.service"), ["gateway", "planner"]);
    assert_eq!(page.texts("aside.span-panel h2"), ["handle request"], "an unset status is not shown");

    // Choosing a span: its details, events, messages; the others link to it.
    let chosen = page.attrs("table.waterfall tbody td.name a", "href")[2].clone();
    assert_eq!(chosen, format!("{path}?span=0000000000000003"));
    let detail = visitor.get(&chosen).await;
    assert_eq!(detail.attrs("table.waterfall tbody tr[aria-current]", "class"), ["genai selected"]);
    assert_eq!(detail.texts("aside.span-panel h2"), ["chat gpt-4o"]);
    let kv: Vec<String> = detail.texts("aside.span-panel > dl.kv > *");
    let field = |name: &str| kv.iter().position(|k| k == name).map(|i| kv[i + 1].clone());
    assert_eq!(field("Span id").as_deref(), Some("0000000000000003"));
    assert_eq!(field("Service").as_deref(), Some("travel-agent"));
    assert_eq!(field("Duration").as_deref(), Some("600 ms"));
    assert_eq!(field("Operation").as_deref(), Some("chat"));
    assert_eq!(field("Request model").as_deref(), Some("gpt-4o"));
    assert_eq!(field("Input tokens").as_deref(), Some("500"));
    assert_eq!(field("Parent").as_deref(), Some("0000000000000002"));
    assert_eq!(field("Session").as_deref(), Some("trip-3"));
    assert!(detail.attrs("aside.span-panel a", "href").contains(&format!("{path}?span=0000000000000002")));
    let attributes = detail.texts("aside.span-panel h3 + dl.kv > *");
    assert!(attributes.windows(2).any(|w| w == ["retry.count", "2"]), "{attributes:?}");
    assert!(attributes.windows(2).any(|w| w == ["service.name", "travel-agent"]), "the resource: {attributes:?}");
    assert_eq!(detail.texts("aside .span-events li strong"), ["rate_limited"]);
    assert!(detail.texts("aside .span-events li").join(" ").contains("429 from upstream"));
    assert_eq!(detail.texts("aside ol.conversation li.msg .text"), ["Plan a trip to Lyon", "Take the TGV."]);
    assert!(
        queries(&detail)
            .contains(&json!({"shape": "span", "args": {"trace_id": trace, "span_id": "0000000000000003"}}))
    );

    // The failed span says why.
    let hotels = visitor.get(&format!("{path}?span=0000000000000004")).await;
    assert_eq!(hotels.texts("aside.span-panel h2"), ["lookup hotels error"]);
    assert_eq!(hotels.texts("aside.span-panel p.failed"), ["hotel API down"]);

    // The conversation below: messages and the trace's log records (its spans are above).
    let conversation = page.texts("#conversation-h ~ ol.conversation > li");
    assert_eq!(conversation.len(), 3, "{conversation:#?}");
    assert!(conversation[2].starts_with("log") && conversation[2].contains("slow hotel API"), "{conversation:#?}");
    assert!(
        page.attrs("#conversation-h ~ ol.conversation a", "href").contains(&format!("{path}?span=0000000000000004"))
    );

    // A span not in the trace: said beside the waterfall; capitals in the id are fine.
    let stray = visitor.get(&format!("/dashboard/traces/{}?span=ffff", trace.to_uppercase())).await;
    assert_eq!(stray.status, StatusCode::OK);
    assert!(stray.texts("aside.span-panel").join(" ").contains("This trace has no span ffff"));
    assert_eq!(stray.texts("table.waterfall tbody td.name a").len(), 6);
    // Backed by its q/1 calls.
    assert_eq!(
        queries(&page),
        [
            json!({"shape": "spans", "args": {"trace_id": trace, "limit": 1000}}),
            json!({"shape": "transcript", "args": {"trace_id": trace, "limit": 500}}),
            json!({"shape": "traces", "args": {"trace_id": trace, "limit": 1}}),
            json!({"shape": "span", "args": {"trace_id": trace, "span_id": "0000000000000001"}}),
        ]
    );
}

async fn a_trace_with_only_log_records_and_unknown_traces(backend: Backend) {
    let server = TestServer::start(backend).await;
    send_logs(
        &server,
        "logger",
        vec![LogRecord {
            time_unix_nano: now_ns(),
            severity_number: 17,
            severity_text: "ERROR".into(),
            body: Some(AnyValue { value: Some(any_value::Value::StringValue("it broke".into())) }),
            trace_id: vec![0xab; 16],
            span_id: 7u64.to_be_bytes().to_vec(),
            ..Default::default()
        }],
    )
    .await;
    let mut visitor = Visitor::new(&server);
    let logs_only = visitor.get(&format!("/dashboard/traces/{}", hex::encode([0xab_u8; 16]))).await;
    assert_eq!(logs_only.status, StatusCode::OK);
    let text = logs_only.main_text();
    assert!(text.contains("No spans of this trace were received"), "{text}");
    assert!(logs_only.texts("ol.conversation li.activity").join(" ").contains("it broke"));

    let missing = visitor.get(&format!("/dashboard/traces/{}", hex::encode([0xcd_u8; 16]))).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.texts("h1"), ["No such trace"]);
    assert!(missing.attrs("main a", "href").contains(&"/dashboard/traces".to_owned()));

    let refused = visitor.get(&format!("/dashboard/traces/{}", "e".repeat(600))).await;
    assert_eq!(refused.status, StatusCode::OK);
    assert_eq!(refused.texts(".failed").len(), 2, "the waterfall and the conversation: {}", refused.main_text());
}
