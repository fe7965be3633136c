//! The process driver with roost's example runtime: its environment, restarts on config,
//! pause and resume of the real process, crashes and bad answers.

use std::time::Duration;

use roost_tests::{
    Api, Backend, each_backend,
    process::{is_alive as alive, runtime_pids},
};
use serde_json::{Value, json};

use super::start;

each_backend!(
    config_restarts_the_process_with_the_new_environment,
    pause_stops_the_process_and_resume_starts_another,
    a_crash_is_noticed_and_reported,
    garbage_fails_the_turn_but_not_the_agent,
    a_runtime_that_cannot_start_fails_its_boot,
    an_agent_keeps_its_workspace_until_it_is_destroyed
);

async fn env(api: &Api, id: &str) -> Value {
    serde_json::from_str(api.message(id, "env").await.ok()["reply"].as_str().unwrap()).unwrap()
}

async fn wait_dead(pids: &[i64]) {
    for _ in 0..100 {
        if !pids.iter().any(|pid| alive(*pid)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("runtime processes {pids:?} are still alive");
}

/// The agent's runtime processes on the host: some, none shared with `before`.
fn fresh_pids(id: &str, before: &[i64]) -> Vec<i64> {
    let pids = runtime_pids(id);
    assert!(!pids.is_empty(), "the agent's runtime runs");
    assert!(pids.iter().all(|pid| !before.contains(pid)), "new processes: {pids:?} after {before:?}");
    pids
}

async fn config_restarts_the_process_with_the_new_environment(backend: Backend) {
    let server = start(backend, |_| {}).await;
    // Choosing gpt-4o makes its managed turns metered: they need credits.
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let created = api.provision("example", "first brief").await;
    let id = created["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let before = env(&api, &id).await;
    assert_eq!(before["brief"], "first brief");
    assert_eq!(before["model_mode"], "managed");
    assert_eq!(before["model"], "example");
    assert_eq!(before["instance_id"], id);
    assert_eq!(before["provider_api_key_set"], false);
    // Inside its sandbox, roost's relay stands for roost.
    assert_eq!(before["otlp_endpoint"], "http://127.0.0.1:7300");
    assert_eq!(before["openai_base_url"], "http://127.0.0.1:7300/llm/v1");
    assert_eq!(before["anthropic_base_url"], "http://127.0.0.1:7300/llm/anthropic");
    assert_eq!(before["gateway_token_set"], true);
    let before_pids = fresh_pids(&id, &[]);

    let body = json!({"agent_brief": "second brief", "PROVIDER_API_KEY": "sk-test", "MESSAGING_BOT_TOKEN": "1:t", "model": "gpt-4o"});
    api.post(&format!("/api/instances/{id}/config"), body).await.ok();
    let view = api.wait_status(&id, "running").await;
    assert_eq!(
        view["config"],
        json!({"provider_api_key_set": true, "messaging_bot_token_set": true, "channel": "telegram", "allowed_chat_ids": []})
    );
    assert_eq!(view["model"], "gpt-4o");

    let after = env(&api, &id).await;
    fresh_pids(&id, &before_pids);
    assert_eq!(after["brief"], "second brief");
    assert_eq!(after["model"], "gpt-4o");
    // The secrets stay in roost: the model gateway and the Telegram channel use them.
    assert_eq!(after["provider_api_key_set"], false);
    assert_eq!(after["messaging_bot_token_set"], false);
    wait_dead(&before_pids).await;

    // An empty value removes a secret.
    api.post(&format!("/api/instances/{id}/config"), json!({"PROVIDER_API_KEY": ""})).await.ok();
    let view = api.wait_status(&id, "running").await;
    assert_eq!(view["config"]["provider_api_key_set"], false);
}

async fn pause_stops_the_process_and_resume_starts_another(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "sleepy").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let pids = fresh_pids(&id, &[]);

    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    assert!(!pids.iter().any(|pid| alive(*pid)), "pause returns once the processes are gone");

    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status(&id, "running").await;
    let new_pids = fresh_pids(&id, &pids);

    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    assert!(!new_pids.iter().any(|pid| alive(*pid)), "destroy stops the processes too");
}

async fn a_crash_is_noticed_and_reported(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "fragile").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    api.message(&id, "crash").await.err(502, "runtime_failed");
    let failed = api.wait_status(&id, "failed").await;
    assert!(failed["status_detail"].as_str().unwrap().contains("exited"), "{failed}");
    api.message(&id, "hello?").await.err(409, "wrong_state");
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    assert_eq!(activity["turns"][0]["status"], "failed");

    // A failed agent can be resumed.
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status(&id, "running").await;
    assert_eq!(api.message(&id, "better").await.ok()["reply"], "[fragile] better");
}

async fn garbage_fails_the_turn_but_not_the_agent(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "odd").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let reply = api.message(&id, "garbage").await;
    reply.err(502, "runtime_failed");
    assert!(reply.body["error"].as_str().unwrap().contains("garbage"), "{}", reply.body);
    assert_eq!(api.get(&format!("/api/instances/{id}")).await.ok()["status"], "running");
    assert_eq!(api.message(&id, "fine").await.ok()["reply"], "[odd] fine");
}

async fn a_runtime_that_cannot_start_fails_its_boot(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("broken", "doomed").await["id"].as_str().unwrap().to_owned();
    let failed = api.wait_status(&id, "failed").await;
    assert!(failed["status_detail"].as_str().unwrap().contains("cannot start"), "{failed}");
    // A failed boot no longer counts as settling: the account can provision again.
    assert_eq!(api.post("/api/provision", json!({"runtime": "echo", "brief": "b"})).await.status, 201);
}

/// Each process agent works in its own workspace, `<data-dir>/agents/<id>/` (its HOME,
/// working directory and ROOST_WORKSPACE, owner-only): what it writes there is there after
/// pause and resume, a config restart and a roost restart, `GET /api/instances/{id}` shows
/// its size, another agent does not start in it, and destroy deletes it.
async fn an_agent_keeps_its_workspace_until_it_is_destroyed(backend: Backend) {
    use std::os::unix::fs::PermissionsExt as _;
    let server = start(backend, |_| {}).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "keeper").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let settings = env(&api, &id).await;
    let workspace = server.config.data_dir.join("agents").join(&id);
    for key in ["workspace", "home", "cwd"] {
        assert_eq!(settings[key], workspace.display().to_string(), "{key}");
    }
    assert_eq!(std::fs::metadata(&workspace).unwrap().permissions().mode() & 0o777, 0o700);

    let said = |text: &'static str| {
        let (api, id) = (api.clone(), id.clone());
        async move { api.message(&id, text).await.ok()["reply"].as_str().unwrap().to_owned() }
    };
    assert_eq!(said("keep notes.md remember the tulips").await, "[keeper] kept notes.md");
    // The space its files take on its disk, in whole blocks.
    let view = api.get(&format!("/api/instances/{id}")).await.ok();
    let bytes = view["workspace_bytes"].as_u64().unwrap();
    assert!(bytes >= "remember the tulips".len() as u64 && bytes < 1 << 20, "{view}");

    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status(&id, "running").await;
    assert_eq!(said("recall notes.md").await, "[keeper] remember the tulips", "after pause and resume");
    api.post(&format!("/api/instances/{id}/config"), json!({"agent_brief": "keeper"})).await.ok();
    api.wait_status(&id, "running").await;
    assert_eq!(said("recall notes.md").await, "[keeper] remember the tulips", "after a config restart");

    // Another agent has a workspace of its own.
    let other = api.provision("example", "other").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&other, "running").await;
    assert_eq!(api.message(&other, "recall notes.md").await.ok()["reply"], "[other] no notes.md");

    let server = server.restart().await;
    let api = server.api(Some(&account));
    api.wait_status(&id, "running").await;
    assert_eq!(
        api.message(&id, "recall notes.md").await.ok()["reply"],
        "[keeper] remember the tulips",
        "after a restart"
    );

    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    assert!(!workspace.exists(), "destroy deletes the workspace");
    assert!(!workspace.with_extension("img").exists(), "and its disk");
    assert!(server.config.data_dir.join("agents").join(&other).exists(), "and only that one");
}
