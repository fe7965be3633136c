//! Hosted agents (the hosted-agent API, docs/hosting.md, with the decisions in
//! docs/architecture.md#hosted-agents): provisioning and the lifecycle, synchronous turns,
//! activity, and each agent's Telegram bot ([`channel`]). [`Hosting`] is the core; [`service`] is
//! its gRPC face, which the REST adapters (and MCP) call.
//!
//! Store first, memory second: every lifecycle change commits to the store and then updates
//! the live agent, under the agent's lifecycle lock. Reads of an agent take its status from
//! the live agent, so a client that sees `running` can message it.
//!
//! Replicas (docs/architecture.md#replicas): each agent runs on the replica holding its lease
//! ([`ownership`]); a call for it that reaches another replica is forwarded to the owner
//! ([`routing`], `crate::cluster::peers`). The registry holds this replica's agents only;
//! reads of any agent come from the store.

pub mod activity;
mod admission;
pub mod channel;
pub mod files;
pub mod in_flight;
pub mod instances;
pub mod lifecycle;
pub mod limits;
pub mod live;
pub mod ownership;
pub mod recorder;
pub mod routing;
pub mod service;
pub mod turns;

use std::{path::Path, sync::Arc, time::Duration};

use tokio::task::JoinHandle;

use crate::{
    billing::{BillingConfig, prices::PriceBook},
    cluster::{Replica, peers::Peers},
    runtimes::{Catalogue, Drivers, assistant, orphans::ChildRecords, process},
    secrets::SecretKey,
    store::Store,
    telemetry::turns::TurnEvents,
};
use instances::Status;
use live::Registry;
use recorder::Recorder;

/// Settings of the hosted-agent core.
#[derive(Debug, Clone)]
pub struct HostingConfig {
    /// The runtime catalogue.
    pub catalogue: Catalogue,
    /// Where `roost runtimes install` puts packaged runtimes, when the catalogue is the
    /// built-in one: installs there are offered while roost serves
    /// ([`crate::runtimes::catalogue::LiveCatalogue`]). None with an operator's
    /// `--runtimes` file.
    pub installed_runtimes: Option<std::path::PathBuf>,
    /// Model prices for metering.
    pub prices: PriceBook,
    /// Billing periods.
    pub billing: BillingConfig,
    /// Hard cap of one turn (`--turn-timeout-secs`, default 900).
    pub turn_timeout: Duration,
    /// Turns that may wait or run per agent before more get 429 (`--turn-queue-depth`).
    pub queue_depth: usize,
    /// How long a boot may take before the agent is failed (`--boot-timeout-secs`).
    pub boot_timeout: Duration,
    /// Where agents' models are: the model gateway's upstreams and limits (every runtime's
    /// model calls go through it, the assistant's included).
    pub models: crate::llm::GatewayConfig,
    /// The Telegram Bot API (`--telegram-api-base`): bot tokens are checked there.
    pub telegram_api_base: String,
    /// How agents' Telegram channels run.
    pub channels: channel::ChannelConfig,
    /// The sandbox process agents run in.
    pub sandbox: crate::sandbox::SandboxConfig,
}

impl Default for HostingConfig {
    fn default() -> Self {
        Self {
            catalogue: Catalogue::builtin(),
            installed_runtimes: None,
            prices: PriceBook::builtin(),
            billing: BillingConfig::default(),
            turn_timeout: Duration::from_secs(900),
            queue_depth: 64,
            boot_timeout: Duration::from_secs(120),
            models: crate::llm::GatewayConfig::default(),
            telegram_api_base: crate::telegram::client::DEFAULT_API_BASE.to_owned(),
            channels: channel::ChannelConfig::default(),
            sandbox: crate::sandbox::SandboxConfig::default(),
        }
    }
}

/// The hosted-agent core, shared by its gRPC service, the renewal worker and start-up.
pub struct Hosting {
    store: Store,
    config: HostingConfig,
    /// The runtimes offered: the configured catalogue and what is installed since.
    catalogue: crate::runtimes::catalogue::LiveCatalogue,
    /// Whether turns are recorded as observed activity too (a recorder with turn events).
    observes_turns: bool,
    /// Where a turn's span goes when its runtime called the model (the parent of those
    /// calls' spans); none when turns are not observed.
    telemetry: Option<Arc<crate::telemetry::Telemetry>>,
    drivers: Drivers,
    /// The model gateway: whether an account's calls would be admitted, asked before a
    /// turn whose calls it meters.
    models: crate::llm::ModelGateway,
    registry: Registry,
    recorder: Recorder,
    recorder_task: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Seals secrets from config calls; opens them only for a machine's spec.
    secret_key: SecretKey,
    /// Talks to Telegram: checks bot tokens (`getMe`), runs the channels.
    telegram: crate::telegram::TelegramClient,
    /// The running channels' wake-ups.
    channel_wakers: channel::ChannelWakers,
    /// Turns by status, with their duration (`GET /metrics`).
    turn_metrics: crate::metrics::turns::TurnMetrics,
    /// This replica: its id fences the agents' writes.
    replica: Replica,
    /// The other replicas, which calls for their agents are forwarded to.
    peers: Peers,
    /// When this replica last renewed its agent leases (see [`ownership`]).
    renewed: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Hosting {
    /// The core over `store`. Process runtimes find roost's example runtime in
    /// `<data_dir>/runtimes`, send telemetry to `otlp` (roost itself), and are recorded in
    /// the store under the installation id in `<data_dir>/installation_id`.
    ///
    /// The `assistant` runtime calls its model through `models`, the model gateway process
    /// runtimes call over HTTP. Turns are reported to `turn_events` as observed activity,
    /// when given. Agents' secrets are sealed with `secret_key` (see [`crate::secrets`]).
    /// It runs as `replica`, forwarding calls for other replicas' agents through `peers`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        config: HostingConfig,
        data_dir: &Path,
        otlp: process::OtlpExport,
        models: crate::llm::ModelGateway,
        turn_events: Option<TurnEvents>,
        secret_key: SecretKey,
        replica: Replica,
        peers: Peers,
    ) -> std::io::Result<Arc<Self>> {
        let runtimes_dir = data_dir.join("runtimes");
        process::ProcessDriver::install_example(&runtimes_dir)?;
        let telemetry = turn_events.as_ref().map(|events| events.telemetry().clone());
        let drivers = Drivers {
            process: process::ProcessDriver::new(
                data_dir,
                crate::runtimes::workspace::Workspaces::new(data_dir.join("agents")),
                crate::sandbox::Sandbox::probe(&config.sandbox, data_dir, telemetry.clone()),
                otlp,
                config.boot_timeout,
                ChildRecords::new(store.clone(), data_dir)?,
                telemetry.clone(),
            ),
            assistant: assistant::AssistantDriver::new(store.clone(), models.clone()),
        };
        let observes_turns = turn_events.is_some();
        let (recorder, task) = Recorder::start(store.clone(), turn_events, replica.id.clone());
        Ok(Arc::new(Self {
            store,
            observes_turns,
            telemetry,
            drivers,
            models,
            registry: Registry::default(),
            recorder,
            recorder_task: std::sync::Mutex::new(Some(task)),
            secret_key,
            telegram: crate::telegram::TelegramClient::new(&config.telegram_api_base),
            channel_wakers: channel::ChannelWakers::default(),
            turn_metrics: crate::metrics::turns::TurnMetrics::default(),
            catalogue: crate::runtimes::catalogue::LiveCatalogue::new(
                config.catalogue.clone(),
                config.installed_runtimes.clone(),
            ),
            config,
            replica,
            peers,
            renewed: std::sync::Mutex::new(None),
        }))
    }

    /// The sandbox process agents run in.
    pub fn sandbox(&self) -> &crate::sandbox::Sandbox {
        self.drivers.process.sandbox()
    }

    /// The catalogue now (with runtimes installed since the start).
    pub fn catalogue(&self) -> Arc<Catalogue> {
        self.catalogue.get()
    }

    /// The settings it runs with.
    pub fn config(&self) -> &HostingConfig {
        &self.config
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// This replica.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The other replicas.
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// Turns by status, with their duration.
    pub fn turn_metrics(&self) -> &crate::metrics::turns::TurnMetrics {
        &self.turn_metrics
    }

    /// Every agent this process hosts: its status and the turns waiting or running for it.
    pub fn agent_loads(&self) -> Vec<(Status, usize)> {
        let depth = self.config.queue_depth;
        self.registry
            .all()
            .iter()
            .map(|agent| (agent.status(), depth.saturating_sub(agent.queue.available_permits())))
            .collect()
    }

    /// Stops every machine (their stored status stays, so the next start boots them
    /// again), writes the turns still queued for the store, then gives the agents' leases
    /// up so other replicas take them over at once.
    pub async fn shutdown(&self) {
        let machines: Vec<_> = self
            .registry
            .all()
            .iter()
            .filter_map(|agent| {
                let mut live = agent.state();
                live.generation.cancel();
                live.machine.take()
            })
            .collect();
        futures::future::join_all(machines.iter().map(|m| m.stop())).await;
        self.recorder.flush().await;
        let task = self.recorder_task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            task.abort();
        }
        self.release_leases().await;
    }
}
