//! `/dashboard/crons` and `/dashboard/crons/{id}`: a cron made by the page's form runs and
//! its runs show; it is edited, killed and deleted from the pages.

use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::Value;

use super::{agent, eventually, follow, notice, post_without_csrf, refused, row, rows};

each_backend!(a_cron_made_on_the_page_runs_and_is_edited_killed_and_deleted);

async fn crons(server: &TestServer) -> Vec<Value> {
    server.api(None).get("/api/crons").await.ok()["crons"].as_array().unwrap().clone()
}

async fn a_cron_made_on_the_page_runs_and_is_edited_killed_and_deleted(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let mut visitor = Visitor::new(&server);
    let (target, _owner) = agent(&server, "echo").await;

    let empty = visitor.get("/dashboard/crons").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.backed_by(), ["GET /api/crons", "GET /api/channels"]);
    assert!(empty.main_text().contains("No crons yet"), "{}", empty.main_text());
    // The form offers the hosted agents to pick, not a field to type an id into.
    assert_eq!(empty.attrs("select[name=instance_id] option", "value"), ["", target.as_str()]);
    let offered = empty.texts("select[name=instance_id] option");
    assert!(offered[1].starts_with(&target) && offered[1].ends_with("(echo, running)"), "{offered:?}");

    // Bad values: the API's 400 (or 404), nothing stored.
    for (fields, status) in [
        (vec![("instance_id", target.as_str()), ("schedule", "every minute"), ("message", "x")], 400),
        (vec![("instance_id", target.as_str()), ("schedule", "* * * * *"), ("message", "")], 400),
        (vec![("instance_id", "ins_nope"), ("schedule", "* * * * *"), ("message", "x")], 404),
        (
            vec![("instance_id", target.as_str()), ("schedule", "* * * * *"), ("message", "x"), ("enabled", "perhaps")],
            400,
        ),
    ] {
        let (got, text) = refused(visitor.post_form("/dashboard/crons", &fields).await).await;
        assert_eq!(got.as_u16(), status, "{fields:?}: {text}");
        assert!(text.contains("Nothing was changed"), "{text}");
    }
    let forged = [("instance_id", target.as_str()), ("schedule", "* * * * *"), ("message", "x")];
    assert_eq!(post_without_csrf(&server, &visitor, "/dashboard/crons", &forged).await, 403);
    assert_eq!(crons(&server).await, Vec::<Value>::new());

    // Made by the form (every second): the answer goes to the cron's own page.
    let made = visitor
        .post_form(
            "/dashboard/crons",
            &[
                ("instance_id", &target),
                ("name", "pinger"),
                ("schedule", "* * * * * *"),
                ("message", "ping from the page"),
                ("enabled", "true"),
            ],
        )
        .await;
    let to = roost_tests::pages::location(&made);
    let id = crons(&server).await[0]["id"].as_str().unwrap().to_owned();
    assert!(to.starts_with(&format!("/dashboard/crons/{id}?done=")), "{to}");
    let page = follow(&mut visitor, &made).await;
    assert!(notice(&page).contains(&format!("Cron {id} created: * * * * * * to {target}")), "{}", notice(&page));
    assert_eq!(page.backed_by(), [format!("GET /api/crons/{id}")]);

    // It runs; the cron's page shows the runs with the agent's reply.
    eventually("a run", async || {
        let got = api.get(&format!("/api/crons/{id}")).await.ok();
        (!got["runs"].as_array().unwrap().is_empty()).then_some(())
    })
    .await;
    let page = visitor.get(&format!("/dashboard/crons/{id}")).await;
    assert_eq!(page.texts("h1")[0], "pinger enabled");
    let runs = rows(&page, "table.runs");
    assert!(!runs.is_empty());
    assert_eq!(runs.last().unwrap()[2], "answered", "{runs:?}");
    assert!(runs.last().unwrap()[3].contains("ping from the page"), "{runs:?}");

    // The list: schedule, agent, message, next and last run, state; a link to the page.
    let list = visitor.get("/dashboard/crons").await;
    let listed = row(&list, "table.crons", "pinger");
    assert_eq!(listed[1..4], ["* * * * * *", target.as_str(), "ping from the page"], "{listed:?}");
    assert!(listed[4].ends_with(" UTC") && listed[5].ends_with(" UTC"), "next and last run: {listed:?}");
    assert_eq!(listed[6], "enabled");
    assert!(list.attrs("table.crons a", "href").contains(&format!("/dashboard/crons/{id}")));

    // Kill from the list (it asks first): back to the list, the cron stopped and kept.
    let kill = format!("/dashboard/crons/{id}/kill");
    assert_eq!(list.attrs(&format!("form[action='{kill}']"), "data-confirm").len(), 1);
    assert_eq!(post_without_csrf(&server, &visitor, &kill, &[]).await, 403);
    assert_eq!(crons(&server).await[0]["enabled"], true);
    let killed = visitor.post_form(&kill, &[("back", "/dashboard/crons")]).await;
    assert!(roost_tests::pages::location(&killed).starts_with("/dashboard/crons?done="));
    let list = follow(&mut visitor, &killed).await;
    assert!(notice(&list).contains("killed"), "{}", notice(&list));
    let cron = api.get(&format!("/api/crons/{id}")).await.ok()["cron"].clone();
    assert_eq!((cron["enabled"].as_bool(), cron["next_run"].is_null()), (Some(false), true), "{cron}");
    assert_eq!(row(&list, "table.crons", "pinger")[6], "stopped");
    assert!(list.attrs(&format!("form[action='{kill}']"), "action").is_empty(), "no Kill for a stopped cron");

    // Edit on the cron's page: a bad schedule is the API's 400 and changes nothing.
    let page = visitor.get(&format!("/dashboard/crons/{id}")).await;
    let edit = format!("/dashboard/crons/{id}");
    assert_eq!(page.attrs(&format!("form[action='{edit}'] input[name=schedule]"), "value"), ["* * * * * *"]);
    let (status, text) = refused(visitor.post_form(&edit, &[("schedule", "61 * * * *")]).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("schedule"), "{text}");
    assert_eq!(post_without_csrf(&server, &visitor, &edit, &[("name", "forged")]).await, 403);
    let unchanged = api.get(&format!("/api/crons/{id}")).await.ok()["cron"].clone();
    assert_eq!((unchanged["schedule"].as_str(), unchanged["name"].as_str()), (Some("* * * * * *"), Some("pinger")));
    // Only the fields sent change: still stopped.
    let edited =
        visitor.post_form(&edit, &[("name", "daily digest"), ("schedule", "0 9 * * *"), ("message", "digest")]).await;
    let page = follow(&mut visitor, &edited).await;
    assert!(notice(&page).contains(&format!("Cron {id} updated")));
    let cron = api.get(&format!("/api/crons/{id}")).await.ok()["cron"].clone();
    assert_eq!(
        (cron["name"].as_str(), cron["schedule"].as_str(), cron["message"].as_str(), cron["enabled"].as_bool()),
        (Some("daily digest"), Some("0 9 * * *"), Some("digest"), Some(false))
    );
    // Enabled again: it has a next run.
    let enabled = visitor.post_form(&edit, &[("enabled", "true")]).await;
    follow(&mut visitor, &enabled).await;
    let cron = api.get(&format!("/api/crons/{id}")).await.ok()["cron"].clone();
    assert!(cron["enabled"] == true && cron["next_run"].is_string(), "{cron}");

    // Delete: back to the list; the cron and its page are gone (a 404 page).
    assert_eq!(post_without_csrf(&server, &visitor, &format!("{edit}/delete"), &[]).await, 403);
    let deleted = visitor.post_form(&format!("{edit}/delete"), &[]).await;
    let list = follow(&mut visitor, &deleted).await;
    assert!(notice(&list).contains(&format!("Cron {id} deleted")));
    assert!(list.main_text().contains("No crons yet"));
    api.get(&format!("/api/crons/{id}")).await.err(404, "not_found");
    let gone = visitor.get(&format!("/dashboard/crons/{id}")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert!(gone.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(gone.main_text().contains("No such cron"), "{}", gone.main_text());
    let (status, _) = refused(visitor.post_form(&format!("{edit}/kill"), &[]).await).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
