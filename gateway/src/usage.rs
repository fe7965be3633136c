//! Use counts of the documented routes and MCP tools, for the skills page.
//!
//! Counting happens on the request path, so it is a map update under a short lock, never a
//! store write; the core drains the counts into the store every few seconds and on
//! shutdown (`server::features::skills`). The gateway only counts.

use std::{collections::HashMap, sync::Mutex};

use axum::{
    extract::{MatchedPath, Request, State},
    middleware::Next,
    response::Response,
};

use crate::Core;

/// Where a call came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// A REST route (named `METHOD /path/{param}`).
    Rest,
    /// An MCP tool (named as the tool).
    Mcp,
}

impl Surface {
    /// Its name on the skills page.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rest => "rest",
            Self::Mcp => "mcp",
        }
    }
}

/// Counts of one operation since the last drain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Calls.
    pub calls: i64,
    /// Of which failed.
    pub errors: i64,
    /// The last call, Unix milliseconds.
    pub last_used_ms: i64,
}

/// Counts since the last drain, by surface and operation.
#[derive(Debug, Default)]
pub struct UsageCounters {
    counts: Mutex<HashMap<(Surface, String), Tally>>,
}

impl UsageCounters {
    /// Counts one call.
    pub fn record(&self, surface: Surface, name: &str, failed: bool) {
        let now = unix_ms();
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tally = counts.entry((surface, name.to_owned())).or_default();
        tally.calls += 1;
        tally.errors += i64::from(failed);
        tally.last_used_ms = tally.last_used_ms.max(now);
    }

    /// Takes every count, leaving none.
    pub fn drain(&self) -> Vec<(Surface, String, Tally)> {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        counts.drain().map(|((surface, name), tally)| (surface, name, tally)).collect()
    }

    /// Puts counts back (a drain whose store write failed), adding to any made since.
    pub fn restore(&self, drained: Vec<(Surface, String, Tally)>) {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (surface, name, tally) in drained {
            let entry = counts.entry((surface, name)).or_default();
            entry.calls += tally.calls;
            entry.errors += tally.errors;
            entry.last_used_ms = entry.last_used_ms.max(tally.last_used_ms);
        }
    }
}

/// The route layer: counts every call to a documented route (the MCP transport's requests
/// are not counted; its tool calls are).
pub(crate) async fn count(State(core): State<Core>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| format!("{} {}", request.method(), p.as_str()));
    let response = next.run(request).await;
    if let Some(route) = route.filter(|r| !r.ends_with(" /mcp")) {
        let status = response.status();
        core.usage.record(Surface::Rest, &route, status.is_client_error() || status.is_server_error());
    }
    response
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_drain_and_come_back() {
        let counters = UsageCounters::default();
        counters.record(Surface::Rest, "GET /api/runtimes", false);
        counters.record(Surface::Rest, "GET /api/runtimes", true);
        counters.record(Surface::Mcp, "send_message", false);
        let mut drained = counters.drain();
        drained.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(drained.len(), 2);
        assert_eq!((drained[0].2.calls, drained[0].2.errors), (2, 1));
        assert!(counters.drain().is_empty());
        counters.record(Surface::Mcp, "send_message", false);
        counters.restore(drained);
        let again = counters.drain();
        let send = again.iter().find(|(_, name, _)| name == "send_message").unwrap();
        assert_eq!(send.2.calls, 2);
    }
}
