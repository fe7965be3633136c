//! Scores in q/1: the `scores` shape (aggregates per name, and per model, agent, service,
//! source, day or hour), the `score_list` shape's values, and the `score` filter of
//! `sessions` and `traces`.

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
    telemetry::scores::value_json,
    time::{utc_day, utc_hour},
};

/// What a row is besides the score's name: the `group` argument's values, each with the
/// field it fills and the SQL of its key.
pub const GROUPS: &[(&str, &str, &str)] = &[
    ("model", "model", "model"),
    ("agent", "agent_id", "agent_id"),
    ("service", "service", "service"),
    ("source", "source", "source"),
    ("day", "day", "CAST(time_ns / 86400000000000 AS TEXT)"),
    ("hour", "hour", "CAST(time_ns / 3600000000000 AS TEXT)"),
];

/// One (name, kind, group) of the aggregates.
#[derive(Default)]
struct Aggregate {
    scores: i64,
    sum: f64,
    min: Option<f64>,
    max: Option<f64>,
    categories: BTreeMap<String, i64>,
}

/// Runs the `scores` shape.
pub async fn run(store: &Store, args: &Args, now_ns: i64) -> Result<Fetched> {
    let group = args.string("group").and_then(|g| GROUPS.iter().find(|(name, ..)| *name == g));
    let key = group.map_or("''", |g| g.2);
    let mut sql = Sql::default();
    let days = args.integer("days").max(1);
    let since = args.time("since").unwrap_or(now_ns - days * 86_400_000_000_000);
    let mut text = format!(
        "SELECT name, kind, {key} AS k, CASE WHEN kind = 'categorical' THEN label ELSE '' END AS l, \
         CAST(COUNT(*) AS BIGINT), SUM(value), MIN(value), MAX(value) FROM scores WHERE time_ns >= {}",
        sql.bind(Bind::Int(since))
    );
    if let Some(until) = args.time("until") {
        text.push_str(&format!(" AND time_ns <= {}", sql.bind(Bind::Int(until))));
    }
    for column in ["name", "source", "kind", "model", "agent_id", "service", "evaluator_id"] {
        if let Some(value) = args.string(column) {
            text.push_str(&format!(" AND {column} = {}", sql.bind(Bind::Text(value.to_owned()))));
        }
    }
    text.push_str(" GROUP BY name, kind, k, l ORDER BY name, kind, k, l");
    sql.text = text;
    let aggregates = on_reader!(store, |pool| async {
        let mut rows = run::bound!(&sql).fetch(pool);
        let mut aggregates: BTreeMap<(String, String, String), Aggregate> = BTreeMap::new();
        while let Some(row) = rows.try_next().await? {
            let key: (String, String, String) = (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            let label: String = row.try_get(3)?;
            let scores: i64 = row.try_get(4)?;
            let (sum, min, max): (Option<f64>, Option<f64>, Option<f64>) =
                (row.try_get(5)?, row.try_get(6)?, row.try_get(7)?);
            let aggregate = aggregates.entry(key).or_default();
            aggregate.scores += scores;
            aggregate.sum += sum.unwrap_or_default();
            aggregate.min = [aggregate.min, min].into_iter().flatten().reduce(f64::min);
            aggregate.max = [aggregate.max, max].into_iter().flatten().reduce(f64::max);
            if !label.is_empty() {
                *aggregate.categories.entry(label).or_default() += scores;
            }
        }
        Ok::<_, sqlx::Error>(aggregates)
    }
    .await)?;
    let offset = args.integer("offset").max(0) as usize;
    let limit = args.integer("limit").max(1) as usize;
    let rows = aggregates
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|((name, kind, key), aggregate)| row(group, name, &kind, key, aggregate))
        .collect();
    Ok(Fetched { rows, truncated: false, bytes: 0 })
}

fn number(value: Option<f64>) -> Json {
    value
        .map(|v| (v * 10_000.0).round() / 10_000.0)
        .and_then(serde_json::Number::from_f64)
        .map_or(Json::Null, Json::Number)
}

/// An aggregate's row: the group's field set (the others null), then the figures.
fn row(group: Option<&(&str, &str, &str)>, name: String, kind: &str, key: String, a: Aggregate) -> Map<String, Json> {
    let mut row = Map::new();
    row.insert("name".to_owned(), Json::String(name));
    row.insert("kind".to_owned(), Json::String(kind.to_owned()));
    for (group_name, field, _) in GROUPS {
        let value = match group {
            Some((g, ..)) if g == group_name => match *group_name {
                "day" => Json::String(key.parse::<i64>().map(|d| utc_day(d * 86_400_000_000_000)).unwrap_or_default()),
                "hour" => Json::String(key.parse::<i64>().map(|h| utc_hour(h * 3_600_000_000_000)).unwrap_or_default()),
                _ => Json::String(key.clone()),
            },
            _ => Json::Null,
        };
        row.insert((*field).to_owned(), value);
    }
    let numeric = kind != "categorical";
    row.insert("scores".to_owned(), a.scores.into());
    row.insert("mean".to_owned(), number(numeric.then(|| a.sum / a.scores.max(1) as f64)));
    row.insert("min".to_owned(), number(a.min.filter(|_| numeric)));
    row.insert("max".to_owned(), number(a.max.filter(|_| numeric)));
    row.insert("true_count".to_owned(), if kind == "boolean" { (a.sum.round() as i64).into() } else { Json::Null });
    row.insert(
        "categories".to_owned(),
        if kind == "numeric" || a.categories.is_empty() {
            Json::Null
        } else {
            Json::Object(a.categories.into_iter().map(|(label, n)| (label, n.into())).collect())
        },
    );
    row
}

/// The `score_list` shape's post step: `value` as the score's kind shows it (a number,
/// true/false or the category), from the hidden `_kind` and `_label`.
pub fn list_row(row: &mut Map<String, Json>, _: &Args, _: i64) {
    let kind = row.remove("_kind").and_then(|k| k.as_str().map(str::to_owned)).unwrap_or_default();
    let label = row.remove("_label").and_then(|l| l.as_str().map(str::to_owned)).unwrap_or_default();
    let value = row.get("value").and_then(Json::as_f64);
    row.insert("value".to_owned(), value_json(&kind, value, &label));
}

/// A `score` filter: a name, and what its scores must be.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// Any score of that name.
    Any,
    /// A category (or `true`/`false`) equal to this.
    Label(String),
    /// A number compared: the SQL operator and the bound.
    Compare(&'static str, f64),
}

/// `name`, `name=label`, or `name` then `<`, `<=`, `>` or `>=` and a number.
pub fn parse_filter(filter: &str) -> std::result::Result<(String, Test), String> {
    for op in ["<=", ">=", "<", ">", "="] {
        if let Some((name, rest)) = filter.split_once(op) {
            let name = name.trim();
            if name.is_empty() {
                return Err("name a score before the comparison (`helpfulness>=0.5`)".to_owned());
            }
            if op == "=" {
                return Ok((name.to_owned(), Test::Label(rest.trim().to_owned())));
            }
            let bound: f64 = rest
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| format!("{op} needs a number after it, not {:?}", rest.trim()))?;
            return Ok((name.to_owned(), Test::Compare(op, bound)));
        }
    }
    let name = filter.trim();
    if name.is_empty() {
        return Err("name a score".to_owned());
    }
    Ok((name.to_owned(), Test::Any))
}

/// [`parse_filter`] as an argument check.
pub fn check_filter(filter: &str) -> std::result::Result<(), String> {
    parse_filter(filter).map(|_| ())
}

/// The condition of a `score` filter on the rows' `column` (`trace_id` or `session_id`):
/// the row has a score of that name passing the test.
pub(super) fn condition(column: &str, filter: &str, sql: &mut Sql) -> Option<String> {
    let (name, test) = parse_filter(filter).ok()?;
    let name = sql.bind(Bind::Text(name));
    let test = match test {
        Test::Any => String::new(),
        Test::Label(label) => format!(" AND label = {}", sql.bind(Bind::Text(label))),
        Test::Compare(op, bound) => format!(" AND value {op} {}", sql.bind(Bind::Float(bound))),
    };
    Some(format!("{column} IN (SELECT {column} FROM scores WHERE name = {name}{test} AND {column} <> '')"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_name_a_score_and_what_it_must_be() {
        assert_eq!(parse_filter("helpful"), Ok(("helpful".to_owned(), Test::Any)));
        assert_eq!(parse_filter("tone=friendly"), Ok(("tone".to_owned(), Test::Label("friendly".to_owned()))));
        assert_eq!(parse_filter("quality >= 0.5"), Ok(("quality".to_owned(), Test::Compare(">=", 0.5))));
        assert_eq!(parse_filter("quality<1"), Ok(("quality".to_owned(), Test::Compare("<", 1.0))));
        assert!(parse_filter("quality<high").is_err());
        assert!(parse_filter(">=1").is_err());
        assert!(parse_filter(" ").is_err());
    }
}
