//! `/billing` and the Stripe webhook: a top-up is a Checkout Session at the (fake) Stripe,
//! credited only by a verified event, once per event and per session, even when deliveries
//! race; forged, stale and unsigned deliveries are 400 and change nothing.

use reqwest::StatusCode;
use roost_tests::{
    Backend, TestServer, each_backend,
    pages::location,
    stripe::{FakeStripe, Session, WEBHOOK_SECRET},
};
use serde_json::{Value, json};

use super::{account_id, signed_up};

async fn deliver(server: &TestServer, body: &[u8], signature: Option<String>) -> (StatusCode, Value) {
    let mut request =
        server.http.post(server.url("/api/billing/stripe/webhook")).header("content-type", "application/json");
    if let Some(signature) = signature {
        request = request.header("stripe-signature", signature);
    }
    let response = request.body(body.to_vec()).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or_default())
}

async fn signed(server: &TestServer, body: &[u8]) -> (StatusCode, Value) {
    deliver(server, body, Some(FakeStripe::signature(body, FakeStripe::now(), WEBHOOK_SECRET))).await
}

async fn balance(server: &TestServer, account: &str) -> i64 {
    let rows = server
        .sql(&format!("SELECT balance_nanocents / 1000000000 FROM accounts WHERE id = '{account}'"))
        .await
        .unwrap();
    rows[0]
}

async fn ledger_sum(server: &TestServer, account: &str) -> i64 {
    let rows = server
        .sql(&format!(
            "SELECT CAST(COALESCE(SUM(amount_nanocents), 0) / 1000000000 AS BIGINT) FROM ledger WHERE account_id = '{account}'"
        ))
        .await
        .unwrap();
    rows[0]
}

async fn top_ups_are_credited_once_by_signed_webhooks(backend: Backend) {
    let stripe = FakeStripe::start().await;
    let server = TestServer::start_with(backend, |c| {
        c.webapp.signup_open = true;
        stripe.configure(c);
    })
    .await;
    let mut ada = signed_up(&server, "ada@example.com").await;
    let account = account_id(&mut ada).await;
    let page = ada.get("/billing").await;
    assert_eq!(page.attrs("input[name=amount_cents]", "value"), ["500", "1000", "2500", "5000"]);
    let not_offered = ada.post_form("/billing/checkout", &[("amount_cents", "777")]).await;
    assert_eq!(not_offered.status(), StatusCode::BAD_REQUEST);
    assert!(stripe.sessions().is_empty());

    let out = ada.post_form("/billing/checkout", &[("amount_cents", "1000")]).await;
    let session: Session = stripe.sessions().pop().unwrap();
    assert_eq!(location(&out), session.url, "the browser is sent to Stripe's page");
    assert_eq!(session.field("mode"), "payment");
    assert_eq!(session.field("client_reference_id"), account);
    assert_eq!(session.field("line_items[0][price_data][unit_amount]"), "1000");
    assert_eq!(session.field("success_url"), server.url("/billing?topup=success"));
    assert_eq!(session.field("cancel_url"), server.url("/billing?topup=cancelled"));
    assert_eq!(balance(&server, &account).await, 0, "nothing is credited on the way to Stripe");

    let paid = stripe.event("evt_1", "checkout.session.completed", &session, "paid");
    // Forged (another secret), stale (301 s old), unsigned, or signed for other bytes: 400.
    let now = FakeStripe::now();
    for signature in [
        Some(FakeStripe::signature(&paid, now, "whsec_someone_else")),
        Some(FakeStripe::signature(&paid, now - 301, WEBHOOK_SECRET)),
        Some(FakeStripe::signature(b"{}", now, WEBHOOK_SECRET)),
        Some(format!("t={now}")),
        None,
    ] {
        let (status, body) = deliver(&server, &paid, signature.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{signature:?}");
        assert_eq!(body["code"], "invalid_argument");
    }
    assert_eq!(balance(&server, &account).await, 0);

    // Completed but not yet paid (an async method): nothing yet.
    let (status, body) =
        signed(&server, &stripe.event("evt_0", "checkout.session.completed", &session, "unpaid")).await;
    assert_eq!((status, body["credited_cents"].as_i64()), (StatusCode::OK, Some(0)));
    // Paid: credited once; the replay, and another event for the same session, credit nothing.
    let (status, body) = signed(&server, &paid).await;
    assert_eq!((status, body["credited_cents"].as_i64()), (StatusCode::OK, Some(1000)), "{body}");
    let (status, body) = signed(&server, &paid).await;
    assert_eq!((status, body["credited_cents"].as_i64()), (StatusCode::OK, Some(0)));
    let late = stripe.event("evt_2", "checkout.session.async_payment_succeeded", &session, "paid");
    assert_eq!(signed(&server, &late).await.1["credited_cents"].as_i64(), Some(0));
    assert_eq!(balance(&server, &account).await, 1000);
    let page = ada.get("/billing?topup=success").await;
    assert_eq!(page.texts("#balance"), ["$10.00"]);
    assert!(page.texts("td").iter().any(|t| t == "top_up"), "the ledger shows the top-up");

    // Racing deliveries of one session (the same event and new ones): one credit.
    ada.post_form("/billing/checkout", &[("amount_cents", "500")]).await;
    let second = stripe.sessions().pop().unwrap();
    let mut deliveries = Vec::new();
    for n in 0..6 {
        let id = if n % 2 == 0 { "evt_race".to_owned() } else { format!("evt_race_{n}") };
        let body = stripe.event(&id, "checkout.session.completed", &second, "paid");
        let server = &server;
        deliveries.push(async move { signed(server, &body).await.1["credited_cents"].as_i64().unwrap_or(-1) });
    }
    let credited: i64 = futures::future::join_all(deliveries).await.into_iter().sum();
    assert_eq!(credited, 500);
    assert_eq!(balance(&server, &account).await, 1500);
    assert_eq!(ledger_sum(&server, &account).await, 1500, "the ledger adds up to the balance");
    // The store refuses a second top-up credit by itself.
    let top_up = server
        .sql(&format!("SELECT COUNT(*) FROM ledger WHERE account_id = '{account}' AND kind = 'top_up'"))
        .await
        .unwrap();
    assert_eq!(top_up, [2]);
    let twice = server
        .sql(&format!(
            "INSERT INTO ledger (id, account_id, kind, amount_nanocents, balance_after_nanocents, description, created_at, top_up_id) \
             SELECT 'chg_dup', account_id, 'top_up', 1, 0, 'dup', 0, top_up_id FROM ledger WHERE account_id = '{account}' AND kind = 'top_up' LIMIT 1"
        ))
        .await;
    assert!(twice.is_err(), "a second credit of one top-up violates the store's unique index");

    // A signed event whose amount would overflow the balance (or is past 64 bits): 400,
    // nothing credited or recorded, and the top-up still takes its real payment.
    ada.post_form("/billing/checkout", &[("amount_cents", "500")]).await;
    let third = stripe.sessions().pop().unwrap();
    for (n, amount) in [json!(i64::MAX), json!(1e30), json!(100_000_001)].into_iter().enumerate() {
        let mut event: Value = serde_json::from_slice(&stripe.event(
            &format!("evt_huge_{n}"),
            "checkout.session.completed",
            &third,
            "paid",
        ))
        .unwrap();
        event["data"]["object"]["amount_total"] = amount.clone();
        let (status, body) = signed(&server, &serde_json::to_vec(&event).unwrap()).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_argument")),
            "{amount}: {body}"
        );
    }
    assert_eq!(balance(&server, &account).await, 1500);
    let real = stripe.event("evt_real", "checkout.session.completed", &third, "paid");
    assert_eq!(signed(&server, &real).await.1["credited_cents"].as_i64(), Some(500));
    assert_eq!(ledger_sum(&server, &account).await, 2000);
}

async fn without_stripe_the_operator_tops_up(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    let mut ada = signed_up(&server, "ada@example.com").await;
    let account = account_id(&mut ada).await;
    let page = ada.get("/billing").await;
    assert!(page.main_text().contains(&format!("roost credits add --account {account}")), "{}", page.main_text());
    assert!(page.attrs("input[name=amount_cents]", "value").is_empty());
    let out = ada.post_form("/billing/checkout", &[("amount_cents", "500")]).await;
    assert_eq!(out.status(), StatusCode::NOT_FOUND);
    let (status, body) = signed(&server, b"{\"id\":\"evt_1\",\"type\":\"checkout.session.completed\"}").await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
}

each_backend!(top_ups_are_credited_once_by_signed_webhooks, without_stripe_the_operator_tops_up);
