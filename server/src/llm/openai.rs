//! The OpenAI Chat Completions protocol, as the model gateway reads it: how much output a
//! request may be charged for, what an answer reports (whole, or streamed as
//! `chat.completion.chunk`s), and which chunk is the usage-only one the model gateway asked for
//! on the client's behalf.

use serde_json::Value;

use super::{
    answer::{Answer, CallUsage, int},
    count,
};
use crate::billing::holds::DEFAULT_MAX_OUTPUT_TOKENS;

/// The most choices a request may ask for (`n`, and the legacy `best_of`): OpenAI's own
/// limit.
pub const MAX_CHOICES: i64 = 128;

/// The most output tokens a request may be charged for, over all its choices: what its
/// hold counts at the output price (its prompt is counted apart, once: OpenAI charges the
/// prompt once whatever `n` is). `Err` is the message of a 400 for a field that is not a
/// count the API takes, so a bad value never reaches the upstream.
///
/// - **Per choice:** `max_completion_tokens` or `max_tokens` (the larger when a request
///   sets both: OpenAI-compatible servers differ on which one wins), else
///   [`DEFAULT_MAX_OUTPUT_TOKENS`]. A reasoning model's reasoning tokens are output tokens
///   within that bound, so `reasoning_effort` changes nothing here.
/// - **Choices:** `n`, a whole number from 1 to [`MAX_CHOICES`] (1 when absent or null),
///   as OpenAI takes it: it refuses `n` below 1 and above 128, so roost refuses those too
///   (400 `invalid_argument`) rather than bounding them, since a clamped value would still
///   reach the upstream as sent. Each choice may be as long as the bound above, and the
///   upstream reports (and roost charges) the output of all of them. `best_of`, a field of
///   the legacy Completions API that OpenAI's Chat Completions refuses but some
///   OpenAI-compatible servers take, generates that many candidates: it is checked the same
///   way and the larger of the two counts.
/// - **Predicted output** (`prediction`): rejected predicted tokens are billed as output,
///   so each choice may also be charged for the prediction's text (its bytes bound its
///   tokens).
///
/// `logprobs` and `top_logprobs` change what an answer carries, not how many tokens it is
/// charged for.
pub fn max_output_tokens(request: &Value) -> Result<i64, String> {
    let completion = count(request, "max_completion_tokens", i64::MAX)?;
    let legacy = count(request, "max_tokens", i64::MAX)?;
    let per_choice = completion.max(legacy).unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
    let choices = count(request, "n", MAX_CHOICES)?.max(count(request, "best_of", MAX_CHOICES)?).unwrap_or(1);
    let predicted = request
        .get("prediction")
        .filter(|p| !p.is_null())
        .map_or(0, |p| i64::try_from(p.to_string().len()).unwrap_or(i64::MAX));
    Ok(per_choice.saturating_add(predicted).saturating_mul(choices))
}

/// Whether the client asked for the usage chunk of a stream itself.
pub fn wants_usage(request: &Value) -> bool {
    request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true))
}

/// Asks a streamed request's upstream for the usage chunk (which the model gateway meters by).
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
    fn the_output_a_call_may_be_charged_for_counts_every_choice() {
        let chat = |extra: Value| {
            let mut request = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
            request.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            max_output_tokens(&request)
        };
        assert_eq!(chat(json!({})), Ok(DEFAULT_MAX_OUTPUT_TOKENS), "no bound: the default cap");
        assert_eq!(chat(json!({"max_tokens": 100})), Ok(100));
        assert_eq!(chat(json!({"max_completion_tokens": 300})), Ok(300));
        assert_eq!(chat(json!({"max_tokens": 100, "max_completion_tokens": 300})), Ok(300), "the larger of both");
        assert_eq!(chat(json!({"max_tokens": 300, "max_completion_tokens": 100})), Ok(300));
        assert_eq!(chat(json!({"max_tokens": null, "n": null})), Ok(DEFAULT_MAX_OUTPUT_TOKENS), "null is unset");
        // Every choice may be as long as the bound allows.
        assert_eq!(chat(json!({"max_tokens": 100, "n": 8})), Ok(800));
        assert_eq!(chat(json!({"n": 3})), Ok(3 * DEFAULT_MAX_OUTPUT_TOKENS));
        assert_eq!(chat(json!({"max_tokens": 100, "n": 128})), Ok(12_800), "OpenAI's largest n");
        assert_eq!(chat(json!({"max_tokens": 100, "n": 2, "best_of": 5})), Ok(500), "best_of generates more");
        assert_eq!(chat(json!({"max_tokens": 100, "n": 4, "best_of": 1})), Ok(400));
        assert_eq!(chat(json!({"max_tokens": 100, "logprobs": true, "top_logprobs": 20})), Ok(100));
        let prediction = json!({"type": "content", "content": "x".repeat(50)});
        let predicted = i64::try_from(prediction.to_string().len()).unwrap();
        assert_eq!(chat(json!({"max_tokens": 100, "prediction": prediction})), Ok(100 + predicted));
        assert_eq!(chat(json!({"max_tokens": u64::MAX, "n": 2})), Ok(i64::MAX), "saturates");

        // Counts the API does not take are refused, saying what they must be.
        for (extra, message) in [
            (json!({"n": 0}), "`n` must be a whole number from 1 to 128 (got 0)"),
            (json!({"n": -3}), "`n` must be a whole number from 1 to 128 (got -3)"),
            (json!({"n": 129}), "`n` must be a whole number from 1 to 128 (got 129)"),
            (json!({"n": 1_000_000_000_000_u64}), "`n` must be a whole number from 1 to 128 (got 1000000000000)"),
            (json!({"n": 2.5}), "`n` must be a whole number from 1 to 128 (got 2.5)"),
            (json!({"n": 2.0}), "`n` must be a whole number from 1 to 128 (got 2.0)"),
            (json!({"n": "8"}), "`n` must be a whole number from 1 to 128 (got \"8\")"),
            (json!({"n": true}), "`n` must be a whole number from 1 to 128 (got true)"),
            (json!({"best_of": 0}), "`best_of` must be a whole number from 1 to 128 (got 0)"),
            (json!({"max_tokens": 0}), "`max_tokens` must be a whole number of at least 1 (got 0)"),
            (json!({"max_tokens": -1}), "`max_tokens` must be a whole number of at least 1 (got -1)"),
            (
                json!({"max_completion_tokens": 1.5}),
                "`max_completion_tokens` must be a whole number of at least 1 (got 1.5)",
            ),
        ] {
            assert_eq!(chat(extra.clone()), Err(message.to_owned()), "{extra}");
        }
        let long = "9".repeat(100);
        let refused = chat(json!({"n": long})).unwrap_err();
        assert!(refused.ends_with(&format!("(got \"{}…)", "9".repeat(39))), "{refused}");
    }

    #[test]
    fn a_calls_estimate_counts_the_prompt_once_and_the_output_of_every_choice() {
        use crate::billing::{holds::estimate_nanocents, prices::ModelPrice};
        // 1 cent a prompt token, 2 cents an output token.
        let price = ModelPrice { input: 1_000_000_000, output: 2_000_000_000, cache_read: 0, cache_write: 0 };
        let request = |n: i64| json!({"model": "m", "max_tokens": 1000, "n": n, "messages": []});
        let estimate = |n| {
            let request = request(n);
            let prompt_bytes = request.to_string().len();
            (prompt_bytes, estimate_nanocents(price, prompt_bytes, max_output_tokens(&request).unwrap()))
        };
        let cent = crate::billing::prices::NANOCENTS_PER_CENT;
        let (bytes, one) = estimate(1);
        assert_eq!(one, (i64::try_from(bytes).unwrap() + 2_000) * cent);
        let (bytes, eight) = estimate(8);
        assert_eq!(eight, (i64::try_from(bytes).unwrap() + 8 * 2_000) * cent, "eight choices, one prompt");
    }

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
