//! Reading a runtime's streamed answer: a `text/event-stream` body cut into events as its
//! bytes arrive, and the OpenAI Chat Completions chunks the `assistant` runtime and the
//! packaged runtimes' chat endpoints send.

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use serde_json::Value;

use crate::llm::sse;

/// The most a streamed reply may hold before roost stops reading it (as a whole answer's
/// body would be refused past it).
pub const MAX_STREAMED_REPLY: usize = 16 << 20;

/// Calls `on_event(name, data)` for each event of `body` as it completes, until the body
/// ends or `on_event` says stop (`false`). The error says how the body broke.
pub async fn each_event<E: std::fmt::Display>(
    body: impl Stream<Item = Result<Bytes, E>>,
    mut on_event: impl FnMut(Option<&str>, &str) -> bool,
) -> Result<(), String> {
    let mut body = std::pin::pin!(body);
    let mut splitter = sse::EventSplitter::default();
    let mut events = Vec::new();
    let mut read = 0usize;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| format!("the runtime's stream broke: {e}"))?;
        read += chunk.len();
        if read > MAX_STREAMED_REPLY * 2 {
            return Err(format!("the runtime's stream passed {} MiB", (MAX_STREAMED_REPLY * 2) >> 20));
        }
        splitter.push(&chunk, &mut events);
        for event in events.drain(..) {
            let (name, data) = sse::parse(&event);
            if !on_event(name, &data) {
                return Ok(());
            }
        }
    }
    if let Some(rest) = splitter.rest() {
        let (name, data) = sse::parse(&rest);
        on_event(name, &data);
    }
    Ok(())
}

/// What one OpenAI Chat Completions chunk says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Reply text it adds.
    pub text: String,
    /// The model that answers, when it says.
    pub model: Option<String>,
    /// An error the stream reports instead of a chunk.
    pub error: Option<String>,
    /// `[DONE]`: the stream's end.
    pub done: bool,
}

/// Reads a chunk's data (`[DONE]`, a chunk, or an `{"error": …}` object); anything else
/// adds nothing.
pub fn openai_chunk(data: &str) -> Chunk {
    if data.trim() == "[DONE]" {
        return Chunk { done: true, ..Chunk::default() };
    }
    let Ok(value) = serde_json::from_str::<Value>(data) else { return Chunk::default() };
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        let said = error["message"].as_str().or_else(|| error.as_str()).unwrap_or("an error");
        return Chunk { error: Some(said.chars().take(300).collect()), ..Chunk::default() };
    }
    let content = &value["choices"][0]["delta"]["content"];
    let text = match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    };
    let model = value["model"].as_str().filter(|m| !m.is_empty()).map(str::to_owned);
    Chunk { text, model, ..Chunk::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_read_as_they_complete() {
        let parts: Vec<Result<Bytes, String>> = vec![
            Ok(Bytes::from_static(b"event: delta\ndata: {\"text\":\"Hel")),
            Ok(Bytes::from_static(b"lo\"}\n\ndata: [DONE]\n\n")),
        ];
        let mut seen = Vec::new();
        each_event(futures::stream::iter(parts), |name, data| {
            seen.push((name.map(str::to_owned), data.to_owned()));
            true
        })
        .await
        .unwrap();
        assert_eq!(seen[0], (Some("delta".to_owned()), "{\"text\":\"Hello\"}".to_owned()));
        assert!(openai_chunk(&seen[1].1).done);
    }

    #[test]
    fn chunks_say_their_text_model_and_errors() {
        let chunk = openai_chunk(r#"{"model":"m","choices":[{"delta":{"content":"Hi"}}]}"#);
        assert_eq!((chunk.text.as_str(), chunk.model.as_deref()), ("Hi", Some("m")));
        assert_eq!(openai_chunk(r#"{"error":{"message":"boom"}}"#).error.as_deref(), Some("boom"));
        assert_eq!(openai_chunk("garbage"), Chunk::default());
    }
}
