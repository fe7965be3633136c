//! A fake Telegram Bot API for the channel tests (`--telegram-api-base` points at it):
//! `POST /bot{token}/{method}` for getMe, deleteWebhook, setWebhook, getUpdates (offset,
//! long-poll `timeout`; a newer poll of the same bot ends the waiting one with 409, as
//! Telegram does, and any poll is 409 while a webhook is set), sendMessage (400 over 4,096
//! characters), sendChatAction; answers in the Bot API's shape (`{ok, result}` or
//! `{ok: false, error_code, description, parameters}`). While a bot has a webhook, a
//! message is delivered to it (`POST` with `X-Telegram-Bot-Api-Secret-Token`) instead of
//! waiting for a poll.
//!
//! A token is `<bot id>:<secret>`; tokens the test registered with [`FakeTelegram::bot`]
//! are valid, any other is 401. A test queues incoming messages with
//! [`FakeTelegram::say`], reads what the bot sent with [`FakeTelegram::sent`], and can make
//! the next calls of a method fail with [`FakeTelegram::fail_next`].

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    extract::{Path, State},
    routing::post,
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::Notify, task::JoinHandle};

/// Telegram's limit on a message's text, in characters.
pub const MAX_TEXT_CHARS: usize = 4096;

/// Something the bot sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The bot's token id (the token's number).
    pub bot: i64,
    /// `sendMessage` or `sendChatAction`.
    pub method: String,
    /// The chat.
    pub chat_id: i64,
    /// The text, or the action.
    pub text: String,
    /// When the call arrived.
    pub at: Instant,
}

#[derive(Default)]
struct Bot {
    username: String,
    updates: Vec<Value>,
    next_update_id: i64,
    /// Counts polls: a poll whose number is no longer the latest was superseded.
    polls: u64,
    /// The highest update id a poll has handed over.
    handed_up_to: i64,
    /// The webhook's URL and secret token, when set.
    webhook: Option<(String, String)>,
}

#[derive(Default)]
struct Inner {
    /// Any `<digits>:<secret>` token is a bot (the shared fake every test server uses).
    accept_any: bool,
    bots: HashMap<String, Bot>,
    sent: Vec<Sent>,
    failures: HashMap<String, Vec<Value>>,
    calls: Vec<(String, String)>,
    /// Webhook deliveries: the HTTP status each got.
    deliveries: Vec<u16>,
    /// Each message's chat and when a poll first handed it over.
    handed: Vec<(i64, Instant)>,
}

#[derive(Clone, Default)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The running fake.
pub struct FakeTelegram {
    /// Its base URL (what `--telegram-api-base` is set to).
    pub base: String,
    shared: Shared,
    task: JoinHandle<()>,
}

impl FakeTelegram {
    /// Starts the fake on an ephemeral port.
    pub async fn start() -> Self {
        Self::start_with(Shared::default()).await
    }

    async fn start_with(shared: Shared) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake telegram");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let app = Router::new().route("/{bot}/{method}", post(call)).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base, shared, task }
    }

    /// Registers a bot; its token is `<id>:secret-<id>`.
    pub fn bot(&self, id: i64, username: &str) -> String {
        let token = format!("{id}:secret-{id}");
        self.shared
            .lock()
            .bots
            .insert(token.clone(), Bot { username: username.into(), next_update_id: 1, ..Bot::default() });
        token
    }

    /// Queues a text message from `chat_id` to the bot (or delivers it to the bot's
    /// webhook, retrying until it is taken, as Telegram does); returns its update id.
    pub fn say(&self, token: &str, chat_id: i64, text: &str) -> i64 {
        let mut inner = self.shared.lock();
        let bot = inner.bots.get_mut(token).expect("a registered bot");
        let update_id = bot.next_update_id;
        bot.next_update_id += 1;
        let update = json!({
            "update_id": update_id,
            "message": {"message_id": update_id, "date": 0, "chat": {"id": chat_id, "type": "private"}, "text": text},
        });
        if let Some((url, secret)) = bot.webhook.clone() {
            drop(inner);
            let shared = self.shared.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                for _ in 0..50 {
                    let sent =
                        client.post(&url).header("x-telegram-bot-api-secret-token", &secret).json(&update).send();
                    let status = sent.await.map_or(0, |r| r.status().as_u16());
                    shared.lock().deliveries.push(status);
                    if status == 200 {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
            return update_id;
        }
        bot.updates.push(update);
        drop(inner);
        self.shared.arrived.notify_waiters();
        update_id
    }

    /// The webhook a bot has (its URL and secret token), if any.
    pub fn webhook(&self, token: &str) -> Option<(String, String)> {
        self.shared.lock().bots.get(token).and_then(|b| b.webhook.clone())
    }

    /// The HTTP status of each webhook delivery so far.
    pub fn deliveries(&self) -> Vec<u16> {
        self.shared.lock().deliveries.clone()
    }

    /// Messages queued for a bot and not yet confirmed by a poll's offset.
    pub fn unconfirmed(&self, token: &str) -> usize {
        self.shared.lock().bots.get(token).map_or(0, |b| b.updates.len())
    }

    /// How many times `method` was called for the bot `bot_id`.
    pub fn count(&self, method: &str, bot_id: i64) -> usize {
        let bot = bot_id.to_string();
        self.shared.lock().calls.iter().filter(|(m, b)| m == method && *b == bot).count()
    }

    /// For each message a poll handed over, how long until the first sendMessage to its
    /// chat arrived after it (messages without one yet are left out): the channel's
    /// latency as Telegram would see it.
    pub fn reply_latencies(&self) -> Vec<Duration> {
        let inner = self.shared.lock();
        inner
            .handed
            .iter()
            .filter_map(|(chat, handed)| {
                let reply =
                    inner.sent.iter().find(|s| s.method == "sendMessage" && s.chat_id == *chat && s.at >= *handed);
                reply.map(|s| s.at.duration_since(*handed))
            })
            .collect()
    }

    /// The texts sent to `chat_id` with sendMessage, in order.
    pub fn messages_to(&self, chat_id: i64) -> Vec<String> {
        let inner = self.shared.lock();
        inner
            .sent
            .iter()
            .filter(|s| s.method == "sendMessage" && s.chat_id == chat_id)
            .map(|s| s.text.clone())
            .collect()
    }

    /// What bots sent so far, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// Every method called so far, with its token's bot id (as text), in order.
    pub fn calls(&self) -> Vec<(String, String)> {
        self.shared.lock().calls.clone()
    }

    /// Makes the next call of `method` answer `ok: false` with `code` (and `retry_after`
    /// for 429), once per call of this.
    pub fn fail_next(&self, method: &str, code: u16, description: &str, retry_after: Option<u64>) {
        let mut answer = json!({"ok": false, "error_code": code, "description": description});
        if let Some(secs) = retry_after {
            answer["parameters"] = json!({"retry_after": secs});
        }
        self.shared.lock().failures.entry(method.to_owned()).or_default().push(answer);
    }
}

/// The base URL of a fake, shared by every test server of this process, that takes any
/// `<bot id>:<secret>` token as a bot (so tests that only store a token need no fake of
/// their own). It runs on a thread of its own, outliving each test's runtime.
pub fn shared_base() -> &'static str {
    static BASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(async move {
                let shared = Shared::default();
                shared.lock().accept_any = true;
                let fake = FakeTelegram::start_with(shared).await;
                tx.send(fake.base.clone()).expect("base");
                std::future::pending::<()>().await;
                drop(fake);
            });
        });
        rx.recv().expect("the shared fake Telegram started")
    })
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn error(code: u16, description: &str) -> Json<Value> {
    Json(json!({"ok": false, "error_code": code, "description": description}))
}

async fn call(
    State(shared): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    body: Option<Json<Value>>,
) -> Json<Value> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let Some(token) = bot.strip_prefix("bot").map(str::to_owned) else { return error(404, "Not Found") };
    let bot_id: i64 = token.split(':').next().and_then(|id| id.parse().ok()).unwrap_or(0);
    {
        let mut inner = shared.lock();
        inner.calls.push((method.clone(), bot_id.to_string()));
        let well_formed = bot_id > 0 && token.split_once(':').is_some_and(|(_, secret)| !secret.is_empty());
        if inner.accept_any && well_formed && !inner.bots.contains_key(&token) {
            let bot = Bot { username: format!("bot{bot_id}"), next_update_id: 1, ..Bot::default() };
            inner.bots.insert(token.clone(), bot);
        }
        if !inner.bots.contains_key(&token) {
            return error(401, "Unauthorized");
        }
        if let Some(queued) = inner.failures.get_mut(&method)
            && !queued.is_empty()
        {
            return Json(queued.remove(0));
        }
    }
    match method.as_str() {
        "getMe" => {
            let inner = shared.lock();
            let username = inner.bots.get(&token).map(|b| b.username.clone()).unwrap_or_default();
            Json(
                json!({"ok": true, "result": {"id": bot_id, "is_bot": true, "first_name": username, "username": username}}),
            )
        }
        "deleteWebhook" => {
            if let Some(bot) = shared.lock().bots.get_mut(&token) {
                bot.webhook = None;
            }
            Json(json!({"ok": true, "result": true}))
        }
        "setWebhook" => {
            let url = body["url"].as_str().unwrap_or_default().to_owned();
            let secret = body["secret_token"].as_str().unwrap_or_default().to_owned();
            if let Some(bot) = shared.lock().bots.get_mut(&token) {
                bot.webhook = Some((url, secret));
            }
            Json(json!({"ok": true, "result": true}))
        }
        "getUpdates" => get_updates(&shared, &token, &body).await,
        "sendMessage" | "sendChatAction" => {
            let chat_id = body["chat_id"].as_i64().unwrap_or(0);
            let text =
                body[if method == "sendMessage" { "text" } else { "action" }].as_str().unwrap_or_default().to_owned();
            if method == "sendMessage" && (text.is_empty() || text.chars().count() > MAX_TEXT_CHARS) {
                return error(400, "Bad Request: message text is empty or too long");
            }
            let mut inner = shared.lock();
            inner.sent.push(Sent {
                bot: bot_id,
                method: method.clone(),
                chat_id,
                text: text.clone(),
                at: Instant::now(),
            });
            let result = if method == "sendMessage" {
                json!({"message_id": inner.sent.len(), "date": 0, "chat": {"id": chat_id, "type": "private"}, "text": text})
            } else {
                json!(true)
            };
            Json(json!({"ok": true, "result": result}))
        }
        _ => error(404, "Not Found: method not found"),
    }
}

/// Long polling as Telegram does it: updates from `offset` (older ones are confirmed and
/// dropped), waiting up to `timeout` seconds for one; a newer poll of the same bot ends
/// this one with 409.
async fn get_updates(shared: &Shared, token: &str, body: &Value) -> Json<Value> {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(60));
    let me = {
        let mut inner = shared.lock();
        let Some(bot) = inner.bots.get_mut(token) else { return error(401, "Unauthorized") };
        if bot.webhook.is_some() {
            return error(409, "Conflict: can't use getUpdates method while webhook is active");
        }
        bot.polls += 1;
        bot.polls
    };
    shared.arrived.notify_waiters();
    let deadline = tokio::time::Instant::now() + timeout;
    let result = loop {
        let arrived = shared.arrived.notified();
        {
            let mut inner = shared.lock();
            let bot = inner.bots.get_mut(token).expect("registered");
            if bot.polls != me {
                return error(409, "Conflict: terminated by other getUpdates request");
            }
            bot.updates.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            if !bot.updates.is_empty() || tokio::time::Instant::now() >= deadline {
                let updates = bot.updates.clone();
                let now = Instant::now();
                let mut handed = Vec::new();
                for update in &updates {
                    let id = update["update_id"].as_i64().unwrap_or(0);
                    if id > bot.handed_up_to {
                        bot.handed_up_to = id;
                        handed.push((update["message"]["chat"]["id"].as_i64().unwrap_or(0), now));
                    }
                }
                inner.handed.extend(handed);
                break updates;
            }
        }
        let _ = tokio::time::timeout_at(deadline, arrived).await;
    };
    Json(json!({"ok": true, "result": result}))
}
