//! The stream types the gateway and the core agree on: `StreamService` with boxed
//! response streams, so the gateway can hold it as a trait object.

use std::pin::Pin;

use futures::Stream;
use roost_proto::v1::{
    BrainStreamResponse, HealthStreamResponse, LogStreamResponse, stream_service_server::StreamService,
};

/// A server-streaming rpc's response stream.
pub type RpcStream<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send + 'static>>;

/// `StreamService` with every response stream boxed.
pub type DynStreamService = dyn StreamService<
        BrainStreamStream = RpcStream<BrainStreamResponse>,
        HealthStreamStream = RpcStream<HealthStreamResponse>,
        LogStreamStream = RpcStream<LogStreamResponse>,
    >;
