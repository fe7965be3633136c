//! Which turns are metered, at what price, and their admission against the account's
//! credits (DESIGN.md "Billing": managed-model turns are metered).
//!
//! - A managed turn of the `assistant` runtime calls the operator's model upstream, so it
//!   is always metered, at the price book's price for the model (`PriceBook::metered_price`:
//!   its entry or family, else the operator's `[default]`). A model the book does not price
//!   is refused before the upstream is called: 400 `unpriced_model`, naming it. A name that
//!   only starts like one of roost's own runtimes (`echo-gpt-4o`) prices nothing.
//! - A `process` runtime's turns are not metered themselves: its model calls go through
//!   the model gateway ([`crate::llm`]), which meters each one, and the turn reports their
//!   sum. A managed turn on a priced model is refused (402) up front at a spent balance.
//! - `echo`, with an included model and no model call of roost's, is metered when the book
//!   prices its model above zero.
//! - byok turns are never metered: the agent's own key pays.
//!
//! A metered turn is admitted through the account's credit holds ([`crate::billing::holds`])
//! before it runs, and charged after at the price of the model the runtime *reports* (the
//! upstream's `model`), or the admitted one when that is not priced.

use roost_proto::{ApiError, ErrorReason};

use super::{Hosting, live::Agent};
use crate::{
    Result,
    billing::{
        holds::{MeteredCall, estimate_cents},
        metering::ModelPrice,
    },
    runtimes::{DriverSpec, Machine, ModelMode, RuntimeSpec, TurnInput, TurnOutput},
    time::now_ms,
};

/// How long a hold outlives the turn cap before it stops counting on its own.
const HOLD_SLACK_MS: i64 = 60_000;

impl Hosting {
    /// The price turns of `runtime` in `mode` on `model` are metered at; `None` when they
    /// are not metered. 400 `unpriced_model` for a managed assistant turn on a model the
    /// price book does not price.
    pub(super) fn metered_price(
        &self,
        runtime: &RuntimeSpec,
        mode: ModelMode,
        model: &str,
    ) -> Result<Option<ModelPrice>> {
        if mode != ModelMode::Managed || !runtime.included_model || matches!(runtime.driver, DriverSpec::Process { .. })
        {
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
        Ok(price.filter(|p| p.is_paid()))
    }

    /// Whether a turn's model calls will be metered by the model gateway: a managed process
    /// runtime on a model the book prices above zero. Such a turn needs credits to start.
    pub(super) fn calls_metered(&self, runtime: &RuntimeSpec, mode: ModelMode, model: &str) -> bool {
        mode == ModelMode::Managed
            && matches!(runtime.driver, DriverSpec::Process { .. })
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
                estimate_cents: estimate_cents(price, bounds.prompt_bytes, bounds.max_output_tokens),
                expires_at: now_ms().saturating_add(timeout_ms).saturating_add(HOLD_SLACK_MS),
            })
            .await
    }

    /// What a metered turn's answer costs (nanocents): at the price of the model that
    /// answered when the book prices it, else at the price it was admitted at. Only the
    /// assistant's report comes from roost's own upstream call; a process runtime's
    /// report is its own claim, so it may raise its cost but never lower it.
    pub(super) fn turn_cost(&self, runtime: &RuntimeSpec, admitted: ModelPrice, out: &TurnOutput) -> i64 {
        let at = |price: ModelPrice| price.cost(out.input_tokens, out.output_tokens, 0, 0);
        let reported = self.config.prices.metered_price(&out.model).map(at);
        match (&runtime.driver, reported) {
            (DriverSpec::Assistant, Some(cost)) => cost,
            (_, reported) => reported.unwrap_or(0).max(at(admitted)),
        }
    }
}
