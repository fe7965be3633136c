//! OTLP/HTTP: `POST /v1/traces`, `/v1/metrics`, `/v1/logs` over the collector services.
//!
//! Per the OTLP spec the answer uses the request's encoding: a protobuf `Export…Response`,
//! or its JSON (`{}` when nothing was rejected, else `{"partialSuccess": {...}}`). Errors
//! to protobuf requests are a protobuf `google.rpc.Status`; to anything else, roost's
//! `{"error", "code"}`.

use axum::{
    extract::{Request, State},
    response::{IntoResponse, Response},
};
use http::header::CONTENT_TYPE;
use opentelemetry_proto::tonic::collector::{
    logs::v1::ExportLogsServiceRequest, metrics::v1::ExportMetricsServiceRequest, trace::v1::ExportTraceServiceRequest,
};
use prost::Message;
use roost_proto::ApiError;
use serde::Serialize;

use crate::{
    Call, Core, HttpError,
    api::{Answer, Body, Endpoint, Routes},
    codec::{Encoding, decode},
};

const TRACES: Endpoint = Endpoint::post("/v1/traces", "OTLP/HTTP trace export; GenAI spans become typed activity.")
    .body_of(Body::Otlp)
    .answer_of(Answer::Otlp);

const METRICS: Endpoint =
    Endpoint::post("/v1/metrics", "OTLP/HTTP metric export.").body_of(Body::Otlp).answer_of(Answer::Otlp);

const LOGS: Endpoint = Endpoint::post("/v1/logs", "OTLP/HTTP log export; records also go to the log stream.")
    .body_of(Body::Otlp)
    .answer_of(Answer::Otlp);

pub(crate) fn routes() -> Routes {
    Routes::new(
        "OTLP ingest",
        "Point an OTLP exporter at roost: `application/x-protobuf` or `application/json`, optionally gzipped. The \
         same services answer OTLP/gRPC on this port. Rejected items come back as `partial_success`.",
    )
    .at(&TRACES, traces)
    .at(&METRICS, metrics)
    .at(&LOGS, logs)
}

/// Runs one export: decode, call the service, answer in the request's encoding.
macro_rules! export {
    ($core:expr, $req:expr, $service:ident, $message:ty) => {{
        let core = $core;
        let limit = core.options.max_otlp_body_bytes;
        let (parts, body) = $req.into_parts();
        let call = Call::from_parts(&parts);
        match decode::<$message>(Request::from_parts(parts, body), limit, &core.ingest_budget).await {
            Err((err, encoding)) => error(err, encoding),
            // The budget is held until the export is stored.
            Ok((message, encoding, _held)) => match core.$service.export(call.request(message)).await {
                Ok(resp) => answer(&resp.into_inner(), encoding),
                Err(status) => error(ApiError::from_status(&status), encoding),
            },
        }
    }};
}

async fn traces(State(core): State<Core>, req: Request) -> Response {
    export!(core, req, traces, ExportTraceServiceRequest)
}

async fn metrics(State(core): State<Core>, req: Request) -> Response {
    export!(core, req, metrics, ExportMetricsServiceRequest)
}

async fn logs(State(core): State<Core>, req: Request) -> Response {
    export!(core, req, logs, ExportLogsServiceRequest)
}

fn answer<T: Message + Serialize>(message: &T, encoding: Encoding) -> Response {
    let body = match encoding {
        Encoding::Protobuf => message.encode_to_vec(),
        Encoding::Json => {
            // opentelemetry-proto writes an absent partial success as `null`; OTLP wants `{}`.
            let mut json = serde_json::to_value(message).unwrap_or_default();
            if let Some(object) = json.as_object_mut() {
                object.retain(|_, v| !v.is_null());
            }
            json.to_string().into_bytes()
        }
    };
    ([(CONTENT_TYPE, encoding.content_type())], body).into_response()
}

/// `google.rpc.Status`, the error body OTLP/HTTP prescribes for protobuf clients.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

fn error(err: ApiError, encoding: Encoding) -> Response {
    match encoding {
        Encoding::Json => HttpError(err).into_response(),
        Encoding::Protobuf => {
            let reason = err.reason();
            let status = RpcStatus { code: reason.grpc_code() as i32, message: err.message().to_owned() };
            let mut response =
                (reason.http_status(), [(CONTENT_TYPE, encoding.content_type())], status.encode_to_vec())
                    .into_response();
            if reason == roost_proto::ErrorReason::Overloaded {
                response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
            }
            response
        }
    }
}
