//! Every error of the seed, with the table's status and code, and nothing changed by them.

use roost_proto::v1::ListInstancesRequest;
use roost_tests::{Api, Backend, each_backend};
use serde_json::{Value, json};
use tonic::Code;

use super::start;

each_backend!(
    bad_missing_and_revoked_keys_are_401,
    other_accounts_instances_are_404,
    short_of_credits_is_402_and_creates_nothing,
    every_409_of_the_seed,
    bad_bodies_are_400_and_oversized_ones_413
);

/// Every keyed route, with a placeholder instance id.
fn keyed_routes(id: &str) -> Vec<(&'static str, String, Value)> {
    vec![
        ("POST", "/api/provision".to_owned(), json!({"runtime": "echo", "brief": "b"})),
        ("GET", "/api/instances".to_owned(), Value::Null),
        ("GET", format!("/api/instances/{id}"), Value::Null),
        ("GET", format!("/api/instances/{id}/activity"), Value::Null),
        ("POST", format!("/api/instances/{id}/messages"), json!({"text": "hi"})),
        ("POST", format!("/api/instances/{id}/config"), json!({"agent_brief": "x"})),
        ("POST", format!("/api/instances/{id}/pause"), json!({})),
        ("POST", format!("/api/instances/{id}/resume"), json!({})),
        ("POST", format!("/api/instances/{id}/destroy"), json!({})),
        ("GET", "/api/account".to_owned(), Value::Null),
        ("GET", "/api/account/ledger".to_owned(), Value::Null),
    ]
}

async fn call(api: &Api, method: &str, path: &str, body: Value) -> roost_tests::Reply {
    if method == "GET" { api.get(path).await } else { api.post(path, body).await }
}

async fn bad_missing_and_revoked_keys_are_401(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "mine").await["id"].as_str().unwrap().to_owned();

    // A key in use, then revoked: refused from the next call on.
    let revoked = server.store().await.create_key(&account.id, "to revoke").await.unwrap();
    assert_eq!(api.with_key(Some(&revoked.secret)).get("/api/instances").await.status, 200);
    server.revoke_key(&revoked.id).await;
    let keys = [None, Some("rsk_notarealkey"), Some("not-even-the-format"), Some(revoked.secret.as_str())];
    for key in keys {
        let caller = api.with_key(key);
        for (method, path, body) in keyed_routes(&id) {
            call(&caller, method, &path, body).await.err(401, "unauthenticated");
        }
    }
    // The same over gRPC; the catalogue alone needs no key.
    let mut grpc = server.agents("rsk_notarealkey").await;
    assert_eq!(grpc.list_instances(ListInstancesRequest {}).await.unwrap_err().code(), Code::Unauthenticated);
    assert_eq!(server.api(None).get("/api/runtimes").await.status, 200);
    // Nothing was provisioned by the refused calls.
    assert_eq!(api.get("/api/instances").await.ok().as_array().unwrap().len(), 1);
}

async fn other_accounts_instances_are_404(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let owner = server.account(1_000).await;
    let stranger = server.account(1_000).await;
    let id = server.api(Some(&owner)).provision("echo", "mine").await["id"].as_str().unwrap().to_owned();
    server.api(Some(&owner)).wait_status(&id, "running").await;

    let api = server.api(Some(&stranger));
    for (method, path, body) in keyed_routes(&id).into_iter().filter(|(_, p, _)| p.contains(&id)) {
        call(&api, method, &path, body).await.err(404, "not_found");
    }
    for (method, path, body) in keyed_routes("ins_doesnotexist").into_iter().filter(|(_, p, _)| p.contains("ins_")) {
        call(&api, method, &path, body).await.err(404, "not_found");
    }
    // Still running and untouched for its owner.
    let owner_view = server.api(Some(&owner)).get(&format!("/api/instances/{id}")).await.ok();
    assert_eq!(owner_view["status"], "running");
    assert_eq!(owner_view["brief"], "mine");
}

async fn short_of_credits_is_402_and_creates_nothing(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(499).await;
    let api = server.api(Some(&account));
    let first = api.provision("echo-paid", "first is free").await;
    api.wait_status(first["id"].as_str().unwrap(), "running").await;

    let reply = api.post("/api/provision", json!({"runtime": "example", "brief": "costs 500"})).await;
    reply.err(402, "insufficient_credits");
    assert_eq!(api.get("/api/instances").await.ok().as_array().unwrap().len(), 1);
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 499);
}

async fn every_409_of_the_seed(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));

    // Provision while another deploy of the account is still settling.
    let slow = api.provision("slow", "takes its time").await;
    let slow_id = slow["id"].as_str().unwrap().to_owned();
    api.post("/api/provision", json!({"runtime": "echo", "brief": "b"})).await.err(409, "deploy_settling");
    // Messages and lifecycle calls to an agent that is not running yet.
    api.message(&slow_id, "too early").await.err(409, "wrong_state");
    api.post(&format!("/api/instances/{slow_id}/pause"), json!({})).await.err(409, "wrong_state");
    api.post(&format!("/api/instances/{slow_id}/resume"), json!({})).await.err(409, "wrong_state");
    api.post(&format!("/api/instances/{slow_id}/config"), json!({"model": "m"})).await.err(409, "wrong_state");
    api.wait_status(&slow_id, "running").await;

    // Running: resume is the wrong call. Paused: pause and messages are.
    api.post(&format!("/api/instances/{slow_id}/resume"), json!({})).await.err(409, "wrong_state");
    api.post(&format!("/api/instances/{slow_id}/pause"), json!({})).await.ok();
    api.post(&format!("/api/instances/{slow_id}/pause"), json!({})).await.err(409, "wrong_state");
    api.message(&slow_id, "asleep?").await.err(409, "wrong_state");
    // Config on a paused agent is kept for the resume, and it stays paused.
    let kept = api.post(&format!("/api/instances/{slow_id}/config"), json!({"agent_brief": "later"})).await.ok();
    assert_eq!(kept["status"], "paused");
    assert_eq!(api.get(&format!("/api/instances/{slow_id}")).await.ok()["status"], "paused");
    // Resume while another deploy settles is refused too.
    let other = api.provision("slow", "another").await;
    api.post(&format!("/api/instances/{slow_id}/resume"), json!({})).await.err(409, "deploy_settling");
    api.wait_status(other["id"].as_str().unwrap(), "running").await;
    api.post(&format!("/api/instances/{slow_id}/resume"), json!({})).await.ok();
    api.wait_status(&slow_id, "running").await;
    assert_eq!(api.message(&slow_id, "awake").await.ok()["reply"], "[later] awake");
}

async fn bad_bodies_are_400_and_oversized_ones_413(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "b").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let bad_provisions = [
        json!({}),
        json!({"brief": "no runtime"}),
        json!({"runtime": "echo"}),
        json!({"runtime": "echo", "brief": "   "}),
        json!({"runtime": "warp-drive", "brief": "b"}),
        json!({"runtime": "echo", "brief": "b", "model_mode": "psychic"}),
        json!({"runtime": "echo", "brief": "b", "colour": "red"}),
        json!({"runtime": 7, "brief": "b"}),
    ];
    for body in bad_provisions {
        let reply = api.post("/api/provision", body.clone()).await;
        assert_eq!(
            (reply.status, reply.body["code"].as_str()),
            (400, Some("invalid_argument")),
            "{body}: {}",
            reply.body
        );
    }
    let messages = format!("/api/instances/{id}/messages");
    api.post(&messages, json!({})).await.err(400, "invalid_argument");
    api.post(&messages, json!({"text": ""})).await.err(400, "invalid_argument");
    api.post(&messages, json!({"text": "hi", "urgent": true})).await.err(400, "invalid_argument");
    api.post(&format!("/api/instances/{id}/config"), json!({})).await.err(400, "invalid_argument");
    api.post(&format!("/api/instances/{id}/config"), json!({"agent_brief": ""})).await.err(400, "invalid_argument");
    api.post(&format!("/api/instances/{id}/config"), json!({"provider_api_key": "lower-case name"}))
        .await
        .err(400, "invalid_argument");
    api.get(&format!("/api/instances/{id}/activity?limit=lots")).await.err(400, "invalid_argument");

    let huge_brief = "b".repeat(16 * 1024 + 1);
    api.post("/api/provision", json!({"runtime": "echo", "brief": huge_brief})).await.err(413, "payload_too_large");
    api.post(&format!("/api/instances/{id}/config"), json!({"agent_brief": huge_brief}))
        .await
        .err(413, "payload_too_large");
    api.post(&messages, json!({"text": "t".repeat(64 * 1024 + 1)})).await.err(413, "payload_too_large");
    // At the limit is fine.
    assert_eq!(api.post(&messages, json!({"text": "t".repeat(64 * 1024)})).await.status, 200);

    // None of it changed anything.
    assert_eq!(api.get("/api/instances").await.ok().as_array().unwrap().len(), 1);
    assert_eq!(api.get(&format!("/api/instances/{id}")).await.ok()["brief"], "b");
}
