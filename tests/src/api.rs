//! A terse REST client for tests: JSON in, status and JSON out, with an optional API key.

use std::time::Duration;

use serde_json::Value;

/// One answer: status and body (JSON, or the text as a JSON string).
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The body.
    pub body: Value,
}

impl Reply {
    /// The answer to a request built by hand (custom headers, another base URL).
    pub async fn of(request: reqwest::RequestBuilder) -> Self {
        reply(request.send().await).await
    }

    /// The body of a 2xx answer; panics with the answer otherwise.
    #[track_caller]
    pub fn ok(self) -> Value {
        assert!((200..300).contains(&self.status), "expected success, got {} {}", self.status, self.body);
        self.body
    }

    /// Asserts an error answer with this status and `code`, in the `{"error", "code"}` shape.
    #[track_caller]
    pub fn err(&self, status: u16, code: &str) {
        assert_eq!((self.status, self.body["code"].as_str()), (status, Some(code)), "{}", self.body);
        assert!(self.body["error"].as_str().is_some_and(|e| !e.is_empty()), "{}", self.body);
    }
}

/// REST calls to one server, as one key holder (or none).
#[derive(Debug, Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
}

impl Api {
    /// Calls `base` with `key` as the bearer token, if any.
    pub fn new(http: reqwest::Client, base: String, key: Option<String>) -> Self {
        Self { http, base, key }
    }

    /// The same server with another key (or none).
    pub fn with_key(&self, key: Option<&str>) -> Self {
        Self { key: key.map(str::to_owned), ..self.clone() }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.base));
        match &self.key {
            Some(key) => req.bearer_auth(key),
            None => req,
        }
    }

    /// A POST of `body` to `path`, to send as the test likes (an SSE client opens it).
    pub fn post_request(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::POST, path).json(&body)
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> Reply {
        reply(self.request(reqwest::Method::GET, path).send().await).await
    }

    /// DELETE `path`.
    pub async fn delete_path(&self, path: &str) -> Reply {
        reply(self.request(reqwest::Method::DELETE, path).send().await).await
    }

    /// POST `path` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        reply(self.request(reqwest::Method::POST, path).json(&body).send().await).await
    }

    /// POST `path` with a JSON body, giving up after `timeout` (the client hangs up).
    pub async fn post_with_timeout(&self, path: &str, body: Value, timeout: Duration) -> Option<Reply> {
        match self.request(reqwest::Method::POST, path).json(&body).timeout(timeout).send().await {
            Ok(resp) => Some(reply(Ok(resp)).await),
            Err(err) if err.is_timeout() => None,
            Err(err) => panic!("request failed: {err}"),
        }
    }

    /// Provisions `runtime` with `brief`; the 201 body.
    pub async fn provision(&self, runtime: &str, brief: &str) -> Value {
        let reply = self.post("/api/provision", serde_json::json!({"runtime": runtime, "brief": brief})).await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        reply.body
    }

    /// Polls the instance until its status is `status` (panics after 20 s, or if it failed
    /// while waiting for something else).
    pub async fn wait_status(&self, id: &str, status: &str) -> Value {
        self.wait_status_within(id, status, Duration::from_secs(20)).await
    }

    /// Waits until the instance has `status`, for at most `within` (a runtime that takes
    /// long to boot); the instance then. Fails if it fails or takes longer.
    pub async fn wait_status_within(&self, id: &str, status: &str, within: Duration) -> Value {
        for _ in 0..within.as_millis().div_ceil(50) {
            let instance = self.get(&format!("/api/instances/{id}")).await.ok();
            if instance["status"] == status {
                return instance;
            }
            assert!(
                instance["status"] != "failed" || status == "failed",
                "instance failed while waiting for {status}: {instance}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("instance {id} never became {status}");
    }

    /// Sends a message; the reply.
    pub async fn message(&self, id: &str, text: &str) -> Reply {
        self.post(&format!("/api/instances/{id}/messages"), serde_json::json!({ "text": text })).await
    }
}

async fn reply(resp: reqwest::Result<reqwest::Response>) -> Reply {
    let resp = resp.expect("request sent");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body read");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Reply { status, body }
}
