//! Money and turns under concurrency: racing provisions, spending to zero, the per-agent
//! FIFO queue, its bound, callers that leave, and the hard cap.

use std::time::Duration;

use roost_tests::{Backend, each_backend};
use serde_json::{Value, json};

use super::start;

each_backend!(
    destroying_an_agent_mid_turn_cancels_the_turn,
    fifty_concurrent_provisions_create_exactly_one,
    provisions_until_the_credits_run_out_end_in_402,
    concurrent_messages_run_one_at_a_time_in_arrival_order,
    a_turn_over_the_cap_is_504_and_the_agent_keeps_running,
    a_full_queue_is_429,
    a_caller_that_hangs_up_leaves_the_queue
);

async fn fifty_concurrent_provisions_create_exactly_one(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(100_000).await;
    let api = server.api(Some(&account));
    let replies = futures_join((0..50).map(|i| {
        let api = api.clone();
        async move { api.post("/api/provision", json!({"runtime": "slow", "brief": format!("racer {i}")})).await }
    }))
    .await;
    let created: Vec<_> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 1, "exactly one provision wins");
    for reply in replies.iter().filter(|r| r.status != 201) {
        reply.err(409, "deploy_settling");
    }
    let instances = api.get("/api/instances").await.ok();
    assert_eq!(instances.as_array().unwrap().len(), 1, "never two booting at once");
    // Once it is up, the next provision goes through.
    api.wait_status(created[0].body["id"].as_str().unwrap(), "running").await;
    assert_eq!(api.post("/api/provision", json!({"runtime": "echo", "brief": "next"})).await.status, 201);
}

async fn provisions_until_the_credits_run_out_end_in_402(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(1_050).await;
    let api = server.api(Some(&account));
    let mut created = 0;
    let last = loop {
        // Several at once each round, so debits race each other as well.
        let round = futures_join((0..3).map(|_| {
            let api = api.clone();
            async move { api.post("/api/provision", json!({"runtime": "echo-paid", "brief": "spend"})).await }
        }))
        .await;
        let mut refused = None;
        for reply in round {
            match reply.status {
                201 => {
                    created += 1;
                    assert!(reply.body["balance_cents"].as_i64().unwrap() >= 0, "{}", reply.body);
                    api.wait_status(reply.body["id"].as_str().unwrap(), "running").await;
                }
                409 => reply.err(409, "deploy_settling"),
                _ => refused = Some(reply),
            }
        }
        let balance = api.get("/api/account").await.ok()["balance_cents"].as_i64().unwrap();
        assert!(balance >= 0, "balance went below zero: {balance}");
        if let Some(reply) = refused {
            break reply;
        }
    };
    last.err(402, "insufficient_credits");
    // The first agent is free, then 10 at 100 cents each; 50 cents remain.
    assert_eq!(created, 11);
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 50);
    let ledger = api.get("/api/account/ledger?limit=500").await.ok();
    let debited: i64 = ledger["charges"].as_array().unwrap().iter().map(|c| c["amount_cents"].as_i64().unwrap()).sum();
    assert_eq!(debited, 50, "the ledger adds up to the balance");
}

async fn concurrent_messages_run_one_at_a_time_in_arrival_order(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "serial").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let replies = futures_join((0..20).map(|i| {
        let api = api.clone();
        let id = id.clone();
        async move {
            // Staggered a little so they arrive while earlier ones still run.
            tokio::time::sleep(Duration::from_millis(i * 3)).await;
            api.message(&id, &format!("sleep:30 m{i}")).await
        }
    }))
    .await;
    for reply in replies {
        reply.ok();
    }
    // The runtime saw one turn at a time...
    let stats: Value = serde_json::from_str(api.message(&id, "stats").await.ok()["reply"].as_str().unwrap()).unwrap();
    assert_eq!(stats["peak_concurrency"], 1, "{stats}");
    // ...in the order of its queue, as the activity records them.
    let activity = api.get(&format!("/api/instances/{id}/activity?limit=100")).await.ok();
    let mut turns: Vec<&Value> =
        activity["turns"].as_array().unwrap().iter().filter(|t| t["text"] != "stats").collect();
    turns.sort_by_key(|t| t["seq"].as_i64().unwrap());
    let arrival: Vec<String> =
        turns.iter().map(|t| t["text"].as_str().unwrap().trim_start_matches("sleep:30 ").to_owned()).collect();
    let ran: Vec<String> = stats["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().trim_start_matches("sleep:30 ").to_owned())
        .collect();
    assert_eq!(ran, arrival);
    assert_eq!(ran.len(), 20);
    for pair in turns.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Parsed: RFC 3339 strings with 3, 6 or 9 fraction digits do not sort as text.
        let started = |t: &Value| {
            let at: prost_types::Timestamp = t["started_at"].as_str().unwrap().parse().unwrap();
            (at.seconds, at.nanos)
        };
        assert!(started(a) <= started(b), "started in arrival order: {a} then {b}");
    }
}

async fn a_turn_over_the_cap_is_504_and_the_agent_keeps_running(backend: Backend) {
    let server = start(backend, |config| config.hosting.turn_timeout = Duration::from_millis(500)).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "capped").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    api.message(&id, "sleep:3000 too slow").await.err(504, "turn_timeout");
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    assert_eq!(activity["turns"][0]["status"], "timed_out");
    assert_eq!(api.get(&format!("/api/instances/{id}")).await.ok()["status"], "running");
    assert_eq!(api.message(&id, "quick").await.ok()["reply"], "[capped] quick");
}

async fn a_full_queue_is_429(backend: Backend) {
    let server = start(backend, |config| config.hosting.queue_depth = 2).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "busy").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let running = tokio::spawn({
        let (api, id) = (api.clone(), id.clone());
        async move { api.message(&id, "sleep:1500 first").await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting = tokio::spawn({
        let (api, id) = (api.clone(), id.clone());
        async move { api.message(&id, "second").await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    api.message(&id, "third").await.err(429, "queue_full");
    running.await.unwrap().ok();
    waiting.await.unwrap().ok();
    assert_eq!(api.message(&id, "fourth").await.ok()["reply"], "[busy] fourth");
}

async fn a_caller_that_hangs_up_leaves_the_queue(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "patient").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;

    let first = tokio::spawn({
        let (api, id) = (api.clone(), id.clone());
        async move { api.message(&id, "sleep:1500 first").await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Queued behind the first, then the client gives up.
    let path = format!("/api/instances/{id}/messages");
    let gone = api.post_with_timeout(&path, json!({"text": "impatient"}), Duration::from_millis(300)).await;
    assert!(gone.is_none(), "the client timed out");
    first.await.unwrap().ok();
    api.message(&id, "last").await.ok();

    let stats: Value = serde_json::from_str(api.message(&id, "stats").await.ok()["reply"].as_str().unwrap()).unwrap();
    assert_eq!(stats["order"], json!(["sleep:1500 first", "last"]), "the impatient turn never ran");
}

/// Runs futures concurrently and collects their outputs in order.
async fn futures_join<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}

/// Destroy, like pause and config, ends the turn in flight: its caller gets 409
/// `wrong_state` and the turn stays in the agent's activity as `cancelled` (it was lost with
/// a 503 "moved to another replica" before, on one process too).
async fn destroying_an_agent_mid_turn_cancels_the_turn(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "slow").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let turn = tokio::spawn({
        let (api, id) = (api.clone(), id.clone());
        async move { api.message(&id, "sleep:5000 never answered").await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    let reply = turn.await.unwrap();
    reply.err(409, "wrong_state");
    assert!(reply.body["error"].as_str().unwrap().contains("destroyed"), "{}", reply.body);
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let turns = activity["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{activity}");
    assert_eq!(turns[0]["status"], "cancelled");
    assert_eq!(turns[0]["text"], "sleep:5000 never answered");
    assert_eq!(api.get(&format!("/api/instances/{id}")).await.status, 404);
}
