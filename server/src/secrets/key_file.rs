//! `<data-dir>/secret.key`: the key when `ROOST_SECRET_KEY` is unset, generated on first
//! start. Same text form as the variable (32 bytes, base64, a newline), so an operator can
//! hand it to other replicas as `ROOST_SECRET_KEY=$(cat secret.key)`.
//!
//! Created atomically and never overwritten: the key is written in full to a private
//! temporary file, which is then hard-linked to its name. `link` fails when the name
//! exists, so two processes starting together end up with the same key (the loser reads
//! the winner's), and nobody ever sees a half-written file.

use std::{
    io::{ErrorKind, Write as _},
    path::Path,
};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use tracing::{info, warn};

use super::{KEY_BYTES, SecretKey};

/// The key file's name in the data directory.
pub const KEY_FILE: &str = "secret.key";

/// The key in `path`, if the file exists. A file that is not a key is an error, never
/// replaced: it may be the only copy of the key an operator has.
pub fn read(path: &Path) -> Result<Option<SecretKey>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot read the secret key {}: {err}", path.display())),
    };
    warn_if_readable_by_others(path);
    SecretKey::parse(&text).map(Some).map_err(|why| format!("{} is not a roost secret key: {why}", path.display()))
}

/// Generates a key into `path` unless the file already exists; either way returns the key
/// the file holds.
pub fn create(path: &Path) -> Result<SecretKey, String> {
    let fail = |what: &str, err: std::io::Error| format!("cannot {what} the secret key {}: {err}", path.display());
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| fail("create the directory of", e))?;
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| fail("generate", std::io::Error::other(e.to_string())))?;
    let text = format!("{}\n", STANDARD.encode(bytes));
    bytes.fill(0);

    let temp = dir.join(format!(".{KEY_FILE}.{}.tmp", crate::ids::random_base32(12)));
    let written = write_private(&temp, text.as_bytes());
    let linked = written.and_then(|()| std::fs::hard_link(&temp, path));
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => {
            sync_dir(dir);
            info!(path = %path.display(), "generated the secret key; back it up with the store");
            SecretKey::parse(&text).map_err(|why| format!("generated a bad key: {why}"))
        }
        // Another process created it first: use its key.
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            read(path)?.ok_or_else(|| format!("the secret key {} vanished while it was created", path.display()))
        }
        Err(err) => Err(fail("write", err)),
    }
}

/// Writes a new file readable by its owner only, and flushes it to disk.
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Makes the new name durable; a failure only weakens durability, so it is not an error.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Err(err) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        warn!(dir = %dir.display(), error = %err, "could not sync the data directory");
    }
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            warn!(path = %path.display(), mode = format!("{mode:o}"), "the secret key is readable by other users; chmod 600 it");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::secrets::Slot;

    fn same_key(a: &SecretKey, b: &SecretKey) -> bool {
        let slot = Slot::provider_api_key("ins");
        b.open(&a.seal("probe", slot), slot).is_ok()
    }

    #[test]
    fn generates_once_then_reads_the_same_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(KEY_FILE);
        assert!(read(&path).unwrap().is_none());
        let first = create(&path).unwrap();
        let again = create(&path).unwrap();
        assert!(same_key(&first, &again), "an existing key file is never overwritten");
        assert!(same_key(&first, &read(&path).unwrap().unwrap()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary files are left behind");
    }

    #[test]
    fn processes_starting_together_get_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let keys: Vec<SecretKey> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..8).map(|_| scope.spawn(|| create(&path).unwrap())).collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert!(keys.iter().all(|k| same_key(&keys[0], k)));
    }

    #[test]
    fn a_file_that_is_not_a_key_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        std::fs::write(&path, "oops").unwrap();
        assert!(read(&path).unwrap_err().contains("is not a roost secret key"));
        assert!(create(&path).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "oops");
    }
}
