//! `/dashboard/updates`: the updater's state, the auto_update toggle (and the kill switch
//! that overrides it), Check now against a local package index, the history.

use std::time::Duration;

use reqwest::StatusCode;
use roost_server::update::Role;
use roost_tests::{Backend, FakeIndex, FakeInstaller, ROOST_PACKAGE, TestServer, each_backend, pages::Visitor};
use serde_json::{Value, json};

use super::{follow, notice, post_without_csrf, refused, rows};

each_backend!(
    auto_update_is_turned_off_and_on_from_the_page,
    the_kill_switch_is_shown_over_the_stored_choice,
    check_now_shows_what_the_index_has,
);

async fn config(server: &TestServer) -> Value {
    server.api(None).get("/api/update-check/config").await.ok()
}

async fn auto_update_is_turned_off_and_on_from_the_page(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/updates").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(
        page.backed_by(),
        ["GET /api/update-check/status", "GET /api/update-check/config", "GET /api/update-check/history?limit=50"]
    );
    let status = server.api(None).get("/api/update-check/status").await.ok();
    let text = page.main_text();
    assert!(text.contains(&format!("Running {}", status["current"].as_str().unwrap())), "{text}");
    assert!(text.contains("Stored choice not set"), "{text}");
    assert!(!text.contains("kill switch is on"), "{text}");
    assert_eq!(page.attrs("form[action='/dashboard/updates/config'] input[name=auto_update]", "value"), ["true"]);

    let off = visitor.post_form("/dashboard/updates/config", &[("auto_update", "false")]).await;
    let page = follow(&mut visitor, &off).await;
    assert!(notice(&page).contains("Automatic updates are off"), "{}", notice(&page));
    let stored = config(&server).await;
    assert_eq!(
        (&stored["config"]["auto_update"], &stored["config"]["auto_update_source"]),
        (&json!(false), &json!("user"))
    );
    assert!(page.main_text().contains("Stored choice off · set by user"), "{}", page.main_text());
    assert_eq!(page.texts("form[action='/dashboard/updates/config'] button"), ["Turn automatic updates on"]);
    // The change is in the history.
    assert!(rows(&page, "table.history").iter().any(|r| r[1] == "config"), "{:?}", rows(&page, "table.history"));

    // Without the CSRF field, or with no value or a wrong one: nothing changes.
    assert_eq!(
        post_without_csrf(&server, &visitor, "/dashboard/updates/config", &[("auto_update", "true")]).await,
        403
    );
    let (status, text) = refused(visitor.post_form("/dashboard/updates/config", &[]).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("auto_update"), "{text}");
    let (status, _) =
        refused(visitor.post_form("/dashboard/updates/config", &[("auto_update", "sometimes")]).await).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(config(&server).await["config"]["auto_update"], false);

    let on = visitor.post_form("/dashboard/updates/config", &[("auto_update", "true")]).await;
    let page = follow(&mut visitor, &on).await;
    assert!(notice(&page).contains("Automatic updates are on"), "{}", notice(&page));
    assert_eq!(config(&server).await["config"]["auto_update"], true);
    assert_eq!(page.texts("form[action='/dashboard/updates/config'] button"), ["Turn automatic updates off"]);
}

async fn the_kill_switch_is_shown_over_the_stored_choice(backend: Backend) {
    let server = TestServer::start_with(backend, |c| {
        c.update.kill_switch = true;
        c.update.auto_update_env = "0".into();
    })
    .await;
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/updates").await;
    let warning = page.texts("p.warning").join(" ");
    assert!(warning.contains("The kill switch is on"), "{}", page.main_text());
    assert!(warning.contains("SERVICE_AUTO_UPDATE=0"), "the value the operator set: {warning}");
    assert!(
        page.texts("form[action='/dashboard/updates/config'] button").is_empty(),
        "nothing offers to turn on what the kill switch holds off"
    );
    let on = visitor.post_form("/dashboard/updates/config", &[("auto_update", "true")]).await;
    let page = follow(&mut visitor, &on).await;
    assert!(notice(&page).contains("the kill switch"), "{}", notice(&page));
    let stored = config(&server).await;
    assert_eq!((&stored["config"]["auto_update"], &stored["effective_auto_update"]), (&json!(true), &json!(false)));
    let text = page.main_text();
    assert!(text.contains("does not install unattended") && text.contains("Stored choice on"), "{text}");
    assert!(text.contains("Kill switch on"), "{text}");
}

async fn check_now_shows_what_the_index_has(backend: Backend) {
    let index = FakeIndex::start().await;
    let dir = tempfile::tempdir().unwrap();
    let installer = FakeInstaller::new(dir.path());
    let (url, command, signatures) = (index.url.clone(), installer.command(), index.signature_url());
    let server = TestServer::start_with(backend, |c| {
        // A dashboard-role roost checks but does not install.
        c.update.role = Role::Dashboard;
        c.update.index_url = url;
        c.update.install_command = command;
        c.update.signature_url = signatures;
        c.update.version = "0.2.0".into();
    })
    .await;
    let mut visitor = Visitor::new(&server);
    index.publish(ROOST_PACKAGE, "0.3.0", Duration::from_secs(3600));

    visitor.get("/dashboard/updates").await;
    assert_eq!(post_without_csrf(&server, &visitor, "/dashboard/updates/check", &[]).await, 403);
    let checked = visitor.post_form("/dashboard/updates/check", &[]).await;
    let page = follow(&mut visitor, &checked).await;
    assert!(notice(&page).starts_with("Checked the package index: "), "{}", notice(&page));
    assert!(notice(&page).contains("0.3.0"), "{}", notice(&page));
    let text = page.main_text();
    assert!(text.contains("roost 0.3.0 is available. This is 0.2.0."), "{text}");
    assert!(text.contains("Latest seen 0.3.0") && text.contains("Update available yes"), "{text}");
    assert!(text.contains(&format!("Package index {}", index.url)), "{text}");
    assert!(text.contains("Role dashboard"), "{text}");
    let history = rows(&page, "table.history");
    assert!(history[0][0].ends_with(" UTC"), "{history:?}");
    assert!(history.iter().any(|r| r[1] == "check" && r.join(" ").contains("0.3.0")), "{history:?}");
    assert!(installer.installs().is_empty(), "a dashboard role never installs");

    // The overview's banner names the version; its Dismiss button hides it for good.
    let overview = visitor.get("/dashboard").await;
    let banner = overview.texts("section.banner").join(" ");
    assert!(banner.contains("roost 0.3.0 is available.") && banner.contains("This is 0.2.0."), "{banner}");
    assert_eq!(overview.attrs("section.banner input[name=version]", "value"), ["0.3.0"]);
    let dismissed = visitor.post_form("/dashboard/dismiss", &[("version", "0.3.0")]).await;
    let overview = follow(&mut visitor, &dismissed).await;
    assert!(notice(&overview).contains("The banner for 0.3.0 is dismissed."), "{}", notice(&overview));
    assert!(overview.texts("section.banner").is_empty(), "the banner is gone");
    let status = server.api(None).get("/api/update-check/status").await.ok();
    assert_eq!(status["show_banner"], false);
}
