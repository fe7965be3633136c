//! Runtimes: what a hosted agent runs on. The catalogue says which runtimes exist; a
//! driver starts a [`Machine`] for an agent (in-process for `echo`, a child process for
//! `process`, a model-gateway client for `assistant`) that takes one turn at a time.
//!
//! Machines know nothing of accounts, billing or queues: the agents module serialises
//! turns, enforces the hard cap and records the outcome.

pub mod assistant;
pub mod catalogue;
pub mod echo;
pub mod files;
pub mod orphans;
pub mod output;
pub mod packaged;
pub(crate) mod pre_exec;
pub mod process;
pub mod procfs;
mod slots;
mod spawner;
pub(crate) mod streaming;
pub mod workspace;

use std::sync::Arc;

use roost_proto::ApiError;

use crate::turn_stream::TurnStream;

pub use catalogue::{Catalogue, DriverSpec, RuntimeSpec};

use crate::callers::{ModelMode, TurnSlot, tokens::AgentIdentity};

/// Everything a driver needs to start an agent's machine. It holds the agent's secrets
/// opened (the runtime needs them plain), so it lives only as long as a boot, and its
/// `Debug` leaves them out.
#[derive(Clone)]
pub struct MachineSpec {
    /// The agent.
    pub instance_id: String,
    /// Its owner, who pays for its managed model calls.
    pub account_id: String,
    /// The turn it is running (its model calls belong to it).
    pub turn: TurnSlot,
    /// Its catalogue entry.
    pub runtime: Arc<RuntimeSpec>,
    /// The standing brief.
    pub brief: String,
    /// Managed or byok.
    pub model_mode: ModelMode,
    /// The model to use (the config's, else the runtime's default).
    pub model: String,
    /// byok key, if set.
    pub provider_api_key: Option<String>,
    /// Chat bot token, if set.
    pub messaging_bot_token: Option<String>,
}

impl MachineSpec {
    /// The agent this machine is started for, as its model calls name it.
    pub fn identity(&self) -> AgentIdentity {
        AgentIdentity {
            instance_id: self.instance_id.clone(),
            account_id: self.account_id.clone(),
            runtime_id: self.runtime.id.clone(),
            model_mode: self.model_mode,
            provider_api_key: self.provider_api_key.clone(),
            turn: self.turn.clone(),
            sandboxed: false,
        }
    }
}

impl std::fmt::Debug for MachineSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| "<hidden>");
        f.debug_struct("MachineSpec")
            .field("instance_id", &self.instance_id)
            .field("runtime", &self.runtime.id)
            .field("brief", &self.brief)
            .field("model_mode", &self.model_mode)
            .field("model", &self.model)
            .field("provider_api_key", &hidden(&self.provider_api_key))
            .field("messaging_bot_token", &hidden(&self.messaging_bot_token))
            .finish()
    }
}

/// One message for a machine.
#[derive(Clone)]
pub struct TurnInput {
    /// The turn's id, for the runtime's own logs.
    pub turn_id: String,
    /// The message.
    pub text: String,
    /// Where the reply's text goes as the machine has it, when a caller streams the turn
    /// ([`crate::turn_stream`]). A machine that cannot stream ignores it: the turn then
    /// sends its whole reply as one delta.
    pub events: TurnStream,
}

impl std::fmt::Debug for TurnInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnInput").field("turn_id", &self.turn_id).field("text", &self.text).finish_non_exhaustive()
    }
}

/// A machine's answer to a turn.
#[derive(Debug, Clone, Default)]
pub struct TurnOutput {
    /// The reply.
    pub reply: String,
    /// Prompt tokens used.
    pub input_tokens: i64,
    /// Completion tokens used.
    pub output_tokens: i64,
    /// The model that answered.
    pub model: String,
}

/// The most a turn may ask of a model: what a metered turn holds credits for
/// (`crate::billing::holds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallBounds {
    /// Bytes of everything the model is sent (no tokenizer makes more tokens than bytes).
    pub prompt_bytes: usize,
    /// The most tokens the model may answer with.
    pub max_output_tokens: i64,
}

/// A running agent.
#[async_trait::async_trait]
pub trait Machine: Send + Sync {
    /// The bounds of a turn on `input`, asked before a metered turn runs. By default the
    /// message and [`crate::billing::holds::DEFAULT_MAX_OUTPUT_TOKENS`]; a runtime that
    /// knows more (its history, its reply's size) says so.
    async fn bounds(&self, input: &TurnInput) -> CallBounds {
        CallBounds {
            prompt_bytes: input.text.len(),
            max_output_tokens: crate::billing::holds::DEFAULT_MAX_OUTPUT_TOKENS,
        }
    }

    /// Runs one turn. Errors are `runtime_failed` when the runtime crashed, was unreachable
    /// or answered garbage, or another reason from the table when the agent cannot take the
    /// turn as configured (a byok agent without its key is `wrong_state`).
    async fn turn(&self, input: TurnInput) -> Result<TurnOutput, ApiError>;

    /// Stops the machine and waits until it has stopped. Idempotent.
    async fn stop(&self);

    /// Resolves, with why, once the machine has died on its own (or been stopped). Never
    /// resolves for machines that cannot die.
    async fn died(&self) -> String;
}

/// The drivers roost runs agents with.
pub struct Drivers {
    /// Child processes.
    pub process: process::ProcessDriver,
    /// LLM agents.
    pub assistant: assistant::AssistantDriver,
}

impl Drivers {
    /// Starts the machine for `spec` with its runtime's driver; the error says why it
    /// could not boot.
    pub async fn start(&self, spec: MachineSpec) -> Result<Arc<dyn Machine>, String> {
        match &spec.runtime.driver {
            DriverSpec::Echo => Ok(Arc::new(echo::EchoMachine::new(&spec))),
            DriverSpec::Process { command, env } => {
                let (command, env) = (command.clone(), env.clone());
                Ok(self.process.start(&spec, process::Program::Command { command: &command, env: &env }).await?)
            }
            DriverSpec::Packaged { package, install_dir, background } => {
                let installation = self.process.installation(*package, install_dir.as_deref())?;
                let program = process::Program::Packaged { installation, background: *background };
                Ok(self.process.start(&spec, program).await?)
            }
            DriverSpec::Assistant => Ok(self.assistant.start(&spec)),
        }
    }
}

/// Whitespace-separated words: the token estimate of runtimes without a tokenizer.
pub fn word_count(text: &str) -> i64 {
    text.split_whitespace().count() as i64
}
