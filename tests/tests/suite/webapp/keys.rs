//! `/developers`: a key made there is shown once, works at once over REST, gRPC and MCP,
//! is listed masked with when it was last used, and stops working at once when revoked.

use std::time::Duration;

use reqwest::{StatusCode, header};
use roost_proto::v1::GetAccountRequest;
use roost_tests::{Backend, TestServer, each_backend, pages::location};

use super::{account_id, signed_up};

/// An MCP `initialize` with `key` as the bearer: the HTTP status.
async fn mcp_status(server: &TestServer, key: &str) -> StatusCode {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    server
        .http
        .post(server.url("/mcp"))
        .bearer_auth(key)
        .header(header::ACCEPT, "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap()
        .status()
}

async fn keys_from_developers_work_at_once_and_revoke_at_once(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    let mut ada = signed_up(&server, "ada@example.com").await;
    let account = account_id(&mut ada).await;
    let empty = ada.get("/developers").await;
    assert!(empty.main_text().contains("No keys yet"));
    let out = ada.post_form("/developers/keys", &[("name", "ci")]).await;
    assert_eq!(out.status(), StatusCode::OK);
    assert_eq!(out.headers()["cache-control"], "no-store");
    let html = out.text().await.unwrap();
    let secret = html.split("<code id=\"new-key\">").nth(1).and_then(|s| s.split('<').next()).unwrap().to_owned();
    assert!(secret.starts_with("rsk_") && secret.len() == 44, "{secret}");

    // REST, gRPC and MCP take it at once.
    let rest = server.http.get(server.url("/api/account")).bearer_auth(&secret).send().await.unwrap();
    assert_eq!(rest.status(), StatusCode::OK);
    assert_eq!(rest.json::<serde_json::Value>().await.unwrap()["id"], account.as_str());
    let mut grpc = server.accounts(&secret).await;
    assert_eq!(grpc.get_account(GetAccountRequest {}).await.unwrap().into_inner().account.unwrap().id, account);
    assert_eq!(mcp_status(&server, &secret).await, StatusCode::OK);

    // Listed masked (prefix and last 4), never in full, with its last use.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let list = loop {
        let list = ada.get("/developers").await;
        if !list.texts("#keys td").iter().any(|t| t == "never") || tokio::time::Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!list.body.contains(&secret), "the secret is never shown again");
    let masked = format!("{}…{}", &secret[..12], &secret[40..]);
    let cells = list.texts("#keys td");
    assert!(cells.contains(&"ci".to_owned()) && cells.contains(&masked), "{cells:?}");
    assert!(!cells.iter().any(|t| t == "never"), "last use is shown: {cells:?}");

    // Revoking asks first, then takes effect over every protocol at once.
    let key_id = list.attrs("#keys a[href^='/developers?revoke=']", "href")[0]
        .trim_start_matches("/developers?revoke=")
        .to_owned();
    let confirm = ada.get(&format!("/developers?revoke={key_id}")).await;
    assert!(confirm.main_text().contains("Everything using it gets 401 at once"));
    let out = ada.post_form(&format!("/developers/keys/{key_id}/revoke"), &[]).await;
    assert!(location(&out).starts_with("/developers?done="));
    let rest = server.http.get(server.url("/api/account")).bearer_auth(&secret).send().await.unwrap();
    assert_eq!(rest.status(), StatusCode::UNAUTHORIZED);
    let err = grpc.get_account(GetAccountRequest {}).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    assert_eq!(mcp_status(&server, &secret).await, StatusCode::UNAUTHORIZED);
    assert!(ada.get("/developers").await.texts("#keys .chip").contains(&"revoked".to_owned()));

    // Another account's key is not this user's to revoke.
    let other = server.account(0).await;
    let other_key = server.store().await.list_keys(&other.id).await.unwrap()[0].id.clone();
    let out = ada.post_form(&format!("/developers/keys/{other_key}/revoke"), &[]).await;
    assert_eq!(out.status(), StatusCode::NOT_FOUND);
    let still = server.http.get(server.url("/api/account")).bearer_auth(&other.key).send().await.unwrap();
    assert_eq!(still.status(), StatusCode::OK);
}

each_backend!(keys_from_developers_work_at_once_and_revoke_at_once);
