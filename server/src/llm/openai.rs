//! The OpenAI Chat Completions protocol, as the gateway reads it: where a request bounds
//! its output, what an answer reports (whole, or streamed as `chat.completion.chunk`s), and
//! which chunk is the usage-only one the gateway asked for on the client's behalf.

use serde_json::Value;

use super::answer::{Answer, CallUsage, int};

/// The most output tokens a request allows, if it says.
pub fn max_output_tokens(request: &Value) -> Option<i64> {
    ["max_completion_tokens", "max_tokens"].iter().find_map(|key| request.get(*key).and_then(Value::as_i64))
}

/// Whether the client asked for the usage chunk of a stream itself.
pub fn wants_usage(request: &Value) -> bool {
    request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true))
}

/// Asks a streamed request's upstream for the usage chunk (which the gateway meters by).
pub fn ask_usage(request: &mut Value) {
    if let Some(object) = request.as_object_mut() {
        let options = object.entry("stream_options").or_insert_with(|| Value::Object(Default::default()));
        if let Some(options) = options.as_object_mut() {
            options.insert("include_usage".to_owned(), Value::Bool(true));
        } else {
            *options = serde_json::json!({"include_usage": true});
        }
    }
}

/// Usage as OpenAI reports it (`prompt_tokens` include the cached ones).
fn usage(value: &Value) -> Option<CallUsage> {
    value.is_object().then(|| CallUsage {
        input_tokens: int(value, "prompt_tokens"),
        output_tokens: int(value, "completion_tokens"),
        cache_read_tokens: value.get("prompt_tokens_details").map_or(0, |d| int(d, "cached_tokens")),
        cache_write_tokens: 0,
    })
}

/// Reads a whole (not streamed) answer.
pub fn read_answer(body: &Value, answer: &mut Answer) {
    Answer::note(&mut answer.model, body.get("model"));
    Answer::note(&mut answer.id, body.get("id"));
    if let Some(reported) = body.get("usage").and_then(usage) {
        answer.usage = Some(reported);
    }
    for choice in body.get("choices").and_then(Value::as_array).into_iter().flatten() {
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            answer.finish_reasons.push(reason.to_owned());
        }
        let message = &choice["message"];
        if let Some(text) = message.get("content").and_then(Value::as_str) {
            answer.push_text(text);
        }
        for (index, call) in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let slot = answer.tool_call(index);
            slot.id = call["id"].as_str().unwrap_or_default().to_owned();
            slot.name = call["function"]["name"].as_str().unwrap_or_default().to_owned();
            slot.arguments = call["function"]["arguments"].as_str().unwrap_or_default().to_owned();
        }
    }
}

/// Reads one streamed event's data; false when the event is the usage-only chunk and the
/// client did not ask for it (so it is not forwarded).
pub fn read_event(data: &str, client_wants_usage: bool, answer: &mut Answer) -> bool {
    if data == "[DONE]" || data.is_empty() {
        return true;
    }
    let Ok(chunk) = serde_json::from_str::<Value>(data) else { return true };
    if let Some(error) = chunk.get("error") {
        answer.error = Some(error.get("message").and_then(Value::as_str).unwrap_or("upstream error").to_owned());
        return true;
    }
    Answer::note(&mut answer.model, chunk.get("model"));
    Answer::note(&mut answer.id, chunk.get("id"));
    if let Some(reported) = chunk.get("usage").and_then(usage) {
        answer.usage = Some(reported);
    }
    let choices = chunk.get("choices").and_then(Value::as_array);
    for choice in choices.into_iter().flatten() {
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            answer.finish_reasons.push(reason.to_owned());
        }
        let delta = &choice["delta"];
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            answer.push_text(text);
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            let slot = answer.tool_call(index);
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                slot.id = id.to_owned();
            }
            if let Some(name) = call["function"].get("name").and_then(Value::as_str) {
                slot.name.push_str(name);
            }
            if let Some(piece) = call["function"].get("arguments").and_then(Value::as_str) {
                slot.arguments.push_str(piece);
            }
        }
    }
    let usage_only = choices.is_some_and(Vec::is_empty) && chunk.get("usage").is_some_and(Value::is_object);
    client_wants_usage || !usage_only
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_stream_is_read_and_the_usage_chunk_kept_from_those_who_did_not_ask() {
        let mut answer = Answer::default();
        let first = json!({"id": "c1", "model": "gpt-4o-mini-2024", "choices": [{"index": 0, "delta": {"content": "Hi"}}], "usage": null});
        assert!(read_event(&first.to_string(), false, &mut answer));
        let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f", "arguments": "{\"a\""}}]}}]});
        assert!(read_event(&call.to_string(), false, &mut answer));
        let more = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}, "finish_reason": "tool_calls"}]});
        assert!(read_event(&more.to_string(), false, &mut answer));
        let usage = json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 2}}});
        assert!(!read_event(&usage.to_string(), false, &mut answer), "not forwarded to a client that did not ask");
        assert!(read_event(&usage.to_string(), true, &mut answer));
        assert!(read_event("[DONE]", false, &mut answer));
        assert_eq!(answer.text, "Hi");
        assert_eq!(answer.model.as_deref(), Some("gpt-4o-mini-2024"));
        assert_eq!(answer.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(answer.finish_reasons, vec!["tool_calls"]);
        assert_eq!(
            answer.usage,
            Some(CallUsage { input_tokens: 9, output_tokens: 4, cache_read_tokens: 2, cache_write_tokens: 0 })
        );

        let mut request = json!({"model": "m", "stream": true});
        assert!(!wants_usage(&request));
        ask_usage(&mut request);
        assert!(wants_usage(&request));
    }
}
