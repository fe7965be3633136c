//! The web app in a real browser (headless Chromium through chromedriver), the way a new
//! user meets it: sign up; make an API key on /developers, see it once, use it over REST,
//! reload and see it masked; create an agent and message it from its page; top up through
//! the (fake) Stripe Checkout and its signed webhook; revoke the key (401 at once); sign
//! out; and a colleague's invite link. Screenshots land in `target/screenshots/app-*.png`.
//!
//! SQLite only: the same flows run over HTTP on both backends in the sibling modules.

use std::time::Duration;

use fantoccini::Locator;
use reqwest::StatusCode;
use roost_tests::{
    Backend, TestServer,
    browser::Browser,
    fake_telegram::FakeTelegram,
    stripe::{FakeStripe, WEBHOOK_SECRET},
};

use super::PASSWORD;

async fn fill(browser: &Browser, css: &str, value: &str) {
    let field = browser.client.wait().for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
    field.clear().await.unwrap();
    field.send_keys(value).await.unwrap();
}

async fn click(browser: &Browser, css: &str) {
    let button = browser.client.wait().for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
    button.click().await.unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

async fn path(browser: &Browser) -> String {
    browser.client.current_url().await.unwrap().path().to_owned()
}

async fn path_and_query(browser: &Browser) -> String {
    let url = browser.client.current_url().await.unwrap();
    format!("{}?{}", url.path(), url.query().unwrap_or_default())
}

async fn wait_for(browser: &Browser, needle: &str) {
    if let Err(seen) = browser.wait_for_text(needle, Duration::from_secs(15)).await {
        panic!("waiting for {needle:?} on {}; the page says:\n{seen}", path(browser).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_user_signs_up_makes_a_key_runs_an_agent_and_tops_up() {
    if Browser::skipped() {
        return;
    }
    let stripe = FakeStripe::start().await;
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.webapp.signup_open = true;
        stripe.configure(c);
    })
    .await;
    let browser = Browser::start().await;

    // Sign up.
    browser.open(&server.url("/signup")).await;
    fill(&browser, "#email", "ada@example.com").await;
    fill(&browser, "#password", PASSWORD).await;
    click(&browser, "main form button[type=submit]").await;
    wait_for(&browser, "Your agents").await;
    assert_eq!(path(&browser).await, "/");

    // A key, shown once, works over REST at once; after a reload it is masked.
    click(&browser, "nav a[href='/developers']").await;
    wait_for(&browser, "Create a key").await;
    fill(&browser, "input[name=name]", "laptop").await;
    click(&browser, "form[action='/developers/keys'] button").await;
    wait_for(&browser, "Copy it now").await;
    let secret = browser.text_of("#new-key").await;
    assert!(secret.starts_with("rsk_"), "{secret}");
    browser.screenshot("app-developers-new-key").await;
    let rest = server.http.get(server.url("/api/account")).bearer_auth(&secret).send().await.unwrap();
    assert_eq!(rest.status(), StatusCode::OK);
    browser.open(&server.url("/developers")).await;
    let text = browser.main_text().await;
    assert!(!text.contains(&secret), "the key is never shown again");
    assert!(text.contains(&format!("{}…{}", &secret[..12], &secret[40..])), "{text}");

    // An agent, created and messaged from its page.
    click(&browser, "nav a[href='/']").await;
    wait_for(&browser, "Create an agent").await;
    fill(&browser, "#brief", "helper").await;
    click(&browser, "form[action='/instances'] button").await;
    wait_for(&browser, "Chat").await;
    let agent_page = path(&browser).await;
    assert!(agent_page.starts_with("/instances/ins_"), "{agent_page}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while browser.text_of("#status").await != "RUNNING" && browser.text_of("#status").await != "running" {
        assert!(tokio::time::Instant::now() < deadline, "the agent did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    fill(&browser, "#text", "hello from the browser").await;
    click(&browser, "form[action$='/message'] button").await;
    wait_for(&browser, "[helper] hello from the browser").await;
    wait_for(&browser, " in / ").await;
    assert!(path_and_query(&browser).await.contains("?turn=turn_"), "the page shows the finished turn");
    browser.screenshot("app-instance-chat").await;
    browser.open(&server.url(&agent_page)).await;
    assert!(browser.text_of("#turns").await.contains("web"), "the turn's source is the web app");
    browser.screenshot("app-instance").await;

    // Top up: Checkout at the fake Stripe, the signed webhook, back to /billing.
    browser.open(&server.url("/billing")).await;
    click(&browser, "input[name=amount_cents][value='1000']").await;
    click(&browser, "form[action='/billing/checkout'] button").await;
    wait_for_heading(&browser, "Fake Stripe Checkout").await;
    let session = stripe.sessions().pop().unwrap();
    let body = stripe.event("evt_browser", "checkout.session.completed", &session, "paid");
    let delivered = server
        .http
        .post(server.url("/api/billing/stripe/webhook"))
        .header("stripe-signature", FakeStripe::signature(&body, FakeStripe::now(), WEBHOOK_SECRET))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(delivered.status(), StatusCode::OK);
    click(&browser, "#return").await;
    wait_for(&browser, "Thank you").await;
    assert_eq!(browser.text_of("#balance").await, "$10.00");
    browser.screenshot("app-billing").await;

    // Revoke the key: asked first, then 401 at once.
    browser.open(&server.url("/developers")).await;
    click(&browser, "a[href^='/developers?revoke=']").await;
    wait_for(&browser, "Everything using it gets 401 at once").await;
    click(&browser, "form[action$='/revoke'] button").await;
    wait_for(&browser, "Revoked").await;
    let rest = server.http.get(server.url("/api/account")).bearer_auth(&secret).send().await.unwrap();
    assert_eq!(rest.status(), StatusCode::UNAUTHORIZED);

    // A colleague's invite link, opened while Ada is still signed in elsewhere.
    let store = server.store().await;
    let account = store.user_by_email("ada@example.com").await.unwrap().unwrap().account_id;
    let invite = store.add_user(&account, "grace@example.com").await.unwrap();

    // Sign out.
    click(&browser, "form.signout button").await;
    wait_for_heading(&browser, "Sign in").await;
    browser.open(&server.url("/developers")).await;
    assert_eq!(path(&browser).await, "/login");
    browser.screenshot("app-login").await;

    browser.open(&server.url(&format!("/invite/{}", invite.token))).await;
    wait_for(&browser, "grace@example.com").await;
    browser.screenshot("app-invite").await;
    fill(&browser, "#password", "grace's long password").await;
    click(&browser, "main form button[type=submit]").await;
    wait_for(&browser, "Your agents").await;
    assert!(browser.text_of("#agents").await.contains("ins_"), "the colleague sees the account's agent");
    browser.screenshot("app-home").await;
    // On a phone.
    browser.resize(390, 844).await;
    browser.open(&server.url(&agent_page)).await;
    browser.screenshot("app-instance-390").await;
    browser.open(&server.url("/developers")).await;
    browser.screenshot("app-developers-390").await;

    // The fake Stripe page has no favicon; roost's pages log nothing.
    let errors: Vec<String> =
        browser.console_errors().await.into_iter().filter(|e| !e.contains(&stripe.base)).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    browser.close().await;
}

/// An owner connects a Telegram bot from the agent's page, sees a stranger's chat wait for
/// approval there, approves the code the stranger got, and sees the bot on the dashboard's
/// channels page. Screenshots: `app-instance-telegram` (and `-390`, a phone's width),
/// `dashboard-channels`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_connects_a_bot_and_approves_a_chat() {
    if Browser::skipped() {
        return;
    }
    let fake = FakeTelegram::start().await;
    let token = fake.bot(9001, "roost_helper_bot");
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.webapp.signup_open = true;
        c.hosting.telegram_api_base = fake.base.clone();
    })
    .await;
    let browser = Browser::start().await;
    browser.open(&server.url("/signup")).await;
    fill(&browser, "#email", "grace@example.com").await;
    fill(&browser, "#password", PASSWORD).await;
    click(&browser, "main form button[type=submit]").await;
    wait_for(&browser, "Create an agent").await;
    fill(&browser, "#brief", "helper").await;
    click(&browser, "form[action='/instances'] button").await;
    wait_for(&browser, "No bot connected").await;
    let agent_page = path(&browser).await;

    fill(&browser, "#MESSAGING_BOT_TOKEN", &token).await;
    fill(&browser, "#MESSAGING_ALLOWED_CHAT_IDS", "1001").await;
    click(&browser, "form[action$='/config'] button").await;
    wait_for(&browser, "@roost_helper_bot").await;
    fake.say(&token, 1001, "hello bot");
    fake.say(&token, 2002, "may I?");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let asked = loop {
        if let Some(reply) = fake.messages_to(2002).pop() {
            break reply;
        }
        assert!(tokio::time::Instant::now() < deadline, "no pairing reply");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let code = asked.split_whitespace().find(|w| w.len() == 9 && w.as_bytes()[4] == b'-').expect("a code").to_owned();
    browser.open(&server.url(&agent_page)).await;
    wait_for(&browser, "telegram chat 1001").await;
    assert!(browser.text_of("#pairings").await.contains("2002"));
    assert!(!browser.main_text().await.contains(&code), "codes are never shown");
    browser.resize(1280, 1500).await;
    browser.client.execute("document.getElementById('telegram').scrollIntoView()", vec![]).await.unwrap();
    browser.screenshot("app-instance-telegram").await;
    browser.resize(390, 1400).await;
    browser.client.execute("document.getElementById('telegram').scrollIntoView()", vec![]).await.unwrap();
    browser.screenshot("app-instance-telegram-390").await;
    browser.resize(1280, 1500).await;
    fill(&browser, "#code", &code).await;
    click(&browser, "form[action$='/pair'] button").await;
    wait_for(&browser, "Chat 2002 may now talk to this agent.").await;

    browser.resize(1280, 800).await;
    browser.open(&server.url("/dashboard/channels")).await;
    wait_for(&browser, "Telegram bots").await;
    assert!(browser.text_of("#bots").await.contains("@roost_helper_bot"));
    browser.screenshot("dashboard-channels").await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "{errors:#?}");
    browser.close().await;
}

/// Waits for an `<h1>` with this text (pages without `<main>`, such as the fake Stripe).
async fn wait_for_heading(browser: &Browser, heading: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(h1) = browser.client.find(Locator::Css("h1")).await
            && h1.text().await.is_ok_and(|t| t == heading)
        {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "no heading {heading:?} on {}", path(browser).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The chat streams: text shows while the turn still runs, then the finished turn shows
/// with its reply rendered from markdown (a `<script>` in it stays text), its exact cost,
/// tokens and time. (Without script the same form waits: `webapp::accounts` posts it.)
/// Screenshots: `app-chat-streaming`, `app-chat-markdown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_streams_the_reply_and_renders_it_safely() {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start_with(Backend::Sqlite, |c| c.webapp.signup_open = true).await;
    let browser = Browser::start().await;
    signed_up_with_agent(&browser, &server, "lin@example.com", "example", "Streamer").await;

    // The runtime writes "[Streamer] " at once, then sleeps 3 s: the text is on the page
    // while the turn runs, before the page moves to the finished turn.
    fill(&browser, "#text", "sleep:3000 **bold** and <script>window.pwned=1</script>").await;
    click(&browser, "form[action$='/message'] button").await;
    let streaming = browser.client.wait().for_element(Locator::Css("#conversation .streaming")).await.unwrap();
    assert_eq!(streaming.text().await.unwrap().trim(), "[Streamer]");
    assert!(!path_and_query(&browser).await.contains("turn="), "still streaming");
    browser.screenshot("app-chat-streaming").await;

    // Done: the reply rendered, nothing of it run.
    wait_for(&browser, "in / ").await;
    assert!(path_and_query(&browser).await.contains("?turn=turn_"));
    let strong = browser.text_of("#conversation .markdown strong").await;
    assert_eq!(strong, "bold");
    let reply = browser.text_of("#conversation .msg.assistant .markdown").await;
    assert!(reply.contains("<script>window.pwned=1</script>"), "the script is text: {reply}");
    let pwned = browser.client.execute("return window.pwned === undefined;", vec![]).await.unwrap();
    assert_eq!(pwned, serde_json::Value::Bool(true), "the reply's script never ran");
    let meta = browser.text_of("#conversation .msg.assistant .meta").await;
    assert!(meta.starts_with('$') && meta.contains(" in / ") && meta.contains(" s"), "{meta}");
    browser.screenshot("app-chat-markdown").await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "{errors:#?}");
    browser.close().await;
}

/// The agent's files in the web app: the agent page's card lists the memory files first,
/// a markdown file renders (its script as text), a folder lists, and a download is the
/// file's bytes; at 390 px and in the dark theme too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_files_show_memory_first_and_render_safely() {
    if Browser::skipped() {
        return;
    }
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.webapp.signup_open = true;
        c.hosting.catalogue = roost_server::runtimes::Catalogue::from_toml(&format!(
            "{}\n{}",
            crate::agents::TEST_CATALOGUE,
            crate::agents::sandbox::hostile("hostile", "")
        ))
        .expect("catalogue");
    })
    .await;
    let browser = Browser::start().await;
    signed_up_with_agent(&browser, &server, "fay@example.com", "hostile", "Keeper").await;
    let store = server.store().await;
    let account = store.user_by_email("fay@example.com").await.unwrap().unwrap().account_id;
    store.add_credits(&account, 1_000).await.unwrap();
    let agent_page = path(&browser).await;
    fill(&browser, "#text", r#"{"files": true}"#).await;
    click(&browser, "form[action$='/message'] button").await;
    wait_for(&browser, "in / ").await;

    // The card: memory files first, then the workspace's top folder.
    browser.open(&server.url(&format!("{agent_page}#files"))).await;
    let memory = browser.text_of("#files table#memory").await;
    let order: Vec<usize> =
        ["SOUL.md", "MEMORY.md", ".hermes/memories/USER.md"].iter().map(|f| memory.find(f).expect(f)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{memory}");
    let workspace = browser.text_of("#files table#workspace").await;
    assert!(workspace.contains("notes/") && workspace.contains("passwd (link)"), "{workspace}");
    browser.screenshot("app-agent-files-card").await;

    // A markdown file renders; its script is text and never runs.
    click(&browser, "#files table#memory a[href$='/files/SOUL.md']").await;
    wait_for(&browser, "Download").await;
    assert_eq!(browser.text_of("#content strong").await, "hostile");
    browser.open(&server.url(&format!("{agent_page}/files?path=notes"))).await;
    click(&browser, "table#files a[href$='/files/notes/plan.md']").await;
    wait_for(&browser, "Download").await;
    assert!(browser.text_of("#content").await.contains("<script>alert(1)</script>"));
    let crumbs = browser.text_of(".crumbs").await;
    assert_eq!(crumbs, "workspace / notes");
    browser.screenshot("app-agent-file").await;

    // The download is the bytes, for the signed-in owner only.
    let cookies = browser.client.get_all_cookies().await.unwrap();
    let session = cookies.iter().find(|c| c.name() == "roost_session").expect("session cookie");
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let url = server.url(&format!("{agent_page}/files/MEMORY.md?download=1"));
    let owner = http.get(&url).header("cookie", format!("roost_session={}", session.value())).send().await.unwrap();
    assert_eq!(owner.status(), StatusCode::OK);
    assert_eq!(owner.text().await.unwrap(), "- the user likes tea");
    let stranger = http.get(&url).send().await.unwrap();
    assert_eq!(stranger.status(), StatusCode::SEE_OTHER, "to the sign-in");
    assert!(!stranger.text().await.unwrap().contains("tea"));

    // A link is listed, never opened; a missing file is the app's 404.
    browser.open(&server.url(&format!("{agent_page}/files/passwd"))).await;
    let refused = browser.main_text().await;
    assert!(refused.contains("symbolic link") && !refused.contains("root:x:0:0"), "{refused}");

    // Narrow: no sideways scroll.
    browser.resize(390, 844).await;
    browser.open(&server.url(&format!("{agent_page}/files?path=.hermes%2Fmemories"))).await;
    let overflow = browser
        .client
        .execute("return document.documentElement.scrollWidth - document.documentElement.clientWidth;", vec![])
        .await
        .unwrap();
    assert_eq!(overflow, serde_json::json!(0), "no sideways scroll at 390 px");
    browser.screenshot("app-agent-files-390").await;
    // The refused link's page answered 400, as it should; nothing else went wrong.
    let errors: Vec<String> =
        browser.console_errors().await.into_iter().filter(|e| !e.contains("/files/passwd - ")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    browser.close().await;

    // The same pages in the dark theme.
    let dark = Browser::start_dark().await;
    dark.open(&server.url("/login")).await;
    fill(&dark, "#email", "fay@example.com").await;
    fill(&dark, "#password", PASSWORD).await;
    click(&dark, "main form button[type=submit]").await;
    wait_for(&dark, "Your agents").await;
    dark.screenshot("app-home-dark").await;
    dark.open(&server.url(&agent_page)).await;
    wait_for(&dark, "Memory").await;
    dark.screenshot("app-instance-dark").await;
    dark.open(&server.url(&format!("{agent_page}/files/SOUL.md"))).await;
    wait_for(&dark, "Download").await;
    dark.screenshot("app-agent-file-dark").await;
    dark.close().await;
}

/// Signs `email` up in `browser`, creates an agent of `runtime` with `brief` from the home
/// page's form, and waits on its page until it runs.
async fn signed_up_with_agent(browser: &Browser, server: &TestServer, email: &str, runtime: &str, brief: &str) {
    browser.open(&server.url("/signup")).await;
    fill(browser, "#email", email).await;
    fill(browser, "#password", PASSWORD).await;
    click(browser, "main form button[type=submit]").await;
    wait_for(browser, "Create an agent").await;
    let option = format!("#runtime option[value='{runtime}']");
    browser.client.find(Locator::Css(&option)).await.expect("the runtime is offered").click().await.unwrap();
    fill(browser, "#brief", brief).await;
    click(browser, "form[action='/instances'] button").await;
    wait_for(browser, "Chat").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while browser.text_of("#status").await.to_lowercase() != "running" {
        assert!(tokio::time::Instant::now() < deadline, "the agent did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
