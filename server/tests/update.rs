//! The self-updater with real processes: an unsupervised daemon installs a new release and
//! re-executes itself into it; a release that crashes at boot is rolled back on its third
//! boot under a supervisor's restart loop (this test plays the supervisor), and the
//! rollback record shows in `/api/update-check/status`; a daemon whose package name on the
//! index belongs to another project installs nothing and says so; `roost update` with a
//! public key installs only signed releases.
//!
//! One binary plays every release: the test's install script writes the version it
//! "installs" to the file `ROOST_VERSION_FILE` names, which roost reports as its version.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use roost_tests::{
    FakeIndex, FakeInstaller, ROOST_PACKAGE as ROOST, ROOST_REPOSITORY, ReleaseKey, process::listening_addresses,
};
use serde_json::Value;

const HOUR: Duration = Duration::from_secs(3600);

/// `roost daemon` on an ephemeral port with the local index and installer.
fn daemon(data_dir: &Path, index: &FakeIndex, installer: &FakeInstaller, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roost"));
    cmd.env_remove("ROOST_DATABASE_URL")
        .env_remove("ROOST_ADDR")
        .env_remove("INVOCATION_ID")
        .env_remove("SERVICE_AUTO_UPDATE")
        .env("RUST_LOG", "info")
        .env("ROOST_VERSION_FILE", installer.version_file())
        .args(["daemon", "--addr", "127.0.0.1:0", "--log-format", "json", "--update-index-url", &index.url])
        .args(["--update-install-command", &installer.command()])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .stderr(Stdio::piped());
    cmd
}

/// Spawns `cmd` and forwards each "listening" address it logs (a re-exec logs another).
fn spawn(mut cmd: Command) -> (Child, mpsc::Receiver<String>) {
    let mut child = cmd.spawn().unwrap();
    let rx = listening_addresses(&mut child);
    (child, rx)
}

/// Makes 0.3.0 "unable to start": its install leaves a runtime catalogue roost refuses
/// (exit 2 at boot); installing 0.2.0 again restores the good one. The catalogue's path,
/// for `ROOST_RUNTIMES`.
fn crashing_release(dir: &Path, installer: &FakeInstaller) -> std::path::PathBuf {
    let catalogue = dir.join("runtimes.toml");
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "[[runtime]]\nid = \"echo\"\ndriver = \"echo\"\nprice_cents_month = 0\nincluded_model = true\ndefault_model = \"echo\"\n",
    )
    .unwrap();
    std::fs::copy(&good, &catalogue).unwrap();
    installer.after("0.3.0", &format!("echo 'not [[toml' > '{}'", catalogue.display()));
    installer.after("0.2.0", &format!("cp '{}' '{}'", good.display(), catalogue.display()));
    catalogue
}

/// A fresh directory, local index and installer, with roost "running" 0.2.0.
async fn release_fixture() -> (tempfile::TempDir, FakeIndex, FakeInstaller) {
    let dir = tempfile::tempdir().unwrap();
    let index = FakeIndex::start().await;
    let installer = FakeInstaller::new(&dir.path().join("installer"));
    std::fs::write(installer.version_file(), "0.2.0\n").unwrap();
    (dir, index, installer)
}

async fn update_status(addr: &str) -> Value {
    reqwest::get(format!("http://{addr}/api/update-check/status")).await.unwrap().json().await.unwrap()
}

fn stop(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupervised_daemon_installs_and_reexecs_into_the_new_release() {
    let (dir, index, installer) = release_fixture().await;
    index.publish(ROOST, "0.2.0", 10 * HOUR);
    index.publish(ROOST, "0.3.0", HOUR);

    let (mut child, listening) = spawn(daemon(&dir.path().join("data"), &index, &installer, &[]));
    let first = listening.recv_timeout(Duration::from_secs(60)).expect("the daemon started");
    // The worker polls at once, installs 0.3.0 and re-executes: the same process logs again.
    let second = listening.recv_timeout(Duration::from_secs(60)).expect("the daemon restarted itself");
    assert!(child.try_wait().unwrap().is_none(), "re-exec keeps the process (and its pid)");
    assert_eq!(installer.installs(), ["roost-server 0.3.0"]);
    let status = update_status(&second).await;
    assert_eq!(status["current"], "0.3.0", "{status}");
    assert_eq!(status["restart"], "exec");
    assert_eq!(status["guard_armed"], true, "the new version is watched for a crash loop");
    assert_eq!(status["last_attempt"]["outcome"], "ok");
    assert_ne!(first, "", "{first}");
    stop(&mut child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_crashes_at_boot_is_rolled_back_on_its_third_boot() {
    let (dir, index, installer) = release_fixture().await;
    let catalogue = crashing_release(dir.path(), &installer);
    index.publish(ROOST, "0.3.0", HOUR);

    let data = dir.path().join("data");
    let mut exits = Vec::new();
    // The supervisor: start roost again whenever it exits, like systemd's Restart=always.
    let (mut stable, addr) = loop {
        assert!(exits.len() < 6, "no stable start after {exits:?}");
        let mut cmd = daemon(&data, &index, &installer, &["--supervised"]);
        cmd.env("ROOST_RUNTIMES", &catalogue);
        let (mut child, listening) = spawn(cmd);
        let started = Instant::now();
        let addr = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Err(status.code().unwrap_or(-1));
            }
            if let Ok(addr) = listening.try_recv() {
                break Ok(addr);
            }
            assert!(started.elapsed() < Duration::from_secs(60), "roost neither started nor exited");
            std::thread::sleep(Duration::from_millis(20));
        };
        match addr {
            Err(code) => exits.push(code),
            // Up: either it installs and exits (supervised), or it is the stable one.
            Ok(addr) => {
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut exited = None;
                while Instant::now() < deadline {
                    if let Some(status) = child.try_wait().unwrap() {
                        exited = Some(status.code().unwrap_or(-1));
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                match exited {
                    Some(code) => exits.push(code),
                    None => break (child, addr),
                }
            }
        }
    };
    // 0.2.0 installs 0.3.0 and exits for the supervisor (0); 0.3.0 fails to start twice
    // (2: bad configuration); its third boot rolls back (1); 0.2.0 then runs and stays.
    assert_eq!(exits, [0, 2, 2, 1]);
    assert_eq!(installer.installs(), ["roost-server 0.3.0", "roost-server 0.2.0"]);
    let status = update_status(&addr).await;
    assert_eq!(status["current"], "0.2.0");
    let rollback = &status["rollback"];
    assert_eq!((rollback["from"].as_str(), rollback["to"].as_str()), (Some("0.3.0"), Some("0.2.0")), "{status}");
    assert_eq!((rollback["boots"].as_i64(), rollback["installed"].as_bool()), (Some(3), Some(true)));
    assert!(rollback["time"].is_string() && rollback["reason"].as_str().unwrap().contains("crash loop"));
    assert_eq!(status["guard_armed"], false);
    // The rolled-back release is held, so the stable node does not install it again.
    let held: Vec<&str> = status["held"].as_array().unwrap().iter().map(|h| h["version"].as_str().unwrap()).collect();
    assert_eq!(held, ["0.3.0"]);
    let record: Value = serde_json::from_slice(&std::fs::read(data.join("update_rollback.json")).unwrap()).unwrap();
    assert_eq!(record["boots"], 3);
    stop(&mut stable);
    assert_eq!(installer.installs().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupervised_rollback_reexecs_into_the_previous_release() {
    let (dir, index, installer) = release_fixture().await;
    let catalogue = crashing_release(dir.path(), &installer);
    index.publish(ROOST, "0.3.0", HOUR);
    let data = dir.path().join("data");
    let start = || {
        let mut cmd = daemon(&data, &index, &installer, &[]);
        cmd.env("ROOST_RUNTIMES", &catalogue);
        spawn(cmd)
    };
    // 0.2.0 installs 0.3.0 and re-executes into it; 0.3.0 cannot start (its first boot).
    let (mut child, _) = start();
    assert_eq!(child.wait().unwrap().code(), Some(2));
    // The operator starts it again by hand: a second failed boot, then the third rolls back
    // and, with nothing supervising, re-executes into 0.2.0, which stays up.
    let (mut child, _) = start();
    assert_eq!(child.wait().unwrap().code(), Some(2));
    let (mut child, listening) = start();
    let addr = listening.recv_timeout(Duration::from_secs(60)).expect("0.2.0 runs after the rollback");
    assert!(child.try_wait().unwrap().is_none());
    let status = update_status(&addr).await;
    assert_eq!(status["current"], "0.2.0");
    assert_eq!((status["rollback"]["from"].as_str(), status["rollback"]["boots"].as_i64()), (Some("0.3.0"), Some(3)));
    assert_eq!(installer.installs(), ["roost-server 0.3.0", "roost-server 0.2.0"]);
    stop(&mut child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kill_switch_in_the_environment_stops_every_install() {
    let (dir, index, installer) = release_fixture().await;
    index.publish(ROOST, "0.3.0", HOUR);
    let mut cmd = daemon(&dir.path().join("data"), &index, &installer, &[]);
    cmd.env("SERVICE_AUTO_UPDATE", "Off");
    let (mut child, listening) = spawn(cmd);
    let addr = listening.recv_timeout(Duration::from_secs(60)).expect("started");
    let checked = reqwest::Client::new()
        .post(format!("http://{addr}/api/update-check/check-now"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(checked["install"], Value::Null);
    assert_eq!(
        (checked["status"]["kill_switch"].as_bool(), checked["status"]["update_available"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(installer.installs().is_empty());
    stop(&mut child);

    // `roost update` says why it will not install.
    let out = Command::new(env!("CARGO_BIN_EXE_roost"))
        .env("SERVICE_AUTO_UPDATE", "0")
        .args(["update", "--update-index-url", &index.url, "--update-install-command", &installer.command()])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SERVICE_AUTO_UPDATE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roost_update_installs_and_explains_a_source_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let index = FakeIndex::start().await;
    let installer = FakeInstaller::new(&dir.path().join("installer"));
    index.publish(ROOST, "0.0.1", HOUR);
    let update = |version: &str| {
        std::fs::write(installer.version_file(), format!("{version}\n")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_roost"))
            .env_remove("SERVICE_AUTO_UPDATE")
            .env("ROOST_VERSION_FILE", installer.version_file())
            .args(["update", "--update-index-url", &index.url, "--update-install-command", &installer.command()])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // This test binary is built in the source checkout, and 0.1.0 is newer than every release.
    let (code, out) = update("0.1.0");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("source checkout") && out.contains("not a downgrade"), "{out}");
    assert!(installer.installs().is_empty());

    index.publish(ROOST, "0.4.0", HOUR);
    let (code, out) = update("0.1.0");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("installing roost-server 0.4.0") && out.contains("Installed roost-server 0.4.0"), "{out}");
    assert_eq!(installer.installs(), ["roost-server 0.4.0"]);
}

/// `roost <args>` with the local index and installer, as the version in the version file.
fn roost(index: &FakeIndex, installer: &FakeInstaller, data_dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_roost"))
        .env_remove("SERVICE_AUTO_UPDATE")
        .env("ROOST_VERSION_FILE", installer.version_file())
        .args(args)
        .args(["--update-index-url", &index.url, "--update-install-command", &installer.command()])
        .args(["--update-signature-url", &index.signature_url()])
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_installs_nothing_from_another_repository_and_says_so() {
    let (dir, index, installer) = release_fixture().await;
    // The index reports another project's crate under roost's package name (and under the
    // crates.io name `roost`, which is another project's).
    let stranger = "https://github.com/someone-else/roost";
    index.publish_from(stranger, ROOST, "0.8.0", HOUR);
    index.publish_from(stranger, "roost", "0.8.0", HOUR);
    let mut cmd = daemon(&dir.path().join("data"), &index, &installer, &[]);
    // issue 12: a negative cadence is clamped to the lower bound, 30 s.
    cmd.env("SERVICE_UPDATE_CHECK_SECS", "-5");
    let (mut child, listening) = spawn(cmd);
    let addr = listening.recv_timeout(Duration::from_secs(60)).expect("the daemon started");
    let mut status = update_status(&addr).await;
    for _ in 0..200 {
        if status["last_check"].is_object() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        status = update_status(&addr).await;
    }
    assert_eq!(status["package"], "roost-server", "roost's own crate by default");
    assert_eq!(status["check_every_secs"], 30);
    assert_eq!(status["last_check"]["outcome"], "refused", "{status}");
    assert!(status["last_check"]["detail"].as_str().unwrap().contains(stranger), "{status}");
    assert_eq!(status["held"][0]["version"], "0.8.0");
    assert_eq!(status["held"][0]["reason"], "refused: another repository");
    assert_eq!(status["update_available"], false);
    assert!(child.try_wait().unwrap().is_none(), "nothing installed, so no restart");
    assert!(installer.installs().is_empty(), "{:?}", installer.installs());

    // `roost status` says it.
    let out = Command::new(env!("CARGO_BIN_EXE_roost"))
        .env_remove("SERVICE_API_TOKENS")
        .args(["status", "--url", &format!("http://{addr}")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("trusts       roost-server releases naming {ROOST_REPOSITORY}")), "{text}");
    assert!(text.contains("signatures not checked (no --update-public-key)"), "{text}");
    assert!(text.contains("last check   refused") && text.contains(stranger), "{text}");
    assert!(text.contains("held         0.8.0 (refused: another repository)"), "{text}");
    stop(&mut child);

    // `roost update` refuses too, and fails.
    let (code, out) = roost(&index, &installer, &dir.path().join("data"), &["update"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is not roost's") && out.contains(stranger), "{out}");
    assert!(installer.installs().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roost_update_with_a_public_key_installs_only_signed_releases() {
    let (dir, index, installer) = release_fixture().await;
    let data = dir.path().join("data");
    let key = ReleaseKey::generate();
    let public = key.public_key();

    // A key that is not one is refused at once, as bad usage.
    let (code, out) = roost(&index, &installer, &data, &["update", "--update-public-key", "RWQnot-a-key"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("not a minisign public key"), "{out}");

    index.publish(ROOST, "0.3.0", HOUR);
    let (code, out) = roost(&index, &installer, &data, &["update", "--update-public-key", &public]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is not signed") && out.contains("held back (refused: unsigned)"), "{out}");
    assert!(installer.installs().is_empty());

    index.publish(ROOST, "0.4.0", HOUR);
    index.sign(ROOST, "0.4.0", &ReleaseKey::generate());
    let (code, out) = roost(&index, &installer, &data, &["update", "--update-public-key", &public]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("signed with another key"), "{out}");

    index.publish(ROOST, "0.5.0", HOUR);
    index.sign(ROOST, "0.5.0", &key);
    let (code, out) = roost(&index, &installer, &data, &["update", "--update-public-key", &public]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Installed roost-server 0.5.0"), "{out}");
    assert_eq!(installer.installs(), ["roost-server 0.5.0"]);
}
