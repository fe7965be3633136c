//! Holds: credits set aside for a metered model call while it runs, so an account's
//! concurrent calls cannot together spend far past its balance.
//!
//! A metered call is admitted only while `balance − live holds > 0`; admission then holds
//! the call's estimated cost ([`estimate_nanocents`]: every prompt byte as a token and the
//! most output the call may produce, at the model's price). The check and the hold are one
//! transaction under the account's row lock, so they are atomic per account, whatever the
//! number of agents and replicas. The transaction that charges the call's exact cost
//! deletes its hold (`crate::agents::recorder`), as does the one that records it failed.
//!
//! The bound: the last call admitted saw the balance above every hold before its own, so
//! when each call costs at most its estimate the balance ends no lower than minus one
//! call's estimate, whatever the concurrency. A hold whose runner died (a replica killed
//! mid-call) stops counting at `expires_at` (the turn cap plus a minute), or as soon as
//! another replica takes the agent over (`crate::agents::in_flight`).
//!
//! Echo turns priced above zero are admitted here one by one; the model gateway admits its
//! calls through credit windows ([`super::windows`]), each one hold row of this table.

use roost_proto::{ApiError, ErrorReason, numbers::usd_exact};

use super::{MoneyTx as _, prices::ModelPrice};
use crate::{
    Result,
    store::{BeginWrite, Store, impl_for_connections, on_writer},
    time::now_ms,
};

/// Output tokens assumed for a call (or each choice of one) that does not bound its own
/// (`max_tokens`): what current chat models produce at most by default.
pub const DEFAULT_MAX_OUTPUT_TOKENS: i64 = 16_384;

/// A call about to be made, as admission sees it.
#[derive(Debug, Clone)]
pub struct MeteredCall<'a> {
    /// Who pays.
    pub account_id: &'a str,
    /// The agent making the call.
    pub instance_id: &'a str,
    /// The turn it belongs to (the hold's key: one hold per turn).
    pub turn_id: &'a str,
    /// The most the call may cost, in nanocents ([`estimate_nanocents`]).
    pub estimate_nanocents: i64,
    /// When the hold stops counting if nothing releases it (Unix ms).
    pub expires_at: i64,
}

/// The most a call may cost, in nanocents: `prompt_bytes` prompt tokens (no
/// tokenizer makes more tokens than bytes) at the dearer of the input and cache-write
/// prices, and `max_output_tokens` at the output price. `max_output_tokens` is the whole
/// call's: a request for several choices passes the bound of one times their number (the
/// model gateway's `max_output_tokens` of each protocol), while its prompt is counted once,
/// as providers charge it.
///
/// This sizes the hold only. What a call is charged is its reported usage at the price
/// book's price, whatever the estimate was: a call that costs more than its hold (an
/// upstream that overshoots its bound) is still charged in full, and may take the account
/// below the bound the module's documentation gives by what it overshot.
pub fn estimate_nanocents(price: ModelPrice, prompt_bytes: usize, max_output_tokens: i64) -> i64 {
    let prompt = i64::try_from(prompt_bytes).unwrap_or(i64::MAX);
    prompt
        .saturating_mul(price.input.max(price.cache_write))
        .saturating_add(max_output_tokens.max(0).saturating_mul(price.output))
}

/// 402 `insufficient_credits` unless `balance` less `held` (nanocents) is above zero.
pub(crate) fn spendable(balance: i64, held: i64) -> Result<()> {
    if balance.saturating_sub(held) > 0 {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorReason::InsufficientCredits,
        format!(
            "the included model is metered and the balance is {} ({} held for calls in flight); top up to message \
             this agent",
            usd_exact(balance),
            usd_exact(held)
        ),
    )
    .into())
}

impl Store {
    /// Admits a metered call: 402 `insufficient_credits` (and nothing held) unless the
    /// account's balance less its live holds is above zero; else holds the call's estimate.
    pub async fn admit_metered_call(&self, call: &MeteredCall<'_>) -> Result<()> {
        let now = now_ms();
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            let account = tx.lock_account(call.account_id, now).await?;
            let balance = account.map_or(0, |a| a.balance_nanocents);
            // A turn admitted again (a Telegram update run again after a restart) replaces
            // its own hold rather than counting it twice.
            tx.release_holds(&[call.turn_id]).await?;
            let held = tx.held_nanocents(call.account_id, now).await?;
            spendable(balance, held)?;
            sqlx::query(
                "INSERT INTO credit_holds (turn_id, account_id, instance_id, nanocents, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(call.turn_id)
            .bind(call.account_id)
            .bind(call.instance_id)
            .bind(call.estimate_nanocents.max(1))
            .bind(now)
            .bind(call.expires_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    /// The live holds of an account, in nanocents (for tests and the account's view).
    pub async fn held_nanocents(&self, account_id: &str) -> Result<i64> {
        let now = now_ms();
        Ok(on_writer!(self, |pool| {
            let mut conn = pool.acquire().await?;
            conn.held_nanocents(account_id, now).await
        })?)
    }
}

/// Hold statements inside a transaction (call on `&mut *tx`).
pub(crate) trait HoldTx {
    /// The account's live holds, in nanocents; expired ones are deleted on the way.
    async fn held_nanocents(&mut self, account_id: &str, now: i64) -> Result<i64>;
    /// Releases the holds of these turns (charged, failed, or fenced out).
    async fn release_holds(&mut self, turn_ids: &[&str]) -> Result<()>;
    /// The nanocents of one hold (0 when there is none).
    async fn hold_nanocents(&mut self, key: &str) -> Result<i64>;
}

impl_for_connections! {
    impl HoldTx {
        async fn held_nanocents(&mut self, account_id: &str, now: i64) -> Result<i64> {
            sqlx::query("DELETE FROM credit_holds WHERE account_id = $1 AND expires_at <= $2")
                .bind(account_id)
                .bind(now)
                .execute(&mut *self)
                .await?;
            Ok(sqlx::query_scalar(
                "SELECT CAST(COALESCE(SUM(nanocents), 0) AS BIGINT) FROM credit_holds WHERE account_id = $1",
            )
            .bind(account_id)
            .fetch_one(&mut *self)
            .await?)
        }

        async fn release_holds(&mut self, turn_ids: &[&str]) -> Result<()> {
            for chunk in turn_ids.chunks(500) {
                let mut delete = sqlx::QueryBuilder::new("DELETE FROM credit_holds WHERE turn_id IN (");
                let mut ids = delete.separated(", ");
                for id in chunk {
                    ids.push_bind(*id);
                }
                delete.push(")");
                delete.build().execute(&mut *self).await?;
            }
            Ok(())
        }

        async fn hold_nanocents(&mut self, key: &str) -> Result<i64> {
            Ok(sqlx::query_scalar::<_, i64>("SELECT nanocents FROM credit_holds WHERE turn_id = $1")
                .bind(key)
                .fetch_optional(&mut *self)
                .await?
                .unwrap_or(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_count_every_byte_exactly() {
        // $1,000 per Mtok in and out: a token is a tenth of a cent.
        let price = ModelPrice { input: 100_000_000, output: 100_000_000, cache_read: 0, cache_write: 0 };
        assert_eq!(estimate_nanocents(price, 100, 250), 35_000_000_000);
        assert_eq!(estimate_nanocents(price, 1, 0), 100_000_000, "no rounding up to a cent");
        assert_eq!(estimate_nanocents(ModelPrice::default(), 1000, 1000), 0);
        let dear_writes = ModelPrice { cache_write: 200_000_000, ..price };
        assert_eq!(estimate_nanocents(dear_writes, 100, 0), 20_000_000_000, "a prompt may all be cache writes");
        assert_eq!(estimate_nanocents(price, usize::MAX, i64::MAX), i64::MAX, "saturates");
    }
}
