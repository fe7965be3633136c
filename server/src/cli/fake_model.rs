//! `roost fake-model`: an offline, deterministic OpenAI-compatible Chat Completions server.
//!
//! Why it exists: to try roost's observing side without a model account, a key or the
//! network (README step 4 runs `examples/python` against it), and so that the example's CI
//! test (tests/tests/suite/senders/example.rs) runs the real example, the official OpenAI
//! SDK and its official OpenTelemetry instrumentation, against this very binary. It is not
//! a model: every answer follows from the request alone.
//!
//! - `POST /v1/chat/completions`, non-streamed, or streamed as server-sent events with
//!   `"stream": true` (and a last chunk with the usage when `stream_options.include_usage`
//!   is set, as OpenAI does).
//!   - A request that offers `tools` and whose conversation has no `tool` message yet (and
//!     whose `tool_choice` is not `"none"`) is answered with one call of the first tool; its
//!     arguments hold each required string parameter, filled from the last user message.
//!   - Any other request is answered with a short text that quotes the last tool result or,
//!     failing that, the last user message.
//! - `GET /v1/models`: the models it answers as.
//!
//! The answer's `model` is the requested one when roost's built-in price book prices it,
//! else [`DEFAULT_MODEL`], so every call observed through roost gets a cost. Its `usage` is
//! a plausible count: about one token per four characters of the text, plus a few per
//! message, as tokenizers roughly do. A request that is not JSON or not a chat completion
//! request is answered 400 with an OpenAI-style JSON error; the API key is not checked.

use std::{
    net::SocketAddr,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use clap::Args;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::billing::prices::PriceBook;

/// The model answers name when the requested one is not in the built-in price book.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// Flags of `roost fake-model`.
#[derive(Debug, Args)]
pub struct FakeModelArgs {
    /// Where to listen: clients take `http://<this>/v1` as their OpenAI base URL. Port 0
    /// picks a free port (logged as `listening`).
    #[arg(long, default_value = "127.0.0.1:8901", value_name = "HOST:PORT")]
    listen: SocketAddr,
}

/// Serves until SIGINT or SIGTERM; exit 1 when it cannot listen.
pub async fn run(args: FakeModelArgs) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("roost: cannot listen on {}: {err}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    let addr = listener.local_addr().unwrap_or(args.listen);
    tracing::info!(%addr, base_url = %format!("http://{addr}/v1"), "listening");
    let stop = CancellationToken::new();
    crate::shutdown::cancel_on_signal(stop.clone());
    match axum::serve(listener, router()).with_graceful_shutdown(stop.cancelled_owned()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("roost: the fake model stopped: {err}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Clone, Default)]
struct Served {
    /// Answers so far, numbering the completion ids.
    answers: Arc<AtomicU64>,
}

/// The fake model's routes.
pub fn router() -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .fallback(|| async {
            error(StatusCode::NOT_FOUND, "the fake model serves /v1/chat/completions and /v1/models")
        })
        .with_state(Served::default())
}

fn error(status: StatusCode, message: &str) -> Response {
    let kind = if status == StatusCode::NOT_FOUND { "not_found_error" } else { "invalid_request_error" };
    (status, Json(json!({"error": {"message": message, "type": kind, "param": null, "code": null}}))).into_response()
}

async fn models() -> Json<Value> {
    let data: Vec<Value> = PriceBook::builtin()
        .model_names()
        .map(|id| json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "roost-fake-model"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

async fn chat_completions(State(served): State<Served>, body: Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(err) => return error(StatusCode::BAD_REQUEST, &format!("the body is not JSON: {err}")),
    };
    let answer = match answer(&request) {
        Ok(answer) => answer,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let number = served.answers.fetch_add(1, Ordering::Relaxed) + 1;
    let id = format!("chatcmpl-fake-{number}");
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    if request["stream"] == true {
        let include_usage = request["stream_options"]["include_usage"] == true;
        let body = answer.stream(&id, created, include_usage);
        ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], body).into_response()
    } else {
        Json(answer.completion(&id, created)).into_response()
    }
}

/// What the fake model answers a request with.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The model the answer names.
    pub model: String,
    /// The reply, or the tool call.
    pub reply: Reply,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: i64,
    /// `usage.completion_tokens`.
    pub completion_tokens: i64,
}

/// The assistant's message.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A text reply (`finish_reason` `stop`).
    Text(String),
    /// One tool call (`finish_reason` `tool_calls`).
    ToolCall {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments, a JSON object as a string (as OpenAI sends them).
        arguments: String,
    },
}

/// The answer to a chat completion request, or why the request is not one.
pub fn answer(request: &Value) -> Result<Answer, String> {
    let request = request.as_object().ok_or("the body must be a JSON object")?;
    let model = match request.get("model") {
        Some(Value::String(model)) if !model.trim().is_empty() => model.as_str(),
        _ => return Err("`model` must be a non-empty string".to_owned()),
    };
    let messages = match request.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        _ => return Err("`messages` must be a non-empty array".to_owned()),
    };
    for (i, message) in messages.iter().enumerate() {
        if !message["role"].is_string() {
            return Err(format!("`messages[{i}]` must be an object with a string `role`"));
        }
    }
    let tools = match request.get("tools") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(tools)) => &tools[..],
        Some(_) => return Err("`tools` must be an array".to_owned()),
    };
    let first_tool = match tools.first() {
        Some(tool) => match tool["function"]["name"].as_str() {
            Some(name) if !name.is_empty() => Some((name, &tool["function"]["parameters"])),
            _ => return Err("`tools[0].function.name` must be a non-empty string".to_owned()),
        },
        None => None,
    };
    if let Some(stream) = request.get("stream")
        && !stream.is_boolean()
        && !stream.is_null()
    {
        return Err("`stream` must be a boolean".to_owned());
    }

    let last_user = messages.iter().rev().find(|m| m["role"] == "user").map(|m| text_of(&m["content"]));
    let last = messages.last().expect("messages is not empty");
    let has_tool_result = messages.iter().any(|m| m["role"] == "tool");
    let tools_allowed = request.get("tool_choice").is_none_or(|choice| choice != "none");
    let reply = match first_tool {
        Some((name, parameters)) if !has_tool_result && tools_allowed => Reply::ToolCall {
            id: format!("call_fake_{}", messages.len()),
            name: name.to_owned(),
            arguments: Value::Object(arguments(parameters, last_user.as_deref().unwrap_or_default())).to_string(),
        },
        _ if last["role"] == "tool" => {
            format!("(fake model) The tool answered: {}", shorten(&text_of(&last["content"]))).into()
        }
        _ => match last_user {
            Some(said) => format!("(fake model) You said: \"{}\"", shorten(&said)).into(),
            None => "(fake model) Hello! Ask me something.".to_owned().into(),
        },
    };

    let prompt_text: usize = messages.iter().map(|m| text_of(&m["content"]).len()).sum::<usize>()
        + tools.iter().map(|t| t.to_string().len()).sum::<usize>();
    let completion_text = match &reply {
        Reply::Text(text) => text.len(),
        Reply::ToolCall { name, arguments, .. } => name.len() + arguments.len(),
    };
    let answered_as = if PriceBook::builtin().lookup(model).is_some() { model } else { DEFAULT_MODEL };
    Ok(Answer {
        model: answered_as.to_owned(),
        reply,
        prompt_tokens: tokens(prompt_text) + 4 * messages.len() as i64 + 3,
        completion_tokens: tokens(completion_text) + 1,
    })
}

impl From<String> for Reply {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

/// About one token per four characters (what OpenAI's tokenizers give for English).
fn tokens(chars: usize) -> i64 {
    chars.div_ceil(4) as i64
}

/// A message's text: its `content` string, or its text parts joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(" "),
        _ => String::new(),
    }
}

/// At most 200 characters of `text`, on one line.
fn shorten(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

/// Arguments for a tool with JSON schema `parameters`: each required string property,
/// the first of its `enum` when it has one, else the last capitalised word of what the
/// user said ("What is the weather in Paris?" gives "Paris"), else its last word.
fn arguments(parameters: &Value, said: &str) -> Map<String, Value> {
    let words: Vec<&str> = said
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    let guess = words
        .iter()
        .skip(1)
        .rev()
        .find(|w| w.starts_with(char::is_uppercase))
        .or(words.last())
        .map_or("example", |w| w);
    let mut arguments = Map::new();
    for name in parameters["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        let property = &parameters["properties"][name];
        if property["type"] != "string" {
            continue;
        }
        let value = property["enum"].as_array().and_then(|e| e.first()).and_then(Value::as_str).unwrap_or(guess);
        arguments.insert(name.to_owned(), Value::String(value.to_owned()));
    }
    arguments
}

impl Answer {
    fn usage(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        })
    }

    fn finish_reason(&self) -> &'static str {
        match self.reply {
            Reply::Text(_) => "stop",
            Reply::ToolCall { .. } => "tool_calls",
        }
    }

    /// The non-streamed answer: a `chat.completion` object.
    pub fn completion(&self, id: &str, created: u64) -> Value {
        let message = match &self.reply {
            Reply::Text(text) => json!({"role": "assistant", "content": text, "refusal": null}),
            Reply::ToolCall { id, name, arguments } => json!({
                "role": "assistant",
                "content": null,
                "refusal": null,
                "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}],
            }),
        };
        json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": self.model,
            "system_fingerprint": "fp_roost_fake",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason(), "logprobs": null}],
            "usage": self.usage(),
        })
    }

    /// The streamed answer: `chat.completion.chunk` events (the role, the text in a few
    /// pieces or the tool call, the finish reason, then the usage when asked for), and
    /// `[DONE]`.
    pub fn stream(&self, id: &str, created: u64, include_usage: bool) -> String {
        let chunk = |delta: Value, finish: Option<&str>| {
            let mut chunk = json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model,
                "system_fingerprint": "fp_roost_fake",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
            });
            if include_usage {
                chunk["usage"] = Value::Null;
            }
            chunk
        };
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        match &self.reply {
            Reply::Text(text) => {
                // A few pieces, split after spaces, so clients see a real stream.
                let mut piece = String::new();
                for (i, word) in text.split_inclusive(' ').enumerate() {
                    piece.push_str(word);
                    if i % 4 == 3 {
                        chunks.push(chunk(json!({"content": std::mem::take(&mut piece)}), None));
                    }
                }
                if !piece.is_empty() {
                    chunks.push(chunk(json!({"content": piece}), None));
                }
            }
            Reply::ToolCall { id, name, arguments } => {
                let call =
                    json!({"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
                chunks.push(chunk(json!({"tool_calls": [call]}), None));
                let args = json!({"index": 0, "function": {"arguments": arguments}});
                chunks.push(chunk(json!({"tool_calls": [args]}), None));
            }
        }
        chunks.push(chunk(json!({}), Some(self.finish_reason())));
        if include_usage {
            let mut last = chunk(json!({}), None);
            last["choices"] = json!([]);
            last["usage"] = self.usage();
            chunks.push(last);
        }
        let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        body.push_str("data: [DONE]\n\n");
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather_tool() -> Value {
        json!({"type": "function", "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                               "days": {"type": "integer"}},
                "required": ["city", "unit", "days"],
            },
        }})
    }

    #[test]
    fn a_plain_request_gets_a_text_quoting_the_user_and_a_priced_model() {
        let request = json!({"model": "gpt-4o-mini", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is   the capital\nof France?"},
        ]});
        let answer = answer(&request).unwrap();
        assert_eq!(answer.reply, Reply::Text("(fake model) You said: \"What is the capital of France?\"".into()));
        assert_eq!(answer.model, "gpt-4o-mini");
        // "Be brief." (9) + the question (32) = 41 characters: 11 tokens; 4 per message; 3.
        assert_eq!(answer.prompt_tokens, 11 + 8 + 3);
        assert!(answer.completion_tokens > 5, "{answer:?}");
        assert_eq!(answer, super::answer(&request).unwrap(), "deterministic");
    }

    #[test]
    fn an_unpriced_model_is_answered_as_the_default_and_priced_variants_stay() {
        let messages = json!([{"role": "user", "content": "hi"}]);
        let model = |name: &str| answer(&json!({"model": name, "messages": messages})).unwrap().model;
        assert_eq!(model("my-local-llama"), DEFAULT_MODEL);
        assert_eq!(model("gpt-4o-mini-2024-07-18"), "gpt-4o-mini-2024-07-18");
        assert_eq!(model("gpt-4o"), "gpt-4o");
        assert!(PriceBook::builtin().lookup(DEFAULT_MODEL).is_some(), "the default is priced");
    }

    #[test]
    fn tools_offered_before_any_tool_result_get_one_call_of_the_first_tool() {
        let other = json!({"type": "function", "function": {"name": "other", "parameters": {}}});
        let request = json!({"model": "gpt-4o-mini", "tools": [weather_tool(), other], "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris today?"}]},
        ]});
        let answer = answer(&request).unwrap();
        let Reply::ToolCall { id, name, arguments } = &answer.reply else { panic!("a tool call: {answer:?}") };
        assert_eq!((id.as_str(), name.as_str()), ("call_fake_1", "get_weather"));
        let arguments: Value = serde_json::from_str(arguments).unwrap();
        assert_eq!(arguments, json!({"city": "Paris", "unit": "celsius"}), "required strings only, enums' first");
        let completion = answer.completion("chatcmpl-1", 1);
        assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(completion["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
        assert!(completion["choices"][0]["message"]["content"].is_null());

        // No required string: `{}`. tool_choice "none": a text.
        let bare = json!({"model": "gpt-4o-mini", "tools": [other], "messages": [{"role": "user", "content": "go"}]});
        let Reply::ToolCall { arguments, .. } = super::answer(&bare).unwrap().reply else { panic!("a tool call") };
        assert_eq!(arguments, "{}");
        let mut none = bare.clone();
        none["tool_choice"] = json!("none");
        assert!(matches!(super::answer(&none).unwrap().reply, Reply::Text(_)));
    }

    #[test]
    fn a_tool_result_gets_a_text_that_quotes_it() {
        let request = json!({"model": "gpt-4o-mini", "tools": [weather_tool()], "messages": [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_fake_1", "type": "function",
              "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_fake_1", "content": "sunny, 24 C"},
        ]});
        let answer = answer(&request).unwrap();
        assert_eq!(answer.reply, Reply::Text("(fake model) The tool answered: sunny, 24 C".into()));
        // A later user message, with the tool result still in the conversation: a text
        // quoting the user.
        let mut later = request.clone();
        later["messages"].as_array_mut().unwrap().push(json!({"role": "user", "content": "Thanks!"}));
        assert_eq!(super::answer(&later).unwrap().reply, Reply::Text("(fake model) You said: \"Thanks!\"".into()));
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        for (request, expected) in [
            (json!([]), "JSON object"),
            (json!({"messages": [{"role": "user", "content": "hi"}]}), "`model`"),
            (json!({"model": "gpt-4o-mini"}), "`messages`"),
            (json!({"model": "gpt-4o-mini", "messages": []}), "`messages`"),
            (json!({"model": "gpt-4o-mini", "messages": ["hi"]}), "`messages[0]`"),
            (json!({"model": "gpt-4o-mini", "messages": [{"role": "user"}], "tools": {}}), "`tools`"),
            (json!({"model": "gpt-4o-mini", "messages": [{"role": "user"}], "tools": [{}]}), "`tools[0]"),
            (json!({"model": "gpt-4o-mini", "messages": [{"role": "user"}], "stream": "yes"}), "`stream`"),
        ] {
            let err = answer(&request).unwrap_err();
            assert!(err.contains(expected), "{request}: {err}");
        }
    }

    /// The stream: the text in pieces that add up to the reply, the finish reason, the
    /// usage last (only when asked for), then `[DONE]`.
    #[test]
    fn a_stream_carries_the_answer_and_its_usage_last() {
        let request =
            json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Tell me a long story please"}]});
        let answer = answer(&request).unwrap();
        let events = |body: String| -> Vec<String> {
            body.split("\n\n").filter(|e| !e.is_empty()).map(|e| e.strip_prefix("data: ").unwrap().to_owned()).collect()
        };
        let streamed = events(answer.stream("chatcmpl-1", 1, true));
        assert_eq!(streamed.last().unwrap(), "[DONE]");
        let chunks: Vec<Value> =
            streamed[..streamed.len() - 1].iter().map(|c| serde_json::from_str(c).unwrap()).collect();
        let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
        let Reply::Text(reply) = &answer.reply else { panic!() };
        assert_eq!(&text, reply);
        assert!(chunks.len() > 4, "in pieces: {chunks:?}");
        let usage = chunks.last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["prompt_tokens"], answer.prompt_tokens);
        assert_eq!(usage["usage"]["completion_tokens"], answer.completion_tokens);
        assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "stop");
        assert!(chunks[..chunks.len() - 1].iter().all(|c| c["usage"].is_null()));

        let plain = events(answer.stream("chatcmpl-1", 1, false));
        let last: Value = serde_json::from_str(&plain[plain.len() - 2]).unwrap();
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert!(plain.iter().all(|e| !e.contains("prompt_tokens")), "no usage unless asked for");

        let tools = json!({"model": "gpt-4o-mini", "stream": true, "tools": [weather_tool()],
                           "messages": [{"role": "user", "content": "Weather in Oslo?"}]});
        let streamed = events(super::answer(&tools).unwrap().stream("chatcmpl-2", 1, true));
        let chunks: Vec<Value> =
            streamed[..streamed.len() - 1].iter().map(|c| serde_json::from_str(c).unwrap()).collect();
        let arguments: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
            .collect();
        assert_eq!(arguments, r#"{"city":"Oslo","unit":"celsius"}"#);
        assert_eq!(chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "get_weather");
    }

    /// Over HTTP: the routes, and a 400 JSON error for a body that is not JSON.
    #[tokio::test]
    async fn it_serves_openai_routes_and_refuses_bad_bodies_with_json() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, router()).await });
        let http = reqwest::Client::new();
        let url = format!("{base}/chat/completions");
        let bad = http.post(&url).header("content-type", "application/json").body("{nope").send().await.unwrap();
        assert_eq!(bad.status(), 400);
        let bad: Value = bad.json().await.unwrap();
        assert_eq!(bad["error"]["type"], "invalid_request_error", "{bad}");
        let no_model = http.post(&url).json(&json!({"messages": []})).send().await.unwrap();
        assert_eq!(no_model.status(), 400);
        let request = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
        let ok: Value = http.post(&url).json(&request).send().await.unwrap().json().await.unwrap();
        assert_eq!(ok["object"], "chat.completion");
        assert_eq!(ok["id"], "chatcmpl-fake-1");
        assert!(ok["usage"]["prompt_tokens"].as_i64().unwrap() > 0);
        let mut streamed = request.clone();
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
        let sse = http.post(&url).json(&streamed).send().await.unwrap();
        assert_eq!(sse.headers()["content-type"], "text/event-stream");
        let body = sse.text().await.unwrap();
        assert!(body.contains("\"completion_tokens\"") && body.ends_with("data: [DONE]\n\n"), "{body}");
        let models: Value = http.get(format!("{base}/models")).send().await.unwrap().json().await.unwrap();
        assert!(models["data"].as_array().unwrap().iter().any(|m| m["id"] == DEFAULT_MODEL), "{models}");
        let missing = http.get(format!("{base}/embeddings")).send().await.unwrap();
        assert_eq!(missing.status(), 404);
        server.abort();
    }
}
