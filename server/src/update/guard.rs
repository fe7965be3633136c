//! The crash-loop guard (seed: "States and transitions: Crash-loop guard").
//!
//! A successful install arms the guard (`update_guard.json`: the version left, the version
//! installed, when). Every boot of roost reads it first, before anything that could crash:
//! the boots inside [`WINDOW_MS`] are counted, and the boot that makes [`MAX_BOOTS`] rolls
//! back (the caller installs the previous version, writes `update_rollback.json` and exits
//! for the supervisor to start the old build). [`CONFIRM_AFTER_MS`] of uptime disarms the
//! guard: the new version is confirmed. A guard older than the window is stale: the update
//! is treated as applied and the guard removed.
//!
//! Every transition takes the time as an argument, so tests drive it with their own clock.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::files;

/// A guard older than this is stale (so every boot it counts is inside this window).
pub const WINDOW_MS: i64 = 3_600_000;
/// Boots inside the window that mean a crash loop.
pub const MAX_BOOTS: usize = 3;
/// Uptime that confirms the new version.
pub const CONFIRM_AFTER_MS: i64 = 300_000;

/// The armed guard, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedGuard {
    /// The version that ran before the install (what a rollback installs).
    pub from: String,
    /// The version installed.
    pub to: String,
    /// The package both are releases of.
    pub package: String,
    /// When the install succeeded, Unix ms.
    pub armed_at_ms: i64,
    /// Boots of the new version so far, Unix ms.
    pub boots_ms: Vec<i64>,
}

/// What a boot should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootVerdict {
    /// No update is being watched.
    Disarmed,
    /// Watching: this is boot number `boots` of the new version.
    Armed {
        /// Boots inside the window, this one included.
        boots: usize,
    },
    /// The guard was older than the window: the update counts as applied; it is removed.
    Stale,
    /// A crash loop: install `guard.from` again, record it, exit.
    RollBack(ArmedGuard),
}

/// The guard file of a data directory.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("update_guard.json")
}

/// The armed guard, if any.
pub fn read(data_dir: &Path) -> Option<ArmedGuard> {
    files::read(&path(data_dir))
}

/// disarmed → armed, after a successful install of `to` over `from`.
pub fn arm(data_dir: &Path, from: &str, to: &str, package: &str, now_ms: i64) -> std::io::Result<()> {
    let guard = ArmedGuard {
        from: from.to_owned(),
        to: to.to_owned(),
        package: package.to_owned(),
        armed_at_ms: now_ms,
        boots_ms: Vec::new(),
    };
    files::write(&path(data_dir), &guard)
}

/// A boot: counts it and decides. Stale guards are removed; a rollback leaves the guard in
/// place for the caller to [`disarm`] once the previous version is installed (so a failed
/// rollback is tried again at the next boot).
pub fn on_boot(data_dir: &Path, now_ms: i64) -> std::io::Result<BootVerdict> {
    let Some(mut guard) = read(data_dir) else { return Ok(BootVerdict::Disarmed) };
    if now_ms - guard.armed_at_ms > WINDOW_MS {
        files::remove(&path(data_dir))?;
        return Ok(BootVerdict::Stale);
    }
    // Every boot recorded is inside the window: the guard itself is younger than it.
    guard.boots_ms.push(now_ms);
    files::write(&path(data_dir), &guard)?;
    if guard.boots_ms.len() >= MAX_BOOTS {
        return Ok(BootVerdict::RollBack(guard));
    }
    Ok(BootVerdict::Armed { boots: guard.boots_ms.len() })
}

/// armed → disarmed once `version`, the watched one, has been up for [`CONFIRM_AFTER_MS`]
/// since `booted_ms`; true when this call confirmed it. A process still running the old
/// version (its update waits for the next start) confirms nothing.
pub fn confirm_if_due(data_dir: &Path, version: &str, booted_ms: i64, now_ms: i64) -> std::io::Result<bool> {
    if now_ms - booted_ms < CONFIRM_AFTER_MS || read(data_dir).is_none_or(|g| g.to != version) {
        return Ok(false);
    }
    files::remove(&path(data_dir))?;
    Ok(true)
}

/// Removes the guard (after a rollback installed the previous version).
pub fn disarm(data_dir: &Path) -> std::io::Result<()> {
    files::remove(&path(data_dir))
}

/// The record `update_rollback.json` keeps of the last rollback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RollbackRecord {
    /// The version rolled back from (the one that crash-looped).
    pub from: String,
    /// The version rolled back to.
    pub to: String,
    /// Why.
    pub reason: String,
    /// When, RFC 3339.
    pub time: String,
    /// Boots of `from` inside the window.
    pub boots: usize,
    /// Whether the package manager installed `to`; if not, the next boot tries again.
    pub installed: bool,
    /// The package manager's output or error, shortened.
    pub detail: String,
}

/// The rollback record file of a data directory.
pub fn rollback_path(data_dir: &Path) -> PathBuf {
    data_dir.join("update_rollback.json")
}

/// The last rollback, if any.
pub fn rollback_record(data_dir: &Path) -> Option<RollbackRecord> {
    files::read(&rollback_path(data_dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;
    const MIN: i64 = 60_000;

    #[test]
    fn a_crash_loop_rolls_back_on_the_third_boot_in_the_window() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(on_boot(dir.path(), T0).unwrap(), BootVerdict::Disarmed);
        arm(dir.path(), "0.2.0", "0.3.0", "roost", T0).unwrap();
        assert_eq!(on_boot(dir.path(), T0 + MIN).unwrap(), BootVerdict::Armed { boots: 1 });
        assert_eq!(on_boot(dir.path(), T0 + 2 * MIN).unwrap(), BootVerdict::Armed { boots: 2 });
        let BootVerdict::RollBack(guard) = on_boot(dir.path(), T0 + 3 * MIN).unwrap() else { panic!("rollback") };
        assert_eq!((guard.from.as_str(), guard.to.as_str(), guard.boots_ms.len()), ("0.2.0", "0.3.0", 3));
        assert!(read(dir.path()).is_some(), "kept until the rollback is installed");
        disarm(dir.path()).unwrap();
        assert_eq!(on_boot(dir.path(), T0 + 4 * MIN).unwrap(), BootVerdict::Disarmed);
    }

    #[test]
    fn every_boot_inside_the_window_counts() {
        let dir = tempfile::tempdir().unwrap();
        arm(dir.path(), "0.2.0", "0.3.0", "roost", T0).unwrap();
        assert_eq!(on_boot(dir.path(), T0 + MIN).unwrap(), BootVerdict::Armed { boots: 1 });
        assert_eq!(on_boot(dir.path(), T0 + 2 * MIN).unwrap(), BootVerdict::Armed { boots: 2 });
        // 59 minutes after the first boot, that one still counts.
        assert!(matches!(on_boot(dir.path(), T0 + 60 * MIN).unwrap(), BootVerdict::RollBack(_)));
    }

    #[test]
    fn uptime_confirms_the_new_version() {
        let dir = tempfile::tempdir().unwrap();
        arm(dir.path(), "0.2.0", "0.3.0", "roost", T0).unwrap();
        let booted = T0 + MIN;
        assert_eq!(on_boot(dir.path(), booted).unwrap(), BootVerdict::Armed { boots: 1 });
        assert!(!confirm_if_due(dir.path(), "0.3.0", booted, booted + CONFIRM_AFTER_MS - 1).unwrap());
        assert!(!confirm_if_due(dir.path(), "0.2.0", booted, booted + CONFIRM_AFTER_MS).unwrap(), "not the old one");
        assert!(read(dir.path()).is_some());
        assert!(confirm_if_due(dir.path(), "0.3.0", booted, booted + CONFIRM_AFTER_MS).unwrap());
        assert_eq!(read(dir.path()), None, "disarmed");
        assert!(!confirm_if_due(dir.path(), "0.3.0", booted, booted + 2 * CONFIRM_AFTER_MS).unwrap());
    }

    #[test]
    fn a_guard_older_than_the_window_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        arm(dir.path(), "0.2.0", "0.3.0", "roost", T0).unwrap();
        assert_eq!(on_boot(dir.path(), T0 + WINDOW_MS + 1).unwrap(), BootVerdict::Stale);
        assert_eq!(read(dir.path()), None, "treated as applied");
        assert_eq!(on_boot(dir.path(), T0 + WINDOW_MS + 2).unwrap(), BootVerdict::Disarmed);
    }
}
