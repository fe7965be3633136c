//! Agent tokens: the credential a hosted runtime presents for what it sends roost itself,
//! so roost knows which agent sent it: its OTLP telemetry, and its model calls through the
//! model gateway ([`crate::llm`]), where the token is the runtime's `OPENAI_API_KEY` and
//! `ANTHROPIC_API_KEY`.
//!
//! Each boot of a process runtime gets a fresh random token (`rat_` and 40 base32
//! characters) in its environment; roost keeps only its SHA-256, in memory, and forgets it
//! when that process ends (stop, pause, config restart, suspension, destroy, crash). A
//! token is good only on the replica that booted the runtime, which is the one the runtime
//! calls. Telemetry sent with it is *attributed* to the agent (`agent_instance` on the
//! rows) and is the agent's whatever it names: roost sets its session, conversation,
//! instance and account from the token, and counts none of the usage it reports about
//! itself ([`crate::telemetry::agent_claims`]). Telemetry that only names an agent (a
//! `session.id`, a `roost.instance.id`) is not attributed to it, whoever sends it.
//!
//! A sandboxed runtime's token is good on its own agent's socket only
//! ([`crate::sandbox::agent_socket`]): [`AgentTokens::identity`] answers for it only while
//! handling a request that arrived there ([`on_agent_socket`]). A token read out of one
//! sandbox (a workspace file, an environment) opens nothing from another sandbox, nor
//! from roost's listener. An unconfined runtime's token (`--runtime-sandbox off`) has no
//! socket of its own and works on roost's listener.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use roost_kit::agent_tokens::{AGENT_TOKEN_PREFIX, AgentTokenCheck};
use sha2::{Digest as _, Sha256};

use super::{ModelMode, TurnSlot};
use crate::ids::random_base32;

/// Who holds a token: the agent as its model calls need it. It holds the byok key opened,
/// so its `Debug` leaves the key out.
#[derive(Clone)]
pub struct AgentIdentity {
    /// The agent.
    pub instance_id: String,
    /// Who pays for its managed model calls.
    pub account_id: String,
    /// Its runtime (the `service.name` of its spans).
    pub runtime_id: String,
    /// Managed or byok, for this boot.
    pub model_mode: ModelMode,
    /// The byok key roost puts on the agent's calls upstream (never in its environment).
    pub provider_api_key: Option<String>,
    /// The turn the agent is running, which its calls belong to.
    pub turn: TurnSlot,
    /// Its runtime is sandboxed: the token is good on the agent's own socket only.
    pub sandboxed: bool,
}

impl AgentIdentity {
    /// The same agent, its runtime sandboxed or not.
    pub fn sandboxed(self, sandboxed: bool) -> Self {
        Self { sandboxed, ..self }
    }
}

tokio::task_local! {
    /// The agent whose socket the request being handled arrived on.
    static ARRIVED_ON: Arc<str>;
}

/// Runs `handling` (a request from agent `agent`'s socket) knowing where it arrived: agent
/// tokens presented in it are good only if they are that agent's.
pub async fn on_agent_socket<F: std::future::Future>(agent: Arc<str>, handling: F) -> F::Output {
    ARRIVED_ON.scope(agent, handling).await
}

/// Whether a token of `agent` may be used where the current request arrived.
fn usable_here(agent: &AgentIdentity) -> bool {
    match ARRIVED_ON.try_with(Arc::clone) {
        Ok(arrived_on) => *arrived_on == *agent.instance_id,
        Err(_) => !agent.sandboxed,
    }
}

impl std::fmt::Debug for AgentIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentIdentity")
            .field("instance_id", &self.instance_id)
            .field("account_id", &self.account_id)
            .field("model_mode", &self.model_mode)
            .field("provider_api_key", &self.provider_api_key.as_ref().map(|_| "<hidden>"))
            .finish_non_exhaustive()
    }
}

/// The live agent tokens of this process.
#[derive(Clone, Default)]
pub struct AgentTokens {
    by_hash: Arc<RwLock<HashMap<[u8; 32], Arc<AgentIdentity>>>>,
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
    /// A new token for the agent `identity` names, live until the returned handle is
    /// dropped.
    pub fn issue(&self, identity: AgentIdentity) -> AgentToken {
        let secret = format!("{AGENT_TOKEN_PREFIX}{}", random_base32(40));
        let hash = hash(&secret);
        self.by_hash.write().unwrap_or_else(|p| p.into_inner()).insert(hash, Arc::new(identity));
        AgentToken { secret, hash, tokens: self.clone() }
    }

    /// The agent a token belongs to, while it is live.
    pub fn agent_of(&self, token: &str) -> Option<String> {
        self.identity(token).map(|agent| agent.instance_id.clone())
    }

    /// Everything about the agent a token belongs to, while it is live, and if it may be
    /// used where the current request arrived: a sandboxed agent's on its own socket only.
    pub fn identity(&self, token: &str) -> Option<Arc<AgentIdentity>> {
        let identity = self.by_hash.read().unwrap_or_else(|p| p.into_inner()).get(&hash(token)).cloned()?;
        usable_here(&identity).then_some(identity)
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

    fn agent(id: &str) -> AgentIdentity {
        AgentIdentity {
            instance_id: id.to_owned(),
            account_id: "acc_a".to_owned(),
            runtime_id: "example".to_owned(),
            model_mode: ModelMode::Managed,
            provider_api_key: Some("sk-secret".to_owned()),
            turn: TurnSlot::default(),
            sandboxed: false,
        }
    }

    #[test]
    fn a_token_names_its_agent_until_it_is_dropped() {
        let tokens = AgentTokens::default();
        let token = tokens.issue(agent("ins_a"));
        assert!(token.secret().starts_with(AGENT_TOKEN_PREFIX));
        assert!(!format!("{:?}", tokens.identity(token.secret())).contains("sk-secret"));
        let other = tokens.issue(agent("ins_a"));
        assert_ne!(token.secret(), other.secret(), "a fresh token per boot");
        assert_eq!(tokens.agent_of(token.secret()).as_deref(), Some("ins_a"));
        let secret = token.secret().to_owned();
        drop(token);
        assert_eq!(tokens.agent_of(&secret), None);
        assert_eq!(tokens.agent_of(other.secret()).as_deref(), Some("ins_a"));
        assert_eq!(tokens.agent_of("rat_guessed"), None);
    }

    #[tokio::test]
    async fn a_sandboxed_agents_token_is_good_on_its_own_socket_only() {
        let tokens = AgentTokens::default();
        let a = tokens.issue(agent("ins_a").sandboxed(true));
        let loose = tokens.issue(agent("ins_l"));
        assert_eq!(tokens.agent_of(a.secret()), None, "not on roost's listener");
        let on = |agent: &str, token: &str| {
            let (tokens, token) = (tokens.clone(), token.to_owned());
            on_agent_socket(agent.into(), async move { tokens.agent_of(&token) })
        };
        assert_eq!(on("ins_a", a.secret()).await.as_deref(), Some("ins_a"));
        assert_eq!(on("ins_c", a.secret()).await, None, "not on another agent's socket");
        assert_eq!(on("ins_c", loose.secret()).await, None, "an unconfined agent's token is not for sockets");
        assert_eq!(tokens.agent_of(loose.secret()).as_deref(), Some("ins_l"));
    }
}
