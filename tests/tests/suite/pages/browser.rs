//! The pages in a real browser (headless Chromium through chromedriver): data sent by the
//! OpenTelemetry SDK's OTLP exporter appears on the sessions, session, trace and usage
//! pages; the live page shows a span ingested while it is open without a reload; no page
//! logs a console error (a CSP violation is one); the token gate. Screenshots of the main
//! pages land in `target/screenshots/` at 1280×800 (and two at 390 wide).
//!
//! These run on SQLite only: the pages sit above the core's service traits, and the HTML
//! tests of each page group run on both backends.

use std::time::Duration;

use fantoccini::Locator;
use opentelemetry::{
    KeyValue,
    trace::{Span, Status, TraceContextExt, Tracer, TracerProvider},
};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use roost_tests::{Backend, TestServer, browser::Browser};

/// Exports one agent turn with the SDK's OTLP/HTTP exporter: a root span, a GenAI chat
/// span with its messages and usage, and a failing tool span with an event.
fn export_turn(base: String, session: String, span_name: String) {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/traces"))
        .build()
        .unwrap();
    let resource = Resource::builder().with_service_name("support-bot").build();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter).with_resource(resource).build();
    let tracer = provider.tracer("roost-browser-tests");
    tracer.in_span(span_name, |cx| {
        cx.span().set_attribute(KeyValue::new("session.id", session.clone()));
        let mut chat = tracer.start_with_context("chat gpt-4o-mini", &cx);
        chat.set_attributes([
            KeyValue::new("session.id", session.clone()),
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.system", "openai"),
            KeyValue::new("gen_ai.request.model", "gpt-4o-mini"),
            KeyValue::new("gen_ai.response.model", "gpt-4o-mini"),
            KeyValue::new("gen_ai.usage.input_tokens", 1200_i64),
            KeyValue::new("gen_ai.usage.output_tokens", 340_i64),
            KeyValue::new(
                "gen_ai.input.messages",
                r#"[{"role":"user","parts":[{"type":"text","content":"Where is my parcel 7731?"}]}]"#,
            ),
            KeyValue::new(
                "gen_ai.output.messages",
                r#"[{"role":"assistant","parts":[{"type":"text","content":"Parcel 7731 left the depot this morning."}],"finish_reason":"stop"}]"#,
            ),
        ]);
        chat.end();
        let mut tool = tracer.start_with_context("execute_tool track_parcel", &cx);
        tool.set_attribute(KeyValue::new("session.id", session.clone()));
        tool.set_attribute(KeyValue::new("gen_ai.tool.name", "track_parcel"));
        tool.add_event("retry", vec![KeyValue::new("attempt", 2_i64)]);
        tool.set_status(Status::error("carrier API timed out"));
        tool.end();
    });
    provider.force_flush().unwrap();
    provider.shutdown().unwrap();
}

async fn send_turn(server: &TestServer, session: &str, span_name: &str) {
    let (base, session, span_name) = (server.url(""), session.to_owned(), span_name.to_owned());
    tokio::task::spawn_blocking(move || export_turn(base, session, span_name)).await.unwrap();
}

async fn assert_no_console_errors(browser: &Browser, page: &str) {
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors on {page}: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exported_telemetry_reads_on_the_sessions_trace_and_usage_pages() {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start(Backend::Sqlite).await;
    send_turn(&server, "sess-parcel-7731", "support turn").await;
    let browser = Browser::start().await;

    browser.open(&server.url("/dashboard/sessions")).await;
    browser.wait_for_text("sess-parcel-7731", Duration::from_secs(10)).await.unwrap();
    browser.screenshot("sessions").await;
    assert_no_console_errors(&browser, "sessions").await;

    browser.client.find(Locator::LinkText("sess-parcel-7731")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("Where is my parcel 7731?", Duration::from_secs(10)).await.unwrap();
    let text = browser.main_text().await;
    assert!(text.contains("Parcel 7731 left the depot this morning."), "{text}");
    assert!(text.contains("gpt-4o-mini"), "{text}");
    browser.screenshot("session").await;
    assert_no_console_errors(&browser, "session").await;

    browser.open(&server.url("/dashboard/traces")).await;
    browser.wait_for_text("support turn", Duration::from_secs(10)).await.unwrap();
    browser.screenshot("traces").await;
    assert_no_console_errors(&browser, "traces").await;
    browser.client.find(Locator::LinkText("support turn")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("execute_tool track_parcel", Duration::from_secs(10)).await.unwrap();
    browser.client.find(Locator::LinkText("execute_tool track_parcel")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("carrier API timed out", Duration::from_secs(10)).await.unwrap();
    let url = browser.client.current_url().await.unwrap();
    assert!(url.query().unwrap_or_default().contains("span="), "the selected span is in the URL: {url}");
    let text = browser.main_text().await;
    assert!(text.contains("retry") && text.contains("support-bot"), "events and resource in the pane: {text}");
    browser.screenshot("trace").await;
    assert_no_console_errors(&browser, "trace").await;

    browser.open(&server.url("/dashboard/usage")).await;
    browser.wait_for_text("gpt-4o-mini", Duration::from_secs(10)).await.unwrap();
    // uPlot drew both charts (a canvas each) from the page's data block.
    browser.client.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(".chart canvas")).await.unwrap();
    let charts = browser.client.find_all(Locator::Css(".chart canvas")).await.unwrap();
    assert_eq!(charts.len(), 2);
    browser.screenshot("usage").await;
    assert_no_console_errors(&browser, "usage").await;
    // Today, by the hour: the same charts on hourly points.
    browser.open(&server.url("/dashboard/usage?days=1")).await;
    browser.wait_for_text("Cost per hour by model", Duration::from_secs(10)).await.unwrap();
    browser.client.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(".chart canvas")).await.unwrap();
    assert_eq!(browser.client.find_all(Locator::Css(".chart canvas")).await.unwrap().len(), 2);
    browser.screenshot("usage-today").await;
    assert_no_console_errors(&browser, "usage today").await;

    browser.open(&server.url("/")).await;
    browser.wait_for_text("sess-parcel-7731", Duration::from_secs(10)).await.unwrap();
    browser.screenshot("overview").await;
    assert_no_console_errors(&browser, "overview").await;
    browser.resize(390, 844).await;
    browser.open(&server.url("/dashboard")).await;
    browser.screenshot("overview-390").await;
    browser.open(&server.url("/dashboard/sessions/sess-parcel-7731")).await;
    browser.screenshot("session-390").await;
    // The trace at phone width: steps stack, nothing scrolls sideways.
    browser.open(url.as_str()).await;
    let wide = browser.client.execute("return document.documentElement.scrollWidth;", vec![]).await.unwrap();
    assert!(wide.as_f64().unwrap() <= 390.0, "the trace page is {wide} px wide at 390");
    browser.screenshot("trace-390").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_page_shows_a_span_ingested_while_it_is_open() {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start(Backend::Sqlite).await;
    let browser = Browser::start().await;
    browser.open(&server.url("/dashboard/live")).await;
    browser.wait_for_text("Live", Duration::from_secs(10)).await.unwrap();
    // Wait for the stream to be open before sending.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while browser.text_of(".feed-state").await != "Live" {
        assert!(tokio::time::Instant::now() < deadline, "the stream did not open");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    send_turn(&server, "sess-live-1", "live turn while watching").await;
    browser
        .wait_for_text("live turn while watching", Duration::from_secs(10))
        .await
        .unwrap_or_else(|text| panic!("the span did not appear without a reload: {text}"));
    // Pause stops new rows; resume picks up what came meanwhile.
    browser.client.find(Locator::Css("button.pause")).await.unwrap().click().await.unwrap();
    assert_eq!(browser.text_of(".feed-state").await, "Paused");
    send_turn(&server, "sess-live-2", "turn while paused").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!browser.main_text().await.contains("turn while paused"));
    browser.client.find(Locator::Css("button.pause")).await.unwrap().click().await.unwrap();
    browser
        .wait_for_text("turn while paused", Duration::from_secs(10))
        .await
        .unwrap_or_else(|text| panic!("resume did not replay what came while paused: {text}"));
    // One rendering: a streamed row reads as the server renders the same span on a reload.
    let streamed = feed_row(&browser, "chat gpt-4o-mini", "sess-live-1").await;
    assert!(streamed.last().unwrap().contains("1,540 tokens · $"), "tokens and cost, no attributes: {streamed:?}");
    let failed = feed_row(&browser, "execute_tool track_parcel", "sess-live-1").await;
    assert_eq!(failed.last().unwrap(), "error: carrier API timed out", "{failed:?}");
    browser.open(&server.url("/dashboard/live")).await;
    browser.wait_for_text("live turn while watching", Duration::from_secs(10)).await.unwrap();
    assert_eq!(feed_row(&browser, "chat gpt-4o-mini", "sess-live-1").await, streamed);
    assert_eq!(feed_row(&browser, "execute_tool track_parcel", "sess-live-1").await, failed);
    browser.screenshot("live").await;
    // At phone width a row is a short card, not a column of wrapped cells.
    browser.resize(390, 800).await;
    let tallest = browser
        .client
        .execute(
            "return Math.max(...Array.from(document.querySelectorAll('.feed tbody tr')).map(tr => tr.getBoundingClientRect().height));",
            vec![],
        )
        .await
        .unwrap();
    assert!(tallest.as_f64().unwrap() < 120.0, "rows at 390 px are {tallest} px tall");
    browser.screenshot("live-390").await;
    assert_no_console_errors(&browser, "live").await;
    browser.close().await;
}

/// The cells' texts of the live feed's row of `title` in `session`.
async fn feed_row(browser: &Browser, title: &str, session: &str) -> Vec<String> {
    let rows = browser
        .client
        .execute(
            "return Array.from(document.querySelectorAll('.feed tbody tr')).map(tr => Array.from(tr.cells).map(td => td.textContent.trim()));",
            vec![],
        )
        .await
        .unwrap();
    let rows: Vec<Vec<String>> = serde_json::from_value(rows).unwrap();
    rows.into_iter()
        .find(|cells| cells.iter().any(|c| c == title) && cells.iter().any(|c| c == session))
        .unwrap_or_else(|| panic!("no row of {title} in {session}"))
}

/// Someone types a few words said in a conversation into the Sessions page's search box:
/// the conversation is found, its words marked, at desktop and phone width, and a click
/// opens it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn words_typed_into_search_find_the_conversation() {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start(Backend::Sqlite).await;
    send_turn(&server, "sess-parcel-7731", "support turn").await;
    let browser = Browser::start().await;
    for (width, height) in [(390, 844), (1280, 800)] {
        browser.resize(width, height).await;
        browser.open(&server.url("/dashboard/sessions")).await;
        let field = browser.client.find(Locator::Css("input[name=text]")).await.unwrap();
        field.send_keys("depot PARC").await.unwrap();
        browser.client.find(Locator::Css("form.filters button[type=submit]")).await.unwrap().click().await.unwrap();
        browser.wait_for_text("Conversations mentioning", Duration::from_secs(10)).await.unwrap();
        let found = browser.text_of("table.found tbody").await;
        assert!(found.contains("sess-parcel-7731") && found.contains("1 match"), "{found}");
        assert_eq!(browser.text_of("table.found mark").await, "parcel", "the first matched word is marked");
        let wide = browser.client.execute("return document.documentElement.scrollWidth;", vec![]).await;
        assert!(wide.unwrap().as_f64().unwrap() <= f64::from(width), "no sideways scroll at {width}");
        assert_no_console_errors(&browser, "sessions search").await;
        browser.screenshot(&format!("sessions-search-{width}")).await;
    }
    browser.client.find(Locator::LinkText("sess-parcel-7731")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("Parcel 7731 left the depot this morning.", Duration::from_secs(10)).await.unwrap();
    browser.open(&server.url("/dashboard/sessions?text=pelican")).await;
    browser.wait_for_text("Nothing mentions “pelican”", Duration::from_secs(10)).await.unwrap();
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_loads_without_console_errors() {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start(Backend::Sqlite).await;
    send_turn(&server, "sess-every-page-with-a-long-conversation-id-0001", "every page turn").await;
    // Hosted agents, so the guard's agent picker lists some.
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    // One deploy at a time per account: each is up before the next is asked for.
    for brief in ["first", "second"] {
        let id = api.provision("echo", brief).await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
    }
    // Every page at desktop and phone width (a true 390 px viewport), in the light and the
    // dark scheme: each loads clean, and none scrolls sideways at 390 px (wide tables
    // scroll inside their own box, or read as cards). The screenshots are for people to
    // look at.
    for dark in [false, true] {
        let browser = if dark { Browser::start_dark().await } else { Browser::start().await };
        for (width, height) in [(1280, 800), (390, 844)] {
            browser.resize(width, height).await;
            for path in roost_gateway::pages::layout::NAV.iter().map(|item| item.href) {
                browser.open(&server.url(path)).await;
                let heading = browser.text_of("h1").await;
                assert!(!heading.is_empty(), "{path} has a heading");
                let footer = browser.text_of("footer.backed").await;
                assert!(footer.contains("Backed by"), "{path} names its API calls: {footer}");
                assert_no_console_errors(&browser, path).await;
                let wide = browser.client.execute("return document.documentElement.scrollWidth;", vec![]).await;
                let wide = wide.unwrap().as_f64().unwrap();
                assert!(wide <= f64::from(width), "{path} is {wide} px wide at {width}");
                // A list read as cards shows every figure of a row on screen at a phone's
                // width, not two columns of thirteen with the rest scrolled out of view.
                let cut = browser
                    .client
                    .execute(
                        "const cells = [...document.querySelectorAll('table:is(.sessions, .sessionless, .traces) tbody tr:first-child td')]\
                           .filter(td => getComputedStyle(td).display !== 'none');\
                         return cells.filter(td => td.getBoundingClientRect().right > window.innerWidth)\
                           .map(td => td.dataset.label || td.textContent.trim());",
                        vec![],
                    )
                    .await
                    .unwrap();
                assert_eq!(cut, serde_json::json!([]), "{path} at {width}: cells off screen");
                let name = path.trim_start_matches("/dashboard").trim_start_matches('/');
                let name = if name.is_empty() { "dashboard" } else { name };
                let suffix = match (width, dark) {
                    (1280, false) => String::new(),
                    (1280, true) => "-dark".to_owned(),
                    (_, false) => format!("-{width}"),
                    (_, true) => format!("-{width}-dark"),
                };
                browser.screenshot(&format!("page-{name}{suffix}")).await;
            }
        }
        browser.close().await;
    }
}

/// `/docs` reads without a token (tokens configured) and without script: every section of
/// the OpenAPI document, an operation with its body fields and errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_reference_reads_without_a_token() {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start_with(Backend::Sqlite, |c| c.access.api_tokens = vec!["secret".into()]).await;
    let browser = Browser::start().await;
    browser.open(&server.url("/docs#post_api_instances_instance_id_channel_pair")).await;
    assert_eq!(browser.text_of("h1").await, "API reference");
    let pair = browser.text_of("#post_api_instances_instance_id_channel_pair").await;
    assert!(pair.contains("/api/instances/{instance_id}/channel/pair"), "{pair}");
    assert!(pair.contains("PairChannelRequest") && pair.contains("code"), "{pair}");
    assert!(pair.contains("404"), "{pair}");
    let text = browser.main_text().await;
    for section in ["Hosted agents", "OTLP ingest", "Query (q/1)", "Self-update", "OpenAPI"] {
        assert!(text.contains(section), "{section}");
    }
    assert_no_console_errors(&browser, "/docs").await;
    browser.screenshot("docs").await;
    browser.resize(390, 800).await;
    browser.screenshot("docs-390").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_gate_signs_a_browser_in_and_out() {
    if Browser::skipped() {
        return;
    }
    let server =
        TestServer::start_with(Backend::Sqlite, |c| c.access.api_tokens = vec!["browser-token-9".into()]).await;
    let browser = Browser::start().await;
    browser.open(&server.url("/dashboard/usage")).await;
    assert!(browser.client.current_url().await.unwrap().path().ends_with("/dashboard/signin"));
    browser.screenshot("signin").await;
    let field = browser.client.find(Locator::Css("input[name=token]")).await.unwrap();
    field.send_keys("wrong").await.unwrap();
    browser.client.find(Locator::Css("form button[type=submit]")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("not one of this roost's", Duration::from_secs(10)).await.unwrap();
    let field = browser.client.find(Locator::Css("input[name=token]")).await.unwrap();
    field.send_keys("browser-token-9").await.unwrap();
    browser.client.find(Locator::Css("main form button[type=submit]")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("Usage", Duration::from_secs(10)).await.unwrap();
    assert_eq!(browser.client.current_url().await.unwrap().path(), "/dashboard/usage");
    // The live page's stream is opened with the cookie (EventSource sends no header).
    browser.open(&server.url("/dashboard/live")).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while browser.text_of(".feed-state").await != "Live" {
        assert!(tokio::time::Instant::now() < deadline, "the stream did not open with the cookie");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser.client.find(Locator::Css("form.signout button")).await.unwrap().click().await.unwrap();
    browser.wait_for_text("Sign in to the dashboard", Duration::from_secs(10)).await.unwrap();
    browser.open(&server.url("/dashboard")).await;
    assert!(browser.client.current_url().await.unwrap().path().ends_with("/dashboard/signin"));
    // The wrong-token attempt was a 401 answer, which Chromium logs; nothing else.
    let errors = browser.console_errors().await;
    assert!(errors.iter().all(|e| e.contains("401")), "{errors:#?}");
    browser.close().await;
}
