//! Stream benchmark (docs/architecture.md#performance-targets: ingest → SSE client p99 < 50 ms
//! with 10 clients per stream).
//!
//! `cargo bench -p roost-tests --bench streams` runs the real server in this process
//! (release build) with 10 SSE clients on each of the brain, log and health streams, then
//! posts OTLP/HTTP protobuf requests one after another, each one span and one log record.
//! A sample is the time from sending a request to one client receiving its span (brain)
//! or its record (logs): every client counts, so 10 samples per request and stream.
//!
//! Knobs (environment): ROOST_BENCH_REQUESTS (500), ROOST_BENCH_CLIENTS (10),
//! ROOST_BENCH_INTERVAL_MS (5), ROOST_BENCH_BACKEND (sqlite|postgres).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::{logs::v1::ExportLogsServiceRequest, trace::v1::ExportTraceServiceRequest},
    common::v1::{AnyValue, any_value::Value},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    trace::v1::{ResourceSpans, ScopeSpans, Span},
};
use prost::Message;
use roost_tests::{Backend, SseClient, TestServer, bench::percentiles};

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

/// Send times by request number, and the latencies clients saw.
#[derive(Default)]
struct Samples {
    sent: Vec<Option<Instant>>,
    brain: Vec<Duration>,
    logs: Vec<Duration>,
}

fn spans(n: usize) -> Vec<u8> {
    let mut trace_id = vec![0u8; 16];
    trace_id[..8].copy_from_slice(&(n as u64 + 1).to_be_bytes());
    let span = Span {
        trace_id,
        span_id: 1u64.to_be_bytes().to_vec(),
        name: format!("req-{n}"),
        start_time_unix_nano: 1_700_000_000_000_000_000,
        end_time_unix_nano: 1_700_000_000_001_000_000,
        ..Default::default()
    };
    let scope = ScopeSpans { spans: vec![span], ..Default::default() };
    ExportTraceServiceRequest { resource_spans: vec![ResourceSpans { scope_spans: vec![scope], ..Default::default() }] }
        .encode_to_vec()
}

fn logs(n: usize) -> Vec<u8> {
    let record = LogRecord {
        time_unix_nano: 1_700_000_000_000_000_000,
        severity_number: 9,
        body: Some(AnyValue { value: Some(Value::StringValue(format!("req-{n}"))) }),
        ..Default::default()
    };
    let scope = ScopeLogs { log_records: vec![record], ..Default::default() };
    ExportLogsServiceRequest { resource_logs: vec![ResourceLogs { scope_logs: vec![scope], ..Default::default() }] }
        .encode_to_vec()
}

/// Reads a stream until `requests` items arrived (or it goes quiet), recording latencies.
async fn listen(mut client: SseClient, requests: usize, field: &'static str, samples: Arc<Mutex<Samples>>) {
    let mut seen = 0;
    while seen < requests {
        let Some(item) = client.next_event(Duration::from_secs(10)).await else { break };
        let at = Instant::now();
        let json = item.json();
        let Some(n) = json[field].as_str().and_then(|t| t.strip_prefix("req-")).and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        seen += 1;
        let mut samples = samples.lock().unwrap();
        if let Some(sent) = samples.sent[n] {
            let latency = at - sent;
            if field == "title" { samples.brain.push(latency) } else { samples.logs.push(latency) }
        }
    }
}

async fn run() {
    let requests = knob("ROOST_BENCH_REQUESTS", 500);
    let clients = knob("ROOST_BENCH_CLIENTS", 10);
    let interval = Duration::from_millis(knob("ROOST_BENCH_INTERVAL_MS", 5) as u64);
    let backend = match std::env::var("ROOST_BENCH_BACKEND").as_deref() {
        Ok("postgres") => Backend::Postgres,
        _ => Backend::Sqlite,
    };
    let server = TestServer::start_with(backend, |c| {
        c.streams.brain_clients = clients;
        c.streams.log_clients = clients;
        c.streams.health_clients = clients;
    })
    .await;
    println!("backend {}, {requests} requests {interval:?} apart, {clients} clients per stream", backend.name());
    let samples = Arc::new(Mutex::new(Samples { sent: vec![None; requests], ..Samples::default() }));
    let mut listeners = Vec::new();
    let mut health = Vec::new();
    for _ in 0..clients {
        let brain = SseClient::open(server.http.get(server.url("/api/brain-stream"))).await.unwrap();
        listeners.push(tokio::spawn(listen(brain, requests, "title", samples.clone())));
        // Ingested records only: roost's own lines would not carry a request number.
        let log = SseClient::open(server.http.get(server.url("/api/logs"))).await.unwrap();
        listeners.push(tokio::spawn(listen(log, requests, "message", samples.clone())));
        health.push(SseClient::open(server.http.get(server.url("/api/health-stream"))).await.unwrap());
    }

    let http = server.http.clone();
    for n in 0..requests {
        let (trace_body, log_body) = (spans(n), logs(n));
        samples.lock().unwrap().sent[n] = Some(Instant::now());
        let traces =
            http.post(server.url("/v1/traces")).header("content-type", "application/x-protobuf").body(trace_body);
        let logs = http.post(server.url("/v1/logs")).header("content-type", "application/x-protobuf").body(log_body);
        let (a, b) = tokio::join!(traces.send(), logs.send());
        assert_eq!((a.unwrap().status().as_u16(), b.unwrap().status().as_u16()), (200, 200));
        tokio::time::sleep(interval).await;
    }
    for listener in listeners {
        listener.await.unwrap();
    }
    let mut samples = samples.lock().unwrap();
    let (brain, logs) = (samples.brain.len(), samples.logs.len());
    println!("ingest → brain-stream client: {} ({brain} samples)", percentiles(&mut samples.brain));
    println!("ingest → log-stream client: {} ({logs} samples)", percentiles(&mut samples.logs));
    drop(health);
}
