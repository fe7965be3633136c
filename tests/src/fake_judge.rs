//! [`FakeJudge`]: an OpenAI-compatible upstream for roost's evaluators, on an ephemeral
//! port. Every judge call of [`JUDGE_MODEL`] answers [`ANSWER`] with usage
//! [`PROMPT_TOKENS`] / [`COMPLETION_TOKENS`]; one of [`FAILING_MODEL`] answers 500 (an
//! upstream that is down). Both models are in roost's built-in price book.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{Json, Router, extract::State, http::StatusCode, response::IntoResponse, routing::post};
use serde_json::{Value, json};
use tokio::{net::TcpListener, task::JoinHandle};

/// The judge model that answers.
pub const JUDGE_MODEL: &str = "gpt-4o-mini";
/// A judge model whose upstream fails.
pub const FAILING_MODEL: &str = "gpt-4.1";
/// What the judge says.
pub const ANSWER: &str = "score: 0.8";
/// Every answer's prompt tokens.
pub const PROMPT_TOKENS: i64 = 100;
/// Every answer's completion tokens.
pub const COMPLETION_TOKENS: i64 = 10;
/// What one judge call of [`JUDGE_MODEL`] costs at the built-in price book's price (USD 0.15
/// and 0.60 per million tokens: 15,000 and 60,000 nanocents per token), in nanocents.
pub const CALL_NANOCENTS: i64 = PROMPT_TOKENS * 15_000 + COMPLETION_TOKENS * 60_000;

/// The fake upstream; stops when dropped.
pub struct FakeJudge {
    /// Where it listens (loopback).
    pub addr: SocketAddr,
    calls: Arc<[AtomicU64; 2]>,
    task: JoinHandle<()>,
}

impl FakeJudge {
    /// Starts it on `127.0.0.1:0`.
    pub async fn start() -> Self {
        let calls: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let app = Router::new().route("/v1/chat/completions", post(answer)).with_state(calls.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fake judge");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("fake judge");
        });
        Self { addr, calls, task }
    }

    /// The base URL of `--model-upstream-url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Calls answered with a grade so far.
    pub fn answered(&self) -> u64 {
        self.calls[0].load(Ordering::SeqCst)
    }

    /// Calls answered with 500 so far.
    pub fn failed(&self) -> u64 {
        self.calls[1].load(Ordering::SeqCst)
    }
}

impl Drop for FakeJudge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(calls): State<Arc<[AtomicU64; 2]>>, Json(request): Json<Value>) -> impl IntoResponse {
    if request["model"] == FAILING_MODEL {
        calls[1].fetch_add(1, Ordering::SeqCst);
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "the judge is down"}})));
    }
    let n = calls[0].fetch_add(1, Ordering::SeqCst);
    (
        StatusCode::OK,
        Json(json!({
            "id": format!("chatcmpl-judge-{n}"),
            "object": "chat.completion",
            "model": request["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS},
        })),
    )
}
