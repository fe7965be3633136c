//! What a model's answer says about itself, read as it passes through: usage, model, id,
//! finish reasons, and the output itself (for the call's span).

use serde_json::Value;

/// Text of the output kept for a span; more is cut (the span is a record, not the answer).
const MAX_OUTPUT_TEXT: usize = 64 * 1024;

/// Tokens a call used, as the upstream reports them, in the GenAI convention: `input`
/// counts every prompt token, cached ones included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallUsage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Of the prompt tokens, read from the provider's cache.
    pub cache_read_tokens: i64,
    /// Of the prompt tokens, written to the provider's cache.
    pub cache_write_tokens: i64,
}

/// A tool call the model made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// Its id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments (JSON text).
    pub arguments: String,
}

/// What is known of an answer so far.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// Usage, once reported.
    pub usage: Option<CallUsage>,
    /// The model that answered.
    pub model: Option<String>,
    /// The upstream's id of the answer.
    pub id: Option<String>,
    /// Why generation stopped, per choice.
    pub finish_reasons: Vec<String>,
    /// The answer's text (cut at [`MAX_OUTPUT_TEXT`]).
    pub text: String,
    /// The tool calls it made, by position.
    pub tool_calls: Vec<ToolCall>,
    /// An error the upstream reported in the stream.
    pub error: Option<String>,
}

impl Answer {
    /// Adds output text (up to the cap).
    pub fn push_text(&mut self, text: &str) {
        let room = MAX_OUTPUT_TEXT.saturating_sub(self.text.len());
        if room >= text.len() {
            self.text.push_str(text);
        } else {
            let mut end = room;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&text[..end]);
        }
    }

    /// The tool call at `index`, made if new.
    pub fn tool_call(&mut self, index: usize) -> &mut ToolCall {
        if self.tool_calls.len() <= index {
            self.tool_calls.resize(index.min(127) + 1, ToolCall::default());
        }
        let last = self.tool_calls.len() - 1;
        &mut self.tool_calls[index.min(last)]
    }

    /// Keeps a string field's value if the answer has it.
    pub fn note(slot: &mut Option<String>, value: Option<&Value>) {
        if let Some(text) = value.and_then(Value::as_str).filter(|t| !t.is_empty()) {
            *slot = Some(text.to_owned());
        }
    }
}

/// An integer field, 0 when absent or not an integer.
pub fn int(value: &Value, key: &str) -> i64 {
    value.get(key).and_then(Value::as_i64).unwrap_or(0).max(0)
}
