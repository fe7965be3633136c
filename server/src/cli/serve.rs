//! `roost serve`: its flags and how they become a [`ServeConfig`].

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::Args;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::GlobalArgs;
use crate::{
    ServeConfig,
    billing::{
        prices::PriceBook,
        stripe::{DEFAULT_AMOUNTS_CENTS, StripeConfig},
    },
    llm::Upstream,
    node::pusher::PushConfig,
    runtimes::Catalogue,
    secrets::{KeyRefused, SecretKey},
    serve,
    shutdown::cancel_on_signal,
    streams::StreamLimits,
    telemetry::retention::RetentionConfig,
    update::{Restart, Role, UpdateFlags, UpdateSettings},
};

/// Flags of `roost serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (gRPC, gRPC-web and HTTP share it).
    #[arg(long, env = "ROOST_ADDR", default_value = "127.0.0.1:8900")]
    addr: String,
    /// Seconds in-flight requests may take to finish after SIGINT/SIGTERM.
    #[arg(long, env = "ROOST_SHUTDOWN_GRACE_SECS", default_value_t = 30)]
    shutdown_grace_secs: u64,
    /// Seconds an HTTP/1 request's headers may take to arrive (also the longest wait of a
    /// keep-alive connection for its next request).
    #[arg(long, env = "ROOST_HEADER_READ_TIMEOUT_SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_read_timeout_secs: u64,
    /// Seconds a connection may stay open with no request in flight (HTTP/1 keep-alive,
    /// HTTP/2, a socket that never sent a byte), and a write may stay blocked on a client
    /// that stopped reading. Streams (SSE, MCP) are in flight while they last.
    #[arg(long, env = "ROOST_IDLE_TIMEOUT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    idle_timeout_secs: u64,
    /// MiB of telemetry (OTLP exports, node pushes) decoded at once, counted as 8 bytes per
    /// protobuf byte and 2 per JSON byte, decompressed; past it a request waits a second for
    /// room, then gets 429 / RESOURCE_EXHAUSTED with Retry-After.
    #[arg(long, env = "ROOST_MAX_INGEST_INFLIGHT_MB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(16..=4095))]
    max_ingest_inflight_mb: u64,
    /// Most client connections open at once per listener; more wait in the kernel's backlog.
    /// Default: the descriptor limit (raised to its hard limit at start) less a reserve of a
    /// quarter of it (64 to 1,024).
    #[arg(long, env = "ROOST_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,
    /// Runtime catalogue (TOML); the built-in one has echo, example and assistant.
    #[arg(long, env = "ROOST_RUNTIMES", value_name = "PATH")]
    runtimes: Option<PathBuf>,
    /// Model price book (TOML, USD per million tokens) for metering.
    #[arg(long, env = "ROOST_PRICE_BOOK", value_name = "PATH")]
    price_book: Option<PathBuf>,
    /// Hard cap of one agent turn, in seconds.
    #[arg(long, env = "ROOST_TURN_TIMEOUT_SECS", default_value_t = 900)]
    turn_timeout_secs: u64,
    /// Turns that may wait or run per agent; more get 429.
    #[arg(long, env = "ROOST_TURN_QUEUE_DEPTH", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    turn_queue_depth: u32,
    /// Seconds an agent's boot may take before it is failed.
    #[arg(long, env = "ROOST_BOOT_TIMEOUT_SECS", default_value_t = 120)]
    boot_timeout_secs: u64,
    /// Length of a paid period in seconds (30 days; shorter only for demos and tests).
    #[arg(long, env = "ROOST_BILLING_PERIOD_SECS", default_value_t = 30 * 24 * 3600, value_parser = clap::value_parser!(u64).range(1..))]
    billing_period_secs: u64,
    /// OpenAI-compatible base URL of the managed (included, metered) model: managed agents'
    /// OpenAI-style calls through the model gateway, and assistant turns
    /// (e.g. https://api.openai.com/v1). Without it, those calls fail.
    #[arg(long, env = "ROOST_MODEL_UPSTREAM_URL", value_name = "URL")]
    model_upstream_url: Option<String>,
    /// API key for the managed model upstream.
    #[arg(long, env = "ROOST_MODEL_UPSTREAM_KEY", value_name = "KEY", hide_env_values = true)]
    model_upstream_key: Option<String>,
    /// Anthropic Messages base URL of the managed model, for managed agents' Anthropic-style
    /// calls through the model gateway (e.g. https://api.anthropic.com).
    #[arg(long, env = "ROOST_ANTHROPIC_UPSTREAM_URL", value_name = "URL")]
    anthropic_upstream_url: Option<String>,
    /// API key for the managed Anthropic upstream.
    #[arg(long, env = "ROOST_ANTHROPIC_UPSTREAM_KEY", value_name = "KEY", hide_env_values = true)]
    anthropic_upstream_key: Option<String>,
    /// Where byok agents' Anthropic-style calls go, with their own key.
    #[arg(long, env = "ROOST_BYOK_ANTHROPIC_URL", value_name = "URL", default_value = "https://api.anthropic.com")]
    byok_anthropic_url: String,
    /// Largest model-call body the model gateway takes, in MiB.
    #[arg(long, env = "ROOST_LLM_MAX_BODY_MB", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=1024))]
    llm_max_body_mb: u64,
    /// Model calls one agent may have in flight at once; more get 429.
    #[arg(long, env = "ROOST_LLM_MAX_CALLS_PER_AGENT", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    llm_max_calls_per_agent: u32,
    /// Seconds a model upstream may take to start answering, and then between streamed chunks.
    #[arg(long, env = "ROOST_LLM_UPSTREAM_TIMEOUT_SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    llm_upstream_timeout_secs: u64,
    /// Model calls one turn may make (a runtime in a loop); past it the turn fails. A
    /// runtime's `max_calls_per_turn` in the catalogue wins.
    #[arg(long, env = "ROOST_LLM_MAX_CALLS_PER_TURN", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    llm_max_calls_per_turn: u32,
    /// What one turn's model calls may cost, in cents; past it the turn fails. A runtime's
    /// `max_turn_spend_cents` in the catalogue wins.
    #[arg(long, env = "ROOST_LLM_MAX_TURN_SPEND_CENTS", default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=1_000_000_000))]
    llm_max_turn_spend_cents: i64,
    /// PEM file of certificate authorities to trust for HTTPS model upstreams, besides the
    /// system's (a model server behind a private CA).
    #[arg(long, env = "ROOST_LLM_UPSTREAM_CA_FILE", value_name = "PATH")]
    llm_upstream_ca_file: Option<PathBuf>,
    /// `required`: every process agent runs in a sandbox (bubblewrap, namespaces, cgroups,
    /// seccomp, an egress proxy); when the host cannot sandbox, process agents do not boot
    /// and health says why. `off`: they run unconfined, as roost's own user.
    #[arg(long, env = "ROOST_RUNTIME_SANDBOX", value_enum, default_value_t = crate::sandbox::SandboxMode::Required)]
    runtime_sandbox: crate::sandbox::SandboxMode,
    /// bubblewrap's path, when it is not `bwrap` on PATH.
    #[arg(long, env = "ROOST_SANDBOX_BWRAP", value_name = "PATH")]
    sandbox_bwrap: Option<PathBuf>,
    /// The host uids agents run as when roost runs as root, `FIRST:COUNT` (each agent its
    /// own; none may belong to a host account).
    #[arg(long, env = "ROOST_AGENT_UIDS", value_name = "FIRST:COUNT", default_value_t = crate::sandbox::UidRange::default())]
    agent_uids: crate::sandbox::UidRange,
    /// Destinations sandboxed agents may reach through the egress proxy even when they are
    /// private or loopback addresses: host names, `*.domain`, IPs or CIDRs, each with an
    /// optional `:port`; comma-separated.
    #[arg(long, env = "ROOST_EGRESS_ALLOW", value_name = "PATTERN", value_delimiter = ',')]
    egress_allow: Vec<String>,
    /// Destinations sandboxed agents may never reach (same patterns; wins over allow).
    #[arg(long, env = "ROOST_EGRESS_DENY", value_name = "PATTERN", value_delimiter = ',')]
    egress_deny: Vec<String>,
    /// Public destinations in neither list: `allow`, or `deny` (only --egress-allow passes).
    #[arg(long, env = "ROOST_EGRESS_DEFAULT", value_name = "allow|deny", default_value = "allow", value_parser = ["allow", "deny"])]
    egress_default: String,
    /// Also serve on this address, for OTLP exporters' default gRPC port (e.g. 127.0.0.1:4317).
    #[arg(long, env = "ROOST_OTLP_GRPC_ADDR", value_name = "ADDR")]
    otlp_grpc_addr: Option<String>,
    /// Also serve on this address, for OTLP exporters' default HTTP port (e.g. 127.0.0.1:4318).
    #[arg(long, env = "ROOST_OTLP_HTTP_ADDR", value_name = "ADDR")]
    otlp_http_addr: Option<String>,
    /// Delete observed telemetry older than this many days (0 keeps it forever).
    #[arg(long, env = "ROOST_RETENTION_DAYS", default_value_t = 30)]
    retention_days: u64,
    /// Keep the store under this many MiB by deleting the oldest telemetry (0: no bound).
    #[arg(long, env = "ROOST_RETENTION_MAX_MB", default_value_t = 0)]
    retention_max_mb: u64,
    /// Seconds between retention passes.
    #[arg(long, env = "ROOST_RETENTION_CHECK_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    retention_check_secs: u64,
    /// Longest telemetry string kept, in bytes (attribute values and keys, log bodies,
    /// names); a longer one is cut at a character boundary and ends with
    /// `…[truncated N bytes]`.
    #[arg(long, env = "ROOST_MAX_ATTRIBUTE_BYTES", default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    max_attribute_bytes: u64,
    /// What an acknowledged telemetry batch or turn record survives: `process` (roost
    /// crashing or being killed; the OS writes it to disk moments later) or `disk` (power
    /// loss too: each commit waits for fsync). Money and configuration always wait for
    /// the disk.
    #[arg(long, env = "ROOST_DURABILITY", value_name = "process|disk", default_value = "process")]
    durability: crate::store::Durability,
    /// Keep conversation content (prompts, replies, tool arguments and results) sent in
    /// telemetry: `on`, or `off` to drop it at ingest (tokens, models and costs are kept).
    #[arg(long, env = "ROOST_CAPTURE_CONTENT", value_name = "on|off", default_value = "on", value_parser = on_off)]
    capture_content: bool,
    /// Where byok agents' OpenAI-style calls (and byok assistant turns) go, with their own key.
    #[arg(long, env = "ROOST_BYOK_UPSTREAM_URL", value_name = "URL", default_value = "https://api.openai.com/v1")]
    byok_upstream_url: String,
    /// The Telegram Bot API: agents' `MESSAGING_BOT_TOKEN`s are checked there (getMe).
    #[arg(long, env = "ROOST_TELEGRAM_API_BASE", value_name = "URL", default_value = crate::telegram::client::DEFAULT_API_BASE)]
    telegram_api_base: String,
    /// roost's address as the internet reaches it (https://roost.example.com): where
    /// Telegram delivers updates in webhook mode.
    #[arg(long, env = "ROOST_PUBLIC_URL", value_name = "URL")]
    public_url: Option<String>,
    /// How agents' bots receive messages: `polling` (getUpdates; works behind NAT) or
    /// `webhook` (Telegram posts to `<public-url>/telegram/{instance_id}`; needs
    /// `--public-url`, reachable by Telegram over https).
    #[arg(long, env = "ROOST_TELEGRAM_MODE", value_name = "polling|webhook", default_value = "polling", value_parser = ["polling", "webhook"])]
    telegram_mode: String,
    /// Comma-separated tokens; when set, every dashboard call (query, feature, stream,
    /// ingest and control routes) needs `Authorization: Bearer <token>` (`?token=` on SSE
    /// paths). Unset, only loopback clients are served.
    #[arg(long, env = "SERVICE_API_TOKENS", value_name = "TOKENS", value_delimiter = ',', hide_env_values = true)]
    api_tokens: Vec<String>,
    /// Concurrent `/api/logs` clients; more get 429.
    #[arg(long, env = "ROOST_MAX_LOG_STREAM_CLIENTS", default_value_t = 10)]
    max_log_stream_clients: usize,
    /// Concurrent `/api/health-stream` clients; more get 429.
    #[arg(long, env = "ROOST_MAX_HEALTH_STREAM_CLIENTS", default_value_t = 10)]
    max_health_stream_clients: usize,
    /// Concurrent `/api/brain-stream` clients; more get 429.
    #[arg(long, env = "ROOST_MAX_BRAIN_STREAM_CLIENTS", default_value_t = 10)]
    max_brain_stream_clients: usize,
    /// Host names roost answers to besides loopback names, IP addresses and the host of
    /// `--public-url`, comma-separated (`.example.com` for a domain and its subdomains, `*`
    /// for any). While no SERVICE_API_TOKENS are set every route checks `Host` (`/mcp`
    /// always): this stops DNS rebinding against a local roost. When clients reach roost by
    /// a name (a LAN name, a domain), add it.
    #[arg(long, env = "ROOST_ALLOWED_HOSTS", value_name = "HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// More host names, added to `--allowed-hosts` (the flag `/mcp`'s check had before every
    /// route had one; kept so existing settings work).
    #[arg(long, env = "ROOST_MCP_ALLOWED_HOSTS", value_name = "HOSTS", value_delimiter = ',')]
    mcp_allowed_hosts: Vec<String>,
    /// The categories the dashboard's feedback forms offer (a `label` score on a trace,
    /// session or model call), comma-separated, each at most 256 bytes.
    #[arg(long, env = "ROOST_FEEDBACK_LABELS", value_name = "LABELS", value_delimiter = ',', default_value = roost_gateway::DEFAULT_FEEDBACK_LABELS, value_parser = feedback_label)]
    feedback_labels: Vec<String>,
    /// Seconds between evaluations of the alert rules.
    #[arg(long, env = "ROOST_ALERTS_CHECK_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    alerts_check_secs: u64,
    /// Seconds between guard checks of the hosted agents.
    #[arg(long, env = "ROOST_GUARD_CHECK_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    guard_check_secs: u64,
    /// Seconds a replica's leases last without renewal: with several replicas on one
    /// PostgreSQL, a dead replica's hosted agents and the cluster-wide workers (retention,
    /// crons, alerts, guard) move to another replica within this long. Renewed every third
    /// of it.
    #[arg(long, env = "ROOST_LEASE_TTL_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(3..=3600))]
    lease_ttl_secs: u64,
    /// Where the other replicas reach this one (`host:port` of its gRPC API): calls for the
    /// agents it runs are forwarded there. Default: the listening address (a wildcard one as
    /// loopback, which only serves replicas on one machine).
    #[arg(long, env = "ROOST_ADVERTISE_ADDR")]
    advertise_addr: Option<String>,
    /// Most hosted agents this replica runs at once; agents beyond it wait for a replica
    /// with room.
    #[arg(long, env = "ROOST_AGENT_CAPACITY", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    agent_capacity: u64,
    #[command(flatten)]
    webapp: WebAppArgs,
    #[command(flatten)]
    update: UpdateArgs,
}

/// The hosted web app's flags: who may sign up, and Stripe for top-ups.
#[derive(Debug, Args)]
pub struct WebAppArgs {
    /// `open`: anyone may create an account (zero balance) at /signup. `closed`: the
    /// operator invites users with `roost accounts create --email` or `roost users add`.
    #[arg(long, env = "ROOST_SIGNUP", value_name = "open|closed", default_value = "closed", value_parser = ["open", "closed"])]
    signup: String,
    /// Stripe secret API key (`sk_…`): with the webhook secret, /billing takes top-ups
    /// through Stripe Checkout.
    #[arg(long, env = "ROOST_STRIPE_SECRET_KEY", value_name = "KEY", hide_env_values = true)]
    stripe_secret_key: Option<String>,
    /// The signing secret (`whsec_…`) of the Stripe webhook endpoint pointed at
    /// `{base_url}/api/billing/stripe/webhook`; credits are added only by verified events.
    #[arg(long, env = "ROOST_STRIPE_WEBHOOK_SECRET", value_name = "SECRET", hide_env_values = true)]
    stripe_webhook_secret: Option<String>,
    /// Stripe's API base URL (a fake one in tests).
    #[arg(long, env = "ROOST_STRIPE_API_BASE", value_name = "URL", default_value = "https://api.stripe.com")]
    stripe_api_base: String,
    /// Top-up amounts offered on /billing, in cents, comma-separated.
    #[arg(long, env = "ROOST_TOP_UP_AMOUNTS", value_name = "CENTS", value_delimiter = ',', default_values_t = DEFAULT_AMOUNTS_CENTS, value_parser = clap::value_parser!(i64).range(50..=crate::billing::stripe::MAX_TOP_UP_CENTS))]
    top_up_amounts: Vec<i64>,
}

/// One `--feedback-labels` category: trimmed, not empty, at most 256 bytes (a categorical
/// score's most), so every label offered can be stored.
fn feedback_label(value: &str) -> Result<String, String> {
    let label = value.trim();
    if label.is_empty() {
        return Err("a feedback label must not be empty".to_owned());
    }
    if label.len() > crate::telemetry::scores::MAX_NAME_BYTES {
        return Err(format!("a feedback label is at most {} bytes", crate::telemetry::scores::MAX_NAME_BYTES));
    }
    Ok(label.to_owned())
}

/// The self-updater's flags (the seed's `SERVICE_*` variables are read from the
/// environment as they are).
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// roost runs under a service supervisor (systemd, launchd, a container's restart
    /// policy): after installing an update it exits for the supervisor to start the new
    /// build, instead of re-executing itself. systemd is detected without it.
    #[arg(long, env = "ROOST_SUPERVISED", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
    supervised: bool,
    /// crates.io-compatible package index the updater polls (`{url}/api/v1/crates/{package}`).
    #[arg(long, env = "ROOST_UPDATE_INDEX_URL", value_name = "URL", default_value = "https://crates.io")]
    update_index_url: String,
    /// The package to update to: roost's own crate (only releases whose index metadata
    /// names roost's repository are installed).
    #[arg(long, env = "ROOST_UPDATE_PACKAGE", default_value = crate::update::settings::DEFAULT_PACKAGE)]
    update_package: String,
    /// The paid tier's package, installed when the upstream reports an entitled plan
    /// (none unless set).
    #[arg(long, env = "ROOST_UPDATE_PAID_PACKAGE", value_name = "NAME")]
    update_paid_package: Option<String>,
    /// The install command; `{package}` and `{version}` are filled in, and it runs with `sh -c`.
    #[arg(long, env = "ROOST_UPDATE_INSTALL_COMMAND", value_name = "COMMAND", default_value = crate::update::settings::DEFAULT_INSTALL_COMMAND)]
    update_install_command: String,
    /// minisign public key (the base64 line of minisign.pub): when set, only releases whose
    /// signature verifies with it are installed.
    #[arg(long, env = "ROOST_UPDATE_PUBLIC_KEY", value_name = "KEY", value_parser = crate::update::signature::parse_public_key)]
    update_public_key: Option<String>,
    /// Where a release's signature is published; `{package}` and `{version}` are filled in.
    #[arg(long, env = "ROOST_UPDATE_SIGNATURE_URL", value_name = "URL", default_value = crate::update::signature::DEFAULT_SIGNATURE_URL)]
    update_signature_url: String,
}

impl UpdateArgs {
    /// The updater's settings for `role`, from these flags and the environment.
    pub fn settings(&self, role: Role) -> UpdateSettings {
        let flags = UpdateFlags {
            supervised: self.supervised,
            index_url: self.update_index_url.clone(),
            package: self.update_package.clone(),
            paid_package: self.update_paid_package.clone().unwrap_or_default(),
            install_command: self.update_install_command.clone(),
            public_key: self.update_public_key.clone(),
            signature_url: self.update_signature_url.clone(),
        };
        UpdateSettings::new(role, &|key| std::env::var(key).ok(), flags)
    }
}

impl ServeArgs {
    fn config(&self, global: &GlobalArgs, role: Role) -> Result<ServeConfig, String> {
        let mut config = global.serve_config()?;
        config.update = self.update.settings(role);
        config.shutdown_grace = Duration::from_secs(self.shutdown_grace_secs);
        config.connections = crate::connections::ConnectionLimits {
            header_read_timeout: Duration::from_secs(self.header_read_timeout_secs),
            idle_timeout: Duration::from_secs(self.idle_timeout_secs),
            max_connections: self.max_connections.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        };
        let hosting = &mut config.hosting;
        if let Some(path) = &self.runtimes {
            hosting.catalogue = Catalogue::load(path)?;
            hosting.installed_runtimes = None;
        }
        if let Some(path) = &self.price_book {
            hosting.prices = PriceBook::load(path)?;
        }
        hosting.turn_timeout = Duration::from_secs(self.turn_timeout_secs);
        // A model call's hold stops counting this long after it started if nothing settles it
        // (its replica died): a call outlives its turn by little.
        hosting.models.hold_ttl = hosting.turn_timeout + Duration::from_secs(60);
        hosting.queue_depth = self.turn_queue_depth as usize;
        hosting.boot_timeout = Duration::from_secs(self.boot_timeout_secs);
        hosting.billing.period = Duration::from_secs(self.billing_period_secs);
        let models = &mut hosting.models;
        models.openai = self
            .model_upstream_url
            .clone()
            .map(|base_url| Upstream { base_url, api_key: self.model_upstream_key.clone() });
        models.anthropic = self
            .anthropic_upstream_url
            .clone()
            .map(|base_url| Upstream { base_url, api_key: self.anthropic_upstream_key.clone() });
        models.byok_openai_url.clone_from(&self.byok_upstream_url);
        models.byok_anthropic_url.clone_from(&self.byok_anthropic_url);
        models.max_body_bytes = (self.llm_max_body_mb as usize) << 20;
        models.max_calls_per_agent = self.llm_max_calls_per_agent as usize;
        models.upstream_timeout = Duration::from_secs(self.llm_upstream_timeout_secs);
        models.turn_limits = crate::callers::TurnLimits {
            max_calls: self.llm_max_calls_per_turn,
            max_cost_nanocents: self.llm_max_turn_spend_cents * crate::billing::prices::NANOCENTS_PER_CENT,
        };
        if let Some(path) = &self.llm_upstream_ca_file {
            let pem = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            let roots = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("{}: not a PEM certificate bundle: {e}", path.display()))?;
            if roots.is_empty() {
                return Err(format!("{}: holds no certificate", path.display()));
            }
            models.upstream_roots = roots;
        }
        hosting.sandbox.mode = self.runtime_sandbox;
        hosting.sandbox.bwrap.clone_from(&self.sandbox_bwrap);
        hosting.sandbox.uids = self.agent_uids;
        hosting.sandbox.egress =
            crate::sandbox::EgressPolicy::new(&self.egress_allow, &self.egress_deny, self.egress_default == "allow")?;
        hosting.telegram_api_base.clone_from(&self.telegram_api_base);
        if self.telegram_mode == "webhook" {
            let base = self.public_url.clone().filter(|u| !u.trim().is_empty());
            let base = base.ok_or("--telegram-mode webhook needs --public-url (where Telegram reaches roost)")?;
            hosting.channels.webhook_base = Some(base.trim().trim_end_matches('/').to_owned());
        }
        config.retention = RetentionConfig {
            max_age: (self.retention_days > 0).then(|| Duration::from_secs(self.retention_days.saturating_mul(86_400))),
            max_bytes: (self.retention_max_mb > 0).then(|| self.retention_max_mb.saturating_mul(1024 * 1024)),
            every: Duration::from_secs(self.retention_check_secs),
        };
        config.telemetry.max_attribute_bytes = usize::try_from(self.max_attribute_bytes).unwrap_or(usize::MAX);
        config.telemetry.capture_content = self.capture_content;
        config.store.durability = self.durability;
        config.access.api_tokens =
            self.api_tokens.iter().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect();
        config.streams = StreamLimits {
            brain_clients: self.max_brain_stream_clients,
            health_clients: self.max_health_stream_clients,
            log_clients: self.max_log_stream_clients,
        };
        config.gateway.max_ingest_inflight_bytes =
            usize::try_from(self.max_ingest_inflight_mb.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX);
        config.gateway.secure_cookies =
            self.public_url.as_deref().is_some_and(|url| url.trim().to_ascii_lowercase().starts_with("https://"));
        config.gateway.feedback_labels = Vec::new();
        for label in &self.feedback_labels {
            if !config.gateway.feedback_labels.contains(label) {
                config.gateway.feedback_labels.push(label.clone());
            }
        }
        // The names `--addr` and `--public-url` give are roost's own.
        let own = [Some(&self.addr), self.public_url.as_ref()];
        config.access.hosts = roost_kit::hosts::HostAllowList::new(
            self.allowed_hosts.iter().chain(&self.mcp_allowed_hosts).chain(own.into_iter().flatten()),
        );
        config.alerts_every = Duration::from_secs(self.alerts_check_secs);
        config.guard_every = Duration::from_secs(self.guard_check_secs);
        config.lease_ttl = Duration::from_secs(self.lease_ttl_secs);
        config.advertise_addr = self.advertise_addr.clone().filter(|a| !a.trim().is_empty());
        config.agent_capacity = usize::try_from(self.agent_capacity).unwrap_or(usize::MAX);
        config.extra_addrs = self.otlp_grpc_addr.iter().chain(&self.otlp_http_addr).cloned().collect();
        config.secret_key = secret_key_from_env()?;
        config.webapp.signup_open = self.webapp.signup == "open";
        config.webapp.public_url = self.public_url.clone().filter(|u| !u.trim().is_empty());
        config.stripe = StripeConfig {
            secret_key: self.webapp.stripe_secret_key.clone().filter(|k| !k.trim().is_empty()),
            webhook_secret: self.webapp.stripe_webhook_secret.clone().filter(|k| !k.trim().is_empty()),
            api_base: self.webapp.stripe_api_base.clone(),
            amounts_cents: self.webapp.top_up_amounts.clone(),
            ..StripeConfig::default()
        };
        Ok(config)
    }
}

/// `ROOST_SECRET_KEY`, if set. Read from the environment only, never a flag: a key on the
/// command line would show in `ps` and shell history.
fn secret_key_from_env() -> Result<Option<SecretKey>, String> {
    match std::env::var("ROOST_SECRET_KEY") {
        Ok(text) => {
            SecretKey::parse(&text).map(Some).map_err(|why| format!("ROOST_SECRET_KEY is not a secret key: {why}"))
        }
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("ROOST_SECRET_KEY is not a secret key: it is not UTF-8".to_owned())
        }
    }
}

/// Flags of `roost daemon`: those of serve, plus where to push.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Push everything ingested to this central roost (its base URL).
    #[arg(long, env = "ROOST_UPSTREAM", value_name = "URL", requires = "upstream_token")]
    upstream: Option<String>,
    /// An API key of the central roost's account this node belongs to.
    #[arg(long, env = "ROOST_UPSTREAM_TOKEN", value_name = "KEY", hide_env_values = true)]
    upstream_token: Option<String>,
}

/// The crash-loop guard, before anything else of a start (seed: the guard runs first).
fn guard(global: &GlobalArgs, args: &ServeArgs, role: Role) -> Result<(), ExitCode> {
    let Ok(data_dir) = global.data_dir() else { return Ok(()) };
    let settings = args.update.settings(role);
    match crate::update::guard_at_boot(&data_dir, &settings) {
        Ok(()) => Ok(()),
        // Rolled back, and nothing supervises this process: run the old build in its place.
        Err(0) if settings.restart == Restart::Exec => Err(restart()),
        // Rolled back under a supervisor (or the rollback failed): exit for it to act.
        Err(_) => Err(ExitCode::FAILURE),
    }
}

/// Runs `roost serve` until a signal stops it.
pub async fn run(global: &GlobalArgs, args: ServeArgs) -> ExitCode {
    if let Err(code) = guard(global, &args, Role::Dashboard) {
        return code;
    }
    match args.config(global, Role::Dashboard) {
        Ok(config) => serve(config, &args.addr).await,
        Err(err) => {
            eprintln!("roost: {err}");
            ExitCode::from(2)
        }
    }
}

/// Runs `roost daemon`: serve, pushing to the upstream if one is given.
pub async fn daemon(global: &GlobalArgs, args: DaemonArgs) -> ExitCode {
    if let Err(code) = guard(global, &args.serve, Role::Daemon) {
        return code;
    }
    let mut config = match args.serve.config(global, Role::Daemon) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("roost: {err}");
            return ExitCode::from(2);
        }
    };
    if let (Some(upstream), Some(token)) = (args.upstream, args.upstream_token) {
        config.push = Some(PushConfig::new(upstream, token));
    }
    serve(config, &args.serve.addr).await
}

async fn serve(config: ServeConfig, addr: &str) -> ExitCode {
    let listener = match TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("roost: cannot listen on {addr}: {err}");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    match serve::run(config, listener, shutdown).await {
        Ok(()) if crate::control::restart_requested() => restart(),
        Ok(()) => ExitCode::SUCCESS,
        // The key is configuration: like a bad flag, exit 2 with what to do.
        Err(err) if err.chain().any(|cause| cause.is::<KeyRefused>()) => {
            tracing::error!(error = format!("{err:#}"), "roost refused to start");
            eprintln!("roost: {err:#}");
            ExitCode::from(2)
        }
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "roost stopped with an error");
            eprintln!("roost: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Starts this binary again with the same arguments and environment, in this process
/// (the PID and a supervisor's view stay the same). `argv[0]` is used rather than the
/// running image's path, so a binary replaced on disk since the start is the one that runs.
#[cfg(unix)]
fn restart() -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    let mut args = std::env::args_os();
    let program = args.next().map_or_else(|| std::env::current_exe().unwrap_or_default(), std::path::PathBuf::from);
    tracing::info!(program = %program.display(), "restarting");
    let err = std::process::Command::new(&program).args(args).exec();
    eprintln!("roost: cannot restart {}: {err}", program.display());
    ExitCode::FAILURE
}

/// Without `exec`, a restart is a clean exit for the service manager to start again.
#[cfg(not(unix))]
fn restart() -> ExitCode {
    tracing::info!("stopped for a restart; the service manager starts roost again");
    ExitCode::SUCCESS
}

/// `on` / `off` (also `true`/`false`, `1`/`0`, `yes`/`no`; off is spelled as for the
/// update kill switch).
fn on_off(value: &str) -> Result<bool, String> {
    if crate::update::settings::is_kill_switch(value) {
        return Ok(false);
    }
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        _ => Err(format!("{value:?} is not on or off")),
    }
}

#[cfg(test)]
mod tests {
    use super::on_off;

    #[test]
    fn on_and_off_in_their_spellings() {
        for on in ["on", "ON", "true", "1", "yes"] {
            assert_eq!(on_off(on), Ok(true), "{on}");
        }
        for off in ["off", "Off", "false", "0", "no"] {
            assert_eq!(on_off(off), Ok(false), "{off}");
        }
        assert!(on_off("sometimes").is_err());
    }
}
