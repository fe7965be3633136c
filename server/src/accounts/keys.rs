//! API keys: random secrets shown once, stored as a SHA-256 hash, revocable.

use roost_proto::ApiError;
use sha2::{Digest, Sha256};

use crate::{
    Result,
    ids::{new_id, random_base32},
    store::{BeginWrite, Store, impl_for_connections, on_reader, on_writer},
    time::now_ms,
};

/// Every key starts with this, so leaked keys are easy to spot (and to scan for).
pub const KEY_PREFIX: &str = "rsk_";

/// How many characters of a key `roost keys list` shows.
const SHOWN_PREFIX_LEN: usize = 12;

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
                "INSERT INTO api_keys (id, account_id, name, prefix, key_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&key.id)
            .bind(&key.account_id)
            .bind(&key.name)
            .bind(&key.secret[..SHOWN_PREFIX_LEN])
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
    /// When it was made (Unix ms).
    pub created_at: i64,
    /// When it was revoked (Unix ms), if it was.
    pub revoked_at: Option<i64>,
}

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
            sqlx::query_as(
                "SELECT id, account_id, name, prefix, created_at, revoked_at FROM api_keys \
                 WHERE account_id = $1 ORDER BY created_at, id",
            )
            .bind(account_id)
            .fetch_all(pool)
            .await
        })?)
    }

    /// Revokes a key; it stops working at once. Revoking twice is not an error.
    pub async fn revoke_key(&self, key_id: &str) -> Result<KeyRow> {
        on_writer!(self, |pool| {
            sqlx::query("UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
                .bind(key_id)
                .bind(now_ms())
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        let row: Option<KeyRow> = on_writer!(self, |pool| {
            sqlx::query_as("SELECT id, account_id, name, prefix, created_at, revoked_at FROM api_keys WHERE id = $1")
                .bind(key_id)
                .fetch_optional(pool)
                .await
        })?;
        row.ok_or_else(|| ApiError::not_found(format!("no key {key_id}")).into())
    }

    /// The account a key (by its [`hash_key`]) acts as, or `None` for an unknown or
    /// revoked key.
    pub async fn account_for_hash(&self, key_hash: &str) -> Result<Option<String>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_scalar("SELECT account_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL")
                .bind(key_hash)
                .fetch_optional(pool)
                .await
        })?)
    }
}
