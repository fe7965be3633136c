//! roost's Telegram Bot API client against the fake Bot API of the test suite: the
//! groundwork of the channel (the agents do not use it yet).

use std::time::{Duration, Instant};

use roost_server::telegram::{
    TelegramClient, TelegramError,
    split::{PART_CHARS, split_reply},
};
use roost_tests::fake_telegram::FakeTelegram;

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
