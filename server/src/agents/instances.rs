//! Instance rows: the durable half of a hosted agent (the live half is [`super::live`]).

use roost_proto::{
    ApiError,
    v1::{Instance, InstanceConfig, InstanceStatus},
};

use crate::{
    Result,
    callers::ModelMode,
    secrets::Sealed,
    store::{Store, impl_for_connections, on_reader},
    time::timestamp_ms,
};

/// What a config call may change, and what the machine is started with. Secrets stay
/// sealed here as in the store; the live agent's `machine_spec` opens them for the runtime.
///
/// It lives here, below the live agent (`super::live`), because the store reads it from a
/// row ([`Settings::of`]) and writes it (`update_settings`); the live agent only holds one.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Standing brief.
    pub brief: String,
    /// Managed or byok.
    pub model_mode: ModelMode,
    /// Model selection ("" = runtime default).
    pub model: String,
    /// byok key, sealed.
    pub provider_api_key: Option<Sealed>,
    /// Chat bot token, sealed.
    pub messaging_bot_token: Option<Sealed>,
    /// MESSAGING_ALLOWED_CHAT_IDS, canonical (comma-separated, sorted).
    pub allowed_chats: String,
    /// What people call it ('' for none); the runtime never sees it.
    pub name: String,
}

impl Settings {
    /// The settings stored in a row.
    pub fn of(row: &InstanceRow) -> Self {
        Self {
            brief: row.brief.clone(),
            model_mode: ModelMode::parse(&row.model_mode),
            model: row.model.clone(),
            provider_api_key: row.provider_api_key.clone().map(Sealed::from_stored),
            messaging_bot_token: row.messaging_bot_token.clone().map(Sealed::from_stored),
            allowed_chats: row.telegram_allowed_chats.clone(),
            name: row.name.clone(),
        }
    }
}

/// Lifecycle states (docs/architecture.md#hosted-agents). Stored as their lower-case names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Booting after provision or resume.
    Provisioning,
    /// Up; the only state that takes messages.
    Running,
    /// Restarting to apply config.
    Restarting,
    /// Stopped by its owner.
    Paused,
    /// Stopped because a renewal could not be paid.
    Suspended,
    /// Boot failed or the runtime died.
    Failed,
    /// Gone (the row stays for its history).
    Destroyed,
}

impl Status {
    /// The stored name (also the API's).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provisioning => "provisioning",
            Self::Running => "running",
            Self::Restarting => "restarting",
            Self::Paused => "paused",
            Self::Suspended => "suspended",
            Self::Failed => "failed",
            Self::Destroyed => "destroyed",
        }
    }

    /// Parses a stored name; unknown names (from a newer roost) read as failed.
    pub fn parse(name: &str) -> Self {
        match name {
            "provisioning" => Self::Provisioning,
            "running" => Self::Running,
            "restarting" => Self::Restarting,
            "paused" => Self::Paused,
            "suspended" => Self::Suspended,
            "destroyed" => Self::Destroyed,
            _ => Self::Failed,
        }
    }

    /// The API enum value.
    pub fn to_proto(self) -> InstanceStatus {
        match self {
            Self::Provisioning => InstanceStatus::Provisioning,
            Self::Running => InstanceStatus::Running,
            Self::Restarting => InstanceStatus::Restarting,
            Self::Paused => InstanceStatus::Paused,
            Self::Suspended => InstanceStatus::Suspended,
            Self::Failed => InstanceStatus::Failed,
            Self::Destroyed => InstanceStatus::Destroyed,
        }
    }
}

/// An instance as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InstanceRow {
    /// Instance id.
    pub id: String,
    /// Owner.
    pub account_id: String,
    /// Catalogue id.
    pub runtime: String,
    /// Stored status name.
    pub status: String,
    /// Why it is in that state.
    pub status_detail: String,
    /// Standing brief.
    pub brief: String,
    /// Stored model mode.
    pub model_mode: String,
    /// Model selection ("" = runtime default).
    pub model: String,
    /// byok key, sealed (`crate::secrets`).
    pub provider_api_key: Option<String>,
    /// Chat bot token, sealed.
    pub messaging_bot_token: Option<String>,
    /// MESSAGING_ALLOWED_CHAT_IDS, canonical (see [`allowed_chats`]).
    pub telegram_allowed_chats: String,
    /// The connected bot's @username (getMe), '' when none is.
    pub telegram_username: String,
    /// Plan price it renews at.
    pub price_cents_month: i64,
    /// Start of the current paid period (Unix ms).
    pub period_start: i64,
    /// End of the current paid period (Unix ms).
    pub paid_through: i64,
    /// What the current period cost (0 when free).
    pub period_price_cents: i64,
    /// Provisioned at.
    pub created_at: i64,
    /// Last change.
    pub updated_at: i64,
    /// Destroyed at, if it was.
    pub destroyed_at: Option<i64>,
    /// What people call it ('' for none).
    pub name: String,
}

/// Reads a MESSAGING_ALLOWED_CHAT_IDS value (comma-separated chat ids, spaces allowed;
/// empty for none): sorted, without duplicates; 400 naming a value that is not a chat id.
pub fn allowed_chats(value: &str) -> Result<Vec<i64>, roost_proto::ApiError> {
    let mut ids = Vec::new();
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let id = part.parse::<i64>().ok().filter(|id| *id != 0).ok_or_else(|| {
            roost_proto::ApiError::invalid_argument(format!(
                "MESSAGING_ALLOWED_CHAT_IDS: {part:?} is not a Telegram chat id (an integer such as 12345 or -100123)"
            ))
        })?;
        ids.push(id);
    }
    ids.sort_unstable();
    ids.dedup();
    if ids.len() > MAX_ALLOWED_CHATS {
        return Err(roost_proto::ApiError::invalid_argument(format!(
            "MESSAGING_ALLOWED_CHAT_IDS: at most {MAX_ALLOWED_CHATS} chats"
        )));
    }
    Ok(ids)
}

/// Most chats an agent's allow-list holds.
pub const MAX_ALLOWED_CHATS: usize = 1000;

/// Columns of [`InstanceRow`], for SELECTs.
pub const INSTANCE_COLUMNS: &str = "id, account_id, runtime, status, status_detail, brief, model_mode, model, \
     provider_api_key, messaging_bot_token, telegram_allowed_chats, telegram_username, price_cents_month, period_start, paid_through, period_price_cents, \
     created_at, updated_at, destroyed_at, name";

impl InstanceRow {
    /// The lifecycle state.
    pub fn status(&self) -> Status {
        Status::parse(&self.status)
    }

    /// The API view: config flags instead of secrets.
    pub fn to_proto(&self) -> Instance {
        let bot = self.messaging_bot_token.is_some();
        Instance {
            id: self.id.clone(),
            runtime: self.runtime.clone(),
            status: self.status().to_proto() as i32,
            status_detail: self.status_detail.clone(),
            brief: self.brief.clone(),
            model_mode: match ModelMode::parse(&self.model_mode) {
                ModelMode::Managed => roost_proto::v1::ModelMode::Managed,
                ModelMode::Byok => roost_proto::v1::ModelMode::Byok,
            } as i32,
            model: self.model.clone(),
            config: Some(InstanceConfig {
                provider_api_key_set: self.provider_api_key.is_some(),
                messaging_bot_token_set: bot,
                channel: if bot { "telegram".to_owned() } else { String::new() },
                allowed_chat_ids: allowed_chats(&self.telegram_allowed_chats).unwrap_or_default(),
            }),
            price_cents_month: self.price_cents_month,
            paid_through: Some(timestamp_ms(self.paid_through)),
            created_at: Some(timestamp_ms(self.created_at)),
            updated_at: Some(timestamp_ms(self.updated_at)),
            // Measured only when the agent is read alone (`Hosting::get_instance`).
            workspace_bytes: 0,
            name: self.name.clone(),
        }
    }
}

impl Store {
    /// An instance by id, destroyed or not.
    pub async fn instance(&self, id: &str) -> Result<Option<InstanceRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {INSTANCE_COLUMNS} FROM instances WHERE id = $1")))
                .bind(id)
                .fetch_optional(pool)
                .await
        })?)
    }

    /// An account's live (not destroyed) instances, newest first.
    pub async fn instances_of(&self, account_id: &str) -> Result<Vec<InstanceRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {INSTANCE_COLUMNS} FROM instances WHERE account_id = $1 AND destroyed_at IS NULL \
                 ORDER BY created_at DESC, id DESC"
            )))
            .bind(account_id)
            .fetch_all(pool)
            .await
        })?)
    }

    /// Every live instance (start-up restores them).
    pub async fn live_instances(&self) -> Result<Vec<InstanceRow>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {INSTANCE_COLUMNS} FROM instances WHERE destroyed_at IS NULL ORDER BY created_at"
            )))
            .fetch_all(pool)
            .await
        })?)
    }

    /// Ids of live, not suspended instances whose paid period has ended.
    pub async fn instances_due(&self, now: i64) -> Result<Vec<String>> {
        Ok(on_reader!(self, |pool| {
            sqlx::query_scalar(
                "SELECT id FROM instances WHERE destroyed_at IS NULL AND paid_through <= $1 AND status <> 'suspended' \
                 ORDER BY paid_through",
            )
            .bind(now)
            .fetch_all(pool)
            .await
        })?)
    }
}

/// Instance statements inside a write transaction (call on `&mut *tx`).
pub(crate) trait InstanceTx {
    /// Inserts a new instance.
    async fn insert_instance(&mut self, row: &InstanceRow) -> Result<()>;
    /// Re-reads an instance under the transaction.
    async fn read_instance(&mut self, id: &str) -> Result<Option<InstanceRow>>;
    /// How many of the account's instances are booting right now.
    async fn settling_deploys(&mut self, account_id: &str) -> Result<i64>;
    /// Sets status and detail.
    async fn update_status(&mut self, id: &str, status: Status, detail: &str, now: i64) -> Result<()>;
    /// Starts a new paid period.
    async fn set_period(&mut self, id: &str, start: i64, end: i64, price: i64, now: i64) -> Result<()>;
    /// Replaces the settings a config call may change.
    async fn update_settings(&mut self, id: &str, settings: &Settings, now: i64) -> Result<()>;
    /// Records the Telegram bot the agent's token belongs to (`None`: disconnected). A bot
    /// another live agent has is 409 `wrong_state` (the store's unique index).
    async fn set_telegram_bot(&mut self, id: &str, bot: Option<(i64, &str)>) -> Result<()>;
    /// Marks the instance destroyed and drops its secrets, which nothing needs any more;
    /// 404 when it already was (a destroy that lost a race).
    async fn mark_destroyed(&mut self, id: &str, now: i64) -> Result<()>;
    /// Records that the account's first-ever agent has been provisioned.
    async fn mark_first_agent(&mut self, account_id: &str, now: i64) -> Result<()>;
}

impl_for_connections! {
    impl InstanceTx {
        async fn insert_instance(&mut self, row: &InstanceRow) -> Result<()> {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO instances ({INSTANCE_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)"
            )))
            .bind(&row.id)
            .bind(&row.account_id)
            .bind(&row.runtime)
            .bind(&row.status)
            .bind(&row.status_detail)
            .bind(&row.brief)
            .bind(&row.model_mode)
            .bind(&row.model)
            .bind(&row.provider_api_key)
            .bind(&row.messaging_bot_token)
            .bind(&row.telegram_allowed_chats)
            .bind(&row.telegram_username)
            .bind(row.price_cents_month)
            .bind(row.period_start)
            .bind(row.paid_through)
            .bind(row.period_price_cents)
            .bind(row.created_at)
            .bind(row.updated_at)
            .bind(row.destroyed_at)
            .bind(&row.name)
            .execute(&mut *self)
            .await?;
            Ok(())
        }

        async fn read_instance(&mut self, id: &str) -> Result<Option<InstanceRow>> {
            Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {INSTANCE_COLUMNS} FROM instances WHERE id = $1")))
                .bind(id)
                .fetch_optional(&mut *self)
                .await?)
        }

        async fn settling_deploys(&mut self, account_id: &str) -> Result<i64> {
            Ok(sqlx::query_scalar(
                "SELECT COUNT(*) FROM instances WHERE account_id = $1 AND status = 'provisioning' AND destroyed_at IS NULL",
            )
            .bind(account_id)
            .fetch_one(&mut *self)
            .await?)
        }

        async fn update_status(&mut self, id: &str, status: Status, detail: &str, now: i64) -> Result<()> {
            sqlx::query("UPDATE instances SET status = $2, status_detail = $3, updated_at = $4 WHERE id = $1")
                .bind(id)
                .bind(status.as_str())
                .bind(detail)
                .bind(now)
                .execute(&mut *self)
                .await?;
            Ok(())
        }

        async fn set_period(&mut self, id: &str, start: i64, end: i64, price: i64, now: i64) -> Result<()> {
            sqlx::query(
                "UPDATE instances SET period_start = $2, paid_through = $3, period_price_cents = $4, updated_at = $5 \
                 WHERE id = $1",
            )
            .bind(id)
            .bind(start)
            .bind(end)
            .bind(price)
            .bind(now)
            .execute(&mut *self)
            .await?;
            Ok(())
        }

        async fn update_settings(&mut self, id: &str, settings: &Settings, now: i64) -> Result<()> {
            sqlx::query(
                "UPDATE instances SET brief = $2, model = $3, provider_api_key = $4, messaging_bot_token = $5, \
                 updated_at = $6, telegram_allowed_chats = $7, name = $8 WHERE id = $1",
            )
            .bind(id)
            .bind(&settings.brief)
            .bind(&settings.model)
            .bind(settings.provider_api_key.as_ref().map(Sealed::as_str))
            .bind(settings.messaging_bot_token.as_ref().map(Sealed::as_str))
            .bind(now)
            .bind(&settings.allowed_chats)
            .bind(&settings.name)
            .execute(&mut *self)
            .await?;
            Ok(())
        }

        async fn set_telegram_bot(&mut self, id: &str, bot: Option<(i64, &str)>) -> Result<()> {
            sqlx::query("UPDATE instances SET telegram_bot_id = $2, telegram_username = $3 WHERE id = $1")
                .bind(id)
                .bind(bot.map(|(bot_id, _)| bot_id))
                .bind(bot.map_or("", |(_, username)| username))
                .execute(&mut *self)
                .await
                .map_err(|err| match &err {
                    sqlx::Error::Database(db) if db.is_unique_violation() => roost_proto::ApiError::new(
                        roost_proto::ErrorReason::WrongState,
                        "this Telegram bot is already connected to another agent; MESSAGING_BOT_TOKEN was not applied",
                    )
                    .into(),
                    _ => crate::Error::from(err),
                })?;
            Ok(())
        }

        async fn mark_destroyed(&mut self, id: &str, now: i64) -> Result<()> {
            let done = sqlx::query(
                "UPDATE instances SET status = 'destroyed', status_detail = '', destroyed_at = $2, updated_at = $2, \
                 provider_api_key = NULL, messaging_bot_token = NULL, telegram_bot_id = NULL WHERE id = $1 AND destroyed_at IS NULL",
            )
            .bind(id)
            .bind(now)
            .execute(&mut *self)
            .await?;
            if done.rows_affected() == 0 {
                return Err(no_such_instance(id).into());
            }
            Ok(())
        }

        async fn mark_first_agent(&mut self, account_id: &str, now: i64) -> Result<()> {
            sqlx::query("UPDATE accounts SET first_agent_at = $2 WHERE id = $1 AND first_agent_at IS NULL")
                .bind(account_id)
                .bind(now)
                .execute(&mut *self)
                .await?;
            Ok(())
        }
    }
}

/// 404 for an instance the caller cannot see. It lives here, below the live agent, because
/// the store's own writes (`mark_destroyed`) answer it as well as the live agents' calls.
pub fn no_such_instance(id: &str) -> ApiError {
    ApiError::not_found(format!("no instance {id}"))
}
