//! `AccountService`: a key holder reads its own account and ledger.

use roost_proto::{
    ApiError,
    v1::{
        GetAccountRequest, GetAccountResponse, ListLedgerRequest, ListLedgerResponse,
        account_service_server::AccountService,
    },
};
use tonic::{Request, Response, Status};

use std::sync::Arc;

use crate::auth::Authenticator;

/// Default and largest number of history rows a read returns.
pub const HISTORY_LIMIT: (i64, i64) = (50, 500);

/// Clamps a requested history limit: 0 or less means the default.
pub fn clamp_limit(requested: i32) -> i64 {
    let (default, max) = HISTORY_LIMIT;
    if requested <= 0 { default } else { i64::from(requested).min(max) }
}

/// The account service over a store.
pub struct AccountCore {
    auth: Arc<Authenticator>,
}

impl AccountCore {
    /// An account service reading the authenticator's store.
    pub fn new(auth: Arc<Authenticator>) -> Self {
        Self { auth }
    }
}

#[tonic::async_trait]
impl AccountService for AccountCore {
    async fn get_account(&self, req: Request<GetAccountRequest>) -> Result<Response<GetAccountResponse>, Status> {
        let account_id = self.auth.account_of(&req).await?;
        let account =
            self.auth.store().account(&account_id).await?.ok_or_else(|| ApiError::not_found("no such account"))?;
        Ok(Response::new(GetAccountResponse { account: Some(account.into()) }))
    }

    async fn list_ledger(&self, req: Request<ListLedgerRequest>) -> Result<Response<ListLedgerResponse>, Status> {
        let account_id = self.auth.account_of(&req).await?;
        let rows = self.auth.store().account_ledger(&account_id, clamp_limit(req.get_ref().limit)).await?;
        Ok(Response::new(ListLedgerResponse { charges: rows.into_iter().map(Into::into).collect() }))
    }
}
