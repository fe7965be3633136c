//! `/dashboard/evaluators` and `/dashboard/evaluators/{id}` in a real browser: an LLM judge
//! made by the page's form (typed, sent with Enter) on a fake judge upstream is listed; a
//! tiny budget set by its page's form is spent by one judged call, and both pages say so
//! plainly; it is paused, resumed and given more budget from its page, its judgement links
//! the call's span on the trace page, and it is deleted after the confirmation. Without a
//! browser: the footer's API calls, a bad sample rate, a missing evaluator and a post
//! without the form key.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fantoccini::{Locator, key::Key};
use reqwest::StatusCode;
use roost_server::llm::Upstream;
use roost_tests::{
    Api, Backend, TestServer,
    browser::Browser,
    each_backend,
    fake_judge::{FakeJudge, JUDGE_MODEL},
    pages::Visitor,
};
use serde_json::{Value, json};

use super::{post_without_csrf, refused, row};

each_backend!(an_evaluator_is_made_on_the_page_spends_its_budget_and_is_paused);

/// The session of the calls the evaluator judges (its filter).
const SESSION: &str = "s-evaluator-page";

/// One model call of the app, a trace of its own (`tag` tells them apart), in [`SESSION`]:
/// its trace and span ids as the pages write them.
async fn call(server: &TestServer, tag: u8) -> (String, String) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let (trace, span) = (format!("{tag:02x}").repeat(16), format!("{:016x}", u64::from(tag) + 1));
    let text = |key: &str, value: &str| json!({"key": key, "value": {"stringValue": value}});
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [text("service.name", "app")]},
        "scopeSpans": [{"spans": [{
            "traceId": trace,
            "spanId": span,
            "name": "chat m-app",
            "kind": 3,
            "startTimeUnixNano": (now - 2_000_000).to_string(),
            "endTimeUnixNano": now.to_string(),
            "attributes": [
                text("gen_ai.operation.name", "chat"),
                text("gen_ai.request.model", "m-app"),
                text("session.id", SESSION),
                text("gen_ai.input.messages", r#"[{"role":"user","parts":[{"type":"text","content":"2+2?"}]}]"#),
                text("gen_ai.output.messages", r#"[{"role":"assistant","parts":[{"type":"text","content":"4"}]}]"#),
            ],
        }]}],
    }]});
    let reply =
        crate::observe::post_otlp(server, "/v1/traces", "application/json", body.to_string().into_bytes()).await;
    assert_eq!(reply.status(), 200);
    (trace, span)
}

/// The evaluator as `GET /api/v1/evaluators/{id}` has it, once `done` says so (30 s at
/// most).
async fn evaluator_when(api: &Api, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let detail = api.get(&format!("/api/v1/evaluators/{id}")).await.ok();
        if done(&detail) {
            return detail;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}: {detail}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the browser's page shows `needle`.
async fn shows(browser: &Browser, needle: &str) {
    browser
        .wait_for_text(needle, Duration::from_secs(10))
        .await
        .unwrap_or_else(|text| panic!("the page never said {needle:?}: {text}"));
}

/// Types `text` into the field `css`.
async fn fill(browser: &Browser, css: &str, text: &str) {
    let field = browser.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

async fn an_evaluator_is_made_on_the_page_spends_its_budget_and_is_paused(backend: Backend) {
    if Browser::skipped() {
        return;
    }
    let judge = FakeJudge::start().await;
    let upstream = judge.base_url();
    let server = TestServer::start_with(backend, move |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: None });
        config.evaluations_every = Duration::from_millis(50);
    })
    .await;
    let api = server.api(None);
    let mut visitor = Visitor::new(&server);

    // Without a browser: the empty list, its footer, and the nav entry marked.
    let empty = visitor.get("/dashboard/evaluators").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.texts("h1"), ["Evaluators"]);
    assert_eq!(empty.backed_by(), ["GET /api/v1/evaluators"]);
    assert_eq!(empty.attrs("nav a[aria-current=page]", "href"), ["/dashboard/evaluators"]);
    assert!(empty.main_text().contains("No evaluators yet"), "{}", empty.main_text());

    // The form, typed in a browser and sent with Enter.
    let browser = Browser::start().await;
    browser.open(&server.url("/dashboard/evaluators")).await;
    shows(&browser, "No evaluators yet").await;
    fill(&browser, "#ev-name", "correctness").await;
    fill(&browser, "#ev-model", JUDGE_MODEL).await;
    fill(&browser, "#ev-prompt", "Question: {{input}}\nAnswer: {{output}}\nGrade it from 0 to 1 as `score: N`.").await;
    fill(&browser, "#ev-sample", "100").await;
    fill(&browser, "#ev-session", SESSION).await;
    fill(&browser, "#ev-budget", "1").await;
    browser.screenshot("evaluators-new").await;
    let budget = browser.client.find(Locator::Css("#ev-budget")).await.unwrap();
    budget.send_keys(&Key::Enter.to_string()).await.unwrap();
    // Made: its own page, with the notice.
    shows(&browser, "Evaluator “correctness”").await;
    let listed = api.get("/api/v1/evaluators").await.ok();
    let made = listed["evaluators"][0].clone();
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&made["model"], &made["sample_rate"], &made["budget_usd"], &made["status"], &made["filter"]["session_id"]),
        (&json!(JUDGE_MODEL), &json!(1.0), &json!(1.0), &json!("active"), &json!(SESSION)),
        "{made}"
    );
    assert_eq!(made["prompt"], "Question: {{input}}\nAnswer: {{output}}\nGrade it from 0 to 1 as `score: N`.");
    let here = browser.client.current_url().await.unwrap();
    assert_eq!(here.path(), format!("/dashboard/evaluators/{id}"));
    shows(&browser, "No call judged yet").await;

    // Listed: name, judge model, status, sample rate, counts, spending.
    let page = visitor.get("/dashboard/evaluators").await;
    let listed = row(&page, "table.evaluators", "correctness");
    assert_eq!(listed[1], JUDGE_MODEL);
    assert_eq!(listed[3..7], ["100%", "0", "0", "$0 / $1.00"], "{listed:?}");
    assert!(listed[2].starts_with("active Judging 100 % of new matching calls"), "{listed:?}");
    assert!(page.texts("p.warning").is_empty());

    // A tiny budget, set with its page's form: less than one judge call costs.
    fill(&browser, "#ev-budget", "0.00001").await;
    browser.client.find(Locator::Css("#change button[type=submit]")).await.unwrap().click().await.unwrap();
    shows(&browser, "Evaluator “correctness” updated.").await;
    let detail = api.get(&format!("/api/v1/evaluators/{id}")).await.ok();
    assert_eq!(detail["evaluator"]["budget_nanocents"], 1_000_000, "{detail}");

    // One call: judged, and the budget is spent.
    let (trace, span) = call(&server, 0x51).await;
    evaluator_when(&api, &id, "the budget to be spent", |d| d["evaluator"]["status"] == "budget_spent").await;
    browser.open(&server.url(&format!("/dashboard/evaluators/{id}"))).await;
    let chip = browser.text_of("h1 .chip").await;
    assert_eq!(chip.to_lowercase(), "budget spent");
    let warning = browser.text_of("p.warning").await;
    assert!(warning.starts_with("Budget spent.") && warning.contains("budget is raised"), "{warning}");
    let spending = browser.text_of("p.spending").await;
    assert_eq!(spending, "$0.000021 of $0.00001 spent (100%)");
    // The judgement, linked to the call's span on its trace page.
    let judgement = browser.text_of("table.judgements tbody tr").await;
    assert!(
        judgement.to_lowercase().contains("judged") && judgement.contains("0.8") && judgement.contains("$0.000021"),
        "{judgement}"
    );
    let link = browser.client.find(Locator::Css("table.judgements tbody a")).await.unwrap();
    assert_eq!(link.attr("href").await.unwrap().unwrap(), format!("/dashboard/traces/{trace}?span={span}"));
    browser.screenshot("evaluator-budget-spent").await;
    browser.client.execute("document.querySelector('table.judgements').scrollIntoView();", vec![]).await.unwrap();
    browser.screenshot("evaluator-judgements").await;
    browser.resize(390, 844).await;
    browser.screenshot("evaluator-budget-spent-390").await;
    let wide = browser.client.execute("return document.documentElement.scrollWidth;", vec![]).await.unwrap();
    assert!(wide.as_f64().unwrap() <= 390.0, "the page is {wide} px wide at 390");
    browser.resize(1280, 800).await;
    // The link opens the trace page with the judged call selected.
    browser.client.find(Locator::Css("table.judgements tbody a")).await.unwrap().click().await.unwrap();
    let selected = browser.text_of("tr[aria-current=true]").await;
    assert!(selected.contains("chat m-app"), "{selected}");
    assert_eq!(browser.client.current_url().await.unwrap().path(), format!("/dashboard/traces/{trace}"));

    // The list says it too, above the table and in the row.
    browser.open(&server.url("/dashboard/evaluators")).await;
    let warning = browser.text_of("p.warning").await;
    assert!(warning.starts_with("One evaluator has spent its budget"), "{warning}");
    let listed = row(&visitor.get("/dashboard/evaluators").await, "table.evaluators", "correctness");
    assert!(listed[2].starts_with("Budget spent Its budget of"), "{listed:?}");
    assert_eq!(listed[4..7], ["1", "0", "$0.000021 / $0.00001"], "{listed:?}");
    browser.screenshot("evaluators-budget-spent").await;
    browser.resize(390, 844).await;
    browser.screenshot("evaluators-budget-spent-390").await;
    let wide = browser.client.execute("return document.documentElement.scrollWidth;", vec![]).await.unwrap();
    assert!(wide.as_f64().unwrap() <= 390.0, "the list is {wide} px wide at 390");
    browser.resize(1280, 800).await;

    // Paused from its page (a click), then resumed from the keyboard: resuming says the
    // budget is still spent.
    browser.open(&server.url(&format!("/dashboard/evaluators/{id}"))).await;
    browser.client.find(Locator::Css("form.pause button")).await.unwrap().click().await.unwrap();
    shows(&browser, "Evaluator “correctness” paused.").await;
    assert_eq!(browser.text_of("h1 .chip").await.to_lowercase(), "paused");
    shows(&browser, "Its budget is spent as well").await;
    let paused = api.get(&format!("/api/v1/evaluators/{id}")).await.ok();
    assert_eq!((&paused["evaluator"]["status"], &paused["evaluator"]["enabled"]), (&json!("paused"), &json!(false)));
    browser.screenshot("evaluator-paused").await;
    let resume = browser.client.find(Locator::Css("form.pause button")).await.unwrap();
    assert_eq!(resume.text().await.unwrap(), "Resume");
    resume.send_keys(&Key::Enter.to_string()).await.unwrap();
    shows(&browser, "resumed, but its budget is spent").await;

    // More budget: it judges again.
    fill(&browser, "#ev-budget", "1").await;
    let save = browser.client.find(Locator::Css("#change button[type=submit]")).await.unwrap();
    save.send_keys(&Key::Enter.to_string()).await.unwrap();
    shows(&browser, "Evaluator “correctness” updated.").await;
    assert_eq!(browser.text_of("h1 .chip").await.to_lowercase(), "active");
    call(&server, 0x52).await;
    evaluator_when(&api, &id, "a second judgement", |d| d["evaluator"]["judged"] == 2).await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // Without a browser: what the page stands for, and what it refuses.
    let page = visitor.get(&format!("/dashboard/evaluators/{id}")).await;
    assert_eq!(page.backed_by(), [format!("GET /api/v1/evaluators/{id}")]);
    let (status, text) =
        refused(visitor.post_form(&format!("/dashboard/evaluators/{id}"), &[("sample_rate", "150")]).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("Nothing was changed") && text.contains("percentage"), "{text}");
    let (status, text) = refused(
        visitor
            .post_form("/dashboard/evaluators", &[("name", "x"), ("model", JUDGE_MODEL), ("prompt", "no placeholder")])
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a budget is required: {text}");
    let missing = visitor.get("/dashboard/evaluators/ev_nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.main_text().contains("No such evaluator"), "{}", missing.main_text());
    assert_eq!(
        post_without_csrf(&server, &visitor, &format!("/dashboard/evaluators/{id}"), &[("enabled", "false")]).await,
        403
    );
    assert_eq!(post_without_csrf(&server, &visitor, &format!("/dashboard/evaluators/{id}/delete"), &[]).await, 403);
    let still = api.get(&format!("/api/v1/evaluators/{id}")).await.ok();
    assert_eq!((&still["evaluator"]["enabled"], &still["evaluator"]["sample_rate"]), (&json!(true), &json!(1.0)));

    // Deleted after the confirmation.
    browser.open(&server.url(&format!("/dashboard/evaluators/{id}"))).await;
    browser.client.find(Locator::Css("button.danger")).await.unwrap().click().await.unwrap();
    browser.client.accept_alert().await.unwrap();
    shows(&browser, &format!("Evaluator {id} deleted")).await;
    shows(&browser, "No evaluators yet").await;
    api.get(&format!("/api/v1/evaluators/{id}")).await.err(404, "not_found");
    browser.close().await;
}
