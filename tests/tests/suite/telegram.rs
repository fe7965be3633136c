//! Telegram: roost's Bot API client against the fake Bot API of the test suite, and bot
//! tokens checked with it when an agent is configured. (Agents do not poll yet.)

use std::time::{Duration, Instant};

use roost_server::telegram::{
    TelegramClient, TelegramError,
    split::{PART_CHARS, split_reply},
};
use roost_tests::{Backend, TestServer, each_backend, fake_telegram::FakeTelegram};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_speaks_the_bot_api() {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(4242, "roost_test_bot");
    let client = TelegramClient::new(&fake.base);

    let me = client.get_me(&token).await.unwrap();
    assert_eq!((me.id, me.username.as_str()), (4242, "roost_test_bot"));
    let refused = client.get_me("4242:wrong").await.unwrap_err();
    assert_eq!(refused.code(), Some(401));
    assert!(!refused.to_string().contains("4242:wrong"), "{refused}");
    assert!(client.delete_webhook(&token).await.unwrap());

    // Long polling: an empty poll waits for its timeout; a message ends the wait early;
    // the offset confirms what was read.
    let started = Instant::now();
    assert!(client.get_updates(&token, 0, 1).await.unwrap().is_empty());
    assert!(started.elapsed() >= Duration::from_millis(900));
    let poll = {
        let client = client.clone();
        let token = token.clone();
        tokio::spawn(async move { client.get_updates(&token, 0, 20).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A second poller of the same bot is refused while the first waits.
    assert_eq!(client.get_updates(&token, 0, 0).await.unwrap_err().code(), Some(409));
    let id = fake.say(&token, 77, "hello");
    let updates = poll.await.unwrap().unwrap();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].update_id, id);
    let message = updates[0].message.as_ref().unwrap();
    assert_eq!((message.chat.id, message.text.as_deref()), (77, Some("hello")));
    assert!(client.get_updates(&token, id + 1, 0).await.unwrap().is_empty(), "confirmed updates are gone");

    // Replies: a long one in parts under the limit, each accepted; 429 carries retry_after.
    let reply = "All work and no play. ".repeat(240);
    let parts = split_reply(&reply, PART_CHARS);
    assert_eq!(parts.len(), 2);
    for part in &parts {
        client.send_message(&token, 77, part).await.unwrap();
    }
    assert_eq!(client.send_message(&token, 77, &reply).await.unwrap_err().code(), Some(400), "over 4,096 refused");
    assert!(client.send_chat_action(&token, 77, "typing").await.unwrap());
    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 3", Some(3));
    let limited = client.send_message(&token, 77, "x").await.unwrap_err();
    assert!(matches!(limited, TelegramError::Api { code: 429, retry_after: Some(3), .. }), "{limited:?}");
    let sent = fake.sent();
    assert_eq!(sent.iter().filter(|s| s.method == "sendMessage").count(), 2);
    assert_eq!(sent.last().unwrap().text, "typing");
}

/// `MESSAGING_BOT_TOKEN` is checked with Telegram before it is applied: a refused token
/// is 400 naming the field (and never echoing the token), a bot another live agent has is
/// 409, an empty string disconnects; nothing changes on a refusal.
async fn connecting_a_bot_checks_its_token(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(7001, "helper_bot");
    let server = TestServer::start_with(backend, |c| c.hosting.telegram_api_base = fake.base.clone()).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let first = api.provision("example", "brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&first, "running").await;
    let second = api.provision("example", "brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&second, "running").await;

    let bad = api.post(&format!("/api/instances/{first}/config"), json!({"MESSAGING_BOT_TOKEN": "7001:forged"})).await;
    bad.err(400, "invalid_argument");
    assert!(bad.body["error"].as_str().unwrap().contains("MESSAGING_BOT_TOKEN"), "{}", bad.body);
    assert!(!bad.body.to_string().contains("forged"), "the token is never echoed: {}", bad.body);
    assert_eq!(api.get(&format!("/api/instances/{first}")).await.ok()["config"]["messaging_bot_token_set"], false);

    api.post(&format!("/api/instances/{first}/config"), json!({"MESSAGING_BOT_TOKEN": token})).await.ok();
    let view = api.wait_status(&first, "running").await;
    assert_eq!(view["config"]["messaging_bot_token_set"], true);
    let taken = api.post(&format!("/api/instances/{second}/config"), json!({"MESSAGING_BOT_TOKEN": token})).await;
    taken.err(409, "wrong_state");
    assert_eq!(api.get(&format!("/api/instances/{second}")).await.ok()["config"]["messaging_bot_token_set"], false);

    // Disconnect the first, and the bot is free for the second.
    api.post(&format!("/api/instances/{first}/config"), json!({"MESSAGING_BOT_TOKEN": ""})).await.ok();
    assert_eq!(api.wait_status(&first, "running").await["config"]["messaging_bot_token_set"], false);
    api.post(&format!("/api/instances/{second}/config"), json!({"MESSAGING_BOT_TOKEN": token})).await.ok();
    assert_eq!(api.wait_status(&second, "running").await["config"]["messaging_bot_token_set"], true);
    // A destroyed agent frees its bot too.
    api.post(&format!("/api/instances/{second}/destroy"), json!({})).await.ok();
    api.post(&format!("/api/instances/{first}/config"), json!({"MESSAGING_BOT_TOKEN": token})).await.ok();
    assert_eq!(api.wait_status(&first, "running").await["config"]["messaging_bot_token_set"], true);
    assert!(fake.calls().iter().all(|(method, _)| method == "getMe"), "only getMe so far: {:?}", fake.calls());
}

/// `MESSAGING_ALLOWED_CHAT_IDS` is kept canonical (sorted, once each), shown in the
/// instance's config, refused (400, nothing changed) when a value is not a chat id, and
/// cleared by an empty string.
async fn allowed_chats_are_configured(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let config = format!("/api/instances/{id}/config");
    let done = api.post(&config, json!({"MESSAGING_ALLOWED_CHAT_IDS": " 42, -100123,42 ,7"})).await.ok();
    assert_eq!(done["applied"], json!(["MESSAGING_ALLOWED_CHAT_IDS"]));
    let view = api.wait_status(&id, "running").await;
    assert_eq!(view["config"]["allowed_chat_ids"], json!([-100123, 7, 42]));
    for bad in ["42,abc", "0", "1.5"] {
        api.post(&config, json!({"MESSAGING_ALLOWED_CHAT_IDS": bad})).await.err(400, "invalid_argument");
    }
    assert_eq!(
        api.get(&format!("/api/instances/{id}")).await.ok()["config"]["allowed_chat_ids"],
        json!([-100123, 7, 42])
    );
    api.post(&config, json!({"MESSAGING_ALLOWED_CHAT_IDS": ""})).await.ok();
    assert_eq!(api.wait_status(&id, "running").await["config"]["allowed_chat_ids"], json!([]));
}

each_backend!(connecting_a_bot_checks_its_token, allowed_chats_are_configured);
