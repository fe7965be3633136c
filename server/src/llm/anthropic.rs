//! The Anthropic Messages protocol, as the model gateway reads it: what an answer reports (whole,
//! or streamed as `message_start` … `message_delta` events). Anthropic's `input_tokens`
//! leave out the cache's; the model gateway adds them back (the GenAI convention).

use serde_json::Value;

use super::{
    answer::{Answer, CallUsage, int},
    count,
};
use crate::billing::holds::DEFAULT_MAX_OUTPUT_TOKENS;

/// The most output tokens a request may be charged for: its `max_tokens` (which the API
/// requires, and which bounds extended thinking too: `budget_tokens` must be below it), a
/// whole number of at least 1, else a 400's message; [`DEFAULT_MAX_OUTPUT_TOKENS`] when it
/// is missing (the upstream refuses such a request). Messages has no `n`: one answer per
/// call.
pub fn max_output_tokens(request: &Value) -> Result<i64, String> {
    Ok(count(request, "max_tokens", i64::MAX)?.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS))
}

/// Merges a usage object into what is known: a later report of a field replaces an earlier
/// one (`message_delta` counts output cumulatively).
fn merge_usage(value: &Value, known: Option<CallUsage>) -> Option<CallUsage> {
    if !value.is_object() {
        return known;
    }
    let mut usage = known.unwrap_or_default();
    let (read, write) = (
        value.get("cache_read_input_tokens").and_then(Value::as_i64),
        value.get("cache_creation_input_tokens").and_then(Value::as_i64),
    );
    if let Some(read) = read {
        usage.cache_read_tokens = read.max(0);
    }
    if let Some(write) = write {
        usage.cache_write_tokens = write.max(0);
    }
    if value.get("input_tokens").is_some() {
        usage.input_tokens = int(value, "input_tokens") + usage.cache_read_tokens + usage.cache_write_tokens;
    }
    if value.get("output_tokens").is_some() {
        usage.output_tokens = int(value, "output_tokens");
    }
    Some(usage)
}

fn read_block(block: &Value, index: usize, answer: &mut Answer) {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => answer.push_text(block.get("text").and_then(Value::as_str).unwrap_or_default()),
        Some("tool_use") => {
            let call = answer.tool_call(index);
            call.id = block["id"].as_str().unwrap_or_default().to_owned();
            call.name = block["name"].as_str().unwrap_or_default().to_owned();
            if let Some(input) = block.get("input").filter(|i| i.as_object().is_some_and(|o| !o.is_empty())) {
                call.arguments = input.to_string();
            }
        }
        _ => {}
    }
}

/// Reads a whole (not streamed) answer.
pub fn read_answer(body: &Value, answer: &mut Answer) {
    Answer::note(&mut answer.model, body.get("model"));
    Answer::note(&mut answer.id, body.get("id"));
    if let Some(usage) = body.get("usage") {
        answer.usage = merge_usage(usage, None);
    }
    if let Some(reason) = body.get("stop_reason").and_then(Value::as_str) {
        answer.finish_reasons.push(reason.to_owned());
    }
    let mut tools = 0;
    for block in body.get("content").and_then(Value::as_array).into_iter().flatten() {
        read_block(block, tools, answer);
        if block["type"] == "tool_use" {
            tools += 1;
        }
    }
}

/// Reads one streamed event (every event is forwarded: there is nothing to hold back).
pub fn read_event(name: Option<&str>, data: &str, tool_blocks: &mut Vec<usize>, answer: &mut Answer) {
    let Ok(event) = serde_json::from_str::<Value>(data) else { return };
    let kind = name.or_else(|| event.get("type").and_then(Value::as_str)).unwrap_or_default();
    match kind {
        "message_start" => {
            let message = &event["message"];
            Answer::note(&mut answer.model, message.get("model"));
            Answer::note(&mut answer.id, message.get("id"));
            answer.usage = merge_usage(&message["usage"], answer.usage);
        }
        "content_block_start" => {
            let block = &event["content_block"];
            let at = event.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            if block["type"] == "tool_use" {
                tool_blocks.push(at);
            }
            let tool = tool_blocks.iter().position(|b| *b == at).unwrap_or(0);
            read_block(block, tool, answer);
        }
        "content_block_delta" => {
            let delta = &event["delta"];
            let at = event.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            match delta.get("type").and_then(Value::as_str) {
                Some("text_delta") => answer.push_text(delta["text"].as_str().unwrap_or_default()),
                Some("input_json_delta") => {
                    if let Some(tool) = tool_blocks.iter().position(|b| *b == at) {
                        answer.tool_call(tool).arguments.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                }
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(reason) = event["delta"].get("stop_reason").and_then(Value::as_str) {
                answer.finish_reasons.push(reason.to_owned());
            }
            answer.usage = merge_usage(&event["usage"], answer.usage);
        }
        "error" => {
            answer.error = Some(event["error"]["message"].as_str().unwrap_or("upstream error").to_owned());
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_message_may_be_charged_for_its_max_tokens() {
        assert_eq!(max_output_tokens(&json!({"model": "m", "max_tokens": 256})), Ok(256));
        assert_eq!(max_output_tokens(&json!({"model": "m"})), Ok(DEFAULT_MAX_OUTPUT_TOKENS));
        assert_eq!(max_output_tokens(&json!({"model": "m", "max_tokens": 256, "n": 8})), Ok(256), "no n in Messages");
        assert_eq!(
            max_output_tokens(&json!({"model": "m", "max_tokens": -1})),
            Err("`max_tokens` must be a whole number of at least 1 (got -1)".to_owned())
        );
    }

    #[test]
    fn a_stream_is_read_with_cache_tokens_counted_in_the_input() {
        let mut answer = Answer::default();
        let mut blocks = Vec::new();
        let events = [
            (
                "message_start",
                json!({"message": {"id": "msg_1", "model": "claude-x", "usage": {"input_tokens": 13, "output_tokens": 1, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 4}}}),
            ),
            ("content_block_start", json!({"index": 0, "content_block": {"type": "text", "text": ""}})),
            ("content_block_delta", json!({"index": 0, "delta": {"type": "text_delta", "text": "Hello"}})),
            (
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "tool_use", "id": "tu", "name": "f", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            ),
            ("content_block_delta", json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}})),
            ("message_delta", json!({"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})),
        ];
        for (name, data) in events {
            read_event(Some(name), &data.to_string(), &mut blocks, &mut answer);
        }
        assert_eq!(
            answer.usage,
            Some(CallUsage { input_tokens: 20, output_tokens: 9, cache_read_tokens: 4, cache_write_tokens: 3 })
        );
        assert_eq!((answer.text.as_str(), answer.tool_calls[0].arguments.as_str()), ("Hello", "{\"a\":1}"));
        assert_eq!(answer.finish_reasons, vec!["tool_use"]);
    }
}
