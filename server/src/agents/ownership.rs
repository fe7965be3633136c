//! Which agents this replica runs: their leases (`crate::store::AgentLease`).
//!
//! At start ([`Hosting::restore`]) and then every TTL/3 ([`Hosting::run_ownership`]) the
//! replica:
//! - says it is alive (the replicas table: `GET /api/replicas`, and the address calls for
//!   its agents are forwarded to);
//! - renews all of its leases in one statement; an agent whose lease is gone (another
//!   replica took it after it expired) is stopped here at once, without a status write,
//!   since it is no longer this replica's to write;
//! - when it could not renew for a whole TTL by its own monotonic clock (the store out of
//!   reach, or this process paused), stops every agent it runs: another replica may have
//!   them by now;
//! - takes free or expired leases up to its capacity, and boots those agents that were up
//!   (or on their way up), as a start after a stop does.
//!
//! A clean stop gives every lease up ([`Hosting::release_leases`]) and, on PostgreSQL,
//! says so (`crate::cluster::notices`): the other replicas take the agents at once instead
//! of after the TTL. On SQLite there is one process: it takes every lease at its start.

use std::{collections::HashSet, sync::Arc, time::Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{
    Hosting,
    instances::{InstanceRow, Status},
    lifecycle::retired_runtime,
    live::Agent,
};
use crate::{Result, store::BackendKind};

impl Hosting {
    /// First look at start: kills any runtime process an earlier roost on this data
    /// directory left running, then takes this replica's agents and boots them. Returns
    /// how many agents it took.
    pub async fn restore(self: &Arc<Self>) -> Result<usize> {
        self.drivers.process.reap_orphans().await?;
        self.sweep_destroyed_workspaces();
        if self.store.kind() == BackendKind::Sqlite {
            self.store.expire_all_agent_leases().await?;
        }
        self.heartbeat().await;
        // A new replica id holds nothing yet: this starts its clock for the TTL check.
        self.mark_renewed();
        let taken = self.take_free_leases().await?;
        info!(agents = taken, replica = %self.replica.id, "hosted agents restored");
        Ok(taken)
    }

    /// Deletes, in the background, the workspaces of destroyed agents that are still here:
    /// their deletion failed (it is logged), and is retried at each start. Only agents the
    /// store knows as destroyed lose theirs.
    fn sweep_destroyed_workspaces(self: &Arc<Self>) {
        let hosting = self.clone();
        tokio::spawn(async move {
            let workspaces = hosting.drivers.process.workspaces().clone();
            let listed = {
                let workspaces = workspaces.clone();
                tokio::task::spawn_blocking(move || workspaces.listed()).await.unwrap_or_default()
            };
            for id in listed {
                let destroyed =
                    matches!(hosting.store.instance(&id).await, Ok(Some(row)) if row.destroyed_at.is_some());
                if !destroyed {
                    continue;
                }
                let workspaces = workspaces.clone();
                let removing = id.clone();
                match tokio::task::spawn_blocking(move || workspaces.remove(&removing)).await {
                    Ok(Ok(())) => info!(instance = %id, "deleted a destroyed agent's workspace left by an earlier run"),
                    Ok(Err(err)) => {
                        warn!(instance = %id, error = %err, "a destroyed agent's workspace could not be deleted; the next start tries again")
                    }
                    Err(err) => warn!(instance = %id, error = %err, "deleting a destroyed agent's workspace failed"),
                }
            }
        });
    }

    /// Renews and takes leases every TTL/3 until `stop`; takes free leases as soon as
    /// `freed` says another replica gave some up.
    pub async fn run_ownership(self: Arc<Self>, freed: Arc<Notify>, stop: CancellationToken) {
        let every = self.replica.ttl / 3;
        let mut unadopted = HashSet::new();
        let mut next = tokio::time::Instant::now() + every;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(next) => {
                    self.look(&mut unadopted).await;
                    next = tokio::time::Instant::now() + every;
                }
                // Only free leases are taken here: renewing and adopting keep their pace.
                () = freed.notified() => {
                    if self.lease_current()
                        && let Err(err) = self.take_free_leases().await
                    {
                        warn!(error = %err, "could not take the agent leases another replica gave up");
                    }
                }
            }
        }
    }

    /// One round: heartbeat, renew, take. `unadopted` carries the leases the last round
    /// found held but not running here.
    async fn look(self: &Arc<Self>, unadopted: &mut HashSet<String>) {
        self.heartbeat().await;
        // Only agents running before the renewal was sent are judged by its answer: one
        // provisioned meanwhile has a lease the answer may not show yet.
        let before = self.registry.all();
        let renewal = tokio::time::timeout(
            self.replica.ttl / 3,
            self.store.renew_agent_leases(&self.replica.id, self.replica.ttl_ms()),
        )
        .await;
        match renewal {
            Ok(Ok(held)) => {
                self.mark_renewed();
                let lost: Vec<Arc<Agent>> = before
                    .into_iter()
                    .filter(|agent| !held.iter().any(|(id, epoch)| *id == agent.id && *epoch == agent.epoch))
                    .collect();
                self.let_go(lost, "its lease was taken over by another replica").await;
                // Leases held but not running here, two rounds in a row: an adoption that a
                // store error cut short. (One round is not enough: a provision commits its
                // lease a moment before it registers the agent.)
                let idle: Vec<(String, i64)> =
                    held.into_iter().filter(|(id, _)| self.registry.get(id).is_none()).collect();
                let stuck: Vec<(String, i64)> = idle.iter().filter(|(id, _)| unadopted.contains(id)).cloned().collect();
                *unadopted = idle.into_iter().map(|(id, _)| id).collect();
                if let Err(err) = self.adopt_all(stuck).await {
                    warn!(error = %err, "could not start agents whose leases this replica holds");
                }
            }
            Ok(Err(err)) => warn!(error = %err, "could not renew the agent leases"),
            Err(_) => warn!("renewing the agent leases timed out"),
        }
        if !self.lease_current() {
            self.let_go(self.registry.all(), "the leases could not be renewed within their TTL").await;
            return;
        }
        if let Err(err) = self.take_free_leases().await {
            warn!(error = %err, "could not take free agent leases");
        }
    }

    fn mark_renewed(&self) {
        *self.renewed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// Whether the last renewal is less than a TTL old.
    fn lease_current(&self) -> bool {
        self.renewed.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|at| at.elapsed() < self.replica.ttl)
    }

    async fn heartbeat(&self) {
        let replica = &self.replica;
        // Silent for a hundred TTLs: long gone, no longer listed even as stale.
        let forget_after = replica.ttl_ms().saturating_mul(100);
        if let Err(err) =
            self.store.replica_heartbeat(&replica.id, &replica.addr, replica.started_at, forget_after).await
        {
            warn!(error = %err, "could not record this replica's heartbeat");
        }
    }

    /// Takes free or expired leases up to the capacity and boots those agents.
    async fn take_free_leases(self: &Arc<Self>) -> Result<usize> {
        let room = self.replica.capacity.saturating_sub(self.registry.len());
        let limit = i64::try_from(room).unwrap_or(i64::MAX);
        let taken = self
            .store
            .acquire_agent_leases(&self.replica.id, self.replica.ttl_ms(), limit, &self.replica.predecessor)
            .await?;
        let adopted = self.adopt_all(taken).await?;
        if adopted > 0 {
            info!(agents = adopted, replica = %self.replica.id, "took agent leases");
        }
        Ok(adopted)
    }

    /// Runs the agents of `leases` this replica holds; how many it started. A store error
    /// stops it part-way: the next round's renewal finds the rest (held, not running).
    async fn adopt_all(self: &Arc<Self>, leases: Vec<(String, i64)>) -> Result<usize> {
        let mut adopted = 0;
        for (id, epoch) in leases {
            match self.store.instance(&id).await? {
                Some(row) if row.destroyed_at.is_none() => {
                    self.adopt(&row, epoch).await;
                    adopted += 1;
                }
                _ => {}
            }
        }
        Ok(adopted)
    }

    /// Runs an agent whose lease this replica just took at `epoch`: boots it if it was up
    /// (or on its way up) when its last owner stopped.
    async fn adopt(self: &Arc<Self>, row: &InstanceRow, epoch: i64) {
        if let Some(old) = self.registry.get(&row.id) {
            // Taken again after it was lost: the old generation is over.
            self.let_go(vec![old], "its lease was taken again").await;
        }
        let depth = self.config.queue_depth;
        let agent = match self.catalogue().get(&row.runtime) {
            Some(runtime) => {
                let boot = matches!(row.status(), Status::Provisioning | Status::Running | Status::Restarting);
                let status = if boot { Status::Provisioning } else { row.status() };
                let agent = Arc::new(Agent::new(row, runtime.clone(), status, depth, epoch));
                self.registry.insert(agent.clone());
                self.interrupt_turns(&agent).await;
                if boot {
                    self.persist_status(&agent, Status::Provisioning, "").await;
                    let (generation, _) = agent.begin_generation(Status::Provisioning);
                    self.boot(agent.clone(), generation, None);
                }
                agent
            }
            None => {
                let why = format!("runtime {} is no longer in the catalogue", row.runtime);
                let mut agent = Agent::new(row, Arc::new(retired_runtime(row)), Status::Failed, depth, epoch);
                agent.retired = true;
                agent.state().detail.clone_from(&why);
                let agent = Arc::new(agent);
                self.registry.insert(agent.clone());
                self.interrupt_turns(&agent).await;
                self.persist_status(&agent, Status::Failed, &why).await;
                agent
            }
        };
        tracing::debug!(instance = %agent.id, epoch, "agent adopted");
    }

    /// Stops agents this replica no longer owns: their machines stop and their calls end;
    /// nothing is written for them.
    async fn let_go(&self, agents: Vec<Arc<Agent>>, why: &str) {
        if agents.is_empty() {
            return;
        }
        let mut machines = Vec::new();
        for agent in &agents {
            self.registry.remove(&agent.id);
            if let Some(machine) = agent.end_generation(Status::Failed, why) {
                machines.push(machine);
            }
        }
        futures::future::join_all(machines.iter().map(|m| m.stop())).await;
        warn!(agents = agents.len(), replica = %self.replica.id, why, "stopped agents this replica no longer owns");
    }

    /// Gives every lease up and leaves the replicas table (a clean stop).
    pub(super) async fn release_leases(&self) {
        match self.store.release_agent_leases(&self.replica.id).await {
            Ok(released) if released > 0 => info!(agents = released, "gave the agent leases up"),
            Ok(_) => {}
            Err(err) => warn!(error = %err, "could not give the agent leases up; others take them when they expire"),
        }
        if let Err(err) = self.store.forget_replica(&self.replica.id).await {
            warn!(error = %err, "could not remove this replica from the replicas table");
        }
    }
}
