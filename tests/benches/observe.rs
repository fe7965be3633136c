//! Observing benchmarks (docs/architecture.md#performance-targets: OTLP/HTTP protobuf span ingest
//! on SQLite, acknowledged = committed, ≥ 100,000 spans/s; q/1 `sessions`, `spans` and `traces`
//! with 1M spans stored, p99 < 20 ms; every dashboard page's server time p99 < 20 ms with 1M
//! spans stored, and a first load under 200 KB).
//!
//! `cargo bench -p roost-tests --bench observe` runs the real server in this process
//! (release build) and posts pre-encoded OTLP/HTTP protobuf requests from concurrent
//! clients; a request counts once its 200 (sent after commit) arrives. Then it times q/1
//! queries over REST against what was stored, and every dashboard page: its time to the
//! last byte over loopback (an upper bound of the server's time) and its first-load
//! transfer (the gzipped HTML plus every asset it links, gzipped as served). On SQLite it
//! ends with `roost backup` of the filled store while the server runs, and its restore.
//!
//! The workload ([`roost_tests::workload`], shared with the 10M `scale` bench): traces of
//! five spans with random-looking ids, the first a model call carrying its conversation (as
//! senders with content capture on send it), so the store holds what full-text search
//! indexes and the q/1 `search` cases time it.
//!
//! Knobs (environment): ROOST_BENCH_SPANS (1000000), ROOST_BENCH_SPANS_PER_REQUEST (500),
//! ROOST_BENCH_CONCURRENCY (8), ROOST_BENCH_QUERIES (200), ROOST_BENCH_BACKEND
//! (sqlite|postgres), ROOST_BENCH_CONTENT (1; 0 sends no conversations),
//! ROOST_BENCH_KEEP_BACKUP (a path: the SQLite store's backup is copied there, to look
//! into with `sqlite3` after the run).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use prost::Message;
use roost_tests::{
    TestServer,
    bench::{self, percentiles},
    workload,
};
use serde_json::json;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let backend = bench::backend();
    let total = bench::knob::<usize>("ROOST_BENCH_SPANS", 1_000_000);
    let per_request = bench::knob::<usize>("ROOST_BENCH_SPANS_PER_REQUEST", 500);
    let concurrency = bench::knob::<usize>("ROOST_BENCH_CONCURRENCY", 8);
    let queries = bench::knob::<usize>("ROOST_BENCH_QUERIES", 200);
    let content = bench::knob::<u8>("ROOST_BENCH_CONTENT", 1) != 0;
    let server = TestServer::start(backend).await;
    let requests = total / per_request;
    println!(
        "backend {}, {requests} requests of {per_request} spans, {concurrency} concurrent clients",
        backend.name()
    );

    // Over the last hour (spans a few microseconds apart), a hundred traces a session.
    let shape = workload::Shape::new(total, per_request, 3_600_000_000_000, content);
    let bodies: Arc<Vec<Vec<u8>>> =
        Arc::new((0..requests).map(|n| workload::traces(n, &shape).encode_to_vec()).collect());
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    println!("encoded {:.1} MB of OTLP protobuf (conversations on model calls: {content})", bytes as f64 / 1e6);

    let (elapsed, mut latencies) = workload::post_traces(&server, bodies, concurrency).await;
    println!(
        "ingest: {} spans in {:.2} s = {:.0} spans/s (acknowledged after commit); per request {}",
        requests * per_request,
        elapsed.as_secs_f64(),
        (requests * per_request) as f64 / elapsed.as_secs_f64(),
        percentiles(&mut latencies)
    );
    let stored = server.api(None).post("/api/local/query", json!({"shape": "aggregates"})).await.ok();
    let spans: i64 = stored["rows"].as_array().unwrap().iter().map(|d| d["spans"].as_i64().unwrap()).sum();
    assert_eq!(spans as usize, requests * per_request, "every acknowledged span is stored");
    println!("resident memory after ingest: {:.0} MiB (server and clients)", bench::rss_kib("self") as f64 / 1024.0);

    workload::gather_statistics(&server).await;
    workload::print_bytes_by_object(&server, requests * per_request).await;
    workload::time_queries(&server, queries).await;
    workload::time_pages(&server, queries).await;
    if backend == roost_tests::Backend::Sqlite {
        workload::time_backup(&server).await;
    }
}
