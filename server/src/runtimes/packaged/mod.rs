//! Packaged runtimes: real agents people run (OpenClaw, Hermes Agent), installed from the
//! package registries at versions roost was tested with and driven through their own
//! OpenAI-compatible endpoints.
//!
//! - Install ([`install`]): `roost runtimes install openclaw|hermes` puts a pinned version in
//!   `<data-dir>/runtimes/<name>/<version>/`, verified against the lock file compiled into
//!   roost (npm's integrity hashes, pip's `--require-hashes`), and marks it installed only
//!   once everything is there. The built-in catalogue offers a packaged runtime only once
//!   it is installed.
//! - Boot ([`Installation::prepare`]): each boot makes the runtime's configuration from
//!   the agent's settings (its brief as `SOUL.md`, its model through roost's model gateway
//!   with this boot's agent token, its state, memory and logs in the workspace, its HTTP
//!   API on the sandbox's port behind a per-boot token, background model use off,
//!   channels off: roost runs Telegram itself). roost never writes them into the workspace
//!   itself: the workspace is the agent's, and a link it left where a file goes would make
//!   roost write elsewhere as root. The sandbox's relay writes them, as the agent, before
//!   the runtime starts ([`crate::sandbox::relay::write_files`]).
//! - Turns ([`ChatApi`]): a message to the runtime's `POST /v1/chat/completions` with a
//!   session key stable for the agent's life, so the runtime keeps its conversation across
//!   turns, pauses and restarts. Usage and cost come from the model gateway, which sees every
//!   model call the turn makes (tool loops included).

mod hermes;
pub mod install;
mod openclaw;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use sha2::{Digest as _, Sha256};

use crate::sandbox::WorkspaceFile;

/// A runtime roost knows how to install and drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Package {
    /// OpenClaw (npm `openclaw`), on the Node it needs.
    OpenClaw,
    /// Hermes Agent (PyPI `hermes-agent`), in a venv of its own.
    Hermes,
}

/// A version of a package roost was tested with, and the lock files that pin it.
pub struct Pinned {
    /// The package's version.
    pub version: &'static str,
    /// Lock files by their path inside the install directory.
    pub locks: &'static [(&'static str, &'static str)],
}

const OPENCLAW_VERSIONS: &[Pinned] = &[Pinned {
    version: "2026.9.6",
    locks: &[
        ("node/package.json", include_str!("locks/openclaw-2026.9.6/node/package.json")),
        ("node/package-lock.json", include_str!("locks/openclaw-2026.9.6/node/package-lock.json")),
        ("app/package.json", include_str!("locks/openclaw-2026.9.6/app/package.json")),
        ("app/package-lock.json", include_str!("locks/openclaw-2026.9.6/app/package-lock.json")),
    ],
}];

const HERMES_VERSIONS: &[Pinned] = &[Pinned {
    version: "0.19.0",
    locks: &[("requirements.lock", include_str!("locks/hermes-0.19.0/requirements.lock"))],
}];

/// The file that marks an install directory complete; it holds the locks' hash.
pub const STAMP: &str = ".roost-installed";

impl Package {
    /// Every package, in catalogue order.
    pub const ALL: [Package; 2] = [Package::OpenClaw, Package::Hermes];

    /// Its name on the command line, in the catalogue and as a directory.
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenClaw => "openclaw",
            Self::Hermes => "hermes",
        }
    }

    /// The package named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The versions roost has locks for, newest first.
    pub fn pinned(self) -> &'static [Pinned] {
        match self {
            Self::OpenClaw => OPENCLAW_VERSIONS,
            Self::Hermes => HERMES_VERSIONS,
        }
    }

    /// The version `install` picks without `--version`.
    pub fn default_version(self) -> &'static Pinned {
        &self.pinned()[0]
    }

    /// The pinned version `version`.
    pub fn version(self, version: &str) -> Option<&'static Pinned> {
        self.pinned().iter().find(|p| p.version == version)
    }

    /// Where version `version` installs under `runtimes_dir`.
    pub fn dir(self, runtimes_dir: &Path, version: &str) -> PathBuf {
        runtimes_dir.join(self.name()).join(version)
    }

    /// The catalogue entry an installation of it gets in the built-in catalogue: defaults
    /// that fit the runtime (OpenClaw's gateway and two Node workers hold ~1.1-1.3 GB and
    /// take 13-19 s to be ready; Hermes ~145 MB, ready in 1-2 s). One core each: an
    /// agent's shell can burn whatever it is given, and on a small host two cores would be
    /// all of it. Disks big enough for what their tools install (OpenClaw's `npm`, Hermes'
    /// `pip`) and their memory.
    pub fn catalogue_toml(self, install_dir: &Path) -> String {
        let dir = toml_string(&install_dir.display().to_string());
        match self {
            Self::OpenClaw => format!(
                "[[runtime]]\nid = \"openclaw\"\ndriver = \"openclaw\"\ninstall_dir = {dir}\n\
                 description = \"OpenClaw: the open agent with a shell, files, memory and tools, in its own sandbox.\"\n\
                 price_cents_month = 2000\nchannels = [\"telegram\"]\nincluded_model = true\n\
                 default_model = \"gpt-4o-mini\"\nmemory_mb = 2048\ncpus = 1.0\nmax_processes = 512\n\
                 tmp_mb = 256\ndisk_mb = 4096\nboot_timeout_secs = 180\n"
            ),
            Self::Hermes => format!(
                "[[runtime]]\nid = \"hermes\"\ndriver = \"hermes\"\ninstall_dir = {dir}\n\
                 description = \"Hermes Agent: a tool-using agent with a terminal, files and memory, in its own sandbox.\"\n\
                 price_cents_month = 1500\nchannels = [\"telegram\"]\nincluded_model = true\n\
                 default_model = \"gpt-4o-mini\"\nmemory_mb = 768\ncpus = 1.0\nmax_processes = 256\n\
                 tmp_mb = 256\ndisk_mb = 2048\nboot_timeout_secs = 90\n"
            ),
        }
    }
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

impl Pinned {
    /// The hash of its lock files, which an installation's stamp must hold.
    pub fn lock_hash(&self) -> String {
        let mut hasher = Sha256::new();
        for (path, text) in self.locks {
            hasher.update(path.as_bytes());
            hasher.update([0]);
            hasher.update(text.as_bytes());
            hasher.update([0]);
        }
        hex::encode(hasher.finalize())
    }
}

/// A complete install of a pinned version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// What is installed.
    pub package: Package,
    /// Its version.
    pub version: String,
    /// Its directory.
    pub dir: PathBuf,
}

impl Installation {
    /// The installation in `dir`, if it is a complete install of a pinned version of
    /// `package` (its stamp holds that version's lock hash).
    ///
    /// Its directory is the real path (links resolved): what its scripts name and what a
    /// sandbox must mount.
    pub fn at(package: Package, dir: &Path) -> Option<Self> {
        let stamp = std::fs::read_to_string(dir.join(STAMP)).ok()?;
        let pinned = package.pinned().iter().find(|p| p.lock_hash() == stamp.trim())?;
        let dir = dir.canonicalize().ok()?;
        Some(Self { package, version: pinned.version.to_owned(), dir })
    }

    /// The complete installs under `runtimes_dir`, by package, newest pinned version first.
    pub fn all(runtimes_dir: &Path) -> Vec<Self> {
        Package::ALL
            .into_iter()
            .flat_map(|package| {
                package
                    .pinned()
                    .iter()
                    .filter_map(move |pinned| Self::at(package, &package.dir(runtimes_dir, pinned.version)))
            })
            .collect()
    }

    /// The install of `package` the built-in catalogue uses: its newest pinned version
    /// installed.
    pub fn current(package: Package, runtimes_dir: &Path) -> Option<Self> {
        package.pinned().iter().find_map(|pinned| Self::at(package, &package.dir(runtimes_dir, pinned.version)))
    }

    /// The runtime's configuration for one boot (the files to write into `boot.workspace`)
    /// and how to start it and talk to it. Reads and writes nothing.
    pub fn prepare(&self, boot: &Boot<'_>) -> Launch {
        match self.package {
            Package::OpenClaw => openclaw::prepare(&self.dir, boot),
            Package::Hermes => hermes::prepare(&self.dir, boot),
        }
    }
}

/// What a boot's configuration is made from.
pub struct Boot<'a> {
    /// The agent (its stable session key).
    pub instance_id: &'a str,
    /// Its standing brief.
    pub brief: &'a str,
    /// The model its calls ask for.
    pub model: &'a str,
    /// Its workspace (the same path inside its sandbox).
    pub workspace: &'a Path,
    /// roost's model gateway as the runtime reaches it, OpenAI-style (`…/llm/v1`).
    pub gateway_url: &'a str,
    /// This boot's agent token: the runtime's key to the model gateway.
    pub agent_token: &'a str,
    /// The port its HTTP API listens on (127.0.0.1 of its sandbox).
    pub port: u16,
    /// Its own background model use (heartbeats, memory jobs) on, as the catalogue's
    /// `background_model_use` says; off, those are turned off.
    pub background: bool,
}

/// How to start a packaged runtime and talk to it.
pub struct Launch {
    /// Its command.
    pub argv: Vec<String>,
    /// Its environment, beside roost's contract.
    pub env: BTreeMap<String, String>,
    /// Its configuration, to write into the workspace before it starts.
    pub files: Vec<WorkspaceFile>,
    /// Its turn endpoint.
    pub api: ChatApi,
}

/// A runtime's own OpenAI-compatible chat endpoint, which roost sends each turn to.
#[derive(Debug, Clone)]
pub struct ChatApi {
    /// What answers 200 once it is ready.
    pub ready_path: &'static str,
    /// This boot's bearer token for its API.
    pub token: String,
    /// The `model` the endpoint expects (an agent target, not a provider model).
    pub model: &'static str,
    /// How a request names the agent's one conversation.
    pub session: Session,
}

/// How a chat request names its conversation, so the runtime keeps it.
#[derive(Debug, Clone)]
pub enum Session {
    /// The OpenAI `user` field (OpenClaw derives its session key from it).
    UserField(String),
    /// A request header (Hermes: `X-Hermes-Session-Id`).
    Header(&'static str, String),
}

/// A fresh secret for a runtime's own API (base32, 32 characters: 160 bits).
fn api_token() -> String {
    crate::ids::random_base32(32)
}

/// A file of the runtime's configuration.
fn file(path: PathBuf, text: impl Into<String>) -> WorkspaceFile {
    WorkspaceFile { path, text: text.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_counts_only_with_a_stamp_of_its_locks() {
        let dir = tempfile::tempdir().unwrap();
        let pinned = Package::Hermes.default_version();
        let at = Package::Hermes.dir(dir.path(), pinned.version);
        std::fs::create_dir_all(&at).unwrap();
        assert!(Installation::all(dir.path()).is_empty(), "no stamp: not installed");
        std::fs::write(at.join(STAMP), "0123").unwrap();
        assert!(Installation::all(dir.path()).is_empty(), "another lock's stamp: not installed");
        std::fs::write(at.join(STAMP), pinned.lock_hash()).unwrap();
        let found = Installation::all(dir.path());
        let at = at.canonicalize().unwrap();
        assert_eq!(found, vec![Installation { package: Package::Hermes, version: pinned.version.into(), dir: at }]);
        assert_eq!(Installation::current(Package::OpenClaw, dir.path()), None);
    }

    #[test]
    fn each_package_has_a_catalogue_entry_that_parses() {
        for package in Package::ALL {
            let text = package.catalogue_toml(Path::new("/opt/x \"y\""));
            let catalogue = crate::runtimes::Catalogue::from_toml(&text).unwrap();
            let spec = catalogue.get(package.name()).unwrap();
            assert_eq!(spec.driver.name(), package.name());
            assert!(spec.driver.calls_models());
        }
    }
}

#[cfg(test)]
mod boot_tests {
    use super::*;

    fn boot<'a>(workspace: &'a Path, brief: &'a str, background: bool) -> Boot<'a> {
        Boot {
            instance_id: "ins_1",
            brief,
            model: "gpt-4o-mini",
            workspace,
            gateway_url: "http://127.0.0.1:7300/llm/v1",
            agent_token: "rat_secret",
            port: 8080,
            background,
        }
    }

    fn installation(package: Package) -> Installation {
        Installation { package, version: package.default_version().version.into(), dir: "/opt/rt".into() }
    }

    /// The text of the file of `launch` at `path`.
    fn text<'a>(launch: &'a Launch, path: &Path) -> &'a str {
        &launch.files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("no {}", path.display())).text
    }

    #[test]
    fn openclaw_gets_the_gateway_its_token_and_no_background_model_use() {
        let ws = Path::new("/agents/ins_1");
        let launch = installation(Package::OpenClaw).prepare(&boot(ws, "Be brief.", false));
        let config: serde_json::Value =
            serde_json::from_str(text(&launch, &ws.join(".openclaw/openclaw.json"))).unwrap();
        assert_eq!(config["gateway"]["port"], 8080);
        assert_eq!(config["gateway"]["auth"]["token"], launch.api.token.as_str());
        assert_eq!(launch.env["OPENCLAW_GATEWAY_TOKEN"], launch.api.token);
        assert_eq!(config["models"]["providers"]["roost"]["baseUrl"], "http://127.0.0.1:7300/llm/v1");
        assert_eq!(config["models"]["providers"]["roost"]["apiKey"], "rat_secret");
        assert_eq!(config["agents"]["defaults"]["model"]["primary"], "roost/gpt-4o-mini");
        assert_eq!(config["agents"]["defaults"]["heartbeat"]["every"], "0m");
        assert_eq!(config["plugins"]["entries"]["memory-core"]["config"]["dreaming"]["enabled"], false);
        assert!(config["logging"]["file"].as_str().unwrap().starts_with("/agents/ins_1/"));
        assert_eq!(text(&launch, &ws.join("SOUL.md")), "Be brief.");
        assert_eq!(launch.env["OPENCLAW_SKIP_CHANNELS"], "1");
        // Nothing at boot reaches out: telemetry, update checks, the hosted model catalogue,
        // helper downloads.
        assert_eq!(
            (&config["telemetry"]["enabled"], &config["update"]["checkOnStart"]),
            (&false.into(), &false.into())
        );
        assert_eq!(config["models"]["catalogRefresh"]["enabled"], false);
        assert_eq!(
            (launch.env["OPENCLAW_NO_AUTO_UPDATE"].as_str(), launch.env["OPENCLAW_OFFLINE"].as_str()),
            ("1", "1")
        );
        assert!(launch.argv[0].starts_with("/opt/rt/"));

        // Each boot has a token of its own; background use on leaves the runtime's defaults.
        let again = installation(Package::OpenClaw).prepare(&boot(ws, "Be brief.", true));
        assert_ne!(again.api.token, launch.api.token);
        let config: serde_json::Value =
            serde_json::from_str(text(&again, &ws.join(".openclaw/openclaw.json"))).unwrap();
        assert!(config["agents"]["defaults"]["heartbeat"].is_null() && config["plugins"].is_null(), "{config}");
    }

    #[test]
    fn hermes_gets_the_gateway_and_the_briefs_hash_for_its_launcher() {
        let ws = Path::new("/agents/ins_1");
        let hermes = installation(Package::Hermes);
        let first = hermes.prepare(&boot(ws, "Be brief.", false));
        let config: serde_json::Value = serde_json::from_str(text(&first, &ws.join(".hermes/config.yaml"))).unwrap();
        assert_eq!(config["model"]["base_url"], "http://127.0.0.1:7300/llm/v1");
        assert_eq!(config["model"]["api_key"], "rat_secret");
        assert_eq!(config["curator"]["enabled"], false);
        // Nothing at boot or per turn reaches out: the scanner download, the tool-search
        // gate's model lookup, the catalogue, lazy installs.
        assert_eq!(config["security"]["tirith_enabled"], false);
        assert_eq!(config["tools"]["tool_search"]["enabled"], "off");
        assert_eq!(config["model_catalog"]["enabled"], false);
        assert_eq!(config["security"]["allow_lazy_installs"], false);
        assert_eq!(config["terminal"]["cwd"], "/agents/ins_1");
        assert_eq!(text(&first, &ws.join(".hermes/SOUL.md")), "Be brief.");
        assert_eq!(first.env["API_SERVER_KEY"], first.api.token);
        assert!(first.api.token.len() >= 16, "Hermes wants 16 characters or more");
        assert_eq!(first.env["ROOST_BRIEF_SESSION"], "roost-ins_1");
        let changed = hermes.prepare(&boot(ws, "Speak in rhyme.", true));
        assert_ne!(changed.env["ROOST_BRIEF_SHA256"], first.env["ROOST_BRIEF_SHA256"]);
        assert!(first.files.iter().all(|f| !f.path.ends_with(".roost-brief.sha256")), "the launcher keeps the hash");
    }
}
