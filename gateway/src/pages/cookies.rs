//! The two cookies the pages use, and the CSRF defence built on one of them.
//!
//! - `roost_token`: the dashboard token a visitor typed into the sign-in form, so pages and
//!   the streams their scripts open need no `Authorization` header. HttpOnly (scripts never
//!   read it), SameSite=Strict (no other site's page sends it), Path=/. It grants what the
//!   token grants: reads on GET and, through page forms only, changes.
//! - `roost_csrf`: a random 128-bit value (double-submit): every page form carries it in a
//!   hidden `csrf` field, and a form post is refused unless the field equals the cookie. A
//!   page on another site can neither read the cookie nor set it, so it cannot forge the
//!   field; together with the Origin check the access policy applies to every mutating
//!   request, a cross-site form post changes nothing.

use http::{HeaderMap, HeaderValue, header};

/// The sign-in cookie's name.
pub const TOKEN: &str = "roost_token";
/// The CSRF cookie's name.
pub const CSRF: &str = "roost_csrf";
/// The web app's session cookie.
pub const SESSION: &str = "roost_session";

/// How long a browser keeps the session cookie: browsers' own cap. The session itself ends
/// after 30 idle days or at sign-out, decided by the store (`webapp::sessions`).
pub const SESSION_MAX_AGE_SECS: u64 = 400 * 24 * 3600;

/// How long the sign-in cookie lasts.
pub const TOKEN_MAX_AGE_SECS: u64 = 30 * 24 * 3600;

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn get<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"'))
        .filter(|value| !value.is_empty())
}

/// Adds a `Set-Cookie` for `name`: HttpOnly, SameSite=Strict, Path=/, and `Max-Age` when
/// given (else a session cookie). `Max-Age=0` deletes it.
pub fn set(headers: &mut HeaderMap, name: &str, value: &str, max_age_secs: Option<u64>) {
    let mut cookie = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age_secs {
        cookie.push_str(&format!("; Max-Age={age}"));
    }
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.append(header::SET_COOKIE, value);
    }
}

/// Sets the web-app session cookie: HttpOnly, SameSite=Lax (a link from another site to
/// roost arrives signed in; a form from another site does not carry it), Path=/, and
/// Secure when the page was served over https. An empty value with `Max-Age=0` deletes it.
pub fn set_session(headers: &mut HeaderMap, token: &str, secure: bool) {
    let age = if token.is_empty() { 0 } else { SESSION_MAX_AGE_SECS };
    let mut cookie = format!("{SESSION}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={age}");
    if secure {
        cookie.push_str("; Secure");
    }
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.append(header::SET_COOKIE, value);
    }
}

/// Whether the request reached roost over https: a TLS-terminating proxy says so with
/// `X-Forwarded-Proto` (only ever used to add `Secure`, so a lying header costs nothing).
pub fn is_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').next().is_some_and(|p| p.trim().eq_ignore_ascii_case("https")))
}

/// A new CSRF value: 16 random bytes in hex.
pub fn new_csrf() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    hex::encode(bytes)
}

/// Whether a cookie value looks like one [`new_csrf`] made (a value planted by something
/// else is replaced, not trusted).
pub fn is_csrf_shaped(value: &str) -> bool {
    value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether a token may be stored in a cookie as it is (printable ASCII without the
/// characters that end or quote a cookie value).
pub fn is_cookie_safe(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b';' | b',' | b'"' | b'\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; roost_csrf=abc"));
        headers.append(header::COOKIE, HeaderValue::from_static("roost_token=\"t\""));
        assert_eq!(get(&headers, CSRF), Some("abc"));
        assert_eq!(get(&headers, TOKEN), Some("t"));
        assert_eq!(get(&headers, "b"), None);
    }

    #[test]
    fn csrf_values_are_random_hex() {
        let (a, b) = (new_csrf(), new_csrf());
        assert!(is_csrf_shaped(&a) && is_csrf_shaped(&b));
        assert_ne!(a, b);
        assert!(!is_csrf_shaped("planted"));
    }

    #[test]
    fn set_cookies_are_http_only_and_strict() {
        let mut headers = HeaderMap::new();
        set(&mut headers, TOKEN, "t", Some(5));
        let cookie = headers[header::SET_COOKIE].to_str().unwrap();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Max-Age=5"));
        assert!(is_cookie_safe("abc-DEF_123.~") && !is_cookie_safe("a;b") && !is_cookie_safe("a b"));
    }
}
