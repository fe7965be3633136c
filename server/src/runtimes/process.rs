//! `process`: each agent is a child process that serves `GET /ready` and `POST /turn` on a
//! port roost assigns (`$PORT`, on 127.0.0.1: of its sandbox, or of the host when
//! unconfined), configured through its environment.
//!
//! - Boot: spawn, then poll `/ready` until it answers 200; exiting first, or not being
//!   ready within the boot timeout, fails the boot with the reason (and its last stderr
//!   lines).
//! - Turns: `POST /turn {"turn_id", "text"}` → `{"reply", "usage"?, "model"?}`; anything
//!   else is "garbage" and fails the turn. When a caller streams the turn, roost asks for
//!   `Accept: text/event-stream, application/json`, and a runtime may answer a stream of
//!   `delta` events and one `done` ([`read_turn_stream`]); the JSON answer stays valid.
//! - Stop: SIGTERM to the process group, SIGKILL after a grace period.
//! - Death: a reaper task waits on the child, so an exit is noticed at once and reported
//!   through [`Machine::died`]. Whatever the runtime started itself is killed with it
//!   (SIGKILL to its process group).
//! - Never two: an agent's next process starts only once its previous one has ended
//!   ([`super::slots`]).
//! - Dying with roost: children are forked from [`super::spawner`]'s thread with a
//!   parent-death signal, and recorded in the store until they end, so a roost killed with
//!   SIGKILL reaps any survivor at its next start ([`super::orphans`]).
//!
//! Each agent works in its own workspace ([`super::workspace`]): its `HOME`, working
//! directory and `ROOST_WORKSPACE`, kept until the agent is destroyed.
//!
//! Each runs in its sandbox ([`crate::sandbox`]) unless the operator turned it off: its
//! command is bubblewrap's, roost reaches `/ready` and `/turn` through the Unix socket the
//! sandbox's relay exposes, and the runtime reaches roost through the relay at
//! `127.0.0.1:7300`. Its environment is then only roost's contract (and `PATH`, `LANG`,
//! the egress proxy). Unconfined, the child inherits roost's environment minus roost's own
//! settings (`ROOST_*`, `SERVICE_API_TOKENS`) and any provider key roost itself was given
//! (`OPENAI_*`, `ANTHROPIC_*`). Either way an agent never sees the database URL, dashboard
//! tokens or keys. Its model comes through roost's model gateway ([`crate::llm`]): the
//! variables the official SDKs read (`OPENAI_BASE_URL`, `OPENAI_API_KEY`,
//! `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`) name the model gateway and this boot's agent token.
//! The agent's own `PROVIDER_API_KEY` and `MESSAGING_BOT_TOKEN` stay in roost: the model gateway
//! puts the key on the agent's calls upstream, and roost runs the Telegram channel itself.

use std::{
    collections::{BTreeMap, VecDeque},
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde::Deserialize;
use tokio::{
    process::{Child, Command},
    sync::watch,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use roost_proto::{ApiError, ErrorReason};

use super::{
    Machine, MachineSpec, TurnInput, TurnOutput,
    orphans::{ChildRecords, Reaped},
    output::{self, Output},
    packaged::{self, ChatApi, Installation, Session},
    slots::{Slot, Slots},
    spawner,
    streaming::{MAX_STREAMED_REPLY, each_event, openai_chunk},
    workspace::Workspaces,
};
use crate::{
    callers::tokens::{AgentToken, AgentTokens},
    sandbox::{self, Confined, Limits, Sandbox},
    store::ChildRecord,
    turn_stream::TurnStream,
};

/// roost's example runtime, written to `<data-dir>/runtimes/` at start-up.
pub const EXAMPLE_AGENT: &str = include_str!("example_agent.py");
/// Its file name there.
pub const EXAMPLE_AGENT_FILE: &str = "example_agent.py";

/// How long a stopped child gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Where process runtimes send their OTLP telemetry and model calls: roost itself, each with
/// its own agent token (`OTEL_EXPORTER_OTLP_HEADERS`, the SDKs' API keys), so what it sends
/// is attributed to it and reaches roost whatever `SERVICE_API_TOKENS` says, with no
/// dashboard token in hand.
#[derive(Debug, Clone)]
pub struct OtlpExport {
    /// roost's base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub endpoint: String,
    /// Issues the runtimes' agent tokens (one per boot).
    pub tokens: AgentTokens,
}

/// Starts process machines.
pub struct ProcessDriver {
    runtimes_dir: PathBuf,
    data_dir: PathBuf,
    workspaces: Workspaces,
    sandbox: Sandbox,
    otlp: OtlpExport,
    boot_timeout: Duration,
    client: reqwest::Client,
    records: ChildRecords,
    slots: Slots,
    /// Where runtimes' output is stored, when roost observes activity.
    telemetry: Option<Arc<crate::telemetry::Telemetry>>,
}

impl ProcessDriver {
    /// A driver whose commands may use `{runtimes_dir}` (`<data_dir>/runtimes`), whose
    /// children work in their agents' `workspaces` inside `sandbox`, send telemetry to
    /// `otlp` and are recorded in `records`, whose boots fail after `boot_timeout` (unless
    /// their runtime sets its own), and whose output is stored in `telemetry` when given.
    pub fn new(
        data_dir: &Path,
        workspaces: Workspaces,
        sandbox: Sandbox,
        otlp: OtlpExport,
        boot_timeout: Duration,
        records: ChildRecords,
        telemetry: Option<Arc<crate::telemetry::Telemetry>>,
    ) -> Self {
        // Children are on loopback: never route to them through a proxy from the environment.
        let client = reqwest::Client::builder().no_proxy().build().unwrap_or_default();
        Self {
            runtimes_dir: data_dir.join("runtimes"),
            data_dir: data_dir.to_path_buf(),
            workspaces,
            sandbox,
            otlp,
            boot_timeout,
            client,
            records,
            slots: Slots::default(),
            telemetry,
        }
    }

    /// The sandbox agents run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The agents' workspaces.
    pub fn workspaces(&self) -> &Workspaces {
        &self.workspaces
    }

    /// Kills the runtime processes an earlier roost of this installation left running, so
    /// none of them runs beside the ones this start boots. Call before any agent boots.
    pub async fn reap_orphans(&self) -> crate::Result<Reaped> {
        self.records.reap().await
    }

    /// Writes the example runtime into the runtimes directory (only when it changed, so a
    /// running copy is not rewritten needlessly).
    pub fn install_example(runtimes_dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(runtimes_dir)?;
        let path = runtimes_dir.join(EXAMPLE_AGENT_FILE);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(EXAMPLE_AGENT) {
            std::fs::write(&path, EXAMPLE_AGENT)?;
        }
        Ok(())
    }

    /// Spawns the agent's process (in its sandbox, unless the sandbox is off) and waits
    /// until it is ready.
    pub async fn start(&self, spec: &MachineSpec, program: Program<'_>) -> Result<Arc<ProcessMachine>, String> {
        if let Sandbox::Unavailable(why) = &self.sandbox {
            return Err(format!("sandbox unavailable: {why}"));
        }
        // Its workspace: its HOME and working directory, kept until it is destroyed.
        let workspace =
            self.workspaces.ensure(&spec.instance_id).map_err(|e| format!("cannot make the agent's workspace: {e}"))?;
        let boot_timeout = spec.runtime.boot_timeout.unwrap_or(self.boot_timeout);
        // The agent's previous process, if any, must be gone first: never two at once.
        let slot = tokio::time::timeout(boot_timeout, self.slots.take(&spec.instance_id))
            .await
            .map_err(|_| "the agent's previous runtime process did not stop".to_owned())?;
        // Where it listens and where it reaches roost: inside its sandbox, the relay's
        // ports; unconfined, a free port of the host and roost's own address.
        let (port, endpoint) = match &self.sandbox {
            Sandbox::Ready(_) => (sandbox::RUNTIME_PORT, format!("http://{}", sandbox::INSIDE_GATEWAY)),
            _ => (free_port().map_err(|e| format!("no free port for the runtime: {e}"))?, self.otlp.endpoint.clone()),
        };
        // This boot's agent token, forgotten when the process ends; a sandboxed runtime's is
        // good on its own socket only.
        let sandboxed = matches!(self.sandbox, Sandbox::Ready(_));
        let token = self.otlp.tokens.issue(spec.identity().sandboxed(sandboxed));
        let (argv, catalogue_env, launch_env, api, read_only, files) = match &program {
            Program::Packaged { installation, background } => {
                let launch = installation.prepare(&packaged::Boot {
                    background: *background,
                    instance_id: &spec.instance_id,
                    brief: &spec.brief,
                    model: &spec.model,
                    workspace: &workspace,
                    gateway_url: &format!("{endpoint}{}/v1", crate::llm::PREFIX),
                    agent_token: token.secret(),
                    port,
                });
                let read_only = vec![installation.dir.clone()];
                (launch.argv, BTreeMap::new(), launch.env, Some(launch.api), read_only, launch.files)
            }
            Program::Command { command, env } => {
                let runtimes_dir = self.runtimes_dir.display().to_string();
                let argv = command.iter().map(|a| a.replace("{runtimes_dir}", &runtimes_dir)).collect();
                (argv, (*env).clone(), BTreeMap::new(), None, Vec::new(), Vec::new())
            }
        };
        if argv.is_empty() {
            return Err("the runtime's command is empty".to_owned());
        }
        let limits = spec.runtime.limits;
        let (mut cmd, target, mut confined, disk) = match &self.sandbox {
            Sandbox::Ready(host) => {
                // Its uid and disk (made on its first boot): `mkfs` is not for async threads.
                let (making, image) = (host.clone(), self.workspaces.image(&spec.instance_id));
                let user = tokio::task::spawn_blocking(move || making.agent_user(&image, limits.disk_mb))
                    .await
                    .map_err(|e| format!("cannot prepare the agent's disk: {e}"))??;
                let (cmd, confined) = host.confine(
                    sandbox::Agent {
                        instance_id: &spec.instance_id,
                        runtime_id: &spec.runtime.id,
                        argv: &argv,
                        workspace: &workspace,
                        files: &files,
                        runtimes_dir: &self.runtimes_dir,
                        data_dir: &self.data_dir,
                        read_only: &read_only,
                        limits,
                    },
                    &user,
                )?;
                let target = Target::Socket(confined.agent_socket.clone());
                (cmd, target, Some(confined), user.image.is_some())
            }
            _ => {
                // Unconfined, the runtime is roost's own user anyway: roost writes its files.
                let at = workspace.clone();
                let written = tokio::task::spawn_blocking(move || sandbox::relay::write_files(&at, &files)).await;
                written
                    .map_err(|e| e.to_string())
                    .and_then(|w| w.map_err(|e| e.to_string()))
                    .map_err(|e| format!("cannot write the runtime's configuration: {e}"))?;
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]).current_dir(&workspace);
                for (name, _) in std::env::vars_os() {
                    let name = name.to_string_lossy();
                    if name.starts_with("ROOST_")
                        || name.starts_with("OPENAI_")
                        || name.starts_with("ANTHROPIC_")
                        || name == "SERVICE_API_TOKENS"
                    {
                        cmd.env_remove(name.as_ref());
                    }
                }
                (cmd, Target::Port(port), None, false)
            }
        };
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        let home = workspace.display().to_string();
        // The catalogue's environment, roost's contract over it, a packaged runtime's own
        // settings last.
        cmd.envs(&catalogue_env)
            .envs(self.environment(spec, port, token.secret(), &endpoint))
            .envs([("HOME", home.clone()), ("ROOST_WORKSPACE", home)])
            .envs(&launch_env);

        // Made before the child starts: nothing can fail between its start and its reaper.
        let client = match &target {
            Target::Port(_) => Ok(self.client.clone()),
            Target::Socket(path) => reqwest::Client::builder()
                .unix_socket(path.clone())
                .build()
                .map_err(|e| format!("cannot make a client for the runtime's socket: {e}")),
        };
        let spawned = match client {
            Ok(client) => spawner::spawn(cmd)
                .await
                .map(|child| (child, client))
                .map_err(|e| format!("cannot start {:?}: {e}", argv[0])),
            Err(why) => Err(why),
        };
        if let Some(confined) = &mut confined {
            confined.spawned();
        }
        let (mut child, client) = match spawned {
            Ok(spawned) => spawned,
            Err(why) => {
                if let Some(confined) = confined {
                    let _ = tokio::task::spawn_blocking(move || confined.ended(&limits)).await;
                }
                return Err(why);
            }
        };
        let pid = child.id();
        let record = match pid {
            Some(pid) => self.records.record(pid, &spec.instance_id).await,
            None => Ok(None),
        };
        let record = match record {
            Ok(record) => record,
            Err(err) => {
                // A child roost could not reap after a crash must not run.
                kill_group(pid, Ending::Kill);
                let _ = child.wait().await;
                if let Some(confined) = confined {
                    let _ = tokio::task::spawn_blocking(move || confined.ended(&limits)).await;
                }
                return Err(format!("cannot record the runtime process: {err}"));
            }
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::with_capacity(output::TAIL_LINES)));
        let output = Output {
            instance_id: spec.instance_id.clone(),
            runtime_id: spec.runtime.id.clone(),
            telemetry: self.telemetry.clone(),
        };
        if let Some(out) = child.stdout.take() {
            tokio::spawn(output.clone().forward(out, output::Stream::Stdout, None));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(output.forward(err, output::Stream::Stderr, Some(stderr_tail.clone())));
        }
        let ended = Ended {
            records: self.records.clone(),
            record,
            slot,
            token,
            confined,
            limits,
            workspaces: self.workspaces.clone(),
            instance_id: spec.instance_id.clone(),
        };
        let machine = Arc::new(ProcessMachine::spawn_reaper(child, &target, client, api, ended));
        if let Err(why) = machine.wait_ready(boot_timeout).await {
            machine.stop().await;
            let tail: Vec<String> = stderr_tail.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default();
            return Err(if tail.is_empty() { why } else { format!("{why}; stderr: {}", tail.join(" | ")) });
        }
        // Its disk, mounted in its sandbox only, is measured through the sandbox's view (a
        // plain-directory workspace is not: its filesystem's counts are the host's).
        if let (Some(pid), true) = (pid, disk) {
            self.workspaces.track_mounted(&spec.instance_id, pid, &workspace);
        }
        info!(instance = %spec.instance_id, sandboxed = matches!(target, Target::Socket(_)), "runtime process ready");
        Ok(machine)
    }

    /// The install a packaged runtime boots from: `install_dir` if the catalogue names one,
    /// else the newest pinned version installed under `<data-dir>/runtimes`.
    pub fn installation(&self, package: packaged::Package, install_dir: Option<&Path>) -> Result<Installation, String> {
        let found = match install_dir {
            Some(dir) => Installation::at(package, dir),
            None => Installation::current(package, &self.runtimes_dir),
        };
        found.ok_or_else(|| {
            let place =
                install_dir.map_or_else(|| self.runtimes_dir.display().to_string(), |d| d.display().to_string());
            format!("{name} is not installed in {place}: run `roost runtimes install {name}`", name = package.name())
        })
    }

    /// The child's environment: roost's contract with process runtimes.
    /// `endpoint` is where the runtime reaches roost (inside its sandbox, the relay).
    fn environment(&self, spec: &MachineSpec, port: u16, token: &str, endpoint: &str) -> Vec<(&'static str, String)> {
        let gateway = format!("{endpoint}{}", crate::llm::PREFIX);
        vec![
            ("PORT", port.to_string()),
            ("AGENT_BRIEF", spec.brief.clone()),
            ("MODEL_MODE", spec.model_mode.as_str().to_owned()),
            ("MODEL", spec.model.clone()),
            ("ROOST_INSTANCE_ID", spec.instance_id.clone()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_owned()),
            // The OTLP exporter header syntax: key=value, the value percent-encoded.
            ("OTEL_EXPORTER_OTLP_HEADERS", format!("authorization=Bearer%20{token}")),
            ("OTEL_SERVICE_NAME", spec.runtime.id.clone()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                format!("roost.instance.id={},roost.runtime={}", spec.instance_id, spec.runtime.id),
            ),
            // The model gateway, as the official OpenAI and Anthropic SDKs find it.
            ("OPENAI_BASE_URL", format!("{gateway}/v1")),
            ("OPENAI_API_KEY", token.to_owned()),
            ("ANTHROPIC_BASE_URL", format!("{gateway}/anthropic")),
            ("ANTHROPIC_API_KEY", token.to_owned()),
        ]
    }
}

/// What a process agent runs.
pub enum Program<'a> {
    /// A catalogue command speaking roost's `/ready` and `/turn`.
    Command {
        /// argv; `{runtimes_dir}` is `<data-dir>/runtimes`.
        command: &'a [String],
        /// Extra environment.
        env: &'a BTreeMap<String, String>,
    },
    /// A packaged runtime: roost writes its configuration and talks to its chat endpoint.
    Packaged {
        /// Where it is installed ([`ProcessDriver::installation`]).
        installation: Installation,
        /// Its own background model use on.
        background: bool,
    },
}

/// Where roost reaches a runtime's `/ready` and `/turn`.
enum Target {
    /// Unconfined: a port on 127.0.0.1.
    Port(u16),
    /// Sandboxed: the Unix socket its relay exposes.
    Socket(PathBuf),
}

/// A port on 127.0.0.1 nobody listens on right now. The child binds it moments later; if
/// something else grabs it first, the child fails to start and the boot fails clearly.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// An agent's child process.
pub struct ProcessMachine {
    /// `http://127.0.0.1:PORT`, or a name that stands for the runtime's socket.
    base_url: String,
    client: reqwest::Client,
    /// A packaged runtime's chat endpoint; else it speaks roost's `/turn`.
    api: Option<ChatApi>,
    stop: CancellationToken,
    died: watch::Receiver<Option<String>>,
}

#[derive(Deserialize)]
struct TurnReply {
    reply: String,
    #[serde(default)]
    usage: Option<TurnUsage>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize, Default)]
struct TurnUsage {
    #[serde(default)]
    input_tokens: i64,
    #[serde(default)]
    output_tokens: i64,
}

/// What is left to do once a child has ended: take down its sandbox, forget its record,
/// free its agent's slot, revoke its agent token.
struct Ended {
    records: ChildRecords,
    record: Option<ChildRecord>,
    slot: Slot,
    token: AgentToken,
    confined: Option<Confined>,
    limits: Limits,
    workspaces: Workspaces,
    instance_id: String,
}

impl ProcessMachine {
    /// Hands the child to a reaper task that waits for it to exit, or stops it when asked;
    /// either way it kills what the child left in its process group, forgets its record and
    /// frees the agent's slot before reporting the death.
    fn spawn_reaper(
        mut child: Child,
        target: &Target,
        client: reqwest::Client,
        api: Option<ChatApi>,
        ended: Ended,
    ) -> Self {
        let stop = CancellationToken::new();
        let (died_tx, died) = watch::channel(None);
        let stopping = stop.clone();
        let pid = child.id();
        let sandboxed = matches!(target, Target::Socket(_));
        tokio::spawn(async move {
            let mut ended = ended;
            let mut why = tokio::select! {
                status = child.wait() => match status {
                    Ok(status) => format!("runtime process exited ({status})"),
                    Err(e) => format!("lost the runtime process: {e}"),
                },
                () = stopping.cancelled() => {
                    terminate(&mut child, pid, sandboxed).await;
                    "stopped".to_owned()
                }
            };
            // What the runtime started itself may outlive it: the group goes with it. While
            // any member lives, the kernel does not reuse the leader's pid (the group's id),
            // so this reaches no one else's process; with no member left it reaches nothing.
            // In a sandbox, the sandbox's first process ending took the rest with it.
            kill_group(pid, Ending::Kill);
            ended.workspaces.untrack_mounted(&ended.instance_id);
            if let Some(confined) = ended.confined.take() {
                let limits = ended.limits;
                if let Ok(Some(oom)) = tokio::task::spawn_blocking(move || confined.ended(&limits)).await
                    && why != "stopped"
                {
                    why = oom;
                }
            }
            if let Some(record) = &ended.record {
                ended.records.forget(record).await;
            }
            drop(ended.slot);
            // Named here, so the task owns it until now (a field it did not use would be
            // left behind, and dropped, when the task was made).
            drop(ended.token);
            died_tx.send_replace(Some(why));
        });
        let base_url = match target {
            Target::Port(port) => format!("http://127.0.0.1:{port}"),
            // The host is not looked up: the client connects to the socket.
            Target::Socket(_) => "http://agent".to_owned(),
        };
        Self { base_url, client, api, stop, died }
    }

    async fn wait_ready(&self, timeout: Duration) -> Result<(), String> {
        let started = Instant::now();
        let url = format!("{}{}", self.base_url, self.api.as_ref().map_or("/ready", |api| api.ready_path));
        loop {
            if let Some(why) = self.died.borrow().clone() {
                return Err(format!("{why} before it was ready"));
            }
            let probe = self.client.get(&url).timeout(Duration::from_secs(2)).send().await;
            match probe {
                Ok(resp) if resp.status().is_success() => return Ok(()),
                Ok(resp) => debug!(status = %resp.status(), "runtime not ready yet"),
                Err(_) => {}
            }
            if started.elapsed() >= timeout {
                return Err(format!("runtime process not ready after {} s", timeout.as_secs()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[async_trait::async_trait]
impl Machine for ProcessMachine {
    async fn turn(&self, input: TurnInput) -> Result<TurnOutput, ApiError> {
        self.exchange(input).await.map_err(|why| ApiError::new(ErrorReason::RuntimeFailed, why))
    }

    async fn stop(&self) {
        self.stop.cancel();
        let mut died = self.died.clone();
        let _ = died.wait_for(Option::is_some).await;
    }

    async fn died(&self) -> String {
        let mut died = self.died.clone();
        match died.wait_for(Option::is_some).await {
            Ok(why) => why.clone().unwrap_or_default(),
            Err(_) => "runtime reaper gone".to_owned(),
        }
    }
}

impl ProcessMachine {
    /// One `POST /turn`; the error says how the runtime failed.
    async fn exchange(&self, input: TurnInput) -> Result<TurnOutput, String> {
        if let Some(api) = &self.api {
            return self.chat(api, input).await;
        }
        let body = serde_json::json!({ "turn_id": input.turn_id, "text": input.text });
        let mut request = self.client.post(format!("{}/turn", self.base_url)).json(&body);
        if input.events.streaming() {
            request = request.header(reqwest::header::ACCEPT, "text/event-stream, application/json");
        }
        let resp = request.send().await.map_err(|e| self.unreachable(e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("runtime answered HTTP {status}"));
        }
        if is_event_stream(&resp) {
            return read_turn_stream(resp, &input.events).await;
        }
        let bytes = resp.bytes().await.map_err(|e| format!("runtime reply cut short: {e}"))?;
        let reply: TurnReply = serde_json::from_slice(&bytes).map_err(|e| format!("runtime answered garbage: {e}"))?;
        let usage = reply.usage.unwrap_or_default();
        Ok(TurnOutput {
            reply: reply.reply,
            input_tokens: usage.input_tokens.max(0),
            output_tokens: usage.output_tokens.max(0),
            model: reply.model.unwrap_or_default(),
        })
    }
}

impl ProcessMachine {
    /// One message to a packaged runtime's chat endpoint, in the agent's one session. Its
    /// usage is not read here: the turn's model calls went through roost's gateway, which
    /// metered each.
    async fn chat(&self, api: &ChatApi, input: TurnInput) -> Result<TurnOutput, String> {
        let streaming = input.events.streaming();
        let mut body = serde_json::json!({
            "model": api.model,
            "messages": [{ "role": "user", "content": input.text }],
            "stream": streaming,
        });
        let mut request = self.client.post(format!("{}/v1/chat/completions", self.base_url)).bearer_auth(&api.token);
        match &api.session {
            Session::UserField(user) => body["user"] = user.clone().into(),
            Session::Header(name, value) => request = request.header(*name, value),
        }
        let resp = request.json(&body).send().await.map_err(|e| self.unreachable(e))?;
        let status = resp.status();
        if status.is_success() && is_event_stream(&resp) {
            return read_chat_stream(resp, &input.events).await;
        }
        let bytes = resp.bytes().await.map_err(|e| format!("runtime reply cut short: {e}"))?;
        let answer: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        if !status.is_success() {
            let said = answer["error"]["message"].as_str().or_else(|| answer["error"].as_str()).unwrap_or("");
            let said: String = said.chars().take(300).collect();
            return Err(format!(
                "runtime answered HTTP {status}{}",
                if said.is_empty() { String::new() } else { format!(": {said}") }
            ));
        }
        let reply = &answer["choices"][0]["message"]["content"];
        let reply = match reply {
            serde_json::Value::String(text) => text.clone(),
            // Content parts: their text, in order.
            serde_json::Value::Array(parts) => {
                parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("")
            }
            _ => return Err("runtime answered garbage: no choices[0].message.content".to_owned()),
        };
        Ok(TurnOutput { reply, input_tokens: 0, output_tokens: 0, model: String::new() })
    }
}

impl ProcessMachine {
    /// Why a request to the runtime failed: its death if it died, else the error.
    fn unreachable(&self, err: reqwest::Error) -> String {
        match self.died.borrow().clone() {
            Some(why) => why,
            None => format!("runtime unreachable: {err}"),
        }
    }
}

/// Whether an answer is a `text/event-stream`.
fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"))
}

/// A `process` runtime's streamed turn (`docs/hosting.md#runtimes`): `delta` events
/// (`{"text"}`), then one `done` (`{"reply"?, "usage"?, "model"?}`; without `reply`, the
/// reply is the deltas joined), or an `error` (`{"error"}`) that fails the turn. A stream
/// that ends without either is cut short.
async fn read_turn_stream(resp: reqwest::Response, events: &TurnStream) -> Result<TurnOutput, String> {
    let mut text = String::new();
    let mut end: Option<Result<TurnOutput, String>> = None;
    each_event(resp.bytes_stream(), |name, data| {
        let value: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
        match name {
            Some("delta") => {
                let delta = value["text"].as_str().unwrap_or_default();
                events.delta(delta);
                text.push_str(delta);
                if text.len() > MAX_STREAMED_REPLY {
                    end = Some(Err(format!("the runtime's reply passed {} MiB", MAX_STREAMED_REPLY >> 20)));
                    return false;
                }
            }
            Some("done") => {
                let usage = &value["usage"];
                end = Some(Ok(TurnOutput {
                    reply: value["reply"].as_str().map_or_else(|| std::mem::take(&mut text), str::to_owned),
                    input_tokens: usage["input_tokens"].as_i64().unwrap_or(0).max(0),
                    output_tokens: usage["output_tokens"].as_i64().unwrap_or(0).max(0),
                    model: value["model"].as_str().unwrap_or_default().to_owned(),
                }));
                return false;
            }
            Some("error") => {
                let said: String = value["error"].as_str().unwrap_or("no reason given").chars().take(300).collect();
                end = Some(Err(format!("the runtime reported an error: {said}")));
                return false;
            }
            _ => {}
        }
        true
    })
    .await?;
    end.unwrap_or_else(|| Err("the runtime's stream ended without a done event".to_owned()))
}

/// A packaged runtime's streamed chat answer: OpenAI Chat Completions chunks. Usage is the
/// model gateway's, as for a whole answer.
async fn read_chat_stream(resp: reqwest::Response, events: &TurnStream) -> Result<TurnOutput, String> {
    let (mut reply, mut error) = (String::new(), None);
    each_event(resp.bytes_stream(), |_, data| {
        let chunk = openai_chunk(data);
        if let Some(said) = chunk.error {
            error = Some(said);
            return false;
        }
        events.delta(&chunk.text);
        reply.push_str(&chunk.text);
        !chunk.done && reply.len() <= MAX_STREAMED_REPLY
    })
    .await?;
    match error {
        Some(said) => Err(format!("the runtime reported an error: {said}")),
        None => Ok(TurnOutput { reply, ..TurnOutput::default() }),
    }
}

/// SIGTERM to the child's process group, then SIGKILL if it has not exited in time. A
/// sandbox's SIGTERM goes to its relay (bubblewrap would not pass it on), which passes it
/// to the runtime.
async fn terminate(child: &mut Child, pid: Option<u32>, sandboxed: bool) {
    match pid.filter(|_| sandboxed).and_then(first_child) {
        Some(relay) => signal(relay, Ending::Term),
        None => kill_group(pid, Ending::Term),
    }
    if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_ok() {
        return;
    }
    kill_group(pid, Ending::Kill);
    let _ = child.kill().await;
}

/// How [`kill_group`] asks a process group to end.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// SIGTERM: finish up.
    Term,
    /// SIGKILL: now.
    Kill,
}

/// The first child of process `pid` (a sandbox's relay is bubblewrap's only child).
fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

#[cfg(unix)]
impl Ending {
    fn signal(self) -> rustix::process::Signal {
        match self {
            Self::Term => rustix::process::Signal::TERM,
            Self::Kill => rustix::process::Signal::KILL,
        }
    }
}

/// Signals process `pid`.
fn signal(pid: u32, ending: Ending) {
    #[cfg(unix)]
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, ending.signal());
    }
    #[cfg(not(unix))]
    let _ = (pid, ending);
}

/// Signals the process group that child `pid` leads (roost starts each child as the leader
/// of a new group).
fn kill_group(pid: Option<u32>, ending: Ending) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|pid| rustix::process::Pid::from_raw(pid as i32)) {
        let _ = rustix::process::kill_process_group(pid, ending.signal());
    }
    #[cfg(not(unix))]
    let _ = (pid, ending);
}
