//! An agent's egress connections as spans of its session: the dashboard shows what an agent
//! talked to (host, port, bytes) and what it was refused, beside its model calls.

use std::sync::Arc;

use opentelemetry_proto::tonic::trace::v1::{Span, Status, span::SpanKind, status::StatusCode};

use super::egress::EgressEvent;
use crate::{
    llm::spans::{int, random_span_id, request, text},
    telemetry::Telemetry,
};

/// What the egress proxy calls for each connection of `instance_id`: its span, written
/// into `telemetry` in the background (dropped when roost does not observe activity).
pub fn recorder(
    telemetry: Option<Arc<Telemetry>>,
    instance_id: &str,
    runtime_id: &str,
) -> Arc<dyn Fn(EgressEvent) + Send + Sync> {
    let (instance, runtime) = (instance_id.to_owned(), runtime_id.to_owned());
    Arc::new(move |event: EgressEvent| {
        let Some(telemetry) = telemetry.clone() else { return };
        let span = span(&instance, &runtime, &event);
        let instance = instance.clone();
        tokio::spawn(async move {
            if let Err(err) = telemetry.export_traces(span, Some(instance)).await {
                tracing::debug!(error = %err.message(), "could not record an egress connection");
            }
        });
    })
}

fn span(
    instance_id: &str,
    runtime_id: &str,
    event: &EgressEvent,
) -> opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
    let mut attributes = vec![
        text("session.id", instance_id),
        text("roost.egress.method", &event.method),
        text("server.address", &event.host),
        int("server.port", i64::from(event.port)),
        int("roost.egress.bytes_sent", i64::try_from(event.bytes_sent).unwrap_or(i64::MAX)),
        int("roost.egress.bytes_received", i64::try_from(event.bytes_received).unwrap_or(i64::MAX)),
        text("roost.egress.outcome", if event.refused.is_some() { "refused" } else { "allowed" }),
    ];
    if let Some(address) = event.address {
        attributes.push(text("network.peer.address", &address.ip().to_string()));
    }
    if let Some(why) = &event.refused {
        attributes.push(text("error.type", "egress_refused"));
        attributes.push(text("roost.egress.refused", why));
    }
    let start = u64::try_from(event.started_unix_ns).unwrap_or(0);
    let duration = u64::try_from(event.duration.as_nanos()).unwrap_or(u64::MAX);
    let span = Span {
        trace_id: crate::llm::spans::random_trace_id().to_vec(),
        span_id: random_span_id().to_vec(),
        name: format!("egress {}:{}", event.host, event.port),
        kind: SpanKind::Client as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: start.saturating_add(duration),
        attributes,
        status: Some(Status {
            code: if event.refused.is_some() { StatusCode::Error } else { StatusCode::Ok } as i32,
            message: event.refused.clone().unwrap_or_default(),
        }),
        ..Span::default()
    };
    request(instance_id, runtime_id, span)
}
