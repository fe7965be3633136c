//! The channel's durable half: updates read from a bot (the inbox), where polling resumes,
//! traffic counters, the last error and chats that blocked the bot.
//!
//! An update is stored in the same transaction that moves the poll's offset past it, with
//! the id of the turn it will become chosen up front. So after a crash or restart:
//! - an update Telegram handed over is in the inbox (the offset never passes an update
//!   that is not stored), and Telegram does not hand it over again;
//! - an update stored but not answered is answered, and if its turn already ran (the
//!   `turns` row with its `turn_id` exists) the stored reply is sent instead of running
//!   the turn a second time.
//!
//! `(instance_id, update_id)` is the inbox's primary key, so a webhook delivery Telegram
//! retries is stored once.

use crate::{
    Result,
    store::{BeginWrite, Store, on_reader, on_writer},
};

/// How long answered updates are kept (for the unique key's sake) before they are pruned.
const KEEP_DONE_MS: i64 = 86_400_000;

/// An update as it arrives, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// Telegram's update id.
    pub update_id: i64,
    /// The chat it came from.
    pub chat_id: i64,
    /// Its text; `None` for a message that is not text.
    pub text: Option<String>,
    /// The turn id it will run as.
    pub turn_id: String,
}

/// An update waiting in the inbox.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Queued {
    /// Telegram's update id.
    pub update_id: i64,
    /// The chat it came from.
    pub chat_id: i64,
    /// Its text; `None` for a message that is not text.
    pub text: Option<String>,
    /// The turn id it runs as.
    pub turn_id: String,
}

/// A channel's counters and last error, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct ChannelRow {
    /// The agent.
    pub instance_id: String,
    /// "polling" or "webhook".
    pub mode: String,
    /// "receiving", "backing_off" or "stopped", as last recorded.
    pub state: String,
    /// When the last update arrived.
    pub last_update_at: Option<i64>,
    /// Updates received.
    pub messages_in: i64,
    /// Messages sent.
    pub messages_out: i64,
    /// The last error ('' for none).
    pub last_error: String,
    /// When it happened.
    pub last_error_at: Option<i64>,
}

/// How a stored turn ended, for an update whose turn ran before a restart.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TurnOutcome {
    /// The turn's stored status ("completed", "failed", ...).
    pub status: String,
    /// Its reply.
    pub reply: String,
    /// Its error.
    pub error: String,
}

impl Store {
    /// Opens a run of the agent's channel for `bot_id` in `mode` ("polling" or "webhook"):
    /// where polling resumes (the stored offset, or 0 when the agent never ran this bot: a
    /// new bot's update ids start afresh) and the run's number, which its state changes
    /// name ([`Store::set_telegram_state`]).
    pub async fn open_telegram_channel(&self, instance_id: &str, bot_id: i64, mode: &str) -> Result<(i64, i64)> {
        Ok(on_writer!(self, |pool| {
            sqlx::query_as(
                "INSERT INTO telegram_channels (instance_id, bot_id, mode, state, run_seq) \
                 VALUES ($1, $2, $3, 'receiving', 1) \
                 ON CONFLICT (instance_id) DO UPDATE SET bot_id = excluded.bot_id, mode = excluded.mode, \
                   state = 'receiving', run_seq = telegram_channels.run_seq + 1, \
                   update_offset = CASE WHEN telegram_channels.bot_id = excluded.bot_id \
                                        THEN telegram_channels.update_offset ELSE 0 END \
                 RETURNING update_offset, run_seq",
            )
            .bind(instance_id)
            .bind(bot_id)
            .bind(mode)
            .fetch_one(pool)
            .await
        })?)
    }

    /// Records what run `run_seq` of the channel is doing ("receiving", "backing_off" or
    /// "stopped"), unless a newer run has started.
    pub async fn set_telegram_state(&self, instance_id: &str, run_seq: i64, state: &str) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query("UPDATE telegram_channels SET state = $2 WHERE instance_id = $1 AND run_seq = $3")
                .bind(instance_id)
                .bind(state)
                .bind(run_seq)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Stores updates and, in the same transaction, the offset polling resumes from
    /// (`None` for a webhook delivery, which has none); a chat that writes again is no
    /// longer blocked. Updates already stored are skipped. Returns how many were new.
    pub async fn save_telegram_updates(
        &self,
        instance_id: &str,
        updates: &[Incoming],
        next_offset: Option<i64>,
        now: i64,
    ) -> Result<u64> {
        Ok(on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            let mut new = 0;
            for update in updates {
                new += sqlx::query(
                    "INSERT INTO telegram_updates (instance_id, update_id, chat_id, text, turn_id, state, received_at) \
                     VALUES ($1, $2, $3, $4, $5, 'queued', $6) ON CONFLICT DO NOTHING",
                )
                .bind(instance_id)
                .bind(update.update_id)
                .bind(update.chat_id)
                .bind(update.text.as_deref())
                .bind(&update.turn_id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                sqlx::query("DELETE FROM telegram_blocked_chats WHERE instance_id = $1 AND chat_id = $2")
                    .bind(instance_id)
                    .bind(update.chat_id)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(
                "UPDATE telegram_channels SET update_offset = COALESCE($2, update_offset), \
                   messages_in = messages_in + $3, last_update_at = $4 WHERE instance_id = $1",
            )
            .bind(instance_id)
            .bind(next_offset)
            .bind(new as i64)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM telegram_updates WHERE state = 'done' AND done_at < $1")
                .bind(now - KEEP_DONE_MS)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(new)
        })?)
    }

    /// The agent's unanswered updates, oldest first.
    pub async fn queued_telegram_updates(&self, instance_id: &str, limit: i64) -> Result<Vec<Queued>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT update_id, chat_id, text, turn_id FROM telegram_updates \
                 WHERE instance_id = $1 AND state = 'queued' ORDER BY update_id LIMIT $2",
            )
            .bind(instance_id)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    /// Marks an update answered, counting the `sent` messages that answered it.
    pub async fn finish_telegram_update(&self, instance_id: &str, update_id: i64, sent: i64, now: i64) -> Result<()> {
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query(
                "UPDATE telegram_updates SET state = 'done', done_at = $3 WHERE instance_id = $1 AND update_id = $2",
            )
            .bind(instance_id)
            .bind(update_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query(COUNT_SENT).bind(instance_id).bind(sent).execute(&mut *tx).await?;
            tx.commit().await
        })?;
        Ok(())
    }

    /// Counts messages sent outside an update's answer (a pairing's welcome).
    pub async fn count_telegram_sent(&self, instance_id: &str, sent: i64) -> Result<()> {
        on_writer!(self, |pool| sqlx::query(COUNT_SENT).bind(instance_id).bind(sent).execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    /// Records what went wrong with the channel (shown on /api/channels).
    pub async fn record_telegram_error(&self, instance_id: &str, error: &str, now: i64) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query("UPDATE telegram_channels SET last_error = $2, last_error_at = $3 WHERE instance_id = $1")
                .bind(instance_id)
                .bind(error)
                .bind(now)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Records that a chat blocked the bot.
    pub async fn block_telegram_chat(&self, instance_id: &str, chat_id: i64, now: i64) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO telegram_blocked_chats (instance_id, chat_id, blocked_at) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(instance_id)
            .bind(chat_id)
            .bind(now)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    /// The chats that blocked the agent's bot.
    pub async fn blocked_telegram_chats(&self, instance_id: &str) -> Result<Vec<i64>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_scalar("SELECT chat_id FROM telegram_blocked_chats WHERE instance_id = $1 ORDER BY chat_id")
                .bind(instance_id)
                .fetch_all(pool)
                .await
        })?)
    }

    /// Every agent's chats that blocked its bot, as `(instance_id, chat_id)`.
    pub async fn all_blocked_telegram_chats(&self) -> Result<Vec<(String, i64)>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as("SELECT instance_id, chat_id FROM telegram_blocked_chats ORDER BY instance_id, chat_id")
                .fetch_all(pool)
                .await
        })?)
    }

    /// Counters and last errors of every channel that ever ran.
    pub async fn telegram_channels(&self) -> Result<Vec<ChannelRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT instance_id, mode, state, last_update_at, messages_in, messages_out, last_error, last_error_at \
                 FROM telegram_channels",
            )
            .fetch_all(pool)
            .await
        })?)
    }

    /// One agent's channel counters, if its channel ever ran.
    pub async fn telegram_channel(&self, instance_id: &str) -> Result<Option<ChannelRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT instance_id, mode, state, last_update_at, messages_in, messages_out, last_error, last_error_at \
                 FROM telegram_channels WHERE instance_id = $1",
            )
            .bind(instance_id)
            .fetch_optional(pool)
            .await
        })?)
    }

    /// How the turn `turn_id` ended, if it was recorded.
    pub async fn turn_outcome(&self, turn_id: &str) -> Result<Option<TurnOutcome>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as("SELECT status, reply, error FROM turns WHERE id = $1")
                .bind(turn_id)
                .fetch_optional(pool)
                .await
        })?)
    }
}

/// Adds `$2` messages to the channel's outgoing count.
const COUNT_SENT: &str = "UPDATE telegram_channels SET messages_out = messages_out + $2 WHERE instance_id = $1";
