//! `AgentService`: authenticate, then call [`Hosting`]. REST and MCP arrive here too.

use std::sync::Arc;

use roost_proto::v1::{
    ConfigureRequest, ConfigureResponse, DeliverTelegramUpdateRequest, DeliverTelegramUpdateResponse, DestroyRequest,
    DestroyResponse, GetActivityRequest, GetActivityResponse, GetChannelRequest, GetChannelResponse,
    GetInstanceRequest, GetInstanceResponse, ListInstancesRequest, ListInstancesResponse, ListRuntimesRequest,
    ListRuntimesResponse, PairChannelRequest, PairChannelResponse, PauseRequest, PauseResponse, ProvisionRequest,
    ProvisionResponse, ResumeRequest, ResumeResponse, SendMessageRequest, SendMessageResponse,
    agent_service_server::AgentService,
};
use tonic::{Request, Response, Status};

use super::Hosting;
use crate::auth::Authenticator;

/// Metadata an adapter sets to say where a message came from ("api" for REST, "mcp", "web"
/// for the web app's chat box).
pub const SOURCE_METADATA: &str = "x-roost-source";

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

    async fn caller<T>(&self, req: &Request<T>) -> Result<String, Status> {
        Ok(self.auth.account_of(req).await?)
    }
}

/// Where a message came from: what an adapter said, else a gRPC client.
fn source<T>(req: &Request<T>) -> &'static str {
    match req.metadata().get(SOURCE_METADATA).and_then(|v| v.to_str().ok()) {
        Some("api") => "api",
        Some("mcp") => "mcp",
        Some("web") => "web",
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
        let account = self.caller(&req).await?;
        Ok(Response::new(self.hosting.provision(&account, req.into_inner()).await?))
    }

    async fn list_instances(
        &self,
        req: Request<ListInstancesRequest>,
    ) -> Result<Response<ListInstancesResponse>, Status> {
        let account = self.caller(&req).await?;
        Ok(Response::new(ListInstancesResponse { instances: self.hosting.list_instances(&account).await? }))
    }

    async fn get_instance(&self, req: Request<GetInstanceRequest>) -> Result<Response<GetInstanceResponse>, Status> {
        let account = self.caller(&req).await?;
        let instance = self.hosting.get_instance(&account, &req.get_ref().instance_id).await?;
        Ok(Response::new(GetInstanceResponse { instance: Some(instance) }))
    }

    async fn get_activity(&self, req: Request<GetActivityRequest>) -> Result<Response<GetActivityResponse>, Status> {
        let account = self.caller(&req).await?;
        let req = req.get_ref();
        Ok(Response::new(self.hosting.activity(&account, &req.instance_id, req.limit).await?))
    }

    async fn send_message(&self, req: Request<SendMessageRequest>) -> Result<Response<SendMessageResponse>, Status> {
        let account = self.caller(&req).await?;
        let source = source(&req);
        Ok(Response::new(self.hosting.send_message(&account, req.into_inner(), source).await?))
    }

    async fn configure(&self, req: Request<ConfigureRequest>) -> Result<Response<ConfigureResponse>, Status> {
        let account = self.caller(&req).await?;
        Ok(Response::new(self.hosting.configure(&account, req.into_inner()).await?))
    }

    async fn pause(&self, req: Request<PauseRequest>) -> Result<Response<PauseResponse>, Status> {
        let account = self.caller(&req).await?;
        Ok(Response::new(self.hosting.pause(&account, &req.get_ref().instance_id).await?))
    }

    async fn resume(&self, req: Request<ResumeRequest>) -> Result<Response<ResumeResponse>, Status> {
        let account = self.caller(&req).await?;
        Ok(Response::new(self.hosting.resume(&account, &req.get_ref().instance_id).await?))
    }

    async fn destroy(&self, req: Request<DestroyRequest>) -> Result<Response<DestroyResponse>, Status> {
        let account = self.caller(&req).await?;
        Ok(Response::new(self.hosting.destroy(&account, &req.get_ref().instance_id).await?))
    }

    async fn get_channel(&self, req: Request<GetChannelRequest>) -> Result<Response<GetChannelResponse>, Status> {
        let account = self.caller(&req).await?;
        Ok(Response::new(self.hosting.get_channel(&account, &req.get_ref().instance_id).await?))
    }

    async fn pair_channel(&self, req: Request<PairChannelRequest>) -> Result<Response<PairChannelResponse>, Status> {
        let account = self.caller(&req).await?;
        let req = req.get_ref();
        Ok(Response::new(self.hosting.pair_channel(&account, &req.instance_id, &req.code).await?))
    }

    /// No key: Telegram authenticates a delivery with the webhook's secret token.
    async fn deliver_telegram_update(
        &self,
        req: Request<DeliverTelegramUpdateRequest>,
    ) -> Result<Response<DeliverTelegramUpdateResponse>, Status> {
        let req = req.get_ref();
        Ok(Response::new(
            self.hosting.deliver_telegram_update(&req.instance_id, &req.secret_token, &req.payload).await?,
        ))
    }
}
