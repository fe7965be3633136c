//! `roost sandbox-enter`: what a roost running as root does, in a process of its own,
//! between forking an agent's sandbox and handing it to bubblewrap, so that the agent is
//! never host root and never outgrows its disk.
//!
//! 1. A private mount namespace (propagation from the host only, nothing back out).
//! 2. The agent's disk image ([`super::disk`]) on a loop device with auto-clear, mounted
//!    `nosuid,nodev` at its workspace path. The mount lives in this namespace only: when
//!    the sandbox ends, the kernel unmounts it and frees the loop device, whatever ended
//!    it (a stop, a crash, roost killed with SIGKILL). The host never sees the mount, and
//!    nothing is left to clean up.
//! 3. A staging directory of its own (a tmpfs on `--stage`, in this namespace only) with
//!    everything the sandbox binds from the host bind-mounted into it: the workspace, the
//!    runtime's install, roost's binary, the agent's sockets. bubblewrap, running as the
//!    agent's uid, resolves each path it binds (it takes the real path first), and that uid
//!    cannot walk roost's data directory (`~/.roost` under `/root`, say); it walks the
//!    staging directory instead, and needs nothing else of the host's.
//! 4. Every privilege dropped for good: no supplementary groups, then the agent's own host
//!    gid and uid (real, effective and saved). bubblewrap then maps the agent's uid 1000
//!    inside to that unprivileged uid outside, so a setuid file it makes is setuid to
//!    nobody that matters, and `/proc/sys` refuses its writes.
//! 5. The parent-death signal set again (changing credentials clears it), then `exec` of
//!    bubblewrap.
//!
//! It also holds [`inherited`], how the relay adopts the sockets roost hands it. Like
//! [`crate::runtimes::pre_exec`], this module is allowed `unsafe` for a few system calls
//! that have no safe wrapper; each carries its argument.

#![allow(unsafe_code)]

use std::{
    ffi::OsString,
    io,
    os::{
        fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
        unix::process::CommandExt as _,
    },
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use clap::Args;
use rustix::fs::{Mode, OFlags, open};

/// The launcher's arguments (set by roost, not by people: the subcommand is hidden).
#[derive(Debug, Args)]
pub struct EnterArgs {
    /// The agent's host uid.
    #[arg(long)]
    uid: u32,
    /// The agent's host gid.
    #[arg(long)]
    gid: u32,
    /// roost's pid: the launcher exits if roost is gone before it execs.
    #[arg(long)]
    parent: i32,
    /// The agent's disk image, mounted at `--workspace`.
    #[arg(long)]
    image: Option<PathBuf>,
    /// The workspace (where the image is mounted).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// An empty directory the staging tmpfs is mounted on.
    #[arg(long)]
    stage: PathBuf,
    /// `SOURCE=NAME`: bind-mounts SOURCE (a directory or a file) at NAME in the staging
    /// directory.
    #[arg(long, value_parser = parse_bind)]
    bind: Vec<(PathBuf, String)>,
    /// bubblewrap and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

fn parse_bind(arg: &str) -> Result<(PathBuf, String), String> {
    let (source, name) = arg.rsplit_once('=').ok_or("expected SOURCE=NAME")?;
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(format!("{name:?} is not a plain name"));
    }
    Ok((PathBuf::from(source), name.to_owned()))
}

/// Runs the launcher: only returns if it failed (else it became bubblewrap).
pub fn main(args: EnterArgs) -> ExitCode {
    let err = enter(args);
    eprintln!("roost sandbox-enter: {err}");
    ExitCode::from(125)
}

fn enter(args: EnterArgs) -> io::Error {
    match prepare(&args) {
        Ok(command) => command_of(&command).exec(),
        Err(err) => err,
    }
}

fn command_of(argv: &[OsString]) -> Command {
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]);
    command
}

/// Everything up to the `exec`: the bubblewrap command to run.
fn prepare(args: &EnterArgs) -> io::Result<Vec<OsString>> {
    if args.uid == 0 || args.gid == 0 {
        return Err(io::Error::other("an agent never runs as uid or gid 0"));
    }
    // SAFETY: `unshare(CLONE_NEWNS)` gives the calling thread a mount namespace of its
    // own. It is unsafe in rustix because other threads of a process would keep the old
    // one; the launcher is single-threaded (it is `main` of its own process, before any
    // thread or runtime is made), so the whole process moves.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }
        .map_err(|e| io::Error::new(e.kind(), format!("cannot make a mount namespace: {e}")))?;
    rustix::mount::mount_change(
        "/",
        rustix::mount::MountPropagationFlags::DOWNSTREAM | rustix::mount::MountPropagationFlags::REC,
    )
    .map_err(|e| io::Error::new(e.kind(), format!("cannot make the mounts private: {e}")))?;
    if let (Some(image), Some(workspace)) = (&args.image, &args.workspace) {
        mount_image(image, workspace)?;
    }
    stage(&args.stage, &args.bind)?;

    rustix::thread::set_thread_groups(&[])
        .map_err(|e| io::Error::new(e.kind(), format!("cannot drop supplementary groups: {e}")))?;
    let gid = rustix::process::Gid::from_raw(args.gid);
    rustix::thread::set_thread_res_gid(gid, gid, gid)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot become gid {}: {e}", args.gid)))?;
    let uid = rustix::process::Uid::from_raw(args.uid);
    rustix::thread::set_thread_res_uid(uid, uid, uid)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot become uid {}: {e}", args.uid)))?;
    if rustix::process::getuid().as_raw() != args.uid || rustix::process::geteuid().as_raw() != args.uid {
        return Err(io::Error::other("the uid did not change"));
    }
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(args.parent) {
        return Err(io::Error::other("roost is gone"));
    }
    Ok(args.command.clone())
}

/// Mounts a small tmpfs on `at` and bind-mounts each `(source, name)` at `at/name`.
fn stage(at: &Path, binds: &[(PathBuf, String)]) -> io::Result<()> {
    use rustix::mount::{MountFlags, mount, mount_bind_recursive};
    let failed = |what: String| move |e: rustix::io::Errno| io::Error::new(e.kind(), format!("{what}: {e}"));
    mount("roost-stage", at, "tmpfs", MountFlags::NOSUID | MountFlags::NODEV, c"size=1m,mode=755")
        .map_err(failed(format!("cannot mount the staging directory on {}", at.display())))?;
    for (source, name) in binds {
        let target = at.join(name);
        let meta = std::fs::metadata(source)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot stage {}: {e}", source.display())))?;
        if meta.is_dir() {
            std::fs::create_dir(&target)?;
        } else {
            std::fs::File::create(&target)?;
        }
        mount_bind_recursive(source, &target).map_err(failed(format!("cannot stage {}", source.display())))?;
    }
    Ok(())
}

/// `ioctl` numbers and flags of the loop driver (linux/loop.h).
const LOOP_CTL_GET_FREE: libc::Ioctl = 0x4C82;
const LOOP_CONFIGURE: libc::Ioctl = 0x4C0A;
const LO_FLAGS_AUTOCLEAR: u32 = 4;

/// `struct loop_info64`.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `struct loop_config` (`LOOP_CONFIGURE`, Linux 5.8).
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// Attaches `image` to a free loop device that lets go of it when unmounted, and mounts
/// it at `at` (`nosuid`, `nodev`, `noatime`).
fn mount_image(image: &Path, at: &Path) -> io::Result<()> {
    super::disk::wait_unused(image)?;
    let file = open(image, OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open the disk image {}: {e}", image.display())))?;
    let control = open("/dev/loop-control", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open /dev/loop-control: {e}")))?;
    // Another boot may take the free device between asking and configuring it: ask again.
    for _ in 0..64 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number or an
        // error; `control` is an open descriptor of /dev/loop-control.
        let number = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
        if number < 0 {
            return Err(io::Error::new(io::Error::last_os_error().kind(), "no free loop device"));
        }
        let device = format!("/dev/loop{number}");
        let loop_device = match open(device.as_str(), OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(io::Error::new(e.kind(), format!("cannot open {device}: {e}"))),
        };
        let config = LoopConfig {
            fd: u32::try_from(file.as_raw_fd()).map_err(io::Error::other)?,
            block_size: 0,
            info: LoopInfo64 {
                lo_device: 0,
                lo_inode: 0,
                lo_rdevice: 0,
                lo_offset: 0,
                lo_sizelimit: 0,
                lo_number: 0,
                lo_encrypt_type: 0,
                lo_encrypt_key_size: 0,
                lo_flags: LO_FLAGS_AUTOCLEAR,
                lo_file_name: [0; 64],
                lo_crypt_name: [0; 64],
                lo_encrypt_key: [0; 32],
                lo_init: [0; 2],
            },
            reserved: [0; 8],
        };
        // SAFETY: LOOP_CONFIGURE reads one `struct loop_config`, which `config` is
        // (`repr(C)`, the kernel's layout, every field initialised); the pointer is valid
        // for the call and the kernel does not keep it.
        let done = unsafe { libc::ioctl(loop_device.as_raw_fd(), LOOP_CONFIGURE, &raw const config) };
        if done < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EBUSY) {
                continue;
            }
            return Err(io::Error::new(err.kind(), format!("cannot attach {} to {device}: {err}", image.display())));
        }
        let flags =
            rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV | rustix::mount::MountFlags::NOATIME;
        // The loop device and image descriptors close on return: the mount holds them
        // then, and the auto-clear flag frees the device when it is unmounted.
        return rustix::mount::mount(device.as_str(), at, "ext4", flags, c"errors=remount-ro")
            .map_err(|e| io::Error::new(e.kind(), format!("cannot mount the disk image at {}: {e}", at.display())));
    }
    Err(io::Error::other("no free loop device after 64 tries"))
}

/// The descriptor `fd` this process inherited (from roost, through bubblewrap), adopted
/// once and marked close-on-exec so the runtime does not inherit it in turn.
pub fn inherited(fd: i32) -> io::Result<OwnedFd> {
    if fd <= 2 {
        return Err(io::Error::other(format!("descriptor {fd} is a standard stream")));
    }
    // SAFETY: F_GETFD only asks whether `fd` is open; it touches no memory.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::new(io::Error::last_os_error().kind(), format!("descriptor {fd} is not open")));
    }
    // SAFETY: `fd` is open (checked above) and was passed to this process on its command
    // line for it to own: nothing else in the process refers to it, and the caller adopts
    // each number once (the relay refuses a number given twice).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC)?;
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_structures_have_the_kernels_sizes() {
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232);
        assert_eq!(std::mem::size_of::<LoopConfig>(), 304);
    }
}
