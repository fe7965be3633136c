//! The statements every money movement is made of, for both backends' connections.

use roost_proto::{ApiError, ErrorReason};

use crate::{Error, Result, billing::LedgerEntry, store::impl_for_connections};

/// Nanocents (10⁻⁹ cent) in a cent: the unit every amount of money is kept in.
pub use super::prices::NANOCENTS_PER_CENT;

/// The most an account's balance may hold either way, in cents: $10 million. Every
/// movement is checked against it, so no sum of credits can overflow the store's 64-bit
/// integers (a 500 on both backends) however large the amounts clients or events carry:
/// 10¹⁸ nanocents, with room for one more movement of the same size below 2⁶³.
pub const MAX_BALANCE_CENTS: i64 = 1_000_000_000;
/// [`MAX_BALANCE_CENTS`] in nanocents.
pub const MAX_BALANCE_NANOCENTS: i64 = MAX_BALANCE_CENTS * NANOCENTS_PER_CENT;

/// Whole cents as nanocents; 400 (nothing changed) past ±[`MAX_BALANCE_CENTS`].
pub fn cents_to_nanocents(cents: i64) -> Result<i64> {
    if cents.unsigned_abs() > MAX_BALANCE_CENTS.unsigned_abs() {
        return Err(out_of_bounds(cents).into());
    }
    Ok(cents * NANOCENTS_PER_CENT)
}

/// Nanocents rounded to the nearest cent, halves away from zero: what the API's
/// `*_cents` fields show beside the exact `*_nanocents`. A $0.00023 call is 0 cents there
/// and 23,000,000 nanocents exactly.
pub fn nanocents_to_cents(nanocents: i64) -> i64 {
    let half = NANOCENTS_PER_CENT / 2;
    let whole = nanocents / NANOCENTS_PER_CENT;
    let rest = nanocents % NANOCENTS_PER_CENT;
    if rest >= half {
        whole + 1
    } else if rest <= -half {
        whole - 1
    } else {
        whole
    }
}

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
    /// Credits now, exactly (nanocents).
    pub balance_nanocents: i64,
    /// When the first-ever agent was provisioned, if it was.
    pub first_agent_at: Option<i64>,
}

/// Money statements inside a write transaction (call on `&mut *tx`). Every amount is in
/// nanocents.
pub(crate) trait MoneyTx {
    /// Locks the account row until commit and reads it; `None` if there is no such account.
    ///
    /// It is an UPDATE rather than `SELECT … FOR UPDATE` so the same statement serialises
    /// on both backends: PostgreSQL takes the row lock, SQLite already holds the write lock
    /// (`BEGIN IMMEDIATE`).
    async fn lock_account(&mut self, account_id: &str, now: i64) -> Result<Option<LockedAccount>>;

    /// Takes `nanocents` from the balance if it covers them; the new balance, or `None`.
    async fn debit(&mut self, account_id: &str, nanocents: i64) -> Result<Option<i64>>;

    /// Adds `nanocents` (negative for metered usage); the new balance. 400 (nothing
    /// changed) when the balance would leave ±[`MAX_BALANCE_NANOCENTS`].
    async fn adjust(&mut self, account_id: &str, nanocents: i64) -> Result<i64>;

    /// Writes a ledger row. A movement the store already has (a second refund of an
    /// instance, a second renewal of a period, a second charge of a turn: see migration
    /// 0008) is 409 `wrong_state` and the transaction must be rolled back.
    async fn insert_ledger(&mut self, entry: &LedgerEntry) -> Result<()>;

    /// Charges metered usage costing `cost_nanocents`, exactly, and writes `entry` (a usage
    /// row, its amount and balance filled in here) when it cost anything. The nanocents
    /// charged; 0 for an account that is gone.
    async fn charge_usage(&mut self, cost_nanocents: i64, entry: LedgerEntry) -> Result<i64>;
}

impl_for_connections! {
    impl MoneyTx {
        async fn lock_account(&mut self, account_id: &str, now: i64) -> Result<Option<LockedAccount>> {
            Ok(sqlx::query_as(
                "UPDATE accounts SET updated_at = $2 WHERE id = $1 \
                 RETURNING balance_nanocents, first_agent_at",
            )
            .bind(account_id)
            .bind(now)
            .fetch_optional(&mut *self)
            .await?)
        }

        async fn debit(&mut self, account_id: &str, nanocents: i64) -> Result<Option<i64>> {
            Ok(sqlx::query_scalar(
                "UPDATE accounts SET balance_nanocents = balance_nanocents - $2 \
                 WHERE id = $1 AND balance_nanocents >= $2 RETURNING balance_nanocents",
            )
            .bind(account_id)
            .bind(nanocents)
            .fetch_optional(&mut *self)
            .await?)
        }

        async fn adjust(&mut self, account_id: &str, nanocents: i64) -> Result<i64> {
            let refused = || out_of_bounds(nanocents_to_cents(nanocents)).into();
            if nanocents.unsigned_abs() > MAX_BALANCE_NANOCENTS.unsigned_abs() {
                return Err(refused());
            }
            // The bound is checked without computing a sum that could overflow: with
            // |nanocents| ≤ MAX, `MAX - nanocents` and `-MAX - nanocents` stay inside 64 bits.
            let balance: Option<i64> = sqlx::query_scalar(
                "UPDATE accounts SET balance_nanocents = balance_nanocents + $2 \
                 WHERE id = $1 AND balance_nanocents <= $3 - $2 AND balance_nanocents >= -$3 - $2 \
                 RETURNING balance_nanocents",
            )
            .bind(account_id)
            .bind(nanocents)
            .bind(MAX_BALANCE_NANOCENTS)
            .fetch_optional(&mut *self)
            .await?;
            balance.ok_or_else(refused)
        }

        async fn insert_ledger(&mut self, entry: &LedgerEntry) -> Result<()> {
            sqlx::query(
                "INSERT INTO ledger (id, account_id, instance_id, kind, amount_nanocents, balance_after_nanocents, description, \
                 created_at, period_start, turn_id, top_up_id, call_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(&entry.id)
            .bind(&entry.account_id)
            .bind(&entry.instance_id)
            .bind(entry.kind.as_str())
            .bind(entry.amount_nanocents)
            .bind(entry.balance_after_nanocents)
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
            let cost = cost_nanocents.max(0);
            if self.lock_account(&entry.account_id, entry.created_at).await?.is_none() {
                return Ok(0);
            }
            if cost == 0 {
                return Ok(0);
            }
            let balance = self.adjust(&entry.account_id, -cost).await?;
            entry.amount_nanocents = -cost;
            entry.balance_after_nanocents = balance;
            self.insert_ledger(&entry).await?;
            Ok(cost)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cents_shown_round_to_the_nearest_halves_away_from_zero() {
        assert_eq!(nanocents_to_cents(23_000_000), 0, "$0.00023");
        assert_eq!(nanocents_to_cents(499_999_999), 0);
        assert_eq!(nanocents_to_cents(500_000_000), 1);
        assert_eq!(nanocents_to_cents(-500_000_000), -1);
        assert_eq!(nanocents_to_cents(-499_999_999), 0);
        assert_eq!(nanocents_to_cents(1_250_000_000_000), 1_250);
        assert_eq!(nanocents_to_cents(i64::MAX), i64::MAX / NANOCENTS_PER_CENT + 1);
        assert_eq!(nanocents_to_cents(i64::MIN), i64::MIN / NANOCENTS_PER_CENT - 1);
    }

    #[test]
    fn whole_cents_convert_only_within_the_bound() {
        assert_eq!(cents_to_nanocents(12).unwrap(), 12_000_000_000);
        assert_eq!(cents_to_nanocents(-MAX_BALANCE_CENTS).unwrap(), -MAX_BALANCE_NANOCENTS);
        assert!(cents_to_nanocents(MAX_BALANCE_CENTS + 1).is_err());
        assert!(cents_to_nanocents(i64::MIN).is_err());
    }
}
