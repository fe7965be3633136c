//! Turns whose runner died (issue: "the new owner marks that turn interrupted").
//!
//! A turn still running after [`MARK_AFTER`] is written to `turns_in_flight` by the
//! recorder, fenced by the agent's lease like every write of a running agent; the
//! transaction that records the finished turn deletes that row. Most turns end sooner and
//! write nothing extra: an echo turn costs no more than before.
//!
//! When a replica takes an agent's lease (another replica died or was paused past its TTL,
//! or on SQLite the process restarted), rows left from an older epoch belong to turns that
//! were never recorded: [`Hosting::interrupt_turns`] stores each as a turn with status
//! `interrupted`, charged nothing, before the agent boots. Their callers already had their
//! answer: the replica they called reports that the owner stopped mid-call (503), or on
//! SQLite the connection ended with the process.
//!
//! A turn that dies within [`MARK_AFTER`] leaves no row and so no `interrupted` turn: the
//! mark is there for the turns worth seeing in activity, and writing one for every turn
//! would cost each turn a second write.

use std::time::Duration;

use tokio::{sync::mpsc, task::JoinHandle};
use tracing::{info, warn};

use super::{Hosting, live::Agent};
use crate::{
    Result,
    store::{BeginWrite, impl_for_connections, on_writer},
    time::now_ms,
};

/// How long a turn runs before it is written down as in flight.
pub const MARK_AFTER: Duration = Duration::from_millis(200);

/// What an interrupted turn's `error` says.
const INTERRUPTED: &str =
    "the replica running this agent stopped during the turn; the turn was not finished nor charged";

/// A running turn as `turns_in_flight` holds it: what the next owner needs to record it as
/// interrupted. The recorder fills it from its turn record; it is defined here, not there,
/// because the recorder uses this module (the marks, [`InFlightTx`]) and this module must
/// not use the recorder back.
pub(super) struct InFlightTurn<'a> {
    /// Turn id.
    pub id: &'a str,
    /// The agent.
    pub instance_id: &'a str,
    /// Its owner.
    pub account_id: &'a str,
    /// Arrival order.
    pub seq: i64,
    /// Where the message came from.
    pub source: &'a str,
    /// The message.
    pub text: &'a str,
    /// Arrival (Unix ms).
    pub queued_at: i64,
    /// Start (Unix ms).
    pub started_at: i64,
    /// The model asked.
    pub model: &'a str,
    /// The Telegram chat it came from, for source "telegram".
    pub chat_id: Option<i64>,
    /// The agent lease's epoch the turn runs under.
    pub lease_epoch: i64,
}

/// The pending in-flight mark of one running turn.
pub struct InFlightMark {
    task: JoinHandle<bool>,
}

impl InFlightMark {
    /// Hands `record` to the recorder's queue `jobs` (through `send`) once the turn has run
    /// for [`MARK_AFTER`].
    pub(super) fn after<R: Send + 'static, J: Send + 'static>(
        jobs: mpsc::Sender<J>,
        record: R,
        send: fn(R) -> J,
    ) -> Self {
        let task = tokio::spawn(async move {
            tokio::time::sleep(MARK_AFTER).await;
            // Never waits: with the recorder's queue full the mark is skipped.
            jobs.try_send(send(record)).is_ok()
        });
        Self { task }
    }

    /// The turn ended: cancels the mark if it is not written yet; whether it was handed to
    /// the recorder (so the turn's record must delete it).
    pub async fn finish(self) -> bool {
        self.task.abort();
        self.task.await.unwrap_or(false)
    }
}

/// In-flight rows inside the recorder's (or the adoption's) transaction.
pub(super) trait InFlightTx {
    /// Writes turns as in flight, unless already recorded (a mark racing its turn's end).
    async fn insert_in_flight(&mut self, turns: &[InFlightTurn<'_>]) -> Result<()>;
    /// Deletes the in-flight rows of recorded turns.
    async fn delete_in_flight(&mut self, ids: &[&str]) -> Result<()>;
    /// Records agent `id`'s turns left in flight under an epoch before `epoch` as
    /// interrupted and deletes their rows; how many.
    async fn interrupt_in_flight(&mut self, id: &str, epoch: i64, now: i64) -> Result<u64>;
    /// Deletes a destroyed agent's in-flight rows (its turns end with it, unrecorded).
    async fn forget_in_flight(&mut self, id: &str) -> Result<()>;
}

impl_for_connections! {
    impl InFlightTx {
        async fn insert_in_flight(&mut self, turns: &[InFlightTurn<'_>]) -> Result<()> {
            for r in turns {
                sqlx::query(
                    "INSERT INTO turns_in_flight (id, instance_id, account_id, seq, source, text, queued_at, started_at, \
                     model, chat_id, lease_epoch) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 \
                     WHERE NOT EXISTS (SELECT 1 FROM turns WHERE id = $1) ON CONFLICT (id) DO NOTHING",
                )
                .bind(r.id)
                .bind(r.instance_id)
                .bind(r.account_id)
                .bind(r.seq)
                .bind(r.source)
                .bind(r.text)
                .bind(r.queued_at)
                .bind(r.started_at)
                .bind(r.model)
                .bind(r.chat_id)
                .bind(r.lease_epoch)
                .execute(&mut *self)
                .await?;
            }
            Ok(())
        }

        async fn delete_in_flight(&mut self, ids: &[&str]) -> Result<()> {
            for chunk in ids.chunks(500) {
                let mut query = sqlx::QueryBuilder::new("DELETE FROM turns_in_flight WHERE id IN (");
                let mut list = query.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                list.push_unseparated(")");
                query.build().execute(&mut *self).await?;
            }
            Ok(())
        }

        async fn interrupt_in_flight(&mut self, id: &str, epoch: i64, now: i64) -> Result<u64> {
            let interrupted = sqlx::query(
                "INSERT INTO turns (id, instance_id, account_id, seq, status, source, text, reply, error, queued_at, \
                 started_at, duration_ms, input_tokens, output_tokens, model, charged_nanocents, chat_id) \
                 SELECT id, instance_id, account_id, seq, 'interrupted', source, text, '', $3, queued_at, started_at, \
                 CASE WHEN $4 > started_at THEN $4 - started_at ELSE 0 END, 0, 0, model, 0, chat_id \
                 FROM turns_in_flight f WHERE instance_id = $1 AND lease_epoch < $2 \
                 AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = f.id)",
            )
            .bind(id)
            .bind(epoch)
            .bind(INTERRUPTED)
            .bind(now)
            .execute(&mut *self)
            .await?
            .rows_affected();
            sqlx::query("DELETE FROM turns_in_flight WHERE instance_id = $1 AND lease_epoch < $2")
                .bind(id)
                .bind(epoch)
                .execute(&mut *self)
                .await?;
            // Credits held for the agent's turns belong to runners that are gone (the new
            // owner has run none yet): they count no more (`crate::billing::holds`).
            sqlx::query("DELETE FROM credit_holds WHERE instance_id = $1").bind(id).execute(&mut *self).await?;
            Ok(interrupted)
        }

        async fn forget_in_flight(&mut self, id: &str) -> Result<()> {
            sqlx::query("DELETE FROM turns_in_flight WHERE instance_id = $1").bind(id).execute(&mut *self).await?;
            Ok(())
        }
    }
}

impl Hosting {
    /// Records the turns an earlier owner of `agent` left unfinished as interrupted (under
    /// `agent`'s lease, before it boots here).
    pub(super) async fn interrupt_turns(&self, agent: &Agent) {
        let outcome: Result<u64> = async {
            Ok(on_writer!(self.store, |pool| {
                let mut tx = pool.begin_write().await?;
                self.fence(&mut *tx, agent).await?;
                let interrupted = tx.interrupt_in_flight(&agent.id, agent.epoch, now_ms()).await?;
                tx.commit().await?;
                interrupted
            }))
        }
        .await;
        match outcome {
            Ok(0) => {}
            Ok(turns) => {
                info!(instance = %agent.id, turns, "recorded turns an earlier owner left unfinished as interrupted")
            }
            Err(err) => warn!(instance = %agent.id, error = %err, "could not record the agent's unfinished turns"),
        }
    }
}
