//! Accounts: who owns agents and pays for them. Operators create accounts, keys and
//! credits with the CLI (these functions); key holders read their account over
//! `AccountService`.

pub mod keys;

use keys::KeyTx as _;
pub mod service;

use roost_proto::{ApiError, v1::Account};

use crate::{
    Result,
    billing::{
        ChargeKind, LedgerEntry, MoneyTx,
        ledger::{LEDGER_COLUMNS, LedgerRow},
        money::{cents_to_nanocents, nanocents_to_cents},
    },
    ids::new_id,
    store::{BeginWrite, Store, on_reader, on_writer},
    time::{now_ms, timestamp_ms},
};

/// Plans an account can be on. Entitled plans (all but free) matter to the self-updater.
pub const PLANS: &[&str] = &["free", "trial", "starter", "pro", "enterprise"];

/// An account as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AccountRow {
    /// Account id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Credits, exactly, in nanocents (`billing::money`).
    pub balance_nanocents: i64,
    /// Plan name.
    pub plan: String,
    /// When its first-ever agent was provisioned.
    pub first_agent_at: Option<i64>,
    /// When it was created.
    pub created_at: i64,
}

impl From<AccountRow> for Account {
    fn from(row: AccountRow) -> Self {
        Account {
            id: row.id,
            name: row.name,
            balance_cents: nanocents_to_cents(row.balance_nanocents),
            balance_nanocents: row.balance_nanocents,
            plan: row.plan,
            first_agent_free: row.first_agent_at.is_none(),
            created_at: Some(timestamp_ms(row.created_at)),
        }
    }
}

/// A new account and the API key that was made with it (shown once).
#[derive(Debug, Clone)]
pub struct NewAccount {
    /// The account.
    pub account: AccountRow,
    /// Its first key, in full.
    pub api_key: keys::NewKey,
}

impl Store {
    /// Creates an account with `credits_cents` (a ledger credit when positive) and a first
    /// API key, in one transaction.
    pub async fn create_account(&self, name: &str, credits_cents: i64) -> Result<NewAccount> {
        let name = name.trim();
        if name.is_empty() {
            return Err(ApiError::invalid_argument("an account needs a name").into());
        }
        if credits_cents < 0 {
            return Err(ApiError::invalid_argument("credits cannot be negative").into());
        }
        let credits = cents_to_nanocents(credits_cents)?;
        let now = now_ms();
        let account = AccountRow {
            id: new_id("acct"),
            name: name.to_owned(),
            balance_nanocents: credits,
            plan: "free".to_owned(),
            first_agent_at: None,
            created_at: now,
        };
        let key = keys::NewKey::generate(&account.id, "default");
        on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            sqlx::query(
                "INSERT INTO accounts (id, name, balance_nanocents, plan, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)",
            )
            .bind(&account.id)
            .bind(&account.name)
            .bind(credits)
            .bind(&account.plan)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.insert_key(&key, now).await?;
            if credits_cents > 0 {
                let entry =
                    LedgerEntry::new(&account.id, None, ChargeKind::Credit, credits, credits, "initial credits", now);
                tx.insert_ledger(&entry).await?;
            }
            tx.commit().await?;
        });
        Ok(NewAccount { account, api_key: key })
    }

    /// The account, if it exists.
    pub async fn account(&self, account_id: &str) -> Result<Option<AccountRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT id, name, balance_nanocents, plan, first_agent_at, created_at FROM accounts WHERE id = $1",
            )
            .bind(account_id)
            .fetch_optional(pool)
            .await
        })?)
    }

    /// Every account, oldest first (for the operator CLI).
    pub async fn list_accounts(&self) -> Result<Vec<AccountRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(
                "SELECT id, name, balance_nanocents, plan, first_agent_at, created_at FROM accounts ORDER BY created_at, id",
            )
                .fetch_all(pool)
                .await
        })?)
    }

    /// Adds credits (an operator top-up, whole cents); returns the new balance in nanocents.
    pub async fn add_credits(&self, account_id: &str, cents: i64) -> Result<i64> {
        if cents <= 0 {
            return Err(ApiError::invalid_argument("credits to add must be a positive number of cents").into());
        }
        let now = now_ms();
        let balance = on_writer!(self, |pool| {
            let mut tx = pool.begin_write().await?;
            if tx.lock_account(account_id, now).await?.is_none() {
                return Err(ApiError::not_found(format!("no account {account_id}")).into());
            }
            let amount = cents_to_nanocents(cents)?;
            let balance = tx.adjust(account_id, amount).await?;
            tx.insert_ledger(&LedgerEntry::new(
                account_id,
                None,
                ChargeKind::Credit,
                amount,
                balance,
                "credits added",
                now,
            ))
            .await?;
            tx.commit().await?;
            balance
        });
        Ok(balance)
    }

    /// Sets an account's plan (one of [`PLANS`]).
    pub async fn set_plan(&self, account_id: &str, plan: &str) -> Result<()> {
        if !PLANS.contains(&plan) {
            return Err(
                ApiError::invalid_argument(format!("unknown plan {plan:?}; one of {}", PLANS.join(", "))).into()
            );
        }
        let updated = on_writer!(self, |pool| {
            sqlx::query("UPDATE accounts SET plan = $2, updated_at = $3 WHERE id = $1")
                .bind(account_id)
                .bind(plan)
                .bind(now_ms())
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        if updated == 0 {
            return Err(ApiError::not_found(format!("no account {account_id}")).into());
        }
        Ok(())
    }

    /// The account's ledger, newest first.
    pub async fn account_ledger(&self, account_id: &str, limit: i64) -> Result<Vec<LedgerRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {LEDGER_COLUMNS} FROM ledger WHERE account_id = $1 ORDER BY seq DESC LIMIT $2"
            )))
            .bind(account_id)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }
}
