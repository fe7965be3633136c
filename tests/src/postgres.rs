//! A PostgreSQL database per test.

use std::sync::atomic::{AtomicU32, Ordering};

// Database names are generated here, never taken from input, so formatting them into DDL is safe.
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database created for one test and dropped (with any open connections) when it ends.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    name: String,
    admin_url: String,
}

impl TestDatabase {
    /// Creates an empty database on the test PostgreSQL server.
    ///
    /// # Panics
    /// When the server is unreachable: PostgreSQL tests must not pass by not running.
    pub async fn create() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let admin_url = std::env::var("ROOST_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_owned());
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let name = format!("roost_test_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|err| {
            panic!(
                "PostgreSQL is not reachable at {admin_url}: {err}\n\
                 start it (pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) \
                 or point ROOST_TEST_POSTGRES_URL at one"
            )
        });
        admin.execute(AssertSqlSafe(format!("CREATE DATABASE \"{name}\""))).await.expect("CREATE DATABASE");
        let _ = admin.close().await;
        let url = match admin_url.rsplit_once('/') {
            Some((server, _db)) => format!("{server}/{name}"),
            None => panic!("ROOST_TEST_POSTGRES_URL must name a database: {admin_url}"),
        };
        Self { url, name, admin_url }
    }

    /// The URL of this test's database, for `--database-url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL of the server's maintenance database, for what cannot run inside this
    /// test's own database (`ALTER DATABASE … ALLOW_CONNECTIONS`).
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }
}

impl Drop for TestDatabase {
    /// Drops the database, unless `ROOST_TEST_KEEP_DATABASE` is set: then it stays for a
    /// look after the run (a bench's 10M-span store, with `psql`), and its name is printed.
    fn drop(&mut self) {
        if std::env::var_os("ROOST_TEST_KEEP_DATABASE").is_some() {
            eprintln!("kept PostgreSQL database {} (ROOST_TEST_KEEP_DATABASE)", self.name);
            return;
        }
        // Drop runs inside the test's runtime, which cannot block on itself: use a thread.
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await.ok()?;
                admin.execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))).await.ok()?;
                admin.close().await.ok()
            })
        });
        let _ = dropped.join();
    }
}
