//! The Telegram channel of a running agent (docs/architecture.md#telegram): roost itself talks to
//! the agent's bot, whatever its runtime.
//!
//! A channel belongs to one generation of the agent (one boot): it starts when the agent
//! reaches running with a bot connected and its runtime lists `telegram`, and stops with
//! the generation (pause, config, destroy, suspension, a crash, shutdown). Two tasks:
//! - the **receiver** long-polls `getUpdates` (or, in webhook mode, sets the webhook that
//!   [`Hosting::deliver_telegram_update`] is called from) and stores each update in the
//!   inbox in the same transaction as the next offset ([`crate::telegram::inbox`]);
//! - the **answerer** takes the inbox in update order, one at a time: a stranger's chat
//!   gets a pairing code, an allowed chat's text becomes a normal queued turn (same FIFO
//!   and billing as the API), and the reply goes back in parts under Telegram's limit,
//!   paced to Telegram's rate limits.
//!
//! Errors never stop a channel: the receiver backs off (1 s doubling to 60 s, with
//! jitter; a 429's `retry_after` when Telegram gives one) and retries, and the error is
//! stored for `/api/channels`. A poll that hangs past the watchdog is abandoned and
//! retried.

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        DeliverTelegramUpdateRequest, DeliverTelegramUpdateResponse, GetChannelResponse, PairChannelRequest,
        PairChannelResponse, SendMessageResponse,
    },
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Hosting, instances::no_such_instance, limits, live::Agent, routing::Route, turns::Origin};
use crate::{
    Error, Result,
    ids::new_sortable_id,
    secrets::{Sealed, Slot},
    store::{BeginWrite, on_writer},
    telegram::{
        TelegramError, Update,
        inbox::{Incoming, Queued, TurnOutcome},
        pacer::Pacer,
        pairing::{self, PairingTx},
        split::{PART_CHARS, split_reply},
        view::load_channel,
    },
    time::now_ms,
};

/// Fixed replies: what a chat is told when its message does not reach the agent.
mod replies {
    pub const TOO_MANY: &str = "This bot only talks to chats its owner has approved, and several requests are \
                                waiting already. Please try again later.";
    pub const OUT_OF_CREDITS: &str =
        "This agent is out of credits, so it cannot answer right now. Its owner can top up to bring it back.";
    pub const PAUSED: &str = "This agent is paused, so your message was not answered. Try again when its owner \
                              resumes it.";
    pub const NOT_RUNNING: &str = "This agent is not running right now, so your message was not answered.";
    pub const NOT_TEXT: &str = "I can only read text messages.";
    pub const EMPTY: &str = "(The agent answered with an empty message.)";
    pub const STOPPED: &str = "The agent stopped while working on your message; please send it again.";
    pub const PAIRED: &str = "Your chat is approved: you can talk to this agent now.";
}

/// The pairing reply: the code and how to use it.
fn pairing_reply(code: &str) -> String {
    format!(
        "This bot only talks to chats its owner has approved. To ask for access, give the owner this code: {} \
         (it works for one hour). They approve it on the agent's page in roost.",
        pairing::display(code)
    )
}

/// What `sendChatAction typing` is repeated at while a turn runs (Telegram shows it for 5 s).
const TYPING_EVERY: Duration = Duration::from_secs(4);
/// Inbox rows read at a time.
const INBOX_BATCH: i64 = 32;
/// First and longest back-off after an error.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Longest `retry_after` honoured as given; longer ones are capped here.
const RETRY_AFTER_MAX: u64 = 300;

/// How channels run (`HostingConfig`).
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// `getUpdates` long-poll `timeout` in seconds (25).
    pub poll_timeout_secs: u64,
    /// A poll that has not answered after this long is abandoned and retried (120 s).
    pub watchdog: Duration,
    /// Webhook mode: the public URL under which Telegram reaches `/telegram/{id}`
    /// (`--telegram-webhook` with `--public-url`); polling when `None`.
    pub webhook_base: Option<String>,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self { poll_timeout_secs: 25, watchdog: Duration::from_secs(120), webhook_base: None }
    }
}

/// One running channel: what both of its tasks share.
struct Run {
    agent: Arc<Agent>,
    token: String,
    /// The sealed token it was opened from: a later generation with the same value is
    /// the same bot (config that did not touch the token).
    sealed: Sealed,
    bot_id: i64,
    stop: CancellationToken,
    /// Rung when updates were stored (by the poller or a webhook delivery).
    wake: Arc<Notify>,
    /// Chats that blocked the bot since they last wrote.
    blocked: Mutex<HashSet<i64>>,
    /// This run's number in the store, once the channel is open (0 before).
    seq: AtomicI64,
}

impl Run {
    fn blocked(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        self.blocked.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Exponential back-off with jitter.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Self {
        Self(BACKOFF_FIRST)
    }

    fn reset(&mut self) {
        self.0 = BACKOFF_FIRST;
    }

    /// The next wait: the current step scaled by a random factor in [0.5, 1.5), so many
    /// bots failing together do not retry together.
    fn next(&mut self) -> Duration {
        let mut byte = [0u8; 1];
        let _ = getrandom::fill(&mut byte);
        let wait = self.0.mul_f64(0.5 + f64::from(byte[0]) / 256.0);
        self.0 = (self.0 * 2).min(BACKOFF_MAX);
        wait
    }
}

/// The bot id a token starts with (`<bot id>:<secret>`).
fn bot_id_of(token: &str) -> i64 {
    token.split(':').next().and_then(|id| id.parse().ok()).unwrap_or(0)
}

/// The secret Telegram sends back with each webhook delivery: derived from the bot token,
/// so only someone who has the token can forge a delivery, and nothing more is stored.
pub fn webhook_secret(token: &str) -> String {
    let digest = Sha256::digest(format!("roost telegram webhook\n{token}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sleeps `wait` unless `stop` comes first; false when stopped.
async fn pause_for(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}

/// An update as the inbox stores it, if it carries a message. A NUL (which PostgreSQL's
/// text cannot hold) becomes U+FFFD: an update the store refused would hold the offset
/// back, and every later message with it.
fn incoming(update: &Update) -> Option<Incoming> {
    let message = update.message.as_ref()?;
    Some(Incoming {
        update_id: update.update_id,
        chat_id: message.chat.id,
        text: message.text.as_ref().map(|t| t.replace('\0', "\u{FFFD}")),
        turn_id: new_sortable_id("turn"),
    })
}

/// How an inbox row's handling ended.
enum Handled {
    /// Answered with this many messages: mark it done.
    Answered(i64),
    /// The agent is restarting (or going away): leave it queued for the next generation.
    Later,
    /// The store failed: read the inbox again after a pause.
    Retry,
}

impl Hosting {
    /// Starts the agent's channel for `generation` if it has a bot and its runtime lists
    /// `telegram`. Called once the boot of that generation is running.
    pub(super) fn start_channel(self: &Arc<Self>, agent: &Arc<Agent>, generation: &CancellationToken) {
        if !agent.runtime.channels.iter().any(|c| c == "telegram") {
            return;
        }
        let Some(sealed) = agent.state().settings.messaging_bot_token.clone() else { return };
        let token = match self.secret_key.open(&sealed, Slot::messaging_bot_token(&agent.id)) {
            Ok(token) => token,
            Err(why) => {
                warn!(instance = %agent.id, reason = %why, "the bot token cannot be opened; the channel stays off");
                return;
            }
        };
        let run = Arc::new(Run {
            agent: agent.clone(),
            bot_id: bot_id_of(&token),
            token,
            sealed,
            stop: generation.child_token(),
            wake: Arc::new(Notify::new()),
            blocked: Mutex::new(HashSet::new()),
            seq: AtomicI64::new(0),
        });
        self.channel_wakers.insert(agent.id.clone(), (run.stop.clone(), run.wake.clone()));
        let this = self.clone();
        tokio::spawn(async move {
            let receiving = this.clone().receive(run.clone());
            let answering = this.clone().answer_inbox(run.clone());
            tokio::join!(receiving, answering);
            this.channel_wakers.remove_if_stopped(&run.agent.id);
            this.channel_state(&run, "stopped").await;
            info!(instance = %run.agent.id, "telegram channel stopped");
        });
    }

    /// Records a channel error for `/api/channels` (and the log).
    async fn channel_error(&self, instance_id: &str, what: &str) {
        warn!(instance = instance_id, error = what, "telegram channel");
        if let Err(err) = self.store.record_telegram_error(instance_id, what, now_ms()).await {
            warn!(instance = instance_id, error = %err, "could not record the channel's error");
        }
    }

    /// Records what this run of the channel is doing (unless a newer run has started).
    async fn channel_state(&self, run: &Run, state: &str) {
        let seq = run.seq.load(Ordering::Acquire);
        if seq == 0 {
            return;
        }
        if let Err(err) = self.store.set_telegram_state(&run.agent.id, seq, state).await {
            warn!(instance = %run.agent.id, error = %err, "could not record the channel's state");
        }
    }

    /// The receiver: opens the channel (offset, mode), then polls, or sets the webhook and
    /// waits for the stop.
    async fn receive(self: Arc<Self>, run: Arc<Run>) {
        let id = run.agent.id.clone();
        let webhook = self.config.channels.webhook_base.clone();
        let mode = if webhook.is_some() { "webhook" } else { "polling" };
        let mut backoff = Backoff::new();
        let mut offset = loop {
            match self.store.open_telegram_channel(&id, run.bot_id, mode).await {
                Ok((offset, seq)) => {
                    run.seq.store(seq, Ordering::Release);
                    break offset;
                }
                Err(err) => {
                    self.channel_error(&id, &format!("the channel could not be opened: {err}")).await;
                    if !pause_for(&run.stop, backoff.next()).await {
                        return;
                    }
                }
            }
        };
        info!(instance = %id, mode, "telegram channel started");
        if let Some(base) = webhook {
            self.hold_webhook(&run, &base).await;
            return;
        }
        // Long polling and a webhook exclude each other: drop any webhook first.
        let mut failing = false;
        while let Err(err) = self.telegram.delete_webhook(&run.token).await {
            self.channel_error(&id, &format!("deleteWebhook failed: {err}")).await;
            if !failing {
                failing = true;
                self.channel_state(&run, "backing_off").await;
            }
            if !pause_for(&run.stop, backoff.next()).await {
                return;
            }
        }
        let watchdog = self.config.channels.watchdog;
        loop {
            let poll = self.telegram.get_updates(&run.token, offset, self.config.channels.poll_timeout_secs);
            let polled = tokio::select! {
                () = run.stop.cancelled() => return,
                polled = tokio::time::timeout(watchdog, poll) => polled,
            };
            let failure = match polled {
                Err(_) => Some((
                    format!("getUpdates did not answer within {} s; polling again", watchdog.as_secs()),
                    Duration::ZERO,
                )),
                Ok(Ok(updates)) => {
                    let Some(last) = updates.iter().map(|u| u.update_id).max() else {
                        if failing {
                            failing = false;
                            backoff.reset();
                            self.channel_state(&run, "receiving").await;
                        }
                        continue;
                    };
                    let stored: Vec<Incoming> = updates.iter().filter_map(incoming).collect();
                    match self.store.save_telegram_updates(&id, &stored, Some(last + 1), now_ms()).await {
                        Ok(_) => {
                            offset = last + 1;
                            run.wake.notify_one();
                            if failing {
                                failing = false;
                                backoff.reset();
                                self.channel_state(&run, "receiving").await;
                            }
                            None
                        }
                        // Not stored, so the offset stays: Telegram hands them over again.
                        Err(err) => Some((format!("updates could not be stored: {err}"), backoff.next())),
                    }
                }
                Ok(Err(err)) => {
                    let wait = match &err {
                        TelegramError::Api { code: 429, retry_after: Some(secs), .. } => {
                            Duration::from_secs((*secs).min(RETRY_AFTER_MAX))
                        }
                        _ => backoff.next(),
                    };
                    let what = match err.code() {
                        Some(409) => format!("another program is reading this bot's updates ({err})"),
                        Some(401 | 404) => format!("Telegram no longer accepts the bot token ({err})"),
                        _ => format!("getUpdates failed: {err}"),
                    };
                    Some((what, wait))
                }
            };
            if let Some((what, wait)) = failure {
                self.channel_error(&id, &what).await;
                if !failing {
                    failing = true;
                    self.channel_state(&run, "backing_off").await;
                }
                if !pause_for(&run.stop, wait).await {
                    return;
                }
            }
        }
    }

    /// Webhook mode: sets the webhook (retrying with back-off), then waits for the stop;
    /// on a stop that is not a restart with the same bot (pause, destroy, a new token), it
    /// deletes the webhook so Telegram keeps the updates until the channel runs again.
    async fn hold_webhook(&self, run: &Run, base: &str) {
        let id = &run.agent.id;
        let url = format!("{}/telegram/{id}", base.trim_end_matches('/'));
        let mut backoff = Backoff::new();
        let mut failed = false;
        loop {
            match self.telegram.set_webhook(&run.token, &url, &webhook_secret(&run.token)).await {
                Ok(_) if failed => {
                    self.channel_state(run, "receiving").await;
                    break;
                }
                Ok(_) => break,
                Err(err) => {
                    self.channel_error(id, &format!("setWebhook failed: {err}")).await;
                    failed = true;
                    self.channel_state(run, "backing_off").await;
                    if !pause_for(&run.stop, backoff.next()).await {
                        break;
                    }
                }
            }
        }
        run.stop.cancelled().await;
        let same_bot = {
            let live = run.agent.state();
            let restarting = matches!(live.status, super::instances::Status::Restarting);
            restarting && live.settings.messaging_bot_token.as_ref().is_some_and(|s| s.as_str() == run.sealed.as_str())
        };
        if !same_bot && let Err(err) = self.telegram.delete_webhook(&run.token).await {
            self.channel_error(id, &format!("deleteWebhook failed: {err}")).await;
        }
    }

    /// The answerer: the inbox, oldest first, one update at a time, until the stop.
    async fn answer_inbox(self: Arc<Self>, run: Arc<Run>) {
        let id = run.agent.id.clone();
        let mut pacer = Pacer::default();
        loop {
            let rows = match self.store.queued_telegram_updates(&id, INBOX_BATCH).await {
                Ok(rows) => rows,
                Err(err) => {
                    self.channel_error(&id, &format!("the inbox could not be read: {err}")).await;
                    if !pause_for(&run.stop, BACKOFF_FIRST).await {
                        return;
                    }
                    continue;
                }
            };
            if rows.is_empty() {
                tokio::select! {
                    () = run.stop.cancelled() => return,
                    () = run.wake.notified() => continue,
                }
            }
            for row in rows {
                if run.stop.is_cancelled() {
                    return;
                }
                let sent = match self.handle(&run, &mut pacer, &row).await {
                    Handled::Answered(sent) => sent,
                    Handled::Later => return,
                    Handled::Retry => {
                        if !pause_for(&run.stop, BACKOFF_FIRST).await {
                            return;
                        }
                        break;
                    }
                };
                if let Err(err) = self.store.finish_telegram_update(&id, row.update_id, sent, now_ms()).await {
                    // It stays queued and is answered again: a reply twice beats none.
                    self.channel_error(&id, &format!("an answered update could not be recorded: {err}")).await;
                    if !pause_for(&run.stop, BACKOFF_FIRST).await {
                        return;
                    }
                    break;
                }
            }
        }
    }

    /// One inbox row: pairing for a stranger, a turn for an allowed chat.
    async fn handle(self: &Arc<Self>, run: &Run, pacer: &mut Pacer, row: &Queued) -> Handled {
        run.blocked().remove(&row.chat_id);
        let allowed = {
            let live = run.agent.state();
            super::instances::allowed_chats(&live.settings.allowed_chats).unwrap_or_default().contains(&row.chat_id)
        };
        if !allowed {
            let reply = match self.store.request_pairing(&run.agent.id, row.chat_id, now_ms()).await {
                Ok(pairing::Request::Code { code, .. }) => pairing_reply(&code),
                Ok(pairing::Request::TooMany) => replies::TOO_MANY.to_owned(),
                Err(err) => {
                    self.channel_error(&run.agent.id, &format!("a pairing code could not be stored: {err}")).await;
                    return Handled::Retry;
                }
            };
            return Handled::Answered(self.send_reply(run, pacer, row.chat_id, &reply).await);
        }
        let Some(text) = row.text.clone() else {
            return Handled::Answered(self.send_reply(run, pacer, row.chat_id, replies::NOT_TEXT).await);
        };
        // A turn that ran before a restart is answered from its record, not run again.
        let reply = match self.store.turn_outcome(&row.turn_id).await {
            Ok(Some(outcome)) => recorded_reply(&outcome),
            Ok(None) => match self.channel_turn(run, row, text).await {
                Some(reply) => reply,
                None => return Handled::Later,
            },
            Err(err) => {
                self.channel_error(&run.agent.id, &format!("the inbox could not be read: {err}")).await;
                return Handled::Retry;
            }
        };
        Handled::Answered(self.send_reply(run, pacer, row.chat_id, &reply).await)
    }

    /// Runs an allowed chat's message as a turn, with the typing indicator on; the reply
    /// to send, or `None` when the agent is restarting and the message should wait.
    async fn channel_turn(self: &Arc<Self>, run: &Run, row: &Queued, text: String) -> Option<String> {
        if let Err(err) = limits::text(&text) {
            return Some(err.message().to_owned());
        }
        let typing = CancellationToken::new();
        {
            let (this, token, chat, typing) = (self.clone(), run.token.clone(), row.chat_id, typing.clone());
            tokio::spawn(async move {
                loop {
                    // Best effort: an indicator that fails is not worth an error.
                    let _ = this.telegram.send_chat_action(&token, chat, "typing").await;
                    if !pause_for(&typing, TYPING_EVERY).await {
                        return;
                    }
                }
            });
        }
        let _typing = typing.drop_guard();
        let origin = Origin {
            source: "telegram".to_owned(),
            chat_id: Some(row.chat_id),
            turn_id: Some(row.turn_id.clone()),
            ..Origin::default()
        };
        loop {
            let outcome = self.queue_turn(run.agent.clone(), text.clone(), origin.clone()).await;
            return match outcome {
                Ok(SendMessageResponse { reply, .. }) => Some(reply),
                Err(Error::Api(err)) => match err.reason() {
                    ErrorReason::QueueFull => {
                        if !pause_for(&run.stop, BACKOFF_FIRST).await {
                            return None;
                        }
                        continue;
                    }
                    ErrorReason::InsufficientCredits => Some(replies::OUT_OF_CREDITS.to_owned()),
                    ErrorReason::WrongState => self.not_running_reply(run),
                    _ => Some(format!("The agent could not answer this message: {}", err.message())),
                },
                Err(err) => Some(format!("The agent could not answer this message: {}", err.to_api().message())),
            };
        }
    }

    /// What a chat is told when its turn found the agent not running: nothing yet if it is
    /// on its way back up (the message waits in the inbox), else why.
    fn not_running_reply(&self, run: &Run) -> Option<String> {
        use super::instances::Status;
        match run.agent.status() {
            Status::Restarting | Status::Provisioning | Status::Running | Status::Destroyed => None,
            Status::Paused => Some(replies::PAUSED.to_owned()),
            Status::Suspended | Status::Failed => Some(replies::NOT_RUNNING.to_owned()),
        }
    }

    /// Sends `text` to `chat` in parts under Telegram's limit, paced; returns how many
    /// messages went. 429 waits `retry_after` and tries again; 403 (the bot was blocked)
    /// stops replies to that chat until it writes again; other failures are recorded.
    async fn send_reply(&self, run: &Run, pacer: &mut Pacer, chat: i64, text: &str) -> i64 {
        let id = &run.agent.id;
        let text = if text.trim().is_empty() { replies::EMPTY } else { text };
        let mut sent = 0;
        'parts: for part in split_reply(text, PART_CHARS) {
            let mut tries = 0;
            loop {
                if run.blocked().contains(&chat) {
                    break 'parts;
                }
                tries += 1;
                pacer.ready(chat).await;
                let wait = match self.telegram.send_message(&run.token, chat, &part).await {
                    Ok(_) => {
                        sent += 1;
                        break;
                    }
                    Err(TelegramError::Api { code: 403, description, .. }) => {
                        run.blocked().insert(chat);
                        if let Err(err) = self.store.block_telegram_chat(id, chat, now_ms()).await {
                            warn!(instance = %id, error = %err, "could not record a blocked chat");
                        }
                        self.channel_error(
                            id,
                            &format!("chat {chat} blocked the bot ({description}); replies to it stop"),
                        )
                        .await;
                        break 'parts;
                    }
                    Err(TelegramError::Api { code: 429, retry_after, .. }) if tries <= 5 => {
                        Duration::from_secs(retry_after.unwrap_or(1).min(RETRY_AFTER_MAX))
                    }
                    Err(err @ TelegramError::Network(_)) if tries <= 3 => {
                        self.channel_error(id, &format!("sendMessage to chat {chat} failed: {err}; trying again"))
                            .await;
                        BACKOFF_FIRST * tries
                    }
                    Err(err) => {
                        self.channel_error(id, &format!("sendMessage to chat {chat} failed: {err}")).await;
                        break;
                    }
                };
                // A reply is finished even when the agent stops meanwhile: it was paid for.
                tokio::time::sleep(wait).await;
            }
        }
        sent
    }

    /// Takes an update delivered to the agent's webhook: checks the secret, stores the
    /// update once (Telegram retries deliveries) and wakes the channel.
    pub async fn deliver_telegram_update(
        &self,
        instance_id: &str,
        secret: &str,
        payload: &[u8],
    ) -> Result<DeliverTelegramUpdateResponse> {
        let id = limits::instance_id(instance_id)?;
        let refused =
            || ApiError::unauthenticated("X-Telegram-Bot-Api-Secret-Token does not match this agent's webhook");
        let agent =
            match self.route(id, "").await {
                Ok(Route::Local(agent)) => agent,
                Ok(Route::Remote(client)) => {
                    let req = DeliverTelegramUpdateRequest {
                        instance_id: id.to_owned(),
                        secret_token: secret.to_owned(),
                        payload: payload.to_vec(),
                    };
                    return self
                        .forward(client, id, ("", "telegram"), req, |mut c, r| async move {
                            c.deliver_telegram_update(r).await
                        })
                        .await;
                }
                Err(Error::Api(err)) if err.reason() == ErrorReason::NotFound => return Err(refused().into()),
                Err(err) => return Err(err),
            };
        let sealed = agent.state().settings.messaging_bot_token.clone().ok_or_else(refused)?;
        let token = self.secret_key.open(&sealed, Slot::messaging_bot_token(id)).map_err(|_| refused())?;
        let expected = webhook_secret(&token);
        if !bool::from(expected.as_bytes().ct_eq(secret.as_bytes())) {
            return Err(refused().into());
        }
        let update: Update = serde_json::from_slice(payload)
            .map_err(|err| ApiError::invalid_argument(format!("the body is not a Telegram Update: {err}")))?;
        let stored: Vec<Incoming> = incoming(&update).into_iter().collect();
        self.store.save_telegram_updates(id, &stored, None, now_ms()).await?;
        if let Some((_, wake)) = self.channel_wakers.get(id) {
            wake.notify_one();
        }
        Ok(DeliverTelegramUpdateResponse { ok: true })
    }

    /// The caller's agent's channel.
    pub async fn get_channel(&self, account_id: &str, instance_id: &str) -> Result<GetChannelResponse> {
        let id = limits::instance_id(instance_id)?;
        // Read from the store, with the live status where this replica runs the agent.
        let row = self
            .store
            .instance(id)
            .await?
            .filter(|row| row.account_id == account_id && row.destroyed_at.is_none())
            .ok_or_else(|| no_such_instance(id))?;
        let status = self.registry.get(id).map_or_else(|| row.status(), |agent| agent.status());
        let channel = load_channel(&self.store, &row, status).await?;
        Ok(GetChannelResponse { channel: Some(channel) })
    }

    /// Approves a pairing code: its chat joins the agent's allow-list, and is told so.
    pub async fn pair_channel(
        self: &Arc<Self>,
        account_id: &str,
        instance_id: &str,
        code: &str,
    ) -> Result<PairChannelResponse> {
        let id = limits::instance_id(instance_id)?;
        let code = pairing::normalize(code);
        if code.is_empty() || code.len() > 32 {
            return Err(ApiError::invalid_argument("code is required: the pairing code the bot gave the chat").into());
        }
        let agent = match self.route(id, account_id).await? {
            Route::Local(agent) => agent,
            Route::Remote(client) => {
                let req = PairChannelRequest { instance_id: id.to_owned(), code: code.clone() };
                return self
                    .forward(client, id, (account_id, ""), req, |mut c, r| async move { c.pair_channel(r).await })
                    .await;
            }
        };
        let _lifecycle = agent.lock_lifecycle().await?;
        let mut settings = agent.state().settings.clone();
        let mut chats = super::instances::allowed_chats(&settings.allowed_chats).unwrap_or_default();
        let now = now_ms();
        let chat = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            let chat = tx.take_pairing(id, &code, now).await?.ok_or_else(|| {
                ApiError::not_found("no pending pairing has this code (codes work for one hour, once)")
            })?;
            if !chats.contains(&chat) {
                if chats.len() >= super::instances::MAX_ALLOWED_CHATS {
                    return Err(ApiError::new(
                        ErrorReason::WrongState,
                        format!(
                            "MESSAGING_ALLOWED_CHAT_IDS already holds {} chats; remove some first",
                            super::instances::MAX_ALLOWED_CHATS
                        ),
                    )
                    .into());
                }
                chats.push(chat);
                chats.sort_unstable();
            }
            settings.allowed_chats = chats.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            super::instances::InstanceTx::update_settings(&mut *tx, id, &settings, now).await?;
            tx.commit().await?;
            Ok::<_, Error>(chat)
        })?;
        agent.state().settings = settings;
        info!(instance = id, chat, "telegram chat paired");
        self.welcome_paired(&agent, chat);
        Ok(PairChannelResponse { ok: true, id: id.to_owned(), chat_id: chat, allowed_chat_ids: chats })
    }

    /// Tells a newly paired chat it may talk now (best effort, in the background).
    fn welcome_paired(self: &Arc<Self>, agent: &Arc<Agent>, chat: i64) {
        let Some(sealed) = agent.state().settings.messaging_bot_token.clone() else { return };
        let Ok(token) = self.secret_key.open(&sealed, Slot::messaging_bot_token(&agent.id)) else { return };
        let (this, id) = (self.clone(), agent.id.clone());
        tokio::spawn(async move {
            match this.telegram.send_message(&token, chat, replies::PAIRED).await {
                Ok(_) => {
                    let _ = this.store.count_telegram_sent(&id, 1).await;
                }
                Err(err) => this.channel_error(&id, &format!("the welcome to chat {chat} failed: {err}")).await,
            }
        });
    }
}

/// The reply for a turn that ran before a restart, from its record.
fn recorded_reply(outcome: &TurnOutcome) -> String {
    match outcome.status.as_str() {
        "completed" => outcome.reply.clone(),
        "cancelled" => replies::STOPPED.to_owned(),
        _ => format!("The agent could not answer this message: {}", outcome.error),
    }
}

/// The running channels' stop tokens and wake-ups, by agent: webhook deliveries wake the
/// answerer through it.
#[derive(Default)]
pub struct ChannelWakers(Mutex<std::collections::HashMap<String, (CancellationToken, Arc<Notify>)>>);

impl ChannelWakers {
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (CancellationToken, Arc<Notify>)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, id: String, entry: (CancellationToken, Arc<Notify>)) {
        self.map().insert(id, entry);
    }

    fn get(&self, id: &str) -> Option<(CancellationToken, Arc<Notify>)> {
        self.map().get(id).cloned()
    }

    /// Forgets the agent's entry if its channel has stopped (a newer one may be running).
    fn remove_if_stopped(&self, id: &str) {
        let mut map = self.map();
        if map.get(id).is_some_and(|(stop, _)| stop.is_cancelled()) {
            map.remove(id);
        }
    }
}
