//! `/dashboard/guard`: policies made, changed and deleted by the page's forms, and the
//! incident of an agent the loop detector paused.

use std::time::Duration;

use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::{Value, json};

use super::{agent, eventually, follow, notice, post_without_csrf, refused, row, rows};

each_backend!(guard_policies_are_made_changed_and_deleted_and_incidents_shown);

async fn policies(server: &TestServer) -> Vec<Value> {
    server.api(None).get("/api/guard").await.ok()["policies"].as_array().unwrap().clone()
}

async fn guard_policies_are_made_changed_and_deleted_and_incidents_shown(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.guard_every = Duration::from_millis(200)).await;
    let api = server.api(None);
    let mut visitor = Visitor::new(&server);
    let (looper, owner) = agent(&server, "example").await;

    let empty = visitor.get("/dashboard/guard").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.backed_by(), ["GET /api/guard", "GET /api/channels"]);
    assert_eq!(empty.attrs("select[name=instance_id] option", "value"), ["", looper.as_str()], "every agent, or one");
    let text = empty.main_text();
    assert!(text.contains("No guard policies") && text.contains("No incidents"), "{text}");
    assert_eq!(empty.attrs("select[name=kind] option", "value"), ["spend_per_day", "tool_loop"]);

    // Made by the form, for one agent; another over REST for every agent.
    let made =
        visitor.post_form("/dashboard/guard", &[("kind", "tool_loop"), ("instance_id", &looper), ("limit", "3")]).await;
    let page = follow(&mut visitor, &made).await;
    assert!(notice(&page).contains(&format!("(tool_loop for {looper}) created")), "{}", notice(&page));
    let listed = policies(&server).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let loop_id = listed[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&listed[0]["kind"], &listed[0]["limit"], &listed[0]["enabled"]),
        (&json!("tool_loop"), &json!(3.0), &json!(true))
    );
    let spend = api.post("/api/guard", json!({"kind": "spend_per_day", "limit": 2.5})).await.ok();
    let spend_id = spend["id"].as_str().unwrap().to_owned();
    let page = visitor.get("/dashboard/guard").await;
    assert_eq!(
        row(&page, "table.policies", &loop_id)[1..5],
        ["Tool loop", looper.as_str(), "3 identical calls", "enforced"]
    );
    assert_eq!(
        row(&page, "table.policies", &spend_id)[1..5],
        ["Spend per day", "every agent", "$2.50 a day", "enforced"]
    );

    // The agent's runtime reports the same tool call with the same input three times (with
    // its own agent token: what only names it would not count): paused, an incident.
    for _ in 0..2 {
        owner.message(&looper, r#"tool:search {"q":"same"}"#).await.ok();
    }
    // The guard may pause the agent before this turn ends (409 for it): either way, paused.
    owner.message(&looper, r#"tool:search {"q":"same"}"#).await;
    owner.wait_status(&looper, "paused").await;
    // The incident is written once the pause is done.
    let page = eventually("the incident", async || {
        let page = visitor.get("/dashboard/guard").await;
        (rows(&page, "table.incidents").len() == 1).then_some(page)
    })
    .await;
    let incidents = rows(&page, "table.incidents");
    assert_eq!(
        (incidents[0][2].as_str(), incidents[0][3].as_str(), incidents[0][5].as_str()),
        (looper.as_str(), loop_id.as_str(), "paused")
    );
    assert!(incidents[0][1].ends_with(" UTC"), "{incidents:?}");

    // The edit form: only what is sent changes.
    let edit = format!("/dashboard/guard/{loop_id}");
    assert_eq!(page.attrs(&format!("form[action='{edit}'] input[name=limit]"), "value"), ["3"]);
    let edited = visitor.post_form(&edit, &[("limit", "5")]).await;
    assert!(notice(&follow(&mut visitor, &edited).await).contains("updated"));
    let policy = policies(&server).await.into_iter().find(|p| p["id"] == loop_id.as_str()).unwrap();
    assert_eq!((&policy["limit"], &policy["enabled"]), (&json!(5.0), &json!(true)));
    let edited = visitor.post_form(&edit, &[("limit", ""), ("enabled", "false")]).await;
    let page = follow(&mut visitor, &edited).await;
    let policy = policies(&server).await.into_iter().find(|p| p["id"] == loop_id.as_str()).unwrap();
    assert_eq!((&policy["limit"], &policy["enabled"]), (&json!(5.0), &json!(false)));
    assert_eq!(row(&page, "table.policies", &loop_id)[4], "disabled");

    // Bad values: the API's 400 (or 404), nothing changed.
    let before = policies(&server).await;
    for (fields, status) in [
        (vec![("kind", "spend_per_day"), ("limit", "")], 400),
        (vec![("kind", "tool_loop"), ("limit", "1.5")], 400),
        (vec![("kind", "tool_loop"), ("limit", "many")], 400),
        (vec![("kind", "tool_loop"), ("limit", "3"), ("instance_id", "ins_nope")], 404),
    ] {
        let (got, text) = refused(visitor.post_form("/dashboard/guard", &fields).await).await;
        assert_eq!(got.as_u16(), status, "{fields:?}: {text}");
        assert!(text.contains("Nothing was changed"), "{text}");
    }
    let (got, _) = refused(visitor.post_form(&edit, &[("enabled", "maybe")]).await).await;
    assert_eq!(got, StatusCode::BAD_REQUEST);
    // Without the CSRF field: nothing made, changed or deleted.
    assert_eq!(
        post_without_csrf(&server, &visitor, "/dashboard/guard", &[("kind", "tool_loop"), ("limit", "4")]).await,
        403
    );
    assert_eq!(post_without_csrf(&server, &visitor, &edit, &[("enabled", "true")]).await, 403);
    assert_eq!(post_without_csrf(&server, &visitor, &format!("{edit}/delete"), &[]).await, 403);
    assert_eq!(policies(&server).await, before);

    let deleted = visitor.post_form(&format!("/dashboard/guard/{spend_id}/delete"), &[]).await;
    let page = follow(&mut visitor, &deleted).await;
    assert!(notice(&page).contains(&format!("Policy {spend_id} deleted")));
    let left: Vec<_> = policies(&server).await.iter().map(|p| p["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(left, [loop_id]);
    assert_eq!(rows(&page, "table.policies").len(), 1);
}
