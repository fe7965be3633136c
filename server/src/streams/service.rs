//! `StreamService`: the live hubs as server-streaming rpcs (the SSE routes adapt them).

use std::sync::Arc;

use futures::{StreamExt as _, stream};
use roost_kit::streams::RpcStream;
use roost_proto::{
    ApiError, ErrorReason,
    v1::{
        BrainStreamRequest, BrainStreamResponse, HealthStreamRequest, HealthStreamResponse, LogStreamRequest,
        LogStreamResponse, stream_service_server::StreamService,
    },
};
use tonic::{Request, Response, Status};

use super::{
    Live,
    hub::{Full, Hub, Next, Subscriber},
    live::level_rank,
};

/// Items read from a hub per wake-up, at most.
const READ_BATCH: usize = 256;

/// The stream service over one server's hubs.
pub struct StreamCore {
    live: Arc<Live>,
}

impl StreamCore {
    /// Streams from `live`.
    pub fn new(live: Arc<Live>) -> Self {
        Self { live }
    }
}

fn subscribe<T>(hub: &Arc<Hub<T>>, after: Option<u64>, what: &str, flag: &str) -> Result<Subscriber<T>, Status> {
    hub.subscribe(after).map_err(|Full { max_clients }| {
        ApiError::new(
            ErrorReason::QueueFull,
            format!("the {what} already has {max_clients} clients (the cap, --{flag}); retry later"),
        )
        .to_status()
    })
}

/// A subscriber as an rpc stream: `keep` picks the items sent, `item` and `lagged` build
/// the responses.
fn responses<T, R>(
    subscriber: Subscriber<T>,
    keep: impl Fn(&T) -> bool + Send + Sync + 'static,
    item: impl Fn(u64, T) -> R + Send + Sync + 'static,
    lagged: impl Fn(u64, u64) -> R + Send + Sync + 'static,
) -> RpcStream<R>
where
    T: Clone + Send + Sync + 'static,
    R: Send + 'static,
{
    let batches = stream::unfold(subscriber, |mut subscriber| async move {
        let batch = subscriber.next_batch(READ_BATCH).await;
        Some((stream::iter(batch), subscriber))
    });
    Box::pin(batches.flatten().filter_map(move |next| {
        let response = match next {
            Next::Item(id, value) => keep(&value).then(|| item(id, (*value).clone())),
            Next::Lagged(missed, id) => Some(lagged(id, missed)),
        };
        std::future::ready(response.map(Ok))
    }))
}

fn resume(last_event_id: u64) -> Option<u64> {
    (last_event_id > 0).then_some(last_event_id)
}

#[tonic::async_trait]
impl StreamService for StreamCore {
    type BrainStreamStream = RpcStream<BrainStreamResponse>;
    type HealthStreamStream = RpcStream<HealthStreamResponse>;
    type LogStreamStream = RpcStream<LogStreamResponse>;

    async fn brain_stream(
        &self,
        req: Request<BrainStreamRequest>,
    ) -> Result<Response<Self::BrainStreamStream>, Status> {
        let after = resume(req.get_ref().last_event_id);
        let subscriber = subscribe(&self.live.brain, after, "brain stream", "max-brain-stream-clients")?;
        Ok(Response::new(responses(
            subscriber,
            |_| true,
            |id, event| BrainStreamResponse { id, event: Some(event), lagged: 0 },
            |id, lagged| BrainStreamResponse { id, event: None, lagged },
        )))
    }

    async fn health_stream(
        &self,
        req: Request<HealthStreamRequest>,
    ) -> Result<Response<Self::HealthStreamStream>, Status> {
        // A new client starts with the current report.
        let after = resume(req.get_ref().last_event_id).or_else(|| self.live.health.last().map(|(id, _)| id - 1));
        let subscriber = subscribe(&self.live.health, after, "health stream", "max-health-stream-clients")?;
        Ok(Response::new(responses(
            subscriber,
            |_| true,
            |id, report| HealthStreamResponse { id, report: Some(report), lagged: 0 },
            |id, lagged| HealthStreamResponse { id, report: None, lagged },
        )))
    }

    async fn log_stream(&self, req: Request<LogStreamRequest>) -> Result<Response<Self::LogStreamStream>, Status> {
        let req = req.into_inner();
        let min = level_rank(&req.level).ok_or_else(|| {
            ApiError::invalid_argument(format!("level {:?} is not one of trace, debug, info, warn, error", req.level))
                .to_status()
        })?;
        let subscriber = subscribe(&self.live.logs, resume(req.last_event_id), "log stream", "max-log-stream-clients")?;
        Ok(Response::new(responses(
            subscriber,
            move |line| level_rank(&line.level).unwrap_or(2) >= min,
            |id, line| LogStreamResponse { id, line: Some(line), lagged: 0 },
            |id, lagged| LogStreamResponse { id, line: None, lagged },
        )))
    }
}
