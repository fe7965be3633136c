//! Which turn an agent's model calls belong to, and what they add up to.
//!
//! While a turn runs, its agent's [`TurnSlot`] holds the turn's [`TurnMeter`]: every model
//! call the runtime makes through the model gateway meanwhile is the turn's (its span goes under
//! the turn's trace, its tokens and charge into the turn's totals). Calls made between
//! turns (heartbeats, background jobs) find the slot empty and stand alone.
//!
//! A call's usage and cost join the turn's totals the moment its answer is complete, before
//! the runtime has it ([`TurnCall::count`]), so the runtime's next call is judged on them.
//! Its charge is written just after (by the batching writer), so the turn waits for its
//! calls to settle ([`TurnMeter::settled`]) before it reads the totals: a turn's figures
//! are the sum of its calls.
//!
//! A turn has limits ([`TurnLimits`]): a runtime stuck in a loop (one fed the same tool
//! request made ~1,200 model calls in five minutes) is stopped at a number of calls or an
//! amount spent. Past either the model gateway refuses the turn's calls (429 `turn_limit`) and
//! the turn ends as failed, saying which limit it hit ([`TurnMeter::tripped`]). Spend is
//! what the turn's answered calls cost (byok included: a loop burns the agent's own key
//! too), so only calls made in parallel, already in flight when it is reached, may pass it.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::sync::Notify;

use crate::turn_stream::{ToolSteps, TurnStream, tool_results};

/// An agent's current turn, if any; shared by the agent and its gateway identity.
#[derive(Clone, Default)]
pub struct TurnSlot(Arc<Mutex<Option<Arc<TurnMeter>>>>);

impl TurnSlot {
    /// Starts metering turn `turn_id` within `limits`: calls from now on are its, and the
    /// tool steps they reveal go to `events`.
    pub fn begin(&self, turn_id: &str, limits: TurnLimits, events: TurnStream) -> Arc<TurnMeter> {
        let mut meter = TurnMeter::new(turn_id, limits);
        meter.events = events;
        let meter = Arc::new(meter);
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(meter.clone());
        meter
    }

    /// Ends the turn: later calls stand alone.
    pub fn end(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// The turn running now.
    pub fn current(&self) -> Option<Arc<TurnMeter>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What a turn's calls add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnTotals {
    /// Calls settled.
    pub calls: i64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Their cost at the price book (nanocents); byok calls included.
    pub cost_nanocents: i64,
    /// Nanocents charged to the account for them (managed calls only).
    pub charged_nanocents: i64,
}

/// The most one turn may ask of models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLimits {
    /// Model calls (`--llm-max-calls-per-turn`, or the runtime's `max_calls_per_turn`).
    pub max_calls: u32,
    /// What its calls may cost, in nanocents (`--llm-max-turn-spend-cents`, or the
    /// runtime's `max_turn_spend_cents`).
    pub max_cost_nanocents: i64,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self { max_calls: 200, max_cost_nanocents: 1_000 * crate::billing::prices::NANOCENTS_PER_CENT }
    }
}

/// A turn's calls so far.
#[derive(Default)]
struct Tally {
    totals: TurnTotals,
    /// Calls admitted and not yet settled.
    in_flight: usize,
    /// Calls admitted.
    admitted: u32,
    /// Which limit the turn hit, once it has.
    tripped: Option<String>,
}

/// One turn's calls.
pub struct TurnMeter {
    /// The turn.
    pub turn_id: String,
    /// The trace its calls' spans belong to (derived from the turn id).
    pub trace_id: [u8; 16],
    /// The turn's own span, their parent.
    pub span_id: [u8; 8],
    limits: TurnLimits,
    state: Mutex<Tally>,
    idle: Notify,
    /// Where the turn's tool steps are reported, for a caller that streams it.
    events: TurnStream,
    steps: ToolSteps,
}

/// A call of a turn, counted in flight until it settles or is dropped.
pub struct TurnCall {
    meter: Arc<TurnMeter>,
}

impl TurnMeter {
    fn new(turn_id: &str, limits: TurnLimits) -> Self {
        let (trace_id, span_id) = turn_trace(turn_id);
        Self {
            turn_id: turn_id.to_owned(),
            trace_id,
            span_id,
            limits,
            state: Mutex::new(Tally::default()),
            idle: Notify::new(),
            events: TurnStream::default(),
            steps: ToolSteps::default(),
        }
    }

    /// A call of the turn is about to go upstream with `request`: the tool results it
    /// carries end the steps they answer.
    pub fn requesting(&self, request: &Value) {
        if self.events.streaming() {
            self.steps.answered(&self.events, tool_results(request));
        }
    }

    /// A call of the turn was answered asking for `calls` (id, name, arguments).
    pub fn asked_for_tools(&self, calls: impl IntoIterator<Item = (String, String, String)>) {
        if self.events.streaming() {
            self.steps.asked(&self.events, calls);
        }
    }

    /// A call starts, within the turn's limits: the turn waits for it before reading its
    /// totals. Past a limit, why (and the turn remembers it).
    pub fn call(self: &Arc<Self>) -> Result<TurnCall, String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let limits = self.limits;
        let refused = if state.admitted >= limits.max_calls {
            Some(format!(
                "the turn reached its limit of {} model calls (a runtime in a loop?); it ends here",
                limits.max_calls
            ))
        } else if state.totals.cost_nanocents >= limits.max_cost_nanocents {
            Some(format!(
                "the turn's model calls reached its spending limit of {} cents; it ends here",
                limits.max_cost_nanocents / crate::billing::prices::NANOCENTS_PER_CENT
            ))
        } else {
            None
        };
        if let Some(why) = refused {
            return Err(state.tripped.get_or_insert(why).clone());
        }
        state.admitted += 1;
        state.in_flight += 1;
        Ok(TurnCall { meter: self.clone() })
    }

    /// The limit the turn hit, if it did.
    pub fn tripped(&self) -> Option<String> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).tripped.clone()
    }

    /// The totals once every call in flight has settled, or after `within` whatever has.
    pub async fn settled(&self, within: Duration) -> TurnTotals {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let idle = self.idle.notified();
            {
                let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if state.in_flight == 0 {
                    return state.totals;
                }
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.state.lock().unwrap_or_else(|p| p.into_inner()).totals;
            }
        }
    }
}

impl TurnCall {
    /// The turn the call belongs to.
    pub fn meter(&self) -> &TurnMeter {
        &self.meter
    }

    /// The call's answer is complete: its figures join the turn's (before the runtime has
    /// the answer, so a call it makes next is judged on them).
    pub fn count(&self, add: TurnTotals) {
        let mut state = self.meter.state.lock().unwrap_or_else(|p| p.into_inner());
        let totals = &mut state.totals;
        totals.calls += add.calls;
        totals.input_tokens = totals.input_tokens.saturating_add(add.input_tokens);
        totals.output_tokens = totals.output_tokens.saturating_add(add.output_tokens);
        totals.cost_nanocents = totals.cost_nanocents.saturating_add(add.cost_nanocents);
        totals.charged_nanocents = totals.charged_nanocents.saturating_add(add.charged_nanocents);
    }

    /// The call is stored and charged `charged_nanocents`: it settles.
    pub fn settle(self, charged_nanocents: i64) {
        self.count(TurnTotals { charged_nanocents, ..TurnTotals::default() });
        // Dropping `self` below counts the call out.
    }
}

impl Drop for TurnCall {
    fn drop(&mut self) {
        let mut state = self.meter.state.lock().unwrap_or_else(|p| p.into_inner());
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            self.meter.idle.notify_waiters();
        }
    }
}

/// A turn's trace and span ids, derived from its id so every writer agrees on them.
pub fn turn_trace(turn_id: &str) -> ([u8; 16], [u8; 8]) {
    let digest = Sha256::digest(format!("roost turn {turn_id}").as_bytes());
    let mut trace = [0u8; 16];
    let mut span = [0u8; 8];
    trace.copy_from_slice(&digest[..16]);
    span.copy_from_slice(&digest[16..24]);
    (trace, span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_turn_waits_for_its_calls_to_settle() {
        let slot = TurnSlot::default();
        let meter = slot.begin("turn_1", TurnLimits::default(), TurnStream::default());
        let call = slot.current().expect("a turn runs").call().unwrap();
        let waiting = tokio::spawn({
            let meter = meter.clone();
            async move { meter.settled(Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        call.count(TurnTotals {
            calls: 1,
            input_tokens: 3,
            output_tokens: 2,
            cost_nanocents: 10,
            charged_nanocents: 0,
        });
        call.settle(1);
        let totals = waiting.await.unwrap();
        assert_eq!((totals.calls, totals.input_tokens, totals.charged_nanocents), (1, 3, 1));
        // A dropped call counts out without adding anything.
        drop(meter.call().unwrap());
        assert_eq!(meter.settled(Duration::from_millis(10)).await.calls, 1);
        slot.end();
        assert!(slot.current().is_none());
    }

    #[test]
    fn a_turn_stops_at_its_calls_or_its_spend() {
        let meter = Arc::new(TurnMeter::new("turn_1", TurnLimits { max_calls: 2, max_cost_nanocents: 1_000 }));
        meter.call().unwrap().count(TurnTotals { calls: 1, cost_nanocents: 10, ..TurnTotals::default() });
        let _second = meter.call().unwrap();
        assert_eq!(meter.tripped(), None);
        let why = meter.call().err().expect("a third call is past the limit");
        assert!(why.contains("limit of 2 model calls"), "{why}");
        assert_eq!(meter.tripped(), Some(why));

        let meter = Arc::new(TurnMeter::new("turn_2", TurnLimits { max_calls: 200, max_cost_nanocents: 1_000 }));
        // Counted, not yet settled (the writer has not stored it): the spend already counts.
        let first = meter.call().unwrap();
        first.count(TurnTotals { calls: 1, cost_nanocents: 999, ..TurnTotals::default() });
        meter.call().unwrap().count(TurnTotals { calls: 1, cost_nanocents: 5, ..TurnTotals::default() });
        let why = meter.call().err().expect("past the spend");
        assert!(why.contains("spending limit"), "{why}");
    }
}
