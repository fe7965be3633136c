//! Use counts of the documented routes and MCP tools, for the skills page.
//!
//! Counting happens on the request path (the gateway's route layer, its MCP tools), so it
//! is a map update under a short lock, never a store write; the core drains the counts
//! into the store every few seconds and on shutdown (`server::features::skills`).

use std::{collections::HashMap, sync::Mutex};

use http::Method;

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

/// Counts since the last drain. REST routes are kept by matched path and method, so a
/// call costs a lookup by `&str` under a short lock and allocates only on a route's first
/// call since the last drain.
#[derive(Debug, Default)]
pub struct UsageCounters {
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// By matched path; GET, POST, DELETE and any other method.
    routes: HashMap<String, [Tally; 4]>,
    /// By tool.
    tools: HashMap<String, Tally>,
}

const METHODS: [&str; 4] = ["GET", "POST", "DELETE", "OTHER"];

fn method_slot(method: &Method) -> usize {
    match *method {
        Method::GET => 0,
        Method::POST => 1,
        Method::DELETE => 2,
        _ => 3,
    }
}

impl Tally {
    fn count(&mut self, failed: bool, now_ms: i64) {
        self.calls += 1;
        self.errors += i64::from(failed);
        self.last_used_ms = self.last_used_ms.max(now_ms);
    }

    fn add(&mut self, other: Tally) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.last_used_ms = self.last_used_ms.max(other.last_used_ms);
    }
}

impl UsageCounters {
    /// Counts one call of a route (`path` as matched, such as `/api/instances/{instance_id}`).
    pub fn record_route(&self, method: &Method, path: &str, failed: bool) {
        let now = unix_ms();
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = method_slot(method);
        match counts.routes.get_mut(path) {
            Some(tallies) => tallies[slot].count(failed, now),
            None => counts.routes.entry(path.to_owned()).or_default()[slot].count(failed, now),
        }
    }

    /// Counts one call of an MCP tool.
    pub fn record_tool(&self, name: &str, failed: bool) {
        let now = unix_ms();
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match counts.tools.get_mut(name) {
            Some(tally) => tally.count(failed, now),
            None => counts.tools.entry(name.to_owned()).or_default().count(failed, now),
        }
    }

    /// Takes every count, leaving none: routes named `METHOD /path`, tools by name.
    pub fn drain(&self) -> Vec<(Surface, String, Tally)> {
        let counts = std::mem::take(&mut *self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let routes = counts.routes.into_iter().flat_map(|(path, tallies)| {
            tallies
                .into_iter()
                .zip(METHODS)
                .filter(|(tally, _)| tally.calls > 0)
                .map(move |(tally, method)| (Surface::Rest, format!("{method} {path}"), tally))
        });
        let tools = counts.tools.into_iter().map(|(name, tally)| (Surface::Mcp, name, tally));
        routes.chain(tools).collect()
    }

    /// Puts drained counts back (their store write failed), adding to any made since.
    pub fn restore(&self, drained: Vec<(Surface, String, Tally)>) {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (surface, name, tally) in drained {
            match surface {
                Surface::Mcp => counts.tools.entry(name).or_default().add(tally),
                Surface::Rest => {
                    let (method, path) = name.split_once(' ').unwrap_or(("OTHER", name.as_str()));
                    let slot = METHODS.iter().position(|m| *m == method).unwrap_or(3);
                    counts.routes.entry(path.to_owned()).or_default()[slot].add(tally);
                }
            }
        }
    }
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
        counters.record_route(&Method::GET, "/api/runtimes", false);
        counters.record_route(&Method::GET, "/api/runtimes", true);
        counters.record_route(&Method::POST, "/api/crons", false);
        counters.record_tool("send_message", false);
        let mut drained = counters.drain();
        drained.sort_by(|a, b| a.1.cmp(&b.1));
        let names: Vec<&str> = drained.iter().map(|(_, name, _)| name.as_str()).collect();
        assert_eq!(names, ["GET /api/runtimes", "POST /api/crons", "send_message"]);
        assert_eq!((drained[0].2.calls, drained[0].2.errors), (2, 1));
        assert!(counters.drain().is_empty());
        counters.record_tool("send_message", false);
        counters.restore(drained);
        let again = counters.drain();
        let send = again.iter().find(|(_, name, _)| name == "send_message").unwrap();
        assert_eq!(send.2.calls, 2);
        let get = again.iter().find(|(_, name, _)| name == "GET /api/runtimes").unwrap();
        assert_eq!(get.2.calls, 2);
    }
}
