//! A real browser for page tests: Debian's headless Chromium driven through its
//! chromedriver by fantoccini (WebDriver over rustls).
//!
//! Each [`Browser`] starts its own chromedriver on a free port with a fresh profile, so
//! tests run in parallel without sharing cookies; dropping it ends the session and kills
//! chromedriver (which ends Chromium). `scripts/test` installs `chromium` and
//! `chromium-driver` when they are missing; a machine without them fails these tests with
//! a message saying so (set `ROOST_SKIP_BROWSER=1` to skip them locally).

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// Where chromedriver is installed by Debian's `chromium-driver`.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A headless Chromium session at 1280×800.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
    driver_url: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Whether browser tests should be skipped on this machine.
    pub fn skipped() -> bool {
        std::env::var_os("ROOST_SKIP_BROWSER").is_some_and(|v| v == "1")
    }

    /// Starts chromedriver and a browser session.
    pub async fn start() -> Self {
        Self::start_in(false).await
    }

    /// Like [`Browser::start`], but the pages see `prefers-color-scheme: dark`.
    pub async fn start_dark() -> Self {
        Self::start_in(true).await
    }

    async fn start_in(dark: bool) -> Self {
        assert!(
            Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists(),
            "browser tests need Debian's chromium and chromium-driver (apt-get install chromium chromium-driver; \
             scripts/test --setup-only does this), or ROOST_SKIP_BROWSER=1 to skip them"
        );
        // Two TLS providers are compiled in (see tests/Cargo.toml): choose one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting chromedriver");
        let driver_url = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut args = vec![
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--window-size=1280,800".into(),
            "--hide-scrollbars".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        if dark {
            // Blink's preferred colour scheme: 0 is dark.
            args.push("--blink-settings=preferredColorScheme=0".into());
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".into(), json!({ "binary": CHROMIUM, "args": args }));
        capabilities.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        let mut last_error = String::new();
        for _ in 0..100 {
            let mut builder = ClientBuilder::rustls().expect("rustls connector");
            builder.capabilities(capabilities.clone());
            match builder.connect(&driver_url).await {
                Ok(client) => {
                    let session = client.session_id().await.ok().flatten().expect("a session id");
                    client.set_window_size(1280, 800).await.expect("window size");
                    return Self { client, driver, driver_url, session, _profile: profile };
                }
                Err(err) => last_error = err.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not start a session: {last_error}");
    }

    /// Opens `url` and waits for the document to be ready.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    /// The text of the first element matching `css`, waiting up to 10 s for it. A page
    /// that is being replaced (a form just submitted) makes the element stale: it is then
    /// found again on the new page.
    pub async fn text_of(&self, css: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found = self.client.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(css)).await;
            let error = match found {
                Ok(element) => match element.text().await {
                    Ok(text) => return text,
                    Err(err) => err,
                },
                Err(err) => err,
            };
            assert!(tokio::time::Instant::now() < deadline, "waiting for {css}: {error}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The visible text of the page's `<main>`.
    pub async fn main_text(&self) -> String {
        self.text_of("main").await
    }

    /// Waits up to `timeout` until the page's `<main>` contains `needle`; the last text
    /// seen otherwise.
    pub async fn wait_for_text(&self, needle: &str, timeout: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let text = self.main_text().await;
            if text.contains(needle) {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(text);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The browser console's entries at SEVERE level since the last call (errors, CSP
    /// violations, failed loads), read from chromedriver's log endpoint.
    pub async fn console_errors(&self) -> Vec<String> {
        let http = reqwest::Client::new();
        let url = format!("{}/session/{}/se/log", self.driver_url, self.session);
        let Ok(response) = http.post(url).json(&json!({ "type": "browser" })).send().await else {
            return vec!["could not read the browser log".into()];
        };
        let body: Value = response.json().await.unwrap_or(Value::Null);
        body["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Saves a PNG of the viewport as `target/screenshots/<name>.png`; its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("writing a screenshot");
        path
    }

    /// Sets the viewport to `width` × `height` CSS pixels (390 wide for a phone). Headless
    /// Chromium keeps a window at least 500 px wide, so resizing the window alone gives a
    /// 500 px page; the size is set with DevTools' device-metrics emulation instead (through
    /// chromedriver's CDP endpoint). It is not a mobile viewport (which would lay out a page
    /// without `<meta name=viewport>`, such as `about:blank`, 980 px wide): every page is
    /// laid out at exactly `width` CSS pixels.
    pub async fn resize(&self, width: u32, height: u32) {
        self.client.set_window_size(width.max(500), height).await.expect("window size");
        let url = format!("{}/session/{}/goog/cdp/execute", self.driver_url, self.session);
        let params = json!({
            "width": width,
            "height": height,
            "deviceScaleFactor": 1,
            "mobile": false,
        });
        let answer = reqwest::Client::new()
            .post(url)
            .json(&json!({ "cmd": "Emulation.setDeviceMetricsOverride", "params": params }))
            .send()
            .await
            .expect("chromedriver's CDP endpoint");
        assert!(answer.status().is_success(), "device metrics: {}", answer.text().await.unwrap_or_default());
        let inner = self.client.execute("return window.innerWidth;", vec![]).await.expect("innerWidth");
        assert_eq!(inner.as_u64(), Some(u64::from(width)), "the viewport is {width} px wide");
    }

    /// Ends the session and chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill().await;
    }
}

/// `target/screenshots` of the workspace.
pub fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}
