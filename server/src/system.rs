//! `SystemService`: health, version and metrics, for `/healthz`, `/api/local/health`,
//! `POST /api/version`, `GET /metrics` and gRPC alike.

use std::{path::PathBuf, sync::Arc, time::Instant};

use roost_proto::v1::{
    DatabaseHealth, GetHealthRequest, GetHealthResponse, GetMetricsRequest, GetMetricsResponse, GetVersionRequest,
    GetVersionResponse, HealthStatus, StoreHealth, system_service_server::SystemService,
};
use tonic::{Request, Response, Status};

use crate::{
    build_info::{BUILD, CONTRACTS},
    metrics::Metrics,
    store::Store,
    time::{now_ms, timestamp_ms},
};

/// The system service over a store.
pub struct SystemCore {
    store: Store,
    data_dir: PathBuf,
    started: Instant,
    started_at_ms: i64,
    metrics: Arc<Metrics>,
}

impl SystemCore {
    /// A system service whose uptime starts now, scraping `metrics`.
    pub fn new(store: Store, data_dir: PathBuf, metrics: Arc<Metrics>) -> Self {
        Self { store, data_dir, started: Instant::now(), started_at_ms: now_ms(), metrics }
    }
}

#[tonic::async_trait]
impl SystemService for SystemCore {
    async fn get_health(&self, _req: Request<GetHealthRequest>) -> Result<Response<GetHealthResponse>, Status> {
        let database = match self.store.ping().await {
            Ok(latency) => DatabaseHealth {
                backend: self.store.kind().name().to_owned(),
                reachable: true,
                latency_ms: latency.as_secs_f64() * 1000.0,
                error: String::new(),
                schema_version: self.store.schema_version().await.unwrap_or_default(),
            },
            Err(err) => DatabaseHealth {
                backend: self.store.kind().name().to_owned(),
                reachable: false,
                error: err.to_string(),
                ..Default::default()
            },
        };
        let status = if database.reachable { HealthStatus::Ok } else { HealthStatus::Degraded };
        let store = StoreHealth {
            data_dir: self.data_dir.display().to_string(),
            location: self.store.location().to_owned(),
            // A size we cannot read is not worth failing a health check over.
            size_bytes: self.store.size_bytes().await.unwrap_or_default(),
        };
        Ok(Response::new(GetHealthResponse {
            status: status as i32,
            version: BUILD.version.to_owned(),
            started_at: Some(timestamp_ms(self.started_at_ms)),
            uptime_secs: self.started.elapsed().as_secs() as i64,
            database: Some(database),
            store: Some(store),
        }))
    }

    async fn get_version(&self, _req: Request<GetVersionRequest>) -> Result<Response<GetVersionResponse>, Status> {
        Ok(Response::new(GetVersionResponse {
            version: BUILD.version.to_owned(),
            git_commit: BUILD.git_commit.to_owned(),
            build_date: Some(timestamp_ms(BUILD.built_unix * 1000)),
            contracts: CONTRACTS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            target: BUILD.target.to_owned(),
        }))
    }

    async fn get_metrics(&self, req: Request<GetMetricsRequest>) -> Result<Response<GetMetricsResponse>, Status> {
        let (content_type, text) = self.metrics.scrape(req.into_inner().format()).await;
        Ok(Response::new(GetMetricsResponse { content_type: content_type.to_owned(), text }))
    }
}
