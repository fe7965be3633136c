//! Who is calling: `authorization: Bearer <API key>` → the account it acts as.
//!
//! The gateway copies HTTP headers into gRPC metadata, so REST, gRPC and MCP callers are
//! authenticated by this one function.

use roost_proto::ApiError;
use tonic::Request;

use crate::{Result, store::Store};

/// The account the request's API key acts as; 401 `unauthenticated` when the key is
/// missing, malformed, unknown or revoked.
pub async fn account_of<T>(store: &Store, req: &Request<T>) -> Result<String> {
    let key = bearer_token(req)
        .ok_or_else(|| ApiError::unauthenticated("missing API key: send `Authorization: Bearer <API key>`"))?;
    store.account_for_key(key).await?.ok_or_else(|| ApiError::unauthenticated("invalid or revoked API key").into())
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
