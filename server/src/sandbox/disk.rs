//! Each agent's disk: an ext4 filesystem in a file of its own (`<data-dir>/agents/<id>.img`),
//! `disk_mb` large, mounted as its workspace inside its sandbox only
//! ([`super::enter`]), and each agent's host uid, which owns that filesystem.
//!
//! **Why a filesystem image.** An agent writes whatever its account's messages make the
//! model write, and its workspace sat on the filesystem that holds roost's store: 3 GB
//! went in unasked, and nothing stopped 60. The cap has to hold when roost runs as root
//! (as it does in containers and CI) and must not depend on the host's filesystem: the
//! data directory is usually on ext4 without project quotas (quotas need a mount option
//! and root to set up), and user-id quotas would need one host uid per agent to be
//! counted on the host's filesystem anyway. A filesystem image is the same everywhere:
//! the kernel's ext4 refuses a write past its size with `ENOSPC`, in the agent, and the
//! host's filesystem never grows past the image's size, which is reserved (`fallocate`)
//! when the disk is made, so agents together can never fill the store's filesystem
//! either. It also makes the workspace's size exact and cheap to read (the filesystem's
//! own count, [`used_bytes`]), and a destroyed agent's files go in one `unlink`, however
//! many there are or however deep. Mounting needs root: a roost running unprivileged
//! keeps workspaces as plain directories (see [`super::Host`]).
//!
//! **Uids.** Each disk is made for one host uid from roost's range (`--agent-uids`,
//! `1900000000:100000` by default: above the ranges `useradd` gives as subordinate ids
//! (100000-600100000) and systemd-nspawn picks containers from (up to 1879048191), below
//! systemd's foreign range (2147352576)). The image file is owned by that uid, which is
//! where roost keeps the assignment: the next boot reads it back, a new disk takes the
//! lowest uid no image has, and a destroyed agent's uid is free again once its image is
//! gone. Files on the disk are owned by the agent's uid; its root directory is made
//! theirs by `mkfs`.

use std::{
    collections::HashSet,
    io,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

/// The smallest disk roost makes: ext4's journal and metadata need some room.
pub const MIN_DISK_MB: u64 = 16;

/// A range of host uids roost gives agents (`--agent-uids FIRST:COUNT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    /// The first uid of the range.
    pub first: u32,
    /// How many uids it has.
    pub count: u32,
}

impl Default for UidRange {
    fn default() -> Self {
        Self { first: 1_900_000_000, count: 100_000 }
    }
}

impl std::str::FromStr for UidRange {
    type Err = String;

    /// `FIRST:COUNT`: uids from FIRST, at least 1000 (never a system account's), COUNT of
    /// them, all below 4294967294 (the kernel's "no uid").
    fn from_str(text: &str) -> Result<Self, String> {
        let (first, count) = text.split_once(':').ok_or("expected FIRST:COUNT, e.g. 1900000000:100000")?;
        let first: u32 = first.trim().parse().map_err(|_| format!("{first:?} is not a uid"))?;
        let count: u32 = count.trim().parse().map_err(|_| format!("{count:?} is not a count"))?;
        if first < 1000 {
            return Err("the first uid must be 1000 or more: below are the system's accounts".to_owned());
        }
        if count == 0 || u64::from(first) + u64::from(count) > 4_294_967_294 {
            return Err("the range must hold at least one uid and end below 4294967294".to_owned());
        }
        Ok(Self { first, count })
    }
}

impl std::fmt::Display for UidRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.first, self.count)
    }
}

impl UidRange {
    fn contains(self, uid: u32) -> bool {
        uid >= self.first && u64::from(uid) < u64::from(self.first) + u64::from(self.count)
    }
}

/// The tools a host needs to make disks, found once at start.
#[derive(Debug)]
pub struct DiskTools {
    mkfs: PathBuf,
    resize: Option<PathBuf>,
    debugfs: Option<PathBuf>,
    uids: UidRange,
    /// Held while a uid is chosen and its image made, so two boots never take one uid.
    assigning: Mutex<()>,
}

/// `name` in the usual system directories (roost's own `PATH` may not have `/sbin`).
fn system_tool(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].iter().map(|dir| Path::new(dir).join(name)).find(|p| p.is_file())
}

impl DiskTools {
    /// What making disks needs here; the error says what to install or set.
    pub fn probe(uids: UidRange) -> Result<Self, String> {
        let mkfs = system_tool("mkfs.ext4").ok_or(
            "capping agents' disks needs mkfs.ext4: install e2fsprogs (Debian and Ubuntu: apt-get install e2fsprogs)",
        )?;
        if !Path::new("/dev/loop-control").exists() {
            return Err("capping agents' disks needs loop devices, and /dev/loop-control is missing (load the `loop` \
                        module: modprobe loop; in a container, give it /dev/loop-control and the loop devices)"
                .to_owned());
        }
        let taken = users_in(uids);
        if let Some((name, uid)) = taken.first() {
            return Err(format!(
                "the agents' uid range {uids} holds the host account {name} (uid {uid}): choose another with --agent-uids"
            ));
        }
        Ok(Self {
            mkfs,
            resize: system_tool("resize2fs"),
            debugfs: system_tool("debugfs"),
            uids,
            assigning: Mutex::new(()),
        })
    }

    /// The range agents' uids come from.
    pub fn uids(&self) -> UidRange {
        self.uids
    }

    /// The agent's disk at `image`, made (`disk_mb` large, for the lowest free uid) when
    /// missing and grown when `disk_mb` is larger than it is; the uid that owns it.
    pub fn ensure(&self, image: &Path, disk_mb: u64) -> Result<u32, String> {
        let _assigning = self.assigning.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let bytes = disk_mb.max(MIN_DISK_MB).saturating_mul(1024 * 1024);
        match std::fs::symlink_metadata(image) {
            Ok(meta) if meta.file_type().is_file() => {
                if meta.len() < bytes {
                    wait_unused(image).map_err(|e| format!("cannot grow the agent's disk: {e}"))?;
                    self.grow(image, bytes)
                        .map_err(|e| format!("cannot grow the agent's disk to {disk_mb} MiB: {e}"))?;
                }
                Ok(meta.uid())
            }
            Ok(_) => Err(format!("{} is not a disk image", image.display())),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let dir = image.parent().unwrap_or(Path::new("."));
                let uid = self.free_uid(dir)?;
                let earlier = earlier_workspace(image);
                if let Some(earlier) = &earlier {
                    match self.make(image, bytes, uid, Some(earlier)) {
                        Ok(()) => {
                            // Its files are on the disk now: the directory becomes the
                            // empty mount point it is for disks.
                            if let Err(err) = super::tree::remove(earlier).and_then(|()| make_private_dir(earlier)) {
                                tracing::warn!(dir = %earlier.display(), error = %err,
                                    "the workspace's files moved to its disk, but its old directory could not be emptied");
                            }
                            return Ok(uid);
                        }
                        Err(err) => tracing::warn!(dir = %earlier.display(), error = %err,
                            "the agent's workspace from before could not be moved onto its new disk (it stays where \
                             it is, on the host); the agent starts with an empty disk"),
                    }
                }
                self.make(image, bytes, uid, None)
                    .map_err(|e| format!("cannot make the agent's disk ({disk_mb} MiB): {e}"))?;
                Ok(uid)
            }
            Err(err) => Err(format!("cannot read {}: {err}", image.display())),
        }
    }

    /// The lowest uid of the range that no image in `dir` is owned by.
    fn free_uid(&self, dir: &Path) -> Result<u32, String> {
        let taken: HashSet<u32> = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".img"))
            .filter_map(|entry| entry.metadata().ok().map(|m| m.uid()))
            .collect();
        (0..self.uids.count)
            .map(|i| self.uids.first + i)
            .find(|uid| !taken.contains(uid))
            .ok_or_else(|| format!("every uid of --agent-uids {} has an agent: widen the range", self.uids))
    }

    /// Makes an image of `bytes` for `uid`: reserved on the host (`fallocate`), an ext4
    /// filesystem on it whose root directory `uid` owns, no blocks reserved for root (the
    /// agent is never root), written under a temporary name and renamed once complete.
    /// With `files`, the filesystem starts with that directory's tree, given to `uid` first.
    fn make(&self, image: &Path, bytes: u64, uid: u32, files: Option<&Path>) -> io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let temporary = image.with_extension("img.new");
        let _ = std::fs::remove_file(&temporary);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temporary)?;
        let made = (|| {
            rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, bytes).map_err(|e| {
                if e == rustix::io::Errno::NOSPC {
                    io::Error::other("the host's disk has no room for it")
                } else {
                    e.into()
                }
            })?;
            let mut mkfs = Command::new(&self.mkfs);
            mkfs.args(["-q", "-F", "-m", "0", "-b", "4096", "-L", "roost-agent", "-E"])
                .arg(format!("root_owner={uid}:{uid},lazy_itable_init=1,lazy_journal_init=1,nodiscard"));
            if let Some(files) = files {
                super::tree::give(files, uid, uid)?;
                mkfs.arg("-d").arg(files);
            }
            run(mkfs.arg(&temporary))?;
            rustix::fs::fchown(
                &file,
                Some(rustix::process::Uid::from_raw(uid)),
                Some(rustix::process::Gid::from_raw(uid)),
            )?;
            file.sync_all()?;
            std::fs::rename(&temporary, image)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        made
    }

    /// Grows an image (its agent is stopped) to `bytes`: more room reserved, the
    /// filesystem resized, and its overhead recorded again so [`used_bytes`] stays exact.
    fn grow(&self, image: &Path, bytes: u64) -> io::Result<()> {
        let (Some(resize), Some(debugfs)) = (&self.resize, &self.debugfs) else {
            return Err(io::Error::other("growing needs resize2fs and debugfs (e2fsprogs)"));
        };
        let before = Superblock::read(image)?;
        let file = std::fs::OpenOptions::new().write(true).open(image)?;
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, bytes)?;
        run(Command::new(resize).arg("-f").arg(image))?;
        let after = Superblock::read(image)?;
        let used_blocks = before.used_blocks();
        let overhead = after.blocks.saturating_sub(after.free).saturating_sub(used_blocks);
        run(Command::new(debugfs).arg("-w").arg("-R").arg(format!("ssv overhead_clusters {overhead}")).arg(image))
    }
}

/// The agent's workspace as a roost that did not cap disks kept it: the plain directory
/// beside the image (`<data-dir>/agents/<id>/`), when it holds anything. A new disk starts
/// with its files (`mkfs.ext4 -d`), so an agent keeps its memory across the upgrade.
fn earlier_workspace(image: &Path) -> Option<PathBuf> {
    let dir = image.with_extension("");
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    let holds_files = meta.is_dir() && std::fs::read_dir(&dir).ok()?.next().is_some();
    holds_files.then_some(dir)
}

/// An owner-only directory at `path`, as workspaces are made.
fn make_private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

/// How long a boot waits for its agent's previous boot to let go of the disk.
const IN_USE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits until no loop device is backed by `image`. A sandbox's mount (and the loop device
/// under it) goes when its last process does, a moment after the process roost waited
/// for: mounting the image again before that would put two filesystems on one disk.
pub fn wait_unused(image: &Path) -> io::Result<()> {
    let image = image.canonicalize()?;
    let deadline = std::time::Instant::now() + IN_USE_WAIT;
    while backs_a_loop_device(&image) {
        if std::time::Instant::now() >= deadline {
            return Err(io::Error::other("the agent's disk is still in use by its previous boot"));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

/// Whether a loop device is attached to `image` (`/sys/block/loop*/loop/backing_file`).
fn backs_a_loop_device(image: &Path) -> bool {
    let Ok(devices) = std::fs::read_dir("/sys/block") else { return false };
    devices.flatten().any(|device| {
        std::fs::read_to_string(device.path().join("loop/backing_file"))
            .is_ok_and(|backing| Path::new(backing.trim_end_matches('\n').trim_end_matches(" (deleted)")) == image)
    })
}

/// Runs a tool, its error output in the error.
fn run(command: &mut Command) -> io::Result<()> {
    let out = command.env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").output()?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    Err(io::Error::other(format!("{:?} failed ({}): {}", command.get_program(), out.status, said.trim())))
}

/// Host accounts (name, uid) whose uid is in `range`.
fn users_in(range: UidRange) -> Vec<(String, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let uid: u32 = fields.nth(1)?.parse().ok()?;
            range.contains(uid).then(|| (name.to_owned(), uid))
        })
        .collect()
}

/// What [`used_bytes`] reads from an unmounted image's superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Superblock {
    blocks: u64,
    free: u64,
    overhead: u64,
    block_size: u64,
}

impl Superblock {
    /// The ext4 superblock (1024 bytes at offset 1024).
    fn read(image: &Path) -> io::Result<Self> {
        use std::os::unix::fs::FileExt as _;
        let file = std::fs::File::open(image)?;
        let mut sb = [0u8; 1024];
        file.read_exact_at(&mut sb, 1024)?;
        let u32_at =
            |offset: usize| u64::from(u32::from_le_bytes([sb[offset], sb[offset + 1], sb[offset + 2], sb[offset + 3]]));
        if u16::from_le_bytes([sb[0x38], sb[0x39]]) != 0xEF53 {
            return Err(io::Error::other(format!("{} holds no ext4 filesystem", image.display())));
        }
        let wide = u32_at(0x60) & 0x80 != 0;
        let high = |offset: usize| if wide { u32_at(offset) << 32 } else { 0 };
        let log = u32_at(0x18);
        if log > 6 {
            return Err(io::Error::other("an ext4 block size roost does not make"));
        }
        Ok(Self {
            blocks: u32_at(0x04) | high(0x150),
            free: u32_at(0x0C) | high(0x158),
            overhead: u32_at(0x248),
            block_size: 1024 << log,
        })
    }

    /// Blocks holding the agent's files (and directories): all but the free ones and the
    /// filesystem's own metadata.
    fn used_blocks(self) -> u64 {
        self.blocks.saturating_sub(self.free).saturating_sub(self.overhead)
    }
}

/// The bytes the files on a stopped agent's disk take (blocks, as the filesystem counts
/// them against its size), read from the image's superblock; the count a mounted
/// filesystem gives ([`mounted_used_bytes`]) is the same figure.
pub fn used_bytes(image: &Path) -> io::Result<u64> {
    let sb = Superblock::read(image)?;
    Ok(sb.used_blocks().saturating_mul(sb.block_size))
}

/// The bytes the files on a mounted disk take, from the filesystem's own counts
/// (`statfs`): exact, and as cheap for a million files as for one.
pub fn mounted_used_bytes(dir: &impl std::os::fd::AsFd) -> io::Result<u64> {
    let stat = rustix::fs::fstatfs(dir)?;
    let (blocks, free) = (stat.f_blocks, stat.f_bfree);
    let size = u64::try_from(stat.f_bsize).unwrap_or(0);
    Ok(blocks.saturating_sub(free).saturating_mul(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_ranges_parse_and_refuse_system_and_invalid_uids() {
        assert_eq!("1900000000:100000".parse::<UidRange>(), Ok(UidRange::default()));
        assert_eq!("5000:10".parse::<UidRange>().map(|r| (r.first, r.count)), Ok((5000, 10)));
        for bad in ["0:10", "999:1", "5000", "5000:0", "4294967290:10", "x:1"] {
            assert!(bad.parse::<UidRange>().is_err(), "{bad}");
        }
        let range: UidRange = "5000:10".parse().unwrap();
        assert!(range.contains(5000) && range.contains(5009) && !range.contains(5010) && !range.contains(4999));
    }

    /// Needs root and e2fsprogs (as the agent tests do); skipped elsewhere.
    #[test]
    fn a_disk_is_made_for_the_lowest_free_uid_measured_and_grown() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: making disks needs root");
            return;
        }
        let tools = match DiskTools::probe("1900000000:3".parse().unwrap()) {
            Ok(tools) => tools,
            Err(why) => return eprintln!("skipped: {why}"),
        };
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("ins_a.img");
        assert_eq!(tools.ensure(&a, 32), Ok(1_900_000_000));
        assert_eq!(std::fs::metadata(&a).unwrap().len(), 32 * 1024 * 1024);
        assert_eq!(tools.ensure(&a, 32), Ok(1_900_000_000), "kept");
        let b = dir.path().join("ins_b.img");
        assert_eq!(tools.ensure(&b, 16), Ok(1_900_000_001));
        let empty = used_bytes(&a).unwrap();
        assert!(empty < 64 * 1024, "an empty disk uses next to nothing: {empty}");
        // Grown: bigger, and still measured exactly.
        assert_eq!(tools.ensure(&a, 64), Ok(1_900_000_000));
        assert_eq!(std::fs::metadata(&a).unwrap().len(), 64 * 1024 * 1024);
        assert_eq!(used_bytes(&a).unwrap(), empty);
        std::fs::remove_file(&a).unwrap();
        assert_eq!(tools.ensure(&dir.path().join("ins_c.img"), 16), Ok(1_900_000_000), "a freed uid is taken again");
        assert_eq!(tools.ensure(&dir.path().join("ins_d.img"), 16), Ok(1_900_000_002));
        assert!(tools.ensure(&dir.path().join("ins_e.img"), 16).unwrap_err().contains("widen the range"));
    }

    /// An agent from before disks were capped keeps its files: they move onto its new
    /// disk, given to its uid, counted exactly, and its old directory is left empty.
    #[test]
    fn a_workspace_from_before_moves_onto_its_new_disk() {
        if !rustix::process::geteuid().is_root() {
            return eprintln!("skipped: making disks needs root");
        }
        let tools = match DiskTools::probe("1900000000:3".parse().unwrap()) {
            Ok(tools) => tools,
            Err(why) => return eprintln!("skipped: {why}"),
        };
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ins_old");
        std::fs::create_dir_all(workspace.join("memory")).unwrap();
        std::fs::write(workspace.join("memory/notes.md"), vec![b'x'; 100_000]).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", workspace.join("link")).unwrap();
        let image = dir.path().join("ins_old.img");
        assert_eq!(tools.ensure(&image, 16), Ok(1_900_000_000));
        assert_eq!(std::fs::read_dir(&workspace).unwrap().count(), 0, "the old directory is emptied");
        let listing = Command::new(tools.debugfs.as_ref().unwrap())
            .args(["-R", "stat /memory/notes.md"])
            .arg(&image)
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&listing.stdout);
        assert!(listing.contains("User: 1900000000") && listing.contains("Size: 100000"), "{listing}");
        // What an empty disk uses (its root and lost+found), and the file's 25 blocks and
        // its directory's one.
        let empty = dir.path().join("ins_empty.img");
        tools.ensure(&empty, 16).unwrap();
        assert_eq!(used_bytes(&image).unwrap(), used_bytes(&empty).unwrap() + (25 + 1) * 4096);
    }
}
