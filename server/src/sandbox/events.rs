//! An agent's egress connections as spans of its session: the dashboard shows what an agent
//! talked to (host, port, bytes) and what it was refused, beside its model calls.
//!
//! A refused connection (by the operator's rules, or one the proxy could not resolve or
//! connect) is recorded as what it is, the agent's egress with `roost.egress.outcome`
//! `refused` and the reason in `roost.egress.refused`, and never with an error status. The
//! proxy did what it is there for; nothing in the application failed. An error status
//! would count in the runtime's health, its error rate and the `error_rate` alerts, so a
//! runtime that merely tries the internet at boot (an update check, a catalogue download)
//! would show as erroring. What the runtime makes of a refusal is its own to report.

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
        // Unset when refused: a refusal is no error (see the module's comment).
        status: Some(Status {
            code: if event.refused.is_some() { StatusCode::Unset } else { StatusCode::Ok } as i32,
            message: String::new(),
        }),
        ..Span::default()
    };
    request(instance_id, runtime_id, span)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;

    use super::*;

    fn event(refused: Option<&str>) -> EgressEvent {
        EgressEvent {
            host: "github.com".into(),
            port: 443,
            method: "CONNECT".into(),
            address: None,
            refused: refused.map(str::to_owned),
            bytes_sent: 0,
            bytes_received: 0,
            started_unix_ns: 1,
            duration: Duration::from_millis(3),
        }
    }

    /// The one span of `event`'s record: its status code and its text attributes.
    fn recorded(event: &EgressEvent) -> (i32, Vec<(String, String)>) {
        let request = span("ins_1", "hermes", event);
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        let texts = span
            .attributes
            .iter()
            .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                Any::StringValue(text) => Some((kv.key.clone(), text.clone())),
                _ => None,
            })
            .collect();
        (span.status.as_ref().map_or(0, |s| s.code), texts)
    }

    #[test]
    fn a_refused_connection_is_the_agents_egress_not_an_error() {
        let (status, attributes) = recorded(&event(Some("github.com:443 is not allowed")));
        assert_eq!(status, StatusCode::Unset as i32, "no error status");
        let has = |key: &str, value: &str| attributes.iter().any(|(k, v)| k == key && v == value);
        assert!(has("roost.egress.outcome", "refused") && has("roost.egress.refused", "github.com:443 is not allowed"));
        assert!(has("server.address", "github.com"), "{attributes:?}");
        assert!(!attributes.iter().any(|(k, _)| k == "error.type"), "{attributes:?}");

        let (status, attributes) = recorded(&event(None));
        assert_eq!(status, StatusCode::Ok as i32);
        assert!(attributes.iter().any(|(k, v)| k == "roost.egress.outcome" && v == "allowed"));
    }
}
