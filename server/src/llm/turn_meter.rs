//! Which turn an agent's model calls belong to, and what they add up to.
//!
//! While a turn runs, its agent's [`TurnSlot`] holds the turn's [`TurnMeter`]: every model
//! call the runtime makes through the gateway meanwhile is the turn's (its span goes under
//! the turn's trace, its tokens and charge into the turn's totals). Calls made between
//! turns (heartbeats, background jobs) find the slot empty and stand alone.
//!
//! A turn ends when its runtime answers, but a streamed call's charge is written just after
//! its last chunk went out; the turn waits for its calls to settle ([`TurnMeter::settled`])
//! before it reads the totals, so a turn's figures are the sum of its calls.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use sha2::{Digest as _, Sha256};
use tokio::sync::Notify;

/// An agent's current turn, if any; shared by the agent and its gateway identity.
#[derive(Clone, Default)]
pub struct TurnSlot(Arc<Mutex<Option<Arc<TurnMeter>>>>);

impl TurnSlot {
    /// Starts metering turn `turn_id`: calls from now on are its.
    pub fn begin(&self, turn_id: &str) -> Arc<TurnMeter> {
        let meter = Arc::new(TurnMeter::new(turn_id));
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
    /// Cents charged to the account for them (managed calls only).
    pub charged_cents: i64,
}

/// One turn's calls.
pub struct TurnMeter {
    /// The turn.
    pub turn_id: String,
    /// The trace its calls' spans belong to (derived from the turn id).
    pub trace_id: [u8; 16],
    /// The turn's own span, their parent.
    pub span_id: [u8; 8],
    state: Mutex<(TurnTotals, usize)>,
    idle: Notify,
}

/// A call of a turn, counted in flight until it settles or is dropped.
pub struct TurnCall {
    meter: Arc<TurnMeter>,
}

impl TurnMeter {
    fn new(turn_id: &str) -> Self {
        let (trace_id, span_id) = turn_trace(turn_id);
        Self {
            turn_id: turn_id.to_owned(),
            trace_id,
            span_id,
            state: Mutex::new((TurnTotals::default(), 0)),
            idle: Notify::new(),
        }
    }

    /// A call starts: the turn waits for it before reading its totals.
    pub fn call(self: &Arc<Self>) -> TurnCall {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 += 1;
        TurnCall { meter: self.clone() }
    }

    /// The totals once every call in flight has settled, or after `within` whatever has.
    pub async fn settled(&self, within: Duration) -> TurnTotals {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let idle = self.idle.notified();
            {
                let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if state.1 == 0 {
                    return state.0;
                }
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.state.lock().unwrap_or_else(|p| p.into_inner()).0;
            }
        }
    }
}

impl TurnCall {
    /// The turn the call belongs to.
    pub fn meter(&self) -> &TurnMeter {
        &self.meter
    }

    /// The call settled: its figures join the turn's.
    pub fn settle(self, add: TurnTotals) {
        let mut state = self.meter.state.lock().unwrap_or_else(|p| p.into_inner());
        let totals = &mut state.0;
        totals.calls += add.calls;
        totals.input_tokens = totals.input_tokens.saturating_add(add.input_tokens);
        totals.output_tokens = totals.output_tokens.saturating_add(add.output_tokens);
        totals.cost_nanocents = totals.cost_nanocents.saturating_add(add.cost_nanocents);
        totals.charged_cents = totals.charged_cents.saturating_add(add.charged_cents);
        // Dropping `self` below counts the call out.
    }
}

impl Drop for TurnCall {
    fn drop(&mut self) {
        let mut state = self.meter.state.lock().unwrap_or_else(|p| p.into_inner());
        state.1 = state.1.saturating_sub(1);
        if state.1 == 0 {
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
        let meter = slot.begin("turn_1");
        let call = slot.current().expect("a turn runs").call();
        let waiting = tokio::spawn({
            let meter = meter.clone();
            async move { meter.settled(Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        call.settle(TurnTotals { calls: 1, input_tokens: 3, output_tokens: 2, cost_nanocents: 10, charged_cents: 1 });
        let totals = waiting.await.unwrap();
        assert_eq!((totals.calls, totals.input_tokens, totals.charged_cents), (1, 3, 1));
        // A dropped call counts out without adding anything.
        drop(meter.call());
        assert_eq!(meter.settled(Duration::from_millis(10)).await.calls, 1);
        slot.end();
        assert!(slot.current().is_none());
    }
}
