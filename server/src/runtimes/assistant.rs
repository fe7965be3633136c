//! `assistant`: an LLM agent over any OpenAI-compatible chat-completions API.
//!
//! The brief is the system prompt; the conversation is persisted (one row per exchange)
//! and the last [`HISTORY_EXCHANGES`] exchanges go with every turn, so the agent remembers
//! across turns and restarts. Managed agents use the server's configured upstream (and are
//! metered by the agents module); byok agents call the byok upstream with their own
//! `PROVIDER_API_KEY`. Booting only checks the configuration, so a byok agent can be
//! provisioned first and given its key afterwards.

use std::{sync::Arc, time::Duration};

use roost_proto::{ApiError, ErrorReason};
use serde::Deserialize;
use serde_json::json;

use super::{CallBounds, Machine, MachineSpec, ModelMode, TurnInput, TurnOutput};
use crate::{
    ids::new_id,
    store::{Store, on_reader, on_writer},
    time::now_ms,
};

/// How many past exchanges each turn sends along.
pub const HISTORY_EXCHANGES: i64 = 20;

/// An OpenAI-compatible endpoint: `{base_url}/chat/completions`.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Such as `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; managed upstreams may not need one.
    pub api_key: Option<String>,
}

/// Starts assistant machines.
pub struct AssistantDriver {
    store: Store,
    client: reqwest::Client,
    managed: Option<Upstream>,
    byok_base_url: String,
}

impl AssistantDriver {
    /// A driver keeping history in `store`, calling `managed` for managed agents and
    /// `byok_base_url` for byok ones.
    pub fn new(store: Store, managed: Option<Upstream>, byok_base_url: String) -> Self {
        let client = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build().unwrap_or_default();
        Self { store, client, managed, byok_base_url }
    }

    /// An assistant for `spec`.
    pub fn start(&self, spec: &MachineSpec) -> Result<Arc<AssistantMachine>, String> {
        let upstream = match spec.model_mode {
            ModelMode::Managed => self.managed.clone(),
            ModelMode::Byok => spec
                .provider_api_key
                .clone()
                .map(|key| Upstream { base_url: self.byok_base_url.clone(), api_key: Some(key) }),
        };
        Ok(Arc::new(AssistantMachine {
            store: self.store.clone(),
            client: self.client.clone(),
            instance_id: spec.instance_id.clone(),
            brief: spec.brief.clone(),
            model: spec.model.clone(),
            mode: spec.model_mode,
            upstream,
        }))
    }
}

/// One assistant agent.
pub struct AssistantMachine {
    store: Store,
    client: reqwest::Client,
    instance_id: String,
    brief: String,
    model: String,
    mode: ModelMode,
    upstream: Option<Upstream>,
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<CompletionUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize, Default)]
struct CompletionUsage {
    #[serde(default)]
    prompt_tokens: i64,
    #[serde(default)]
    completion_tokens: i64,
}

#[derive(sqlx::FromRow)]
struct Exchange {
    user_text: String,
    reply: String,
}

fn failed(why: impl Into<String>) -> ApiError {
    ApiError::new(ErrorReason::RuntimeFailed, why)
}

/// Bytes a message adds to a request besides its content (`{"role":"…","content":""}`).
const MESSAGE_OVERHEAD: usize = 40;

#[async_trait::async_trait]
impl Machine for AssistantMachine {
    async fn bounds(&self, input: &TurnInput) -> CallBounds {
        // What the request will carry: the brief, the remembered exchanges, the message.
        let history = self.history().await.unwrap_or_default();
        let remembered: usize = history.iter().map(|e| e.user_text.len() + e.reply.len() + 2 * MESSAGE_OVERHEAD).sum();
        CallBounds {
            prompt_bytes: self.brief.len() + remembered + input.text.len() + 2 * MESSAGE_OVERHEAD + self.model.len(),
            max_output_tokens: crate::billing::holds::DEFAULT_MAX_OUTPUT_TOKENS,
        }
    }

    async fn turn(&self, input: TurnInput) -> Result<TurnOutput, ApiError> {
        let upstream = self.upstream.as_ref().ok_or_else(|| match self.mode {
            ModelMode::Byok => ApiError::new(
                ErrorReason::WrongState,
                "this byok agent has no PROVIDER_API_KEY yet: set it with the config call",
            ),
            ModelMode::Managed => {
                failed("this roost has no managed model upstream (start it with --model-upstream-url)")
            }
        })?;
        let mut messages = vec![json!({ "role": "system", "content": self.brief })];
        // A store error's text stays in the log (`to_api` logs it), never in the answer.
        let history = self.history().await.map_err(|e| failed(format!("reading history: {}", e.to_api().message())))?;
        for exchange in history {
            messages.push(json!({ "role": "user", "content": exchange.user_text }));
            messages.push(json!({ "role": "assistant", "content": exchange.reply }));
        }
        messages.push(json!({ "role": "user", "content": input.text }));

        let mut request = self
            .client
            .post(format!("{}/chat/completions", upstream.base_url.trim_end_matches('/')))
            .json(&json!({ "model": self.model, "messages": messages }));
        if let Some(key) = &upstream.api_key {
            request = request.bearer_auth(key);
        }
        let resp = request.send().await.map_err(|e| failed(format!("model upstream unreachable: {e}")))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| failed(format!("model upstream reply cut short: {e}")))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            return Err(failed(format!("model upstream answered HTTP {status}: {text}")));
        }
        let completion: Completion =
            serde_json::from_slice(&body).map_err(|e| failed(format!("model upstream answered garbage: {e}")))?;
        let reply = completion
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .ok_or_else(|| failed("model upstream returned no message"))?;
        // The reply stands (and is charged) even if the store cannot keep the exchange
        // this once: the next turn then lacks it from its history.
        if let Err(err) = self.remember(&input.text, &reply).await {
            tracing::warn!(instance = %self.instance_id, error = %err, "could not keep an exchange in the history");
        }
        let usage = completion.usage.unwrap_or_default();
        Ok(TurnOutput {
            reply,
            input_tokens: usage.prompt_tokens.max(0),
            output_tokens: usage.completion_tokens.max(0),
            model: completion.model.unwrap_or_else(|| self.model.clone()),
        })
    }

    async fn stop(&self) {}

    async fn died(&self) -> String {
        std::future::pending().await
    }
}

impl AssistantMachine {
    /// The last exchanges, oldest first.
    async fn history(&self) -> crate::Result<Vec<Exchange>> {
        let mut rows: Vec<Exchange> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT user_text, reply FROM assistant_exchanges WHERE instance_id = $1 \
                 ORDER BY created_at DESC, id DESC LIMIT $2",
            )
            .bind(&self.instance_id)
            .bind(HISTORY_EXCHANGES)
            .fetch_all(pool)
            .await
        })?;
        rows.reverse();
        Ok(rows)
    }

    /// Keeps an exchange. PostgreSQL's text cannot hold U+0000 (a model may answer with
    /// one): it is kept as U+FFFD, on both backends alike.
    async fn remember(&self, user_text: &str, reply: &str) -> crate::Result<()> {
        let (user_text, reply) = (user_text.replace('\0', "\u{FFFD}"), reply.replace('\0', "\u{FFFD}"));
        on_writer!(self.store, |pool| {
            sqlx::query(
                "INSERT INTO assistant_exchanges (id, instance_id, user_text, reply, created_at) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(new_id("exc"))
            .bind(&self.instance_id)
            .bind(&user_text)
            .bind(&reply)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        Ok(())
    }
}
