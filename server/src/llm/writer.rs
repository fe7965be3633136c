//! The model gateway's call writer: finished calls are stored and charged in batches, off the
//! path of the agent's answer.
//!
//! A call's answer goes to the agent as soon as the upstream's last byte is through; the
//! call then joins the writer's queue, and the writer commits everything queued in one
//! transaction (`Store::record_model_calls`), so under load one commit (one fsync) serves
//! many calls and the answer never waits for one. Once a batch is committed, each call's
//! credit window is settled with what it was charged, its turn takes what it was charged,
//! and its span is written (through the ingest path, attributed to its agent).
//!
//! The price of answering first: the calls of a batch not yet committed when roost is
//! killed are lost, so it under-charges them (never over-charges). That is at most one
//! batch, a few milliseconds of calls; a graceful stop writes everything queued
//! ([`CallWriter::flush`]).

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tracing::{error, warn};

use super::{Answer, Api, CallRecord, TurnCall, spans};
use crate::{billing::windows::Admitted, store::Store, telemetry::Telemetry};

/// The most calls one transaction stores.
const MAX_BATCH: usize = 512;

/// A finished call, waiting to be stored.
pub(super) struct Finished {
    pub record: CallRecord,
    /// Its credits, when it was admitted against the account's.
    pub admitted: Option<Admitted>,
    /// Its turn, when it was made in one.
    pub turn: Option<TurnCall>,
    /// What its span shows.
    pub runtime_id: String,
    pub api: Api,
    pub request: Value,
    pub answer: Answer,
}

enum Job {
    Call(Box<Finished>),
    Flush(oneshot::Sender<()>),
}

/// The queue to the writer; clones share it.
#[derive(Clone)]
pub(super) struct CallWriter {
    jobs: mpsc::UnboundedSender<Job>,
}

impl CallWriter {
    /// Starts the writer over `store`, writing spans into `telemetry`.
    pub fn start(store: Store, telemetry: std::sync::Arc<Telemetry>) -> Self {
        let (jobs, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_loop(store, telemetry, rx));
        Self { jobs }
    }

    /// Queues a finished call; never waits.
    pub fn write(&self, call: Finished) {
        if let Err(mpsc::error::SendError(Job::Call(call))) = self.jobs.send(Job::Call(Box::new(call))) {
            error!(call = %call.record.id, account = %call.record.account_id,
                cost_nanocents = call.record.cost_nanocents, "the call writer has stopped: a model call is not recorded");
        }
    }

    /// Waits until every call queued before this one is stored.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.jobs.send(Job::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

async fn write_loop(store: Store, telemetry: std::sync::Arc<Telemetry>, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::new();
    let mut flushes = Vec::new();
    while let Some(job) = jobs.recv().await {
        let mut next = Some(job);
        while let Some(job) = next.take() {
            match job {
                Job::Call(call) => batch.push(*call),
                Job::Flush(done) => flushes.push(done),
            }
            if batch.len() < MAX_BATCH {
                next = jobs.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            write(&store, &telemetry, std::mem::take(&mut batch)).await;
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Stores and charges `batch`, then settles each call's window and turn and writes its span.
async fn write(store: &Store, telemetry: &std::sync::Arc<Telemetry>, batch: Vec<Finished>) {
    let records: Vec<&CallRecord> = batch.iter().map(|call| &call.record).collect();
    let charged = match store_with_retries(store, &records).await {
        Ok(charged) => charged,
        // One bad row must not lose the others: each on its own.
        Err(_) if records.len() > 1 => {
            let mut charged = Vec::with_capacity(records.len());
            for record in &records {
                charged
                    .push(store_with_retries(store, &[record]).await.map_or_else(|err| lost(record, &err), |c| c[0]));
            }
            charged
        }
        Err(err) => vec![lost(records[0], &err)],
    };
    drop(records);
    for (call, charged_now) in batch.into_iter().zip(charged) {
        let Finished { record, admitted, turn, runtime_id, api, request, answer } = call;
        if let Some(admitted) = admitted {
            admitted.settle(charged_now);
        }
        let place = match &turn {
            Some(turn) => spans::Placement { trace_id: turn.meter().trace_id, parent: Some(turn.meter().span_id) },
            None => spans::Placement { trace_id: spans::random_trace_id(), parent: None },
        };
        if let Some(turn) = turn {
            turn.settle(charged_now);
        }
        let span: ExportTraceServiceRequest =
            spans::call_span(&record, &runtime_id, &place, api, &request, &answer, charged_now);
        let telemetry = telemetry.clone();
        // The ingest path batches spans itself; the writer does not wait for them.
        tokio::spawn(async move {
            if let Err(err) = telemetry.export_traces(span, Some(record.instance_id.clone())).await {
                warn!(call = %record.id, error = %err.message(), "a model call's span could not be stored");
            }
        });
    }
}

/// Stores `records`, retrying a store that is away a few times (a charge is money).
async fn store_with_retries(store: &Store, records: &[&CallRecord]) -> crate::Result<Vec<i64>> {
    let mut result = store.record_model_calls(records).await;
    for delay in [100, 500, 2000] {
        match &result {
            Err(err) if err.is_unavailable() => {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                result = store.record_model_calls(records).await;
            }
            _ => break,
        }
    }
    result
}

fn lost(record: &CallRecord, err: &crate::Error) -> i64 {
    error!(call = %record.id, instance = %record.instance_id, account = %record.account_id,
        cost_nanocents = record.cost_nanocents, error = %err,
        "a model call could not be recorded: it is not charged");
    0
}
