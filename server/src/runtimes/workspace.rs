//! Workspaces: each `process` agent's own persistent directory,
//! `<data-dir>/agents/<instance_id>/`, its runtime's `HOME` and working directory (also
//! given as `ROOST_WORKSPACE`).
//!
//! Real runtimes keep their memory, skills and files there, so it outlives everything but
//! the agent: config restarts, pause and resume, suspension, renewals and roost restarts
//! find it as it was; destroy deletes it. It is local to the replica that runs the agent
//! (a takeover by another replica starts from that replica's copy, empty the first time).
//! The directory is created owner-only (0700).

use std::{
    io,
    path::{Path, PathBuf},
};

/// The most directory entries [`Workspaces::size`] walks before it stops counting: a
/// workspace of millions of files is not walked whole on every read of its agent.
const MAX_ENTRIES: usize = 100_000;

/// Where agents' workspaces live.
#[derive(Debug, Clone)]
pub struct Workspaces {
    root: PathBuf,
}

impl Workspaces {
    /// Workspaces under `root` (`<data-dir>/agents`).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The agent's workspace path (it may not exist yet).
    pub fn path(&self, instance_id: &str) -> PathBuf {
        self.root.join(instance_id)
    }

    /// The agent's workspace, created (owner-only) when missing.
    pub fn ensure(&self, instance_id: &str) -> io::Result<PathBuf> {
        let path = self.path(instance_id);
        std::fs::create_dir_all(&path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&self.root, std::fs::Permissions::from_mode(0o700))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(path)
    }

    /// Deletes the agent's workspace; a missing one is already gone.
    pub fn remove(&self, instance_id: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(self.path(instance_id)) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// The bytes of the files in the agent's workspace (0 when it has none), counting at
    /// most [`MAX_ENTRIES`] entries; symbolic links are not followed.
    pub fn size(&self, instance_id: &str) -> u64 {
        let mut total = 0;
        let mut entries = 0;
        let mut pending = vec![self.path(instance_id)];
        while let Some(dir) = pending.pop() {
            let Ok(listing) = std::fs::read_dir(&dir) else { continue };
            for entry in listing.flatten() {
                entries += 1;
                if entries > MAX_ENTRIES {
                    return total;
                }
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_dir() {
                    pending.push(entry.path());
                } else if meta.is_file() {
                    total += meta.len();
                }
            }
        }
        total
    }

    /// The root, for tests and the README's layout.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_is_made_measured_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let workspaces = Workspaces::new(dir.path().join("agents"));
        assert_eq!(workspaces.size("ins_a"), 0, "none yet");
        let path = workspaces.ensure("ins_a").unwrap();
        std::fs::create_dir(path.join("memory")).unwrap();
        std::fs::write(path.join("memory/notes.md"), b"twelve bytes").unwrap();
        std::fs::write(path.join("SOUL.md"), b"four").unwrap();
        assert_eq!(workspaces.size("ins_a"), 16);
        assert_eq!(workspaces.ensure("ins_a").unwrap(), path, "kept as it was");
        assert_eq!(workspaces.size("ins_a"), 16);
        workspaces.remove("ins_a").unwrap();
        assert!(!path.exists());
        workspaces.remove("ins_a").unwrap();
    }
}
