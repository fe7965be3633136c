//! Turning an HTTP request into a `tonic::Request` for the core.

use axum::extract::FromRequestParts;
use http::{Extensions, HeaderMap, request::Parts};
use std::convert::Infallible;

/// What a REST request carries to the core besides its body: every header (so
/// `authorization`, `origin` and `host` arrive as gRPC metadata, exactly as a gRPC client
/// would send them) and the request extensions (such as the peer address).
#[derive(Debug, Clone)]
pub struct Call {
    headers: HeaderMap,
    extensions: Extensions,
}

impl Call {
    /// The call of a request taken apart (for handlers that read the body themselves).
    pub fn from_parts(parts: &Parts) -> Self {
        Self { headers: parts.headers.clone(), extensions: parts.extensions.clone() }
    }

    /// Sets (or overwrites) a header before the call is made, such as the message source.
    pub fn with_header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.insert(name, http::HeaderValue::from_static(value));
        self
    }

    /// Carries a web-app session token to the core (`x-roost-session`), as the pages do
    /// with their session cookie.
    pub fn with_session(mut self, token: &str) -> Self {
        if let Ok(value) = http::HeaderValue::from_str(token) {
            self.headers.insert("x-roost-session", value);
        }
        self
    }

    /// The TCP peer the request came from.
    pub fn peer(&self) -> Option<std::net::SocketAddr> {
        self.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0)
    }

    /// The request's headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The gRPC request the core's service trait takes.
    pub fn request<T>(self, message: T) -> tonic::Request<T> {
        let mut http = http::Request::new(message);
        *http.headers_mut() = self.headers;
        *http.extensions_mut() = self.extensions;
        tonic::Request::from_http(http)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Call {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self { headers: parts.headers.clone(), extensions: parts.extensions.clone() })
    }
}
