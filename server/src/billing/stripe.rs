//! Stripe, the two calls roost makes of it: creating a Checkout Session (a form POST to
//! `{api_base}/v1/checkout/sessions`) and verifying a webhook delivery's
//! `Stripe-Signature` (`t=…,v1=…`: HMAC-SHA256 of `t.` + the raw body with the endpoint
//! secret, compared in constant time against every `v1`; other schemes ignored; older
//! than [`TOLERANCE_SECS`] refused). No SDK: these two are small, and roost's errors must
//! never carry the secret key.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use roost_proto::{ApiError, ErrorReason};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::Result;

/// How old a signed delivery may be (Stripe's libraries use the same 5 minutes).
pub const TOLERANCE_SECS: i64 = 300;
/// The amounts offered on `/billing` when none are configured, in cents.
pub const DEFAULT_AMOUNTS_CENTS: [i64; 4] = [500, 1000, 2500, 5000];
/// The largest top-up roost offers or credits: $1,000,000 (`--top-up-amounts` takes no
/// more, and a signed Stripe event for more is refused).
pub const MAX_TOP_UP_CENTS: i64 = 100_000_000;

/// `--stripe-*`: where and how roost talks to Stripe.
#[derive(Debug, Clone)]
pub struct StripeConfig {
    /// `--stripe-secret-key` (`sk_…`).
    pub secret_key: Option<String>,
    /// `--stripe-webhook-secret` (`whsec_…`): the endpoint's signing secret.
    pub webhook_secret: Option<String>,
    /// `--stripe-api-base`: `https://api.stripe.com`, or a fake in tests.
    pub api_base: String,
    /// The top-up amounts offered, in cents.
    pub amounts_cents: Vec<i64>,
    /// The Checkout currency (one cent paid is one cent of credit).
    pub currency: String,
}

impl Default for StripeConfig {
    fn default() -> Self {
        Self {
            secret_key: None,
            webhook_secret: None,
            api_base: "https://api.stripe.com".to_owned(),
            amounts_cents: DEFAULT_AMOUNTS_CENTS.to_vec(),
            currency: "usd".to_owned(),
        }
    }
}

impl StripeConfig {
    /// The origin of the payment pages: Stripe's Checkout host for the real API, else the
    /// API base's own origin (a fake serves both).
    pub fn checkout_origin(&self) -> String {
        let base = self.api_base.trim_end_matches('/');
        if base == "https://api.stripe.com" {
            return "https://checkout.stripe.com".to_owned();
        }
        let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
        format!("{scheme}://{}", rest.split('/').next().unwrap_or_default())
    }

    /// Whether top-ups can be taken: both the API key and the webhook secret are set.
    pub fn enabled(&self) -> bool {
        self.secret_key.as_deref().is_some_and(|k| !k.is_empty())
            && self.webhook_secret.as_deref().is_some_and(|s| !s.is_empty())
    }
}

/// What roost asks Stripe to charge.
#[derive(Debug, Clone)]
pub struct CheckoutRequest<'a> {
    /// The pending top-up's id (also the idempotency key).
    pub top_up_id: &'a str,
    /// The paying account (`client_reference_id`).
    pub account_id: &'a str,
    /// Cents to charge.
    pub amount_cents: i64,
    /// Back to roost after paying.
    pub success_url: &'a str,
    /// Back to roost after giving up.
    pub cancel_url: &'a str,
}

/// A Checkout Session Stripe made.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct CheckoutSession {
    /// `cs_…`.
    pub id: String,
    /// The payment page.
    pub url: String,
}

/// Talks to the Stripe API.
#[derive(Clone)]
pub struct StripeClient {
    http: reqwest::Client,
    config: StripeConfig,
}

impl StripeClient {
    /// A client for `config` (requests time out after 20 s).
    pub fn new(config: StripeConfig) -> Self {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap_or_default();
        Self { http, config }
    }

    /// The settings.
    pub fn config(&self) -> &StripeConfig {
        &self.config
    }

    /// Creates a Checkout Session for one top-up. Stripe's refusal or silence is 503
    /// `unavailable` with Stripe's message (never the key or the URL).
    pub async fn create_checkout(&self, req: &CheckoutRequest<'_>) -> Result<CheckoutSession> {
        let key = self.config.secret_key.as_deref().unwrap_or_default();
        let amount = req.amount_cents.to_string();
        let form = [
            ("mode", "payment"),
            ("client_reference_id", req.account_id),
            ("success_url", req.success_url),
            ("cancel_url", req.cancel_url),
            ("line_items[0][quantity]", "1"),
            ("line_items[0][price_data][currency]", &self.config.currency),
            ("line_items[0][price_data][unit_amount]", &amount),
            ("line_items[0][price_data][product_data][name]", "roost credits"),
            ("metadata[account_id]", req.account_id),
            ("metadata[top_up_id]", req.top_up_id),
        ];
        let url = format!("{}/v1/checkout/sessions", self.config.api_base.trim_end_matches('/'));
        let unavailable = |why: String| -> crate::Error { ApiError::new(ErrorReason::Unavailable, why).into() };
        let response = self
            .http
            .post(&url)
            .bearer_auth(key)
            .header("Idempotency-Key", req.top_up_id)
            .form(&form)
            .send()
            .await
            .map_err(|err| unavailable(format!("Stripe could not be reached ({})", err.without_url())))?;
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("no message");
            return Err(unavailable(format!("Stripe refused the checkout ({status}): {message}")));
        }
        serde_json::from_value(body).map_err(|_| unavailable("Stripe answered without a session id and url".into()))
    }
}

/// Checks a delivery's `Stripe-Signature` against the endpoint secret at `now_secs`.
/// Every refusal is 400 `invalid_argument`, naming what was wrong.
pub fn verify_signature(payload: &[u8], header: &str, secret: &str, now_secs: i64) -> Result<()> {
    let bad = |why: &str| -> crate::Error { ApiError::invalid_argument(format!("Stripe-Signature: {why}")).into() };
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => timestamp = value.parse::<i64>().ok(),
            Some(("v1", value)) => signatures.extend(hex::decode(value).ok()),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or_else(|| bad("no timestamp (t=)"))?;
    if signatures.is_empty() {
        return Err(bad("no v1 signature"));
    }
    if now_secs - timestamp > TOLERANCE_SECS {
        return Err(bad("the timestamp is older than 300 s (a replayed delivery?)"));
    }
    let expected = sign(payload, timestamp, secret);
    let mut matched = subtle::Choice::from(0);
    for candidate in &signatures {
        matched |= candidate.as_slice().ct_eq(expected.as_slice());
    }
    if !bool::from(matched) {
        return Err(bad("no v1 signature matches the payload"));
    }
    Ok(())
}

/// The v1 signature of `payload` sent at `timestamp` (HMAC-SHA256 of `t.payload`).
pub fn sign(payload: &[u8], timestamp: i64, secret: &str) -> Vec<u8> {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else { return Vec::new() };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(payload);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_test";

    fn header(payload: &[u8], t: i64, secret: &str) -> String {
        format!("t={t},v1={},v0=ignored", hex::encode(sign(payload, t, secret)))
    }

    #[test]
    fn a_fresh_signature_of_these_bytes_passes() {
        let body = br#"{"id":"evt_1"}"#;
        verify_signature(body, &header(body, 1000, SECRET), SECRET, 1100).unwrap();
        // Any of several v1 values may match (Stripe sends two while a secret is rolled).
        let two = format!("t=1000,v1={},{}", "00".repeat(32), header(body, 1000, SECRET).replace("t=1000,", ""));
        verify_signature(body, &two, SECRET, 1000).unwrap();
    }

    #[test]
    fn forged_stale_and_malformed_signatures_are_refused() {
        let body = br#"{"id":"evt_1"}"#;
        for (header, now) in [
            (header(body, 1000, "whsec_other"), 1000),
            (header(br#"{"id":"evt_2"}"#, 1000, SECRET), 1000),
            (header(body, 1000, SECRET), 1000 + TOLERANCE_SECS + 1),
            (format!("t=1000,v0={}", hex::encode(sign(body, 1000, SECRET))), 1000),
            ("v1=abcd".to_owned(), 1000),
            (String::new(), 1000),
        ] {
            let err = verify_signature(body, &header, SECRET, now).unwrap_err().to_api();
            assert_eq!(err.reason(), ErrorReason::InvalidArgument, "{header}");
        }
    }
}
