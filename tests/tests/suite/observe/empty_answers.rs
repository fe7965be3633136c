//! The seed's rule for the dashboard's reads: "a handler that cannot answer returns an
//! empty result with HTTP 200 rather than 500", with a `warning` saying so, while `roost
//! status` tells the truth. Reproduced as the probe did: the store's tables disappear
//! (renamed) under a running roost.

use roost_proto::v1::{QueryRequest, query_service_client::QueryServiceClient};
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

each_backend!(reads_answer_empty_with_a_warning_when_the_store_cannot);

/// Every table the query API and the feature pages read.
const TABLES: &[&str] = &[
    "spans",
    "span_events",
    "logs",
    "metric_points",
    "runs",
    "events",
    "sessions",
    "traces",
    "services",
    "usage_daily",
    "metric_usage_daily",
    "messages",
    "search_docs",
    "usage_hourly",
    "latency_hourly",
    "trace_labels",
    "session_labels",
    "scores",
    "evaluators",
    "judgements",
    "datasets",
    "dataset_items",
    "experiments",
    "experiment_results",
    "activity_daily",
    "crons",
    "cron_runs",
    "alert_rules",
    "alerts",
    "guard_policies",
    "guard_incidents",
    "skill_usage",
    "replicas",
    "row_counts",
];

async fn rename_tables(server: &TestServer, from: &str, to: &str) {
    for table in TABLES {
        server.sql(&format!("ALTER TABLE {table}{from} RENAME TO {table}{to}")).await.unwrap();
    }
}

fn assert_empty_with_warning(answer: &Value, list: &str) {
    assert!(answer[list].as_array().is_some_and(Vec::is_empty), "{list} empty: {answer}");
    assert!(answer["warning"].as_str().is_some_and(|w| w.contains("not an empty store")), "{answer}");
}

async fn reads_answer_empty_with_a_warning_when_the_store_cannot(backend: Backend) {
    let server = TestServer::start(backend).await;
    let api = server.api(None);
    let shapes = api.post("/api/local/query", json!({"shape": "?"})).await.ok();
    let shapes: Vec<String> =
        shapes["allowed_shapes"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect();
    assert!(shapes.len() >= 10, "{shapes:?}");

    rename_tables(&server, "", "_gone").await;

    assert_empty_with_warning(&api.get("/api/local/sessions").await.ok(), "rows");
    for shape in &shapes {
        let args = match shape.as_str() {
            "transcript" => json!({"session_id": "s"}),
            "span" => json!({"trace_id": "t", "span_id": "s"}),
            "search" => json!({"text": "lisbon"}),
            "experiment_results" => json!({"experiment_id": "ex_x"}),
            _ => json!({}),
        };
        let answer = api.post("/api/local/query", json!({"shape": shape, "args": args})).await.ok();
        assert_empty_with_warning(&answer, "rows");
        assert_eq!((answer["shape"].as_str(), answer["contract"].as_str()), (Some(shape.as_str()), Some("q/1")));
    }
    // A client's own mistake is still its 400, broken store or not.
    api.post("/api/local/query", json!({"shape": "nope"})).await.err(400, "invalid_argument");
    // gRPC answers the same way.
    let mut query = QueryServiceClient::new(server.channel().await);
    let answer = query.query(QueryRequest { shape: "spans".into(), ..Default::default() }).await.unwrap();
    assert!(answer.get_ref().rows.is_empty() && !answer.get_ref().warning.is_empty());

    assert_empty_with_warning(&api.get("/api/crons").await.ok(), "crons");
    assert_empty_with_warning(&api.get("/api/alerts").await.ok(), "rules");
    assert_empty_with_warning(&api.get("/api/guard").await.ok(), "policies");
    assert!(api.get("/api/usage").await.ok()["warning"].as_str().is_some_and(|w| !w.is_empty()));
    let replicas = api.get("/api/replicas").await.ok();
    assert_empty_with_warning(&replicas, "replicas");
    assert!(replicas["self"].as_str().is_some_and(|s| !s.is_empty()), "it still names itself: {replicas}");
    let status = api.get("/api/status").await.ok();
    assert_eq!(status["handler_verdict"], "broken", "{status}");

    rename_tables(&server, "_gone", "").await;
    let answer = api.post("/api/local/query", json!({"shape": "spans"})).await.ok();
    assert_eq!(answer["warning"], "", "{answer}");
    assert_eq!(api.get("/api/status").await.ok()["handler_verdict"], "transient");
}
