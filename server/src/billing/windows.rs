//! Credit windows: the model gateway's admission, in memory, against credits this replica
//! has reserved in the store.
//!
//! A metered model call must not start once its account's credits are spent, and calls
//! at once must not overdraw by more than about one call ([`super::holds`]). Asking the
//! store for every call costs a write transaction (an fsync) before each call, more than
//! the model gateway's whole overhead budget. So each replica reserves a *window* of an
//! account's credits with one hold row (`win:<replica>:<account>`), sized for several
//! calls, and admits calls against it in memory:
//!
//! - a call is admitted while the window's slack (its hold, less the estimates of calls
//!   in flight, less what settled calls have been charged since it was sized) is above 0,
//!   and then counts its estimate ([`super::holds::estimate_nanocents`]) as in flight;
//! - a window without slack is re-sized in one transaction under the account's row lock,
//!   as a turn's hold is: 402 unless the balance, less every other hold, less the calls in
//!   flight, is above 0; else the hold covers the calls in flight and this one, plus room
//!   for [`WINDOW_CALLS`] more like it (never more than the balance leaves);
//! - a window idle for [`IDLE_RELEASE`] with nothing in flight is released (its row
//!   deleted); a window's row is renewed while calls run, and lapses at its expiry if the
//!   replica dies; a replica starting on the same data directory deletes its
//!   predecessor's at once.
//!
//! The bound: the store never lets windows and holds together reserve more than the
//! balance, and a window admits past its slack only the call that takes the slack below
//! 0, so an account overdraws by at most one call's estimate per replica serving it.
//! Charges are written by the model gateway's recorder and drawn from the window in memory;
//! until the window is re-sized or released its row still counts them, which makes the
//! store's view of the account's free credits lower than the truth, never higher.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use super::{MoneyTx as _, holds::HoldTx as _};
use crate::{
    Result,
    store::{BeginWrite, Store, on_writer},
    time::now_ms,
};

/// Calls like the one that re-sizes a window that the window makes room for besides it.
pub const WINDOW_CALLS: i64 = 8;
/// How long a window with nothing in flight is kept before its credits are given back.
pub const IDLE_RELEASE: Duration = Duration::from_secs(2);

/// This replica's credit windows.
#[derive(Clone)]
pub struct CreditWindows {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    replica: String,
    /// How long a window's row counts after it was last renewed, if nothing renews it.
    ttl: Duration,
    windows: Mutex<HashMap<String, Arc<Window>>>,
}

/// One account's window on this replica.
struct Window {
    account_id: String,
    key: String,
    /// Serialises the store writes of this window's row (re-sizing, renewal, release).
    resize: tokio::sync::Mutex<()>,
    state: Mutex<WindowState>,
}

#[derive(Default)]
struct WindowState {
    /// The nanocents the window may admit calls against: its calls in flight when it was last
    /// sized, and what the balance left free then, up to [`WINDOW_CALLS`] more calls.
    limit: i64,
    /// Estimates of the calls admitted and not yet charged.
    in_flight: i64,
    /// Nanocents charged for settled calls since the window was sized.
    spent: i64,
    /// Calls admitted and not yet charged.
    calls: usize,
    /// Estimates of every call settled, ever: what left `in_flight` while the window was
    /// being sized.
    released: i64,
    /// When a call was last admitted or settled.
    touched: Option<Instant>,
    /// When the row was last written.
    renewed: Option<Instant>,
    /// The row was released: a new window takes its place.
    gone: bool,
}

impl WindowState {
    fn slack(&self) -> i64 {
        self.limit.saturating_sub(self.in_flight).saturating_sub(self.spent)
    }
}

/// A call's admission: its estimate counts against the window until [`Admitted::settle`].
pub struct Admitted {
    window: Arc<Window>,
    estimate: i64,
    settled: bool,
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitted").field("account", &self.window.account_id).field("estimate", &self.estimate).finish()
    }
}

impl CreditWindows {
    /// The windows of `replica`, whose rows lapse `ttl` after their last renewal.
    pub fn new(store: Store, replica: &str, ttl: Duration) -> Self {
        Self { inner: Arc::new(Inner { store, replica: replica.to_owned(), ttl, windows: Mutex::new(HashMap::new()) }) }
    }

    fn window(&self, account_id: &str) -> Arc<Window> {
        let mut windows = self.inner.windows.lock().unwrap_or_else(|p| p.into_inner());
        windows
            .entry(account_id.to_owned())
            .or_insert_with(|| {
                Arc::new(Window {
                    account_id: account_id.to_owned(),
                    key: self.inner.key(account_id),
                    resize: tokio::sync::Mutex::new(()),
                    state: Mutex::new(WindowState::default()),
                })
            })
            .clone()
    }

    /// Admits a call of `account_id` that may cost `estimate` nanocents: at once while the
    /// window has slack, else after re-sizing it; 402 `insufficient_credits` when the
    /// account's credits are spent.
    pub async fn admit(&self, account_id: &str, estimate: i64) -> Result<Admitted> {
        let estimate = estimate.max(1);
        loop {
            let window = self.window(account_id);
            if window.try_admit(estimate) {
                return Ok(Admitted { window, estimate, settled: false });
            }
            {
                let _resizing = window.resize.lock().await;
                if window.state().gone {
                    continue;
                }
                // Another call may have re-sized it meanwhile; else it is re-sized now.
                if !window.try_admit(estimate) {
                    self.resize(&window, estimate).await?;
                }
            }
            return Ok(Admitted { window, estimate, settled: false });
        }
    }

    /// 402 unless a call of `account_id` could be admitted now (a turn whose calls will be
    /// metered asks this before it starts); reserves nothing.
    pub async fn check(&self, account_id: &str) -> Result<()> {
        let window = self.inner.windows.lock().unwrap_or_else(|p| p.into_inner()).get(account_id).cloned();
        if window.as_ref().is_some_and(|w| w.state().slack() > 0) {
            return Ok(());
        }
        let own = self.inner.key(account_id);
        let now = now_ms();
        on_writer!(self.inner.store, |pool| {
            let mut tx = pool.begin_write().await?;
            let account = tx.lock_account(account_id, now).await?;
            let balance = account.map_or(0, |a| a.balance_nanocents);
            let held = tx.held_nanocents(account_id, now).await?;
            let own_row = tx.hold_nanocents(&own).await?;
            tx.commit().await?;
            super::holds::spendable(balance, held.saturating_sub(own_row))
        })
    }

    /// Sizes `window` for its calls in flight and one more of `estimate` (its re-size lock
    /// held), counting that call in; 402 when the account has nothing left.
    async fn resize(&self, window: &Window, estimate: i64) -> Result<()> {
        let now = now_ms();
        let expires_at = now.saturating_add(i64::try_from(self.inner.ttl.as_millis()).unwrap_or(i64::MAX));
        let (in_flight, released, spent) = {
            let state = window.state();
            (state.in_flight, state.released, state.spent)
        };
        let limit = on_writer!(self.inner.store, |pool| {
            let mut tx = pool.begin_write().await?;
            let account = tx.lock_account(&window.account_id, now).await?;
            let balance = account.map_or(0, |a| a.balance_nanocents);
            let all_holds = tx.held_nanocents(&window.account_id, now).await?;
            let others = all_holds.saturating_sub(tx.hold_nanocents(&window.key).await?);
            super::holds::spendable(balance.saturating_sub(in_flight), others)?;
            // What the balance leaves free (above 0, or the call is refused above), up to
            // room for this call and WINDOW_CALLS more like it.
            let free = balance.saturating_sub(others).saturating_sub(in_flight);
            let grant = free.min(estimate.saturating_mul(WINDOW_CALLS + 1));
            // The row covers the grant, and this call's estimate when that is more (the
            // one call that may take an account below 0).
            let held = in_flight.saturating_add(grant.max(estimate));
            tx.release_holds(&[window.key.as_str()]).await?;
            sqlx::query(
                "INSERT INTO credit_holds (turn_id, account_id, instance_id, nanocents, created_at, expires_at) \
                 VALUES ($1, $2, '', $3, $4, $5)",
            )
            .bind(&window.key)
            .bind(&window.account_id)
            .bind(held)
            .bind(now)
            .bind(expires_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, crate::Error>(in_flight.saturating_add(grant))
        })?;
        let mut state = window.state();
        // Calls that settled while the store was asked left `in_flight`: the limit loses
        // their estimates too, and their charges stay spent (they may be in the balance the
        // transaction read as well: counted twice, so never too generous).
        state.limit = limit.saturating_sub(state.released.saturating_sub(released));
        state.spent = state.spent.saturating_sub(spent);
        state.in_flight = state.in_flight.saturating_add(estimate);
        state.calls += 1;
        state.touched = Some(Instant::now());
        state.renewed = Some(Instant::now());
        Ok(())
    }

    /// Releases idle windows and renews the rows of busy ones; the model gateway runs it every
    /// second.
    pub async fn tend(&self) {
        let windows: Vec<Arc<Window>> =
            self.inner.windows.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for window in windows {
            let (idle, stale) = {
                let state = window.state();
                let idle = state.calls == 0 && state.touched.is_none_or(|t| t.elapsed() >= IDLE_RELEASE);
                let stale = state.renewed.is_some_and(|t| t.elapsed() >= self.inner.ttl / 2);
                (idle, stale)
            };
            if !idle && !stale {
                continue;
            }
            let _resizing = window.resize.lock().await;
            if idle {
                if let Err(err) = self.release(&window).await {
                    tracing::warn!(account = %window.account_id, error = %err, "a credit window could not be released");
                }
            } else if stale && let Err(err) = self.renew(&window).await {
                tracing::warn!(account = %window.account_id, error = %err, "a credit window could not be renewed");
            }
        }
    }

    /// Gives an idle window's credits back (its re-size lock held): nothing can be admitted
    /// against it once it is marked gone, so it is released only if nothing is in flight
    /// at that moment.
    async fn release(&self, window: &Arc<Window>) -> Result<()> {
        {
            let mut state = window.state();
            if state.calls > 0 {
                return Ok(());
            }
            state.gone = true;
        }
        {
            let mut windows = self.inner.windows.lock().unwrap_or_else(|p| p.into_inner());
            if windows.get(&window.account_id).is_some_and(|w| Arc::ptr_eq(w, window)) {
                windows.remove(&window.account_id);
            }
        }
        let key = window.key.as_str();
        on_writer!(self.inner.store, |pool| {
            let mut tx = pool.begin_write().await?;
            tx.release_holds(&[key]).await?;
            tx.commit().await?;
            Ok::<_, crate::Error>(())
        })
    }

    async fn renew(&self, window: &Window) -> Result<()> {
        let expires_at = now_ms().saturating_add(i64::try_from(self.inner.ttl.as_millis()).unwrap_or(i64::MAX));
        on_writer!(self.inner.store, |pool| {
            sqlx::query("UPDATE credit_holds SET expires_at = $2 WHERE turn_id = $1")
                .bind(&window.key)
                .bind(expires_at)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        window.state().renewed = Some(Instant::now());
        Ok(())
    }

    /// Deletes the windows a replica that served this data directory before left behind.
    pub async fn forget_predecessor(&self, predecessor: &str) -> Result<()> {
        if predecessor.is_empty() {
            return Ok(());
        }
        let pattern = format!("win:{predecessor}:%");
        on_writer!(self.inner.store, |pool| {
            sqlx::query("DELETE FROM credit_holds WHERE turn_id LIKE $1")
                .bind(&pattern)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(())
    }
}

impl Inner {
    /// The key of this replica's window row for an account.
    fn key(&self, account_id: &str) -> String {
        format!("win:{}:{account_id}", self.replica)
    }
}

impl Window {
    fn state(&self) -> std::sync::MutexGuard<'_, WindowState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn try_admit(&self, estimate: i64) -> bool {
        let mut state = self.state();
        if state.gone || state.slack() <= 0 {
            return false;
        }
        state.in_flight = state.in_flight.saturating_add(estimate);
        state.calls += 1;
        state.touched = Some(Instant::now());
        true
    }
}

impl Admitted {
    /// The call is charged `nanocents` (written to the store): its estimate stops counting and
    /// the charge is drawn from the window.
    pub fn settle(mut self, nanocents: i64) {
        self.finish(nanocents);
    }

    fn finish(&mut self, nanocents: i64) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        let mut state = self.window.state();
        state.in_flight = state.in_flight.saturating_sub(self.estimate).max(0);
        state.released = state.released.saturating_add(self.estimate);
        state.spent = state.spent.saturating_add(nanocents.max(0));
        state.calls = state.calls.saturating_sub(1);
        state.touched = Some(Instant::now());
    }
}

impl Drop for Admitted {
    /// A call dropped unsettled (it was never recorded) charged nothing.
    fn drop(&mut self) {
        self.finish(0);
    }
}
