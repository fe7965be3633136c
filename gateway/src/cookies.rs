//! The two cookies the pages use, and the CSRF defence built on one of them.
//!
//! - `roost_token`: the dashboard token a visitor typed into the sign-in form, so pages and
//!   the streams their scripts open need no `Authorization` header. HttpOnly (scripts never
//!   read it), SameSite=Strict (no other site's page sends it), Path=/. It grants what the
//!   token grants: reads on GET and, through page forms only, changes.
//! - `roost_csrf`: a random 128-bit value (double-submit) for visitors who hold neither a
//!   session nor a sign-in cookie (the sign-in forms, a loopback dashboard): every page form
//!   carries it in a hidden `csrf` field, and a form post is refused unless the field equals
//!   the cookie.
//!
//! A visitor with a web-app session or a sign-in cookie gets a CSRF value derived from those
//! ([`bound_csrf`]) instead: a one-way hash of the secrets only their browser holds, so a
//! value (and a `roost_csrf` cookie) taken from another visitor's browser, or planted by a
//! sibling subdomain, does not pass for theirs. Together with the Origin check the access
//! policy applies to every mutating request, a cross-site form post changes nothing.
//!
//! Every cookie gets `Secure` when the page came over https ([`is_https`]) or roost's
//! `--public-url` is https, so none of them is ever sent in clear.
//!
//! This module sits below both the pages, which set and read these cookies, and the access
//! policy (`access`), which takes the sign-in cookie as the dashboard token: the pages use
//! the policy, so the policy cannot reach its cookie through the pages.

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

/// Adds a `Set-Cookie` for `name`: HttpOnly, SameSite=Strict, Path=/, `Max-Age` when given
/// (else a session cookie; `Max-Age=0` deletes it), and `Secure` when `secure`.
pub fn set(headers: &mut HeaderMap, name: &str, value: &str, max_age_secs: Option<u64>, secure: bool) {
    let mut cookie = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age_secs {
        cookie.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        cookie.push_str("; Secure");
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

/// The CSRF value of a visitor holding a web-app session and/or a sign-in cookie: the first
/// 16 bytes (hex) of SHA-256 over a label and both values. Only that visitor's browser
/// knows the inputs, and the hash does not give them away (the value is in every form).
pub fn bound_csrf(session: Option<&str>, token: Option<&str>) -> String {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    hash.update(b"roost csrf v1\0");
    hash.update(session.unwrap_or_default().as_bytes());
    hash.update(b"\0");
    hash.update(token.unwrap_or_default().as_bytes());
    hex::encode(&hash.finalize()[..16])
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
    fn bound_csrf_values_depend_on_each_secret() {
        let a = bound_csrf(Some("rws_a"), None);
        assert!(is_csrf_shaped(&a));
        assert_eq!(a, bound_csrf(Some("rws_a"), None));
        assert_ne!(a, bound_csrf(Some("rws_b"), None));
        assert_ne!(a, bound_csrf(None, Some("rws_a")));
        assert_ne!(a, bound_csrf(Some("rws_a"), Some("t")));
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
        set(&mut headers, TOKEN, "t", Some(5), false);
        let cookie = headers[header::SET_COOKIE].to_str().unwrap();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Max-Age=5"));
        assert!(!cookie.contains("Secure"));
        set(&mut headers, CSRF, "c", None, true);
        assert!(headers.get_all(header::SET_COOKIE).iter().nth(1).unwrap().to_str().unwrap().ends_with("; Secure"));
        assert!(is_cookie_safe("abc-DEF_123.~") && !is_cookie_safe("a;b") && !is_cookie_safe("a b"));
    }
}
