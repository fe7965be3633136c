//! `roost serve`: one listener for gRPC, gRPC-web and HTTP.

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context as _;
use axum::serve::ListenerExt as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;
use tracing::{info, warn};

use crate::{
    ServeConfig,
    accounts::service::AccountCore,
    agents::{Hosting, service::AgentCore},
    auth::Authenticator,
    billing::renewal,
    grpc::{self, Services},
    store::Store,
    system::SystemCore,
};

/// Serves on `listener` until `shutdown` is cancelled, then lets in-flight requests finish
/// (for at most `config.shutdown_grace`) and closes the store.
///
/// The binary and the test harness both start roost through this function.
pub async fn run(config: ServeConfig, listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    let addr = listener.local_addr().context("reading the listener's address")?;
    tokio::fs::create_dir_all(&config.data_dir)
        .await
        .with_context(|| format!("creating the data directory {}", config.data_dir.display()))?;
    let store = Store::open(&config.database_url, &config.store)
        .await
        .with_context(|| format!("opening the store at {}", config.database_url))?;

    // Process runtimes send their telemetry back here.
    let own_url = format!("http://{}", reachable(addr));
    let hosting = Hosting::new(store.clone(), config.hosting.clone(), &config.data_dir, own_url)
        .context("preparing the runtimes directory")?;
    hosting.restore().await.context("restoring hosted agents")?;
    let workers = CancellationToken::new();
    let renewals = tokio::spawn(renewal::run(hosting.clone(), workers.clone()));

    let auth = Arc::new(Authenticator::new(store.clone(), &config.data_dir));
    let services = Services {
        system: Arc::new(SystemCore::new(store.clone(), config.data_dir.clone())),
        agents: Arc::new(AgentCore::new(hosting.clone(), auth.clone())),
        accounts: Arc::new(AccountCore::new(auth)),
    };
    let core = roost_gateway::Core {
        system: services.system.clone(),
        agents: services.agents.clone(),
        accounts: services.accounts.clone(),
    };
    let (router, _health) = grpc::add_services(roost_gateway::router(core, config.gateway.clone()), &services).await?;
    let app = router.layer(TraceLayer::new_for_http());

    info!(%addr, "listening");
    // No Nagle: HTTP/2 answers in several small writes (headers, data, trailers), and
    // delayed ACKs would hold the last one back for tens of milliseconds.
    let listener = listener.tap_io(|tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(error = %err, "could not set TCP_NODELAY");
        }
    });
    let server = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown.clone().cancelled_owned());
    let mut server = tokio::spawn(server.into_future());
    let served = tokio::select! {
        result = &mut server => result,
        () = shutdown.cancelled() => match tokio::time::timeout(config.shutdown_grace, &mut server).await {
            Ok(result) => result,
            Err(_) => {
                warn!(grace = ?config.shutdown_grace, "grace period over; closing open connections");
                server.abort();
                Ok(Ok(()))
            }
        },
    };
    workers.cancel();
    let _ = renewals.await;
    hosting.shutdown().await;
    store.close().await;
    served.context("server task")?.context("serving")?;
    info!("stopped");
    Ok(())
}

/// An address a local process can connect to: a wildcard listener is reached on loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => SocketAddr::from(([127, 0, 0, 1], addr.port())),
        ip if ip.is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port())),
        _ => addr,
    }
}
