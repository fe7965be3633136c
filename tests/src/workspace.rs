//! A hosted agent's workspace as a test sees it from the host.
//!
//! When roost runs as root, an agent's workspace is its own disk, mounted in its sandbox
//! only: the directory `<data-dir>/agents/<id>` stays empty on the host. A running agent's
//! files are read through one of its processes' view (`/proc/<pid>/root`, as root may); a
//! stopped agent's from its disk image with `debugfs` (e2fsprogs), which reads an
//! unmounted ext4 image without mounting it. A plain-directory workspace (roost not root)
//! is read where it is.

use std::{
    io,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

/// An agent's workspace under `data_dir`.
#[derive(Debug, Clone)]
pub struct Workspace {
    dir: PathBuf,
    image: PathBuf,
    instance_id: String,
}

/// What a file's inode says: its host owner and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// Its uid on the host.
    pub uid: u32,
    /// Its mode bits (type included).
    pub mode: u32,
}

impl Workspace {
    /// Agent `instance_id`'s workspace in roost's `data_dir`.
    pub fn of(data_dir: &Path, instance_id: &str) -> Self {
        let agents = data_dir.join("agents");
        Self {
            dir: agents.join(instance_id),
            image: agents.join(format!("{instance_id}.img")),
            instance_id: instance_id.to_owned(),
        }
    }

    /// The disk image, when the agent has one.
    pub fn image(&self) -> Option<&Path> {
        self.image.exists().then_some(self.image.as_path())
    }

    /// The workspace as a running agent's process sees it, from the host.
    fn live(&self) -> Option<PathBuf> {
        let pid = crate::process::runtime_pids(&self.instance_id).into_iter().last()?;
        let inside = self.dir.strip_prefix("/").unwrap_or(&self.dir);
        Some(Path::new(&format!("/proc/{pid}/root")).join(inside))
    }

    /// The text of the file at `relative`.
    pub fn read(&self, relative: &str) -> io::Result<String> {
        if let Some(live) = self.live() {
            return std::fs::read_to_string(live.join(relative));
        }
        match self.image() {
            Some(image) => debugfs(image, &format!("cat /{relative}")).and_then(|out| {
                if out.is_empty() && !self.exists(relative) {
                    Err(io::Error::new(io::ErrorKind::NotFound, relative.to_owned()))
                } else {
                    Ok(out)
                }
            }),
            None => std::fs::read_to_string(self.dir.join(relative)),
        }
    }

    /// Whether a file (or directory, or link) is at `relative`.
    pub fn exists(&self, relative: &str) -> bool {
        self.owner(relative).is_ok()
    }

    /// The host owner and mode of what is at `relative` (a link's own, not followed).
    pub fn owner(&self, relative: &str) -> io::Result<Owner> {
        if let Some(live) = self.live() {
            let meta = std::fs::symlink_metadata(live.join(relative))?;
            return Ok(Owner { uid: meta.uid(), mode: meta.mode() });
        }
        match self.image() {
            Some(image) => {
                let out = debugfs(image, &format!("stat /{relative}"))?;
                let field = |name: &str| -> Option<String> {
                    let at = out.find(name)? + name.len();
                    out[at..].split_whitespace().next().map(str::to_owned)
                };
                let uid = field("User:").and_then(|u| u.parse().ok());
                let mode = field("Mode:").and_then(|m| u32::from_str_radix(m.trim_start_matches('0'), 8).ok());
                match (uid, mode) {
                    (Some(uid), Some(mode)) => Ok(Owner { uid, mode }),
                    _ => Err(io::Error::new(io::ErrorKind::NotFound, relative.to_owned())),
                }
            }
            None => {
                let meta = std::fs::symlink_metadata(self.dir.join(relative))?;
                Ok(Owner { uid: meta.uid(), mode: meta.mode() })
            }
        }
    }
}

/// Runs one `debugfs` request on an unmounted image; what it printed.
fn debugfs(image: &Path, request: &str) -> io::Result<String> {
    let out = std::process::Command::new("debugfs").arg("-R").arg(request).arg(image).output()?;
    if !out.status.success() {
        return Err(io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
