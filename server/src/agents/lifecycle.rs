//! Provision, configure, pause, resume, destroy, renew, and the boots and crashes between.
//!
//! | from | call | result |
//! | --- | --- | --- |
//! | — | provision | provisioning → running (or failed) |
//! | running | config | restarting → running |
//! | paused | config | stays paused; applied at resume |
//! | running | pause | paused |
//! | paused, failed | resume | provisioning → running |
//! | suspended | resume | 402 unless the renewal can now be paid, then as above |
//! | any | destroy | gone; refund |
//! | other | lifecycle call | 409 wrong_state |
//!
//! "Settling" is an account's agent in `provisioning`: while one boots, another provision
//! or resume of the account gets 409 `deploy_settling`. The check and the new agent's row
//! are one transaction under the account's lock, so concurrent provisions cannot both pass.

use std::sync::Arc;

use roost_proto::{
    ApiError, ErrorReason,
    numbers::usd_exact,
    v1::{
        ConfigureRequest, ConfigureResponse, DestroyRequest, DestroyResponse, InstanceStatus, PauseRequest,
        PauseResponse, ProvisionRequest, ProvisionResponse, ResumeRequest, ResumeResponse,
    },
};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{
    Hosting,
    in_flight::InFlightTx,
    instances::{InstanceRow, InstanceTx, Settings, Status, no_such_instance},
    limits,
    live::Agent,
    routing::Route,
};
use crate::{
    Error, Result,
    billing::{
        ChargeKind, LedgerEntry, LockedAccount, MoneyTx,
        money::{cents_to_nanocents, nanocents_to_cents},
        pro_rata_refund,
    },
    ids::new_id,
    runtimes::{DriverSpec, Machine, RuntimeSpec},
    secrets::{SecretKey, Slot},
    store::{BeginWrite, FenceTx, impl_for_connections, on_writer},
    time::now_ms,
};

/// How long destroy waits for the turn it cancelled to be recorded before it drops the
/// agent's lease (a record under a dropped lease would be fenced out and lost).
const TURN_RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn wrong_state(message: String) -> ApiError {
    ApiError::new(ErrorReason::WrongState, message)
}

fn settling() -> ApiError {
    ApiError::new(
        ErrorReason::DeploySettling,
        "another agent of this account is still booting; try again when it is up",
    )
}

/// 400 for a runtime the catalogue does not offer; for a packaged one that could be
/// installed, how.
fn unknown_runtime(id: &str) -> ApiError {
    let installable = crate::runtimes::packaged::Package::ALL.into_iter().any(|p| p.name() == id);
    ApiError::invalid_argument(if installable {
        format!(
            "runtime {id:?} is not installed on this server: the operator installs it with `roost runtimes install \
             {id}`, and it is offered at once, without a restart (see GET /api/runtimes)"
        )
    } else {
        format!("unknown runtime {id:?} (see GET /api/runtimes)")
    })
}

/// 402: `needed` and `balance` are nanocents.
fn short_of(needed: i64, balance: i64) -> ApiError {
    ApiError::new(
        ErrorReason::InsufficientCredits,
        format!(
            "this needs {} of credit and the balance is {}; top up and try again",
            usd_exact(needed),
            usd_exact(balance)
        ),
    )
}

/// The locks lifecycle transactions start with (call on `&mut *tx`).
trait LifecycleTx {
    /// Locks the caller's account; 401 if it no longer exists (its key outlived it).
    async fn lock_caller(&mut self, account_id: &str, now: i64) -> Result<LockedAccount>;
    /// [`LifecycleTx::lock_caller`], then 409 `deploy_settling` if another agent of the
    /// account is booting.
    async fn lock_for_deploy(&mut self, account_id: &str, now: i64) -> Result<LockedAccount>;
}

impl_for_connections! {
    impl LifecycleTx {
        async fn lock_caller(&mut self, account_id: &str, now: i64) -> Result<LockedAccount> {
            let account = self.lock_account(account_id, now).await?;
            Ok(account.ok_or_else(|| ApiError::unauthenticated("the key's account no longer exists"))?)
        }

        async fn lock_for_deploy(&mut self, account_id: &str, now: i64) -> Result<LockedAccount> {
            let account = self.lock_caller(account_id, now).await?;
            if self.settling_deploys(account_id).await? > 0 {
                return Err(settling().into());
            }
            Ok(account)
        }
    }
}

/// What a renewal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Not due (any more).
    NotDue,
    /// A further period was paid.
    Renewed,
    /// The account could not pay: the agent is suspended.
    Suspended,
}

impl Hosting {
    /// Creates an agent and starts its boot.
    pub async fn provision(self: &Arc<Self>, account_id: &str, req: ProvisionRequest) -> Result<ProvisionResponse> {
        let runtime_id = req.runtime.trim();
        if runtime_id.is_empty() {
            return Err(ApiError::invalid_argument("runtime is required (see GET /api/runtimes)").into());
        }
        let runtime = self.catalogue().get(runtime_id).cloned().ok_or_else(|| unknown_runtime(runtime_id))?;
        limits::brief("brief", &req.brief)?;
        limits::name(&req.name)?;
        let mode = limits::model_mode(req.model_mode)?;

        let now = now_ms();
        let mut row = InstanceRow {
            id: new_id("ins"),
            account_id: account_id.to_owned(),
            runtime: runtime.id.clone(),
            status: Status::Provisioning.as_str().to_owned(),
            status_detail: String::new(),
            brief: req.brief,
            model_mode: mode.as_str().to_owned(),
            model: String::new(),
            provider_api_key: None,
            messaging_bot_token: None,
            telegram_allowed_chats: String::new(),
            telegram_username: String::new(),
            price_cents_month: runtime.price_cents_month,
            period_start: now,
            paid_through: now + self.config.billing.period_ms(),
            period_price_cents: 0,
            created_at: now,
            updated_at: now,
            destroyed_at: None,
            name: req.name.trim().to_owned(),
        };
        let (charged, balance) = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            let account = tx.lock_for_deploy(account_id, now).await?;
            // The free first period is the account's first *priced* agent's: an agent of a
            // free runtime (echo) costs nothing and leaves it for the next one.
            let priced = row.price_cents_month > 0;
            let first = priced && account.first_agent_at.is_none();
            let charge = if first { 0 } else { row.price_cents_month };
            let amount = cents_to_nanocents(charge)?;
            let balance = if amount > 0 {
                tx.debit(account_id, amount).await?.ok_or_else(|| short_of(amount, account.balance_nanocents))?
            } else {
                account.balance_nanocents
            };
            row.period_price_cents = charge;
            tx.insert_instance(&row).await?;
            // The agent runs where it was provisioned.
            tx.insert_agent_lease(&row.id, &self.replica.id, self.replica.ttl_ms()).await?;
            // The row names the agent (`instance_id`), which every reader shows beside the
            // description: the description names it only by the name people gave it.
            let named = if row.name.is_empty() { String::new() } else { format!(" “{}”", row.name) };
            let what = if first {
                tx.mark_first_agent(account_id, now).await?;
                format!("first period of {}{named} free: the account's first priced agent", runtime.id)
            } else if priced {
                format!("first period of {}{named}", runtime.id)
            } else {
                format!("{}{named} is free: nothing to pay", runtime.id)
            };
            let entry = LedgerEntry::new(account_id, Some(&row.id), ChargeKind::Provision, -amount, balance, what, now)
                .for_period(now);
            tx.insert_ledger(&entry).await?;
            tx.commit().await?;
            (amount, balance)
        });

        let agent = Arc::new(Agent::new(&row, runtime, Status::Provisioning, self.config.queue_depth, 1));
        self.registry.insert(agent.clone());
        let (generation, _) = agent.begin_generation(Status::Provisioning);
        self.boot(agent, generation, None);
        info!(instance = %row.id, account = account_id, runtime = %row.runtime, charged, "agent provisioned");
        Ok(ProvisionResponse {
            instance: Some(row.to_proto()),
            charged_cents: nanocents_to_cents(charged),
            balance_cents: nanocents_to_cents(balance),
            charged_nanocents: charged,
            balance_nanocents: balance,
        })
    }

    /// Boots the agent's machine for `generation` in the background (after stopping the
    /// machine of the generation before, if any), then records running or failed.
    pub(super) fn boot(
        self: &Arc<Self>,
        agent: Arc<Agent>,
        generation: CancellationToken,
        previous: Option<Arc<dyn Machine>>,
    ) {
        let this = self.clone();
        tokio::spawn(async move {
            if let Some(previous) = previous {
                previous.stop().await;
            }
            // A boot is not interrupted half-way (a child process could be left behind);
            // a cancelled generation's machine is stopped as soon as it is up.
            let started = match agent.machine_spec(&this.secret_key) {
                Ok(spec) => this.drivers.start(spec).await,
                Err(why) => Err(why),
            };
            let _lifecycle = agent.lifecycle.lock().await;
            if generation.is_cancelled() {
                if let Ok(machine) = started {
                    machine.stop().await;
                }
                return;
            }
            match started {
                Ok(machine) => {
                    // Store first: once a client can see the new state (reads show the
                    // live one), the store's settling check must already agree.
                    this.persist_status(&agent, Status::Running, "").await;
                    {
                        let mut live = agent.state();
                        live.status = Status::Running;
                        live.detail.clear();
                        live.machine = Some(machine.clone());
                    }
                    this.start_channel(&agent, &generation);
                    this.watch_for_death(agent.clone(), machine, generation);
                    info!(instance = %agent.id, "agent running");
                }
                Err(why) => {
                    this.persist_status(&agent, Status::Failed, &why).await;
                    agent.end_generation(Status::Failed, &why);
                    warn!(instance = %agent.id, reason = %why, "agent failed to boot");
                }
            }
        });
    }

    /// Marks the agent failed if its machine dies while this generation is current.
    fn watch_for_death(self: &Arc<Self>, agent: Arc<Agent>, machine: Arc<dyn Machine>, generation: CancellationToken) {
        let this = self.clone();
        tokio::spawn(async move {
            let why = tokio::select! {
                biased;
                () = generation.cancelled() => return,
                why = machine.died() => why,
            };
            let _lifecycle = agent.lifecycle.lock().await;
            if generation.is_cancelled() {
                return;
            }
            this.persist_status(&agent, Status::Failed, &why).await;
            agent.end_generation(Status::Failed, &why);
            warn!(instance = %agent.id, reason = %why, "agent runtime died");
        });
    }

    /// Status changes made by background tasks, fenced by the agent's lease; a store
    /// failure there is logged, and the next start reconciles (it boots whatever was meant
    /// to run).
    pub(super) async fn persist_status(&self, agent: &Agent, status: Status, detail: &str) {
        if let Err(err) = self.set_status_fenced(agent, status, detail).await {
            warn!(instance = %agent.id, error = %err, "could not record the agent's status");
        }
    }

    /// Writes the agent's status if this replica still holds its lease at the agent's
    /// epoch; 503 when it does not.
    async fn set_status_fenced(&self, agent: &Agent, status: Status, detail: &str) -> Result<()> {
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            self.fence(&mut *tx, agent).await?;
            tx.update_status(&agent.id, status, detail, now_ms()).await?;
            tx.commit().await?;
        });
        Ok(())
    }

    /// 503 unless this replica still holds `agent`'s lease at its epoch; share-locks the
    /// lease until `tx` ends, so no takeover commits in between (see `crate::store::FenceTx`).
    /// Call it first in a transaction: leases are locked before accounts everywhere.
    pub(super) async fn fence<C: FenceTx>(&self, tx: &mut C, agent: &Agent) -> Result<()> {
        if tx.holds_lease(&agent.id, &self.replica.id, agent.epoch).await? {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorReason::Unavailable,
            format!("agent {} moved to another replica; nothing was changed; retry", agent.id),
        )
        .into())
    }

    /// Applies config: a running agent restarts, a paused one keeps it for its resume.
    pub async fn configure(self: &Arc<Self>, account_id: &str, req: ConfigureRequest) -> Result<ConfigureResponse> {
        let id = limits::instance_id(&req.instance_id)?;
        limits::config(&req)?;
        let agent = match self.route(id, account_id).await? {
            Route::Local(agent) => agent,
            Route::Remote(client) => {
                let id = id.to_owned();
                return self
                    .forward(client, &id, (account_id, ""), req, |mut c, r| async move { c.configure(r).await })
                    .await;
            }
        };
        // A managed assistant cannot be pointed at a model roost would run unmetered.
        if let Some(model) = req.model.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            let mode = agent.state().settings.model_mode;
            self.metered_price(&agent.runtime, mode, model)?;
        }
        if req.messaging_bot_token.as_deref().is_some_and(|t| !t.is_empty()) && agent.runtime.channels.is_empty() {
            return Err(ApiError::invalid_argument(format!(
                "runtime {} has no messaging channel for MESSAGING_BOT_TOKEN",
                agent.runtime.id
            ))
            .into());
        }
        // A token is checked with Telegram before anything changes (outside the lifecycle
        // lock: it is a network call); an empty one disconnects the bot.
        let bot = match req.messaging_bot_token.as_deref() {
            Some("") => Some(None),
            Some(token) => Some(Some(self.check_bot_token(token).await?)),
            None => None,
        };
        let _lifecycle = agent.lock_lifecycle().await?;
        let status = agent.status();
        if !matches!(status, Status::Running | Status::Paused) {
            return Err(
                wrong_state(format!("config needs the agent running or paused; it is {}", status.as_str())).into()
            );
        }
        let (settings, applied) = apply_config(agent.state().settings.clone(), &req, &self.secret_key, &agent.id);
        // A new name is for people, not the runtime: it alone restarts nothing.
        let next = match status {
            _ if applied == ["name"] => status,
            Status::Running => Status::Restarting,
            _ => Status::Paused,
        };
        on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            self.fence(&mut *tx, &agent).await?;
            if let Some(bot) = &bot {
                tx.set_telegram_bot(&agent.id, bot.as_ref().map(|b| (b.id, b.username.as_str()))).await?;
            }
            tx.update_settings(&agent.id, &settings, now_ms()).await?;
            tx.update_status(&agent.id, next, "", now_ms()).await?;
            tx.commit().await?;
        });
        agent.state().settings = settings;
        if next == Status::Restarting {
            let (generation, previous) = agent.begin_generation(Status::Restarting);
            self.boot(agent.clone(), generation, previous);
        }
        Ok(ConfigureResponse { ok: true, id: agent.id.clone(), status: next.to_proto() as i32, applied })
    }

    /// The bot a `MESSAGING_BOT_TOKEN` belongs to, asked of Telegram (`getMe`): a token
    /// Telegram refuses is 400 naming the field; Telegram out of reach is 503. Neither
    /// message carries the token.
    async fn check_bot_token(&self, token: &str) -> Result<crate::telegram::BotUser> {
        use crate::telegram::TelegramError;
        // Telegram's tokens are `<bot id>:<secret>` in URL-safe characters; anything else
        // cannot be one, and would not even make a well-formed Bot API URL.
        let shaped = token.split_once(':').is_some_and(|(id, secret)| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_digit())
                && !secret.is_empty()
                && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
        if !shaped {
            return Err(ApiError::invalid_argument(
                "MESSAGING_BOT_TOKEN is not a Telegram bot token (<bot id>:<secret>, as @BotFather gives it); \
                 nothing was changed",
            )
            .into());
        }
        match self.telegram.get_me(token).await {
            Ok(bot) => Ok(bot),
            Err(err @ TelegramError::Api { code: 400..=499, .. }) => Err(ApiError::invalid_argument(format!(
                "MESSAGING_BOT_TOKEN was refused by Telegram ({err}); nothing was changed"
            ))
            .into()),
            Err(err) => Err(ApiError::new(
                roost_proto::ErrorReason::Unavailable,
                format!("MESSAGING_BOT_TOKEN could not be checked: {err}; nothing was changed"),
            )
            .into()),
        }
    }

    /// Stops a running agent.
    pub async fn pause(self: &Arc<Self>, account_id: &str, id: &str) -> Result<PauseResponse> {
        let id = limits::instance_id(id)?;
        let agent = match self.route(id, account_id).await? {
            Route::Local(agent) => agent,
            Route::Remote(client) => {
                let req = PauseRequest { instance_id: id.to_owned() };
                return self
                    .forward(client, id, (account_id, ""), req, |mut c, r| async move { c.pause(r).await })
                    .await;
            }
        };
        let _lifecycle = agent.lock_lifecycle().await?;
        let status = agent.status();
        if status != Status::Running {
            return Err(wrong_state(format!("only a running agent can be paused; it is {}", status.as_str())).into());
        }
        self.set_status_fenced(&agent, Status::Paused, "").await?;
        if let Some(machine) = agent.end_generation(Status::Paused, "") {
            machine.stop().await;
        }
        Ok(PauseResponse { ok: true, id: agent.id.clone(), status: InstanceStatus::Paused as i32 })
    }

    /// Boots a paused or failed agent again; a suspended one pays its renewal first.
    pub async fn resume(self: &Arc<Self>, account_id: &str, id: &str) -> Result<ResumeResponse> {
        let id = limits::instance_id(id)?;
        let agent = match self.route(id, account_id).await? {
            Route::Local(agent) => agent,
            Route::Remote(client) => {
                let req = ResumeRequest { instance_id: id.to_owned() };
                return self
                    .forward(client, id, (account_id, ""), req, |mut c, r| async move { c.resume(r).await })
                    .await;
            }
        };
        let _lifecycle = agent.lock_lifecycle().await?;
        let status = agent.status();
        if !matches!(status, Status::Paused | Status::Failed | Status::Suspended) {
            return Err(wrong_state(format!(
                "only a paused, failed or suspended agent can be resumed; it is {}",
                status.as_str()
            ))
            .into());
        }
        if agent.retired {
            return Err(wrong_state(format!(
                "runtime {} is no longer offered; destroy the agent (unused time is refunded)",
                agent.runtime.id
            ))
            .into());
        }
        let now = now_ms();
        let period = self.config.billing.period_ms();
        let (charged, balance) = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            self.fence(&mut *tx, &agent).await?;
            let account = tx.lock_for_deploy(account_id, now).await?;
            let mut charged = 0;
            let mut balance = account.balance_nanocents;
            if status == Status::Suspended {
                let price = agent.runtime.price_cents_month;
                let amount = cents_to_nanocents(price)?;
                if amount > 0 {
                    balance = tx
                        .debit(account_id, amount)
                        .await?
                        .ok_or_else(|| short_of(amount, account.balance_nanocents))?;
                    let entry = LedgerEntry::new(
                        account_id,
                        Some(&agent.id),
                        ChargeKind::Renewal,
                        -amount,
                        balance,
                        "renewal paid on resume",
                        now,
                    )
                    .for_period(now);
                    tx.insert_ledger(&entry).await?;
                }
                tx.set_period(&agent.id, now, now + period, price, now).await?;
                charged = amount;
            }
            tx.update_status(&agent.id, Status::Provisioning, "", now).await?;
            tx.commit().await?;
            (charged, balance)
        });
        let (generation, previous) = agent.begin_generation(Status::Provisioning);
        self.boot(agent.clone(), generation, previous);
        Ok(ResumeResponse {
            ok: true,
            id: agent.id.clone(),
            status: InstanceStatus::Provisioning as i32,
            charged_cents: nanocents_to_cents(charged),
            balance_cents: nanocents_to_cents(balance),
            charged_nanocents: charged,
            balance_nanocents: balance,
        })
    }

    /// Removes an agent for good, refunding the unused part of its paid period.
    ///
    /// Racing destroys of one agent: the first wins; the others, queued on its lifecycle
    /// lock, find it gone and get 404. The store checks too (the row must still be live
    /// under the account's lock, and the ledger takes one refund per instance), so even
    /// destroys from two processes sharing a PostgreSQL refund once.
    pub async fn destroy(self: &Arc<Self>, account_id: &str, id: &str) -> Result<DestroyResponse> {
        let id = limits::instance_id(id)?;
        let agent = match self.route(id, account_id).await? {
            Route::Local(agent) => agent,
            Route::Remote(client) => {
                let req = DestroyRequest { instance_id: id.to_owned() };
                return self
                    .forward(client, id, (account_id, ""), req, |mut c, r| async move { c.destroy(r).await })
                    .await;
            }
        };
        let _lifecycle = agent.lock_lifecycle().await?;
        let now = now_ms();
        let (refund, balance) = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            self.fence(&mut *tx, &agent).await?;
            let account = tx.lock_caller(account_id, now).await?;
            let row = tx
                .read_instance(&agent.id)
                .await?
                .filter(|row| row.destroyed_at.is_none())
                .ok_or_else(|| no_such_instance(&agent.id))?;
            let paid = cents_to_nanocents(row.period_price_cents)?;
            let refund = pro_rata_refund(paid, row.period_start, row.paid_through, now);
            let mut balance = account.balance_nanocents;
            // The refund row is written even when it is 0, so activity shows the outcome.
            let what = if refund > 0 {
                balance = tx.adjust(account_id, refund).await?;
                let days = (row.paid_through - now) as f64 / 86_400_000.0;
                format!("refund of the unused {days:.1} days of {}", row.runtime)
            } else if row.period_price_cents == 0 {
                "nothing to refund: the period was free".to_owned()
            } else {
                "nothing to refund: the paid period is over".to_owned()
            };
            tx.insert_ledger(&LedgerEntry::new(
                account_id,
                Some(&row.id),
                ChargeKind::Refund,
                refund,
                balance,
                what,
                now,
            ))
            .await?;
            tx.mark_destroyed(&row.id, now).await?;
            tx.commit().await?;
            (refund, balance)
        });
        // A turn in flight ends `cancelled` (409 `wrong_state` to its caller, as pause and
        // config end theirs), and is recorded under the lease it ran with: the lease goes
        // only once the turn's job has let go of the agent's turn lock.
        if let Some(machine) = agent.end_generation(Status::Destroyed, "") {
            machine.stop().await;
        }
        if tokio::time::timeout(TURN_RECORD_WAIT, agent.turns.clone().lock_owned()).await.is_err() {
            warn!(instance = %agent.id, "a turn of a destroyed agent was still being recorded; its lease goes anyway");
        }
        // Its workspace goes with it (its process has stopped).
        let workspaces = self.drivers.process.workspaces().clone();
        let gone = agent.id.clone();
        match tokio::task::spawn_blocking(move || workspaces.remove(&gone)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                warn!(instance = %agent.id, error = %err, "a destroyed agent's workspace could not be deleted")
            }
            Err(err) => warn!(instance = %agent.id, error = %err, "deleting a destroyed agent's workspace failed"),
        }
        let released = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            tx.delete_agent_lease(&agent.id).await?;
            tx.forget_in_flight(&agent.id).await?;
            tx.commit().await
        });
        if let Err(err) = released {
            // Harmless: no replica claims the lease of a destroyed agent.
            warn!(instance = %agent.id, error = %err, "could not drop a destroyed agent's lease");
        }
        self.registry.remove(&agent.id);
        info!(instance = %agent.id, refund, "agent destroyed");
        Ok(DestroyResponse {
            ok: true,
            id: agent.id.clone(),
            status: InstanceStatus::Destroyed as i32,
            refunded_cents: nanocents_to_cents(refund),
            balance_cents: nanocents_to_cents(balance),
            refunded_nanocents: refund,
            balance_nanocents: balance,
        })
    }

    /// Renews an agent whose paid period has ended, or suspends it when its account
    /// cannot pay. The renewal worker calls this for every agent due.
    pub async fn renew(self: &Arc<Self>, id: &str) -> Result<Renewal> {
        let Some(agent) = self.registry.get(id) else { return Ok(Renewal::NotDue) };
        if agent.retired {
            return Ok(Renewal::NotDue);
        }
        let _lifecycle = agent.lifecycle.lock().await;
        let now = now_ms();
        let period = self.config.billing.period_ms();
        let renewal = on_writer!(self.store, |pool| {
            let mut tx = pool.begin_write().await?;
            self.fence(&mut *tx, &agent).await?;
            let Some(account) = tx.lock_account(&agent.account_id, now).await? else { return Ok(Renewal::NotDue) };
            let row = tx.read_instance(&agent.id).await?;
            let due =
                row.filter(|r| r.destroyed_at.is_none() && r.status() != Status::Suspended && r.paid_through <= now);
            let Some(row) = due else { return Ok(Renewal::NotDue) };
            let price = row.price_cents_month;
            let amount = cents_to_nanocents(price)?;
            let paid =
                if amount == 0 { Some(account.balance_nanocents) } else { tx.debit(&row.account_id, amount).await? };
            let renewal = match paid {
                Some(balance) => {
                    tx.set_period(&row.id, row.paid_through, row.paid_through + period, price, now).await?;
                    if price > 0 {
                        let entry = LedgerEntry::new(
                            &row.account_id,
                            Some(&row.id),
                            ChargeKind::Renewal,
                            -amount,
                            balance,
                            format!("renewal of {}", row.runtime),
                            now,
                        )
                        .for_period(row.paid_through);
                        tx.insert_ledger(&entry).await?;
                    }
                    Renewal::Renewed
                }
                None => {
                    let why = format!(
                        "renewal of {} could not be paid (balance {}); top up and resume",
                        usd_exact(amount),
                        usd_exact(account.balance_nanocents)
                    );
                    tx.update_status(&row.id, Status::Suspended, &why, now).await?;
                    Renewal::Suspended
                }
            };
            tx.commit().await?;
            Ok::<_, Error>(renewal)
        })?;
        if renewal == Renewal::Suspended {
            let why = self.store.instance(&agent.id).await?.map(|r| r.status_detail).unwrap_or_default();
            if let Some(machine) = agent.end_generation(Status::Suspended, &why) {
                machine.stop().await;
            }
            warn!(instance = %agent.id, "agent suspended: renewal unpaid");
        }
        Ok(renewal)
    }
}

/// New settings from a config request (its secrets sealed for agent `id`), and the REST
/// names of what changed.
fn apply_config(mut settings: Settings, req: &ConfigureRequest, key: &SecretKey, id: &str) -> (Settings, Vec<String>) {
    let mut applied = Vec::new();
    if let Some(brief) = &req.agent_brief {
        settings.brief = brief.clone();
        applied.push("agent_brief".to_owned());
    }
    if let Some(plain) = &req.provider_api_key {
        settings.provider_api_key =
            Some(plain).filter(|k| !k.is_empty()).map(|k| key.seal(k, Slot::provider_api_key(id)));
        applied.push("PROVIDER_API_KEY".to_owned());
    }
    if let Some(token) = &req.messaging_bot_token {
        settings.messaging_bot_token =
            Some(token).filter(|t| !t.is_empty()).map(|t| key.seal(t, Slot::messaging_bot_token(id)));
        applied.push("MESSAGING_BOT_TOKEN".to_owned());
    }
    if let Some(model) = &req.model {
        settings.model = model.trim().to_owned();
        applied.push("model".to_owned());
    }
    if let Some(name) = &req.name {
        settings.name = name.trim().to_owned();
        applied.push("name".to_owned());
    }
    if let Some(chats) = &req.messaging_allowed_chat_ids {
        // Checked by `limits::config` before anything changed.
        let ids = super::instances::allowed_chats(chats).unwrap_or_default();
        settings.allowed_chats = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        applied.push("MESSAGING_ALLOWED_CHAT_IDS".to_owned());
    }
    (settings, applied)
}

/// A stand-in catalogue entry for an agent whose runtime was removed from the catalogue.
pub(super) fn retired_runtime(row: &InstanceRow) -> RuntimeSpec {
    RuntimeSpec {
        id: row.runtime.clone(),
        description: "no longer in the catalogue".to_owned(),
        price_cents_month: row.price_cents_month,
        channels: Vec::new(),
        included_model: false,
        default_model: String::new(),
        driver: DriverSpec::Echo,
        max_calls_per_turn: None,
        max_turn_spend_cents: None,
        limits: crate::sandbox::Limits::default(),
        boot_timeout: None,
    }
}
