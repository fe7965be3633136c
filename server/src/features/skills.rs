//! The skills page (`/api/skills`): what the skill file and the MCP tools offer, each with
//! its use count.
//!
//! The list is the HTTP adapters' own definitions (the routes they serve and document in
//! `/skill.md`, and its tool table), handed in when roost is wired up, so the page cannot
//! drift from the file. The counts come
//! from the HTTP adapters' in-memory counters, added to the `skill_usage` table every
//! [`FLUSH_EVERY`], on shutdown, and before the page is answered. gRPC calls are not counted:
//! the skill file documents REST and MCP.

use std::{collections::HashMap, sync::Arc, time::Duration};

use roost_kit::usage::{Surface, Tally, UsageCounters};
use roost_proto::v1::{GetSkillsResponse, Skill};
use tokio_util::sync::CancellationToken;

use crate::{
    Result,
    store::{Store, on_reader, on_writer},
    time::timestamp_ms,
};

/// How often counts are written to the store. A crash loses at most this much counting;
/// a clean stop loses none.
pub const FLUSH_EVERY: Duration = Duration::from_secs(10);

/// The skills page and its counter flushing.
pub struct Skills {
    store: Store,
    counters: Arc<UsageCounters>,
    /// Every route and tool, in the skill file's order, without counts.
    catalogue: Vec<Skill>,
}

impl Skills {
    /// Skills over `store`, flushing `counters` (the HTTP adapters'), listing `catalogue`
    /// (their routes and tools).
    pub fn new(store: Store, counters: Arc<UsageCounters>, catalogue: Vec<Skill>) -> Arc<Self> {
        Arc::new(Self { store, counters, catalogue })
    }

    /// Adds the counts made since the last flush to the store. On failure they are kept
    /// for the next flush.
    pub async fn flush(&self) -> Result<()> {
        let drained = self.counters.drain();
        if drained.is_empty() {
            return Ok(());
        }
        match self.write(&drained).await {
            Ok(()) => Ok(()),
            Err(err) => {
                self.counters.restore(drained);
                Err(err)
            }
        }
    }

    async fn write(&self, drained: &[(Surface, String, Tally)]) -> Result<()> {
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin().await?;
            for (surface, name, tally) in drained {
                sqlx::query(
                    "INSERT INTO skill_usage (surface, name, calls, errors, last_used_ms) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (surface, name) DO UPDATE SET \
                       calls = skill_usage.calls + excluded.calls, \
                       errors = skill_usage.errors + excluded.errors, \
                       last_used_ms = CASE WHEN excluded.last_used_ms > skill_usage.last_used_ms \
                                      THEN excluded.last_used_ms ELSE skill_usage.last_used_ms END",
                )
                .bind(surface.as_str())
                .bind(name)
                .bind(tally.calls)
                .bind(tally.errors)
                .bind(tally.last_used_ms)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await
        })?;
        Ok(())
    }

    /// Flushes every [`FLUSH_EVERY`] until `stop`, then once more.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        super::every("skill usage", FLUSH_EVERY, stop, || self.flush()).await;
        if let Err(err) = self.flush().await {
            tracing::warn!(error = %err, "skill usage counts of the last seconds were not stored");
        }
    }

    /// The page: every route and tool, with counts from the store. When the store cannot be
    /// read the list is still answered, with zero counts and the error.
    pub async fn page(&self) -> (GetSkillsResponse, Option<crate::Error>) {
        let mut page = GetSkillsResponse {
            skill_file: "/skill.md".into(),
            skills: self.catalogue.clone(),
            warning: String::new(),
        };
        let counts = match self.counts().await {
            Ok(counts) => counts,
            Err(err) => return (page, Some(err)),
        };
        for skill in &mut page.skills {
            if let Some(&(calls, errors, last)) = counts.get(&(skill.surface.clone(), skill.name.clone())) {
                skill.calls = calls;
                skill.errors = errors;
                skill.last_used_at = Some(timestamp_ms(last));
            }
        }
        (page, None)
    }

    async fn counts(&self) -> Result<HashMap<(String, String), (i64, i64, i64)>> {
        // Counts made until now are part of the answer.
        self.flush().await?;
        let rows: Vec<(String, String, i64, i64, i64)> = on_reader!(self.store, |pool| {
            sqlx::query_as("SELECT surface, name, calls, errors, last_used_ms FROM skill_usage").fetch_all(pool).await
        })?;
        Ok(rows.into_iter().map(|(s, n, c, e, l)| ((s, n), (c, e, l))).collect())
    }
}
