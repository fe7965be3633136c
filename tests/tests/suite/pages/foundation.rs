//! What every page shares: the home is a page, assets are hashed and cached, the CSP is
//! strict, the token gate, CSRF on forms.

use reqwest::StatusCode;
use roost_tests::{
    Backend, TestServer, each_backend,
    pages::{Visitor, location},
};

async fn the_home_is_the_overview_page_not_json(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    let page = visitor.get("/").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"), "{csp}");
    assert_eq!(page.texts("h1"), ["Overview"]);
    let backed = page.backed_by();
    assert!(backed.iter().any(|c| c == "GET /api/status"), "{backed:?}");
    assert!(
        backed.iter().any(|c| c.starts_with("POST /api/local/query {\"shape\":\"sessions\",\"args\"")),
        "{backed:?}"
    );
    assert!(page.main_text().contains("No conversation was active in the last hour"), "{}", page.main_text());
    // Every linked asset is served, hashed and immutable.
    let mut linked = page.attrs("link[rel=stylesheet]", "href");
    linked.extend(page.attrs("script[src]", "src"));
    for href in linked {
        let response = server.http.get(server.url(&href)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{href}");
        assert!(response.headers()["cache-control"].to_str().unwrap().contains("immutable"), "{href}");
        assert!(response.headers().contains_key("etag"));
    }
    let icon = server.http.get(server.url("/favicon.ico")).send().await.unwrap();
    assert_eq!(icon.status(), StatusCode::OK);
    assert_eq!(icon.headers()["content-type"], "image/svg+xml");
    let slash = visitor.get("/dashboard/").await;
    assert_eq!(slash.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(slash.headers["location"], "/dashboard");
    // An unknown page is an HTML 404 with the navigation, not JSON.
    let missing = visitor.get("/dashboard/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    // The API keeps its JSON 404.
    let api = server.http.get(server.url("/api/nope")).send().await.unwrap();
    assert_eq!(api.status(), StatusCode::NOT_FOUND);
    assert!(api.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
}

async fn with_tokens_pages_ask_for_one_and_the_cookie_opens_them(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.access.api_tokens = vec!["dash-token-1".into()]).await;
    let mut visitor = Visitor::new(&server);
    let refused = visitor.get("/dashboard/usage?days=7").await;
    assert_eq!(refused.status, StatusCode::SEE_OTHER);
    let to = refused.headers["location"].to_str().unwrap().to_owned();
    assert_eq!(to, "/dashboard/signin?next=%2Fdashboard%2Fusage%3Fdays%3D7");
    let form = visitor.get(&to).await;
    assert_eq!(form.status, StatusCode::OK);
    assert_eq!(form.attrs("input[name=next]", "value"), ["/dashboard/usage?days=7"]);
    // A wrong token: 401, the form again, no cookie.
    let wrong = visitor.post_form("/dashboard/signin", &[("token", "nope"), ("next", "/dashboard")]).await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(!visitor.cookies.iter().any(|(k, _)| k == "roost_token"));
    // Without the CSRF field: refused.
    let forged = server
        .http
        .post(server.url("/dashboard/signin"))
        .header("cookie", format!("roost_csrf={}", visitor.csrf()))
        .form(&[("token", "dash-token-1")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(forged.headers().get("set-cookie").is_none());
    // The right one: the cookie is set (HttpOnly, Strict) and the visitor goes on.
    let right =
        visitor.post_form("/dashboard/signin", &[("token", "dash-token-1"), ("next", "/dashboard/usage?days=7")]).await;
    let set_cookie =
        right.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert!(
        set_cookie.iter().any(|c| c.starts_with("roost_token=dash-token-1")
            && c.contains("HttpOnly")
            && c.contains("SameSite=Strict")),
        "{set_cookie:?}"
    );
    assert_eq!(location(&right), "/dashboard/usage?days=7");
    assert_eq!(visitor.get("/dashboard").await.status, StatusCode::OK);
    // The cookie also opens dashboard reads (what a page's script fetches) but never a
    // mutating API call, which has no CSRF defence of its own.
    let cookie = visitor.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
    let read = server.http.get(server.url("/api/usage")).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    let write = server
        .http
        .post(server.url("/api/update-check/check-now"))
        .header("cookie", &cookie)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), StatusCode::UNAUTHORIZED);
    // A bearer header works for pages too.
    let bearer = server.http.get(server.url("/dashboard")).bearer_auth("dash-token-1").send().await.unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
    // Sign-out clears the cookie.
    let out = visitor.post_form("/dashboard/signout", &[]).await;
    assert_eq!(location(&out), "/dashboard/signin");
    assert_eq!(visitor.get("/dashboard").await.status, StatusCode::SEE_OTHER);
}

/// Guessing dashboard tokens is braked like guessing passwords: ten wrong ones from an
/// address close the form to it, the right token included.
async fn guessing_dashboard_tokens_is_braked(backend: Backend) {
    let server = TestServer::start_with(backend, |c| c.access.api_tokens = vec!["dash-token-1".into()]).await;
    let mut visitor = Visitor::new(&server);
    visitor.get("/dashboard/signin").await;
    for n in 0..10 {
        let wrong = visitor.post_form("/dashboard/signin", &[("token", &format!("guess-{n}"))]).await;
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    }
    let braked = visitor.post_form("/dashboard/signin", &[("token", "dash-token-1")]).await;
    assert_eq!(braked.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(braked.text().await.unwrap().contains("too many failed sign-ins"));
    assert!(!visitor.cookies.iter().any(|(k, _)| k == "roost_token"));
}

async fn without_tokens_remote_visitors_get_a_page_saying_why(backend: Backend) {
    let server = TestServer::start_public(backend, |_| {}).await;
    let response = server.http.get(server.public_url("/dashboard")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let body = response.text().await.unwrap();
    assert!(body.contains("SERVICE_API_TOKENS"), "{body}");
}

async fn forms_without_the_csrf_field_or_from_another_origin_change_nothing(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut visitor = Visitor::new(&server);
    visitor.get("/dashboard").await;
    // Dismissing works from the page...
    let ok = visitor.post_form("/dashboard/dismiss", &[("version", "9.9.9")]).await;
    assert!(location(&ok).starts_with("/dashboard?done="));
    let status = server.http.get(server.url("/api/update-check/config")).send().await.unwrap();
    assert_eq!(status.status(), StatusCode::OK);
    // ...not without the field,
    let csrf_cookie = format!("roost_csrf={}", visitor.csrf());
    let bare = server
        .http
        .post(server.url("/dashboard/dismiss"))
        .header("cookie", &csrf_cookie)
        .form(&[("version", "9.9.8")])
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), StatusCode::FORBIDDEN);
    // ...nor from another site's page.
    let foreign = server
        .http
        .post(server.url("/dashboard/dismiss"))
        .header("cookie", &csrf_cookie)
        .header("origin", "https://evil.example")
        .form(&[("version", "9.9.7"), ("csrf", &visitor.csrf())])
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
    let history = server.http.get(server.url("/api/update-check/status")).send().await.unwrap();
    let text = history.text().await.unwrap();
    assert!(!text.contains("9.9.8") && !text.contains("9.9.7"), "{text}");
}

each_backend!(
    the_home_is_the_overview_page_not_json,
    with_tokens_pages_ask_for_one_and_the_cookie_opens_them,
    guessing_dashboard_tokens_is_braked,
    without_tokens_remote_visitors_get_a_page_saying_why,
    forms_without_the_csrf_field_or_from_another_origin_change_nothing,
);
