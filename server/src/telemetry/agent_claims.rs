//! What a hosted agent's runtime may say about itself in the telemetry it sends with its
//! own agent token ([`crate::callers::tokens`]).
//!
//! An agent token proves which agent sent an export, and nothing more. A runtime runs
//! whatever its account's messages make the model do, so what its telemetry *says* is a
//! claim: left as sent, an agent could name another agent's session, conversation or
//! instance and have its spans, usage and messages shown and counted there (another
//! agent's transcript, that session's cost, the installation's cost and token alerts).
//! So, on everything an agent token sends (traces, logs and metrics):
//!
//! - **Identity is roost's.** Every attribute roost reads a session or an agent from (the
//!   [attribute map](super::attribute_map)'s `session_id` and `agent_id` names, at item,
//!   resource, span event, link and exemplar level) is set to the token's agent, whatever
//!   it said; the resource also gets `session.id`, `gen_ai.conversation.id` and
//!   `roost.instance.id` (the agent's instance id: the session roost's own records of the
//!   agent use, its model calls and turns), `roost.account.id` and `roost.runtime` when
//!   missing. The typed columns are read from these, so every page, query and grouping
//!   shows the agent's own ids; spans are also attributed to the agent (`agent_instance`).
//! - **Usage is self-reported.** What an agent reports about its own model use is not
//!   metered: every item and resource gets [`SELF_REPORTED`] = true, over any value the
//!   body gave it, and ingest then keeps the tokens and costs only as the attributes they
//!   came in (see [`super::attributes::gen_ai`] and [`super::otlp::metrics`]): no typed
//!   token or cost field, no call in usage, no metric usage. An agent's model use is
//!   counted once, from the model gateway's own spans, which roost writes itself.
//!
//! - **It scores nothing.** Its evaluation events ([`super::scores`]) get
//!   [`scores::CLAIMED_PREFIX`] before their name: kept as events, never as scores, so an
//!   agent can neither grade itself nor anyone else.
//!
//! Everything else the runtime sends (names, tool calls, messages, errors, its own
//! attributes) is kept as sent. The rewrite is applied to the request itself, after it is
//! bounded and before it becomes rows, so the rows and the copy a node keeps for its
//! upstream say the same.

use opentelemetry_proto::tonic::{
    collector::{
        logs::v1::ExportLogsServiceRequest, metrics::v1::ExportMetricsServiceRequest,
        trace::v1::ExportTraceServiceRequest,
    },
    common::v1::{AnyValue, KeyValue, any_value::Value as Any},
    metrics::v1::{Exemplar, metric::Data},
    resource::v1::Resource,
};

pub use super::attributes::SELF_REPORTED;
use super::{
    attribute_map::{BY_KEY, Field},
    scores,
};
use crate::callers::tokens::AgentIdentity;

/// The hosted agent an item belongs to (`roost.instance.id`, also an agent id name of the
/// attribute map).
pub const INSTANCE: &str = "roost.instance.id";
/// The account of the agent that sent an item.
pub const ACCOUNT: &str = "roost.account.id";
/// The runtime of the agent that sent an item (roost also puts it in the runtime's
/// `OTEL_RESOURCE_ATTRIBUTES`).
pub const RUNTIME: &str = "roost.runtime";

/// What a resource of an agent's export always carries: the session under the names of
/// the GenAI conventions, the agent, its account and runtime, and the mark.
const RESOURCE_KEYS: [&str; 6] = ["session.id", "gen_ai.conversation.id", INSTANCE, ACCOUNT, RUNTIME, SELF_REPORTED];
/// What every item (span, log record, metric point) of an agent's export carries.
const ITEM_KEYS: [&str; 1] = [SELF_REPORTED];

/// True for an attribute roost reads a session or an agent from.
pub fn is_identity_key(key: &str) -> bool {
    matches!(BY_KEY.get(key), Some((Field::Session | Field::Agent, ..)))
}

/// The agent a token names, as its telemetry is rewritten.
struct Claims<'a> {
    agent: &'a AgentIdentity,
}

impl Claims<'_> {
    /// roost's value for `key`, when it is one roost sets; `None` for the sender's own.
    fn value(&self, key: &str) -> Option<Any> {
        let text = |s: &str| Some(Any::StringValue(s.to_owned()));
        match key {
            SELF_REPORTED => Some(Any::BoolValue(true)),
            ACCOUNT => text(&self.agent.account_id),
            RUNTIME => text(&self.agent.runtime_id),
            // Every session and agent name: the session of a hosted agent is its instance id.
            _ if is_identity_key(key) => text(&self.agent.instance_id),
            _ => None,
        }
    }

    /// Sets every attribute roost owns to roost's value, where the sender put it (its other
    /// attributes are left as they are), then adds those of `required` it did not send.
    fn attributes(&self, attributes: &mut Vec<KeyValue>, required: &[&str]) {
        for kv in attributes.iter_mut() {
            if let Some(value) = self.value(&kv.key) {
                kv.value = Some(AnyValue { value: Some(value) });
            }
        }
        for key in required {
            if !attributes.iter().any(|kv| kv.key == *key) {
                let value = self.value(key).map(|value| AnyValue { value: Some(value) });
                attributes.push(KeyValue { key: (*key).to_owned(), value, ..KeyValue::default() });
            }
        }
    }

    fn resource(&self, resource: &mut Option<Resource>) {
        self.attributes(&mut resource.get_or_insert_default().attributes, &RESOURCE_KEYS);
    }

    fn exemplars(&self, exemplars: &mut [Exemplar]) {
        for exemplar in exemplars {
            self.attributes(&mut exemplar.filtered_attributes, &[]);
        }
    }
}

/// Rewrites a traces request `agent`'s token sent (see the module).
pub fn traces(request: &mut ExportTraceServiceRequest, agent: &AgentIdentity) {
    let claims = Claims { agent };
    for resource_spans in &mut request.resource_spans {
        claims.resource(&mut resource_spans.resource);
        for scope_spans in &mut resource_spans.scope_spans {
            for span in &mut scope_spans.spans {
                claims.attributes(&mut span.attributes, &ITEM_KEYS);
                for event in &mut span.events {
                    claims.attributes(&mut event.attributes, &[]);
                    if scores::is_evaluation(&event.name) {
                        event.name.insert_str(0, scores::CLAIMED_PREFIX);
                    }
                }
                for link in &mut span.links {
                    claims.attributes(&mut link.attributes, &[]);
                }
            }
        }
    }
}

/// Rewrites a logs request `agent`'s token sent (see the module).
pub fn logs(request: &mut ExportLogsServiceRequest, agent: &AgentIdentity) {
    let claims = Claims { agent };
    for resource_logs in &mut request.resource_logs {
        claims.resource(&mut resource_logs.resource);
        for scope_logs in &mut resource_logs.scope_logs {
            for record in &mut scope_logs.log_records {
                claims.attributes(&mut record.attributes, &ITEM_KEYS);
                if let Some(name) = super::otlp::logs::event_name(record).filter(|n| scores::is_evaluation(n)) {
                    record.event_name = format!("{}{name}", scores::CLAIMED_PREFIX);
                }
            }
        }
    }
}

/// Rewrites a metrics request `agent`'s token sent (see the module).
pub fn metrics(request: &mut ExportMetricsServiceRequest, agent: &AgentIdentity) {
    let claims = Claims { agent };
    for resource_metrics in &mut request.resource_metrics {
        claims.resource(&mut resource_metrics.resource);
        for scope_metrics in &mut resource_metrics.scope_metrics {
            for metric in &mut scope_metrics.metrics {
                match &mut metric.data {
                    Some(Data::Gauge(gauge)) => gauge.data_points.iter_mut().for_each(|p| {
                        claims.attributes(&mut p.attributes, &ITEM_KEYS);
                        claims.exemplars(&mut p.exemplars);
                    }),
                    Some(Data::Sum(sum)) => sum.data_points.iter_mut().for_each(|p| {
                        claims.attributes(&mut p.attributes, &ITEM_KEYS);
                        claims.exemplars(&mut p.exemplars);
                    }),
                    Some(Data::Histogram(histogram)) => histogram.data_points.iter_mut().for_each(|p| {
                        claims.attributes(&mut p.attributes, &ITEM_KEYS);
                        claims.exemplars(&mut p.exemplars);
                    }),
                    Some(Data::ExponentialHistogram(histogram)) => histogram.data_points.iter_mut().for_each(|p| {
                        claims.attributes(&mut p.attributes, &ITEM_KEYS);
                        claims.exemplars(&mut p.exemplars);
                    }),
                    Some(Data::Summary(summary)) => {
                        summary.data_points.iter_mut().for_each(|p| claims.attributes(&mut p.attributes, &ITEM_KEYS));
                    }
                    None => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::{
        logs::v1::{LogRecord, ResourceLogs, ScopeLogs},
        metrics::v1::{
            AggregationTemporality, Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics,
            ScopeMetrics, Sum, number_data_point::Value as Number,
        },
        trace::v1::{ResourceSpans, ScopeSpans, Span, span::Event},
    };

    use opentelemetry_proto::tonic::common::v1::KeyValueList;

    use super::*;
    use crate::{
        billing::prices::PriceBook,
        callers::ModelMode,
        callers::TurnSlot,
        telemetry::{attributes::to_map, otlp},
    };

    fn agent() -> AgentIdentity {
        AgentIdentity {
            instance_id: "ins_a".to_owned(),
            account_id: "acc_a".to_owned(),
            runtime_id: "forger".to_owned(),
            model_mode: ModelMode::Managed,
            provider_api_key: None,
            turn: TurnSlot::default(),
            sandboxed: true,
        }
    }

    fn kv(key: &str, value: Any) -> KeyValue {
        KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
    }

    fn text(key: &str, value: &str) -> KeyValue {
        kv(key, Any::StringValue(value.to_owned()))
    }

    /// Every session and agent name, naming another agent, and roost's marks set the
    /// other way.
    fn forged() -> Vec<KeyValue> {
        let mut attributes: Vec<KeyValue> = BY_KEY
            .iter()
            .filter(|(_, (field, ..))| matches!(field, Field::Session | Field::Agent))
            .map(|(key, _)| text(key, "ins_c"))
            .collect();
        attributes.push(text(ACCOUNT, "acc_c"));
        attributes.push(kv(SELF_REPORTED, Any::BoolValue(false)));
        attributes.push(text("session.id", "ins_c"));
        attributes
    }

    fn usage() -> Vec<KeyValue> {
        vec![
            text("gen_ai.request.model", "gpt-4o"),
            kv("gen_ai.usage.input_tokens", Any::IntValue(1_000_000_000)),
            kv("gen_ai.usage.output_tokens", Any::IntValue(1_000_000)),
            kv("gen_ai.usage.cost", Any::DoubleValue(11_250.0)),
            text("app.kept", "as sent"),
        ]
    }

    /// Which attributes of a rewritten list say what.
    fn said(attributes: &[KeyValue]) -> serde_json::Map<String, serde_json::Value> {
        to_map(attributes)
    }

    fn assert_agents(attributes: &[KeyValue]) {
        for kv in attributes {
            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
            if is_identity_key(&kv.key) {
                assert_eq!(value, Some(&Any::StringValue("ins_a".into())), "{}", kv.key);
            }
            assert_ne!(value, Some(&Any::StringValue("ins_c".into())), "{}", kv.key);
            assert_ne!(value, Some(&Any::StringValue("acc_c".into())), "{}", kv.key);
        }
    }

    #[test]
    fn spans_name_the_tokens_agent_and_report_no_usage() {
        let span = Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "chat gpt-4o".into(),
            start_time_unix_nano: 1_700_000_000_000_000_000,
            end_time_unix_nano: 1_700_000_000_000_000_001,
            attributes: [usage(), forged()].concat(),
            events: vec![Event { name: "claimed".into(), attributes: forged(), ..Event::default() }],
            ..Span::default()
        };
        let mut request = ExportTraceServiceRequest {
            resource_spans: vec![
                ResourceSpans {
                    resource: Some(Resource { attributes: forged(), ..Resource::default() }),
                    scope_spans: vec![ScopeSpans { spans: vec![span.clone()], ..ScopeSpans::default() }],
                    ..ResourceSpans::default()
                },
                // No resource at all: it gets one.
                ResourceSpans {
                    scope_spans: vec![ScopeSpans {
                        spans: vec![Span { span_id: vec![3; 8], attributes: usage(), ..span }],
                        ..ScopeSpans::default()
                    }],
                    ..ResourceSpans::default()
                },
            ],
        };
        traces(&mut request, &agent());
        for resource_spans in &request.resource_spans {
            let resource = &resource_spans.resource.as_ref().unwrap().attributes;
            assert_agents(resource);
            let resource = said(resource);
            for key in ["session.id", "gen_ai.conversation.id", INSTANCE] {
                assert_eq!(resource[key], "ins_a", "{key}");
            }
            assert_eq!((&resource[ACCOUNT], &resource[RUNTIME]), (&"acc_a".into(), &"forger".into()));
            assert_eq!(resource[SELF_REPORTED], true);
            for span in &resource_spans.scope_spans[0].spans {
                assert_agents(&span.attributes);
                assert_agents(&span.events.iter().flat_map(|e| e.attributes.clone()).collect::<Vec<_>>());
                let attributes = said(&span.attributes);
                assert_eq!(attributes[SELF_REPORTED], true);
                assert_eq!(attributes["gen_ai.usage.input_tokens"], 1_000_000_000, "the numbers stay as sent");
                assert_eq!(attributes["app.kept"], "as sent");
            }
        }

        let (batch, rejected) = otlp::traces::convert(&request, &PriceBook::builtin());
        assert_eq!((rejected.count, batch.spans.len()), (0, 2));
        for span in &batch.spans {
            let g = &span.gen_ai;
            assert_eq!((g.session_id.as_deref(), g.agent_id.as_deref()), (Some("ins_a"), Some("ins_a")));
            assert_eq!((g.input_tokens, g.output_tokens, g.cost_nanocents), (None, None, None));
            assert!(g.self_reported && !g.is_unpriced());
            assert_eq!(g.model(), Some("gpt-4o"), "what it says it called stays");
        }
        for resource in &batch.resources {
            assert!(!resource.attributes.contains("ins_c") && !resource.attributes.contains("acc_c"));
        }
        // Counted as no call anywhere.
        let mut summaries = crate::telemetry::summaries::Summaries::default();
        batch.spans.iter().for_each(|span| summaries.span(span, "forger"));
        let debug = format!("{summaries:?}");
        assert!(debug.contains("usage: {}, usage_hourly: {}") && !debug.contains("ins_c"), "{debug}");
    }

    #[test]
    fn log_records_name_the_tokens_agent_and_report_no_usage() {
        let record = LogRecord {
            time_unix_nano: 1_700_000_000_000_000_000,
            event_name: "gen_ai.user.message".into(),
            body: Some(AnyValue {
                value: Some(Any::KvlistValue(KeyValueList { values: vec![text("content", "forged")] })),
            }),
            attributes: [usage(), forged()].concat(),
            ..LogRecord::default()
        };
        let mut request = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource { attributes: forged(), ..Resource::default() }),
                scope_logs: vec![ScopeLogs { log_records: vec![record], ..ScopeLogs::default() }],
                ..ResourceLogs::default()
            }],
        };
        logs(&mut request, &agent());
        let (batch, _) = otlp::logs::convert(&request, &PriceBook::builtin());
        let log = &batch.logs[0];
        let g = &log.gen_ai;
        assert_eq!((g.session_id.as_deref(), g.agent_id.as_deref()), (Some("ins_a"), Some("ins_a")));
        assert_eq!((g.input_tokens, g.output_tokens, g.cost_nanocents), (None, None, None));
        assert_eq!(log.messages.len(), 1, "its message stays, in its own session");
        assert!(!log.attributes.contains("ins_c") && !batch.resources[0].attributes.contains("ins_c"));
    }

    #[test]
    fn metric_points_name_the_tokens_agent_and_count_no_usage() {
        let attributes = |extra: Vec<KeyValue>| [extra, forged()].concat();
        let sent = vec![
            Metric {
                name: "gen_ai.client.token.usage".into(),
                data: Some(Data::Histogram(Histogram {
                    data_points: vec![HistogramDataPoint {
                        time_unix_nano: 1_700_000_000_000_000_000,
                        count: 1,
                        sum: Some(1e9),
                        attributes: attributes(vec![
                            text("gen_ai.token.type", "input"),
                            text("gen_ai.request.model", "gpt-4o"),
                        ]),
                        ..HistogramDataPoint::default()
                    }],
                    aggregation_temporality: AggregationTemporality::Delta as i32,
                })),
                ..Metric::default()
            },
            Metric {
                name: "claude_code.cost.usage".into(),
                data: Some(Data::Sum(Sum {
                    data_points: vec![NumberDataPoint {
                        time_unix_nano: 1_700_000_000_000_000_000,
                        value: Some(Number::AsDouble(11_250.0)),
                        attributes: attributes(vec![text("model", "claude-sonnet-4-5")]),
                        ..NumberDataPoint::default()
                    }],
                    aggregation_temporality: AggregationTemporality::Delta as i32,
                    is_monotonic: true,
                })),
                ..Metric::default()
            },
        ];
        let request = || ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource { attributes: forged(), ..Resource::default() }),
                scope_metrics: vec![ScopeMetrics { metrics: sent.clone(), ..ScopeMetrics::default() }],
                ..ResourceMetrics::default()
            }],
        };
        // As any sender sent them, they would be usage.
        let (plain, _) = otlp::metrics::convert(&request(), &PriceBook::builtin());
        assert!(plain.metrics.iter().all(|point| point.usage.is_some()));

        let mut claimed = request();
        metrics(&mut claimed, &agent());
        let (batch, _) = otlp::metrics::convert(&claimed, &PriceBook::builtin());
        assert_eq!(batch.metrics.len(), 2);
        for point in &batch.metrics {
            assert_eq!((point.session_id.as_deref(), &point.usage), (Some("ins_a"), &None));
            assert!(!point.attributes.contains("ins_c"), "{}", point.attributes);
            let attributes: serde_json::Value = serde_json::from_str(&point.attributes).unwrap();
            assert_eq!(attributes[SELF_REPORTED], true);
        }
    }
}
