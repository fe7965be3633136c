//! `/dashboard/datasets`, `/dashboard/datasets/{id}`, `/dashboard/experiments/{id}` and
//! `/dashboard/experiments/compare` in a real browser: a dataset typed into the page's form
//! as JSON Lines is run from its page against an `echo` agent (which answers `[<brief>]
//! <message>`), once on the agent itself and once on a temporary copy with another brief;
//! each run's page reloads itself until it has completed and then shows its pass rates and
//! answers; the two runs, ticked on the dataset's page, compare side by side with the items
//! whose checks differ marked. The agent's conversation is added to a new dataset from its
//! session's page, which is then deleted after the confirmation. Without a browser: the
//! footers, items added by the form, bad items, runs of different datasets refused, missing
//! pages, posts without the form key, and a long run cancelled from its page.

use std::time::Duration;

use fantoccini::Locator;
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

use super::{agent, follow, notice, post_without_csrf, refused, row, rows};

each_backend!(a_dataset_made_on_the_page_runs_twice_and_the_runs_compare);

/// The brief `agent` provisions with: echo's answers start with it.
const BRIEF: &str = "a page test's agent";

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

/// Clicks the element `css`.
async fn click(browser: &Browser, css: &str) {
    let element = browser.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
    element.click().await.unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

/// The path of the browser's page.
async fn path(browser: &Browser) -> String {
    browser.client.current_url().await.unwrap().path().to_owned()
}

/// Waits (the page reloading itself) until the experiment page in the browser says the
/// run has completed (45 s at most).
async fn completes(browser: &Browser) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(45);
    loop {
        let chip = browser.text_of("h1 .chip").await.to_lowercase();
        if chip == "completed" {
            return;
        }
        assert!(
            !matches!(chip.as_str(), "failed" | "cancelled"),
            "the run ended {chip}: {}",
            browser.main_text().await
        );
        assert!(tokio::time::Instant::now() < deadline, "the run never completed: {}", browser.main_text().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Runs the dataset open in the browser against `agent` with the run form, a `brief` for
/// a copy when given, exact match and contains checked, graded by `evaluator` when given;
/// the new experiment's id, once its page says it has completed.
async fn run(browser: &Browser, agent: &str, brief: Option<&str>, evaluator: Option<&str>) -> String {
    let select = browser.client.find(Locator::Css("#ex-agent")).await.unwrap();
    select.select_by_value(agent).await.unwrap();
    if let Some(brief) = brief {
        fill(browser, "#ex-brief", brief).await;
    }
    if let Some(evaluator) = evaluator {
        click(browser, &format!("#run input[name=evaluator][value={evaluator}]")).await;
    }
    // Exact match is ticked already; contains the expected output too.
    click(browser, "#run input[name=check_contains]").await;
    click(browser, "#run button[type=submit]").await;
    shows(browser, "Experiment “").await;
    let here = path(browser).await;
    let id = here.strip_prefix("/dashboard/experiments/").unwrap_or_else(|| panic!("on {here}")).to_owned();
    completes(browser).await;
    id
}

/// Page width check: the document does not scroll sideways at `width`.
async fn fits(browser: &Browser, width: u32, what: &str) {
    let wide = browser.client.execute("return document.documentElement.scrollWidth;", vec![]).await.unwrap();
    if wide.as_f64().unwrap() > f64::from(width) {
        // The elements that stick out, innermost first, to say what to fix.
        let out = browser
            .client
            .execute(
                "return [...document.querySelectorAll('main *')]\
                   .filter(e => e.getBoundingClientRect().right > window.innerWidth)\
                   .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().width))\
                   .reverse().slice(0, 8);",
                vec![],
            )
            .await
            .unwrap();
        panic!("{what} is {wide} px wide at {width}: {out}");
    }
}

/// Screenshots the browser's page at desktop width and at a phone's, checking it fits.
async fn screenshots(browser: &Browser, name: &str) {
    browser.screenshot(name).await;
    browser.resize(390, 844).await;
    fits(browser, 390, name).await;
    browser.screenshot(&format!("{name}-390")).await;
    browser.resize(1280, 800).await;
}

async fn experiment(api: &Api, id: &str) -> Value {
    api.get(&format!("/api/v1/experiments/{id}")).await.ok()
}

async fn a_dataset_made_on_the_page_runs_twice_and_the_runs_compare(backend: Backend) {
    if Browser::skipped() {
        return;
    }
    // A judge upstream for the evaluator that grades the first run.
    let judge = FakeJudge::start().await;
    let upstream = judge.base_url();
    let server = TestServer::start_with(backend, move |config| {
        config.hosting.models.openai = Some(Upstream { base_url: upstream, api_key: None });
    })
    .await;
    let api = server.api(None);
    let mut visitor = Visitor::new(&server);
    let (agent_id, _owner) = agent(&server, "echo").await;

    // Without a browser: the empty list, its footer, and the nav entry marked.
    let empty = visitor.get("/dashboard/datasets").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.texts("h1"), ["Datasets"]);
    assert_eq!(empty.backed_by(), ["GET /api/v1/datasets", "GET /api/v1/experiments"]);
    assert_eq!(empty.attrs("nav a[aria-current=page]", "href"), ["/dashboard/datasets"]);
    assert!(empty.main_text().contains("No datasets yet"), "{}", empty.main_text());

    // The new-dataset form, typed in a browser: three items as JSON Lines. Echo answers the
    // first two exactly as expected; the third's expected output is only inside its answer.
    let browser = Browser::start().await;
    browser.open(&server.url("/dashboard/datasets")).await;
    shows(&browser, "No datasets yet").await;
    fill(&browser, "#ds-name", "greetings").await;
    fill(&browser, "#ds-description", "Hellos in three languages.").await;
    let lines = [
        json!({"input": "hello", "expected": format!("[{BRIEF}] hello")}),
        json!({"input": "bonjour", "expected": format!("[{BRIEF}] bonjour"), "metadata": {"lang": "fr"}}),
        json!({"input": "hola", "expected": "hola"}),
    ];
    let jsonl = lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    fill(&browser, "#ds-items", &jsonl).await;
    browser.screenshot("datasets-new").await;
    click(&browser, "form.evaluator button[type=submit]").await;
    shows(&browser, "Dataset “greetings” created with 3 items.").await;
    let listed = api.get("/api/v1/datasets").await.ok();
    let dataset_id = listed["datasets"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(path(&browser).await, format!("/dashboard/datasets/{dataset_id}"));
    let detail = api.get(&format!("/api/v1/datasets/{dataset_id}")).await.ok();
    let inputs: Vec<&str> = detail["items"].as_array().unwrap().iter().map(|i| i["input"].as_str().unwrap()).collect();
    assert_eq!(inputs, ["hello", "bonjour", "hola"], "{detail}");
    assert_eq!(detail["items"][1]["metadata"], json!({"lang": "fr"}));
    assert_eq!(detail["dataset"]["description"], "Hellos in three languages.");

    let (hello, bonjour, hola) = (format!("[{BRIEF}] hello"), format!("[{BRIEF}] bonjour"), format!("[{BRIEF}] hola"));

    // Its page: the items, the run form offering the agent, its footer.
    let page = visitor.get(&format!("/dashboard/datasets/{dataset_id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(
        rows(&page, "table.items"),
        [
            vec!["1", "hello", hello.as_str(), "–", "jsonl"],
            vec!["2", "bonjour", bonjour.as_str(), r#"{"lang":"fr"}"#, "jsonl"],
            vec!["3", "hola", "hola", "–", "jsonl"],
        ]
    );
    assert_eq!(page.attrs("select[name=agent_id] option", "value"), ["", agent_id.as_str()]);
    assert_eq!(
        page.backed_by(),
        [
            format!("GET /api/v1/datasets/{dataset_id}"),
            format!("GET /api/v1/experiments?dataset_id={dataset_id}"),
            "GET /api/v1/evaluators".to_owned(),
            "GET /api/channels".to_owned(),
        ]
    );
    assert!(page.main_text().contains("No experiment has run this dataset yet"), "{}", page.main_text());
    browser.screenshot("dataset").await;

    // An evaluator (judging no model call of its own: its filter matches none).
    let evaluator = api
        .post(
            "/api/v1/evaluators",
            json!({"evaluator": {
                "name": "correctness",
                "model": JUDGE_MODEL,
                "prompt": "Question: {{input}}\nAnswer: {{output}}\nGrade it from 0 to 1 as `score: N`.",
                "budget_usd": 1.0,
                "filter": {"session_id": "no-such-session"},
            }}),
        )
        .await
        .ok();
    let evaluator = evaluator["evaluator"]["id"].as_str().unwrap().to_owned();
    browser.open(&server.url(&format!("/dashboard/datasets/{dataset_id}"))).await;
    let offered = browser.text_of(&format!("#run label:has(input[value={evaluator}])")).await;
    assert_eq!(offered, format!("correctness · {JUDGE_MODEL}"));

    // Run A, on the agent itself, graded by the evaluator: its page reloads itself until
    // the run has completed.
    let first = run(&browser, &agent_id, None, Some(&evaluator)).await;
    let done = experiment(&api, &first).await;
    assert_eq!(done["experiment"]["status"], "completed", "{done}");
    assert_eq!((&done["experiment"]["completed"], &done["experiment"]["copy"]), (&json!(3), &json!(false)));
    let results = rows(&visitor.get(&format!("/dashboard/experiments/{first}")).await, "table.results");
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0][3], hello, "{results:?}");
    // Checks in the experiment's order (the form's: exact match, then contains).
    assert_eq!(results[0][5], "✓ exact match ✓ contains expected", "{results:?}");
    assert_eq!(results[2][5], "✗ exact match ✓ contains expected", "{results:?}");
    let page = visitor.get(&format!("/dashboard/experiments/{first}")).await;
    assert_eq!(
        page.attrs("table.results tbody tr:nth-child(3) .chip[role=img]", "aria-label"),
        ["failed", "passed"],
        "a screen reader hears pass or fail, not a symbol"
    );
    assert_eq!(row(&page, "table.rates", "Passed: exact match"), ["Passed: exact match", "66.7%"]);
    assert_eq!(row(&page, "table.rates", "Passed: contains expected"), ["Passed: contains expected", "100%"]);
    assert_eq!(row(&page, "table.rates", "Mean correctness"), ["Mean correctness", "0.8"]);
    assert!(
        rows(&page, "table.results").iter().all(|r| r[7] == "correctness 0.8"),
        "{:?}",
        rows(&page, "table.results")
    );
    assert_eq!(
        page.attrs("dl.kv a[href^='/dashboard/evaluators/']", "href"),
        [format!("/dashboard/evaluators/{evaluator}")]
    );
    assert!(page.main_text().contains("The evaluators' judge calls cost $0.000063"), "{}", page.main_text());
    assert_eq!(page.backed_by(), [format!("GET /api/v1/experiments/{first}"), "GET /api/v1/evaluators".to_owned()]);
    assert!(page.html.select(&scraper::Selector::parse("meta[http-equiv=refresh]").unwrap()).next().is_none());
    assert!(page.texts("form button").iter().all(|b| b != "Cancel experiment"), "no Cancel once it has ended");
    let stats = page.texts("ul.stats li");
    assert!(stats.contains(&"Answered 3".to_owned()) && stats.contains(&"Cost $0".to_owned()), "{stats:?}");
    screenshots(&browser, "experiment").await;
    browser.client.execute("document.querySelector('table.results').scrollIntoView();", vec![]).await.unwrap();
    browser.screenshot("experiment-results").await;

    // Run B, on a copy with another brief: exact match fails where it passed.
    browser.open(&server.url(&format!("/dashboard/datasets/{dataset_id}"))).await;
    let second = run(&browser, &agent_id, Some("other"), None).await;
    let done = experiment(&api, &second).await;
    assert_eq!((&done["experiment"]["copy"], &done["experiment"]["brief"]), (&json!(true), &json!("other")));
    assert_eq!(done["results"][0]["output"], "[other] hello", "{done}");
    shows(&browser, "a temporary copy").await;

    // Both listed on the dataset's page; ticked and compared.
    browser.open(&server.url(&format!("/dashboard/datasets/{dataset_id}"))).await;
    let listed = rows(&visitor.get(&format!("/dashboard/datasets/{dataset_id}")).await, "table.experiments");
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed[0][2].contains("copy") && listed[0][2].contains("brief “other”"), "newest first: {listed:?}");
    click(&browser, &format!("#pick-{first}")).await;
    click(&browser, &format!("#pick-{second}")).await;
    screenshots(&browser, "dataset-runs").await;
    click(&browser, "form.compare button[type=submit]").await;
    shows(&browser, "Two runs compared").await;
    assert_eq!(path(&browser).await, "/dashboard/experiments/compare");
    shows(&browser, "2 items came out differently").await;
    let url = browser.client.current_url().await.unwrap();
    let compared = visitor.get(&format!("{}?{}", url.path(), url.query().unwrap())).await;
    assert_eq!(compared.status, StatusCode::OK, "{}", compared.body);
    // A is the earlier run, whatever order the boxes were ticked in.
    let totals = compared.texts("table.compare-totals tbody tr");
    let metric = |label: &str| {
        totals.iter().find(|r| r.starts_with(label)).cloned().unwrap_or_else(|| panic!("no {label} row: {totals:?}"))
    };
    assert_eq!(metric("Passed: exact match"), "Passed: exact match 66.7% 0%");
    assert_eq!(metric("Passed: contains expected"), "Passed: contains expected 100% 33.3%");
    let at = |label: &str| totals.iter().position(|r| r.starts_with(label));
    assert!(at("Passed: exact match") < at("Passed: contains expected"), "in the runs' order of checks: {totals:?}");
    assert_eq!(metric("Brief"), "Brief the agent's own other");
    assert_eq!(metric("Answered"), "Answered 3 / 3 3 / 3");
    assert_eq!(metric("Mean correctness"), "Mean correctness 0.8 –");
    let items = rows(&compared, "table.compare-items");
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(
        compared.texts("table.compare-items tbody tr.differs td:first-child"),
        ["1 differs", "2 differs"],
        "the third fails exact match in both"
    );
    assert!(items[0][3].starts_with(&format!("{hello} ✓ exact match ✓ contains expected")), "{items:?}");
    assert!(items[0][4].starts_with("[other] hello ✗ exact match ✗ contains expected"), "{items:?}");
    // Loaded in the order the form sent them: the list's, newest first.
    assert_eq!(
        compared.backed_by(),
        [format!("GET /api/v1/experiments/{second}"), format!("GET /api/v1/experiments/{first}")]
    );
    screenshots(&browser, "experiments-compare").await;
    browser.client.execute("document.querySelector('table.compare-items').scrollIntoView();", vec![]).await.unwrap();
    browser.screenshot("experiments-compare-items").await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");

    // The same comparison named as a and b, and the other way round.
    let swapped = visitor.get(&format!("/dashboard/experiments/compare?a={second}&b={first}")).await;
    assert_eq!(swapped.status, StatusCode::OK);
    assert!(swapped.texts("table.compare-totals tbody tr").contains(&"Passed: exact match 0% 66.7%".to_owned()));

    // The agent's conversation (run A's turns) into a new dataset, from its session's page.
    browser.open(&server.url(&format!("/dashboard/sessions/{agent_id}"))).await;
    shows(&browser, "Add to a dataset").await;
    fill(&browser, "#ds-new-name", "from the session").await;
    click(&browser, "#add-to-dataset details summary").await;
    browser.client.execute("document.querySelector('#add-to-dataset').scrollIntoView();", vec![]).await.unwrap();
    browser.screenshot("session-add-to-dataset").await;
    browser.resize(390, 844).await;
    fits(&browser, 390, "the session page").await;
    browser.screenshot("session-add-to-dataset-390").await;
    browser.resize(1280, 800).await;
    click(&browser, "#add-to-dataset button[type=submit]").await;
    shows(&browser, "Dataset “from the session” created with 3 items").await;
    let from_session = path(&browser).await.strip_prefix("/dashboard/datasets/").unwrap().to_owned();
    let detail = api.get(&format!("/api/v1/datasets/{from_session}")).await.ok();
    let items: Vec<(&str, &str)> = detail["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["input"].as_str().unwrap(), i["expected"].as_str().unwrap()))
        .collect();
    assert_eq!(items, [("hello", hello.as_str()), ("bonjour", bonjour.as_str()), ("hola", hola.as_str())]);
    assert!(detail["items"][0]["source"].as_str().unwrap().starts_with("turn:"), "{detail}");

    // One ticked turn, into the first dataset (without a browser).
    let session = visitor.get(&format!("/dashboard/sessions/{agent_id}")).await;
    let turns = session.attrs("#add-to-dataset input[name=turn]", "value");
    assert_eq!(turns.len(), 3, "{}", session.main_text());
    assert!(session.backed_by().contains(&"GET /api/v1/datasets".to_owned()));
    let added = visitor
        .post_form(
            &format!("/dashboard/sessions/{agent_id}/dataset"),
            &[("dataset_id", &dataset_id), ("new_name", ""), ("turn", &turns[2])],
        )
        .await;
    let back = follow(&mut visitor, &added).await;
    assert_eq!(
        notice(&back),
        format!("Added 1 item from the turns and calls ticked of session {agent_id} to “greetings”.")
    );
    assert_eq!(rows(&back, "table.items")[3][..3], ["4", "hola", hola.as_str()]);

    // Items by the add-items form, as CSV.
    let added = visitor
        .post_form(
            &format!("/dashboard/datasets/{dataset_id}/items"),
            &[("format", "csv"), ("items", "input,expected,topic\r\nciao,ciao,it\r\n")],
        )
        .await;
    let back = follow(&mut visitor, &added).await;
    assert_eq!(notice(&back), "Added 1 item to “greetings”: it has 5 items now.");
    assert_eq!(rows(&back, "table.items")[4], ["5", "ciao", "ciao", r#"{"topic":"it"}"#, "csv"]);

    // What the forms refuse: nothing is changed.
    let (status, text) = refused(
        visitor
            .post_form(
                "/dashboard/datasets",
                &[("name", "bad"), ("format", "jsonl"), ("items", "{\"expected\":\"x\"}")],
            )
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("Nothing was changed") && text.contains("input is required"), "{text}");
    let (status, text) = refused(visitor.post_form("/dashboard/datasets", &[("name", "greetings")]).await).await;
    assert_eq!(status, StatusCode::CONFLICT, "a second dataset of that name: {text}");
    let (status, text) =
        refused(visitor.post_form(&format!("/dashboard/datasets/{dataset_id}/run"), &[("check_exact", "on")]).await)
            .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("choose the hosted agent"), "{text}");
    let (status, text) = refused(
        visitor
            .post_form(&format!("/dashboard/sessions/{agent_id}/dataset"), &[("dataset_id", ""), ("new_name", "")])
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert_eq!(api.get("/api/v1/datasets").await.ok()["datasets"].as_array().unwrap().len(), 2);
    let forged = [("agent_id", agent_id.as_str()), ("check_exact", "on")];
    assert_eq!(
        post_without_csrf(&server, &visitor, &format!("/dashboard/datasets/{dataset_id}/run"), &forged).await,
        403
    );
    assert_eq!(post_without_csrf(&server, &visitor, "/dashboard/datasets", &[("name", "forged")]).await, 403);
    assert_eq!(
        post_without_csrf(&server, &visitor, &format!("/dashboard/datasets/{dataset_id}/delete"), &[]).await,
        403
    );
    let runs = api.get(&format!("/api/v1/experiments?dataset_id={dataset_id}")).await.ok();
    assert_eq!(runs["experiments"].as_array().unwrap().len(), 2);

    // Comparisons the page refuses: one run, runs of different datasets, a missing run.
    let one = visitor.get(&format!("/dashboard/experiments/compare?ids={first}")).await;
    assert_eq!(one.status, StatusCode::BAD_REQUEST);
    assert!(one.main_text().contains("Choose two runs"), "{}", one.main_text());
    let other = api.post("/api/v1/experiments", json!({"dataset_id": from_session, "agent_id": agent_id})).await.ok();
    let other = other["experiment"]["id"].as_str().unwrap().to_owned();
    let mixed = visitor.get(&format!("/dashboard/experiments/compare?a={first}&b={other}")).await;
    assert_eq!(mixed.status, StatusCode::BAD_REQUEST);
    assert!(mixed.main_text().contains("These runs are of different datasets"), "{}", mixed.main_text());
    let gone = visitor.get(&format!("/dashboard/experiments/compare?a={first}&b=ex_nope")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let missing = visitor.get("/dashboard/experiments/ex_nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.main_text().contains("No such experiment"), "{}", missing.main_text());
    let missing = visitor.get("/dashboard/datasets/ds_nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.main_text().contains("No such dataset"), "{}", missing.main_text());

    // The list: both datasets and the three runs.
    let list = visitor.get("/dashboard/datasets").await;
    assert_eq!(row(&list, "table.datasets", "greetings")[1], "5");
    assert_eq!(rows(&list, "table.experiments").len(), 3);
    browser.open(&server.url("/dashboard/datasets")).await;
    screenshots(&browser, "datasets").await;

    // The session's dataset deleted after the confirmation, once its run has ended.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(45);
    while experiment(&api, &other).await["experiment"]["status"] != "completed" {
        assert!(tokio::time::Instant::now() < deadline, "the third run never completed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    browser.open(&server.url(&format!("/dashboard/datasets/{from_session}"))).await;
    click(&browser, "button.danger").await;
    browser.client.accept_alert().await.unwrap();
    shows(&browser, &format!("Dataset {from_session} deleted")).await;
    api.get(&format!("/api/v1/datasets/{from_session}")).await.err(404, "not_found");
    api.get(&format!("/api/v1/experiments/{other}")).await.err(404, "not_found");

    // A long run: its page reloads itself while it is live and offers Cancel, which stops
    // it; then it neither reloads nor offers Cancel.
    let many: Vec<String> = (0..2000).map(|i| json!({"input": format!("item {i}")}).to_string()).collect();
    let long = api.post("/api/v1/datasets", json!({"name": "many", "items": {"jsonl": many.join("\n")}})).await.ok();
    let long = long["dataset"]["id"].as_str().unwrap().to_owned();
    let running =
        api.post("/api/v1/experiments", json!({"dataset_id": long, "agent_id": agent_id})).await.ok()["experiment"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let live = visitor.get(&format!("/dashboard/experiments/{running}")).await;
    assert_eq!(
        live.attrs("meta[http-equiv=refresh]", "content"),
        [format!("3; url=/dashboard/experiments/{running}")],
        "reloads itself, without a notice"
    );
    assert!(live.main_text().contains("This page reloads every 3 s until the run ends."), "{}", live.main_text());
    browser.open(&server.url(&format!("/dashboard/experiments/{running}"))).await;
    browser.screenshot("experiment-running").await;
    let cancelled = visitor.post_form(&format!("/dashboard/experiments/{running}/cancel"), &[]).await;
    let after = follow(&mut visitor, &cancelled).await;
    assert!(notice(&after).starts_with("Experiment “many · "), "{}", notice(&after));
    assert!(notice(&after).ends_with("cancelled: it stops after the item it is on."), "{}", notice(&after));
    assert!(after.attrs("meta[http-equiv=refresh]", "content").is_empty());
    assert!(after.texts("form button").iter().all(|b| b != "Cancel experiment"));
    let stopped = experiment(&api, &running).await;
    assert_eq!(stopped["experiment"]["status"], "cancelled", "{stopped}");
    let (status, _) = refused(visitor.post_form(&format!("/dashboard/experiments/{running}/cancel"), &[]).await).await;
    assert_eq!(status, StatusCode::CONFLICT, "it has ended");
    assert_eq!(after.texts("p.crumbs a").last().map(String::as_str), Some("many"), "the dataset by its name");

    // The dataset's items come 200 a page, with links on and back.
    let first = visitor.get(&format!("/dashboard/datasets/{long}")).await;
    assert_eq!(first.texts("nav.pager span"), ["Items 1–200 of 2,000"; 2], "above the items and below");
    assert_eq!(
        first.attrs("nav.pager a[rel=next]", "href"),
        vec![format!("/dashboard/datasets/{long}?offset=200#items-h"); 2]
    );
    assert!(first.attrs("nav.pager a[rel=prev]", "href").is_empty());
    let second = visitor.get(&format!("/dashboard/datasets/{long}?offset=200")).await;
    assert_eq!(second.texts("nav.pager span"), ["Items 201–400 of 2,000"; 2]);
    assert_eq!(second.texts("table.items tbody tr td.num").first().map(String::as_str), Some("201"));
    assert_eq!(
        second.attrs("nav.pager a[rel=prev]", "href"),
        vec![format!("/dashboard/datasets/{long}?offset=0#items-h"); 2]
    );
    let last = visitor.get(&format!("/dashboard/datasets/{long}?offset=1800")).await;
    assert_eq!(last.texts("nav.pager span"), ["Items 1,801–2,000 of 2,000"; 2]);
    assert!(last.attrs("nav.pager a[rel=next]", "href").is_empty());
    browser.open(&server.url(&format!("/dashboard/datasets/{long}?offset=200#items-h"))).await;
    browser.screenshot("dataset-items-paged").await;
    let odd = visitor.get(&format!("/dashboard/datasets/{long}?offset=soon")).await;
    assert_eq!(odd.texts("nav.pager span"), ["Items 1–200 of 2,000"; 2], "an unreadable offset is the first page");

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.close().await;
}
