//! The control endpoints: pausing and resuming any hosted agent from the dashboard.

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::json;

each_backend!(the_dashboard_pauses_and_resumes_any_agent);

async fn the_dashboard_pauses_and_resumes_any_agent(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(10_000).await;
    let owner = server.api(Some(&account));
    let id = owner.provision("echo", "controlled").await["id"].as_str().unwrap().to_owned();
    owner.wait_status(&id, "running").await;
    let api = server.api(None);

    api.post("/api/control/agents/ins_nope/pause", json!({})).await.err(404, "not_found");
    let foreign = server
        .http
        .post(server.url(&format!("/api/control/agents/{id}/pause")))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert_eq!(
        owner.get(&format!("/api/instances/{id}")).await.ok()["status"],
        "running",
        "the refused call changed nothing"
    );

    let paused = api.post(&format!("/api/control/agents/{id}/pause"), json!({})).await.ok();
    assert_eq!(paused["status"], "paused", "{paused}");
    api.post(&format!("/api/control/agents/{id}/pause"), json!({})).await.err(409, "wrong_state");
    api.post(&format!("/api/control/agents/{id}/resume"), json!({})).await.ok();
    owner.wait_status(&id, "running").await;
}
