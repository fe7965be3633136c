//! What `roost serve` runs with, resolved from flags and environment (see `cli`).

use std::{path::PathBuf, time::Duration};

use roost_gateway::{AccessPolicy, GatewayOptions};

use crate::{
    agents::HostingConfig,
    billing::stripe::StripeConfig,
    connections::ConnectionLimits,
    node::pusher::PushConfig,
    secrets::SecretKey,
    store::{DatabaseUrl, StoreOptions},
    streams::StreamLimits,
    telemetry::{limits::Limits, retention::RetentionConfig},
    update::{Restart, Role, UpdateFlags, UpdateSettings},
    webapp::WebAppConfig,
};

/// Everything the server needs to start.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// roost's own directory (`~/.roost` by default).
    pub data_dir: PathBuf,
    /// The store.
    pub database_url: DatabaseUrl,
    /// Connection settings of the store.
    pub store: StoreOptions,
    /// Limits enforced by the HTTP gateway.
    pub gateway: GatewayOptions,
    /// Hosted agents: catalogue, prices, billing period, turn and boot limits.
    pub hosting: HostingConfig,
    /// How long in-flight requests may run after a shutdown signal before their
    /// connections are closed.
    pub shutdown_grace: Duration,
    /// Bounds on client connections: timeouts and how many may be open.
    pub connections: ConnectionLimits,
    /// Bounds of the raw telemetry.
    pub retention: RetentionConfig,
    /// What ingest keeps of each request's strings and lists (`--max-attribute-bytes`).
    pub telemetry: Limits,
    /// Push everything ingested to an upstream roost (the daemon role), if set.
    pub push: Option<PushConfig>,
    /// More addresses serving the same endpoints, such as OTLP's conventional 4317 (gRPC)
    /// and 4318 (HTTP).
    pub extra_addrs: Vec<String>,
    /// Who may call the dashboard side (`SERVICE_API_TOKENS`). The ingest token for hosted
    /// runtimes is generated at start; one set here is replaced.
    pub access: AccessPolicy,
    /// Client caps of the live streams.
    pub streams: StreamLimits,
    /// How often alert rules are evaluated.
    pub alerts_every: Duration,
    /// How often guard policies are enforced.
    pub guard_every: Duration,
    /// How often the evaluators look for new calls when they have nothing to do.
    pub evaluations_every: Duration,
    /// How long a replica's leases last without renewal (`--lease-ttl-secs`); they are
    /// renewed every third of it.
    pub lease_ttl: Duration,
    /// Where the other replicas reach this one's gRPC API (`--advertise-addr`, `host:port`);
    /// `None`: the listener's address (a wildcard one as loopback).
    pub advertise_addr: Option<String>,
    /// Most hosted agents this replica runs at once (`--agent-capacity`).
    pub agent_capacity: usize,
    /// The self-updater. An empty `index_url` turns polling off.
    pub update: UpdateSettings,
    /// The key hosted agents' secrets are sealed with (`ROOST_SECRET_KEY`); `None` uses
    /// `<data-dir>/secret.key`, generated on first start (see `secrets::unlock`).
    pub secret_key: Option<SecretKey>,
    /// The web app (`--signup`).
    pub webapp: WebAppConfig,
    /// Top-ups through Stripe Checkout (`--stripe-*`).
    pub stripe: StripeConfig,
}

impl ServeConfig {
    /// Defaults for a data directory: the SQLite store inside it.
    pub fn with_data_dir(data_dir: PathBuf) -> Self {
        // The built-in runtimes, and the packaged ones installed in this data directory.
        let runtimes_dir = data_dir.join("runtimes");
        let catalogue = crate::runtimes::Catalogue::builtin_with_installed(&runtimes_dir);
        Self {
            database_url: DatabaseUrl::sqlite_in(&data_dir),
            data_dir,
            store: StoreOptions::default(),
            gateway: GatewayOptions::default(),
            hosting: HostingConfig { catalogue, installed_runtimes: Some(runtimes_dir), ..HostingConfig::default() },
            shutdown_grace: Duration::from_secs(30),
            connections: ConnectionLimits::default(),
            retention: RetentionConfig::default(),
            telemetry: Limits::default(),
            push: None,
            extra_addrs: Vec::new(),
            access: AccessPolicy::default(),
            streams: StreamLimits::default(),
            alerts_every: Duration::from_secs(30),
            guard_every: Duration::from_secs(10),
            evaluations_every: Duration::from_secs(1),
            lease_ttl: Duration::from_secs(10),
            advertise_addr: None,
            agent_capacity: 100_000,
            update: UpdateSettings {
                // Only the command line decides to re-exec; a library caller keeps its process.
                restart: Restart::NextStart,
                ..UpdateSettings::new(Role::Dashboard, &|_| None, UpdateFlags::default())
            },
            secret_key: None,
            webapp: WebAppConfig::default(),
            stripe: StripeConfig::default(),
        }
    }
}
