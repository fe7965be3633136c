//! `google.protobuf.Timestamp` fields as RFC 3339 strings in UTC (`null` when unset).

use prost_types::Timestamp;
use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

/// Writes `2026-11-22T15:39:00.123Z`, or `null`.
pub fn serialize<S: Serializer>(value: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(ts) => s.collect_str(ts),
        None => s.serialize_none(),
    }
}

/// Reads an RFC 3339 string, or `null`.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
    match Option::<String>::deserialize(d)? {
        Some(text) => text
            .parse::<Timestamp>()
            .map(Some)
            .map_err(|e| D::Error::custom(format_args!("bad timestamp {text:?}: {e}"))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use prost_types::Timestamp;

    use crate::v1::GetVersionResponse;

    #[test]
    fn timestamps_round_trip_as_rfc3339() {
        let version = GetVersionResponse {
            build_date: Some(Timestamp { seconds: 1_795_000_000, nanos: 0 }),
            ..Default::default()
        };
        let json = serde_json::to_value(&version).expect("serialises");
        assert_eq!(json["build_date"], "2026-11-18T11:06:40Z");
        let back: GetVersionResponse = serde_json::from_value(json).expect("deserialises");
        assert_eq!(back.build_date, version.build_date);
    }
}
