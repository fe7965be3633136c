//! Running the package manager, one install at a time across processes.
//!
//! `update.lock` in the data directory holds the installing process's pid and start time;
//! it is created exclusively, so a second install (the daemon's worker and `roost update`,
//! say) waits its turn. A lock whose process is gone, or older than [`STALE_AFTER`], is
//! stale (its holder crashed) and is taken over.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use serde::{Deserialize, Serialize};

/// An install taking longer than this is stopped (a compile from source can take minutes).
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// A lock older than this is stale whatever its pid.
pub const STALE_AFTER: Duration = Duration::from_secs(45 * 60);
/// How much of the command's output is kept.
const OUTPUT_TAIL: usize = 4096;

#[derive(Debug, Serialize, Deserialize)]
struct LockFile {
    pid: u32,
    started_ms: i64,
}

/// The held install lock; dropping it releases it.
#[derive(Debug)]
pub struct InstallLock {
    path: PathBuf,
}

impl InstallLock {
    /// Takes the lock, or says who holds it.
    pub fn acquire(data_dir: &Path, now_ms: i64) -> Result<Self, String> {
        let path = data_dir.join("update.lock");
        std::fs::create_dir_all(data_dir).map_err(|e| format!("creating {}: {e}", data_dir.display()))?;
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    let body = serde_json::to_vec(&LockFile { pid: std::process::id(), started_ms: now_ms })
                        .unwrap_or_default();
                    file.write_all(&body)
                        .and_then(|()| file.sync_all())
                        .map_err(|e| format!("writing the lock: {e}"))?;
                    return Ok(Self { path });
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder: Option<LockFile> =
                        std::fs::read(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
                    let stale = holder.as_ref().is_none_or(|h| {
                        now_ms - h.started_ms > i64::try_from(STALE_AFTER.as_millis()).unwrap_or(i64::MAX)
                            || !process_alive(h.pid)
                    });
                    if !stale {
                        let pid = holder.map_or(0, |h| h.pid);
                        return Err(format!("another install is running (pid {pid})"));
                    }
                    tracing::warn!(path = %path.display(), "taking over a stale install lock");
                    let _ = std::fs::remove_file(&path);
                }
                Err(err) => return Err(format!("creating {}: {err}", path.display())),
            }
        }
        Err("could not take the install lock".into())
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether a process with `pid` exists (on Unix, by signal 0; elsewhere assumed).
fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)) else { return false };
        match rustix::process::test_kill_process(pid) {
            Ok(()) => true,
            Err(err) => err == rustix::io::Errno::PERM,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// The install command for `package` at `version`: the template with both filled in.
/// Both are checked to be plain names first (the version an exact `X.Y.Z`), so nothing
/// reaches the shell unquoted. The command must install exactly the version that was
/// vetted: a template without `{version}` is refused, and so is a `cargo install` without
/// `--locked` (it would build the release with other dependencies than it was released
/// with).
pub fn command_line(template: &str, package: &str, version: &str) -> Result<String, String> {
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c));
    if !plain(package) || !plain(version) || semver::Version::parse(version).is_err() {
        return Err(format!("refusing to install {package:?} {version:?}: not a package name and version"));
    }
    if !template.contains("{version}") {
        return Err(format!(
            "refusing to run the install command `{template}`: it has no {{version}}, so it would not install the \
             version that was checked"
        ));
    }
    if template.contains("cargo install") && !template.split_whitespace().any(|word| word == "--locked") {
        return Err(format!("refusing to run the install command `{template}`: `cargo install` needs --locked"));
    }
    Ok(template.replace("{package}", package).replace("{version}", version))
}

/// Runs `command` with the shell; `Ok` with the output's tail on success, `Err` with it
/// (or why it could not run) on failure.
pub async fn run(command: &str) -> Result<String, String> {
    let mut child = shell(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run `{command}`: {e}"))?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let waited = tokio::time::timeout(INSTALL_TIMEOUT, async {
        let (out, err) = tokio::join!(read_all(stdout), read_all(stderr));
        (child.wait().await, out, err)
    })
    .await;
    let Ok((status, out, err)) = waited else {
        return Err(format!("`{command}` did not finish in {} minutes", INSTALL_TIMEOUT.as_secs() / 60));
    };
    let mut output = String::from_utf8_lossy(&out).into_owned();
    output.push_str(&String::from_utf8_lossy(&err));
    let output = tail(output.trim());
    match status {
        Ok(status) if status.success() => Ok(output),
        Ok(status) => Err(format!("`{command}` failed ({status}): {output}")),
        Err(err) => Err(format!("`{command}`: {err}")),
    }
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> Vec<u8> {
    let mut text = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut pipe, &mut text).await;
    }
    text
}

/// The same, blocking: for the boot-time rollback, which runs before the async runtime.
pub fn run_blocking(command: &str) -> Result<String, String> {
    let (shell, flag) = SHELL;
    let output = std::process::Command::new(shell)
        .args([flag, command])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{command}`: {e}"))?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let text = tail(text.trim());
    if output.status.success() { Ok(text) } else { Err(format!("`{command}` failed ({}): {text}", output.status)) }
}

/// The shell install commands run with, and its "run this" flag.
const SHELL: (&str, &str) = if cfg!(windows) { ("cmd", "/C") } else { ("sh", "-c") };

fn shell(command: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(SHELL.0);
    cmd.args([SHELL.1, command]);
    cmd
}

fn tail(text: &str) -> String {
    if text.len() <= OUTPUT_TAIL {
        return text.to_owned();
    }
    let mut start = text.len() - OUTPUT_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_install_at_a_time_and_stale_locks_are_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let lock = InstallLock::acquire(dir.path(), 1_000).unwrap();
        assert!(InstallLock::acquire(dir.path(), 2_000).unwrap_err().contains("another install"));
        drop(lock);
        let again = InstallLock::acquire(dir.path(), 3_000).unwrap();
        std::mem::forget(again); // as if this process crashed holding it
        let stale = 3_000 + i64::try_from(STALE_AFTER.as_millis()).unwrap() + 1;
        assert!(InstallLock::acquire(dir.path(), stale).is_ok(), "an old lock is stale");
        // A lock of a process that is gone is stale at once.
        std::fs::write(dir.path().join("update.lock"), br#"{"pid": 999999999, "started_ms": 5000}"#).unwrap();
        assert!(InstallLock::acquire(dir.path(), 5_001).is_ok());
    }

    #[test]
    fn only_plain_names_reach_the_shell() {
        let t = super::super::settings::DEFAULT_INSTALL_COMMAND;
        assert_eq!(
            command_line(t, "roost-server", "0.3.0").unwrap(),
            "cargo install roost-server --version 0.3.0 --locked --force"
        );
        assert!(command_line(t, "roost; rm -rf /", "0.3.0").is_err());
        assert!(command_line(t, "roost", "$(reboot)").is_err());
        assert!(command_line(t, "roost", "0.3").is_err(), "only an exact version");
        assert!(command_line(t, "roost", "latest").is_err());
    }

    #[test]
    fn the_command_installs_the_exact_version_locked() {
        let no_version = command_line("cargo install {package} --locked", "roost-server", "0.3.0").unwrap_err();
        assert!(no_version.contains("{version}"), "{no_version}");
        let unlocked =
            command_line("cargo install {package} --version {version}", "roost-server", "0.3.0").unwrap_err();
        assert!(unlocked.contains("--locked"), "{unlocked}");
        assert!(command_line("sh install.sh {package} {version}", "roost-server", "0.3.0").is_ok());
    }

    #[tokio::test]
    async fn commands_report_their_output() {
        assert_eq!(run("echo installed").await.unwrap(), "installed");
        let err = run("echo nope >&2; exit 3").await.unwrap_err();
        assert!(err.contains("nope") && err.contains('3'), "{err}");
        assert_eq!(run_blocking("echo done").unwrap(), "done");
    }
}
