//! `echo`: an in-process runtime that replies `[<brief>] <text>`, so the brief visibly takes
//! effect. Boots instantly, never dies; for demos, tests and benchmarks.

use roost_proto::ApiError;

use super::{Machine, MachineSpec, TurnInput, TurnOutput, word_count};

/// An echo agent.
pub struct EchoMachine {
    brief: String,
}

impl EchoMachine {
    /// An echo agent with the spec's brief.
    pub fn new(spec: &MachineSpec) -> Self {
        Self { brief: spec.brief.clone() }
    }
}

#[async_trait::async_trait]
impl Machine for EchoMachine {
    async fn turn(&self, input: TurnInput) -> Result<TurnOutput, ApiError> {
        let reply = format!("[{}] {}", self.brief, input.text);
        Ok(TurnOutput {
            input_tokens: word_count(&input.text),
            output_tokens: word_count(&reply),
            reply,
            model: "echo".to_owned(),
        })
    }

    async fn stop(&self) {}

    async fn died(&self) -> String {
        std::future::pending().await
    }
}
