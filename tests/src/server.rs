//! [`TestServer`]: the real server, in this process, on an ephemeral port.

use std::{net::SocketAddr, time::Duration};

use roost_server::{ServeConfig, store::DatabaseUrl};
use tempfile::TempDir;
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::{Backend, TestDatabase};

/// A running roost: `roost_server::serve::run`, exactly what `roost serve` runs, bound to
/// `127.0.0.1:0`. Stops (and drops its data) when dropped; [`TestServer::stop`] stops it
/// gracefully and reports how serving ended.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// An HTTP client for REST and SSE calls.
    pub http: reqwest::Client,
    /// The server's configuration, as started.
    pub config: ServeConfig,
    shutdown: CancellationToken,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    // Dropped after the server stops: the database, then the data directory.
    _database: Option<TestDatabase>,
    _data_dir: TempDir,
}

impl TestServer {
    /// Starts roost on `backend` with default settings.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, |_| {}).await
    }

    /// Starts roost on `backend` after `configure` has adjusted its settings.
    pub async fn start_with(backend: Backend, configure: impl FnOnce(&mut ServeConfig)) -> Self {
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
        configure(&mut config);

        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(roost_server::serve::run(config.clone(), listener, shutdown.clone()));
        let server = Self {
            addr,
            http: reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("reqwest client"),
            config,
            shutdown,
            task: Some(task),
            _database: database,
            _data_dir: data_dir,
        };
        server.wait_ready().await;
        server
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A gRPC channel (HTTP/2) to the server, for any generated tonic client.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url("")).expect("uri").connect().await.expect("gRPC connect")
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
