//! Pairing: how a chat that is not on an agent's allow-list asks to talk to it.
//!
//! The bot answers a stranger with a one-time code (valid an hour; at most three pending
//! per agent, one per chat) and nothing else: the message never reaches the runtime and is
//! never billed. The owner approves the code (`POST /api/instances/{id}/channel/pair`),
//! which moves the chat onto MESSAGING_ALLOWED_CHAT_IDS. Pages and `/api/channels` show
//! which chats wait, never their codes: the owner learns a code from the person asking,
//! which is what makes approving it mean "I know who this is".

use crate::{
    Result,
    ids::random_base32,
    store::{BeginWrite, Store, impl_for_connections, on_reader, on_writer},
};

/// How long a code works.
pub const CODE_TTL_MS: i64 = 3_600_000;
/// Most codes pending per agent.
pub const MAX_PENDING: i64 = 3;

/// A new code: 8 base32 characters (40 bits), shown as `ABCD-EFGH`.
pub fn new_code() -> String {
    random_base32(8).to_uppercase()
}

/// A code as people write it (`abcd efgh`, `ABCD-EFGH`) in its stored form.
pub fn normalize(code: &str) -> String {
    code.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_uppercase()).collect()
}

/// A stored code as it is shown: two groups of four.
pub fn display(code: &str) -> String {
    match code.split_at_checked(4) {
        Some((a, b)) if !b.is_empty() => format!("{a}-{b}"),
        _ => code.to_owned(),
    }
}

/// What a stranger's chat is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Its code (a new one, or the one it already has) and when that expires.
    Code {
        /// The stored code.
        code: String,
        /// Unix ms.
        expires_at: i64,
    },
    /// Three other chats are waiting already.
    TooMany,
}

/// A chat waiting for approval.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Pending {
    /// The agent.
    pub instance_id: String,
    /// The chat.
    pub chat_id: i64,
    /// Asked at (Unix ms).
    pub created_at: i64,
    /// Expires at (Unix ms).
    pub expires_at: i64,
}

impl Store {
    /// The code for a stranger's chat: the one it has if it is still valid, else a new
    /// one unless [`MAX_PENDING`] other chats wait. Expired codes are dropped first.
    pub async fn request_pairing(&self, instance_id: &str, chat_id: i64, now: i64) -> Result<Request> {
        Ok(on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            tx.drop_expired_pairings(instance_id, now).await?;
            let mine: Option<(String, i64)> = sqlx::query_as(
                "SELECT code, expires_at FROM telegram_pairings WHERE instance_id = $1 AND chat_id = $2",
            )
            .bind(instance_id)
            .bind(chat_id)
            .fetch_optional(&mut *tx)
            .await?;
            let answer = match mine {
                Some((code, expires_at)) => Request::Code { code, expires_at },
                None => {
                    let pending: i64 =
                        sqlx::query_scalar("SELECT COUNT(*) FROM telegram_pairings WHERE instance_id = $1")
                            .bind(instance_id)
                            .fetch_one(&mut *tx)
                            .await?;
                    if pending >= MAX_PENDING {
                        Request::TooMany
                    } else {
                        let (code, expires_at) = (new_code(), now + CODE_TTL_MS);
                        sqlx::query(
                            "INSERT INTO telegram_pairings (instance_id, code, chat_id, created_at, expires_at) \
                             VALUES ($1, $2, $3, $4, $5)",
                        )
                        .bind(instance_id)
                        .bind(&code)
                        .bind(chat_id)
                        .bind(now)
                        .bind(expires_at)
                        .execute(&mut *tx)
                        .await?;
                        Request::Code { code, expires_at }
                    }
                }
            };
            tx.commit().await?;
            Ok::<_, crate::Error>(answer)
        })?)
    }

    /// The chats waiting for approval, oldest first.
    pub async fn pending_pairings(&self, instance_id: &str, now: i64) -> Result<Vec<Pending>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT instance_id, chat_id, created_at, expires_at FROM telegram_pairings \
                 WHERE instance_id = $1 AND expires_at > $2 ORDER BY created_at, chat_id",
            )
            .bind(instance_id)
            .bind(now)
            .fetch_all(pool)
            .await
        })?)
    }

    /// Every agent's chats waiting for approval (for `/api/channels`).
    pub async fn all_pending_pairings(&self, now: i64) -> Result<Vec<Pending>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT instance_id, chat_id, created_at, expires_at FROM telegram_pairings \
                 WHERE expires_at > $1 ORDER BY instance_id, created_at, chat_id",
            )
            .bind(now)
            .fetch_all(pool)
            .await
        })?)
    }
}

/// Pairing statements inside a write transaction (call on `&mut *tx`).
pub(crate) trait PairingTx {
    /// Drops the agent's expired codes.
    async fn drop_expired_pairings(&mut self, instance_id: &str, now: i64) -> Result<()>;
    /// Uses up a valid code: the chat it was given to, or `None` for an unknown or expired
    /// code.
    async fn take_pairing(&mut self, instance_id: &str, code: &str, now: i64) -> Result<Option<i64>>;
}

impl_for_connections! {
    impl PairingTx {
        async fn drop_expired_pairings(&mut self, instance_id: &str, now: i64) -> Result<()> {
            sqlx::query("DELETE FROM telegram_pairings WHERE instance_id = $1 AND expires_at <= $2")
                .bind(instance_id)
                .bind(now)
                .execute(&mut *self)
                .await?;
            Ok(())
        }

        async fn take_pairing(&mut self, instance_id: &str, code: &str, now: i64) -> Result<Option<i64>> {
            Ok(sqlx::query_scalar(
                "DELETE FROM telegram_pairings WHERE instance_id = $1 AND code = $2 AND expires_at > $3 \
                 RETURNING chat_id",
            )
            .bind(instance_id)
            .bind(code)
            .bind(now)
            .fetch_optional(&mut *self)
            .await?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_the_way_people_type_them() {
        let code = new_code();
        assert_eq!(code.len(), 8);
        assert_eq!(normalize(&display(&code)), code);
        assert_eq!(normalize(" abcd-efgh "), "ABCDEFGH");
        assert_eq!(display("ABCDEFGH"), "ABCD-EFGH");
    }
}
