//! Passwords: argon2id with the crate's default parameters (19 MiB, 2 passes), as PHC
//! strings, so the parameters travel with each hash and can be raised later.
//!
//! Hashing is deliberately slow and memory-hungry, so its cost is bounded here, whoever
//! asks (sign-in, sign-up, invites):
//! - at most one hash per core at a time ([`WORKERS`]), on the blocking pool; a request
//!   that cannot start one within [`WAIT`] gets 429 `overloaded` (with `Retry-After`);
//! - each worker hashes in a 19 MiB buffer kept for reuse, never freed: a burst of
//!   hundreds of sign-ins costs the same memory as two, where fresh buffers would leave
//!   glibc's per-thread arenas holding ~19 MiB each long after the burst.
//!
//! A sign-in for an email roost does not know verifies against a fixed decoy hash: the
//! answer and the time it takes are the same as for a wrong password.

use std::{
    sync::{LazyLock, Mutex},
    time::Duration,
};

use argon2::{
    Algorithm, Argon2, Block, Params, Version,
    password_hash::phc::{Output, ParamsString, PasswordHash, Salt},
};
use roost_proto::{ApiError, ErrorReason};
use subtle::ConstantTimeEq as _;
use tokio::sync::Semaphore;

use crate::Result;

/// Shortest password accepted.
pub const MIN_LEN: usize = 10;
/// Longest password accepted (argon2 takes any length; this bounds the work a request asks).
pub const MAX_LEN: usize = 1000;
/// How long a request waits for a hashing worker before it is refused.
pub const WAIT: Duration = Duration::from_secs(3);
/// Largest memory a stored hash may ask for (its `m` parameter, KiB): a planted hash with a
/// huge `m` must not make a sign-in allocate it.
const MAX_M_COST: u32 = 256 * 1024;

/// Hashing workers: one per core.
static WORKERS: LazyLock<Semaphore> =
    LazyLock::new(|| Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())));
/// Buffers of idle workers, reused by the next hash.
static BUFFERS: Mutex<Vec<Vec<Block>>> = Mutex::new(Vec::new());

/// A hash of a password nobody has, verified when the email is unknown.
static DECOY: LazyLock<String> =
    LazyLock::new(|| hash_with(b"roost decoy password, never used", &mut Vec::new()).unwrap_or_default());

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

/// Runs `work` on a hashing worker with a reusable buffer; 429 `overloaded` when none is
/// free within [`WAIT`].
async fn on_worker<T: Send + 'static>(work: impl FnOnce(&mut Vec<Block>) -> T + Send + 'static) -> Result<T> {
    let _permit = match tokio::time::timeout(WAIT, WORKERS.acquire()).await {
        Ok(Ok(permit)) => permit,
        _ => {
            return Err(ApiError::new(
                ErrorReason::Overloaded,
                "too many password checks at once; try again in a moment",
            )
            .into());
        }
    };
    let mut buffer = BUFFERS.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_default();
    let done = tokio::task::spawn_blocking(move || {
        let out = work(&mut buffer);
        (out, buffer)
    })
    .await;
    match done {
        Ok((out, buffer)) => {
            BUFFERS.lock().unwrap_or_else(|p| p.into_inner()).push(buffer);
            Ok(out)
        }
        Err(_) => Err(ApiError::internal("the password check failed").into()),
    }
}

/// The PHC string of a new password (argon2id, random salt).
pub async fn hash(password: &str) -> Result<String> {
    let password = password.to_owned();
    on_worker(move |buffer| hash_with(password.as_bytes(), buffer))
        .await?
        .ok_or_else(|| ApiError::internal("the password could not be hashed").into())
}

/// Whether `password` matches `stored` (a PHC string); with `None` (no such user, or no
/// password set yet) the decoy is verified instead and the answer is `false`. Fails only
/// when every worker stays busy (429 `overloaded`).
pub async fn verify(password: &str, stored: Option<String>) -> Result<bool> {
    let password = password.to_owned();
    on_worker(move |buffer| {
        let (phc, real) = match stored {
            Some(phc) => (phc, true),
            None => (DECOY.clone(), false),
        };
        let matched = verify_with(password.as_bytes(), &phc, buffer);
        real && matched
    })
    .await
}

/// `buffer`, grown to `blocks` blocks, as the slice argon2 works in.
fn memory(buffer: &mut Vec<Block>, blocks: usize) -> &mut [Block] {
    if buffer.len() < blocks {
        buffer.resize(blocks, Block::default());
    }
    &mut buffer[..blocks]
}

fn hash_with(password: &[u8], buffer: &mut Vec<Block>) -> Option<String> {
    let params = Params::default();
    let mut salt = [0u8; Salt::RECOMMENDED_LENGTH];
    getrandom::fill(&mut salt).ok()?;
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    argon2.hash_password_into_with_memory(password, &salt, &mut out, memory(buffer, params.block_count())).ok()?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).ok()?,
        salt: Some(Salt::new(&salt).ok()?),
        hash: Some(Output::new(&out).ok()?),
    };
    Some(phc.to_string())
}

fn verify_with(password: &[u8], phc: &str, buffer: &mut Vec<Block>) -> bool {
    let Ok(parsed) = PasswordHash::new(phc) else { return false };
    let (Ok(algorithm), Ok(params), Some(salt), Some(expected)) = (
        Algorithm::try_from(parsed.algorithm.as_str()),
        Params::try_from(&parsed),
        parsed.salt.as_ref(),
        parsed.hash.as_ref(),
    ) else {
        return false;
    };
    if params.m_cost() > MAX_M_COST {
        return false;
    }
    let version = parsed.version.and_then(|v| Version::try_from(v).ok()).unwrap_or_default();
    let mut out = vec![0u8; expected.len()];
    let argon2 = Argon2::new(algorithm, version, params.clone());
    argon2
        .hash_password_into_with_memory(password, salt.as_ref(), &mut out, memory(buffer, params.block_count()))
        .is_ok()
        && bool::from(out.as_slice().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use argon2::{PasswordHasher as _, PasswordVerifier as _};

    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_are_salted() {
        let a = hash("correct horse battery").await.unwrap();
        let b = hash("correct horse battery").await.unwrap();
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "each hash has its own salt");
        assert!(verify("correct horse battery", Some(a.clone())).await.unwrap());
        assert!(!verify("wrong horse battery", Some(a.clone())).await.unwrap());
        assert!(!verify("roost decoy password, never used", None).await.unwrap(), "the decoy never signs anyone in");
        assert!(!verify("x", Some("not a phc string".into())).await.unwrap());
        // The argon2 crate's own verifier agrees, both ways.
        let parsed = PasswordHash::new(&a).unwrap();
        assert!(Argon2::default().verify_password(b"correct horse battery", &parsed).is_ok());
        let theirs = Argon2::default().hash_password(b"another one!").unwrap().to_string();
        assert!(verify("another one!", Some(theirs)).await.unwrap());
    }

    #[tokio::test]
    async fn a_hash_asking_for_huge_memory_is_not_computed() {
        let huge = "$argon2id$v=19$m=4194304,t=1,p=1$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        assert!(!verify("anything at all", Some(huge.into())).await.unwrap());
    }

    #[test]
    fn strength_rules_name_the_limit() {
        assert!(check_strength("short").is_err());
        assert!(check_strength("long enough!").is_ok());
        assert!(check_strength(&"x".repeat(MAX_LEN + 1)).is_err());
    }
}
