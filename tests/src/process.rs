//! A real `roost` process under test: following what it logs.

use std::{
    io::{BufRead as _, BufReader},
    process::Child,
    sync::mpsc,
};

use serde_json::Value;

/// Follows the JSON log a `roost` child (spawned with `--log-format json` and stderr
/// piped) writes: each address it logs as "listening" is sent on the receiver (a
/// re-exec'd daemon logs another), and every other line is echoed to the test's output, so
/// a failing test shows what roost said.
pub fn listening_addresses(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("roost's stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            match serde_json::from_str::<Value>(&line) {
                Ok(event) if event["fields"]["message"] == "listening" => {
                    let _ = tx.send(event["fields"]["addr"].as_str().unwrap_or_default().to_owned());
                }
                _ => eprintln!("roost: {line}"),
            }
        }
    });
    rx
}

/// The secret key the replica tests and benches give every replica of a cluster, as
/// production replicas share `ROOST_SECRET_KEY`.
pub const REPLICA_SECRET_KEY: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

/// `roost` (the binary at `bin`) on `data_dir` and the database `db`, as a replica of a
/// cluster: the shared secret key, no address from the environment, quiet logs.
pub fn replica_command(bin: &str, db: &str, data_dir: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("--data-dir")
        .arg(data_dir)
        .arg("--database-url")
        .arg(db)
        .env("ROOST_SECRET_KEY", REPLICA_SECRET_KEY)
        .env_remove("ROOST_ADDR")
        .env("RUST_LOG", "warn,roost_server::serve=info");
    cmd
}

/// Starts `roost serve` from `cmd` (see [`replica_command`]) on a free loopback port with
/// leases of `ttl_secs` and `extra` flags; returns the child and its base URL once it
/// listens.
pub fn serve_replica(mut cmd: std::process::Command, ttl_secs: u64, extra: &[&str]) -> (Child, String) {
    let mut child = cmd
        .args(["serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--update-index-url", ""])
        .args(["--lease-ttl-secs", &ttl_secs.to_string()])
        .args(extra)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("roost starts");
    let addr = listening_addresses(&mut child)
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("roost did not start listening");
    (child, format!("http://{addr}"))
}

/// `roost accounts create --credits <cents> --json` from `cmd`: the new account's API key.
pub fn create_account(mut cmd: std::process::Command, credits: i64) -> String {
    let out = cmd
        .args(["accounts", "create", "--name", "replicas", "--credits", &credits.to_string(), "--json"])
        .output()
        .expect("roost accounts create runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let created: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    created["api_key"].as_str().expect("api_key").to_owned()
}

/// The host's processes of agent `instance_id`'s runtime (bubblewrap, the relay and the
/// runtime itself when sandboxed), found by the `ROOST_INSTANCE_ID` in their environment:
/// a sandboxed runtime knows only its own PID namespace's numbers.
pub fn runtime_pids(instance_id: &str) -> Vec<i64> {
    let needle = format!("ROOST_INSTANCE_ID={instance_id}");
    let mut pids: Vec<i64> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i64>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle.as_bytes()))
                && is_alive(*pid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether process `pid` runs (a reaped one has no `/proc` entry; a zombie shows state Z).
pub fn is_alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}
