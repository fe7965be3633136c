//! The caller's account: `GET /api/account`, `GET /api/account/ledger?limit=`.
//! (Not in the seed; what a key holder needs to see its balance and charges.)

use axum::{Json, Router, extract::State, routing::get};
use roost_proto::v1::{Account, GetAccountRequest, ListLedgerRequest, ListLedgerResponse};

use crate::{Call, Core, HttpError, LimitQuery};

pub(crate) fn routes() -> Router<Core> {
    Router::new().route("/api/account", get(account)).route("/api/account/ledger", get(ledger))
}

async fn account(State(core): State<Core>, call: Call) -> Result<Json<Option<Account>>, HttpError> {
    Ok(Json(core.accounts.get_account(call.request(GetAccountRequest {})).await?.into_inner().account))
}

async fn ledger(
    State(core): State<Core>,
    LimitQuery { limit }: LimitQuery,
    call: Call,
) -> Result<Json<ListLedgerResponse>, HttpError> {
    let req = ListLedgerRequest { limit: limit.unwrap_or_default() };
    Ok(Json(core.accounts.list_ledger(call.request(req)).await?.into_inner()))
}
