//! Agent tokens as the access policy sees them: how one looks, and the check it asks the
//! core (which issues and holds them) whether one is live.

/// What every agent token starts with: a hosted runtime's credential for what it sends
/// roost (its telemetry), checked by the core.
pub const AGENT_TOKEN_PREFIX: &str = "rat_";

/// Whether a bearer is a live agent token. The core holds them; the policy asks, so an
/// export carrying a made-up one is refused before its body is read.
pub trait AgentTokenCheck: Send + Sync + std::fmt::Debug {
    /// True while `token` is a running agent's.
    fn is_live(&self, token: &str) -> bool;
}
