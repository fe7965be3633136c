//! The migration that seals secrets stored in plain text by a roost from before sealing.
//!
//! It is a Rust step, not a file in `migrations/`: sealing needs the key, which SQL
//! migrations never see (the CLI applies them and must work without the key), and AES-GCM,
//! which neither SQLite nor PostgreSQL offers in plain SQL. It runs at every start of
//! `roost serve`, after the SQL migrations and the key check:
//!
//! - idempotent: only values without the sealed prefix are touched, and each UPDATE
//!   re-checks the value it replaces, so replicas starting together do not seal twice;
//! - transactional: all rows in one transaction; a crash leaves them as they were and the
//!   next start does it again.
//!
//! Replacing a value leaves the old bytes behind in the database files until they are
//! overwritten, so after sealing anything it scrubs what it can: on SQLite the sealing
//! transaction runs with `secure_delete` (freed cell space is zeroed) and the WAL is
//! checkpointed and truncated; on PostgreSQL `VACUUM FULL instances` rewrites the table
//! without the dead row versions. Backups (and PostgreSQL's WAL archive) taken before the
//! upgrade still hold the plain values: the README says what to do about them.

use sqlx::Connection as _;
use tracing::{info, warn};

use super::{SEALED_PREFIX, Sealed, SecretKey, Slot};
use crate::{
    Result,
    store::{Backend, Store, impl_for_connections},
};

/// Seals every plain `provider_api_key` / `messaging_bot_token`; returns how many values
/// it sealed.
pub async fn seal_plain_rows(store: &Store, key: &SecretKey) -> Result<usize> {
    let sealed = match store.backend() {
        Backend::Sqlite { writer, .. } => {
            let mut conn = writer.acquire().await?;
            let previous: i64 = sqlx::query_scalar("PRAGMA secure_delete").fetch_one(&mut *conn).await?;
            sqlx::query("PRAGMA secure_delete = ON").execute(&mut *conn).await?;
            let sealed = async {
                let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
                let sealed = tx.seal_plain(key).await?;
                tx.commit().await?;
                Ok::<_, crate::Error>(sealed)
            }
            .await;
            let restore = if previous == 0 { "PRAGMA secure_delete = OFF" } else { "PRAGMA secure_delete = ON" };
            sqlx::query(restore).execute(&mut *conn).await?;
            let sealed = sealed?;
            if sealed > 0 {
                // TRUNCATE: copy every page into the database, then cut the WAL to zero bytes.
                let (busy, _, _): (i64, i64, i64) =
                    sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&mut *conn).await?;
                if busy != 0 {
                    warn!(
                        "another connection kept the WAL from being truncated; old plain values stay in it until the next checkpoint"
                    );
                }
            }
            sealed
        }
        Backend::Postgres(pool) => {
            let mut tx = pool.begin().await?;
            let sealed = tx.seal_plain(key).await?;
            tx.commit().await?;
            if sealed > 0
                && let Err(err) = sqlx::query("VACUUM FULL instances").execute(pool).await
            {
                warn!(error = %err, "could not rewrite the instances table; old plain values stay in it until vacuumed");
            }
            sealed
        }
    };
    if sealed > 0 {
        info!(values = sealed, "sealed secrets stored in plain text");
    }
    Ok(sealed)
}

/// The statements of the step, inside its transaction (call on `&mut *tx`).
trait SealRowsTx {
    /// Seals the plain values of every row; returns how many.
    async fn seal_plain(&mut self, key: &SecretKey) -> Result<usize>;
}

impl_for_connections! {
    impl SealRowsTx {
        async fn seal_plain(&mut self, key: &SecretKey) -> Result<usize> {
            // `substr`, not LIKE: SQLite's LIKE ignores case.
            let rows: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
                "SELECT id, provider_api_key, messaging_bot_token FROM instances \
                 WHERE substr(provider_api_key, 1, 10) <> $1 OR substr(messaging_bot_token, 1, 10) <> $1",
            )
            .bind(SEALED_PREFIX)
            .fetch_all(&mut *self)
            .await?;
            let mut sealed = 0;
            for (id, provider_api_key, messaging_bot_token) in rows {
                let columns = [
                    (provider_api_key, Slot::provider_api_key(&id), PROVIDER_API_KEY_UPDATE),
                    (messaging_bot_token, Slot::messaging_bot_token(&id), MESSAGING_BOT_TOKEN_UPDATE),
                ];
                for (value, slot, update) in columns {
                    let Some(plain) = value.filter(|v| !Sealed::is_sealed(v)) else { continue };
                    let done = sqlx::query(update)
                        .bind(&id)
                        .bind(key.seal(&plain, slot).as_str())
                        .bind(&plain)
                        .execute(&mut *self)
                        .await?;
                    sealed += done.rows_affected() as usize;
                }
            }
            Ok(sealed)
        }
    }
}

const PROVIDER_API_KEY_UPDATE: &str =
    "UPDATE instances SET provider_api_key = $2 WHERE id = $1 AND provider_api_key = $3";
const MESSAGING_BOT_TOKEN_UPDATE: &str =
    "UPDATE instances SET messaging_bot_token = $2 WHERE id = $1 AND messaging_bot_token = $3";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{
        secrets::KEY_BYTES,
        store::{DatabaseUrl, StoreOptions, on_reader, on_writer},
    };

    /// Inserts an instance row with the given secrets, as an older roost wrote them.
    async fn insert(store: &Store, account: &str, id: &str, key: Option<&str>) {
        on_writer!(store, |pool| {
            sqlx::query(
                "INSERT INTO instances (id, account_id, runtime, status, brief, model_mode, provider_api_key, \
                 price_cents_month, period_start, paid_through, period_price_cents, created_at, updated_at) \
                 VALUES ($1, $2, 'echo', 'running', 'a brief long enough to fill a little of the page', 'managed', \
                 $3, 0, 0, 0, 0, 0, 0)",
            )
            .bind(id)
            .bind(account)
            .bind(key)
            .execute(pool)
            .await
            .map(|_| ())
        })
        .unwrap();
    }

    /// The plain value's record sits in the middle of its page (rows were written after
    /// it), so replacing it frees it in place: only `secure_delete` zeroes it, and only the
    /// checkpoint takes the old page out of the WAL.
    #[tokio::test]
    async fn leaves_no_plain_bytes_in_the_sqlite_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("roost.db");
        let store = Store::open(&DatabaseUrl::Sqlite(path.clone()), &StoreOptions::default()).await.unwrap();
        let account = store.create_account("old", 0).await.unwrap().account.id;
        let plain = "sk-plain-secret-from-an-older-roost";
        insert(&store, &account, "ins_plain", Some(plain)).await;
        for n in 0..8 {
            insert(&store, &account, &format!("ins_{n}"), None).await;
        }
        let key = SecretKey::from_bytes(&[3; KEY_BYTES]);

        assert_eq!(seal_plain_rows(&store, &key).await.unwrap(), 1);
        assert_eq!(seal_plain_rows(&store, &key).await.unwrap(), 0, "idempotent");

        let stored: String = on_reader!(store, |pool| {
            sqlx::query_scalar("SELECT provider_api_key FROM instances WHERE id = 'ins_plain'").fetch_one(pool).await
        })
        .unwrap();
        assert_eq!(key.open(&Sealed::from_stored(stored), Slot::provider_api_key("ins_plain")).unwrap(), plain);
        for file in [path.clone(), path.with_extension("db-wal")] {
            let bytes = std::fs::read(&file).unwrap_or_default();
            assert!(!bytes.windows(plain.len()).any(|w| w == plain.as_bytes()), "{} holds it", file.display());
        }
        store.close().await;
    }
}
