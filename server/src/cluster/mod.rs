//! Several `roost serve` on one store (DESIGN.md "Replicas"). Each process is a replica with
//! an id of its own; work that must happen once per cluster runs under a leader lease
//! ([`leader`]). On SQLite there is one process, which always leads.

pub mod leader;

/// This process's replica id: new at each start (`rep_` and 16 random base32 characters),
/// so a restarted replica never mistakes an old lease for its own.
pub fn new_replica_id() -> String {
    crate::ids::new_id("rep")
}
