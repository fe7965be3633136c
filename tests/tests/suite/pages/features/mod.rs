//! The feature pages (alerts, guard, evaluators, datasets and experiments, crons, channels,
//! skills, health, updates), mostly without a browser: what a person reads on each, and that
//! their forms change what the REST API then shows, and change nothing without the CSRF
//! field or with a bad value.

mod alerts;
mod crons;
mod evaluators;
mod experiments;
mod guard;
mod reads;
mod updates;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use roost_tests::{
    TestServer,
    pages::{Page, Visitor, location},
};
use scraper::{Html, Selector};
use serde_json::{Value, json};

/// Each `<tr>` of the tables matching `table` (a selector), as its cells' texts.
pub fn rows(page: &Page, table: &str) -> Vec<Vec<String>> {
    let rows = Selector::parse(&format!("{table} tbody tr")).unwrap();
    let cells = Selector::parse("td").unwrap();
    page.html
        .select(&rows)
        .map(|row| {
            row.select(&cells)
                .map(|c| c.text().collect::<Vec<_>>().join(" ").split_whitespace().collect::<Vec<_>>().join(" "))
                .collect()
        })
        .collect()
}

/// The one row of `table` whose first cell starts with `first`.
pub fn row(page: &Page, table: &str, first: &str) -> Vec<String> {
    let all = rows(page, table);
    let found: Vec<_> = all.iter().filter(|r| r.first().is_some_and(|c| c.starts_with(first))).collect();
    assert_eq!(found.len(), 1, "one row starting {first:?} in {table}: {all:?}");
    found[0].clone()
}

/// The notice a form's 303 carries to the page it redirects to: GETs it and reads it.
pub async fn follow(visitor: &mut Visitor, response: &reqwest::Response) -> Page {
    let to = location(response);
    let page = visitor.get(&to).await;
    assert_eq!(page.status, StatusCode::OK, "{to}: {}", page.body);
    page
}

/// The page's notice line.
pub fn notice(page: &Page) -> String {
    page.texts("p.notice").join(" ")
}

/// A form's error page: its status and the text of its `<main>`.
pub async fn refused(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let html = Html::parse_document(&response.text().await.unwrap());
    let main = Selector::parse("main").unwrap();
    let text = html.select(&main).flat_map(|m| m.text()).collect::<Vec<_>>().join(" ");
    (status, text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// POSTs `fields` to `path` as a page on this origin would, with the visitor's CSRF cookie
/// but without the CSRF field (a forged form): the answer's status.
pub async fn post_without_csrf(server: &TestServer, visitor: &Visitor, path: &str, fields: &[(&str, &str)]) -> u16 {
    server
        .http
        .post(server.url(path))
        .header("cookie", format!("roost_csrf={}", visitor.csrf()))
        .header("origin", server.url(""))
        .form(fields)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Polls `check` until it gives a value (15 s at most).
pub async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A running hosted agent of `runtime` on a new account; its id and the owner's API.
pub async fn agent(server: &TestServer, runtime: &str) -> (String, roost_tests::Api) {
    let account = server.account(10_000).await;
    let owner = server.api(Some(&account));
    let id = owner.provision(runtime, "a page test's agent").await["id"].as_str().unwrap().to_owned();
    owner.wait_status(&id, "running").await;
    (id, owner)
}

/// Sends spans of `service` as OTLP/JSON, ending now: `ok` fine ones and `failed` with an
/// error status.
pub async fn spans(server: &TestServer, service: &str, trace: u8, ok: usize, failed: usize) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let spans: Vec<Value> = (0..ok + failed)
        .map(|i| {
            json!({
                "traceId": format!("{trace:02x}").repeat(16),
                "spanId": format!("{:016x}", i + 1),
                "name": format!("step {i}"),
                "kind": 1,
                "startTimeUnixNano": (now - 2_000_000).to_string(),
                "endTimeUnixNano": now.to_string(),
                "status": {"code": if i < ok { 1 } else { 2 }},
            })
        })
        .collect();
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"spans": spans}],
    }]});
    let reply =
        crate::observe::post_otlp(server, "/v1/traces", "application/json", body.to_string().into_bytes()).await;
    assert_eq!(reply.status(), 200);
}
