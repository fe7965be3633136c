//! `/dashboard/alerts`: rules made over REST and by the page's forms, edited and deleted
//! there, and an alert that fires acknowledged from the page.

use std::time::Duration;

use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::{Value, json};

use super::{eventually, follow, notice, post_without_csrf, refused, row, rows, spans};

each_backend!(
    alert_rules_are_made_changed_and_deleted_from_the_page,
    a_firing_alert_is_acknowledged_from_the_page,
    a_spend_alerts_value_and_message_agree
);

async fn rules(server: &TestServer) -> Vec<Value> {
    server.api(None).get("/api/alerts").await.ok()["rules"].as_array().unwrap().clone()
}

async fn alert_rules_are_made_changed_and_deleted_from_the_page(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let mut visitor = Visitor::new(&server);

    let empty = visitor.get("/dashboard/alerts").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.texts("h1"), ["Alerts"]);
    assert_eq!(empty.backed_by(), ["GET /api/alerts"]);
    let text = empty.main_text();
    assert!(text.contains("No alert rules yet"), "{text}");
    assert!(text.contains("No alert is firing"), "{text}");
    assert!(text.contains("No alert has fired yet"), "{text}");
    // The form offers every kind the API documents.
    assert_eq!(
        empty.attrs("form[action='/dashboard/alerts'] select[name=kind] option", "value"),
        ["cost_per_day", "error_rate", "token_spike", "stuck_session"]
    );

    // A rule made over REST is in the rules table, read as a person reads it.
    let made = api.post("/api/alerts", json!({"name": "spend", "kind": "cost_per_day", "threshold": 12.5})).await.ok();
    let spend_id = made["id"].as_str().unwrap().to_owned();
    let page = visitor.get("/dashboard/alerts").await;
    let spend = row(&page, "table.rules", "spend");
    assert_eq!(spend[1..6], ["Cost per day", "$12.50", "today (UTC)", "none", "enabled"], "{spend:?}");

    // The create form: every field.
    let created = visitor
        .post_form(
            "/dashboard/alerts",
            &[
                ("name", "errors"),
                ("kind", "error_rate"),
                ("threshold", "0.25"),
                ("window_secs", "600"),
                ("webhook_url", "http://127.0.0.1:9/hook"),
                ("enabled", "true"),
            ],
        )
        .await;
    let page = follow(&mut visitor, &created).await;
    assert!(notice(&page).contains("“errors” (error_rate) created"), "{}", notice(&page));
    let errors = row(&page, "table.rules", "errors");
    assert_eq!(errors[1..6], ["Error rate", "25.0%", "10m 00s", "http://127.0.0.1:9/hook", "enabled"], "{errors:?}");
    let stored = rules(&server).await;
    let rule = stored.iter().find(|r| r["name"] == "errors").unwrap().clone();
    let id = rule["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&rule["kind"], &rule["threshold"], &rule["window_secs"], &rule["webhook_url"], &rule["enabled"]),
        (&json!("error_rate"), &json!(0.25), &json!(600), &json!("http://127.0.0.1:9/hook"), &json!(true))
    );

    // The edit form in the row posts to the rule's own path; only the fields sent change.
    let edit = format!("/dashboard/alerts/rules/{id}");
    assert_eq!(page.attrs(&format!("form[action='{edit}'] input[name=threshold]"), "value"), ["0.25"]);
    let edited = visitor.post_form(&edit, &[("threshold", "0.5"), ("enabled", "false")]).await;
    assert!(notice(&follow(&mut visitor, &edited).await).contains("updated"));
    let rule = rules(&server).await.into_iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert_eq!(
        (&rule["name"], &rule["threshold"], &rule["window_secs"], &rule["webhook_url"], &rule["enabled"]),
        (&json!("errors"), &json!(0.5), &json!(600), &json!("http://127.0.0.1:9/hook"), &json!(false))
    );
    // An empty webhook field removes the webhook; an empty number field keeps the number.
    let edited = visitor
        .post_form(&edit, &[("name", "errors renamed"), ("webhook_url", ""), ("threshold", ""), ("window_secs", "")])
        .await;
    let page = follow(&mut visitor, &edited).await;
    let rule = rules(&server).await.into_iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert_eq!(
        (&rule["name"], &rule["webhook_url"], &rule["threshold"]),
        (&json!("errors renamed"), &json!(""), &json!(0.5))
    );
    assert_eq!(row(&page, "table.rules", "errors renamed")[5], "disabled");

    // Bad values: the error page with the API's 400, and nothing stored.
    let before = rules(&server).await;
    for fields in [
        vec![("kind", "vibes"), ("threshold", "1")],
        vec![("kind", "error_rate"), ("threshold", "lots")],
        vec![("kind", "error_rate"), ("threshold", "0.5"), ("window_secs", "5")],
        vec![("kind", "error_rate"), ("threshold", "0.5"), ("webhook_url", "ftp://example.com")],
    ] {
        let (status, text) = refused(visitor.post_form("/dashboard/alerts", &fields).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{fields:?}: {text}");
        assert!(text.contains("Nothing was changed") && text.contains("invalid_argument"), "{text}");
    }
    let (status, _) = refused(visitor.post_form(&edit, &[("window_secs", "ten")]).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = refused(visitor.post_form("/dashboard/alerts/rules/alr_nope", &[("threshold", "1")]).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(rules(&server).await, before);

    // Without the CSRF field nothing is made, changed or deleted.
    let forged = [("name", "forged"), ("kind", "cost_per_day"), ("threshold", "1")];
    assert_eq!(post_without_csrf(&server, &visitor, "/dashboard/alerts", &forged).await, 403);
    assert_eq!(post_without_csrf(&server, &visitor, &edit, &[("threshold", "0.9")]).await, 403);
    assert_eq!(post_without_csrf(&server, &visitor, &format!("{edit}/delete"), &[]).await, 403);
    assert_eq!(rules(&server).await, before);

    // Delete (the button asks first) removes the rule.
    let page = visitor.get("/dashboard/alerts").await;
    let delete = format!("/dashboard/alerts/rules/{spend_id}/delete");
    assert_eq!(page.attrs(&format!("form[action='{delete}']"), "data-confirm").len(), 1);
    let deleted = visitor.post_form(&delete, &[]).await;
    let page = follow(&mut visitor, &deleted).await;
    assert!(notice(&page).contains(&format!("Rule {spend_id} deleted")), "{}", notice(&page));
    let left: Vec<_> = rules(&server).await.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(left, [id]);
    assert_eq!(rows(&page, "table.rules").len(), 1);
}

/// A spend alert's value and message write the amount the same way (below a cent: its
/// significant digits, not `$0.0001` beside `$0.00012`).
async fn a_spend_alerts_value_and_message_agree(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.alerts_every = Duration::from_millis(200)).await;
    let api = server.api(None);
    api.post("/api/alerts", json!({"name": "spend", "kind": "cost_per_day", "threshold": 0.00001})).await.ok();
    // gpt-4o-mini, 300 in and 120 out: $0.000117.
    crate::pages::usage::post_json(
        &server,
        "/v1/traces",
        &crate::pages::usage::genai_span(9, 1, "gpt-4o-mini", 300, 120, "s-spend"),
    )
    .await;
    eventually("the alert to fire", async || api.get("/api/alerts").await.ok()["active"][0]["id"].as_i64()).await;
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/alerts").await;
    let active = rows(&page, "table.active");
    assert_eq!(active[0][2], "$0.00012", "{active:?}");
    assert!(
        active[0][3].starts_with("$0.00012 spent today") && active[0][3].ends_with("the limit is $0.00001"),
        "{active:?}"
    );
}

async fn a_firing_alert_is_acknowledged_from_the_page(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.alerts_every = Duration::from_millis(200)).await;
    let api = server.api(None);
    let mut visitor = Visitor::new(&server);
    api.post("/api/alerts", json!({"name": "too many errors", "kind": "error_rate", "threshold": 0.2})).await.ok();
    spans(&server, "checkout", 1, 4, 2).await;
    let alert_id = eventually("the alert to fire", async || {
        let page = api.get("/api/alerts").await.ok();
        page["active"][0]["id"].as_i64()
    })
    .await;

    let page = visitor.get("/dashboard/alerts").await;
    let active = rows(&page, "table.active");
    assert_eq!(active.len(), 1, "{active:?}");
    assert_eq!(active[0][0], "too many errors");
    assert_eq!(active[0][2], "33.3%", "the measured share, as a percentage");
    assert!(active[0][3].contains("2 of 6 spans failed"), "{active:?}");
    assert_eq!(active[0][4], "no webhook", "nothing was delivered: the rule has no webhook");
    assert_eq!(active[0][5], "Acknowledge");
    // The overview shows what fires.
    let overview = visitor.get("/dashboard").await;
    let firing = overview.texts("section.firing li");
    assert_eq!(firing.len(), 1, "{}", overview.main_text());
    assert!(firing[0].contains("too many errors") && firing[0].contains("33.3%"), "{firing:?}");
    let history = rows(&page, "table.history");
    assert_eq!((history[0][0].as_str(), history[0][5].as_str()), (alert_id.to_string().as_str(), "firing"));

    // Acknowledging an alert that does not exist: the failure, with its 404.
    let (status, text) = refused(visitor.post_form("/dashboard/alerts/999999/ack", &[]).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{text}");
    assert!(text.contains("Nothing was changed"), "{text}");
    // Nor without the CSRF field.
    let ack = format!("/dashboard/alerts/{alert_id}/ack");
    assert_eq!(page.attrs(&format!("form[action='{ack}']"), "method"), ["post"]);
    assert_eq!(post_without_csrf(&server, &visitor, &ack, &[]).await, 403);
    assert!(api.get("/api/alerts").await.ok()["active"][0]["acknowledged_at"].is_null());

    let acked = visitor.post_form(&ack, &[]).await;
    let page = follow(&mut visitor, &acked).await;
    assert!(notice(&page).contains(&format!("Alert {alert_id} of too many errors acknowledged")), "{}", notice(&page));
    let alert = api.get("/api/alerts").await.ok()["active"][0].clone();
    assert!(alert["acknowledged_at"].is_string(), "{alert}");
    let active = rows(&page, "table.active");
    assert!(active[0][5].ends_with(" UTC"), "an acknowledged alert shows when instead of the button: {active:?}");
}
