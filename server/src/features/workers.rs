//! The background tasks a server runs, so the health report can say whether each is still
//! running.

use std::sync::Mutex;

use tokio::task::AbortHandle;

/// Named background tasks.
#[derive(Default)]
pub struct Workers {
    tasks: Mutex<Vec<(&'static str, AbortHandle)>>,
}

impl Workers {
    /// Records a task.
    pub fn add(&self, name: &'static str, task: AbortHandle) {
        self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((name, task));
    }

    /// Each task's name and whether it is still running.
    pub fn states(&self) -> Vec<(&'static str, bool)> {
        let tasks = self.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tasks.iter().map(|(name, task)| (*name, !task.is_finished())).collect()
    }
}
