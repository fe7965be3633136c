//! Labels: who a conversation was for, its tags and its metadata, as the Sessions and
//! Traces filters match them.
//!
//! Each is a string: `user:<id>`, `tag:<tag>`, `meta:<key>` and, for a metadata value that
//! is a string, number or boolean, `meta:<key>=<value>` too. A filter matches one label
//! whole (`user=alice` is the label `user:alice`), so a label never needs parsing again.
//! They are read at ingest from the attributes the usual senders put them in (the item's
//! own first, then its resource's):
//!
//! - the user: `user.id` (OpenTelemetry, OpenInference, Claude Code), `langfuse.user.id`,
//!   `enduser.id` (older OpenTelemetry), `traceloop.association.properties.user_id`
//!   (OpenLLMetry), `ai.telemetry.metadata.userId` (Vercel AI SDK);
//! - tags: `tag.tags` (OpenInference), `langfuse.trace.tags`: a list of strings, or text
//!   holding a JSON list or a single tag;
//! - metadata: `metadata` (OpenInference: a JSON object as text) and every key under
//!   `langfuse.trace.metadata.`, `langfuse.observation.metadata.`,
//!   `traceloop.association.properties.` and `ai.telemetry.metadata.` (those that name a
//!   session, user or tags above are not metadata).
//!
//! An item keeps at most [`MAX_LABELS`]; a label over [`MAX_LABEL_BYTES`] is left out
//! rather than cut (a cut one would match what was never sent).

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use serde_json::Value as Json;

/// Most labels an item keeps.
pub const MAX_LABELS: usize = 32;
/// Longest label kept, in bytes.
pub const MAX_LABEL_BYTES: usize = 256;

/// Attributes naming the user, in precedence order (the first present wins).
pub const USER_KEYS: &[&str] = &[
    "user.id",
    "langfuse.user.id",
    "enduser.id",
    "traceloop.association.properties.user_id",
    "ai.telemetry.metadata.userId",
];
/// Attributes holding tags.
pub const TAG_KEYS: &[&str] = &["tag.tags", "langfuse.trace.tags"];
/// Attributes holding metadata as one JSON object.
pub const METADATA_OBJECTS: &[&str] = &["metadata"];
/// Prefixes under which each attribute is one metadata key.
pub const METADATA_PREFIXES: &[&str] = &[
    "langfuse.trace.metadata.",
    "langfuse.observation.metadata.",
    "traceloop.association.properties.",
    "ai.telemetry.metadata.",
];
/// Keys under those prefixes that are no metadata: a session, a user or tags.
const NOT_METADATA: &[&str] = &[
    "traceloop.association.properties.session_id",
    "traceloop.association.properties.thread_id",
    "traceloop.association.properties.user_id",
    "ai.telemetry.metadata.sessionId",
    "ai.telemetry.metadata.userId",
    "ai.telemetry.metadata.tags",
];

/// The label a user filter matches.
pub fn user(id: &str) -> String {
    format!("user:{id}")
}

/// The labels of an item with `attributes` whose resource has `resource`, each once.
pub fn of(attributes: &[KeyValue], resource: &[KeyValue]) -> Vec<String> {
    let mut labels = Labels::default();
    let user = [attributes, resource]
        .iter()
        .find_map(|attrs| USER_KEYS.iter().find_map(|key| last(attrs, key).and_then(scalar)));
    if let Some(user) = user {
        labels.add(format!("user:{user}"));
    }
    for attrs in [attributes, resource] {
        for kv in attrs {
            let Some(value) = kv.value.as_ref() else { continue };
            let key = kv.key.as_str();
            if TAG_KEYS.contains(&key) {
                for tag in tags(value) {
                    labels.add(format!("tag:{tag}"));
                }
            } else if METADATA_OBJECTS.contains(&key) {
                if let Some(Value::StringValue(text)) = &value.value
                    && let Ok(Json::Object(object)) = serde_json::from_str::<Json>(text)
                {
                    for (name, value) in object {
                        labels.metadata(&name, json_scalar(&value));
                    }
                }
            } else if let Some(name) = METADATA_PREFIXES.iter().find_map(|p| key.strip_prefix(p))
                && !name.is_empty()
                && !NOT_METADATA.contains(&key)
            {
                labels.metadata(name, scalar(value));
            }
        }
    }
    labels.0
}

#[derive(Default)]
struct Labels(Vec<String>);

impl Labels {
    fn add(&mut self, label: String) {
        if self.0.len() < MAX_LABELS && label.len() <= MAX_LABEL_BYTES && !self.0.contains(&label) {
            self.0.push(label);
        }
    }

    fn metadata(&mut self, key: &str, value: Option<String>) {
        self.add(format!("meta:{key}"));
        if let Some(value) = value {
            self.add(format!("meta:{key}={value}"));
        }
    }
}

/// The last attribute with `key` (later keys win, as in OTLP).
fn last<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes.iter().rev().find(|kv| kv.key == key)?.value.as_ref()
}

/// A string, number or boolean as text; none for anything else or an empty string.
fn scalar(value: &AnyValue) -> Option<String> {
    match &value.value {
        Some(Value::StringValue(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::IntValue(i)) => Some(i.to_string()),
        Some(Value::DoubleValue(d)) => Some(d.to_string()),
        Some(Value::BoolValue(b)) => Some(b.to_string()),
        _ => None,
    }
}

fn json_scalar(value: &Json) -> Option<String> {
    match value {
        Json::String(s) if !s.is_empty() => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Tags from a list of strings, or text holding a JSON list of strings or one tag.
fn tags(value: &AnyValue) -> Vec<String> {
    match &value.value {
        Some(Value::ArrayValue(list)) => list.values.iter().filter_map(scalar).collect(),
        Some(Value::StringValue(text)) if text.trim_start().starts_with('[') => {
            match serde_json::from_str::<Vec<Json>>(text) {
                Ok(list) => list.iter().filter_map(json_scalar).collect(),
                Err(_) => vec![text.clone()],
            }
        }
        Some(Value::StringValue(text)) if !text.is_empty() => vec![text.clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::ArrayValue;

    use super::*;

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
    }

    fn text(key: &str, value: &str) -> KeyValue {
        kv(key, Value::StringValue(value.into()))
    }

    #[test]
    fn users_tags_and_metadata_from_each_sender() {
        let list = Value::ArrayValue(ArrayValue {
            values: ["beta", "eu"].map(|t| AnyValue { value: Some(Value::StringValue(t.into())) }).to_vec(),
        });
        let item = [
            text("langfuse.user.id", "bob"),
            text("user.id", "alice"),
            kv("tag.tags", list),
            text("langfuse.trace.tags", r#"["eu", "vip"]"#),
            text("metadata", r#"{"plan": "pro", "seats": 3, "nested": {"a": 1}}"#),
            kv("langfuse.trace.metadata.region", Value::StringValue("west".into())),
            kv("traceloop.association.properties.experiment", Value::BoolValue(true)),
            text("traceloop.association.properties.session_id", "s1"),
            text("ai.telemetry.metadata.userId", "carol"),
        ];
        assert_eq!(
            of(&item, &[]),
            [
                "user:alice",
                "tag:beta",
                "tag:eu",
                "tag:vip",
                "meta:nested",
                "meta:plan",
                "meta:plan=pro",
                "meta:seats",
                "meta:seats=3",
                "meta:region",
                "meta:region=west",
                "meta:experiment",
                "meta:experiment=true",
            ]
        );
    }

    #[test]
    fn the_resource_fills_in_and_sizes_are_bounded() {
        let resource = [text("enduser.id", "dave"), text("tag.tags", "solo")];
        assert_eq!(of(&[], &resource), ["user:dave", "tag:solo"]);
        assert_eq!(of(&[text("user.id", "erin")], &resource), ["user:erin", "tag:solo"], "the item's user wins");
        let long = "x".repeat(MAX_LABEL_BYTES);
        assert_eq!(of(&[text("user.id", &long)], &[]), Vec::<String>::new(), "too long is left out, not cut");
        let many: Vec<KeyValue> = (0..100).map(|i| text(&format!("langfuse.trace.metadata.k{i}"), "v")).collect();
        assert_eq!(of(&many, &[]).len(), MAX_LABELS);
        assert_eq!(of(&[text("tag.tags", "[not json")], &[]), ["tag:[not json"]);
    }
}
