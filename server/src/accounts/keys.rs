//! API keys: random secrets shown once, stored as a SHA-256 hash, revocable.

use roost_proto::{ApiError, v1::ApiKey};
use sha2::{Digest, Sha256};

use crate::{
    Result,
    ids::{new_id, random_base32},
    store::{BeginWrite, Store, impl_for_connections, on_reader, on_writer},
    time::{now_ms, timestamp_ms},
};

/// Every key starts with this, so leaked keys are easy to spot (and to scan for).
pub const KEY_PREFIX: &str = roost_kit::ACCOUNT_KEY_PREFIX;

/// How many leading characters of a key `roost keys list` and `/developers` show.
const SHOWN_PREFIX_LEN: usize = 12;
/// How many trailing characters `/developers` shows.
const SHOWN_SUFFIX_LEN: usize = 4;

/// A key just made: the only moment its secret is known.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// Key id (for revoking).
    pub id: String,
    /// The account it acts as.
    pub account_id: String,
    /// The operator's label.
    pub name: String,
    /// The secret, `rsk_` and 40 base32 characters (200 random bits).
    pub secret: String,
}

impl NewKey {
    /// A fresh random key for an account.
    pub fn generate(account_id: &str, name: &str) -> Self {
        Self {
            id: new_id("key"),
            account_id: account_id.to_owned(),
            name: name.to_owned(),
            secret: format!("{KEY_PREFIX}{}", random_base32(40)),
        }
    }
}

/// Writing a key inside a transaction (call on `&mut *tx`).
pub(crate) trait KeyTx {
    /// Stores the key's hash and shown prefix.
    async fn insert_key(&mut self, key: &NewKey, now: i64) -> Result<()>;
}

impl_for_connections! {
    impl KeyTx {
        async fn insert_key(&mut self, key: &NewKey, now: i64) -> Result<()> {
            sqlx::query(
                "INSERT INTO api_keys (id, account_id, name, prefix, last4, key_hash, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&key.id)
            .bind(&key.account_id)
            .bind(&key.name)
            .bind(&key.secret[..SHOWN_PREFIX_LEN])
            .bind(&key.secret[key.secret.len() - SHOWN_SUFFIX_LEN..])
            .bind(hash_key(&key.secret))
            .bind(now)
            .execute(&mut *self)
            .await?;
            Ok(())
        }
    }
}

/// A key as `roost keys list` shows it: never the secret.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct KeyRow {
    /// Key id.
    pub id: String,
    /// The account it acts as.
    pub account_id: String,
    /// The operator's label.
    pub name: String,
    /// The first characters of the secret.
    pub prefix: String,
    /// The last 4 characters (empty for keys made before roost kept them).
    pub last4: String,
    /// When it was made (Unix ms).
    pub created_at: i64,
    /// When it last authenticated a call (Unix ms, to within a minute).
    pub last_used_at: Option<i64>,
    /// When it was revoked (Unix ms), if it was.
    pub revoked_at: Option<i64>,
}

impl From<KeyRow> for ApiKey {
    fn from(row: KeyRow) -> Self {
        ApiKey {
            id: row.id,
            name: row.name,
            prefix: row.prefix,
            last4: row.last4,
            created_at: Some(timestamp_ms(row.created_at)),
            last_used_at: row.last_used_at.map(timestamp_ms),
            revoked_at: row.revoked_at.map(timestamp_ms),
        }
    }
}

/// Columns of [`KeyRow`], for SELECTs.
const KEY_COLUMNS: &str = "id, account_id, name, prefix, last4, created_at, last_used_at, revoked_at";

/// The stored form of a key.
pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

impl Store {
    /// Makes another key for an account.
    pub async fn create_key(&self, account_id: &str, name: &str) -> Result<NewKey> {
        if self.account(account_id).await?.is_none() {
            return Err(ApiError::not_found(format!("no account {account_id}")).into());
        }
        let key = NewKey::generate(account_id, name);
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            tx.insert_key(&key, now_ms()).await?;
            tx.commit().await?;
        });
        Ok(key)
    }

    /// An account's keys, oldest first.
    pub async fn list_keys(&self, account_id: &str) -> Result<Vec<KeyRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY created_at, id"
            )))
            .bind(account_id)
            .fetch_all(pool)
            .await
        })?)
    }

    /// Revokes a key; it stops working at once. Revoking twice is not an error.
    pub async fn revoke_key(&self, key_id: &str) -> Result<KeyRow> {
        self.revoke_key_of(None, key_id).await
    }

    /// Revokes a key of `account_id` (any account's when `None`, for the operator); a key
    /// of another account is 404, as if it did not exist.
    pub async fn revoke_key_of(&self, account_id: Option<&str>, key_id: &str) -> Result<KeyRow> {
        let row: Option<KeyRow> = on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query("UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL AND ($3 IS NULL OR account_id = $3)")
                .bind(key_id)
                .bind(now_ms())
                .bind(account_id)
                .execute(&mut *tx)
                .await?;
            let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1 AND ($2 IS NULL OR account_id = $2)"
            )))
            .bind(key_id)
            .bind(account_id)
            .fetch_optional(&mut *tx)
            .await?;
            tx.commit().await?;
            row
        });
        row.ok_or_else(|| ApiError::not_found(format!("no key {key_id}")).into())
    }

    /// The account a key (by its [`hash_key`]) acts as and when it was last used, or
    /// `None` for an unknown or revoked key.
    pub async fn account_for_hash(&self, key_hash: &str) -> Result<Option<(String, Option<i64>)>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as("SELECT account_id, last_used_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL")
                .bind(key_hash)
                .fetch_optional(pool)
                .await
        })?)
    }

    /// Notes that a key (by its [`hash_key`]) was just used.
    pub async fn touch_key(&self, key_hash: &str) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query("UPDATE api_keys SET last_used_at = $2 WHERE key_hash = $1")
                .bind(key_hash)
                .bind(now_ms())
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }
}
