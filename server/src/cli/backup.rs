//! `roost backup --to FILE` and `roost restore --from FILE` (see [`crate::store::backup`]).
//! SQLite stores only: a PostgreSQL store is backed up with `pg_dump`, and the command
//! says so, and what else to keep.

use std::{path::PathBuf, process::ExitCode};

use clap::Args;
use serde_json::json;

use super::{GlobalArgs, accounts::Output};
use crate::store::{
    DatabaseUrl,
    backup::{CARRIED_FILES, backup_sqlite, restore_sqlite},
};

/// `roost backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Where to write the backup (one SQLite file, which also carries the secret key: keep
    /// it as private as the data directory).
    #[arg(long, value_name = "FILE")]
    to: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    output: Output,
}

/// `roost restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup to restore (written by `roost backup`).
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    /// Restore over an existing store, which is moved aside (`roost.db.before-restore-*`).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    output: Output,
}

/// The SQLite file of the store, or the answer for a PostgreSQL one.
fn sqlite_store(global: &GlobalArgs) -> Result<(PathBuf, PathBuf), ExitCode> {
    let config = global.serve_config().map_err(|err| {
        eprintln!("roost: {err}");
        ExitCode::from(2)
    })?;
    match config.database_url {
        DatabaseUrl::Sqlite(path) => Ok((path, config.data_dir)),
        DatabaseUrl::Postgres(_) => {
            eprintln!(
                "roost: the store is PostgreSQL: back it up with pg_dump (e.g. `pg_dump -Fc -f roost.dump \
                 \"$ROOST_DATABASE_URL\"`, restore with pg_restore), and keep these files of the data directory \
                 with it: {} (the secret key opens the agents' sealed secrets; without it they are lost)",
                CARRIED_FILES.join(", ")
            );
            Err(ExitCode::from(2))
        }
    }
}

/// Runs `roost backup`.
pub async fn backup(global: &GlobalArgs, args: BackupArgs) -> ExitCode {
    let (db, data_dir) = match sqlite_store(global) {
        Ok(found) => found,
        Err(code) => return code,
    };
    match backup_sqlite(&db, &data_dir, &args.to, args.force).await {
        Ok(report) => {
            args.output.print(&json!(report), || {
                format!(
                    "backed up {} to {} ({} bytes, with {}) in {:.1} s",
                    db.display(),
                    report.path.display(),
                    report.bytes,
                    if report.files.is_empty() {
                        "no data-directory files".to_owned()
                    } else {
                        report.files.join(", ")
                    },
                    report.seconds
                )
            });
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("roost: backup failed: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `roost restore`.
pub async fn restore(global: &GlobalArgs, args: RestoreArgs) -> ExitCode {
    let (db, data_dir) = match sqlite_store(global) {
        Ok(found) => found,
        Err(code) => return code,
    };
    match restore_sqlite(&args.from, &data_dir, &db, args.force).await {
        Ok(report) => {
            args.output.print(&json!(report), || {
                let aside = report.replaced.as_ref().map(|p| format!("; the store it replaced is at {}", p.display()));
                format!(
                    "restored {} from {} (with {}){}",
                    report.store.display(),
                    args.from.display(),
                    report.files.join(", "),
                    aside.unwrap_or_default()
                )
            });
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("roost: restore failed: {err}");
            ExitCode::FAILURE
        }
    }
}
