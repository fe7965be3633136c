//! The core's error: an [`ApiError`] from the table, or a fault of roost's own.
//!
//! Faults become `internal` (500) or, when the database cannot be reached, `unavailable`
//! (503); they are logged here, once, and their details stay out of the response.

use roost_proto::{ApiError, ErrorReason};
use tonic::Status;

/// What core operations fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A failure the client can act on: it maps to its row of the error table.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// A migration failed (at start-up only).
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A file operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What roost was doing.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Core results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A file error with what roost was doing when it happened.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }

    /// True when the store could not be reached (worth retrying), as opposed to a
    /// statement it refused.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Database(err) if is_unreachable(err))
    }

    /// The error as a client sees it.
    pub fn to_api(&self) -> ApiError {
        match self {
            Self::Api(err) => err.clone(),
            Self::Database(err) if is_unreachable(err) => {
                tracing::warn!(error = %err, "store unavailable");
                ApiError::new(ErrorReason::Unavailable, "the store is unavailable; try again shortly")
            }
            // The API boundary refuses NUL in what clients send and ingest replaces it, so
            // this is a last net, not the rule: PostgreSQL's text cannot hold U+0000.
            Self::Database(sqlx::Error::Database(db))
                if db.code().is_some_and(|c| NUL_REFUSED.contains(&c.as_ref())) =>
            {
                tracing::warn!(error = %db, "the store refused a NUL character");
                ApiError::invalid_argument("a text value contains a NUL character (U+0000), which roost does not store")
            }
            other => {
                tracing::error!(error = %other, "internal error");
                ApiError::internal("internal error; see the roost log")
            }
        }
    }
}

/// PostgreSQL's SQLSTATEs for text it cannot store: `invalid byte sequence for encoding
/// "UTF8": 0x00` (22021, character_not_in_repertoire) and 22P05 (untranslatable_character,
/// `\u0000` in jsonb).
const NUL_REFUSED: [&str; 2] = ["22021", "22P05"];

fn is_unreachable(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_))
}

impl From<Error> for Status {
    fn from(err: Error) -> Self {
        err.to_api().into()
    }
}
