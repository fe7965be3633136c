//! The agent's files in the web app: `/instances/{id}/files?path=` lists a folder of its
//! workspace (the runtime's memory files first, for the workspace itself), and
//! `/instances/{id}/files/{path}` shows one file: markdown rendered as the chat renders
//! replies ([`markdown`]), other text as it is, binary data as its size, each with a
//! download (`?download=1`, the same answer as the REST download). The agent's page shows
//! the memory files and the workspace's top folder in a card ([`Files::card`]).

use askama::Template;
use axum::{
    Router,
    extract::{Path, Query, State},
    response::Response,
    routing::get,
};
use roost_proto::{
    json::enums::JsonEnum as _,
    v1::{FileKind, ListFilesRequest, ListFilesResponse, ReadFileRequest, WorkspaceFile},
};
use serde::Deserialize;

use super::signed_in;
use crate::{
    Core,
    pages::{
        Failure, When,
        format::bytes,
        layout::{Chrome, PageCall, percent_encode},
        markdown,
    },
    routes::agent_files::download,
};

/// Entries of the workspace's top folder the agent's page shows.
const CARD_ENTRIES: usize = 12;

pub(super) fn routes() -> Router<Core> {
    Router::new().route("/instances/{id}/files", get(folder)).route("/instances/{id}/files/{*path}", get(file))
}

/// One entry, as a row.
pub(super) struct FileRow {
    /// What the row says: the path in the workspace for memory files, the name in a
    /// folder's listing.
    pub shown: String,
    pub folder: bool,
    /// Where it opens: a folder's listing, a file's view; empty for what is not read
    /// (links, FIFOs).
    pub href: String,
    /// "file", "folder", "link", "other".
    pub kind: &'static str,
    pub size: String,
    pub modified: When,
}

impl FileRow {
    fn of(id: &str, f: &WorkspaceFile, full_path: bool) -> Self {
        let kind = FileKind::try_from(f.kind).unwrap_or(FileKind::Unspecified);
        let href = match kind {
            FileKind::Folder => format!("/instances/{id}/files?path={}", percent_encode(&f.path)),
            FileKind::File => format!("/instances/{id}/files/{}", path_segments(&f.path)),
            _ => String::new(),
        };
        Self {
            shown: if full_path { f.path.clone() } else { f.name.clone() },
            folder: kind == FileKind::Folder,
            href,
            kind: FileKind::json_name(f.kind).unwrap_or("other"),
            size: if kind == FileKind::Folder { String::new() } else { bytes(f.size_bytes) },
            modified: When::timestamp(f.modified_at.as_ref()),
        }
    }
}

/// A workspace path as URL path segments: each part percent-encoded, slashes kept.
fn path_segments(path: &str) -> String {
    path.split('/').map(percent_encode).collect::<Vec<_>>().join("/")
}

/// A folder's listing, for the agent page's card and the folder page.
pub(super) struct Files {
    /// The folder ("" for the workspace).
    pub path: String,
    /// The runtime's memory files (with the workspace itself).
    pub memory: Vec<FileRow>,
    pub entries: Vec<FileRow>,
    pub truncated: bool,
    /// The folders above, for the breadcrumb: (name, link).
    pub crumbs: Vec<(String, String)>,
}

impl Files {
    fn of(id: &str, listing: ListFilesResponse) -> Self {
        Self {
            memory: listing.memory.iter().map(|f| FileRow::of(id, f, true)).collect(),
            entries: listing.files.iter().map(|f| FileRow::of(id, f, false)).collect(),
            truncated: listing.truncated,
            crumbs: crumbs(id, &listing.path),
            path: listing.path,
        }
    }

    /// The agent page's card: the workspace's memory files and the first
    /// [`CARD_ENTRIES`] entries of its top folder.
    pub(super) async fn card(core: &Core, page: &PageCall, id: &str) -> Result<Self, Failure> {
        let req = ListFilesRequest { instance_id: id.to_owned(), path: String::new() };
        let listing =
            page.load(format!("GET /api/instances/{id}/files"), core.agents.list_files(page.request(req))).await?;
        let mut files = Self::of(id, listing);
        files.truncated |= files.entries.len() > CARD_ENTRIES;
        files.entries.truncate(CARD_ENTRIES);
        Ok(files)
    }
}

/// The folders leading to `path` (the workspace first), each with its listing's link;
/// the last is `path` itself.
fn crumbs(id: &str, path: &str) -> Vec<(String, String)> {
    let mut crumbs = vec![("workspace".to_owned(), format!("/instances/{id}/files"))];
    let mut so_far = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(part);
        crumbs.push((part.to_owned(), format!("/instances/{id}/files?path={}", percent_encode(&so_far))));
    }
    crumbs
}

#[derive(Template)]
#[template(path = "app_files.html")]
struct FolderPage {
    chrome: Chrome,
    id: String,
    files: Result<Files, Failure>,
}

#[derive(Debug, Default, Deserialize)]
struct FolderQuery {
    #[serde(default)]
    path: String,
}

async fn folder(
    State(core): State<Core>,
    page: PageCall,
    Path(id): Path<String>,
    Query(query): Query<FolderQuery>,
) -> Response {
    let user = match signed_in(&core, &page).await {
        Ok(user) => user,
        Err(answer) => return answer,
    };
    let req = ListFilesRequest { instance_id: id.clone(), path: query.path.clone() };
    let api = format!("GET /api/instances/{id}/files?path={}", percent_encode(&query.path));
    let files = page.load(api, core.agents.list_files(page.request(req))).await;
    let status = status_of(files.as_ref().err());
    let files = files.map(|listing| Files::of(&id, listing)).map_err(Failure::from);
    let view = FolderPage { chrome: user.chrome(&page, "Files", "/"), id, files };
    page.render_with(status, &view)
}

/// One file, as the file page shows it.
struct Shown {
    name: String,
    size: String,
    modified: When,
    /// Rendered markdown (a `.md` file), sanitised.
    markdown_html: Option<String>,
    /// The text, when it is UTF-8 (shown as it is unless it is markdown).
    text: Option<String>,
    download: String,
    crumbs: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "app_file.html")]
struct FilePage {
    chrome: Chrome,
    id: String,
    file: Result<Shown, Failure>,
}

#[derive(Debug, Default, Deserialize)]
struct FileQuery {
    #[serde(default)]
    download: Option<String>,
}

async fn file(
    State(core): State<Core>,
    page: PageCall,
    Path((id, path)): Path<(String, String)>,
    Query(query): Query<FileQuery>,
) -> Response {
    let user = match signed_in(&core, &page).await {
        Ok(user) => user,
        Err(answer) => return answer,
    };
    let req = ReadFileRequest { instance_id: id.clone(), path: path.clone() };
    let read =
        page.load(format!("GET /api/instances/{id}/files/{path}"), core.agents.read_file(page.request(req))).await;
    if query.download.is_some()
        && let Ok(read) = read
    {
        return download(read);
    }
    let status = status_of(read.as_ref().err());
    let file = read.map_err(Failure::from).map(|read| {
        let entry = read.file.clone().unwrap_or_default();
        let text = read.text.then(|| String::from_utf8_lossy(&read.content).into_owned());
        let is_markdown = entry.name.to_ascii_lowercase().ends_with(".md");
        let parent = entry.path.rsplit_once('/').map_or("", |(parent, _)| parent);
        Shown {
            markdown_html: text.as_deref().filter(|_| is_markdown).map(markdown::render),
            text,
            download: format!("/instances/{id}/files/{}?download=1", path_segments(&entry.path)),
            size: bytes(entry.size_bytes),
            modified: When::timestamp(entry.modified_at.as_ref()),
            crumbs: crumbs(&id, parent),
            name: entry.name,
        }
    });
    let title = file.as_ref().map_or_else(|_| "File".to_owned(), |f| f.name.clone());
    let view = FilePage { chrome: user.chrome(&page, &title, "/"), id, file };
    page.render_with(status, &view)
}

/// A page's status for a failed read: the error table's (a missing file is 404).
fn status_of(err: Option<&roost_proto::ApiError>) -> http::StatusCode {
    err.map_or(http::StatusCode::OK, |err| err.reason().http_status())
}

#[cfg(test)]
mod tests {
    #[test]
    fn crumbs_lead_to_the_folder() {
        let crumbs = super::crumbs("ins_a", ".hermes/memories");
        let names: Vec<&str> = crumbs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["workspace", ".hermes", "memories"]);
        assert_eq!(crumbs[2].1, "/instances/ins_a/files?path=.hermes%2Fmemories");
        assert_eq!(super::path_segments("a b/c#d.md"), "a%20b/c%23d.md");
    }
}
