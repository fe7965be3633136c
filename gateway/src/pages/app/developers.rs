//! `/developers`: the account's API keys. "Create key" (optional `name`) answers with the
//! page itself showing the new key in full, once, with a copy button: it is never in a URL
//! and never shown again (the answer is `no-store`). The list shows each key masked (its
//! prefix and last 4), when it was made and last used; revoking asks for confirmation
//! (`?revoke=`) and takes effect at once over REST, gRPC and MCP.

use askama::Template;
use axum::{
    Router,
    extract::{Path, Query, State},
    response::Response,
    routing::{get, post},
};
use roost_proto::v1::{ApiKey, CreateKeyRequest, ListKeysRequest, RevokeKeyRequest};
use serde::Deserialize;

use super::{Button, Signed, signed_in};
use crate::{
    Core,
    pages::{
        Failure, When,
        forms::{Posted, csrf_field, failed, submit},
        layout::{Chrome, PageCall},
    },
};

pub(super) fn routes() -> Router<Core> {
    Router::new()
        .route("/developers", get(show))
        .route("/developers/keys", post(create))
        .route("/developers/keys/{id}/revoke", post(revoke))
}

#[derive(Template)]
#[template(path = "app_developers.html")]
struct Developers {
    chrome: Chrome,
    keys: Result<Vec<KeyRow>, Failure>,
    new_key: Option<(String, String)>,
    revoke: Option<KeyRow>,
}

#[derive(Clone)]
struct KeyRow {
    id: String,
    name: String,
    masked: String,
    created: When,
    last_used: When,
    revoked: When,
}

impl From<ApiKey> for KeyRow {
    fn from(k: ApiKey) -> Self {
        let masked =
            if k.last4.is_empty() { format!("{}…", k.prefix) } else { format!("{}…{}", k.prefix, k.last4) };
        Self {
            id: k.id,
            name: k.name,
            masked,
            created: When::timestamp(k.created_at.as_ref()),
            last_used: When::timestamp(k.last_used_at.as_ref()),
            revoked: When::timestamp(k.revoked_at.as_ref()),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ShowQuery {
    #[serde(default)]
    revoke: String,
}

async fn show(State(core): State<Core>, page: PageCall, Query(query): Query<ShowQuery>) -> Response {
    let user = match signed_in(&core, &page).await {
        Ok(user) => user,
        Err(answer) => return answer,
    };
    render(&core, &page, &user, None, &query.revoke).await
}

async fn render(
    core: &Core,
    page: &PageCall,
    user: &Signed,
    new_key: Option<(String, String)>,
    revoke: &str,
) -> Response {
    let keys = page
        .load("AccountService/ListKeys", core.accounts.list_keys(page.request(ListKeysRequest {})))
        .await
        .map(|l| l.keys.into_iter().map(KeyRow::from).collect::<Vec<_>>())
        .map_err(Failure::from);
    let revoke =
        keys.as_ref().ok().and_then(|rows| rows.iter().find(|k| k.id == revoke && !k.revoked.is_set()).cloned());
    let view = Developers { chrome: user.chrome(page, "Developers", "/developers"), keys, new_key, revoke };
    page.render(&view)
}

#[derive(Debug, Deserialize)]
struct NewKey {
    #[serde(default)]
    name: String,
    #[serde(default)]
    csrf: String,
}

csrf_field!(NewKey);

async fn create(State(core): State<Core>, Posted(page, form): Posted<NewKey>) -> Response {
    let user = match signed_in(&core, &page).await {
        Ok(user) => user,
        Err(answer) => return answer,
    };
    let req = CreateKeyRequest { name: form.name };
    match page.load("AccountService/CreateKey", core.accounts.create_key(page.request(req))).await {
        Ok(made) => {
            let name = made.key.map(|k| k.name).unwrap_or_default();
            render(&core, &page, &user, Some((made.secret, name)), "").await
        }
        Err(err) => failed(&page, &err),
    }
}

async fn revoke(State(core): State<Core>, Path(id): Path<String>, Posted(page, _): Posted<Button>) -> Response {
    if let Err(answer) = signed_in(&core, &page).await {
        return answer;
    }
    let req = RevokeKeyRequest { key_id: id };
    submit(&page, "AccountService/RevokeKey", core.accounts.revoke_key(page.request(req)), "/developers", |done| {
        let key = done.key.unwrap_or_default();
        format!(
            "Revoked {}…{}{}.",
            key.prefix,
            key.last4,
            if key.name.is_empty() { String::new() } else { format!(" ({})", key.name) }
        )
    })
    .await
}
