//! `/dashboard/channels`: each hosted agent's ways in (the API, a connected chat bot) and
//! the messages that came through each over the last day and week (`GET /api/channels`),
//! then the Telegram bots roost runs: state, allowed and waiting chats, traffic, errors.

use askama::Template;
use axum::{extract::State, response::Response};
use roost_proto::v1::GetChannelsRequest;

use crate::{
    Core,
    pages::{
        Failure, When, count,
        layout::{Chrome, PageCall},
    },
};

#[derive(Template)]
#[template(path = "channels.html")]
struct ChannelsPage {
    chrome: Chrome,
    channels: Result<Channels, Failure>,
}

struct Channels {
    warning: String,
    agents: Vec<AgentRow>,
    /// Some agent has no chat bot (the page then says how to connect one).
    some_without_bot: bool,
    bots: Vec<BotRow>,
}

/// A connected Telegram bot.
struct BotRow {
    id: String,
    username: String,
    state: String,
    mode: String,
    allowed: String,
    waiting: String,
    blocked: String,
    last_update: When,
    traffic: String,
    last_error: String,
    last_error_at: When,
}

impl BotRow {
    fn of(id: &str, t: &roost_proto::v1::TelegramChannel) -> Self {
        let chats = |ids: &[i64]| {
            if ids.is_empty() {
                "—".to_owned()
            } else {
                ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            }
        };
        let waiting: Vec<i64> = t.pending_pairings.iter().map(|p| p.chat_id).collect();
        Self {
            id: id.to_owned(),
            username: t.bot_username.clone(),
            state: t.state.replace('_', " "),
            mode: t.mode.clone(),
            allowed: chats(&t.allowed_chat_ids),
            waiting: chats(&waiting),
            blocked: chats(&t.blocked_chat_ids),
            last_update: When::timestamp(t.last_update_at.as_ref()),
            traffic: format!("{} / {}", count(t.messages_in), count(t.messages_out)),
            last_error: t.last_error.clone(),
            last_error_at: When::timestamp(t.last_error_at.as_ref()),
        }
    }
}

struct AgentRow {
    id: String,
    account: String,
    runtime: String,
    status: String,
    chat_bot: bool,
    traffic: Vec<TrafficRow>,
}

struct TrafficRow {
    source: String,
    day: String,
    week: String,
    failed: String,
    any_failed: bool,
    last: When,
}

pub(super) async fn page(State(core): State<Core>, page: PageCall) -> Response {
    let answer = page.load("GET /api/channels", core.features.get_channels(page.request(GetChannelsRequest {}))).await;
    let channels = answer.map_err(Failure::from).map(|c| Channels {
        warning: c.warning,
        some_without_bot: c.agents.iter().any(|a| !a.chat_bot_connected),
        bots: c
            .agents
            .iter()
            .filter_map(|a| a.telegram.as_ref().filter(|t| t.connected).map(|t| BotRow::of(&a.instance_id, t)))
            .collect(),
        agents: c
            .agents
            .into_iter()
            .map(|a| AgentRow {
                id: a.instance_id,
                account: a.account_id,
                runtime: a.runtime,
                status: a.status,
                chat_bot: a.chat_bot_connected,
                traffic: a
                    .traffic
                    .into_iter()
                    .map(|t| TrafficRow {
                        source: t.source,
                        day: count(t.messages_24h),
                        week: count(t.messages_7d),
                        failed: count(t.failed_7d),
                        any_failed: t.failed_7d > 0,
                        last: When::timestamp(t.last_message_at.as_ref()),
                    })
                    .collect(),
            })
            .collect(),
    });
    page.render(&ChannelsPage { chrome: page.chrome("Channels", "/dashboard/channels"), channels })
}
