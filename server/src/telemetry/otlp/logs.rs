//! OTLP logs → log rows.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;

use super::{Rejected, Resources, id_hex, ns};
use crate::{
    billing::metering::PriceBook,
    telemetry::{
        attributes::{any_to_text, gen_ai, to_json_text},
        rows::{Batch, LogRow},
    },
    time::now_ms,
};

/// The log records of a request; records whose trace or span id is malformed are
/// rejected. A record without a time takes its observed time, else now.
pub fn convert(request: &ExportLogsServiceRequest, prices: &PriceBook) -> (Batch, Rejected) {
    let mut batch = Batch::default();
    let mut rejected = Rejected::default();
    let mut resources = Resources::default();
    let now_ns = now_ms() * 1_000_000;
    for resource_logs in &request.resource_logs {
        let resource = resource_logs.resource.as_ref().map(|r| r.attributes.as_slice()).unwrap_or_default();
        let resource_index = resources.intern(&mut batch, resource);
        for scope_logs in &resource_logs.scope_logs {
            for record in &scope_logs.log_records {
                let trace_id = optional_id(&record.trace_id, 16);
                let span_id = optional_id(&record.span_id, 8);
                let (Ok(trace_id), Ok(span_id)) = (trace_id, span_id) else {
                    rejected.add(|| "log record: trace_id must be 16 bytes and span_id 8 when set".to_owned());
                    continue;
                };
                let observed_ns =
                    if record.observed_time_unix_nano > 0 { ns(record.observed_time_unix_nano) } else { now_ns };
                let time_ns = if record.time_unix_nano > 0 { ns(record.time_unix_nano) } else { observed_ns };
                batch.logs.push(LogRow {
                    time_ns,
                    observed_ns,
                    severity_number: record.severity_number,
                    severity_text: record.severity_text.clone(),
                    body: record.body.as_ref().map(any_to_text).unwrap_or_default(),
                    resource: resource_index,
                    trace_id,
                    span_id,
                    session_id: gen_ai(&record.attributes, resource, prices).session_id,
                    attributes: to_json_text(&record.attributes),
                });
            }
        }
    }
    (batch, rejected)
}

/// An id that may be absent (empty); `Err` when present but malformed.
fn optional_id(bytes: &[u8], len: usize) -> Result<Option<String>, ()> {
    if bytes.is_empty() || bytes.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    id_hex(bytes, len).map(Some).ok_or(())
}
