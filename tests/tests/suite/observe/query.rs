//! The q/1 contract: the registry listing, argument checking and clamping, the same
//! answers over REST and gRPC, the daily and health shapes, paging and the dashboard's
//! filters, and one span in detail.

use opentelemetry_proto::tonic::{
    collector::trace::v1::{ExportTraceServiceRequest, trace_service_client::TraceServiceClient},
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    trace::v1::span::Event,
};
use roost_proto::{
    json::value::{map_to_struct, struct_to_map},
    v1::{ListShapesRequest, QueryRequest, query_service_client::QueryServiceClient},
};
use std::collections::BTreeSet;

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::{otlp::traces_request, q1};

each_backend!(
    the_listing_is_the_registry_over_rest_and_grpc,
    bad_shapes_arguments_and_types_are_400,
    limits_are_clamped_not_refused,
    grpc_and_rest_return_the_same_rows,
    daily_models_aggregates_and_health,
    offset_pages_without_overlap,
    sessions_filter_by_model_and_by_literal_search,
    traces_filter_by_a_spans_model,
    sessions_and_traces_match_parts_ignoring_case_and_sort,
    the_span_shape_answers_one_span_with_its_resource_and_events
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
        "span",
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

fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
        ..Default::default()
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::IntValue(value)) }),
        ..Default::default()
    }
}

async fn export(server: &TestServer, request: ExportTraceServiceRequest) {
    let reply = TraceServiceClient::new(server.channel().await).export(request).await.unwrap().into_inner();
    assert!(reply.partial_success.is_none(), "{reply:?}");
}

/// Pages of `page` rows of `shape` (by `key`) until one comes back short.
async fn pages(api: &roost_tests::Api, shape: &str, key: &str, page: i64, args: Value) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    for n in 0.. {
        let mut args = args.clone();
        args["limit"] = json!(page);
        args["offset"] = json!(n * page);
        let rows = q1(api, shape, args).await;
        pages.push(rows.iter().map(|r| r[key].as_str().unwrap().to_owned()).collect::<Vec<_>>());
        if (rows.len() as i64) < page {
            break;
        }
    }
    pages
}

async fn offset_pages_without_overlap(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    for i in 0..7u8 {
        export(&server, traces_request(40 + i, 2, &format!("page-{i}"))).await;
    }
    for (shape, key, extra) in [("sessions", "session_id", json!({})), ("traces", "trace_id", json!({}))] {
        let all: Vec<String> =
            q1(&api, shape, json!({"limit": 100})).await.iter().map(|r| r[key].as_str().unwrap().to_owned()).collect();
        assert_eq!(all.len(), 7, "{shape}: {all:?}");
        let pages = pages(&api, shape, key, 3, extra).await;
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 1], "{shape}: {pages:?}");
        assert_eq!(pages.concat(), all, "{shape}: the pages are the whole list, in order, each row once");
    }
    // Spans page too (14 spans, newest first), within one session as well.
    let all = q1(&api, "spans", json!({"limit": 100})).await;
    let ids = |rows: &[serde_json::Map<String, Value>]| {
        rows.iter().map(|r| format!("{}/{}", r["trace_id"].as_str().unwrap(), r["span_id"].as_str().unwrap())).collect()
    };
    let all: Vec<String> = ids(&all);
    let second: Vec<String> = ids(&q1(&api, "spans", json!({"limit": 5, "offset": 5})).await);
    assert_eq!(second, all[5..10]);
    let session = q1(&api, "spans", json!({"session_id": "page-3", "limit": 1, "offset": 1})).await;
    assert_eq!((session.len(), session[0]["name"].as_str()), (1, Some("root")), "{session:?}");

    // Out of range is clamped, not refused: below 0 is 0; past the end is no rows.
    let first = q1(&api, "sessions", json!({"limit": 2})).await;
    assert_eq!(q1(&api, "sessions", json!({"limit": 2, "offset": -5})).await, first);
    assert!(q1(&api, "sessions", json!({"offset": 1_000_000})).await.is_empty());
    api.post("/api/local/query", json!({"shape": "sessions", "args": {"offset": "2"}}))
        .await
        .err(400, "invalid_argument");
}

async fn sessions_filter_by_model_and_by_literal_search(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let sessions = ["run-50%_off", "run-50xyoff", "RUN-50%_OFF-2", r"path\to", "other"];
    for (i, session) in sessions.iter().enumerate() {
        let mut request = traces_request(50 + i as u8, 1, session);
        if *session == "RUN-50%_OFF-2" {
            let span = &mut request.resource_spans[0].scope_spans[0].spans[0];
            span.attributes.push(string("gen_ai.response.model", "gpt-4o"));
        }
        export(&server, request).await;
    }
    let search = |text: &str| {
        let api = api.clone();
        let text = text.to_owned();
        async move {
            let rows = q1(&api, "sessions", json!({"search": text})).await;
            let mut ids: Vec<String> = rows.iter().map(|r| r["session_id"].as_str().unwrap().to_owned()).collect();
            ids.sort();
            ids
        }
    };
    // `%`, `_` and `\` match themselves, not any text, any character or an escape.
    assert_eq!(search("50%_").await, ["RUN-50%_OFF-2", "run-50%_off"]);
    assert_eq!(search("_").await, ["RUN-50%_OFF-2", "run-50%_off"]);
    assert_eq!(search("%").await, ["RUN-50%_OFF-2", "run-50%_off"]);
    assert_eq!(search(r"h\t").await, [r"path\to"]);
    assert_eq!(search(r"\").await, [r"path\to"]);
    assert!(search("50_y").await.is_empty(), "`_` is not any character");
    // Case is ignored, both ways.
    assert_eq!(search("Run-50").await, ["RUN-50%_OFF-2", "run-50%_off", "run-50xyoff"]);
    assert_eq!(search("%_off-").await, ["RUN-50%_OFF-2"]);
    assert_eq!(search("OTHER").await, ["other"]);
    assert!(search("nothing like it").await.is_empty());

    let model = |args: Value| {
        let api = api.clone();
        async move {
            q1(&api, "sessions", args)
                .await
                .iter()
                .map(|r| r["session_id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(model(json!({"model": "gpt-4o"})).await, ["RUN-50%_OFF-2"]);
    assert_eq!(model(json!({"model": "claude-3-5-sonnet"})).await.len(), 4);
    assert_eq!(model(json!({"model": "claude-3-5-sonnet", "search": "%_"})).await, ["run-50%_off"]);
    assert!(model(json!({"model": "gpt"})).await.is_empty(), "a model is matched whole");
    let rows = q1(&api, "sessions", json!({"model": "gpt-4o"})).await;
    assert_eq!(rows[0]["last_model"], "gpt-4o");
}

async fn traces_filter_by_a_spans_model(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    export(&server, traces_request(70, 3, "models")).await;
    // One span of the second trace answered with another model.
    let mut mixed = traces_request(71, 3, "models");
    mixed.resource_spans[0].scope_spans[0].spans[1].attributes.push(string("gen_ai.response.model", "gpt-4o"));
    export(&server, mixed).await;
    let (a, b) = (hex::encode([70u8; 16]), hex::encode([71u8; 16]));

    let traces = |args: Value| {
        let api = api.clone();
        async move {
            q1(&api, "traces", args)
                .await
                .iter()
                .map(|r| r["trace_id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(traces(json!({"model": "gpt-4o"})).await, [b.as_str()]);
    let claude = traces(json!({"model": "claude-3-5-sonnet"})).await;
    assert_eq!(claude, [a.as_str(), b.as_str()], "both have a span of it (ordered by start, then id)");
    assert_eq!(traces(json!({"model": "claude-3-5-sonnet", "offset": 1})).await, [b.as_str()]);
    assert!(traces(json!({"model": "claude"})).await.is_empty(), "a model is matched whole");
    assert!(traces(json!({"model": "gpt-4o", "session_id": "elsewhere"})).await.is_empty());
    let rows = q1(&api, "traces", json!({"model": "gpt-4o"})).await;
    assert_eq!((rows[0]["spans"].as_i64(), rows[0]["root_name"].as_str()), (Some(3), Some("root")));
}

async fn sessions_and_traces_match_parts_ignoring_case_and_sort(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    // One span of a dated model from service Checkout-API; two and four spans elsewhere.
    let mut mini = traces_request(80, 1, "Cart-A");
    mini.resource_spans[0].resource.as_mut().unwrap().attributes = vec![string("service.name", "Checkout-API")];
    mini.resource_spans[0].scope_spans[0].spans[0]
        .attributes
        .push(string("gen_ai.response.model", "gpt-4o-mini-2024-07-18"));
    export(&server, mini).await;
    export(&server, traces_request(81, 2, "other")).await;
    export(&server, traces_request(82, 4, "Cart-B")).await;
    let (a, b, c) = (hex::encode([80u8; 16]), hex::encode([81u8; 16]), hex::encode([82u8; 16]));
    let (a, b, c) = (a.as_str(), b.as_str(), c.as_str());

    let ids = |shape: &'static str, key: &'static str, args: Value| {
        let api = api.clone();
        async move { q1(&api, shape, args).await.iter().map(|r| r[key].as_str().unwrap().to_owned()).collect::<Vec<_>>() }
    };
    let traces = |args: Value| ids("traces", "trace_id", args);
    // A model family, in any case, by the response model or the request model.
    assert_eq!(traces(json!({"model_contains": "GPT-4o-Mini"})).await, [a]);
    assert_eq!(traces(json!({"model_contains": "Sonnet"})).await, [a, b, c]);
    assert_eq!(traces(json!({"service_contains": "CHECKOUT"})).await, [a]);
    assert_eq!(traces(json!({"session_contains": "cart"})).await, [a, c]);
    assert!(traces(json!({"model_contains": "gpt-4o-mini%"})).await.is_empty(), "`%` is literal");
    // Orders: the default is unchanged; longest and most tokens first.
    assert_eq!(traces(json!({})).await, [a, b, c]);
    assert_eq!(traces(json!({"order": "start"})).await, [a, b, c]);
    assert_eq!(traces(json!({"order": "duration"})).await, [c, b, a]);
    assert_eq!(traces(json!({"order": "tokens"})).await, [c, b, a]);
    assert_eq!(traces(json!({"order": "tokens", "session_contains": "CART"})).await, [c, a]);

    let sessions = |args: Value| ids("sessions", "session_id", args);
    assert_eq!(sessions(json!({"service_contains": "checkout"})).await, ["Cart-A"]);
    assert_eq!(sessions(json!({"model_contains": "4O-MINI"})).await, ["Cart-A"]);
    assert_eq!(sessions(json!({"order": "tokens"})).await, ["Cart-B", "other", "Cart-A"]);
    assert_eq!(sessions(json!({"order": "last_seen"})).await, sessions(json!({})).await);
    assert_eq!(sessions(json!({"order": "cost"})).await.len(), 3);

    // An unknown order is a 400 naming the allowed ones.
    for (shape, allowed) in [("sessions", "last_seen, tokens, cost"), ("traces", "start, duration, tokens, cost")] {
        let reply = api.post("/api/local/query", json!({"shape": shape, "args": {"order": "price"}})).await;
        reply.err(400, "invalid_argument");
        let message = reply.body["error"].as_str().unwrap();
        assert!(message.contains(&format!("\"order\" must be one of {allowed}")), "{message}");
    }
}

async fn the_span_shape_answers_one_span_with_its_resource_and_events(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let mut request = traces_request(80, 2, "detail");
    let resource_spans = &mut request.resource_spans[0];
    let resource = resource_spans.resource.as_mut().unwrap();
    resource.attributes.push(string("deployment.environment", "test"));
    resource.attributes.push(int("process.pid", 4242));
    let scope_spans = &mut resource_spans.scope_spans[0];
    scope_spans.scope = Some(InstrumentationScope { name: "roost.test.scope".into(), ..Default::default() });
    let base = scope_spans.spans[1].start_time_unix_nano;
    // Sent out of order: the answer is in time order.
    scope_spans.spans[1].events = vec![
        Event {
            time_unix_nano: base + 200_000,
            name: "retry".into(),
            attributes: vec![int("attempt", 2)],
            ..Default::default()
        },
        Event {
            time_unix_nano: base + 100_000,
            name: "exception".into(),
            attributes: vec![string("exception.message", "rate limited"), int("attempt", 1)],
            ..Default::default()
        },
    ];
    export(&server, request).await;
    let trace = hex::encode([80u8; 16]);

    let rows = q1(&api, "span", json!({"trace_id": trace, "span_id": "0000000000000002"})).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let span = &rows[0];
    // Everything the spans shape says of it, then more.
    let listed = q1(&api, "spans", json!({"trace_id": trace})).await;
    let listed = listed.iter().find(|r| r["span_id"] == "0000000000000002").unwrap();
    for (key, value) in listed {
        assert_eq!(&span[key], value, "{key}");
    }
    assert_eq!((span["name"].as_str(), span["parent_span_id"].as_str()), (Some("step 1"), Some("0000000000000001")));
    assert_eq!(span["scope"], "roost.test.scope");
    assert_eq!(
        span["resource"],
        json!({"service.name": "grpc-svc", "deployment.environment": "test", "process.pid": 4242})
    );
    assert_eq!(
        span["events"],
        json!([
            {
                "time": "2023-11-14T22:13:20.001100Z",
                "name": "exception",
                "attributes": {"exception.message": "rate limited", "attempt": 1},
            },
            {"time": "2023-11-14T22:13:20.001200Z", "name": "retry", "attributes": {"attempt": 2}},
        ])
    );
    let info = roost_server::query::shape_infos().into_iter().find(|s| s.name == "span").unwrap();
    let keys: BTreeSet<&str> = span.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        info.columns.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "the rows have the listed columns"
    );

    // A span without events has an empty list; the same answer over gRPC.
    let root = q1(&api, "span", json!({"trace_id": trace, "span_id": "0000000000000001"})).await;
    assert_eq!((root[0]["name"].as_str(), root[0]["events"].clone()), (Some("root"), json!([])));
    assert_eq!(root[0]["resource"], span["resource"]);
    let args = json!({"trace_id": trace, "span_id": "0000000000000002"});
    let grpc = QueryServiceClient::new(server.channel().await)
        .query(QueryRequest { shape: "span".into(), args: Some(map_to_struct(args.as_object().unwrap())) })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        grpc.rows.iter().map(|r| Value::Object(struct_to_map(r))).collect::<Vec<_>>(),
        [Value::Object(span.clone())]
    );

    // No such span: no rows, not an error.
    assert!(q1(&api, "span", json!({"trace_id": trace, "span_id": "00000000000000ff"})).await.is_empty());
    assert!(q1(&api, "span", json!({"trace_id": "ab".repeat(16), "span_id": "0000000000000002"})).await.is_empty());

    // Missing or mistyped ids are the client's 400.
    let cases = [
        (json!({"shape": "span"}), "needs the argument \"trace_id\""),
        (json!({"shape": "span", "args": {"trace_id": trace}}), "needs the argument \"span_id\""),
        (json!({"shape": "span", "args": {"span_id": "0000000000000002"}}), "needs the argument \"trace_id\""),
        (json!({"shape": "span", "args": {"trace_id": trace, "span_id": 2}}), "argument \"span_id\" must be a string"),
        (json!({"shape": "span", "args": {"trace_id": trace, "span_id": null}}), "needs the argument \"span_id\""),
        (
            json!({"shape": "span", "args": {"trace_id": trace, "span_id": "0000000000000002", "limit": 5}}),
            "unknown argument \"limit\"",
        ),
    ];
    for (body, why) in cases {
        let reply = api.post("/api/local/query", body.clone()).await;
        reply.err(400, "invalid_argument");
        assert!(reply.body["error"].as_str().unwrap().contains(why), "{body}: {}", reply.body);
    }
}
