//! The agent's files: its workspace as its owner reads it (`ListFiles`, `ReadFile`), on
//! the replica that runs the agent, since the workspace is local to it. How a path is
//! resolved, and why nothing in the workspace is trusted, is [`crate::runtimes::files`].
//!
//! **Memory files first.** With the workspace itself, the listing also names the files a
//! runtime keeps its memory and persona in, when they exist: OpenClaw's `SOUL.md`,
//! `MEMORY.md`, `USER.md`, `IDENTITY.md`, `AGENTS.md` and daily `memory/*.md`; Hermes'
//! `.hermes/SOUL.md` and `.hermes/memories/*`. They are found by these names in any
//! runtime's workspace (a `process` runtime that keeps a `MEMORY.md` gets it shown first
//! too); the newest [`MEMORY_FOLDER_FILES`] files of each memory folder are named.

use std::{
    os::fd::{AsFd as _, OwnedFd},
    sync::Arc,
};

use roost_proto::{
    ApiError, ErrorReason,
    v1::{FileKind, ListFilesRequest, ListFilesResponse, ReadFileRequest, ReadFileResponse, WorkspaceFile},
};

use super::{Hosting, limits, routing::Route};
use crate::{
    Result,
    error::Error,
    runtimes::{
        files::{self, Entry, FilesError, Kind},
        workspace::Opened,
    },
};

/// Memory and persona files, in the order they are shown.
const MEMORY_FILES: &[&str] = &["SOUL.md", "MEMORY.md", "USER.md", "IDENTITY.md", "AGENTS.md", ".hermes/SOUL.md"];
/// Folders of memory files: their newest files are shown after [`MEMORY_FILES`].
const MEMORY_FOLDERS: &[&str] = &[".hermes/memories", "memory"];
/// How many files of each memory folder are named.
const MEMORY_FOLDER_FILES: usize = 20;

impl Hosting {
    /// One folder of agent `req.instance_id`'s workspace, and its memory files with the
    /// workspace itself.
    pub async fn list_files(self: &Arc<Self>, account_id: &str, req: ListFilesRequest) -> Result<ListFilesResponse> {
        let id = limits::instance_id(&req.instance_id)?.to_owned();
        files::clean(&req.path).map_err(api_error)?;
        let agent = match self.route(&id, account_id).await? {
            Route::Local(agent) => agent,
            Route::Remote(client) => {
                return self
                    .forward(client, &id, (account_id, ""), req, |mut c, r| async move { c.list_files(r).await })
                    .await;
            }
        };
        let missing = ListFilesResponse { path: files::clean(&req.path).unwrap_or_default(), ..Default::default() };
        self.in_workspace(&agent.id, Ok(missing), move |root| {
            let listing = files::list(root.as_fd(), &req.path).map_err(|e| Error::from(api_error(e)))?;
            let memory = if listing.path.is_empty() { memory_files(&root) } else { Vec::new() };
            Ok(ListFilesResponse {
                path: listing.path,
                files: listing.entries.iter().map(to_proto).collect(),
                truncated: listing.truncated,
                memory: memory.iter().map(to_proto).collect(),
            })
        })
        .await
    }

    /// One file of agent `req.instance_id`'s workspace.
    pub async fn read_file(self: &Arc<Self>, account_id: &str, req: ReadFileRequest) -> Result<ReadFileResponse> {
        let id = limits::instance_id(&req.instance_id)?.to_owned();
        if files::clean(&req.path).map_err(api_error)?.is_empty() {
            return Err(ApiError::invalid_argument("path is required: the file to read").into());
        }
        let agent = match self.route(&id, account_id).await? {
            Route::Local(agent) => agent,
            Route::Remote(client) => {
                return self
                    .forward(client, &id, (account_id, ""), req, |mut c, r| async move { c.read_file(r).await })
                    .await;
            }
        };
        let missing = Err(api_error(FilesError::NotFound(req.path.clone())).into());
        self.in_workspace(&agent.id, missing, move |root| {
            let (entry, content) = files::read(root.as_fd(), &req.path).map_err(|e| Error::from(api_error(e)))?;
            let text = std::str::from_utf8(&content).is_ok();
            Ok(ReadFileResponse { file: Some(to_proto(&entry)), content, text })
        })
        .await
    }

    /// Runs `read` on a blocking thread with the root of agent `id`'s workspace; `missing`
    /// when it has none, 409 when its disk is not mounted (the agent is not running).
    async fn in_workspace<T: Send + 'static>(
        &self,
        id: &str,
        missing: Result<T>,
        read: impl FnOnce(OwnedFd) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let workspaces = self.drivers.process.workspaces().clone();
        let id = id.to_owned();
        let done = tokio::task::spawn_blocking(move || {
            match workspaces.open(&id).map_err(|e| Error::io("opening a workspace", e))? {
                Opened::Root(root) => read(root),
                Opened::Unmounted => Err(unmounted(&id)),
                Opened::Missing => missing,
            }
        })
        .await;
        done.map_err(|e| Error::io("reading a workspace", std::io::Error::other(e)))?
    }
}

/// The memory files that exist in the workspace at `root`, in [`MEMORY_FILES`] order, then
/// each memory folder's newest.
fn memory_files(root: &OwnedFd) -> Vec<Entry> {
    let mut found: Vec<Entry> = MEMORY_FILES
        .iter()
        .filter_map(|path| files::entry(root.as_fd(), path))
        .filter(|e| e.kind == Kind::File)
        .collect();
    for folder in MEMORY_FOLDERS {
        let Ok(listing) = files::list(root.as_fd(), folder) else { continue };
        let mut newest: Vec<Entry> = listing.entries.into_iter().filter(|e| e.kind == Kind::File).collect();
        newest.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.name.cmp(&b.name)));
        found.extend(newest.into_iter().take(MEMORY_FOLDER_FILES));
    }
    found
}

fn unmounted(id: &str) -> Error {
    ApiError::new(
        ErrorReason::WrongState,
        format!(
            "agent {id} keeps its files on its own disk, which is mounted only while it runs; resume it to read them"
        ),
    )
    .into()
}

/// The error table's row for a refused path.
fn api_error(err: FilesError) -> ApiError {
    match err {
        FilesError::NotFound(_) => ApiError::new(ErrorReason::NotFound, err.to_string()),
        FilesError::TooLarge { .. } => ApiError::new(ErrorReason::PayloadTooLarge, err.to_string()),
        FilesError::BadPath(_) | FilesError::Link(_) | FilesError::WrongKind(_) | FilesError::Unreadable(_) => {
            ApiError::invalid_argument(err.to_string())
        }
        FilesError::Io { .. } => {
            tracing::error!(error = %err, "reading an agent's workspace");
            ApiError::internal("internal error; see the roost log")
        }
    }
}

fn to_proto(entry: &Entry) -> WorkspaceFile {
    WorkspaceFile {
        path: entry.path.clone(),
        name: entry.name.clone(),
        kind: match entry.kind {
            Kind::File => FileKind::File,
            Kind::Folder => FileKind::Folder,
            Kind::Link => FileKind::Link,
            Kind::Other => FileKind::Other,
        } as i32,
        size_bytes: i64::try_from(entry.size).unwrap_or(i64::MAX),
        modified_at: Some(entry.modified.into()),
    }
}
