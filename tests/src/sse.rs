//! A minimal Server-Sent Events client over reqwest, as a browser's EventSource reads a
//! stream: `id:`, `event:`, `data:` fields, comments, blank-line dispatch.

use std::time::Duration;

use serde_json::Value;

/// One dispatched event, or a comment line.
#[derive(Debug, Clone, PartialEq)]
pub enum SseItem {
    /// An event.
    Event {
        /// `id:`.
        id: Option<String>,
        /// `event:` (`message` when absent).
        event: String,
        /// `data:` lines joined by newlines.
        data: String,
    },
    /// A `:` comment (a keepalive).
    Comment(String),
}

impl SseItem {
    /// The data as JSON (panics on a comment or non-JSON data).
    #[track_caller]
    pub fn json(&self) -> Value {
        match self {
            Self::Event { data, .. } => serde_json::from_str(data).expect("JSON data"),
            Self::Comment(c) => panic!("expected an event, got the comment {c:?}"),
        }
    }
}

/// An open stream.
#[derive(Debug)]
pub struct SseClient {
    /// The response's headers.
    pub headers: reqwest::header::HeaderMap,
    response: reqwest::Response,
    buffer: String,
    pending: (Option<String>, Option<String>, Vec<String>),
}

impl SseClient {
    /// Opens `request`; `Err` is the non-200 answer (status and JSON body).
    pub async fn open(request: reqwest::RequestBuilder) -> Result<Self, (u16, Value)> {
        let response = request.header("accept", "text/event-stream").send().await.expect("connect");
        if response.status() != 200 {
            let status = response.status().as_u16();
            return Err((status, response.json().await.unwrap_or(Value::Null)));
        }
        Ok(Self { headers: response.headers().clone(), response, buffer: String::new(), pending: Default::default() })
    }

    /// The next event or comment, or `None` when nothing arrives within `wait` (or the
    /// stream ended).
    pub async fn next(&mut self, wait: Duration) -> Option<SseItem> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buffer.find('\n') {
                let line: String = self.buffer.drain(..=end).collect();
                if let Some(item) = self.line(line.trim_end_matches(['\n', '\r'])) {
                    return Some(item);
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk()).await.ok()?.ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next event, skipping comments.
    pub async fn next_event(&mut self, wait: Duration) -> Option<SseItem> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match self.next(deadline.saturating_duration_since(tokio::time::Instant::now())).await? {
                SseItem::Comment(_) => continue,
                event => return Some(event),
            }
        }
    }

    fn line(&mut self, line: &str) -> Option<SseItem> {
        if line.is_empty() {
            let (id, event, data) = std::mem::take(&mut self.pending);
            if data.is_empty() {
                return None;
            }
            return Some(SseItem::Event {
                id,
                event: event.unwrap_or_else(|| "message".into()),
                data: data.join("\n"),
            });
        }
        if let Some(comment) = line.strip_prefix(':') {
            return Some(SseItem::Comment(comment.trim().to_owned()));
        }
        let (field, value) = line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "id" => self.pending.0 = Some(value.to_owned()),
            "event" => self.pending.1 = Some(value.to_owned()),
            "data" => self.pending.2.push(value.to_owned()),
            _ => {}
        }
        None
    }
}
