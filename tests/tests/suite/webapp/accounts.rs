//! Getting a session: sign-up (open and closed), sign-in and its failures, sign-out,
//! invites; and what a session may reach: only its own account's agents, through forms
//! from this site.

use reqwest::{StatusCode, header};
use roost_tests::{
    Backend, TestServer, each_backend,
    pages::{Visitor, location},
};

use super::{PASSWORD, account_id, signed_up};

async fn signing_up_in_and_out(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    let mut ada = Visitor::new(&server);
    let form = ada.get("/signup").await;
    assert_eq!(form.status, StatusCode::OK);
    assert_eq!(form.attrs("form[action='/signup'] input[name]", "name"), ["csrf", "email", "password", "account_name"]);
    let out = ada.post_form("/signup", &[("email", " Ada@Example.com "), ("password", PASSWORD)]).await;
    let cookie =
        out.headers().get_all(header::SET_COOKIE).iter().map(|v| v.to_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(location(&out), "/");
    let session = cookie.iter().find(|c| c.starts_with("roost_session=rws_")).expect("a session cookie");
    assert!(
        session.contains("HttpOnly") && session.contains("SameSite=Lax") && !session.contains("Secure"),
        "{session}"
    );
    let home = ada.get("/").await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    assert_eq!(home.texts("h1"), ["Your agents"]);
    assert_eq!(home.texts("#balance"), ["$0.00"]);
    assert!(home.body.contains("ada@example.com"), "the header names the user");
    assert!(home.backed_by().is_empty(), "no API-call footer for account holders: {:?}", home.backed_by());
    assert!(!home.body.contains("Backed by"), "{}", home.body);

    // The same email again, in another case: refused, nothing made.
    let mut again = Visitor::new(&server);
    again.get("/signup").await;
    let twice = again.post_form("/signup", &[("email", "ADA@example.com"), ("password", PASSWORD)]).await;
    assert_eq!(twice.status(), StatusCode::CONFLICT);
    assert!(twice.text().await.unwrap().contains("already exists"));
    let short = again.post_form("/signup", &[("email", "bob@example.com"), ("password", "short")]).await;
    assert_eq!(short.status(), StatusCode::BAD_REQUEST);
    assert_eq!(server.sql("SELECT COUNT(*) FROM users").await.unwrap(), [1]);

    // Over https (a proxy says so), the cookie is Secure.
    let mut secure = Visitor::new(&server);
    secure.get("/login").await;
    let csrf = secure.csrf();
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let over_tls = no_redirects
        .post(server.url("/login"))
        .header(header::COOKIE, format!("roost_csrf={csrf}"))
        .header("x-forwarded-proto", "https")
        .form(&[("email", "ada@example.com"), ("password", PASSWORD), ("csrf", &csrf)])
        .send()
        .await
        .unwrap();
    let cookie = over_tls.headers()[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.contains("Secure"), "{cookie}");
    // So is the CSRF cookie of a page served over https.
    let page = no_redirects.get(server.url("/login")).header("x-forwarded-proto", "https").send().await.unwrap();
    let csrf_cookie = page.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(csrf_cookie.starts_with("roost_csrf=") && csrf_cookie.contains("; Secure"), "{csrf_cookie}");

    // Sign out ends the session in the store, not only in the browser.
    let token = ada.cookies.iter().find(|(k, _)| k == "roost_session").unwrap().1.clone();
    let out = ada.post_form("/logout", &[]).await;
    assert_eq!(location(&out), "/login");
    assert!(!ada.cookies.iter().any(|(k, _)| k == "roost_session"));
    let gone = ada.get("/developers").await;
    assert_eq!(gone.status, StatusCode::SEE_OTHER);
    assert_eq!(gone.headers["location"], "/login?next=%2Fdevelopers");
    ada.cookies.push(("roost_session".into(), token));
    assert_eq!(ada.get("/billing").await.status, StatusCode::SEE_OTHER, "a signed-out token opens nothing");

    // Sign in again, landing where the visitor was going.
    let mut back = Visitor::new(&server);
    back.get("/login?next=/developers").await;
    let out = back
        .post_form("/login", &[("email", "ada@example.com"), ("password", PASSWORD), ("next", "/developers")])
        .await;
    assert_eq!(location(&out), "/developers");
    let evil = back
        .post_form("/login", &[("email", "ada@example.com"), ("password", PASSWORD), ("next", "https://evil.example/")])
        .await;
    assert_eq!(location(&evil), "/");
    // Browsers drop tabs and newlines from Location and read `\` as `/`: each of these
    // would have sent the visitor to //evil.example.
    for next in ["/\t/evil.example", "/\n/evil.example", "/\\evil.example", "//evil.example"] {
        let out =
            back.post_form("/login", &[("email", "ada@example.com"), ("password", PASSWORD), ("next", next)]).await;
        assert_eq!(location(&out), "/", "{next:?}");
    }
    let form = back.get("/login?next=/%09/evil.example").await;
    assert_eq!(form.attrs("input[name=next]", "value"), ["/"]);
}

async fn failed_sign_ins_look_alike_and_are_limited(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    signed_up(&server, "ada@example.com").await;
    let mut visitor = Visitor::new(&server);
    visitor.get("/login").await;
    let mut answers = Vec::new();
    for (email, password) in [("ada@example.com", "wrong password!"), ("nobody@example.com", PASSWORD)] {
        let out = visitor.post_form("/login", &[("email", email), ("password", password)]).await;
        assert_eq!(out.status(), StatusCode::UNAUTHORIZED);
        let page = out.text().await.unwrap();
        let alert = page.split("role=\"alert\">").nth(1).and_then(|s| s.split('<').next()).unwrap().to_owned();
        answers.push(alert);
    }
    assert_eq!(answers[0], answers[1], "wrong password and unknown email read the same");
    assert!(answers[0].contains("do not match"), "{}", answers[0]);
    // Ten failures for one email close it for 10 minutes, even to the right password.
    for _ in 0..8 {
        let out = visitor.post_form("/login", &[("email", "ada@example.com"), ("password", "wrong password!")]).await;
        assert_eq!(out.status(), StatusCode::UNAUTHORIZED);
    }
    let limited = visitor.post_form("/login", &[("email", "ada@example.com"), ("password", PASSWORD)]).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(limited.text().await.unwrap().contains("too many failed sign-ins"));
    // The address is over its limit too (10 failures from it): another email is held.
    let other = visitor.post_form("/login", &[("email", "else@example.com"), ("password", PASSWORD)]).await;
    assert_eq!(other.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// Guesses fired together are held to the brake's limit before any is checked: of 99 wrong
/// passwords and the right one sent at once, at most ten reach argon2. Sign-ups from one
/// address are braked the same way.
async fn concurrent_guesses_are_braked_before_they_are_checked(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    signed_up(&server, "ada@example.com").await;
    // Sign-ups first: the failed sign-ins below will close the address to them too.
    let signups = (0..30).map(|n| {
        let mut visitor = Visitor::new(&server);
        async move {
            visitor.get("/signup").await;
            let email = format!("new{n}@example.com");
            visitor.post_form("/signup", &[("email", email.as_str()), ("password", PASSWORD)]).await.status()
        }
    });
    let statuses = futures::future::join_all(signups).await;
    let made = statuses.iter().filter(|s| **s == StatusCode::SEE_OTHER).count();
    assert!(
        statuses.iter().all(|s| *s == StatusCode::SEE_OTHER || *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    assert!((1..30).contains(&made), "some were braked: {statuses:?}");
    assert_eq!(server.sql("SELECT COUNT(*) FROM users").await.unwrap(), [1 + made as i64]);
    let mut visitor = Visitor::new(&server);
    visitor.get("/login").await;
    let attempts = (0..100).map(|n| {
        let mut visitor = visitor.clone();
        async move {
            let password = if n == 57 { PASSWORD } else { "wrong password!" };
            visitor.post_form("/login", &[("email", "ada@example.com"), ("password", password)]).await.status()
        }
    });
    let statuses = futures::future::join_all(attempts).await;
    let count = |status: StatusCode| statuses.iter().filter(|s| **s == status).count();
    let checked = count(StatusCode::UNAUTHORIZED) + count(StatusCode::SEE_OTHER);
    assert!(count(StatusCode::UNAUTHORIZED) <= 10, "{statuses:?}");
    assert!(checked <= 11, "at most the brake's ten (and a slot a success gave back): {statuses:?}");
    assert_eq!(checked + count(StatusCode::TOO_MANY_REQUESTS), 100, "{statuses:?}");
}

async fn closed_sign_up_and_invites(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let closed = visitor.get("/signup").await;
    assert_eq!(closed.status, StatusCode::NOT_FOUND);
    assert!(closed.main_text().contains("Sign-up is closed"));
    let refused = visitor.post_form("/signup", &[("email", "x@example.com"), ("password", PASSWORD)]).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    // Not signed in and not a dashboard caller? `/` sends to sign-in. (Loopback sees the overview.)
    assert_eq!(visitor.get("/").await.texts("h1"), ["Overview"]);

    let store = server.store().await;
    let account = store.create_account("Grace's team", 0).await.unwrap();
    let invite = store.add_user(&account.account.id, "Grace@Example.com").await.unwrap();
    let path = format!("/invite/{}", invite.token);
    let page = visitor.get(&path).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.main_text().contains("grace@example.com") && page.main_text().contains("Grace's team"));
    let short = visitor.post_form(&path, &[("password", "short")]).await;
    assert_eq!(short.status(), StatusCode::BAD_REQUEST);
    let out = visitor.post_form(&path, &[("password", PASSWORD)]).await;
    assert_eq!(location(&out), "/");
    assert_eq!(account_id(&mut visitor).await, account.account.id);
    // The link worked once.
    let used = Visitor::new(&server).get(&path).await;
    assert_eq!(used.status, StatusCode::NOT_FOUND);
    assert!(used.main_text().contains("unknown, used or expired"));
    let mut again = Visitor::new(&server);
    again.get("/login").await;
    let out = again.post_form(&path, &[("password", "another password")]).await;
    assert_eq!(out.status(), StatusCode::NOT_FOUND);
    // And the password it set signs in.
    let out = again.post_form("/login", &[("email", "grace@example.com"), ("password", PASSWORD)]).await;
    assert_eq!(location(&out), "/");
}

async fn a_session_reaches_only_its_own_account_and_only_from_this_site(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    let mut ada = signed_up(&server, "ada@example.com").await;
    let mut bob = signed_up(&server, "bob@example.com").await;
    ada.get("/").await;
    let out = ada
        .post_form(
            "/instances",
            &[("runtime", "echo"), ("name", "Ada's helper"), ("brief", "be brief"), ("model_mode", "managed")],
        )
        .await;
    let path = location(&out);
    let id = path.trim_start_matches("/instances/").split('?').next().unwrap().to_owned();
    assert!(id.starts_with("ins_"), "{path}");
    let page = ada.get(&format!("/instances/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.texts("h1"), [format!("Ada's helper {id}")], "the name, its id beside it");
    assert!(ada.get("/").await.texts("#agents tbody td:first-child").join(" ").contains("Ada's helper"));
    let confirm = ada.get(&format!("/instances/{id}?confirm=destroy")).await;
    assert!(
        confirm.texts("section.banner p")[0].starts_with("Destroy “Ada's helper”? It is gone for good"),
        "the confirmation names the agent: {:?}",
        confirm.texts("section.banner p")
    );
    // Bob sees no such agent, and cannot act on it.
    let page = bob.get(&format!("/instances/{id}")).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    bob.get("/").await;
    let out = bob.post_form(&format!("/instances/{id}/destroy"), &[]).await;
    assert_eq!(out.status(), StatusCode::NOT_FOUND);
    let out = bob.post_form(&format!("/instances/{id}/config"), &[("name", "Bob's now")]).await;
    assert_eq!(out.status(), StatusCode::NOT_FOUND, "another account cannot rename it");
    let kept = format!("SELECT COUNT(*) FROM instances WHERE id = '{id}' AND name = 'Ada''s helper'");
    assert_eq!(server.sql(&kept).await.unwrap(), [1]);
    assert_eq!(
        server
            .sql(&format!("SELECT COUNT(*) FROM instances WHERE id = '{id}' AND destroyed_at IS NULL"))
            .await
            .unwrap(),
        [1]
    );

    // A form from another site changes nothing: by Origin, by Sec-Fetch-Site, or without
    // the CSRF field.
    let cookies = format!(
        "roost_session={}; roost_csrf={}",
        ada.cookies.iter().find(|(k, _)| k == "roost_session").unwrap().1,
        ada.csrf()
    );
    let destroy = server.url(&format!("/instances/{id}/destroy"));
    let csrf = ada.csrf();
    for (name, value) in [("origin", "https://evil.example"), ("sec-fetch-site", "cross-site")] {
        let out = server
            .http
            .post(&destroy)
            .header(header::COOKIE, &cookies)
            .header(name, value)
            .form(&[("csrf", csrf.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(out.status(), StatusCode::FORBIDDEN, "{name}: {value}");
    }
    let no_csrf = server.http.post(&destroy).header(header::COOKIE, &cookies).form(&[("x", "1")]).send().await.unwrap();
    assert_eq!(no_csrf.status(), StatusCode::FORBIDDEN);
    // The CSRF value is bound to the session: a cookie-and-field pair that works for Bob
    // (or any pair planted in Ada's browser) does not pass with Ada's session.
    let ada_session = &ada.cookies.iter().find(|(k, _)| k == "roost_session").unwrap().1;
    let planted = "0123456789abcdef0123456789abcdef";
    for (cookie, field) in [(planted.to_owned(), planted.to_owned()), (planted.to_owned(), bob.csrf())] {
        let out = server
            .http
            .post(&destroy)
            .header(header::COOKIE, format!("roost_session={ada_session}; roost_csrf={cookie}"))
            .header(header::ORIGIN, server.url(""))
            .form(&[("csrf", field.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(out.status(), StatusCode::FORBIDDEN, "{field}");
    }
    let own_form = ada.get(&format!("/instances/{id}")).await;
    assert_eq!(own_form.attrs("input[name=csrf]", "value").first(), Some(&ada.csrf()), "the page's field");
    assert_eq!(
        server
            .sql(&format!("SELECT COUNT(*) FROM instances WHERE id = '{id}' AND destroyed_at IS NULL"))
            .await
            .unwrap(),
        [1]
    );

    // A body over the form limit is 413.
    let huge = "x".repeat(300 * 1024);
    let out = ada.post_form(&format!("/instances/{id}/message"), &[("text", &huge)]).await;
    assert_eq!(out.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

/// `/` is the dashboard's overview for a dashboard caller (loopback here) and the sign-in
/// form for anyone else; a signed-in user gets their home from any address.
async fn the_home_page_depends_on_who_asks(backend: Backend) {
    let server = TestServer::start_public(backend, |c| c.webapp.signup_open = true).await;
    let stranger = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let out = stranger.get(server.public_url("/")).send().await.unwrap();
    assert_eq!(location(&out), "/login");
    let login = stranger.get(server.public_url("/login")).send().await.unwrap();
    assert_eq!(login.status(), StatusCode::OK);
    assert_eq!(Visitor::new(&server).get("/").await.texts("h1"), ["Overview"]);
    let ada = signed_up(&server, "ada@example.com").await;
    let session = ada.cookies.iter().find(|(k, _)| k == "roost_session").unwrap().1.clone();
    let home = stranger
        .get(server.public_url("/"))
        .header(header::COOKIE, format!("roost_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), StatusCode::OK);
    assert!(home.text().await.unwrap().contains("Your agents"));
    // Every web-app form works from another machine too (none is a dashboard route).
    let csrf = ada.csrf();
    let cookies = format!("roost_session={session}; roost_csrf={csrf}");
    for (path, fields) in [
        ("/instances", vec![("runtime", "echo"), ("brief", "remote"), ("csrf", csrf.as_str())]),
        ("/developers/keys", vec![("name", "remote"), ("csrf", csrf.as_str())]),
    ] {
        let out =
            stranger.post(server.public_url(path)).header(header::COOKIE, &cookies).form(&fields).send().await.unwrap();
        assert!(out.status() == StatusCode::SEE_OTHER || out.status() == StatusCode::OK, "{path}: {}", out.status());
    }
    assert_eq!(server.sql("SELECT COUNT(*) FROM instances").await.unwrap(), [1]);
}

/// A form the core refuses answers a page in the web app's own chrome and words: its
/// navigation, the message in dollars as a sentence, no error code, and a real link back
/// to the page the form was on.
async fn a_refused_form_answers_in_the_apps_words(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.webapp.signup_open = true).await;
    let mut ada = signed_up(&server, "ada@example.com").await;
    // No credits: the first priced agent's month is free, a second cannot be paid for.
    let fields = [("runtime", "assistant"), ("brief", "priced"), ("name", "")];
    let first = ada.post_form("/instances", &fields).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    // One deploy settles at a time: wait for the first to boot.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.sql("SELECT COUNT(*) FROM instances WHERE status = 'running'").await.unwrap() != [1] {
        assert!(std::time::Instant::now() < deadline, "the first agent did not boot");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let refused = ada.post_form_from(Some("/?from=home"), "/instances", &fields).await;
    assert_eq!(refused.status(), StatusCode::PAYMENT_REQUIRED);
    let page = roost_tests::pages::Page::of(refused).await;
    assert_eq!(page.attrs("header.top nav", "aria-label"), ["Web app"], "the app's chrome");
    assert_eq!(page.texts("header.top .user"), ["ada@example.com"]);
    let text = page.main_text();
    assert!(text.contains("Nothing was changed") && text.contains("$20.00"), "{text}");
    assert!(!text.contains("insufficient_credits") && !text.contains("cents"), "{text}");
    assert_eq!(page.attrs("a#back", "href"), ["/?from=home"], "back to where the form was");
    assert!(page.backed_by().is_empty(), "no footer for account holders");
    // Without a Referer, back to the user's agents.
    let refused = ada.post_form("/instances", &fields).await;
    let page = roost_tests::pages::Page::of(refused).await;
    assert_eq!(page.attrs("a#back", "href"), ["/"]);
    assert_eq!(page.texts("a#back"), ["Back to your agents"]);
    assert_eq!(server.sql("SELECT COUNT(*) FROM instances").await.unwrap(), [1]);
}

each_backend!(
    a_refused_form_answers_in_the_apps_words,
    the_home_page_depends_on_who_asks,
    signing_up_in_and_out,
    failed_sign_ins_look_alike_and_are_limited,
    concurrent_guesses_are_braked_before_they_are_checked,
    closed_sign_up_and_invites,
    a_session_reaches_only_its_own_account_and_only_from_this_site,
);
