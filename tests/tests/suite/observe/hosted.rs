//! Hosted agents' turns are observed activity: q/1 shows them with no setup.

use std::time::Duration;

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::json;

use super::{assert_row_counts, q1};

each_backend!(hosted_turns_show_up_in_q1);

async fn hosted_turns_show_up_in_q1(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "Be brief.").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    api.message(&id, "first message").await.ok();
    api.message(&id, &"long ".repeat(200)).await.ok();

    let observer = server.api(None);
    let mut events = Vec::new();
    for _ in 0..100 {
        events = q1(&observer, "events", json!({"session_id": id})).await;
        if events.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(events.len(), 2, "{events:?}");
    let first = &events[1];
    assert_eq!(
        (first["event_type"].as_str(), first["agent_id"].as_str(), first["model"].as_str()),
        (Some("turn"), Some(id.as_str()), Some("echo"))
    );
    assert_eq!(first["data"]["text"], "first message");
    assert_eq!(first["data"]["reply"], "[Be brief.] first message");
    assert_eq!(first["data"]["source"], "api");
    assert_eq!(
        events[0]["data"]["text"].as_str().unwrap().chars().count(),
        300,
        "long texts are cut to 300 characters"
    );

    let sessions = q1(&observer, "sessions", json!({"agent_id": id})).await;
    assert_eq!((sessions[0]["session_id"].as_str(), sessions[0]["events"].as_i64()), (Some(id.as_str()), Some(2)));
    let transcript = q1(&observer, "transcript", json!({"session_id": id})).await;
    assert_eq!(transcript.len(), 2);
    assert_eq!(transcript[0]["kind"], "turn");
    assert_row_counts(&server).await;
}
