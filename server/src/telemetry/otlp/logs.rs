//! OTLP logs → log rows.

use std::collections::HashMap;

use opentelemetry_proto::tonic::{collector::logs::v1::ExportLogsServiceRequest, logs::v1::LogRecord};

use super::{Rejected, Resources, id_hex, ns};
use crate::{
    billing::prices::PriceBook,
    telemetry::{
        attributes::{any_to_text, gen_ai, string, to_json_text},
        limits::time_in_range,
        messages,
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
                if let Some(bad) = [time_ns, observed_ns].into_iter().find(|t| !time_in_range(*t, now_ns)) {
                    rejected.add(|| format!("log record: time {bad} ns is more than a day ahead"));
                    continue;
                }
                let event_name = event_name(record);
                let log_messages = messages::from_log(event_name.as_deref(), record.body.as_ref(), &record.attributes);
                batch.logs.push(LogRow {
                    time_ns,
                    observed_ns,
                    severity_number: record.severity_number,
                    severity_text: record.severity_text.clone(),
                    body: record.body.as_ref().map(any_to_text).unwrap_or_default(),
                    resource: resource_index,
                    trace_id,
                    span_id,
                    event_name,
                    gen_ai: gen_ai(&record.attributes, resource, prices),
                    is_message: !log_messages.is_empty(),
                    messages: log_messages,
                    attributes: to_json_text(&record.attributes),
                    labels: crate::telemetry::labels::of(&record.attributes, resource),
                });
            }
        }
    }
    keep_new_inputs(&mut batch);
    // Evaluation events score the span, trace or session they name.
    let found: Vec<_> = batch
        .logs
        .iter()
        .filter_map(|log| {
            let service = batch.resources.get(log.resource).map_or("", |r| r.service.as_str());
            crate::telemetry::scores::from_log(log, service)
        })
        .collect();
    batch.scores = found;
    (batch, rejected)
}

/// A call's input messages arrive one log record each (`gen_ai.user.message`…), repeating
/// the conversation so far: per span, only those after the last assistant input are kept
/// (see [`messages`]).
fn keep_new_inputs(batch: &mut Batch) {
    let mut by_span: HashMap<(String, String), Vec<usize>> = HashMap::new();
    for (i, log) in batch.logs.iter().enumerate() {
        if let (Some(trace), Some(name)) = (&log.trace_id, &log.event_name)
            && name.starts_with("gen_ai.")
            && !log.messages.is_empty()
        {
            by_span.entry((trace.clone(), log.span_id.clone().unwrap_or_default())).or_default().push(i);
        }
    }
    for indexes in by_span.into_values() {
        let events = indexes
            .iter()
            .map(|&i| {
                let log = &mut batch.logs[i];
                (log.event_name.as_deref().is_some_and(messages::is_input_event), std::mem::take(&mut log.messages))
            })
            .collect();
        for (i, kept) in indexes.into_iter().zip(messages::keep_new_inputs(events)) {
            batch.logs[i].messages = kept;
        }
    }
}

/// What kind of event a record is: `LogRecord.event_name` (OTLP 1.5), else the
/// `event.name` attribute older SDKs and coding agents set, else none (a plain log line).
/// Claude Code sends `event.name` without its `claude_code.` prefix and puts the full name
/// in the body; the full name is kept.
pub(crate) fn event_name(record: &LogRecord) -> Option<String> {
    if !record.event_name.is_empty() {
        return Some(record.event_name.clone());
    }
    let name = string(&record.attributes, "event.name")?;
    match record.body.as_ref().map(any_to_text) {
        Some(body) if body.ends_with(&format!(".{name}")) && !body.contains(char::is_whitespace) => Some(body),
        _ => Some(name),
    }
}

/// An id that may be absent (empty); `Err` when present but malformed.
fn optional_id(bytes: &[u8], len: usize) -> Result<Option<String>, ()> {
    if bytes.is_empty() || bytes.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    id_hex(bytes, len).map(Some).ok_or(())
}
