//! Self-update (docs/operations.md#self-update): the update worker, the
//! crash-loop guard with rollback, failed-version backoff, plan-driven auto_update and the
//! kill switch.
//!
//! Everything the updater keeps lives in files of the data directory, not in the store:
//! `update_state.json` (flags, holds, the last check and attempt, history),
//! `update_guard.json`, `update_rollback.json` and `update.lock`. An update must be able to
//! roll back a release whose store migration or startup is broken, so it cannot depend on
//! the store.
//!
//! The worker polls the index every `SERVICE_UPDATE_CHECK_SECS`, picks the newest release
//! newer than the running one and at least `SERVICE_AUTOUPDATE_MIN_AGE_HOURS` old (not
//! held), installs it with the configured command when auto_update is on, arms the guard,
//! and gets the new build running per [`Restart`]. Only roost's own releases are candidates,
//! and each is vetted again right before its install ([`trust`]: its index entry must name
//! roost's repository, it must not have been yanked since the check, and with
//! `--update-public-key` its signature must verify); a refused version is held like a
//! failed one and the refusal recorded. Whether it installs is decided in this
//! order: the kill switch (`SERVICE_AUTO_UPDATE=0|false|no|off`) first, then the role (a
//! dashboard only with `SERVICE_AUTO_UPDATE=1`), then the stored flag (an explicit
//! `auto_update` from `POST /api/update-check/config`, or one enabled by an entitled
//! plan), then the default (on).

pub mod files;
pub mod guard;
pub mod identity;
pub mod install;
pub mod releases;
pub mod service;
pub mod settings;
pub mod signature;
pub mod trust;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use semver::Version;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use self::settings::{Restart, Role, UpdateFlags, UpdateSettings};
use self::{
    guard::{BootVerdict, RollbackRecord},
    install::InstallLock,
    releases::{Hold, Index},
    trust::Refusal,
};
use crate::time::now_ms;

/// Plans that turn auto_update on (seed: "Plans").
pub const ENTITLED_PLANS: [&str; 4] = ["trial", "starter", "pro", "enterprise"];
/// History kept in the state file.
const HISTORY: usize = 100;

/// One thing the updater did, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When, Unix ms.
    pub at_ms: i64,
    /// "check", "install", "rollback", "plan" or "config".
    pub kind: String,
    /// The version concerned.
    pub version: String,
    /// "ok", "failed", "none", "skipped", "held", "refused" (not roost's, unsigned, badly
    /// signed or yanked: the detail says which).
    pub outcome: String,
    /// For humans.
    pub detail: String,
}

impl Event {
    fn new(kind: &str, version: &str, outcome: &str, detail: impl Into<String>) -> Self {
        Self {
            at_ms: now_ms(),
            kind: kind.into(),
            version: version.into(),
            outcome: outcome.into(),
            detail: detail.into(),
        }
    }
}

/// `update_state.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    /// The stored auto_update flag; `None` follows the default.
    pub auto_update: Option<bool>,
    /// "user", "plan" or "".
    pub auto_update_source: String,
    /// The plan the upstream last reported.
    pub plan: String,
    /// The package tracked, when not the configured free one (after a plan upgrade).
    pub package: String,
    /// The paid-tier package, while an upgrade's install of it has not succeeded yet.
    pub pending_package: String,
    /// Dismissed banner versions.
    pub dismissed: Vec<String>,
    /// Versions held back.
    pub holds: Vec<Hold>,
    /// The newest release seen at the last check.
    pub latest: String,
    /// The last check.
    pub last_check: Option<Event>,
    /// The last install attempt.
    pub last_attempt: Option<Event>,
    /// Everything, oldest first, at most [`HISTORY`].
    pub history: Vec<Event>,
}

impl State {
    fn record(&mut self, event: Event) {
        match event.kind.as_str() {
            "check" => self.last_check = Some(event.clone()),
            "install" => self.last_attempt = Some(event.clone()),
            _ => {}
        }
        // A poll that found what the previous one found only moves that entry's time, so
        // a minute's cadence does not push installs and rollbacks out of the history.
        if let Some(last) = self.history.last_mut()
            && event.kind == "check"
            && last.kind == "check"
            && (&last.version, &last.outcome, &last.detail) == (&event.version, &event.outcome, &event.detail)
        {
            last.at_ms = event.at_ms;
            return;
        }
        self.history.push(event);
        let excess = self.history.len().saturating_sub(HISTORY);
        self.history.drain(..excess);
    }
}

fn state_path(data_dir: &Path) -> PathBuf {
    data_dir.join("update_state.json")
}

/// The outcome of one check.
#[derive(Debug, Clone, Default)]
pub struct CheckOutcome {
    /// The check.
    pub check: Event,
    /// The release chosen to install, if any.
    pub candidate: Option<String>,
    /// The install it ran, if any.
    pub install: Option<Event>,
}

/// The updater of one process.
pub struct Updater {
    settings: UpdateSettings,
    data_dir: PathBuf,
    index: Index,
    state: tokio::sync::Mutex<State>,
    installing: tokio::sync::Mutex<()>,
    shutdown: CancellationToken,
    booted_ms: i64,
}

impl Updater {
    /// The updater for `data_dir`; a restart after an install cancels `shutdown`.
    pub fn new(settings: UpdateSettings, data_dir: PathBuf, shutdown: CancellationToken) -> Arc<Self> {
        let state = files::read(&state_path(&data_dir)).unwrap_or_default();
        Arc::new(Self {
            index: Index::new(&settings.index_url),
            settings,
            data_dir,
            state: tokio::sync::Mutex::new(state),
            installing: tokio::sync::Mutex::new(()),
            shutdown,
            booted_ms: now_ms(),
        })
    }

    /// Its settings.
    pub fn settings(&self) -> &UpdateSettings {
        &self.settings
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A copy of the stored state.
    pub async fn state(&self) -> State {
        self.state.lock().await.clone()
    }

    /// Whether the newest release the last check saw (`state.latest`) is newer than the
    /// running version.
    pub fn newer_available(&self, state: &State) -> bool {
        let current = Version::parse(&self.settings.version).ok();
        let latest = Version::parse(&state.latest).ok();
        matches!((current, latest), (Some(c), Some(l)) if l > c)
    }

    /// Whether an install is running in this process.
    pub fn is_installing(&self) -> bool {
        self.installing.try_lock().is_err()
    }

    /// Changes the state and writes it, atomically; a write failure is logged (the state
    /// stays changed in memory).
    async fn change<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().await;
        let out = change(&mut state);
        if let Err(err) = files::write(&state_path(&self.data_dir), &*state) {
            warn!(error = %err, "cannot write update_state.json");
        }
        out
    }

    /// The stored flag resolved: off under the kill switch, else the stored value, else
    /// the default (on for the daemon, on for an opted-in dashboard).
    pub fn auto_update_of(&self, state: &State) -> bool {
        if self.settings.kill_switch {
            return false;
        }
        state.auto_update.unwrap_or(self.settings.role == Role::Daemon || self.settings.opted_in)
    }

    /// Whether this process installs unattended now.
    pub async fn installs_unattended(&self) -> bool {
        self.settings.may_install() && self.auto_update_of(&*self.state.lock().await)
    }

    /// The package tracked now.
    pub fn package_of(&self, state: &State) -> String {
        if state.package.is_empty() { self.settings.package.clone() } else { state.package.clone() }
    }

    /// `POST /api/update-check/config {auto_update}`: an explicit per-node choice.
    pub async fn set_auto_update(&self, value: bool) -> State {
        self.change(|state| {
            state.auto_update = Some(value);
            state.auto_update_source = "user".into();
            state.record(Event::new("config", "", "ok", format!("auto_update set to {value} for this node")));
            state.clone()
        })
        .await
    }

    /// Hides the banner for `version`.
    pub async fn dismiss(&self, version: &str) -> Vec<String> {
        self.change(|state| {
            if !state.dismissed.iter().any(|v| v == version) {
                state.dismissed.push(version.to_owned());
            }
            state.dismissed.clone()
        })
        .await
    }

    /// Polls the index and, when `install` allows, installs the chosen release. `manual`
    /// checks (`roost update`) ignore the minimum age. A newer release that is not roost's
    /// is refused: held, and named in the check's detail (outcome "refused" when nothing
    /// else is to install).
    pub async fn check(&self, install: bool, manual: bool) -> CheckOutcome {
        let state = self.state().await;
        let package = self.package_of(&state);
        let current = Version::parse(&self.settings.version).unwrap_or_else(|_| Version::new(0, 0, 0));
        let listing = match self.index.listing(&package).await {
            Ok(listing) => listing,
            Err(err) => {
                let check = Event::new("check", "", "failed", err);
                self.change(|s| s.record(check.clone())).await;
                return CheckOutcome { check, candidate: None, install: None };
            }
        };
        let min_age = if manual { std::time::Duration::ZERO } else { self.settings.min_age };
        let review = trust::review(&listing, &current, now_ms(), min_age, &state.holds);
        let choice = review.choice;
        let latest = choice.latest.as_ref().map(ToString::to_string).unwrap_or_default();
        let mut detail = match &choice.install {
            Some(version) => format!("{package} {version} is available (running {current})"),
            None if choice.latest.as_ref().is_some_and(|l| *l > current) => {
                format!("{package} {latest} is newer but held back or younger than the minimum age")
            }
            None if latest.is_empty() => format!("the index lists no release of {package} from roost's repository"),
            None => format!("{package} {current} is the newest (latest release: {latest})"),
        };
        if let Some((version, reason)) = &review.refused {
            detail = format!("{detail}; refused {package} {version}: {reason}");
            if self.hold_once(&version.to_string(), self.settings.retry, "refused: another repository").await {
                warn!(%package, %version, %reason, "refusing a release that is not roost's; version held");
            }
        }
        let outcome = match (&choice.install, &review.refused) {
            (Some(_), _) => "ok",
            (None, Some(_)) => "refused",
            (None, None) => "none",
        };
        let check = Event::new("check", &latest, outcome, detail);
        self.change(|s| {
            s.latest.clone_from(&latest);
            s.record(check.clone());
        })
        .await;
        let candidate = choice.install.map(|v| v.to_string());
        // Installed already and waiting for the next start (restart mode next_start): not again.
        let pending = guard::read(&self.data_dir).is_some_and(|g| Some(&g.to) == candidate.as_ref());
        let install = match &candidate {
            Some(version) if install && !pending => Some(self.install(&package, version).await),
            _ => None,
        };
        CheckOutcome { check, candidate, install }
    }

    /// One unattended poll: installs only when allowed.
    pub async fn poll(&self) -> CheckOutcome {
        let allowed = self.installs_unattended().await;
        self.check(allowed, false).await
    }

    /// Installs `package` at `version`: one at a time, vetted first ([`trust::vet`]: a
    /// refused version is held and nothing runs), the guard armed on success, the version
    /// held on failure; then the new build is started per [`Restart`].
    pub async fn install(&self, package: &str, version: &str) -> Event {
        let _one = self.installing.lock().await;
        let policy = trust::Policy {
            public_key: self.settings.public_key.as_deref(),
            signature_url: &self.settings.signature_url,
        };
        if let Err(refusal) = trust::vet(&self.index, policy, package, version).await {
            return self.refuse("install", package, version, refusal).await;
        }
        let now = now_ms();
        let result = match InstallLock::acquire(&self.data_dir, now) {
            Err(err) => Err(err),
            Ok(lock) => {
                let outcome = match install::command_line(&self.settings.install_command, package, version) {
                    Ok(command) => {
                        info!(%package, %version, %command, "installing an update");
                        install::run(&command).await
                    }
                    Err(err) => Err(err),
                };
                drop(lock);
                outcome
            }
        };
        let event = match result {
            Ok(output) => {
                let from = self.settings.version.clone();
                if let Err(err) = guard::arm(&self.data_dir, &from, version, package, now_ms()) {
                    warn!(error = %err, "installed, but the crash-loop guard could not be armed");
                }
                Event::new("install", version, "ok", format!("installed {package} {version} over {from}: {output}"))
            }
            Err(err) => {
                let (hold, reason) = if releases::is_propagation_lag(&err) {
                    (settings::PROPAGATION_HOLD, "not yet on every mirror")
                } else {
                    (self.settings.retry, "install failed")
                };
                self.hold(version, hold, reason).await;
                warn!(%package, %version, error = %err, "update install failed; version held");
                Event::new("install", version, "failed", err)
            }
        };
        self.change(|s| s.record(event.clone())).await;
        if event.outcome == "ok" {
            self.start_new_build(version);
        }
        event
    }

    /// Records that `version` of `package` is refused (an event of `kind`, outcome
    /// "refused") and holds it like a failed version.
    async fn refuse(&self, kind: &str, package: &str, version: &str, refusal: Refusal) -> Event {
        let hold = if refusal.transient { settings::PROPAGATION_HOLD } else { self.settings.retry };
        self.hold(version, hold, &format!("refused: {}", refusal.short)).await;
        warn!(%package, %version, reason = %refusal.detail, "update refused; version held");
        let event = Event::new(kind, version, "refused", format!("refused {package} {version}: {}", refusal.detail));
        self.change(|s| s.record(event.clone())).await;
        event
    }

    /// Holds `version` unless it is held already; true when this call held it.
    async fn hold_once(&self, version: &str, hold: std::time::Duration, reason: &str) -> bool {
        let now = now_ms();
        if self.state.lock().await.holds.iter().any(|h| h.version == version && h.until_ms > now) {
            return false;
        }
        self.hold(version, hold, reason).await;
        true
    }

    async fn hold(&self, version: &str, hold: std::time::Duration, reason: &str) {
        let until_ms = now_ms() + i64::try_from(hold.as_millis()).unwrap_or(i64::MAX / 2);
        self.change(|s| {
            s.holds.retain(|h| h.version != version && h.until_ms > now_ms());
            s.holds.push(Hold { version: version.to_owned(), until_ms, reason: reason.to_owned() });
        })
        .await;
    }

    /// Gets the installed build running (seed: "Restart behaviour").
    fn start_new_build(&self, version: &str) {
        match self.settings.restart {
            Restart::Supervised => {
                info!(%version, "update installed; exiting for the supervisor to start it");
                self.shutdown.cancel();
            }
            Restart::Exec => {
                info!(%version, "update installed; restarting into it");
                crate::control::request_restart();
                self.shutdown.cancel();
            }
            Restart::NextStart => info!(%version, "update installed; it runs from the next start"),
        }
    }

    /// What the daemon's heartbeat learned: the upstream's plan (seed: "Plan-driven
    /// auto_update"). An entitled plan turns auto_update on, never off, and never over an
    /// explicit opt-out; nothing happens under the kill switch or for other plans. On an
    /// upgrade to an entitled plan the paid-tier package is installed at once.
    pub async fn apply_plan(&self, plan: &str) -> Option<Event> {
        let plan = plan.trim().to_ascii_lowercase();
        let entitled = ENTITLED_PLANS.contains(&plan.as_str());
        let paid = self.settings.paid_package.clone();
        let enabled = self
            .change(|s| {
                let was_entitled = ENTITLED_PLANS.contains(&s.plan.as_str());
                let changed = s.plan != plan;
                s.plan.clone_from(&plan);
                if !entitled || self.settings.kill_switch {
                    return false;
                }
                let opted_out = s.auto_update == Some(false) && s.auto_update_source == "user";
                let enabled = !opted_out && s.auto_update != Some(true);
                if enabled {
                    s.auto_update = Some(true);
                    s.auto_update_source = "plan".into();
                }
                if !was_entitled && !paid.is_empty() && paid != self.settings.package && s.package != paid {
                    s.pending_package.clone_from(&paid);
                }
                if changed || enabled {
                    let what = if enabled { "auto_update enabled" } else { "auto_update unchanged" };
                    s.record(Event::new("plan", "", "ok", format!("plan {plan}: {what}")));
                }
                enabled
            })
            .await;
        if enabled {
            info!(%plan, "entitled plan: auto_update enabled for this node");
        }
        self.install_pending_package().await
    }

    /// Installs the paid-tier package an upgrade asked for (retried at each heartbeat until
    /// it succeeds; a failed version is held like any other).
    async fn install_pending_package(&self) -> Option<Event> {
        let state = self.state().await;
        if state.pending_package.is_empty() || !self.installs_unattended().await {
            return None;
        }
        let package = state.pending_package.clone();
        let listing = match self.index.listing(&package).await {
            Ok(listing) => listing,
            Err(err) => {
                warn!(error = %err, %package, "cannot list the paid-tier package");
                return None;
            }
        };
        // Any version of the other package counts, even one numbered like the running one.
        let any = Version::new(0, 0, 0);
        let review = trust::review(&listing, &any, now_ms(), std::time::Duration::ZERO, &state.holds);
        if let Some((version, reason)) = &review.refused {
            let version = version.to_string();
            // Heartbeats come often: the refusal is recorded once per hold.
            if self.hold_once(&version, self.settings.retry, "refused: another repository").await {
                warn!(%package, %version, %reason, "refusing a paid-tier release that is not roost's");
                let detail = format!("paid-tier package: refused {package} {version}: {reason}");
                self.change(|s| s.record(Event::new("plan", &version, "refused", detail))).await;
            }
        }
        let newest = review.choice.install?;
        // Tracked from now on (set before the install, which may restart roost at once).
        let previous = self
            .change(|s| {
                s.pending_package.clear();
                std::mem::replace(&mut s.package, package.clone())
            })
            .await;
        let event = self.install(&package, &newest.to_string()).await;
        if event.outcome != "ok" {
            self.change(|s| {
                s.package = previous;
                s.pending_package = package;
            })
            .await;
        }
        Some(event)
    }

    /// Polls every `SERVICE_UPDATE_CHECK_SECS` until `stop`, starting at once; confirms a
    /// watched version after [`guard::CONFIRM_AFTER_MS`] of uptime.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let confirm = {
            let this = self.clone();
            let stop = stop.clone();
            async move {
                let wait = guard::CONFIRM_AFTER_MS - (now_ms() - this.booted_ms);
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = tokio::time::sleep(std::time::Duration::from_millis(u64::try_from(wait).unwrap_or(0))) => {
                        match guard::confirm_if_due(&this.data_dir, &this.settings.version, this.booted_ms, now_ms()) {
                            Ok(true) => info!(version = %this.settings.version, "update confirmed after 300 s of uptime"),
                            Ok(false) => {}
                            Err(err) => warn!(error = %err, "cannot disarm the crash-loop guard"),
                        }
                    }
                }
            }
        };
        let polls = async {
            let mut failures = FailureLog::default();
            loop {
                let outcome = self.poll().await;
                let failed = (outcome.check.outcome == "failed").then_some(outcome.check.detail.as_str());
                match failures.note(failed) {
                    Noted::New => warn!(error = %outcome.check.detail, "update check failed"),
                    Noted::Again => debug!(error = %outcome.check.detail, "update check failed again"),
                    Noted::Recovered => info!("update check succeeded again"),
                    Noted::Fine => {}
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(self.settings.check_every) => {}
                }
            }
        };
        tokio::join!(confirm, polls);
    }

    /// The rollback record, if one was written.
    pub fn rollback_record(&self) -> Option<RollbackRecord> {
        guard::rollback_record(&self.data_dir)
    }
}

/// What the poll loop logs of a check's failure: a WARN the first time a failure is seen,
/// the same failure again only at debug (a machine offline or with updates off would
/// otherwise log a WARN every minute for months), and a line when checks work again.
#[derive(Debug, Default)]
struct FailureLog {
    last: Option<String>,
}

/// How a check's outcome is logged.
#[derive(Debug, PartialEq, Eq)]
enum Noted {
    /// A failure not seen just before: WARN.
    New,
    /// The failure seen just before: debug.
    Again,
    /// A success after failures: info.
    Recovered,
    /// A success after a success: nothing.
    Fine,
}

impl FailureLog {
    /// Notes a check's outcome: its failure's detail, or `None` when it worked.
    fn note(&mut self, failure: Option<&str>) -> Noted {
        match (failure, self.last.as_deref()) {
            (Some(now), Some(before)) if now == before => Noted::Again,
            (Some(now), _) => {
                self.last = Some(now.to_owned());
                Noted::New
            }
            (None, Some(_)) => {
                self.last = None;
                Noted::Recovered
            }
            (None, None) => Noted::Fine,
        }
    }
}

/// The crash-loop guard's boot step, run first by `serve` and `daemon` (before their
/// configuration is even read). `Err` means this process must not go on: `Err(0)` when the
/// previous build was installed again (the caller exits for its supervisor, or re-executes
/// into it), `Err(1)` when the rollback install failed (the next start tries again).
pub fn guard_at_boot(data_dir: &Path, settings: &UpdateSettings) -> Result<(), u8> {
    let verdict = match guard::on_boot(data_dir, now_ms()) {
        Ok(verdict) => verdict,
        Err(err) => {
            eprintln!("roost: the crash-loop guard cannot be read or written ({err}); continuing");
            return Ok(());
        }
    };
    let guard = match verdict {
        BootVerdict::Disarmed | BootVerdict::Armed { .. } => return Ok(()),
        BootVerdict::Stale => {
            eprintln!("roost: the last update's guard is over an hour old; the update counts as applied");
            return Ok(());
        }
        BootVerdict::RollBack(guard) => guard,
    };
    let boots = guard.boots_ms.len();
    eprintln!(
        "roost: {} crashed {boots} times within an hour of its install; rolling back to {}",
        guard.to, guard.from
    );
    let result = install::command_line(&settings.install_command, &guard.package, &guard.from)
        .and_then(|command| install::run_blocking(&command));
    let record = RollbackRecord {
        from: guard.to.clone(),
        to: guard.from.clone(),
        reason: format!("crash loop: {boots} boots within {} s of the install", guard::WINDOW_MS / 1000),
        time: crate::time::rfc3339_ns(now_ms().saturating_mul(1_000_000)),
        boots,
        installed: result.is_ok(),
        detail: match &result {
            Ok(output) | Err(output) => output.clone(),
        },
    };
    if let Err(err) = files::write(&guard::rollback_path(data_dir), &record) {
        eprintln!("roost: cannot write update_rollback.json: {err}");
    }
    let mut state: State = files::read(&state_path(data_dir)).unwrap_or_default();
    let hold_ms = i64::try_from(settings.retry.as_millis()).unwrap_or(i64::MAX / 2);
    state.holds.retain(|h| h.version != guard.to);
    state.holds.push(Hold { version: guard.to.clone(), until_ms: now_ms() + hold_ms, reason: "rolled back".into() });
    let outcome = if result.is_ok() { "ok" } else { "failed" };
    state.record(Event::new("rollback", &guard.to, outcome, record.reason.clone()));
    if let Err(err) = files::write(&state_path(data_dir), &state) {
        eprintln!("roost: cannot write update_state.json: {err}");
    }
    match result {
        Ok(_) => {
            let _ = guard::disarm(data_dir);
            eprintln!("roost: {} installed again; starting it", guard.from);
            Err(0)
        }
        Err(err) => {
            eprintln!("roost: the rollback install failed ({err}); the next start tries again");
            Err(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_check_warns_once_until_it_works_or_fails_differently() {
        let mut log = FailureLog::default();
        assert_eq!(log.note(None), Noted::Fine);
        assert_eq!(log.note(Some("index unreachable")), Noted::New);
        for _ in 0..100 {
            assert_eq!(log.note(Some("index unreachable")), Noted::Again);
        }
        assert_eq!(log.note(Some("index answered 503")), Noted::New);
        assert_eq!(log.note(None), Noted::Recovered);
        assert_eq!(log.note(None), Noted::Fine);
        assert_eq!(log.note(Some("index answered 503")), Noted::New);
    }

    #[test]
    fn repeated_identical_checks_keep_one_history_entry() {
        let mut state = State::default();
        let check = |detail: &str| Event::new("check", "0.3.0", "none", detail);
        state.record(check("same"));
        state.record(Event::new("install", "0.3.0", "ok", "installed"));
        state.record(check("same"));
        state.record(check("same"));
        state.record(check("other"));
        let kinds: Vec<(&str, &str)> = state.history.iter().map(|e| (e.kind.as_str(), e.detail.as_str())).collect();
        assert_eq!(kinds, [("check", "same"), ("install", "installed"), ("check", "same"), ("check", "other")]);
        for _ in 0..150 {
            state.record(Event::new("config", "", "ok", "x"));
        }
        assert_eq!(state.history.len(), HISTORY);
    }
}
