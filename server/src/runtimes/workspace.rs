//! Workspaces: each `process` agent's own persistent directory,
//! `<data-dir>/agents/<instance_id>/`, its runtime's `HOME` and working directory (also
//! given as `ROOST_WORKSPACE`).
//!
//! Real runtimes keep their memory, skills and files there, so it outlives everything but
//! the agent: config restarts, pause and resume, suspension, renewals and roost restarts
//! find it as it was; destroy deletes it. It is local to the replica that runs the agent
//! (a takeover by another replica starts from that replica's copy, empty the first time).
//!
//! When roost runs as root, the workspace is the agent's own disk
//! (`<data-dir>/agents/<instance_id>.img`, see [`crate::sandbox::disk`]), mounted at that
//! path inside the agent's sandbox only; the directory on the host stays empty. Otherwise
//! it is a plain directory, created owner-only (0700).
//!
//! Everything in a workspace is the agent's, so roost never walks it recursively or
//! follows a link in it: its size comes from its filesystem's own counts (or, for a plain
//! directory, an iterative walk that stops counting at [`MAX_ENTRIES`]), and deleting it
//! is one `unlink` of its disk, or [`crate::sandbox::tree::remove`].

use std::{
    collections::HashMap,
    io,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use crate::sandbox::{disk, tree};

/// The most directory entries [`Workspaces::size`] walks in a plain directory before it
/// stops counting: a workspace of millions of files is not walked whole on every read of
/// its agent. (A disk's size is exact, whatever it holds.)
const MAX_ENTRIES: usize = 100_000;

/// An agent's workspace, opened to be read.
#[derive(Debug)]
pub enum Opened {
    /// Its root directory (an `O_PATH` descriptor).
    Root(OwnedFd),
    /// It is on the agent's own disk, which is mounted only while the agent runs (inside
    /// its sandbox, never on the host): a stopped agent's files cannot be read until it
    /// runs again. (Mounting it on the host to read it would need a loop device per
    /// read, and an agent resumed meanwhile would mount the same ext4 filesystem twice,
    /// which corrupts it.)
    Unmounted,
    /// It has none (a runtime without one, or one not yet booted).
    Missing,
}

/// Where agents' workspaces live.
#[derive(Debug, Clone)]
pub struct Workspaces {
    root: PathBuf,
    /// Running agents' mounted disks, each as its sandbox sees it: measured there.
    mounted: Arc<Mutex<HashMap<String, (u32, OwnedFd)>>>,
}

impl Workspaces {
    /// Workspaces under `root` (`<data-dir>/agents`).
    pub fn new(root: PathBuf) -> Self {
        Self { root, mounted: Arc::default() }
    }

    /// The agent's workspace path (it may not exist yet).
    pub fn path(&self, instance_id: &str) -> PathBuf {
        self.root.join(instance_id)
    }

    /// The agent's disk image (it exists once the agent booted on a roost that caps disks).
    pub fn image(&self, instance_id: &str) -> PathBuf {
        self.root.join(format!("{instance_id}.img"))
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

    /// Deletes the agent's workspace (its disk, and its directory without following a link
    /// or recursing); a missing one is already gone.
    pub fn remove(&self, instance_id: &str) -> io::Result<()> {
        match std::fs::remove_file(self.image(instance_id)) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
        tree::remove(&self.path(instance_id))
    }

    /// The agents that have a workspace (a directory or a disk) here.
    pub fn listed(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.root) else { return Vec::new() };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let id = name.strip_suffix(".img").unwrap_or(&name);
                (crate::agents::limits::instance_id(id).is_ok()).then(|| id.to_owned())
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Measures the agent's disk, mounted in the sandbox whose first process (outside) is
    /// `pid`, through that process's view, until [`Workspaces::untrack_mounted`].
    pub fn track_mounted(&self, instance_id: &str, pid: u32, workspace: &Path) {
        use rustix::fs::{Mode, OFlags};
        let mut mounted = self.mounted.lock().unwrap_or_else(PoisonError::into_inner);
        // Opened under the lock the reaper's untrack takes after reaping: a sandbox already
        // gone has no /proc entry left to open, so nothing stale is kept.
        let inside = Path::new(&format!("/proc/{pid}/root")).join(workspace.strip_prefix("/").unwrap_or(workspace));
        if let Ok(fd) = rustix::fs::open(&inside, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
            mounted.insert(instance_id.to_owned(), (pid, fd));
        }
    }

    /// Stops measuring a sandbox's disk (its sandbox ended).
    pub fn untrack_mounted(&self, instance_id: &str) {
        self.mounted.lock().unwrap_or_else(PoisonError::into_inner).remove(instance_id);
    }

    /// The root of the agent's workspace, to read its files ([`super::files`]) through:
    /// its mounted disk as its running sandbox sees it, else its plain directory.
    pub fn open(&self, instance_id: &str) -> io::Result<Opened> {
        use rustix::fs::{Mode, OFlags};
        if let Some((_, fd)) = self.mounted.lock().unwrap_or_else(PoisonError::into_inner).get(instance_id) {
            return Ok(Opened::Root(fd.try_clone()?));
        }
        if self.image(instance_id).exists() {
            return Ok(Opened::Unmounted);
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::open(self.path(instance_id), flags, Mode::empty()) {
            Ok(fd) => Ok(Opened::Root(fd)),
            Err(rustix::io::Errno::NOENT) => Ok(Opened::Missing),
            Err(err) => Err(err.into()),
        }
    }

    /// The bytes the agent's files take (0 when it has none): its disk's own count, as
    /// mounted when it runs, else from its image; for a plain directory, the files' sizes,
    /// counting at most [`MAX_ENTRIES`] entries. Symbolic links are never followed.
    pub fn size(&self, instance_id: &str) -> u64 {
        if let Some((_, fd)) = self.mounted.lock().unwrap_or_else(PoisonError::into_inner).get(instance_id)
            && let Ok(bytes) = disk::mounted_used_bytes(fd)
        {
            return bytes;
        }
        let image = self.image(instance_id);
        if image.exists() {
            return disk::used_bytes(&image).unwrap_or(0);
        }
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
