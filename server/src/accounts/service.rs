//! `AccountService`: a key holder reads its own account and ledger.

use roost_proto::{
    ApiError,
    v1::{
        CreateKeyRequest, CreateKeyResponse, GetAccountRequest, GetAccountResponse, ListKeysRequest, ListKeysResponse,
        ListLedgerRequest, ListLedgerResponse, RevokeKeyRequest, RevokeKeyResponse,
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

    async fn create_key(&self, req: Request<CreateKeyRequest>) -> Result<Response<CreateKeyResponse>, Status> {
        let account_id = self.auth.account_of(&req).await?;
        let name = req.get_ref().name.trim();
        if name.chars().count() > MAX_KEY_NAME_CHARS {
            return Err(
                ApiError::invalid_argument(format!("a key name has at most {MAX_KEY_NAME_CHARS} characters")).into()
            );
        }
        let store = self.auth.store();
        let key = store.create_key(&account_id, name).await?;
        let listed = store
            .list_keys(&account_id)
            .await?
            .into_iter()
            .find(|row| row.id == key.id)
            .ok_or_else(|| ApiError::not_found("the new key vanished"))?;
        Ok(Response::new(CreateKeyResponse { key: Some(listed.into()), secret: key.secret }))
    }

    async fn list_keys(&self, req: Request<ListKeysRequest>) -> Result<Response<ListKeysResponse>, Status> {
        let account_id = self.auth.account_of(&req).await?;
        let rows = self.auth.store().list_keys(&account_id).await?;
        Ok(Response::new(ListKeysResponse { keys: rows.into_iter().map(Into::into).collect() }))
    }

    async fn revoke_key(&self, req: Request<RevokeKeyRequest>) -> Result<Response<RevokeKeyResponse>, Status> {
        let account_id = self.auth.account_of(&req).await?;
        let row = self.auth.store().revoke_key_of(Some(&account_id), &req.get_ref().key_id).await?;
        self.auth.keys_revoked();
        Ok(Response::new(RevokeKeyResponse { key: Some(row.into()) }))
    }
}

/// Longest key label accepted.
const MAX_KEY_NAME_CHARS: usize = 100;
