//! `/dashboard/usage`: tokens and cost per day per model (uPlot charts drawn by the page
//! script), totals, per-model and per-day tables, and the costliest sessions.
//!
//! The tables carry everything with JavaScript off; the charts read the same numbers from
//! a JSON data block in the page (`<script type="application/json">`, which the browser
//! never executes, so the CSP holds). Charts show the eight costliest models of the
//! period and sum the rest as "other", so the legend stays readable.

use std::collections::{BTreeMap, HashMap};

use askama::Template;
use axum::{
    Router,
    extract::{Query, State},
    response::Response,
    routing::get,
};
use roost_proto::v1::{GetUsageRequest, GetUsageResponse, UsageRow};
use serde::Deserialize;
use serde_json::json;

use super::{
    Failure, When, count, float, int,
    layout::{Chrome, PageCall, percent_encode},
    query, text, tokens, total_cost, usd,
};
use crate::Core;

/// Models drawn as their own series; the rest are summed as "other".
const CHART_MODELS: usize = 8;

pub(super) fn routes() -> Router<Core> {
    Router::new().route("/dashboard/usage", get(usage))
}

#[derive(Debug, Default, Deserialize)]
struct Range {
    #[serde(default)]
    days: Option<String>,
    /// What a latency row is: one of [`LATENCY_GROUPS`]' values.
    #[serde(default)]
    latency: Option<String>,
}

/// What the latency table groups by: (value, label).
const LATENCY_GROUPS: &[(&str, &str)] = &[("model", "Model"), ("service", "Service"), ("agent", "Agent")];
/// The most hours the `latency` shape reads back (90 days).
const LATENCY_HOURS: i64 = 2160;

/// The ranges the page offers, in days: 1 is today (UTC), charted by the hour.
const RANGES: &[i32] = &[1, 7, 30, 90, 365];

#[derive(Template)]
#[template(path = "usage.html")]
struct Usage {
    chrome: Chrome,
    days: i32,
    ranges: &'static [i32],
    /// "today" or "in the last 7 days".
    period: String,
    /// What a chart's point is: "hour" for today, else "day".
    unit: &'static str,
    /// Latency per model, service or agent over the period (at most its last 90 days).
    latency: Result<Vec<LatencyLine>, Failure>,
    latency_group: &'static str,
    latency_groups: &'static [(&'static str, &'static str)],
    /// Says when the period is longer than the latency table reads.
    latency_note: String,
    summary: Result<Summary, Failure>,
    chart_data: String,
    chart_warning: String,
}

struct Summary {
    totals: Vec<(&'static str, String, String)>,
    per_day: Vec<Line>,
    per_model: Vec<Line>,
    sessions: Vec<SessionLine>,
    warning: String,
}

/// A row of the per-day or per-model table, with its bar's width as a fraction.
#[derive(Default)]
struct Line {
    label: String,
    /// A dated model under its family: the family's row is above it.
    sub: bool,
    /// A dated model's share of its family's cost (`72 %`), or of its calls when the
    /// family cost nothing.
    split: String,
    calls: String,
    input: String,
    output: String,
    cost: String,
    bar: String,
}

/// A row of the latency table: the group (a model, service or agent) and its figures.
struct LatencyLine {
    label: String,
    calls: String,
    mean: String,
    p50: String,
    p95: String,
    p99: String,
    ttft_p50: String,
    ttft_p95: String,
    ttft_p99: String,
}

struct SessionLine {
    id: String,
    href: String,
    agent: String,
    tokens: String,
    cost: String,
    last_seen: When,
}

async fn usage(State(core): State<Core>, page: PageCall, Query(range): Query<Range>) -> Response {
    let days = range.days.and_then(|d| d.parse::<i32>().ok()).filter(|d| RANGES.contains(d)).unwrap_or(30);
    // Today is charted by the hour (a day's one point says nothing), longer ranges by day.
    let now_s = super::format::now_ms().div_euclid(1000);
    let buckets = if days == 1 {
        let hour = now_s.div_euclid(3600);
        (hour - now_s.div_euclid(3600).rem_euclid(24)..=hour).map(|h| bucket(h * 3600, 13)).collect::<Vec<_>>()
    } else {
        let today = now_s.div_euclid(86_400);
        (today - i64::from(days) + 1..=today).map(|d| bucket(d * 86_400, 10)).collect()
    };
    let (shape, key, args) = if days == 1 {
        ("usage_hourly", "hour", json!({ "hours": buckets.len(), "limit": 5000 }))
    } else {
        ("models", "day", json!({ "days": days, "limit": 1000 }))
    };
    let group = LATENCY_GROUPS
        .iter()
        .map(|(value, _)| *value)
        .find(|value| range.latency.as_deref() == Some(*value))
        .unwrap_or("model");
    // The period's hours: every hour of its days so far, today's included.
    let hours = i64::from(days - 1) * 24 + now_s.div_euclid(3600).rem_euclid(24) + 1;
    let latency_args = json!({ "hours": hours.min(LATENCY_HOURS), "group": group, "limit": 50 });
    let (summary, models, latency) = tokio::join!(
        page.load(
            format!("GET /api/usage?days={days}"),
            core.features.get_usage(page.request(GetUsageRequest { days }))
        ),
        query::run(&core, &page, shape, args),
        query::run(&core, &page, "latency", latency_args),
    );
    let latency = latency.map(|rows| rows.rows.iter().map(|r| latency_line(r, group)).collect()).map_err(Failure::from);
    let summary = summary.map(summarise).map_err(Failure::from);
    let (chart_data, chart_warning) = match models {
        Ok(rows) => (chart_json(&rows.rows, key, &buckets), rows.warning),
        Err(err) => (String::new(), format!("The charts could not be drawn: {}", err.message())),
    };
    let view = Usage {
        chrome: page.chrome("Usage", "/dashboard/usage"),
        days,
        ranges: RANGES,
        period: if days == 1 { "today".into() } else { format!("in the last {days} days") },
        unit: if days == 1 { "hour" } else { "day" },
        summary,
        chart_data,
        chart_warning,
        latency,
        latency_group: group,
        latency_groups: LATENCY_GROUPS,
        latency_note: if hours > LATENCY_HOURS { "Latency covers the last 90 days.".into() } else { String::new() },
    };
    page.render(&view)
}

/// A `latency` row as the table shows it: milliseconds under 10 s, seconds past.
fn latency_line(r: &serde_json::Map<String, serde_json::Value>, group: &str) -> LatencyLine {
    let time = |key: &str| match r.get(key).and_then(serde_json::Value::as_f64) {
        None => "–".to_owned(),
        Some(ms) if ms >= 10_000.0 => format!("{:.1} s", ms / 1000.0),
        Some(ms) if ms >= 100.0 => format!("{ms:.0} ms"),
        Some(ms) => format!("{ms:.1} ms"),
    };
    let key = if group == "agent" { "agent_id" } else { group };
    let label = text(r, key);
    LatencyLine {
        label: if label.is_empty() { format!("(no {group})") } else { label },
        calls: count(int(r, "calls")),
        mean: time("mean_ms"),
        p50: time("p50_ms"),
        p95: time("p95_ms"),
        p99: time("p99_ms"),
        ttft_p50: time("ttft_p50_ms"),
        ttft_p95: time("ttft_p95_ms"),
        ttft_p99: time("ttft_p99_ms"),
    }
}

fn summarise(usage: GetUsageResponse) -> Summary {
    let total = |label, row: Option<&UsageRow>| {
        let row = row.cloned().unwrap_or_default();
        (
            label,
            total_cost(row.cost_usd, row.unpriced_calls),
            format!("{} in · {} out", tokens(row.input_tokens), tokens(row.output_tokens)),
        )
    };
    let lines = |rows: &[UsageRow], label: fn(&UsageRow) -> String| {
        let max = rows.iter().map(|r| r.cost_usd).fold(0.0_f64, f64::max);
        rows.iter()
            .map(|r| Line {
                label: label(r),
                calls: count(r.calls),
                input: tokens(r.input_tokens),
                output: tokens(r.output_tokens),
                cost: total_cost(r.cost_usd, r.unpriced_calls),
                bar: if max > 0.0 { format!("{:.1}", 1000.0 * r.cost_usd / max) } else { "0".into() },
                ..Line::default()
            })
            .collect::<Vec<_>>()
    };
    let mut per_day = lines(&usage.days, |r| r.day.clone());
    per_day.reverse();
    Summary {
        totals: vec![
            total("Today", usage.today.as_ref()),
            total("Last 7 days", usage.week.as_ref()),
            total("Last 30 days", usage.month.as_ref()),
        ],
        per_day,
        per_model: by_family(&usage.models)
            .into_iter()
            .flat_map(|(family, members)| {
                let mut rows = lines(std::slice::from_ref(&family), |r| {
                    if r.model.is_empty() { "(no model)".into() } else { r.model.clone() }
                });
                if members.len() > 1 {
                    rows.extend(lines(&members, |r| r.model.clone()).into_iter().zip(&members).map(|(mut line, m)| {
                        line.sub = true;
                        line.split = share(m, &family);
                        line
                    }));
                }
                rows
            })
            .collect(),
        sessions: usage
            .top_sessions
            .iter()
            .map(|s| SessionLine {
                href: format!("/dashboard/sessions/{}", percent_encode(&s.session_id)),
                id: s.session_id.clone(),
                agent: super::sessions::agent_label(&s.agent_id, &s.agent_name),
                tokens: tokens(s.input_tokens + s.output_tokens),
                cost: usd(s.cost_usd),
                last_seen: When::timestamp(s.last_seen.as_ref()),
            })
            .collect(),
        warning: usage.warning,
    }
}

/// A model's family: its name without a release date (`gpt-4o-mini-2024-07-18`,
/// `claude-3-5-sonnet-20241022`, `claude-sonnet-4-5@20250929` → the part before it), so
/// the per-model table sums the dated releases people call by one name.
fn family(model: &str) -> &str {
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let dated = |date: &str| match date.len() {
        8 => digits(date) && date.starts_with("20"),
        10 => {
            let parts: Vec<&str> = date.split('-').collect();
            parts.len() == 3
                && parts[0].starts_with("20")
                && parts.iter().zip([4, 2, 2]).all(|(p, n)| p.len() == n && digits(p))
        }
        _ => false,
    };
    for cut in [model.len().saturating_sub(11), model.len().saturating_sub(9)] {
        if let (Some(b'-' | b'@'), Some(date)) = (model.as_bytes().get(cut), model.get(cut + 1..))
            && cut > 0
            && dated(date)
        {
            return &model[..cut];
        }
    }
    model
}

/// Usage rows grouped by family, costliest first: each family's sum (named by the
/// family) and its members (costliest first; one member is the family itself).
fn by_family(rows: &[UsageRow]) -> Vec<(UsageRow, Vec<UsageRow>)> {
    let mut families: Vec<(UsageRow, Vec<UsageRow>)> = Vec::new();
    for row in rows {
        let name = family(&row.model);
        let at = match families.iter().position(|(f, _)| f.model == name) {
            Some(at) => at,
            None => {
                families.push((UsageRow { model: name.to_owned(), ..UsageRow::default() }, Vec::new()));
                families.len() - 1
            }
        };
        let (sum, members) = &mut families[at];
        sum.calls += row.calls;
        sum.input_tokens += row.input_tokens;
        sum.output_tokens += row.output_tokens;
        sum.cost_usd += row.cost_usd;
        sum.unpriced_calls += row.unpriced_calls;
        members.push(row.clone());
    }
    for (_, members) in &mut families {
        members
            .sort_by(|a, b| b.cost_usd.total_cmp(&a.cost_usd).then(b.calls.cmp(&a.calls)).then(a.model.cmp(&b.model)));
    }
    families.sort_by(|a, b| {
        b.0.cost_usd.total_cmp(&a.0.cost_usd).then(b.0.calls.cmp(&a.0.calls)).then(a.0.model.cmp(&b.0.model))
    });
    families
}

/// A member's share of its family: of the cost, or of the calls when it cost nothing.
fn share(member: &UsageRow, family: &UsageRow) -> String {
    let (part, whole) = if family.cost_usd > 0.0 {
        (member.cost_usd, family.cost_usd)
    } else {
        (member.calls as f64, family.calls as f64)
    };
    if whole > 0.0 { format!("{:.0} %", 100.0 * part / whole) } else { String::new() }
}

/// A chart's point: its label as the rows' `day` (`YYYY-MM-DD`, 10 characters) or `hour`
/// (`YYYY-MM-DDTHH`, 13) reads it, and its start in Unix seconds.
fn bucket(start_s: i64, label_chars: usize) -> (String, i64) {
    (super::format::rfc3339(start_s, 0)[..label_chars].to_owned(), start_s)
}

/// The charts' data: every bucket of the range (oldest first: its label in `days`, its
/// start in `times`), the charted models, and per model a cost and a token series
/// aligned with the buckets; rows are placed by their `key` column (`day` or `hour`).
/// Empty when there is no usage.
fn chart_json(rows: &[serde_json::Map<String, serde_json::Value>], key: &str, buckets: &[(String, i64)]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut cost_by_model: HashMap<String, f64> = HashMap::new();
    for row in rows {
        *cost_by_model.entry(text(row, "model")).or_default() += float(row, "cost_usd");
    }
    let mut ranked: Vec<(String, f64)> = cost_by_model.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut models: Vec<String> = ranked.iter().take(CHART_MODELS).map(|(m, _)| m.clone()).collect();
    let other = ranked.len() > CHART_MODELS;
    if other {
        models.push("other".into());
    }
    let day_index: BTreeMap<&str, usize> = buckets.iter().enumerate().map(|(i, (d, _))| (d.as_str(), i)).collect();
    let mut cost = vec![vec![0.0_f64; buckets.len()]; models.len()];
    let mut used = vec![vec![0_i64; buckets.len()]; models.len()];
    for row in rows {
        let model = text(row, "model");
        let series = models.iter().position(|m| *m == model).unwrap_or(models.len() - 1);
        if let Some(&day) = day_index.get(text(row, key).as_str()) {
            cost[series][day] += float(row, "cost_usd");
            used[series][day] += int(row, "input_tokens") + int(row, "output_tokens");
        }
    }
    let labels: Vec<String> =
        models.iter().map(|m| if m.is_empty() { "(no model)".into() } else { m.clone() }).collect();
    let labels_of_buckets: Vec<&str> = buckets.iter().map(|(d, _)| d.as_str()).collect();
    let times: Vec<i64> = buckets.iter().map(|(_, t)| *t).collect();
    let data = json!({ "days": labels_of_buckets, "times": times, "models": labels, "cost": cost, "tokens": used });
    script_safe(&data.to_string())
}

/// JSON made safe inside a `<script>` element: no `<`, `>` or `&` that could close it.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_data_cannot_close_its_script_element() {
        let row = json!({"day": super::super::format::rfc3339(super::super::format::now_ms() / 1000, 0)[..10], "model": "</script><b>", "cost_usd": 1.5, "input_tokens": 3, "output_tokens": 4});
        let today = super::super::format::now_ms().div_euclid(86_400_000);
        let buckets: Vec<(String, i64)> = (today - 6..=today).map(|d| bucket(d * 86_400, 10)).collect();
        let data = chart_json(&[row.as_object().unwrap().clone()], "day", &buckets);
        assert!(!data.contains('<') && !data.contains('>'), "{data}");
        let parsed: serde_json::Value = serde_json::from_str(&data).unwrap();
        assert_eq!(parsed["models"][0], "</script><b>");
        assert_eq!(parsed["tokens"][0][6], 7);
        assert_eq!(parsed["days"].as_array().unwrap().len(), 7);
        assert_eq!(parsed["times"][6].as_i64().unwrap() % 86_400, 0);
    }

    #[test]
    fn dated_models_fall_under_their_family() {
        for (model, expected) in [
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
            ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
            ("gpt-4o-mini", "gpt-4o-mini"),
            ("mistral-large-2411", "mistral-large-2411"),
            ("model-12345678", "model-12345678"),
            ("-20241022", "-20241022"),
            ("", ""),
        ] {
            assert_eq!(family(model), expected, "{model}");
        }
        let row = |model: &str, calls: i64, cost: f64| UsageRow {
            model: model.into(),
            calls,
            cost_usd: cost,
            ..UsageRow::default()
        };
        let grouped = by_family(&[
            row("gpt-4o-mini", 1, 0.25),
            row("claude-sonnet-4-5", 9, 9.0),
            row("gpt-4o-mini-2024-07-18", 3, 0.75),
        ]);
        let names: Vec<(&str, Vec<&str>)> =
            grouped.iter().map(|(f, m)| (f.model.as_str(), m.iter().map(|r| r.model.as_str()).collect())).collect();
        assert_eq!(
            names,
            [
                ("claude-sonnet-4-5", vec!["claude-sonnet-4-5"]),
                ("gpt-4o-mini", vec!["gpt-4o-mini-2024-07-18", "gpt-4o-mini"])
            ]
        );
        assert_eq!((grouped[1].0.calls, grouped[1].0.cost_usd), (4, 1.0));
        assert_eq!(share(&grouped[1].1[0], &grouped[1].0), "75 %");
    }

    #[test]
    fn hourly_rows_land_in_their_hour() {
        let buckets = vec![bucket(1_795_000_000 - 3600, 13), bucket(1_795_000_000, 13)];
        assert_eq!((buckets[1].0.as_str(), buckets[0].0.as_str()), ("2026-11-18T11", "2026-11-18T10"));
        let row =
            json!({"hour": "2026-11-18T10", "model": "m", "cost_usd": 0.5, "input_tokens": 1, "output_tokens": 2});
        let parsed: serde_json::Value =
            serde_json::from_str(&chart_json(&[row.as_object().unwrap().clone()], "hour", &buckets)).unwrap();
        assert_eq!((parsed["tokens"][0][0].as_i64(), parsed["tokens"][0][1].as_i64()), (Some(3), Some(0)));
    }
}
