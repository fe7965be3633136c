//! Atomic JSON files in the data directory: the guard, the rollback record and the update
//! state survive a crash at any instant, whole or not at all.

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
};

use serde::{Serialize, de::DeserializeOwned};

/// Reads `path` as JSON; `None` when it does not exist or does not parse (a half-written
/// file cannot exist, so a bad one was edited by hand: it is ignored, not fatal).
pub fn read<T: DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(value) => Some(value),
        Err(err) => {
            tracing::warn!(path = %path.display(), error = %err, "ignoring an unreadable update file");
            None
        }
    }
}

/// Writes `value` to `path` atomically: a temporary file beside it, synced, renamed over
/// it, and the directory synced.
pub fn write<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = temp_path(path);
    {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Ok(dir) = fs::File::open(dir) {
        // Not every platform can sync a directory; the rename is done either way.
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Removes `path`; a missing file is fine.
pub fn remove(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        assert_eq!(read::<Vec<u32>>(&path), None);
        write(&path, &vec![1, 2]).unwrap();
        write(&path, &vec![3]).unwrap();
        assert_eq!(read::<Vec<u32>>(&path), Some(vec![3]));
        std::fs::write(&path, b"{not json").unwrap();
        assert_eq!(read::<Vec<u32>>(&path), None);
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no temporary files left");
    }
}
