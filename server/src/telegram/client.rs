//! A small typed client of the Telegram Bot API (`POST {base}/bot{token}/{method}`, JSON
//! in and out): the calls roost's channel makes, nothing more.
//!
//! The token is part of every URL, so no error this client returns carries a URL: network
//! errors are reported without it, and API errors with Telegram's own description. Callers
//! may log and show these errors as they are.

use std::{fmt, time::Duration};

use serde::{Deserialize, de::DeserializeOwned};
use serde_json::{Value, json};

/// Telegram's public API.
pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";

/// What a call can fail with. Displays without the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TelegramError {
    /// Telegram answered `ok: false` (401 bad token, 403 blocked, 409 another poller,
    /// 429 with `retry_after`, …).
    Api {
        /// Telegram's `error_code` (an HTTP status).
        code: u16,
        /// Telegram's `description`.
        description: String,
        /// Seconds to wait before retrying (429).
        retry_after: Option<u64>,
    },
    /// Telegram could not be reached, or answered something that is not the Bot API.
    Network(String),
}

impl fmt::Display for TelegramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Api { code, description, .. } => write!(f, "Telegram answered {code}: {description}"),
            Self::Network(why) => write!(f, "Telegram could not be reached: {why}"),
        }
    }
}

impl std::error::Error for TelegramError {}

impl TelegramError {
    /// The API error code, if Telegram answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { code, .. } => Some(*code),
            Self::Network(_) => None,
        }
    }
}

/// The bot a token belongs to (`getMe`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BotUser {
    /// The bot's numeric id (the token's prefix): one bot, one id, whatever its token.
    pub id: i64,
    /// Its @username.
    #[serde(default)]
    pub username: String,
    /// Its display name.
    #[serde(default)]
    pub first_name: String,
}

/// One update from `getUpdates`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Update {
    /// Increasing id; the next poll asks from the last one + 1.
    pub update_id: i64,
    /// A new message, when the update is one.
    #[serde(default)]
    pub message: Option<Message>,
}

/// A message (only what roost reads).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Message {
    /// Id within the chat.
    pub message_id: i64,
    /// Where it was sent.
    pub chat: Chat,
    /// Its text, if it is a text message.
    #[serde(default)]
    pub text: Option<String>,
}

/// A chat.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Chat {
    /// The chat id (negative for groups).
    pub id: i64,
}

/// The Bot API client; cheap to clone.
#[derive(Clone)]
pub struct TelegramClient {
    http: reqwest::Client,
    base: String,
}

impl fmt::Debug for TelegramClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramClient").field("base", &self.base).finish()
    }
}

impl TelegramClient {
    /// A client of the Bot API at `base` (`--telegram-api-base`).
    pub fn new(base: &str) -> Self {
        let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build().unwrap_or_default();
        Self { http, base: base.trim_end_matches('/').to_owned() }
    }

    /// Calls `method` with `body`; `wait` bounds the whole call.
    async fn call<T: DeserializeOwned>(
        &self,
        token: &str,
        method: &str,
        body: Value,
        wait: Duration,
    ) -> Result<T, TelegramError> {
        let url = format!("{}/bot{token}/{method}", self.base);
        let response = self
            .http
            .post(url)
            .timeout(wait)
            .json(&body)
            .send()
            .await
            .map_err(|err| TelegramError::Network(err.without_url().to_string()))?;
        let status = response.status().as_u16();
        let answer: Value = response
            .json()
            .await
            .map_err(|_| TelegramError::Network(format!("{method} answered {status} without Bot API JSON")))?;
        if answer["ok"].as_bool() == Some(true) {
            return serde_json::from_value(answer["result"].clone())
                .map_err(|err| TelegramError::Network(format!("{method} answered an unexpected result: {err}")));
        }
        Err(TelegramError::Api {
            code: answer["error_code"].as_u64().map_or(status, |c| c as u16),
            description: answer["description"].as_str().unwrap_or("no description").to_owned(),
            retry_after: answer["parameters"]["retry_after"].as_u64(),
        })
    }

    /// `getMe`: which bot the token belongs to (401 for a bad token).
    pub async fn get_me(&self, token: &str) -> Result<BotUser, TelegramError> {
        self.call(token, "getMe", json!({}), Duration::from_secs(15)).await
    }

    /// `deleteWebhook`, so long polling may start (pending updates are kept).
    pub async fn delete_webhook(&self, token: &str) -> Result<bool, TelegramError> {
        self.call(token, "deleteWebhook", json!({"drop_pending_updates": false}), Duration::from_secs(15)).await
    }

    /// `setWebhook` to `url`, verified by `secret_token` on each delivery.
    pub async fn set_webhook(&self, token: &str, url: &str, secret_token: &str) -> Result<bool, TelegramError> {
        let body = json!({"url": url, "secret_token": secret_token, "allowed_updates": ["message"]});
        self.call(token, "setWebhook", body, Duration::from_secs(15)).await
    }

    /// `getUpdates` from `offset`, waiting up to `timeout_secs` for one (long polling).
    pub async fn get_updates(&self, token: &str, offset: i64, timeout_secs: u64) -> Result<Vec<Update>, TelegramError> {
        let body = json!({"offset": offset, "timeout": timeout_secs, "allowed_updates": ["message"]});
        self.call(token, "getUpdates", body, Duration::from_secs(timeout_secs + 15)).await
    }

    /// `sendMessage` of plain text to a chat.
    pub async fn send_message(&self, token: &str, chat_id: i64, text: &str) -> Result<Message, TelegramError> {
        self.call(token, "sendMessage", json!({"chat_id": chat_id, "text": text}), Duration::from_secs(30)).await
    }

    /// `sendChatAction` (`typing`).
    pub async fn send_chat_action(&self, token: &str, chat_id: i64, action: &str) -> Result<bool, TelegramError> {
        self.call(token, "sendChatAction", json!({"chat_id": chat_id, "action": action}), Duration::from_secs(15)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn errors_never_carry_the_token() {
        // Nothing listens on port 9 of loopback: a network error, reported without the URL.
        let client = TelegramClient::new("http://127.0.0.1:9");
        let err = client.get_me("123456:SECRET-TOKEN").await.unwrap_err();
        assert!(matches!(err, TelegramError::Network(_)));
        assert!(!err.to_string().contains("SECRET-TOKEN"), "{err}");
        assert!(!format!("{err:?}").contains("SECRET-TOKEN"), "{err:?}");
    }
}
