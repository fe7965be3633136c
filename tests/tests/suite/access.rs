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

/// A page on a name that rebinds to 127.0.0.1 reaches roost from a loopback peer with its
/// own `Host` and a matching `Origin`: refused everywhere but `/healthz`, until the name is
/// allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_rebinding_hosts_are_refused_everywhere() {
    let server = TestServer::start(Backend::Sqlite).await;
    let http = &server.http;
    let evil = format!("rebind.attacker.example:{}", server.addr.port());
    let origin = format!("http://{evil}");
    let from_evil = |request: reqwest::RequestBuilder| request.header("host", &evil).header("origin", &origin);
    let refused = [
        from_evil(http.post(server.url("/api/local/query")).json(&json!({"shape": "sessions"}))),
        from_evil(http.get(server.url("/api/brain-stream"))),
        from_evil(
            http.post(server.url("/api/alerts"))
                .json(&json!({"kind": "cost_per_day", "threshold": 1, "webhook_url": "http://evil.example/hook"})),
        ),
        from_evil(http.post(server.url("/api/update-check/config")).json(&json!({"auto_update": true}))),
        from_evil(http.post(server.url("/api/control/agents/ins_x/pause"))),
        from_evil(http.get(server.url("/api/instances"))),
        from_evil(http.post(server.url("/mcp")).json(&json!({}))),
    ];
    for request in refused {
        let reply = Reply::of(request).await;
        reply.err(403, "bad_host");
        assert!(
            reply.body["error"].as_str().unwrap().contains("--allowed-hosts rebind.attacker.example"),
            "{}",
            reply.body
        );
    }
    // Pages say the same on an HTML page.
    for page in ["/dashboard", "/", "/login"] {
        let answer = from_evil(http.get(server.url(page))).send().await.unwrap();
        assert_eq!(answer.status(), 403, "{page}");
        assert!(answer.text().await.unwrap().contains("--allowed-hosts rebind.attacker.example"), "{page}");
    }
    Reply::of(from_evil(http.get(server.url("/healthz")))).await.ok();
    let page = Reply::of(http.get(server.url("/api/alerts"))).await.ok();
    assert_eq!(page["rules"], json!([]), "nothing was created");
    let update = Reply::of(http.get(server.url("/api/update-check/config"))).await.ok();
    assert_eq!(update["config"]["auto_update"], json!(null), "{update}");

    // gRPC sends the name as :authority.
    let channel = tonic::transport::Endpoint::from_shared(server.url(""))
        .unwrap()
        .origin(format!("http://{evil}").parse().unwrap())
        .connect()
        .await
        .unwrap();
    let refused = QueryServiceClient::new(channel).list_sessions(ListSessionsRequest { limit: 5 }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");

    // Loopback names and addresses pass as before.
    for host in ["localhost", "127.0.0.1", "app.localhost"] {
        let host = format!("{host}:{}", server.addr.port());
        Reply::of(http.get(server.url("/api/local/sessions")).header("host", host)).await.ok();
    }
    server.stop().await.unwrap();

    // Named by --allowed-hosts (or --public-url), the name is roost's own.
    let server = TestServer::start_with(Backend::Sqlite, |config| {
        config.access.hosts.add(".attacker.example");
        config.access.hosts.add("https://roost.example.org");
    })
    .await;
    for host in ["rebind.attacker.example", "roost.example.org:443"] {
        Reply::of(server.http.get(server.url("/api/local/sessions")).header("host", host)).await.ok();
    }
    Reply::of(server.http.get(server.url("/api/local/sessions")).header("host", "other.example"))
        .await
        .err(403, "bad_host");
    server.stop().await.unwrap();

    // With tokens, no page can use the loopback trust: only /mcp keeps its check.
    let server = TestServer::start_with(Backend::Sqlite, with_tokens(&["tok"])).await;
    let account = server.account(0).await;
    Reply::of(server.http.get(server.url("/api/local/sessions")).header("host", "roost.example").bearer_auth("tok"))
        .await
        .ok();
    Reply::of(server.http.get(server.url("/api/instances")).header("host", "roost.example").bearer_auth(&account.key))
        .await
        .ok();
    Reply::of(
        server.http.post(server.url("/mcp")).header("host", "roost.example").bearer_auth(&account.key).json(&json!({})),
    )
    .await
    .err(403, "bad_host");
}
