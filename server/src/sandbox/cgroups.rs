//! Per-agent cgroups: an agent's memory, CPU and process count are bounded by the kernel, so
//! one agent cannot starve roost, the host or the other agents.
//!
//! Each agent's runtime runs in `roost-<installation>/<instance_id>` under roost's own
//! cgroup, in each hierarchy roost uses: cgroup v2's unified tree where the host has it,
//! v1's `memory`, `pids` and `cpu` hierarchies where it has those. The runtime joins it
//! between `fork` and `exec` (see [`crate::runtimes::pre_exec`]), so not one of its
//! processes starts outside. A fresh cgroup per boot makes its OOM count that boot's:
//! when the runtime dies and the count is not zero, the kernel killed it for memory, and
//! the agent fails saying so.
//!
//! **CPU.** roost's own work comes first: the installation's cgroup, which holds every
//! agent, is idle (`cpu.idle` 1, kernels 5.15 and later): a roost thread that wakes takes
//! the CPU from an agent at once, so one agent's burners add no more than a scheduler
//! switch to roost's answers (weights alone left roost's p99 at 3-6× idle: a waking thread
//! still waited for the burner's slice). The agents share what roost and the host's other
//! work leave, among themselves by weight. On older kernels the group gets a tenth of the
//! CPU weight of roost's own tasks instead (`cpu.shares` 102 of 1024 on v1, `cpu.weight`
//! 10 of 100 on v2). And no agent's quota is the whole host: `cpus` is capped at the host's
//! cores less half a core.
//!
//! The installation's part of the tree is swept at start-up: whatever an earlier roost left
//! in it (after a `kill -9`) is killed and removed, beside the process records
//! ([`crate::runtimes::orphans`]).

use std::{
    ffi::CString,
    fs, io,
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

/// What one agent may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Memory (resident and its `/tmp`, which is memory too), in MiB.
    pub memory_mb: u64,
    /// CPU time, in cores (0.5 is half of one core).
    pub cpus: f64,
    /// Tasks: processes and their threads (the kernel's `pids` controller counts both).
    pub max_processes: u32,
}

/// The hierarchies roost puts agents in.
#[derive(Debug, Clone)]
enum Tree {
    /// cgroup v2: one directory per agent.
    V2 { base: PathBuf },
    /// cgroup v1: one directory per agent in each controller's hierarchy.
    V1 { memory: PathBuf, pids: PathBuf, cpu: PathBuf },
}

/// This installation's part of the host's cgroups.
#[derive(Debug, Clone)]
pub struct Cgroups {
    tree: Tree,
}

/// The installation's cgroup's CPU weight on cgroup v1, against 1024 for each of roost's
/// own tasks.
const AGENTS_CPU_SHARES_V1: u32 = 102;
/// The same on cgroup v2, against the default 100.
const AGENTS_CPU_WEIGHT_V2: u32 = 10;

/// The CPU one agent may use at most, in cores: the host's, less half a core (and at least
/// half a core), so no quota is the whole host.
fn max_cpus() -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) as f64;
    (cores - 0.5).max(0.5)
}

/// How long removing a cgroup waits for its killed processes to be gone.
const EMPTY_WAIT: Duration = Duration::from_secs(2);

impl Cgroups {
    /// Finds the host's cgroups and makes (and sweeps) `roost-<installation>` under roost's
    /// own cgroup; the error says what is missing, for the "sandbox unavailable" message.
    pub fn probe(installation: &str) -> Result<Self, String> {
        let mountinfo =
            fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("cannot read mountinfo: {e}"))?;
        let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let name = format!("roost-{installation}");
        let v1 = |controller: &str| -> Option<PathBuf> {
            let (mountpoint, root) = mountinfo.lines().find_map(|line| v1_mount(line, controller))?;
            let path = own.lines().find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers.split(',').any(|c| c == controller).then(|| path.to_owned())
            })?;
            let inside = path.strip_prefix(&root).unwrap_or(&path).trim_start_matches('/').to_owned();
            Some(mountpoint.join(inside).join(&name))
        };
        let tree = match (v1("memory"), v1("pids"), v1("cpu")) {
            (Some(memory), Some(pids), Some(cpu)) => Tree::V1 { memory, pids, cpu },
            _ => {
                let mountpoint = mountinfo.lines().find_map(v2_mount).ok_or(
                    "no cgroup hierarchy with the memory, pids and cpu controllers is mounted (cgroup v2, or v1's memory, pids and cpu)",
                )?;
                let path = own.lines().find_map(|line| line.strip_prefix("0::")).unwrap_or("/");
                let parent = mountpoint.join(path.trim_start_matches('/'));
                let base = parent.join(&name);
                enable_controllers(&parent)?;
                Tree::V2 { base }
            }
        };
        let cgroups = Self { tree };
        for dir in cgroups.bases() {
            fs::create_dir_all(dir).map_err(|e| format!("cannot create the cgroup {}: {e}", dir.display()))?;
        }
        if let Tree::V2 { base } = &cgroups.tree {
            enable_controllers(base)?;
        }
        cgroups.yield_to_roost().map_err(|e| format!("cannot weigh the agents' cgroup below roost: {e}"))?;
        cgroups.sweep();
        Ok(cgroups)
    }

    /// Which cgroups, for health and status.
    pub fn describe(&self) -> &'static str {
        match self.tree {
            Tree::V2 { .. } => "cgroup v2",
            Tree::V1 { .. } => "cgroup v1",
        }
    }

    /// Removes this installation's cgroups that have no agent in them, and the
    /// installation's own when it is left empty (at shutdown).
    pub fn remove_empty(&self) {
        for base in self.bases() {
            if let Ok(entries) = fs::read_dir(base) {
                for entry in entries.flatten() {
                    let _ = fs::remove_dir(entry.path());
                }
            }
            let _ = fs::remove_dir(base);
        }
    }

    /// Makes the installation's cgroup (every agent) yield to roost: idle on kernels that
    /// have `cpu.idle` (5.15 and later), else a tenth of roost's CPU weight.
    fn yield_to_roost(&self) -> io::Result<()> {
        let (dir, weight) = match &self.tree {
            Tree::V2 { base } => (base, ("cpu.weight", AGENTS_CPU_WEIGHT_V2)),
            Tree::V1 { cpu, .. } => (cpu, ("cpu.shares", AGENTS_CPU_SHARES_V1)),
        };
        // An idle group takes no weight (the kernel refuses one with EINVAL).
        match fs::write(dir.join("cpu.idle"), "1") {
            Err(err) if err.kind() == io::ErrorKind::NotFound => fs::write(dir.join(weight.0), weight.1.to_string()),
            done => done,
        }
    }

    fn bases(&self) -> Vec<&Path> {
        match &self.tree {
            Tree::V2 { base } => vec![base],
            Tree::V1 { memory, pids, cpu } => vec![memory, pids, cpu],
        }
    }

    /// Kills what an earlier roost of this installation left in its cgroups and removes
    /// them.
    fn sweep(&self) {
        for base in self.bases() {
            // What other installations' roosts left when they were killed (or their data
            // directories deleted): agent cgroups with no process in them for a minute, then
            // their emptied directories. A live roost's agents keep theirs (a cgroup with
            // processes, or children, is not removed), and one just made for a boot is
            // younger than a minute.
            if let Some(Ok(siblings)) = base.parent().map(fs::read_dir) {
                for sibling in siblings.flatten() {
                    if sibling.file_name().to_string_lossy().starts_with("roost-") && sibling.path() != base {
                        remove_abandoned(&sibling.path());
                        let _ = fs::remove_dir(sibling.path());
                    }
                }
            }
            let Ok(entries) = fs::read_dir(base) else { continue };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    empty_and_remove(&entry.path());
                }
            }
        }
    }

    /// A fresh cgroup for the agent's next runtime process, with `limits` set.
    pub fn create(&self, instance_id: &str, limits: &Limits) -> io::Result<AgentCgroup> {
        if let Tree::V2 { base } = &self.tree
            && !base.exists()
        {
            fs::create_dir_all(base)?;
            enable_controllers(base).map_err(io::Error::other)?;
        }
        let dirs: Vec<PathBuf> = self.bases().into_iter().map(|base| base.join(instance_id)).collect();
        for dir in &dirs {
            // What the agent's last process left (it has ended: never two at once).
            if dir.exists() {
                empty_and_remove(dir);
            }
            // The installation's directory too, should another roost's sweep have removed
            // it while it was empty.
            fs::create_dir_all(dir)?;
        }
        let group = AgentCgroup { v2: matches!(self.tree, Tree::V2 { .. }), dirs };
        group.limit(limits)?;
        Ok(group)
    }
}

/// The mount point and mounted root of the v1 hierarchy holding `controller`.
fn v1_mount(line: &str, controller: &str) -> Option<(PathBuf, String)> {
    let (left, right) = line.split_once(" - ")?;
    let mut fields = right.split_whitespace();
    if fields.next()? != "cgroup" {
        return None;
    }
    let options = fields.nth(1)?;
    if !options.split(',').any(|o| o == controller) {
        return None;
    }
    let mut left = left.split_whitespace();
    let root = left.nth(3)?.to_owned();
    let mountpoint = PathBuf::from(left.next()?);
    Some((mountpoint, root))
}

/// The mount point of the cgroup v2 hierarchy.
fn v2_mount(line: &str) -> Option<PathBuf> {
    let (left, right) = line.split_once(" - ")?;
    if right.split_whitespace().next()? != "cgroup2" {
        return None;
    }
    Some(PathBuf::from(left.split_whitespace().nth(4)?))
}

/// Lets `dir`'s children use the memory, pids and cpu controllers (cgroup v2).
fn enable_controllers(dir: &Path) -> Result<(), String> {
    let available = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    for controller in ["memory", "pids", "cpu"] {
        if !available.split_whitespace().any(|c| c == controller) {
            return Err(format!("the {controller} controller is not delegated to {}", dir.display()));
        }
    }
    fs::write(dir.join("cgroup.subtree_control"), "+memory +pids +cpu").map_err(|e| {
        format!(
            "cannot enable cgroup controllers in {} ({e}); run roost in a cgroup of its own with delegation, \
             e.g. `systemd-run --scope -p Delegate=yes roost serve`",
            dir.display()
        )
    })
}

/// How long an empty agent cgroup of another installation is left alone.
const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// Removes the agent cgroups under `base` that have had no process for a while.
fn remove_abandoned(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let dir = entry.path();
        let empty = fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|procs| procs.trim().is_empty());
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > ABANDONED_AFTER);
        if entry.file_type().is_ok_and(|t| t.is_dir()) && empty && old {
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// Kills every process in the cgroup at `dir` and removes it, waiting briefly for the
/// kernel to let go of the killed ones.
fn empty_and_remove(dir: &Path) {
    let deadline = Instant::now() + EMPTY_WAIT;
    loop {
        kill_all(dir);
        if fs::remove_dir(dir).is_ok() || !dir.exists() || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to every process in the cgroup at `dir`.
fn kill_all(dir: &Path) {
    use rustix::process::{Pid, Signal, kill_process};
    let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|line| line.trim().parse::<i32>().ok()).filter_map(Pid::from_raw) {
        let _ = kill_process(pid, Signal::KILL);
    }
}

/// One boot's cgroup (in each hierarchy).
#[derive(Debug)]
pub struct AgentCgroup {
    v2: bool,
    dirs: Vec<PathBuf>,
}

impl AgentCgroup {
    fn limit(&self, limits: &Limits) -> io::Result<()> {
        let memory = limits.memory_mb.saturating_mul(1024 * 1024).max(1024 * 1024);
        let pids = limits.max_processes.max(1);
        let period: u64 = 100_000;
        let quota = (limits.cpus.min(max_cpus()) * period as f64).round() as u64;
        let set = |dir: &Path, file: &str, value: String| fs::write(dir.join(file), value);
        if self.v2 {
            let dir = &self.dirs[0];
            set(dir, "memory.max", memory.to_string())?;
            // No swap: a limit the agent can swap past bounds nothing.
            let _ = set(dir, "memory.swap.max", "0".to_owned());
            set(dir, "pids.max", pids.to_string())?;
            if quota > 0 {
                set(dir, "cpu.max", format!("{} {period}", quota.max(1000)))?;
            }
        } else {
            let (memory_dir, pids_dir, cpu_dir) = (&self.dirs[0], &self.dirs[1], &self.dirs[2]);
            set(memory_dir, "memory.limit_in_bytes", memory.to_string())?;
            // Present when the kernel accounts swap: memory plus swap, so no swap either.
            if memory_dir.join("memory.memsw.limit_in_bytes").exists() {
                set(memory_dir, "memory.memsw.limit_in_bytes", memory.to_string())?;
            }
            set(pids_dir, "pids.max", pids.to_string())?;
            if quota > 0 {
                set(cpu_dir, "cpu.cfs_period_us", period.to_string())?;
                set(cpu_dir, "cpu.cfs_quota_us", quota.max(1000).to_string())?;
            }
        }
        Ok(())
    }

    /// The files a process writes `0` into to join this cgroup (each hierarchy's
    /// `cgroup.procs`), ready for the child between `fork` and `exec`.
    pub fn join_files(&self) -> Vec<CString> {
        self.dirs.iter().filter_map(|dir| CString::new(dir.join("cgroup.procs").as_os_str().as_bytes()).ok()).collect()
    }

    /// How many times the kernel killed a process here for memory.
    pub fn oom_kills(&self) -> u64 {
        let file = if self.v2 { "memory.events" } else { "memory.oom_control" };
        let text = fs::read_to_string(self.dirs[0].join(file)).unwrap_or_default();
        text.lines().find_map(|line| line.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    }

    /// The memory the cgroup uses now, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        let file = if self.v2 { "memory.current" } else { "memory.usage_in_bytes" };
        fs::read_to_string(self.dirs[0].join(file)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }

    /// Kills whatever is left in it and removes it.
    pub fn remove(&self) {
        for dir in &self.dirs {
            empty_and_remove(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_name_their_hierarchies() {
        let v1 = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory";
        assert_eq!(v1_mount(v1, "memory"), Some((PathBuf::from("/sys/fs/cgroup/memory"), "/".to_owned())));
        assert_eq!(v1_mount(v1, "pids"), None);
        let both = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct";
        assert!(v1_mount(both, "cpu").is_some());
        let v2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(v2_mount(v2), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(v2_mount(v1), None);
    }
}
