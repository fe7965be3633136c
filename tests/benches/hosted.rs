//! Hosted-agent benchmarks (docs/architecture.md#performance-targets: echo turn overhead p50 < 1
//! ms and ≥ 10,000 turns/s across 1,000 agents; provision → running < 50 ms for echo, < 1 s for a
//! process), and at the end a `GET /metrics` scrape with those agents and every turn series filled.
//!
//! `cargo bench -p roost-tests --bench hosted` runs the real server in this process (SQLite,
//! release build) and drives it with real clients on loopback, so the clients' CPU time is
//! counted against roost: the figures are upper bounds of roost's own overhead.
//!
//! Knobs (environment): ROOST_BENCH_AGENTS (1000), ROOST_BENCH_CONCURRENCY (64),
//! ROOST_BENCH_SECONDS (10), ROOST_BENCH_BACKEND (sqlite|postgres), ROOST_BENCH_PROVISIONS (20).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use roost_proto::v1::SendMessageRequest;
use roost_tests::{Api, TestServer, bench};
use serde_json::json;

fn main() {
    bench::block_on(run());
}

async fn run() {
    let backend = bench::backend();
    let agents = bench::knob::<u64>("ROOST_BENCH_AGENTS", 1000) as usize;
    let concurrency = bench::knob::<u64>("ROOST_BENCH_CONCURRENCY", 64) as usize;
    let seconds = bench::knob::<u64>("ROOST_BENCH_SECONDS", 10);
    let provisions = bench::knob::<u64>("ROOST_BENCH_PROVISIONS", 20) as usize;

    let server = TestServer::start_with(backend, |config| {
        config.hosting.queue_depth = 1024;
    })
    .await;
    println!("backend {}, {agents} echo agents, {concurrency} concurrent callers, {seconds} s per run", backend.name());

    provision_to_running(&server, "echo", provisions, Duration::from_millis(1)).await;
    provision_to_running(&server, "example", provisions.min(10), Duration::from_millis(5)).await;

    // One account per 100 agents keeps provisioning quick (echo boots in about a ms).
    let mut targets = Vec::with_capacity(agents);
    let started = Instant::now();
    while targets.len() < agents {
        let account = server.account(0).await;
        let api = server.api(Some(&account));
        for _ in 0..100.min(agents - targets.len()) {
            let id = api.provision("echo", "bench").await["id"].as_str().unwrap().to_owned();
            api.wait_status(&id, "running").await;
            targets.push((api.clone(), account.key.clone(), id));
        }
    }
    println!("provisioned {agents} echo agents in {:.1} s", started.elapsed().as_secs_f64());
    let targets = Arc::new(targets);

    // One caller: the latency of a turn, with nothing queued (roost's overhead).
    turns_over_rest(targets.clone(), 1, seconds.min(5)).await;
    turns_over_grpc(&server, targets.clone(), 1, seconds.min(5)).await;
    // Many callers: throughput.
    turns_over_rest(targets.clone(), concurrency, seconds).await;
    turns_over_grpc(&server, targets, concurrency, seconds).await;
    scrapes(&server).await;
}

/// `GET /metrics` (Prometheus text) one after another: what a scrape costs with 1,000 agents.
async fn scrapes(server: &TestServer) {
    let mut samples = Vec::with_capacity(200);
    let mut bytes = 0;
    for _ in 0..200 {
        let started = Instant::now();
        let resp = server.http.get(server.url("/metrics")).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        bytes = resp.bytes().await.unwrap().len();
        samples.push(started.elapsed());
    }
    report(&format!("GET /metrics ({bytes} bytes)"), &mut samples, None);
}

/// Provision → running, polled every `poll`, `count` times in a row on one account.
async fn provision_to_running(server: &TestServer, runtime: &str, count: usize, poll: Duration) {
    let account = server.account(1_000_000).await;
    let api = server.api(Some(&account));
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let created = api.post("/api/provision", json!({"runtime": runtime, "brief": "bench"})).await.ok();
        let id = created["id"].as_str().unwrap().to_owned();
        loop {
            if api.get(&format!("/api/instances/{id}")).await.ok()["status"] == "running" {
                break;
            }
            tokio::time::sleep(poll).await;
        }
        samples.push(started.elapsed());
        api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    }
    report(&format!("provision → running, {runtime}"), &mut samples, None);
}

async fn turns_over_rest(targets: Arc<Vec<(Api, String, String)>>, concurrency: usize, seconds: u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..concurrency)
        .map(|worker| {
            let (targets, stop) = (targets.clone(), stop.clone());
            tokio::spawn(async move {
                let mut samples = Vec::new();
                let mut i = worker;
                while !stop.load(Ordering::Relaxed) {
                    let (api, _, id) = &targets[i % targets.len()];
                    let started = Instant::now();
                    let reply = api.message(id, "ping").await;
                    assert_eq!(reply.status, 200, "{}", reply.body);
                    samples.push(started.elapsed());
                    i += concurrency;
                }
                samples
            })
        })
        .collect();
    let elapsed = measure(stop, seconds).await;
    let mut samples = Vec::new();
    for worker in workers {
        samples.extend(worker.await.unwrap());
    }
    report(&format!("message turn, echo, REST (HTTP/1.1), {concurrency} callers"), &mut samples, Some(elapsed));
}

async fn turns_over_grpc(
    server: &TestServer,
    targets: Arc<Vec<(Api, String, String)>>,
    concurrency: usize,
    seconds: u64,
) {
    let stop = Arc::new(AtomicBool::new(false));
    // One HTTP/2 connection per account, shared by every worker (clients are cheap clones).
    let mut shared = std::collections::HashMap::new();
    for (_, key, _) in targets.iter() {
        if !shared.contains_key(key) {
            shared.insert(key.clone(), server.agents(key).await);
        }
    }
    let mut workers = Vec::with_capacity(concurrency);
    for worker in 0..concurrency {
        let (targets, stop) = (targets.clone(), stop.clone());
        let mut clients = shared.clone();
        workers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut i = worker;
            while !stop.load(Ordering::Relaxed) {
                let (_, key, id) = &targets[i % targets.len()];
                let client = clients.get_mut(key).unwrap();
                let started = Instant::now();
                let request = SendMessageRequest { instance_id: id.clone(), text: "ping".into() };
                client.send_message(request).await.unwrap();
                samples.push(started.elapsed());
                i += concurrency;
            }
            samples
        }));
    }
    let elapsed = measure(stop, seconds).await;
    let mut samples = Vec::new();
    for worker in workers {
        samples.extend(worker.await.unwrap());
    }
    report(&format!("message turn, echo, gRPC (HTTP/2), {concurrency} callers"), &mut samples, Some(elapsed));
}

/// Lets the workers run for `seconds`, then stops them; the time they ran.
async fn measure(stop: Arc<AtomicBool>, seconds: u64) -> Duration {
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    started.elapsed()
}

fn report(what: &str, samples: &mut [Duration], elapsed: Option<Duration>) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    let rate = elapsed.map(|e| format!(", {:.0}/s", samples.len() as f64 / e.as_secs_f64())).unwrap_or_default();
    println!(
        "{what}: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms ({} samples{rate})",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        samples.len()
    );
}
