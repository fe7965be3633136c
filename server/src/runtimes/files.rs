//! Reading an agent's workspace for its owner: one folder's listing, one file's bytes.
//!
//! Everything in a workspace is the agent's, and the agent runs whatever its account's
//! messages make the model do, so every name in it is the attacker's: a link to
//! `/etc/shadow` or to another agent's workspace, a `..`, a FIFO that blocks whoever opens
//! it, a folder of millions of entries, a file of gigabytes. When roost runs as root it
//! reads with root's rights, so "the path looked fine" is not enough. The rules:
//!
//! - **The request's path is checked first** ([`clean`]): relative, `/`-separated, no
//!   `..`, at most [`MAX_PATH_BYTES`]; an absolute path or a `..` is refused as such, not
//!   quietly rebased.
//! - **The kernel resolves it beneath the workspace** (`openat2` with `RESOLVE_BENEATH`,
//!   `RESOLVE_NO_SYMLINKS`, `RESOLVE_NO_MAGICLINKS` and `RESOLVE_NO_XDEV`, from a descriptor
//!   of the workspace's root): whatever the agent renames or swaps in while roost reads, a
//!   step out of the workspace, through any link, or onto another mount fails. A link is
//!   listed as a link and never read.
//! - **Only regular files are read**: the name is opened `O_PATH` (which opens nothing:
//!   no FIFO waits, no device acts), checked with `fstat`, and only then reopened through
//!   that same descriptor for reading, `O_NONBLOCK`, so what is read is the very inode
//!   that was checked; at most [`MAX_FILE_BYTES`] of it are read, however large it claims
//!   or grows to be.
//! - **A listing is bounded**: at most [`MAX_ENTRIES`] entries of one folder, each looked
//!   at with `statat(AT_SYMLINK_NOFOLLOW)`; nothing is walked recursively.
//!
//! Names that are not UTF-8 are shown with replacement characters and cannot be read by
//! name (nothing an agent's runtime writes on purpose is named so).

use std::{
    io::{self, Read as _},
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags, Stat, fstat, openat2, statat};

/// The largest file read: a workspace's memory and notes are far smaller, and a file is
/// answered whole (REST, gRPC and MCP alike), so this bounds each answer's memory.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// The most entries one listing holds.
pub const MAX_ENTRIES: usize = 1000;
/// The longest path taken.
pub const MAX_PATH_BYTES: usize = 1024;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Folder,
    /// A symbolic link (never followed).
    Link,
    /// A FIFO, socket or device (never read).
    Other,
}

/// One entry of a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the workspace.
    pub path: String,
    /// The last part of `path`.
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written.
    pub modified: SystemTime,
}

/// One folder's entries.
#[derive(Debug, Default)]
pub struct Listing {
    /// The folder, as cleaned.
    pub path: String,
    /// Folders first, then by name.
    pub entries: Vec<Entry>,
    /// More than [`MAX_ENTRIES`] were there.
    pub truncated: bool,
}

/// Why a path was not listed or read: each maps to its row of the error table.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The path itself is refused (absolute, `..`, too long).
    #[error("{0}")]
    BadPath(String),
    /// Nothing is there.
    #[error("no file or folder {0:?} in the agent's workspace")]
    NotFound(String),
    /// The path passes through or names a symbolic link.
    #[error("{0:?} is or passes through a symbolic link, which roost does not follow in a workspace")]
    Link(String),
    /// A folder where a file was asked for, or the reverse, or something that is neither.
    #[error("{0}")]
    WrongKind(String),
    /// The file is over [`MAX_FILE_BYTES`].
    #[error("{path:?} is {size} bytes; roost answers files of at most {MAX_FILE_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size (at least what was read).
        size: u64,
    },
    /// The agent made it unreadable to roost.
    #[error("{0:?} cannot be read: its permissions refuse it")]
    Unreadable(String),
    /// Anything else the system refused.
    #[error("reading {path:?}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The system's error.
        source: io::Error,
    },
}

/// `path` as the workspace-relative path it names: `""` for the workspace itself, parts
/// joined by single slashes, `.` and empty parts dropped. Absolute paths, `..` and paths
/// over [`MAX_PATH_BYTES`] are refused.
pub fn clean(path: &str) -> Result<String, FilesError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(FilesError::BadPath(format!("a path is at most {MAX_PATH_BYTES} bytes")));
    }
    if path.starts_with('/') {
        return Err(FilesError::BadPath(format!("{path:?} is absolute; paths are relative to the agent's workspace")));
    }
    if path.contains('\0') {
        return Err(FilesError::BadPath("a path cannot hold a NUL character".to_owned()));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(FilesError::BadPath(format!(
                    "{path:?} has a `..`; paths stay inside the agent's workspace"
                )));
            }
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// Lists the folder `path` of the workspace whose root is `root`.
pub fn list(root: BorrowedFd<'_>, path: &str) -> Result<Listing, FilesError> {
    let path = clean(path)?;
    let folder = resolve(root, &path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK).map_err(|err| {
        match err {
            // Not a folder: a file, or (O_DIRECTORY answers a trailing link so too) a link.
            FilesError::Io { source, .. }
                if source.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
            {
                match entry(root, &path) {
                    Some(found) if found.kind == Kind::Link => FilesError::Link(path.clone()),
                    _ => FilesError::WrongKind(format!("{path:?} is not a folder; read it as a file")),
                }
            }
            other => other,
        }
    })?;
    let mut listing = Listing { path: path.clone(), ..Listing::default() };
    let dir = Dir::read_from(&folder).map_err(|err| io_error(&path, err))?;
    for entry in dir {
        let entry = entry.map_err(|err| io_error(&path, err))?;
        let name = entry.file_name();
        // ext4's own lost+found at the top of an agent's disk is the filesystem's, not
        // the agent's.
        if name == c"." || name == c".." || (path.is_empty() && name == c"lost+found") {
            continue;
        }
        if listing.entries.len() == MAX_ENTRIES {
            listing.truncated = true;
            break;
        }
        // Gone since it was read (the agent is still writing): not listed.
        let Ok(stat) = statat(&folder, name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
        let name = name.to_string_lossy().into_owned();
        let entry_path = if path.is_empty() { name.clone() } else { format!("{path}/{name}") };
        listing.entries.push(entry_of(entry_path, name, &stat));
    }
    listing.entries.sort_by(|a, b| (a.kind != Kind::Folder, &a.name).cmp(&(b.kind != Kind::Folder, &b.name)));
    Ok(listing)
}

/// What the entry at `path` is, without following a link, or `None` when nothing (or
/// nothing reachable by these rules) is there.
pub fn entry(root: BorrowedFd<'_>, path: &str) -> Option<Entry> {
    let path = clean(path).ok().filter(|p| !p.is_empty())?;
    let handle = resolve(root, &path, OFlags::PATH).ok()?;
    let stat = fstat(&handle).ok()?;
    let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
    Some(entry_of(path, name, &stat))
}

/// Reads the regular file at `path`: its entry and its bytes.
pub fn read(root: BorrowedFd<'_>, path: &str) -> Result<(Entry, Vec<u8>), FilesError> {
    let path = clean(path)?;
    if path.is_empty() {
        return Err(FilesError::WrongKind("the workspace itself is a folder; list it".to_owned()));
    }
    // O_PATH opens nothing: a FIFO does not wait for a writer, a device does not act.
    let handle = resolve(root, &path, OFlags::PATH)?;
    let stat = fstat(&handle).map_err(|err| io_error(&path, err))?;
    let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
    let found = entry_of(path.clone(), name, &stat);
    match found.kind {
        Kind::File => {}
        Kind::Folder => return Err(FilesError::WrongKind(format!("{path:?} is a folder; list it"))),
        Kind::Link => return Err(FilesError::Link(path)),
        Kind::Other => {
            return Err(FilesError::WrongKind(format!("{path:?} is not a regular file (a FIFO, socket or device)")));
        }
    }
    if found.size > MAX_FILE_BYTES {
        return Err(FilesError::TooLarge { path, size: found.size });
    }
    // The inode just checked, opened for reading through its own descriptor: nothing
    // swapped in at that name since is what gets read.
    let reopened = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let file = rustix::fs::open(
        reopened.as_str(),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| match err {
        rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => FilesError::Unreadable(path.clone()),
        other => io_error(&path, other),
    })?;
    let mut content = Vec::with_capacity(found.size as usize);
    std::fs::File::from(file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut content)
        .map_err(|source| FilesError::Io { path: path.clone(), source })?;
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(FilesError::TooLarge { path, size: content.len() as u64 });
    }
    Ok((found, content))
}

/// Opens `path` (cleaned; `""` is the root itself) beneath `root` with `flags`, never
/// through a link or out of the workspace's filesystem.
fn resolve(root: BorrowedFd<'_>, path: &str, flags: OFlags) -> Result<OwnedFd, FilesError> {
    let target = if path.is_empty() { "." } else { path };
    let resolve =
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV;
    // RESOLVE_BENEATH answers EAGAIN when a rename anywhere raced the lookup (an agent
    // renaming its files while roost reads is expected): the kernel asks for a retry.
    let open = || openat2(root.as_fd(), target, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty(), resolve);
    let mut opened = open();
    for _ in 0..16 {
        if !matches!(opened, Err(rustix::io::Errno::AGAIN)) {
            break;
        }
        opened = open();
    }
    opened.map_err(|err| {
        match err {
            rustix::io::Errno::NOENT => FilesError::NotFound(path.to_owned()),
            rustix::io::Errno::LOOP => FilesError::Link(path.to_owned()),
            // A part of the path is a file, not a folder.
            rustix::io::Errno::NOTDIR if !flags.contains(OFlags::DIRECTORY) => FilesError::NotFound(path.to_owned()),
            rustix::io::Errno::XDEV => FilesError::BadPath(format!("{path:?} leads out of the agent's workspace")),
            rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => FilesError::Unreadable(path.to_owned()),
            other => io_error(path, other),
        }
    })
}

fn io_error(path: &str, err: rustix::io::Errno) -> FilesError {
    FilesError::Io { path: path.to_owned(), source: err.into() }
}

fn entry_of(path: String, name: String, stat: &Stat) -> Entry {
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Folder,
        FileType::Symlink => Kind::Link,
        _ => Kind::Other,
    };
    let modified = u64::try_from(stat.st_mtime)
        .ok()
        .map(|secs| UNIX_EPOCH + Duration::new(secs, u32::try_from(stat.st_mtime_nsec).unwrap_or(0)))
        .unwrap_or(UNIX_EPOCH);
    Entry { path, name, kind, size: u64::try_from(stat.st_size).unwrap_or(0), modified }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn workspace() -> (tempfile::TempDir, OwnedFd) {
        let dir = tempfile::tempdir().unwrap();
        let root =
            rustix::fs::open(dir.path(), OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        (dir, root)
    }

    #[test]
    fn paths_are_cleaned_or_refused() {
        assert_eq!(clean("").unwrap(), "");
        assert_eq!(clean("./a//b/./c.md").unwrap(), "a/b/c.md");
        for bad in ["/etc/passwd", "../x", "a/../../b", "a/..", &"a".repeat(MAX_PATH_BYTES + 1)] {
            assert!(matches!(clean(bad), Err(FilesError::BadPath(_))), "{bad}");
        }
    }

    #[test]
    fn a_folder_lists_folders_first_and_links_as_links() {
        let (dir, root) = workspace();
        std::fs::write(dir.path().join("b.md"), b"bee").unwrap();
        std::fs::create_dir(dir.path().join("z")).unwrap();
        std::fs::write(dir.path().join("z/inner"), b"1").unwrap();
        symlink("/etc/passwd", dir.path().join("a-link")).unwrap();
        let listing = list(root.as_fd(), "").unwrap();
        let names: Vec<(&str, Kind)> = listing.entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(names, [("z", Kind::Folder), ("a-link", Kind::Link), ("b.md", Kind::File)]);
        assert_eq!(listing.entries[2].size, 3);
        assert_eq!(list(root.as_fd(), "z").unwrap().entries[0].path, "z/inner");
        assert!(matches!(list(root.as_fd(), "b.md"), Err(FilesError::WrongKind(_))));
        assert!(matches!(list(root.as_fd(), "nope"), Err(FilesError::NotFound(_))));
    }

    #[test]
    fn only_regular_files_beneath_the_root_are_read() {
        let (dir, root) = workspace();
        std::fs::write(dir.path().join("SOUL.md"), b"# soul").unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
        symlink("/etc", dir.path().join("etc")).unwrap();
        symlink("..", dir.path().join("up")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("fifo").as_path(),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let (entry, bytes) = read(root.as_fd(), "SOUL.md").unwrap();
        assert_eq!((entry.kind, bytes.as_slice()), (Kind::File, &b"# soul"[..]));
        assert!(matches!(read(root.as_fd(), "passwd"), Err(FilesError::Link(_))));
        assert!(matches!(read(root.as_fd(), "etc/passwd"), Err(FilesError::Link(_))));
        assert!(matches!(read(root.as_fd(), "up/SOUL.md"), Err(FilesError::Link(_))));
        assert!(matches!(list(root.as_fd(), "etc"), Err(FilesError::Link(_))));
        // A FIFO would block a reader with no writer: it is refused without being opened.
        assert!(matches!(read(root.as_fd(), "fifo"), Err(FilesError::WrongKind(_))));
        assert!(matches!(read(root.as_fd(), "d"), Err(FilesError::WrongKind(_))));
        assert!(matches!(read(root.as_fd(), ""), Err(FilesError::WrongKind(_))));
        assert!(matches!(read(root.as_fd(), "SOUL.md/x"), Err(FilesError::NotFound(_))));
    }

    #[test]
    fn big_files_and_big_folders_are_bounded() {
        let (dir, root) = workspace();
        let big = std::fs::File::create(dir.path().join("big")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert!(
            matches!(read(root.as_fd(), "big"), Err(FilesError::TooLarge { size, .. }) if size == MAX_FILE_BYTES + 1)
        );
        std::fs::create_dir(dir.path().join("many")).unwrap();
        for i in 0..=MAX_ENTRIES {
            std::fs::write(dir.path().join(format!("many/{i}")), b"").unwrap();
        }
        let listing = list(root.as_fd(), "many").unwrap();
        assert_eq!(listing.entries.len(), MAX_ENTRIES);
        assert!(listing.truncated);
    }
}
