//! Live streams across replicas (docs/architecture.md#replicas): what one replica ingests reaches
//! the brain and log streams of every replica on the same PostgreSQL.
//!
//! The transaction that stores rows also sends `NOTIFY roost_live` with their ids (spans,
//! logs, events), as id ranges in a small JSON [`Notice`]. PostgreSQL delivers a
//! notification only once its transaction commits, and in commit order, so a listener
//! never hears of a row it cannot read yet, and hears of each source's rows in the order
//! they were stored. Each replica's listener ([`crate::cluster::notices`]) hands the
//! notices of *other* replicas to its [`Fanout`], which reads those rows back from the
//! store and publishes them into the local hubs. Its own rows it published already, right
//! after its commit, as on SQLite, so the local path costs no read-back and no extra
//! latency.
//!
//! **After the listening connection was lost,** notifications sent meanwhile are gone. The
//! fanout then re-reads every row past the highest id it has heard of (the newest
//! [`CATCH_UP_ROWS`] of each kind), leaving out rows this replica wrote itself (it keeps
//! their recent ids: [`OwnIds`]) and skipping them when their notification arrives after
//! all. A row whose id is below that mark but whose transaction committed during the gap
//! (ids are handed out before commit) is not re-read: a stream is for watching; the store
//! and `q/1` hold everything.
//!
//! **Nobody watching, nothing read.** A replica reads rows back for a stream only while it
//! has a client on it, or had one less than [`WATCH_WINDOW`] ago (a client that reconnects
//! resumes from the buffer). A cluster busy with turns and ingest but with nobody on the
//! live page costs each replica no reads of the others' rows.
//!
//! SQLite is one process: nothing is sent and nothing listens.

use std::{collections::HashSet, sync::Arc, time::Duration};

use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Row as _, postgres::PgRow};
use tracing::warn;

use super::{
    Live,
    id_ranges::{OwnIds, Range, ranges},
};
use crate::{
    Result,
    telemetry::{
        announce::{AnnounceTx, LiveIds},
        packed_attributes,
        rows::{EventRow, GenAi, LogRow, SpanRow},
    },
};

/// The channel stored rows are announced on.
pub const CHANNEL: &str = "roost_live";
/// Rows of each kind re-read after the listener reconnects.
pub const CATCH_UP_ROWS: i64 = 4096;
/// Largest notice payload sent (PostgreSQL refuses payloads of 8,000 bytes or more).
const MAX_PAYLOAD: usize = 7_000;
/// How long after its last client left a stream still gets other replicas' rows.
pub const WATCH_WINDOW: Duration = Duration::from_secs(60);

/// What a `roost_live` notification carries: who sent it and the id ranges per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// The sending replica's [`Live::origin`].
    #[serde(rename = "o")]
    pub origin: String,
    /// Span id ranges.
    #[serde(rename = "s", default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<Range>,
    /// Log id ranges.
    #[serde(rename = "l", default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<Range>,
    /// Event seq ranges.
    #[serde(rename = "e", default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Range>,
}

/// The payloads announcing `written` (one transaction's ids), each under the size
/// PostgreSQL takes; none when nothing was stored.
pub fn payloads<'a>(origin: &str, written: impl IntoIterator<Item = &'a LiveIds>) -> Vec<String> {
    let mut spans = Vec::new();
    let mut logs = Vec::new();
    let mut events = Vec::new();
    for ids in written {
        spans.extend_from_slice(&ids.spans);
        logs.extend_from_slice(&ids.logs);
        events.extend_from_slice(&ids.events);
    }
    let all = Notice { origin: origin.to_owned(), spans: ranges(spans), logs: ranges(logs), events: ranges(events) };
    if all.spans.is_empty() && all.logs.is_empty() && all.events.is_empty() {
        return Vec::new();
    }
    // A range is at most ~43 characters: a notice of this many ranges stays under the cap.
    let per_notice = (MAX_PAYLOAD - 64 - origin.len()) / 44;
    let kinds = [(0, &all.spans), (1, &all.logs), (2, &all.events)];
    let mut out = Vec::new();
    let mut notice = Notice { origin: all.origin.clone(), ..Notice::default() };
    let mut count = 0;
    for (kind, list) in kinds {
        for range in list {
            if count == per_notice {
                out.push(serde_json::to_string(&notice).unwrap_or_default());
                notice = Notice { origin: all.origin.clone(), ..Notice::default() };
                count = 0;
            }
            match kind {
                0 => notice.spans.push(*range),
                1 => notice.logs.push(*range),
                _ => notice.events.push(*range),
            }
            count += 1;
        }
    }
    out.push(serde_json::to_string(&notice).unwrap_or_default());
    out
}

// The telemetry writer announces what it stored through `AnnounceTx`, defined in telemetry
// (below the streams, which it must not name): the notices are this module's, so the
// implementations are here.
impl AnnounceTx for sqlx::SqliteConnection {
    const FANS_OUT: bool = false;
    async fn announce<'a>(&mut self, _origin: &str, _written: impl IntoIterator<Item = &'a LiveIds>) -> Result<()> {
        Ok(())
    }
}

impl AnnounceTx for sqlx::PgConnection {
    const FANS_OUT: bool = true;
    async fn announce<'a>(&mut self, origin: &str, written: impl IntoIterator<Item = &'a LiveIds>) -> Result<()> {
        for payload in payloads(origin, written) {
            sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(payload).execute(&mut *self).await?;
        }
        Ok(())
    }
}

/// The highest id heard of, per kind.
#[derive(Debug, Clone, Copy, Default)]
struct Marks {
    spans: i64,
    logs: i64,
    events: i64,
}

impl Marks {
    fn raise(&mut self, notice: &Notice) {
        let top = |list: &[Range]| list.iter().map(|r| r[1]).max().unwrap_or(0);
        self.spans = self.spans.max(top(&notice.spans));
        self.logs = self.logs.max(top(&notice.logs));
        self.events = self.events.max(top(&notice.events));
    }
}

/// Publishes other replicas' rows into this replica's hubs.
pub struct Fanout {
    pool: PgPool,
    live: Arc<Live>,
    marks: Marks,
    /// Ids the last catch-up published, so their late notices do not publish them again.
    caught: [HashSet<i64>; 3],
}

impl Fanout {
    /// Starts from the newest rows stored now: what is already there is history, not live.
    pub async fn start(pool: PgPool, live: Arc<Live>) -> Result<Self> {
        let marks = newest(&pool).await?;
        Ok(Self { pool, live, marks, caught: Default::default() })
    }

    /// A `roost_live` payload: another replica's rows are read and published; this
    /// replica's only move the marks.
    pub async fn heard(&mut self, payload: &str) {
        let notice: Notice = match serde_json::from_str(payload) {
            Ok(notice) => notice,
            Err(err) => {
                warn!(error = %err, "ignoring a roost_live notification that is not a notice");
                return;
            }
        };
        self.marks.raise(&notice);
        if notice.origin == self.live.origin {
            return;
        }
        if let Err(err) = self.publish(&notice).await {
            warn!(error = %err, "could not read back rows another replica stored; its live items are skipped");
        }
    }

    async fn publish(&mut self, notice: &Notice) -> Result<()> {
        let brain = self.live.brain.watched_within(WATCH_WINDOW);
        let logs = self.live.logs.watched_within(WATCH_WINDOW);
        let mut spans = read(&self.pool, &SPANS, if brain { &notice.spans } else { &[] }).await?;
        let mut events = read(&self.pool, &EVENTS, if brain { &notice.events } else { &[] }).await?;
        let mut lines = read(&self.pool, &LOGS, if logs { &notice.logs } else { &[] }).await?;
        // Rows the last catch-up published already.
        for ((rows, kind), caught) in
            [(&mut spans, &SPANS), (&mut lines, &LOGS), (&mut events, &EVENTS)].into_iter().zip(&self.caught)
        {
            rows.retain(|r| !caught.contains(&kind.id(r)));
        }
        self.show(&spans, &events, &lines);
        Ok(())
    }

    /// After the listener reconnected: publishes the rows past the marks that other
    /// replicas stored while nobody listened.
    pub async fn catch_up(&mut self) -> Result<()> {
        if !self.live.brain.watched_within(WATCH_WINDOW) && !self.live.logs.watched_within(WATCH_WINDOW) {
            self.marks = newest(&self.pool).await?;
            return Ok(());
        }
        let mut spans = read_newest(&self.pool, &SPANS, self.marks.spans).await?;
        let mut logs = read_newest(&self.pool, &LOGS, self.marks.logs).await?;
        let mut events = read_newest(&self.pool, &EVENTS, self.marks.events).await?;
        let top = |rows: &[PgRow], kind: &Kind, mark: i64| rows.iter().map(|r| kind.id(r)).max().unwrap_or(mark);
        self.marks = Marks {
            spans: top(&spans, &SPANS, self.marks.spans),
            logs: top(&logs, &LOGS, self.marks.logs),
            events: top(&events, &EVENTS, self.marks.events),
        };
        {
            let own = self.live.own.lock().unwrap_or_else(|p| p.into_inner());
            for (rows, kind, own) in
                [(&mut spans, &SPANS, &own.spans), (&mut logs, &LOGS, &own.logs), (&mut events, &EVENTS, &own.events)]
            {
                rows.retain(|r| !OwnIds::holds(own, kind.id(r)));
            }
        }
        let ids = |rows: &[PgRow], kind: &Kind| rows.iter().map(|r| kind.id(r)).collect::<HashSet<i64>>();
        self.caught = [ids(&spans, &SPANS), ids(&logs, &LOGS), ids(&events, &EVENTS)];
        self.show(&spans, &events, &logs);
        Ok(())
    }

    /// Publishes rows read back: spans and events on the brain stream, logs on the log
    /// stream.
    fn show(&self, spans: &[PgRow], events: &[PgRow], logs: &[PgRow]) {
        let activity: Vec<_> = spans.iter().map(span_item).chain(events.iter().map(event_item)).collect();
        if !activity.is_empty() {
            self.live.brain.publish_all(activity);
        }
        if !logs.is_empty() {
            self.live.logs.publish_all(logs.iter().map(log_item));
        }
    }
}

/// The newest ids stored now.
async fn newest(pool: &PgPool) -> Result<Marks> {
    let (spans, logs, events): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COALESCE(MAX(id), 0) FROM spans), (SELECT COALESCE(MAX(id), 0) FROM logs), \
         (SELECT COALESCE(MAX(seq), 0) FROM events)",
    )
    .fetch_one(pool)
    .await?;
    Ok(Marks { spans, logs, events })
}

/// A kind of row read back: the columns its stream shows, and its id column.
struct Kind {
    select: &'static str,
    key: &'static str,
}

impl Kind {
    fn id(&self, row: &PgRow) -> i64 {
        row.get(self.key)
    }
}

const SPANS: Kind = Kind {
    select: "SELECT id, trace_id, span_id, name, start_ns, status_code, status_message, service, session_id, agent_id, \
             request_model, response_model, input_tokens, output_tokens, cost_nanocents, attributes, packed_attributes FROM spans",
    key: "id",
};
const LOGS: Kind =
    Kind { select: "SELECT id, time_ns, severity_number, body, service, session_id, trace_id FROM logs", key: "id" };
const EVENTS: Kind = Kind {
    select: "SELECT seq, run_id, id, ts_ns, event_type, session_id, agent_id, tool_name, model, role, \
             input_tokens, output_tokens, cost_nanocents, data FROM events",
    key: "seq",
};

/// The rows of `kind` whose id is in `ranges`, in id order (none for no ranges).
async fn read(pool: &PgPool, kind: &Kind, ranges: &[Range]) -> Result<Vec<PgRow>> {
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let Kind { select, key } = kind;
    let (lo, hi): (Vec<i64>, Vec<i64>) = ranges.iter().map(|r| (r[0], r[1])).unzip();
    // A join, so each range is one index range scan (the ranges never overlap).
    let sql = format!(
        "{select} JOIN unnest($1::bigint[], $2::bigint[]) AS r(lo, hi) ON {key} BETWEEN r.lo AND r.hi ORDER BY {key}"
    );
    // Built from this module's constants only.
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(lo).bind(hi).fetch_all(pool).await?)
}

/// The newest [`CATCH_UP_ROWS`] rows of `kind` past `mark`, in id order.
async fn read_newest(pool: &PgPool, kind: &Kind, mark: i64) -> Result<Vec<PgRow>> {
    let Kind { select, key } = kind;
    let sql =
        format!("SELECT * FROM ({select} WHERE {key} > $1 ORDER BY {key} DESC LIMIT $2) AS newest ORDER BY {key}");
    // Built from this module's constants only.
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(mark).bind(CATCH_UP_ROWS).fetch_all(pool).await?)
}

fn span_item(row: &PgRow) -> roost_proto::v1::BrainEvent {
    let span = SpanRow {
        trace_id: row.get("trace_id"),
        span_id: row.get("span_id"),
        name: row.get("name"),
        start_ns: row.get("start_ns"),
        status_code: row.get::<i64, _>("status_code") as i32,
        status_message: row.get("status_message"),
        attributes: packed_attributes::packed(row.get("packed_attributes"), row.get("attributes")),
        gen_ai: GenAi {
            session_id: row.get("session_id"),
            agent_id: row.get("agent_id"),
            request_model: row.get("request_model"),
            response_model: row.get("response_model"),
            input_tokens: row.get("input_tokens"),
            output_tokens: row.get("output_tokens"),
            cost_nanocents: row.get("cost_nanocents"),
            ..GenAi::default()
        },
        ..SpanRow::default()
    };
    super::live::span_event(&span, row.get("service"))
}

fn event_item(row: &PgRow) -> roost_proto::v1::BrainEvent {
    let event = EventRow {
        run_id: row.get("run_id"),
        id: row.get("id"),
        ts_ns: row.get("ts_ns"),
        event_type: row.get("event_type"),
        session_id: row.get("session_id"),
        agent_id: row.get("agent_id"),
        tool_name: row.get("tool_name"),
        model: row.get("model"),
        role: row.get("role"),
        input_tokens: row.get("input_tokens"),
        output_tokens: row.get("output_tokens"),
        cost_nanocents: row.get("cost_nanocents"),
        data: row.get("data"),
        agent_instance: String::new(),
    };
    super::live::run_event(&event)
}

fn log_item(row: &PgRow) -> roost_proto::v1::LogLine {
    let log = LogRow {
        time_ns: row.get("time_ns"),
        severity_number: row.get::<i64, _>("severity_number") as i32,
        body: row.get("body"),
        trace_id: row.get("trace_id"),
        gen_ai: GenAi { session_id: row.get("session_id"), ..GenAi::default() },
        ..LogRow::default()
    };
    super::live::log_line(&log, row.get("service"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_stored_sends_nothing() {
        assert!(payloads("o", [&LiveIds::default()]).is_empty());
    }

    #[test]
    fn one_transaction_is_one_small_notice() {
        let a = LiveIds { spans: (1..=1000).collect(), logs: vec![7], events: vec![] };
        let b = LiveIds { spans: (1001..=1500).collect(), logs: vec![8], events: vec![3] };
        let sent = payloads("rep_x", [&a, &b]);
        assert_eq!(sent.len(), 1);
        let notice: Notice = serde_json::from_str(&sent[0]).unwrap();
        assert_eq!(notice.origin, "rep_x");
        assert_eq!(notice.spans, vec![[1, 1500]]);
        assert_eq!(notice.logs, vec![[7, 8]]);
        assert_eq!(notice.events, vec![[3, 3]]);
    }

    #[test]
    fn scattered_ids_split_into_notices_under_the_cap() {
        // Every other id: one range each, far more than one payload holds.
        let ids = LiveIds {
            spans: (0..3000).map(|i| i64::MAX / 2 + i * 2).collect(),
            logs: (0..10).map(|i| i * 2).collect(),
            events: vec![1],
        };
        let sent = payloads("rep_x", [&ids]);
        assert!(sent.len() > 1);
        let mut back = Notice::default();
        for payload in &sent {
            assert!(payload.len() < MAX_PAYLOAD, "{} bytes", payload.len());
            let notice: Notice = serde_json::from_str(payload).unwrap();
            back.spans.extend(notice.spans);
            back.logs.extend(notice.logs);
            back.events.extend(notice.events);
        }
        assert_eq!(back.spans.len(), 3000);
        assert_eq!(back.logs.len(), 10);
        assert_eq!(back.events, vec![[1, 1]]);
    }
}
