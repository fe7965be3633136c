//! [`ScriptedModel`]: a fake OpenAI-compatible model for the real agent runtimes
//! (OpenClaw, Hermes Agent) behind roost's model gateway. Unlike [`crate::fake_models`], it
//! answers from what it is sent, so a test proves the runtime kept its conversation and ran
//! its tools:
//!
//! - "remember the word W" → `Noted: W.`
//! - "which word" → `The word was W.` when an earlier user message of the conversation it
//!   was sent asked to remember W, else `No word was given.`
//! - "write the file" → a call of the runtime's write tool (`write` or `write_file`,
//!   whichever it offers) for [`TOOL_FILE`] with [`TOOL_CONTENT`]; once that result is in,
//!   a call of its read tool; once that is in, `The file says: <the read result>`.
//! - "run the command: C" → a call of its shell tool (`exec` or `terminal`) with C; once
//!   the result is in, `The command printed: <the result>`.
//! - anything else → [`HELLO`].
//!
//! "The user's message" is the last user message that is not one OpenClaw adds itself
//! (`<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>…`, after the real one and after every tool
//! result); a fake that took those for the user would ask for its tool forever. Tool
//! rounds stop after [`MAX_TOOL_ROUNDS`] whatever happens, so a runtime cannot loop.
//!
//! Every answer streams when asked (tool calls included) and carries fixed usage
//! ([`PROMPT_TOKENS`], [`COMPLETION_TOKENS`]). Every chat request is recorded
//! ([`ScriptedModel::calls`]): its system prompt, its user messages and the tools offered.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, task::JoinHandle};

/// Every answer's prompt tokens.
pub const PROMPT_TOKENS: i64 = 1_000;
/// Every answer's completion tokens.
pub const COMPLETION_TOKENS: i64 = 40;
/// The reply to anything unscripted.
pub const HELLO: &str = "Hello from the scripted model.";
/// The file the tool turn writes, relative to the agent's workspace.
pub const TOOL_FILE: &str = "notes/roost-tool-test.txt";
/// What it writes there.
pub const TOOL_CONTENT: &str = "written by a tool inside the sandbox";
/// The most tool calls one turn gets before the model answers in words.
pub const MAX_TOOL_ROUNDS: usize = 4;
/// The model it answers as.
pub const MODEL: &str = "gpt-4o-mini";

/// One chat request it received.
#[derive(Debug, Clone)]
pub struct ChatCall {
    /// The system prompt (all system messages, joined).
    pub system: String,
    /// The real user messages, in order (OpenClaw's own context messages left out).
    pub user_messages: Vec<String>,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// Tool calls it answered with.
    pub tool_call: Option<String>,
    /// Whether it was asked to stream.
    pub stream: bool,
    /// The whole request.
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    calls: Mutex<Vec<ChatCall>>,
}

/// The fake, on an ephemeral port.
pub struct ScriptedModel {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl ScriptedModel {
    /// Starts it on `127.0.0.1:0`.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the scripted model");
        let addr = listener.local_addr().expect("local addr");
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("scripted model server");
        });
        Self { addr, shared, task }
    }

    /// Its OpenAI base URL: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every chat request so far.
    pub fn calls(&self) -> Vec<ChatCall> {
        self.shared.calls.lock().expect("calls lock").clone()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]}))
}

/// A message's text: a string, or the text of its content parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn is_internal(text: &str) -> bool {
    text.contains("BEGIN_OPENCLAW_INTERNAL_CONTEXT")
}

/// What the model says next.
enum Answer {
    Text(String),
    Tool { name: String, arguments: Value },
}

/// The name of the offered tool called `a` or `b`, and the name of its path argument.
fn tool(request: &Value, names: &[&str]) -> Option<(String, String)> {
    let tools = request["tools"].as_array()?;
    for wanted in names {
        for t in tools {
            if t["function"]["name"] == *wanted {
                let props = t["function"]["parameters"]["properties"].as_object();
                let path = props
                    .and_then(|p| p.keys().find(|k| k.contains("path")).cloned())
                    .unwrap_or_else(|| "path".to_owned());
                return Some(((*wanted).to_owned(), path));
            }
        }
    }
    None
}

fn answer(request: &Value, user: &[String], tool_results: &[String]) -> Answer {
    let last = user.last().map(String::as_str).unwrap_or("");
    if let Some(rest) = last.split("remember the word ").nth(1) {
        let word: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
        return Answer::Text(format!("Noted: {word}."));
    }
    if last.contains("which word") {
        let earlier = user[..user.len().saturating_sub(1)]
            .iter()
            .rev()
            .find_map(|m| m.split("remember the word ").nth(1))
            .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric()).collect::<String>());
        return Answer::Text(match earlier {
            Some(word) => format!("The word was {word}."),
            None => "No word was given.".to_owned(),
        });
    }
    if last.contains("write the file") && tool_results.len() < MAX_TOOL_ROUNDS {
        let write = tool(request, &["write", "write_file"]);
        let read = tool(request, &["read", "read_file"]);
        match (tool_results.len(), write, read) {
            (0, Some((name, path)), _) => {
                return Answer::Tool { name, arguments: json!({ path: TOOL_FILE, "content": TOOL_CONTENT }) };
            }
            (1, _, Some((name, path))) => return Answer::Tool { name, arguments: json!({ path: TOOL_FILE }) },
            (0 | 1, _, _) => return Answer::Text("I have no file tools.".to_owned()),
            _ => {}
        }
    }
    if let Some(command) = last.split("run the command: ").nth(1) {
        if tool_results.is_empty()
            && let Some((name, _)) = tool(request, &["exec", "terminal"])
        {
            return Answer::Tool { name, arguments: json!({ "command": command.trim() }) };
        }
        return Answer::Text(format!("The command printed: {}", tool_results.join("\n")));
    }
    if last.contains("write the file") {
        let read = tool_results.last().cloned().unwrap_or_default();
        return Answer::Text(format!("The file says: {read}"));
    }
    Answer::Text(HELLO.to_owned())
}

async fn chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": {"message": "not JSON"}}))).into_response();
    };
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let system: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| text_of(&m["content"]))
        .collect();
    let user: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| text_of(&m["content"]))
        .filter(|t| !is_internal(t))
        .collect();
    // Tool results since the last real user message.
    let last_user = messages.iter().rposition(|m| m["role"] == "user" && !is_internal(&text_of(&m["content"])));
    let tool_results: Vec<String> = messages
        .iter()
        .skip(last_user.map_or(0, |i| i + 1))
        .filter(|m| m["role"] == "tool")
        .map(|m| text_of(&m["content"]))
        .collect();
    let tools: Vec<String> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(String::from))
        .collect();
    let stream = request["stream"] == true;
    let answer = answer(&request, &user, &tool_results);
    shared.calls.lock().expect("calls lock").push(ChatCall {
        system: system.join("\n"),
        user_messages: user,
        tools,
        tool_call: match &answer {
            Answer::Tool { name, .. } => Some(name.clone()),
            Answer::Text(_) => None,
        },
        stream,
        body: request.clone(),
    });
    let usage = json!({
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
    });
    let id = format!("chatcmpl-{}", next_id());
    let (message, delta, finish) = match &answer {
        Answer::Text(text) => (json!({"role": "assistant", "content": text}), json!({"content": text}), "stop"),
        Answer::Tool { name, arguments } => {
            let call = json!({"id": format!("call_{}", next_id()), "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}});
            let mut streamed = call.clone();
            streamed["index"] = json!(0);
            (
                json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                json!({"tool_calls": [streamed]}),
                "tool_calls",
            )
        }
    };
    if !stream {
        return Json(json!({
            "id": id, "object": "chat.completion", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }))
        .into_response();
    }
    let chunk = |choices: Value, usage: Value| {
        let mut c =
            json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": MODEL, "choices": choices});
        if !usage.is_null() {
            c["usage"] = usage;
        }
        format!("data: {c}\n\n")
    };
    let mut frames = vec![
        chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]), Value::Null),
        chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]), Value::Null),
        chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}]), Value::Null),
    ];
    if request["stream_options"]["include_usage"] == true {
        frames.push(chunk(json!([]), usage));
    }
    frames.push("data: [DONE]\n\n".to_owned());
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    (StatusCode::OK, headers, Body::from(frames.concat())).into_response()
}

fn next_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{:08}", NEXT.fetch_add(1, Ordering::Relaxed))
}
