//! Enum fields as lower-case names without their prefix: `HEALTH_STATUS_OK` is `"ok"`.
//!
//! prost stores enum fields as `i32`; `build.rs` implements [`JsonEnum`] for every roost.v1
//! enum and points each enum field at [`one`], [`many`] or [`maybe`].

use serde::{Deserialize, Deserializer, Serializer};

/// A generated enum's JSON names. Implemented by `build.rs` output, one impl per enum.
pub trait JsonEnum {
    /// The JSON name of a value number; `None` for numbers this build does not know.
    fn json_name(value: i32) -> Option<&'static str>;
    /// The value number of a JSON name; the zero ("unspecified") value has no name.
    fn from_json_name(name: &str) -> Option<i32>;
    /// Every name a client may send, for error messages and docs.
    const JSON_NAMES: &'static [&'static str];
}

fn name_of<E: JsonEnum>(value: i32) -> &'static str {
    // A number from a newer peer has no name here; "unknown" beats failing the whole body.
    E::json_name(value).unwrap_or("unknown")
}

fn value_of<E: JsonEnum, Err: serde::de::Error>(name: &str) -> Result<i32, Err> {
    E::from_json_name(name).ok_or_else(|| {
        Err::custom(format_args!("unknown value {name:?}, expected one of {}", E::JSON_NAMES.join(", ")))
    })
}

/// A plain enum field.
pub mod one {
    use super::*;

    /// Writes the value's name.
    pub fn serialize<E: JsonEnum, S: Serializer>(value: &i32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(name_of::<E>(*value))
    }

    /// Reads a name; an unknown name is an error that lists the known ones.
    pub fn deserialize<'de, E: JsonEnum, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        let name = String::deserialize(d)?;
        value_of::<E, D::Error>(&name)
    }
}

/// A repeated enum field.
pub mod many {
    use super::*;

    /// Writes the names as an array.
    pub fn serialize<E: JsonEnum, S: Serializer>(values: &[i32], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(values.iter().map(|v| name_of::<E>(*v)))
    }

    /// Reads an array of names.
    pub fn deserialize<'de, E: JsonEnum, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
        Vec::<String>::deserialize(d)?.iter().map(|n| value_of::<E, D::Error>(n)).collect()
    }
}

/// A proto3 `optional` enum field: absent or `null` is `None`.
pub mod maybe {
    use super::*;

    /// Writes the name, or `null`.
    pub fn serialize<E: JsonEnum, S: Serializer>(value: &Option<i32>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.serialize_str(name_of::<E>(*v)),
            None => s.serialize_none(),
        }
    }

    /// Reads a name or `null`.
    pub fn deserialize<'de, E: JsonEnum, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
        Option::<String>::deserialize(d)?.map(|n| value_of::<E, D::Error>(&n)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use crate::v1::{GetHealthResponse, HealthStatus};

    #[test]
    fn enum_fields_use_short_lower_case_names() {
        let health = GetHealthResponse { status: HealthStatus::Degraded as i32, ..Default::default() };
        let json = serde_json::to_value(&health).expect("serialises");
        assert_eq!(json["status"], "degraded");
        let back: GetHealthResponse = serde_json::from_value(json).expect("deserialises");
        assert_eq!(back.status, HealthStatus::Degraded as i32);
    }

    #[test]
    fn unknown_enum_names_are_rejected_with_the_known_ones() {
        let err = serde_json::from_str::<GetHealthResponse>(r#"{"status":"sideways"}"#).unwrap_err();
        assert!(err.to_string().contains("expected one of ok, degraded"), "{err}");
    }
}
