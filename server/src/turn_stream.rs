//! What a turn reports while it runs, for the callers that stream it
//! (`AgentService.StreamMessage`, the REST SSE answer, MCP progress, the web chat).
//!
//! Two sources feed one turn's events, so neither needs to know the other:
//! - the **runtime** writes the reply's text as it has it ([`TurnStream::delta`]): the
//!   `assistant` runtime from the model's stream, `process` runtimes from their own
//!   `text/event-stream` answer, OpenClaw and Hermes from their streaming chat endpoint,
//!   `echo` word by word. A runtime that does not stream writes nothing, and the turn
//!   sends its whole reply as one delta when it ends ([`TurnStream::deltas_sent`]);
//! - the **model gateway** reports tool steps, because every model call of a hosted agent
//!   passes through it: a tool step starts when a model's answer asks for a tool, and ends
//!   when the runtime's next call carries that tool's result ([`ToolSteps`]). So any
//!   runtime's tools show, whatever its own API says about them.
//!
//! Events go through an unbounded channel: what a turn can write is bounded by its reply
//! and its model calls, which the turn holds anyway, and a slow reader must never hold the
//! runtime or the model gateway back. A turn nobody streams has no channel, and writing is free.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use serde_json::Value;
use tokio::sync::mpsc;

/// The most of a tool's arguments or result an event carries (the span keeps the record).
pub const MAX_TOOL_TEXT: usize = 4 * 1024;

/// One thing a turn reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEvent {
    /// More of the reply's text.
    Delta(String),
    /// A tool step started or ended.
    Tool(ToolStep),
}

/// A tool step: sent once when the model asks for the tool, and again, with its result and
/// duration, when the runtime hands the result back to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolStep {
    /// The tool call's id, as the model gave it (the same in both events).
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments (JSON text as the model wrote them, cut at [`MAX_TOOL_TEXT`]).
    pub arguments: String,
    /// Whether the step has ended.
    pub finished: bool,
    /// What the tool returned (cut at [`MAX_TOOL_TEXT`]); empty until it ended.
    pub result: String,
    /// From the model asking to the result going back, once it ended.
    pub duration_ms: i64,
}

/// Where a turn's events go: nowhere when no caller streams the turn. Cheap to clone.
#[derive(Clone, Default)]
pub struct TurnStream(Option<Arc<Sink>>);

impl std::fmt::Debug for TurnStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "TurnStream(streamed)" } else { "TurnStream(none)" })
    }
}

struct Sink {
    tx: mpsc::UnboundedSender<TurnEvent>,
    /// Whether the runtime wrote any text itself.
    deltas: AtomicBool,
}

impl TurnStream {
    /// Events for a caller that streams: the handle and what reads them.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<TurnEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(Some(Arc::new(Sink { tx, deltas: AtomicBool::new(false) }))), rx)
    }

    /// Whether someone reads them: a runtime may choose to stream only then.
    pub fn streaming(&self) -> bool {
        self.0.as_ref().is_some_and(|sink| !sink.tx.is_closed())
    }

    /// More reply text (empty text is not sent).
    pub fn delta(&self, text: &str) {
        if let Some(sink) = &self.0
            && !text.is_empty()
        {
            sink.deltas.store(true, Ordering::Relaxed);
            let _ = sink.tx.send(TurnEvent::Delta(text.to_owned()));
        }
    }

    /// A tool step.
    pub fn tool(&self, step: ToolStep) {
        if let Some(sink) = &self.0 {
            let _ = sink.tx.send(TurnEvent::Tool(step));
        }
    }

    /// Whether any delta was sent.
    pub fn deltas_sent(&self) -> bool {
        self.0.as_ref().is_some_and(|sink| sink.deltas.load(Ordering::Relaxed))
    }
}

/// A turn's tool steps as its model calls reveal them: started by an answer's tool calls,
/// ended by the next request carrying their results.
#[derive(Default)]
pub struct ToolSteps {
    open: Mutex<HashMap<String, (ToolStep, Instant)>>,
}

impl ToolSteps {
    /// A model answered asking for `calls` (id, name, arguments): each starts a step.
    pub fn asked(&self, events: &TurnStream, calls: impl IntoIterator<Item = (String, String, String)>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for (id, name, arguments) in calls {
            if id.is_empty() || open.contains_key(&id) {
                continue;
            }
            let step = ToolStep { id: id.clone(), name, arguments: cut(&arguments), ..ToolStep::default() };
            events.tool(step.clone());
            open.insert(id, (step, Instant::now()));
        }
    }

    /// The runtime's next model call carries `results` (tool call id, what the tool said):
    /// each ends its step. Some runtimes rewrite the ids the model gave (OpenClaw makes them
    /// fit every provider's rules), so a result whose id is of no open step ends the
    /// oldest step still open; with none open, it is ignored (an older turn's, a repeat).
    pub fn answered(&self, events: &TurnStream, results: impl IntoIterator<Item = (String, String)>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.is_empty() {
            return;
        }
        let mut unmatched = Vec::new();
        for (id, result) in results {
            match open.remove(&id) {
                Some(step) => finish(events, step, &result),
                None => unmatched.push(result),
            }
        }
        for result in unmatched {
            let Some(oldest) = open.iter().min_by_key(|(_, (_, started))| *started).map(|(id, _)| id.clone()) else {
                break;
            };
            if let Some(step) = open.remove(&oldest) {
                finish(events, step, &result);
            }
        }
    }
}

/// Ends a step with what its tool said.
fn finish(events: &TurnStream, (mut step, started): (ToolStep, Instant), result: &str) {
    step.finished = true;
    step.result = cut(result);
    step.duration_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    events.tool(step);
}

/// The tool results an OpenAI Chat Completions or Anthropic Messages request carries: its
/// `tool` messages, and `tool_result` blocks of its user messages.
pub fn tool_results(request: &Value) -> Vec<(String, String)> {
    let Some(messages) = request.get("messages").and_then(Value::as_array) else { return Vec::new() };
    let mut results = Vec::new();
    // Results follow the answer that asked for them: only the messages after the last
    // assistant message can end a step now.
    let after = messages.iter().rposition(|m| m["role"] == "assistant").map_or(0, |i| i + 1);
    for message in &messages[after..] {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap_or_default();
            results.push((id.to_owned(), text_of(&message["content"])));
        } else if let Some(blocks) = message["content"].as_array() {
            for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                results.push((id.to_owned(), text_of(&block["content"])));
            }
        }
    }
    results
}

/// A message's content as text: a string, or its parts' text joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `text` cut to [`MAX_TOOL_TEXT`] bytes at a character boundary.
fn cut(text: &str) -> String {
    if text.len() <= MAX_TOOL_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_TOOL_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_step_starts_with_the_answer_and_ends_with_the_next_request() {
        let (events, mut rx) = TurnStream::channel();
        let steps = ToolSteps::default();
        steps.asked(&events, [("call_1".to_owned(), "weather".to_owned(), r#"{"city":"Paris"}"#.to_owned())]);
        let request = json!({"messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "tool_calls": [{"id": "call_1"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_forged", "content": "x"},
        ]});
        steps.answered(&events, tool_results(&request));
        // The same request again (a retry) ends nothing twice.
        steps.answered(&events, tool_results(&request));
        let started = rx.try_recv().unwrap();
        let TurnEvent::Tool(started) = started else { panic!("{started:?}") };
        assert_eq!((started.name.as_str(), started.finished), ("weather", false));
        let TurnEvent::Tool(ended) = rx.try_recv().unwrap() else { panic!() };
        assert_eq!((ended.id.as_str(), ended.result.as_str(), ended.finished), ("call_1", "sunny", true));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn anthropic_tool_results_are_read_from_user_blocks() {
        let request = json!({"messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                           "content": [{"type": "text", "text": "42"}]}]},
        ]});
        assert_eq!(tool_results(&request), vec![("toolu_1".to_owned(), "42".to_owned())]);
    }

    #[test]
    fn nobody_streaming_costs_nothing() {
        let events = TurnStream::default();
        events.delta("x");
        assert!(!events.streaming() && !events.deltas_sent());
        assert_eq!(cut(&"é".repeat(MAX_TOOL_TEXT)).len(), MAX_TOOL_TEXT + "…".len());
    }
}
