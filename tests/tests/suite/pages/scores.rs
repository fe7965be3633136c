//! Scores and human feedback on the pages: the operator scores a model call and a trace in
//! a real browser (clicks and the keyboard), and a session with plain form posts (no
//! JavaScript); the scores land as `human` on the right target, giving one again replaces
//! it, the list pages show and filter them, and a post without the form key changes nothing.

use std::time::Duration;

use fantoccini::{Locator, key::Key};
use reqwest::{StatusCode, header};
use roost_tests::{
    Backend, TestServer,
    browser::Browser,
    each_backend,
    pages::{Visitor, location},
};
use serde_json::{Map, Value, json};

use super::sessions::{chat, now_ns, send_spans, span, string};

each_backend!(
    scores_given_on_the_trace_page_land_on_the_call_and_the_trace,
    a_session_takes_feedback_without_javascript_and_the_lists_filter_by_score,
);

/// The trace of the tests: a root span and a model call (span 2) with its messages, in
/// session `session`.
async fn send_trace(server: &TestServer, trace: u8, session: &str, question: &str, answer: &str) {
    let start = now_ns() - 5_000_000_000;
    let mut call = chat(session, "gpt-4o", 300, 40);
    call.push(string(
        "gen_ai.input.messages",
        &json!([{"role": "user", "parts": [{"type": "text", "content": question}]}]).to_string(),
    ));
    call.push(string(
        "gen_ai.output.messages",
        &json!([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]).to_string(),
    ));
    send_spans(
        server,
        "helpdesk",
        vec![
            span(trace, 1, 0, "answer question", start, 900, vec![string("session.id", session)]),
            span(trace, 2, 1, "chat gpt-4o", start + 100_000_000, 700, call),
        ],
    )
    .await;
}

/// The call's span id as the pages write it.
fn call_id() -> String {
    hex::encode(2u64.to_be_bytes())
}

/// The scores `GET /api/v1/scores?{query}` lists.
async fn scores(server: &TestServer, query: &str) -> Vec<Map<String, Value>> {
    let reply = server.api(None).get(&format!("/api/v1/scores?{query}")).await.ok();
    reply["scores"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.as_object().unwrap().clone())
        .collect()
}

/// The first score named `name` of `list`.
fn named<'a>(list: &'a [Map<String, Value>], name: &str) -> Vec<&'a Map<String, Value>> {
    list.iter().filter(|s| s["name"] == name).collect()
}

/// Waits until the browser's page shows `needle`.
async fn shows(browser: &Browser, needle: &str) {
    browser
        .wait_for_text(needle, Duration::from_secs(10))
        .await
        .unwrap_or_else(|text| panic!("the page never said {needle:?}: {text}"));
}

async fn scores_given_on_the_trace_page_land_on_the_call_and_the_trace(backend: Backend) {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start(backend).await;
    send_trace(&server, 7, "sess-rate-1", "Which city hosts the Louvre?", "The Louvre is in Lyon.").await;
    send_trace(&server, 8, "sess-rate-2", "Capital of Italy?", "Rome.").await;
    let trace = hex::encode([7u8; 16]);
    let call = call_id();

    let browser = Browser::start().await;
    browser.open(&server.url(&format!("/dashboard/traces/{trace}?span={call}"))).await;
    shows(&browser, "Your feedback on this call").await;
    shows(&browser, "No scores on this trace yet").await;

    // A thumbs up for the model call, from the span panel.
    browser.client.find(Locator::Css("#span-feedback button.thumb.up")).await.unwrap().click().await.unwrap();
    shows(&browser, "Saved on the call: thumbs up.").await;
    let pressed = browser.text_of("#span-feedback button.thumb[aria-pressed=true]").await;
    assert_eq!(pressed, "Thumbs up");
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.fragment(), Some("span-feedback"), "back where the form was: {url}");
    assert_eq!(url.query().unwrap_or_default().matches("done=").count(), 1, "one notice: {url}");

    // A label and a comment for the trace, by the keyboard: type, pick, press Enter.
    let label = browser.client.find(Locator::Css("#trace-feedback select[name=label]")).await.unwrap();
    label.select_by_value("incorrect").await.unwrap();
    let comment = browser.client.find(Locator::Css("#trace-feedback textarea[name=comment]")).await.unwrap();
    comment.send_keys("Wrong city: the Louvre is in Paris.").await.unwrap();
    let save = browser.client.find(Locator::Css("#trace-feedback form.feedback-details button")).await.unwrap();
    save.send_keys(&Key::Enter.to_string()).await.unwrap();
    shows(&browser, "Saved on the trace: label incorrect.").await;
    shows(&browser, "Wrong city: the Louvre is in Paris.").await;
    browser.screenshot("scores-trace").await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // Both landed as `human` on their own targets.
    let given = scores(&server, &format!("trace_id={trace}")).await;
    assert_eq!(given.len(), 2, "{given:#?}");
    let thumbs = named(&given, "thumbs");
    assert_eq!(thumbs.len(), 1);
    assert_eq!(
        (&thumbs[0]["target"], &thumbs[0]["span_id"], &thumbs[0]["value"], &thumbs[0]["source"]),
        (&json!("span"), &json!(call), &json!(true), &json!("human"))
    );
    assert_eq!(thumbs[0]["author"], "operator");
    let label = named(&given, "label");
    assert_eq!(
        (&label[0]["target"], &label[0]["value"], &label[0]["comment"], &label[0]["source"]),
        (&json!("trace"), &json!("incorrect"), &json!("Wrong city: the Louvre is in Paris."), &json!("human"))
    );
    assert_eq!(label[0]["session_id"], "sess-rate-1", "roost found the trace's session");

    // Changing one's mind replaces the score: thumbs down, still one thumbs score.
    browser.client.find(Locator::Css("#span-feedback button.thumb.down")).await.unwrap().click().await.unwrap();
    shows(&browser, "Saved on the call: thumbs down.").await;
    let given = scores(&server, &format!("trace_id={trace}")).await;
    let thumbs = named(&given, "thumbs");
    assert_eq!(thumbs.len(), 1, "{given:#?}");
    assert_eq!(thumbs[0]["value"], false);
    // The reply in the conversation carries the same call's thumbs, pressed the same way.
    assert_eq!(browser.text_of(&format!("#msg-{call}-feedback button.thumb[aria-pressed=true]")).await, "Thumbs down");
    // The scores table marks the call's score with the span it judges.
    let table = browser.text_of("table.scores").await;
    assert!(table.contains("chat gpt-4o") && table.contains("this trace"), "{table}");
    browser.screenshot("scores-trace-changed").await;

    // Back to thumbs up from the conversation's reply (q/1 reads it the same).
    browser
        .client
        .find(Locator::Css(&format!("#msg-{call}-feedback button.thumb.up")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shows(&browser, "Saved on the call: thumbs up.").await;
    let rows = crate::observe::q1(
        &server.api(None),
        "score_list",
        json!({"trace_id": trace, "name": "thumbs", "source": "human"}),
    )
    .await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((&rows[0]["value"], &rows[0]["target"]), (&json!(true), &json!("span")));

    // The list shows the scores and filters by them.
    browser.open(&server.url("/dashboard/traces")).await;
    shows(&browser, "label incorrect · thumbs 1").await;
    browser.screenshot("scores-traces").await;
    // The session page shows the trace's and the call's scores as its own, marked.
    browser.open(&server.url("/dashboard/sessions/sess-rate-1")).await;
    shows(&browser, "Your feedback on this session").await;
    let table = browser.text_of("table.scores").await;
    assert!(table.contains("incorrect") && table.contains("call gpt-4o"), "{table}");
    browser.screenshot("scores-session").await;
    // At phone width the form sits above the table, both the screen's width.
    browser.resize(390, 800).await;
    browser.open(&server.url(&format!("/dashboard/traces/{trace}#trace-feedback"))).await;
    shows(&browser, "Your feedback on this trace").await;
    let wide = browser.client.execute("return document.documentElement.scrollWidth;", vec![]).await.unwrap();
    assert_eq!(wide.as_u64(), Some(390), "nothing wider than the phone");
    browser.screenshot("scores-trace-phone").await;
    let mut visitor = Visitor::new(&server);
    let filtered = visitor.get("/dashboard/traces?score=thumbs%3Dtrue").await;
    assert_eq!(filtered.texts("table.traces tbody td:first-child a"), ["answer question"]);
    assert_eq!(filtered.attrs("table.traces tbody td:first-child a", "href"), [format!("/dashboard/traces/{trace}")]);
    assert_eq!(filtered.attrs("input[name=score]", "value"), ["thumbs=true"]);
    assert!(
        filtered.attrs("p.export a", "href").iter().all(|h| h.contains("score=thumbs%3Dtrue")),
        "the export keeps the filter: {:?}",
        filtered.attrs("p.export a", "href")
    );
    let all = visitor.get("/dashboard/traces").await;
    assert_eq!(all.texts("table.traces tbody td.scores-cell"), ["", "label incorrect · thumbs 1"]);

    // A post without the form key changes nothing.
    visitor.get(&format!("/dashboard/traces/{trace}")).await;
    let cookie = visitor.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
    let forged = server
        .http
        .post(server.url(&format!("/dashboard/traces/{trace}/feedback")))
        .header(header::COOKIE, cookie)
        .header(header::ORIGIN, server.url("").trim_end_matches('/'))
        .form(&[("span", call.as_str()), ("thumbs", "down")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let given = scores(&server, &format!("trace_id={trace}")).await;
    assert_eq!(named(&given, "thumbs")[0]["value"], true, "unchanged: {given:#?}");
    browser.close().await;
}

async fn a_session_takes_feedback_without_javascript_and_the_lists_filter_by_score(backend: Backend) {
    let server = TestServer::start_with(backend, |config| {
        config.gateway.feedback_labels = vec!["helpful".into(), "rude".into()];
    })
    .await;
    send_trace(&server, 9, "sess-kind", "Hello?", "Hi, how can I help?").await;
    send_trace(&server, 10, "sess-other", "Hello?", "Go away.").await;
    let path = "/dashboard/sessions/sess-kind";
    let mut visitor = Visitor::new(&server);
    let page = visitor.get(path).await;
    assert_eq!(page.status, StatusCode::OK);
    // The configured labels are offered, and every form works without a script.
    assert_eq!(page.attrs("#session-feedback select[name=label] option", "value"), ["", "helpful", "rude"]);
    assert_eq!(page.attrs("#session-feedback form", "method"), ["post", "post"]);
    assert_eq!(
        page.attrs(&format!("#msg-{}-feedback form.thumbs", call_id()), "action"),
        [format!("/dashboard/traces/{}/feedback", hex::encode([9u8; 16]))]
    );

    // A rating, a label and a comment.
    let action = "/dashboard/sessions/sess-kind/feedback";
    let back = format!("{path}#session-feedback");
    let fields =
        [("details", "1"), ("rating", "4"), ("label", "helpful"), ("comment", "Polite and quick."), ("back", &back)];
    let answer = visitor.post_form(action, &fields).await;
    let to = location(&answer);
    assert!(to.starts_with("/dashboard/sessions/sess-kind?done=") && to.ends_with("#session-feedback"), "{to}");
    let page = visitor.get(to.split('#').next().unwrap()).await;
    assert!(page.texts("p.notice").join(" ").contains("Saved on the session: rating 4, label helpful."));
    let rows = page.texts("table.scores tbody tr");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.contains("this session") && r.contains("human") && r.contains("operator")));
    assert!(rows.iter().any(|r| r.starts_with("rating 4") && r.contains("Polite and quick.")), "{rows:?}");
    // The form shows what was given.
    assert_eq!(page.attrs("#session-feedback input[name=rating][checked]", "value"), ["4"]);
    assert_eq!(page.attrs("#session-feedback option[selected]", "value"), ["helpful"]);
    assert_eq!(page.texts("#session-feedback textarea"), ["Polite and quick."]);

    // Given again: replaced, not added.
    let fields = [("details", "1"), ("rating", "5"), ("label", "helpful"), ("comment", "Better.")];
    location(&visitor.post_form(action, &fields).await);
    let given = scores(&server, "session_id=sess-kind").await;
    assert_eq!(given.len(), 2, "{given:#?}");
    assert_eq!(named(&given, "rating")[0]["value"], 5.0);
    assert_eq!(named(&given, "rating")[0]["target"], "session");

    // What the form refuses changes nothing: a label not offered, a lone comment.
    let refused = visitor.post_form(action, &[("details", "1"), ("label", "sarcastic")]).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert!(refused.text().await.unwrap().contains("not one of the labels offered"));
    let refused = visitor.post_form(action, &[("details", "1"), ("comment", "just words")]).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert_eq!(scores(&server, "session_id=sess-kind").await.len(), 2);

    // The lists show the scores and filter by them; the export links keep the filter.
    let list = visitor.get("/dashboard/sessions").await;
    let cells: Vec<(String, String)> = list
        .texts("table.sessions tbody td:first-child")
        .into_iter()
        .zip(list.texts("table.sessions tbody td.scores-cell"))
        .collect();
    assert!(cells.contains(&("sess-kind".into(), "label helpful · rating 5".into())), "{cells:?}");
    assert!(cells.contains(&("sess-other".into(), String::new())), "{cells:?}");
    let filtered = visitor.get("/dashboard/sessions?score=rating%3E%3D4").await;
    assert_eq!(filtered.texts("table.sessions tbody td:first-child"), ["sess-kind"]);
    assert!(filtered.attrs("p.export a", "href").iter().all(|h| h.contains("score=rating%3E%3D4")));
    assert!(visitor.get("/dashboard/sessions?score=rating%3E5").await.texts("table.sessions tbody tr").is_empty());
    let bad = visitor.get("/dashboard/sessions?score=rating%3Ehigh").await;
    assert!(bad.texts(".failed").join(" ").contains("invalid_argument"), "{}", bad.main_text());

    // Clearing the rating takes it back; the label stays.
    location(&visitor.post_form(action, &[("details", "1"), ("rating", ""), ("label", "helpful")]).await);
    let given = scores(&server, "session_id=sess-kind").await;
    assert_eq!(given.iter().map(|s| s["name"].as_str().unwrap()).collect::<Vec<_>>(), ["label"]);
    // A call's thumbs from the session page land on the call, and show there.
    let trace = hex::encode([9u8; 16]);
    let fields = [("span", call_id()), ("thumbs", "down".into()), ("back", path.into())];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let to = location(&visitor.post_form(&format!("/dashboard/traces/{trace}/feedback"), &fields).await);
    assert!(to.starts_with("/dashboard/sessions/sess-kind?done="), "{to}");
    let page = visitor.get(path).await;
    assert_eq!(page.texts(&format!("#msg-{}-feedback button.thumb[aria-pressed=true]", call_id())), ["Thumbs down"]);
    let rows = page.texts("table.scores tbody tr");
    assert!(rows.iter().any(|r| r.starts_with("thumbs false span call gpt-4o")), "{rows:?}");
}
