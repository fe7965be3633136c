//! OTLP attributes: as JSON for storage, and the GenAI semantic conventions pulled out into
//! typed fields (and priced).

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use serde_json::{Map, Value as Json};

use super::{
    attribute_map::{BY_KEY, Count, Field, is_aggregate},
    rows::GenAi,
};
use crate::billing::prices::PriceBook;

/// An attribute value as JSON. Bytes are hex (they rarely occur in agent telemetry).
pub fn any_to_json(value: &AnyValue) -> Json {
    match &value.value {
        None => Json::Null,
        Some(Value::StringValue(s)) => Json::String(s.clone()),
        Some(Value::BoolValue(b)) => Json::Bool(*b),
        Some(Value::IntValue(i)) => Json::from(*i),
        Some(Value::DoubleValue(d)) => serde_json::Number::from_f64(*d).map_or(Json::Null, Json::Number),
        Some(Value::ArrayValue(array)) => Json::Array(array.values.iter().map(any_to_json).collect()),
        Some(Value::KvlistValue(list)) => Json::Object(to_map(&list.values)),
        Some(Value::BytesValue(bytes)) => Json::String(hex::encode(bytes)),
        // An index into a profile's string table: meaningless outside profiles.
        Some(Value::StringValueStrindex(index)) => Json::from(*index),
    }
}

/// Attributes as a JSON object (later keys win, as in OTLP).
pub fn to_map(attributes: &[KeyValue]) -> Map<String, Json> {
    attributes.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Json::Null, any_to_json))).collect()
}

/// Attributes as JSON text.
pub fn to_json_text(attributes: &[KeyValue]) -> String {
    if attributes.is_empty() {
        return "{}".to_owned();
    }
    Json::Object(to_map(attributes)).to_string()
}

/// A text rendering of an attribute value (a log body, say): strings as they are,
/// anything else as JSON.
pub fn any_to_text(value: &AnyValue) -> String {
    match &value.value {
        Some(Value::StringValue(s)) => s.clone(),
        None => String::new(),
        _ => any_to_json(value).to_string(),
    }
}

/// A string attribute (the last with that key).
pub fn string(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().rev().find(|kv| kv.key == key)?.value.as_ref()?;
    match &value.value {
        Some(Value::StringValue(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::IntValue(i)) => Some(i.to_string()),
        _ => None,
    }
}

/// An integer attribute (ints, whole doubles and numeric strings are all accepted, since
/// instrumentations disagree).
pub fn int(attributes: &[KeyValue], key: &str) -> Option<i64> {
    int_value(attributes.iter().rev().find(|kv| kv.key == key)?.value.as_ref()?)
}

/// Marks usage a sender reports about itself and roost does not meter: `true` on an item
/// or its resource. roost sets it on everything a hosted agent sends with its own token
/// ([`super::agent_claims`]), over whatever the body said; any other sender may set it on
/// its own items (it only takes their usage out of the figures).
pub const SELF_REPORTED: &str = "roost.self_reported";

/// True when `attributes` mark their item's usage as [self-reported](SELF_REPORTED).
pub fn is_self_reported(attributes: &[KeyValue]) -> bool {
    attributes.iter().any(|kv| {
        kv.key == SELF_REPORTED && kv.value.as_ref().is_some_and(|v| matches!(v.value, Some(Value::BoolValue(true))))
    })
}

/// The GenAI fields of an item, read through the [attribute map](super::attribute_map) from
/// its attributes, then its resource's, and priced: a sender's own cost wins; else the
/// price book's price for the model; else (an unpriced model) no cost. Usage marked
/// [self-reported](SELF_REPORTED) (on the item or its resource) is neither counted nor
/// priced: its tokens and cost stay only in the attributes.
pub fn gen_ai(item: &[KeyValue], resource: &[KeyValue], prices: &PriceBook) -> GenAi {
    let mut found = Found::default();
    found.scan(item);
    found.scan_missing(resource);
    let mut fields = GenAi {
        session_id: found.string(Field::Session),
        agent_id: found.string(Field::Agent),
        operation: found.string(Field::Operation),
        system: found.string(Field::Provider),
        request_model: found.string(Field::RequestModel),
        response_model: found.string(Field::ResponseModel),
        input_tokens: found.int(Field::InputTokens),
        output_tokens: found.int(Field::OutputTokens),
        cache_read_tokens: found.int(Field::CacheReadTokens),
        cache_write_tokens: found.int(Field::CacheWriteTokens),
        tool_name: found.string(Field::ToolName),
        aggregate: false,
        self_reported: is_self_reported(item) || is_self_reported(resource),
        cost_nanocents: None,
    };
    if fields.operation.as_deref().is_some_and(is_aggregate) {
        fields.aggregate = true;
        (fields.input_tokens, fields.output_tokens, fields.cache_read_tokens, fields.cache_write_tokens) =
            (None, None, None, None);
    }
    if fields.self_reported {
        (fields.input_tokens, fields.output_tokens, fields.cache_read_tokens, fields.cache_write_tokens) =
            (None, None, None, None);
        return fields;
    }
    // Counts reported apart from the input (Anthropic's way) become a part of it.
    for field in [Field::CacheReadTokens, Field::CacheWriteTokens] {
        if let (Some((_, _, Count::Apart)), Some(cached)) = (found.get(field), found.int(field)) {
            fields.input_tokens = Some(fields.input_tokens.unwrap_or(0).saturating_add(cached.max(0)));
        }
    }
    let sender_cost = found.float(Field::CostUsd).filter(|usd| usd.is_finite() && *usd >= 0.0);
    fields.cost_nanocents = match sender_cost {
        // 1 USD = 100 cents = 10^11 nanocents.
        Some(usd) => Some((usd * 1e11).round().min(i64::MAX as f64) as i64),
        None if fields.has_usage() => fields.model().and_then(|model| prices.lookup(model)).map(|price| {
            price.cost(
                fields.input_tokens.unwrap_or(0),
                fields.output_tokens.unwrap_or(0),
                fields.cache_read_tokens.unwrap_or(0),
                fields.cache_write_tokens.unwrap_or(0),
            )
        }),
        None => None,
    };
    fields
}

/// The mapped attributes of an item: for each field, the best-ranked one seen.
#[derive(Default)]
struct Found<'a> {
    best: [Option<(&'a AnyValue, u8, Count)>; Field::ALL.len()],
}

impl<'a> Found<'a> {
    /// Reads every attribute once; a later duplicate key wins, as in OTLP.
    fn scan(&mut self, attributes: &'a [KeyValue]) {
        for kv in attributes {
            let (Some((field, rank, count)), Some(value)) = (BY_KEY.get(kv.key.as_str()), kv.value.as_ref()) else {
                continue;
            };
            if !usable(value) {
                continue;
            }
            let slot = &mut self.best[*field as usize];
            if slot.is_none_or(|(_, best, _)| *rank <= best) {
                *slot = Some((value, *rank, *count));
            }
        }
    }

    /// Fills the fields still missing from `attributes` (an item's resource).
    fn scan_missing(&mut self, attributes: &'a [KeyValue]) {
        let mut resource = Found::default();
        resource.scan(attributes);
        for (slot, from) in self.best.iter_mut().zip(resource.best) {
            if slot.is_none() {
                *slot = from;
            }
        }
    }

    fn get(&self, field: Field) -> Option<(&'a AnyValue, u8, Count)> {
        self.best[field as usize]
    }

    fn string(&self, field: Field) -> Option<String> {
        match &self.get(field)?.0.value {
            Some(Value::StringValue(s)) => Some(s.clone()),
            Some(Value::IntValue(i)) => Some(i.to_string()),
            _ => None,
        }
    }

    fn int(&self, field: Field) -> Option<i64> {
        int_value(self.get(field)?.0)
    }

    fn float(&self, field: Field) -> Option<f64> {
        match &self.get(field)?.0.value {
            Some(Value::DoubleValue(d)) => Some(*d),
            Some(Value::IntValue(i)) => Some(*i as f64),
            Some(Value::StringValue(s)) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

/// A value a field can be read from: not empty.
fn usable(value: &AnyValue) -> bool {
    match &value.value {
        Some(Value::StringValue(s)) => !s.is_empty(),
        Some(Value::IntValue(_) | Value::DoubleValue(_)) => true,
        _ => false,
    }
}

/// An integer (ints, whole doubles and numeric strings are all accepted, since
/// instrumentations disagree).
fn int_value(value: &AnyValue) -> Option<i64> {
    match &value.value {
        Some(Value::IntValue(i)) => Some(*i),
        Some(Value::DoubleValue(d)) if d.is_finite() && d.fract() == 0.0 => Some(*d as i64),
        Some(Value::StringValue(s)) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `service.name` of a resource, or OTel's "unknown_service".
pub fn service_name(resource: &[KeyValue]) -> String {
    string(resource, "service.name").unwrap_or_else(|| "unknown_service".to_owned())
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};

    use super::*;

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
    }

    #[test]
    fn attributes_become_json() {
        let attrs = [
            kv("s", Value::StringValue("x".into())),
            kv("i", Value::IntValue(3)),
            kv("d", Value::DoubleValue(0.5)),
            kv("a", Value::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(Value::BoolValue(true)) }] })),
            kv("m", Value::KvlistValue(KeyValueList { values: vec![kv("k", Value::IntValue(1))] })),
        ];
        let json: Json = serde_json::from_str(&to_json_text(&attrs)).unwrap();
        assert_eq!(json, serde_json::json!({"s": "x", "i": 3, "d": 0.5, "a": [true], "m": {"k": 1}}));
    }

    #[test]
    fn gen_ai_fields_are_found_and_priced() {
        let span = [
            kv("gen_ai.operation.name", Value::StringValue("chat".into())),
            kv("gen_ai.request.model", Value::StringValue("gpt-4o".into())),
            kv("gen_ai.response.model", Value::StringValue("gpt-4o-mini-2024-07-18".into())),
            kv("gen_ai.usage.input_tokens", Value::IntValue(1000)),
            kv("gen_ai.usage.output_tokens", Value::StringValue("500".into())),
            kv("gen_ai.conversation.id", Value::StringValue("conv-1".into())),
        ];
        let resource = [
            kv("session.id", Value::StringValue("from-resource".into())),
            kv("service.name", Value::StringValue("svc".into())),
        ];
        let fields = gen_ai(&span, &resource, &PriceBook::builtin());
        assert_eq!(fields.session_id.as_deref(), Some("conv-1"), "the item's own attributes win");
        assert_eq!(fields.model(), Some("gpt-4o-mini-2024-07-18"));
        assert_eq!((fields.input_tokens, fields.output_tokens), (Some(1000), Some(500)));
        // gpt-4o-mini: 15,000 + 60,000 nanocents per token.
        assert_eq!(fields.cost_nanocents, Some(1000 * 15_000 + 500 * 60_000));
        assert_eq!(service_name(&resource), "svc");

        let unpriced = gen_ai(
            &[
                kv("gen_ai.request.model", Value::StringValue("mystery".into())),
                kv("gen_ai.usage.input_tokens", Value::IntValue(5)),
            ],
            &[],
            &PriceBook::builtin(),
        );
        assert_eq!(unpriced.cost_nanocents, None, "unknown models are not priced when observing");
    }

    #[test]
    fn senders_names_precedence_and_cost_rules() {
        let s = |v: &str| Value::StringValue(v.into());
        // Claude Code: strings everywhere, cache counted apart from input, its own cost.
        let claude = gen_ai(
            &[
                kv("model", s("claude-sonnet-4-5-20250929")),
                kv("input_tokens", s("1200")),
                kv("output_tokens", s("350")),
                kv("cache_read_tokens", s("9000")),
                kv("cache_creation_tokens", s("400")),
                kv("cost_usd", s("0.0421")),
                kv("session.id", s("sess")),
            ],
            &[],
            &PriceBook::builtin(),
        );
        assert_eq!(claude.input_tokens, Some(1200 + 9000 + 400), "cache tokens join the input");
        assert_eq!((claude.cache_read_tokens, claude.cache_write_tokens), (Some(9000), Some(400)));
        assert_eq!(claude.cost_nanocents, Some(4_210_000_000), "the sender's cost wins");
        assert_eq!(claude.session_id.as_deref(), Some("sess"));

        // Precedence: semconv before OpenInference; conversation before session.
        let mixed = gen_ai(
            &[
                kv("llm.token_count.prompt", Value::IntValue(1)),
                kv("gen_ai.usage.input_tokens", Value::IntValue(21)),
                kv("session.id", s("s")),
                kv("gen_ai.conversation.id", s("c")),
                kv("llm.model_name", s("gpt-4o-mini-2024-07-18")),
                kv("llm.token_count.prompt_details.cache_read", Value::IntValue(5)),
            ],
            &[],
            &PriceBook::builtin(),
        );
        assert_eq!((mixed.input_tokens, mixed.session_id.as_deref()), (Some(21), Some("c")));
        // 16 uncached at 15,000, 5 cached at 7,500 nanocents per token.
        assert_eq!(mixed.cost_nanocents, Some(16 * 15_000 + 5 * 7_500));

        // The Vercel AI SDK's outer span repeats its steps' usage: not counted.
        let outer = gen_ai(
            &[kv("ai.operationId", s("ai.generateText")), kv("ai.usage.inputTokens", Value::IntValue(42))],
            &[],
            &PriceBook::builtin(),
        );
        assert!(outer.aggregate && outer.input_tokens.is_none());
    }
}
