//! `roost serve`: one listener for gRPC, gRPC-web and HTTP.

use std::{net::SocketAddr, sync::Arc};

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;
use tracing::info;

use crate::{
    ServeConfig,
    accounts::service::AccountCore,
    agents::{Hosting, service::AgentCore},
    auth::Authenticator,
    billing::renewal,
    billing::{service::BillingCore, stripe::StripeClient},
    cluster::{
        Replica,
        leader::{self, Leadership},
        notices,
        peers::Peers,
    },
    control::ControlCore,
    evaluations::{Evaluators, service::EvaluatorCore},
    experiments::{Experiments, service::ExperimentCore},
    features::{
        alerts::Alerts,
        crons::Crons,
        guard::Guard,
        health::{self, HealthChecks},
        service::{FeatureCore, FeatureParts},
        skills::Skills,
        workers::Workers,
    },
    grpc::{self, Services},
    metrics::{Metrics, Sources as MetricSources},
    node::pusher,
    query::QueryCore,
    runtimes::process::OtlpExport,
    secrets,
    store::Store,
    streams::{Live, own_logs, service::StreamCore},
    system::SystemCore,
    telemetry::{
        Telemetry, retention,
        service::{IngestCore, OtlpCore},
        turns::TurnEvents,
    },
    update::{Updater, service::UpdateCore},
    webapp::WebAppCore,
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
    // Held while serving, so `roost restore` cannot replace the store underneath.
    let _data_dir_lock = crate::store::backup::DataDirLock::shared(&config.data_dir)
        .with_context(|| format!("locking the data directory {}", config.data_dir.display()))?;
    let store = Store::open(&config.database_url, &config.store)
        .await
        .with_context(|| format!("opening the store at {}", config.database_url))?;
    let link_base = crate::webapp::service::link_base(config.webapp.public_url.as_deref(), addr);
    store.meta_set(crate::webapp::service::LINK_BASE_KEY, &link_base).await.context("recording the link base")?;
    let secret_key = secrets::unlock(&store, config.secret_key.clone(), &config.data_dir)
        .await
        .context("unlocking the secret key")?;

    let live = Live::new(config.streams);
    own_logs::attach(&live.logs);
    let telemetry = Telemetry::new(
        store.clone(),
        config.hosting.prices.clone(),
        config.telemetry,
        config.push.is_some(),
        live.clone(),
    );
    let turn_events = TurnEvents::new(telemetry.clone());
    // Process runtimes send their telemetry back here, each with its own agent token.
    let mut access = config.access.clone();
    let agent_tokens = crate::callers::tokens::AgentTokens::default();
    access.agent_tokens = Some(Arc::new(agent_tokens.clone()));
    let advertised = config.advertise_addr.clone().unwrap_or_else(|| reachable(addr).to_string());
    // Other replicas call this one by its advertised name.
    access.hosts.add(&advertised);
    let access = Arc::new(access);
    let otlp = OtlpExport { endpoint: format!("http://{}", reachable(addr)), tokens: agent_tokens.clone() };
    let replica = Replica::start(&config.data_dir, advertised, config.lease_ttl, config.agent_capacity)
        .context("recording the replica id in the data directory")?;
    let peers = Peers::load(&store).await.context("reading the cluster's internal token")?;
    // Hosted agents' model calls (`/llm`): an adapter of another protocol (OpenAI's,
    // Anthropic's), not of roost's API, so it is served beside the HTTP adapters' routes. The
    // assistant runtime calls it in-process.
    let models = crate::llm::ModelGateway::new(
        config.hosting.models.clone(),
        agent_tokens.clone(),
        store.clone(),
        config.hosting.prices.clone(),
        telemetry.clone(),
        &replica.id,
    )
    .context("building the model gateway's HTTP client")?;
    models.forget_predecessor(&replica.predecessor).await.context("releasing the last run's credit windows")?;
    let replica_id = replica.id.clone();
    let hosting = Hosting::new(
        store.clone(),
        config.hosting.clone(),
        &config.data_dir,
        otlp,
        models.clone(),
        Some(turn_events),
        secret_key,
        replica,
        peers,
    )
    .context("preparing the runtimes directory")?;
    hosting.restore().await.context("restoring hosted agents")?;
    let workers = CancellationToken::new();
    // Conversations stored before search existed are indexed in the background, and only
    // while content capture is on (with it off, nothing is indexed).
    if telemetry.limits.capture_content {
        let store = store.clone();
        once_in_background(workers.clone(), "indexing earlier messages for search", async move {
            crate::telemetry::search::backfill(&store).await
        });
    }
    // Traces stored before a session was the trace's are attributed again in the background.
    {
        let store = store.clone();
        once_in_background(workers.clone(), "putting earlier traces in their sessions", async move {
            crate::telemetry::trace_sessions::backfill(&store).await
        });
    }
    // On PostgreSQL, one connection hears the other replicas: their stored rows for the
    // live streams, their lease releases for the ownership loop.
    let freed = Arc::new(tokio::sync::Notify::new());
    let notices_task = store
        .postgres()
        .map(|pool| tokio::spawn(notices::run(pool.clone(), live.clone(), freed.clone(), workers.clone())));
    let ownership = tokio::spawn(hosting.clone().run_ownership(freed, workers.clone()));
    // Work that must happen once per cluster runs on the replica holding the leader lease.
    let leadership = Leadership::new(store.clone(), leader::WORKERS, replica_id, config.lease_ttl);
    let leader_task = tokio::spawn(leadership.clone().run(workers.clone()));
    // Renewals run on every replica, each for the agents it owns: a suspension stops the
    // machine, which only the owner runs, and each agent has one owner, so each renewal is
    // still made once (the renewal's transaction re-checks that it is due, too).
    let renewals = tokio::spawn(renewal::run(hosting.clone(), workers.clone()));
    let retention = leadership.lead(workers.clone(), {
        let (store, retention) = (store.clone(), config.retention.clone());
        move |term| retention::run(store.clone(), retention.clone(), term)
    });
    // The update worker polls only when an index is configured (tests run without one).
    let updater = Updater::new(config.update.clone(), config.data_dir.clone(), shutdown.clone());
    let update_task = (!config.update.index_url.is_empty()).then(|| tokio::spawn(updater.clone().run(workers.clone())));
    let pusher = config
        .push
        .clone()
        .map(|push| tokio::spawn(pusher::run(store.clone(), push, Some(updater.clone()), workers.clone())));
    let crons = Crons::new(store.clone(), hosting.clone());
    let crons_task = leadership.lead(workers.clone(), {
        let crons = crons.clone();
        move |term| crons.clone().run(term)
    });
    let alerts = Alerts::new(store.clone());
    let alerts_task = leadership.lead(workers.clone(), {
        let (alerts, every) = (alerts.clone(), config.alerts_every);
        move |term| alerts.clone().run(every, term)
    });
    let guard = Guard::new(store.clone(), hosting.clone());
    let guard_task = leadership.lead(workers.clone(), {
        let (guard, every) = (guard.clone(), config.guard_every);
        move |term| guard.clone().run(every, term)
    });
    // Scores are recorded by the core services, the pages and the evaluators alike.
    let scores = Arc::new(crate::scores::Scores::new(store.clone(), telemetry.clone()));
    let evaluators = Arc::new(Evaluators::new(store.clone(), models.clone(), scores.clone(), telemetry.clone()));
    let evaluations_task = leadership.lead(workers.clone(), {
        let (evaluators, every) = (evaluators.clone(), config.evaluations_every);
        move |term| evaluators.clone().run(every, term)
    });
    // Experiments run their items as turns through the hosting core, on the leader.
    let experiments = Arc::new(Experiments::new(store.clone(), hosting.clone(), evaluators.clone(), scores.clone()));
    let experiments_task = leadership.lead(workers.clone(), {
        let experiments = experiments.clone();
        move |term| experiments.clone().run(std::time::Duration::from_secs(2), term)
    });
    let checks = HealthChecks {
        store: store.clone(),
        telemetry: telemetry.clone(),
        data_dir: config.data_dir.clone(),
        workers: Arc::new(Workers::default()),
        leadership: leadership.clone(),
        sandbox: hosting.sandbox().clone(),
    };
    let health_task = tokio::spawn(health::run(checks.clone(), live.clone(), workers.clone()));
    let usage = Arc::new(roost_kit::usage::UsageCounters::default());
    let skills = Skills::new(store.clone(), usage.clone(), roost_gateway::skill_catalogue());
    let skills_task = tokio::spawn(skills.clone().run(workers.clone()));
    checks.workers.add("leader lease", leader_task.abort_handle());
    checks.workers.add("agent leases", ownership.abort_handle());
    if let Some(task) = &notices_task {
        checks.workers.add("replica notices", task.abort_handle());
    }
    checks.workers.add("billing renewal", renewals.abort_handle());
    checks.workers.add("retention", retention.abort_handle());
    checks.workers.add("health", health_task.abort_handle());
    checks.workers.add("crons", crons_task.abort_handle());
    checks.workers.add("alerts", alerts_task.abort_handle());
    checks.workers.add("guard", guard_task.abort_handle());
    checks.workers.add("evaluators", evaluations_task.abort_handle());
    checks.workers.add("experiments", experiments_task.abort_handle());
    checks.workers.add("skill usage", skills_task.abort_handle());
    if let Some(task) = &update_task {
        checks.workers.add("self-update", task.abort_handle());
    }
    if let Some(pusher) = &pusher {
        checks.workers.add("upstream push", pusher.abort_handle());
    }

    let requests = roost_kit::request_metrics::RequestMetrics::default();
    let metrics = Arc::new(Metrics::new(
        MetricSources {
            store: store.clone(),
            telemetry: telemetry.clone(),
            hosting: hosting.clone(),
            live: live.clone(),
            updater: updater.clone(),
        },
        &requests,
    ));
    let auth = Arc::new(Authenticator::new(store.clone(), &config.data_dir));
    let failures = Arc::new(crate::features::failures::HandlerFailures::default());
    let services = Services {
        system: Arc::new(SystemCore::new(store.clone(), config.data_dir.clone(), metrics)),
        agents: Arc::new(AgentCore::new(hosting.clone(), auth.clone(), scores.clone())),
        accounts: Arc::new(AccountCore::new(auth.clone())),
        otlp: Arc::new(OtlpCore::new(telemetry.clone(), agent_tokens.clone())),
        ingest: Arc::new(IngestCore::new(telemetry.clone(), auth.clone())),
        query: Arc::new(QueryCore::new(store.clone(), failures.clone())),
        streams: Arc::new(StreamCore::new(live.clone())),
        features: Arc::new(FeatureCore::new(
            store.clone(),
            FeatureParts {
                health: checks,
                crons,
                alerts,
                guard,
                skills,
                updater: updater.clone(),
                failures,
                leadership: leadership.clone(),
            },
        )),
        control: Arc::new(ControlCore::new(store.clone(), hosting.clone(), shutdown.clone())),
        updates: Arc::new(UpdateCore::new(updater.clone())),
        webapp: Arc::new(WebAppCore::new(auth.clone(), config.webapp.clone())),
        billing: Arc::new(BillingCore::new(auth.clone(), StripeClient::new(config.stripe.clone()))),
        scores: Arc::new(crate::scores::service::ScoreCore::new(scores.clone())),
        evaluators: Arc::new(EvaluatorCore::new(evaluators.clone())),
        experiments: Arc::new(ExperimentCore::new(experiments.clone(), auth.clone())),
    };
    let ingest_budget = roost_kit::budget::IngestBudget::new(config.gateway.max_ingest_inflight_bytes);
    let core = roost_gateway::Core {
        system: services.system.clone(),
        agents: services.agents.clone(),
        accounts: services.accounts.clone(),
        traces: services.otlp.clone(),
        metrics: services.otlp.clone(),
        logs: services.otlp.clone(),
        ingest: services.ingest.clone(),
        query: services.query.clone(),
        streams: services.streams.clone(),
        features: services.features.clone(),
        control: services.control.clone(),
        updates: services.updates.clone(),
        webapp: services.webapp.clone(),
        billing: services.billing.clone(),
        scores: services.scores.clone(),
        evaluators: services.evaluators.clone(),
        experiments: services.experiments.clone(),
        options: Arc::new(config.gateway.clone()),
        access: access.clone(),
        mcp: roost_gateway::mcp::McpState::new(shutdown.clone()),
        usage,
        token_brake: Default::default(),
        ingest_budget: ingest_budget.clone(),
    };
    let (router, _health) =
        grpc::add_services(roost_gateway::router(core).merge(models.router()), &services, &ingest_budget).await?;
    // Outside the access check, so refused requests are counted too.
    let app = router
        .layer(axum::middleware::from_fn_with_state(access, roost_gateway::access_layer::enforce))
        .layer(axum::middleware::from_fn_with_state(requests, roost_kit::request_metrics::record))
        .layer(TraceLayer::new_for_http());

    // Sandboxed runtimes reach the model gateway and OTLP ingest through a socket of their
    // own (one per agent), never roost's listener.
    hosting.sandbox().serve_gateway(app.clone());
    let mut listeners = vec![listener];
    for extra in &config.extra_addrs {
        let extra = TcpListener::bind(extra).await.with_context(|| format!("listening on {extra}"))?;
        listeners.push(extra);
    }
    let mut servers = tokio::task::JoinSet::new();
    for listener in listeners {
        let addr = listener.local_addr().context("reading a listener's address")?;
        servers.spawn(crate::connections::serve(
            listener,
            app.clone(),
            config.connections.clone(),
            shutdown.clone(),
            config.shutdown_grace,
        ));
        info!(%addr, "listening");
    }
    // Each listener stops accepting at shutdown and closes its connections within the grace.
    let served = async {
        while let Some(result) = servers.join_next().await {
            result.context("server task")?;
        }
        anyhow::Ok(())
    }
    .await;
    servers.abort_all();
    workers.cancel();
    let _ = renewals.await;
    let _ = ownership.await;
    if let Some(task) = notices_task {
        let _ = task.await;
    }
    let _ = leader_task.await;
    let _ = retention.await;
    let _ = health_task.await;
    let _ = crons_task.await;
    let _ = alerts_task.await;
    let _ = guard_task.await;
    let _ = evaluations_task.await;
    let _ = experiments_task.await;
    let _ = skills_task.await;
    if let Some(task) = update_task {
        let _ = task.await;
    }
    if let Some(pusher) = pusher {
        let _ = pusher.await;
    }
    hosting.shutdown().await;
    hosting.sandbox().shutdown();
    // Calls answered are stored and charged before the store closes.
    models.flush().await;
    telemetry.shutdown().await;
    store.close().await;
    served?;
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

/// Runs a resumable pass over what an earlier roost stored (`what` it does), until done or
/// `stop`; says how many items it changed, or that it failed (the next start resumes it).
fn once_in_background(
    stop: CancellationToken,
    what: &'static str,
    pass: impl std::future::Future<Output = crate::Result<u64>> + Send + 'static,
) {
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            done = pass => match done {
                Ok(0) => {}
                Ok(items) => tracing::info!(items, "{what}: done"),
                Err(err) => tracing::warn!(error = %err, "{what} failed; the next start resumes it"),
            },
        }
    });
}
