//! The health report (`/api/health`, the health stream): store, ingest, disk, workers, each
//! ok, warn or fail with a detail for a person.

use std::{path::PathBuf, sync::Arc, time::Duration};

use roost_proto::v1::{HealthCheck, HealthReport};
use tokio_util::sync::CancellationToken;

use super::workers::Workers;
use crate::{
    cluster::leader::Leadership,
    store::Store,
    streams::Live,
    telemetry::Telemetry,
    time::{now_ms, timestamp_ms},
};

/// How often the health worker runs the checks.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// A report is streamed on change, and at least this often.
const REPEAT_EVERY: Duration = Duration::from_secs(30);
/// A store round trip slower than this is a warning.
const SLOW_STORE: Duration = Duration::from_millis(500);

/// What the checks look at.
#[derive(Clone)]
pub struct HealthChecks {
    /// The store.
    pub store: Store,
    /// Ingest (the writer's backlog).
    pub telemetry: Arc<Telemetry>,
    /// The data directory (its disk).
    pub data_dir: PathBuf,
    /// Background tasks.
    pub workers: Arc<Workers>,
    /// Who runs the cluster-wide workers.
    pub leadership: Arc<Leadership>,
    /// What confines process agents.
    pub sandbox: crate::sandbox::Sandbox,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

fn check(name: &str, status: Status, detail: String) -> (Status, HealthCheck) {
    (status, HealthCheck { name: name.into(), status: status.name().into(), detail })
}

impl HealthChecks {
    /// Runs every check.
    pub async fn run(&self) -> HealthReport {
        let checks =
            [self.store().await, self.ingest(), self.disk(), self.workers(), self.cluster().await, self.sandbox()];
        let worst = checks.iter().map(|(s, _)| *s).max().unwrap_or(Status::Ok);
        HealthReport {
            status: worst.name().into(),
            checked_at: Some(timestamp_ms(now_ms())),
            checks: checks.into_iter().map(|(_, c)| c).collect(),
        }
    }

    async fn store(&self) -> (Status, HealthCheck) {
        match tokio::time::timeout(Duration::from_secs(5), self.store.ping()).await {
            Ok(Ok(latency)) if latency > SLOW_STORE => check(
                "store",
                Status::Warn,
                format!("{} answers slowly: {:.0} ms", self.store.kind().name(), latency.as_secs_f64() * 1e3),
            ),
            Ok(Ok(latency)) => check(
                "store",
                Status::Ok,
                format!("{} answers in {:.1} ms", self.store.kind().name(), latency.as_secs_f64() * 1e3),
            ),
            Ok(Err(err)) => {
                check("store", Status::Fail, format!("{} does not answer: {err}", self.store.kind().name()))
            }
            Err(_) => check("store", Status::Fail, format!("{} did not answer within 5 s", self.store.kind().name())),
        }
    }

    fn ingest(&self) -> (Status, HealthCheck) {
        let (waiting, capacity) = self.telemetry.backlog();
        let status = if waiting >= capacity {
            Status::Fail
        } else if waiting * 2 >= capacity {
            Status::Warn
        } else {
            Status::Ok
        };
        let detail = match status {
            Status::Fail => format!("the writer is {waiting} requests behind; ingest calls are waiting for it"),
            _ => format!("{waiting} of {capacity} requests waiting for the writer"),
        };
        check("ingest", status, detail)
    }

    fn disk(&self) -> (Status, HealthCheck) {
        match free_space(&self.data_dir) {
            Some((free, total)) if total > 0 => {
                let share = free as f64 / total as f64;
                let status = if free < 100 << 20 || share < 0.02 {
                    Status::Fail
                } else if free < 1 << 30 || share < 0.10 {
                    Status::Warn
                } else {
                    Status::Ok
                };
                let detail = format!(
                    "{:.1} GiB free of {:.1} GiB ({:.0}%) at {}",
                    free as f64 / f64::from(1 << 30),
                    total as f64 / f64::from(1 << 30),
                    share * 100.0,
                    self.data_dir.display()
                );
                check("disk", status, detail)
            }
            _ => check("disk", Status::Warn, format!("cannot read the free space at {}", self.data_dir.display())),
        }
    }

    /// Fails while process agents cannot boot for want of a sandbox; warns when the
    /// operator turned it off, or when agents' disks are not capped (roost is not root).
    fn sandbox(&self) -> (Status, HealthCheck) {
        let status = match &self.sandbox {
            crate::sandbox::Sandbox::Ready(host) if !host.caps_disks() => Status::Warn,
            crate::sandbox::Sandbox::Ready(_) => Status::Ok,
            crate::sandbox::Sandbox::Off => Status::Warn,
            crate::sandbox::Sandbox::Unavailable(_) => Status::Fail,
        };
        check("sandbox", status, self.sandbox.describe())
    }

    fn workers(&self) -> (Status, HealthCheck) {
        let states = self.workers.states();
        let stopped: Vec<&str> = states.iter().filter(|(_, running)| !running).map(|(name, _)| *name).collect();
        if stopped.is_empty() {
            let names: Vec<&str> = states.iter().map(|(name, _)| *name).collect();
            check("workers", Status::Ok, format!("running: {}", names.join(", ")))
        } else {
            check("workers", Status::Fail, format!("stopped: {}", stopped.join(", ")))
        }
    }

    /// Whether some replica runs the cluster-wide workers (retention, crons, alerts, guard):
    /// a warning when none has held the leader lease for a whole TTL. The detail also lists
    /// the replicas serving the store and how many agents each runs.
    async fn cluster(&self) -> (Status, HealthCheck) {
        let me = self.leadership.replica();
        let (status, mut detail) = match self.leadership.leader().await {
            Ok(Some(holder)) if holder.owner == me => {
                (Status::Ok, format!("this replica ({me}) runs the cluster-wide workers"))
            }
            Ok(Some(holder)) => {
                (Status::Ok, format!("replica {} runs the cluster-wide workers; this one is {me}", holder.owner))
            }
            Ok(None) if !self.leadership.settled() => (Status::Ok, format!("replica {me} is taking the leader lease")),
            Ok(None) => (
                Status::Warn,
                "no replica holds the leader lease: retention, crons, alerts and guard are not running".to_owned(),
            ),
            // The store check says why.
            Err(_) => return check("cluster", Status::Warn, "cannot read the leader lease".to_owned()),
        };
        if let Ok(replicas) = self.leadership.replicas().await {
            let each: Vec<String> = replicas.iter().map(|r| format!("{} ({} agents)", r.id, r.agents.len())).collect();
            detail += &format!("; replicas: {}", each.join(", "));
        }
        check("cluster", status, detail)
    }
}

/// Free and total bytes of the file system holding `path`.
#[cfg(unix)]
fn free_space(path: &std::path::Path) -> Option<(u64, u64)> {
    let stat = rustix::fs::statvfs(path).ok()?;
    Some((stat.f_bavail.saturating_mul(stat.f_frsize), stat.f_blocks.saturating_mul(stat.f_frsize)))
}

#[cfg(not(unix))]
fn free_space(_path: &std::path::Path) -> Option<(u64, u64)> {
    None
}

/// Runs the checks every couple of seconds and streams the report when a check's status
/// changes, and at least every 30 s, until `stop`.
pub async fn run(checks: HealthChecks, live: Arc<Live>, stop: CancellationToken) {
    let mut last: Option<(Vec<(String, String)>, tokio::time::Instant)> = None;
    loop {
        let report = checks.run().await;
        let statuses: Vec<(String, String)> =
            report.checks.iter().map(|c| (c.name.clone(), c.status.clone())).collect();
        let due = last.as_ref().is_none_or(|(seen, at)| *seen != statuses || at.elapsed() >= REPEAT_EVERY);
        if due {
            live.health.publish(report);
            last = Some((statuses, tokio::time::Instant::now()));
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}
