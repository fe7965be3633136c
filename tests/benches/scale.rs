//! The scale bench: a store of 10M spans, served as fast as one of 1M.
//!
//! `cargo bench -p roost-tests --bench scale` fills a store (SQLite, or PostgreSQL with
//! `ROOST_BENCH_BACKEND=postgres`) with the observing workload ([`roost_tests::workload`]:
//! traces of five spans over the last day, one model call each with its conversation, one
//! log record each, a hundred traces a session) through roost's own ingest core
//! (`Telemetry::export_traces` and `export_logs`: conversion, pricing, the writer's group
//! commits, summaries, search documents), skipping only HTTP, so it is quick to fill. It
//! prints the fill's rate million by million (how ingest slows as the store grows) and the
//! store's bytes per span. Then it starts the real server on that store and times, over
//! HTTP: the q/1 shapes, every dashboard page, search, OTLP/HTTP ingest on top of the full
//! store (the rate to compare with the empty store's), a retention pass that deletes a
//! tenth of the data for size, and on SQLite `roost backup` and restore.
//!
//! Knobs (environment): ROOST_BENCH_SPANS (10000000), ROOST_BENCH_FILL_TASKS (2),
//! ROOST_BENCH_QUERIES (100), ROOST_BENCH_TOP_UP (200000 spans over HTTP), ROOST_BENCH_BACKEND
//! (sqlite|postgres).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use prost::Message;
use roost_server::{
    ServeConfig,
    store::Store,
    streams::Live,
    telemetry::{
        Telemetry,
        retention::{self, RetentionConfig},
    },
};
use roost_tests::{
    TestServer,
    bench::{self, percentiles},
    workload::{self, Shape},
};
use serde_json::json;

/// Spans per request (an OTLP exporter's batch).
const PER_REQUEST: usize = 1_000;
/// The day the spans are spread over.
const WINDOW_NS: u64 = 86_400_000_000_000;

fn main() {
    bench::block_on(run());
}

async fn run() {
    let backend = bench::backend();
    let total = bench::knob::<usize>("ROOST_BENCH_SPANS", 10_000_000).max(PER_REQUEST);
    let tasks = bench::knob::<usize>("ROOST_BENCH_FILL_TASKS", 2).max(1);
    let queries = bench::knob::<usize>("ROOST_BENCH_QUERIES", 100);
    let top_up = bench::knob::<usize>("ROOST_BENCH_TOP_UP", 200_000);
    let requests = total / PER_REQUEST;
    let total = requests * PER_REQUEST;
    let top_up_requests = top_up / PER_REQUEST;
    // The top-up continues the same traces' numbering, after the fill, in the same day.
    let shape = Shape::new(total + top_up_requests * PER_REQUEST, PER_REQUEST, WINDOW_NS, true);
    println!("backend {}, filling {total} spans ({} per request, {tasks} tasks)", backend.name(), PER_REQUEST);

    let server = TestServer::start(backend).await;
    let config = server.config.clone();
    let (server, filled) = server.restart_after(fill(config, shape, requests, tasks)).await;
    println!(
        "fill: {total} spans, {} logs in {:.0} s = {:.0} spans/s",
        total as u64 / workload::TRACE_SPANS,
        filled.as_secs_f64(),
        total as f64 / filled.as_secs_f64()
    );
    let store = server.store().await.clone();
    let size = store.size_bytes().await.unwrap();
    println!(
        "store: {:.0} MiB = {:.0} bytes a span (spans, their logs, messages, summaries and search included)",
        size as f64 / 1048576.0,
        size as f64 / total as f64
    );

    workload::gather_statistics(&server).await;
    workload::print_bytes_by_object(&server, total).await;
    workload::time_queries(&server, queries).await;
    workload::time_pages(&server, queries).await;
    ingest_on_top(&server, &shape, requests, top_up_requests).await;
    retention_for_size(&store).await;
    if backend == roost_tests::Backend::Sqlite {
        workload::time_backup(&server).await;
    }
}

/// Fills the store of `config` with `requests` traces requests and their logs through the
/// ingest core, from `tasks` tasks; prints each million's rate, returns the whole time.
async fn fill(config: ServeConfig, shape: Shape, requests: usize, tasks: usize) -> Duration {
    let store = Store::open(&config.database_url, &config.store).await.unwrap();
    let telemetry = Telemetry::new(
        store.clone(),
        config.hosting.prices.clone(),
        config.telemetry,
        false,
        Live::new(config.streams),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let per_million = 1_000_000 / PER_REQUEST;
    let started = Instant::now();
    let marks = Arc::new(std::sync::Mutex::new((started, 0usize)));
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (telemetry, next, marks) = (telemetry.clone(), next.clone(), marks.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= requests {
                        return;
                    }
                    telemetry.export_traces(workload::traces(n, &shape), None).await.unwrap();
                    telemetry.export_logs(workload::logs(n, &shape)).await.unwrap();
                    if (n + 1) % per_million == 0 {
                        let mut marks = marks.lock().unwrap();
                        let (since, millions) = (marks.0, marks.1 + 1);
                        println!("  million {millions}: {:.0} spans/s", 1_000_000.0 / since.elapsed().as_secs_f64());
                        *marks = (Instant::now(), millions);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let elapsed = started.elapsed();
    telemetry.shutdown().await;
    store.close().await;
    elapsed
}

/// Posts `count` more traces requests over OTLP/HTTP from 8 clients onto the full store.
async fn ingest_on_top(server: &TestServer, shape: &Shape, first: usize, count: usize) {
    if count == 0 {
        return;
    }
    let bodies: Arc<Vec<Vec<u8>>> =
        Arc::new((first..first + count).map(|n| workload::traces(n, shape).encode_to_vec()).collect());
    let (elapsed, mut latencies) = workload::post_traces(server, bodies, 8).await;
    println!(
        "ingest on the full store over OTLP/HTTP: {} spans in {:.1} s = {:.0} spans/s; per request {}",
        count * PER_REQUEST,
        elapsed.as_secs_f64(),
        (count * PER_REQUEST) as f64 / elapsed.as_secs_f64(),
        percentiles(&mut latencies)
    );
    let aggregates = server.api(None).post("/api/local/query", json!({"shape": "aggregates"})).await.ok();
    let spans: i64 = aggregates["rows"].as_array().unwrap().iter().map(|d| d["spans"].as_i64().unwrap()).sum();
    println!("spans stored: {spans}");
}

/// One retention pass bounding the store to 90 % of its used bytes.
async fn retention_for_size(store: &Store) {
    let used = retention::used_bytes(store).await.unwrap();
    let config = RetentionConfig { max_age: None, max_bytes: Some(used / 10 * 9), every: Duration::from_secs(300) };
    let started = Instant::now();
    let now_ns = roost_server::time::now_ms() * 1_000_000;
    let swept = retention::sweep(store, &config, now_ns).await.unwrap();
    println!(
        "retention to 90 % of {:.0} MiB: {} rows deleted in {:.1} s",
        used as f64 / 1048576.0,
        swept.for_size,
        started.elapsed().as_secs_f64()
    );
}
