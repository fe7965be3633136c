//! `GET /skill.md`: the skill file that doubles as the API reference.
//!
//! Rendered from the definitions the server runs on: the routes' [`Endpoint`]s (the router
//! registers nothing else), the MCP tool table, the q/1 registry, and the `roost.v1`
//! descriptor for every body, answer and error code. `{base_url}` becomes the address the
//! request was sent to.

use std::{collections::BTreeSet, fmt::Write as _};

use axum::{
    extract::State,
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};
use roost_proto::{
    ErrorReason,
    describe::{JsonType, MessageDoc, contract},
    v1::ListShapesResponse,
};
use tokio::sync::OnceCell;

use crate::{
    Core,
    access::Guard,
    api::{Answer, Body, Endpoint, Routes},
    mcp::tools::{self, TOOLS, ToolDef},
};

const SKILL: Endpoint = Endpoint::get(
    "/skill.md",
    "This file: a skill for LLM agents (front matter, then usage) and the complete API reference. Always open.",
)
.answer_of(Answer::Document("text/markdown"));

/// The skill file's own route.
pub(crate) fn routes() -> Routes {
    Routes::new("Skill file", "The reference you are reading.").at(&SKILL, serve)
}

/// The placeholder replaced by the request's own address.
const BASE_URL: &str = "{base_url}";

async fn serve(State(core): State<Core>, headers: HeaderMap) -> Response {
    static RENDERED: OnceCell<String> = OnceCell::const_new();
    let text = RENDERED
        .get_or_init(|| async {
            let registry = tools::registry(&core).await;
            render(&crate::sections(), &registry)
        })
        .await;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1:8900");
    let scheme = headers.get("x-forwarded-proto").and_then(|h| h.to_str().ok()).unwrap_or("http");
    let body = text.replace(BASE_URL, &format!("{scheme}://{host}"));
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/markdown; charset=utf-8"))], body).into_response()
}

/// The whole file, with `{base_url}` left in.
pub fn render(sections: &[Routes], registry: &ListShapesResponse) -> String {
    let mut out = String::new();
    let mut types = BTreeSet::new();
    intro(&mut out);
    errors(&mut out);
    senders(&mut out);
    for section in sections {
        let _ = writeln!(out, "## {}\n\n{}\n", section.title, section.intro);
        for endpoint in &section.endpoints {
            endpoint_doc(&mut out, endpoint, &mut types);
        }
    }
    tools_doc(&mut out, registry, &mut types);
    types_doc(&mut out, types);
    out
}

/// What telemetry senders' attributes become (the ingest attribute map).
fn senders(out: &mut String) {
    let _ = writeln!(
        out,
        "## What senders' telemetry becomes\n\nOTLP spans and log records are read through one attribute \
map: for each field, the first of these attribute names present on the item wins, then on its resource. \
Input tokens include cached ones; a sender's own cost wins over the price book.\n\n{}",
        roost_proto::attribute_map::markdown()
    );
}

fn intro(out: &mut String) {
    out.push_str(
        "---\n\
name: roost\n\
description: Host always-on AI agents for an account (create from a runtime catalogue, message synchronously, \
reconfigure, pause, resume, destroy; billed in credits) and observe agent activity (OTLP, runs, q/1 queries, live \
streams). Use it over REST, gRPC or its MCP server at {base_url}/mcp.\n\
---\n\n\
# roost\n\n\
roost hosts always-on AI agents and observes what agents do. Everything here works over REST at `{base_url}`, over \
gRPC on the same port (package `roost.v1`, with reflection), and, for the hosted-agent calls and queries, as MCP \
tools at `{base_url}/mcp` (Streamable HTTP).\n\n\
## Usage\n\n\
1. `GET {base_url}/api/runtimes` lists the runtimes; pick an `id`.\n\
2. `POST {base_url}/api/provision` with `{\"runtime\": \"<id>\", \"brief\": \"<standing instructions>\"}` and \
`Authorization: Bearer <API_KEY>` creates an agent (201) and debits its first period.\n\
3. Poll `GET {base_url}/api/instances/{instance_id}` until `status` is `running`.\n\
4. `POST {base_url}/api/instances/{instance_id}/messages` with `{\"text\": \"...\"}` and wait for the reply: turns \
run one at a time per agent and may take up to 900 s, so set a client time-out of 910 s.\n\
5. Reconfigure with `/config`, and `/pause`, `/resume` or `/destroy` it; `/activity` shows turns and charges; \
`POST /api/instances/{instance_id}/turns/{turn_id}/rating` with `{\"value\": true}` (or `false`, or 1 to 5) rates a \
reply.\n\n\
Authentication: hosted-agent calls and `/mcp` send `Authorization: Bearer <API_KEY>`; a bad key is 401 and an \
agent that is not the caller's is 404. API keys are made in the web app at `{base_url}/developers` (sign in, then \
create a key; it is shown once), where credits are topped up too (`{base_url}/billing`). Dashboard calls (queries, pages, streams, control) are served to loopback \
clients, or with `Authorization: Bearer <token>` when the operator set `SERVICE_API_TOKENS`; their mutating calls \
also need `Origin`/`Referer`, when sent, to match the host.\n\n\
Every error is JSON `{\"error\": \"<what went wrong>\", \"code\": \"<code>\"}` with the status below; switch on \
`code`. Over gRPC the same code is the `reason` of the status's `ErrorInfo`; over MCP it is in the tool error's \
structured content.\n\n",
    );
}

fn errors(out: &mut String) {
    out.push_str("## Error codes\n\n| status | code | meaning |\n|---|---|---|\n");
    let mut reasons: Vec<(u16, String, String)> = contract()
        .enumeration("ErrorReason")
        .map(|e| e.values.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|(code, doc)| {
            let status = ErrorReason::from_code(&code).map(|r| r.http_status().as_u16()).unwrap_or_default();
            // The comments end with the statuses ("HTTP 401, gRPC UNAUTHENTICATED."): the
            // table has its own column for that.
            let meaning = doc.split(". HTTP ").next().unwrap_or_default().trim_end_matches('.').to_owned();
            (status, code, meaning)
        })
        .collect();
    reasons.sort();
    for (status, code, meaning) in reasons {
        let _ = writeln!(out, "| {status} | `{code}` | {}. |", cell(&meaning));
    }
    out.push('\n');
}

fn endpoint_doc(out: &mut String, endpoint: &Endpoint, types: &mut BTreeSet<String>) {
    let _ = writeln!(out, "### {} {}\n\n{}\n", endpoint.verb.as_str(), endpoint.shown_path(), endpoint.summary);
    let access = match endpoint.guard() {
        Guard::Open => "open",
        Guard::OwnKeys if endpoint.path.starts_with("/ingest/") => "node token (`Authorization: Bearer <node token>`)",
        Guard::OwnKeys => "account key (`Authorization: Bearer <API_KEY>`)",
        Guard::Dashboard | Guard::Page => "dashboard (loopback, or a `SERVICE_API_TOKENS` token)",
        Guard::App => "a signed-in web-app user (session cookie)",
    };
    let _ = writeln!(out, "- Access: {access}");
    for (name, doc) in endpoint.params {
        let _ = writeln!(out, "- Query `{name}`: {doc}");
    }
    match endpoint.body {
        Body::None => {}
        Body::Json(message) => {
            let _ = writeln!(out, "- Body: JSON [`{message}`](#{}):\n", anchor(message));
            fields_table(out, message, types, endpoint.path);
        }
        Body::JsonText(text) => {
            let _ = writeln!(out, "- Body: JSON {text}");
            collect_named_types(text, types);
        }
        Body::Otlp => {
            let _ = writeln!(
                out,
                "- Body: an OTLP export request, `application/x-protobuf` or `application/json`, optionally `Content-Encoding: gzip`"
            );
        }
        Body::ProtobufOrJson(message) => {
            let _ = writeln!(
                out,
                "- Body: [`{message}`](#{}) as `application/x-protobuf` or JSON, optionally gzipped",
                anchor(message)
            );
            types.insert(message.to_owned());
        }
    }
    let answer = match endpoint.answer {
        Answer::Json(status, message) => {
            types.insert(message.to_owned());
            format!("{status} JSON [`{message}`](#{})", anchor(message))
        }
        Answer::JsonArray(message) => {
            types.insert(message.to_owned());
            format!("200 JSON array of [`{message}`](#{})", anchor(message))
        }
        Answer::JsonText(status, text) => format!("{status} JSON {text}"),
        Answer::Sse(message) => {
            types.insert(message.to_owned());
            format!("200 `text/event-stream`; each event's `data` is a [`{message}`](#{})", anchor(message))
        }
        Answer::Otlp => {
            "200 the OTLP export response in the request's encoding (`partial_success` for rejected items)".into()
        }
        Answer::Mcp => "JSON-RPC over Streamable HTTP (see MCP tools)".into(),
        Answer::Document(media) => format!("200 `{media}`"),
    };
    let _ = writeln!(out, "- Answer: {answer}");
    let codes: Vec<String> =
        endpoint.all_errors().iter().map(|r| format!("{} `{}`", r.http_status().as_u16(), r.code())).collect();
    if !codes.is_empty() {
        let _ = writeln!(out, "- Errors: {}", codes.join(", "));
    }
    out.push('\n');
}

fn tools_doc(out: &mut String, registry: &ListShapesResponse, types: &mut BTreeSet<String>) {
    out.push_str(
        "## MCP tools\n\n\
Connect an MCP client to `{base_url}/mcp` (Streamable HTTP) with `Authorization: Bearer <API_KEY>`. Each tool takes \
the JSON arguments below and answers the REST body as structured content plus readable text; list answers are \
objects (`{\"runtimes\": [...]}`, `{\"instances\": [...]}`). Failures are tool errors whose structured content is \
`{\"error\", \"code\", \"status\"}` with REST's code. `query` and `list_sessions` read the dashboard's data and answer \
dashboard callers only.\n\n",
    );
    for tool in TOOLS {
        tool_doc(out, tool, registry, types);
    }
}

fn tool_doc(out: &mut String, tool: &ToolDef, registry: &ListShapesResponse, types: &mut BTreeSet<String>) {
    let _ = writeln!(out, "### {}\n\n{}\n", tool.name, tool.description);
    let _ = writeln!(out, "- Same as: `{} {}`", tool.rest.verb.as_str(), tool.rest.path);
    let _ = writeln!(out, "- Arguments:\n");
    if tool.name == "query" {
        let schema = tools::input_schema(tool, registry);
        out.push_str("  | argument | type | notes |\n  |---|---|---|\n");
        let shapes = registry.allowed_shapes.join("`, `");
        let _ = writeln!(out, "  | `shape` | string | Required. One of `{shapes}`. |");
        let _ = writeln!(out, "  | `args` | object | The shape's arguments: |");
        if let Some(args) = schema.get("properties").and_then(|p| p.get("args")).and_then(|a| a.get("properties")) {
            for (name, arg) in args.as_object().into_iter().flatten() {
                let ty = arg.get("type").map(|t| t.to_string().replace('"', "")).unwrap_or_default();
                let doc = arg.get("description").and_then(|d| d.as_str()).unwrap_or_default();
                let _ = writeln!(out, "  | `args.{name}` | {ty} | {} |", cell(doc));
            }
        }
        out.push('\n');
    } else {
        fields_table(out, tool.request, types, "");
    }
    types.insert(tool.answer.to_owned());
    let _ = writeln!(out, "- Answer: [`{}`](#{})", tool.answer, anchor(tool.answer));
    let codes: Vec<String> = tool.errors().iter().map(|r| format!("`{}`", r.code())).collect();
    let _ = writeln!(out, "- Error codes: {}\n", codes.join(", "));
}

/// The `| field | type | notes |` table of a request message, indented under a list item,
/// without the fields REST takes from `path` (`{instance_id}`): they are MCP arguments.
fn fields_table(out: &mut String, message: &str, types: &mut BTreeSet<String>, path: &str) {
    let Some(doc) = contract().message(message) else { return };
    let fields: Vec<_> = doc.fields.iter().filter(|f| !path.contains(&format!("{{{}}}", f.name))).collect();
    if fields.is_empty() {
        out.push_str("  No fields: send `{}` or nothing.\n\n");
        return;
    }
    out.push_str("  | field | type | notes |\n  |---|---|---|\n");
    for field in fields {
        let _ = writeln!(
            out,
            "  | `{}` | {} | {} |",
            field.name,
            type_cell(&field.json_type, field.repeated, types),
            cell(&field.doc)
        );
    }
    out.push('\n');
}

fn types_doc(out: &mut String, mut pending: BTreeSet<String>) {
    out.push_str("## Types\n\nJSON field names are as shown; 64-bit integers are plain numbers; times are RFC 3339 strings; enums are the lower-case names listed.\n\n");
    let mut done = BTreeSet::new();
    while let Some(name) = pending.pop_first() {
        if !done.insert(name.clone()) {
            continue;
        }
        if let Some(message) = contract().message(&name) {
            message_doc(out, message, &mut pending);
        } else if let Some(en) = contract().enumeration(&name) {
            let _ = writeln!(out, "### {}\n\n{}\n", en.name, en.doc);
            out.push_str("| value | meaning |\n|---|---|\n");
            for (value, doc) in &en.values {
                let _ = writeln!(out, "| `{value}` | {} |", cell(doc));
            }
            out.push('\n');
        }
    }
}

fn message_doc(out: &mut String, message: &MessageDoc, pending: &mut BTreeSet<String>) {
    let _ = writeln!(out, "### {}\n\n{}\n", message.name, message.doc);
    if message.fields.is_empty() {
        out.push_str("No fields.\n\n");
        return;
    }
    out.push_str("| field | type | notes |\n|---|---|---|\n");
    for field in &message.fields {
        let mut notes = field.doc.clone();
        if field.flattened {
            notes.push_str(" (Its fields appear inline in this object.)");
        }
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            field.name,
            type_cell(&field.json_type, field.repeated, pending),
            cell(&notes)
        );
    }
    out.push('\n');
}

/// A type for a table cell, linking (and queueing for the Types section) named types.
fn type_cell(json_type: &JsonType, repeated: bool, types: &mut BTreeSet<String>) -> String {
    let base = match json_type {
        JsonType::Enum(name) | JsonType::Message(name) => {
            types.insert(name.clone());
            format!("[`{name}`](#{})", anchor(name))
        }
        JsonType::Map(value) => format!("map of {}", type_cell(value, false, types)),
        other => other.label(),
    };
    if repeated { format!("{base}[]") } else { base }
}

/// Named types mentioned in a prose body description, such as `RunEvent`.
fn collect_named_types(text: &str, types: &mut BTreeSet<String>) {
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if contract().message(word).is_some() {
            types.insert(word.to_owned());
        }
    }
}

/// A heading's anchor, as GitHub and most renderers make it.
fn anchor(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// Text safe in a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every body and answer names a message the descriptor knows, so the reference never
    /// points at a type that does not exist.
    #[test]
    fn endpoints_name_real_messages() {
        for section in crate::sections() {
            for endpoint in &section.endpoints {
                let route = format!("{} {}", endpoint.verb.as_str(), endpoint.path);
                let body = match endpoint.body {
                    Body::Json(message) | Body::ProtobufOrJson(message) => Some(message),
                    Body::None | Body::JsonText(_) | Body::Otlp => None,
                };
                let answer = match endpoint.answer {
                    Answer::Json(_, message) | Answer::JsonArray(message) | Answer::Sse(message) => Some(message),
                    Answer::JsonText(..) | Answer::Otlp | Answer::Mcp | Answer::Document(_) => None,
                };
                for message in body.into_iter().chain(answer) {
                    assert!(contract().message(message).is_some(), "{route} names {message:?}");
                }
                assert!(!endpoint.summary.is_empty(), "{route} has a summary");
            }
        }
    }

    #[test]
    fn the_file_has_front_matter_and_every_tool() {
        let text = render(&crate::sections(), &ListShapesResponse::default());
        assert!(text.starts_with("---\nname: roost\ndescription: "));
        for tool in TOOLS {
            assert!(text.contains(&format!("### {}\n", tool.name)), "{}", tool.name);
        }
    }
}
