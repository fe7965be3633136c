//! Several `roost serve` on one store (docs/architecture.md#replicas). Each process is a replica
//! with an id of its own. Work that must happen once per cluster runs under a leader lease
//! ([`leader`]); each hosted agent runs on the replica holding its agent lease
//! (`crate::agents::ownership`), and calls for it that arrive elsewhere are forwarded there
//! over the internal gRPC API ([`peers`]). Replicas tell each other of stored rows and
//! released leases at once by LISTEN/NOTIFY ([`notices`]). On SQLite there is one process,
//! which leads and owns every agent.

pub mod leader;
pub mod notices;
pub mod peers;

use std::{path::Path, time::Duration};

/// The file in the data directory naming the replica that last served it.
const REPLICA_FILE: &str = "replica_id";

/// This process as a member of the cluster.
#[derive(Debug, Clone)]
pub struct Replica {
    /// Its id: new at each start (`rep_` and 16 random base32 characters).
    pub id: String,
    /// The replica that served this data directory before: its agent leases are taken back
    /// at once (see `Store::acquire_agent_leases`). Empty on a first start.
    pub predecessor: String,
    /// Where the other replicas reach its gRPC API (`--advertise-addr`).
    pub addr: String,
    /// When it started (Unix ms).
    pub started_at: i64,
    /// Lease TTL (`--lease-ttl-secs`): leases are renewed every third of it.
    pub ttl: Duration,
    /// Most agents it runs at once (`--agent-capacity`).
    pub capacity: usize,
}

impl Replica {
    /// A new replica on `data_dir`, reached at `addr`: reads the predecessor's id from the
    /// data directory and records this one's.
    pub fn start(data_dir: &Path, addr: String, ttl: Duration, capacity: usize) -> std::io::Result<Self> {
        let file = data_dir.join(REPLICA_FILE);
        let predecessor = match std::fs::read_to_string(&file) {
            Ok(id) => id.trim().to_owned(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(err) => return Err(err),
        };
        let id = new_replica_id();
        std::fs::write(&file, format!("{id}\n"))?;
        Ok(Self { id, predecessor, addr, started_at: crate::time::now_ms(), ttl, capacity })
    }

    /// The TTL in milliseconds.
    pub fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A fresh replica id (`rep_` and 16 random base32 characters).
pub fn new_replica_id() -> String {
    crate::ids::new_id("rep")
}
