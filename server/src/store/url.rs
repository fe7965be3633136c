//! Which database a store lives in, from `--database-url`.

use std::{fmt, path::PathBuf, str::FromStr};

use sqlx::postgres::PgConnectOptions;

/// A parsed `--database-url`: `sqlite://PATH` (also `sqlite:PATH`) or `postgres://…`
/// (also `postgresql://…`).
#[derive(Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// An SQLite file; created with its directory if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (may hold a password: never log it, see `Display`).
    Postgres(String),
}

impl DatabaseUrl {
    /// The SQLite file `roost.db` in a data directory: the default store.
    pub fn sqlite_in(data_dir: &std::path::Path) -> Self {
        Self::Sqlite(data_dir.join("roost.db"))
    }

    /// Where the data is, safe to show: a file path, or `host:port/database`.
    pub fn location(&self) -> String {
        match self {
            Self::Sqlite(path) => path.display().to_string(),
            Self::Postgres(url) => match PgConnectOptions::from_str(url) {
                Ok(opts) => {
                    format!("{}:{}/{}", opts.get_host(), opts.get_port(), opts.get_database().unwrap_or_default())
                }
                Err(_) => "postgres (unparsable URL)".to_owned(),
            },
        }
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            Self::Postgres(_) => write!(f, "postgres://{}", self.location()),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for DatabaseUrl {
    type Err = String;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            PgConnectOptions::from_str(url).map_err(|e| format!("bad PostgreSQL URL: {e}"))?;
            return Ok(Self::Postgres(url.to_owned()));
        }
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() || path == ":memory:" {
                return Err("roost needs an SQLite file (sqlite://PATH); in-memory databases lose data".into());
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        Err(format!("unsupported database URL {url:?}: use sqlite://PATH or postgres://USER@HOST/DB"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_backends() {
        assert_eq!("sqlite:///tmp/x.db".parse(), Ok(DatabaseUrl::Sqlite("/tmp/x.db".into())));
        assert_eq!("sqlite:rel/x.db?mode=rwc".parse(), Ok(DatabaseUrl::Sqlite("rel/x.db".into())));
        assert!(matches!("postgresql://u@h/db".parse(), Ok(DatabaseUrl::Postgres(_))));
        assert!("sqlite::memory:".parse::<DatabaseUrl>().is_err());
        assert!("mysql://x".parse::<DatabaseUrl>().is_err());
    }

    #[test]
    fn never_shows_the_password() {
        let url: DatabaseUrl = "postgres://roost:hunter2@db.example:5433/roost".parse().unwrap();
        assert_eq!(url.to_string(), "postgres://db.example:5433/roost");
        assert!(!format!("{url:?}").contains("hunter2"));
    }
}
