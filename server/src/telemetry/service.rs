//! The gRPC face of ingest: OpenTelemetry's collector services (traces, logs, metrics) and
//! roost's `IngestService`. The OTLP/HTTP and REST routes of the HTTP adapters (`gateway/`) call
//! these.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::{
    logs::v1::{
        ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse, logs_service_server::LogsService,
    },
    metrics::v1::{
        ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
        metrics_service_server::MetricsService,
    },
    trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::TraceService,
    },
};
use roost_proto::v1::{
    AddRunEventsRequest, AddRunEventsResponse, CreateRunRequest, CreateRunResponse, EndRunRequest, EndRunResponse,
    GetRunRequest, GetRunResponse, HeartbeatRequest, HeartbeatResponse, PushBatchRequest, PushBatchResponse,
    ingest_service_server::IngestService,
};
use tonic::{Request, Response, Status};

use roost_kit::agent_tokens::AGENT_TOKEN_PREFIX;
use roost_proto::ApiError;

use super::Telemetry;
use crate::{
    auth::{Authenticator, bearer_token},
    callers::tokens::{AgentIdentity, AgentTokens},
};

/// The OTLP collector services over the ingest core.
///
/// An export whose bearer is an agent token (`crate::callers::tokens`) comes from that
/// hosted agent's runtime, and all of it (traces, logs and metrics) is the agent's: roost
/// sets its session, conversation, instance and account from the token, whatever the body
/// names, attributes its spans to the agent, and counts none of the usage it reports about
/// itself (see [`super::agent_claims`]). A token that is no live agent's is 401. Anything
/// else was already let in by the access policy (a dashboard caller) and is attributed to
/// no agent, whatever it says about itself.
pub struct OtlpCore {
    telemetry: Arc<Telemetry>,
    tokens: AgentTokens,
}

impl OtlpCore {
    /// The collector services for `telemetry`, knowing the runtimes' `tokens`.
    pub fn new(telemetry: Arc<Telemetry>, tokens: AgentTokens) -> Self {
        Self { telemetry, tokens }
    }

    /// The agent an export comes from, by its agent token; `None` for other callers.
    fn sender<T>(&self, req: &Request<T>) -> Result<Option<Arc<AgentIdentity>>, Status> {
        match bearer_token(req).filter(|t| t.starts_with(AGENT_TOKEN_PREFIX)) {
            None => Ok(None),
            Some(token) => match self.tokens.identity(token) {
                Some(agent) => Ok(Some(agent)),
                None => {
                    Err(ApiError::unauthenticated("this agent token is not (or no longer) a running agent's").into())
                }
            },
        }
    }
}

#[tonic::async_trait]
impl TraceService for OtlpCore {
    async fn export(
        &self,
        req: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let stored = match self.sender(&req)? {
            Some(agent) => self.telemetry.export_agent_traces(req.into_inner(), &agent).await?,
            None => self.telemetry.export_traces(req.into_inner(), None).await?,
        };
        let partial_success = stored
            .partial_success()
            .map(|(rejected_spans, error_message)| ExportTracePartialSuccess { rejected_spans, error_message });
        Ok(Response::new(ExportTraceServiceResponse { partial_success }))
    }
}

#[tonic::async_trait]
impl LogsService for OtlpCore {
    async fn export(
        &self,
        req: Request<ExportLogsServiceRequest>,
    ) -> Result<Response<ExportLogsServiceResponse>, Status> {
        let stored = match self.sender(&req)? {
            Some(agent) => self.telemetry.export_agent_logs(req.into_inner(), &agent).await?,
            None => self.telemetry.export_logs(req.into_inner()).await?,
        };
        let partial_success = stored.partial_success().map(|(rejected_log_records, error_message)| {
            ExportLogsPartialSuccess { rejected_log_records, error_message }
        });
        Ok(Response::new(ExportLogsServiceResponse { partial_success }))
    }
}

#[tonic::async_trait]
impl MetricsService for OtlpCore {
    async fn export(
        &self,
        req: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let stored = match self.sender(&req)? {
            Some(agent) => self.telemetry.export_agent_metrics(req.into_inner(), &agent).await?,
            None => self.telemetry.export_metrics(req.into_inner()).await?,
        };
        let partial_success = stored.partial_success().map(|(rejected_data_points, error_message)| {
            ExportMetricsPartialSuccess { rejected_data_points, error_message }
        });
        Ok(Response::new(ExportMetricsServiceResponse { partial_success }))
    }
}

/// `IngestService` over the ingest core.
pub struct IngestCore {
    telemetry: Arc<Telemetry>,
    auth: Arc<Authenticator>,
}

impl IngestCore {
    /// The ingest service for `telemetry`; nodes authenticate with account keys.
    pub fn new(telemetry: Arc<Telemetry>, auth: Arc<Authenticator>) -> Self {
        Self { telemetry, auth }
    }
}

#[tonic::async_trait]
impl IngestService for IngestCore {
    async fn create_run(&self, req: Request<CreateRunRequest>) -> Result<Response<CreateRunResponse>, Status> {
        let run_id = self.telemetry.create_run(req.into_inner()).await?;
        Ok(Response::new(CreateRunResponse { ok: true, run_id }))
    }

    async fn add_run_events(
        &self,
        req: Request<AddRunEventsRequest>,
    ) -> Result<Response<AddRunEventsResponse>, Status> {
        Ok(Response::new(self.telemetry.add_events(req.into_inner()).await?))
    }

    async fn end_run(&self, req: Request<EndRunRequest>) -> Result<Response<EndRunResponse>, Status> {
        Ok(Response::new(self.telemetry.end_run(req.into_inner()).await?))
    }

    async fn get_run(&self, req: Request<GetRunRequest>) -> Result<Response<GetRunResponse>, Status> {
        let run = self.telemetry.run(&req.get_ref().run_id).await?;
        Ok(Response::new(GetRunResponse { run: Some(run.into()) }))
    }

    async fn heartbeat(&self, req: Request<HeartbeatRequest>) -> Result<Response<HeartbeatResponse>, Status> {
        let account = self.auth.account_of(&req).await?;
        Ok(Response::new(self.telemetry.heartbeat(&account, req.into_inner()).await?))
    }

    async fn push_batch(&self, req: Request<PushBatchRequest>) -> Result<Response<PushBatchResponse>, Status> {
        let account = self.auth.account_of(&req).await?;
        Ok(Response::new(self.telemetry.push_batch(&account, req.into_inner()).await?))
    }
}
