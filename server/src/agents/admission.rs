//! Turn admission: whether a turn may start, given which turns are metered, at what price,
//! and the account's credits (docs/architecture.md#money: managed model calls are
//! metered). The price comes from [`crate::billing::prices`]; what a turn's calls add up
//! to is [`crate::callers::turn_meter`]'s.
//!
//! - The `assistant` and `process` runtimes call their models through the model gateway
//!   ([`crate::llm`]), which admits, prices and charges each call (one ledger row per call);
//!   their turns are not metered themselves, and a turn's usage and charge are its calls'
//!   sum. A managed turn on a priced model is refused (402) up front at a spent balance.
//!   The assistant names its model before it runs, so a managed assistant on a model the
//!   price book does not price is refused then too (400 `unpriced_model`, naming it), at
//!   config time and before a turn; a name that only starts like one of roost's own
//!   runtimes (`echo-gpt-4o`) prices nothing.
//! - `echo`, with an included model and no model call at all, is metered per turn when the
//!   book prices its model above zero: admitted through the account's credit holds
//!   ([`crate::billing::holds`]) before it runs, charged after.
//! - byok turns are never metered: the agent's own key pays.

use roost_proto::{ApiError, ErrorReason};

use super::{Hosting, live::Agent};
use crate::{
    Result,
    billing::{
        holds::{MeteredCall, estimate_nanocents},
        prices::ModelPrice,
    },
    callers::ModelMode,
    runtimes::{DriverSpec, Machine, RuntimeSpec, TurnInput, TurnOutput},
    time::now_ms,
};

/// How long a hold outlives the turn cap before it stops counting on its own.
const HOLD_SLACK_MS: i64 = 60_000;

impl Hosting {
    /// The price turns of `runtime` in `mode` on `model` are metered at; `None` when they
    /// are not metered (the model gateway meters their calls instead, or nothing is paid). 400
    /// `unpriced_model` for a managed assistant on a model the price book does not price.
    pub(super) fn metered_price(
        &self,
        runtime: &RuntimeSpec,
        mode: ModelMode,
        model: &str,
    ) -> Result<Option<ModelPrice>> {
        if mode != ModelMode::Managed || !runtime.included_model {
            return Ok(None);
        }
        let price = self.config.prices.metered_price(model);
        if matches!(runtime.driver, DriverSpec::Assistant) && price.is_none() {
            return Err(ApiError::new(
                ErrorReason::UnpricedModel,
                format!(
                    "model {model:?} has no price in this roost's price book, so the included (metered) model cannot \
                     run it; choose a priced model (such as {}) or ask the operator to price it",
                    runtime.default_model
                ),
            )
            .into());
        }
        if runtime.driver.calls_models() {
            return Ok(None);
        }
        Ok(price.filter(|p| p.is_paid()))
    }

    /// Whether a turn's model calls will be metered by the model gateway: a managed
    /// runtime calling models, on a model the book prices above zero. Such a turn needs
    /// credits to start.
    pub(super) fn calls_metered(&self, runtime: &RuntimeSpec, mode: ModelMode, model: &str) -> bool {
        mode == ModelMode::Managed
            && runtime.driver.calls_models()
            && self.config.prices.metered_price(model).is_some_and(ModelPrice::is_paid)
    }

    /// Admits a metered turn: holds the most it may cost against the account's credits,
    /// or 402 `insufficient_credits` when the balance less the holds of its calls in flight
    /// is not above zero.
    pub(super) async fn admit_turn(
        &self,
        agent: &Agent,
        machine: &dyn Machine,
        price: ModelPrice,
        input: &TurnInput,
    ) -> Result<()> {
        let bounds = machine.bounds(input).await;
        let timeout_ms = i64::try_from(self.config.turn_timeout.as_millis()).unwrap_or(i64::MAX);
        self.store
            .admit_metered_call(&MeteredCall {
                account_id: &agent.account_id,
                instance_id: &agent.id,
                turn_id: &input.turn_id,
                estimate_nanocents: estimate_nanocents(price, bounds.prompt_bytes, bounds.max_output_tokens),
                expires_at: now_ms().saturating_add(timeout_ms).saturating_add(HOLD_SLACK_MS),
            })
            .await
    }

    /// What a metered turn's answer costs (nanocents): at the price of the model that
    /// answered when the book prices it, else at the price it was admitted at.
    pub(super) fn turn_cost(&self, admitted: ModelPrice, out: &TurnOutput) -> i64 {
        let price = self.config.prices.metered_price(&out.model).unwrap_or(admitted);
        price.cost(out.input_tokens, out.output_tokens, 0, 0)
    }
}
