//! The brake on password guessing: 10 failed sign-ins per email or per client address in
//! 10 minutes, then 429 until the oldest failure leaves the window.
//!
//! Kept in memory, per process: a restart forgets it, which costs an attacker a restart
//! they cannot cause, and a sign-in is never slowed by a store write. A success clears the
//! email's count (not the address's, so one working account cannot launder guesses).

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use roost_proto::{ApiError, ErrorReason};

use crate::Result;

/// Failures allowed per key in [`WINDOW`].
pub const LIMIT: usize = 10;
/// How far back failures count.
pub const WINDOW: Duration = Duration::from_secs(600);
/// Keys remembered before expired ones are swept (and, if all are live, forgotten).
const CAPACITY: usize = 100_000;

/// Failed sign-ins by key (`email:…`, `addr:…`).
#[derive(Default)]
pub struct SignInThrottle {
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl SignInThrottle {
    /// 429 `rate_limited` when any of `keys` has used up its failures.
    pub fn check(&self, keys: &[String]) -> Result<()> {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        for key in keys {
            if let Some(times) = failures.get_mut(key) {
                while times.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
                    times.pop_front();
                }
                if times.len() >= LIMIT {
                    let wait = times.front().map_or(WINDOW, |t| WINDOW.saturating_sub(now.duration_since(*t)));
                    return Err(ApiError::new(
                        ErrorReason::RateLimited,
                        format!("too many failed sign-ins; try again in {} s", wait.as_secs().max(1)),
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Counts a failure against every key.
    pub fn failed(&self, keys: &[String]) {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() >= CAPACITY {
            failures.retain(|_, times| times.back().is_some_and(|t| now.duration_since(*t) < WINDOW));
            if failures.len() >= CAPACITY {
                failures.clear();
            }
        }
        for key in keys {
            let times = failures.entry(key.clone()).or_default();
            times.push_back(now);
            if times.len() > LIMIT {
                times.pop_front();
            }
        }
    }

    /// Forgets a key's failures (after a successful sign-in of that email).
    pub fn clear(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_failures_close_the_door_for_that_key_only() {
        let throttle = SignInThrottle::default();
        let keys = ["email:a@example.com".to_owned(), "addr:10.0.0.1".to_owned()];
        for _ in 0..LIMIT {
            throttle.check(&keys).unwrap();
            throttle.failed(&keys);
        }
        let err = throttle.check(&keys).unwrap_err().to_api();
        assert_eq!(err.reason(), ErrorReason::RateLimited);
        assert!(throttle.check(&["email:b@example.com".to_owned(), "addr:10.0.0.2".to_owned()]).is_ok());
        throttle.clear("email:a@example.com");
        assert!(throttle.check(&["email:a@example.com".to_owned()]).is_ok());
        assert!(throttle.check(&["addr:10.0.0.1".to_owned()]).is_err(), "the address still counts");
    }
}
