//! The API view of an agent's channel ([`TelegramChannel`]), for the agent's owner
//! (`GET /api/instances/{id}/channel`) and the operator's `/api/channels` alike.

use roost_proto::v1::{PendingPairing, TelegramChannel};

use super::{inbox::ChannelRow, pairing::Pending};
use crate::{
    Result,
    agents::instances::{InstanceRow, Status, allowed_chats},
    store::Store,
    time::{now_ms, timestamp_ms},
};

/// The view of `row`'s channel from its stored counters (`channel`, if it ever ran), the
/// chats that wait for approval and those that blocked the bot. `status` is the agent's
/// live status: a channel whose agent is not running is stopped, whatever was last stored.
pub fn channel_view(
    row: &InstanceRow,
    status: Status,
    channel: Option<&ChannelRow>,
    pending: &[Pending],
    blocked: Vec<i64>,
) -> TelegramChannel {
    let connected = row.messaging_bot_token.is_some();
    let state = match channel {
        _ if !connected => "disconnected",
        Some(c) if status == Status::Running && c.state != "stopped" => c.state.as_str(),
        _ => "stopped",
    };
    TelegramChannel {
        connected,
        bot_username: if connected { row.telegram_username.clone() } else { String::new() },
        mode: channel.map_or("polling", |c| c.mode.as_str()).to_owned(),
        state: state.to_owned(),
        allowed_chat_ids: allowed_chats(&row.telegram_allowed_chats).unwrap_or_default(),
        pending_pairings: pending
            .iter()
            .map(|p| PendingPairing {
                chat_id: p.chat_id,
                created_at: Some(timestamp_ms(p.created_at)),
                expires_at: Some(timestamp_ms(p.expires_at)),
            })
            .collect(),
        last_update_at: channel.and_then(|c| c.last_update_at).map(timestamp_ms),
        messages_in: channel.map_or(0, |c| c.messages_in),
        messages_out: channel.map_or(0, |c| c.messages_out),
        last_error: channel.map(|c| c.last_error.clone()).unwrap_or_default(),
        last_error_at: channel.and_then(|c| c.last_error_at).map(timestamp_ms),
        blocked_chat_ids: blocked,
    }
}

/// One agent's channel, read from the store.
pub async fn load_channel(store: &Store, row: &InstanceRow, status: Status) -> Result<TelegramChannel> {
    let channel = store.telegram_channel(&row.id).await?;
    let pending = store.pending_pairings(&row.id, now_ms()).await?;
    let blocked = store.blocked_telegram_chats(&row.id).await?;
    Ok(channel_view(row, status, channel.as_ref(), &pending, blocked))
}
