//! `google.protobuf.Struct` and `Value` fields as plain JSON, and JSON ↔ `Value`
//! conversions for the code that fills them.

use prost_types::{ListValue, Struct, Value, value::Kind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A protobuf `Value` as JSON.
pub fn to_json(value: &Value) -> serde_json::Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(list)) => serde_json::Value::Array(list.values.iter().map(to_json).collect()),
        Some(Kind::StructValue(object)) => serde_json::Value::Object(struct_to_map(object)),
    }
}

/// Whole numbers print without a fraction (`3`, not `3.0`); non-finite ones are null.
fn number(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// A protobuf `Struct` as a JSON object.
pub fn struct_to_map(object: &Struct) -> serde_json::Map<String, serde_json::Value> {
    object.fields.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()
}

/// JSON as a protobuf `Value` (numbers become doubles, as protobuf has it).
pub fn from_json(json: &serde_json::Value) -> Value {
    let kind = match json {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue { values: items.iter().map(from_json).collect() }),
        serde_json::Value::Object(map) => Kind::StructValue(map_to_struct(map)),
    };
    Value { kind: Some(kind) }
}

/// A JSON object as a protobuf `Struct`.
pub fn map_to_struct(map: &serde_json::Map<String, serde_json::Value>) -> Struct {
    Struct { fields: map.iter().map(|(k, v)| (k.clone(), from_json(v))).collect() }
}

/// An optional `Value` field: absent is `null`.
pub mod any {
    use super::*;

    /// Writes the value as JSON.
    pub fn serialize<S: Serializer>(value: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
        value.as_ref().map_or(serde_json::Value::Null, to_json).serialize(s)
    }

    /// Reads any JSON; `null` is absent.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        let json = serde_json::Value::deserialize(d)?;
        Ok((!json.is_null()).then(|| from_json(&json)))
    }
}

/// An optional `Struct` field: a JSON object, or `null` when absent.
pub mod object {
    use super::*;
    use serde::de::Error as _;

    /// Writes the object.
    pub fn serialize<S: Serializer>(value: &Option<Struct>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(object) => struct_to_map(object).serialize(s),
            None => s.serialize_none(),
        }
    }

    /// Reads a JSON object or `null`; anything else is an error.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Struct>, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::Object(map) => Ok(Some(map_to_struct(&map))),
            other => Err(D::Error::custom(format_args!("expected a JSON object, found {other}"))),
        }
    }
}

/// A repeated `Struct` field: an array of JSON objects.
pub mod objects {
    use super::*;

    /// Writes the objects.
    pub fn serialize<S: Serializer>(values: &[Struct], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(values.iter().map(struct_to_map))
    }

    /// Reads an array of JSON objects.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Struct>, D::Error> {
        let maps = Vec::<serde_json::Map<String, serde_json::Value>>::deserialize(d)?;
        Ok(maps.iter().map(map_to_struct).collect())
    }
}

/// A string field that also takes a JSON number (kept as its decimal text), for values
/// clients send either way, such as timestamps.
pub mod lenient_string {
    use super::*;
    use serde::de::Error as _;

    /// Writes the string.
    pub fn serialize<S: Serializer>(value: &str, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(value)
    }

    /// Reads a string, a number or `null` (empty).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(String::new()),
            serde_json::Value::String(s) => Ok(s),
            serde_json::Value::Number(n) => Ok(n.to_string()),
            other => Err(D::Error::custom(format_args!("expected a string or a number, found {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::v1::{CreateRunRequest, QueryResponse, RunEvent};

    #[test]
    fn structs_and_values_are_plain_json() {
        let req: CreateRunRequest = serde_json::from_value(
            json!({"runtime": "r", "metadata": {"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}}}),
        )
        .unwrap();
        let back = serde_json::to_value(&req).unwrap();
        assert_eq!(back["metadata"], json!({"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}}));
        assert!(serde_json::from_value::<CreateRunRequest>(json!({"runtime": "r", "metadata": [1]})).is_err());

        let event: RunEvent = serde_json::from_value(json!({"ts": 1_700_000_000_123_i64, "data": {"k": "v"}})).unwrap();
        assert_eq!(event.ts, "1700000000123");
        assert_eq!(serde_json::to_value(&event).unwrap()["data"], json!({"k": "v"}));

        let rows = QueryResponse {
            rows: vec![super::map_to_struct(json!({"n": 3}).as_object().unwrap())],
            ..Default::default()
        };
        assert_eq!(serde_json::to_value(&rows).unwrap()["rows"], json!([{"n": 3}]));
    }
}
