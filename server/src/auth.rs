//! Who is calling: `authorization: Bearer <API key>` → the account it acts as; failing
//! that, a web-app session token in the `x-roost-session` metadata entry (the web pages
//! set it from their HttpOnly session cookie) → its user's account.
//!
//! The HTTP adapters copy HTTP headers into gRPC metadata, so REST, gRPC and MCP callers are
//! authenticated by this one [`Authenticator`]. The REST routes never turn a cookie into a
//! session, so a browser cannot be made to call the API with its cookie (no CSRF there);
//! only the pages, whose forms carry a CSRF field, do.
//!
//! Every request carries a key, and looking it up is a store round trip, so verified keys
//! are remembered briefly. A revocation still takes effect at once: `roost keys revoke`
//! touches `<data-dir>/keys.changed`, and any change of that file empties the cache (one
//! `stat` per request). A CLI on another host, sharing only a PostgreSQL, cannot touch it;
//! there a revocation takes effect within [`CACHE_TTL`].

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use roost_proto::ApiError;
use tonic::Request;

use crate::{
    Result,
    accounts::keys::{KEY_PREFIX, hash_key},
    store::Store,
    webapp::users::UserRow,
};

/// How long a verified key is trusted without asking the store again.
pub const CACHE_TTL: Duration = Duration::from_secs(1);
/// Most keys remembered; past this the cache starts over.
const CACHE_CAPACITY: usize = 16 * 1024;
/// How stale a key's `last_used_at` may get before a call refreshes it.
const LAST_USED_EVERY_MS: i64 = 60_000;
/// The metadata entry that carries a web-app session token.
pub const SESSION_METADATA: &str = "x-roost-session";
/// The file whose change means "keys were revoked", in the data directory.
pub const KEYS_CHANGED_FILE: &str = "keys.changed";

/// Verifies API keys, remembering recent answers.
pub struct Authenticator {
    store: Store,
    marker: PathBuf,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    marker_seen: Option<SystemTime>,
    accounts: HashMap<String, (String, Instant)>,
}

impl Authenticator {
    /// Checks keys against `store`, watching `<data_dir>/keys.changed`.
    pub fn new(store: Store, data_dir: &Path) -> Self {
        Self { store, marker: data_dir.join(KEYS_CHANGED_FILE), cache: Mutex::new(Cache::default()) }
    }

    /// The store keys are checked against.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The account the request's API key (or, without one, its web session) acts as; 401
    /// `unauthenticated` when the key is missing, malformed, unknown or revoked.
    pub async fn account_of<T>(&self, req: &Request<T>) -> Result<String> {
        let Some(key) = bearer_token(req) else {
            if session_token(req).is_some() {
                return Ok(self.user_of(req).await?.account_id);
            }
            return Err(ApiError::unauthenticated("missing API key: send `Authorization: Bearer <API key>`").into());
        };
        if !key.starts_with(KEY_PREFIX) {
            return Err(ApiError::unauthenticated("invalid or revoked API key").into());
        }
        let hash = hash_key(key);
        if let Some(account) = self.cached(&hash) {
            return Ok(account);
        }
        let (account, last_used) = self
            .store
            .account_for_hash(&hash)
            .await?
            .ok_or_else(|| ApiError::unauthenticated("invalid or revoked API key"))?;
        if last_used.is_none_or(|at| crate::time::now_ms() - at > LAST_USED_EVERY_MS) {
            // Off the request's path: a key's "last used" is for people, a minute coarse.
            let (store, hash) = (self.store.clone(), hash.clone());
            tokio::spawn(async move {
                if let Err(err) = store.touch_key(&hash).await {
                    tracing::debug!(error = %err, "could not note a key's last use");
                }
            });
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.accounts.len() >= CACHE_CAPACITY {
            cache.accounts.clear();
        }
        cache.accounts.insert(hash, (account.clone(), Instant::now()));
        Ok(account)
    }

    /// The signed-in user of the request's web session (`x-roost-session`); 401 when
    /// there is none or it ended.
    pub async fn user_of<T>(&self, req: &Request<T>) -> Result<UserRow> {
        let token = session_token(req).ok_or_else(|| ApiError::unauthenticated("not signed in"))?;
        self.store
            .session_user(token)
            .await?
            .ok_or_else(|| ApiError::unauthenticated("the session ended; sign in again").into())
    }

    /// After a revocation made in this process: forgets every verified key here, and
    /// touches the marker so other servers on this data directory forget theirs.
    pub fn keys_revoked(&self) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).accounts.clear();
        if let Some(dir) = self.marker.parent()
            && let Err(err) = announce_revocation(dir)
        {
            tracing::warn!(error = %err, "could not announce a key revocation");
        }
    }

    fn cached(&self, hash: &str) -> Option<String> {
        let marker = std::fs::metadata(&self.marker).and_then(|m| m.modified()).ok();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.marker_seen != marker {
            cache.marker_seen = marker;
            cache.accounts.clear();
            return None;
        }
        match cache.accounts.get(hash) {
            Some((account, verified)) if verified.elapsed() < CACHE_TTL => Some(account.clone()),
            _ => None,
        }
    }
}

/// Tells running servers on this data directory that keys were revoked.
pub fn announce_revocation(data_dir: &Path) -> std::io::Result<()> {
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos();
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(data_dir.join(KEYS_CHANGED_FILE), stamp.to_string())
}

/// The web-app session token of the request, if it carries one.
pub fn session_token<T>(req: &Request<T>) -> Option<&str> {
    let token = req.metadata().get(SESSION_METADATA)?.to_str().ok()?.trim();
    (!token.is_empty()).then_some(token)
}

/// The token of an `authorization: Bearer <token>` header, if there is one.
pub fn bearer_token<T>(req: &Request<T>) -> Option<&str> {
    let value = req.metadata().get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: &str) -> Request<()> {
        let mut req = Request::new(());
        req.metadata_mut().insert("authorization", value.parse().unwrap());
        req
    }

    #[test]
    fn reads_bearer_tokens() {
        assert_eq!(bearer_token(&with_auth("Bearer rsk_abc")), Some("rsk_abc"));
        assert_eq!(bearer_token(&with_auth("bearer   rsk_abc ")), Some("rsk_abc"));
        assert_eq!(bearer_token(&with_auth("Basic dXNlcg==")), None);
        assert_eq!(bearer_token(&with_auth("Bearer ")), None);
        assert_eq!(bearer_token(&Request::new(())), None);
    }
}
