//! Checks on what clients send, done once in the core for every protocol: required values
//! (400 `invalid_argument`) and sizes (413 `payload_too_large`).

use roost_proto::{ApiError, ErrorReason, v1};

use crate::callers::ModelMode;

/// Largest brief, in bytes (UTF-8).
pub const MAX_BRIEF_BYTES: usize = 16 * 1024;
/// Largest message text, in bytes.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Longest MESSAGING_ALLOWED_CHAT_IDS value accepted.
pub const MAX_ALLOWED_CHATS_BYTES: usize = 32 * 1024;
/// Largest secret (provider key, bot token), in bytes.
pub const MAX_SECRET_BYTES: usize = 4 * 1024;
/// Largest model name, in bytes.
pub const MAX_MODEL_BYTES: usize = 200;

/// A value that must be present and at most `max` bytes.
fn required(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid_argument(format!("{field} is required")));
    }
    at_most(field, value, max)
}

fn at_most(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max {
        return Err(ApiError::new(
            ErrorReason::PayloadTooLarge,
            format!("{field} is {} bytes; the limit is {max}", value.len()),
        ));
    }
    Ok(())
}

/// The `instance_id` of a request.
pub fn instance_id(id: &str) -> Result<&str, ApiError> {
    if id.trim().is_empty() {
        return Err(ApiError::invalid_argument("instance_id is required"));
    }
    Ok(id)
}

/// A brief (provision's `brief`, config's `agent_brief`).
pub fn brief(field: &str, brief: &str) -> Result<(), ApiError> {
    required(field, brief, MAX_BRIEF_BYTES)
}

/// Most characters of an agent's name.
pub const MAX_NAME_CHARS: usize = 80;

/// An agent's name: optional (empty is none), at most [`MAX_NAME_CHARS`] characters after
/// trimming, no control characters (it is shown in one line everywhere).
pub fn name(name: &str) -> Result<(), ApiError> {
    let name = name.trim();
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::invalid_argument(format!("name: at most {MAX_NAME_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid_argument("name: no control characters (line breaks, tabs)"));
    }
    Ok(())
}

/// A message text.
pub fn text(text: &str) -> Result<(), ApiError> {
    required("text", text, MAX_TEXT_BYTES)
}

/// The model mode of a provision request (absent = managed).
pub fn model_mode(value: i32) -> Result<ModelMode, ApiError> {
    match v1::ModelMode::try_from(value) {
        Ok(v1::ModelMode::Unspecified | v1::ModelMode::Managed) => Ok(ModelMode::Managed),
        Ok(v1::ModelMode::Byok) => Ok(ModelMode::Byok),
        Err(_) => Err(ApiError::invalid_argument(format!("model_mode {value} is not managed or byok"))),
    }
}

/// A config request: at least one field, each within its limit.
pub fn config(req: &v1::ConfigureRequest) -> Result<(), ApiError> {
    if let Some(name) = &req.name {
        self::name(name)?;
    }
    if req.agent_brief.is_none()
        && req.name.is_none()
        && req.provider_api_key.is_none()
        && req.messaging_bot_token.is_none()
        && req.model.is_none()
        && req.messaging_allowed_chat_ids.is_none()
    {
        return Err(ApiError::invalid_argument(
            "nothing to configure: send at least one of agent_brief, PROVIDER_API_KEY, MESSAGING_BOT_TOKEN, \
             MESSAGING_ALLOWED_CHAT_IDS, model, name",
        ));
    }
    if let Some(chats) = &req.messaging_allowed_chat_ids {
        at_most("MESSAGING_ALLOWED_CHAT_IDS", chats, MAX_ALLOWED_CHATS_BYTES)?;
        super::instances::allowed_chats(chats)?;
    }
    if let Some(brief) = &req.agent_brief {
        self::brief("agent_brief", brief)?;
    }
    if let Some(key) = &req.provider_api_key {
        at_most("PROVIDER_API_KEY", key, MAX_SECRET_BYTES)?;
    }
    if let Some(token) = &req.messaging_bot_token {
        at_most("MESSAGING_BOT_TOKEN", token, MAX_SECRET_BYTES)?;
    }
    if let Some(model) = &req.model {
        at_most("model", model, MAX_MODEL_BYTES)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_values_and_sizes() {
        assert_eq!(text("  ").unwrap_err().reason(), ErrorReason::InvalidArgument);
        assert_eq!(text(&"x".repeat(MAX_TEXT_BYTES + 1)).unwrap_err().reason(), ErrorReason::PayloadTooLarge);
        assert!(text(&"x".repeat(MAX_TEXT_BYTES)).is_ok());
        assert_eq!(brief("brief", "").unwrap_err().message(), "brief is required");
        assert_eq!(model_mode(7).unwrap_err().reason(), ErrorReason::InvalidArgument);
        assert_eq!(model_mode(0).unwrap(), ModelMode::Managed);
    }

    #[test]
    fn config_needs_something_to_change() {
        let empty = v1::ConfigureRequest { instance_id: "ins_x".into(), ..Default::default() };
        assert_eq!(config(&empty).unwrap_err().reason(), ErrorReason::InvalidArgument);
        let key = v1::ConfigureRequest { provider_api_key: Some(String::new()), ..empty };
        assert!(config(&key).is_ok(), "an empty key removes it");
    }
}
