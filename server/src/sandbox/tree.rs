//! Deleting directory trees an agent shaped.
//!
//! Everything an agent can write is the attacker's, and a tree is the easiest thing to
//! shape: 100,000 nested directories overflow any recursive walk (`std::fs::remove_dir_all`
//! recurses, and 10,000-20,000 levels overflow a 2 MiB thread stack, aborting roost), a
//! path through them is longer than `PATH_MAX`, and a symbolic link swapped in for a
//! directory leads a careless walk out of the tree. [`remove`] is the one way roost deletes
//! such a tree:
//!
//! - **no recursion**: it holds one directory open at a time and keeps only the identity
//!   (device and inode) of each ancestor, so depth costs 16 bytes a level, never stack or
//!   descriptors;
//! - **no paths**: every step is relative to the open directory (`openat`, `unlinkat`), so
//!   no path ever grows with the depth;
//! - **no links followed**: directories are opened with `O_NOFOLLOW | O_DIRECTORY`; a
//!   symbolic link is removed as a link, whatever it points at;
//! - **no wandering**: climbing back up uses `..`, and each parent reached must be the
//!   directory it came down from (same device and inode); if something moved the tree
//!   meanwhile, it stops with an error instead of deleting elsewhere.
//!
//! It is meant for trees nobody writes to any more (the agent's processes are gone); a
//! tree still being written may need a second call, which a later sweep makes.

use std::{
    ffi::{CStr, CString},
    io,
    os::{fd::OwnedFd, unix::ffi::OsStrExt as _},
    path::Path,
};

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, fstat, openat, unlinkat};

/// How many names of one directory are read before acting on them: a directory of
/// millions of entries is emptied in rounds, not read whole into memory.
const BATCH: usize = 4096;

/// Deletes `path` and everything under it without following symbolic links or recursing.
/// A missing `path` is already gone; a `path` that is a file or a link is unlinked.
pub fn remove(path: &Path) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| io::Error::other(format!("{} has no name", path.display())))?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let parent = openat(CWD, parent, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    let name = CString::new(name.as_bytes()).map_err(io::Error::other)?;
    match open_dir(&parent, &name) {
        Ok(root) => {
            empty(root)?;
            unlinkat(&parent, name.as_c_str(), AtFlags::REMOVEDIR)?;
        }
        Err(err) if err == rustix::io::Errno::NOENT => {}
        // A file, or a link (to anything): it goes as it is.
        Err(err) if err == rustix::io::Errno::NOTDIR || err == rustix::io::Errno::LOOP => {
            unlinkat(&parent, name.as_c_str(), AtFlags::empty())?;
        }
        Err(err) => return Err(err.into()),
    }
    Ok(())
}

/// A directory's identity: its device and inode.
type Identity = (u64, u64);

fn identity(dir: &OwnedFd) -> io::Result<Identity> {
    let stat = fstat(dir)?;
    Ok((stat.st_dev, stat.st_ino))
}

/// Opens `name` in `parent` as a directory, never through a link. A directory its owner
/// made unreadable (mode 000) is made readable first: roost may not be root, and the
/// agent's files are then roost's own.
fn open_dir(parent: &OwnedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match openat(parent, name, flags, Mode::empty()) {
        Err(rustix::io::Errno::ACCESS) => {
            let handle = openat(
                parent,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            let through = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&handle));
            rustix::fs::chmod(through.as_str(), Mode::RWXU)?;
            openat(&handle, c".", flags, Mode::empty())
        }
        other => other,
    }
}

/// Empties the directory `root` (which the caller removes), depth first, one directory
/// open at a time.
fn empty(root: OwnedFd) -> io::Result<()> {
    // The ancestors of `current` below `root`'s parent: each one's identity, the name
    // `current`'s branch has in it, and its subdirectories still to visit.
    let mut above: Vec<(Identity, CString, Vec<CString>)> = Vec::new();
    let mut current = root;
    let mut pending: Vec<CString> = Vec::new();
    loop {
        if pending.is_empty() {
            pending = clear_files(&current)?;
        }
        if let Some(subdirectory) = pending.pop() {
            match open_dir(&current, &subdirectory) {
                Ok(child) => {
                    above.push((identity(&current)?, subdirectory, std::mem::take(&mut pending)));
                    current = child;
                }
                Err(rustix::io::Errno::NOENT) => {}
                // Replaced by a file or a link since it was listed: it goes as it is.
                Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
                    unlinkat(&current, subdirectory.as_c_str(), AtFlags::empty())?;
                }
                Err(err) => return Err(err.into()),
            }
            continue;
        }
        // `current` is empty: climb back and remove it.
        let Some((parent_identity, name, rest)) = above.pop() else { return Ok(()) };
        let parent = openat(
            &current,
            c"..",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if identity(&parent)? != parent_identity {
            return Err(io::Error::other("the tree moved while it was being deleted; left for the next sweep"));
        }
        unlinkat(&parent, name.as_c_str(), AtFlags::REMOVEDIR)?;
        current = parent;
        pending = rest;
    }
}

/// Unlinks the entries of `dir` that are not directories, and names its subdirectories
/// (up to [`BATCH`] of them; none when it is empty). Each round lists the directory
/// afresh, so what a round's unlinking hid from its listing is seen by the next.
fn clear_files(dir: &OwnedFd) -> io::Result<Vec<CString>> {
    loop {
        let mut names: Vec<(CString, FileType)> = Vec::new();
        let mut listing = Dir::read_from(dir)?;
        while names.len() < BATCH {
            let Some(entry) = listing.read() else { break };
            let entry = entry?;
            let name = entry.file_name();
            if name != c"." && name != c".." {
                names.push((name.to_owned(), entry.file_type()));
            }
        }
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut subdirectories = Vec::new();
        for (name, kind) in names {
            let kind = match kind {
                FileType::Unknown => match rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(rustix::io::Errno::NOENT) => continue,
                    Err(err) => return Err(err.into()),
                },
                known => known,
            };
            if kind == FileType::Directory {
                subdirectories.push(name);
                continue;
            }
            match unlinkat(dir, name.as_c_str(), AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(err) => return Err(err.into()),
            }
        }
        if !subdirectories.is_empty() {
            return Ok(subdirectories);
        }
    }
}

/// Gives `path` and everything under it to `uid:gid` (the owner of each entry, never
/// through a link), walking as [`remove`] does: one directory open at a time, no recursion,
/// each parent reached on the way up checked to be the one come down from. Changing the
/// owner also clears setuid and setgid bits, so nothing given keeps a privilege it had. A
/// file that also has a name elsewhere (a hard link) is left as it is: changing it would
/// change that other file.
pub fn give(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let owner = (Some(rustix::process::Uid::from_raw(uid)), Some(rustix::process::Gid::from_raw(gid)));
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut current = openat(CWD, path, flags, Mode::empty())?;
    rustix::fs::fchown(&current, owner.0, owner.1)?;
    let mut above: Vec<(Identity, Vec<CString>)> = Vec::new();
    let mut pending = give_entries(&current, owner)?;
    loop {
        if let Some(subdirectory) = pending.pop() {
            match openat(&current, subdirectory.as_c_str(), flags, Mode::empty()) {
                Ok(child) => {
                    above.push((identity(&current)?, std::mem::take(&mut pending)));
                    current = child;
                    pending = give_entries(&current, owner)?;
                }
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {}
                Err(err) => return Err(err.into()),
            }
            continue;
        }
        let Some((parent_identity, rest)) = above.pop() else { return Ok(()) };
        let parent = openat(&current, c"..", flags, Mode::empty())?;
        if identity(&parent)? != parent_identity {
            return Err(io::Error::other("the tree moved while its owner was being changed"));
        }
        current = parent;
        pending = rest;
    }
}

/// Gives every entry of `dir` to `owner` (symbolic links as links; files with hard links
/// elsewhere not at all) and names its subdirectories.
fn give_entries(
    dir: &OwnedFd,
    owner: (Option<rustix::process::Uid>, Option<rustix::process::Gid>),
) -> io::Result<Vec<CString>> {
    let mut subdirectories = Vec::new();
    let mut listing = Dir::read_from(dir)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(err) => return Err(err.into()),
        };
        let kind = FileType::from_raw_mode(stat.st_mode);
        // A file with other names may be a hard link to something outside the tree (the
        // agent could link any file of its filesystem it could see): it keeps its owner.
        if kind != FileType::Directory && stat.st_nlink > 1 {
            continue;
        }
        match rustix::fs::chownat(dir, name, owner.0, owner.1, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(err) => return Err(err.into()),
        }
        if kind == FileType::Directory {
            subdirectories.push(name.to_owned());
        }
    }
    Ok(subdirectories)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_with_files_links_and_unreadable_directories_goes_and_nothing_outside_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep.txt"), b"keep").unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b/c")).unwrap();
        std::fs::write(tree.join("a/b/c/file"), b"x").unwrap();
        for i in 0..5000 {
            std::fs::write(tree.join(format!("a/many-{i}")), b"").unwrap();
        }
        std::os::unix::fs::symlink(&outside, tree.join("a/link-to-outside")).unwrap();
        std::os::unix::fs::symlink(outside.join("keep.txt"), tree.join("a/b/link-to-file")).unwrap();
        std::fs::create_dir(tree.join("locked")).unwrap();
        std::fs::write(tree.join("locked/inside"), b"").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(tree.join("locked"), std::fs::Permissions::from_mode(0o000)).unwrap();

        remove(&tree).unwrap();
        assert!(!tree.exists());
        assert_eq!(std::fs::read(outside.join("keep.txt")).unwrap(), b"keep", "links were not followed");
        remove(&tree).unwrap();
    }

    #[test]
    fn a_link_in_place_of_the_tree_is_removed_as_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"").unwrap();
        let link = dir.path().join("workspace");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        remove(&link).unwrap();
        assert!(!link.exists() && target.join("keep").exists());
    }

    /// 100,000 nested directories, deleted on a thread with a 256 KiB stack: a recursive
    /// walk would overflow it hundreds of levels down. Made in memory (`/dev/shm`) where
    /// there is one: on a disk mounted with `discard` each directory freed costs a trim
    /// (~1 ms), which says nothing of the walk.
    #[test]
    fn a_hundred_thousand_nested_directories_go_on_a_small_stack() {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
        let tree = dir.path().join("deep");
        std::fs::create_dir(&tree).unwrap();
        // Made the way an agent would: one level at a time, relative to the last.
        let mut current =
            openat(CWD, &tree, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        for _ in 0..100_000 {
            rustix::fs::mkdirat(&current, c"d", Mode::RWXU).unwrap();
            current =
                openat(&current, c"d", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        }
        rustix::fs::openat(&current, c"leaf", OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC, Mode::RUSR).unwrap();
        drop(current);
        let deleting = tree.clone();
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || remove(&deleting))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert!(!tree.exists());
    }

    #[test]
    fn a_tree_is_given_to_a_user_without_following_its_links() {
        if !rustix::process::geteuid().is_root() {
            return eprintln!("skipped: changing owners needs root");
        }
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/b/file"), b"x").unwrap();
        std::fs::write(tree.join("setuid"), b"x").unwrap();
        std::fs::set_permissions(tree.join("setuid"), std::fs::Permissions::from_mode(0o4755)).unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
        let linked = dir.path().join("linked");
        std::fs::write(&linked, b"host's").unwrap();
        std::fs::hard_link(&linked, tree.join("a/hard-link")).unwrap();
        give(&tree, 1_900_000_123, 1_900_000_123).unwrap();
        assert_eq!(std::fs::metadata(&linked).unwrap().uid(), 0, "a hard link's file keeps its owner");
        for path in ["", "a", "a/b", "a/b/file", "setuid", "a/link"] {
            let meta = std::fs::symlink_metadata(tree.join(path)).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (1_900_000_123, 1_900_000_123), "{path}");
        }
        assert_eq!(std::fs::metadata(tree.join("setuid")).unwrap().mode() & 0o6000, 0, "no longer setuid");
        assert_eq!(std::fs::metadata(&outside).unwrap().uid(), 0, "the link's target is left alone");
    }
}
