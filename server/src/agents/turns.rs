//! Synchronous turns: one at a time per agent, in arrival order, under the hard cap.
//!
//! A caller holds two things while it waits: a queue permit (the bound; none left → 429)
//! and its place in the agent's FIFO turn lock. Dropping the call (the client hung up)
//! drops both, so it leaves the queue. Once its turn starts, the turn runs in its own task
//! to the end and is recorded whether or not the caller is still there.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::StreamExt as _;
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        ReplyDelta, SendMessageRequest, SendMessageResponse, StreamMessageRequest, StreamMessageResponse, ToolStep,
        Usage,
    },
};
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use super::{Hosting, limits, live::Agent, recorder::TurnRecord, routing::Route};
use crate::{
    Result,
    billing::money::nanocents_to_cents,
    callers::TurnTotals,
    cluster::peers::forwarded_error,
    ids::new_sortable_id,
    runtimes::{TurnInput, TurnOutput},
    telemetry::{rows::EventRow, turns::detail},
    time::{now_ms, timestamp_ms},
    turn_stream::{TurnEvent, TurnStream},
};

/// A streamed turn: its events, then its answer as the last item (or its error). Dropping
/// it before the end hangs up, which cancels the turn.
pub type MessageStream = futures::stream::BoxStream<'static, Result<StreamMessageResponse>>;

/// Where a turn's message came from, and who waits for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origin {
    /// "api", "grpc", "mcp", "web", "telegram".
    pub source: String,
    /// The Telegram chat, for source "telegram".
    pub chat_id: Option<i64>,
    /// The turn's id when the sender chose it beforehand (the channel stores it with the
    /// update, so a restart finds the turn instead of running it twice).
    pub turn_id: Option<String>,
    /// Where the turn's events go, when its caller streams it.
    pub events: TurnStream,
    /// Cancelled when a streaming caller hangs up: the turn then leaves the queue, or
    /// stops and is settled as cancelled. A synchronous caller's turn runs to its end.
    pub hang_up: CancellationToken,
}

/// How long a finished turn waits for its model calls to be charged (a streamed call is
/// charged just after its last chunk; the runtime may answer first).
const CALLS_SETTLE: Duration = Duration::from_secs(10);

/// How a turn ended.
enum Outcome {
    Completed(TurnOutput),
    Failed(ApiError),
    TimedOut,
    Cancelled,
    /// Its streaming caller went away.
    HungUp,
}

/// The agent's turn lock, once the turns queued before this one have run; an error when
/// the caller hangs up first. The lock is fair, so the order turns take it is the agent's
/// queue.
async fn turn_lock(agent: &Agent, origin: &Origin) -> Result<OwnedMutexGuard<()>> {
    tokio::select! {
        turn = agent.turns.clone().lock_owned() => Ok(turn),
        () = origin.hang_up.cancelled() => {
            Err(ApiError::new(ErrorReason::WrongState, "the caller hung up before the turn started").into())
        }
    }
}

/// A delta or tool step as the API sends it.
fn event_message(event: TurnEvent) -> StreamMessageResponse {
    match event {
        TurnEvent::Delta(text) => StreamMessageResponse { delta: Some(ReplyDelta { text }), ..Default::default() },
        TurnEvent::Tool(step) => StreamMessageResponse {
            tool: Some(ToolStep {
                id: step.id,
                name: step.name,
                arguments: step.arguments,
                finished: step.finished,
                result: step.result,
                duration_ms: step.duration_ms,
            }),
            ..Default::default()
        },
    }
}

/// The last event of a streamed turn.
fn done_message(answer: SendMessageResponse) -> StreamMessageResponse {
    StreamMessageResponse { done: Some(answer), ..Default::default() }
}

/// Where a streamed turn is.
enum Step {
    /// Its events, as they come.
    Events,
    /// Over: the events it wrote before it ended, then its answer.
    Draining(Result<SendMessageResponse>),
    Ended,
}

/// A streamed turn's events, as they come, then its answer. The answer does not wait for
/// the event channel to close (a model call the runtime left running may hold it open):
/// once the turn is over, what it wrote is drained and the answer follows. Dropping the
/// stream drops `hang_up`, which cancels the turn.
fn turn_stream(
    events: tokio::sync::mpsc::UnboundedReceiver<TurnEvent>,
    answer: tokio::sync::oneshot::Receiver<Result<SendMessageResponse>>,
    hang_up: tokio_util::sync::DropGuard,
) -> MessageStream {
    type Receiver = tokio::sync::mpsc::UnboundedReceiver<TurnEvent>;
    fn drained(
        mut events: Receiver,
        result: Result<SendMessageResponse>,
    ) -> (Result<StreamMessageResponse>, Step, Receiver) {
        match events.try_recv() {
            Ok(event) => (Ok(event_message(event)), Step::Draining(result), events),
            Err(_) => (result.map(done_message), Step::Ended, events),
        }
    }
    // The guard is part of the state, so it lives exactly as long as the stream.
    futures::stream::unfold((events, answer, Step::Events, hang_up), |(mut events, mut answer, step, hang_up)| async move {
        let (item, step, events) = match step {
            Step::Ended => return None,
            Step::Draining(result) => drained(events, result),
            Step::Events => {
                let next = tokio::select! {
                    biased;
                    Some(event) = events.recv() => Ok(event),
                    result = &mut answer => Err(result
                        .unwrap_or_else(|_| Err(ApiError::internal("the turn task ended without an answer").into()))),
                };
                match next {
                    Ok(event) => (Ok(event_message(event)), Step::Events, events),
                    Err(result) => drained(events, result),
                }
            }
        };
        Some((item, (events, answer, step, hang_up)))
    })
    .boxed()
}

impl Hosting {
    /// A turn as observed activity, written with it. When its runtime called the model
    /// through the model gateway, those calls' spans carry the tokens and cost: the event names
    /// them in its data but counts none itself, so nothing is counted twice.
    fn event_of(&self, turn: &TurnRecord, runtime: &str, calls: TurnTotals) -> EventRow {
        let data = serde_json::json!({
            "status": turn.status,
            "source": turn.source,
            "runtime": runtime,
            "text": detail(&turn.text),
            "reply": detail(&turn.reply),
            "error": turn.error,
            "duration_ms": turn.duration_ms,
            "chat_id": turn.chat_id,
            "model_calls": calls.calls,
            "input_tokens": turn.input_tokens,
            "output_tokens": turn.output_tokens,
        });
        let (input_tokens, output_tokens, cost_nanocents) = if calls.calls > 0 {
            (0, 0, 0)
        } else {
            let cost = self
                .config
                .prices
                .lookup(&turn.model)
                .map_or(0, |p| turn.input_tokens * p.input + turn.output_tokens * p.output);
            (turn.input_tokens, turn.output_tokens, cost)
        };
        EventRow {
            run_id: String::new(),
            id: turn.id.clone(),
            ts_ns: turn.started_at.saturating_mul(1_000_000),
            event_type: "turn".to_owned(),
            session_id: turn.instance_id.clone(),
            agent_id: turn.instance_id.clone(),
            tool_name: String::new(),
            model: turn.model.clone(),
            role: "assistant".to_owned(),
            input_tokens,
            output_tokens,
            cost_nanocents,
            data: data.to_string(),
            // roost wrote it: the one kind of event the guard counts for the agent.
            agent_instance: turn.instance_id.clone(),
        }
    }

    /// Writes the span of a turn whose runtime called the model: the parent of those calls'
    /// spans, in the turn's trace.
    fn trace_turn(&self, record: &TurnRecord, agent: &Agent, error: Option<&str>) {
        let Some(telemetry) = self.telemetry.clone() else { return };
        let (instance, runtime, turn) = (agent.id.clone(), agent.runtime.id.clone(), record.id.clone());
        let times = (record.started_at, record.started_at.saturating_add(record.duration_ms));
        let error = error.map(str::to_owned);
        tokio::spawn(async move {
            crate::llm::record_turn_span(&telemetry, (&instance, &runtime), &turn, times, error.as_deref()).await;
        });
    }

    /// Checks a message for agent `instance_id` and finds where the agent runs, with its id.
    async fn message_route(&self, account_id: &str, instance_id: &str, text: &str) -> Result<(Route, String)> {
        let id = limits::instance_id(instance_id)?;
        limits::text(text)?;
        Ok((self.route(id, account_id).await?, id.to_owned()))
    }

    /// Runs one turn for the caller's agent; `source` says where the message came from.
    pub async fn send_message(
        self: &Arc<Self>,
        account_id: &str,
        req: SendMessageRequest,
        source: &str,
    ) -> Result<SendMessageResponse> {
        self.send_message_as(account_id, req, source, None).await
    }

    /// [`Self::send_message`] under a turn id the sender chose beforehand (an experiment
    /// stores it first, so after a restart it finds the turn instead of running another);
    /// forwarded to the agent's replica with the id when it runs elsewhere.
    pub async fn send_message_as(
        self: &Arc<Self>,
        account_id: &str,
        req: SendMessageRequest,
        source: &str,
        turn_id: Option<String>,
    ) -> Result<SendMessageResponse> {
        let agent = match self.message_route(account_id, &req.instance_id, &req.text).await? {
            (Route::Local(agent), _) => agent,
            (Route::Remote(client), id) => {
                let turn = turn_id.clone();
                return self
                    .forward(client, &id, (account_id, source), req, |mut c, mut r| async move {
                        if let Some(value) = turn.and_then(|t| t.parse().ok()) {
                            r.metadata_mut().insert(crate::cluster::peers::TURN_METADATA, value);
                        }
                        c.send_message(r).await
                    })
                    .await;
            }
        };
        self.queue_turn(agent, req.text, Origin { source: source.to_owned(), turn_id, ..Origin::default() }).await
    }

    /// Runs one turn for the caller's agent as [`Self::send_message`] does, streaming it.
    /// What fails before the turn is queued (a bad request, an agent that is not the
    /// caller's or not running, a full queue) is this call's error; everything after is
    /// in the stream.
    pub async fn stream_message(
        self: &Arc<Self>,
        account_id: &str,
        req: StreamMessageRequest,
        source: &str,
    ) -> Result<MessageStream> {
        let agent = match self.message_route(account_id, &req.instance_id, &req.text).await? {
            (Route::Local(agent), _) => agent,
            (Route::Remote(client), id) => {
                let stream =
                    self.forward(client, &id, (account_id, source), req, |mut c, r| async move {
                        c.stream_message(r).await
                    })
                    .await?;
                return Ok(stream.map(move |item| item.map_err(|status| forwarded_error(&status, &id).into())).boxed());
            }
        };
        let queued_at = now_ms();
        let slot = self.enqueue(&agent)?;
        let (events, rx) = TurnStream::channel();
        let hang_up = CancellationToken::new();
        let origin = Origin { source: source.to_owned(), events, hang_up: hang_up.clone(), ..Origin::default() };
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let this = self.clone();
        // The stream's task is the turn's: nothing but the hang-up token stops it, so the
        // turn runs here rather than in a task of its own (one task hop less before the
        // first text).
        tokio::spawn(async move {
            let outcome = match turn_lock(&agent, &origin).await {
                Ok(turn) => this.run_locked(agent, (turn, slot), queued_at, req.text, origin).await,
                Err(err) => Err(err),
            };
            let _ = done_tx.send(outcome);
        });
        Ok(turn_stream(rx, done_rx, hang_up.drop_guard()))
    }

    /// Queues a turn behind the agent's others and waits for it: the one path every
    /// message takes, whoever sent it (the API's callers, the Telegram channel).
    pub(crate) async fn queue_turn(
        self: &Arc<Self>,
        agent: Arc<Agent>,
        text: String,
        origin: Origin,
    ) -> Result<SendMessageResponse> {
        let queued_at = now_ms();
        let slot = self.enqueue(&agent)?;
        self.take_turn(agent, slot, queued_at, text, origin).await
    }

    /// A place in the agent's queue, if it is running and its queue has room (else 409 or
    /// 429).
    fn enqueue(&self, agent: &Agent) -> Result<OwnedSemaphorePermit> {
        agent.running()?;
        let slot = agent.queue.clone().try_acquire_owned().map_err(|_| {
            ApiError::new(
                ErrorReason::QueueFull,
                format!("{} turns are already queued for this agent; try again later", self.config.queue_depth),
            )
        })?;
        Ok(slot)
    }

    /// Waits for the agent's turn lock holding a place in its queue, then runs the turn in
    /// a task of its own: a caller that goes away while the turn runs does not stop it.
    async fn take_turn(
        self: &Arc<Self>,
        agent: Arc<Agent>,
        slot: OwnedSemaphorePermit,
        queued_at: i64,
        text: String,
        origin: Origin,
    ) -> Result<SendMessageResponse> {
        let turn = turn_lock(&agent, &origin).await?;
        let job = tokio::spawn(self.clone().run_locked(agent, (turn, slot), queued_at, text, origin));
        job.await.map_err(|e| ApiError::internal(format!("the turn task failed: {e}")))?
    }

    /// Runs a turn holding the agent's turn lock and its place in the queue, which it lets
    /// go when the turn ends.
    async fn run_locked(
        self: Arc<Self>,
        agent: Arc<Agent>,
        held: (OwnedMutexGuard<()>, OwnedSemaphorePermit),
        queued_at: i64,
        text: String,
        origin: Origin,
    ) -> Result<SendMessageResponse> {
        // The number is drawn under the lock: drawn before, two callers on different
        // threads could draw 2 and 3 and reach the lock as 3 and 2, and the record would
        // misstate the order the turns ran in.
        let seq = agent.next_seq();
        let outcome = self.run_turn(&agent, text, origin, seq, queued_at).await;
        drop(held);
        outcome
    }

    async fn run_turn(
        &self,
        agent: &Agent,
        text: String,
        origin: Origin,
        seq: i64,
        queued_at: i64,
    ) -> Result<SendMessageResponse> {
        let running = agent.running()?;
        let model = if running.settings.model.is_empty() {
            agent.runtime.default_model.clone()
        } else {
            running.settings.model.clone()
        };
        let turn_id = origin.turn_id.unwrap_or_else(|| new_sortable_id("turn"));
        let (events, hang_up) = (origin.events, origin.hang_up);
        let input = TurnInput { turn_id: turn_id.clone(), text: text.clone(), events: events.clone() };
        // A metered turn is refused before it runs when its model is unpriced (400) or the
        // account's credits, less what its calls in flight hold, are spent (402).
        let metered = self.metered_price(&agent.runtime, running.settings.model_mode, &model)?;
        if let Some(price) = metered {
            self.admit_turn(agent, running.machine.as_ref(), price, &input).await?;
        } else if self.calls_metered(&agent.runtime, running.settings.model_mode, &model) {
            self.models.check_credits(&agent.account_id).await?;
        }

        let started_at = now_ms();
        let clock = Instant::now();
        let mut record = TurnRecord {
            id: turn_id.clone(),
            instance_id: agent.id.clone(),
            account_id: agent.account_id.clone(),
            seq,
            status: "completed",
            source: origin.source,
            text,
            reply: String::new(),
            error: String::new(),
            queued_at,
            started_at,
            duration_ms: 0,
            input_tokens: 0,
            output_tokens: 0,
            model: model.clone(),
            cost_nanocents: 0,
            calls_charged_nanocents: 0,
            chat_id: origin.chat_id,
            lease_epoch: agent.epoch,
            marked_in_flight: false,
            held: metered.is_some(),
        };
        // A turn that outlives its replica is found by the next owner (`super::in_flight`).
        let mark = self.recorder.mark_in_flight(&record);
        // The runtime's model calls through the model gateway from now on are this turn's.
        let limits = agent.runtime.turn_limits(self.config.models.turn_limits);
        let meter = agent.model_turn.begin(&turn_id, limits, events.clone());
        let outcome = tokio::select! {
            biased;
            () = running.generation.cancelled() => Outcome::Cancelled,
            () = hang_up.cancelled() => Outcome::HungUp,
            result = tokio::time::timeout(self.config.turn_timeout, running.machine.turn(input)) => match result {
                Err(_) => Outcome::TimedOut,
                Ok(Ok(output)) => Outcome::Completed(output),
                Ok(Err(err)) => Outcome::Failed(err),
            },
        };
        agent.model_turn.end();
        let calls = meter.settled(CALLS_SETTLE).await;
        // A turn stopped at its limits fails, whatever its runtime made of the refusals.
        let outcome = match meter.tripped() {
            Some(why) if !matches!(outcome, Outcome::Cancelled | Outcome::HungUp) => {
                Outcome::Failed(ApiError::new(ErrorReason::TurnLimit, why))
            }
            _ => outcome,
        };
        let duration_ms = clock.elapsed().as_millis() as i64;
        record.duration_ms = duration_ms;
        record.marked_in_flight = mark.finish().await;
        let failure = match &outcome {
            Outcome::Completed(out) => {
                record.reply.clone_from(&out.reply);
                // A runtime that did not stream: its whole reply is the one delta.
                if !events.deltas_sent() {
                    events.delta(&out.reply);
                }
                // A runtime calling models: its usage is what its calls through the model gateway
                // add up to, not what it says about itself.
                let (input, output) = if agent.runtime.driver.calls_models() {
                    (calls.input_tokens, calls.output_tokens)
                } else {
                    (out.input_tokens, out.output_tokens)
                };
                record.input_tokens = input;
                record.output_tokens = output;
                if !out.model.is_empty() {
                    record.model.clone_from(&out.model);
                }
                if let Some(price) = metered {
                    record.cost_nanocents = self.turn_cost(price, out);
                }
                None
            }
            Outcome::Failed(err) => Some(("failed", err.clone())),
            Outcome::TimedOut => Some((
                "timed_out",
                ApiError::new(
                    ErrorReason::TurnTimeout,
                    format!("the turn hit the {} s cap; the agent keeps running", self.config.turn_timeout.as_secs()),
                ),
            )),
            Outcome::Cancelled => Some((
                "cancelled",
                ApiError::new(
                    ErrorReason::WrongState,
                    format!("the agent was {} during the turn", agent.status().as_str()),
                ),
            )),
            Outcome::HungUp => Some((
                "cancelled",
                ApiError::new(ErrorReason::WrongState, "the caller hung up during the turn, which was cancelled"),
            )),
        };
        if let Some((status, err)) = &failure {
            record.status = status;
            record.error = err.message().to_owned();
        }
        if calls.calls > 0 {
            record.calls_charged_nanocents = calls.charged_nanocents;
            self.trace_turn(&record, agent, failure.as_ref().map(|(_, err)| err.message()));
        }
        record.make_storable();
        self.turn_metrics.record(record.status, &record.source, clock.elapsed().as_secs_f64());
        let event = self.observes_turns.then(|| self.event_of(&record, &agent.runtime.id, calls));
        let charged = self.recorder.record(record.clone(), event).await?;
        if let Some((_, err)) = failure {
            return Err(err.into());
        }
        Ok(SendMessageResponse {
            turn_id,
            reply: record.reply,
            started_at: Some(timestamp_ms(started_at)),
            duration_ms,
            usage: Some(Usage { input_tokens: record.input_tokens, output_tokens: record.output_tokens }),
            charged_cents: nanocents_to_cents(charged),
            charged_nanocents: charged,
        })
    }
}
