//! A live stream with a bounded replay buffer: publishers never wait, subscribers read at
//! their own pace from a cursor.
//!
//! Every item gets the next id. Ids start at the process's start time in microseconds, so
//! an id a client saw before a restart is below every id of the new process: resuming with
//! it replays the new process's buffer instead of waiting for ids to catch up.
//!
//! A subscriber whose cursor falls off the front of the buffer (it read too slowly, or
//! resumed too late) gets one `Lagged` with the count it missed and continues from the
//! oldest item held. Publishing is a push under a short lock plus a watch notification;
//! how many clients there are, or how slow, never changes its cost.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

/// What a subscriber reads next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next<T> {
    /// An item and its id.
    Item(u64, Arc<T>),
    /// This many items were dropped from the buffer before this subscriber read them; the
    /// id is the last of them (a client resuming from it continues after the gap).
    Lagged(u64, u64),
}

struct Ring<T> {
    /// Id of the first item this process published.
    first_id: u64,
    /// Id the next item gets.
    next_id: u64,
    items: VecDeque<(u64, Arc<T>)>,
}

/// One stream: the replay buffer, the newest id for waiting subscribers, the client cap.
pub struct Hub<T> {
    ring: Mutex<Ring<T>>,
    capacity: usize,
    latest: watch::Sender<u64>,
    clients: Arc<Semaphore>,
    max_clients: usize,
    /// When the last subscriber went away (`None`: none ever did).
    last_left: Mutex<Option<Instant>>,
}

/// Too many subscribers already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// The cap.
    pub max_clients: usize,
}

impl<T> Hub<T> {
    /// A hub holding the last `capacity` items for at most `max_clients` subscribers.
    pub fn new(capacity: usize, max_clients: usize) -> Self {
        let first_id = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64);
        Self {
            ring: Mutex::new(Ring { first_id, next_id: first_id, items: VecDeque::with_capacity(capacity.min(1024)) }),
            capacity: capacity.max(1),
            latest: watch::Sender::new(first_id - 1),
            clients: Arc::new(Semaphore::new(max_clients)),
            max_clients,
            last_left: Mutex::new(None),
        }
    }

    /// Adds items; returns the id of the last one.
    pub fn publish_all(&self, items: impl IntoIterator<Item = T>) -> u64 {
        let last = {
            let mut ring = self.ring.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for item in items {
                let id = ring.next_id;
                ring.next_id += 1;
                if ring.items.len() == self.capacity {
                    ring.items.pop_front();
                }
                ring.items.push_back((id, Arc::new(item)));
            }
            ring.next_id - 1
        };
        self.latest.send_if_modified(|latest| std::mem::replace(latest, last) != last);
        last
    }

    /// Adds one item; its id.
    pub fn publish(&self, item: T) -> u64 {
        self.publish_all([item])
    }

    /// The newest item, if any.
    pub fn last(&self) -> Option<(u64, Arc<T>)> {
        let ring = self.ring.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ring.items.back().cloned()
    }

    /// How many subscribers are connected.
    pub fn clients(&self) -> usize {
        self.max_clients - self.clients.available_permits()
    }

    /// Whether a subscriber is connected, or one left less than `window` ago (and may
    /// come back to resume from the buffer).
    pub fn watched_within(&self, window: Duration) -> bool {
        self.clients() > 0
            || self
                .last_left
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_some_and(|left| left.elapsed() < window)
    }

    /// A subscriber that starts after `after` (an id it saw), or with the next item
    /// published when `after` is `None`; `Full` over the client cap.
    pub fn subscribe(self: &Arc<Self>, after: Option<u64>) -> Result<Subscriber<T>, Full> {
        let permit = self.clients.clone().try_acquire_owned().map_err(|_| Full { max_clients: self.max_clients })?;
        let latest = self.latest.subscribe();
        let cursor = after.unwrap_or_else(|| *latest.borrow());
        Ok(Subscriber { hub: self.clone(), cursor, latest, _permit: permit })
    }

    /// What follows `cursor`: up to `max` items, or the gap before the oldest held.
    fn read_after(&self, cursor: u64, max: usize, out: &mut Vec<Next<T>>) -> u64 {
        let ring = self.ring.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(&(oldest, _)) = ring.items.front() else { return cursor };
        // An id this process never gave out (from before a restart): everything held is new
        // to the client, and what it missed is what this process already dropped.
        let mut cursor = if cursor < ring.first_id || cursor >= ring.next_id { ring.first_id - 1 } else { cursor };
        if cursor + 1 < oldest {
            out.push(Next::Lagged(oldest - 1 - cursor, oldest - 1));
            cursor = oldest - 1;
        }
        let start = (cursor + 1 - oldest) as usize;
        for (id, item) in ring.items.iter().skip(start).take(max) {
            out.push(Next::Item(*id, item.clone()));
            cursor = *id;
        }
        cursor
    }
}

/// One client's read position. Dropping it frees its place under the cap.
pub struct Subscriber<T> {
    hub: Arc<Hub<T>>,
    cursor: u64,
    latest: watch::Receiver<u64>,
    _permit: OwnedSemaphorePermit,
}

impl<T> Drop for Subscriber<T> {
    fn drop(&mut self) {
        *self.hub.last_left.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    }
}

impl<T> Subscriber<T> {
    /// Waits for what comes next: up to `max` items (or a gap notice first).
    pub async fn next_batch(&mut self, max: usize) -> Vec<Next<T>> {
        loop {
            let mut out = Vec::new();
            self.cursor = self.hub.read_after(self.cursor, max, &mut out);
            if !out.is_empty() {
                return out;
            }
            // The hub lives as long as this subscriber, so the sender cannot be gone; if it
            // were, waiting forever is the right answer for a stream.
            if self.latest.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(next: &[Next<u32>]) -> Vec<u32> {
        next.iter()
            .filter_map(|n| match n {
                Next::Item(_, v) => Some(**v),
                Next::Lagged(..) => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_subscriber_gets_what_follows_its_start() {
        let hub = Arc::new(Hub::new(8, 2));
        hub.publish(1);
        let mut live = hub.subscribe(None).unwrap();
        let resumed_from = hub.publish(2);
        hub.publish(3);
        assert_eq!(items(&live.next_batch(10).await), [2, 3]);
        let mut resumed = hub.subscribe(Some(resumed_from)).unwrap();
        assert_eq!(items(&resumed.next_batch(10).await), [3]);
        assert!(matches!(hub.subscribe(None), Err(Full { max_clients: 2 })));
        drop(resumed);
        assert_eq!(hub.clients(), 1);
        let waiting = tokio::spawn(async move { items(&live.next_batch(10).await) });
        tokio::task::yield_now().await;
        hub.publish(4);
        assert_eq!(waiting.await.unwrap(), [4]);
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_told_what_it_missed_and_skips_ahead() {
        let hub = Arc::new(Hub::new(4, 1));
        let mut slow = hub.subscribe(None).unwrap();
        let first = hub.publish_all(0..10) - 9;
        let batch = slow.next_batch(10).await;
        assert_eq!(batch[0], Next::Lagged(6, first + 5));
        assert_eq!(items(&batch), [6, 7, 8, 9]);
    }

    #[tokio::test]
    async fn an_id_from_a_previous_process_replays_the_buffer() {
        let hub = Arc::new(Hub::new(4, 1));
        hub.publish_all([1, 2]);
        let mut before = hub.subscribe(Some(5)).unwrap();
        assert_eq!(items(&before.next_batch(10).await), [1, 2]);
        drop(before);
        let mut ahead = hub.subscribe(Some(u64::MAX - 1)).unwrap();
        assert_eq!(items(&ahead.next_batch(10).await), [1, 2]);
    }

    #[test]
    fn a_hub_is_watched_while_a_subscriber_is_there_and_for_a_while_after() {
        let hub = Arc::new(Hub::<u32>::new(4, 2));
        assert!(!hub.watched_within(Duration::from_secs(60)), "nobody ever came");
        let subscriber = hub.subscribe(None).unwrap();
        assert!(hub.watched_within(Duration::ZERO));
        drop(subscriber);
        assert!(hub.watched_within(Duration::from_secs(60)), "it may come back");
        assert!(!hub.watched_within(Duration::ZERO), "gone for longer than the window");
    }
}
