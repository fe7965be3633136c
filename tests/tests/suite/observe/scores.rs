//! Scores from code (REST, gRPC) and from OTLP evaluation events land on the target they
//! name, with the context roost found for it, and in the q/1 aggregates, columns and
//! filters; bad input is a 4xx that records nothing.

use opentelemetry_proto::tonic::{
    collector::{
        logs::v1::{ExportLogsServiceRequest, logs_service_client::LogsServiceClient},
        trace::v1::{ExportTraceServiceRequest, trace_service_client::TraceServiceClient},
    },
    common::v1::{AnyValue, KeyValue, any_value::Value as Any},
    logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
    resource::v1::Resource,
    trace::v1::{ResourceSpans, ScopeSpans, Span, span::Event},
};
use roost_proto::{
    json::value::from_json,
    v1::{CreateScoresRequest, ListScoresRequest, Score, score_service_client::ScoreServiceClient},
};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

use super::q1;

each_backend!(scores_from_rest_grpc_and_otlp_land_on_their_targets_and_in_q1, bad_scores_are_4xx_and_record_nothing);

fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..Default::default() }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Any::StringValue(value.into()))
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

const TRACE: [u8; 16] = [0xab; 16];
const ROOT: [u8; 8] = [1; 8];
const CALL: [u8; 8] = [2; 8];

fn trace_hex() -> String {
    hex::encode(TRACE)
}

fn call_hex() -> String {
    hex::encode(CALL)
}

/// A trace of session `s-scored`: an agent's root span and a model call under it, the call
/// carrying an evaluation event (the OpenTelemetry GenAI convention's names).
fn traces(start: u64) -> ExportTraceServiceRequest {
    let root = Span {
        trace_id: TRACE.to_vec(),
        span_id: ROOT.to_vec(),
        name: "invoke_agent".into(),
        start_time_unix_nano: start,
        end_time_unix_nano: start + 3_000_000,
        attributes: vec![text("session.id", "s-scored"), text("gen_ai.agent.id", "agent-1")],
        ..Default::default()
    };
    let call = Span {
        trace_id: TRACE.to_vec(),
        span_id: CALL.to_vec(),
        parent_span_id: ROOT.to_vec(),
        name: "chat m-judged".into(),
        start_time_unix_nano: start + 1_000_000,
        end_time_unix_nano: start + 2_000_000,
        attributes: vec![
            text("session.id", "s-scored"),
            text("gen_ai.agent.id", "agent-1"),
            text("gen_ai.operation.name", "chat"),
            text("gen_ai.request.model", "m-judged"),
            kv("gen_ai.usage.input_tokens", Any::IntValue(10)),
        ],
        events: vec![Event {
            time_unix_nano: start + 2_000_000,
            name: "gen_ai.evaluation.result".into(),
            attributes: vec![
                text("gen_ai.evaluation.name", "relevance"),
                kv("gen_ai.evaluation.score.value", Any::DoubleValue(0.8)),
                text("gen_ai.evaluation.score.label", "relevant"),
                text("gen_ai.evaluation.explanation", "on topic"),
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![text("service.name", "svc-scored")], ..Default::default() }),
            scope_spans: vec![ScopeSpans { spans: vec![root, call], ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// Evaluation log records: one on the trace in Phoenix's annotation names (a category, by
/// a person), one on the session in Langfuse's (a boolean, by code).
fn logs(at: u64) -> ExportLogsServiceRequest {
    let on_trace = LogRecord {
        time_unix_nano: at,
        event_name: "gen_ai.evaluation.result".into(),
        trace_id: TRACE.to_vec(),
        attributes: vec![
            text("annotation.name", "tone"),
            text("annotation.label", "friendly"),
            text("annotation.annotator_kind", "HUMAN"),
        ],
        ..Default::default()
    };
    let on_session = LogRecord {
        time_unix_nano: at,
        attributes: vec![
            text("event.name", "score"),
            text("session.id", "s-scored"),
            text("langfuse.score.name", "resolved"),
            kv("langfuse.score.value", Any::BoolValue(true)),
            text("langfuse.score.source", "API"),
        ],
        ..Default::default()
    };
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource { attributes: vec![text("service.name", "svc-scored")], ..Default::default() }),
            scope_logs: vec![ScopeLogs { log_records: vec![on_trace, on_session], ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// Ingests the trace and its evaluation events over OTLP/gRPC.
async fn ingest(server: &TestServer, start: u64) {
    let channel = server.channel().await;
    TraceServiceClient::new(channel.clone()).export(traces(start)).await.expect("traces");
    LogsServiceClient::new(channel).export(logs(start + 2_000_000)).await.expect("logs");
}

/// The scores of `trace_id` by name (each name once).
fn by_name(scores: &[Value], name: &str) -> Value {
    let found: Vec<_> = scores.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "{name}: {scores:?}");
    found[0].clone()
}

async fn scores_from_rest_grpc_and_otlp_land_on_their_targets_and_in_q1(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let start = now_ns() - 60_000_000_000;
    ingest(&server, start).await;

    // OTLP: the span event scored the call; the log records the trace and the session.
    let listed = api.get(&format!("/api/v1/scores?trace_id={}", trace_hex())).await.ok();
    let scores = listed["scores"].as_array().unwrap().clone();
    let relevance = by_name(&scores, "relevance");
    assert_eq!(
        (&relevance["target"], &relevance["kind"], &relevance["value"], &relevance["source"]),
        (&json!("span"), &json!("numeric"), &json!(0.8), &json!("eval")),
        "{relevance}"
    );
    assert_eq!((&relevance["span_id"], &relevance["model"]), (&json!(call_hex()), &json!("m-judged")));
    assert_eq!((&relevance["session_id"], &relevance["agent_id"]), (&json!("s-scored"), &json!("agent-1")));
    assert_eq!(relevance["comment"], "on topic");
    let tone = by_name(&scores, "tone");
    assert_eq!(
        (&tone["target"], &tone["value"], &tone["source"]),
        (&json!("trace"), &json!("friendly"), &json!("human"))
    );
    let session = api.get("/api/v1/scores?session_id=s-scored").await.ok();
    let resolved = by_name(session["scores"].as_array().unwrap(), "resolved");
    assert_eq!(
        (&resolved["target"], &resolved["value"], &resolved["source"]),
        (&json!("session"), &json!(true), &json!("api"))
    );
    // An exporter resending the same requests adds nothing.
    ingest(&server, start).await;
    assert_eq!(server.sql("SELECT COUNT(*) FROM scores").await.unwrap(), [3]);

    // REST: one score on the trace, then a list on the call and the session.
    let created =
        api.post("/api/v1/scores", json!({"score": {"name": "helpful", "value": true, "trace_id": trace_hex()}})).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let helpful = &created.ok()["scores"][0];
    assert_eq!(
        (&helpful["target"], &helpful["kind"], &helpful["session_id"]),
        (&json!("trace"), &json!("boolean"), &json!("s-scored"))
    );
    assert!(helpful["id"].as_str().unwrap().starts_with("score_"), "{helpful}");
    let listed = api
        .post(
            "/api/v1/scores",
            json!({"scores": [
                {"name": "quality", "value": 0.5, "trace_id": trace_hex(), "span_id": call_hex(), "comment": "terse"},
                {"name": "mood", "value": "calm", "session_id": "s-scored", "source": "human", "author": "ana"},
            ]}),
        )
        .await
        .ok();
    assert_eq!(listed["scores"][0]["model"], "m-judged", "{listed}");
    assert_eq!(listed["scores"][1]["author"], "ana");

    // gRPC: the same service.
    let mut grpc = ScoreServiceClient::new(server.channel().await);
    let score = Score {
        name: "quality".into(),
        value: Some(from_json(&json!(1.0))),
        trace_id: trace_hex(),
        span_id: call_hex(),
        id: "my-quality".into(),
        ..Default::default()
    };
    let made = grpc.create_scores(CreateScoresRequest { score: Some(score.clone()), scores: vec![] }).await.unwrap();
    assert_eq!(made.get_ref().scores[0].target, "span");
    // Given again under its id, it replaces the first.
    let again = Score { value: Some(from_json(&json!(0.9))), ..score };
    grpc.create_scores(CreateScoresRequest { score: Some(again), scores: vec![] }).await.unwrap();
    let listed = grpc
        .list_scores(ListScoresRequest { trace_id: trace_hex(), name: "quality".into(), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(listed.get_ref().scores.len(), 2, "{listed:?}");
    let mine: Vec<_> = listed.get_ref().scores.iter().filter(|s| s.id == "my-quality").collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].value.as_ref().map(roost_proto::json::value::to_json), Some(json!(0.9)));

    // q/1 aggregates: per name, then per model and per day.
    let rows = q1(&api, "scores", json!({})).await;
    let row =
        |name: &str| rows.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name}: {rows:?}")).clone();
    let quality = row("quality");
    assert_eq!((quality["scores"].as_i64(), quality["mean"].as_f64()), (Some(2), Some(0.7)), "{quality:?}");
    assert_eq!((quality["min"].as_f64(), quality["max"].as_f64()), (Some(0.5), Some(0.9)));
    let helpful = row("helpful");
    assert_eq!((helpful["kind"].as_str(), helpful["true_count"].as_i64()), (Some("boolean"), Some(1)));
    assert_eq!(row("tone")["categories"], json!({"friendly": 1}));
    assert_eq!(row("relevance")["categories"], Value::Null, "a number's label is not a category");
    let per_model = q1(&api, "scores", json!({"group": "model", "name": "quality"})).await;
    assert_eq!(per_model.len(), 1, "{per_model:?}");
    assert_eq!(per_model[0]["model"], "m-judged");
    let per_day = q1(&api, "scores", json!({"group": "day", "name": "relevance"})).await;
    assert_eq!(per_day[0]["day"].as_str().map(str::len), Some(10), "{per_day:?}");
    let humans = q1(&api, "scores", json!({"source": "human"})).await;
    let names: Vec<_> = humans.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mood", "tone"]);

    // The lists show the scores and filter by them.
    let traces = q1(&api, "traces", json!({"trace_id": trace_hex()})).await;
    assert_eq!(traces[0]["scores"]["quality"].as_f64(), Some(0.7), "{traces:?}");
    assert_eq!(traces[0]["scores"]["helpful"].as_f64(), Some(1.0), "{traces:?}");
    assert_eq!(traces[0]["scores"]["tone"], json!("friendly"));
    for (filter, found) in
        [("quality>=0.9", 1), ("quality>0.9", 0), ("tone=friendly", 1), ("tone=rude", 0), ("helpful", 1)]
    {
        let rows = q1(&api, "traces", json!({"score": filter})).await;
        assert_eq!(rows.len(), found, "{filter}: {rows:?}");
    }
    let sessions = q1(&api, "sessions", json!({"score": "mood=calm"})).await;
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["scores"]["resolved"].as_f64(), Some(1.0), "{sessions:?}");
    let one_by_one = q1(&api, "score_list", json!({"trace_id": trace_hex(), "name": "helpful"})).await;
    assert_eq!(one_by_one[0]["value"], json!(true), "{one_by_one:?}");
    assert!(!one_by_one[0].contains_key("_kind"), "{one_by_one:?}");

    // Deleted once; the second time it is gone.
    let id = mine[0].id.clone();
    assert_eq!(api.delete_path(&format!("/api/v1/scores/{id}")).await.ok()["ok"], true);
    api.delete_path(&format!("/api/v1/scores/{id}")).await.err(404, "not_found");
}

async fn bad_scores_are_4xx_and_record_nothing(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    ingest(&server, now_ns() - 60_000_000_000).await;
    let before = server.sql("SELECT COUNT(*) FROM scores").await.unwrap();
    let trace = trace_hex();
    for (body, status, code) in [
        (json!({"score": {"name": "q", "value": 1, "trace_id": "f".repeat(32)}}), 404, "not_found"),
        (json!({"score": {"name": "q", "value": 1, "trace_id": trace, "span_id": "0".repeat(16)}}), 404, "not_found"),
        (json!({"score": {"name": "q", "value": 1, "session_id": "nobody"}}), 404, "not_found"),
        (json!({"score": {"name": "q", "value": 1, "turn_id": "turn_nope"}}), 404, "not_found"),
        (json!({"score": {"name": "q", "trace_id": trace}}), 400, "invalid_argument"),
        (json!({"score": {"name": "q", "value": [1], "trace_id": trace}}), 400, "invalid_argument"),
        (json!({"score": {"name": "q", "value": {"a": 1}, "trace_id": trace}}), 400, "invalid_argument"),
        (json!({"score": {"name": "q", "value": "", "trace_id": trace}}), 400, "invalid_argument"),
        (json!({"score": {"name": "", "value": 1, "trace_id": trace}}), 400, "invalid_argument"),
        (json!({"score": {"name": "q".repeat(257), "value": 1, "trace_id": trace}}), 400, "invalid_argument"),
        (
            json!({"score": {"name": "q", "value": 1, "trace_id": trace, "comment": "x".repeat(4097)}}),
            400,
            "invalid_argument",
        ),
        (json!({"score": {"name": "q", "value": 1, "trace_id": trace, "source": "robot"}}), 400, "invalid_argument"),
        (json!({"score": {"name": "q", "value": 1}}), 400, "invalid_argument"),
        (json!({"score": {"name": "q", "value": 1, "span_id": call_hex()}}), 400, "invalid_argument"),
        (
            json!({"score": {"name": "q", "value": 1, "trace_id": trace, "session_id": "s-scored"}}),
            400,
            "invalid_argument",
        ),
        (
            json!({"score": {"name": "q", "value": 1, "trace_id": trace, "time": "2999-01-01T00:00:00Z"}}),
            400,
            "invalid_argument",
        ),
        (json!({"score": {"name": "q", "value": 1, "trace_id": trace, "colour": "red"}}), 400, "invalid_argument"),
        (json!({}), 400, "invalid_argument"),
        // One bad score fails the list, and none of it is recorded.
        (
            json!({"scores": [{"name": "q", "value": 1, "trace_id": trace}, {"name": "q", "trace_id": trace}]}),
            400,
            "invalid_argument",
        ),
        (
            json!({"scores": [{"name": "q", "value": 1, "trace_id": trace}, {"name": "q", "value": 1, "trace_id": "0".repeat(32)}]}),
            404,
            "not_found",
        ),
        (
            json!({"scores": (0..1001).map(|_| json!({"name": "q", "value": 1, "trace_id": trace})).collect::<Vec<_>>()}),
            400,
            "invalid_argument",
        ),
    ] {
        api.post("/api/v1/scores", body.clone()).await.err(status, code);
    }
    assert_eq!(server.sql("SELECT COUNT(*) FROM scores").await.unwrap(), before);
    // A list names one target; a filter must parse.
    api.get("/api/v1/scores").await.err(400, "invalid_argument");
    api.get("/api/v1/scores?trace_id=a&session_id=b").await.err(400, "invalid_argument");
    api.get("/api/v1/scores?limit=abc").await.err(400, "invalid_argument");
    for filter in ["quality>=high", ">=1", ""] {
        api.post("/api/local/query", json!({"shape": "traces", "args": {"score": filter}}))
            .await
            .err(400, "invalid_argument");
    }
    api.post("/api/local/query", json!({"shape": "scores", "args": {"group": "planet"}}))
        .await
        .err(400, "invalid_argument");
}
