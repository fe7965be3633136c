//! An account rates its agents' replies (docs/hosting.md#rating-replies): over REST, gRPC
//! `RateTurn`, the MCP `rate_turn` tool and the web chat's 👍 / 👎 (with and without the
//! page's script). A rating lands as a `human` score on the turn, authored by the account,
//! where the dashboard reads scores; rating again replaces it; another account, another
//! agent's path or a bad value changes nothing.

use std::time::Duration;

use fantoccini::{Locator, key::Key};
use reqwest::StatusCode;
use roost_proto::{json::value::from_json, v1::RateTurnRequest};
use roost_tests::{
    Backend, TestServer,
    browser::Browser,
    each_backend,
    pages::{Page, location},
};
use serde_json::{Value, json};
use tonic::Code;

use super::start;
use crate::{mcp, webapp};

each_backend!(
    ratings_over_rest_land_as_human_scores_on_the_turn,
    ratings_over_grpc_and_mcp_answer_as_rest_does,
    the_web_chat_rates_replies_without_script,
);

/// A running echo agent of `key`'s account and one turn of it: `(instance_id, turn_id)`.
async fn agent_with_a_turn(server: &TestServer, key: &str) -> (String, String) {
    let api = server.api(None).with_key(Some(key));
    let id = api.provision("echo", "Be kind.").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let turn = api.message(&id, "hello").await.ok();
    assert_eq!(turn["reply"], "[Be kind.] hello");
    (id, turn["turn_id"].as_str().unwrap().to_owned())
}

/// The turn's scores as the dashboard reads them, by name: `(name, value, source, author)`.
async fn scores_of(server: &TestServer, turn: &str) -> Vec<(String, Value, String, String)> {
    let listed = server.api(None).get(&format!("/api/v1/scores?turn_id={turn}")).await.ok();
    let mut scores: Vec<_> = listed["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap_or_default().to_owned();
            (text("name"), s["value"].clone(), text("source"), text("author"))
        })
        .collect();
    scores.sort_by(|a, b| a.0.cmp(&b.0));
    scores
}

fn rating_path(instance: &str, turn: &str) -> String {
    format!("/api/instances/{instance}/turns/{turn}/rating")
}

async fn ratings_over_rest_land_as_human_scores_on_the_turn(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let (id, turn) = agent_with_a_turn(&server, &account.key).await;
    let path = rating_path(&id, &turn);

    let rated = api.post(&path, json!({"value": true, "comment": "spot on"})).await.ok();
    let score = &rated["score"];
    assert_eq!(score["id"], format!("rating_{turn}_thumbs"));
    assert_eq!(
        (&score["name"], &score["value"], &score["kind"], &score["source"], &score["author"]),
        (&json!("thumbs"), &json!(true), &json!("boolean"), &json!("human"), &json!(account.id))
    );
    assert_eq!((&score["turn_id"], &score["target"], &score["agent_id"]), (&json!(turn), &json!("turn"), &json!(id)));
    assert_eq!(score["comment"], "spot on");
    assert_eq!(score["trace_id"].as_str().unwrap().len(), 32, "the turn's trace is filled in: {score}");
    let human = |name: &str, value: Value| (name.to_owned(), value, "human".to_owned(), account.id.clone());
    assert_eq!(scores_of(&server, &turn).await, [human("thumbs", json!(true))]);

    // Rating again replaces the thumbs; a 1-5 rating is a score of its own.
    api.post(&path, json!({"value": false})).await.ok();
    let stars = api.post(&path, json!({"value": 4, "comment": "good"})).await.ok();
    assert_eq!((&stars["score"]["name"], &stars["score"]["kind"]), (&json!("rating"), &json!("numeric")));
    api.post(&path, json!({"value": 4.5})).await.ok();
    let expected = [human("rating", json!(4.5)), human("thumbs", json!(false))];
    assert_eq!(scores_of(&server, &turn).await, expected);

    // Another account: 404 for this agent's path, and for its own agent's path naming this
    // turn. Nothing changes.
    let other = server.account(0).await;
    let stranger = server.api(Some(&other));
    stranger.post(&path, json!({"value": true})).await.err(404, "not_found");
    let (theirs, their_turn) = agent_with_a_turn(&server, &other.key).await;
    stranger.post(&rating_path(&theirs, &turn), json!({"value": true})).await.err(404, "not_found");
    // Nor may the owner rate a turn through another agent's path.
    api.post(&rating_path(&theirs, &turn), json!({"value": true})).await.err(404, "not_found");
    api.post(&rating_path(&id, &their_turn), json!({"value": true})).await.err(404, "not_found");
    api.post(&rating_path(&id, "turn_nope"), json!({"value": true})).await.err(404, "not_found");
    server.api(None).post(&path, json!({"value": true})).await.err(401, "unauthenticated");

    // Bad values are 400 `{error, code}`.
    for body in [
        json!({"value": "great"}),
        json!({"value": 0}),
        json!({"value": 6}),
        json!({"value": -1}),
        json!({"value": null}),
        json!({}),
        json!({"value": [true]}),
        json!({"value": {"up": true}}),
        json!({"value": true, "stars": 5}),
        json!({"value": true, "comment": "x".repeat(5000)}),
    ] {
        let reply = api.post(&path, body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        reply.err(400, "invalid_argument");
    }
    assert_eq!(scores_of(&server, &turn).await, expected, "refused ratings change nothing");
    assert!(scores_of(&server, &their_turn).await.is_empty());

    // The q/1 score aggregates see the ratings with every other score.
    let scores = server.sql("SELECT COUNT(*) FROM scores WHERE source = 'human' AND target = 'turn'").await.unwrap();
    assert_eq!(scores, [2]);
}

async fn ratings_over_grpc_and_mcp_answer_as_rest_does(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let (id, turn) = agent_with_a_turn(&server, &account.key).await;
    let rate = |value: Value| RateTurnRequest {
        instance_id: id.clone(),
        turn_id: turn.clone(),
        value: Some(from_json(&value)),
        comment: "over gRPC".into(),
    };

    let mut grpc = server.agents(&account.key).await;
    let score = grpc.rate_turn(rate(json!(5))).await.unwrap().into_inner().score.unwrap();
    assert_eq!((score.name.as_str(), score.source.as_str()), ("rating", "human"));
    assert_eq!((score.author.as_str(), score.turn_id.as_str()), (account.id.as_str(), turn.as_str()));
    assert_eq!(score.value.as_ref().map(roost_proto::json::value::to_json), Some(json!(5)));
    let bad = grpc.rate_turn(rate(json!("meh"))).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    let other = server.account(0).await;
    let foreign = server.agents(&other.key).await.rate_turn(rate(json!(true))).await.unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound, "{foreign:?}");

    let (session, _) = mcp::connect(&server, &account.key).await;
    let (rated, text) =
        mcp::call(&session, "rate_turn", json!({"instance_id": id, "turn_id": turn, "value": false})).await;
    let rated = rated.expect("rate_turn answers");
    assert_eq!((&rated["score"]["name"], &rated["score"]["value"]), (&json!("thumbs"), &json!(false)));
    assert!(text.contains(&turn) && text.contains("thumbs"), "{text}");
    let (bad, _) = mcp::call(&session, "rate_turn", json!({"instance_id": id, "turn_id": turn, "value": 9})).await;
    let bad = bad.unwrap_err();
    assert_eq!((&bad["code"], &bad["status"]), (&json!("invalid_argument"), &json!(400)), "{bad}");
    let (theirs, _) = mcp::connect(&server, &other.key).await;
    let (foreign, _) =
        mcp::call(&theirs, "rate_turn", json!({"instance_id": id, "turn_id": turn, "value": true})).await;
    let foreign = foreign.unwrap_err();
    assert_eq!((&foreign["code"], &foreign["status"]), (&json!("not_found"), &json!(404)), "{foreign}");

    let human = |name: &str, value: Value| (name.to_owned(), value, "human".to_owned(), account.id.clone());
    assert_eq!(scores_of(&server, &turn).await, [human("rating", json!(5)), human("thumbs", json!(false))]);
    session.cancel().await.unwrap();
    theirs.cancel().await.unwrap();
}

/// The `aria-pressed` of the reply's 👍 and 👎 on the agent's page.
fn pressed(page: &Page, turn: &str) -> Vec<String> {
    page.attrs(&format!("#reply-{turn} form.rate button"), "aria-pressed")
}

/// The chat's 👍 / 👎 are plain forms: they work without the page's script.
async fn the_web_chat_rates_replies_without_script(backend: Backend) {
    let server = start(backend, |c| c.webapp.signup_open = true).await;
    let mut ada = webapp::signed_up(&server, "ada@example.com").await;
    let account = webapp::account_id(&mut ada).await;
    let created = ada.post_form("/instances", &[("runtime", "echo"), ("brief", "web"), ("name", "")]).await;
    assert_eq!(created.status(), StatusCode::SEE_OTHER);
    let id = location(&created).trim_start_matches("/instances/").split(['?', '#']).next().unwrap().to_owned();
    assert!(id.starts_with("ins_"), "{id}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while server.sql("SELECT COUNT(*) FROM instances WHERE status = 'running'").await.unwrap() != [1] {
        assert!(std::time::Instant::now() < deadline, "the agent did not boot");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = ada.post_form(&format!("/instances/{id}/message"), &[("text", "hi there")]).await;
    assert_eq!(sent.status(), StatusCode::SEE_OTHER);
    let turn = location(&sent).split("turn=").nth(1).unwrap().split(['&', '#']).next().unwrap().to_owned();

    let page = ada.get(&format!("/instances/{id}")).await;
    let action = format!("/instances/{id}/turns/{turn}/rating");
    assert_eq!(page.attrs(&format!("#reply-{turn} form.rate"), "action"), std::slice::from_ref(&action));
    assert_eq!(page.attrs(&format!("#reply-{turn} form.rate button"), "value"), ["up", "down"]);
    assert_eq!(pressed(&page, &turn), ["false", "false"]);
    assert_eq!(page.texts(&format!("#reply-{turn} form.rate .visually-hidden")), ["Good reply", "Bad reply"]);

    let rated = ada.post_form(&action, &[("value", "up")]).await;
    assert_eq!(rated.status(), StatusCode::SEE_OTHER);
    assert!(location(&rated).ends_with(&format!("#turn-{turn}")), "{}", location(&rated));
    let page = ada.get(&location(&rated)).await;
    assert!(page.main_text().contains("Rated the reply: thumbs up."), "{}", page.main_text());
    assert_eq!(pressed(&page, &turn), ["true", "false"]);
    let human = |value: Value| ("thumbs".to_owned(), value, "human".to_owned(), account.clone());
    assert_eq!(scores_of(&server, &turn).await, [human(json!(true))]);

    ada.post_form(&action, &[("value", "down")]).await;
    assert_eq!(pressed(&ada.get(&format!("/instances/{id}")).await, &turn), ["false", "true"]);
    assert_eq!(scores_of(&server, &turn).await, [human(json!(false))]);

    // A value that is not a thumb, or a post without the form key, changes nothing.
    let odd = ada.post_form(&action, &[("value", "sideways")]).await;
    assert_eq!(odd.status(), StatusCode::BAD_REQUEST);
    let forged = server
        .http
        .post(server.url(&action))
        .header("cookie", ada.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; "))
        .form(&[("value", "up"), ("csrf", "forged")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    // Another user's session reaches nothing of Ada's.
    let mut bob = webapp::signed_up(&server, "bob@example.com").await;
    let foreign = bob.post_form(&action, &[("value", "up")]).await;
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND);
    assert_eq!(scores_of(&server, &turn).await, [human(json!(false))]);
}

async fn wait_for(browser: &Browser, needle: &str) {
    if let Err(seen) = browser.wait_for_text(needle, Duration::from_secs(20)).await {
        panic!("waiting for {needle:?}; the page says:\n{seen}");
    }
}

async fn element(browser: &Browser, css: &str) -> fantoccini::elements::Element {
    browser.client.wait().for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"))
}

/// The `aria-pressed` of the newest reply's 👍 and 👎.
async fn pressed_in(browser: &Browser) -> (String, String) {
    let attr = async |value: &str| {
        let button = element(browser, &format!(".msg.assistant form.rate button[value='{value}']")).await;
        button.attr("aria-pressed").await.unwrap().unwrap_or_default()
    };
    (attr("up").await, attr("down").await)
}

/// In Chromium, with the page's script (the reply streams, then the page reloads): the
/// reply gets 👍 / 👎, a click records 👍 and shows it pressed, and the keyboard alone
/// (Tab to the 👎, Enter) changes it. SQLite only, as the other browser tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_rated_in_the_browser() {
    if Browser::skipped() {
        return;
    }
    let server = start(Backend::Sqlite, |c| c.webapp.signup_open = true).await;
    let browser = Browser::start().await;
    browser.open(&server.url("/signup")).await;
    element(&browser, "#email").await.send_keys("ada@example.com").await.unwrap();
    element(&browser, "#password").await.send_keys(webapp::PASSWORD).await.unwrap();
    element(&browser, "main form button[type=submit]").await.click().await.unwrap();
    wait_for(&browser, "Your agents").await;
    element(&browser, "#brief").await.send_keys("Be kind.").await.unwrap();
    element(&browser, "form[action='/instances'] button").await.click().await.unwrap();
    wait_for(&browser, "Chat").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while browser.text_of("#status").await.to_lowercase() != "running" {
        assert!(tokio::time::Instant::now() < deadline, "the agent did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    element(&browser, "#text").await.send_keys("how are you?").await.unwrap();
    element(&browser, "form[action$='/message'] button").await.click().await.unwrap();
    wait_for(&browser, "[Be kind.] how are you?").await;
    wait_for(&browser, " in / ").await;
    assert_eq!(pressed_in(&browser).await, ("false".into(), "false".into()));

    element(&browser, ".msg.assistant form.rate button[value='up']").await.click().await.unwrap();
    wait_for(&browser, "Rated the reply: thumbs up.").await;
    assert_eq!(pressed_in(&browser).await, ("true".into(), "false".into()));
    let url = browser.client.current_url().await.unwrap();
    assert!(url.fragment().is_some_and(|f| f.starts_with("turn-turn_")), "back at the turn: {url}");
    let turn = url.fragment().unwrap().trim_start_matches("turn-").to_owned();
    let thumbs = |value: bool| vec![("thumbs".to_owned(), json!(value))];
    let named = |scores: Vec<(String, Value, String, String)>| {
        assert!(scores.iter().all(|s| s.2 == "human" && s.3.starts_with("acct_")), "{scores:?}");
        scores.into_iter().map(|s| (s.0, s.1)).collect::<Vec<_>>()
    };
    assert_eq!(named(scores_of(&server, &turn).await), thumbs(true));
    browser.screenshot("app-instance-rated").await;

    // The keyboard alone: focus the 👍, Tab to the 👎, Enter.
    let up = element(&browser, ".msg.assistant form.rate button[value='up']").await;
    browser.client.execute("arguments[0].focus();", vec![serde_json::to_value(&up).unwrap()]).await.unwrap();
    let active = browser.client.active_element().await.unwrap();
    active.send_keys(&Key::Tab).await.unwrap();
    let active = browser.client.active_element().await.unwrap();
    assert_eq!(active.attr("value").await.unwrap().as_deref(), Some("down"), "Tab reaches the 👎");
    active.send_keys(&Key::Enter).await.unwrap();
    wait_for(&browser, "Rated the reply: thumbs down.").await;
    assert_eq!(pressed_in(&browser).await, ("false".into(), "true".into()));
    assert_eq!(named(scores_of(&server, &turn).await), thumbs(false));
    assert!(browser.console_errors().await.is_empty(), "{:?}", browser.console_errors().await);
    browser.close().await;
}
