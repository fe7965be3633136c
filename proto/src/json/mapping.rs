/// Fields whose JSON name is not their proto name (the seed's upper-case config keys).
pub const JSON_RENAMES: &[(&str, &str)] = &[
    (".roost.v1.ConfigureRequest.provider_api_key", "PROVIDER_API_KEY"),
    (".roost.v1.ConfigureRequest.messaging_bot_token", "MESSAGING_BOT_TOKEN"),
    (".roost.v1.ConfigureRequest.messaging_allowed_chat_ids", "MESSAGING_ALLOWED_CHAT_IDS"),
    (".roost.v1.ListReplicasResponse.self_id", "self"),
];

/// String fields that also take a JSON number (clients send timestamps either way).
pub const JSON_LENIENT_STRINGS: &[&str] = &[".roost.v1.RunEvent.ts"];

/// `bytes` fields whose JSON is base64 (proto3's own mapping). Others stay as they were
/// (arrays of numbers), which clients of the node push already send.
pub const JSON_BASE64: &[&str] = &[".roost.v1.ReadFileResponse.content"];

/// Fields that REST shows inline in their parent object.
pub const JSON_FLATTEN: &[&str] = &[".roost.v1.ProvisionResponse.instance"];

/// The JSON name of an enum value: its name without the enum's prefix, in lower case, as
/// buf's ENUM_VALUE_PREFIX rule makes every value start with it (`HEALTH_STATUS_OK` of
/// `HealthStatus` → `"ok"`).
pub fn enum_value_json_name(enum_name: &str, value_name: &str) -> String {
    let mut prefix = String::new();
    for (i, ch) in enum_name.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            prefix.push('_');
        }
        prefix.push(ch.to_ascii_uppercase());
    }
    prefix.push('_');
    value_name.strip_prefix(&prefix).unwrap_or(value_name).to_ascii_lowercase()
}
