//! The hosted web app: sign-up, sign-in and invites; the signed-in pages; API keys made on
//! `/developers`; top-ups through a fake Stripe and its signed webhook; the store's own
//! guarantees; and the whole flow in a real browser.

mod accounts;
mod billing;
mod browser;
mod keys;
mod store;

use reqwest::StatusCode;
use roost_tests::{
    TestServer,
    pages::{Visitor, location},
};

/// A password every test user has.
pub const PASSWORD: &str = "correct horse battery";

/// Signs a new user up through `/signup` (the server must run with `--signup open`); the
/// visitor then holds their session cookie.
pub async fn signed_up(server: &TestServer, email: &str) -> Visitor {
    let mut visitor = Visitor::new(server);
    visitor.get("/signup").await;
    let out = visitor.post_form("/signup", &[("email", email), ("password", PASSWORD)]).await;
    assert_eq!(location(&out), "/", "sign-up of {email}");
    assert!(visitor.cookies.iter().any(|(k, v)| k == "roost_session" && v.starts_with("rws_")));
    visitor
}

/// The account id the signed-in visitor's billing page names.
pub async fn account_id(visitor: &mut Visitor) -> String {
    let page = visitor.get("/billing").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    page.texts(".stats .id").first().cloned().expect("the billing page names the account")
}
