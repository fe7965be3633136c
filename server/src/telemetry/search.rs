//! Full-text search documents: what ingest writes so that q/1 `search` finds a
//! conversation by what was said in it (`Lisbon` finds the trip planner's session).
//!
//! Decisions:
//! - **What is a document.** One per span that carries conversation content (its new
//!   messages with their tool calls, or a tool call's arguments and result), one per log
//!   record with a body (or with the messages its content became), one per custom-run or
//!   hosted-turn event with data, and one per trace and ingest batch holding its spans'
//!   names and failed spans' status messages. Fewer, larger documents than one per message
//!   or per span keep the index small and ingest fast; a hit still names the span, record
//!   or event it came from, and every document names its session and trace.
//! - **Words** are `roost_proto::search`'s: SQLite's FTS5 `unicode61 remove_diacritics 2`
//!   tokenizer splits text the same way, and PostgreSQL is given the words roost split
//!   ([`tsvector`]). Words longer than `MAX_WORD` characters (hashes, base64) are left
//!   out of PostgreSQL's index.
//! - **No second copy.** A document made only of messages (a model call's new messages,
//!   a log record's) is indexed but keeps no text: the messages are stored once
//!   (`message_texts`), and a hit's snippet is cut from them. SQLite's index is a
//!   contentless FTS5 table, `search_words` (migration 0034), under the document's id;
//!   PostgreSQL's is the `words` column.
//! - **Privacy.** With `--capture-content off` nothing is indexed, not even span names:
//!   the index is content, and the operator said none is kept.
//! - **Same transaction.** Documents are inserted with the rows they come from
//!   ([`SearchTx`], called from the ingest writer and the turn recorder), so what is
//!   acknowledged is searchable, and retention deletes both by the same time bound.
//! - **Stores from before search.** Their conversations are indexed once by
//!   [`backfill`], which `roost serve` runs in the background while content capture is
//!   on: the messages table, newest first, one document per message. Span names, tool
//!   calls' attributes, log bodies and events stored before are not indexed back.

use std::{borrow::Cow, collections::BTreeMap};

use roost_proto::search::{MAX_WORD, words};

use super::{
    message_texts,
    rows::{Batch, EventRow, LogRow, SpanRow},
};
use crate::{
    Result,
    store::{BeginWrite as _, Store, on_reader, on_writer},
};

/// The `roost_meta` key holding the highest message id [`backfill`] has still to index
/// (migration 0026 sets it to the messages stored then; 0 once done).
const BACKFILL_KEY: &str = "search_backfill_messages";
/// Messages indexed per transaction by [`backfill`]: short, so ingest never waits long.
const BACKFILL_CHUNK: i64 = 1_000;

/// Most distinct words of one document PostgreSQL's index keeps (a `tsvector` holds at
/// most 1 MB).
const MAX_WORDS: usize = 20_000;
/// Documents per INSERT statement (10 parameters each).
const ROWS_PER_INSERT: usize = 1_000;

/// One document.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc<'a> {
    /// When the item happened (ns).
    pub time_ns: i64,
    /// `message`, `tool`, `span`, `log` or `event`.
    pub source: &'static str,
    /// '' when none.
    pub session_id: &'a str,
    pub trace_id: &'a str,
    pub span_id: &'a str,
    pub run_id: &'a str,
    pub service: &'a str,
    /// What is searched, and what a hit's snippet is cut from.
    pub text: Cow<'a, str>,
    /// The text is the messages of the item (`trace_id`, `span_id`, `time_ns`) and nothing
    /// else: it is indexed but not stored again, its snippet is cut from the messages
    /// (stored once, in `message_texts`: see [`message_lines`]).
    pub of_messages: bool,
}

impl Doc<'_> {
    /// What the document row keeps of its text: none when it is its messages'.
    fn stored_text(&self) -> &str {
        if self.of_messages { "" } else { &self.text }
    }
}

/// The documents of a batch's stored items: `spans` are its new spans, `new_events` says
/// which of its events were new (a resent span or event adds no document).
pub fn docs<'a>(batch: &'a Batch, spans: &[&'a SpanRow], new_events: &[bool]) -> Vec<Doc<'a>> {
    let service = |index: usize| batch.resources.get(index).map_or("unknown_service", |r| r.service.as_str());
    let mut docs = Vec::new();
    // Per trace: its spans' names and failures, once each, in order.
    let mut traces: BTreeMap<&str, (Doc<'a>, Vec<&'a str>)> = BTreeMap::new();
    for span in spans {
        let (doc, lines) = traces.entry(&span.trace_id).or_insert_with(|| {
            let doc = Doc {
                time_ns: span.start_ns,
                source: "span",
                session_id: span.gen_ai.session_id.as_deref().unwrap_or_default(),
                trace_id: &span.trace_id,
                span_id: "",
                run_id: "",
                service: service(span.resource),
                text: Cow::Borrowed(""),
                of_messages: false,
            };
            (doc, Vec::new())
        });
        doc.time_ns = doc.time_ns.min(span.start_ns);
        if doc.session_id.is_empty() {
            doc.session_id = span.gen_ai.session_id.as_deref().unwrap_or_default();
        }
        for line in [span.name.as_str(), if span.status_code == 2 { &span.status_message } else { "" }] {
            if !line.is_empty() && !lines.contains(&line) {
                lines.push(line);
            }
        }
        if let Some(text) = span_text(span) {
            let said = !span.new_messages().is_empty();
            docs.push(Doc {
                time_ns: span.start_ns,
                source: if said { "message" } else { "tool" },
                session_id: span.gen_ai.session_id.as_deref().unwrap_or_default(),
                trace_id: &span.trace_id,
                span_id: &span.span_id,
                run_id: "",
                service: service(span.resource),
                text: Cow::Owned(text),
                of_messages: said && span.tool_io.trim().is_empty(),
            });
        }
    }
    docs.extend(traces.into_values().filter(|(_, lines)| !lines.is_empty()).map(|(mut doc, lines)| {
        doc.text = Cow::Owned(lines.join("\n"));
        doc
    }));
    docs.extend(batch.logs.iter().filter_map(|log| log_doc(log, service(log.resource))));
    docs.extend(batch.events.iter().zip(new_events).filter(|(_, new)| **new).filter_map(|(event, _)| event_doc(event)));
    docs
}

/// A span's messages ([`message_lines`]) and its tool call's arguments and result.
fn span_text(span: &SpanRow) -> Option<String> {
    let mut lines = message_lines(span.new_messages().iter().map(|m| (m.content.as_str(), m.tool_calls.as_deref())));
    lines.push(&span.tool_io);
    joined(lines)
}

/// What messages make of a document: each message's text, then its tool calls' names and
/// arguments (as stored, JSON), one per line. Ingest indexes it, and a hit's snippet is
/// cut from it again when the document does not hold its text.
pub fn message_lines<'a>(messages: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Vec<&'a str> {
    messages.into_iter().flat_map(|(content, tool_calls)| [content, tool_calls.unwrap_or_default()]).collect()
}

/// The text of a document made of messages, from its messages' contents and tool calls
/// (empty lines left out, as at ingest).
pub fn messages_text(messages: &[(String, Option<String>)]) -> String {
    joined(message_lines(messages.iter().map(|(content, calls)| (content.as_str(), calls.as_deref()))))
        .unwrap_or_default()
}

fn log_doc<'a>(log: &'a LogRow, service: &'a str) -> Option<Doc<'a>> {
    let (source, text) = if log.is_message {
        ("message", joined(message_lines(log.messages.iter().map(|m| (m.content.as_str(), m.tool_calls.as_deref()))))?)
    } else {
        ("log", joined([log.body.as_str()])?)
    };
    Some(Doc {
        time_ns: log.time_ns,
        source,
        session_id: log.gen_ai.session_id.as_deref().unwrap_or_default(),
        trace_id: log.trace_id.as_deref().unwrap_or_default(),
        span_id: log.span_id.as_deref().unwrap_or_default(),
        run_id: "",
        service,
        text: Cow::Owned(text),
        of_messages: log.is_message,
    })
}

/// An event's data: its string values, one per line (a hosted turn's message and reply,
/// a custom run's prompt), and its tool's name.
fn event_doc(event: &EventRow) -> Option<Doc<'_>> {
    let data: serde_json::Value = serde_json::from_str(&event.data).unwrap_or_default();
    let mut strings = vec![event.tool_name.as_str()];
    collect_strings(&data, &mut strings);
    Some(Doc {
        time_ns: event.ts_ns,
        source: "event",
        session_id: &event.session_id,
        trace_id: "",
        span_id: "",
        run_id: &event.run_id,
        service: "",
        text: Cow::Owned(joined(strings)?),
        of_messages: false,
    })
}

fn collect_strings<'a>(value: &'a serde_json::Value, into: &mut Vec<&'a str>) {
    match value {
        serde_json::Value::String(s) => into.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_strings(v, into)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_strings(v, into)),
        _ => {}
    }
}

/// The non-empty lines, joined; none when all are empty.
fn joined<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let lines: Vec<&str> = lines.into_iter().filter(|l| !l.trim().is_empty()).collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// A document's words as a PostgreSQL `tsvector` literal: each distinct word quoted (a
/// word holds letters and digits only, so no quote needs escaping), long words left out.
pub fn tsvector(text: &str) -> String {
    let mut distinct: Vec<String> = words(text).filter(|w| w.chars().count() <= MAX_WORD).collect();
    distinct.sort_unstable();
    distinct.dedup();
    distinct.truncate(MAX_WORDS);
    distinct.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" ")
}

/// A message row as [`backfill`] reads it: id, time, session, trace, span, text id, service.
type MessageRow = (i64, i64, Option<String>, Option<String>, Option<String>, Option<i64>, String);

/// Indexes the messages stored before search existed, newest first, a chunk per
/// transaction; returns how many documents it wrote. Each chunk moves the mark in its own
/// transaction, only from the value it read, so replicas sharing a PostgreSQL store (or a
/// restart mid-way) never index a message twice.
pub async fn backfill(store: &Store) -> Result<u64> {
    let mut indexed = 0;
    loop {
        let Some(mark) = store.meta_get(BACKFILL_KEY).await?.and_then(|v| v.parse::<i64>().ok()).filter(|m| *m > 0)
        else {
            return Ok(indexed);
        };
        let rows: Vec<MessageRow> = on_reader!(store, |pool| {
            sqlx::query_as(
                "SELECT id, time_ns, session_id, trace_id, span_id, text_id, service FROM messages \
                 WHERE id <= $1 ORDER BY id DESC LIMIT $2",
            )
            .bind(mark)
            .bind(BACKFILL_CHUNK)
            .fetch_all(pool)
            .await
        })?;
        let next = if (rows.len() as i64) < BACKFILL_CHUNK { 0 } else { rows.last().map_or(0, |r| r.0 - 1) };
        let texts = message_texts::read(store, &rows.iter().filter_map(|r| r.5).collect::<Vec<_>>()).await?;
        let docs: Vec<Doc<'_>> = rows
            .iter()
            .filter_map(|(_, time_ns, session, trace, span, text_id, service)| {
                let text = texts.get(&(*text_id)?)?;
                let (content, tool_calls) = (text.content(), text.tool_calls.as_deref());
                Some(Doc {
                    time_ns: *time_ns,
                    source: "message",
                    session_id: session.as_deref().unwrap_or_default(),
                    trace_id: trace.as_deref().unwrap_or_default(),
                    span_id: span.as_deref().unwrap_or_default(),
                    run_id: "",
                    service,
                    text: Cow::Owned(joined(message_lines([(content.as_str(), tool_calls)]))?),
                    of_messages: true,
                })
            })
            .collect();
        let moved = on_writer!(store, |pool| {
            let mut tx = pool.begin_volume(store.durability()).await?;
            let moved = sqlx::query("UPDATE roost_meta SET value = $1 WHERE key = $2 AND value = $3")
                .bind(next.to_string())
                .bind(BACKFILL_KEY)
                .bind(mark.to_string())
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if moved == 1 {
                tx.insert_search_docs(&docs).await?;
            }
            tx.commit().await?;
            Ok::<_, crate::Error>(moved == 1)
        })?;
        if moved {
            indexed += docs.len() as u64;
        }
    }
}

/// Writing documents inside the ingest transaction.
pub(crate) trait SearchTx {
    /// Stores the documents (and indexes them).
    async fn insert_search_docs(&mut self, docs: &[Doc<'_>]) -> Result<()>;
}

impl SearchTx for sqlx::SqliteConnection {
    async fn insert_search_docs(&mut self, docs: &[Doc<'_>]) -> Result<()> {
        // The words go into the contentless index under the document's id (migration
        // 0034). The ids are drawn here: the writer is the only one, inside its transaction.
        for chunk in docs.chunks(ROWS_PER_INSERT) {
            let first: i64 =
                sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM search_docs").fetch_one(&mut *self).await?;
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO search_docs (id, time_ns, source, session_id, trace_id, span_id, run_id, service, text) ",
            );
            q.push_values(chunk.iter().enumerate(), |mut row, (i, d)| {
                row.push_bind(first + i as i64)
                    .push_bind(d.time_ns)
                    .push_bind(d.source)
                    .push_bind(d.session_id)
                    .push_bind(d.trace_id)
                    .push_bind(d.span_id)
                    .push_bind(d.run_id)
                    .push_bind(d.service)
                    .push_bind(d.stored_text());
            });
            q.build().execute(&mut *self).await?;
            let mut q = sqlx::QueryBuilder::new("INSERT INTO search_words (rowid, text) ");
            q.push_values(chunk.iter().enumerate(), |mut row, (i, d)| {
                row.push_bind(first + i as i64).push_bind(d.text.as_ref());
            });
            q.build().execute(&mut *self).await?;
        }
        Ok(())
    }
}

impl SearchTx for sqlx::PgConnection {
    async fn insert_search_docs(&mut self, docs: &[Doc<'_>]) -> Result<()> {
        for chunk in docs.chunks(ROWS_PER_INSERT) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO search_docs (time_ns, source, session_id, trace_id, span_id, run_id, service, text, words) ",
            );
            q.push_values(chunk, |mut row, d| {
                row.push_bind(d.time_ns)
                    .push_bind(d.source)
                    .push_bind(d.session_id)
                    .push_bind(d.trace_id)
                    .push_bind(d.span_id)
                    .push_bind(d.run_id)
                    .push_bind(d.service)
                    .push_bind(d.stored_text())
                    .push_bind(tsvector(&d.text))
                    .push_unseparated("::tsvector");
            });
            q.build().execute(&mut *self).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::rows::{GenAi, Message, ResourceRow};

    #[test]
    fn a_tsvector_holds_each_word_once_and_no_long_ones() {
        assert_eq!(tsvector("b a b"), "'a' 'b'");
        assert_eq!(tsvector(&"x".repeat(MAX_WORD + 1)), "", "a long word is not indexed");
    }

    #[test]
    fn a_batch_makes_a_document_per_content_span_log_and_event_and_per_trace() {
        let span = |id: &str, name: &str, messages: Vec<Message>, tool_io: &str| SpanRow {
            trace_id: "t1".into(),
            span_id: id.into(),
            name: name.into(),
            start_ns: 10,
            gen_ai: GenAi { session_id: Some("s1".into()), ..GenAi::default() },
            messages,
            tool_io: tool_io.into(),
            ..SpanRow::default()
        };
        let said = |role: &str, content: &str| Message { role: role.into(), content: content.into(), tool_calls: None };
        let mut failed = span("c", "chat", Vec::new(), "");
        (failed.status_code, failed.status_message) = (2, "upstream 529 overloaded".into());
        let batch = Batch {
            resources: vec![ResourceRow { hash: "h".into(), service: "planner".into(), attributes: "{}".into() }],
            spans: vec![
                span("a", "chat", vec![said("user", "Plan a trip to Lisbon"), said("assistant", "Sure")], ""),
                span("b", "execute_tool get_weather", Vec::new(), "{\"city\":\"Lisbon\"}\nsunny"),
                failed,
            ],
            logs: vec![LogRow { time_ns: 5, body: "cache warmed".into(), ..LogRow::default() }],
            events: vec![
                EventRow { data: r#"{"text":"hello","n":3}"#.into(), ..EventRow::default() },
                EventRow { data: r#"{"text":"resent"}"#.into(), ..EventRow::default() },
            ],
            ..Batch::default()
        };
        let spans: Vec<&SpanRow> = batch.spans.iter().collect();
        let docs = docs(&batch, &spans, &[true, false]);
        let texts: Vec<(&str, &str, &str)> = docs.iter().map(|d| (d.source, d.span_id, d.text.as_ref())).collect();
        assert_eq!(
            texts,
            [
                ("message", "a", "Plan a trip to Lisbon\nSure"),
                ("tool", "b", "{\"city\":\"Lisbon\"}\nsunny"),
                ("span", "", "chat\nexecute_tool get_weather\nupstream 529 overloaded"),
                ("log", "", "cache warmed"),
                ("event", "", "hello"),
            ]
        );
        assert!(docs.iter().take(3).all(|d| d.session_id == "s1" && d.service == "planner"), "{docs:?}");
        let stored: Vec<&str> = docs.iter().map(Doc::stored_text).collect();
        assert_eq!(stored[0], "", "the messages are stored once, not in their document");
        assert!(stored[1..].iter().all(|t| !t.is_empty()), "{stored:?}");
    }
}
