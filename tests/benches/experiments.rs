//! Experiments benchmark: items per second of an experiment against an `echo` agent
//! (docs/benchmarks.md).
//!
//! `cargo bench -p roost-tests --bench experiments` runs the real server in this process
//! (release build), makes a dataset of ROOST_BENCH_ITEMS (1000) items from JSON Lines, runs
//! it against an echo agent (which answers at once, so what is measured is roost's own work
//! per item: its result row written before the turn, the turn through the agent's queue and
//! recorder, the check, and the settled result with the run's aggregates), and prints items
//! per second from the experiment's creation to its end (the run's own timestamps).
//!
//! Knobs (environment): ROOST_BENCH_ITEMS (1000), ROOST_BENCH_BACKEND (sqlite|postgres).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use roost_tests::{TestServer, bench};
use serde_json::json;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let backend = bench::backend();
    let items = bench::knob::<usize>("ROOST_BENCH_ITEMS", 1_000);
    let server = TestServer::start_with(backend, |_| {}).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let agent = api.provision("echo", "bench").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&agent, "running").await;
    let jsonl: String =
        (0..items).map(|n| format!("{{\"input\":\"item {n}\",\"expected\":\"[bench] item {n}\"}}\n")).collect();
    let started = Instant::now();
    let made = api.post("/api/v1/datasets", json!({"name": "bench", "items": {"jsonl": jsonl}})).await.ok();
    let dataset = made["dataset"]["id"].as_str().unwrap().to_owned();
    println!(
        "backend {}: a dataset of {items} items from JSON Lines in {:.0} ms",
        backend.name(),
        started.elapsed().as_secs_f64() * 1e3
    );

    let run = api.post("/api/v1/experiments", json!({"dataset_id": dataset, "agent_id": agent})).await.ok();
    let id = run["experiment"]["id"].as_str().unwrap().to_owned();
    // Polled slowly (a detail answer carries every result), and timed by the run's own
    // start and end, so the polling neither loads the run nor rounds its time.
    let detail = loop {
        let got = api.get(&format!("/api/v1/experiments/{id}")).await.ok();
        if !["queued", "running"].contains(&got["experiment"]["status"].as_str().unwrap()) {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let at = |field: &str| {
        let stamp: prost_types::Timestamp = detail["experiment"][field].as_str().unwrap().parse().unwrap();
        stamp.seconds as f64 + f64::from(stamp.nanos) / 1e9
    };
    let elapsed = at("finished_at") - at("created_at");
    let experiment = &detail["experiment"];
    assert_eq!(experiment["status"], "completed", "{experiment}");
    assert_eq!(experiment["completed"], items, "{experiment}");
    assert_eq!(experiment["summary"]["checks"]["exact_match"], 1.0, "{experiment}");
    println!(
        "experiment of {items} items against echo: {elapsed:.2} s = {:.0} items/s (turn latency mean {:.2} ms, p95 {:.0} ms)",
        items as f64 / elapsed,
        experiment["summary"]["latency_mean_ms"].as_f64().unwrap_or_default(),
        experiment["summary"]["latency_p95_ms"].as_f64().unwrap_or_default(),
    );
}
