//! `/instances/{id}`: one agent of the signed-in user's account: its status, the config
//! form (`agent_brief`, `model`, and the write-only `PROVIDER_API_KEY` and
//! `MESSAGING_BOT_TOKEN`: the page says whether each is set, never what it is), pause /
//! resume / destroy behind a confirmation (`?confirm=`), the activity, and a chat box.
//!
//! The Telegram card shows the agent's bot as roost runs it (`GET
//! /api/instances/{id}/channel`): state, traffic, the last error, and the chats waiting
//! for approval, with a form to approve a pairing code (`POST /instances/{id}/pair`). The
//! codes themselves are never listed: the owner types the one the person asking gave them.
//!
//! The chat posts `text` and waits for the reply as the REST call does (synchronously, up
//! to the turn cap), then answers 303 back to the page, which shows the conversation from
//! the agent's activity. With the page's script, the same post asks for
//! `text/event-stream`: the reply's text and the tool steps show as they come, and once
//! the turn is done the page reloads to show it as the server renders it. Replies are
//! markdown, rendered here and sanitised ([`markdown`]); each shows its exact cost, tokens
//! and time, and, for a visitor who may read the dashboard, a link to its trace.
//!
//! Each reply has 👍 and 👎 buttons: a form each (`POST /instances/{id}/turns/{turn}/rating`,
//! the REST rating route's call), so rating works with JavaScript off and from the keyboard.
//! The account's current rating shows as the pressed button (`aria-pressed`), read from
//! the turn's scores; a streamed reply becomes ratable when the page reloads after it.

use std::{collections::HashMap, time::Duration};

use askama::Template;
use axum::{
    Router,
    extract::{Path, Query, State},
    response::{IntoResponse as _, Response},
    routing::{get, post},
};
use roost_proto::{
    json::enums::JsonEnum,
    v1::{
        ConfigureRequest, DestroyRequest, GetActivityRequest, GetChannelRequest, GetInstanceRequest, ListScoresRequest,
        PairChannelRequest, PauseRequest, RateTurnRequest, ResumeRequest, SendMessageRequest, StreamMessageRequest,
        TelegramChannel, Turn,
    },
};
use serde::Deserialize;

use super::{
    Button,
    files::Files,
    home::{AgentRow, ChargeRow, settling, status_name},
    signed_in,
};
use crate::{
    Core,
    pages::{
        Failure, When, count, duration_ms,
        forms::{Posted, csrf_field, failed, submit, submit_to},
        layout::{Chrome, PageCall},
        markdown, usd_exact,
    },
};

/// How long the page waits for a chat reply: the default turn cap and a margin (a shorter
/// configured cap ends the turn first, with 504).
const CHAT_WAIT: Duration = Duration::from_secs(910);
/// Turns shown in the chat and the activity table.
const HISTORY: i32 = 50;

pub(super) fn routes() -> Router<Core> {
    Router::new()
        .route("/instances/{id}", get(show))
        .route("/instances/{id}/config", post(configure))
        .route("/instances/{id}/pause", post(pause))
        .route("/instances/{id}/resume", post(resume))
        .route("/instances/{id}/destroy", post(destroy))
        .route("/instances/{id}/message", post(message))
        .route("/instances/{id}/pair", post(pair))
        .route("/instances/{id}/turns/{turn}/rating", post(rate))
}

#[derive(Template)]
#[template(path = "app_instance.html")]
struct InstancePage {
    chrome: Chrome,
    id: String,
    agent: Result<Agent, Failure>,
    activity: Result<Activity, Failure>,
    channel: Result<Channel, Failure>,
    files: Result<Files, Failure>,
    confirm: Option<Confirm>,
}

/// The agent's Telegram channel, for its card.
struct Channel {
    connected: bool,
    bot: String,
    state: String,
    mode: String,
    messages_in: String,
    messages_out: String,
    last_update: When,
    last_error: String,
    last_error_at: When,
    blocked: String,
    pending: Vec<PendingRow>,
}

struct PendingRow {
    chat_id: i64,
    asked: When,
    expires: When,
}

impl From<TelegramChannel> for Channel {
    fn from(c: TelegramChannel) -> Self {
        Self {
            connected: c.connected,
            bot: c.bot_username,
            state: c.state.replace('_', " "),
            mode: c.mode,
            messages_in: count(c.messages_in),
            messages_out: count(c.messages_out),
            last_update: When::timestamp(c.last_update_at.as_ref()),
            last_error: c.last_error,
            last_error_at: When::timestamp(c.last_error_at.as_ref()),
            blocked: c.blocked_chat_ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", "),
            pending: c
                .pending_pairings
                .iter()
                .map(|p| PendingRow {
                    chat_id: p.chat_id,
                    asked: When::timestamp(p.created_at.as_ref()),
                    expires: When::timestamp(p.expires_at.as_ref()),
                })
                .collect(),
        }
    }
}

struct Agent {
    row: AgentRow,
    brief: String,
    model: String,
    provider_key_set: bool,
    bot_token_set: bool,
    allowed_chats: String,
    created: When,
    running: bool,
    pausable: bool,
    resumable: bool,
    settling: bool,
}

struct Activity {
    /// Oldest first, for the chat.
    chat: Vec<ChatTurn>,
    /// Newest first, for the table.
    turns: Vec<TurnRow>,
    charges: Vec<ChargeRow>,
}

struct ChatTurn {
    id: String,
    /// Who wrote: "you", or the Telegram chat.
    who: String,
    text: String,
    /// The reply's markdown as sanitised HTML ([`markdown::render`]).
    reply_html: String,
    error: String,
    when: When,
    /// What the turn cost, exactly (`$0.00023`).
    cost: String,
    /// Tokens in and out.
    tokens: String,
    /// How long it took.
    took: String,
    /// The turn's trace on the dashboard, for a visitor who may read it.
    trace: Option<String>,
    /// The account's thumbs on the reply: `Some(true)` up, `Some(false)` down.
    thumbs: Option<bool>,
    /// The account's 1-5 rating of the reply (given over the API), as shown ("4/5").
    stars: String,
}

impl ChatTurn {
    fn thumbs_up(&self) -> bool {
        self.thumbs == Some(true)
    }

    fn thumbs_down(&self) -> bool {
        self.thumbs == Some(false)
    }
}

/// The score id of the account's rating of a turn: the server's `rating_id` (one score
/// per turn and name, replaced when the account rates again), spelled out here because
/// the page reads the rating back by it.
fn rating_id(turn_id: &str, name: &str) -> String {
    format!("rating_{turn_id}_{name}")
}

/// The account's ratings of the shown replies, set on each: its `thumbs` and `rating`
/// scores, found by their ids among the turn's scores (a dashboard user's scores on the
/// same turn are theirs, not the account's). The turns are the account's own, read from
/// its activity. A read that fails shows the reply unrated: the page still works, and
/// rating it again records the rating anyway.
async fn load_ratings(core: &Core, chat: &mut [ChatTurn]) {
    let reads = chat.iter().filter(|t| !t.reply_html.is_empty()).map(|t| {
        let req = ListScoresRequest { turn_id: t.id.clone(), limit: 50, ..ListScoresRequest::default() };
        let id = t.id.clone();
        async move { (id, core.scores.list_scores(tonic::Request::new(req)).await) }
    });
    let found: HashMap<String, Vec<roost_proto::v1::Score>> = futures::future::join_all(reads)
        .await
        .into_iter()
        .filter_map(|(id, read)| read.ok().map(|r| (id, r.into_inner().scores)))
        .collect();
    for turn in chat {
        let Some(scores) = found.get(&turn.id) else { continue };
        let value = |name: &str| {
            let id = rating_id(&turn.id, name);
            scores.iter().find(|s| s.id == id).and_then(|s| s.value.as_ref()).map(roost_proto::json::value::to_json)
        };
        turn.thumbs = value("thumbs").and_then(|v| v.as_bool());
        turn.stars = value("rating").and_then(|v| v.as_f64()).map(|n| format!("{n}/5")).unwrap_or_default();
    }
}

impl ChatTurn {
    fn of(t: &Turn, reads_dashboard: bool) -> Self {
        let usage = t.usage.unwrap_or_default();
        Self {
            id: t.id.clone(),
            who: sender(t),
            text: t.text.clone(),
            reply_html: if t.reply.is_empty() { String::new() } else { markdown::render(&t.reply) },
            error: t.error.clone(),
            when: When::timestamp(t.queued_at.as_ref()),
            cost: usd_exact(t.charged_nanocents),
            tokens: format!("{} in / {} out", count(usage.input_tokens), count(usage.output_tokens)),
            // Turns are timed in whole milliseconds: an instant one is not "0 µs".
            took: if t.duration_ms < 1 { "< 1 ms".to_owned() } else { duration_ms(t.duration_ms as f64) },
            trace: (reads_dashboard && !t.trace_id.is_empty()).then(|| format!("/dashboard/traces/{}", t.trace_id)),
            thumbs: None,
            stars: String::new(),
        }
    }
}

struct TurnRow {
    when: When,
    status: &'static str,
    source: String,
    duration: String,
    tokens: String,
    charged: String,
    error: String,
}

/// A lifecycle action waiting for the user's "yes".
struct Confirm {
    action: &'static str,
    label: &'static str,
    warning: String,
}

impl Confirm {
    /// The confirmation of `action` for the agent shown as `agent`.
    fn of(action: &str, agent: &str) -> Option<Self> {
        let (action, label, warning) = match action {
            "pause" => ("pause", "Pause", format!("Pause {agent}? It stops answering until you resume it.")),
            "resume" => ("resume", "Resume", format!("Resume {agent}? A suspended agent's renewal is charged now.")),
            "destroy" => (
                "destroy",
                "Destroy",
                format!("Destroy {agent}? It is gone for good; the unused part of its paid period is refunded."),
            ),
            _ => return None,
        };
        Some(Self { action, label, warning })
    }
}

/// Who sent a turn's message, as the page says it: "you" (API, web, MCP), or the
/// Telegram chat.
fn sender(t: &Turn) -> String {
    if t.source == "telegram" && t.chat_id != 0 { format!("telegram chat {}", t.chat_id) } else { "you".to_owned() }
}

impl From<&Turn> for TurnRow {
    fn from(t: &Turn) -> Self {
        let usage = t.usage.unwrap_or_default();
        Self {
            when: When::timestamp(t.queued_at.as_ref()),
            status: roost_proto::v1::TurnStatus::json_name(t.status).unwrap_or("unknown"),
            source: if t.chat_id != 0 { sender(t) } else { t.source.clone() },
            duration: duration_ms(t.duration_ms as f64),
            tokens: format!("{} / {}", count(usage.input_tokens), count(usage.output_tokens)),
            charged: usd_exact(t.charged_nanocents),
            error: t.error.clone(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ShowQuery {
    #[serde(default)]
    confirm: String,
}

async fn show(
    State(core): State<Core>,
    page: PageCall,
    Path(id): Path<String>,
    Query(query): Query<ShowQuery>,
) -> Response {
    let user = match signed_in(&core, &page).await {
        Ok(user) => user,
        Err(answer) => return answer,
    };
    let (agent, activity, channel, files) = tokio::join!(
        page.load(
            format!("GET /api/instances/{id}"),
            core.agents.get_instance(page.request(GetInstanceRequest { instance_id: id.clone() }))
        ),
        page.load(
            format!("GET /api/instances/{id}/activity?limit={HISTORY}"),
            core.agents.get_activity(page.request(GetActivityRequest { instance_id: id.clone(), limit: HISTORY }))
        ),
        page.load(
            format!("GET /api/instances/{id}/channel"),
            core.agents.get_channel(page.request(GetChannelRequest { instance_id: id.clone() }))
        ),
        Files::card(&core, &page, &id),
    );
    let channel = channel.map_err(Failure::from).map(|c| Channel::from(c.channel.unwrap_or_default()));
    let agent = agent.map_err(Failure::from).and_then(|a| {
        let instance =
            a.instance.ok_or_else(|| Failure { code: "not_found".into(), message: "no such agent".into() })?;
        let config = instance.config.clone().unwrap_or_default();
        let row = AgentRow::from(instance.clone());
        Ok(Agent {
            running: row.status == "running",
            pausable: row.status == "running",
            resumable: matches!(row.status, "paused" | "failed" | "suspended"),
            settling: settling(row.status),
            brief: instance.brief,
            model: instance.model,
            provider_key_set: config.provider_api_key_set,
            bot_token_set: config.messaging_bot_token_set,
            allowed_chats: config.allowed_chat_ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","),
            created: When::timestamp(instance.created_at.as_ref()),
            row,
        })
    });
    let status = match &agent {
        Err(f) if f.code == "not_found" => http::StatusCode::NOT_FOUND,
        _ => http::StatusCode::OK,
    };
    let mut activity = activity.map_err(Failure::from).map(|a| Activity {
        chat: a
            .turns
            .iter()
            .rev()
            .filter(|t| !t.text.is_empty())
            .map(|t| ChatTurn::of(t, page.reads_dashboard()))
            .collect(),
        turns: a.turns.iter().map(TurnRow::from).collect(),
        charges: a.charges.into_iter().map(ChargeRow::from).collect(),
    });
    if let Ok(activity) = &mut activity {
        load_ratings(&core, &mut activity.chat).await;
    }
    // A confirmation names the agent as the user named it; an unnamed one by its id.
    let confirm = agent
        .as_ref()
        .ok()
        .map(|a| if a.row.name.is_empty() { id.clone() } else { format!("“{}”", a.row.name) })
        .and_then(|shown| Confirm::of(&query.confirm, &shown));
    let view = InstancePage { chrome: user.chrome(&page, &id, "/"), id, agent, activity, channel, files, confirm };
    page.render_with(status, &view)
}

#[derive(Debug, Deserialize)]
struct ConfigForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    shown_name: String,
    #[serde(default)]
    agent_brief: String,
    #[serde(default)]
    model: String,
    #[serde(default, rename = "PROVIDER_API_KEY")]
    provider_api_key: String,
    #[serde(default, rename = "MESSAGING_BOT_TOKEN")]
    messaging_bot_token: String,
    #[serde(default, rename = "MESSAGING_ALLOWED_CHAT_IDS")]
    allowed_chat_ids: String,
    #[serde(default)]
    shown_chats: String,
    /// The brief and model as the form showed them: only what the user changed is sent.
    #[serde(default)]
    shown_brief: String,
    #[serde(default)]
    shown_model: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, Deserialize)]
struct PairForm {
    #[serde(default)]
    code: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, Deserialize)]
struct Chat {
    #[serde(default)]
    text: String,
    #[serde(default)]
    csrf: String,
}

/// A 👍 or 👎 button's post.
#[derive(Debug, Deserialize)]
struct RateForm {
    /// `up` or `down`.
    #[serde(default)]
    value: String,
    #[serde(default)]
    csrf: String,
}

csrf_field!(ConfigForm, Chat, PairForm, RateForm);

/// `Some(value)` when a field was filled in (secrets: empty means "keep").
fn filled(value: String) -> Option<String> {
    (!value.trim().is_empty()).then(|| value.trim().to_owned())
}

async fn configure(
    State(core): State<Core>,
    Path(id): Path<String>,
    Posted(page, form): Posted<ConfigForm>,
) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let req = ConfigureRequest {
        instance_id: id.clone(),
        agent_brief: (form.agent_brief != form.shown_brief).then_some(form.agent_brief),
        model: (form.model.trim() != form.shown_model).then(|| form.model.trim().to_owned()),
        provider_api_key: filled(form.provider_api_key),
        messaging_bot_token: filled(form.messaging_bot_token),
        messaging_allowed_chat_ids: (form.allowed_chat_ids.trim() != form.shown_chats)
            .then(|| form.allowed_chat_ids.trim().to_owned()),
        name: (form.name.trim() != form.shown_name).then(|| form.name.trim().to_owned()),
    };
    let nothing = req.agent_brief.is_none()
        && req.name.is_none()
        && req.model.is_none()
        && req.provider_api_key.is_none()
        && req.messaging_bot_token.is_none()
        && req.messaging_allowed_chat_ids.is_none();
    let back = format!("/instances/{id}");
    if nothing {
        return crate::pages::forms::done(&back, "Nothing changed.");
    }
    submit(&page, format!("POST /api/instances/{id}/config"), core.agents.configure(page.request(req)), &back, |done| {
        format!("Config applied ({}); status {}.", done.applied.join(", "), status_name(done.status))
    })
    .await
}

async fn pause(State(core): State<Core>, Path(id): Path<String>, Posted(page, _): Posted<Button>) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let req = PauseRequest { instance_id: id.clone() };
    submit(
        &page,
        format!("POST /api/instances/{id}/pause"),
        core.agents.pause(page.request(req)),
        &format!("/instances/{id}"),
        |done| format!("Paused; status {}.", status_name(done.status)),
    )
    .await
}

async fn resume(State(core): State<Core>, Path(id): Path<String>, Posted(page, _): Posted<Button>) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let req = ResumeRequest { instance_id: id.clone() };
    submit(
        &page,
        format!("POST /api/instances/{id}/resume"),
        core.agents.resume(page.request(req)),
        &format!("/instances/{id}"),
        |done| format!("Resumed; status {}, charged {}.", status_name(done.status), usd_exact(done.charged_nanocents)),
    )
    .await
}

async fn destroy(State(core): State<Core>, Path(id): Path<String>, Posted(page, _): Posted<Button>) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let req = DestroyRequest { instance_id: id.clone() };
    submit_to(&page, format!("POST /api/instances/{id}/destroy"), core.agents.destroy(page.request(req)), |done| {
        (
            "/".to_owned(),
            format!(
                "Destroyed {id}; refunded {}, balance {}.",
                usd_exact(done.refunded_nanocents),
                usd_exact(done.balance_nanocents)
            ),
        )
    })
    .await
}

async fn pair(State(core): State<Core>, Path(id): Path<String>, Posted(page, form): Posted<PairForm>) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let req = PairChannelRequest { instance_id: id.clone(), code: form.code };
    submit(
        &page,
        format!("POST /api/instances/{id}/channel/pair"),
        core.agents.pair_channel(page.request(req)),
        &format!("/instances/{id}#telegram"),
        |done| format!("Chat {} may now talk to this agent.", done.chat_id),
    )
    .await
}

/// A 👍 or 👎 on a reply: the REST rating's call, then back to the turn in the chat.
async fn rate(
    State(core): State<Core>,
    Path((id, turn)): Path<(String, String)>,
    Posted(page, form): Posted<RateForm>,
) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let up = match form.value.as_str() {
        "up" => true,
        "down" => false,
        _ => {
            return failed(&page, &roost_proto::ApiError::invalid_argument("rate a reply with thumbs up or down"));
        }
    };
    let value = Some(roost_proto::json::value::from_json(&serde_json::Value::Bool(up)));
    let req = RateTurnRequest { instance_id: id.clone(), turn_id: turn.clone(), value, comment: String::new() };
    submit(
        &page,
        format!("POST /api/instances/{id}/turns/{turn}/rating"),
        core.agents.rate_turn(page.request(req)),
        &format!("/instances/{id}#turn-{turn}"),
        |_| format!("Rated the reply: thumbs {}.", if up { "up" } else { "down" }),
    )
    .await
}

async fn message(
    State(core): State<Core>,
    Path(id): Path<String>,
    headers: http::HeaderMap,
    Posted(page, form): Posted<Chat>,
) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    // The page's script asks for the turn as it happens; without it, the form waits.
    let streamed = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.starts_with("text/event-stream"));
    if streamed {
        let mut req = page.request(StreamMessageRequest { instance_id: id.clone(), text: form.text });
        req.metadata_mut().insert("x-roost-source", tonic::metadata::MetadataValue::from_static("web"));
        return match core.agents.stream_message(req).await {
            Ok(events) => crate::routes::agents::turn_events(&core, events.into_inner()),
            Err(status) => roost_kit::HttpError::from(status).into_response(),
        };
    }
    let mut req = page.request(SendMessageRequest { instance_id: id.clone(), text: form.text });
    req.metadata_mut().insert("x-roost-source", tonic::metadata::MetadataValue::from_static("web"));
    let sent =
        page.load_within(CHAT_WAIT, format!("POST /api/instances/{id}/messages"), core.agents.send_message(req)).await;
    match sent {
        Ok(reply) => crate::pages::forms::done(
            &format!("/instances/{id}?turn={}#chat", reply.turn_id),
            &format!("{}; charged {}.", replied_in(reply.duration_ms), usd_exact(reply.charged_nanocents)),
        ),
        Err(err) => failed(&page, &err),
    }
}

/// How long a turn took, as the chat's notice says it: turns are timed in whole
/// milliseconds, so an instant one is "under a millisecond", not "0 µs".
fn replied_in(ms: i64) -> String {
    if ms < 1 { "Replied in under a millisecond".to_owned() } else { format!("Replied in {}", duration_ms(ms as f64)) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_confirmation_names_the_agent() {
        let confirm = super::Confirm::of("destroy", "“Pip”").unwrap();
        assert!(confirm.warning.starts_with("Destroy “Pip”? It is gone for good"), "{}", confirm.warning);
        assert!(super::Confirm::of("explode", "“Pip”").is_none());
    }

    #[test]
    fn an_instant_reply_reads_as_one() {
        assert_eq!(super::replied_in(0), "Replied in under a millisecond");
        assert_eq!(super::replied_in(1530), "Replied in 1.53 s");
    }
}
