//! The brake on guessing: at most [`LIMIT`] failed attempts per key (`email:…`, `addr:…`)
//! in [`WINDOW`], then 429 `rate_limited` until the oldest leaves the window.
//!
//! An attempt takes its slot *before* the costly check (an argon2 verification) and gives
//! it back only when it succeeds: the check and the count are one step under one lock, so
//! a hundred guesses fired at once are held to [`LIMIT`] checks, not counted after all of
//! them ran. An attempt dropped without an outcome (a client that hung up) counts as failed.
//!
//! It serves the web app's sign-in and sign-up (in the core) and the dashboard's token
//! sign-in (here, in the gateway), which is why it lives in this crate: the core depends on
//! the gateway, not the other way round.
//!
//! Kept in memory, per process: a restart forgets it, which costs an attacker a restart
//! they cannot cause, and an attempt is never slowed by a store write.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use roost_proto::{ApiError, ErrorReason};

/// Failures allowed per key in [`WINDOW`].
pub const LIMIT: usize = 10;
/// How far back failures count.
pub const WINDOW: Duration = Duration::from_secs(600);
/// Keys remembered before expired ones are swept (and, if all are live, forgotten).
const CAPACITY: usize = 100_000;

/// Attempts by key: the times of failures and of attempts still in flight.
#[derive(Debug, Default, Clone)]
pub struct Brake {
    slots: Arc<Mutex<HashMap<String, VecDeque<Instant>>>>,
}

/// One attempt holding a slot of each of its keys; see [`Attempt::succeeded`].
#[derive(Debug)]
pub struct Attempt {
    brake: Brake,
    keys: Vec<String>,
    at: Instant,
    settled: bool,
}

impl Brake {
    /// Takes a slot of every key for one attempt, or 429 `rate_limited` (taking none) when
    /// any key has [`LIMIT`] failures or attempts in flight within the window.
    pub fn attempt(&self, keys: Vec<String>) -> Result<Attempt, ApiError> {
        let now = Instant::now();
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        for key in &keys {
            if let Some(times) = slots.get_mut(key) {
                while times.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
                    times.pop_front();
                }
                if times.len() >= LIMIT {
                    let wait = times.front().map_or(WINDOW, |t| WINDOW.saturating_sub(now.duration_since(*t)));
                    return Err(ApiError::new(
                        ErrorReason::RateLimited,
                        format!("too many failed sign-ins; try again in {} s", wait.as_secs().max(1)),
                    ));
                }
            }
        }
        if slots.len() >= CAPACITY {
            slots.retain(|_, times| times.back().is_some_and(|t| now.duration_since(*t) < WINDOW));
            if slots.len() >= CAPACITY {
                slots.clear();
            }
        }
        for key in &keys {
            slots.entry(key.clone()).or_default().push_back(now);
        }
        Ok(Attempt { brake: self.clone(), keys, at: now, settled: false })
    }

    /// Forgets every failure of `key` (a successful sign-in clears its email).
    pub fn clear(&self, key: &str) {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

impl Attempt {
    /// The attempt succeeded: its slots are given back, and the failures of `clear` (the
    /// email's, never the address's: one working account cannot launder guesses) are
    /// forgotten.
    pub fn succeeded(mut self, clear: Option<&str>) {
        self.settled = true;
        let mut slots = self.brake.slots.lock().unwrap_or_else(|p| p.into_inner());
        for key in &self.keys {
            if let Some(times) = slots.get_mut(key)
                && let Some(at) = times.iter().position(|t| *t == self.at)
            {
                times.remove(at);
            }
        }
        if let Some(key) = clear {
            slots.remove(key);
        }
    }

    /// The attempt failed: its slots stay, as failures.
    pub fn failed(mut self) {
        self.settled = true;
    }

    /// The attempt was not judged (roost was too busy to check it): its slots are given
    /// back, and it counts neither way.
    pub fn withdrawn(self) {
        self.succeeded(None);
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.settled {
            tracing::debug!(keys = ?self.keys, "an attempt ended without an outcome; it counts as failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(email: &str, addr: &str) -> Vec<String> {
        vec![format!("email:{email}"), format!("addr:{addr}")]
    }

    #[test]
    fn ten_failures_close_the_door_for_that_key_only() {
        let brake = Brake::default();
        for _ in 0..LIMIT {
            brake.attempt(keys("a@example.com", "10.0.0.1")).unwrap().failed();
        }
        let err = brake.attempt(keys("a@example.com", "10.0.0.1")).unwrap_err();
        assert_eq!(err.reason(), ErrorReason::RateLimited);
        assert!(brake.attempt(keys("b@example.com", "10.0.0.2")).is_ok());
        brake.clear("email:a@example.com");
        assert!(brake.attempt(vec!["email:a@example.com".into()]).is_ok());
        assert!(brake.attempt(vec!["addr:10.0.0.1".into()]).is_err(), "the address still counts");
    }

    #[test]
    fn attempts_in_flight_hold_their_slots_and_successes_give_them_back() {
        let brake = Brake::default();
        let in_flight: Vec<Attempt> = (0..LIMIT).map(|_| brake.attempt(keys("a@example.com", "h")).unwrap()).collect();
        assert!(brake.attempt(keys("a@example.com", "h")).is_err(), "no eleventh check while ten run");
        for attempt in in_flight {
            attempt.succeeded(Some("email:a@example.com"));
        }
        for _ in 0..LIMIT {
            brake.attempt(keys("a@example.com", "h")).unwrap().succeeded(None);
        }
        assert!(brake.attempt(keys("a@example.com", "h")).is_ok(), "successes are not failures");
        // Dropped without an outcome: counted.
        let brake = Brake::default();
        for _ in 0..LIMIT {
            drop(brake.attempt(keys("c@example.com", "h")).unwrap());
        }
        assert!(brake.attempt(keys("c@example.com", "h")).is_err());
    }
}
