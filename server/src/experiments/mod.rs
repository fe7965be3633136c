//! Datasets and experiments (docs/evaluating.md): datasets of items (an input, an expected
//! output, metadata), and experiments that run every item of one as a turn against a
//! hosted agent and keep what each answer came to.
//!
//! - **Who.** A dataset or experiment belongs to its maker: an account (its API key as the
//!   bearer; `owner` is the account) or the operator (a dashboard caller; `owner` is '').
//!   An account sees only its own, runs experiments only on its own agents, and takes
//!   items only from its own agents' turns. The operator sees everything, runs experiments
//!   on any agent, takes items from recorded model calls too, and may grade answers with
//!   evaluators (whose judge calls their own budgets pay, [`crate::evaluations`]).
//! - **Billed like any turn.** An item's turn goes through the agent's queue like any
//!   other message (source `experiment`) and is charged to the agent's account. A copy is
//!   provisioned and destroyed like any agent: it is charged its period in advance and
//!   refunded the unused part when the run ends.
//! - **Once per item, across restarts.** The worker ([`worker`]) writes an item's result
//!   row, with the turn id it will use, before the turn runs; (experiment, item) is its
//!   primary key and the turn id is unique. After a restart a `running` row is settled from
//!   the turn it names: a recorded turn (completed, failed, or `interrupted` when roost
//!   died under it, charged nothing) is never run again; a turn with no record (it died
//!   before its first 200 ms, writing nothing and charging nothing) is run under the same
//!   id. So no item is run twice and nothing is charged twice.
//! - **Cancellable.** Cancelling sets the status; the worker stops after the item it is on
//!   and destroys the copy.

pub mod checks;
pub mod datasets;
pub mod imports;
pub mod runs;
pub mod service;
pub mod worker;

use std::sync::Arc;

use roost_proto::ApiError;
use tokio::sync::Notify;

use crate::{agents::Hosting, evaluations::Evaluators, scores::Scores, store::Store};

/// The turn source of an experiment's turns.
pub const SOURCE: &str = "experiment";
/// Most items one request adds.
pub const MAX_ITEMS_A_REQUEST: usize = 10_000;
/// Most items a dataset holds.
pub const MAX_ITEMS: i64 = 100_000;
/// Longest item input (a turn's message limit).
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// Longest expected output.
pub const MAX_EXPECTED_BYTES: usize = 256 * 1024;
/// Longest metadata, as JSON.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A dashboard caller: everything.
    Operator,
    /// An account holder: its own datasets, experiments and agents.
    Account(String),
}

impl Caller {
    /// What `owner` columns hold for things this caller makes.
    pub fn owner(&self) -> &str {
        match self {
            Self::Operator => "",
            Self::Account(id) => id,
        }
    }

    /// Whether this caller may see what `owner` made.
    pub fn sees(&self, owner: &str) -> bool {
        match self {
            Self::Operator => true,
            Self::Account(id) => id == owner,
        }
    }
}

pub(crate) fn invalid(why: impl Into<String>) -> crate::Error {
    ApiError::invalid_argument(why).into()
}

/// The datasets and experiments of one store.
pub struct Experiments {
    pub(crate) store: Store,
    pub(crate) hosting: Arc<Hosting>,
    pub(crate) evaluators: Arc<Evaluators>,
    pub(crate) scores: Arc<Scores>,
    /// Woken when an experiment is queued or cancelled.
    pub(crate) wake: Notify,
}

impl Experiments {
    /// Datasets and experiments over `store`, running turns through `hosting` and grading
    /// answers with `evaluators` into `scores`.
    pub fn new(store: Store, hosting: Arc<Hosting>, evaluators: Arc<Evaluators>, scores: Arc<Scores>) -> Self {
        Self { store, hosting, evaluators, scores, wake: Notify::new() }
    }
}
