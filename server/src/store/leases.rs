//! Leader leases: one row per cluster-wide role, held by one replica at a time, timed by the
//! database's clock (never a replica's), with an epoch that grows with each new holder.

use super::{Backend, Store, on_writer};
use crate::Result;

/// Runs the query macro `$sql` with the database's time in Unix ms spelled for the store's
/// backend (the one clock every replica shares) and its `$role` pool (`writer` or `reader`
/// on SQLite; PostgreSQL has one pool).
macro_rules! with_db_now {
    ($store:expr, $role:ident, $sql:ident, $args:tt) => {
        match $store.backend() {
            Backend::Sqlite { $role: pool, .. } => {
                $sql!("CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)", pool, $args)
            }
            Backend::Postgres(pool) => $sql!("(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT", pool, $args),
        }
    };
}

/// The database's clock and row locks, spelled per backend, for statements written once for
/// both connection types (inside `impl_for_connections!`).
pub(crate) trait DbClock {
    /// The database's time in Unix ms.
    const NOW_MS: &'static str;
    /// The suffix of a SELECT that share-locks the rows it reads until the transaction ends
    /// (PostgreSQL); empty on SQLite, whose write transactions hold the whole database.
    const FOR_SHARE: &'static str;
}

impl DbClock for sqlx::SqliteConnection {
    const NOW_MS: &'static str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
    const FOR_SHARE: &'static str = "";
}

impl DbClock for sqlx::PgConnection {
    const NOW_MS: &'static str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
    const FOR_SHARE: &'static str = " FOR SHARE";
}

pub(super) use with_db_now;

/// Takes the lease if it is free, expired or already ours, for `ttl_ms` from now.
macro_rules! claim {
    ($now:literal, $pool:ident, ($name:expr, $owner:expr, $ttl_ms:expr)) => {
        sqlx::query_scalar::<_, i64>(concat!(
            "INSERT INTO leader_leases (name, owner, epoch, expires_at) VALUES ($1, $2, 1, ",
            $now,
            " + $3) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, \
             epoch = CASE WHEN leader_leases.owner = excluded.owner THEN leader_leases.epoch \
             ELSE leader_leases.epoch + 1 END, expires_at = excluded.expires_at \
             WHERE leader_leases.owner = excluded.owner OR leader_leases.expires_at <= ",
            $now,
            " RETURNING epoch"
        ))
        .bind($name)
        .bind($owner)
        .bind($ttl_ms)
        .fetch_optional($pool)
        .await
    };
}

/// Who holds a lease, as the database sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The holder's replica id.
    pub owner: String,
    /// Its epoch.
    pub epoch: i64,
    /// Milliseconds until it expires (negative: expired, free to take).
    pub expires_in_ms: i64,
}

/// Reads a lease with the database's now.
macro_rules! read {
    ($now:literal, $pool:ident, ($name:expr)) => {
        sqlx::query_as::<_, (String, i64, i64)>(concat!(
            "SELECT owner, epoch, expires_at - ",
            $now,
            " FROM leader_leases WHERE name = $1"
        ))
        .bind($name)
        .fetch_optional($pool)
        .await
    };
}

impl Store {
    /// Takes or renews the lease `name` for `owner` for `ttl_ms`: its epoch when `owner`
    /// holds it now, `None` when another replica does.
    pub async fn claim_lease(&self, name: &str, owner: &str, ttl_ms: i64) -> Result<Option<i64>> {
        Ok(with_db_now!(self, writer, claim, (name, owner, ttl_ms))?)
    }

    /// Gives the lease up at once if `owner` holds it, so another replica takes it at its
    /// next try instead of waiting out the TTL.
    pub async fn release_lease(&self, name: &str, owner: &str) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query("UPDATE leader_leases SET expires_at = 0 WHERE name = $1 AND owner = $2")
                .bind(name)
                .bind(owner)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Who holds the lease `name`, if anyone ever took it.
    pub async fn lease_holder(&self, name: &str) -> Result<Option<LeaseHolder>> {
        let row = with_db_now!(self, reader, read, (name))?;
        Ok(row.map(|(owner, epoch, expires_in_ms)| LeaseHolder { owner, epoch, expires_in_ms }))
    }
}
