//! `bytes` fields listed in `mapping::JSON_BASE64` as standard base64 strings, as proto3's
//! own JSON mapping writes bytes.

use base64::{Engine as _, engine::general_purpose::STANDARD};
use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

/// Writes the bytes as base64 (with padding).
pub fn serialize<S: Serializer>(value: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&STANDARD.encode(value))
}

/// Reads base64 (with padding).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(d)?;
    STANDARD.decode(text.as_bytes()).map_err(|e| D::Error::custom(format_args!("bad base64: {e}")))
}

#[cfg(test)]
mod tests {
    use crate::v1::ReadFileResponse;

    #[test]
    fn file_content_is_base64_both_ways() {
        let file = ReadFileResponse { content: b"\x00hi\xff".to_vec(), ..Default::default() };
        let json = serde_json::to_value(&file).unwrap();
        assert_eq!(json["content"], "AGhp/w==");
        let back: ReadFileResponse = serde_json::from_value(json).unwrap();
        assert_eq!(back.content, file.content);
    }
}
