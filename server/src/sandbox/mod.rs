//! The sandbox every `process` runtime agent runs in: a hosted agent runs whatever its
//! account's messages make the model do, so it must not reach roost, the host or another
//! account's agent.
//!
//! **How.** [bubblewrap](https://github.com/containers/bubblewrap) (`bwrap`, Debian's
//! `bubblewrap`, what Flatpak and Claude Code's sandbox use on Linux) builds each agent's
//! sandbox, rather than roost's own namespace code: it is small, audited, packaged
//! everywhere, and does the fiddly parts (user-namespace id maps, a fresh root, `/proc` of
//! the new PID namespace, dropping every capability, `no_new_privs`) in one place roost
//! does not have to maintain. Each agent gets:
//!
//! - new user, PID, mount, IPC, UTS, network and cgroup namespaces, no capabilities,
//!   `no_new_privs`, no further user namespaces, its own session (no terminal to inject
//!   into), and [`seccomp`]'s filter against the usual escape calls;
//! - a root with the system directories (`/usr`, the `/lib` and `/bin` links, a few files
//!   of `/etc`: certificates, time zone, resolver and loader settings, never `shadow` or
//!   keys), the runtime's own install directories and `<data-dir>/runtimes` read-only; its
//!   workspace read-write at its own path (its `HOME` and working directory); a private
//!   `/tmp` of `tmp_mb`; a `passwd` naming it `agent` (uid 1000 inside, mapped to roost's
//!   user outside); nothing else: not roost's data directory, not other workspaces, not
//!   `/root` or `/home`;
//! - a network with nothing in it but loopback. [`relay`] (roost's own binary, the
//!   sandbox's first process) carries `127.0.0.1:7300` to roost's model gateway and OTLP
//!   ingest and `127.0.0.1:7301` to the agent's [`egress`] proxy through Unix sockets, and
//!   exposes the runtime's `/ready` and `/turn` to roost the same way: roost's listener is
//!   not in reach, and roost reaches the agent without a port on the host;
//! - cgroup limits ([`cgroups`]): memory, CPU, processes, from its catalogue entry.
//!
//! A bare command name (`python3`) is found in the sandbox's `PATH` (`/usr/local/bin`,
//! `/usr/bin`, `/bin`), so a runtime runs on the system's interpreter, not one under a
//! home directory the sandbox hides. An absolute command is bound read-only with its
//! install directory (the directory above its `bin/`, and that of the file it links to):
//! a virtualenv and the Python it was made from.
//!
//! **Modes.** `--runtime-sandbox required` (the default): when the host cannot sandbox
//! (no `bwrap`, namespaces refused, no cgroups), process agents fail to boot with a status
//! detail that says what to install or set, and `/api/health`, the health page and
//! `roost status` say "sandbox unavailable: …". Nothing runs unconfined unless the
//! operator starts roost with `--runtime-sandbox off` (a warning at start). `echo` and
//! `assistant` agents run inside roost and are not affected.

pub mod agent_socket;
pub mod cgroups;
pub mod egress;
mod events;
pub mod relay;
pub mod seccomp;

use std::{
    os::fd::{AsRawFd as _, OwnedFd},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use tokio::process::Command;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use cgroups::{AgentCgroup, Cgroups};
pub use egress::EgressPolicy;

use crate::telemetry::Telemetry;

/// Where the runtime finds roost's model gateway and OTLP ingest inside its sandbox.
pub const INSIDE_GATEWAY: &str = "127.0.0.1:7300";
/// Where the runtime finds its egress proxy inside its sandbox.
pub const INSIDE_PROXY: &str = "127.0.0.1:7301";
/// The port a sandboxed runtime serves `/ready` and `/turn` on (`$PORT`).
pub const RUNTIME_PORT: u16 = 8080;
/// The uid and gid the runtime has inside (mapped to roost's own outside).
const AGENT_ID: u32 = 1000;
/// Where the per-agent socket directory is inside.
const INSIDE_DIR: &str = "/run/roost/agent";
/// Where roost's binary (the relay) is inside.
const INSIDE_RELAY: &str = "/run/roost/roost";
/// Where the gateway socket is inside.
const INSIDE_GATEWAY_SOCKET: &str = "/run/roost/gateway.sock";
/// The sandbox's `PATH`.
const INSIDE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Files of `/etc` a runtime needs (TLS roots, time zone, name service and loader
/// settings, `alternatives` links of `/usr/bin`); the rest of `/etc` is not there.
const ETC_FILES: &[&str] = &[
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/ssl",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/resolv.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/debian_version",
];

/// `--runtime-sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SandboxMode {
    /// Every process agent runs sandboxed; none runs when the host cannot sandbox.
    #[default]
    Required,
    /// Process agents run unconfined, as roost's own user (a warning at start).
    Off,
}

/// The sandbox's settings.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// `--runtime-sandbox`.
    pub mode: SandboxMode,
    /// `--egress-allow`, `--egress-deny`, `--egress-default`.
    pub egress: EgressPolicy,
    /// `--sandbox-bwrap`: bubblewrap's path; `bwrap` on `PATH` by default.
    pub bwrap: Option<PathBuf>,
    /// The roost binary the relay runs from; this process's own executable by default
    /// (tests that run roost inside a test binary name the `roost` binary).
    pub relay_exe: Option<PathBuf>,
}

/// What one agent may use (its catalogue entry's, with roost's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Memory, its `/tmp` included, in MiB (`memory_mb`).
    pub memory_mb: u64,
    /// CPU, in cores (`cpus`).
    pub cpus: f64,
    /// Processes and threads (`max_processes`).
    pub max_processes: u32,
    /// Its private `/tmp`, in MiB (`tmp_mb`).
    pub tmp_mb: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_mb: 1024, cpus: 1.0, max_processes: 256, tmp_mb: 128 }
    }
}

/// Whether and how this host sandboxes process agents, found once at start.
#[derive(Clone)]
pub enum Sandbox {
    /// `--runtime-sandbox off`.
    Off,
    /// Ready to sandbox.
    Ready(Arc<Host>),
    /// Required, but this host cannot: why, and what to do.
    Unavailable(Arc<str>),
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Sandbox {
    /// Looks at what this host offers. `data_dir` holds the agents' socket directories;
    /// `telemetry` gets each agent's egress connections (as spans of its session).
    pub fn probe(config: &SandboxConfig, data_dir: &Path, telemetry: Option<Arc<Telemetry>>) -> Self {
        if config.mode == SandboxMode::Off {
            warn!(
                "--runtime-sandbox off: process agents run unconfined, as roost's own user, beside its data \
                 directory and network"
            );
            return Self::Off;
        }
        match Host::probe(config, data_dir, telemetry) {
            Ok(host) => {
                info!(sandbox = %host.describe(), "process agents run sandboxed");
                Self::Ready(Arc::new(host))
            }
            Err(why) => {
                warn!(reason = %why, "sandbox unavailable: process agents will not boot");
                Self::Unavailable(why.into())
            }
        }
    }

    /// One line for health and status: what confines agents, or why nothing can.
    pub fn describe(&self) -> String {
        match self {
            Self::Off => "off (--runtime-sandbox off): process agents run unconfined".to_owned(),
            Self::Ready(host) => host.describe(),
            Self::Unavailable(why) => format!("sandbox unavailable: {why}"),
        }
    }

    /// The Unix socket serving roost's model gateway and OTLP ingest to sandboxes, bound
    /// at start so runtimes booted before the server accepts queue in its backlog; taken
    /// once, by the server.
    pub fn take_gateway_listener(&self) -> Option<(std::os::unix::net::UnixListener, PathBuf)> {
        match self {
            Self::Ready(host) => host.gateway.lock().ok()?.take().map(|l| (l, host.gateway_path.clone())),
            _ => None,
        }
    }

    /// Removes this installation's empty cgroups (at shutdown, after every agent stopped).
    pub fn shutdown(&self) {
        if let Self::Ready(host) = self {
            host.cgroups.remove_empty();
        }
    }
}

/// A host that can sandbox: what every agent's sandbox is made of.
pub struct Host {
    bwrap: PathBuf,
    version: String,
    cgroups: Cgroups,
    relay: PathBuf,
    /// `<data-dir>/sandbox`: the gateway socket and one directory per running agent.
    dir: PathBuf,
    gateway_path: PathBuf,
    gateway: Mutex<Option<std::os::unix::net::UnixListener>>,
    /// bubblewrap's arguments for the system directories.
    system: Vec<String>,
    egress: Arc<EgressPolicy>,
    telemetry: Option<Arc<Telemetry>>,
}

impl Host {
    fn probe(config: &SandboxConfig, data_dir: &Path, telemetry: Option<Arc<Telemetry>>) -> Result<Self, String> {
        if cfg!(not(target_os = "linux")) || seccomp::program().is_empty() {
            return Err("the sandbox needs Linux on x86-64 or aarch64; start roost with --runtime-sandbox off to run \
                        process agents unconfined"
                .to_owned());
        }
        let bwrap = match &config.bwrap {
            Some(path) if path.is_file() => path.clone(),
            Some(path) => return Err(format!("bubblewrap is not at {} (--sandbox-bwrap)", path.display())),
            None => find_on_path("bwrap").ok_or(
                "bubblewrap is not installed (no `bwrap` on PATH): install the `bubblewrap` package (Debian and \
                 Ubuntu: apt-get install bubblewrap), or start roost with --runtime-sandbox off",
            )?,
        };
        let relay = match &config.relay_exe {
            Some(path) => path.clone(),
            None => std::env::current_exe().map_err(|e| format!("cannot find roost's own executable: {e}"))?,
        };
        let dir = data_dir.join("sandbox");
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        set_owner_only(&dir).map_err(|e| format!("cannot restrict {}: {e}", dir.display()))?;
        let installation = crate::runtimes::orphans::installation_id(data_dir)
            .map_err(|e| format!("cannot read the installation id: {e}"))?;
        let cgroups =
            Cgroups::probe(&installation).map_err(|why| format!("{why}; or start roost with --runtime-sandbox off"))?;
        let system = system_binds();
        let version = std::process::Command::new(&bwrap)
            .arg("--version")
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default();
        // One real sandbox, the way agents get theirs: namespaces refused show here.
        let check = std::process::Command::new(&bwrap)
            .args(base_args())
            .args(&system)
            .args(["--ro-bind", &relay.display().to_string(), INSIDE_RELAY, INSIDE_RELAY, "--version"])
            .env_clear()
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
        if !check.status.success() {
            let stderr = String::from_utf8_lossy(&check.stderr).trim().to_owned();
            return Err(format!(
                "bubblewrap cannot create a sandbox here ({stderr}): allow unprivileged user namespaces \
                 (sysctl kernel.unprivileged_userns_clone=1, and on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), \
                 or start roost with --runtime-sandbox off"
            ));
        }
        let gateway_path = dir.join("gateway.sock");
        let _ = std::fs::remove_file(&gateway_path);
        let gateway = std::os::unix::net::UnixListener::bind(&gateway_path)
            .map_err(|e| format!("cannot listen on {}: {e}", gateway_path.display()))?;
        Ok(Self {
            bwrap,
            version,
            cgroups,
            relay,
            dir,
            gateway_path,
            gateway: Mutex::new(Some(gateway)),
            system,
            egress: Arc::new(config.egress.clone()),
            telemetry,
        })
    }

    fn describe(&self) -> String {
        format!("{} with {}, seccomp, egress proxy", self.version, self.cgroups.describe())
    }

    /// Makes an agent's sandbox: the command that starts its runtime in it (to spawn once,
    /// with the runtime's environment added), and what lives as long as that runtime (its
    /// cgroup, egress proxy and socket directory).
    pub fn confine(&self, agent: Agent<'_>) -> Result<(Command, Confined), String> {
        let agent_dir = self.dir.join(agent.instance_id);
        let _ = std::fs::remove_dir_all(&agent_dir);
        std::fs::create_dir_all(&agent_dir).map_err(|e| format!("cannot create {}: {e}", agent_dir.display()))?;
        set_owner_only(&agent_dir).map_err(|e| format!("cannot restrict {}: {e}", agent_dir.display()))?;
        let agent_socket = agent_dir.join("agent.sock");
        if agent_socket.as_os_str().len() >= 100 {
            return Err(format!(
                "the agent's socket path {} is too long for a Unix socket; use a shorter --data-dir",
                agent_socket.display()
            ));
        }
        let workspace = agent.workspace.display().to_string();
        std::fs::write(
            agent_dir.join("passwd"),
            format!("root:x:0:0:root:/root:/bin/sh\nagent:x:{AGENT_ID}:{AGENT_ID}:roost agent:{workspace}:/bin/sh\n"),
        )
        .and_then(|()| std::fs::write(agent_dir.join("group"), format!("root:x:0:\nagent:x:{AGENT_ID}:\n")))
        .map_err(|e| format!("cannot write the agent's passwd: {e}"))?;

        // Its egress proxy, listening before the runtime starts.
        let egress_listener = tokio::net::UnixListener::bind(agent_dir.join("egress.sock"))
            .map_err(|e| format!("cannot start the agent's egress proxy: {e}"))?;
        let stop = CancellationToken::new();
        let on_event = events::recorder(self.telemetry.clone(), agent.instance_id, agent.runtime_id);
        tokio::spawn(egress::serve(egress_listener, self.egress.clone(), on_event, stop.clone()));
        let stop_egress = stop.clone().drop_guard();

        let cgroup = self
            .cgroups
            .create(
                agent.instance_id,
                &cgroups::Limits {
                    memory_mb: agent.limits.memory_mb,
                    cpus: agent.limits.cpus,
                    max_processes: agent.limits.max_processes,
                },
            )
            .map_err(|e| format!("cannot create the agent's cgroup: {e}"))?;
        let filter = seccomp_fd().map_err(|e| format!("cannot prepare the seccomp filter: {e}"))?;

        let mut args: Vec<String> = base_args().iter().map(|a| (*a).to_owned()).collect();
        args.extend(self.system.iter().cloned());
        let tmp_bytes = agent.limits.tmp_mb.max(1).saturating_mul(1024 * 1024).to_string();
        args.extend(["--size".into(), tmp_bytes.clone(), "--tmpfs".into(), "/tmp".into()]);
        args.extend(["--size".into(), tmp_bytes, "--tmpfs".into(), "/dev/shm".into()]);
        let mut ro =
            |path: &Path| args.extend(["--ro-bind".into(), path.display().to_string(), path.display().to_string()]);
        ro(agent.runtimes_dir);
        for root in install_roots(agent.argv, agent.data_dir) {
            ro(&root);
        }
        for dir in agent.read_only.iter().filter(|d| !d.starts_with(agent.runtimes_dir)) {
            ro(dir);
        }
        args.extend(["--bind".into(), workspace.clone(), workspace.clone(), "--chdir".into(), workspace.clone()]);
        args.extend(["--bind".into(), agent_dir.display().to_string(), INSIDE_DIR.into()]);
        args.extend(["--bind".into(), self.gateway_path.display().to_string(), INSIDE_GATEWAY_SOCKET.into()]);
        args.extend(["--ro-bind".into(), self.relay.display().to_string(), INSIDE_RELAY.into()]);
        args.extend(["--ro-bind".into(), agent_dir.join("passwd").display().to_string(), "/etc/passwd".into()]);
        args.extend(["--ro-bind".into(), agent_dir.join("group").display().to_string(), "/etc/group".into()]);
        args.extend(["--uid".into(), AGENT_ID.to_string(), "--gid".into(), AGENT_ID.to_string()]);
        args.extend(["--hostname".into(), "agent".into()]);
        // Last of the mounts: the root itself (bubblewrap's tmpfs) is read-only too.
        args.extend(["--remount-ro".into(), "/".into()]);
        args.extend(["--seccomp".into(), filter.as_raw_fd().to_string()]);
        args.extend([
            INSIDE_RELAY.into(),
            "sandbox-relay".into(),
            "--forward".into(),
            format!("{INSIDE_GATEWAY}={INSIDE_GATEWAY_SOCKET}"),
            "--forward".into(),
            format!("{INSIDE_PROXY}={INSIDE_DIR}/egress.sock"),
            "--expose".into(),
            format!("{INSIDE_DIR}/agent.sock=127.0.0.1:{RUNTIME_PORT}"),
            "--".into(),
        ]);
        args.extend(agent.argv.iter().cloned());

        let mut command = Command::new(&self.bwrap);
        command.args(&args).env_clear().current_dir(agent.workspace);
        let proxy = format!("http://{INSIDE_PROXY}");
        command.envs([
            ("PATH", INSIDE_PATH),
            ("LANG", "C.UTF-8"),
            ("USER", "agent"),
            ("LOGNAME", "agent"),
            ("TMPDIR", "/tmp"),
            ("ROOST_SANDBOX", "bubblewrap"),
            ("HTTP_PROXY", &proxy),
            ("HTTPS_PROXY", &proxy),
            ("ALL_PROXY", &proxy),
            ("http_proxy", &proxy),
            ("https_proxy", &proxy),
            ("all_proxy", &proxy),
            // roost's gateway is on loopback inside: never through the proxy.
            ("NO_PROXY", "127.0.0.1,localhost,::1"),
            ("no_proxy", "127.0.0.1,localhost,::1"),
        ]);
        crate::runtimes::pre_exec::enter_sandbox(&mut command, cgroup.join_files(), Some(filter.as_raw_fd()));
        let confined = Confined { agent_socket, filter: Some(filter), cgroup, _stop_egress: stop_egress, agent_dir };
        Ok((command, confined))
    }
}

/// What [`Host::confine`] needs of an agent.
pub struct Agent<'a> {
    /// The agent.
    pub instance_id: &'a str,
    /// Its runtime's catalogue id.
    pub runtime_id: &'a str,
    /// Its runtime's command, `{runtimes_dir}` filled in.
    pub argv: &'a [String],
    /// Its workspace.
    pub workspace: &'a Path,
    /// `<data-dir>/runtimes`.
    pub runtimes_dir: &'a Path,
    /// roost's data directory (never bound into a sandbox).
    pub data_dir: &'a Path,
    /// Directories it reads besides its command's (a packaged runtime's install).
    pub read_only: &'a [PathBuf],
    /// Its limits.
    pub limits: Limits,
}

/// An agent's sandbox, from the command that starts it until its runtime has ended.
pub struct Confined {
    /// Where roost reaches the runtime's `/ready` and `/turn`.
    pub agent_socket: PathBuf,
    filter: Option<OwnedFd>,
    cgroup: AgentCgroup,
    _stop_egress: tokio_util::sync::DropGuard,
    agent_dir: PathBuf,
}

impl Confined {
    /// Call once the command was spawned: bubblewrap has its own copy of the filter.
    pub fn spawned(&mut self) {
        self.filter = None;
    }

    /// Call once the runtime has ended: kills what is left, removes its cgroup and socket
    /// directory, stops its egress proxy; says so if the kernel killed it for memory.
    pub fn ended(self, limits: &Limits) -> Option<String> {
        let killed_for_memory = self.cgroup.oom_kills() > 0;
        self.cgroup.remove();
        let _ = std::fs::remove_dir_all(&self.agent_dir);
        killed_for_memory.then(|| {
            format!(
                "runtime process killed for memory: it reached its limit of {} MiB (the runtime's memory_mb)",
                limits.memory_mb
            )
        })
    }
}

/// What every sandbox starts with: its namespaces and privileges.
fn base_args() -> &'static [&'static str] {
    &[
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
}

/// bubblewrap's arguments for the host's system directories: `/usr` read-only, the
/// top-level links into it (or the directories, where the host has them as directories),
/// and [`ETC_FILES`].
fn system_binds() -> Vec<String> {
    let mut args: Vec<String> = vec!["--ro-bind".into(), "/usr".into(), "/usr".into()];
    for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        match std::fs::read_link(dir) {
            Ok(target) => args.extend(["--symlink".into(), target.display().to_string(), dir.into()]),
            Err(_) if Path::new(dir).is_dir() => args.extend(["--ro-bind".into(), dir.into(), dir.into()]),
            Err(_) => {}
        }
    }
    for file in ETC_FILES {
        args.extend(["--ro-bind-try".into(), (*file).into(), (*file).into()]);
    }
    args
}

/// The directories an absolute command needs besides the system's: its install directory
/// (above `bin/`, else its own directory) and that of the file it links to, for each
/// command word that is an absolute path to something outside the system directories.
/// Never `/`, a home directory root, `/tmp`, roost's data directory or anything holding it.
fn install_roots(argv: &[String], data_dir: &Path) -> Vec<PathBuf> {
    let system = |p: &Path| ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"].iter().any(|s| p.starts_with(s));
    let data_dir = data_dir.canonicalize().unwrap_or_else(|_| data_dir.to_path_buf());
    let unsafe_root = |p: &Path| {
        p.parent().is_none()
            || ["/root", "/home", "/tmp", "/var", "/run", "/proc", "/sys", "/dev"].iter().any(|s| Path::new(s) == p)
            || data_dir.starts_with(p)
            || p.starts_with(&data_dir)
    };
    let mut roots: Vec<PathBuf> = Vec::new();
    let mut add = |path: PathBuf| {
        if system(&path) || roots.iter().any(|r| path.starts_with(r)) {
            return;
        }
        roots.retain(|r| !r.starts_with(&path));
        roots.push(path);
    };
    for (i, word) in argv.iter().enumerate() {
        let path = Path::new(word);
        if !path.is_absolute() || !path.exists() {
            continue;
        }
        let mut candidates = vec![path.to_path_buf()];
        if let Ok(real) = path.canonicalize()
            && real != path
        {
            candidates.push(real);
        }
        for candidate in candidates {
            let parent = candidate.parent().map(Path::to_path_buf).unwrap_or_default();
            // The command's install directory; a script or file argument's own directory.
            let root = if i == 0 && parent.file_name().is_some_and(|n| n == "bin") {
                parent.parent().map(Path::to_path_buf).unwrap_or(parent)
            } else {
                parent
            };
            if candidate.starts_with(&data_dir) {
                continue;
            }
            if unsafe_root(&root) { add(candidate) } else { add(root) }
        }
    }
    roots
}

/// A fresh descriptor holding the seccomp filter for bubblewrap to read.
fn seccomp_fd() -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, memfd_create};
    let fd = memfd_create("roost-seccomp", MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, &seccomp::program())?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

fn set_owner_only(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The first `name` on `PATH` that is a file.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_roots_bind_a_venv_and_its_python_but_never_a_home_or_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("bin/python"), "").unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("runtimes")).unwrap();
        std::fs::write(data.join("runtimes/agent.py"), "").unwrap();
        let argv = vec![
            venv.join("bin/python").display().to_string(),
            data.join("runtimes/agent.py").display().to_string(),
            "/usr/bin/env".to_owned(),
            "-c".to_owned(),
        ];
        let roots = install_roots(&argv, &data);
        assert_eq!(roots, vec![venv.canonicalize().unwrap()]);
        // A file straight under /tmp is bound alone, never /tmp.
        let argv = vec!["python3".to_owned(), dir.path().display().to_string()];
        assert!(install_roots(&argv, &data).iter().all(|r| r != Path::new("/tmp")));
    }
}
