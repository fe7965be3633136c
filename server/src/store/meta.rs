//! `roost_meta`: small named facts about this store (per-node flags, markers).

use super::{Store, on_reader, on_writer};
use crate::{Result, time::now_ms};

impl Store {
    /// The value stored under `key`, if any.
    pub async fn meta_get(&self, key: &str) -> Result<Option<String>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_scalar("SELECT value FROM roost_meta WHERE key = $1").bind(key).fetch_optional(pool).await
        })?)
    }

    /// Stores `value` under `key`, replacing what was there.
    pub async fn meta_set(&self, key: &str, value: &str) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO roost_meta (key, value, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(key)
            .bind(value)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        Ok(())
    }

    /// Stores `value` under `key` unless a value is there already (a first writer wins,
    /// also between replicas starting together); returns the value stored now.
    pub async fn meta_insert_absent(&self, key: &str, value: &str) -> Result<String> {
        on_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO roost_meta (key, value, updated_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING",
            )
            .bind(key)
            .bind(value)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        Ok(on_writer!(self, |pool| {
            sqlx::query_scalar("SELECT value FROM roost_meta WHERE key = $1").bind(key).fetch_one(pool).await
        })?)
    }
}
