//! Paths and query strings roost cannot read, refused before routing with the JSON error
//! body (axum's own extractors would answer such requests with plain-text 400s).
//!
//! - A path that percent-decodes to invalid UTF-8 or holds a NUL (`/api/crons/%ff%fe`,
//!   `/api/instances/ins_a%00b`) cannot name anything roost has: 404 `not_found`.
//! - A query parameter that decodes to invalid UTF-8 or holds a NUL is 400
//!   `invalid_argument` naming the parameter, as a JSON body field would be.

use axum::{
    extract::Request,
    middleware::Next,
    response::{IntoResponse, Response},
};
use roost_proto::{ApiError, ErrorReason};

use roost_kit::HttpError;

/// The middleware: refuses unreadable URIs, passes the rest on.
pub(crate) async fn refuse_unreadable(req: Request, next: Next) -> Response {
    match check(req.uri().path(), req.uri().query()) {
        Ok(()) => next.run(req).await,
        Err(err) => HttpError(err).into_response(),
    }
}

fn check(path: &str, query: Option<&str>) -> Result<(), ApiError> {
    let readable = |bytes: &[u8]| std::str::from_utf8(bytes).is_ok_and(|text| !text.contains('\0'));
    if path.contains('%') && !readable(&percent_decode(path.as_bytes(), false)) {
        return Err(ApiError::new(ErrorReason::NotFound, "no such resource: the path is not readable text"));
    }
    for pair in query.unwrap_or_default().split('&').filter(|p| p.contains('%')) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = percent_decode(name.as_bytes(), true);
        if !readable(&name) || !readable(&percent_decode(value.as_bytes(), true)) {
            let shown = String::from_utf8_lossy(&name).replace('\0', "\\u0000");
            return Err(ApiError::invalid_argument(format!(
                "query parameter {shown} is not readable text (invalid UTF-8 or a NUL character)"
            )));
        }
    }
    Ok(())
}

/// `%XX` → the byte; in a query string also `+` → space. A malformed escape stays as is,
/// as the extractors treat it.
pub(crate) fn percent_decode(input: &[u8], plus_is_space: bool) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'%' if i + 2 < input.len() => match (hex(input[i + 1]), hex(input[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            byte => out.push(byte),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_paths_are_404_and_parameters_400() {
        assert!(check("/api/instances/ins_abc", Some("limit=5")).is_ok());
        assert!(check("/api/instances/caf%C3%A9", Some("q=caf%C3%A9+x")).is_ok());
        assert_eq!(check("/api/crons/%ff%fe", None).unwrap_err().reason(), ErrorReason::NotFound);
        assert_eq!(check("/api/instances/ins_a%00b", None).unwrap_err().reason(), ErrorReason::NotFound);
        let err = check("/api/logs", Some("level=%00")).unwrap_err();
        assert_eq!(err.reason(), ErrorReason::InvalidArgument);
        assert!(err.message().contains("level"), "{}", err.message());
        assert_eq!(check("/x", Some("a=%zz&b=%")).map_err(|e| e.reason()), Ok(()));
    }
}
