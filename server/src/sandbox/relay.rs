//! `roost sandbox-relay`: roost's own binary as the first process inside an agent's
//! sandbox (its PID 1), joining the sandbox's empty network to roost through Unix sockets.
//!
//! The sandbox has its own network namespace with nothing but loopback in it, so neither
//! side can reach the other over TCP, and roost's listener stays out of the agent's reach.
//! The sockets live in one directory bubblewrap binds into the sandbox (`/run/roost`):
//!
//! - `--forward ADDR=SOCKET`: listens on `ADDR` (127.0.0.1 inside) and carries each
//!   connection to `SOCKET`, where roost listens: its model gateway and OTLP ingest
//!   (`gateway.sock`, nothing else of roost's API), and the agent's egress proxy
//!   (`egress.sock`). The runtime's SDKs find them through the usual variables.
//! - `--expose-fd FD=ADDR`: accepts on the listening Unix socket it inherited as `FD` and
//!   carries each connection to `ADDR` inside, where the runtime serves `/ready` and
//!   `/turn`: roost reaches the agent there. roost made that socket in a directory of its
//!   own the agent cannot write, so what roost connects to is always this relay: an agent
//!   cannot swap the socket for a link to another agent's, or to any socket of the host.
//! - `--files PATH`: before the runtime starts, writes the files roost prepared for this
//!   boot (a packaged runtime's configuration, its brief) into the workspace, as the agent,
//!   inside the sandbox (see [`write_files`]). A link the agent left where a file goes can
//!   then only lead where the agent could write anyway.
//!
//! Being the relay roost already ships needs no extra package (`socat`). As PID 1 it also
//! reaps every orphan in the sandbox, passes SIGTERM on to the runtime (a graceful stop
//! reaches it; bubblewrap's own init would not pass it on) and exits with the runtime's
//! status, which ends the sandbox: the kernel kills whatever is left in a PID namespace
//! whose first process is gone.

use std::{
    io::Write as _,
    net::SocketAddr,
    os::unix::{fs::OpenOptionsExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use clap::Args;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// The relay's arguments (set by roost, not by people: the subcommand is hidden).
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// `127.0.0.1:PORT=/path/to.sock`: TCP inside the sandbox to a socket of roost's.
    #[arg(long, value_parser = parse_forward)]
    forward: Vec<(SocketAddr, PathBuf)>,
    /// `FD=127.0.0.1:PORT`: an inherited listening socket roost connects to, to TCP inside.
    #[arg(long = "expose-fd", value_parser = parse_expose)]
    expose: Vec<(i32, SocketAddr)>,
    /// A JSON file of [`WorkspaceFiles`] to write before the runtime starts.
    #[arg(long)]
    files: Option<PathBuf>,
    /// The runtime's command.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn parse_forward(arg: &str) -> Result<(SocketAddr, PathBuf), String> {
    let (addr, path) = arg.split_once('=').ok_or("expected ADDR=SOCKET")?;
    Ok((addr.parse().map_err(|e| format!("{addr}: {e}"))?, PathBuf::from(path)))
}

fn parse_expose(arg: &str) -> Result<(i32, SocketAddr), String> {
    let (fd, addr) = arg.split_once('=').ok_or("expected FD=ADDR")?;
    let fd = fd.parse().ok().filter(|fd| *fd > 2).ok_or_else(|| format!("{fd}: not a descriptor number above 2"))?;
    Ok((fd, addr.parse().map_err(|e| format!("{addr}: {e}"))?))
}

/// Runs the relay until the runtime exits; its exit status is the runtime's.
pub fn main(args: RelayArgs) -> ExitCode {
    match relay(args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("roost sandbox-relay: {err}");
            ExitCode::from(125)
        }
    }
}

fn relay(args: RelayArgs) -> std::io::Result<u8> {
    if let Some(path) = &args.files {
        let text = std::fs::read_to_string(path)?;
        let files: WorkspaceFiles = serde_json::from_str(&text).map_err(std::io::Error::other)?;
        write_files(&files.workspace, &files.files)?;
    }
    // The sockets roost handed over, each taken once, before anything else could open a
    // descriptor with the same number.
    let mut exposed = Vec::new();
    for (fd, addr) in &args.expose {
        if exposed.iter().any(|(taken, _, _)| taken == fd) {
            return Err(std::io::Error::other(format!("descriptor {fd} given twice")));
        }
        exposed.push((*fd, super::enter::inherited(*fd)?, *addr));
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // Listening first: the runtime's first call to the model gateway must find it there.
    let listeners = runtime.block_on(async {
        let mut forwards = Vec::new();
        for (addr, socket) in &args.forward {
            forwards.push((TcpListener::bind(addr).await?, socket.clone()));
        }
        let mut exposes = Vec::new();
        for (_, fd, addr) in exposed {
            let listener = std::os::unix::net::UnixListener::from(fd);
            listener.set_nonblocking(true)?;
            exposes.push((UnixListener::from_std(listener)?, addr));
        }
        std::io::Result::Ok((forwards, exposes))
    })?;
    let child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .process_group(0)
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {:?}: {e}", args.command[0])))?;
    let runtime_pid = child.id() as i32;
    // Reaps every process in the sandbox (PID 1 inherits the orphans) and reports the
    // runtime's own end.
    let (ended_tx, ended) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || reap(runtime_pid, ended_tx));
    runtime.block_on(async move {
        let (forwards, exposes) = listeners;
        for (listener, socket) in forwards {
            tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let socket = socket.clone();
                    tokio::spawn(async move {
                        if let Ok(unix) = UnixStream::connect(&socket).await {
                            pipe(tcp, unix).await;
                        }
                    });
                }
            });
        }
        for (listener, addr) in exposes {
            tokio::spawn(async move {
                while let Ok((unix, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        if let Ok(tcp) = TcpStream::connect(addr).await {
                            pipe(tcp, unix).await;
                        }
                    });
                }
            });
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        tokio::pin!(ended);
        loop {
            tokio::select! {
                code = &mut ended => return Ok(code.unwrap_or(125)),
                _ = term.recv() => signal_runtime(runtime_pid),
                _ = interrupt.recv() => signal_runtime(runtime_pid),
            }
        }
    })
}

/// Copies both ways until either side is done.
async fn pipe(mut tcp: TcpStream, mut unix: UnixStream) {
    let _ = tcp.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
}

/// SIGTERM to the runtime's process group.
fn signal_runtime(pid: i32) {
    use rustix::process::{Pid, Signal, kill_process_group};
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = kill_process_group(pid, Signal::TERM);
    }
}

/// Waits for every child until the runtime's own ends, and reports its exit code.
fn reap(runtime: i32, ended: tokio::sync::oneshot::Sender<u8>) {
    use rustix::process::{WaitOptions, wait};
    loop {
        match wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid.as_raw_nonzero().get() == runtime => {
                let code = match (status.exit_status(), status.terminating_signal()) {
                    (Some(code), _) => code,
                    (None, Some(signal)) => 128 + signal,
                    (None, None) => 125,
                };
                let _ = ended.send(u8::try_from(code).unwrap_or(125));
                return;
            }
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => {
                let _ = ended.send(125);
                return;
            }
        }
    }
}

/// A file roost prepared for a boot, written into the workspace before the runtime starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceFile {
    /// Where it goes: a path under the workspace (absolute, as the runtime sees it).
    pub path: PathBuf,
    /// What it holds.
    pub text: String,
}

/// What the relay's `--files` holds: the workspace and the files to write there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceFiles {
    /// The workspace.
    pub workspace: PathBuf,
    /// Its files.
    pub files: Vec<WorkspaceFile>,
}

/// Writes `files` under `workspace`. Each directory on the way from the workspace is made
/// a real directory (a link the agent left there is replaced by one, never followed), and
/// each file is written into a new file beside it, then renamed over the old one, so
/// whatever was at the path (a file, a link) is replaced, never written through. Inside a
/// sandbox this runs as the agent, on its own workspace; unconfined (`--runtime-sandbox
/// off`) roost calls it for the runtime, which runs as roost's user.
pub fn write_files(workspace: &Path, files: &[WorkspaceFile]) -> std::io::Result<()> {
    for file in files {
        write_file(workspace, &file.path, file.text.as_bytes())
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write {}: {e}", file.path.display())))?;
    }
    Ok(())
}

fn write_file(workspace: &Path, path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::path::Component;
    let inside = path.strip_prefix(workspace).map_err(|_| std::io::Error::other("not under the workspace"))?;
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for part in inside.components() {
        match part {
            Component::Normal(name) => parts.push(name),
            _ => return Err(std::io::Error::other("not a plain path under the workspace")),
        }
    }
    let Some((name, dirs)) = parts.split_last() else { return Err(std::io::Error::other("no file name")) };
    let mut dir = workspace.to_path_buf();
    for part in dirs {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                std::fs::remove_file(&dir)?;
                std::fs::create_dir(&dir)?;
            }
            Ok(_) => return Err(std::io::Error::other(format!("{} is not a directory", dir.display()))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&dir)?,
            Err(err) => return Err(err),
        }
    }
    let temporary = dir.join(format!(".{}.roost-{}", name.to_string_lossy(), crate::ids::random_base32(8)));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temporary)
        .and_then(|mut file| file.write_all(text));
    match written.and_then(|()| std::fs::rename(&temporary, dir.join(name))) {
        Ok(()) => Ok(()),
        Err(err) => {
            let _ = std::fs::remove_file(&temporary);
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_replace_links_instead_of_writing_through_them() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("host-file");
        std::fs::write(&target, "untouched").unwrap();
        let host_dir = dir.path().join("host-dir");
        std::fs::create_dir(&host_dir).unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let soul = ws.join("SOUL.md");
        std::os::unix::fs::symlink(&target, &soul).unwrap();
        // A directory roost writes into, swapped for a link to a host directory.
        std::os::unix::fs::symlink(&host_dir, ws.join(".openclaw")).unwrap();
        let files = vec![
            WorkspaceFile { path: soul.clone(), text: "the brief".into() },
            WorkspaceFile { path: ws.join(".openclaw/openclaw.json"), text: "{}".into() },
            WorkspaceFile { path: ws.join(".hermes/deep/config.yaml"), text: "{}".into() },
        ];
        write_files(&ws, &files).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
        assert_eq!(std::fs::read_dir(&host_dir).unwrap().count(), 0, "nothing written through the link");
        assert_eq!(std::fs::read_to_string(&soul).unwrap(), "the brief");
        assert!(!std::fs::symlink_metadata(&soul).unwrap().file_type().is_symlink());
        assert!(std::fs::symlink_metadata(ws.join(".openclaw")).unwrap().is_dir());
        assert_eq!(std::fs::read_to_string(ws.join(".openclaw/openclaw.json")).unwrap(), "{}");
        assert_eq!(std::fs::read_to_string(ws.join(".hermes/deep/config.yaml")).unwrap(), "{}");
        let leftovers: Vec<_> = std::fs::read_dir(&ws).unwrap().flatten().collect();
        assert_eq!(leftovers.len(), 3, "no temporary files left: {leftovers:?}");
        // Nothing outside the workspace.
        let outside = WorkspaceFile { path: dir.path().join("elsewhere"), text: String::new() };
        assert!(write_files(&ws, &[outside]).is_err());
        let climbing = WorkspaceFile { path: ws.join("../elsewhere"), text: String::new() };
        assert!(write_files(&ws, &[climbing]).is_err());
    }
}
