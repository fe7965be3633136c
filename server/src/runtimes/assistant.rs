//! `assistant`: an LLM agent over the OpenAI Chat Completions API.
//!
//! The brief is the system prompt; the conversation is persisted (one row per exchange)
//! and the last [`HISTORY_EXCHANGES`] exchanges go with every turn, so the agent remembers
//! across turns and restarts. The machine reads them from the store once, at its first
//! turn, and keeps them in memory after: it is the only writer of its agent's exchanges
//! (one turn at a time, on the one replica that owns the agent), and a store read before
//! every model call was a quarter of roost's share of a streamed reply's first text.
//!
//! Its model call goes through the model gateway ([`crate::llm`]) in-process, as the agent
//! the call is for: the model gateway routes it (the operator's upstream when managed, the
//! provider with the agent's `PROVIDER_API_KEY` when byok), admits it against the
//! account's credits, charges and traces it, exactly as it does a `process` runtime's
//! calls. So there is one metering implementation, and the turn's usage and charge are
//! its call's. Booting only checks the configuration, so a byok agent can be provisioned
//! first and given its key afterwards.

use std::{collections::VecDeque, sync::Arc};

use axum::http::StatusCode;
use roost_proto::{ApiError, ErrorReason};
use serde::Deserialize;
use serde_json::json;

use super::{
    Machine, MachineSpec, TurnInput, TurnOutput,
    streaming::{MAX_STREAMED_REPLY, each_event, openai_chunk},
};
use crate::{
    callers::tokens::AgentIdentity,
    ids::new_id,
    llm::{Api, ModelGateway},
    store::{Store, on_reader, on_writer},
    time::now_ms,
    turn_stream::TurnStream,
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
            agent: Arc::new(spec.identity()),
            brief: spec.brief.clone(),
            model: spec.model.clone(),
            history: tokio::sync::Mutex::new(None),
        })
    }
}

/// One assistant agent.
pub struct AssistantMachine {
    store: Store,
    models: ModelGateway,
    /// Whom its calls are for: the model gateway routes, meters and traces them as this agent's.
    agent: Arc<AgentIdentity>,
    brief: String,
    model: String,
    /// The last exchanges, oldest first: read from the store at the first turn, then kept
    /// here as each turn adds one.
    history: tokio::sync::Mutex<Option<VecDeque<Exchange>>>,
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

#[derive(Clone, sqlx::FromRow)]
struct Exchange {
    user_text: String,
    reply: String,
}

impl Exchange {
    /// An exchange as the store keeps it, so the one in memory reads the same as the one a
    /// restart reads back: PostgreSQL's text cannot hold U+0000 (a model may answer with
    /// one), so it is kept as U+FFFD, on both backends alike.
    fn storable(user_text: &str, reply: &str) -> Self {
        Self { user_text: user_text.replace('\0', "\u{FFFD}"), reply: reply.replace('\0', "\u{FFFD}") }
    }
}

fn failed(why: impl Into<String>) -> ApiError {
    ApiError::new(ErrorReason::RuntimeFailed, why)
}

#[async_trait::async_trait]
impl Machine for AssistantMachine {
    async fn turn(&self, input: TurnInput) -> Result<TurnOutput, ApiError> {
        let mut messages = vec![json!({ "role": "system", "content": self.brief })];
        // A store error's text stays in the log (`to_api` logs it), never in the answer.
        {
            let mut history = self.history.lock().await;
            if history.is_none() {
                let read = self.history().await;
                *history = Some(read.map_err(|e| failed(format!("reading history: {}", e.to_api().message())))?);
            }
            for exchange in history.iter().flatten() {
                messages.push(json!({ "role": "user", "content": exchange.user_text }));
                messages.push(json!({ "role": "assistant", "content": exchange.reply }));
            }
        }
        messages.push(json!({ "role": "user", "content": input.text }));
        let (reply, model) = if input.events.streaming() {
            let request = json!({ "model": self.model, "messages": messages, "stream": true });
            self.streamed(request, &input.events).await?
        } else {
            let request = json!({ "model": self.model, "messages": messages });
            self.whole(request).await?
        };
        // The reply stands (and is charged) even if the store cannot keep the exchange
        // this once: the next turns of this machine still have it, a restart does not.
        let exchange = Exchange::storable(&input.text, &reply);
        if let Err(err) = self.remember(&exchange).await {
            tracing::warn!(instance = %self.agent.instance_id, error = %err, "could not keep an exchange in the history");
        }
        let mut history = self.history.lock().await;
        let kept = history.get_or_insert_with(VecDeque::new);
        kept.push_back(exchange);
        while kept.len() > HISTORY_EXCHANGES as usize {
            kept.pop_front();
        }
        drop(history);
        // Tokens are the model gateway's to count (the turn adds up its calls).
        Ok(TurnOutput { reply, model: model.unwrap_or_else(|| self.model.clone()), ..TurnOutput::default() })
    }

    async fn stop(&self) {}

    async fn died(&self) -> String {
        std::future::pending().await
    }
}

/// The model gateway's refusals (402 spent credits, 400 unpriced model, 409 a byok agent without
/// its key, 429 its caps) are the turn's; a model that cannot be reached is the runtime
/// failing.
fn refused(err: ApiError) -> ApiError {
    if err.reason() == ErrorReason::Unavailable { failed(err.message()) } else { err }
}

/// An upstream's error answer, as the turn's failure.
fn upstream_said(status: StatusCode, body: &[u8]) -> ApiError {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    failed(format!("the model upstream answered HTTP {status}: {text}"))
}

impl AssistantMachine {
    /// One whole model call: the reply and the model that wrote it.
    async fn whole(&self, request: serde_json::Value) -> Result<(String, Option<String>), ApiError> {
        let (status, body) = self.models.complete(self.agent.clone(), Api::OpenAi, request).await.map_err(refused)?;
        if status != StatusCode::OK {
            return Err(upstream_said(status, &body));
        }
        let completion: Completion =
            serde_json::from_slice(&body).map_err(|e| failed(format!("the model upstream answered garbage: {e}")))?;
        let model = completion.model;
        let reply = completion
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .ok_or_else(|| failed("the model upstream returned no message"))?;
        Ok((reply, model))
    }

    /// One streamed model call: each chunk's text goes to `events` as it arrives.
    async fn streamed(
        &self,
        request: serde_json::Value,
        events: &TurnStream,
    ) -> Result<(String, Option<String>), ApiError> {
        let (status, body) = self.models.open(self.agent.clone(), Api::OpenAi, request).await.map_err(refused)?;
        if status != StatusCode::OK {
            let body = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
            return Err(upstream_said(status, &body));
        }
        let (mut reply, mut model, mut error) = (String::new(), None, None);
        let read = each_event(body.into_data_stream(), |_, data| {
            let chunk = openai_chunk(data);
            if let Some(said) = chunk.error {
                error = Some(said);
                return false;
            }
            if chunk.model.is_some() {
                model = chunk.model;
            }
            events.delta(&chunk.text);
            reply.push_str(&chunk.text);
            !chunk.done && reply.len() <= MAX_STREAMED_REPLY
        })
        .await;
        if let Some(said) = error {
            return Err(failed(format!("the model upstream's stream reported an error: {said}")));
        }
        read.map_err(failed)?;
        Ok((reply, model))
    }

    /// The last exchanges in the store, oldest first.
    async fn history(&self) -> crate::Result<VecDeque<Exchange>> {
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
        Ok(rows.into())
    }

    /// Keeps an exchange in the store.
    async fn remember(&self, exchange: &Exchange) -> crate::Result<()> {
        on_writer!(self.store, |pool| {
            sqlx::query(
                "INSERT INTO assistant_exchanges (id, instance_id, user_text, reply, created_at) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(new_id("exc"))
            .bind(&self.agent.instance_id)
            .bind(&exchange.user_text)
            .bind(&exchange.reply)
            .bind(now_ms())
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
        })?;
        Ok(())
    }
}
