//! The runtime catalogue: which runtimes agents can be created from, what they cost and
//! how roost runs them. Loaded at start-up from `--runtimes` or the built-in file; with the
//! built-in one, packaged runtimes installed while roost serves are offered at once
//! ([`LiveCatalogue`]).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use roost_proto::v1::Runtime;
use serde::Deserialize;

const BUILTIN: &str = include_str!("default_catalogue.toml");

/// How roost runs a runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverSpec {
    /// In-process, deterministic replies.
    Echo,
    /// A child process per agent.
    Process {
        /// argv; `{runtimes_dir}` is replaced by `<data-dir>/runtimes`.
        command: Vec<String>,
        /// Extra environment for the child.
        env: BTreeMap<String, String>,
    },
    /// An LLM over an OpenAI-compatible chat-completions API.
    Assistant,
    /// A packaged runtime ([`super::packaged`]): a child process like `Process`, whose
    /// configuration roost writes and whose own chat endpoint takes the turns.
    Packaged {
        /// Which one.
        package: super::packaged::Package,
        /// Its install directory; else the newest pinned version installed in
        /// `<data-dir>/runtimes/<name>/`.
        install_dir: Option<std::path::PathBuf>,
        /// Whether its own background model use is on (heartbeats, memory jobs): off by
        /// default, because it spends the account's credits without being asked.
        background: bool,
    },
}

impl DriverSpec {
    /// The driver's name in the catalogue and the API.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::Process { .. } => "process",
            Self::Assistant => "assistant",
            Self::Packaged { package, .. } => package.name(),
        }
    }

    /// Whether the runtime's model calls go through the model gateway ([`crate::llm`]),
    /// which meters each one: its turns' usage and charge are then their calls' sum, and
    /// the turn itself is not metered.
    pub fn calls_models(&self) -> bool {
        matches!(self, Self::Process { .. } | Self::Assistant | Self::Packaged { .. })
    }
}

/// A catalogue entry.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeSpec {
    /// The id clients provision with.
    pub id: String,
    /// One line for humans.
    pub description: String,
    /// Plan price per period, in cents.
    pub price_cents_month: i64,
    /// Supported messaging channels.
    pub channels: Vec<String>,
    /// Works without model-key setup on the metered included model.
    pub included_model: bool,
    /// The model an agent uses until its config sets one.
    pub default_model: String,
    /// How to run it.
    pub driver: DriverSpec,
    /// Model calls one turn may make, when the runtime sets its own (else the model gateway's
    /// `--llm-max-calls-per-turn`).
    pub max_calls_per_turn: Option<u32>,
    /// What one turn's model calls may cost, in cents, when the runtime sets its own (else
    /// the model gateway's `--llm-max-turn-spend-cents`).
    pub max_turn_spend_cents: Option<i64>,
    /// What one of its agents may use in its sandbox (`memory_mb`, `cpus`,
    /// `max_processes`, `tmp_mb`, `disk_mb`; roost's defaults where it sets none).
    pub limits: crate::sandbox::Limits,
    /// How long one of its agents may take to be ready, when it sets its own (else
    /// `--boot-timeout-secs`).
    pub boot_timeout: Option<std::time::Duration>,
}

impl RuntimeSpec {
    /// The limits of one of its turns, `defaults` where it sets none.
    pub fn turn_limits(&self, defaults: crate::callers::TurnLimits) -> crate::callers::TurnLimits {
        crate::callers::TurnLimits {
            max_calls: self.max_calls_per_turn.unwrap_or(defaults.max_calls),
            max_cost_nanocents: self.max_turn_spend_cents.map_or(defaults.max_cost_nanocents, |cents| {
                cents.saturating_mul(crate::billing::prices::NANOCENTS_PER_CENT)
            }),
        }
    }

    /// The catalogue entry as the API shows it.
    pub fn to_proto(&self) -> Runtime {
        Runtime {
            id: self.id.clone(),
            price_cents_month: self.price_cents_month,
            channels: self.channels.clone(),
            included_model: self.included_model,
            description: self.description.clone(),
            driver: self.driver.name().to_owned(),
            memory_mb: self.limits.memory_mb,
            cpus: self.limits.cpus,
            max_processes: self.limits.max_processes,
            tmp_mb: self.limits.tmp_mb,
            disk_mb: self.limits.disk_mb,
            boot_timeout_secs: self.boot_timeout.map_or(0, |t| t.as_secs()),
        }
    }
}

/// The runtimes agents can be created from, in file order.
#[derive(Debug, Clone)]
pub struct Catalogue {
    runtimes: Vec<Arc<RuntimeSpec>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    runtime: Vec<RuntimeEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeEntry {
    id: String,
    driver: String,
    #[serde(default)]
    description: String,
    price_cents_month: i64,
    #[serde(default)]
    channels: Vec<String>,
    #[serde(default)]
    included_model: bool,
    #[serde(default)]
    default_model: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    max_calls_per_turn: Option<u32>,
    #[serde(default)]
    max_turn_spend_cents: Option<i64>,
    #[serde(default)]
    memory_mb: Option<u64>,
    #[serde(default)]
    cpus: Option<f64>,
    #[serde(default)]
    max_processes: Option<u32>,
    #[serde(default)]
    tmp_mb: Option<u64>,
    #[serde(default)]
    disk_mb: Option<u64>,
    #[serde(default)]
    boot_timeout_secs: Option<u64>,
    #[serde(default)]
    install_dir: Option<std::path::PathBuf>,
    #[serde(default)]
    background_model_use: Option<bool>,
}

/// Messaging channels roost can connect.
const KNOWN_CHANNELS: &[&str] = &["telegram"];

impl Catalogue {
    /// The catalogue compiled into roost.
    pub fn builtin() -> Self {
        // Parsed in a test below; cannot fail at run time.
        Self::from_toml(BUILTIN).unwrap_or(Self { runtimes: Vec::new() })
    }

    /// The built-in catalogue, with the packaged runtimes installed under `runtimes_dir`
    /// (`<data-dir>/runtimes`) after its own: a runtime is offered once it is installed.
    pub fn builtin_with_installed(runtimes_dir: &Path) -> Self {
        Self::builtin().with_installations(&installations(runtimes_dir))
    }

    /// This catalogue and, after its own, an entry for each installed package it does not
    /// list already (the operator's entry for an id wins).
    pub fn with_installations(&self, installed: &[super::packaged::Installation]) -> Self {
        let mut runtimes = self.runtimes.clone();
        for installation in installed {
            let entry = installation.package.catalogue_toml(&installation.dir);
            let Ok(parsed) = Self::from_toml(&entry) else { continue };
            for spec in parsed.runtimes {
                if !runtimes.iter().any(|r| r.id == spec.id) {
                    runtimes.push(spec);
                }
            }
        }
        Self { runtimes }
    }

    /// Reads a catalogue file.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Self::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses and checks a catalogue.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let file: CatalogueFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut runtimes: Vec<Arc<RuntimeSpec>> = Vec::new();
        for entry in file.runtime {
            let spec = entry.check()?;
            if runtimes.iter().any(|r| r.id == spec.id) {
                return Err(format!("runtime {:?} is listed twice", spec.id));
            }
            runtimes.push(Arc::new(spec));
        }
        if runtimes.is_empty() {
            return Err("the catalogue lists no runtime".into());
        }
        Ok(Self { runtimes })
    }

    /// Every runtime, in file order.
    pub fn all(&self) -> &[Arc<RuntimeSpec>] {
        &self.runtimes
    }

    /// The runtime with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<RuntimeSpec>> {
        self.runtimes.iter().find(|r| r.id == id)
    }
}

/// The packaged runtimes installed under `runtimes_dir`, in catalogue order.
fn installations(runtimes_dir: &Path) -> Vec<super::packaged::Installation> {
    use super::packaged::{Installation, Package};
    Package::ALL.into_iter().filter_map(|p| Installation::current(p, runtimes_dir)).collect()
}

/// How often a running server looks for runtimes installed since it started.
const INSTALLS_CHECKED_EVERY: Duration = Duration::from_secs(1);

/// The catalogue a running server offers: the one it started with, plus the packaged
/// runtimes `roost runtimes install` puts into its runtimes directory while it serves, so
/// an install is offered without a restart. The directory is looked at when a caller asks,
/// at most once a second (a few file reads); a runtime once offered stays offered until
/// the server restarts.
#[derive(Debug)]
pub struct LiveCatalogue {
    base: Catalogue,
    /// Where installs are looked for; none with an operator's `--runtimes` file, which is
    /// the whole list.
    installs: Option<PathBuf>,
    current: RwLock<Current>,
}

#[derive(Debug)]
struct Current {
    catalogue: Arc<Catalogue>,
    /// The install directories it was made with.
    seen: Vec<PathBuf>,
    checked: Option<Instant>,
}

impl LiveCatalogue {
    /// `base`, and the installs under `installs` as they come.
    pub fn new(base: Catalogue, installs: Option<PathBuf>) -> Self {
        let current = Current { catalogue: Arc::new(base.clone()), seen: Vec::new(), checked: None };
        Self { base, installs, current: RwLock::new(current) }
    }

    /// The catalogue now.
    pub fn get(&self) -> Arc<Catalogue> {
        let Some(dir) = &self.installs else {
            return self.current.read().unwrap_or_else(|p| p.into_inner()).catalogue.clone();
        };
        {
            let current = self.current.read().unwrap_or_else(|p| p.into_inner());
            if current.checked.is_some_and(|at| at.elapsed() < INSTALLS_CHECKED_EVERY) {
                return current.catalogue.clone();
            }
        }
        let found = installations(dir);
        let dirs: Vec<PathBuf> = found.iter().map(|i| i.dir.clone()).collect();
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        current.checked = Some(Instant::now());
        if dirs != current.seen {
            // Offered ones stay: a runtime agents use must not vanish from under them.
            let previous = current.catalogue.runtimes.clone();
            let mut next = self.base.with_installations(&found);
            for spec in previous {
                if next.get(&spec.id).is_none() {
                    next.runtimes.push(spec);
                }
            }
            current.catalogue = Arc::new(next);
            current.seen = dirs;
        }
        current.catalogue.clone()
    }
}

impl RuntimeEntry {
    fn check(self) -> Result<RuntimeSpec, String> {
        let id = self.id;
        let valid_id = !id.is_empty()
            && id.len() <= 64
            && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
        if !valid_id {
            return Err(format!("runtime id {id:?}: use 1-64 of a-z, 0-9, '-', '_', '.'"));
        }
        if self.price_cents_month < 0 {
            return Err(format!("runtime {id}: price_cents_month cannot be negative"));
        }
        if let Some(channel) = self.channels.iter().find(|c| !KNOWN_CHANNELS.contains(&c.as_str())) {
            return Err(format!("runtime {id}: unknown channel {channel:?} (known: {})", KNOWN_CHANNELS.join(", ")));
        }
        if self.max_calls_per_turn == Some(0) || self.max_turn_spend_cents.is_some_and(|c| c <= 0) {
            return Err(format!("runtime {id}: max_calls_per_turn and max_turn_spend_cents must be above 0"));
        }
        let defaults = crate::sandbox::Limits::default();
        let limits = crate::sandbox::Limits {
            memory_mb: self.memory_mb.unwrap_or(defaults.memory_mb),
            cpus: self.cpus.unwrap_or(defaults.cpus),
            max_processes: self.max_processes.unwrap_or(defaults.max_processes),
            tmp_mb: self.tmp_mb.unwrap_or(defaults.tmp_mb),
            disk_mb: self.disk_mb.unwrap_or(defaults.disk_mb),
        };
        if !(16..=1 << 20).contains(&limits.memory_mb)
            || !(0.01..=1024.0).contains(&limits.cpus)
            || !(8..=1 << 20).contains(&limits.max_processes)
            || !(1..=1 << 20).contains(&limits.tmp_mb)
            || !(crate::sandbox::disk::MIN_DISK_MB..=1 << 24).contains(&limits.disk_mb)
        {
            return Err(format!(
                "runtime {id}: limits out of range (memory_mb 16-1048576, cpus 0.01-1024, max_processes 8-1048576, \
                 tmp_mb 1-1048576, disk_mb 16-16777216)"
            ));
        }
        if self.driver != "process" && (!self.command.is_empty() || !self.env.is_empty()) {
            return Err(format!("runtime {id}: command and env are for process runtimes"));
        }
        let package = super::packaged::Package::parse(&self.driver);
        if package.is_none() && (self.install_dir.is_some() || self.background_model_use.is_some()) {
            return Err(format!(
                "runtime {id}: install_dir and background_model_use are for packaged runtimes (openclaw, hermes)"
            ));
        }
        if self.boot_timeout_secs.is_some_and(|s| !(1..=3600).contains(&s)) {
            return Err(format!("runtime {id}: boot_timeout_secs must be 1-3600"));
        }
        let driver = match (self.driver.as_str(), package) {
            (_, Some(package)) => DriverSpec::Packaged {
                package,
                install_dir: self.install_dir,
                background: self.background_model_use.unwrap_or(false),
            },
            ("echo", _) => DriverSpec::Echo,
            ("assistant", _) => DriverSpec::Assistant,
            ("process", _) if self.command.is_empty() => {
                return Err(format!("runtime {id}: a process runtime needs a command"));
            }
            ("process", _) => DriverSpec::Process { command: self.command, env: self.env },
            (other, _) => {
                return Err(format!(
                    "runtime {id}: unknown driver {other:?} (echo, process, assistant, openclaw, hermes)"
                ));
            }
        };
        Ok(RuntimeSpec {
            id,
            description: self.description,
            price_cents_month: self.price_cents_month,
            channels: self.channels,
            included_model: self.included_model,
            default_model: self.default_model,
            driver,
            max_calls_per_turn: self.max_calls_per_turn,
            max_turn_spend_cents: self.max_turn_spend_cents,
            limits,
            boot_timeout: self.boot_timeout_secs.map(std::time::Duration::from_secs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_server_offers_a_runtime_installed_after_it_started() {
        use super::super::packaged::{Package, STAMP};
        let dir = tempfile::tempdir().unwrap();
        let live = LiveCatalogue::new(Catalogue::builtin(), Some(dir.path().to_owned()));
        assert!(live.get().get("hermes").is_none());
        let pinned = Package::Hermes.default_version();
        let at = Package::Hermes.dir(dir.path(), pinned.version);
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join(STAMP), pinned.lock_hash()).unwrap();
        std::thread::sleep(INSTALLS_CHECKED_EVERY + Duration::from_millis(100));
        assert!(live.get().get("hermes").is_some(), "offered without a restart");
        std::fs::remove_dir_all(&at).unwrap();
        std::thread::sleep(INSTALLS_CHECKED_EVERY + Duration::from_millis(100));
        assert!(live.get().get("hermes").is_some(), "a runtime once offered stays offered");
        let fixed = LiveCatalogue::new(Catalogue::builtin(), None);
        assert!(fixed.get().get("hermes").is_none(), "an operator's catalogue file is the whole list");
    }

    #[test]
    fn the_builtin_catalogue_has_echo_a_process_runtime_and_a_paid_one() {
        let catalogue = Catalogue::from_toml(BUILTIN).unwrap();
        assert_eq!(catalogue.get("echo").unwrap().driver, DriverSpec::Echo);
        assert!(catalogue.all().iter().any(|r| matches!(r.driver, DriverSpec::Process { .. })));
        assert!(catalogue.all().iter().any(|r| r.price_cents_month > 0));
    }

    #[test]
    fn the_builtin_catalogue_offers_a_packaged_runtime_once_it_is_installed() {
        use super::super::packaged::{Package, STAMP};
        let dir = tempfile::tempdir().unwrap();
        assert!(Catalogue::builtin_with_installed(dir.path()).get("hermes").is_none());
        let pinned = Package::Hermes.default_version();
        let at = Package::Hermes.dir(dir.path(), pinned.version);
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join(STAMP), pinned.lock_hash()).unwrap();
        let catalogue = Catalogue::builtin_with_installed(dir.path());
        let hermes = catalogue.get("hermes").expect("offered once installed");
        assert_eq!(
            hermes.driver,
            DriverSpec::Packaged {
                package: Package::Hermes,
                install_dir: Some(at.canonicalize().unwrap()),
                background: false
            }
        );
        assert!(catalogue.get("openclaw").is_none(), "not installed, not offered");
        assert!(catalogue.get("echo").is_some());
    }

    #[test]
    fn bad_catalogues_are_refused_with_a_reason() {
        let cases = [
            ("", "missing field"),
            ("[[runtime]]\nid = \"Bad Id\"\ndriver = \"echo\"\nprice_cents_month = 0\n", "use 1-64"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = -1\n", "negative"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"process\"\nprice_cents_month = 0\n", "needs a command"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"warp\"\nprice_cents_month = 0\n", "unknown driver"),
            (
                "[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\nchannels = [\"fax\"]\n",
                "unknown channel",
            ),
            (
                "[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\n[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\n",
                "twice",
            ),
            ("[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\ncolour = 1\n", "unknown field"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\nmax_calls_per_turn = 0\n", "above 0"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\nmemory_mb = 1\n", "out of range"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\ncpus = 0.0\n", "out of range"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"echo\"\nprice_cents_month = 0\ninstall_dir = \"/x\"\n", "packaged"),
            ("[[runtime]]\nid = \"a\"\ndriver = \"hermes\"\nprice_cents_month = 0\nboot_timeout_secs = 0\n", "1-3600"),
        ];
        for (text, why) in cases {
            let err = Catalogue::from_toml(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }
}
