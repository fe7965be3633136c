//! The leader lease: retention, crons, alerts and guard run on one replica of a cluster at
//! a time, not once per replica (a cron fired by three replicas would message its agent
//! three times). Billing renewals run on each agent's owner instead (see `serve.rs`).
//!
//! Every replica tries to take the lease `workers` every TTL/3: the database takes it for
//! the caller when it is free, expired or already the caller's (one `INSERT … ON CONFLICT`
//! timed by the database's clock, see `Store::claim_lease`). A replica that holds it runs
//! the led workers under a token of that term; the term ends (the workers are cancelled)
//! when another replica took the lease, or when this one could not renew it within the TTL
//! by its own monotonic clock (the database unreachable, or this process paused), since by
//! then another replica may lead. A clean stop gives the lease up, so another replica takes
//! over at its next try (within TTL/3) instead of after the TTL.
//!
//! A replica paused past the TTL may still finish a step it started before its term ended:
//! the led workers' writes are not fenced by the epoch yet.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::store::{LeaseHolder, ReplicaRow, Store};

/// The name of the lease the cluster-wide workers run under.
pub const WORKERS: &str = "workers";

/// One replica's view of a leader lease.
pub struct Leadership {
    store: Store,
    /// The lease's name in `leader_leases`.
    name: &'static str,
    replica: String,
    ttl: Duration,
    /// When this view was made: before a TTL has passed, no leader is no news.
    started: Instant,
    /// The current term's token while this replica leads.
    term: watch::Sender<Option<Term>>,
}

/// A term of leadership: its epoch and the token its workers run under.
#[derive(Debug, Clone)]
pub struct Term {
    /// The lease's epoch for this term.
    pub epoch: i64,
    token: CancellationToken,
}

impl Leadership {
    /// `replica`'s view of the lease `name`, renewed every `ttl / 3`.
    pub fn new(store: Store, name: &'static str, replica: String, ttl: Duration) -> Arc<Self> {
        Arc::new(Self { store, name, replica, ttl, started: Instant::now(), term: watch::channel(None).0 })
    }

    /// Who leads, as the store says now: `None` when the lease is free or expired.
    pub async fn leader(&self) -> crate::Result<Option<LeaseHolder>> {
        Ok(self.store.lease_holder(self.name).await?.filter(|holder| holder.expires_in_ms > 0))
    }

    /// The replicas heard from within three TTLs (one missed heartbeat is not yet gone),
    /// with the agents each runs.
    pub async fn replicas(&self) -> crate::Result<Vec<ReplicaRow>> {
        let ttl_ms = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX);
        self.store.replicas(ttl_ms.saturating_mul(3)).await
    }

    /// Whether a TTL has passed since this replica started looking for the lease (before
    /// that, a cluster without a leader is one still electing it).
    pub fn settled(&self) -> bool {
        self.started.elapsed() >= self.ttl
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The current term, while this replica leads.
    pub fn term(&self) -> Option<Term> {
        self.term.borrow().clone()
    }

    /// Takes and renews the lease until `stop`, then gives it up. Tries at once, so a
    /// lone replica leads from its start.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let every = self.ttl / 3;
        let ttl_ms = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX);
        let mut renewed: Option<Instant> = None;
        loop {
            let claimed = tokio::time::timeout(every, self.store.claim_lease(self.name, &self.replica, ttl_ms)).await;
            match claimed {
                Ok(Ok(Some(epoch))) => {
                    renewed = Some(Instant::now());
                    if self.term().is_none_or(|term| term.epoch != epoch) {
                        self.end_term("a new term began");
                        info!(lease = self.name, replica = %self.replica, epoch, "leading");
                        self.term.send_replace(Some(Term { epoch, token: stop.child_token() }));
                    }
                }
                Ok(Ok(None)) => {
                    renewed = None;
                    self.end_term("another replica holds the lease");
                }
                Ok(Err(err)) => warn!(error = %err, "could not renew the leader lease"),
                Err(_) => warn!(after = ?every, "renewing the leader lease timed out"),
            }
            if renewed.is_some_and(|at| at.elapsed() >= self.ttl) {
                renewed = None;
                self.end_term("the lease could not be renewed within its TTL");
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(every) => {}
            }
        }
        if self.term().is_some() {
            self.end_term("stopping");
            if let Err(err) = self.store.release_lease(self.name, &self.replica).await {
                warn!(error = %err, "could not give the leader lease up; another replica takes it when it expires");
            }
        }
    }

    fn end_term(&self, why: &str) {
        if let Some(term) = self.term.send_replace(None) {
            term.token.cancel();
            info!(lease = self.name, replica = %self.replica, epoch = term.epoch, why, "no longer leading");
        }
    }

    /// Runs `worker` whenever this replica leads, until `stop`: each term gets a fresh run
    /// under a token cancelled when the term ends.
    pub fn lead<F, Fut>(self: &Arc<Self>, stop: CancellationToken, worker: F) -> JoinHandle<()>
    where
        F: Fn(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut terms = self.term.subscribe();
        tokio::spawn(async move {
            loop {
                let term = tokio::select! {
                    () = stop.cancelled() => return,
                    term = terms.wait_for(Option::is_some) => match term {
                        Ok(term) => term.clone(),
                        Err(_) => return,
                    },
                };
                if let Some(term) = term {
                    worker(term.token.clone()).await;
                    // The worker returns when its token is cancelled: wait for the term to be
                    // over before looking for the next one.
                    term.token.cancelled().await;
                }
            }
        })
    }
}
