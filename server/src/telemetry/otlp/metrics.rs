//! OTLP metrics → one row per data point.

use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest,
    common::v1::KeyValue,
    metrics::v1::{metric::Data, number_data_point::Value as Number},
};
use serde_json::json;

use super::{Rejected, Resources, ns};
use crate::{
    billing::prices::PriceBook,
    telemetry::{
        attributes::{is_self_reported, string, to_json_text},
        limits::time_in_range,
        rows::{Batch, MetricRow, MetricUsage, UsageKind},
    },
};

/// The data points of a request; a metric without data is rejected. Points whose usage is
/// [self-reported](crate::telemetry::attributes::SELF_REPORTED) (on the point or its
/// resource: everything a hosted agent sends with its own token) carry no usage: they are
/// stored, and never counted.
pub fn convert(request: &ExportMetricsServiceRequest, prices: &PriceBook) -> (Batch, Rejected) {
    let mut batch = Batch::default();
    let mut rejected = Rejected::default();
    let mut resources = Resources::default();
    for resource_metrics in &request.resource_metrics {
        let resource = resource_metrics.resource.as_ref().map(|r| r.attributes.as_slice()).unwrap_or_default();
        let resource_index = resources.intern(&mut batch, resource);
        let resource_self_reported = is_self_reported(resource);
        let counted = |attributes: &[KeyValue]| !resource_self_reported && !is_self_reported(attributes);
        for scope_metrics in &resource_metrics.scope_metrics {
            for metric in &scope_metrics.metrics {
                let point = |kind: &'static str, attrs: &[KeyValue], time: u64, start: u64| MetricRow {
                    name: metric.name.clone(),
                    kind,
                    unit: metric.unit.clone(),
                    resource: resource_index,
                    time_ns: ns(time),
                    start_ns: ns(start),
                    value: None,
                    count: None,
                    detail: None,
                    attributes: to_json_text(attrs),
                    session_id: string(attrs, "session.id").or_else(|| string(resource, "session.id")),
                    usage: None,
                };
                match &metric.data {
                    Some(Data::Gauge(gauge)) => {
                        for p in &gauge.data_points {
                            let row = point("gauge", &p.attributes, p.time_unix_nano, p.start_time_unix_nano);
                            batch.metrics.push(MetricRow { value: number(p.value), ..row });
                        }
                    }
                    Some(Data::Sum(sum)) => {
                        for p in &sum.data_points {
                            let row = point("sum", &p.attributes, p.time_unix_nano, p.start_time_unix_nano);
                            let detail =
                                json!({"monotonic": sum.is_monotonic, "temporality": sum.aggregation_temporality});
                            let usage = number(p.value).filter(|_| counted(&p.attributes)).and_then(|amount| {
                                usage_of(&metric.name, &p.attributes, amount, sum.aggregation_temporality, prices)
                            });
                            batch.metrics.push(MetricRow {
                                value: number(p.value),
                                detail: Some(detail.to_string()),
                                usage,
                                ..row
                            });
                        }
                    }
                    Some(Data::Histogram(histogram)) => {
                        for p in &histogram.data_points {
                            let row = point("histogram", &p.attributes, p.time_unix_nano, p.start_time_unix_nano);
                            let detail = json!({"bounds": p.explicit_bounds, "counts": p.bucket_counts, "min": p.min, "max": p.max});
                            let usage = p.sum.filter(|_| counted(&p.attributes)).and_then(|amount| {
                                usage_of(&metric.name, &p.attributes, amount, histogram.aggregation_temporality, prices)
                            });
                            batch.metrics.push(MetricRow {
                                usage,
                                value: p.sum,
                                count: Some(p.count as i64),
                                detail: Some(detail.to_string()),
                                ..row
                            });
                        }
                    }
                    Some(Data::ExponentialHistogram(histogram)) => {
                        for p in &histogram.data_points {
                            let row =
                                point("exponential_histogram", &p.attributes, p.time_unix_nano, p.start_time_unix_nano);
                            let buckets = |b: &Option<_>| {
                                b.as_ref().map(|b: &opentelemetry_proto::tonic::metrics::v1::exponential_histogram_data_point::Buckets| {
                                    json!({"offset": b.offset, "counts": b.bucket_counts})
                                })
                            };
                            let detail = json!({
                                "scale": p.scale, "zero_count": p.zero_count, "positive": buckets(&p.positive),
                                "negative": buckets(&p.negative), "min": p.min, "max": p.max,
                            });
                            batch.metrics.push(MetricRow {
                                value: p.sum,
                                count: Some(p.count as i64),
                                detail: Some(detail.to_string()),
                                ..row
                            });
                        }
                    }
                    Some(Data::Summary(summary)) => {
                        for p in &summary.data_points {
                            let row = point("summary", &p.attributes, p.time_unix_nano, p.start_time_unix_nano);
                            let quantiles: Vec<_> = p
                                .quantile_values
                                .iter()
                                .map(|q| json!({"quantile": q.quantile, "value": q.value}))
                                .collect();
                            batch.metrics.push(MetricRow {
                                value: Some(p.sum),
                                count: Some(p.count as i64),
                                detail: Some(json!({ "quantiles": quantiles }).to_string()),
                                ..row
                            });
                        }
                    }
                    None => rejected.add(|| format!("metric {:?} has no data", metric.name)),
                }
            }
        }
    }
    let now_ns = crate::time::now_ms().saturating_mul(1_000_000);
    batch.metrics.retain(|point| {
        let kept = time_in_range(point.time_ns, now_ns) && time_in_range(point.start_ns, now_ns);
        if !kept {
            rejected.add(|| format!("metric {:?}: a data point's time is more than a day ahead", point.name));
        }
        kept
    });
    (batch, rejected)
}

/// OTLP's cumulative aggregation temporality.
const CUMULATIVE: i32 = 2;

/// The usage a point of a token or cost metric reports: `gen_ai.client.token.usage`
/// (histogram; `gen_ai.token.type` input/output), `claude_code.token.usage` (sum; `type`
/// input/output/cacheRead/cacheCreation, the cache counted apart from the input, as
/// Anthropic counts) and `claude_code.cost.usage` (sum, USD). Whether it counts is decided
/// when usage is read ([`USAGE_WITH_METRICS`](crate::telemetry::summaries::USAGE_WITH_METRICS)):
/// only for services that report no calls.
pub fn usage_of(
    name: &str,
    attributes: &[KeyValue],
    amount: f64,
    temporality: i32,
    prices: &PriceBook,
) -> Option<MetricUsage> {
    if !amount.is_finite() || amount < 0.0 {
        return None;
    }
    let (kind, model) = match name {
        "gen_ai.client.token.usage" => {
            let kind = match string(attributes, "gen_ai.token.type")?.as_str() {
                "input" | "prompt" => UsageKind::Input,
                "output" | "completion" => UsageKind::Output,
                _ => return None,
            };
            let model =
                string(attributes, "gen_ai.response.model").or_else(|| string(attributes, "gen_ai.request.model"));
            (kind, model)
        }
        "claude_code.token.usage" => {
            let kind = match string(attributes, "type")?.as_str() {
                "input" => UsageKind::Input,
                "output" => UsageKind::Output,
                "cacheRead" => UsageKind::CacheReadApart,
                "cacheCreation" => UsageKind::CacheWriteApart,
                _ => return None,
            };
            (kind, string(attributes, "model"))
        }
        "claude_code.cost.usage" => (UsageKind::CostUsd, string(attributes, "model")),
        _ => return None,
    };
    let model = model.unwrap_or_default();
    // Claude Code's tokens are priced by its own cost metric; GenAI token metrics by the
    // price book.
    let nanocents_per_unit = match (name, kind) {
        (_, UsageKind::CostUsd) => 100_000_000_000,
        ("gen_ai.client.token.usage", UsageKind::Input) => prices.lookup(&model).map_or(0, |p| p.input),
        ("gen_ai.client.token.usage", UsageKind::Output) => prices.lookup(&model).map_or(0, |p| p.output),
        _ => 0,
    };
    Some(MetricUsage { model, kind, amount, cumulative: temporality == CUMULATIVE, nanocents_per_unit })
}

fn number(value: Option<Number>) -> Option<f64> {
    match value? {
        Number::AsDouble(d) => d.is_finite().then_some(d),
        Number::AsInt(i) => Some(i as f64),
    }
}
