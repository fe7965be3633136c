//! Custom runs and their events (`/api/v1/runs...`), in ClawMetry's field names.

use roost_proto::{
    ApiError,
    json::value::{map_to_struct, to_json},
    v1::{AddRunEventsRequest, AddRunEventsResponse, CreateRunRequest, EndRunResponse, Run, RunEvent},
};
use serde_json::Value as Json;

use super::{
    Telemetry,
    rows::{Batch, EventRow, RunEnd, RunRow},
};
use crate::{
    Result,
    billing::prices::PriceBook,
    ids::new_id,
    store::on_reader,
    time::{now_ms, timestamp_ms},
};

/// Most events in one request.
pub const MAX_EVENTS: usize = 1000;
/// Longest id, runtime, type, name or role.
const MAX_NAME_BYTES: usize = 256;
/// Statuses a run can end with.
const END_STATUSES: &[&str] = &["completed", "failed", "cancelled"];

/// A run as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RunRecord {
    id: String,
    runtime: String,
    session_id: String,
    agent_id: String,
    metadata: String,
    status: String,
    started_ns: i64,
    ended_ns: Option<i64>,
    events: i64,
    input_tokens: i64,
    output_tokens: i64,
    cost_nanocents: i64,
}

impl From<RunRecord> for Run {
    fn from(r: RunRecord) -> Self {
        let metadata = serde_json::from_str::<Json>(&r.metadata).ok();
        Run {
            id: r.id,
            runtime: r.runtime,
            session_id: r.session_id,
            agent_id: r.agent_id,
            metadata: metadata.as_ref().and_then(Json::as_object).map(map_to_struct),
            status: r.status,
            started_at: Some(timestamp_ms(r.started_ns / 1_000_000)),
            ended_at: r.ended_ns.map(|ns| timestamp_ms(ns / 1_000_000)),
            events: r.events,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cost_usd: nanocents_to_usd(r.cost_nanocents),
        }
    }
}

/// Nanocents as US dollars.
pub fn nanocents_to_usd(nanocents: i64) -> f64 {
    nanocents as f64 / 1e11
}

fn name(field: &str, value: &str) -> Result<(), ApiError> {
    if value.len() > MAX_NAME_BYTES {
        return Err(ApiError::invalid_argument(format!("{field} is longer than {MAX_NAME_BYTES} bytes")));
    }
    Ok(())
}

/// Parses an event time: empty is now; RFC 3339; or a Unix time number in seconds,
/// milliseconds, microseconds or nanoseconds (told apart by magnitude).
pub fn parse_ts(ts: &str, now_ns: i64) -> Result<i64, ApiError> {
    let ts = ts.trim();
    if ts.is_empty() {
        return Ok(now_ns);
    }
    if let Ok(int) = ts.parse::<i64>() {
        if int < 0 {
            return Err(ApiError::invalid_argument(format!("bad ts {ts:?}")));
        }
        return Ok(match int {
            n if n >= 100_000_000_000_000_000 => n,
            n if n >= 100_000_000_000_000 => n.saturating_mul(1_000),
            n if n >= 100_000_000_000 => n.saturating_mul(1_000_000),
            n => n.saturating_mul(1_000_000_000),
        });
    }
    if let Ok(number) = ts.parse::<f64>() {
        if !number.is_finite() || number < 0.0 {
            return Err(ApiError::invalid_argument(format!("bad ts {ts:?}")));
        }
        let ns = match number {
            n if n >= 1e17 => n,
            n if n >= 1e14 => n * 1e3,
            n if n >= 1e11 => n * 1e6,
            n => n * 1e9,
        };
        return Ok(ns.min(i64::MAX as f64) as i64);
    }
    let parsed: prost_types::Timestamp =
        ts.parse().map_err(|_| ApiError::invalid_argument(format!("bad ts {ts:?}: use RFC 3339 or Unix time")))?;
    Ok(parsed.seconds.saturating_mul(1_000_000_000).saturating_add(i64::from(parsed.nanos)))
}

/// A run as its node stored it (the outbox form): the row it becomes.
pub fn run_row(run: &Run) -> RunRow {
    RunRow {
        id: run.id.clone(),
        runtime: run.runtime.clone(),
        session_id: run.session_id.clone(),
        agent_id: run.agent_id.clone(),
        metadata: run
            .metadata
            .as_ref()
            .map_or_else(|| "{}".to_owned(), |m| Json::Object(roost_proto::json::value::struct_to_map(m)).to_string()),
        started_ns: run.started_at.as_ref().map_or(0, timestamp_ns),
    }
}

/// Events as their node stored them (ids, times, sessions and agents filled in): the rows
/// they become, priced with `prices`. A node checked their times; one out of range (from a
/// node that did not) is dropped, not stored for ever as the year 2262.
pub fn event_rows(req: &AddRunEventsRequest, prices: &PriceBook) -> Vec<EventRow> {
    let now_ns = crate::time::now_ms().saturating_mul(1_000_000);
    req.events
        .iter()
        .filter_map(|e| {
            let ts_ns = e.ts.parse().unwrap_or_default();
            let kept = super::limits::time_in_range(ts_ns, now_ns);
            if !kept {
                tracing::warn!(run = %req.run_id, event = %e.id, ts = %e.ts, "pushed event out of time range dropped");
            }
            kept.then_some((e, ts_ns))
        })
        .map(|(e, ts_ns)| EventRow {
            run_id: req.run_id.clone(),
            id: e.id.clone(),
            ts_ns,
            event_type: e.event_type.clone(),
            session_id: e.session_id.clone(),
            agent_id: e.agent_id.clone(),
            tool_name: e.tool_name.clone(),
            model: e.model.clone(),
            role: e.role.clone(),
            input_tokens: e.input_tokens,
            output_tokens: e.output_tokens,
            cost_nanocents: if e.model.is_empty() {
                0
            } else {
                prices.lookup(&e.model).map_or(0, |p| e.input_tokens * p.input + e.output_tokens * p.output)
            },
            data: e.data.as_ref().map_or_else(|| "null".to_owned(), |d| to_json(d).to_string()),
            agent_instance: String::new(),
        })
        .collect()
}

/// A run's end as its node stored it: the update it becomes.
pub fn run_end(end: &EndRunResponse) -> RunEnd {
    RunEnd {
        run_id: end.run_id.clone(),
        status: end.status.clone(),
        ended_ns: end.ended_at.as_ref().map_or(0, timestamp_ns),
    }
}

fn timestamp_ns(ts: &prost_types::Timestamp) -> i64 {
    ts.seconds.saturating_mul(1_000_000_000).saturating_add(i64::from(ts.nanos))
}

impl Telemetry {
    /// Starts a run; its id.
    pub async fn create_run(&self, req: CreateRunRequest) -> Result<String> {
        if req.runtime.trim().is_empty() {
            return Err(ApiError::invalid_argument("runtime is required").into());
        }
        name("runtime", &req.runtime)?;
        name("session_id", &req.session_id)?;
        name("agent_id", &req.agent_id)?;
        let id = new_id("run");
        let run = Run {
            session_id: if req.session_id.is_empty() { id.clone() } else { req.session_id },
            id: id.clone(),
            runtime: req.runtime,
            agent_id: req.agent_id,
            metadata: req.metadata,
            status: "running".to_owned(),
            started_at: Some(timestamp_ms(now_ms())),
            ..Run::default()
        };
        self.ingest(Batch { runs: vec![run_row(&run)], ..Batch::default() }, "run", &run).await?;
        Ok(id)
    }

    /// Adds events to a run; idempotent on event ids.
    pub async fn add_events(&self, mut req: AddRunEventsRequest) -> Result<AddRunEventsResponse> {
        let events: Vec<RunEvent> = match (req.event.take(), std::mem::take(&mut req.events)) {
            (Some(_), list) if !list.is_empty() => {
                return Err(ApiError::invalid_argument("send either `event` or `events`, not both").into());
            }
            (Some(event), _) => vec![event],
            (None, list) if list.is_empty() => {
                return Err(ApiError::invalid_argument("no events: send `event` or `events`").into());
            }
            (None, list) => list,
        };
        if events.len() > MAX_EVENTS {
            return Err(ApiError::invalid_argument(format!(
                "{} events in one request; the limit is {MAX_EVENTS}",
                events.len()
            ))
            .into());
        }
        let run = self.run(&req.run_id).await?;
        let now_ns = now_ms() * 1_000_000;
        req.events = events.into_iter().map(|e| normalize(e, &run, now_ns)).collect::<Result<_, ApiError>>()?;
        let rows = event_rows(&req, &self.prices);
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let written = self.ingest(Batch { events: rows, ..Batch::default() }, "run_events", &req).await?;
        let duplicates = written.new_events.iter().filter(|new| !**new).count();
        Ok(AddRunEventsResponse { ok: true, accepted: ids.len() as i32, ids, duplicates: duplicates as i32 })
    }

    /// Ends a run (again: no change); its state afterwards.
    pub async fn end_run(&self, req: roost_proto::v1::EndRunRequest) -> Result<EndRunResponse> {
        let status = if req.status.is_empty() { "completed" } else { req.status.as_str() };
        if !END_STATUSES.contains(&status) {
            return Err(ApiError::invalid_argument(format!("status must be one of {}", END_STATUSES.join(", "))).into());
        }
        let run = self.run(&req.run_id).await?;
        if run.ended_ns.is_none() {
            let end = EndRunResponse {
                ok: true,
                run_id: run.id.clone(),
                status: status.to_owned(),
                ended_at: Some(timestamp_ms(now_ms())),
            };
            self.ingest(Batch { run_ends: vec![run_end(&end)], ..Batch::default() }, "run_end", &end).await?;
        }
        let run = self.run(&req.run_id).await?;
        Ok(EndRunResponse {
            ok: true,
            run_id: run.id,
            status: run.status,
            ended_at: run.ended_ns.map(|ns| timestamp_ms(ns / 1_000_000)),
        })
    }

    /// A run; 404 when there is none.
    pub async fn run(&self, run_id: &str) -> Result<RunRecord> {
        if run_id.trim().is_empty() {
            return Err(ApiError::invalid_argument("run_id is required").into());
        }
        let run: Option<RunRecord> = on_reader!(self.store, |pool| {
            sqlx::query_as(
                "SELECT id, runtime, session_id, agent_id, metadata, status, started_ns, ended_ns, events, \
                 input_tokens, output_tokens, cost_nanocents FROM runs WHERE id = $1",
            )
            .bind(run_id)
            .fetch_optional(pool)
            .await
        })?;
        run.ok_or_else(|| ApiError::not_found(format!("no run {run_id}")).into())
    }
}

/// An event with everything defaulted filled in (id, time in ns, session, agent), checked.
fn normalize(mut e: RunEvent, run: &RunRecord, now_ns: i64) -> Result<RunEvent, ApiError> {
    for (field, value) in [
        ("id", &e.id),
        ("event_type", &e.event_type),
        ("session_id", &e.session_id),
        ("agent_id", &e.agent_id),
        ("tool_name", &e.tool_name),
        ("model", &e.model),
        ("role", &e.role),
    ] {
        name(field, value)?;
    }
    if e.input_tokens < 0 || e.output_tokens < 0 {
        return Err(ApiError::invalid_argument("token counts cannot be negative"));
    }
    let ts = parse_ts(&e.ts, now_ns)?;
    if !super::limits::time_in_range(ts, now_ns) {
        return Err(ApiError::invalid_argument(format!(
            "ts {:?} is before 1970 or more than a day ahead of roost's clock",
            e.ts.trim()
        )));
    }
    e.ts = ts.to_string();
    if e.id.is_empty() {
        e.id = new_id("evt");
    }
    if e.session_id.is_empty() {
        e.session_id.clone_from(&run.session_id);
    }
    if e.agent_id.is_empty() {
        e.agent_id.clone_from(&run.agent_id);
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_in_every_form() {
        let now = 42;
        assert_eq!(parse_ts("", now).unwrap(), 42);
        assert_eq!(parse_ts("1700000000", now).unwrap(), 1_700_000_000_000_000_000);
        assert_eq!(parse_ts("1700000000.5", now).unwrap(), 1_700_000_000_500_000_000);
        assert_eq!(parse_ts("1700000000123", now).unwrap(), 1_700_000_000_123_000_000);
        assert_eq!(parse_ts("1700000000123456", now).unwrap(), 1_700_000_000_123_456_000);
        assert_eq!(parse_ts("1700000000123456789", now).unwrap(), 1_700_000_000_123_456_789);
        assert_eq!(parse_ts("2023-11-14T22:13:20Z", now).unwrap(), 1_700_000_000_000_000_000);
        assert!(parse_ts("yesterday", now).is_err());
        assert!(parse_ts("-5", now).is_err());
        assert_eq!(parse_ts("1969-12-31T23:59:59Z", now).unwrap(), -1_000_000_000, "refused by the range check");
    }

    #[test]
    fn times_out_of_range_are_refused() {
        let now = 1_700_000_000_000_000_000;
        for bad in ["1e30", "9223372036854775807", "9999-01-01T00:00:00Z", "1969-12-31T23:59:59Z"] {
            let ts = parse_ts(bad, now).unwrap();
            assert!(!crate::telemetry::limits::time_in_range(ts, now), "{bad}");
        }
        assert!(crate::telemetry::limits::time_in_range(now + 3_600_000_000_000, now), "an hour ahead is a clock");
        assert!(crate::telemetry::limits::time_in_range(0, now));
    }
}
