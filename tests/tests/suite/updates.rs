//! The self-updater in process, against a local package index and install script: what it
//! installs, the minimum age, both backoffs, the kill switch, the explicit opt-out,
//! plan-driven auto_update over a real heartbeat, and what it refuses to install: releases
//! of another repository, releases yanked after the check, and with a public key unsigned
//! or badly signed ones. (Re-exec and the crash-loop rollback, which need real processes,
//! are in `server/tests/update.rs`.)

use std::time::Duration;

use roost_server::{ServeConfig, node::pusher::PushConfig, update::Role};
use roost_tests::{
    Backend, FakeIndex, FakeInstaller, ROOST_PACKAGE as ROOST, ROOST_REPOSITORY, ReleaseKey, TestServer,
};
use serde_json::{Value, json};

const HOUR: Duration = Duration::from_secs(3600);

struct Node {
    server: TestServer,
    index: FakeIndex,
    installer: FakeInstaller,
    _dir: tempfile::TempDir,
}

/// A daemon-role roost running 0.2.0 with the local index and installer, after its first
/// (automatic) check, which finds nothing published yet.
async fn node(configure: impl FnOnce(&mut ServeConfig)) -> Node {
    let index = FakeIndex::start().await;
    let dir = tempfile::tempdir().unwrap();
    let installer = FakeInstaller::new(dir.path());
    let (url, command, signatures) = (index.url.clone(), installer.command(), index.signature_url());
    let server = TestServer::start_with(Backend::Sqlite, |config| {
        config.update.role = Role::Daemon;
        config.update.index_url = url;
        config.update.install_command = command;
        config.update.signature_url = signatures;
        config.update.version = "0.2.0".into();
        configure(config);
    })
    .await;
    let node = Node { server, index, installer, _dir: dir };
    for _ in 0..200 {
        if !node.history().await.is_empty() {
            return node;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the worker never made its first check");
}

impl Node {
    async fn history(&self) -> Vec<Value> {
        let history = self.server.api(None).get("/api/update-check/history").await.ok();
        history["events"].as_array().cloned().unwrap_or_default()
    }

    async fn check_now(&self) -> Value {
        self.server.api(None).post("/api/update-check/check-now", json!({})).await.ok()
    }

    async fn status(&self) -> Value {
        self.server.api(None).get("/api/update-check/status").await.ok()
    }
}

fn held_secs(status: &Value, version: &str) -> (String, f64) {
    let held = status["held"].as_array().unwrap().iter().find(|h| h["version"] == version).expect("held");
    let until: prost_types::Timestamp = held["until"].as_str().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    (held["reason"].as_str().unwrap().to_owned(), until.seconds as f64 - now)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_the_newest_release_once_with_conditional_polls() {
    let node = node(|_| {}).await;
    let first = &node.history().await[0];
    assert_eq!((first["kind"].as_str(), first["outcome"].as_str()), (Some("check"), Some("failed")), "{first}");

    node.index.publish(ROOST, "0.1.9", 100 * HOUR);
    node.index.publish(ROOST, "0.3.0", 2 * HOUR);
    node.index.publish(ROOST, "0.4.0-beta.1", HOUR);
    let answer = node.check_now().await;
    assert_eq!(answer["install"]["version"], "0.3.0");
    assert_eq!(answer["install"]["outcome"], "ok", "{answer}");
    assert_eq!(node.installer.installs(), ["roost-server 0.3.0"]);
    let status = &answer["status"];
    assert_eq!((status["current"].as_str(), status["latest"].as_str()), (Some("0.2.0"), Some("0.3.0")));
    assert_eq!(status["update_available"], true);
    assert_eq!(status["guard_armed"], true, "a successful install arms the crash-loop guard");
    assert_eq!(status["restart"], "next_start");
    assert_eq!(status["role"], "daemon");
    assert_eq!(status["auto_update"], true, "the daemon installs by default");

    // The install looked at the index again (a conditional GET: nothing changed since the
    // check). The next poll is one conditional GET, answered 304, and installs nothing twice.
    let gets = node.index.gets();
    assert_eq!(node.index.not_modified(), 1);
    let again = node.check_now().await;
    assert_eq!(again["install"], Value::Null);
    assert_eq!((node.index.gets(), node.index.not_modified()), (gets + 1, 2));
    assert_eq!(node.installer.installs().len(), 1);

    let kinds: Vec<String> = node.history().await.iter().map(|e| format!("{} {}", e["kind"], e["outcome"])).collect();
    assert_eq!(kinds[..3], ["\"check\" \"ok\"", "\"install\" \"ok\"", "\"check\" \"ok\""]);

    // The banner can be dismissed for that version.
    assert_eq!(node.status().await["show_banner"], true);
    let dismissed = node.server.api(None).post("/api/update-check/dismiss", json!({"version": "0.3.0"})).await.ok();
    assert_eq!(dismissed["dismissed"], json!(["0.3.0"]));
    assert_eq!(node.status().await["show_banner"], false);
    node.server
        .api(None)
        .post("/api/update-check/dismiss", json!({"version": "latest"}))
        .await
        .err(400, "invalid_argument");
    // roost status shows the update state.
    let status = node.server.api(None).get("/api/status").await.ok();
    assert_eq!(status["update"]["latest"], "0.3.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimum_age_keeps_young_releases_back() {
    let node = node(|config| config.update.min_age = 24 * HOUR).await;
    node.index.publish(ROOST, "0.3.0", 30 * HOUR);
    node.index.publish(ROOST, "0.4.0", HOUR);
    let answer = node.check_now().await;
    assert_eq!(answer["install"]["version"], "0.3.0", "{answer}");
    assert_eq!(answer["status"]["latest"], "0.4.0");
    assert_eq!(answer["status"]["min_age_hours"], 24.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_versions_are_held_and_newer_ones_still_considered() {
    let node = node(|config| config.update.retry = Duration::from_secs(1800)).await;
    node.installer.fail("0.4.0", "error: failed to compile `roost-server v0.4.0`");
    node.index.publish(ROOST, "0.4.0", HOUR);
    let answer = node.check_now().await;
    assert_eq!(answer["install"]["outcome"], "failed");
    let (reason, secs) = held_secs(&answer["status"], "0.4.0");
    assert_eq!(reason, "install failed");
    assert!((1790.0..=1800.5).contains(&secs), "held for SERVICE_AUTOUPDATE_RETRY_SECS: {secs}");
    // Held: not tried again.
    assert_eq!(node.check_now().await["install"], Value::Null);
    assert_eq!(node.installer.installs(), ["roost-server 0.4.0"]);

    // A newer release is still considered.
    node.index.publish(ROOST, "0.5.0", HOUR);
    assert_eq!(node.check_now().await["install"]["outcome"], "ok");

    // A version the index lists before the registry serves it is held about 2 minutes.
    node.installer.fail("0.6.0", "error: could not find `roost-server` in registry `crates-io` with version `=0.6.0`");
    node.index.publish(ROOST, "0.6.0", Duration::ZERO);
    let answer = node.check_now().await;
    let (reason, secs) = held_secs(&answer["status"], "0.6.0");
    assert_eq!(reason, "not yet on every mirror");
    assert!((110.0..=120.5).contains(&secs), "{secs}");
    assert_eq!(node.installer.installs(), ["roost-server 0.4.0", "roost-server 0.5.0", "roost-server 0.6.0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kill_switch_beats_stored_config() {
    let node = node(|config| config.update.kill_switch = true).await;
    node.index.publish(ROOST, "0.3.0", HOUR);
    let set = node.server.api(None).post("/api/update-check/config", json!({"auto_update": true})).await.ok();
    assert_eq!((set["effective_auto_update"].as_bool(), set["kill_switch"].as_bool()), (Some(false), Some(true)));
    let answer = node.check_now().await;
    assert_eq!(answer["install"], Value::Null);
    assert_eq!(answer["status"]["update_available"], true, "checks still show what is available");
    assert_eq!(answer["status"]["auto_update"], false);
    assert!(node.installer.installs().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_opt_out_is_kept_and_needs_a_boolean() {
    let node = node(|_| {}).await;
    let api = node.server.api(None);
    api.post("/api/update-check/config", json!({})).await.err(400, "invalid_argument");
    api.post("/api/update-check/config", json!({"auto_update": "no"})).await.err(400, "invalid_argument");
    let set = api.post("/api/update-check/config", json!({"auto_update": false})).await.ok();
    assert_eq!(set["config"]["auto_update"], false);
    assert_eq!(set["config"]["auto_update_source"], "user");
    node.index.publish(ROOST, "0.3.0", HOUR);
    assert_eq!(node.check_now().await["install"], Value::Null);
    assert!(node.installer.installs().is_empty());
    // Mutating update routes are origin-checked like every dashboard route.
    let foreign = reqwest::Client::new()
        .post(node.server.url("/api/update-check/check-now"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
}

/// A central roost whose account has `plan`, and a daemon pushing to it.
async fn plan_sync(plan: &str, configure: impl FnOnce(&mut ServeConfig)) -> (TestServer, Node) {
    let central = TestServer::start(Backend::Sqlite).await;
    let account = central.account(0).await;
    central.store().await.set_plan(&account.id, plan).await.unwrap();
    let push = PushConfig {
        heartbeat_every: Duration::from_millis(100),
        ..PushConfig::new(central.url(""), account.key.clone())
    };
    let node = node(|config| {
        config.push = Some(push);
        configure(config);
    })
    .await;
    (central, node)
}

async fn wait_for_plan(node: &Node, plan: &str) -> Value {
    for _ in 0..200 {
        let config = node.server.api(None).get("/api/update-check/config").await.ok();
        if config["config"]["plan"] == plan {
            return config;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the node never learned plan {plan}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entitled_plan_enables_auto_update_and_installs_the_paid_package() {
    let (_central, node) = plan_sync("pro", |config| {
        config.update.role = Role::Dashboard;
        config.update.paid_package = PAID.into();
    })
    .await;
    node.index.publish(PAID, "0.2.0", HOUR);
    // A dashboard that did not opt in: the plan turns the flag on, but it still does not install.
    let config = wait_for_plan(&node, "pro").await;
    assert_eq!(
        (config["config"]["auto_update"].as_bool(), config["config"]["auto_update_source"].as_str()),
        (Some(true), Some("plan"))
    );
    assert_eq!(config["effective_auto_update"], false, "only the daemon role installs");
    assert!(node.installer.installs().is_empty());

    let (_central, node) = plan_sync("pro", paid).await;
    wait_for_plan(&node, "pro").await;
    node.index.publish(PAID, "0.2.0", HOUR);
    wait_for_installs(&node, 1).await;
    assert_eq!(node.installer.installs(), ["roost-pro 0.2.0"], "the upgrade installs the paid package at once");
    assert_eq!(node.status().await["package"], PAID);

    // A failed paid install is tried again at a later heartbeat (the failed version held).
    let (_central, node) = plan_sync("starter", paid).await;
    wait_for_plan(&node, "starter").await;
    node.installer.fail("0.2.0", "error: failed to compile `roost-pro v0.2.0`");
    node.index.publish(PAID, "0.2.0", HOUR);
    wait_for_installs(&node, 1).await;
    assert_eq!(node.status().await["package"], ROOST, "not switched while the paid install failed");
    node.index.publish(PAID, "0.2.1", HOUR);
    wait_for_installs(&node, 2).await;
    assert_eq!(node.installer.installs(), ["roost-pro 0.2.0", "roost-pro 0.2.1"]);
    assert_eq!(node.status().await["package"], PAID);
}

/// The paid tier's package in these tests (there is none by default).
const PAID: &str = "roost-pro";

fn paid(config: &mut ServeConfig) {
    config.update.paid_package = PAID.into();
}

async fn wait_for_installs(node: &Node, count: usize) {
    for _ in 0..200 {
        if node.installer.installs().len() >= count {
            // Let the install's state be written.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{count} installs never happened: {:?}", node.installer.installs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_sync_never_overrides_an_opt_out_or_the_kill_switch_or_acts_for_free_plans() {
    // Opted out before the plan arrives.
    let (central, node) = plan_sync("free", |_| {}).await;
    wait_for_plan(&node, "free").await;
    let config = node.server.api(None).get("/api/update-check/config").await.ok();
    assert_eq!(config["config"]["auto_update"], Value::Null, "a free plan changes nothing");
    node.server.api(None).post("/api/update-check/config", json!({"auto_update": false})).await.ok();
    let account = central.store().await.list_accounts().await.unwrap()[0].id.clone();
    central.store().await.set_plan(&account, "enterprise").await.unwrap();
    let config = wait_for_plan(&node, "enterprise").await;
    assert_eq!(
        (config["config"]["auto_update"].as_bool(), config["config"]["auto_update_source"].as_str()),
        (Some(false), Some("user"))
    );
    assert!(node.installer.installs().is_empty());

    let (_central, node) = plan_sync("trial", |config| config.update.kill_switch = true).await;
    let config = wait_for_plan(&node, "trial").await;
    assert_eq!(config["config"]["auto_update"], Value::Null, "nothing under the kill switch");
    assert!(node.installer.installs().is_empty());
}

/// A repository that is not roost's.
const STRANGER: &str = "https://github.com/someone-else/roost";

fn history_has(history: &[Value], kind: &str, version: &str, outcome: &str) -> Option<String> {
    history
        .iter()
        .find(|e| e["kind"] == kind && e["version"] == version && e["outcome"] == outcome)
        .map(|e| e["detail"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_another_repository_is_refused_held_and_shown() {
    let node = node(|_| {}).await;
    // The case: the package's name on the index belongs to another project.
    node.index.publish_from(STRANGER, ROOST, "0.8.0", HOUR);
    let answer = node.check_now().await;
    assert_eq!(answer["install"], Value::Null, "{answer}");
    assert!(node.installer.installs().is_empty());
    let check = &answer["check"];
    assert_eq!(check["outcome"], "refused", "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(detail.contains("0.8.0") && detail.contains(STRANGER) && detail.contains(ROOST_REPOSITORY), "{detail}");
    let status = &answer["status"];
    assert_eq!(status["latest"], "", "a stranger's release is not roost's latest");
    assert_eq!((status["update_available"].as_bool(), status["show_banner"].as_bool()), (Some(false), Some(false)));
    assert_eq!(status["repository"], ROOST_REPOSITORY);
    assert_eq!(status["public_key"], "");
    assert_eq!(status["last_check"]["outcome"], "refused");
    // Held like a failed version.
    let (reason, secs) = held_secs(status, "0.8.0");
    assert_eq!(reason, "refused: another repository");
    assert!((1790.0..=1800.5).contains(&secs), "{secs}");
    let history = node.history().await;
    assert!(history_has(&history, "check", "", "refused").is_some_and(|d| d.contains(STRANGER)), "{history:?}");
    // `roost status` reads the same through `GET /api/status` (its output: server/tests/update.rs).
    let status = node.server.api(None).get("/api/status").await.ok();
    assert_eq!(status["update"]["held"][0]["reason"], "refused: another repository");

    // Still nothing on the next polls.
    assert_eq!(node.check_now().await["install"], Value::Null);
    assert!(node.installer.installs().is_empty());

    // A release of roost's own repository (however the URL is spelled) installs; the
    // stranger's newer one stays refused.
    node.index.publish_from("HTTPS://GitHub.com/roost-dev/roost.git/", ROOST, "0.3.0", 2 * HOUR);
    let answer = node.check_now().await;
    assert_eq!(answer["install"]["outcome"], "ok", "{answer}");
    assert_eq!(node.installer.installs(), ["roost-server 0.3.0"]);
    assert_eq!(answer["status"]["latest"], "0.3.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_roosts_repository_installs_and_a_later_stranger_publish_stops_updates() {
    let node = node(|_| {}).await;
    node.index.publish(ROOST, "0.3.0", HOUR);
    assert_eq!(node.check_now().await["install"]["outcome"], "ok");
    assert_eq!(node.installer.installs(), ["roost-server 0.3.0"]);
    // The name changes hands: the crate now names another repository, so none of its
    // releases is trusted any more, roost's own older ones included.
    node.index.publish_from(STRANGER, ROOST, "0.4.0", HOUR);
    let answer = node.check_now().await;
    assert_eq!(answer["install"], Value::Null);
    assert_eq!(answer["check"]["outcome"], "refused");
    assert_eq!(node.installer.installs().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_yanked_between_check_and_install_is_refused() {
    let node = node(|_| {}).await;
    node.index.publish(ROOST, "0.3.0", HOUR);
    // The check sees 0.3.0; before the install looks again, it is yanked.
    node.index.yank_after_next_listing(ROOST, "0.3.0");
    let answer = node.check_now().await;
    assert_eq!(answer["check"]["outcome"], "ok");
    let install = &answer["install"];
    assert_eq!((install["version"].as_str(), install["outcome"].as_str()), (Some("0.3.0"), Some("refused")));
    assert!(install["detail"].as_str().unwrap().contains("yanked"), "{install}");
    assert!(node.installer.installs().is_empty());
    assert_eq!(held_secs(&answer["status"], "0.3.0").0, "refused: yanked");
    assert_eq!(answer["status"]["last_attempt"]["outcome"], "refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_public_key_only_releases_signed_with_it_install() {
    let key = ReleaseKey::generate();
    let public = key.public_key();
    let node = node(|config| config.update.public_key = Some(public)).await;
    assert_eq!(node.status().await["public_key"], key.public_key());

    // Unsigned: refused, held, nothing installed, nothing downloaded.
    node.index.publish(ROOST, "0.3.0", HOUR);
    let install = node.check_now().await["install"].clone();
    assert_eq!(install["outcome"], "refused", "{install}");
    assert!(install["detail"].as_str().unwrap().contains("not signed"), "{install}");
    assert_eq!(node.index.downloads(), 0);
    assert_eq!(held_secs(&node.status().await, "0.3.0").0, "refused: unsigned");

    // Signed with another key: refused.
    node.index.publish(ROOST, "0.4.0", HOUR);
    node.index.sign(ROOST, "0.4.0", &ReleaseKey::generate());
    let install = node.check_now().await["install"].clone();
    assert_eq!((install["version"].as_str(), install["outcome"].as_str()), (Some("0.4.0"), Some("refused")));
    assert!(install["detail"].as_str().unwrap().contains("another key"), "{install}");
    assert_eq!(held_secs(&node.status().await, "0.4.0").0, "refused: bad signature");

    // Signed with the key, but over other bytes than the release's .crate file: refused.
    node.index.publish(ROOST, "0.5.0", HOUR);
    node.index.put_signature(ROOST, "0.5.0", &key.sign(b"roost-server-0.5.0.crate, built from elsewhere"));
    let install = node.check_now().await["install"].clone();
    assert_eq!(install["outcome"], "refused", "{install}");
    assert!(install["detail"].as_str().unwrap().contains("does not match"), "{install}");

    // Signed with the key: installed.
    node.index.publish(ROOST, "0.6.0", HOUR);
    node.index.sign(ROOST, "0.6.0", &key);
    let answer = node.check_now().await;
    assert_eq!(answer["install"]["outcome"], "ok", "{answer}");
    assert_eq!(node.installer.installs(), ["roost-server 0.6.0"]);

    let refused: Vec<String> = node
        .history()
        .await
        .iter()
        .filter(|e| e["outcome"] == "refused")
        .map(|e| e["version"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(refused, ["0.5.0", "0.4.0", "0.3.0"], "each refusal is in the history, newest first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn there_is_no_paid_tier_package_unless_one_is_configured() {
    let (_central, node) = plan_sync("pro", |_| {}).await;
    // Whoever claims the name first publishes it: nothing installs it by default.
    node.index.publish(PAID, "0.9.0", HOUR);
    node.index.publish_from(STRANGER, "roost-pro", "0.9.1", HOUR);
    let config = wait_for_plan(&node, "pro").await;
    assert_eq!(config["config"]["auto_update_source"], "plan");
    // Several heartbeats.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(node.installer.installs().is_empty(), "{:?}", node.installer.installs());
    assert_eq!(node.status().await["package"], ROOST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_paid_tier_package_follows_the_same_rules() {
    // Another repository: refused once, held; roost's own: installed.
    let (_central, node) = plan_sync("pro", paid).await;
    wait_for_plan(&node, "pro").await;
    node.index.publish_from(STRANGER, PAID, "0.2.0", HOUR);
    let refusal = wait_for_history(&node, "plan", "0.2.0", "refused").await;
    assert!(refusal.contains(STRANGER), "{refusal}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(node.installer.installs().is_empty());
    let history = node.history().await;
    assert_eq!(history.iter().filter(|e| e["outcome"] == "refused").count(), 1, "once per hold: {history:?}");
    assert_eq!(held_secs(&node.status().await, "0.2.0").0, "refused: another repository");
    assert_eq!(node.status().await["package"], ROOST, "not switched to a stranger's package");

    // With a key: unsigned refused, signed installed.
    let key = ReleaseKey::generate();
    let public = key.public_key();
    let (_central, node) = plan_sync("pro", |config| {
        paid(config);
        config.update.public_key = Some(public);
    })
    .await;
    wait_for_plan(&node, "pro").await;
    node.index.publish(PAID, "0.2.0", HOUR);
    let refusal = wait_for_history(&node, "install", "0.2.0", "refused").await;
    assert!(refusal.contains("not signed"), "{refusal}");
    assert!(node.installer.installs().is_empty());
    node.index.publish(PAID, "0.2.1", HOUR);
    node.index.sign(PAID, "0.2.1", &key);
    wait_for_installs(&node, 1).await;
    assert_eq!(node.installer.installs(), ["roost-pro 0.2.1"]);
    assert_eq!(node.status().await["package"], PAID);
}

async fn wait_for_history(node: &Node, kind: &str, version: &str, outcome: &str) -> String {
    for _ in 0..200 {
        if let Some(detail) = history_has(&node.history().await, kind, version, outcome) {
            return detail;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no {kind} {version} {outcome} in {:?}", node.history().await);
}
