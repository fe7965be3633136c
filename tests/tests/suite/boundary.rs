//! The API boundary holds what the core cannot: text with NUL (U+0000, which PostgreSQL
//! refuses) is a 400 naming the field on every surface, unreadable paths are 404 and
//! unreadable query parameters 400, undecodable gRPC requests are INVALID_ARGUMENT on every
//! service, and bodies in encodings roost cannot read are 415. Each was a 500 (or a plain
//! text answer) to the hostile probe of the "Trust" issue; nothing a refused request sent
//! may change anything.

use prost::Message as _;
use roost_proto::v1::{ConfigureRequest, ProvisionRequest};
use roost_tests::{Backend, Reply, TestServer, each_backend};
use serde_json::{Value, json};
use tonic::Code;

each_backend!(
    nul_in_api_text_is_400_naming_the_field_and_changes_nothing,
    unreadable_paths_are_404_and_query_parameters_400,
    undecodable_grpc_requests_are_invalid_argument_on_every_service,
    bodies_in_unsupported_encodings_are_415_everywhere
);

/// Asserts a 400 whose message names `field`.
#[track_caller]
fn names(reply: &Reply, field: &str) {
    reply.err(400, "invalid_argument");
    let message = reply.body["error"].as_str().unwrap();
    assert!(message.starts_with(&format!("{field} contains a NUL")), "{field}: {message}");
}

async fn nul_in_api_text_is_400_naming_the_field_and_changes_nothing(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "steady").await["id"].as_str().unwrap().to_owned();
    api.wait_status(&id, "running").await;
    let nul = "a\u{0}b";

    names(&api.post("/api/provision", json!({"runtime": "echo", "brief": nul})).await, "brief");
    names(&api.post("/api/provision", json!({"runtime": nul, "brief": "x"})).await, "runtime");
    for field in ["agent_brief", "PROVIDER_API_KEY", "MESSAGING_BOT_TOKEN", "model"] {
        names(&api.post(&format!("/api/instances/{id}/config"), json!({ field: nul })).await, field);
    }
    names(&api.message(&id, nul).await, "text");
    let cron = json!({"instance_id": id, "schedule": "@hourly", "message": nul});
    names(&api.post("/api/crons", cron).await, "message");
    names(&api.post("/api/alerts", json!({"kind": "cost_per_day", "threshold": 1.0, "name": nul})).await, "name");
    names(&api.post("/api/local/query", json!({"shape": "spans", "args": {"service": nul}})).await, "args.service");
    let run = api.post("/api/v1/runs", json!({"runtime": "custom"})).await.ok();
    let run_id = run["run_id"].as_str().unwrap();
    let events = json!({"events": [{"event_type": "ok"}, {"tool_name": nul}]});
    names(&api.post(&format!("/api/v1/runs/{run_id}/events"), events).await, "events[1].tool_name");
    let events = json!({"event": {"data": {"deep": [1, {"note": nul}]}}});
    names(&api.post(&format!("/api/v1/runs/{run_id}/events"), events).await, "event.data.deep[1].note");
    names(&api.post("/api/v1/runs", json!({"runtime": "x", "metadata": {nul: 1}})).await, "metadata.a\\u0000b");

    // gRPC refuses the same, naming the field.
    let mut agents = server.agents(&account.key).await;
    let refused = agents
        .provision(ProvisionRequest { runtime: "echo".into(), brief: nul.into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().starts_with("brief contains a NUL"), "{}", refused.message());
    let refused = agents
        .configure(ConfigureRequest { instance_id: id.clone(), model: Some(nul.into()), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);

    // Nothing changed.
    assert_eq!(api.get("/api/instances").await.ok().as_array().unwrap().len(), 1);
    let agent = api.get(&format!("/api/instances/{id}")).await.ok();
    assert_eq!((agent["brief"].as_str(), agent["status"].as_str()), (Some("steady"), Some("running")), "{agent}");
    assert_eq!(agent["config"]["provider_api_key_set"], false);
    assert_eq!(api.get("/api/account").await.ok()["balance_cents"], 10_000);
    assert_eq!(api.get("/api/crons").await.ok()["crons"], json!([]));
    assert_eq!(api.get("/api/alerts").await.ok()["rules"], json!([]));
    let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
    assert_eq!(activity["turns"], json!([]));
    // And it still works.
    assert_eq!(api.message(&id, "fine").await.ok()["reply"], "[steady] fine");
}

async fn unreadable_paths_are_404_and_query_parameters_400(backend: Backend) {
    let server = TestServer::start(backend).await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    for path in [
        "/api/instances/ins_a%00b",
        "/api/instances/ins_a%00b/activity",
        "/api/crons/%ff%fe",
        "/api/crons/%00",
        "/api/alerts/rules/%C0%80",
        "/api/v1/runs/run%00x",
        "/api/guard/%ff",
    ] {
        api.get(path).await.err(404, "not_found");
        api.post(path, json!({})).await.err(404, "not_found");
    }
    for path in ["/api/usage?days=%00", "/api/instances/x/activity?limit=%ff", "/api/local/sessions?limit=1%002"] {
        api.get(path).await.err(400, "invalid_argument");
    }
}

/// Every unary-or-streaming method of the served gRPC services, as `/package.Service/Method`.
fn grpc_methods() -> Vec<String> {
    let set = prost_types::FileDescriptorSet::decode(roost_proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut methods: Vec<String> = set
        .file
        .iter()
        .filter(|f| f.package() == "roost.v1")
        .flat_map(|f| {
            f.service
                .iter()
                .flat_map(move |s| s.method.iter().map(move |m| format!("/roost.v1.{}/{}", s.name(), m.name())))
        })
        .collect();
    methods.extend(
        [
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
            "/grpc.health.v1.Health/Check",
        ]
        .map(String::from),
    );
    methods
}

/// A gRPC call with `payload` as the message bytes; the grpc-status it ends with.
pub async fn raw_grpc_status(http2: &reqwest::Client, server: &TestServer, method: &str, payload: &[u8]) -> String {
    let mut frame = vec![0u8];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(payload);
    let resp = http2
        .post(server.url(method))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(frame)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{method}");
    let status = resp.headers().get("grpc-status").map(|v| v.to_str().unwrap().to_owned());
    let message = resp.headers().get("grpc-message").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("{method}: no trailers-only status"));
    format!("{status} {message}")
}

async fn undecodable_grpc_requests_are_invalid_argument_on_every_service(backend: Backend) {
    let server = TestServer::start(backend).await;
    let http2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let methods = grpc_methods();
    assert!(methods.len() > 40, "{methods:?}");
    // Field 1, length-delimited, with a length past the end: no message decodes from it.
    for method in &methods {
        let status = raw_grpc_status(&http2, &server, method, &[0x0a, 0xff, 0x01]).await;
        assert!(status.starts_with("3 "), "{method}: {status}");
    }
}

async fn bodies_in_unsupported_encodings_are_415_everywhere(backend: Backend) {
    let server = TestServer::start(backend).await;
    let rule = json!({"kind": "cost_per_day", "threshold": 5.0});
    let post = |encoding: &'static str, body: Vec<u8>| {
        server
            .http
            .post(server.url("/api/alerts"))
            .header("content-type", "application/json")
            .header("content-encoding", encoding)
            .body(body)
    };
    for encoding in ["br", "deflate", "zstd", "gzip, br"] {
        let reply = Reply::of(post(encoding, rule.to_string().into_bytes())).await;
        reply.err(415, "unsupported_media_type");
    }
    assert_eq!(server.api(None).get("/api/alerts").await.ok()["rules"], json!([]), "nothing was created");
    // gzip is read, as on the OTLP routes.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, rule.to_string().as_bytes()).unwrap();
    let created = Reply::of(post("gzip", gz.finish().unwrap())).await;
    assert_eq!(created.status, 201, "{}", created.body);

    // The MCP transport's own refusals are the JSON error body too.
    let account = server.account(0).await;
    let mcp = |content_type: &'static str| {
        server
            .http
            .post(server.url("/mcp"))
            .bearer_auth(&account.key)
            .header("content-type", content_type)
            .header("accept", "application/json, text/event-stream")
            .body("{}")
    };
    let reply = Reply::of(mcp("text/plain")).await;
    reply.err(415, "unsupported_media_type");
    let reply = Reply::of(server.http.get(server.url("/mcp")).bearer_auth(&account.key)).await;
    assert!((400..500).contains(&reply.status), "{reply:?}");
    assert!(reply.body.get("code").and_then(Value::as_str).is_some(), "JSON error body: {reply:?}");
}
