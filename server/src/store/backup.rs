//! Backups of an SQLite store: `roost backup --to FILE` while `roost serve` runs, and
//! `roost restore --from FILE` into a stopped data directory. (A PostgreSQL store is
//! backed up with `pg_dump`; see the README.)
//!
//! A backup is one SQLite file, which `sqlite3` can open as it is:
//! - `VACUUM INTO` writes a consistent, compacted copy of the store as of one read
//!   transaction, while `roost serve` keeps writing (the store is in WAL mode, so readers
//!   and the writer do not block each other);
//! - the data directory's files that belong with the data are added to it, in the table
//!   `roost_backup_files`: the secret key that opens the agents' sealed secrets, the
//!   installation id process runtimes are recorded under, and the update state, guard and
//!   rollback records;
//! - it is written as `FILE.partial` and renamed to `FILE` once complete and synced, so a
//!   file under the final name is always a whole backup.
//!
//! Restore checks the backup (`PRAGMA integrity_check`, the files table), refuses while a
//! `roost serve` holds the data directory ([`DataDirLock`]), moves an existing store aside
//! (never deletes it), and writes the store and the files back.

use std::{
    fs::File,
    io,
    path::{Path, PathBuf},
    str::FromStr,
    time::Instant,
};

use sqlx::{Connection as _, SqliteConnection, sqlite::SqliteConnectOptions};

use crate::{auth::KEYS_CHANGED_FILE, runtimes::orphans::INSTALLATION_FILE, secrets::KEY_FILE};

/// The data directory's files a backup carries, besides the store.
pub const CARRIED_FILES: [&str; 5] =
    [KEY_FILE, INSTALLATION_FILE, "update_state.json", "update_guard.json", "update_rollback.json"];
/// The table of a backup that holds them.
const FILES_TABLE: &str = "roost_backup_files";
/// The lock file `roost serve` holds (shared) while it runs on a data directory.
const LOCK_FILE: &str = "serve.lock";

/// What a backup wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BackupReport {
    /// The backup file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// The data directory's files it carries.
    pub files: Vec<String>,
    /// How long it took.
    pub seconds: f64,
}

/// What a restore did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RestoreReport {
    /// The restored store.
    pub store: PathBuf,
    /// Where the store it replaced was moved, if there was one.
    pub replaced: Option<PathBuf>,
    /// The files written into the data directory.
    pub files: Vec<String>,
}

/// A shared lock on a data directory, held by `roost serve` for as long as it runs (any
/// number of holders); [`restore_sqlite`] needs it exclusively, so it cannot replace a
/// store under a running server. The OS drops the lock when the process ends, however it
/// ends.
#[derive(Debug)]
pub struct DataDirLock(#[allow(dead_code)] File);

impl DataDirLock {
    /// Takes the shared lock of `data_dir` (waiting for a restore in progress).
    pub fn shared(data_dir: &Path) -> io::Result<Self> {
        let file = open_lock(data_dir)?;
        file.lock_shared()?;
        Ok(Self(file))
    }

    /// Takes the lock exclusively; an error naming the cause when a server holds it.
    fn exclusive(data_dir: &Path) -> Result<Self, String> {
        let file =
            open_lock(data_dir).map_err(|e| format!("cannot open {}: {e}", data_dir.join(LOCK_FILE).display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Self(file)),
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(format!("a roost serve is running on {}; stop it before restoring", data_dir.display()))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", data_dir.display())),
        }
    }
}

fn open_lock(data_dir: &Path) -> io::Result<File> {
    std::fs::create_dir_all(data_dir)?;
    File::options().create(true).truncate(false).write(true).open(data_dir.join(LOCK_FILE))
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

async fn open(path: &Path, read_only: bool) -> Result<SqliteConnection, String> {
    let options = SqliteConnectOptions::from_str("sqlite://")
        .map_err(|e| e.to_string())?
        .filename(path)
        .read_only(read_only)
        .busy_timeout(std::time::Duration::from_secs(30));
    SqliteConnection::connect_with(&options).await.map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// Writes a backup of the SQLite store `db` (and `data_dir`'s [`CARRIED_FILES`]) to `to`;
/// an existing `to` is refused unless `overwrite`.
pub async fn backup_sqlite(db: &Path, data_dir: &Path, to: &Path, overwrite: bool) -> Result<BackupReport, String> {
    let started = Instant::now();
    if !db.is_file() {
        return Err(format!("there is no store at {}", db.display()));
    }
    if to.exists() && !overwrite {
        return Err(format!("{} exists; pass --force to replace it", to.display()));
    }
    let partial = with_suffix(to, ".partial");
    let _ = std::fs::remove_file(&partial);
    let target = partial.to_str().ok_or_else(|| format!("{} is not a UTF-8 path", partial.display()))?;
    let mut source = open(db, true).await?;
    sqlx::query("VACUUM INTO $1")
        .bind(target)
        .execute(&mut source)
        .await
        .map_err(|e| format!("copying the store into {}: {e}", partial.display()))?;
    source.close().await.map_err(|e| e.to_string())?;

    let mut copy = open(&partial, false).await?;
    let mut files = Vec::new();
    let carried: Result<(), sqlx::Error> = async {
        // A backup is one self-contained file: no WAL beside it.
        sqlx::query("PRAGMA journal_mode = DELETE").execute(&mut copy).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {FILES_TABLE} (name TEXT PRIMARY KEY NOT NULL, content BLOB NOT NULL)"
        )))
        .execute(&mut copy)
        .await?;
        for name in CARRIED_FILES {
            let Ok(content) = std::fs::read(data_dir.join(name)) else { continue };
            sqlx::query(sqlx::AssertSqlSafe(format!("INSERT INTO {FILES_TABLE} (name, content) VALUES ($1, $2)")))
                .bind(name)
                .bind(content)
                .execute(&mut copy)
                .await?;
            files.push(name.to_owned());
        }
        Ok(())
    }
    .await;
    copy.close().await.map_err(|e| e.to_string())?;
    if let Err(err) = carried {
        let _ = std::fs::remove_file(&partial);
        return Err(format!("adding the data directory's files to the backup: {err}"));
    }
    File::open(&partial).and_then(|f| f.sync_all()).map_err(|e| format!("syncing {}: {e}", partial.display()))?;
    std::fs::rename(&partial, to).map_err(|e| format!("renaming {} to {}: {e}", partial.display(), to.display()))?;
    let bytes = std::fs::metadata(to).map(|m| m.len()).unwrap_or_default();
    Ok(BackupReport { path: to.to_owned(), bytes, files, seconds: started.elapsed().as_secs_f64() })
}

/// Restores the backup `from` into `data_dir`, whose SQLite store is `db`. Refused while a
/// server runs on `data_dir`, for a file that is not a whole roost backup, and over an
/// existing store unless `overwrite` (which moves that store aside, never deletes it).
pub async fn restore_sqlite(from: &Path, data_dir: &Path, db: &Path, overwrite: bool) -> Result<RestoreReport, String> {
    let _lock = DataDirLock::exclusive(data_dir)?;
    let mut backup = open(from, true).await?;
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut backup)
        .await
        .map_err(|e| format!("{} is not an SQLite database: {e}", from.display()))?;
    if check != "ok" {
        return Err(format!("{} is damaged: {check}", from.display()));
    }
    let carried: Vec<(String, Vec<u8>)> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT name, content FROM {FILES_TABLE} ORDER BY name")))
            .fetch_all(&mut backup)
            .await
            .map_err(|_| format!("{} is not a roost backup (no {FILES_TABLE} table)", from.display()))?;
    backup.close().await.map_err(|e| e.to_string())?;
    if let Some((name, _)) = carried.iter().find(|(name, _)| !CARRIED_FILES.contains(&name.as_str())) {
        return Err(format!("{} carries an unexpected file {name:?}", from.display()));
    }

    let replaced = if db.exists() {
        if !overwrite {
            return Err(format!("{} exists; pass --force to move it aside and restore", db.display()));
        }
        let aside = with_suffix(db, &format!(".before-restore-{}", crate::time::now_ms()));
        for suffix in ["", "-wal", "-shm"] {
            let file = with_suffix(db, suffix);
            if file.exists() {
                std::fs::rename(&file, with_suffix(&aside, suffix))
                    .map_err(|e| format!("moving {} aside: {e}", file.display()))?;
            }
        }
        Some(aside)
    } else {
        None
    };

    let partial = with_suffix(db, ".partial");
    std::fs::copy(from, &partial).map_err(|e| format!("copying {} to {}: {e}", from.display(), partial.display()))?;
    let mut store = open(&partial, false).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE {FILES_TABLE}")))
        .execute(&mut store)
        .await
        .map_err(|e| format!("preparing {}: {e}", partial.display()))?;
    store.close().await.map_err(|e| e.to_string())?;
    File::open(&partial).and_then(|f| f.sync_all()).map_err(|e| format!("syncing {}: {e}", partial.display()))?;
    let mut files = Vec::new();
    for (name, content) in &carried {
        write_file(&data_dir.join(name), content).map_err(|e| format!("writing {name}: {e}"))?;
        files.push(name.clone());
    }
    std::fs::rename(&partial, db).map_err(|e| format!("renaming {} to {}: {e}", partial.display(), db.display()))?;
    // Servers sharing this data directory's key cache hear that keys may have changed.
    let _ = std::fs::write(data_dir.join(KEYS_CHANGED_FILE), crate::time::now_ms().to_string());
    Ok(RestoreReport { store: db.to_owned(), replaced, files })
}

/// Writes a file atomically (a temporary beside it, then a rename); owner-only, since one
/// of them is the secret key.
fn write_file(path: &Path, content: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let temporary = with_suffix(path, ".restoring");
    let mut options = File::options();
    options.create(true).truncate(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(content)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}
