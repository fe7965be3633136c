//! Passwords: argon2id with the crate's default parameters (19 MiB, 2 passes), as PHC
//! strings, so the parameters travel with each hash and can be raised later.
//!
//! Hashing is deliberately slow, so it runs on the blocking pool, and a sign-in for an
//! email roost does not know verifies against a fixed decoy hash: the answer and the time
//! it takes are the same as for a wrong password.

use std::sync::LazyLock;

use argon2::{
    Argon2,
    password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash},
};
use roost_proto::ApiError;

use crate::Result;

/// Shortest password accepted.
pub const MIN_LEN: usize = 10;
/// Longest password accepted (argon2 takes any length; this bounds the work a request asks).
pub const MAX_LEN: usize = 1000;

/// A hash of a password nobody has, verified when the email is unknown.
static DECOY: LazyLock<String> = LazyLock::new(|| hash_now("roost decoy password, never used").unwrap_or_default());

/// Refuses passwords that are too short or too long, naming the rule.
pub fn check_strength(password: &str) -> Result<()> {
    let chars = password.chars().count();
    if chars < MIN_LEN {
        return Err(ApiError::invalid_argument(format!("the password needs at least {MIN_LEN} characters")).into());
    }
    if password.len() > MAX_LEN {
        return Err(ApiError::invalid_argument(format!("the password may have at most {MAX_LEN} bytes")).into());
    }
    Ok(())
}

/// The PHC string of a new password (argon2id, random salt).
pub async fn hash(password: &str) -> Result<String> {
    let password = password.to_owned();
    let hashed = tokio::task::spawn_blocking(move || hash_now(&password)).await;
    match hashed {
        Ok(Some(phc)) => Ok(phc),
        _ => Err(ApiError::new(roost_proto::ErrorReason::Internal, "the password could not be hashed").into()),
    }
}

fn hash_now(password: &str) -> Option<String> {
    Argon2::default().hash_password(password.as_bytes()).ok().map(|h| h.to_string())
}

/// Whether `password` matches `stored` (a PHC string); with `None` (no such user, or no
/// password set yet) the decoy is verified instead and the answer is `false`.
pub async fn verify(password: &str, stored: Option<String>) -> bool {
    let password = password.to_owned();
    let checked = tokio::task::spawn_blocking(move || {
        let (phc, real) = match stored {
            Some(phc) => (phc, true),
            None => (DECOY.clone(), false),
        };
        let matched = PasswordHash::new(&phc)
            .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok());
        real && matched
    })
    .await;
    checked.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_are_salted() {
        let a = hash("correct horse battery").await.unwrap();
        let b = hash("correct horse battery").await.unwrap();
        assert!(a.starts_with("$argon2id$"), "{a}");
        assert_ne!(a, b, "each hash has its own salt");
        assert!(verify("correct horse battery", Some(a.clone())).await);
        assert!(!verify("wrong horse battery", Some(a)).await);
        assert!(!verify("roost decoy password, never used", None).await, "the decoy never signs anyone in");
        assert!(!verify("x", Some("not a phc string".into())).await);
    }

    #[test]
    fn strength_rules_name_the_limit() {
        assert!(check_strength("short").is_err());
        assert!(check_strength("long enough!").is_ok());
        assert!(check_strength(&"x".repeat(MAX_LEN + 1)).is_err());
    }
}
