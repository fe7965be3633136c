//! Scores as the store keeps them: their values, the bounds every way in shares (the REST
//! and gRPC `ScoreService`, OTLP, evaluators, the pages), and the scores OTLP carries.
//!
//! **Over OTLP** a score is an evaluation event: a span event or a log record named
//! `gen_ai.evaluation.result` (OpenTelemetry's GenAI convention), `score`, `feedback` or
//! `annotation`. Its attributes are read in the convention's names and in those of the
//! tools people send feedback from, Langfuse (`langfuse.score.*`) and Phoenix/OpenInference
//! annotations (`annotation.*`): see [`NAME`], [`VALUE`], [`LABEL`], [`COMMENT`],
//! [`SOURCE`]. A span event scores its span; a log record scores the span or trace its
//! context names, else the session its attributes name. An event without a name, or with
//! neither a value nor a label, stays an ordinary event. A hosted agent's own telemetry
//! never scores anything ([`super::agent_claims`] renames its evaluation events).

use roost_proto::{
    json::value::{from_json, to_json},
    v1::Score,
};
use serde_json::{Map, Value as Json};
use sha2::{Digest as _, Sha256};

use super::rows::{LogRow, ScoreRow, SpanRow};

/// Longest score name, category, author or evaluator id.
pub const MAX_NAME_BYTES: usize = 256;
/// Longest comment.
pub const MAX_COMMENT_BYTES: usize = 4096;
/// Who gives scores: code through the API, a person, an evaluator.
pub const SOURCES: [&str; 3] = ["api", "human", "eval"];
/// The kinds of value.
pub const KINDS: [&str; 3] = ["numeric", "boolean", "categorical"];

/// Event names that carry a score.
pub const EVENT_NAMES: [&str; 4] = ["gen_ai.evaluation.result", "score", "feedback", "annotation"];
/// Attributes naming the score, first found wins.
pub const NAME: [&str; 4] = ["gen_ai.evaluation.name", "langfuse.score.name", "annotation.name", "score.name"];
/// Attributes holding its number (or boolean).
pub const VALUE: [&str; 4] =
    ["gen_ai.evaluation.score.value", "langfuse.score.value", "annotation.score", "score.value"];
/// Attributes holding its category.
pub const LABEL: [&str; 4] =
    ["gen_ai.evaluation.score.label", "langfuse.score.string_value", "annotation.label", "score.label"];
/// Attributes holding its comment.
pub const COMMENT: [&str; 4] =
    ["gen_ai.evaluation.explanation", "langfuse.score.comment", "annotation.explanation", "score.comment"];
/// Attributes saying who gave it: `api`/`human`/`eval`, Langfuse's `API`/`ANNOTATION`/`EVAL`
/// or Phoenix's `CODE`/`HUMAN`/`LLM`. An evaluation event is `eval` when none says.
pub const SOURCE: [&str; 3] = ["roost.score.source", "langfuse.score.source", "annotation.annotator_kind"];

/// The prefix [`super::agent_claims`] puts before a hosted agent's own evaluation events,
/// so they are kept as events but score nothing.
pub const CLAIMED_PREFIX: &str = "roost.claimed.";

/// A score's value as columns: (kind, number, category).
pub type Value = (&'static str, Option<f64>, String);

/// A JSON value as a score's: a finite number, a boolean, or a non-empty string of at most
/// [`MAX_NAME_BYTES`].
pub fn value_of(json: &Json) -> Result<Value, String> {
    match json {
        Json::Bool(b) => Ok(("boolean", Some(f64::from(u8::from(*b))), b.to_string())),
        Json::Number(n) => match n.as_f64() {
            Some(v) if v.is_finite() => Ok(("numeric", Some(v), String::new())),
            _ => Err("value must be a finite number".to_owned()),
        },
        Json::String(s) if s.trim().is_empty() => Err("a category value must not be empty".to_owned()),
        Json::String(s) if s.len() > MAX_NAME_BYTES => {
            Err(format!("a category value is at most {MAX_NAME_BYTES} bytes"))
        }
        Json::String(s) => Ok(("categorical", None, s.clone())),
        Json::Null => Err("value is required: a number, true/false or a category".to_owned()),
        _ => Err("value must be a number, true/false or a category (a string)".to_owned()),
    }
}

/// A stored score's value as JSON: its number, its boolean or its category.
pub fn value_json(kind: &str, value: Option<f64>, label: &str) -> Json {
    match kind {
        "boolean" => Json::Bool(value.is_some_and(|v| v != 0.0)),
        "categorical" => Json::String(label.to_owned()),
        _ => value.and_then(serde_json::Number::from_f64).map_or(Json::Null, Json::Number),
    }
}

/// What is wrong with a score's free fields, if anything: its name, comment, source,
/// author and evaluator.
pub fn check(row: &ScoreRow) -> Result<(), String> {
    if row.name.trim().is_empty() {
        return Err("name is required".to_owned());
    }
    for (field, value) in [("name", &row.name), ("author", &row.author), ("evaluator_id", &row.evaluator_id)] {
        if value.len() > MAX_NAME_BYTES {
            return Err(format!("{field} is longer than {MAX_NAME_BYTES} bytes"));
        }
    }
    if row.comment.len() > MAX_COMMENT_BYTES {
        return Err(format!("comment is longer than {MAX_COMMENT_BYTES} bytes"));
    }
    if !SOURCES.contains(&row.source.as_str()) {
        return Err(format!("source must be one of {}, not {:?}", SOURCES.join(", "), row.source));
    }
    Ok(())
}

/// An id made from a score's content, so an OTLP exporter resending its events stores each
/// score once.
pub fn content_id(row: &ScoreRow) -> String {
    let mut hash = Sha256::new();
    for part in [&row.trace_id, &row.span_id, &row.session_id, &row.name, &row.label, &row.comment, &row.source] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.update(row.time_ns.to_le_bytes());
    hash.update(row.value.map_or(u64::MAX, f64::to_bits).to_le_bytes());
    format!("score_{}", hex::encode(&hash.finalize()[..12]))
}

/// True when an event of this name carries a score.
pub fn is_evaluation(name: &str) -> bool {
    EVENT_NAMES.contains(&name)
}

/// The first of `keys` present in `attributes`.
fn first<'a>(attributes: &'a Map<String, Json>, keys: &[&str]) -> Option<&'a Json> {
    keys.iter().find_map(|k| attributes.get(*k)).filter(|v| !v.is_null())
}

fn text(value: Option<&Json>) -> String {
    match value {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The source an event's attributes name, in any of the tools' words.
fn source(attributes: &Map<String, Json>) -> String {
    match text(first(attributes, &SOURCE)).to_ascii_lowercase().as_str() {
        "api" | "code" => "api",
        "human" | "annotation" => "human",
        _ => "eval",
    }
    .to_owned()
}

/// The score an evaluation event's attributes describe, without its target: `None` when
/// it names no score or has no value.
fn from_attributes(attributes: &Map<String, Json>, time_ns: i64) -> Option<ScoreRow> {
    let name = text(first(attributes, &NAME));
    let label = text(first(attributes, &LABEL));
    let (kind, value, label) = match first(attributes, &VALUE) {
        Some(Json::Bool(b)) => ("boolean", Some(f64::from(u8::from(*b))), b.to_string()),
        Some(Json::Number(n)) => ("numeric", n.as_f64().filter(|v| v.is_finite()), label),
        Some(Json::String(s)) if s.trim().parse::<f64>().is_ok_and(f64::is_finite) => {
            ("numeric", s.trim().parse().ok(), label)
        }
        _ if !label.is_empty() => ("categorical", None, label),
        _ => return None,
    };
    if kind == "numeric" && value.is_none() {
        return None;
    }
    let mut row = ScoreRow {
        name,
        kind,
        value,
        label: truncate(label, MAX_NAME_BYTES),
        comment: truncate(text(first(attributes, &COMMENT)), MAX_COMMENT_BYTES),
        source: source(attributes),
        time_ns,
        ..ScoreRow::default()
    };
    row.name = truncate(std::mem::take(&mut row.name), MAX_NAME_BYTES);
    check(&row).is_ok().then_some(row)
}

/// `s` cut to at most `max` bytes, at a character boundary (a score's text fields).
pub fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The score a span event carries, on its span.
pub fn from_span_event(
    span: &SpanRow,
    service: &str,
    name: &str,
    attributes: &Map<String, Json>,
    time_ns: i64,
) -> Option<ScoreRow> {
    if !is_evaluation(name) {
        return None;
    }
    let mut row = from_attributes(attributes, time_ns)?;
    row.target = "span";
    row.trace_id.clone_from(&span.trace_id);
    row.span_id.clone_from(&span.span_id);
    row.session_id = span.gen_ai.session_id.clone().unwrap_or_default();
    row.model = span.gen_ai.model().unwrap_or_default().to_owned();
    row.agent_id = span.gen_ai.agent_id.clone().unwrap_or_default();
    row.service = service.to_owned();
    row.author = service.to_owned();
    row.id = content_id(&row);
    Some(row)
}

/// The score a log record carries, on the span or trace of its context, else on the
/// session it names.
pub fn from_log(log: &LogRow, service: &str) -> Option<ScoreRow> {
    if !log.event_name.as_deref().is_some_and(is_evaluation) {
        return None;
    }
    let attributes: Map<String, Json> = serde_json::from_str(&log.attributes).ok()?;
    let mut row = from_attributes(&attributes, log.time_ns)?;
    row.session_id = log.gen_ai.session_id.clone().unwrap_or_default();
    match (&log.trace_id, &log.span_id) {
        (Some(trace), Some(span)) => {
            row.target = "span";
            row.trace_id.clone_from(trace);
            row.span_id.clone_from(span);
        }
        (Some(trace), None) => {
            row.target = "trace";
            row.trace_id.clone_from(trace);
        }
        _ if !row.session_id.is_empty() => row.target = "session",
        _ => return None,
    }
    row.model = log.gen_ai.model().unwrap_or_default().to_owned();
    row.agent_id = log.gen_ai.agent_id.clone().unwrap_or_default();
    row.service = service.to_owned();
    row.author = service.to_owned();
    row.id = content_id(&row);
    Some(row)
}

/// A stored score as the API shows it.
pub fn to_proto(row: &ScoreRow) -> Score {
    Score {
        id: row.id.clone(),
        name: row.name.clone(),
        value: Some(from_json(&value_json(row.kind, row.value, &row.label))),
        comment: row.comment.clone(),
        source: row.source.clone(),
        trace_id: row.trace_id.clone(),
        span_id: row.span_id.clone(),
        session_id: row.session_id.clone(),
        turn_id: row.turn_id.clone(),
        time: Some(crate::time::timestamp_ns(row.time_ns)),
        target: row.target.to_owned(),
        kind: row.kind.to_owned(),
        model: row.model.clone(),
        agent_id: row.agent_id.clone(),
        evaluator_id: row.evaluator_id.clone(),
        author: row.author.clone(),
    }
}

/// A score as a node stored it (every field filled in), as a row; `None` when it breaks
/// this roost's bounds (a node with other rules), so it is dropped rather than failing
/// the node's whole batch, which it would push again forever.
pub fn from_stored(score: &Score) -> Option<ScoreRow> {
    let (kind, value, label) = value_of(&score.value.as_ref().map(to_json)?).ok()?;
    let target = ["trace", "span", "session", "turn"].into_iter().find(|t| *t == score.target)?;
    let row = ScoreRow {
        id: score.id.clone(),
        name: score.name.clone(),
        kind,
        value,
        label,
        comment: score.comment.clone(),
        source: score.source.clone(),
        target,
        trace_id: score.trace_id.clone(),
        span_id: score.span_id.clone(),
        session_id: score.session_id.clone(),
        turn_id: score.turn_id.clone(),
        model: score.model.clone(),
        agent_id: score.agent_id.clone(),
        service: String::new(),
        evaluator_id: score.evaluator_id.clone(),
        author: score.author.clone(),
        time_ns: score.time.as_ref().map_or(0, |t| t.seconds.saturating_mul(1_000_000_000) + i64::from(t.nanos)),
    };
    (!row.id.is_empty() && row.id.len() <= MAX_NAME_BYTES && check(&row).is_ok()).then_some(row)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn attrs(value: Json) -> Map<String, Json> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn values_are_numbers_booleans_or_categories() {
        assert_eq!(value_of(&json!(0.8)), Ok(("numeric", Some(0.8), String::new())));
        assert_eq!(value_of(&json!(true)), Ok(("boolean", Some(1.0), "true".to_owned())));
        assert_eq!(value_of(&json!("good")), Ok(("categorical", None, "good".to_owned())));
        assert!(value_of(&json!(null)).is_err());
        assert!(value_of(&json!("")).is_err());
        assert!(value_of(&json!([1])).is_err());
        assert!(value_of(&json!("x".repeat(257))).is_err());
        assert_eq!(value_json("boolean", Some(0.0), "false"), json!(false));
        assert_eq!(value_json("categorical", None, "good"), json!("good"));
        assert_eq!(value_json("numeric", Some(0.5), ""), json!(0.5));
    }

    #[test]
    fn the_conventions_names_are_read() {
        let semconv = attrs(json!({"gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.8,
            "gen_ai.evaluation.score.label": "relevant", "gen_ai.evaluation.explanation": "on topic"}));
        let row = from_attributes(&semconv, 5).expect("a score");
        assert_eq!((row.name.as_str(), row.kind, row.value), ("relevance", "numeric", Some(0.8)));
        assert_eq!((row.label.as_str(), row.comment.as_str(), row.source.as_str()), ("relevant", "on topic", "eval"));

        let langfuse = attrs(json!({"langfuse.score.name": "thumbs", "langfuse.score.value": true,
            "langfuse.score.source": "ANNOTATION"}));
        let row = from_attributes(&langfuse, 5).expect("a score");
        assert_eq!((row.kind, row.value, row.source.as_str()), ("boolean", Some(1.0), "human"));

        let phoenix = attrs(json!({"annotation.name": "tone", "annotation.label": "friendly",
            "annotation.annotator_kind": "CODE"}));
        let row = from_attributes(&phoenix, 5).expect("a score");
        assert_eq!((row.kind, row.label.as_str(), row.source.as_str()), ("categorical", "friendly", "api"));

        assert!(from_attributes(&attrs(json!({"gen_ai.evaluation.name": "x"})), 5).is_none(), "no value");
        assert!(from_attributes(&attrs(json!({"gen_ai.evaluation.score.value": 1})), 5).is_none(), "no name");
    }

    #[test]
    fn content_ids_are_stable_and_differ_by_content() {
        let a = ScoreRow { name: "q".into(), value: Some(1.0), trace_id: "t".into(), ..ScoreRow::default() };
        let b = ScoreRow { value: Some(0.5), ..a.clone() };
        assert_eq!(content_id(&a), content_id(&a.clone()));
        assert_ne!(content_id(&a), content_id(&b));
    }
}
