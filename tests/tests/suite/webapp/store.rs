//! What the store guarantees for the web app, on both backends: one user per email (any
//! case), an invite works once and not after it expires, sessions end at sign-out and
//! after 30 idle days, and a Stripe event credits once even when applied concurrently.

use roost_proto::ErrorReason;
use roost_server::billing::top_ups::StripeEvent;
use roost_tests::{Backend, TestServer, each_backend};

async fn users_invites_and_sessions(backend: Backend) {
    let server = TestServer::start(backend).await;
    let store = server.store().await;
    let (user, account) = store.sign_up("Ada@Example.com", "$argon2id$fake", "").await.unwrap();
    assert_eq!(user.email, "ada@example.com");
    assert_eq!((account.name.as_str(), account.balance_nanocents), ("ada@example.com", 0));
    let taken = store.sign_up("ADA@example.com", "$argon2id$fake", "").await.unwrap_err().to_api();
    assert_eq!(taken.reason(), ErrorReason::WrongState);
    assert_eq!(server.sql("SELECT COUNT(*) FROM accounts").await.unwrap(), [1], "the refused sign-up made no account");
    for bad in ["", "no-at-sign", "a@", "@b", "a b@c.d"] {
        assert!(store.sign_up(bad, "x", "").await.is_err(), "{bad:?}");
    }

    let invite = store.add_user(&account.id, "bob@example.com").await.unwrap();
    assert_eq!(store.invite(&invite.token).await.unwrap().email, "bob@example.com");
    let bob = store.accept_invite(&invite.token, "$argon2id$bob").await.unwrap();
    assert_eq!(bob.password_hash.as_deref(), Some("$argon2id$bob"));
    let again = store.accept_invite(&invite.token, "$argon2id$eve").await.unwrap_err().to_api();
    assert_eq!(again.reason(), ErrorReason::NotFound);
    let late = store.add_user(&account.id, "carol@example.com").await.unwrap();
    server.sql("UPDATE invites SET expires_at = 0 WHERE used_at IS NULL").await.unwrap();
    assert_eq!(store.invite(&late.token).await.unwrap_err().to_api().reason(), ErrorReason::NotFound);
    assert!(store.accept_invite(&late.token, "x").await.is_err());
    assert_eq!(server.sql("SELECT COUNT(*) FROM invites").await.unwrap(), [2]);
    assert!(server.sql("SELECT COUNT(*) FROM invites WHERE token_hash LIKE 'rs%'").await.unwrap() == [0]);

    // A reset ends the sessions and the old password at once; its link sets a new one.
    let before = store.create_session(&bob.id).await.unwrap();
    let reset = store.reinvite_user("BOB@example.com").await.unwrap();
    assert!(store.session_user(&before).await.unwrap().is_none(), "the reset signed bob out");
    assert_eq!(store.user_by_email("bob@example.com").await.unwrap().unwrap().password_hash, None, "no old password");
    store.accept_invite(&reset.token, "$argon2id$bob2").await.unwrap();
    assert_eq!(
        store.user_by_email("bob@example.com").await.unwrap().unwrap().password_hash.as_deref(),
        Some("$argon2id$bob2")
    );

    let token = store.create_session(&user.id).await.unwrap();
    assert!(token.starts_with("rws_") && token.len() == 56);
    assert_eq!(store.session_user(&token).await.unwrap().unwrap().id, user.id);
    assert!(store.session_user("rws_unknown").await.unwrap().is_none());
    assert_eq!(
        server.sql("SELECT COUNT(*) FROM web_sessions WHERE token_hash LIKE 'rws_%'").await.unwrap(),
        [0],
        "only hashes are stored"
    );
    assert!(store.delete_session(&token).await.unwrap());
    assert!(store.session_user(&token).await.unwrap().is_none());
    let idle = store.create_session(&user.id).await.unwrap();
    let month_ago = roost_server::time::now_ms() - 31 * 24 * 3600 * 1000;
    server.sql(&format!("UPDATE web_sessions SET last_seen_at = {month_ago}")).await.unwrap();
    assert!(store.session_user(&idle).await.unwrap().is_none(), "30 idle days end a session");
}

async fn a_paid_session_is_credited_once_under_concurrency(backend: Backend) {
    let server = TestServer::start(backend).await;
    let store = server.store().await.clone();
    let account = server.account(0).await;
    let top_up = store.create_top_up(&account.id, 2500).await.unwrap();
    store.set_top_up_session(&top_up, Some("cs_1")).await.unwrap();
    let event = |id: &str| StripeEvent {
        id: id.into(),
        kind: "checkout.session.completed".into(),
        session_id: "cs_1".into(),
        account_id: account.id.clone(),
        top_up_id: top_up.clone(),
        payment_status: "paid".into(),
        amount_total: Some(2500),
        currency: "usd".into(),
    };
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..5 {
        let (store, event) = (store.clone(), event(if n < 3 { "evt_same" } else { "evt_other" }));
        tasks.spawn(async move { store.apply_stripe_event(&event, "usd").await.unwrap() });
    }
    let credited: Vec<_> = tasks.join_all().await.into_iter().flatten().collect();
    assert_eq!(credited.len(), 1, "{credited:?}");
    assert_eq!(credited[0].cents, 2500);
    let balance = store.account(&account.id).await.unwrap().unwrap().balance_nanocents;
    let ledger: i64 = store.account_ledger(&account.id, 100).await.unwrap().iter().map(|e| e.amount_nanocents).sum();
    assert_eq!((balance, ledger), (2_500_000_000_000, 2_500_000_000_000));
    // Another currency, or a session roost never made, credits nothing.
    let other = store.create_top_up(&account.id, 500).await.unwrap();
    store.set_top_up_session(&other, Some("cs_2")).await.unwrap();
    let euro = StripeEvent {
        id: "evt_eur".into(),
        session_id: "cs_2".into(),
        top_up_id: other,
        currency: "eur".into(),
        ..event("x")
    };
    assert!(store.apply_stripe_event(&euro, "usd").await.unwrap().is_none());
    let stranger =
        StripeEvent { id: "evt_x".into(), session_id: "cs_9".into(), top_up_id: String::new(), ..event("x") };
    assert!(store.apply_stripe_event(&stranger, "usd").await.unwrap().is_none());
    assert_eq!(store.account(&account.id).await.unwrap().unwrap().balance_nanocents, 2_500_000_000_000);
}

each_backend!(users_invites_and_sessions, a_paid_session_is_credited_once_under_concurrency);
