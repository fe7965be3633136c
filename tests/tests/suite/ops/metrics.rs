//! `GET /metrics` on both backends: dashboard access, every family the issue lists, counts
//! that follow what the test did, bounded labels, and both formats as Prometheus' own
//! Python client parses them.

use std::{process::Stdio, time::Duration};

use prost::Message as _;
use roost_proto::v1::{
    GetMetricsRequest, MetricsFormat, SendMessageRequest, agent_service_client::AgentServiceClient,
    system_service_client::SystemServiceClient,
};
use roost_tests::{Backend, SseClient, TestServer, each_backend};
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;
use tonic::metadata::MetadataValue;

use crate::observe::otlp::traces_request;

each_backend!(metrics_follow_requests_turns_ingest_and_streams);

const TOKEN: &str = "dash-token";

/// A scrape as Prometheus' Python client parses it: family → {type, samples}.
async fn parse(format: &str, text: &str) -> Value {
    let mut child = tokio::process::Command::new(super::ops_tool("python"))
        .arg(super::ops_dir().join("parse_metrics.py"))
        .arg(format)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the parser");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    assert!(
        output.status.success(),
        "the {format} scrape does not parse: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The value of the sample `name` whose labels include `labels`.
fn sample(families: &Value, family: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    families[family]["samples"].as_array()?.iter().find_map(|s| {
        let matches = s[0] == name && labels.iter().all(|(k, v)| s[1][*k] == *v);
        matches.then(|| s[2].as_f64()).flatten()
    })
}

async fn scrape(server: &TestServer, accept: Option<&str>) -> reqwest::Response {
    let mut request = server.http.get(server.url("/metrics")).bearer_auth(TOKEN);
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let resp = request.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp
}

async fn metrics_follow_requests_turns_ingest_and_streams(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.access.api_tokens = vec![TOKEN.into()]).await;

    // Dashboard access: no token, no metrics.
    let refused = server.http.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(refused.json::<Value>().await.unwrap()["code"], "unauthenticated");

    // Two turns over REST, one refused over gRPC.
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "brief").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    for text in ["one", "two"] {
        api.message(&id, text).await.ok();
    }
    let mut agents = AgentServiceClient::new(server.channel().await);
    let refused = agents.send_message(SendMessageRequest { instance_id: id.clone(), text: "x".into() }).await;
    assert_eq!(refused.unwrap_err().code(), tonic::Code::Unauthenticated);
    api.get("/api/instances/ins_00000000000000000000000000").await.err(404, "not_found");
    server.http.get(server.url("/no/such/route")).bearer_auth(TOKEN).send().await.unwrap();

    // Three spans over OTLP/HTTP.
    let otlp = server
        .http
        .post(server.url("/v1/traces"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/x-protobuf")
        .body(traces_request(7, 3, "metrics-session").encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(otlp.status(), 200);

    // A log stream client.
    let _logs = SseClient::open(server.http.get(server.url("/api/logs")).bearer_auth(TOKEN)).await.unwrap();

    // Over gRPC too, with the dashboard token.
    let mut system = SystemServiceClient::new(server.channel().await);
    let mut request = tonic::Request::new(GetMetricsRequest { format: MetricsFormat::Openmetrics as i32 });
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {TOKEN}")).unwrap());
    let over_grpc = system.get_metrics(request).await.unwrap().into_inner();
    assert!(over_grpc.content_type.starts_with("application/openmetrics-text"), "{}", over_grpc.content_type);
    assert!(over_grpc.text.ends_with("# EOF\n"));

    // The Prometheus text format, for a client that asks for nothing in particular.
    let resp = scrape(&server, None).await;
    assert_eq!(resp.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    let text = resp.text().await.unwrap();
    assert!(!text.contains(&id) && !text.contains(&account.id), "ids must not be labels:\n{text}");
    let families = parse("prometheus", &text).await;

    let http = |route: &str, method: &str, status: &str| {
        sample(
            &families,
            "roost_http_requests",
            "roost_http_requests_total",
            &[("route", route), ("method", method), ("status", status)],
        )
    };
    assert_eq!(http("/api/instances/{instance_id}/messages", "POST", "200"), Some(2.0), "{text}");
    assert_eq!(http("/api/instances/{instance_id}", "GET", "404"), Some(1.0));
    assert_eq!(http("unmatched", "GET", "404"), Some(1.0));
    assert_eq!(http("/metrics", "GET", "401"), Some(1.0));
    assert_eq!(http("/v1/traces", "POST", "200"), Some(1.0));
    assert!(families["roost_http_request_duration_seconds"]["type"] == "histogram");
    let grpc = |service: &str, method: &str, code: &str| {
        sample(
            &families,
            "roost_grpc_requests",
            "roost_grpc_requests_total",
            &[("service", service), ("method", method), ("code", code)],
        )
    };
    assert_eq!(grpc("roost.v1.AgentService", "SendMessage", "UNAUTHENTICATED"), Some(1.0), "{text}");
    assert_eq!(grpc("roost.v1.SystemService", "GetMetrics", "OK"), Some(1.0), "{text}");

    let turns = sample(&families, "roost_turns", "roost_turns_total", &[("status", "completed"), ("source", "api")]);
    assert_eq!(turns, Some(2.0));
    let timed = sample(
        &families,
        "roost_turn_duration_seconds",
        "roost_turn_duration_seconds_count",
        &[("status", "completed"), ("source", "api")],
    );
    assert_eq!(timed, Some(2.0));

    // Two turns are two events; the three spans are spans.
    let ingested = |kind: &str| sample(&families, "roost_ingested", "roost_ingested_total", &[("kind", kind)]);
    assert_eq!(ingested("span"), Some(3.0));
    assert!(ingested("event").unwrap() >= 2.0);
    assert_eq!(
        sample(&families, "roost_ingest_rejected", "roost_ingest_rejected_total", &[("kind", "span")]),
        Some(0.0)
    );
    let gauge = |family: &str, labels: &[(&str, &str)]| sample(&families, family, family, labels);
    assert_eq!(gauge("roost_agents", &[("status", "running")]), Some(1.0));
    assert_eq!(gauge("roost_agents", &[("status", "paused")]), Some(0.0));
    assert_eq!(gauge("roost_turn_queue_depth", &[]), Some(0.0));
    assert_eq!(gauge("roost_turn_queue_depth_top", &[("rank", "1")]), Some(0.0));
    assert_eq!(gauge("roost_stream_clients", &[("stream", "logs")]), Some(1.0));
    assert_eq!(gauge("roost_stream_clients", &[("stream", "brain")]), Some(0.0));
    assert!(gauge("roost_store_size_bytes", &[]).unwrap() > 0.0);
    assert_eq!(gauge("roost_store_up", &[]), Some(1.0));
    assert_eq!(gauge("roost_update_installing", &[]), Some(0.0));
    assert_eq!(gauge("roost_build_info", &[("version", env!("CARGO_PKG_VERSION"))]), Some(1.0));
    assert!(gauge("process_resident_memory_bytes", &[]).unwrap() > 1e6);
    assert!(gauge("process_open_fds", &[]).unwrap() > 0.0);
    assert!(families["process_cpu_seconds"]["type"] == "counter");

    // OpenMetrics, for Prometheus (which asks for it first), through the strict parser.
    let resp = scrape(&server, Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")).await;
    assert_eq!(resp.headers()["content-type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let openmetrics = parse("openmetrics", &resp.text().await.unwrap()).await;
    let names = |f: &Value| {
        let mut names: Vec<String> = f.as_object().unwrap().keys().cloned().collect();
        names.sort();
        names
    };
    assert_eq!(names(&openmetrics), names(&families), "both formats carry the same families");
    let scrapes = sample(
        &openmetrics,
        "roost_http_requests",
        "roost_http_requests_total",
        &[("route", "/metrics"), ("method", "GET"), ("status", "200")],
    );
    assert_eq!(scrapes, Some(1.0), "the previous scrape is counted");
}
