//! The caller's account: `GET /api/account`, `GET /api/account/ledger?limit=`.
//! (Not in the seed; what a key holder needs to see its balance and charges.)

use axum::{Json, extract::State};
use roost_proto::v1::{Account, GetAccountRequest, ListLedgerRequest, ListLedgerResponse};

use crate::{
    Call, Core, HttpError, LimitQuery,
    api::{Endpoint, Routes},
};

const ACCOUNT: Endpoint =
    Endpoint::get("/api/account", "The caller's account: id, name, credit balance.").answers("Account");

const LEDGER: Endpoint = Endpoint::get("/api/account/ledger", "The account's credit movements, newest first.")
    .params(&[("limit", "Most entries to return; default 50, clamped to [1, 500].")])
    .answers("ListLedgerResponse");

pub(crate) fn routes() -> Routes {
    Routes::new(
        "Account",
        "The key holder's balance and ledger (not in the seed; what a key holder needs to see its charges).",
    )
    .at(&ACCOUNT, account)
    .at(&LEDGER, ledger)
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
