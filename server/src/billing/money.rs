//! The statements every money movement is made of, for both backends' connections.

use roost_proto::{ApiError, ErrorReason};

use crate::{Error, Result, billing::LedgerEntry, store::impl_for_connections};

/// The most an account's balance may hold either way: $10 billion. Every movement is
/// checked against it, so no sum of credits can overflow the store's 64-bit integers (a
/// 500 on both backends) however large the amounts clients or events carry.
pub const MAX_BALANCE_CENTS: i64 = 1_000_000_000_000;

/// 400 for a movement that would take a balance past [`MAX_BALANCE_CENTS`].
pub fn out_of_bounds(cents: i64) -> ApiError {
    ApiError::invalid_argument(format!(
        "moving {cents} cents would take the balance past ±{MAX_BALANCE_CENTS} cents, the most an account holds; \
         nothing changed"
    ))
}

/// An account row locked for the rest of the transaction.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
pub struct LockedAccount {
    /// Credits now.
    pub balance_cents: i64,
    /// Metered usage not yet charged (nanocents).
    pub usage_carry_nanocents: i64,
    /// When the first-ever agent was provisioned, if it was.
    pub first_agent_at: Option<i64>,
}

/// Money statements inside a write transaction (call on `&mut *tx`).
pub(crate) trait MoneyTx {
    /// Locks the account row until commit and reads it; `None` if there is no such account.
    ///
    /// It is an UPDATE rather than `SELECT … FOR UPDATE` so the same statement serialises
    /// on both backends: PostgreSQL takes the row lock, SQLite already holds the write lock
    /// (`BEGIN IMMEDIATE`).
    async fn lock_account(&mut self, account_id: &str, now: i64) -> Result<Option<LockedAccount>>;

    /// Takes `cents` from the balance if it covers them; the new balance, or `None`.
    async fn debit(&mut self, account_id: &str, cents: i64) -> Result<Option<i64>>;

    /// Adds `cents` (may be negative for metered usage) and sets the usage carry; the new
    /// balance. 400 (nothing changed) when the balance would leave ±[`MAX_BALANCE_CENTS`].
    async fn adjust(&mut self, account_id: &str, cents: i64, carry_nanocents: i64) -> Result<i64>;

    /// Writes a ledger row. A movement the store already has (a second refund of an
    /// instance, a second renewal of a period, a second charge of a turn: see migration
    /// 0008) is 409 `wrong_state` and the transaction must be rolled back.
    async fn insert_ledger(&mut self, entry: &LedgerEntry) -> Result<()>;

    /// Charges metered usage costing `cost_nanocents`: whole cents now, the fraction carried
    /// to the next charge (`metering::settle`), and `entry` (a usage row, its amount and
    /// balance filled in here) written when a cent or more moved. The cents charged; 0 for
    /// an account that is gone.
    async fn charge_usage(&mut self, cost_nanocents: i64, entry: LedgerEntry) -> Result<i64>;
}

impl_for_connections! {
    impl MoneyTx {
        async fn lock_account(&mut self, account_id: &str, now: i64) -> Result<Option<LockedAccount>> {
            Ok(sqlx::query_as(
                "UPDATE accounts SET updated_at = $2 WHERE id = $1 \
                 RETURNING balance_cents, usage_carry_nanocents, first_agent_at",
            )
            .bind(account_id)
            .bind(now)
            .fetch_optional(&mut *self)
            .await?)
        }

        async fn debit(&mut self, account_id: &str, cents: i64) -> Result<Option<i64>> {
            Ok(sqlx::query_scalar(
                "UPDATE accounts SET balance_cents = balance_cents - $2 \
                 WHERE id = $1 AND balance_cents >= $2 RETURNING balance_cents",
            )
            .bind(account_id)
            .bind(cents)
            .fetch_optional(&mut *self)
            .await?)
        }

        async fn adjust(&mut self, account_id: &str, cents: i64, carry_nanocents: i64) -> Result<i64> {
            if cents.unsigned_abs() > MAX_BALANCE_CENTS.unsigned_abs() {
                return Err(out_of_bounds(cents).into());
            }
            // The bound is checked without computing a sum that could overflow: with
            // |cents| ≤ MAX, `MAX - cents` and `-MAX - cents` stay far inside 64 bits.
            let balance: Option<i64> = sqlx::query_scalar(
                "UPDATE accounts SET balance_cents = balance_cents + $2, usage_carry_nanocents = $3 \
                 WHERE id = $1 AND balance_cents <= $4 - $2 AND balance_cents >= -$4 - $2 RETURNING balance_cents",
            )
            .bind(account_id)
            .bind(cents)
            .bind(carry_nanocents)
            .bind(MAX_BALANCE_CENTS)
            .fetch_optional(&mut *self)
            .await?;
            balance.ok_or_else(|| out_of_bounds(cents).into())
        }

        async fn insert_ledger(&mut self, entry: &LedgerEntry) -> Result<()> {
            sqlx::query(
                "INSERT INTO ledger (id, account_id, instance_id, kind, amount_cents, balance_after_cents, description, \
                 created_at, period_start, turn_id, top_up_id, call_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(&entry.id)
            .bind(&entry.account_id)
            .bind(&entry.instance_id)
            .bind(entry.kind.as_str())
            .bind(entry.amount_cents)
            .bind(entry.balance_after_cents)
            .bind(&entry.description)
            .bind(entry.created_at)
            .bind(entry.period_start)
            .bind(&entry.turn_id)
            .bind(&entry.top_up_id)
            .bind(&entry.call_id)
            .execute(&mut *self)
            .await
            .map_err(|err| already_moved(err, entry))?;
            Ok(())
        }

        async fn charge_usage(&mut self, cost_nanocents: i64, mut entry: LedgerEntry) -> Result<i64> {
            let Some(account) = self.lock_account(&entry.account_id, entry.created_at).await? else {
                return Ok(0);
            };
            let (cents, carry) = crate::billing::metering::settle(account.usage_carry_nanocents, cost_nanocents);
            let balance = self.adjust(&entry.account_id, -cents, carry).await?;
            if cents > 0 {
                entry.amount_cents = -cents;
                entry.balance_after_cents = balance;
                self.insert_ledger(&entry).await?;
            }
            Ok(cents)
        }
    }
}

/// A ledger insert refused by one of the once-only indexes is a lost race (two destroys of
/// one instance), not a fault: 409, and nothing moves.
fn already_moved(err: sqlx::Error, entry: &LedgerEntry) -> Error {
    match &err {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            tracing::warn!(kind = entry.kind.as_str(), instance = ?entry.instance_id, turn = ?entry.turn_id, "ledger refused a repeated movement");
            ApiError::new(ErrorReason::WrongState, format!("this {} was already made", entry.kind.as_str())).into()
        }
        _ => err.into(),
    }
}
