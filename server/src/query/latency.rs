//! The `latency` shape: model call duration and time-to-first-token percentiles per model,
//! service or agent over the last hours, read from the hourly histograms ingest keeps
//! ([`crate::telemetry::latency`]): one row per group, busiest first.

use std::collections::BTreeMap;

use futures::TryStreamExt as _;
use serde_json::{Map, Value as Json};
use sqlx::Row as _;

use super::{
    args::Args,
    run::{self, Bind, Fetched, Sql},
};
use crate::{
    Result,
    store::{Store, on_reader},
    telemetry::latency::{DURATION, FIRST_TOKEN, quantile_ms},
    time::utc_hour,
};

/// What a group is: the `group` argument's values and the column each reads.
pub const GROUPS: &[(&str, &str)] = &[("model", "model"), ("service", "service"), ("agent", "agent_id")];

/// One group's two histograms: (bucket, calls) in bucket order, and the total.
#[derive(Default)]
struct Histograms {
    duration: Vec<(i64, i64)>,
    duration_ns: i64,
    first_token: Vec<(i64, i64)>,
    first_token_ns: i64,
}

/// Runs the shape.
pub async fn run(store: &Store, args: &Args, now_ns: i64) -> Result<Fetched> {
    let group = args.string("group").unwrap_or("model");
    let column = GROUPS.iter().find(|(name, _)| *name == group).map_or("model", |g| g.1);
    let mut sql = Sql::default();
    let hours = args.integer("hours").max(1);
    let first = sql.bind(Bind::Text(utc_hour(now_ns - (hours - 1) * 3_600_000_000_000)));
    let mut text = format!(
        "SELECT {column} AS k, measure, bucket, CAST(SUM(calls) AS BIGINT) AS calls, \
         CAST(SUM(total_ns) AS BIGINT) AS total_ns FROM latency_hourly WHERE hour >= {first}"
    );
    for (arg, column) in [("model", "model"), ("service", "service"), ("agent_id", "agent_id")] {
        if let Some(value) = args.string(arg) {
            text.push_str(&format!(" AND {column} = {}", sql.bind(Bind::Text(value.to_owned()))));
        }
    }
    text.push_str(" GROUP BY k, measure, bucket ORDER BY k, measure, bucket");
    sql.text = text;
    let groups = on_reader!(store, |pool| async {
        let mut rows = run::bound!(&sql).fetch(pool);
        let mut groups: BTreeMap<String, Histograms> = BTreeMap::new();
        while let Some(row) = rows.try_next().await? {
            let (key, measure, bucket): (String, i64, i64) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            let (calls, total): (i64, i64) = (row.try_get(3)?, row.try_get(4)?);
            let group = groups.entry(key).or_default();
            if measure == DURATION {
                group.duration.push((bucket, calls));
                group.duration_ns = group.duration_ns.saturating_add(total);
            } else if measure == FIRST_TOKEN {
                group.first_token.push((bucket, calls));
                group.first_token_ns = group.first_token_ns.saturating_add(total);
            }
        }
        Ok::<_, sqlx::Error>(groups)
    }
    .await)?;
    let mut rows: Vec<(i64, Map<String, Json>)> =
        groups.into_iter().map(|(key, h)| row(group, key, &h)).filter(|(calls, _)| *calls > 0).collect();
    // Busiest first; the key breaks ties (the map was in key order and the sort is stable).
    rows.sort_by_key(|(calls, _)| std::cmp::Reverse(*calls));
    let offset = args.integer("offset").max(0) as usize;
    let limit = args.integer("limit").max(1) as usize;
    Ok(Fetched {
        rows: rows.into_iter().skip(offset).take(limit).map(|(_, row)| row).collect(),
        truncated: false,
        bytes: 0,
    })
}

/// A group's row, and its calls (to order by).
fn row(group: &str, key: String, h: &Histograms) -> (i64, Map<String, Json>) {
    let calls: i64 = h.duration.iter().map(|(_, n)| n).sum();
    let first_token_calls: i64 = h.first_token.iter().map(|(_, n)| n).sum();
    let ms = |value: Option<f64>| {
        value.and_then(|v| serde_json::Number::from_f64(round(v))).map_or(Json::Null, Json::Number)
    };
    let mean = |total: i64, n: i64| (n > 0).then(|| total as f64 / n as f64 / 1e6);
    let mut row = Map::new();
    for (name, _) in GROUPS {
        let field = if *name == "agent" { "agent_id" } else { name };
        row.insert(field.to_owned(), if *name == group { Json::String(key.clone()) } else { Json::Null });
    }
    row.insert("calls".to_owned(), calls.into());
    row.insert("mean_ms".to_owned(), ms(mean(h.duration_ns, calls)));
    for (name, p) in [("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99)] {
        row.insert(name.to_owned(), ms(quantile_ms(&h.duration, p)));
    }
    row.insert("ttft_calls".to_owned(), first_token_calls.into());
    row.insert("ttft_mean_ms".to_owned(), ms(mean(h.first_token_ns, first_token_calls)));
    for (name, p) in [("ttft_p50_ms", 0.5), ("ttft_p95_ms", 0.95), ("ttft_p99_ms", 0.99)] {
        row.insert(name.to_owned(), ms(quantile_ms(&h.first_token, p)));
    }
    (calls, row)
}

/// Milliseconds to three significant decimals (a microsecond): the buckets are no finer.
fn round(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}
