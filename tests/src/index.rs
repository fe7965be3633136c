//! A crates.io-compatible package index and a package manager for the self-updater's
//! tests: a local HTTP server answering `GET /api/v1/crates/{name}` (with ETags and 304s),
//! and an install script that records what it installs, fails on request, and can play a
//! release by writing the version file roost reads (`ROOST_VERSION_FILE`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use axum::{
    Json, Router,
    extract::{Path as UrlPath, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};

#[derive(Default)]
struct Published {
    versions: HashMap<String, Vec<Value>>,
    generation: u64,
    gets: usize,
    not_modified: usize,
}

/// The local index.
#[derive(Clone)]
pub struct FakeIndex {
    /// Its base URL (what `--update-index-url` takes).
    pub url: String,
    state: Arc<Mutex<Published>>,
}

impl FakeIndex {
    /// Starts it on an ephemeral port.
    pub async fn start() -> Self {
        let state = Arc::new(Mutex::new(Published::default()));
        let app = Router::new().route("/api/v1/crates/{name}", get(crate_versions)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the index");
        let url = format!("http://{}", listener.local_addr().expect("index address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, state }
    }

    /// Publishes `version` of `package`, `age` ago.
    pub fn publish(&self, package: &str, version: &str, age: Duration) {
        let created = SystemTime::now() - age;
        let secs = created.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
        let created_at = prost_types::Timestamp { seconds: secs, nanos: 0 }.to_string();
        let mut state = self.state.lock().expect("index state");
        state.generation += 1;
        state.versions.entry(package.to_owned()).or_default().push(json!({
            "num": version, "created_at": created_at, "yanked": false
        }));
    }

    /// GETs answered so far.
    pub fn gets(&self) -> usize {
        self.state.lock().expect("index state").gets
    }

    /// GETs answered 304 Not Modified so far.
    pub fn not_modified(&self) -> usize {
        self.state.lock().expect("index state").not_modified
    }
}

async fn crate_versions(
    State(state): State<Arc<Mutex<Published>>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let mut state = state.lock().expect("index state");
    state.gets += 1;
    let etag = format!("\"g{}\"", state.generation);
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        state.not_modified += 1;
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    match state.versions.get(&name) {
        Some(versions) => ([(header::ETAG, etag)], Json(json!({ "versions": versions }))).into_response(),
        None => (StatusCode::NOT_FOUND, Json(json!({"errors": [{"detail": "Not Found"}]}))).into_response(),
    }
}

/// The install script and its records, in a directory of its own.
pub struct FakeInstaller {
    /// Its directory.
    pub dir: PathBuf,
}

impl FakeInstaller {
    /// Writes the script into `dir`.
    pub fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("installer dir");
        let script = format!(
            "#!/bin/sh\n\
             d='{dir}'\n\
             echo \"$1 $2\" >> \"$d/installs.log\"\n\
             if [ -f \"$d/fail-$2\" ]; then cat \"$d/fail-$2\" >&2; exit 1; fi\n\
             echo \"$2\" > \"$d/version\"\n\
             if [ -f \"$d/after-$2.sh\" ]; then sh \"$d/after-$2.sh\"; fi\n\
             echo \"installed $1 $2\"\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("install.sh"), script).expect("install script");
        Self { dir: dir.to_path_buf() }
    }

    /// The `--update-install-command` that runs it.
    pub fn command(&self) -> String {
        format!("sh {}/install.sh {{package}} {{version}}", self.dir.display())
    }

    /// The version file it writes on each install (`ROOST_VERSION_FILE`).
    pub fn version_file(&self) -> PathBuf {
        self.dir.join("version")
    }

    /// Makes installs of `version` fail with `message` on stderr.
    pub fn fail(&self, version: &str, message: &str) {
        std::fs::write(self.dir.join(format!("fail-{version}")), message).expect("fail marker");
    }

    /// Runs `script` (sh) after a successful install of `version`.
    pub fn after(&self, version: &str, script: &str) {
        std::fs::write(self.dir.join(format!("after-{version}.sh")), script).expect("after script");
    }

    /// Every install so far, as "package version".
    pub fn installs(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("installs.log")).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}
