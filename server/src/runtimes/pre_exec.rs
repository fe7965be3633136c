//! Hooks that run in a runtime's child process between `fork` and `exec`: one of the two
//! places roost runs `unsafe` code (the other is [`crate::sandbox::enter`]).
//!
//! - [`die_with_roost`] asks Linux to SIGKILL the child when roost dies
//!   (`PR_SET_PDEATHSIG`), so a roost killed with `kill -9` takes its runtimes with it.
//! - [`enter_sandbox`] puts the child in its agent's cgroups and lets it inherit the
//!   descriptors bubblewrap takes (the seccomp filter, the directories and sockets it
//!   binds, the data it copies in; see [`crate::sandbox`]): joining before `exec` means no
//!   process of the agent ever runs outside its limits.
//!
//! Linux sends that signal when the *thread* that forked the child exits, not the process:
//! [`super::spawner`] forks every runtime from a thread that lives as long as roost.
//!
//! The signal is not inherited by the runtime's own children, and Linux clears it when the
//! runtime execs a set-user-ID or set-group-ID program: those are what [`super::orphans`]
//! reaps at the next start.

#![allow(unsafe_code)]

use tokio::process::Command;

/// Makes the child `command` starts die (SIGKILL) when roost's forking thread does; if
/// roost has already died by the time the child asks, the child exits before `exec`.
#[cfg(target_os = "linux")]
pub fn die_with_roost(command: &mut Command) {
    use rustix::process::{Signal, getpid, getppid, set_parent_process_death_signal};

    let roost = getpid();
    // SAFETY: `pre_exec` runs the closure in the child after `fork`, where the parent may
    // have been multi-threaded: a lock or the allocator may be held by a thread that does
    // not exist in the child, so only async-signal-safe operations are sound there. The
    // closure makes two system calls (prctl(PR_SET_PDEATHSIG) and getppid, raw syscalls
    // through rustix), compares integers, and builds its error from an errno or an
    // `ErrorKind`, neither of which allocates. It touches no lock, no allocation and no
    // state shared with other threads; `roost` is a copied integer. Returning an error
    // makes std exit the child at once (it reports the error to the parent over its
    // close-on-exec pipe and calls `_exit`).
    unsafe {
        command.pre_exec(move || {
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // roost died between fork and prctl: the signal it asked for will never come.
            if getppid() != Some(roost) {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            Ok(())
        });
    }
}

/// Makes the child `command` starts join the cgroups whose `cgroup.procs` files are
/// `join` (by writing `0`, "the writer"), and keep `inherit` open across `exec` (roost opens
/// every descriptor close-on-exec, so only this child gets them). A failure stops the child
/// before `exec`: an agent never runs outside its cgroups.
#[cfg(target_os = "linux")]
pub fn enter_sandbox(command: &mut Command, join: Vec<std::ffi::CString>, inherit: Vec<std::os::fd::RawFd>) {
    use rustix::{
        fs::{Mode, OFlags, open},
        io::{FdFlags, fcntl_setfd, write},
    };
    use std::os::fd::BorrowedFd;

    // SAFETY: as in `die_with_roost`, the closure runs between `fork` and `exec` and only
    // makes system calls through rustix (open, write, fcntl, and close when the `OwnedFd`
    // drops) on data prepared before the fork: `join` is a vector of C strings and
    // `inherit` a vector of integers, both owned by the closure and only read (no
    // allocation). The descriptors it borrows are open in the parent until the spawn
    // returns, so they are open in the child.
    unsafe {
        command.pre_exec(move || {
            for file in &join {
                let procs = open(file.as_c_str(), OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
                write(&procs, b"0")?;
            }
            for fd in &inherit {
                fcntl_setfd(BorrowedFd::borrow_raw(*fd), FdFlags::empty())?;
            }
            Ok(())
        });
    }
}

/// Elsewhere there is no parent-death signal (nor the /proc that [`super::orphans`] reads):
/// a runtime outlives a killed roost there.
#[cfg(not(target_os = "linux"))]
pub fn die_with_roost(_command: &mut Command) {}

/// Elsewhere there is no sandbox ([`crate::sandbox`] reports itself unavailable there).
#[cfg(not(target_os = "linux"))]
pub fn enter_sandbox(_command: &mut Command, _join: Vec<std::ffi::CString>, _inherit: Vec<i32>) {}
