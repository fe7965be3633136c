//! Top-ups: `POST /api/billing/stripe/webhook`, where Stripe delivers its events. The body
//! is passed to the core byte for byte, because the signature covers those exact bytes;
//! the core verifies it and credits each paid Checkout Session once.

use axum::{
    Json,
    extract::{Request, State},
};
use http::header::CONTENT_TYPE;
use roost_proto::{
    ErrorReason,
    v1::{HandleStripeWebhookRequest, HandleStripeWebhookResponse},
};

use crate::{
    Call, Core, HttpError,
    api::{Body, Endpoint, Routes},
    codec::read_limited,
};

const WEBHOOK: Endpoint = Endpoint::post(
    "/api/billing/stripe/webhook",
    "Stripe's webhook: a signed event (`Stripe-Signature: t=…,v1=…`). `checkout.session.completed` with \
     `payment_status=paid` and `checkout.session.async_payment_succeeded` credit the session's top-up once; a replay \
     answers 200 and credits nothing; a bad or stale (over 300 s) signature is 400.",
)
.body_of(Body::JsonText("a Stripe event, exactly as Stripe sends it"))
.answers("HandleStripeWebhookResponse")
.errors(&[ErrorReason::NotFound]);

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Billing",
        "Credits bought through Stripe Checkout on the web app's /billing page arrive through this webhook.",
    )
    .at(&WEBHOOK, webhook)
}

async fn webhook(State(core): State<Core>, request: Request) -> Result<Json<HandleStripeWebhookResponse>, HttpError> {
    let (parts, body) = request.into_parts();
    let json = parts.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_none_or(|ct| ct.contains("json"));
    if !json {
        return Err(HttpError::new(ErrorReason::UnsupportedMediaType, "Stripe events are JSON (application/json)"));
    }
    let signature = parts.headers.get("stripe-signature").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let payload = read_limited(body, core.options.max_json_body_bytes).await?.to_vec();
    let call = Call::from_parts(&parts);
    let req = call.request(HandleStripeWebhookRequest { payload, signature });
    Ok(Json(core.billing.handle_stripe_webhook(req).await?.into_inner()))
}
