//! `/dashboard/channels`: each hosted agent's ways in (the API, a connected chat bot) and
//! the messages that came through each over the last day and week (`GET /api/channels`).

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
