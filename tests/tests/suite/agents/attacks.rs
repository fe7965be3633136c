//! A tenant's shell attacking the host from inside its hosted agent (the hostile runtime,
//! tests/runtimes/hostile_agent.py, doing what its turns ask), on what the sandbox once let
//! through, with roost running as root as it does in containers and CI:
//!
//! - the agent was host root: its files root's on the host, a `chmod 4755` file
//!   setuid-root there, `/proc/sys` writable (those probes are in the sandbox test's
//!   probe list; here, what its files are on the host);
//! - its disk had no bound beside roost's store;
//! - a tree deep enough aborted roost at destroy, and one under the sandbox's directory
//!   at every start;
//! - another agent's token worked from its sandbox.
//!
//! Each test is the attack, then what must hold. They need root (a uid per agent and a
//! disk per agent need it), as CI has; elsewhere they say so and pass.

use std::{os::unix::fs::MetadataExt as _, path::Path, time::Duration};

use roost_server::{llm::Upstream, runtimes::Catalogue, sandbox::UidRange};
use roost_tests::{Backend, each_backend, fake_models::FakeModels, workspace::Workspace};
use serde_json::json;

use super::{
    TEST_CATALOGUE,
    sandbox::{ask, hostile},
    start,
};

each_backend!(deep_trees_in_the_workspace_and_tmp_neither_stop_nor_outlive_roost);

/// Whether this process can give agents uids and disks; says so when it cannot.
fn as_root() -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("skipped: a uid and a disk per agent need roost to run as root");
    }
    root
}

fn catalogue(entries: &[String]) -> Catalogue {
    Catalogue::from_toml(&format!("{TEST_CATALOGUE}\n{}", entries.join("\n"))).expect("catalogue")
}

/// Bytes free for unprivileged users on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> u64 {
    let stat = rustix::fs::statvfs(dir).unwrap();
    stat.f_bavail * stat.f_frsize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_is_never_host_root_and_cannot_outgrow_its_disk() {
    if !as_root() {
        return;
    }
    let limits = "memory_mb = 96\nmax_processes = 24\ntmp_mb = 4\ndisk_mb = 64";
    let server =
        start(Backend::Sqlite, |config| config.hosting.catalogue = catalogue(&[hostile("hostile", limits)])).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("hostile", "root me").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let data_dir = &server.config.data_dir;
    let workspace = Workspace::of(data_dir, &id);

    // Inside it is uid 1000; what it makes is an unprivileged uid's on the host, and its
    // setuid bit makes nothing run as root.
    let planted = ask(&api, &id, json!({"plant": true})).await;
    assert_eq!(planted["uid"], 1000, "{planted}");
    let owned = workspace.owner("owned.txt").unwrap();
    let range = UidRange::default();
    assert!(owned.uid >= range.first && owned.uid - range.first < range.count, "{owned:?}");
    let setuid = workspace.owner("setuid-probe").unwrap();
    assert_eq!(setuid.uid, owned.uid, "not root's: {setuid:?}");
    assert_ne!(setuid.mode & 0o4000, 0, "the bit is there, on a file of an unprivileged uid: {setuid:?}");
    let image = workspace.image().expect("its disk").to_path_buf();
    assert_eq!(std::fs::metadata(&image).unwrap().uid(), owned.uid, "the disk is that uid's");
    assert_eq!(std::fs::metadata(&image).unwrap().mode() & 0o777, 0o600);

    // Another agent is another uid.
    let other = api.provision("hostile", "neighbour").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&other, "running").await;
    ask(&api, &other, json!({"plant": true})).await;
    let theirs = Workspace::of(data_dir, &other).owner("owned.txt").unwrap();
    assert_ne!(theirs.uid, owned.uid, "one uid per agent");

    // Writing past its disk fails in the agent, and the host loses no space: the disk was
    // reserved whole when it was made.
    let before = free_bytes(data_dir);
    let filled = ask(&api, &id, json!({"fill_mb": 200})).await;
    assert_eq!(filled["stopped"], "ENOSPC", "{filled}");
    let written = filled["written_mb"].as_u64().unwrap();
    assert!((32..64).contains(&written), "{filled}");
    let lost = before.saturating_sub(free_bytes(data_dir));
    assert!(lost < 16 << 20, "the host lost {lost} bytes to a full agent disk");
    // Its size is exact, and cheap: the filesystem's own count, running or paused.
    let view = api.get(&format!("/api/instances/{id}")).await.ok();
    let bytes = view["workspace_bytes"].as_u64().unwrap();
    assert!(bytes >= written << 20 && bytes <= 64 << 20, "{view}");
    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    let paused = api.get(&format!("/api/instances/{id}")).await.ok();
    // The same count, read from the stopped disk; the graceful stop may have written a block
    // (the runtime's SIGTERM marker, on a nearly full disk).
    let stopped = paused["workspace_bytes"].as_u64().unwrap();
    assert!(stopped == bytes || stopped == bytes + 4096, "the stopped disk reads the same: {bytes} then {paused}");
    assert_eq!(workspace.read("owned.txt").unwrap(), "mine", "kept while paused");
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status(&id, "running").await;
    assert_eq!(workspace.read("owned.txt").unwrap(), "mine", "kept across a boot");

    // The other agent and roost carry on; destroy takes the disk.
    assert_eq!(ask(&api, &other, json!({"fork": 2})).await, 2);
    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    assert!(!image.exists(), "destroy deletes the disk");
    assert!(!data_dir.join("agents").join(&id).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_token_opens_nothing_outside_its_own_sandbox() {
    let fake = FakeModels::start().await;
    let openai = fake.openai_base_url();
    let limits = "memory_mb = 96\nmax_processes = 24\ntmp_mb = 4\ndisk_mb = 32";
    let server = start(Backend::Sqlite, move |config| {
        config.hosting.catalogue = catalogue(&[hostile("hostile", limits)]);
        config.hosting.models.openai = Some(Upstream { base_url: openai, api_key: Some("sk-roost".into()) });
    })
    .await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let stranger = server.account(1_000).await;
    let stranger_api = server.api(Some(&stranger));
    let a = api.provision("hostile", "victim").await["id"].as_str().unwrap().to_owned();
    let c = stranger_api.provision("hostile", "thief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&a, "running").await;
    stranger_api.wait_status(&c, "running").await;

    // A's token, as a thief would have it (read out of A's workspace or environment).
    let token = ask(&api, &a, json!({"token": true})).await;
    let token = token.as_str().unwrap().to_owned();
    assert!(token.starts_with("rat_"), "{token}");
    // From C's sandbox it opens nothing; C's own still works.
    let stolen = ask(&stranger_api, &c, json!({"model_with_token": token})).await;
    assert!(stolen.as_str().unwrap().starts_with("blocked: HTTP 401"), "{stolen}");
    let own = ask(&stranger_api, &c, json!({"model": "hello"})).await;
    assert!(own.as_str().unwrap().starts_with("REACHED"), "{own}");
    // Nor on roost's listener: the model gateway, OTLP ingest.
    let gateway = server
        .http
        .post(server.url("/llm/v1/chat/completions"))
        .bearer_auth(&token)
        .json(&json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(gateway.status(), 401);
    let ingest = server.http.post(server.url("/v1/traces")).bearer_auth(&token).json(&json!({})).send().await.unwrap();
    assert_eq!(ingest.status(), 401);
    // A's own calls still go through: the token is A's, on A's socket.
    let fine = ask(&api, &a, json!({"model": "hello"})).await;
    assert!(fine.as_str().unwrap().starts_with("REACHED"), "{fine}");
}

/// 100,000 nested directories in the workspace and 30,000 in its `/tmp` (the sandbox's
/// own directory is read-only now), then pause, resume, a roost restart and destroy; and a
/// 30,000-deep tree an older roost let an agent leave under `<data-dir>/sandbox`: roost
/// stays up throughout, and nothing is left after destroy.
async fn deep_trees_in_the_workspace_and_tmp_neither_stop_nor_outlive_roost(backend: Backend) {
    if !as_root() {
        return;
    }
    let limits = "memory_mb = 256\nmax_processes = 24\ntmp_mb = 64\ndisk_mb = 2048";
    let server = start(backend, |config| config.hosting.catalogue = catalogue(&[hostile("deep", limits)])).await;
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("deep", "dig").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let data_dir = server.config.data_dir.clone();
    let inside = data_dir.join("agents").join(&id).display().to_string();
    let dug = ask(&api, &id, json!({"nest": {"under": inside, "depth": 100_000}})).await;
    assert_eq!(dug["made"], 100_000, "{dug}");
    let dug = ask(&api, &id, json!({"nest": {"under": "/tmp", "depth": 30_000}})).await;
    assert_eq!(dug["made"], 30_000, "{dug}");
    let dug = ask(&api, &id, json!({"nest": {"under": "/run/roost", "depth": 10}})).await;
    assert_eq!(dug, json!({"made": 0, "stopped": "EROFS"}), "the sandbox's own directory is read-only");
    let healthy = |server: &roost_tests::TestServer| {
        let (http, url) = (server.http.clone(), server.url("/healthz"));
        async move { http.get(url).send().await.is_ok_and(|r| r.status() == 200) }
    };

    api.post(&format!("/api/instances/{id}/pause"), json!({})).await.ok();
    assert!(healthy(&server).await);
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status(&id, "running").await;
    assert_eq!(ask(&api, &id, json!({"fork": 1})).await, 1);

    // What an older roost let an agent make under its sandbox directory, found at start.
    let legacy = data_dir.join("sandbox").join("ins_legacy");
    nest_on_host(&legacy.join("agent"), 30_000);
    let server = server.restart().await;
    assert!(healthy(&server).await);
    let api = server.api(Some(&account));
    api.wait_status(&id, "running").await;
    // Deleting a directory costs a disk trim on hosts mounted with `discard` (~1 ms each).
    for _ in 0..1800 {
        if !legacy.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!legacy.exists(), "the start swept it, in the background");

    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    assert!(healthy(&server).await);
    assert!(!data_dir.join("agents").join(&id).exists(), "the workspace is gone");
    assert!(!data_dir.join("agents").join(format!("{id}.img")).exists(), "its disk too");
    let left: Vec<_> = std::fs::read_dir(data_dir.join("sandbox")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "no socket directory left: {left:?}");
}

/// `depth` nested directories under `dir`, made the way an agent would: one level at a
/// time, relative to the last.
fn nest_on_host(dir: &Path, depth: usize) {
    use rustix::fs::{CWD, Mode, OFlags, mkdirat, openat};
    std::fs::create_dir_all(dir).unwrap();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut current = openat(CWD, dir, flags, Mode::empty()).unwrap();
    for _ in 0..depth {
        mkdirat(&current, c"d", Mode::RWXU).unwrap();
        current = openat(&current, c"d", flags, Mode::empty()).unwrap();
    }
}
