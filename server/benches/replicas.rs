//! Replicas on one PostgreSQL (docs/architecture.md#performance-targets: agent takeover after a
//! replica is killed < lease TTL + 5 s), with the real `roost` binary.
//!
//! `cargo bench -p roost-server --bench replicas` (release build; needs the PostgreSQL the
//! tests use, `ROOST_TEST_DATABASE_URL` or the default). It measures:
//! - echo turns over REST across 30 agents, 32 concurrent callers for 5 s: through one
//!   replica, then through three (agents provisioned round-robin, each caller on one
//!   replica, so two calls in three are forwarded to the agent's owner): turns/s, p50, p99;
//! - live streams across replicas: 10 brain-stream clients on the second and third
//!   replica while 200 OTLP/HTTP exports of one span each go to the first, one every 5 ms:
//!   the time from sending an export to each client receiving its span (p50, p99);
//! - takeover: SIGKILL of one of the three, then the time until every agent it ran
//!   answers through the others (lease TTL 3 s).
//!
//! Server and clients share the machine's two cores, so three replicas compete with each
//! other and with the clients for them: the numbers show the cost of forwarding and the
//! takeover time, not how three machines would scale.

use std::{
    path::Path,
    process::Child,
    sync::Arc,
    time::{Duration, Instant},
};

use roost_tests::{
    Api, SseClient, TestDatabase,
    process::{create_account, replica_command, serve_replica},
};
use serde_json::json;

const AGENTS: usize = 30;
const CALLERS: usize = 32;
const RUN: Duration = Duration::from_secs(5);
const TTL_SECS: u64 = 3;

/// A running replica, SIGKILLed when dropped.
struct Replica {
    child: Child,
    api: Api,
    base: String,
    http: reqwest::Client,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(db: &str, data_dir: &Path) -> Replica {
    let (child, base) = serve_replica(replica_command(env!("CARGO_BIN_EXE_roost"), db, data_dir), TTL_SECS, &[]);
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    Replica { child, api: Api::new(http.clone(), base.clone(), None), base, http }
}

fn account(db: &str, data_dir: &Path) -> String {
    create_account(replica_command(env!("CARGO_BIN_EXE_roost"), db, data_dir), 0)
}

/// Starts `n` replicas on a new database and provisions the agents round-robin.
async fn cluster(n: usize) -> (TestDatabase, tempfile::TempDir, Vec<Replica>, String, Vec<String>) {
    let db = TestDatabase::create().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let replicas: Vec<Replica> = (0..n).map(|i| serve(db.url(), &dir.path().join(format!("r{i}")))).collect();
    let key = account(db.url(), &dir.path().join("cli"));
    let mut ids = Vec::new();
    for a in 0..AGENTS {
        let api = replicas[a % n].api.with_key(Some(&key));
        let id = api.provision("echo", "bench").await["id"].as_str().expect("id").to_owned();
        api.wait_status(&id, "running").await;
        ids.push(id);
    }
    (db, dir, replicas, key, ids)
}

/// `CALLERS` callers, caller `c` on replica `c % n` and agent `c % AGENTS`, for `RUN`.
async fn turns(replicas: &[Replica], key: &str, ids: &[String]) -> (f64, Vec<Duration>) {
    let ids = Arc::new(ids.to_vec());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CALLERS {
        let api = replicas[c % replicas.len()].api.with_key(Some(key));
        let ids = ids.clone();
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            let mut n = c;
            while started.elapsed() < RUN {
                let id = &ids[n % ids.len()];
                let sent = Instant::now();
                let reply = api.message(id, "ping").await;
                assert_eq!(reply.status, 200, "{}", reply.body);
                took.push(sent.elapsed());
                n += CALLERS;
            }
            took
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("caller"));
    }
    let rate = all.len() as f64 / started.elapsed().as_secs_f64();
    all.sort_unstable();
    (rate, all)
}

/// Exports through the first replica, brain-stream clients on the others: each client's
/// delay per span.
async fn streams_across(replicas: &[Replica]) -> Vec<Duration> {
    const REQUESTS: usize = 200;
    const CLIENTS: usize = 10;
    let sent: Arc<std::sync::Mutex<Vec<Option<Instant>>>> = Arc::new(std::sync::Mutex::new(vec![None; REQUESTS]));
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let replica = &replicas[1 + c % (replicas.len() - 1)];
        let mut client =
            SseClient::open(replica.http.get(format!("{}/api/brain-stream", replica.base))).await.expect("stream");
        let sent = sent.clone();
        clients.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while took.len() < REQUESTS {
                let Some(item) = client.next_event(Duration::from_secs(10)).await else { break };
                let title = item.json()["title"].as_str().unwrap_or_default().to_owned();
                let n = title.strip_prefix("bench-").and_then(|n| n.parse::<usize>().ok());
                if let Some(at) = n.and_then(|n| sent.lock().expect("lock")[n]) {
                    took.push(at.elapsed());
                }
            }
            took
        }));
    }
    let target = format!("{}/v1/traces", replicas[0].base);
    for n in 0..REQUESTS {
        let export = json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bench"}}]},
            "scopeSpans": [{"scope": {"name": "bench"}, "spans": [{
                "traceId": format!("{:032x}", n + 1), "spanId": "0000000000000001", "name": format!("bench-{n}"),
                "kind": 1, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            }]}],
        }]});
        sent.lock().expect("lock")[n] = Some(Instant::now());
        let reply = replicas[0].http.post(&target).json(&export).send().await.expect("export");
        assert_eq!(reply.status(), 200);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut all = Vec::new();
    for client in clients {
        let took = client.await.expect("client");
        assert_eq!(took.len(), REQUESTS, "a client missed spans");
        all.extend(took);
    }
    all.sort_unstable();
    all
}

fn report(what: &str, rate: f64, took: &[Duration]) {
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "{what}: {rate:.0} turns/s, p50 {:.2} ms, p99 {:.2} ms ({} turns)",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        took.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    {
        let (_db, _dir, replicas, key, ids) = cluster(1).await;
        let (rate, took) = turns(&replicas, &key, &ids).await;
        report("1 replica", rate, &took);
    }
    let (_db, _dir, mut replicas, key, ids) = cluster(3).await;
    let (rate, took) = turns(&replicas, &key, &ids).await;
    report("3 replicas (2 calls in 3 forwarded)", rate, &took);
    let delays = streams_across(&replicas).await;
    let at = |q: f64| delays[((delays.len() as f64 * q) as usize).min(delays.len() - 1)].as_secs_f64() * 1e3;
    println!(
        "ingest on one replica -> brain stream on the others: p50 {:.2} ms, p99 {:.2} ms ({} deliveries)",
        at(0.5),
        at(0.99),
        delays.len()
    );

    // Takeover: the agents provisioned through the third replica run there.
    let moved: Vec<&String> = ids.iter().skip(2).step_by(3).collect();
    let mut victim = replicas.pop().expect("three replicas");
    victim.child.kill().expect("SIGKILL");
    let killed = Instant::now();
    victim.child.wait().expect("reaped");
    let api = replicas[0].api.with_key(Some(&key));
    for id in &moved {
        while api.message(id, "there?").await.status != 200 {
            assert!(killed.elapsed() < Duration::from_secs(60), "agent {id} never moved");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    println!(
        "takeover after SIGKILL (lease TTL {TTL_SECS} s): every one of its {} agents answered after {:.2} s",
        moved.len(),
        killed.elapsed().as_secs_f64()
    );
}
