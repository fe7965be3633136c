//! The end-to-end harness: the real roost server on an ephemeral port, with a temporary
//! data directory, on SQLite or on a PostgreSQL database of its own, driven by the clients
//! roost's users use (reqwest for REST and SSE, tonic for gRPC).
//!
//! Write a test once as `async fn name(backend: Backend)` and list it in
//! [`each_backend!`]: it then runs on SQLite and on PostgreSQL.
//!
//! PostgreSQL comes from `ROOST_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); each test creates and drops its own
//! database, so tests run in parallel. A missing server fails the PostgreSQL tests loudly
//! rather than skipping them.

mod api;
pub mod bench;
pub mod browser;
pub mod fake_agent_model;
pub mod fake_judge;
pub mod fake_models;
pub mod fake_openai;
pub mod fake_telegram;
mod index;
pub mod pages;
mod postgres;
pub mod process;
mod server;
pub mod sql;
mod sse;
pub mod stripe;
pub mod tools;
pub mod workload;
pub mod workspace;

pub use api::{Api, Reply};
pub use index::{FakeIndex, FakeInstaller, ROOST_PACKAGE, ROOST_REPOSITORY, ReleaseKey};
pub use postgres::TestDatabase;
pub use server::{AsAgent, TestAccount, TestServer, roost_binary};
pub use sse::{SseClient, SseItem};

/// The databases roost runs on; every storage and end-to-end test runs on both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A fresh SQLite file in the test's temporary data directory.
    Sqlite,
    /// A fresh PostgreSQL database, dropped when the test ends.
    Postgres,
}

impl Backend {
    /// The name roost reports for this backend.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// Generates, for each listed `async fn test(backend: Backend)` in the calling module, one
/// `#[tokio::test]` in a `sqlite` module and one in a `postgres` module.
#[macro_export]
macro_rules! each_backend {
    ($($test:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test($crate::Backend::Sqlite).await
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test($crate::Backend::Postgres).await
                }
            )+
        }
    };
}
