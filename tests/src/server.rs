//! [`TestServer`]: the real server, in this process, on an ephemeral port.

use std::{net::SocketAddr, time::Duration};

use roost_proto::v1::{account_service_client::AccountServiceClient, agent_service_client::AgentServiceClient};
use roost_server::{
    ServeConfig,
    store::{DatabaseUrl, Store, StoreOptions},
};
use tempfile::TempDir;
use tokio::sync::OnceCell;
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tonic::{metadata::MetadataValue, service::interceptor::InterceptedService};

use crate::{Api, Backend, TestDatabase};

/// An account made for a test, with its first API key.
#[derive(Debug, Clone)]
pub struct TestAccount {
    /// Account id.
    pub id: String,
    /// Its API key.
    pub key: String,
}

/// An HTTP client as an agent's runtime has one ([`TestServer::as_agent`]).
#[derive(Debug, Clone)]
pub struct AsAgent {
    client: reqwest::Client,
    base: String,
}

impl AsAgent {
    /// A POST to `path` (`/llm/v1/chat/completions`, `/v1/traces`, …).
    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.post(format!("{}{path}", self.base))
    }
}

/// Adds `authorization: Bearer <key>` to every gRPC call.
#[derive(Debug, Clone)]
pub struct BearerKey(MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for BearerKey {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut().insert("authorization", self.0.clone());
        Ok(req)
    }
}

/// A channel whose calls carry an API key.
pub type WithKey = InterceptedService<Channel, BearerKey>;

/// A running roost: `roost_server::serve::run`, exactly what `roost serve` runs, bound to
/// `127.0.0.1:0`. Stops (and drops its data) when dropped; [`TestServer::stop`] stops it
/// gracefully and reports how serving ended.
pub struct TestServer {
    /// Where it is reached on loopback.
    pub addr: SocketAddr,
    /// The address its listener is bound to (`addr`, or a wildcard one: [`TestServer::start_public`]).
    pub bound: SocketAddr,
    /// An HTTP client for REST and SSE calls.
    pub http: reqwest::Client,
    /// The server's configuration, as started.
    pub config: ServeConfig,
    shutdown: CancellationToken,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    store: OnceCell<Store>,
    // Dropped after the server stops: the database, then the data directory.
    _database: Option<TestDatabase>,
    data_dir: Option<TempDir>,
}

impl TestServer {
    /// Starts roost on `backend` with default settings.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, |_| {}).await
    }

    /// Starts roost on `backend` after `configure` has adjusted its settings.
    pub async fn start_with(backend: Backend, configure: impl FnOnce(&mut ServeConfig)) -> Self {
        Self::start_bound(backend, "127.0.0.1:0", configure).await
    }

    /// Like [`TestServer::start_with`], but listening on every interface, so a test can
    /// also reach it from a non-loopback address ([`TestServer::public_url`]).
    pub async fn start_public(backend: Backend, configure: impl FnOnce(&mut ServeConfig)) -> Self {
        Self::start_bound(backend, "0.0.0.0:0", configure).await
    }

    /// Like [`TestServer::start_with`], on a given address (e.g. a port chosen beforehand
    /// so the configuration can name it).
    pub async fn start_bound(backend: Backend, bind: &str, configure: impl FnOnce(&mut ServeConfig)) -> Self {
        let data_dir = tempfile::tempdir().expect("temporary data dir");
        let mut config = ServeConfig::with_data_dir(data_dir.path().to_path_buf());
        let database = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => {
                let db = TestDatabase::create().await;
                config.database_url = db.url().parse::<DatabaseUrl>().expect("test database URL");
                Some(db)
            }
        };
        // No test polls a real package index; updater tests configure their own.
        config.update.index_url.clear();
        // Nor reaches Telegram: bot tokens are checked against the suite's fake.
        config.hosting.telegram_api_base = crate::fake_telegram::shared_base().to_owned();
        // roost runs in this test binary; its sandboxes run the relay from the real one.
        config.hosting.sandbox.relay_exe = Some(roost_binary());
        configure(&mut config);
        Self::launch(config, database, data_dir, bind.parse().expect("address")).await
    }

    /// `path` on this machine's first non-loopback address (a server from
    /// [`TestServer::start_public`]); panics when the machine has none.
    pub fn public_url(&self, path: &str) -> String {
        // Connecting a UDP socket sends nothing; it only picks the outgoing interface.
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
        socket.connect("192.0.2.1:9").expect("a route off loopback");
        let ip = socket.local_addr().expect("local address").ip();
        assert!(!ip.is_loopback(), "this machine has no non-loopback address");
        format!("http://{ip}:{}{path}", self.bound.port())
    }

    /// Stops roost gracefully and starts it again on the same port, data directory and
    /// database, as an operator's restart would.
    pub async fn restart(self) -> Self {
        self.restart_after(async {}).await.0
    }

    /// Stops roost, runs `while_down` (roost is unreachable meanwhile), then starts it
    /// again as [`TestServer::restart`] does.
    pub async fn restart_after<F: std::future::Future>(mut self, while_down: F) -> (Self, F::Output) {
        self.shutdown.cancel();
        let task = self.task.take().expect("running");
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("stopped in time")
            .expect("task")
            .expect("served");
        let output = while_down.await;
        let (config, database, data_dir) = (self.config.clone(), self._database.take(), self.data_dir.take());
        (Self::launch(config, database, data_dir.expect("data dir"), self.bound).await, output)
    }

    async fn launch(config: ServeConfig, database: Option<TestDatabase>, data_dir: TempDir, bind: SocketAddr) -> Self {
        // RUST_LOG=… shows the server's log in a test's output.
        // Otherwise roost's own lines only feed the log stream.
        if std::env::var_os("RUST_LOG").is_some() {
            roost_server::logging::init(
                roost_server::logging::LogFormat::Text,
                roost_server::logging::LevelFilter::INFO,
            );
        } else {
            roost_server::logging::init_stream_only();
        }
        let listener = TcpListener::bind(bind).await.expect("bind the test listener");
        let bound = listener.local_addr().expect("local addr");
        let addr = if bound.ip().is_unspecified() {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), bound.port())
        } else {
            bound
        };
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(roost_server::serve::run(config.clone(), listener, shutdown.clone()));
        let server = Self {
            addr,
            bound,
            http: reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("reqwest client"),
            config,
            shutdown,
            task: Some(task),
            store: OnceCell::new(),
            _database: database,
            data_dir: Some(data_dir),
        };
        server.wait_ready().await;
        server
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// roost as agent `instance_id`'s sandboxed runtime reaches it: on the agent's own
    /// gateway socket of its current boot (`<data-dir>/sandbox/<id>.<boot>/gateway.sock`),
    /// the only place its token is good. When the agent has no running sandbox, roost's
    /// listener (where a sandboxed agent's token is refused).
    pub fn as_agent(&self, instance_id: &str) -> AsAgent {
        let boot = std::fs::read_dir(self.config.data_dir.join("sandbox")).ok().and_then(|entries| {
            entries.flatten().map(|entry| entry.path()).find(|path| {
                path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{instance_id}.")))
            })
        });
        match boot {
            Some(dir) => AsAgent {
                client: reqwest::Client::builder().unix_socket(dir.join("gateway.sock")).build().expect("client"),
                // What a runtime sends: the relay's address inside its sandbox.
                base: format!("http://{}", roost_server::sandbox::INSIDE_GATEWAY),
            },
            None => AsAgent { client: self.http.clone(), base: self.url("") },
        }
    }

    /// A gRPC channel (HTTP/2) to the server, for any generated tonic client.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url("")).expect("uri").connect().await.expect("gRPC connect")
    }

    /// The server's store, opened a second time as the operator CLI opens it.
    pub async fn store(&self) -> &Store {
        self.store
            .get_or_init(|| async {
                Store::open(&self.config.database_url, &StoreOptions::default()).await.expect("open the store")
            })
            .await
    }

    /// A new account with `credits_cents`, made as `roost accounts create` makes it.
    pub async fn account(&self, credits_cents: i64) -> TestAccount {
        let new = self.store().await.create_account("test account", credits_cents).await.expect("create account");
        TestAccount { id: new.account.id, key: new.api_key.secret }
    }

    /// Revokes a key as `roost keys revoke` does (the store, then the marker running
    /// servers watch).
    pub async fn revoke_key(&self, key_id: &str) {
        self.store().await.revoke_key(key_id).await.expect("revoke key");
        roost_server::auth::announce_revocation(&self.config.data_dir).expect("announce revocation");
    }

    /// REST as `account` (or with no key).
    pub fn api(&self, account: Option<&TestAccount>) -> Api {
        Api::new(self.http.clone(), self.url(""), account.map(|a| a.key.clone()))
    }

    /// A channel whose calls carry `key` as `authorization: Bearer`.
    pub async fn channel_with_key(&self, key: &str) -> WithKey {
        let value = format!("Bearer {key}").parse().expect("metadata");
        InterceptedService::new(self.channel().await, BearerKey(value))
    }

    /// An `AgentService` client calling as `key`.
    pub async fn agents(&self, key: &str) -> AgentServiceClient<WithKey> {
        AgentServiceClient::new(self.channel_with_key(key).await)
    }

    /// An `AccountService` client calling as `key`.
    pub async fn accounts(&self, key: &str) -> AccountServiceClient<WithKey> {
        AccountServiceClient::new(self.channel_with_key(key).await)
    }

    /// Stops the server as SIGTERM would and returns how serving ended.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let task = self.task.take().expect("stop once");
        tokio::time::timeout(Duration::from_secs(60), task).await??
    }

    async fn wait_ready(&self) {
        // serve::run opens the store (and migrates) before it accepts; poll until it answers.
        for _ in 0..600 {
            if let Some(task) = &self.task {
                assert!(!task.is_finished(), "roost exited during start-up (see the log above)");
            }
            let resp = self.http.get(self.url("/healthz")).send().await;
            if resp.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("roost did not answer /healthz within 12 s");
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The `roost` binary cargo built beside this test binary (`target/<profile>/roost`), which
/// sandboxes run as their relay; a clear panic when it was not built.
pub fn roost_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/roost
    let binary = exe.parent().and_then(|deps| deps.parent()).map(|profile| profile.join("roost"));
    match binary {
        Some(binary) if binary.is_file() => binary,
        _ => panic!(
            "the roost binary is not built beside {}: run `cargo build -p roost-server` (scripts/test does)",
            exe.display()
        ),
    }
}
