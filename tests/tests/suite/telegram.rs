//! Telegram: roost's Bot API client against the fake Bot API of the test suite, bot tokens
//! checked when an agent is configured, and the channel roost runs for an agent's bot:
//! turns, pairing, long replies, restarts, pause, Telegram's refusals and webhook mode.

use std::time::{Duration, Instant};

use roost_proto::v1::{GetChannelRequest, PairChannelRequest};
use roost_server::billing::prices::PriceBook;
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
    // A second poller of the same bot ends the first with 409 (as Telegram does).
    let second = {
        let client = client.clone();
        let token = token.clone();
        tokio::spawn(async move { client.get_updates(&token, 0, 20).await })
    };
    assert_eq!(poll.await.unwrap().unwrap_err().code(), Some(409));
    let id = fake.say(&token, 77, "hello");
    let updates = second.await.unwrap().unwrap();
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
    // Every token was checked before it was applied, and a connected bot is polled.
    let calls = fake.calls();
    assert_eq!(calls.first().map(|c| c.0.as_str()), Some("getMe"));
    assert!(calls.iter().any(|(method, _)| method == "getUpdates"), "{calls:?}");
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

/// Waits (up to 20 s) until `check` holds, then returns what it found.
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A pairing code in a bot's reply (`ABCD-EFGH`).
fn code_in(reply: &str) -> Option<String> {
    reply.split(|c: char| c.is_whitespace() || c == '(' || c == ')').find_map(|word| {
        let word = word.trim_end_matches(['.', ',']);
        let (a, b) = word.split_once('-')?;
        let code = |s: &str| s.len() == 4 && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        (code(a) && code(b)).then(|| word.to_owned())
    })
}

/// A new echo agent of `api`'s account, running, with `token`'s bot connected and
/// `allowed` chats; its id.
async fn connected_echo(api: &roost_tests::Api, token: &str, allowed: &str) -> String {
    let id = api.provision("echo", "be brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let config = json!({"MESSAGING_BOT_TOKEN": token, "MESSAGING_ALLOWED_CHAT_IDS": allowed});
    api.post(&format!("/api/instances/{id}/config"), config).await.ok();
    api.wait_status(&id, "running").await;
    id
}

/// A server whose agents talk to `fake`, an echo agent on it with `token` connected and
/// `allowed` chats; returns the server, the account's API and the agent's id.
async fn echo_bot(
    backend: Backend,
    fake: &FakeTelegram,
    token: &str,
    allowed: &str,
) -> (TestServer, roost_tests::Api, String) {
    let server = TestServer::start_with(backend, |c| c.hosting.telegram_api_base = fake.base.clone()).await;
    let api = server.api(Some(&server.account(10_000).await));
    let id = connected_echo(&api, token, allowed).await;
    (server, api, id)
}

/// An allowed chat's message is a turn (source "telegram", with its chat id) and its reply
/// comes back; a stranger gets a pairing code and no turn; the owner approves the code and
/// the stranger can talk; a used or wrong code is 404; a fourth stranger waits.
async fn allowed_chats_talk_and_strangers_pair(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8101, "pair_bot");
    let server = TestServer::start_with(backend, |c| c.hosting.telegram_api_base = fake.base.clone()).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = connected_echo(&api, &token, "100").await;

    fake.say(&token, 100, "hello there");
    let reply = eventually("the reply", || fake.messages_to(100).pop()).await;
    assert!(reply.contains("hello there"), "{reply}");
    eventually("the typing indicator", || {
        fake.sent().iter().any(|s| s.method == "sendChatAction" && s.chat_id == 100 && s.text == "typing").then_some(())
    })
    .await;
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    let turns = activity["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!((turns[0]["source"].as_str(), turns[0]["chat_id"].as_i64()), (Some("telegram"), Some(100)));

    fake.say(&token, 200, "let me in");
    let asked = eventually("the pairing reply", || fake.messages_to(200).pop()).await;
    let code = code_in(&asked).unwrap_or_else(|| panic!("no code in {asked:?}"));
    let channel = api.get(&format!("/api/instances/{id}/channel")).await.ok();
    assert_eq!(channel["bot_username"], "pair_bot");
    assert_eq!(channel["allowed_chat_ids"], json!([100]));
    assert_eq!(channel["pending_pairings"].as_array().unwrap().len(), 1);
    assert_eq!(channel["pending_pairings"][0]["chat_id"], 200);
    assert!(!channel.to_string().contains(&code), "codes are not shown: {channel}");
    let turns = api.get(&format!("/api/instances/{id}/activity")).await.ok()["turns"].as_array().unwrap().len();
    assert_eq!(turns, 1, "a stranger's message never reaches the agent");

    // The same over gRPC.
    let mut grpc = server.agents(&account.key).await;
    let seen = grpc.get_channel(GetChannelRequest { instance_id: id.clone() }).await.unwrap().into_inner();
    assert_eq!(seen.channel.unwrap().pending_pairings[0].chat_id, 200);
    let wrong = PairChannelRequest { instance_id: id.clone(), code: "ZZZZZZZZ".into() };
    assert_eq!(grpc.pair_channel(wrong).await.unwrap_err().code(), tonic::Code::NotFound);
    let pair = format!("/api/instances/{id}/channel/pair");
    api.post(&pair, json!({"code": "ZZZZ-ZZZZ"})).await.err(404, "not_found");
    api.post(&pair, json!({"code": ""})).await.err(400, "invalid_argument");
    let paired = api.post(&pair, json!({"code": code.to_lowercase()})).await.ok();
    assert_eq!((paired["chat_id"].as_i64(), &paired["allowed_chat_ids"]), (Some(200), &json!([100, 200])));
    api.post(&pair, json!({"code": code})).await.err(404, "not_found");
    let view = api.get(&format!("/api/instances/{id}")).await.ok();
    assert_eq!(view["config"]["allowed_chat_ids"], json!([100, 200]));
    eventually("the welcome", || fake.messages_to(200).into_iter().find(|m| m.contains("approved"))).await;
    fake.say(&token, 200, "thanks");
    eventually("the paired chat's reply", || fake.messages_to(200).into_iter().find(|m| m.contains("thanks"))).await;

    // At most three codes wait per agent.
    for chat in [301, 302, 303, 304] {
        fake.say(&token, chat, "me too");
    }
    let fourth = eventually("the fourth stranger's answer", || fake.messages_to(304).pop()).await;
    assert!(code_in(&fourth).is_none() && fourth.contains("try again later"), "{fourth}");
    assert!(code_in(&fake.messages_to(303)[0]).is_some());
    // Asking again gives the same code.
    fake.say(&token, 301, "me too, again");
    let again = eventually("the repeated code", || Some(fake.messages_to(301)).filter(|m| m.len() == 2)).await;
    assert_eq!(code_in(&again[0]), code_in(&again[1]));
    let channel = api.get(&format!("/api/instances/{id}/channel")).await.ok();
    assert_eq!(channel["pending_pairings"].as_array().unwrap().len(), 3);
    assert!(channel["messages_in"].as_i64().unwrap() >= 6, "{channel}");
    assert!(channel["messages_out"].as_i64().unwrap() >= 6, "{channel}");
    assert_eq!(channel["state"], "receiving");
}

/// A reply over Telegram's limit arrives in parts that each fit, in order, a second apart
/// (one message a second per chat).
async fn long_replies_arrive_in_parts(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8102, "long_bot");
    let (_server, api, id) = echo_bot(backend, &fake, &token, "5,6").await;
    let text: String = (0..500).map(|i| format!("word{i:05} ")).collect();
    assert!(text.chars().count() >= 5_000);
    fake.say(&token, 5, &text);
    let parts = eventually("two parts", || Some(fake.messages_to(5)).filter(|m| m.len() >= 2)).await;
    assert_eq!(parts.len(), 2, "{:?}", parts.iter().map(String::len).collect::<Vec<_>>());
    assert!(parts.iter().all(|p| p.chars().count() <= PART_CHARS));
    let joined: String = parts.concat();
    for word in ["word00000", "word00250", "word00499"] {
        assert!(joined.contains(word), "{word} is in the reply");
    }
    // A NUL (PostgreSQL's text cannot hold one) does not hold the channel up.
    fake.say(&token, 6, "nul\0inside");
    fake.say(&token, 6, "and after");
    eventually("the replies after a NUL", || fake.messages_to(6).into_iter().find(|m| m.contains("and after"))).await;
    assert!(fake.messages_to(6)[0].contains("nul\u{FFFD}inside"), "{:?}", fake.messages_to(6));

    // Config restarts the agent and its channel: the stopped run does not overwrite the
    // new one's state.
    api.post(&format!("/api/instances/{id}/config"), json!({"MESSAGING_ALLOWED_CHAT_IDS": "5,6,7"})).await.ok();
    api.wait_status(&id, "running").await;
    fake.say(&token, 7, "after the restart");
    eventually("a reply after the restart", || fake.messages_to(7).pop()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.get(&format!("/api/instances/{id}/channel")).await.ok()["state"], "receiving");
}

/// A restart resumes from the stored offset: nothing answered before is answered again,
/// and a message sent while roost was down is answered after it.
async fn a_restart_replays_nothing(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8103, "restart_bot");
    let (server, api, id) = echo_bot(backend, &fake, &token, "7").await;
    fake.say(&token, 7, "first");
    fake.say(&token, 7, "second");
    eventually("two replies", || Some(fake.messages_to(7)).filter(|m| m.len() == 2)).await;
    let (server, _) = server
        .restart_after(async {
            fake.say(&token, 7, "while down");
        })
        .await;
    api.wait_status(&id, "running").await;
    let replies = eventually("the reply to the message sent while down", || {
        Some(fake.messages_to(7)).filter(|m| m.iter().any(|r| r.contains("while down")))
    })
    .await;
    // Give a replay every chance to show, then count.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let replies_now = fake.messages_to(7);
    assert_eq!(replies_now.len(), 3, "{replies_now:?} (was {replies:?})");
    let turns = api.get(&format!("/api/instances/{id}/activity")).await.ok()["turns"].as_array().unwrap().len();
    assert_eq!(turns, 3);
    drop(server);
}

/// Pause stops polling (a message waits at Telegram, unanswered); resume answers it.
async fn pause_stops_polling(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8104, "pause_bot");
    let (_server, api, id) = echo_bot(backend, &fake, &token, "9").await;
    eventually("polling", || (fake.count("getUpdates", 8104) > 0).then_some(())).await;
    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let polls = fake.count("getUpdates", 8104);
    fake.say(&token, 9, "anyone there?");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(fake.count("getUpdates", 8104), polls, "no polls while paused");
    assert!(fake.messages_to(9).is_empty());
    assert_eq!(fake.unconfirmed(&token), 1, "the message waits at Telegram");
    let channel = api.get(&format!("/api/instances/{id}/channel")).await.ok();
    assert_eq!(channel["state"], "stopped");
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    eventually("the reply after resume", || fake.messages_to(9).pop()).await;
}

/// Telegram's refusals: a chat that blocked the bot (403) is recorded and gets nothing
/// more until it writes again; 429 is retried after `retry_after`; a poll refused with 409
/// backs off and shows on /api/channels, then polling recovers.
async fn telegram_refusals_are_handled(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8105, "refusal_bot");
    let (server, api, id) = echo_bot(backend, &fake, &token, "11,12").await;

    fake.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user", None);
    fake.say(&token, 11, "bye");
    let blocked = loop {
        let channel = api.get(&format!("/api/instances/{id}/channel")).await.ok();
        if channel["blocked_chat_ids"] == json!([11]) {
            break channel;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(blocked["last_error"].as_str().unwrap().contains("blocked"), "{blocked}");
    fake.say(&token, 11, "back again");
    eventually("a reply once the chat writes again", || fake.messages_to(11).pop()).await;

    fake.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", Some(1));
    let started = Instant::now();
    fake.say(&token, 12, "slow down");
    eventually("the retried reply", || fake.messages_to(12).pop()).await;
    assert!(started.elapsed() >= Duration::from_millis(900), "retry_after was honoured");

    // Another program polls the bot: roost's poll in flight ends with 409 (a newer poll
    // wins, as on Telegram).
    let client = TelegramClient::new(&fake.base);
    let _ = client.get_updates(&token, 0, 0).await;
    let dashboard = server.api(None);
    let shown = loop {
        let channels = dashboard.get("/api/channels").await.ok();
        let mine = channels["agents"].as_array().unwrap().iter().find(|a| a["instance_id"] == id.as_str()).cloned();
        let telegram = mine.unwrap()["telegram"].clone();
        if telegram["last_error"].as_str().unwrap_or_default().contains("another program") {
            break telegram;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(shown["bot_username"], "refusal_bot");
    fake.say(&token, 12, "still there?");
    eventually("polling recovers", || fake.messages_to(12).into_iter().find(|m| m.contains("still there"))).await;
    let recovered = api.get(&format!("/api/instances/{id}/channel")).await.ok();
    assert_eq!(recovered["state"], "receiving", "{recovered}");
}

/// Webhook mode: roost sets `<public url>/telegram/{id}` with a secret (retrying a failed
/// setWebhook); deliveries with
/// it are answered, a wrong secret is 401 and stores nothing, Telegram's retry of one
/// update is answered once, and pause deletes the webhook.
async fn webhook_mode_answers_deliveries(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8106, "hook_bot");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let server = TestServer::start_bound(backend, &format!("127.0.0.1:{port}"), |c| {
        c.hosting.telegram_api_base = fake.base.clone();
        c.hosting.channels.webhook_base = Some(base.clone());
    })
    .await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    // The first setWebhook fails: the channel backs off, sets it, and is receiving again.
    fake.fail_next("setWebhook", 502, "Bad Gateway", None);
    let id = connected_echo(&api, &token, "21").await;

    let (url, secret) = eventually("the webhook", || fake.webhook(&token)).await;
    let mut state = String::new();
    for _ in 0..100 {
        state = api.get(&format!("/api/instances/{id}/channel")).await.ok()["state"].as_str().unwrap().to_owned();
        if state == "receiving" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state, "receiving", "the webhook's channel recovers from a failed setWebhook");
    assert_eq!(url, format!("{base}/telegram/{id}"));
    fake.say(&token, 21, "via webhook");
    eventually("the reply", || fake.messages_to(21).pop()).await;
    assert_eq!(fake.count("getUpdates", 8106), 0, "no polling in webhook mode");

    let update = |update_id: i64, text: &str| json!({"update_id": update_id, "message": {"message_id": 1, "date": 0, "chat": {"id": 21, "type": "private"}, "text": text}});
    let forged = server.http.post(&url).header("x-telegram-bot-api-secret-token", "wrong").json(&update(900, "forged"));
    assert_eq!(forged.send().await.unwrap().status(), 401);
    let unsigned = server.http.post(&url).json(&update(901, "forged"));
    assert_eq!(unsigned.send().await.unwrap().status(), 401);
    for _ in 0..2 {
        let retry =
            server.http.post(&url).header("x-telegram-bot-api-secret-token", &secret).json(&update(902, "retried"));
        assert_eq!(retry.send().await.unwrap().status(), 200);
    }
    eventually("the retried update's reply", || fake.messages_to(21).into_iter().find(|m| m.contains("retried"))).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let replies = fake.messages_to(21);
    assert_eq!(replies.iter().filter(|m| m.contains("retried")).count(), 1, "{replies:?}");
    assert!(!replies.iter().any(|m| m.contains("forged")), "{replies:?}");
    let channel = api.get(&format!("/api/instances/{id}/channel")).await.ok();
    assert_eq!(channel["mode"], "webhook");

    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    eventually("the webhook deleted on pause", || fake.webhook(&token).is_none().then_some(())).await;
}

/// A chat whose agent's account is out of credits gets a fixed reply; nothing is billed
/// and no turn is recorded.
async fn out_of_credits_gets_a_fixed_reply(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8107, "broke_bot");
    // echo's model priced, so its turns are metered; the account has no credits.
    let prices = "[default]\ninput_usd_per_mtok = 0\noutput_usd_per_mtok = 0\n\
                  [models.echo]\ninput_usd_per_mtok = 10000\noutput_usd_per_mtok = 10000\n";
    let server = TestServer::start_with(backend, |c| {
        c.hosting.telegram_api_base = fake.base.clone();
        c.hosting.prices = PriceBook::from_toml(prices).expect("price book");
    })
    .await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let id = connected_echo(&api, &token, "31").await;
    fake.say(&token, 31, "hello?");
    let reply = eventually("the fixed reply", || fake.messages_to(31).pop()).await;
    assert!(reply.contains("out of credits"), "{reply}");
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    assert_eq!(activity["turns"], json!([]));
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 0);
}

/// A poll that hangs past the watchdog is abandoned, recorded, and polled again; messages
/// still get through.
async fn a_hung_poll_is_restarted(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8108, "stuck_bot");
    let server = TestServer::start_with(backend, |c| {
        c.hosting.telegram_api_base = fake.base.clone();
        // The fake holds each 25 s poll; the watchdog gives up after 1 s.
        c.hosting.channels.watchdog = Duration::from_secs(1);
    })
    .await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = connected_echo(&api, &token, "41").await;
    eventually("a second poll", || (fake.count("getUpdates", 8108) >= 2).then_some(())).await;
    let channel = api.get(&format!("/api/instances/{id}/channel")).await.ok();
    assert!(channel["last_error"].as_str().unwrap().contains("did not answer within 1 s"), "{channel}");
    fake.say(&token, 41, "are you stuck?");
    eventually("the reply", || fake.messages_to(41).pop()).await;
}

/// While a turn runs the chat sees "typing" every 4 s; pausing the agent mid-turn ends it
/// and the chat is told the agent is paused.
async fn a_pause_mid_turn_gets_a_fixed_reply(backend: Backend) {
    let fake = FakeTelegram::start().await;
    let token = fake.bot(8109, "slow_bot");
    let server = TestServer::start_with(backend, |c| c.hosting.telegram_api_base = fake.base.clone()).await;
    let api = server.api(Some(&server.account(10_000).await));
    // The example runtime (a child process) answers "sleep:<ms> …" after that long.
    let id = api.provision("example", "brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let config = json!({"MESSAGING_BOT_TOKEN": token, "MESSAGING_ALLOWED_CHAT_IDS": "71"});
    api.post(&format!("/api/instances/{id}/config"), config).await.ok();
    api.wait_status(&id, "running").await;
    fake.say(&token, 71, "sleep:20000 take your time");
    let typing = || fake.sent().iter().filter(|s| s.method == "sendChatAction" && s.chat_id == 71).count();
    eventually("typing twice, 4 s apart", || (typing() >= 2).then_some(())).await;
    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    let reply = eventually("the fixed reply", || fake.messages_to(71).pop()).await;
    assert!(reply.contains("paused"), "{reply}");
    let turns = api.get(&format!("/api/instances/{id}/activity")).await.ok()["turns"].clone();
    assert_eq!(turns[0]["status"], "cancelled", "{turns}");
}

each_backend!(
    a_pause_mid_turn_gets_a_fixed_reply,
    out_of_credits_gets_a_fixed_reply,
    a_hung_poll_is_restarted,
    webhook_mode_answers_deliveries,
    connecting_a_bot_checks_its_token,
    allowed_chats_are_configured,
    allowed_chats_talk_and_strangers_pair,
    long_replies_arrive_in_parts,
    a_restart_replays_nothing,
    pause_stops_polling,
    telegram_refusals_are_handled
);
