//! Hostile telemetry: U+0000 in any string (PostgreSQL's TEXT refuses it), values and lists
//! past the OTel SDK's limits, and q/1 answers over many large rows. Ingest stores what it
//! can (NUL replaced, oversized values cut, extra attributes and events dropped), answers 200
//! and says what it changed in `partial_success`; q/1 stops at its byte budget.

use opentelemetry_proto::tonic::{
    collector::{
        logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse, logs_service_client::LogsServiceClient},
        metrics::v1::{
            ExportMetricsServiceRequest, ExportMetricsServiceResponse, metrics_service_client::MetricsServiceClient,
        },
        trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse, trace_service_client::TraceServiceClient},
    },
    common::v1::{AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList, any_value::Value as Any},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    metrics::v1::{Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, metric, number_data_point},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, Status, span::Event},
};
use prost::Message;
use roost_proto::{
    json::value::map_to_struct,
    v1::{QueryRequest, query_service_client::QueryServiceClient},
};
use roost_server::store::DatabaseUrl;
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};
use sqlx::Connection as _;

use super::{post_otlp, q1};

each_backend!(
    nul_in_telemetry_strings_is_replaced_over_every_wire,
    one_bad_span_does_not_fail_its_batch,
    times_out_of_range_are_refused_item_by_item,
    long_indexed_values_are_cut_alike_on_both_backends,
    oversized_values_attributes_and_events_are_cut_and_counted,
    the_attribute_limit_is_configurable,
    without_content_capture_messages_are_dropped_and_usage_kept,
    q1_answers_stop_at_the_byte_budget
);

const R: char = '\u{FFFD}';

fn text(value: &str) -> Option<AnyValue> {
    Some(AnyValue { value: Some(Any::StringValue(value.into())) })
}

fn kv(key: &str, value: Option<AnyValue>) -> KeyValue {
    KeyValue { key: key.into(), value, ..Default::default() }
}

fn string(key: &str, value: &str) -> KeyValue {
    kv(key, text(value))
}

fn resource(attributes: Vec<KeyValue>) -> Option<Resource> {
    Some(Resource { attributes, ..Default::default() })
}

fn span(trace: u8, n: u64, name: &str, attributes: Vec<KeyValue>) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: n.to_be_bytes().to_vec(),
        name: name.into(),
        start_time_unix_nano: 1_700_000_000_000_000_000 + n,
        end_time_unix_nano: 1_700_000_000_000_000_000 + n + 1_000,
        attributes,
        ..Default::default()
    }
}

fn traces(spans: Vec<Span>, resource_attributes: Vec<KeyValue>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: resource(resource_attributes),
            scope_spans: vec![ScopeSpans { scope: None, spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// Spans with U+0000 in every string ingest turns into stored text: 12 strings in all
/// (span name, attribute key and value, an array element, a kvlist key and value, the
/// status message, an event's name and attribute value, the scope name, two resource
/// values).
fn nul_traces(trace: u8, session: &str) -> ExportTraceServiceRequest {
    let array = Some(AnyValue {
        value: Some(Any::ArrayValue(ArrayValue {
            values: vec![text("a\0"), Some(AnyValue::default())].into_iter().flatten().collect(),
        })),
    });
    let kvlist =
        Some(AnyValue { value: Some(Any::KvlistValue(KeyValueList { values: vec![string("in\0ner", "x\0")] })) });
    let mut bad = span(
        trace,
        2,
        "bad\0name",
        vec![string("session.id", session), string("k\0ey", "v\0alue"), kv("list", array), kv("map", kvlist)],
    );
    bad.status = Some(Status { code: 2, message: "boom\0".into() });
    bad.events = vec![Event { name: "ev\0ent".into(), attributes: vec![string("e", "\0")], ..Default::default() }];
    let mut request = traces(
        vec![
            span(trace, 1, "first", vec![string("session.id", session)]),
            bad,
            span(trace, 3, "third", vec![string("session.id", session)]),
        ],
        vec![string("service.name", "svc\0nul"), string("host", "h\0")],
    );
    let scope = InstrumentationScope { name: format!("scope-{trace}\0"), ..Default::default() };
    request.resource_spans[0].scope_spans[0].scope = Some(scope);
    request
}

/// Log records with U+0000 in the body, severity text and an attribute's key and value,
/// plus the two resource values: 6 strings.
fn nul_logs(session: &str) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource(vec![string("service.name", "svc\0nul"), string("host", "h\0")]),
            scope_logs: vec![ScopeLogs {
                log_records: vec![LogRecord {
                    time_unix_nano: 1_700_000_000_000_000_000,
                    severity_number: 17,
                    severity_text: "ERR\0".into(),
                    body: text("log\0body"),
                    attributes: vec![string("session.id", session), string("a\0", "b\0")],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// A gauge with U+0000 in its name, unit, description and an attribute value, plus the
/// two resource values: 6 strings.
fn nul_metrics(session: &str) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: resource(vec![string("service.name", "svc\0nul"), string("host", "h\0")]),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: format!("m\0etric-{session}"),
                    unit: "s\0".into(),
                    description: "d\0".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![NumberDataPoint {
                            time_unix_nano: 1_700_000_000_000_000_000,
                            value: Some(number_data_point::Value::AsInt(4)),
                            attributes: vec![string("session.id", session), string("x", "y\0")],
                            ..Default::default()
                        }],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[derive(Clone, Copy, Debug)]
enum Wire {
    Protobuf,
    Json,
    Grpc,
}

/// What an OTLP answer said: (rejected count, error message).
type Partial = (i64, String);

/// An OTLP export request, sent over any wire.
trait Export: Message + Clone + Sized {
    /// Its OTLP/HTTP path.
    const PATH: &'static str;
    /// Its OTLP/JSON encoding.
    fn json(&self) -> Vec<u8>;
    /// The partial success of a protobuf answer.
    fn answer(bytes: &[u8]) -> Option<Partial>;
    /// Sends it over OTLP/gRPC; the partial success.
    async fn grpc(self, channel: tonic::transport::Channel) -> Option<Partial>;
}

impl Export for ExportTraceServiceRequest {
    const PATH: &'static str = "/v1/traces";
    fn json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap()
    }
    fn answer(bytes: &[u8]) -> Option<Partial> {
        ExportTraceServiceResponse::decode(bytes).unwrap().partial_success.map(|p| (p.rejected_spans, p.error_message))
    }
    async fn grpc(self, channel: tonic::transport::Channel) -> Option<Partial> {
        let reply = TraceServiceClient::new(channel).export(self).await.unwrap().into_inner();
        reply.partial_success.map(|p| (p.rejected_spans, p.error_message))
    }
}

impl Export for ExportLogsServiceRequest {
    const PATH: &'static str = "/v1/logs";
    fn json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap()
    }
    fn answer(bytes: &[u8]) -> Option<Partial> {
        ExportLogsServiceResponse::decode(bytes)
            .unwrap()
            .partial_success
            .map(|p| (p.rejected_log_records, p.error_message))
    }
    async fn grpc(self, channel: tonic::transport::Channel) -> Option<Partial> {
        let reply = LogsServiceClient::new(channel).export(self).await.unwrap().into_inner();
        reply.partial_success.map(|p| (p.rejected_log_records, p.error_message))
    }
}

impl Export for ExportMetricsServiceRequest {
    const PATH: &'static str = "/v1/metrics";
    fn json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap()
    }
    fn answer(bytes: &[u8]) -> Option<Partial> {
        ExportMetricsServiceResponse::decode(bytes)
            .unwrap()
            .partial_success
            .map(|p| (p.rejected_data_points, p.error_message))
    }
    async fn grpc(self, channel: tonic::transport::Channel) -> Option<Partial> {
        let reply = MetricsServiceClient::new(channel).export(self).await.unwrap().into_inner();
        reply.partial_success.map(|p| (p.rejected_data_points, p.error_message))
    }
}

/// Sends `request` over `wire`; asserts 200 (OTLP/HTTP) or OK (gRPC) and returns the
/// answer's partial success, if any.
async fn export<T: Export>(server: &TestServer, wire: Wire, request: T) -> Option<Partial> {
    let (content_type, body) = match wire {
        Wire::Grpc => return request.grpc(server.channel().await).await,
        Wire::Json => ("application/json", request.json()),
        Wire::Protobuf => ("application/x-protobuf", request.encode_to_vec()),
    };
    let resp = post_otlp(server, T::PATH, content_type, body).await;
    assert_eq!(resp.status(), 200, "{wire:?} {}", T::PATH);
    let bytes = resp.bytes().await.unwrap();
    if matches!(wire, Wire::Protobuf) {
        return T::answer(&bytes);
    }
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    let partial = answer.get("partialSuccess")?;
    let rejected = ["rejectedSpans", "rejectedLogRecords", "rejectedDataPoints"]
        .iter()
        .find_map(|k| partial.get(*k))
        .map_or(0, |v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap());
    Some((rejected, partial["errorMessage"].as_str().unwrap_or_default().to_owned()))
}

/// No stored text anywhere in `rows` holds U+0000, raw or as a JSON escape.
pub fn nul_free(rows: &[serde_json::Map<String, Value>]) {
    let text = serde_json::to_string(rows).unwrap();
    assert!(!text.contains("\\u0000") && !text.contains('\0'), "{text}");
}

async fn nul_in_telemetry_strings_is_replaced_over_every_wire(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    for (i, wire) in [Wire::Protobuf, Wire::Json, Wire::Grpc].into_iter().enumerate() {
        let session = format!("nul-{i}");
        let trace = 40 + i as u8;
        let partial = export(&server, wire, nul_traces(trace, &session)).await;
        assert_eq!(partial, Some((0, "replaced U+0000 with U+FFFD in 12 strings".to_owned())), "{wire:?}");
        let partial = export(&server, wire, nul_logs(&session)).await;
        assert_eq!(partial, Some((0, "replaced U+0000 with U+FFFD in 6 strings".to_owned())), "{wire:?}");
        let partial = export(&server, wire, nul_metrics(&session)).await;
        assert_eq!(partial, Some((0, "replaced U+0000 with U+FFFD in 6 strings".to_owned())), "{wire:?}");

        let spans = q1(&api, "spans", json!({"session_id": session})).await;
        assert_eq!(spans.len(), 3, "{wire:?}: every span is stored: {spans:?}");
        nul_free(&spans);
        let bad = spans.iter().find(|s| s["span_id"] == "0000000000000002").unwrap();
        assert_eq!(bad["name"], format!("bad{R}name"));
        assert_eq!(bad["status_message"], format!("boom{R}"));
        assert_eq!(bad["service"], format!("svc{R}nul"));
        assert_eq!(
            bad["attributes"],
            json!({"session.id": session, format!("k{R}ey"): format!("v{R}alue"), "list": [format!("a{R}"), null],
                   "map": {format!("in{R}ner"): format!("x{R}")}})
        );
        let traces = q1(&api, "traces", json!({"session_id": session})).await;
        assert_eq!((traces.len(), traces[0]["spans"].as_i64()), (1, Some(3)));

        let logs = q1(&api, "logs", json!({"session_id": session})).await;
        assert_eq!(logs.len(), 1, "{wire:?}");
        nul_free(&logs);
        assert_eq!(
            (logs[0]["body"].as_str(), logs[0]["severity"].as_str()),
            (Some(&*format!("log{R}body")), Some(&*format!("ERR{R}")))
        );
        assert_eq!(logs[0]["attributes"][format!("a{R}")], format!("b{R}"));

        let metrics = q1(&api, "metrics", json!({"session_id": session})).await;
        assert_eq!(metrics.len(), 1, "{wire:?}");
        nul_free(&metrics);
        assert_eq!(
            (metrics[0]["name"].as_str(), metrics[0]["unit"].as_str()),
            (Some(&*format!("m{R}etric-{session}")), Some(&*format!("s{R}")))
        );
    }
    let events = scalar(&server, &format!("SELECT COUNT(*) FROM span_events WHERE name = 'ev{R}ent'")).await;
    assert_eq!(events, 3, "span events are stored with U+0000 replaced");
    let sessions = q1(&api, "sessions", json!({})).await;
    nul_free(&sessions);
    let health = q1(&api, "health", json!({})).await;
    assert_eq!(health[0]["service"], format!("svc{R}nul"));
}

async fn one_bad_span_does_not_fail_its_batch(backend: Backend) {
    let server = TestServer::start(backend).await;
    // One request: a clean span, one with U+0000 in its name, one with a malformed id.
    let mut request = traces(
        vec![span(50, 1, "clean", vec![]), span(50, 2, "nul\0", vec![]), span(50, 3, "bad id", vec![])],
        vec![string("service.name", "one-bad")],
    );
    request.resource_spans[0].scope_spans[0].spans[2].trace_id = vec![1, 2, 3];
    let (rejected, message) = export(&server, Wire::Protobuf, request).await.unwrap();
    assert_eq!(rejected, 1, "{message}");
    assert!(message.contains("trace_id") && message.contains("replaced U+0000 with U+FFFD in 1 string"), "{message}");
    let spans = q1(&server.api(None), "spans", json!({"service": "one-bad"})).await;
    let mut names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["clean", &*format!("nul{R}")]);
}

/// Times before 1970 or more than a day ahead (1e30, 2^63, the year 9999) are refused:
/// a run event with 400 naming `ts`, an OTLP span, log record or data point one by one in
/// `partial_success`; the rest of the request is stored. (They were stored, clamped to 2262,
/// and counted in every "last 30 days".)
async fn times_out_of_range_are_refused_item_by_item(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let run = api.post("/api/v1/runs", json!({"runtime": "r", "session_id": "times"})).await.ok();
    let events = format!("/api/v1/runs/{}/events", run["run_id"].as_str().unwrap());
    for ts in
        [json!("1e30"), json!("9223372036854775807"), json!("9999-01-01T00:00:00Z"), json!("1969-07-20T20:17:00Z")]
    {
        let refused =
            api.post(&events, json!({"events": [{"id": "ok", "event_type": "x"}, {"id": "bad", "ts": ts}]})).await;
        refused.err(400, "invalid_argument");
        assert!(refused.body["error"].as_str().unwrap().contains("ts"), "{}", refused.body);
    }
    assert_eq!(q1(&api, "events", json!({"session_id": "times"})).await.len(), 0, "nothing of a refused request");
    api.post(&events, json!({"event": {"id": "now", "event_type": "x"}})).await.ok();

    let year_2500 = 16_725_225_600_000_000_000_u64;
    let mut request = traces(
        vec![span(61, 1, "fine", vec![]), span(61, 2, "future", vec![]), span(61, 3, "late end", vec![])],
        vec![string("service.name", "times")],
    );
    request.resource_spans[0].scope_spans[0].spans[1].start_time_unix_nano = u64::MAX;
    request.resource_spans[0].scope_spans[0].spans[2].end_time_unix_nano = year_2500;
    let (rejected, message) = export(&server, Wire::Protobuf, request).await.unwrap();
    assert_eq!(rejected, 2, "{message}");
    assert!(message.contains("more than a day ahead"), "{message}");
    let spans = q1(&api, "spans", json!({"service": "times"})).await;
    assert_eq!(spans.iter().map(|s| s["name"].as_str().unwrap()).collect::<Vec<_>>(), ["fine"]);

    let mut logs = nul_logs("times");
    let records = &mut logs.resource_logs[0].scope_logs[0].log_records;
    records.push(LogRecord { time_unix_nano: year_2500, ..records[0].clone() });
    assert_eq!(export(&server, Wire::Json, logs).await.unwrap().0, 1);
    assert_eq!(q1(&api, "logs", json!({"session_id": "times"})).await.len(), 1);

    let mut metrics = nul_metrics("times");
    if let Some(metric::Data::Gauge(gauge)) = &mut metrics.resource_metrics[0].scope_metrics[0].metrics[0].data {
        gauge.data_points.push(NumberDataPoint { time_unix_nano: u64::MAX, ..gauge.data_points[0].clone() });
    }
    assert_eq!(export(&server, Wire::Grpc, metrics).await.unwrap().0, 1);
    assert_eq!(q1(&api, "metrics", json!({"session_id": "times"})).await.len(), 1);
    // The default 30-day usage holds no day past tomorrow.
    let usage = api.get("/api/usage").await.ok();
    assert!(usage["days"].as_array().unwrap().iter().all(|d| d["day"].as_str().unwrap() < "2100"), "{usage}");
}

/// `n` characters no compressor shrinks (PostgreSQL compresses index entries first).
fn incompressible(n: usize, seed: u64) -> String {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[(x % 62) as usize])
        })
        .collect()
}

/// Strings far past PostgreSQL's index row limit in every indexed telemetry field (the
/// session, models, service, a log's session, a metric's name and model): stored, cut to
/// 1,024 bytes with the marker, on both backends (PostgreSQL failed the whole request with
/// a 500, "index row requires 60024 bytes").
async fn long_indexed_values_are_cut_alike_on_both_backends(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let long = |seed| incompressible(60_000, seed);
    let (session, model, service) = (long(1), long(2), long(3));
    let attributes = vec![
        string("gen_ai.conversation.id", &session),
        string("gen_ai.request.model", &model),
        string("gen_ai.response.model", &long(4)),
        kv("gen_ai.usage.input_tokens", Some(AnyValue { value: Some(Any::IntValue(5)) })),
    ];
    let request = traces(
        vec![span(62, 1, "long", attributes), span(62, 2, "short", vec![])],
        vec![string("service.name", &service)],
    );
    let (rejected, message) = export(&server, Wire::Protobuf, request).await.unwrap();
    assert_eq!(rejected, 0, "{message}");
    assert!(message.contains("indexed values (ids, names, models) to 1024 bytes"), "{message}");
    let spans = q1(&api, "spans", json!({"trace_id": hex::encode([62u8; 16])})).await;
    assert_eq!(spans.len(), 2, "the whole request is stored");
    let long_span = spans.iter().find(|s| s["name"] == "long").unwrap();
    let cut = |value: &Value, full: &str| {
        let text = value.as_str().unwrap();
        assert!(
            text.starts_with(&full[..1024]) && text.ends_with(&format!("…[truncated {} bytes]", full.len() - 1024)),
            "{}",
            &text[..40]
        );
    };
    cut(&long_span["session_id"], &session);
    cut(&long_span["request_model"], &model);
    cut(&long_span["service"], &service);

    let mut logs = nul_logs(&long(5));
    logs.resource_logs[0].resource = resource(vec![string("service.name", &service)]);
    assert_eq!(export(&server, Wire::Json, logs).await.unwrap().0, 0);
    let mut metrics = nul_metrics("m");
    let metric = &mut metrics.resource_metrics[0].scope_metrics[0].metrics[0];
    metric.name = long(6);
    if let Some(metric::Data::Gauge(gauge)) = &mut metric.data {
        gauge.data_points[0].attributes.push(string("gen_ai.request.model", &long(7)));
    }
    assert_eq!(export(&server, Wire::Grpc, metrics).await.unwrap().0, 0);
    assert_eq!(scalar(&server, "SELECT COUNT(*) FROM logs WHERE LENGTH(session_id) < 1100").await, 1);
    assert_eq!(scalar(&server, "SELECT COUNT(*) FROM metric_points WHERE LENGTH(name) < 1100").await, 1);
    // The session and the service are listed, with the cut names.
    assert_eq!(q1(&api, "sessions", json!({})).await.len(), 2);
    assert!(q1(&api, "health", json!({})).await.iter().all(|s| s["service"].as_str().unwrap().len() < 1100));
}

/// A row count (or any integer) read straight from the server's database.
pub async fn scalar(server: &TestServer, sql: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    match &server.config.database_url {
        DatabaseUrl::Sqlite(path) => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
        }
        DatabaseUrl::Postgres(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
        }
    }
}

/// 350,000 three-byte characters (1,050,000 bytes): a cut at 65,536 bytes falls inside one.
fn megabyte() -> String {
    "€".repeat(350_000)
}

async fn oversized_values_attributes_and_events_are_cut_and_counted(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let many = |n: usize| (0..n).map(|i| string(&format!("a{i:03}"), "v")).collect::<Vec<_>>();
    let mut big = span(60, 1, "big value", vec![string("session.id", "limits"), string("big", &megabyte())]);
    big.events = (0..200)
        .map(|i| Event {
            time_unix_nano: 1_700_000_000_000_000_000 + i,
            name: format!("e{i}"),
            attributes: many(200),
            ..Default::default()
        })
        .collect();
    let mut wide = span(60, 2, "wide", many(200));
    wide.attributes[0] = string("session.id", "limits");
    let request = traces(vec![big, wide], vec![string("service.name", "limits")]);
    let (rejected, message) = export(&server, Wire::Protobuf, request).await.unwrap();
    assert_eq!(rejected, 0);
    // 1 value cut; 72 attributes of the wide span, 72 events and 72 attributes of each of the
    // 128 events kept dropped.
    assert_eq!(
        message,
        format!(
            "truncated 1 value to 65536 bytes; dropped {} attributes (over 128 per item), 72 events (over 128 per span)",
            72 + 128 * 72
        )
    );

    let spans = q1(&api, "spans", json!({"session_id": "limits"})).await;
    let big = spans.iter().find(|s| s["name"] == "big value").unwrap();
    let value = big["attributes"]["big"].as_str().unwrap();
    let kept = "€".repeat(65_536 / 3);
    assert_eq!(value, format!("{kept}…[truncated {} bytes]", 1_050_000 - kept.len()));
    let wide = spans.iter().find(|s| s["name"] == "wide").unwrap();
    let keys = wide["attributes"].as_object().unwrap();
    assert_eq!(keys.len(), 128);
    assert!(keys.contains_key("a127") && !keys.contains_key("a128"), "the first 128 are kept");
    assert_eq!(scalar(&server, "SELECT COUNT(*) FROM span_events").await, 128);
    assert!(scalar(&server, "SELECT CAST(MAX(LENGTH(attributes)) AS BIGINT) FROM span_events").await < 128 * 12);

    // A log body is cut the same way.
    let logs = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs {
                log_records: vec![LogRecord {
                    time_unix_nano: 1_700_000_000_000_000_000,
                    body: text(&megabyte()),
                    attributes: vec![string("session.id", "limits")],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let (rejected, message) = export(&server, Wire::Json, logs).await.unwrap();
    assert_eq!((rejected, message.as_str()), (0, "truncated 1 value to 65536 bytes"));
    let logs = q1(&api, "logs", json!({"session_id": "limits"})).await;
    assert!(logs[0]["body"].as_str().unwrap().starts_with(&kept));
    assert!(logs[0]["body"].as_str().unwrap().ends_with("bytes]"));
}

async fn the_attribute_limit_is_configurable(backend: Backend) {
    let server = TestServer::start_with(backend, |config| config.telemetry.max_attribute_bytes = 10).await;
    let request = traces(vec![span(70, 1, "a long span name", vec![string("k", "0123456789abc")])], vec![]);
    let (rejected, message) = export(&server, Wire::Grpc, request).await.unwrap();
    assert_eq!((rejected, message.as_str()), (0, "truncated 2 values to 10 bytes"));
    let spans = q1(&server.api(None), "spans", json!({})).await;
    assert_eq!(spans[0]["name"], "a long spa…[truncated 6 bytes]");
    assert_eq!(spans[0]["attributes"]["k"], "0123456789…[truncated 3 bytes]");
}

async fn without_content_capture_messages_are_dropped_and_usage_kept(backend: Backend) {
    let messages = r#"[{"role":"user","parts":[{"type":"text","content":"my secret"}]}]"#;
    let attributes = || {
        vec![
            string("gen_ai.request.model", "gpt-4o-mini"),
            kv("gen_ai.usage.input_tokens", Some(AnyValue { value: Some(Any::IntValue(21)) })),
            string("gen_ai.input.messages", messages),
            string("llm.input_messages.0.message.content", "my secret"),
            string("session.id", "private"),
        ]
    };
    // With capture (the default) the message is kept; without it, nothing of it is.
    for (capture, found) in [(true, 1), (false, 0)] {
        let server = TestServer::start_with(backend, |config| config.telemetry.capture_content = capture).await;
        let request = traces(vec![span(71, 1, "chat", attributes())], vec![]);
        assert_eq!(export(&server, Wire::Protobuf, request).await, None);
        let api = server.api(None);
        let spans = q1(&api, "spans", json!({})).await;
        assert_eq!((spans[0]["input_tokens"].as_i64(), spans[0]["model"].as_str()), (Some(21), Some("gpt-4o-mini")));
        // The span's attributes keep no copy of its messages (they are stored once, by
        // content); without capture no text is stored at all.
        assert!(!spans[0]["attributes"].to_string().contains("my secret"), "{:?}", spans[0]["attributes"]);
        assert_eq!(server.sql("SELECT COUNT(*) FROM message_texts").await.unwrap()[0], found as i64);
        let transcript = q1(&api, "transcript", json!({"session_id": "private"})).await;
        let messages: Vec<_> = transcript.iter().filter(|r| r["kind"] == "message").collect();
        assert_eq!(messages.len(), found, "{transcript:#?}");
        if capture {
            assert_eq!((messages[0]["role"].as_str(), messages[0]["text"].as_str()), (Some("user"), Some("my secret")));
        }
    }
}

async fn q1_answers_stop_at_the_byte_budget(backend: Backend) {
    let server = TestServer::start(backend).await;
    let budget = roost_server::query::MAX_ANSWER_BYTES;
    // 2 requests of 80 log records with 60,000-byte bodies: 9.6 MB, over the 8 MiB budget.
    for round in 0..2u64 {
        let log_records = (0..80)
            .map(|i| LogRecord {
                time_unix_nano: 1_700_000_000_000_000_000 + round * 1_000 + i,
                body: text(&"x".repeat(60_000)),
                attributes: vec![string("session.id", "budget")],
                ..Default::default()
            })
            .collect();
        let logs = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs { log_records, ..Default::default() }],
                ..Default::default()
            }],
        };
        assert_eq!(export(&server, Wire::Protobuf, logs).await, None);
    }
    let resp = server
        .http
        .post(server.url("/api/local/query"))
        .json(&json!({"shape": "logs", "args": {"session_id": "budget", "limit": 1000}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = resp.bytes().await.unwrap();
    assert!(bytes.len() <= budget, "{} bytes over the {budget} budget", bytes.len());
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    let count = answer["count"].as_u64().unwrap();
    assert_eq!(answer["rows"].as_array().unwrap().len() as u64, count);
    assert_eq!(answer["truncated"], true);
    assert!((100..160).contains(&count), "{count} rows fit in {budget} bytes");

    // The same over gRPC; an answer under the budget says it is whole.
    let args = json!({"session_id": "budget", "limit": 1000});
    let grpc = QueryServiceClient::new(server.channel().await)
        .max_decoding_message_size(64 << 20)
        .query(QueryRequest { shape: "logs".into(), args: Some(map_to_struct(args.as_object().unwrap())) })
        .await
        .unwrap()
        .into_inner();
    assert!(grpc.truncated);
    assert_eq!(grpc.count as u64, count);
    let small = server
        .api(None)
        .post("/api/local/query", json!({"shape": "logs", "args": {"session_id": "budget", "limit": 5}}))
        .await
        .ok();
    assert_eq!((small["count"].as_i64(), small["truncated"].as_bool()), (Some(5), Some(false)));
}

/// While the ingest budget is taken (here by an export that said it is 2 MiB of protobuf,
/// 16 MiB decoded, and is still arriving), other exports wait a second for room, then get
/// 429 with `Retry-After` over HTTP and RESOURCE_EXHAUSTED with RetryInfo over gRPC; once
/// it is gone they are stored. The budget never reads the store: SQLite only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_ingest_budget_answers_retry_later() {
    use tokio::io::AsyncWriteExt as _;
    let server =
        TestServer::start_with(Backend::Sqlite, |c| c.gateway.max_ingest_inflight_bytes = 16 * 1024 * 1024).await;
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(
        format!(
            "POST /v1/traces HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: 2097152\r\n\r\n",
            server.addr
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    slow.write_all(&[0u8; 1024]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;

    let request = traces(vec![span(63, 1, "waits", vec![])], vec![string("service.name", "budget")]);
    let refused = post_otlp(&server, "/v1/traces", "application/x-protobuf", request.encode_to_vec()).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let status = TraceServiceClient::new(server.channel().await).export(request.clone()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    let details = tonic_types::StatusExt::get_details_retry_info(&status);
    assert_eq!(details.and_then(|r| r.retry_delay), Some(std::time::Duration::from_secs(1)));

    drop(slow);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(export(&server, Wire::Grpc, request.clone()).await, None);
    assert_eq!(q1(&server.api(None), "spans", json!({"service": "budget"})).await.len(), 1);
}
