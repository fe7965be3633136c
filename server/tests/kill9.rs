//! `kill -9` of the real `roost` binary, and what must hold after it restarts: runtime
//! processes died with roost (or are reaped at the next start) and are never doubled,
//! every acknowledged span, turn and provision is stored, and money matches the ledger.
//!
//! Each test runs on SQLite and on PostgreSQL. Processes are counted by the
//! `ROOST_INSTANCE_ID` in their environment (`/proc/<pid>/environ`), so these tests need
//! Linux.

#![cfg(target_os = "linux")]
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use prost::Message as _;
use roost_tests::{
    Api, Backend, TestDatabase, each_backend, fake_telegram::FakeTelegram, process::listening_addresses,
};
use serde_json::{Value, json};

each_backend!(
    runtime_processes_die_with_roost_and_are_not_doubled,
    openclaw_dies_with_roost_workers_included_and_comes_back,
    runtime_processes_that_outlive_roost_are_reaped_at_start,
    a_boot_cancelled_while_starting_never_doubles_the_process,
    acked_spans_survive_a_kill_during_ingest,
    money_and_agents_survive_a_kill_during_provisions,
    answered_turns_survive_a_kill,
    telegram_messages_survive_a_kill
);

/// The runtimes these tests use. `stubborn` is the example runtime started by a Python
/// line that first clears its parent-death signal (`prctl(PR_SET_PDEATHSIG, 0)`): a
/// runtime that outlives a killed roost, as one on a system without that signal would.
const CATALOGUE: &str = r#"
[[runtime]]
id = "echo"
driver = "echo"
price_cents_month = 0
channels = ["telegram"]
included_model = true
default_model = "echo"

[[runtime]]
id = "echo-paid"
driver = "echo"
price_cents_month = 100
included_model = true
default_model = "echo"

[[runtime]]
id = "example"
driver = "process"
price_cents_month = 0
included_model = true
default_model = "example"
command = ["python3", "{runtimes_dir}/example_agent.py"]

[[runtime]]
id = "stubborn"
driver = "process"
price_cents_month = 0
included_model = true
default_model = "example"
command = ["python3", "-c", "import ctypes, runpy, sys; ctypes.CDLL(None).prctl(1, 0, 0, 0, 0); runpy.run_path(sys.argv[1], run_name='__main__')", "{runtimes_dir}/example_agent.py"]

[[runtime]]
id = "slow-paid"
driver = "process"
price_cents_month = 100
included_model = true
default_model = "example"
command = ["python3", "{runtimes_dir}/example_agent.py"]
env = { EXAMPLE_BOOT_DELAY_MS = "3000" }
"#;

/// One roost installation (a data directory and its store) that is started, killed and
/// started again.
struct Install {
    data_dir: tempfile::TempDir,
    catalogue: PathBuf,
    database: Option<TestDatabase>,
}

impl Install {
    async fn new(backend: Backend) -> Self {
        Self::with_catalogue(backend, CATALOGUE).await
    }

    async fn with_catalogue(backend: Backend, catalogue_text: &str) -> Self {
        let data_dir = tempfile::tempdir().unwrap();
        let catalogue = data_dir.path().join("catalogue.toml");
        std::fs::write(&catalogue, catalogue_text).unwrap();
        let database = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(TestDatabase::create().await),
        };
        Self { data_dir, catalogue, database }
    }

    fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    fn database_url(&self) -> String {
        match &self.database {
            Some(db) => db.url().to_owned(),
            None => format!("sqlite://{}", self.data_dir().join("roost.db").display()),
        }
    }

    /// `roost` on this installation's data directory and store.
    fn roost(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_roost"));
        cmd.arg("--data-dir")
            .arg(self.data_dir())
            .arg("--database-url")
            .arg(self.database_url())
            .env_remove("ROOST_ADDR")
            .env("RUST_LOG", "warn,roost_server::serve=info");
        cmd
    }

    /// `roost serve` with `extra` flags; returns once it listens.
    fn serve(&self, extra: &[&str]) -> Roost {
        let mut child = self
            .roost()
            .args(["serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--boot-timeout-secs", "20"])
            // No update checks against crates.io.
            .args(["--update-index-url", ""])
            .arg("--runtimes")
            .arg(&self.catalogue)
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let addr = listening_addresses(&mut child)
            .recv_timeout(Duration::from_secs(60))
            .expect("roost did not start listening");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Roost { child, base: format!("http://{addr}"), http }
    }

    /// `roost accounts create --credits <cents> --json`: (account id, API key).
    fn create_account(&self, credits: i64) -> (String, String) {
        let created = json_output(self.roost().args([
            "accounts",
            "create",
            "--name",
            "kill9",
            "--credits",
            &credits.to_string(),
            "--json",
        ]));
        (created["account_id"].as_str().unwrap().to_owned(), created["api_key"].as_str().unwrap().to_owned())
    }

    /// `roost credits add`.
    fn add_credits(&self, account: &str, cents: i64) {
        json_output(self.roost().args(["credits", "add", "--account", account, &cents.to_string(), "--json"]));
    }

    async fn db(&self) -> Db {
        match &self.database {
            Some(db) => Db::Postgres(sqlx::PgPool::connect(db.url()).await.unwrap()),
            None => Db::Sqlite(sqlx::SqlitePool::connect(&self.database_url()).await.unwrap()),
        }
    }
}

fn json_output(cmd: &mut Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A running `roost serve`; killed with SIGKILL when dropped.
struct Roost {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Roost {
    fn api(&self, key: &str) -> Api {
        Api::new(self.http.clone(), self.base.clone(), Some(key.to_owned()))
    }

    fn caller(&self, key: &str) -> Caller {
        Caller { http: self.http.clone(), base: self.base.clone(), key: key.to_owned() }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// `kill -9`, and waits for the process to be gone.
    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Roost {
    /// Stops roost as an operator would (SIGTERM), so it stops its runtimes too (the
    /// stubborn ones would outlive a kill); SIGKILL if it takes too long.
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid()) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process, told apart from a later one with the same pid by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Proc {
    pid: i32,
    start_time: i64,
}

/// State, parent and start time (`/proc/<pid>/stat` fields 3, 4 and 22).
fn stat(pid: i32) -> Option<(char, i32, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((fields.first()?.chars().next()?, fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

impl Proc {
    fn of(pid: i32) -> Self {
        Self { pid, start_time: stat(pid).expect("a live process").2 }
    }

    /// Still running (not exited, not a zombie, not replaced by another process).
    fn alive(self) -> bool {
        stat(self.pid).is_some_and(|(state, _, start)| state != 'Z' && start == self.start_time)
    }
}

/// Every live process whose environment has `ROOST_INSTANCE_ID=<instance>`, with its
/// parent: the runtime's sandbox (bubblewrap, the relay in it, the runtime), and whatever
/// the runtime runs.
fn processes_of(instance: &str) -> Vec<(Proc, i32)> {
    let needle = format!("ROOST_INSTANCE_ID={instance}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|&b| b == 0).any(|var| var == needle.as_bytes())
            && let Some((state, parent, start_time)) = stat(pid)
            && state != 'Z'
        {
            found.push((Proc { pid, start_time }, parent));
        }
    }
    found
}

/// The agent's runtime processes: the ones roost started (each a sandbox, whose other
/// processes descend from it), so those among [`processes_of`] whose parent is not.
fn runtimes_of(instance: &str) -> Vec<Proc> {
    let all = processes_of(instance);
    let pids: Vec<i32> = all.iter().map(|(p, _)| p.pid).collect();
    all.into_iter().filter(|(_, parent)| !pids.contains(parent)).map(|(p, _)| p).collect()
}

/// Polls `done` every 20 ms until it holds or `limit` passes; whether it held.
async fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if done() {
            return true;
        }
        if started.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Provisions `runtime` agents one after another (an account boots one at a time) and
/// waits for each to run; their ids.
async fn provision_running(api: &Api, runtime: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..count {
        let id = api.provision(runtime, &format!("agent {n}")).await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
        ids.push(id);
    }
    ids
}

/// The one runtime process of each agent (panics if an agent has none or several).
fn one_process_each(ids: &[String]) -> BTreeMap<String, Proc> {
    ids.iter()
        .map(|id| {
            let procs = runtimes_of(id);
            assert_eq!(procs.len(), 1, "agent {id} has runtime processes {procs:?}");
            (id.clone(), procs[0])
        })
        .collect()
}

async fn runtime_processes_die_with_roost_and_are_not_doubled(backend: Backend) {
    let install = Install::new(backend).await;
    let (_, key) = install.create_account(0);
    let mut roost = install.serve(&[]);
    let ids = provision_running(&roost.api(&key), "example", 4).await;
    let before = one_process_each(&ids);
    // One agent is mid-turn when roost dies: long enough to be written down as in flight.
    let cut_off = {
        let (api, id) = (roost.api(&key), ids[0].clone());
        tokio::spawn(async move { api.message(&id, "sleep:10000 cut off").await })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;

    roost.kill9();
    // Its caller's connection ends with roost (the client's error is what it sees).
    let _ = cut_off.await;
    let all_gone = eventually(Duration::from_secs(2), || ids.iter().all(|id| processes_of(id).is_empty())).await;
    let survivors: Vec<_> = ids.iter().flat_map(|id| processes_of(id)).collect();
    assert!(all_gone, "runtime processes outlived the killed roost: {survivors:?}");

    let roost = install.serve(&[]);
    let api = roost.api(&key);
    for id in &ids {
        api.wait_status(id, "running").await;
    }
    let after = one_process_each(&ids);
    for (id, old) in &before {
        assert_ne!(after[id], *old, "a new process for {id}");
    }
    // The restarted roost lists the cut-off turn as interrupted, not charged.
    let activity = api.get(&format!("/api/instances/{}/activity", ids[0])).await.ok();
    let turns = activity["turns"].as_array().unwrap();
    let cut = turns.iter().find(|t| t["text"] == "sleep:10000 cut off").unwrap_or_else(|| panic!("{activity}"));
    assert_eq!(cut["status"], "interrupted", "{cut}");
    assert_eq!(cut["charged_cents"].as_i64().unwrap_or_default(), 0, "{cut}");
    println!(
        "process runtime: {} agents, {} processes before the kill, 0 after it, {} after the restart",
        ids.len(),
        before.len(),
        after.len()
    );
}

/// OpenClaw (the real package, as scripts/test installed it) is a Node gateway with
/// workers: a killed roost leaves none of its processes, and the agent runs again after
/// the restart, in one sandbox.
async fn openclaw_dies_with_roost_workers_included_and_comes_back(backend: Backend) {
    let package = roost_server::runtimes::packaged::Package::OpenClaw;
    let installed = roost_tests::tools::installed_runtime(package);
    let catalogue = format!("{CATALOGUE}\n{}", package.catalogue_toml(&installed.dir));
    let install = Install::with_catalogue(backend, &catalogue).await;
    let (_, key) = install.create_account(10_000);
    let mut roost = install.serve(&[]);
    let api = roost.api(&key);
    let id = api.provision("openclaw", "You are a test agent.").await["id"].as_str().unwrap().to_owned();
    api.wait_status_within(&id, "running", Duration::from_secs(240)).await;
    let before = processes_of(&id);
    assert!(before.len() >= 3, "bubblewrap, the relay and OpenClaw at least: {before:?}");

    roost.kill9();
    let all_gone = eventually(Duration::from_secs(5), || processes_of(&id).is_empty()).await;
    assert!(all_gone, "OpenClaw's processes outlived the killed roost: {:?}", processes_of(&id));

    let roost = install.serve(&[]);
    roost.api(&key).wait_status_within(&id, "running", Duration::from_secs(240)).await;
    assert_eq!(runtimes_of(&id).len(), 1, "one sandbox after the restart");
    println!("openclaw: {} processes before the kill, 0 after it, back after the restart", before.len());
}

async fn runtime_processes_that_outlive_roost_are_reaped_at_start(backend: Backend) {
    let install = Install::new(backend).await;
    let (_, key) = install.create_account(0);
    // Unconfined: a sandboxed runtime cannot outlive roost at all (its sandbox dies with
    // it), so only an unconfined one can leave the survivors the records are for.
    let mut roost = install.serve(&["--runtime-sandbox", "off"]);
    let ids = provision_running(&roost.api(&key), "stubborn", 3).await;
    let before = one_process_each(&ids);
    let killed_roost = Proc::of(roost.pid());

    // Processes of the test's own, each in a process group of its own (a reaped record's
    // group is killed): one recorded exactly as roost records its children (it must be
    // reaped), one recorded with another start time, as if its pid had been reused since
    // (it must never be touched), and one recorded by another installation sharing the
    // store (never touched either).
    let spawn_sleeper = || {
        use std::os::unix::process::CommandExt as _;
        Command::new("sleep").arg("600").process_group(0).spawn().unwrap()
    };
    let (mut orphan, mut reused, mut foreign) = (spawn_sleeper(), spawn_sleeper(), spawn_sleeper());
    let store = roost_server::store::Store::open(
        &install.database_url().parse().unwrap(),
        &roost_server::store::StoreOptions::default(),
    )
    .await
    .unwrap();
    let installation = roost_server::runtimes::orphans::installation_id(install.data_dir()).unwrap();
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim().to_owned();
    let record = |child: &Child, start_offset: i64, installation: &str| {
        let me = Proc::of(child.id() as i32);
        roost_server::store::ChildRecord {
            installation: installation.to_owned(),
            boot_id: boot_id.clone(),
            pid: i64::from(me.pid),
            start_time: me.start_time + start_offset,
            instance_id: "ins_made_up".to_owned(),
            owner_pid: i64::from(killed_roost.pid),
            owner_start_time: killed_roost.start_time,
            started_at: 0,
        }
    };
    store.record_child(&record(&orphan, 0, &installation)).await.unwrap();
    store.record_child(&record(&reused, 1, &installation)).await.unwrap();
    store.record_child(&record(&foreign, 0, "another-installation")).await.unwrap();
    let (orphan_proc, reused_proc, foreign_proc) =
        (Proc::of(orphan.id() as i32), Proc::of(reused.id() as i32), Proc::of(foreign.id() as i32));

    roost.kill9();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(before.values().all(|p| p.alive()), "the stubborn runtimes outlive a killed roost");

    let roost = install.serve(&[]);
    // roost reaps before it boots anything: by the time it listens, the survivors are gone
    // (a child the test started itself becomes a zombie until the test waits for it).
    let survivors: Vec<_> = before.values().filter(|p| p.alive()).collect();
    assert!(survivors.is_empty(), "survivors of the killed roost were not reaped: {survivors:?}");
    assert!(orphan.try_wait().unwrap().is_some() || !orphan_proc.alive(), "the recorded orphan was reaped");
    let api = roost.api(&key);
    for id in &ids {
        api.wait_status(id, "running").await;
    }
    let after = one_process_each(&ids);
    assert!(reused_proc.alive(), "a process whose start time differs from the record is never touched");
    assert!(foreign_proc.alive(), "another installation's records are never touched");
    let left: Vec<_> = store.children_of(&installation).await.unwrap().into_iter().map(|r| r.pid).collect();
    assert_eq!(left.len(), ids.len(), "the reaped records are gone, the new children recorded: {left:?}");
    for child in [&mut orphan, &mut reused, &mut foreign] {
        let _ = child.kill();
        let _ = child.wait();
    }
    println!(
        "stubborn runtime: {} agents, {} survived the kill, {} processes after the restart",
        ids.len(),
        before.len(),
        after.len()
    );
}

async fn a_boot_cancelled_while_starting_never_doubles_the_process(backend: Backend) {
    let install = Install::new(backend).await;
    let (account, key) = install.create_account(0);
    // One-second periods: the free first period ends while the agent is still booting (3 s),
    // the renewal cannot be paid, and the agent is suspended mid-boot.
    let roost = install.serve(&["--billing-period-secs", "1"]);
    let api = roost.api(&key);
    let id = api.provision("slow-paid", "slow").await["id"].as_str().unwrap().to_owned();

    let most = Arc::new(AtomicUsize::new(0));
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (id, most, watching) = (id.clone(), most.clone(), watching.clone());
        std::thread::spawn(move || {
            while watching.load(Ordering::Relaxed) {
                most.fetch_max(runtimes_of(&id).len(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let suspended = api.wait_status(&id, "suspended").await;
    assert!(eventually(Duration::from_secs(2), || !runtimes_of(&id).is_empty()).await, "still booting");
    install.add_credits(&account, 10_000);
    api.post(&format!("/api/instances/{id}/resume"), json!({})).await.ok();
    api.wait_status(&id, "running").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    watching.store(false, Ordering::Relaxed);
    watcher.join().unwrap();
    assert_eq!(runtimes_of(&id).len(), 1);
    assert_eq!(most.load(Ordering::Relaxed), 1, "two runtime processes at once for one agent ({suspended})");
}

/// An OTLP/HTTP protobuf export of `spans` spans in one new trace, `trace`.
fn export(trace: u64, spans: u64) -> Vec<u8> {
    use opentelemetry_proto::tonic::{
        collector::trace::v1::ExportTraceServiceRequest,
        trace::v1::{ResourceSpans, ScopeSpans, Span},
    };
    let trace_id: Vec<u8> = [0x9e_u8; 8].into_iter().chain(trace.to_be_bytes()).collect();
    let spans = (0..spans)
        .map(|n| Span {
            trace_id: trace_id.clone(),
            span_id: (n + 1).to_be_bytes().to_vec(),
            name: format!("work {n}"),
            start_time_unix_nano: 1_700_000_000_000_000_000 + n,
            end_time_unix_nano: 1_700_000_000_000_000_100 + n,
            ..Span::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

async fn acked_spans_survive_a_kill_during_ingest(backend: Backend) {
    const SENDERS: u64 = 8;
    const SPANS: u64 = 50;
    let install = Install::new(backend).await;
    let mut roost = install.serve(&[]);
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let sent = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::new();
    for sender in 0..SENDERS {
        let (http, url, acked, sent) =
            (roost.http.clone(), format!("{}/v1/traces", roost.base), acked.clone(), sent.clone());
        senders.push(tokio::spawn(async move {
            for n in 0.. {
                let trace = (sender << 32) | n;
                sent.fetch_add(1, Ordering::Relaxed);
                let resp = http
                    .post(&url)
                    .header("content-type", "application/x-protobuf")
                    .body(export(trace, SPANS))
                    .send()
                    .await;
                match resp {
                    Ok(resp) if resp.status() == 200 => {
                        let trace_id = format!("{}{trace:016x}", "9e".repeat(8));
                        acked.lock().unwrap().push(trace_id);
                    }
                    _ => return,
                }
            }
        }));
    }
    let enough = eventually(Duration::from_secs(10), || acked.lock().unwrap().len() >= 100).await;
    assert!(enough, "ingest too slow to test");
    roost.kill9();
    for sender in senders {
        sender.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();

    let _roost = install.serve(&[]);
    let stored: HashMap<String, i64> =
        install.db().await.counts("SELECT trace_id, COUNT(*) FROM spans GROUP BY trace_id").await.into_iter().collect();
    let lost: Vec<_> = acked.iter().filter(|t| stored.get(*t) != Some(&(SPANS as i64))).collect();
    assert!(lost.is_empty(), "{} acknowledged exports lost or cut short, e.g. {:?}", lost.len(), lost.first());
    println!(
        "OTLP ingest: {} exports sent, {} acked ({} spans), {} stored ({} spans)",
        sent.load(Ordering::Relaxed),
        acked.len(),
        acked.len() as u64 * SPANS,
        stored.len(),
        stored.values().sum::<i64>()
    );
}

/// What the provision load saw acknowledged.
#[derive(Default)]
struct Acked {
    provisioned: Vec<String>,
    destroyed: Vec<String>,
    /// Destroys sent whose answer never came.
    destroying: Vec<String>,
}

async fn money_and_agents_survive_a_kill_during_provisions(backend: Backend) {
    const ACCOUNTS: usize = 4;
    let install = Install::new(backend).await;
    let accounts: Vec<(String, String)> = (0..ACCOUNTS).map(|_| install.create_account(100_000)).collect();
    let mut roost = install.serve(&[]);
    let acked = Arc::new(Mutex::new(Acked::default()));
    let ops = Arc::new(AtomicUsize::new(0));
    let mut load = Vec::new();
    for (_, key) in &accounts {
        let (caller, acked, ops) = (roost.caller(key), acked.clone(), ops.clone());
        load.push(tokio::spawn(async move {
            let mut live = Vec::new();
            for n in 0.. {
                let runtime = if n % 4 == 3 { "echo" } else { "echo-paid" };
                let Some(resp) = caller.post("/api/provision", json!({"runtime": runtime, "brief": "b"})).await else {
                    return;
                };
                match resp.0 {
                    201 => {
                        let id = resp.1["id"].as_str().unwrap().to_owned();
                        acked.lock().unwrap().provisioned.push(id.clone());
                        live.push(id);
                        ops.fetch_add(1, Ordering::Relaxed);
                    }
                    409 => continue,
                    other => panic!("provision answered {other}: {}", resp.1),
                }
                if n % 2 == 1 {
                    let id: String = live.remove(0);
                    acked.lock().unwrap().destroying.push(id.clone());
                    let Some(resp) = caller.post(&format!("/api/instances/{id}/destroy"), json!({})).await else {
                        return;
                    };
                    assert_eq!(resp.0, 200, "{}", resp.1);
                    let mut acked = acked.lock().unwrap();
                    acked.destroying.retain(|d| *d != id);
                    acked.destroyed.push(id);
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let enough = eventually(Duration::from_secs(10), || ops.load(Ordering::Relaxed) >= 60).await;
    assert!(enough, "provisions too slow to test");
    roost.kill9();
    for task in load {
        task.await.unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());

    let roost = install.serve(&[]);
    let db = install.db().await;
    for (account, key) in &accounts {
        let balance = db.counts_for("SELECT id, balance_nanocents FROM accounts WHERE id = $1", account).await;
        let ledger = db
            .counts_for(
                "SELECT account_id, CAST(SUM(amount_nanocents) AS BIGINT) FROM ledger WHERE account_id = $1 GROUP BY account_id",
                account,
            )
            .await;
        assert_eq!(balance[0].1, ledger[0].1, "account {account}: balance against the sum of its ledger");
        let shown = roost.api(key).get("/api/account").await.ok();
        assert_eq!(shown["balance_nanocents"], balance[0].1);
    }
    let twice = db
        .counts(
            "SELECT instance_id || ' ' || kind, COUNT(*) FROM ledger WHERE instance_id IS NOT NULL \
             GROUP BY instance_id, kind HAVING COUNT(*) > 1",
        )
        .await;
    assert!(twice.is_empty(), "money moved twice for one agent: {twice:?}");
    // Every stored agent paid its provision once, and every destroyed one got one refund row.
    let unpaid = db
        .counts(
            "SELECT id, CAST(0 AS BIGINT) FROM instances i WHERE NOT EXISTS \
             (SELECT 1 FROM ledger l WHERE l.instance_id = i.id AND l.kind = 'provision')",
        )
        .await;
    assert!(unpaid.is_empty(), "agents with no provision charge: {unpaid:?}");
    let unrefunded = db
        .counts(
            "SELECT id, CAST(0 AS BIGINT) FROM instances i WHERE destroyed_at IS NOT NULL AND NOT EXISTS \
             (SELECT 1 FROM ledger l WHERE l.instance_id = i.id AND l.kind = 'refund')",
        )
        .await;
    assert!(unrefunded.is_empty(), "destroyed agents with no refund row: {unrefunded:?}");

    let stored: HashSet<String> = db
        .counts("SELECT id, CAST(0 AS BIGINT) FROM instances WHERE destroyed_at IS NULL")
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    let destroyed: HashSet<String> = db
        .counts("SELECT id, CAST(0 AS BIGINT) FROM instances WHERE destroyed_at IS NOT NULL")
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    for id in &acked.provisioned {
        if acked.destroyed.contains(id) {
            assert!(destroyed.contains(id), "acknowledged destroy of {id} was lost");
        } else if !acked.destroying.contains(id) {
            assert!(stored.contains(id), "acknowledged provision of {id} was lost");
        }
    }
    println!(
        "provisions: {} provisions and {} destroys acked, {} destroys unanswered; after the restart {} agents live, {} destroyed",
        acked.provisioned.len(),
        acked.destroyed.len(),
        acked.destroying.len(),
        stored.len(),
        destroyed.len()
    );
}

/// REST calls as one key holder that tell "roost did not answer" (it was killed) apart.
#[derive(Clone)]
struct Caller {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Caller {
    /// POST `path`; `None` when no whole answer came.
    async fn post(&self, path: &str, body: Value) -> Option<(u16, Value)> {
        let resp =
            self.http.post(format!("{}{path}", self.base)).bearer_auth(&self.key).json(&body).send().await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.json().await.ok()?))
    }
}

async fn answered_turns_survive_a_kill(backend: Backend) {
    const AGENTS: usize = 4;
    const CALLERS: usize = 16;
    let install = Install::new(backend).await;
    let (_, key) = install.create_account(0);
    let mut roost = install.serve(&[]);
    let ids = provision_running(&roost.api(&key), "echo", AGENTS).await;
    let answered = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut callers = Vec::new();
    for caller in 0..CALLERS {
        let (api, id, answered) = (roost.caller(&key), ids[caller % AGENTS].clone(), answered.clone());
        callers.push(tokio::spawn(async move {
            for n in 0.. {
                let path = format!("/api/instances/{id}/messages");
                let Some((status, body)) = api.post(&path, json!({"text": format!("turn {caller}.{n}")})).await else {
                    return;
                };
                assert_eq!(status, 200, "{body}");
                answered.lock().unwrap().push(body["turn_id"].as_str().unwrap().to_owned());
            }
        }));
    }
    let enough = eventually(Duration::from_secs(10), || answered.lock().unwrap().len() >= 300).await;
    assert!(enough, "turns too slow to test");
    roost.kill9();
    for caller in callers {
        caller.await.unwrap();
    }
    let answered = answered.lock().unwrap().clone();

    let _roost = install.serve(&[]);
    let stored: HashSet<String> =
        install.db().await.counts("SELECT id, CAST(0 AS BIGINT) FROM turns").await.into_iter().map(|r| r.0).collect();
    let lost: Vec<_> = answered.iter().filter(|t| !stored.contains(*t)).collect();
    assert!(lost.is_empty(), "{} answered turns missing from the activity, e.g. {:?}", lost.len(), lost.first());
    println!("message turns: {} answered, {} stored", answered.len(), stored.len());
}

/// Telegram messages across a `kill -9`: every message Telegram handed over is answered
/// after the restart, and none becomes two turns (the inbox stores each update with the
/// offset and its turn id; a turn that ran is answered from its record).
async fn telegram_messages_survive_a_kill(backend: Backend) {
    const CHATS: i64 = 10;
    const MESSAGES: usize = 60;
    let fake = FakeTelegram::start().await;
    let token = fake.bot(7_700_001, "kill9_bot");
    let install = Install::new(backend).await;
    let (_, key) = install.create_account(0);
    let flags = ["--telegram-api-base", fake.base.as_str()];
    let mut roost = install.serve(&flags);
    let api = roost.api(&key);
    let id = provision_running(&api, "echo", 1).await.remove(0);
    let allowed = (1..=CHATS).map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    api.post(
        &format!("/api/instances/{id}/config"),
        json!({"MESSAGING_BOT_TOKEN": token, "MESSAGING_ALLOWED_CHAT_IDS": allowed}),
    )
    .await
    .ok();
    api.wait_status(&id, "running").await;
    // Replies to one chat go a second apart, so these take about six seconds to answer.
    let texts: Vec<String> = (0..MESSAGES).map(|n| format!("msg-{n:03}-end")).collect();
    for (n, text) in texts.iter().enumerate() {
        fake.say(&token, 1 + n as i64 % CHATS, text);
    }
    let replied = |fake: &FakeTelegram| fake.sent().iter().filter(|s| s.method == "sendMessage").count();
    assert!(eventually(Duration::from_secs(20), || replied(&fake) >= 15).await, "replies too slow to test");
    roost.kill9();
    let before = replied(&fake);
    assert!(before < MESSAGES, "every reply went before the kill");

    let roost = install.serve(&flags);
    let all = eventually(Duration::from_secs(60), || {
        let sent = fake.sent();
        texts.iter().all(|t| sent.iter().any(|s| s.method == "sendMessage" && s.text.contains(t.as_str())))
    })
    .await;
    assert!(all, "every message is answered after the restart");
    let turns = install.db().await.counts("SELECT text, COUNT(*) FROM turns GROUP BY text").await;
    let doubled: Vec<_> = turns.iter().filter(|(_, n)| *n > 1).collect();
    assert!(doubled.is_empty(), "messages run twice: {doubled:?}");
    assert_eq!(turns.len(), MESSAGES, "one turn per message");
    println!("telegram: {before} replies before the kill, {} after", replied(&fake) - before);
    drop(roost);
}

/// The test's own connection to roost's store, for what the API does not show.
enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Db {
    /// Rows of (text, integer).
    async fn counts(&self, sql: &'static str) -> Vec<(String, i64)> {
        match self {
            Self::Sqlite(pool) => sqlx::query_as(sql).fetch_all(pool).await.unwrap(),
            Self::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await.unwrap(),
        }
    }

    /// Rows of (text, integer) for a query with one parameter.
    async fn counts_for(&self, sql: &'static str, arg: &str) -> Vec<(String, i64)> {
        match self {
            Self::Sqlite(pool) => sqlx::query_as(sql).bind(arg).fetch_all(pool).await.unwrap(),
            Self::Postgres(pool) => sqlx::query_as(sql).bind(arg).fetch_all(pool).await.unwrap(),
        }
    }
}
