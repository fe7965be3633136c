//! `GET /openapi.json`: the REST contract as an OpenAPI 3.1 document, so REST clients can
//! be generated and tools can fuzz the API.
//!
//! Rendered from the same definitions as `/skill.md`, so neither can drift from what is
//! served: every route's [`Endpoint`] (the router registers nothing else), and for bodies
//! and answers the `roost.v1` messages as JSON Schema from the descriptor set
//! ([`roost_proto::describe`]). Each route's errors (its own, and those its guard and body
//! imply) answer the shared `{error, code}` body; security follows the access policy: open
//! routes none, account routes the account key, dashboard routes the dashboard token (or
//! nothing, from loopback). Sections of the skill file are the document's tags.

use std::collections::{BTreeMap, BTreeSet};

use axum::{
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use roost_proto::{ErrorReason, describe::contract};
use serde_json::{Map, Value, json};

use crate::{
    access::Guard,
    api::{Answer, Body, Endpoint, Routes},
};

const OPENAPI: Endpoint = Endpoint::get(
    "/openapi.json",
    "This API as an OpenAPI 3.1 document (the same routes and messages as /skill.md), for generating clients and \
     testing tools. Always open.",
)
.answer_of(Answer::Document("application/json"));

/// The document's own route.
pub(crate) fn routes() -> Routes {
    Routes::new("OpenAPI", "The REST contract as an OpenAPI 3.1 document.").at(&OPENAPI, serve)
}

async fn serve() -> Response {
    static RENDERED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let text = RENDERED.get_or_init(|| document(&crate::sections()).to_string());
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], text.clone()).into_response()
}

/// The name of the shared error body's schema.
const ERROR_SCHEMA: &str = "Error";

/// The whole document for `sections`.
pub fn document(sections: &[Routes]) -> Value {
    let mut messages = BTreeSet::new();
    let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut tags = Vec::new();
    for section in sections {
        tags.push(json!({"name": section.title, "description": section.intro}));
        for endpoint in &section.endpoints {
            let operation = operation(section.title, endpoint, &mut messages);
            paths.entry(endpoint.shown_path()).or_default().insert(endpoint.verb.as_str().to_lowercase(), operation);
        }
    }
    let mut schemas = Map::new();
    schemas.insert(
        ERROR_SCHEMA.into(),
        json!({
            "type": "object",
            "description": "Every error: a readable message and a stable code (the error table in docs/api.md).",
            "properties": {
                "error": {"type": "string", "description": "What went wrong, for a person."},
                "code": {"type": "string", "enum": ErrorReason::ALL.iter().map(|r| r.code()).collect::<Vec<_>>()},
            },
            "required": ["error", "code"],
        }),
    );
    for message in messages {
        schemas.insert(message.clone(), Value::Object(contract().input_schema(&message)));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "roost",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Hosted always-on agents and an observability dashboard. The same operations are served \
                            over gRPC (roost.v1, with reflection) and MCP (/mcp); /skill.md is the reference in prose.",
        },
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "accountKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An account's API key (rsk_…), from `roost accounts create` or the web app's /developers.",
                },
                "dashboardToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "One of SERVICE_API_TOKENS; without tokens configured, loopback clients need none.",
                },
            },
        },
    })
}

/// A `$ref` to a message's schema, noting that the message is used.
fn reference(message: &str, messages: &mut BTreeSet<String>) -> Value {
    if message.is_empty() {
        return json!({"type": "object"});
    }
    messages.insert(message.to_owned());
    json!({"$ref": format!("#/components/schemas/{message}")})
}

fn operation(tag: &str, endpoint: &Endpoint, messages: &mut BTreeSet<String>) -> Value {
    let mut op = Map::new();
    op.insert("tags".into(), json!([tag]));
    op.insert("summary".into(), json!(first_sentence(endpoint.summary)));
    op.insert("description".into(), json!(endpoint.summary));
    op.insert("operationId".into(), json!(operation_id(endpoint)));
    let mut parameters: Vec<Value> = path_parameters(endpoint.path)
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    parameters.extend(endpoint.params.iter().map(|(name, about)| {
        json!({"name": name, "in": "query", "required": false, "description": about, "schema": {"type": "string"}})
    }));
    if !parameters.is_empty() {
        op.insert("parameters".into(), Value::Array(parameters));
    }
    if let Some(body) = request_body(endpoint.body, messages) {
        op.insert("requestBody".into(), body);
    }
    let mut responses = Map::new();
    let (status, answer) = response(endpoint.answer, messages);
    responses.insert(status.to_string(), answer);
    let mut by_status: BTreeMap<u16, Vec<&str>> = BTreeMap::new();
    for reason in endpoint.all_errors() {
        by_status.entry(reason.http_status().as_u16()).or_default().push(reason.code());
    }
    for (status, codes) in by_status {
        responses.insert(
            status.to_string(),
            json!({
                "description": format!("Error: {}.", codes.join(", ")),
                "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{ERROR_SCHEMA}")}}},
            }),
        );
    }
    op.insert("responses".into(), Value::Object(responses));
    let security = match endpoint.guard() {
        Guard::Open => json!([]),
        Guard::OwnKeys => json!([{"accountKey": []}]),
        Guard::Dashboard | Guard::Page | Guard::App => json!([{"dashboardToken": []}, {}]),
    };
    op.insert("security".into(), security);
    Value::Object(op)
}

fn request_body(body: Body, messages: &mut BTreeSet<String>) -> Option<Value> {
    let protobuf = json!({"schema": {"type": "string", "contentEncoding": "binary"}});
    let content = match body {
        Body::None => return None,
        Body::Json(message) => json!({"application/json": {"schema": reference(message, messages)}}),
        Body::JsonText(about) => json!({"application/json": {"schema": {"type": "object", "description": about}}}),
        Body::Otlp => json!({
            "application/x-protobuf": protobuf,
            "application/json": {"schema": {"type": "object", "description": "An OTLP export request (OTLP/JSON)."}},
        }),
        Body::ProtobufOrJson(message) => json!({
            "application/x-protobuf": protobuf,
            "application/json": {"schema": reference(message, messages)},
        }),
    };
    Some(json!({"required": false, "content": content}))
}

fn response(answer: Answer, messages: &mut BTreeSet<String>) -> (u16, Value) {
    match answer {
        Answer::Json(status, message) => (
            status,
            json!({"description": "OK.", "content": {"application/json": {"schema": reference(message, messages)}}}),
        ),
        Answer::JsonArray(message) => (
            200,
            json!({"description": "OK.", "content": {"application/json": {"schema": {"type": "array", "items": reference(message, messages)}}}}),
        ),
        Answer::JsonText(status, about) => {
            (status, json!({"description": about, "content": {"application/json": {"schema": {"type": "object"}}}}))
        }
        Answer::Sse(message) => {
            // Each event, as OpenAPI 3.2 describes server-sent events (and schemathesis checks
            // them): `data` is JSON whose schema depends on the event's name.
            let item = reference(message, messages);
            let data = |schema: Value| json!({"properties": {"data": {"contentMediaType": "application/json", "contentSchema": schema}}});
            let lagged =
                json!({"type": "object", "properties": {"skipped": {"type": "integer"}}, "required": ["skipped"]});
            (
                200,
                json!({
                    "description": format!(
                        "A stream of server-sent events: each `message` carries a {message} as JSON with the item's id; \
                         a client that fell behind gets a `lagged` event with how many it missed."
                    ),
                    "content": {"text/event-stream": {"schema": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {
                            "id": {"type": "string"},
                            "event": {"type": "string", "enum": ["message", "lagged"]},
                            "data": {"type": "string"},
                        },
                        "if": {"properties": {"event": {"const": "lagged"}}, "required": ["event"]},
                        "then": data(lagged),
                        "else": data(item),
                    }}},
                }),
            )
        }
        Answer::Otlp => (
            200,
            json!({"description": "The OTLP export response, in the request's encoding.", "content": {
                "application/x-protobuf": {"schema": {"type": "string", "contentEncoding": "binary"}},
                "application/json": {"schema": {"type": "object"}},
            }}),
        ),
        Answer::Mcp => (
            200,
            json!({"description": "MCP Streamable HTTP: JSON-RPC answers as JSON or server-sent events.", "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": {"type": "string"}},
            }}),
        ),
        // One media type, or several separated by commas (the request picks one).
        Answer::Document(media) => {
            let content: Map<String, Value> =
                media.split(',').map(|m| (m.trim().to_owned(), json!({"schema": {"type": "string"}}))).collect();
            (200, json!({"description": "The document.", "content": content}))
        }
    }
}

/// The `{name}`s of a path.
fn path_parameters(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| name.trim_start_matches('*'))
}

/// `get_api_instances_instance_id`, from the method and the path.
fn operation_id(endpoint: &Endpoint) -> String {
    let path: String =
        endpoint.path.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    let words: Vec<&str> = path.split('_').filter(|w| !w.is_empty()).collect();
    format!("{}_{}", endpoint.verb.as_str().to_lowercase(), words.join("_"))
}

/// A summary's first sentence, for the operation's short summary.
fn first_sentence(text: &str) -> &str {
    text.find(". ").map_or(text, |end| &text[..=end]).trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` in `value`.
    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref") {
                    out.push(target);
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_served_route_is_in_the_document_and_every_reference_resolves() {
        let sections = crate::sections();
        let doc = document(&sections);
        assert_eq!(doc["openapi"], "3.1.0");
        let mut ids = BTreeSet::new();
        for endpoint in sections.iter().flat_map(|s| s.endpoints.iter()) {
            let op = &doc["paths"][endpoint.shown_path()][endpoint.verb.as_str().to_lowercase()];
            assert!(op.is_object(), "{} {} is not in the document", endpoint.verb.as_str(), endpoint.path);
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_owned()), "operationIds are unique");
            for name in path_parameters(endpoint.path) {
                let declared =
                    op["parameters"].as_array().unwrap().iter().any(|p| p["name"] == name && p["in"] == "path");
                assert!(declared, "{}: path parameter {name}", endpoint.path);
            }
            assert!(op["responses"].as_object().unwrap().keys().any(|k| k.starts_with('2')), "{}", endpoint.path);
        }
        let mut targets = Vec::new();
        refs(&doc, &mut targets);
        assert!(!targets.is_empty());
        for target in targets {
            let name = target.strip_prefix("#/components/schemas/").expect("a schema reference");
            assert!(doc["components"]["schemas"][name].is_object(), "{target} resolves");
        }
        assert_eq!(doc["paths"]["/api/instances/{instance_id}"]["get"]["security"], json!([{"accountKey": []}]));
        assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));
    }
}
