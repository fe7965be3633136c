//! [`FakeOpenAi`]: an OpenAI-compatible chat completions server on an ephemeral port, for
//! running real GenAI instrumentation libraries (tests/senders/) against something that
//! answers like OpenAI, with fixed, known usage.
//!
//! `POST /v1/chat/completions` (non-streaming) answers model [`MODEL`] with usage
//! [`PROMPT_TOKENS`] / [`COMPLETION_TOKENS`] ([`CACHED_TOKENS`] of the prompt cached):
//! - a request with tools and no tool result yet: a call of its first tool with
//!   [`TOOL_ARGUMENTS`] (id [`TOOL_CALL_ID`]);
//! - a request carrying a tool result: [`REPLY_AFTER_TOOL`];
//! - any other: [`REPLY`].
//!
//! A streaming request (`"stream": true`) is refused with 400: no driver streams, and a
//! library that starts to must fail loudly rather than be answered wrongly.
//! tests/senders/capture.py mirrors these answers; change both together.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{Json, Router, extract::State, http::StatusCode, response::IntoResponse, routing::post};
use serde_json::{Value, json};
use tokio::{net::TcpListener, task::JoinHandle};

/// The model every answer names (a dated variant, as OpenAI answers).
pub const MODEL: &str = "gpt-4o-mini-2024-07-18";
/// The answer to a plain request.
pub const REPLY: &str = "The capital of France is Paris.";
/// The answer once a tool's result is in the conversation.
pub const REPLY_AFTER_TOOL: &str = "It is sunny and 24 C in Paris.";
/// The id of the tool call the model makes.
pub const TOOL_CALL_ID: &str = "call_roost_1";
/// The arguments of the tool call the model makes (a JSON string, as OpenAI sends them).
pub const TOOL_ARGUMENTS: &str = r#"{"city":"Paris"}"#;
/// Every answer's `usage.prompt_tokens`.
pub const PROMPT_TOKENS: i64 = 21;
/// Every answer's `usage.completion_tokens`.
pub const COMPLETION_TOKENS: i64 = 7;
/// Every answer's `usage.prompt_tokens_details.cached_tokens` (part of the prompt tokens).
pub const CACHED_TOKENS: i64 = 5;

type Requests = Arc<Mutex<Vec<Value>>>;

/// The fake server; stops when dropped.
pub struct FakeOpenAi {
    /// Where it listens (loopback).
    pub addr: SocketAddr,
    requests: Requests,
    task: JoinHandle<()>,
}

impl FakeOpenAi {
    /// Starts it on `127.0.0.1:0`.
    pub async fn start() -> Self {
        let requests = Requests::default();
        let app = Router::new().route("/v1/chat/completions", post(chat_completions)).with_state(requests.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fake OpenAI listener");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("fake OpenAI server");
        });
        Self { addr, requests, task }
    }

    /// The base URL an OpenAI client takes (`OPENAI_BASE_URL`): `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The JSON bodies of the chat completion requests received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("requests lock").clone()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn chat_completions(State(requests): State<Requests>, Json(request): Json<Value>) -> impl IntoResponse {
    let number = {
        let mut requests = requests.lock().expect("requests lock");
        requests.push(request.clone());
        requests.len()
    };
    if request["stream"] == true {
        let error =
            json!({"error": {"message": "the fake OpenAI server does not stream", "type": "invalid_request_error"}});
        return (StatusCode::BAD_REQUEST, Json(error));
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let has_tool_result = messages.iter().any(|m| m["role"] == "tool");
    let first_tool = request["tools"].as_array().and_then(|tools| tools.first()).cloned();
    let (message, finish_reason) = match first_tool {
        Some(tool) if !has_tool_result => {
            let call = json!({
                "id": TOOL_CALL_ID,
                "type": "function",
                "function": {"name": tool["function"]["name"], "arguments": TOOL_ARGUMENTS},
            });
            (json!({"role": "assistant", "content": null, "tool_calls": [call]}), "tool_calls")
        }
        _ => {
            let text = if has_tool_result { REPLY_AFTER_TOOL } else { REPLY };
            (json!({"role": "assistant", "content": text}), "stop")
        }
    };
    let answer = json!({
        "id": format!("chatcmpl-roost-{number}"),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_roost",
        "service_tier": "default",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": null}],
        "usage": {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
            "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
        },
    });
    (StatusCode::OK, Json(answer))
}
