//! A restart of roost: agents that were up boot again, paused ones stay paused, runtime
//! processes of the old server are gone, and history survives.

use roost_tests::{Backend, each_backend};
use serde_json::{Value, json};

use super::start;

each_backend!(agents_come_back_after_a_restart);

async fn agents_come_back_after_a_restart(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let echo = api.provision("echo", "echo brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&echo, "running").await;
    let process = api.provision("example", "process brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&process, "running").await;
    let paused = api.provision("echo", "paused brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&paused, "running").await;
    api.post(&format!("/api/instances/{paused}/pause"), json!({})).await.ok();
    api.message(&echo, "before").await.ok();
    let old_pids = roost_tests::process::runtime_pids(&process);
    assert!(!old_pids.is_empty());

    let server = server.restart().await;
    assert!(!old_pids.iter().any(|pid| roost_tests::process::is_alive(*pid)), "shutdown stopped the runtime process");
    let api = server.api(Some(&account));
    api.wait_status(&echo, "running").await;
    api.wait_status(&process, "running").await;
    assert_eq!(api.get(&format!("/api/instances/{paused}")).await.ok()["status"], "paused");

    assert_eq!(api.message(&echo, "after").await.ok()["reply"], "[echo brief] after");
    let env: Value = serde_json::from_str(api.message(&process, "env").await.ok()["reply"].as_str().unwrap()).unwrap();
    let pids = roost_tests::process::runtime_pids(&process);
    assert!(!pids.is_empty() && pids.iter().all(|pid| !old_pids.contains(pid)));
    assert_eq!(env["otlp_endpoint"], "http://127.0.0.1:7300", "the new process reports through its relay");
    let turns = api.get(&format!("/api/instances/{echo}/activity")).await.ok()["turns"].clone();
    let texts: Vec<&str> = turns.as_array().unwrap().iter().map(|t| t["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["after", "before"]);
}
