//! Top-ups in the store: a pending row per Checkout Session roost asked for, and the one
//! transaction that turns a verified Stripe event into credits.
//!
//! Credit happens at most once, and the store enforces it three ways: the event id is a
//! primary key (`stripe_events`: a replayed delivery changes nothing), the top-up moves
//! from not-paid to `paid` once (a second event for the same session credits nothing),
//! and the ledger holds one `top_up` entry per top-up (migration 0013's unique index).

use roost_proto::ApiError;

use crate::{
    Result,
    billing::{ChargeKind, LedgerEntry, MoneyTx, money::cents_to_nanocents},
    ids::new_id,
    store::{BeginWrite, Store, on_writer},
    time::now_ms,
};

/// The fields of a Stripe event roost reads (from `data.object`, a Checkout Session).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StripeEvent {
    /// `evt_…`.
    pub id: String,
    /// `checkout.session.completed`, …
    pub kind: String,
    /// The Checkout Session's id (`cs_…`).
    pub session_id: String,
    /// `client_reference_id`: the account roost put there.
    pub account_id: String,
    /// `metadata.top_up_id`: the pending row roost put there.
    pub top_up_id: String,
    /// `paid`, `unpaid`, `no_payment_required`.
    pub payment_status: String,
    /// What was paid, in the smallest unit.
    pub amount_total: Option<i64>,
    /// Lower-case ISO currency.
    pub currency: String,
}

impl StripeEvent {
    /// Reads an event from its JSON body; 400 when it is not an event.
    pub fn parse(payload: &[u8]) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_slice(payload)
            .map_err(|err| ApiError::invalid_argument(format!("the webhook body is not JSON: {err}")))?;
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
        let object = &value["data"]["object"];
        let event = Self {
            id: text(&value["id"]),
            kind: text(&value["type"]),
            session_id: text(&object["id"]),
            account_id: text(&object["client_reference_id"]),
            top_up_id: text(&object["metadata"]["top_up_id"]),
            payment_status: text(&object["payment_status"]),
            // A number past 64 bits is over any ceiling, not absent.
            amount_total: object["amount_total"]
                .as_i64()
                .or_else(|| object["amount_total"].as_f64().filter(|a| *a > 0.0).map(|_| i64::MAX)),
            currency: text(&object["currency"]).to_lowercase(),
        };
        if event.id.is_empty() || event.kind.is_empty() {
            return Err(ApiError::invalid_argument("the webhook body is not a Stripe event (no id or type)").into());
        }
        Ok(event)
    }

    /// Whether the event says the session's money arrived.
    pub fn is_payment(&self) -> bool {
        (self.kind == "checkout.session.completed" && self.payment_status == "paid")
            || self.kind == "checkout.session.async_payment_succeeded"
    }

    /// The status a session reaches without payment, if this event says so.
    fn settles_unpaid(&self) -> Option<&'static str> {
        match self.kind.as_str() {
            "checkout.session.expired" => Some("expired"),
            "checkout.session.async_payment_failed" => Some("failed"),
            _ => None,
        }
    }
}

/// Credits an applied event moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credited {
    /// The account.
    pub account_id: String,
    /// Cents added.
    pub cents: i64,
    /// Balance after, in nanocents.
    pub balance_nanocents: i64,
}

#[derive(sqlx::FromRow)]
struct PendingTopUp {
    id: String,
    account_id: String,
    amount_cents: i64,
}

impl Store {
    /// Records a top-up about to be paid, before Stripe is asked for its session (so a
    /// paid session always finds its row).
    pub async fn create_top_up(&self, account_id: &str, amount_cents: i64) -> Result<String> {
        let id = new_id("top");
        let now = now_ms();
        on_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO top_ups (id, account_id, amount_cents, status, created_at, updated_at) \
                 VALUES ($1, $2, $3, 'pending', $4, $4)",
            )
            .bind(&id)
            .bind(account_id)
            .bind(amount_cents)
            .bind(now)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(id)
    }

    /// Notes the Checkout Session Stripe made for a top-up, or (`None`) that asking failed.
    pub async fn set_top_up_session(&self, top_up_id: &str, session_id: Option<&str>) -> Result<()> {
        let status = if session_id.is_some() { "pending" } else { "failed" };
        on_writer!(self, |pool| {
            sqlx::query("UPDATE top_ups SET stripe_session_id = $2, status = $3, updated_at = $4 WHERE id = $1")
                .bind(top_up_id)
                .bind(session_id)
                .bind(status)
                .bind(now_ms())
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// Applies a verified event once: `Some` when it credited an account. A replayed event,
    /// a second event for a paid session, an unknown session or an event without a payment
    /// credits nothing (and is not an error: Stripe would retry an error for days).
    pub async fn apply_stripe_event(&self, event: &StripeEvent, currency: &str) -> Result<Option<Credited>> {
        // No top-up roost offers is this large: a signed event claiming more is refused
        // (400, logged) before anything is recorded, never added up into an overflow.
        if event.amount_total.is_some_and(|amount| amount > super::stripe::MAX_TOP_UP_CENTS) {
            tracing::warn!(event = %event.id, amount = ?event.amount_total, "Stripe event over the top-up ceiling refused");
            return Err(ApiError::invalid_argument(format!(
                "amount_total {} is over the largest top-up ({} cents); nothing credited",
                event.amount_total.unwrap_or_default(),
                super::stripe::MAX_TOP_UP_CENTS
            ))
            .into());
        }
        let now = now_ms();
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            let fresh = sqlx::query(
                "INSERT INTO stripe_events (id, type, received_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            )
            .bind(&event.id)
            .bind(&event.kind)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if fresh == 0 {
                tracing::info!(event = %event.id, "Stripe event replayed; nothing to do");
                return Ok(None);
            }
            if let Some(status) = event.settles_unpaid() {
                sqlx::query("UPDATE top_ups SET status = $2, updated_at = $3 WHERE stripe_session_id = $1 AND status = 'pending'")
                    .bind(&event.session_id)
                    .bind(status)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            if !event.is_payment() {
                tx.commit().await?;
                return Ok(None);
            }
            let pending: Option<PendingTopUp> = sqlx::query_as(
                "SELECT id, account_id, amount_cents FROM top_ups \
                 WHERE (id = $1 OR stripe_session_id = $2) AND status <> 'paid' AND ($3 = '' OR account_id = $3)",
            )
            .bind(&event.top_up_id)
            .bind(&event.session_id)
            .bind(&event.account_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(top_up) = pending else {
                tracing::warn!(event = %event.id, session = %event.session_id, "paid Stripe session with no unpaid top-up; nothing credited");
                tx.commit().await?;
                return Ok(None);
            };
            if !event.currency.is_empty() && event.currency != currency {
                tracing::warn!(event = %event.id, currency = %event.currency, "Stripe payment in another currency; nothing credited");
                tx.commit().await?;
                return Ok(None);
            }
            let cents = event.amount_total.filter(|&a| a > 0).unwrap_or(top_up.amount_cents);
            // The claim: of two events for one session racing here, the second waits for
            // the first's commit and then finds the top-up paid.
            let claimed = sqlx::query(
                "UPDATE top_ups SET status = 'paid', stripe_session_id = COALESCE(stripe_session_id, $2), updated_at = $3 \
                 WHERE id = $1 AND status <> 'paid'",
            )
            .bind(&top_up.id)
            .bind(&event.session_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if claimed == 0 {
                tracing::info!(event = %event.id, session = %event.session_id, "Stripe session already credited");
                tx.commit().await?;
                return Ok(None);
            }
            if tx.lock_account(&top_up.account_id, now).await?.is_none() {
                return Err(ApiError::not_found(format!("no account {}", top_up.account_id)).into());
            }
            let amount = cents_to_nanocents(cents)?;
            let balance = tx.adjust(&top_up.account_id, amount).await?;
            let entry = LedgerEntry::new(
                &top_up.account_id,
                None,
                ChargeKind::TopUp,
                amount,
                balance,
                "top-up through Stripe Checkout",
                now,
            )
            .for_top_up(&top_up.id);
            tx.insert_ledger(&entry).await?;
            tx.commit().await?;
            Ok(Some(Credited { account_id: top_up.account_id, cents, balance_nanocents: balance }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_from_stripe_json() {
        let body = br#"{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"id":"cs_1",
            "client_reference_id":"acct_1","payment_status":"paid","amount_total":500,"currency":"USD",
            "metadata":{"top_up_id":"top_1"}}}}"#;
        let event = StripeEvent::parse(body).unwrap();
        assert_eq!(event.session_id, "cs_1");
        assert_eq!(event.top_up_id, "top_1");
        assert_eq!(event.amount_total, Some(500));
        assert_eq!(event.currency, "usd");
        assert!(event.is_payment());
        assert!(StripeEvent::parse(b"[]").is_err());
        assert!(StripeEvent::parse(b"not json").is_err());
        let unpaid =
            StripeEvent { kind: "checkout.session.completed".into(), payment_status: "unpaid".into(), ..event };
        assert!(!unpaid.is_payment());
    }
}
