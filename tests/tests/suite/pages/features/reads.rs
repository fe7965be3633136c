//! The read-only feature pages: channels, skills and health; and what the feature pages
//! say when the store cannot answer.

use reqwest::StatusCode;
use roost_tests::{Backend, TestServer, each_backend, pages::Visitor};
use serde_json::json;

use super::{eventually, row, rows, spans};

each_backend!(
    channels_show_each_agents_traffic_and_how_to_connect_a_bot,
    skills_list_every_route_and_tool_with_its_use,
    health_shows_checks_the_store_ingest_and_each_service,
    feature_pages_say_so_when_the_store_cannot_answer,
);

async fn channels_show_each_agents_traffic_and_how_to_connect_a_bot(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard/channels").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.backed_by(), ["GET /api/channels"]);
    let text = empty.main_text();
    assert!(text.contains("No hosted agents"), "{text}");
    assert!(text.contains(r#"POST /api/instances/{id}/config {"MESSAGING_BOT_TOKEN": "…"}"#), "{text}");

    // The example runtime serves a chat bot when given a token.
    let account = server.account(10_000).await;
    let owner = server.api(Some(&account));
    let id = owner.provision("example", "chatty").await["id"].as_str().unwrap().to_owned();
    owner.wait_status(&id, "running").await;
    for text in ["one", "two"] {
        owner.message(&id, text).await.ok();
    }
    let page = eventually("the turns on the page", async || {
        let page = visitor.get("/dashboard/channels").await;
        (rows(&page, "table.channels").first().is_some_and(|r| r.get(5).is_some_and(|c| c == "2"))).then_some(page)
    })
    .await;
    let agent = row(&page, "table.channels", &id);
    assert!(agent[0].contains(&account.id), "{agent:?}");
    assert_eq!(agent[1..8], ["example", "running", "none", "api", "2", "2", "0"], "{agent:?}");
    assert!(agent[8].ends_with(" UTC"), "{agent:?}");
    assert!(page.main_text().contains("To connect a Telegram bot"), "{}", page.main_text());

    owner.post(&format!("/api/instances/{id}/config"), json!({"MESSAGING_BOT_TOKEN": "123:abc"})).await.ok();
    owner.wait_status(&id, "running").await;
    let page = visitor.get("/dashboard/channels").await;
    assert_eq!(row(&page, "table.channels", &id)[3], "connected");
    assert!(!page.body.contains("123:abc"), "never the token itself");
    assert!(!page.main_text().contains("To connect a Telegram bot"));
    let bot = row(&page, "#bots", &id);
    assert_eq!(bot[1], "@bot123", "the bot's username from getMe: {bot:?}");
}

async fn skills_list_every_route_and_tool_with_its_use(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    api.get("/api/alerts").await.ok();
    api.get("/api/alerts").await.ok();
    api.get("/api/crons/cron_nope").await.err(404, "not_found");
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/dashboard/skills").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(page.backed_by(), ["GET /api/skills"]);
    assert!(page.attrs("main a", "href").contains(&"/skill.md".to_owned()));
    assert!(page.texts("h2").iter().any(|h| h == "Dashboard pages"), "{:?}", page.texts("h2"));
    assert!(page.texts("h2").iter().any(|h| h == "MCP tools"), "{:?}", page.texts("h2"));

    let skill = |name: &str| {
        let all = rows(&page, "table.skills");
        all.iter().find(|r| r[0] == name).unwrap_or_else(|| panic!("no {name} in {all:?}")).clone()
    };
    let alerts = skill("GET /api/alerts");
    assert_eq!(alerts[2..4], ["2", "0"], "{alerts:?}");
    assert!(alerts[4].ends_with(" UTC"), "{alerts:?}");
    let cron = skill("GET /api/crons/{id}");
    assert_eq!(cron[2..4], ["1", "1"], "a 404 is a failed call: {cron:?}");
    let unused = skill("DELETE /api/alerts/rules/{id}");
    assert_eq!(unused[2..5], ["0", "0", "–"], "{unused:?}");
    // Every skill of the API is a row.
    let listed = api.get("/api/skills").await.ok()["skills"].as_array().unwrap().len();
    assert_eq!(rows(&page, "table.skills").len(), listed);
    // Descriptions are Markdown: their code spans are set as code, no backtick shows.
    assert!(!page.texts("table.skills td:nth-child(2)").join(" ").contains('`'), "{}", page.main_text());
    assert!(page.texts("table.skills td:nth-child(2) code").iter().any(|c| c == "running"), "{}", page.main_text());
    let docs = visitor.get("/docs").await;
    assert!(!docs.main_text().contains('`'), "the API reference shows no backticks");
}

async fn health_shows_checks_the_store_ingest_and_each_service(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let empty = visitor.get("/dashboard/health").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert!(empty.main_text().contains("No service has sent telemetry yet"), "{}", empty.main_text());

    spans(&server, "page-checkout", 3, 5, 0).await;
    spans(&server, "page-payments", 4, 1, 3).await;
    let page = eventually("both services stored", async || {
        let page = visitor.get("/dashboard/health").await;
        (rows(&page, "table.services").len() == 2 && row(&page, "table.stored", "Spans")[1] == "9").then_some(page)
    })
    .await;
    let backed = page.backed_by();
    assert_eq!(backed[..2], ["GET /api/health", "GET /api/status"], "{backed:?}");
    assert!(backed[2].starts_with("POST /api/local/query ") && backed[2].contains(r#""shape":"health""#), "{backed:?}");

    let checks = rows(&page, "table.report");
    let store = checks.iter().find(|c| c[0] == "store").unwrap_or_else(|| panic!("{checks:?}"));
    assert_eq!(store[1], "ok", "{checks:?}");
    assert!(checks.iter().any(|c| c[0] == "workers"), "{checks:?}");
    let text = page.main_text();
    assert!(text.contains(&format!("Backend {}", backend.name())), "{text}");
    assert!(text.contains("Reachable yes"), "{text}");
    assert!(text.contains("Verdict none"), "{text}");
    assert_eq!(row(&page, "table.ingest", "Spans")[2], "9");

    let checkout = row(&page, "table.services", "page-checkout");
    assert_eq!(checkout[1], "ok", "{checkout:?}");
    assert_eq!(checkout[4..7], ["5", "0", "0.0%"], "{checkout:?}");
    let payments = row(&page, "table.services", "page-payments");
    assert_eq!(payments[1], "erroring", "{payments:?}");
    assert_eq!(payments[4..7], ["4", "3", "75.0%"], "{payments:?}");
}

/// The tables the alerts, guard and crons pages read.
const TABLES: &[&str] = &["crons", "cron_runs", "alert_rules", "alerts", "guard_policies", "guard_incidents"];

async fn feature_pages_say_so_when_the_store_cannot_answer(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    for table in TABLES {
        server.sql(&format!("ALTER TABLE {table} RENAME TO {table}_gone")).await.unwrap();
    }
    for path in ["/dashboard/alerts", "/dashboard/guard", "/dashboard/crons"] {
        let page = visitor.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        let warning = page.texts("p.warning").join(" ");
        assert!(warning.contains("not an empty store"), "{path}: {warning}");
    }
    let health = visitor.get("/dashboard/health").await;
    let text = health.main_text();
    assert!(text.contains("Last failure"), "{text}");
    assert!(text.contains("Verdict transient"), "the store itself answers: {text}");
    for table in TABLES {
        server.sql(&format!("ALTER TABLE {table}_gone RENAME TO {table}")).await.unwrap();
    }
    // The tables are back: the pages answer without a warning.
    let alerts = visitor.get("/dashboard/alerts").await;
    assert!(alerts.texts("p.warning").is_empty(), "{:?}", alerts.texts("p.warning"));
}
