//! SQLite checkpoints, off the writer.
//!
//! In WAL mode every commit appends pages to the WAL, and a checkpoint copies them back
//! into the database file. Left to SQLite, the connection whose commit crosses the
//! `wal_autocheckpoint` threshold runs the checkpoint itself, inside that commit: roost's
//! one writer, which then stops writing while it copies (and, under `--durability disk`,
//! syncs) tens of megabytes: 13 % of the writer's time under ingest, measured with `perf`.
//!
//! So a connection of its own runs a `PASSIVE` checkpoint every [`EVERY`]: it takes no
//! write lock, so the writer goes on committing beside it (on another core), and it never
//! waits for readers (it copies what no reader still needs; the rest goes next time). The
//! writer keeps a high `wal_autocheckpoint` as a safety net only (see `open_sqlite`), for
//! when this connection cannot keep up or is not running (CLI commands).

use std::{sync::Mutex, time::Duration};

use sqlx::{Connection as _, SqliteConnection, sqlite::SqliteConnectOptions};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Between two checkpoints.
const EVERY: Duration = Duration::from_millis(500);
/// WAL frames (pages) past which the checkpoint also restarts the WAL (128 MiB of 8 KiB
/// pages).
const RESTART_AFTER: i64 = 16_384;

/// The task checkpointing one SQLite database.
pub(crate) struct Checkpointer {
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts checkpointing the database `options` opens.
    pub(crate) fn start(options: SqliteConnectOptions) -> Self {
        let stop = CancellationToken::new();
        // The restart waits this long at most for the writer's lock and the readers.
        let options = options.busy_timeout(Duration::from_millis(200));
        let task = tokio::spawn(run(options, stop.clone()));
        Self { stop, task: Mutex::new(Some(task)) }
    }

    /// Stops checkpointing and closes the connection (before the writer closes: the last
    /// connection to close runs the final checkpoint and removes the WAL).
    pub(crate) async fn stop(&self) {
        self.stop.cancel();
        let task = self.task.lock().ok().and_then(|mut task| task.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

/// One checkpoint. A passive one copies what it can while the writer goes on, but under
/// steady ingest it never catches up with the end of the WAL, and SQLite starts the WAL
/// over only once a checkpoint has: the file would grow without bound. So past
/// [`RESTART_AFTER`] frames it then runs a `RESTART` checkpoint, which holds the writer
/// back while it copies the little the passive one left, and starts the WAL over. It
/// waits for the write lock no longer than the connection's busy timeout.
async fn checkpoint(connection: &mut SqliteConnection) -> sqlx::Result<()> {
    let (_busy, frames, _copied): (i64, i64, i64) =
        sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(&mut *connection).await?;
    if frames > RESTART_AFTER {
        // Blocked past the busy timeout, it answers busy = 1 (not an error): next time.
        sqlx::query("PRAGMA wal_checkpoint(RESTART)").execute(&mut *connection).await?;
    }
    Ok(())
}

async fn run(options: SqliteConnectOptions, stop: CancellationToken) {
    let mut connection: Option<SqliteConnection> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(EVERY) => {}
        }
        if connection.is_none() {
            match SqliteConnection::connect_with(&options).await {
                Ok(opened) => connection = Some(opened),
                Err(err) => warn!(error = %err, "opening the SQLite checkpoint connection failed; retrying"),
            }
        }
        if let Some(open) = connection.as_mut()
            && let Err(err) = checkpoint(open).await
        {
            warn!(error = %err, "SQLite checkpoint failed; retrying");
            connection = None;
        }
    }
    if let Some(open) = connection {
        let _ = open.close().await;
    }
}
