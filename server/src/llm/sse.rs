//! Server-sent events as they pass through the model gateway: the byte stream is cut into whole
//! events (each ends with a blank line), so each goes to the client the moment its last
//! line arrives, unchanged, and the model gateway can read the ones that carry usage.

use bytes::{Bytes, BytesMut};

/// Cuts a byte stream into whole SSE events.
#[derive(Debug, Default)]
pub struct EventSplitter {
    pending: BytesMut,
    /// Where the search for the next boundary resumes (what is before it has none).
    scanned: usize,
}

impl EventSplitter {
    /// Adds what arrived; the events it completed, each with its blank line, in order.
    pub fn push(&mut self, chunk: &[u8], events: &mut Vec<Bytes>) {
        self.pending.extend_from_slice(chunk);
        while let Some(end) = boundary(&self.pending, self.scanned) {
            events.push(self.pending.split_to(end).freeze());
            self.scanned = 0;
        }
        // A boundary may straddle the next chunk: look again from three bytes back.
        self.scanned = self.pending.len().saturating_sub(3);
    }

    /// What is left once the stream ended (an event without its blank line), if anything.
    pub fn rest(&mut self) -> Option<Bytes> {
        (!self.pending.is_empty()).then(|| self.pending.split().freeze())
    }
}

/// The end (exclusive) of the first event in `buf`: just past a blank line (`\n\n`,
/// `\r\n\r\n` or `\r\r`), searching from `from`.
fn boundary(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        match (buf[i], buf[i + 1]) {
            (b'\n', b'\n') | (b'\r', b'\r') => return Some(i + 2),
            (b'\r', b'\n') if buf.get(i + 2..i + 4) == Some(b"\r\n") => return Some(i + 4),
            _ => i += 1,
        }
    }
    None
}

/// An event's name (`event:`) and its data (`data:` lines joined with newlines).
pub fn parse(event: &[u8]) -> (Option<&str>, String) {
    let text = std::str::from_utf8(event).unwrap_or_default();
    let mut name = None;
    let mut data = String::new();
    for line in text.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => name = Some(value),
            "data" => {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
            _ => {}
        }
    }
    (name, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_whole_wherever_the_chunks_break() {
        let stream = b"event: a\ndata: {\"x\":1}\n\ndata: 2\r\n\r\ndata: 3\n\n: comment\n\ndata: tail";
        for size in 1..stream.len() {
            let mut splitter = EventSplitter::default();
            let mut events = Vec::new();
            for chunk in stream.chunks(size) {
                splitter.push(chunk, &mut events);
            }
            let cut: Vec<&[u8]> = events.iter().map(|e| e.as_ref()).collect();
            assert_eq!(
                cut,
                vec![&b"event: a\ndata: {\"x\":1}\n\n"[..], b"data: 2\r\n\r\n", b"data: 3\n\n", b": comment\n\n"],
                "chunks of {size}"
            );
            assert_eq!(splitter.rest().as_deref(), Some(&b"data: tail"[..]));
        }
        assert_eq!(parse(b"event: a\ndata: {\"x\":1}\n\n"), (Some("a"), "{\"x\":1}".to_owned()));
        assert_eq!(parse(b"data: 1\ndata: 2\n\n"), (None, "1\n2".to_owned()));
    }
}
