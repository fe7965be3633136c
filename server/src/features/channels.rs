//! The channels page: each hosted agent's ways in (roost's API, a chat bot) and the
//! messages that came through each, from the turns table; and each agent's Telegram
//! channel as roost runs it (five reads in all, however many agents there are).

use std::collections::HashMap;

use roost_proto::v1::{AgentChannels, ChannelTraffic, GetChannelsResponse};

use crate::{
    Result,
    store::{Store, on_reader},
    telegram::{inbox::ChannelRow, pairing::Pending, view::channel_view},
    time::{now_ms, timestamp_ms},
};

/// The channels page.
pub async fn channels_page(store: &Store) -> Result<GetChannelsResponse> {
    let now = now_ms();
    let (day, week) = (now - 86_400_000, now - 7 * 86_400_000);
    let agents = store.live_instances().await?;
    let traffic: Vec<(String, String, i64, i64, i64, i64)> = on_reader!(store, |pool| {
        sqlx::query_as(
            "SELECT instance_id, source, \
                    CAST(SUM(CASE WHEN queued_at >= $2 THEN 1 ELSE 0 END) AS BIGINT), COUNT(*), \
                    CAST(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS BIGINT), MAX(queued_at) \
             FROM turns WHERE queued_at >= $1 GROUP BY instance_id, source ORDER BY instance_id, source",
        )
        .bind(week)
        .bind(day)
        .fetch_all(pool)
        .await
    })?;
    let mut by_agent: HashMap<String, Vec<ChannelTraffic>> = HashMap::new();
    for (instance, source, last_day, last_week, failed, last) in traffic {
        by_agent.entry(instance).or_default().push(ChannelTraffic {
            source,
            messages_24h: last_day,
            messages_7d: last_week,
            failed_7d: failed,
            last_message_at: Some(timestamp_ms(last)),
        });
    }
    let mut channels: HashMap<String, ChannelRow> =
        store.telegram_channels().await?.into_iter().map(|c| (c.instance_id.clone(), c)).collect();
    let mut pending: HashMap<String, Vec<Pending>> = HashMap::new();
    for p in store.all_pending_pairings(now).await? {
        pending.entry(p.instance_id.clone()).or_default().push(p);
    }
    let mut blocked: HashMap<String, Vec<i64>> = HashMap::new();
    for (instance, chat) in store.all_blocked_telegram_chats().await? {
        blocked.entry(instance).or_default().push(chat);
    }
    let mut agents: Vec<AgentChannels> = agents
        .into_iter()
        .map(|row| AgentChannels {
            telegram: Some(channel_view(
                &row,
                row.status(),
                channels.remove(&row.id).as_ref(),
                &pending.remove(&row.id).unwrap_or_default(),
                blocked.remove(&row.id).unwrap_or_default(),
            )),
            traffic: by_agent.remove(&row.id).unwrap_or_default(),
            chat_bot_connected: row.messaging_bot_token.as_deref().is_some_and(|t| !t.is_empty()),
            status: row.status.clone(),
            name: row.name.clone(),
            instance_id: row.id,
            account_id: row.account_id,
            runtime: row.runtime,
        })
        .collect();
    agents.reverse();
    Ok(GetChannelsResponse { agents, warning: String::new() })
}
