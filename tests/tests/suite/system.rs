//! Health and version over REST, on both backends.

use roost_proto::v1::GetVersionResponse;
use roost_tests::{Backend, TestServer, each_backend};
use serde_json::{Value, json};

each_backend!(
    healthz_is_ok,
    local_health_reports_the_store,
    version_reports_build_and_contracts,
    openapi_document_is_open_and_matches_the_answers
);

/// `/openapi.json` is served without a token even when dashboard tokens are required, and
/// real answers use only the fields its schemas name.
async fn openapi_document_is_open_and_matches_the_answers(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.access.api_tokens = vec!["dash-token".into()]).await;
    let resp = server.http.get(server.url("/openapi.json")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let doc: Value = resp.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let pair = &doc["paths"]["/api/instances/{instance_id}/channel/pair"]["post"];
    assert_eq!(
        pair["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/PairChannelRequest"
    );
    assert_eq!(pair["security"], json!([{"accountKey": []}]));
    assert!(pair["responses"]["404"].is_object() && pair["responses"]["401"].is_object(), "{pair}");
    assert_eq!(doc["paths"]["/api/local/query"]["post"]["security"], json!([{"dashboardToken": []}, {}]));

    // Answers carry only what the schemas describe.
    let schema = |name: &str| doc["components"]["schemas"][name]["properties"].as_object().unwrap().clone();
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    let id = api.provision("echo", "brief").await["id"].as_str().unwrap().to_owned();
    let checks = [
        ("Runtime", api.get("/api/runtimes").await.ok()[0].clone()),
        ("Instance", api.get(&format!("/api/instances/{id}")).await.ok()),
        ("TelegramChannel", api.get(&format!("/api/instances/{id}/channel")).await.ok()),
    ];
    for (name, answer) in checks {
        let properties = schema(name);
        for key in answer.as_object().unwrap().keys() {
            assert!(properties.contains_key(key), "{name}.{key} is not in the document");
        }
    }
}

async fn healthz_is_ok(backend: Backend) {
    let server = TestServer::start(backend).await;
    let resp = server.http.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(resp.json::<Value>().await.unwrap(), json!({"status": "ok"}));
}

async fn local_health_reports_the_store(backend: Backend) {
    let server = TestServer::start(backend).await;
    let resp = server.http.get(server.url("/api/local/health")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let health: Value = resp.json().await.unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
    assert!(health["uptime_secs"].as_i64().unwrap() >= 0);
    assert!(health["started_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(health["database"]["backend"], backend.name());
    assert_eq!(health["database"]["reachable"], true);
    assert_eq!(health["database"]["error"], "");
    assert!(health["database"]["schema_version"].as_i64().unwrap() >= 1);
    assert!(health["store"]["size_bytes"].as_i64().unwrap() > 0);
    let location = health["store"]["location"].as_str().unwrap();
    match backend {
        Backend::Sqlite => assert!(location.ends_with("roost.db"), "{location}"),
        Backend::Postgres => assert!(location.contains("/roost_test_") && !location.contains('@'), "{location}"),
    }
    server.stop().await.unwrap();
}

async fn version_reports_build_and_contracts(backend: Backend) {
    let server = TestServer::start(backend).await;
    let resp = server.http.post(server.url("/api/version")).json(&json!({})).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let version: Value = resp.json().await.unwrap();
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
    assert!(!version["git_commit"].as_str().unwrap().is_empty());
    // The REST body is the proto message: it decodes back, build date and all.
    let typed: GetVersionResponse = serde_json::from_value(version.clone()).unwrap();
    assert!(typed.build_date.unwrap().seconds > 1_700_000_000);
    assert_eq!(version["contracts"]["query"], "q/1");
    assert_eq!(version["contracts"]["grpc"], "roost.v1");
    assert!(!version["target"].as_str().unwrap().is_empty());
}
