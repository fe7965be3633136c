//! Agents' secrets at rest: sealed in the store (and, on SQLite, nowhere in the database
//! files), never in the runtime's environment (the model gateway puts the agent's key on
//! its calls upstream, and roost runs its Telegram channel); sealed at start when an older
//! roost left them plain; bound to their agent. Exit statuses of refused keys are tested with
//! the real binary in `server/tests/secrets.rs`.

use roost_server::store::DatabaseUrl;
use roost_tests::{
    Api, Backend, TestServer, each_backend,
    fake_models::{self, FakeModels},
};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use sqlx::{Connection as _, PgConnection, SqliteConnection};

use super::start;

each_backend!(
    secrets_are_sealed_in_the_store_and_used_only_by_roost,
    plain_secrets_from_an_older_roost_are_sealed_at_start,
    a_secret_copied_to_another_agent_does_not_open
);

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// roost with `fake` as the provider byok agents' calls go to.
async fn start_with_provider(backend: Backend, fake: &FakeModels) -> TestServer {
    let url = fake.openai_base_url();
    start(backend, move |config| config.hosting.models.byok_openai_url = url).await
}

/// A running byok example agent.
async fn byok_agent(api: &Api, brief: &str) -> String {
    let created = api.post("/api/provision", json!({"runtime": "example", "brief": brief, "model_mode": "byok"})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    id
}

/// The agent's runtime holds neither secret, and its model call reaches the provider with
/// `key`, which roost opened and put on the call.
async fn assert_used_by_roost_only(api: &Api, id: &str, fake: &FakeModels, key: &str, token: Option<&str>) {
    let seen = env(api, id).await;
    assert_eq!((&seen["provider_api_key_set"], &seen["messaging_bot_token_set"]), (&json!(false), &json!(false)));
    assert_eq!(seen["provider_api_key_sha256"], "");
    assert_eq!(seen["gateway_token_set"], true, "{seen}");
    let reply = api.message(id, "model hello").await.ok();
    assert_eq!(reply["reply"], fake_models::REPLY, "{reply}");
    let last = fake.requests().into_iter().rev().find(|r| r.api == "openai").expect("a call upstream");
    assert_eq!(last.authorization.as_deref(), Some(&*format!("Bearer {key}")));
    if let Some(token) = token {
        assert!(!format!("{last:?}").contains(token), "the bot token went upstream");
    }
    assert_ne!(sha256(key), "");
}

/// Distinct values per test, so a leftover of one test cannot satisfy another.
fn secret(prefix: &str) -> String {
    format!("{prefix}-{}", roost_server::ids::random_base32(24))
}

async fn env(api: &Api, id: &str) -> Value {
    serde_json::from_str(api.message(id, "env").await.ok()["reply"].as_str().unwrap()).unwrap()
}

/// A connection to the server's database beside roost's own, as an operator's `sqlite3`
/// or `psql` would open it.
enum Raw {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
}

impl Raw {
    async fn open(url: &DatabaseUrl) -> Self {
        match url {
            DatabaseUrl::Sqlite(path) => {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
                Self::Sqlite(SqliteConnection::connect_with(&options).await.unwrap())
            }
            DatabaseUrl::Postgres(url) => Self::Postgres(PgConnection::connect(url).await.unwrap()),
        }
    }

    /// The stored `provider_api_key` and `messaging_bot_token` of an instance.
    async fn secrets(&mut self, id: &str) -> (Option<String>, Option<String>) {
        let sql = "SELECT provider_api_key, messaging_bot_token FROM instances WHERE id = $1";
        match self {
            Self::Sqlite(conn) => sqlx::query_as(sql).bind(id).fetch_one(conn).await.unwrap(),
            Self::Postgres(conn) => sqlx::query_as(sql).bind(id).fetch_one(conn).await.unwrap(),
        }
    }

    /// Overwrites an instance's stored secrets as they are given.
    async fn set_secrets(&mut self, id: &str, key: Option<&str>, token: Option<&str>) {
        let sql = "UPDATE instances SET provider_api_key = $2, messaging_bot_token = $3 WHERE id = $1";
        let done = match self {
            Self::Sqlite(conn) => {
                sqlx::query(sql).bind(id).bind(key).bind(token).execute(conn).await.unwrap().rows_affected()
            }
            Self::Postgres(conn) => {
                sqlx::query(sql).bind(id).bind(key).bind(token).execute(conn).await.unwrap().rows_affected()
            }
        };
        assert_eq!(done, 1);
    }

    /// Runs `sql` with `$1` bound to `id`.
    async fn execute(&mut self, sql: &str, id: &str) {
        match self {
            Self::Sqlite(conn) => sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).execute(conn).await.map(|_| ()),
            Self::Postgres(conn) => sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).execute(conn).await.map(|_| ()),
        }
        .unwrap();
    }

    async fn close(self) {
        match self {
            Self::Sqlite(conn) => conn.close().await.unwrap(),
            Self::Postgres(conn) => conn.close().await.unwrap(),
        }
    }
}

/// Fails if any of the SQLite database's files (the database, its WAL and shared memory)
/// holds `needle`. Nothing to scan on PostgreSQL.
fn assert_not_in_sqlite_files(url: &DatabaseUrl, needle: &str) {
    let DatabaseUrl::Sqlite(path) = url else { return };
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", path.display());
        let Ok(bytes) = std::fs::read(&file) else { continue };
        let found = bytes.windows(needle.len()).any(|window| window == needle.as_bytes());
        assert!(!found, "{file} holds the plain secret");
    }
}

fn assert_sealed(stored: Option<String>, plain: &str) {
    let stored = stored.expect("a stored value");
    assert!(stored.starts_with("sealed:v1:"), "not sealed: {stored}");
    assert!(!stored.contains(plain));
}

async fn secrets_are_sealed_in_the_store_and_used_only_by_roost(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_with_provider(backend, &fake).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = byok_agent(&api, "brief").await;
    let (key, token) = (secret("sk-live"), secret("123456:bot"));

    let configured = api
        .post(&format!("/api/instances/{id}/config"), json!({"PROVIDER_API_KEY": key, "MESSAGING_BOT_TOKEN": token}))
        .await
        .ok();
    assert!(!configured.to_string().contains(&key), "{configured}");
    let view = api.wait_status(&id, "running").await;
    assert_eq!(view["config"]["provider_api_key_set"], true);
    assert!(!view.to_string().contains(&key) && !view.to_string().contains(&token), "{view}");

    // roost uses them; the runtime never sees them.
    assert_used_by_roost_only(&api, &id, &fake, &key, Some(&token)).await;

    // The store holds them sealed, and no byte of the database files holds them plain.
    let url = server.config.database_url.clone();
    let mut raw = Raw::open(&url).await;
    let (stored_key, stored_token) = raw.secrets(&id).await;
    raw.close().await;
    assert_sealed(stored_key, &key);
    assert_sealed(stored_token, &token);
    assert_not_in_sqlite_files(&url, &key);
    assert_not_in_sqlite_files(&url, &token);

    // The key was generated into the data directory, readable by its owner only.
    let key_file = server.config.data_dir.join("secret.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    }

    // A restart with the same key opens them again.
    let server = server.restart().await;
    let api = server.api(Some(&account));
    api.wait_status(&id, "running").await;
    assert_used_by_roost_only(&api, &id, &fake, &key, Some(&token)).await;
    assert!(key_file.exists());

    // Destroying the agent drops its secrets.
    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    let mut raw = Raw::open(&url).await;
    assert_eq!(raw.secrets(&id).await, (None, None));
    raw.close().await;
}

async fn plain_secrets_from_an_older_roost_are_sealed_at_start(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_with_provider(backend, &fake).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = byok_agent(&api, "brief").await;
    let other = api.provision("echo", "other").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&other, "running").await;
    let (key, token) = (secret("sk-old"), secret("654321:old"));

    // While roost is down, the row gets plain values, as a roost from before sealing wrote
    // them, and then another row changes: on SQLite that leaves the plain values' old
    // record in the middle of its page, where replacing it frees it without overwriting it.
    let url = server.config.database_url.clone();
    let write_plain = async {
        let mut raw = Raw::open(&url).await;
        raw.set_secrets(&id, Some(&key), Some(&token)).await;
        raw.execute("UPDATE instances SET status_detail = 'changed by an older roost' WHERE id = $1", &other).await;
        raw.close().await;
    };
    let (server, ()) = server.restart_after(write_plain).await;

    let api = server.api(Some(&account));
    let view = api.wait_status(&id, "running").await;
    assert_eq!(view["config"]["messaging_bot_token_set"], true);
    assert_used_by_roost_only(&api, &id, &fake, &key, Some(&token)).await;

    let mut raw = Raw::open(&url).await;
    let (stored_key, stored_token) = raw.secrets(&id).await;
    raw.close().await;
    assert_sealed(stored_key, &key);
    assert_sealed(stored_token, &token);
    // The old plain bytes were scrubbed from the database file and its WAL too.
    assert_not_in_sqlite_files(&url, &key);
    assert_not_in_sqlite_files(&url, &token);

    // Sealing is done once: another start leaves the sealed values as they are.
    let mut raw = Raw::open(&url).await;
    let before = raw.secrets(&id).await;
    raw.close().await;
    let server = server.restart().await;
    server.api(Some(&account)).wait_status(&id, "running").await;
    let mut raw = Raw::open(&url).await;
    assert_eq!(raw.secrets(&id).await, before);
    raw.close().await;
}

async fn a_secret_copied_to_another_agent_does_not_open(backend: Backend) {
    let fake = FakeModels::start().await;
    let server = start_with_provider(backend, &fake).await;
    let account = server.account(2_000).await;
    let api = server.api(Some(&account));
    let first = byok_agent(&api, "first").await;
    let second = byok_agent(&api, "second").await;
    let (first_key, second_key) = (secret("sk-first"), secret("sk-second"));
    for (id, key) in [(&first, &first_key), (&second, &second_key)] {
        api.post(&format!("/api/instances/{id}/config"), json!({"PROVIDER_API_KEY": key})).await.ok();
        api.wait_status(id, "running").await;
    }

    // Someone with write access to the database copies the first agent's sealed key into
    // the second agent's row.
    let url = server.config.database_url.clone();
    let copy = async {
        let mut raw = Raw::open(&url).await;
        let (sealed, _) = raw.secrets(&first).await;
        raw.set_secrets(&second, sealed.as_deref(), None).await;
        raw.close().await;
    };
    let (server, ()) = server.restart_after(copy).await;

    let api = server.api(Some(&account));
    let failed = api.wait_status(&second, "failed").await;
    let detail = failed["status_detail"].as_str().unwrap();
    assert!(detail.contains("PROVIDER_API_KEY cannot be opened"), "{detail}");
    assert!(!detail.contains(&first_key), "{detail}");
    api.wait_status(&first, "running").await;
    assert_used_by_roost_only(&api, &first, &fake, &first_key, None).await;
}
