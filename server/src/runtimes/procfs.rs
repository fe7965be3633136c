//! What roost reads from Linux's `/proc` to recognise its runtime processes across its own
//! restarts: the boot id, and a process's start time, process group and environment (and
//! its CPU time, for `GET /metrics`).
//!
//! A pid alone names a process only while it lives: once it exits, the kernel may hand the
//! number to another. A pid with its start time (clock ticks since boot) and the boot id
//! names one process for good. Where `/proc` is missing every answer is `None` (or empty),
//! and roost keeps no records.

use std::path::Path;

/// One process for good: its pid and its start time (`/proc/<pid>/stat` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId {
    /// The pid.
    pub pid: i32,
    /// Clock ticks from boot to its start.
    pub start_time: i64,
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its start time.
    pub start_time: i64,
    /// Its process group.
    pub pgrp: i32,
    /// Exited, but not yet waited for by its parent: it holds nothing but its pid.
    pub zombie: bool,
    /// CPU time in user and system mode, in clock ticks (fields 14 and 15).
    pub cpu_ticks: u64,
}

/// This boot of the machine (`/proc/sys/kernel/random/boot_id`): a pid recorded under
/// another boot names no process that can still run.
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_owned()).filter(|id| !id.is_empty())
}

/// The process `pid` now, if there is one.
pub fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields after the command name, which is in parentheses and may itself hold spaces and
/// parentheses: field 3 (state) is the first after the last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(Stat {
        zombie: *fields.first()? == "Z",
        pgrp: fields.get(5 - 3)?.parse().ok()?,
        start_time: fields.get(22 - 3)?.parse().ok()?,
        cpu_ticks: fields.get(14 - 3)?.parse::<u64>().ok()? + fields.get(15 - 3)?.parse::<u64>().ok()?,
    })
}

impl ProcessId {
    /// `pid` as it is now, if it runs.
    pub fn of(pid: i32) -> Option<Self> {
        stat(pid).map(|stat| Self { pid, start_time: stat.start_time })
    }

    /// This very process is still running (not exited, not a zombie, its pid not reused).
    pub fn alive(self) -> bool {
        stat(self.pid).is_some_and(|stat| stat.start_time == self.start_time && !stat.zombie)
    }
}

/// Every process now, with what its stat says.
pub fn processes() -> Vec<(i32, Stat)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// Whether `pid`'s environment holds exactly `entry` (`NAME=value`); false when it cannot
/// be read (another user's process, or gone).
pub fn environ_has(pid: i32, entry: &str) -> bool {
    std::fs::read(Path::new("/proc").join(pid.to_string()).join("environ"))
        .is_ok_and(|environ| environ.split(|&b| b == 0).any(|var| var == entry.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_stat_line_whose_command_has_spaces_and_parentheses() {
        let line = "4242 (we (ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50";
        assert_eq!(parse_stat(line), Some(Stat { start_time: 987_654, pgrp: 4242, zombie: false, cpu_ticks: 3 }));
        assert_eq!(parse_stat("1 (x) Z 0 7"), None, "cut short");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn knows_this_process() {
        let me = ProcessId::of(std::process::id() as i32).expect("/proc on Linux");
        assert!(me.alive());
        assert!(!ProcessId { start_time: me.start_time + 1, ..me }.alive(), "another start time is another process");
        assert!(boot_id().is_some());
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(environ_has(me.pid, &format!("PATH={path}")));
        assert!(!environ_has(me.pid, "PATH=/nowhere/at/all"));
    }
}
