//! Runtime processes that outlived their roost, and the records that find them.
//!
//! On Linux a runtime dies with roost ([`super::pre_exec`]). What can still outlive a roost
//! killed with SIGKILL: a runtime that cleared its parent-death signal or exec'd a
//! set-user-ID program, and whatever a runtime started itself (the signal is not
//! inherited). Left alone, they hold their ports and the secrets in their environment, and
//! the next start would run a second process for each agent. So roost records every
//! runtime it starts (pid, start time, boot id, installation) and forgets it once it has
//! ended; at start, before any agent boots, [`ChildRecords::reap`] kills what the records
//! still name and forgets them.
//!
//! Never touched: a pid whose start time differs from its record (the pid was reused),
//! records from an earlier boot (forgotten: nothing of them runs), records of another
//! installation sharing the store (PostgreSQL), and records whose roost still runs
//! (another `roost serve` on the same data directory).

use std::{
    io,
    path::Path,
    time::{Duration, Instant},
};

use tracing::{info, warn};

use super::procfs::{self, ProcessId, Stat};
use crate::{
    Result,
    store::{ChildRecord, Store},
    time::now_ms,
};

/// The file in the data directory that names this installation in the store.
pub const INSTALLATION_FILE: &str = "installation_id";

/// How long the start-up reaping waits for a killed process to be gone.
const REAP_WAIT: Duration = Duration::from_secs(5);

/// The id of the installation whose data directory is `data_dir`, made on first use.
///
/// Not the directory's path: containers sharing one PostgreSQL commonly use the same path,
/// and each must touch only its own records.
pub fn installation_id(data_dir: &Path) -> io::Result<String> {
    let path = data_dir.join(INSTALLATION_FILE);
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_owned());
    }
    std::fs::create_dir_all(data_dir)?;
    // Written aside, then linked into place: two first starts at once agree on one id, and
    // nobody reads a half-written file.
    let id = crate::ids::new_id("inst");
    let draft = data_dir.join(format!("{INSTALLATION_FILE}.{id}"));
    std::fs::write(&draft, format!("{id}\n"))?;
    let linked = std::fs::hard_link(&draft, &path);
    let _ = std::fs::remove_file(&draft);
    match linked {
        Ok(()) => Ok(id),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(std::fs::read_to_string(&path)?.trim().to_owned()),
        Err(err) => Err(err),
    }
}

/// What a start-up reaping did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Processes killed.
    pub killed: usize,
    /// Records forgotten (their processes killed, or long gone).
    pub forgotten: usize,
    /// Records kept: another running roost's, or a process that would not die.
    pub kept: usize,
}

/// This installation's records of its runtime processes.
#[derive(Clone)]
pub struct ChildRecords {
    store: Store,
    installation: String,
    /// `None` without `/proc`: nothing is recorded or reaped.
    boot_id: Option<String>,
    /// This roost process.
    me: Option<ProcessId>,
}

impl ChildRecords {
    /// The records of the installation at `data_dir` in `store`.
    pub fn new(store: Store, data_dir: &Path) -> io::Result<Self> {
        Ok(Self {
            store,
            installation: installation_id(data_dir)?,
            boot_id: procfs::boot_id(),
            me: ProcessId::of(std::process::id() as i32),
        })
    }

    /// Records runtime process `pid` of agent `instance_id`, just started. `None` where
    /// records are not kept, or when the process is already gone.
    pub async fn record(&self, pid: u32, instance_id: &str) -> Result<Option<ChildRecord>> {
        let (Some(boot_id), Some(me)) = (&self.boot_id, self.me) else { return Ok(None) };
        let Some(child) = ProcessId::of(pid as i32) else { return Ok(None) };
        let record = ChildRecord {
            installation: self.installation.clone(),
            boot_id: boot_id.clone(),
            pid: i64::from(child.pid),
            start_time: child.start_time,
            instance_id: instance_id.to_owned(),
            owner_pid: i64::from(me.pid),
            owner_start_time: me.start_time,
            started_at: now_ms(),
        };
        self.store.record_child(&record).await?;
        Ok(Some(record))
    }

    /// Forgets a runtime process that has ended. A failure is logged: the record then
    /// names a process that is gone, which the next start forgets.
    pub async fn forget(&self, record: &ChildRecord) {
        if let Err(err) = self.store.forget_child(record).await {
            warn!(instance = %record.instance_id, pid = record.pid, error = %err, "could not forget an ended runtime process");
        }
    }

    /// Kills every recorded runtime process of this installation that still runs (and
    /// what it started), waits for them to be gone, and forgets them. Call before any
    /// agent boots.
    pub async fn reap(&self) -> Result<Reaped> {
        let mut reaped = Reaped::default();
        let Some(boot_id) = &self.boot_id else { return Ok(reaped) };
        let records = self.store.children_of(&self.installation).await?;
        if records.is_empty() {
            return Ok(reaped);
        }
        let processes = procfs::processes();
        for record in &records {
            if record.boot_id != *boot_id {
                self.forget(record).await;
                reaped.forgotten += 1;
                continue;
            }
            let owner = ProcessId { pid: record.owner_pid as i32, start_time: record.owner_start_time };
            if Some(owner) != self.me && owner.alive() {
                reaped.kept += 1;
                continue;
            }
            let victims = victims(record, &processes);
            for victim in &victims {
                kill(*victim, victim.pid as i64 == record.pid);
            }
            if gone(&victims, REAP_WAIT).await {
                if !victims.is_empty() {
                    warn!(
                        instance = %record.instance_id,
                        pid = record.pid,
                        processes = victims.len(),
                        "killed a runtime process left running by an earlier roost"
                    );
                }
                self.forget(record).await;
                reaped.killed += victims.len();
                reaped.forgotten += 1;
            } else {
                warn!(instance = %record.instance_id, pid = record.pid, "a runtime process left by an earlier roost would not die; trying again at the next start");
                reaped.kept += 1;
            }
        }
        info!(
            killed = reaped.killed,
            forgotten = reaped.forgotten,
            kept = reaped.kept,
            "runtime processes of earlier starts reaped"
        );
        Ok(reaped)
    }
}

/// The processes of `record` still running: the recorded process itself if its pid still
/// has the recorded start time, and the members of its process group that started after
/// it and carry its agent's id in their environment (the runtime's own children, which
/// outlive it when the parent-death signal killed it).
fn victims(record: &ChildRecord, processes: &[(i32, Stat)]) -> Vec<ProcessId> {
    let leader = ProcessId { pid: record.pid as i32, start_time: record.start_time };
    let marker = format!("ROOST_INSTANCE_ID={}", record.instance_id);
    let mut victims: Vec<ProcessId> = processes
        .iter()
        .filter(|(pid, stat)| {
            i64::from(*pid) != record.pid
                && i64::from(stat.pgrp) == record.pid
                && stat.start_time >= record.start_time
                && !stat.zombie
                && procfs::environ_has(*pid, &marker)
        })
        .map(|(pid, stat)| ProcessId { pid: *pid, start_time: stat.start_time })
        .collect();
    if leader.alive() {
        victims.push(leader);
    }
    victims
}

/// SIGKILL to `victim` (and to its process group when it leads the group).
#[cfg(unix)]
fn kill(victim: ProcessId, leader: bool) {
    use rustix::process::{Pid, Signal, kill_process, kill_process_group};
    let Some(pid) = Pid::from_raw(victim.pid) else { return };
    // Checked again just before: the pid must still name the recorded process.
    if !victim.alive() {
        return;
    }
    if leader {
        let _ = kill_process_group(pid, Signal::KILL);
    }
    let _ = kill_process(pid, Signal::KILL);
}

#[cfg(not(unix))]
fn kill(_victim: ProcessId, _leader: bool) {}

/// Waits until none of `victims` runs; whether that happened within `limit`.
async fn gone(victims: &[ProcessId], limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        for victim in victims {
            collect_zombie(*victim);
        }
        if !victims.iter().any(|v| v.alive()) {
            return true;
        }
        if started.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A killed process that is this process's own child (a runtime started before roost
/// re-executed itself in place) stays a zombie until waited for: wait for it. Harmless for
/// any other process (the kernel refuses with ECHILD).
#[cfg(unix)]
fn collect_zombie(victim: ProcessId) {
    use rustix::process::{Pid, WaitOptions, waitpid};
    if procfs::stat(victim.pid).is_some_and(|s| s.zombie && s.start_time == victim.start_time)
        && let Some(pid) = Pid::from_raw(victim.pid)
    {
        let _ = waitpid(Some(pid), WaitOptions::NOHANG);
    }
}

#[cfg(not(unix))]
fn collect_zombie(_victim: ProcessId) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installation_keeps_its_id() {
        let dir = tempfile::tempdir().expect("temporary dir");
        let first = installation_id(dir.path()).expect("made");
        assert!(first.starts_with("inst_"), "{first}");
        assert_eq!(installation_id(dir.path()).expect("read"), first);
        let other = tempfile::tempdir().expect("temporary dir");
        assert_ne!(installation_id(other.path()).expect("made"), first, "another data directory, another id");
        let files: Vec<_> = std::fs::read_dir(dir.path()).expect("list").flatten().map(|e| e.file_name()).collect();
        assert_eq!(files, [INSTALLATION_FILE], "no draft left behind");
    }
}
