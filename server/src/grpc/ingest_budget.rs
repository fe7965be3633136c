//! OTLP over gRPC within the ingest budget (`roost_kit::budget`), as OTLP over HTTP is.
//!
//! tonic decodes a request as soon as its bytes are in, so the bytes are counted before it
//! sees them: this layer reads the request body frame by frame, holding each frame's
//! decoded cost in the budget (a gzip-compressed message's by the size its gzip trailer
//! states), then
//! hands the whole body on and keeps the room until the answer is ready (the export is
//! stored by then). No room within the budget's wait: RESOURCE_EXHAUSTED with RetryInfo,
//! which OTLP exporters retry.

use std::{
    convert::Infallible,
    task::{Context, Poll},
};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::{BodyExt as _, Full};
use roost_kit::budget::{Held, IngestBudget, PROTOBUF_EXPANSION, gzip_stated_size};
use roost_proto::ApiError;
use tonic::{body::Body, server::NamedService};
use tower::Service;

/// A gRPC message's frame header: the compressed flag and the length.
const FRAME_HEADER: usize = 5;

/// Wraps an OTLP collector service.
#[derive(Debug, Clone)]
pub struct WithinBudget<S> {
    inner: S,
    budget: IngestBudget,
    /// Largest message the service decodes.
    max_message: usize,
}

impl<S> WithinBudget<S> {
    /// `inner`, counting its requests' bytes in `budget`; bodies past `max_message` are
    /// refused before they are read whole.
    pub fn new(inner: S, budget: IngestBudget, max_message: usize) -> Self {
        Self { inner, budget, max_message }
    }
}

impl<S: NamedService> NamedService for WithinBudget<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<Request<Body>> for WithinBudget<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The service polled ready is the one that takes the call (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (budget, max_message) = (self.budget.clone(), self.max_message);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let mut held = Held::default();
            let bytes = match read_within(body, &budget, &mut held, max_message).await {
                Ok(bytes) => bytes,
                Err(err) => return Ok(err.to_status().into_http()),
            };
            let answer = inner.call(Request::from_parts(parts, Body::new(Full::new(bytes)))).await;
            drop(held);
            answer
        })
    }
}

/// The request body, each frame held in the budget as it arrives.
async fn read_within(mut body: Body, budget: &IngestBudget, held: &mut Held, max: usize) -> Result<Bytes, ApiError> {
    let mut collected = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::invalid_argument(format!("could not read the request: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if collected.len() + data.len() > max + FRAME_HEADER {
            return Err(ApiError::new(
                roost_proto::ErrorReason::PayloadTooLarge,
                format!("the message is over the {max}-byte limit"),
            ));
        }
        budget.hold(held, (collected.len() + data.len()).saturating_mul(PROTOBUF_EXPANSION)).await?;
        collected.extend_from_slice(&data);
    }
    // A compressed message: what tonic will inflate it to, as its gzip trailer says.
    if collected.first() == Some(&1)
        && let Some(stated) = collected.get(FRAME_HEADER..).and_then(gzip_stated_size)
    {
        budget.hold(held, (collected.len() + stated.min(max)).saturating_mul(PROTOBUF_EXPANSION)).await?;
    }
    Ok(collected.freeze())
}
