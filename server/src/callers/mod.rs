//! Who makes a model call, and which turn it counts against: the room both the runtimes
//! (which start agents and hand them their tokens) and the model gateway (which takes the
//! agents' calls) use, so neither needs the other for it.
//!
//! - [`tokens`]: the per-boot agent tokens and the [`tokens::AgentIdentity`] a token
//!   stands for (the agent, its account, managed or byok, its running turn).
//! - [`turn_meter`]: a turn's meter over its model calls, with the turn's limits on calls
//!   and spend, and the slot through which a call finds the agent's running turn.

pub mod tokens;
pub mod turn_meter;

pub use turn_meter::{TurnCall, TurnLimits, TurnMeter, TurnSlot, TurnTotals, turn_trace};

/// Where an agent's model comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelMode {
    /// The included, metered model.
    Managed,
    /// The agent's own PROVIDER_API_KEY.
    Byok,
}

impl ModelMode {
    /// The stored (and environment) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::Byok => "byok",
        }
    }

    /// Parses a stored name; anything unknown is managed, the default.
    pub fn parse(name: &str) -> Self {
        if name == "byok" { Self::Byok } else { Self::Managed }
    }
}
