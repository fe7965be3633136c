//! `BillingService`: top-up options, Checkout Sessions, and the Stripe webhook.

use std::sync::Arc;

use roost_proto::{
    ApiError,
    v1::{
        CreateCheckoutRequest, CreateCheckoutResponse, GetTopUpOptionsRequest, GetTopUpOptionsResponse,
        HandleStripeWebhookRequest, HandleStripeWebhookResponse, billing_service_server::BillingService,
    },
};
use tonic::{Request, Response, Status};

use super::{
    stripe::{CheckoutRequest, StripeClient, verify_signature},
    top_ups::StripeEvent,
};
use crate::{auth::Authenticator, time::now_ms};

/// Longest success or cancel URL passed on to Stripe.
const MAX_RETURN_URL: usize = 2048;

/// The billing service.
pub struct BillingCore {
    auth: Arc<Authenticator>,
    stripe: StripeClient,
}

impl BillingCore {
    /// A billing service taking top-ups through `stripe`.
    pub fn new(auth: Arc<Authenticator>, stripe: StripeClient) -> Self {
        Self { auth, stripe }
    }

    fn not_configured() -> ApiError {
        ApiError::not_found("top-ups are not set up on this roost; the operator adds credits with `roost credits add`")
    }
}

#[tonic::async_trait]
impl BillingService for BillingCore {
    async fn get_top_up_options(
        &self,
        _req: Request<GetTopUpOptionsRequest>,
    ) -> Result<Response<GetTopUpOptionsResponse>, Status> {
        let config = self.stripe.config();
        Ok(Response::new(GetTopUpOptionsResponse {
            enabled: config.enabled(),
            amounts_cents: config.amounts_cents.clone(),
            currency: config.currency.clone(),
            checkout_origin: config.checkout_origin(),
        }))
    }

    async fn create_checkout(
        &self,
        req: Request<CreateCheckoutRequest>,
    ) -> Result<Response<CreateCheckoutResponse>, Status> {
        let account_id = self.auth.account_of(&req).await?;
        let config = self.stripe.config();
        if !config.enabled() {
            return Err(Self::not_configured().into());
        }
        let CreateCheckoutRequest { amount_cents, success_url, cancel_url } = req.into_inner();
        if !config.amounts_cents.contains(&amount_cents) {
            let offered: Vec<String> = config.amounts_cents.iter().map(i64::to_string).collect();
            return Err(ApiError::invalid_argument(format!(
                "amount_cents must be one of {} (got {amount_cents})",
                offered.join(", ")
            ))
            .into());
        }
        for (name, url) in [("success_url", &success_url), ("cancel_url", &cancel_url)] {
            let absolute = url.starts_with("https://") || url.starts_with("http://");
            if !absolute || url.len() > MAX_RETURN_URL {
                return Err(ApiError::invalid_argument(format!("{name} must be an absolute http(s) URL")).into());
            }
        }
        let store = self.auth.store();
        let top_up_id = store.create_top_up(&account_id, amount_cents).await?;
        let asked = self
            .stripe
            .create_checkout(&CheckoutRequest {
                top_up_id: &top_up_id,
                account_id: &account_id,
                amount_cents,
                success_url: &success_url,
                cancel_url: &cancel_url,
            })
            .await;
        store.set_top_up_session(&top_up_id, asked.as_ref().ok().map(|s| s.id.as_str())).await?;
        let session = asked?;
        Ok(Response::new(CreateCheckoutResponse { session_id: session.id, url: session.url }))
    }

    async fn handle_stripe_webhook(
        &self,
        req: Request<HandleStripeWebhookRequest>,
    ) -> Result<Response<HandleStripeWebhookResponse>, Status> {
        let config = self.stripe.config();
        let Some(secret) = config.webhook_secret.as_deref().filter(|s| !s.is_empty()) else {
            return Err(Self::not_configured().into());
        };
        let HandleStripeWebhookRequest { payload, signature } = req.into_inner();
        verify_signature(&payload, &signature, secret, now_ms() / 1000)?;
        let event = StripeEvent::parse(&payload)?;
        let credited = self.auth.store().apply_stripe_event(&event, &config.currency).await?;
        if let Some(credited) = &credited {
            tracing::info!(account = %credited.account_id, cents = credited.cents, event = %event.id, "credits topped up");
        }
        Ok(Response::new(HandleStripeWebhookResponse {
            received: true,
            credited_cents: credited.as_ref().map_or(0, |c| c.cents),
            account_id: credited.map(|c| c.account_id).unwrap_or_default(),
        }))
    }
}
