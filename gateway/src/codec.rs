//! Protobuf-or-JSON request bodies, as OTLP/HTTP and node push send them.
//!
//! - `Content-Type`: `application/x-protobuf` (or `application/protobuf`) or
//!   `application/json`; anything else, or none, is 415.
//! - `Content-Encoding`: `gzip` or none; anything else is 415 (JSON bodies follow the same
//!   rule). The body is limited before and after decompression (413), so a small gzip bomb
//!   cannot expand past the limit.
//! - A body that does not decode is 400.
//! - Its decompressed size is held in the ingest budget ([`crate::budget`]) from before it
//!   is read until the caller drops the returned [`Held`]: 429 `overloaded` when full.

use std::io::Read;

use axum::{body::Body, extract::Request};
use http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use prost::Message;
use roost_proto::{ApiError, ErrorReason};
use serde::de::DeserializeOwned;

use roost_kit::budget::{Held, IngestBudget, JSON_EXPANSION, PROTOBUF_EXPANSION, gzip_stated_size};

use crate::HttpError;

/// How a body is (and its answer will be) encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Binary protobuf.
    Protobuf,
    /// JSON.
    Json,
}

impl Encoding {
    /// The content type of this encoding.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

/// Reads and decodes a message, holding its size in `budget` (keep the [`Held`] until the
/// message is stored). Errors carry the encoding the client used (JSON when it could not be
/// told), to answer in.
pub async fn decode<T: Message + Default + DeserializeOwned>(
    req: Request,
    limit: usize,
    budget: &IngestBudget,
) -> Result<(T, Encoding, Held), (ApiError, Encoding)> {
    let content_type = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let encoding = match essence.as_str() {
        "application/x-protobuf" | "application/protobuf" => Encoding::Protobuf,
        "application/json" => Encoding::Json,
        _ => {
            let why = format!("Content-Type must be application/x-protobuf or application/json, not {content_type:?}");
            return Err((ApiError::new(ErrorReason::UnsupportedMediaType, why), Encoding::Json));
        }
    };
    let gzip = gzipped(req.headers()).map_err(|e| (e, encoding))?;
    // What a body of `n` bytes costs once decoded, as the budget counts it.
    let decoded = |n: usize| {
        n.min(limit).saturating_mul(match encoding {
            Encoding::Protobuf => PROTOBUF_EXPANSION,
            Encoding::Json => JSON_EXPANSION,
        })
    };
    let mut held = Held::default();
    let stated = req.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if let Some(length) = stated {
        budget.hold(&mut held, decoded(length)).await.map_err(|e| (e, encoding))?;
    }
    let raw = read_limited(req.into_body(), limit).await.map_err(|e| (e.0, encoding))?;
    budget.hold(&mut held, decoded(raw.len())).await.map_err(|e| (e, encoding))?;
    let bytes = if gzip {
        let expected = gzip_stated_size(&raw).unwrap_or(raw.len());
        budget.hold(&mut held, decoded(expected)).await.map_err(|e| (e, encoding))?;
        let plain = gunzip(&raw, limit).map_err(|e| (e, encoding))?;
        drop(raw);
        budget.hold(&mut held, decoded(plain.len())).await.map_err(|e| (e, encoding))?;
        bytes::Bytes::from(plain)
    } else {
        raw
    };
    let message = match encoding {
        Encoding::Protobuf => T::decode(bytes.as_ref())
            .map_err(|e| ApiError::invalid_argument(format!("cannot decode the protobuf body: {e}")))
            .map_err(|e| (e, encoding))?,
        Encoding::Json => serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::invalid_argument(format!("invalid JSON body: {e}")))
            .map_err(|e| (e, encoding))?,
    };
    Ok((message, encoding, held))
}

/// Whether the body is gzipped (`Content-Encoding: gzip`); none or `identity` is plain,
/// any other encoding is 415: roost would otherwise read bytes it cannot decode.
pub(crate) fn gzipped(headers: &http::HeaderMap) -> Result<bool, ApiError> {
    let encoding = headers.get(CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase());
    match encoding.as_deref() {
        None | Some("" | "identity") => Ok(false),
        Some("gzip") => Ok(true),
        Some(other) => Err(ApiError::new(
            ErrorReason::UnsupportedMediaType,
            format!("Content-Encoding {other:?} is not supported; use gzip or none"),
        )),
    }
}

/// Decompresses, refusing output over `limit` bytes.
pub(crate) fn gunzip(compressed: &[u8], limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    let read = flate2::read::GzDecoder::new(compressed)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ApiError::invalid_argument(format!("cannot gunzip the body: {e}")))?;
    if read > limit {
        return Err(ApiError::new(
            ErrorReason::PayloadTooLarge,
            format!("the body is over {limit} bytes once decompressed"),
        ));
    }
    Ok(out)
}

/// Reads a body of at most `limit` bytes.
///
/// Like [`gzipped`] and [`gunzip`], it is body reading that [`decode`] and the strict JSON
/// extractor (`extract::JsonBody`, and the routes taking raw bodies) share, so it lives
/// here, the lower of the two modules: `extract` uses `codec`, never the reverse.
pub(crate) async fn read_limited(body: Body, limit: usize) -> Result<bytes::Bytes, HttpError> {
    axum::body::to_bytes(body, limit).await.map_err(|err| {
        let too_large =
            std::error::Error::source(&err).is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if too_large {
            HttpError::new(ErrorReason::PayloadTooLarge, format!("request body is over the {limit}-byte limit"))
        } else {
            HttpError::new(ErrorReason::InvalidArgument, format!("could not read the request body: {err}"))
        }
    })
}
