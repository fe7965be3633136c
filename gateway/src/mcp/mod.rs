//! The MCP server at `/mcp`: rmcp's Streamable HTTP transport on the main port.
//!
//! Every HTTP request to `/mcp` needs `Authorization: Bearer <API_KEY>`, like REST: no key or
//! a bad one is refused with 401 before the MCP layer sees it (a dashboard token is also
//! accepted, for the query tools). Each tool calls the core's gRPC service trait with the
//! request's headers as metadata, so its answers and error codes are REST's. Errors are tool
//! results with `isError` and `{"error", "code", "status"}` as structured content.
//!
//! `Host` is checked against roost's allow-list ([`crate::hosts`]) before the request gets
//! here, on `/mcp` whatever the token setting (DNS rebinding); rmcp's own check, which knows
//! only exact names, is off.

pub mod tools;

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use axum::{
    extract::{Request, State},
    response::{IntoResponse, Response},
};
use futures::StreamExt as _;
use http::{HeaderValue, header};
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
        PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use roost_proto::{
    ApiError, ErrorReason,
    v1::{GetAccountRequest, StreamMessageRequest},
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::{
    Call, Core, HttpError,
    access::DashboardAccess,
    api::{Answer, Endpoint, Routes},
};

/// What turns from MCP are recorded as.
const SOURCE: &str = "mcp";

/// How often a `send_message` reports progress while nothing else happens.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// The agent turn hard cap, as the progress total.
const TURN_CAP_SECS: f64 = 900.0;

const INSTRUCTIONS: &str = "roost hosts always-on AI agents for your account. Use list_runtimes to pick a runtime, \
create_agent to start one (it boots in the background: call get_agent until status is running), send_message to \
talk to it, rate_turn to rate a reply (thumbs up or down, or 1 to 5), configure_agent / pause_agent / \
resume_agent / destroy_agent to manage it, and get_activity to see its turns and charges. Errors carry a `code` \
(insufficient_credits, deploy_settling, wrong_state, not_found, ...). The full reference is at /skill.md.";

const MCP: Endpoint = Endpoint::post(
    "/mcp",
    "The MCP server (Streamable HTTP): the tools below, with the same `Authorization: Bearer <API_KEY>` as REST \
     (without a key or with a bad one the HTTP request is 401). GET opens the server's event stream and DELETE ends a \
     session, as the transport specifies.",
)
.answer_of(Answer::Mcp);

/// The `/mcp` route: every method goes to the transport (POST for messages, GET for the
/// server's stream, DELETE to end a session).
pub(crate) fn routes() -> Routes {
    Routes::new("MCP", "The same capabilities as MCP tools, for LLM clients.").at_any(&MCP, serve)
}

type McpService = StreamableHttpService<RoostMcp, LocalSessionManager>;

/// The MCP transport of a [`Core`], built on first use because it serves that `Core`. One
/// per `Core`, so sessions live as long as the server; cancelling `shutdown` ends them (and
/// their open event streams), so a graceful shutdown does not wait on idle MCP clients.
#[derive(Clone, Default)]
pub struct McpState {
    transport: Arc<OnceLock<McpService>>,
    shutdown: CancellationToken,
}

impl McpState {
    /// Sessions end when `shutdown` is cancelled.
    pub fn new(shutdown: CancellationToken) -> Self {
        Self { transport: Arc::default(), shutdown }
    }
}

impl std::fmt::Debug for McpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.transport.get().is_some() { "McpState(started)" } else { "McpState(idle)" })
    }
}

fn transport(core: &Core) -> McpService {
    let options = &core.options;
    let config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(options.sse_keepalive))
        .with_cancellation_token(core.mcp.shutdown.child_token())
        .disable_allowed_hosts();
    let factory_core = core.clone();
    StreamableHttpService::new(
        move || Ok(RoostMcp { core: factory_core.clone() }),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Refuses a request without a valid key (or dashboard token) with 401, as REST does, and
/// hands the rest to the transport.
async fn serve(State(core): State<Core>, request: Request) -> Response {
    let access = request.extensions().get::<DashboardAccess>().copied().unwrap_or(DashboardAccess::Denied);
    if let Err(refusal) = authenticate(&core, request.headers().clone(), access).await {
        return refusal;
    }
    let service = core.mcp.transport.get_or_init(|| transport(&core)).clone();
    match service.oneshot(request).await {
        Ok(response) => json_errors(response.map(axum::body::Body::new)).await,
        Err(never) => match never {},
    }
}

/// The transport refuses some HTTP requests itself (a wrong content type, a missing
/// `Accept`, an unknown session, a disallowed `Host`) with plain-text bodies; roost's errors
/// are all the JSON error body, so those are rewritten with the same status.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let reason = match status.as_u16() {
        401 => ErrorReason::Unauthenticated,
        403 => ErrorReason::CrossOrigin,
        404 => ErrorReason::NotFound,
        405 => ErrorReason::MethodNotAllowed,
        409 => ErrorReason::WrongState,
        413 => ErrorReason::PayloadTooLarge,
        415 => ErrorReason::UnsupportedMediaType,
        429 => ErrorReason::QueueFull,
        503 => ErrorReason::Unavailable,
        500..=599 => ErrorReason::Internal,
        _ => ErrorReason::InvalidArgument,
    };
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let mut message = String::from_utf8_lossy(&text).trim().to_owned();
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("refused").to_owned();
    }
    let mut rewritten = (status, axum::Json(ApiError::new(reason, message).to_json())).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}

async fn authenticate(core: &Core, headers: http::HeaderMap, access: DashboardAccess) -> Result<(), Response> {
    let refuse = |err: ApiError| {
        let mut response = HttpError(err).into_response();
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"roost\""));
        response
    };
    if access == DashboardAccess::Token {
        return Ok(());
    }
    if !headers.contains_key(header::AUTHORIZATION) {
        return Err(refuse(ApiError::unauthenticated("missing key: send Authorization: Bearer <API_KEY>")));
    }
    let mut call = http::Request::new(GetAccountRequest {});
    *call.headers_mut() = headers;
    match core.accounts.get_account(tonic::Request::from_http(call)).await {
        Ok(_) => Ok(()),
        Err(status) => {
            let err = ApiError::from_status(&status);
            Err(if err.reason() == ErrorReason::Unauthenticated { refuse(err) } else { HttpError(err).into_response() })
        }
    }
}

/// One MCP session's handler.
#[derive(Clone)]
struct RoostMcp {
    core: Core,
}

impl ServerHandler for RoostMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("roost", env!("CARGO_PKG_VERSION")).with_title("roost hosted agents"))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let registry = tools::registry(&self.core).await;
        let listed = tools::TOOLS
            .iter()
            .map(|def| {
                let annotations = ToolAnnotations::with_title(def.title)
                    .read_only(def.read_only)
                    .destructive(def.destructive)
                    .open_world(false);
                Tool::new(def.name, def.description, Arc::new(tools::input_schema(def, &registry)))
                    .with_title(def.title)
                    .with_annotations(annotations)
            })
            .collect();
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let Some(def) = tools::find(&name) else {
            return Ok(error_result(&ApiError::new(ErrorReason::NotFound, format!("no tool named {name}"))).into());
        };
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return Err(McpError::internal_error("the HTTP request is not attached to the MCP call", None));
        };
        if def.dashboard && parts.extensions.get::<DashboardAccess>().is_none_or(|a| *a == DashboardAccess::Denied) {
            let err = ApiError::unauthenticated(
                "the query tools read the dashboard's data: call from a loopback address while SERVICE_API_TOKENS \
                 is unset, or with a dashboard token as the bearer",
            );
            self.core.usage.record_tool(def.name, true);
            return Ok(error_result(&err).into());
        }
        let call = Call::from_parts(parts).with_header("x-roost-source", SOURCE);
        let args = request.arguments.clone().unwrap_or_default();
        let progress_token =
            request.meta.as_ref().and_then(|m| m.get_progress_token()).or_else(|| context.meta.get_progress_token());
        // A `send_message` with a progress token streams: each step of the turn is a progress
        // notification as it happens. Cancelling the call hangs up, which cancels the turn.
        let outcome = match progress_token {
            Some(token) if name == "send_message" => tokio::select! {
                outcome = stream_turn(&self.core, call, args, &context, token) => outcome,
                _ = context.ct.cancelled() => return Err(McpError::internal_error("the client cancelled the call", None)),
            },
            _ => tokio::select! {
                outcome = tools::run(&self.core, call, &name, args) => outcome,
                _ = context.ct.cancelled() => return Err(McpError::internal_error("the client cancelled the call", None)),
            },
        };
        self.core.usage.record_tool(def.name, outcome.is_err());
        Ok(match outcome {
            Ok(content) => {
                let text = tools::summary(&name, &content);
                let mut result = CallToolResult::structured(content);
                result.content = vec![ContentBlock::text(text)];
                result
            }
            Err(err) => error_result(&err),
        }
        .into())
    }
}

/// Runs `send_message` as a streamed turn, telling the client each step in a progress
/// notification as it happens: a `message` of `reply: <text>` for each delta of the reply,
/// `tool <name> started` / `tool <name> finished in <n> ms` for tool steps, and every
/// [`PROGRESS_EVERY`] while nothing happens (queued, or a long step), how long it has been.
/// `progress` is the seconds since the call began, of a total of the 900 s turn cap. The result is what `send_message`
/// answers without a token.
async fn stream_turn(
    core: &Core,
    call: Call,
    args: serde_json::Map<String, Value>,
    context: &RequestContext<RoleServer>,
    token: rmcp::model::ProgressToken,
) -> Result<Value, ApiError> {
    let req: StreamMessageRequest = tools::parse(args)?;
    let started = tokio::time::Instant::now();
    let notify = |message: String| {
        let param = ProgressNotificationParam::new(token.clone(), started.elapsed().as_secs_f64())
            .with_total(TURN_CAP_SECS)
            .with_message(message);
        context.peer.notify_progress(param)
    };
    let waiting = || {
        let waited = started.elapsed().as_secs();
        format!("waiting for the agent's reply, queued or running ({waited} s of the {TURN_CAP_SECS:.0} s cap)")
    };
    let _ = notify(waiting()).await;
    let opening = core.agents.stream_message(call.request(req));
    let mut opening = std::pin::pin!(opening);
    // Opening checks the request and the agent (a full queue is refused here); the wait in
    // the queue is part of the stream.
    let mut events = loop {
        tokio::select! {
            opened = &mut opening => break opened.map_err(|status| ApiError::from_status(&status))?.into_inner(),
            () = tokio::time::sleep(PROGRESS_EVERY) => { let _ = notify(waiting()).await; }
        }
    };
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = tokio::time::sleep(PROGRESS_EVERY) => {
                let _ = notify(waiting()).await;
                continue;
            }
        };
        let event = match next {
            None => return Err(ApiError::new(ErrorReason::Internal, "the turn's stream ended without its answer")),
            Some(Err(status)) => return Err(ApiError::from_status(&status)),
            Some(Ok(event)) => event,
        };
        let message = match (event.delta, event.tool, event.done) {
            (_, _, Some(done)) => {
                return serde_json::to_value(done)
                    .map_err(|e| ApiError::new(ErrorReason::Internal, format!("unencodable answer: {e}")));
            }
            (Some(delta), _, _) => format!("reply: {}", delta.text),
            (_, Some(step), _) if step.finished => format!("tool {} finished in {} ms", step.name, step.duration_ms),
            (_, Some(step), _) => format!("tool {} started", step.name),
            _ => continue,
        };
        let _ = notify(message).await;
    }
}

/// A tool error: readable text and `{error, code, status}`.
fn error_result(err: &ApiError) -> CallToolResult {
    let reason = err.reason();
    let status = reason.http_status().as_u16();
    let mut result = CallToolResult::structured_error(json!({
        "error": err.message(),
        "code": reason.code(),
        "status": status,
    }));
    result.content = vec![ContentBlock::text(format!("{} ({status}): {}", reason.code(), err.message()))];
    result
}
