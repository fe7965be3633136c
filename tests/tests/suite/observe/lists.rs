//! What a Langfuse or Phoenix user looks for after traces: filters by user, tag and
//! metadata on sessions and traces; latency percentiles per model, service and agent; and
//! an export of any list, streamed (every row of the filter, in bounded memory), over
//! REST, gRPC and the dashboard's links.

use futures::StreamExt as _;
use opentelemetry_proto::tonic::{
    collector::{
        logs::v1::{ExportLogsServiceRequest, logs_service_client::LogsServiceClient},
        trace::v1::{ExportTraceServiceRequest, trace_service_client::TraceServiceClient},
    },
    common::v1::{AnyValue, ArrayValue, KeyValue, any_value::Value as Any},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span},
};
use roost_proto::{
    json::value::map_to_struct,
    v1::{ExportRequest, QueryRequest, query_service_client::QueryServiceClient},
};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::q1;

each_backend!(
    users_tags_and_metadata_filter_sessions_and_traces,
    latency_percentiles_per_model_service_and_agent,
    exports_stream_every_row_over_rest_grpc_and_pages,
    an_export_of_100k_rows_streams_in_bounded_memory
);

fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Any::StringValue(value.into()))
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// A model call span of trace `trace` (its root), `ms` long, starting `start`.
fn call(trace: u8, span: u64, start: u64, ms: u64, mut attributes: Vec<KeyValue>) -> Span {
    attributes.push(text("gen_ai.request.model", "m-default"));
    Span {
        trace_id: vec![trace; 16],
        span_id: span.to_be_bytes().to_vec(),
        name: format!("chat {trace}/{span}"),
        start_time_unix_nano: start,
        end_time_unix_nano: start + ms * 1_000_000,
        attributes,
        ..Default::default()
    }
}

fn request(service: &str, resource: Vec<KeyValue>, spans: Vec<Span>) -> ExportTraceServiceRequest {
    let mut attributes = vec![text("service.name", service)];
    attributes.extend(resource);
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes, ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
}

async fn export(server: &TestServer, request: ExportTraceServiceRequest) {
    let reply = TraceServiceClient::new(server.channel().await).export(request).await.unwrap().into_inner();
    assert!(reply.partial_success.is_none(), "{reply:?}");
}

fn ids(rows: &[serde_json::Map<String, Value>], key: &str) -> Vec<String> {
    let mut ids: Vec<String> = rows.iter().map(|r| r[key].as_str().unwrap().to_owned()).collect();
    ids.sort();
    ids
}

async fn users_tags_and_metadata_filter_sessions_and_traces(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let t = now_ns() - 3_600_000_000_000;
    let list = |tags: &[&str]| {
        Any::ArrayValue(ArrayValue {
            values: tags.iter().map(|t| AnyValue { value: Some(Any::StringValue((*t).into())) }).collect(),
        })
    };
    // OpenInference: user.id, tag.tags as a list, metadata as JSON text.
    let a = call(
        0xa1,
        1,
        t,
        10,
        vec![
            text("session.id", "s-a"),
            text("user.id", "alice"),
            kv("tag.tags", list(&["beta", "vip"])),
            text("metadata", r#"{"plan": "pro", "seats": 3}"#),
        ],
    );
    // Langfuse: its own user, tags as JSON text and metadata keys, on the second span of a
    // trace whose first names the session.
    let b1 = call(0xb1, 1, t + 1, 10, vec![text("session.id", "s-b")]);
    let mut b2 = call(
        0xb1,
        2,
        t + 2,
        10,
        vec![
            text("langfuse.user.id", "bob"),
            text("langfuse.trace.tags", r#"["eu"]"#),
            text("langfuse.trace.metadata.plan", "free"),
        ],
    );
    b2.parent_span_id = 1u64.to_be_bytes().to_vec();
    // No session (a sessionless conversation); the user is on the resource.
    let c = call(0xc1, 1, t + 3, 10, vec![]);
    export(&server, request("labels-svc", vec![], vec![a, b1, b2])).await;
    export(&server, request("labels-svc", vec![text("enduser.id", "carol")], vec![c])).await;
    // A coding agent's log events: a session of log records only, with its user.
    let logs = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource { attributes: vec![text("service.name", "claude-code")], ..Default::default() }),
            scope_logs: vec![ScopeLogs {
                log_records: vec![LogRecord {
                    time_unix_nano: t + 4,
                    body: Some(AnyValue { value: Some(Any::StringValue("api_request".into())) }),
                    attributes: vec![text("session.id", "s-d"), text("user.id", "dave"), text("tag.tags", "cli")],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    LogsServiceClient::new(server.channel().await).export(logs).await.unwrap();

    let sessions = async |args: Value| ids(&q1(&api, "sessions", args).await, "session_id");
    assert_eq!(sessions(json!({"user": "alice"})).await, ["s-a"]);
    assert_eq!(sessions(json!({"user": "bob"})).await, ["s-b"], "a label on any span of the session's traces");
    assert_eq!(sessions(json!({"user": "dave"})).await, ["s-d"], "and on its log records");
    assert_eq!(sessions(json!({"tag": "vip"})).await, ["s-a"]);
    assert_eq!(sessions(json!({"tag": "eu"})).await, ["s-b"]);
    assert_eq!(sessions(json!({"tag": "cli"})).await, ["s-d"]);
    assert_eq!(sessions(json!({"metadata": "plan"})).await, ["s-a", "s-b"]);
    assert_eq!(sessions(json!({"metadata": "plan=pro"})).await, ["s-a"]);
    assert_eq!(sessions(json!({"metadata": "seats=3"})).await, ["s-a"]);
    assert_eq!(sessions(json!({"user": "ali"})).await, Vec::<String>::new(), "matched whole, not as a part");
    assert_eq!(sessions(json!({"user": "alice", "tag": "eu"})).await, Vec::<String>::new(), "filters combine");
    assert_eq!(sessions(json!({"user": "alice', 'x"})).await, Vec::<String>::new(), "a value is bound, never SQL");

    let traces = async |args: Value| ids(&q1(&api, "traces", args).await, "trace_id");
    let hex = |b: u8| format!("{b:02x}").repeat(16);
    assert_eq!(traces(json!({"user": "carol"})).await, [hex(0xc1)], "the resource's user");
    assert_eq!(traces(json!({"user": "carol", "sessionless": true})).await, [hex(0xc1)]);
    assert_eq!(traces(json!({"metadata": "plan=free"})).await, [hex(0xb1)]);
    assert_eq!(traces(json!({"tag": "beta"})).await, [hex(0xa1)]);

    // The dashboard's filters are the same arguments.
    let page = server.http.get(server.url("/dashboard/sessions?user=bob")).send().await.unwrap();
    let html = page.text().await.unwrap();
    assert!(html.contains("s-b") && !html.contains("s-a\""), "only bob's session is listed");
    assert!(html.contains(r#"name="user" value="bob""#), "the filter keeps its value");
    let page = server.http.get(server.url("/dashboard/traces?meta=plan%3Dfree")).send().await.unwrap();
    let html = page.text().await.unwrap();
    assert!(html.contains(&hex(0xb1)) && !html.contains(&hex(0xa1)), "only the trace with plan=free");
}

async fn latency_percentiles_per_model_service_and_agent(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let t = now_ns() - 3_600_000_000_000;
    // 100 calls of m-lat lasting 1..=100 ms; those of 1..=10 ms report a time to first token
    // as long as the call, in the GenAI convention's seconds.
    let spans = (1..=100u64)
        .map(|ms| {
            let mut attributes = vec![text("gen_ai.response.model", "m-lat"), text("gen_ai.agent.id", "agent-lat")];
            if ms <= 10 {
                attributes.push(kv("gen_ai.server.time_to_first_token", Any::DoubleValue(ms as f64 / 1000.0)));
            }
            call(0x10, ms, t + ms * 1_000, ms, attributes)
        })
        .collect();
    export(&server, request("svc-lat", vec![], spans)).await;
    // 5 calls of m-slow, 2 s each; one reports its first chunk the Vercel AI SDK's way.
    let spans = (1..=5u64)
        .map(|i| {
            let mut attributes = vec![text("gen_ai.response.model", "m-slow")];
            if i == 1 {
                attributes.push(kv("ai.response.msToFirstChunk", Any::IntValue(700)));
            }
            call(0x20, i, t, 2000, attributes)
        })
        .collect();
    export(&server, request("svc-slow", vec![], spans)).await;

    let near = |row: &serde_json::Map<String, Value>, key: &str, exact: f64| {
        let shown = row[key].as_f64().unwrap_or_else(|| panic!("{key} in {row:?}"));
        assert!((shown / exact - 1.0).abs() <= 0.022, "{key}: {shown}, the exact value is {exact}");
    };
    let rows = q1(&api, "latency", json!({})).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (lat, slow) = (&rows[0], &rows[1]);
    assert_eq!((lat["model"].as_str(), lat["calls"].as_i64()), (Some("m-lat"), Some(100)), "busiest first");
    assert_eq!((lat["service"].clone(), lat["agent_id"].clone()), (Value::Null, Value::Null));
    // Nearest rank over 1..=100 ms: p50 is 50 ms, p95 95, p99 99; the mean is exact.
    near(lat, "p50_ms", 50.0);
    near(lat, "p95_ms", 95.0);
    near(lat, "p99_ms", 99.0);
    assert_eq!(lat["mean_ms"].as_f64(), Some(50.5));
    assert_eq!(lat["ttft_calls"].as_i64(), Some(10));
    near(lat, "ttft_p50_ms", 5.0);
    near(lat, "ttft_p99_ms", 10.0);
    assert_eq!(lat["ttft_mean_ms"].as_f64(), Some(5.5));
    assert_eq!((slow["model"].as_str(), slow["calls"].as_i64()), (Some("m-slow"), Some(5)));
    near(slow, "p99_ms", 2000.0);
    near(slow, "ttft_p50_ms", 700.0);

    let by = |group: &str| json!({ "group": group });
    let services = q1(&api, "latency", by("service")).await;
    assert_eq!(ids(&services, "service"), ["svc-lat", "svc-slow"]);
    assert!(services.iter().all(|r| r["model"].is_null()));
    let agents = q1(&api, "latency", by("agent")).await;
    let agent = agents.iter().find(|r| r["agent_id"] == "agent-lat").expect("the agent's row");
    near(agent, "p95_ms", 95.0);
    let narrowed = q1(&api, "latency", json!({"group": "service", "model": "m-slow"})).await;
    assert_eq!(ids(&narrowed, "service"), ["svc-slow"]);
    api.post("/api/local/query", json!({"shape": "latency", "args": {"group": "day"}}))
        .await
        .err(400, "invalid_argument");

    // The usage page shows them.
    let html = server.http.get(server.url("/dashboard/usage?days=7")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(r#"id="latency-h""#) && html.contains("m-lat"), "the latency table");
    let html = server
        .http
        .get(server.url("/dashboard/usage?days=7&latency=service"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("svc-slow"), "per service");
}

/// Sessions s-0 … s-{n-1}, each one span with a text attribute of `pad` bytes.
async fn sessions(server: &TestServer, trace: u8, n: u64, pad: usize) {
    let t = now_ns() - 7_200_000_000_000;
    let padding = "x".repeat(pad);
    for chunk in (0..n).collect::<Vec<_>>().chunks(2000) {
        let spans = chunk
            .iter()
            .map(|i| {
                let mut span = call(trace, i + 1, t + i * 1000, 1, vec![text("session.id", &format!("s-{i}"))]);
                span.trace_id[..8].copy_from_slice(&i.to_be_bytes());
                span.attributes.push(text("pad", &padding));
                span
            })
            .collect();
        export(server, request("export-svc", vec![], spans)).await;
    }
}

async fn exports_stream_every_row_over_rest_grpc_and_pages(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    sessions(&server, 0x33, 120, 0).await;
    // A formula and a quote in a cell the tenant controls.
    let mut span = call(0x44, 1, now_ns() - 1_000_000_000, 1, vec![text("session.id", "=cmd|' /C calc'!A0")]);
    span.name = "say \"hi\", then\nleave".into();
    export(&server, request("export-svc", vec![], vec![span])).await;

    // REST: every row, past the shape's 50-row default and without paging.
    let post = |body: Value| server.http.post(server.url("/api/local/export")).json(&body).send();
    let reply = post(json!({"shape": "sessions", "format": "csv", "args": {"limit": 3}})).await.unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.headers()["content-type"], "text/csv; charset=utf-8");
    assert_eq!(reply.headers()["content-disposition"], "attachment; filename=\"sessions.csv\"");
    let csv = reply.text().await.unwrap();
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    let columns: Vec<String> =
        roost_server::query::registry::visible(roost_server::query::registry::shape("sessions").unwrap())
            .map(|c| c.name.to_owned())
            .collect();
    assert_eq!(lines[0], columns.join(","), "the header is the shape's fields");
    assert_eq!(lines.len(), 1 + 121, "every session, the limit ignored");
    assert!(csv.contains("\r\n'=cmd|' /C calc'!A0,"), "a formula is written as text: {csv}");

    // JSON Lines are the q/1 rows, in the same order.
    let jsonl = post(json!({"shape": "traces", "format": "jsonl", "args": {"session_contains": "s-1"}}))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let exported: Vec<Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let rows = q1(&api, "traces", json!({"session_contains": "s-1", "limit": 500})).await;
    assert_eq!(exported.len(), rows.len());
    assert_eq!(exported.len(), 31, "s-1, s-10…s-19, s-100…s-119");
    // Equal as JSON: numbers as numbers (a gRPC Struct, which q/1 answers travel in, has
    // only doubles, and REST writes a whole one without its `.0`).
    let numbers = |value: &Value| -> Value {
        let object = value.as_object().unwrap();
        object.iter().map(|(k, v)| (k.clone(), v.as_f64().map_or(v.clone(), Value::from))).collect()
    };
    for (line, row) in exported.iter().zip(&rows) {
        assert_eq!(numbers(line), numbers(&Value::Object(row.clone())));
    }
    let quoted = post(json!({"shape": "spans", "format": "csv", "args": {"session_id": "=cmd|' /C calc'!A0"}}))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(quoted.contains("\"say \"\"hi\"\", then\nleave\""), "quotes doubled, the line break kept: {quoted}");

    // gRPC: the same bytes, in parts.
    let mut client = QueryServiceClient::new(server.channel().await);
    let args = map_to_struct(json!({"session_contains": "s-1"}).as_object().unwrap());
    let request = ExportRequest { shape: "traces".into(), args: Some(args), format: "jsonl".into() };
    let mut parts = client.export(request).await.unwrap().into_inner();
    let mut bytes = Vec::new();
    while let Some(part) = parts.next().await {
        bytes.extend(part.unwrap().data);
    }
    assert_eq!(String::from_utf8(bytes).unwrap(), jsonl);
    let status =
        client.export(ExportRequest { shape: "span".into(), args: None, format: "csv".into() }).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    // A query over gRPC is unchanged beside it.
    let _ = client.query(QueryRequest { shape: "sessions".into(), args: None }).await.unwrap();

    // Bad requests are 400 and name the problem.
    for (body, says) in [
        (json!({"shape": "sessions", "format": "xlsx"}), "allowed: csv, jsonl"),
        (json!({"shape": "transcript", "format": "csv", "args": {"session_id": "s-1"}}), "not a list"),
        (json!({"shape": "nope", "format": "csv"}), "unknown shape"),
        (json!({"shape": "sessions", "format": "csv", "args": {"limit": "x"}}), "limit"),
    ] {
        let reply = post(body.clone()).await.unwrap();
        assert_eq!(reply.status(), 400, "{body}");
        let error: Value = reply.json().await.unwrap();
        assert_eq!(error["code"], "invalid_argument");
        assert!(error["error"].as_str().unwrap().contains(says), "{body}: {error}");
    }

    // The pages link to an export of their filters.
    let html =
        server.http.get(server.url("/dashboard/sessions?search=s-11")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(r#"href="/dashboard/sessions.csv?search=s-11""#), "the export link keeps the filters");
    let page_csv = server.http.get(server.url("/dashboard/sessions.csv?search=s-11")).send().await.unwrap();
    assert_eq!(page_csv.headers()["content-disposition"], "attachment; filename=\"sessions.csv\"");
    let page_csv = page_csv.text().await.unwrap();
    assert_eq!(page_csv.lines().count(), 1 + 11, "s-11 and s-110…s-119: {page_csv}");
    let traces = server.http.get(server.url("/dashboard/traces.jsonl?window=24h")).send().await.unwrap();
    assert_eq!(traces.headers()["content-type"], "application/x-ndjson");
    assert_eq!(traces.text().await.unwrap().lines().count(), 121);
    let bad = server.http.get(server.url("/dashboard/traces.csv?from=yesterday")).send().await.unwrap();
    assert_eq!(bad.status(), 400);
}

/// Resident memory of this process (the server runs in it), in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

async fn an_export_of_100k_rows_streams_in_bounded_memory(backend: Backend) {
    let server = TestServer::start(backend).await;
    const ROWS: u64 = 100_000;
    sessions(&server, 0x55, ROWS, 500).await;
    let post =
        || server.http.post(server.url("/api/local/export")).json(&json!({"shape": "spans", "format": "csv"})).send();

    // Two exports run at once; a third waits for one of them to end.
    let (first, second) = (post().await.unwrap(), post().await.unwrap());
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    let third = post().await.unwrap();
    assert_eq!(third.status(), 429, "two exports hold their readers");
    assert_eq!(third.json::<Value>().await.unwrap()["code"], "rate_limited");
    drop((first, second));
    let mut freed = false;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let reply = post().await.unwrap();
        if reply.status() == 200 {
            freed = true;
            break;
        }
    }
    assert!(freed, "a client hanging up ends its export and frees its place");

    // The file is far larger than what the process grows by while sending it.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let before = rss();
    let mut body = post().await.unwrap().bytes_stream();
    let (mut bytes, mut lines, mut peak) = (0u64, 0u64, before);
    while let Some(part) = body.next().await {
        let part = part.unwrap();
        bytes += part.len() as u64;
        lines += part.iter().filter(|b| **b == b'\n').count() as u64;
        peak = peak.max(rss());
    }
    assert_eq!(lines, ROWS + 1, "a header and every span");
    assert!(bytes > 50 << 20, "{bytes} bytes");
    let grew = peak.saturating_sub(before);
    eprintln!("exported {} MiB of CSV; the process grew by {} MiB at most", bytes >> 20, grew >> 20);
    assert!(grew < 24 << 20, "sending {} MiB grew the process by {} MiB", bytes >> 20, grew >> 20);
}
