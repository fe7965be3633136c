//! Strict JSON request bodies.
//!
//! Clients get a clear 4xx for anything wrong with a body: 415 for a content type other
//! than JSON or a `Content-Encoding` other than gzip, 413 over the size limit, 400 for malformed JSON, a non-object, an unknown
//! field, a wrongly typed value or text holding a NUL character (the message names the
//! problem). An empty body is `{}`, so `POST /api/version` with no body behaves like the
//! documented `{}`.

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use http::header::CONTENT_TYPE;
use http::request::Parts;
use roost_proto::ErrorReason;
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    Core, HttpError,
    codec::{gunzip, gzipped, read_limited},
};

/// A JSON body decoded into `T` under the rules above.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned + Serialize> FromRequest<Core> for JsonBody<T> {
    type Rejection = HttpError;

    async fn from_request(req: Request, core: &Core) -> Result<Self, Self::Rejection> {
        let limit = core.options.max_json_body_bytes;
        let content_type = req.headers().get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or_default());
        if content_type.is_some_and(|ct| !is_json(ct)) {
            return Err(HttpError::new(
                ErrorReason::UnsupportedMediaType,
                "request body must be JSON (Content-Type: application/json)",
            ));
        }
        let gzip = gzipped(req.headers())?;
        let bytes = read_limited(req.into_body(), limit).await?;
        if gzip {
            return parse(&gunzip(&bytes, limit)?).map(JsonBody);
        }
        parse(&bytes).map(JsonBody)
    }
}

/// The `{instance_id}` of a path.
#[derive(Debug)]
pub struct InstanceId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for InstanceId {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(id) = Path::<String>::from_request_parts(parts, state).await.map_err(|err| {
            HttpError::new(ErrorReason::InvalidArgument, format!("bad instance id in the path: {err}"))
        })?;
        Ok(Self(id))
    }
}

/// The `?limit=` of a history read (absent = the default; the core clamps it).
#[derive(Debug, Default, serde::Deserialize)]
pub struct LimitQuery {
    /// Most rows wanted.
    pub limit: Option<i32>,
}

impl<S: Send + Sync> FromRequestParts<S> for LimitQuery {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(query) = Query::<LimitQuery>::from_request_parts(parts, state).await.map_err(|err| {
            HttpError::new(ErrorReason::InvalidArgument, format!("bad query string: {}", err.body_text()))
        })?;
        Ok(query)
    }
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn parse<T: DeserializeOwned + Serialize>(bytes: &[u8]) -> Result<T, HttpError> {
    let text = bytes.trim_ascii();
    let text: &[u8] = if text.is_empty() { b"{}" } else { text };
    if text.first() != Some(&b'{') {
        // serde would read a struct from an array by position; roost's bodies are objects.
        return Err(HttpError::new(ErrorReason::InvalidArgument, "request body must be a JSON object"));
    }
    let value: T = serde_json::from_slice(text)
        .map_err(|err| HttpError::new(ErrorReason::InvalidArgument, format!("invalid JSON body: {err}")))?;
    // JSON can only carry U+0000 escaped, so bodies without the escape skip the walk.
    if text.windows(6).any(|w| w == b"\\u0000")
        && let Some(field) = roost_proto::nul::nul_field(&value)
    {
        return Err(HttpError(roost_proto::codec::nul_refused(&field)));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_proto::v1::GetVersionRequest;

    #[test]
    fn empty_body_is_an_empty_object() {
        assert!(parse::<GetVersionRequest>(b"  ").is_ok());
        assert!(parse::<GetVersionRequest>(b"{}").is_ok());
    }

    #[test]
    fn bad_bodies_are_invalid_arguments() {
        for body in [&b"{"[..], b"[]", b"\"x\"", b"{\"unknown\":1}", b"null"] {
            let err = parse::<GetVersionRequest>(body).unwrap_err();
            assert_eq!(err.0.reason(), ErrorReason::InvalidArgument, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn text_with_nul_is_refused_naming_the_field() {
        let err = parse::<roost_proto::v1::ConfigureRequest>(br#"{"agent_brief": "a\u0000b"}"#).unwrap_err();
        assert_eq!(err.0.reason(), ErrorReason::InvalidArgument);
        assert!(err.0.message().starts_with("agent_brief contains a NUL"), "{}", err.0.message());
        // An escaped backslash followed by "u0000" is not a NUL.
        assert!(parse::<roost_proto::v1::ConfigureRequest>(br#"{"agent_brief": "a\\u0000b"}"#).is_ok());
    }

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
    }
}
