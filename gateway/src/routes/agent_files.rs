//! The agent's files over REST: `GET /api/instances/{id}/files[?path=]` lists a folder of
//! its workspace, `GET /api/instances/{id}/files/{path}` downloads one file
//! (`AgentService.ListFiles` and `ReadFile`).
//!
//! A download is the file's bytes, never a page of roost's: it is served as
//! `text/plain; charset=utf-8` (UTF-8 text) or `application/octet-stream`, as an
//! attachment, with `nosniff` and a sandboxing CSP, so an agent that writes HTML or SVG
//! cannot get a browser to run it as roost's origin.

use axum::{
    Json,
    extract::{Path, Query, State},
    http::{HeaderValue, header},
    response::{IntoResponse as _, Response},
};
use roost_proto::{
    ErrorReason,
    v1::{ListFilesRequest, ListFilesResponse, ReadFileRequest, ReadFileResponse},
};

use crate::{
    Call, Core, HttpError, InstanceId,
    api::{Answer, Endpoint},
    pages::layout::percent_encode,
};

pub(crate) const FILES: Endpoint = Endpoint::get(
    "/api/instances/{instance_id}/files",
    "Lists one folder of the agent's workspace (its memory, skills and what its tools wrote): each entry's path, \
     kind, size and modification time, folders first, at most 1,000. With no `path` (the workspace itself), \
     `memory` names the runtime's memory files first (SOUL.md, MEMORY.md, Hermes' memories). Links are listed, \
     never followed; `..` and absolute paths are 400. An agent on its own disk (roost running as root) is read \
     while it runs; paused, it is 409.",
)
.params(&[("path", "The folder, relative to the workspace (default: the workspace itself).")])
.answers("ListFilesResponse")
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState]);

pub(crate) const FILE: Endpoint = Endpoint::get(
    "/api/instances/{instance_id}/files/{*path}",
    "Downloads one file of the agent's workspace (at most 2 MiB): its bytes, as `text/plain; charset=utf-8` when \
     they are UTF-8, else `application/octet-stream`. A link, a folder, `..` or an absolute path is 400; a file \
     over 2 MiB is 413.",
)
.answer_of(Answer::Document("application/octet-stream"))
.errors(&[ErrorReason::NotFound, ErrorReason::WrongState, ErrorReason::PayloadTooLarge]);

/// The `?path=` of a listing.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FolderQuery {
    #[serde(default)]
    path: String,
}

/// `GET /api/instances/{id}/files?path=`: the folder's [`ListFilesResponse`].
pub(crate) async fn list_files(
    State(core): State<Core>,
    InstanceId(instance_id): InstanceId,
    query: Result<Query<FolderQuery>, axum::extract::rejection::QueryRejection>,
    call: Call,
) -> Result<Json<ListFilesResponse>, HttpError> {
    let Query(FolderQuery { path }) = query.map_err(|err| {
        HttpError::new(ErrorReason::InvalidArgument, format!("bad query string: {}", err.body_text()))
    })?;
    Ok(Json(core.agents.list_files(call.request(ListFilesRequest { instance_id, path })).await?.into_inner()))
}

/// `GET /api/instances/{id}/files/{path}`: the file's bytes.
pub(crate) async fn read_file(
    State(core): State<Core>,
    path: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    call: Call,
) -> Result<Response, HttpError> {
    let Path((instance_id, path)) =
        path.map_err(|err| HttpError::new(ErrorReason::InvalidArgument, format!("bad path: {}", err.body_text())))?;
    let file = core.agents.read_file(call.request(ReadFileRequest { instance_id, path })).await?.into_inner();
    Ok(download(file))
}

/// A file's bytes as a download that no browser renders as roost's page.
pub(crate) fn download(file: ReadFileResponse) -> Response {
    let name = file.file.map(|f| f.name).unwrap_or_default();
    let media = if file.text { "text/plain; charset=utf-8" } else { "application/octet-stream" };
    let disposition = format!("attachment; filename*=UTF-8''{}", percent_encode(&name));
    let mut response = file.content.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox; default-src 'none'"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    response
}
