//! The gRPC codec of roost's own services: prost, plus the API boundary's rules for what a
//! request may hold.
//!
//! - A request whose bytes do not decode is `INVALID_ARGUMENT` (reason
//!   `invalid_argument`), as the same body is a 400 over REST. tonic's prost codec answers
//!   INTERNAL, which tells clients (and their retry policies) that roost is at fault.
//! - A decoded request with a NUL in any text field is `INVALID_ARGUMENT` naming the field
//!   ([`crate::nul`]), the same rule the REST and MCP adapters apply to their JSON.
//!
//! `build.rs` makes every generated `roost.v1` client and server use it. Services generated
//! elsewhere (the OTLP collector, health, reflection) keep tonic's codec; the server maps
//! their decode errors the same way.

use std::marker::PhantomData;

use prost::Message;
use serde::Serialize;
use tonic::{
    Status,
    codec::{BufferSettings, Codec, DecodeBuf, Decoder},
};
use tonic_prost::ProstEncoder;

use crate::{ApiError, nul::nul_field};

/// Whether a message comes from clients (a request), and so is checked when decoded.
/// Implemented for every `roost.v1` message by `build.rs`.
pub trait Inbound {
    /// True for requests.
    const FROM_CLIENTS: bool;
}

/// [`Codec`] for `roost.v1`: encodes `T`, decodes `U` under the rules above.
#[derive(Debug, Clone)]
pub struct RoostCodec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for RoostCodec<T, U> {
    fn default() -> Self {
        Self { _types: PhantomData }
    }
}

impl<T, U> Codec for RoostCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Serialize + Inbound + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = RequestDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder { _type: PhantomData }
    }
}

/// Decodes `U`, refusing bytes that are not one and, in requests, text holding NUL.
#[derive(Debug, Clone)]
pub struct RequestDecoder<U> {
    _type: PhantomData<U>,
}

impl<U: Message + Default + Serialize + Inbound> Decoder for RequestDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        let message =
            U::decode(buf).map_err(|err| ApiError::invalid_argument(format!("the request does not decode: {err}")))?;
        if let Some(field) = U::FROM_CLIENTS.then(|| nul_field(&message)).flatten() {
            return Err(nul_refused(&field).into());
        }
        Ok(Some(message))
    }
}

/// The error of a request field holding U+0000.
pub fn nul_refused(field: &str) -> ApiError {
    ApiError::invalid_argument(format!(
        "{field} contains a NUL character (U+0000), which roost does not accept in text"
    ))
}
