//! Running a shape: its SQL from the registry entry and the checked arguments, its rows as
//! JSON objects, read until the answer's byte budget ([`MAX_ANSWER_BYTES`]) is spent.

use futures::TryStreamExt as _;
use serde_json::{Map, Value as Json};
use sqlx::Row as _;

use super::{
    args::Args,
    registry::{
        Col, ColKind, FilterKind, MAX_SPAN_EVENTS, Plan, SCORES_JSON_POSTGRES, SCORES_JSON_SQLITE, SESSION_ROWS,
        SESSION_SPANS, SESSION_TRACES_POSTGRES, SESSION_TRACES_SQLITE, Shape, TRACE_ROWS, TRACE_SPANS,
    },
};
use crate::{
    Result,
    store::{BackendKind, Store, on_reader},
    telemetry::{packed_attributes, runs::nanocents_to_usd},
    time::{rfc3339_ns, utc_day, utc_hour},
};

/// A value bound to a placeholder.
#[derive(Debug, Clone)]
pub(super) enum Bind {
    Text(String),
    Int(i64),
    Float(f64),
}

/// SQL text with `$N` placeholders (valid on both backends) and their values.
#[derive(Debug, Default)]
pub(super) struct Sql {
    pub(super) text: String,
    binds: Vec<Bind>,
}

impl Sql {
    pub(super) fn bind(&mut self, value: Bind) -> String {
        self.binds.push(value);
        format!("${}", self.binds.len())
    }

    /// The values bound, in placeholder order.
    pub(super) fn binds(&self) -> &[Bind] {
        &self.binds
    }
}

/// `sql`'s statement with its values bound, for whichever backend's pool it then runs on
/// (a macro: the two backends' query types differ, and each arm of `on_reader!` has one).
macro_rules! bound {
    ($sql:expr) => {{
        let sql: &$crate::query::run::Sql = $sql;
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.text.clone()));
        for bind in sql.binds() {
            query = match bind {
                $crate::query::run::Bind::Text(s) => query.bind(s.clone()),
                $crate::query::run::Bind::Int(i) => query.bind(*i),
                $crate::query::run::Bind::Float(f) => query.bind(*f),
            };
        }
        query
    }};
}
pub(super) use bound;

/// Most bytes of rows in one answer, as JSON. A row is measured as it is read (from the
/// lengths of its values, without serialising it), and reading stops before the row that
/// would pass the budget; the first row is always answered. Telemetry strings are bounded
/// at ingest (64 KiB by default), but a page of a thousand spans with large attributes
/// would still be hundreds of megabytes; 8 MiB is far more than any page shows and little
/// enough for the server and the client to hold.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// Kept free in the budget for the answer's other fields (`count`, `shape`, ...).
pub(super) const ENVELOPE_BYTES: usize = 1024;

/// A shape's rows, and whether rows were left out to stay within [`MAX_ANSWER_BYTES`].
#[derive(Debug, Default)]
pub struct Fetched {
    /// The rows, newest (or, for transcripts, oldest) first.
    pub rows: Vec<Map<String, Json>>,
    /// Rows past the budget were not read.
    pub truncated: bool,
    /// An upper bound of the answer's size as JSON, its envelope included.
    pub bytes: usize,
}

/// Runs a shape; its rows, newest (or, for transcripts, oldest) first.
pub async fn run(store: &Store, shape: &Shape, args: &Args, now_ns: i64) -> Result<Fetched> {
    let sql = match shape.plan {
        Plan::Table { from, filters, order, orders } => {
            let order =
                args.string("order").and_then(|o| orders.iter().find(|(name, _)| *name == o)).map_or(order, |o| o.1);
            table(shape, from, filters, order, args, now_ns, store.kind(), true)
        }
        Plan::Transcript => transcript(args, store.kind()),
        Plan::Span => span(shape, args),
        Plan::Search => return super::search::run(store, args).await,
        Plan::Latency => return super::latency::run(store, args, now_ns).await,
        Plan::Scores => return super::scores::run(store, args, now_ns).await,
    };
    let mut fetched = fetch(store, sql, shape.columns, ENVELOPE_BYTES).await?;
    match shape.plan {
        Plan::Span => {
            span_events(store, args, &mut fetched).await?;
            span_messages(store, args, &mut fetched).await?;
        }
        Plan::Transcript => message_texts(store, &mut fetched).await?,
        _ => {}
    }
    if let Some(post) = shape.post {
        for row in &mut fetched.rows {
            post(row, args, now_ns);
        }
    }
    Ok(fetched)
}

pub(super) fn select_list(columns: &[Col]) -> String {
    columns.iter().map(|c| format!("{} AS c_{}", c.sql, c.name.trim_start_matches('_'))).collect::<Vec<_>>().join(", ")
}

/// `sql` with `{session_traces}` written for `kind` ([`SESSION_TRACES_SQLITE`],
/// [`SESSION_TRACES_POSTGRES`]): the backends' planners want different forms of one test.
fn for_backend(sql: &str, kind: BackendKind) -> String {
    let traces = match kind {
        BackendKind::Sqlite => SESSION_TRACES_SQLITE,
        BackendKind::Postgres => SESSION_TRACES_POSTGRES,
    };
    let scores = match kind {
        BackendKind::Sqlite => SCORES_JSON_SQLITE,
        BackendKind::Postgres => SCORES_JSON_POSTGRES,
    };
    sql.replace("{session_traces}", traces)
        .replace("{trace_scores}", &scores.replace("{key}", "trace_id").replace("{table}", "traces"))
        .replace("{session_scores}", &scores.replace("{key}", "session_id").replace("{table}", "sessions"))
}

/// A table shape's SELECT for `args`: one page (`limit`, `offset`) when `paged`, else every
/// row the filters select ([`super::export`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn table(
    shape: &Shape,
    from: &str,
    filters: &[super::registry::Filter],
    order: &str,
    args: &Args,
    now_ns: i64,
    kind: BackendKind,
    paged: bool,
) -> Sql {
    let mut sql = Sql::default();
    let mut conditions = Vec::new();
    for filter in filters {
        let condition = match filter.kind {
            FilterKind::Eq => {
                args.string(filter.arg).map(|v| format!("{} = {}", filter.sql, sql.bind(Bind::Text(v.to_owned()))))
            }
            FilterKind::AtLeast | FilterKind::AtMost => {
                let op = if matches!(filter.kind, FilterKind::AtLeast) { ">=" } else { "<=" };
                let value = args.time(filter.arg).or_else(|| {
                    shape
                        .args
                        .iter()
                        .any(|a| a.name == filter.arg && a.default.is_some())
                        .then(|| args.integer(filter.arg))
                });
                value.map(|v| format!("{} {op} {}", filter.sql, sql.bind(Bind::Int(v))))
            }
            FilterKind::AtLeastOrUnset(unset) => {
                let min = sql.bind(Bind::Int(args.integer(filter.arg)));
                Some(if args.boolean(unset) {
                    format!("({0} >= {min} OR {0} = 0)", filter.sql)
                } else {
                    format!("{} >= {min}", filter.sql)
                })
            }
            FilterKind::Flag => args.boolean(filter.arg).then(|| filter.sql.to_owned()),
            FilterKind::Contains => args.string(filter.arg).map(|v| {
                let pattern = sql.bind(Bind::Text(format!("%{}%", like_escaped(v))));
                format!("LOWER({}) LIKE LOWER({pattern}) ESCAPE '\\'", filter.sql)
            }),
            FilterKind::HoldsLike => args.string(filter.arg).map(|v| {
                let pattern = sql.bind(Bind::Text(format!("%{}%", like_escaped(v))));
                filter.sql.replace("{arg}", &pattern)
            }),
            FilterKind::Scored => {
                args.string(filter.arg).and_then(|v| super::scores::condition(filter.sql, v, &mut sql))
            }
            FilterKind::Holds => args
                .string(filter.arg)
                .map(|v| for_backend(filter.sql, kind).replace("{arg}", &sql.bind(Bind::Text(v.to_owned())))),
            FilterKind::DaysBack => {
                let days = args.integer(filter.arg).max(1);
                let first = utc_day(now_ns - (days - 1) * 86_400_000_000_000);
                Some(format!("{} >= {}", filter.sql, sql.bind(Bind::Text(first))))
            }
            FilterKind::HoursBack => {
                let hours = args.integer(filter.arg).max(1);
                let first = utc_hour(now_ns - (hours - 1) * 3_600_000_000_000);
                Some(format!("{} >= {}", filter.sql, sql.bind(Bind::Text(first))))
            }
        };
        conditions.extend(condition);
    }
    let mut text = format!("SELECT {} FROM {from}", for_backend(&select_list(shape.columns), kind));
    if !conditions.is_empty() {
        text.push_str(" WHERE ");
        text.push_str(&conditions.join(" AND "));
    }
    text.push_str(&format!(" ORDER BY {order}"));
    if paged {
        text.push_str(&format!(" LIMIT {}", sql.bind(Bind::Int(args.integer("limit")))));
        let offset = args.integer("offset");
        if offset > 0 {
            text.push_str(&format!(" OFFSET {}", sql.bind(Bind::Int(offset))));
        }
    }
    sql.text = text;
    sql
}

/// `text` for a LIKE pattern with `ESCAPE '\'`: its `\`, `%` and `_` match themselves.
pub(super) fn like_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The span of a (`trace_id`, `span_id`) key, if stored (the `spans_key` index, on the
/// trace's number).
fn span(shape: &Shape, args: &Args) -> Sql {
    let mut sql = Sql::default();
    let trace = sql.bind(Bind::Text(args.string("trace_id").unwrap_or_default().to_owned()));
    let span = sql.bind(Bind::Text(args.string("span_id").unwrap_or_default().to_owned()));
    sql.text = format!(
        "SELECT {} FROM spans WHERE {} AND span_id = {span} LIMIT 1",
        select_list(shape.columns),
        TRACE_SPANS.replace("{arg}", &trace)
    );
    sql
}

/// An event of a span as the `span` shape shows it.
const SPAN_EVENT_COLUMNS: &[Col] = &[
    Col { name: "time", sql: "time_ns", kind: ColKind::Time },
    Col { name: "name", sql: "name", kind: ColKind::Text },
    Col { name: "attributes", sql: "attributes", kind: ColKind::Json },
];

/// Fills the `span` shape's row (if any) with its events, oldest first: at most
/// [`MAX_SPAN_EVENTS`], and only those that fit in what is left of the answer's budget
/// (`truncated` says when some did not).
async fn span_events(store: &Store, args: &Args, fetched: &mut Fetched) -> Result<()> {
    let Some(row) = fetched.rows.first_mut() else {
        return Ok(());
    };
    let mut sql = Sql::default();
    let trace = sql.bind(Bind::Text(args.string("trace_id").unwrap_or_default().to_owned()));
    let span = sql.bind(Bind::Text(args.string("span_id").unwrap_or_default().to_owned()));
    let limit = sql.bind(Bind::Int(MAX_SPAN_EVENTS));
    sql.text = format!(
        "SELECT {} FROM span_events WHERE {} AND span_id = {span} ORDER BY time_ns, id LIMIT {limit}",
        select_list(SPAN_EVENT_COLUMNS),
        TRACE_SPANS.replace("{arg}", &trace)
    );
    let events = fetch(store, sql, SPAN_EVENT_COLUMNS, fetched.bytes).await?;
    row.insert("events".to_owned(), Json::Array(events.rows.into_iter().map(Json::Object).collect()));
    fetched.truncated |= events.truncated;
    fetched.bytes = events.bytes;
    Ok(())
}

/// A model call's whole exchange (its input as sent, then its output) as `messages`:
/// `{role, text, tool_calls, new}`, `new` false for what its input repeats of the
/// conversation. Only for calls whose messages are stored once (`message_texts`); an
/// earlier store's calls keep theirs in their attributes. Within the answer's budget.
async fn span_messages(store: &Store, args: &Args, fetched: &mut Fetched) -> Result<()> {
    let Some(row) = fetched.rows.first_mut() else {
        return Ok(());
    };
    let (trace, span) = (args.string("trace_id").unwrap_or_default(), args.string("span_id").unwrap_or_default());
    let Some((new_from, texts)) = crate::telemetry::message_texts::call(store, trace, span).await? else {
        return Ok(());
    };
    let mut messages = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let (mut message, size) = message_fields(text);
        if fetched.bytes + size + SCALAR_BYTES > MAX_ANSWER_BYTES {
            fetched.truncated = true;
            break;
        }
        fetched.bytes += size + SCALAR_BYTES;
        message.insert("new".to_owned(), Json::Bool(i >= new_from));
        messages.push(Json::Object(message));
    }
    row.insert("messages".to_owned(), Json::Array(messages));
    Ok(())
}

/// A stored message's `role`, `text` and `tool_calls` (parsed), with their size in an
/// answer.
fn message_fields(text: &crate::telemetry::message_texts::Text) -> (Map<String, Json>, usize) {
    let content = text.content();
    let size = string_bytes(&content) + text.tool_calls.as_ref().map_or(0, String::len) + SCALAR_BYTES;
    let calls = text.tool_calls.as_deref().and_then(|t| serde_json::from_str::<Json>(t).ok());
    let mut fields = Map::new();
    fields.insert("role".to_owned(), Json::String(text.role.clone()));
    fields.insert("text".to_owned(), Json::String(content));
    fields.insert("tool_calls".to_owned(), calls.unwrap_or(Json::Null));
    (fields, size)
}

/// A transcript's messages given their texts (stored once, by content: the rows hold
/// references), within the answer's budget: a message that does not fit ends the answer
/// there (`truncated`), as a row over the budget does.
async fn message_texts(store: &Store, fetched: &mut Fetched) -> Result<()> {
    let id_of = |row: &Map<String, Json>| row.get("_text_id").and_then(Json::as_i64).filter(|id| *id > 0);
    let ids: Vec<i64> = fetched.rows.iter().filter_map(id_of).collect();
    let texts = crate::telemetry::message_texts::read(store, &ids).await?;
    let mut kept = fetched.rows.len();
    for (i, row) in fetched.rows.iter_mut().enumerate() {
        let id = id_of(row);
        row.remove("_text_id");
        let Some(text) = id.and_then(|id| texts.get(&id)) else { continue };
        let (fields, size) = message_fields(text);
        if i > 0 && fetched.bytes + size > MAX_ANSWER_BYTES {
            kept = i;
            fetched.truncated = true;
            break;
        }
        fetched.bytes += size;
        row.extend(fields);
    }
    fetched.rows.truncate(kept);
    Ok(())
}

/// A session's (or a trace's) messages, spans, events and logs, merged oldest first (at
/// one time: events, logs, spans, the spans' messages in their order, then failed spans,
/// so a failed call reads after what it was sent). Spans, messages and log records are
/// read by trace number, a session's through its traces; custom-run events, which have no
/// trace, by session. Log records whose content became messages are not listed again.
fn transcript(args: &Args, kind: BackendKind) -> Sql {
    let mut sql = Sql::default();
    let (column, key) = match args.string("session_id") {
        Some(session) => ("session_id", session),
        None => ("trace_id", args.string("trace_id").unwrap_or_default()),
    };
    let key = sql.bind(Bind::Text(key.to_owned()));
    // Spans are keyed by their trace's number (migration 0028), messages and log records
    // too once their trace has one (0029).
    let (spans_of, rows_of) = if column == "session_id" {
        (SESSION_SPANS.replace("{arg}", &key), for_backend(SESSION_ROWS, kind).replace("{arg}", &key))
    } else {
        (TRACE_SPANS.replace("{arg}", &key), TRACE_ROWS.replace("{arg}", &key))
    };
    let since = args.time("since").map(|ns| sql.bind(Bind::Int(ns)));
    let after = |column: &str| since.as_ref().map(|s| format!(" AND {column} >= {s}")).unwrap_or_default();
    let limit = sql.bind(Bind::Int(args.integer("limit")));
    let events = if column == "session_id" {
        format!(
            "UNION ALL \
             SELECT ts_ns, 'event', 1, 0, event_type, role, model, data, tool_name, NULL, input_tokens, output_tokens, \
                    cost_nanocents, '', '', run_id, id, 0, '', 0 \
               FROM events WHERE session_id = {key}{events_after} ",
            events_after = after("ts_ns"),
        )
    } else {
        String::new()
    };
    sql.text = format!(
        "SELECT t AS c_time, source AS c_source, kind AS c_kind, role AS c_role, model AS c_model, body AS c_text, \
         tool_name AS c_tool_name, tool_calls AS c_tool_calls, input_tokens AS c_input_tokens, \
         output_tokens AS c_output_tokens, cost_nanocents AS c_cost_usd, trace_id AS c_trace_id, span_id AS c_span_id, \
         run_id AS c_run_id, id AS c_id, status AS c_status, status_message AS c_status_message, \
         text_id AS c_text_id FROM ( \
           SELECT start_ns AS t, 'span' AS source, CASE WHEN status_code = 2 THEN 5 ELSE 3 END AS part, 0 AS seq, COALESCE(operation, 'span') AS kind, '' AS role, \
                  COALESCE(response_model, request_model, '') AS model, name AS body, COALESCE(tool_name, '') AS tool_name, \
                  NULL AS tool_calls, COALESCE(input_tokens, 0) AS input_tokens, COALESCE(output_tokens, 0) AS output_tokens, \
                  cost_nanocents, trace_id, span_id, '' AS run_id, span_id AS id, \
                  status_code AS status, status_message, 0 AS text_id \
             FROM spans WHERE {spans_of}{spans_after} \
           UNION ALL \
           SELECT time_ns, 'message', 4, seq, 'message', '', COALESCE(model, ''), '', '', NULL, 0, 0, 0, \
                  COALESCE(trace_id, ''), COALESCE(span_id, ''), '', CAST(id AS TEXT), 0, '', text_id \
             FROM messages WHERE {rows_of}{messages_after} \
           {events}\
           UNION ALL \
           SELECT time_ns, 'log', 2, 0, COALESCE(event_name, severity_text), '', COALESCE(model, ''), body, \
                  COALESCE(tool_name, ''), NULL, COALESCE(input_tokens, 0), COALESCE(output_tokens, 0), \
                  cost_nanocents, COALESCE(trace_id, ''), COALESCE(span_id, ''), '', CAST(id AS TEXT), 0, '', 0 \
             FROM logs WHERE {rows_of}{logs_after} \
              AND messages = 0 AND (event_name IS NULL OR event_name <> '{RUNTIME_OUTPUT}') \
         ) AS merged ORDER BY t, part, seq, id LIMIT {limit}",
        spans_after = after("start_ns"),
        messages_after = after("time_ns"),
        logs_after = after("time_ns"),
        RUNTIME_OUTPUT = crate::runtimes::output::EVENT_NAME,
    );
    sql
}

/// Reads rows as they arrive and stops at the byte budget, so a query over huge rows never
/// holds more than the budget (plus one row) in memory. `spent` is what the answer already
/// takes ([`ENVELOPE_BYTES`] for a new one); the answer's first row is read whatever its
/// size, later ones only within the budget.
pub(super) async fn fetch(store: &Store, sql: Sql, columns: &'static [Col], spent: usize) -> Result<Fetched> {
    let fetched = on_reader!(store, |pool| {
        let mut stream = bound!(&sql).fetch(pool);
        let mut fetched = Fetched { bytes: spent, ..Fetched::default() };
        while let Some(row) = stream.try_next().await? {
            let (json, size) = row_json(&row, columns)?;
            // Anything past the envelope is a row already answered.
            if fetched.bytes > ENVELOPE_BYTES && fetched.bytes + size > MAX_ANSWER_BYTES {
                fetched.truncated = true;
                break;
            }
            fetched.bytes += size;
            fetched.rows.push(json);
        }
        Ok::<_, sqlx::Error>(fetched)
    })?;
    Ok(fetched)
}

/// Reads a row's columns by kind; implemented for both backends' rows by one body. Each
/// value comes with an upper bound of its size as JSON.
pub(super) trait JsonRow {
    fn column_json(&self, index: usize, kind: ColKind) -> std::result::Result<(Json, usize), sqlx::Error>;
}

/// Bytes a JSON number, literal or short string (a time, a status) takes at most.
const SCALAR_BYTES: usize = 40;

macro_rules! impl_json_row {
    ($($row:ty),*) => {$(
        impl JsonRow for $row {
            fn column_json(&self, i: usize, kind: ColKind) -> std::result::Result<(Json, usize), sqlx::Error> {
                let scalar = |json: Json| (json, SCALAR_BYTES);
                Ok(match kind {
                    ColKind::Text => self.try_get::<Option<String>, _>(i)?.map_or(scalar(Json::Null), |s| {
                        let size = string_bytes(&s);
                        (Json::String(s), size)
                    }),
                    ColKind::Int => scalar(self.try_get::<Option<i64>, _>(i)?.map_or(Json::Null, Json::from)),
                    ColKind::Float => scalar(self.try_get::<Option<f64>, _>(i)?.map_or(Json::Null, float)),
                    ColKind::Time => scalar(self.try_get::<Option<i64>, _>(i)?.map_or(Json::Null, |ns| Json::String(rfc3339_ns(ns)))),
                    ColKind::CostUsd => scalar(self.try_get::<Option<i64>, _>(i)?.map_or(Json::Null, |n| float(nanocents_to_usd(n)))),
                    ColKind::DurationMs => scalar(self.try_get::<Option<i64>, _>(i)?.map_or(Json::Null, |ns| float(ns as f64 / 1e6))),
                    // Stored JSON is compact serde_json output: its length is what it takes.
                    ColKind::Json => self.try_get::<Option<String>, _>(i)?.map_or(scalar(Json::Null), |text| {
                        match serde_json::from_str(&text) {
                            Ok(json) => (json, text.len()),
                            Err(_) => {
                                let size = string_bytes(&text);
                                (Json::String(text), size)
                            }
                        }
                    }),
                    ColKind::Packed => self.try_get::<Option<Vec<u8>>, _>(i)?.and_then(|bytes| packed_attributes::unpack(&bytes)).map_or(scalar(Json::Null), |map| {
                        let json = Json::Object(map);
                        let size = json.to_string().len();
                        (json, size)
                    }),
                    ColKind::Status => scalar(self.try_get::<Option<i64>, _>(i)?.map_or(Json::Null, |code| {
                        Json::from(match code {
                            1 => "ok",
                            2 => "error",
                            _ => "unset",
                        })
                    })),
                })
            }
        }
    )*};
}

impl_json_row!(sqlx::sqlite::SqliteRow, sqlx::postgres::PgRow);

/// The hidden column a row's [packed attributes](ColKind::Packed) are read as.
const PACKED_ATTRIBUTES: &str = "_packed_attributes";

/// A row as a JSON object, and an upper bound of its size as JSON text.
pub(super) fn row_json(
    row: &impl JsonRow,
    columns: &[Col],
) -> std::result::Result<(Map<String, Json>, usize), sqlx::Error> {
    let mut size = 2;
    let mut map = Map::new();
    for (i, col) in columns.iter().enumerate() {
        let (value, bytes) = row.column_json(i, col.kind)?;
        // "name":value,
        size += col.name.len() + 4 + bytes;
        map.insert(col.name.to_owned(), value);
    }
    if let Some(packed) = map.remove(PACKED_ATTRIBUTES)
        && packed.is_object()
    {
        map.insert("attributes".to_owned(), packed);
    }
    Ok((map, size))
}

/// A string's size as JSON: its bytes, the quotes, and room for escapes (a quote or
/// backslash takes 2 bytes, a control character 6).
fn string_bytes(s: &str) -> usize {
    s.len() + 2 + s.bytes().filter(|b| matches!(b, b'"' | b'\\') || *b < 0x20).count() * 5
}

fn float(value: f64) -> Json {
    serde_json::Number::from_f64(value).map_or(Json::Null, Json::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::query::registry;

    /// The SQL of a table shape for `args`, and its bound values.
    fn table_sql(name: &str, args: Json) -> (String, Vec<String>) {
        let shape = registry::shape(name).unwrap();
        let args = Args::check(name, shape.args, args.as_object().unwrap()).unwrap();
        let Plan::Table { from, filters, order, orders } = shape.plan else { panic!("{name} is not a table") };
        let order = args.string("order").and_then(|o| orders.iter().find(|(n, _)| *n == o)).map_or(order, |o| o.1);
        let sql = table(shape, from, filters, order, &args, 0, BackendKind::Sqlite, true);
        let binds = sql
            .binds
            .iter()
            .map(|b| match b {
                Bind::Text(s) => s.clone(),
                Bind::Int(i) => i.to_string(),
                Bind::Float(f) => f.to_string(),
            })
            .collect();
        (sql.text, binds)
    }

    #[test]
    fn like_patterns_match_their_wildcards_literally() {
        assert_eq!(like_escaped("plain"), "plain");
        assert_eq!(like_escaped(r"100%_a\b"), r"100\%\_a\\b");
    }

    #[test]
    fn offsets_page_after_the_limit_and_are_clamped() {
        let (text, binds) = table_sql("sessions", json!({"limit": 5, "offset": 10}));
        assert!(text.ends_with("LIMIT $1 OFFSET $2"), "{text}");
        assert_eq!(binds, ["5", "10"]);
        let (text, binds) = table_sql("traces", json!({"offset": 1_000_000}));
        assert!(text.ends_with("OFFSET $2"), "{text}");
        assert_eq!(binds, ["50", "10000"]);
        for offset in [json!(0), json!(-4)] {
            let (text, _) = table_sql("sessions", json!({ "offset": offset }));
            assert!(!text.contains("OFFSET"), "no offset is no OFFSET: {text}");
        }
    }

    #[test]
    fn sessions_filter_by_model_and_search_and_traces_by_model() {
        let (text, binds) = table_sql("sessions", json!({"model": "m1", "search": "A%b_"}));
        assert!(text.contains("last_model = $1"), "{text}");
        assert!(text.contains(r"LOWER(session_id) LIKE LOWER($2) ESCAPE '\'"), "{text}");
        assert_eq!(binds[..2], ["m1", r"%A\%b\_%"]);
        let (text, binds) = table_sql("traces", json!({"model": "m2"}));
        assert!(
            text.contains(
                "EXISTS (SELECT 1 FROM spans s WHERE s.trace_seq = traces.seq \
                 AND COALESCE(s.response_model, s.request_model) = $1 LIMIT 1 OFFSET 0)"
            ),
            "{text}"
        );
        assert_eq!(binds[0], "m2");
    }

    #[test]
    fn contains_filters_and_orders() {
        let (text, binds) =
            table_sql("sessions", json!({"service_contains": "Chk", "model_contains": "4O", "order": "cost"}));
        assert!(text.contains(r"LOWER(service) LIKE LOWER($1) ESCAPE '\'"), "{text}");
        assert!(text.contains(r"LOWER(COALESCE(last_model, '')) LIKE LOWER($2) ESCAPE '\'"), "{text}");
        assert!(text.contains("ORDER BY COALESCE(cost_nanocents, 0) DESC"), "{text}");
        assert_eq!(binds[..2], ["%Chk%", "%4O%"]);
        let (text, _) = table_sql("traces", json!({"model_contains": "mini", "order": "duration"}));
        assert!(text.contains("LOWER(COALESCE(s.response_model, '')) LIKE LOWER($1) ESCAPE '\\'"), "{text}");
        assert!(text.contains("ORDER BY (end_ns - start_ns) DESC"), "{text}");
        let (text, _) = table_sql("traces", json!({}));
        assert!(text.contains("ORDER BY start_ns DESC, trace_id"), "the default is unchanged: {text}");
    }

    #[test]
    fn the_span_shape_needs_both_ids() {
        let shape = registry::shape("span").unwrap();
        for given in [json!({}), json!({"trace_id": "ab"}), json!({"span_id": "cd"})] {
            let err = Args::check("span", shape.args, given.as_object().unwrap()).unwrap_err();
            assert!(err.message().contains("needs the argument"), "{given}: {err}");
        }
        let args = Args::check("span", shape.args, json!({"trace_id": "ab", "span_id": "cd"}).as_object().unwrap());
        let text = span(shape, &args.unwrap()).text;
        assert!(
            text.ends_with(
                "FROM spans WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = $1) AND span_id = $2 LIMIT 1"
            ),
            "{text}"
        );
    }
}
