//! `assistant`: an LLM agent over the OpenAI Chat Completions API.
//!
//! The brief is the system prompt; the conversation is persisted (one row per exchange)
//! and the last [`HISTORY_EXCHANGES`] exchanges go with every turn, so the agent remembers
//! across turns and restarts.
//!
//! Its model call goes through the model gateway ([`crate::llm`]) in-process, as the agent
//! the call is for: the gateway routes it (the operator's upstream when managed, the
//! provider with the agent's `PROVIDER_API_KEY` when byok), admits it against the
//! account's credits, charges and traces it, exactly as it does a `process` runtime's
//! calls. So there is one metering implementation, and the turn's usage and charge are
//! its call's. Booting only checks the configuration, so a byok agent can be provisioned
//! first and given its key afterwards.

use std::sync::Arc;

use axum::http::StatusCode;
use roost_proto::{ApiError, ErrorReason};
use serde::Deserialize;
use serde_json::json;

use super::{Machine, MachineSpec, TurnInput, TurnOutput, tokens::AgentIdentity};
use crate::{
    ids::new_id,
    llm::{Api, ModelGateway},
    store::{Store, on_reader, on_writer},
    time::now_ms,
};

/// How many past exchanges each turn sends along.
pub const HISTORY_EXCHANGES: i64 = 20;

/// Starts assistant machines.
pub struct AssistantDriver {
    store: Store,
    models: ModelGateway,
}

impl AssistantDriver {
    /// A driver keeping history in `store`, calling models through `models`.
    pub fn new(store: Store, models: ModelGateway) -> Self {
        Self { store, models }
    }

    /// An assistant for `spec`.
    pub fn start(&self, spec: &MachineSpec) -> Arc<AssistantMachine> {
        Arc::new(AssistantMachine {
            store: self.store.clone(),
            models: self.models.clone(),
            agent: Arc::new(AgentIdentity::of(spec)),
            brief: spec.brief.clone(),
            model: spec.model.clone(),
        })
    }
}

/// One assistant agent.
pub struct AssistantMachine {
    store: Store,
    models: ModelGateway,
    /// Whom its calls are for: the gateway routes, meters and traces them as this agent's.
    agent: Arc<AgentIdentity>,
    brief: String,
    model: String,
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    choices: Vec<Choice>,
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

#[derive(sqlx::FromRow)]
struct Exchange {
    user_text: String,
    reply: String,
}

fn failed(why: impl Into<String>) -> ApiError {
    ApiError::new(ErrorReason::RuntimeFailed, why)
}

#[async_trait::async_trait]
impl Machine for AssistantMachine {
    async fn turn(&self, input: TurnInput) -> Result<TurnOutput, ApiError> {
        let mut messages = vec![json!({ "role": "system", "content": self.brief })];
        // A store error's text stays in the log (`to_api` logs it), never in the answer.
        let history = self.history().await.map_err(|e| failed(format!("reading history: {}", e.to_api().message())))?;
        for exchange in history {
            messages.push(json!({ "role": "user", "content": exchange.user_text }));
            messages.push(json!({ "role": "assistant", "content": exchange.reply }));
        }
        messages.push(json!({ "role": "user", "content": input.text }));
        let request = json!({ "model": self.model, "messages": messages });

        // The gateway's refusals (402 spent credits, 400 unpriced model, 409 a byok agent
        // without its key, 429 its caps) are the turn's; a model that cannot be reached is
        // the runtime failing.
        let (status, body) = self
            .models
            .complete(self.agent.clone(), Api::OpenAi, &request)
            .await
            .map_err(|err| if err.reason() == ErrorReason::Unavailable { failed(err.message()) } else { err })?;
        if status != StatusCode::OK {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            return Err(failed(format!("the model upstream answered HTTP {status}: {text}")));
        }
        let completion: Completion =
            serde_json::from_slice(&body).map_err(|e| failed(format!("the model upstream answered garbage: {e}")))?;
        let reply = completion
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .ok_or_else(|| failed("the model upstream returned no message"))?;
        // The reply stands (and is charged) even if the store cannot keep the exchange
        // this once: the next turn then lacks it from its history.
        if let Err(err) = self.remember(&input.text, &reply).await {
            tracing::warn!(instance = %self.agent.instance_id, error = %err, "could not keep an exchange in the history");
        }
        // Tokens are the gateway's to count (the turn adds up its calls).
        Ok(TurnOutput { reply, model: completion.model.unwrap_or_else(|| self.model.clone()), ..TurnOutput::default() })
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
            .bind(&self.agent.instance_id)
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
            .bind(&self.agent.instance_id)
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
