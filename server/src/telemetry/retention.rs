//! Retention: keeps the raw telemetry within an age and a size bound.
//!
//! A background pass (every `every`) deletes, oldest first and in chunks (so the write
//! lock is never held for long), the spans, span events, logs, metric points, runs, events,
//! scores, search documents and the per-session and per-trace summaries that fall outside the
//! bounds. Daily usage
//! and activity aggregates are tiny and are kept as history; the outbox (data not pushed
//! yet) and everything of hosted agents (ledger, turns) are never touched.
//!
//! The size bound counts the store's used bytes (SQLite: pages in use; PostgreSQL: the
//! telemetry tables' size). When over it, a pass deletes the oldest share of raw data that
//! should bring it under, plus a margin, rather than deleting until the size drops:
//! space freed by a delete shows up in the size only later (PostgreSQL's vacuum), and
//! chasing it could delete everything.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{
    message_texts,
    row_counts::{self, RowCountTx as _, RowCounts},
};
use crate::{
    Result,
    store::{Backend, BeginWrite as _, Store, on_reader, on_writer},
    time::now_ms,
};

/// Bounds of the raw telemetry.
#[derive(Debug, Clone)]
pub struct RetentionConfig {
    /// Delete telemetry older than this (`None`: keep forever).
    pub max_age: Option<Duration>,
    /// Keep the store under this many bytes (`None`: unbounded).
    pub max_bytes: Option<u64>,
    /// How often a pass runs.
    pub every: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self { max_age: Some(Duration::from_secs(30 * 86_400)), max_bytes: None, every: Duration::from_secs(300) }
    }
}

/// Rows deleted per statement.
const CHUNK: i64 = 5_000;

/// Raw tables with their time column, and the summaries keyed by a time.
const TABLES: &[(&str, &str)] = &[
    ("spans", "start_ns"),
    ("span_events", "time_ns"),
    ("logs", "time_ns"),
    ("messages", "time_ns"),
    ("metric_points", "time_ns"),
    ("events", "ts_ns"),
    ("runs", "started_ns"),
    // Search documents go with the items they were made of (their triggers unindex them
    // on SQLite).
    ("search_docs", "time_ns"),
    // A text stored once goes when nothing newer than the cutoff refers to it (its
    // `last_ns` may be up to `message_texts::REFRESH_NS` stale: that margin is kept).
    ("message_texts", "last_ns"),
    // Scores go with the time they were given (those of a hosted turn too: they are
    // observed data about it, not its record).
    ("scores", "time_ns"),
    // Labels go with the newest item that carried them (a label of a trace or session
    // still active is renewed by each item bringing it).
    ("trace_labels", "time_ns"),
    ("session_labels", "time_ns"),
    ("traces", "end_ns"),
    ("sessions", "last_ns"),
];

/// What one pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Rows deleted for age.
    pub aged: u64,
    /// Rows deleted for size.
    pub for_size: u64,
}

/// Runs a pass every `config.every` until `shutdown`.
pub async fn run(store: Store, config: RetentionConfig, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(config.every) => {}
        }
        match sweep(&store, &config, now_ms() * 1_000_000).await {
            Ok(swept) if swept != Swept::default() => {
                info!(aged = swept.aged, for_size = swept.for_size, "retention pass")
            }
            Ok(_) => {}
            Err(err) => warn!(error = %err, "retention pass failed; retrying next time"),
        }
    }
}

/// One pass: the age bound, then the size bound; then it folds the row counts' changes.
pub async fn sweep(store: &Store, config: &RetentionConfig, now_ns: i64) -> Result<Swept> {
    let mut swept = Swept::default();
    if let Some(age) = config.max_age {
        let cutoff = now_ns.saturating_sub(age.as_nanos().min(i64::MAX as u128) as i64);
        swept.aged = delete_before(store, cutoff).await?;
    }
    if let Some(max) = config.max_bytes {
        let used = used_bytes(store).await?;
        if used > max {
            // The share to delete, plus 10 points of margin so one pass is enough.
            let share = ((used - max) as f64 / used as f64 + 0.10).min(1.0);
            if let Some(cutoff) = oldest_share_cutoff(store, share).await? {
                swept.for_size = delete_before(store, cutoff).await?;
            }
        }
    }
    row_counts::fold(store).await?;
    Ok(swept)
}

/// Deletes every raw row and time-keyed summary before `cutoff_ns`, chunk by chunk.
async fn delete_before(store: &Store, cutoff_ns: i64) -> Result<u64> {
    let mut total = 0;
    for (table, column) in TABLES {
        let key = match *table {
            "traces" => "trace_id",
            "sessions" => "session_id",
            "events" => "seq",
            "trace_labels" => "label, trace_id",
            "session_labels" => "label, session_id",
            _ => "id",
        };
        let cutoff_ns =
            if *table == "message_texts" { cutoff_ns.saturating_sub(message_texts::REFRESH_NS) } else { cutoff_ns };
        let sql = format!(
            "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {column} < $1 ORDER BY {column} LIMIT $2)"
        );
        loop {
            // Each chunk's delete and the change of the row counts commit together.
            let deleted = on_writer!(store, |pool| {
                let mut tx = pool.begin_volume(store.durability()).await?;
                let deleted = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(cutoff_ns)
                    .bind(CHUNK)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if let Some(change) = RowCounts::of_table(table, -(deleted as i64)) {
                    tx.add_row_counts(&change).await?;
                }
                tx.commit().await?;
                Ok::<_, crate::Error>(deleted)
            })?;
            total += deleted;
            if deleted < CHUNK as u64 {
                break;
            }
        }
    }
    Ok(total)
}

/// Bytes the store uses: SQLite pages in use, or the PostgreSQL database's size.
pub async fn used_bytes(store: &Store) -> Result<u64> {
    let used: i64 = match store.backend() {
        Backend::Sqlite { reader, .. } => {
            sqlx::query_scalar(
                "SELECT (page_count - freelist_count) * page_size FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size()",
            )
            .fetch_one(reader)
            .await?
        }
        Backend::Postgres(pool) => sqlx::query_scalar("SELECT pg_database_size(current_database())").fetch_one(pool).await?,
    };
    Ok(used.max(0) as u64)
}

/// The time below which lies the oldest `share` of the largest raw table (the others
/// follow the same cutoff).
async fn oldest_share_cutoff(store: &Store, share: f64) -> Result<Option<i64>> {
    let mut largest: Option<(&str, &str, i64)> = None;
    for (table, column) in &TABLES[..5] {
        let count: i64 = on_reader!(store, |pool| {
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}"))).fetch_one(pool).await
        })?;
        if largest.is_none_or(|(_, _, most)| count > most) {
            largest = Some((table, column, count));
        }
    }
    let Some((table, column, count)) = largest.filter(|(_, _, count)| *count > 0) else { return Ok(None) };
    let skip = ((count as f64 * share).ceil() as i64).clamp(1, count);
    let cutoff: Option<i64> = on_reader!(store, |pool| {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT {column} FROM {table} ORDER BY {column} LIMIT 1 OFFSET $1"
        )))
        .bind(skip - 1)
        .fetch_optional(pool)
        .await
    })?;
    // Strictly after the last row of the share, so that row goes too.
    Ok(cutoff.map(|c| c.saturating_add(1)))
}
