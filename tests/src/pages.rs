//! Fast page checks without a browser: fetch a page over HTTP, parse it with `scraper`,
//! and post its forms the way a browser would (CSRF cookie and field, same-origin
//! `Origin`).

use reqwest::{StatusCode, header};
use scraper::{Html, Selector};

use crate::TestServer;

/// A fetched page.
#[derive(Debug)]
pub struct Page {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: header::HeaderMap,
    /// The parsed document.
    pub html: Html,
    /// The raw body.
    pub body: String,
}

impl Page {
    /// The page a response holds (a form's answer, say).
    pub async fn of(response: reqwest::Response) -> Self {
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.expect("page body");
        Self { status, headers, html: Html::parse_document(&body), body }
    }

    /// Texts of every element matching `selector`, trimmed, whitespace collapsed.
    pub fn texts(&self, selector: &str) -> Vec<String> {
        let selector = Selector::parse(selector).unwrap_or_else(|e| panic!("bad selector {selector}: {e}"));
        self.html
            .select(&selector)
            .map(|el| el.text().collect::<Vec<_>>().join(" ").split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    }

    /// The text of the whole `<main>`.
    pub fn main_text(&self) -> String {
        self.texts("main").join(" ")
    }

    /// Values of `attribute` on every element matching `selector`.
    pub fn attrs(&self, selector: &str, attribute: &str) -> Vec<String> {
        let selector = Selector::parse(selector).unwrap_or_else(|e| panic!("bad selector {selector}: {e}"));
        self.html.select(&selector).filter_map(|el| el.value().attr(attribute).map(str::to_owned)).collect()
    }

    /// The footer's "backed by" API calls.
    pub fn backed_by(&self) -> Vec<String> {
        self.texts("footer.backed li code")
    }

    /// The value of the CSRF cookie this answer set, if it set one.
    pub fn csrf_cookie(&self) -> Option<String> {
        self.headers.get_all(header::SET_COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|c| {
            c.strip_prefix("roost_csrf=").map(|rest| rest.split(';').next().unwrap_or_default().to_owned())
        })
    }
}

/// A visitor of the pages: keeps the CSRF cookie (and a sign-in cookie once set) between
/// requests, as a browser would.
#[derive(Debug, Clone)]
pub struct Visitor {
    base: String,
    http: reqwest::Client,
    /// Cookies sent with every request (`name=value` pairs).
    pub cookies: Vec<(String, String)>,
}

impl Visitor {
    /// A visitor of `server` that follows no redirects (tests look at them).
    pub fn new(server: &TestServer) -> Self {
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        Self { base: server.url(""), http, cookies: Vec::new() }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    fn keep_cookies(&mut self, headers: &header::HeaderMap) {
        for value in headers.get_all(header::SET_COOKIE).iter().filter_map(|v| v.to_str().ok()) {
            let pair = value.split(';').next().unwrap_or_default();
            if let Some((name, v)) = pair.split_once('=') {
                self.cookies.retain(|(k, _)| k != name);
                if !v.is_empty() && !value.contains("Max-Age=0") {
                    self.cookies.push((name.to_owned(), v.to_owned()));
                }
            }
        }
    }

    /// GETs `path` and parses it.
    pub async fn get(&mut self, path: &str) -> Page {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .header(header::COOKIE, self.cookie_header())
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        self.keep_cookies(response.headers());
        Page::of(response).await
    }

    /// The CSRF value this visitor's pages put in their forms: bound to its web-app session
    /// or sign-in cookie when it holds one, else its `roost_csrf` cookie (GET a page first).
    pub fn csrf(&self) -> String {
        let cookie = |name: &str| self.cookies.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        match (cookie("roost_session"), cookie("roost_token")) {
            (None, None) => cookie("roost_csrf").expect("a page set roost_csrf").to_owned(),
            (session, token) => roost_gateway::cookies::bound_csrf(session, token),
        }
    }

    /// POSTs a form to `path` as a browser on this origin would: the CSRF field added,
    /// `Origin` set to the server. Returns the raw response (often a 303).
    pub async fn post_form(&mut self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        self.post_form_from(None, path, fields).await
    }

    /// [`Visitor::post_form`] from the page at `from` (a path of this site), as the
    /// browser's `Referer` says, when given.
    pub async fn post_form_from(
        &mut self,
        from: Option<&str>,
        path: &str,
        fields: &[(&str, &str)],
    ) -> reqwest::Response {
        let csrf = self.csrf();
        let mut form: Vec<(&str, &str)> = fields.to_vec();
        form.push(("csrf", &csrf));
        let origin = self.base.trim_end_matches('/');
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header(header::COOKIE, self.cookie_header())
            .header(header::ORIGIN, origin);
        if let Some(from) = from {
            request = request.header(header::REFERER, format!("{origin}{from}"));
        }
        let response = request.form(&form).send().await.unwrap_or_else(|e| panic!("POST {path}: {e}"));
        self.keep_cookies(response.headers());
        response
    }
}

/// Where a 303 answer sends the browser.
pub fn location(response: &reqwest::Response) -> String {
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "expected a redirect from {}", response.url());
    response.headers()[header::LOCATION].to_str().expect("location").to_owned()
}
