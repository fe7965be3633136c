//! Exporting a list: every row a table shape's arguments select, as CSV or JSON Lines,
//! streamed from the store to the client.
//!
//! A page of q/1 stops at a limit, an offset of 10,000 and 8 MiB; an export has none of
//! them. Rows are read one at a time from a cursor the export keeps open on a reader
//! connection and encoded into chunks of [`CHUNK_BYTES`]; a chunk waits in a channel of
//! [`CHUNKS_AHEAD`] until the client takes it. Memory is those few chunks and one row,
//! whatever the export's size, and a client that reads slowly slows the cursor instead of
//! filling roost's memory. A client that hangs up drops the channel, which ends the read.
//!
//! At most [`EXPORTS_AT_ONCE`] run at once: each holds a reader connection for as long as
//! it runs (SQLite has a handful), and the dashboard must keep answering meanwhile. One more
//! is refused with `rate_limited`, to try again later.

use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, TryStreamExt as _};
use roost_proto::{ApiError, ErrorReason};
use serde_json::{Map, Value as Json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::{
    args::Args,
    registry::{self, Plan, Shape},
    run,
};
use crate::{
    Result,
    store::{Store, on_reader},
};

/// Bytes gathered before a chunk is handed over.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks encoded ahead of the client.
const CHUNKS_AHEAD: usize = 4;
/// Exports that may run at once.
pub const EXPORTS_AT_ONCE: usize = 2;

/// The file formats of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// RFC 4180 CSV: a header row of the shape's fields, then one line per row.
    Csv,
    /// One JSON object per line, each as the shape's rows are in a q/1 answer.
    JsonLines,
}

impl Format {
    /// The format a request names (`csv`, `jsonl`).
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "csv" => Ok(Self::Csv),
            "jsonl" => Ok(Self::JsonLines),
            other => {
                Err(ApiError::invalid_argument(format!("unknown export format {other:?}; allowed: csv, jsonl")).into())
            }
        }
    }

    /// Its media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Csv => "text/csv; charset=utf-8",
            Self::JsonLines => "application/x-ndjson",
        }
    }

    /// Its file name extension.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::JsonLines => "jsonl",
        }
    }
}

/// Counts the exports running: a permit per export, held by its reading task.
#[derive(Debug, Clone)]
pub struct Exports(Arc<Semaphore>);

impl Default for Exports {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(EXPORTS_AT_ONCE)))
    }
}

/// Starts exporting `shape`'s rows for `args`: the file's bytes, in order. Fails before any
/// byte for a shape that is no list or when [`EXPORTS_AT_ONCE`] are running; a store error
/// later ends the stream with it.
pub fn start(
    store: Store,
    exports: &Exports,
    shape: &'static Shape,
    args: Args,
    format: Format,
    now_ns: i64,
) -> Result<impl Stream<Item = Result<Bytes>> + Send + 'static> {
    let Plan::Table { from, filters, order, orders } = shape.plan else {
        let lists: Vec<&str> =
            registry::SHAPES.iter().filter(|s| matches!(s.plan, Plan::Table { .. })).map(|s| s.name).collect();
        return Err(ApiError::invalid_argument(format!(
            "the {} shape is not a list and cannot be exported; these can: {}",
            shape.name,
            lists.join(", ")
        ))
        .into());
    };
    let permit = exports.0.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            ErrorReason::RateLimited,
            format!("{EXPORTS_AT_ONCE} exports are running already; try again when one has finished"),
        )
    })?;
    let order = args.string("order").and_then(|o| orders.iter().find(|(name, _)| *name == o)).map_or(order, |o| o.1);
    let sql = run::table(shape, from, filters, order, &args, now_ns, store.kind(), false);
    let (tx, rx) = mpsc::channel(CHUNKS_AHEAD);
    tokio::spawn(read(store, shape, args, format, now_ns, sql, tx, permit));
    Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Reads the rows and sends them encoded, until the last or until the client is gone.
#[allow(clippy::too_many_arguments)]
async fn read(
    store: Store,
    shape: &'static Shape,
    args: Args,
    format: Format,
    now_ns: i64,
    sql: run::Sql,
    tx: mpsc::Sender<Result<Bytes>>,
    _permit: OwnedSemaphorePermit,
) {
    let fields: Vec<&'static str> = registry::visible(shape).map(|c| c.name).collect();
    let mut file = Encoder { format, fields, buf: Vec::with_capacity(CHUNK_BYTES + 4096) };
    file.header();
    let read = on_reader!(store, |pool| async {
        let mut rows = run::bound!(&sql).fetch(pool);
        let mut open = true;
        while let Some(row) = rows.try_next().await? {
            let (mut json, _) = run::row_json(&row, shape.columns)?;
            if let Some(post) = shape.post {
                post(&mut json, &args, now_ns);
            }
            file.row(&json);
            if file.buf.len() >= CHUNK_BYTES && tx.send(Ok(file.take())).await.is_err() {
                open = false;
                break;
            }
        }
        Ok::<_, sqlx::Error>(open)
    }
    .await);
    match read {
        Ok(true) if !file.buf.is_empty() => {
            let _ = tx.send(Ok(file.take())).await;
        }
        Ok(_) => {}
        Err(err) => {
            tracing::warn!(shape = shape.name, error = %err, "an export failed while reading its rows");
            let _ = tx.send(Err(err.into())).await;
        }
    }
}

/// Writes rows in a format into a buffer.
struct Encoder {
    format: Format,
    fields: Vec<&'static str>,
    buf: Vec<u8>,
}

impl Encoder {
    fn take(&mut self) -> Bytes {
        Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES + 4096)))
    }

    fn header(&mut self) {
        if self.format == Format::Csv {
            let line = self.fields.iter().map(|f| csv_cell(f)).collect::<Vec<_>>().join(",");
            self.buf.extend_from_slice(line.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        }
    }

    fn row(&mut self, row: &Map<String, Json>) {
        match self.format {
            Format::JsonLines => {
                // A row's keys are its shape's fields; internal ones were dropped.
                let object: Map<String, Json> =
                    self.fields.iter().map(|f| ((*f).to_owned(), row.get(*f).cloned().unwrap_or(Json::Null))).collect();
                // Serialising a map of JSON values cannot fail.
                serde_json::to_writer(&mut self.buf, &object).unwrap_or_default();
                self.buf.push(b'\n');
            }
            Format::Csv => {
                for (i, field) in self.fields.iter().enumerate() {
                    if i > 0 {
                        self.buf.push(b',');
                    }
                    let cell = match row.get(*field) {
                        None | Some(Json::Null) => String::new(),
                        Some(Json::String(text)) => csv_cell(&guarded(text)),
                        Some(value @ (Json::Number(_) | Json::Bool(_))) => value.to_string(),
                        Some(value) => csv_cell(&value.to_string()),
                    };
                    self.buf.extend_from_slice(cell.as_bytes());
                }
                self.buf.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// A cell as RFC 4180 writes it: quoted (its quotes doubled) when it holds a comma, a quote
/// or a line break, or starts or ends with a space.
fn csv_cell(text: &str) -> String {
    let needs_quotes = text.contains([',', '"', '\n', '\r'])
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace);
    if needs_quotes { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_owned() }
}

/// A text cell that a spreadsheet would run as a formula (it starts with `=`, `+`, `-`,
/// `@`, a tab or a carriage return) with a `'` before it: what agents say is written by
/// whoever talks to them, and opening an export must not run it. Numbers are written as
/// numbers and never guarded.
fn guarded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{text}").into() } else { text.into() }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn encoded(format: Format, rows: &[Json]) -> String {
        let mut file = Encoder { format, fields: vec!["a", "b", "c"], buf: Vec::new() };
        file.header();
        for row in rows {
            file.row(row.as_object().unwrap());
        }
        String::from_utf8(file.buf).unwrap()
    }

    #[test]
    fn csv_quotes_what_it_must_and_guards_formulas() {
        let rows = [
            json!({"a": "plain", "b": 1.5, "c": null}),
            json!({"a": "say \"hi\", twice", "b": true, "c": {"k": [1, 2]}}),
            json!({"a": "=HYPERLINK(\"x\")", "b": -3, "c": "line\nbreak"}),
            json!({"a": " padded", "b": "-", "c": "@me"}),
        ];
        assert_eq!(
            encoded(Format::Csv, &rows),
            "a,b,c\r\n\
             plain,1.5,\r\n\
             \"say \"\"hi\"\", twice\",true,\"{\"\"k\"\":[1,2]}\"\r\n\
             \"'=HYPERLINK(\"\"x\"\")\",-3,\"line\nbreak\"\r\n\
             \" padded\",'-,'@me\r\n"
        );
    }

    #[test]
    fn json_lines_are_the_rows_fields_one_object_a_line() {
        let rows = [json!({"a": "x\ny", "b": 2, "_hidden": 1}), json!({"c": [1]})];
        assert_eq!(
            encoded(Format::JsonLines, &rows),
            "{\"a\":\"x\\ny\",\"b\":2,\"c\":null}\n{\"a\":null,\"b\":null,\"c\":[1]}\n"
        );
    }

    #[test]
    fn formats_by_name() {
        assert_eq!(Format::parse("csv").unwrap(), Format::Csv);
        assert_eq!(Format::parse("jsonl").unwrap().extension(), "jsonl");
        assert!(Format::parse("xlsx").unwrap_err().to_string().contains("allowed: csv, jsonl"));
    }
}
