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
//! - `--expose SOCKET=ADDR`: listens on `SOCKET` and carries each connection to `ADDR`
//!   inside, where the runtime serves `/ready` and `/turn`: roost reaches the agent there.
//!
//! Being the relay roost already ships needs no extra package (`socat`). As PID 1 it also
//! reaps every orphan in the sandbox, passes SIGTERM on to the runtime (a graceful stop
//! reaches it; bubblewrap's own init would not pass it on) and exits with the runtime's
//! status, which ends the sandbox: the kernel kills whatever is left in a PID namespace
//! whose first process is gone.

use std::{
    net::SocketAddr,
    os::unix::process::CommandExt as _,
    path::PathBuf,
    process::{Command, ExitCode},
};

use clap::Args;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// The relay's arguments (set by roost, not by people: the subcommand is hidden).
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// `127.0.0.1:PORT=/path/to.sock`: TCP inside the sandbox to a socket of roost's.
    #[arg(long, value_parser = parse_forward)]
    forward: Vec<(SocketAddr, PathBuf)>,
    /// `/path/to.sock=127.0.0.1:PORT`: a socket roost connects to, to TCP inside.
    #[arg(long, value_parser = parse_expose)]
    expose: Vec<(PathBuf, SocketAddr)>,
    /// The runtime's command.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn parse_forward(arg: &str) -> Result<(SocketAddr, PathBuf), String> {
    let (addr, path) = arg.split_once('=').ok_or("expected ADDR=SOCKET")?;
    Ok((addr.parse().map_err(|e| format!("{addr}: {e}"))?, PathBuf::from(path)))
}

fn parse_expose(arg: &str) -> Result<(PathBuf, SocketAddr), String> {
    let (path, addr) = arg.split_once('=').ok_or("expected SOCKET=ADDR")?;
    Ok((PathBuf::from(path), addr.parse().map_err(|e| format!("{addr}: {e}"))?))
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
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // Listening first: the runtime's first call to the gateway must find it there.
    let listeners = runtime.block_on(async {
        let mut forwards = Vec::new();
        for (addr, socket) in &args.forward {
            forwards.push((TcpListener::bind(addr).await?, socket.clone()));
        }
        let mut exposes = Vec::new();
        for (socket, addr) in &args.expose {
            let _ = std::fs::remove_file(socket);
            exposes.push((UnixListener::bind(socket)?, *addr));
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
