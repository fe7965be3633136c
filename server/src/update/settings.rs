//! What the updater runs with: the seed's environment variables, roost's flags, the role and
//! how a new build gets to run.

use std::time::Duration;

/// Which process this is (seed: "Only the daemon role installs").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `roost daemon`: installs by default.
    Daemon,
    /// `roost serve`: installs only with `SERVICE_AUTO_UPDATE=1`.
    Dashboard,
}

impl Role {
    /// Its name in status answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Daemon => "daemon",
            Self::Dashboard => "dashboard",
        }
    }
}

/// How the installed build gets to run (seed: "Restart behaviour").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// A service supervisor runs roost: stop, and let it start the new build.
    Supervised,
    /// Nothing restarts roost: it re-executes its own image in place.
    Exec,
    /// Keep running; the new build runs at the next start (Windows, or
    /// `SERVICE_AUTOUPDATE_EXEC_RESTART=0`).
    NextStart,
}

impl Restart {
    /// The mode for this process: `supervised` (the flag, or systemd's environment) wins;
    /// otherwise re-exec unless `SERVICE_AUTOUPDATE_EXEC_RESTART=0` or on Windows.
    pub fn detect(supervised_flag: bool, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let systemd = env("INVOCATION_ID").is_some_and(|v| !v.is_empty());
        if supervised_flag || systemd {
            Self::Supervised
        } else if cfg!(windows) || env("SERVICE_AUTOUPDATE_EXEC_RESTART").is_some_and(|v| v.trim() == "0") {
            Self::NextStart
        } else {
            Self::Exec
        }
    }

    /// Its name in status answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Supervised => "supervised",
            Self::Exec => "exec",
            Self::NextStart => "next_start",
        }
    }
}

/// Everything the updater needs to know about its environment.
#[derive(Debug, Clone)]
pub struct UpdateSettings {
    /// Daemon or dashboard.
    pub role: Role,
    /// `SERVICE_AUTO_UPDATE` is `0|false|no|off`: nothing installs, whatever else says.
    pub kill_switch: bool,
    /// `SERVICE_AUTO_UPDATE` as set, trimmed ('' when unset): pages name what the operator
    /// wrote (`0`), not a spelling of their own.
    pub auto_update_env: String,
    /// `SERVICE_AUTO_UPDATE` is `1` (a dashboard process may install).
    pub opted_in: bool,
    /// `SERVICE_UPDATE_CHECK_SECS`, clamped to [30, 86400].
    pub check_every: Duration,
    /// `SERVICE_AUTOUPDATE_MIN_AGE_HOURS`: how old a release must be to install unattended.
    pub min_age: Duration,
    /// `SERVICE_AUTOUPDATE_RETRY_SECS`: how long a version that failed to install is held.
    pub retry: Duration,
    /// How a new build runs.
    pub restart: Restart,
    /// A crates.io-compatible index (`GET {index}/api/v1/crates/{name}`).
    pub index_url: String,
    /// The package of the free tier: roost's own crate by default.
    pub package: String,
    /// The package of the paid tier, installed when the plan becomes entitled; empty for
    /// none.
    pub paid_package: String,
    /// The install command; `{package}` and `{version}` are replaced, run by `sh -c`.
    pub install_command: String,
    /// The minisign public key (base64) every release must be signed with; `None`: the
    /// repository check alone decides.
    pub public_key: Option<String>,
    /// Where a release's signature is published (`{package}`, `{version}` filled in).
    pub signature_url: String,
    /// The version running now.
    pub version: String,
}

/// How long a version is held when the index listed it before every mirror had it.
pub const PROPAGATION_HOLD: Duration = Duration::from_secs(120);

/// The default install command. cargo takes a bare `--version X.Y.Z` as exactly that
/// version, and `--locked` builds it with the dependencies it was released with.
pub const DEFAULT_INSTALL_COMMAND: &str = "cargo install {package} --version {version} --locked --force";

/// The default package: this binary's own crate (not the crates.io name `roost`, which
/// belongs to an unrelated project).
pub const DEFAULT_PACKAGE: &str = env!("CARGO_PKG_NAME");

impl UpdateSettings {
    /// Settings for `role` from the seed's environment variables (via `env`), with roost's
    /// own flags given.
    pub fn new(role: Role, env: &dyn Fn(&str) -> Option<String>, flags: UpdateFlags) -> Self {
        let auto = env("SERVICE_AUTO_UPDATE");
        Self {
            role,
            kill_switch: auto.as_deref().is_some_and(is_kill_switch),
            auto_update_env: auto.as_deref().map(str::trim).unwrap_or_default().to_owned(),
            opted_in: auto.as_deref().is_some_and(|v| v.trim() == "1"),
            check_every: Duration::from_secs(check_secs(env("SERVICE_UPDATE_CHECK_SECS").as_deref())),
            min_age: Duration::from_secs_f64(
                non_negative(env("SERVICE_AUTOUPDATE_MIN_AGE_HOURS").as_deref(), 0.0) * 3600.0,
            ),
            retry: Duration::from_secs_f64(non_negative(env("SERVICE_AUTOUPDATE_RETRY_SECS").as_deref(), 1800.0)),
            restart: Restart::detect(flags.supervised, env),
            index_url: flags.index_url.trim_end_matches('/').to_owned(),
            package: flags.package,
            paid_package: flags.paid_package.trim().to_owned(),
            install_command: flags.install_command,
            public_key: flags.public_key.or_else(|| super::signature::DEFAULT_PUBLIC_KEY.map(str::to_owned)),
            signature_url: flags.signature_url,
            version: running_version(env),
        }
    }

    /// Whether this process may install at all, before stored config: never under the
    /// kill switch; a dashboard only when opted in.
    pub fn may_install(&self) -> bool {
        !self.kill_switch && (self.role == Role::Daemon || self.opted_in)
    }
}

/// roost's own update flags.
#[derive(Debug, Clone)]
pub struct UpdateFlags {
    /// `--supervised`.
    pub supervised: bool,
    /// `--update-index-url`.
    pub index_url: String,
    /// `--update-package`.
    pub package: String,
    /// `--update-paid-package` (empty: none).
    pub paid_package: String,
    /// `--update-install-command`.
    pub install_command: String,
    /// `--update-public-key`, checked to be a minisign public key.
    pub public_key: Option<String>,
    /// `--update-signature-url`.
    pub signature_url: String,
}

impl Default for UpdateFlags {
    fn default() -> Self {
        Self {
            supervised: false,
            index_url: "https://crates.io".into(),
            package: DEFAULT_PACKAGE.into(),
            paid_package: String::new(),
            install_command: DEFAULT_INSTALL_COMMAND.into(),
            public_key: None,
            signature_url: super::signature::DEFAULT_SIGNATURE_URL.into(),
        }
    }
}

/// `0`, `false`, `no` or `off`, in any case: the kill switch.
pub fn is_kill_switch(value: &str) -> bool {
    matches!(value.trim().to_ascii_lowercase().as_str(), "0" | "false" | "no" | "off")
}

/// The poll cadence (`SERVICE_UPDATE_CHECK_SECS`): 60 when unset, else the number of
/// seconds clamped to [30, 86400] (the seed's rule), so `-5`, `0` and `29` are 30 and
/// anything over a day is a day. Fractions are dropped. A value that is not a plain
/// decimal number (`soon`, `1e3`, `""`) cannot be clamped: it is the default 60, with a
/// warning.
pub fn check_secs(value: Option<&str>) -> u64 {
    const DEFAULT: u64 = 60;
    let Some(text) = value.map(str::trim) else { return DEFAULT };
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let plain = !(whole.is_empty() && fraction.is_empty())
        && [whole, fraction].iter().all(|part| part.bytes().all(|b| b.is_ascii_digit()));
    if !plain {
        tracing::warn!(value = %text, "SERVICE_UPDATE_CHECK_SECS is not a number of seconds; polling every 60 s");
        return DEFAULT;
    }
    if text.starts_with('-') {
        return 30;
    }
    // Digits only: a number too long for u64 is over the upper bound anyway.
    let secs = if whole.is_empty() { 0 } else { whole.parse::<u64>().unwrap_or(u64::MAX) };
    secs.clamp(30, 86_400)
}

fn non_negative(value: Option<&str>, default: f64) -> f64 {
    value.and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0).unwrap_or(default)
}

/// The version this process runs: the build's, or the contents of `ROOST_VERSION_FILE`
/// when set. (That file is how the updater's end-to-end tests make one binary play several
/// releases; installs by a real package manager never use it.)
pub fn running_version(env: &dyn Fn(&str) -> Option<String>) -> String {
    env("ROOST_VERSION_FILE")
        .and_then(|path| std::fs::read_to_string(path).ok())
        .map(|text| text.trim().to_owned())
        .filter(|v| semver::Version::parse(v).is_ok())
        .unwrap_or_else(|| crate::build_info::BUILD.version.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |key| map.get(key).cloned()
    }

    #[test]
    fn the_kill_switch_takes_any_case() {
        for off in ["0", "false", "FALSE", "No", "off", " Off "] {
            assert!(is_kill_switch(off), "{off}");
        }
        for on in ["1", "true", "", "offf"] {
            assert!(!is_kill_switch(on), "{on}");
        }
        let daemon = UpdateSettings::new(Role::Daemon, &env(&[("SERVICE_AUTO_UPDATE", "OFF")]), UpdateFlags::default());
        assert!(daemon.kill_switch && !daemon.may_install());
    }

    #[test]
    fn only_the_daemon_installs_unless_opted_in() {
        let flags = UpdateFlags::default;
        assert!(UpdateSettings::new(Role::Daemon, &env(&[]), flags()).may_install());
        assert!(!UpdateSettings::new(Role::Dashboard, &env(&[]), flags()).may_install());
        assert!(UpdateSettings::new(Role::Dashboard, &env(&[("SERVICE_AUTO_UPDATE", "1")]), flags()).may_install());
    }

    #[test]
    fn numbers_are_clamped_or_defaulted() {
        assert_eq!(check_secs(None), 60);
        assert_eq!(check_secs(Some("5")), 30);
        assert_eq!(check_secs(Some("999999")), 86_400);
        assert_eq!(check_secs(Some("soon")), 60);
        // issue 12: a negative cadence is below the lower bound, not unreadable.
        assert_eq!(check_secs(Some("-5")), 30);
        assert_eq!(check_secs(Some(" -86401 ")), 30);
        assert_eq!(check_secs(Some("0")), 30);
        assert_eq!(check_secs(Some("-0")), 30);
        assert_eq!(check_secs(Some("29")), 30);
        assert_eq!(check_secs(Some("30")), 30);
        assert_eq!(check_secs(Some("+45")), 45);
        assert_eq!(check_secs(Some("45.9")), 45);
        assert_eq!(check_secs(Some("86400")), 86_400);
        assert_eq!(check_secs(Some("86401")), 86_400);
        assert_eq!(check_secs(Some("18446744073709551616")), 86_400, "past u64");
        assert_eq!(check_secs(Some("99999999999999999999999999999999999999999")), 86_400);
        assert_eq!(check_secs(Some("-99999999999999999999999999999999999999999")), 30);
        assert_eq!(check_secs(Some(".5")), 30);
        assert_eq!(check_secs(Some("90.")), 90);
        // Not a plain number: nothing to clamp, the default.
        for unreadable in ["", " ", "-", "+", ".", "1e3", "60s", "NaN", "inf", "--5", "5-", "0x1e", "1.2.3"] {
            assert_eq!(check_secs(Some(unreadable)), 60, "{unreadable:?}");
        }
        let settings = UpdateSettings::new(
            Role::Daemon,
            &env(&[("SERVICE_AUTOUPDATE_MIN_AGE_HOURS", "1.5"), ("SERVICE_AUTOUPDATE_RETRY_SECS", "-4")]),
            UpdateFlags::default(),
        );
        assert_eq!(settings.min_age, Duration::from_secs(5400));
        assert_eq!(settings.retry, Duration::from_secs(1800));
    }

    #[test]
    fn the_defaults_track_roosts_own_crate_and_no_paid_package() {
        let settings = UpdateSettings::new(
            Role::Daemon,
            &env(&[("SERVICE_UPDATE_CHECK_SECS", "-5"), ("ROOST_VERSION_FILE", "/nonexistent")]),
            UpdateFlags::default(),
        );
        assert_eq!(settings.package, "roost-server", "not `roost`, another project's crates.io name");
        assert_eq!(settings.paid_package, "", "no paid-tier package unless configured");
        assert_eq!(settings.public_key, None, "no release key is shipped yet");
        assert_eq!(settings.check_every, Duration::from_secs(30));
        assert!(
            settings.install_command.contains("--version {version}") && settings.install_command.contains("--locked")
        );
    }

    #[test]
    fn restart_mode_follows_the_seed_table() {
        assert_eq!(Restart::detect(true, &env(&[])), Restart::Supervised);
        assert_eq!(Restart::detect(false, &env(&[("INVOCATION_ID", "abc")])), Restart::Supervised);
        if cfg!(unix) {
            assert_eq!(Restart::detect(false, &env(&[])), Restart::Exec);
        }
        let no_exec = env(&[("SERVICE_AUTOUPDATE_EXEC_RESTART", "0")]);
        assert_eq!(Restart::detect(false, &no_exec), Restart::NextStart);
    }
}
