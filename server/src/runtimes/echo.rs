//! `echo`: an in-process runtime that replies `[<brief>] <text>`, so the brief visibly takes
//! effect. Boots instantly, never dies; for demos, tests and benchmarks.

use roost_proto::ApiError;

use super::{CallBounds, Machine, MachineSpec, TurnInput, TurnOutput, word_count};

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
    async fn bounds(&self, input: &TurnInput) -> CallBounds {
        // The reply is the brief and the message: no more words than their bytes.
        let reply = self.brief.len() + input.text.len() + 3;
        CallBounds { prompt_bytes: input.text.len(), max_output_tokens: i64::try_from(reply).unwrap_or(i64::MAX) }
    }

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
