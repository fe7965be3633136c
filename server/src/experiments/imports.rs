//! Where dataset items come from: given one by one, JSON Lines, CSV, hosted turns,
//! recorded model calls, or a whole conversation. Everything is read and checked before
//! anything is added, so a request adds all its items or none.

use roost_proto::{
    ApiError,
    v1::{AddDatasetItemsRequest, CallRef, DatasetItem},
};
use serde_json::{Map, Value};

use super::{
    Caller, Experiments, MAX_EXPECTED_BYTES, MAX_INPUT_BYTES, MAX_ITEMS_A_REQUEST, MAX_METADATA_BYTES, invalid,
};
use crate::{Result, store::on_reader, telemetry::message_texts};

/// An item to add.
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    /// The message.
    pub input: String,
    /// The expected answer.
    pub expected: String,
    /// A JSON object.
    pub metadata: Map<String, Value>,
    /// Where it came from.
    pub source: String,
}

impl NewItem {
    /// Checks its limits; `what` names it in the error ("item 3", "line 7").
    fn checked(self, what: &str) -> std::result::Result<Self, String> {
        if self.input.trim().is_empty() {
            return Err(format!("{what}: input is required"));
        }
        if self.input.len() > MAX_INPUT_BYTES {
            return Err(format!("{what}: input is longer than {MAX_INPUT_BYTES} bytes"));
        }
        if self.expected.len() > MAX_EXPECTED_BYTES {
            return Err(format!("{what}: expected is longer than {MAX_EXPECTED_BYTES} bytes"));
        }
        if Value::Object(self.metadata.clone()).to_string().len() > MAX_METADATA_BYTES {
            return Err(format!("{what}: metadata is longer than {MAX_METADATA_BYTES} bytes"));
        }
        Ok(self)
    }
}

/// A text field of a JSON line: a string, or any other JSON value written out.
fn text_of(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Items from JSON Lines: `{"input", "expected" | "output", "metadata"}` a line; blank
/// lines are skipped.
pub fn from_jsonl(text: &str) -> std::result::Result<Vec<NewItem>, String> {
    let mut items = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let what = format!("jsonl line {}", n + 1);
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else {
            return Err(format!("{what}: not a JSON object"));
        };
        if let Some(unknown) =
            object.keys().find(|k| !["input", "expected", "output", "metadata"].contains(&k.as_str()))
        {
            return Err(format!("{what}: unknown field {unknown:?} (input, expected, metadata)"));
        }
        let metadata = match object.get("metadata") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(format!("{what}: metadata is a JSON object")),
        };
        let item = NewItem {
            input: text_of(object.get("input")),
            expected: text_of(object.get("expected").or_else(|| object.get("output"))),
            metadata,
            source: "jsonl".to_owned(),
        };
        items.push(item.checked(&what)?);
    }
    Ok(items)
}

/// The records of a CSV text (RFC 4180: quoted fields with `""` for a quote, CRLF or LF).
fn csv_records(text: &str) -> std::result::Result<Vec<Vec<String>>, String> {
    let mut records = Vec::new();
    let (mut record, mut field) = (Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut line = 1;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                _ => {
                    line += usize::from(c == '\n');
                    field.push(c);
                }
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => quoted = true,
            ',' => record.push(std::mem::take(&mut field)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                line += 1;
                record.push(std::mem::take(&mut field));
                if !(record.len() == 1 && record[0].is_empty()) {
                    records.push(std::mem::take(&mut record));
                }
                record.clear();
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return Err(format!("csv: a quoted field is not closed (line {line})"));
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    Ok(records)
}

/// Items from CSV: a header row naming `input` and optionally `expected` (or `output`);
/// every other column goes into the item's metadata.
pub fn from_csv(text: &str) -> std::result::Result<Vec<NewItem>, String> {
    let mut records = csv_records(text.trim_start_matches('\u{feff}'))?.into_iter();
    let Some(header) = records.next() else { return Ok(Vec::new()) };
    let header: Vec<String> = header.iter().map(|h| h.trim().to_lowercase()).collect();
    let input = header.iter().position(|h| h == "input").ok_or("csv: the header row has no input column")?;
    let expected = header.iter().position(|h| h == "expected").or_else(|| header.iter().position(|h| h == "output"));
    let mut items = Vec::new();
    for (n, record) in records.enumerate() {
        let what = format!("csv row {}", n + 2);
        if record.len() != header.len() {
            return Err(format!("{what}: {} fields, the header has {}", record.len(), header.len()));
        }
        let metadata: Map<String, Value> = header
            .iter()
            .zip(&record)
            .enumerate()
            .filter(|(i, _)| *i != input && Some(*i) != expected)
            .map(|(_, (name, value))| (name.clone(), Value::String(value.clone())))
            .collect();
        let item = NewItem {
            input: record[input].clone(),
            expected: expected.map(|i| record[i].clone()).unwrap_or_default(),
            metadata,
            source: "csv".to_owned(),
        };
        items.push(item.checked(&what)?);
    }
    Ok(items)
}

/// Items as given in a request.
fn from_given(given: &[DatasetItem]) -> std::result::Result<Vec<NewItem>, String> {
    given
        .iter()
        .enumerate()
        .map(|(n, item)| {
            let metadata = item.metadata.as_ref().map(roost_proto::json::value::struct_to_map).unwrap_or_default();
            NewItem { input: item.input.clone(), expected: item.expected.clone(), metadata, source: "api".to_owned() }
                .checked(&format!("item {}", n + 1))
        })
        .collect()
}

/// A hosted turn as an item, with the agent it belongs to.
#[derive(sqlx::FromRow)]
struct TurnItem {
    id: String,
    instance_id: String,
    account_id: String,
    status: String,
    text: String,
    reply: String,
    model: String,
}

impl TurnItem {
    fn item(self) -> NewItem {
        let mut metadata = Map::new();
        metadata.insert("agent_id".to_owned(), Value::String(self.instance_id));
        metadata.insert("model".to_owned(), Value::String(self.model));
        metadata.insert("turn_status".to_owned(), Value::String(self.status));
        NewItem { input: self.text, expected: self.reply, metadata, source: format!("turn:{}", self.id) }
    }
}

const TURN_COLUMNS: &str = "id, instance_id, account_id, status, text, reply, model";

impl Experiments {
    /// Every item a request names, in the order of its fields, checked; or why not.
    pub async fn items_of(&self, req: &AddDatasetItemsRequest, caller: &Caller) -> Result<Vec<NewItem>> {
        let mut items = from_given(&req.items).map_err(invalid)?;
        items.extend(from_jsonl(&req.jsonl).map_err(invalid)?);
        items.extend(from_csv(&req.csv).map_err(invalid)?);
        if req.turn_ids.len() > MAX_ITEMS_A_REQUEST {
            return Err(invalid(format!("at most {MAX_ITEMS_A_REQUEST} turns a request")));
        }
        for id in &req.turn_ids {
            let turn = self.turn(id).await?;
            match turn {
                Some(turn) if caller.sees(&turn.account_id) => items.push(turn.item()),
                _ => return Err(ApiError::not_found(format!("no turn {id}")).into()),
            }
        }
        if !req.calls.is_empty() && *caller != Caller::Operator {
            return Err(
                ApiError::invalid_argument("recorded model calls are the operator's: take turns instead").into()
            );
        }
        if req.calls.len() > MAX_ITEMS_A_REQUEST {
            return Err(invalid(format!("at most {MAX_ITEMS_A_REQUEST} calls a request")));
        }
        for call in &req.calls {
            items.push(
                self.call_item(call)
                    .await?
                    .ok_or_else(|| ApiError::not_found(format!("no model call {}/{}", call.trace_id, call.span_id)))?,
            );
        }
        if !req.session_id.is_empty() {
            items.extend(self.session_items(&req.session_id, caller).await?);
        }
        if items.len() > MAX_ITEMS_A_REQUEST {
            return Err(invalid(format!("at most {MAX_ITEMS_A_REQUEST} items a request, not {}", items.len())));
        }
        let n = items.len();
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| item.checked(&format!("item {} of {n}", i + 1)))
            .collect::<std::result::Result<_, _>>()
            .map_err(invalid)
    }

    async fn turn(&self, id: &str) -> Result<Option<TurnItem>> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = $1");
        Ok(on_reader!(self.store, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone())).bind(id).fetch_optional(pool).await
        })?)
    }

    /// A recorded model call: its last user message as the input, its answer as the
    /// expected output. `None` when it is not stored.
    async fn call_item(&self, call: &CallRef) -> Result<Option<NewItem>> {
        let Some((_, texts)) = message_texts::call(&self.store, &call.trace_id, &call.span_id).await? else {
            return Ok(None);
        };
        let split = texts.iter().rposition(|t| t.role != "assistant").map_or(0, |i| i + 1);
        let input = texts[..split].iter().rev().find(|t| t.role == "user").map(|t| t.content()).unwrap_or_default();
        let expected = texts[split..].iter().map(|t| t.content()).collect::<Vec<_>>().join("\n");
        let model: Option<Option<String>> = on_reader!(self.store, |pool| {
            sqlx::query_scalar(
                "SELECT COALESCE(response_model, request_model) FROM spans \
                 WHERE trace_seq = (SELECT seq FROM traces WHERE trace_id = $1) AND span_id = $2",
            )
            .bind(&call.trace_id)
            .bind(&call.span_id)
            .fetch_optional(pool)
            .await
        })?;
        let mut metadata = Map::new();
        metadata.insert("trace_id".to_owned(), Value::String(call.trace_id.clone()));
        metadata.insert("model".to_owned(), Value::String(model.flatten().unwrap_or_default()));
        Ok(Some(NewItem { input, expected, metadata, source: format!("span:{}/{}", call.trace_id, call.span_id) }))
    }

    /// A conversation's items: a hosted agent's completed turns, or (for the operator) a
    /// recorded session's model calls, in order.
    async fn session_items(&self, session_id: &str, caller: &Caller) -> Result<Vec<NewItem>> {
        let instance = self.hosting.store().instance(session_id).await?;
        if let Some(instance) = instance {
            if !caller.sees(&instance.account_id) {
                return Err(ApiError::not_found(format!("no session {session_id}")).into());
            }
            let sql = format!(
                "SELECT {TURN_COLUMNS} FROM turns WHERE instance_id = $1 AND status = 'completed' \
                 ORDER BY queued_at, seq LIMIT $2"
            );
            let turns: Vec<TurnItem> = on_reader!(self.store, |pool| {
                sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(session_id)
                    .bind(MAX_ITEMS_A_REQUEST as i64 + 1)
                    .fetch_all(pool)
                    .await
            })?;
            return Ok(turns.into_iter().map(TurnItem::item).collect());
        }
        if *caller != Caller::Operator {
            return Err(ApiError::not_found(format!("no session {session_id}")).into());
        }
        let calls: Vec<(String, String)> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT trace_id, span_id FROM spans WHERE session_id = $1 AND message_refs IS NOT NULL \
                 ORDER BY start_ns, id LIMIT $2",
            )
            .bind(session_id)
            .bind(MAX_ITEMS_A_REQUEST as i64 + 1)
            .fetch_all(pool)
            .await
        })?;
        if calls.is_empty() {
            return Err(ApiError::not_found(format!("no session {session_id} with model calls")).into());
        }
        let mut items = Vec::with_capacity(calls.len());
        for (trace_id, span_id) in calls {
            if let Some(item) = self.call_item(&CallRef { trace_id, span_id }).await?
                && !item.input.trim().is_empty()
            {
                items.push(item);
            }
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_lines_become_items() {
        let items =
            from_jsonl("{\"input\":\"2+2?\",\"expected\":\"4\",\"metadata\":{\"k\":1}}\n\n{\"input\":\"hi\"}\n")
                .unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!((items[0].input.as_str(), items[0].expected.as_str()), ("2+2?", "4"));
        assert_eq!(items[0].metadata["k"], 1);
        assert!(from_jsonl("{\"input\":\"x\",\"extra\":1}").unwrap_err().contains("line 1"));
        assert!(from_jsonl("[1]").is_err());
        assert!(from_jsonl("{\"expected\":\"4\"}").unwrap_err().contains("input is required"));
    }

    #[test]
    fn csv_rows_become_items_with_quotes_and_extra_columns() {
        let text = "input,expected,topic\r\n\"Say \"\"hi\"\"\",\"hi,\nthere\",greeting\nplain,,misc\n";
        let items = from_csv(text).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].input, "Say \"hi\"");
        assert_eq!(items[0].expected, "hi,\nthere");
        assert_eq!(items[0].metadata["topic"], "greeting");
        assert_eq!(items[1].expected, "");
        assert!(from_csv("question,answer\nx,y\n").unwrap_err().contains("no input column"));
        assert!(from_csv("input,expected\nx\n").unwrap_err().contains("row 2"));
        assert!(from_csv("input\n\"open").is_err());
        assert_eq!(from_csv("").unwrap(), vec![]);
    }
}
