//! The model gateway: every model call of a hosted agent goes through roost, which routes
//! it, meters it and records it, and the provider keys never leave roost.
//!
//! - **Endpoints** (roost's own listener): `POST /llm/v1/chat/completions` and
//!   `GET /llm/v1/models` (OpenAI Chat Completions), `POST /llm/anthropic/v1/messages`
//!   (Anthropic Messages); streamed and not, tool calls passed through untouched. The
//!   OpenAI Responses API is not served yet.
//! - **Callers** are hosted agents only: each boot's agent token ([`crate::callers::tokens`])
//!   is its runtime's `OPENAI_API_KEY` and `ANTHROPIC_API_KEY`, presented as
//!   `Authorization: Bearer` (OpenAI; current Anthropic SDKs too) or `x-api-key` (Anthropic
//!   only). Anything else is 401.
//! - **Routing:** a managed agent's calls go to the operator's upstreams
//!   (`--model-upstream-url`, `--anthropic-upstream-url`, with their keys); a byok agent's
//!   to the provider (`--byok-upstream-url`, `--byok-anthropic-url`) with its own
//!   `PROVIDER_API_KEY`, which roost puts on the call. The runtime never holds either key.
//! - **Metering:** a managed call is admitted through the account's credit holds (402 at a
//!   spent balance, before any upstream call; 400 `unpriced_model` for a model the price
//!   book does not price), holding its worst-case cost (its prompt once, and the output
//!   of every choice it asks for: `openai::max_output_tokens`; a count the API does not
//!   take, such as `n: 0` or `n: 129`, is 400 `invalid_argument` for every call), then
//!   charged from the usage the upstream reports, at the price book's price, whatever the
//!   hold was, cache reads and writes included: one usage ledger row per call. A
//!   streamed OpenAI call is asked for its usage chunk (`stream_options.include_usage`),
//!   which is not forwarded to a client that did not ask. byok calls are recorded and
//!   costed, never charged.
//! - **Observed:** each call is a `model_calls` row and a GenAI span in the agent's session,
//!   under the running turn's trace ([`crate::callers::TurnSlot`]) or in a trace of its own
//!   between turns.
//! - **Limits:** a request body cap (413), a per-agent cap on calls at once (429 with
//!   `Retry-After`), a per-turn cap on calls and on spend (429 `turn_limit`, and the turn
//!   fails saying so: [`TurnLimits`]), an upstream timeout (to the answer's headers,
//!   then between streamed chunks); upstream errors pass through with their status and
//!   body. A client that hangs up cancels the upstream call; whatever usage the upstream
//!   had reported by then is still charged.
//! - **Recording:** the answer goes out first; [`writer`] stores and charges finished
//!   calls in batches, admission is in memory ([`crate::billing::windows`]).

mod answer;
mod anthropic;
pub mod judge;
mod openai;
mod record;
pub(crate) mod spans;
pub(crate) mod sse;
mod writer;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::Body,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use bytes::Bytes;
use futures::StreamExt as _;
use roost_kit::HttpError;
use roost_proto::{ApiError, ErrorReason};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

pub use answer::{Answer, CallUsage};
pub use record::CallRecord;

use crate::{
    billing::{
        holds::estimate_nanocents,
        prices::{ModelPrice, PriceBook},
        windows::{Admitted, CreditWindows},
    },
    callers::{
        ModelMode, TurnCall, TurnLimits, TurnTotals,
        tokens::{AgentIdentity, AgentTokens},
    },
    ids::new_sortable_id,
    store::Store,
    telemetry::Telemetry,
    time::now_ms,
};

/// The model gateway's paths, below roost's root.
pub const PREFIX: &str = "/llm";

/// Which protocol a call speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl Api {
    /// The stored name, and the GenAI provider name.
    pub fn provider(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

/// A model provider's endpoint: `{base_url}/chat/completions` (OpenAI-compatible) or
/// `{base_url}/v1/messages` (Anthropic).
#[derive(Clone)]
pub struct Upstream {
    /// Such as `https://api.openai.com/v1` or `https://api.anthropic.com`.
    pub base_url: String,
    /// Put on each call (`Authorization: Bearer`, or `x-api-key` for Anthropic); an
    /// operator's own upstream may not need one.
    pub api_key: Option<String>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

/// How the model gateway is set up.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Managed agents' OpenAI-compatible upstream (`--model-upstream-url`, `…-key`).
    pub openai: Option<Upstream>,
    /// Managed agents' Anthropic upstream (`--anthropic-upstream-url`, `…-key`).
    pub anthropic: Option<Upstream>,
    /// Where byok agents' OpenAI-style calls go, with their own key.
    pub byok_openai_url: String,
    /// Where byok agents' Anthropic-style calls go, with their own key.
    pub byok_anthropic_url: String,
    /// Largest request body (`--llm-max-body-mb`).
    pub max_body_bytes: usize,
    /// Calls one agent may have in flight at once (`--llm-max-calls-per-agent`).
    pub max_calls_per_agent: usize,
    /// How long the upstream may take to answer, and then between streamed chunks
    /// (`--llm-upstream-timeout-secs`).
    pub upstream_timeout: Duration,
    /// How long a hold outlives a call that never settles (its runner died).
    pub hold_ttl: Duration,
    /// What one turn may ask of models, for runtimes that set no limits of their own
    /// (`--llm-max-calls-per-turn`, `--llm-max-turn-spend-cents`).
    pub turn_limits: TurnLimits,
    /// Certificate authorities trusted for HTTPS upstreams besides the system's
    /// (`--llm-upstream-ca-file`: an operator's model server with a private CA).
    pub upstream_roots: Vec<reqwest::Certificate>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            openai: None,
            anthropic: None,
            byok_openai_url: "https://api.openai.com/v1".to_owned(),
            byok_anthropic_url: "https://api.anthropic.com".to_owned(),
            max_body_bytes: 32 << 20,
            max_calls_per_agent: 16,
            upstream_timeout: Duration::from_secs(600),
            hold_ttl: Duration::from_secs(3600),
            turn_limits: TurnLimits::default(),
            upstream_roots: Vec::new(),
        }
    }
}

/// The model gateway; clones share it.
#[derive(Clone)]
pub struct ModelGateway {
    inner: Arc<Inner>,
}

struct Inner {
    config: GatewayConfig,
    client: reqwest::Client,
    tokens: AgentTokens,
    prices: PriceBook,
    /// Admits managed calls against the accounts' credits, in memory.
    windows: CreditWindows,
    /// Stores and charges finished calls, in batches.
    writer: writer::CallWriter,
    /// Each agent's calls in flight (the per-agent cap).
    in_flight: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// Largest upstream answer the model gateway reads whole (a non-streamed answer, an error).
const MAX_ANSWER_BYTES: usize = 64 << 20;
/// Request headers passed on to the upstream (auth is the model gateway's own).
const FORWARDED: [&str; 4] = ["accept", "anthropic-version", "anthropic-beta", "openai-beta"];
/// Response headers passed back to the agent.
const RETURNED: [&str; 5] = ["content-type", "retry-after", "x-request-id", "request-id", "openai-processing-ms"];

impl ModelGateway {
    /// A gateway for the agents holding `tokens`, metering into `store` at `prices` and
    /// recording spans into `telemetry`, on replica `replica` (its credit windows are its
    /// own). It tends its credit windows every second for as long as it lives. Fails when
    /// its HTTP client cannot be built (a CA it cannot use).
    ///
    /// Upstreams may be `http://` or `https://`: TLS is rustls, verifying against the
    /// system's roots (and `upstream_roots`).
    pub fn new(
        config: GatewayConfig,
        tokens: AgentTokens,
        store: Store,
        prices: PriceBook,
        telemetry: Arc<Telemetry>,
        replica: &str,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(256)
            .tls_certs_merge(config.upstream_roots.iter().cloned())
            .build()?;
        let windows = CreditWindows::new(store.clone(), replica, config.hold_ttl);
        let writer = writer::CallWriter::start(store, telemetry);
        let gateway = Self {
            inner: Arc::new(Inner { config, client, tokens, prices, windows, writer, in_flight: Mutex::default() }),
        };
        let tended = Arc::downgrade(&gateway.inner);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(1));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(inner) = tended.upgrade() else { break };
                inner.windows.tend().await;
            }
        });
        Ok(gateway)
    }

    /// Deletes the credit windows the replica before this one left in the store.
    pub async fn forget_predecessor(&self, predecessor: &str) -> crate::Result<()> {
        self.inner.windows.forget_predecessor(predecessor).await
    }

    /// 402 `insufficient_credits` unless a managed call of `account_id` could be admitted
    /// now: a turn whose calls will be metered asks before it starts.
    pub async fn check_credits(&self, account_id: &str) -> crate::Result<()> {
        self.inner.windows.check(account_id).await
    }

    /// Waits until every finished call is stored and charged (a graceful stop).
    pub async fn flush(&self) {
        self.inner.writer.flush().await;
    }

    /// The routes, under [`PREFIX`].
    pub fn router(&self) -> Router {
        Router::new()
            .route("/llm/v1/chat/completions", post(chat_completions))
            .route("/llm/v1/models", get(models))
            .route("/llm/anthropic/v1/messages", post(messages))
            .with_state(self.clone())
    }
}

async fn chat_completions(State(gateway): State<ModelGateway>, headers: HeaderMap, body: Body) -> Response {
    gateway.call(Api::OpenAi, &headers, body).await.unwrap_or_else(|err| HttpError(err).into_response())
}

async fn messages(State(gateway): State<ModelGateway>, headers: HeaderMap, body: Body) -> Response {
    gateway.call(Api::Anthropic, &headers, body).await.unwrap_or_else(|err| HttpError(err).into_response())
}

async fn models(State(gateway): State<ModelGateway>, headers: HeaderMap) -> Response {
    gateway.models(&headers).await.unwrap_or_else(|err| HttpError(err).into_response())
}

/// How much of a refused call's body is read before its answer (see [`ModelGateway::call`]).
const REFUSED_BODY_BYTES: usize = 64 * 1024;

fn invalid(why: impl Into<String>) -> ApiError {
    ApiError::new(ErrorReason::InvalidArgument, why)
}

/// A request's count `key` (`n`, `max_tokens`, …): `None` when absent or null; else a JSON
/// integer from 1 to `max` (an integer too large for `i64` counts as `i64::MAX`), or the
/// message of a 400 saying what it must be. `2.0` and `"2"` are refused as well: a request
/// that means a count writes one.
fn count(request: &Value, key: &str, max: i64) -> Result<Option<i64>, String> {
    let Some(value) = request.get(key).filter(|v| !v.is_null()) else { return Ok(None) };
    match value.as_i64().or_else(|| value.as_u64().map(|_| i64::MAX)) {
        Some(n) if (1..=max).contains(&n) => Ok(Some(n)),
        _ => {
            let mut got = value.to_string();
            if got.len() > 40 {
                got = format!("{}…", got.chars().take(40).collect::<String>());
            }
            let range = if max == i64::MAX { "of at least 1".to_owned() } else { format!("from 1 to {max}") };
            Err(format!("`{key}` must be a whole number {range} (got {got})"))
        }
    }
}

fn upstream_failed(why: impl Into<String>) -> ApiError {
    ApiError::new(ErrorReason::Unavailable, why)
}

/// Where a call goes, and with which key.
struct Route {
    url: String,
    key: Option<String>,
}

impl ModelGateway {
    /// The agent presenting its token the way `api` sends keys; 401 otherwise.
    fn caller(&self, api: Api, headers: &HeaderMap) -> Result<Arc<AgentIdentity>, ApiError> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        // The Anthropic SDKs send the key as `x-api-key`, current ones as a bearer token.
        let presented = match api {
            Api::OpenAi => bearer,
            Api::Anthropic => headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim).or(bearer),
        };
        let how = match api {
            Api::OpenAi => "Authorization: Bearer <OPENAI_API_KEY>",
            Api::Anthropic => "x-api-key: <ANTHROPIC_API_KEY> (or as a bearer token)",
        };
        let Some(token) = presented else {
            return Err(ApiError::unauthenticated(format!(
                "the model gateway serves hosted agents only: send the agent's gateway token as {how}"
            )));
        };
        self.inner
            .tokens
            .identity(token)
            .ok_or_else(|| ApiError::unauthenticated("this gateway token is not (or no longer) a running agent's"))
    }

    /// Where `agent`'s `api` calls go.
    fn route(&self, api: Api, agent: &AgentIdentity) -> Result<Route, ApiError> {
        let config = &self.inner.config;
        match agent.model_mode {
            ModelMode::Managed => {
                let upstream = match api {
                    Api::OpenAi => config.openai.as_ref(),
                    Api::Anthropic => config.anthropic.as_ref(),
                };
                let upstream = upstream.ok_or_else(|| {
                    let flag = match api {
                        Api::OpenAi => "--model-upstream-url",
                        Api::Anthropic => "--anthropic-upstream-url",
                    };
                    upstream_failed(format!(
                        "this roost has no managed {} upstream (the operator starts it with {flag})",
                        api.provider()
                    ))
                })?;
                Ok(Route { url: upstream.base_url.clone(), key: upstream.api_key.clone() })
            }
            ModelMode::Byok => {
                let key = agent.provider_api_key.clone().ok_or_else(|| {
                    ApiError::new(
                        ErrorReason::WrongState,
                        "this byok agent has no PROVIDER_API_KEY yet: set it with the config call",
                    )
                })?;
                let url = match api {
                    Api::OpenAi => config.byok_openai_url.clone(),
                    Api::Anthropic => config.byok_anthropic_url.clone(),
                };
                Ok(Route { url, key: Some(key) })
            }
        }
    }

    /// Admits a managed call that may cost `estimate` nanocents against its account's credits.
    /// Calls answered but not yet written still count: before answering 402 the model gateway
    /// waits for them to be charged (a few milliseconds) and asks again, so an agent
    /// calling one call after another is never refused for its own last call.
    async fn admit(&self, account_id: &str, estimate: i64) -> Result<Admitted, ApiError> {
        match self.inner.windows.admit(account_id, estimate).await {
            Err(crate::Error::Api(err)) if err.reason() == ErrorReason::InsufficientCredits => {
                self.inner.writer.flush().await;
                self.inner.windows.admit(account_id, estimate).await.map_err(|e| e.to_api())
            }
            admitted => admitted.map_err(|e| e.to_api()),
        }
    }

    /// A place among the agent's calls in flight; 429 when it has the most it may.
    fn slot(&self, instance_id: &str) -> Result<OwnedSemaphorePermit, ApiError> {
        let cap = self.inner.config.max_calls_per_agent;
        let semaphore = {
            let mut in_flight = self.inner.in_flight.lock().unwrap_or_else(|p| p.into_inner());
            in_flight.entry(instance_id.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(cap))).clone()
        };
        semaphore.try_acquire_owned().map_err(|_| {
            ApiError::new(
                ErrorReason::Overloaded,
                format!("this agent already has {cap} model calls in flight; retry when one has finished"),
            )
        })
    }

    /// `GET /llm/v1/models`: a managed agent may use every model the price book prices; a
    /// byok agent sees its provider's list.
    async fn models(&self, headers: &HeaderMap) -> Result<Response, ApiError> {
        let agent = self.caller(Api::OpenAi, headers)?;
        if agent.model_mode == ModelMode::Managed {
            let data: Vec<Value> = self
                .inner
                .prices
                .model_names()
                .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "roost"}))
                .collect();
            return Ok(axum::Json(json!({"object": "list", "data": data})).into_response());
        }
        let route = self.route(Api::OpenAi, &agent)?;
        let mut request = self.inner.client.get(format!("{}/models", route.url.trim_end_matches('/')));
        if let Some(key) = &route.key {
            request = request.bearer_auth(key);
        }
        let answer = tokio::time::timeout(self.inner.config.upstream_timeout, request.send())
            .await
            .map_err(|_| upstream_failed("the model upstream did not answer in time"))?
            .map_err(|e| upstream_failed(format!("the model upstream is unreachable: {}", error_chain(e))))?;
        let status = answer.status();
        let returned = returned_headers(answer.headers());
        let body = read_capped(answer).await.map_err(upstream_failed)?;
        Ok(respond(status, returned, Body::from(body)))
    }

    /// One model call over HTTP: the caller by its token, then [`Self::forward`].
    async fn call(&self, api: Api, headers: &HeaderMap, body: Body) -> Result<Response, ApiError> {
        let agent = match self.caller(api, headers) {
            Ok(agent) => agent,
            Err(err) => {
                // Read what the client sent (a little of it) before refusing: a connection
                // closed with bytes unread is reset, and the client would see the reset,
                // not this answer (a client that writes its headers and body apart, as
                // Python's urllib does, often would).
                let _ = axum::body::to_bytes(body, REFUSED_BODY_BYTES).await;
                return Err(err);
            }
        };
        let max = self.inner.config.max_body_bytes;
        let raw = axum::body::to_bytes(body, max).await.map_err(|_| {
            ApiError::new(ErrorReason::PayloadTooLarge, format!("a model call's body may be at most {} MiB", max >> 20))
        })?;
        let request =
            serde_json::from_slice(&raw).map_err(|e| invalid(format!("the request body is not JSON: {e}")))?;
        self.forward(agent, api, headers, request, Some(raw)).await
    }

    /// A non-streamed call roost makes itself for `agent` (the `assistant` runtime): the
    /// same path as an agent's call over HTTP (admission, routing, metering, span), without
    /// a loopback connection or a token. Returns the upstream's status and body.
    pub async fn complete(
        &self,
        agent: Arc<AgentIdentity>,
        api: Api,
        request: Value,
    ) -> Result<(StatusCode, Bytes), ApiError> {
        let (status, body) = self.open(agent, api, request).await?;
        // A non-streamed answer is already whole in memory.
        let body = axum::body::to_bytes(body, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| upstream_failed(format!("the model upstream's answer could not be read: {e}")))?;
        Ok((status, body))
    }

    /// A call roost makes itself for `agent` that may stream (`"stream": true`): the same
    /// path as [`Self::complete`], answering the upstream's status and the body as it
    /// comes. Dropping the body hangs up, which cancels the upstream call.
    pub async fn open(
        &self,
        agent: Arc<AgentIdentity>,
        api: Api,
        request: Value,
    ) -> Result<(StatusCode, Body), ApiError> {
        let response = self.forward(agent, api, &HeaderMap::new(), request, None).await?;
        Ok((response.status(), response.into_body()))
    }

    /// One model call of `agent`, from its request to its metered answer. `raw` is the
    /// request as the agent sent it over HTTP, forwarded as it is unless the model gateway adds
    /// to it; a call roost makes itself has none, and its request is written once, here.
    async fn forward(
        &self,
        agent: Arc<AgentIdentity>,
        api: Api,
        headers: &HeaderMap,
        mut request: Value,
        raw: Option<Bytes>,
    ) -> Result<Response, ApiError> {
        if !request.is_object() {
            return Err(invalid("the request body must be a JSON object"));
        }
        let model = request
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("the request names no model"))?
            .to_owned();
        let stream = request.get("stream") == Some(&Value::Bool(true));
        let client_wants_usage = api == Api::Anthropic || openai::wants_usage(&request);
        if stream && !client_wants_usage {
            openai::ask_usage(&mut request);
        }
        let forwarded = match raw {
            Some(raw) if !stream || client_wants_usage => raw,
            _ => Bytes::from(serde_json::to_vec(&request).map_err(|e| invalid(e.to_string()))?),
        };
        // Checked for every call, byok too, before anything else is spent on it: a bad count
        // is 400 and reaches nothing upstream.
        let max_output = match api {
            Api::OpenAi => openai::max_output_tokens(&request),
            Api::Anthropic => anthropic::max_output_tokens(&request),
        }
        .map_err(invalid)?;

        let permit = self.slot(&agent.instance_id)?;
        let route = self.route(api, &agent)?;
        // A call during a turn is the turn's, within the turn's limits.
        let turn = match agent.turn.current() {
            Some(meter) => Some(meter.call().map_err(|why| ApiError::new(ErrorReason::TurnLimit, why))?),
            None => None,
        };
        // The tool results it carries end the turn's tool steps (for a streamed turn).
        if let Some(turn) = &turn {
            turn.meter().requesting(&request);
        }
        let price = self.inner.prices.metered_price(&model);
        let charged = agent.model_mode == ModelMode::Managed;
        if charged && price.is_none() {
            return Err(ApiError::new(
                ErrorReason::UnpricedModel,
                format!(
                    "model {model:?} has no price in this roost's price book, so the included (metered) model cannot \
                     run it; use a priced model (GET {PREFIX}/v1/models lists them) or ask the operator to price it"
                ),
            ));
        }
        let id = new_sortable_id("call");
        let admitted = match price {
            Some(price) if charged && price.is_paid() => {
                Some(self.admit(&agent.account_id, estimate_nanocents(price, forwarded.len(), max_output)).await?)
            }
            _ => None,
        };
        let mut call = PendingCall::new(
            turn,
            Pending {
                gateway: self.inner.clone(),
                id,
                api,
                agent,
                model,
                price,
                charged,
                admitted,
                stream,
                request,
                started_at: now_ms(),
                clock: Instant::now(),
                first_chunk_ms: None,
                answer: Answer::default(),
                http_status: 0,
                _permit: permit,
            },
        );

        let mut upstream = self
            .inner
            .client
            .post(match api {
                Api::OpenAi => format!("{}/chat/completions", route.url.trim_end_matches('/')),
                Api::Anthropic => format!("{}/v1/messages", route.url.trim_end_matches('/')),
            })
            .header(header::CONTENT_TYPE, "application/json")
            .body(forwarded);
        for name in FORWARDED {
            if let Some(value) = headers.get(name) {
                upstream = upstream.header(name, value);
            }
        }
        if api == Api::Anthropic && !headers.contains_key("anthropic-version") {
            upstream = upstream.header("anthropic-version", "2023-06-01");
        }
        upstream = match (&route.key, api) {
            (Some(key), Api::OpenAi) => upstream.bearer_auth(key),
            (Some(key), Api::Anthropic) => upstream.header("x-api-key", key),
            (None, _) => upstream,
        };
        let timeout = self.inner.config.upstream_timeout;
        let answer = match tokio::time::timeout(timeout, upstream.send()).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(err)) => {
                let why = format!("the model upstream is unreachable: {}", error_chain(err));
                call.finish(Outcome::Failed(why.clone()));
                return Err(upstream_failed(why));
            }
            Err(_) => {
                let why = format!("the model upstream did not answer within {} s", timeout.as_secs());
                call.finish(Outcome::Failed(why.clone()));
                return Err(upstream_failed(why));
            }
        };
        let status = answer.status();
        call.state().http_status = i64::from(status.as_u16());
        let returned = returned_headers(answer.headers());
        if !status.is_success() || !stream {
            let body = match tokio::time::timeout(timeout, read_capped(answer)).await {
                Ok(Ok(body)) => body,
                Ok(Err(why)) => {
                    call.finish(Outcome::Failed(why.clone()));
                    return Err(upstream_failed(why));
                }
                Err(_) => {
                    let why = format!("the model upstream did not finish its answer within {} s", timeout.as_secs());
                    call.finish(Outcome::Failed(why.clone()));
                    return Err(upstream_failed(why));
                }
            };
            let outcome = if status.is_success() {
                if let Ok(parsed) = serde_json::from_slice::<Value>(&body) {
                    let answer = &mut call.state().answer;
                    match api {
                        Api::OpenAi => openai::read_answer(&parsed, answer),
                        Api::Anthropic => anthropic::read_answer(&parsed, answer),
                    }
                }
                Outcome::Completed
            } else {
                Outcome::Failed(upstream_error(status, &body))
            };
            call.finish(outcome);
            return Ok(respond(status, returned, Body::from(body)));
        }
        let relay = Relay::new(answer.bytes_stream(), call, client_wants_usage, timeout);
        let mut returned = returned;
        returned.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        returned.insert("x-accel-buffering", HeaderValue::from_static("no"));
        Ok(respond(status, returned, Body::from_stream(relay.into_stream())))
    }
}

/// A streamed upstream answer on its way to the client, event by event, read as it passes
/// ([`Relay::into_stream`]).
///
/// The relay is the answer's body itself, polled by whoever reads it (hyper for an agent
/// calling over HTTP, the turn's task for an in-process runtime), not a task of its own
/// feeding a channel: each event reaches the reader without waking another task, which was
/// a tenth of roost's share of a streamed reply's first text. A reader that stops reading
/// stops the upstream reads with it (backpressure to the provider), and one that hangs up
/// drops the relay: its upstream call is dropped, so cancelled, and the call settles as
/// cancelled ([`PendingCall`]'s drop).
struct Relay {
    upstream: futures::stream::BoxStream<'static, reqwest::Result<Bytes>>,
    /// `None` once the call has settled: the stream ends.
    call: Option<PendingCall>,
    splitter: sse::EventSplitter,
    events: Vec<Bytes>,
    /// The Anthropic answer's tool-use blocks being read ([`anthropic::read_event`]).
    tool_blocks: Vec<usize>,
    client_wants_usage: bool,
    /// The most the upstream may stay silent between chunks.
    idle: Duration,
}

impl Relay {
    fn new(
        upstream: impl futures::Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
        call: PendingCall,
        client_wants_usage: bool,
        idle: Duration,
    ) -> Self {
        Self {
            upstream: upstream.boxed(),
            call: Some(call),
            splitter: sse::EventSplitter::default(),
            events: Vec::new(),
            tool_blocks: Vec::new(),
            client_wants_usage,
            idle,
        }
    }

    /// The answer's body: the events of each upstream chunk the client is meant to see,
    /// until the upstream ends (the call completes), fails or stalls (the call fails and
    /// the body ends in that error).
    fn into_stream(self) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
        futures::stream::unfold(self, |mut relay| async move {
            let item = relay.next().await?;
            Some((item, relay))
        })
    }

    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            let call = self.call.as_mut()?;
            let chunk = match tokio::time::timeout(self.idle, self.upstream.next()).await {
                Err(_) => return self.fail(format!("the model upstream sent nothing for {} s", self.idle.as_secs())),
                Ok(None) => {
                    let rest = self.splitter.rest();
                    self.settle(Outcome::Completed);
                    return rest.map(Ok);
                }
                Ok(Some(Err(err))) => {
                    return self.fail(format!("the model upstream's stream broke: {}", error_chain(err)));
                }
                Ok(Some(Ok(chunk))) => chunk,
            };
            let state = call.state();
            if state.first_chunk_ms.is_none() {
                state.first_chunk_ms = Some(state.clock.elapsed().as_millis() as i64);
            }
            self.splitter.push(&chunk, &mut self.events);
            let mut out = Vec::new();
            for event in self.events.drain(..) {
                let (name, data) = sse::parse(&event);
                let forward = match state.api {
                    Api::OpenAi => openai::read_event(&data, self.client_wants_usage, &mut state.answer),
                    Api::Anthropic => {
                        anthropic::read_event(name, &data, &mut self.tool_blocks, &mut state.answer);
                        true
                    }
                };
                if forward {
                    out.extend_from_slice(&event);
                }
            }
            if !out.is_empty() {
                return Some(Ok(Bytes::from(out)));
            }
        }
    }

    /// Settles the call as failed; the body ends in `why`.
    fn fail(&mut self, why: String) -> Option<Result<Bytes, std::io::Error>> {
        self.settle(Outcome::Failed(why.clone()));
        Some(Err(std::io::Error::other(why)))
    }

    fn settle(&mut self, outcome: Outcome) {
        if let Some(call) = self.call.take() {
            call.finish(outcome);
        }
    }
}

/// How a call ended.
enum Outcome {
    /// The upstream answered in full.
    Completed,
    /// An upstream error, an unreachable or stalled upstream.
    Failed(String),
    /// The client hung up first.
    Cancelled,
}

/// Everything about a call in flight.
struct Pending {
    gateway: Arc<Inner>,
    id: String,
    api: Api,
    agent: Arc<AgentIdentity>,
    model: String,
    price: Option<ModelPrice>,
    charged: bool,
    admitted: Option<Admitted>,
    stream: bool,
    request: Value,
    started_at: i64,
    clock: Instant,
    first_chunk_ms: Option<i64>,
    answer: Answer,
    http_status: i64,
    _permit: OwnedSemaphorePermit,
}

/// A call admitted and not yet settled. Settling stores it, charges it and releases its
/// hold, in a task of its own so a client hanging up cannot stop it; a call dropped
/// unsettled (its handler was cancelled) settles as cancelled.
struct PendingCall {
    state: Option<Box<Pending>>,
    turn: Option<TurnCall>,
}

impl PendingCall {
    fn new(turn: Option<TurnCall>, state: Pending) -> Self {
        Self { state: Some(Box::new(state)), turn }
    }

    fn state(&mut self) -> &mut Pending {
        // Only `finish` and `drop` take the state, and nothing uses the call after them.
        self.state.as_mut().expect("a pending call's state is there until it settles")
    }

    /// Settles the call: it is queued for the writer, which stores and charges it.
    fn finish(mut self, outcome: Outcome) {
        if let Some(state) = self.state.take() {
            settle(*state, self.turn.take(), outcome);
        }
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            settle(*state, self.turn.take(), Outcome::Cancelled);
        }
    }
}

/// Prices a finished call and queues it for the writer ([`writer`]), which stores it,
/// charges it, settles its credits and turn, and writes its span.
fn settle(state: Pending, turn: Option<TurnCall>, outcome: Outcome) {
    let Pending { gateway, id, api, agent, model, price, charged, admitted, stream, request, answer, .. } = state;
    let usage = answer.usage.unwrap_or_default();
    let response_model = answer.model.clone().unwrap_or_default();
    // The model that answered prices the call when the book knows it (roost made the call,
    // so its report is roost's own); else the one asked for.
    let price = gateway.prices.metered_price(&response_model).filter(|_| !response_model.is_empty()).or(price);
    let cost = price.map_or(0, |p| {
        p.cost(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens)
    });
    let (status, error) = match &outcome {
        Outcome::Completed => match &answer.error {
            Some(error) => ("failed", error.clone()),
            None => ("completed", String::new()),
        },
        Outcome::Failed(why) => ("failed", why.clone()),
        Outcome::Cancelled => ("cancelled", "the agent hung up before the answer was complete".to_owned()),
    };
    let record = CallRecord {
        id,
        account_id: agent.account_id.clone(),
        instance_id: agent.instance_id.clone(),
        turn_id: turn.as_ref().map(|t| t.meter().turn_id.clone()).unwrap_or_default(),
        api: api.provider(),
        model_mode: agent.model_mode.as_str(),
        request_model: model,
        response_model,
        status,
        http_status: state.http_status,
        streamed: stream,
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        cost_nanocents: cost,
        charged,
        started_at: state.started_at,
        duration_ms: state.clock.elapsed().as_millis() as i64,
        first_chunk_ms: state.first_chunk_ms,
        error,
    };
    if let Some(turn) = &turn {
        if matches!(outcome, Outcome::Completed) {
            let asked = answer.tool_calls.iter().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()));
            turn.meter().asked_for_tools(asked);
        }
        turn.count(TurnTotals {
            calls: 1,
            input_tokens: record.input_tokens,
            output_tokens: record.output_tokens,
            cost_nanocents: record.cost_nanocents,
            charged_nanocents: 0,
        });
    }
    gateway.writer.write(writer::Finished {
        record,
        admitted,
        turn,
        runtime_id: agent.runtime_id.clone(),
        api,
        request,
        answer,
    });
}

/// Writes a turn's own span, the parent of its calls' spans.
pub async fn record_turn_span(
    telemetry: &Telemetry,
    agent: (&str, &str),
    turn_id: &str,
    times: (i64, i64),
    error: Option<&str>,
) {
    let (instance_id, runtime_id) = agent;
    let span = spans::turn_span(instance_id, runtime_id, turn_id, times, error);
    if let Err(err) = telemetry.export_traces(span, Some(instance_id.to_owned())).await {
        warn!(turn = %turn_id, error = %err.message(), "a turn's span could not be stored");
    }
}

/// An upstream error's message, from its body (both APIs put it at `error.message`).
fn upstream_error(status: StatusCode, body: &[u8]) -> String {
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    format!("upstream {} {message}", status.as_u16())
}

/// A reqwest error with its causes, without the upstream's URL (the operator's address is
/// not the agent's business).
fn error_chain(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Reads an upstream answer whole, up to [`MAX_ANSWER_BYTES`].
async fn read_capped(answer: reqwest::Response) -> Result<Bytes, String> {
    let mut body = Vec::new();
    let mut stream = answer.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("the model upstream's answer was cut short: {}", error_chain(e)))?;
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!("the model upstream's answer is over {} MiB", MAX_ANSWER_BYTES >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

fn returned_headers(upstream: &reqwest::header::HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for name in RETURNED {
        if let Some(value) = upstream.get(name)
            && let (Ok(name), Ok(value)) =
                (header::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value.as_bytes()))
        {
            headers.insert(name, value);
        }
    }
    headers
}

fn respond(status: reqwest::StatusCode, headers: HeaderMap, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    *response.headers_mut() = headers;
    response
}
