//! A fake Stripe for the top-up tests: `POST /v1/checkout/sessions` (form-encoded, bearer
//! secret key, as the real API takes it) records the session and answers its id and a
//! payment page URL here; `GET /pay/{id}` is that page, with a link back to the session's
//! success URL. Webhook deliveries are built and signed by the test ([`FakeStripe::event`],
//! [`FakeStripe::signature`]), as Stripe would send them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Form, Json, Router,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{Html, IntoResponse, Response},
    routing::{get, post},
};
use roost_server::{ServeConfig, billing::stripe::sign};
use serde_json::json;
use tokio::{net::TcpListener, task::JoinHandle};

/// The secret key roost is configured with.
pub const SECRET_KEY: &str = "sk_test_fake_key";
/// The webhook endpoint's signing secret.
pub const WEBHOOK_SECRET: &str = "whsec_fake_secret";

/// A Checkout Session roost asked for.
#[derive(Debug, Clone)]
pub struct Session {
    /// `cs_test_N`.
    pub id: String,
    /// Its payment page here.
    pub url: String,
    /// The form roost posted.
    pub form: HashMap<String, String>,
}

impl Session {
    /// A posted field ("" when absent).
    pub fn field(&self, name: &str) -> &str {
        self.form.get(name).map_or("", String::as_str)
    }
}

#[derive(Clone, Default)]
struct Shared {
    base: String,
    sessions: Arc<Mutex<Vec<Session>>>,
}

/// The running fake.
pub struct FakeStripe {
    /// Its base URL (what `--stripe-api-base` is set to).
    pub base: String,
    shared: Shared,
    task: JoinHandle<()>,
}

impl FakeStripe {
    /// Starts the fake on an ephemeral port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake stripe");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let shared = Shared { base: base.clone(), sessions: Arc::default() };
        let app = Router::new()
            .route("/v1/checkout/sessions", post(create_session))
            .route("/pay/{id}", get(pay_page))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base, shared, task }
    }

    /// Points a roost configuration at this fake, with top-ups on.
    pub fn configure(&self, config: &mut ServeConfig) {
        config.stripe.secret_key = Some(SECRET_KEY.into());
        config.stripe.webhook_secret = Some(WEBHOOK_SECRET.into());
        config.stripe.api_base = self.base.clone();
    }

    /// Every session created so far, oldest first.
    pub fn sessions(&self) -> Vec<Session> {
        self.shared.sessions.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The body of an event about `session` (`kind` such as `checkout.session.completed`).
    pub fn event(&self, event_id: &str, kind: &str, session: &Session, payment_status: &str) -> Vec<u8> {
        let amount: i64 = session.field("line_items[0][price_data][unit_amount]").parse().unwrap_or(0);
        let body = json!({
            "id": event_id,
            "object": "event",
            "type": kind,
            "data": {"object": {
                "id": session.id,
                "object": "checkout.session",
                "client_reference_id": session.field("client_reference_id"),
                "payment_status": payment_status,
                "amount_total": amount,
                "currency": session.field("line_items[0][price_data][currency]"),
                "metadata": {
                    "account_id": session.field("metadata[account_id]"),
                    "top_up_id": session.field("metadata[top_up_id]"),
                },
            }},
        });
        serde_json::to_vec(&body).expect("event json")
    }

    /// A `Stripe-Signature` for `body` sent at Unix time `t`, signed with `secret`.
    pub fn signature(body: &[u8], t: i64, secret: &str) -> String {
        format!("t={t},v1={}", hex::encode(sign(body, t, secret)))
    }

    /// Now, in Unix seconds.
    pub fn now() -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
    }
}

impl Drop for FakeStripe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn create_session(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let authorized =
        headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {SECRET_KEY}"));
    if !authorized {
        let body = json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided"}});
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    }
    let mut sessions = shared.sessions.lock().unwrap_or_else(|p| p.into_inner());
    let id = format!("cs_test_{}", sessions.len() + 1);
    let url = format!("{}/pay/{id}", shared.base);
    sessions.push(Session { id: id.clone(), url: url.clone(), form });
    Json(json!({"id": id, "object": "checkout.session", "url": url})).into_response()
}

async fn pay_page(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let sessions = shared.sessions.lock().unwrap_or_else(|p| p.into_inner());
    let Some(session) = sessions.iter().find(|s| s.id == id) else {
        return (StatusCode::NOT_FOUND, "no such session").into_response();
    };
    let amount = session.field("line_items[0][price_data][unit_amount]");
    let back = session.field("success_url");
    Html(format!(
        "<!doctype html><title>Fake Checkout</title><h1>Fake Stripe Checkout</h1>\
         <p id=\"amount\">{amount} cents</p><a id=\"return\" href=\"{back}\">Return to roost</a>"
    ))
    .into_response()
}
