//! Conversation messages, normalised to one shape (role, content, tool calls) from the
//! forms senders use (listed in [`attribute_map::MESSAGE_SOURCES`]): span attributes
//! (GenAI semconv, its older indexed names, OpenInference, the Vercel AI SDK), log events
//! (the official OpenAI instrumentation's `gen_ai.*.message` / `gen_ai.choice`, coding
//! agents' prompts) and span events. The q/1 `transcript` shape reads them.
//!
//! A model call's input repeats the conversation so far. Its new part is what the
//! transcript shows: the messages after the last assistant message of the input (all of
//! them when it has none), so a session's transcript shows each message once. The whole
//! exchange is kept as references to messages stored once (`super::message_texts`), and
//! the span's attributes no longer carry it ([`is_message_key`]).
//!
//! [`attribute_map::MESSAGE_SOURCES`]: super::attribute_map::MESSAGE_SOURCES

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use serde_json::{Value as Json, json};

use super::attributes::any_to_json;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text (tool results included); may be empty for a message of tool calls only.
    pub content: String,
    /// The tools it calls, as a JSON array of `{name, arguments}`; `None` when it calls none.
    pub tool_calls: Option<String>,
}

/// A call's messages: what was sent to the model, and what it answered.
#[derive(Debug, Default)]
struct Exchange {
    input: Vec<Message>,
    output: Vec<Message>,
}

impl Exchange {
    /// The input's new part, then the output.
    fn into_messages(self) -> Vec<Message> {
        let call = self.into_call();
        call.messages.into_iter().skip(call.new_from).collect()
    }

    /// The whole exchange, and where its new part starts.
    fn into_call(mut self) -> Call {
        let new_from = self.input.iter().rposition(|m| m.role == "assistant").map_or(0, |last| last + 1);
        self.input.append(&mut self.output);
        Call { messages: self.input, new_from }
    }
}

/// A model call's messages as a span carries them.
#[derive(Debug, Default, PartialEq)]
pub struct Call {
    /// Its input as sent, then its output.
    pub messages: Vec<Message>,
    /// Where its new part starts: `messages[new_from..]` is what the transcript shows.
    pub new_from: usize,
}

impl Call {
    /// The new part (what the transcript shows).
    pub fn new_messages(&self) -> Vec<Message> {
        self.messages.get(self.new_from..).unwrap_or_default().to_vec()
    }
}

/// The messages after the input's last assistant message (all when it has none).
fn new_part(mut input: Vec<Message>) -> Vec<Message> {
    match input.iter().rposition(|m| m.role == "assistant") {
        Some(last) => input.split_off(last + 1),
        None => input,
    }
}

/// The messages a span's attributes carry. `aggregate` spans (which repeat their steps')
/// carry none.
pub fn from_span(attributes: &[KeyValue], aggregate: bool) -> Call {
    // Most spans carry no content: they cost one pass over their keys, nothing more.
    if aggregate || !attributes.iter().any(|kv| is_message_key(&kv.key)) {
        return Call::default();
    }
    let attrs: BTreeMap<&str, &AnyValue> =
        attributes.iter().filter_map(|kv| Some((kv.key.as_str(), kv.value.as_ref()?))).collect();
    let exchange = semconv(&attrs)
        .or_else(|| indexed(&attrs, "gen_ai.prompt.", "gen_ai.completion.", ""))
        .or_else(|| indexed(&attrs, "llm.input_messages.", "llm.output_messages.", "message."))
        .or_else(|| vercel(&attrs))
        .or_else(|| open_inference_values(&attrs));
    exchange.map(Exchange::into_call).unwrap_or_default()
}

/// The messages a span's events carry (older GenAI conventions put them there).
pub fn from_span_event(name: &str, attributes: &[KeyValue]) -> Vec<Message> {
    let attr = |key: &str| attributes.iter().rev().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref());
    match name {
        "gen_ai.content.prompt" => {
            attr("gen_ai.prompt").map(|v| new_part(messages_json(&json_of(v)))).unwrap_or_default()
        }
        "gen_ai.content.completion" => {
            attr("gen_ai.completion").map(|v| messages_json(&json_of(v))).unwrap_or_default()
        }
        _ => {
            let body = Json::Object(
                attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Json::Null, any_to_json)))
                    .collect(),
            );
            from_event(name, &body).into_iter().collect()
        }
    }
}

/// The messages of a log record: an event naming one (`gen_ai.user.message`…), a coding
/// agent's prompt, or GenAI message attributes.
pub fn from_log(event_name: Option<&str>, body: Option<&AnyValue>, attributes: &[KeyValue]) -> Vec<Message> {
    let attr = |key: &str| attributes.iter().rev().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref());
    match event_name {
        Some("claude_code.user_prompt" | "codex.user_prompt") => {
            return attr("prompt").map(|p| vec![text("user", &super::attributes::any_to_text(p))]).unwrap_or_default();
        }
        Some(name) if name.starts_with("gen_ai.") && name != "gen_ai.client.inference.operation.details" => {
            let body = body.map(json_of).unwrap_or(Json::Null);
            return from_event(name, &body).into_iter().collect();
        }
        _ => {}
    }
    if !attributes.iter().any(|kv| is_content_key(&kv.key)) {
        return Vec::new();
    }
    let attrs: BTreeMap<&str, &AnyValue> =
        attributes.iter().filter_map(|kv| Some((kv.key.as_str(), kv.value.as_ref()?))).collect();
    semconv(&attrs).map(Exchange::into_messages).unwrap_or_default()
}

/// Log events of one span, in order: a call's input messages arrive as separate records,
/// so their new part is found across them ([`new_part`]). `events` are each record's
/// messages with whether it was an input (not `gen_ai.choice`); returns the records'
/// messages to keep, by record.
pub fn keep_new_inputs(events: Vec<(bool, Vec<Message>)>) -> Vec<Vec<Message>> {
    let last_assistant_input =
        events.iter().rposition(|(input, messages)| *input && messages.iter().any(|m| m.role == "assistant"));
    events
        .into_iter()
        .enumerate()
        .map(
            |(i, (input, messages))| {
                if input && last_assistant_input.is_some_and(|last| i <= last) { Vec::new() } else { messages }
            },
        )
        .collect()
}

/// A tool call span's arguments and result (GenAI semconv, Vercel AI SDK), one per line:
/// what search finds of a tool call. '' when the span has neither (and without content
/// capture, which drops them).
pub fn tool_io(attributes: &[KeyValue]) -> String {
    const KEYS: [&str; 4] =
        ["gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "ai.toolCall.args", "ai.toolCall.result"];
    let mut parts = Vec::new();
    for kv in attributes {
        if let (true, Some(value)) = (KEYS.contains(&kv.key.as_str()), kv.value.as_ref()) {
            parts.push(super::attributes::any_to_text(value));
        }
    }
    parts.join("\n")
}

/// True for a log event that is a call's input message (`gen_ai.user.message`…), not its
/// answer (`gen_ai.choice`).
pub fn is_input_event(event_name: &str) -> bool {
    event_name.starts_with("gen_ai.") && event_name.ends_with(".message")
}

/// True for an attribute holding conversation content (messages, prompts, replies, tool
/// arguments and results): what `--capture-content off` drops at ingest, and every key
/// the extractors here read messages from (an item with none has no messages).
pub fn is_content_key(key: &str) -> bool {
    /// Content that is not a span's messages: log events' prompts, tool calls' arguments
    /// and results, structured replies.
    const KEYS: &[&str] = &[
        "gen_ai.prompt",
        "gen_ai.completion",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "ai.prompt",
        "ai.response.object",
        "ai.toolCall.args",
        "ai.toolCall.result",
        "prompt",
        "arguments",
        "output",
    ];
    is_message_key(key) || KEYS.contains(&key)
}

/// True for an attribute [`from_span`] reads messages from: once a span's messages are
/// read, these are not kept in its attributes (the messages are stored once, by content),
/// and they are not cut at the attribute size limit before they are read.
pub fn is_message_key(key: &str) -> bool {
    const KEYS: &[&str] = &[
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "input.value",
        "output.value",
        "ai.prompt.messages",
        "ai.response.text",
        "ai.response.toolCalls",
    ];
    const PREFIXES: &[&str] = &["gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages."];
    KEYS.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

/// `gen_ai.input.messages` / `gen_ai.output.messages`: a JSON string (most senders) or an
/// array of kvlists (the same as structured values).
fn semconv(attrs: &BTreeMap<&str, &AnyValue>) -> Option<Exchange> {
    let input = attrs.get("gen_ai.input.messages").map(|v| messages_json(&json_of(v)));
    let output = attrs.get("gen_ai.output.messages").map(|v| messages_json(&json_of(v)));
    if input.is_none() && output.is_none() {
        return None;
    }
    let mut exchange = Exchange { input: input.unwrap_or_default(), output: output.unwrap_or_default() };
    if let Some(system) = attrs.get("gen_ai.system_instructions").map(|v| json_of(v)) {
        let content = parts_text(&system);
        if !content.is_empty() && !exchange.input.iter().any(|m| m.role == "system") {
            exchange.input.insert(0, text("system", &content));
        }
    }
    Some(exchange)
}

/// Flattened indexed messages: `{input}N.{inner}role`, `…content`, `…contents.K.message_content.text`,
/// and tool calls `…tool_calls.M.name|arguments` (older GenAI names) or
/// `…tool_calls.M.tool_call.function.name|arguments` (OpenInference).
fn indexed(attrs: &BTreeMap<&str, &AnyValue>, input: &str, output: &str, inner: &str) -> Option<Exchange> {
    let read = |prefix: &str| -> Vec<Message> {
        // Message index → its attributes (key after `{prefix}N.{inner}`).
        let mut by_index: BTreeMap<u32, BTreeMap<&str, &AnyValue>> = BTreeMap::new();
        for (key, value) in attrs.range(prefix..).take_while(|(k, _)| k.starts_with(prefix)) {
            let rest = &key[prefix.len()..];
            let Some((index, field)) = rest.split_once('.') else { continue };
            let (Ok(index), Some(field)) = (index.parse::<u32>(), field.strip_prefix(inner)) else { continue };
            by_index.entry(index).or_default().insert(field, *value);
        }
        by_index
            .into_values()
            .map(|fields| {
                let get = |k: &str| fields.get(k).map(|v| super::attributes::any_to_text(v)).unwrap_or_default();
                let mut content = get("content");
                if content.is_empty() {
                    let parts: Vec<String> = fields
                        .iter()
                        .filter(|(k, _)| k.starts_with("contents.") && k.ends_with(".message_content.text"))
                        .map(|(_, v)| super::attributes::any_to_text(v))
                        .collect();
                    content = parts.join("\n");
                }
                let mut calls: BTreeMap<u32, (String, String)> = BTreeMap::new();
                for (k, v) in &fields {
                    let Some(rest) = k.strip_prefix("tool_calls.") else { continue };
                    let Some((index, field)) = rest.split_once('.') else { continue };
                    let Ok(index) = index.parse::<u32>() else { continue };
                    let call = calls.entry(index).or_default();
                    match field.trim_start_matches("tool_call.").trim_start_matches("function.") {
                        "name" => call.0 = super::attributes::any_to_text(v),
                        "arguments" => call.1 = super::attributes::any_to_text(v),
                        _ => {}
                    }
                }
                let role = get("role");
                Message {
                    role: if role.is_empty() { "user".to_owned() } else { role },
                    content,
                    tool_calls: tool_calls(calls.into_values().map(|(name, args)| (name, arguments(&args)))),
                }
            })
            .collect()
    };
    let (input, output) = (read(input), read(output));
    (!input.is_empty() || !output.is_empty()).then_some(Exchange { input, output })
}

/// The Vercel AI SDK: `ai.prompt.messages` (JSON), `ai.response.text` and
/// `ai.response.toolCalls` (JSON), on its provider-call spans.
fn vercel(attrs: &BTreeMap<&str, &AnyValue>) -> Option<Exchange> {
    let prompt = attrs.get("ai.prompt.messages").map(|v| messages_json(&json_of(v)));
    let reply = attrs.get("ai.response.text").map(|v| super::attributes::any_to_text(v)).filter(|t| !t.is_empty());
    let calls = attrs.get("ai.response.toolCalls").map(|v| json_of(v));
    if prompt.is_none() && reply.is_none() && calls.is_none() {
        return None;
    }
    let calls = calls.and_then(|calls| {
        tool_calls(calls.as_array()?.iter().map(|c| {
            let name = c.get("toolName").and_then(Json::as_str).unwrap_or_default().to_owned();
            (name, arguments_json(c.get("input").or(c.get("args"))))
        }))
    });
    let output = if reply.is_some() || calls.is_some() {
        vec![Message { role: "assistant".into(), content: reply.unwrap_or_default(), tool_calls: calls }]
    } else {
        Vec::new()
    };
    Some(Exchange { input: prompt.unwrap_or_default(), output })
}

/// OpenInference's `input.value` / `output.value` when they are plain text (a JSON value
/// is a request or response body, not a message).
fn open_inference_values(attrs: &BTreeMap<&str, &AnyValue>) -> Option<Exchange> {
    let plain = |key: &str, mime: &str| {
        let value = super::attributes::any_to_text(attrs.get(key)?);
        let json = attrs.get(mime).map(|v| super::attributes::any_to_text(v)).is_some_and(|m| m.contains("json"));
        (!json && !value.is_empty()).then_some(value)
    };
    let input = plain("input.value", "input.mime_type").map(|t| vec![text("user", &t)]).unwrap_or_default();
    let output = plain("output.value", "output.mime_type").map(|t| vec![text("assistant", &t)]).unwrap_or_default();
    (!input.is_empty() || !output.is_empty()).then_some(Exchange { input, output })
}

/// One event's message: `gen_ai.<role>.message` with `{content, tool_calls?}`, or
/// `gen_ai.choice` with `{message: {role, content, tool_calls}}`.
fn from_event(name: &str, body: &Json) -> Option<Message> {
    if name == "gen_ai.choice" {
        let message = body.get("message").unwrap_or(body);
        let mut m = message_json(message)?;
        if m.role.is_empty() || m.role == "user" && message.get("role").is_none() {
            m.role = "assistant".into();
        }
        return Some(m);
    }
    let role = name.strip_prefix("gen_ai.")?.strip_suffix(".message")?;
    let mut m = message_json(body).unwrap_or_else(|| text(role, ""));
    m.role = role.to_owned();
    (!m.content.is_empty() || m.tool_calls.is_some()).then_some(m)
}

/// A list of messages in any of the JSON forms senders use.
fn messages_json(value: &Json) -> Vec<Message> {
    match value {
        Json::Array(items) => items.iter().filter_map(message_json).collect(),
        Json::String(s) => text_or_json(s).as_ref().map(messages_json).unwrap_or_else(|| vec![text("user", s)]),
        Json::Object(_) => message_json(value).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// One message: `{role, content}` where content is text or parts (OpenAI's
/// `[{type: text, text}]`, the semconv's `parts: [{type: text, content}, {type: tool_call,
/// name, arguments}, {type: tool_call_response, response}]`, Vercel's `tool-call` /
/// `tool-result` parts), plus OpenAI's `tool_calls`.
fn message_json(value: &Json) -> Option<Message> {
    let object = value.as_object()?;
    let role = object.get("role").and_then(Json::as_str).unwrap_or("user").to_owned();
    let mut content = Vec::new();
    let mut calls = Vec::new();
    for key in ["content", "parts"] {
        match object.get(key) {
            Some(Json::String(s)) => content.push(s.clone()),
            Some(Json::Array(parts)) => {
                for part in parts {
                    read_part(part, &mut content, &mut calls);
                }
            }
            Some(other @ Json::Object(_)) => content.push(other.to_string()),
            _ => {}
        }
    }
    if let Some(Json::Array(tool_calls)) = object.get("tool_calls") {
        for call in tool_calls {
            let function = call.get("function").unwrap_or(call);
            let name = function.get("name").and_then(Json::as_str).unwrap_or_default().to_owned();
            calls.push((name, arguments_json(function.get("arguments"))));
        }
    }
    Some(Message { role, content: content.join("\n"), tool_calls: tool_calls(calls) })
}

fn read_part(part: &Json, content: &mut Vec<String>, calls: &mut Vec<(String, Json)>) {
    let Some(object) = part.as_object() else {
        if let Some(s) = part.as_str() {
            content.push(s.to_owned());
        }
        return;
    };
    let kind = object.get("type").and_then(Json::as_str).unwrap_or("text");
    match kind {
        "tool_call" | "tool-call" | "function_call" => {
            let name = object.get("name").or(object.get("toolName")).and_then(Json::as_str).unwrap_or_default();
            calls.push((
                name.to_owned(),
                arguments_json(object.get("arguments").or(object.get("input")).or(object.get("args"))),
            ));
        }
        "tool_call_response" | "tool-result" | "tool_result" => {
            let result = object.get("response").or(object.get("output")).or(object.get("result"));
            let result = match result {
                Some(Json::Object(o)) if o.get("type").and_then(Json::as_str) == Some("json") => {
                    o.get("value").cloned().unwrap_or(Json::Null)
                }
                Some(other) => other.clone(),
                None => Json::Null,
            };
            content.push(match result {
                Json::String(s) => s,
                other => other.to_string(),
            });
        }
        _ => {
            if let Some(text) = object.get("content").or(object.get("text")).and_then(Json::as_str) {
                content.push(text.to_owned());
            }
        }
    }
}

/// Tool-call arguments as JSON: a JSON text is parsed, anything else kept as it is.
fn arguments_json(value: Option<&Json>) -> Json {
    match value {
        Some(Json::String(s)) => arguments(s),
        Some(other) => other.clone(),
        None => Json::Null,
    }
}

fn arguments(text: &str) -> Json {
    serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.to_owned()))
}

fn tool_calls(calls: impl IntoIterator<Item = (String, Json)>) -> Option<String> {
    let calls: Vec<Json> =
        calls.into_iter().map(|(name, arguments)| json!({"name": name, "arguments": arguments})).collect();
    (!calls.is_empty()).then(|| Json::Array(calls).to_string())
}

fn text(role: &str, content: &str) -> Message {
    Message { role: role.to_owned(), content: content.to_owned(), tool_calls: None }
}

/// The text of a system-instructions value (a string, or parts).
fn parts_text(value: &Json) -> String {
    let mut content = Vec::new();
    let mut calls = Vec::new();
    match value {
        Json::String(s) => return s.clone(),
        Json::Array(parts) => parts.iter().for_each(|p| read_part(p, &mut content, &mut calls)),
        _ => {}
    }
    content.join("\n")
}

/// An attribute value as JSON, a JSON text parsed.
fn json_of(value: &AnyValue) -> Json {
    match &value.value {
        Some(Value::StringValue(s)) => text_or_json(s).unwrap_or_else(|| Json::String(s.clone())),
        _ => any_to_json(value),
    }
}

/// A text that holds a JSON array or object, parsed.
fn text_or_json(text: &str) -> Option<Json> {
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('[') || trimmed.starts_with('{')) {
        return None;
    }
    serde_json::from_str::<Json>(text).ok().filter(|j| j.is_array() || j.is_object())
}

/// A map with only `role`/`content`, for tests.
#[cfg(test)]
fn pairs(messages: &[Message]) -> Vec<(String, String)> {
    messages.iter().map(|m| (m.role.clone(), m.content.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(Value::StringValue(value.into())) }),
            ..Default::default()
        }
    }

    fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(r, c)| ((*r).to_owned(), (*c).to_owned())).collect()
    }

    #[test]
    fn semconv_parts_keep_only_the_new_input() {
        let span = [
            kv(
                "gen_ai.input.messages",
                r#"[{"role":"user","parts":[{"type":"text","content":"weather?"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"get_weather","arguments":{"city":"Paris"}}]},{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"sunny"}]}]"#,
            ),
            kv(
                "gen_ai.output.messages",
                r#"[{"role":"assistant","parts":[{"type":"text","content":"It is sunny."}],"finish_reason":"stop"}]"#,
            ),
        ];
        let messages = from_span(&span, false).new_messages();
        assert_eq!(pairs(&messages), owned(&[("tool", "sunny"), ("assistant", "It is sunny.")]));
    }

    #[test]
    fn open_inference_indexed_messages_and_tool_calls() {
        let span = [
            kv("llm.input_messages.0.message.role", "user"),
            kv("llm.input_messages.0.message.content", "weather?"),
            kv("llm.output_messages.0.message.role", "assistant"),
            kv("llm.output_messages.0.message.tool_calls.0.tool_call.function.name", "get_weather"),
            kv("llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", r#"{"city":"Paris"}"#),
        ];
        let messages = from_span(&span, false).new_messages();
        assert_eq!(pairs(&messages), owned(&[("user", "weather?"), ("assistant", "")]));
        assert_eq!(messages[1].tool_calls.as_deref(), Some(r#"[{"arguments":{"city":"Paris"},"name":"get_weather"}]"#));
    }

    #[test]
    fn vercel_prompt_and_reply() {
        let span = [
            kv(
                "ai.prompt.messages",
                r#"[{"role":"system","content":"terse"},{"role":"user","content":[{"type":"text","text":"capital?"}]}]"#,
            ),
            kv("ai.response.text", "Paris."),
        ];
        assert_eq!(
            pairs(&from_span(&span, false).new_messages()),
            owned(&[("system", "terse"), ("user", "capital?"), ("assistant", "Paris.")])
        );
        assert!(from_span(&span, true).messages.is_empty(), "aggregate spans repeat their steps");
    }

    #[test]
    fn log_events_of_the_official_instrumentation() {
        let choice = AnyValue {
            value: Some(Value::StringValue(r#"{"index":0,"message":{"role":"assistant","content":"Paris."}}"#.into())),
        };
        assert_eq!(pairs(&from_log(Some("gen_ai.choice"), Some(&choice), &[])), owned(&[("assistant", "Paris.")]));
        let user = AnyValue { value: Some(Value::StringValue(r#"{"content":"capital?"}"#.into())) };
        assert_eq!(pairs(&from_log(Some("gen_ai.user.message"), Some(&user), &[])), owned(&[("user", "capital?")]));
        let prompt = [kv("prompt", "fix the test")];
        assert_eq!(
            pairs(&from_log(Some("claude_code.user_prompt"), None, &prompt)),
            owned(&[("user", "fix the test")])
        );
        let kept = keep_new_inputs(vec![
            (true, vec![text("user", "q")]),
            (true, vec![text("assistant", "call")]),
            (true, vec![text("tool", "result")]),
            (false, vec![text("assistant", "answer")]),
        ]);
        assert_eq!(kept.iter().map(Vec::len).collect::<Vec<_>>(), [0, 0, 1, 1]);
    }
}
