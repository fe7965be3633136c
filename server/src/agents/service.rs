//! `AgentService`: authenticate, then call [`Hosting`]. REST and MCP arrive here too.
//!
//! `RateTurn` is the one call that is not [`Hosting`]'s: an account's judgement of its
//! agent's reply is a score ([`Scores`]), kept with the other judgements of observed work
//! so the dashboard and q/1 read ratings, evaluators' and API scores alike.

use std::sync::Arc;

use futures::StreamExt as _;
use roost_kit::streams::RpcStream;
use roost_proto::v1::{
    ConfigureRequest, ConfigureResponse, DeliverTelegramUpdateRequest, DeliverTelegramUpdateResponse, DestroyRequest,
    DestroyResponse, GetActivityRequest, GetActivityResponse, GetChannelRequest, GetChannelResponse,
    GetInstanceRequest, GetInstanceResponse, ListFilesRequest, ListFilesResponse, ListInstancesRequest,
    ListInstancesResponse, ListRuntimesRequest, ListRuntimesResponse, PairChannelRequest, PairChannelResponse,
    PauseRequest, PauseResponse, ProvisionRequest, ProvisionResponse, RateTurnRequest, RateTurnResponse,
    ReadFileRequest, ReadFileResponse, ResumeRequest, ResumeResponse, Score, SendMessageRequest, SendMessageResponse,
    StreamMessageRequest, StreamMessageResponse, agent_service_server::AgentService,
};
use roost_proto::{ApiError, v1::CreateScoresRequest};
use tonic::{Request, Response, Status};

use super::{Hosting, limits};
use crate::{
    auth::Authenticator,
    cluster::peers::{SOURCE_METADATA, TURN_METADATA, serve_forwarded},
    scores::{Giver, Scores},
    store::on_reader,
};

/// The agent service over the hosted-agent core.
pub struct AgentCore {
    hosting: Arc<Hosting>,
    auth: Arc<Authenticator>,
    scores: Arc<Scores>,
}

impl AgentCore {
    /// The service for `hosting`, authenticating callers with `auth`; ratings of turns are
    /// recorded in `scores`.
    pub fn new(hosting: Arc<Hosting>, auth: Arc<Authenticator>, scores: Arc<Scores>) -> Self {
        Self { hosting, auth, scores }
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

/// The score id of an account's rating of a turn: one per turn and name, so rating again
/// (changing a thumbs down to up, or 3 stars to 4) replaces the rating rather than adding a
/// second opinion from the same person. The web app's chat finds the current rating by it.
pub fn rating_id(turn_id: &str, name: &str) -> String {
    format!("rating_{turn_id}_{name}")
}

/// Records `account`'s rating of a turn of its agent `req.instance_id`: `thumbs` for
/// true/false, `rating` for a number from 1 to 5; anything else is refused rather than
/// stored as a categorical score nothing would read as a rating.
async fn rate_turn(hosting: &Hosting, scores: &Scores, account: &str, req: RateTurnRequest) -> crate::Result<Score> {
    let instance_id = limits::instance_id(&req.instance_id)?;
    if req.turn_id.trim().is_empty() {
        return Err(ApiError::invalid_argument("turn_id is required").into());
    }
    let value = req.value.as_ref().map(roost_proto::json::value::to_json).unwrap_or_default();
    let name = match &value {
        serde_json::Value::Bool(_) => "thumbs",
        serde_json::Value::Number(n) if n.as_f64().is_some_and(|v| (1.0..=5.0).contains(&v)) => "rating",
        serde_json::Value::Number(n) => {
            return Err(ApiError::invalid_argument(format!("a rating is from 1 to 5, not {n}")).into());
        }
        _ => {
            return Err(ApiError::invalid_argument(
                "value must be true or false (thumbs up or down) or a number from 1 to 5",
            )
            .into());
        }
    };
    // Scores checks the turn is the account's; the turn must also be this agent's, so a
    // path naming one agent cannot rate another's reply.
    let store = hosting.store();
    let owner: Option<(String, String)> = on_reader!(store, |pool| {
        sqlx::query_as("SELECT instance_id, account_id FROM turns WHERE id = $1")
            .bind(&req.turn_id)
            .fetch_optional(pool)
            .await
    })?;
    if !owner.is_some_and(|(instance, owner)| instance == instance_id && owner == account) {
        return Err(ApiError::not_found(format!("no turn {} of agent {instance_id}", req.turn_id)).into());
    }
    let score = Score {
        id: rating_id(&req.turn_id, name),
        name: name.to_owned(),
        value: req.value,
        comment: req.comment,
        turn_id: req.turn_id,
        ..Score::default()
    };
    let recorded =
        scores.create(CreateScoresRequest { score: Some(score), scores: Vec::new() }, Giver::Account(account)).await?;
    recorded.into_iter().next().ok_or_else(|| ApiError::internal("the rating was not recorded").into())
}

/// Where a message came from: what an adapter said, else a gRPC client. A forwarded call
/// keeps the source of the replica that took it first (a cron, a Telegram chat).
fn source<T>(req: &Request<T>, forwarded: bool) -> &'static str {
    match req.metadata().get(SOURCE_METADATA).and_then(|v| v.to_str().ok()) {
        Some("api") => "api",
        Some("mcp") => "mcp",
        Some("web") => "web",
        Some("cron") if forwarded => "cron",
        Some("experiment") if forwarded => "experiment",
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
        // Only a forwarded call says "experiment" (see `source`): its turn id is the one the
        // experiment stored before it sent the turn.
        let turn_id = req.metadata().get(TURN_METADATA).and_then(|v| v.to_str().ok()).map(str::to_owned);
        self.serve(req, |h, account, source, req| async move {
            let turn_id = turn_id.filter(|_| source == crate::experiments::SOURCE);
            h.send_message_as(&account, req, source, turn_id).await
        })
        .await
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

    async fn rate_turn(&self, req: Request<RateTurnRequest>) -> Result<Response<RateTurnResponse>, Status> {
        let scores = self.scores.clone();
        self.serve(req, |h, account, _, req| async move {
            Ok(RateTurnResponse { score: Some(rate_turn(&h, &scores, &account, req).await?) })
        })
        .await
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
