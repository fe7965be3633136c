//! [`FakeModels`]: a fake model provider on an ephemeral port that speaks both the OpenAI
//! Chat Completions API and the Anthropic Messages API, streaming and not, with fixed, known
//! usage, and records every request it receives — the upstream behind roost's model gateway
//! in its tests (driven by tests/senders/python/gateway_agent.py with the real SDKs).
//!
//! - `POST /v1/chat/completions` (OpenAI): usage [`OPENAI_PROMPT_TOKENS`] /
//!   [`OPENAI_COMPLETION_TOKENS`] ([`OPENAI_CACHED_TOKENS`] of the prompt cached). A request
//!   with `n` gets `n` choices, each the same answer, and its usage counts the completion
//!   tokens of every choice and the prompt once, as OpenAI does; the fake ignores
//!   `max_tokens`, so it can answer more than a request allows. A stream ends with a
//!   usage-only chunk only when the request asked for it (`stream_options.include_usage`),
//!   as OpenAI does.
//! - `POST /v1/messages` (Anthropic): usage [`ANTHROPIC_INPUT_TOKENS`] (uncached) /
//!   [`ANTHROPIC_OUTPUT_TOKENS`], [`ANTHROPIC_CACHE_READ_TOKENS`] read from and
//!   [`ANTHROPIC_CACHE_WRITE_TOKENS`] written to the cache. A stream carries usage in
//!   `message_start` and `message_delta`, as Anthropic does.
//! - `GET /v1/models`: a one-model list.
//!
//! Both chat APIs answer the same way, naming the request's model:
//! - a request with tools and no tool result yet: a call of its first tool with
//!   [`TOOL_ARGUMENTS`];
//! - a request carrying a tool result: [`REPLY_AFTER_TOOL`];
//! - a last user message of exactly [`FAIL_PROMPT`]: HTTP 529, the provider's overloaded
//!   error;
//! - any other: [`REPLY`].
//!
//! Streams send one chunk at a time with [`FakeModels::set_delay`] between chunks, and
//! [`FakeModels::open_streams`] counts those still being sent, so a test sees an upstream
//! stream dropped when the client hangs up.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, task::JoinHandle};

/// Every OpenAI answer's `usage.prompt_tokens`.
pub const OPENAI_PROMPT_TOKENS: i64 = 21;
/// Every OpenAI answer's `usage.completion_tokens`.
pub const OPENAI_COMPLETION_TOKENS: i64 = 7;
/// Every OpenAI answer's `usage.prompt_tokens_details.cached_tokens` (part of the prompt).
pub const OPENAI_CACHED_TOKENS: i64 = 5;
/// Every Anthropic answer's `usage.input_tokens`: the uncached input only, Anthropic's
/// convention (cache reads and writes are counted apart).
pub const ANTHROPIC_INPUT_TOKENS: i64 = 13;
/// Every Anthropic answer's `usage.output_tokens`.
pub const ANTHROPIC_OUTPUT_TOKENS: i64 = 9;
/// Every Anthropic answer's `usage.cache_read_input_tokens`.
pub const ANTHROPIC_CACHE_READ_TOKENS: i64 = 4;
/// Every Anthropic answer's `usage.cache_creation_input_tokens`.
pub const ANTHROPIC_CACHE_WRITE_TOKENS: i64 = 3;
/// The answer to a plain request.
pub const REPLY: &str = "The capital of France is Paris.";
/// The answer once a tool's result is in the conversation.
pub const REPLY_AFTER_TOOL: &str = "It is sunny and 24 C in Paris.";
/// The id of the OpenAI tool call the model makes.
pub const TOOL_CALL_ID: &str = "call_roost_1";
/// The id of the Anthropic `tool_use` block the model makes.
pub const TOOL_USE_ID: &str = "toolu_roost_1";
/// The arguments of the tool call the model makes (a JSON string, as OpenAI sends them;
/// Anthropic's `tool_use.input` is the same object).
pub const TOOL_ARGUMENTS: &str = r#"{"city":"Paris"}"#;
/// A last user message of exactly this text is answered with HTTP 529 (overloaded).
pub const FAIL_PROMPT: &str = "fail";
/// The one model `GET /v1/models` lists.
pub const LISTED_MODEL: &str = "gpt-4o-mini";

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/v1/messages", post(messages))
        .with_state(shared)
}

/// A TCP listener whose connections are TLS, handshaken before they are served.
struct TlsListener {
    tcp: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else { continue };
            // A client that refuses the certificate ends its handshake: wait for the next.
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Which endpoint: `"openai"` (chat completions), `"anthropic"` (messages) or
    /// `"models"` (the model list).
    pub api: &'static str,
    /// The `Authorization` header: OpenAI's `Bearer <key>`, and also how the `anthropic`
    /// Python SDK 2.x sends `ANTHROPIC_API_KEY`.
    pub authorization: Option<String>,
    /// The `x-api-key` header: the key as Anthropic's API documents it (and the `anthropic`
    /// SDK 1.x sends it).
    pub api_key: Option<String>,
    /// The JSON body; `Null` for a GET or a body that is not JSON.
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Received>>,
    /// Requests counted but not kept (a benchmark's).
    forgotten: AtomicUsize,
    forget: std::sync::atomic::AtomicBool,
    delay_ms: AtomicU64,
    open_streams: AtomicUsize,
}

impl Shared {
    /// Records a request; its number (from 1), which makes the answer's id.
    fn record(&self, api: &'static str, headers: &HeaderMap, body: Value) -> usize {
        if self.forget.load(Ordering::Relaxed) {
            return self.forgotten.fetch_add(1, Ordering::Relaxed) + 1;
        }
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let received =
            Received { api, authorization: header(header::AUTHORIZATION.as_str()), api_key: header("x-api-key"), body };
        let mut requests = self.requests.lock().expect("requests lock");
        requests.push(received);
        requests.len()
    }
}

/// The fake server; stops when dropped.
pub struct FakeModels {
    /// Where it listens (loopback).
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`, or `https://localhost:PORT` over TLS.
    origin: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FakeModels {
    /// Starts it on `127.0.0.1:0`.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fake models listener");
        let addr = listener.local_addr().expect("local addr");
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("fake models server");
        });
        Self { addr, origin: format!("http://{addr}"), shared, task }
    }

    /// Starts it over HTTPS on `127.0.0.1:0`, as `localhost`, with a new self-signed
    /// certificate; that certificate too (PEM), which a client must trust to call it.
    pub async fn start_tls() -> (Self, String) {
        let issued = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(issued.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![issued.cert.der().clone()], key)
            .expect("a TLS server config");
        let shared = Arc::new(Shared::default());
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind the fake models listener");
        let addr = tcp.local_addr().expect("local addr");
        let listener = TlsListener { tcp, acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)) };
        let app = router(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("fake models server");
        });
        let fake = Self { addr, origin: format!("https://localhost:{}", addr.port()), shared, task };
        (fake, issued.cert.pem())
    }

    /// The base URL an OpenAI client takes (`OPENAI_BASE_URL`): `http://127.0.0.1:PORT/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.origin)
    }

    /// The base URL an Anthropic client takes (`ANTHROPIC_BASE_URL`):
    /// `http://127.0.0.1:PORT` (the client appends `/v1/messages`).
    pub fn anthropic_base_url(&self) -> String {
        self.origin.clone()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Received> {
        self.shared.requests.lock().expect("requests lock").clone()
    }

    /// Stops keeping requests (a benchmark's calls would fill memory): [`Self::requests`]
    /// stays as it was.
    pub fn forget_requests(&self) {
        self.shared.forget.store(true, Ordering::Relaxed);
    }

    /// Sets the pause between two chunks of a stream (0, the default, sends them at once);
    /// it applies to streams started afterwards.
    pub fn set_delay(&self, ms: u64) {
        self.shared.delay_ms.store(ms, Ordering::Relaxed);
    }

    /// How many streamed answers are being sent now: one ends when its last chunk is sent or
    /// when its body is dropped (the client hung up).
    pub fn open_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::SeqCst)
    }
}

impl Drop for FakeModels {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the model answers, the same for both APIs.
enum Answer {
    Text(&'static str),
    /// A call of the tool with this name.
    ToolCall(Value),
}

impl Answer {
    fn choose(first_tool: Option<Value>, has_tool_result: bool) -> Self {
        match first_tool {
            Some(name) if !has_tool_result => Self::ToolCall(name),
            _ => Self::Text(if has_tool_result { REPLY_AFTER_TOOL } else { REPLY }),
        }
    }
}

/// The text of the last user message: its string content, or its text blocks joined.
fn last_user_text(messages: &Value) -> Option<String> {
    let message = messages.as_array()?.iter().rev().find(|m| m["role"] == "user")?;
    match &message["content"] {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => {
            Some(blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect())
        }
        _ => None,
    }
}

/// Pieces of a few characters each, as a model streams them.
fn pieces(text: &str) -> Vec<String> {
    text.chars().collect::<Vec<_>>().chunks(6).map(String::from_iter).collect()
}

fn parse(body: &Bytes) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// Counts a stream as open from its creation until it is dropped.
struct OpenStream(Arc<Shared>);

impl OpenStream {
    fn new(shared: Arc<Shared>) -> Self {
        shared.open_streams.fetch_add(1, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.open_streams.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A `text/event-stream` answer sending `frames` one at a time, with the configured delay
/// between two of them.
fn event_stream(shared: &Arc<Shared>, frames: Vec<String>) -> Response {
    let delay = Duration::from_millis(shared.delay_ms.load(Ordering::Relaxed));
    let open = OpenStream::new(shared.clone());
    let body = futures::stream::unfold((frames.into_iter(), open, true), move |(mut frames, open, first)| async move {
        let frame = frames.next()?;
        if !first && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Some((Ok::<_, Infallible>(Bytes::from(frame)), (frames, open, false)))
    });
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    (StatusCode::OK, headers, Body::from_stream(body)).into_response()
}

async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    shared.record("models", &headers, Value::Null);
    let model = json!({"id": LISTED_MODEL, "object": "model", "created": 0, "owned_by": "fake"});
    Json(json!({"object": "list", "data": [model]})).into_response()
}

/// The usage of an answer with `choices` choices: the prompt once, the completion of each.
fn openai_usage(choices: i64) -> Value {
    json!({
        "prompt_tokens": OPENAI_PROMPT_TOKENS,
        "completion_tokens": OPENAI_COMPLETION_TOKENS * choices,
        "total_tokens": OPENAI_PROMPT_TOKENS + OPENAI_COMPLETION_TOKENS * choices,
        "prompt_tokens_details": {"cached_tokens": OPENAI_CACHED_TOKENS},
    })
}

async fn chat_completions(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let request = parse(&body);
    let number = shared.record("openai", &headers, request.clone());
    if last_user_text(&request["messages"]).as_deref() == Some(FAIL_PROMPT) {
        let error = json!({"error": {"message": "upstream overloaded", "type": "overloaded_error"}});
        return (StatusCode::from_u16(529).expect("529 is a status"), Json(error)).into_response();
    }
    let has_tool_result = request["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let first_tool = request["tools"].as_array().and_then(|tools| tools.first()).map(|t| t["function"]["name"].clone());
    let answer = Answer::choose(first_tool, has_tool_result);
    let id = format!("chatcmpl-roost-{number}");
    let model = &request["model"];
    let finish_reason = match answer {
        Answer::ToolCall(_) => "tool_calls",
        Answer::Text(_) => "stop",
    };
    let choices = request["n"].as_i64().unwrap_or(1).max(1);
    if request["stream"] != true {
        let message = match &answer {
            Answer::ToolCall(name) => {
                let call = json!({"id": TOOL_CALL_ID, "type": "function",
                    "function": {"name": name, "arguments": TOOL_ARGUMENTS}});
                json!({"role": "assistant", "content": null, "tool_calls": [call]})
            }
            Answer::Text(text) => json!({"role": "assistant", "content": text}),
        };
        return Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "system_fingerprint": "fp_roost",
            "service_tier": "default",
            "choices": (0..choices)
                .map(|index| json!({"index": index, "message": message, "finish_reason": finish_reason, "logprobs": null}))
                .collect::<Vec<_>>(),
            "usage": openai_usage(choices),
        }))
        .into_response();
    }
    let include_usage = request["stream_options"]["include_usage"] == true;
    let chunk = |choices: Value, usage: Option<Value>| {
        let mut chunk = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "system_fingerprint": "fp_roost",
            "service_tier": "default",
            "choices": choices,
        });
        if include_usage {
            chunk["usage"] = usage.unwrap_or(Value::Null);
        }
        format!("data: {chunk}\n\n")
    };
    let mut frames = Vec::new();
    // Each choice in turn, its chunks naming its index.
    for index in 0..choices {
        let delta = |delta: Value, finish_reason: Value| {
            chunk(json!([{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]), None)
        };
        frames.push(delta(json!({"role": "assistant", "content": ""}), Value::Null));
        match &answer {
            Answer::ToolCall(name) => {
                let call = json!({"index": 0, "id": TOOL_CALL_ID, "type": "function",
                    "function": {"name": name, "arguments": ""}});
                frames.push(delta(json!({"tool_calls": [call]}), Value::Null));
                for piece in pieces(TOOL_ARGUMENTS) {
                    let call = json!({"index": 0, "function": {"arguments": piece}});
                    frames.push(delta(json!({"tool_calls": [call]}), Value::Null));
                }
            }
            Answer::Text(text) => {
                frames.extend(pieces(text).into_iter().map(|piece| delta(json!({"content": piece}), Value::Null)));
            }
        }
        frames.push(delta(json!({}), json!(finish_reason)));
    }
    if include_usage {
        frames.push(chunk(json!([]), Some(openai_usage(choices))));
    }
    frames.push("data: [DONE]\n\n".to_owned());
    event_stream(&shared, frames)
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let request = parse(&body);
    let number = shared.record("anthropic", &headers, request.clone());
    if last_user_text(&request["messages"]).as_deref() == Some(FAIL_PROMPT) {
        let error = json!({"type": "error", "error": {"type": "overloaded_error", "message": "upstream overloaded"}});
        return (StatusCode::from_u16(529).expect("529 is a status"), Json(error)).into_response();
    }
    let has_tool_result = request["messages"].as_array().is_some_and(|messages| {
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .any(|m| m["content"].as_array().is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result")))
    });
    let first_tool = request["tools"].as_array().and_then(|tools| tools.first()).map(|t| t["name"].clone());
    let answer = Answer::choose(first_tool, has_tool_result);
    let id = format!("msg_roost_{number}");
    let model = &request["model"];
    let stop_reason = match answer {
        Answer::ToolCall(_) => "tool_use",
        Answer::Text(_) => "end_turn",
    };
    let usage = |output_tokens: i64| {
        json!({
            "input_tokens": ANTHROPIC_INPUT_TOKENS,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": ANTHROPIC_CACHE_WRITE_TOKENS,
            "cache_read_input_tokens": ANTHROPIC_CACHE_READ_TOKENS,
        })
    };
    let message = |content: Value, stop_reason: Value, usage: Value| {
        json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": null, "usage": usage})
    };
    let tool_input: Value = serde_json::from_str(TOOL_ARGUMENTS).expect("TOOL_ARGUMENTS is JSON");
    if request["stream"] != true {
        let block = match &answer {
            Answer::ToolCall(name) => json!({"type": "tool_use", "id": TOOL_USE_ID, "name": name, "input": tool_input}),
            Answer::Text(text) => json!({"type": "text", "text": text}),
        };
        return Json(message(json!([block]), json!(stop_reason), usage(ANTHROPIC_OUTPUT_TOKENS))).into_response();
    }
    let event = |data: Value| format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or_default());
    let mut frames = vec![
        event(json!({"type": "message_start", "message": message(json!([]), Value::Null, usage(1))})),
        event(json!({"type": "ping"})),
    ];
    let (block, deltas) = match &answer {
        Answer::ToolCall(name) => (
            json!({"type": "tool_use", "id": TOOL_USE_ID, "name": name, "input": {}}),
            pieces(TOOL_ARGUMENTS)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect(),
        ),
        Answer::Text(text) => (
            json!({"type": "text", "text": ""}),
            pieces(text).into_iter().map(|p| json!({"type": "text_delta", "text": p})).collect::<Vec<_>>(),
        ),
    };
    frames.push(event(json!({"type": "content_block_start", "index": 0, "content_block": block})));
    frames.extend(
        deltas.into_iter().map(|delta| event(json!({"type": "content_block_delta", "index": 0, "delta": delta}))),
    );
    frames.push(event(json!({"type": "content_block_stop", "index": 0})));
    frames.push(event(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": ANTHROPIC_OUTPUT_TOKENS},
    })));
    frames.push(event(json!({"type": "message_stop"})));
    event_stream(&shared, frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn openai_stream(fake: &FakeModels, stream_options: Value) -> Vec<Value> {
        let mut request = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
        if !stream_options.is_null() {
            request["stream_options"] = stream_options;
        }
        let url = format!("{}/chat/completions", fake.openai_base_url());
        let text = reqwest::Client::new().post(url).json(&request).send().await.unwrap().text().await.unwrap();
        let data: Vec<&str> = text.split("\n\n").filter_map(|frame| frame.strip_prefix("data: ")).collect();
        assert_eq!(data.last(), Some(&"[DONE]"));
        data[..data.len() - 1].iter().map(|chunk| serde_json::from_str(chunk).unwrap()).collect()
    }

    #[tokio::test]
    async fn an_openai_stream_ends_with_usage_only_when_asked() {
        let fake = FakeModels::start().await;
        let plain = openai_stream(&fake, Value::Null).await;
        assert!(
            plain.iter().all(|chunk| chunk.get("usage").is_none() && chunk["choices"].as_array().unwrap().len() == 1)
        );
        let text: String = plain.iter().filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str()).collect();
        assert_eq!(text, REPLY);

        let with_usage = openai_stream(&fake, json!({"include_usage": true})).await;
        let (last, rest) = with_usage.split_last().unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["prompt_tokens"], OPENAI_PROMPT_TOKENS);
        assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], OPENAI_CACHED_TOKENS);
        assert!(rest.iter().all(|chunk| chunk["usage"].is_null() && chunk.get("usage").is_some()));
        assert_eq!(fake.requests().len(), 2);
        assert_eq!(fake.open_streams(), 0);
    }

    #[tokio::test]
    async fn a_stream_the_client_drops_is_closed() {
        let fake = FakeModels::start().await;
        fake.set_delay(200);
        let request = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
        let url = format!("{}/v1/messages", fake.anthropic_base_url());
        let mut response = reqwest::Client::new().post(url).json(&request).send().await.unwrap();
        assert!(response.chunk().await.unwrap().unwrap().starts_with(b"event: message_start"));
        assert_eq!(fake.open_streams(), 1);
        drop(response);
        for _ in 0..100 {
            if fake.open_streams() == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the stream stayed open after the client hung up");
    }
}
