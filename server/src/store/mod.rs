//! The store: roost's data in SQLite (embedded default) or PostgreSQL, through sqlx.
//!
//! Each backend has its own migrations (`migrations/{sqlite,postgres}`) because their DDL
//! differs, but queries are written once: `$1` placeholders, `BIGINT` Unix-ms times and
//! integer cents work on both. [`on_writer!`] and [`on_reader!`] expand a query block once
//! per backend, so each expansion is type-checked against its own driver with no runtime
//! translation layer.
//!
//! SQLite gets one writer connection and a pool of read-only readers: WAL lets readers run
//! beside the writer, and a single writer means roost's own writes never fight over the
//! lock (`BEGIN IMMEDIATE` plus a busy timeout handles the CLI writing to the same file).
//! A write is acknowledged only after its commit. How far that commit has gone when it is
//! acknowledged is the [`Durability`] setting's, for telemetry and turn records; money and
//! configuration always wait for the disk.

mod agent_leases;
pub mod backup;
mod checkpoint;
mod children;
mod leases;
mod meta;
mod url;

use std::{
    path::PathBuf,
    str::FromStr,
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::{
    Connection as _, PgPool, SqlitePool,
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqlitePoolOptions, SqliteSynchronous},
};
use tracing::info;

pub(crate) use agent_leases::FenceTx;
pub use agent_leases::{AgentLease, ReplicaRow};
pub use children::ChildRecord;
pub use leases::LeaseHolder;
pub use url::DatabaseUrl;

use crate::{Error, Result};

/// Connection settings of a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most connections to PostgreSQL, or SQLite read connections.
    pub max_connections: u32,
    /// How long a query waits for a connection before the store counts as unavailable.
    pub acquire_timeout: Duration,
    /// What an acknowledged telemetry batch or turn record survives.
    pub durability: Durability,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self { max_connections: 16, acquire_timeout: Duration::from_secs(5), durability: Durability::default() }
    }
}

/// What an acknowledged write of the high-volume paths survives (`--durability`): ingested
/// telemetry (OTLP, runs, node pushes) and hosted turns' records. Every other write (money:
/// ledger, credits, top-ups; accounts, agents, configuration) always waits for the disk.
///
/// Either way the store stays consistent (a transaction is all there or not at all) and an
/// acknowledged write survives roost crashing or being killed (`kill -9`, the OOM killer):
/// it is in the operating system's hands before the reply. The difference is power loss
/// and OS crashes.
///
/// The default is [`Durability::Process`]: telemetry senders keep what they could not
/// deliver and retry (OTLP exporters, nodes' outboxes), observability stores commonly
/// work this way (ClickHouse does not fsync inserts by default, nor do Prometheus' and
/// Loki's WALs per write), and waiting for the disk costs every ingest request and turn a
/// flush whose tail reaches milliseconds on cloud disks. The last turns a power loss could
/// take were not charged either, since a turn's charge is written with its record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// Acknowledged only once on disk (`fsync`): survives power loss too.
    Disk,
    /// Acknowledged once written to the operating system: survives roost's process dying;
    /// the OS puts it on disk moments later (SQLite: at the next checkpoint or durable
    /// commit; PostgreSQL: within three `wal_writer_delay`s, 600 ms by default).
    #[default]
    Process,
}

impl Durability {
    /// `disk` or `process`, as the flag takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Disk => "disk",
            Self::Process => "process",
        }
    }
}

impl FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "disk" => Ok(Self::Disk),
            "process" => Ok(Self::Process),
            other => Err(format!("durability must be disk or process, not {other:?}")),
        }
    }
}

/// The two databases roost runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Embedded, one file.
    Sqlite,
    /// Shared by many replicas.
    Postgres,
}

impl BackendKind {
    /// "sqlite" or "postgres".
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// A handle on the store; cheap to clone, shared by every service and worker.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    location: String,
    durability: Durability,
}

#[derive(Clone)]
pub(crate) enum Backend {
    Sqlite { path: PathBuf, writer: SqlitePool, reader: SqlitePool, checkpointer: Arc<checkpoint::Checkpointer> },
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the pool that takes writes, once per backend.
macro_rules! on_writer {
    ($store:expr, |$pool:ident| $body:expr) => {
        match $store.backend() {
            $crate::store::Backend::Sqlite { writer: $pool, .. } => $body,
            $crate::store::Backend::Postgres($pool) => $body,
        }
    };
}

/// Runs `$body` with `$pool` bound to a pool for reads, once per backend.
macro_rules! on_reader {
    ($store:expr, |$pool:ident| $body:expr) => {
        match $store.backend() {
            $crate::store::Backend::Sqlite { reader: $pool, .. } => $body,
            $crate::store::Backend::Postgres($pool) => $body,
        }
    };
}

/// Implements a crate-private trait for both backends' connections with one body, so a
/// statement shared by several transactions (a ledger row, an account lock) is written
/// once and type-checked against each driver. Inside a transaction, call it on `&mut *tx`.
macro_rules! impl_for_connections {
    (impl $trait:ident { $($body:tt)* }) => {
        impl $trait for sqlx::SqliteConnection { $($body)* }
        impl $trait for sqlx::PgConnection { $($body)* }
    };
}

pub(crate) use {impl_for_connections, on_reader, on_writer};

/// A pool that opens write transactions the way its backend needs: `BEGIN IMMEDIATE` on
/// SQLite (take the write lock up front, so a read-then-write transaction never fails to
/// upgrade), a plain `BEGIN` on PostgreSQL (row locks are taken by the statements).
pub(crate) trait BeginWrite {
    type Database: sqlx::Database;

    /// Starts a write transaction whose commit waits for the disk.
    async fn begin_write(&self) -> sqlx::Result<sqlx::Transaction<'static, Self::Database>>;

    /// Starts a write transaction of the high-volume paths (telemetry, turn records),
    /// whose commit goes as far as `durability` says.
    async fn begin_volume(&self, durability: Durability) -> sqlx::Result<sqlx::Transaction<'static, Self::Database>>;
}

/// SQLite's `synchronous` is a setting of the connection, read at commit, that cannot
/// change inside a transaction: each write transaction sets it first, in the same call as
/// its `BEGIN`. In WAL mode, `NORMAL` writes the commit to the WAL file without waiting
/// for the disk (the WAL is synced at checkpoints), and `FULL` syncs it; a `FULL` commit
/// also makes every earlier `NORMAL` one durable, since they are in the same file before it.
impl BeginWrite for SqlitePool {
    type Database = sqlx::Sqlite;

    async fn begin_write(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.begin_with("PRAGMA synchronous = FULL; BEGIN IMMEDIATE").await
    }

    async fn begin_volume(&self, durability: Durability) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        match durability {
            Durability::Disk => self.begin_write().await,
            Durability::Process => self.begin_with("PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE").await,
        }
    }
}

/// `synchronous_commit = off` for one transaction: the commit returns once in the
/// server's WAL buffers, which its WAL writer flushes within moments. roost dying loses
/// nothing (the database server has it); only the database server's own crash can lose
/// those moments, and never leaves a transaction half there.
impl BeginWrite for PgPool {
    type Database = sqlx::Postgres;

    async fn begin_write(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        self.begin().await
    }

    async fn begin_volume(&self, durability: Durability) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        match durability {
            Durability::Disk => self.begin().await,
            Durability::Process => self.begin_with("BEGIN; SET LOCAL synchronous_commit = off").await,
        }
    }
}

impl Store {
    /// Connects, creating the SQLite file if needed, and applies pending migrations.
    pub async fn open(url: &DatabaseUrl, options: &StoreOptions) -> Result<Self> {
        let backend = match url {
            DatabaseUrl::Sqlite(path) => open_sqlite(path.clone(), options).await?,
            DatabaseUrl::Postgres(url) => open_postgres(url, options).await?,
        };
        let store = Self { backend, location: url.location(), durability: options.durability };
        info!(backend = store.kind().name(), location = %store.location, "store open");
        Ok(store)
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The PostgreSQL pool, or `None` on SQLite (for what only PostgreSQL has: LISTEN).
    pub(crate) fn postgres(&self) -> Option<&PgPool> {
        match &self.backend {
            Backend::Postgres(pool) => Some(pool),
            Backend::Sqlite { .. } => None,
        }
    }

    /// Which database this is.
    pub fn kind(&self) -> BackendKind {
        match self.backend {
            Backend::Sqlite { .. } => BackendKind::Sqlite,
            Backend::Postgres(_) => BackendKind::Postgres,
        }
    }

    /// What acknowledged telemetry and turn records survive.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Where the data is, safe to show (no credentials).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// One round trip to the database; returns how long it took.
    pub async fn ping(&self) -> Result<Duration> {
        let started = Instant::now();
        on_reader!(self, |pool| sqlx::query("SELECT 1").execute(pool).await.map(|_| ()))?;
        Ok(started.elapsed())
    }

    /// Bytes the database takes: the SQLite file and its WAL, or PostgreSQL's
    /// `pg_database_size`.
    pub async fn size_bytes(&self) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite { path, .. } => {
                let mut total = 0;
                for file in [path.clone(), wal_path(path)] {
                    match tokio::fs::metadata(&file).await {
                        Ok(meta) => total += meta.len() as i64,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io(format!("reading {}", file.display()), e)),
                    }
                }
                Ok(total)
            }
            Backend::Postgres(pool) => {
                Ok(sqlx::query_scalar("SELECT pg_database_size(current_database())").fetch_one(pool).await?)
            }
        }
    }

    /// The newest migration applied.
    pub async fn schema_version(&self) -> Result<i64> {
        let version: Option<i64> = on_reader!(self, |pool| {
            sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success").fetch_one(pool).await
        })?;
        Ok(version.unwrap_or(0))
    }

    /// Every row of `sql` (no parameters), read on either backend: the listings of small
    /// configuration tables (crons, alert rules, guard policies).
    pub(crate) async fn read_all<T>(&self, sql: &str) -> Result<Vec<T>>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
        T: Send + Unpin,
    {
        Ok(on_reader!(self, |pool| sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned())).fetch_all(pool).await)?)
    }

    /// The row of `sql` whose one parameter (`$1`) is `id`, if any.
    pub(crate) async fn read_by_id<T>(&self, sql: &str, id: &str) -> Result<Option<T>>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
        T: Send + Unpin,
    {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned())).bind(id).fetch_optional(pool).await
        })?)
    }

    /// Waits for in-flight queries, then closes every connection (SQLite checkpoints its
    /// WAL on the last close).
    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite { writer, reader, checkpointer, .. } => {
                reader.close().await;
                checkpointer.stop().await;
                writer.close().await;
            }
            Backend::Postgres(pool) => pool.close().await,
        }
    }
}

fn wal_path(path: &std::path::Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

async fn open_sqlite(path: PathBuf, options: &StoreOptions) -> Result<Backend> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir).await.map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    // No journal_mode here: see `enable_wal`.
    let connect = SqliteConnectOptions::new()
        .filename(&path)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true);
    let writer = SqlitePoolOptions::new()
        .max_connections(1)
        // The writer stays open for the life of the process, so the WAL files do too.
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(options.acquire_timeout)
        // Writes touch several indexes of tables that outgrow SQLite's default ~8 MiB page
        // cache; a larger one keeps ingest from re-reading index pages. Checkpoints are the
        // checkpointer's (`checkpoint`): the writer runs one itself only past 50,000 pages
        // (400 MiB) of WAL, when that connection cannot keep up or is not running. A
        // multi-row insert or upsert inside a transaction keeps a statement journal (the
        // pages it changed, to undo it alone on a constraint error); in memory rather than
        // in a temporary file, which cost a tenth of the writer's time in `pwrite`s.
        .connect_with(
            connect
                .clone()
                .create_if_missing(true)
                .page_size(8192)
                .pragma("cache_size", "-65536")
                .pragma("wal_autocheckpoint", "50000")
                .pragma("temp_store", "MEMORY"),
        )
        .await?;
    enable_wal(&writer).await?;
    migrate_sqlite(&writer).await?;
    // `query_only` rather than a read-only open: read-only opens of a WAL database depend
    // on its -shm file already existing.
    let reader = SqlitePoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .acquire_timeout(options.acquire_timeout)
        .connect_with(connect.clone().pragma("query_only", "ON"))
        .await?;
    let checkpointer = Arc::new(checkpoint::Checkpointer::start(connect));
    Ok(Backend::Sqlite { path, writer, reader, checkpointer })
}

/// How long an SQLite statement waits for another connection's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Switches the database to WAL (a lasting property of the file). Switching takes an
/// exclusive lock that SQLite's busy timeout does not wait for, so two processes creating
/// one database at once (`roost serve` and a CLI command) would see SQLITE_BUSY: retry.
async fn enable_wal(writer: &SqlitePool) -> Result<()> {
    let started = Instant::now();
    loop {
        match sqlx::query_scalar::<_, String>("PRAGMA journal_mode = WAL").fetch_one(writer).await {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(Error::io(
                    "enabling WAL",
                    std::io::Error::other(format!("SQLite kept journal mode {mode}")),
                ));
            }
            Err(sqlx::Error::Database(err))
                if err.code().as_deref() == Some("5") && started.elapsed() < BUSY_TIMEOUT =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// sqlx's migrator takes no lock on SQLite, so two processes opening one new file (say
/// `roost serve` and `roost accounts create`) could both apply migration 1. Running it
/// inside one `BEGIN IMMEDIATE` transaction (each migration becomes a savepoint) makes the
/// second opener wait for the write lock, then find everything applied.
async fn migrate_sqlite(writer: &SqlitePool) -> Result<()> {
    let mut conn = writer.acquire().await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    // `run_direct` on the connection itself: `run` goes through `Acquire`, whose lifetimes
    // make the future un-`Send`-able for callers that spawn the server.
    sqlx::migrate!("./migrations/sqlite").run_direct(None, &mut *tx, false).await?;
    tx.commit().await?;
    Ok(())
}

async fn open_postgres(url: &str, options: &StoreOptions) -> Result<Backend> {
    let connect = PgConnectOptions::from_str(url)?;
    let pool = PgPoolOptions::new()
        .max_connections(options.max_connections.max(2))
        .acquire_timeout(options.acquire_timeout)
        .connect_with(connect)
        .await?;
    // sqlx takes an advisory lock on PostgreSQL, so replicas starting together migrate once.
    sqlx::migrate!("./migrations/postgres").run(&pool).await?;
    Ok(Backend::Postgres(pool))
}

#[cfg(test)]
mod tests {
    use super::Durability;

    #[test]
    fn durability_reads_its_two_names_and_defaults_to_process() {
        assert_eq!("disk".parse::<Durability>(), Ok(Durability::Disk));
        assert_eq!("process".parse::<Durability>(), Ok(Durability::Process));
        assert_eq!(Durability::default(), Durability::Process);
        assert_eq!(Durability::Disk.name(), "disk");
        let err = "fsync".parse::<Durability>().unwrap_err();
        assert!(err.contains("disk or process") && err.contains("fsync"), "{err}");
    }
}
