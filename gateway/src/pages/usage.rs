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
}

/// The ranges the page offers.
const RANGES: &[i32] = &[7, 30, 90, 365];

#[derive(Template)]
#[template(path = "usage.html")]
struct Usage {
    chrome: Chrome,
    days: i32,
    ranges: &'static [i32],
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
struct Line {
    label: String,
    calls: String,
    input: String,
    output: String,
    cost: String,
    bar: String,
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
    let (summary, models) = tokio::join!(
        page.load(
            format!("GET /api/usage?days={days}"),
            core.features.get_usage(page.request(GetUsageRequest { days }))
        ),
        query::run(&core, &page, "models", json!({ "days": days, "limit": 1000 })),
    );
    let summary = summary.map(summarise).map_err(Failure::from);
    let (chart_data, chart_warning) = match models {
        Ok(rows) => (chart_json(&rows.rows, days), rows.warning),
        Err(err) => (String::new(), format!("The charts could not be drawn: {}", err.message())),
    };
    let view = Usage {
        chrome: page.chrome("Usage", "/dashboard/usage"),
        days,
        ranges: RANGES,
        summary,
        chart_data,
        chart_warning,
    };
    page.render(&view)
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
        per_model: lines(&usage.models, |r| if r.model.is_empty() { "(no model)".into() } else { r.model.clone() }),
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

/// The charts' data: every day of the range (oldest first), the charted models, and per
/// model a cost and a token series aligned with the days. Empty when there is no usage.
fn chart_json(rows: &[serde_json::Map<String, serde_json::Value>], days: i32) -> String {
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
    let today = super::format::now_ms().div_euclid(86_400_000);
    let day_list: Vec<String> = (0..i64::from(days))
        .rev()
        .map(|back| super::format::rfc3339((today - back) * 86_400, 0)[..10].to_owned())
        .collect();
    let day_index: BTreeMap<&str, usize> = day_list.iter().enumerate().map(|(i, d)| (d.as_str(), i)).collect();
    let mut cost = vec![vec![0.0_f64; day_list.len()]; models.len()];
    let mut used = vec![vec![0_i64; day_list.len()]; models.len()];
    for row in rows {
        let model = text(row, "model");
        let series = models.iter().position(|m| *m == model).unwrap_or(models.len() - 1);
        if let Some(&day) = day_index.get(text(row, "day").as_str()) {
            cost[series][day] += float(row, "cost_usd");
            used[series][day] += int(row, "input_tokens") + int(row, "output_tokens");
        }
    }
    let labels: Vec<String> =
        models.iter().map(|m| if m.is_empty() { "(no model)".into() } else { m.clone() }).collect();
    let data = json!({ "days": day_list, "models": labels, "cost": cost, "tokens": used });
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
        let data = chart_json(&[row.as_object().unwrap().clone()], 7);
        assert!(!data.contains('<') && !data.contains('>'), "{data}");
        let parsed: serde_json::Value = serde_json::from_str(&data).unwrap();
        assert_eq!(parsed["models"][0], "</script><b>");
        assert_eq!(parsed["tokens"][0][6], 7);
        assert_eq!(parsed["days"].as_array().unwrap().len(), 7);
    }
}
