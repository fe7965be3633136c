//! The observing benches' workload: OTLP requests shaped like a busy installation's, and
//! the q/1 queries and dashboard pages they time (shared by `observe`, the quick 1M run,
//! and `scale`, the 10M one, so their figures compare).
//!
//! Traces of five spans: the first a model call (six GenAI attributes, and with content
//! its conversation: a prompt and a reply of a dozen words each from a 5,000-word
//! vocabulary, naming a destination city, `lisbon` in one call in fifty), then four tool
//! calls. Trace ids are random-looking (as exporters make them: a hash of the trace's
//! number), so the store's trace-keyed indexes take their inserts in random order. A
//! session holds a hundred traces, taking turns with the others; 10 services; one span in
//! 97 fails. With logs, each trace also has one log record with a body.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::{logs::v1::ExportLogsServiceRequest, trace::v1::ExportTraceServiceRequest},
    common::v1::{AnyValue, KeyValue, any_value::Value},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status},
};
use serde_json::{Value as Json, json};

use crate::{TestServer, bench::percentiles};

/// Services the requests come from.
pub const SERVICES: u64 = 10;
/// Spans per trace.
pub const TRACE_SPANS: u64 = 5;

fn string(key: &str, value: String) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(Value::StringValue(value)) }), ..Default::default() }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(Value::IntValue(value)) }), ..Default::default() }
}

/// A 64-bit mix (splitmix64's finaliser): spreads consecutive numbers over the whole range.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The 16-byte id of trace number `trace`.
pub fn trace_id(trace: u64) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&mix(trace).to_be_bytes());
    id[8..].copy_from_slice(&mix(!trace).to_be_bytes());
    id
}

/// The id of trace number `trace` as q/1 and the pages show it (hex).
pub fn trace_hex(trace: u64) -> String {
    hex::encode(trace_id(trace))
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

fn resource(n: usize) -> Resource {
    Resource { attributes: vec![string("service.name", format!("svc-{}", n as u64 % SERVICES))], ..Default::default() }
}

/// What the requests of one run share.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Spans per traces request.
    pub per_request: usize,
    /// The first span's start (ns).
    pub start_ns: u64,
    /// Between one span's start and the next's (ns).
    pub step_ns: u64,
    /// Sessions the traces take turns in.
    pub sessions: u64,
    /// Whether model calls carry their conversation.
    pub content: bool,
}

impl Shape {
    /// `total` spans ending about now, spread over `window_ns`, a hundred traces a session.
    pub fn new(total: usize, per_request: usize, window_ns: u64, content: bool) -> Self {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_nanos() as u64;
        let step_ns = (window_ns / total.max(1) as u64).max(1);
        Self {
            per_request,
            start_ns: now - window_ns - 60_000_000_000,
            step_ns,
            sessions: (total as u64 / TRACE_SPANS / 100).max(1),
            content,
        }
    }

    fn session(&self, trace: u64) -> String {
        format!("session-{}", trace % self.sessions)
    }
}

/// Traces request `n`: spans `n * per_request` on.
pub fn traces(n: usize, shape: &Shape) -> ExportTraceServiceRequest {
    let per_request = shape.per_request;
    let spans = (0..per_request)
        .map(|i| {
            let global = (n * per_request + i) as u64;
            let trace = global / TRACE_SPANS;
            let root = global.is_multiple_of(TRACE_SPANS);
            let mut attributes = vec![string("session.id", shape.session(trace))];
            if root {
                attributes.extend([
                    string("gen_ai.operation.name", "chat".into()),
                    string("gen_ai.system", "openai".into()),
                    string("gen_ai.request.model", "gpt-4o-mini".into()),
                    int("gen_ai.usage.input_tokens", 800),
                    int("gen_ai.usage.output_tokens", 200),
                    // Who the conversation is for, as apps tag it (a label of the trace).
                    string("user.id", format!("user-{}", trace % 100)),
                ]);
                if shape.content {
                    attributes.extend(conversation(trace));
                }
            } else {
                attributes.push(string("tool.name", format!("tool-{}", global % 7)));
            }
            let start = shape.start_ns + global * shape.step_ns;
            Span {
                trace_id: trace_id(trace).to_vec(),
                span_id: mix(global ^ 0x5a5a).to_be_bytes().to_vec(),
                parent_span_id: if root {
                    Vec::new()
                } else {
                    mix((trace * TRACE_SPANS) ^ 0x5a5a).to_be_bytes().to_vec()
                },
                name: if root { "chat gpt-4o-mini".into() } else { "tool call".into() },
                kind: 1,
                start_time_unix_nano: start,
                end_time_unix_nano: start + shape.step_ns / 2,
                attributes,
                status: global.is_multiple_of(97).then(|| Status { code: 2, message: "failed".into() }),
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource(n)),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// The log records of the traces in [`traces`]`(n, shape)`: one per trace, in the trace
/// and its session, with a sentence for a body.
pub fn logs(n: usize, shape: &Shape) -> ExportLogsServiceRequest {
    let first = (n * shape.per_request) as u64;
    let records = (first..first + shape.per_request as u64)
        .filter(|global| global.is_multiple_of(TRACE_SPANS))
        .map(|global| {
            let trace = global / TRACE_SPANS;
            LogRecord {
                time_unix_nano: shape.start_ns + global * shape.step_ns + shape.step_ns / 4,
                severity_number: 9,
                severity_text: "INFO".into(),
                body: Some(AnyValue { value: Some(Value::StringValue(sentence(trace, 3, "planned"))) }),
                attributes: vec![string("session.id", shape.session(trace))],
                trace_id: trace_id(trace).to_vec(),
                span_id: mix((trace * TRACE_SPANS) ^ 0x5a5a).to_be_bytes().to_vec(),
                ..Default::default()
            }
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource(n)),
            scope_logs: vec![ScopeLogs { log_records: records, ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// Posts every body to `/v1/traces` (OTLP/HTTP protobuf) from `clients` concurrent
/// clients, each request counted once its 200 (sent after commit) is read; how long it
/// all took, and each request's time.
pub async fn post_traces(server: &TestServer, bodies: Arc<Vec<Vec<u8>>>, clients: usize) -> (Duration, Vec<Duration>) {
    let next = Arc::new(AtomicUsize::new(0));
    let url = server.url("/v1/traces");
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let (bodies, next, url, http) = (bodies.clone(), next.clone(), url.clone(), server.http.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while let Some(body) = bodies.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let sent = Instant::now();
                    let resp = http
                        .post(&url)
                        .header("content-type", "application/x-protobuf")
                        .body(body.clone())
                        .send()
                        .await
                        .expect("export sent");
                    assert_eq!(resp.status(), 200);
                    let _ = resp.bytes().await.expect("export answered");
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.expect("client"));
    }
    (started.elapsed(), latencies)
}

/// On PostgreSQL, gathers the planner's statistics (`ANALYZE`) before the timings, as
/// autovacuum does a minute or so after a bulk load: these runs load faster than that.
/// Without them a trace's spans took 200 ms at 1M (the planner walked the time index
/// backwards instead of taking the trace's key). SQLite plans without statistics.
pub async fn gather_statistics(server: &TestServer) {
    if matches!(server.config.database_url, roost_server::store::DatabaseUrl::Postgres(_)) {
        server.sql("ANALYZE").await.expect("ANALYZE");
        println!("statistics gathered (ANALYZE), as autovacuum would after such a load");
    }
}

/// Prints where the store's bytes are, table by table and index by index, as bytes a span
/// of `spans`: the objects over 1 % of the store, largest first (SQLite's `dbstat`,
/// PostgreSQL's relation sizes with each table's TOAST).
pub async fn print_bytes_by_object(server: &TestServer, spans: usize) {
    let statement = if matches!(server.config.database_url, roost_server::store::DatabaseUrl::Postgres(_)) {
        "SELECT c.relname::text, (CASE c.relkind WHEN 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END)::bigint \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i') ORDER BY 2 DESC"
    } else {
        "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
    };
    let objects = server.sql_named(statement).await.expect("sizes by object");
    let total: i64 = objects.iter().map(|(_, bytes)| bytes).sum();
    let shown: Vec<String> = objects
        .iter()
        .filter(|(_, bytes)| *bytes * 100 >= total)
        .map(|(name, bytes)| format!("{name} {:.0}", *bytes as f64 / spans as f64))
        .collect();
    println!("bytes a span by object ({:.0} in all): {}", total as f64 / spans as f64, shown.join(", "));
}

/// Times every q/1 case `queries` times, printing p50/p99/max and the rows it returned.
pub async fn time_queries(server: &TestServer, queries: usize) {
    let api = server.api(None);
    let trace = trace_hex(1_000);
    let cases: Vec<(&str, Json)> = vec![
        ("sessions", json!({})),
        ("sessions", json!({"limit": 500})),
        ("sessions", json!({"service": "svc-3"})),
        ("spans", json!({})),
        ("spans", json!({"limit": 1000})),
        ("spans", json!({"session_id": "session-42"})),
        ("spans", json!({"trace_id": trace})),
        ("spans", json!({"service": "svc-7"})),
        ("spans", json!({"errors_only": true})),
        ("traces", json!({})),
        ("traces", json!({"session_id": "session-42"})),
        ("traces", json!({"service": "svc-2", "limit": 200})),
        ("logs", json!({})),
        ("logs", json!({"session_id": "session-42"})),
        ("aggregates", json!({})),
        ("sessions", json!({"user": "user-42"})),
        ("traces", json!({"user": "user-42"})),
        ("latency", json!({})),
        ("latency", json!({"group": "service", "hours": 2160})),
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
            rows = reply["count"].as_i64().unwrap_or_default();
        }
        println!("q/1 {shape} {args}: {} ({rows} rows)", percentiles(&mut samples));
    }
    // An export of every trace, read as fast as the client takes it.
    let sent = Instant::now();
    let reply = server
        .http
        .post(server.url("/api/local/export"))
        .json(&json!({"shape": "traces", "format": "csv"}))
        .send()
        .await
        .expect("the export answers");
    let body = reply.bytes().await.expect("the export's body arrives whole");
    let rows = body.iter().filter(|b| **b == b'\n').count().saturating_sub(1);
    let took = sent.elapsed().as_secs_f64();
    println!(
        "export traces as CSV: {rows} rows, {:.1} MB in {took:.2} s = {:.0} rows/s",
        body.len() as f64 / 1e6,
        rows as f64 / took
    );
}

/// Times every dashboard page `queries` times and measures its first load (the gzipped
/// HTML and every asset it links, gzipped as served).
pub async fn time_pages(server: &TestServer, queries: usize) {
    let api = server.api(None);
    let trace = trace_hex(1_000);
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
            let resp = server.http.get(server.url(&path)).header("accept-encoding", "gzip").send().await.expect("page");
            assert_eq!(resp.status(), 200, "{path}");
            gzipped = resp.headers().get("content-encoding").is_some_and(|v| v == "gzip");
            html = resp.bytes().await.expect("page body").to_vec();
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
        flate2::read::GzDecoder::new(html).read_to_string(&mut text).expect("gzip");
    } else {
        text = String::from_utf8_lossy(html).into_owned();
    }
    let document = scraper::Html::parse_document(&text);
    let selector = scraper::Selector::parse("link[href], script[src]").expect("selector");
    let mut total = 0;
    for element in document.select(&selector) {
        let url = element.value().attr("href").or_else(|| element.value().attr("src")).unwrap_or_default();
        let resp = server.http.get(server.url(url)).header("accept-encoding", "gzip").send().await.expect("asset");
        total += resp.bytes().await.expect("asset body").len();
    }
    total
}

/// Times `roost backup` of the server's SQLite store (while it runs) and a restore of it
/// into an empty data directory.
pub async fn time_backup(server: &TestServer) {
    use roost_server::store::backup::{backup_sqlite, restore_sqlite};
    let data_dir = &server.config.data_dir;
    let db = data_dir.join("roost.db");
    let mib = |path: &std::path::Path| std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1048576.0);
    let wal = mib(&data_dir.join("roost.db-wal"));
    let folder = tempfile::tempdir().expect("tempdir");
    let file = folder.path().join("backup.db");
    let report = backup_sqlite(&db, data_dir, &file, false).await.expect("backup");
    if let Ok(keep) = std::env::var("ROOST_BENCH_KEEP_BACKUP") {
        std::fs::copy(&file, keep).expect("keep backup");
    }
    println!(
        "backup: store {:.0} MiB (+{wal:.0} MiB WAL) → {:.0} MiB file in {:.1} s",
        mib(&db),
        report.bytes as f64 / 1048576.0,
        report.seconds
    );
    let target = folder.path().join("restored");
    let started = Instant::now();
    restore_sqlite(&file, &target, &target.join("roost.db"), false).await.expect("restore");
    println!("restore into an empty data directory: {:.1} s", started.elapsed().as_secs_f64());
}
