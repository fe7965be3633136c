//! The attribute map: which attribute each sender puts a GenAI field in, in precedence
//! order. One declared table, like the q/1 registry: it is part of the ingest contract, so
//! it lives here, beside the protobuf one. The server's ingest reads it, the README and
//! `/skill.md` print it ([`markdown`]), and a test keeps the README from drifting.
//!
//! Senders disagree on names. The GenAI semantic conventions come first (the current
//! names, then the older ones), then OpenInference (Phoenix, LlamaIndex, CrewAI, DSPy),
//! OpenLLMetry/Traceloop, the Vercel AI SDK, the coding agents' log events (Claude Code,
//! Codex CLI) and last the plain names ClawMetry's custom ingest uses. For each field the
//! first name present on the item wins; then the same names on its resource.
//!
//! The Vercel AI SDK repeats its steps' usage (`ai.usage.*`) on the span around them
//! (`ai.generateText`, `ai.streamText`…): only its provider calls (`ai.operationId`
//! `….doGenerate`, `….doStream`) and spans of other senders report tokens, so nothing is
//! counted twice ([`is_aggregate`]).
//!
//! Input tokens count every prompt token, cached ones included, as the GenAI conventions
//! and OpenAI do. Anthropic's API (and Claude Code, which reports what it returns) counts
//! cache reads and writes apart from `input_tokens`: names marked [`Count::Apart`] are
//! added to the input count instead of being a part of it.

use std::{collections::HashMap, sync::LazyLock};

/// A GenAI field that senders name differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// The session or conversation the item belongs to.
    Session,
    /// The agent.
    Agent,
    /// What was done: `chat`, `execute_tool`, an OpenInference span kind…
    Operation,
    /// The model provider (`openai`, `anthropic`…).
    Provider,
    /// The model asked for.
    RequestModel,
    /// The model that answered.
    ResponseModel,
    /// Prompt tokens.
    InputTokens,
    /// Completion tokens.
    OutputTokens,
    /// Prompt tokens read from the provider's cache.
    CacheReadTokens,
    /// Prompt tokens written to the provider's cache.
    CacheWriteTokens,
    /// What the call cost, in USD, as the sender computed it (it wins over the price book).
    CostUsd,
    /// The tool called.
    ToolName,
}

impl Field {
    /// Every field, in the order the docs list them.
    pub const ALL: [Field; 12] = [
        Field::Session,
        Field::Agent,
        Field::Operation,
        Field::Provider,
        Field::RequestModel,
        Field::ResponseModel,
        Field::InputTokens,
        Field::OutputTokens,
        Field::CacheReadTokens,
        Field::CacheWriteTokens,
        Field::CostUsd,
        Field::ToolName,
    ];

    /// The field's name in the docs and q/1 columns.
    pub fn name(self) -> &'static str {
        match self {
            Field::Session => "session_id",
            Field::Agent => "agent_id",
            Field::Operation => "operation",
            Field::Provider => "system",
            Field::RequestModel => "request_model",
            Field::ResponseModel => "response_model",
            Field::InputTokens => "input_tokens",
            Field::OutputTokens => "output_tokens",
            Field::CacheReadTokens => "cache_read_tokens",
            Field::CacheWriteTokens => "cache_write_tokens",
            Field::CostUsd => "cost_usd",
            Field::ToolName => "tool_name",
        }
    }
}

/// Who sends an attribute name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// OpenTelemetry GenAI semantic conventions, current.
    Semconv,
    /// Older GenAI semantic-convention names, still sent by many instrumentations.
    SemconvOld,
    /// OpenInference.
    OpenInference,
    /// OpenLLMetry / Traceloop.
    Traceloop,
    /// The Vercel AI SDK's telemetry.
    VercelAi,
    /// Claude Code's OTel log events.
    ClaudeCode,
    /// Codex CLI's OTel log events.
    Codex,
    /// roost's own runtimes.
    Roost,
    /// ClawMetry's plain names (also what many hand-written exporters use).
    ClawMetry,
}

impl Sender {
    /// The sender's name in the docs.
    pub fn name(self) -> &'static str {
        match self {
            Sender::Semconv => "GenAI semconv",
            Sender::SemconvOld => "GenAI semconv (older)",
            Sender::OpenInference => "OpenInference",
            Sender::Traceloop => "OpenLLMetry",
            Sender::VercelAi => "Vercel AI SDK",
            Sender::ClaudeCode => "Claude Code",
            Sender::Codex => "Codex CLI",
            Sender::Roost => "roost",
            Sender::ClawMetry => "ClawMetry",
        }
    }
}

/// How a cache-token count relates to the input count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// A part of the input tokens (OpenAI, the GenAI conventions).
    Within,
    /// Counted apart from the input tokens (Anthropic): added to them.
    Apart,
}

/// One attribute name of a field.
#[derive(Debug, Clone, Copy)]
pub struct Name {
    /// The attribute key.
    pub key: &'static str,
    /// Who sends it.
    pub sender: Sender,
    /// For cache-token fields: within or apart from the input tokens.
    pub count: Count,
}

const fn n(key: &'static str, sender: Sender) -> Name {
    Name { key, sender, count: Count::Within }
}

const fn apart(key: &'static str, sender: Sender) -> Name {
    Name { key, sender, count: Count::Apart }
}

use Sender::*;

/// The map: each field's attribute names, in precedence order.
pub static MAP: &[(Field, &[Name])] = &[
    (
        Field::Session,
        &[
            n("gen_ai.conversation.id", Semconv),
            n("session.id", Semconv),
            n("traceloop.association.properties.thread_id", Traceloop),
            n("traceloop.association.properties.session_id", Traceloop),
            n("conversation.id", Codex),
            n("ai.telemetry.metadata.sessionId", VercelAi),
            n("session_id", ClawMetry),
        ],
    ),
    (
        Field::Agent,
        &[
            n("gen_ai.agent.id", Semconv),
            n("roost.instance.id", Roost),
            n("agent.id", ClawMetry),
            n("gen_ai.agent.name", Semconv),
            n("agent_id", ClawMetry),
        ],
    ),
    (
        Field::Operation,
        &[
            n("gen_ai.operation.name", Semconv),
            n("openinference.span.kind", OpenInference),
            n("llm.request.type", Traceloop),
            n("traceloop.span.kind", Traceloop),
            n("ai.operationId", VercelAi),
            n("event.name", ClaudeCode),
        ],
    ),
    (
        Field::Provider,
        &[
            n("gen_ai.provider.name", Semconv),
            n("gen_ai.system", SemconvOld),
            n("llm.provider", OpenInference),
            n("llm.system", OpenInference),
            n("ai.model.provider", VercelAi),
        ],
    ),
    (
        Field::RequestModel,
        &[
            n("gen_ai.request.model", Semconv),
            n("llm.request.model", Traceloop),
            n("ai.model.id", VercelAi),
            n("model", ClaudeCode),
        ],
    ),
    (
        Field::ResponseModel,
        &[
            n("gen_ai.response.model", Semconv),
            n("llm.response.model", Traceloop),
            n("llm.model_name", OpenInference),
            n("ai.response.model", VercelAi),
        ],
    ),
    (
        Field::InputTokens,
        &[
            n("gen_ai.usage.input_tokens", Semconv),
            n("gen_ai.usage.prompt_tokens", SemconvOld),
            n("llm.token_count.prompt", OpenInference),
            n("llm.usage.prompt_tokens", Traceloop),
            n("ai.usage.inputTokens", VercelAi),
            n("ai.usage.promptTokens", VercelAi),
            n("input_token_count", Codex),
            n("input_tokens", ClaudeCode),
            n("prompt_tokens", ClawMetry),
        ],
    ),
    (
        Field::OutputTokens,
        &[
            n("gen_ai.usage.output_tokens", Semconv),
            n("gen_ai.usage.completion_tokens", SemconvOld),
            n("llm.token_count.completion", OpenInference),
            n("llm.usage.completion_tokens", Traceloop),
            n("ai.usage.outputTokens", VercelAi),
            n("ai.usage.completionTokens", VercelAi),
            n("output_token_count", Codex),
            n("output_tokens", ClaudeCode),
            n("completion_tokens", ClawMetry),
        ],
    ),
    (
        Field::CacheReadTokens,
        &[
            n("gen_ai.usage.cache_read.input_tokens", Semconv),
            apart("gen_ai.usage.cache_read_input_tokens", Traceloop),
            n("llm.token_count.prompt_details.cache_read", OpenInference),
            n("ai.usage.cachedInputTokens", VercelAi),
            n("cached_token_count", Codex),
            apart("cache_read_tokens", ClaudeCode),
        ],
    ),
    (
        Field::CacheWriteTokens,
        &[
            n("gen_ai.usage.cache_creation.input_tokens", Semconv),
            apart("gen_ai.usage.cache_creation_input_tokens", Traceloop),
            n("llm.token_count.prompt_details.cache_write", OpenInference),
            apart("cache_creation_tokens", ClaudeCode),
        ],
    ),
    (
        Field::CostUsd,
        &[
            n("gen_ai.usage.cost", Semconv),
            n("gen_ai.usage.cost_usd", Semconv),
            n("llm.cost.total", OpenInference),
            n("cost_usd", ClaudeCode),
        ],
    ),
    (
        Field::ToolName,
        &[
            n("gen_ai.tool.name", Semconv),
            n("tool.name", OpenInference),
            n("ai.toolCall.name", VercelAi),
            n("tool_name", ClaudeCode),
        ],
    ),
];

/// Each key's field and rank (its place in the field's list), for one pass over an item's
/// attributes.
pub static BY_KEY: LazyLock<HashMap<&'static str, (Field, u8, Count)>> = LazyLock::new(|| {
    let mut keys = HashMap::new();
    for (field, names) in MAP {
        for (rank, name) in names.iter().enumerate() {
            keys.insert(name.key, (*field, rank as u8, name.count));
        }
    }
    keys
});

/// True for a span that sums the usage of spans under it (the Vercel AI SDK's
/// `ai.generateText` around its `ai.generateText.doGenerate` steps): its tokens are not
/// counted again.
pub fn is_aggregate(operation_id: &str) -> bool {
    operation_id.starts_with("ai.") && !operation_id.contains(".do") && !operation_id.starts_with("ai.toolCall")
}

/// Where messages are read from (not single attributes, so listed apart from [`MAP`]), in
/// precedence order: the first form an item carries is the one used.
pub static MESSAGE_SOURCES: &[(&str, Sender, &str)] = &[
    ("gen_ai.input.messages, gen_ai.output.messages (JSON)", Semconv, "span or log attributes"),
    (
        "gen_ai.user.message, gen_ai.system.message, gen_ai.assistant.message, gen_ai.tool.message, gen_ai.choice",
        SemconvOld,
        "log events (event_name), span events",
    ),
    (
        "gen_ai.prompt.N.role|content, gen_ai.completion.N.role|content|tool_calls.M.name|arguments",
        SemconvOld,
        "span attributes",
    ),
    (
        "llm.input_messages.N.message.role|content, llm.output_messages.N.message.role|content|tool_calls.M.tool_call.function.name|arguments",
        OpenInference,
        "span attributes",
    ),
    ("input.value, output.value", OpenInference, "span attributes (when no messages)"),
    ("ai.prompt.messages (JSON), ai.response.text, ai.response.toolCalls (JSON)", VercelAi, "span attributes"),
    ("claude_code.user_prompt: prompt", ClaudeCode, "log events"),
    ("codex.user_prompt: prompt", Codex, "log events"),
];

/// The map as a Markdown table, for the README and `/skill.md`.
pub fn markdown() -> String {
    let mut out = String::from("| field | attribute names, first found wins |\n| --- | --- |\n");
    for (field, names) in MAP {
        let names: Vec<String> = names
            .iter()
            .map(|name| {
                let apart = if name.count == Count::Apart { ", apart from input" } else { "" };
                format!("`{}` ({}{apart})", name.key, name.sender.name())
            })
            .collect();
        out.push_str(&format!("| `{}` | {} |\n", field.name(), names.join(", ")));
    }
    out.push_str("| messages | ");
    let sources: Vec<String> =
        MESSAGE_SOURCES.iter().map(|(keys, sender, place)| format!("{keys} ({}: {place})", sender.name())).collect();
    out.push_str(&sources.join("; "));
    out.push_str(" |\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_mapped_once_and_no_key_twice() {
        for field in Field::ALL {
            assert_eq!(MAP.iter().filter(|(f, _)| *f == field).count(), 1, "{field:?}");
        }
        let keys: usize = MAP.iter().map(|(_, names)| names.len()).sum();
        assert_eq!(BY_KEY.len(), keys, "a key is listed for two fields");
    }

    #[test]
    fn the_readme_prints_the_map() {
        let readme = include_str!("../../README.md");
        assert!(readme.contains(&markdown()), "README's attribute map differs: paste attribute_map::markdown()");
    }
}
