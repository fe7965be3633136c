//! A crates.io-compatible package index and a package manager for the self-updater's
//! tests: a local HTTP server answering like crates.io (`GET /api/v1/crates/{name}` with
//! the crate's and each version's `repository` and `checksum`, ETags and 304s; the `.crate`
//! download behind a redirect; release signatures where `--update-signature-url` points),
//! a release signing key, and an install script that records what it installs, fails on
//! request, and can play a release by writing the version file roost reads
//! (`ROOST_VERSION_FILE`).

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
    response::{IntoResponse, Redirect, Response},
    routing::get,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// roost's own package, the updater's default.
pub const ROOST_PACKAGE: &str = roost_server::update::settings::DEFAULT_PACKAGE;
/// roost's repository, the one the updater trusts.
pub const ROOST_REPOSITORY: &str = roost_server::update::identity::REPOSITORY;

struct PublishedVersion {
    num: String,
    created_at: String,
    yanked: bool,
    repository: String,
    file: Vec<u8>,
}

#[derive(Default)]
struct Crate {
    repository: String,
    versions: Vec<PublishedVersion>,
}

#[derive(Default)]
struct Published {
    crates: HashMap<String, Crate>,
    signatures: HashMap<String, String>,
    yank_after_listing: Vec<(String, String)>,
    generation: u64,
    gets: usize,
    not_modified: usize,
    downloads: usize,
}

impl Published {
    fn version(&mut self, package: &str, version: &str) -> &mut PublishedVersion {
        let versions = &mut self.crates.get_mut(package).expect("a published package").versions;
        versions.iter_mut().find(|v| v.num == version).expect("a published version")
    }
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
        let app = Router::new()
            .route("/api/v1/crates/{name}", get(crate_versions))
            .route("/api/v1/crates/{name}/{version}/download", get(download))
            .route("/files/{name}/{version}", get(crate_file))
            .route("/signatures/{file}", get(signature))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the index");
        let url = format!("http://{}", listener.local_addr().expect("index address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, state }
    }

    /// Publishes `version` of `package` from roost's own repository, `age` ago.
    pub fn publish(&self, package: &str, version: &str, age: Duration) {
        self.publish_from(ROOST_REPOSITORY, package, version, age);
    }

    /// Publishes `version` of `package` from `repository`, `age` ago. Like crates.io, the
    /// crate's `repository` becomes the one of its latest publish.
    pub fn publish_from(&self, repository: &str, package: &str, version: &str, age: Duration) {
        let created = SystemTime::now() - age;
        let secs = created.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
        let created_at = prost_types::Timestamp { seconds: secs, nanos: 0 }.to_string();
        let file = format!("{package}-{version}.crate, built from {repository}\n").into_bytes();
        let mut state = self.state.lock().expect("index state");
        state.generation += 1;
        let krate = state.crates.entry(package.to_owned()).or_default();
        krate.repository = repository.to_owned();
        krate.versions.push(PublishedVersion {
            num: version.to_owned(),
            created_at,
            yanked: false,
            repository: repository.to_owned(),
            file,
        });
    }

    /// Yanks a published version.
    pub fn yank(&self, package: &str, version: &str) {
        let mut state = self.state.lock().expect("index state");
        state.generation += 1;
        state.version(package, version).yanked = true;
    }

    /// Yanks a published version as soon as the next listing of its package is answered
    /// (between an updater's check and its install).
    pub fn yank_after_next_listing(&self, package: &str, version: &str) {
        let mut state = self.state.lock().expect("index state");
        state.yank_after_listing.push((package.to_owned(), version.to_owned()));
    }

    /// Signs the `.crate` file of a published version with `key`, and serves the signature.
    pub fn sign(&self, package: &str, version: &str, key: &ReleaseKey) {
        let file = self.state.lock().expect("index state").version(package, version).file.clone();
        self.put_signature(package, version, &key.sign(&file));
    }

    /// Serves `text` as the signature of a version.
    pub fn put_signature(&self, package: &str, version: &str, text: &str) {
        let mut state = self.state.lock().expect("index state");
        state.signatures.insert(format!("{package}-{version}.crate.minisig"), text.to_owned());
    }

    /// The `--update-signature-url` for the signatures this index serves.
    pub fn signature_url(&self) -> String {
        format!("{}/signatures/{{package}}-{{version}}.crate.minisig", self.url)
    }

    /// GETs of crate listings answered so far.
    pub fn gets(&self) -> usize {
        self.state.lock().expect("index state").gets
    }

    /// Listings answered 304 Not Modified so far.
    pub fn not_modified(&self) -> usize {
        self.state.lock().expect("index state").not_modified
    }

    /// `.crate` files downloaded so far.
    pub fn downloads(&self) -> usize {
        self.state.lock().expect("index state").downloads
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
    let answer = if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        state.not_modified += 1;
        (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response()
    } else {
        match state.crates.get(&name) {
            Some(krate) => ([(header::ETAG, etag)], Json(listing(&name, krate))).into_response(),
            None => (StatusCode::NOT_FOUND, Json(json!({"errors": [{"detail": "Not Found"}]}))).into_response(),
        }
    };
    let due: Vec<(String, String)> = state.yank_after_listing.iter().filter(|(p, _)| *p == name).cloned().collect();
    state.yank_after_listing.retain(|(p, _)| *p != name);
    for (package, version) in due {
        state.generation += 1;
        state.version(&package, &version).yanked = true;
    }
    answer
}

/// A crate as crates.io's API shows it (the fields the updater reads, and a few more).
fn listing(name: &str, krate: &Crate) -> Value {
    let versions: Vec<Value> = krate
        .versions
        .iter()
        .rev()
        .map(|v| {
            json!({
                "crate": name,
                "num": v.num,
                "created_at": v.created_at,
                "yanked": v.yanked,
                "checksum": hex::encode(Sha256::digest(&v.file)),
                "dl_path": format!("/api/v1/crates/{name}/{}/download", v.num),
                "repository": v.repository,
                "trustpub_data": null,
            })
        })
        .collect();
    json!({
        "crate": {"id": name, "name": name, "repository": krate.repository, "max_version": "0.0.0"},
        "versions": versions,
        "keywords": [],
        "categories": [],
    })
}

/// crates.io answers a download with a redirect to its static host.
async fn download(UrlPath((name, version)): UrlPath<(String, String)>) -> Redirect {
    Redirect::temporary(&format!("/files/{name}/{version}"))
}

async fn crate_file(
    State(state): State<Arc<Mutex<Published>>>,
    UrlPath((name, version)): UrlPath<(String, String)>,
) -> Response {
    let mut state = state.lock().expect("index state");
    state.downloads += 1;
    let file =
        state.crates.get(&name).and_then(|c| c.versions.iter().find(|v| v.num == version)).map(|v| v.file.clone());
    match file {
        Some(file) => file.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn signature(State(state): State<Arc<Mutex<Published>>>, UrlPath(file): UrlPath<String>) -> Response {
    match state.lock().expect("index state").signatures.get(&file) {
        Some(text) => text.clone().into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

/// A release signing key, as a maintainer makes with `minisign -G`.
pub struct ReleaseKey {
    pair: minisign::KeyPair,
}

impl ReleaseKey {
    /// A new key.
    pub fn generate() -> Self {
        Self { pair: minisign::KeyPair::generate_unencrypted_keypair().expect("a minisign key") }
    }

    /// The public key, as `--update-public-key` takes it (the base64 line of minisign.pub).
    pub fn public_key(&self) -> String {
        self.pair.pk.to_base64()
    }

    /// A signature of `bytes`, as `minisign -S -m FILE` writes to `FILE.minisig`.
    pub fn sign(&self, bytes: &[u8]) -> String {
        minisign::sign(Some(&self.pair.pk), &self.pair.sk, bytes, Some("signed by a roost test"), None)
            .expect("a signature")
            .to_string()
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
