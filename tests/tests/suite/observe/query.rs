//! The q/1 contract: the registry listing, argument checking and clamping, the same
//! answers over REST and gRPC, and the daily and health shapes.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use roost_proto::{
    json::value::{map_to_struct, struct_to_map},
    v1::{ListShapesRequest, QueryRequest, query_service_client::QueryServiceClient},
};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::{otlp::traces_request, q1};

each_backend!(
    the_listing_is_the_registry_over_rest_and_grpc,
    bad_shapes_arguments_and_types_are_400,
    limits_are_clamped_not_refused,
    grpc_and_rest_return_the_same_rows,
    daily_models_aggregates_and_health
);

async fn the_listing_is_the_registry_over_rest_and_grpc(backend: Backend) {
    let server = TestServer::start(backend).await;
    let rest = server.api(None).post("/api/local/query", json!({"shape": "?"})).await.ok();
    let registry = serde_json::to_value(roost_server::query::shape_infos()).unwrap();
    assert_eq!(rest["contract"], "q/1");
    assert_eq!(rest["shapes"], registry, "REST lists exactly the registry");
    let names: Vec<&str> = rest["allowed_shapes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    for shape in [
        "sessions",
        "events",
        "runs",
        "spans",
        "traces",
        "logs",
        "metrics",
        "models",
        "aggregates",
        "health",
        "transcript",
    ] {
        assert!(names.contains(&shape), "{shape} missing from {names:?}");
    }
    let limit = rest["shapes"][0]["args"].as_array().unwrap().iter().find(|a| a["name"] == "limit").unwrap();
    assert_eq!(
        (limit["type"].as_str(), limit["default"].as_i64(), limit["max"].as_i64()),
        (Some("integer"), Some(50), Some(500))
    );

    let grpc =
        QueryServiceClient::new(server.channel().await).list_shapes(ListShapesRequest {}).await.unwrap().into_inner();
    assert_eq!(serde_json::to_value(&grpc.shapes).unwrap(), registry, "gRPC lists exactly the registry");
    assert_eq!(grpc.allowed_shapes, names);
}

async fn bad_shapes_arguments_and_types_are_400(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let cases = [
        (json!({"shape": "everything"}), "unknown shape"),
        (json!({"shape": "spans", "args": {"colour": "red"}}), "unknown argument \"colour\""),
        (json!({"shape": "spans", "args": {"limit": "ten"}}), "argument \"limit\" must be a whole number"),
        (json!({"shape": "spans", "args": {"errors_only": 1}}), "must be a boolean"),
        (json!({"shape": "spans", "args": {"since": "last tuesday"}}), "must be a time"),
        (json!({"shape": "transcript"}), "needs one of the arguments \"session_id\" or \"trace_id\""),
        (json!({"shape": "spans", "args": [1]}), "invalid JSON body"),
        (json!({"shape": "spans", "extra": 1}), "unknown field"),
    ];
    for (body, why) in cases {
        let reply = api.post("/api/local/query", body.clone()).await;
        reply.err(400, "invalid_argument");
        assert!(reply.body["error"].as_str().unwrap().contains(why), "{body}: {}", reply.body);
    }
    api.get("/api/local/sessions?limit=many").await.err(400, "invalid_argument");
}

async fn limits_are_clamped_not_refused(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    for i in 0..6u8 {
        TraceServiceClient::new(server.channel().await)
            .export(traces_request(10 + i, 1, &format!("s{i}")))
            .await
            .unwrap();
    }
    assert_eq!(q1(&api, "sessions", json!({"limit": 1_000_000})).await.len(), 6);
    assert_eq!(q1(&api, "sessions", json!({"limit": 0})).await.len(), 1, "clamped up to 1");
    assert_eq!(q1(&api, "sessions", json!({"limit": 3})).await.len(), 3);
    let sessions = api.get("/api/local/sessions?limit=2").await.ok();
    assert_eq!((sessions["shape"].as_str(), sessions["count"].as_i64()), (Some("sessions"), Some(2)));
    assert!(sessions["elapsed_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(api.get("/api/local/sessions").await.ok()["count"], 6);
}

async fn grpc_and_rest_return_the_same_rows(backend: Backend) {
    let server = TestServer::start(backend).await;
    TraceServiceClient::new(server.channel().await).export(traces_request(20, 3, "same")).await.unwrap();
    let args = json!({"session_id": "same", "limit": 10});
    let rest = q1(&server.api(None), "spans", args.clone()).await;
    let grpc = QueryServiceClient::new(server.channel().await)
        .query(QueryRequest { shape: "spans".into(), args: Some(map_to_struct(args.as_object().unwrap())) })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(grpc.contract, "q/1");
    let grpc_rows: Vec<Value> = grpc.rows.iter().map(|r| Value::Object(struct_to_map(r))).collect();
    let rest_rows: Vec<Value> = rest.into_iter().map(Value::Object).collect();
    assert_eq!(grpc_rows, rest_rows);
}

async fn daily_models_aggregates_and_health(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    // Spans from 2023-11-14 (the fixture's time) and from today.
    TraceServiceClient::new(server.channel().await).export(traces_request(30, 2, "old")).await.unwrap();
    let mut fresh = traces_request(31, 1, "new");
    let now_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let span = &mut fresh.resource_spans[0].scope_spans[0].spans[0];
    (span.start_time_unix_nano, span.end_time_unix_nano) = (now_ns, now_ns + 1_000);
    span.status = Some(opentelemetry_proto::tonic::trace::v1::Status { code: 2, message: "boom".into() });
    TraceServiceClient::new(server.channel().await).export(fresh).await.unwrap();

    let models = q1(&api, "models", json!({"days": 7})).await;
    assert_eq!(models.len(), 1, "only today is within 7 days: {models:?}");
    assert_eq!(
        (models[0]["model"].as_str(), models[0]["calls"].as_i64(), models[0]["input_tokens"].as_i64()),
        (Some("claude-3-5-sonnet"), Some(1), Some(100))
    );
    // claude-3-5-sonnet: $3 / $15 per Mtok → 100 in + 10 out = 0.0003 + 0.00015.
    assert!((models[0]["cost_usd"].as_f64().unwrap() - 0.00045).abs() < 1e-12);
    let all_days = q1(&api, "models", json!({"days": 3660})).await;
    assert_eq!(all_days.len(), 2);
    assert_eq!(all_days[1]["day"], "2023-11-14");

    let days = q1(&api, "aggregates", json!({"days": 3660})).await;
    assert_eq!(days.len(), 2);
    assert_eq!((days[0]["spans"].as_i64(), days[0]["span_errors"].as_i64()), (Some(1), Some(1)));
    assert_eq!((days[1]["day"].as_str(), days[1]["spans"].as_i64()), (Some("2023-11-14"), Some(2)));

    let health = q1(&api, "health", json!({})).await;
    assert_eq!(health.len(), 1);
    let svc = &health[0];
    assert_eq!(
        (svc["service"].as_str(), svc["spans"].as_i64(), svc["errors"].as_i64()),
        (Some("grpc-svc"), Some(3), Some(1))
    );
    assert_eq!(svc["status"], "erroring", "{svc:?}");
    assert!(!svc.contains_key("_last_ns"), "internal columns stay internal");
    assert!((svc["error_rate"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
}
