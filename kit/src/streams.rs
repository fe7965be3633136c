//! The stream types the gateway and the core agree on: `StreamService` and `AgentService`
//! with boxed response streams, so the gateway can hold them as trait objects.

use std::pin::Pin;

use futures::Stream;
use roost_proto::v1::{
    BrainStreamResponse, HealthStreamResponse, LogStreamResponse, StreamMessageResponse,
    agent_service_server::AgentService, stream_service_server::StreamService,
};

/// A server-streaming rpc's response stream.
pub type RpcStream<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send + 'static>>;

/// `StreamService` with every response stream boxed.
pub type DynStreamService = dyn StreamService<
        BrainStreamStream = RpcStream<BrainStreamResponse>,
        HealthStreamStream = RpcStream<HealthStreamResponse>,
        LogStreamStream = RpcStream<LogStreamResponse>,
    >;

/// `AgentService` with its response stream (`StreamMessage`) boxed.
pub type DynAgentService = dyn AgentService<StreamMessageStream = RpcStream<StreamMessageResponse>>;
