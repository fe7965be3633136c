//! Raw SQL against a test server's database, for checks the API cannot make: what the store
//! itself enforces (unique constraints), and counts of rows no endpoint lists.

use roost_server::store::DatabaseUrl;
use sqlx::{
    AssertSqlSafe, Connection, FromRow, PgConnection, SqliteConnection,
    postgres::PgRow,
    sqlite::{SqliteConnectOptions, SqliteRow},
};

use crate::TestServer;

impl TestServer {
    /// Runs `statement` on the server's database in a connection of its own and returns
    /// the first column of each row as an integer (none for statements without rows), or
    /// the database's error text.
    pub async fn sql(&self, statement: &str) -> Result<Vec<i64>, String> {
        Ok(self.sql_rows::<(i64,)>(statement).await?.into_iter().map(|(n,)| n).collect())
    }

    /// Like [`Self::sql`] for a statement whose rows are a name and an integer (bytes by
    /// table, counts by kind).
    pub async fn sql_named(&self, statement: &str) -> Result<Vec<(String, i64)>, String> {
        self.sql_rows(statement).await
    }

    async fn sql_rows<T>(&self, statement: &str) -> Result<Vec<T>, String>
    where
        T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        let statement = AssertSqlSafe(statement.to_owned());
        match &self.config.database_url {
            DatabaseUrl::Sqlite(path) => {
                let options =
                    SqliteConnectOptions::new().filename(path).busy_timeout(std::time::Duration::from_secs(10));
                let mut conn = SqliteConnection::connect_with(&options).await.map_err(|e| e.to_string())?;
                let rows = sqlx::query_as::<_, T>(statement).fetch_all(&mut conn).await.map_err(|e| e.to_string());
                let _ = conn.close().await;
                rows
            }
            DatabaseUrl::Postgres(url) => {
                let mut conn = PgConnection::connect(url).await.map_err(|e| e.to_string())?;
                let rows = sqlx::query_as::<_, T>(statement).fetch_all(&mut conn).await.map_err(|e| e.to_string());
                let _ = conn.close().await;
                rows
            }
        }
    }
}

/// A store as an earlier binary left it: a database migrated through `last_migration` (the
/// migrations after it not run), holding the rows `inserts` write. Start a server on its
/// URL to test the upgrade. The directory (SQLite) and database (PostgreSQL) live as long
/// as the returned guard.
pub async fn store_made_before(
    backend: crate::Backend,
    last_migration: i64,
    inserts: &[String],
) -> (DatabaseUrl, (tempfile::TempDir, Option<crate::TestDatabase>)) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (url, db) = match backend {
        crate::Backend::Sqlite => (DatabaseUrl::Sqlite(dir.path().join("before.db")), None),
        crate::Backend::Postgres => {
            let db = crate::TestDatabase::create().await;
            (db.url().parse::<DatabaseUrl>().expect("database url"), Some(db))
        }
    };
    let folder = match backend {
        crate::Backend::Sqlite => "sqlite",
        crate::Backend::Postgres => "postgres",
    };
    let path = format!("{}/../server/migrations/{folder}", env!("CARGO_MANIFEST_DIR"));
    let mut migrator = sqlx::migrate::Migrator::new(std::path::Path::new(&path)).await.expect("migrations");
    migrator.migrations =
        std::borrow::Cow::Owned(migrator.migrations.iter().filter(|m| m.version <= last_migration).cloned().collect());
    match &url {
        DatabaseUrl::Sqlite(path) => {
            let options = SqliteConnectOptions::new().filename(path).create_if_missing(true);
            let mut conn = SqliteConnection::connect_with(&options).await.expect("sqlite");
            migrator.run(&mut conn).await.expect("earlier migrations");
            for insert in inserts {
                sqlx::query(AssertSqlSafe(insert.clone())).execute(&mut conn).await.expect(insert);
            }
            conn.close().await.expect("close");
        }
        DatabaseUrl::Postgres(pg) => {
            let mut conn = PgConnection::connect(pg).await.expect("postgres");
            migrator.run(&mut conn).await.expect("earlier migrations");
            for insert in inserts {
                sqlx::query(AssertSqlSafe(insert.clone())).execute(&mut conn).await.expect(insert);
            }
            conn.close().await.expect("close");
        }
    }
    (url, (dir, db))
}
