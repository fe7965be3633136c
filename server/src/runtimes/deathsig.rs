//! The one place roost runs `unsafe` code: a hook that runs in a runtime's child process
//! between `fork` and `exec` and asks Linux to SIGKILL the child when roost dies
//! (`PR_SET_PDEATHSIG`), so a roost killed with `kill -9` takes its runtimes with it.
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

/// Elsewhere there is no parent-death signal (nor the /proc that [`super::orphans`] reads):
/// a runtime outlives a killed roost there.
#[cfg(not(target_os = "linux"))]
pub fn die_with_roost(_command: &mut Command) {}
