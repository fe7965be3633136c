//! OTLP traces → span rows.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::{Rejected, Resources, id_hex, ns};
use crate::{
    billing::prices::PriceBook,
    telemetry::{
        attributes::{gen_ai, to_json_text, to_map},
        labels, latency,
        limits::time_in_range,
        messages, packed_attributes,
        rows::{Batch, SpanEventRow, SpanRow},
        scores,
    },
};

/// The spans of a request; spans with a missing or malformed trace or span id are
/// rejected.
pub fn convert(request: &ExportTraceServiceRequest, prices: &PriceBook) -> (Batch, Rejected) {
    let mut batch = Batch::default();
    let mut rejected = Rejected::default();
    let mut resources = Resources::default();
    let now_ns = crate::time::now_ms().saturating_mul(1_000_000);
    for resource_spans in &request.resource_spans {
        let resource = resource_spans.resource.as_ref().map(|r| r.attributes.as_slice()).unwrap_or_default();
        let resource_index = resources.intern(&mut batch, resource);
        for scope_spans in &resource_spans.scope_spans {
            let scope = scope_spans.scope.as_ref().map(|s| s.name.clone()).unwrap_or_default();
            for span in &scope_spans.spans {
                let (Some(trace_id), Some(span_id)) = (id_hex(&span.trace_id, 16), id_hex(&span.span_id, 8)) else {
                    rejected
                        .add(|| format!("span {:?}: trace_id must be 16 bytes and span_id 8, not all zero", span.name));
                    continue;
                };
                let parent_span_id = if span.parent_span_id.is_empty() {
                    String::new()
                } else if let Some(parent) = id_hex(&span.parent_span_id, 8) {
                    parent
                } else {
                    rejected.add(|| format!("span {:?}: parent_span_id must be 8 bytes", span.name));
                    continue;
                };
                let times = [span.start_time_unix_nano, span.end_time_unix_nano]
                    .into_iter()
                    .chain(span.events.iter().map(|e| e.time_unix_nano));
                if let Some(bad) = times.map(ns).find(|t| !time_in_range(*t, now_ns)) {
                    rejected.add(|| format!("span {:?}: time {bad} ns is more than a day ahead", span.name));
                    continue;
                }
                let status = span.status.as_ref();
                let gen_ai = gen_ai(&span.attributes, resource, prices);
                let call = messages::from_span(&span.attributes, gen_ai.aggregate);
                // Messages read from the attributes are stored once, by content: the
                // span's attributes keep no copy (`telemetry::message_texts`).
                let attributes = if call.messages.is_empty() {
                    packed_attributes::pack(&to_map(&span.attributes))
                } else {
                    let rest: Vec<_> =
                        span.attributes.iter().filter(|kv| !messages::is_message_key(&kv.key)).cloned().collect();
                    packed_attributes::pack(&to_map(&rest))
                };
                let (mut span_messages, new_from) = (call.messages, call.new_from);
                for event in &span.events {
                    span_messages.extend(messages::from_span_event(&event.name, &event.attributes));
                }
                batch.spans.push(SpanRow {
                    trace_id,
                    span_id,
                    parent_span_id,
                    name: span.name.clone(),
                    kind: span.kind,
                    start_ns: ns(span.start_time_unix_nano),
                    end_ns: ns(span.end_time_unix_nano.max(span.start_time_unix_nano)),
                    status_code: status.map_or(0, |s| s.code),
                    status_message: status.map(|s| s.message.clone()).unwrap_or_default(),
                    resource: resource_index,
                    scope: scope.clone(),
                    gen_ai,
                    attributes,
                    events: span
                        .events
                        .iter()
                        .map(|e| SpanEventRow {
                            time_ns: ns(e.time_unix_nano),
                            name: e.name.clone(),
                            attributes: to_json_text(&e.attributes),
                        })
                        .collect(),
                    messages: span_messages,
                    new_from,
                    tool_io: messages::tool_io(&span.attributes),
                    agent_instance: String::new(),
                    labels: labels::of(&span.attributes, resource),
                    first_token_ns: latency::first_token_ns(
                        &span.attributes,
                        ns(span.start_time_unix_nano),
                        ns(span.end_time_unix_nano.max(span.start_time_unix_nano)),
                    ),
                });
                // Evaluation events score the span they are on.
                if let Some(row) = batch.spans.last()
                    && span.events.iter().any(|e| scores::is_evaluation(&e.name))
                {
                    let service = batch.resources.get(resource_index).map_or("", |r| r.service.as_str());
                    let found: Vec<_> = span
                        .events
                        .iter()
                        .filter_map(|e| {
                            scores::from_span_event(row, service, &e.name, &to_map(&e.attributes), ns(e.time_unix_nano))
                        })
                        .collect();
                    batch.scores.extend(found);
                }
            }
        }
    }
    (batch, rejected)
}
