//! Turn records, written by one task in batches (group commit).
//!
//! Turns are many and small; committing each on its own would cost a commit per turn (and
//! under `--durability disk` an fsync, about 0.4 ms on SQLite). The recorder takes
//! whatever has queued up since its last commit and writes it in one transaction, as far
//! as the store's [`Durability`](crate::store::Durability) says.
//!
//! - Every turn waits for its commit before its caller gets the reply: a turn that was
//!   answered is stored, with its charge (a metered turn is charged in that same
//!   transaction and its reply reports `charged_nanocents`) and its observed event
//!   ([`crate::telemetry::turns`]). Callers arriving while a commit
//!   runs are batched into the next one, so waiting costs latency, not throughput.
//! - A batch that fails is never lost as a whole: after the retries a failing store gets,
//!   its records are written one transaction each, so the good ones are stored and charged
//!   and only a record the store refuses is quarantined: logged with the reason, and its
//!   caller gets an error instead of a reply that was never recorded.
use std::time::Duration;

use roost_proto::ApiError;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, warn};

use super::in_flight::{InFlightMark, InFlightTurn, InFlightTx};
use crate::{
    Error, Result,
    billing::{ChargeKind, LedgerEntry, MoneyTx as _, holds::HoldTx as _},
    store::{BeginWrite, FenceTx, Store, impl_for_connections, on_writer},
    telemetry::{
        rows::EventRow,
        turns::{TurnEvents, TurnEventsTx},
    },
    time::now_ms,
};

/// Most records written in one transaction.
const MAX_BATCH: usize = 1024;
/// Rows per INSERT statement: 17 parameters each stays far below SQLite's 32,766 and
/// PostgreSQL's 65,535 bind parameters.
const ROWS_PER_INSERT: usize = 256;
/// Records waiting for the writer before callers wait too (backpressure).
const QUEUE: usize = 16 * 1024;

/// One finished turn, to be stored.
#[derive(Debug, Clone)]
pub struct TurnRecord {
    /// Turn id.
    pub id: String,
    /// The agent.
    pub instance_id: String,
    /// Its owner (who pays).
    pub account_id: String,
    /// Arrival order.
    pub seq: i64,
    /// Stored status name.
    pub status: &'static str,
    /// Where the message came from.
    pub source: String,
    /// The message.
    pub text: String,
    /// The reply.
    pub reply: String,
    /// What went wrong.
    pub error: String,
    /// Arrival (Unix ms).
    pub queued_at: i64,
    /// Start (Unix ms).
    pub started_at: i64,
    /// Duration.
    pub duration_ms: i64,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Completion tokens.
    pub output_tokens: i64,
    /// Model that answered.
    pub model: String,
    /// Metered cost in nanocents (0 = free, no charge).
    pub cost_nanocents: i64,
    /// What the model gateway charged for the turn's calls, each already on the ledger
    /// (`crate::llm`): the turn reports it, and is not charged again.
    pub calls_charged_nanocents: i64,
    /// The Telegram chat it came from, for source "telegram".
    pub chat_id: Option<i64>,
    /// The agent lease's epoch the turn ran under: the record goes in only while this
    /// replica still holds the lease at that epoch (fencing, see `crate::store::FenceTx`).
    pub lease_epoch: i64,
    /// Whether the turn was written as in flight while it ran (its record deletes that).
    pub marked_in_flight: bool,
    /// Whether credits are held for it (a metered turn): its record releases them, charged
    /// or not (`crate::billing::holds`).
    pub held: bool,
}

enum Job {
    Turn(Box<(TurnRecord, Option<EventRow>)>, Ack),
    /// A turn still running: written as in flight (`super::in_flight`).
    Started(Box<TurnRecord>),
    Flush(oneshot::Sender<()>),
}

/// The handle turns are recorded through.
#[derive(Clone)]
pub struct Recorder {
    jobs: mpsc::Sender<Job>,
}

/// Where the writer task writes: the store, and the telemetry turn events go into; and
/// the replica whose agent leases fence the writes.
struct Sink {
    store: Store,
    events: Option<TurnEvents>,
    replica: String,
}

/// What one record's caller is told: the cents charged, or why it is not recorded.
type Ack = oneshot::Sender<Result<i64, ApiError>>;

impl Recorder {
    /// Starts the writer task, writing turns' events into `events` when given, for the
    /// agents `replica` holds leases of; it ends (after writing everything queued) once
    /// every handle is dropped.
    pub fn start(store: Store, events: Option<TurnEvents>, replica: String) -> (Self, tokio::task::JoinHandle<()>) {
        let (jobs, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(write_loop(Sink { store, events, replica }, rx));
        (Self { jobs }, task)
    }

    /// Records a turn (and its observed event) and waits for the commit; the cents
    /// charged for it. The caller has made it storable ([`TurnRecord::make_storable`]).
    pub async fn record(&self, record: TurnRecord, event: Option<EventRow>) -> Result<i64, ApiError> {
        let (ack, done) = oneshot::channel();
        self.jobs.send(Job::Turn(Box::new((record, event)), ack)).await.map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }

    /// Writes the turn `record` describes as in flight if it is still running after
    /// [`super::in_flight::MARK_AFTER`]; finish the mark when the turn ends.
    pub fn mark_in_flight(&self, record: &TurnRecord) -> InFlightMark {
        // The message is not checked at the API boundary either: a NUL in it must not fail
        // the recorder's batch.
        let mut record = record.clone();
        record.make_storable();
        InFlightMark::after(self.jobs.clone(), record, |r| Job::Started(Box::new(r)))
    }

    /// Waits until every turn recorded before this call is committed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.jobs.send(Job::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

impl TurnRecord {
    /// What a runtime answers is not checked at the API boundary: a NUL in a reply, an
    /// error or a model name (which PostgreSQL's text cannot hold) becomes U+FFFD here, so
    /// one odd reply cannot make its record (or its observed event) unstorable.
    pub(crate) fn make_storable(&mut self) {
        for text in [&mut self.text, &mut self.reply, &mut self.error, &mut self.model, &mut self.source] {
            if text.contains('\0') {
                *text = text.replace('\0', "\u{FFFD}");
            }
        }
    }

    /// The turn as written while it still runs (`turns_in_flight`).
    fn in_flight(&self) -> InFlightTurn<'_> {
        InFlightTurn {
            id: &self.id,
            instance_id: &self.instance_id,
            account_id: &self.account_id,
            seq: self.seq,
            source: &self.source,
            text: &self.text,
            queued_at: self.queued_at,
            started_at: self.started_at,
            model: &self.model,
            chat_id: self.chat_id,
            lease_epoch: self.lease_epoch,
        }
    }
}

fn stopped() -> ApiError {
    ApiError::new(roost_proto::ErrorReason::Unavailable, "roost is shutting down")
}

/// What the caller of a turn fenced out gets.
fn fenced(record: &TurnRecord) -> ApiError {
    ApiError::new(
        roost_proto::ErrorReason::Unavailable,
        format!(
            "agent {} moved to another replica during the turn (this one lost its lease); the turn was not recorded \
             nor charged; retry",
            record.instance_id
        ),
    )
}

async fn write_loop(sink: Sink, mut jobs: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = jobs.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit(&sink, &mut batch).await;
    }
}

/// Writes a batch and answers its callers. A failing batch is retried while the failure
/// looks like the store being away; then its records are written one by one.
async fn commit(sink: &Sink, batch: &mut Vec<Job>) {
    let mut records = Vec::with_capacity(batch.len());
    let mut acks = Vec::with_capacity(batch.len());
    let mut started = Vec::new();
    let mut flushes = Vec::new();
    for job in batch.drain(..) {
        match job {
            Job::Turn(turn, ack) => {
                records.push(*turn);
                acks.push(ack);
            }
            Job::Started(record) => started.push(*record),
            Job::Flush(done) => flushes.push(done),
        }
    }
    let all: Vec<&(TurnRecord, Option<EventRow>)> = records.iter().collect();
    let started: Vec<&TurnRecord> = started.iter().collect();
    match with_retries(sink, &all, &started).await {
        Ok(charged) => {
            for ((ack, cents), turn) in acks.into_iter().zip(charged).zip(&records) {
                let _ = ack.send(cents.ok_or_else(|| fenced(&turn.0)));
            }
        }
        Err(err) => {
            warn!(error = %err, turns = records.len(), "recording a batch of turns failed; recording them one by one");
            // In-flight marks first, so a turn's record then finds (and deletes) its mark.
            if let Err(err) = with_retries(sink, &[], &started).await {
                warn!(error = %err, turns = started.len(), "could not write turns as in flight");
            }
            for (turn, ack) in records.iter().zip(acks) {
                let _ = ack.send(record_alone(sink, turn).await);
            }
        }
    }
    for done in flushes {
        let _ = done.send(());
    }
}

/// One record in a transaction of its own; a record the store refuses is quarantined.
async fn record_alone(sink: &Sink, turn: &(TurnRecord, Option<EventRow>)) -> Result<i64, ApiError> {
    let record = &turn.0;
    match with_retries(sink, &[turn], &[]).await {
        Ok(charged) => charged.first().copied().flatten().ok_or_else(|| fenced(record)),
        Err(err) => {
            error!(
                error = %err,
                turn = %record.id,
                instance = %record.instance_id,
                account = %record.account_id,
                status = record.status,
                "turn quarantined: the store refused its record, so its caller gets an error and it is not charged"
            );
            Err(err.to_api())
        }
    }
}

/// [`write_batch`], retried a few times while the store is unreachable (a data error
/// would fail again: it is returned at once).
async fn with_retries(
    sink: &Sink,
    turns: &[&(TurnRecord, Option<EventRow>)],
    started: &[&TurnRecord],
) -> Result<Vec<Option<i64>>> {
    let mut outcome = write_batch(sink, turns, started).await;
    for delay in [100, 500, 2000] {
        match &outcome {
            Err(err) if err.is_unavailable() => {
                warn!(error = %err, "recording turns failed; retrying");
                tokio::time::sleep(Duration::from_millis(delay)).await;
                outcome = write_batch(sink, turns, started).await;
            }
            _ => break,
        }
    }
    outcome
}

/// One transaction: every turn row whose agent this replica still holds at the turn's
/// epoch, the metered charges and the turns' events; the turns `started` (still running)
/// as in flight, and the in-flight rows of the recorded turns deleted. Returns the cents
/// charged per record, in order; `None` for a record fenced out (its agent's lease moved
/// on).
async fn write_batch(
    sink: &Sink,
    turns: &[&(TurnRecord, Option<EventRow>)],
    started: &[&TurnRecord],
) -> Result<Vec<Option<i64>>> {
    if turns.is_empty() && started.is_empty() {
        return Ok(Vec::new());
    }
    let mut ids: Vec<&str> =
        turns.iter().map(|t| t.0.instance_id.as_str()).chain(started.iter().map(|r| r.instance_id.as_str())).collect();
    ids.sort_unstable();
    ids.dedup();
    let now_ns = now_ms() * 1_000_000;
    let (charged, events, written) = on_writer!(sink.store, |pool| {
        let mut tx = pool.begin_volume(sink.store.durability()).await?;
        let held = tx.held_leases(&sink.replica, &ids).await?;
        let kept: Vec<&(TurnRecord, Option<EventRow>)> =
            turns.iter().copied().filter(|t| held.get(&t.0.instance_id) == Some(&t.0.lease_epoch)).collect();
        let records: Vec<&TurnRecord> = kept.iter().map(|t| &t.0).collect();
        let still_running: Vec<InFlightTurn<'_>> = started
            .iter()
            .filter(|r| held.get(&r.instance_id) == Some(&r.lease_epoch))
            .map(|r| r.in_flight())
            .collect();
        tx.insert_in_flight(&still_running).await?;
        let mut charged = Vec::with_capacity(records.len());
        for record in &records {
            charged.push(if record.cost_nanocents > 0 {
                tx.charge_turn(record).await?
            } else {
                record.calls_charged_nanocents
            });
        }
        for (rows, cents) in records.chunks(ROWS_PER_INSERT).zip(charged.chunks(ROWS_PER_INSERT)) {
            tx.insert_turns(rows, cents).await?;
        }
        let marked: Vec<&str> = records.iter().filter(|r| r.marked_in_flight).map(|r| r.id.as_str()).collect();
        if !marked.is_empty() {
            tx.delete_in_flight(&marked).await?;
        }
        // Holds go with the charge, and with a fenced-out turn too: it was never charged.
        let holds: Vec<&str> = turns.iter().filter(|t| t.0.held).map(|t| t.0.id.as_str()).collect();
        if !holds.is_empty() {
            tx.release_holds(&holds).await?;
        }
        let events = sink.events.as_ref().map(|e| e.batch(kept.iter().filter_map(|t| t.1.clone()).collect()));
        let written = match &events {
            Some(events) if !events.batch.events.is_empty() => Some(tx.write_turn_events(events, now_ns).await?),
            _ => None,
        };
        tx.commit().await?;
        let mut charged = charged.into_iter();
        let per_record: Vec<Option<i64>> = turns
            .iter()
            .map(|t| (held.get(&t.0.instance_id) == Some(&t.0.lease_epoch)).then(|| charged.next().unwrap_or_default()))
            .collect();
        Ok::<_, Error>((per_record, events, written))
    })?;
    if let (Some(sink_events), Some(events), Some(written)) = (&sink.events, &events, &written) {
        sink_events.committed(events, written);
    }
    Ok(charged)
}

/// Turn statements inside a write transaction.
trait TurnTx {
    /// Charges a metered turn its exact cost; the nanocents charged.
    async fn charge_turn(&mut self, record: &TurnRecord) -> Result<i64>;
    /// Stores turn rows, in one statement.
    async fn insert_turns(&mut self, records: &[&TurnRecord], charged_nanocents: &[i64]) -> Result<()>;
}

impl_for_connections! {
    impl TurnTx {
        async fn charge_turn(&mut self, record: &TurnRecord) -> Result<i64> {
            let what = format!(
                "model use: {} in + {} out tokens of {}",
                record.input_tokens, record.output_tokens, record.model
            );
            let entry = LedgerEntry::new(
                &record.account_id,
                Some(&record.instance_id),
                ChargeKind::Usage,
                0,
                0,
                what,
                record.started_at,
            )
            .for_turn(&record.id);
            self.charge_usage(record.cost_nanocents, entry).await
        }

        async fn insert_turns(&mut self, records: &[&TurnRecord], charged_nanocents: &[i64]) -> Result<()> {
            let mut insert = sqlx::QueryBuilder::new(
                "INSERT INTO turns (id, instance_id, account_id, seq, status, source, text, reply, error, queued_at, \
                 started_at, duration_ms, input_tokens, output_tokens, model, charged_nanocents, chat_id) ",
            );
            insert.push_values(records.iter().zip(charged_nanocents), |mut row, (r, cents)| {
                row.push_bind(&r.id)
                    .push_bind(&r.instance_id)
                    .push_bind(&r.account_id)
                    .push_bind(r.seq)
                    .push_bind(r.status)
                    .push_bind(&r.source)
                    .push_bind(&r.text)
                    .push_bind(&r.reply)
                    .push_bind(&r.error)
                    .push_bind(r.queued_at)
                    .push_bind(r.started_at)
                    .push_bind(r.duration_ms)
                    .push_bind(r.input_tokens)
                    .push_bind(r.output_tokens)
                    .push_bind(&r.model)
                    .push_bind(*cents)
                    .push_bind(r.chat_id);
            });
            insert.build().execute(&mut *self).await?;
            Ok(())
        }
    }
}
