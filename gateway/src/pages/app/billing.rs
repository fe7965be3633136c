//! `/billing`: the balance, the ledger, and top-ups through Stripe Checkout. "Top up"
//! posts `amount_cents`; the core records a pending top-up, asks Stripe for a Checkout
//! Session, and the page answers 303 to Stripe's payment page. Stripe sends the browser
//! back to `/billing?topup=success` (or `cancelled`), but credits arrive only through the
//! signed webhook, so the page says a payment may take a moment to show. Without Stripe
//! configured the page says the operator adds credits, and shows the command.

use askama::Template;
use axum::{
    Router,
    extract::{Query, State},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use http::{HeaderValue, header, header::HOST};
use roost_proto::v1::{CreateCheckoutRequest, GetTopUpOptionsRequest, ListLedgerRequest};
use serde::Deserialize;

use super::{home::ChargeRow, signed_in};
use crate::pages::{
    Failure, cents,
    forms::{Posted, csrf_field, failed},
    layout::{CSP, Chrome, PageCall},
    usd_exact,
};
use crate::{Core, cookies};

/// Ledger rows shown.
const LEDGER_ROWS: i32 = 200;

pub(super) fn routes() -> Router<Core> {
    Router::new().route("/billing", get(show)).route("/billing/checkout", post(checkout))
}

#[derive(Template)]
#[template(path = "app_billing.html")]
struct Billing {
    chrome: Chrome,
    account_id: String,
    balance: String,
    returned: &'static str,
    top_up: Result<TopUp, Failure>,
    charges: Result<Vec<ChargeRow>, Failure>,
}

struct TopUp {
    enabled: bool,
    amounts: Vec<(i64, String)>,
}

#[derive(Debug, Default, Deserialize)]
struct ShowQuery {
    #[serde(default)]
    topup: String,
}

async fn show(State(core): State<Core>, page: PageCall, Query(query): Query<ShowQuery>) -> Response {
    let user = match signed_in(&core, &page).await {
        Ok(user) => user,
        Err(answer) => return answer,
    };
    let (options, ledger) = tokio::join!(
        page.load(
            "BillingService/GetTopUpOptions",
            core.billing.get_top_up_options(page.request(GetTopUpOptionsRequest {}))
        ),
        page.load(
            format!("GET /api/account/ledger?limit={LEDGER_ROWS}"),
            core.accounts.list_ledger(page.request(ListLedgerRequest { limit: LEDGER_ROWS }))
        ),
    );
    let checkout_origin = options.as_ref().map(|o| o.checkout_origin.clone()).unwrap_or_default();
    let view = Billing {
        chrome: user.chrome(&page, "Billing", "/billing"),
        account_id: user.account.id.clone(),
        balance: usd_exact(user.account.balance_nanocents),
        returned: match query.topup.as_str() {
            "success" => "success",
            "cancelled" => "cancelled",
            _ => "",
        },
        top_up: options
            .map(|o| TopUp {
                enabled: o.enabled,
                amounts: o.amounts_cents.into_iter().map(|a| (a, cents(a))).collect(),
            })
            .map_err(Failure::from),
        charges: ledger.map(|l| l.charges.into_iter().map(ChargeRow::from).collect()).map_err(Failure::from),
    };
    let mut response = page.render(&view);
    // The top-up form's answer is a 303 to Stripe's payment page, and CSP's form-action
    // also governs where a form's redirects may go: allow that one origin here.
    let safe =
        checkout_origin.starts_with("http") && checkout_origin.bytes().all(|b| b.is_ascii_graphic() && b != b';');
    if safe {
        let csp = CSP.replace("form-action 'self'", &format!("form-action 'self' {checkout_origin}"));
        if let Ok(value) = HeaderValue::from_str(&csp) {
            response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, value);
        }
    }
    response
}

#[derive(Debug, Deserialize)]
struct Amount {
    #[serde(default)]
    amount_cents: String,
    #[serde(default)]
    csrf: String,
}

csrf_field!(Amount);

async fn checkout(State(core): State<Core>, Posted(page, form): Posted<Amount>) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let Ok(amount_cents) = form.amount_cents.trim().parse::<i64>() else {
        let err = roost_proto::ApiError::invalid_argument("choose an amount to top up");
        return failed(&page, &err);
    };
    let base = origin(&page);
    let req = CreateCheckoutRequest {
        amount_cents,
        success_url: format!("{base}/billing?topup=success"),
        cancel_url: format!("{base}/billing?topup=cancelled"),
    };
    match page.load("BillingService/CreateCheckout", core.billing.create_checkout(page.request(req))).await {
        Ok(session) => Redirect::to(&session.url).into_response(),
        Err(err) => failed(&page, &err),
    }
}

/// This site's origin as the browser reached it (scheme from the proxy's
/// `X-Forwarded-Proto`, host from `Host`), for Stripe's return URLs.
fn origin(page: &PageCall) -> String {
    let scheme = if cookies::is_https(page.headers()) { "https" } else { "http" };
    let host = page.headers().get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1");
    format!("{scheme}://{host}")
}
