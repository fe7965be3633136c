//! Dashboard access: loopback-only without `SERVICE_API_TOKENS`, bearer tokens with it, and
//! the origin check on mutating calls, over REST and gRPC. The policy never reads the
//! store, so these run on SQLite only.

use roost_proto::v1::{ListSessionsRequest, query_service_client::QueryServiceClient};
use roost_tests::{Backend, Reply, SseClient, TestServer};
use serde_json::json;

fn with_tokens(tokens: &[&str]) -> impl FnOnce(&mut roost_server::ServeConfig) {
    let tokens: Vec<String> = tokens.iter().map(|t| (*t).to_owned()).collect();
    move |config| config.access.api_tokens = tokens
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_only_loopback_peers_reach_the_dashboard() {
    let server = TestServer::start_public(Backend::Sqlite, |_| {}).await;
    let http = &server.http;
    Reply::of(http.get(server.url("/api/local/sessions"))).await.ok();
    let remote = Reply::of(http.get(server.public_url("/api/local/sessions"))).await;
    remote.err(401, "unauthenticated");
    assert!(remote.body["error"].as_str().unwrap().contains("SERVICE_API_TOKENS"), "{}", remote.body);
    // Refused ingest stores nothing.
    Reply::of(http.post(server.public_url("/api/v1/runs")).json(&json!({"runtime": "r"})))
        .await
        .err(401, "unauthenticated");
    let runs = Reply::of(http.post(server.url("/api/local/query")).json(&json!({"shape": "runs"}))).await.ok();
    assert_eq!(runs["count"], 0, "{runs}");
    // Open and self-authenticating routes are not the dashboard's to refuse.
    Reply::of(http.get(server.public_url("/healthz"))).await.ok();
    Reply::of(http.get(server.public_url("/api/instances"))).await.err(401, "unauthenticated");
    let account = server.account(0).await;
    Reply::of(http.get(server.public_url("/api/instances")).bearer_auth(&account.key)).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_every_dashboard_call_needs_one() {
    let server = TestServer::start_public(Backend::Sqlite, with_tokens(&["tok-a", "tok-b"])).await;
    let http = &server.http;
    Reply::of(http.get(server.url("/api/local/sessions"))).await.err(401, "unauthenticated");
    Reply::of(http.get(server.url("/api/local/sessions")).bearer_auth("nope")).await.err(401, "unauthenticated");
    Reply::of(http.get(server.url("/api/local/sessions")).bearer_auth("tok-b")).await.ok();
    Reply::of(http.get(server.public_url("/api/local/sessions")).bearer_auth("tok-a")).await.ok();
    // ?token= is for the SSE paths only (EventSource cannot send headers).
    Reply::of(http.get(server.url("/api/local/sessions?token=tok-a"))).await.err(401, "unauthenticated");
    SseClient::open(http.get(server.public_url("/api/brain-stream?token=tok-a"))).await.unwrap();
    let (status, body) = SseClient::open(http.get(server.url("/api/brain-stream?token=wrong"))).await.unwrap_err();
    assert_eq!((status, body["code"].as_str()), (401, Some("unauthenticated")), "{body}");
    Reply::of(http.get(server.url("/healthz"))).await.ok();

    // gRPC: the same rule, as a gRPC status.
    let mut query = QueryServiceClient::new(server.channel().await);
    let refused = query.list_sessions(ListSessionsRequest { limit: 5 }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let mut request = tonic::Request::new(ListSessionsRequest { limit: 5 });
    request.metadata_mut().insert("authorization", "Bearer tok-a".parse().unwrap());
    query.list_sessions(request).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_calls_from_a_foreign_origin_are_403_and_change_nothing() {
    let server = TestServer::start(Backend::Sqlite).await;
    let http = &server.http;
    let own = format!("http://{}", server.addr);
    let create = || http.post(server.url("/api/v1/runs")).json(&json!({"runtime": "r"}));
    Reply::of(create().header("origin", "https://evil.example")).await.err(403, "cross_origin");
    Reply::of(create().header("referer", "https://evil.example/page")).await.err(403, "cross_origin");
    Reply::of(create().header("origin", "null")).await.err(403, "cross_origin");
    let runs = Reply::of(http.post(server.url("/api/local/query")).json(&json!({"shape": "runs"}))).await.ok();
    assert_eq!(runs["count"], 0, "{runs}");

    Reply::of(create().header("origin", own.as_str())).await.ok();
    Reply::of(create().header("referer", format!("{own}/dashboard"))).await.ok();
    Reply::of(create()).await.ok();
    // Reads are not origin-checked.
    Reply::of(http.get(server.url("/api/local/sessions")).header("origin", "https://evil.example")).await.ok();
    let runs = Reply::of(http.post(server.url("/api/local/query")).json(&json!({"shape": "runs"}))).await.ok();
    assert_eq!(runs["count"], 3, "{runs}");
}
