//! Who is calling: `authorization: Bearer <API key>` → the account it acts as.
//!
//! The gateway copies HTTP headers into gRPC metadata, so REST, gRPC and MCP callers are
//! authenticated by this one [`Authenticator`].
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
};

/// How long a verified key is trusted without asking the store again.
pub const CACHE_TTL: Duration = Duration::from_secs(1);
/// Most keys remembered; past this the cache starts over.
const CACHE_CAPACITY: usize = 16 * 1024;
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

    /// The account the request's API key acts as; 401 `unauthenticated` when the key is
    /// missing, malformed, unknown or revoked.
    pub async fn account_of<T>(&self, req: &Request<T>) -> Result<String> {
        let key = bearer_token(req)
            .ok_or_else(|| ApiError::unauthenticated("missing API key: send `Authorization: Bearer <API key>`"))?;
        if !key.starts_with(KEY_PREFIX) {
            return Err(ApiError::unauthenticated("invalid or revoked API key").into());
        }
        let hash = hash_key(key);
        if let Some(account) = self.cached(&hash) {
            return Ok(account);
        }
        let account = self
            .store
            .account_for_hash(&hash)
            .await?
            .ok_or_else(|| ApiError::unauthenticated("invalid or revoked API key"))?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.accounts.len() >= CACHE_CAPACITY {
            cache.accounts.clear();
        }
        cache.accounts.insert(hash, (account.clone(), Instant::now()));
        Ok(account)
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
