//! OTLP ingest: the OpenTelemetry SDK's own exporters over HTTP (protobuf, JSON, gzip),
//! OTLP-encoded requests over gRPC (with gzip), and every kind of bad body.

use flate2::{Compression as Level, write::GzEncoder};
use opentelemetry::{
    KeyValue,
    logs::{AnyValue as LogValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity},
    metrics::MeterProvider as _,
    trace::{Span as _, TraceContextExt as _, Tracer as _, TracerProvider as _},
};
use opentelemetry_otlp::{Compression, Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_proto::tonic::{
    collector::{
        logs::v1::{ExportLogsServiceRequest, logs_service_client::LogsServiceClient},
        metrics::v1::{ExportMetricsServiceRequest, metrics_service_client::MetricsServiceClient},
        trace::v1::{ExportTraceServiceRequest, trace_service_client::TraceServiceClient},
    },
    common::v1::{AnyValue, KeyValue as ProtoKeyValue, any_value},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    metrics::v1::{Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, metric, number_data_point},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span},
};
use opentelemetry_sdk::{
    Resource as SdkResource, logs::SdkLoggerProvider, metrics::SdkMeterProvider, trace::SdkTracerProvider,
};
use prost::Message;
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};
use std::io::Write as _;

use super::q1;

each_backend!(
    sdk_exporter_over_http_protobuf,
    sdk_exporter_over_http_json,
    sdk_exporter_over_http_protobuf_gzip,
    otlp_over_grpc_with_gzip,
    bad_bodies_get_their_4xx_and_store_nothing,
    invalid_spans_are_rejected_one_by_one_and_resends_are_stored_once
);

#[derive(Clone, Copy)]
enum Wire {
    Protobuf,
    Json,
    ProtobufGzip,
}

/// Sends a small agent's telemetry with the OpenTelemetry SDK: a trace (an agent span and
/// a GenAI chat span), a log record and two metrics, all in session `session`.
fn export_with_sdk(base: String, wire: Wire, session: String) {
    let protocol = if matches!(wire, Wire::Json) { Protocol::HttpJson } else { Protocol::HttpBinary };
    let gzip = matches!(wire, Wire::ProtobufGzip);
    let resource = SdkResource::builder()
        .with_service_name("agent-svc")
        .with_attribute(KeyValue::new("session.id", session.clone()))
        .build();

    let mut spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(format!("{base}/v1/traces"));
    if gzip {
        spans = spans.with_compression(Compression::Gzip);
    }
    let tracer_provider = SdkTracerProvider::builder()
        .with_batch_exporter(spans.build().unwrap())
        .with_resource(resource.clone())
        .build();
    let tracer = tracer_provider.tracer("roost-tests");
    tracer.in_span("agent run", |cx| {
        let mut chat = tracer.start_with_context("chat gpt-4o-mini", &cx);
        chat.set_attributes([
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.system", "openai"),
            KeyValue::new("gen_ai.request.model", "gpt-4o-mini"),
            KeyValue::new("gen_ai.response.model", "gpt-4o-mini"),
            KeyValue::new("gen_ai.usage.input_tokens", 1000_i64),
            KeyValue::new("gen_ai.usage.output_tokens", 500_i64),
        ]);
        chat.end();
        cx.span().set_attribute(KeyValue::new("gen_ai.agent.id", "agent-7"));
    });
    tracer_provider.force_flush().unwrap();
    tracer_provider.shutdown().unwrap();

    let mut logs = opentelemetry_otlp::LogExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(format!("{base}/v1/logs"));
    if gzip {
        logs = logs.with_compression(Compression::Gzip);
    }
    let logger_provider =
        SdkLoggerProvider::builder().with_batch_exporter(logs.build().unwrap()).with_resource(resource.clone()).build();
    let logger = logger_provider.logger("roost-tests");
    let mut record = logger.create_log_record();
    record.set_body(LogValue::from("tool call failed: timeout"));
    record.set_severity_number(Severity::Error);
    record.set_severity_text("ERROR");
    logger.emit(record);
    logger_provider.force_flush().unwrap();
    logger_provider.shutdown().unwrap();

    let mut metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(format!("{base}/v1/metrics"));
    if gzip {
        metrics = metrics.with_compression(Compression::Gzip);
    }
    let meter_provider =
        SdkMeterProvider::builder().with_periodic_exporter(metrics.build().unwrap()).with_resource(resource).build();
    let meter = meter_provider.meter("roost-tests");
    meter.u64_counter("agent.turns").build().add(3, &[KeyValue::new("outcome", "ok")]);
    meter.f64_histogram("agent.turn.duration").with_unit("s").build().record(1.5, &[]);
    meter_provider.force_flush().unwrap();
    meter_provider.shutdown().unwrap();
}

async fn sdk_round_trip(backend: Backend, wire: Wire) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let (base, session) = (server.url(""), "sess-sdk".to_owned());
    tokio::task::spawn_blocking(move || export_with_sdk(base, wire, session)).await.unwrap();

    let spans = q1(&api, "spans", json!({"session_id": "sess-sdk"})).await;
    assert_eq!(spans.len(), 2, "{spans:?}");
    let chat = spans.iter().find(|s| s["name"] == "chat gpt-4o-mini").unwrap();
    assert_eq!(chat["service"], "agent-svc");
    assert_eq!(chat["operation"], "chat");
    assert_eq!(chat["system"], "openai");
    assert_eq!(chat["request_model"], "gpt-4o-mini");
    assert_eq!(chat["response_model"], "gpt-4o-mini");
    assert_eq!((chat["input_tokens"].as_i64(), chat["output_tokens"].as_i64()), (Some(1000), Some(500)));
    // gpt-4o-mini: $0.15 / $0.60 per Mtok → 0.00015 + 0.0003.
    assert!((chat["cost_usd"].as_f64().unwrap() - 0.00045).abs() < 1e-12, "{chat:?}");
    assert_eq!(chat["attributes"]["gen_ai.usage.input_tokens"], 1000);
    assert_eq!(chat["trace_id"].as_str().unwrap().len(), 32);
    let root = spans.iter().find(|s| s["name"] == "agent run").unwrap();
    assert_eq!(chat["parent_span_id"], root["span_id"]);
    assert_eq!(root["agent_id"], "agent-7");

    let sessions = q1(&api, "sessions", json!({})).await;
    let session = sessions.iter().find(|s| s["session_id"] == "sess-sdk").unwrap();
    assert_eq!((session["spans"].as_i64(), session["logs"].as_i64()), (Some(2), Some(1)));
    assert_eq!(session["input_tokens"], 1000);
    assert_eq!(session["last_model"], "gpt-4o-mini");
    assert_eq!(session["agent_id"], "agent-7");

    let traces = q1(&api, "traces", json!({"session_id": "sess-sdk"})).await;
    assert_eq!(traces.len(), 1);
    assert_eq!((traces[0]["root_name"].as_str(), traces[0]["spans"].as_i64()), (Some("agent run"), Some(2)));

    let logs = q1(&api, "logs", json!({"session_id": "sess-sdk"})).await;
    assert_eq!(logs.len(), 1);
    assert_eq!(
        (logs[0]["body"].as_str(), logs[0]["severity_number"].as_i64()),
        (Some("tool call failed: timeout"), Some(17))
    );

    let counter = q1(&api, "metrics", json!({"name": "agent.turns"})).await;
    assert_eq!((counter[0]["kind"].as_str(), counter[0]["value"].as_f64()), (Some("sum"), Some(3.0)));
    assert_eq!(counter[0]["attributes"], json!({"outcome": "ok"}));
    let histogram = q1(&api, "metrics", json!({"name": "agent.turn.duration"})).await;
    assert_eq!(
        (histogram[0]["kind"].as_str(), histogram[0]["count"].as_i64(), histogram[0]["value"].as_f64()),
        (Some("histogram"), Some(1), Some(1.5))
    );
    assert_eq!(histogram[0]["unit"], "s");

    let models = q1(&api, "models", json!({})).await;
    let model = models.iter().find(|m| m["model"] == "gpt-4o-mini").unwrap();
    assert_eq!((model["calls"].as_i64(), model["input_tokens"].as_i64()), (Some(1), Some(1000)));
}

async fn sdk_exporter_over_http_protobuf(backend: Backend) {
    sdk_round_trip(backend, Wire::Protobuf).await;
}

async fn sdk_exporter_over_http_json(backend: Backend) {
    sdk_round_trip(backend, Wire::Json).await;
}

async fn sdk_exporter_over_http_protobuf_gzip(backend: Backend) {
    sdk_round_trip(backend, Wire::ProtobufGzip).await;
}

fn string(key: &str, value: &str) -> ProtoKeyValue {
    ProtoKeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
        ..Default::default()
    }
}

fn int(key: &str, value: i64) -> ProtoKeyValue {
    ProtoKeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::IntValue(value)) }),
        ..Default::default()
    }
}

fn resource(service: &str) -> Option<Resource> {
    Some(Resource { attributes: vec![string("service.name", service)], ..Default::default() })
}

/// A traces request with `spans` spans of one trace in session `session`.
pub fn traces_request(trace: u8, spans: usize, session: &str) -> ExportTraceServiceRequest {
    let spans = (0..spans)
        .map(|i| Span {
            trace_id: vec![trace; 16],
            span_id: (i as u64 + 1).to_be_bytes().to_vec(),
            parent_span_id: if i == 0 { Vec::new() } else { 1u64.to_be_bytes().to_vec() },
            name: if i == 0 { "root".into() } else { format!("step {i}") },
            start_time_unix_nano: 1_700_000_000_000_000_000 + i as u64 * 1_000_000,
            end_time_unix_nano: 1_700_000_000_000_000_000 + i as u64 * 1_000_000 + 500_000,
            attributes: vec![
                string("session.id", session),
                string("gen_ai.request.model", "claude-3-5-sonnet"),
                int("gen_ai.usage.input_tokens", 100),
                int("gen_ai.usage.output_tokens", 10),
            ],
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: resource("grpc-svc"),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

async fn otlp_over_grpc_with_gzip(backend: Backend) {
    use tonic::codec::CompressionEncoding::Gzip;
    let server = TestServer::start(backend).await;
    let channel = server.channel().await;
    let reply = TraceServiceClient::new(channel.clone())
        .send_compressed(Gzip)
        .export(traces_request(7, 3, "sess-grpc"))
        .await
        .unwrap()
        .into_inner();
    assert!(reply.partial_success.is_none());

    let logs = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource("grpc-svc"),
            scope_logs: vec![ScopeLogs {
                log_records: vec![LogRecord {
                    time_unix_nano: 1_700_000_000_000_000_000,
                    severity_number: 9,
                    severity_text: "INFO".into(),
                    body: Some(AnyValue { value: Some(any_value::Value::StringValue("hello over grpc".into())) }),
                    attributes: vec![string("session.id", "sess-grpc")],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    LogsServiceClient::new(channel.clone()).send_compressed(Gzip).export(logs).await.unwrap();
    let metrics = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: resource("grpc-svc"),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "queue.depth".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![NumberDataPoint {
                            time_unix_nano: 1_700_000_000_000_000_000,
                            value: Some(number_data_point::Value::AsInt(4)),
                            ..Default::default()
                        }],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    MetricsServiceClient::new(channel).export(metrics).await.unwrap();

    let api = server.api(None);
    let spans = q1(&api, "spans", json!({"trace_id": hex(&[7; 16])})).await;
    assert_eq!(spans.len(), 3);
    assert!(spans.iter().all(|s| s["service"] == "grpc-svc" && s["session_id"] == "sess-grpc"));
    let transcript = q1(&api, "transcript", json!({"session_id": "sess-grpc"})).await;
    let sources: Vec<&str> = transcript.iter().map(|r| r["source"].as_str().unwrap()).collect();
    assert_eq!(sources, ["log", "span", "span", "span"], "time order: the log record came first");
    assert_eq!(q1(&api, "metrics", json!({"name": "queue.depth"})).await[0]["value"], 4.0);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Level::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

async fn bad_bodies_get_their_4xx_and_store_nothing(backend: Backend) {
    let server = TestServer::start_with(backend, |config| config.gateway.max_otlp_body_bytes = 64 * 1024).await;
    let url = server.url("/v1/traces");
    let valid = traces_request(1, 2, "s").encode_to_vec();
    let send = |content_type: &'static str, encoding: Option<&'static str>, body: Vec<u8>| {
        let mut req = server.http.post(&url).header("content-type", content_type).body(body);
        if let Some(encoding) = encoding {
            req = req.header("content-encoding", encoding);
        }
        req.send()
    };

    // Truncated protobuf: 400, answered with a protobuf google.rpc.Status.
    let resp = send("application/x-protobuf", None, valid[..valid.len() - 7].to_vec()).await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.headers()["content-type"], "application/x-protobuf");
    assert!(!resp.bytes().await.unwrap().is_empty());
    // Broken JSON: 400 with roost's JSON error.
    let resp = send("application/json", None, b"{\"resourceSpans\": [".to_vec()).await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(resp.json::<Value>().await.unwrap()["code"], "invalid_argument");
    // Another content type, or none: 415.
    for content_type in ["text/plain", "application/xml"] {
        let resp = send(content_type, None, valid.clone()).await.unwrap();
        assert_eq!(resp.status(), 415);
        assert_eq!(resp.json::<Value>().await.unwrap()["code"], "unsupported_media_type");
    }
    assert_eq!(server.http.post(&url).body(valid.clone()).send().await.unwrap().status(), 415);
    // An encoding roost does not speak: 415.
    assert_eq!(send("application/x-protobuf", Some("br"), valid.clone()).await.unwrap().status(), 415);
    // Over the limit: 413, plain or as a small gzip that expands past it.
    assert_eq!(send("application/x-protobuf", None, vec![0x0a; 100 * 1024]).await.unwrap().status(), 413);
    let bomb = gzip(&vec![0u8; 10 * 1024 * 1024]);
    assert!(bomb.len() < 64 * 1024);
    assert_eq!(send("application/x-protobuf", Some("gzip"), bomb).await.unwrap().status(), 413);
    // Bytes that are not gzip, labelled gzip: 400.
    assert_eq!(send("application/x-protobuf", Some("gzip"), valid.clone()).await.unwrap().status(), 400);

    let api = server.api(None);
    assert!(q1(&api, "spans", json!({})).await.is_empty(), "nothing was stored");
    // The same request, well-formed, is accepted (protobuf answer, nothing rejected).
    let resp = send("application/x-protobuf", Some("gzip"), gzip(&valid)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-protobuf");
    assert_eq!(q1(&api, "spans", json!({})).await.len(), 2);
}

async fn invalid_spans_are_rejected_one_by_one_and_resends_are_stored_once(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut request = traces_request(3, 4, "s");
    let spans = &mut request.resource_spans[0].scope_spans[0].spans;
    spans[1].trace_id = vec![1, 2, 3];
    spans[2].span_id = vec![0; 8];
    let json_body = serde_json::to_vec(&request).unwrap();
    let resp = server
        .http
        .post(server.url("/v1/traces"))
        .header("content-type", "application/json")
        .body(json_body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["partialSuccess"]["rejectedSpans"], 2, "{answer}");
    assert!(answer["partialSuccess"]["errorMessage"].as_str().unwrap().contains("trace_id"));

    // An exporter retry sends it again: stored once.
    let resp = server
        .http
        .post(server.url("/v1/traces"))
        .header("content-type", "application/json")
        .body(json_body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let api = server.api(None);
    assert_eq!(q1(&api, "spans", json!({})).await.len(), 2);
    let traces = q1(&api, "traces", json!({})).await;
    assert_eq!(traces[0]["spans"], 2, "summaries count stored spans once");

    // A request holding both stored spans and new ones (a retry merged with new work):
    // only the new ones are added and counted.
    let resp = server
        .http
        .post(server.url("/v1/traces"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&traces_request(3, 6, "s")).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(q1(&api, "spans", json!({})).await.len(), 6);
    let traces = q1(&api, "traces", json!({})).await;
    assert_eq!((traces[0]["spans"].as_i64(), traces[0]["input_tokens"].as_i64()), (Some(6), Some(600)), "{traces:?}");

    // A clean request answers `{}`.
    let resp = server
        .http
        .post(server.url("/v1/traces"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&traces_request(4, 1, "s")).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({}));
}
