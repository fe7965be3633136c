//! `WebAppService`: sign-up, sign-in, sign-out, the signed-in session, invites.

use std::{net::SocketAddr, sync::Arc};

use axum::extract::ConnectInfo;
use roost_proto::{
    ApiError,
    v1::{
        AcceptInviteRequest, AcceptInviteResponse, GetInviteRequest, GetInviteResponse, GetSessionRequest,
        GetSessionResponse, GetSettingsRequest, GetSettingsResponse, SignInRequest, SignInResponse, SignOutRequest,
        SignOutResponse, SignUpRequest, SignUpResponse, web_app_service_server::WebAppService,
    },
};
use tonic::{Request, Response, Status};

use roost_kit::brake::Brake;

use super::passwords;
use crate::{
    auth::{Authenticator, session_token},
    time::timestamp_ms,
};

/// How the web app is set up (`roost serve --signup`).
#[derive(Debug, Clone, Default)]
pub struct WebAppConfig {
    /// `--signup open`: anyone may create an account at `/signup`. Default closed: the
    /// operator invites users with `roost accounts create --email` or `roost users add`.
    pub signup_open: bool,
    /// `--public-url`: the address users reach roost at, which invite and reset links
    /// start with. `None`: the address roost listens on.
    pub public_url: Option<String>,
}

/// The store's meta key holding where the last `roost serve` is reached, so
/// `roost accounts create --email`, `users add` and `users reset` (run beside it, without
/// a server address of their own) print links that open.
pub const LINK_BASE_KEY: &str = "link_base";

/// The base of invite links for a server listening on `addr`: `public_url` when set, else
/// `http://` and the address (a wildcard address as loopback: the operator's own browser).
pub fn link_base(public_url: Option<&str>, addr: std::net::SocketAddr) -> String {
    match public_url.map(str::trim).filter(|u| !u.is_empty()) {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None if addr.ip().is_unspecified() => {
            let loopback: std::net::IpAddr = if addr.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            };
            format!("http://{}", std::net::SocketAddr::new(loopback, addr.port()))
        }
        None => format!("http://{addr}"),
    }
}

/// The one answer to every failed sign-in, whatever the cause.
const SIGN_IN_REFUSED: &str = "that email and password do not match a user";

/// The web-app service over the authenticator's store.
///
/// Sign-in and sign-up take a slot of the brake ([`Brake`]: 10 failures per email and per
/// client address in 10 minutes) before any password is hashed, so concurrent guesses are
/// held to the limit rather than all checked; the hashing itself is bounded in
/// [`passwords`].
pub struct WebAppCore {
    auth: Arc<Authenticator>,
    config: WebAppConfig,
    brake: Brake,
}

impl WebAppCore {
    /// A web-app service with its settings.
    pub fn new(auth: Arc<Authenticator>, config: WebAppConfig) -> Self {
        Self { auth, config, brake: Brake::default() }
    }
}

/// The brake's key for a client address.
fn address_key<T>(req: &Request<T>) -> Option<String> {
    peer(req).map(|peer| format!("addr:{}", peer.ip().to_canonical()))
}

/// The client address a call came from (the TCP peer; proxies' headers are not trusted).
fn peer<T>(req: &Request<T>) -> Option<SocketAddr> {
    req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0).or_else(|| req.remote_addr())
}

#[tonic::async_trait]
impl WebAppService for WebAppCore {
    async fn get_settings(&self, _req: Request<GetSettingsRequest>) -> Result<Response<GetSettingsResponse>, Status> {
        Ok(Response::new(GetSettingsResponse { signup_open: self.config.signup_open }))
    }

    async fn sign_up(&self, req: Request<SignUpRequest>) -> Result<Response<SignUpResponse>, Status> {
        if !self.config.signup_open {
            return Err(ApiError::not_found("sign-up is closed here; ask the operator for an invite").into());
        }
        let keys = address_key(&req).into_iter().collect();
        let SignUpRequest { email, password, account_name } = req.into_inner();
        super::users::normalize_email(&email)?;
        passwords::check_strength(&password)?;
        if account_name.chars().count() > 200 {
            return Err(ApiError::invalid_argument("an account name has at most 200 characters").into());
        }
        // A sign-up that fails (a taken email) counts against its address, like a failed
        // sign-in; the slot is taken before the password is hashed.
        let attempt = self.brake.attempt(keys)?;
        let store = self.auth.store();
        let hash = match passwords::hash(&password).await {
            Ok(hash) => hash,
            Err(busy) => {
                attempt.withdrawn();
                return Err(busy.into());
            }
        };
        let (user, account) = store.sign_up(&email, &hash, &account_name).await?;
        attempt.succeeded(None);
        let session_token = store.create_session(&user.id).await?;
        Ok(Response::new(SignUpResponse { session_token, user: Some(user.into()), account: Some(account.into()) }))
    }

    async fn sign_in(&self, req: Request<SignInRequest>) -> Result<Response<SignInResponse>, Status> {
        let email_key = format!("email:{}", req.get_ref().email.trim().to_lowercase());
        let keys = std::iter::once(email_key.clone()).chain(address_key(&req)).collect();
        // The slot first: of guesses fired together, only the brake's limit are checked.
        let attempt = self.brake.attempt(keys)?;
        let SignInRequest { email, password } = req.into_inner();
        let store = self.auth.store();
        let user = store.user_by_email(&email).await?;
        // Unknown email, no password yet, wrong password: one answer, one argon2 verify.
        let stored = user.as_ref().and_then(|u| u.password_hash.clone());
        let checked =
            if password.len() > passwords::MAX_LEN { Ok(false) } else { passwords::verify(&password, stored).await };
        let password_ok = match checked {
            Ok(ok) => ok,
            // Not checked (every hashing worker busy): no guess was judged.
            Err(busy) => {
                attempt.withdrawn();
                return Err(busy.into());
            }
        };
        let Some(user) = user.filter(|_| password_ok) else {
            attempt.failed();
            return Err(ApiError::unauthenticated(SIGN_IN_REFUSED).into());
        };
        attempt.succeeded(Some(&email_key));
        let session_token = store.create_session(&user.id).await?;
        Ok(Response::new(SignInResponse { session_token, user: Some(user.into()) }))
    }

    async fn sign_out(&self, req: Request<SignOutRequest>) -> Result<Response<SignOutResponse>, Status> {
        let ok = match session_token(&req) {
            Some(token) => self.auth.store().delete_session(token).await?,
            None => false,
        };
        Ok(Response::new(SignOutResponse { ok }))
    }

    async fn get_session(&self, req: Request<GetSessionRequest>) -> Result<Response<GetSessionResponse>, Status> {
        let user = self.auth.user_of(&req).await?;
        let account =
            self.auth.store().account(&user.account_id).await?.ok_or_else(|| ApiError::not_found("no such account"))?;
        Ok(Response::new(GetSessionResponse { user: Some(user.into()), account: Some(account.into()) }))
    }

    async fn get_invite(&self, req: Request<GetInviteRequest>) -> Result<Response<GetInviteResponse>, Status> {
        let invite = self.auth.store().invite(&req.get_ref().token).await?;
        Ok(Response::new(GetInviteResponse {
            email: invite.email,
            account_name: invite.account_name,
            expires_at: Some(timestamp_ms(invite.expires_at)),
        }))
    }

    async fn accept_invite(&self, req: Request<AcceptInviteRequest>) -> Result<Response<AcceptInviteResponse>, Status> {
        let AcceptInviteRequest { token, password } = req.into_inner();
        let store = self.auth.store();
        // A dead link says so before the password is judged.
        store.invite(&token).await?;
        passwords::check_strength(&password)?;
        let hash = passwords::hash(&password).await?;
        let user = store.accept_invite(&token, &hash).await?;
        let session_token = store.create_session(&user.id).await?;
        Ok(Response::new(AcceptInviteResponse { session_token, user: Some(user.into()) }))
    }
}
