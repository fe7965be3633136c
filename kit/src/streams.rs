//! The stream types the gateway and the core agree on: `StreamService`, `AgentService` and
//! `QueryService` with boxed response streams, so the gateway can hold them as trait objects.

use std::pin::Pin;

use futures::Stream;
use roost_proto::v1::{
    BrainStreamResponse, ExportResponse, HealthStreamResponse, LogStreamResponse, StreamMessageResponse,
    agent_service_server::AgentService, query_service_server::QueryService, stream_service_server::StreamService,
};

/// A server-streaming rpc's response stream.
pub type RpcStream<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send + 'static>>;

/// `StreamService` with every response stream boxed.
pub type DynStreamService = dyn StreamService<
        BrainStreamStream = RpcStream<BrainStreamResponse>,
        HealthStreamStream = RpcStream<HealthStreamResponse>,
        LogStreamStream = RpcStream<LogStreamResponse>,
    >;

/// `QueryService` with its response stream (`Export`) boxed.
pub type DynQueryService = dyn QueryService<ExportStream = RpcStream<ExportResponse>>;

/// `AgentService` with its response stream (`StreamMessage`) boxed.
pub type DynAgentService = dyn AgentService<StreamMessageStream = RpcStream<StreamMessageResponse>>;
