//! The credit ledger: one row per money movement, shown in activity as charges.

use roost_proto::v1::{Charge, ChargeKind as ProtoKind};

use super::money::nanocents_to_cents;
use crate::{ids::new_id, time::timestamp_ms};

/// Why credits moved. Stored as text; the API shows the same names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeKind {
    /// Operator top-up.
    Credit,
    /// First period of a new agent.
    Provision,
    /// A further period.
    Renewal,
    /// Unused part of a period, on destroy.
    Refund,
    /// Metered model use.
    Usage,
    /// Credits bought through Stripe Checkout.
    TopUp,
}

impl ChargeKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Credit => "credit",
            Self::Provision => "provision",
            Self::Renewal => "renewal",
            Self::Refund => "refund",
            Self::Usage => "usage",
            Self::TopUp => "top_up",
        }
    }

    fn to_proto(name: &str) -> ProtoKind {
        match name {
            "credit" => ProtoKind::Credit,
            "provision" => ProtoKind::Provision,
            "renewal" => ProtoKind::Renewal,
            "refund" => ProtoKind::Refund,
            "usage" => ProtoKind::Usage,
            "top_up" => ProtoKind::TopUp,
            _ => ProtoKind::Unspecified,
        }
    }
}

/// A ledger row about to be written.
#[derive(Debug, Clone)]
pub struct LedgerEntry {
    /// Entry id.
    pub id: String,
    /// The account whose balance moved.
    pub account_id: String,
    /// The agent concerned, if any.
    pub instance_id: Option<String>,
    /// Why.
    pub kind: ChargeKind,
    /// Signed, in nanocents: negative debits.
    pub amount_nanocents: i64,
    /// Balance right after, in nanocents.
    pub balance_after_nanocents: i64,
    /// For humans.
    pub description: String,
    /// When (Unix ms).
    pub created_at: i64,
    /// The paid period a provision or renewal pays for (its start): the store refuses a
    /// second renewal of one instance and period.
    pub period_start: Option<i64>,
    /// The metered turn a usage charge is for: the store refuses a second charge of a turn.
    pub turn_id: Option<String>,
    /// The top-up a top-up credit is for: the store refuses a second credit of one.
    pub top_up_id: Option<String>,
    /// The model-gateway call a usage charge is for: the store refuses a second charge of
    /// one (`crate::llm`).
    pub call_id: Option<String>,
}

impl LedgerEntry {
    /// A new entry with a fresh id.
    pub fn new(
        account_id: &str,
        instance_id: Option<&str>,
        kind: ChargeKind,
        amount_nanocents: i64,
        balance_after_nanocents: i64,
        description: impl Into<String>,
        now: i64,
    ) -> Self {
        Self {
            id: new_id("chg"),
            account_id: account_id.to_owned(),
            instance_id: instance_id.map(str::to_owned),
            kind,
            amount_nanocents,
            balance_after_nanocents,
            description: description.into(),
            created_at: now,
            period_start: None,
            turn_id: None,
            top_up_id: None,
            call_id: None,
        }
    }

    /// The entry, as paying for the period that starts at `start`.
    pub fn for_period(mut self, start: i64) -> Self {
        self.period_start = Some(start);
        self
    }

    /// The entry, as the charge of metered turn `turn_id`.
    pub fn for_turn(mut self, turn_id: &str) -> Self {
        self.turn_id = Some(turn_id.to_owned());
        self
    }

    /// The entry, as the charge of model-gateway call `call_id`.
    pub fn for_call(mut self, call_id: &str) -> Self {
        self.call_id = Some(call_id.to_owned());
        self
    }

    /// The entry, as the credit of top-up `top_up_id`.
    pub fn for_top_up(mut self, top_up_id: &str) -> Self {
        self.top_up_id = Some(top_up_id.to_owned());
        self
    }
}

/// A ledger row as read back.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LedgerRow {
    /// Entry id.
    pub id: String,
    /// The agent concerned, if any.
    pub instance_id: Option<String>,
    /// Stored kind name.
    pub kind: String,
    /// Signed amount, in nanocents.
    pub amount_nanocents: i64,
    /// Balance right after, in nanocents.
    pub balance_after_nanocents: i64,
    /// For humans.
    pub description: String,
    /// When (Unix ms).
    pub created_at: i64,
}

impl From<LedgerRow> for Charge {
    fn from(row: LedgerRow) -> Self {
        Charge {
            id: row.id,
            kind: ChargeKind::to_proto(&row.kind) as i32,
            amount_cents: nanocents_to_cents(row.amount_nanocents),
            balance_after_cents: nanocents_to_cents(row.balance_after_nanocents),
            amount_nanocents: row.amount_nanocents,
            balance_after_nanocents: row.balance_after_nanocents,
            description: row.description,
            instance_id: row.instance_id.unwrap_or_default(),
            created_at: Some(timestamp_ms(row.created_at)),
        }
    }
}

/// Columns of [`LedgerRow`], for SELECTs.
pub const LEDGER_COLUMNS: &str =
    "id, instance_id, kind, amount_nanocents, balance_after_nanocents, description, created_at";
