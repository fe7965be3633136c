//! The live half of a hosted agent: its machine, its turn queue and its lifecycle lock.
//!
//! Three locks, each for one job:
//! - `state` (a short std mutex): status, settings, the machine and its generation;
//! - `lifecycle` (async): one lifecycle change at a time (provision's boot, config, pause,
//!   resume, destroy, renewal, a crash), each writing the store first, then `state`;
//! - `turns` (async, FIFO-fair): one turn at a time, in arrival order. A caller waiting for
//!   it who goes away drops its lock future, which is what "leaves the queue" means.
//!
//! A generation token belongs to each boot of the machine. Cancelling it (pause, config,
//! destroy, suspension, crash) stops the boot and fails the turn in flight.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicI64, Ordering},
    },
};

use roost_proto::{ApiError, ErrorReason};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::instances::{InstanceRow, Settings, Status, no_such_instance};
use crate::{
    runtimes::{Machine, MachineSpec, RuntimeSpec},
    secrets::{Sealed, SecretKey, Slot},
};

/// The mutable part of a live agent.
pub struct Live {
    /// Lifecycle state.
    pub status: Status,
    /// Why it is in that state, when that needs saying.
    pub detail: String,
    /// Current settings.
    pub settings: Settings,
    /// The machine, while running.
    pub machine: Option<Arc<dyn Machine>>,
    /// The current boot's token.
    pub generation: CancellationToken,
}

/// A hosted agent that exists (is not destroyed).
pub struct Agent {
    /// Instance id.
    pub id: String,
    /// Owner.
    pub account_id: String,
    /// Its catalogue entry.
    pub runtime: Arc<RuntimeSpec>,
    /// True when its runtime is no longer in the catalogue: it cannot boot again, only be
    /// destroyed (and is not renewed).
    pub retired: bool,
    state: Mutex<Live>,
    /// Serialises lifecycle changes.
    pub lifecycle: tokio::sync::Mutex<()>,
    /// One turn at a time, FIFO.
    pub turns: Arc<tokio::sync::Mutex<()>>,
    /// Bounds the queue: a permit per caller waiting or running.
    pub queue: Arc<Semaphore>,
    /// The turn running now, which the agent's model calls through the model gateway join.
    pub model_turn: crate::callers::TurnSlot,
    /// The epoch of this replica's lease of the agent: its writes go in only while the
    /// lease is still held at it. A lease taken again later makes a new `Agent`.
    pub epoch: i64,
    next_seq: AtomicI64,
}

/// What a turn needs from a running agent, taken under the turn lock.
pub struct RunningMachine {
    /// The machine.
    pub machine: Arc<dyn Machine>,
    /// Cancelled when the agent stops during the turn.
    pub generation: CancellationToken,
    /// Settings it runs with.
    pub settings: Settings,
}

impl Agent {
    /// A live agent for a stored row, in `status`, with no machine yet, held under lease
    /// `epoch`.
    pub fn new(row: &InstanceRow, runtime: Arc<RuntimeSpec>, status: Status, queue_depth: usize, epoch: i64) -> Self {
        Self {
            id: row.id.clone(),
            account_id: row.account_id.clone(),
            runtime,
            retired: false,
            state: Mutex::new(Live {
                status,
                detail: row.status_detail.clone(),
                settings: Settings::of(row),
                machine: None,
                generation: CancellationToken::new(),
            }),
            lifecycle: tokio::sync::Mutex::new(()),
            turns: Arc::new(tokio::sync::Mutex::new(())),
            queue: Arc::new(Semaphore::new(queue_depth)),
            model_turn: crate::callers::TurnSlot::default(),
            epoch,
            next_seq: AtomicI64::new(1),
        }
    }

    /// The live state. Never held across an await.
    pub fn state(&self) -> MutexGuard<'_, Live> {
        // A panic while holding this short lock would be a bug; keep serving regardless.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the lifecycle lock for a client's lifecycle call; 404 when the agent was
    /// destroyed while the call waited for it (a destroy that won the race).
    pub async fn lock_lifecycle(&self) -> Result<tokio::sync::MutexGuard<'_, ()>, ApiError> {
        let guard = self.lifecycle.lock().await;
        if self.status() == Status::Destroyed {
            return Err(no_such_instance(&self.id));
        }
        Ok(guard)
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.state().status
    }

    /// The next number of a turn in the agent's queue; drawn under the turn lock.
    pub fn next_seq(&self) -> i64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// The machine, if the agent is running: what a turn runs on.
    pub fn running(&self) -> Result<RunningMachine, ApiError> {
        let live = self.state();
        match (&live.machine, live.status) {
            (Some(machine), Status::Running) => Ok(RunningMachine {
                machine: machine.clone(),
                generation: live.generation.clone(),
                settings: live.settings.clone(),
            }),
            _ => Err(not_running(live.status)),
        }
    }

    /// Starts a new generation (cancelling the old one) in `status`; returns the new token
    /// and the machine the old generation ran, for the caller to stop.
    pub fn begin_generation(&self, status: Status) -> (CancellationToken, Option<Arc<dyn Machine>>) {
        let mut live = self.state();
        live.generation.cancel();
        live.generation = CancellationToken::new();
        live.status = status;
        live.detail.clear();
        (live.generation.clone(), live.machine.take())
    }

    /// Ends the current generation in `status` (paused, suspended, failed, destroyed), with
    /// why; returns the machine for the caller to stop.
    pub fn end_generation(&self, status: Status, detail: &str) -> Option<Arc<dyn Machine>> {
        let mut live = self.state();
        live.generation.cancel();
        live.status = status;
        live.detail = detail.to_owned();
        live.machine.take()
    }

    /// The spec the machine of this agent starts from: the one place its secrets are
    /// opened. The error (a boot failure's detail) says which secret did not open.
    pub fn machine_spec(&self, key: &SecretKey) -> Result<MachineSpec, String> {
        let settings = self.state().settings.clone();
        let model = if settings.model.is_empty() { self.runtime.default_model.clone() } else { settings.model.clone() };
        let open = |name: &str, sealed: Option<Sealed>, slot: Slot<'_>| {
            sealed
                .map(|sealed| key.open(&sealed, slot))
                .transpose()
                .map_err(|why| format!("the stored {name} cannot be opened ({why}); set it again with the config call"))
        };
        Ok(MachineSpec {
            instance_id: self.id.clone(),
            account_id: self.account_id.clone(),
            turn: self.model_turn.clone(),
            runtime: self.runtime.clone(),
            brief: settings.brief,
            model_mode: settings.model_mode,
            model,
            provider_api_key: open("PROVIDER_API_KEY", settings.provider_api_key, Slot::provider_api_key(&self.id))?,
            messaging_bot_token: open(
                "MESSAGING_BOT_TOKEN",
                settings.messaging_bot_token,
                Slot::messaging_bot_token(&self.id),
            )?,
        })
    }
}

/// 409 `wrong_state` for a message to an agent that is not running.
pub fn not_running(status: Status) -> ApiError {
    ApiError::new(ErrorReason::WrongState, format!("the agent is {}; messages need it running", status.as_str()))
}

/// Every live agent, by id.
#[derive(Default)]
pub struct Registry {
    agents: Mutex<HashMap<String, Arc<Agent>>>,
}

impl Registry {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Agent>>> {
        self.agents.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds an agent.
    pub fn insert(&self, agent: Arc<Agent>) {
        self.map().insert(agent.id.clone(), agent);
    }

    /// Removes an agent.
    pub fn remove(&self, id: &str) {
        self.map().remove(id);
    }

    /// An agent by id, whoever owns it.
    pub fn get(&self, id: &str) -> Option<Arc<Agent>> {
        self.map().get(id).cloned()
    }

    /// How many agents there are.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    /// Every agent.
    pub fn all(&self) -> Vec<Arc<Agent>> {
        self.map().values().cloned().collect()
    }
}
