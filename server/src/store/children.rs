//! `runtime_children`: the runtime processes roost started and has not yet seen end, so
//! that a roost killed with SIGKILL finds them at its next start (`runtimes::orphans`).

use super::{Store, on_reader, on_writer};
use crate::Result;

/// A runtime process as roost recorded it when it started it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ChildRecord {
    /// The installation (data directory) whose roost started it.
    pub installation: String,
    /// The machine's boot id then.
    pub boot_id: String,
    /// Its pid.
    pub pid: i64,
    /// Its start time (`/proc/<pid>/stat` field 22): with the pid and boot, it names this
    /// process and no later one that reuses the pid.
    pub start_time: i64,
    /// The agent it runs.
    pub instance_id: String,
    /// The roost process that started it.
    pub owner_pid: i64,
    /// That roost's start time.
    pub owner_start_time: i64,
    /// When, Unix ms.
    pub started_at: i64,
}

impl Store {
    /// Records a runtime process roost has just started.
    pub async fn record_child(&self, child: &ChildRecord) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO runtime_children (installation, boot_id, pid, start_time, instance_id, owner_pid, \
                 owner_start_time, started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (installation, boot_id, pid, start_time) DO NOTHING",
            )
            .bind(&child.installation)
            .bind(&child.boot_id)
            .bind(child.pid)
            .bind(child.start_time)
            .bind(&child.instance_id)
            .bind(child.owner_pid)
            .bind(child.owner_start_time)
            .bind(child.started_at)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        Ok(())
    }

    /// Forgets a runtime process that has ended (or was reaped).
    pub async fn forget_child(&self, child: &ChildRecord) -> Result<()> {
        on_writer!(self, |pool| {
            sqlx::query(
                "DELETE FROM runtime_children WHERE installation = $1 AND boot_id = $2 AND pid = $3 AND start_time = $4",
            )
            .bind(&child.installation)
            .bind(&child.boot_id)
            .bind(child.pid)
            .bind(child.start_time)
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        Ok(())
    }

    /// Every runtime process `installation` recorded and has not forgotten, oldest first.
    pub async fn children_of(&self, installation: &str) -> Result<Vec<ChildRecord>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT installation, boot_id, pid, start_time, instance_id, owner_pid, owner_start_time, started_at \
                 FROM runtime_children WHERE installation = $1 ORDER BY started_at, pid",
            )
            .bind(installation)
            .fetch_all(pool)
            .await
        })?)
    }
}
