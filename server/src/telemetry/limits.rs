//! What ingest keeps of a request's strings and lists. Applied to the decoded request itself,
//! before it becomes rows (and before it is kept in the outbox for an upstream), so every
//! string that reaches the store has passed through one function, [`Bounds::text`]:
//!
//! - U+0000 becomes U+FFFD. PostgreSQL's TEXT cannot hold it (the insert fails, and with it
//!   the whole batch, which exporters then retry forever); inside the attributes' JSON it
//!   would survive as the escape `\u0000`, which no reader wants either. Replacing it keeps
//!   the item, on both backends alike.
//! - The OpenTelemetry SDK's limits: a string longer than `max_attribute_bytes` (attribute
//!   values and keys, log bodies, names, messages) is cut at a char boundary and ends with
//!   `…[truncated N bytes]`; at most [`MAX_ATTRIBUTES`] attributes per span, event, link,
//!   log record, metric point and resource, [`MAX_EVENTS`] events and [`MAX_LINKS`] links
//!   per span (the first ones are kept).
//!
//! Every change is counted ([`Cuts`]) for the OTLP answer's `partial_success`, which the
//! spec allows as a warning with nothing rejected. On the common path nothing allocates:
//! each string costs a scan for a zero byte and a length check.

use std::fmt::{self, Write as _};

use super::{
    messages,
    rows::{Batch, GenAi},
};
use opentelemetry_proto::tonic::{
    collector::{
        logs::v1::ExportLogsServiceRequest, metrics::v1::ExportMetricsServiceRequest,
        trace::v1::ExportTraceServiceRequest,
    },
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value::Value as Any},
    metrics::v1::metric::Data,
    resource::v1::Resource,
};
use prost_types::{Struct, Value, value::Kind};
use roost_proto::v1::{AddRunEventsRequest, EndRunResponse, Run, RunEvent};

/// How far ahead of roost's clock an item's time may be: a day (clocks drift; nothing is
/// sent from further in the future).
pub const MAX_AHEAD_NS: i64 = 86_400 * 1_000_000_000;

/// Whether an item's time (Unix ns) is one ingest stores: not before 1970 and not more than
/// [`MAX_AHEAD_NS`] ahead of `now_ns`. Times out of that range (1e30, 2^63, the year 9999)
/// would be clamped to 2262 and counted in every "last 30 days" forever.
pub fn time_in_range(ns: i64, now_ns: i64) -> bool {
    (0..=now_ns.saturating_add(MAX_AHEAD_NS)).contains(&ns)
}

/// Longest value kept in a field the store indexes (session, agent, model, service and
/// metric names, run and event ids): PostgreSQL refuses an index row over ~2.7 KB, which a
/// longer value fails with its whole request. Cut with the same marker, on both backends.
pub const MAX_KEY_BYTES: usize = 1024;

/// Most attributes kept per span, span event, link, log record, metric point or resource.
pub const MAX_ATTRIBUTES: usize = 128;
/// Most events kept per span.
pub const MAX_EVENTS: usize = 128;
/// Most links kept per span.
pub const MAX_LINKS: usize = 128;
/// The default longest string (`--max-attribute-bytes`), as the OTel SDK's
/// attribute value length limit would be set for agent telemetry: a long prompt fits.
pub const DEFAULT_MAX_ATTRIBUTE_BYTES: usize = 64 * 1024;

/// Ingest's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest string kept, in bytes (before the truncation marker).
    pub max_attribute_bytes: usize,
    /// Keep prompts, replies and tool arguments (`--capture-content`); when off they are
    /// dropped before anything is stored or pushed upstream.
    pub capture_content: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_attribute_bytes: DEFAULT_MAX_ATTRIBUTE_BYTES, capture_content: true }
    }
}

/// What was changed in a request to store it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cuts {
    /// Strings in which U+0000 was replaced.
    pub nul_strings: u64,
    /// Strings (and byte values) cut to the limit.
    pub truncated: u64,
    /// Attributes dropped past [`MAX_ATTRIBUTES`].
    pub dropped_attributes: u64,
    /// Span events dropped past [`MAX_EVENTS`].
    pub dropped_events: u64,
    /// Span links dropped past [`MAX_LINKS`].
    pub dropped_links: u64,
    /// Indexed values (ids, names, models) cut to [`MAX_KEY_BYTES`].
    pub truncated_keys: u64,
    /// The string limit that applied (for the message).
    pub max_attribute_bytes: usize,
}

impl Cuts {
    /// Nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.nul_strings == 0
            && self.truncated == 0
            && self.dropped_attributes == 0
            && self.dropped_events == 0
            && self.dropped_links == 0
            && self.truncated_keys == 0
    }
}

/// "truncated 1 value to 65536 bytes; dropped 3 attributes (over 128 per item);
/// replaced U+0000 with U+FFFD in 2 strings" (only the parts that happened).
impl fmt::Display for Cuts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let mut parts: Vec<String> = Vec::new();
        if self.truncated > 0 {
            let n = self.truncated;
            parts.push(format!("truncated {n} value{} to {} bytes", plural(n), self.max_attribute_bytes));
        }
        if self.truncated_keys > 0 {
            let n = self.truncated_keys;
            parts.push(format!(
                "truncated {n} indexed value{} (ids, names, models) to {MAX_KEY_BYTES} bytes",
                plural(n)
            ));
        }
        let dropped: Vec<String> = [
            (self.dropped_attributes, "attribute", MAX_ATTRIBUTES, "item"),
            (self.dropped_events, "event", MAX_EVENTS, "span"),
            (self.dropped_links, "link", MAX_LINKS, "span"),
        ]
        .into_iter()
        .filter(|(n, ..)| *n > 0)
        .map(|(n, what, max, per)| format!("{n} {what}{} (over {max} per {per})", plural(n)))
        .collect();
        if !dropped.is_empty() {
            parts.push(format!("dropped {}", dropped.join(", ")));
        }
        if self.nul_strings > 0 {
            let n = self.nul_strings;
            parts.push(format!("replaced U+0000 with U+FFFD in {n} string{}", plural(n)));
        }
        f.write_str(&parts.join("; "))
    }
}

/// Cuts `s` at a char boundary at most `max` bytes in, marking how much was cut; whether it
/// did.
fn cut_at(s: &mut String, max: usize) -> bool {
    if s.len() <= max {
        return false;
    }
    let cut = s.floor_char_boundary(max);
    let removed = s.len() - cut;
    s.truncate(cut);
    let _ = write!(s, "…[truncated {removed} bytes]");
    true
}

/// Applies [`Limits`] to requests in place, counting what it changes.
#[derive(Debug)]
pub struct Bounds {
    max_bytes: usize,
    capture_content: bool,
    cuts: Cuts,
}

impl Bounds {
    /// Bounds under `limits`.
    pub fn new(limits: &Limits) -> Self {
        let max_bytes = limits.max_attribute_bytes;
        Self {
            max_bytes,
            capture_content: limits.capture_content,
            cuts: Cuts { max_attribute_bytes: max_bytes, ..Cuts::default() },
        }
    }

    /// Without content capture: drops the attributes that hold messages, prompts, replies
    /// and tool arguments (see [`messages::is_content_key`]).
    fn drop_content(&self, attributes: &mut Vec<KeyValue>) {
        if !self.capture_content {
            attributes.retain(|kv| !messages::is_content_key(&kv.key));
        }
    }

    /// What was changed so far.
    pub fn cuts(&self) -> Cuts {
        self.cuts
    }

    /// The rule for every stored string: U+0000 replaced, then cut at the limit.
    pub fn text(&mut self, s: &mut String) {
        if s.as_bytes().contains(&0) {
            *s = s.replace('\0', "\u{FFFD}");
            self.cuts.nul_strings += 1;
        }
        if cut_at(s, self.max_bytes) {
            self.cuts.truncated += 1;
        }
    }

    /// The rows' indexed fields, cut to [`MAX_KEY_BYTES`] (after [`Bounds::text`] ran on the
    /// request they came from): the same rows, whichever backend stores them.
    pub fn keys(&mut self, batch: &mut Batch) {
        let mut cut = 0;
        let mut key = |s: &mut String| cut += u64::from(cut_at(s, MAX_KEY_BYTES));
        let gen_ai = |g: &mut GenAi, key: &mut dyn FnMut(&mut String)| {
            for field in
                [&mut g.session_id, &mut g.agent_id, &mut g.request_model, &mut g.response_model, &mut g.tool_name]
                    .into_iter()
                    .flatten()
            {
                key(field);
            }
        };
        for resource in &mut batch.resources {
            key(&mut resource.service);
        }
        for span in &mut batch.spans {
            gen_ai(&mut span.gen_ai, &mut key);
        }
        for log in &mut batch.logs {
            gen_ai(&mut log.gen_ai, &mut key);
            if let Some(name) = &mut log.event_name {
                key(name);
            }
        }
        for metric in &mut batch.metrics {
            key(&mut metric.name);
            if let Some(session) = &mut metric.session_id {
                key(session);
            }
            if let Some(usage) = &mut metric.usage {
                key(&mut usage.model);
            }
        }
        for run in &mut batch.runs {
            for field in [&mut run.id, &mut run.runtime, &mut run.session_id, &mut run.agent_id] {
                key(field);
            }
        }
        for event in &mut batch.events {
            for field in
                [&mut event.run_id, &mut event.id, &mut event.session_id, &mut event.agent_id, &mut event.model]
            {
                key(field);
            }
        }
        for score in &mut batch.scores {
            for field in [&mut score.session_id, &mut score.model, &mut score.agent_id, &mut score.service] {
                key(field);
            }
        }
        self.cuts.truncated_keys += cut;
    }

    /// An attribute value, at any depth. Bytes are stored as hex, so they are cut at half
    /// the limit (no marker fits in bytes; the count says it).
    fn any(&mut self, value: &mut AnyValue) {
        match &mut value.value {
            Some(Any::StringValue(s)) => self.text(s),
            Some(Any::BytesValue(bytes)) if bytes.len() > self.max_bytes / 2 => {
                bytes.truncate(self.max_bytes / 2);
                self.cuts.truncated += 1;
            }
            Some(Any::ArrayValue(array)) => array.values.iter_mut().for_each(|v| self.any(v)),
            Some(Any::KvlistValue(list)) => list.values.iter_mut().for_each(|kv| self.key_value(kv)),
            _ => {}
        }
    }

    /// Whether a span's message attributes are kept whole: some is over the limit, and
    /// they hold messages. Messages are stored once, by content, and the span keeps no copy
    /// of them (`telemetry::message_texts`), so cutting them would only cut the
    /// conversation (past turn ~17 a 64 KiB limit did). The request's size limit bounds
    /// them. Attributes that hold no messages are cut as any other.
    fn messages_kept_whole(&self, attributes: &[KeyValue]) -> bool {
        fn longer(value: &AnyValue, max: usize) -> bool {
            match &value.value {
                Some(Any::StringValue(s)) => s.len() > max,
                Some(Any::ArrayValue(array)) => array.values.iter().any(|v| longer(v, max)),
                Some(Any::KvlistValue(list)) => {
                    list.values.iter().any(|kv| kv.value.as_ref().is_some_and(|v| longer(v, max)))
                }
                _ => false,
            }
        }
        attributes
            .iter()
            .any(|kv| messages::is_message_key(&kv.key) && kv.value.as_ref().is_some_and(|v| longer(v, self.max_bytes)))
            && !messages::from_span(attributes, false).messages.is_empty()
    }

    /// A value kept whole but for U+0000 ([`Bounds::text`]'s first rule).
    fn nul_only(&mut self, value: &mut AnyValue) {
        match &mut value.value {
            Some(Any::StringValue(s)) if s.as_bytes().contains(&0) => {
                *s = s.replace('\0', "\u{FFFD}");
                self.cuts.nul_strings += 1;
            }
            Some(Any::ArrayValue(array)) => array.values.iter_mut().for_each(|v| self.nul_only(v)),
            Some(Any::KvlistValue(list)) => list.values.iter_mut().for_each(|kv| {
                self.text(&mut kv.key);
                kv.value.iter_mut().for_each(|v| self.nul_only(v));
            }),
            _ => {}
        }
    }

    fn key_value(&mut self, kv: &mut KeyValue) {
        self.text(&mut kv.key);
        if let Some(value) = &mut kv.value {
            self.any(value);
        }
    }

    /// An item's attributes: the first [`MAX_ATTRIBUTES`], each bounded; what was dropped is
    /// also added to the item's own `dropped_attributes_count`, when it has one.
    fn attributes(&mut self, attributes: &mut Vec<KeyValue>, dropped_count: Option<&mut u32>) {
        let dropped = keep_first(attributes, MAX_ATTRIBUTES);
        self.cuts.dropped_attributes += u64::from(dropped);
        if let Some(count) = dropped_count {
            *count = count.saturating_add(dropped);
        }
        attributes.iter_mut().for_each(|kv| self.key_value(kv));
    }

    fn resource(&mut self, resource: &mut Option<Resource>) {
        if let Some(r) = resource {
            self.attributes(&mut r.attributes, Some(&mut r.dropped_attributes_count));
        }
    }

    fn scope(&mut self, scope: &mut Option<InstrumentationScope>) {
        if let Some(s) = scope {
            self.text(&mut s.name);
        }
    }

    /// A traces request: resources, scope names, spans with their events and links.
    pub fn traces(&mut self, request: &mut ExportTraceServiceRequest) {
        for resource_spans in &mut request.resource_spans {
            self.resource(&mut resource_spans.resource);
            for scope_spans in &mut resource_spans.scope_spans {
                self.scope(&mut scope_spans.scope);
                for span in &mut scope_spans.spans {
                    self.drop_content(&mut span.attributes);
                    span.events.iter_mut().for_each(|e| self.drop_content(&mut e.attributes));
                    self.text(&mut span.name);
                    if self.messages_kept_whole(&span.attributes) {
                        let dropped = keep_first(&mut span.attributes, MAX_ATTRIBUTES);
                        self.cuts.dropped_attributes += u64::from(dropped);
                        span.dropped_attributes_count = span.dropped_attributes_count.saturating_add(dropped);
                        for kv in &mut span.attributes {
                            if messages::is_message_key(&kv.key) {
                                self.text(&mut kv.key);
                                kv.value.iter_mut().for_each(|v| self.nul_only(v));
                            } else {
                                self.key_value(kv);
                            }
                        }
                    } else {
                        self.attributes(&mut span.attributes, Some(&mut span.dropped_attributes_count));
                    }
                    if let Some(status) = &mut span.status {
                        self.text(&mut status.message);
                    }
                    let dropped = keep_first(&mut span.events, MAX_EVENTS);
                    self.cuts.dropped_events += u64::from(dropped);
                    span.dropped_events_count = span.dropped_events_count.saturating_add(dropped);
                    for event in &mut span.events {
                        self.text(&mut event.name);
                        self.attributes(&mut event.attributes, Some(&mut event.dropped_attributes_count));
                    }
                    let dropped = keep_first(&mut span.links, MAX_LINKS);
                    self.cuts.dropped_links += u64::from(dropped);
                    span.dropped_links_count = span.dropped_links_count.saturating_add(dropped);
                    for link in &mut span.links {
                        self.attributes(&mut link.attributes, Some(&mut link.dropped_attributes_count));
                    }
                }
            }
        }
    }

    /// A logs request: resources, scope names, records (body, severity, event name,
    /// attributes).
    pub fn logs(&mut self, request: &mut ExportLogsServiceRequest) {
        for resource_logs in &mut request.resource_logs {
            self.resource(&mut resource_logs.resource);
            for scope_logs in &mut resource_logs.scope_logs {
                self.scope(&mut scope_logs.scope);
                for record in &mut scope_logs.log_records {
                    if !self.capture_content {
                        self.drop_content(&mut record.attributes);
                        // A GenAI message event's body is the message itself.
                        if record.event_name.starts_with("gen_ai.") {
                            record.body = None;
                        }
                    }
                    self.text(&mut record.severity_text);
                    self.text(&mut record.event_name);
                    if let Some(body) = &mut record.body {
                        self.any(body);
                    }
                    self.attributes(&mut record.attributes, Some(&mut record.dropped_attributes_count));
                }
            }
        }
    }

    /// A metrics request: resources, scope names, metrics (name, unit, description) and
    /// their points' attributes.
    pub fn metrics(&mut self, request: &mut ExportMetricsServiceRequest) {
        for resource_metrics in &mut request.resource_metrics {
            self.resource(&mut resource_metrics.resource);
            for scope_metrics in &mut resource_metrics.scope_metrics {
                self.scope(&mut scope_metrics.scope);
                for metric in &mut scope_metrics.metrics {
                    self.text(&mut metric.name);
                    self.text(&mut metric.unit);
                    self.text(&mut metric.description);
                    match &mut metric.data {
                        Some(Data::Gauge(g)) => {
                            g.data_points.iter_mut().for_each(|p| self.attributes(&mut p.attributes, None))
                        }
                        Some(Data::Sum(s)) => {
                            s.data_points.iter_mut().for_each(|p| self.attributes(&mut p.attributes, None))
                        }
                        Some(Data::Histogram(h)) => {
                            h.data_points.iter_mut().for_each(|p| self.attributes(&mut p.attributes, None));
                        }
                        Some(Data::ExponentialHistogram(h)) => {
                            h.data_points.iter_mut().for_each(|p| self.attributes(&mut p.attributes, None));
                        }
                        Some(Data::Summary(s)) => {
                            s.data_points.iter_mut().for_each(|p| self.attributes(&mut p.attributes, None));
                        }
                        None => {}
                    }
                }
            }
        }
    }

    /// A run as a node pushed it.
    pub fn run(&mut self, run: &mut Run) {
        for s in [&mut run.id, &mut run.runtime, &mut run.session_id, &mut run.agent_id, &mut run.status] {
            self.text(s);
        }
        if let Some(metadata) = &mut run.metadata {
            self.object(metadata);
        }
    }

    /// Run events as a node pushed them.
    pub fn run_events(&mut self, request: &mut AddRunEventsRequest) {
        self.text(&mut request.run_id);
        for event in request.event.iter_mut().chain(&mut request.events) {
            self.run_event(event);
        }
    }

    fn run_event(&mut self, e: &mut RunEvent) {
        for s in [
            &mut e.id,
            &mut e.ts,
            &mut e.event_type,
            &mut e.session_id,
            &mut e.agent_id,
            &mut e.tool_name,
            &mut e.model,
            &mut e.role,
        ] {
            self.text(s);
        }
        if let Some(data) = &mut e.data {
            self.value(data);
        }
    }

    /// A run's end as a node pushed it.
    pub fn run_end(&mut self, end: &mut EndRunResponse) {
        self.text(&mut end.run_id);
        self.text(&mut end.status);
    }

    /// A JSON value (run metadata, event data), at any depth.
    fn value(&mut self, value: &mut Value) {
        match &mut value.kind {
            Some(Kind::StringValue(s)) => self.text(s),
            Some(Kind::StructValue(object)) => self.object(object),
            Some(Kind::ListValue(list)) => list.values.iter_mut().for_each(|v| self.value(v)),
            _ => {}
        }
    }

    /// A JSON object; its keys are rebuilt only when one of them needs a change.
    fn object(&mut self, object: &mut Struct) {
        let max = self.max_bytes;
        if object.fields.keys().any(|k| k.len() > max || k.as_bytes().contains(&0)) {
            object.fields = std::mem::take(&mut object.fields)
                .into_iter()
                .map(|(mut key, mut value)| {
                    self.text(&mut key);
                    self.value(&mut value);
                    (key, value)
                })
                .collect();
        } else {
            object.fields.values_mut().for_each(|v| self.value(v));
        }
    }
}

/// Keeps the first `max` items; how many were dropped.
fn keep_first<T>(items: &mut Vec<T>, max: usize) -> u32 {
    let dropped = items.len().saturating_sub(max);
    items.truncate(max);
    u32::try_from(dropped).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max: usize) -> Bounds {
        Bounds::new(&Limits { max_attribute_bytes: max, capture_content: true })
    }

    #[test]
    fn nul_is_replaced_and_long_strings_cut_at_a_char_boundary() {
        let mut b = bounds(5);
        let mut clean = "abcde".to_owned();
        b.text(&mut clean);
        assert_eq!((clean.as_str(), b.cuts().is_empty()), ("abcde", true));

        let mut nul = "a\0b".to_owned();
        b.text(&mut nul);
        assert_eq!(nul, "a\u{FFFD}b");
        let mut euros = "€€".to_owned();
        b.text(&mut euros);
        assert_eq!(euros, "€…[truncated 3 bytes]");
        assert_eq!((b.cuts().nul_strings, b.cuts().truncated), (1, 1));
        assert_eq!(b.cuts().to_string(), "truncated 1 value to 5 bytes; replaced U+0000 with U+FFFD in 1 string");
    }

    #[test]
    fn lists_keep_their_first_items_and_count_the_rest() {
        let mut b = bounds(64);
        let kv = |i: usize| KeyValue {
            key: format!("k{i}"),
            value: Some(AnyValue { value: Some(Any::StringValue("v\0".into())) }),
            ..Default::default()
        };
        let mut attributes: Vec<KeyValue> = (0..130).map(kv).collect();
        let mut dropped = 1;
        b.attributes(&mut attributes, Some(&mut dropped));
        assert_eq!((attributes.len(), dropped), (128, 3));
        assert_eq!(attributes[127].key, "k127");
        assert_eq!(
            b.cuts().to_string(),
            "dropped 2 attributes (over 128 per item); replaced U+0000 with U+FFFD in 128 strings"
        );
    }

    #[test]
    fn json_keys_and_values_are_bounded_at_any_depth() {
        use roost_proto::json::value::{from_json, to_json};
        let mut b = bounds(64);
        let mut value = from_json(&serde_json::json!({"a\u{0}": ["x\u{0}", {"y": "\u{0}"}], "n": 1}));
        b.value(&mut value);
        assert_eq!(to_json(&value), serde_json::json!({"a\u{FFFD}": ["x\u{FFFD}", {"y": "\u{FFFD}"}], "n": 1}));
        assert_eq!(b.cuts().nul_strings, 3);
    }
}
