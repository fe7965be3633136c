//! Browser sessions of the web app, in our own table (docs/architecture.md#pages).
//!
//! A session is a random 256-bit token (`rws_` and 52 base32 characters) held by the
//! browser in an HttpOnly cookie; the store keeps only its SHA-256, so a copy of the
//! database signs nobody in. A session idle for [`IDLE_MS`] is over; `last_seen_at` is
//! written at most every [`TOUCH_EVERY_MS`], so reading pages does not mean writing the
//! store on every request. Sign-out deletes the row.

use crate::{
    Result,
    accounts::keys::hash_key,
    ids::random_base32,
    store::{Store, on_reader, on_writer},
    time::now_ms,
};

use super::users::UserRow;

/// Every session token starts with this (API keys start with `rsk_`).
pub const SESSION_PREFIX: &str = "rws_";
/// A session unused this long is over: 30 days.
pub const IDLE_MS: i64 = 30 * 24 * 3600 * 1000;
/// How stale `last_seen_at` may get before a request refreshes it.
const TOUCH_EVERY_MS: i64 = 5 * 60 * 1000;

/// A live session's user, and when the session was last refreshed.
#[derive(Debug, Clone, sqlx::FromRow)]
struct SessionUser {
    id: String,
    account_id: String,
    email: String,
    password_hash: Option<String>,
    created_at: i64,
    last_seen_at: i64,
}

impl Store {
    /// Starts a session for a user; returns its token (the only time it is known). Sessions
    /// idle past [`IDLE_MS`] are swept at the same time.
    pub async fn create_session(&self, user_id: &str) -> Result<String> {
        let token = format!("{SESSION_PREFIX}{}", random_base32(52));
        let now = now_ms();
        on_writer!(self, |pool| {
            sqlx::query("DELETE FROM web_sessions WHERE last_seen_at < $1").bind(now - IDLE_MS).execute(pool).await?;
            sqlx::query(
                "INSERT INTO web_sessions (token_hash, user_id, created_at, last_seen_at) VALUES ($1, $2, $3, $3)",
            )
            .bind(hash_key(&token))
            .bind(user_id)
            .bind(now)
            .execute(pool)
            .await?;
        });
        Ok(token)
    }

    /// The user of a live session, refreshing its idle clock; `None` for an unknown, ended
    /// or idle-expired token.
    pub async fn session_user(&self, token: &str) -> Result<Option<UserRow>> {
        if !token.starts_with(SESSION_PREFIX) {
            return Ok(None);
        }
        let hash = hash_key(token);
        let now = now_ms();
        let found: Option<SessionUser> = on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT u.id, u.account_id, u.email, u.password_hash, u.created_at, s.last_seen_at \
                 FROM web_sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND s.last_seen_at >= $2",
            )
            .bind(&hash)
            .bind(now - IDLE_MS)
            .fetch_optional(pool)
            .await
        })?;
        let Some(found) = found else { return Ok(None) };
        if now - found.last_seen_at > TOUCH_EVERY_MS {
            on_writer!(self, |pool| {
                sqlx::query("UPDATE web_sessions SET last_seen_at = $2 WHERE token_hash = $1")
                    .bind(&hash)
                    .bind(now)
                    .execute(pool)
                    .await
                    .map(|_| ())
            })?;
        }
        Ok(Some(UserRow {
            id: found.id,
            account_id: found.account_id,
            email: found.email,
            password_hash: found.password_hash,
            created_at: found.created_at,
        }))
    }

    /// Ends a session; whether there was one.
    pub async fn delete_session(&self, token: &str) -> Result<bool> {
        let deleted = on_writer!(self, |pool| {
            sqlx::query("DELETE FROM web_sessions WHERE token_hash = $1")
                .bind(hash_key(token))
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(deleted > 0)
    }
}
