//! Tools the tests run that `scripts/test` installs (linked under `target/`) (Python venvs built from a
//! pinned requirements file, Node modules from a lock file). Each install writes the hash
//! of the file it installed from as a stamp; a test checks the stamp, so a missing or stale
//! install fails with the command that fixes it instead of a confusing import error.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The workspace's target directory.
pub fn workspace_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").join("target")
}

fn sha256_hex(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    hex::encode(Sha256::digest(bytes))
}

/// Fails unless `stamp` holds the hash of `source` (what the install step wrote after
/// installing from it); `hint` says how to install.
pub fn require_fresh(what: &str, stamp: &Path, source: &Path, hint: &str) {
    let recorded = std::fs::read_to_string(stamp)
        .unwrap_or_else(|_| panic!("{what} is not installed ({} is missing): {hint}", stamp.display()));
    assert_eq!(
        recorded.trim(),
        sha256_hex(source),
        "{what} is stale ({} changed since it was installed): {hint}",
        source.display()
    );
}

/// The directory of a Python venv `target/<name>` built from `requirements`, checked fresh.
pub fn venv(name: &str, requirements: &Path, hint: &str) -> PathBuf {
    let venv = workspace_target().join(name);
    require_fresh(&format!("the Python venv target/{name}"), &venv.join(".requirements.sha256"), requirements, hint);
    venv
}

/// Where scripts/test installed packaged runtime `package` with `roost runtimes install`
/// (`target/agent-runtimes`, a link into the cache), checked complete and at roost's lock.
pub fn installed_runtime(
    package: roost_server::runtimes::packaged::Package,
) -> roost_server::runtimes::packaged::Installation {
    let runtimes = workspace_target().join("agent-runtimes/runtimes");
    let dir = package.dir(&runtimes, package.default_version().version);
    roost_server::runtimes::packaged::Installation::at(package, &dir).unwrap_or_else(|| {
        panic!(
            "{} is not installed in {} (or not at roost's lock): run `scripts/test --setup-only`",
            package.name(),
            dir.display()
        )
    })
}
