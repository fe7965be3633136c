//! One runtime process per agent: a start waits until the agent's previous process is gone.
//!
//! The lifecycle starts a new machine only after stopping the old one, but a boot cannot be
//! interrupted half-way: a boot that was cancelled while starting (the agent was suspended,
//! then resumed) finishes starting its process before it stops it, while the resume's boot
//! is already under way. The slot makes the second start wait for the first process to end,
//! whatever path led there.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::OwnedMutexGuard;

/// Each agent's slot, while someone holds or waits for it.
#[derive(Default, Clone)]
pub struct Slots {
    agents: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// An agent's slot, held for as long as its process may run.
pub struct Slot {
    guard: Option<OwnedMutexGuard<()>>,
    agent: String,
    slots: Slots,
}

impl Slots {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        self.agents.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until no process of `agent` runs, then holds its slot.
    pub async fn take(&self, agent: &str) -> Slot {
        let lock = self.map().entry(agent.to_owned()).or_default().clone();
        let guard = lock.lock_owned().await;
        Slot { guard: Some(guard), agent: agent.to_owned(), slots: self.clone() }
    }

    /// How many agents have a slot held or waited for.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether no slot is held or waited for.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.guard.take());
        // The map's own reference is the last one: nobody holds or waits for the slot.
        let mut map = self.slots.map();
        if map.get(&self.agent).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            map.remove(&self.agent);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_second_start_waits_for_the_first_to_end() {
        let slots = Slots::default();
        let first = slots.take("ins_a").await;
        let other = slots.take("ins_b").await;
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.take("ins_a").await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the slot is held");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("taken").expect("task");
        assert_eq!(slots.len(), 2);
        drop((second, other));
        assert!(slots.is_empty(), "free slots are not kept");
    }
}
