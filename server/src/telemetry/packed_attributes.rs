//! Span attributes in a compact binary form (`spans.packed_attributes`).
//!
//! JSON spends a quote pair, a colon and a comma on every attribute, and spells out keys
//! such as `gen_ai.usage.output_tokens` on every row. Packed, an attribute is its key (one
//! byte for the [well-known keys](KEYS), else its length and bytes), a type tag, and its
//! value: strings as length and bytes, integers as zigzag varints, doubles as 8 bytes,
//! booleans in the tag. Arrays and maps (rare in agent telemetry) keep their JSON text.
//! A model call's attributes take about a third of their JSON; a tool call's half.
//!
//! The dictionary is built in, not a table: writing and reading need no lookup, no cache
//! to keep consistent across replicas, and a sender inventing keys cannot grow it. A key
//! outside it costs one byte more than the key itself. [`KEYS`] is append-only: a stored
//! row names a key by its place in the list.
//!
//! The first byte is the format ([`FORMAT_V1`]); JSON text never starts with it, so a
//! reader tells packed rows from the JSON text rows stored before (`attributes`).

use std::{collections::HashMap, sync::LazyLock};

use serde_json::{Map, Number, Value as Json};

use super::varint;

/// The format byte packed attributes start with.
pub const FORMAT_V1: u8 = 1;

/// Keys written as their place in this list. Append only: never reorder or remove.
pub const KEYS: &[&str] = &[
    // Sessions, agents, tools: the attribute map's keys.
    "session.id",
    "gen_ai.conversation.id",
    "conversation.id",
    "traceloop.association.properties.session_id",
    "traceloop.association.properties.thread_id",
    "ai.telemetry.metadata.sessionId",
    "agent.id",
    "gen_ai.agent.id",
    "gen_ai.agent.name",
    "roost.instance.id",
    "roost.self_reported",
    "tool.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.type",
    "gen_ai.tool.description",
    "ai.toolCall.name",
    "ai.toolCall.id",
    "ai.toolCall.args",
    "ai.toolCall.result",
    "event.name",
    // GenAI semantic conventions.
    "gen_ai.operation.name",
    "gen_ai.system",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.request.max_tokens",
    "gen_ai.request.temperature",
    "gen_ai.request.top_p",
    "gen_ai.request.top_k",
    "gen_ai.request.frequency_penalty",
    "gen_ai.request.presence_penalty",
    "gen_ai.request.stop_sequences",
    "gen_ai.request.seed",
    "gen_ai.request.choice.count",
    "gen_ai.output.type",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.cost",
    "gen_ai.usage.cost_usd",
    "gen_ai.openai.request.service_tier",
    "gen_ai.openai.response.service_tier",
    "gen_ai.openai.response.system_fingerprint",
    "gen_ai.data_source.id",
    "gen_ai.embeddings.dimension.count",
    // OpenLLMetry and OpenInference.
    "llm.request.type",
    "llm.request.model",
    "llm.response.model",
    "llm.model_name",
    "llm.provider",
    "llm.system",
    "llm.usage.prompt_tokens",
    "llm.usage.completion_tokens",
    "llm.usage.total_tokens",
    "llm.token_count.prompt",
    "llm.token_count.completion",
    "llm.token_count.total",
    "llm.token_count.prompt_details.cache_read",
    "llm.token_count.prompt_details.cache_write",
    "llm.cost.total",
    "llm.is_streaming",
    "llm.headers",
    "traceloop.span.kind",
    "traceloop.entity.name",
    "traceloop.entity.path",
    "traceloop.workflow.name",
    "openinference.span.kind",
    "input.mime_type",
    "output.mime_type",
    // The Vercel AI SDK.
    "ai.operationId",
    "ai.model.id",
    "ai.model.provider",
    "ai.response.model",
    "ai.response.id",
    "ai.response.finishReason",
    "ai.response.timestamp",
    "ai.response.msToFirstChunk",
    "ai.response.msToFinish",
    "ai.response.avgCompletionTokensPerSecond",
    "ai.usage.promptTokens",
    "ai.usage.completionTokens",
    "ai.usage.inputTokens",
    "ai.usage.outputTokens",
    "ai.usage.cachedInputTokens",
    "ai.settings.maxRetries",
    "ai.settings.maxSteps",
    "ai.telemetry.functionId",
    "operation.name",
    "resource.name",
    // General semantic conventions.
    "error.type",
    "exception.type",
    "exception.message",
    "exception.stacktrace",
    "exception.escaped",
    "http.request.method",
    "http.response.status_code",
    "http.route",
    "http.method",
    "http.status_code",
    "http.url",
    "http.target",
    "url.full",
    "url.path",
    "url.query",
    "url.scheme",
    "server.address",
    "server.port",
    "client.address",
    "client.port",
    "network.protocol.version",
    "network.peer.address",
    "network.peer.port",
    "user_agent.original",
    "rpc.system",
    "rpc.service",
    "rpc.method",
    "rpc.grpc.status_code",
    "db.system",
    "db.system.name",
    "db.operation.name",
    "db.query.text",
    "db.statement",
    "db.namespace",
    "messaging.system",
    "messaging.operation.type",
    "messaging.destination.name",
    "code.function",
    "code.function.name",
    "code.namespace",
    "code.filepath",
    "code.file.path",
    "code.lineno",
    "code.line.number",
    "thread.id",
    "thread.name",
    "otel.status_code",
    "otel.status_description",
    "otel.scope.name",
    "otel.library.name",
    "user.id",
    "enduser.id",
    // Tool calls' input and output (the guard's loop check reads them).
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "input.value",
    "output.value",
    // Codex CLI, Claude Code and ClawMetry.
    "session_id",
    "agent_id",
    "tool_name",
    "model",
    "input_tokens",
    "output_tokens",
    "prompt_tokens",
    "completion_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "cached_token_count",
    "input_token_count",
    "output_token_count",
    "cost_usd",
    "duration_ms",
    "success",
    "decision",
];

/// Each well-known key's place in [`KEYS`].
static PLACES: LazyLock<HashMap<&'static str, u64>> =
    LazyLock::new(|| KEYS.iter().enumerate().map(|(place, key)| (*key, place as u64)).collect());

/// What follows a key: the value's type (booleans and null are the tag alone).
mod tag {
    pub const NULL: u8 = 0;
    pub const STRING: u8 = 1;
    pub const INT: u8 = 2;
    pub const DOUBLE: u8 = 3;
    pub const FALSE: u8 = 4;
    pub const TRUE: u8 = 5;
    /// An array or a map, as its JSON text.
    pub const JSON: u8 = 6;
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    varint::put(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn take_str<'a>(bytes: &mut &'a [u8]) -> Option<&'a str> {
    let len = usize::try_from(varint::take(bytes)?).ok()?;
    let (text, rest) = (bytes.get(..len)?, bytes.get(len..)?);
    *bytes = rest;
    std::str::from_utf8(text).ok()
}

/// Attributes (as [`super::attributes::to_map`] gives them) packed.
pub fn pack(attributes: &Map<String, Json>) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + attributes.len() * 12);
    out.push(FORMAT_V1);
    for (key, value) in attributes {
        match PLACES.get(key.as_str()) {
            Some(&place) => varint::put(&mut out, place << 1),
            None => {
                varint::put(&mut out, ((key.len() as u64) << 1) | 1);
                out.extend_from_slice(key.as_bytes());
            }
        }
        match value {
            Json::Null => out.push(tag::NULL),
            Json::Bool(false) => out.push(tag::FALSE),
            Json::Bool(true) => out.push(tag::TRUE),
            Json::String(text) => {
                out.push(tag::STRING);
                put_bytes(&mut out, text.as_bytes());
            }
            Json::Number(number) => match number.as_i64() {
                Some(int) => {
                    out.push(tag::INT);
                    varint::put(&mut out, ((int << 1) ^ (int >> 63)) as u64);
                }
                None => {
                    out.push(tag::DOUBLE);
                    out.extend_from_slice(&number.as_f64().unwrap_or_default().to_le_bytes());
                }
            },
            Json::Array(_) | Json::Object(_) => {
                out.push(tag::JSON);
                put_bytes(&mut out, value.to_string().as_bytes());
            }
        }
    }
    out
}

/// One packed value, borrowed from the bytes.
enum Value<'a> {
    Null,
    Bool(bool),
    Str(&'a str),
    Int(i64),
    Double(f64),
    /// An array or a map, as its compact JSON text.
    Json(&'a str),
}

/// The entries of packed attributes, in order; `None` when the bytes are not packed
/// attributes, and an item of `None` where they stop making sense.
fn entries(bytes: &[u8]) -> Option<impl Iterator<Item = Option<(&str, Value<'_>)>>> {
    let (&format, mut rest) = bytes.split_first()?;
    (format == FORMAT_V1).then_some(())?;
    Some(std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        Some(entry(&mut rest))
    }))
}

fn entry<'a>(rest: &mut &'a [u8]) -> Option<(&'a str, Value<'a>)> {
    let head = varint::take(rest)?;
    let key = if head & 1 == 0 {
        *KEYS.get(usize::try_from(head >> 1).ok()?)?
    } else {
        let len = usize::try_from(head >> 1).ok()?;
        let key = std::str::from_utf8(rest.get(..len)?).ok()?;
        *rest = rest.get(len..)?;
        key
    };
    let (&kind, tail) = rest.split_first()?;
    *rest = tail;
    let value = match kind {
        tag::NULL => Value::Null,
        tag::FALSE => Value::Bool(false),
        tag::TRUE => Value::Bool(true),
        tag::STRING => Value::Str(take_str(rest)?),
        tag::INT => {
            let zigzag = varint::take(rest)?;
            Value::Int(((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64))
        }
        tag::DOUBLE => {
            let raw: [u8; 8] = rest.get(..8)?.try_into().ok()?;
            *rest = &rest[8..];
            Value::Double(f64::from_le_bytes(raw))
        }
        tag::JSON => Value::Json(take_str(rest)?),
        _ => return None,
    };
    Some((key, value))
}

/// The attributes [`pack`] packed; `None` for anything else.
pub fn unpack(bytes: &[u8]) -> Option<Map<String, Json>> {
    let mut map = Map::new();
    for entry in entries(bytes)? {
        let (key, value) = entry?;
        let value = match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(b),
            Value::Str(text) => Json::String(text.to_owned()),
            Value::Int(int) => Json::from(int),
            Value::Double(double) => Number::from_f64(double).map_or(Json::Null, Json::Number),
            Value::Json(text) => serde_json::from_str(text).ok()?,
        };
        map.insert(key.to_owned(), value);
    }
    Some(map)
}

/// A stored row's attributes as a JSON object: its packed form when it has one, else the
/// JSON text rows kept before; text that is not a JSON object is answered as a string.
pub fn stored(packed: Option<&[u8]>, text: &str) -> Json {
    if let Some(map) = packed.and_then(unpack) {
        return Json::Object(map);
    }
    serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.to_owned()))
}

/// A stored row's attributes packed: its packed form, or the JSON text it was stored
/// with before, packed (what is not a JSON object packs as no attributes).
pub fn packed(packed: Option<Vec<u8>>, text: &str) -> Vec<u8> {
    packed.unwrap_or_else(|| match serde_json::from_str(text) {
        Ok(Json::Object(map)) => pack(&map),
        _ => pack(&Map::new()),
    })
}

/// The start of packed attributes' JSON text, at least its first `chars` characters
/// (`{}` for what does not unpack): written straight from the bytes, with no map built,
/// and stopped once that much is written (the live stream shows every stored span's
/// first few hundred characters, on ingest's path).
pub fn json_prefix(packed: &[u8], chars: usize) -> String {
    let mut out = Vec::with_capacity(packed.len().saturating_mul(2).min(chars.saturating_mul(4)));
    let whole = write_json(packed, &mut out, chars.saturating_mul(4)).is_some();
    match String::from_utf8(out) {
        Ok(text) if whole => text,
        _ => "{}".to_owned(),
    }
}

/// Writes the JSON text of packed attributes to `out`, stopping once it holds `limit`
/// bytes; `None` when the bytes do not unpack (`out` then holds what was written).
fn write_json(packed: &[u8], out: &mut Vec<u8>, limit: usize) -> Option<()> {
    let write_str = |out: &mut Vec<u8>, text: &str| serde_json::to_writer(out, text).ok();
    out.push(b'{');
    for (n, entry) in entries(packed)?.enumerate() {
        if out.len() >= limit {
            return Some(());
        }
        let (key, value) = entry?;
        if n > 0 {
            out.push(b',');
        }
        write_str(out, key)?;
        out.push(b':');
        match value {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
            Value::Str(text) => write_str(out, text)?,
            Value::Int(int) => out.extend_from_slice(int.to_string().as_bytes()),
            Value::Double(double) => match Number::from_f64(double) {
                Some(number) => out.extend_from_slice(number.to_string().as_bytes()),
                None => out.extend_from_slice(b"null"),
            },
            // Written by `pack` as serde_json's compact text of a parsed value.
            Value::Json(text) => out.extend_from_slice(text.as_bytes()),
        }
    }
    out.push(b'}');
    Some(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::telemetry::attribute_map::BY_KEY;

    fn object(value: Json) -> Map<String, Json> {
        match value {
            Json::Object(map) => map,
            _ => unreachable!("an object"),
        }
    }

    #[test]
    fn attributes_round_trip_smaller_than_their_json() {
        let model_call = object(json!({
            "session.id": "session-42",
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 800,
            "gen_ai.usage.output_tokens": 200,
        }));
        let (packed, text) = (pack(&model_call), Json::Object(model_call.clone()).to_string());
        assert!(packed.len() * 3 < text.len(), "{} bytes packed against {} of JSON", packed.len(), text.len());

        let mut attributes = model_call;
        attributes.extend(object(json!({
            "gen_ai.request.temperature": 0.25,
            "my.own.key": "ünïcode ✓",
            "negative": -9_223_372_036_854_775_808i64,
            "largest": i64::MAX,
            "flag": true,
            "off": false,
            "nothing": null,
            "list": [1, "two", 3.5],
            "nested": {"a": {"b": [true]}},
            "": "an empty key",
        })));
        let packed = pack(&attributes);
        assert_eq!(unpack(&packed), Some(attributes.clone()));
        assert_eq!(json_prefix(&packed, usize::MAX), Json::Object(attributes.clone()).to_string());
        let text = Json::Object(attributes).to_string();
        for chars in [0, 1, 10, 50, text.chars().count(), 10_000] {
            let prefix = json_prefix(&packed, chars);
            let shown: String = prefix.chars().take(chars).collect();
            assert_eq!(shown, text.chars().take(chars).collect::<String>(), "the first {chars} characters");
            assert!(text.starts_with(&prefix));
        }
        assert!(packed.len() * 10 < text.len() * 7, "{} bytes packed against {} of JSON", packed.len(), text.len());
        assert_eq!(pack(&Map::new()), vec![FORMAT_V1]);
    }

    #[test]
    fn what_is_not_packed_attributes_is_refused_and_json_rows_still_read() {
        let packed = pack(&object(json!({"session.id": "s", "my.key": "value", "n": 7, "d": 1.5})));
        for cut in 0..packed.len() {
            assert_ne!(unpack(&packed[..cut]), unpack(&packed), "cut at {cut}");
        }
        assert_eq!(unpack(b"{\"a\":1}"), None);
        assert_eq!(json_prefix(&packed[..packed.len() - 1], usize::MAX), "{}", "what does not unpack");
        assert_eq!(unpack(&[FORMAT_V1, 0xfe, 0xff, 0x7f, tag::NULL]), None, "a key past the dictionary");
        assert_eq!(unpack(&[FORMAT_V1, 0, 9]), None, "an unknown tag");
        assert_eq!(unpack(&[FORMAT_V1, 3, 0xff, tag::NULL]), None, "a key that is not UTF-8");
        assert_eq!(stored(None, "{\"a\":1}"), json!({"a": 1}));
        assert_eq!(stored(None, "cut {"), json!("cut {"));
        assert_eq!(stored(Some(&packed), ""), json!({"session.id": "s", "my.key": "value", "n": 7, "d": 1.5}));
    }

    #[test]
    fn the_dictionary_only_grows_and_holds_every_mapped_key() {
        let distinct: std::collections::HashSet<_> = KEYS.iter().collect();
        assert_eq!(distinct.len(), KEYS.len(), "a key is listed twice");
        // Stored rows name keys by place: these must never move.
        assert_eq!(&KEYS[..3], &["session.id", "gen_ai.conversation.id", "conversation.id"]);
        assert_eq!(KEYS[38], "gen_ai.usage.input_tokens");
        assert_eq!(KEYS[KEYS.len() - 1], "decision", "new keys go at the end (update this check)");
        let mut missing: Vec<_> = BY_KEY.keys().filter(|key| !key.ends_with('.') && !distinct.contains(key)).collect();
        missing.sort();
        assert!(missing.is_empty(), "mapped but not in the dictionary: {missing:?}");
    }
}
