//! How many rows the largest raw tables hold (spans, logs, metric points, events) and how
//! many sessions there are, kept as they change instead of counted when asked (migrations
//! 0030 and 0031).
//!
//! `COUNT(*)` reads a whole index: at 10M spans the health page and `/`, which show these
//! counts, took 58 ms each and grew with the store. Instead every transaction that adds
//! or deletes such rows inserts one row of `row_counts` with what it changed, and the
//! counts are the sums. Only inserts, so writers never wait on one counter row for each
//! other: replicas on one PostgreSQL and concurrent turns commit side by side. Retention's
//! pass (every few minutes, on the leader) folds the rows into one, so the sums stay
//! cheap to read.
//!
//! Sessions joined later. Their table is small, but on PostgreSQL every ingest commit
//! rewrites the session rows it touches: at 10M spans, counting 20,400 live rows meant
//! reading 73 MB of dead versions (32 ms of `/`). The summaries' upsert says how many
//! sessions it inserted (`summaries::SummaryTx`).

use crate::{
    Result,
    store::{BeginWrite as _, Store, impl_for_connections, on_reader, on_writer},
};

/// Rows in (or added to, or deleted from: negative) each counted table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct RowCounts {
    /// Spans.
    pub spans: i64,
    /// Log records.
    pub logs: i64,
    /// Metric points.
    pub metric_points: i64,
    /// Custom-run and turn events.
    pub events: i64,
    /// Sessions (`sessions` rows: one per session id seen).
    pub sessions: i64,
}

impl RowCounts {
    /// A change of `rows` rows to `table`, if it is a counted one.
    pub fn of_table(table: &str, rows: i64) -> Option<Self> {
        let mut counts = Self::default();
        *match table {
            "spans" => &mut counts.spans,
            "logs" => &mut counts.logs,
            "metric_points" => &mut counts.metric_points,
            "events" => &mut counts.events,
            "sessions" => &mut counts.sessions,
            _ => return None,
        } = rows;
        Some(counts)
    }
}

/// Recording a change of the counts inside the transaction that made it.
pub(crate) trait RowCountTx {
    /// Adds `change` (nothing when it is zero).
    async fn add_row_counts(&mut self, change: &RowCounts) -> Result<()>;
}

impl_for_connections! {
    impl RowCountTx {
        async fn add_row_counts(&mut self, change: &RowCounts) -> Result<()> {
            if *change == RowCounts::default() {
                return Ok(());
            }
            sqlx::query(
                "INSERT INTO row_counts (spans, logs, metric_points, events, sessions) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(change.spans)
            .bind(change.logs)
            .bind(change.metric_points)
            .bind(change.events)
            .bind(change.sessions)
            .execute(&mut *self)
            .await?;
            Ok(())
        }
    }
}

/// The counts now.
pub async fn read(store: &Store) -> Result<RowCounts> {
    Ok(on_reader!(store, |pool| {
        sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(spans), 0) AS BIGINT) AS spans, CAST(COALESCE(SUM(logs), 0) AS BIGINT) AS logs, \
             CAST(COALESCE(SUM(metric_points), 0) AS BIGINT) AS metric_points, \
             CAST(COALESCE(SUM(events), 0) AS BIGINT) AS events, \
             CAST(COALESCE(SUM(sessions), 0) AS BIGINT) AS sessions FROM row_counts",
        )
        .fetch_one(pool)
        .await
    })?)
}

/// Folds the change rows into one: the rows it read, and only those (a writer may add
/// more meanwhile on PostgreSQL), are replaced by their sum. Returns how many it folded.
pub async fn fold(store: &Store) -> Result<usize> {
    on_writer!(store, |pool| {
        let mut tx = pool.begin_volume(store.durability()).await?;
        let rows: Vec<(i64, i64, i64, i64, i64, i64)> =
            sqlx::query_as("SELECT id, spans, logs, metric_points, events, sessions FROM row_counts")
                .fetch_all(&mut *tx)
                .await?;
        if rows.len() < 2 {
            return Ok(0);
        }
        let mut sum = RowCounts::default();
        for (_, spans, logs, metric_points, events, sessions) in &rows {
            sum.spans += spans;
            sum.logs += logs;
            sum.metric_points += metric_points;
            sum.events += events;
            sum.sessions += sessions;
        }
        let mut deleted = 0;
        for chunk in rows.chunks(1_000) {
            let mut q = sqlx::QueryBuilder::new("DELETE FROM row_counts WHERE id IN (");
            let mut ids = q.separated(", ");
            for row in chunk {
                ids.push_bind(row.0);
            }
            q.push(")");
            deleted += q.build().execute(&mut *tx).await?.rows_affected();
        }
        // Another fold took some of them first (two passes overlapping on PostgreSQL):
        // leave it to that one (dropping the transaction rolls this one back).
        if deleted != rows.len() as u64 {
            return Ok(0);
        }
        // All zero (an emptied store) leaves no row: the sums of none are zero too.
        tx.add_row_counts(&sum).await?;
        tx.commit().await?;
        Ok(rows.len())
    })
}
