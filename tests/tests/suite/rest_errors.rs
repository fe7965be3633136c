//! Bad requests get the table's status and a `{"error", "code"}` body, never a 500.

use roost_tests::{Backend, TestServer, each_backend};
use serde_json::Value;

each_backend!(
    malformed_version_bodies_are_400,
    other_content_types_are_415,
    huge_bodies_are_413,
    unknown_paths_and_methods
);

async fn error_body(resp: reqwest::Response, status: u16, code: &str) {
    assert_eq!(resp.status(), status);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], code, "{body}");
    assert!(!body["error"].as_str().unwrap().is_empty(), "{body}");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
}

fn post_json(server: &TestServer, path: &str, body: &'static str) -> reqwest::RequestBuilder {
    server.http.post(server.url(path)).header("content-type", "application/json").body(body)
}

async fn malformed_version_bodies_are_400(backend: Backend) {
    let server = TestServer::start(backend).await;
    for body in ["{", "{\"unexpected\": true}", "[]", "\"{}\"", "null", "{}}"] {
        let resp = post_json(&server, "/api/version", body).send().await.unwrap();
        error_body(resp, 400, "invalid_argument").await;
    }
    // An empty body counts as `{}`.
    let resp = post_json(&server, "/api/version", "").send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

async fn other_content_types_are_415(backend: Backend) {
    let server = TestServer::start(backend).await;
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "application/x-protobuf"] {
        let resp = server
            .http
            .post(server.url("/api/version"))
            .header("content-type", content_type)
            .body("{}")
            .send()
            .await
            .unwrap();
        error_body(resp, 415, "unsupported_media_type").await;
    }
}

async fn huge_bodies_are_413(backend: Backend) {
    let server = TestServer::start(backend).await;
    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(server.config.gateway.max_json_body_bytes));
    let resp = server
        .http
        .post(server.url("/api/version"))
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    error_body(resp, 413, "payload_too_large").await;
}

async fn unknown_paths_and_methods(backend: Backend) {
    let server = TestServer::start(backend).await;
    let resp = server.http.get(server.url("/api/no/such/thing")).send().await.unwrap();
    error_body(resp, 404, "not_found").await;
    let resp = server.http.delete(server.url("/api/version")).send().await.unwrap();
    error_body(resp, 405, "method_not_allowed").await;
    let resp = server.http.post(server.url("/healthz")).send().await.unwrap();
    error_body(resp, 405, "method_not_allowed").await;
}
