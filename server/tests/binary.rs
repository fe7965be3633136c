//! The `roost` binary itself, as an operator runs it: it starts, says where it listens,
//! answers, and stops cleanly on SIGTERM; bad configuration exits with status 2.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::Value;

fn roost() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roost"));
    cmd.env_remove("ROOST_DATABASE_URL").env_remove("ROOST_ADDR").env("RUST_LOG", "info");
    cmd
}

/// Starts `roost serve` on an ephemeral port and returns it with the address it logged.
fn serve(data_dir: &std::path::Path) -> (Child, String, mpsc::Receiver<Value>) {
    let mut child = roost()
        .args(["serve", "--addr", "127.0.0.1:0", "--log-format", "json"])
        .arg("--data-dir")
        .arg(data_dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(event);
            }
        }
    });
    let addr = loop {
        let event = rx.recv_timeout(Duration::from_secs(30)).expect("roost logged nothing");
        if event["fields"]["message"] == "listening" {
            break event["fields"]["addr"].as_str().unwrap().to_owned();
        }
    };
    (child, addr, rx)
}

#[tokio::test]
async fn serves_then_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, logs) = serve(dir.path());

    let health: Value = reqwest::get(format!("http://{addr}/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
    assert!(dir.path().join("roost.db").exists(), "the default store is SQLite in the data dir");

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");
    let messages: Vec<Value> = logs.try_iter().map(|e| e["fields"]["message"].clone()).collect();
    assert!(messages.contains(&Value::from("stopped")), "{messages:?}");
}

#[test]
fn bad_database_url_exits_2() {
    let out = roost().args(["serve", "--database-url", "mysql://nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unsupported database URL"), "{stderr}");
}

#[test]
fn flags_read_their_environment_variables() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        roost().args(["serve"]).env("ROOST_ADDR", "not-an-address").env("ROOST_DATA_DIR", dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot listen on not-an-address"), "{stderr}");
}

#[tokio::test]
async fn the_restart_control_endpoint_reexecs_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, logs) = serve(dir.path());
    let http = reqwest::Client::new();
    let before: Value = http.get(format!("http://{addr}/api/local/health")).send().await.unwrap().json().await.unwrap();

    let reply =
        http.post(format!("http://{addr}/api/control/restart")).json(&serde_json::json!({})).send().await.unwrap();
    assert_eq!(reply.status(), 202);
    let body: Value = reply.json().await.unwrap();
    assert_eq!(body["pid"], i64::from(child.id()), "{body}");

    // The same process logs that it listens again (on a new port: it was started with :0).
    let again = loop {
        let event = logs.recv_timeout(Duration::from_secs(30)).expect("roost did not come back");
        if event["fields"]["message"] == "listening" {
            break event["fields"]["addr"].as_str().unwrap().to_owned();
        }
    };
    let after: Value = http.get(format!("http://{again}/api/local/health")).send().await.unwrap().json().await.unwrap();
    assert_eq!(after["status"], "ok");
    assert_ne!(after["started_at"], before["started_at"], "a new start");
    assert!(child.try_wait().unwrap().is_none(), "the same process kept running");

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success());
}
