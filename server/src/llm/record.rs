//! Model calls' rows and their charges: one transaction stores a batch of finished calls
//! and charges each managed call's exact cost (nanocents, `crate::billing::money`) with a
//! usage ledger row naming the call. The credits admitted for them are windows in memory
//! ([`crate::billing::windows`]), settled by the writer once this commits.

use crate::{
    Result,
    billing::{ChargeKind, LedgerEntry, MoneyTx as _},
    store::{BeginWrite, Store, on_writer},
};

/// A finished call, as stored.
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// Call id (`call_…`).
    pub id: String,
    /// Who pays.
    pub account_id: String,
    /// The agent that called.
    pub instance_id: String,
    /// The turn it was made in ('' between turns).
    pub turn_id: String,
    /// `openai` or `anthropic`.
    pub api: &'static str,
    /// `managed` or `byok`.
    pub model_mode: &'static str,
    /// The model asked for.
    pub request_model: String,
    /// The model that answered ('' when none did).
    pub response_model: String,
    /// `completed`, `failed` (an upstream error or an unreachable upstream) or `cancelled`
    /// (the client hung up).
    pub status: &'static str,
    /// The upstream's HTTP status (0 when it never answered).
    pub http_status: i64,
    /// Whether the answer was streamed.
    pub streamed: bool,
    /// Prompt tokens, cached ones included.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Prompt tokens read from the cache.
    pub cache_read_tokens: i64,
    /// Prompt tokens written to the cache.
    pub cache_write_tokens: i64,
    /// Its cost at the price book (nanocents); 0 when unpriced.
    pub cost_nanocents: i64,
    /// Whether the account pays for it (a managed call).
    pub charged: bool,
    /// Start (Unix ms).
    pub started_at: i64,
    /// Duration.
    pub duration_ms: i64,
    /// Time to the first streamed chunk.
    pub first_chunk_ms: Option<i64>,
    /// What went wrong.
    pub error: String,
}

impl Store {
    /// Stores finished calls in one transaction, charging each one that is paid for; the
    /// nanocents charged for each.
    pub async fn record_model_calls(&self, calls: &[&CallRecord]) -> Result<Vec<i64>> {
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            let mut charged = Vec::with_capacity(calls.len());
            for call in calls {
                let charged_now = if call.charged && call.cost_nanocents > 0 {
                    let model = if call.response_model.is_empty() { &call.request_model } else { &call.response_model };
                    let turn =
                        if call.turn_id.is_empty() { String::new() } else { format!(" (turn {})", call.turn_id) };
                    let what = format!(
                        "model call: {} in + {} out tokens of {model}{turn}",
                        call.input_tokens, call.output_tokens
                    );
                    let entry = LedgerEntry::new(
                        &call.account_id,
                        Some(&call.instance_id),
                        ChargeKind::Usage,
                        0,
                        0,
                        what,
                        call.started_at,
                    )
                    .for_call(&call.id);
                    tx.charge_usage(call.cost_nanocents, entry).await?
                } else {
                    0
                };
                sqlx::query(
                "INSERT INTO model_calls (id, account_id, instance_id, turn_id, api, model_mode, request_model, \
                 response_model, status, http_status, streamed, input_tokens, output_tokens, cache_read_tokens, \
                 cache_write_tokens, cost_nanocents, charged_nanocents, started_at, duration_ms, first_chunk_ms, error) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)",
            )
            .bind(&call.id)
            .bind(&call.account_id)
            .bind(&call.instance_id)
            .bind(&call.turn_id)
            .bind(call.api)
            .bind(call.model_mode)
            .bind(&call.request_model)
            .bind(&call.response_model)
            .bind(call.status)
            .bind(call.http_status)
            .bind(call.streamed)
            .bind(call.input_tokens)
            .bind(call.output_tokens)
            .bind(call.cache_read_tokens)
            .bind(call.cache_write_tokens)
            .bind(call.cost_nanocents)
            .bind(charged_now)
            .bind(call.started_at)
            .bind(call.duration_ms)
            .bind(call.first_chunk_ms)
            .bind(&call.error)
            .execute(&mut *tx)
            .await?;
                charged.push(charged_now);
            }
            tx.commit().await?;
            Ok(charged)
        })
    }
}
