//! The usage page: tokens and cost per day and per model, period totals, the costliest
//! sessions; all from the summaries ingest maintains ([`USAGE_WITH_METRICS`]: the calls,
//! plus metric-only usage; `sessions`).

use roost_proto::v1::{GetUsageResponse, SessionCost, UsageRow};

use crate::{
    Result,
    store::{Store, on_reader},
    telemetry::{runs::nanocents_to_usd, summaries::USAGE_WITH_METRICS},
    time::{now_ms, timestamp_ns, utc_day},
};

/// Sessions listed as the costliest.
const TOP_SESSIONS: i64 = 10;

/// A `usage_daily` row: day, model, calls, input, output, cost, cache reads, cache
/// writes, unpriced calls.
type Row = (String, String, i64, i64, i64, i64, i64, i64, i64);

fn usage(row: &Row) -> UsageRow {
    UsageRow {
        day: row.0.clone(),
        model: row.1.clone(),
        calls: row.2,
        input_tokens: row.3,
        output_tokens: row.4,
        cost_usd: nanocents_to_usd(row.5),
        cache_read_tokens: row.6,
        cache_write_tokens: row.7,
        unpriced_calls: row.8,
    }
}

/// Adds a row's counts into `sum`.
fn add(sum: &mut UsageRow, row: &Row) {
    sum.calls += row.2;
    sum.input_tokens += row.3;
    sum.output_tokens += row.4;
    sum.cost_usd += nanocents_to_usd(row.5);
    sum.cache_read_tokens += row.6;
    sum.cache_write_tokens += row.7;
    sum.unpriced_calls += row.8;
}

/// Sums rows whose day is `since` or later.
fn total(rows: &[Row], since: &str) -> UsageRow {
    let mut sum = UsageRow::default();
    for row in rows.iter().filter(|r| r.0.as_str() >= since) {
        add(&mut sum, row);
    }
    sum
}

/// The usage page for the last `days` days (today included).
pub async fn usage_page(store: &Store, days: i64) -> Result<GetUsageResponse> {
    let now_ns = now_ms() * 1_000_000;
    let day_ns = 86_400_000_000_000;
    let since_day = |n: i64| utc_day(now_ns - (n - 1) * day_ns);
    // Per day and model over the longer of the period and a month (for the totals).
    let first = since_day(days.max(30));
    let sql = format!(
        "SELECT day, model, calls, input_tokens, output_tokens, cost_nanocents, cache_read_tokens, \
         cache_write_tokens, unpriced_calls FROM {USAGE_WITH_METRICS} WHERE day >= $1 ORDER BY day, model"
    );
    let (rows, sessions) = on_reader!(store, |pool| {
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str())).bind(&first).fetch_all(pool).await?;
        let sessions: Vec<(String, String, i64, i64, i64, i64, String)> = sqlx::query_as(
            "SELECT session_id, agent_id, input_tokens, output_tokens, cost_nanocents, last_ns, \
             COALESCE((SELECT i.name FROM instances i WHERE i.id = sessions.agent_id), '') FROM sessions \
             WHERE last_ns >= $1 AND cost_nanocents > 0 ORDER BY cost_nanocents DESC LIMIT $2",
        )
        .bind(now_ns - (days - 1) * day_ns - now_ns.rem_euclid(day_ns))
        .bind(TOP_SESSIONS)
        .fetch_all(pool)
        .await?;
        Ok::<_, sqlx::Error>((rows, sessions))
    })?;

    let period = since_day(days);
    let in_period: Vec<&Row> = rows.iter().filter(|r| r.0 >= period).collect();
    let mut days_out: Vec<UsageRow> = Vec::new();
    for row in &in_period {
        match days_out.last_mut() {
            Some(last) if last.day == row.0 => add(last, row),
            _ => days_out.push(UsageRow { model: String::new(), ..usage(row) }),
        }
    }
    let mut models: Vec<UsageRow> = Vec::new();
    for row in &in_period {
        match models.iter_mut().find(|m| m.model == row.1) {
            Some(m) => add(m, row),
            None => models.push(UsageRow { day: String::new(), ..usage(row) }),
        }
    }
    models.sort_by(|a, b| b.cost_usd.total_cmp(&a.cost_usd).then_with(|| a.model.cmp(&b.model)));
    Ok(GetUsageResponse {
        days: days_out,
        models,
        today: Some(total(&rows, &since_day(1))),
        week: Some(total(&rows, &since_day(7))),
        month: Some(total(&rows, &since_day(30))),
        top_sessions: sessions
            .into_iter()
            .map(|(session_id, agent_id, input_tokens, output_tokens, cost, last_ns, agent_name)| SessionCost {
                session_id,
                agent_id,
                agent_name,
                input_tokens,
                output_tokens,
                cost_usd: nanocents_to_usd(cost),
                last_seen: Some(timestamp_ns(last_ns)),
            })
            .collect(),
        warning: String::new(),
    })
}
