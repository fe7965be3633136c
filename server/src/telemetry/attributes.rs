//! OTLP attributes: as JSON for storage, and the GenAI semantic conventions pulled out into
//! typed fields (and priced).

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use serde_json::{Map, Value as Json};

use super::rows::GenAi;
use crate::billing::metering::PriceBook;

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
    let value = attributes.iter().rev().find(|kv| kv.key == key)?.value.as_ref()?;
    match &value.value {
        Some(Value::IntValue(i)) => Some(*i),
        Some(Value::DoubleValue(d)) if d.is_finite() && d.fract() == 0.0 => Some(*d as i64),
        Some(Value::StringValue(s)) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The first of `keys` found in the item's attributes, else in its resource's.
fn first_string(item: &[KeyValue], resource: &[KeyValue], keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| string(item, k)).or_else(|| keys.iter().find_map(|k| string(resource, k)))
}

/// The GenAI fields of an item, looked up in its attributes, then its resource's, and
/// priced with `prices` when the model is in the price book.
pub fn gen_ai(item: &[KeyValue], resource: &[KeyValue], prices: &PriceBook) -> GenAi {
    let mut fields = GenAi {
        session_id: first_string(item, resource, &["session.id", "gen_ai.conversation.id"]),
        agent_id: first_string(item, resource, &["gen_ai.agent.id", "roost.instance.id", "agent.id"]),
        operation: first_string(item, resource, &["gen_ai.operation.name"]),
        system: first_string(item, resource, &["gen_ai.system", "gen_ai.provider.name"]),
        request_model: first_string(item, resource, &["gen_ai.request.model"]),
        response_model: first_string(item, resource, &["gen_ai.response.model"]),
        input_tokens: int(item, "gen_ai.usage.input_tokens").or_else(|| int(item, "gen_ai.usage.prompt_tokens")),
        output_tokens: int(item, "gen_ai.usage.output_tokens").or_else(|| int(item, "gen_ai.usage.completion_tokens")),
        cost_nanocents: None,
    };
    if fields.input_tokens.is_some() || fields.output_tokens.is_some() {
        fields.cost_nanocents = fields.model().and_then(|model| {
            prices.lookup(model).map(|price| {
                fields.input_tokens.unwrap_or(0).max(0).saturating_mul(price.input)
                    + fields.output_tokens.unwrap_or(0).max(0).saturating_mul(price.output)
            })
        });
    }
    fields
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
}
