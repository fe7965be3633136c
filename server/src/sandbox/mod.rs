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
//!   `/tmp` of `tmp_mb`; a `passwd` naming it `agent` (uid 1000 inside); nothing else: not
//!   roost's data directory, not other workspaces, not `/root` or `/home`;
//! - a host uid of its own, never root's, and its own disk as its workspace, when roost
//!   runs as root ([`enter`], [`disk`]); roost's own uid otherwise;
//! - a network with nothing in it but loopback. [`relay`] (roost's own binary, the
//!   sandbox's first process) carries `127.0.0.1:7300` to the agent's own socket for
//!   roost's model gateway and OTLP ingest ([`agent_socket`]) and `127.0.0.1:7301` to its
//!   [`egress`] proxy, and exposes the runtime's `/ready` and `/turn` to roost on a socket
//!   roost made: roost's listener is not in reach, and roost reaches the agent without a
//!   port on the host;
//! - cgroup limits ([`cgroups`]): memory, CPU, processes, from its catalogue entry.
//!
//! Everything an agent can write is the attacker's: roost never writes, reads or deletes
//! through a path the agent could have changed. The sockets of each boot live in a
//! directory only roost can write (`<data-dir>/sandbox/<id>.<random>/`); the runtime's
//! configuration is written by the relay, inside, as the agent ([`relay::write_files`]);
//! trees are deleted without recursion or links followed ([`tree`]).
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
pub mod disk;
pub mod egress;
pub mod enter;
mod events;
pub mod relay;
pub mod seccomp;
pub mod tree;

use std::{
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    sync::Arc,
};

use tokio::process::Command;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use cgroups::{AgentCgroup, Cgroups};
pub use disk::UidRange;
pub use egress::EgressPolicy;
pub use relay::WorkspaceFile;

use crate::telemetry::Telemetry;

/// Where the runtime finds roost's model gateway and OTLP ingest inside its sandbox.
pub const INSIDE_GATEWAY: &str = "127.0.0.1:7300";
/// Where the runtime finds its egress proxy inside its sandbox.
pub const INSIDE_PROXY: &str = "127.0.0.1:7301";
/// The port a sandboxed runtime serves `/ready` and `/turn` on (`$PORT`).
pub const RUNTIME_PORT: u16 = 8080;
/// The uid and gid the runtime has inside (mapped to roost's own outside).
const AGENT_ID: u32 = 1000;
/// Where roost's binary (the relay) is inside.
const INSIDE_RELAY: &str = "/run/roost/roost";
/// Where the agent's gateway socket is inside.
const INSIDE_GATEWAY_SOCKET: &str = "/run/roost/gateway.sock";
/// Where the agent's egress proxy socket is inside.
const INSIDE_EGRESS_SOCKET: &str = "/run/roost/egress.sock";
/// Where the relay finds the files it writes into the workspace before the runtime starts.
const INSIDE_FILES: &str = "/run/roost/files.json";
/// Where a root roost's launcher stages what a sandbox binds from the host, in the
/// sandbox's own mount namespace ([`enter`]): an empty directory on the host, made at start.
const STAGE: &str = "/run/roost-sandbox";
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
    /// `--agent-uids`: the host uids agents run as when roost runs as root.
    pub uids: UidRange,
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
    /// Its workspace's disk, in MiB (`disk_mb`), when roost caps disks.
    pub disk_mb: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_mb: 1024, cpus: 1.0, max_processes: 256, tmp_mb: 128, disk_mb: 1024 }
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

    /// Serves roost's model gateway and OTLP ingest (`app`, the access check included) to
    /// sandboxed runtimes, each on its own agent's socket. Agents booted before this call
    /// wait in their socket's backlog.
    pub fn serve_gateway(&self, app: axum::Router) {
        if let Self::Ready(host) = self {
            host.serve_gateway(app);
        }
    }

    /// Removes this installation's empty cgroups (at shutdown, after every agent stopped).
    pub fn shutdown(&self) {
        if let Self::Ready(host) = self {
            host.cgroups.remove_empty();
        }
    }
}

/// Who an agent is on the host.
enum AgentUsers {
    /// roost is root: each agent gets its own unprivileged uid from `--agent-uids`, owning
    /// a disk image that caps its workspace ([`disk`]); [`enter`] drops to that uid.
    Separate(disk::DiskTools),
    /// roost is not root: agents run as roost's own (unprivileged) uid, in plain-directory
    /// workspaces it cannot cap.
    Own { uid: u32, gid: u32 },
}

/// A host that can sandbox: what every agent's sandbox is made of.
pub struct Host {
    bwrap: PathBuf,
    version: String,
    cgroups: Cgroups,
    relay: PathBuf,
    /// `<data-dir>/sandbox`: one directory per running agent, roost's alone.
    dir: PathBuf,
    /// bubblewrap's arguments for the system directories.
    system: Vec<String>,
    egress: Arc<EgressPolicy>,
    telemetry: Option<Arc<Telemetry>>,
    users: AgentUsers,
    /// roost's router, once the server has built it: each agent's gateway socket serves it.
    app: tokio::sync::watch::Sender<Option<axum::Router>>,
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
        sweep(&dir);
        let installation = crate::runtimes::orphans::installation_id(data_dir)
            .map_err(|e| format!("cannot read the installation id: {e}"))?;
        let cgroups =
            Cgroups::probe(&installation).map_err(|why| format!("{why}; or start roost with --runtime-sandbox off"))?;
        let users = if rustix::process::geteuid().is_root() {
            let tools = disk::DiskTools::probe(config.uids)
                .map_err(|why| format!("{why}; or start roost with --runtime-sandbox off"))?;
            std::fs::create_dir_all(STAGE).map_err(|e| format!("cannot create {STAGE}: {e}"))?;
            AgentUsers::Separate(tools)
        } else {
            AgentUsers::Own { uid: rustix::process::getuid().as_raw(), gid: rustix::process::getgid().as_raw() }
        };
        let system = system_binds();
        let version = std::process::Command::new(&bwrap)
            .arg("--version")
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default();
        let host = Self {
            bwrap,
            version,
            cgroups,
            relay,
            dir,
            system,
            egress: Arc::new(config.egress.clone()),
            telemetry,
            users,
            app: tokio::sync::watch::channel(None).0,
        };
        host.check()?;
        Ok(host)
    }

    /// One real sandbox, made the way agents get theirs (as the first uid of the range when
    /// roost is root): refused namespaces or a uid that cannot make them show here.
    fn check(&self) -> Result<(), String> {
        let mut bwrap: Vec<String> = base_args().iter().map(|a| (*a).to_owned()).collect();
        bwrap.extend(self.system.iter().cloned());
        let mut command = match &self.users {
            AgentUsers::Separate(tools) => {
                let first = tools.uids().first.to_string();
                let mut command = std::process::Command::new(&self.relay);
                command.args(["sandbox-enter", "--uid", &first, "--gid", &first]);
                command.args(["--parent", &std::process::id().to_string(), "--stage", STAGE]);
                command.arg("--bind").arg(format!("{}=relay", self.relay.display())).arg("--").arg(&self.bwrap);
                let staged = Path::new(STAGE).join("relay").display().to_string();
                bwrap.extend(["--ro-bind".into(), staged, INSIDE_RELAY.into()]);
                command
            }
            AgentUsers::Own { .. } => {
                bwrap.extend(["--ro-bind".into(), self.relay.display().to_string(), INSIDE_RELAY.into()]);
                std::process::Command::new(&self.bwrap)
            }
        };
        bwrap.extend([INSIDE_RELAY.into(), "--version".into()]);
        let check = command
            .args(bwrap)
            .env_clear()
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bwrap.display()))?;
        if check.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&check.stderr).trim().to_owned();
        Err(match &self.users {
            AgentUsers::Separate(tools) => format!(
                "bubblewrap cannot create a sandbox as the agents' uid {} ({stderr}): allow unprivileged user \
                 namespaces (sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0; on Ubuntu \
                 kernel.apparmor_restrict_unprivileged_userns=0), or start roost with --runtime-sandbox off",
                tools.uids().first
            ),
            AgentUsers::Own { .. } => format!(
                "bubblewrap cannot create a sandbox here ({stderr}): allow unprivileged user namespaces \
                 (sysctl kernel.unprivileged_userns_clone=1, and on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), \
                 or start roost with --runtime-sandbox off"
            ),
        })
    }

    fn describe(&self) -> String {
        let users = match &self.users {
            AgentUsers::Separate(tools) => format!("agents as uids from {}, disks capped", tools.uids()),
            AgentUsers::Own { uid, .. } => format!(
                "agents as roost's own uid {uid}, disks not capped (roost is not root: run it as root for a uid and a \
                 capped disk per agent)"
            ),
        };
        format!("{} with {}, seccomp, egress proxy; {users}", self.version, self.cgroups.describe())
    }

    /// Whether agents' disks are capped (roost runs as root).
    pub fn caps_disks(&self) -> bool {
        matches!(self.users, AgentUsers::Separate(_))
    }

    /// Serves `app` (roost's router, access check included) on every agent's gateway
    /// socket, those already made and those to come.
    pub fn serve_gateway(&self, app: axum::Router) {
        self.app.send_replace(Some(app));
    }

    /// The agent's host uid and gid, and its disk image when roost caps disks: made (or
    /// grown) here, so call it off the async threads (`mkfs` takes tens of milliseconds).
    pub fn agent_user(&self, image: &Path, disk_mb: u64) -> Result<AgentUser, String> {
        match &self.users {
            AgentUsers::Separate(tools) => {
                let uid = tools.ensure(image, disk_mb)?;
                Ok(AgentUser { uid, gid: uid, image: Some(image.to_path_buf()) })
            }
            AgentUsers::Own { uid, gid } => Ok(AgentUser { uid: *uid, gid: *gid, image: None }),
        }
    }

    /// Makes an agent's sandbox for `user` ([`Host::agent_user`]): the command that starts
    /// its runtime in it (to spawn once, with the runtime's environment added), and what
    /// lives as long as that runtime (its cgroup, egress proxy, gateway socket and socket
    /// directory).
    pub fn confine(&self, agent: Agent<'_>, user: &AgentUser) -> Result<(Command, Confined), String> {
        // A directory of its own for this boot (`<id>.<random>`: a new one each boot, so
        // nothing an earlier boot left can be in the way), which only roost can write: the
        // sockets roost serves the agent and the one roost reaches it through.
        let boot_dir = self.dir.join(format!("{}.{}", agent.instance_id, crate::ids::random_base32(6).to_lowercase()));
        std::fs::create_dir(&boot_dir).map_err(|e| format!("cannot create {}: {e}", boot_dir.display()))?;
        let stop = CancellationToken::new();
        let mut confined = Confined {
            agent_socket: boot_dir.join("agent.sock"),
            passed: Vec::new(),
            cgroup: None,
            _stop: stop.clone().drop_guard(),
            boot_dir,
        };
        match self.confine_in(&agent, user, &mut confined, &stop) {
            Ok(command) => Ok((command, confined)),
            Err(why) => {
                confined.ended(&agent.limits);
                Err(why)
            }
        }
    }

    fn confine_in(
        &self,
        agent: &Agent<'_>,
        user: &AgentUser,
        confined: &mut Confined,
        stop: &CancellationToken,
    ) -> Result<Command, String> {
        let (uid, gid, image) = (user.uid, user.gid, user.image.as_deref());
        set_owner_only(&confined.boot_dir)
            .map_err(|e| format!("cannot restrict {}: {e}", confined.boot_dir.display()))?;
        if confined.agent_socket.as_os_str().len() >= 100 {
            return Err(format!(
                "the agent's socket path {} is too long for a Unix socket; use a shorter --data-dir",
                confined.agent_socket.display()
            ));
        }
        let agent_listener = std::os::unix::net::UnixListener::bind(&confined.agent_socket)
            .map_err(|e| format!("cannot make the agent's socket: {e}"))?;

        // Its egress proxy and its own gateway socket, listening before the runtime starts,
        // owned by its uid so it can connect.
        let egress_path = confined.boot_dir.join("egress.sock");
        let egress_listener = tokio::net::UnixListener::bind(&egress_path)
            .map_err(|e| format!("cannot start the agent's egress proxy: {e}"))?;
        let on_event = events::recorder(self.telemetry.clone(), agent.instance_id, agent.runtime_id);
        tokio::spawn(egress::serve(egress_listener, self.egress.clone(), on_event, stop.clone()));
        let gateway_path = confined.boot_dir.join("gateway.sock");
        let gateway_listener = std::os::unix::net::UnixListener::bind(&gateway_path)
            .map_err(|e| format!("cannot make the agent's gateway socket: {e}"))?;
        tokio::spawn(agent_socket::serve(
            gateway_listener,
            agent.instance_id.into(),
            self.app.subscribe(),
            stop.clone(),
        ));
        for socket in [&egress_path, &gateway_path] {
            chown(socket, uid, gid).map_err(|e| format!("cannot give the agent its sockets: {e}"))?;
        }

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
        let join = cgroup.join_files();
        confined.cgroup = Some(cgroup);

        // What bubblewrap reads from a descriptor (the filter, the data it copies in) and what
        // the relay takes over (the socket roost reaches the runtime through): made here,
        // kept open across the spawn (and the launcher's `exec`), and nowhere on disk.
        let mut passed: Vec<OwnedFd> = Vec::new();
        let mut pass = |fd: OwnedFd| -> String {
            let number = fd_arg(&fd);
            passed.push(fd);
            number
        };
        let seccomp = pass(seccomp_fd().map_err(|e| format!("cannot prepare the seccomp filter: {e}"))?);
        let workspace = agent.workspace.display().to_string();
        let passwd = pass(
            data_fd(&format!(
                "root:x:0:0:root:/root:/bin/sh\nagent:x:{AGENT_ID}:{AGENT_ID}:roost agent:{workspace}:/bin/sh\n"
            ))
            .map_err(|e| format!("cannot write the agent's passwd: {e}"))?,
        );
        let group = pass(
            data_fd(&format!("root:x:0:\nagent:x:{AGENT_ID}:\n"))
                .map_err(|e| format!("cannot write the agent's group: {e}"))?,
        );
        let files = relay::WorkspaceFiles { workspace: agent.workspace.to_path_buf(), files: agent.files.to_vec() };
        let files = serde_json::to_string(&files).map_err(|e| format!("cannot list the runtime's files: {e}"))?;
        let files = pass(data_fd(&files).map_err(|e| format!("cannot pass the runtime's files: {e}"))?);
        let exposed = pass(OwnedFd::from(agent_listener));

        // What it gets of the host: (source, where it is inside, read-only).
        let mut binds: Vec<(PathBuf, String, bool)> = vec![(agent.runtimes_dir.to_path_buf(), String::new(), true)];
        binds.extend(install_roots(agent.argv, agent.data_dir).into_iter().map(|dir| (dir, String::new(), true)));
        binds.extend(
            agent
                .read_only
                .iter()
                .filter(|d| !d.starts_with(agent.runtimes_dir))
                .map(|d| (d.clone(), String::new(), true)),
        );
        for (source, inside, _) in &mut binds {
            *inside = source.display().to_string();
        }
        binds.push((agent.workspace.to_path_buf(), workspace.clone(), false));
        binds.push((gateway_path.clone(), INSIDE_GATEWAY_SOCKET.to_owned(), false));
        binds.push((egress_path.clone(), INSIDE_EGRESS_SOCKET.to_owned(), false));
        binds.push((self.relay.clone(), INSIDE_RELAY.to_owned(), true));

        let mut args: Vec<String> = base_args().iter().map(|a| (*a).to_owned()).collect();
        args.extend(self.system.iter().cloned());
        let tmp_bytes = agent.limits.tmp_mb.max(1).saturating_mul(1024 * 1024).to_string();
        args.extend(["--size".into(), tmp_bytes.clone(), "--tmpfs".into(), "/tmp".into()]);
        args.extend(["--size".into(), tmp_bytes, "--tmpfs".into(), "/dev/shm".into()]);
        let mut staged = Vec::new();
        for (i, (source, inside, read_only)) in binds.iter().enumerate() {
            // A root roost's launcher stages each source where the agent's uid can reach it.
            let from = match &self.users {
                AgentUsers::Separate(_) => {
                    let name = format!("b{i}");
                    staged.push(format!("{}={name}", source.display()));
                    Path::new(STAGE).join(name).display().to_string()
                }
                AgentUsers::Own { .. } => source.display().to_string(),
            };
            args.extend([if *read_only { "--ro-bind" } else { "--bind" }.to_owned(), from, inside.clone()]);
        }
        args.extend(["--chdir".into(), workspace.clone()]);
        args.extend(["--ro-bind-data".into(), passwd, "/etc/passwd".into()]);
        args.extend(["--ro-bind-data".into(), group, "/etc/group".into()]);
        args.extend(["--ro-bind-data".into(), files, INSIDE_FILES.into()]);
        args.extend(["--uid".into(), AGENT_ID.to_string(), "--gid".into(), AGENT_ID.to_string()]);
        args.extend(["--hostname".into(), "agent".into()]);
        // Last of the mounts: the root itself (bubblewrap's tmpfs) is read-only too.
        args.extend(["--remount-ro".into(), "/".into()]);
        args.extend(["--seccomp".into(), seccomp]);
        args.extend([
            INSIDE_RELAY.into(),
            "sandbox-relay".into(),
            "--forward".into(),
            format!("{INSIDE_GATEWAY}={INSIDE_GATEWAY_SOCKET}"),
            "--forward".into(),
            format!("{INSIDE_PROXY}={INSIDE_EGRESS_SOCKET}"),
            "--expose-fd".into(),
            format!("{exposed}=127.0.0.1:{RUNTIME_PORT}"),
            "--files".into(),
            INSIDE_FILES.into(),
            "--".into(),
        ]);
        args.extend(agent.argv.iter().cloned());

        let mut command = match &self.users {
            AgentUsers::Separate(_) => {
                let mut command = Command::new(&self.relay);
                command.args(["sandbox-enter", "--uid", &uid.to_string(), "--gid", &gid.to_string()]);
                command.args(["--parent", &std::process::id().to_string()]);
                if let Some(image) = image {
                    command.arg("--image").arg(image).arg("--workspace").arg(agent.workspace);
                }
                command.arg("--stage").arg(STAGE);
                for bind in &staged {
                    command.arg("--bind").arg(bind);
                }
                command.arg("--").arg(&self.bwrap);
                command
            }
            AgentUsers::Own { .. } => Command::new(&self.bwrap),
        };
        command.args(&args).env_clear().current_dir("/");
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
        let inherit: Vec<i32> = passed.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
        crate::runtimes::pre_exec::enter_sandbox(&mut command, join, inherit);
        confined.passed = passed;
        Ok(command)
    }
}

/// Who an agent runs as on the host, for one boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUser {
    /// Its host uid.
    pub uid: u32,
    /// Its host gid.
    pub gid: u32,
    /// Its disk image, when roost caps disks.
    pub image: Option<PathBuf>,
}

/// What [`Host::confine`] needs of an agent.
pub struct Agent<'a> {
    /// The agent.
    pub instance_id: &'a str,
    /// Its runtime's catalogue id.
    pub runtime_id: &'a str,
    /// Its runtime's command, `{runtimes_dir}` filled in.
    pub argv: &'a [String],
    /// Its workspace: a plain directory, or where its disk is mounted.
    pub workspace: &'a Path,
    /// What the relay writes into the workspace before the runtime starts.
    pub files: &'a [WorkspaceFile],
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
    /// The descriptors bubblewrap inherits, held until the spawn.
    passed: Vec<OwnedFd>,
    cgroup: Option<AgentCgroup>,
    /// Stops its egress proxy and gateway socket when the sandbox is gone.
    _stop: tokio_util::sync::DropGuard,
    boot_dir: PathBuf,
}

impl Confined {
    /// Call once the command was spawned: bubblewrap has its own copies of what it takes.
    pub fn spawned(&mut self) {
        self.passed.clear();
    }

    /// Call once the runtime has ended: kills what is left, removes its cgroup and socket
    /// directory, stops its egress proxy and gateway socket; says so if the kernel killed
    /// it for memory.
    pub fn ended(self, limits: &Limits) -> Option<String> {
        let killed_for_memory = self.cgroup.as_ref().is_some_and(|c| c.oom_kills() > 0);
        if let Some(cgroup) = &self.cgroup {
            cgroup.remove();
        }
        if let Err(err) = tree::remove(&self.boot_dir) {
            warn!(dir = %self.boot_dir.display(), error = %err, "could not remove a sandbox's socket directory; the next start does");
        }
        killed_for_memory.then(|| {
            format!(
                "runtime process killed for memory: it reached its limit of {} MiB (the runtime's memory_mb)",
                limits.memory_mb
            )
        })
    }
}

/// Removes what earlier runs left in `<data-dir>/sandbox` (sockets, and from roost
/// versions that let the agent write there, whatever it made), in the background: no
/// sandbox runs yet, and nothing found there may stop or slow the start.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let stale: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    if stale.is_empty() {
        return;
    }
    std::thread::spawn(move || {
        for path in stale {
            if let Err(err) = tree::remove(&path) {
                warn!(path = %path.display(), error = %err, "could not remove what an earlier run left; the next start tries again");
            }
        }
    });
}

/// `chown` without following a link.
fn chown(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    rustix::fs::chownat(
        rustix::fs::CWD,
        path,
        Some(rustix::process::Uid::from_raw(uid)),
        Some(rustix::process::Gid::from_raw(gid)),
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )?;
    Ok(())
}

/// A descriptor's number, as bubblewrap's argument.
fn fd_arg(fd: &OwnedFd) -> String {
    std::os::fd::AsRawFd::as_raw_fd(fd).to_string()
}

/// A memory file holding `text` (never on disk), for bubblewrap's `--ro-bind-data`.
fn data_fd(text: &str) -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, memfd_create};
    let fd = memfd_create("roost-data", MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
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
