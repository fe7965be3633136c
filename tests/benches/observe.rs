//! Observing benchmarks (DESIGN.md targets: OTLP/HTTP protobuf span ingest on SQLite,
//! acknowledged = committed, ≥ 100,000 spans/s; q/1 `sessions`, `spans` and `traces` with
//! 1M spans stored, p99 < 20 ms; every dashboard page's server time p99 < 20 ms with 1M
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
//! Every model call (one span in five) carries its conversation, as senders with content
//! capture on send it: a prompt and a reply of a dozen words each from a 5,000-word
//! vocabulary, with a destination city (`lisbon` in one call in fifty). So the store holds
//! what full-text search indexes, and the q/1 `search` cases time it: a rare word, a
//! common one, two words, a prefix, grouped by conversation, and a word in no document.
//!
//! Knobs (environment): ROOST_BENCH_SPANS (1000000), ROOST_BENCH_SPANS_PER_REQUEST (500),
//! ROOST_BENCH_CONCURRENCY (8), ROOST_BENCH_QUERIES (200), ROOST_BENCH_BACKEND
//! (sqlite|postgres), ROOST_BENCH_CONTENT (1; 0 sends no conversations).

// Benchmark code: a failed unwrap is a broken run.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Instant,
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value::Value},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status},
};
use prost::Message;
use roost_tests::{
    TestServer,
    bench::{self, percentiles},
};
use serde_json::{Value as Json, json};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

const SESSIONS: u64 = 2_000;
const SERVICES: u64 = 10;

fn string(key: &str, value: String) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(Value::StringValue(value)) }), ..Default::default() }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(Value::IntValue(value)) }), ..Default::default() }
}

/// Cities a prompt names: `lisbon` is one in fifty.
const CITIES: [&str; 50] = [
    "lisbon",
    "paris",
    "berlin",
    "madrid",
    "rome",
    "vienna",
    "prague",
    "warsaw",
    "oslo",
    "dublin",
    "athens",
    "zurich",
    "geneva",
    "munich",
    "hamburg",
    "milan",
    "naples",
    "seville",
    "valencia",
    "porto",
    "lyon",
    "nice",
    "krakow",
    "budapest",
    "bucharest",
    "sofia",
    "riga",
    "tallinn",
    "vilnius",
    "helsinki",
    "stockholm",
    "copenhagen",
    "amsterdam",
    "brussels",
    "antwerp",
    "rotterdam",
    "cologne",
    "frankfurt",
    "stuttgart",
    "salzburg",
    "ljubljana",
    "zagreb",
    "belgrade",
    "sarajevo",
    "tirana",
    "skopje",
    "valletta",
    "reykjavik",
    "edinburgh",
    "cardiff",
];

/// Word `i` of a 5,000-word vocabulary: pronounceable, distinct.
fn word(i: u64) -> String {
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "ra", "te", "vu", "sen", "dor", "bil", "fa", "no", "pe", "qui", "zo", "har", "jun", "wel",
        "ti", "gos", "mar",
    ];
    let i = i % 5_000;
    [i % 20, (i / 20) % 20, (i / 400) % 13].iter().map(|&s| SYLLABLES[s as usize]).collect()
}

/// A dozen words for call `n` (`salt` varies the sentence), ending with `tail`.
fn sentence(n: u64, salt: u64, tail: &str) -> String {
    let mut x = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(salt.wrapping_mul(1_442_695_040_888_963_407));
    let mut words: Vec<String> = (0..12)
        .map(|_| {
            x ^= x >> 33;
            x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
            // Skewed: low word numbers are far more common, as in text.
            word((x % 5_000) * (x % 5_000) / 5_000)
        })
        .collect();
    words.push(tail.to_owned());
    words.join(" ")
}

/// The conversation of model call `n`, as `gen_ai.input.messages` / `gen_ai.output.messages`.
fn conversation(n: u64) -> [KeyValue; 2] {
    let city = CITIES[(n % 50) as usize];
    let part =
        |role: &str, text: String| json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string();
    [
        string("gen_ai.input.messages", part("user", sentence(n, 1, &format!("trip to {city} please")))),
        string("gen_ai.output.messages", part("assistant", sentence(n, 2, &format!("{city} is lovely")))),
    ]
}

/// Request `n`: `per_request` spans in traces of 5 spans, the first of each an LLM call
/// (with its conversation when `content`).
fn request(n: usize, per_request: usize, start_ns: u64, content: bool) -> Vec<u8> {
    let service = n as u64 % SERVICES;
    let spans = (0..per_request)
        .map(|i| {
            let global = (n * per_request + i) as u64;
            let trace = global / 5;
            let session = trace % SESSIONS;
            let mut trace_id = [0u8; 16];
            trace_id[..8].copy_from_slice(&trace.to_be_bytes());
            trace_id[8] = 1;
            let root = global.is_multiple_of(5);
            let mut attributes = vec![string("session.id", format!("session-{session}"))];
            if root {
                attributes.extend([
                    string("gen_ai.operation.name", "chat".into()),
                    string("gen_ai.system", "openai".into()),
                    string("gen_ai.request.model", "gpt-4o-mini".into()),
                    int("gen_ai.usage.input_tokens", 800),
                    int("gen_ai.usage.output_tokens", 200),
                ]);
                if content {
                    attributes.extend(conversation(trace));
                }
            } else {
                attributes.push(string("tool.name", format!("tool-{}", global % 7)));
            }
            let start = start_ns + global * 1_000;
            Span {
                trace_id: trace_id.to_vec(),
                span_id: (global + 1).to_be_bytes().to_vec(),
                parent_span_id: if root { Vec::new() } else { (trace * 5 + 1).to_be_bytes().to_vec() },
                name: if root { "chat gpt-4o-mini".into() } else { "tool call".into() },
                kind: 1,
                start_time_unix_nano: start,
                end_time_unix_nano: start + 250_000,
                attributes,
                status: global.is_multiple_of(97).then(|| Status { code: 2, message: "failed".into() }),
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![string("service.name", format!("svc-{service}"))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
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

    let start_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        - 3_600_000_000_000;
    let bodies: Arc<Vec<Vec<u8>>> =
        Arc::new((0..requests).map(|n| request(n, per_request, start_ns, content)).collect());
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    println!("encoded {:.1} MB of OTLP protobuf (conversations on model calls: {content})", bytes as f64 / 1e6);

    let next = Arc::new(AtomicUsize::new(0));
    let url = server.url("/v1/traces");
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (bodies, next, url, http) = (bodies.clone(), next.clone(), url.clone(), server.http.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= bodies.len() {
                        return latencies;
                    }
                    let sent = Instant::now();
                    let resp = http
                        .post(&url)
                        .header("content-type", "application/x-protobuf")
                        .body(bodies[n].clone())
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(resp.status(), 200);
                    let _ = resp.bytes().await.unwrap();
                    latencies.push(sent.elapsed());
                }
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    let elapsed = started.elapsed();
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

    let api = server.api(None);
    let cases: Vec<(&str, Json)> = vec![
        ("sessions", json!({})),
        ("sessions", json!({"limit": 500})),
        ("sessions", json!({"service": "svc-3"})),
        ("spans", json!({})),
        ("spans", json!({"limit": 1000})),
        ("spans", json!({"session_id": "session-42"})),
        ("spans", json!({"trace_id": "00000000000003e80100000000000000"})),
        ("spans", json!({"service": "svc-7"})),
        ("spans", json!({"errors_only": true})),
        ("traces", json!({})),
        ("traces", json!({"session_id": "session-42"})),
        ("traces", json!({"service": "svc-2", "limit": 200})),
        ("search", json!({"text": "lisbon"})),
        ("search", json!({"text": "please"})),
        ("search", json!({"text": "lisbon lovely"})),
        ("search", json!({"text": "lisb"})),
        ("search", json!({"text": "lisbon", "group": "conversation"})),
        ("search", json!({"text": "lisbon", "group": "trace", "service_contains": "svc-3"})),
        ("search", json!({"text": "nowhere"})),
    ];
    for (shape, args) in cases {
        let mut samples = Vec::with_capacity(queries);
        let mut rows = 0;
        for _ in 0..queries {
            let sent = Instant::now();
            let reply = api.post("/api/local/query", json!({"shape": shape, "args": args})).await.ok();
            samples.push(sent.elapsed());
            rows = reply["count"].as_i64().unwrap();
        }
        println!("q/1 {shape} {args}: {} ({rows} rows)", percentiles(&mut samples));
    }
    pages(&server, queries).await;
    if backend == roost_tests::Backend::Sqlite {
        backup(&server).await;
    }
}

/// Times `roost backup` of the store the bench filled (while the server runs) and a
/// restore of it into an empty data directory.
async fn backup(server: &TestServer) {
    use roost_server::store::backup::{backup_sqlite, restore_sqlite};
    let data_dir = &server.config.data_dir;
    let db = data_dir.join("roost.db");
    let mib = |path: &std::path::Path| std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1048576.0);
    let wal = mib(&data_dir.join("roost.db-wal"));
    let folder = tempfile::tempdir().unwrap();
    let file = folder.path().join("backup.db");
    let report = backup_sqlite(&db, data_dir, &file, false).await.unwrap();
    println!(
        "backup: store {:.0} MiB (+{wal:.0} MiB WAL) → {:.0} MiB file in {:.1} s",
        mib(&db),
        report.bytes as f64 / 1048576.0,
        report.seconds
    );
    let target = folder.path().join("restored");
    let started = Instant::now();
    restore_sqlite(&file, &target, &target.join("roost.db"), false).await.unwrap();
    println!("restore into an empty data directory: {:.1} s", started.elapsed().as_secs_f64());
}

/// Times every dashboard page and measures its first load.
async fn pages(server: &TestServer, queries: usize) {
    let api = server.api(None);
    let trace = "00000000000003e80100000000000000";
    let spans = api.post("/api/local/query", json!({"shape": "spans", "args": {"trace_id": trace}})).await.ok();
    let span = spans["rows"][0]["span_id"].as_str().unwrap_or_default().to_owned();
    let paths = [
        "/".to_owned(),
        "/dashboard/sessions".into(),
        "/dashboard/sessions?service=svc-3&page=3".into(),
        "/dashboard/sessions?q=session-4".into(),
        "/dashboard/sessions?text=lisbon".into(),
        "/dashboard/traces?text=lisbon+lovely".into(),
        "/dashboard/sessions/session-42".into(),
        "/dashboard/traces".into(),
        "/dashboard/traces?errors=on&range=24h".into(),
        "/dashboard/traces?model=gpt-4o-mini&page=2".into(),
        format!("/dashboard/traces/{trace}"),
        format!("/dashboard/traces/{trace}?span={span}"),
        "/dashboard/live".into(),
        "/dashboard/logs".into(),
        "/dashboard/usage".into(),
        "/dashboard/usage?days=365".into(),
        "/dashboard/alerts".into(),
        "/dashboard/guard".into(),
        "/dashboard/crons".into(),
        "/dashboard/channels".into(),
        "/dashboard/skills".into(),
        "/dashboard/health".into(),
        "/dashboard/updates".into(),
    ];
    for path in paths {
        let mut samples = Vec::with_capacity(queries);
        let (mut html, mut gzipped) = (Vec::new(), false);
        for _ in 0..queries {
            let sent = Instant::now();
            let resp = server.http.get(server.url(&path)).header("accept-encoding", "gzip").send().await.unwrap();
            assert_eq!(resp.status(), 200, "{path}");
            gzipped = resp.headers().get("content-encoding").is_some_and(|v| v == "gzip");
            html = resp.bytes().await.unwrap().to_vec();
            samples.push(sent.elapsed());
        }
        let transfer = html.len() + linked_assets(server, &html, gzipped).await;
        println!("page {path}: {}; first load {:.1} KB gzipped", percentiles(&mut samples), transfer as f64 / 1024.0);
    }
}

/// Bytes of every stylesheet, script and icon a page links, as served gzipped.
async fn linked_assets(server: &TestServer, html: &[u8], gzipped: bool) -> usize {
    use std::io::Read;
    let mut text = String::new();
    if gzipped {
        flate2::read::GzDecoder::new(html).read_to_string(&mut text).unwrap();
    } else {
        text = String::from_utf8_lossy(html).into_owned();
    }
    let document = scraper::Html::parse_document(&text);
    let selector = scraper::Selector::parse("link[href], script[src]").unwrap();
    let mut total = 0;
    for element in document.select(&selector) {
        let url = element.value().attr("href").or_else(|| element.value().attr("src")).unwrap();
        let resp = server.http.get(server.url(url)).header("accept-encoding", "gzip").send().await.unwrap();
        total += resp.bytes().await.unwrap().len();
    }
    total
}
