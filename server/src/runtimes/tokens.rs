//! Agent tokens: the credential a hosted runtime presents for what it sends roost itself,
//! so roost knows which agent sent it (its OTLP telemetry today; its model calls through
//! the model gateway next).
//!
//! Each boot of a process runtime gets a fresh random token (`rat_` and 40 base32
//! characters) in its environment; roost keeps only its SHA-256, in memory, and forgets it
//! when that process ends (stop, pause, config restart, destroy, crash). Telemetry sent
//! with it is *attributed* to the agent (`agent_instance` on the rows); telemetry that only
//! names an agent (a `session.id`, a `roost.instance.id`) is not, whoever sends it.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use roost_gateway::access::{AGENT_TOKEN_PREFIX, AgentTokenCheck};
use sha2::{Digest as _, Sha256};

use crate::ids::random_base32;

/// The live agent tokens of this process.
#[derive(Clone, Default)]
pub struct AgentTokens {
    by_hash: Arc<RwLock<HashMap<[u8; 32], String>>>,
}

impl std::fmt::Debug for AgentTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let live = self.by_hash.read().map_or(0, |m| m.len());
        f.debug_struct("AgentTokens").field("live", &live).finish()
    }
}

impl AgentTokenCheck for AgentTokens {
    fn is_live(&self, token: &str) -> bool {
        self.agent_of(token).is_some()
    }
}

/// One live token; revoked when dropped.
#[derive(Debug)]
pub struct AgentToken {
    secret: String,
    hash: [u8; 32],
    tokens: AgentTokens,
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl AgentTokens {
    /// A new token for `instance_id`, live until the returned handle is dropped.
    pub fn issue(&self, instance_id: &str) -> AgentToken {
        let secret = format!("{AGENT_TOKEN_PREFIX}{}", random_base32(40));
        let hash = hash(&secret);
        self.by_hash.write().unwrap_or_else(|p| p.into_inner()).insert(hash, instance_id.to_owned());
        AgentToken { secret, hash, tokens: self.clone() }
    }

    /// The agent a token belongs to, while it is live.
    pub fn agent_of(&self, token: &str) -> Option<String> {
        self.by_hash.read().unwrap_or_else(|p| p.into_inner()).get(&hash(token)).cloned()
    }
}

impl AgentToken {
    /// The token, for the runtime's environment.
    pub fn secret(&self) -> &str {
        &self.secret
    }
}

impl Drop for AgentToken {
    fn drop(&mut self) {
        self.tokens.by_hash.write().unwrap_or_else(|p| p.into_inner()).remove(&self.hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_agent_until_it_is_dropped() {
        let tokens = AgentTokens::default();
        let token = tokens.issue("ins_a");
        assert!(token.secret().starts_with(AGENT_TOKEN_PREFIX));
        let other = tokens.issue("ins_a");
        assert_ne!(token.secret(), other.secret(), "a fresh token per boot");
        assert_eq!(tokens.agent_of(token.secret()).as_deref(), Some("ins_a"));
        let secret = token.secret().to_owned();
        drop(token);
        assert_eq!(tokens.agent_of(&secret), None);
        assert_eq!(tokens.agent_of(other.secret()).as_deref(), Some("ins_a"));
        assert_eq!(tokens.agent_of("rat_guessed"), None);
    }
}
