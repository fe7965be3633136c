//! Billing: 30-day periods paid in advance from an account's credits, pro-rata refunds,
//! metered model usage, the ledger every movement is written to (docs/architecture.md#money), and
//! top-ups bought through Stripe Checkout ([`stripe`], [`top_ups`], [`service`]).
//!
//! Every movement is one transaction that locks the account row first ([`MoneyTx`]), so
//! concurrent provisions, renewals and metered turns of one account apply one after the
//! other and a debit that would take the balance below zero is refused, never half-applied.
//! Metered calls are admitted against the balance less the holds of the calls in flight
//! ([`holds`]), so concurrency cannot overdraw by more than one call.

pub mod holds;
pub mod ledger;
pub mod money;
pub mod prices;
pub mod renewal;
pub mod service;
pub mod stripe;
pub mod top_ups;
pub mod windows;

use std::time::Duration;

pub use ledger::{ChargeKind, LedgerEntry};
pub use money::LockedAccount;
pub(crate) use money::MoneyTx;

/// Billing settings.
#[derive(Debug, Clone)]
pub struct BillingConfig {
    /// Length of a paid period: 30 days. Shorter only for demos and tests.
    pub period: Duration,
}

impl Default for BillingConfig {
    fn default() -> Self {
        Self { period: Duration::from_secs(30 * 24 * 3600) }
    }
}

impl BillingConfig {
    /// The period in milliseconds.
    pub fn period_ms(&self) -> i64 {
        self.period.as_millis().min(i64::MAX as u128) as i64
    }
}

/// The unused part of a paid period, in the unit `paid` is in (nanocents: rounded down to
/// the nanocent, so roost never refunds more than was paid):
/// `paid × (paid_through − now) / (paid_through − period_start)`.
pub fn pro_rata_refund(paid: i64, period_start: i64, paid_through: i64, now: i64) -> i64 {
    let length = paid_through - period_start;
    if paid <= 0 || length <= 0 || now >= paid_through {
        return 0;
    }
    let unused = (paid_through - now.max(period_start)) as i128;
    ((paid as i128 * unused) / length as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refunds_are_pro_rata_and_never_exceed_the_payment() {
        assert_eq!(pro_rata_refund(3000, 0, 30, 0), 3000);
        assert_eq!(pro_rata_refund(3000, 0, 30, 10), 2000);
        assert_eq!(pro_rata_refund(1000, 0, 3, 1), 666);
        assert_eq!(pro_rata_refund(3000, 0, 30, 30), 0);
        assert_eq!(pro_rata_refund(3000, 0, 30, 99), 0);
        assert_eq!(pro_rata_refund(0, 0, 30, 10), 0, "a free period refunds nothing");
        assert_eq!(pro_rata_refund(3000, 10, 40, 0), 3000, "clock before the period: whole refund");
    }
}
