//! Model calls as GenAI spans (OpenTelemetry semantic conventions), written into the
//! agent's session through the same path as OTLP ingest, attributed to the agent: so a
//! hosted agent's conversation, tool calls, tokens and costs show on the session and trace
//! pages with no instrumentation in the agent. Messages are always offered; ingest drops
//! them when `--capture-content off`.

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value::Value as Any},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span::SpanKind, status::StatusCode},
};
use serde_json::{Value, json};

use super::{Api, answer::Answer, record::CallRecord};

/// The instrumentation scope of roost's own spans.
const SCOPE: &str = "roost.model_gateway";

pub(crate) fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

pub(crate) fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Any::StringValue(value.to_owned()))
}

pub(crate) fn int(key: &str, value: i64) -> KeyValue {
    kv(key, Any::IntValue(value))
}

fn ns(ms: i64) -> u64 {
    u64::try_from(ms.saturating_mul(1_000_000)).unwrap_or(0)
}

/// One span in a request of its own, from the agent's runtime.
pub(crate) fn request(instance_id: &str, runtime_id: &str, span: Span) -> ExportTraceServiceRequest {
    let resource = Resource {
        attributes: vec![text("service.name", runtime_id), text("roost.instance.id", instance_id)],
        ..Resource::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope { name: SCOPE.to_owned(), ..InstrumentationScope::default() }),
                spans: vec![span],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// Where a call's span goes: the turn's trace, under the turn's span, or a trace of its own.
pub struct Placement {
    /// Trace id.
    pub trace_id: [u8; 16],
    /// Parent span id, if any.
    pub parent: Option<[u8; 8]>,
}

/// The span of one model call.
pub fn call_span(
    call: &CallRecord,
    runtime_id: &str,
    place: &Placement,
    api: Api,
    request_body: &Value,
    answer: &Answer,
    charged_nanocents: i64,
) -> ExportTraceServiceRequest {
    let model = if call.response_model.is_empty() { &call.request_model } else { &call.response_model };
    let mut attributes = vec![
        text("gen_ai.operation.name", "chat"),
        text("gen_ai.provider.name", api.provider()),
        text("gen_ai.request.model", &call.request_model),
        text("session.id", &call.instance_id),
        text("roost.call.id", &call.id),
        text("roost.model_mode", call.model_mode),
        int("roost.charged_nanocents", charged_nanocents),
        kv("gen_ai.request.stream", Any::BoolValue(call.streamed)),
    ];
    if !call.response_model.is_empty() {
        attributes.push(text("gen_ai.response.model", &call.response_model));
    }
    if let Some(id) = &answer.id {
        attributes.push(text("gen_ai.response.id", id));
    }
    if answer.usage.is_some() {
        attributes.push(int("gen_ai.usage.input_tokens", call.input_tokens));
        attributes.push(int("gen_ai.usage.output_tokens", call.output_tokens));
        attributes.push(int("gen_ai.usage.cache_read.input_tokens", call.cache_read_tokens));
        attributes.push(int("gen_ai.usage.cache_creation.input_tokens", call.cache_write_tokens));
        if call.cost_nanocents > 0 {
            // 1 USD = 10^11 nanocents.
            attributes.push(kv("gen_ai.usage.cost", Any::DoubleValue(call.cost_nanocents as f64 / 1e11)));
        }
    }
    if !answer.finish_reasons.is_empty() {
        let reasons =
            answer.finish_reasons.iter().map(|r| AnyValue { value: Some(Any::StringValue(r.clone())) }).collect();
        attributes.push(kv("gen_ai.response.finish_reasons", Any::ArrayValue(ArrayValue { values: reasons })));
    }
    if let Some(ms) = call.first_chunk_ms {
        attributes.push(kv("gen_ai.server.time_to_first_token", Any::DoubleValue(ms as f64 / 1000.0)));
    }
    if call.http_status > 0 {
        attributes.push(int("http.response.status_code", call.http_status));
    }
    if let Some(max) =
        request_body.get("max_tokens").or(request_body.get("max_completion_tokens")).and_then(Value::as_i64)
    {
        attributes.push(int("gen_ai.request.max_tokens", max));
    }
    let input = match api {
        Api::OpenAi => openai_input(request_body),
        Api::Anthropic => anthropic_input(request_body),
    };
    if !input.is_empty() {
        attributes.push(text("gen_ai.input.messages", &Value::Array(input).to_string()));
    }
    let output = output_message(answer);
    if let Some(output) = output {
        attributes.push(text("gen_ai.output.messages", &json!([output]).to_string()));
    }
    let failed = call.status != "completed" || answer.error.is_some();
    if failed {
        let kind = match call.status {
            "cancelled" => "cancelled".to_owned(),
            _ if call.http_status >= 400 => call.http_status.to_string(),
            _ => "upstream_error".to_owned(),
        };
        attributes.push(text("error.type", &kind));
    }
    let message = if call.error.is_empty() { answer.error.clone().unwrap_or_default() } else { call.error.clone() };
    let span = Span {
        trace_id: place.trace_id.to_vec(),
        span_id: random_span_id().to_vec(),
        parent_span_id: place.parent.map(|p| p.to_vec()).unwrap_or_default(),
        name: format!("chat {model}"),
        kind: SpanKind::Client as i32,
        start_time_unix_nano: ns(call.started_at),
        end_time_unix_nano: ns(call.started_at.saturating_add(call.duration_ms)),
        attributes,
        status: Some(Status {
            code: if failed { StatusCode::Error } else { StatusCode::Ok } as i32,
            message: if failed { message } else { String::new() },
        }),
        ..Span::default()
    };
    request(&call.instance_id, runtime_id, span)
}

/// The span of a turn whose runtime called the model: the parent of those calls' spans.
pub fn turn_span(
    instance_id: &str,
    runtime_id: &str,
    turn_id: &str,
    (started_at, ended_at): (i64, i64),
    error: Option<&str>,
) -> ExportTraceServiceRequest {
    let (trace_id, span_id) = crate::callers::turn_trace(turn_id);
    let span = Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id.to_vec(),
        name: format!("invoke_agent {runtime_id}"),
        kind: SpanKind::Server as i32,
        start_time_unix_nano: ns(started_at),
        end_time_unix_nano: ns(ended_at),
        attributes: vec![
            text("gen_ai.operation.name", "invoke_agent"),
            text("gen_ai.agent.id", instance_id),
            text("session.id", instance_id),
            text("roost.turn.id", turn_id),
        ],
        status: Some(Status {
            code: if error.is_some() { StatusCode::Error } else { StatusCode::Ok } as i32,
            message: error.unwrap_or_default().to_owned(),
        }),
        ..Span::default()
    };
    request(instance_id, runtime_id, span)
}

/// A trace of its own, for a call made between turns.
pub fn random_trace_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    // An all-zero id is invalid; getrandom failing leaves the time in it instead.
    if getrandom::fill(&mut id).is_err() || id == [0; 16] {
        id[..8].copy_from_slice(&(crate::time::now_ms() as u64 | 1).to_le_bytes());
    }
    id
}

pub(crate) fn random_span_id() -> [u8; 8] {
    let mut id = [0u8; 8];
    // An all-zero id is invalid; getrandom failing leaves the time in it instead.
    if getrandom::fill(&mut id).is_err() || id == [0; 8] {
        id = (crate::time::now_ms() as u64 | 1).to_le_bytes();
    }
    id
}

/// Text of an OpenAI or Anthropic `content`: a string, or the text of its text parts.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> =
                parts.iter().filter(|p| p["type"] == "text").filter_map(|p| p["text"].as_str()).collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

fn text_part(text: String) -> Value {
    json!({"type": "text", "content": text})
}

/// OpenAI chat messages in the GenAI form (`role` and `parts`).
fn openai_input(request: &Value) -> Vec<Value> {
    let messages = request.get("messages").and_then(Value::as_array);
    messages
        .into_iter()
        .flatten()
        .map(|message| {
            let role = message["role"].as_str().unwrap_or("user");
            let mut parts = Vec::new();
            if role == "tool" {
                let response = content_text(&message["content"]).unwrap_or_default();
                parts.push(json!({"type": "tool_call_response", "id": message["tool_call_id"], "response": response}));
            } else if let Some(text) = content_text(&message["content"]) {
                parts.push(text_part(text));
            }
            for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                parts.push(json!({
                    "type": "tool_call",
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                }));
            }
            let role = if role == "developer" { "system" } else { role };
            json!({"role": role, "parts": parts})
        })
        .collect()
}

/// Anthropic messages (and the system prompt) in the GenAI form.
fn anthropic_input(request: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = request.get("system").and_then(content_text) {
        out.push(json!({"role": "system", "parts": [text_part(system)]}));
    }
    for message in request.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("user");
        let mut parts = Vec::new();
        match &message["content"] {
            Value::String(text) => parts.push(text_part(text.clone())),
            Value::Array(blocks) => {
                for block in blocks {
                    match block["type"].as_str() {
                        Some("text") => parts.push(text_part(block["text"].as_str().unwrap_or_default().to_owned())),
                        Some("tool_use") => parts.push(json!({
                            "type": "tool_call", "id": block["id"], "name": block["name"], "arguments": block["input"],
                        })),
                        Some("tool_result") => parts.push(json!({
                            "type": "tool_call_response",
                            "id": block["tool_use_id"],
                            "response": content_text(&block["content"]).unwrap_or_default(),
                        })),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        out.push(json!({"role": role, "parts": parts}));
    }
    out
}

/// The answer as one assistant message in the GenAI form, if it said anything.
fn output_message(answer: &Answer) -> Option<Value> {
    let mut parts = Vec::new();
    if !answer.text.is_empty() {
        parts.push(text_part(answer.text.clone()));
    }
    for call in &answer.tool_calls {
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments.clone()));
        parts.push(json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}));
    }
    if parts.is_empty() {
        return None;
    }
    let finish = answer.finish_reasons.first().cloned().unwrap_or_default();
    Some(json!({"role": "assistant", "parts": parts, "finish_reason": finish}))
}
