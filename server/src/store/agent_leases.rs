//! Agent leases and the replicas table (docs/architecture.md#replicas).
//!
//! Every live hosted agent has a lease row: the replica that owns it (boots its machine,
//! runs its turns and its Telegram channel), the epoch of that ownership and when it
//! expires, in the database's clock. A replica renews all of its leases in one statement,
//! takes free or expired ones up to its capacity, and gives them up when it stops.
//!
//! Fencing: a write that belongs to a running agent (a turn's record and charge, its
//! observed event, a status change) first reads the agent's lease under a share lock
//! ([`FenceTx::held_leases`]) and goes in only when the writer still holds it at the epoch
//! it booted the agent under. On PostgreSQL the share lock makes a takeover (which updates
//! the row) wait for that transaction, so every fenced write is ordered before the epoch
//! moves on; on SQLite the write transaction holds the whole database.

use std::collections::HashMap;

use super::{
    Backend, Store, impl_for_connections,
    leases::{DbClock, with_db_now},
    on_writer,
};
use crate::Result;

/// An agent's lease, as the database sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLease {
    /// The owning replica.
    pub owner: String,
    /// Its epoch.
    pub epoch: i64,
    /// Milliseconds until it expires (negative: expired, free to take).
    pub expires_in_ms: i64,
    /// Where the owner's internal API is reached ('' when it never said).
    pub addr: String,
}

/// A replica as the replicas table knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    /// Replica id.
    pub id: String,
    /// Its advertised address.
    pub addr: String,
    /// When it started (Unix ms).
    pub started_at: i64,
    /// Its last heartbeat (Unix ms, the database's clock).
    pub last_seen: i64,
    /// The agents it holds an unexpired lease of, by id.
    pub agents: Vec<String>,
}

/// Takes free or expired leases (or `$predecessor`'s) of live agents, at most `$limit`.
macro_rules! acquire {
    ($now:literal, $pool:ident, ($owner:expr, $ttl_ms:expr, $limit:expr, $predecessor:expr)) => {
        sqlx::query_as::<_, (String, i64)>(concat!(
            "INSERT INTO agent_leases (instance_id, owner, epoch, expires_at) \
             SELECT i.id, $1, 1, ",
            $now,
            " + $2 FROM instances i LEFT JOIN agent_leases l ON l.instance_id = i.id \
             WHERE i.destroyed_at IS NULL AND (l.instance_id IS NULL OR l.owner = $4 OR l.expires_at <= ",
            $now,
            ") ORDER BY i.created_at, i.id LIMIT $3 \
             ON CONFLICT (instance_id) DO UPDATE SET owner = excluded.owner, \
             epoch = agent_leases.epoch + 1, expires_at = excluded.expires_at \
             WHERE agent_leases.owner = $4 OR agent_leases.expires_at <= ",
            $now,
            " RETURNING instance_id, epoch"
        ))
        .bind($owner)
        .bind($ttl_ms)
        .bind($limit)
        .bind($predecessor)
        .fetch_all($pool)
        .await
    };
}

/// Extends every lease `$owner` holds.
macro_rules! renew {
    ($now:literal, $pool:ident, ($owner:expr, $ttl_ms:expr)) => {
        sqlx::query_as::<_, (String, i64)>(concat!(
            "UPDATE agent_leases SET expires_at = ",
            $now,
            " + $2 WHERE owner = $1 RETURNING instance_id, epoch"
        ))
        .bind($owner)
        .bind($ttl_ms)
        .fetch_all($pool)
        .await
    };
}

/// One agent's lease and its owner's address.
macro_rules! lease_of {
    ($now:literal, $pool:ident, ($id:expr)) => {
        sqlx::query_as::<_, (String, i64, i64, Option<String>)>(concat!(
            "SELECT l.owner, l.epoch, l.expires_at - ",
            $now,
            ", r.addr FROM agent_leases l LEFT JOIN replicas r ON r.id = l.owner WHERE l.instance_id = $1"
        ))
        .bind($id)
        .fetch_optional($pool)
        .await
    };
}

/// Records a replica's heartbeat.
macro_rules! heartbeat {
    ($now:literal, $pool:ident, ($id:expr, $addr:expr, $started_at:expr)) => {
        sqlx::query(concat!(
            "INSERT INTO replicas (id, addr, started_at, last_seen) VALUES ($1, $2, $3, ",
            $now,
            ") ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, last_seen = excluded.last_seen"
        ))
        .bind($id)
        .bind($addr)
        .bind($started_at)
        .execute($pool)
        .await
        .map(|done| done.rows_affected())
    };
}

/// Replicas heard from within `$within_ms`, and the unexpired leases of each.
macro_rules! replicas {
    ($now:literal, $pool:ident, ($within_ms:expr)) => {
        sqlx::query_as::<_, (String, String, i64, i64, Option<String>)>(concat!(
            "SELECT r.id, r.addr, r.started_at, r.last_seen, l.instance_id FROM replicas r \
             LEFT JOIN agent_leases l ON l.owner = r.id AND l.expires_at > ",
            $now,
            " WHERE r.last_seen >= ",
            $now,
            " - $1 ORDER BY r.started_at, r.id, l.instance_id"
        ))
        .bind($within_ms)
        .fetch_all($pool)
        .await
    };
}

/// Forgets replicas not heard from within `$within_ms`.
macro_rules! forget {
    ($now:literal, $pool:ident, ($within_ms:expr)) => {
        sqlx::query(concat!("DELETE FROM replicas WHERE last_seen < ", $now, " - $1"))
            .bind($within_ms)
            .execute($pool)
            .await
            .map(|done| done.rows_affected())
    };
}

impl Store {
    /// Takes, for `owner` and `ttl_ms`, up to `limit` leases of live agents that are free,
    /// expired, or held by `predecessor` (the replica this data directory ran before: a
    /// restart takes its agents back at once instead of after the TTL; if it were somehow
    /// still running, fencing keeps its writes out). Returns the leases taken, with their
    /// epochs.
    pub async fn acquire_agent_leases(
        &self,
        owner: &str,
        ttl_ms: i64,
        limit: i64,
        predecessor: &str,
    ) -> Result<Vec<(String, i64)>> {
        if limit <= 0 {
            return Ok(Vec::new());
        }
        Ok(with_db_now!(self, writer, acquire, (owner, ttl_ms, limit, predecessor))?)
    }

    /// Extends every lease `owner` holds by `ttl_ms` from now, in one statement; the leases
    /// it still holds, with their epochs (one taken over since is missing).
    pub async fn renew_agent_leases(&self, owner: &str, ttl_ms: i64) -> Result<Vec<(String, i64)>> {
        Ok(with_db_now!(self, writer, renew, (owner, ttl_ms))?)
    }

    /// Expires every lease `owner` holds and, on PostgreSQL, tells the other replicas
    /// (`roost_leases`), so they take its agents at once instead of after the TTL.
    pub async fn release_agent_leases(&self, owner: &str) -> Result<u64> {
        let released = on_writer!(self, |pool| {
            sqlx::query("UPDATE agent_leases SET expires_at = 0 WHERE owner = $1")
                .bind(owner)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        if let (Backend::Postgres(pool), true) = (self.backend(), released > 0) {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::cluster::notices::LEASES)
                .bind(owner)
                .execute(pool)
                .await?;
        }
        Ok(released)
    }

    /// Expires every agent lease: SQLite is one process, so at its start no other replica
    /// can hold one.
    pub async fn expire_all_agent_leases(&self) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query("UPDATE agent_leases SET expires_at = 0").execute(pool).await.map(|_| ())
        })?;
        Ok(())
    }

    /// The lease of agent `id`, if it has one.
    pub async fn agent_lease(&self, id: &str) -> Result<Option<AgentLease>> {
        let row = with_db_now!(self, reader, lease_of, (id))?;
        Ok(row.map(|(owner, epoch, expires_in_ms, addr)| AgentLease {
            owner,
            epoch,
            expires_in_ms,
            addr: addr.unwrap_or_default(),
        }))
    }

    /// Says replica `id` (reached at `addr`, started at `started_at`) is alive, and forgets
    /// replicas silent for longer than `forget_after_ms`.
    pub async fn replica_heartbeat(&self, id: &str, addr: &str, started_at: i64, forget_after_ms: i64) -> Result<()> {
        with_db_now!(self, writer, heartbeat, (id, addr, started_at))?;
        with_db_now!(self, writer, forget, (forget_after_ms))?;
        Ok(())
    }

    /// Removes replica `id` from the table (a clean stop).
    pub async fn forget_replica(&self, id: &str) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query("DELETE FROM replicas WHERE id = $1").bind(id).execute(pool).await.map(|_| ())
        })?;
        Ok(())
    }

    /// Replicas heard from within `within_ms`, oldest first, each with the agents it holds.
    pub async fn replicas(&self, within_ms: i64) -> Result<Vec<ReplicaRow>> {
        let rows = with_db_now!(self, reader, replicas, (within_ms))?;
        let mut replicas: Vec<ReplicaRow> = Vec::new();
        for (id, addr, started_at, last_seen, agent) in rows {
            if replicas.last().is_none_or(|r| r.id != id) {
                replicas.push(ReplicaRow { id, addr, started_at, last_seen, agents: Vec::new() });
            }
            if let (Some(replica), Some(agent)) = (replicas.last_mut(), agent) {
                replica.agents.push(agent);
            }
        }
        Ok(replicas)
    }
}

/// Lease statements inside a write transaction (call on `&mut *tx`).
pub(crate) trait FenceTx {
    /// Of the agents `ids`, those whose lease `owner` holds, with the epoch it holds each
    /// at; share-locks those lease rows until the transaction ends (see the module doc).
    async fn held_leases(&mut self, owner: &str, ids: &[&str]) -> Result<HashMap<String, i64>>;
    /// Whether `owner` holds agent `id`'s lease at `epoch`: [`FenceTx::held_leases`] for one.
    async fn holds_lease(&mut self, id: &str, owner: &str, epoch: i64) -> Result<bool>;
    /// The first lease of a new agent, for `owner` for `ttl_ms`.
    async fn insert_agent_lease(&mut self, id: &str, owner: &str, ttl_ms: i64) -> Result<()>;
    /// Drops a destroyed agent's lease.
    async fn delete_agent_lease(&mut self, id: &str) -> Result<()>;
}

impl_for_connections! {
    impl FenceTx {
        async fn held_leases(&mut self, owner: &str, ids: &[&str]) -> Result<HashMap<String, i64>> {
            if ids.is_empty() {
                return Ok(HashMap::new());
            }
            let mut query = sqlx::QueryBuilder::new("SELECT instance_id, epoch FROM agent_leases WHERE owner = ");
            query.push_bind(owner).push(" AND instance_id IN (");
            let mut list = query.separated(", ");
            for id in ids {
                list.push_bind(*id);
            }
            list.push_unseparated(") ORDER BY instance_id");
            query.push(<Self as DbClock>::FOR_SHARE);
            let rows: Vec<(String, i64)> = query.build_query_as().fetch_all(&mut *self).await?;
            Ok(rows.into_iter().collect())
        }

        async fn holds_lease(&mut self, id: &str, owner: &str, epoch: i64) -> Result<bool> {
            Ok(self.held_leases(owner, &[id]).await?.get(id) == Some(&epoch))
        }

        async fn insert_agent_lease(&mut self, id: &str, owner: &str, ttl_ms: i64) -> Result<()> {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO agent_leases (instance_id, owner, epoch, expires_at) VALUES ($1, $2, 1, {} + $3)",
                <Self as DbClock>::NOW_MS
            )))
            .bind(id)
            .bind(owner)
            .bind(ttl_ms)
            .execute(&mut *self)
            .await?;
            Ok(())
        }

        async fn delete_agent_lease(&mut self, id: &str) -> Result<()> {
            sqlx::query("DELETE FROM agent_leases WHERE instance_id = $1").bind(id).execute(&mut *self).await?;
            Ok(())
        }
    }
}
