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
    Api, SseClient, TestDatabase,
    process::{create_account, replica_command, serve_replica},
};
use serde_json::{Value, json};
use sqlx::Connection as _;

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
        self.serve_with_ttl(n, TTL_SECS)
    }

    /// [`Self::serve`] with a lease TTL of `ttl_secs`.
    fn serve_with_ttl(&self, n: usize, ttl_secs: u64) -> Replica {
        let cmd = self.roost(&self.dir.path().join(format!("replica-{n}")));
        let catalogue = self.dir.path().join("catalogue.toml");
        let (child, base) = serve_replica(cmd, ttl_secs, &["--runtimes", catalogue.to_str().unwrap()]);
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

    /// Opens a live stream (loopback needs no token).
    async fn stream(&self, path: &str) -> SseClient {
        SseClient::open(self.http.get(format!("{}{path}", self.base))).await.unwrap()
    }

    /// Posts OTLP/HTTP JSON to `path`; 200 means it is committed.
    async fn export(&self, path: &str, body: &Value) {
        let reply = self.http.post(format!("{}{path}", self.base)).json(body).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap_or_default());
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

    // A streamed turn through a replica that does not run the agent is relayed from its
    // owner, event by event.
    for replica in &replicas {
        let (api, id) = (replica.api(&key), &ids[1]);
        let request = api.post_request(&format!("/api/instances/{id}/messages"), json!({ "text": "streamed" }));
        let mut stream = roost_tests::SseClient::open(request).await.unwrap_or_else(|e| panic!("{e:?}"));
        let (mut text, mut done) = (String::new(), Value::Null);
        while let Some(roost_tests::SseItem::Event { event, data, .. }) =
            stream.next_event(Duration::from_secs(20)).await
        {
            let data: Value = serde_json::from_str(&data).unwrap();
            match event.as_str() {
                "delta" => text.push_str(data["text"].as_str().unwrap()),
                "done" => {
                    done = data;
                    break;
                }
                other => panic!("{other}: {data}"),
            }
        }
        assert!(text.ends_with("] streamed") && done["reply"] == text.as_str(), "{text} / {done}");
    }

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
    // A process agent on the victim, mid-turn (called through another replica) when it dies.
    let slow = replicas[2].api(&key).provision("example", "slow").await["id"].as_str().unwrap().to_owned();
    replicas[2].api(&key).wait_status(&slow, "running").await;
    let in_flight = {
        let (api, slow) = (replicas[0].api(&key), slow.clone());
        tokio::spawn(async move { api.message(&slow, "sleep:10000 never answered").await })
    };
    // Long enough for the turn to be written down as in flight (after 200 ms).
    tokio::time::sleep(Duration::from_millis(800)).await;

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

    // The caller of the turn the victim was running is told, and the agent's new owner
    // lists that turn as interrupted, not charged.
    let cut_off = in_flight.await.unwrap();
    cut_off.err(503, "unavailable");
    let turn = within(Duration::from_secs(TTL_SECS + 15), "the new owner records the interrupted turn", || async {
        let activity = replicas[1].api(&key).get(&format!("/api/instances/{slow}/activity")).await.ok();
        activity["turns"].as_array().unwrap().iter().find(|t| t["text"] == "sleep:10000 never answered").cloned()
    })
    .await;
    assert_eq!(turn["status"], "interrupted", "{turn}");
    assert_eq!(turn["charged_cents"].as_i64().unwrap_or_default(), 0, "{turn}");
    assert!(turn["error"].as_str().unwrap().contains("stopped during the turn"), "{turn}");
    let db = cluster.db().await;
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM turns_in_flight").fetch_one(&db).await.unwrap();
    assert_eq!(left, 0, "the interrupted turn's in-flight row is gone");
    // Turns that ran to the end left no in-flight rows either.
    replicas[0].api(&key).wait_status(&slow, "running").await;
    assert_eq!(replicas[0].api(&key).message(&slow, "sleep:400 answered").await.status, 200);
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM turns_in_flight").fetch_one(&db).await.unwrap();
    assert_eq!(left, 0, "a finished turn deletes its in-flight row");
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
    // Long enough for the turn to be written down as in flight (after 200 ms).
    tokio::time::sleep(Duration::from_millis(700)).await;
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
    let recorded: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, charged_nanocents FROM turns WHERE text = 'sleep:1500 late reply'")
            .fetch_all(&db)
            .await
            .unwrap();
    // Not the stale owner's record of it: the new owner's, of a turn it found unfinished.
    assert_eq!(recorded, [("interrupted".to_owned(), 0)], "the stale owner's turn got into the store");
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
        "SELECT a.id, a.balance_nanocents, COALESCE((SELECT SUM(amount_nanocents) FROM ledger l WHERE l.account_id = a.id), 0)::BIGINT \
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

/// The service name of the test's OTLP exports.
const SERVICE: &str = "fanout-test";

/// OTLP/HTTP JSON: one span per title, in order, in trace `trace`.
fn spans(trace: u8, titles: &[&str]) -> Value {
    let spans: Vec<Value> = titles
        .iter()
        .enumerate()
        .map(|(n, title)| {
            json!({
                "traceId": format!("{trace:02x}").repeat(16), "spanId": format!("{:016x}", n + 1), "name": title,
                "kind": 1, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            })
        })
        .collect();
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": SERVICE}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
    }]})
}

/// OTLP/HTTP JSON: one info record per message, in order.
fn logs(messages: &[&str]) -> Value {
    let records: Vec<Value> = messages
        .iter()
        .map(|m| json!({"timeUnixNano": "1700000000000000000", "severityNumber": 9, "body": {"stringValue": m}}))
        .collect();
    json!({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": SERVICE}}]},
        "scopeLogs": [{"scope": {"name": "test"}, "logRecords": records}],
    }]})
}

/// `field` of the next `count` events of `client` that `keep` picks, waiting at most until
/// `deadline`; fewer if the deadline passes.
async fn picked(
    client: &mut SseClient,
    count: usize,
    deadline: Instant,
    field: &str,
    keep: impl Fn(&Value) -> bool,
) -> Vec<String> {
    let mut found = Vec::new();
    while found.len() < count {
        let Some(wait) = deadline.checked_duration_since(Instant::now()) else { break };
        let Some(item) = client.next_event(wait).await else { break };
        let event = item.json();
        if keep(&event) {
            found.push(event[field].as_str().unwrap_or_default().to_owned());
        }
    }
    found
}

fn ours(event: &Value) -> bool {
    event["service"] == SERVICE
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_streams_on_every_replica_show_what_any_replica_stored() {
    let cluster = Cluster::new().await;
    let replicas = cluster.serve_three();
    let mut brains = Vec::new();
    let mut log_streams = Vec::new();
    for replica in &replicas {
        brains.push(replica.stream("/api/brain-stream").await);
        log_streams.push(replica.stream("/api/logs").await);
    }

    // Three exports in a row through one replica, then log records.
    for (trace, titles) in [(1, &["a1", "a2"][..]), (2, &["b1"][..]), (3, &["c1", "c2"][..])] {
        replicas[0].export("/v1/traces", &spans(trace, titles)).await;
    }
    replicas[0].export("/v1/logs", &logs(&["l1", "l2"])).await;
    // Every replica's streams show them within a second, in the order they were stored.
    let deadline = Instant::now() + Duration::from_secs(1);
    for (n, (brain, log)) in brains.iter_mut().zip(&mut log_streams).enumerate() {
        let titles = picked(brain, 5, deadline, "title", ours).await;
        assert_eq!(titles, ["a1", "a2", "b1", "c1", "c2"], "replica {n}'s brain stream");
        let lines = picked(log, 2, deadline, "message", |e| ours(e) && e["source"] == "ingest").await;
        assert_eq!(lines, ["l1", "l2"], "replica {n}'s log stream");
    }

    // A hosted agent's turn on one replica shows on the others.
    let key = cluster.account(0);
    let api = replicas[1].api(&key);
    let id = api.provision("echo", "streamed").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    assert_eq!(api.message(&id, "hello there").await.status, 200);
    let deadline = Instant::now() + Duration::from_secs(1);
    for (n, brain) in brains.iter_mut().enumerate() {
        let turns = picked(brain, 1, deadline, "agent_id", |e| e["kind"] == "turn").await;
        assert_eq!(turns, [id.as_str()], "replica {n} shows the turn");
    }

    // Every connection to the store is cut, and none may come back for a while. A span
    // stored meanwhile by hand (so no notice of it exists at all) reaches every stream by
    // the listeners' catch-up; spans stored through two replicas once connections are
    // allowed again (likely before their listeners are back) arrive once each: a replica's
    // own rows are not published again by its catch-up.
    let mut inside = sqlx::PgConnection::connect(cluster.database.url()).await.unwrap();
    let mut admin = sqlx::PgConnection::connect(cluster.database.admin_url()).await.unwrap();
    let inside_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(&mut inside).await.unwrap();
    let database = cluster.database.name().to_owned();
    let allow = |on: bool| sqlx::AssertSqlSafe(format!("ALTER DATABASE \"{database}\" ALLOW_CONNECTIONS {on}"));
    sqlx::query(allow(false)).execute(&mut admin).await.unwrap();
    let listeners: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FILTER (WHERE query LIKE 'LISTEN%') FROM (SELECT query, pg_terminate_backend(pid) \
         FROM pg_stat_activity WHERE datname = $1 AND pid <> $2) AS cut",
    )
    .bind(&database)
    .bind(inside_pid)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(listeners, 3, "one listening connection per replica");
    sqlx::query(
        "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, status_code, \
         status_message, service, resource_id, scope, attributes, node_id) \
         VALUES ($1, '0000000000000001', '', 'by-hand', 1, 1, 2, 0, '', $2, 0, 'test', '{}', '')",
    )
    .bind("ab".repeat(16))
    .bind(SERVICE)
    .execute(&mut inside)
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    sqlx::query(allow(true)).execute(&mut admin).await.unwrap();
    replicas[0].export("/v1/traces", &spans(9, &["d1"])).await;
    replicas[1].export("/v1/traces", &spans(10, &["e1"])).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    for (n, brain) in brains.iter_mut().enumerate() {
        let mut titles = picked(brain, 3, deadline, "title", ours).await;
        titles.sort();
        assert_eq!(titles, ["by-hand", "d1", "e1"], "replica {n} after its listener connected again");
        let again = picked(brain, 1, Instant::now() + Duration::from_millis(700), "title", ours).await;
        assert!(again.is_empty(), "replica {n} published {again:?} twice");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanly_stopped_replicas_agents_move_at_once() {
    let cluster = Cluster::new().await;
    // A long TTL: the others' next look is ten seconds away, so only the release's notice
    // can move the agents sooner.
    let ttl_secs = 30;
    let mut replicas: Vec<Replica> = (0..2).map(|n| cluster.serve_with_ttl(n, ttl_secs)).collect();
    let key = cluster.account(0);
    let ids = provision_around(&replicas, &key, "echo", 4).await;
    let leaving = replicas[1].replicas().await["self"].as_str().unwrap().to_owned();
    let before = owners(&replicas[0]).await;
    let moved: Vec<&String> = ids.iter().filter(|id| before[*id] == leaving).collect();
    assert_eq!(moved.len(), 2);

    replicas[1].signal(rustix::process::Signal::TERM);
    let exited = within(Duration::from_secs(20), "the replica stops", || {
        let exited = replicas[1].child.try_wait().unwrap().is_some();
        async move { exited.then(Instant::now) }
    })
    .await;
    let api = replicas[0].api(&key);
    for id in &moved {
        within(Duration::from_secs(3), "the agent answers on the other replica", || {
            let (api, id) = (api.clone(), (*id).clone());
            async move { (api.message(&id, "moved?").await.status == 200).then_some(()) }
        })
        .await;
    }
    eprintln!("agents answered elsewhere {:?} after a clean stop", exited.elapsed());
    let after = owners(&replicas[0]).await;
    assert!(ids.iter().all(|id| after.get(id) != Some(&leaving)), "{after:?}");
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
