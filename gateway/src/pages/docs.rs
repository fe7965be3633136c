//! `/docs`: the API reference as a page, rendered on the server from the OpenAPI document
//! (`/openapi.json`, [`crate::openapi`]): one section per tag, each operation with its
//! parameters, body and answer fields, and error statuses. Open, like the document; no
//! script and no CDN.

use askama::Template;
use axum::{Router, response::Response, routing::get};
use serde_json::Value;

use super::layout::{Chrome, PageCall};
use crate::Core;

pub(super) fn routes() -> Router<Core> {
    Router::new().route("/docs", get(page))
}

#[derive(Template)]
#[template(path = "docs.html")]
struct DocsPage {
    chrome: Chrome,
    sections: Vec<Section>,
}

struct Section {
    anchor: String,
    name: String,
    /// HTML: the description with its inline Markdown set (`inline_markdown`).
    about: String,
    operations: Vec<Operation>,
}

struct Operation {
    anchor: String,
    method: String,
    path: String,
    /// HTML, as `Section::about`.
    about: String,
    auth: &'static str,
    params: Vec<Field>,
    body: Option<Shape>,
    answer: Option<Shape>,
    errors: Vec<String>,
}

/// A body or an answer: its media type, message and fields.
struct Shape {
    media: String,
    status: String,
    message: String,
    fields: Vec<Field>,
}

struct Field {
    name: String,
    kind: String,
    /// HTML, as `Section::about`.
    about: String,
}

/// The `$ref`'d schema's name, if `schema` is a reference (or an array of one).
fn message_of(schema: &Value) -> Option<&str> {
    let schema = if schema["type"] == "array" { &schema["items"] } else { schema };
    schema["$ref"].as_str()?.strip_prefix("#/components/schemas/")
}

/// How a property's type reads: `string`, `integer`, `array of Turn`, a value list.
fn kind_of(schema: &Value) -> String {
    if let Some(values) = schema["enum"].as_array() {
        return values.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | ");
    }
    // A field that may be null has the type `[kind, "null"]`.
    let (kind, nullable) = match &schema["type"] {
        Value::Array(kinds) => (kinds.iter().find(|k| *k != "null").and_then(Value::as_str), kinds.len() > 1),
        kind => (kind.as_str(), false),
    };
    let kind = match kind {
        Some("array") => format!("array of {}", kind_of(&schema["items"])),
        Some("string") if schema["format"] == "date-time" => "timestamp".to_owned(),
        Some(kind) => kind.to_owned(),
        None => message_of(schema).unwrap_or("any").to_owned(),
    };
    if nullable { format!("{kind} or null") } else { kind }
}

fn fields(doc: &Value, message: &str) -> Vec<Field> {
    let Some(properties) = doc["components"]["schemas"][message]["properties"].as_object() else { return Vec::new() };
    properties
        .iter()
        .map(|(name, schema)| Field {
            name: name.clone(),
            kind: kind_of(schema),
            about: super::inline_markdown(schema["description"].as_str().unwrap_or_default()),
        })
        .collect()
}

/// The first media type of `content` as a [`Shape`].
fn shape(doc: &Value, status: &str, content: &Value) -> Option<Shape> {
    let (media, body) = content.as_object()?.iter().next()?;
    // A stream's schema is its events': the message is their `data` (see the OpenAPI
    // document's SSE answers).
    let schema = match &body["schema"]["else"]["properties"]["data"]["contentSchema"] {
        Value::Null => &body["schema"],
        data => data,
    };
    let message = message_of(schema).map(str::to_owned);
    let listed = if schema["type"] == "array" { "array of " } else { "" };
    Some(Shape {
        media: media.clone(),
        status: status.to_owned(),
        message: message.as_ref().map(|m| format!("{listed}{m}")).unwrap_or_else(|| kind_of(schema)),
        fields: message.map(|m| fields(doc, &m)).unwrap_or_default(),
    })
}

fn operation(doc: &Value, path: &str, method: &str, op: &Value) -> Operation {
    let responses = op["responses"].as_object().cloned().unwrap_or_default();
    let answer = responses.iter().find(|(status, _)| status.starts_with('2'));
    let auth = match op["security"].as_array().map(Vec::as_slice) {
        Some([]) => "open",
        Some([first, ..]) if first.get("accountKey").is_some() => "account key",
        _ => "dashboard token (or loopback)",
    };
    Operation {
        anchor: op["operationId"].as_str().unwrap_or_default().to_owned(),
        method: method.to_uppercase(),
        path: path.to_owned(),
        about: super::inline_markdown(op["description"].as_str().unwrap_or_default()),
        auth,
        params: op["parameters"]
            .as_array()
            .map(|params| {
                params
                    .iter()
                    .map(|p| Field {
                        name: p["name"].as_str().unwrap_or_default().to_owned(),
                        kind: p["in"].as_str().unwrap_or_default().to_owned(),
                        about: super::inline_markdown(p["description"].as_str().unwrap_or_default()),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        body: shape(doc, "", &op["requestBody"]["content"]),
        answer: answer.and_then(|(status, a)| shape(doc, status, &a["content"])),
        errors: responses
            .iter()
            .filter(|(status, _)| !status.starts_with('2'))
            .map(|(status, e)| format!("{status}: {}", e["description"].as_str().unwrap_or_default()))
            .collect(),
    }
}

/// The page's sections from the document, in its tag order.
fn sections(doc: &Value) -> Vec<Section> {
    let tags = doc["tags"].as_array().cloned().unwrap_or_default();
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    tags.iter()
        .map(|tag| {
            let name = tag["name"].as_str().unwrap_or_default().to_owned();
            let mut operations = Vec::new();
            for (path, item) in &paths {
                for (method, op) in item.as_object().into_iter().flatten() {
                    if op["tags"][0] == name.as_str() {
                        operations.push(operation(doc, path, method, op));
                    }
                }
            }
            Section {
                anchor: name.to_lowercase().replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
                about: super::inline_markdown(tag["description"].as_str().unwrap_or_default()),
                name,
                operations,
            }
        })
        .filter(|s| !s.operations.is_empty())
        .collect()
}

async fn page(page: PageCall) -> Response {
    let doc = crate::openapi::document(&crate::sections());
    page.render(&DocsPage { chrome: page.chrome("API reference", ""), sections: sections(&doc) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nullable_fields_and_streams_read_as_their_kind() {
        assert_eq!(kind_of(&json!({"type": ["string", "null"], "format": "date-time"})), "timestamp or null");
        assert_eq!(kind_of(&json!({"type": ["object", "null"]})), "object or null");
        assert_eq!(kind_of(&json!({"type": "array", "items": {"$ref": "#/components/schemas/Turn"}})), "array of Turn");
        let doc = crate::openapi::document(&crate::sections());
        let logs = &doc["paths"]["/api/logs"]["get"]["responses"]["200"]["content"];
        let stream = shape(&doc, "200", logs).expect("the log stream's answer");
        assert_eq!((stream.media.as_str(), stream.message.as_str()), ("text/event-stream", "LogLine"));
        assert!(stream.fields.iter().any(|f| f.name == "message"));
    }
}
