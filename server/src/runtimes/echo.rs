//! `echo`: an in-process runtime that replies `[<brief>] <text>`, so the brief visibly takes
//! effect. Boots instantly, never dies, streams its reply word by word; for demos, tests
//! and benchmarks.

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
        // It streams word by word (each delta keeps the spaces before its word), so a
        // streamed echo turn shows what a streaming runtime's does.
        if input.events.streaming() {
            let mut rest = reply.as_str();
            while !rest.is_empty() {
                let word = rest.trim_start();
                let end = rest.len() - word.len() + word.find(char::is_whitespace).unwrap_or(word.len());
                input.events.delta(&rest[..end]);
                rest = &rest[end..];
            }
        }
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
