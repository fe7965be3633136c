//! Users and invites in the store.
//!
//! A user is an email (lower-cased) and an argon2id hash, and acts for one account. An
//! operator adds a user without a password and hands them a one-time invite link
//! (`/invite/{token}`, 7 days): only the token's SHA-256 is stored, and accepting it sets
//! the password and uses it up in one transaction, so a link works once.

use roost_proto::{ApiError, ErrorReason, v1::User};

use crate::{
    Result,
    accounts::{AccountRow, keys::hash_key},
    ids::{new_id, random_base32},
    store::{BeginWrite, Store, impl_for_connections, on_reader, on_writer},
    time::{now_ms, timestamp_ms},
};

/// How long an invite link works.
pub const INVITE_TTL_MS: i64 = 7 * 24 * 3600 * 1000;
/// Longest email accepted (RFC 5321's path limit).
const MAX_EMAIL_LEN: usize = 254;

/// A user as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct UserRow {
    /// User id.
    pub id: String,
    /// The account they act for.
    pub account_id: String,
    /// Lower-cased email.
    pub email: String,
    /// Argon2id PHC string; `None` until an invited user sets a password.
    pub password_hash: Option<String>,
    /// When they were added (Unix ms).
    pub created_at: i64,
}

impl From<UserRow> for User {
    fn from(row: UserRow) -> Self {
        User {
            id: row.id,
            email: row.email,
            account_id: row.account_id,
            created_at: Some(timestamp_ms(row.created_at)),
        }
    }
}

const USER_COLUMNS: &str = "id, account_id, email, password_hash, created_at";

/// An invite just made: the only moment its token is known.
#[derive(Debug, Clone)]
pub struct NewInvite {
    /// The user it is for.
    pub user: UserRow,
    /// The token of `/invite/{token}`.
    pub token: String,
    /// When it stops working (Unix ms).
    pub expires_at: i64,
}

/// An invite as read back for its page.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InviteRow {
    /// The invited email.
    pub email: String,
    /// The account's display name.
    pub account_name: String,
    /// When it stops working (Unix ms).
    pub expires_at: i64,
}

/// The canonical form of an email: trimmed and lower-cased; 400 unless it looks like one.
pub fn normalize_email(email: &str) -> Result<String> {
    let email = email.trim().to_lowercase();
    let shaped = email
        .split_once('@')
        .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty() && !domain.contains('@'));
    if !shaped || email.len() > MAX_EMAIL_LEN || email.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ApiError::invalid_argument("enter an email address such as you@example.com").into());
    }
    Ok(email)
}

/// A unique-constraint refusal on `users.email` is a taken email, not a fault.
fn email_taken(err: sqlx::Error) -> crate::Error {
    match &err {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            ApiError::new(ErrorReason::WrongState, "a user with this email already exists; sign in instead").into()
        }
        _ => err.into(),
    }
}

impl Store {
    /// Self-serve sign-up: a new account with a zero balance and its first user, with a
    /// password, in one transaction.
    pub async fn sign_up(&self, email: &str, password_hash: &str, account_name: &str) -> Result<(UserRow, AccountRow)> {
        let email = normalize_email(email)?;
        let name = if account_name.trim().is_empty() { email.clone() } else { account_name.trim().to_owned() };
        let now = now_ms();
        let account = AccountRow {
            id: new_id("acct"),
            name,
            balance_nanocents: 0,
            plan: "free".to_owned(),
            first_agent_at: None,
            created_at: now,
        };
        let user = UserRow {
            id: new_id("usr"),
            account_id: account.id.clone(),
            email,
            password_hash: Some(password_hash.to_owned()),
            created_at: now,
        };
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query(
                "INSERT INTO accounts (id, name, balance_nanocents, plan, created_at, updated_at) VALUES ($1, $2, 0, $3, $4, $4)",
            )
            .bind(&account.id)
            .bind(&account.name)
            .bind(&account.plan)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.insert_user(&user).await?;
            tx.commit().await?;
        });
        Ok((user, account))
    }

    /// Adds a user without a password to an existing account and makes their invite.
    pub async fn add_user(&self, account_id: &str, email: &str) -> Result<NewInvite> {
        let email = normalize_email(email)?;
        if self.account(account_id).await?.is_none() {
            return Err(ApiError::not_found(format!("no account {account_id}")).into());
        }
        let now = now_ms();
        let user = UserRow {
            id: new_id("usr"),
            account_id: account_id.to_owned(),
            email,
            password_hash: None,
            created_at: now,
        };
        let invite = NewInvite { token: random_base32(40), expires_at: now + INVITE_TTL_MS, user };
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            tx.insert_user(&invite.user).await?;
            tx.insert_invite(&invite, now).await?;
            tx.commit().await?;
        });
        Ok(invite)
    }

    /// A new invite link for an existing user (a forgotten password, or one that may be
    /// known to someone else): at once, their sessions end and the old password stops
    /// working (signing in then fails as for an unknown email until the link is used);
    /// accepting the link sets a new password. Earlier unused links stop working.
    pub async fn reinvite_user(&self, email: &str) -> Result<NewInvite> {
        let user =
            self.user_by_email(email).await?.ok_or_else(|| ApiError::not_found(format!("no user {}", email.trim())))?;
        let now = now_ms();
        let invite = NewInvite { token: random_base32(40), expires_at: now + INVITE_TTL_MS, user };
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query("DELETE FROM invites WHERE user_id = $1 AND used_at IS NULL")
                .bind(&invite.user.id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("UPDATE users SET password_hash = NULL, updated_at = $2 WHERE id = $1")
                .bind(&invite.user.id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM web_sessions WHERE user_id = $1").bind(&invite.user.id).execute(&mut *tx).await?;
            tx.insert_invite(&invite, now).await?;
            tx.commit().await?;
        });
        Ok(invite)
    }

    /// The user with this email, if any (the email is normalized first).
    pub async fn user_by_email(&self, email: &str) -> Result<Option<UserRow>> {
        let Ok(email) = normalize_email(email) else { return Ok(None) };
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {USER_COLUMNS} FROM users WHERE email = $1")))
                .bind(&email)
                .fetch_optional(pool)
                .await
        })?)
    }

    /// A live invite (not used, not expired); 404 otherwise, for every cause alike.
    pub async fn invite(&self, token: &str) -> Result<InviteRow> {
        let row: Option<InviteRow> = on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT u.email, a.name AS account_name, i.expires_at FROM invites i \
                 JOIN users u ON u.id = i.user_id JOIN accounts a ON a.id = u.account_id \
                 WHERE i.token_hash = $1 AND i.used_at IS NULL AND i.expires_at > $2",
            )
            .bind(hash_key(token))
            .bind(now_ms())
            .fetch_optional(pool)
            .await
        })?;
        row.ok_or_else(|| invite_gone().into())
    }

    /// Uses up a live invite and sets its user's password, in one transaction: of two
    /// racing accepts, one wins and the other gets 404.
    pub async fn accept_invite(&self, token: &str, password_hash: &str) -> Result<UserRow> {
        let now = now_ms();
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            let user_id: Option<String> = sqlx::query_scalar(
                "UPDATE invites SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 \
                 RETURNING user_id",
            )
            .bind(hash_key(token))
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(user_id) = user_id else { return Err(invite_gone().into()) };
            let user: UserRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1 RETURNING {USER_COLUMNS}"
            )))
            .bind(&user_id)
            .bind(password_hash)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            // A new password ends every session made with the old one.
            sqlx::query("DELETE FROM web_sessions WHERE user_id = $1").bind(&user_id).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(user)
        })
    }

    /// The users of an account, oldest first (for the operator CLI).
    pub async fn list_users(&self, account_id: &str) -> Result<Vec<UserRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {USER_COLUMNS} FROM users WHERE account_id = $1 ORDER BY created_at, id"
            )))
            .bind(account_id)
            .fetch_all(pool)
            .await
        })?)
    }
}

/// Writing users and invites inside a transaction (call on `&mut *tx`).
trait UserTx {
    /// Inserts the user; a taken email is 409 `wrong_state`.
    async fn insert_user(&mut self, user: &UserRow) -> Result<()>;
    /// Inserts an invite's hash.
    async fn insert_invite(&mut self, invite: &NewInvite, now: i64) -> Result<()>;
}

impl_for_connections! {
    impl UserTx {
        async fn insert_user(&mut self, user: &UserRow) -> Result<()> {
            sqlx::query(
                "INSERT INTO users (id, account_id, email, password_hash, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $5)",
            )
            .bind(&user.id)
            .bind(&user.account_id)
            .bind(&user.email)
            .bind(&user.password_hash)
            .bind(user.created_at)
            .execute(&mut *self)
            .await
            .map_err(email_taken)?;
            Ok(())
        }

        async fn insert_invite(&mut self, invite: &NewInvite, now: i64) -> Result<()> {
            sqlx::query("INSERT INTO invites (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)")
                .bind(hash_key(&invite.token))
                .bind(&invite.user.id)
                .bind(now)
                .bind(invite.expires_at)
                .execute(&mut *self)
                .await?;
            Ok(())
        }
    }
}

fn invite_gone() -> ApiError {
    ApiError::not_found("this invite link is unknown, used or expired; ask the operator for a new one")
}
