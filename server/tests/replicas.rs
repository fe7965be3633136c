//! Three `roost serve` processes of the real binary on one PostgreSQL (a database of each
//! test's own), as a cluster behind a load balancer runs them: every agent is owned by one
//! replica, calls through any replica reach it, a killed replica's agents move, a paused
//! replica's late writes are refused, and money stays exact when provisions race across
//! replicas. Every wait is bounded.

#![cfg(target_os = "linux")]
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
    process::{Child, Command},
    time::{Duration, Instant},
};

use roost_tests::{
    Api, TestDatabase,
    process::{create_account, replica_command, serve_replica},
};
use serde_json::{Value, json};

/// Lease TTL of these replicas, in seconds (the flag's smallest value).
const TTL_SECS: u64 = 3;

const CATALOGUE: &str = r#"
[[runtime]]
id = "echo"
driver = "echo"
price_cents_month = 0
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
"#;

/// A cluster's database, catalogue and the data directory of each replica.
struct Cluster {
    database: TestDatabase,
    dir: tempfile::TempDir,
}

impl Cluster {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("catalogue.toml"), CATALOGUE).unwrap();
        Self { database: TestDatabase::create().await, dir }
    }

    fn roost(&self, data_dir: &Path) -> Command {
        replica_command(env!("CARGO_BIN_EXE_roost"), self.database.url(), data_dir)
    }

    /// Starts replica number `n` (its own data directory); returns once it listens.
    fn serve(&self, n: usize) -> Replica {
        let cmd = self.roost(&self.dir.path().join(format!("replica-{n}")));
        let catalogue = self.dir.path().join("catalogue.toml");
        let (child, base) = serve_replica(cmd, TTL_SECS, &["--runtimes", catalogue.to_str().unwrap()]);
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Replica { child, base, http }
    }

    /// Three replicas.
    fn serve_three(&self) -> Vec<Replica> {
        (0..3).map(|n| self.serve(n)).collect()
    }

    /// A new account with `credits`: its API key.
    fn account(&self, credits: i64) -> String {
        create_account(self.roost(&self.dir.path().join("cli")), credits)
    }

    async fn db(&self) -> sqlx::PgPool {
        sqlx::PgPool::connect(self.database.url()).await.unwrap()
    }
}

/// A running replica; SIGKILLed when dropped (SIGCONT first, in case a test stopped it).
struct Replica {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Replica {
    fn api(&self, key: &str) -> Api {
        Api::new(self.http.clone(), self.base.clone(), Some(key.to_owned()))
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// `GET /api/replicas` (a dashboard read: loopback needs no token).
    async fn replicas(&self) -> Value {
        Api::new(self.http.clone(), self.base.clone(), None).get("/api/replicas").await.ok()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(rustix::process::Signal::CONT);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Who owns each agent, by `/api/replicas` as `replica` sees it: agent id → replica id.
async fn owners(replica: &Replica) -> BTreeMap<String, String> {
    let view = replica.replicas().await;
    let mut owners = BTreeMap::new();
    for r in view["replicas"].as_array().unwrap() {
        for agent in r["agents"].as_array().unwrap() {
            let previous = owners.insert(agent.as_str().unwrap().to_owned(), r["id"].as_str().unwrap().to_owned());
            assert!(previous.is_none(), "agent {agent} listed under two replicas: {view}");
        }
    }
    owners
}

/// Polls `check` every 50 ms until it returns `Some` or `limit` passes.
async fn within<T, F: Future<Output = Option<T>>>(limit: Duration, what: &str, mut check: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Provisions `count` echo agents through each replica in turn and waits for them to run.
async fn provision_around(replicas: &[Replica], key: &str, runtime: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..count {
        let api = replicas[n % replicas.len()].api(key);
        let id = api.provision(runtime, &format!("agent {n}")).await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
        ids.push(id);
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_agent_runs_once_and_answers_through_every_replica() {
    let cluster = Cluster::new().await;
    let replicas = cluster.serve_three();
    let key = cluster.account(0);
    let ids = provision_around(&replicas, &key, "echo", 6).await;

    // Each agent runs where it was provisioned, and every replica says so.
    let view = replicas[0].replicas().await;
    let replica_ids: Vec<String> =
        view["replicas"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(replica_ids.len(), 3, "{view}");
    let mut selves = HashSet::new();
    for replica in &replicas {
        let seen = owners(replica).await;
        assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), ids.iter().cloned().sorted(), "every agent owned once");
        selves.insert(replica.replicas().await["self"].as_str().unwrap().to_owned());
    }
    assert_eq!(selves.len(), 3, "each replica names itself");
    let owned = owners(&replicas[0]).await;
    let per_replica: HashSet<&String> = owned.values().collect();
    assert_eq!(per_replica.len(), 3, "agents provisioned through each replica run there: {owned:?}");

    // Every replica messages every agent, all at once: each reply is its own message's.
    let mut calls = Vec::new();
    for (r, replica) in replicas.iter().enumerate() {
        for id in &ids {
            for n in 0..5 {
                let (api, id) = (replica.api(&key), id.clone());
                calls.push(tokio::spawn(async move {
                    let text = format!("{id} via {r} #{n}");
                    let reply = api.message(&id, &text).await;
                    assert_eq!(reply.status, 200, "{}", reply.body);
                    // The echo runtime answers "[<brief>] <text>".
                    let answer = reply.body["reply"].as_str().unwrap();
                    assert!(answer.ends_with(&format!("] {text}")), "a reply crossed to another caller: {answer}");
                }));
            }
        }
    }
    for call in calls {
        call.await.unwrap();
    }
    let db = cluster.db().await;
    let stored: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM turns WHERE status = 'completed' AND reply LIKE '%] ' || text")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(stored, 3 * 6 * 5, "every answered turn is stored once");
    // Per agent, turns ran one at a time: arrival numbers are distinct.
    let doubled: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT instance_id, seq FROM turns GROUP BY instance_id, seq HAVING COUNT(*) > 1) d",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(doubled, 0);

    // Lifecycle calls through a replica that does not run the agent reach its owner.
    let id = &ids[0];
    for replica in &replicas {
        let api = replica.api(&key);
        let paused = api.post(&format!("/api/instances/{id}/pause"), json!({})).await;
        assert_eq!(paused.status, 200, "{}", paused.body);
        api.wait_status(id, "paused").await;
        let resumed = api.post(&format!("/api/instances/{id}/resume"), json!({})).await;
        assert_eq!(resumed.status, 200, "{}", resumed.body);
        api.wait_status(id, "running").await;
    }
    let gone = replicas[1].api(&key).post(&format!("/api/instances/{id}/destroy"), json!({})).await;
    assert_eq!(gone.status, 200, "{}", gone.body);
    for replica in &replicas {
        replica.api(&key).message(id, "hello?").await.err(404, "not_found");
        assert!(!owners(replica).await.contains_key(id), "a destroyed agent has no owner");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_agents_answer_through_the_others_within_the_ttl() {
    let cluster = Cluster::new().await;
    let mut replicas = cluster.serve_three();
    let key = cluster.account(0);
    let ids = provision_around(&replicas, &key, "echo", 6).await;
    let before = owners(&replicas[0]).await;
    let victim = replicas[2].replicas().await["self"].as_str().unwrap().to_owned();
    let moved: Vec<String> = ids.iter().filter(|id| before[*id] == victim).cloned().collect();
    assert_eq!(moved.len(), 2);

    replicas[2].kill9();
    let killed = Instant::now();
    let api = replicas[0].api(&key);
    for id in &moved {
        within(Duration::from_secs(TTL_SECS + 5), "the agent answers again", || {
            let api = api.clone();
            let id = id.clone();
            async move { (api.message(&id, "still there?").await.status == 200).then_some(()) }
        })
        .await;
    }
    let takeover = killed.elapsed();
    eprintln!("takeover after SIGKILL: {takeover:?}");
    assert!(takeover < Duration::from_secs(TTL_SECS + 5), "{takeover:?}");
    let after = owners(&replicas[1]).await;
    for id in &ids {
        assert_ne!(after.get(id), Some(&victim), "the dead replica still owns {id}");
        assert!(after.contains_key(id), "{id} has no owner: {after:?}");
    }
    let live = replicas[1].replicas().await["replicas"].as_array().unwrap().len();
    assert!(live <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_replicas_late_writes_are_refused() {
    let cluster = Cluster::new().await;
    let replicas = cluster.serve_three();
    let key = cluster.account(0);
    // A process runtime, whose `sleep:` turns outlast the pause.
    let api = replicas[1].api(&key);
    let id = api.provision("example", "slow").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let stale = replicas[1].replicas().await["self"].as_str().unwrap().to_owned();
    assert_eq!(owners(&replicas[0]).await[&id], stale);

    // A turn starts on the owner, then the owner stops past its TTL.
    let in_flight = {
        let (api, id) = (api.clone(), id.clone());
        tokio::spawn(async move { api.message(&id, "sleep:1500 late reply").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    replicas[1].signal(rustix::process::Signal::STOP);
    let new_owner = within(Duration::from_secs(TTL_SECS + 5), "another replica takes the agent", || async {
        owners(&replicas[0]).await.get(&id).filter(|owner| **owner != stale).cloned()
    })
    .await;
    // The new owner runs it: a message through the first replica is answered.
    within(Duration::from_secs(20), "the agent answers on its new owner", || async {
        (replicas[0].api(&key).message(&id, "hello").await.status == 200).then_some(())
    })
    .await;

    // The stale owner wakes up with its turn done: its record is refused.
    replicas[1].signal(rustix::process::Signal::CONT);
    let late = in_flight.await.unwrap();
    late.err(503, "unavailable");
    let db = cluster.db().await;
    let recorded: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM turns WHERE text = 'sleep:1500 late reply'")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(recorded, 0, "the stale owner's turn got into the store");
    // It lets the agent go; calls through it reach the new owner.
    within(Duration::from_secs(TTL_SECS + 5), "the stale replica forwards to the new owner", || async {
        (replicas[1].api(&key).message(&id, "via the old owner").await.status == 200).then_some(())
    })
    .await;
    assert_eq!(owners(&replicas[1]).await[&id], new_owner);
    let lease: (String, i64) = sqlx::query_as("SELECT owner, epoch FROM agent_leases WHERE instance_id = $1")
        .bind(&id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(lease.0, new_owner);
    assert!(lease.1 >= 2, "a takeover moves the epoch on: {lease:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_provisions_racing_through_two_replicas_never_overdraw() {
    let cluster = Cluster::new().await;
    let replicas = cluster.serve_three();
    // Five accounts, each with credit for two paid periods after its free first agent.
    let keys: Vec<String> = (0..5).map(|_| cluster.account(200)).collect();
    let mut calls = Vec::new();
    for key in &keys {
        for n in 0..5 {
            let api = replicas[n % 2].api(key);
            calls.push(tokio::spawn(async move {
                loop {
                    let reply = api.post("/api/provision", json!({"runtime": "echo-paid", "brief": "racing"})).await;
                    // 409: another agent of the account is still booting; try again.
                    if reply.status != 409 {
                        return reply.status;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }));
        }
    }
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 5 * 3, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 201 || *s == 402), "{statuses:?}");
    let db = cluster.db().await;
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT a.id, a.balance_cents, COALESCE((SELECT SUM(amount_cents) FROM ledger l WHERE l.account_id = a.id), 0)::BIGINT \
         FROM accounts a",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    for (account, balance, ledger) in rows {
        assert!(balance >= 0, "{account} overdrawn: {balance}");
        assert_eq!(balance, ledger, "{account}: the ledger does not add up to the balance");
    }
    let leases: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agent_leases").fetch_one(&db).await.unwrap();
    assert_eq!(leases, 15, "each agent has one lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_fires_once_per_tick_in_the_cluster_and_reaches_its_agent_anywhere() {
    let cluster = Cluster::new().await;
    let replicas = cluster.serve_three();
    let key = cluster.account(0);
    let ids = provision_around(&replicas, &key, "echo", 3).await;
    // One agent on each replica: whichever leads, two of the crons' turns are forwarded.
    let dashboard = Api::new(replicas[0].http.clone(), replicas[0].base.clone(), None);
    let mut crons = Vec::new();
    for id in &ids {
        let cron = dashboard
            .post(
                "/api/crons",
                json!({"instance_id": id, "name": "tick", "schedule": "* * * * * *", "message": "tick"}),
            )
            .await;
        assert_eq!(cron.status, 201, "{}", cron.body);
        crons.push(cron.body["id"].as_str().unwrap().to_owned());
    }
    tokio::time::sleep(Duration::from_millis(4500)).await;
    for cron in &crons {
        let killed = dashboard.post(&format!("/api/crons/{cron}/kill"), json!({})).await;
        assert_eq!(killed.status, 200, "{}", killed.body);
    }
    // A run that was under way records itself.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let db = cluster.db().await;
    for (cron, id) in crons.iter().zip(&ids) {
        let runs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM cron_runs WHERE cron_id = $1 AND ok")
            .bind(cron)
            .fetch_one(&db)
            .await
            .unwrap();
        let turns: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM turns WHERE instance_id = $1 AND source = 'cron' AND status = 'completed'",
        )
        .bind(id)
        .fetch_one(&db)
        .await
        .unwrap();
        // One run a second for 4.5 s; three replicas each firing would make three times as
        // many.
        assert!((2..=6).contains(&runs), "{id}: {runs} runs of a once-a-second cron in 4.5 s");
        assert_eq!(turns, runs, "{id}: each run is one turn, wherever the agent runs");
    }
}

/// Sorting for assertions.
trait Sorted {
    fn sorted(self) -> Vec<String>;
}

impl<I: Iterator<Item = String>> Sorted for I {
    fn sorted(self) -> Vec<String> {
        let mut all: Vec<String> = self.collect();
        all.sort();
        all
    }
}
