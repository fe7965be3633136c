//! The secret key as an operator meets it, through the real binary: a malformed
//! `ROOST_SECRET_KEY`, a restart with another key, a lost key and a second PostgreSQL
//! replica without the key each refuse to start with exit status 2 and say what to do;
//! the store commands of the CLI neither need the key nor create a key file.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    io::Read as _,
    path::Path,
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use roost_tests::process::listening_addresses;
use serde_json::{Value, json};

fn key_text(byte: u8) -> String {
    STANDARD.encode([byte; 32])
}

/// `roost` on `data_dir` and `database` (SQLite in the data directory when `None`), with
/// `ROOST_SECRET_KEY` set to `key` or unset.
fn roost(data_dir: &Path, database: Option<&str>, key: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roost"));
    cmd.env_remove("ROOST_DATABASE_URL").env_remove("ROOST_ADDR").env_remove("ROOST_SECRET_KEY");
    cmd.env("RUST_LOG", "info").env("ROOST_DATA_DIR", data_dir);
    if let Some(url) = database {
        cmd.env("ROOST_DATABASE_URL", url);
    }
    if let Some(key) = key {
        cmd.env("ROOST_SECRET_KEY", key);
    }
    cmd
}

/// A `roost serve` process, killed if a failing test drops it.
struct Server(Option<Child>);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `roost serve` on an ephemeral port; returns it with the address it logged.
fn serve(mut cmd: Command) -> (Server, String) {
    let mut child =
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--log-format", "json"]).stderr(Stdio::piped()).spawn().unwrap();
    let listening = listening_addresses(&mut child);
    let server = Server(Some(child));
    let addr = listening.recv_timeout(Duration::from_secs(30)).expect("roost did not start listening");
    (server, addr)
}

/// Runs `roost serve` expecting it to refuse to start; its exit status and stderr.
fn refused_serve(mut cmd: Command) -> (Option<i32>, String) {
    let mut child =
        cmd.args(["serve", "--addr", "127.0.0.1:0"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            drop(Server(Some(child)));
            panic!("roost started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status.code(), stderr)
}

fn stop(mut server: Server) {
    let mut child = server.0.take().unwrap();
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success());
}

fn cli(mut cmd: Command, args: &[&str]) -> Value {
    let Output { status, stdout, stderr } = cmd.args(args).arg("--json").output().unwrap();
    assert!(status.success(), "roost {args:?}: {}", String::from_utf8_lossy(&stderr));
    serde_json::from_slice(&stdout).unwrap()
}

/// Provisions an echo agent and gives it a provider key; its id once it runs again.
async fn agent_with_a_secret(addr: &str, api_key: &str) -> String {
    let http = reqwest::Client::new();
    let created: Value = http
        .post(format!("http://{addr}/api/provision"))
        .bearer_auth(api_key)
        .json(&json!({"runtime": "echo", "brief": "b"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    wait_running(addr, api_key, &id).await;
    let reply = http
        .post(format!("http://{addr}/api/instances/{id}/config"))
        .bearer_auth(api_key)
        .json(&json!({"PROVIDER_API_KEY": "sk-binary-test"}))
        .send()
        .await
        .unwrap();
    assert!(reply.status().is_success(), "{}", reply.text().await.unwrap());
    wait_running(addr, api_key, &id).await;
    id
}

async fn wait_running(addr: &str, api_key: &str, id: &str) {
    let http = reqwest::Client::new();
    for _ in 0..200 {
        let view: Value = http
            .get(format!("http://{addr}/api/instances/{id}"))
            .bearer_auth(api_key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if view["status"] == "running" {
            return;
        }
        assert_ne!(view["status"], "failed", "{view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agent {id} never ran");
}

#[test]
fn a_malformed_key_exits_2_without_echoing_it() {
    let dir = tempfile::tempdir().unwrap();
    let short = key_text(1)[..24].to_owned();
    for (key, why) in [("not-a-key!", "not base64"), (short.as_str(), "18 bytes, not 32")] {
        let (code, stderr) = refused_serve(roost(dir.path(), None, Some(key)));
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("ROOST_SECRET_KEY is not a secret key") && stderr.contains(why), "{stderr}");
        assert!(stderr.contains("openssl rand -base64 32"), "{stderr}");
        assert!(!stderr.contains(key), "the key is not echoed: {stderr}");
    }
    assert!(!dir.path().join("secret.key").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_with_another_key_or_none_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("secret.key");
    let (first, other) = (key_text(1), key_text(2));
    // The store commands create the store without a key, and no key file.
    let account = cli(roost(dir.path(), None, None), &["accounts", "create", "--name", "ops"]);
    let api_key = account["api_key"].as_str().unwrap();
    assert!(!key_file.exists(), "the CLI created a key file");

    let (server, addr) = serve(roost(dir.path(), None, Some(&first)));
    let id = agent_with_a_secret(&addr, api_key).await;
    stop(server);
    assert!(!key_file.exists(), "with ROOST_SECRET_KEY set no key file is made");

    let (code, stderr) = refused_serve(roost(dir.path(), None, Some(&other)));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("ROOST_SECRET_KEY does not open the secrets in this store"), "{stderr}");
    assert!(stderr.contains("Set ROOST_SECRET_KEY to the key"), "{stderr}");
    assert!(!stderr.contains(&other) && !stderr.contains(&first), "no key in the message: {stderr}");

    // Without a key, roost does not make up a new one for a store that has secrets.
    let (code, stderr) = refused_serve(roost(dir.path(), None, None));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("ROOST_SECRET_KEY is unset"), "{stderr}");
    assert!(!key_file.exists(), "a refused start created a key file");

    // The CLI keeps working without the key.
    let keys =
        cli(roost(dir.path(), None, None), &["keys", "list", "--account", account["account_id"].as_str().unwrap()]);
    assert_eq!(keys.as_array().unwrap().len(), 1);
    assert!(!key_file.exists());

    // The right key starts it, and the agent's secret still opens.
    let (server, addr) = serve(roost(dir.path(), None, Some(&first)));
    wait_running(&addr, api_key, &id).await;
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_replica_without_the_key_is_refused_until_given_it() {
    let database = roost_tests::TestDatabase::create().await;
    let url = Some(database.url());
    let (first_dir, second_dir, cli_dir) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    // The first replica generates the key into its data directory.
    let (first, addr) = serve(roost(first_dir.path(), url, None));
    let key_file = first_dir.path().join("secret.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let account = cli(roost(cli_dir.path(), url, None), &["accounts", "create", "--name", "ops"]);
    assert!(!cli_dir.path().join("secret.key").exists(), "the CLI created a key file");
    let api_key = account["api_key"].as_str().unwrap();
    let id = agent_with_a_secret(&addr, api_key).await;

    // A second replica on another machine, not given the key, refuses to start.
    let (code, stderr) = refused_serve(roost(second_dir.path(), url, None));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("Set ROOST_SECRET_KEY to the key the other replicas use"), "{stderr}");
    assert!(!second_dir.path().join("secret.key").exists(), "a refused start created a key file");

    // Given the first replica's key, it starts and opens the agent's secret.
    let shared = std::fs::read_to_string(&key_file).unwrap();
    let (second, second_addr) = serve(roost(second_dir.path(), url, Some(shared.trim())));
    wait_running(&second_addr, api_key, &id).await;
    stop(second);
    stop(first);
}
