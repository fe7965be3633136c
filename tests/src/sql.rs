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
