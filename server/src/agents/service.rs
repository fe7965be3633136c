//! `AgentService`: authenticate, then call [`Hosting`]. REST and MCP arrive here too.

use std::sync::Arc;

use futures::StreamExt as _;
use roost_kit::streams::RpcStream;
use roost_proto::v1::{
    ConfigureRequest, ConfigureResponse, DeliverTelegramUpdateRequest, DeliverTelegramUpdateResponse, DestroyRequest,
    DestroyResponse, GetActivityRequest, GetActivityResponse, GetChannelRequest, GetChannelResponse,
    GetInstanceRequest, GetInstanceResponse, ListFilesRequest, ListFilesResponse, ListInstancesRequest,
    ListInstancesResponse, ListRuntimesRequest, ListRuntimesResponse, PairChannelRequest, PairChannelResponse,
    PauseRequest, PauseResponse, ProvisionRequest, ProvisionResponse, ReadFileRequest, ReadFileResponse, ResumeRequest,
    ResumeResponse, SendMessageRequest, SendMessageResponse, StreamMessageRequest, StreamMessageResponse,
    agent_service_server::AgentService,
};
use tonic::{Request, Response, Status};

use super::Hosting;
use crate::{
    auth::Authenticator,
    cluster::peers::{SOURCE_METADATA, serve_forwarded},
};

/// The agent service over the hosted-agent core.
pub struct AgentCore {
    hosting: Arc<Hosting>,
    auth: Arc<Authenticator>,
}

impl AgentCore {
    /// The service for `hosting`, authenticating callers with `auth`.
    pub fn new(hosting: Arc<Hosting>, auth: Arc<Authenticator>) -> Self {
        Self { hosting, auth }
    }

    /// Serves a call: authenticates its caller (or, for a call another replica forwarded
    /// with the cluster's internal token, takes the account it names), then runs `call` with
    /// the hosting core, the account, where the message came from, and the request. A
    /// forwarded call runs as one (`crate::cluster::peers`): it is never forwarded again.
    async fn serve<T, R, F, Fut>(&self, req: Request<T>, call: F) -> Result<Response<R>, Status>
    where
        F: FnOnce(Arc<Hosting>, String, &'static str, T) -> Fut,
        Fut: Future<Output = crate::Result<R>>,
    {
        let hosting = self.hosting.clone();
        if let Some(account) = self.hosting.peers().forwarded_account(req.metadata()) {
            let source = source(&req, true);
            let answer = serve_forwarded(call(hosting, account, source, req.into_inner())).await?;
            return Ok(Response::new(answer));
        }
        let account = self.auth.account_of(&req).await?;
        let source = source(&req, false);
        Ok(Response::new(call(hosting, account, source, req.into_inner()).await?))
    }
}

/// Where a message came from: what an adapter said, else a gRPC client. A forwarded call
/// keeps the source of the replica that took it first (a cron, a Telegram chat).
fn source<T>(req: &Request<T>, forwarded: bool) -> &'static str {
    match req.metadata().get(SOURCE_METADATA).and_then(|v| v.to_str().ok()) {
        Some("api") => "api",
        Some("mcp") => "mcp",
        Some("web") => "web",
        Some("cron") if forwarded => "cron",
        Some("telegram") if forwarded => "telegram",
        _ => "grpc",
    }
}

#[tonic::async_trait]
impl AgentService for AgentCore {
    async fn list_runtimes(
        &self,
        _req: Request<ListRuntimesRequest>,
    ) -> Result<Response<ListRuntimesResponse>, Status> {
        let runtimes = self.hosting.catalogue().all().iter().map(|r| r.to_proto()).collect();
        Ok(Response::new(ListRuntimesResponse { runtimes }))
    }

    async fn provision(&self, req: Request<ProvisionRequest>) -> Result<Response<ProvisionResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.provision(&account, req).await }).await
    }

    async fn list_instances(
        &self,
        req: Request<ListInstancesRequest>,
    ) -> Result<Response<ListInstancesResponse>, Status> {
        self.serve(req, |h, account, _, _| async move {
            Ok(ListInstancesResponse { instances: h.list_instances(&account).await? })
        })
        .await
    }

    async fn get_instance(&self, req: Request<GetInstanceRequest>) -> Result<Response<GetInstanceResponse>, Status> {
        self.serve(req, |h, account, _, req| async move {
            Ok(GetInstanceResponse { instance: Some(h.get_instance(&account, &req.instance_id).await?) })
        })
        .await
    }

    async fn get_activity(&self, req: Request<GetActivityRequest>) -> Result<Response<GetActivityResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.activity(&account, &req.instance_id, req.limit).await })
            .await
    }

    async fn send_message(&self, req: Request<SendMessageRequest>) -> Result<Response<SendMessageResponse>, Status> {
        self.serve(req, |h, account, source, req| async move { h.send_message(&account, req, source).await }).await
    }

    type StreamMessageStream = RpcStream<StreamMessageResponse>;

    async fn stream_message(
        &self,
        req: Request<StreamMessageRequest>,
    ) -> Result<Response<Self::StreamMessageStream>, Status> {
        let stream = self
            .serve(req, |h, account, source, req| async move { h.stream_message(&account, req, source).await })
            .await?
            .into_inner();
        Ok(Response::new(stream.map(|item| item.map_err(Status::from)).boxed()))
    }

    async fn configure(&self, req: Request<ConfigureRequest>) -> Result<Response<ConfigureResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.configure(&account, req).await }).await
    }

    async fn pause(&self, req: Request<PauseRequest>) -> Result<Response<PauseResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.pause(&account, &req.instance_id).await }).await
    }

    async fn resume(&self, req: Request<ResumeRequest>) -> Result<Response<ResumeResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.resume(&account, &req.instance_id).await }).await
    }

    async fn destroy(&self, req: Request<DestroyRequest>) -> Result<Response<DestroyResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.destroy(&account, &req.instance_id).await }).await
    }

    async fn get_channel(&self, req: Request<GetChannelRequest>) -> Result<Response<GetChannelResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.get_channel(&account, &req.instance_id).await }).await
    }

    async fn pair_channel(&self, req: Request<PairChannelRequest>) -> Result<Response<PairChannelResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.pair_channel(&account, &req.instance_id, &req.code).await })
            .await
    }

    async fn list_files(&self, req: Request<ListFilesRequest>) -> Result<Response<ListFilesResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.list_files(&account, req).await }).await
    }

    async fn read_file(&self, req: Request<ReadFileRequest>) -> Result<Response<ReadFileResponse>, Status> {
        self.serve(req, |h, account, _, req| async move { h.read_file(&account, req).await }).await
    }

    /// No key: Telegram authenticates a delivery with the webhook's secret token.
    async fn deliver_telegram_update(
        &self,
        req: Request<DeliverTelegramUpdateRequest>,
    ) -> Result<Response<DeliverTelegramUpdateResponse>, Status> {
        let forwarded = self.hosting.peers().forwarded_account(req.metadata()).is_some();
        let req = req.into_inner();
        let delivery = self.hosting.deliver_telegram_update(&req.instance_id, &req.secret_token, &req.payload);
        let answer = if forwarded { serve_forwarded(delivery).await? } else { delivery.await? };
        Ok(Response::new(answer))
    }
}
