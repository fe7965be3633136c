//! Turn records: a reply is sent only after its record commits, and a record the store
//! refuses never takes the other turns of its batch down with it.

use roost_tests::{Backend, each_backend};
use serde_json::json;

use super::start;

each_backend!(
    a_record_the_store_refuses_leaves_the_rest_of_its_batch_stored,
    a_reply_holding_nul_is_stored_and_observed
);

/// Makes the store refuse turn rows whose text is `poison`, as a constraint would.
fn poison_trigger(backend: Backend) -> Vec<&'static str> {
    match backend {
        Backend::Sqlite => vec![
            "CREATE TRIGGER poison BEFORE INSERT ON turns WHEN NEW.text = 'poison' \
             BEGIN SELECT RAISE(ABORT, 'poisoned turn'); END",
        ],
        Backend::Postgres => vec![
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF NEW.text = 'poison' THEN RAISE EXCEPTION 'poisoned turn'; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER poison BEFORE INSERT ON turns FOR EACH ROW EXECUTE FUNCTION poison()",
        ],
    }
}

async fn a_record_the_store_refuses_leaves_the_rest_of_its_batch_stored(backend: Backend) {
    let server = start(backend, |_| {}).await;
    for statement in poison_trigger(backend) {
        server.sql(statement).await.unwrap();
    }
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let mut ids = Vec::new();
    for i in 0..8 {
        let id = api.provision("echo", &format!("agent {i}")).await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
        ids.push(id);
    }

    // Many turns at once, so they share batches with the poisoned ones.
    let calls: Vec<_> = (0..400)
        .map(|i| {
            let (api, id) = (api.clone(), ids[i % ids.len()].clone());
            let text = if i % 100 == 7 { "poison".to_owned() } else { format!("turn {i}") };
            tokio::spawn(async move { (text.clone(), api.message(&id, &text).await) })
        })
        .collect();
    let mut answered = 0;
    for call in calls {
        let (text, reply) = call.await.unwrap();
        if text == "poison" {
            reply.err(500, "internal");
        } else {
            assert_eq!(reply.status, 200, "{}", reply.body);
            answered += 1;
        }
    }
    assert_eq!(answered, 396);

    // Every answered turn is there; the refused ones are not.
    let mut stored = 0;
    for id in &ids {
        let activity = api.get(&format!("/api/instances/{id}/activity?limit=500")).await.ok();
        let turns = activity["turns"].as_array().unwrap();
        assert!(turns.iter().all(|t| t["text"] != "poison"), "{activity}");
        stored += turns.len();
    }
    assert_eq!(stored, answered);
    // And the agents keep working.
    assert_eq!(api.message(&ids[0], "after").await.ok()["reply"], json!("[agent 0] after"));
}

async fn a_reply_holding_nul_is_stored_and_observed(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("example", "odd").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    // Turns around it share its batch.
    let calls: Vec<_> = ["before", "nul", "after"]
        .into_iter()
        .map(|text| {
            let (api, id) = (api.clone(), id.clone());
            tokio::spawn(async move { api.message(&id, text).await })
        })
        .collect();
    let mut replies = Vec::new();
    for call in calls {
        replies.push(call.await.unwrap().ok()["reply"].as_str().unwrap().to_owned());
    }
    assert_eq!(replies[1], "[odd] a\u{FFFD}b");
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let stored: Vec<&str> =
        activity["turns"].as_array().unwrap().iter().map(|t| t["reply"].as_str().unwrap()).collect();
    assert_eq!(stored.len(), 3, "{activity}");
    assert!(stored.contains(&"[odd] a\u{FFFD}b"), "{activity}");
    // The turn is observed activity too.
    let events = api.post("/api/local/query", json!({"shape": "events", "args": {"session_id": id}})).await.ok();
    assert_eq!(events["count"], 3, "{events}");
}
